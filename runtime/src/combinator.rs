//! `select` and `join`: run two futures at once inside one task.
//!
//! # The problem
//!
//! An `async fn` awaits one thing at a time. Often we want two at once:
//!
//! * **select**: "whichever finishes first". Read from the socket *or* stop
//!   on the shutdown signal; do the work *or* give up at the timeout.
//! * **join**: "both, concurrently". Fetch two things and continue once both
//!   are here, without waiting for the first before starting the second.
//!
//! No threads or extra tasks are needed: the combined future is itself a
//! future that, each time it is polled, polls its two children with the
//! same [`Context`]. Both children thus store the same task's waker, and
//! whichever child becomes ready wakes the task, which polls the pair again.
//!
//! ```text
//!            task polls ──▶ Select / Join ──poll(cx)──▶ future a
//!                 ▲                       └──poll(cx)──▶ future b
//!                 └──────── wake() from a or b ───────────┘
//! ```
//!
//! # Pinning
//!
//! The children live inside the combinator, and a future may not move once
//! polled, so the combinator must hand out `Pin<&mut A>` to its field.
//! `pin_project!` writes that projection for us, safely, with no `unsafe`.
//!
//! # Select's bias
//!
//! [`Select`] polls `a` first, every time. If both are ready, `a` wins. Put
//! the future that must win ties first, e.g. a shutdown signal, so that a
//! busy stream of work can never starve it. When one side finishes, the
//! other (the loser) is not finished: it is simply dropped with the
//! `Select`, which cancels it.
//!
//! # Join never re-polls a finished future
//!
//! Polling a future after it returned `Ready` breaks the `Future` contract
//! (it may panic). So [`Join`] wraps each child in a small state machine:
//!
//! ```text
//!   Running { future } ──Ready(out)──▶ Done { output } ──take──▶ Taken
//! ```
//!
//! A `Done` child is never polled again; its future is dropped at once and
//! only its output is kept until the other child finishes too.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

/// One of two values: the output of whichever side of a [`select`] won.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first future (`a`) finished first.
    Left(A),
    /// The second future (`b`) finished first.
    Right(B),
}

/// Waits for whichever of `a` and `b` finishes first and returns its output;
/// the other future is dropped (cancelled) with the returned [`Select`].
///
/// Biased: `a` is polled first every time, so it wins ties. Put the future
/// that must not be starved (a shutdown signal, a timeout) first.
///
/// # Examples
///
/// A receive with a deadline: nothing is sent, so the timer wins, and the
/// losing receiver is dropped with the `Select` (its sender sees it
/// closed). When both sides are ready at once, the first one wins.
///
/// ```
/// use std::time::Duration;
/// use runtime::combinator::{Either, select};
/// use runtime::{Runtime, oneshot, time};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let (tx, rx) = oneshot::channel::<&str>();
///     let first = select(rx, time::sleep(Duration::from_millis(10))).await;
///     assert_eq!(first, Either::Right(()));
///     assert!(tx.is_closed(), "the loser was dropped");
///
///     let tie = select(async { "a" }, async { "b" }).await;
///     assert_eq!(tie, Either::Left("a"));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "a Select does nothing unless awaited"]
pub fn select<A: Future, B: Future>(a: A, b: B) -> Select<A, B> {
    Select { a, b }
}

/// Waits for both `a` and `b`, driving them concurrently, and returns both
/// outputs.
///
/// # Examples
///
/// Concurrently, inside one task: the receiver waits for a value that only
/// the second future sends. Awaited one after the other, the first await
/// would wait forever; joined, both are polled in turn and both finish.
///
/// ```
/// use runtime::{Runtime, combinator::join, oneshot};
///
/// let rt = Runtime::new()?;
/// let (received, sent) = rt.block_on(async {
///     let (tx, rx) = oneshot::channel();
///     join(rx, async move { tx.send("hello") }).await
/// });
/// assert_eq!(received, Ok("hello"));
/// assert_eq!(sent, Ok(()));
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "a Join does nothing unless awaited"]
pub fn join<A: Future, B: Future>(a: A, b: B) -> Join<A, B> {
    Join {
        a: MaybeDone::Running { future: a },
        b: MaybeDone::Running { future: b },
    }
}

pin_project! {
    /// The future returned by [`select`].
    #[must_use = "futures do nothing unless awaited or polled"]
    pub struct Select<A, B> {
        #[pin]
        a: A,
        #[pin]
        b: B,
    }
}

