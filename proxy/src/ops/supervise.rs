//! The proxy as PID 1 (in a container, or any PID namespace): a small
//! parent that stays, so that an upgrade does not take the service down.
//!
//! An upgrade ends with the old process exiting once the new one serves.
//! As PID 1 of its namespace, that exit is the namespace's end: the kernel
//! kills every other process in it, the new proxy included. So the proxy
//! started as PID 1 in the epoll mode does not serve itself: it starts
//! itself again as its child, which serves, and stays as the parent, as
//! HAProxy's master (`-W`) does:
//!
//! ```text
//!   PID 1: this supervisor ── spawns ──▶ proxy (serves; upgrades by SIGUSR2 as usual)
//!     signals (TERM, INT, HUP, USR1, USR2, QUIT) ──▶ forwarded to the serving process
//!     NOTIFY_SOCKET (its own) ◀── MAINPID=N from a new process that took over
//!     SIGCHLD ──▶ reaps every child and orphan (PID 1's duty)
//!   exits, with the serving process's status, once no child is left
//! ```
//!
//! Which process serves is learned the way systemd learns it: the
//! supervisor gives its children a notification socket of its own
//! (`NOTIFY_SOCKET`), and a new process says `MAINPID=` on it before the
//! old one can exit (ops/upgrade/notify.rs). A `NOTIFY_SOCKET` the
//! supervisor was itself given gets every message passed on.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::Command;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::shutdown;

/// Whether this process is PID 1 of its namespace.
pub fn is_pid_one() -> bool {
    std::process::id() == 1
}

/// Runs the supervisor (module docs) for `args`; returns the exit status of
/// the last serving process.
pub fn run(args: &[String]) -> io::Result<i32> {
    let mut signals = shutdown::handled_set();
    signals.add(Signal::SIGCHLD);
    signals.thread_block().map_err(io::Error::from)?;
    let signal_fd = SignalFd::with_flags(&signals, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
    // A folder of its own: every supervisor is pid 1 in its namespace, so
    // a name made of the pid would be shared by all those on one host.
    let folder = nix::unistd::mkdtemp(&std::env::temp_dir().join("proxy-supervisor-XXXXXX"))?;
    let notify_path = folder.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path)?;
    notify.set_nonblocking(true)?;
    let upstream = std::env::var_os("NOTIFY_SOCKET").map(PathBuf::from);
    let child = Command::new(std::env::current_exe()?)
        .args(args)
        .env("NOTIFY_SOCKET", &notify_path)
        .spawn()?;
    let mut supervisor = Supervisor {
        serving: Pid::from_raw(child.id() as i32),
        last_status: 0,
        upstream,
    };
    crate::info!(
        "supervisor: PID 1 of its namespace: pid {} serves, and takes over from itself on \
         SIGUSR2 while this process stays (signals are passed on to the serving process)",
        supervisor.serving
    );
    let status = supervisor.watch(&signal_fd, &notify);
    let _ = std::fs::remove_dir_all(&folder);
    status
}

/// What the supervisor knows.
struct Supervisor {
    /// The process that serves now.
    serving: Pid,
    /// The exit status of the last serving process that exited.
    last_status: i32,
    /// Where the supervisor's own notifications go, if anyone listens.
    upstream: Option<PathBuf>,
}

impl Supervisor {
    /// Waits on signals and notifications until no child is left.
    fn watch(&mut self, signals: &SignalFd, notify: &UnixDatagram) -> io::Result<i32> {
        loop {
            let mut fds = [
                PollFd::new(signals.as_fd(), PollFlags::POLLIN),
                PollFd::new(notify.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            self.read_notifications(notify);
            while let Ok(Some(info)) = signals.read_signal() {
                let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                if signal != Signal::SIGCHLD {
                    // A serving process that is gone takes nothing.
                    let _ = kill(self.serving, signal);
                }
            }
            if !self.reap()? {
                return Ok(self.last_status);
            }
        }
    }

    /// Takes `MAINPID=` from the notifications, and passes them all on.
    fn read_notifications(&mut self, notify: &UnixDatagram) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = notify.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]);
            for line in text.lines() {
                if let Some(pid) = line.strip_prefix("MAINPID=").and_then(|p| p.parse().ok()) {
                    self.serving = Pid::from_raw(pid);
                    crate::info!("supervisor: pid {pid} serves now");
                }
            }
            if let Some(upstream) = &self.upstream {
                let _ = UnixDatagram::unbound().and_then(|s| s.send_to(&buf[..n], upstream));
            }
        }
    }

    /// Reaps every child (and orphan) that exited; whether any is left.
    fn reap(&mut self) -> io::Result<bool> {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return Ok(true),
                Ok(WaitStatus::Exited(pid, code)) => self.exited(pid, code),
                Ok(WaitStatus::Signaled(pid, signal, _)) => self.exited(pid, 128 + signal as i32),
                Ok(_) => {}
                Err(nix::errno::Errno::ECHILD) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn exited(&mut self, pid: Pid, status: i32) {
        if pid == self.serving {
            self.last_status = status;
            crate::info!("supervisor: the serving pid {pid} exited with status {status}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_process_is_not_pid_one() {
        assert!(!is_pid_one());
    }

    #[test]
    fn a_mainpid_notification_names_the_serving_process() {
        let path = std::env::temp_dir().join(format!("proxy-sup-test-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let notify = UnixDatagram::bind(&path).expect("bind");
        notify.set_nonblocking(true).expect("non-blocking");
        let mut supervisor = Supervisor {
            serving: Pid::from_raw(10),
            last_status: 0,
            upstream: None,
        };
        let sender = UnixDatagram::unbound().expect("a socket");
        sender.send_to(b"MAINPID=42\nREADY=1", &path).expect("send");
        supervisor.read_notifications(&notify);
        assert_eq!(supervisor.serving, Pid::from_raw(42));
        supervisor.exited(Pid::from_raw(42), 3);
        assert_eq!(supervisor.last_status, 3);
        let _ = std::fs::remove_file(&path);
    }
}
