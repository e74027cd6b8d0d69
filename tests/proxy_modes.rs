//! End to end: the real proxy binary (`e2e-proxy`) in `--mode single` and `--mode pool`
//! (with `--picker mutex` and `atomic`), between real clients and small
//! backends written here with std threads, over loopback.
//!
//! Each test starts its own proxy on `127.0.0.1:0`, learns the port from
//! the `listening on ADDR` line on its stderr, and stops it with SIGTERM,
//! expecting exit status 0 (shutdown.rs). The proxy's stderr is drained on
//! a thread for the whole run: a full pipe would block its logging and,
//! with it, the proxy.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long any single client read or write may take before the test fails.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The proxy under test
// ---------------------------------------------------------------------------

struct Proxy {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Proxy {
    fn start(mode: &[&str], backends: &[SocketAddr]) -> Proxy {
        let mut command = Command::new(env!("CARGO_BIN_EXE_e2e-proxy"));
        command.args(["--listen", "127.0.0.1:0"]).args(mode);
        Proxy::spawn(command, backends)
    }

    /// Starts the proxy as `command` with `--backend` flags appended.
    fn spawn(mut command: Command, backends: &[SocketAddr]) -> Proxy {
        for backend in backends {
            command.arg("--backend").arg(backend.to_string());
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start the proxy");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let sink = Arc::clone(&log);
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = listening_addr(&line) {
                    let _ = addr_tx.send(addr);
                }
                let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        match addr_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(addr) => Proxy { child, addr, log },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no 'listening on' line; stderr:\n{}", lock(&log));
            }
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect to the proxy");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream
    }

    fn log(&self) -> String {
        lock(&self.log).clone()
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    fn stop(mut self) -> ExitStatus {
        // SAFETY: kill(2) takes no pointers; the pid is our own child, not yet reaped.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0, "send SIGTERM: {}", io::Error::last_os_error());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the proxy") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy ignored SIGTERM; stderr:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the proxy and checks it exited cleanly.
    fn stop_cleanly(self) {
        let log = Arc::clone(&self.log);
        let status = self.stop();
        assert!(
            status.success(),
            "exit status {status}; stderr:\n{}",
            lock(&log)
        );
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // A failed test must not leave a proxy running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn lock(log: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// The address in a line like `... info  [main] listening on 127.0.0.1:4242 (pool, ...)`.
fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

// ---------------------------------------------------------------------------
// Fixture backends
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Behaviour {
    /// Reads one line, answers `backend PORT\n`, closes.
    Reply,
    /// Echoes until EOF, then closes.
    Echo,
    /// Reads everything until EOF, then answers it reversed, then closes.
    AnswerAfterEof,
    /// Sends `220 PORT ready\r\n` at once, then echoes.
    Banner,
    /// Reads one line, then resets the connection.
    Reset,
}

/// Starts a backend on a fresh loopback port; it lives as long as the test
/// process.
fn backend(behaviour: Behaviour) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
    let addr = listener.local_addr().expect("backend address");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
            thread::spawn(move || {
                // A client of a failing test may vanish: not this thread's business.
                let _ = serve(behaviour, stream, addr.port());
            });
        }
    });
    addr
}

fn serve(behaviour: Behaviour, mut stream: TcpStream, port: u16) -> io::Result<()> {
    match behaviour {
        Behaviour::Reply => {
            read_line(&mut stream)?;
            stream.write_all(format!("backend {port}\n").as_bytes())
        }
        Behaviour::Echo => echo(stream),
        Behaviour::AnswerAfterEof => {
            let mut request = Vec::new();
            stream.read_to_end(&mut request)?;
            request.reverse();
            stream.write_all(&request)
        }
        Behaviour::Banner => {
            stream.write_all(format!("220 {port} ready\r\n").as_bytes())?;
            echo(stream)
        }
        Behaviour::Reset => {
            read_line(&mut stream)?;
            proxy::blocking::reset(stream);
            Ok(())
        }
    }
}

fn read_line(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read(&mut byte)? == 1 {
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    Ok(line)
}

fn echo(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return stream.shutdown(Shutdown::Write);
        }
        stream.write_all(&buf[..n])?;
    }
}

/// A loopback port with nothing listening on it.
fn refused_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
    // dropped here: connecting now gets ECONNREFUSED
}

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

/// One request to a `Reply` backend through the proxy: which port served it.
fn which_backend(proxy: &Proxy) -> u16 {
    let mut stream = proxy.connect();
    stream.write_all(b"hello\n").expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let port = answer.trim().strip_prefix("backend ");
    port.and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected answer {answer:?}"))
}

