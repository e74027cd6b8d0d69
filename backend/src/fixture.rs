//! The fixture server: the backend the proxy is tested and measured against.
//!
//! One accept loop per listening port, one task per connection, all on one
//! thread with one [`Runtime`]: thousands of open connections cost thousands
//! of small tasks, never thousands of threads. What a connection gets depends
//! on the [`FixtureMode`]:
//!
//! ```text
//!   reply   read a line ─> sleep(delay) ─> "port 9001: <line>\n" ─> FIN
//!   cpu     read a line ─> burn the CPU for delay ─> "port 9001: <line>\n" ─> FIN
//!   echo    every byte back, until the client's FIN ─> FIN
//!   banner  "<banner>\n" before reading anything (like SMTP), then echo
//!   reset   read a line ─> RST (SO_LINGER 0), no reply
//!   whoami  "backend <local addr> client <peer addr>\n" before reading anything, then echo
//! ```
//!
//! The reply starts with `port <N>`, N being the port the connection came
//! in on, so a client behind a load balancer can tell which backend served
//! it. `whoami` says more: the address it was reached on and the address the
//! connection came from, so that a client behind several proxies (a cluster
//! of them behind one address, scripts/cluster.sh) can tell which backend
//! served it *and* through which proxy; then it echoes, so the same
//! connection can be held open and probed. `reply` waits with a timer and
//! never blocks the thread, so its delay
//! overlaps across connections; `cpu` blocks the thread on purpose, so its
//! requests queue up one behind the other, as they would on a CPU-bound
//! server with one core.
//!
//! [`serve`] is the accept loop, for a runtime you run yourself (the
//! `backend` binary); [`Fixture`] runs a whole fixture on a thread of its
//! own, for tests and the proxy's demo.

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};
use runtime::net::{
    ListenOptions, TcpListener, TcpStream, bind_std, is_dead_connection_error, is_fd_exhaustion,
};
use runtime::{Runtime, oneshot, spawn, time};

/// The longest request line `reply`, `cpu` and `reset` read; a client that
/// sends more without a newline is cut off, so one connection cannot make
/// the fixture buffer without limit.
pub const MAX_REQUEST: usize = 64 * 1024;

/// How long to wait before accepting again when descriptors have run out.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// After replying, how long to keep reading (and discarding) what the client
/// still sends: see [`linger`].
const LINGER: Duration = Duration::from_secs(2);

/// The echo buffer of a connection that has only sent a little so far, and
/// of one that streams: idle connections stay cheap, bulk ones fast.
const ECHO_SMALL: usize = 2 * 1024;
const ECHO_LARGE: usize = 64 * 1024;

/// What the fixture does with each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureMode {
    /// Read a line, wait the delay (without blocking), answer with a line
    /// tagged with the local port, close.
    Reply,
    /// Send back every byte until the client's end of file, then close.
    Echo,
    /// Like `Reply`, but spend the delay burning CPU on the event loop's
    /// thread: a CPU-bound backend.
    Cpu,
    /// Send the banner line first, before reading anything, then echo.
    Banner,
    /// Read a line, then close with a reset instead of a FIN.
    Reset,
    /// Say which address the connection reached and came from, before
    /// reading anything, then echo.
    Whoami,
}

impl FixtureMode {
    /// Every mode, in the order the help text lists them.
    pub const ALL: [FixtureMode; 6] = [
        FixtureMode::Reply,
        FixtureMode::Echo,
        FixtureMode::Cpu,
        FixtureMode::Banner,
        FixtureMode::Reset,
        FixtureMode::Whoami,
    ];