impl<A: Future, B: Future> Future for Select<A, B> {
    type Output = Either<A::Output, B::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // `a` first: this order *is* the documented bias.
        if let Poll::Ready(output) = this.a.poll(cx) {
            return Poll::Ready(Either::Left(output));
        }
        if let Poll::Ready(output) = this.b.poll(cx) {
            return Poll::Ready(Either::Right(output));
        }
        Poll::Pending
    }
}

impl<A, B> fmt::Debug for Select<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Most futures (every `async` block) are not `Debug`, so show none.
        f.debug_struct("Select").finish_non_exhaustive()
    }
}

pin_project! {
    /// The future returned by [`join`].
    #[must_use = "futures do nothing unless awaited or polled"]
    pub struct Join<A: Future, B: Future> {
        #[pin]
        a: MaybeDone<A>,
        #[pin]
        b: MaybeDone<B>,
    }
}

impl<A: Future, B: Future> Future for Join<A, B> {
    type Output = (A::Output, B::Output);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Poll both, even if `a` is pending: `b` must get its chance to make
        // progress and to store our waker too.
        let a_ready = this.a.as_mut().poll(cx).is_ready();
        let b_ready = this.b.as_mut().poll(cx).is_ready();
        if !(a_ready && b_ready) {
            return Poll::Pending;
        }
        match (this.a.take_output(), this.b.take_output()) {
            (Some(a), Some(b)) => Poll::Ready((a, b)),
            _ => panic!("`Join` polled after it completed"),
        }
    }
}

impl<A: Future, B: Future> fmt::Debug for Join<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Join")
            .field("a", &self.a.label())
            .field("b", &self.b.label())
            .finish()
    }
}

pin_project! {
    /// One child of a [`Join`]: still running, finished with its output kept,
    /// or output already handed out.
    #[project = MaybeDoneProj]
    #[project_replace = MaybeDoneOwned]
    enum MaybeDone<F: Future> {
        Running { #[pin] future: F },
        Done { output: F::Output },
        Taken,
    }
}

impl<F: Future> MaybeDone<F> {
    /// Drives the future if it still runs. `Ready(())` means an output is
    /// (or was) available; a finished future is never polled again.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let output = match self.as_mut().project() {
            MaybeDoneProj::Running { future } => ready!(future.poll(cx)),
            MaybeDoneProj::Done { .. } | MaybeDoneProj::Taken => return Poll::Ready(()),
        };
        // Swapping in `Done` drops the finished future right away (freeing
        // what it holds) and keeps only its output.
        self.project_replace(MaybeDone::Done { output });
        Poll::Ready(())
    }

    /// Moves the output out, leaving `Taken`. `None` unless `Done`.
    fn take_output(mut self: Pin<&mut Self>) -> Option<F::Output> {
        // Check first: replacing a `Running` future would cancel it.
        if !matches!(self.as_mut().project(), MaybeDoneProj::Done { .. }) {
            return None;
        }
        match self.project_replace(MaybeDone::Taken) {
            MaybeDoneOwned::Done { output } => Some(output),
            MaybeDoneOwned::Running { .. } | MaybeDoneOwned::Taken => None,
        }
    }

    /// A word for `Debug`: the state, without requiring `F: Debug`.
    fn label(&self) -> &'static str {
        match self {
            MaybeDone::Running { .. } => "running",
            MaybeDone::Done { .. } => "done",
            MaybeDone::Taken => "taken",
        }
    }
}

