//! The reactor: turns "this descriptor is ready" from the kernel into
//! "wake the task that was waiting for it".
//!
//! Every socket the runtime owns is registered once, when it is created,
//! with an epoll set. From then on the kernel tells us when it can be read
//! or written; the reactor records that as *readiness* and wakes whichever
//! task had asked.
//!
//! ```text
//!   task: read() -> EAGAIN            reactor                       kernel
//!     clear READABLE  ───────────────> ScheduledIo { readiness,
//!     store waker     ───────────────>               reader waker }
//!     return Pending                                                  data arrives
//!                                      epoll_wait  <───────────────── EPOLLIN (an edge)
//!                                      set READABLE, take the waker
//!     poll again  <──── wake ───────── (after all events are read)
//!   read() -> data
//! ```
//!
//! ## Edge-triggered, with readiness remembered
//!
//! Level-triggered epoll reports a readable socket on *every* `epoll_wait`
//! until it is drained; that is simple, but a socket whose task is busy
//! elsewhere keeps being reported (and a socket in error keeps the loop
//! spinning). One-shot reports once and must be re-armed with an
//! `epoll_ctl` after every event: one extra system call per wait.
//!
//! We use edge-triggered (`EPOLLET`): the kernel reports a change once, and
//! we *remember* it in `ScheduledIo` until an operation on that direction
//! shows it is gone (`EAGAIN`, or a short transfer: see below).
//! Registration happens once, at creation, for both directions, so no
//! `epoll_ctl` is paid while a connection lives, and readiness that arrives
//! before anyone asks is not lost: it waits in the cache. The price is the rule every I/O path follows (see `async_fd.rs`):
//! keep doing the operation until it would block (or has visibly emptied
//! the queue), and only then clear the readiness and wait.
//!
//! Why clearing on `EAGAIN` is safe here without the "ticks" tokio needs:
//! this reactor belongs to one thread. Events are only recorded while that
//! thread is inside `epoll_wait`, never while a task is running, so between
//! a task's `EAGAIN` and its clearing no event can slip in and be erased.
//! Data that arrives later makes a new edge, seen at the next wait.
//!
//! ## A short transfer is as good as EAGAIN
//!
//! Waiting for `EAGAIN` costs one system call that moves nothing, on every
//! read and every write that empties a queue: in a request/response relay,
//! that is one crossing in three. Instead, a read that returns *fewer bytes
//! than asked* clears the read readiness, and a write that takes fewer than
//! offered clears the write readiness (`ScheduledIo::after_transfer`; tokio
//! does the same in its `poll_read`).
//!
//! - **Why a short read means "empty".** A TCP or Unix stream read copies
//!   everything queued, up to the buffer's size; it returns less only when
//!   the queue ran dry during the call. A short write likewise means the
//!   send buffer filled, and the kernel has marked the socket "no space", so
//!   the space that frees later raises `EPOLLOUT`.
//! - **Why no wake is lost.** Edge-triggered epoll reports each new arrival
//!   (every packet queued calls the socket's wake-up, not only the first
//!   one into an empty queue). Bytes that arrive *after* the short read, or
//!   while it ran, make an event that waits in the kernel until the next
//!   `epoll_wait`, and that event sets the bit again: the clearing, done
//!   right after the call returned, is always older than the event. This is
//!   the same argument as for `EAGAIN`, which is also only an observation of
//!   a moment.
//! - **End of file after a short read.** The read-closed bit (from
//!   `EPOLLRDHUP` or `EPOLLHUP`) is sticky, and it is only set by an event
//!   that also makes the read side ready. A FIN is queued behind every byte
//!   sent before it, so a short read done *after* the FIN was recorded read
//!   everything there will ever be: the next read can only return 0. The
//!   reactor answers that read itself (`ScheduledIo::at_eof`) and saves
//!   the system call, unless an error was also seen, which only the kernel
//!   can report. If the FIN arrives after the short read, its event makes
//!   the read ready again, and that read asks the kernel as usual.
//!
//! ## Closed and error bits
//!
//! `EPOLLRDHUP` means *the peer will send no more*: the read side closed.
//! It is not `EPOLLHUP` (both sides closed). Treating it as both would make
//! a writer on a half-closed socket believe it can write, fail with EAGAIN,
//! and spin. So RDHUP marks only the read direction ready (a read returns
//! 0, end of file); HUP and ERR mark both, so each waiting side tries its
//! operation and learns the outcome from the system call itself.
//!
//! ## Stale events, and closing without `EPOLL_CTL_DEL`
//!
//! A token is a slab key *with a generation* (`slab.rs`): an event already
//! queued for a closed descriptor, whose number the kernel has since handed
//! to a new socket, carries the old generation and is dropped.
//!
//! That is also why a socket the runtime created itself (accepted, or made
//! to connect) is closed *without* an `EPOLL_CTL_DEL` first: epoll watches
//! the open file, and the kernel takes a file out of every epoll set when
//! its last descriptor is closed. With one descriptor, `close` is that last
//! one, and one system call per socket is saved. A file can have other
//! descriptors only if someone made them: a `dup` of ours, or a child
//! between `fork` and `exec` (every socket here is close-on-exec, so only
//! for that moment). Then the registration outlives our close until the
//! copy closes too; its events carry a token whose generation is gone, so
//! they wake nobody (they cost an `epoll_wait` result each, nothing more).
//! Descriptors the runtime did not create (`AsyncFd::new`,
//! `TcpStream::from_std`, a listener) may have such copies, so those are
//! still removed with `EPOLL_CTL_DEL` before they close (`async_fd.rs`).

