//! The held-connections workload: what idle connections cost a proxy while
//! it serves a keep-alive load beside them.
//!
//! ```text
//!   start the subject (one worker or thread)  ──▶  warm it: a short keep-alive run
//!   for held in 0, 3,000, 7,000:  open the idle connections up to `held` (one echo round trip
//!                                 each, then silence) ──▶ keep-alive load (echo, 64 clients)
//!                                 ──▶ the proxy's CPU over the load ÷ requests, its RSS
//!   every held connection answers once more, then all close
//! ```
//!
//! Two figures per level: the proxy's CPU per request (does a large idle
//! set slow the busy connections down: an event loop whose cost grows with
//! what it holds rather than with what moves?), and its resident memory
//! per held connection (the RSS above level 0's, over the connections held).
//! Ours (`epoll 1`), HAProxy (`nbthread 1`) and nginx (`worker_processes
//! 1`), each a fresh process; the idle connections and the load go to the
//! same echo backends (threads of the harness).

use std::io;
use std::net::SocketAddr;

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};

use crate::load::{IdleConnections, Pattern, open_idle};
use crate::process::procstat::{CpuTicks, Memory};

use super::measure::{self, Load, Stop};
use super::report::results::{Held, HeldRow, Level};
use super::sizes::Sizes;
use super::subject::{self, Running, Setup, Subject};
use super::workloads::peers_at;

/// Idle connections held at each level of a full run.
pub const LEVELS: [usize; 3] = [0, 3000, 7000];
/// The same for `--quick`.
pub const QUICK_LEVELS: [usize; 3] = [0, 50, 100];
/// Concurrent keep-alive clients beside the held connections.
pub const CLIENTS: usize = 64;

/// Runs the workload against ours at one worker and each installed peer at
/// one thread. `room`: the idle connections the descriptor limit allows.
pub fn held(setup: &Setup, sizes: &Sizes, room: usize) -> io::Result<Held> {
    let levels: Vec<usize> = if sizes.quick { &QUICK_LEVELS } else { &LEVELS }
        .iter()
        .map(|&n| n.min(room))
        .collect();
    let echoes = Fixture::start(3, FixtureOptions::at_once(FixtureMode::Echo))?;
    let mut subjects = vec![Subject::Epoll(1)];
    subjects.extend(peers_at(setup, &[1]));
    let mut rows = Vec::new();
    for subject in subjects {
        let levels = run_subject(setup, sizes, subject, echoes.addrs(), &levels);
        match &levels {
            Ok(done) => eprintln!("bench: held {subject}: {}", describe(done)),
            Err(e) => eprintln!("bench: held {subject}: {e}"),
        }
        rows.push(HeldRow { subject, levels });
    }
    echoes.stop();
    Ok(Held {
        levels,
        clients: CLIENTS,
        per_connection: sizes.keep_alive_per_connection,
        run_for: sizes.run_for,
        rows,
    })
}

/// `0: 23.1 µs/req; 3000: 23.5 µs/req ...`, for the progress line.
fn describe(levels: &[Level]) -> String {
    let parts: Vec<String> = levels
        .iter()
        .map(|l| {
            let us = l.cpu_per_request_us().unwrap_or(f64::NAN);
            format!("{} held: {us:.1} µs/req, {} KiB", l.held, l.rss_kib)
        })
        .collect();
    parts.join("; ")
}

/// One subject, fresh: every level in turn, the held set growing.
fn run_subject(
    setup: &Setup,
    sizes: &Sizes,
    subject: Subject,
    backends: &[SocketAddr],
    levels: &[usize],
) -> Result<Vec<Level>, String> {
    let running = subject::start(setup, subject, backends)
        .map_err(|e| format!("could not start {subject}: {e}"))?;
    let measured = run_levels(&running, sizes, levels).map_err(|e| e.to_string());
    match (measured, running.stop()) {
        (Ok(levels), _) => Ok(levels),
        (Err(e), Some(note)) => Err(format!("{e}; {note}")),
        (Err(e), None) => Err(e),
    }
}

/// The levels against a running subject.
fn run_levels(running: &Running, sizes: &Sizes, levels: &[usize]) -> io::Result<Vec<Level>> {
    let pid = running
        .pid()
        .ok_or_else(|| io::Error::other("no proxy process to measure"))?;
    let load = Load {
        clients: CLIENTS,
        stop: Stop::Duration(sizes.run_for),
        timeout: sizes.timeout,
        pattern: Pattern::KeepAlive {
            per_connection: sizes.keep_alive_per_connection,
        },
    };
    // Warm: the first connections fill the proxy's pools and heaps.
    let warm = Load {
        stop: Stop::Duration(sizes.run_for / 3),
        ..load
    };
    measure::closed_loop(running.addr(), &warm)?;
    let mut held: Vec<IdleConnections> = Vec::new();
    let mut done = Vec::new();
    for &level in levels {
        let open: usize = held.iter().map(IdleConnections::len).sum();
        if level > open {
            held.push(open_idle(running.addr(), level - open, sizes.timeout)?);
        }
        let before = CpuTicks::of_tree(pid)?;
        let report = measure::closed_loop(running.addr(), &load)?;
        let cpu = CpuTicks::of_tree(pid)?.since(before);
        if report.errors > 0 {
            return Err(io::Error::other(format!(
                "{} of {} keep-alive requests failed with {level} held: {}",
                report.errors,
                report.requests,
                report.first_error.as_deref().unwrap_or("no error said")
            )));
        }
        done.push(Level {
            held: level,
            requests: report.ok,
            cpu,
            rss_kib: Memory::of_tree(pid)?.rss_kib,
        });
    }
    // Every held connection was relayed through the loads: one more round
    // trip each proves none was dropped.
    for idle in &mut held {
        idle.verify()?;
    }
    for idle in held {
        idle.close();
    }
    Ok(done)
}
