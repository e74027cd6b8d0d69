//! End to end, traffic management: the real proxy binary run from
//! configuration files (`proxy --config FILE`), real backends (the fixture
//! as child processes, so one can be killed, or small std-thread servers
//! that count and hold connections), real clients, loopback only.
//!
//! | test | what it shows |
//! |---|---|
//! | `a_killed_backend_costs_no_request_...` | checks + retries: zero failures; DOWN within fall x inter, UP within rise x inter |
//! | `a_blackholed_backend_...` | a connect that hangs ends at `timeout connect`, then another backend serves |
//! | `timed_out_connects_...` | passive checks: failed client connects take a backend down before any check does |
//! | `leastconn_...` | a new connection goes to the backend with fewer open ones, where round-robin would not |
//! | `weighted_round_robin_...` | weights 5/1/1: exactly 50/10/10 over 70, in nginx's smooth order |
//! | `a_backup_...` | a backup serves only while every normal backend is down |
//! | `weight_0_...` | a drained backend gets nothing, under every algorithm |
//! | `frontend_maxconn_...`, `global_maxconn_...` | 50 clients, never more than 10 at the backend, all served; the others wait in the backlog, never reset |
//! | `backend_maxconn_...` | the server queue: peak 2, all served; or reset after `timeout queue` |
//! | `two_frontends_...` | one file, two listeners, each with its own pool |
//! | `a_bad_config_...`, `--config` with `--listen` | exit status 2, `file:line:col:` errors, nothing listens |
//! | `source_...` | the same client address keeps its backend; removing one backend moves (nearly) only its clients |
//!
//! Each test writes its file to a directory of its own (removed once the
//! proxy has read it), with every frontend on port 0 of a loopback
//! address: the proxy announces the real port (`frontend NAME listening on
//! ADDR`), and the test reads it from the log. The config parser rejects
//! two frontends with the same `listen`, port 0 included, so several
//! frontends in one file listen on 127.0.0.1, 127.0.0.2, ... (all of
//! 127.0.0.0/8 is loopback on Linux).
//!
//! Counts that depend on one balancer use `--workers 1` (each worker has
//! its own); limits are global, and those tests use `--workers 2` too.
//! Every wait has a deadline; the bounds on *when* something happens are
//! generous (a health change within `fall x inter + 2 s`), and no test
//! asserts how fast anything is. Every child process and backend is
//! stopped by its owner's `Drop`, so a failing test leaves nothing behind.

mod common;

use std::io::{self, ErrorKind, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions, reply_line};
use tools::process::child::{self, ChildProcess, Spawn};

use common::*;

/// Added to every "within fall x inter" bound: thread start-up, a loaded
/// CI machine, the log's trip through a pipe.
const SLACK: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// The proxy, from a configuration file
// ---------------------------------------------------------------------------

/// A directory of its own under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("e2e-traffic-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write a config file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `proxy --config FILE --workers N` with `config` as the file. The
/// proxy reads the file before it listens, so the file is gone by the time
/// this returns.
fn start_lb(config: &str, workers: usize) -> ChildProcess {
    let dir = TempDir::new("lb");
    let path = dir.write("lb.conf", config);
    let args = [
        "--config".to_string(),
        path.display().to_string(),
        "--workers".to_string(),
        workers.to_string(),
    ];
    child::proxy(proxy_exe(), &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}\nconfig:\n{config}"))
}

/// Where frontend `name` listens.
fn frontend(proxy: &ChildProcess, name: &str) -> SocketAddr {
    proxy
        .frontend_addr(name)
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", log(proxy)))
}

/// One `backend` line per address, each followed by `params`.
fn backend_lines(addrs: &[SocketAddr], params: &str) -> String {
    addrs
        .iter()
        .map(|addr| format!("    backend {addr} {params}\n"))
        .collect()
}

fn log(proxy: &ChildProcess) -> String {
    proxy.log().join("\n")
}

/// Waits for a log line containing `needle` until `deadline`; fails the
/// test with `what` and the whole log if it does not come.
fn expect_log(proxy: &ChildProcess, needle: &str, deadline: Instant, what: &str) -> String {
    let left = deadline.saturating_duration_since(Instant::now());
    proxy.wait_for_log(needle, left).unwrap_or_else(|e| {
        panic!(
            "{what}: no {needle:?} in the log in time ({e}); log:\n{}",
            log(proxy)
        )
    })
}

/// The reply backends of a test: `count` ports of one in-process fixture.
fn reply_fixture(count: usize) -> Fixture {
    Fixture::start(count, FixtureOptions::default()).expect("start the fixture")
}

/// A `reply` backend of its own process, so that it can be killed alone.
fn reply_process() -> ChildProcess {
    start_backend(1, &["--mode", "reply"])
}

/// The ports of `addrs`, sorted.
fn ports(addrs: &[SocketAddr]) -> Vec<u16> {
    let mut ports: Vec<u16> = addrs.iter().map(SocketAddr::port).collect();
    ports.sort_unstable();
    ports
}

