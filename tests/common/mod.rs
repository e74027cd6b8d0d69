//! What the end-to-end test targets share: the proxy under test as a child
//! process, backends (the in-process fixture, small std-thread backends with
//! a behaviour of their own, the real `e2e-backend` binary), clients,
//! payloads and checksums, and a few /proc and rlimit helpers. Every child
//! process is a `tools::process::child::ChildProcess`, the workspace's one helper:
//! ready when it says where it listens, killed on drop, killed with the
//! test process (PR_SET_PDEATHSIG).
//!
//! Every socket is on 127.0.0.1 and every port is picked by the kernel, so
//! tests run in parallel without knowing about each other. Every wait is
//! bounded: reads and writes by [`IO_TIMEOUT`], polls by a deadline.

// Each test target uses a different part of this module.
#![allow(dead_code)]

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    self as sock, AddressFamily, Backlog, SockFlag, SockType, SockaddrIn, SockaddrIn6, SockaddrLike,
};
use runtime::net::{ListenOptions, bind_std};
use tools::process::child::{self, ChildProcess, Ready, Spawn};

/// How long any single client read or write may block before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The proxy binary under test.
pub fn proxy_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_e2e-proxy"))
}

/// The fixture backend binary.
pub fn backend_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_e2e-backend"))
}

/// The demo binary (which starts itself again as each proxy child).
pub fn demo_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_e2e-demo"))
}

// ---------------------------------------------------------------------------
// The modes under test
// ---------------------------------------------------------------------------

/// A proxy mode with its flags: every mode-parameterized check runs for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `--mode single`: one connection at a time, the first backend only.
    Single,
    /// `--mode pool --picker mutex`.
    PoolMutex,
    /// `--mode pool --picker atomic`.
    PoolAtomic,
    /// `--mode epoll --workers 1`.
    Epoll1,
    /// `--mode epoll --workers 2`.
    Epoll2,
    /// `--mode epoll --workers 1 --splice off`: the copy path only.
    EpollCopy1,
    /// `--mode epoll --workers 1 --splice on`: the splice path from the first byte.
    EpollSplice1,
    /// `--mode epoll --workers 2 --splice on`.
    EpollSplice2,
    /// `--mode states`: one thread, level-triggered epoll, no runtime.
    States,
}

impl Mode {
    /// The command-line flags that select the mode.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Mode::Single => &["--mode", "single"],
            Mode::PoolMutex => &["--mode", "pool", "--threads", "8", "--picker", "mutex"],
            Mode::PoolAtomic => &["--mode", "pool", "--threads", "8", "--picker", "atomic"],
            Mode::Epoll1 => &["--mode", "epoll", "--workers", "1"],
            Mode::Epoll2 => &["--mode", "epoll", "--workers", "2"],
            Mode::EpollCopy1 => &["--mode", "epoll", "--workers", "1", "--splice", "off"],
            Mode::EpollSplice1 => &["--mode", "epoll", "--workers", "1", "--splice", "on"],
            Mode::EpollSplice2 => &["--mode", "epoll", "--workers", "2", "--splice", "on"],
            Mode::States => &["--mode", "states"],
        }
    }

    /// The async relay (conn/relay.rs) rather than the blocking one (blocking/relay.rs).
    pub fn is_epoll(self) -> bool {
        matches!(
            self,
            Mode::Epoll1
                | Mode::Epoll2
                | Mode::EpollCopy1
                | Mode::EpollSplice1
                | Mode::EpollSplice2
        )
    }

    /// The epoll mode with two workers (each balances on its own).
    pub fn is_two_workers(self) -> bool {
        matches!(self, Mode::Epoll2 | Mode::EpollSplice2)
    }
}

/// How a connection was closed, as its peer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// A FIN: the read returns 0.
    Eof,
    /// A reset: the read fails with ECONNRESET.
    Reset,
}

impl Closed {
    /// The word [`describe`] uses for it.
    pub fn word(self) -> &'static str {
        match self {
            Closed::Eof => "eof",
            Closed::Reset => "reset",
        }
    }
}

// ---------------------------------------------------------------------------
// The proxy under test
// ---------------------------------------------------------------------------

