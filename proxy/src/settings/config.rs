//! The configuration file: several frontends, each with its own pool of
//! backends, in a small line-oriented format in the spirit of HAProxy's.
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
//! equivalent, is in `docs/OPERATIONS.md`. `proxy --config FILE` runs the
//! file's frontends (the epoll mode, [`crate::epoll`]); `proxy --check-config
//! FILE` validates it and exits. Without `--config`, the command-line flags
//! describe one frontend, named `default`
//! ([`Settings::to_config`](crate::settings::cli::Settings::to_config)).
//!
//! Parsing never stops at the first mistake and never panics: every
//! problem of the file becomes a [`ConfigError`] that says where
//! (`file:line:column` of the offending word), what was wrong, and what to do.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::conn::proxy_protocol::Version;
use crate::ops::access_log::record::Format;
use crate::policy::acl::AccessList;
use crate::policy::balance::Algorithm;
use crate::policy::cidr::Cidr;
use crate::policy::health::Check;
use crate::settings::cli::{edit_distance, parse_duration};

/// A whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Process-wide settings (the `global` section; defaults if absent).
    pub global: Global,
    /// One per `frontend` section, in file order.
    pub frontends: Vec<Frontend>,
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
    /// `admin ADDR`: the metrics and health endpoint (`None`: off).
    pub admin: Option<SocketAddr>,
    /// `access-log stderr|off|PATH` (`None`: the default, stderr).
    pub access_log: Option<AccessLogTarget>,
    /// `log-format tcplog|json` (`None`: the default, tcplog).
    pub log_format: Option<Format>,
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

/// A frontend's timeouts (`timeout KIND DURATION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `timeout connect`: give up connecting to a backend (default 5s).
    pub connect: Duration,
    /// `timeout client`: the client side silent this long (default 10m).
    pub client: Duration,
    /// `timeout server`: the backend side silent this long (default 10m).
    pub server: Duration,
    /// `timeout client-fin`: the client side silent this long once one
    /// direction is shut, e.g. after the backend's FIN (default 30s).
    pub client_fin: Duration,
    /// `timeout server-fin`: the backend side silent this long once one
    /// direction is shut, e.g. after the client's FIN (default 30s).
    pub server_fin: Duration,
    /// `timeout tunnel`: once connected, replaces `client` and `server`
    /// (HAProxy's meaning; default: unset, so those two apply).
    pub tunnel: Option<Duration>,
    /// `timeout queue`: how long a client may wait for a backend below its
    /// `maxconn` (default: unset, meaning `timeout connect`, as HAProxy).
    pub queue: Option<Duration>,
    /// `timeout client-hs`: how long an `accept-proxy` client may take to
    /// send its PROXY header (default 5s).
    pub client_hs: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            client: Duration::from_secs(600),
            server: Duration::from_secs(600),
            client_fin: Duration::from_secs(30),
            server_fin: Duration::from_secs(30),
            tunnel: None,
            queue: None,
            client_hs: Duration::from_secs(5),
        }
    }
}

impl Timeouts {
    /// The idle limit of an established connection: `tunnel` if set, else
    /// the shorter of `client` and `server` (a silent tunnel is silent on
    /// both sides, so the first of the two to expire ends it).
    pub fn idle(&self) -> Duration {
        self.tunnel.unwrap_or(self.client.min(self.server))
    }

    /// How long a client may wait for a backend slot.
    pub fn queue(&self) -> Duration {
        self.queue.unwrap_or(self.connect)
    }
}

/// Default `retries`, HAProxy's.
pub const DEFAULT_RETRIES: u32 = 3;
/// The largest `weight`.
pub const MAX_WEIGHT: u32 = 256;

/// A `frontend` section: one listener and its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontend {
    /// The section's name, unique in the file.
    pub name: String,
    /// `listen ADDR`: where clients connect.
    pub listen: SocketAddr,
    /// `balance`: the algorithm.
    pub balance: Algorithm,
    /// `maxconn N`: concurrent connections on this frontend.
    pub maxconn: Option<u32>,
    /// `timeout ...`.
    pub timeouts: Timeouts,
    /// `retries N`: connects to other backends after a failed one.
    pub retries: u32,
    /// `backend ADDR ...`, in file order.
    pub backends: Vec<BackendServer>,
    /// `allow CIDR...` / `deny CIDR...`: who may connect (default: anyone).
    pub access: AccessList,
    /// `maxconn-per-source N`: concurrent connections from one address.
    pub maxconn_per_source: Option<u32>,
    /// `accept-proxy`: clients start with a PROXY protocol header (v1 or v2)
    /// giving the real client's address (behind another load balancer).
    pub accept_proxy: bool,
    /// `accept-proxy CIDR...`: the peers trusted to send that header (the
    /// load balancers in front); anyone else is refused before a byte is
    /// read. Empty: any peer, which lets anyone who reaches the listener
    /// claim any client address.
    pub proxy_from: Vec<Cidr>,
}

/// One `backend` line of a frontend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendServer {
    /// Where connections go.
    pub addr: SocketAddr,
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

/// Reads and parses a file. Unreadable or non-UTF-8 files are errors too.
pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        vec![ConfigError {
            path: name.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the file: {e}"),
        }]
    })?;
    match std::str::from_utf8(&bytes) {
        Ok(text) => parse(&name, text),
        Err(e) => {
            // Everything before the bad byte is valid UTF-8.
            let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
            let line = valid.matches('\n').count() + 1;
            let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Err(vec![ConfigError {
                path: name,
                line,
                column,
                message: "the file is not UTF-8 text; save it as UTF-8".to_string(),
            }])
        }
    }
}

/// A word of a line, with its 1-based column.
#[derive(Debug, Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    column: usize,
}

/// Splits a line into words, dropping the comment (`#` to the end).
fn words(line: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut end = line.len();
    for (column, (byte, c)) in line.char_indices().enumerate() {
        if c == '#' {
            end = byte;
            break;
        }
        if c.is_whitespace() {
            if let Some((b, col)) = start.take() {
                out.push(Word {
                    text: &line[b..byte],
                    column: col + 1,
                });
            }
        } else if start.is_none() {
            start = Some((byte, column));
        }
    }
    if let Some((b, col)) = start {
        out.push(Word {
            text: &line[b..end],
            column: col + 1,
        });
    }
    out
}

