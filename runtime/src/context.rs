//! The thread's context: everything a runtime keeps per thread while its
//! `block_on` runs, in one thread-local, installed and restored by one guard.
//!
//! Code deep inside a task needs a few things that belong to the runtime
//! polling it, and it has no argument through which to receive them:
//!
//! ```text
//!   CONTEXT (one thread-local)             who reads it
//!   ┌───────────────────────────────────┐
//!   │ runtime   which runtime is here   │  a wake: is the task ours? (local or remote queue)
//!   │ driver    reactor + timers        │  AsyncFd::new, the first poll of a Sleep
//!   │ executor  the task slab           │  runtime::spawn
//!   │ queue     the local run queue     │  a wake on this thread; the executor's loop
//!   │ budget    of the task being polled│  coop::poll_proceed, every I/O operation
//!   │ deferred  wakers of yielded tasks │  yield_now, a spent budget; woken by park
//!   └───────────────────────────────────┘
//!      ^ enter(...) -> EnterGuard: block_on (and Runtime's Drop) fill it;
//!        dropping the guard, on return or on unwind, puts back what was there
//! ```
//!
//! This keeps the imports one-way: `net`, `time` and the wakers depend on
//! this small file and on the driver, never on the executor above them.
//!
//! ## Why one thread-local, and why these cells
//!
//! One guard saves and restores the whole context, so no piece can be left
//! behind on an unwind, and nested use (a `Runtime` dropped inside another
//! runtime's task) gets back exactly the context it had. The per-poll path
//! stays as cheap as separate thread-locals were: each access is one
//! thread-local lookup, the budget and the runtime id are `Cell`s (a load or
//! a store, no borrow flag), and only the queue and the deferred list, which
//! need `&mut` to a growable buffer, are `RefCell`s, borrowed for one push or
//! pop with no user code inside the borrow.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::mem;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

use crate::driver::Driver;
use crate::run_queue::{Mailbox, TaskId};

/// The per-thread state of the runtime running on this thread.
pub(crate) struct ThreadContext {
    /// `Mailbox::id` of the runtime entered here; 0 (no runtime has it) outside.
    runtime: Cell<u64>,
    driver: RefCell<Option<Rc<Driver>>>,
    /// The executor's core. The executor sits above this file, so its type
    /// cannot be named here: it is kept as `dyn Any`, and only `executor.rs`,
    /// which put it here, takes it back out (a type-id comparison per spawn).
    executor: RefCell<Option<Rc<dyn Any>>>,
    /// Ids woken on this thread for the runtime entered here.
    queue: RefCell<VecDeque<TaskId>>,
    /// What is left of the budget of the task being polled (`coop.rs`).
    /// None outside a poll: code driven by hand is never throttled.
    pub(crate) budget: Cell<Option<u32>>,
    /// Wakers of tasks that yielded or spent their budget, woken after the
    /// executor's next look at the reactor (`coop.rs`).
    pub(crate) deferred: RefCell<Vec<Waker>>,
}

thread_local! {
    static CONTEXT: ThreadContext = const {
        ThreadContext {
            runtime: Cell::new(0),
            driver: RefCell::new(None),
            executor: RefCell::new(None),
            queue: RefCell::new(VecDeque::new()),
            budget: Cell::new(None),
            deferred: RefCell::new(Vec::new()),
        }
    };
}

/// Runs `f` with this thread's context.
///
/// # Panics
///
/// While the thread's locals are being destroyed (at thread exit); code that
/// may run then (a wake from a destructor) uses [`schedule`], which copes.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadContext) -> R) -> R {
    CONTEXT.with(f)
}

/// What `enter` replaced, put back by the guard.
#[derive(Default)]
struct Saved {
    runtime: u64,
    driver: Option<Rc<Driver>>,
    executor: Option<Rc<dyn Any>>,
    queue: VecDeque<TaskId>,
    budget: Option<u32>,
    deferred: Vec<Waker>,
}

