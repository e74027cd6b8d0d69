//! A program as a child process, the one way the workspace runs one: the
//! demo's proxies, the benchmark's subjects (ours, HAProxy, nginx), and
//! every end-to-end test's proxies, backends and finished runs.
//!
//! ```text
//!   Spawn::new(name, program).args(..)            what to run
//!        .stderr(Capture::..) .stdout(Capture::..) where its words go
//!        .ready(Ready::.., within)                 when it counts as started
//!        .start() ──▶ ChildProcess ──▶ stop(): SIGTERM, a bounded wait
//!                                        └─▶ drop: SIGKILL the tree
//! ```
//!
//! What makes this safe to run hundreds of times in a row:
//!
//! - **Readiness, by the rule that fits the program** ([`Ready`]). Ours and
//!   the fixture backend listen on port 0 and announce the real port
//!   (`listening on ADDR`), so they are ready once they have said it; a
//!   peer started on a port we chose is ready once a TCP connect to it
//!   succeeds. Every wait is bounded, and gives up early, quoting the
//!   child, if the child exits (a bad configuration, a port taken).
//! - **Words kept where the caller reads them** ([`Capture`]): every line
//!   in memory (a test reads the whole log), the last few (a long
//!   benchmark only quotes a failure), or a file (once the child has
//!   exited, the file holds every line, with no pipe reader to catch up
//!   with). A pipe is drained on a thread for the child's whole life, so a
//!   chatty child never blocks on a full pipe.
//! - **Kill on drop.** A caller that fails half-way drops the
//!   [`ChildProcess`], which kills the whole process tree (nginx's workers
//!   too) and reaps it.
//! - **Death with the parent.** Each child asks the kernel for SIGKILL when
//!   the thread that started it dies (`PR_SET_PDEATHSIG`), so a harness or a
//!   test binary killed before any `Drop` runs leaves no server holding
//!   ports.
//!
//! [`proxy`](fn@proxy) is the named shorthand for our proxy on port 0, with
//! [`ChildProcess::addr`] and [`ChildProcess::frontend_addr`] reading where
//! it listens from its log.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::process::procstat;

/// How long a server may take to be ready, unless the caller says.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a child may take to exit after [`ChildProcess::stop`]'s SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many lines [`Capture::Tail`] keeps in the benchmark: enough to quote
/// a failure, few enough for a run of any length.
pub const TAIL_LINES: usize = 40;
/// Between two looks at the log, or at whether the child has exited.
const LOG_POLL: Duration = Duration::from_millis(10);
/// Between two connect attempts while waiting for a server.
const CONNECT_POLL: Duration = Duration::from_millis(20);
/// How long a readiness probe waits for the reply to its empty request.
const PROBE_DRAIN: Duration = Duration::from_secs(2);
/// Once the child has exited, how long its pipes may take to reach their
/// end of file (a grandchild that inherited them may hold them open).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Where one of the child's output streams goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capture {
    /// Nowhere (`/dev/null`).
    Nothing,
    /// Every line, in memory.
    All,
    /// The last `n` lines, in memory.
    Tail(usize),
    /// Written to this file (created, or emptied), and read back from it.
    File(PathBuf),
    /// Added at the end of this file (created if missing), and read back
    /// from it: several processes may write to one file this way, each
    /// write landing whole at its end (`O_APPEND`), where two that opened
    /// it with [`Capture::File`] would write over each other's lines.
    Append(PathBuf),
}

/// When a started child counts as ready: [`Spawn::start`] returns then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// At once: the caller waits for what it needs itself (a program run to
    /// its exit, a daemon whose frontends it asks for by name).
    AtOnce,
    /// Once its stderr has announced this many addresses, each in a line
    /// `... listening on ADDR ...` ([`listening_addr`]): ours and the
    /// fixture backend, on port 0. [`ChildProcess::addrs`] has them.
    Announced(usize),
    /// Once a TCP connect to this address succeeds: a server started on a
    /// port we chose (HAProxy, nginx, ours in the benchmark).
    Accepting(SocketAddr),
}