const SECTIONS: &[&str] = &["global", "frontend"];
const GLOBAL_OPTIONS: &[&str] = &[
    "maxconn",
    "workers",
    "grace",
    "admin",
    "access-log",
    "log-format",
];
const FRONTEND_OPTIONS: &[&str] = &[
    "listen",
    "balance",
    "maxconn",
    "timeout",
    "retries",
    "backend",
    "allow",
    "deny",
    "maxconn-per-source",
    "accept-proxy",
];
const TIMEOUTS: &[&str] = &[
    "connect",
    "client",
    "server",
    "client-fin",
    "server-fin",
    "tunnel",
    "queue",
    "client-hs",
];

/// Where a `timeout` line's duration goes.
enum TimeoutSlot<'a> {
    Always(&'a mut Duration),
    Optional(&'a mut Option<Duration>),
}
const SERVER_PARAMS: &[&str] = &[
    "weight",
    "backup",
    "maxconn",
    "check",
    "send-proxy",
    "send-proxy-v2",
];
const CHECK_PARAMS: &[&str] = &["inter", "fall", "rise", "timeout"];

/// The closest of `candidates` to `word`, if close enough to be a typo.
fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let best = candidates.iter().min_by_key(|c| edit_distance(word, c))?;
    let limit = if word.chars().count() <= 3 { 1 } else { 2 };
    (edit_distance(word, best) <= limit).then_some(*best)
}

fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    match suggest(word, candidates) {
        Some(best) => format!(" (did you mean '{best}'?)"),
        None => String::new(),
    }
}

/// Where the parser is in the file.
enum Section {
    /// Before the first section.
    None,
    Global,
    /// The index into `frontends` of the open section.
    Frontend(usize),
    /// After a bad section header: its lines are skipped, not reported.
    Skip,
}

/// A frontend while its lines are read: everything optional until the end.
struct FrontendDraft {
    name: String,
    line: usize,
    column: usize,
    listen: Option<(SocketAddr, usize, usize)>,
    balance: Algorithm,
    maxconn: Option<u32>,
    timeouts: Timeouts,
    retries: u32,
    backends: Vec<(BackendServer, usize)>,
    access: AccessList,
    maxconn_per_source: Option<u32>,
    accept_proxy: bool,
    proxy_from: Vec<Cidr>,
    /// `backend` lines, good or bad (a bad one is reported on its own).
    backend_lines: usize,
    /// Options given once per frontend, with the line where each was first seen.
    seen: Vec<(String, usize)>,
}

struct Parser<'p> {
    path: &'p str,
    errors: Vec<ConfigError>,
    line: usize,
}

impl Parser<'_> {
    fn error(&mut self, column: usize, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path: self.path.to_string(),
            line: self.line,
            column,
            message: message.into(),
        });
    }

    /// The value word after `option`, or an error at `option`.
    fn value<'a>(&mut self, words: &[Word<'a>], i: usize, what: &str) -> Option<Word<'a>> {
        match words.get(i + 1) {
            Some(w) => Some(*w),
            None => {
                let option = words.get(i).map_or("", |w| w.text);
                let column = words.get(i).map_or(1, |w| w.column);
                self.error(column, format!("'{option}' needs {what}"));
                None
            }
        }
    }

    /// Reports any word after the `used` first ones.
    fn no_more(&mut self, words: &[Word<'_>], used: usize) {
        if let Some(extra) = words.get(used) {
            let head = words[..used.min(words.len())]
                .iter()
                .map(|w| w.text)
                .collect::<Vec<_>>()
                .join(" ");
            self.error(
                extra.column,
                format!(
                    "unexpected '{}' after '{head}'; put one option per line",
                    extra.text
                ),
            );
        }
    }

    fn number(&mut self, option: &str, w: Word<'_>, min: u32, max: u32, hint: &str) -> Option<u32> {
        let parsed = if !w.text.is_empty() && w.text.bytes().all(|b| b.is_ascii_digit()) {
            w.text.parse::<u64>().ok()
        } else {
            None
        };
        match parsed {
            None => {
                self.error(
                    w.column,
                    format!("{option}: '{}' is not a whole number", w.text),
                );
                None
            }
            Some(n) if n < u64::from(min) || n > u64::from(max) => {
                self.error(
                    w.column,
                    format!(
                        "{option}: {} is out of range; use {min} to {max}{hint}",
                        w.text
                    ),
                );
                None
            }
            Some(n) => Some(n as u32),
        }
    }

    fn duration(&mut self, option: &str, w: Word<'_>) -> Option<Duration> {
        match parse_duration(w.text) {
            Ok(d) if d.is_zero() => {
                self.error(
                    w.column,
                    format!(
                        "{option}: {} would end everything at once; use at least 1ms",
                        w.text
                    ),
                );
                None
            }
            Ok(d) => Some(d),
            Err(why) => {
                self.error(w.column, format!("{option}: {why}"));
                None
            }
        }
    }

    fn addr(&mut self, option: &str, w: Word<'_>) -> Option<SocketAddr> {
        match w.text.parse() {
            Ok(addr) => Some(addr),
            Err(_) => {
                self.error(
                    w.column,
                    format!(
                        "{option}: '{}' is not an IP address with a port, like 127.0.0.1:8080 \
                         or [::1]:8080 (host names are not resolved)",
                        w.text
                    ),
                );
                None
            }
        }
    }
}

