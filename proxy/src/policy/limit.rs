//! `maxconn`: a count of open connections with a ceiling, shared by every
//! event loop, and a way for a loop to wait until there is room again.
//!
//! A [`Limit`] is one number (connections open now) and one optional
//! ceiling. Taking a place is one compare-and-swap ([`Limit::try_acquire`]);
//! the [`Permit`] it returns gives the place back when dropped, so a
//! connection cannot forget to. The proxy keeps three kinds: the global
//! `maxconn`, each frontend's, and each backend's.
//!
//! ```text
//!   accept loop                            connection task
//!   ───────────                            ───────────────
//!   room().await  ◀── woken ──┐            permit = try_acquire()
//!   accept()                  │            ... relay ...
//!   spawn(connection) ──────▶ └──────────  drop(permit): open -= 1, notify_all
//! ```
//!
//! ## Waiting without a lock on the busy path
//!
//! Below the ceiling nobody waits, and taking or giving back a place touches
//! only the atomic count (and, on the way back, one more atomic add that
//! finds nobody waiting). At the ceiling, waiters wait on a [`Notify`]:
//! each one takes its `Notified` first, then looks at the count, so a place
//! given back between the two is not missed (the `Notify` explains why that
//! order loses no wake).
//!
//! ```text
//!   waiter:   n = room.notified();  has_room()?  no: n.await, look again
//!   releaser: open -= 1;            room.notify_all()
//! ```
//!
//! Waking is for *all* waiters: there may be one per event loop (each
//! paused accept loop) and one per queued connection, and whoever wakes
//! first takes the place; the others find none and wait again. At the
//! ceiling that is a handful of wake-ups per close, a price paid only there.
//!
//! A graceful stop waits for the count to reach zero ([`Limit::drained`]):
//! a second `Notify`, notified only by the release that empties the limit,
//! so the draining thread is woken once, when the last connection ends,
//! not at every close.
//!
//! ## Lending places
//!
//! The global `maxconn` is a count of descriptor pairs: two sockets a
//! connection. A pipe for `splice(2)` is a pair too, and borrows its
//! descriptors from the same count ([`Limit::lend`]) instead of having a
//! share set aside: a place lent is not a connection ([`Limit::open`] does
//! not count it) but it is not free either, so a connection is admitted only
//! where `open + lent` leaves room, and no backend socket ever finds its
//! descriptor taken by a pipe. Connections come first: a loan is made only
//! while `keep` places stay free for them ([`kept_for_connections`]), and only under the descriptor
//! room ([`Limit::set_lendable`]), which may be larger than the ceiling
//! when an explicit `maxconn` leaves descriptors over. Open and lent live in
//! one atomic word, so the two checks never race each other.
//!
//! ```text
//!   connection:  open < max  and  open + lent < lendable          → open += 1
//!   loan:        lent + 1 + min(max, open + keep) ≤ lendable       → lent += 1
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

use runtime::notify::{Notified, Notify};

/// A shared count of open connections with an optional ceiling.
#[derive(Debug)]
pub struct Limit {
    /// The ceiling; `u32::MAX` when there is none. Atomic only so that a
    /// reload can move it ([`Limit::set_max`]).
    max: AtomicU32,
    /// The descriptor room in pairs, which loans may use up to; `u32::MAX`
    /// (no loans are made from such a limit but the checks hold).
    lendable: AtomicU32,
    /// Places taken now (the low 32 bits) and places lent (the high 32).
    places: AtomicU64,
    /// Notified when a place is given back or the ceiling moves.
    room: Notify,
    /// Notified when the last place is given back.
    emptied: Notify,
}

/// A place taken under a [`Limit`]; dropping it gives the place back.
#[derive(Debug)]
pub struct Permit {
    limit: Arc<Limit>,
}

/// A place lent under a [`Limit`] (a pipe's two descriptors); dropping it
/// gives the place back.
#[derive(Debug)]
pub struct Loan {
    limit: Arc<Limit>,
}

