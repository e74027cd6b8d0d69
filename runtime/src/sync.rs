//! The one place that chooses between `std` and `loom` synchronisation types.
//!
//! Code whose cross-thread protocol loom checks takes what it needs of the
//! atomics, `Mutex` and `lock` from here, not from `std`: the task state word
//! (`task.rs`), the remote run queue (`run_queue.rs`), `Notify`, the
//! channels, and the thread pool, which also takes `Condvar`, `thread` and
//! `Arc`. A normal build gets `std`'s types. Under `RUSTFLAGS="--cfg loom"`
//! the same code gets loom's instrumented types, and loom's model checker
//! then explores the interleavings of the threads in a test, up to
//! `LOOM_MAX_PREEMPTIONS` forced preemptions (see the `loom_*` tests and
//! `scripts/loom.sh`).
//!
//! `Arc` comes from here only where nothing turns it into a `Waker` (the
//! pool, `oneshot`, `mpsc`). A task's header and the runtime's `Mailbox` are
//! in `std::sync::Arc`: `Waker::from` takes only `std`'s `Arc`, so loom
//! cannot see their reference counts, only the atomics inside them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::thread;

/// Locks `mutex`, taking the guard back if the mutex is poisoned.
///
/// Poisoning means a thread panicked while holding the lock. Every lock in
/// this crate guards a few fields that each critical section changes in
/// plain steps, and no user code (no job, no waker, no value's destructor)
/// runs under them, so the data is still valid after such a panic. Recovering
/// keeps one panic from spreading to every thread that touches the lock.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
