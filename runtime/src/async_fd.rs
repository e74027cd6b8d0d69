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
//! Reads and writes that know how much they asked for go through
//! [`AsyncFd::poll_transfer`], the same loop plus the short-transfer rule
//! (`reactor.rs`): a read or write that moved less than asked forgets the
//! readiness at once, and a read after the FIN and an emptied queue
//! returns end of file without a system call.
//!
//! Registration happens in [`AsyncFd::new`]; in `Drop` the token is freed
//! before the descriptor is closed, so a reused descriptor number cannot
//! inherit stale events. A descriptor of unknown history (`new`) is also
//! removed from the epoll set first (`EPOLL_CTL_DEL`): it may have copies
//! that keep its file open. One the runtime created itself (accepted,
//! connecting: `AsyncFd::new_alone`) is its file's only descriptor, and
//! its `close` removes it from the set: one system call fewer per socket.
//!
//! An `AsyncFd` is its token and its reactor: what the reactor knows of the
//! descriptor (`ScheduledIo`) lives in the reactor's slab, and each
//! operation looks it up by the token, a borrow held for that one call and
//! never across `op`, which may register or close descriptors of its own.
//! The `Rc<Reactor>` keeps that slab alive for as long as the `AsyncFd`,
//! so one dropped after its runtime, or under another, still frees its own
//! token in its own reactor.
//!
//! An `AsyncFd` belongs to the runtime (thread) that created it: it is
//! neither `Send` nor `Sync`.

use std::cell::Ref;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

use crate::context;
use crate::coop;
use crate::reactor::{Interest, Reactor, ScheduledIo};
use crate::slab::Key;

/// A descriptor registered with the current runtime's reactor.
///
/// # Examples
///
/// Any non-blocking descriptor can wait on the reactor, here one end of a
/// Unix socket pair. [`AsyncFd::io`] runs the read; while it says EAGAIN,
/// the task sleeps until epoll reports the socket readable, which happens
/// when the other thread writes.
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::unix::net::UnixStream;
/// use runtime::{Runtime, async_fd::AsyncFd, reactor::Interest};
///
/// let (ours, mut theirs) = UnixStream::pair()?;
/// ours.set_nonblocking(true)?; // a read must say EAGAIN, never block the thread
/// let rt = Runtime::new()?;
/// let got = rt.block_on(async {
///     let fd = AsyncFd::new(ours)?;
///     let writer = std::thread::spawn(move || theirs.write_all(b"ready"));
///     let mut buf = [0u8; 16];
///     let n = fd.io(Interest::Read, |mut socket| socket.read(&mut buf)).await?;
///     writer.join().unwrap()?;
///     Ok::<_, std::io::Error>(buf[..n].to_vec())
/// })?;
/// assert_eq!(got, b"ready");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AsyncFd<T: AsRawFd> {
    inner: Option<T>,
    /// The token: the key of its `ScheduledIo` in the reactor's slab.
    key: Key,
    reactor: Rc<Reactor>,
    /// The only descriptor of its open file: closing it is enough to take it
    /// out of the epoll set.
    alone: bool,
}

