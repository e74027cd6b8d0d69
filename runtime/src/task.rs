//! A task: a spawned future, the state word that says whether it is queued,
//! running or finished, and the `JoinHandle` through which its output comes back.
//!
//! ## The state word (one atomic, three bits that matter)
//!
//! ```text
//!              wake                       executor pops it
//!   idle ───────────────> SCHEDULED ──────────────────────> RUNNING
//!    ^                        ^                               │  │
//!    │   poll -> Pending      │ poll -> Pending, but a wake   │  │ poll -> Ready
//!    └────────────────────────┼── came during RUNNING: ───────┘  │ (or aborted)
//!                             └── queue it again                 v
//!                                                             COMPLETE
//! ```
//!
//! Two rules, both enforced by a single atomic read-modify-write on the word:
//! - a wake on a task that is already SCHEDULED, or COMPLETE, does nothing:
//!   a task woken a hundred times before it runs is queued once, and waking a
//!   finished task is a no-op;
//! - a wake while the task is RUNNING only sets SCHEDULED; the executor sees
//!   the bit when `poll` returns Pending and queues the task again. The wake
//!   is not lost (the event happened after the poll looked), and the task is
//!   not queued twice (it cannot be in the queue while running).
//!
//! `ABORTED` is a request: `JoinHandle::abort` sets it and wakes the task;
//! the executor, popping it, drops the future instead of polling it.
//!
//! The header is shared with other threads (every `Waker` holds an `Arc` of
//! it), so it holds only atomics and the runtime's `Mailbox`: the future
//! itself stays in the executor's slab on the runtime's thread, which is why
//! spawned futures need not be `Send`.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::context;
use crate::run_queue::{Mailbox, TaskId};
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::waker;

const SCHEDULED: usize = 1;
const RUNNING: usize = 1 << 1;
const COMPLETE: usize = 1 << 2;
const ABORTED: usize = 1 << 3;

/// The thread-safe part of a task: what a waker needs to schedule it.
#[derive(Debug)]
pub(crate) struct Header {
    pub(crate) id: TaskId,
    state: AtomicUsize,
    shared: Arc<Mailbox>,
}

/// What `Header::start_run` tells the executor to do with a popped task.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// Poll it.
    Poll,
    /// Abort was requested: drop the future instead.
    Cancel,
    /// It already finished (a stale id in the queue): skip it.
    Skip,
}

impl Header {
    pub(crate) fn new(id: TaskId, shared: Arc<Mailbox>) -> Header {
        Header {
            id,
            state: AtomicUsize::new(0),
            shared,
        }
    }

    /// Wakes the task: queue it unless it is queued, running or finished.
    ///
    /// An unconditional `fetch_or`, not a compare-and-swap that gives up when
    /// SCHEDULED is already set. The difference is the memory model: a failed
    /// CAS writes nothing, so it *publishes* nothing. If the executor has
    /// popped the task but not yet called `start_run`, such a wake would be
    /// dropped ("it is scheduled anyway") while the poll that follows is not
    /// guaranteed to see the event that caused it: a lost wake. A
    /// read-modify-write always takes part in the atomic's order, so
    /// `start_run`'s own read-modify-write synchronizes with it. loom found
    /// this (`loom_wake_during_poll_is_neither_lost_nor_doubled`).
    pub(crate) fn schedule(&self) {
        let previous = self.state.fetch_or(SCHEDULED, Ordering::AcqRel);
        // Already queued: it will run. Running: the executor re-queues it
        // after the poll. Complete: nothing to run.
        if previous & (SCHEDULED | RUNNING | COMPLETE) == 0 {
            context::schedule(&self.shared, self.id);
        }
    }

    /// The executor popped this task: SCHEDULED becomes RUNNING.
    pub(crate) fn start_run(&self) -> Run {
        let previous = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                if s & COMPLETE != 0 {
                    None
                } else {
                    Some((s & !SCHEDULED) | RUNNING)
                }
            });
        match previous {
            Err(_) => Run::Skip,
            Ok(s) if s & ABORTED != 0 => Run::Cancel,
            Ok(_) => Run::Poll,
        }
    }

    /// The poll returned Pending. Returns true when a wake arrived during the
    /// poll, in which case the caller must queue the task again.
    pub(crate) fn end_run_pending(&self) -> bool {
        let previous = self.state.fetch_and(!RUNNING, Ordering::AcqRel);
        previous & SCHEDULED != 0
    }

    /// The task finished (or was cancelled): later wakes do nothing.
    pub(crate) fn complete(&self) {
        self.state.store(COMPLETE, Ordering::Release);
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// Asks the executor to drop the task's future at its next turn.
    pub(crate) fn abort(&self) {
        self.state.fetch_or(ABORTED, Ordering::AcqRel);
        self.schedule();
    }
}

/// A waker is an `Arc<Header>`: waking it is [`Header::schedule`]. The
/// standard library writes the vtable (see `waker.rs` for the hand-written
/// alternative and why we do not need it).
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