/// Answers like the fixture's `reply` mode (`port N: <line>`), for a
/// std-thread backend.
fn reply_in_kind(mut stream: TcpStream) -> io::Result<()> {
    let request = read_line(&mut stream)?;
    let port = stream.local_addr()?.port();
    stream.write_all(&reply_line(port, request.trim_ascii_end()))?;
    stream.shutdown(Shutdown::Write)
}

// ---------------------------------------------------------------------------
// 1. A backend killed mid-run
// ---------------------------------------------------------------------------

/// One request's outcome, and when it ended.
#[derive(Debug, Clone)]
struct Served {
    at: Instant,
    result: Result<u16, String>,
}

type Errand = Box<dyn FnOnce() + Send>;

/// A client making new connections one after the other, one request each,
/// on a thread of its own, until [`ClientLoop::finish`] (or drop). Every
/// outcome is kept.
struct ClientLoop {
    results: Arc<Mutex<Vec<Served>>>,
    errands: Option<mpsc::Sender<Errand>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClientLoop {
    /// Starts asking `proxy`, pausing `pace` between requests (a steady
    /// stream, not a flood: the test is about failures, not speed).
    fn start(proxy: SocketAddr, pace: Duration) -> ClientLoop {
        let results = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (errands, inbox) = mpsc::channel::<Errand>();
        let thread = {
            let (results, stop) = (results.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // Between two requests: none is in flight.
                    while let Ok(errand) = inbox.try_recv() {
                        errand();
                    }
                    let result = ask_backend(proxy);
                    let served = Served {
                        at: Instant::now(),
                        result,
                    };
                    results
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(served);
                    thread::sleep(pace);
                }
            })
        };
        ClientLoop {
            results,
            errands: Some(errands),
            stop,
            thread: Some(thread),
        }
    }

    /// Runs `errand` on the client's thread between two requests, so that
    /// no request is in flight while it runs; returns what it returned.
    fn between_requests<T: Send + 'static>(
        &self,
        errand: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = mpsc::channel();
        let errands = self.errands.as_ref().expect("the loop is running");
        errands
            .send(Box::new(move || {
                let _ = tx.send(errand());
            }))
            .expect("the client loop is running");
        rx.recv_timeout(IO_TIMEOUT)
            .expect("the client loop ran the errand")
    }

    fn results(&self) -> Vec<Served> {
        self.results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits (at most 10 s) until the outcomes so far satisfy `condition`.
    fn wait_for(&self, what: &str, condition: impl Fn(&[Served]) -> bool) {
        let held = wait_until(Duration::from_secs(10), || condition(&self.results()));
        assert!(
            held,
            "not within 10 s: {what}; {:?}",
            summary(&self.results())
        );
    }

    /// Stops the loop and returns every outcome.
    fn finish(mut self) -> Vec<Served> {
        self.halt();
        self.results()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.errands = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ClientLoop {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Requests per port, and the failures, for messages.
fn summary(results: &[Served]) -> (Vec<(u16, usize)>, Vec<String>) {
    let mut per_port: Vec<(u16, usize)> = Vec::new();
    let mut failures = Vec::new();
    for served in results {
        match &served.result {
            Ok(port) => match per_port.iter_mut().find(|(p, _)| p == port) {
                Some((_, n)) => *n += 1,
                None => per_port.push((*port, 1)),
            },
            Err(e) => failures.push(e.clone()),
        }
    }
    (per_port, failures)
}

/// Restarts a `reply` backend on `port`, retrying for a few seconds in case
/// the port is briefly taken (a connection given it as its local port).
fn restart_on(port: u16) -> ChildProcess {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match try_start_backend_on(&[port], &["--mode", "reply"]) {
            Ok(backend) => return backend,
            Err(e) if Instant::now() >= deadline => panic!("restart on port {port}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A backend killed mid-run: with active and passive checks and
/// retries, a stream of new client connections sees zero failures once
/// retries are on, and the dead backend is marked down within fall x
/// interval; it comes back after rise x interval once restarted.
#[test]
fn a_killed_backend_costs_no_request_and_comes_back_when_restarted() {
    const INTER: Duration = Duration::from_millis(200);
    const FALL: u32 = 2;
    const RISE: u32 = 2;
    let mut backends: Vec<ChildProcess> = (0..3).map(|_| reply_process()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addrs()[0]).collect();
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    retries 3\n{}",
        backend_lines(&addrs, "check inter 200ms fall 2 rise 2")
    );
    let proxy = start_lb(&config, 2);
    let clients = ClientLoop::start(frontend(&proxy, "web"), Duration::from_millis(5));
    clients.wait_for("30 replies from all three backends", |r| {
        let (per_port, _) = summary(r);
        r.len() >= 30 && per_port.len() == 3
    });

    // Killed between two requests: a request in flight on the victim would
    // be lost whatever the proxy does (its bytes were sent); what retries
    // promise is that no *new* connection fails.
    let victim = backends.remove(1);
    let victim_addr = addrs[1];
    let killed_at = clients.between_requests(move || {
        victim.kill();
        Instant::now()
    });
    let down = format!("backend {victim_addr} is DOWN");
    let line = expect_log(&proxy, &down, killed_at + INTER * FALL + SLACK, "killed");
    let down_seen = Instant::now();
    eprintln!("DOWN {:?} after the kill: {line}", killed_at.elapsed());

    // The stream goes on over the other two.
    clients.wait_for("30 more replies after the DOWN", |r| {
        r.iter().filter(|s| s.at > down_seen).count() >= 30
    });

    // Back on the same port: UP after `rise` good checks, then served again.
    let restarted = restart_on(victim_addr.port());
    let restarted_at = Instant::now();
    let up = format!("backend {victim_addr} is UP");
    let line = expect_log(
        &proxy,
        &up,
        restarted_at + INTER * RISE + SLACK,
        "restarted",
    );
    let up_seen = Instant::now();
    eprintln!("UP {:?} after the restart: {line}", restarted_at.elapsed());
    clients.wait_for("a reply from the restarted backend", |r| {
        r.iter()
            .any(|s| s.at > up_seen && s.result == Ok(victim_addr.port()))
    });

    let results = clients.finish();
    let (per_port, failures) = summary(&results);
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {failures:?}\nlog:\n{}",
        failures.len(),
        results.len(),
        log(&proxy)
    );
    eprintln!("{} requests, none failed: {per_port:?}", results.len());
    drop(restarted);
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 2. A blackholed backend
// ---------------------------------------------------------------------------

/// A request through `proxy` that should end in a reset: the error kind
/// and how long it took.
fn expect_reset(proxy: SocketAddr) -> (io::Result<Vec<u8>>, Duration) {
    let begun = Instant::now();
    let ended = try_connect(proxy).and_then(|mut stream| {
        // Sooner than IO_TIMEOUT: a test that fails should fail soon.
        set_timeouts(&stream, Duration::from_secs(10));
        // The reset may already be there: a failed write is the reset too.
        stream.write_all(b"hello\n")?;
        read_all(&stream)
    });
    (ended, begun.elapsed())
}

fn is_reset<T>(result: &io::Result<T>) -> bool {
    matches!(result, Err(e) if e.kind() == ErrorKind::ConnectionReset)
}

/// A blackholed backend (a listener whose accept queue is full,
/// so connects hang): connect timeout, then retry elsewhere.
#[test]
fn a_blackholed_backend_costs_a_connect_timeout_then_another_backend_serves() {
    let (blackhole, _fillers) = unanswering_backend();
    let hole = blackhole.local_addr().expect("addr");
    let good = reply_fixture(1);
    let good_port = good.addrs()[0].port();
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    timeout connect 300ms\n    \
         backend {hole}\n    backend {}\n",
        good.addrs()[0]
    );
    let proxy = start_lb(&config, 1);
    let addr = frontend(&proxy, "web");
    // Round-robin sends about every other client to the blackhole first
    // (the very first one for sure: ties go to the first backend).
    let mut waited = Vec::new();
    for n in 0..6 {
        let begun = Instant::now();
        let port = ask_backend(addr).unwrap_or_else(|e| panic!("client {n}: {e}\n{}", log(&proxy)));
        assert_eq!(port, good_port, "client {n}");
        waited.push(begun.elapsed());
    }
    assert!(
        waited[0] >= Duration::from_millis(300),
        "the first client went to the blackhole first, yet was served in {:?}",
        waited[0]
    );
    let retried = format!(
        "connect to {hole} failed: no answer within 300ms; retrying on {}",
        good.addrs()[0]
    );
    expect_log(&proxy, &retried, Instant::now() + SLACK, "the retry");
    stop_cleanly(proxy);
}

/// Passive checks: consecutive failed connects from real traffic
/// also count toward `fall`, so a dead backend leaves the rotation before
/// the next active check. The blackhole's checks are 5 s apart; two
/// clients' timed-out connects take it down well before, and from then on
/// no client tries it.
#[test]
fn timed_out_connects_take_a_blackholed_backend_down_before_its_first_check_ends() {
    let (blackhole, _fillers) = unanswering_backend();
    let hole = blackhole.local_addr().expect("addr");
    let good = reply_fixture(1);
    let good_port = good.addrs()[0].port();
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    timeout connect 300ms\n    \
         backend {hole} check inter 5s fall 2\n    backend {}\n",
        good.addrs()[0]
    );
    let proxy = start_lb(&config, 1);
    let addr = frontend(&proxy, "web");
    let down = format!("backend {hole} is DOWN");
    let retried = format!("connect to {hole} failed");
    // Round-robin sends every other client to the blackhole first (clients
    // 0 and 2): two timed-out connects, `fall`, within four clients.
    for n in 0..4 {
        assert_eq!(ask_backend(addr), Ok(good_port), "client {n}");
    }
    let line = expect_log(
        &proxy,
        &down,
        Instant::now() + SLACK,
        "two timed-out connects",
    );
    assert!(
        line.contains("(last: traffic: no answer within 300ms)"),
        "taken down by traffic, not by a check: {line}"
    );
    let tries = |proxy: &ChildProcess| {
        let lines = proxy.log();
        lines.iter().filter(|l| l.contains(&retried)).count()
    };
    // Exactly `fall` clients tried it (their retry lines follow the DOWN
    // line through the pipe), and no one after the DOWN.
    let fell = wait_until(SLACK, || tries(&proxy) >= 2);
    assert!(fell, "two retry lines expected\nlog:\n{}", log(&proxy));
    for n in 0..6 {
        let served = ask_backend(addr);
        assert_eq!(served, Ok(good_port), "client {n} after the DOWN");
    }
    assert_eq!(
        tries(&proxy),
        2,
        "clients tried the blackhole after it was DOWN\nlog:\n{}",
        log(&proxy)
    );
    stop_cleanly(proxy);
}

/// With `retries 0`, the client whose pick was the blackhole is reset once
/// the connect timeout is over; the next one is served.
#[test]
fn a_blackholed_backend_without_retries_resets_its_client_after_the_connect_timeout() {
    let (blackhole, _fillers) = unanswering_backend();
    let hole = blackhole.local_addr().expect("addr");
    let good = reply_fixture(1);
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    timeout connect 300ms\n    retries 0\n    \
         backend {hole}\n    backend {}\n",
        good.addrs()[0]
    );
    let proxy = start_lb(&config, 1);
    let addr = frontend(&proxy, "web");
    // One worker, round-robin: the first client goes to the first backend.
    let (ended, waited) = expect_reset(addr);
    assert!(is_reset(&ended), "expected a reset, got {ended:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(10),
        "reset after {waited:?}, expected after the 300ms connect timeout"
    );
    assert_eq!(which_backend(addr), good.addrs()[0].port());
    let refused = format!("connect to {hole} failed: no answer within 300ms");
    let line = expect_log(&proxy, &refused, Instant::now() + SLACK, "the refusal");
    assert!(line.contains("resetting the client"), "{line}");
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 3. leastconn
// ---------------------------------------------------------------------------

/// A `banner` fixture that says `name` first: a held connection knows its
/// backend.
fn banner_fixture(name: &str) -> Fixture {
    Fixture::start(
        1,
        FixtureOptions {
            mode: FixtureMode::Banner,
            banner: name.to_string(),
            ..FixtureOptions::default()
        },
    )
    .expect("start a banner fixture")
}

/// Opens a connection through `proxy` and keeps it; the banner says which
/// backend it reached. Once the banner is here, the proxy has counted the
/// connection (it counts before it relays).
fn open_held(proxy: SocketAddr) -> (String, TcpStream) {
    let mut stream = connect(proxy);
    let banner = read_line(&mut stream).expect("the banner");
    let banner = String::from_utf8_lossy(&banner).trim_end().to_string();
    (banner, stream)
}

/// Closes a held connection cleanly: our FIN, then the backend's. The
/// proxy uncounts the connection in the same step in which it passes the
/// backend's FIN on, so once we read that EOF the next pick sees it gone.
fn close_held(stream: TcpStream) {
    stream.shutdown(Shutdown::Write).expect("FIN");
    let rest = read_all(&stream).expect("a clean end");
    assert!(rest.is_empty(), "unexpected bytes {rest:?}");
}

/// Leastconn sends a new connection to the backend with fewer
/// open connections. The sequence is one where round-robin answers
/// differently.
#[test]
fn leastconn_sends_new_connections_to_the_backend_with_fewer_open_ones() {
    let (a, b) = (banner_fixture("A"), banner_fixture("B"));
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    balance leastconn\n    backend {}\n    backend {}\n",
        a.addrs()[0],
        b.addrs()[0]
    );
    // One worker: one balancer, one count.
    let proxy = start_lb(&config, 1);
    let addr = frontend(&proxy, "web");
    // Four connections, all held: with equal counts the ties rotate, A B A B.
    let held: Vec<(String, TcpStream)> = (0..4).map(|_| open_held(addr)).collect();
    let order: Vec<&str> = held.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(order, ["A", "B", "A", "B"], "ties must rotate");
    // Close both of A's: A has 0 open, B has 2.
    let (on_a, on_b): (Vec<_>, Vec<_>) = held.into_iter().partition(|(name, _)| name == "A");
    for (_, stream) in on_a {
        close_held(stream);
    }
    // Round-robin would now say A then B; leastconn says A, and A again
    // (1 open against 2), then B on the tie (2 against 2), the scan
    // starting after the last winner.
    let next: Vec<(String, TcpStream)> = (0..3).map(|_| open_held(addr)).collect();
    let order: Vec<&str> = next.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        order,
        ["A", "A", "B"],
        "with A at 0 and B at 2 open connections\nlog:\n{}",
        log(&proxy)
    );
    drop((on_b, next));
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 4. Smooth weighted round-robin
// ---------------------------------------------------------------------------

/// Weighted round-robin gives exactly the weight ratio over a
/// cycle, smoothly (the table in balance.rs's docs: a a b a c a a).
#[test]
fn weighted_round_robin_gives_the_exact_ratio_in_the_smooth_order() {
    let fixture = reply_fixture(3);
    let [a, b, c] = [0, 1, 2].map(|i| fixture.addrs()[i]);
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    backend {a} weight 5\n    backend {b} weight 1\n    \
         backend {c} weight 1\n"
    );
    let proxy = start_lb(&config, 1);
    let addr = frontend(&proxy, "web");
    let name = |port: u16| match port {
        p if p == a.port() => 'a',
        p if p == b.port() => 'b',
        p if p == c.port() => 'c',
        p => panic!("a reply from port {p}, not one of ours"),
    };
    let sequence: String = (0..70).map(|_| name(which_backend(addr))).collect();
    let count = |x: char| sequence.chars().filter(|&y| y == x).count();
    assert_eq!(
        (count('a'), count('b'), count('c')),
        (50, 10, 10),
        "{sequence}"
    );
    assert_eq!(&sequence[..7], "aabacaa", "the first cycle");
    assert_eq!(sequence, "aabacaa".repeat(10), "every cycle alike");
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 5. Backup, 6. weight 0
// ---------------------------------------------------------------------------

/// A `backup` backend used only when every normal one is down.
#[test]
fn a_backup_serves_only_while_every_normal_backend_is_down() {
    const INTER: Duration = Duration::from_millis(100);
    const FALL: u32 = 2;
    const RISE: u32 = 2;
    let normal = [ClosedPort::new(), ClosedPort::new()];
    let spare = reply_fixture(1);
    let spare_port = spare.addrs()[0].port();
    let normal_addrs: Vec<SocketAddr> = normal.iter().map(ClosedPort::addr).collect();
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n{}    backend {} backup\n",
        backend_lines(&normal_addrs, "check inter 100ms fall 2 rise 2"),
        spare.addrs()[0]
    );
    let started = Instant::now();
    let proxy = start_lb(&config, 2);
    let addr = frontend(&proxy, "web");
    for normal in &normal_addrs {
        let down = format!("backend {normal} is DOWN");
        expect_log(
            &proxy,
            &down,
            started + INTER * FALL + SLACK,
            "a closed port",
        );
    }
    for n in 0..10 {
        assert_eq!(
            which_backend(addr),
            spare_port,
            "request {n}, every normal one down"
        );
    }

    // One normal backend comes up: the backup is out of rotation again.
    let [first, _second] = normal;
    let revived = StdBackend::serve(first.listen(), reply_in_kind);
    let listening = Instant::now();
    let up = format!("backend {} is UP", normal_addrs[0]);
    expect_log(
        &proxy,
        &up,
        listening + INTER * RISE + SLACK,
        "listening again",
    );
    for n in 0..10 {
        assert_eq!(
            which_backend(addr),
            revived.addr().port(),
            "request {n}, a normal backend up\nlog:\n{}",
            log(&proxy)
        );
    }
    stop_cleanly(proxy);
}

/// `weight 0` drains a backend (no new connections), under each
/// algorithm, one frontend each.
#[test]
fn weight_0_gets_no_new_connection_under_any_algorithm() {
    let fixture = reply_fixture(2);
    let [live, drained] = [fixture.addrs()[0], fixture.addrs()[1]];
    let algorithms = ["roundrobin", "leastconn", "random", "source"];
    let config: String = algorithms
        .iter()
        .zip(1..)
        .map(|(algorithm, n)| {
            format!(
                "frontend {algorithm}\n    listen 127.0.0.{n}:0\n    balance {algorithm}\n    \
                 backend {drained} weight 0\n    backend {live}\n"
            )
        })
        .collect();
    let proxy = start_lb(&config, 2);
    for algorithm in algorithms {
        let addr = frontend(&proxy, algorithm);
        for n in 0..10 {
            assert_eq!(
                which_backend(addr),
                live.port(),
                "{algorithm}: request {n} went to the drained backend"
            );
        }
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 7. maxconn, 8. a backend's maxconn and the queue
// ---------------------------------------------------------------------------

/// Connections a [`counting_backend`] holds now, and the most it ever held.
#[derive(Debug, Default)]
struct Counts {
    open: usize,
    peak: usize,
}

#[derive(Debug, Default)]
struct Counter {
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Counter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn peak(&self) -> usize {
        self.lock().peak
    }
}

/// One connection counted by a [`Counter`]; uncounted when dropped.
struct Held(Arc<Counter>);

impl Held {
    fn new(counter: &Arc<Counter>) -> Held {
        let mut counts = counter.lock();
        counts.open += 1;
        counts.peak = counts.peak.max(counts.open);
        counter.changed.notify_all();
        Held(counter.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.lock().open -= 1;
    }
}

/// How long a [`counting_backend`] holds each connection, usually.
const HOLD: Duration = Duration::from_millis(100);

/// A backend that counts the connections it holds at once and keeps the
/// peak. Each connection is held until the peak has reached `target` (at
/// most 2 s, so that a peak that never comes only slows the test), then
/// `hold` more, then answered like `reply`. So the limit is surely
/// reached (the test means something), and a proxy that let more through
/// would have them all at the backend at once.
///
/// The count is exact, not approximate, against the proxy's: a connection
/// is counted from its accept (the proxy took its place under maxconn
/// before connecting) until just *before* the reply is written (the proxy
/// holds the place until the reply and the FIN have gone through). So the
/// backend's count never runs ahead of the proxy's: a peak above the limit
/// is the proxy's doing, never a lag of ours.
fn counting_backend(target: usize, hold: Duration) -> (StdBackend, Arc<Counter>) {
    let counter = Arc::new(Counter::default());
    let count = counter.clone();
    let backend = StdBackend::start(move |mut stream| {
        let held = Held::new(&count);
        let request = read_line(&mut stream)?;
        {
            let counts = count.lock();
            let gather = Duration::from_secs(2);
            let _ = count
                .changed
                .wait_timeout_while(counts, gather, |c| c.peak < target);
        }
        thread::sleep(hold);
        drop(held);
        let port = stream.local_addr()?.port();
        stream.write_all(&reply_line(port, request.trim_ascii_end()))?;
        stream.shutdown(Shutdown::Write)
    });
    (backend, counter)
}

/// `clients` requests at once through `proxy`; the failures, if any.
fn concurrent_requests(proxy: SocketAddr, clients: usize) -> Vec<String> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|i| s.spawn(move || ask_backend(proxy).map_err(|e| format!("client {i}: {e}"))))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("a client thread").err())
            .collect()
    })
}

