//! The one place that chooses between `std` and `loom` synchronisation types.
//!
//! Code that other threads touch (the thread pool, the task state word, the
//! cross-thread run queue) imports `Mutex`, `Condvar`, `Arc`, atomics and
//! `thread` from here rather than from `std`. A normal build gets `std`'s types.
//! Under `RUSTFLAGS="--cfg loom"` the same code gets loom's instrumented types,
//! and loom's model checker then explores every interleaving of the threads in
//! a test (see the `loom_*` tests and `scripts/loom.sh`).

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
