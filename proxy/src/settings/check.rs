//! `proxy --check-config FILE`: every error of a configuration file, or one
//! line saying it is good, and the exit status to match (0 ok, 2 errors),
//! like `haproxy -c` and `nginx -t`.
//!
//! Beyond what the file says, two checks need the machine: the global
//! `maxconn` must fit the descriptor limit ([`global_maxconn`],
//! `policy/descriptors.rs`), and every backend written with a host name
//! must resolve, unless its line says to start without it (`init-addr`;
//! `resolve.rs`), with this machine's resolver, as the proxy would look it
//! up. The check judges with the limit of the process running it, as the
//! proxy would run with it (its soft limit raised to the hard one, the
//! descriptors it inherited counted); the proxy checks both again at
//! startup and on each reload, and says where each name points.

use std::io;
use std::path::Path;

use super::config::{AccessLogTarget, Config, ConfigError, Frontend};
use super::file;
use super::resolve::{self, Answers};
use crate::conn::splice::Splice;
use crate::ops::admin::AdminOptions;
use crate::ops::admin::access::read_token;
use crate::ops::admin::socket::MAX_CLIENTS;
use crate::policy::descriptors::{Budget, Maxconn, Opens};

/// Checks the file at `path`; returns the exit status.
pub fn check_config(path: &Path) -> i32 {
    let checked = file::load(path).and_then(|config| {
        let workers = config
            .global
            .workers
            .map_or_else(runtime::threads::available_cores, |n| n as usize);
        let limits = limits_when_started()
            .map_err(|e| vec![whole_file(path, format!("cannot read RLIMIT_NOFILE: {e}"))])?;
        // What this process inherited, it counts as the proxy would: run
        // from the same shell or unit, both inherit the same.
        let fixed = Fixed::of(&config, workers, open_at_startup());
        let budget = Budget::new(limits.0, limits.1, &opens(&config.frontends, fixed));
        let maxconn = budget
            .maxconn(config.global.maxconn)
            .map_err(|e| vec![whole_file(path, e.0)])?;
        let answers = resolve::at_start(&path.display().to_string(), &config)?;
        // The token file is read as a start reads it: a file a start would
        // refuse (missing, too short, readable by all) is an error here.
        if let Some(token) = &config.global.admin_token_file {
            read_token(token).map_err(|e| vec![whole_file(path, e.to_string())])?;
        }
        Ok((config, budget.describe(maxconn), answers))
    });
    match checked {
        Ok((config, budget, answers)) => {
            let n = config.frontends.len();
            println!("{}: ok ({n} frontend{})", path.display(), plural(n));
            for frontend in &config.frontends {
                println!("{}", summary(frontend));
            }
            for line in whereabouts(&config, &answers) {
                println!("{line}");
            }
            println!("{budget}");
            0
        }
        Err(errors) => {
            print_errors(&errors);
            let n = errors.len();
            eprintln!("{}: {n} error{}", path.display(), plural(n));
            2
        }
    }
}

/// The most servers a group's summary names; the rest are counted.
const SUMMARY_SERVERS: usize = 20;

/// What `--check-config` says of a good frontend: where it listens, and
/// each group's servers by name, as the access log and the metrics will
/// name them:
///
/// ```text
/// frontend pg: listens on 0.0.0.0:5432; group pg (roundrobin): db1 (10.0.0.1:5432), db2 (10.0.0.2:5432) backup
/// ```
pub fn summary(frontend: &Frontend) -> String {
    let listen: Vec<String> = frontend.listen.iter().map(|a| a.to_string()).collect();
    let mut line = format!(
        "frontend {}: listens on {}",
        frontend.name,
        listen.join(", ")
    );
    for g in 0..frontend.group_count() {
        let Some(group) = frontend.group(g) else {
            continue;
        };
        let servers = frontend.backends.get(group.backends).unwrap_or_default();
        let mut named: Vec<String> = servers
            .iter()
            .take(SUMMARY_SERVERS)
            .map(|b| match b.backup {
                true => format!("{} backup", b.label()),
                false => b.label(),
            })
            .collect();
        if servers.len() > SUMMARY_SERVERS {
            named.push(format!("and {} more", servers.len() - SUMMARY_SERVERS));
        }
        line.push_str(&format!(
            "; group {} ({}): {}",
            group.name,
            group.balance.name(),
            named.join(", ")
        ));
    }
    line
}

