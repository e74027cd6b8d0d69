//! Time: `sleep`, `timeout` and `interval`, as futures over the driver's
//! timer store (`timer.rs`).
//!
//! A [`Sleep`] registers its deadline with the store the first time it is
//! polled and returns `Pending`, keeping the key the store hands back; the
//! driver wakes it when the deadline has passed (and takes the timer off
//! its heap), after which the next poll returns `Ready` and gives the key
//! back. Dropping a `Sleep` early removes its timer, so cancelled timeouts
//! (the common case in a proxy: most connections do not time out) leave
//! nothing behind.
//!
//! ```text
//!   poll #1: deadline passed? no  -> key = store.insert(deadline, waker) -> Pending
//!   ...      driver.turn: epoll_wait(until the earliest deadline)
//!            deadline passed -> timer fired, waker woken
//!   poll #2: store.renew(key): fired -> store.remove(key) -> Ready
//! ```
//!
//! Deadlines are absolute (`Instant`), so a task that is polled late does
//! not push its deadline back, and an `Interval` computes each tick from the
//! previous deadline, not from "now", so it does not drift.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::context;
use crate::driver::Driver;
use crate::timer::TimerKey;

/// Waits until `duration` has passed. A duration too long for `Instant`
/// (`Duration::MAX`, used as "no limit") waits about thirty years instead
/// of overflowing.
///
/// # Examples
///
/// A sleeping task costs no CPU: the thread waits in `epoll_wait`, whose
/// timeout is the nearest deadline, and the future is polled twice, once
/// to register its deadline and once after it fired.
///
/// ```
/// use std::time::{Duration, Instant};
/// use runtime::{Runtime, time};
///
/// let rt = Runtime::new()?;
/// let start = Instant::now();
/// rt.block_on(time::sleep(Duration::from_millis(20)));
/// assert!(start.elapsed() >= Duration::from_millis(20));
/// assert_eq!(rt.polls(), 2, "not a busy loop");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let now = Instant::now();
    let deadline = now
        .checked_add(duration)
        .unwrap_or_else(|| now + FAR_FUTURE);
    sleep_until(deadline)
}

/// "Never", in a form `Instant` can hold.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Waits until `deadline`.
///
/// # Examples
///
/// The timer store keeps deadlines in order, so tasks wake in the order of
/// their deadlines, not of their spawning: here the last one spawned has
/// the nearest deadline and runs first. The deadlines are absolute, from
/// one base far enough out that every task has registered before the
/// first is due.
///
/// ```
/// use std::{cell::RefCell, rc::Rc, time::{Duration, Instant}};
/// use runtime::{Runtime, spawn, time};
///
/// let rt = Runtime::new()?;
/// let woken = Rc::new(RefCell::new(Vec::new()));
/// rt.block_on(async {
///     let base = Instant::now() + Duration::from_millis(30);
///     let tasks: Vec<_> = (0..3u32).map(|i| {
///         let woken = woken.clone();
///         let deadline = base + Duration::from_millis(1) * (3 - i);
///         spawn(async move {
///             time::sleep_until(deadline).await;
///             woken.borrow_mut().push(i);
///         })
///     }).collect();
///     runtime::yield_now().await; // each task has polled its sleep once
///     assert_eq!(rt.pending_timers(), 3);
///     for task in tasks {
///         task.await.unwrap();
///     }
/// });
/// assert_eq!(*woken.borrow(), [2, 1, 0]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        registered: None,
        fired: false,
    }
}

/// The future of [`sleep`] and [`sleep_until`].
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    /// While its timer is in a store: that store's driver, and the key.
    registered: Option<(Rc<Driver>, TimerKey)>,
    fired: bool,
}

impl Sleep {
    /// When this sleep ends.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Has the deadline been reached (as of the last poll)?
    pub fn is_elapsed(&self) -> bool {
        self.fired
    }

    /// Moves the deadline; the sleep is pending again until it passes.
    pub fn reset(&mut self, deadline: Instant) {
        self.unregister();
        self.deadline = deadline;
        self.fired = false;
    }