/// Why a task produced no output.
///
/// # Examples
///
/// A panic inside a task is caught at the task's edge: the other tasks and
/// the runtime go on, and the handle brings the panic's message back.
///
/// ```
/// let rt = runtime::Runtime::new()?;
/// let (failed, fine) = rt.block_on(async {
///     let failed = runtime::spawn(async { panic!("a bug in one task") });
///     let fine = runtime::spawn(async { "the others go on" });
///     (failed.await, fine.await)
/// });
/// let error = failed.unwrap_err();
/// assert!(error.is_panic());
/// assert_eq!(error.panic_message(), Some("a bug in one task"));
/// assert_eq!(fine.unwrap(), "the others go on");
/// # Ok::<(), std::io::Error>(())
/// ```
pub enum JoinError {
    /// It was aborted, or its runtime was dropped, before it finished.
    Cancelled,
    /// It panicked; the payload is what `panic!` was given.
    Panicked(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    /// True for [`JoinError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// True for [`JoinError::Panicked`].
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic message, when the payload is a string (as `panic!` makes).
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(payload) => panic_message(payload.as_ref()),
            JoinError::Cancelled => None,
        }
    }
}

/// The message of a panic payload, when it is a string (as `panic!` makes).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Panicked(_) => write!(
                f,
                "Panicked({:?})",
                self.panic_message().unwrap_or("<non-string payload>")
            ),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled before it finished"),
            JoinError::Panicked(_) => match self.panic_message() {
                Some(msg) => write!(f, "task panicked: {msg}"),
                None => f.write_str("task panicked"),
            },
        }
    }
}

impl std::error::Error for JoinError {}

/// Where a task's output waits for its `JoinHandle`. Lives on the runtime's
/// thread (an `Rc`): both the task and its handle stay there.
struct JoinSlot<T> {
    output: Cell<Option<Result<T, JoinError>>>,
    waiter: RefCell<Option<Waker>>,
    taken: Cell<bool>,
}

impl<T> JoinSlot<T> {
    fn finish(&self, output: Result<T, JoinError>) {
        self.output.set(Some(output));
        // Take the waker out before waking: the wake may run code that polls us.
        let waiter = self.waiter.borrow_mut().take();
        if let Some(w) = waiter {
            w.wake();
        }
    }

    fn is_done(&self) -> bool {
        self.taken.get() || {
            let out = self.output.take();
            let done = out.is_some();
            self.output.set(out);
            done
        }
    }
}

/// Fills the slot with `Cancelled` if the task is dropped before it finished
/// (aborted, or its runtime dropped), so no `JoinHandle` waits forever.
struct Completion<T>(Rc<JoinSlot<T>>);

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        if !self.0.is_done() {
            self.0.finish(Err(JoinError::Cancelled));
        }
    }
}

pin_project_lite::pin_project! {
    /// The future the executor stores for a task with a handle: the user's
    /// future, plus delivery of its output (or its panic) to the
    /// `JoinHandle`.
    pub(crate) struct Spawned<F: Future> {
        #[pin]
        future: F,
        // Declared after `future`, so dropped after it: when the handle
        // learns of a cancellation, the future's destructor has already run.
        completion: Completion<F::Output>,
    }
}

impl<F: Future> Future for Spawned<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        // A panicking task must not unwind through the executor and take
        // every other task down with it: catch it and report it to the handle.
        let output = match catch_unwind(AssertUnwindSafe(|| this.future.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(value)) => Ok(value),
            Err(payload) => Err(JoinError::Panicked(payload)),
        };
        this.completion.0.finish(output);
        Poll::Ready(())
    }
}

pin_project_lite::pin_project! {
    /// The future the executor stores for a task without a handle: the
    /// user's future alone, no room kept for a delivery (a server's
    /// connections are such tasks, thousands of them).
    pub(crate) struct Detached<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future<Output = ()>> Future for Detached<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Caught as a spawned task's is; its panic was said by the panic
        // hook, and nobody awaits its payload.
        let polled = catch_unwind(AssertUnwindSafe(|| self.project().future.poll(cx)));
        polled.unwrap_or(Poll::Ready(()))
    }
}

/// Wraps `future` for the executor and makes the handle that awaits it.
pub(crate) fn spawned<F: Future>(
    future: F,
    header: Arc<Header>,
) -> (Spawned<F>, JoinHandle<F::Output>) {
    let slot = Rc::new(JoinSlot {
        output: Cell::new(None),
        waiter: RefCell::new(None),
        taken: Cell::new(false),
    });
    let task = Spawned {
        future,
        completion: Completion(slot.clone()),
    };
    (task, JoinHandle { header, slot })
}

/// Wraps `future` for the executor, with no handle to await it.
pub(crate) fn detached<F: Future<Output = ()>>(future: F) -> Detached<F> {
    Detached { future }
}

/// Awaits a spawned task's output. Dropping it *detaches* the task: the task
/// keeps running and its output is dropped. [`JoinHandle::abort`] cancels it.
///
/// # Examples
///
/// Awaiting the handle gives the task's output in a `Result`; dropping the
/// handle instead lets the task run on, unobserved.
///
/// ```
/// use runtime::{Runtime, oneshot, spawn};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let handle = spawn(async { 1 + 1 });
///     assert_eq!(handle.await.unwrap(), 2);
///
///     let (tx, rx) = oneshot::channel();
///     drop(spawn(async move { tx.send("still ran").unwrap() }));
///     assert_eq!(rx.await, Ok("still ran"));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinHandle<T> {
    pub(crate) header: Arc<Header>,
    slot: Rc<JoinSlot<T>>,
}

