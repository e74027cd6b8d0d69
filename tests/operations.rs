//! End to end, the operations features: the access log, the metrics
//! endpoint, the PROXY protocol out and in, access control and the
//! per-source limit.
//!
//! Real processes and real sockets, loopback only (127.0.0.0/8 and ::1).
//! Every wait has a deadline (a condition polled, never a sleep that
//! hopes), every loop a bound in count and in time, and every child
//! process is killed by a guard's `Drop` even when an assertion fails
//! half-way. Nothing here measures speed: time limits are generous bounds
//! on "soon".
//!
//! The oracles are what the test itself did. The access log's termination
//! code of each connection must be the one its client provoked (the table
//! in `proxy/src/ops/access_log/termination.rs`); the metrics must equal the traffic sent,
//! counted by the test's own backends; a backend behind `send-proxy` must
//! learn the address the client knows it has.
//!
//! The proxy's stderr goes to a file ([`start_daemon`]), not a pipe: once the
//! process has exited, the file holds every line it wrote, so "every
//! connection exactly once" can be checked without guessing when a pipe
//! reader has caught up.

mod common;

use std::collections::HashMap;
use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::signal::Signal;
use nix::sys::socket::{setsockopt, sockopt};
use proxy::conn::proxy_protocol::{self, Addresses, MAX_HEADER, Version};
use proxy::ops::access_log::record::JSON_KEYS;
use testkit::json::{self, Json};
use testkit::prometheus::{self, Exposition};
use testkit::tcplog::{ParsedLine, parse_tcplog};
use tools::bench::peers::{self, Installed};
use tools::process::child::{self, Capture, ChildProcess, Ready, Spawn, free_port};

use common::*;

/// How long a client read or write may block.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A bound on "soon": a log line, a refusal, a counter catching up.
const SOON: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// The proxy as a child process, its stderr in a file
// ---------------------------------------------------------------------------

/// Writes `config` into `dir` and starts the proxy under test on it with
/// `extra` flags (and `--grace 1s`, so a stop never waits long), its stderr
/// written to a file (module docs). Killed on drop if still running.
fn start_daemon(dir: &TestDir, config: &str, extra: &[&str]) -> ChildProcess {
    let config_path = dir.file("lb.conf");
    fs::write(&config_path, config).expect("write the configuration");
    let mut args = vec!["--config".to_string(), config_path.display().to_string()];
    args.extend(["--grace", "1s"].iter().chain(extra).map(|a| a.to_string()));
    Spawn::new("proxy", proxy_exe())
        .args(args)
        .stderr(Capture::File(dir.file("stderr.log")))
        .start()
        .expect("start the proxy")
}

/// The first line containing `needle`, waiting up to [`SOON`] for it;
/// fails the test if it does not come or the proxy exits meanwhile.
fn wait_for_log(daemon: &ChildProcess, needle: &str) -> String {
    daemon
        .wait_for_log(needle, SOON)
        .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", daemon.said()))
}

/// Where frontend `name` listens.
fn frontend_addr(daemon: &ChildProcess, name: &str) -> SocketAddr {
    let line = wait_for_log(daemon, &format!("frontend {name} listening on "));
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// Where the admin endpoint listens (`admin 127.0.0.1:0` in the file).
fn admin_addr(daemon: &ChildProcess) -> SocketAddr {
    let line = wait_for_log(daemon, "admin listening on ");
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// SIGTERM; the proxy must exit 0 within [`SOON`] (plus its 1 s grace).
/// Returns every line it wrote to stderr: complete, since it has exited.
fn stop_daemon(daemon: ChildProcess) -> Vec<String> {
    match daemon.stop_with(Signal::SIGTERM, SOON + Duration::from_secs(1)) {
        Ok(status) => assert_eq!(
            status.code(),
            Some(0),
            "exit status {status}; stderr:\n{}",
            daemon.said()
        ),
        Err(e) => panic!("{e}; stderr:\n{}", daemon.said()),
    }
    daemon.log()
}

/// The tcplog lines among `lines` (the daemon's own messages do not parse).
fn tcplog_lines(lines: &[String]) -> Vec<ParsedLine> {
    lines.iter().filter_map(|l| parse_tcplog(l)).collect()
}

/// Waits (bounded) until the access log on the proxy's stderr has a line
/// from client `client` on frontend `frontend`, and returns it. Lines reach
/// stderr in batches, every 200 ms.
fn wait_for_access_line(daemon: &ChildProcess, frontend: &str, client: SocketAddr) -> ParsedLine {
    let deadline = Instant::now() + SOON;
    loop {
        let found = tcplog_lines(&daemon.log())
            .into_iter()
            .find(|l| l.frontend == frontend && l.client == client);
        if let Some(line) = found {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no access-log line for {client} on {frontend} within {SOON:?}; stderr:\n{}",
            daemon.said()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

/// A client connection with bounded reads and writes; it must not fail.
fn client(addr: SocketAddr) -> TcpStream {
    open_from(None, addr, CLIENT_TIMEOUT)
        .1
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

/// A client connection from `source` (any address of 127.0.0.0/8: all of
/// it is loopback on Linux); it must not fail.
fn connect_from(source: Ipv4Addr, to: SocketAddr) -> TcpStream {
    open_from(Some(source.into()), to, CLIENT_TIMEOUT)
        .1
        .unwrap_or_else(|e| panic!("connect from {source} to {to}: {e}"))
}

/// Closes `stream` with a reset (SO_LINGER 0), the way a client aborts.
fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    if let Err(e) = setsockopt(&stream, sockopt::Linger, &linger) {
        panic!("SO_LINGER: {}", io::Error::from(e));
    }
    drop(stream);
}

/// Reads until the connection ends (discarding at most 1 MiB), for at most
/// `limit`; says how it ended: `eof`, `reset`, `timeout`, or an error kind.
fn end_of(stream: &TcpStream, limit: Duration) -> String {
    stream.set_read_timeout(Some(limit)).expect("read timeout");
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 16 * 1024];
    for _ in 0..64 {
        let result = (&*stream).read(&mut buf);
        let word = describe(&result);
        if word != "data" || Instant::now() >= deadline {
            return word;
        }
    }
    "data".into()
}

/// A refused connection: the proxy closes it (reset or FIN) within [`SOON`].
fn assert_refused(stream: &TcpStream, what: &str, daemon: &ChildProcess) {
    let how = end_of(stream, SOON);
    assert!(
        how == "reset" || how == "eof",
        "{what}: the proxy should close the connection at once, the client's read gave {how}; \
         stderr:\n{}",
        daemon.said()
    );
}

/// A client the proxy must refuse: it connects (from `source` if given),
/// and the proxy closes the connection at once, with a reset or a FIN
/// (perhaps before the connect has returned). Returns the client's port.
fn refused(source: Option<IpAddr>, addr: SocketAddr, what: &str, daemon: &ChildProcess) -> u16 {
    let (port, connected) = open_from(source, addr, CLIENT_TIMEOUT);
    match connected {
        Ok(stream) => assert_refused(&stream, what, daemon),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{what}: connect: {e}; stderr:\n{}", daemon.said()),
    }
    port
}

/// Reads exactly `n` bytes.
fn read_exact(stream: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    stream.read_exact(&mut buf)?;
    Ok(buf)
}

/// `len` deterministic bytes.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    Prng::new(seed).fill(&mut bytes);
    bytes
}

// ---------------------------------------------------------------------------
// Backends with counters
// ---------------------------------------------------------------------------

/// An echo backend that counts what it sees: connections accepted (health
/// checks included), connections that carried at least one byte, and bytes
/// (received, and so sent back).
struct CountingEcho {
    server: StdBackend,
    accepted: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
    bytes: Arc<AtomicU64>,
}

impl CountingEcho {
    fn start(bind: &str) -> CountingEcho {
        let accepted = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let (a, s, b) = (accepted.clone(), served.clone(), bytes.clone());
        let listener = TcpListener::bind(bind).expect("bind a backend");
        let server = StdBackend::serve(listener, move |mut stream| {
            a.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 16 * 1024];
            let mut total = 0u64;
            loop {
                let n = stream.read(&mut buf)?;
                if n == 0 {
                    return stream.shutdown(Shutdown::Write);
                }
                if total == 0 {
                    s.fetch_add(1, Ordering::SeqCst);
                }
                total += n as u64;
                if total > READ_LIMIT {
                    return Err(io::Error::other("more than READ_LIMIT"));
                }
                // Counted before it is sent back: a client that has its
                // echo finds it counted.
                b.fetch_add(n as u64, Ordering::SeqCst);
                stream.write_all(&buf[..n])?;
            }
        });
        CountingEcho {
            server,
            accepted,
            served,
            bytes,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }
}

/// How many connections from one source a [`HeaderBackend`] holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Presence {
    open: usize,
    peak: usize,
    total: usize,
}

/// A backend behind `send-proxy` / `send-proxy-v2`: reads the PROXY header
/// with [`proxy_protocol::parse`], then, at the client's first bytes,
/// answers with what it learned (`v1 SOURCE DESTINATION`, `v2 ...`, or
/// `v2 local`) on one line followed by those bytes, and echoes the rest.
/// It counts its connections and, per source the header gave, how many it
/// holds open at once.
struct HeaderBackend {
    server: StdBackend,
    accepted: Arc<AtomicUsize>,
    sources: Arc<Mutex<HashMap<IpAddr, Presence>>>,
}

impl HeaderBackend {
    fn start(bind: &str) -> HeaderBackend {
        let accepted = Arc::new(AtomicUsize::new(0));
        let sources: Arc<Mutex<HashMap<IpAddr, Presence>>> = Arc::default();
        let (a, s) = (accepted.clone(), sources.clone());
        let listener = TcpListener::bind(bind).expect("bind a backend");
        let server = StdBackend::serve(listener, move |mut stream| {
            a.fetch_add(1, Ordering::SeqCst);
            let (version, addresses, rest) = match read_proxy_header(&mut stream) {
                Ok(header) => header,
                // A readiness probe or a health check: no header, no answer.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => {
                    stream.write_all(format!("error: {e}\n").as_bytes())?;
                    return Err(e);
                }
            };
            let (line, source) = match addresses {
                Addresses::Proxied {
                    source,
                    destination,
                } => (
                    format!("{version} {source} {destination}\n"),
                    Some(source.ip()),
                ),
                Addresses::Local => (format!("{version} local\n"), None),
            };
            let lock = || s.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(ip) = source {
                let mut sources = lock();
                let p = sources.entry(ip).or_default();
                p.open += 1;
                p.total += 1;
                p.peak = p.peak.max(p.open);
            }
            let served = answer_then_echo(&mut stream, &line, rest);
            // Counted out before the stream closes (when this closure
            // returns), so a client that has seen the end finds it done.
            if let Some(ip) = source {
                if let Some(p) = lock().get_mut(&ip) {
                    p.open -= 1;
                }
            }
            served
        });
        HeaderBackend {
            server,
            accepted,
            sources,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn presence(&self, ip: IpAddr) -> Presence {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.get(&ip).copied().unwrap_or_default()
    }

    /// Connections held open now, all sources together.
    fn open(&self) -> usize {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.values().map(|p| p.open).sum()
    }
}

/// Reads a PROXY header, accumulating bytes until [`proxy_protocol::parse`]
/// says it is whole; returns its version (`v1`, `v2`), what it says, and the
/// bytes read past it.
fn read_proxy_header(stream: &mut TcpStream) -> io::Result<(&'static str, Addresses, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    // Each round adds at least a byte; parse() decides within MAX_HEADER.
    while buf.len() <= MAX_HEADER {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                "closed before a whole PROXY header",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        match proxy_protocol::parse(&buf) {
            Ok(None) => {}
            Ok(Some((addresses, used))) => {
                let version = if buf[0] == b'P' { "v1" } else { "v2" };
                return Ok((version, addresses, buf.split_off(used)));
            }
            Err(e) => return Err(io::Error::new(ErrorKind::InvalidData, e.to_string())),
        }
    }
    Err(io::Error::new(
        ErrorKind::InvalidData,
        "no header within MAX_HEADER bytes",
    ))
}

/// Waits for the client's first bytes (`rest` if the header brought some),
/// sends `line` and those bytes, then echoes until the client's FIN.
fn answer_then_echo(stream: &mut TcpStream, line: &str, rest: Vec<u8>) -> io::Result<()> {
    let mut first = rest;
    let mut buf = [0u8; 16 * 1024];
    if first.is_empty() {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return stream.shutdown(Shutdown::Write);
        }
        first.extend_from_slice(&buf[..n]);
    }
    let mut answer = line.as_bytes().to_vec();
    answer.extend_from_slice(&first);
    stream.write_all(&answer)?;
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return stream.shutdown(Shutdown::Write);
        }
        total += n as u64;
        if total > READ_LIMIT {
            return Err(io::Error::other("more than READ_LIMIT"));
        }
        stream.write_all(&buf[..n])?;
    }
}

