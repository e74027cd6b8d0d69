//! End to end, the proxy's lifecycle:
//! graceful stop on SIGTERM / SIGINT (ops/shutdown.rs, in the epoll and
//! pool modes; the states mode's own loop), with its lameduck phase
//! (`shutdown-delay`) and the health a route announcer reads
//! (`/health/FRONTEND`), and reload on SIGHUP (epoll/control.rs, `Control::reload`).
//!
//! Real processes, real signals, loopback only. Every wait has a deadline
//! (a condition polled, never a sleep that hopes), every loop a bound in
//! count and in time, and every child process and backend is stopped by a
//! guard's `Drop` even when an assertion fails half-way. Nothing here
//! measures speed: the time limits are generous bounds on "soon", far from
//! the durations they separate (a drain that ends when the last client
//! leaves, against a grace period of 20 s).
//!
//! Configuration files are rewritten the way an operator's tooling should:
//! written to a temporary file beside them, then renamed over them, so a
//! SIGHUP never reads half a file.

mod common;

use std::fs;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::Signal;
use tools::process::child::{self, ChildProcess};

use common::*;

/// How long a client read or write may block in these tests: far more than
/// any loopback round trip, far less than the 20 s grace periods below, so
/// a connection cut or stuck fails the test instead of hanging it.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A bound on "soon": a log line, a refused port, an exit after the last
/// connection closed.
const SOON: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn fixture(count: usize, mode: FixtureMode) -> Fixture {
    Fixture::start(
        count,
        FixtureOptions {
            mode,
            ..FixtureOptions::default()
        },
    )
    .expect("start the fixture")
}

/// Waits for a log line containing `needle`, failing the test if it does
/// not come within [`SOON`].
fn expect_log(proxy: &ChildProcess, needle: &str) -> String {
    expect_log_within(proxy, needle, SOON)
}

/// How many log lines contain `needle`.
fn count_log(proxy: &ChildProcess, needle: &str) -> usize {
    proxy.log().iter().filter(|l| l.contains(needle)).count()
}

/// Waits until `count` log lines contain `needle` (for a second reload,
/// whose line looks like the first one's).
fn expect_log_count(proxy: &ChildProcess, needle: &str, count: usize) {
    assert!(
        wait_until(SOON, || count_log(proxy, needle) >= count),
        "expected {count} log lines {needle:?} within {SOON:?}; stderr:\n{}",
        said(proxy)
    );
}

/// The proxy must still be running (not killed by a signal it should have
/// handled, not exited early).
fn assert_running(proxy: &mut ChildProcess, when: &str) {
    let status = proxy.wait_exit(Duration::ZERO).expect("try_wait");
    assert!(
        status.is_none(),
        "{when}: the proxy exited ({status:?}); stderr:\n{}",
        said(proxy)
    );
}

/// Waits up to `limit` for the proxy to exit, and requires status 0.
fn expect_exit_0(proxy: &mut ChildProcess, limit: Duration, when: &str) {
    match proxy.wait_exit(limit).expect("wait for the proxy") {
        Some(status) => assert_eq!(
            status.code(),
            Some(0),
            "{when}: exit status {status}; stderr:\n{}",
            said(proxy)
        ),
        None => panic!(
            "{when}: the proxy still runs after {limit:?}; stderr:\n{}",
            said(proxy)
        ),
    }
}

/// A client connection whose reads and writes block at most [`CLIENT_TIMEOUT`].
fn client(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT)?;
    set_timeouts(&stream, CLIENT_TIMEOUT);
    Ok(stream)
}

/// Sends `line` (with its newline) and reads a line back; Ok with what came.
fn exchange(stream: &mut TcpStream, line: &str) -> io::Result<String> {
    stream.write_all(format!("{line}\n").as_bytes())?;
    let got = read_line(stream)?;
    String::from_utf8(got).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
}

/// One line through an echo path: the same line must come back.
fn echo_line(stream: &mut TcpStream, line: &str) -> Result<(), String> {
    match exchange(stream, line) {
        Ok(got) if got == format!("{line}\n") => Ok(()),
        Ok(got) => Err(format!("sent {line:?}, got back {got:?}")),
        Err(e) => Err(format!("sent {line:?}: {e}")),
    }
}

/// The port in a `port N: ...` answer (the fixture's reply mode, and
/// [`LineBackend`]).
fn port_of(answer: &str) -> Option<u16> {
    answer
        .strip_prefix("port ")?
        .split(':')
        .next()?
        .parse()
        .ok()
}

