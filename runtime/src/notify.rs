//! `Notify`: wake every task waiting for an event, from any thread, with no
//! lock when nobody waits.
//!
//! # The problem
//!
//! Some events concern many tasks at once: "stop now" for every connection
//! of a worker, "a place is free again" for every task waiting at a
//! connection limit, "the last connection is gone" for a thread draining a
//! server. A channel delivers one value to one receiver; what is needed here
//! is a broadcast with no value, where the waiters come and go all the time
//! and the event side is cheap while nobody waits.
//!
//! # How it works
//!
//! ```text
//!   Notify
//!   ┌───────────────────────────────────────────────┐
//!   │ state:   generation (high bits) | WAITING (1)  │  one atomic word
//!   │ waiters: Mutex<[slot][slot][free][slot] ...>   │  waker + generation per slot
//!   └───────────────────────────────────────────────┘
//!
//!   notified()    reads the generation: the Notified completes once it moves
//!   notify_all()  generation += 1 (one fetch_add); WAITING clear? done, no lock.
//!                 Otherwise lock, take the wakers of the slots of older
//!                 generations, unlock, wake them.
//! ```
//!
//! A [`Notified`] completes when the generation it read at creation has
//! moved, that is, when some `notify_all` ran after it was created. It does
//! not have to be polled before that call: `let n = notify.notified(); if
//! done() { return } n.await` loses no wake even though `n` was not polled
//! before `done()` was checked (tokio's `notify_waiters` works the same way).
//!
//! Its first `Pending` poll takes the lock and puts its waker in a slot; it
//! keeps a clone, and a later poll with a waker that [`will_wake`] the same
//! task only reads the word, without the lock. A new waker (the future moved
//! to another task) takes the lock once to replace the stored one. Dropping
//! a `Notified` takes the lock only if it is still registered. Freed slots go
//! on a free list and are reused, so a steady state allocates nothing per
//! waiter. Wakers are woken, and replaced wakers dropped, outside the lock.
//!
//! [`will_wake`]: std::task::Waker::will_wake
//!
//! # Why no wake is lost
//!
//! Two races matter. The first is the caller's: it checks a condition, then
//! waits, while another thread makes the condition true and calls
//! `notify_all`:
//!
//! ```text
//!   waiter:    n = notified()   (load, Acquire)    then check the condition
//!   notifier:  make the condition true             then notify_all (fetch_add, Release)
//! ```
//!
//! If the waiter's load sees the notifier's increment (or anything after
//! it), the release/acquire pair makes everything the notifier did before
//! `notify_all` visible to the waiter: its check finds the condition true.
//! If it does not, the Notified holds the older generation, and that
//! `notify_all` completes it. Either the check sees the condition or the
//! wait sees the call.
//!
//! The second is inside: a first poll that registers while a `notify_all`
//! runs. Both are read-modify-writes of the one word, so they happen in one
//! order. The poll sets WAITING *under the lock* and reads, in the same
//! operation, whether the generation moved:
//!
//! - the increment came first: the poll sees the new generation and returns
//!   `Ready` without registering;
//! - the poll came first: the increment sees WAITING, so `notify_all` takes
//!   the lock (after the poll has released it) and finds the slot.
//!
//! WAITING is cleared only under the lock and only when no slot is taken, so
//! it is set whenever a slot is. An entry leaves the list only through its
//! own `Notified` (dropped or re-polled) or through a `notify_all` that
//! completes it, and such a call moves the generation first. That is why a
//! registered `Notified` that still reads its own generation knows, without
//! the lock, that its slot is still there; and why one that reads a newer
//! generation must leave its slot alone, since that call is taking it. A
//! slot is named by its index *and* the generation of its waiter: a slot
//! freed by a `notify_all` is only ever reused by a waiter created after
//! that call, with a newer generation, so a stale name never matches.
//!
//! `loom_*` tests below check both races; `runtime/tests/notify.rs` checks
//! the same on real threads.

use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{Mutex, lock};
use crate::waker;

/// Bit 0 of the state: some slot of the list may be taken.
const WAITING: usize = 1;
/// What `notify_all` adds to the state: the generation is the rest of the
/// word (`state & !WAITING`), so it never touches the WAITING bit.
const ONE_CALL: usize = 2;
/// How many wakers `notify_all` takes per lock: they wait on the stack, so
/// waking a thousand waiters allocates nothing.
const BATCH: usize = 32;