use std::cell::{Cell, Ref, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::slab::{Key, Slab};
use crate::sys::{self, Epoll, EpollEvent};
use crate::waker;

/// The epoll token of the executor's eventfd (cross-thread wakes): an event
/// under it means "another thread queued a task", not "a socket is ready".
/// Slab keys never reach it: that would need 2^32 generations of slot
/// 0xffff_ffff. A token is a plain `u64` (the kernel's `epoll_event.u64`);
/// the task id that also reserves `u64::MAX` has a type of its own
/// (`run_queue::TaskId`), so the two cannot be confused.
pub(crate) const EVENTFD_TOKEN: u64 = u64::MAX;

/// How many events one `epoll_wait` may return. More simply wait for the next turn.
const EVENTS_PER_WAIT: usize = 1024;

/// One direction of I/O a task can wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Waiting to read (or accept).
    Read,
    /// Waiting to write (or for a connect to finish).
    Write,
}

/// Readiness bits remembered for one descriptor.
mod bits {
    pub const READABLE: u8 = 1;
    pub const WRITABLE: u8 = 1 << 1;
    /// The peer closed its sending side (EPOLLRDHUP) or the socket hung up.
    pub const READ_CLOSED: u8 = 1 << 2;
    /// The socket hung up (EPOLLHUP); writes will fail.
    pub const WRITE_CLOSED: u8 = 1 << 3;
    /// EPOLLERR: the next operation will report the error.
    pub const ERROR: u8 = 1 << 4;
}

/// What the reactor knows about one registered descriptor: the readiness it
/// has seen and not yet been told is gone, and at most one waiting task per
/// direction (one reader, one writer, the way a relay uses a socket).
///
/// It lives in the reactor's slab, by value. The wakers sit in `Cell`s,
/// taken out and put back around each change, so every operation needs
/// only a shared borrow of the slab ([`Reactor::source`]); a `RefCell`
/// would add a borrow flag to each slot (an idle connection holds two).
#[derive(Default)]
pub(crate) struct ScheduledIo {
    readiness: Cell<u8>,
    reader: Cell<Option<Waker>>,
    writer: Cell<Option<Waker>>,
}

impl std::fmt::Debug for ScheduledIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduledIo")
            .field("readiness", &self.readiness.get())
            .finish_non_exhaustive()
    }
}

/// Makes `waker` the one `slot` holds, as [`waker::store`] does.
fn store_in(slot: &Cell<Option<Waker>>, waker: &Waker) {
    let mut stored = slot.take();
    waker::store(&mut stored, waker);
    slot.set(stored);
}

