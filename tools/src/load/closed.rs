//! The closed loop: C clients, each sending a request and waiting for its
//! reply before the next, a new connection per request or keep-alive.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use runtime::net::TcpStream;
use runtime::{Runtime, spawn};

use super::shared::{
    ECHO_TAG, JsonObject, MAX_REPLY, bounded, invalid_input, per_second, process_cpu_time,
    write_client_cpu,
};

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

// The summary lives beside the report it prints, as BulkReport's does in
// bulk.rs: load/mod.rs only re-exports, so that no import runs back up.
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
