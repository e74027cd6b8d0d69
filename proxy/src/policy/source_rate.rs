//! `rate-limit-per-source N PERIOD`: at most N new connections per PERIOD
//! from one client address; one more is refused at once (HAProxy's stick
//! table `conn_rate(PERIOD)` with `tcp-request connection reject if {
//! sc0_conn_rate gt N }`).
//!
//! Each source has a counter over a sliding window, HAProxy's `freq_ctr`:
//! the connections of the current period, plus those of the previous one
//! weighted by how much of it the window still covers. It counts *every*
//! new connection, refused ones included, as HAProxy's tracking does: a
//! client that keeps hammering stays refused until it slows down, instead
//! of getting one connection in at each period's start.
//!
//! ```text
//!   rate(now) = current + previous × (PERIOD - (now - period_start)) / PERIOD
//!   new connection: roll the periods forward, current += 1, refused if rate > N
//! ```
//!
//! The counts are process-wide, sharded as `source_limit.rs`'s (64 maps
//! behind 64 locks, the shard by a keyed hash, IPv4-mapped addresses counted
//! as IPv4). A source's entry outlives its connections (a rate remembers),
//! so memory is bounded by sweeping: when a shard has doubled since its last
//! sweep, the entries of sources silent for two periods, whose rate is 0,
//! are removed. Memory follows the sources of the last two periods.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How many maps the counts are spread over.
const SHARDS: usize = 64;

/// A shard is swept once it holds this many sources, then again whenever
/// it has doubled since.
const FIRST_SWEEP: usize = 64;

/// One source's window.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// Where the current period started, in nanoseconds since the epoch.
    start: u64,
    /// New connections in the current period.
    current: u32,
    /// New connections in the previous period.
    previous: u32,
}

/// A shard: its sources, and the size at which it is swept next.
#[derive(Debug, Default)]
struct Shard {
    windows: HashMap<IpAddr, Window>,
    sweep_at: usize,
}

/// Per-source connection rates, shared by every event loop (module docs).
pub struct SourceRates {
    max: u32,
    period: u64,
    epoch: Instant,
    shards: [Mutex<Shard>; SHARDS],
    shard_hasher: RandomState,
}