impl ScheduledIo {
    fn ready_mask(direction: Interest) -> u8 {
        match direction {
            // A closed read side or an error is "ready" too: the read will
            // return 0 or the error instead of blocking.
            Interest::Read => bits::READABLE | bits::READ_CLOSED | bits::ERROR,
            Interest::Write => bits::WRITABLE | bits::WRITE_CLOSED | bits::ERROR,
        }
    }

    fn slot(&self, direction: Interest) -> &Cell<Option<Waker>> {
        match direction {
            Interest::Read => &self.reader,
            Interest::Write => &self.writer,
        }
    }

    /// Is `direction` ready as far as we know?
    pub(crate) fn is_ready(&self, direction: Interest) -> bool {
        self.readiness.get() & Self::ready_mask(direction) != 0
    }

    /// Ready now, or remember `cx`'s waker and say Pending.
    ///
    /// The waker is stored *before* the final readiness check. On this
    /// single-threaded reactor no event can land in between, but keeping the
    /// order makes the code correct by construction rather than by that
    /// argument, and it is the order every multi-threaded reactor needs.
    pub(crate) fn poll_ready(&self, direction: Interest, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_ready(direction) {
            return Poll::Ready(());
        }
        // A new waker replaces the old one silently: one waiter per
        // direction, so waking the old one would only cost a spurious poll.
        store_in(self.slot(direction), cx.waker());
        if self.is_ready(direction) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// An operation in `direction` returned EAGAIN: forget that it was ready.
    /// Closed and error bits stay: they never go away once seen.
    pub(crate) fn clear_ready(&self, direction: Interest) {
        let bit = match direction {
            Interest::Read => bits::READABLE,
            Interest::Write => bits::WRITABLE,
        };
        self.readiness.set(self.readiness.get() & !bit);
    }

    /// A read or write that was offered `asked` bytes moved `moved`; what
    /// that proves (module docs, "A short transfer is as good as EAGAIN").
    /// Fewer than asked: the queue was exhausted, so the next call would
    /// block; forget the readiness now instead of paying for the EAGAIN.
    /// A read of nothing (of something asked) is end of file: the read side
    /// is closed for good, whether or not its event has come yet.
    pub(crate) fn after_transfer(&self, direction: Interest, asked: usize, moved: usize) {
        if moved >= asked {
            return;
        }
        self.clear_ready(direction);
        if direction == Interest::Read && moved == 0 {
            self.readiness.set(self.readiness.get() | bits::READ_CLOSED);
        }
    }

    /// Is the next read sure to return end of file? The peer's FIN was seen,
    /// and a read since then found the queue empty (only such a read clears
    /// READABLE once the FIN is recorded). Not when an error was seen: only
    /// the kernel can say which one.
    pub(crate) fn at_eof(&self) -> bool {
        let readiness = self.readiness.get();
        readiness & bits::READ_CLOSED != 0 && readiness & (bits::READABLE | bits::ERROR) == 0
    }

    /// Did the kernel report an error or a hang-up? After a connect, this is
    /// what says "failed"; writable without it says "connected".
    pub(crate) fn has_failed(&self) -> bool {
        self.readiness.get() & (bits::WRITE_CLOSED | bits::ERROR) != 0
    }

    /// Ready once the socket hung up or failed (EPOLLHUP or EPOLLERR seen),
    /// or remember `cx`'s waker and say Pending.
    ///
    /// For a socket whose read side is finished (EOF seen): nobody reads it
    /// any more, so the reader's slot is free to hold the waker, and a
    /// hang-up wakes it. A relay uses this to notice a reset from a side it
    /// no longer reads.
    pub(crate) fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.has_failed() {
            return Poll::Ready(());
        }
        store_in(&self.reader, cx.waker());
        if self.has_failed() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Has the peer closed its sending side (RDHUP or HUP seen)?
    pub(crate) fn is_read_closed(&self) -> bool {
        self.readiness.get() & bits::READ_CLOSED != 0
    }

    /// Records an epoll event and collects the wakers it concerns.
    fn record(&self, events: u32, wakers: &mut Vec<Waker>) {
        let mut add = 0;
        if events & sys::EPOLLIN != 0 {
            add |= bits::READABLE;
        }
        if events & sys::EPOLLOUT != 0 {
            add |= bits::WRITABLE;
        }
        // A closed read side also makes the read side ready: the bytes before
        // the FIN may be unread, and `at_eof` counts on a read after this.
        if events & sys::EPOLLRDHUP != 0 {
            add |= bits::READABLE | bits::READ_CLOSED;
        }
        if events & sys::EPOLLHUP != 0 {
            add |= bits::READABLE | bits::READ_CLOSED | bits::WRITE_CLOSED;
        }
        if events & sys::EPOLLERR != 0 {
            add |= bits::ERROR;
        }
        self.readiness.set(self.readiness.get() | add);
        for direction in [Interest::Read, Interest::Write] {
            if add & Self::ready_mask(direction) != 0 {
                wakers.extend(self.slot(direction).take());
            }
        }
    }
}

/// The epoll set and the table of what is registered in it.
///
/// Each descriptor's `ScheduledIo` lives in the slab itself, by value: 48
/// bytes per registered descriptor and no allocation of its own. Its
/// `AsyncFd` keeps the key and looks it up for every operation
/// ([`Reactor::source`]). The slab's `RefCell` is borrowed mutably only to
/// register and to forget, and no borrow is held while a task's code runs:
/// `dispatch` collects wakers under a shared borrow and the driver wakes
/// them after it, a forgotten `ScheduledIo` (with its wakers) is dropped
/// after the borrow ends, and the only outside code run under a borrow is
/// a waker's clone, or the drop of the one it replaces, when a poll stores
/// it (reference counting, for every waker of this crate).
#[derive(Debug)]
pub(crate) struct Reactor {
    epoll: Epoll,
    sources: RefCell<Slab<ScheduledIo>>,
    events: RefCell<Vec<EpollEvent>>,
    /// Set when the eventfd fired during the last turn.
    woken_remotely: Cell<bool>,
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            epoll: Epoll::new()?,
            sources: RefCell::new(Slab::new()),
            events: RefCell::new(Vec::with_capacity(EVENTS_PER_WAIT)),
            woken_remotely: Cell::new(false),
        })
    }

    /// Watches the executor's eventfd under the reserved token.
    pub(crate) fn watch_eventfd(&self, fd: RawFd) -> io::Result<()> {
        self.epoll
            .add(fd, sys::EPOLLIN | sys::EPOLLET, EVENTFD_TOKEN)
    }

    /// Registers `fd` for both directions, edge-triggered, and returns its
    /// token, which is also its key for [`Reactor::source`]. Before `fd`
    /// closes, the caller frees the token with [`Reactor::forget`] (the
    /// descriptor is its file's only one) or [`Reactor::deregister`] (it
    /// may have copies).
    ///
    /// `assume_ready` starts both directions as ready: for a socket known to
    /// be connected (just accepted), the first read or write then tries the
    /// system call at once instead of waiting a loop turn for epoll to
    /// confirm what is almost always true ("speculative I/O", as HAProxy
    /// does). It is safe under edge triggering: the socket is registered
    /// before the first attempt, so if that attempt meets EAGAIN and clears
    /// the readiness, the next change still makes an edge.
    pub(crate) fn register(&self, fd: RawFd, assume_ready: bool) -> io::Result<Key> {
        let io = ScheduledIo::default();
        if assume_ready {
            io.readiness.set(bits::READABLE | bits::WRITABLE);
        }
        let key = self.sources.borrow_mut().insert_with(|_| io);
        let interest = sys::EPOLLIN | sys::EPOLLOUT | sys::EPOLLRDHUP | sys::EPOLLET;
        if let Err(e) = self.epoll.add(fd, interest, key) {
            self.forget(key);
            return Err(e);
        }
        Ok(key)
    }

    /// The state of the descriptor registered under `key`, borrowed from
    /// the slab: hold it for one call, not across code that may register
    /// or close a descriptor. None once the key was freed.
    pub(crate) fn source(&self, key: Key) -> Option<Ref<'_, ScheduledIo>> {
        Ref::filter_map(self.sources.borrow(), |sources| sources.get(key)).ok()
    }

    /// Frees the token of a descriptor about to be closed that is its open
    /// file's only descriptor: the close itself takes the file out of the
    /// epoll set (module docs, "closing without `EPOLL_CTL_DEL`").
    pub(crate) fn forget(&self, key: Key) {
        let removed = self.sources.borrow_mut().remove(key);
        // Dropped here, with the borrow over: a waker's drop is code of its own.
        drop(removed);
    }

    /// Stops watching `fd` and frees its token: for a descriptor that may
    /// have copies, or that lives on after us. Errors are reported but the
    /// token is freed regardless.
    pub(crate) fn deregister(&self, key: Key, fd: RawFd) -> io::Result<()> {
        self.forget(key);
        self.epoll.delete(fd)
    }

    /// How many descriptors are registered (the eventfd not counted).
    pub(crate) fn registered(&self) -> usize {
        self.sources.borrow().len()
    }

    /// Waits for events until `deadline` (None: until one arrives), records
    /// them and pushes the wakers they concern onto `wakers`.
    ///
    /// EINTR (a signal arrived) is retried with the timeout recomputed from
    /// the absolute deadline, so a stream of signals neither ends the wait
    /// early nor stretches it.
    pub(crate) fn poll(
        &self,
        deadline: Option<Instant>,
        wakers: &mut Vec<Waker>,
    ) -> io::Result<()> {
        let mut events = self.events.borrow_mut();
        loop {
            let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match self.epoll.wait(&mut events, sys::epoll_timeout_ms(timeout)) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        for event in events.iter() {
            // Copy out of the (packed) kernel struct before use.
            let (token, bits) = (event.u64, event.events);
            self.dispatch(token, bits, wakers);
        }
        Ok(())
    }

    /// Routes one event to the source its token names.
    fn dispatch(&self, token: u64, bits: u32, wakers: &mut Vec<Waker>) {
        if token == EVENTFD_TOKEN {
            self.woken_remotely.set(true);
            return;
        }
        // A token whose generation is gone (its source was deregistered and
        // the slot reused) is a stale event: it must not reach the newcomer.
        if let Some(io) = self.sources.borrow().get(token) {
            io.record(bits, wakers);
        }
    }

    /// Did the eventfd fire since the last call? Resets the flag.
    pub(crate) fn take_remote_wake(&self) -> bool {
        self.woken_remotely.replace(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_stale_token_never_reaches_the_slots_next_tenant() {
        let reactor = Reactor::new().unwrap();
        let (a, _a_peer) = UnixStream::pair().unwrap();
        let old_key = reactor.register(a.as_raw_fd(), false).unwrap();
        reactor.deregister(old_key, a.as_raw_fd()).unwrap();
        drop(a);
        assert!(
            reactor.source(old_key).is_none(),
            "a freed key finds nothing"
        );
        // The same slab slot (and likely the same fd number) goes to a new socket.
        let (b, _b_peer) = UnixStream::pair().unwrap();
        let new_key = reactor.register(b.as_raw_fd(), false).unwrap();
        assert_eq!(old_key & 0xffff_ffff, new_key & 0xffff_ffff, "slot reused");
        assert!(
            reactor.source(old_key).is_none(),
            "nor does it find the newcomer"
        );
        let io = || reactor.source(new_key).unwrap();

        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(io().poll_ready(Interest::Read, &mut cx).is_pending());

        // An event for the old registration, as if it had been queued before the close.
        let mut wakers = Vec::new();
        reactor.dispatch(old_key, sys::EPOLLIN, &mut wakers);
        assert!(wakers.is_empty(), "stale event woke the new source");
        assert!(!io().is_ready(Interest::Read));

        reactor.dispatch(new_key, sys::EPOLLIN, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(io().is_ready(Interest::Read));
        reactor.deregister(new_key, b.as_raw_fd()).unwrap();
        assert_eq!(reactor.registered(), 0);
    }

    #[test]
    fn rdhup_readies_only_the_read_side_and_closed_bits_are_sticky() {
        let io = ScheduledIo::default();
        let mut wakers = Vec::new();
        io.record(sys::EPOLLRDHUP | sys::EPOLLIN, &mut wakers);
        assert!(io.is_ready(Interest::Read));
        assert!(
            !io.is_ready(Interest::Write),
            "RDHUP is not HUP: the write side is still open"
        );
        io.clear_ready(Interest::Read);
        assert!(
            io.is_ready(Interest::Read),
            "a closed read side stays ready (read returns 0)"
        );
        io.record(sys::EPOLLHUP, &mut wakers);
        assert!(io.is_ready(Interest::Write), "HUP closes both sides");
    }

    #[test]
    fn one_event_wakes_each_waiting_direction_once() {
        let io = ScheduledIo::default();
        let (r, w) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let (rw, ww) = (Waker::from(r.clone()), Waker::from(w.clone()));
        assert!(
            io.poll_ready(Interest::Read, &mut Context::from_waker(&rw))
                .is_pending()
        );
        assert!(
            io.poll_ready(Interest::Write, &mut Context::from_waker(&ww))
                .is_pending()
        );
        let mut wakers = Vec::new();
        io.record(sys::EPOLLIN, &mut wakers);
        io.record(sys::EPOLLIN, &mut wakers); // a second edge finds no waiter left
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(
            (r.0.load(Ordering::SeqCst), w.0.load(Ordering::SeqCst)),
            (1, 0)
        );
        io.record(sys::EPOLLOUT, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(
            (r.0.load(Ordering::SeqCst), w.0.load(Ordering::SeqCst)),
            (1, 1)
        );
    }

    #[test]
    fn a_hang_up_is_hup_or_err_never_rdhup_alone() {
        let io = ScheduledIo::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wakers = Vec::new();
        io.record(sys::EPOLLIN | sys::EPOLLRDHUP, &mut wakers); // the peer's FIN
        assert!(
            io.poll_hang_up(&mut cx).is_pending(),
            "a FIN is not a hang-up"
        );
        io.record(sys::EPOLLERR | sys::EPOLLHUP, &mut wakers); // then its reset
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the waiting task is woken"
        );
        assert!(io.poll_hang_up(&mut cx).is_ready());
    }

    #[test]
    fn a_short_transfer_forgets_readiness_and_eof_follows_a_short_read_after_the_fin() {
        let io = ScheduledIo::default();
        let mut wakers = Vec::new();
        io.record(sys::EPOLLIN | sys::EPOLLOUT, &mut wakers);
        io.after_transfer(Interest::Read, 64, 64);
        assert!(
            io.is_ready(Interest::Read),
            "a full read: more may be queued"
        );
        io.after_transfer(Interest::Read, 64, 5);
        assert!(
            !io.is_ready(Interest::Read),
            "a short read: the queue ran dry"
        );
        assert!(!io.at_eof(), "no FIN seen");
        io.after_transfer(Interest::Write, 64, 10);
        assert!(
            !io.is_ready(Interest::Write),
            "a short write: the buffer is full"
        );

        io.record(sys::EPOLLIN | sys::EPOLLRDHUP, &mut wakers);
        assert!(!io.at_eof(), "bytes may precede the FIN: they must be read");
        io.after_transfer(Interest::Read, 64, 3);
        assert!(
            io.at_eof(),
            "a short read after the FIN took the last bytes"
        );
        io.record(sys::EPOLLERR, &mut wakers);
        assert!(!io.at_eof(), "an error is the kernel's to report");
    }

    #[test]
    fn a_read_of_nothing_is_end_of_file_before_its_event_comes() {
        let io = ScheduledIo::default();
        let mut wakers = Vec::new();
        io.record(sys::EPOLLIN, &mut wakers);
        io.after_transfer(Interest::Read, 64, 0);
        assert!(io.is_read_closed() && io.at_eof());
        // An empty read buffer proves nothing.
        let other = ScheduledIo::default();
        other.record(sys::EPOLLIN, &mut wakers);
        other.after_transfer(Interest::Read, 0, 0);
        assert!(!other.is_read_closed() && other.is_ready(Interest::Read));
    }

    #[test]
    fn only_an_error_or_a_hang_up_says_a_connect_failed() {
        let (connected, refused) = (ScheduledIo::default(), ScheduledIo::default());
        let mut wakers = Vec::new();
        connected.record(sys::EPOLLOUT, &mut wakers);
        refused.record(sys::EPOLLOUT | sys::EPOLLERR | sys::EPOLLHUP, &mut wakers);
        assert!(!connected.has_failed());
        assert!(refused.has_failed());
    }
}
