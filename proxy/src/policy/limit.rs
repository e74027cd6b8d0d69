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

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

use runtime::notify::{Notified, Notify};

/// A shared count of open connections with an optional ceiling.
#[derive(Debug)]
pub struct Limit {
    /// The ceiling; `u32::MAX` when there is none. Atomic only so that a
    /// reload can move it ([`Limit::set_max`]).
    max: AtomicU32,
    /// Places taken now.
    open: AtomicU32,
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

impl Limit {
    /// A limit of `max` places (`None`: no ceiling, only counting).
    pub fn new(max: Option<u32>) -> Arc<Limit> {
        Arc::new(Limit {
            max: AtomicU32::new(max.unwrap_or(u32::MAX)),
            open: AtomicU32::new(0),
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

    /// Places taken now.
    pub fn open(&self) -> u32 {
        self.open.load(SeqCst)
    }

    /// Whether a place is free now (it may be gone by the time it is taken).
    pub fn has_room(&self) -> bool {
        self.open() < self.max.load(SeqCst)
    }

    /// Takes a place if one is free.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        self.open
            .fetch_update(SeqCst, SeqCst, |open| {
                (open < self.max.load(SeqCst)).then_some(open + 1)
            })
            .ok()
            .map(|_| Permit {
                limit: self.clone(),
            })
    }

    /// Takes a place if one is free below `cap` as well as the ceiling (a
    /// backend in its slowstart, whose `maxconn` grows back: health.rs).
    pub fn try_acquire_under(self: &Arc<Self>, cap: Option<u32>) -> Option<Permit> {
        let cap = cap.unwrap_or(u32::MAX);
        self.open
            .fetch_update(SeqCst, SeqCst, |open| {
                (open < self.max.load(SeqCst).min(cap)).then_some(open + 1)
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
        self.open.fetch_add(1, SeqCst);
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
        if self.open.fetch_sub(1, SeqCst) == 1 {
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
}
