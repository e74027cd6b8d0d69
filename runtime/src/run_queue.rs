//! The run queue: the ids of the tasks that are ready to be polled.
//!
//! A wake can come from two kinds of places, and they take two paths
//! (`context::schedule` picks one):
//!
//! ```text
//!   the runtime's own thread                  any other thread
//!   (a reactor event, a timer,                (the blocking pool finishing a job,
//!    one task waking another)                  a oneshot sent from a worker)
//!          │                                           │
//!          v                                           v
//!   local queue: VecDeque<TaskId>             remote queue: Mutex<Vec<TaskId>>
//!   in the thread's context (context.rs):     (here, in `Mailbox`), then, if no
//!   a thread-local, so it needs no lock,      notification is pending, write the
//!   and no system call                        eventfd -> epoll_wait returns
//!          │                                           │
//!          └────────────> the executor pops <──────────┘
//!                         (the remote queue is only emptied into the
//!                          local one when the `notified` flag says so)
//! ```
//!
//! The local path is the hot one: every readiness event and timer lands
//! there, so the epoll path takes no lock and makes no system call to
//! schedule a task. The remote path pays a lock and, at most once per batch
//! of remote wakes, one `write` to the eventfd: the `notified` flag
//! coalesces them (smol's `polling` does the same).
//!
//! ## No lost wake-up across threads
//!
//! The remote waker pushes, *then* sets `notified` and writes the eventfd if
//! the flag was clear. The executor clears the flag, *then* empties the
//! queue. Whatever the interleaving, an id pushed after the executor looked
//! finds the flag clear and writes the eventfd, so the next `epoll_wait`
//! returns at once. (`loom_tests` in `task.rs` checks this under every
//! interleaving loom explores, within its preemption bound.)

use std::io;

use crate::slab::Key;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Mutex, lock};
use crate::sys::EventFd;

/// Names a task: its key in the executor's slab (index and generation).
///
/// A type of its own, not a bare `u64`, because the crate has a second kind
/// of 64-bit name that is also a slab key and also reserves `u64::MAX`: the
/// epoll token ([`crate::reactor::EVENTFD_TOKEN`] names the eventfd). With
/// two types, comparing a task id with a token, or queueing a token as a
/// task, does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskId(pub(crate) Key);

impl TaskId {
    /// The id of `block_on`'s own future, which lives on `block_on`'s stack,
    /// not in the slab. Slab keys never reach it: that would take 2^32
    /// generations of slot 0xffff_ffff.
    pub(crate) const BLOCK_ON: TaskId = TaskId(u64::MAX);
}

/// The part of a runtime that other threads may touch: every task's waker
/// holds an `Arc` of it, which is why a waker can outlive its runtime and
/// still be safe to call (it then does nothing).
#[derive(Debug)]
pub(crate) struct Mailbox {
    runtime_id: u64,
    remote: Mutex<Vec<TaskId>>,
    notified: AtomicBool,
    closed: AtomicBool,
    pub(crate) eventfd: EventFd,
}

fn next_runtime_id() -> u64 {
    // Plain std: an id counter is not part of any protocol loom checks.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Mailbox {
    pub(crate) fn new() -> io::Result<Mailbox> {
        Ok(Mailbox {
            runtime_id: next_runtime_id(),
            remote: Mutex::new(Vec::new()),
            notified: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            eventfd: EventFd::new()?,
        })
    }

    /// Names this runtime among the others in the process (never 0).
    pub(crate) fn id(&self) -> u64 {
        self.runtime_id
    }

    /// Queues `id` from a thread that is not running this runtime (or from a
    /// `block_on` that is leaving), and makes sure the executor hears of it.
    pub(crate) fn push_remote(&self, id: TaskId) {
        if self.closed.load(Ordering::Acquire) {
            return; // the runtime is gone: waking is a no-op
        }
        lock(&self.remote).push(id);
        if !self.notified.swap(true, Ordering::AcqRel) {
            self.eventfd.notify();
        }
    }

    /// Is a remote wake waiting to be collected?
    pub(crate) fn has_remote(&self) -> bool {
        self.notified.load(Ordering::Acquire)
    }

    /// Moves remotely scheduled ids into `into`. Clears the flag first, so a
    /// push that races with us either lands in this batch or notifies again.
    pub(crate) fn take_remote(&self, into: &mut impl Extend<TaskId>) {
        if self.notified.swap(false, Ordering::AcqRel) {
            let mut remote = lock(&self.remote);
            into.extend(remote.drain(..));
        }
    }

    /// Marks the runtime gone: later wakes do nothing.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
