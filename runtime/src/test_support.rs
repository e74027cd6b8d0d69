//! Plumbing shared by the unit tests of the modules that hand out futures
//! (`oneshot`, `mpsc`, `combinator`, `thread_pool`), so that each test module
//! keeps only the helpers specific to what it tests. [`counting_waker`]
//! counts wakes, so a test can assert "woken exactly once"; [`block_on`] runs
//! a future on the test thread with no runtime underneath, and fails on a lost
//! wake-up instead of hanging; [`with_watchdog`] turns a deadlock in a test
//! body into a failure. It uses real threads and std's `Arc` (which
//! `std::task::Wake` needs), so it makes no sense under loom's model checker
//! and is built for tests outside loom only.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// A waker that only counts how often it was woken.
pub(crate) struct CountingWaker {
    wakes: AtomicUsize,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fresh [`CountingWaker`] at zero, and a [`Waker`] that counts into it.
pub(crate) fn counting_waker() -> (Arc<CountingWaker>, Waker) {
    let counter = Arc::new(CountingWaker {
        wakes: AtomicUsize::new(0),
    });
    (counter.clone(), Waker::from(counter))
}

/// How often `counter`'s wakers have been woken so far.
pub(crate) fn wakes(counter: &CountingWaker) -> usize {
    counter.wakes.load(Ordering::SeqCst)
}

/// A waker that unparks the thread that created it.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread, parking between polls.
/// Panics if the future is still pending 5 s after the call, that is, if a
/// wake-up never came. It checks the deadline *before* re-polling, so a lost
/// wake-up fails instead of being papered over by a late poll.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let deadline = Instant::now() + Duration::from_secs(5);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // May return spuriously; then the deadline check passes and we
        // simply poll again.
        thread::park_timeout(deadline.saturating_duration_since(Instant::now()));
        assert!(
            Instant::now() < deadline,
            "block_on: never woken (lost wake-up?)"
        );
    }
}

/// Runs `body` on a helper thread and fails if it takes over `secs` seconds,
/// so a deadlock fails the test instead of hanging the test run. A panic in
/// `body` is passed on as it is, so the test fails with the body's message.
pub(crate) fn with_watchdog(secs: u64, body: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        body();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(Duration::from_secs(secs)) {
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("watchdog: test hung for {secs} s"),
        // Finished, or the body panicked (dropping `done_tx` without
        // sending): join to pass its panic on.
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}
