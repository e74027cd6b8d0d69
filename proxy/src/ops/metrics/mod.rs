//! Metrics: counters that cost the event loops nothing, summed when scraped.
//!
//! Every event-loop worker counts its own connections in its own counters:
//! one [`FrontendCounters`] per frontend per worker, with a
//! [`BackendCounters`] for each of the frontend's backends. Each counter is
//! a plain `AtomicU64` updated with `Relaxed` ordering, and only its owner
//! thread writes it. Nothing else is shared, so no cache line moves between
//! the cores of two workers however busy they are; an uncontended atomic add
//! on a line the core already holds costs a few nanoseconds. (Atomic all the
//! same, because the admin thread reads while the owner writes: with a plain
//! `u64` that would be a data race, undefined behaviour.) The only other
//! visitor of those lines is a scrape, once every few seconds.
//!
//! ```text
//!   worker 0: [web: conns 7, bytes .. | b0 | b1]   [db: ...]    (written by worker 0 only)
//!   worker 1: [web: conns 5, bytes .. | b0 | b1]   [db: ...]    (written by worker 1 only)
//!                        │ Relaxed loads, when scraped
//!                        ▼
//!   admin thread: Registry::render()  ->  proxy_frontend_connections_total{frontend="web"} 12
//! ```
//!
//! The admin endpoint ([`admin`](crate::ops::admin)) reads every worker's values
//! and adds them up. Why `Relaxed` is enough: a scrape wants each number,
//! not a relation between numbers; a counter read a moment early is simply
//! the value of a moment earlier. The numbers of one scrape are therefore
//! not one instant's snapshot (two counters may be read a few microseconds
//! apart), which Prometheus expects of any exporter.
//!
//! Two details keep the "no sharing" promise and the sums right:
//!
//! - Each counter block is aligned to 128 bytes, so two workers' blocks never
//!   share a cache line (nor the pair of lines some CPUs fetch together),
//!   even when the allocator places them side by side.
//! - A gauge (`active`) goes up and down on the same worker, since a
//!   connection's task never leaves its event loop. The sums are taken with
//!   wrapping arithmetic all the same, so the total would stay right even if
//!   a connection were counted in on one worker and out on another (one
//!   worker's count wrapping below zero, another's above).
//!
//! Health (up or down, check results) is not counted here: it is read from
//! each frontend's [`HealthBoard`] at scrape time. Process figures (open
//! descriptors, resident memory, start time, CPU) are read from `/proc`, and
//! left out where it cannot be read.
//!
//! [`Registry::render`] writes the Prometheus text exposition format 0.0.4;
//! [`prometheus_text`] is a strict parser of it, for tests and tooling.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use crate::policy::health::HealthBoard;

/// One frontend's counters, as one worker counts them (module docs). Add
/// with [`inc`] and [`add`]; hold an [`Active`] while a connection is open.
#[derive(Debug)]
#[repr(align(128))]
pub struct FrontendCounters {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Client connections open now (a gauge).
    pub active: AtomicU64,
    /// Bytes received from clients (relayed to backends).
    pub bytes_in: AtomicU64,
    /// Bytes sent to clients (received from backends).
    pub bytes_out: AtomicU64,
    /// Clients refused because no backend could be connected: none was up,
    /// or every try failed. (Each failed try is counted on its backend.)
    pub connect_errors: AtomicU64,
    /// Connects tried again on another backend after a failure.
    pub retries: AtomicU64,
    /// Connections the relay ended because a timeout expired (idle, or a
    /// half-closed connection whose other side stayed silent).
    pub timeouts: AtomicU64,
    /// Clients refused by access control (allow/deny lists, per-source limit).
    pub denied: AtomicU64,
    /// Clients refused after waiting `timeout queue` for a backend below its
    /// maxconn.
    pub queue_timeouts: AtomicU64,
    /// Errors returned by `accept` on the frontend's listener.
    pub accept_errors: AtomicU64,
    /// The frontend's backends' counters, by backend index.
    pub backends: Vec<BackendCounters>,
}

/// One backend's counters, as one worker counts them.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct BackendCounters {
    /// Connections established to the backend.
    pub connections: AtomicU64,
    /// Connections to the backend open now (a gauge).
    pub active: AtomicU64,
    /// Bytes sent to the backend (from clients): HAProxy's `bin`.
    pub bytes_in: AtomicU64,
    /// Bytes received from the backend (sent to clients): HAProxy's `bout`.
    pub bytes_out: AtomicU64,
    /// Connect attempts that failed: refused, unreachable, or no answer
    /// within `timeout connect`.
    pub connect_errors: AtomicU64,
}

impl FrontendCounters {
    /// Zeroed counters for a frontend of `backends` backends.
    pub fn new(backends: usize) -> FrontendCounters {
        FrontendCounters {
            connections: AtomicU64::new(0),
            active: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            backends: (0..backends).map(|_| BackendCounters::default()).collect(),
        }
    }
}

/// Adds one to `counter`: `metrics::inc(&counters.connections)`.
pub fn inc(counter: &AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to `counter`. Only its own worker's thread ever writes a
/// counter (module docs), so a plain load and store is enough: no other
/// writer can slip in between, and a scrape on another thread reads either
/// the old value or the new one. A locked read-modify-write (`fetch_add`)
/// would cost several times more, on every connection, for nothing.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// One unit of a gauge held for a while: +1 when made, -1 when dropped, so
/// a connection cannot forget to leave the `active` count (like a
/// [`Permit`](crate::policy::limit::Permit) and its limit).
#[derive(Debug)]
#[must_use = "the gauge goes back down when this is dropped"]
pub struct Active<'a> {
    gauge: &'a AtomicU64,
}

