//! The configuration: what a file (or the command line's one frontend)
//! says, as types. Several frontends, each with its own pool of backends, in
//! a small line-oriented format in the spirit of HAProxy's:
//!
//! ```text
//! global
//!     maxconn 20000
//! frontend web
//!     listen 127.0.0.1:8080
//!     balance leastconn
//!     backend 127.0.0.1:9001 weight 5 maxconn 100 check inter 2s fall 3 rise 2
//!     backend 127.0.0.1:9002 backup
//! ```
//!
//! The grammar, every option with its default and its HAProxy / nginx
//! equivalent, is in `docs/OPERATIONS.md`; the file is read by
//! [`file`](super::file), the options of each section are the tables of
//! [`sections`](super::sections). Without `--config`, the command-line flags
//! describe one frontend, named `default`
//! ([`Settings::to_config`](super::cli::Settings::to_config)).

use std::fmt;
use std::net::SocketAddr;

pub use super::address::{Address, InitAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::conn::proxy_protocol::Version;
use crate::conn::splice::Splice;
use crate::conn::timeouts::Timeouts;
use crate::log::syslog::Destination;
use crate::ops::access_log::custom::FormatError;
use crate::ops::access_log::format::Format;
use crate::ops::privileges::RunAs;
use crate::policy::acl::AccessList;
use crate::policy::address::Family;
use crate::policy::balance::Algorithm;
use crate::policy::check::Probe;
use crate::policy::check::agent::AgentCheck;
use crate::policy::cidr::Cidr;
use crate::policy::health::Check;
use crate::policy::route::{NotTls, Routes, Unmatched};

/// A whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Process-wide settings (the `global` section; defaults if absent).
    pub global: Global,
    /// One per `frontend` section, in file order.
    pub frontends: Vec<Frontend>,
    /// Each `backend` line written with a host name, where it is: a name
    /// that does not resolve is reported there (`resolve.rs`). Apart from
    /// the servers, so that a line that only moved leaves its frontend
    /// unchanged for a reload.
    pub hosts: Vec<HostLine>,
}

/// Where a `backend` line with a host name is in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLine {
    /// Its line.
    pub line: usize,
    /// The column of its address.
    pub column: usize,
    /// Its server's name (its address for a line without one).
    pub name: String,
    /// Its address, as written.
    pub address: Address,
}

/// The `global` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Global {
    /// Concurrent connections over all frontends (`None`: no limit).
    pub maxconn: Option<u32>,
    /// Event-loop threads (`None`: one per CPU).
    pub workers: Option<u32>,
    /// `grace DURATION`: on SIGTERM, how long open connections may take to
    /// finish before the process exits anyway (`None`: the default, 30s).
    pub grace: Option<Duration>,
    /// `shutdown-delay DURATION`: on SIGTERM, how long to go on accepting
    /// while `/health` already answers 503 (the lameduck phase), before
    /// the drain (`None`: none, the drain begins at once).
    pub shutdown_delay: Option<Duration>,
    /// `admin ADDR`: the metrics and health endpoint (`None`: off).
    pub admin: Option<SocketAddr>,
    /// `access-log stderr|off|PATH` (`None`: the default: the `log`
    /// destination if there is one, else stderr).
    pub access_log: Option<AccessLogTarget>,
    /// `log-format tcplog|json|"FORMAT"` (`None`: the default, tcplog).
    pub log_format: Option<Format>,
    /// `log TARGET [len N] [format F] FACILITY [LEVEL [MINLEVEL]]`: a
    /// syslog destination for the access log and the daemon's lines
    /// (`None`: none).
    pub log: Option<Destination>,
    /// `log-tag NAME`: the syslog tag (`None`: the program's name).
    pub log_tag: Option<String>,
    /// `log-send-hostname [NAME]`: the host name in syslog headers
    /// (`Some(None)`: this system's), which also makes `rfc3164` the
    /// default layout (`None`: no such line).
    pub log_send_hostname: Option<Option<String>>,
    /// `timeout admin-request DURATION`: how long an admin client has to
    /// send its whole request head (`None`: the admin listener's default,
    /// 1s).
    pub admin_request: Option<Duration>,
    /// `admin-socket PATH`: the admin socket, mode 0600, for HAProxy's
    /// runtime-API commands (`None`: off).
    pub admin_socket: Option<PathBuf>,
    /// `admin-token-file PATH`: the file whose content an HTTP action must
    /// carry as `Authorization: Bearer TOKEN` (`None`: no HTTP action).
    pub admin_token_file: Option<PathBuf>,
    /// `admin-allow CIDR...`: who may use the admin endpoint over TCP
    /// (empty: loopback only).
    pub admin_allow: Vec<Cidr>,
    /// `server-state-file PATH`: every server's admin state and weight,
    /// written at each change and at a stop, read at start (`None`: off).
    pub server_state_file: Option<PathBuf>,
    /// `upgrade-socket PATH`: where the running proxy offers its listeners
    /// to a new process (`--upgrade-from PATH`; `None`: off).
    pub upgrade_socket: Option<PathBuf>,
    /// `user ID [GROUP]`: who the proxy runs as once its listeners are
    /// bound (empty: who it was started as).
    pub run_as: RunAs,
    /// `resolve-interval DURATION|off`: how often the backends written
    /// with a host name are looked up again (`None`: the default,
    /// [`DEFAULT_RESOLVE_INTERVAL`]; `Some(None)`: off, at start and at a
    /// reload only).
    pub resolve_interval: Option<Option<Duration>>,
}

