//! End to end: established connections moved by an upgrade to the new
//! binary, both sockets and the relay's state, so that no old process stays
//! behind for its longest connection (epoll/moving.rs, ops/upgrade/hand.rs
//! and adopt.rs).
//!
//! Long-lived streams of every kind stay open across three SIGUSR2
//! upgrades in a row, under a load of short connections: echoed both ways,
//! a reader that pauses (bytes held in the proxy when it moves), spliced
//! bulk, half-closed by the client, half-closed by the backend. Every byte
//! is checked, no stream may be reset, no short connection refused, and
//! each old process must exit while the streams still run. Then the edges:
//! a new process that vanishes mid-handover (the old one resumes every
//! connection where it stood), one without room (it refuses some, the old
//! one keeps them), five thousand connections in one move, and the proxy as
//! PID 1 of a PID namespace (as root).
//!
//! Real processes, real sockets on 127.0.0.1; the echo fixture and a small
//! backend of this file's for the half-closed streams. Every loop is bounded
//! in count and time; every process is stopped by a guard.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tools::process::child::{self, ChildProcess};

use common::*;

/// A bound on "soon": a log line, a process that takes over, an exit.
const SOON: Duration = Duration::from_secs(20);
/// How long an old process may take to exit once its connections moved:
/// far below how long the streams run, which is the point.
const GONE: Duration = Duration::from_secs(5);
/// Every proxy's grace: longer than any test, so an exit is never a cut.
const GRACE: &str = "60s";
/// Clients of the short-connection load.
const CLIENTS: usize = 16;

// ---------------------------------------------------------------------------
// A backend for the half-closed streams
// ---------------------------------------------------------------------------

/// What the half-close backend saw of a `sink` stream: bytes, all right.
type Sunk = Arc<Mutex<HashMap<u64, (u64, bool)>>>;

/// A backend of two modes, chosen by the first line a client sends:
/// `drip ID` (the client's FIN follows at once; the backend then streams
/// pattern bytes until `stop`, and closes), and `sink ID` (the backend
/// shuts its side at once, then reads the client's pattern to its end and
/// records what it got).
struct HalfCloseBackend {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    sunk: Sunk,
    /// Bytes each `drip` stream sent, by id.
    dripped: Arc<Mutex<HashMap<u64, u64>>>,
}

impl HalfCloseBackend {
    fn start() -> HalfCloseBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the backend");
        let addr = listener.local_addr().expect("its address");
        let stop = Arc::new(AtomicBool::new(false));
        let sunk: Sunk = Arc::default();
        let dripped: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
        let (s, k, d) = (stop.clone(), sunk.clone(), dripped.clone());
        thread::spawn(move || {
            for stream in listener.incoming().take(64).flatten() {
                let (s, k, d) = (s.clone(), k.clone(), d.clone());
                thread::spawn(move || serve_half(stream, &s, &k, &d));
            }
        });
        HalfCloseBackend {
            addr,
            stop,
            sunk,
            dripped,
        }
    }
}

/// Byte `i` of stream `id`'s pattern.
fn pattern(id: u64, i: u64) -> u8 {
    ((i.wrapping_mul(31).wrapping_add(id * 7)) % 251) as u8
}

fn serve_half(
    mut stream: TcpStream,
    stop: &AtomicBool,
    sunk: &Sunk,
    dripped: &Mutex<HashMap<u64, u64>>,
) {
    set_timeouts(&stream, IO_TIMEOUT);
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 && stream.read_exact(&mut byte).is_ok() && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&line).to_string();
    let (mode, id) = text.split_once(' ').unwrap_or(("", "0"));
    let id: u64 = id.parse().unwrap_or(0);
    match mode {
        "drip" => {
            let sent = drip(&mut stream, id, stop);
            dripped.lock().expect("a lock").insert(id, sent);
        }
        "sink" => {
            let _ = stream.shutdown(Shutdown::Write);
            let got = sink(&mut stream, id);
            sunk.lock().expect("a lock").insert(id, got);
        }
        _ => {}
    }
}

/// Streams stream `id`'s pattern, 4 KiB every 20 ms, until `stop` (a
/// minute at most), then closes; returns how many bytes went.
fn drip(stream: &mut TcpStream, id: u64, stop: &AtomicBool) -> u64 {
    let mut sent = 0u64;
    let until = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::SeqCst) && Instant::now() < until {
        let chunk: Vec<u8> = (sent..sent + 4096).map(|i| pattern(id, i)).collect();
        if stream.write_all(&chunk).is_err() {
            break;
        }
        sent += 4096;
        thread::sleep(Duration::from_millis(20));
    }
    sent
}