    /// The name used on the command line and in the log.
    pub fn name(self) -> &'static str {
        match self {
            FixtureMode::Reply => "reply",
            FixtureMode::Echo => "echo",
            FixtureMode::Cpu => "cpu",
            FixtureMode::Banner => "banner",
            FixtureMode::Reset => "reset",
            FixtureMode::Whoami => "whoami",
        }
    }

    /// The mode called `name`, if there is one.
    pub fn parse(name: &str) -> Option<FixtureMode> {
        FixtureMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for FixtureMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the fixture behaves; shared (read-only) by every connection.
#[derive(Debug, Clone)]
pub struct FixtureOptions {
    /// What each connection gets.
    pub mode: FixtureMode,
    /// `Reply`: how long to wait before answering; `Cpu`: how long to burn.
    pub delay: Duration,
    /// `Banner`: the line sent first (a newline is added).
    pub banner: String,
}

impl FixtureOptions {
    /// `mode`, answering at once (no delay, no banner): the backends that
    /// leave the proxy's own cost to measure.
    pub fn at_once(mode: FixtureMode) -> FixtureOptions {
        FixtureOptions {
            mode,
            delay: Duration::ZERO,
            banner: String::new(),
        }
    }
}

impl Default for FixtureOptions {
    fn default() -> Self {
        FixtureOptions {
            mode: FixtureMode::Reply,
            delay: Duration::ZERO,
            banner: "backend ready".to_string(),
        }
    }
}

/// Accepts connections on `listener` forever, each served by its own task.
///
/// Returns only on an accept error that retrying cannot fix. Running out of
/// descriptors is not one: the loop backs off and tries again while the
/// open connections, which are what will free descriptors, keep being
/// served. A connection's failure is logged and touches no other.
///
/// Must run inside [`Runtime::block_on`] (it spawns tasks).
pub async fn serve(listener: TcpListener, options: Rc<FixtureOptions>) -> io::Result<()> {
    loop {
        match listener.accept().await {
            Ok((conn, peer)) => {
                spawn(serve_logged(conn, peer, options.clone()));
            }
            Err(e) if is_fd_exhaustion(&e) => {
                eprintln!("backend: accept: {e}; retrying in {ACCEPT_BACKOFF:?}");
                time::sleep(ACCEPT_BACKOFF).await;
            }
            // The client gave up before we accepted it, or a network error
            // accept(2) reports for the connection, not the listener.
            Err(e) if is_dead_connection_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// One connection's task: serves it and logs how it failed, if it did.
async fn serve_logged(conn: TcpStream, peer: SocketAddr, options: Rc<FixtureOptions>) {
    let local = conn.local_addr();
    if let Err(e) = serve_connection(conn, &options).await {
        match local {
            Ok(local) => eprintln!("backend: {local}: connection from {peer}: {e}"),
            Err(_) => eprintln!("backend: connection from {peer}: {e}"),
        }
    }
}

/// Serves one connection according to the mode. Takes the stream by value
/// because `Reset` must choose how it is closed.
async fn serve_connection(conn: TcpStream, options: &FixtureOptions) -> io::Result<()> {
    match options.mode {
        FixtureMode::Reply | FixtureMode::Cpu => reply(&conn, options).await,
        FixtureMode::Echo => echo(&conn).await,
        FixtureMode::Banner => {
            conn.write_all(format!("{}\n", options.banner).as_bytes())
                .await?;
            echo(&conn).await
        }
        FixtureMode::Reset => reset(conn).await,
        FixtureMode::Whoami => {
            let line = whoami_line(conn.local_addr()?, conn.peer_addr()?);
            conn.write_all(line.as_bytes()).await?;
            echo(&conn).await
        }
    }
}

/// What `whoami` says first: `backend <local> client <peer>\n`.
pub fn whoami_line(local: SocketAddr, peer: SocketAddr) -> String {
    format!("backend {local} client {peer}\n")
}

/// `Reply` and `Cpu`: read the request line, spend the delay, answer, close.
async fn reply(conn: &TcpStream, options: &FixtureOptions) -> io::Result<()> {
    let request = read_request_line(conn).await?;
    if options.mode == FixtureMode::Cpu {
        // black_box: the result is unused, but the work must not be optimized away.
        std::hint::black_box(burn_cpu(options.delay));
    } else {
        time::sleep(options.delay).await;
    }
    let port = conn.local_addr()?.port();
    conn.write_all(&reply_line(port, &request)).await?;
    conn.shutdown(Shutdown::Write)?;
    linger(conn).await;
    Ok(())
}

/// The answer to `request`: `port <port>: <request>\n`.
pub fn reply_line(port: u16, request: &[u8]) -> Vec<u8> {
    let mut line = format!("port {port}: ").into_bytes();
    line.extend_from_slice(request);
    line.push(b'\n');
    line
}

/// Reads up to the first newline or the end of file, whichever comes first,
/// and returns the line without its `\n` (or `\r\n`). Bytes after the
/// newline are not part of the request and are dropped.
async fn read_request_line(conn: &TcpStream) -> io::Result<Vec<u8>> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        let got = &chunk[..n];
        let newline = got.iter().position(|&b| b == b'\n');
        request.extend_from_slice(&got[..newline.unwrap_or(n)]);
        if request.len() > MAX_REQUEST {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("request line longer than {MAX_REQUEST} bytes; closing"),
            ));
        }
        if newline.is_some() || n == 0 {
            if request.last() == Some(&b'\r') {
                request.pop();
            }
            return Ok(request);
        }
    }
}