/// Loans never take the last `max / KEEP_FOR_CONNECTIONS` places (at least
/// [`KEEP_AT_LEAST`]): kept for connections that arrive while pipes are
/// out, so that they are admitted at once rather than after a pipe drains.
pub const KEEP_FOR_CONNECTIONS: u32 = 16;

/// The fewest places kept for connections (see [`KEEP_FOR_CONNECTIONS`]).
pub const KEEP_AT_LEAST: u32 = 8;

/// The places loans leave free for connections under a ceiling of `max`.
pub fn kept_for_connections(max: u32) -> u32 {
    (max / KEEP_FOR_CONNECTIONS).max(KEEP_AT_LEAST)
}

/// One place lent, in [`Limit`]'s `places` word.
const LENT_ONE: u64 = 1 << 32;

/// `(open, lent)` of a `places` word.
fn split(places: u64) -> (u32, u32) {
    // Truncation is the point: the low half, then the high half.
    (places as u32, (places >> 32) as u32)
}

impl Limit {
    /// A limit of `max` places (`None`: no ceiling, only counting).
    pub fn new(max: Option<u32>) -> Arc<Limit> {
        Arc::new(Limit {
            max: AtomicU32::new(max.unwrap_or(u32::MAX)),
            lendable: AtomicU32::new(u32::MAX),
            places: AtomicU64::new(0),
            room: Notify::new(),
            emptied: Notify::new(),
        })
    }

    /// The ceiling, if there is one.
    pub fn max(&self) -> Option<u32> {
        let max = self.max.load(SeqCst);
        (max != u32::MAX).then_some(max)
    }

    /// Moves the ceiling (a reloaded configuration). Places already taken
    /// stay taken, even above a lowered ceiling; waiters are woken in case
    /// it rose.
    pub fn set_max(&self, max: Option<u32>) {
        self.max.store(max.unwrap_or(u32::MAX), SeqCst);
        self.room.notify_all();
    }

    /// Sets the descriptor room, in pairs, that loans may use
    /// ([`Limit::lend`]): at least the ceiling; waiters are woken in case
    /// it rose.
    pub fn set_lendable(&self, pairs: u32) {
        self.lendable.store(pairs, SeqCst);
        self.room.notify_all();
    }

    /// Places taken now (connections; loans are not counted).
    pub fn open(&self) -> u32 {
        split(self.places.load(SeqCst)).0
    }

    /// Places lent now (pipes).
    pub fn lent(&self) -> u32 {
        split(self.places.load(SeqCst)).1
    }

    /// Whether a place is free now (it may be gone by the time it is taken).
    pub fn has_room(&self) -> bool {
        self.admits(self.places.load(SeqCst), u32::MAX)
    }

    /// Whether `places` leaves room for one more connection under `cap`.
    fn admits(&self, places: u64, cap: u32) -> bool {
        let (open, lent) = split(places);
        let lendable = u64::from(self.lendable.load(SeqCst));
        open < self.max.load(SeqCst).min(cap) && u64::from(open) + u64::from(lent) < lendable
    }