/// Sends `hello\n` through `addr` to a [`HeaderBackend`], then a FIN, and
/// returns the backend's answer line (without `hello`) and the client's
/// own address.
fn learned_through(addr: SocketAddr) -> (String, SocketAddr) {
    let mut stream = client(addr);
    let me = stream.local_addr().expect("local address");
    stream.write_all(b"hello\n").expect("send");
    stream.shutdown(Shutdown::Write).expect("FIN");
    let got = read_all(&stream).unwrap_or_else(|e| panic!("through {addr}: {e}"));
    let got = String::from_utf8(got).expect("UTF-8");
    let line = got
        .strip_suffix("hello\n")
        .unwrap_or_else(|| panic!("through {addr}: the payload did not come back whole: {got:?}"));
    (line.to_string(), me)
}

// ---------------------------------------------------------------------------
// The admin endpoint
// ---------------------------------------------------------------------------

/// `GET path` over plain HTTP/1.1: (status, head, body).
fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = client(addr);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: e2e-operations\r\n\r\n"
    )
    .expect("send the request");
    let raw = read_all(&stream).expect("read the answer");
    let text = String::from_utf8(raw).expect("a UTF-8 answer");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    if let Some(length) = length {
        assert_eq!(length, body.len(), "Content-Length of {path}: {head}");
    }
    (status, head.to_string(), body.to_string())
}

/// `GET /metrics`, which must be 200 and parse with the strict parser.
fn scrape(admin: SocketAddr) -> (Exposition, String) {
    let (status, head, body) = http_get(admin, "/metrics");
    assert_eq!(status, 200, "GET /metrics: {head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "GET /metrics: {head}"
    );
    let exposition = prometheus::parse(&body)
        .unwrap_or_else(|e| panic!("/metrics is not valid Prometheus text: {e}\n{body}"));
    (exposition, body)
}

/// Scrapes until `condition` holds (bounded by [`SOON`]), and returns that
/// scrape; fails with the last one otherwise.
fn scrape_until(
    admin: SocketAddr,
    what: &str,
    condition: impl Fn(&Exposition) -> bool,
) -> Exposition {
    let deadline = Instant::now() + SOON;
    loop {
        let (exposition, body) = scrape(admin);
        if condition(&exposition) {
            return exposition;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {SOON:?}; the last scrape:\n{body}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A sample's labels, as [`Exposition::value`] takes them.
type Labels<'a> = &'a [(&'a str, &'a str)];

/// The value of one sample, as an exact whole number.
fn value(exposition: &Exposition, name: &str, labels: &[(&str, &str)]) -> u64 {
    let v = exposition
        .value(name, labels)
        .unwrap_or_else(|| panic!("no sample {name}{labels:?}"));
    assert!(
        v >= 0.0 && v.fract() == 0.0,
        "{name}{labels:?} = {v}, not a count"
    );
    v as u64
}

// ---------------------------------------------------------------------------
// 1. The access log: every connection exactly once, with the right code
// ---------------------------------------------------------------------------

/// What the test makes of one connection, and the access-log code that
/// must say so (ops/access_log/termination.rs, its table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fate {
    /// A payload echoed whole, both FINs passed on: `--`.
    Served,
    /// The only backend refuses, no retries: `SC`.
    Refused,
    /// The client resets mid-stream: `CD`.
    ClientReset,
    /// The backend resets mid-stream: `SD`.
    ServerReset,
    /// Nothing moves for the idle timeout: `cD`.
    Idle,
    /// Denied by the frontend's `deny`: `PR`.
    Denied,
}

impl Fate {
    const ALL: [Fate; 6] = [
        Fate::Served,
        Fate::Refused,
        Fate::ClientReset,
        Fate::ServerReset,
        Fate::Idle,
        Fate::Denied,
    ];

    /// Each fate has a frontend of its own, named so.
    fn frontend(self) -> &'static str {
        match self {
            Fate::Served => "served",
            Fate::Refused => "refused",
            Fate::ClientReset => "creset",
            Fate::ServerReset => "sreset",
            Fate::Idle => "idle",
            Fate::Denied => "denied",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Fate::Served => "--",
            Fate::Refused => "SC",
            Fate::ClientReset => "CD",
            Fate::ServerReset => "SD",
            Fate::Idle => "cD",
            Fate::Denied => "PR",
        }
    }
}

/// What one connection's access-log line must say.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    frontend: String,
    client_port: u16,
    code: String,
    server: Option<String>,
    bytes_down: u64,
    bytes_up: u64,
}

/// The backends of the mix and the configuration that puts a frontend in
/// front of each fate.
struct Mix {
    echo: Fixture,
    resetting: Fixture,
    closed: ClosedPort,
}

