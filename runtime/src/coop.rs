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

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// How many I/O operations a task may complete in one poll (tokio: 128).
pub const TASK_BUDGET: u32 = 128;

thread_local! {
    /// None outside the executor: code driven by hand is never throttled.
    static BUDGET: Cell<Option<u32>> = const { Cell::new(None) };
    /// Wakers of yielded tasks, woken after the executor's next reactor turn.
    static DEFERRED: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// Are yielded tasks waiting for the next reactor turn?
pub(crate) fn has_deferred() -> bool {
    DEFERRED.with(|d| !d.borrow().is_empty())
}

fn defer(waker: &Waker) {
    DEFERRED.with(|d| d.borrow_mut().push(waker.clone()));
}

/// Wakes the tasks that yielded (called by the executor after a turn).
pub(crate) fn wake_deferred() {
    let wakers = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
    for waker in wakers {
        waker.wake();
    }
}

/// Runs `poll` (one task's poll) with a fresh budget.
pub(crate) fn with_budget<R>(budget: u32, poll: impl FnOnce() -> R) -> R {
    struct Restore(Option<u32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|b| b.replace(Some(budget))));
    poll()
}

/// Spends one unit of the current task's budget, or, if it is spent,
/// schedules the task again and returns `Pending`.
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    BUDGET.with(|b| match b.get() {
        Some(0) => {
            // Deferred like a yield: the task runs again after the others
            // *and* after the reactor has been polled.
            defer(cx.waker());
            Poll::Pending
        }
        Some(n) => {
            b.set(Some(n - 1));
            Poll::Ready(())
        }
        None => Poll::Ready(()),
    })
}

/// Gives back the unit spent by [`poll_proceed`] when the operation turned
/// out to block: only operations that complete are charged.
pub fn refund() {
    BUDGET.with(|b| {
        if let Some(n) = b.get() {
            b.set(Some(n.saturating_add(1)));
        }
    });
}

/// Steps aside once: every other ready task runs, and the reactor is
/// polled (without sleeping), before this task is polled again.
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
        let in_executor = BUDGET.with(|b| b.get().is_some());
        if in_executor {
            defer(cx.waker());
        } else {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
