//! The load client: closed-loop request load, bulk streams, and idle
//! connections, with the numbers that describe how each went.
//!
//! Four ways to load a server (a proxy, or a fixture backend directly):
//!
//! | what                 | function            | how                                              | backend |
//! |----------------------|---------------------|--------------------------------------------------|---------|
//! | requests, new conns  | [`run_closed_loop`] | [`Pattern::NewConnection`]: a connection each    | `reply` |
//! | requests, keep-alive | [`run_closed_loop`] | [`Pattern::KeepAlive`]: many lines on one conn   | `echo`  |
//! | throughput           | [`run_bulk`]        | S streams of pseudo-random bytes, echoed back    | `echo`  |
//! | held connections     | [`open_idle`]       | K connections, one round trip each, then idle    | `echo`  |
//!
//! ## The closed loop
//!
//! *Closed loop* means each client sends its next request only when the
//! previous one has finished, so at most C requests are in flight and the
//! offered load adapts to the server's speed. (An open-loop client sends at
//! a fixed rate whatever happens; it measures something else.) By Little's
//! law a closed loop of C clients against a server that takes L per request
//! cannot go faster than C / L requests per second.
//!
//! ```text
//!   shared counter: tickets left ───┬── client task 1: take n ─> request n ─> record ─> take ...
//!   (until N are taken, or the      ├── client task 2: ...
//!    duration is over)              └── client task C: ...
//!
//!   new connection:  connect ─> "GET n\n" ─> FIN ─> read to EOF ─> "port 9002: GET n\n"
//!                    └──────────────── latency, bounded by the timeout ───────────┘
//!   keep-alive:      (connect once) "GET n\n" ─> read one line ─> "GET n\n" ─> next request ...
//!                                   └──────────── latency ─────────────┘
//! ```
//!
//! A reply must answer *this* request: `<tag>: GET n` from a `reply`
//! backend, exactly `GET n` from an `echo` one. A reply to some other
//! request would mean a proxy crossed two connections, and that is counted
//! as an error, not a success. The tag before the `:` (`port 9002`) says
//! which backend answered; the report counts replies per tag.
//!
//! ## Not being the bottleneck
//!
//! A load client that saturates its own CPU measures itself, not the
//! server. So every report carries the CPU time this process used during
//! the run ([`LoadReport::client_cpu`], from `getrusage`): a closed loop or
//! a bulk run uses one thread, so CPU time close to the elapsed time means
//! the client was the limit.
//!
//! Where that CPU goes depends on the run. With a new connection per
//! request it is mostly the kernel's, in `connect`: the client sends the
//! first FIN, so every finished connection leaves a TIME_WAIT entry on the
//! client's side, and `connect` must search the ephemeral port range
//! (`net.ipv4.ip_local_port_range`) for a port whose pair with the target
//! is not still waiting. On loopback Linux reuses a waiting pair after a
//! second, so one source address to one target runs out of cheap ports at
//! a rate of the order of the range's size per second. Measured on a
//! 2-core VM with the default 28,232 ports: about 14,000 new connections
//! per second straight to a `reply` fixture, the client at a full core,
//! half of it in the kernel's port search (`__inet_hash_connect`). A proxy
//! meets the same wall on its connections to the backends. Keep-alive and
//! bulk runs spend it on system calls, copies and (bulk) the checksum.
//!
//! Every closed-loop client task and every bulk stream runs on one
//! [`Runtime`] on the calling thread: the load client is itself an event
//! loop, so it keeps a thousand requests in flight without a thousand
//! threads. Idle connections need no event loop at all (they do nothing),
//! so they are plain blocking sockets.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use runtime::combinator::join;
use runtime::net::TcpStream;
use runtime::{Runtime, spawn, time};

/// The longest reply read; a peer that sends more is misbehaving and the
/// request counts as an error.
pub const MAX_REPLY: usize = 64 * 1024;

/// The tag under which keep-alive replies are counted in
/// [`LoadReport::per_backend`]: an echo cannot say which backend sent it.
pub const ECHO_TAG: &str = "echo";

/// Bytes in a mebibyte, the unit of bulk throughput.
pub const MIB: u64 = 1024 * 1024;

/// How a closed-loop client uses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// A new connection per request: connect, write "GET n\n",
    /// shutdown(Write), read the reply to EOF (the seed's pattern; needs a
    /// Reply backend).
    NewConnection,
    /// `per_connection` requests on one connection: write a line, read one
    /// line back (needs an Echo backend), repeat; then close.
    KeepAlive {
        /// Requests each connection carries before the client closes it
        /// and opens the next (at least 1).
        per_connection: usize,
    },
}

/// What load to generate.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Where to connect (a proxy, or a fixture backend directly).
    pub target: SocketAddr,
    /// Concurrent clients: requests in flight at once.
    pub clients: usize,
    /// The most requests to issue in total, shared by the clients. With a
    /// `duration`, use `usize::MAX` to let the clock alone decide.
    pub requests: usize,
    /// Stop issuing new requests once this much time has passed since the
    /// start. Requests already in flight still finish (each within the
    /// timeout), so the run lasts a little longer than this.
    pub duration: Option<Duration>,
    /// The most one request may take (for a new connection: connect to end
    /// of reply; for keep-alive: the request on its connection, including
    /// the connect if it opens one).
    pub timeout: Duration,
    /// How the clients use connections.
    pub pattern: Pattern,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 8080)),
            clients: 64,
            requests: 1000,
            duration: None,
            timeout: Duration::from_secs(10),
            pattern: Pattern::NewConnection,
        }
    }
}

/// What happened: counts, time, and one latency per successful request.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Requests made: always `ok + errors`.
    pub requests: u64,
    /// Requests answered with a well-formed reply to that request.
    pub ok: u64,
    /// Requests that failed: refused, reset, timed out, or a wrong reply.
    pub errors: u64,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
    /// One latency per successful request, sorted (shortest first). For a
    /// new connection: from before `connect` to the reply's end of file.
    /// For keep-alive: from the request's write to its echoed line (the
    /// connect is paid once per connection, not per request).
    pub latencies: Vec<Duration>,
    /// Successful replies per backend tag (`port 9001`, or [`ECHO_TAG`]
    /// for keep-alive); sums to `ok`.
    pub per_backend: BTreeMap<String, u64>,
    /// The first error seen, to say what went wrong.
    pub first_error: Option<String>,
    /// User plus system CPU time the load client's process used during the
    /// run (`getrusage(RUSAGE_SELF)` before and after). The whole process:
    /// in a test that also runs a fixture in-process, that counts too.
    pub client_cpu: Duration,
}

