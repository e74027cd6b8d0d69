//! The timer store: every pending `sleep` of one runtime, ordered by deadline.
//!
//! A timer is an absolute deadline (`Instant`) plus the waker of the task
//! that waits for it. The store is a `BTreeMap` keyed by `(deadline, id)`:
//! the first entry is always the nearest deadline, which is exactly what the
//! driver needs to bound its `epoll_wait`; the `id` tells apart two timers
//! with the same deadline.
//!
//! ```text
//!   (10:00:01.000, #4) -> waker of task 9      <- first: epoll_wait sleeps until here
//!   (10:00:01.000, #7) -> waker of task 2
//!   (10:00:05.250, #1) -> waker of task 3
//! ```
//!
//! Insert and remove are O(log n). A hashed timing wheel (tokio's) is O(1)
//! and pays off with hundreds of thousands of timers; a `BTreeMap` is the
//! version a reader can check in a minute. A fired or cancelled timer is
//! removed from the map, so a dropped `Sleep` leaves nothing behind.
//!
//! This file knows nothing about epoll or tasks: the driver asks it for the
//! next deadline and tells it what time it is.

use std::collections::BTreeMap;
use std::task::Waker;
use std::time::Instant;

use crate::waker;

/// Names one timer in the store.
pub(crate) type TimerKey = (Instant, u64);

/// All pending timers of one runtime.
#[derive(Debug, Default)]
pub(crate) struct TimerStore {
    /// Always `Some`: an `Option` only so that [`waker::store`] can update it
    /// (it costs no space: a `Waker` has a niche).
    timers: BTreeMap<TimerKey, Option<Waker>>,
    next_id: u64,
}

impl TimerStore {
    /// Adds a timer; `waker` is woken once `deadline` has passed.
    pub(crate) fn insert(&mut self, deadline: Instant, waker: Waker) -> TimerKey {
        let key = (deadline, self.next_id);
        self.next_id += 1;
        self.timers.insert(key, Some(waker));
        key
    }

    /// If the timer is still waiting, makes `waker` the one it wakes (a
    /// future may have moved to another task) and says so; false once it
    /// fired (the driver removed it). One lookup for both questions: a
    /// relay asks them each time it is woken.
    pub(crate) fn renew(&mut self, key: &TimerKey, waker: &Waker) -> bool {
        match self.timers.get_mut(key) {
            Some(stored) => {
                waker::store(stored, waker);
                true
            }
            None => false,
        }
    }

    /// Removes a timer that is no longer wanted (its `Sleep` was dropped).
    pub(crate) fn remove(&mut self, key: &TimerKey) {
        self.timers.remove(key);
    }

    /// The nearest deadline, if any timer is pending.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers
            .first_key_value()
            .map(|(&(deadline, _), _)| deadline)
    }

    /// Removes every timer due at `now` and hands their wakers to `wakers`,
    /// earliest first.
    pub(crate) fn fire_due(&mut self, now: Instant, wakers: &mut Vec<Waker>) -> usize {
        let mut fired = 0;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            wakers.extend(entry.remove());
            fired += 1;
        }
        fired
    }

    /// How many timers are pending.
    pub(crate) fn len(&self) -> usize {
        self.timers.len()
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

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::default();
        let t0 = Instant::now();
        for (label, ms) in [(3, 30), (1, 10), (2, 20), (4, 30)] {
            store.insert(
                t0 + Duration::from_millis(ms),
                Waker::from(Arc::new(Labelled(label, log.clone()))),
            );
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
    fn an_optional_waker_costs_no_space() {
        // What the comment on `TimerStore::timers` claims.
        assert_eq!(
            std::mem::size_of::<Option<Waker>>(),
            std::mem::size_of::<Waker>()
        );
    }

    #[test]
    fn a_removed_timer_never_fires() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut store = TimerStore::default();
        let t0 = Instant::now();
        let waker = Waker::from(Arc::new(Labelled(1, log.clone())));
        let key = store.insert(t0, waker.clone());
        assert!(store.renew(&key, &waker), "pending until removed");
        store.remove(&key);
        assert!(!store.renew(&key, &waker), "gone once removed");
        let mut wakers = Vec::new();
        store.fire_due(t0 + Duration::from_secs(1), &mut wakers);
        assert!(wakers.is_empty());
        assert_eq!(store.next_deadline(), None);
    }
}