/// Reads stream `id`'s pattern to its end: (bytes, all as expected).
fn sink(stream: &mut TcpStream, id: u64) -> (u64, bool) {
    let (mut got, mut right) = (0u64, true);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, right),
            Ok(n) => {
                right &= buf[..n]
                    .iter()
                    .enumerate()
                    .all(|(k, &b)| b == pattern(id, got + k as u64));
                got += n as u64;
            }
            Err(_) => return (got, false),
        }
    }
}

// ---------------------------------------------------------------------------
// The long-lived streams, client side
// ---------------------------------------------------------------------------

/// What a stream reports: its kind and local port (to find its access-log
/// line), what it moved, and how long it lived (from before its connect
/// to its end); or what went wrong.
type Report = Result<(String, u16, u64, Duration), String>;

/// What the streams of a test share: how many are open, and when to end.
#[derive(Default)]
struct Flags {
    /// Streams open and used once.
    opened: AtomicUsize,
    /// Streams that send until told: end now.
    finish: AtomicBool,
    /// Paused readers: read now.
    read_now: AtomicBool,
}

impl Flags {
    /// Waits until `count` streams are open.
    fn wait_open(&self, count: usize) {
        let open = || self.opened.load(Ordering::SeqCst);
        assert!(
            wait_until(SOON, || open() >= count),
            "{} of {count} streams open",
            open()
        );
    }
}

/// Ends every stream when dropped: a test that fails inside its scope
/// must not wait on streams that wait for it.
struct Release<'a>(&'a Flags);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.finish.store(true, Ordering::SeqCst);
        self.0.read_now.store(true, Ordering::SeqCst);
    }
}

fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    set_timeouts(&stream, IO_TIMEOUT);
    Ok(stream)
}

fn port(stream: &TcpStream) -> u16 {
    stream.local_addr().map_or(0, |a| a.port())
}

/// Echoed both ways: `chunk` bytes out, the same back, checked, until
/// `finish`; then the FIN, and the end.
fn echo_stream(addr: SocketAddr, seed: u64, chunk: usize, flags: &Flags) -> Report {
    let started = Instant::now();
    let finish = &flags.finish;
    let mut stream = connect(addr)?;
    let mut prng = Prng::new(seed);
    let (mut out, mut back) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut moved = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    for n in 0..1_000_000u64 {
        if (finish.load(Ordering::SeqCst) || Instant::now() >= deadline) && n > 0 {
            break;
        }
        prng.fill(&mut out);
        stream
            .write_all(&out)
            .map_err(|e| format!("chunk {n}: write: {e}"))?;
        stream
            .read_exact(&mut back)
            .map_err(|e| format!("chunk {n}: read: {e}"))?;
        if out != back {
            return Err(format!("chunk {n} came back different"));
        }
        moved += chunk as u64;
        if n == 0 {
            flags.opened.fetch_add(1, Ordering::SeqCst);
        }
        thread::sleep(Duration::from_millis(5));
    }
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    match read_all(&stream) {
        Ok(rest) if rest.is_empty() => Ok(("echo".into(), port(&stream), moved, started.elapsed())),
        Ok(rest) => Err(format!("{} bytes after the last chunk", rest.len())),
        Err(e) => Err(format!("to the end: {e}")),
    }
}