impl LoadReport {
    /// Successful requests per second of the whole run.
    pub fn req_per_sec(&self) -> f64 {
        per_second(self.ok as f64, self.elapsed)
    }

    /// The mean latency, or None without a successful request.
    pub fn average(&self) -> Option<Duration> {
        let count = u128::try_from(self.latencies.len()).ok()?;
        if count == 0 {
            return None;
        }
        let total: u128 = self.latencies.iter().map(Duration::as_nanos).sum();
        u64::try_from(total / count).ok().map(Duration::from_nanos)
    }

    /// The `p`th percentile (`p` in percent, 0 to 100) by the nearest-rank
    /// method: the smallest recorded latency that at least `p`% of the
    /// requests did not exceed. Always one of the samples, never an
    /// interpolation. None without samples, or if `p` is NaN.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        nearest_rank(&self.latencies, p)
    }

    /// The median latency: `percentile(50.0)`.
    pub fn p50(&self) -> Option<Duration> {
        self.percentile(50.0)
    }

    /// The longest latency.
    pub fn max(&self) -> Option<Duration> {
        self.latencies.last().copied()
    }

    /// The report as one line of JSON, for scripts:
    ///
    /// ```text
    /// {"requests":1000,"ok":1000,"errors":0,"elapsed_s":0.512345,"req_per_s":1951.814,
    ///  "avg_ms":32.101,"p50_ms":31.980,"p99_ms":48.012,"max_ms":51.330,"client_cpu_s":0.210000,
    ///  "per_backend":{"port 9001":500,"port 9002":500},"first_error":null}
    /// ```
    ///
    /// (shown wrapped; the real thing has no newline). The latencies are
    /// `null` when no request succeeded, since there is no latency to give.
    pub fn to_json(&self) -> String {
        let mut per_backend = JsonObject::new();
        for (tag, count) in &self.per_backend {
            per_backend = per_backend.uint(tag, *count);
        }
        JsonObject::new()
            .uint("requests", self.requests)
            .uint("ok", self.ok)
            .uint("errors", self.errors)
            .float("elapsed_s", self.elapsed.as_secs_f64(), 6)
            .float("req_per_s", self.req_per_sec(), 3)
            .millis("avg_ms", self.average())
            .millis("p50_ms", self.p50())
            .millis("p99_ms", self.percentile(99.0))
            .millis("max_ms", self.max())
            .float("client_cpu_s", self.client_cpu.as_secs_f64(), 6)
            .object("per_backend", per_backend)
            .string("first_error", self.first_error.as_deref())
            .finish()
    }
}

/// Nearest rank of `p` percent in `sorted`: the sample at rank
/// ceil(p / 100 * n), counting from 1.
fn nearest_rank(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() || p.is_nan() {
        return None;
    }
    let n = sorted.len() as f64;
    // p * n / 100 may land a hair above a whole number (99.9 has no exact
    // binary form), which ceil would push one rank too far; a tolerance far
    // smaller than one rank absorbs that rounding.
    let exact = p.clamp(0.0, 100.0) * n / 100.0;
    let rank = (exact - 1e-9).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

/// `count` per second of `elapsed`; 0 for an instant run.
fn per_second(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count / secs } else { 0.0 }
}

/// How much of one core `cpu` is over `elapsed`: 1.0 is one core busy the
/// whole time (a one-thread client that is its own bottleneck).
pub fn cpu_share(cpu: Duration, elapsed: Duration) -> f64 {
    per_second(cpu.as_secs_f64(), elapsed)
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        write!(
            f,
            "{} requests ({} ok, {} errors) in {:.2} s: {:.1} req/s; \
             latency avg {:.1} ms, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            self.requests,
            self.ok,
            self.errors,
            self.elapsed.as_secs_f64(),
            self.req_per_sec(),
            ms(self.average()),
            ms(self.p50()),
            ms(self.percentile(99.0)),
            ms(self.max()),
        )?;
        let served: Vec<String> = self
            .per_backend
            .iter()
            .map(|(tag, count)| format!("{tag} = {count}"))
            .collect();
        if !served.is_empty() {
            write!(f, "; served by {}", served.join(", "))?;
        }
        write_client_cpu(f, self.client_cpu, self.elapsed)?;
        if let Some(error) = &self.first_error {
            write!(f, "; first error: {error}")?;
        }
        Ok(())
    }
}

/// The client CPU part of a summary: seconds, and the share of one core.
fn write_client_cpu(f: &mut fmt::Formatter<'_>, cpu: Duration, elapsed: Duration) -> fmt::Result {
    write!(
        f,
        "; client CPU {:.2} s ({:.0}% of one core)",
        cpu.as_secs_f64(),
        cpu_share(cpu, elapsed) * 100.0
    )
}

// ---- the closed loop --------------------------------------------------------

/// Runs the closed loop described by `options` on a new [`Runtime`] on the
/// calling thread, and reports. Failed requests are counted, never fatal;
/// only a runtime that cannot start, zero clients for some requests, or a
/// keep-alive of zero requests per connection is an error.
pub fn run_closed_loop(options: &LoadOptions) -> io::Result<LoadReport> {
    if options.clients == 0 && options.requests > 0 {
        return Err(invalid_input("a load needs at least one client"));
    }
    if options.pattern == (Pattern::KeepAlive { per_connection: 0 }) {
        return Err(invalid_input(
            "a keep-alive connection must carry at least one request",
        ));
    }
    let runtime = Runtime::new()?;
    let cpu_before = process_cpu_time()?;
    let mut report = runtime.block_on(drive(options.clone()))?;
    report.client_cpu = process_cpu_time()?.saturating_sub(cpu_before);
    Ok(report)
}

