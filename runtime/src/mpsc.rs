//! An unbounded multi-producer, single-consumer channel.
//!
//! # The problem
//!
//! Many tasks (or threads) produce values and one task consumes them: log
//! lines, jobs, events. Producers must never wait, and the consumer, a
//! future, must sleep while the queue is empty and wake up when something
//! arrives, or when no producer is left and nothing ever will.
//!
//! # How it works
//!
//! All senders and the one receiver share one state behind a mutex:
//!
//! ```text
//!   Sender ─┐           Arc<Mutex<Channel>>
//!   Sender ─┼─ send ─▶ ┌──────────────────────────────┐
//!   Sender ─┘          │ queue:    VecDeque<T>  ──────┼──▶ Receiver
//!                      │ rx_waker: Option<Waker>      │     poll_recv / recv
//!                      │ senders:  usize              │     Stream
//!                      │ rx_alive: bool               │
//!                      └──────────────────────────────┘
//! ```
//!
//! * `poll_recv` locks the state and pops the front of the queue. If the
//!   queue is empty and no sender is left, the answer is `None` (the end).
//!   Otherwise it stores its waker and returns `Pending`.
//! * `send` locks the state, pushes the value, takes the stored waker and,
//!   *after unlocking*, wakes it. Taking (not cloning) the waker means a burst
//!   of sends costs one wake: the receiver drains the whole queue on its next
//!   polls and only stores a waker again once the queue is empty.
//! * Cloning a sender counts up `senders`, dropping one counts down. The last
//!   sender to go wakes the receiver so it can see the end.
//!
//! # Why no wake-up can be lost
//!
//! The receiver "checks the queue, then stores its waker" in one critical
//! section; a sender "pushes, then takes the waker" in one critical section
//! of the same lock. Either the push comes first (the receiver finds the
//! value) or the store comes first (the sender finds the waker). There is no
//! moment where the receiver has seen an empty queue but not yet left its
//! waker, so no send can go by unnoticed.
//!
//! Wakers are called only after the lock is released: `wake()` may run the
//! executor's code, which may poll the receiver and take the lock again.

use std::collections::VecDeque;
use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use futures_core::Stream;

use crate::sync::{Arc, Mutex, lock};
use crate::waker::store;

/// Creates an unbounded channel and returns its first sender and its
/// receiver. Clone the sender for more producers.
///
/// # Examples
///
/// Producers on ordinary threads, the consumer a task: each send from a
/// thread wakes the task through the runtime's eventfd, and `recv` returns
/// `None` once every sender is gone and the queue is drained.
///
/// ```
/// use runtime::{Runtime, mpsc};
///
/// let (tx, mut rx) = mpsc::channel();
/// let producers: Vec<_> = (0..3).map(|id| {
///     let tx = tx.clone();
///     std::thread::spawn(move || {
///         for n in 0..10 {
///             tx.send((id, n)).unwrap();
///         }
///     })
/// }).collect();
/// drop(tx); // only the producers' clones are left
/// let received = Runtime::new()?.block_on(async {
///     let mut received = Vec::new();
///     while let Some(value) = rx.recv().await {
///         received.push(value);
///     }
///     received
/// });
/// assert_eq!(received.len(), 30);
/// producers.into_iter().for_each(|p| p.join().unwrap());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(Channel {
        queue: VecDeque::new(),
        rx_waker: None,
        senders: 1,
        rx_alive: true,
    }));
    let sender = Sender {
        shared: Arc::clone(&shared),
    };
    (sender, Receiver { shared })
}

/// A sending half. Cheap to clone; each clone is one more producer.
pub struct Sender<T> {
    shared: Arc<Mutex<Channel<T>>>,
}

/// The receiving half. Yields values in the order each sender sent them, and
/// `None` once every sender is gone and the queue is drained.
pub struct Receiver<T> {
    shared: Arc<Mutex<Channel<T>>>,
}

/// Everything the halves share, guarded by one mutex.
struct Channel<T> {
    /// Sent values not yet received, oldest first.
    queue: VecDeque<T>,
    /// The waker of the last poll that found the queue empty.
    rx_waker: Option<Waker>,
    /// How many `Sender`s exist. At zero, no value can arrive any more.
    senders: usize,
    /// False once the receiver is closed or dropped: sends then fail.
    rx_alive: bool,
}

