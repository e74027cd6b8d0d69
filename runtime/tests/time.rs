//! Timer contracts: sleep, deadline order, timeout, timer clean-up, idle CPU,
//! intervals and their missed-tick behaviours.

mod common;

use std::cell::RefCell;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::{thread_cpu_time, within};
use runtime::time::{
    self, Elapsed, MissedTickBehavior, interval, interval_at, sleep, sleep_until, timeout,
};
use runtime::{Runtime, spawn, yield_now};

const MS: Duration = Duration::from_millis(1);

/// Polls `fut` exactly once with the current task's context.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

// sleep(d) completes, and not before d has passed; sleep_until a past instant (or sleep(0)) is ready at the first poll.
#[test]
fn sleep_waits_at_least_its_duration() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        for ms in [1u64, 10, 50] {
            let d = Duration::from_millis(ms);
            let start = Instant::now();
            rt.block_on(sleep(d));
            assert!(
                start.elapsed() >= d,
                "sleep({d:?}) ended after {:?}",
                start.elapsed()
            );
        }
        assert_eq!(rt.pending_timers(), 0);

        rt.block_on(async {
            let mut past = sleep_until(Instant::now() - Duration::from_millis(5));
            assert_eq!(poll_once(&mut past).await, Poll::Ready(()));
            assert!(past.is_elapsed());
            let mut zero = sleep(Duration::ZERO);
            assert_eq!(poll_once(&mut zero).await, Poll::Ready(()));
            assert_eq!(
                rt.pending_timers(),
                0,
                "a sleep that is already due registers nothing"
            );

            let mut future = sleep(Duration::from_secs(60));
            assert_eq!(poll_once(&mut future).await, Poll::Pending);
            assert!(!future.is_elapsed());
            assert_eq!(rt.pending_timers(), 1);
        });
        assert_eq!(
            rt.pending_timers(),
            0,
            "the dropped sleep left its timer behind"
        );
    });
}

// Timers fire in deadline order: 50 tasks with distinct deadlines wake in that order, never early.
#[test]
fn timers_fire_in_deadline_order() {
    within(20, || {
        const N: usize = 50;
        let rt = Runtime::new().unwrap();
        let order = rt.block_on(async {
            // Deadlines are absolute, from one base, and far enough out that all
            // 50 tasks have registered before the first one is due.
            let base = Instant::now() + Duration::from_millis(100);
            let order = Rc::new(RefCell::new(Vec::new()));
            let handles: Vec<_> = (0..N)
                .map(|i| {
                    let order = order.clone();
                    let deadline = base + MS * ((i * 37 % N) as u32);
                    spawn(async move {
                        sleep_until(deadline).await;
                        assert!(Instant::now() >= deadline, "task {i} woke early");
                        order.borrow_mut().push(i);
                    })
                })
                .collect();
            yield_now().await; // every task has polled its sleep once
            assert_eq!(rt.pending_timers(), N, "registered before any is due");
            for h in handles {
                h.await.unwrap();
            }
            order.take()
        });
        let mut expected: Vec<usize> = (0..N).collect();
        expected.sort_by_key(|&i| i * 37 % N);
        assert_eq!(order, expected);
        assert_eq!(rt.pending_timers(), 0);
    });
}

// timeout gives Err(Elapsed) when the inner future is too slow (not before its duration) and Ok(v) when it is ready first.
#[test]
fn timeout_expires_or_completes() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let r = timeout(Duration::from_millis(30), std::future::pending::<u32>()).await;
            assert_eq!(r, Err(Elapsed));
            assert!(start.elapsed() >= Duration::from_millis(30));

            assert_eq!(timeout(Duration::from_secs(60), async { 5 }).await, Ok(5));
            let r = timeout(Duration::from_secs(60), async {
                sleep(Duration::from_millis(10)).await;
                "inner"
            })
            .await;
            assert_eq!(r, Ok("inner"));

            let io: std::io::Error = Elapsed.into();
            assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        });
        assert_eq!(rt.pending_timers(), 0);
    });
}