/// A reader that pauses: `total` bytes written at once (more than the
/// kernel's queues hold, so the proxy holds some), read back only after
/// `read_now`, checked, to the end.
fn paused_stream(addr: SocketAddr, seed: u64, total: usize, flags: &Flags) -> Report {
    let started = Instant::now();
    let read_now = &flags.read_now;
    let stream = connect(addr)?;
    flags.opened.fetch_add(1, Ordering::SeqCst);
    let mut payload = vec![0u8; total];
    Prng::new(seed).fill(&mut payload);
    let writer = {
        let (mut w, payload) = (
            stream.try_clone().map_err(|e| e.to_string())?,
            payload.clone(),
        );
        thread::spawn(move || {
            w.write_all(&payload)
                .and_then(|()| w.shutdown(Shutdown::Write))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !read_now.load(Ordering::SeqCst) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let back = read_all(&stream).map_err(|e| format!("read back: {e}"))?;
    writer
        .join()
        .map_err(|_| "the writer panicked")?
        .map_err(|e| format!("write: {e}"))?;
    match back == payload {
        true => Ok((
            "paused".into(),
            port(&stream),
            total as u64,
            started.elapsed(),
        )),
        false => Err(format!(
            "{} bytes back of {total}, or different",
            back.len()
        )),
    }
}

/// Half-closed by the client: `drip ID`, its FIN, then the backend's
/// stream, checked, to the backend's end.
fn drip_stream(addr: SocketAddr, id: u64, flags: &Flags) -> Report {
    let started = Instant::now();
    let mut stream = connect(addr)?;
    flags.opened.fetch_add(1, Ordering::SeqCst);
    stream
        .write_all(format!("drip {id}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    let got = read_all(&stream).map_err(|e| format!("read: {e}"))?;
    match got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern(id, i as u64))
    {
        true => Ok((
            "drip".into(),
            port(&stream),
            got.len() as u64,
            started.elapsed(),
        )),
        false => Err("the dripped bytes came different".into()),
    }
}

/// Half-closed by the backend: `sink ID`; the backend's FIN first, then
/// the client's stream until `finish`, and its FIN.
fn sink_stream(addr: SocketAddr, id: u64, flags: &Flags) -> Report {
    let started = Instant::now();
    let finish = &flags.finish;
    let mut stream = connect(addr)?;
    flags.opened.fetch_add(1, Ordering::SeqCst);
    stream
        .write_all(format!("sink {id}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut first = [0u8; 1];
    if stream
        .read(&mut first)
        .map_err(|e| format!("the backend's FIN: {e}"))?
        != 0
    {
        return Err("bytes where the backend's FIN was due".into());
    }
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while (!finish.load(Ordering::SeqCst) || sent == 0) && Instant::now() < deadline {
        let chunk: Vec<u8> = (sent..sent + 2048).map(|i| pattern(id, i)).collect();
        stream
            .write_all(&chunk)
            .map_err(|e| format!("write: {e}"))?;
        sent += 2048;
        thread::sleep(Duration::from_millis(10));
    }
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    // The backend's close ends it.
    let rest = read_all(&stream).map_err(|e| format!("to the end: {e}"))?;
    match rest.is_empty() {
        true => Ok(("sink".into(), port(&stream), sent, started.elapsed())),
        false => Err(format!("{} bytes after the backend's FIN", rest.len())),
    }
}

// ---------------------------------------------------------------------------
// The proxies
// ---------------------------------------------------------------------------

/// A configuration: `web` to the echo fixture (splice auto), `bulk` to it
/// with `splice on`, `half` to the half-close backend; an access log.
fn config_text(
    echo: &[SocketAddr],
    half: SocketAddr,
    log: &std::path::Path,
    global: &str,
) -> String {
    let mut text = format!(
        "global\n    access-log {}\n    grace {GRACE}\n{global}",
        log.display()
    );
    text.push_str("frontend web\n    listen 127.0.0.1:0\n");
    for b in echo {
        text.push_str(&format!("    backend {b}\n"));
    }
    text.push_str("frontend bulk\n    listen 127.0.0.1:0\n    splice on\n");
    text.push_str(&format!("    backend {}\n", echo[0]));
    text.push_str(&format!(
        "frontend half\n    listen 127.0.0.1:0\n    backend {half}\n"
    ));
    text
}

/// The arguments of a proxy with an upgrade socket in `config`'s folder.
fn args(config: &ConfigFile, from: bool) -> Vec<String> {
    let socket = config.dir().join("upgrade.sock").display().to_string();
    let mut args = vec!["--config".into(), config.path().display().to_string()];
    args.extend([
        "--upgrade-socket".into(),
        socket.clone(),
        "--workers".into(),
        "2".into(),
    ]);
    if from {
        args.extend(["--upgrade-from".into(), socket]);
    }
    args
}

/// The daemon's lines of every process of a test, in one file each appends
/// to (an upgrade's new process inherits its parent's stderr; one the test
/// starts opens the file again).
struct Logs(std::path::PathBuf);

impl Logs {
    fn lines(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.0).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    }

    fn text(&self) -> String {
        self.lines().join("\n")
    }

    /// The first line with `needle` after line `from`, within [`SOON`].
    fn expect(&self, needle: &str, from: usize) -> String {
        let mut found = None;
        let seen = wait_until(SOON, || {
            found = self
                .lines()
                .into_iter()
                .skip(from)
                .find(|l| l.contains(needle));
            found.is_some()
        });
        match (seen, found) {
            (true, Some(line)) => line,
            _ => panic!("no log line {needle:?} within {SOON:?}:\n{}", self.text()),
        }
    }
}

/// Starts a proxy with `args`, its stderr (and its successors') in `logs`.
fn start_logged(program: &std::path::Path, args: &[String], logs: &Logs) -> ChildProcess {
    child::proxy(program, args)
        .stderr(child::Capture::Append(logs.0.clone()))
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"))
}

/// One SIGUSR2 to `target`, the serving process being `serving` (the same,
/// unless a supervisor passes it on): the new process's pid, once it took
/// over; and how long until `serving` was gone.
fn upgrade(logs: &Logs, target: Pid, serving: Pid) -> (Pid, Duration) {
    let before = logs.lines().len();
    kill(target, Signal::SIGUSR2).expect("SIGUSR2");
    let needle = format!("upgrade: took over from pid {}", serving.as_raw());
    let line = logs.expect(&needle, before);
    let took = Instant::now();
    let pid = line
        .split(" (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|pid| pid.parse().ok())
        .map(Pid::from_raw)
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    assert!(
        wait_until(GONE, || ended(serving)),
        "pid {serving} still runs {GONE:?} after its handover; it said:\n{}",
        logs.lines()[before..].join("\n")
    );
    (pid, took.elapsed())
}

/// The short-connection load: round trips through `addr` until `stop`,
/// each failure kept.
fn load(addr: SocketAddr, id: usize, stop: &AtomicBool, done: &AtomicUsize) -> Vec<String> {
    let mut prng = Prng::new(500 + id as u64);
    let mut failures = Vec::new();
    let until = Instant::now() + Duration::from_secs(120);
    for n in 0..1_000_000u64 {
        if stop.load(Ordering::SeqCst) || Instant::now() >= until {
            break;
        }
        let len = 1 + prng.up_to(16 * 1024);
        if let Err(e) = echo_round_trip(addr, prng.next_u64(), len) {
            failures.push(format!("load {id}.{n}: {e}"));
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    failures
}

/// The access-log lines of `path`, by client port.
fn lines_by_port(path: &std::path::Path) -> HashMap<u16, Vec<testkit::tcplog::ParsedLine>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut by_port: HashMap<u16, Vec<_>> = HashMap::new();
    for line in text.lines() {
        let parsed = testkit::tcplog::parse_tcplog(line)
            .unwrap_or_else(|| panic!("not a tcplog line: {line:?}"));
        by_port
            .entry(parsed.client.port())
            .or_default()
            .push(parsed);
    }
    by_port
}

/// Raises a flag when dropped, however the scope it guards ends.
struct Raise<'a>(&'a AtomicBool);

impl Drop for Raise<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Every kind of long-lived stream through `addrs` (web, bulk, half),
/// started in `s`; each opened before this returns.
fn start_streams<'s>(
    s: &'s thread::Scope<'s, '_>,
    [web, bulk, half]: [SocketAddr; 3],
    flags: &'s Flags,
) -> Vec<thread::ScopedJoinHandle<'s, Report>> {
    let mut streams = Vec::new();
    let mut spawn = |f: Box<dyn FnOnce() -> Report + Send + 's>| {
        streams.push(s.spawn(f));
    };
    for i in 0..3 {
        spawn(Box::new(move || echo_stream(web, 10 + i, 16 * 1024, flags)));
    }
    for i in 0..2 {
        spawn(Box::new(move || {
            echo_stream(bulk, 20 + i, 256 * 1024, flags)
        }));
        spawn(Box::new(move || paused_stream(web, 30 + i, 8 << 20, flags)));
        spawn(Box::new(move || drip_stream(half, 40 + i, flags)));
        spawn(Box::new(move || sink_stream(half, 50 + i, flags)));
    }
    flags.wait_open(streams.len());
    streams
}

// Three SIGUSR2 upgrades in a row under load, with long-lived streams of
// every kind open across all three: every stream byte-exact and never
// reset, every short connection served, each old process gone within
// GONE of its handover while the streams still run, and one access-log
// line per stream, from the process that closed it, with the whole
// connection's bytes and duration.
#[test]
fn three_upgrades_move_every_kind_of_stream_byte_exact() {
    let echo = Fixture::start(2, FixtureOptions::at_once(FixtureMode::Echo)).expect("echo");
    let half = HalfCloseBackend::start();
    let config = ConfigFile::new("handover-three", "");
    let log_path = config.dir().join("access.log");
    config.write(&config_text(echo.addrs(), half.addr, &log_path, ""));
    let logs = Logs(config.dir().join("daemon.log"));
    let first = start_logged(proxy_exe(), &args(&config, false), &logs);
    logs.expect("upgrade socket ", 0);
    let addr = |name| first.frontend_addr(name).expect(name);
    let addrs = [addr("web"), addr("bulk"), addr("half")];
    let (flags, stop, done) = (
        Flags::default(),
        AtomicBool::new(false),
        AtomicUsize::new(0),
    );
    let mut strays = Vec::new();
    let mut serving = Pid::from_raw(first.pid() as i32);
    let (reports, failures) = thread::scope(|s| {
        let _raise = (Raise(&stop), Raise(&half.stop), Release(&flags));
        let load: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (stop, done) = (&stop, &done);
                s.spawn(move || load(addrs[0], i, stop, done))
            })
            .collect();
        let streams = start_streams(s, addrs, &flags);
        assert!(
            wait_until(SOON, || done.load(Ordering::SeqCst) > 100),
            "the load runs"
        );
        for round in 1..=3 {
            let (pid, gone) = upgrade(&logs, serving, serving);
            println!("upgrade {round}: pid {serving} gone {gone:?} after pid {pid} took over");
            strays.push(Stray(pid));
            serving = pid;
            let at = done.load(Ordering::SeqCst);
            assert!(
                wait_until(SOON, || done.load(Ordering::SeqCst) > at + 50),
                "served after"
            );
        }
        flags.read_now.store(true, Ordering::SeqCst);
        flags.finish.store(true, Ordering::SeqCst);
        half.stop.store(true, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        let reports: Vec<Report> = streams
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect();
        let failures: Vec<String> = load
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        (reports, failures)
    });
    let said = logs.text();
    assert!(
        failures.is_empty(),
        "{} short connections failed:\n{}\n{said}",
        failures.len(),
        failures.join("\n")
    );
    let held_bytes = said
        .lines()
        .filter_map(|l| {
            l.split(" holding ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max();
    assert!(
        held_bytes > Some(0),
        "no move held bytes in flight:\n{said}"
    );
    kill(serving, Signal::SIGTERM).expect("SIGTERM");
    assert!(wait_until(SOON, || ended(serving)), "the last proxy exits");
    check_streams(&reports, &half, &log_path, &said);
}

/// Every stream came through whole, and has its one access-log line with
/// its whole bytes and duration, marked as moved three times.
fn check_streams(reports: &[Report], half: &HalfCloseBackend, log: &std::path::Path, said: &str) {
    let lines = lines_by_port(log);
    for report in reports {
        let (kind, port, bytes, lived) = match report {
            Ok((kind, port, bytes, lived)) => (kind, *port, bytes, lived),
            Err(e) => panic!("a stream failed: {e}\n{said}"),
        };
        // A short connection of the load may reuse the port once the
        // stream closed; it lives too briefly to be moved three times.
        let all = lines.get(&port).map_or(&[][..], Vec::as_slice);
        let mine: Vec<_> = all.iter().filter(|l| l.moves == 3).collect();
        assert_eq!(
            mine.len(),
            1,
            "{kind} stream on port {port}, moved by every upgrade: {all:?}"
        );
        let line = mine[0];
        assert_eq!(line.termination.to_string(), "--", "{kind}: {line:?}");
        // The whole connection's time, not its last process's share: at
        // least most of what the client saw (which began before the accept).
        let whole = lived.as_millis() as f64 * 0.8 - 50.0;
        assert!(
            line.total_ms as f64 >= whole,
            "{kind}: {line:?} lived {lived:?}"
        );
        let expected_down = match kind.as_str() {
            "drip" => *half
                .dripped
                .lock()
                .expect("a lock")
                .values()
                .find(|&&n| n == *bytes)
                .unwrap_or(&u64::MAX),
            "sink" => 0,
            _ => *bytes,
        };
        assert_eq!(line.bytes_down, expected_down, "{kind}: {line:?}");
        if kind == "sink" {
            let sunk = half.sunk.lock().expect("a lock");
            assert!(
                sunk.values().any(|&(n, right)| n == *bytes && right),
                "sink of {bytes}: {sunk:?}"
            );
        }
    }
}

/// A configuration of `web` alone, to `echo`, with `global` lines.
fn web_config(echo: &[SocketAddr], log: &std::path::Path, global: &str) -> String {
    let mut text = format!(
        "global\n    access-log {}\n    grace {GRACE}\n{global}",
        log.display()
    );
    text.push_str("frontend web\n    listen 127.0.0.1:0\n");
    for b in echo {
        text.push_str(&format!("    backend {b}\n"));
    }
    text
}

/// Echo streams and paused readers through `web`, started in `s`.
fn web_streams<'s>(
    s: &'s thread::Scope<'s, '_>,
    web: SocketAddr,
    (echoes, paused): (u64, u64),
    flags: &'s Flags,
) -> Vec<thread::ScopedJoinHandle<'s, Report>> {
    let mut streams = Vec::new();
    for i in 0..echoes {
        streams.push(s.spawn(move || echo_stream(web, 60 + i, 8 * 1024, flags)));
    }
    for i in 0..paused {
        streams.push(s.spawn(move || paused_stream(web, 70 + i, 4 << 20, flags)));
    }
    flags.wait_open(streams.len());
    streams
}

fn join_all(streams: Vec<thread::ScopedJoinHandle<'_, Report>>, said: impl Fn() -> String) {
    for stream in streams {
        if let Err(e) = stream.join().unwrap_or_else(|_| Err("panicked".into())) {
            panic!("a stream failed: {e}\n{}", said());
        }
    }
}

/// Plays a new process that takes the listeners, asks for the connections,
/// takes one batch with its descriptors, calls `meanwhile` with its size,
/// and vanishes
/// before it answers: how many connections it was sent.
fn vanish_mid_handover(socket: &std::path::Path, meanwhile: impl FnOnce(usize)) -> usize {
    use proxy::ops::upgrade::socket::Endpoint;
    use proxy::ops::upgrade::wire::{Message, PARCEL_VERSION, VERSION};
    let endpoint = Endpoint::connect(socket).expect("the upgrade socket");
    endpoint.set_deadline(SOON).expect("a deadline");
    let pid = std::process::id();
    endpoint
        .send(
            &Message::Hello {
                version: VERSION,
                pid,
            },
            &[],
        )
        .expect("hello");
    let mut listeners = Vec::new();
    for _ in 0..100 {
        let (message, fds) = endpoint.recv().expect("the offer");
        listeners.extend(fds);
        if matches!(message, Message::End { .. }) {
            break;
        }
    }
    endpoint.send(&Message::Taken { pid }, &[]).expect("taken");
    assert!(matches!(endpoint.recv().expect("ok").0, Message::Ok));
    endpoint
        .send(
            &Message::Adopt {
                version: PARCEL_VERSION,
            },
            &[],
        )
        .expect("adopt");
    let (message, fds) = endpoint.recv().expect("a batch");
    let Message::Connections(parcels) = message else {
        panic!("connections were due, not {:?}", message.text());
    };
    assert_eq!(fds.len(), 2 * parcels.len(), "two descriptors each");
    meanwhile(parcels.len());
    // Gone, as a process killed now: its socket, its copies, its listeners.
    drop((endpoint, fds, listeners));
    parcels.len()
}

// A new process that vanishes in the middle of a handover, after it was
// sent a batch and before it answered: the old process resumes every
// connection where it stood (their bytes held, their relays' state), and
// each finishes byte-exact through it, logged there as never moved.
// SIGQUIT in the middle shows the handover in progress.
#[test]
fn a_new_process_that_vanishes_mid_handover_leaves_every_connection_resuming() {
    let echo = Fixture::start(1, FixtureOptions::at_once(FixtureMode::Echo)).expect("echo");
    let config = ConfigFile::new("handover-vanish", "");
    let log_path = config.dir().join("access.log");
    config.write(&web_config(echo.addrs(), &log_path, ""));
    let logs = Logs(config.dir().join("daemon.log"));
    let old = start_logged(proxy_exe(), &args(&config, false), &logs);
    logs.expect("upgrade socket ", 0);
    let web = old.frontend_addr("web").expect("web");
    let flags = Flags::default();
    thread::scope(|s| {
        let _release = Release(&flags);
        let streams = web_streams(s, web, (4, 2), &flags);
        let quit = |n: usize| {
            let before = logs.lines().len();
            old.signal(Signal::SIGQUIT).expect("SIGQUIT");
            let line = logs.expect(
                "SIGQUIT: upgrade: handing the established connections over",
                before,
            );
            assert!(
                line.contains(&format!(
                    "over to pid {}: {n} connections in 1 batch: 0 adopted, 0 refused, {n} awaiting",
                    std::process::id()
                )),
                "{line}"
            );
        };
        let sent = vanish_mid_handover(&config.dir().join("upgrade.sock"), quit);
        assert!(sent > 0, "a batch was sent");
        logs.expect("not moved (the new process did not adopt it", 0);
        flags.read_now.store(true, Ordering::SeqCst);
        flags.finish.store(true, Ordering::SeqCst);
        join_all(streams, || logs.text());
    });
    match old.wait_exit(SOON).expect("wait for the old proxy") {
        Some(status) => assert_eq!(status.code(), Some(0), "{}", logs.text()),
        None => panic!(
            "the old proxy still runs once its connections ended:\n{}",
            logs.text()
        ),
    }
    let lines = lines_by_port(&log_path);
    assert!(
        lines
            .values()
            .flatten()
            .all(|l| l.moves == 0 && l.termination.to_string() == "--"),
        "{lines:?}"
    );
}

// A new process without room for every connection (its global maxconn,
// its descriptor budget, is smaller) adopts what fits and refuses the
// rest: the old process keeps those, relays them to their end, and only
// then exits. Nothing is lost on either side.
#[test]
fn a_new_process_without_room_refuses_some_and_the_old_one_keeps_them() {
    let echo = Fixture::start(1, FixtureOptions::at_once(FixtureMode::Echo)).expect("echo");
    let config = ConfigFile::new("handover-room", "");
    let log_path = config.dir().join("access.log");
    config.write(&web_config(echo.addrs(), &log_path, ""));
    let logs = Logs(config.dir().join("daemon.log"));
    let old = start_logged(proxy_exe(), &args(&config, false), &logs);
    logs.expect("upgrade socket ", 0);
    let web = old.frontend_addr("web").expect("web");
    let flags = Flags::default();
    let new = thread::scope(|s| {
        let _release = Release(&flags);
        let streams = web_streams(s, web, (10, 0), &flags);
        config.write(&web_config(echo.addrs(), &log_path, "    maxconn 4\n"));
        let new = start_logged(proxy_exe(), &args(&config, true), &logs);
        let fates = || {
            let lines = logs.lines();
            let counts = lines.iter().filter_map(|l| {
                let rest = l.split("connections holding ").nth(1)?;
                let (_, fates) = rest.split_once(": ")?;
                let mut words = fates.split(' ');
                Some((
                    words.next()?.parse::<usize>().ok()?,
                    words.nth(1)?.parse::<usize>().ok()?,
                ))
            });
            counts.fold((0, 0), |(a, r), (x, y)| (a + x, r + y))
        };
        assert!(
            wait_until(SOON, || fates() == (4, 6)),
            "{:?} adopted, refused:\n{}",
            fates(),
            logs.text()
        );
        assert!(
            !ended(Pid::from_raw(old.pid() as i32)),
            "the old process keeps six"
        );
        flags.finish.store(true, Ordering::SeqCst);
        join_all(streams, || logs.text());
        new
    });
    match old.wait_exit(SOON).expect("wait for the old proxy") {
        Some(status) => assert_eq!(status.code(), Some(0), "{}", logs.text()),
        None => panic!(
            "the old proxy still runs once its connections ended:\n{}",
            logs.text()
        ),
    }
    stop_cleanly(new);
    let lines = lines_by_port(&log_path);
    let moved = lines.values().flatten().filter(|l| l.moves == 1).count();
    let kept = lines.values().flatten().filter(|l| l.moves == 0).count();
    assert_eq!((moved, kept), (4, 6), "{lines:?}");
}

/// Opens `count` connections through `addr`, each used once (a 1-byte
/// round trip through the echo backend).
fn open_idle(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|i| {
            let mut stream = connect(addr).unwrap_or_else(|e| panic!("connection {i}: {e}"));
            let mut byte = [i as u8];
            stream.write_all(&byte).expect("one byte out");
            stream.read_exact(&mut byte).expect("one byte back");
            assert_eq!(byte[0], i as u8);
            stream
        })
        .collect()
}

/// A log line's time, in milliseconds of its day.
fn millis_of(line: &str) -> u64 {
    let time = line
        .split('T')
        .nth(1)
        .and_then(|t| t.split('Z').next())
        .unwrap_or("");
    let mut parts = time
        .split([':', '.'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    let (h, m, s, ms) = (next(), next(), next(), next());
    ((h * 60 + m) * 60 + s) * 1000 + ms
}

// Five thousand open connections moved in one upgrade: every one adopted,
// every one used again through the new process. How long the move took
// (from the old process's line that begins it to its last batch's) is
// printed, for the record: a figure, not a bound.
#[test]
fn five_thousand_connections_move_in_one_upgrade() {
    const COUNT: usize = 5_000;
    runtime::fd_limit::raise_nofile_limit().expect("RLIMIT_NOFILE");
    let echo = Fixture::start(1, FixtureOptions::at_once(FixtureMode::Echo)).expect("echo");
    let config = ConfigFile::new("handover-5000", "");
    config.write(&web_config(
        echo.addrs(),
        &config.dir().join("access.log"),
        "",
    ));
    let logs = Logs(config.dir().join("daemon.log"));
    let old = start_logged(proxy_exe(), &args(&config, false), &logs);
    logs.expect("upgrade socket ", 0);
    let web = old.frontend_addr("web").expect("web");
    let mut streams = open_idle(web, COUNT);
    let new = start_logged(proxy_exe(), &args(&config, true), &logs);
    let last = logs.expect(&format!("{COUNT} connections adopted"), 0);
    let moved = logs.expect(&format!("upgrade: {COUNT} connections moved to pid"), 0);
    assert!(moved.contains(", 0 refused"), "{moved}");
    let began = logs.expect("moving the established connections to pid", 0);
    let lines = logs.lines();
    let batches: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("moved a batch of"))
        .collect();
    let end = batches.last().map_or(0, |l| millis_of(l));
    println!(
        "{COUNT} connections moved in {} batches, {} ms from the start of the move to its last batch",
        batches.len(),
        end.saturating_sub(millis_of(&began))
    );
    assert!(last.contains("0 refused"), "{last}");
    for (i, stream) in streams.iter_mut().enumerate() {
        let mut byte = [(i as u8).wrapping_add(1)];
        stream
            .write_all(&byte)
            .expect("one byte out, through the new process");
        stream.read_exact(&mut byte).expect("one byte back");
        assert_eq!(byte[0], (i as u8).wrapping_add(1));
    }
    drop(streams);
    assert!(
        old.wait_exit(SOON).expect("wait").is_some(),
        "the old process is gone"
    );
    stop_cleanly(new);
}

/// The children of `pid`, as the host sees them.
fn children_of(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The one child of `pid` other than `not`, once it has exactly that one,
/// within [`SOON`]. (A process that exits is a zombie for a moment while
/// its other threads end, its children not yet passed to PID 1.)
fn only_child(pid: u32, not: u32) -> u32 {
    let mut children = Vec::new();
    let one = wait_until(SOON, || {
        children = children_of(pid);
        children.len() == 1 && children[0] != not
    });
    assert!(
        one,
        "pid {pid} has children {children:?}, none but {not} was due"
    );
    children[0]
}

/// Whether this test may make a PID namespace: as root, with `unshare`.
fn pid_namespaces_or_skip(test: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let probe = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .output();
    match probe {
        Ok(out) if root && out.status.success() => true,
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            eprintln!(
                "skipped: {test}: no PID namespace here (run as root): {}",
                why.trim()
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: {test}: unshare (util-linux) cannot run: {e}");
            false
        }
    }
}

// The proxy as PID 1 of a PID namespace, as in a container: it stays as a
// supervisor, and its child serves. Three SIGUSR2 sent to PID 1 upgrade
// the serving process under a load of short connections, none of which
// fails; its streams move each time and stay byte-exact;
// the supervisor follows which process serves (each old one is gone);
// SIGTERM to PID 1 ends the last one, and the namespace exits 0.
#[test]
fn as_pid_one_the_proxy_supervises_and_upgrades_keep_serving() {
    if !pid_namespaces_or_skip("the PID 1 test") {
        return;
    }
    let echo = Fixture::start(1, FixtureOptions::at_once(FixtureMode::Echo)).expect("echo");
    let config = ConfigFile::new("handover-pid1", "");
    let log_path = config.dir().join("access.log");
    config.write(&web_config(echo.addrs(), &log_path, ""));
    let logs = Logs(config.dir().join("daemon.log"));
    let mut command = vec![
        "--pid".into(),
        "--fork".into(),
        "--kill-child".into(),
        "--".into(),
    ];
    command.push(proxy_exe().display().to_string());
    command.extend(args(&config, false));
    let namespace = child::Spawn::new("unshare", "unshare")
        .args(&command)
        .stderr(child::Capture::Append(logs.0.clone()))
        .start()
        .unwrap_or_else(|e| panic!("start unshare: {e}"));
    logs.expect("supervisor: PID 1 of its namespace", 0);
    logs.expect("upgrade socket ", 0);
    let web = namespace.frontend_addr("web").expect("web");
    let supervisor = only_child(namespace.pid(), 0);
    let (flags, stop, done) = (
        Flags::default(),
        AtomicBool::new(false),
        AtomicUsize::new(0),
    );
    let failures = thread::scope(|s| {
        let _release = (Release(&flags), Raise(&stop));
        let load: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (stop, done) = (&stop, &done);
                s.spawn(move || load(web, i, stop, done))
            })
            .collect();
        let streams = web_streams(s, web, (3, 0), &flags);
        let mut serving = only_child(supervisor, 0);
        for round in 1..=3 {
            let before = logs.lines().len();
            kill(Pid::from_raw(supervisor as i32), Signal::SIGUSR2).expect("SIGUSR2 to PID 1");
            logs.expect("supervisor: pid ", before);
            let old = Pid::from_raw(serving as i32);
            assert!(
                wait_until(GONE, || ended(old)),
                "round {round}: pid {serving} still runs:\n{}",
                logs.text()
            );
            serving = only_child(supervisor, serving);
            let at = done.load(Ordering::SeqCst);
            let more = wait_until(SOON, || done.load(Ordering::SeqCst) > at + 50);
            assert!(more, "round {round}: served after");
        }
        flags.finish.store(true, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        join_all(streams, || logs.text());
        let failures: Vec<String> = load
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        failures
    });
    assert!(
        failures.is_empty(),
        "{} short connections failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    kill(Pid::from_raw(supervisor as i32), Signal::SIGTERM).expect("SIGTERM to PID 1");
    match namespace.wait_exit(SOON).expect("wait for the namespace") {
        Some(status) => assert_eq!(status.code(), Some(0), "{}", logs.text()),
        None => panic!("PID 1 still runs after SIGTERM:\n{}", logs.text()),
    }
    let lines = lines_by_port(&log_path);
    let streams = lines.values().flatten().filter(|l| l.moves == 3).count();
    assert_eq!(
        streams,
        3,
        "three streams, each moved three times: {lines:?}\n{}",
        logs.text()
    );
}