/// One request through `addr` to a reply-style backend (one line, then the
/// client's FIN, then the whole answer up to EOF): the port that served it.
fn request(addr: SocketAddr, line: &str) -> Result<u16, String> {
    let mut stream = client(addr).map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    let answer = read_all(&stream).map_err(|e| format!("receive: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    match port_of(&answer) {
        Some(port) if answer.ends_with(&format!(": {line}\n")) => Ok(port),
        _ => Err(format!("sent {line:?}, got {answer:?}")),
    }
}

/// Sends requests through `addr` until `streak` in a row are served by a
/// port in `pool` (at most 1000 requests, within [`SOON`]): the proxy's
/// workers have all switched to that pool. Every request must succeed.
fn wait_for_pool(proxy: &ChildProcess, addr: SocketAddr, pool: &[u16], streak: usize) {
    let deadline = Instant::now() + SOON;
    let mut in_a_row = 0;
    for n in 0..1000 {
        let port = request(addr, &format!("probe {n}"))
            .unwrap_or_else(|e| panic!("probe {n}: {e}; stderr:\n{}", said(proxy)));
        in_a_row = if pool.contains(&port) {
            in_a_row + 1
        } else {
            0
        };
        if in_a_row == streak {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    panic!(
        "no {streak} requests in a row went to the pool {pool:?} within {SOON:?}; stderr:\n{}",
        said(proxy)
    );
}

/// Sends `n` requests through `addr`: each must be served by a port in `pool`.
fn all_to(proxy: &ChildProcess, addr: SocketAddr, pool: &[u16], n: usize) {
    for i in 0..n {
        let port = request(addr, &format!("req {i}"))
            .unwrap_or_else(|e| panic!("request {i}: {e}; stderr:\n{}", said(proxy)));
        assert!(
            pool.contains(&port),
            "request {i} went to {port}, not to {pool:?}"
        );
    }
}

/// Connects to `addr` until one connect is refused (ECONNREFUSED), for at
/// most `limit`; then checks that the next few are refused too. A connect
/// that succeeds meanwhile (the listener not closed yet) is dropped.
fn expect_refused(proxy: &ChildProcess, addr: SocketAddr, limit: Duration) {
    let mut last = String::new();
    let refused = wait_until(limit, || match TcpStream::connect_timeout(&addr, SOON) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => true,
        Err(e) => {
            last = format!("error {e}");
            false
        }
        Ok(_) => {
            last = "accepted".into();
            false
        }
    });
    assert!(
        refused,
        "{addr} still takes connections after {limit:?} (last: {last}); stderr:\n{}",
        said(proxy)
    );
    for n in 0..3 {
        let result = TcpStream::connect_timeout(&addr, SOON);
        assert!(
            matches!(&result, Err(e) if e.kind() == ErrorKind::ConnectionRefused),
            "connect {n} after the first refusal: {result:?}"
        );
    }
}

/// A `frontend` section.
fn frontend(name: &str, listen: &str, backends: &[SocketAddr]) -> String {
    let mut text = format!("frontend {name}\n    listen {listen}\n");
    for backend in backends {
        text.push_str(&format!("    backend {backend}\n"));
    }
    text
}

/// Starts the epoll mode on `config` with two workers.
fn start_with_config(config: &ConfigFile, extra: &[&str]) -> ChildProcess {
    let mut args: Vec<String> = ["--config", &config.path().display().to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--workers", "2"].iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    child::proxy(proxy_exe(), &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"))
}

fn ports(addrs: &[SocketAddr]) -> Vec<u16> {
    addrs.iter().map(SocketAddr::port).collect()
}

/// A backend that answers every line with `port N: <line>` until the
/// client's FIN, and counts the connections it has open: a reply backend
/// for one-shot requests and an echo-like one for long-lived connections,
/// whose answers say which backend holds the connection.
struct LineBackend {
    server: StdBackend,
    open: Arc<AtomicUsize>,
}

impl LineBackend {
    fn start() -> LineBackend {
        let open = Arc::new(AtomicUsize::new(0));
        let count = open.clone();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
        let port = listener.local_addr().expect("backend address").port();
        let server = StdBackend::serve(listener, move |mut stream| {
            count.fetch_add(1, Ordering::SeqCst);
            let served = (|| {
                let reader = BufReader::new(stream.try_clone()?);
                for line in reader.lines().take(1000) {
                    stream.write_all(format!("port {port}: {}\n", line?).as_bytes())?;
                }
                Ok(())
            })();
            // Counted out before the stream closes (at the end of this
            // function), so a client that has seen the FIN finds it done.
            count.fetch_sub(1, Ordering::SeqCst);
            served
        });
        LineBackend { server, open }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------------------
// Graceful stop
// ---------------------------------------------------------------------------

/// `clients` connections through the proxy to an echo backend, all
/// established end to end; SIGTERM; then new connections are refused,
/// every open one still works, and once the clients close them all the
/// proxy exits 0 at once, long before the grace period.
fn drain(mode: Mode, clients: usize) {
    runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    let fixture = fixture(1, FixtureMode::Echo);
    let mut proxy = start_proxy(mode, fixture.addrs(), &["--grace", "20s"]);
    let addr = proxy.addr();
    let mut streams: Vec<TcpStream> = (0..clients)
        .map(|i| {
            let mut stream = client(addr).unwrap_or_else(|e| panic!("connect {i}: {e}"));
            echo_line(&mut stream, &format!("client {i}: first"))
                .unwrap_or_else(|e| panic!("client {i}: {e}; stderr:\n{}", said(&proxy)));
            stream
        })
        .collect();

    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    let stopping = expect_log(&proxy, "stopping: no new connections");
    assert!(
        stopping.contains(&format!("{clients} open")),
        "the stop line should count the {clients} open connections: {stopping:?}"
    );
    expect_refused(&proxy, addr, Duration::from_secs(2));

    // None was cut: each one still carries a line both ways.
    let failures: Vec<String> = streams
        .iter_mut()
        .enumerate()
        .filter_map(|(i, s)| {
            echo_line(s, &format!("client {i}: after SIGTERM"))
                .err()
                .map(|e| format!("client {i}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {clients} connections failed after SIGTERM:\n{}\nstderr:\n{}",
        failures.len(),
        failures.join("\n"),
        said(&proxy)
    );
    assert_running(&mut proxy, "with every connection still open");

    // The clients leave: FIN, then the backend's FIN passed back.
    for (i, stream) in streams.iter().enumerate() {
        stream.shutdown(Shutdown::Write).expect("FIN");
        let rest = read_all(stream).unwrap_or_else(|e| panic!("client {i}: to EOF: {e}"));
        assert!(rest.is_empty(), "client {i}: unexpected {rest:?}");
    }
    drop(streams);
    expect_exit_0(&mut proxy, SOON, "after the last connection closed");
    let log = proxy.log();
    assert!(
        log.iter()
            .any(|l| l.contains("every connection finished; exiting")),
        "stderr:\n{}",
        log.join("\n")
    );
    assert!(
        !log.iter().any(|l| l.contains("grace period")),
        "the drain ended by the clock, not by the clients: stderr:\n{}",
        log.join("\n")
    );
}

// SIGTERM with 100 open connections: none is cut, new ones are refused, exit 0 when the last closes.
#[test]
fn epoll_sigterm_drains_100_open_connections_then_exits_0() {
    drain(Mode::Epoll2, 100);
}

// The pool mode drains the same way (at most --threads connections are served at once).
#[test]
fn pool_sigterm_drains_open_connections_then_exits_0() {
    drain(Mode::PoolMutex, 8);
}

// The states mode drains in its own loop, with the same words.
#[test]
fn states_sigterm_drains_100_open_connections_then_exits_0() {
    drain(Mode::States, 100);
}

/// One idle connection outlives the grace period: the proxy exits 0 once
/// it is over (not before), and the client sees its connection end.
fn grace_expiry(mode: Mode) {
    let fixture = fixture(1, FixtureMode::Echo);
    let mut proxy = start_proxy(mode, fixture.addrs(), &["--grace", "1s"]);
    let mut stream = client(proxy.addr()).expect("connect");
    echo_line(&mut stream, "hello").unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));

    let signalled = Instant::now();
    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_exit_0(
        &mut proxy,
        Duration::from_secs(1) + SOON,
        "after the grace period",
    );
    // The drain's clock starts after the signal is read, so the process
    // cannot exit sooner than the grace period after it was sent.
    let lived = signalled.elapsed();
    assert!(
        lived >= Duration::from_millis(950),
        "exited {lived:?} after SIGTERM, before the 1 s grace period was over; stderr:\n{}",
        said(&proxy)
    );
    let over = expect_log(&proxy, "grace period of 1s over: closing 1 connections");
    assert!(over.contains("exiting"), "{over:?}");

    // The connection ends with the process. The epoll and states modes cut
    // it themselves: a reset (a cut stream must not look complete), and in
    // the epoll mode a `KD` line in the access log; the pool mode leaves it
    // to the exit: a FIN or a reset.
    set_timeouts(&stream, SOON);
    let mut buf = [0u8; 64];
    let read = stream.read(&mut buf);
    let how = describe(&read);
    if mode == Mode::PoolMutex {
        assert!(
            how == "eof" || how == "reset",
            "after the proxy exited, the client's read gave {how} ({read:?})"
        );
    } else {
        assert_eq!(how, "reset", "the cut connection ({read:?})");
    }
    // The states mode writes no access log; the epoll mode's line says `KD`.
    if mode.is_epoll() {
        let port = stream.local_addr().expect("local address").port();
        let line = expect_log(&proxy, &format!("127.0.0.1:{port} "));
        assert!(line.contains(" KD "), "not logged as cut: {line:?}");
    }
}

// Grace expiry: an idle connection past --grace; exit 0 when it is over, the client sees the end.
#[test]
fn epoll_grace_expiry_closes_what_is_left_and_exits_0() {
    grace_expiry(Mode::Epoll2);
}

// The same in the pool mode, whose workers are blocked in their relays.
#[test]
fn pool_grace_expiry_closes_what_is_left_and_exits_0() {
    grace_expiry(Mode::PoolMutex);
}

// The same in the states mode, whose loop resets what is left.
#[test]
fn states_grace_expiry_closes_what_is_left_and_exits_0() {
    grace_expiry(Mode::States);
}

// A second signal while draining: exit 0 at once, without waiting for the 30 s grace period
// (and a SIGHUP meanwhile is ignored).
#[test]
fn a_second_signal_while_draining_exits_at_once() {
    let fixture = fixture(1, FixtureMode::Echo);
    let mut proxy = start_proxy(Mode::Epoll2, fixture.addrs(), &["--grace", "30s"]);
    let mut stream = client(proxy.addr()).expect("connect");
    echo_line(&mut stream, "hello").unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));

    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_log(&proxy, "stopping: no new connections");
    // A SIGHUP while draining neither reloads nor stops.
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log(&proxy, "SIGHUP while stopping: ignored");
    assert_running(&mut proxy, "draining, one connection open");
    echo_line(&mut stream, "still here")
        .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));
    proxy.signal(Signal::SIGINT).expect("SIGINT");
    expect_exit_0(
        &mut proxy,
        Duration::from_secs(2),
        "after the second signal",
    );
    expect_log(&proxy, "SIGINT again: closing 1 connections; exiting");

    set_timeouts(&stream, SOON);
    let mut buf = [0u8; 64];
    let read = stream.read(&mut buf);
    let how = describe(&read);
    assert_eq!(how, "reset", "the cut connection ({read:?})");
    let port = stream.local_addr().expect("local address").port();
    let line = expect_log(&proxy, &format!("127.0.0.1:{port} "));
    assert!(line.contains(" KD "), "not logged as cut: {line:?}");
}