/// How to start a child: the program, its arguments, where its output
/// goes, and when it is ready. Defaults: stdout to nowhere, every stderr
/// line in memory, ready at once.
#[derive(Debug, Clone)]
pub struct Spawn {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    stdout: Capture,
    stderr: Capture,
    /// A file to read as stdin (`None`: `/dev/null`).
    stdin: Option<PathBuf>,
    ready: Ready,
    within: Duration,
    /// Run as this user and group (uid, gid) instead of ours.
    user: Option<(u32, u32)>,
}

/// What a child that ran to its end left: its status and its words.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// Its stdout lines (none unless captured).
    pub stdout: Vec<String>,
    /// Its stderr lines (none unless captured).
    pub stderr: Vec<String>,
}

impl Spawn {
    /// `program`, called `name` in every message about it.
    pub fn new(name: &str, program: impl AsRef<Path>) -> Spawn {
        Spawn {
            name: name.to_string(),
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            stdout: Capture::Nothing,
            stderr: Capture::All,
            stdin: None,
            ready: Ready::AtOnce,
            within: START_TIMEOUT,
            user: None,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Where stdout goes ([`Capture::Nothing`] unless said).
    pub fn stdout(mut self, capture: Capture) -> Spawn {
        self.stdout = capture;
        self
    }

    /// A file it reads as its stdin (`/dev/null` unless said): what a
    /// client program such as `openssl s_client` is to send.
    pub fn stdin_file(mut self, path: impl AsRef<Path>) -> Spawn {
        self.stdin = Some(path.as_ref().to_path_buf());
        self
    }

    /// Where stderr goes ([`Capture::All`] unless said).
    pub fn stderr(mut self, capture: Capture) -> Spawn {
        self.stderr = capture;
        self
    }

    /// Runs the child as another user and group (which needs root): a test
    /// of what a peer of another user is refused.
    pub fn user(mut self, uid: u32, gid: u32) -> Spawn {
        self.user = Some((uid, gid));
        self
    }

    /// When the child counts as started, and how long that may take.
    pub fn ready(mut self, rule: Ready, within: Duration) -> Spawn {
        self.ready = rule;
        self.within = within;
        self
    }

    /// Starts the child and waits until it is ready. A child that is not
    /// ready in time, or exits first, is killed, and that is the error.
    pub fn start(self) -> io::Result<ChildProcess> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(match &self.stdin {
                Some(path) => Stdio::from(fs::File::open(path)?),
                None => Stdio::null(),
            })
            .stdout(stdio(&self.stdout)?)
            .stderr(stdio(&self.stderr)?);
        if let Some((uid, gid)) = self.user {
            // Set between fork and exec, before the closure below (std drops
            // the supplementary groups too): the death signal survives it.
            command.uid(uid).gid(gid);
        }
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe calls are allowed; prctl is one, and the
        // closure touches no memory shared with the parent.
        unsafe {
            command.pre_exec(|| {
                // SAFETY: PR_SET_PDEATHSIG with a valid signal number.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let name = self.name;
        let mut child = command
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))?;
        // From here on, a failure drops the ChildProcess, which kills it.
        let mut process = ChildProcess {
            stdout: Output::new(&self.stdout),
            stderr: Output::new(&self.stderr),
            name,
            child: Mutex::new(None),
            addrs: Vec::new(),
            settled: AtomicBool::new(false),
        };
        let drained = process.drain(&mut child);
        *process.lock() = Some(child);
        drained?;
        process.addrs = match self.ready {
            Ready::AtOnce => Vec::new(),
            Ready::Announced(count) => process.announced(count, self.within)?,
            Ready::Accepting(addr) => {
                process.wait_until_accepting(addr, self.within)?;
                vec![addr]
            }
        };
        Ok(process)
    }

    /// Starts the child and waits (at most `limit`) for it to exit; a child
    /// still running then is killed, and that is a `TimedOut` error.
    pub fn run(self, limit: Duration) -> io::Result<Finished> {
        let process = self.start()?;
        match process.wait_exit(limit)? {
            Some(status) => Ok(Finished {
                status,
                stdout: process.stdout(),
                stderr: process.log(),
            }),
            None => {
                process.kill();
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} ran longer than {limit:?}; killed; it said: {}",
                        process.name,
                        process.last_words()
                    ),
                ))
            }
        }
    }
}