/// Starts the proxy in `mode` on a free loopback port, with `extra` flags
/// and one `--backend` per address.
pub fn start_proxy(mode: Mode, backends: &[SocketAddr], extra: &[&str]) -> ChildProcess {
    let mut args: Vec<String> = vec!["--listen".into(), "127.0.0.1:0".into()];
    args.extend(mode.flags().iter().map(|f| f.to_string()));
    args.extend(extra.iter().map(|f| f.to_string()));
    // The pool and epoll modes drain open connections on SIGTERM for up to
    // 30 s; a test that stops a proxy with a connection still open (on
    // purpose or as its last step) should not wait that long.
    if mode != Mode::Single && !extra.contains(&"--grace") {
        args.extend(["--grace".to_string(), "1s".to_string()]);
    }
    for backend in backends {
        args.push("--backend".into());
        args.push(backend.to_string());
    }
    child::proxy(proxy_exe(), &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy ({mode:?}): {e}"))
}

/// SIGTERM, and the exit status must be 0 (shutdown.rs).
pub fn stop_cleanly(proxy: ChildProcess) {
    let log = proxy.log();
    match proxy.stop() {
        Ok(status) => assert_eq!(
            status.code(),
            Some(0),
            "exit status {status}; stderr:\n{}",
            log.join("\n")
        ),
        Err(e) => panic!("stop: {e}; stderr:\n{}", log.join("\n")),
    }
}

/// A client connection with bounded reads and writes.
pub fn connect(addr: SocketAddr) -> TcpStream {
    try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

/// [`connect`] for a connection that may be reset at once: a reset that
/// arrives before the connect returns is its error.
pub fn try_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    set_timeouts(&stream, IO_TIMEOUT);
    Ok(stream)
}

pub fn set_timeouts(stream: &TcpStream, timeout: Duration) {
    stream
        .set_read_timeout(Some(timeout))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(timeout))
        .expect("write timeout");
}

/// One request to a `reply` backend through the proxy: the port that served it.
pub fn which_backend(proxy: SocketAddr) -> u16 {
    ask_backend(proxy).unwrap_or_else(|e| panic!("{e}"))
}

/// [`which_backend`] that reports a failure instead of panicking, for
/// tests that count failures.
pub fn ask_backend(proxy: SocketAddr) -> Result<u16, String> {
    let stream = try_connect(proxy).map_err(|e| format!("connect to {proxy}: {e}"))?;
    ask_on(stream)
}

/// Sends one request line on a connected stream and reads the `reply`
/// backend's answer, `port 9001: hello`, to the end: the port.
pub fn ask_on(mut stream: TcpStream) -> Result<u16, String> {
    stream
        .write_all(b"hello\n")
        .map_err(|e| format!("request: {e}"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| format!("answer: {e} (after {answer:?})"))?;
    answer
        .strip_prefix("port ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected answer {answer:?}"))
}

// ---------------------------------------------------------------------------
// Backends: small std-thread servers with a behaviour of their own
// ---------------------------------------------------------------------------

/// A backend on a fresh loopback port, each connection handled by `handler`
/// on a thread of its own. Dropping it stops accepting; connection threads
/// end on their own (their sockets have [`IO_TIMEOUT`]s).
pub struct StdBackend {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StdBackend {
    pub fn start<F>(handler: F) -> StdBackend
    where
        F: Fn(TcpStream) -> io::Result<()> + Send + Sync + 'static,
    {
        StdBackend::serve(
            TcpListener::bind("127.0.0.1:0").expect("bind a backend"),
            handler,
        )
    }