    /// Takes a place if one is free.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        self.try_acquire_under(None)
    }

    /// Lends a place (a pipe's descriptors) if one is free in the descriptor
    /// room and [`kept_for_connections`] more stay free for connections
    /// after it: the rule in this file's opening. `None`: copy instead.
    pub fn lend(self: &Arc<Self>) -> Option<Loan> {
        self.places
            .fetch_update(SeqCst, SeqCst, |places| {
                self.lends(places + LENT_ONE).then_some(places + LENT_ONE)
            })
            .ok()
            .map(|_| Loan {
                limit: self.clone(),
            })
    }

    /// Whether the loans made now still keep to the rule: a pooled pipe may
    /// stay pooled (conn/splice.rs); false when connections need the room.
    pub fn loans_fit(&self) -> bool {
        self.lends(self.places.load(SeqCst))
    }

    /// Whether `places` keeps the loans' rule (this file's opening).
    fn lends(&self, places: u64) -> bool {
        let (open, lent) = split(places);
        let max = self.max.load(SeqCst);
        let keep = u64::from(kept_for_connections(max));
        let first = u64::from(max).min(u64::from(open) + keep);
        u64::from(lent) + first <= u64::from(self.lendable.load(SeqCst))
    }

    /// Takes a place if one is free below `cap` as well as the ceiling (a
    /// backend in its slowstart, whose `maxconn` grows back: health.rs).
    pub fn try_acquire_under(self: &Arc<Self>, cap: Option<u32>) -> Option<Permit> {
        let cap = cap.unwrap_or(u32::MAX);
        self.places
            .fetch_update(SeqCst, SeqCst, |places| {
                self.admits(places, cap).then_some(places + 1)
            })
            .ok()
            .map(|_| Permit {
                limit: self.clone(),
            })
    }

    /// Takes a place even at the ceiling. For the rare client an upgrade
    /// finds accepted but still waiting for its place (epoll/worker.rs,
    /// `Waiting`): it cannot go back to the kernel's queue, and resetting it
    /// would lose it, so it goes over the limit, by at most one client per
    /// accept loop, once. HAProxy's maxconn is exceeded the same way by the
    /// few clients its threads accept in a race.
    pub fn acquire_over(self: &Arc<Self>) -> Permit {
        self.places.fetch_add(1, SeqCst);
        Permit {
            limit: self.clone(),
        }
    }

    /// Completes at the next place given back (or ceiling moved) after it
    /// was made: take it *before* looking at [`Limit::has_room`], and a
    /// place freed in between is not missed.
    pub fn changed(&self) -> Notified<'_> {
        self.room.notified()
    }

    /// Waits until a place is free (without taking it).
    pub async fn room(&self) {
        loop {
            let changed = self.changed();
            if self.has_room() {
                return;
            }
            changed.await;
        }
    }

    /// Waits until no place is taken: what a graceful stop waits for.
    pub async fn drained(&self) {
        loop {
            let emptied = self.emptied.notified();
            if self.open() == 0 {
                return;
            }
            emptied.await;
        }
    }

    fn release(&self) {
        if split(self.places.fetch_sub(1, SeqCst)).0 == 1 {
            self.emptied.notify_all();
        }
        self.room.notify_all();
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limit.release();
    }
}

impl Loan {
    /// Whether the loans of its limit still keep to the rule
    /// ([`Limit::loans_fit`]): false when connections need the room.
    pub fn fits(&self) -> bool {
        self.limit.loans_fit()
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        self.limit.places.fetch_sub(LENT_ONE, SeqCst);
        self.limit.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn permits_count_and_stop_at_the_ceiling() {
        let limit = Limit::new(Some(2));
        let a = limit.try_acquire().expect("first place");
        let b = limit.try_acquire().expect("second place");
        assert!(limit.try_acquire().is_none());
        assert_eq!(limit.open(), 2);
        drop(a);
        assert_eq!(limit.open(), 1);
        let c = limit.try_acquire().expect("a place freed by the drop");
        drop((b, c));
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn no_ceiling_only_counts() {
        let limit = Limit::new(None);
        let permits: Vec<_> = (0..1000).filter_map(|_| limit.try_acquire()).collect();
        assert_eq!(permits.len(), 1000);
        assert_eq!(limit.open(), 1000);
        assert_eq!(limit.max(), None);
    }

    #[test]
    fn a_release_on_another_thread_wakes_a_waiting_loop() {
        let limit = Limit::new(Some(1));
        let held = limit.try_acquire().expect("the only place");
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let limit = limit.clone();
            thread::spawn(move || {
                let rt = runtime::Runtime::new().expect("a runtime");
                rt.block_on(async {
                    limit.room().await;
                    let _ = tx.send(limit.try_acquire().is_some());
                });
            })
        };
        // The waiter cannot get through while the place is held...
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        // ...and gets through once it is given back.
        drop(held);
        let got = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok(true));
        waiter.join().expect("the waiter thread");
    }