impl Mix {
    fn start() -> Mix {
        let start = |mode| {
            Fixture::start(
                1,
                FixtureOptions {
                    mode,
                    ..FixtureOptions::default()
                },
            )
            .expect("start the fixture")
        };
        Mix {
            echo: start(FixtureMode::Echo),
            resetting: start(FixtureMode::Reset),
            closed: ClosedPort::new(),
        }
    }

    /// The server a connection of `fate` is logged with.
    fn server(&self, fate: Fate) -> Option<SocketAddr> {
        match fate {
            Fate::Served | Fate::ClientReset | Fate::Idle => Some(self.echo.addrs()[0]),
            Fate::ServerReset => Some(self.resetting.addrs()[0]),
            Fate::Refused => Some(self.closed.addr()),
            Fate::Denied => None,
        }
    }

    fn config(&self) -> String {
        let echo = self.echo.addrs()[0];
        format!(
            "global\n    workers 2\n\
             frontend served\n    listen 127.0.1.1:0\n    backend {echo}\n\
             frontend refused\n    listen 127.0.1.2:0\n    retries 0\n    backend {}\n\
             frontend creset\n    listen 127.0.1.3:0\n    backend {echo}\n\
             frontend sreset\n    listen 127.0.1.4:0\n    backend {}\n\
             frontend idle\n    listen 127.0.1.5:0\n    timeout client 300ms\n    \
             timeout server 300ms\n    backend {echo}\n\
             frontend denied\n    listen 127.0.1.6:0\n    deny 127.0.0.0/8\n    backend {echo}\n",
            self.closed.addr(),
            self.resetting.addrs()[0],
        )
    }

