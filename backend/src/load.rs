//! A closed-loop load client: C clients, N requests, one new connection per
//! request, and the numbers that describe how it went.
//!
//! *Closed loop* means each client sends its next request only when the
//! previous one has finished, so at most C requests are in flight and the
//! offered load adapts to the server's speed. (An open-loop client sends at
//! a fixed rate whatever happens; it measures something else.) By Little's
//! law a closed loop of C clients against a server that takes L per request
//! cannot go faster than C / L requests per second.
//!
//! ```text
//!   shared counter: requests left ──┬── client task 1: take n ─> request n ─> record ─> take ...
//!                                   ├── client task 2: ...
//!                                   └── client task C: ...
//!
//!   request n:  connect ─> "GET n\n" ─> FIN ─> read to EOF ─> "port 9002: GET n\n"
//!               └──────────────── latency, bounded by the timeout ───────────┘
//! ```
//!
//! The reply must echo the request (`<tag>: GET n`): a reply to some other
//! request would mean a proxy crossed two connections, and that is counted
//! as an error, not a success. The tag before the `:` (`port 9002`) says
//! which backend answered; the report counts replies per tag.
//!
//! Every client task runs on one [`Runtime`] on the calling thread: the load
//! client is itself an event loop, so it can keep a thousand requests in
//! flight without a thousand threads.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use runtime::net::TcpStream;
use runtime::{Runtime, spawn, time};

/// The longest reply read; a peer that sends more is misbehaving and the
/// request counts as an error.
pub const MAX_REPLY: usize = 64 * 1024;

/// What load to generate.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Where to connect (a proxy, or a fixture backend directly).
    pub target: SocketAddr,
    /// Concurrent clients: requests in flight at once.
    pub clients: usize,
    /// Requests in total, shared by the clients.
    pub requests: usize,
    /// The most one request (connect to end of reply) may take.
    pub timeout: Duration,
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
    /// One latency per successful request, from before `connect` to the
    /// reply's end of file, sorted (shortest first).
    pub latencies: Vec<Duration>,
    /// Successful replies per backend tag (`port 9001`); sums to `ok`.
    pub per_backend: BTreeMap<String, u64>,
    /// The first error seen, to say what went wrong.
    pub first_error: Option<String>,
}

impl LoadReport {
    /// Successful requests per second of the whole run.
    pub fn req_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.ok as f64 / secs
        } else {
            0.0
        }
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

    /// The longest latency.
    pub fn max(&self) -> Option<Duration> {
        self.latencies.last().copied()
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
            ms(self.percentile(50.0)),
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
        if let Some(error) = &self.first_error {
            write!(f, "; first error: {error}")?;
        }
        Ok(())
    }
}

/// Runs the closed loop described by `options` on a new [`Runtime`] on the
/// calling thread, and reports. Failed requests are counted, never fatal;
/// only a runtime that cannot start, or zero clients for some requests, is
/// an error.
pub fn run_closed_loop(options: &LoadOptions) -> io::Result<LoadReport> {
    if options.clients == 0 && options.requests > 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a load needs at least one client",
        ));
    }
    let runtime = Runtime::new()?;
    runtime.block_on(drive(options.clone()))
}

/// The state every client task shares (one thread: `Rc` and `Cell` suffice).
struct Run {
    options: LoadOptions,
    /// The next request number to hand out.
    next: Cell<usize>,
    tally: RefCell<LoadReport>,
}

impl Run {
    /// Takes the next request number, or None when all are handed out.
    fn take_ticket(&self) -> Option<usize> {
        let n = self.next.get();
        if n >= self.options.requests {
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
    let run = Rc::new(Run {
        options,
        next: Cell::new(0),
        tally: RefCell::new(LoadReport::default()),
    });
    let started = Instant::now();
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

/// One client: requests, one after the other, until none are left.
async fn client(run: Rc<Run>) {
    while let Some(n) = run.take_ticket() {
        let target = run.options.target;
        let limit = run.options.timeout;
        let outcome = match time::timeout(limit, request(target, n)).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no complete reply within {limit:?}"),
            )),
        };
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
    fn zero_clients_is_refused() {
        let options = LoadOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 9)),
            clients: 0,
            requests: 1,
            timeout: Duration::from_secs(1),
        };
        let e = run_closed_loop(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
