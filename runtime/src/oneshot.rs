//! A one-shot channel: one value, one sender, one receiver.
//!
//! # The problem
//!
//! An async task often needs one answer from somewhere else: a reply from
//! another task, the result of a job on a blocking thread, a "shut down now"
//! signal. The receiver is a future. It must sleep (return `Poll::Pending`)
//! until the value arrives and be woken exactly when it does, without a
//! thread blocking anywhere.
//!
//! # How it works
//!
//! Both halves share one small state behind a mutex:
//!
//! ```text
//!                 Arc<Mutex<Handoff>>
//!               ┌───────────────────────────┐
//!   Sender ───▶ │ value:    Option<T>       │ ◀─── Receiver (a Future)
//!    send(v)    │ rx_waker: Option<Waker>   │       poll / try_recv
//!    drop       │ tx_done:  bool            │       drop
//!               │ rx_gone:  bool            │
//!               └───────────────────────────┘
//! ```
//!
//! * Polling the receiver locks the state. If a value is there it is taken.
//!   If the sender is done, the answer is [`RecvError`]. Otherwise the
//!   receiver stores its waker and returns `Pending`.
//! * `send` locks the state, puts the value in, takes the stored waker, and
//!   *after unlocking* calls `wake()`. Dropping the sender without sending
//!   does the same minus the value, so the receiver wakes up and sees
//!   [`RecvError`] instead of sleeping forever.
//!
//! # Why no wake-up can be lost
//!
//! The receiver "checks for a value, then stores its waker" inside one
//! critical section, and the sender "stores the value, then takes the waker"
//! inside one critical section of the same lock. So only two orders exist:
//!
//! ```text
//!   receiver first:  [check: empty, store waker]  [put value, take waker] → wake()
//!   sender first:    [put value, take waker=None] [check: value!] → Ready
//! ```
//!
//! There is no gap between the receiver's check and its store in which a send
//! could slip in unseen. Had we checked, unlocked, and then stored the waker,
//! a send landing in between would find no waker to wake, and the receiver
//! would sleep forever.
//!
//! Wakers are called only after the lock is released: `wake()` may run the
//! executor's code, which may poll this very receiver and take the lock again.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::{Arc, Mutex, lock};
use crate::waker::store;

/// Creates a one-shot channel and returns its two halves.
///
/// The halves may live on different threads (if `T: Send`).
///
/// # Examples
///
/// One answer from another task; and the one thing that can go wrong: the
/// sender is dropped without sending, and the receiver learns it at once
/// instead of waiting forever.
///
/// ```
/// use runtime::{Runtime, oneshot::{self, RecvError}, spawn};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let (reply, answer) = oneshot::channel();
///     spawn(async move { reply.send(6 * 7).unwrap() });
///     assert_eq!(answer.await, Ok(42));
///
///     let (reply, answer) = oneshot::channel::<u32>();
///     spawn(async move { drop(reply) });
///     assert_eq!(answer.await, Err(RecvError));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(Handoff {
        value: None,
        rx_waker: None,
        tx_done: false,
        rx_gone: false,
    }));
    let sender = Sender {
        shared: Arc::clone(&shared),
    };
    (sender, Receiver { shared })
}

/// The sending half of a one-shot channel. Sending consumes it.
pub struct Sender<T> {
    shared: Arc<Mutex<Handoff<T>>>,
}

/// The receiving half of a one-shot channel: a future that resolves to the
/// sent value, or to [`RecvError`] if the sender was dropped without sending.
pub struct Receiver<T> {
    shared: Arc<Mutex<Handoff<T>>>,
}

/// Everything the two halves share, guarded by one mutex.
struct Handoff<T> {
    /// The sent value, until the receiver takes it.
    value: Option<T>,
    /// The waker of the last poll that found nothing; woken on send or on
    /// sender drop.
    rx_waker: Option<Waker>,
    /// The sender has sent, or was dropped: nothing more will ever arrive.
    tx_done: bool,
    /// The receiver was dropped: nobody will ever take a value.
    rx_gone: bool,
}

impl<T> Sender<T> {
    /// Sends `value` to the receiver and wakes it.
    ///
    /// Returns `Err(value)`, handing the value back untouched, if the
    /// receiver has already been dropped.
    pub fn send(self, value: T) -> Result<(), T> {
        let mut state = lock(&self.shared);
        if state.rx_gone {
            drop(state);
            return Err(value);
        }
        state.value = Some(value);
        // Marking ourselves done now (not in `Drop`) makes the value and the
        // "no more values" fact visible to the receiver at the same instant.
        state.tx_done = true;
        let waker = state.rx_waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Returns `true` if the receiver has been dropped, so a `send` would
    /// fail. Useful to stop computing an answer nobody will read.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared).rx_gone
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        if state.tx_done {
            // `send` already ran and already woke the receiver.
            return;
        }
        state.tx_done = true;
        let waker = state.rx_waker.take();
        drop(state);
        // Without this wake the receiver would wait forever for a value that
        // can no longer come; woken, it re-polls and sees `RecvError`.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Takes the value if it has arrived, without waiting.
    ///
    /// Returns [`TryRecvError::Empty`] if the sender may still send, and
    /// [`TryRecvError::Closed`] if nothing will ever arrive (the sender was
    /// dropped, or the value was already taken).
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let mut state = lock(&self.shared);
        match state.value.take() {
            Some(value) => Ok(value),
            None if state.tx_done => Err(TryRecvError::Closed),
            None => Err(TryRecvError::Empty),
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.shared);
        if let Some(value) = state.value.take() {
            return Poll::Ready(Ok(value));
        }
        if state.tx_done {
            return Poll::Ready(Err(RecvError));
        }
        // Still under the same lock as the check above: see the module docs
        // for why this ordering cannot lose a wake-up.
        store(&mut state.rx_waker, cx.waker());
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.rx_gone = true;
        let unread = state.value.take();
        let waker = state.rx_waker.take();
        drop(state);
        // `unread` and `waker` are dropped here, after unlocking, so a `T`
        // destructor (user code) never runs while we hold the lock.
        drop(unread);
        drop(waker);
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared);
        f.debug_struct("Receiver")
            .field("has_value", &state.value.is_some())
            .field("sender_done", &state.tx_done)
            .finish()
    }
}

