//! One measurement, the same way every time:
//!
//! ```text
//!   start the subject ──▶ CPU ticks of its tree ──▶ run the load ──▶ CPU ticks, VmHWM ──▶ SIGTERM
//!   (fresh process)        and of the machine         (client thread     and the machine's
//!                          (before)                   CPU measured too)  (after)
//! ```
//!
//! The load client runs on the calling thread, so that thread's CPU time
//! during the run is the client's cost: a reader can see whether the client
//! was the bottleneck. (The load client's own `client_cpu` counts the whole
//! process, and here the fixture backends are threads of this process, so
//! the harness reads the thread's clock instead.)
//!
//! The machine's CPU (/proc/stat) is read right around the load, for every
//! subject, `direct` included: whether the cores were already busy without
//! a proxy bounds what any proxy's ratio to direct can be.

use std::io;
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use crate::load::{
    BulkOptions, BulkReport, LoadOptions, LoadReport, Pattern, open_idle, run_bulk, run_closed_loop,
};
use crate::process::procstat::{self, CpuTicks, MachineTicks, Memory, thread_cpu};

use super::report::results::{Cost, IdleMemory, Measured, Outcome};
use super::segments;
use super::subject::{self, Running, Setup, Subject};

/// When a closed-loop load stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many requests.
    Requests(usize),
    /// After this long (requests in flight then still finish).
    Duration(Duration),
    /// After this many requests or this long, whichever comes first.
    Either(usize, Duration),
}

/// A closed-loop request/response load.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Concurrent clients.
    pub clients: usize,
    /// When to stop.
    pub stop: Stop,
    /// The most one request may take.
    pub timeout: Duration,
    /// A new connection per request, or many per connection.
    pub pattern: Pattern,
}

/// Starts `subject` in front of `backends`, runs `work` against it, and
/// reports what it found and what the proxy cost. Every failure (the
/// subject would not start, the work failed) becomes [`Outcome::Failed`]
/// with the reason.
pub fn measure<T>(
    setup: &Setup,
    subject: Subject,
    backends: &[SocketAddr],
    work: impl FnOnce(&Running) -> io::Result<T>,
) -> Outcome<T> {
    let running = match subject::start(setup, subject, backends) {
        Ok(running) => running,
        Err(e) => return Outcome::Failed(format!("could not start {subject}: {e}")),
    };
    let pid = running.pid();
    let cpu_before = pid.map(CpuTicks::of_tree);
    let client_before = thread_cpu();
    let segments_before = segments::sent();
    let machine_before = MachineTicks::now();
    let started = Instant::now();
    let value = work(&running);
    let wall = started.elapsed();
    let machine = match (machine_before, MachineTicks::now()) {
        (Ok(before), Ok(after)) => Some(after.since(before)),
        _ => None,
    };
    let client_cpu = thread_cpu().saturating_sub(client_before);
    let segments = match (segments_before, segments::sent()) {
        (Ok(before), Ok(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let cost = match (pid, cpu_before) {
        (Some(pid), Some(Ok(before))) => proxy_cost(pid, before),
        _ => None,
    };
    let note = running.stop();
    match value {
        Ok(value) => Outcome::Done(Measured {
            value,
            cost,
            client_cpu,
            wall,
            segments,
            machine,
            note,
        }),
        Err(e) => Outcome::Failed(match note {
            Some(note) => format!("{e}; {note}"),
            None => e.to_string(),
        }),
    }
}

/// What the proxy tree `pid` cost since its CPU read `before` (None if
/// /proc would not say).
fn proxy_cost(pid: u32, before: CpuTicks) -> Option<Cost> {
    let after = CpuTicks::of_tree(pid).ok()?;
    let memory = Memory::of_tree(pid).ok()?;
    Some(Cost {
        cpu: after.since(before),
        peak_kib: memory.peak_kib,
    })
}

/// Runs a closed-loop load against `target`.
pub fn closed_loop(target: SocketAddr, load: &Load) -> io::Result<LoadReport> {
    let (requests, duration) = match load.stop {
        Stop::Requests(n) => (n, None),
        Stop::Duration(d) => (usize::MAX, Some(d)),
        Stop::Either(n, d) => (n, Some(d)),
    };
    run_closed_loop(&LoadOptions {
        target,
        clients: load.clients,
        requests,
        duration,
        timeout: load.timeout,
        pattern: load.pattern,
    })
}

/// Streams `bytes` in total (split over `streams` connections) through
/// `target` to an echo backend and back.
pub fn bulk(
    target: SocketAddr,
    bytes: u64,
    streams: usize,
    timeout: Duration,
) -> io::Result<BulkReport> {
    run_bulk(&BulkOptions {
        target,
        bytes,
        streams,
        timeout,
    })
}

/// How long the proxy may take to close its side of connections the
/// client closed, before the memory "after close" is read anyway.
const CLOSE_SETTLE: Duration = Duration::from_secs(5);

/// Opens `count` idle connections through `running` (to an echo backend),
/// and reads the proxy's resident memory before, with them open, and after
/// they are closed.
pub fn idle_memory(running: &Running, count: usize, timeout: Duration) -> io::Result<IdleMemory> {
    let pid = running
        .pid()
        .ok_or_else(|| io::Error::other("no proxy process to weigh"))?;
    let descriptors_before = procstat::descriptors(pid)?;
    let before_kib = Memory::of_tree(pid)?.rss_kib;
    let mut idle = open_idle(running.addr(), count, timeout)?;
    let open_kib = Memory::of_tree(pid)?.rss_kib;
    // One more round trip on each: every connection was still relayed
    // while it idled, so the memory above was theirs.
    idle.verify()?;
    let connections = idle.len();
    idle.close();
    // The proxy sees the FINs a moment later; wait until its descriptors
    // are back where they started (bounded), then weigh it again.
    let deadline = Instant::now() + CLOSE_SETTLE;
    while procstat::descriptors(pid)? > descriptors_before && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let after_close_kib = Memory::of_tree(pid)?.rss_kib;
    Ok(IdleMemory {
        connections,
        before_kib,
        open_kib,
        after_close_kib,
    })
}