// ---------------------------------------------------------------------------
// The lameduck phase (shutdown-delay) and the health a route announcer reads
// ---------------------------------------------------------------------------

/// `GET path` on the admin endpoint: the status and the body.
fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = client(admin).unwrap_or_else(|e| panic!("connect to admin: {e}"));
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("send");
    let text = String::from_utf8(read_all(&stream).expect("the answer")).expect("UTF-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, body.to_string())
}

/// Where the admin endpoint listens (`admin 127.0.0.1:0` in the file).
fn admin_of(proxy: &ChildProcess) -> SocketAddr {
    let line = expect_log(proxy, "admin listening on ");
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// A configuration with an admin endpoint, `global` lines `global`, and one
/// frontend `web` on a free port in front of `backends` with `params`.
fn lameduck_config(test: &str, global: &str, backends: &[SocketAddr], params: &str) -> ConfigFile {
    let mut text = format!("global\n    admin 127.0.0.1:0\n{global}frontend web\n");
    text.push_str("    listen 127.0.0.1:0\n");
    for backend in backends {
        text.push_str(&format!("    backend {backend} {params}\n"));
    }
    ConfigFile::new(test, &text)
}

// SIGTERM with a shutdown-delay: /health answers 503 at once while the
// listener keeps accepting and serving; a second SIGTERM ends the delay
// early, and the usual drain follows (open connections finish, new ones
// are refused, exit 0 when the last one leaves).
#[test]
fn a_shutdown_delay_keeps_serving_while_health_says_503() {
    let fixture = fixture(1, FixtureMode::Echo);
    let global = "    shutdown-delay 60s\n    grace 20s\n";
    let config = lameduck_config("lameduck", global, fixture.addrs(), "");
    let mut proxy = start_with_config(&config, &[]);
    let web = proxy.frontend_addr("web").expect("frontend web");
    let admin = admin_of(&proxy);
    assert_eq!(admin_get(admin, "/health"), (200, "ok\n".to_string()));
    let mut held = client(web).expect("connect");
    echo_line(&mut held, "before").unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));

    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_log(&proxy, "SIGTERM: lameduck for 60s");
    assert_eq!(admin_get(admin, "/health"), (503, "lameduck\n".to_string()));
    assert_eq!(
        admin_get(admin, "/health/web"),
        (503, "lameduck\n".to_string())
    );
    // Still accepting and serving: ten new clients, each echoed.
    for i in 0..10 {
        let mut stream = client(web).unwrap_or_else(|e| panic!("connect {i} in lameduck: {e}"));
        echo_line(&mut stream, &format!("lameduck {i}"))
            .unwrap_or_else(|e| panic!("client {i} in lameduck: {e}; stderr:\n{}", said(&proxy)));
        stream.shutdown(Shutdown::Write).expect("FIN");
        assert_eq!(read_all(&stream).expect("to EOF"), b"");
    }
    assert_running(&mut proxy, "in lameduck");
    // Their access-log lines come just before their places are given back
    // (a client sees its EOF a little earlier): then only `held` is open.
    let logged = wait_until(SOON, || count_log(&proxy, " web web/") >= 10);
    assert!(logged, "ten access-log lines; stderr:\n{}", said(&proxy));

    proxy.signal(Signal::SIGTERM).expect("SIGTERM again");
    expect_log(&proxy, "SIGTERM again: lameduck ended early; stopping now");
    expect_log(&proxy, "stopping: no new connections; 1 open");
    expect_refused(&proxy, web, Duration::from_secs(2));
    assert_eq!(admin_get(admin, "/health"), (503, "draining\n".to_string()));
    echo_line(&mut held, "draining").unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));
    held.shutdown(Shutdown::Write).expect("FIN");
    assert_eq!(read_all(&held).expect("to EOF"), b"");
    expect_exit_0(&mut proxy, SOON, "after the last connection closed");
}