/// Our proxy (or a wrapper that execs it) started with `args`, ready once
/// it logs its first `listening on ADDR`: with `--listen 127.0.0.1:0` the
/// kernel picks a free port and that line is how we learn it
/// ([`ChildProcess::addr`]).
pub fn proxy(exe: impl AsRef<Path>, args: &[String]) -> Spawn {
    Spawn::new("proxy", exe)
        .args(args)
        .ready(Ready::Announced(1), START_TIMEOUT)
}

/// A program running as our child; killed, with every process it started,
/// when dropped.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    // In a mutex so that every method can take `&self`: asking whether the
    // child has exited reaps it, and must not race a signal to its pid.
    // `None` only while `Spawn::start` is still setting it up.
    child: Mutex<Option<Child>>,
    stdout: Output,
    stderr: Output,
    addrs: Vec<SocketAddr>,
    /// Whether the pipes were waited for after the exit.
    settled: AtomicBool,
}

impl ChildProcess {
    /// The child's process id (the root of its tree).
    pub fn pid(&self) -> u32 {
        self.lock().as_ref().map_or(0, Child::id)
    }

    /// The addresses its readiness rule found: announced ones in the order
    /// announced, or the one it accepted on.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The first of [`ChildProcess::addrs`]: where a proxy or a backend
    /// started with [`Ready::Announced`] or [`Ready::Accepting`] accepts.
    ///
    /// # Panics
    ///
    /// If the child was started with [`Ready::AtOnce`], which finds no
    /// address: asking it for one is the caller's mistake.
    pub fn addr(&self) -> SocketAddr {
        match self.addrs.first() {
            Some(&addr) => addr,
            None => panic!("{} was started without an address to wait for", self.name),
        }
    }

    /// Every stderr line kept so far ([`Capture`]); a line still being
    /// written to a file is left out until the child has exited.
    pub fn log(&self) -> Vec<String> {
        self.lines(&self.stderr)
    }

    /// [`ChildProcess::log`], one string.
    pub fn said(&self) -> String {
        self.log().join("\n")
    }

    /// Every stdout line kept so far, as [`ChildProcess::log`].
    pub fn stdout(&self) -> Vec<String> {
        self.lines(&self.stdout)
    }

    /// The first stderr line containing `needle`, waiting up to `limit`;
    /// an error if it does not come, or the child exits without it.
    pub fn wait_for_log(&self, needle: &str, limit: Duration) -> io::Result<String> {
        let mut lines = self.wait_for_logs(needle, 1, limit)?;
        lines.pop().ok_or_else(|| io::Error::other("no line"))
    }

    /// The first `count` stderr lines containing `needle`, as
    /// [`ChildProcess::wait_for_log`].
    pub fn wait_for_logs(
        &self,
        needle: &str,
        count: usize,
        limit: Duration,
    ) -> io::Result<Vec<String>> {
        self.wait_in_log(&format!("logging {needle:?}"), limit, |log| {
            let found: Vec<String> = log
                .iter()
                .filter(|l| l.contains(needle))
                .take(count)
                .cloned()
                .collect();
            (found.len() == count).then_some(found)
        })
    }

    /// Where frontend `name` accepts, from its `frontend NAME listening on
    /// ADDR` line, waiting up to [`START_TIMEOUT`] for it: with several
    /// frontends, [`Ready::Announced`]`(1)` is over at the first one.
    pub fn frontend_addr(&self, name: &str) -> io::Result<SocketAddr> {
        let line = self.wait_for_log(&format!("frontend {name} listening on "), START_TIMEOUT)?;
        listening_addr(&line)
            .ok_or_else(|| io::Error::other(format!("no address in the line {line:?}")))
    }