/// Parses the text of a configuration file; `path` only names it in errors.
/// Returns every error of the file, in order, or the configuration.
pub fn parse(path: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    let mut p = Parser {
        path,
        errors: Vec::new(),
        line: 0,
    };
    let mut global = Global::default();
    let mut global_line: Option<usize> = None;
    let mut global_seen: Vec<(String, usize)> = Vec::new();
    let mut drafts: Vec<FrontendDraft> = Vec::new();
    let mut section = Section::None;

    for (index, line) in text.lines().enumerate() {
        p.line = index + 1;
        let words = words(line);
        let Some(first) = words.first().copied() else {
            continue;
        };
        match first.text {
            "global" => {
                if let Some(earlier) = global_line {
                    p.error(
                        first.column,
                        format!(
                            "a second 'global' section (the first is at line {earlier}); \
                             merge them into one"
                        ),
                    );
                    section = Section::Skip;
                } else {
                    global_line = Some(p.line);
                    section = Section::Global;
                    p.no_more(&words, 1);
                }
                continue;
            }
            "frontend" => {
                section = Section::Skip;
                let Some(name) = p.value(&words, 0, "a name, like 'frontend web'") else {
                    continue;
                };
                if !name
                    .text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                {
                    p.error(
                        name.column,
                        format!(
                            "frontend name '{}': use only letters, digits, '-', '_' and '.'",
                            name.text
                        ),
                    );
                    continue;
                }
                p.no_more(&words, 2);
                if let Some(other) = drafts.iter().find(|d| d.name == name.text) {
                    let earlier = other.line;
                    p.error(
                        name.column,
                        format!(
                            "duplicate frontend '{}' (the first is at line {earlier}); \
                             give each frontend its own name",
                            name.text
                        ),
                    );
                    continue;
                }
                drafts.push(FrontendDraft {
                    name: name.text.to_string(),
                    line: p.line,
                    column: first.column,
                    listen: None,
                    balance: Algorithm::default(),
                    maxconn: None,
                    timeouts: Timeouts::default(),
                    retries: DEFAULT_RETRIES,
                    backends: Vec::new(),
                    access: AccessList::default(),
                    maxconn_per_source: None,
                    accept_proxy: false,
                    proxy_from: Vec::new(),
                    backend_lines: 0,
                    seen: Vec::new(),
                });
                section = Section::Frontend(drafts.len() - 1);
                continue;
            }
            _ => {}
        }
        match section {
            Section::Skip => {}
            Section::None => {
                let word = first.text;
                let message = if let Some(hint) = foreign_section(word) {
                    format!("unknown section '{word}': {hint}")
                } else if GLOBAL_OPTIONS.contains(&word) || FRONTEND_OPTIONS.contains(&word) {
                    format!(
                        "'{word}' outside any section; start one with 'global' or \
                         'frontend NAME' above it"
                    )
                } else {
                    format!(
                        "unknown section '{word}'{}; a file has 'global' and 'frontend NAME' \
                         sections",
                        did_you_mean(word, SECTIONS)
                    )
                };
                p.error(first.column, message);
                section = Section::Skip;
            }
            Section::Global => {
                global_option(&mut p, &words, &mut global, &mut global_seen);
            }
            Section::Frontend(i) => {
                if let Some(draft) = drafts.get_mut(i) {
                    frontend_option(&mut p, &words, draft);
                }
            }
        }
    }

    // What can only be checked once a section is complete.
    let mut frontends = Vec::new();
    for draft in drafts {
        p.line = draft.line;
        let name = &draft.name;
        let Some((listen, listen_line, listen_column)) = draft.listen else {
            p.error(
                draft.column,
                format!(
                    "frontend '{name}' has no 'listen'; add a line like 'listen 127.0.0.1:8080'"
                ),
            );
            continue;
        };
        if draft.backend_lines == 0 {
            p.error(
                draft.column,
                format!(
                    "frontend '{name}' has no backend; add a line like 'backend 127.0.0.1:9001'"
                ),
            );
        }
        // Port 0 asks the kernel for a free port: two such frontends never clash.
        let clash = |f: &&Frontend| f.listen == listen && listen.port() != 0;
        if let Some(other) = frontends.iter().find(clash) {
            p.line = listen_line;
            let other = other.name.clone();
            p.error(
                listen_column,
                format!(
                    "frontend '{name}' listens on {listen}, as frontend '{other}' does; \
                     give each frontend its own address"
                ),
            );
        }
        frontends.push(Frontend {
            name: draft.name,
            listen,
            balance: draft.balance,
            maxconn: draft.maxconn,
            timeouts: draft.timeouts,
            retries: draft.retries,
            backends: draft.backends.into_iter().map(|(b, _)| b).collect(),
            access: draft.access,
            maxconn_per_source: draft.maxconn_per_source,
            accept_proxy: draft.accept_proxy,
            proxy_from: draft.proxy_from,
        });
    }
    if p.errors.is_empty() && frontends.is_empty() {
        p.line = 0;
        p.error(
            0,
            "no frontend; add a 'frontend NAME' section with a 'listen' and a 'backend' \
             (see docs/OPERATIONS.md)",
        );
    }
    p.errors.sort_by_key(|e| (e.line, e.column));
    if p.errors.is_empty() {
        Ok(Config { global, frontends })
    } else {
        Err(p.errors)
    }
}

/// Section names of HAProxy and nginx, and what to write instead.
fn foreign_section(word: &str) -> Option<&'static str> {
    match word {
        "defaults" => Some("there are no defaults sections; set each option in its frontend"),
        "listen" => Some("write 'frontend NAME' and put 'listen ADDR' inside it"),
        "backend" | "upstream" => {
            Some("backends are listed inside their frontend, one 'backend ADDR ...' line each")
        }
        "stream" | "server" => Some("write 'frontend NAME' sections (see docs/OPERATIONS.md)"),
        _ => None,
    }
}

/// Marks `option` as given in this section; reports a second one.
fn once(p: &mut Parser<'_>, seen: &mut Vec<(String, usize)>, key: &str, column: usize) -> bool {
    if let Some((_, line)) = seen.iter().find(|(k, _)| k == key) {
        let line = *line;
        p.error(
            column,
            format!("'{key}' is given twice (first at line {line}); keep one"),
        );
        return false;
    }
    seen.push((key.to_string(), p.line));
    true
}

fn global_option(
    p: &mut Parser<'_>,
    words: &[Word<'_>],
    global: &mut Global,
    seen: &mut Vec<(String, usize)>,
) {
    let first = words[0];
    match first.text {
        "maxconn" | "workers" => {
            let what = if first.text == "maxconn" {
                "a number of connections"
            } else {
                "a number of threads"
            };
            let Some(v) = p.value(words, 0, what) else {
                return;
            };
            p.no_more(words, 2);
            if !once(p, seen, first.text, first.column) {
                return;
            }
            if first.text == "maxconn" {
                global.maxconn =
                    p.number("maxconn", v, 1, 10_000_000, "; leave it out for no limit");
            } else {
                global.workers = p.number("workers", v, 1, 1024, "");
            }
        }
        "grace" => {
            let Some(v) = p.value(words, 0, "a duration, like 30s") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, seen, "grace", first.column) {
                global.grace = p.duration("grace", v);
            }
        }
        "admin" => {
            let Some(v) = p.value(words, 0, "an address like 127.0.0.1:9100") else {
                return;
            };
            p.no_more(words, 2);
            if !once(p, seen, "admin", first.column) {
                return;
            }
            if let Some(addr) = p.addr("admin", v) {
                if addr.ip().is_loopback() {
                    global.admin = Some(addr);
                } else {
                    p.error(
                        v.column,
                        format!(
                            "admin: {addr} is not a loopback address; the admin endpoint has \
                             no authentication, so it listens on 127.0.0.1 or ::1 only"
                        ),
                    );
                }
            }
        }
        "access-log" => {
            let Some(v) = p.value(words, 0, "stderr, off or a file path") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, seen, "access-log", first.column) {
                global.access_log = Some(AccessLogTarget::parse(v.text));
            }
        }
        "log-format" => {
            let Some(v) = p.value(words, 0, "tcplog or json") else {
                return;
            };
            p.no_more(words, 2);
            if !once(p, seen, "log-format", first.column) {
                return;
            }
            match Format::parse(v.text) {
                Some(format) => global.log_format = Some(format),
                None => p.error(
                    v.column,
                    format!("unknown log format '{}'; use tcplog or json", v.text),
                ),
            }
        }
        other if FRONTEND_OPTIONS.contains(&other) => p.error(
            first.column,
            format!("'{other}' belongs in a frontend section, not in 'global'"),
        ),
        other => {
            let mut candidates = GLOBAL_OPTIONS.to_vec();
            candidates.extend_from_slice(SECTIONS);
            p.error(
                first.column,
                format!(
                    "unknown option '{other}'{} in 'global', which takes maxconn, workers, grace, admin, access-log and log-format",
                    did_you_mean(other, &candidates)
                ),
            );
        }
    }
}