/// Wakes every [`Notified`] created before a call to [`Notify::notify_all`].
///
/// Share it between threads in an `Arc` (or a `static`: [`Notify::new`] is
/// `const`).
///
/// # Examples
///
/// One "stop" for many tasks. Each `Notified` is created before the tasks
/// run, and one `notify_all` completes all three, although none of them
/// had been polled yet: a `Notified` waits for a call made after its
/// creation, not after its first poll.
///
/// ```
/// use runtime::{Runtime, notify::Notify, spawn};
///
/// static STOP: Notify = Notify::new();
///
/// let rt = Runtime::new()?;
/// let stopped = rt.block_on(async {
///     let workers: Vec<_> = (0..3).map(|i| {
///         let stop = STOP.notified();
///         spawn(async move {
///             stop.await;
///             i
///         })
///     }).collect();
///     STOP.notify_all();
///     let mut stopped = Vec::new();
///     for worker in workers {
///         stopped.push(worker.await.unwrap());
///     }
///     stopped
/// });
/// assert_eq!(stopped, [0, 1, 2]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Notify {
    state: AtomicUsize,
    waiters: Mutex<Waiters>,
}

/// One registered `Notified`: its task's waker and the generation it waits
/// to see pass.
struct Waiter {
    waker: Waker,
    generation: usize,
}

/// The slots, with a free list: a slot given up by one waiter is the next
/// one's, so the vectors only grow to the most waiters seen at once.
struct Waiters {
    slots: Vec<Option<Waiter>>,
    free: Vec<usize>,
    taken: usize,
}

impl Waiters {
    const fn new() -> Waiters {
        Waiters {
            slots: Vec::new(),
            free: Vec::new(),
            taken: 0,
        }
    }

    fn insert(&mut self, waiter: Waiter) -> usize {
        self.taken += 1;
        match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(waiter);
                index
            }
            None => {
                self.slots.push(Some(waiter));
                self.slots.len() - 1
            }
        }
    }

    /// The slot `index`, if it still holds the waiter of `generation`.
    fn get_mut(&mut self, index: usize, generation: usize) -> Option<&mut Waiter> {
        let slot = self.slots.get_mut(index)?.as_mut()?;
        (slot.generation == generation).then_some(slot)
    }

    fn remove(&mut self, index: usize, generation: usize) -> Option<Waker> {
        self.get_mut(index, generation)?;
        self.take(index)
    }

    fn take(&mut self, index: usize) -> Option<Waker> {
        let waiter = self.slots[index].take()?;
        self.free.push(index);
        self.taken -= 1;
        Some(waiter.waker)
    }

    /// Moves into `batch` the wakers of waiters of generation `due` or
    /// older, scanning from `*from`. Returns true if the batch filled up
    /// before the end of the slots (call again with the same `from`).
    fn take_due(&mut self, due: usize, from: &mut usize, batch: &mut [Option<Waker>]) -> bool {
        let mut filled = 0;
        while *from < self.slots.len() {
            if filled == batch.len() {
                return true;
            }
            let index = *from;
            *from += 1;
            // Waiters created after this call (a newer generation) stay.
            // The difference wraps: "older" means less than half the range
            // behind, and a slot is never more than a few calls behind,
            // since the first call after it takes it.
            let older = matches!(&self.slots[index], Some(w) if due.wrapping_sub(w.generation) <= usize::MAX / 2);
            if older {
                batch[filled] = self.take(index);
                filled += 1;
            }
        }
        false
    }
}