// A dropped Sleep, a timed-out timeout (with its pending inner sleep) and a completed timeout leave no timer behind.
#[test]
fn cancelled_timers_leave_nothing_behind() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let mut s = sleep(Duration::from_secs(3600));
            assert!(poll_once(&mut s).await.is_pending());
            assert_eq!(rt.pending_timers(), 1);
            drop(s);
            assert_eq!(
                rt.pending_timers(),
                0,
                "dropping a registered Sleep must remove its timer"
            );

            // The inner sleep registered a timer too: it dies with the Timeout.
            let r = timeout(Duration::from_millis(20), sleep(Duration::from_secs(3600))).await;
            assert_eq!(r, Err(Elapsed));
            assert_eq!(rt.pending_timers(), 0, "a timed-out timeout left a timer");

            let r = timeout(Duration::from_secs(3600), sleep(Duration::from_millis(5))).await;
            assert_eq!(r, Ok(()));
            assert_eq!(
                rt.pending_timers(),
                0,
                "a completed timeout left its deadline"
            );

            // Reset moves the one registration, it does not add one.
            let mut s = pin!(sleep(Duration::from_secs(3600)));
            assert!(
                poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx)))
                    .await
                    .is_pending()
            );
            s.as_mut().reset(Instant::now() + Duration::from_millis(5));
            assert_eq!(rt.pending_timers(), 0);
            s.await;
            assert_eq!(rt.pending_timers(), 0);
        });
    });
}

// Sleeps and timeouts "forever" (Duration::MAX) are pending, not a panic: a proxy's "no timeout" setting.
#[test]
fn far_future_sleep_and_timeout_do_not_panic() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let r = timeout(Duration::MAX, async { 1 }).await;
            assert_eq!(r, Ok(1));
            let mut s = sleep(Duration::MAX);
            assert!(poll_once(&mut s).await.is_pending());
            let r = timeout(Duration::from_millis(10), sleep(Duration::MAX)).await;
            assert_eq!(r, Err(Elapsed));
        });
        assert_eq!(rt.pending_timers(), 0);
    });
}

// An idle runtime waiting on a 200 ms timer sleeps in epoll_wait: little CPU, and the main future is polled only twice.
#[test]
fn an_idle_runtime_burns_no_cpu() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        let polls_before = rt.polls();
        let cpu_before = thread_cpu_time();
        let start = Instant::now();
        rt.block_on(sleep(Duration::from_millis(200)));
        let wall = start.elapsed();
        let cpu = thread_cpu_time() - cpu_before;
        assert!(wall >= Duration::from_millis(200));
        assert!(
            cpu < wall / 4,
            "busy waiting: {cpu:?} of CPU in {wall:?} of wall time"
        );
        assert_eq!(rt.polls() - polls_before, 2, "polled without a wake");
    });
}

// An interval ticks at exactly start + k * period (never early), the first tick at once.
#[test]
fn interval_ticks_on_schedule() {
    within(10, || {
        let period = Duration::from_millis(20);
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let mut iv = interval_at(start, period);
            assert_eq!(iv.period(), period);
            for k in 0..5u32 {
                let t = iv.tick().await;
                assert_eq!(t, start + period * k, "tick {k}");
                assert!(Instant::now() >= t, "tick {k} came early");
            }
            assert!(start.elapsed() >= period * 4);

            let before = Instant::now();
            let mut iv = interval(period);
            let first = iv.tick().await;
            assert!(
                first >= before && first <= Instant::now(),
                "the first tick is immediate"
            );
            assert_eq!(iv.tick().await, first + period);
        });
        assert!(
            std::panic::catch_unwind(|| interval(Duration::ZERO)).is_err(),
            "a zero period must be refused"
        );
    });
}

/// What one run of the missed-tick scenario saw.
struct Missed {
    start: Instant,
    /// The late tick, and `Instant::now()` just before and after awaiting it.
    late: Instant,
    before: Instant,
    after: Instant,
    /// Ticks that were ready at once when polled right after the late one.
    immediate: Vec<Instant>,
    /// The next two ticks, awaited.
    next: [Instant; 2],
}

const P: Duration = Duration::from_millis(20);