/// Maxconn: with maxconn 10 and 50 clients, never more than 10
/// backend connections at once, all 50 eventually served. `maxconn` is
/// given in `section` (`global` or the frontend).
fn maxconn_ten_for_fifty_clients(global: bool, workers: usize) {
    let (backend, counter) = counting_backend(10, HOLD);
    let config = if global {
        format!(
            "global\n    maxconn 10\nfrontend web\n    listen 127.0.0.1:0\n    backend {}\n",
            backend.addr()
        )
    } else {
        format!(
            "frontend web\n    listen 127.0.0.1:0\n    maxconn 10\n    backend {}\n",
            backend.addr()
        )
    };
    let proxy = start_lb(&config, workers);
    let failures = concurrent_requests(frontend(&proxy, "web"), 50);
    assert!(
        failures.is_empty(),
        "{} of 50 clients failed: {failures:?}\nlog:\n{}",
        failures.len(),
        log(&proxy)
    );
    assert_eq!(
        counter.peak(),
        10,
        "the backend's peak of concurrent connections"
    );
    stop_cleanly(proxy);
}

#[test]
fn frontend_maxconn_holds_fifty_clients_to_ten_at_the_backend_1_worker() {
    maxconn_ten_for_fifty_clients(false, 1);
}

#[test]
fn frontend_maxconn_holds_fifty_clients_to_ten_at_the_backend_2_workers() {
    maxconn_ten_for_fifty_clients(false, 2);
}