impl Notify {
    /// A `Notify` nobody waits on.
    #[cfg(not(loom))]
    pub const fn new() -> Notify {
        Notify {
            state: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::new()),
        }
    }

    /// A `Notify` nobody waits on (loom's types have no `const` constructor).
    #[cfg(loom)]
    pub fn new() -> Notify {
        Notify {
            state: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::new()),
        }
    }

    /// A future that completes once [`notify_all`](Notify::notify_all) is
    /// called after this point, whether or not the future was polled before
    /// the call. Create it *before* checking the condition it waits for.
    ///
    /// # Examples
    ///
    /// Waiting for a condition another thread makes true: whichever comes
    /// first, the check sees the flag or the wait sees the `notify_all`, so
    /// the loop turns at most twice.
    ///
    /// ```
    /// use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
    /// use runtime::{Runtime, notify::Notify};
    ///
    /// let notify = Arc::new(Notify::new());
    /// let done = Arc::new(AtomicBool::new(false));
    /// let (n, d) = (notify.clone(), done.clone());
    /// let setter = std::thread::spawn(move || {
    ///     d.store(true, Ordering::Relaxed);
    ///     n.notify_all();
    /// });
    /// Runtime::new()?.block_on(async {
    ///     loop {
    ///         let notified = notify.notified();
    ///         if done.load(Ordering::Relaxed) {
    ///             break;
    ///         }
    ///         notified.await; // a notify_all after `notified()` wakes us
    ///     }
    /// });
    /// setter.join().unwrap();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            // Acquire: see the module docs, "Why no wake is lost".
            generation: self.state.load(Ordering::Acquire) & !WAITING,
            slot: None,
            waker: None,
        }
    }

    /// Completes every [`Notified`] created before this call.
    ///
    /// With nobody registered it is one atomic read-modify-write and takes
    /// no lock. Otherwise it takes the lock once per 32 waiters and wakes
    /// them outside it.
    pub fn notify_all(&self) {
        // Release: what the caller did before this call is visible to every
        // task that sees the new generation.
        let previous = self.state.fetch_add(ONE_CALL, Ordering::Release);
        if previous & WAITING != 0 {
            self.wake_waiters(previous & !WAITING);
        }
    }

    /// Wakes the waiters of generation `due` or older, a batch per lock.
    fn wake_waiters(&self, due: usize) {
        let mut from = 0;
        loop {
            let mut batch: [Option<Waker>; BATCH] = Default::default();
            let more = {
                let mut waiters = lock(&self.waiters);
                let more = waiters.take_due(due, &mut from, &mut batch);
                self.clear_waiting_if_empty(&waiters);
                more
            };
            for waker in batch.into_iter().flatten() {
                waker.wake();
            }
            if !more {
                return;
            }
        }
    }

    /// Lets `notify_all` skip the lock again once no slot is taken. Called
    /// with the lock held (`waiters` is its guard), which is what keeps
    /// WAITING set whenever a slot is.
    fn clear_waiting_if_empty(&self, waiters: &Waiters) {
        if waiters.taken == 0 {
            // Relaxed: the bit's meaning is carried by the lock and by the
            // order of read-modify-writes on the word, not by this store.
            self.state.fetch_and(!WAITING, Ordering::Relaxed);
        }
    }
}

impl Default for Notify {
    fn default() -> Notify {
        Notify::new()
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.load(Ordering::Relaxed);
        f.debug_struct("Notify")
            .field("generation", &(state >> 1))
            .field("waiting", &(state & WAITING != 0))
            .finish()
    }
}

/// The future of [`Notify::notified`]: ready once `notify_all` has been
/// called after it was created.
#[must_use = "futures do nothing unless awaited"]
pub struct Notified<'a> {
    notify: &'a Notify,
    /// The generation at creation: any other value means a `notify_all` came.
    generation: usize,
    /// Our slot in the waiter list, while registered.
    slot: Option<usize>,
    /// A clone of the waker in the slot, to tell without the lock whether a
    /// poll brings a new one.
    waker: Option<Waker>,
}

impl Notified<'_> {
    fn notified(&self) -> bool {
        // Acquire: pairs with `notify_all`'s Release (module docs).
        self.notify.state.load(Ordering::Acquire) & !WAITING != self.generation
    }

    /// First `Pending` poll: take a slot, unless a `notify_all` came first.
    fn register(&mut self, waker: &Waker) -> Poll<()> {
        let mut waiters = lock(&self.notify.waiters);
        // Set WAITING and learn, in the same step, whether the generation
        // moved (the module docs' second race).
        let state = self.notify.state.fetch_or(WAITING, Ordering::Acquire);
        if state & !WAITING != self.generation {
            self.notify.clear_waiting_if_empty(&waiters);
            return Poll::Ready(());
        }
        let generation = self.generation;
        let waker = waker.clone();
        self.slot = Some(waiters.insert(Waiter { waker, generation }));
        Poll::Pending
    }

    /// A poll with a new waker: put it in our slot, unless a `notify_all`
    /// has already taken the slot (then that call was our notification).
    fn replace_waker(&mut self, index: usize, waker: &Waker) -> Poll<()> {
        let mut waiters = lock(&self.notify.waiters);
        let Some(waiter) = waiters.get_mut(index, self.generation) else {
            self.slot = None;
            return Poll::Ready(());
        };
        let old = mem::replace(&mut waiter.waker, waker.clone());
        drop(waiters);
        drop(old); // outside the lock: dropping a waker may run its owner's code
        Poll::Pending
    }
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.notified() {
            // The call that moved the generation takes our slot, if we have
            // one: leave it alone (see the module docs).
            this.slot = None;
            return Poll::Ready(());
        }
        let changed = waker::store(&mut this.waker, cx.waker());
        match this.slot {
            None => this.register(cx.waker()),
            // Registered with a waker of this very task: nothing to do, no lock.
            Some(_) if !changed => Poll::Pending,
            Some(index) => this.replace_waker(index, cx.waker()),
        }
    }
}

