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
//!   spawn(connection) ──────▶ └──────────  drop(permit): open -= 1, wake waiters
//! ```
//!
//! ## Waiting without a lock on the busy path
//!
//! Below the ceiling nobody waits, and taking or giving back a place touches
//! only the atomic count. A waker list (behind a mutex) is used only at the
//! ceiling. The one subtle point is the race between a waiter that finds no
//! room and a permit given back at that moment. Both sides use sequentially
//! consistent operations, in this order:
//!
//! ```text
//!   waiter:   push its waker; set `waiting`;     then load `open`
//!   releaser: decrement `open`;                  then load `waiting`
//! ```
//!
//! Whichever goes second sees the other's write: either the waiter sees the
//! room, or the releaser sees the flag and wakes the waiter. No wake-up is
//! lost, and no release takes the lock unless someone is waiting.
//!
//! Waking is for *all* waiters: there may be one per event loop (each
//! paused accept loop) and one per queued connection, and whoever wakes
//! first takes the place; the others find none and wait again. At the
//! ceiling that is a handful of wake-ups per close, a price paid only there.

use std::future::{Future, poll_fn};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// A shared count of open connections with an optional ceiling.
#[derive(Debug)]
pub struct Limit {
    /// The ceiling; `u32::MAX` when there is none. Atomic only so that a
    /// reload can move it ([`Limit::set_max`]).
    max: AtomicU32,
    /// Places taken now.
    open: AtomicU32,
    /// Someone is (or may be) in `waiters`: a release must wake them.
    waiting: AtomicBool,
    waiters: Mutex<Vec<Waker>>,
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
            waiting: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
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
        self.wake_waiters();
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

    /// Ready once a place is free (without taking it); until then the
    /// task's waker is kept and woken by the next release.
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.has_room() {
            return Poll::Ready(());
        }
        {
            let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            self.waiting.store(true, SeqCst);
        }
        // Checked again after the flag is set: a release in between either
        // saw the flag (and will wake us) or left room we see now.
        if self.has_room() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Waits until a place is free (without taking it).
    pub fn room(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(|cx| self.poll_room(cx))
    }

    fn release(&self) {
        self.open.fetch_sub(1, SeqCst);
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        if self.waiting.load(SeqCst) {
            let waiters = {
                let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
                self.waiting.store(false, SeqCst);
                std::mem::take(&mut *waiters)
            };
            // Woken outside the lock: a wake may run code of its own.
            for waker in waiters {
                waker.wake();
            }
        }
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
}