    /// Polls `addr` with TCP connects until one succeeds, the child exits,
    /// or `limit` passes. The probe that succeeds is closed like a finished
    /// request, so the backend a proxy passes it to sees nothing unusual.
    pub fn wait_until_accepting(&self, addr: SocketAddr, limit: Duration) -> io::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exit_status()? {
                return Err(io::Error::other(format!(
                    "{} exited ({status}) before accepting on {addr}; it said: {}",
                    self.name,
                    self.last_words()
                )));
            }
            if let Ok(probe) = TcpStream::connect_timeout(&addr, CONNECT_POLL * 5) {
                close_politely(probe);
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} did not accept on {addr} within {limit:?}; it said: {}",
                        self.name,
                        self.last_words()
                    ),
                ));
            }
            thread::sleep(CONNECT_POLL);
        }
    }

    /// Sends `signal` (SIGTERM, SIGINT, SIGHUP...) without waiting. A child
    /// that has exited and been reaped is an error (ESRCH), never a signal
    /// to whatever process has its pid since.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        let mut child = self.lock();
        let Some(child) = child.as_mut() else {
            return Err(Errno::ESRCH.into());
        };
        if child.try_wait()?.is_some() {
            return Err(Errno::ESRCH.into());
        }
        // Our own child, not reaped (checked under the same lock).
        kill(Pid::from_raw(child.id() as libc::pid_t), signal).map_err(io::Error::from)
    }

    /// Waits up to `limit` for the child to exit; `Ok(None)` if it is still
    /// running then (it is left running). Once it has exited, its captured
    /// output is complete (its pipes drained, waiting at most 2 s).
    pub fn wait_exit(&self, limit: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exit_status()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(LOG_POLL);
        }
    }

    /// Sends SIGTERM and waits up to [`STOP_TIMEOUT`] for the exit status
    /// ([`ChildProcess::stop_with`]).
    pub fn stop(&self) -> io::Result<ExitStatus> {
        self.stop_with(Signal::SIGTERM, STOP_TIMEOUT)
    }

    /// Sends `signal` and waits up to `limit` for the exit status. A child
    /// that has already exited gives its status; one that ignores the
    /// signal is killed, tree and all, and that is an error.
    pub fn stop_with(&self, signal: Signal, limit: Duration) -> io::Result<ExitStatus> {
        if let Some(status) = self.exit_status()? {
            return Ok(status);
        }
        match self.signal(signal) {
            // It exited since the look above: its status is what we want.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            sent => sent?,
        }
        match self.wait_exit(limit)? {
            Some(status) => Ok(status),
            None => {
                self.kill();
                Err(io::Error::other(format!(
                    "{} ignored {signal} for {limit:?}; killed",
                    self.name
                )))
            }
        }
    }

    /// SIGKILL, as a crash would: no goodbye, every socket closed by the
    /// kernel; to every process of the tree (descendants first found, then
    /// the root). Returns once the root is reaped.
    pub fn kill(&self) {
        let mut child = self.lock();
        let Some(child) = child.as_mut() else { return };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let tree = procstat::tree(child.id()).unwrap_or_default();
        // Descendants are killed by pid: they are not our children, so
        // their pids could in theory be reused between the walk and the
        // kill, but the window is microseconds and they are the root's,
        // which is still alive and unreaped here.
        for &pid in tree.iter().skip(1) {
            let _ = kill(Pid::from_raw(pid as libc::pid_t), Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The exit status if the child has exited (reaping it), with its
    /// pipes then drained so that its words are complete.
    fn exit_status(&self) -> io::Result<Option<ExitStatus>> {
        let status = match self.lock().as_mut() {
            Some(child) => child.try_wait()?,
            None => None,
        };
        // Once: a pipe a grandchild holds open must not cost every later
        // call the whole wait.
        if status.is_some() && !self.settled.swap(true, Ordering::Relaxed) {
            self.stdout.wait_for_end(DRAIN_TIMEOUT);
            self.stderr.wait_for_end(DRAIN_TIMEOUT);
        }
        Ok(status)
    }

    /// The lines of `output`; a file's last line only if it is whole, or
    /// the child is gone.
    fn lines(&self, output: &Output) -> Vec<String> {
        let finished =
            matches!(output, Output::File(_)) && matches!(self.exit_status(), Ok(Some(_)));
        output.lines(finished)
    }

    /// Waits (polling, bounded by `limit`) until `found` finds what it looks
    /// for in the stderr lines; `what` says what, for the errors.
    fn wait_in_log<T>(
        &self,
        what: &str,
        limit: Duration,
        mut found: impl FnMut(&[String]) -> Option<T>,
    ) -> io::Result<T> {
        let deadline = Instant::now() + limit;
        loop {
            // Whether it has exited first, then the log: a line written just
            // before the exit is then in the log this pass reads.
            let exited = self.exit_status()?;
            if let Some(value) = found(&self.log()) {
                return Ok(value);
            }
            if let Some(status) = exited {
                return Err(io::Error::other(format!(
                    "{} exited ({status}) before {what}; it said: {}",
                    self.name,
                    self.last_words()
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} was not {what} within {limit:?}; it said: {}",
                        self.name,
                        self.last_words()
                    ),
                ));
            }
            thread::sleep(LOG_POLL);
        }
    }

    /// The first `count` addresses announced in `listening on ADDR` lines.
    fn announced(&self, count: usize, limit: Duration) -> io::Result<Vec<SocketAddr>> {
        let what = format!("announcing {count} listening address(es)");
        self.wait_in_log(&what, limit, |log| {
            let addrs: Vec<SocketAddr> = log
                .iter()
                .filter_map(|l| listening_addr(l))
                .take(count)
                .collect();
            (addrs.len() == count).then_some(addrs)
        })
    }

    /// The last stderr lines, on one line, for an error message.
    fn last_words(&self) -> String {
        let log = self.log();
        let tail = &log[log.len().saturating_sub(TAIL_LINES)..];
        one_line(&tail.join("\n"))
    }

    /// Starts a drain thread for each piped stream of `child`.
    fn drain(&self, child: &mut Child) -> io::Result<()> {
        if let Some(pipe) = child.stdout.take() {
            self.stdout.drain(&format!("{}-stdout", self.name), pipe)?;
        }
        if let Some(pipe) = child.stderr.take() {
            self.stderr.drain(&format!("{}-stderr", self.name), pipe)?;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        // A panic elsewhere while holding it leaves the Child as valid as
        // before: there is no invariant to lose.
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // A child that was not stopped (a caller that failed half-way) must
        // not outlive its owner.
        self.kill();
    }
}

/// Where a stream's lines are kept, and how to read them back.
#[derive(Debug)]
enum Output {
    Nothing,
    Memory(Arc<Kept>),
    File(PathBuf),
}

/// Lines a drain thread keeps in memory, and whether it has reached the
/// pipe's end of file.
#[derive(Debug)]
struct Kept {
    state: Mutex<KeptState>,
    ended: Condvar,
    /// `Some(n)`: only the last n lines.
    keep: Option<usize>,
}

#[derive(Debug, Default)]
struct KeptState {
    lines: VecDeque<String>,
    ended: bool,
}

impl Output {
    fn new(capture: &Capture) -> Output {
        let kept = |keep| {
            Output::Memory(Arc::new(Kept {
                state: Mutex::new(KeptState::default()),
                ended: Condvar::new(),
                keep,
            }))
        };
        match capture {
            Capture::Nothing => Output::Nothing,
            Capture::All => kept(None),
            Capture::Tail(n) => kept(Some(*n)),
            Capture::File(path) | Capture::Append(path) => Output::File(path.clone()),
        }
    }

    /// Reads `pipe` to its end on a thread of its own, keeping its lines.
    fn drain(&self, thread_name: &str, pipe: impl Read + Send + 'static) -> io::Result<()> {
        let Output::Memory(kept) = self else {
            return Ok(());
        };
        let kept = Arc::clone(kept);
        thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || {
                let mut reader = BufReader::new(pipe);
                let mut line = Vec::new();
                // Ends at the pipe's end of file, when the child (and every
                // process that inherited the pipe) has exited, or on a read
                // error; bytes that are not UTF-8 do not stop it.
                while let Ok(1..) = reader.read_until(b'\n', &mut line) {
                    let text = String::from_utf8_lossy(&line);
                    kept.push(text.trim_end_matches(['\n', '\r']).to_string());
                    line.clear();
                }
                kept.end();
            })?;
        Ok(())
    }

    /// The lines so far; from a file, the last one only if it is whole or
    /// the writer is gone (`finished`).
    fn lines(&self, finished: bool) -> Vec<String> {
        match self {
            Output::Nothing => Vec::new(),
            Output::Memory(kept) => kept.state().lines.iter().cloned().collect(),
            Output::File(path) => {
                let text = fs::read_to_string(path).unwrap_or_default();
                let whole = match (finished, text.rfind('\n')) {
                    (true, _) => text.as_str(),
                    (false, Some(end)) => &text[..end],
                    (false, None) => "",
                };
                whole.lines().map(str::to_string).collect()
            }
        }
    }

    /// Waits (at most `limit`) for the drain thread to reach the end.
    fn wait_for_end(&self, limit: Duration) {
        if let Output::Memory(kept) = self {
            let state = kept.state();
            let _ = kept
                .ended
                .wait_timeout_while(state, limit, |s| !s.ended)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Kept {
    fn state(&self) -> MutexGuard<'_, KeptState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, line: String) {
        let mut state = self.state();
        if self.keep.is_some_and(|n| state.lines.len() >= n) {
            state.lines.pop_front();
        }
        state.lines.push_back(line);
    }

    fn end(&self) {
        self.state().ended = true;
        self.ended.notify_all();
    }
}

/// The `Stdio` for `capture`: a pipe to drain, a file, or nothing.
fn stdio(capture: &Capture) -> io::Result<Stdio> {
    Ok(match capture {
        Capture::Nothing => Stdio::null(),
        Capture::All | Capture::Tail(_) => Stdio::piped(),
        Capture::File(path) => Stdio::from(fs::File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?),
        Capture::Append(path) => {
            let file = fs::OpenOptions::new().create(true).append(true).open(path);
            Stdio::from(file.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot open {} to append: {e}", path.display()),
                )
            })?)
        }
    })
}