impl Drop for Notified<'_> {
    fn drop(&mut self) {
        let Some(index) = self.slot else {
            return;
        };
        if self.notified() {
            return; // a notify_all is taking (or took) our slot
        }
        let removed = {
            let mut waiters = lock(&self.notify.waiters);
            // The name still misses if a notify_all took the slot since the
            // check above (and another waiter reused it).
            let removed = waiters.remove(index, self.generation);
            self.notify.clear_waiting_if_empty(&waiters);
            removed
        };
        drop(removed); // outside the lock
    }
}

impl fmt::Debug for Notified<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notified")
            .field("generation", &(self.generation >> 1))
            .field("registered", &self.slot.is_some())
            .finish()
    }
}

#[cfg(test)]
impl Notify {
    /// How many slots are taken, and how many exist (taken or free).
    fn slots(&self) -> (usize, usize) {
        let waiters = lock(&self.waiters);
        (waiters.taken, waiters.slots.len())
    }

    fn waiting_bit(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WAITING != 0
    }
}

// Real threads and std's `Arc` (which `std::task::Wake` needs): outside loom.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::{counting_waker, wakes, with_watchdog};
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    fn poll(n: &mut Notified<'_>, waker: &Waker) -> Poll<()> {
        Pin::new(n).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn notify_is_send_sync_and_notified_is_unpin_and_send() {
        fn send_sync<T: Send + Sync>() {}
        fn unpin_send<T: Unpin + Send>() {}
        send_sync::<Notify>();
        unpin_send::<Notified<'static>>();
        static GLOBAL: Notify = Notify::new(); // const fn
        GLOBAL.notify_all();
        assert!(format!("{:?}", Notify::default()).starts_with("Notify"));
    }

    #[test]
    fn a_notified_created_before_the_call_completes_even_if_never_polled() {
        let notify = Notify::new();
        let (counter, waker) = counting_waker();
        let mut before = notify.notified();
        notify.notify_all();
        let mut after = notify.notified();
        assert_eq!(poll(&mut before, &waker), Poll::Ready(()));
        assert_eq!(poll(&mut after, &waker), Poll::Pending, "created after");
        assert_eq!(wakes(&counter), 0);
        notify.notify_all();
        assert_eq!(wakes(&counter), 1, "the registered one is woken");
        assert_eq!(poll(&mut after, &waker), Poll::Ready(()));
        assert_eq!(poll(&mut after, &waker), Poll::Ready(()), "stays ready");
    }

    #[test]
    fn every_registered_waiter_is_woken_once_and_its_slot_freed() {
        let notify = Notify::new();
        // More than one batch, so the call locks and wakes several times.
        let wakers: Vec<_> = (0..3 * BATCH + 5).map(|_| counting_waker()).collect();
        let mut waiting: Vec<_> = wakers.iter().map(|_| notify.notified()).collect();
        for (n, (_, w)) in waiting.iter_mut().zip(&wakers) {
            assert_eq!(poll(n, w), Poll::Pending);
        }
        assert_eq!(notify.slots().0, wakers.len());
        notify.notify_all();
        assert!(wakers.iter().all(|(c, _)| wakes(c) == 1));
        assert_eq!(notify.slots().0, 0);
        assert!(
            !notify.waiting_bit(),
            "nobody waits: the next call is lock-free"
        );
        for (n, (_, w)) in waiting.iter_mut().zip(&wakers) {
            assert_eq!(poll(n, w), Poll::Ready(()));
        }
        notify.notify_all();
        assert!(wakers.iter().all(|(c, _)| wakes(c) == 1), "woken once");
    }

    /// Runs `f` on another thread while this one holds the waiter lock:
    /// true if `f` finished, false if it was still blocked after a second
    /// (then it finishes once the lock is released).
    fn finishes_while_locked(notify: &Notify, f: impl FnOnce() + Send) -> bool {
        thread::scope(|s| {
            let guard = lock(&notify.waiters);
            let (tx, rx) = mpsc::channel();
            s.spawn(move || {
                f();
                let _ = tx.send(());
            });
            let finished = rx.recv_timeout(Duration::from_secs(1)).is_ok();
            drop(guard);
            finished
        })
    }

    #[test]
    fn notify_all_takes_no_lock_when_nobody_waits() {
        let notify = Notify::new();
        assert!(finishes_while_locked(&notify, || notify.notify_all()));
        // Nor once the last waiter has left.
        let (_, waker) = counting_waker();
        let mut n = notify.notified();
        assert_eq!(poll(&mut n, &waker), Poll::Pending);
        drop(n);
        assert!(finishes_while_locked(&notify, || notify.notify_all()));
        // But it must lock while someone waits.
        let mut n = notify.notified();
        assert_eq!(poll(&mut n, &waker), Poll::Pending);
        assert!(!finishes_while_locked(&notify, || notify.notify_all()));
        assert_eq!(poll(&mut n, &waker), Poll::Ready(()));
    }

    #[test]
    fn a_repoll_with_the_same_waker_takes_no_lock_a_new_waker_does() {
        let notify = Notify::new();
        let (old_count, old) = counting_waker();
        let (new_count, new) = counting_waker();
        let mut n = notify.notified();
        assert_eq!(poll(&mut n, &old), Poll::Pending);
        let same = old.clone();
        assert!(finishes_while_locked(&notify, || {
            assert_eq!(poll(&mut n, &same), Poll::Pending);
        }));
        assert!(!finishes_while_locked(&notify, || {
            assert_eq!(poll(&mut n, &new), Poll::Pending);
        }));
        notify.notify_all();
        assert_eq!((wakes(&old_count), wakes(&new_count)), (0, 1));
    }

    #[test]
    fn dropping_leaves_nothing_and_slots_are_reused() {
        let notify = Notify::new();
        let (_, waker) = counting_waker();
        for _ in 0..3 {
            let mut waiting: Vec<_> = (0..10).map(|_| notify.notified()).collect();
            for n in &mut waiting {
                assert_eq!(poll(n, &waker), Poll::Pending);
            }
            drop(waiting);
            assert_eq!(notify.slots(), (0, 10), "ten slots, all free again");
            assert!(!notify.waiting_bit());
        }
        // A dropped, never-polled or already-notified Notified takes no lock.
        let unpolled = notify.notified();
        assert!(finishes_while_locked(&notify, move || drop(unpolled)));
        let mut n = notify.notified();
        assert_eq!(poll(&mut n, &waker), Poll::Pending);
        notify.notify_all();
        assert!(finishes_while_locked(&notify, move || drop(n)));
    }

    #[test]
    fn check_then_wait_on_another_thread_loses_no_wake() {
        with_watchdog(10, || {
            let notify = Arc::new(Notify::new());
            let round = Arc::new(AtomicUsize::new(0));
            let waiter = {
                let (notify, round) = (notify.clone(), round.clone());
                thread::spawn(move || {
                    for expected in 1..=2_000 {
                        crate::test_support::block_on(async {
                            loop {
                                let n = notify.notified();
                                if round.load(Ordering::Relaxed) >= expected {
                                    return;
                                }
                                n.await;
                            }
                        });
                    }
                })
            };
            for _ in 0..2_000 {
                round.fetch_add(1, Ordering::Relaxed);
                notify.notify_all();
                thread::yield_now();
            }
            waiter.join().expect("the waiter thread");
        });
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the two races of the module docs, run by
    //! `scripts/loom.sh`.
    use super::*;
    use crate::sync::atomic::AtomicBool;
    use crate::sync::{Arc, thread};
    use std::task::Wake;

    /// A waker that only raises a flag, so loom sees every access.
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag_waker() -> (std::sync::Arc<Flag>, Waker) {
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        (flag.clone(), Waker::from(flag))
    }

    fn poll(n: &mut Notified<'_>, waker: &Waker) -> Poll<()> {
        Pin::new(n).poll(&mut Context::from_waker(waker))
    }

    /// Once the notifying thread is joined: a first poll that said Pending
    /// must have been woken, and the next poll must be Ready.
    fn completes(n: &mut Notified<'_>, first: Poll<()>, flag: &Flag, waker: &Waker) {
        if first.is_pending() {
            assert!(
                flag.0.load(Ordering::SeqCst),
                "lost wake: Pending, never woken"
            );
            assert_eq!(poll(n, waker), Poll::Ready(()), "woken, yet still Pending");
        }
    }

    /// For a Notified first polled (`first`, with `waker`) around a call
    /// that has now returned: if it was created after that call, the call
    /// must not have completed it, and one more call must, with a wake. A
    /// slot wrongly taken or freed shows up here as a lost wake.
    fn one_more_call_completes(
        notify: &Notify,
        n: &mut Notified<'_>,
        first: Poll<()>,
        flag: &Flag,
        waker: &Waker,
    ) {
        let created_after = n.generation == notify.state.load(Ordering::SeqCst) & !WAITING;
        let mut state = first;
        if state.is_pending() {
            flag.0.store(false, Ordering::SeqCst); // forget what that call did
            state = poll(n, waker); // same waker: no lock, trusts its slot
            if created_after {
                assert!(state.is_pending(), "completed by a call made before it");
            }
        }
        notify.notify_all();
        completes(n, state, flag, waker);
    }

    #[test]
    fn loom_notify_all_racing_a_first_poll_never_loses_the_wake() {
        loom::model(|| {
            let notify = Arc::new(Notify::new());
            // One waiter registered before the call, so that it takes the lock.
            let (early_flag, early_waker) = flag_waker();
            let mut early = notify.notified();
            assert_eq!(poll(&mut early, &early_waker), Poll::Pending);
            let other = notify.clone();
            let notifier = thread::spawn(move || other.notify_all());
            // Created before or after the call, first polled during it.
            let (flag, waker) = flag_waker();
            let mut racing = notify.notified();
            let first = poll(&mut racing, &waker);
            notifier.join().expect("notifier thread");
            completes(&mut early, Poll::Pending, &early_flag, &early_waker);
            one_more_call_completes(&notify, &mut racing, first, &flag, &waker);
            drop((early, racing));
            assert_eq!(notify.slots().0, 0, "a slot leaked");
            assert!(!notify.waiting_bit(), "WAITING left set with no waiter");
        });
    }

    #[test]
    fn loom_a_notified_dropped_while_notify_all_runs_leaves_the_list_sound() {
        loom::model(|| {
            let notify = Arc::new(Notify::new());
            let other = notify.clone();
            // Registers, then leaves while the main thread's call runs.
            let leaver = thread::spawn(move || {
                let (_, waker) = flag_waker();
                let mut leaving = other.notified();
                let _ = poll(&mut leaving, &waker);
            });
            notify.notify_all();
            // May take the slot the call freed while `leaving` still names it.
            let (flag, waker) = flag_waker();
            let mut next = notify.notified();
            let first = poll(&mut next, &waker);
            leaver.join().expect("leaver thread");
            one_more_call_completes(&notify, &mut next, first, &flag, &waker);
            drop(next);
            assert_eq!(notify.slots().0, 0, "a slot leaked");
            assert!(!notify.waiting_bit(), "WAITING left set with no waiter");
        });
    }

    #[test]
    fn loom_check_then_wait_across_threads_sees_the_condition_or_the_call() {
        loom::model(|| {
            let notify = Arc::new(Notify::new());
            let done = Arc::new(AtomicBool::new(false));
            let notifier = {
                let (notify, done) = (notify.clone(), done.clone());
                // Relaxed on purpose: the Notify alone must order it.
                thread::spawn(move || {
                    done.store(true, Ordering::Relaxed);
                    notify.notify_all();
                })
            };
            let mut n = notify.notified();
            if !done.load(Ordering::Relaxed) {
                let (flag, waker) = flag_waker();
                let first = poll(&mut n, &waker);
                if first.is_ready() {
                    // Ready means the call was seen, so what came before it must be too.
                    assert!(
                        done.load(Ordering::Relaxed),
                        "Ready, yet the condition is unseen"
                    );
                }
                notifier.join().expect("notifier thread");
                completes(&mut n, first, &flag, &waker);
            } else {
                notifier.join().expect("notifier thread");
            }
        });
    }
}
