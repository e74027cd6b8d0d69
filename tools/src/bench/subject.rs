//! What a row of a table measures: the load client's connections go
//! *through* a subject, or straight to the backends (`direct`).
//!
//! ```text
//!   direct:       load client ───────────────────────────▶ fixture backend
//!   ours / peer:  load client ──▶ proxy (a child process) ──▶ fixture backends
//! ```
//!
//! Ours is the `proxy` binary given by `--proxy`, started in one of its
//! modes on a free loopback port. This crate links the proxy, but the
//! harness still runs it as a child, built in release, like the peers: its
//! memory, CPU time and descriptors must be its own, apart from the load
//! client's, and measured the same way as HAProxy's and nginx's. The peers are HAProxy and nginx ([`super::peers`]).
//! Each measurement starts a fresh process and stops it afterwards, so its
//! peak memory and CPU time belong to that measurement alone.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::peers::{self, Installed, Peer, RunningPeer};
use crate::process::child::{
    self, Capture, ChildProcess, Ready, START_TIMEOUT, TAIL_LINES, free_port,
};

/// The subject of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Subject {
    /// No proxy: the client connects to the first backend.
    Direct,
    /// Ours, `--mode single` (milestone 1: one connection at a time).
    Single,
    /// Ours, `--mode pool --threads N` (milestones 2 to 4).
    Pool(usize),
    /// Ours, `--mode epoll --workers N` (milestone 5), with the default
    /// `--splice auto`: bulk streams move by splice(2) after their first read.
    Epoll(usize),
    /// Ours, `--mode epoll --workers N --splice off`: every byte copied
    /// through user space, to weigh what splicing saves.
    EpollCopy(usize),
    /// Ours, `--mode states` (milestone 5 by hand: one thread, no runtime).
    States,
    /// The `--baseline` binary (an earlier build of ours), `--mode epoll
    /// --workers N`: a change's cost, measured in the same rounds.
    Baseline(usize),
    /// HAProxy or nginx.
    Peer(Peer),
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Direct => f.write_str("direct (no proxy)"),
            Subject::Single => f.write_str("single"),
            Subject::Pool(threads) => write!(f, "pool {threads}"),
            Subject::Epoll(workers) => write!(f, "epoll {workers}"),
            Subject::EpollCopy(workers) => write!(f, "epoll {workers}, splice off"),
            Subject::States => f.write_str("states"),
            Subject::Baseline(workers) => write!(f, "epoll {workers}, baseline"),
            Subject::Peer(peer) => peer.fmt(f),
        }
    }
}

impl Subject {
    /// One of our proxy's modes.
    pub fn is_ours(self) -> bool {
        matches!(
            self,
            Subject::Single
                | Subject::Pool(_)
                | Subject::Epoll(_)
                | Subject::EpollCopy(_)
                | Subject::States
                | Subject::Baseline(_)
        )
    }

    /// How many requests can be in progress at once: the blocking modes
    /// hold one thread per connection, so at most their thread count
    /// (single: one); an event loop, or a peer, as many as there are clients.
    pub fn parallelism(self, clients: usize) -> usize {
        match self {
            Subject::Single => 1,
            Subject::Pool(threads) => threads.min(clients),
            _ => clients,
        }
    }

    /// The Little's-law bound of a closed loop of `clients` through this
    /// subject against backends that take `delay` per request: at most
    /// `parallelism / delay` requests per second.
    pub fn bound(self, clients: usize, delay: Duration) -> f64 {
        let secs = delay.as_secs_f64();
        if secs > 0.0 {
            self.parallelism(clients) as f64 / secs
        } else {
            f64::INFINITY
        }
    }

    /// How long a request waits in the queue when every client is busy:
    /// `clients / parallelism` requests ahead of it, `delay` each.
    pub fn queue_wait(self, clients: usize, delay: Duration) -> Duration {
        let parallelism = self.parallelism(clients).max(1);
        delay.mul_f64(clients.div_ceil(parallelism) as f64)
    }

    /// Whether this subject's rows race the peers' on their ratio to
    /// direct (direct itself, our epoll modes and the peers), and so are
    /// worth measuring more than once where a single run would be noise.
    pub fn is_compared(self) -> bool {
        matches!(
            self,
            Subject::Direct
                | Subject::Epoll(_)
                | Subject::EpollCopy(_)
                | Subject::Baseline(_)
                | Subject::Peer(_)
        )
    }

    /// The proxy's command-line flags for this mode (empty if not ours).
    fn flags(self) -> Vec<String> {
        let flags: Vec<String> = match self {
            Subject::Single => vec!["--mode".into(), "single".into()],
            // A short drain: the harness stops a subject once its clients
            // are done, and a straggler must not hold it for 30 s.
            Subject::Pool(threads) => vec![
                "--mode".into(),
                "pool".into(),
                "--threads".into(),
                threads.to_string(),
                "--grace".into(),
                "2s".into(),
            ],
            // No access log: the peers' configurations log nothing either,
            // so all three are measured doing the same work.
            Subject::Epoll(workers) => vec![
                "--mode".into(),
                "epoll".into(),
                "--workers".into(),
                workers.to_string(),
                "--grace".into(),
                "2s".into(),
                "--access-log".into(),
                "off".into(),
            ],
            Subject::Baseline(workers) => Subject::Epoll(workers).flags(),
            Subject::EpollCopy(workers) => {
                let mut flags = Subject::Epoll(workers).flags();
                flags.extend(["--splice".into(), "off".into()]);
                flags
            }
            // It has no access log to turn off.
            Subject::States => vec![
                "--mode".into(),
                "states".into(),
                "--grace".into(),
                "2s".into(),
            ],
            Subject::Direct | Subject::Peer(_) => vec![],
        };
        flags
    }
}