/// Where each backend written with a host name would start, one line
/// each (a group's once, however many frontends route to it):
///
/// ```text
/// backend pg/db1 (db.internal:5432): resolves to 10.0.0.7:5432
/// backend pg/db2 (db2.internal:5432): does not resolve (name or service not known): starts out of rotation until it does (init-addr none)
/// ```
pub fn whereabouts(config: &Config, answers: &Answers) -> Vec<String> {
    let mut lines = Vec::new();
    let mut said = std::collections::HashSet::new();
    for frontend in &config.frontends {
        for (index, b) in frontend.backends.iter().enumerate() {
            let Some(host) = b.addr.host() else {
                continue;
            };
            let group = frontend.group_name_of(index);
            let head = format!("backend {group}/{}", b.label());
            if !said.insert(head.clone()) {
                continue;
            }
            let start = answers.start_of(b);
            lines.push(match (answers.get(host, b.addr.port()), start) {
                (Some(Ok(_)), Some(at)) => format!("{head}: resolves to {at}"),
                (Some(Err(why)), Some(at)) => {
                    format!("{head}: does not resolve ({why}): starts at {at} (init-addr)")
                }
                (Some(Err(why)), None) => format!(
                    "{head}: does not resolve ({why}): starts out of rotation until it does \
                     (init-addr none)"
                ),
                _ => format!("{head}: not looked up"),
            });
        }
    }
    lines
}

/// An error about the file as a whole (no line).
pub fn whole_file(path: &Path, message: String) -> ConfigError {
    ConfigError {
        path: path.display().to_string(),
        line: 0,
        column: 0,
        message,
    }
}

/// The limits a proxy started now would run with: the soft limit raised to
/// the hard one, as it does at startup (`lib.rs`).
pub fn limits_when_started() -> io::Result<(u64, u64)> {
    let (_, hard) = runtime::fd_limit::nofile_limits()?;
    Ok((hard, hard))
}

/// What a running proxy's budget keeps from its start: a reload changes the
/// frontends, not these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    /// Descriptors open before the proxy opened any ([`open_at_startup`]).
    pub inherited: u64,
    /// Event-loop workers.
    pub workers: usize,
    /// The admin listener is on.
    pub admin: bool,
    /// The admin Unix socket is set.
    pub admin_socket: bool,
    /// The access log goes to a file.
    pub access_log_file: bool,
    /// A `log` line: a syslog socket.
    pub syslog: bool,
    /// An upgrade socket is set.
    pub upgrade: bool,
}

impl Fixed {
    /// What `config` (with the flags already applied) fixes at startup,
    /// with `workers` workers and `inherited` descriptors open.
    pub fn of(config: &Config, workers: usize, inherited: u64) -> Fixed {
        Fixed {
            inherited,
            workers,
            admin: config.global.admin.is_some(),
            admin_socket: config.global.admin_socket.is_some(),
            access_log_file: matches!(config.global.access_log, Some(AccessLogTarget::File(_))),
            syslog: config.global.log.is_some(),
            upgrade: config.global.upgrade_socket.is_some(),
        }
    }
}

/// How many descriptors this process has open now, from `/proc/self/fd`
/// (less the one that reads it); at least 3. Called at startup, before the
/// proxy opens any, it counts stdin, stdout, stderr and whatever the parent
/// left open (a supervisor's pipe, a shell's descriptor): they take numbers
/// under the limit like any other.
pub fn open_at_startup() -> u64 {
    let listed = std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count() as u64);
    listed.saturating_sub(1).max(3)
}

