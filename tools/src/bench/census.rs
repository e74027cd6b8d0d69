//! The system-call census: how many system calls each proxy
//! makes per new connection and per keep-alive request, one thread each,
//! counted by `strace -c` on the process that does the work.
//!
//! ```text
//!   start the subject ──▶ warm-up ──▶ strace -c -f -p PID ──▶ counted load ──▶ SIGINT ──▶ strace's table
//!   (fresh, 1 thread)    (untraced)   ("Process N attached")   (N requests)    (strace     ÷ N
//!                                                                              writes it)
//! ```
//!
//! - **Which process.** Ours and HAProxy are one process with threads, and
//!   `-f` on its pid follows them all. nginx's master only reads signals
//!   and forks; its workers relay, so they are traced, one `-p` each (the
//!   master's children, from /proc).
//! - **Why a warm-up.** A fresh process spends calls once: growing its
//!   heap, creating its pools, its first `epoll_ctl` on the listener. A
//!   load balancer lives in the steady state, and that is what is counted.
//! - **What it does not measure: speed.** Every call of the traced process
//!   stops for the tracer (here about ten times slower); only the counts
//!   mean anything. The load is the same closed loop as workload C's, so
//!   each count is the calls one request costs, whatever its timing.
//!
//! strace's tables are kept beside the report's charts, for reference.
//! Without strace, or where ptrace is not allowed, there is no census, and
//! the report says why.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::load::Pattern;
use crate::process::child::{Capture, ChildProcess, STOP_TIMEOUT, Spawn, TAIL_LINES};
use crate::process::procstat;
use backend::fixture::{Fixture, FixtureMode, FixtureOptions};

use super::measure::{Load, Stop, closed_loop, measure};
use super::peers::{PeerKind, find_program, output_of};
use super::report::results::{Census, CensusRow, Counted, Outcome};
use super::sizes::Sizes;
use super::strace::Summary;
use super::subject::{Running, Setup, Subject};
use super::workloads::{peers_at, progress};

/// What to run when strace is missing.
pub const INSTALL_HINT: &str = "apt-get install strace";

/// How long strace may take to attach to every process it was given.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// After the counted load, before strace stops: the proxy's last closes of
/// the last connections, which the client does not wait for, are counted.
const SETTLE: Duration = Duration::from_millis(300);

/// Runs the census for our epoll proxy at one worker, the states mode (the
/// same work by hand, level-triggered: its `epoll_ctl` and `epoll_wait`
/// beside the edge-triggered runtime's), and each installed peer at one
/// thread; strace's tables go to `out/bench/`.
pub fn census(setup: &Setup, sizes: &Sizes, out: &Path) -> io::Result<Census> {
    let mut census = Census {
        strace: Err(String::new()),
        rows: Vec::new(),
    };
    let strace = match usable_strace() {
        Ok((program, version)) => {
            census.strace = Ok(version);
            program
        }
        Err(why) => {
            eprintln!("bench: the system-call census will not run: {why}");
            census.strace = Err(why);
            return Ok(census);
        }
    };
    let dir = out.join("bench");
    fs::create_dir_all(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let replies = Fixture::start(3, FixtureOptions::at_once(FixtureMode::Reply))?;
    let echoes = Fixture::start(3, FixtureOptions::at_once(FixtureMode::Echo))?;
    let counter = Counter {
        strace: &strace,
        setup,
        sizes,
        dir: &dir,
    };
    let mut subjects = vec![Subject::Epoll(1), Subject::States];
    if setup.baseline.is_some() {
        subjects.push(Subject::Baseline(1));
    }
    subjects.extend(peers_at(setup, &[1]));
    for subject in subjects {
        census
            .rows
            .push(counter.row(subject, replies.addrs(), echoes.addrs()));
    }
    replies.stop();
    echoes.stop();
    Ok(census)
}

/// strace, and its version, if it is installed and may attach to a
/// running process here: the probe attaches it to a `sleep` of our own.
fn usable_strace() -> Result<(PathBuf, String), String> {
    let program =
        find_program("strace").ok_or_else(|| format!("strace not found; {INSTALL_HINT}"))?;
    let text = output_of(&program, &["-V"]).map_err(|e| e.to_string())?;
    // `strace -- version 6.1` says `strace 6.1`.
    let version = text
        .lines()
        .next()
        .unwrap_or("strace")
        .replace(" -- version", "")
        .trim()
        .to_string();
    let sleeper = Spawn::new("sleep", "sleep")
        .args(["30"])
        .start()
        .map_err(|e| e.to_string())?;
    let probe = attach(&program, &[sleeper.pid()], Path::new("/dev/null")).map_err(|e| {
        format!(
            "strace cannot attach to a running process here (ptrace not permitted: run as root, \
             or allow it with `sysctl kernel.yama.ptrace_scope=0`, or give a container \
             CAP_SYS_PTRACE): {e}"
        )
    })?;
    // The probe's work is done once it attached; how it ends does not matter.
    let _ = probe.stop_with(Signal::SIGINT, STOP_TIMEOUT);
    Ok((program, version))
}

/// Starts `strace -c -f -o summary -p PID...` and waits until it has
/// attached to each of `pids` (it says `Process N attached` once per pid).
fn attach(strace: &Path, pids: &[u32], summary: &Path) -> io::Result<ChildProcess> {
    let mut args = vec![
        "-c".to_string(),
        "-f".to_string(),
        "-o".to_string(),
        summary.display().to_string(),
    ];
    for pid in pids {
        args.extend(["-p".to_string(), pid.to_string()]);
    }
    let tracer = Spawn::new("strace", strace)
        .args(args)
        .stderr(Capture::Tail(TAIL_LINES))
        .start()?;
    tracer.wait_for_logs(" attached", pids.len(), ATTACH_TIMEOUT)?;
    Ok(tracer)
}

/// The processes to trace in `running`: its workers.
fn workers(subject: Subject, running: &Running) -> io::Result<Vec<u32>> {
    let root = running
        .pid()
        .ok_or_else(|| io::Error::other("no proxy process to trace"))?;
    let Subject::Peer(peer) = subject else {
        return Ok(vec![root]);
    };
    if peer.kind != PeerKind::Nginx {
        return Ok(vec![root]);
    }
    // The master's descendants are its workers (no cache manager without
    // a cache), all started by the end of the warm-up.
    let workers: Vec<u32> = procstat::tree(root)?.into_iter().skip(1).collect();
    if workers.is_empty() {
        return Err(io::Error::other("nginx has no worker process to trace"));
    }
    Ok(workers)
}

/// What each counted run needs.
struct Counter<'a> {
    strace: &'a Path,
    setup: &'a Setup,
    sizes: &'a Sizes,
    /// Where strace's tables go.
    dir: &'a Path,
}

