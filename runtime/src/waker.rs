//! Wakers: how a future says "poll me again" to the executor that owns it.
//!
//! A `std::task::Waker` is a pointer plus a table of four functions (clone,
//! wake, wake_by_ref, drop). There are two ways to build one.
//!
//! **1. A hand-written `RawWakerVTable`** (what async-task and tokio do):
//!
//! ```ignore
//! static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop);
//! unsafe fn clone(p: *const ()) -> RawWaker {
//!     unsafe { Arc::increment_strong_count(p as *const Header) };
//!     RawWaker::new(p, &VTABLE)
//! }
//! unsafe fn wake(p: *const ()) { let h = unsafe { Arc::from_raw(p as *const Header) }; h.schedule(); }
//! unsafe fn wake_by_ref(p: *const ()) { unsafe { &*(p as *const Header) }.schedule(); }
//! unsafe fn drop(p: *const ()) { unsafe { Arc::decrement_strong_count(p as *const Header) }; }
//! let waker = unsafe { Waker::from_raw(RawWaker::new(Arc::into_raw(header) as *const (), &VTABLE)) };
//! ```
//!
//! It lets the pointer be anything (a tagged pointer, a task allocation that
//! also holds the future, a reference count packed into the state word), and
//! that is how the fastest executors save an allocation per task. The price:
//! five `unsafe` functions whose reference counting must balance by hand, and
//! a waker that must be `Send + Sync` even though the compiler cannot check it.
//!
//! **2. `std::task::Wake` on an `Arc`** (what we do: `task.rs` has `impl
//! Wake for Header { fn wake(self: Arc<Self>) { self.schedule() } }`). Here
//! it is with a waker that counts its wakes where ours queues a task:
//!
//! ```
//! use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
//! use std::task::{Wake, Waker};
//!
//! struct Counter(AtomicUsize);
//! impl Wake for Counter {
//!     fn wake(self: Arc<Self>) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! let counter = Arc::new(Counter(AtomicUsize::new(0)));
//! let waker = Waker::from(counter.clone());
//! let sent = waker.clone(); // Send: the compiler checked `Counter: Send + Sync`
//! std::thread::spawn(move || sent.wake()).join().unwrap();
//! waker.wake_by_ref();
//! assert_eq!(counter.0.load(Ordering::Relaxed), 2);
//! drop(waker);
//! assert_eq!(Arc::strong_count(&counter), 1, "every clone gave its count back");
//! ```
//!
//! The standard library writes the vtable for us, with the reference
//! counting right, and `Waker::from` only accepts an `Arc<W>` where `W:
//! Send + Sync`, so the compiler proves the waker safe to send to another
//! thread. We choose this: no `unsafe` at all, and the one thing it costs
//! (the header is its own allocation, apart from the future) is small next to
//! a system call. The header being `Send + Sync` is also what lets a worker
//! thread of the blocking pool wake a task directly: its wake takes the
//! remote path of `run_queue.rs` and interrupts `epoll_wait` through the
//! eventfd.
//!
//! A waker outliving its task or its runtime is harmless: a finished task
//! ignores wakes (`task.rs`), and a closed runtime ignores remote pushes.
//!
//! The implementation, `impl Wake for Header`, sits in `task.rs` next to the
//! state word it drives. This file keeps the one helper every waker slot of
//! the crate uses, [`store`], and so it imports nothing from the crate: the
//! reactor and the timer store, a floor below the tasks, use it too.

use std::task::Waker;

/// Remembers `new` in `slot` as the waker to wake later, unless the waker
/// already there wakes the same task ([`Waker::will_wake`]). Returns whether
/// the slot changed.
///
/// This is the idiom of every future that parks a waker: a task polls the
/// same future again and again with the same waker, and skipping the clone
/// saves an atomic increment (and the old waker's drop) each time. A
/// different waker (the future moved to another task, or a combinator
/// polled it with its own) replaces the old one, which is dropped without
/// being woken: a slot holds one waiter.
///
/// The return value tells a caller that keeps a *copy* of the waker
/// elsewhere (a waiter list behind a lock, as `notify.rs` does) when that
/// copy needs updating too, so a poll with an unchanged waker takes no lock.
///
/// ```
/// use std::sync::Arc;
/// use std::task::{Wake, Waker};
///
/// struct Nothing;
/// impl Wake for Nothing {
///     fn wake(self: Arc<Self>) {}
/// }
///
/// let waker = Waker::from(Arc::new(Nothing));
/// let mut slot = None;
/// assert!(runtime::waker::store(&mut slot, &waker), "empty: stored");
/// assert!(!runtime::waker::store(&mut slot, &waker.clone()), "same task: kept");
/// let other = Waker::from(Arc::new(Nothing));
/// assert!(runtime::waker::store(&mut slot, &other), "another task: replaced");
/// ```
pub fn store(slot: &mut Option<Waker>, new: &Waker) -> bool {
    match slot {
        Some(old) if old.will_wake(new) => false,
        _ => {
            *slot = Some(new.clone());
            true
        }
    }
}