    /// Serves `listener` (already listening) with `handler`.
    pub fn serve<F>(listener: TcpListener, handler: F) -> StdBackend
    where
        F: Fn(TcpStream) -> io::Result<()> + Send + Sync + 'static,
    {
        let addr = listener.local_addr().expect("backend address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let handler = Arc::new(handler);
        let thread = thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                set_timeouts(&stream, IO_TIMEOUT);
                let handler = Arc::clone(&handler);
                thread::spawn(move || {
                    // A client of a failing test may vanish: not this thread's business.
                    let _ = handler(stream);
                });
            }
        });
        StdBackend {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StdBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The most any helper reads from one stream (the 100 MiB transfer is the
/// largest), so no read loop runs without end even against a peer gone mad.
pub const READ_LIMIT: u64 = 256 << 20;

/// The longest line [`read_line`] reads.
pub const LINE_LIMIT: usize = 64 * 1024;

fn too_much(what: &str) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, format!("more than {what}"))
}

/// Reads one line (up to and including `\n`, or to EOF), at most
/// [`LINE_LIMIT`] bytes.
pub fn read_line(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read(&mut byte)? == 1 {
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
        if line.len() >= LINE_LIMIT {
            return Err(too_much("a line's worth of bytes"));
        }
    }
    Ok(line)
}

/// Echoes until EOF, then passes the FIN back (at most [`READ_LIMIT`] bytes).
pub fn echo(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return stream.shutdown(Shutdown::Write);
        }
        total += n as u64;
        if total > READ_LIMIT {
            return Err(too_much("READ_LIMIT bytes"));
        }
        stream.write_all(&buf[..n])?;
    }
}

/// What a read ended with, in words a test can compare: `eof`, `reset`,
/// `timeout` (nothing came), `data`, or another error's kind.
pub fn describe(result: &io::Result<usize>) -> String {
    match result {
        Ok(0) => "eof".into(),
        Ok(_) => "data".into(),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => "reset".into(),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            "timeout".into()
        }
        Err(e) => format!("{:?}", e.kind()),
    }
}

/// Waits (bounded) for a backend's report.
pub fn wait_report(reports: &mpsc::Receiver<String>, what: &str) -> String {
    reports
        .recv_timeout(IO_TIMEOUT)
        .unwrap_or_else(|_| panic!("the backend never reported {what}"))
}

/// Waits up to `limit` for `stream` to hang up or fail (POLLHUP or
/// POLLERR), without reading or writing: the way to see a reset arrive on a
/// socket whose peer already sent its FIN (its reads return 0 either way).
/// A FIN alone never sets POLLHUP; a reset does.
pub fn hangs_up_within(stream: &TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Nothing asked for: POLLHUP and POLLERR are reported anyway.
        let mut fds = [PollFd::new(stream.as_fd(), PollFlags::empty())];
        match poll(&mut fds, poll_timeout(left)) {
            Ok(n) if n > 0 => {
                return fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR));
            }
            Err(Errno::EINTR) if Instant::now() < deadline => {}
            _ => return false,
        }
    }
}

/// `left`, what remains of a deadline, as poll(2)'s timeout: whole
/// milliseconds, at most `i32::MAX` of them.
pub fn poll_timeout(left: Duration) -> PollTimeout {
    PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
}

/// The value of a system call that must not fail in a test, or a panic
/// that names the call and says why it failed.
fn must<T>(what: &str, result: nix::Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {}", io::Error::from(e)))
}

/// A loopback port with a socket bound to it but not listening: a connect
/// to it is refused (RST), and, unlike a port whose listener was closed, no
/// one else can take it meanwhile. [`ClosedPort::listen`] opens it later.
pub struct ClosedPort {
    fd: OwnedFd,
    addr: SocketAddr,
}

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let fd = must(
            "socket",
            sock::socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            ),
        );
        let any_port = SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        must("bind", sock::bind(fd.as_raw_fd(), &any_port));
        let bound: SockaddrIn = must("getsockname", sock::getsockname(fd.as_raw_fd()));
        ClosedPort {
            fd,
            addr: SocketAddr::from(([127, 0, 0, 1], bound.port())),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts listening on the port: from now on connects succeed.
    pub fn listen(self) -> TcpListener {
        must(
            "listen",
            sock::listen(&self.fd, must("backlog", Backlog::new(128))),
        );
        TcpListener::from(self.fd)
    }
}