impl ThreadContext {
    /// Puts `saved` in place and returns what was there.
    fn swap(&self, saved: Saved) -> Saved {
        Saved {
            runtime: self.runtime.replace(saved.runtime),
            driver: self.driver.replace(saved.driver),
            executor: self.executor.replace(saved.executor),
            queue: self.queue.replace(saved.queue),
            budget: self.budget.replace(saved.budget),
            deferred: self.deferred.replace(saved.deferred),
        }
    }
}

/// Makes the runtime of `shared`, `driver` and `executor` the one running on
/// this thread, with an empty local queue, no budget and nothing deferred,
/// until the guard is dropped.
pub(crate) fn enter(
    shared: &Arc<Mailbox>,
    driver: Rc<Driver>,
    executor: Rc<dyn Any>,
) -> EnterGuard {
    let fresh = Saved {
        runtime: shared.id(),
        driver: Some(driver),
        executor: Some(executor),
        queue: VecDeque::new(),
        budget: None,
        deferred: Vec::new(),
    };
    let previous = CONTEXT.with(|c| c.swap(fresh));
    EnterGuard {
        shared: shared.clone(),
        previous,
    }
}

/// Restores the context `enter` replaced when `block_on` returns or unwinds.
///
/// What the runtime leaves behind is not lost: deferred wakers are woken
/// first (their ids join the local queue), then every id still queued moves
/// to the runtime's remote queue, where its next `block_on` finds it.
pub(crate) struct EnterGuard {
    shared: Arc<Mailbox>,
    previous: Saved,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let previous = mem::take(&mut self.previous);
        // Woken while the context is still ours, so their ids land in our
        // local queue; `try_with`: the thread may be exiting.
        let deferred = CONTEXT.try_with(|c| c.deferred.take()).unwrap_or_default();
        for waker in deferred {
            waker.wake();
        }
        let Ok(ours) = CONTEXT.try_with(|c| c.swap(previous)) else {
            return;
        };
        for id in ours.queue {
            self.shared.push_remote(id);
        }
        // `ours` (our driver and executor clones) is dropped here, after the
        // previous context is back in place.
    }
}

/// Is a runtime entered on this thread (inside `block_on`, or dropping)?
pub(crate) fn is_entered() -> bool {
    CONTEXT.with(|c| c.runtime.get() != 0)
}

/// The driver of the runtime running on this thread.
pub(crate) fn driver() -> io::Result<Rc<Driver>> {
    CONTEXT
        .with(|c| c.driver.borrow().clone())
        .ok_or_else(no_runtime)
}

/// The executor core of the runtime running on this thread, as `enter` got it.
pub(crate) fn executor() -> Option<Rc<dyn Any>> {
    CONTEXT.with(|c| c.executor.borrow().clone())
}

/// The error for I/O attempted outside `Runtime::block_on`.
pub(crate) fn no_runtime() -> io::Error {
    io::Error::other("no runtime on this thread: run this inside Runtime::block_on")
}

/// Puts `id` on the run queue of the runtime of `shared`: the local queue
/// when that runtime is the one entered on this thread (no lock, no system
/// call), its remote queue otherwise.
#[inline]
pub(crate) fn schedule(shared: &Mailbox, id: TaskId) {
    let pushed = CONTEXT
        .try_with(|c| {
            // The queue is never borrowed across user code, so the borrow
            // only fails while `swap` runs; then the remote path is right.
            c.runtime.get() == shared.id()
                && c.queue
                    .try_borrow_mut()
                    .map(|mut q| q.push_back(id))
                    .is_ok()
        })
        .unwrap_or(false);
    if !pushed {
        shared.push_remote(id);
    }
}

/// Takes the next id from this thread's local queue.
#[inline]
pub(crate) fn pop_local() -> Option<TaskId> {
    CONTEXT.with(|c| c.queue.borrow_mut().pop_front())
}

/// How many ids wait in this thread's local queue.
pub(crate) fn local_len() -> usize {
    CONTEXT.with(|c| c.queue.borrow().len())
}

/// Appends `ids` (taken from the remote queue) to this thread's local queue.
pub(crate) fn extend_local(ids: &mut Vec<TaskId>) {
    CONTEXT.with(|c| c.queue.borrow_mut().extend(ids.drain(..)));
}