fn invalid_input(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

/// The state every client task shares (one thread: `Rc` and `Cell` suffice).
struct Run {
    options: LoadOptions,
    /// No ticket is handed out at or after this instant (the duration's end).
    deadline: Option<Instant>,
    /// The next request number to hand out.
    next: Cell<usize>,
    tally: RefCell<LoadReport>,
}

impl Run {
    /// Takes the next request number, or None when all are handed out or
    /// the duration is over.
    fn take_ticket(&self) -> Option<usize> {
        let n = self.next.get();
        if n >= self.options.requests {
            return None;
        }
        if self.deadline.is_some_and(|end| Instant::now() >= end) {
            return None;
        }
        self.next.set(n + 1);
        Some(n)
    }

    /// Counts one finished request.
    fn record(&self, n: usize, outcome: io::Result<(String, Duration)>) {
        let mut tally = self.tally.borrow_mut();
        tally.requests += 1;
        match outcome {
            Ok((tag, latency)) => {
                tally.ok += 1;
                tally.latencies.push(latency);
                *tally.per_backend.entry(tag).or_insert(0) += 1;
            }
            Err(e) => {
                tally.errors += 1;
                if tally.first_error.is_none() {
                    tally.first_error = Some(format!("request {n}: {e}"));
                }
            }
        }
    }
}

/// Starts the client tasks, waits for all of them, and builds the report.
async fn drive(options: LoadOptions) -> io::Result<LoadReport> {
    // More clients than requests would only start tasks with nothing to do.
    let clients = options.clients.min(options.requests);
    let started = Instant::now();
    let run = Rc::new(Run {
        deadline: options.duration.map(|d| started + d),
        options,
        next: Cell::new(0),
        tally: RefCell::new(LoadReport::default()),
    });
    let tasks: Vec<_> = (0..clients).map(|_| spawn(client(run.clone()))).collect();
    for task in tasks {
        task.await
            .map_err(|e| io::Error::other(format!("a load client task failed: {e}")))?;
    }
    let mut report = run.tally.replace(LoadReport::default());
    report.elapsed = started.elapsed();
    report.latencies.sort_unstable();
    Ok(report)
}

/// One client: requests, one after the other, until no ticket is left.
async fn client(run: Rc<Run>) {
    match run.options.pattern {
        Pattern::NewConnection => new_connection_client(&run).await,
        Pattern::KeepAlive { per_connection } => keep_alive_client(&run, per_connection).await,
    }
}

/// Runs `future`, turning "it took longer than `limit`" into a `TimedOut`
/// error that says `{what} within {limit}`.
async fn bounded<T>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match time::timeout(limit, future).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} within {limit:?}"),
        )),
    }
}

/// The client loop of [`Pattern::NewConnection`].
async fn new_connection_client(run: &Run) {
    while let Some(n) = run.take_ticket() {
        let (target, limit) = (run.options.target, run.options.timeout);
        let outcome = bounded(limit, "no complete reply", request(target, n)).await;
        run.record(n, outcome);
    }
}

/// One request on a new connection; returns the reply's backend tag and
/// the latency from before `connect` to the reply's end of file.
async fn request(target: SocketAddr, n: usize) -> io::Result<(String, Duration)> {
    let started = Instant::now();
    let conn = TcpStream::connect(target).await?;
    let request = format!("GET {n}");
    conn.write_all(format!("{request}\n").as_bytes()).await?;
    // Our FIN says "that was the whole request"; the reply comes after it.
    conn.shutdown(Shutdown::Write)?;
    let reply = read_to_end(&conn, MAX_REPLY).await?;
    let latency = started.elapsed();
    let tag = reply_tag(&reply, &request)
        .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, why))?;
    Ok((tag, latency))
}

/// Reads until end of file, failing past `limit` bytes.
async fn read_to_end(conn: &TcpStream, limit: usize) -> io::Result<Vec<u8>> {
    let mut reply = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(reply);
        }
        reply.extend_from_slice(&chunk[..n]);
        if reply.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reply longer than {limit} bytes"),
            ));
        }
    }
}

/// Checks that `reply` is exactly `<tag>: <request>\n` and returns the tag.
pub fn reply_tag(reply: &[u8], request: &str) -> Result<String, String> {
    if reply.is_empty() {
        return Err("the connection closed without a reply".to_string());
    }
    let text = String::from_utf8_lossy(reply);
    let wrong = || format!("unexpected reply {text:?} to {request:?}");
    let line = text.strip_suffix('\n').ok_or_else(wrong)?;
    let (tag, rest) = line.split_once(':').ok_or_else(wrong)?;
    if tag.is_empty() || rest.strip_prefix(' ') != Some(request) {
        return Err(wrong());
    }
    Ok(tag.to_string())
}

/// An open keep-alive connection and how many requests it has carried.
struct Session {
    conn: TcpStream,
    served: usize,
}

/// The client loop of [`Pattern::KeepAlive`]: requests go out on the
/// current session until it has carried `per_connection` of them, then the
/// next request opens a new one.
///
/// The session is moved into each request's future and handed back only on
/// success: after an error or a timeout nobody knows what is still in
/// flight on that connection, so it is dropped (closed) with the future and
/// the next request starts afresh.
async fn keep_alive_client(run: &Run, per_connection: usize) {
    let mut session: Option<Session> = None;
    while let Some(n) = run.take_ticket() {
        let (target, limit) = (run.options.target, run.options.timeout);
        let exchange = keep_alive_request(target, session.take(), n);
        let outcome = bounded(limit, "no complete reply", exchange).await;
        let outcome = outcome.map(|(mut used, latency)| {
            used.served += 1;
            if used.served < per_connection {
                session = Some(used);
            }
            (ECHO_TAG.to_string(), latency)
        });
        run.record(n, outcome);
    }
    // Dropping the last session closes it: every echo was read, so nothing
    // is left unread and the close is a FIN, not a reset.
}

/// One request on `session` (or on a new connection if there is none):
/// writes `GET n\n`, reads one line, and checks it is the same line.
/// Returns the session for the next request, and the latency from the
/// write to the end of the echoed line.
async fn keep_alive_request(
    target: SocketAddr,
    session: Option<Session>,
    n: usize,
) -> io::Result<(Session, Duration)> {
    let session = match session {
        Some(session) => session,
        None => Session {
            conn: TcpStream::connect(target).await?,
            served: 0,
        },
    };
    let line = format!("GET {n}\n");
    let started = Instant::now();
    session.conn.write_all(line.as_bytes()).await?;
    let echo = read_line(&session.conn, MAX_REPLY).await?;
    let latency = started.elapsed();
    if echo != line.as_bytes() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unexpected echo {:?} of {line:?}",
                String::from_utf8_lossy(&echo)
            ),
        ));
    }
    Ok((session, latency))
}