/// How often host names are looked up again without `resolve-interval`:
/// HAProxy's `hold valid` default. A name is written instead of an address
/// because the address may change (a container moved, a database failed
/// over), so looking again is the default; one lookup per name per 10s
/// costs the resolver thread next to nothing, and never a worker.
pub const DEFAULT_RESOLVE_INTERVAL: Duration = Duration::from_secs(10);

impl Global {
    /// How often names are looked up again (`None`: never, after the start
    /// and a reload).
    pub fn resolve_every(&self) -> Option<Duration> {
        self.resolve_interval
            .unwrap_or(Some(DEFAULT_RESOLVE_INTERVAL))
    }
}

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// No access log.
    Off,
    /// Standard error, with the daemon's own messages.
    Stderr,
    /// Appended to this file.
    File(PathBuf),
}

impl AccessLogTarget {
    /// `stderr`, `off`, or a path (the `access-log` option and flag).
    pub fn parse(word: &str) -> AccessLogTarget {
        match word {
            "off" => AccessLogTarget::Off,
            "stderr" => AccessLogTarget::Stderr,
            path => AccessLogTarget::File(PathBuf::from(path)),
        }
    }
}

/// Reads `log-format`'s (or `--log-format`'s) value: a format's name, or,
/// if it has a `%` (or was `quoted`, as a file writes a format with
/// blanks), a format of the operator's, compiled. The error says what to
/// write.
pub fn log_format(text: &str, quoted: bool) -> Result<Format, FormatError> {
    if quoted || text.contains('%') {
        return Format::custom(text);
    }
    Format::named(text).ok_or_else(|| FormatError {
        offset: 0,
        message: format!(
            "unknown log format '{text}'{}; use tcplog, json, or a format of your own in quotes, \
             like \"%ci:%cp %ft %b/%s %Tt %B %ts\"",
            super::words::did_you_mean(text, &Format::NAMES)
        ),
    })
}

/// Default `retries`, HAProxy's.
pub const DEFAULT_RETRIES: u32 = 3;
/// The largest `weight`: the balancer's.
pub use crate::policy::balance::MAX_WEIGHT;