    /// Gives the timer's key back to its store, whether it is pending
    /// (cancelled) or has fired.
    fn unregister(&mut self) {
        if let Some((driver, key)) = self.registered.take() {
            driver.timers.borrow_mut().remove(key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.fired {
            return Poll::Ready(());
        }
        if let Some((driver, key)) = &self.registered {
            if driver.timers.borrow_mut().renew(key, cx.waker()) {
                return Poll::Pending;
            }
            // The driver fired the timer: the deadline passed.
            self.unregister();
            self.fired = true;
            return Poll::Ready(());
        }
        if Instant::now() >= self.deadline {
            self.fired = true;
            return Poll::Ready(());
        }
        let driver = match context::driver() {
            Ok(driver) => driver,
            Err(e) => panic!("a Sleep was polled outside a runtime: {e}"),
        };
        let key = driver
            .timers
            .borrow_mut()
            .insert(self.deadline, cx.waker().clone());
        self.registered = Some((driver, key));
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("fired", &self.fired)
            .finish()
    }
}

/// The error of a [`timeout`] whose time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, Elapsed)
    }
}

/// Runs `future`, giving up after `duration`: `Err(Elapsed)` then, and the
/// future is dropped (cancelled) with the `Timeout`.
///
/// # Examples
///
/// Both outcomes: a future that finishes in time gives `Ok` with its
/// output; one that never does gives `Err(Elapsed)` when the timer fires.
/// `Elapsed` converts into an `io::Error` of kind `TimedOut`, for `?`.
///
/// ```
/// use std::time::Duration;
/// use runtime::{Runtime, time::{self, Elapsed}};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let in_time = async {
///         time::sleep(Duration::from_millis(1)).await;
///         "done"
///     };
///     assert_eq!(time::timeout(Duration::from_secs(5), in_time).await, Ok("done"));
///
///     let never = std::future::pending::<()>();
///     assert_eq!(time::timeout(Duration::from_millis(10), never).await, Err(Elapsed));
///     let error = std::io::Error::from(Elapsed);
///     assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

pin_project_lite::pin_project! {
    /// The future of [`timeout`].
    #[must_use = "futures do nothing unless awaited"]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The future first: work that finished just in time is not thrown away.
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match Pin::new(this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What an [`Interval`] does when ticks were missed (the task was busy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back, then resume the schedule.
    Burst,
    /// Fire once now, then one period after now (the schedule shifts).
    Delay,
    /// Fire once now, then at the next tick of the original schedule.
    #[default]
    Skip,
}

/// Ticks every `period`, the first tick at once.
///
/// # Examples
///
/// Each tick is scheduled from the previous one, not from "now", so the
/// schedule does not drift however late the task is polled; with
/// [`MissedTickBehavior::Burst`] every tick of it is kept.
///
/// ```
/// use std::time::Duration;
/// use runtime::{Runtime, time::{self, MissedTickBehavior}};
///
/// let rt = Runtime::new()?;
/// let ticks = rt.block_on(async {
///     let mut interval = time::interval(Duration::from_millis(5));
///     interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
///     let mut ticks = Vec::new();
///     for _ in 0..3 {
///         ticks.push(interval.tick().await);
///     }
///     ticks
/// });
/// assert_eq!(ticks[1] - ticks[0], Duration::from_millis(5));
/// assert_eq!(ticks[2] - ticks[0], Duration::from_millis(10));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
///
/// If `period` is zero: an interval that never waits would be a busy loop.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "an interval period must be longer than zero"
    );
    Interval {
        sleep: sleep_until(start),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// A periodic timer; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled time.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Poll form of [`Interval::tick`].
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let scheduled = self.sleep.deadline();
        let next = self.next_after(scheduled, Instant::now());
        self.sleep.reset(next);
        Poll::Ready(scheduled)
    }

    fn next_after(&self, scheduled: Instant, now: Instant) -> Instant {
        let on_time = scheduled + self.period;
        if on_time > now {
            return on_time;
        }
        match self.missed {
            MissedTickBehavior::Burst => on_time,
            MissedTickBehavior::Delay => now + self.period,
            MissedTickBehavior::Skip => {
                let behind = now.duration_since(scheduled).as_nanos() / self.period.as_nanos();
                let periods = u32::try_from(behind + 1).unwrap_or(u32::MAX);
                scheduled + self.period.saturating_mul(periods)
            }
        }
    }

    /// Chooses what happens to missed ticks (default: `Skip`).
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}