/// Counts of `requests` sequential requests per backend, in `backends` order.
fn served_counts(proxy: &Proxy, backends: &[SocketAddr], requests: usize) -> Vec<usize> {
    let mut counts = vec![0; backends.len()];
    for _ in 0..requests {
        let port = which_backend(proxy);
        let index = backends.iter().position(|b| b.port() == port);
        counts[index.expect("a port we started")] += 1;
    }
    counts
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `len` pseudo-random bytes (xorshift64), different per seed.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends `data` then FIN from a thread, while the caller reads.
fn send_then_fin(stream: &TcpStream, data: Vec<u8>) -> JoinHandle<io::Result<()>> {
    let mut stream = stream.try_clone().expect("clone");
    thread::spawn(move || {
        stream.write_all(&data)?;
        stream.shutdown(Shutdown::Write)
    })
}

fn read_all(mut stream: &TcpStream) -> io::Result<Vec<u8>> {
    let mut got = Vec::new();
    stream.read_to_end(&mut got)?;
    Ok(got)
}

// ---------------------------------------------------------------------------
// The checks, one function each, run for every mode below
// ---------------------------------------------------------------------------

const SINGLE: &[&str] = &["--mode", "single"];
const POOL_MUTEX: &[&str] = &["--mode", "pool", "--threads", "8", "--picker", "mutex"];
const POOL_ATOMIC: &[&str] = &["--mode", "pool", "--threads", "8", "--picker", "atomic"];

fn concurrent_checksummed_echoes(mode: &[&str]) {
    const CLIENTS: u64 = 50;
    const SIZE: usize = 256 * 1024;
    let proxy = Proxy::start(mode, &[backend(Behaviour::Echo)]);
    thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|seed| {
                let proxy = &proxy;
                s.spawn(move || {
                    let data = payload(SIZE, seed);
                    let sent = fnv1a(&data);
                    let stream = proxy.connect();
                    let writer = send_then_fin(&stream, data);
                    let got = read_all(&stream).expect("echo");
                    writer.join().expect("writer").expect("send");
                    (got.len(), fnv1a(&got) == sent)
                })
            })
            .collect();
        for (i, client) in clients.into_iter().enumerate() {
            let (len, same) = client.join().expect("client thread");
            assert_eq!(len, SIZE, "client {i}: length");
            assert!(same, "client {i}: checksum differs");
        }
    });
    proxy.stop_cleanly();
}

fn half_close(mode: &[&str]) {
    let proxy = Proxy::start(mode, &[backend(Behaviour::AnswerAfterEof)]);
    let request = payload(200_000, 7);
    let stream = proxy.connect();
    // The backend answers only after our FIN: a relay that does not pass
    // the FIN on, or that stops reading the backend once the client has
    // closed its side, fails here.
    send_then_fin(&stream, request.clone())
        .join()
        .expect("writer")
        .expect("send");
    let answer = read_all(&stream).expect("the answer after our FIN");
    assert_eq!(answer.len(), request.len());
    assert!(answer.iter().rev().eq(request.iter()), "answer mangled");
    proxy.stop_cleanly();
}

fn banner(mode: &[&str]) {
    let banner_backend = backend(Behaviour::Banner);
    let proxy = Proxy::start(mode, &[banner_backend]);
    let mut stream = proxy.connect();
    let mut line = vec![0u8; format!("220 {} ready\r\n", banner_backend.port()).len()];
    // We send nothing: the relay must not wait for the client first.
    stream.read_exact(&mut line).expect("banner");
    assert_eq!(
        line,
        format!("220 {} ready\r\n", banner_backend.port()).as_bytes()
    );
    stream.write_all(b"after the banner\n").expect("write");
    let mut echoed = [0u8; 17];
    stream.read_exact(&mut echoed).expect("echo");
    assert_eq!(&echoed, b"after the banner\n");
    proxy.stop_cleanly();
}

fn backend_reset_is_a_reset(mode: &[&str]) {
    let proxy = Proxy::start(mode, &[backend(Behaviour::Reset)]);
    let mut stream = proxy.connect();
    stream.write_all(b"please reset\n").expect("request");
    let e = read_all(&stream).expect_err("a reset, not an EOF");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    proxy.stop_cleanly();
}