/// A `frontend` section: its listen addresses and its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontend {
    /// The section's name, unique in the file.
    pub name: String,
    /// `listen ADDR...`: where clients connect, one address or several
    /// (HAProxy's `bind` lines), every one sharing the frontend's checks,
    /// limits and counters; in file order, never empty. `:PORT` is read
    /// as `0.0.0.0:PORT`.
    pub listen: Vec<SocketAddr>,
    /// `freebind` on a `listen` line: its addresses are bound even if they
    /// are on no interface yet (IP_FREEBIND), for a service address that
    /// arrives later. It applies to every address of the frontend (for
    /// one already on an interface, it changes nothing).
    pub freebind: bool,
    /// `balance`: the algorithm of its default group (its own `backend`
    /// lines, or the `default-group`'s `balance`).
    pub balance: Algorithm,
    /// `maxconn N`: concurrent connections on this frontend.
    pub maxconn: Option<u32>,
    /// `timeout ...`.
    pub timeouts: Timeouts,
    /// `retries N`: connects to other backends after a failed one.
    pub retries: u32,
    /// `backend ADDR ...`, in file order: the default group's (its own
    /// lines, or the `default-group`'s), then each of [`Frontend::groups`]'s.
    pub backends: Vec<BackendServer>,
    /// `allow CIDR...` / `deny CIDR...`: who may connect (default: anyone).
    pub access: AccessList,
    /// `maxconn-per-source N`: concurrent connections from one address.
    pub maxconn_per_source: Option<u32>,
    /// `rate-limit sessions N`: new connections accepted per second, at
    /// most; the excess waits in the listen queue.
    pub rate_limit: Option<u32>,
    /// `rate-limit-per-source N PERIOD`: new connections from one address
    /// per period, at most; the excess is refused.
    pub rate_limit_per_source: Option<(u32, Duration)>,
    /// `accept-proxy`: clients start with a PROXY protocol header (v1 or v2)
    /// giving the real client's address (behind another load balancer).
    pub accept_proxy: bool,
    /// `accept-proxy CIDR...`: the peers trusted to send that header (the
    /// load balancers in front); anyone else is refused before a byte is
    /// read. Empty: any peer, which lets anyone who reaches the listener
    /// claim any client address.
    pub proxy_from: Vec<Cidr>,
    /// `splice auto | on | off`: whether the relay may move bytes by
    /// `splice(2)` (epoll mode; conn/splice.rs). Default `auto`.
    pub splice: Splice,
    /// `dontlognull`: no access-log line for a connection whose client
    /// sent no byte (its PROXY header aside), as HAProxy's `option
    /// dontlognull`: health probes and port scans.
    pub dontlognull: bool,
    /// `default-group NAME`: the default group is that group, not the
    /// frontend's own backend lines (`None`: they are, named as the
    /// frontend).
    pub default_group: Option<String>,
    /// The groups its `use-group` rules route to, other than the default,
    /// in the order the rules first name them; group `i + 1` of
    /// [`Frontend::group`].
    pub groups: Vec<Group>,
    /// `use-group GROUP sni NAME...` and `not-tls`: the ClientHello of every
    /// client is read to choose a group (`None`: no rule, nothing read).
    pub routing: Option<Routes>,
}

/// A `group NAME` section as a frontend routing to it holds it: its name,
/// its algorithm, and where its backends start in the frontend's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The section's name.
    pub name: String,
    /// Its `balance`.
    pub balance: Algorithm,
    /// Its first backend's index in [`Frontend::backends`]; its backends
    /// run to the next group's start, or to the end.
    pub start: usize,
}

/// One of a frontend's groups, as [`Frontend::group`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView<'a> {
    /// Its name: the section's, or the frontend's for its own lines.
    pub name: &'a str,
    /// Its algorithm.
    pub balance: Algorithm,
    /// Its backends' indexes in [`Frontend::backends`].
    pub backends: std::ops::Range<usize>,
}

impl Frontend {
    /// How many groups it has: the default one, then [`Frontend::groups`].
    pub fn group_count(&self) -> usize {
        1 + self.groups.len()
    }

    /// Group `index`: 0 is the default, then [`Frontend::groups`] in order
    /// (`None` past the last).
    pub fn group(&self, index: usize) -> Option<GroupView<'_>> {
        let end_of = |i: usize| self.groups.get(i).map_or(self.backends.len(), |g| g.start);
        if index == 0 {
            let name = self.default_group.as_deref().unwrap_or(&self.name);
            return Some(GroupView {
                name,
                balance: self.balance,
                backends: 0..end_of(0),
            });
        }
        let group = self.groups.get(index - 1)?;
        Some(GroupView {
            name: &group.name,
            balance: group.balance,
            backends: group.start..end_of(index),
        })
    }

    /// The labels (rule, group) of its routing counters, in counter order:
    /// one per rule, then the [`Unmatched`] ones, which go to the default
    /// group (or are refused: `not-tls refuse`). None without rules.
    pub fn route_labels(&self) -> Vec<(String, String)> {
        let Some(routes) = &self.routing else {
            return Vec::new();
        };
        let name = |g: usize| self.group(g).map_or(String::new(), |g| g.name.to_string());
        let rules = routes
            .rules()
            .iter()
            .map(|rule| (rule.pattern.to_string(), name(rule.group)));
        let unmatched = Unmatched::ALL.into_iter().map(|u| {
            let group = match (u, routes.not_tls) {
                (Unmatched::NotTls, NotTls::Refuse) => "(refused)".to_string(),
                _ => name(0),
            };
            (u.label().to_string(), group)
        });
        rules.chain(unmatched).collect()
    }

    /// The group backend `index` belongs to.
    pub fn group_of(&self, index: usize) -> usize {
        self.groups.iter().take_while(|g| g.start <= index).count()
    }

    /// The name of the group backend `index` belongs to (the `GROUP` of
    /// `GROUP/SERVER` in the access log).
    pub fn group_name_of(&self, index: usize) -> &str {
        self.group(self.group_of(index))
            .map_or(self.name.as_str(), |g| g.name)
    }
}

