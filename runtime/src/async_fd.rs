//! `AsyncFd`: any non-blocking file descriptor, registered with the reactor,
//! with the one I/O loop every async operation in the crate goes through.
//!
//! ```text
//!   poll_io(direction, op):
//!     spend one unit of the task's budget (coop.rs)  ── spent? -> Pending
//!     loop {
//!       ready in `direction`?  no -> store the waker, Pending
//!       op()                      (read, write, accept, ...)
//!         EAGAIN   -> forget the readiness, loop (the check above now waits)
//!         EINTR    -> loop, try again
//!         anything else (data, EOF, a real error) -> Ready(result)
//!     }
//! ```
//!
//! That loop is the whole contract of edge-triggered epoll (`reactor.rs`):
//! readiness is only cleared by an operation that would block, so no edge is
//! ever missed, and a task only sleeps when the kernel said "not now".
//!
//! Registration happens in [`AsyncFd::new`] and deregistration in `Drop`,
//! *before* the descriptor is closed, so the epoll set never holds a closed
//! descriptor and a reused descriptor number cannot inherit stale events.
//!
//! An `AsyncFd` belongs to the runtime (thread) that created it: it is
//! neither `Send` nor `Sync`.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

use crate::context;
use crate::coop;
use crate::reactor::{Direction, Reactor, ScheduledIo};
use crate::slab::Key;

/// A descriptor registered with the current runtime's reactor.
pub struct AsyncFd<T: AsRawFd> {
    inner: Option<T>,
    io: Rc<ScheduledIo>,
    key: Key,
    reactor: Rc<Reactor>,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Registers `inner` (which must already be non-blocking) with the
    /// reactor of the runtime running on this thread.
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::register(inner, false)
    }

    /// Like [`AsyncFd::new`], for a descriptor known to be ready both ways
    /// (a socket just accepted): the first read and write try the system
    /// call at once rather than wait a loop turn for epoll to confirm it.
    /// Never for a socket still connecting: "writable" is what announces
    /// that its connect finished.
    pub fn new_connected(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::register(inner, true)
    }

    fn register(inner: T, assume_ready: bool) -> io::Result<AsyncFd<T>> {
        let reactor = context::driver()?.reactor.clone();
        let (key, io) = reactor.register(inner.as_raw_fd(), assume_ready)?;
        Ok(AsyncFd {
            inner: Some(inner),
            io,
            key,
            reactor,
        })
    }

    /// The wrapped descriptor.
    pub fn get_ref(&self) -> &T {
        self.inner
            .as_ref()
            .expect("inner is only taken in Drop and into_inner")
    }

    /// Ready in `direction` (as far as the reactor knows), or remember the
    /// task and return Pending.
    pub fn poll_ready(&self, direction: Direction, cx: &mut Context<'_>) -> Poll<()> {
        self.io.poll_ready(direction, cx)
    }

    /// Waits until the reactor reports `direction` ready.
    pub async fn ready(&self, direction: Direction) {
        poll_fn(|cx| self.poll_ready(direction, cx)).await
    }

    /// Forgets the readiness of `direction`: call this when an operation
    /// done outside [`AsyncFd::poll_io`] returned EAGAIN.
    pub fn clear_ready(&self, direction: Direction) {
        self.io.clear_ready(direction)
    }

    /// Ready once the descriptor hung up or failed (EPOLLHUP or EPOLLERR).
    /// Meant for a descriptor whose read side is finished: the waiting
    /// task is kept in the reader's slot.
    pub fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.io.poll_hang_up(cx)
    }

    /// Has the reactor seen the peer close its sending side (RDHUP/HUP)?
    pub fn is_read_closed(&self) -> bool {
        self.io.is_read_closed()
    }

    /// Runs `op` until it does not block, waiting for readiness in between.
    /// See the module docs for the loop.
    pub fn poll_io<R>(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        ready!(coop::poll_proceed(cx));
        loop {
            if self.io.poll_ready(direction, cx).is_pending() {
                // Nothing completed: this poll costs the task no budget.
                coop::refund();
                return Poll::Pending;
            }
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.clear_ready(direction),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Data, end of file, or a real error: all charged to the budget,
                // so a task looping on an error (EMFILE) still yields.
                result => return Poll::Ready(result),
            }
        }
    }

    /// Async form of [`AsyncFd::poll_io`].
    pub async fn io<R>(
        &self,
        direction: Direction,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        poll_fn(|cx| self.poll_io(direction, cx, &mut op)).await
    }

    /// Deregisters and gives the descriptor back.
    pub fn into_inner(mut self) -> T {
        self.deregister();
        self.inner
            .take()
            .expect("inner is only taken in Drop and into_inner")
    }

    fn deregister(&self) {
        if let Some(inner) = &self.inner {
            // A failed EPOLL_CTL_DEL (it cannot fail for a live descriptor we
            // registered) leaves nothing to undo: closing removes it anyway.
            let _ = self.reactor.deregister(self.key, inner.as_raw_fd());
        }
    }
}

impl<T: AsRawFd> Drop for AsyncFd<T> {
    fn drop(&mut self) {
        // Deregister first, then `inner` closes the descriptor as it drops.
        self.deregister();
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", &self.inner)
            .field("token", &self.key)
            .finish()
    }
}
