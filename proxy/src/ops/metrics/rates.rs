//! Rates and recent history: what a counter alone cannot say, kept by the
//! admin thread from a sample of every row once a second.
//!
//! A total (`stot`) says how many sessions a server has had; an operator
//! watching a page wants how many it takes *now*, how that moved over the
//! last minute, and how long it has been in its state. Each row of the
//! views (a frontend, a group, a server: `ops/admin/views.rs`) is sampled
//! once a second, by name, into a track:
//!
//! ```text
//!   second:    ... t-3   t-2   t-1    t        totals of sessions, the last 61
//!   rate   = (total[t] - total[t-3]) / 3         sessions per second, HAProxy's `rate`
//!   history=  total[i] - total[i-1], the last 60 the page's sparkline
//!   state  ->  when it last changed (`lastchg`), how often it went down (`chkdown`)
//! ```
//!
//! Kept by name, not by index, so a reload that keeps a server's name keeps
//! its history; a row no longer sampled is forgotten at the next sample.
//! The whole of it is bounded: [`HISTORY`] totals per row, and the rows of
//! the configuration. Nothing here is written by an event loop: the sample
//! reads the workers' counters the way a scrape does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many one-second session counts a row keeps (the page's chart).
pub const HISTORY: usize = 60;

/// Over how many seconds `rate` is averaged.
const RATE_SPAN: usize = 3;

/// Every row's track, by its key (frontend, proxy and server names).
#[derive(Debug, Default)]
pub struct Rates {
    tracks: Mutex<Samples>,
}

#[derive(Debug, Default)]
struct Samples {
    tracks: BTreeMap<String, Track>,
    /// Which sample this is: a track not touched by the latest is dropped.
    round: u64,
}

/// One row's recent past.
#[derive(Debug, Clone)]
struct Track {
    /// Its session totals, one a second, the newest last.
    totals: VecDeque<u64>,
    /// The highest `rate` seen.
    rate_max: u64,
    /// Its state at the last sample, and since when.
    state: String,
    since: Instant,
    /// How many times it went from another state to "down".
    downs: u64,
    round: u64,
}

/// What a row's track says, for its view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recent {
    /// Sessions per second over the last few seconds.
    pub rate: u64,
    /// The highest `rate` since the row was first sampled.
    pub rate_max: u64,
    /// Sessions in each of the last seconds, oldest first (at most
    /// [`HISTORY`]).
    pub history: Vec<u64>,
    /// How long it has been in its state.
    pub since_change: Duration,
    /// Times it went down.
    pub downs: u64,
}

impl Rates {
    /// No track yet.
    pub fn new() -> Rates {
        Rates::default()
    }

    /// Records one sample of every row: for each, its key, its session
    /// total and its state. Rows not in `rows` are forgotten.
    pub fn sample<'a>(
        &self,
        now: Instant,
        rows: impl IntoIterator<Item = (&'a str, u64, &'a str)>,
    ) {
        let mut samples = self.tracks.lock().unwrap_or_else(PoisonError::into_inner);
        samples.round = samples.round.wrapping_add(1);
        let round = samples.round;
        for (key, total, state) in rows {
            let track = samples
                .tracks
                .entry(key.to_string())
                .or_insert_with(|| Track::new(state, now));
            track.note(total, state, now, round);
        }
        samples.tracks.retain(|_, t| t.round == round);
    }

    /// What the track of `key` says at `now` (all zeros for a row never
    /// sampled: a frontend added by the last reload, before its first
    /// second).
    pub fn recent(&self, key: &str, now: Instant) -> Recent {
        let samples = self.tracks.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .tracks
            .get(key)
            .map_or_else(Recent::default, |t| t.recent(now))
    }
}

impl Track {
    fn new(state: &str, now: Instant) -> Track {
        Track {
            totals: VecDeque::with_capacity(HISTORY + 1),
            rate_max: 0,
            state: state.to_string(),
            since: now,
            downs: 0,
            round: 0,
        }
    }

    fn note(&mut self, total: u64, state: &str, now: Instant, round: u64) {
        self.round = round;
        if self.totals.len() > HISTORY {
            self.totals.pop_front();
        }
        self.totals.push_back(total);
        self.rate_max = self.rate_max.max(self.rate());
        if self.state != state {
            if state == "down" {
                self.downs += 1;
            }
            self.state = state.to_string();
            self.since = now;
        }
    }

    /// Sessions per second over the last [`RATE_SPAN`] seconds (fewer
    /// while the track is younger).
    fn rate(&self) -> u64 {
        let n = self.totals.len();
        let span = RATE_SPAN.min(n.saturating_sub(1));
        if span == 0 {
            return 0;
        }
        let newest = self.totals[n - 1];
        let oldest = self.totals[n - 1 - span];
        newest.wrapping_sub(oldest) / span as u64
    }

    fn recent(&self, now: Instant) -> Recent {
        let history = self
            .totals
            .iter()
            .zip(self.totals.iter().skip(1))
            .map(|(a, b)| b.wrapping_sub(*a))
            .collect();
        Recent {
            rate: self.rate(),
            rate_max: self.rate_max,
            history,
            since_change: now.saturating_duration_since(self.since),
            downs: self.downs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_history_and_state_changes_come_from_one_sample_a_second() {
        let rates = Rates::new();
        let start = Instant::now();
        let second = |n: u64| start + Duration::from_secs(n);
        for (n, total) in [0u64, 10, 20, 30, 60].into_iter().enumerate() {
            let state = if n == 3 { "down" } else { "up" };
            rates.sample(second(n as u64), [("web/web/a", total, state)]);
        }
        let recent = rates.recent("web/web/a", second(5));
        assert_eq!(recent.history, vec![10, 10, 10, 30]);
        assert_eq!(recent.rate, (60 - 10) / 3);
        assert_eq!(recent.rate_max, 16);
        assert_eq!(recent.downs, 1);
        assert_eq!(recent.since_change, Duration::from_secs(1), "up again at 4");
        rates.sample(second(6), [("web/web/b", 0, "up")]);
        assert_eq!(rates.recent("web/web/a", second(6)), Recent::default());
    }

    #[test]
    fn a_track_keeps_its_last_sixty_seconds() {
        let rates = Rates::new();
        let start = Instant::now();
        for n in 0..200u64 {
            rates.sample(start + Duration::from_secs(n), [("k", n * 2, "up")]);
        }
        let recent = rates.recent("k", start + Duration::from_secs(200));
        assert_eq!(recent.history.len(), HISTORY);
        assert!(recent.history.iter().all(|&c| c == 2));
        assert_eq!(recent.rate, 2);
    }
}