    #[test]
    fn many_threads_never_exceed_the_ceiling() {
        let limit = Limit::new(Some(3));
        let peak = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (limit, peak) = (limit.clone(), peak.clone());
                thread::spawn(move || {
                    let rt = runtime::Runtime::new().expect("a runtime");
                    rt.block_on(async {
                        let mut done = 0;
                        while done < 500 {
                            let Some(permit) = limit.try_acquire() else {
                                limit.room().await;
                                continue;
                            };
                            peak.fetch_max(limit.open(), SeqCst);
                            runtime::yield_now().await;
                            drop(permit);
                            done += 1;
                        }
                    });
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a worker thread");
        }
        assert!(peak.load(SeqCst) <= 3, "peak {}", peak.load(SeqCst));
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn a_drain_is_woken_by_the_last_release_only() {
        let limit = Limit::new(None);
        let places: Vec<Permit> = (0..3).filter_map(|_| limit.try_acquire()).collect();
        let (tx, rx) = mpsc::channel();
        let drainer = {
            let limit = limit.clone();
            thread::spawn(move || {
                let rt = runtime::Runtime::new().expect("a runtime");
                rt.block_on(async {
                    limit.drained().await;
                    let _ = tx.send(limit.open());
                });
            })
        };
        let mut places = places;
        // Two of three given back: still waiting.
        places.truncate(1);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(places);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(0));
        drainer.join().expect("the drainer thread");
    }

    #[test]
    fn changed_completes_after_a_release_made_since() {
        let limit = Limit::new(Some(1));
        let held = limit.try_acquire().expect("the only place");
        let rt = runtime::Runtime::new().expect("a runtime");
        let changed = limit.changed();
        assert!(!limit.has_room());
        // Given back after `changed` was made and before it is polled.
        drop(held);
        rt.block_on(async {
            let waited = runtime::time::timeout(Duration::from_secs(10), changed).await;
            assert!(waited.is_ok(), "the release was missed");
        });
        assert!(limit.has_room());
    }

    #[test]
    fn loans_leave_room_for_connections_and_connections_see_loans() {
        // 20 places; loans keep 8 free for connections.
        let limit = Limit::new(Some(20));
        limit.set_lendable(20);
        assert_eq!(kept_for_connections(20), KEEP_AT_LEAST);
        let loans: Vec<Loan> = (0..30).filter_map(|_| limit.lend()).collect();
        assert_eq!(loans.len(), 12, "eight kept for connections");
        assert_eq!((limit.open(), limit.lent()), (0, 12));
        let kept: Vec<Permit> = (0..30).filter_map(|_| limit.try_acquire()).collect();
        assert_eq!(kept.len(), 8, "the loans hold the rest");
        assert!(!limit.has_room());
        assert!(limit.lend().is_none(), "no descriptor left for a pipe");
        assert!(!limit.loans_fit(), "connections need the room back");
        drop(loans);
        assert!(limit.has_room(), "loans given back make room");
        let more: Vec<Permit> = (0..30).filter_map(|_| limit.try_acquire()).collect();
        assert_eq!(more.len(), 12, "the ceiling still counts connections");
        drop((kept, more));
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn descriptors_over_the_ceiling_are_lent_first() {
        // maxconn 4 in a room of 6 pairs: two pipes whatever the load.
        let limit = Limit::new(Some(4));
        limit.set_lendable(6);
        let conns: Vec<Permit> = (0..4).filter_map(|_| limit.try_acquire()).collect();
        assert_eq!(conns.len(), 4);
        let loans: Vec<Loan> = (0..5).filter_map(|_| limit.lend()).collect();
        assert_eq!(loans.len(), 2);
        assert!(limit.loans_fit());
        drop((loans, conns));
        assert_eq!(limit.lent(), 0);
    }
}