/// A listener whose accept queue is full and that never accepts: a SYN to
/// it goes unanswered, as if the host were down. (Linux drops a SYN when
/// the accept queue is full; backlog 1 holds two connections.) Returns the
/// listener and the connections that fill it, to keep.
pub fn unanswering_backend() -> (TcpListener, Vec<TcpStream>) {
    let options = ListenOptions {
        backlog: 1,
        ..ListenOptions::default()
    };
    let listener = bind_std(SocketAddr::from(([127, 0, 0, 1], 0)), &options).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut fillers = Vec::new();
    for _ in 0..16 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(stream) => fillers.push(stream),
            Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                return (listener, fillers);
            }
            Err(e) => panic!("filling the backlog: {e}"),
        }
    }
    panic!("16 connections and the accept queue of a backlog-1 listener is not full?");
}

// ---------------------------------------------------------------------------
// The real e2e-backend binary as a child process
// ---------------------------------------------------------------------------

/// `e2e-backend --port 0` (`ports` times) with `args`, ready once it has
/// announced every port ([`ChildProcess::addrs`]).
pub fn start_backend(ports: usize, args: &[&str]) -> ChildProcess {
    try_start_backend_on(&vec![0; ports], args).unwrap_or_else(|e| panic!("{e}"))
}

/// `e2e-backend` with one `--port` per entry of `ports` (0: any free port)
/// and `args`, ready once it has announced one `listening on ADDR` line per
/// port. A port it cannot take is an error (the child says why and exits),
/// not a panic: a test restarting a backend on its old port may retry.
pub fn try_start_backend_on(ports: &[u16], args: &[&str]) -> io::Result<ChildProcess> {
    let mut words: Vec<String> = Vec::new();
    for port in ports {
        words.extend(["--port".to_string(), port.to_string()]);
    }
    words.extend(args.iter().map(|a| a.to_string()));
    Spawn::new("e2e-backend", backend_exe())
        .args(words)
        .ready(Ready::Announced(ports.len()), Duration::from_secs(10))
        .start()
}

// ---------------------------------------------------------------------------
// Payloads and checksums
// ---------------------------------------------------------------------------

/// A deterministic pseudo-random generator (xorshift64*): the same seed
/// gives the same payloads on every run.
pub struct Prng(u64);

impl Prng {
    pub fn new(seed: u64) -> Prng {
        // Spread small seeds apart; never zero (xorshift's fixed point).
        Prng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        self.next_u64() % (max + 1)
    }

    /// Fills `buf` with pseudo-random bytes, a word at a time.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut words = buf.chunks_exact_mut(8);
        for word in &mut words {
            word.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = words.into_remainder();
        let last = self.next_u64().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }
}

/// A streaming 64-bit checksum (FNV-style, a word at a time, so it stays
/// fast in an unoptimized test build) and a byte count: bytes may arrive
/// in any split, the result is the same.
#[derive(Debug, Clone)]
pub struct Checksum {
    hash: u64,
    len: u64,
    tail: [u8; 8],
    tail_len: usize,
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum {
            hash: 0xcbf2_9ce4_8422_2325,
            len: 0,
            tail: [0; 8],
            tail_len: 0,
        }
    }
}

impl Checksum {
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        while self.tail_len > 0 && !data.is_empty() {
            self.tail[self.tail_len] = data[0];
            self.tail_len += 1;
            data = &data[1..];
            if self.tail_len == 8 {
                self.word(u64::from_le_bytes(self.tail));
                self.tail_len = 0;
            }
        }
        let mut words = data.chunks_exact(8);
        for word in &mut words {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            self.word(u64::from_le_bytes(bytes));
        }
        let rest = words.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
    }

    fn word(&mut self, word: u64) {
        self.hash = (self.hash ^ word)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(23);
    }

    /// (bytes, checksum) of everything so far.
    pub fn finish(&self) -> (u64, u64) {
        let mut last = [0u8; 8];
        last[..self.tail_len].copy_from_slice(&self.tail[..self.tail_len]);
        let hash =
            (self.hash ^ u64::from_le_bytes(last) ^ self.len).wrapping_mul(0x0000_0100_0000_01b3);
        (self.len, hash)
    }
}

/// Writes `len` pseudo-random bytes from `seed`, generated a chunk at a
/// time (never the whole payload in memory), then a FIN; returns what was
/// sent as (bytes, checksum).
pub fn send_payload(mut stream: &TcpStream, seed: u64, len: u64) -> io::Result<(u64, u64)> {
    let mut prng = Prng::new(seed);
    let mut sum = Checksum::default();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        prng.fill(&mut chunk[..n]);
        stream.write_all(&chunk[..n])?;
        sum.update(&chunk[..n]);
        left -= n as u64;
    }
    stream.shutdown(Shutdown::Write)?;
    Ok(sum.finish())
}

