//! The proxy's command line: what the operator asked for, checked before
//! anything starts.
//!
//! ```text
//! proxy --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 --backend 127.0.0.1:9002 --mode epoll
//! proxy --config lb.conf
//! ```
//!
//! Hand-written (no clap): one table of flags (`FLAGS`), read by
//! [`flags`], then the rules that tie flags together (a flag
//! of the epoll mode given to another mode, a flag that `--config` replaces).
//! Every mistake becomes a [`UsageError`] that says what was wrong and what
//! to do; `main` prints it and exits with status 2.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::log::Level;

use super::flags::{self, Flag, Read, UsageError};
use super::words::{list, parse_duration};
use crate::conn::splice::Splice;
use crate::conn::timeouts::Timeouts;
use crate::ops::access_log::format::Format;
use crate::policy::acl::AccessList;
use crate::policy::balance::Algorithm;
use crate::settings::config::{
    self, AccessLogTarget, Address, BackendServer, Config, DEFAULT_RETRIES, Frontend, Global,
};

/// Which of the seed's milestones runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Milestone 1: one thread, blocking sockets, one connection at a time.
    Single,
    /// Milestones 2 to 4: an accept loop handing connections to a thread pool.
    Pool,
    /// Milestone 5: the async proxy on our runtime, one runtime per worker thread.
    Epoll,
    /// Milestone 5 the seed's way: one thread, level-triggered epoll, no
    /// runtime, each connection an explicit state machine written by hand.
    States,
}

impl Mode {
    /// Every mode, in milestone order.
    pub const ALL: [Mode; 4] = [Mode::Single, Mode::Pool, Mode::Epoll, Mode::States];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Pool => "pool",
            Mode::Epoll => "epoll",
            Mode::States => "states",
        }
    }

    /// What it is, in a few words, for the errors that refuse a flag.
    fn what(self) -> &'static str {
        match self {
            Mode::Single => "milestone 1",
            Mode::Pool => "milestones 2 to 4",
            Mode::Epoll => "milestone 5, on our runtime",
            Mode::States => "milestone 5 by hand: one thread, no runtime",
        }
    }
}

/// How the pool mode's workers share the round-robin counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickerKind {
    /// Milestone 4: a mutex around reading and advancing the index (the
    /// seed's fix; the list is read outside it).
    Mutex,
    /// One `fetch_add` on an atomic counter.
    Atomic,
    /// Milestone 3: an unsynchronized read-then-write (a data race, on purpose).
    #[cfg(feature = "race-demo")]
    Racy,
}

impl PickerKind {
    /// The pickers of this build.
    pub const ALL: &'static [PickerKind] = &[
        PickerKind::Mutex,
        PickerKind::Atomic,
        #[cfg(feature = "race-demo")]
        PickerKind::Racy,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PickerKind::Mutex => "mutex",
            PickerKind::Atomic => "atomic",
            #[cfg(feature = "race-demo")]
            PickerKind::Racy => "racy",
        }
    }
}