#[test]
fn global_maxconn_holds_fifty_clients_to_ten_at_the_backend_2_workers() {
    maxconn_ten_for_fifty_clients(true, 2);
}

/// A backend's `maxconn` with a queue long enough: clients wait their turn
/// (HAProxy's server queue) and every one is served, never more than 2 at
/// the backend, across two workers.
#[test]
fn backend_maxconn_queues_clients_and_serves_them_all() {
    let (backend, counter) = counting_backend(2, HOLD);
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    timeout queue 5s\n    backend {} maxconn 2\n",
        backend.addr()
    );
    let proxy = start_lb(&config, 2);
    let failures = concurrent_requests(frontend(&proxy, "web"), 10);
    assert!(
        failures.is_empty(),
        "{} of 10 clients failed: {failures:?}\nlog:\n{}",
        failures.len(),
        log(&proxy)
    );
    assert_eq!(
        counter.peak(),
        2,
        "the backend's peak of concurrent connections"
    );
    stop_cleanly(proxy);
}

/// Opens when told, or when dropped (so a failing test releases what it
/// holds).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }

    /// Waits until open, at most `limit`.
    fn wait(&self, limit: Duration) {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self.opened.wait_timeout_while(open, limit, |open| !*open);
    }
}

struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A backend's `maxconn` with a short queue: while both places are held,
/// the next clients wait `timeout queue`, then are reset, and the log says
/// why. The held ones are served once the backend answers.
#[test]
fn backend_maxconn_resets_clients_that_waited_the_queue_timeout() {
    let gate = Arc::new(Gate::default());
    let _release = OpenOnDrop(gate.clone());
    let accepted = Arc::new(AtomicUsize::new(0));
    let backend = {
        let (gate, accepted) = (gate.clone(), accepted.clone());
        // Holds every connection until the test opens the gate.
        StdBackend::start(move |stream| {
            accepted.fetch_add(1, Ordering::SeqCst);
            gate.wait(IO_TIMEOUT);
            reply_in_kind(stream)
        })
    };
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    timeout queue 200ms\n    backend {} maxconn 2\n",
        backend.addr()
    );
    let proxy = start_lb(&config, 2);
    let addr = frontend(&proxy, "web");
    let first_two: Vec<_> = (0..2)
        .map(|_| thread::spawn(move || ask_backend(addr)))
        .collect();
    let both_in = wait_until(Duration::from_secs(10), || {
        accepted.load(Ordering::SeqCst) == 2
    });
    assert!(
        both_in,
        "the first two never reached the backend\n{}",
        log(&proxy)
    );

    let late: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = (0..3).map(|_| s.spawn(|| expect_reset(addr))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client thread"))
            .collect()
    });
    for (ended, waited) in &late {
        assert!(is_reset(ended), "a client beyond maxconn: {ended:?}");
        assert!(
            *waited >= Duration::from_millis(200) && *waited < Duration::from_secs(10),
            "reset after {waited:?}, expected after the 200ms queue timeout"
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the backend saw a third"
    );
    expect_log(
        &proxy,
        "every backend is at its maxconn",
        Instant::now() + SLACK,
        "the refusal",
    );

    gate.open();
    for client in first_two {
        let served = client.join().expect("a client thread");
        assert_eq!(served, Ok(backend.addr().port()), "a held client");
    }
    assert_eq!(which_backend(addr), backend.addr().port(), "room again");
    stop_cleanly(proxy);
}