impl<'a> Active<'a> {
    /// Adds one to `gauge` until the returned value is dropped.
    pub fn new(gauge: &'a AtomicU64) -> Active<'a> {
        add(gauge, 1);
        Active { gauge }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        add(self.gauge, u64::MAX); // minus one, wrapping: the single writer's decrement
    }
}

/// One frontend as [`Registry::from_counters`] takes it: name, backends'
/// addresses, health board, one set of counters per worker.
pub type FrontendParts = (
    String,
    Vec<SocketAddr>,
    Arc<HealthBoard>,
    Vec<Arc<FrontendCounters>>,
);

/// The registry the admin endpoint renders now: a reload swaps in a new one
/// (new frontends, new backends) in one step. The lock is taken by scrapes
/// and reloads only; workers hold their counters directly.
#[derive(Debug)]
pub struct Published {
    current: Mutex<Arc<Registry>>,
    /// A graceful stop has begun (`/health` then answers 503).
    draining: AtomicBool,
}

impl Published {
    /// Publishes `registry`.
    pub fn new(registry: Arc<Registry>) -> Arc<Published> {
        Arc::new(Published {
            current: Mutex::new(registry),
            draining: AtomicBool::new(false),
        })
    }

    /// Replaces what is published.
    pub fn set(&self, registry: Arc<Registry>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = registry;
    }

    /// The registry published now.
    pub fn get(&self) -> Arc<Registry> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the start of a graceful stop.
    pub fn set_draining(&self) {
        self.draining.store(true, Relaxed);
    }

    /// Whether a graceful stop has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Relaxed)
    }

    /// What a scrape answers: [`Registry::render`] of the current registry.
    pub fn render(&self) -> String {
        self.get().render()
    }
}

/// Every counter of the process: the frontends' names, their backends'
/// addresses and health boards, and each worker's counters.
#[derive(Debug)]
pub struct Registry {
    frontends: Vec<FrontendInfo>,
    /// `counters[worker][frontend]`.
    counters: Vec<Vec<Arc<FrontendCounters>>>,
}

#[derive(Debug)]
struct FrontendInfo {
    name: String,
    backends: Vec<SocketAddr>,
    board: Arc<HealthBoard>,
}

impl Registry {
    /// A registry for `frontends` (each: its name, its backends' addresses
    /// by index, its health board) and `workers` event loops (at least one
    /// is counted, as the epoll mode runs at least one).
    pub fn new(
        frontends: &[(String, Vec<SocketAddr>, Arc<HealthBoard>)],
        workers: usize,
    ) -> Arc<Registry> {
        let counters = (0..workers.max(1))
            .map(|_| {
                frontends
                    .iter()
                    .map(|(_, backends, _)| Arc::new(FrontendCounters::new(backends.len())))
                    .collect()
            })
            .collect();
        let frontends = frontends
            .iter()
            .map(|(name, backends, board)| FrontendInfo {
                name: name.clone(),
                backends: backends.clone(),
                board: board.clone(),
            })
            .collect();
        Arc::new(Registry {
            frontends,
            counters,
        })
    }

    /// A registry over counters that already exist: for each frontend, its
    /// name, backends, health board and one [`FrontendCounters`] per worker
    /// (all frontends with the same number of workers). A reload builds one
    /// this way, so that a frontend it did not change keeps counting on.
    pub fn from_counters(frontends: Vec<FrontendParts>) -> Arc<Registry> {
        let workers = frontends
            .iter()
            .map(|f| f.3.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut counters: Vec<Vec<Arc<FrontendCounters>>> = vec![Vec::new(); workers];
        let mut infos = Vec::new();
        for (name, backends, board, per_worker) in frontends {
            for (worker, row) in counters.iter_mut().enumerate() {
                // A frontend short of counters for a worker reads as zeros.
                let mine = per_worker
                    .get(worker)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(FrontendCounters::new(backends.len())));
                row.push(mine);
            }
            infos.push(FrontendInfo {
                name,
                backends,
                board,
            });
        }
        Arc::new(Registry {
            frontends: infos,
            counters,
        })
    }

    /// How many workers' counters are kept.
    pub fn workers(&self) -> usize {
        self.counters.len()
    }

    /// The counters worker `worker` keeps for frontend `frontend` (by their
    /// indexes in the configuration): what a worker's state holds, and the
    /// only thread that writes them.
    ///
    /// # Panics
    ///
    /// If either index is out of range: a mistake in the caller, not
    /// something a peer can cause.
    pub fn worker(&self, worker: usize, frontend: usize) -> Arc<FrontendCounters> {
        self.counters[worker][frontend].clone()
    }