/// Ticks once, blocks the thread for 3.5 periods, then records the ticks.
fn missed_ticks(behavior: MissedTickBehavior) -> Missed {
    within(10, move || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let mut iv = interval_at(start, P);
            iv.set_missed_tick_behavior(behavior);
            assert_eq!(iv.tick().await, start);
            // The task hogs its thread: the thing under test.
            std::thread::sleep(P * 7 / 2);
            let before = Instant::now();
            let late = iv.tick().await;
            let after = Instant::now();
            let mut immediate = Vec::new();
            let mut cx = Context::from_waker(Waker::noop());
            for _ in 0..10 {
                match iv.poll_tick(&mut cx) {
                    Poll::Ready(t) => immediate.push(t),
                    Poll::Pending => break,
                }
            }
            let next = [iv.tick().await, iv.tick().await];
            assert!(Instant::now() >= next[1]);
            Missed {
                start,
                late,
                before,
                after,
                immediate,
                next,
            }
        })
    })
}

// Burst: the missed ticks fire back to back at their scheduled times, then the original schedule resumes.
#[test]
fn missed_ticks_burst() {
    let m = missed_ticks(MissedTickBehavior::Burst);
    assert_eq!(
        m.late,
        m.start + P,
        "the late tick reports its scheduled time"
    );
    // 3.5 periods late: the ticks at 2P and 3P (at least) are due at once.
    assert!(
        m.immediate.len() >= 2,
        "missed ticks were not fired back to back: {:?}",
        m.immediate.len()
    );
    let all: Vec<Instant> = m.immediate.iter().chain(&m.next).copied().collect();
    for (i, t) in all.iter().enumerate() {
        assert_eq!(
            *t,
            m.start + P * (i as u32 + 2),
            "burst tick {i} is off schedule"
        );
    }
}

// Skip: one late tick now, then the next tick of the original schedule after now.
#[test]
fn missed_ticks_skip() {
    let m = missed_ticks(MissedTickBehavior::Skip);
    assert_eq!(m.late, m.start + P);
    assert!(
        m.immediate.is_empty() || m.immediate.len() == 1,
        "skip fired a burst: {}",
        m.immediate.len()
    );
    let next_on_grid = |now: Instant| {
        let k = (now - m.start).as_nanos() / P.as_nanos() + 1;
        m.start + P * k as u32
    };
    let candidates = [next_on_grid(m.before), next_on_grid(m.after)];
    let seq: Vec<Instant> = m.immediate.iter().chain(&m.next).copied().collect();
    assert!(
        candidates.contains(&seq[0]),
        "skip resumed off the grid: {:?} after start, expected {:?}",
        seq[0] - m.start,
        candidates.map(|c| c - m.start)
    );
    assert!(seq[0] > m.before, "skip must not fire a missed tick");
    for w in seq.windows(2) {
        assert_eq!(w[1], w[0] + P, "skip left the original schedule");
    }
}

// Delay: one late tick now, then a period after that tick was taken, and every period from there.
#[test]
fn missed_ticks_delay() {
    let m = missed_ticks(MissedTickBehavior::Delay);
    assert_eq!(m.late, m.start + P);
    assert!(m.immediate.is_empty(), "delay fired a missed tick at once");
    let [t2, t3] = m.next;
    assert!(
        t2 >= m.before + P && t2 <= m.after + P,
        "delay's next tick is {:?} after the late one was taken, expected one period",
        t2 - m.before
    );
    assert_eq!(
        t3,
        t2 + P,
        "after a delay the schedule continues from the new base"
    );
}

// A Sleep polled outside any runtime panics with a message instead of hanging.
#[test]
fn sleep_outside_a_runtime_panics() {
    let result = std::panic::catch_unwind(|| {
        let mut s = pin!(time::sleep(Duration::from_secs(1)));
        let _ = s.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    });
    let payload = result.expect_err("must panic");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(msg.contains("outside a runtime"), "unclear message: {msg}");
}

// A connection's idle timer keeps a Sleep for its whole life: its deadline
// and its key in the store, no second copy of the deadline.
#[test]
fn a_sleep_is_at_most_forty_bytes() {
    let size = std::mem::size_of::<time::Sleep>();
    assert!(size <= 40, "{size}");
}