/// After our FIN, reads and discards what the client still sends, until its
/// own FIN, for at most [`LINGER`].
///
/// Closing a socket that still has unread bytes makes the kernel send a
/// reset, and a reset can destroy our reply before the client has read it.
/// A client that sends more than one line (or a `\r\n` split across
/// packets) would see its answer vanish. Web servers call this a "lingering
/// close" (nginx's `lingering_close`). Errors here do not matter: the reply
/// is already sent.
async fn linger(conn: &TcpStream) {
    let drain = async {
        let mut sink = [0u8; 1024];
        while let Ok(1..) = conn.read(&mut sink).await {}
    };
    let _ = time::timeout(LINGER, drain).await;
}

/// `Echo`: every byte back until the client's end of file, then our FIN.
///
/// Each chunk is written back before the next is read, so when the client's
/// FIN arrives everything before it has already been sent: a client that
/// half-closes still gets all of its bytes. The buffer starts small and
/// grows the first time a read fills it, so a held-open idle connection
/// costs little and a bulk one few system calls.
async fn echo(conn: &TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; ECHO_SMALL];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return conn.shutdown(Shutdown::Write);
        }
        conn.write_all(&buf[..n]).await?;
        if n == buf.len() && buf.len() < ECHO_LARGE {
            buf.resize(ECHO_LARGE, 0);
        }
    }
}

/// `Reset`: read the request, then close with SO_LINGER 0, which sends a
/// reset: the client's next read fails with ECONNRESET instead of seeing a
/// clean end of file.
async fn reset(conn: TcpStream) -> io::Result<()> {
    read_request_line(&conn).await?;
    conn.set_reset_on_close()?;
    drop(conn);
    Ok(())
}

/// Keeps the CPU busy until this thread has *used* `duration` of CPU time,
/// and returns the end of a hash chain, so the work has a result the
/// compiler must compute.
///
/// CPU time, not wall time: on a machine with fewer cores than busy
/// threads, a thread that is descheduled does no work, and a backend that
/// stopped at a wall-clock deadline would then have done only part of its
/// work, making an overloaded machine look faster than the cores allow.
/// Counted in the thread's own CPU clock, each request costs `duration` of
/// CPU however the threads share the cores: a CPU-bound backend.
///
/// The clock is read once every 100,000 steps (about 0.1 ms of hashing):
/// often enough to stop close to `duration`, rarely enough that the work is
/// hashing, not reading the clock.
pub fn burn_cpu(duration: Duration) -> u64 {
    const STEPS_PER_CHECK: u64 = 100_000;
    let started = thread_cpu_time();
    // A bound in wall time too, should the CPU clock ever stand still: a
    // starved thread is slow, but not a hundred times slower.
    let give_up = Instant::now() + duration * 100 + Duration::from_secs(1);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    loop {
        for step in 0..STEPS_PER_CHECK {
            // One FNV-1a step over the counter: each value depends on the last.
            hash = (hash ^ step).wrapping_mul(0x0000_0100_0000_01b3);
        }
        if thread_cpu_time().saturating_sub(started) >= duration || Instant::now() >= give_up {
            return hash;
        }
    }
}

/// The CPU time the calling thread has used so far
/// (`CLOCK_THREAD_CPUTIME_ID`); zero if the clock cannot be read.
pub fn thread_cpu_time() -> Duration {
    let Ok(now) = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID) else {
        return Duration::ZERO;
    };
    Duration::new(
        u64::try_from(now.tv_sec()).unwrap_or(0),
        u32::try_from(now.tv_nsec()).unwrap_or(0),
    )
}