/// Reads until the chunk that brings a newline, failing at end of file or
/// past `limit` bytes. Whatever came with the newline is returned too: one
/// request is in flight at a time, so anything after the newline is already
/// wrong, and the caller's comparison says so.
async fn read_line(conn: &TcpStream, limit: usize) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed before the echo was complete",
            ));
        }
        line.extend_from_slice(&chunk[..n]);
        if chunk[..n].contains(&b'\n') {
            return Ok(line);
        }
        if line.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("echo longer than {limit} bytes without a newline"),
            ));
        }
    }
}

// ---- CPU accounting ---------------------------------------------------------

/// User plus system CPU time this process (all its threads) has used so far.
pub fn process_cpu_time() -> io::Result<Duration> {
    let zero = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    // Built field by field rather than zeroed, so no unsafe is needed to
    // make it; getrusage overwrites every field anyway.
    let mut usage = libc::rusage {
        ru_utime: zero,
        ru_stime: zero,
        ru_maxrss: 0,
        ru_ixrss: 0,
        ru_idrss: 0,
        ru_isrss: 0,
        ru_minflt: 0,
        ru_majflt: 0,
        ru_nswap: 0,
        ru_inblock: 0,
        ru_oublock: 0,
        ru_msgsnd: 0,
        ru_msgrcv: 0,
        ru_nsignals: 0,
        ru_nvcsw: 0,
        ru_nivcsw: 0,
    };
    // SAFETY: `usage` is a valid, writable rusage for the whole call, and
    // getrusage writes nothing else.
    let ret = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(timeval_duration(usage.ru_utime) + timeval_duration(usage.ru_stime))
}

/// A `timeval` as a `Duration` (a negative field, which the kernel never
/// reports for CPU time, counts as zero).
fn timeval_duration(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u64::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

// ---- JSON -------------------------------------------------------------------

/// One JSON object, written key by key on one line. Hand-written because
/// the crate takes no dependencies, and a report is a handful of numbers.
struct JsonObject {
    text: String,
}

impl JsonObject {
    fn new() -> JsonObject {
        JsonObject {
            text: String::from("{"),
        }
    }

    /// Writes `"key":` (after a comma unless it is the first key).
    fn key(mut self, key: &str) -> JsonObject {
        if self.text.len() > 1 {
            self.text.push(',');
        }
        push_json_string(&mut self.text, key);
        self.text.push(':');
        self
    }

    fn raw(mut self, key: &str, value: &str) -> JsonObject {
        self = self.key(key);
        self.text.push_str(value);
        self
    }

    fn uint(self, key: &str, value: u64) -> JsonObject {
        self.raw(key, &value.to_string())
    }

    /// A number with `decimals` digits after the point. JSON has no NaN or
    /// infinity, so those (which no report should hold) become `null`.
    fn float(self, key: &str, value: f64, decimals: usize) -> JsonObject {
        if value.is_finite() {
            self.raw(key, &format!("{value:.decimals$}"))
        } else {
            self.raw(key, "null")
        }
    }

    /// A duration in milliseconds (to the microsecond), or `null`.
    fn millis(self, key: &str, value: Option<Duration>) -> JsonObject {
        match value {
            Some(d) => self.float(key, d.as_secs_f64() * 1000.0, 3),
            None => self.raw(key, "null"),
        }
    }

    fn boolean(self, key: &str, value: bool) -> JsonObject {
        self.raw(key, if value { "true" } else { "false" })
    }

    /// A string, escaped, or `null`.
    fn string(self, key: &str, value: Option<&str>) -> JsonObject {
        match value {
            Some(s) => {
                let mut quoted = String::with_capacity(s.len() + 2);
                push_json_string(&mut quoted, s);
                self.raw(key, &quoted)
            }
            None => self.raw(key, "null"),
        }
    }

    fn object(self, key: &str, value: JsonObject) -> JsonObject {
        self.raw(key, &value.finish())
    }

    fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

/// Appends `s` as a JSON string: quoted, with `"` and `\` escaped, and every
/// control character (which JSON forbids raw, and which would break the
/// one-line promise) written as an escape.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---- bulk streams -----------------------------------------------------------

/// Each write of a bulk stream, and the read buffer: big enough that the
/// system calls, not the bytes, are rare.
const BULK_CHUNK: usize = 64 * 1024;

/// What to stream.
#[derive(Debug, Clone)]
pub struct BulkOptions {
    /// Where to connect: an Echo backend, directly or through a proxy.
    pub target: SocketAddr,
    /// Bytes to send in total, split evenly over the streams; each comes
    /// back, so as many are received.
    pub bytes: u64,
    /// Connections streaming at once (at least 1).
    pub streams: usize,
    /// The longest a stream may go without progress: the connect, each
    /// 64 KiB write, each read. A bound on stalls, not on the whole run,
    /// so a big transfer through a slow proxy is not cut short.
    pub timeout: Duration,
}

/// What a bulk run moved, how fast, and whether it came back unchanged.
#[derive(Debug, Clone, Default)]
pub struct BulkReport {
    /// Streams run.
    pub streams: usize,
    /// Bytes echoed back, the total over streams; when `intact`, exactly
    /// the bytes sent, and as many went each way.
    pub bytes_each_way: u64,
    /// Wall-clock time from the first connect to the last end of file.
    pub elapsed: Duration,
    /// Every stream's echo matched what it sent, in checksum and length,
    /// and no stream failed.
    pub intact: bool,
    /// User plus system CPU time of this process during the run.
    pub client_cpu: Duration,
    /// The first failure, to say what went wrong.
    pub first_error: Option<String>,
}

impl BulkReport {
    /// Throughput each way: `bytes_each_way` in MiB per second of `elapsed`.
    pub fn mib_per_sec(&self) -> f64 {
        per_second(self.bytes_each_way as f64 / MIB as f64, self.elapsed)
    }

    /// The report as one line of JSON, for scripts:
    /// `{"streams":4,"bytes_each_way":67108864,"elapsed_s":0.081234,`
    /// `"mib_per_s":787.847,"intact":true,"client_cpu_s":0.070000,"first_error":null}`.
    pub fn to_json(&self) -> String {
        JsonObject::new()
            .uint("streams", self.streams as u64)
            .uint("bytes_each_way", self.bytes_each_way)
            .float("elapsed_s", self.elapsed.as_secs_f64(), 6)
            .float("mib_per_s", self.mib_per_sec(), 3)
            .boolean("intact", self.intact)
            .float("client_cpu_s", self.client_cpu.as_secs_f64(), 6)
            .string("first_error", self.first_error.as_deref())
            .finish()
    }
}

impl fmt::Display for BulkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} stream(s), {:.1} MiB each way in {:.2} s: {:.1} MiB/s, {}",
            self.streams,
            self.bytes_each_way as f64 / MIB as f64,
            self.elapsed.as_secs_f64(),
            self.mib_per_sec(),
            if self.intact { "intact" } else { "NOT intact" },
        )?;
        write_client_cpu(f, self.client_cpu, self.elapsed)?;
        if let Some(error) = &self.first_error {
            write!(f, "; first error: {error}")?;
        }
        Ok(())
    }
}