// Left alone, the lameduck phase ends by itself: the listener closes after
// the delay and the proxy, with nothing open, exits 0.
#[test]
fn the_lameduck_phase_ends_by_itself_after_the_delay() {
    let fixture = fixture(1, FixtureMode::Echo);
    let config = lameduck_config(
        "lameduck-ends",
        "    shutdown-delay 500ms\n",
        fixture.addrs(),
        "",
    );
    let mut proxy = start_with_config(&config, &[]);
    let web = proxy.frontend_addr("web").expect("frontend web");
    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_log(&proxy, "SIGTERM: lameduck for 500ms");
    expect_refused(&proxy, web, SOON);
    expect_exit_0(&mut proxy, SOON, "with nothing open after the delay");
    assert!(
        count_log(&proxy, "lameduck ended early") == 0,
        "stderr:\n{}",
        said(&proxy)
    );
}

// /health/FRONTEND: 200 while one of its servers is usable, 503 once the
// health checks have taken every one down, 200 again when one comes back;
// /health (the process) stays 200 throughout; an unknown name is 404.
#[test]
fn health_of_a_frontend_follows_its_servers() {
    let fixture = fixture(1, FixtureMode::Echo);
    let backend = fixture.addrs()[0];
    let params = "check inter 100ms fall 1 rise 1";
    let config = lameduck_config("frontend-health", "", &[backend], params);
    let proxy = start_with_config(&config, &[]);
    let admin = admin_of(&proxy);
    let web_health = || admin_get(admin, "/health/web");
    assert_eq!(
        web_health(),
        (200, "ok: 1 of 1 servers usable\n".to_string())
    );
    assert_eq!(
        admin_get(admin, "/health/api"),
        (404, "not found: no frontend named 'api'\n".to_string())
    );
    fixture.stop();
    assert!(
        wait_until(SOON, || web_health().0 == 503),
        "still {:?}; stderr:\n{}",
        web_health(),
        said(&proxy)
    );
    assert_eq!(web_health().1, "down: 0 of 1 servers usable\n");
    assert_eq!(admin_get(admin, "/health"), (200, "ok\n".to_string()));
    let again = Fixture::start_on(
        &[backend],
        FixtureOptions {
            mode: FixtureMode::Echo,
            ..FixtureOptions::default()
        },
    )
    .expect("the backend again, on its port");
    assert!(
        wait_until(SOON, || web_health().0 == 200),
        "still {:?}; stderr:\n{}",
        web_health(),
        said(&proxy)
    );
    again.stop();
}

// ---------------------------------------------------------------------------
// Reload
// ---------------------------------------------------------------------------

/// What one load client saw of one connection.
struct Sample {
    started: Instant,
    /// The backend port that answered, or why the connection failed.
    served: Result<u16, String>,
}

// SIGHUP swaps the backend pool under steady load: zero failed connections,
// open connections stay on their old backends, new ones go to the new pool.
#[test]
fn sighup_swaps_the_pool_under_load_without_a_failure() {
    const LOAD_THREADS: usize = 4;
    const HELD: usize = 5;
    let pool_a = [LineBackend::start(), LineBackend::start()];
    let pool_b = [LineBackend::start(), LineBackend::start()];
    let addrs_a: Vec<SocketAddr> = pool_a.iter().map(LineBackend::addr).collect();
    let addrs_b: Vec<SocketAddr> = pool_b.iter().map(LineBackend::addr).collect();
    let (ports_a, ports_b) = (ports(&addrs_a), ports(&addrs_b));
    let config = ConfigFile::new("swap", &frontend("web", "127.0.0.1:0", &addrs_a));
    let mut proxy = start_with_config(&config, &["--grace", "1s"]);
    let addr = proxy.frontend_addr("web").expect("frontend web");

    // Long-lived connections opened before the reload, each on a backend of A.
    let mut held: Vec<(TcpStream, u16)> = (0..HELD)
        .map(|i| {
            let mut stream = client(addr).expect("connect");
            let answer = exchange(&mut stream, &format!("held {i}: before"))
                .unwrap_or_else(|e| panic!("held {i}: {e}; stderr:\n{}", said(&proxy)));
            let port = port_of(&answer).unwrap_or_else(|| panic!("held {i}: {answer:?}"));
            assert!(ports_a.contains(&port), "held {i}: {answer:?}");
            (stream, port)
        })
        .collect();
    let open_on_a = || pool_a.iter().map(LineBackend::open).sum::<usize>();
    assert!(wait_until(SOON, || open_on_a() == HELD), "{}", open_on_a());

    // Steady load: one connection after another on each thread, each a
    // request and its whole answer, until told to stop (bounded in count
    // and time in any case).
    let samples: Mutex<Vec<Sample>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    // Raised however the scope ends, a failed assertion included, so the
    // load threads it joins stop at once.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let load_deadline = Instant::now() + Duration::from_secs(20);
    let (signalled, settled) = thread::scope(|s| {
        for t in 0..LOAD_THREADS {
            let (samples, stop) = (&samples, &stop);
            s.spawn(move || {
                for n in 0..5000 {
                    if stop.load(Ordering::SeqCst) || Instant::now() >= load_deadline {
                        break;
                    }
                    let started = Instant::now();
                    let served = request(addr, &format!("load {t}.{n}"));
                    samples.lock().unwrap().push(Sample { started, served });
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        let count = || samples.lock().unwrap().len();
        let enough_before = wait_until(SOON, || count() >= 100);

        // The new pool, written in place; then SIGHUP.
        config.write(&frontend("web", "127.0.0.1:0", &addrs_b));
        let signalled = Instant::now();
        proxy.signal(Signal::SIGHUP).expect("SIGHUP");
        let reloaded = proxy.wait_for_log("reloaded", SOON);
        // Both workers have switched once this many requests in a row go
        // to the new pool; from then on, nothing may go to the old one.
        let settled = reloaded.is_ok().then(|| {
            wait_for_pool(&proxy, addr, &ports_b, 20);
            Instant::now()
        });
        let at_settle = count();
        let enough_after = wait_until(SOON, || count() >= at_settle + 100);
        drop(_stop);
        assert!(enough_before, "the load did not start");
        assert!(enough_after, "the load stalled after the reload");
        (signalled, settled)
    });
    let reloaded = expect_log(&proxy, "reloaded");
    assert!(
        reloaded.contains(&format!(
            "reloaded {}: web: changed",
            config.path().display()
        )),
        "{reloaded:?}"
    );
    let settled = settled.expect("reloaded");

    // (a) Zero failed client connections across the reload.
    let samples = samples.into_inner().unwrap();
    let failures: Vec<String> = samples
        .iter()
        .filter_map(|s| s.served.as_ref().err().cloned())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} connections failed across the reload:\n{}\nstderr:\n{}",
        failures.len(),
        samples.len(),
        failures.join("\n"),
        said(&proxy)
    );
    // (c) Old pool before the signal, new pool only once switched.
    let served = |s: &Sample| *s.served.as_ref().unwrap();
    for s in samples.iter().filter(|s| s.started < signalled) {
        assert!(
            ports_a.contains(&served(s)),
            "before SIGHUP: port {}",
            served(s)
        );
    }
    let after: Vec<u16> = samples
        .iter()
        .filter(|s| s.started >= settled)
        .map(served)
        .collect();
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|p| ports_b.contains(p)),
        "after the switch, connections went to the old pool {ports_a:?}: {after:?}"
    );
    for port in &ports_b {
        assert!(
            after.contains(port),
            "backend {port} of the new pool got nothing: {after:?}"
        );
    }

    // (b) The connections opened before the reload still talk to their
    // old backends, which still hold them.
    for (i, (stream, port)) in held.iter_mut().enumerate() {
        let answer = exchange(stream, &format!("held {i}: after")).unwrap_or_else(|e| {
            panic!("held {i} after the reload: {e}; stderr:\n{}", said(&proxy))
        });
        assert_eq!(
            answer,
            format!("port {port}: held {i}: after\n"),
            "held {i}"
        );
    }
    assert_eq!(open_on_a(), HELD, "the old backends should still hold them");
    for (stream, _) in &held {
        stream.shutdown(Shutdown::Write).expect("FIN");
        assert_eq!(read_all(stream).expect("to EOF"), b"");
    }
    assert!(wait_until(SOON, || open_on_a() == 0), "{}", open_on_a());

    // The listener was kept: announced once, at startup.
    assert_eq!(
        count_log(&proxy, "frontend web listening on"),
        1,
        "{}",
        said(&proxy)
    );
    assert_running(&mut proxy, "after the reload");
    stop_cleanly(proxy);
}

