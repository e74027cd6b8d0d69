//! `maxconn-per-source N`: a ceiling on each source address's concurrent
//! connections, shared by every event loop.
//!
//! [`SourceLimits`] counts each source address's open connections, and
//! refuses a new one from a source that already has N. The counts are
//! process-wide: every event-loop thread shares one `SourceLimits`, so an
//! operator's "20 per source" means 20, not 20 per thread.
//!
//! It borrows [`limit`](crate::policy::limit)'s idea, a place taken by
//! `try_acquire` and given back by dropping the permit, so a connection
//! cannot forget to, but not its atomic counter: here the count lives in a
//! map entry that must disappear when it reaches 0 (else every address ever
//! seen would stay in memory), and "decrement, and remove at 0" must happen
//! as one step against a concurrent "insert or increment". A lock does that
//! plainly. Nor does a source over its limit wait for room, as a frontend at
//! its `maxconn` does: it is refused at once, like HAProxy's `tcp-request
//! connection reject` on `sc_conn_cur` and nginx's `limit_conn`; queueing
//! it would let one client hold the queue instead.
//!
//! # Shards
//!
//! One map behind one mutex would make every accept on every thread queue
//! for the same lock. So the map is split into 64 shards, each a
//! `Mutex<HashMap<IpAddr, u32>>`, and an address always goes to the shard
//! its hash picks:
//!
//! ```text
//!   ip ──hash──▶ shard 0 .. 63 ──▶ Mutex<HashMap<ip, open connections>>
//!
//!   loop 1: 10.0.0.7   ──▶ shard 12  ┐ different shards:
//!   loop 2: 192.0.2.9  ──▶ shard 40  ┘ no waiting on each other
//! ```
//!
//! The lock is held for one map lookup, twice per connection (accept and
//! close), and taken only when the option is configured. Two loops contend
//! only when their clients happen to hash to the same shard, one chance in
//! 64. The hash is `std`'s keyed SipHash with a random key per process, so a
//! client cannot choose addresses that all fall into one shard. The maps
//! give back memory as their sources leave, so memory follows the sources
//! connected now, not every source ever seen.
//!
//! # IPv6 sources
//!
//! IPv4-mapped addresses count as the IPv4 address, so one client is one
//! count whichever listener accepted it. An IPv6 client is counted per full
//! 128-bit address. An IPv6 client usually owns a whole /64, 2^64
//! addresses, and can spread its connections over as many of them as it
//! likes, each with a count of its own: the limit stops a careless client,
//! not a determined one. HAProxy (`track-sc0 src`) and nginx
//! (`limit_conn_zone $binary_remote_addr`) key on the full address too,
//! unless configured otherwise (HAProxy: `src,ipmask(32,64)`).

use std::collections::HashMap;
use std::collections::hash_map::{Entry, RandomState};
use std::fmt;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How many maps the counts are spread over (module docs: shards).
const SHARDS: usize = 64;

/// A shard's map may keep this many slots with no sources at all: below
/// it, giving memory back is not worth a reallocation.
const MIN_KEPT_CAPACITY: usize = 64;

/// Per-source concurrent-connection limit shared by every event-loop thread
/// (`maxconn-per-source N`; module docs).
pub struct SourceLimits {
    /// Connections one source may have open at once.
    max: u32,
    /// Open connections per source, in the shard its hash picks. A source
    /// with no open connection has no entry.
    shards: [Mutex<HashMap<IpAddr, u32>>; SHARDS],
    /// Picks the shard. Not the maps' own hasher: within one shard every
    /// key would then share its low hash bits, the ones a map uses to
    /// place its keys, and they would all collide.
    shard_hasher: RandomState,
}

/// One place taken under a [`SourceLimits`] for one source; dropping it
/// gives the place back.
#[derive(Debug)]
#[must_use = "dropping the permit gives the place back at once"]
pub struct SourcePermit {
    limits: Arc<SourceLimits>,
    /// Normalised: IPv4 for a mapped address.
    ip: IpAddr,
}

impl SourceLimits {
    /// At most `max_per_source` open connections per source address (0
    /// admits nobody; the configuration asks for at least 1).
    pub fn new(max_per_source: u32) -> Arc<SourceLimits> {
        Arc::new(SourceLimits {
            max: max_per_source,
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            shard_hasher: RandomState::new(),
        })
    }