/// Ends a readiness probe the way a client ends a request: our FIN, then
/// the reply read to its end (at most [`PROBE_DRAIN`]). A proxy passes the
/// probe on to a backend; closing abruptly would make the proxy reset that
/// backend connection in the middle of its reply, and the backend log an
/// error that has nothing to do with the measurement.
fn close_politely(probe: TcpStream) {
    let _ = probe.shutdown(Shutdown::Write);
    let _ = probe.set_read_timeout(Some(PROBE_DRAIN));
    let deadline = Instant::now() + PROBE_DRAIN;
    let mut sink = [0u8; 1024];
    // Bounded by the deadline, and by the read timeout of each read.
    while Instant::now() < deadline {
        match (&probe).read(&mut sink) {
            Ok(1..) => {}
            _ => break,
        }
    }
}

/// The address in a `... listening on ADDR ...` log line (the proxy's, the
/// fixture backend's).
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// A free port on 127.0.0.1, found by binding port 0 and closing again.
///
/// Another process could take it before the child binds it; the child then
/// fails to start and says so, and the caller may try again.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// A multi-line message on one line (for a table cell or a log line).
pub fn one_line(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let joined = joined.join(" | ");
    if joined.is_empty() {
        "(nothing)".to_string()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spawn {
        Spawn::new("shell", "sh").args(["-c", script])
    }

    #[test]
    fn a_child_that_never_listens_times_out_and_is_reaped() {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        let sleeper = Spawn::new("sleeper", "sleep").args(["30"]).start().unwrap();
        let started = Instant::now();
        let e = sleeper
            .wait_until_accepting(addr, Duration::from_millis(200))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
        let status = sleeper.stop().unwrap();
        assert!(!status.success(), "killed by SIGTERM");
        let e = sleeper.signal(Signal::SIGTERM).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "no signal once reaped");
    }

    #[test]
    fn a_child_that_exits_early_is_reported_with_its_words() {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        let e = sh("echo bad config >&2; exit 3")
            .ready(Ready::Accepting(addr), Duration::from_secs(5))
            .start()
            .unwrap_err()
            .to_string();
        assert!(e.contains("exited") && e.contains("bad config"), "{e}");
        let e = sh("echo no port >&2; exit 1")
            .ready(Ready::Announced(1), Duration::from_secs(5))
            .start()
            .unwrap_err()
            .to_string();
        assert!(e.contains("exited") && e.contains("no port"), "{e}");
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let e = Spawn::new("ghost", "/nonexistent/ghost")
            .start()
            .unwrap_err();
        assert!(e.to_string().contains("cannot start ghost"), "{e}");
    }

    #[test]
    fn announced_addresses_are_read_from_the_log() {
        let child = sh("echo 'x: listening on 127.0.0.1:7 (a)' >&2; \
             echo noise >&2; echo 'listening on [::1]:8' >&2; sleep 30")
        .ready(Ready::Announced(2), Duration::from_secs(5))
        .start()
        .unwrap();
        let expected: Vec<SocketAddr> =
            vec!["127.0.0.1:7".parse().unwrap(), "[::1]:8".parse().unwrap()];
        assert_eq!(child.addrs(), expected);
        assert_eq!(child.addr(), expected[0]);
        assert_eq!(
            child.wait_for_log("noise", Duration::ZERO).unwrap(),
            "noise"
        );
        let e = child
            .wait_for_log("absent", Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn a_finished_run_keeps_both_streams_and_a_tail_keeps_the_last_lines() {
        let ran = sh("echo out; echo err1 >&2; echo err2 >&2; exit 4")
            .stdout(Capture::All)
            .stderr(Capture::Tail(1))
            .run(Duration::from_secs(10))
            .unwrap();
        assert_eq!(ran.status.code(), Some(4));
        assert_eq!(ran.stdout, ["out"]);
        assert_eq!(ran.stderr, ["err2"]);
        let e = Spawn::new("sleeper", "sleep")
            .args(["30"])
            .run(Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn stderr_in_a_file_is_all_there_after_the_exit() {
        let path = std::env::temp_dir().join(format!("child-test-{}.log", std::process::id()));
        let child = sh("echo one >&2; printf 'two' >&2")
            .stderr(Capture::File(path.clone()))
            .start()
            .unwrap();
        assert!(child.wait_exit(Duration::from_secs(10)).unwrap().is_some());
        assert_eq!(child.log(), ["one", "two"]);
        let _ = fs::remove_file(&path);
    }

    #[test]
    fn the_listening_line_gives_the_address() {
        let line =
            "2026-11-30T11:09:31.000Z info  [main] listening on 127.0.0.1:41234 (epoll, 2 workers)";
        assert_eq!(
            listening_addr(line),
            Some("127.0.0.1:41234".parse().unwrap())
        );
        assert_eq!(
            listening_addr("listening on [::1]:80"),
            Some("[::1]:80".parse().unwrap())
        );
        assert_eq!(listening_addr("listening on nowhere"), None);
        assert_eq!(listening_addr("accepting"), None);
    }

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\n\n  b \n"), "a | b");
        assert_eq!(one_line(""), "(nothing)");
    }
}