    /// Every metric, summed over the workers, in the Prometheus text
    /// exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut out = Exposition::default();
        self.render_frontends(&mut out);
        self.render_backends(&mut out);
        render_process(&mut out, &Process::read());
        out.text
    }

    /// The sum over workers of one counter of frontend `index`.
    fn frontend_sum(&self, index: usize, counter: FrontendCounter) -> u64 {
        self.counters
            .iter()
            .map(|worker| counter(&worker[index]).load(Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// The sum over workers of one counter of backend `backend` of
    /// frontend `frontend`.
    fn backend_sum(&self, frontend: usize, backend: usize, counter: BackendCounter) -> u64 {
        self.counters
            .iter()
            .filter_map(|worker| worker[frontend].backends.get(backend))
            .map(|counters| counter(counters).load(Relaxed))
            .fold(0, u64::wrapping_add)
    }

    fn render_frontends(&self, out: &mut Exposition) {
        if self.frontends.is_empty() {
            return;
        }
        for &(name, kind, help, counter) in FRONTEND_FAMILIES {
            out.family(name, kind, help);
            for (index, frontend) in self.frontends.iter().enumerate() {
                let labels = [("frontend", frontend.name.as_str())];
                out.sample(name, &labels, self.frontend_sum(index, counter));
            }
        }
    }

    fn render_backends(&self, out: &mut Exposition) {
        // (frontend index, backend index, frontend name, backend address)
        let mut backends = Vec::new();
        for (f, frontend) in self.frontends.iter().enumerate() {
            for (b, addr) in frontend.backends.iter().enumerate() {
                backends.push((f, b, frontend.name.as_str(), addr.to_string()));
            }
        }
        if backends.is_empty() {
            return;
        }
        for &(name, kind, help, counter) in BACKEND_FAMILIES {
            out.family(name, kind, help);
            for (f, b, frontend, addr) in &backends {
                let labels = [("frontend", *frontend), ("backend", addr.as_str())];
                out.sample(name, &labels, self.backend_sum(*f, *b, counter));
            }
        }
        // Health, read from the boards. A board shorter than the list of
        // addresses (a caller's mistake) leaves those backends out.
        for &(name, kind, help, read) in HEALTH_FAMILIES {
            out.family(name, kind, help);
            for (f, b, frontend, addr) in &backends {
                let board = &self.frontends[*f].board;
                if *b < board.len() {
                    let labels = [("frontend", *frontend), ("backend", addr.as_str())];
                    out.sample(name, &labels, read(board, *b));
                }
            }
        }
    }
}

/// How a family's samples behave: only ever up (and reset by a restart), or
/// up and down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// A family: its name, type, help text, and where its values come from.
type Family<Source> = (&'static str, Kind, &'static str, Source);
type FrontendCounter = fn(&FrontendCounters) -> &AtomicU64;
type BackendCounter = fn(&BackendCounters) -> &AtomicU64;
type HealthReading = fn(&HealthBoard, usize) -> u64;

/// Every per-frontend family: name, type, help, and the counter it sums.
const FRONTEND_FAMILIES: &[Family<FrontendCounter>] = &[
    (
        "proxy_frontend_connections_total",
        Kind::Counter,
        "Client connections accepted.",
        |c| &c.connections,
    ),
    (
        "proxy_frontend_active_connections",
        Kind::Gauge,
        "Client connections open now.",
        |c| &c.active,
    ),
    (
        "proxy_frontend_bytes_in_total",
        Kind::Counter,
        "Bytes received from clients (and relayed to backends).",
        |c| &c.bytes_in,
    ),
    (
        "proxy_frontend_bytes_out_total",
        Kind::Counter,
        "Bytes sent to clients (received from backends).",
        |c| &c.bytes_out,
    ),
    (
        "proxy_frontend_connect_errors_total",
        Kind::Counter,
        "Clients refused because no backend could be connected (none up, or every try failed).",
        |c| &c.connect_errors,
    ),
    (
        "proxy_frontend_retries_total",
        Kind::Counter,
        "Backend connects retried on another backend after a failure.",
        |c| &c.retries,
    ),
    (
        "proxy_frontend_timeouts_total",
        Kind::Counter,
        "Connections ended by a relay timeout (idle, or half-closed too long).",
        |c| &c.timeouts,
    ),
    (
        "proxy_frontend_denied_total",
        Kind::Counter,
        "Clients refused by access control (allow/deny lists, per-source limit).",
        |c| &c.denied,
    ),
    (
        "proxy_frontend_queue_timeouts_total",
        Kind::Counter,
        "Clients refused after waiting timeout queue for a backend below its maxconn.",
        |c| &c.queue_timeouts,
    ),
    (
        "proxy_accept_errors_total",
        Kind::Counter,
        "Errors returned by accept on the frontend's listeners (EMFILE and the like).",
        |c| &c.accept_errors,
    ),
];

/// Every per-backend family counted by the workers.
const BACKEND_FAMILIES: &[Family<BackendCounter>] = &[
    (
        "proxy_backend_connections_total",
        Kind::Counter,
        "Connections established to the backend.",
        |c| &c.connections,
    ),
    (
        "proxy_backend_active_connections",
        Kind::Gauge,
        "Connections to the backend open now.",
        |c| &c.active,
    ),
    (
        "proxy_backend_bytes_in_total",
        Kind::Counter,
        "Bytes sent to the backend (from clients).",
        |c| &c.bytes_in,
    ),
    (
        "proxy_backend_bytes_out_total",
        Kind::Counter,
        "Bytes received from the backend (sent to clients).",
        |c| &c.bytes_out,
    ),
    (
        "proxy_backend_connect_errors_total",
        Kind::Counter,
        "Connect attempts to the backend that failed (refused, unreachable, timed out).",
        |c| &c.connect_errors,
    ),
];

/// Every per-backend family read from the health boards.
const HEALTH_FAMILIES: &[Family<HealthReading>] = &[
    (
        "proxy_backend_up",
        Kind::Gauge,
        "1 if the backend is up (health checks and client connects), 0 if down.",
        |board, b| u64::from(board.is_up(b)),
    ),
    (
        "proxy_backend_check_successes_total",
        Kind::Counter,
        "Active health checks that connected (0 for a backend without check).",
        |board, b| board.check_counts(b).successes,
    ),
    (
        "proxy_backend_check_failures_total",
        Kind::Counter,
        "Active health checks refused, unreachable or unanswered in time.",
        |board, b| board.check_counts(b).failures,
    ),
];

/// The text being written, family by family.
#[derive(Debug, Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// The `# HELP` and `# TYPE` lines that open a family.
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {}", escape(help, false));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.name());
    }

    /// One sample: `name{label="value",...} value`.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(self.text, "{comma}{label}=\"{}\"", escape(value, true));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Escapes a label value (backslash, double quote, line feed) or a help
/// text (backslash and line feed only), as the format requires.
fn escape(text: &str, quote: bool) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\\', '\n', '"']) {
        return text.into();
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '"' if quote => escaped.push_str("\\\""),
            c => escaped.push(c),
        }
    }
    escaped.into()
}