// A broken file on reload keeps the old configuration (and so do an address that cannot be
// bound and a missing file); once fixed, the next SIGHUP applies it.
#[test]
fn a_broken_file_on_reload_keeps_the_running_configuration() {
    let pool_a = fixture(2, FixtureMode::Reply);
    let pool_b = fixture(2, FixtureMode::Reply);
    let (ports_a, ports_b) = (ports(pool_a.addrs()), ports(pool_b.addrs()));
    let good_b = frontend("web", "127.0.0.1:0", pool_b.addrs());
    let config = ConfigFile::new("broken", &frontend("web", "127.0.0.1:0", pool_a.addrs()));
    let mut proxy = start_with_config(&config, &["--grace", "1s"]);
    let addr = proxy.frontend_addr("web").expect("frontend web");
    all_to(&proxy, addr, &ports_a, 4);

    // Line 5 (after frontend, listen and two backends), column 13: an
    // unknown balance algorithm.
    config.write(&format!("{good_b}    balance sideways\n"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let stays = expect_log(&proxy, "the running configuration stays");
    let path = config.path().display().to_string();
    assert!(
        stays.contains(&format!("reload: {path} has 1 error(s)")),
        "{stays:?}"
    );
    expect_log(
        &proxy,
        &format!("reload: {path}:5:13: unknown balance algorithm 'sideways'"),
    );
    assert_running(&mut proxy, "after a broken reload");
    all_to(&proxy, addr, &ports_a, 10);

    // A listen address that is taken cannot be bound: kept as well.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_addr = taken.local_addr().unwrap();
    config.write(&frontend("web", &taken_addr.to_string(), pool_b.addrs()));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_count(&proxy, "the running configuration stays", 2);
    let lines = proxy.log();
    let bind_error = lines
        .iter()
        .filter(|l| l.contains("the running configuration stays"))
        .nth(1)
        .unwrap();
    assert!(
        bind_error.contains(&format!("cannot listen on {taken_addr}")),
        "{bind_error:?}"
    );
    all_to(&proxy, addr, &ports_a, 10);

    // No file at all (deleted by mistake): kept too.
    fs::remove_file(config.path()).expect("remove the config");
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_count(&proxy, "the running configuration stays", 3);
    all_to(&proxy, addr, &ports_a, 10);
    assert_eq!(count_log(&proxy, "reloaded"), 0, "{}", said(&proxy));

    // Fixed: the next SIGHUP applies it.
    config.write(&good_b);
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let reloaded = expect_log(&proxy, "reloaded");
    assert!(reloaded.contains("web: changed"), "{reloaded:?}");
    wait_for_pool(&proxy, addr, &ports_b, 20);
    stop_cleanly(proxy);
}

// A reload changes the grace period, and says which global options it
// cannot change (read at startup only) instead of ignoring them silently.
#[test]
fn a_reload_changes_grace_and_names_what_needs_a_restart() {
    let echo = fixture(1, FixtureMode::Echo);
    let web = frontend("web", "127.0.0.1:0", echo.addrs());
    let config = ConfigFile::new("grace", &format!("global\n    grace 30s\n{web}"));
    let mut proxy = start_with_config(&config, &[]);
    let addr = proxy.frontend_addr("web").expect("frontend web");

    config.write(&format!(
        "global\n    grace 500ms\n    log-format json\n{web}"
    ));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log(&proxy, "reload: grace is now 500ms");
    let warned = expect_log(
        &proxy,
        "log-format changed in the file; read at startup only",
    );
    assert!(!warned.contains("workers"), "{warned:?}");
    expect_log(&proxy, "reloaded");

    // The new grace period holds: an idle connection is cut after 500 ms,
    // not 30 s.
    let mut stream = client(addr).expect("connect");
    echo_line(&mut stream, "hello").unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));
    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_exit_0(
        &mut proxy,
        Duration::from_millis(500) + SOON,
        "after the new grace",
    );
    expect_log(&proxy, "grace period of 500ms over");
}