/// Streams `options.bytes` through the target and back on `options.streams`
/// connections at once, on a new [`Runtime`] on the calling thread.
///
/// ```text
///   stream i:  write 64 KiB, 64 KiB, ... FIN ──▶ echo ──┐
///              (pattern of stream i, checksummed)      │ both at once
///              read ◀── ... ◀── EOF ◀──────────────────┘ (checksummed)
///              intact = same checksum and same length both ways
/// ```
///
/// Writing and reading run at once (a `join` in the stream's task): a
/// client that wrote everything before reading would stall as soon as the
/// echo filled the socket buffers in both directions. A failed stream is
/// recorded in the report (`intact` false), not returned as an error; only
/// a runtime that cannot start, or zero streams, is an error.
pub fn run_bulk(options: &BulkOptions) -> io::Result<BulkReport> {
    if options.streams == 0 {
        return Err(invalid_input("a bulk run needs at least one stream"));
    }
    let runtime = Runtime::new()?;
    let cpu_before = process_cpu_time()?;
    let mut report = runtime.block_on(drive_bulk(options.clone()))?;
    report.client_cpu = process_cpu_time()?.saturating_sub(cpu_before);
    Ok(report)
}

/// Starts one task per stream, waits for all, and adds up what they did.
async fn drive_bulk(options: BulkOptions) -> io::Result<BulkReport> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.streams)
        .map(|index| {
            let len = stream_share(options.bytes, options.streams, index);
            spawn(bulk_stream(options.target, index, len, options.timeout))
        })
        .collect();
    let mut report = BulkReport {
        streams: options.streams,
        intact: true,
        ..BulkReport::default()
    };
    for task in tasks {
        let outcome = task
            .await
            .map_err(|e| io::Error::other(format!("a bulk stream task failed: {e}")))?;
        report.bytes_each_way += outcome.echoed;
        if let Some(error) = outcome.error {
            report.intact = false;
            report.first_error.get_or_insert(error);
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Stream `index`'s part of `total` bytes: an even split, the first
/// `total % streams` streams taking one byte more, so the parts add up to
/// exactly `total`.
fn stream_share(total: u64, streams: usize, index: usize) -> u64 {
    let (streams, index) = (streams as u64, index as u64);
    total / streams + u64::from(index < total % streams)
}

/// How one stream ended: the bytes it got back, and what went wrong, if
/// anything did (a failure, or an echo that does not match).
struct StreamOutcome {
    echoed: u64,
    error: Option<String>,
}

/// One stream: connect, then send `len` bytes and read the echo at once,
/// and compare the two checksums.
async fn bulk_stream(target: SocketAddr, index: usize, len: u64, limit: Duration) -> StreamOutcome {
    let failed = |e: io::Error| StreamOutcome {
        echoed: 0,
        error: Some(format!("stream {index}: {e}")),
    };
    let conn = match bounded(limit, "not connected", TcpStream::connect(target)).await {
        Ok(conn) => conn,
        Err(e) => return failed(e),
    };
    let seed = index as u64;
    let (sent, echoed) = join(
        stop_both_on_error(&conn, send_stream(&conn, seed, len, limit)),
        stop_both_on_error(&conn, receive_echo(&conn, len, limit)),
    )
    .await;
    let echoed_bytes = echoed.as_ref().map_or(0, |sum| sum.len());
    // The sender's error first: when it fails, the reader only sees the
    // consequence (an early end of file).
    let error = match (sent, echoed) {
        (Err(e), _) | (Ok(_), Err(e)) => Some(format!("stream {index}: {e}")),
        (Ok(sent), Ok(echoed)) if sent != echoed => Some(format!(
            "stream {index}: the echo ({} bytes, checksum {:016x}) does not match \
             what was sent ({} bytes, checksum {:016x})",
            echoed.len(),
            echoed.digest(),
            sent.len(),
            sent.digest()
        )),
        (Ok(_), Ok(_)) => None,
    };
    StreamOutcome {
        echoed: echoed_bytes,
        error,
    }
}

/// Runs one direction of a stream; if it fails, shuts the connection down
/// both ways, so the other direction stops at once (its read sees end of
/// file, its write an error) instead of waiting out its timeout.
async fn stop_both_on_error<T>(
    conn: &TcpStream,
    direction: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let outcome = direction.await;
    if outcome.is_err() {
        // Already broken: a failure to shut it down changes nothing.
        let _ = conn.shutdown(Shutdown::Both);
    }
    outcome
}

/// Sends `len` bytes of the pattern of stream `seed` in 64 KiB writes,
/// then a FIN; returns their checksum.
async fn send_stream(
    conn: &TcpStream,
    seed: u64,
    len: u64,
    limit: Duration,
) -> io::Result<StreamSum> {
    let mut chunk = vec![0u8; BULK_CHUNK];
    let mut sum = StreamSum::default();
    let mut offset = 0;
    while offset < len {
        let n = usize::try_from(len - offset).map_or(BULK_CHUNK, |left| left.min(BULK_CHUNK));
        let part = &mut chunk[..n];
        fill_pattern(seed, offset, part);
        sum.update(part);
        bounded(limit, "no write progress", conn.write_all(part)).await?;
        offset += n as u64;
    }
    // The FIN tells the echo "that was all"; it answers with its own.
    conn.shutdown(Shutdown::Write)?;
    Ok(sum)
}

/// Reads the echo to end of file; returns its checksum. More bytes than
/// were sent is an error at once (no point reading a runaway echo to EOF).
async fn receive_echo(conn: &TcpStream, expected: u64, limit: Duration) -> io::Result<StreamSum> {
    let mut chunk = vec![0u8; BULK_CHUNK];
    let mut sum = StreamSum::default();
    loop {
        let n = bounded(limit, "no echo", conn.read(&mut chunk)).await?;
        if n == 0 {
            return Ok(sum);
        }
        sum.update(&chunk[..n]);
        if sum.len() > expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("echoed more bytes than the {expected} sent"),
            ));
        }
    }
}