/// Everything a running proxy needs to know.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// Where connections go, in round-robin order: IP addresses, or host
    /// names the modes look up (`settings/resolve.rs`).
    pub backends: Vec<Address>,
    /// Which milestone runs.
    pub mode: Mode,
    /// Pool mode: worker threads.
    pub threads: usize,
    /// Epoll mode: runtime threads, each with its own SO_REUSEPORT listener.
    pub workers: usize,
    /// Pool mode: how the round-robin counter is shared.
    pub picker: PickerKind,
    /// Length of the kernel's queue of connections not yet accepted
    /// (capped by net.core.somaxconn).
    pub backlog: u32,
    /// The connection's timeouts: `--connect-timeout`; `--idle-timeout`,
    /// a connection with no bytes in either direction for this long is
    /// closed (HAProxy's `timeout client` and `server` both, nginx's
    /// `proxy_timeout`); `--fin-timeout`, after one side half-closed, how
    /// long the other may stay silent (HAProxy's `client-fin` and
    /// `server-fin` both), so that CLOSE_WAIT sockets cannot pile up.
    pub timeouts: Timeouts,
    /// How much to log.
    pub log_level: Level,
    /// Epoll mode: the algorithm choosing a backend (`--balance`).
    pub balance: Algorithm,
    /// Epoll mode: other backends to try after a failed connect.
    pub retries: u32,
    /// Epoll mode: the most connections open at once (`None`: no limit).
    pub maxconn: Option<u32>,
    /// Epoll mode: `--splice auto|on|off`, the relay's splice path.
    pub splice: Splice,
    /// `--config FILE`: frontends, backends and their options come from FILE
    /// instead of the flags above.
    pub config: Option<PathBuf>,
    /// Whether `--workers` was given (it then overrides the file's `workers`).
    pub workers_given: bool,
    /// `--grace DUR`: on SIGTERM, how long open connections may take to
    /// finish (overrides the file's `grace`; default 30s).
    pub grace: Option<Duration>,
    /// `--access-log stderr|off|PATH` (overrides the file's `access-log`).
    pub access_log: Option<AccessLogTarget>,
    /// `--log-format tcplog|json` (overrides the file's `log-format`).
    pub log_format: Option<Format>,
    /// `--admin ADDR`: the metrics endpoint (overrides the file's `admin`).
    pub admin: Option<SocketAddr>,
    /// `--admin-request-timeout DUR`: how long an admin client has to send
    /// its request head (overrides the file's `timeout admin-request`).
    pub admin_request_timeout: Option<Duration>,
    /// `--upgrade-socket PATH`: offer the listeners there (overrides the
    /// file's `upgrade-socket`).
    pub upgrade_socket: Option<PathBuf>,
    /// `--upgrade-from PATH`: take the listeners of the proxy offering them
    /// there, instead of binding them.
    pub upgrade_from: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            backends: Vec::new(),
            mode: Mode::Epoll,
            threads: 64,
            workers: runtime::threads::available_cores(),
            picker: PickerKind::Mutex,
            backlog: runtime::net::DEFAULT_BACKLOG,
            timeouts: Timeouts::default(),
            log_level: Level::Info,
            balance: Algorithm::RoundRobin,
            retries: DEFAULT_RETRIES,
            maxconn: None,
            splice: Splice::default(),
            config: None,
            workers_given: false,
            grace: None,
            access_log: None,
            log_format: None,
            admin: None,
            admin_request_timeout: None,
            upgrade_socket: None,
            upgrade_from: None,
        }
    }
}