    /// Runs `count` connections of mixed fates (fate `i % 6` for the
    /// `i`-th) from 8 threads, and returns what their lines must say.
    fn run(&self, daemon: &ChildProcess, count: usize) -> Vec<Expected> {
        let addrs: HashMap<Fate, SocketAddr> = Fate::ALL
            .iter()
            .map(|&f| (f, frontend_addr(daemon, f.frontend())))
            .collect();
        const THREADS: usize = 8;
        let results: Vec<Result<Expected, String>> = thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let addrs = &addrs;
                    s.spawn(move || {
                        (t..count)
                            .step_by(THREADS)
                            .map(|i| {
                                let fate = Fate::ALL[i % Fate::ALL.len()];
                                play(fate, addrs[&fate], i).map(|(port, down, up)| Expected {
                                    frontend: fate.frontend().to_string(),
                                    client_port: port,
                                    code: fate.code().to_string(),
                                    server: self.server(fate).map(|a| a.to_string()),
                                    bytes_down: down,
                                    bytes_up: up,
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a client thread panicked"))
                .collect()
        });
        let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(
            failures.is_empty(),
            "{} of {count} clients failed:\n{}\nstderr:\n{}",
            failures.len(),
            failures
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            daemon.said()
        );
        results.into_iter().map(Result::unwrap).collect()
    }
}

/// One client of the mix: does what `fate` says, checks that the proxy
/// answered as it should, and returns (its port, bytes it received, bytes
/// it had delivered to the backend).
fn play(fate: Fate, addr: SocketAddr, i: usize) -> Result<(u16, u64, u64), String> {
    let (port, connected) = open_from(None, addr, CLIENT_TIMEOUT);
    let fail = |what: String| format!("{fate:?} {i} (port {port}): {what}");
    let mut stream = match connected {
        Ok(stream) => stream,
        // Refused so fast that the connect saw the reset: refused all the same.
        Err(e)
            if e.kind() == ErrorKind::ConnectionReset
                && matches!(fate, Fate::Refused | Fate::Denied) =>
        {
            return Ok((port, 0, 0));
        }
        Err(e) => return Err(fail(format!("connect: {e}"))),
    };
    let closed_by_proxy = |stream: &TcpStream, allowed: &[&str]| {
        let how = end_of(stream, SOON);
        if allowed.contains(&how.as_str()) {
            Ok(())
        } else {
            Err(fail(format!("expected {allowed:?}, the read gave {how}")))
        }
    };
    let (down, up) = match fate {
        Fate::Served => {
            // Sizes from 1 byte to 20 KB, each client its own.
            let sent = payload(i as u64, 1 + (i * 7919) % 20_000);
            stream
                .write_all(&sent)
                .map_err(|e| fail(format!("send: {e}")))?;
            stream
                .shutdown(Shutdown::Write)
                .map_err(|e| fail(format!("FIN: {e}")))?;
            let got = read_all(&stream).map_err(|e| fail(format!("receive: {e}")))?;
            if got != sent {
                return Err(fail(format!(
                    "sent {} bytes, got {}",
                    sent.len(),
                    got.len()
                )));
            }
            (sent.len() as u64, sent.len() as u64)
        }
        Fate::Refused | Fate::Denied => {
            closed_by_proxy(&stream, &["reset", "eof"])?;
            (0, 0)
        }
        Fate::ClientReset => {
            stream
                .write_all(b"hello\n")
                .map_err(|e| fail(format!("send: {e}")))?;
            let echo = read_exact(&mut stream, 6).map_err(|e| fail(format!("echo: {e}")))?;
            if echo != b"hello\n" {
                return Err(fail(format!("echo {echo:?}")));
            }
            reset(stream);
            (6, 6)
        }
        Fate::ServerReset => {
            // The fixture reads a line, then resets: passed on as a reset.
            stream
                .write_all(b"x\n")
                .map_err(|e| fail(format!("send: {e}")))?;
            closed_by_proxy(&stream, &["reset"])?;
            (0, 2)
        }
        Fate::Idle => {
            stream
                .write_all(b"ping\n")
                .map_err(|e| fail(format!("send: {e}")))?;
            let echo = read_exact(&mut stream, 5).map_err(|e| fail(format!("echo: {e}")))?;
            if echo != b"ping\n" {
                return Err(fail(format!("echo {echo:?}")));
            }
            // Silent from here: the 300 ms idle timeout resets both sides.
            closed_by_proxy(&stream, &["reset"])?;
            (5, 5)
        }
    };
    Ok((port, down, up))
}

/// Compares the lines made with the connections made: exactly one line per
/// connection, and each line saying what the connection's client did.
/// `actual` and `expected` are compared as sorted lists, so a connection
/// without a line, a line without a connection, a connection logged twice,
/// and a wrong field all show up, whatever the order of the lines.
fn assert_logged_once(mut actual: Vec<Expected>, mut expected: Vec<Expected>, said: &str) {
    actual.sort();
    expected.sort();
    if actual == expected {
        return;
    }
    let missing: Vec<&Expected> = expected.iter().filter(|e| !actual.contains(e)).collect();
    let extra: Vec<&Expected> = actual.iter().filter(|a| !expected.contains(a)).collect();
    panic!(
        "the access log does not match the connections: {} lines for {} connections\n\
         expected but not logged ({}):\n{missing:#?}\nlogged but not expected ({}):\n{extra:#?}\n\
         stderr:\n{said}",
        actual.len(),
        expected.len(),
        missing.len(),
        extra.len(),
    );
}

/// The tcplog lines as [`Expected`], after per-line checks of what every
/// line of the mix must say. tcplog has no `bytes_up`: it is 0 here, to be
/// compared with [`without_bytes_up`] of the expectations.
fn from_tcplog(lines: &[ParsedLine]) -> Vec<Expected> {
    lines
        .iter()
        .map(|l| {
            assert_eq!(
                l.client.ip(),
                IpAddr::from(Ipv4Addr::LOCALHOST),
                "client address: {l:?}"
            );
            assert_eq!(l.backend, l.frontend, "%b is the frontend's name: {l:?}");
            assert_eq!((l.retries, l.redispatched), (0, false), "{l:?}");
            assert_eq!((l.server_queue, l.backend_queue), (0, 0), "{l:?}");
            let code = l.termination.to_string();
            // No connect succeeded for these: %Tc is -1.
            if code == "SC" || code == "PR" {
                assert_eq!(l.connect_ms, -1, "{l:?}");
            } else {
                assert!(l.connect_ms >= 0, "{l:?}");
            }
            if code == "PR" {
                assert_eq!(l.wait_ms, -1, "{l:?}");
            }
            Expected {
                frontend: l.frontend.clone(),
                client_port: l.client.port(),
                code,
                server: l.server.clone(),
                bytes_down: l.bytes_down,
                bytes_up: 0,
            }
        })
        .collect()
}

/// The expectations without `bytes_up`, which tcplog does not show.
fn without_bytes_up(expected: Vec<Expected>) -> Vec<Expected> {
    expected
        .into_iter()
        .map(|e| Expected { bytes_up: 0, ..e })
        .collect()
}

// The access log records every connection of a run exactly once, with the termination code its
// client provoked (--, SC, CD, SD, cD, PR), the server it went to and the bytes it received.
#[test]
fn the_access_log_has_every_connection_exactly_once_with_its_fate() {
    const CONNECTIONS: usize = 200;
    let dir = TestDir::new("access-log");
    let mix = Mix::start();
    let daemon = start_daemon(&dir, &mix.config(), &[]);
    let expected = mix.run(&daemon, CONNECTIONS);
    // SIGTERM: the workers' buffered lines are written before the exit.
    let lines = stop_daemon(daemon);
    let parsed = tcplog_lines(&lines);
    let actual = from_tcplog(&parsed);
    assert_logged_once(actual, without_bytes_up(expected), &lines.join("\n"));
}

// --access-log PATH writes the same lines to the file, and none to stderr.
#[test]
fn access_log_to_a_file_has_the_same_lines() {
    const CONNECTIONS: usize = 60;
    let dir = TestDir::new("access-log-file");
    let mix = Mix::start();
    let path = dir.file("access.log");
    let path_arg = path.display().to_string();
    let daemon = start_daemon(&dir, &mix.config(), &["--access-log", &path_arg]);
    let expected = mix.run(&daemon, CONNECTIONS);
    let stderr = stop_daemon(daemon);
    assert!(
        tcplog_lines(&stderr).is_empty(),
        "access-log lines on stderr with --access-log PATH:\n{}",
        stderr.join("\n")
    );
    let text = fs::read_to_string(&path).expect("read the access log");
    assert!(text.ends_with('\n'), "the last line is cut: {text:?}");
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let parsed = tcplog_lines(&lines);
    assert_eq!(
        parsed.len(),
        lines.len(),
        "every line of the file is a tcplog line:\n{text}"
    );
    let actual = from_tcplog(&parsed);
    assert_logged_once(actual, without_bytes_up(expected), &text);
}

// --log-format json: one JSON object per connection, with every key, and the same facts.
#[test]
fn json_access_log_lines_are_objects_with_every_key() {
    const CONNECTIONS: usize = 60;
    let dir = TestDir::new("access-log-json");
    let mix = Mix::start();
    let daemon = start_daemon(&dir, &mix.config(), &["--log-format", "json"]);
    let expected = mix.run(&daemon, CONNECTIONS);
    let lines = stop_daemon(daemon);
    let said = lines.join("\n");
    assert!(
        tcplog_lines(&lines).is_empty(),
        "tcplog lines with --log-format json:\n{said}"
    );
    let mut actual = Vec::new();
    for line in lines.iter().filter(|l| l.starts_with('{')) {
        let fields = json::read_object(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, JSON_KEYS, "{line}");
        let get = |key: &str| &fields.iter().find(|(k, _)| k == key).unwrap().1;
        let number = |key: &str| match get(key) {
            Json::Number(n) if n.fract() == 0.0 => *n as i64,
            other => panic!("{key} is {other:?}, not an integer: {line}"),
        };
        let text = |key: &str| match get(key) {
            Json::String(s) => s.clone(),
            other => panic!("{key} is {other:?}, not a string: {line}"),
        };
        let time = text("time");
        assert!(
            time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
            "time {time:?}: {line}"
        );
        assert_eq!(text("client_ip"), "127.0.0.1", "{line}");
        assert_eq!(text("backend"), text("frontend"), "{line}");
        assert_eq!(get("redispatched"), &Json::Bool(false), "{line}");
        assert_eq!(number("retries"), 0, "{line}");
        let server = match get("server") {
            Json::Null => None,
            Json::String(s) => Some(s.clone()),
            other => panic!("server is {other:?}: {line}"),
        };
        actual.push(Expected {
            frontend: text("frontend"),
            client_port: u16::try_from(number("client_port")).expect("a port"),
            code: text("termination"),
            server,
            bytes_down: u64::try_from(number("bytes_down")).expect("bytes"),
            bytes_up: u64::try_from(number("bytes_up")).expect("bytes"),
        });
    }
    assert_logged_once(actual, expected, &said);
}

// ---------------------------------------------------------------------------
// 2. Metrics
// ---------------------------------------------------------------------------

// The metrics endpoint parses as Prometheus text and its counters equal the traffic sent, summed
// over two workers; backend_up says which checked backend is dead; /health is 200, /nope 404.
#[test]
fn metrics_count_exactly_the_traffic_sent() {
    const SERVED: usize = 40;
    const DENIED: usize = 7;
    const FAILED: usize = 5;
    let dir = TestDir::new("metrics");
    let (a, b) = (
        CountingEcho::start("127.0.0.1:0"),
        CountingEcho::start("127.0.0.1:0"),
    );
    let dead = ClosedPort::new();
    let (d1, d2) = (ClosedPort::new(), ClosedPort::new());
    let check = "check inter 100ms fall 1 rise 1 timeout 1s";
    let config = format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend m\n    listen 127.0.1.1:0\n    deny 127.0.0.2/32\n    \
         backend {} {check}\n    backend {} {check}\n    backend {} {check}\n\
         frontend e\n    listen 127.0.1.2:0\n    retries 1\n    backend {}\n    backend {}\n",
        a.addr(),
        b.addr(),
        dead.addr(),
        d1.addr(),
        d2.addr(),
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let m = frontend_addr(&daemon, "m");
    let e = frontend_addr(&daemon, "e");
    let admin = admin_addr(&daemon);
    let (sa, sb, sdead) = (
        a.addr().to_string(),
        b.addr().to_string(),
        dead.addr().to_string(),
    );
    let (sd1, sd2) = (d1.addr().to_string(), d2.addr().to_string());

    // The dead backend is marked down by its checks before any traffic, so
    // no client is sent to it.
    scrape_until(admin, "the dead backend marked down", |x| {
        x.value(
            "proxy_backend_up",
            &[
                ("frontend", "m"),
                ("backend", &sdead),
                ("group", "m"),
                ("server", &sdead),
            ],
        ) == Some(0.0)
    });

    // Served: each client its own payload size, echoed whole.
    let sizes: Vec<usize> = (0..SERVED).map(|i| 100 + i * 37).collect();
    thread::scope(|s| {
        for t in 0..4 {
            let sizes = &sizes;
            s.spawn(move || {
                for i in (t..SERVED).step_by(4) {
                    let stream = client(m);
                    let sent = payload(i as u64, sizes[i]);
                    (&stream).write_all(&sent).expect("send");
                    stream.shutdown(Shutdown::Write).expect("FIN");
                    let got = read_all(&stream).expect("receive");
                    assert!(got == sent, "client {i}: the echo differs");
                }
            });
        }
    });
    // Denied: from 127.0.0.2.
    for i in 0..DENIED {
        let from = Some(Ipv4Addr::new(127, 0, 0, 2).into());
        refused(from, m, &format!("denied client {i}"), &daemon);
    }
    // Every connect fails: both backends of `e` refuse, one retry each.
    for i in 0..FAILED {
        refused(None, e, &format!("client {i} of e"), &daemon);
    }

    // Counters are added up when a connection ends: wait until none is open.
    let x = scrape_until(admin, "no connection left open", |x| {
        ["m", "e"]
            .iter()
            .all(|f| x.value("proxy_frontend_active_connections", &[("frontend", f)]) == Some(0.0))
    });
    let bytes: u64 = sizes.iter().map(|&s| s as u64).sum();
    let fm = [("frontend", "m")];
    let fe = [("frontend", "e")];
    let on = |frontend: &'static str, addr: &str| -> Vec<(&'static str, String)> {
        vec![
            ("frontend", frontend.to_string()),
            ("backend", addr.to_string()),
            ("group", frontend.to_string()),
            ("server", addr.to_string()),
        ]
    };
    let bv = |name: &str, labels: Vec<(&'static str, String)>| {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        value(&x, name, &labels)
    };
    let expectations: Vec<(&str, Labels, u64)> = vec![
        (
            "proxy_frontend_connections_total",
            &fm,
            (SERVED + DENIED) as u64,
        ),
        ("proxy_frontend_denied_total", &fm, DENIED as u64),
        ("proxy_frontend_bytes_in_total", &fm, bytes),
        ("proxy_frontend_bytes_out_total", &fm, bytes),
        ("proxy_frontend_connect_errors_total", &fm, 0),
        ("proxy_frontend_retries_total", &fm, 0),
        ("proxy_frontend_timeouts_total", &fm, 0),
        ("proxy_frontend_queue_timeouts_total", &fm, 0),
        ("proxy_frontend_active_connections", &fm, 0),
        ("proxy_accept_errors_total", &fm, 0),
        ("proxy_frontend_connections_total", &fe, FAILED as u64),
        ("proxy_frontend_connect_errors_total", &fe, FAILED as u64),
        ("proxy_frontend_retries_total", &fe, FAILED as u64),
        ("proxy_frontend_denied_total", &fe, 0),
        ("proxy_frontend_bytes_in_total", &fe, 0),
        ("proxy_frontend_bytes_out_total", &fe, 0),
    ];
    for (name, labels, want) in expectations {
        assert_eq!(value(&x, name, labels), want, "{name}{labels:?}");
    }
    // Per backend, as the backends themselves counted (health checks carry
    // no bytes, so `served` counts the clients only).
    assert_eq!(a.served() + b.served(), SERVED);
    assert_eq!(a.bytes() + b.bytes(), bytes);
    for (echo, addr) in [(&a, &sa), (&b, &sb)] {
        let labels = || on("m", addr);
        assert_eq!(
            bv("proxy_backend_connections_total", labels()),
            echo.served() as u64,
            "{addr}"
        );
        assert_eq!(
            bv("proxy_backend_bytes_in_total", labels()),
            echo.bytes(),
            "{addr}"
        );
        assert_eq!(
            bv("proxy_backend_bytes_out_total", labels()),
            echo.bytes(),
            "{addr}"
        );
        assert_eq!(bv("proxy_backend_connect_errors_total", labels()), 0);
        assert_eq!(bv("proxy_backend_active_connections", labels()), 0);
        assert_eq!(bv("proxy_backend_up", labels()), 1, "{addr} is alive");
        assert!(
            bv("proxy_backend_check_successes_total", labels()) >= 1,
            "{addr}"
        );
        assert_eq!(bv("proxy_backend_check_failures_total", labels()), 0);
    }
    assert_eq!(bv("proxy_backend_up", on("m", &sdead)), 0);
    assert_eq!(bv("proxy_backend_connections_total", on("m", &sdead)), 0);
    assert!(bv("proxy_backend_check_failures_total", on("m", &sdead)) >= 1);
    assert_eq!(
        bv("proxy_backend_check_successes_total", on("m", &sdead)),
        0
    );
    // Each failed client tried both backends of `e` once.
    for addr in [&sd1, &sd2] {
        assert_eq!(
            bv("proxy_backend_connect_errors_total", on("e", addr)),
            FAILED as u64,
            "{addr}"
        );
        assert_eq!(bv("proxy_backend_connections_total", on("e", addr)), 0);
        // Not checked: up, whatever the connects say.
        assert_eq!(bv("proxy_backend_up", on("e", addr)), 1);
    }
    // Every series is unique and every counter family is a counter (the
    // parser checked); the frontends are the two configured.
    let frontends: std::collections::BTreeSet<&str> =
        x.samples().filter_map(|s| s.label("frontend")).collect();
    assert_eq!(frontends.into_iter().collect::<Vec<_>>(), ["e", "m"]);

    let (status, head, body) = http_get(admin, "/health");
    assert_eq!(status, 200, "GET /health: {head}\n{body}");
    let (status, head, _) = http_get(admin, "/nope");
    assert_eq!(status, 404, "GET /nope: {head}");
    stop_daemon(daemon);
}

/// What a client holding an admin connection sends, and whether the admin
/// side can tell at once that it is no request (then it answers 400).
const HOLDERS: &[(&str, &[u8], bool)] = &[
    ("nothing", b"", false),
    ("one byte that may start a method", b"x", false),
    ("half a request line", b"GET /metr", false),
    ("one byte no request starts with", b"\x16", true),
];

/// Whether `stream` is still open with nothing to read: its peer has
/// neither answered nor closed. Asked without waiting.
fn still_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    let open = matches!((&*stream).read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).expect("blocking");
    open
}

// 64 connections holding junk on the admin listener (its limit) do
// not hold a scrape. The request deadline is set to 10 minutes, so no
// deadline can free a place during the test: the scrape being answered
// while at least 63 of the 64 are still open shows that the listener made
// room itself (the oldest waiting connection gave way), and a 400 came for
// the junk it could judge at once. How long the scrape took is not
// asserted: nothing here measures speed.
#[test]
fn sixty_four_junk_admin_connections_do_not_hold_a_scrape() {
    let dir = TestDir::new("admin-junk");
    let backend = ClosedPort::new();
    let config = format!(
        "global\n    admin 127.0.0.1:0\n    timeout admin-request 10m\n    access-log off\n\
         frontend web\n    listen 127.0.0.1:0\n    backend {}\n",
        backend.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let admin = admin_addr(&daemon);
    for &(what, bytes, refused_at_once) in HOLDERS {
        let holders: Vec<TcpStream> = (0..64)
            .map(|_| {
                let mut stream = client(admin);
                stream.write_all(bytes).expect("send the junk");
                stream
            })
            .collect();
        if refused_at_once {
            for holder in &holders {
                let answer = read_all(holder).expect("an answer, then end of file");
                let answer = String::from_utf8_lossy(&answer);
                assert!(
                    answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                    "{what}: {answer}"
                );
            }
        }
        let (exposition, _) = scrape(admin);
        assert!(exposition.samples().count() > 0, "{what}: an empty scrape");
        if !refused_at_once {
            let open = holders.iter().filter(|h| still_open(h)).count();
            assert!(
                open >= 63,
                "{what}: only {open} of 64 still open after the scrape"
            );
        }
        assert_eq!(http_get(admin, "/health").0, 200, "{what}");
    }
    stop_daemon(daemon);
}

// The same bulk bytes through `splice on`, `auto` and `off`, and
// `on` with no pipe left (a global maxconn of 3 leaves none: maxconn / 4):
// each stream arrives whole, bytes in and out are counted the same way, and
// the spliced bytes say which path moved them: all of them with `on`, all
// but the first reads with `auto`, none by copy or without a pipe.
#[test]
fn splice_moves_bulk_bytes_in_the_kernel_and_counts_them_like_a_copy() {
    const SIZE: u64 = 8 << 20;
    let fixture = Fixture::start(
        1,
        FixtureOptions {
            mode: FixtureMode::Echo,
            ..FixtureOptions::default()
        },
    )
    .expect("start the echo backend");
    let echo = fixture.addrs()[0];
    let frontends: String = ["on", "auto", "off"]
        .iter()
        .enumerate()
        .map(|(i, splice)| {
            format!(
                "frontend {splice}\n    listen 127.0.3.{}:0\n    splice {splice}\n    backend {echo}\n",
                i + 1
            )
        })
        .collect();
    let dir = TestDir::new("splice");
    let global = "global\n    workers 2\n    admin 127.0.0.1:0\n    access-log off\n";
    let daemon = start_daemon(&dir, &format!("{global}{frontends}"), &[]);
    wait_for_log(&daemon, "; splice: ");
    let admin = admin_addr(&daemon);
    for name in ["on", "auto", "off"] {
        let addr = frontend_addr(&daemon, name);
        echo_round_trip(addr, 12, SIZE)
            .unwrap_or_else(|e| panic!("splice {name}: {e}; stderr:\n{}", daemon.said()));
    }
    let total = 2.0 * SIZE as f64;
    let x = scrape_until(admin, "every byte counted", |x| {
        ["on", "auto", "off"].iter().all(|f| {
            let bytes = |m: &str| x.value(m, &[("frontend", f)]).unwrap_or(0.0);
            bytes("proxy_frontend_bytes_in_total") + bytes("proxy_frontend_bytes_out_total")
                == total
        })
    });
    let spliced = |f: &str| {
        x.value("proxy_frontend_bytes_spliced_total", &[("frontend", f)])
            .unwrap_or_else(|| panic!("no spliced bytes for {f}"))
    };
    assert_eq!(spliced("on"), total, "splice on: every byte by splice");
    assert!(
        spliced("auto") > total / 2.0 && spliced("auto") < total,
        "splice auto: the first full reads copied, the rest spliced: {}",
        spliced("auto")
    );
    assert_eq!(spliced("off"), 0.0, "splice off: every byte copied");
    for f in ["on", "auto", "off"] {
        let fallbacks = x.value("proxy_frontend_splice_fallbacks_total", &[("frontend", f)]);
        assert_eq!(fallbacks, Some(0.0), "{f}: TCP sockets always splice");
    }
    stop_daemon(daemon);

    // No pipe left: copy, the connection unharmed.
    let dir = TestDir::new("splice-no-pipe");
    let config = format!(
        "global\n    maxconn 3\n    workers 1\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend on\n    listen 127.0.3.1:0\n    splice on\n    backend {echo}\n"
    );
    let daemon = start_daemon(&dir, &config, &[]);
    wait_for_log(&daemon, "; splice: up to 0 pipes at once");
    let admin = admin_addr(&daemon);
    echo_round_trip(frontend_addr(&daemon, "on"), 13, SIZE)
        .unwrap_or_else(|e| panic!("no pipe: {e}; stderr:\n{}", daemon.said()));
    let x = scrape_until(admin, "every byte counted", |x| {
        x.value("proxy_frontend_bytes_out_total", &[("frontend", "on")]) == Some(SIZE as f64)
    });
    assert_eq!(
        x.value("proxy_frontend_bytes_spliced_total", &[("frontend", "on")]),
        Some(0.0),
        "no pipe: every byte copied"
    );
    stop_daemon(daemon);
}

// ---------------------------------------------------------------------------
// 3. PROXY protocol out
// ---------------------------------------------------------------------------

// send-proxy and send-proxy-v2, over IPv4 and IPv6: the backend learns the client's real address
// and port, and the frontend's address as the destination; the client's bytes follow intact.
#[test]
fn send_proxy_tells_the_backend_the_client_address() {
    let dir = TestDir::new("send-proxy");
    let b4 = HeaderBackend::start("127.0.0.1:0");
    let b6 = HeaderBackend::start("[::1]:0");
    let config = format!(
        "global\n    workers 2\n    access-log off\n\
         frontend v1-4\n    listen 127.0.1.1:0\n    backend {} send-proxy\n\
         frontend v2-4\n    listen 127.0.1.2:0\n    backend {} send-proxy-v2\n\
         frontend v1-6\n    listen [::1]:{}\n    backend {} send-proxy\n\
         frontend v2-6\n    listen [::1]:{}\n    backend {} send-proxy-v2\n",
        b4.addr(),
        b4.addr(),
        free_v6_port(),
        b6.addr(),
        free_v6_port(),
        b6.addr(),
    );
    let daemon = start_daemon(&dir, &config, &[]);
    for (frontend, version) in [
        ("v1-4", "v1"),
        ("v2-4", "v2"),
        ("v1-6", "v1"),
        ("v2-6", "v2"),
    ] {
        let addr = frontend_addr(&daemon, frontend);
        for _ in 0..3 {
            let (line, me) = learned_through(addr);
            assert_eq!(
                line,
                format!("{version} {me} {addr}\n"),
                "frontend {frontend}; stderr:\n{}",
                daemon.said()
            );
        }
    }
    assert_eq!(b4.accepted(), 6);
    assert_eq!(b6.accepted(), 6);
    stop_daemon(daemon);
}

/// A peer (HAProxy, nginx) running as our child, killed on drop, with its
/// files in a directory of its own.
struct Peer {
    // Declared first, dropped first: the process goes before its files.
    _process: ChildProcess,
    _dir: peers::TempDir,
}

/// The installed peers, or a printed note saying why a test is skipped.
fn installed(what: &str, has: impl Fn(&Installed) -> bool) -> Option<Installed> {
    let installed = peers::detect();
    if has(&installed) {
        Some(installed)
    } else {
        eprintln!(
            "skipped: {what} is not installed ({:?} / {:?})",
            installed.haproxy.as_ref().err(),
            installed.nginx.as_ref().err()
        );
        None
    }
}

/// Starts HAProxy in `mode tcp` with one frontend (`bind`, plus `bind_options`)
/// and one server (`server`, plus `server_options`); waits until it accepts.
fn start_haproxy(
    installed: &Installed,
    bind: SocketAddr,
    bind_options: &str,
    server: SocketAddr,
    server_options: &str,
) -> Peer {
    let program = &installed.haproxy.as_ref().expect("haproxy").program;
    let dir = peers::TempDir::new("ops-haproxy").expect("a directory for HAProxy");
    let config = dir.path().join("haproxy.cfg");
    fs::write(
        &config,
        format!(
            "global\n    maxconn 100\n\
             defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 30s\n    \
             timeout server 30s\n\
             frontend fe\n    bind {bind} {bind_options}\n    default_backend be\n\
             backend be\n    server s1 {server} {server_options}\n"
        ),
    )
    .expect("write haproxy.cfg");
    let args = vec![
        "-db".to_string(),
        "-f".to_string(),
        config.display().to_string(),
    ];
    let process = Spawn::new("haproxy", program)
        .args(args)
        .ready(Ready::Accepting(bind), SOON)
        .start()
        .expect("start HAProxy, accepting");
    Peer {
        _process: process,
        _dir: dir,
    }
}

/// A port free on ::1 now. (One IPv6 loopback address only, and two
/// frontends may not both say `[::1]:0`, so the second needs a port of its
/// own; the tiny race with another process taking it is accepted.)
fn free_v6_port() -> u16 {
    let listener = TcpListener::bind("[::1]:0").expect("bind ::1");
    listener.local_addr().expect("address").port()
}

fn loopback_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port().expect("a free port")))
}