/// Fills `buf` with the bytes of stream `seed`'s pattern from byte `offset`
/// on (`offset` a multiple of 8, as every write's start is).
///
/// The pattern is a function of the position, word by word (the 8-byte
/// word at `w` is a mix of the seed and `w`), rather than a generator's
/// sequence: any part can be made without making what comes before it, and
/// the words are independent, so the CPU computes several at once.
fn fill_pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    debug_assert_eq!(offset % 8, 0, "writes start on a word");
    let seed_key = seed.wrapping_mul(POSITION_STEP);
    let mut position = offset / 8;
    // Whole words first: a copy of exactly 8 bytes is one store, where a
    // copy of a length only known at run time would be a call to memcpy.
    let mut words = buf.chunks_exact_mut(8);
    for bytes in &mut words {
        bytes.copy_from_slice(&mix64(seed_key ^ position).to_le_bytes());
        position += 1;
    }
    let rest = words.into_remainder();
    let last = mix64(seed_key ^ position).to_le_bytes();
    rest.copy_from_slice(&last[..rest.len()]);
}

/// A 64-bit finalizer (the one that ends splitmix64): every input bit
/// changes about half the output bits.
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A checksum of a byte stream that does not depend on how the stream was
/// cut into reads: the sender checksums 64 KiB writes, the receiver
/// whatever each read returned, and equal bytes give equal sums.
///
/// Each 8-byte word gives a [`checksum_term`] that depends on the word and
/// on its position, and the terms are added. The position makes swapped
/// words change the sum; the addition makes each word's work independent of
/// the last, so the CPU overlaps them, and one multiply a word keeps the
/// checksum far faster than loopback. (A byte-at-a-time hash such as
/// FNV-1a waits for each multiply before starting the next, and made the
/// client the bottleneck it must not be.)
#[derive(Debug, Clone, Copy, Default)]
struct StreamSum {
    sum: u64,
    /// Bytes seen; the whole words seen are `len / 8`.
    len: u64,
    /// The start of a word a read cut in two, waiting for the rest.
    tail: [u8; 8],
}

/// The distance between two positions' keys: odd, so no two of 2^64
/// positions share a key.
const POSITION_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// What the word `word` adds to the checksum at the position whose key is
/// `key`. For a given position it is a bijection of the word (xor with the
/// key, an xorshift, a multiply by an odd number: each can be undone), so a
/// change confined to one word always changes the sum.
fn checksum_term(word: u64, key: u64) -> u64 {
    let x = word ^ key;
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl StreamSum {
    fn update(&mut self, mut bytes: &[u8]) {
        let pending = (self.len % 8) as usize;
        if pending > 0 {
            let take = (8 - pending).min(bytes.len());
            self.tail[pending..pending + take].copy_from_slice(&bytes[..take]);
            self.len += take as u64;
            bytes = &bytes[take..];
            if self.len % 8 != 0 {
                return;
            }
            let key = (self.len / 8 - 1).wrapping_mul(POSITION_STEP);
            self.sum = self
                .sum
                .wrapping_add(checksum_term(u64::from_le_bytes(self.tail), key));
        }
        let mut words = bytes.chunks_exact(8);
        // Locals, so the loop keeps them in registers.
        let mut sum = self.sum;
        let mut key = (self.len / 8).wrapping_mul(POSITION_STEP);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            sum = sum.wrapping_add(checksum_term(u64::from_le_bytes(w), key));
            key = key.wrapping_add(POSITION_STEP);
        }
        self.sum = sum;
        let rest = words.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.len += bytes.len() as u64;
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// The checksum of everything so far, the last partial word included
    /// (its missing bytes as zeros; the length tells the rest).
    fn digest(&self) -> u64 {
        let pending = (self.len % 8) as usize;
        if pending == 0 {
            return self.sum;
        }
        let mut word = [0u8; 8];
        word[..pending].copy_from_slice(&self.tail[..pending]);
        let key = (self.len / 8).wrapping_mul(POSITION_STEP);
        self.sum
            .wrapping_add(checksum_term(u64::from_le_bytes(word), key))
    }
}

impl PartialEq for StreamSum {
    /// The same bytes: the same length and the same digest (the `tail`
    /// buffer beyond the length is scratch, not content).
    fn eq(&self, other: &StreamSum) -> bool {
        self.len == other.len && self.digest() == other.digest()
    }
}

// ---- idle connections -------------------------------------------------------

/// The line each idle connection sends and expects back, once when opened
/// and once per [`IdleConnections::verify`].
const PING: &[u8] = b"ping\n";

/// The most threads [`open_idle`] opens connections from.
const OPENER_THREADS: usize = 8;

/// Connections held open and idle, to measure what an idle connection costs
/// a proxy (memory, mostly). Each has done one echo round trip, so the
/// proxy's connection to its backend is open too, not just the client side.
///
/// Plain blocking std sockets: an idle connection does nothing, so it needs
/// no event loop.
#[derive(Debug)]
pub struct IdleConnections {
    target: SocketAddr,
    conns: Vec<std::net::TcpStream>,
}

/// Opens `count` connections to `target` (an Echo backend, directly or
/// through a proxy), does one `ping` round trip on each, and leaves them
/// idle. `timeout` bounds each connect and each read or write.
///
/// Opening runs on a few threads at once, since each connection waits for
/// its round trip. If any connection fails, all are closed and the error
/// says how many had succeeded.
pub fn open_idle(
    target: SocketAddr,
    count: usize,
    timeout: Duration,
) -> io::Result<IdleConnections> {
    let threads = count.clamp(1, OPENER_THREADS);
    // Set by the first failure, so the other threads stop soon after it
    // rather than keep opening connections that will be closed.
    let failed = AtomicBool::new(false);
    let shares = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let share = stream_share(count as u64, threads, index) as usize;
            let failed = &failed;
            let handle = thread::Builder::new()
                .name(format!("open-idle-{index}"))
                .spawn_scoped(scope, move || open_share(target, share, timeout, failed))?;
            handles.push(handle);
        }
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .map_err(|_| io::Error::other("a thread opening idle connections panicked"))
            })
            .collect::<io::Result<Vec<_>>>()
    })?;
    let mut conns = Vec::with_capacity(count);
    let mut first_error = None;
    for (opened, error) in shares {
        conns.extend(opened);
        if first_error.is_none() {
            first_error = error;
        }
    }
    match first_error {
        None => Ok(IdleConnections { target, conns }),
        Some(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "opened {} of {count} idle connections to {target}, then: {e}",
                conns.len()
            ),
        )),
    }
}