/// At the limit, stop accepting (the kernel backlog holds new
/// clients) and resume below it. Clients beyond a frontend's maxconn wait
/// as long as it takes: `timeout queue` is about a backend's maxconn, and
/// must not reset them. With `maxconn 1`, every client but the first waits
/// for its place through at least one whole hold of the backend, four
/// times the queue timeout.
fn frontend_maxconn_keeps_the_others_waiting(workers: usize) {
    const CLIENTS: usize = 16;
    let (backend, counter) = counting_backend(1, Duration::from_millis(200));
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    maxconn 1\n    timeout queue 50ms\n    \
         backend {}\n",
        backend.addr()
    );
    let proxy = start_lb(&config, workers);
    let failures = concurrent_requests(frontend(&proxy, "web"), CLIENTS);
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} clients, maxconn 1, failed: {failures:?}\nlog:\n{}",
        failures.len(),
        log(&proxy)
    );
    assert_eq!(
        counter.peak(),
        1,
        "the backend's peak of concurrent connections"
    );
    stop_cleanly(proxy);
}

#[test]
fn frontend_maxconn_keeps_the_others_waiting_not_reset_1_worker() {
    frontend_maxconn_keeps_the_others_waiting(1);
}

#[test]
fn frontend_maxconn_keeps_the_others_waiting_not_reset_2_workers() {
    frontend_maxconn_keeps_the_others_waiting(2);
}