/// A running fixture: a thread with its own [`Runtime`] serving one or more
/// listeners. [`Fixture::stop`] (or dropping it) stops the thread and closes
/// every listener and connection.
///
/// ```no_run
/// use backend::fixture::{Fixture, FixtureOptions};
///
/// let fixture = Fixture::start(3, FixtureOptions::default())?;
/// println!("backends on {:?}", fixture.addrs());
/// fixture.stop();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Fixture {
    addrs: Vec<SocketAddr>,
    /// Sending (or dropping) it ends the runtime's main future.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Fixture {
    /// Starts a fixture serving `count` listeners on 127.0.0.1, on ports the
    /// kernel picks.
    pub fn start(count: usize, options: FixtureOptions) -> io::Result<Fixture> {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        Fixture::start_on(&vec![any_port; count], options)
    }

    /// Starts a fixture serving one listener per address (port 0: any free
    /// port). Returns once every listener is bound and being served.
    pub fn start_on(addrs: &[SocketAddr], options: FixtureOptions) -> io::Result<Fixture> {
        // Bound here, on the caller's thread, so a taken port is the
        // caller's error, and the real addresses are known at once.
        let listeners = addrs
            .iter()
            .map(|addr| bind_std(*addr, &ListenOptions::default()))
            .collect::<io::Result<Vec<_>>>()?;
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<Vec<_>>>()?;
        let (stop_tx, stop_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let thread = thread::Builder::new()
            .name("fixture".to_string())
            .spawn(move || run_fixture_thread(listeners, options, stop_rx, ready_tx))?;
        let mut fixture = Fixture {
            addrs,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(fixture),
            Ok(Err(e)) => Err(e),
            // The thread ended without a word: it panicked (join says so).
            Err(_) => {
                fixture.shut_down();
                Err(io::Error::other("the fixture thread died while starting"))
            }
        }
    }

    /// The listening addresses, with the real ports, in the order asked for.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Stops serving, closes every socket and waits for the thread to end.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An error means the thread is already gone: nothing to stop.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                eprintln!("backend: the fixture thread panicked");
            }
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The fixture thread: a runtime serving every listener until told to stop.
/// Dropping the runtime at the end drops every task, and with them every
/// listener and connection.
fn run_fixture_thread(
    listeners: Vec<std::net::TcpListener>,
    options: FixtureOptions,
    stop: oneshot::Receiver<()>,
    ready: std_mpsc::Sender<io::Result<()>>,
) {
    let runtime = match Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        let options = Rc::new(options);
        for listener in listeners {
            match TcpListener::from_std(listener) {
                Ok(listener) => {
                    spawn(serve_listener(listener, options.clone()));
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            }
        }
        let _ = ready.send(Ok(()));
        // A value or the sender's drop: either way, time to stop.
        let _ = stop.await;
    });
}

/// [`serve`] for one listener of a [`Fixture`], logging why it stopped.
async fn serve_listener(listener: TcpListener, options: Rc<FixtureOptions>) {
    let addr = listener.local_addr();
    if let Err(e) = serve(listener, options).await {
        match addr {
            Ok(addr) => eprintln!("backend: {addr}: accept failed, no longer listening: {e}"),
            Err(_) => eprintln!("backend: accept failed, no longer listening: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_names() {
        for mode in FixtureMode::ALL {
            assert_eq!(FixtureMode::parse(mode.name()), Some(mode));
            assert_eq!(mode.to_string(), mode.name());
        }
        assert_eq!(FixtureMode::parse("Reply"), None);
        assert_eq!(FixtureMode::parse(""), None);
    }

    #[test]
    fn the_reply_line_starts_with_the_port_tag() {
        assert_eq!(reply_line(9001, b"GET 7"), b"port 9001: GET 7\n");
        assert_eq!(reply_line(1, b""), b"port 1: \n");
        // Not UTF-8: passed through untouched.
        assert_eq!(reply_line(2, &[0xff, 0x00]), b"port 2: \xff\x00\n");
    }

    #[test]
    fn burn_cpu_lasts_at_least_its_duration() {
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        std::hint::black_box(burn_cpu(Duration::from_millis(20)));
        // 20 ms of this thread's CPU, so at least 20 ms of wall time too.
        assert!(thread_cpu_time() - cpu_started >= Duration::from_millis(20));
        assert!(started.elapsed() >= Duration::from_millis(20));
        // A zero duration still does one round of work, and returns.
        std::hint::black_box(burn_cpu(Duration::ZERO));
    }
}