/// What starting a subject needs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Our proxy binary.
    pub proxy: PathBuf,
    /// An earlier build of it (`--baseline`), if one is measured beside it.
    pub baseline: Option<PathBuf>,
    /// The peers that can run.
    pub installed: Installed,
    /// The descriptor limit children inherit.
    pub nofile: u64,
}

/// A started subject.
#[derive(Debug)]
pub enum Running {
    /// Nothing runs: the client talks to this backend.
    Direct(SocketAddr),
    /// Our proxy, and where it listens.
    Ours(ChildProcess, SocketAddr),
    /// A peer.
    Peer(RunningPeer),
}

impl Running {
    /// Where the load client connects.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Running::Direct(addr) | Running::Ours(_, addr) => *addr,
            Running::Peer(peer) => peer.addr,
        }
    }

    /// The proxy's process id (the root of its tree), if there is a proxy.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Running::Direct(_) => None,
            Running::Ours(process, _) => Some(process.pid()),
            Running::Peer(peer) => Some(peer.process.pid()),
        }
    }

    /// Stops the proxy with SIGTERM and says what went wrong, if anything:
    /// our proxy must exit with status 0 (its contract); a peer must only
    /// exit (HAProxy, for one, ends by the signal itself).
    pub fn stop(self) -> Option<String> {
        let (process, ours) = match self {
            Running::Direct(_) => return None,
            Running::Ours(process, _) => (process, true),
            Running::Peer(peer) => (peer.process, false),
        };
        match process.stop() {
            Ok(status) if status.success() || !ours => None,
            Ok(status) => Some(format!("the proxy exited with {status} after SIGTERM")),
            Err(e) => Some(e.to_string()),
        }
    }
}

/// Starts `subject` in front of `backends` and waits until it accepts.
pub fn start(setup: &Setup, subject: Subject, backends: &[SocketAddr]) -> io::Result<Running> {
    let first = *backends
        .first()
        .ok_or_else(|| io::Error::other("no backend to measure against"))?;
    // A free port can be taken by someone else before the child binds it;
    // one more try with another port makes that race harmless.
    let mut last_error = None;
    for _attempt in 0..2 {
        let started = match subject {
            Subject::Direct => return Ok(Running::Direct(first)),
            Subject::Peer(peer) => {
                peers::start(&setup.installed, peer, backends, setup.nofile).map(Running::Peer)
            }
            ours => start_ours(setup, ours, backends),
        };
        match started {
            Ok(running) => return Ok(running),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("could not start")))
}

fn start_ours(setup: &Setup, subject: Subject, backends: &[SocketAddr]) -> io::Result<Running> {
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let mut args = vec!["--listen".to_string(), listen.to_string()];
    args.extend(subject.flags());
    for backend in backends {
        args.extend(["--backend".to_string(), backend.to_string()]);
    }
    let binary = match (subject, &setup.baseline) {
        (Subject::Baseline(_), Some(baseline)) => baseline,
        (Subject::Baseline(_), None) => return Err(io::Error::other("no --baseline binary")),
        _ => &setup.proxy,
    };
    let process = child::proxy(binary, &args)
        .stderr(Capture::Tail(TAIL_LINES))
        .ready(Ready::Accepting(listen), START_TIMEOUT)
        .start()?;
    Ok(Running::Ours(process, listen))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(50);

    #[test]
    fn bounds_follow_littles_law() {
        assert_eq!(Subject::Single.bound(64, DELAY), 20.0);
        assert_eq!(Subject::Pool(8).bound(64, DELAY), 160.0);
        assert_eq!(
            Subject::Pool(64).bound(16, DELAY),
            320.0,
            "fewer clients than threads"
        );
        assert_eq!(Subject::Epoll(1).bound(256, DELAY), 5120.0);
        assert_eq!(Subject::Direct.bound(1000, DELAY), 20_000.0);
        assert!(Subject::Epoll(1).bound(64, Duration::ZERO).is_infinite());
    }

    #[test]
    fn queue_waits_grow_with_clients_per_thread() {
        assert_eq!(
            Subject::Single.queue_wait(64, DELAY),
            Duration::from_millis(3200)
        );
        assert_eq!(
            Subject::Pool(8).queue_wait(1000, DELAY),
            Duration::from_millis(6250)
        );
        assert_eq!(Subject::Epoll(1).queue_wait(1000, DELAY), DELAY);
    }

    #[test]
    fn names_and_flags() {
        assert_eq!(Subject::Pool(8).to_string(), "pool 8");
        assert_eq!(
            Subject::Epoll(2).flags(),
            [
                "--mode",
                "epoll",
                "--workers",
                "2",
                "--grace",
                "2s",
                "--access-log",
                "off"
            ]
        );
        assert!(Subject::Direct.flags().is_empty());
        assert_eq!(Subject::EpollCopy(1).to_string(), "epoll 1, splice off");
        assert_eq!(Subject::EpollCopy(1).flags()[8..], ["--splice", "off"]);
        assert!(Subject::EpollCopy(2).is_ours());
        assert_eq!(Subject::States.to_string(), "states");
        assert_eq!(Subject::States.flags()[..2], ["--mode", "states"]);
        assert!(Subject::States.is_ours());
        assert_eq!(Subject::States.bound(256, DELAY), 5120.0, "an event loop");
        assert!(Subject::Single.is_ours() && !Subject::Direct.is_ours());
    }
}
