//! `rate-limit sessions N`: at most N new connections a second on a
//! frontend, whatever the number of its workers and listen addresses; the
//! excess waits in the kernel's listen queue, as with HAProxy's `rate-limit
//! sessions` (the accept loops simply do not accept it yet).
//!
//! One atomic word, shared by every accept loop of the frontend: the
//! generic cell rate algorithm (GCRA, ATM's, and the usual way to write a
//! token bucket without a refill timer). Each accept is due one interval
//! `T = 1s / N` after the last; a loop may run ahead of that schedule by at
//! most `1s - T`, so that a frontend idle for a while takes a burst of up
//! to N at once, and never more than N in any second after that:
//!
//! ```text
//!   tat: the time the schedule has reached (the theoretical arrival time)
//!   take at now:  tat = max(tat, now)
//!                 tat - now > 1s - T ?  ─yes─▶ refused: try again at tat - (1s - T)
//!                 tat += T             ─────▶ accepted
//! ```
//!
//! A compare-and-swap on the one word decides between loops; none waits on
//! a lock, and none refuses a client: a loop that finds the schedule full
//! is told how long to wait, sleeps (on a timer: its worker goes on
//! relaying meanwhile, epoll/worker.rs) and only then accepts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A rate of new connections, shared by a frontend's accept loops.
#[derive(Debug)]
pub struct SessionRate {
    /// N, per second.
    rate: u32,
    /// The interval between two accepts, in nanoseconds: `1s / N`.
    interval: u64,
    /// How far the schedule may run ahead of now: `1s - interval`.
    burst: u64,
    /// The schedule, in nanoseconds since `epoch`.
    tat: AtomicU64,
    epoch: Instant,
}

const SECOND: u64 = 1_000_000_000;

impl SessionRate {
    /// At most `rate` new connections a second (at least 1).
    pub fn new(rate: u32) -> Arc<SessionRate> {
        let interval = SECOND / u64::from(rate.max(1));
        Arc::new(SessionRate {
            rate,
            interval,
            burst: SECOND - interval,
            tat: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// N, per second.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Takes one place in the schedule at `now`, or says how long to wait
    /// before asking again.
    pub fn take(&self, now: Instant) -> Result<(), Duration> {
        let now =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let mut wait = 0;
        let taken = self.tat.fetch_update(Relaxed, Relaxed, |tat| {
            let tat = tat.max(now);
            if tat - now > self.burst {
                wait = tat - now - self.burst;
                return None;
            }
            Some(tat + self.interval)
        });
        taken.map(|_| ()).map_err(|_| Duration::from_nanos(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `tries` evenly spread over `over` are taken.
    fn taken(rate: &SessionRate, start: Instant, over: Duration, tries: u32) -> u32 {
        (0..tries)
            .filter(|&i| rate.take(start + over * i / tries).is_ok())
            .count() as u32
    }

    #[test]
    fn a_burst_of_n_then_n_a_second() {
        let rate = SessionRate::new(10);
        let start = Instant::now();
        // An idle frontend: 10 at once, not 11.
        assert_eq!(taken(&rate, start, Duration::ZERO, 50), 10);
        // Then a tenth of a second each.
        let wait = rate.take(start).expect_err("the burst is spent");
        assert_eq!(wait, Duration::from_millis(100));
        let after = taken(&rate, start, Duration::from_secs(10), 10_000);
        assert!((99..=100).contains(&after), "{after} in 10 s");
    }

    #[test]
    fn loops_on_several_threads_never_take_more_than_the_schedule() {
        let rate = SessionRate::new(1000);
        let start = Instant::now();
        let took: u32 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| taken(&rate, start, Duration::from_secs(2), 20_000)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a thread"))
                .sum()
        });
        // The burst (1,000) and two seconds' worth (2,000), whatever the
        // interleaving: the slots are 1 ms apart on one schedule.
        assert!((2_990..=3_000).contains(&took), "{took}");
    }
}