// Reload adds frontend b (announced, serving) and removes a (its port refuses, while a
// connection it had open goes on).
#[test]
fn reload_adds_and_removes_frontends() {
    let echo = fixture(1, FixtureMode::Echo);
    let reply = fixture(1, FixtureMode::Reply);
    let config = ConfigFile::new("add-remove", &frontend("a", "127.0.0.1:0", echo.addrs()));
    let mut proxy = start_with_config(&config, &["--grace", "1s"]);
    let addr_a = proxy.frontend_addr("a").expect("frontend a");
    let mut open_on_a = client(addr_a).expect("connect to a");
    echo_line(&mut open_on_a, "before")
        .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));

    config.write(&frontend("b", "127.0.0.1:0", reply.addrs()));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let reloaded = expect_log(&proxy, "reloaded");
    assert!(
        reloaded.contains("b: added") && reloaded.contains("a: removed"),
        "{reloaded:?}"
    );
    let addr_b = proxy.frontend_addr("b").expect("frontend b announced");
    assert_ne!(addr_a, addr_b);
    for i in 0..4 {
        let port = request(addr_b, &format!("req {i}"))
            .unwrap_or_else(|e| panic!("through b: {e}; stderr:\n{}", said(&proxy)));
        assert_eq!(port, reply.addrs()[0].port());
    }
    expect_refused(&proxy, addr_a, Duration::from_secs(2));

    // Removing a frontend closes its listeners, not its connections.
    echo_line(&mut open_on_a, "after")
        .unwrap_or_else(|e| panic!("the connection open on a: {e}; stderr:\n{}", said(&proxy)));
    open_on_a.shutdown(Shutdown::Write).expect("FIN");
    assert_eq!(read_all(&open_on_a).expect("to EOF"), b"");
    assert_running(&mut proxy, "after the reload");
    stop_cleanly(proxy);
}

// One worker runs on the main thread (epoll/control.rs, `OnThisThread`): the
// process has one thread, and it still reloads, serves, and stops with 0.
#[test]
fn one_worker_runs_on_the_main_thread_and_still_reloads() {
    let echo = fixture(1, FixtureMode::Echo);
    let reply = fixture(1, FixtureMode::Reply);
    let config = ConfigFile::new("one-thread", &frontend("a", "127.0.0.1:0", echo.addrs()));
    let path = config.path().display().to_string();
    let args: Vec<String> = ["--config", &path, "--workers", "1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut proxy = child::proxy(proxy_exe(), &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"));
    let addr_a = proxy.frontend_addr("a").expect("frontend a");
    let mut open_on_a = client(addr_a).expect("connect to a");
    echo_line(&mut open_on_a, "before")
        .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(&proxy)));
    let tasks = || fs::read_dir(format!("/proc/{}/task", proxy.pid())).map(Iterator::count);
    assert_eq!(tasks().ok(), Some(1), "one thread with one worker");

    config.write(&frontend("b", "127.0.0.1:0", reply.addrs()));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log(&proxy, "reloaded");
    let addr_b = proxy.frontend_addr("b").expect("frontend b announced");
    let port = request(addr_b, "after the reload")
        .unwrap_or_else(|e| panic!("through b: {e}; stderr:\n{}", said(&proxy)));
    assert_eq!(port, reply.addrs()[0].port());
    echo_line(&mut open_on_a, "after")
        .unwrap_or_else(|e| panic!("the connection open on a: {e}; stderr:\n{}", said(&proxy)));
    assert_eq!(tasks().ok(), Some(1), "still one thread after a reload");
    open_on_a.shutdown(Shutdown::Write).expect("FIN");
    assert_eq!(read_all(&open_on_a).expect("to EOF"), b"");
    assert_running(&mut proxy, "after the reload");
    stop_cleanly(proxy);
}

/// SIGHUP in a mode or a run without a file, and SIGUSR1 without a log file:
/// logged, ignored, still serving.
fn sighup_without_config(mode: Mode) {
    let reply = fixture(1, FixtureMode::Reply);
    let mut proxy = start_proxy(mode, reply.addrs(), &[]);
    let port = request(proxy.addr(), "before").unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let line = expect_log(&proxy, "nothing to reload");
    assert!(line.contains("ignored"), "{mode:?}: {line:?}");
    assert_running(&mut proxy, "after SIGHUP");
    // SIGUSR1 (reopen the logs) must not kill a mode that has none to reopen.
    proxy.signal(Signal::SIGUSR1).expect("SIGUSR1");
    let reopen = if mode.is_epoll() {
        "SIGUSR1: the access log goes to stderr; nothing to reopen"
    } else {
        "SIGUSR1: the"
    };
    expect_log(&proxy, reopen);
    assert_running(&mut proxy, "after SIGUSR1");
    // SIGQUIT is handled in every mode: no core dump, no exit.
    // The epoll mode dumps its state; the others say what they have.
    proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
    let quit = if mode.is_epoll() {
        "SIGQUIT: end of state".to_string()
    } else {
        let name = match mode {
            Mode::Single => "single",
            Mode::States => "states",
            _ => "pool",
        };
        format!("SIGQUIT: {name} mode: ")
    };
    let line = expect_log(&proxy, &quit);
    if !mode.is_epoll() {
        assert!(line.contains("still running"), "{mode:?}: {line:?}");
    }
    assert_running(&mut proxy, "after SIGQUIT");
    for i in 0..4 {
        let served = request(proxy.addr(), &format!("after {i}"))
            .unwrap_or_else(|e| panic!("{mode:?} after SIGHUP: {e}; stderr:\n{}", said(&proxy)));
        assert_eq!(served, port);
    }
    stop_cleanly(proxy);
}

// SIGHUP without --config (epoll): nothing to reload, logged, the proxy keeps
// serving; SIGUSR1 and SIGQUIT do not stop it either (likewise below).
#[test]
fn epoll_sighup_without_config_is_logged_and_ignored() {
    sighup_without_config(Mode::Epoll2);
}

// The pool mode takes flags only: SIGHUP is logged and ignored too.
#[test]
fn pool_sighup_is_logged_and_ignored() {
    sighup_without_config(Mode::PoolMutex);
}

// The single mode as well.
#[test]
fn single_sighup_is_logged_and_ignored() {
    sighup_without_config(Mode::Single);
}

// And the states mode, which takes flags only.
#[test]
fn states_sighup_is_logged_and_ignored() {
    sighup_without_config(Mode::States);
}

// SIGUSR1 reopens the access-log file (nginx's meaning), so that a rotation
// by renaming works: lines before it stay in the renamed file, lines after
// it go to a new file of the configured name; every connection once.
#[test]
fn sigusr1_reopens_the_access_log_after_a_rotation() {
    let echo = fixture(1, FixtureMode::Echo);
    let dir = ConfigFile::new("rotate", &frontend("web", "127.0.0.1:0", echo.addrs()));
    let log = dir.path().with_file_name("access.log");
    let rotated = dir.path().with_file_name("access.log.1");
    let mut proxy = start_with_config(&dir, &["--access-log", &log.display().to_string()]);
    let addr = proxy.frontend_addr("web").expect("frontend web");
    let connect_and_close = |n: usize| {
        let mut stream = client(addr).expect("connect");
        echo_line(&mut stream, &format!("line {n}")).expect("echoed");
        stream.shutdown(Shutdown::Write).expect("FIN");
        assert_eq!(read_all(&stream).expect("to EOF"), b"");
        stream.local_addr().expect("local address").port()
    };
    let lines_of = |path: &Path, ports: &[u16]| {
        let text = fs::read_to_string(path).unwrap_or_default();
        ports
            .iter()
            .all(|port| text.contains(&format!("127.0.0.1:{port} ")))
    };
    let before: Vec<u16> = (0..3).map(connect_and_close).collect();
    // Written within the 200 ms flush period.
    let flushed = wait_until(SOON, || lines_of(&log, &before));
    assert!(flushed, "the first lines never reached {}", log.display());
    fs::rename(&log, &rotated).expect("rotate");
    proxy.signal(Signal::SIGUSR1).expect("SIGUSR1");
    expect_log(&proxy, "SIGUSR1: access log reopened");
    let after: Vec<u16> = (0..3).map(connect_and_close).collect();
    let flushed = wait_until(SOON, || lines_of(&log, &after));
    assert!(
        flushed,
        "the later lines never reached the new {}",
        log.display()
    );
    assert!(
        lines_of(&rotated, &before),
        "the rotated file lost its lines"
    );
    let new_text = fs::read_to_string(&log).expect("the new log");
    assert_eq!(new_text.lines().count(), after.len(), "{new_text}");
    assert_running(&mut proxy, "after SIGUSR1");
    stop_cleanly(proxy);
}

