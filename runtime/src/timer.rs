//! The timer store: every pending `sleep` of one runtime, nearest deadline
//! first, as an *indexed binary heap* (Sedgewick's `IndexMinPQ`).
//!
//! A timer is a deadline plus the waker of the task that waits for it. The
//! timers live in a table of slots, and a timer's key is its slot's number.
//! The heap is a list of slot numbers ordered by deadline: its root is the
//! nearest one, which is what the driver needs to bound its `epoll_wait`.
//! Each slot also records where its number sits in the heap (`place`), so a
//! cancelled timer (its `Sleep` dropped) is taken out of the middle of the
//! heap without a search.
//!
//! ```text
//!   slots: key  at (ns)   seq  place  waker          heap: [#0, #2, #1]
//!          #0   1_000_000   4    0    task 9                  #0
//!          #1   5_250_000   1    2    task 3               #2    #1
//!          #2   1_000_000   7    1    task 2         (a parent is due no later than its children)
//! ```
//!
//! Deadlines are nanoseconds since the store was made, a `u64` (584 years)
//! rather than an `Instant` (16 bytes); `seq`, the order of insertion,
//! settles ties, so timers with one deadline fire in the order they were
//! set. A pending timer costs 36 bytes: its 32-byte slot and its 4-byte
//! place in the heap. Both tables grow by an eighth at a time, not by
//! doubling, so at most an eighth of them is room not yet used; they keep
//! the size of the busiest moment.
//!
//! A timer that fired keeps its slot, without its waker, until its `Sleep`
//! gives the key back ([`TimerStore::remove`]): until then `renew` with
//! that key says "fired", and no newer timer can be handed the slot, so a
//! key never reaches a timer that is not its own.
//!
//! Insert, remove and firing are O(log n). A hashed timing wheel (tokio's)
//! is O(1) and pays off with hundreds of thousands of timers; a heap is the
//! version a reader can check in a few minutes.
//!
//! This file knows nothing about epoll or tasks: the driver asks it for the
//! next deadline and tells it what time it is.

use std::task::Waker;
use std::time::{Duration, Instant};

use crate::waker;

/// Names one timer in the store: its slot. Not `Clone`: the one holder
/// gives it back once, with [`TimerStore::remove`], and only then can the
/// slot go to another timer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TimerKey(u32);

/// One slot of the store: a pending timer, or one that fired and whose key
/// has not come back yet, or a free slot (these two without a waker).
#[derive(Debug)]
struct TimerSlot {
    /// Due this many nanoseconds after the store's `start`.
    at: u64,
    /// Order of insertion, for ties (it wraps after 2^32 insertions; two
    /// timers due the same nanosecond fire together either way).
    seq: u32,
    /// Where its key sits in `heap`, while pending.
    place: u32,
    /// The task to wake: `Some` exactly while the timer is pending.
    waker: Option<Waker>,
}

/// All pending timers of one runtime.
#[derive(Debug)]
pub(crate) struct TimerStore {
    /// Time 0 of the deadlines.
    start: Instant,
    slots: Vec<TimerSlot>,
    /// Slots given back, reused last-in first-out.
    free: Vec<u32>,
    /// The pending timers' keys, a binary min-heap by `(at, seq)`: the
    /// children of `heap[i]` are `heap[2i + 1]` and `heap[2i + 2]`.
    heap: Vec<u32>,
    next_seq: u32,
}

impl TimerStore {
    pub(crate) fn new() -> TimerStore {
        TimerStore {
            start: Instant::now(),
            slots: Vec::new(),
            free: Vec::new(),
            heap: Vec::new(),
            next_seq: 0,
        }
    }