/// A float as the format writes it: `+Inf`, `-Inf` and `NaN` by those
/// names (Rust would write `inf`), anything else in plain decimal.
#[derive(Debug, Clone, Copy)]
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// What `/proc` says about this process; `None` where it could not be read
/// (another system, a restricted `/proc`): that metric is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Process {
    open_fds: Option<u64>,
    max_fds: Option<u64>,
    resident_bytes: Option<u64>,
    start_time: Option<f64>,
    cpu_seconds: Option<f64>,
}

impl Process {
    fn read() -> Process {
        let ticks = clock_ticks_per_second();
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.as_deref().and_then(stat_fields);
        let field = |n: usize| -> Option<f64> {
            // Field n of proc_pid_stat(5), counted from 1; after the
            // command's closing parenthesis the list starts at field 3.
            stat.as_ref()?
                .get(n - 3)?
                .parse::<u64>()
                .ok()
                .map(|v| v as f64)
        };
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| boot_time(&text));
        Process {
            open_fds: open_fds(),
            max_fds: std::fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|text| max_open_files(&text)),
            resident_bytes: std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|text| resident_bytes(&text)),
            // starttime (22) is in clock ticks since boot.
            start_time: boot_time
                .zip(field(22))
                .map(|(boot, start)| boot as f64 + start / ticks),
            // utime (14) and stime (15), in clock ticks.
            cpu_seconds: field(14).zip(field(15)).map(|(u, s)| (u + s) / ticks),
        }
    }
}

fn render_process(out: &mut Exposition, process: &Process) {
    let integers = [
        (
            "proxy_process_open_fds",
            "File descriptors the process has open.",
            process.open_fds,
        ),
        (
            "proxy_process_max_fds",
            "The process's limit of open file descriptors (soft RLIMIT_NOFILE).",
            process.max_fds,
        ),
        (
            "proxy_process_resident_memory_bytes",
            "Resident memory size (RSS) in bytes.",
            process.resident_bytes,
        ),
    ];
    for (name, help, value) in integers {
        if let Some(value) = value {
            out.family(name, Kind::Gauge, help);
            out.sample(name, &[], value);
        }
    }
    let floats = [
        (
            "proxy_process_start_time_seconds",
            Kind::Gauge,
            "When the process started, in seconds since the Unix epoch.",
            process.start_time,
        ),
        (
            "proxy_process_cpu_seconds_total",
            Kind::Counter,
            "CPU time used by the process, user and system, in seconds.",
            process.cpu_seconds,
        ),
    ];
    for (name, kind, help, value) in floats {
        if let Some(value) = value {
            out.family(name, kind, help);
            out.sample(name, &[], Float(value));
        }
    }
}

/// Open descriptors: the entries of `/proc/self/fd`, less the one used to
/// list them.
fn open_fds() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    let count = entries.filter(Result::is_ok).count();
    Some((count as u64).saturating_sub(1))
}

/// The fields of `/proc/self/stat` after the command name, which is in
/// parentheses and may itself hold spaces and parentheses: the list starts
/// after the *last* `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// `btime`, the boot time in seconds since the epoch, from `/proc/stat`.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// `VmRSS:  1234 kB` in `/proc/self/status`, in bytes.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`None` when
/// it is `unlimited`).
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The clock tick of `/proc`'s times (`sysconf(_SC_CLK_TCK)`), read without
/// a libc call from the kernel's own word: the `AT_CLKTCK` entry of the
/// auxiliary vector in `/proc/self/auxv`. 100, Linux's value everywhere
/// but alpha, if that cannot be read.
fn clock_ticks_per_second() -> f64 {
    let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
    auxv_entry(&auxv, AT_CLKTCK)
        .filter(|&hz| hz > 0)
        .map_or(100.0, |hz| hz as f64)
}

/// `AT_CLKTCK` in `<elf.h>`: the frequency of `times(2)`'s clock.
const AT_CLKTCK: usize = 17;

/// The value of `key` in an auxiliary vector: pairs of native words (key,
/// value), ended by a zero key.
fn auxv_entry(auxv: &[u8], key: usize) -> Option<usize> {
    const WORD: usize = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * WORD)
        .map(|pair| {
            let word = |bytes: &[u8]| {
                let mut word = [0u8; WORD];
                word.copy_from_slice(bytes);
                usize::from_ne_bytes(word)
            };
            (word(&pair[..WORD]), word(&pair[WORD..]))
        })
        .take_while(|&(k, _)| k != 0)
        .find_map(|(k, v)| (k == key).then_some(v))
}

pub use prometheus_text::parse as parse_exposition;

pub mod prometheus_text {
    //! A strict parser of the Prometheus text exposition format 0.0.4, for
    //! tests and tooling: the proxy writes the format and never reads it.
    //!
    //! It accepts the subset [`Registry::render`](super::Registry::render)
    //! writes and rejects anything else, so that a test parsing a scrape
    //! checks the output as well as reading it. Every line is one of:
    //!
    //! ```text
    //! # HELP name text with \\ and \n escaped
    //! # TYPE name counter|gauge
    //! name value
    //! name{label="value",other="with \\ \" \n escaped"} value
    //! ```
    //!
    //! and the rules are the format's: valid metric and label names (no
    //! label name starting with `__`), at most one HELP and one TYPE per
    //! name, the TYPE before the first sample of its name, each name's lines
    //! in one group, no series twice, values that parse as floats (`NaN`,
    //! `+Inf`, `-Inf` included), and a line feed at the end of the last
    //! line. Stricter than the format: every sample needs a TYPE line (and
    //! every TYPE at least a name), a single space separates the parts,
    //! there are no timestamps, no empty lines, no other comments, no empty
    //! `{}`, and a counter is never negative.
    //!
    //! ```
    //! use proxy::ops::metrics::prometheus_text::{parse, Kind};
    //! let text = "# TYPE up gauge\nup{job=\"proxy\"} 1\n";
    //! let exposition = parse(text).expect("valid");
    //! assert_eq!(exposition.value("up", &[("job", "proxy")]), Some(1.0));
    //! assert_eq!(exposition.family("up").map(|f| f.kind), Some(Kind::Gauge));
    //! ```