// A connection cut by the end of a graceful stop before its relay began is
// logged with the phase it was in: here `KC`, still connecting to a backend
// that never answers (HAProxy's K codes; a cut relay is `KD`).
#[test]
fn a_connection_cut_while_connecting_is_logged_kc() {
    let (hole, _fillers) = unanswering_backend();
    let backend = hole.local_addr().expect("the backend's address");
    let mut proxy = start_proxy(
        Mode::Epoll1,
        &[backend],
        &[
            "--grace",
            "500ms",
            "--connect-timeout",
            "30s",
            "--retries",
            "0",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin_line = expect_log(&proxy, "admin listening on ");
    let admin = child::listening_addr(&admin_line).expect("the admin address");
    let mut stream = client(proxy.addr()).expect("connect");
    stream.write_all(b"hello\n").expect("send");
    // Counted as active once the proxy has it (and is connecting for it).
    let active = wait_until(SOON, || {
        metrics_text(admin).contains("proxy_frontend_active_connections{frontend=\"default\"} 1")
    });
    assert!(
        active,
        "the connection never showed as active; stderr:\n{}",
        said(&proxy)
    );
    proxy.signal(Signal::SIGTERM).expect("SIGTERM");
    expect_exit_0(
        &mut proxy,
        Duration::from_millis(500) + SOON,
        "after the grace",
    );
    let port = stream.local_addr().expect("local address").port();
    let line = expect_log(&proxy, &format!("127.0.0.1:{port} "));
    assert!(
        line.contains(" KC "),
        "not logged as cut while connecting: {line:?}"
    );
    set_timeouts(&stream, SOON);
    let mut buf = [0u8; 16];
    assert_eq!(describe(&stream.read(&mut buf)), "reset");
}

/// The admin endpoint's /metrics, or nothing if it cannot be read.
fn metrics_text(admin: SocketAddr) -> String {
    let Ok(mut stream) = TcpStream::connect_timeout(&admin, SOON) else {
        return String::new();
    };
    set_timeouts(&stream, SOON);
    if stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .is_err()
    {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

// SIGQUIT dumps the state of every frontend and backend to the
// log, as HAProxy's does: a line for the process, one per frontend with its
// counters, one per backend with its health; the proxy keeps serving, and
// SIGTERM then stops it with status 0.
#[test]
fn sigquit_dumps_every_frontend_and_backend_and_keeps_serving() {
    let echo = fixture(2, FixtureMode::Echo);
    let reply = fixture(1, FixtureMode::Reply);
    let text = format!(
        "{}{}",
        frontend("web", "127.0.0.1:0", echo.addrs()),
        frontend("api", "127.0.0.1:0", reply.addrs())
    );
    let config = ConfigFile::new("sigquit", &text);
    let mut proxy = start_with_config(&config, &["--grace", "1s"]);
    let web = proxy.frontend_addr("web").expect("frontend web");
    let api = proxy.frontend_addr("api").expect("frontend api");
    let round_trip = |n: usize| {
        let mut stream = client(web).expect("connect to web");
        echo_line(&mut stream, &format!("line {n}")).expect("echoed");
        stream.shutdown(Shutdown::Write).expect("FIN");
        assert_eq!(read_all(&stream).expect("to EOF"), b"");
    };
    for n in 0..4 {
        round_trip(n);
    }
    // Their access-log lines are written just before their places are
    // given back, in the same step: once the four are there, none counts
    // as open any more (a client sees its EOF a little before that).
    let logged = wait_until(SOON, || count_log(&proxy, " web web/") >= 4);
    assert!(logged, "four access-log lines; stderr:\n{}", said(&proxy));
    // One connection open on web while the state is dumped.
    let mut open = client(web).expect("connect to web");
    echo_line(&mut open, "held").expect("echoed");

    proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
    expect_log(&proxy, "SIGQUIT: end of state");
    let dump: Vec<String> = proxy
        .log()
        .into_iter()
        .filter(|l| l.contains("SIGQUIT: "))
        .collect();
    let find = |needle: &str| {
        dump.iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in the dump:\n{}", dump.join("\n")))
            .clone()
    };
    let state = find("SIGQUIT: state: ");
    assert!(
        state.contains("1 open of global maxconn")
            && state.contains("2 frontends, 2 workers, ")
            && state.contains(" splice pipes open, running"),
        "{state}"
    );
    let web_line = find(&format!(
        "SIGQUIT: frontend web on {web} (roundrobin): 1 open"
    ));
    assert!(web_line.contains(", 5 accepted, "), "{web_line}");
    find(&format!(
        "SIGQUIT: frontend api on {api} (roundrobin): 0 open"
    ));
    for addr in echo.addrs() {
        let line = find(&format!("SIGQUIT: backend web/{addr}: UP, "));
        assert!(line.contains("not checked"), "{line}");
    }
    find(&format!("SIGQUIT: backend api/{}: UP, ", reply.addrs()[0]));
    // 1 + 2 frontends + 3 backends + the end.
    assert_eq!(dump.len(), 7, "{}", dump.join("\n"));

    // Still serving: the open connection and new ones.
    assert_running(&mut proxy, "after SIGQUIT");
    echo_line(&mut open, "after the dump").expect("the open connection goes on");
    round_trip(5);
    drop(open);
    stop_cleanly(proxy);
}

// A reload whose global maxconn the descriptor limit cannot
// honour is refused with the arithmetic, and the running configuration
// (and its maxconn) stays.
#[test]
fn a_reload_over_the_descriptor_budget_is_refused() {
    let echo = fixture(1, FixtureMode::Echo);
    let config = ConfigFile::new(
        "over-budget",
        &format!(
            "global\n    maxconn 10\n{}",
            frontend("web", "127.0.0.1:0", echo.addrs())
        ),
    );
    let mut proxy = start_with_config(&config, &["--grace", "1s"]);
    let web = proxy.frontend_addr("web").expect("frontend web");
    expect_log(&proxy, "global maxconn 10 fits");
    // The proxy's limit is its hard one (it raised the soft one at startup);
    // a maxconn of as many needs twice that.
    let (_, hard) = runtime::fd_limit::nofile_limits().expect("RLIMIT_NOFILE");
    let too_many = u32::try_from(hard)
        .unwrap_or(u32::MAX / 2)
        .min(u32::MAX / 2);
    config.write(&format!(
        "global\n    maxconn {too_many}\n{}",
        frontend("web", "127.0.0.1:0", echo.addrs())
    ));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let refused = expect_log(&proxy, "the running configuration stays");
    assert!(
        refused.contains("reload: ")
            && refused.contains("descriptors + ")
            && refused.contains("reserved, but RLIMIT_NOFILE is ")
            && refused.contains("lower maxconn to "),
        "{refused}"
    );
    assert_running(&mut proxy, "after the refused reload");
    let mut stream = client(web).expect("connect");
    echo_line(&mut stream, "still the old configuration").expect("echoed");
    drop(stream);
    stop_cleanly(proxy);
}

// A global maxconn the descriptor limit cannot honour is an error
// at --check-config time and at startup (nothing started), with the
// arithmetic; under `ulimit -n 256` the largest that fits is said, and runs.
#[test]
fn a_global_maxconn_over_the_descriptor_budget_is_refused_with_the_arithmetic() {
    let conf = |maxconn: u32| {
        format!(
            "global\n    maxconn {maxconn}\n    workers 1\n{}",
            frontend(
                "web",
                "127.0.0.1:0",
                &["127.0.0.1:9".parse().expect("addr")]
            )
        )
    };
    let config = ConfigFile::new("budget-check", &conf(5000));
    let path = config.path().display().to_string();
    let exe = proxy_exe().to_str().expect("a UTF-8 path");
    let under_256 = |args: &str| {
        child::Spawn::new("proxy", "/bin/sh")
            .args([
                "-c".to_string(),
                format!("ulimit -n 256 && exec \"$0\" {args}"),
                exe.to_string(),
            ])
            .stdout(child::Capture::All)
            .run(SOON)
            .expect("run the proxy")
    };
    let checked = under_256(&format!("--check-config {path}"));
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let message = checked.stderr.join("\n");
    assert!(
        message.contains(&format!(
            "{path}: global maxconn 5,000 needs 10,000 descriptors + "
        )) && message.contains("reserved, but RLIMIT_NOFILE is 256 (hard 256): lower maxconn to ")
            && message.contains("or raise the limit (ulimit -n / LimitNOFILE=)"),
        "{message}"
    );
    // The number it offers is one that passes.
    let offered: u32 = message
        .split("lower maxconn to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no number offered: {message}"));
    assert!(offered > 0 && offered < 128, "{offered}");

    let started = under_256(&format!("--config {path}"));
    assert_eq!(started.status.code(), Some(2), "{started:?}");
    let said = started.stderr.join("\n");
    assert!(
        said.contains("global maxconn 5,000 needs") && said.contains("nothing started"),
        "{said}"
    );

    config.write(&conf(offered));
    let checked = under_256(&format!("--check-config {path}"));
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
    // And the proxy started on it, from the same shell, agrees.
    let args: Vec<String> = vec![
        "-c".into(),
        "ulimit -n 256 && exec \"$0\" \"$@\"".into(),
        exe.into(),
        "--config".into(),
        path.clone(),
    ];
    let proxy = child::proxy("/bin/sh", &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy on maxconn {offered}: {e}"));
    expect_log(&proxy, &format!("global maxconn {offered} fits"));
    stop_cleanly(proxy);
    config.write(&conf(offered + 1));
    let checked = under_256(&format!("--check-config {path}"));
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
}

// Clients refused after they had gone (here: closed before
// sending the PROXY header an `accept-proxy` frontend waits for) are
// counted and said together, at most one line a second with the count,
// not a warning each; each still has its access-log line.
#[test]
fn clients_refused_after_they_left_are_counted_and_logged_once_a_second() {
    const GONE: usize = 30;
    let echo = fixture(1, FixtureMode::Echo);
    let text = format!(
        "{}    accept-proxy\n",
        frontend("web", "127.0.0.1:0", echo.addrs())
    );
    let config = ConfigFile::new("gone", &text);
    let args: Vec<String> = [
        "--config",
        &config.path().display().to_string(),
        "--workers",
        "1",
        "--admin",
        "127.0.0.1:0",
        "--grace",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let proxy = child::proxy(proxy_exe(), &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"));
    let web = proxy.frontend_addr("web").expect("frontend web");
    let admin_line = expect_log(&proxy, "admin listening on ");
    let admin = child::listening_addr(&admin_line).expect("the admin address");
    let mut ports = Vec::new();
    for _ in 0..GONE {
        let stream = client(web).expect("connect");
        ports.push(stream.local_addr().expect("local address").port());
        drop(stream); // gone before saying anything
    }
    let counted = wait_until(SOON, || {
        metrics_text(admin).contains(&format!(
            "proxy_frontend_clients_gone_total{{frontend=\"web\"}} {GONE}"
        ))
    });
    assert!(counted, "not counted; stderr:\n{}", said(&proxy));
    // The first is said at once, the others together once its second is
    // over: two lines, whose counts add up.
    let line = "refused after they had gone";
    let said_all = wait_until(Duration::from_secs(3), || {
        let counts: usize = proxy
            .log()
            .iter()
            .filter(|l| l.contains(line))
            .filter_map(|l| {
                l.split("] ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .sum();
        counts == GONE
    });
    let lines: Vec<String> = proxy
        .log()
        .into_iter()
        .filter(|l| l.contains(line))
        .collect();
    assert!(said_all, "the counts do not add up to {GONE}: {lines:#?}");
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(
        count_log(&proxy, "resetting the client"),
        0,
        "a warning per client; stderr:\n{}",
        said(&proxy)
    );
    // Each has its access-log line all the same (`CR`: the client closed
    // before its PROXY header was complete).
    let logged = wait_until(SOON, || {
        ports.iter().all(|port| {
            proxy
                .log()
                .iter()
                .any(|l| l.starts_with(&format!("127.0.0.1:{port} ")) && l.contains(" CR "))
        })
    });
    assert!(
        logged,
        "access-log lines missing; stderr:\n{}",
        said(&proxy)
    );
    stop_cleanly(proxy);
}