/// One `backend` line of a frontend or a group: HAProxy's `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendServer {
    /// `backend NAME ADDR`: what the access log, the metrics, the state dump
    /// and the health lines call it, unique in its group. A line without a
    /// name is named by its address (`127.0.0.1:9001`, `[::1]:9001`,
    /// `db.internal:5432`): its log lines and metric labels read as they
    /// did before names existed, and no written name can clash with it,
    /// since a name has no `:`.
    pub name: String,
    /// Where connections go, as written: an IP address, or a host name
    /// looked up at start, at a reload and every `resolve-interval`
    /// (`policy/address.rs` holds where it is now).
    pub addr: Address,
    /// `init-addr`: where it starts when its host name does not resolve at
    /// start (a line with a host name only).
    pub init_addr: InitAddr,
    /// `resolve-prefer ipv4|ipv6`: that family among its name's answers,
    /// if there is one (`None`: the resolver's order).
    pub resolve_prefer: Option<Family>,
    /// `weight N`, 0 to 256 (default 1; 0 drains the backend).
    pub weight: u32,
    /// `backup`: used only when every normal backend is down.
    pub backup: bool,
    /// `maxconn N`: concurrent connections to this backend.
    pub maxconn: Option<u32>,
    /// `check ...`: active health checks (none without `check`).
    pub check: Option<Check>,
    /// `send-proxy` / `send-proxy-v2`: start each connection with a PROXY
    /// protocol header carrying the client's address.
    pub send_proxy: Option<Version>,
    /// What its active check does once connected: its section's `option
    /// redis-check`, `option tcp-check`... (a plain connect by default;
    /// used only with `check`).
    pub probe: Probe,
    /// `agent-check agent-port N ...`: its agent, if it has one.
    pub agent: Option<AgentCheck>,
    /// `slowstart DURATION`: once it comes back up, its weight and its
    /// `maxconn` grow from almost nothing to full over this time.
    pub slowstart: Option<Duration>,
    /// `maxqueue N`: clients that may wait for a place under its `maxconn`;
    /// beyond, a client goes to another backend, or is refused.
    pub maxqueue: Option<u32>,
    /// `on-marked-down shutdown-sessions`: its connections are cut when
    /// it is marked down.
    pub shutdown_on_down: bool,
    /// `on-marked-up shutdown-backup-sessions`: when it comes back up, the
    /// connections to its group's backups are cut.
    pub shutdown_backups_on_up: bool,
}

impl BackendServer {
    /// A backend at `addr` with every parameter at its default: named by
    /// its address, weight 1, no limit, no check, no PROXY header, no agent.
    pub fn new(addr: impl Into<Address>) -> BackendServer {
        let addr = addr.into();
        BackendServer {
            name: addr.to_string(),
            addr,
            init_addr: InitAddr::default(),
            resolve_prefer: None,
            weight: 1,
            backup: false,
            maxconn: None,
            check: None,
            send_proxy: None,
            probe: Probe::Connect,
            agent: None,
            slowstart: None,
            maxqueue: None,
            shutdown_on_down: false,
            shutdown_backups_on_up: false,
        }
    }

    /// Whether the configuration named it (else it is named by its address).
    pub fn is_named(&self) -> bool {
        self.name != self.addr.to_string()
    }

    /// How the daemon's log shows it: `db1 (127.0.0.1:9001)`, or the
    /// address alone for a server named by it; an address as written
    /// (`db1 (db.internal:5432)`): where a name is now is said beside it
    /// where it matters.
    pub fn label(&self) -> String {
        if self.is_named() {
            format!("{} ({})", self.name, self.addr)
        } else {
            self.name.clone()
        }
    }
}

/// One mistake in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as given.
    pub path: String,
    /// 1-based line; 0 when the error is about the file as a whole.
    pub line: usize,
    /// 1-based column (in characters) of the offending word.
    pub column: usize,
    /// What was wrong and what to do.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path, self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for ConfigError {}
