//! The driver: the reactor and the timer store, turned together.
//!
//! When the executor has nothing left to run it calls [`Driver::turn`], the
//! one place where the thread sleeps:
//!
//! ```text
//!   turn(max_wait)
//!     1. fire timers already due           (they may have come due while tasks ran)
//!     2. wait = min(max_wait, nearest deadline - now)
//!     3. epoll_wait(wait)                   (reactor: readiness -> wakers)
//!     4. fire timers due now                (the wait may have ended because one did)
//!     5. wake every collected waker         (outside any borrow: a waker may
//!                                            run arbitrary code)
//! ```
//!
//! Deadlines are absolute `Instant`s and the wait is rounded *up* to the
//! millisecond (`sys::epoll_timeout_ms`): a sleep never ends early, and a
//! timer 0.3 ms away costs one short sleep, not a loop of zero-timeout polls.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::reactor::Reactor;
use crate::timer::TimerStore;

/// Everything the thread waits on: descriptors and deadlines.
#[derive(Debug)]
pub(crate) struct Driver {
    pub(crate) reactor: Rc<Reactor>,
    pub(crate) timers: RefCell<TimerStore>,
    /// Reused between turns, so a turn allocates nothing.
    wakers: RefCell<Vec<Waker>>,
}

impl Driver {
    pub(crate) fn new() -> io::Result<Driver> {
        Ok(Driver {
            reactor: Rc::new(Reactor::new()?),
            timers: RefCell::new(TimerStore::new()),
            wakers: RefCell::new(Vec::new()),
        })
    }

    /// Waits for I/O or a timer, at most `max_wait` (None: as long as it
    /// takes), and wakes the tasks concerned.
    pub(crate) fn turn(&self, max_wait: Option<Duration>) -> io::Result<()> {
        let mut wakers = self.wakers.take();
        let now = Instant::now();
        let fired_early = self.timers.borrow_mut().fire_due(now, &mut wakers) > 0;
        // A timer that fired already gives a task to run: only peek at I/O.
        let max_wait = if fired_early {
            Some(Duration::ZERO)
        } else {
            max_wait
        };
        let deadline = earliest(
            max_wait.map(|d| now + d),
            self.timers.borrow().next_deadline(),
        );
        let result = self.reactor.poll(deadline, &mut wakers);
        self.timers
            .borrow_mut()
            .fire_due(Instant::now(), &mut wakers);
        for waker in wakers.drain(..) {
            waker.wake();
        }
        // Hand the (now empty) buffer back for the next turn.
        *self.wakers.borrow_mut() = wakers;
        result
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