/// The client of a refused connection sees it end at once: a reset, or
/// (if the reset raced our write) an EOF, never a hang.
fn assert_closed_promptly(proxy: &Proxy) {
    let begun = Instant::now();
    let stream = proxy.connect();
    let ended = read_all(&stream);
    assert!(
        matches!(&ended, Err(e) if e.kind() == ErrorKind::ConnectionReset)
            || matches!(&ended, Ok(bytes) if bytes.is_empty()),
        "{ended:?}"
    );
    assert!(
        begun.elapsed() < Duration::from_secs(2),
        "{:?}",
        begun.elapsed()
    );
}

fn sigterm_exits_zero(mode: &[&str]) {
    let proxy = Proxy::start(mode, &[backend(Behaviour::Reply)]);
    which_backend(&proxy);
    let _idle = proxy.connect(); // a connection still open at SIGTERM
    let log = Arc::clone(&proxy.log);
    let status = proxy.stop();
    assert_eq!(status.code(), Some(0), "{status}");
    // The drain thread may not have seen the last line yet.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !lock(&log).contains("SIGTERM") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(lock(&log).contains("SIGTERM: exiting"), "{}", lock(&log));
}

macro_rules! every_mode {
    ($($mode:ident: $args:expr;)*) => {$(
        mod $mode {
            use super::*;

            #[test]
            fn fifty_concurrent_256k_echoes_come_back_intact() {
                concurrent_checksummed_echoes($args);
            }

            #[test]
            fn a_half_closed_client_gets_the_whole_answer() {
                half_close($args);
            }

            #[test]
            fn a_backend_that_speaks_first_is_relayed() {
                banner($args);
            }

            #[test]
            fn a_backend_reset_reaches_the_client_as_a_reset() {
                backend_reset_is_a_reset($args);
            }

            #[test]
            fn sigterm_exits_with_status_0() {
                sigterm_exits_zero($args);
            }
        }
    )*};
}

every_mode! {
    single: SINGLE;
    pool_mutex: POOL_MUTEX;
    pool_atomic: POOL_ATOMIC;
}

// ---------------------------------------------------------------------------
// Checks that differ per mode
// ---------------------------------------------------------------------------

#[test]
fn single_always_uses_the_first_backend() {
    let backends = [
        backend(Behaviour::Reply),
        backend(Behaviour::Reply),
        backend(Behaviour::Reply),
    ];
    let proxy = Proxy::start(SINGLE, &backends);
    assert_eq!(served_counts(&proxy, &backends, 30), [30, 0, 0]);
    assert!(proxy.log().contains("(single)"), "{}", proxy.log());
    proxy.stop_cleanly();
}

fn round_robin_is_exact(mode: &[&str]) {
    let backends = [
        backend(Behaviour::Reply),
        backend(Behaviour::Reply),
        backend(Behaviour::Reply),
    ];
    let proxy = Proxy::start(mode, &backends);
    assert_eq!(served_counts(&proxy, &backends, 300), [100, 100, 100]);
    proxy.stop_cleanly();
}

#[test]
fn pool_mutex_round_robin_is_exact_over_three_backends() {
    round_robin_is_exact(POOL_MUTEX);
}

#[test]
fn pool_atomic_round_robin_is_exact_over_three_backends() {
    round_robin_is_exact(POOL_ATOMIC);
}

#[test]
fn single_a_refused_backend_resets_the_client_and_the_proxy_goes_on() {
    let proxy = Proxy::start(SINGLE, &[refused_addr()]);
    for _ in 0..3 {
        assert_closed_promptly(&proxy);
    }
    assert!(proxy.log().contains("unreachable"), "{}", proxy.log());
    proxy.stop_cleanly();
}

/// Round robin sends the first connection to the echo backend and the
/// second to the refused one. The second is closed at once; the first,
/// open all along on another worker, does not notice.
fn refused_backend_leaves_others_alone(mode: &[&str]) {
    let proxy = Proxy::start(mode, &[backend(Behaviour::Echo), refused_addr()]);
    let mut good = proxy.connect();
    good.write_all(b"before\n").expect("write");
    let mut got = [0u8; 7];
    good.read_exact(&mut got).expect("echo before");
    assert_closed_promptly(&proxy);
    good.write_all(b"after!\n").expect("write");
    good.read_exact(&mut got).expect("echo after");
    assert_eq!(&got, b"after!\n");
    drop(good);
    proxy.stop_cleanly();
}

#[test]
fn pool_mutex_a_refused_backend_does_not_disturb_another_connection() {
    refused_backend_leaves_others_alone(POOL_MUTEX);
}