impl<T> Sender<T> {
    /// Queues `value` for the receiver and wakes it if it is waiting.
    ///
    /// Never blocks. Fails, handing the value back in [`SendError`], if the
    /// receiver was closed or dropped.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut state = lock(&self.shared);
        if !state.rx_alive {
            drop(state);
            return Err(SendError(value));
        }
        state.queue.push_back(value);
        let waker = state.rx_waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Returns `true` if the receiver was closed or dropped, so every `send`
    /// will fail.
    pub fn is_closed(&self) -> bool {
        !lock(&self.shared).rx_alive
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.shared).senders += 1;
        Sender {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.senders -= 1;
        if state.senders > 0 {
            return;
        }
        let waker = state.rx_waker.take();
        drop(state);
        // The last sender is gone: wake the receiver so that, once it has
        // drained the queue, it sees `None` instead of waiting forever.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Waits for the next value. Returns `None` once every sender is dropped
    /// (or [`close`](Self::close) was called) and the queue is empty; values
    /// sent before that are all delivered first.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next value: the building block under [`recv`](Self::recv)
    /// and the [`Stream`] impl, for hand-written futures.
    ///
    /// On `Pending`, the waker in `cx` is stored and woken by the next send
    /// (or by the last sender's drop).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = lock(&self.shared);
        if let Some(value) = state.queue.pop_front() {
            return Poll::Ready(Some(value));
        }
        if state.senders == 0 || !state.rx_alive {
            return Poll::Ready(None);
        }
        // Still under the same lock as the check above: see the module docs
        // for why this ordering cannot lose a wake-up.
        store(&mut state.rx_waker, cx.waker());
        Poll::Pending
    }

    /// Takes the next value if there is one, without waiting.
    ///
    /// Returns [`TryRecvError::Empty`] if senders may still send, and
    /// [`TryRecvError::Disconnected`] if the queue is empty and will stay so.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let mut state = lock(&self.shared);
        if let Some(value) = state.queue.pop_front() {
            return Ok(value);
        }
        if state.senders == 0 || !state.rx_alive {
            return Err(TryRecvError::Disconnected);
        }
        Err(TryRecvError::Empty)
    }

    /// Closes the channel from the receiving side: every later `send` fails.
    ///
    /// Values already queued stay and can still be received; after them,
    /// `recv` returns `None`. This allows a clean shutdown: stop the
    /// producers, then drain what they already sent.
    ///
    /// # Examples
    ///
    /// ```
    /// use runtime::{Runtime, mpsc};
    ///
    /// let (tx, mut rx) = mpsc::channel();
    /// tx.send("queued before the close").unwrap();
    /// rx.close();
    /// assert!(tx.is_closed());
    /// assert_eq!(tx.send("too late").unwrap_err().0, "too late");
    /// Runtime::new()?.block_on(async {
    ///     assert_eq!(rx.recv().await, Some("queued before the close"));
    ///     assert_eq!(rx.recv().await, None, "although a sender still lives");
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn close(&mut self) {
        lock(&self.shared).rx_alive = false;
    }
}

impl<T> Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        // `Receiver` is `Unpin` (it only holds an `Arc`), so unpinning is free.
        self.get_mut().poll_recv(cx)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.rx_alive = false;
        // Free the queued values now, not when the last sender goes.
        let unread = std::mem::take(&mut state.queue);
        let waker = state.rx_waker.take();
        drop(state);
        // Dropped after unlocking, so a `T` destructor (user code) never runs
        // while we hold the lock.
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
            .field("queued", &state.queue.len())
            .field("senders", &state.senders)
            .finish()
    }
}

/// The error of [`Sender::send`]: the receiver is closed or gone. Holds the
/// value that could not be sent, so the caller gets it back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

// Written by hand so that `SendError<T>` is `Debug` (and so an `Error`, and
// usable with `?` and `unwrap`) even when `T` is not.
impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel")
    }
}

impl<T> Error for SendError<T> {}