impl SourceRates {
    /// At most `max` new connections per `period` from one source.
    pub fn new(max: u32, period: Duration) -> SourceRates {
        SourceRates {
            max,
            period: u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1),
            epoch: Instant::now(),
            shards: std::array::from_fn(|_| Mutex::new(Shard::default())),
            shard_hasher: RandomState::new(),
        }
    }

    /// The most connections per period.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// Counts a new connection from `ip` at `now`; `false` if it goes over
    /// the rate (and is to be refused).
    pub fn admit(&self, ip: IpAddr, now: Instant) -> bool {
        let ip = ip.to_canonical();
        let now = self.nanos(now);
        let mut shard = self.shard(ip);
        let window = shard.windows.entry(ip).or_insert(Window {
            start: now,
            current: 0,
            previous: 0,
        });
        self.roll(window, now);
        window.current = window.current.saturating_add(1);
        let admitted = self.rate_of(window, now) <= u64::from(self.max);
        if shard.windows.len() >= shard.sweep_at.max(FIRST_SWEEP) {
            self.sweep(&mut shard, now);
        }
        admitted
    }

    /// The rate of `ip` at `now`, as [`SourceRates::admit`] judges it (0
    /// for a source not seen for two periods).
    pub fn rate(&self, ip: IpAddr, now: Instant) -> u64 {
        let ip = ip.to_canonical();
        let now = self.nanos(now);
        let shard = self.shard(ip);
        shard.windows.get(&ip).map_or(0, |w| {
            let mut w = *w;
            self.roll(&mut w, now);
            self.rate_of(&w, now)
        })
    }

    /// Sources with an entry now (a measure of the memory held).
    pub fn sources(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).windows.len()).sum()
    }

    /// Moves `window` to the period that holds `now`.
    fn roll(&self, window: &mut Window, now: u64) {
        let periods = now.saturating_sub(window.start) / self.period;
        if periods == 0 {
            return;
        }
        window.previous = if periods == 1 { window.current } else { 0 };
        window.current = 0;
        window.start += periods * self.period;
    }

    /// `current + previous × the share of the previous period still in the
    /// window`, for a window rolled to `now`.
    fn rate_of(&self, window: &Window, now: u64) -> u64 {
        let into = now.saturating_sub(window.start).min(self.period);
        let left = u128::from(self.period - into);
        let carried = u128::from(window.previous) * left / u128::from(self.period);
        u64::from(window.current) + u64::try_from(carried).unwrap_or(u64::MAX)
    }

    /// Removes the sources silent for two periods; the next sweep comes
    /// when the shard has doubled.
    fn sweep(&self, shard: &mut Shard, now: u64) {
        let stale = |w: &Window| now.saturating_sub(w.start) >= 2 * self.period;
        shard.windows.retain(|_, w| !stale(w));
        shard.sweep_at = (2 * shard.windows.len()).max(FIRST_SWEEP);
        if shard.windows.capacity() > 4 * shard.sweep_at {
            shard.windows.shrink_to(shard.sweep_at);
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn shard(&self, ip: IpAddr) -> MutexGuard<'_, Shard> {
        self.lock(self.shard_hasher.hash_one(ip) as usize % SHARDS)
    }

    /// The guard of shard `i`: a counter is valid whatever a panicking
    /// holder left, so a poisoned lock is taken back.
    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for SourceRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceRates")
            .field("max", &self.max)
            .field("period", &self.period())
            .field("sources", &self.sources())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
    }

    #[test]
    fn n_per_period_then_refused_and_refusals_count() {
        let rates = SourceRates::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        let admitted: Vec<bool> = (0..5).map(|_| rates.admit(ip(1), t0)).collect();
        assert_eq!(admitted, [true, true, true, false, false]);
        // Another source has its own count; an IPv4-mapped one is the same.
        assert!(rates.admit(ip(2), t0));
        let IpAddr::V4(v4) = ip(1) else {
            unreachable!()
        };
        assert!(!rates.admit(IpAddr::V6(v4.to_ipv6_mapped()), t0));
        // Half a period into the next: 6 of the previous period's still
        // weigh 3, so one more goes over.
        let half = t0 + Duration::from_secs(15);
        assert_eq!(rates.rate(ip(1), half), 3);
        assert!(!rates.admit(ip(1), half));
        // Two periods of silence: a fresh start.
        let later = t0 + Duration::from_secs(40);
        assert_eq!(rates.rate(ip(1), later), 0);
        assert!(rates.admit(ip(1), later));
    }

    #[test]
    fn a_steady_client_at_the_rate_is_never_refused() {
        let rates = SourceRates::new(10, Duration::from_secs(1));
        let t0 = Instant::now();
        // 9 a second, evenly, for a minute: under 10 at every instant.
        for i in 0..540u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 1000 / 9);
            assert!(rates.admit(ip(7), at), "refused at {i}");
        }
    }

    #[test]
    fn memory_follows_the_sources_of_the_last_two_periods() {
        let rates = SourceRates::new(1, Duration::from_secs(1));
        let t0 = Instant::now();
        for n in 0..20_000 {
            rates.admit(ip(n), t0);
        }
        assert_eq!(rates.sources(), 20_000);
        // Three periods later, new sources sweep the old ones out.
        let later = t0 + Duration::from_secs(3);
        for n in 0..20_000 {
            rates.admit(ip(1_000_000 + n), later);
        }
        assert!(
            rates.sources() <= 20_000 + SHARDS * FIRST_SWEEP,
            "{}",
            rates.sources()
        );
        assert!(rates.sources() >= 20_000);
    }
}