impl<T> JoinHandle<T> {
    /// Cancels the task: at its next turn the executor drops its future
    /// (running its destructors) and this handle yields `Err(Cancelled)`.
    /// Does nothing to a task that already finished.
    ///
    /// # Examples
    ///
    /// A task waiting forever is cancelled from outside: its future is
    /// dropped without being polled again, so its destructors run (here a
    /// guard that says so), and the handle reports the cancellation.
    ///
    /// ```
    /// use std::{cell::Cell, rc::Rc};
    ///
    /// struct Guard(Rc<Cell<bool>>);
    /// impl Drop for Guard {
    ///     fn drop(&mut self) { self.0.set(true); }
    /// }
    ///
    /// let rt = runtime::Runtime::new()?;
    /// let dropped = Rc::new(Cell::new(false));
    /// let guard = Guard(dropped.clone());
    /// let handle = rt.spawn(async move {
    ///     let _guard = guard;
    ///     std::future::pending::<()>().await
    /// });
    /// handle.abort();
    /// let outcome = rt.block_on(handle);
    /// assert!(outcome.unwrap_err().is_cancelled());
    /// assert!(dropped.get(), "the future was dropped, its guard with it");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort(&self) {
        self.header.abort();
    }

    /// Has the task finished (with output, panic or cancellation)?
    pub fn is_finished(&self) -> bool {
        self.slot.is_done() || self.header.is_complete()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(
            !self.slot.taken.get(),
            "JoinHandle polled after it returned its output"
        );
        if let Some(output) = self.slot.output.take() {
            self.slot.taken.set(true);
            return Poll::Ready(output);
        }
        waker::store(&mut self.slot.waiter.borrow_mut(), cx.waker());
        Poll::Pending
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.header.id.0)
            .field("finished", &self.is_finished())
            .finish()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the state word and the cross-thread queue, run with
    //! `RUSTFLAGS="--cfg loom" cargo test -p runtime --release loom`.
    //! No thread-local queue is installed here, so every wake takes the
    //! remote path: the one where threads really race.
    use super::*;
    use crate::sync::thread;

    fn remote_ids(shared: &Mailbox) -> Vec<TaskId> {
        let mut ids = Vec::new();
        shared.take_remote(&mut ids);
        ids
    }

    #[test]
    fn loom_wake_during_poll_is_neither_lost_nor_doubled() {
        loom::model(|| {
            let shared = Arc::new(Mailbox::new().expect("eventfd"));
            let header = Arc::new(Header::new(TaskId(7), shared.clone()));
            header.schedule();
            assert_eq!(remote_ids(&shared), vec![TaskId(7)], "spawn queues it once");

            let event = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let (h, ev) = (header.clone(), event.clone());
            let waker = thread::spawn(move || {
                ev.store(true, Ordering::Release);
                h.schedule();
            });

            assert_eq!(header.start_run(), Run::Poll);
            let saw_event = event.load(Ordering::Acquire); // what this poll observed
            let again = header.end_run_pending();
            waker.join().expect("waker thread");

            let queued = remote_ids(&shared).len() + usize::from(again);
            assert!(queued <= 1, "queued twice");
            if !saw_event {
                assert_eq!(queued, 1, "lost wake: the event came after the poll looked");
            }
        });
    }

    #[test]
    fn loom_many_wakers_queue_once_and_complete_tasks_never() {
        loom::model(|| {
            let shared = Arc::new(Mailbox::new().expect("eventfd"));
            let header = Arc::new(Header::new(TaskId(3), shared.clone()));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let h = header.clone();
                    thread::spawn(move || h.schedule())
                })
                .collect();
            header.schedule();
            for t in threads {
                t.join().expect("waker thread");
            }
            assert_eq!(remote_ids(&shared), vec![TaskId(3)]);
            assert_eq!(header.start_run(), Run::Poll);
            header.complete();
            header.schedule();
            assert!(
                remote_ids(&shared).is_empty(),
                "a finished task is never queued"
            );
        });
    }

    #[test]
    fn loom_a_remote_push_after_the_executor_looked_raises_the_flag() {
        loom::model(|| {
            let shared = Arc::new(Mailbox::new().expect("eventfd"));
            let header = Arc::new(Header::new(TaskId(5), shared.clone()));
            let h = header.clone();
            let waker = thread::spawn(move || h.schedule());
            let first = remote_ids(&shared); // the executor looks, concurrently
            waker.join().expect("waker thread");
            if first.is_empty() {
                // The push came after we looked: the flag must tell us so,
                // which is what stops the executor from sleeping past it.
                assert!(shared.has_remote(), "remote wake lost");
                assert_eq!(remote_ids(&shared), vec![TaskId(5)]);
            } else {
                assert_eq!(first, vec![TaskId(5)]);
            }
        });
    }
}