impl Settings {
    /// The one frontend the flags describe, as a configuration: the epoll
    /// mode runs either this or a file's, the same way.
    pub fn to_config(&self) -> Config {
        let backends = self
            .backends
            .iter()
            .map(|addr| BackendServer::new(addr.clone()))
            .collect();
        let timeouts = self.timeouts;
        Config {
            global: Global {
                admin: self.admin,
                access_log: self.access_log.clone(),
                log_format: self.log_format.clone(),
                admin_request: self.admin_request_timeout,
                upgrade_socket: self.upgrade_socket.clone(),
                ..Global::default()
            },
            frontends: vec![Frontend {
                name: "default".to_string(),
                listen: vec![self.listen],
                freebind: false,
                balance: self.balance,
                maxconn: self.maxconn,
                timeouts,
                retries: self.retries,
                backends,
                access: AccessList::default(),
                maxconn_per_source: None,
                rate_limit: None,
                rate_limit_per_source: None,
                accept_proxy: false,
                proxy_from: Vec::new(),
                default_group: None,
                groups: Vec::new(),
                routing: None,
                splice: self.splice,
                dontlognull: false,
            }],
            hosts: Vec::new(),
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone)]
pub enum Command {
    /// Run the proxy.
    Run(Box<Settings>),
    /// Validate a configuration file and exit (`--check-config FILE`).
    CheckConfig(std::path::PathBuf),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// What `--flag VALUE` pairs are read into: the settings, and the one flag
/// that asks for something else than a run.
#[derive(Debug, Default)]
struct Args {
    settings: Settings,
    check_config: Option<PathBuf>,
}

/// The text of `proxy --help`.
pub fn help() -> String {
    format!("{HELP_HEAD}{}{HELP_TAIL}", flags::help(FLAGS))
}

const HELP_HEAD: &str = "\
proxy: an L4 (TCP) load balancer

USAGE
    proxy --listen ADDR --backend ADDR [--backend ADDR ...] [OPTIONS]
    proxy --config FILE [--workers N] [--backlog N] [--grace DUR] [--log-level LEVEL]
                        [--access-log WHERE] [--log-format FORMAT] [--admin ADDR]
                        [--admin-request-timeout DUR] [--upgrade-socket PATH]
                        [--upgrade-from PATH]
    proxy --check-config FILE validate a configuration file and exit (0 ok, 2 errors)
    proxy ctl (--socket PATH | --admin ADDR [--token-file F]) COMMAND
                              change a running proxy's servers: show servers, ready, drain,
                              maint, weight, shutdown-sessions (proxy ctl --help)

Every connection accepted on --listen is relayed, bytes unchanged in both
directions, to one of the backends. With --config FILE, the file describes
one or more frontends, each with its own backends, balancing, health checks
and limits (docs/OPERATIONS.md; proxy/examples/*.conf).

MODES (--mode), the milestones of the C++ project this grew from
    single   one thread, blocking sockets, one connection at a time, first backend only
    pool     an accept loop hands each connection to a pool of --threads blocking threads
    epoll    the async proxy on our own runtime: every connection on --workers event
             loops (default)
    states   the same milestone by hand: one thread, level-triggered epoll, no runtime,
             each connection an explicit state machine (docs/STATES.md)

OPTIONS
";

const HELP_TAIL: &str = "
DUR is a number with a unit: 500ms, 2s, 1m, 1h.

SIGNALS
    SIGTERM, SIGINT   stop accepting, let open connections finish for --grace, exit 0;
                      a second one exits at once (the single mode exits at once)
    SIGHUP            epoll with --config: reload the file (a bad file keeps the old one)
    SIGUSR1           epoll: reopen the --access-log file (after a rotation renamed it)
    SIGUSR2           epoll with --upgrade-socket: start the binary again, which takes the
                      listeners over; this process then drains and exits
    SIGQUIT           log the state (epoll: every frontend and backend; the other modes:
                      their open connections) and go on running

EXAMPLES
    proxy --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 --backend 127.0.0.1:9002
    proxy --mode pool --threads 16 --picker atomic --listen 127.0.0.1:8080 --backend 127.0.0.1:9001

The seed's experiment, every mode against backends that wait 50 ms, is a
program of its own: cargo run --release -p tools --bin demo
";

/// Every flag: its name, its value, its help, what it sets.
const FLAGS: &[Flag<Args>] = &[
    Flag {
        name: "--listen",
        arg: "ADDR",
        needs: "an address like 127.0.0.1:8080",
        help: "address to accept on            [default: 127.0.0.1:8080]",
        set: |a, v| {
            a.settings.listen = parse_addr(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--backend",
        arg: "ADDR",
        needs: "an address like 127.0.0.1:9001 or db.example:9001",
        help: "a backend (repeat for more); at least one; a host name is\n\
               \x20                            looked up at start (epoll: and every 10s)",
        set: |a, v| {
            a.settings.backends.push(Address::parse(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--mode",
        arg: "MODE",
        needs: "single, pool, epoll or states",
        help: "single | pool | epoll | states  [default: epoll]",
        set: |a, v| {
            a.settings.mode = parse_mode(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--threads",
        arg: "N",
        needs: "a number of threads",
        help: "pool: worker threads            [default: 64]",
        set: |a, v| {
            a.settings.threads = parse_count(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--workers",
        arg: "N",
        needs: "a number of workers",
        help: "epoll: event-loop threads       [default: one per CPU]",
        set: |a, v| {
            a.settings.workers = parse_count(v)?;
            a.settings.workers_given = true;
            Ok(())
        },
    },
    Flag {
        name: "--picker",
        arg: "KIND",
        needs: "mutex or atomic",
        help: "pool: mutex | atomic (| racy, in a race-demo build)\n\
               \x20                                                            [default: mutex]",
        set: |a, v| {
            a.settings.picker = parse_picker(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--backlog",
        arg: "N",
        needs: "a queue length",
        help: "listen queue length (capped by net.core.somaxconn) [default: 4096]",
        set: |a, v| {
            a.settings.backlog = u32::try_from(parse_count(v)?).unwrap_or(u32::MAX);
            Ok(())
        },
    },
    Flag {
        name: "--connect-timeout",
        arg: "DUR",
        needs: "a duration",
        help: "give up connecting to a backend after DUR   [default: 5s]",
        set: |a, v| {
            a.settings.timeouts.connect = parse_timeout(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--idle-timeout",
        arg: "DUR",
        needs: "a duration",
        help: "close a connection silent both ways for DUR [default: 10m]",
        set: |a, v| {
            a.settings.timeouts.set_idle(parse_timeout(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--fin-timeout",
        arg: "DUR",
        needs: "a duration",
        help: "after one side closed, close if the other is silent for DUR\n\
               \x20                                                            [default: 30s]",
        set: |a, v| {
            a.settings.timeouts.set_fin(parse_timeout(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--balance",
        arg: "ALG",
        needs: "an algorithm",
        help: "epoll: roundrobin | leastconn | random | source\n\
               \x20                                                            [default: roundrobin]",
        set: |a, v| {
            a.settings.balance = parse_balance(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--splice",
        arg: "WHEN",
        needs: "auto, on or off",
        help: "epoll: move bulk bytes by splice(2): auto | on | off\n\
               \x20                                                            [default: auto]",
        set: |a, v| {
            a.settings.splice = Splice::parse(v).ok_or_else(|| {
                let names = Splice::ALL.map(Splice::name);
                format!("'{v}' is not a choice; use {}", list(&names, "or"))
            })?;
            Ok(())
        },
    },
    Flag {
        name: "--retries",
        arg: "N",
        needs: "a number of retries",
        help: "epoll: other backends to try after a failed connect\n\
               \x20                                                            [default: 3]",
        set: |a, v| match v.parse::<u32>() {
            Ok(n) if n <= 100 => {
                a.settings.retries = n;
                Ok(())
            }
            _ => Err(format!("'{v}' is not a number from 0 to 100")),
        },
    },
    Flag {
        name: "--maxconn",
        arg: "N",
        needs: "a number of connections",
        help: "epoll: most connections open at once; at the limit the\n\
               \x20                            proxy stops accepting (the kernel queues new clients)\n\
               \x20                                                            [default: no limit]",
        set: |a, v| {
            a.settings.maxconn = Some(u32::try_from(parse_count(v)?).unwrap_or(u32::MAX));
            Ok(())
        },
    },
    Flag {
        name: "--grace",
        arg: "DUR",
        needs: "a duration",
        help: "pool, epoll, states: on SIGTERM or SIGINT, stop accepting and give\n\
               \x20                            open connections DUR to finish; a second signal exits at\n\
               \x20                            once                            [default: 30s]",
        set: |a, v| {
            a.settings.grace = Some(parse_timeout(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--access-log",
        arg: "WHERE",
        needs: "stderr, off or a file",
        help: "epoll: one line per connection to stderr, off, or a file\n\
               \x20                                                            [default: stderr]",
        set: |a, v| {
            a.settings.access_log = Some(AccessLogTarget::parse(v));
            Ok(())
        },
    },
    Flag {
        name: "--log-format",
        arg: "FORMAT",
        needs: "tcplog, json or a format like '%ci %B %ts'",
        help: "epoll: tcplog (HAProxy's) | json | a format of HAProxy's\n\
               \x20                            variables, like '%ci:%cp %ft %B %ts'\n\
               \x20                                                            [default: tcplog]",
        set: |a, v| match config::log_format(v, false) {
            Ok(format) => {
                a.settings.log_format = Some(format);
                Ok(())
            }
            Err(e) => Err(e.message),
        },
    },
    Flag {
        name: "--admin",
        arg: "ADDR",
        needs: "an address like 127.0.0.1:9100",
        help: "epoll: serve GET /metrics (Prometheus) and GET /health on\n\
               \x20                            ADDR, a loopback address        [default: off]",
        set: |a, v| {
            a.settings.admin = Some(parse_admin(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--admin-request-timeout",
        arg: "DUR",
        needs: "a duration",
        help: "epoll: close an admin connection that has not sent its\n\
               \x20                            whole request head within DUR   [default: 1s]",
        set: |a, v| {
            a.settings.admin_request_timeout = Some(parse_timeout(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--upgrade-socket",
        arg: "PATH",
        needs: "a path, like /run/proxy/upgrade.sock",
        help: "epoll: offer the listeners on this Unix socket to a new\n\
               \x20                            process (--upgrade-from; SIGUSR2 starts one)\n\
               \x20                                                            [default: off]",
        set: |a, v| {
            a.settings.upgrade_socket = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--upgrade-from",
        arg: "PATH",
        needs: "the path of a running proxy's upgrade socket",
        help: "epoll: take the listeners of the proxy offering them on\n\
               \x20                            PATH; it then drains and exits",
        set: |a, v| {
            a.settings.upgrade_from = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--log-level",
        arg: "LEVEL",
        needs: "error, warn, info or debug",
        help: "error | warn | info | debug     [default: info]",
        set: |a, v| match Level::parse(v) {
            Some(level) => {
                a.settings.log_level = level;
                Ok(())
            }
            None => Err(format!(
                "unknown level '{v}'; use error, warn, info or debug"
            )),
        },
    },
    Flag {
        name: "--config",
        arg: "FILE",
        needs: "a configuration file",
        help: "epoll: run the frontends of FILE (docs/OPERATIONS.md)",
        set: |a, v| {
            a.settings.config = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--check-config",
        arg: "FILE",
        needs: "a configuration file",
        help: "check FILE, print every error, exit (0 ok, 2 errors)",
        set: |a, v| {
            a.check_config = Some(PathBuf::from(v));
            Ok(())
        },
    },
];

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    if args.first().is_some_and(|a| a == "demo") {
        return err("the demo is a program of its own: cargo run --release -p tools --bin demo");
    }
    let mut read = Args::default();
    let given = match flags::read("proxy", args, FLAGS, &mut read)? {
        Read::Help => return Ok(Command::Help),
        Read::Version => return Ok(Command::Version),
        Read::Flags(given) => given,
    };
    if let Some(path) = read.check_config {
        return Ok(Command::CheckConfig(path));
    }
    let settings = read.settings;
    match settings.config.is_some() {
        true => check_config_flags(&settings, &given)?,
        false => check_mode_flags(&settings, &given)?,
    }
    Ok(Command::Run(Box::new(settings)))
}

fn err<T>(message: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError::new("proxy", message))
}

/// Flags of the balancing epoll mode only.
const EPOLL_ONLY: &[&str] = &[
    "--balance",
    "--retries",
    "--maxconn",
    "--config",
    "--access-log",
    "--log-format",
    "--admin",
    "--admin-request-timeout",
];

/// Flags of the handover of listeners between two processes (ops/upgrade/).
const UPGRADE: &[&str] = &["--upgrade-socket", "--upgrade-from"];

/// Flags that size threads: the states mode has one, and no picker to share.
const THREADS: &[&str] = &["--threads", "--workers", "--picker"];

/// A rule of [`REFUSALS`]: the modes that refuse some flags, and why.
struct ModeRule {
    modes: &'static [Mode],
    flags: &'static [&'static str],
    /// What the error says after the flag and the mode (`{flag} ... the
    /// {mode} mode`): what the flag belongs to, or what the mode lacks.
    why: &'static str,
}

/// Which mode refuses which flag, checked in order: the first rule that
/// matches says why. A flag no rule names is taken by every mode (the pool
/// mode ignores `--workers`, the epoll mode `--threads`: both run alone).
const REFUSALS: &[ModeRule] = &[
    ModeRule {
        modes: &[Mode::Single, Mode::Pool, Mode::States],
        flags: UPGRADE,
        why: "is for the epoll mode, the one that can hand its listeners to a new process and \
              take them from an old one; stop this one and start the new one instead",
    },
    ModeRule {
        modes: &[Mode::Single],
        flags: &["--grace"],
        why: "is for the modes that drain (pool, epoll, states); the single mode serves one \
              connection at a time and exits at once on SIGTERM",
    },
    ModeRule {
        modes: &[Mode::Single, Mode::Pool, Mode::States],
        flags: &["--splice"],
        why: "is for the epoll mode's relay, the one that can move bytes by splice(2); this mode \
              copies them",
    },
    ModeRule {
        modes: &[Mode::Single, Mode::Pool, Mode::States],
        flags: EPOLL_ONLY,
        why: "is for the epoll mode, which balances (health checks, retries, limits, access \
              log, metrics); this mode picks round-robin",
    },
    ModeRule {
        modes: &[Mode::States],
        flags: THREADS,
        why: "sizes threads; the states mode is one thread, one event loop, written by hand",
    },
];

/// Without `--config`: each mode's own flags ([`REFUSALS`]), and at least
/// one backend.
fn check_mode_flags(settings: &Settings, given: &[&str]) -> Result<(), UsageError> {
    let mode = settings.mode;
    for rule in REFUSALS.iter().filter(|r| r.modes.contains(&mode)) {
        if let Some(flag) = given.iter().find(|f| rule.flags.contains(f)) {
            return err(format!(
                "{flag} {} (--mode {}: {})",
                rule.why,
                mode.name(),
                mode.what()
            ));
        }
    }
    if settings.backends.is_empty() {
        return err("no backend: give at least one --backend ADDR");
    }
    Ok(())
}

/// Flags that a configuration file replaces: with `--config`, the file says
/// these (per frontend), and a flag would be ambiguous.
const FILE_REPLACES: &[(&str, &str)] = &[
    ("--listen", "listen"),
    ("--backend", "backend"),
    ("--balance", "balance"),
    ("--retries", "retries"),
    ("--maxconn", "maxconn"),
    ("--splice", "splice"),
    ("--connect-timeout", "timeout connect"),
    ("--idle-timeout", "timeout client / timeout server"),
    ("--fin-timeout", "timeout client-fin / timeout server-fin"),
    ("--threads", "(the pool mode does not read files)"),
    ("--picker", "(the pool mode does not read files)"),
];

/// With `--config`: the epoll mode, and none of the flags the file replaces.
fn check_config_flags(settings: &Settings, given: &[&str]) -> Result<(), UsageError> {
    if settings.mode != Mode::Epoll {
        return err(format!(
            "--config runs the epoll mode; the {} mode takes flags only",
            settings.mode.name()
        ));
    }
    match FILE_REPLACES.iter().find(|(f, _)| given.contains(f)) {
        Some((flag, option)) => err(format!(
            "{flag} cannot be combined with --config: the file sets it ({option})"
        )),
        None => Ok(()),
    }
}

fn parse_addr(value: &str) -> Result<SocketAddr, String> {
    value.parse().map_err(|_| {
        format!(
            "'{value}' is not an IP address with a port, like 127.0.0.1:8080 or [::1]:8080 \
             (host names are not resolved)"
        )
    })
}

/// The admin endpoint's address: any; who may use it is `admin-allow` in
/// the file (loopback only by default).
fn parse_admin(value: &str) -> Result<SocketAddr, String> {
    parse_addr(value)
}

fn parse_mode(value: &str) -> Result<Mode, String> {
    let names = Mode::ALL.map(Mode::name);
    Mode::ALL
        .into_iter()
        .find(|m| m.name() == value)
        .ok_or_else(|| format!("unknown mode '{value}'; use {}", list(&names, "or")))
}

fn parse_balance(value: &str) -> Result<Algorithm, String> {
    let names = Algorithm::ALL.map(Algorithm::name);
    Algorithm::parse(value)
        .ok_or_else(|| format!("unknown algorithm '{value}'; use {}", list(&names, "or")))
}

fn parse_picker(value: &str) -> Result<PickerKind, String> {
    if let Some(kind) = PickerKind::ALL.iter().find(|k| k.name() == value) {
        return Ok(*kind);
    }
    if value == "racy" {
        return Err(
            "racy exists only in a build with the race demonstration: cargo build -p \
                    proxy --features race-demo"
                .to_string(),
        );
    }
    let names: Vec<&str> = PickerKind::ALL.iter().map(|k| k.name()).collect();
    Err(format!(
        "unknown picker '{value}'; use {}",
        list(&names, "or")
    ))
}

fn parse_count(value: &str) -> Result<usize, String> {
    match flags::count(value)? {
        n if n <= 1 << 20 => Ok(n),
        _ => Err(format!("{value} is unreasonably large")),
    }
}

/// A timeout: a duration with a unit, and never zero (a zero connect timeout
/// would fail every connect, a zero idle timeout reset every connection at
/// once).
fn parse_timeout(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        d if d.is_zero() => Err(format!(
            "{value} would end every connection at once; use at least 1ms"
        )),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn settings(s: &str) -> Settings {
        match parse(&args(s)) {
            Ok(Command::Run(settings)) => *settings,
            other => panic!("expected settings from '{s}', got {other:?}"),
        }
    }

    #[test]
    fn a_full_command_line_parses() {
        let s = settings(
            "--listen [::1]:7000 --backend 127.0.0.1:9001 --backend 127.0.0.1:9002 --mode pool \
             --threads 8 --picker atomic --backlog 128 --connect-timeout 500ms --idle-timeout 1m \
             --fin-timeout 2s --log-level debug --workers 3",
        );
        assert_eq!(s.listen, "[::1]:7000".parse().unwrap());
        assert_eq!(s.backends.len(), 2);
        assert_eq!(
            (s.mode, s.threads, s.workers, s.picker, s.backlog),
            (Mode::Pool, 8, 3, PickerKind::Atomic, 128)
        );
        let t = s.timeouts;
        assert_eq!(t.connect, Duration::from_millis(500));
        assert_eq!(
            (t.client, t.server),
            (Duration::from_secs(60), Duration::from_secs(60))
        );
        assert_eq!(
            (t.client_fin, t.server_fin),
            (Duration::from_secs(2), Duration::from_secs(2))
        );
        assert_eq!(s.log_level, Level::Debug);
    }

    #[test]
    fn defaults_are_the_epoll_mode_with_a_high_backlog() {
        let s = settings("--backend 127.0.0.1:9001");
        assert_eq!(s.mode, Mode::Epoll);
        assert_eq!(s.backlog, 4096);
        assert_eq!(s.listen, "127.0.0.1:8080".parse().unwrap());
    }

    #[test]
    fn mistakes_say_what_was_wrong_and_what_to_do() {
        let error = |s: &str| parse(&args(s)).unwrap_err().message;
        assert!(error("").contains("no backend"));
        assert!(error("--backend localhost").contains("'localhost' is not an address with a port"));
        assert!(matches!(
            settings("--backend localhost:80").backends[..],
            [Address::Host { ref name, port: 80 }] if name == "localhost"
        ));
        assert!(
            error("--backend 127.0.0.1:1 --mode fast")
                .contains("use single, pool, epoll or states")
        );
        assert!(error("--backend 127.0.0.1:1 --threads 0").contains("at least 1"));
        assert!(error("--backend 127.0.0.1:1 --threads lots").contains("not a whole number"));
        assert!(error("--backend 127.0.0.1:1 --idle-timeout 30").contains("has no unit"));
        assert!(error("--backend 127.0.0.1:1 --idle-timeout 3x").contains("unknown unit"));
        assert!(error("--backend 127.0.0.1:1 --connect-timeout 0s").contains("at least 1ms"));
        assert!(error("--backend").contains("needs an address"));
        assert_eq!(
            error("--backnd 127.0.0.1:1"),
            "unknown option '--backnd' (did you mean '--backend'?)"
        );
        assert_eq!(error("--frobnicate"), "unknown option '--frobnicate'");
    }

    #[test]
    fn help_version_and_the_demo_elsewhere() {
        let demo = parse(&args("demo")).unwrap_err().message;
        assert!(
            demo.contains("cargo run --release -p tools --bin demo"),
            "{demo}"
        );
        assert!(matches!(parse(&args("--help")), Ok(Command::Help)));
        assert!(matches!(parse(&args("-V")), Ok(Command::Version)));
        assert!(help().contains("--mode MODE"));
        assert!(help().contains("--check-config FILE"));
        for signal in ["SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT"] {
            assert!(help().contains(&format!("\n    {signal}")), "{signal}");
        }
        assert!(matches!(
            parse(&args("--check-config lb.conf")),
            Ok(Command::CheckConfig(p)) if p == std::path::Path::new("lb.conf")
        ));
        assert!(
            parse(&args("--check-config"))
                .unwrap_err()
                .message
                .contains("needs a configuration file")
        );
    }

    #[cfg(not(feature = "race-demo"))]
    #[test]
    fn the_racy_picker_needs_the_demo_build() {
        let e = parse(&args("--backend 127.0.0.1:1 --picker racy"))
            .unwrap_err()
            .message;
        assert!(e.contains("--features race-demo"), "{e}");
    }

    #[test]
    fn each_mode_refuses_the_flags_it_has_no_use_for() {
        let error = |s: &str| parse(&args(s)).unwrap_err().message;
        let states = "--backend 127.0.0.1:1 --mode states";
        for flag in [
            "--balance roundrobin",
            "--retries 1",
            "--maxconn 9",
            "--access-log off",
            "--log-format json",
            "--admin 127.0.0.1:9100",
        ] {
            let e = error(&format!("{states} {flag}"));
            assert!(e.contains("is for the epoll mode, which balances"), "{e}");
            assert!(e.contains("--mode states"), "{e}");
        }
        for flag in ["--threads 4", "--workers 2", "--picker atomic"] {
            let e = error(&format!("{states} {flag}"));
            assert!(e.contains("the states mode is one thread"), "{e}");
        }
        for mode in ["states", "pool", "single"] {
            let e = error(&format!("--backend 127.0.0.1:1 --mode {mode} --splice on"));
            assert!(e.contains("--splice is for the epoll mode's relay"), "{e}");
        }
        let e = error("--backend 127.0.0.1:1 --splice sometimes");
        assert!(e.contains("use auto, on or off"), "{e}");
        let run = |s: &str| match parse(&args(s)) {
            Ok(Command::Run(settings)) => settings.to_config().frontends[0].splice,
            other => panic!("{other:?}"),
        };
        assert_eq!(run("--backend 127.0.0.1:1"), Splice::Auto);
        assert_eq!(run("--backend 127.0.0.1:1 --splice off"), Splice::Off);
        let e = error("--backend 127.0.0.1:1 --mode single --grace 1s");
        assert!(e.contains("exits at once on SIGTERM"), "{e}");
        // Only the epoll mode hands its listeners over.
        for mode in ["single", "pool", "states"] {
            for flag in ["--upgrade-socket /run/p.sock", "--upgrade-from /run/p.sock"] {
                let e = error(&format!("--backend 127.0.0.1:1 --mode {mode} {flag}"));
                assert!(e.contains("can hand its listeners to a new process"), "{e}");
                assert!(e.contains(&format!("--mode {mode}")), "{e}");
            }
        }
        let s = settings("--backend 127.0.0.1:1 --upgrade-socket /run/p.sock --upgrade-from /x");
        assert_eq!(
            s.upgrade_socket.as_deref(),
            Some(std::path::Path::new("/run/p.sock"))
        );
        assert_eq!(s.upgrade_from.as_deref(), Some(std::path::Path::new("/x")));
        let e = error("--backend 127.0.0.1:1 --mode pool --admin 127.0.0.1:9100");
        assert!(e.contains("--mode pool: milestones 2 to 4"), "{e}");
        assert!(error("--mode states --config lb.conf").contains("takes flags only"));
        let s = settings(
            "--mode states --backend 127.0.0.1:1 --grace 2s --connect-timeout 1s \
             --idle-timeout 5s --fin-timeout 1s --backlog 64 --log-level debug",
        );
        assert_eq!((s.mode, s.backlog), (Mode::States, 64));
        assert_eq!(s.grace, Some(Duration::from_secs(2)));
    }
}
