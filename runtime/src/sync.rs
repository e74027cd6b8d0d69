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
