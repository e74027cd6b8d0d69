//! The command line: what the operator asked for, checked before anything
//! starts.
//!
//! ```text
//! proxy --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 --backend 127.0.0.1:9002 --mode epoll
//! proxy demo
//! ```
//!
//! Parsing is hand-written (no clap): a loop over the arguments, one `match`
//! per flag. Every mistake becomes a [`CliError`] that says what was wrong
//! and what to do; `main` prints it and exits with status 2, as `haproxy -c`
//! and `nginx -t` do for a bad configuration.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::log::Level;
use crate::ops::access_log::record::Format;
use crate::policy::acl::AccessList;
use crate::policy::balance::Algorithm;
use crate::settings::config::{
    AccessLogTarget, BackendServer, Config, DEFAULT_RETRIES, Frontend, Global, Timeouts,
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
}

impl Mode {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Pool => "pool",
            Mode::Epoll => "epoll",
        }
    }
}

/// How the pool mode's workers share the round-robin counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickerKind {
    /// Milestone 4: a mutex around read-index, advance, use (the seed's fix).
    Mutex,
    /// One `fetch_add` on an atomic counter.
    Atomic,
    /// Milestone 3: an unsynchronized read-then-write (a data race, on purpose).
    #[cfg(feature = "race-demo")]
    Racy,
}

impl PickerKind {
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
    /// Where connections go, in round-robin order.
    pub backends: Vec<SocketAddr>,
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
    /// How long a connect to a backend may take.
    pub connect_timeout: Duration,
    /// A connection with no bytes in either direction for this long is
    /// closed (HAProxy's `timeout client`/`server`, nginx's `proxy_timeout`).
    pub idle_timeout: Duration,
    /// After one side half-closed, how long the other direction may stay
    /// silent before the connection is closed (HAProxy's `client-fin` and
    /// `server-fin`): CLOSE_WAIT sockets cannot pile up.
    pub fin_timeout: Duration,
    /// How much to log.
    pub log_level: Level,
    /// Epoll mode: the algorithm choosing a backend (`--balance`).
    pub balance: Algorithm,
    /// Epoll mode: other backends to try after a failed connect.
    pub retries: u32,
    /// Epoll mode: the most connections open at once (`None`: no limit).
    pub maxconn: Option<u32>,
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
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(600),
            fin_timeout: Duration::from_secs(30),
            log_level: Level::Info,
            balance: Algorithm::RoundRobin,
            retries: DEFAULT_RETRIES,
            maxconn: None,
            config: None,
            workers_given: false,
            grace: None,
            access_log: None,
            log_format: None,
            admin: None,
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
            .map(|&addr| BackendServer {
                addr,
                weight: 1,
                backup: false,
                maxconn: None,
                check: None,
                send_proxy: None,
            })
            .collect();
        let timeouts = Timeouts {
            connect: self.connect_timeout,
            client: self.idle_timeout,
            server: self.idle_timeout,
            client_fin: self.fin_timeout,
            server_fin: self.fin_timeout,
            tunnel: None,
            queue: None,
            client_hs: Duration::from_secs(5),
        };
        Config {
            global: Global {
                maxconn: None,
                workers: None,
                grace: None,
                admin: self.admin,
                access_log: self.access_log.clone(),
                log_format: self.log_format,
            },
            frontends: vec![Frontend {
                name: "default".to_string(),
                listen: self.listen,
                balance: self.balance,
                maxconn: self.maxconn,
                timeouts,
                retries: self.retries,
                backends,
                access: AccessList::default(),
                maxconn_per_source: None,
                accept_proxy: false,
                proxy_from: Vec::new(),
            }],
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone)]
pub enum Command {
    /// Run the proxy.
    Run(Box<Settings>),
    /// Start fixture backends, run every mode against them, print a table.
    Demo {
        /// Fewer requests per mode (for tests).
        quick: bool,
    },
    /// Validate a configuration file and exit (`--check-config FILE`).
    CheckConfig(std::path::PathBuf),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// A command-line mistake, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (see 'proxy --help')", self.0)
    }
}

