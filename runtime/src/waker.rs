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
//! **2. `std::task::Wake` on an `Arc`** (what we do):
//!
//! ```ignore
//! impl Wake for Header { fn wake(self: Arc<Self>) { self.schedule() } }
//! let waker = Waker::from(header); // header: Arc<Header>
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

use std::sync::Arc;
use std::task::{Wake, Waker};

use crate::task::Header;

impl Wake for Header {
    fn wake(self: Arc<Self>) {
        self.schedule();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.schedule();
    }
}

/// The waker for a task: waking it schedules the task on its runtime.
pub(crate) fn waker_for(header: &Arc<Header>) -> Waker {
    Waker::from(header.clone())
}

/// Remembers `new` as the waker to wake later, skipping the clone (an atomic
/// increment) when the stored one already wakes the same task: the common
/// case, a task polling the same future again.
pub(crate) fn store(slot: &mut Option<Waker>, new: &Waker) {
    match slot {
        Some(old) if old.will_wake(new) => {}
        _ => *slot = Some(new.clone()),
    }
}