    /// The ceiling per source.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Takes one place for `ip`, or `None` if `ip` already has `max` open
    /// connections. The permit gives it back on drop (and removes the entry
    /// when the count reaches 0, so memory is bounded by the sources
    /// currently connected).
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<SourcePermit> {
        let ip = ip.to_canonical();
        let mut shard = self.shard(ip);
        match shard.entry(ip) {
            Entry::Occupied(mut open) if *open.get() < self.max => *open.get_mut() += 1,
            Entry::Occupied(_) => return None,
            // No entry is made for a refusal: that would leave a 0 behind.
            Entry::Vacant(_) if self.max == 0 => return None,
            Entry::Vacant(slot) => {
                slot.insert(1);
            }
        }
        Some(SourcePermit {
            limits: self.clone(),
            ip,
        })
    }

    /// A place for `ip` even at its ceiling: for a connection that exists
    /// already (one adopted from an older process, which counted it
    /// there), which must be counted here, never refused.
    pub fn acquire_over(self: &Arc<Self>, ip: IpAddr) -> SourcePermit {
        let ip = ip.to_canonical();
        *self.shard(ip).entry(ip).or_insert(0) += 1;
        SourcePermit {
            limits: self.clone(),
            ip,
        }
    }

    /// Open connections from `ip` now (0 for a source never seen).
    pub fn open(&self, ip: IpAddr) -> u32 {
        let ip = ip.to_canonical();
        self.shard(ip).get(&ip).copied().unwrap_or(0)
    }

    /// Sources with at least one open connection now. The shards are read
    /// one after the other, so under traffic this is an estimate.
    pub fn sources(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).len()).sum()
    }

    fn release(&self, ip: IpAddr) {
        let mut shard = self.shard(ip);
        if let Entry::Occupied(mut open) = shard.entry(ip) {
            if *open.get() <= 1 {
                open.remove();
            } else {
                *open.get_mut() -= 1;
            }
        }
        // A burst of many sources grows the map; once most have left, give
        // the memory back. Shrinking to twice the size left, and only below
        // a quarter, keeps a map near a boundary from resizing every time.
        let (len, capacity) = (shard.len(), shard.capacity());
        if capacity > MIN_KEPT_CAPACITY && len < capacity / 4 {
            shard.shrink_to((len * 2).max(MIN_KEPT_CAPACITY));
        }
    }

    /// The locked shard that holds `ip` (already normalised).
    fn shard(&self, ip: IpAddr) -> MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.lock((self.shard_hasher.hash_one(ip) % SHARDS as u64) as usize)
    }

    /// A panic while a shard was locked leaves counts that are still
    /// whole numbers (every change is one store), so a poisoned lock is
    /// used as is, as in [`limit`](crate::policy::limit).
    fn lock(&self, index: usize) -> MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for SourceLimits {
    // Without the counts: printing them would lock every shard.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceLimits")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl SourcePermit {
    /// The source this place was taken for (IPv4 for a mapped address).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }
}