/// One opening thread's work: up to `count` connections, stopping at the
/// first failure (its own or, through `failed`, another thread's).
fn open_share(
    target: SocketAddr,
    count: usize,
    timeout: Duration,
    failed: &AtomicBool,
) -> (Vec<std::net::TcpStream>, Option<io::Error>) {
    let mut opened = Vec::with_capacity(count);
    for _ in 0..count {
        if failed.load(Ordering::Relaxed) {
            break;
        }
        match open_one(target, timeout) {
            Ok(conn) => opened.push(conn),
            Err(e) => {
                failed.store(true, Ordering::Relaxed);
                return (opened, Some(e));
            }
        }
    }
    (opened, None)
}

/// One idle connection: connected, bounded by `timeout`, one ping done.
fn open_one(target: SocketAddr, timeout: Duration) -> io::Result<std::net::TcpStream> {
    let mut conn = std::net::TcpStream::connect_timeout(&target, timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    ping(&mut conn)?;
    Ok(conn)
}

/// One round trip: `ping\n` out, the same five bytes back.
fn ping(conn: &mut std::net::TcpStream) -> io::Result<()> {
    conn.write_all(PING)?;
    let mut echo = [0u8; PING.len()];
    conn.read_exact(&mut echo).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => {
            io::Error::new(e.kind(), "the connection closed instead of echoing")
        }
        // A read timeout shows up as WouldBlock (EAGAIN) on Linux.
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            io::Error::new(io::ErrorKind::TimedOut, "no echo within the timeout")
        }
        _ => e,
    })?;
    if echo != PING {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected echo {:?}", String::from_utf8_lossy(&echo)),
        ));
    }
    Ok(())
}