    use std::collections::{HashMap, HashSet};
    use std::fmt;

    /// A family's type (only those the proxy writes).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        /// `# TYPE name counter`
        Counter,
        /// `# TYPE name gauge`
        Gauge,
    }

    /// One line `name{labels} value`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Sample {
        /// The metric name.
        pub name: String,
        /// The labels in the order written, values unescaped.
        pub labels: Vec<(String, String)>,
        /// The value.
        pub value: f64,
    }

    impl Sample {
        /// The value of label `name`, if the sample has it.
        pub fn label(&self, name: &str) -> Option<&str> {
            self.labels
                .iter()
                .find(|(label, _)| label == name)
                .map(|(_, value)| value.as_str())
        }
    }

    /// A metric name with its HELP, TYPE and samples.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Family {
        /// The metric name.
        pub name: String,
        /// The HELP text, unescaped, if there was one.
        pub help: Option<String>,
        /// The TYPE.
        pub kind: Kind,
        /// The samples in the order written.
        pub samples: Vec<Sample>,
    }

    /// A whole parsed text, families in the order written.
    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct Exposition {
        /// Every family.
        pub families: Vec<Family>,
    }

    impl Exposition {
        /// The family named `name`.
        pub fn family(&self, name: &str) -> Option<&Family> {
            self.families.iter().find(|f| f.name == name)
        }

        /// The value of the sample `name` with exactly the label set
        /// `labels` (in any order).
        pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
            let family = self.family(name)?;
            let sample = family.samples.iter().find(|s| {
                s.labels.len() == labels.len() && labels.iter().all(|&(k, v)| s.label(k) == Some(v))
            })?;
            Some(sample.value)
        }

        /// Every sample of every family.
        pub fn samples(&self) -> impl Iterator<Item = &Sample> + '_ {
            self.families.iter().flat_map(|f| f.samples.iter())
        }
    }

    /// Why a text is not valid, and where.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ParseError {
        /// The line, counted from 1.
        pub line: usize,
        /// What is wrong with it.
        pub message: String,
    }

    impl fmt::Display for ParseError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }

    impl std::error::Error for ParseError {}

    /// A family while it is being read: its TYPE may not be known yet.
    struct Partial {
        name: String,
        help: Option<String>,
        kind: Option<Kind>,
        samples: Vec<Sample>,
    }

    /// Parses a whole exposition (module docs for what is accepted).
    pub fn parse(text: &str) -> Result<Exposition, ParseError> {
        let mut families: Vec<Partial> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
        // `str::lines` would also split at "\r\n", hiding a carriage return.
        let lines: Vec<&str> = match text.strip_suffix('\n') {
            Some(body) => body.split('\n').collect(),
            None if text.is_empty() => Vec::new(),
            None => {
                let line = text.split('\n').count();
                return Err(error(line, "the last line does not end with a line feed"));
            }
        };
        for (i, &line) in lines.iter().enumerate() {
            let n = i + 1;
            if line.contains('\r') {
                return Err(error(n, "a carriage return (lines end with \\n alone)"));
            }
            let (name, what) = if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                (
                    name,
                    Line::Help(unescape_help(help).map_err(|e| error(n, &e))?),
                )
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest
                    .split_once(' ')
                    .ok_or_else(|| error(n, "a TYPE line without a type"))?;
                let kind = match kind {
                    "counter" => Kind::Counter,
                    "gauge" => Kind::Gauge,
                    other => return Err(error(n, &format!("unknown type {other:?}"))),
                };
                (name, Line::Type(kind))
            } else if line.starts_with('#') {
                return Err(error(n, "a comment other than # HELP or # TYPE"));
            } else if line.is_empty() {
                return Err(error(n, "an empty line"));
            } else {
                let sample = parse_sample(line).map_err(|e| error(n, &e))?;
                (
                    line.split(['{', ' ']).next().unwrap_or_default(),
                    Line::Sample(sample),
                )
            };
            if !is_metric_name(name) {
                return Err(error(n, &format!("{name:?} is not a valid metric name")));
            }
            // This line belongs to the last family, or opens a new one; a
            // name seen before but not last has had its group already.
            let index = match by_name.get(name) {
                Some(&index) if index + 1 == families.len() => index,
                Some(_) => {
                    let why = format!("the lines of {name} are not all in one group");
                    return Err(error(n, &why));
                }
                None => {
                    by_name.insert(name.to_string(), families.len());
                    families.push(Partial {
                        name: name.to_string(),
                        help: None,
                        kind: None,
                        samples: Vec::new(),
                    });
                    families.len() - 1
                }
            };
            let family = &mut families[index];
            match what {
                Line::Help(_) if family.help.is_some() => {
                    return Err(error(n, &format!("a second HELP for {name}")));
                }
                Line::Type(_) if family.kind.is_some() => {
                    return Err(error(n, &format!("a second TYPE for {name}")));
                }
                Line::Help(_) | Line::Type(_) if !family.samples.is_empty() => {
                    let why = format!("HELP or TYPE after samples of {name}");
                    return Err(error(n, &why));
                }
                Line::Help(help) => family.help = Some(help),
                Line::Type(kind) => family.kind = Some(kind),
                Line::Sample(sample) => {
                    let Some(kind) = family.kind else {
                        return Err(error(n, &format!("a sample of {name} before its TYPE")));
                    };
                    if kind == Kind::Counter && (sample.value.is_nan() || sample.value < 0.0) {
                        return Err(error(n, "a counter must not be negative or NaN"));
                    }
                    let mut labels = sample.labels.clone();
                    labels.sort();
                    if !series.insert((sample.name.clone(), labels)) {
                        return Err(error(n, "the same series a second time"));
                    }
                    family.samples.push(sample);
                }
            }
        }
        let last = lines.len();
        families
            .into_iter()
            .map(|f| match f.kind {
                Some(kind) => Ok(Family {
                    name: f.name,
                    help: f.help,
                    kind,
                    samples: f.samples,
                }),
                None => Err(error(last, &format!("{} has no TYPE line", f.name))),
            })
            .collect::<Result<_, _>>()
            .map(|families| Exposition { families })
    }

    enum Line {
        Help(String),
        Type(Kind),
        Sample(Sample),
    }

    fn error(line: usize, message: &str) -> ParseError {
        ParseError {
            line,
            message: message.to_string(),
        }
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    pub fn is_metric_name(name: &str) -> bool {
        let mut bytes = name.bytes();
        bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    pub fn is_label_name(name: &str) -> bool {
        let mut bytes = name.bytes();
        bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.starts_with("__")
    }

    /// A HELP text: `\\` and `\n` are its only escapes.
    fn unescape_help(text: &str) -> Result<String, String> {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    other => return Err(format!("bad escape \\{other:?} in HELP text")),
                },
                c => out.push(c),
            }
        }
        Ok(out)
    }

    /// `name value` or `name{label="value",...} value`.
    fn parse_sample(line: &str) -> Result<Sample, String> {
        let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
        let name = &line[..name_end];
        let mut rest = &line[name_end..];
        let mut labels: Vec<(String, String)> = Vec::new();
        if let Some(after_brace) = rest.strip_prefix('{') {
            rest = after_brace;
            if rest.starts_with('}') {
                return Err("an empty label set {} (write the name alone)".into());
            }
            loop {
                let (label, after) = rest.split_once("=\"").ok_or("a label without =\"")?;
                if !is_label_name(label) {
                    return Err(format!("{label:?} is not a valid label name"));
                }
                if labels.iter().any(|(l, _)| l == label) {
                    return Err(format!("label {label} twice"));
                }
                let (value, after) = label_value(after)?;
                labels.push((label.to_string(), value));
                match after.as_bytes().first() {
                    Some(b',') => rest = &after[1..],
                    Some(b'}') => {
                        rest = &after[1..];
                        break;
                    }
                    _ => return Err("a label not followed by , or }".into()),
                }
            }
        }
        let value = rest
            .strip_prefix(' ')
            .ok_or("no single space before the value")?;
        let value = parse_value(value).ok_or_else(|| format!("{value:?} is not a value"))?;
        Ok(Sample {
            name: name.to_string(),
            labels,
            value,
        })
    }

    /// A label value up to its closing quote, unescaped; and what follows.
    fn label_value(text: &str) -> Result<(String, &str), String> {
        let mut value = String::new();
        let mut chars = text.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((value, &text[i + 1..])),
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape in a label value: {other:?}")),
                },
                '\n' => return Err("a raw line feed in a label value".into()),
                c => value.push(c),
            }
        }
        Err("a label value without its closing quote".into())
    }

    /// A float as Go's `ParseFloat` reads it, plus the format's `NaN`,
    /// `+Inf` and `-Inf`; nothing else (no `inf`, no spaces, no timestamp).
    fn parse_value(text: &str) -> Option<f64> {
        match text {
            "NaN" => Some(f64::NAN),
            "+Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            _ if !text.is_empty()
                && text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
            {
                text.parse().ok()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prometheus_text::{Kind as TextKind, parse};
    use super::*;
    use crate::settings::config::Check;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Two frontends of two backends each; the second backend of `db` is
    /// checked.
    fn registry(workers: usize) -> (Arc<Registry>, Vec<Arc<HealthBoard>>) {
        let check = Some(Check {
            inter: Duration::from_secs(1),
            fall: 1,
            rise: 1,
            timeout: Duration::from_secs(1),
        });
        let web = vec![addr(9001), addr(9002)];
        let db = vec![addr(9101), addr(9102)];
        let web_board = Arc::new(HealthBoard::new("web", &[(web[0], None), (web[1], None)]));
        let db_board = Arc::new(HealthBoard::new("db", &[(db[0], None), (db[1], check)]));
        let frontends = [
            ("web".to_string(), web, web_board.clone()),
            ("db".to_string(), db, db_board.clone()),
        ];
        (
            Registry::new(&frontends, workers),
            vec![web_board, db_board],
        )
    }

    #[test]
    fn render_sums_the_workers_and_parses() {
        let (registry, boards) = registry(2);
        assert_eq!(registry.workers(), 2);
        // Worker 0: three web clients, one still open, on backend 1.
        let w0 = registry.worker(0, 0);
        for _ in 0..3 {
            inc(&w0.connections);
        }
        let _open = Active::new(&w0.active);
        add(&w0.bytes_in, 100);
        add(&w0.bytes_out, 2000);
        inc(&w0.backends[1].connections);
        let _to_backend = Active::new(&w0.backends[1].active);
        add(&w0.backends[1].bytes_in, 100);
        add(&w0.backends[1].bytes_out, 2000);
        // Worker 1: two web clients, one retried after backend 0 refused;
        // a closed connection leaves the gauge where it was.
        let w1 = registry.worker(1, 0);
        add(&w1.connections, 2);
        drop(Active::new(&w1.active));
        inc(&w1.retries);
        inc(&w1.backends[0].connect_errors);
        add(&w1.bytes_in, 5);
        inc(&w1.accept_errors);
        // db, on both workers.
        inc(&registry.worker(0, 1).denied);
        inc(&registry.worker(1, 1).denied);
        inc(&registry.worker(1, 1).queue_timeouts);
        inc(&registry.worker(1, 1).timeouts);
        inc(&registry.worker(0, 1).connect_errors);
        // Health: db's checked backend failed a check (fall 1: down) and
        // web's backend 0 is up (never checked).
        boards[1].check_result(1, Err("connection refused".into()));
        boards[1].check_result(1, Err("connection refused".into()));

        let text = registry.render();
        let metrics = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let web = [("frontend", "web")];
        let db = [("frontend", "db")];
        let expect = [
            ("proxy_frontend_connections_total", &web, 5.0),
            ("proxy_frontend_active_connections", &web, 1.0),
            ("proxy_frontend_bytes_in_total", &web, 105.0),
            ("proxy_frontend_bytes_out_total", &web, 2000.0),
            ("proxy_frontend_retries_total", &web, 1.0),
            ("proxy_accept_errors_total", &web, 1.0),
            ("proxy_frontend_connect_errors_total", &web, 0.0),
            ("proxy_frontend_connect_errors_total", &db, 1.0),
            ("proxy_frontend_denied_total", &db, 2.0),
            ("proxy_frontend_queue_timeouts_total", &db, 1.0),
            ("proxy_frontend_timeouts_total", &db, 1.0),
            ("proxy_frontend_connections_total", &db, 0.0),
        ];
        for (name, labels, value) in expect {
            assert_eq!(
                metrics.value(name, labels),
                Some(value),
                "{name} {labels:?}"
            );
        }
        let backend = |f: &'static str, b: &'static str| [("frontend", f), ("backend", b)];
        let expect = [
            (
                "proxy_backend_connections_total",
                backend("web", "127.0.0.1:9002"),
                1.0,
            ),
            (
                "proxy_backend_active_connections",
                backend("web", "127.0.0.1:9002"),
                1.0,
            ),
            (
                "proxy_backend_bytes_in_total",
                backend("web", "127.0.0.1:9002"),
                100.0,
            ),
            (
                "proxy_backend_bytes_out_total",
                backend("web", "127.0.0.1:9002"),
                2000.0,
            ),
            (
                "proxy_backend_connect_errors_total",
                backend("web", "127.0.0.1:9001"),
                1.0,
            ),
            (
                "proxy_backend_connections_total",
                backend("web", "127.0.0.1:9001"),
                0.0,
            ),
            ("proxy_backend_up", backend("web", "127.0.0.1:9001"), 1.0),
            ("proxy_backend_up", backend("db", "127.0.0.1:9102"), 0.0),
            (
                "proxy_backend_check_failures_total",
                backend("db", "127.0.0.1:9102"),
                2.0,
            ),
            (
                "proxy_backend_check_successes_total",
                backend("db", "127.0.0.1:9102"),
                0.0,
            ),
            (
                "proxy_backend_check_failures_total",
                backend("db", "127.0.0.1:9101"),
                0.0,
            ),
        ];
        for (name, labels, value) in expect {
            assert_eq!(
                metrics.value(name, &labels),
                Some(value),
                "{name} {labels:?}"
            );
        }
        // Every family has its help, and the kinds are right.
        for family in &metrics.families {
            assert!(family.name.starts_with("proxy_"), "{}", family.name);
            assert!(family.help.as_deref().is_some_and(|h| !h.is_empty()));
            let counter = family.name.ends_with("_total");
            assert_eq!(family.kind == TextKind::Counter, counter, "{}", family.name);
        }
        // 2 frontends x 10 families, 4 backends x 8 families.
        let labelled = metrics.samples().filter(|s| !s.labels.is_empty()).count();
        assert_eq!(labelled, 2 * 10 + 4 * 8);
    }

    #[test]
    fn process_figures_come_from_proc() {
        let (registry, _boards) = registry(1);
        let metrics = parse(&registry.render()).expect("parses");
        let value = |name| metrics.value(name, &[]).unwrap_or_else(|| panic!("{name}"));
        assert!(
            value("proxy_process_open_fds") >= 3.0,
            "stdin, stdout, stderr"
        );
        assert!(value("proxy_process_max_fds") >= value("proxy_process_open_fds"));
        assert!(value("proxy_process_resident_memory_bytes") > 1e5);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let started = value("proxy_process_start_time_seconds");
        // This test process started a little while ago (allowing for a
        // tick of rounding and a slow machine).
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        assert!(value("proxy_process_cpu_seconds_total") >= 0.0);
    }

    #[test]
    fn label_values_and_help_texts_are_escaped() {
        let name = "a \"quoted\" \\ name\nwith a line feed";
        let board = Arc::new(HealthBoard::new(name, &[(addr(1), None)]));
        let frontends = [(name.to_string(), vec![addr(1)], board)];
        let text = Registry::new(&frontends, 1).render();
        assert!(
            text.contains(r#"{frontend="a \"quoted\" \\ name\nwith a line feed"}"#),
            "{text}"
        );
        let metrics = parse(&text).expect("parses");
        let labels = [("frontend", name)];
        assert_eq!(
            metrics.value("proxy_frontend_connections_total", &labels),
            Some(0.0)
        );
        assert_eq!(escape("a\\b\nc\"d", false), "a\\\\b\\nc\"d");
    }

    #[test]
    fn an_empty_registry_renders_only_the_process() {
        let text = Registry::new(&[], 4).render();
        let metrics = parse(&text).expect("parses");
        assert!(
            metrics
                .families
                .iter()
                .all(|f| f.name.starts_with("proxy_process_"))
        );
    }

    #[test]
    fn concurrent_workers_lose_no_count() {
        let (registry, _boards) = registry(4);
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let counters = registry.worker(w, 0);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        inc(&counters.connections);
                        add(&counters.backends[w % 2].bytes_in, 3);
                    }
                })
            })
            .collect();
        // Scrapes while they count: always parseable.
        for _ in 0..20 {
            parse(&registry.render()).expect("parses mid-count");
        }
        for t in threads {
            t.join().expect("a worker");
        }
        let metrics = parse(&registry.render()).expect("parses");
        let web = [("frontend", "web")];
        let connections = metrics.value("proxy_frontend_connections_total", &web);
        assert_eq!(connections, Some(40_000.0));
        let b0 = [("frontend", "web"), ("backend", "127.0.0.1:9001")];
        assert_eq!(
            metrics.value("proxy_backend_bytes_in_total", &b0),
            Some(60_000.0)
        );
    }

    #[test]
    fn counter_blocks_do_not_share_cache_lines() {
        assert_eq!(std::mem::align_of::<FrontendCounters>(), 128);
        assert_eq!(std::mem::size_of::<BackendCounters>(), 128);
    }

    #[test]
    fn floats_use_the_formats_names() {
        assert_eq!(Float(f64::INFINITY).to_string(), "+Inf");
        assert_eq!(Float(f64::NEG_INFINITY).to_string(), "-Inf");
        assert_eq!(Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Float(1.5).to_string(), "1.5");
        assert_eq!(Float(1e21).to_string(), "1000000000000000000000");
    }

    #[test]
    fn proc_files_parse() {
        let stat = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n";
        let fields = stat_fields(stat).expect("fields");
        assert_eq!(fields[0], "S", "field 3");
        assert_eq!(fields[22 - 3], "19", "field 22 (starttime)");
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t    2048 kB\n"),
            Some(2048 * 1024)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            max_open_files("Max open files  unlimited  unlimited  files\n"),
            None
        );
        let word = std::mem::size_of::<usize>();
        let mut auxv = Vec::new();
        for (k, v) in [(6usize, 4096usize), (AT_CLKTCK, 100), (0, 0)] {
            auxv.extend_from_slice(&k.to_ne_bytes());
            auxv.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(auxv.len(), 6 * word);
        assert_eq!(auxv_entry(&auxv, AT_CLKTCK), Some(100));
        assert_eq!(auxv_entry(&auxv, 99), None);
        assert!(clock_ticks_per_second() > 0.0);
    }

    /// The parser is strict: each of these is one rule broken.
    #[test]
    fn the_parser_rejects_what_the_format_forbids() {
        let bad = [
            ("no final line feed", "# TYPE a gauge\na 1"),
            ("sample without TYPE", "a 1\n"),
            ("TYPE after sample", "# TYPE a gauge\na 1\n# TYPE a gauge\n"),
            ("HELP after sample", "# TYPE a gauge\na 1\n# HELP a late\n"),
            ("two HELPs", "# HELP a x\n# HELP a y\n# TYPE a gauge\n"),
            ("unknown type", "# TYPE a histogram\n"),
            ("bad metric name", "# TYPE 1a gauge\n1a 1\n"),
            ("bad label name", "# TYPE a gauge\na{1x=\"v\"} 1\n"),
            ("reserved label name", "# TYPE a gauge\na{__x=\"v\"} 1\n"),
            ("unquoted label", "# TYPE a gauge\na{x=v} 1\n"),
            ("unterminated value", "# TYPE a gauge\na{x=\"v} 1\n"),
            ("bad escape", "# TYPE a gauge\na{x=\"\\t\"} 1\n"),
            ("space in labels", "# TYPE a gauge\na{x=\"v\", y=\"w\"} 1\n"),
            ("trailing comma", "# TYPE a gauge\na{x=\"v\",} 1\n"),
            ("empty braces", "# TYPE a gauge\na{} 1\n"),
            ("duplicate label", "# TYPE a gauge\na{x=\"v\",x=\"w\"} 1\n"),
            (
                "duplicate series",
                "# TYPE a gauge\na{x=\"v\"} 1\na{x=\"v\"} 2\n",
            ),
            ("not a float", "# TYPE a gauge\na one\n"),
            ("rust's inf", "# TYPE a gauge\na inf\n"),
            ("two spaces", "# TYPE a gauge\na  1\n"),
            ("a timestamp", "# TYPE a gauge\na 1 1700000000000\n"),
            ("no value", "# TYPE a gauge\na\n"),
            ("negative counter", "# TYPE a_total counter\na_total -1\n"),
            ("split group", "# TYPE a gauge\n# TYPE b gauge\na 1\n"),
            ("other comment", "# just a comment\n"),
            ("empty line", "# TYPE a gauge\n\na 1\n"),
            ("carriage return", "# TYPE a gauge\r\na 1\r\n"),
            ("HELP without TYPE", "# HELP a x\n"),
            ("bad help escape", "# HELP a \\x\n# TYPE a gauge\n"),
        ];
        for (why, text) in bad {
            assert!(parse(text).is_err(), "accepted ({why}): {text:?}");
        }
    }

    #[test]
    fn the_parser_reads_what_the_format_allows() {
        let text = "# HELP a_total Help with \\\\ and \\n.\n\
                    # TYPE a_total counter\n\
                    a_total{x=\"q\\\"uote\",y=\"\"} 1.5e3\n\
                    a_total{x=\"other\"} 0\n\
                    # TYPE b gauge\n\
                    b -Inf\n\
                    # TYPE c:d gauge\n\
                    c:d NaN\n";
        let metrics = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(metrics.families.len(), 3);
        let a = metrics.family("a_total").expect("a");
        assert_eq!(a.help.as_deref(), Some("Help with \\ and \n."));
        assert_eq!(a.samples[0].label("x"), Some("q\"uote"));
        assert_eq!(
            metrics.value("a_total", &[("y", ""), ("x", "q\"uote")]),
            Some(1500.0)
        );
        assert_eq!(
            metrics.value("a_total", &[("x", "q\"uote")]),
            None,
            "exact label set"
        );
        assert_eq!(metrics.value("b", &[]), Some(f64::NEG_INFINITY));
        assert!(metrics.value("c:d", &[]).is_some_and(f64::is_nan));
        assert_eq!(parse(""), Ok(Default::default()));
    }
}
