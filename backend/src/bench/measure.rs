//! One measurement, the same way every time:
//!
//! ```text
//!   start the subject ──▶ CPU ticks of its tree ──▶ run the load ──▶ CPU ticks, VmHWM ──▶ SIGTERM
//!   (fresh process)        (before)                  (client thread     (after)
//!                                                     CPU measured too)
//! ```
//!
//! The load client runs on the calling thread, so that thread's CPU time
//! during the run is the client's cost: a reader can see whether the client
//! was the bottleneck. The fixture backends run on threads of their own.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::load::{LoadOptions, LoadReport, run_closed_loop};

use super::procstat::{CpuTicks, Memory, thread_cpu};
use super::results::{Cost, Measured, Outcome};
use super::subject::{self, Running, Setup, Subject};

/// When a closed-loop load stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many requests.
    Requests(usize),
    /// After this long.
    Duration(Duration),
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
}

/// Starts `subject` in front of `backends`, runs `work` against it, and
/// reports what it found and what the proxy cost. Every failure (the
/// subject would not start, the work failed) becomes [`Outcome::Failed`]
/// with the reason.
pub fn measure<T>(
    setup: &Setup,
    subject: Subject,
    backends: &[SocketAddr],
    work: impl FnOnce(&Running) -> std::io::Result<T>,
) -> Outcome<T> {
    let running = match subject::start(setup, subject, backends) {
        Ok(running) => running,
        Err(e) => return Outcome::Failed(format!("could not start {subject}: {e}")),
    };
    let pid = running.pid();
    let cpu_before = pid.map(CpuTicks::of_tree);
    let client_before = thread_cpu();
    let started = Instant::now();
    let value = work(&running);
    let wall = started.elapsed();
    let client_cpu = thread_cpu().saturating_sub(client_before);
    let cost = match (pid, cpu_before) {
        (Some(pid), Some(Ok(before))) => match (CpuTicks::of_tree(pid), Memory::of_tree(pid)) {
            (Ok(after), Ok(memory)) => Some(Cost {
                cpu: after.since(before),
                peak_kib: memory.peak_kib,
            }),
            _ => None,
        },
        _ => None,
    };
    let note = running.stop();
    match value {
        Ok(value) => Outcome::Done(Measured {
            value,
            cost,
            client_cpu,
            wall,
            note,
        }),
        Err(e) => Outcome::Failed(match note {
            Some(note) => format!("{e}; {note}"),
            None => e.to_string(),
        }),
    }
}

/// Runs a closed-loop load against `target`: one new connection per
/// request, the seed's pattern.
pub fn closed_loop(target: SocketAddr, load: &Load) -> std::io::Result<LoadReport> {
    let requests = match load.stop {
        Stop::Requests(n) => n,
        // Until the load client stops by time, a run "for a duration" is
        // twenty requests per client.
        Stop::Duration(_) => load.clients * 20,
    };
    run_closed_loop(&LoadOptions {
        target,
        clients: load.clients,
        requests,
        timeout: load.timeout,
    })
}