impl Counter<'_> {
    /// Both counts of `subject`, each on a fresh process.
    fn row(&self, subject: Subject, replies: &[SocketAddr], echoes: &[SocketAddr]) -> CensusRow {
        let sizes = self.sizes;
        let connect = self.count(
            subject,
            replies,
            Pattern::NewConnection,
            sizes.census_connections,
            "connections",
        );
        progress(
            "census, connections",
            subject,
            &connect,
            calls_per("connection"),
        );
        let keep_alive = self.count(
            subject,
            echoes,
            Pattern::KeepAlive {
                per_connection: sizes.census_per_connection,
            },
            sizes.census_requests,
            "keep-alive",
        );
        progress(
            "census, keep-alive",
            subject,
            &keep_alive,
            calls_per("request"),
        );
        CensusRow {
            subject,
            connect,
            keep_alive,
        }
    }

    /// One counted run: `requests` of `pattern` through a fresh `subject`.
    fn count(
        &self,
        subject: Subject,
        backends: &[SocketAddr],
        pattern: Pattern,
        requests: usize,
        what: &str,
    ) -> Outcome<Counted> {
        let file = format!("strace-{}-{what}.txt", slug(subject));
        let path = self.dir.join(&file);
        measure(self.setup, subject, backends, |running| {
            let (summary, load) = self.trace(subject, running, pattern, requests, &path)?;
            Ok(Counted {
                summary,
                load,
                raw: format!("bench/{file}"),
            })
        })
    }

    /// Warms `running` up, then counts its calls during `requests` more.
    fn trace(
        &self,
        subject: Subject,
        running: &Running,
        pattern: Pattern,
        requests: usize,
        summary: &Path,
    ) -> io::Result<(Summary, crate::load::LoadReport)> {
        let load = |requests| Load {
            clients: self.sizes.cost_clients,
            stop: Stop::Requests(requests),
            timeout: self.sizes.timeout,
            pattern,
        };
        closed_loop(running.addr(), &load(self.sizes.census_warmup))?;
        let tracer = attach(self.strace, &workers(subject, running)?, summary)?;
        let counted = closed_loop(running.addr(), &load(requests));
        thread::sleep(SETTLE);
        // SIGINT: strace detaches, writes its table and exits (with the
        // signal's status, which says nothing about the table).
        tracer.stop_with(Signal::SIGINT, STOP_TIMEOUT)?;
        let counted = counted?;
        let text = fs::read_to_string(summary).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot read {}: {e}", summary.display()))
        })?;
        let table = Summary::parse(&text).map_err(io::Error::other)?;
        Ok((table, counted))
    }
}

/// A progress line's summary of a count: "13.07 calls per connection".
fn calls_per(unit: &'static str) -> impl Fn(&Counted) -> String {
    move |c| {
        let calls = c.per_request(c.summary.total().calls);
        format!("{calls:.2} calls per {unit}")
    }
}

/// `subject` as part of a file name: `epoll-1`, `haproxy-nbthread-1`.
fn slug(subject: Subject) -> String {
    let name: String = subject
        .to_string()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    name.split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::peers::Peer;

    #[test]
    fn file_names_say_the_subject() {
        assert_eq!(slug(Subject::Epoll(1)), "epoll-1");
        let nginx = Peer {
            kind: PeerKind::Nginx,
            threads: 1,
        };
        assert_eq!(slug(Subject::Peer(nginx)), "nginx-1-worker");
        assert_eq!(slug(Subject::Direct), "direct-no-proxy");
        assert_eq!(slug(Subject::States), "states");
    }
}