impl std::error::Error for CliError {}

fn err<T>(message: impl Into<String>) -> Result<T, CliError> {
    Err(CliError(message.into()))
}

/// The text of `proxy --help`.
pub fn help() -> String {
    let cores = runtime::threads::available_cores();
    format!(
        "\
proxy: an L4 (TCP) load balancer

USAGE
    proxy --listen ADDR --backend ADDR [--backend ADDR ...] [OPTIONS]
    proxy --config FILE [--workers N] [--backlog N] [--grace DUR] [--log-level LEVEL]
                        [--access-log WHERE] [--log-format FORMAT] [--admin ADDR]
    proxy demo [--quick]      start 3 fixture backends, run every mode, print a table
    proxy --check-config FILE validate a configuration file and exit (0 ok, 2 errors)

Every connection accepted on --listen is relayed, bytes unchanged in both
directions, to one of the backends. With --config FILE, the file describes
one or more frontends, each with its own backends, balancing, health checks
and limits (docs/OPERATIONS.md; proxy/examples/*.conf).

MODES (--mode), the milestones of the C++ project this grew from
    single   one thread, blocking sockets, one connection at a time, first backend only
    pool     an accept loop hands each connection to a pool of --threads blocking threads
    epoll    the async proxy on our own runtime: every connection on --workers event
             loops (default)

OPTIONS
    --listen ADDR            address to accept on            [default: 127.0.0.1:8080]
    --backend ADDR           a backend (repeat for more); at least one
    --mode MODE              single | pool | epoll           [default: epoll]
    --threads N              pool: worker threads            [default: 64]
    --workers N              epoll: event-loop threads       [default: {cores}, the CPUs]
    --picker KIND            pool: mutex | atomic{racy}      [default: mutex]
    --backlog N              listen queue length (capped by net.core.somaxconn) [default: 4096]
    --connect-timeout DUR    give up connecting to a backend after DUR   [default: 5s]
    --idle-timeout DUR       close a connection silent both ways for DUR [default: 10m]
    --fin-timeout DUR        after one side closed, close if the other is silent for DUR
                                                             [default: 30s]
    --balance ALG            epoll: roundrobin | leastconn | random | source
                                                             [default: roundrobin]
    --retries N              epoll: other backends to try after a failed connect
                                                             [default: 3]
    --maxconn N              epoll: most connections open at once; at the limit the
                             proxy stops accepting (the kernel queues new clients)
                                                             [default: no limit]
    --grace DUR              pool, epoll: on SIGTERM or SIGINT, stop accepting and give
                             open connections DUR to finish; a second signal exits at
                             once                            [default: 30s]
    --access-log WHERE       epoll: one line per connection to stderr, off, or a file
                                                             [default: stderr]
    --log-format FORMAT      epoll: tcplog (HAProxy's) | json [default: tcplog]
    --admin ADDR             epoll: serve GET /metrics (Prometheus) and GET /health on
                             ADDR, a loopback address        [default: off]
    --log-level LEVEL        error | warn | info | debug     [default: info]
    --config FILE            epoll: run the frontends of FILE (docs/OPERATIONS.md)
    --check-config FILE      check FILE, print every error, exit (0 ok, 2 errors)
    -h, --help               this text
    -V, --version            the version

DUR is a number with a unit: 500ms, 2s, 1m, 1h.

SIGNALS
    SIGTERM, SIGINT   stop accepting, let open connections finish for --grace, exit 0;
                      a second one exits at once (the single mode exits at once)
    SIGHUP            epoll with --config: reload the file (a bad file keeps the old one)
    SIGUSR1           epoll: reopen the --access-log file (after a rotation renamed it)

EXAMPLES
    proxy --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 --backend 127.0.0.1:9002
    proxy --mode pool --threads 16 --picker atomic --listen 127.0.0.1:8080 --backend 127.0.0.1:9001
    proxy demo
",
        racy = if cfg!(feature = "race-demo") {
            " | racy (data race, demo build)"
        } else {
            ""
        }
    )
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, CliError> {
    if args.first().map(String::as_str) == Some("demo") {
        return parse_demo(&args[1..]);
    }
    let mut settings = Settings::default();
    let mut check_config = None;
    // Flags given, to refuse those a configuration file replaces.
    let mut given: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        given.push(flag.as_str());
        let mut value = |what: &str| match it.next() {
            Some(v) => Ok(v.as_str()),
            None => err(format!("{flag} needs {what}")),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--listen" => {
                settings.listen = parse_addr(flag, value("an address like 127.0.0.1:8080")?)?
            }
            "--backend" => settings
                .backends
                .push(parse_addr(flag, value("an address like 127.0.0.1:9001")?)?),
            "--mode" => settings.mode = parse_mode(value("single, pool or epoll")?)?,
            "--threads" => settings.threads = parse_count(flag, value("a number of threads")?)?,
            "--workers" => {
                settings.workers = parse_count(flag, value("a number of workers")?)?;
                settings.workers_given = true;
            }
            "--balance" => settings.balance = parse_balance(value("an algorithm")?)?,
            "--retries" => {
                let v = value("a number of retries")?;
                settings.retries = match v.parse::<u32>() {
                    Ok(n) if n <= 100 => n,
                    _ => return err(format!("--retries: '{v}' is not a number from 0 to 100")),
                }
            }
            "--maxconn" => {
                let n = parse_count(flag, value("a number of connections")?)?;
                settings.maxconn = Some(u32::try_from(n).unwrap_or(u32::MAX));
            }
            "--config" => settings.config = Some(PathBuf::from(value("a configuration file")?)),
            "--grace" => settings.grace = Some(parse_duration_flag(flag, value("a duration")?)?),
            "--access-log" => {
                settings.access_log = Some(AccessLogTarget::parse(value("stderr, off or a file")?))
            }
            "--log-format" => {
                let v = value("tcplog or json")?;
                settings.log_format = Some(Format::parse(v).ok_or_else(|| {
                    CliError(format!(
                        "--log-format: unknown format '{v}'; use tcplog or json"
                    ))
                })?);
            }
            "--admin" => {
                let addr = parse_addr(flag, value("an address like 127.0.0.1:9100")?)?;
                if !addr.ip().is_loopback() {
                    return err(format!(
                        "--admin: {addr} is not a loopback address; the admin endpoint has no \
                         authentication, so it listens on 127.0.0.1 or ::1 only"
                    ));
                }
                settings.admin = Some(addr);
            }
            "--picker" => settings.picker = parse_picker(value("mutex or atomic")?)?,
            "--backlog" => settings.backlog = parse_count(flag, value("a queue length")?)? as u32,
            "--connect-timeout" => {
                settings.connect_timeout = parse_duration_flag(flag, value("a duration")?)?
            }
            "--idle-timeout" => {
                settings.idle_timeout = parse_duration_flag(flag, value("a duration")?)?
            }
            "--fin-timeout" => {
                settings.fin_timeout = parse_duration_flag(flag, value("a duration")?)?
            }
            "--check-config" => {
                check_config = Some(std::path::PathBuf::from(value("a configuration file")?))
            }
            "--log-level" => {
                let v = value("error, warn, info or debug")?;
                settings.log_level = match Level::parse(v) {
                    Some(level) => level,
                    None => {
                        return err(format!(
                            "--log-level: unknown level '{v}'; use error, warn, info or debug"
                        ));
                    }
                };
            }
            other => return err(unknown_flag(other)),
        }
    }
    if let Some(path) = check_config {
        return Ok(Command::CheckConfig(path));
    }
    if settings.config.is_some() {
        return check_config_flags(settings, &given);
    }
    if settings.mode == Mode::Single && given.contains(&"--grace") {
        return err(
            "--grace is for the pool and epoll modes; the single mode serves one connection \
             at a time and exits at once on SIGTERM",
        );
    }
    if settings.mode != Mode::Epoll {
        if let Some(flag) = given.iter().find(|f| EPOLL_ONLY.contains(f)) {
            return err(format!(
                "{flag} is for the epoll mode, which balances; the {} mode picks round-robin \
                 (milestones 1 to 4)",
                settings.mode.name()
            ));
        }
    }
    if settings.backends.is_empty() {
        return err("no backend: give at least one --backend ADDR (or run 'proxy demo')");
    }
    Ok(Command::Run(Box::new(settings)))
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
];

/// Flags that a configuration file replaces: with `--config`, the file says
/// these (per frontend), and a flag would be ambiguous.
const FILE_REPLACES: &[(&str, &str)] = &[
    ("--listen", "listen"),
    ("--backend", "backend"),
    ("--balance", "balance"),
    ("--retries", "retries"),
    ("--maxconn", "maxconn"),
    ("--connect-timeout", "timeout connect"),
    ("--idle-timeout", "timeout client / timeout server"),
    ("--fin-timeout", "timeout client-fin / timeout server-fin"),
    ("--threads", "(the pool mode does not read files)"),
    ("--picker", "(the pool mode does not read files)"),
];

fn check_config_flags(settings: Settings, given: &[&str]) -> Result<Command, CliError> {
    if settings.mode != Mode::Epoll {
        return err(format!(
            "--config runs the epoll mode; the {} mode takes flags only",
            settings.mode.name()
        ));
    }
    if let Some((flag, option)) = FILE_REPLACES.iter().find(|(f, _)| given.contains(f)) {
        return err(format!(
            "{flag} cannot be combined with --config: the file sets it ({option})"
        ));
    }
    Ok(Command::Run(Box::new(settings)))
}

fn parse_balance(value: &str) -> Result<Algorithm, CliError> {
    Algorithm::parse(value).ok_or_else(|| {
        CliError(format!(
            "--balance: unknown algorithm '{value}'; use roundrobin, leastconn, random or source"
        ))
    })
}

fn parse_demo(args: &[String]) -> Result<Command, CliError> {
    let mut quick = false;
    for arg in args {
        match arg.as_str() {
            "--quick" => quick = true,
            "-h" | "--help" => return Ok(Command::Help),
            other => {
                return err(format!(
                    "demo: unknown option '{other}'; the demo takes only --quick"
                ));
            }
        }
    }
    Ok(Command::Demo { quick })
}

const FLAGS: &[&str] = &[
    "--listen",
    "--backend",
    "--mode",
    "--threads",
    "--workers",
    "--picker",
    "--backlog",
    "--connect-timeout",
    "--idle-timeout",
    "--fin-timeout",
    "--log-level",
    "--check-config",
    "--config",
    "--grace",
    "--access-log",
    "--log-format",
    "--admin",
    "--balance",
    "--retries",
    "--maxconn",
    "--help",
    "--version",
];

fn unknown_flag(flag: &str) -> String {
    match FLAGS.iter().min_by_key(|known| edit_distance(flag, known)) {
        Some(best) if edit_distance(flag, best) <= 2 => {
            format!("unknown option '{flag}' (did you mean '{best}'?)")
        }
        _ => format!("unknown option '{flag}'"),
    }
}

/// Levenshtein distance, for "did you mean" hints (here and in [`crate::settings::config`]).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

fn parse_addr(flag: &str, value: &str) -> Result<SocketAddr, CliError> {
    value.parse().or_else(|_| {
        err(format!(
            "{flag}: '{value}' is not an IP address with a port, like 127.0.0.1:8080 or [::1]:8080 \
             (host names are not resolved)"
        ))
    })
}

fn parse_mode(value: &str) -> Result<Mode, CliError> {
    match value {
        "single" => Ok(Mode::Single),
        "pool" => Ok(Mode::Pool),
        "epoll" => Ok(Mode::Epoll),
        other => err(format!(
            "--mode: unknown mode '{other}'; use single, pool or epoll"
        )),
    }
}

fn parse_picker(value: &str) -> Result<PickerKind, CliError> {
    match value {
        "mutex" => Ok(PickerKind::Mutex),
        "atomic" => Ok(PickerKind::Atomic),
        #[cfg(feature = "race-demo")]
        "racy" => Ok(PickerKind::Racy),
        #[cfg(not(feature = "race-demo"))]
        "racy" => err(
            "--picker racy exists only in a build with the race demonstration: \
             cargo build -p proxy --features race-demo",
        ),
        other => err(format!(
            "--picker: unknown picker '{other}'; use mutex or atomic"
        )),
    }
}

fn parse_count(flag: &str, value: &str) -> Result<usize, CliError> {
    match value.parse::<usize>() {
        Ok(0) => err(format!("{flag}: must be at least 1")),
        Ok(n) if n <= 1 << 20 => Ok(n),
        Ok(_) => err(format!("{flag}: {value} is unreasonably large")),
        Err(_) => err(format!("{flag}: '{value}' is not a whole number")),
    }
}

/// A timeout flag: a duration with a unit, and never zero (a zero connect
/// timeout would fail every connect, a zero idle timeout reset every
/// connection at once).
fn parse_duration_flag(flag: &str, value: &str) -> Result<Duration, CliError> {
    match parse_duration(value) {
        Ok(d) if d.is_zero() => err(format!(
            "{flag}: {value} would end every connection at once; use at least 1ms"
        )),
        Ok(d) => Ok(d),
        Err(why) => err(format!("{flag}: {why}")),
    }
}

/// Parses a duration with a unit: `500ms`, `2s`, `1m`, `1h` (also `us` and `d`).
/// A bare number is refused: `--idle-timeout 30` could mean seconds or
/// milliseconds, and guessing wrong by a factor of 1,000 is worse than asking.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{value}' is not a duration like 500ms, 2s, 1m or 1h"))?;
    let scale = match unit {
        "us" => Duration::from_micros(1),
        "ms" => Duration::from_millis(1),
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        "" => {
            return Err(format!(
                "'{value}' has no unit: write {value}s or {value}ms"
            ));
        }
        other => {
            return Err(format!(
                "'{value}': unknown unit '{other}'; use us, ms, s, m, h or d"
            ));
        }
    };
    u32::try_from(n)
        .ok()
        .and_then(|n| scale.checked_mul(n))
        .ok_or_else(|| format!("'{value}' is too long"))
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
        assert_eq!(s.connect_timeout, Duration::from_millis(500));
        assert_eq!(s.idle_timeout, Duration::from_secs(60));
        assert_eq!(s.fin_timeout, Duration::from_secs(2));
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
        let error = |s: &str| parse(&args(s)).unwrap_err().0;
        assert!(error("").contains("no backend"));
        assert!(error("--backend localhost:80").contains("not an IP address"));
        assert!(error("--backend 127.0.0.1:1 --mode fast").contains("use single, pool or epoll"));
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
    fn demo_help_and_version() {
        assert!(matches!(
            parse(&args("demo")),
            Ok(Command::Demo { quick: false })
        ));
        assert!(matches!(
            parse(&args("demo --quick")),
            Ok(Command::Demo { quick: true })
        ));
        assert!(matches!(parse(&args("--help")), Ok(Command::Help)));
        assert!(matches!(parse(&args("-V")), Ok(Command::Version)));
        assert!(help().contains("--mode MODE"));
        assert!(help().contains("--check-config FILE"));
        assert!(matches!(
            parse(&args("--check-config lb.conf")),
            Ok(Command::CheckConfig(p)) if p == std::path::Path::new("lb.conf")
        ));
        assert!(
            parse(&args("--check-config"))
                .unwrap_err()
                .0
                .contains("needs a configuration file")
        );
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("99999999999999999999s").is_err());
    }

    #[cfg(not(feature = "race-demo"))]
    #[test]
    fn the_racy_picker_needs_the_demo_build() {
        let e = parse(&args("--backend 127.0.0.1:1 --picker racy"))
            .unwrap_err()
            .0;
        assert!(e.contains("--features race-demo"), "{e}");
    }
}