/// What `frontends` open besides their connections, with what the running
/// proxy fixed at startup.
pub fn opens(frontends: &[Frontend], fixed: Fixed) -> Opens {
    let Fixed {
        inherited,
        workers,
        admin,
        admin_socket,
        access_log_file,
        syslog,
        upgrade,
    } = fixed;
    // One socket at a time per check and per agent (a `tcp-check connect`
    // closes the check's previous connection first).
    let checks: usize = frontends
        .iter()
        .flat_map(|f| &f.backends)
        .map(|b| usize::from(b.check.is_some()) + usize::from(b.agent.is_some()))
        .sum();
    Opens {
        inherited,
        workers: workers as u64,
        listen_addresses: frontends.iter().map(|f| f.listen.len() as u64).sum(),
        checks: checks as u64,
        access_log_file,
        syslog,
        lookups: frontends
            .iter()
            .flat_map(|f| &f.backends)
            .any(|b| b.addr.host().is_some()),
        admin_connections: admin.then(|| u64::from(AdminOptions::default().max_connections)),
        admin_socket_clients: admin_socket.then_some(MAX_CLIENTS as u64),
        splice: frontends.iter().any(|f| f.splice != Splice::Off),
        upgrade,
    }
}

/// The global `maxconn` the running proxy applies to `config`, or why it
/// cannot: the budget of its frontends and `fixed` against the limits in
/// force now (at startup, and on each reload).
pub fn global_maxconn(config: &Config, fixed: Fixed) -> Result<(Budget, Maxconn), String> {
    let (soft, hard) = runtime::fd_limit::nofile_limits()
        .map_err(|e| format!("cannot read RLIMIT_NOFILE: {e}"))?;
    let opens = opens(&config.frontends, fixed);
    let budget = Budget::new(soft, hard, &opens);
    let maxconn = budget.maxconn(config.global.maxconn).map_err(|e| e.0)?;
    Ok((budget, maxconn))
}

/// Every error on stderr, one per line (`file:line:column: what`).
pub fn print_errors(errors: &[ConfigError]) {
    for e in errors {
        eprintln!("{e}");
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::cli::Settings;
    use crate::settings::config::BackendServer;
    use std::net::SocketAddr;

    #[test]
    fn the_budget_counts_frontends_checks_the_admin_and_a_log_file() {
        let mut config = Settings {
            backends: vec![SocketAddr::from(([127, 0, 0, 1], 9001)).into()],
            ..Settings::default()
        }
        .to_config();
        let budget = |config: &Config, workers: usize| {
            let fixed = Fixed::of(config, workers, 3);
            Budget::new(256, 256, &opens(&config.frontends, fixed))
        };
        let base = budget(&config, 1);
        assert_eq!(base.reserve.total(), 27);
        assert_eq!(base.largest_maxconn(), 114);

        let mut checked = BackendServer::new(SocketAddr::from(([127, 0, 0, 1], 9002)));
        checked.check = Some(crate::policy::health::Check::default());
        config.frontends[0].backends.push(checked);
        config.global.admin = Some(SocketAddr::from(([127, 0, 0, 1], 9100)));
        config.global.access_log = Some(AccessLogTarget::File("/tmp/x.log".into()));
        let more = budget(&config, 2);
        // + 2 for the second worker's loop, + 3 for its listener (twice)
        // and waiting client, + 2×(2+1) checks, + 2 log file, + 68 admin.
        assert_eq!(more.reserve.total(), 27 + 2 + 3 + 6 + 2 + 68);
        config.global.log = crate::settings::file::parse("t", "global\n log 127.0.0.1 local0\nfrontend f\n listen 127.0.0.1:1\n backend 127.0.0.1:2\n")
            .map(|c| c.global.log)
            .unwrap_or_default();
        assert!(config.global.log.is_some());
        // + 1 syslog socket.
        assert_eq!(
            budget(&config, 2).reserve.total(),
            27 + 2 + 3 + 6 + 2 + 68 + 1
        );
    }
}