fn frontend_option(p: &mut Parser<'_>, words: &[Word<'_>], f: &mut FrontendDraft) {
    let first = words[0];
    match first.text {
        "listen" => {
            let Some(v) = p.value(words, 0, "an address like 127.0.0.1:8080") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, &mut f.seen, "listen", first.column) {
                if let Some(addr) = p.addr("listen", v) {
                    f.listen = Some((addr, p.line, v.column));
                }
            }
        }
        "balance" => {
            let Some(v) = p.value(words, 0, "roundrobin, leastconn, random or source") else {
                return;
            };
            p.no_more(words, 2);
            if !once(p, &mut f.seen, "balance", first.column) {
                return;
            }
            match Algorithm::parse(v.text) {
                Some(b) => f.balance = b,
                None => p.error(
                    v.column,
                    format!(
                        "unknown balance algorithm '{}'{}; use roundrobin, leastconn, random \
                         or source",
                        v.text,
                        did_you_mean(v.text, &Algorithm::ALL.map(Algorithm::name))
                    ),
                ),
            }
        }
        "maxconn" => {
            let Some(v) = p.value(words, 0, "a number of connections") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, &mut f.seen, "maxconn", first.column) {
                f.maxconn = p.number("maxconn", v, 1, 10_000_000, "; leave it out for no limit");
            }
        }
        "retries" => {
            let Some(v) = p.value(words, 0, "a number of retries") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, &mut f.seen, "retries", first.column) {
                if let Some(n) = p.number("retries", v, 0, 100, "") {
                    f.retries = n;
                }
            }
        }
        "timeout" => {
            let Some(kind) = p.value(words, 0, "a kind and a duration, like 'timeout connect 5s'")
            else {
                return;
            };
            let slot = match kind.text {
                "connect" => TimeoutSlot::Always(&mut f.timeouts.connect),
                "client" => TimeoutSlot::Always(&mut f.timeouts.client),
                "server" => TimeoutSlot::Always(&mut f.timeouts.server),
                "client-fin" => TimeoutSlot::Always(&mut f.timeouts.client_fin),
                "server-fin" => TimeoutSlot::Always(&mut f.timeouts.server_fin),
                "tunnel" => TimeoutSlot::Optional(&mut f.timeouts.tunnel),
                "queue" => TimeoutSlot::Optional(&mut f.timeouts.queue),
                "client-hs" => TimeoutSlot::Always(&mut f.timeouts.client_hs),
                "check" => {
                    p.error(
                        kind.column,
                        "'timeout check' is set per backend: write 'check timeout DUR' on \
                         the backend line",
                    );
                    return;
                }
                other => {
                    p.error(
                        kind.column,
                        format!(
                            "unknown timeout '{other}'{}; use connect, client, server, \
                             client-fin, server-fin, tunnel, queue or client-hs",
                            did_you_mean(other, TIMEOUTS)
                        ),
                    );
                    return;
                }
            };
            let option = format!("timeout {}", kind.text);
            let Some(v) = p.value(words, 1, "a duration, like 5s") else {
                return;
            };
            p.no_more(words, 3);
            let mut seen = std::mem::take(&mut f.seen);
            let fresh = once(p, &mut seen, &option, first.column);
            f.seen = seen;
            if fresh {
                if let Some(d) = p.duration(&option, v) {
                    match slot {
                        TimeoutSlot::Always(slot) => *slot = d,
                        TimeoutSlot::Optional(slot) => *slot = Some(d),
                    }
                }
            }
        }
        "allow" | "deny" => {
            if words.len() < 2 {
                p.error(
                    first.column,
                    format!(
                        "'{}' needs address ranges, like '{} 10.0.0.0/8 2001:db8::/32'",
                        first.text, first.text
                    ),
                );
                return;
            }
            for w in &words[1..] {
                match Cidr::parse(w.text) {
                    Ok(cidr) if first.text == "allow" => f.access.allow.push(cidr),
                    Ok(cidr) => f.access.deny.push(cidr),
                    Err(why) => p.error(w.column, format!("{}: {why}", first.text)),
                }
            }
        }
        "maxconn-per-source" => {
            let Some(v) = p.value(words, 0, "a number of connections") else {
                return;
            };
            p.no_more(words, 2);
            if once(p, &mut f.seen, "maxconn-per-source", first.column) {
                f.maxconn_per_source = p.number(
                    "maxconn-per-source",
                    v,
                    1,
                    10_000_000,
                    "; leave it out for no limit",
                );
            }
        }
        "accept-proxy" => {
            if !once(p, &mut f.seen, "accept-proxy", first.column) {
                return;
            }
            f.accept_proxy = true;
            for w in &words[1..] {
                match Cidr::parse(w.text) {
                    Ok(cidr) => f.proxy_from.push(cidr),
                    Err(why) => p.error(w.column, format!("accept-proxy: {why}")),
                }
            }
        }
        "backend" => {
            f.backend_lines += 1;
            let Some(v) = p.value(words, 0, "an address like 127.0.0.1:9001") else {
                return;
            };
            let addr = p.addr("backend", v);
            let server = backend_params(p, &words[2..], addr);
            if let Some(server) = server {
                if let Some((_, line)) = f.backends.iter().find(|(b, _)| b.addr == server.addr) {
                    let line = *line;
                    p.error(
                        v.column,
                        format!(
                            "backend {} is already in this frontend (line {line}); list it once \
                             and use 'weight' to send it more",
                            server.addr
                        ),
                    );
                } else {
                    f.backends.push((server, p.line));
                }
            }
        }
        other if GLOBAL_OPTIONS.contains(&other) => p.error(
            first.column,
            format!("'{other}' belongs in the 'global' section, not in a frontend"),
        ),
        other => {
            let hint = match other {
                "bind" => " (HAProxy's 'bind' is 'listen ADDR' here)".to_string(),
                "server" => " (HAProxy's 'server NAME ADDR' is 'backend ADDR' here)".to_string(),
                "proxy_pass" => " (list the backends with 'backend ADDR' lines)".to_string(),
                _ => {
                    let mut candidates = FRONTEND_OPTIONS.to_vec();
                    candidates.extend_from_slice(SECTIONS);
                    did_you_mean(other, &candidates)
                }
            };
            let hint = if hint.is_empty() {
                match suggest(other, SERVER_PARAMS).or_else(|| suggest(other, CHECK_PARAMS)) {
                    Some(param) => format!(
                        "; '{param}' goes on a backend line, like 'backend ADDR {param} ...'"
                    ),
                    None => "; a frontend takes listen, balance, maxconn, timeout, retries, \
                             backend, allow, deny, maxconn-per-source and accept-proxy"
                        .to_string(),
                }
            } else {
                hint
            };
            p.error(first.column, format!("unknown option '{other}'{hint}"));
        }
    }
}