/// The error of [`Receiver::try_recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// The queue is empty, but senders may still send.
    Empty,
    /// The queue is empty and will stay empty: every sender is gone, or the
    /// receiver was closed.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("the channel is empty"),
            TryRecvError::Disconnected => f.write_str("the channel is empty and closed"),
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
    use std::future::Future;
    use std::thread;

    fn poll_rx<T>(rx: &mut Receiver<T>, waker: &Waker) -> Poll<Option<T>> {
        rx.poll_recv(&mut Context::from_waker(waker))
    }

    #[test]
    fn one_sender_order_is_preserved() {
        let (tx, mut rx) = channel();
        for i in 0..100 {
            assert!(tx.send(i).is_ok());
        }
        for i in 0..100 {
            assert_eq!(rx.try_recv(), Ok(i));
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn a_burst_of_sends_wakes_once() {
        let (tx, mut rx) = channel();
        let (counter, waker) = counting_waker();

        assert_eq!(poll_rx(&mut rx, &waker), Poll::Pending);
        assert!(tx.send(1).is_ok());
        assert!(tx.send(2).is_ok());
        // The first send took the waker; the second had nobody to wake.
        assert_eq!(wakes(&counter), 1);

        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(Some(1)));
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(Some(2)));
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Pending);
        assert!(tx.send(3).is_ok());
        assert_eq!(wakes(&counter), 2);
    }

    #[test]
    fn only_the_last_sender_drop_wakes_and_ends_the_stream() {
        let (tx, mut rx) = channel::<u8>();
        let tx2 = tx.clone();
        let (counter, waker) = counting_waker();

        assert_eq!(poll_rx(&mut rx, &waker), Poll::Pending);
        drop(tx);
        assert_eq!(wakes(&counter), 0);
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Pending);
        drop(tx2);
        assert_eq!(wakes(&counter), 1);
        assert_eq!(poll_rx(&mut rx, &waker), Poll::Ready(None));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn values_sent_before_last_drop_are_still_delivered() {
        let (tx, mut rx) = channel();
        let tx2 = tx.clone();
        assert!(tx.send("a").is_ok());
        assert!(tx2.send("b").is_ok());
        drop(tx);
        drop(tx2);
        assert_eq!(block_on(rx.recv()), Some("a"));
        assert_eq!(block_on(rx.recv()), Some("b"));
        assert_eq!(block_on(rx.recv()), None);
    }

    #[test]
    fn recv_future_is_woken_by_send() {
        let (tx, mut rx) = channel();
        let (counter, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut recv = std::pin::pin!(rx.recv());

        assert_eq!(recv.as_mut().poll(&mut cx), Poll::Pending);
        assert!(tx.send(5).is_ok());
        assert_eq!(wakes(&counter), 1);
        assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready(Some(5)));
    }

    #[test]
    fn stream_poll_next_yields_values_then_none() {
        let (tx, mut rx) = channel();
        let (counter, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);

        assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Pending);
        assert!(tx.send(10).is_ok());
        assert_eq!(wakes(&counter), 1);
        assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(Some(10)));
        drop(tx);
        assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn close_fails_later_sends_but_keeps_queued_values() {
        let (tx, mut rx) = channel();
        assert!(tx.send(1).is_ok());
        assert!(!tx.is_closed());

        rx.close();
        assert!(tx.is_closed());
        assert_eq!(tx.send(2), Err(SendError(2)));

        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(block_on(rx.recv()), None);
    }

    #[test]
    fn send_to_dropped_receiver_hands_value_back() {
        let (tx, rx) = channel();
        drop(rx);
        assert!(tx.is_closed());
        let value = String::from("intact");
        let SendError(back) = tx.send(value.clone()).expect_err("receiver is gone");
        assert_eq!(back, value);
    }

    #[test]
    fn send_error_debug_needs_no_debug_payload() {
        struct Opaque;
        let err = SendError(Opaque);
        assert_eq!(format!("{err:?}"), "SendError { .. }");
        assert_eq!(err.to_string(), "sending on a closed channel");
        let (tx, rx) = channel::<Opaque>();
        assert_eq!(format!("{tx:?}"), "Sender { closed: false }");
        assert_eq!(format!("{rx:?}"), "Receiver { queued: 0, senders: 1 }");
    }

    #[test]
    fn four_threads_each_value_arrives_once_in_order() {
        const THREADS: usize = 4;
        const PER_THREAD: usize = 10_000;

        with_watchdog(10, || {
            let (tx, mut rx) = channel();
            let producers: Vec<_> = (0..THREADS)
                .map(|id| {
                    let tx = tx.clone();
                    thread::spawn(move || {
                        for seq in 0..PER_THREAD {
                            assert!(tx.send((id, seq)).is_ok());
                        }
                    })
                })
                .collect();
            // Only the producers' clones may keep the channel open.
            drop(tx);

            // Each thread's values must arrive as 0, 1, 2, ...: that proves
            // none was lost, duplicated or reordered.
            let mut next = [0; THREADS];
            for _ in 0..THREADS * PER_THREAD {
                let (id, seq) = block_on(rx.recv()).expect("channel ended early");
                assert_eq!(seq, next[id], "thread {id} out of order");
                next[id] += 1;
            }
            assert_eq!(block_on(rx.recv()), None);
            assert_eq!(next, [PER_THREAD; THREADS]);
            for producer in producers {
                producer.join().expect("producer panicked");
            }
        });
    }
}