// ---------------------------------------------------------------------------
// 9. Several frontends in one file
// ---------------------------------------------------------------------------

#[test]
fn two_frontends_in_one_file_each_serve_from_their_own_pool() {
    let (alpha, beta) = (reply_fixture(2), reply_fixture(2));
    let config = format!(
        "frontend alpha\n    listen 127.0.0.1:0\n{}\nfrontend beta\n    listen 127.0.0.2:0\n    \
         balance leastconn\n{}",
        backend_lines(alpha.addrs(), ""),
        backend_lines(beta.addrs(), "")
    );
    let proxy = start_lb(&config, 2);
    for (name, pool) in [("alpha", &alpha), ("beta", &beta)] {
        let addr = frontend(&proxy, name);
        let mut seen: Vec<u16> = (0..8).map(|_| which_backend(addr)).collect();
        seen.sort_unstable();
        seen.dedup();
        // Each worker rotates over the pool: 8 requests reach both.
        assert_eq!(seen, ports(pool.addrs()), "frontend {name}");
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// 10. Configuration errors at startup
// ---------------------------------------------------------------------------

/// Runs the proxy with `args` to its exit (killed after 10 s: a proxy that
/// started serving fails the test instead of hanging it); its status and
/// stderr.
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let ran = Spawn::new("proxy", proxy_exe())
        .args(args)
        .run(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("the proxy did not run to its exit: {e}"));
    (ran.status.code(), ran.stderr.join("\n"))
}

/// A bad file gets `lb.conf:12:5: ...`-style errors and exit
/// status 2, never a panic, and nothing starts: not even the frontends
/// the file describes correctly.
#[test]
fn a_bad_config_exits_with_status_2_and_every_error_before_listening() {
    let dir = TempDir::new("bad");
    let bad = dir.write(
        "bad.conf",
        "frontend good\n    listen 127.0.0.1:0\n    backend 127.0.0.1:9\n\
         frontend bad\n    listen 127.0.0.2:0\n    backend 127.0.0.1:9 wieght 5\n    balance fastest\n",
    );
    let path = bad.display().to_string();
    let (status, stderr) = run_to_exit(&["--config", &path]);
    assert_eq!(status, Some(2), "stderr:\n{stderr}");
    for expected in [
        format!("{path}:6:25: unknown option 'wieght' (did you mean 'weight'?)"),
        format!(
            "{path}:7:13: unknown balance algorithm 'fastest'; use roundrobin, leastconn, random, \
             source or first"
        ),
        format!("proxy: {path} is not valid; nothing started"),
    ] {
        assert!(
            stderr.lines().any(|l| l == expected),
            "no line {expected:?} in:\n{stderr}"
        );
    }
    assert!(!stderr.contains("listening on"), "it listened:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let (status, stderr) = run_to_exit(&["--config", "/nonexistent/lb.conf"]);
    assert_eq!(status, Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains("/nonexistent/lb.conf: cannot read the file"),
        "{stderr}"
    );
}

/// `--config` says where to listen; `--listen` as well would be ambiguous.
#[test]
fn config_with_listen_is_refused_with_status_2() {
    let dir = TempDir::new("listen");
    let good = dir.write(
        "good.conf",
        "frontend web\n    listen 127.0.0.1:0\n    backend 127.0.0.1:9\n",
    );
    let path = good.display().to_string();
    let (status, stderr) = run_to_exit(&["--config", &path, "--listen", "127.0.0.1:0"]);
    assert_eq!(status, Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains("--listen cannot be combined with --config"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "it listened:\n{stderr}");
}

// ---------------------------------------------------------------------------
// 11. balance source
// ---------------------------------------------------------------------------

/// [`which_backend`] for a client at address `from`.
fn which_backend_from(from: Ipv4Addr, proxy: SocketAddr) -> u16 {
    open_from(Some(from.into()), proxy, IO_TIMEOUT)
        .1
        .map_err(|e| format!("connect from {from}: {e}"))
        .and_then(ask_on)
        .unwrap_or_else(|e| panic!("client {from}: {e}"))
}

/// `source`: consistent hashing on the client address with a
/// Maglev lookup table: when one of N backends leaves, only about 1/N of
/// client addresses move. The table depends only on the set of backends,
/// so both workers agree.
#[test]
fn source_keeps_each_client_on_its_backend_and_moves_only_the_clients_of_a_dead_one() {
    const INTER: Duration = Duration::from_millis(200);
    const FALL: u32 = 2;
    let mut backends: Vec<ChildProcess> = (0..3).map(|_| reply_process()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addrs()[0]).collect();
    let config = format!(
        "frontend web\n    listen 127.0.0.1:0\n    balance source\n{}",
        backend_lines(&addrs, "check inter 200ms fall 2 rise 2")
    );
    let proxy = start_lb(&config, 2);
    let addr = frontend(&proxy, "web");

    let home = which_backend(addr);
    for n in 0..20 {
        assert_eq!(which_backend(addr), home, "connection {n} from 127.0.0.1");
    }

    let clients: Vec<Ipv4Addr> = (1..=50).map(|x| Ipv4Addr::new(127, 0, 0, x)).collect();
    let before: Vec<u16> = clients
        .iter()
        .map(|&c| which_backend_from(c, addr))
        .collect();
    assert_eq!(before[0], home, "127.0.0.1, bound or not");
    // 50 addresses over 3 backends: each gets some (all but certain: a
    // backend with none has odds of (2/3)^50, about 2e-9).
    let mut used = before.clone();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used, ports(&addrs), "the backends of 50 client addresses");

    let victim = backends.remove(0);
    let victim_port = addrs[0].port();
    victim.kill();
    let killed_at = Instant::now();
    let down = format!("backend {} is DOWN", addrs[0]);
    expect_log(&proxy, &down, killed_at + INTER * FALL + SLACK, "killed");

    let after: Vec<u16> = clients
        .iter()
        .map(|&c| which_backend_from(c, addr))
        .collect();
    let others: Vec<usize> = (0..clients.len())
        .filter(|&i| before[i] != victim_port)
        .collect();
    let moved: Vec<String> = others
        .iter()
        .filter(|&&i| after[i] != before[i])
        .map(|&i| format!("{}: {} -> {}", clients[i], before[i], after[i]))
        .collect();
    assert!(after.iter().all(|&p| p != victim_port));
    // Maglev promises "nearly": rebuilding the table can hand a few slots
    // of the remaining backends to each other. Measured over 2000 random
    // sets of three ports, 0.04% of these clients moved (at worst 1 of 30
    // in one set); hashing modulo the backends would move half.
    assert!(
        moved.len() * 10 <= others.len(),
        "{} of the {} clients of the other backends moved: {moved:?}",
        moved.len(),
        others.len()
    );
    eprintln!(
        "{} clients were on the dead backend, {} of the {} others moved",
        clients.len() - others.len(),
        moved.len(),
        others.len()
    );
    stop_cleanly(proxy);
}
