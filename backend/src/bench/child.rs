//! A server under test as a child process: start it, wait until it
//! accepts connections, stop it with a signal, and never leave it behind.
//!
//! ```text
//!   spawn ──▶ connect-poll 127.0.0.1:PORT ──▶ measure ──▶ SIGTERM ──▶ wait (bounded)
//!             every 20 ms, for at most 10 s                            └─▶ SIGKILL the tree
//! ```
//!
//! Three things make this safe to run hundreds of times in a row:
//!
//! - **Readiness by connecting.** Every server here (ours, HAProxy, nginx)
//!   is started on a port we chose, so "ready" means one thing for all of
//!   them: a TCP connect to that port succeeds. The poll is bounded, and it
//!   gives up early, with the child's own words, if the child exits (a bad
//!   configuration, a port already taken). The probe that succeeds is
//!   closed like a finished request, so the backend it reached sees nothing
//!   unusual.
//! - **Kill on drop.** If a measurement fails half-way, dropping the
//!   [`ChildProcess`] kills the whole process tree (nginx's workers too)
//!   and reaps it.
//! - **Death with the parent.** Each child asks the kernel for SIGKILL when
//!   the thread that started it dies (`PR_SET_PDEATHSIG`), so a harness
//!   killed by a watchdog leaves no server holding ports.
//!
//! The child's stderr is drained on a thread into a bounded tail, so a
//! chatty server never blocks on a full pipe and a failure can quote what
//! it said.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::procstat;

/// How long a server may take to start accepting.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after the stop signal.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two connect attempts while waiting for a server.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How long a readiness probe waits for the reply to its empty request.
const PROBE_DRAIN: Duration = Duration::from_secs(2);
/// How many of the child's last stderr lines are kept.
const TAIL_LINES: usize = 40;

/// A free port on 127.0.0.1, found by binding port 0 and closing again.
///
/// Another process could take it before the child binds it; the child then
/// fails to start and says so, and the caller may try again.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// A server running as a child process.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Child,
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl ChildProcess {
    /// Starts `program` with `args`; `name` is what messages call it.
    pub fn spawn(name: &str, program: &Path, args: &[String]) -> io::Result<ChildProcess> {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
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
        let mut child = command
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let lines = tail.clone();
            let drained = thread::Builder::new()
                .name(format!("{name}-stderr"))
                .spawn(move || {
                    // Ends at the pipe's end of file, when the child (and
                    // every process that inherited its stderr) has exited.
                    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                        if let Ok(mut lines) = lines.lock() {
                            if lines.len() == TAIL_LINES {
                                lines.pop_front();
                            }
                            lines.push_back(line);
                        }
                    }
                });
            if let Err(e) = drained {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        Ok(ChildProcess {
            name: name.to_string(),
            child,
            tail,
        })
    }

    /// The child's process id (the root of its tree).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines the child wrote to stderr, joined.
    pub fn said(&self) -> String {
        self.tail
            .lock()
            .map(|lines| lines.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// Polls `addr` with TCP connects until one succeeds, the child exits,
    /// or `limit` passes.
    pub fn wait_until_accepting(&mut self, addr: SocketAddr, limit: Duration) -> io::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                // Give the drain a moment to collect the last words.
                thread::sleep(Duration::from_millis(50));
                return Err(io::Error::other(format!(
                    "{} exited ({status}) before accepting on {addr}; it said: {}",
                    self.name,
                    one_line(&self.said())
                )));
            }
            if let Ok(probe) = TcpStream::connect_timeout(&addr, POLL_INTERVAL * 5) {
                close_politely(probe);
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} did not accept on {addr} within {limit:?}; it said: {}",
                        self.name,
                        one_line(&self.said())
                    ),
                ));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Sends `signal` and waits (at most [`STOP_TIMEOUT`]) for the exit
    /// status. A child that ignores it is killed, tree and all, and that is
    /// an error.
    pub fn stop(mut self, signal: i32) -> io::Result<ExitStatus> {
        let pid = Pid::from_raw(self.child.id() as libc::pid_t);
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        // Our own child's pid, not yet reaped (so the pid cannot have been
        // reused). A number that is no signal fails as kill(2) would: EINVAL.
        kill(pid, Signal::try_from(signal)?)?;
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.kill_tree();
                return Err(io::Error::other(format!(
                    "{} ignored signal {signal} for {STOP_TIMEOUT:?}; killed",
                    self.name
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL to every process of the tree (workers first found, then the
    /// root), and reap the root.
    fn kill_tree(&mut self) {
        let tree = procstat::tree(self.child.id()).unwrap_or_default();
        // Children of the root are killed by pid: they are not our
        // children, so their pids could in theory be reused between the
        // walk and the kill, but the window is microseconds and they are
        // the root's, which is still alive and unreaped here.
        for &pid in tree.iter().skip(1) {
            let _ = kill(Pid::from_raw(pid as libc::pid_t), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill_tree();
        }
    }
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

    #[test]
    fn a_child_that_never_listens_times_out_and_is_reaped() {
        let port = free_port().unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut child =
            ChildProcess::spawn("sleeper", Path::new("sleep"), &["30".to_string()]).unwrap();
        let started = Instant::now();
        let e = child
            .wait_until_accepting(addr, Duration::from_millis(200))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
        let status = child.stop(libc::SIGTERM).unwrap();
        assert!(!status.success(), "killed by SIGTERM");
    }

    #[test]
    fn a_child_that_exits_early_is_reported_with_its_words() {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        let args = ["-c".to_string(), "echo bad config >&2; exit 3".to_string()];
        let mut child = ChildProcess::spawn("shell", Path::new("sh"), &args).unwrap();
        let e = child
            .wait_until_accepting(addr, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("exited") && e.contains("bad config"), "{e}");
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let e = ChildProcess::spawn("ghost", Path::new("/nonexistent/ghost"), &[]).unwrap_err();
        assert!(e.to_string().contains("cannot start ghost"), "{e}");
    }

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\n\n  b \n"), "a | b");
        assert_eq!(one_line(""), "(nothing)");
    }
}