impl Drop for SourcePermit {
    fn drop(&mut self) {
        self.limits.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use std::thread;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    #[test]
    fn a_source_gets_exactly_its_limit() {
        let limits = SourceLimits::new(3);
        let client = ip("192.0.2.1");
        let permits: Vec<_> = (0..3)
            .map(|_| limits.try_acquire(client).expect("a place under the limit"))
            .collect();
        assert_eq!(limits.open(client), 3);
        assert!(limits.try_acquire(client).is_none());
        assert!(limits.try_acquire(client).is_none());
        // Refusals take nothing.
        assert_eq!(limits.open(client), 3);
        drop(permits);
        assert_eq!(limits.open(client), 0);
    }

    #[test]
    fn dropping_a_permit_gives_its_place_back() {
        let limits = SourceLimits::new(1);
        let client = ip("2001:db8::7");
        let permit = limits.try_acquire(client).expect("the only place");
        assert_eq!(permit.ip(), client);
        assert!(limits.try_acquire(client).is_none());
        drop(permit);
        assert_eq!(limits.open(client), 0);
        let again = limits.try_acquire(client);
        assert!(again.is_some());
    }

    #[test]
    fn entries_are_removed_at_zero_and_memory_is_given_back() {
        let limits = SourceLimits::new(2);
        let permits: Vec<_> = (0..10_000u32)
            .map(|n| {
                let client = IpAddr::V4(Ipv4Addr::from_bits(0x0a00_0000 + n));
                limits.try_acquire(client).expect("a new source")
            })
            .collect();
        assert_eq!(limits.sources(), 10_000);
        drop(permits);
        assert_eq!(limits.sources(), 0);
        for i in 0..SHARDS {
            let capacity = limits.lock(i).capacity();
            assert!(
                capacity <= 2 * MIN_KEPT_CAPACITY,
                "shard {i} kept {capacity} slots"
            );
        }
        // A refusal leaves no entry behind either.
        let nobody = SourceLimits::new(0);
        assert!(nobody.try_acquire(ip("192.0.2.1")).is_none());
        assert_eq!(nobody.sources(), 0);
    }

    #[test]
    fn sources_are_independent_and_mapped_spellings_are_one_source() {
        let limits = SourceLimits::new(2);
        let a = ip("192.0.2.1");
        let a_mapped = ip("::ffff:192.0.2.1");
        let b = ip("192.0.2.2");
        let c = ip("2001:db8::1");
        let _a1 = limits.try_acquire(a).expect("a's first");
        let a2 = limits
            .try_acquire(a_mapped)
            .expect("a's second, spelled mapped");
        assert_eq!(a2.ip(), a);
        assert!(limits.try_acquire(a).is_none());
        assert!(limits.try_acquire(a_mapped).is_none());
        assert_eq!(limits.open(a_mapped), 2);
        // a at its limit does not touch b or c.
        let _b = limits.try_acquire(b).expect("b's first");
        let _c1 = limits.try_acquire(c).expect("c's first");
        let _c2 = limits.try_acquire(c).expect("c's second");
        assert!(limits.try_acquire(c).is_none());
        assert_eq!((limits.open(a), limits.open(b), limits.open(c)), (2, 1, 2));
        assert_eq!(limits.sources(), 3);
        drop(a2);
        assert_eq!(limits.open(a), 1);
        assert_eq!(limits.open(c), 2);
    }

    #[test]
    fn many_threads_on_one_source_never_exceed_the_limit() {
        const MAX: u32 = 3;
        const PER_THREAD: u32 = 2_000;
        // Ample for PER_THREAD successes; a leaked place would use them up
        // and fail the test instead of hanging it.
        const ATTEMPTS: u32 = 10_000_000;
        let limits = SourceLimits::new(MAX);
        let holding = AtomicU32::new(0);
        let peak = AtomicU32::new(0);
        let done: Vec<u32> = thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|t| {
                    let (limits, holding, peak) = (&limits, &holding, &peak);
                    // Half the threads see the client as a dual-stack
                    // listener would: one source all the same.
                    let client = ip(if t % 2 == 0 {
                        "192.0.2.1"
                    } else {
                        "::ffff:192.0.2.1"
                    });
                    s.spawn(move || {
                        let mut done = 0;
                        for _ in 0..ATTEMPTS {
                            if done == PER_THREAD {
                                break;
                            }
                            let Some(permit) = limits.try_acquire(client) else {
                                thread::yield_now();
                                continue;
                            };
                            let now = holding.fetch_add(1, SeqCst) + 1;
                            peak.fetch_max(now, SeqCst);
                            peak.fetch_max(limits.open(client), SeqCst);
                            thread::yield_now();
                            holding.fetch_sub(1, SeqCst);
                            drop(permit);
                            done += 1;
                        }
                        done
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a worker thread"))
                .collect()
        });
        assert_eq!(done, vec![PER_THREAD; 4]);
        let peak = peak.load(SeqCst);
        assert!((1..=MAX).contains(&peak), "peak {peak}");
        assert_eq!(limits.open(ip("192.0.2.1")), 0);
        assert_eq!(limits.sources(), 0);
    }

    #[test]
    fn a_place_over_the_ceiling_is_counted_and_given_back() {
        let limits = SourceLimits::new(1);
        let ip: IpAddr = "10.0.0.9".parse().expect("an address");
        let first = limits.try_acquire(ip).expect("room for one");
        let over = limits.acquire_over(ip);
        assert_eq!(limits.open(ip), 2);
        assert!(limits.try_acquire(ip).is_none(), "still over its ceiling");
        drop((first, over));
        assert_eq!(limits.open(ip), 0);
    }
}