    /// Adds a timer; `waker` is woken once `deadline` has passed.
    pub(crate) fn insert(&mut self, deadline: Instant, waker: Waker) -> TimerKey {
        let timer = TimerSlot {
            at: self.ticks(deadline),
            seq: self.next_seq,
            place: self.heap.len() as u32,
            waker: Some(waker),
        };
        self.next_seq = self.next_seq.wrapping_add(1);
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key as usize] = timer;
                key
            }
            None => {
                reserve_one(&mut self.slots);
                self.slots.push(timer);
                (self.slots.len() - 1) as u32
            }
        };
        reserve_one(&mut self.heap);
        self.heap.push(key);
        self.sift_up(self.heap.len() - 1);
        TimerKey(key)
    }

    /// If the timer is still waiting, makes `waker` the one it wakes (a
    /// future may have moved to another task) and says so; false once it
    /// fired. One lookup for both questions: a relay asks them each time it
    /// is woken.
    pub(crate) fn renew(&mut self, key: &TimerKey, waker: &Waker) -> bool {
        match self.slots.get_mut(key.0 as usize) {
            Some(TimerSlot {
                waker: stored @ Some(_),
                ..
            }) => {
                waker::store(stored, waker);
                true
            }
            _ => false,
        }
    }

    /// Gives a key back: the timer is no longer wanted (its `Sleep` was
    /// dropped or reset) or it fired and its `Sleep` has seen so. Its slot
    /// goes to the next timer inserted.
    pub(crate) fn remove(&mut self, key: TimerKey) {
        let Some(timer) = self.slots.get_mut(key.0 as usize) else {
            return;
        };
        if timer.waker.take().is_some() {
            let place = timer.place as usize;
            self.unlink(place);
        }
        self.free.push(key.0);
    }

    /// The nearest deadline, if any timer is pending (None also for one more
    /// than 584 years away, which a wait without limit serves as well).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let &first = self.heap.first()?;
        let at = self.slots[first as usize].at;
        self.start.checked_add(Duration::from_nanos(at))
    }

    /// Takes every timer due at `now` off the heap and hands their wakers to
    /// `wakers`, earliest first. Their slots wait for their keys to come back.
    pub(crate) fn fire_due(&mut self, now: Instant, wakers: &mut Vec<Waker>) -> usize {
        let now = self.ticks(now);
        let mut fired = 0;
        while let Some(&first) = self.heap.first() {
            let timer = &mut self.slots[first as usize];
            if timer.at > now {
                break;
            }
            wakers.extend(timer.waker.take());
            self.unlink(0);
            fired += 1;
        }
        fired
    }

    /// How many timers are pending.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// `t` as nanoseconds since `start` (0 for earlier, the largest `u64`
    /// for more than 584 years later).
    fn ticks(&self, t: Instant) -> u64 {
        let since = t.saturating_duration_since(self.start).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX)
    }

    /// Takes the key at `heap[place]` out of the heap: the last key fills
    /// the hole, then moves up or down to where its deadline belongs.
    fn unlink(&mut self, place: usize) {
        let last = self.heap.len() - 1;
        self.swap(place, last);
        self.heap.pop();
        if place < last {
            self.sift_down(place);
            self.sift_up(place);
        }
    }

    /// Is the timer in `heap[a]` due before the one in `heap[b]`?
    fn before(&self, a: usize, b: usize) -> bool {
        let (a, b) = (
            &self.slots[self.heap[a] as usize],
            &self.slots[self.heap[b] as usize],
        );
        (a.at, a.seq) < (b.at, b.seq)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.slots[self.heap[a] as usize].place = a as u32;
        self.slots[self.heap[b] as usize].place = b as u32;
    }

    fn sift_up(&mut self, mut place: usize) {
        while place > 0 {
            let parent = (place - 1) / 2;
            if !self.before(place, parent) {
                break;
            }
            self.swap(place, parent);
            place = parent;
        }
    }

    fn sift_down(&mut self, mut place: usize) {
        loop {
            let left = 2 * place + 1;
            if left >= self.heap.len() {
                break;
            }
            let right = left + 1;
            let child = if right < self.heap.len() && self.before(right, left) {
                right
            } else {
                left
            };
            if !self.before(child, place) {
                break;
            }
            self.swap(place, child);
            place = child;
        }
    }
}

