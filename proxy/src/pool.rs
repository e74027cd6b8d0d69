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
//! Each worker relays with the same [`blocking::relay`] as the single mode.
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
//! A connection's failure stays with its job: [`blocking::serve`] logs and
//! never panics (and the pool would survive a panic anyway, counting it).

#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use runtime::thread_pool::ThreadPool;

use crate::accept::AcceptErrors;
use crate::blocking;
use crate::cli::Settings;
use crate::picker::{Picker, new_picker};

/// What every job needs, shared by the workers.
#[derive(Debug)]
struct Shared {
    settings: Settings,
    picker: Arc<dyn Picker>,
}

impl Shared {
    /// One connection, on a worker thread.
    fn serve(&self, client: TcpStream, peer: SocketAddr) {
        let backends = &self.settings.backends;
        // The list is immutable, so indexing it needs no lock (picker.rs).
        let backend = backends[self.picker.pick() % backends.len()];
        blocking::serve(client, peer, backend, &self.settings);
    }
}

/// How many accepted connections may wait for a worker: one per worker.
/// Enough that a worker finishing a job finds the next one ready without a
/// round trip through the accept loop; more would only move the wait from
/// the kernel's queue (free) into ours (a descriptor each).
pub fn queue_limit(threads: usize) -> usize {
    threads.max(1)
}

/// Runs the pool mode until the process is stopped (by a signal: see
/// [`shutdown`](crate::shutdown)). Returns only if it cannot start.
pub fn run(settings: &Settings) -> io::Result<()> {
    if settings.backends.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the pool mode needs a backend",
        ));
    }
    let listener = blocking::listen(settings)?;
    let addr = listener.local_addr()?;
    let pool = ThreadPool::with_queue_limit(settings.threads, queue_limit(settings.threads))?;
    let shared = Arc::new(Shared {
        settings: settings.clone(),
        picker: new_picker(settings.picker, settings.backends.len()),
    });
    crate::info!(
        "listening on {} (pool, {} threads, picker {})",
        addr,
        settings.threads,
        settings.picker.name()
    );
    let mut accept_errors = AcceptErrors::new();
    loop {
        let (client, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) => {
                if let Some(pause) = accept_errors.note(&e) {
                    std::thread::sleep(pause);
                }
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        // Blocks while the queue is full: the backpressure above.
        if let Err(closed) = pool.execute(move || shared.serve(client, peer)) {
            // Only shutdown closes the pool, and only this function could
            // call it; this is a bug, not a condition to limp through.
            return Err(io::Error::other(closed));
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
