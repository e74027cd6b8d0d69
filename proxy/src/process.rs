//! Running a proxy as a child process: start it, learn the address it
//! listens on, stop it with SIGTERM.
//!
//! The demo runs every mode this way (each mode runs until it is stopped,
//! so it needs a process of its own), and the end-to-end tests do the same
//! to check the real binary, signals and exit status included. The proxy
//! logs `listening on ADDR` once it accepts; with `--listen 127.0.0.1:0`
//! the kernel picks a free port and that line is how we learn it.

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a starting proxy may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping proxy may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A proxy running as a child process.
#[derive(Debug)]
pub struct ProxyProcess {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl ProxyProcess {
    /// Starts `exe` with `args` and waits until it logs `listening on ADDR`.
    pub fn start(exe: &Path, args: &[String]) -> io::Result<ProxyProcess> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| io::Error::other("no stderr pipe"))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let lines = log.clone();
        // Keeps draining stderr for the child's whole life, so a chatty
        // child never blocks on a full pipe.
        thread::Builder::new()
            .name("proxy-stderr".into())
            .spawn(move || {
                let mut addr_tx = Some(addr_tx);
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let addr = listening_addr(&line);
                    // Stored before the address is announced, so whoever
                    // has the address also finds this line in the log.
                    if let Ok(mut lines) = lines.lock() {
                        lines.push(line);
                    }
                    if let (Some(addr), Some(tx)) = (addr, addr_tx.take()) {
                        let _ = tx.send(addr);
                    }
                }
            })?;
        match addr_rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => Ok(ProxyProcess { child, addr, log }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let said = log.lock().map(|l| l.join("\n")).unwrap_or_default();
                Err(io::Error::other(format!(
                    "the proxy did not report a listening address within {START_TIMEOUT:?}; it said:\n{said}"
                )))
            }
        }
    }

    /// Where the proxy accepts connections.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the proxy has written to stderr so far, one entry per line.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Where frontend `name` accepts connections (from its `frontend NAME
    /// listening on ADDR` line), waiting for the line up to the start
    /// timeout: with several frontends, [`ProxyProcess::start`] returns as
    /// soon as the first one is announced.
    pub fn frontend_addr(&self, name: &str) -> io::Result<SocketAddr> {
        let needle = format!("frontend {name} listening on ");
        let line = self.wait_for_log(&needle, START_TIMEOUT).ok_or_else(|| {
            io::Error::other(format!(
                "the proxy did not announce frontend {name:?} within {START_TIMEOUT:?}"
            ))
        })?;
        listening_addr(&line)
            .ok_or_else(|| io::Error::other(format!("no address in the line {line:?}")))
    }

    /// The first log line containing `needle`, waiting up to `limit` for it
    /// (polling every 10 ms); `None` if it did not come.
    pub fn wait_for_log(&self, needle: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self.log().into_iter().find(|l| l.contains(needle)) {
                return Some(line);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` (SIGTERM, SIGINT, SIGHUP...) without waiting.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        let pid = Pid::from_raw(self.child.id() as i32);
        kill(pid, signal).map_err(io::Error::from)
    }

    /// Waits up to `limit` for the process to exit; `Ok(None)` if it is
    /// still running then (it is left running).
    pub fn wait_exit(&mut self, limit: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM and waits for the exit status (killing the process if
    /// it does not exit in time, and saying so).
    pub fn stop(mut self) -> io::Result<ExitStatus> {
        let pid = Pid::from_raw(self.child.id() as i32);
        kill(pid, Signal::SIGTERM).map_err(io::Error::from)?;
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(io::Error::other(format!(
                    "the proxy ignored SIGTERM for {STOP_TIMEOUT:?}; killed"
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        // A process that was not stopped (a test that failed half-way) must
        // not outlive its owner.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The address in a `... listening on ADDR ...` log line.
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