/// Reads to EOF (at most [`READ_LIMIT`] bytes), returning what came as
/// (bytes, checksum).
pub fn receive_checksum(mut stream: &TcpStream) -> io::Result<(u64, u64)> {
    let mut sum = Checksum::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk)? {
            0 => return Ok(sum.finish()),
            n => sum.update(&chunk[..n]),
        }
        if sum.len > READ_LIMIT {
            return Err(too_much("READ_LIMIT bytes"));
        }
    }
}

/// Sends `len` bytes from `seed` through `addr` to an echo backend while
/// reading the echo, both streaming; Ok if every byte came back in order.
pub fn echo_round_trip(addr: SocketAddr, seed: u64, len: u64) -> Result<(), String> {
    let stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    set_timeouts(&stream, IO_TIMEOUT);
    let writer = {
        let stream = stream.try_clone().map_err(|e| format!("clone: {e}"))?;
        thread::spawn(move || send_payload(&stream, seed, len))
    };
    let received = receive_checksum(&stream).map_err(|e| format!("receive: {e}"));
    let sent = writer
        .join()
        .map_err(|_| "the writer panicked".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    let received = received?;
    if sent == received {
        Ok(())
    } else {
        Err(format!(
            "sent {} bytes (checksum {:016x}), got back {} (checksum {:016x})",
            sent.0, sent.1, received.0, received.1
        ))
    }
}

/// Reads to EOF, at most [`READ_LIMIT`] bytes.
pub fn read_all(stream: &TcpStream) -> io::Result<Vec<u8>> {
    let mut got = Vec::new();
    stream.take(READ_LIMIT + 1).read_to_end(&mut got)?;
    if got.len() as u64 > READ_LIMIT {
        return Err(too_much("READ_LIMIT bytes"));
    }
    Ok(got)
}

// ---------------------------------------------------------------------------
// Processes, descriptors, limits
// ---------------------------------------------------------------------------

/// Utime plus stime of a process, in clock ticks (/proc/PID/stat fields 14, 15).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // The command name (field 2) may hold spaces; fields restart after ')'.
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// The open descriptors of a process, each with what it is (the target of
/// its /proc link: `socket:[...]`, `anon_inode:[eventpoll]`, a path...).
pub fn open_fds(pid: u32) -> Vec<(u32, String)> {
    let mut fds = Vec::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return fds;
    };
    for entry in entries.map_while(Result::ok) {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // A descriptor closed since the listing has no link any more.
        if let Ok(target) = std::fs::read_link(entry.path()) {
            fds.push((fd, target.to_string_lossy().into_owned()));
        }
    }
    fds.sort();
    fds
}

/// Sets the soft RLIMIT_NOFILE of a running process (ours: our child),
/// keeping its hard limit, and checks that it took. The tests set the limit
/// of a proxy that is already running, from what it holds once at rest, so
/// it cannot be set before exec.
pub fn set_nofile_limit_of(pid: u32, soft: u64) {
    runtime::fd_limit::set_nofile_soft_limit_of(pid, soft)
        .unwrap_or_else(|e| panic!("prlimit of {pid} to {soft}: {e}"));
    assert_eq!(
        soft_nofile_of(pid),
        Some(soft),
        "prlimit: the soft limit of {pid} did not change"
    );
}