// The shared test helpers (`crate::test_support`) are built for tests
// outside loom only; loom.sh runs only the `loom_*` tests anyway.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::{counting_waker, wakes};
    use std::future::{pending, ready};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::task::Waker;

    fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
        Pin::new(future).poll(&mut Context::from_waker(waker))
    }

    /// What a [`Probe`] saw: how often it was polled, whether it was dropped.
    #[derive(Default)]
    struct ProbeStats {
        polls: AtomicUsize,
        dropped: AtomicBool,
    }

    impl ProbeStats {
        fn polls(&self) -> usize {
            self.polls.load(Ordering::SeqCst)
        }
        fn dropped(&self) -> bool {
            self.dropped.load(Ordering::SeqCst)
        }
    }

    /// Wraps a future, counting its polls and noting its drop.
    struct Probe<F> {
        inner: F,
        stats: Arc<ProbeStats>,
    }

    fn probe<F>(inner: F) -> (Probe<F>, Arc<ProbeStats>) {
        let stats = Arc::new(ProbeStats::default());
        let probe = Probe {
            inner,
            stats: stats.clone(),
        };
        (probe, stats)
    }

    impl<F: Future + Unpin> Future for Probe<F> {
        type Output = F::Output;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let this = self.get_mut();
            this.stats.polls.fetch_add(1, Ordering::SeqCst);
            Pin::new(&mut this.inner).poll(cx)
        }
    }

    impl<F> Drop for Probe<F> {
        fn drop(&mut self) {
            self.stats.dropped.store(true, Ordering::SeqCst);
        }
    }

    /// A future that stays pending until `open` is called, then wakes the
    /// waker it was last polled with.
    #[derive(Clone, Default)]
    struct Gate(Arc<Mutex<GateState>>);

    #[derive(Default)]
    struct GateState {
        open: bool,
        waker: Option<Waker>,
    }

    impl Gate {
        fn open(&self) {
            let waker = {
                let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                state.open = true;
                state.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if state.open {
                return Poll::Ready(());
            }
            crate::waker::store(&mut state.waker, cx.waker());
            Poll::Pending
        }
    }

    #[test]
    fn select_the_ready_side_wins() {
        let (_, waker) = counting_waker();
        let mut s = select(pending::<u8>(), ready("b"));
        assert_eq!(poll_once(&mut s, &waker), Poll::Ready(Either::Right("b")));
        let mut s = select(ready(1), pending::<u8>());
        assert_eq!(poll_once(&mut s, &waker), Poll::Ready(Either::Left(1)));
    }

    #[test]
    fn select_left_wins_ties() {
        let (_, waker) = counting_waker();
        let (right, right_stats) = probe(ready(2));
        let mut s = select(ready(1), right);
        assert_eq!(poll_once(&mut s, &waker), Poll::Ready(Either::Left(1)));
        // `b` was not even polled: `a` is checked first.
        assert_eq!(right_stats.polls(), 0);
    }

    #[test]
    fn select_wakes_when_either_side_is_ready() {
        let (counter, waker) = counting_waker();
        let (left_gate, right_gate) = (Gate::default(), Gate::default());
        let mut s = select(left_gate.clone(), right_gate.clone());
        assert_eq!(poll_once(&mut s, &waker), Poll::Pending);

        right_gate.open();
        assert_eq!(wakes(&counter), 1);
        assert_eq!(poll_once(&mut s, &waker), Poll::Ready(Either::Right(())));
    }

    #[test]
    fn select_drops_the_loser_with_itself() {
        let (_, waker) = counting_waker();
        let (loser, loser_stats) = probe(pending::<()>());
        let mut s = select(loser, ready(()));
        assert_eq!(poll_once(&mut s, &waker), Poll::Ready(Either::Right(())));
        assert!(!loser_stats.dropped());
        drop(s);
        assert!(loser_stats.dropped());
    }

    #[test]
    fn join_returns_both_outputs() {
        let (_, waker) = counting_waker();
        let mut j = Box::pin(join(ready(1), ready("two")));
        assert_eq!(
            j.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready((1, "two"))
        );
    }

    #[test]
    fn join_waits_for_the_pending_side_and_never_repolls_the_done_one() {
        let (counter, waker) = counting_waker();
        let gate = Gate::default();
        let (early, early_stats) = probe(ready('a'));
        let (late, late_stats) = probe(gate.clone());
        let mut j = Box::pin(join(early, late));
        let mut cx = Context::from_waker(&waker);

        assert_eq!(j.as_mut().poll(&mut cx), Poll::Pending);
        // The finished future was dropped at once, its output kept.
        assert!(early_stats.dropped());
        assert_eq!(j.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(wakes(&counter), 0);

        gate.open();
        assert_eq!(wakes(&counter), 1);
        assert_eq!(j.as_mut().poll(&mut cx), Poll::Ready(('a', ())));

        // Each was polled until it was ready, and never after.
        assert_eq!(early_stats.polls(), 1);
        assert_eq!(late_stats.polls(), 3);
    }

    #[test]
    fn debug_output_needs_no_debug_futures() {
        let s = select(pending::<()>(), pending::<()>());
        assert_eq!(format!("{s:?}"), "Select { .. }");
        let j = join(ready(1), pending::<()>());
        assert_eq!(format!("{j:?}"), r#"Join { a: "running", b: "running" }"#);
        assert_eq!(format!("{:?}", Either::<u8, u8>::Left(1)), "Left(1)");
    }
}