/// Makes room for one more element, growing by an eighth (at least 16)
/// rather than doubling: a store of thousands of timers then holds at most
/// an eighth more room than it uses. Still amortized O(1) per insertion.
fn reserve_one<T>(table: &mut Vec<T>) {
    if table.len() == table.capacity() {
        table.reserve_exact(table.len() / 8 + 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::task::Wake;
    use std::time::Duration;

    /// A waker that appends its label to a shared log when woken.
    struct Labelled(u32, Arc<Mutex<Vec<u32>>>);
    impl Wake for Labelled {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    fn labelled(label: u32, log: &Arc<Mutex<Vec<u32>>>) -> Waker {
        Waker::from(Arc::new(Labelled(label, log.clone())))
    }

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::new();
        let t0 = Instant::now();
        for (label, ms) in [(3, 30), (1, 10), (2, 20), (4, 30)] {
            store.insert(t0 + Duration::from_millis(ms), labelled(label, &log));
        }
        assert_eq!(store.next_deadline(), Some(t0 + Duration::from_millis(10)));
        let mut wakers = Vec::new();
        assert_eq!(
            store.fire_due(t0 + Duration::from_millis(5), &mut wakers),
            0
        );
        assert_eq!(
            store.fire_due(t0 + Duration::from_millis(30), &mut wakers),
            4
        );
        wakers.into_iter().for_each(Waker::wake);
        assert_eq!(
            *log.lock().unwrap(),
            vec![1, 2, 3, 4],
            "same deadline: insertion order"
        );
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn a_slot_is_32_bytes_and_an_optional_waker_costs_no_space() {
        // What the module docs and the comment on `TimerSlot::waker` claim.
        assert_eq!(
            std::mem::size_of::<Option<Waker>>(),
            std::mem::size_of::<Waker>()
        );
        assert_eq!(std::mem::size_of::<TimerSlot>(), 32);
        assert_eq!(
            std::mem::size_of::<Option<(std::rc::Rc<()>, TimerKey)>>(),
            16
        );
    }

    #[test]
    fn a_removed_timer_never_fires() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::new();
        let t0 = Instant::now();
        let waker = labelled(1, &log);
        let key = store.insert(t0, waker.clone());
        assert!(store.renew(&key, &waker), "pending until removed");
        store.remove(key);
        assert_eq!(store.len(), 0);
        let mut wakers = Vec::new();
        store.fire_due(t0 + Duration::from_secs(1), &mut wakers);
        assert!(wakers.is_empty());
        assert_eq!(store.next_deadline(), None);
    }

    #[test]
    fn a_fired_timers_slot_waits_for_its_key_so_the_key_never_reaches_another_timer() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::new();
        let t0 = Instant::now();
        let a = store.insert(t0, labelled(1, &log));
        let mut wakers = Vec::new();
        assert_eq!(store.fire_due(t0, &mut wakers), 1);
        // Same deadline, inserted before `a`'s holder has looked: another slot.
        let b = store.insert(t0, labelled(2, &log));
        assert_ne!(a, b);
        assert!(!store.renew(&a, &labelled(1, &log)), "a fired");
        assert!(store.renew(&b, &labelled(2, &log)), "b is pending");
        let a_slot = a.0;
        store.remove(a);
        let c = store.insert(t0, labelled(3, &log));
        assert_eq!(c.0, a_slot, "given back, the slot is reused");
        assert_eq!(store.len(), 2);
        store.fire_due(t0, &mut wakers);
        wakers.into_iter().for_each(Waker::wake);
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn removals_from_anywhere_keep_the_rest_in_deadline_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::new();
        let t0 = Instant::now();
        // 500 deadlines in a scrambled order (a multiplicative step mod a
        // prime), every third removed again, the rest must fire sorted.
        let mut keys = Vec::new();
        for i in 0..500u32 {
            let ms = u64::from(i * 211 % 503);
            let key = store.insert(t0 + Duration::from_millis(ms), labelled(i, &log));
            keys.push((i, ms, key));
        }
        let mut expected = Vec::new();
        for (i, ms, key) in keys {
            if i % 3 == 0 {
                store.remove(key);
            } else {
                expected.push((ms, i));
            }
        }
        assert_eq!(store.len(), expected.len());
        expected.sort();
        let mut wakers = Vec::new();
        store.fire_due(t0 + Duration::from_secs(1), &mut wakers);
        wakers.into_iter().for_each(Waker::wake);
        let order: Vec<u32> = expected.into_iter().map(|(_, i)| i).collect();
        assert_eq!(*log.lock().unwrap(), order);
    }

    #[test]
    fn ten_thousand_pending_timers_take_about_forty_bytes_each() {
        // Measured from the store's own tables: what it uses, and what it
        // holds (capacity). Printed for the walkthrough: `cargo test -p
        // runtime --lib timer -- --nocapture`.
        let log = Arc::new(Mutex::new(Vec::new()));
        let waker = labelled(0, &log);
        let mut store = TimerStore::new();
        let t0 = Instant::now();
        let count = 10_000;
        let keys: Vec<TimerKey> = (0..count)
            .map(|i| store.insert(t0 + Duration::from_millis(i), waker.clone()))
            .collect();
        let (slot, key) = (std::mem::size_of::<TimerSlot>(), std::mem::size_of::<u32>());
        let used = store.slots.len() * slot + (store.heap.len() + store.free.len()) * key;
        let held =
            store.slots.capacity() * slot + (store.heap.capacity() + store.free.capacity()) * key;
        let count = count as usize;
        println!(
            "{count} pending timers: {} bytes each in use, {} held",
            used / count,
            held / count
        );
        assert_eq!(used, count * 36);
        assert!(held <= count * 41, "{held}");
        keys.into_iter().for_each(|key| store.remove(key));
        assert_eq!(store.len(), 0);
    }
}