impl IdleConnections {
    /// How many connections are held.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// One more round trip on each connection: are they all still alive
    /// (neither the proxy nor the backend dropped one while it was idle)?
    /// Fails at the first that is not, saying which.
    pub fn verify(&mut self) -> io::Result<()> {
        let total = self.conns.len();
        let target = self.target;
        for (index, conn) in self.conns.iter_mut().enumerate() {
            ping(conn).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("idle connection {index} of {total} to {target}: {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// Closes every connection. Each echo was read, so nothing is left
    /// unread and each close is a FIN, not a reset.
    pub fn close(self) {
        drop(self.conns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn report_of(latencies_ms: &[u64]) -> LoadReport {
        let mut latencies: Vec<Duration> = latencies_ms.iter().map(|&n| ms(n)).collect();
        latencies.sort_unstable();
        LoadReport {
            requests: latencies.len() as u64,
            ok: latencies.len() as u64,
            latencies,
            elapsed: Duration::from_secs(2),
            ..LoadReport::default()
        }
    }

    #[test]
    fn percentiles_are_exact_nearest_ranks() {
        let report = report_of(&(1..=100).collect::<Vec<_>>());
        assert_eq!(report.percentile(50.0), Some(ms(50)));
        assert_eq!(report.p50(), Some(ms(50)));
        assert_eq!(report.percentile(99.0), Some(ms(99)));
        assert_eq!(report.percentile(99.5), Some(ms(100)));
        assert_eq!(report.percentile(100.0), Some(ms(100)));
        assert_eq!(report.percentile(0.0), Some(ms(1)), "p0 is the minimum");
        assert_eq!(report.percentile(1.0), Some(ms(1)));
        assert_eq!(report.percentile(1.1), Some(ms(2)));
        assert_eq!(report.percentile(250.0), Some(ms(100)), "clamped");
        assert_eq!(report.percentile(f64::NAN), None);
        assert_eq!(report.max(), Some(ms(100)));
    }

    #[test]
    fn rounding_does_not_push_a_percentile_one_rank_up() {
        // 99.9% of 1000 is rank 999 exactly, though 99.9 * 1000 / 100 in
        // floating point is not exactly 999.
        let report = report_of(&(1..=1000).collect::<Vec<_>>());
        assert_eq!(report.percentile(99.9), Some(ms(999)));
        assert_eq!(report.percentile(99.99), Some(ms(1000)));
    }

    #[test]
    fn few_samples_and_none() {
        let one = report_of(&[7]);
        assert_eq!(one.percentile(50.0), Some(ms(7)));
        assert_eq!(one.percentile(99.0), Some(ms(7)));
        let two = report_of(&[10, 20]);
        assert_eq!(two.percentile(50.0), Some(ms(10)));
        assert_eq!(two.percentile(51.0), Some(ms(20)));
        let none = LoadReport::default();
        assert_eq!(none.percentile(50.0), None);
        assert_eq!(none.p50(), None);
        assert_eq!(none.average(), None);
        assert_eq!(none.max(), None);
        assert_eq!(none.req_per_sec(), 0.0);
    }

    #[test]
    fn average_and_rate() {
        let report = report_of(&[10, 20, 30, 40]);
        assert_eq!(report.average(), Some(ms(25)));
        assert_eq!(report.req_per_sec(), 2.0, "4 ok in 2 s");
        let text = report.to_string();
        assert!(text.starts_with("4 requests (4 ok, 0 errors)"), "{text}");
    }

    #[test]
    fn the_summary_names_the_client_cpu_and_its_share_of_a_core() {
        let report = LoadReport {
            client_cpu: ms(500),
            ..report_of(&[10])
        };
        let text = report.to_string();
        assert!(
            text.contains("client CPU 0.50 s (25% of one core)"),
            "{text}"
        );
        assert_eq!(cpu_share(ms(500), Duration::from_secs(2)), 0.25);
        assert_eq!(cpu_share(ms(500), Duration::ZERO), 0.0);
    }

    #[test]
    fn a_reply_must_answer_this_request() {
        assert_eq!(
            reply_tag(b"port 9001: GET 3\n", "GET 3"),
            Ok("port 9001".to_string())
        );
        let bad = |reply: &[u8]| reply_tag(reply, "GET 3").unwrap_err();
        assert!(bad(b"").contains("without a reply"));
        assert!(bad(b"port 9001: GET 4\n").contains("unexpected reply"));
        assert!(bad(b"port 9001: GET 3").contains("unexpected reply"));
        assert!(bad(b"GET 3\n").contains("unexpected reply"));
        assert!(bad(b": GET 3\n").contains("unexpected reply"));
        assert!(bad(b"port 9001: GET 3\nmore\n").contains("unexpected reply"));
    }

    #[test]
    fn zero_clients_or_an_empty_keep_alive_is_refused() {
        let options = LoadOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 9)),
            clients: 0,
            requests: 1,
            ..LoadOptions::default()
        };
        let e = run_closed_loop(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let options = LoadOptions {
            pattern: Pattern::KeepAlive { per_connection: 0 },
            ..LoadOptions::default()
        };
        let e = run_closed_loop(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn default_options() {
        let o = LoadOptions::default();
        assert_eq!(o.target, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!((o.clients, o.requests, o.duration), (64, 1000, None));
        assert_eq!(o.timeout, Duration::from_secs(10));
        assert_eq!(o.pattern, Pattern::NewConnection);
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        let mut out = String::new();
        push_json_string(&mut out, "a\"b\\c\nd\re\tf\u{1}g\u{1f}h\u{7f}é");
        assert_eq!(
            out,
            r#""a\"b\\c\nd\re\tf\u0001g\u001fh"#.to_string() + "\u{7f}é\""
        );
    }

    #[test]
    fn json_of_an_empty_report_has_nulls_for_latencies() {
        let json = LoadReport::default().to_json();
        assert_eq!(
            json,
            "{\"requests\":0,\"ok\":0,\"errors\":0,\"elapsed_s\":0.000000,\"req_per_s\":0.000,\
             \"avg_ms\":null,\"p50_ms\":null,\"p99_ms\":null,\"max_ms\":null,\
             \"client_cpu_s\":0.000000,\"per_backend\":{},\"first_error\":null}"
        );
    }

    #[test]
    fn stream_shares_add_up_to_the_total() {
        for (total, streams) in [(0, 3), (10, 3), (1_000_003, 4), (64 * MIB, 4), (2, 5)] {
            let parts: Vec<u64> = (0..streams)
                .map(|i| stream_share(total, streams, i))
                .collect();
            assert_eq!(parts.iter().sum::<u64>(), total, "{total} over {streams}");
            let (min, max) = (parts.iter().min(), parts.iter().max());
            assert!(max.zip(min).is_some_and(|(max, min)| max - min <= 1));
        }
    }

    /// The pattern of `len` bytes, made in one piece.
    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        fill_pattern(seed, 0, &mut bytes);
        bytes
    }

    #[test]
    fn the_pattern_is_the_same_whatever_the_pieces() {
        let whole = pattern(7, 1000);
        let mut pieces = vec![0u8; 1000];
        for start in (0..1000).step_by(96) {
            let end = (start + 96).min(1000);
            fill_pattern(7, start as u64, &mut pieces[start..end]);
        }
        assert_eq!(whole, pieces);
        assert_ne!(whole, pattern(8, 1000), "another stream, other bytes");
    }

    fn sum_in_pieces(bytes: &[u8], piece: usize) -> StreamSum {
        let mut sum = StreamSum::default();
        for part in bytes.chunks(piece) {
            sum.update(part);
        }
        sum
    }

    #[test]
    fn the_checksum_does_not_depend_on_how_reads_cut_the_stream() {
        let bytes = pattern(3, 10_007);
        let whole = sum_in_pieces(&bytes, bytes.len());
        assert_eq!(whole.len(), 10_007);
        for piece in [1, 3, 7, 8, 9, 1000, 4096] {
            assert_eq!(sum_in_pieces(&bytes, piece), whole, "pieces of {piece}");
        }
    }

    #[test]
    fn the_checksum_sees_a_flipped_bit_swapped_words_and_a_lost_byte() {
        let bytes = pattern(5, 4096);
        let good = sum_in_pieces(&bytes, 4096);
        let mut flipped = bytes.clone();
        flipped[1234] ^= 0x10;
        assert_ne!(sum_in_pieces(&flipped, 4096), good);
        let mut swapped = bytes.clone();
        swapped[..16].rotate_left(8);
        assert_ne!(sum_in_pieces(&swapped, 4096), good);
        assert_ne!(sum_in_pieces(&bytes[..4095], 4096), good);
        // A partial last word counts too.
        assert_ne!(
            sum_in_pieces(&bytes[..4093], 4096),
            sum_in_pieces(&bytes[..4094], 4096)
        );
    }

    #[test]
    fn bulk_json_and_rate() {
        let report = BulkReport {
            streams: 2,
            bytes_each_way: 8 * MIB,
            elapsed: Duration::from_secs(2),
            intact: true,
            client_cpu: ms(250),
            first_error: None,
        };
        assert_eq!(report.mib_per_sec(), 4.0);
        assert_eq!(
            report.to_json(),
            "{\"streams\":2,\"bytes_each_way\":8388608,\"elapsed_s\":2.000000,\
             \"mib_per_s\":4.000,\"intact\":true,\"client_cpu_s\":0.250000,\"first_error\":null}"
        );
        let text = report.to_string();
        assert!(text.contains("8.0 MiB each way") && text.contains("4.0 MiB/s, intact"));
        assert_eq!(BulkReport::default().mib_per_sec(), 0.0);
    }

    #[test]
    fn zero_streams_is_refused() {
        let options = BulkOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 9)),
            bytes: 1,
            streams: 0,
            timeout: Duration::from_secs(1),
        };
        let e = run_bulk(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn process_cpu_time_grows_with_work() {
        let before = process_cpu_time().expect("getrusage");
        std::hint::black_box(crate::fixture::burn_cpu(ms(30)));
        let after = process_cpu_time().expect("getrusage");
        assert!(after > before, "{before:?} then {after:?}");
    }
}