/// The soft RLIMIT_NOFILE of a process, from /proc/PID/limits.
pub fn soft_nofile_of(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The proxy's stderr, for failure messages.
pub fn said(proxy: &ChildProcess) -> String {
    proxy.log().join("\n")
}

/// Waits up to `within` for a log line of `proxy` containing `needle` and
/// returns it; fails the test, showing the proxy's stderr, if none comes.
pub fn expect_log_within(proxy: &ChildProcess, needle: &str, within: Duration) -> String {
    proxy.wait_for_log(needle, within).unwrap_or_else(|e| {
        panic!(
            "no log line {needle:?} within {within:?} ({e}); stderr:\n{}",
            said(proxy)
        )
    })
}

/// Polls `condition` every 10 ms until it holds or `limit` passes; returns
/// whether it held.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// A client at a chosen source address
// ---------------------------------------------------------------------------

/// Opens a client connection to `to`, from `source` if given (any address
/// of 127.0.0.0/8 is this host: a client at another address), and returns
/// its local port with the outcome. Connect, reads and writes are bounded
/// by `timeout`.
///
/// Why not `TcpStream::connect_timeout`: std's `TcpStream` cannot bind
/// before it connects, and its connect reads the socket's error after the
/// handshake, so a proxy that accepts and resets at once (a denied client)
/// makes the connect itself fail with `ConnectionReset`, and the port the
/// access log names is lost. Here the port is read as soon as connect(2)
/// has picked it, before the handshake completes; an `Err` of kind
/// `ConnectionReset` means "connected, then reset before we looked".
pub fn open_from(
    source: Option<IpAddr>,
    to: SocketAddr,
    timeout: Duration,
) -> (u16, io::Result<TcpStream>) {
    let mut port = 0;
    let stream = (|| {
        let family = if to.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
        let fd = sock::socket(family, SockType::Stream, flags, None)?;
        if let Some(source) = source {
            sock::bind(fd.as_raw_fd(), &*sockaddr(SocketAddr::new(source, 0)))?;
        }
        match sock::connect(fd.as_raw_fd(), &*sockaddr(to)) {
            Ok(()) | Err(Errno::EINPROGRESS) => {}
            Err(e) => return Err(e.into()),
        }
        let stream = TcpStream::from(fd);
        // The port is chosen by connect(2), before the handshake.
        port = stream.local_addr()?.port();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
            match poll(&mut fds, poll_timeout(left)) {
                Ok(n) if n > 0 => break,
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            if left.is_zero() {
                return Err(io::Error::new(ErrorKind::TimedOut, "connect timed out"));
            }
        }
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
        stream.set_nonblocking(false)?;
        set_timeouts(&stream, timeout);
        Ok(stream)
    })();
    (port, stream)
}

/// `addr` as a socket address for nix: sockaddr_in or sockaddr_in6, each
/// passed with its own length.
fn sockaddr(addr: SocketAddr) -> Box<dyn SockaddrLike> {
    match addr {
        SocketAddr::V4(a) => Box::new(SockaddrIn::from(a)),
        SocketAddr::V6(a) => Box::new(SockaddrIn6::from(a)),
    }
}

// ---------------------------------------------------------------------------
// Configuration files
// ---------------------------------------------------------------------------

/// A test's own directory (named for the test target, the process and the
/// test, so parallel tests and runs never share one), removed on drop.
pub struct TestDir(std::path::PathBuf);

impl TestDir {
    pub fn new(test: &str) -> TestDir {
        let target = env!("CARGO_CRATE_NAME");
        let path = std::env::temp_dir().join(format!("e2e-{target}-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create the test directory");
        TestDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` in it.
    pub fn file(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A configuration file in a [`TestDir`] of its own, removed with it.
pub struct ConfigFile {
    dir: TestDir,
    path: std::path::PathBuf,
}

impl ConfigFile {
    pub fn new(test: &str, text: &str) -> ConfigFile {
        let dir = TestDir::new(test);
        let file = ConfigFile {
            path: dir.file("lb.conf"),
            dir,
        };
        file.write(text);
        file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory it is in, for files that go with it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces the file's contents atomically: a temporary file, renamed
    /// over it, so that a reader (a SIGHUP, a new process) never reads half
    /// a file.
    pub fn write(&self, text: &str) {
        let tmp = self.dir.file("lb.conf.tmp");
        std::fs::write(&tmp, text).expect("write the new config");
        std::fs::rename(&tmp, &self.path).expect("rename the new config over the old one");
    }
}

/// A process this test did not start itself (SIGUSR2's new proxy, a child
/// of the old one): SIGKILLed on drop if it still runs.
pub struct Stray(pub nix::unistd::Pid);

impl Drop for Stray {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
pub fn ended(pid: nix::unistd::Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