/// The error of awaiting a [`Receiver`]: the sender was dropped without
/// sending a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the oneshot sender was dropped without sending a value")
    }
}

impl Error for RecvError {}

/// The error of [`Receiver::try_recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// No value yet, but the sender may still send one.
    Empty,
    /// No value, and none will ever come.
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("the oneshot channel is empty"),
            TryRecvError::Closed => f.write_str("the oneshot channel is closed"),
        }
    }
}

impl Error for TryRecvError {}

// These tests use real threads and std's `Arc` (which `std::task::Wake`
// needs), so they make no sense under loom's model checker.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::{block_on, counting_waker, wakes, with_watchdog};
    use std::thread;

    fn poll_rx<T>(rx: &mut Receiver<T>, waker: &Waker) -> Poll<Result<T, RecvError>> {
        Pin::new(rx).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn send_wakes_pending_receiver_exactly_once() {
        let (tx, mut rx) = channel();
        let (counter, waker) = counting_waker();

        assert!(poll_rx(&mut rx, &waker).is_pending());
        assert_eq!(wakes(&counter), 0);

        assert_eq!(tx.send(7), Ok(()));
        // One wake from `send`, none from the sender's drop that follows.
        assert_eq!(wakes(&counter), 1);
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(Ok(7)));
        assert_eq!(wakes(&counter), 1);
    }

    #[test]
    fn send_before_poll_is_ready_at_once() {
        let (tx, mut rx) = channel();
        let (counter, waker) = counting_waker();
        assert_eq!(tx.send("hi"), Ok(()));
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(Ok("hi")));
        assert_eq!(wakes(&counter), 0);
    }

    #[test]
    fn dropped_sender_wakes_receiver_with_recv_error() {
        let (tx, mut rx) = channel::<u32>();
        let (counter, waker) = counting_waker();

        assert!(poll_rx(&mut rx, &waker).is_pending());
        drop(tx);
        assert_eq!(wakes(&counter), 1);
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(Err(RecvError)));
    }

    #[test]
    fn send_to_dropped_receiver_hands_value_back() {
        let (tx, rx) = channel();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        let value = vec![String::from("intact"), String::from("value")];
        assert_eq!(tx.send(value.clone()), Err(value));
    }

    #[test]
    fn repoll_with_new_waker_replaces_the_old_one() {
        let (tx, mut rx) = channel();
        let (old_counter, old_waker) = counting_waker();
        let (new_counter, new_waker) = counting_waker();

        assert!(poll_rx(&mut rx, &old_waker).is_pending());
        assert!(poll_rx(&mut rx, &new_waker).is_pending());
        assert_eq!(tx.send(1), Ok(()));

        assert_eq!(wakes(&old_counter), 0);
        assert_eq!(wakes(&new_counter), 1);
    }

    #[test]
    fn try_recv_reports_empty_then_value_then_closed() {
        let (tx, mut rx) = channel();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(tx.send(3), Ok(()));
        assert_eq!(rx.try_recv(), Ok(3));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));

        let (tx, mut rx) = channel::<u8>();
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }

    #[test]
    fn errors_display_and_debug() {
        assert!(!RecvError.to_string().is_empty());
        assert_ne!(
            TryRecvError::Empty.to_string(),
            TryRecvError::Closed.to_string()
        );
        let (tx, rx) = channel::<u8>();
        assert_eq!(format!("{tx:?}"), "Sender { closed: false }");
        assert!(format!("{rx:?}").starts_with("Receiver"));
    }

    #[test]
    fn cross_thread_send_or_drop_always_wakes() {
        with_watchdog(10, || {
            for i in 0..1_000u32 {
                let (tx, rx) = channel();
                // Even rounds send, odd rounds drop: both must wake us.
                let other = thread::spawn(move || {
                    if i % 2 == 0 {
                        assert_eq!(tx.send(i), Ok(()));
                    } else {
                        drop(tx);
                    }
                });
                let expected = if i % 2 == 0 { Ok(i) } else { Err(RecvError) };
                assert_eq!(block_on(rx), expected, "round {i}");
                other.join().expect("sender thread panicked");
            }
        });
    }
}