#[test]
fn pool_atomic_a_refused_backend_does_not_disturb_another_connection() {
    refused_backend_leaves_others_alone(POOL_ATOMIC);
}

/// Utime plus stime of a process, in clock ticks (/proc/PID/stat fields 14, 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // The command name (field 2) may hold spaces; fields restart after ')'.
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// Descriptors this process has open without close-on-exec: a child
/// inherits them (cargo may pass its jobserver pipes down, for instance).
/// Everything std opens is close-on-exec, so this set does not change while
/// other tests run.
fn inherited_fds() -> Vec<u32> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fdinfo").expect("/proc/self/fdinfo") {
        let Ok(entry) = entry else { continue };
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A descriptor that closed since the listing has no fdinfo any more.
        let Ok(info) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
        if fd > 2 && flags.is_some_and(|f| f & libc::O_CLOEXEC as u32 == 0) {
            fds.push(fd);
        }
    }
    fds
}

/// The RLIMIT_NOFILE that leaves a child exactly `free` descriptor numbers
/// after stdin, stdout, stderr and the inherited ones. (The limit caps the
/// descriptor *number*; a new descriptor takes the lowest free number.)
fn nofile_limit_leaving(free: usize) -> u32 {
    let taken = inherited_fds();
    let mut left = free;
    let mut fd = 3;
    loop {
        if !taken.contains(&fd) {
            left -= 1;
            if left == 0 {
                return fd + 1;
            }
        }
        fd += 1;
    }
}

#[test]
fn pool_out_of_descriptors_backs_off_without_spinning_and_recovers() {
    // Descriptor numbers for the listener, two relayed connections (a
    // client and a backend socket each), and one more: a blocked accept(2)
    // already holds the number it will return (Linux reserves it before
    // waiting). With those taken, every further accept or connect fails
    // with EMFILE.
    let limit = nofile_limit_leaving(1 + 2 * 2 + 1);
    let mut command = Command::new("sh");
    command.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\"")]);
    command.arg(env!("CARGO_BIN_EXE_e2e-proxy"));
    command.args([
        "--listen",
        "127.0.0.1:0",
        "--mode",
        "pool",
        "--threads",
        "4",
    ]);
    let proxy = Proxy::spawn(command, &[backend(Behaviour::Echo)]);
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = proxy.connect();
            let mut got = [0u8; 2];
            let echoed = stream
                .write_all(b"hi")
                .and_then(|()| stream.read_exact(&mut got));
            if let Err(e) = echoed {
                panic!("echo: {e}; stderr:\n{}", proxy.log());
            }
            stream
        })
        .collect();

    // Out of descriptors now. Which call hits EMFILE first (the accept
    // loop's next accept, or a worker's connect, which then resets its
    // client) is a race; either way nothing may spin.
    let extra: Vec<TcpStream> = (0..3).map(|_| proxy.connect()).collect();
    let before = cpu_ticks(proxy.child.id());
    thread::sleep(Duration::from_millis(1200));
    let spent = cpu_ticks(proxy.child.id()) - before;
    // Ticks are 10 ms: a spinning accept loop would burn about 120.
    assert!(spent <= 30, "{spent} ticks of CPU in 1.2 s: spinning?");
    let log = proxy.log();
    assert!(log.contains("Too many open files"), "{log}");
    let accept_warnings = log.matches("accept: ").count();
    assert!(accept_warnings <= 2, "not rate-limited:\n{log}");

    // The relays end and give their descriptors back, asynchronously: until
    // they have, a new client may still be reset. Then it must be served.
    drop((held, extra));
    let deadline = Instant::now() + Duration::from_secs(5);
    let served_again = loop {
        let mut fresh = proxy.connect();
        let mut got = [0u8; 5];
        let attempt = fresh
            .write_all(b"again")
            .and_then(|()| fresh.read_exact(&mut got));
        if attempt.is_ok() && &got == b"again" {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(
        served_again,
        "not served after recovery; stderr:\n{}",
        proxy.log()
    );
    proxy.stop_cleanly();
}

#[test]
fn the_listening_line_is_parsed() {
    let line =
        "1700000000.000 info  [main] listening on 127.0.0.1:4242 (pool, 8 threads, picker mutex)";
    assert_eq!(listening_addr(line), "127.0.0.1:4242".parse().ok());
    assert_eq!(
        listening_addr("listening on [::1]:80 (single)"),
        "[::1]:80".parse().ok()
    );
    assert_eq!(listening_addr("nothing here"), None);
}
