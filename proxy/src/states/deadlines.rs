//! The deadline list: when the next timeout is due, so that `epoll_wait`
//! sleeps no longer than that, and which connection it belongs to.
//!
//! A min-heap of `(when, key)`, with lazy removal: an entry is never taken
//! out when its connection closes or its deadline moves. The event loop
//! keeps, per connection, the one deadline that counts (its `Alarm`,
//! conn/alarm.rs); when an entry comes due, the loop checks it against
//! that, and an entry that no longer matches (its connection gone, or
//! re-armed since) is dropped. So every operation is a push or a pop,
//! O(log n), and a connection whose bytes keep moving costs nothing per
//! read: its relay machine records when bytes last moved, and only when
//! its entry comes due does the loop ask it, and re-arm once for the
//! remainder (the alarm's rule, which the async relay's timer follows too).
//!
//! The runtime's timer store (runtime/src/timer.rs) does the same job for
//! every task's `Sleep`, with wakers; here nothing is woken but the loop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use nix::sys::epoll::EpollTimeout;

use crate::blocking::relay::poll_timeout;

/// Deadlines, each with the `K` it belongs to, earliest first.
#[derive(Debug)]
pub struct Deadlines<K> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
}

impl<K: Ord + Copy> Default for Deadlines<K> {
    fn default() -> Self {
        Deadlines {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord + Copy> Deadlines<K> {
    /// An empty list.
    pub fn new() -> Deadlines<K> {
        Deadlines::default()
    }

    /// Adds a deadline for `key` (an earlier one for it may stay: the
    /// caller tells the stale ones apart when they come due).
    pub fn push(&mut self, when: Instant, key: K) {
        self.heap.push(Reverse((when, key)));
    }

    /// The earliest deadline, due or not.
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((when, _))| *when)
    }

    /// Takes out the earliest entry if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, K)> {
        match self.heap.peek() {
            Some(Reverse((when, _))) if *when <= now => self.heap.pop().map(|Reverse(entry)| entry),
            _ => None,
        }
    }

    /// Entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// How long `epoll_wait` may sleep at `now` to wake by the earliest of
/// `wakes` (none: until an event), rounded up to whole milliseconds as the
/// blocking relay's `poll(2)` is: rounded down, the last fraction of a
/// millisecond would be a zero timeout, and the loop would spin until the
/// deadline passed.
pub fn wait_timeout(
    now: Instant,
    wakes: impl IntoIterator<Item = Option<Instant>>,
) -> EpollTimeout {
    match wakes.into_iter().flatten().min() {
        Some(first) => poll_timeout(first.saturating_duration_since(now)),
        None => EpollTimeout::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn deadlines_come_due_earliest_first_and_not_before_their_time() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut list = Deadlines::new();
        list.push(at(300), 3);
        list.push(at(100), 1);
        list.push(at(200), 2);
        assert_eq!(list.next(), Some(at(100)));
        assert_eq!(list.pop_due(at(99)), None, "not yet");
        assert_eq!(list.pop_due(at(250)), Some((at(100), 1)));
        assert_eq!(list.pop_due(at(250)), Some((at(200), 2)));
        assert_eq!(list.pop_due(at(250)), None);
        assert_eq!(list.len(), 1);
        assert_eq!(
            list.pop_due(at(300)),
            Some((at(300), 3)),
            "due exactly at its time"
        );
        assert!(list.is_empty() && list.next().is_none());
    }

    #[test]
    fn a_key_may_hold_stale_entries_which_come_out_in_order_too() {
        let t0 = Instant::now();
        let mut list = Deadlines::new();
        // A connection armed at 5 s, then at 1 s once it half-closed.
        list.push(t0 + Duration::from_secs(5), 7);
        list.push(t0 + Duration::from_secs(1), 7);
        let later = t0 + Duration::from_secs(6);
        assert_eq!(list.pop_due(later), Some((t0 + Duration::from_secs(1), 7)));
        assert_eq!(list.pop_due(later), Some((t0 + Duration::from_secs(5), 7)));
    }

    #[test]
    fn the_wait_is_bounded_by_the_earliest_wake_rounded_up() {
        let t0 = Instant::now();
        // -1: no limit, as epoll_wait(2) takes it.
        let ms = |wakes: Vec<Option<Instant>>| i32::from(wait_timeout(t0, wakes));
        assert_eq!(ms(vec![]), -1, "nothing due: wait for an event");
        assert_eq!(ms(vec![None, None]), -1);
        assert_eq!(ms(vec![Some(t0 + Duration::from_micros(1))]), 1);
        assert_eq!(
            ms(vec![
                None,
                Some(t0 + Duration::from_millis(40)),
                Some(t0 + Duration::from_micros(1500))
            ]),
            2
        );
        assert_eq!(ms(vec![Some(t0)]), 0, "due now: do not sleep");
        let past = t0.checked_sub(Duration::from_secs(1)).unwrap_or(t0);
        assert_eq!(ms(vec![Some(past)]), 0);
        assert_eq!(
            wait_timeout(t0, [Some(t0 + Duration::from_secs(1 << 40))]),
            EpollTimeout::MAX
        );
    }
}