/// What the runtime knows of a descriptor it is given to register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Made elsewhere: it may have copies (dup, fork), so it is removed from
    /// the epoll set before it closes.
    Adopted,
    /// Created by the runtime and never copied, still connecting.
    Created,
    /// Created by the runtime, never copied, and known to be ready both
    /// ways (a socket just accepted): the first read and write try the
    /// system call at once rather than wait a loop turn for epoll to confirm
    /// it. Never for a socket still connecting: "writable" is what announces
    /// that its connect finished.
    CreatedConnected,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Registers `inner` (which must already be non-blocking) with the
    /// reactor of the runtime running on this thread.
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::register(inner, Origin::Adopted)
    }

    /// Registers a descriptor the runtime itself created (see [`Origin`]).
    pub(crate) fn new_alone(inner: T, origin: Origin) -> io::Result<AsyncFd<T>> {
        AsyncFd::register(inner, origin)
    }

    fn register(inner: T, origin: Origin) -> io::Result<AsyncFd<T>> {
        let reactor = context::driver()?.reactor.clone();
        let assume_ready = origin == Origin::CreatedConnected;
        let key = reactor.register(inner.as_raw_fd(), assume_ready)?;
        Ok(AsyncFd {
            inner: Some(inner),
            key,
            reactor,
            alone: origin != Origin::Adopted,
        })
    }

    /// The wrapped descriptor.
    pub fn get_ref(&self) -> &T {
        self.inner
            .as_ref()
            .expect("inner is only taken in Drop and into_inner")
    }

    /// What the reactor knows of this descriptor, borrowed for one call.
    fn source(&self) -> Ref<'_, ScheduledIo> {
        self.reactor
            .source(self.key)
            .expect("the token is registered from `register` until Drop or into_inner")
    }

    /// Ready in `direction` (as far as the reactor knows), or remember the
    /// task and return Pending.
    pub fn poll_ready(&self, direction: Interest, cx: &mut Context<'_>) -> Poll<()> {
        self.source().poll_ready(direction, cx)
    }

    /// Waits until the reactor reports `direction` ready.
    pub async fn ready(&self, direction: Interest) {
        poll_fn(|cx| self.poll_ready(direction, cx)).await
    }

    /// Forgets the readiness of `direction`: call this when an operation
    /// done outside [`AsyncFd::poll_io`] returned EAGAIN.
    pub fn clear_ready(&self, direction: Interest) {
        self.source().clear_ready(direction)
    }

    /// Ready once the descriptor hung up or failed (EPOLLHUP or EPOLLERR).
    /// Meant for a descriptor whose read side is finished: the waiting
    /// task is kept in the reader's slot.
    pub fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.source().poll_hang_up(cx)
    }

    /// Is the next read sure to return end of file (the reactor's
    /// `at_eof`: FIN seen, nothing left to read)?
    pub fn at_eof(&self) -> bool {
        self.source().at_eof()
    }

    /// Has the reactor seen the peer close its sending side (RDHUP/HUP)?
    pub fn is_read_closed(&self) -> bool {
        self.source().is_read_closed()
    }

    /// Runs `op` until it does not block, waiting for readiness in between.
    /// See the module docs for the loop.
    pub fn poll_io<R>(
        &self,
        direction: Interest,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        ready!(coop::poll_proceed(cx));
        loop {
            if self.source().poll_ready(direction, cx).is_pending() {
                // Nothing completed: this poll costs the task no budget.
                coop::refund();
                return Poll::Pending;
            }
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.source().clear_ready(direction)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Data, end of file, or a real error: all charged to the budget,
                // so a task looping on an error (EMFILE) still yields.
                result => return Poll::Ready(result),
            }
        }
    }

    /// [`AsyncFd::poll_io`] for an operation offered `asked` bytes that
    /// returns how many it moved (a read or a write), with the short-transfer
    /// rule of the module docs: moving less than asked clears the readiness,
    /// and a read the reactor knows to be at end of file returns `Ok(0)`
    /// without a system call.
    pub fn poll_transfer(
        &self,
        direction: Interest,
        cx: &mut Context<'_>,
        asked: usize,
        op: impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        if direction == Interest::Read && asked > 0 && self.source().at_eof() {
            return Poll::Ready(Ok(0));
        }
        let result = ready!(self.poll_io(direction, cx, op));
        if let Ok(moved) = result {
            self.source().after_transfer(direction, asked, moved);
        }
        Poll::Ready(result)
    }

    /// Did the kernel report an error or a hang-up on this descriptor? For a
    /// socket whose connect ended (writable), this alone tells failure from
    /// success; only a failure needs `SO_ERROR` to learn which error.
    pub fn has_failed(&self) -> bool {
        self.source().has_failed()
    }

    /// Async form of [`AsyncFd::poll_io`].
    pub async fn io<R>(
        &self,
        direction: Interest,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        poll_fn(|cx| self.poll_io(direction, cx, &mut op)).await
    }

    /// Deregisters and gives the descriptor back. It lives on, so it leaves
    /// the epoll set whatever its origin.
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
        // The token goes first, then `inner` closes the descriptor as it
        // drops; that close takes a descriptor the runtime made out of the
        // epoll set, so only an adopted one needs the EPOLL_CTL_DEL.
        if self.inner.is_none() {
            // Given back by `into_inner`, which deregistered it.
        } else if self.alone {
            self.reactor.forget(self.key);
        } else {
            self.deregister();
        }
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", &self.inner)
            .field("token", &self.key)
            .field("alone", &self.alone)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_socket_is_three_words_and_its_state_lives_in_the_slab() {
        // Kept per socket for its whole life: thousands of idle connections
        // hold two each (docs/EPOLL.md, "What an idle connection keeps").
        let size = std::mem::size_of::<AsyncFd<std::net::TcpStream>>();
        assert_eq!(size, 24, "{size}");
        assert_eq!(std::mem::size_of::<ScheduledIo>(), 40);
    }

    #[test]
    fn an_operation_may_register_and_close_descriptors_of_its_own() {
        use std::io::{Read, Write};
        use std::os::unix::net::UnixStream;
        // `op` runs with no borrow of the reactor's slab held: registering
        // (a mutable borrow) and forgetting (another) inside it must work.
        let rt = crate::Runtime::new().unwrap();
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.write_all(b"x").unwrap();
        let got = rt.block_on(async {
            let fd = AsyncFd::new(ours).unwrap();
            let mut buf = [0u8; 4];
            let n = fd
                .io(Interest::Read, |mut socket| {
                    let (a, _b) = UnixStream::pair()?;
                    a.set_nonblocking(true)?;
                    let inner = AsyncFd::new(a)?;
                    drop(inner);
                    socket.read(&mut buf)
                })
                .await
                .unwrap();
            assert_eq!(crate::context::driver().unwrap().reactor.registered(), 1);
            buf[..n].to_vec()
        });
        assert_eq!(got, b"x");
    }
}
