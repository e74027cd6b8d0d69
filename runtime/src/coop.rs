//! Cooperation: how a task that is always ready is made to step aside.
//!
//! An executor on one thread only gets control back when a task's `poll`
//! returns. A task reading from a socket that always has data, or accepting
//! from a listener that always fails with EMFILE, never returns `Pending` on
//! its own: it would run forever and every other task, and `epoll_wait`
//! itself, would starve (tokio hit both: an echo server that never yielded,
//! and an accept loop on EMFILE that starved the tasks that would have freed
//! descriptors).
//!
//! Two mechanisms, both tokio's:
//! - a **budget per poll**: before polling a task the executor gives it
//!   [`TASK_BUDGET`] units; every I/O operation that completes, with data or
//!   with an error, spends one. At zero, the next I/O operation returns
//!   `Pending`, and the task is woken again only after the other queued
//!   tasks have run and the reactor has been polled (a *deferred* wake).
//! - an **event interval** (in the executor): after a fixed number of polls
//!   the executor looks at epoll with a zero timeout even if tasks are still
//!   queued, so readiness is collected while busy.
//!
//! [`yield_now`] is the manual version, deferred the same way. A deferred
//! waker goes into a list the executor wakes only after its next look at the
//! reactor, so a task that spent its budget or yielded lets both the other
//! tasks and the pending I/O in before it runs again (tokio does the same:
//! waking it at once would put it straight back in the current batch, and
//! the reactor would wait for the event interval). Outside the executor,
//! where nothing would wake the list, `yield_now` wakes at once.

use std::cell::Cell;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::context;

/// How many I/O operations a task may complete in one poll (tokio: 128).
pub const TASK_BUDGET: u32 = 128;

// The budget and the deferred wakers live in the thread's context
// (`context.rs`), with the rest of the per-thread state of the runtime.

/// Are yielded tasks waiting for the next reactor turn?
pub(crate) fn has_deferred() -> bool {
    context::with(|c| !c.deferred.borrow().is_empty())
}

fn defer(waker: &Waker) {
    context::with(|c| c.deferred.borrow_mut().push(waker.clone()));
}

/// Wakes the tasks that yielded (called by the executor after a turn).
pub(crate) fn wake_deferred() {
    let wakers = context::with(|c| mem::take(&mut *c.deferred.borrow_mut()));
    for waker in wakers {
        waker.wake();
    }
}

/// Runs `poll` (one task's poll) with a fresh budget.
#[inline]
pub(crate) fn with_budget<R>(budget: u32, poll: impl FnOnce() -> R) -> R {
    /// Puts the budget back even if the poll unwinds (a panic in the main
    /// future leaves `block_on` through here).
    struct Restore<'a>(&'a Cell<Option<u32>>, Option<u32>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    // The poll runs inside `with`, so the restore needs no second look-up
    // of the thread-local; code in the poll may use the context freely (it
    // only takes shared references).
    context::with(|c| {
        let _restore = Restore(&c.budget, c.budget.replace(Some(budget)));
        poll()
    })
}

/// Spends one unit of the current task's budget, or, if it is spent,
/// schedules the task again and returns `Pending`.
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    context::with(|c| match c.budget.get() {
        Some(0) => {
            // Deferred like a yield: the task runs again after the others
            // *and* after the reactor has been polled.
            c.deferred.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        }
        Some(n) => {
            c.budget.set(Some(n - 1));
            Poll::Ready(())
        }
        None => Poll::Ready(()),
    })
}

/// Gives back the unit spent by [`poll_proceed`] when the operation turned
/// out to block: only operations that complete are charged.
pub fn refund() {
    context::with(|c| {
        if let Some(n) = c.budget.get() {
            c.budget.set(Some(n.saturating_add(1)));
        }
    });
}

/// Steps aside once: every other ready task runs, and the reactor is
/// polled (without sleeping), before this task is polled again.
///
/// # Examples
///
/// Two tasks on one thread, each yielding after every step, take turns:
/// the run queue is first in, first out, and a yielded task goes to its back.
///
/// ```
/// use std::{cell::RefCell, rc::Rc};
/// use runtime::{Runtime, spawn, yield_now};
///
/// let rt = Runtime::new()?;
/// let log = Rc::new(RefCell::new(Vec::new()));
/// rt.block_on(async {
///     let tasks: Vec<_> = ["a", "b"].into_iter().map(|name| {
///         let log = log.clone();
///         spawn(async move {
///             for step in 0..3 {
///                 log.borrow_mut().push(format!("{name}{step}"));
///                 yield_now().await;
///             }
///         })
///     }).collect();
///     for task in tasks {
///         task.await.unwrap();
///     }
/// });
/// assert_eq!(*log.borrow(), ["a0", "b0", "a1", "b1", "a2", "b2"]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        let in_executor = context::with(|c| c.budget.get().is_some());
        if in_executor {
            defer(cx.waker());
        } else {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
