//! Mode `pool`, milestones 2 to 4: an accept loop and a pool of blocking
//! worker threads, with round robin over the backends.
//!
//! ```text
//!   main thread                         runtime::thread_pool::ThreadPool (--threads N)
//!   loop {                              ┌──────────────────────────────────────────────┐
//!       accept()  ──execute(job)──▶     │ queue (bounded) ─▶ pool-worker-0 .. N-1       │
//!   }                                   │ each job: pick a backend (--picker),          │
//!                                       │           connect, relay, close               │
//!                                       └──────────────────────────────────────────────┘
//! ```
//!
//! Milestone 2 is the hand-off: the accept loop never relays, it queues the
//! connection and goes back to `accept`, so one slow client no longer holds
//! up the next. Milestones 3 and 4 are the backend choice: every worker
//! asks one shared [`Picker`] for the next index (`--picker mutex`, the
//! seed's fix, or `atomic`; `racy`, the seed's bug, in `race-demo` builds).
//! Each worker relays with the same [`relay`] as the single mode.
//!
//! # Backpressure
//!
//! The pool's queue is bounded ([`queue_limit`]). When every worker is busy
//! and the queue is full, `execute` blocks the accept loop, so new clients
//! wait in the kernel's listen queue (`--backlog`) instead of piling up as
//! accepted sockets in ours. That bounds the descriptors the proxy holds:
//! two per busy worker, one per queued job, and one for the accept loop (a
//! blocked `accept(2)` already holds the number it will return; Linux
//! reserves it before waiting). And a queued job is worse than a queued
//! handshake: its client believes it is being served.
//!
//! A connection's failure stays with its job: [`relay::serve`] logs and
//! never panics (and the pool would survive a panic anyway, counting it).
//!
//! # Stopping
//!
//! The accept loop runs on a thread of its own; the main thread waits for
//! signals. On SIGTERM or SIGINT it shuts the listening socket down for
//! reading, which makes the blocked `accept(2)` fail (EINVAL on Linux) and
//! the kernel refuse new clients; the accept loop sees the stop flag and
//! ends, and the main thread drains the jobs still running
//! ([`lifecycle::drain`](crate::ops::shutdown::drain)).

#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use nix::sys::socket::{Shutdown, shutdown};
use runtime::net::accept_std;
use runtime::signal::{Signal, Signals};
use runtime::thread_pool::ThreadPool;

use crate::blocking::picker::{Picker, new_picker};
use crate::blocking::relay;
use crate::conn::accept::AcceptErrors;
use crate::ops::shutdown::{self as lifecycle, Live, OpenCount};
use crate::settings::cli::Settings;
use crate::settings::resolve;

/// What every job needs, shared by the workers.
#[derive(Debug)]
struct PoolFrontend {
    settings: Settings,
    /// The backends' addresses, host names looked up once, at start.
    backends: Vec<SocketAddr>,
    picker: Arc<dyn Picker>,
}

impl PoolFrontend {
    /// One connection, on a worker thread.
    fn serve(&self, client: TcpStream, peer: SocketAddr) {
        let backends = &self.backends;
        // The list is immutable, so indexing it needs no lock (picker.rs).
        let backend = backends[self.picker.pick() % backends.len()];
        relay::serve(client, peer, backend, &self.settings);
    }
}

/// How many accepted connections may wait for a worker: one per worker.
/// Enough that a worker finishing a job finds the next one ready without a
/// round trip through the accept loop; more would only move the wait from
/// the kernel's queue (free) into ours (a descriptor each).
pub fn queue_limit(threads: usize) -> usize {
    threads.max(1)
}

/// Runs the pool mode until a stop signal has been handled (see
/// [`shutdown`](crate::ops::shutdown)); returns when the process should exit.
pub fn run(settings: &Settings) -> io::Result<()> {
    if settings.backends.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the pool mode needs a backend",
        ));
    }
    let backends = resolve::once(&settings.backends)?;
    // PoolFrontend by the accept thread and the main thread, which stops it.
    let listener = Arc::new(relay::listen(settings)?);
    let addr = listener.local_addr()?;
    let pool = ThreadPool::with_queue_limit(settings.threads, queue_limit(settings.threads))?;
    let shared = Arc::new(PoolFrontend {
        settings: settings.clone(),
        backends,
        picker: new_picker(settings.picker, settings.backends.len()),
    });
    crate::info!(
        "listening on {} (pool, {} threads, picker {})",
        addr,
        settings.threads,
        settings.picker.name()
    );
    let live = Live::new();
    let stopping = Arc::new(AtomicBool::new(false));
    let accepting = {
        let (listener, live, stopping) = (listener.clone(), live.clone(), stopping.clone());
        thread::Builder::new()
            .name("accept".into())
            .spawn(move || accept_loop(&listener, &pool, &shared, &live, &stopping))?
    };
    let grace = settings.grace.unwrap_or(lifecycle::DEFAULT_GRACE);
    let rt = runtime::Runtime::new()?;
    rt.block_on(async {
        let signals = Signals::new(&lifecycle::HANDLED)?;
        let first = until_stop(&signals, &live).await?;
        stopping.store(true, Ordering::SeqCst);
        // Wakes the blocked accept(2) and makes the kernel refuse new clients.
        if let Err(e) = shutdown(listener.as_raw_fd(), Shutdown::Read) {
            crate::error!("could not stop the listener: {e}");
        }
        // What is left when the drain ends is closed by the process exit.
        let _ = lifecycle::drain(&signals, &*live, grace, first.name(), || {
            lifecycle::say::state("pool", Some(live.open()))
        })
        .await;
        io::Result::Ok(())
    })?;
    // The accept thread has ended, or is blocked handing over a job that
    // will never run; either way the process exits now.
    drop(accepting);
    Ok(())
}

/// Waits for the signal that stops the pool, answering the others on the
/// way: SIGQUIT says how many connections are open, SIGHUP that there is
/// nothing to reload.
async fn until_stop(signals: &Signals, live: &Live) -> io::Result<Signal> {
    loop {
        let signal = signals.recv().await?;
        if lifecycle::is_stop(signal) {
            return Ok(signal);
        }
        if signal == Signal::Quit {
            lifecycle::say::state("pool", Some(live.open()));
            continue;
        }
        lifecycle::say::nothing_to_reload(signal.name(), "pool");
    }
}

/// Accepts until `stopping`, handing each connection to the pool.
fn accept_loop(
    listener: &TcpListener,
    pool: &ThreadPool,
    shared: &Arc<PoolFrontend>,
    live: &Arc<Live>,
    stopping: &AtomicBool,
) {
    let mut accept_errors = AcceptErrors::new();
    while !stopping.load(Ordering::SeqCst) {
        let (client, peer) = match accept_std(listener) {
            Ok(accepted) => accepted,
            Err(_) if stopping.load(Ordering::SeqCst) => break,
            Err(e) => {
                if let Some(pause) = accept_errors.note(&e) {
                    thread::sleep(pause);
                }
                continue;
            }
        };
        let shared = Arc::clone(shared);
        let counted = live.enter();
        // Blocks while the queue is full: the backpressure above.
        let job = move || {
            shared.serve(client, peer);
            drop(counted);
        };
        if pool.execute(job).is_err() {
            // Only shutdown closes the pool, and nothing calls it while
            // this loop runs: a bug, reported rather than limped through.
            crate::error!("the thread pool closed under the accept loop; not accepting");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_backend_it_refuses_to_start() {
        let e = run(&Settings::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn the_queue_holds_one_connection_per_worker() {
        assert_eq!(queue_limit(8), 8);
        assert_eq!(queue_limit(0), 1);
    }
}