/// The words after `backend ADDR`. `addr` is `None` when the address was
/// bad: the parameters are still checked, for their own errors.
fn backend_params(
    p: &mut Parser<'_>,
    words: &[Word<'_>],
    addr: Option<SocketAddr>,
) -> Option<BackendServer> {
    let mut server = BackendServer {
        addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        weight: 1,
        backup: false,
        maxconn: None,
        check: None,
        send_proxy: None,
    };
    let mut ok = addr.is_some();
    let mut check_timeout: Option<Duration> = None;
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while let Some(w) = words.get(i).copied() {
        let in_check = server.check.is_some();
        // Parameters that take a value.
        let takes_value =
            matches!(w.text, "weight" | "maxconn") || (in_check && CHECK_PARAMS.contains(&w.text));
        if takes_value {
            let Some(v) = words.get(i + 1).copied() else {
                p.error(w.column, format!("'{}' needs a value", w.text));
                return None;
            };
            i += 2;
            let key = if in_check && CHECK_PARAMS.contains(&w.text) {
                format!("check {}", w.text)
            } else {
                w.text.to_string()
            };
            if !once_on_line(p, &mut seen, &key, w.column) {
                ok = false;
                continue;
            }
            let mut check = server.check.unwrap_or_default();
            let parsed = match w.text {
                "weight" => p
                    .number("weight", v, 0, MAX_WEIGHT, " (0 drains the backend)")
                    .map(|n| server.weight = n),
                "maxconn" => p
                    .number("maxconn", v, 1, 10_000_000, "; leave it out for no limit")
                    .map(|n| server.maxconn = Some(n)),
                "inter" => p.duration("check inter", v).map(|d| check.inter = d),
                "fall" => p
                    .number("check fall", v, 1, 100, "")
                    .map(|n| check.fall = n),
                "rise" => p
                    .number("check rise", v, 1, 100, "")
                    .map(|n| check.rise = n),
                _ => p
                    .duration("check timeout", v)
                    .map(|d| check_timeout = Some(d)),
            };
            if in_check {
                server.check = Some(check);
            }
            ok &= parsed.is_some();
            continue;
        }
        i += 1;
        match w.text {
            "backup" | "check" => {
                if !once_on_line(p, &mut seen, w.text, w.column) {
                    ok = false;
                } else if w.text == "backup" {
                    server.backup = true;
                } else {
                    server.check = Some(Check::default());
                }
            }
            "send-proxy" | "send-proxy-v2" => {
                if !once_on_line(p, &mut seen, "send-proxy", w.column) {
                    ok = false;
                } else if w.text == "send-proxy" {
                    server.send_proxy = Some(Version::V1);
                } else {
                    server.send_proxy = Some(Version::V2);
                }
            }
            other if CHECK_PARAMS.contains(&other) => {
                p.error(
                    w.column,
                    format!(
                        "'{other}' is a health-check parameter: write it after 'check', \
                         like 'check {other} ...'"
                    ),
                );
                // Its value would be reported as unknown too: stop here.
                return None;
            }
            other => {
                let mut candidates = SERVER_PARAMS.to_vec();
                if in_check {
                    candidates.extend_from_slice(CHECK_PARAMS);
                }
                let hint = match suggest(other, &candidates) {
                    Some(best) => format!(" (did you mean '{best}'?)"),
                    None if in_check => "; a backend takes weight, maxconn, backup, \
                                         send-proxy(-v2) and check (with inter, fall, rise, \
                                         timeout)"
                        .to_string(),
                    None => "; a backend takes weight, maxconn, backup, send-proxy(-v2) and check"
                        .to_string(),
                };
                p.error(w.column, format!("unknown option '{other}'{hint}"));
                // What follows may be its value: stop at the first unknown word.
                return None;
            }
        }
    }
    if let Some(check) = server.check.as_mut() {
        check.timeout = check_timeout.unwrap_or(check.inter);
    }
    ok.then_some(server)
}

fn once_on_line(
    p: &mut Parser<'_>,
    seen: &mut Vec<(String, usize)>,
    key: &str,
    column: usize,
) -> bool {
    if seen.iter().any(|(k, _)| k == key) {
        p.error(
            column,
            format!("'{key}' is given twice on this line; keep one"),
        );
        return false;
    }
    seen.push((key.to_string(), column));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Config {
        match parse("lb.conf", text) {
            Ok(config) => config,
            Err(errors) => panic!("expected a config, got {errors:#?}"),
        }
    }

    /// Every error of `text`, displayed.
    fn errors(text: &str) -> Vec<String> {
        match parse("lb.conf", text) {
            Ok(config) => panic!("expected errors, got {config:#?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    /// The one error of `text`, displayed.
    fn error(text: &str) -> String {
        let all = errors(text);
        assert_eq!(all.len(), 1, "expected one error, got {all:#?}");
        all[0].clone()
    }

    /// A frontend around `lines`, which start at line 4.
    fn fe(lines: &str) -> String {
        format!("frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n{lines}")
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("a range")
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const FULL: &str = include_str!("../../examples/full.conf");

    #[test]
    fn the_full_example_parses_to_what_it_says() {
        let c = ok(FULL);
        assert_eq!(
            c.global,
            Global {
                maxconn: Some(20000),
                workers: Some(2),
                grace: Some(Duration::from_secs(30)),
                admin: Some(addr("127.0.0.1:9100")),
                access_log: Some(AccessLogTarget::Stderr),
                log_format: Some(Format::Tcplog),
            }
        );
        assert_eq!(c.frontends.len(), 2);
        let web = &c.frontends[0];
        assert_eq!(web.name, "web");
        assert_eq!(web.listen, addr("127.0.0.1:8080"));
        assert_eq!(web.balance, Algorithm::RoundRobin);
        assert_eq!(web.maxconn, Some(5000));
        assert_eq!(
            web.timeouts,
            Timeouts {
                queue: Some(Duration::from_secs(10)),
                ..Timeouts::default()
            }
        );
        assert_eq!(web.retries, 3);
        assert_eq!(web.maxconn_per_source, Some(100));
        assert_eq!(
            web.access.deny,
            vec![cidr("10.0.0.0/8"), cidr("192.168.0.0/16")]
        );
        assert_eq!(web.access.allow, vec![cidr("0.0.0.0/0"), cidr("::/0")]);
        assert!(!web.accept_proxy);
        assert_eq!(
            web.backends,
            vec![
                BackendServer {
                    addr: addr("127.0.0.1:9001"),
                    weight: 5,
                    backup: false,
                    maxconn: Some(100),
                    check: Some(Check {
                        inter: Duration::from_secs(2),
                        fall: 3,
                        rise: 2,
                        timeout: Duration::from_secs(1),
                    }),
                    send_proxy: None,
                },
                BackendServer {
                    addr: addr("127.0.0.1:9002"),
                    weight: 1,
                    backup: true,
                    maxconn: None,
                    check: None,
                    send_proxy: Some(Version::V2),
                },
            ]
        );
        let db = &c.frontends[1];
        assert_eq!((db.name.as_str(), db.listen), ("db", addr("[::1]:5433")));
        assert_eq!(db.backends[0].addr, addr("[::1]:5432"));
        assert_eq!(
            db.timeouts,
            Timeouts {
                tunnel: Some(Duration::from_secs(3600)),
                ..Timeouts::default()
            }
        );
        assert_eq!(db.timeouts.idle(), Duration::from_secs(3600));
        assert!(db.accept_proxy);
        assert_eq!(db.proxy_from, vec![cidr("10.0.0.0/8"), cidr("::1")]);
        assert_eq!(web.timeouts.queue(), Duration::from_secs(10));
    }

    #[test]
    fn defaults_are_haproxy_like() {
        let c = ok("frontend a\nlisten 127.0.0.1:1\nbackend 127.0.0.1:2 check\n");
        assert_eq!(c.global, Global::default());
        let f = &c.frontends[0];
        assert_eq!(f.balance, Algorithm::RoundRobin);
        assert_eq!(f.maxconn, None);
        assert_eq!(f.retries, 3);
        assert_eq!(f.timeouts.connect, Duration::from_secs(5));
        assert_eq!(f.timeouts.client, Duration::from_secs(600));
        assert_eq!(f.timeouts.server, Duration::from_secs(600));
        assert_eq!(f.timeouts.client_fin, Duration::from_secs(30));
        assert_eq!(f.timeouts.server_fin, Duration::from_secs(30));
        let b = &f.backends[0];
        assert_eq!((b.weight, b.backup, b.maxconn), (1, false, None));
        assert_eq!(b.check, Some(Check::default()));
    }

    #[test]
    fn every_option_is_read() {
        let c = ok(&fe(
            "    balance source\n    timeout connect 500ms\n    timeout client 1m\n    \
             timeout server 2m\n    timeout client-fin 3s\n    timeout server-fin 4s\n    \
             timeout tunnel 1h\n    timeout queue 2s\n    retries 0\n    backend [::1]:9 weight 0 check inter 1s fall 5 rise 7 timeout 300ms\n",
        ));
        let f = &c.frontends[0];
        assert_eq!(f.balance, Algorithm::Source);
        assert_eq!(
            f.timeouts,
            Timeouts {
                connect: Duration::from_millis(500),
                client: Duration::from_secs(60),
                server: Duration::from_secs(120),
                client_fin: Duration::from_secs(3),
                server_fin: Duration::from_secs(4),
                tunnel: Some(Duration::from_secs(3600)),
                queue: Some(Duration::from_secs(2)),
                client_hs: Duration::from_secs(5),
            }
        );
        assert_eq!(f.retries, 0);
        let b = &f.backends[1];
        assert_eq!(b.weight, 0);
        assert_eq!(
            b.check,
            Some(Check {
                inter: Duration::from_secs(1),
                fall: 5,
                rise: 7,
                timeout: Duration::from_millis(300),
            })
        );
        // The check timeout defaults to the interval.
        let c = ok(&fe("    backend 127.0.0.1:7 check inter 750ms\n"));
        assert_eq!(
            c.frontends[0].backends[1].check.unwrap().timeout,
            Duration::from_millis(750)
        );
        for (word, balance) in [
            ("leastconn", Algorithm::LeastConn),
            ("random", Algorithm::Random),
            ("roundrobin", Algorithm::RoundRobin),
        ] {
            let c = ok(&fe(&format!("balance {word}\n")));
            assert_eq!(c.frontends[0].balance, balance);
            assert_eq!(balance.name(), word);
        }
    }

    #[test]
    fn comments_blank_lines_tabs_and_crlf() {
        let c = ok(
            "# top\r\n\r\n\tfrontend a # named a\r\n\t\tlisten 127.0.0.1:1#no space\r\n\
                    backend 127.0.0.1:2   \r\n",
        );
        assert_eq!(c.frontends[0].listen, addr("127.0.0.1:1"));
    }

    #[test]
    fn each_mistake_says_where_what_and_what_to_do() {
        let cases: &[(&str, &str)] = &[
            (
                "frontnd web\n",
                "lb.conf:1:1: unknown section 'frontnd' (did you mean 'frontend'?); a file has \
                 'global' and 'frontend NAME' sections",
            ),
            (
                "defaults\n",
                "lb.conf:1:1: unknown section 'defaults': there are no defaults sections; set \
                 each option in its frontend",
            ),
            (
                "listen 127.0.0.1:1\n",
                "lb.conf:1:1: unknown section 'listen': write 'frontend NAME' and put \
                 'listen ADDR' inside it",
            ),
            (
                "maxconn 10\n",
                "lb.conf:1:1: 'maxconn' outside any section; start one with 'global' or \
                 'frontend NAME' above it",
            ),
            (
                &fe("    backend 127.0.0.1:9002 wieght 5\n"),
                "lb.conf:4:28: unknown option 'wieght' (did you mean 'weight'?)",
            ),
            (
                &fe("  balanse leastconn\n"),
                "lb.conf:4:3: unknown option 'balanse' (did you mean 'balance'?)",
            ),
            (
                &fe("  deny 10.0.0.1/8\n"),
                "lb.conf:4:8: deny: '10.0.0.1/8' has host bits set; did you mean 10.0.0.0/8?",
            ),
            (
                &fe("  allow\n"),
                "lb.conf:4:3: 'allow' needs address ranges, like 'allow 10.0.0.0/8 \
                 2001:db8::/32'",
            ),
            (
                "global\n  admin 0.0.0.0:9100\n",
                "lb.conf:2:9: admin: 0.0.0.0:9100 is not a loopback address; the admin \
                 endpoint has no authentication, so it listens on 127.0.0.1 or ::1 only",
            ),
            (
                "global\n  log-format xml\n",
                "lb.conf:2:14: unknown log format 'xml'; use tcplog or json",
            ),
            (
                &fe("  accept-proxy v2\n"),
                "lb.conf:4:16: accept-proxy: 'v2' is not an IP address; write an address \
                 (10.0.0.1, 2001:db8::1) or a range (10.0.0.0/8, 2001:db8::/32)",
            ),
            (
                &fe("  maxconn-per-source 0\n"),
                "lb.conf:4:22: maxconn-per-source: 0 is out of range; use 1 to 10000000; leave \
                 it out for no limit",
            ),
            (
                &fe("  bind 127.0.0.1:1\n"),
                "lb.conf:4:3: unknown option 'bind' (HAProxy's 'bind' is 'listen ADDR' here)",
            ),
            (
                &fe("  weight 5\n"),
                "lb.conf:4:3: unknown option 'weight'; 'weight' goes on a backend line, like \
                 'backend ADDR weight ...'",
            ),
            (
                &fe("  workers 4\n"),
                "lb.conf:4:3: 'workers' belongs in the 'global' section, not in a frontend",
            ),
            (
                "global\n  listen 127.0.0.1:1\n",
                "lb.conf:2:3: 'listen' belongs in a frontend section, not in 'global'",
            ),
            (
                "global\n  maxconns 10\n",
                "lb.conf:2:3: unknown option 'maxconns' (did you mean 'maxconn'?) in 'global', \
                 which takes maxconn, workers, grace, admin, access-log and log-format",
            ),
            (
                &fe("  backend localhost:80\n"),
                "lb.conf:4:11: backend: 'localhost:80' is not an IP address with a port, like \
                 127.0.0.1:8080 or [::1]:8080 (host names are not resolved)",
            ),
            (
                &fe("  timeout connect 5x\n"),
                "lb.conf:4:19: timeout connect: '5x': unknown unit 'x'; use us, ms, s, m, h or d",
            ),
            (
                &fe("  timeout client 30\n"),
                "lb.conf:4:18: timeout client: '30' has no unit: write 30s or 30ms",
            ),
            (
                &fe("  timeout connect 0s\n"),
                "lb.conf:4:19: timeout connect: 0s would end everything at once; use at least 1ms",
            ),
            (
                &fe("  timeout conect 5s\n"),
                "lb.conf:4:11: unknown timeout 'conect' (did you mean 'connect'?); use connect, \
                 client, server, client-fin, server-fin, tunnel, queue or client-hs",
            ),
            (
                &fe("  timeout check 5s\n"),
                "lb.conf:4:11: 'timeout check' is set per backend: write 'check timeout DUR' on \
                 the backend line",
            ),
            (
                &fe("  maxconn\n"),
                "lb.conf:4:3: 'maxconn' needs a number of connections",
            ),
            (
                &fe("  timeout connect\n"),
                "lb.conf:4:11: 'connect' needs a duration, like 5s",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight\n"),
                "lb.conf:4:23: 'weight' needs a value",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight 300\n"),
                "lb.conf:4:30: weight: 300 is out of range; use 0 to 256 (0 drains the backend)",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight -1\n"),
                "lb.conf:4:30: weight: '-1' is not a whole number",
            ),
            (
                &fe("  backend 127.0.0.1:2 maxconn 0\n"),
                "lb.conf:4:31: maxconn: 0 is out of range; use 1 to 10000000; leave it out for \
                 no limit",
            ),
            (
                &fe("  balance fastest\n"),
                "lb.conf:4:11: unknown balance algorithm 'fastest'; use roundrobin, leastconn, \
                 random or source",
            ),
            (
                &fe("  balance leastcon\n"),
                "lb.conf:4:11: unknown balance algorithm 'leastcon' (did you mean 'leastconn'?); \
                 use roundrobin, leastconn, random or source",
            ),
            (
                &fe("  listen 127.0.0.1:9\n"),
                "lb.conf:4:3: 'listen' is given twice (first at line 2); keep one",
            ),
            (
                &fe("  backend 127.0.0.1:9001 weight 2\n"),
                "lb.conf:4:11: backend 127.0.0.1:9001 is already in this frontend (line 3); \
                 list it once and use 'weight' to send it more",
            ),
            (
                &fe("  listen\n"),
                "lb.conf:4:3: 'listen' needs an address like 127.0.0.1:8080",
            ),
            (
                &fe("  retries 3 4\n"),
                "lb.conf:4:13: unexpected '4' after 'retries 3'; put one option per line",
            ),
            (
                &fe("frontend web\n  listen 127.0.0.1:2\n  backend 127.0.0.1:3\n"),
                "lb.conf:4:10: duplicate frontend 'web' (the first is at line 1); give each \
                 frontend its own name",
            ),
            (
                &fe("frontend web2\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:3\n"),
                "lb.conf:5:10: frontend 'web2' listens on 127.0.0.1:8080, as frontend 'web' \
                 does; give each frontend its own address",
            ),
            (
                "frontend empty\n  listen 127.0.0.1:1\n",
                "lb.conf:1:1: frontend 'empty' has no backend; add a line like \
                 'backend 127.0.0.1:9001'",
            ),
            (
                "frontend deaf\n  backend 127.0.0.1:1\n",
                "lb.conf:1:1: frontend 'deaf' has no 'listen'; add a line like \
                 'listen 127.0.0.1:8080'",
            ),
            (
                "frontend\n",
                "lb.conf:1:1: 'frontend' needs a name, like 'frontend web'",
            ),
            (
                "# nothing\n",
                "lb.conf: no frontend; add a 'frontend NAME' section with a 'listen' and a \
                 'backend' (see docs/OPERATIONS.md)",
            ),
            (
                "global\nglobal\n",
                "lb.conf:2:1: a second 'global' section (the first is at line 1); merge them \
                 into one",
            ),
            // check parameters: after 'check', known, in range, once.
            (
                &fe("  backend 127.0.0.1:2 inter 2s check\n"),
                "lb.conf:4:23: 'inter' is a health-check parameter: write it after 'check', \
                 like 'check inter ...'",
            ),
            (
                &fe("  backend 127.0.0.1:2 check intre 2s\n"),
                "lb.conf:4:29: unknown option 'intre' (did you mean 'inter'?)",
            ),
            (
                &fe("  backend 127.0.0.1:2 check inter 2s fall 0\n"),
                "lb.conf:4:43: check fall: 0 is out of range; use 1 to 100",
            ),
            (
                &fe("  backend 127.0.0.1:2 check inter 2s inter 3s\n"),
                "lb.conf:4:38: 'check inter' is given twice on this line; keep one",
            ),
            (
                &fe("  backend 127.0.0.1:2 check rise\n"),
                "lb.conf:4:29: 'rise' needs a value",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&error(text), expected, "for:\n{text}");
        }
    }

    #[test]
    fn all_errors_of_a_file_are_reported_in_order() {
        let text = "\
global
    maxconn lots
frontend web
    listen 127.0.0.1:8080
    balance fastest
    backend 127.0.0.1:9001 wieght 5
    timeout client 10x
frontend web
frontend api
    listen 127.0.0.1:8080
    backend localhost:9
";
        let all = errors(text);
        assert_eq!(
            all,
            vec![
                "lb.conf:2:13: maxconn: 'lots' is not a whole number",
                "lb.conf:5:13: unknown balance algorithm 'fastest'; use roundrobin, leastconn, \
                 random or source",
                "lb.conf:6:28: unknown option 'wieght' (did you mean 'weight'?)",
                "lb.conf:7:20: timeout client: '10x': unknown unit 'x'; use us, ms, s, m, h or d",
                "lb.conf:8:10: duplicate frontend 'web' (the first is at line 3); give each \
                 frontend its own name",
                "lb.conf:10:12: frontend 'api' listens on 127.0.0.1:8080, as frontend 'web' \
                 does; give each frontend its own address",
                "lb.conf:11:13: backend: 'localhost:9' is not an IP address with a port, like \
                 127.0.0.1:8080 or [::1]:8080 (host names are not resolved)",
            ]
        );
    }

    /// A tiny xorshift: the same "random" inputs on every run.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn check_shape(text: &str) {
        if let Err(errors) = parse("fuzz.conf", text) {
            assert!(!errors.is_empty());
            let lines = text.lines().count();
            for e in &errors {
                assert!(e.line <= lines.max(1), "{e} beyond the last line");
                assert!(!e.message.is_empty());
            }
        }
    }

    #[test]
    fn random_bytes_and_token_soups_never_panic() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            check_shape(&String::from_utf8_lossy(&bytes));
        }
        let vocabulary = [
            "global",
            "frontend",
            "web",
            "listen",
            "balance",
            "maxconn",
            "workers",
            "timeout",
            "connect",
            "client",
            "server",
            "client-fin",
            "server-fin",
            "tunnel",
            "queue",
            "check",
            "retries",
            "backend",
            "weight",
            "backup",
            "inter",
            "fall",
            "rise",
            "roundrobin",
            "source",
            "127.0.0.1:8080",
            "[::1]:1",
            "[::1",
            "0",
            "1",
            "256",
            "257",
            "4294967296",
            "2s",
            "500ms",
            "1m",
            "0s",
            "99999999999h",
            "x",
            "#",
            "é",
            "\t",
            "\n",
            "\n",
            "\n",
            "\r\n",
            "",
            " ",
        ];
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..rng.below(60) {
                text.push_str(vocabulary[rng.below(vocabulary.len())]);
                text.push(if rng.below(4) == 0 { '\n' } else { ' ' });
            }
            check_shape(&text);
        }
    }

    #[test]
    fn every_example_config_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "conf") {
                if let Err(errors) = load(&path) {
                    panic!("{}: {errors:#?}", path.display());
                }
                seen += 1;
            }
        }
        assert!(seen >= 2, "expected example configs in {}", dir.display());
    }

    #[test]
    fn the_documented_example_is_the_full_example() {
        // docs/OPERATIONS.md shows examples/full.conf; they must not drift apart.
        let doc = include_str!("../../../docs/OPERATIONS.md");
        let body: String = FULL
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            doc.contains(body.trim()),
            "docs/OPERATIONS.md lacks full.conf"
        );
    }

    fn temp_file(tag: &str, contents: &[u8]) -> std::path::PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "proxy-config-{tag}-{}-{nanos}.conf",
            std::process::id()
        ));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn check_config_exits_0_for_a_good_file_and_2_for_a_bad_one() {
        let run = |path: &Path| {
            crate::main_with_args(&["--check-config".to_string(), path.display().to_string()])
        };
        let good = temp_file("good", FULL.as_bytes());
        let bad = temp_file("bad", fe("  balance fastest\n").as_bytes());
        let binary = temp_file("binary", b"frontend a\n\xff\xfe\n");
        let (good_status, bad_status, binary_status) = (run(&good), run(&bad), run(&binary));
        let binary_errors = load(&binary).unwrap_err();
        for path in [&good, &bad, &binary] {
            std::fs::remove_file(path).unwrap();
        }
        assert_eq!((good_status, bad_status, binary_status), (0, 2, 2));
        assert_eq!((binary_errors[0].line, binary_errors[0].column), (2, 1));
        assert_eq!(run(Path::new("/nonexistent/lb.conf")), 2);
        let missing = load(Path::new("/nonexistent/lb.conf")).unwrap_err();
        assert!(
            missing[0]
                .to_string()
                .starts_with("/nonexistent/lb.conf: cannot read the file")
        );
    }
}