// Our send-proxy-v2 into a real HAProxy's accept-proxy, which passes the address on with its own
// send-proxy to a test backend: the client's address and our frontend's arrive intact.
#[test]
fn haproxy_accept_proxy_takes_our_send_proxy_v2() {
    let Some(installed) = installed("haproxy", |i| i.haproxy.is_ok()) else {
        return;
    };
    let dir = TestDir::new("haproxy-accept");
    let end = HeaderBackend::start("127.0.0.1:0");
    let listen = loopback_port();
    let _haproxy = start_haproxy(&installed, listen, "accept-proxy", end.addr(), "send-proxy");
    let config = format!(
        "global\n    access-log off\n\
         frontend out\n    listen 127.0.0.1:0\n    backend {listen} send-proxy-v2\n"
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let addr = frontend_addr(&daemon, "out");
    for _ in 0..3 {
        let (line, me) = learned_through(addr);
        // HAProxy's send-proxy is version 1.
        assert_eq!(line, format!("v1 {me} {addr}\n"));
    }
    stop_daemon(daemon);
}

// A real HAProxy's send-proxy-v2 into our accept-proxy, then our send-proxy to a test backend:
// the client's address and HAProxy's frontend arrive intact, and our access log names the client.
#[test]
fn our_accept_proxy_takes_haproxy_send_proxy_v2() {
    let Some(installed) = installed("haproxy", |i| i.haproxy.is_ok()) else {
        return;
    };
    let dir = TestDir::new("haproxy-send");
    let end = HeaderBackend::start("127.0.0.1:0");
    let config = format!(
        "global\n    access-log stderr\n\
         frontend in\n    listen 127.0.0.1:0\n    accept-proxy\n    backend {} send-proxy\n",
        end.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let ours = frontend_addr(&daemon, "in");
    let listen = loopback_port();
    let _haproxy = start_haproxy(&installed, listen, "", ours, "send-proxy-v2");
    for _ in 0..3 {
        let (line, me) = learned_through(listen);
        assert_eq!(line, format!("v1 {me} {listen}\n"));
        let logged = wait_for_access_line(&daemon, "in", me);
        assert_eq!(logged.termination.to_string(), "--", "{logged:?}");
    }
    stop_daemon(daemon);
}

// A real nginx stream proxy with `proxy_protocol on` into our accept-proxy: the same.
#[test]
fn our_accept_proxy_takes_nginx_proxy_protocol() {
    let Some(installed) = installed("nginx with the stream module", |i| i.nginx.is_ok()) else {
        return;
    };
    let nginx = installed.nginx.as_ref().expect("nginx");
    let dir = TestDir::new("nginx-send");
    let end = HeaderBackend::start("127.0.0.1:0");
    let config = format!(
        "global\n    access-log stderr\n\
         frontend in\n    listen 127.0.0.1:0\n    accept-proxy\n    backend {} send-proxy-v2\n",
        end.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let ours = frontend_addr(&daemon, "in");
    let listen = loopback_port();
    let peer_dir = peers::TempDir::new("ops-nginx").expect("a directory for nginx");
    let load = nginx
        .stream_module
        .as_ref()
        .map_or(String::new(), |m| format!("load_module {};\n", m.display()));
    let conf = peer_dir.path().join("nginx.conf");
    fs::write(
        &conf,
        format!(
            "{load}daemon off;\nmaster_process off;\nworker_processes 1;\n\
             error_log stderr error;\npid {dir}/nginx.pid;\n\
             events {{\n    worker_connections 64;\n}}\n\
             stream {{\n    server {{\n        listen {listen};\n        proxy_pass {ours};\n        \
             proxy_protocol on;\n        proxy_half_close on;\n        \
             proxy_connect_timeout 5s;\n        proxy_timeout 30s;\n    }}\n}}\n",
            dir = peer_dir.path().display()
        ),
    )
    .expect("write nginx.conf");
    let args: Vec<String> = [
        "-p",
        &peer_dir.path().display().to_string(),
        "-e",
        "stderr",
        "-c",
        &conf.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let process = Spawn::new("nginx", &nginx.program)
        .args(args)
        .ready(Ready::Accepting(listen), SOON)
        .start()
        .expect("start nginx, accepting");
    let _nginx = Peer {
        _process: process,
        _dir: peer_dir,
    };
    for _ in 0..3 {
        let (line, me) = learned_through(listen);
        // nginx speaks version 1; we pass it on as version 2.
        assert_eq!(line, format!("v2 {me} {listen}\n"));
        let logged = wait_for_access_line(&daemon, "in", me);
        assert_eq!(logged.termination.to_string(), "--", "{logged:?}");
    }
    stop_daemon(daemon);
}

// ---------------------------------------------------------------------------
// 4. PROXY protocol in
// ---------------------------------------------------------------------------

/// The source and destination a PROXY header claims.
type Claim = (SocketAddr, SocketAddr);

// accept-proxy: valid v1 and v2 headers name the client in the access log and on to send-proxy;
// malformed, truncated or missing headers close the connection, reach no backend, and are logged
// PR, cR or CR.
#[test]
fn accept_proxy_trusts_valid_headers_and_refuses_the_rest() {
    let dir = TestDir::new("accept-proxy");
    let end = HeaderBackend::start("127.0.0.1:0");
    let config = format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n\
         frontend pin\n    listen 127.0.0.1:0\n    accept-proxy\n    timeout client-hs 300ms\n    \
         backend {} send-proxy\n",
        end.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let addr = frontend_addr(&daemon, "pin");
    let admin = admin_addr(&daemon);

    // Valid headers, each with the client's first bytes in the same write.
    let v4_source: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    let v4_destination: SocketAddr = "198.51.100.1:443".parse().unwrap();
    let v6_source: SocketAddr = "[2001:db8::7]:50000".parse().unwrap();
    let v6_destination: SocketAddr = "[2001:db8::1]:8443".parse().unwrap();
    // v2 LOCAL (a health check of the balancer in front): no addresses.
    let mut local = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    local.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    // (what, the header, the (source, destination) it claims)
    let valid: Vec<(&str, Vec<u8>, Option<Claim>)> = vec![
        (
            "v1 TCP4",
            proxy_protocol::encode(Version::V1, v4_source, v4_destination),
            Some((v4_source, v4_destination)),
        ),
        (
            "v2 INET6",
            proxy_protocol::encode(Version::V2, v6_source, v6_destination),
            Some((v6_source, v6_destination)),
        ),
        ("v2 LOCAL", local, None),
    ];
    let mut bytes_down = 0;
    for (what, header, claimed) in &valid {
        let mut stream = client(addr);
        let me = stream.local_addr().unwrap();
        let mut bytes = header.clone();
        bytes.extend_from_slice(b"hello\n");
        stream.write_all(&bytes).expect("send");
        stream.shutdown(Shutdown::Write).expect("FIN");
        let got = String::from_utf8(read_all(&stream).expect("receive")).expect("UTF-8");
        // LOCAL: the connection's own addresses stand.
        let (source, destination) = claimed.unwrap_or((me, addr));
        assert_eq!(
            got,
            format!("v1 {source} {destination}\nhello\n"),
            "{what}; stderr:\n{}",
            daemon.said()
        );
        let logged = wait_for_access_line(&daemon, "pin", source);
        assert_eq!(logged.termination.to_string(), "--", "{what}: {logged:?}");
        assert_eq!(logged.bytes_down, got.len() as u64, "{what}: {logged:?}");
        bytes_down += got.len() as u64;
    }
    assert_eq!(end.accepted(), valid.len());
    // The client's bytes that came with its header count as relayed like
    // any other: 6 per client up (the headers, its and ours, do not count),
    // and the answers down.
    let x = scrape_until(admin, "the valid clients finished", |x| {
        x.value("proxy_frontend_active_connections", &[("frontend", "pin")]) == Some(0.0)
    });
    let backend = end.addr().to_string();
    let on_backend = [
        ("frontend", "pin"),
        ("backend", backend.as_str()),
        ("group", "pin"),
        ("server", backend.as_str()),
    ];
    let up = 6 * valid.len() as u64;
    for (name, labels, want) in [
        (
            "proxy_frontend_bytes_in_total",
            &[("frontend", "pin")][..],
            up,
        ),
        (
            "proxy_frontend_bytes_out_total",
            &[("frontend", "pin")][..],
            bytes_down,
        ),
        ("proxy_backend_bytes_in_total", &on_backend[..], up),
        ("proxy_backend_bytes_out_total", &on_backend[..], bytes_down),
    ] {
        assert_eq!(value(&x, name, labels), want, "{name}");
    }

    // Malformed: each closed by the proxy, none reaching the backend.
    let too_long = [b"PROXY UNKNOWN ".as_slice(), &[b'x'; 120]].concat();
    let mut wrong_signature = b"\r\n\r\n\0\r\nQUIX\n".to_vec();
    wrong_signature.extend_from_slice(&[0x21, 0x11, 0x00, 0x0c]);
    // (what, bytes, then FIN?, code)
    let malformed: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("garbage", b"GET / HTTP/1.0\r\n\r\n".to_vec(), false, "PR"),
        ("v1 too long", too_long, false, "PR"),
        ("v2 wrong signature", wrong_signature, false, "PR"),
        (
            "v1 bad port",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 080 80\r\n".to_vec(),
            false,
            "PR",
        ),
        // Half a header, then silence past `timeout client-hs`.
        (
            "truncated, silent",
            b"PROXY TCP4 1.2.3.4".to_vec(),
            false,
            "cR",
        ),
        // Half a header, then the client's FIN.
        (
            "truncated, closed",
            b"PROXY TCP4 1.2.3.4".to_vec(),
            true,
            "CR",
        ),
        ("nothing, closed", Vec::new(), true, "CR"),
    ];
    for (what, bytes, fin, code) in &malformed {
        let mut stream = client(addr);
        let me = stream.local_addr().unwrap();
        stream.write_all(bytes).expect("send");
        if *fin {
            stream.shutdown(Shutdown::Write).expect("FIN");
        }
        assert_refused(&stream, what, &daemon);
        let logged = wait_for_access_line(&daemon, "pin", me);
        assert_eq!(logged.termination.to_string(), *code, "{what}: {logged:?}");
        assert_eq!(logged.server, None, "{what}: {logged:?}");
        assert_eq!(
            (logged.wait_ms, logged.connect_ms, logged.bytes_down),
            (-1, -1, 0),
            "{what}: {logged:?}"
        );
    }
    // Every line is in (each was waited for): no connection reached the backend meanwhile.
    assert_eq!(
        end.accepted(),
        valid.len(),
        "a refused client reached the backend"
    );
    let lines = stop_daemon(daemon);
    assert_eq!(
        tcplog_lines(&lines).len(),
        valid.len() + malformed.len(),
        "{}",
        lines.join("\n")
    );
}

// ---------------------------------------------------------------------------
// 5. Access control
// ---------------------------------------------------------------------------

// accept-proxy with ranges: only the balancer in front may speak for a
// client. Anyone else is refused before a byte of it is read (a forged
// header would otherwise get past allow/deny), and never reaches a backend.
#[test]
fn accept_proxy_trusts_only_the_listed_peers() {
    let dir = TestDir::new("accept-proxy-from");
    let end = HeaderBackend::start("127.0.0.1:0");
    let config = format!(
        "frontend pin\n    listen 127.0.0.1:0\n    accept-proxy 127.0.0.9/32\n    \
         backend {} send-proxy\n",
        end.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let addr = frontend_addr(&daemon, "pin");
    let claimed: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    let destination: SocketAddr = "198.51.100.1:443".parse().unwrap();
    let mut bytes = proxy_protocol::encode(Version::V1, claimed, destination);
    bytes.extend_from_slice(b"hello\n");

    // From the trusted peer: served, and its claim passed on.
    let mut trusted = connect_from(Ipv4Addr::new(127, 0, 0, 9), addr);
    trusted.write_all(&bytes).expect("send");
    trusted.shutdown(Shutdown::Write).expect("FIN");
    let got = String::from_utf8(read_all(&trusted).expect("receive")).expect("UTF-8");
    assert_eq!(got, format!("v1 {claimed} {destination}\nhello\n"));
    assert_eq!(
        wait_for_access_line(&daemon, "pin", claimed)
            .termination
            .to_string(),
        "--"
    );

    // From 127.0.0.1, not trusted: refused at once, whatever it would send.
    let port = refused(
        Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        addr,
        "untrusted",
        &daemon,
    );
    let line = wait_for_access_line(&daemon, "pin", SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(line.termination.to_string(), "PR", "{line:?}");
    assert_eq!(line.server, None, "{line:?}");
    assert_eq!(
        end.accepted(),
        1,
        "only the trusted client reached the backend"
    );
}

// deny 127.0.0.2/32: closed at once, never at the backend, counted; allow 127.0.0.3/32 alone:
// 127.0.0.1 refused, 127.0.0.3 served; deny ::1/128 on a [::1] frontend.
#[test]
fn allow_and_deny_decide_before_any_backend_sees_the_client() {
    let dir = TestDir::new("acl");
    let (e1, e2, e3) = (
        CountingEcho::start("127.0.0.1:0"),
        CountingEcho::start("127.0.0.1:0"),
        CountingEcho::start("127.0.0.1:0"),
    );
    let config = format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n\
         frontend deny2\n    listen 127.0.1.1:0\n    deny 127.0.0.2/32\n    backend {}\n\
         frontend allow3\n    listen 127.0.1.2:0\n    allow 127.0.0.3/32\n    backend {}\n\
         frontend deny6\n    listen [::1]:0\n    deny ::1/128\n    backend {}\n",
        e1.addr(),
        e2.addr(),
        e3.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let deny2 = frontend_addr(&daemon, "deny2");
    let allow3 = frontend_addr(&daemon, "allow3");
    let deny6 = frontend_addr(&daemon, "deny6");
    let admin = admin_addr(&daemon);
    let ip = |d| Ipv4Addr::new(127, 0, 0, d);

    let served_from = |source: Ipv4Addr, addr: SocketAddr, n: usize| {
        let mut stream = connect_from(source, addr);
        let line = format!("from {source} #{n}\n");
        stream.write_all(line.as_bytes()).expect("send");
        let echo = read_exact(&mut stream, line.len())
            .unwrap_or_else(|e| panic!("{source} through {addr}: {e}"));
        assert_eq!(echo, line.as_bytes());
    };
    let refused_from = |source: Option<Ipv4Addr>, addr: SocketAddr| {
        let what = format!("{source:?} to {addr}");
        refused(source.map(IpAddr::from), addr, &what, &daemon);
    };

    for _ in 0..5 {
        refused_from(Some(ip(2)), deny2);
    }
    assert_eq!(e1.accepted(), 0, "a denied client reached the backend");
    for n in 0..3 {
        served_from(ip(1), deny2, n);
    }
    assert_eq!(e1.accepted(), 3);

    for _ in 0..3 {
        refused_from(Some(ip(1)), allow3);
    }
    assert_eq!(e2.accepted(), 0, "a client not allowed reached the backend");
    for n in 0..3 {
        served_from(ip(3), allow3, n);
    }
    assert_eq!(e2.accepted(), 3);

    for _ in 0..3 {
        refused_from(None, deny6);
    }
    assert_eq!(e3.accepted(), 0, "a denied IPv6 client reached the backend");

    let x = scrape_until(admin, "the denials counted", |x| {
        [("deny2", 5.0), ("allow3", 3.0), ("deny6", 3.0)]
            .iter()
            .all(|(f, n)| x.value("proxy_frontend_denied_total", &[("frontend", f)]) == Some(*n))
    });
    for (f, n) in [("deny2", 8), ("allow3", 6), ("deny6", 3)] {
        assert_eq!(
            value(&x, "proxy_frontend_connections_total", &[("frontend", f)]),
            n
        );
    }
    let lines = stop_daemon(daemon);
    let parsed = tcplog_lines(&lines);
    let denied: Vec<String> = parsed
        .iter()
        .filter(|l| l.termination.to_string() == "PR")
        .map(|l| format!("{} {}", l.frontend, l.client.ip()))
        .collect();
    let mut expected: Vec<String> = Vec::new();
    expected.extend((0..5).map(|_| "deny2 127.0.0.2".to_string()));
    expected.extend((0..3).map(|_| "allow3 127.0.0.1".to_string()));
    expected.extend((0..3).map(|_| "deny6 ::1".to_string()));
    let mut denied_sorted = denied.clone();
    denied_sorted.sort();
    expected.sort();
    assert_eq!(denied_sorted, expected, "{}", lines.join("\n"));
    assert_eq!(parsed.len(), 5 + 3 + 3 + 3 + 3, "{}", lines.join("\n"));
}

// ---------------------------------------------------------------------------
// 6. Per-source limit
// ---------------------------------------------------------------------------

/// Waits (bounded by `limit`) until `want` of `streams` have been closed by
/// their peer (a FIN or a reset: POLLIN with nothing to read, POLLHUP,
/// POLLERR); returns which are closed. Data instead of a close fails.
fn wait_for_closes(streams: &[TcpStream], want: usize, limit: Duration) -> Vec<bool> {
    let mut closed = vec![false; streams.len()];
    let deadline = Instant::now() + limit;
    // Each round either closes at least one or waits out the deadline (a
    // zero `limit`: one look, without waiting).
    for _ in 0..=streams.len() {
        let count = closed.iter().filter(|c| **c).count();
        if count >= want {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let open: Vec<usize> = (0..streams.len()).filter(|&i| !closed[i]).collect();
        // nix names no POLLRDHUP (the peer's FIN); the kernel's bit is kept.
        let events = PollFlags::POLLIN | PollFlags::from_bits_retain(libc::POLLRDHUP);
        let mut fds: Vec<PollFd> = open
            .iter()
            .map(|&i| PollFd::new(streams[i].as_fd(), events))
            .collect();
        match poll(&mut fds, poll_timeout(left)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => panic!("poll: {}", io::Error::from(e)),
        }
        for (fd, &i) in fds.iter().zip(&open) {
            // None: bits nix has no name for (POLLRDHUP), so not nothing.
            if fd.revents() == Some(PollFlags::empty()) {
                continue;
            }
            streams[i].set_nonblocking(true).expect("nonblocking");
            let mut byte = [0u8; 1];
            let how = describe(&(&streams[i]).read(&mut byte));
            assert!(
                how == "eof" || how == "reset",
                "client {i}: expected a refusal, got {how}"
            );
            closed[i] = true;
        }
        if left.is_zero() {
            break;
        }
    }
    closed
}

// maxconn-per-source 20 with 500 connections from 127.0.0.1 held open at once: at most 20 ever
// reach the backend together, the other 480 are refused promptly and counted, and 127.0.0.4
// still gets through meanwhile.
#[test]
fn five_hundred_from_one_source_with_a_limit_of_20() {
    const CLIENTS: usize = 500;
    const LIMIT: usize = 20;
    runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    let dir = TestDir::new("per-source");
    // send-proxy: the backend learns each connection's real source.
    let end = HeaderBackend::start("127.0.0.1:0");
    let config = format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend ps\n    listen 127.0.0.1:0\n    maxconn-per-source {LIMIT}\n    \
         backend {} send-proxy\n",
        end.addr()
    );
    let daemon = start_daemon(&dir, &config, &[]);
    let addr = frontend_addr(&daemon, "ps");
    let admin = admin_addr(&daemon);
    let one = IpAddr::from(Ipv4Addr::LOCALHOST);

    // A client refused before its connect returned is closed already.
    let mut refused_at_once = 0;
    let mut streams: Vec<TcpStream> = Vec::new();
    for i in 0..CLIENTS {
        match open_from(None, addr, CLIENT_TIMEOUT).1 {
            Ok(stream) => streams.push(stream),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => refused_at_once += 1,
            Err(e) => panic!("client {i}: connect: {e}"),
        }
    }
    let want = (CLIENTS - LIMIT).saturating_sub(refused_at_once);
    let closed = wait_for_closes(&streams, want, Duration::from_secs(10));
    let refused = refused_at_once + closed.iter().filter(|c| **c).count();
    assert_eq!(
        refused,
        CLIENTS - LIMIT,
        "all but {LIMIT} should be refused; backend: {:?}; stderr:\n{}",
        end.presence(one),
        daemon.said()
    );
    // The admitted ones reach the backend (their PROXY header goes out at
    // once, before any client byte).
    assert!(
        wait_until(SOON, || end.presence(one).open == LIMIT),
        "backend: {:?}",
        end.presence(one)
    );

    // Another source is not held back by the first one's limit.
    let four = Ipv4Addr::new(127, 0, 0, 4);
    let mut other = connect_from(four, addr);
    let me = other.local_addr().unwrap();
    other.write_all(b"hi\n").expect("send");
    let expected = format!("v1 {me} {addr}\nhi\n");
    let got = read_exact(&mut other, expected.len())
        .unwrap_or_else(|e| panic!("127.0.0.4: {e}; stderr:\n{}", daemon.said()));
    assert_eq!(String::from_utf8_lossy(&got), expected);

    // Still none of the held ones closed, and never more than 20 together.
    let late = wait_for_closes(&streams, CLIENTS, Duration::ZERO);
    assert_eq!(
        refused_at_once + late.iter().filter(|c| **c).count(),
        CLIENTS - LIMIT
    );
    let presence = end.presence(one);
    assert_eq!(
        presence,
        Presence {
            open: LIMIT,
            peak: LIMIT,
            total: LIMIT
        }
    );
    // A refused connection is counted as denied before it is counted out
    // of the open ones: wait for both.
    let frontend = [("frontend", "ps")];
    scrape_until(admin, "the refusals counted, the refused closed", |x| {
        x.value("proxy_frontend_denied_total", &frontend) == Some((CLIENTS - LIMIT) as f64)
            && x.value("proxy_frontend_active_connections", &frontend) == Some(LIMIT as f64 + 1.0)
    });

    // Everything closes: the clients, then the backend's side of each.
    drop(other);
    drop(streams);
    assert!(
        wait_until(SOON, || end.open() == 0),
        "backend still holds {}",
        end.open()
    );
    scrape_until(admin, "every connection closed", |x| {
        x.value("proxy_frontend_active_connections", &[("frontend", "ps")]) == Some(0.0)
    });
    assert_eq!(end.presence(IpAddr::from(four)).total, 1);
    stop_daemon(daemon);
}
