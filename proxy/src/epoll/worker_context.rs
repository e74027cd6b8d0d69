//! What every frontend on one worker shares: the worker's index, the global
//! `maxconn`, its access-log buffer, and the switch that cuts its
//! connections at the end of a graceful stop.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::ops::access_log::sink::Sink;
use crate::policy::limit::Limit;

/// What every frontend on one worker shares: the process-wide counts, and
/// the worker's buffer of access-log lines.
#[derive(Debug)]
pub struct WorkerContext {
    /// Which worker (its counters' index in each frontend's `counters`).
    pub index: usize,
    /// The global `maxconn`.
    pub global: Arc<Limit>,
    /// This worker's access-log buffer (`None`: `access-log off`).
    pub sink: Option<RefCell<Sink>>,
    /// Fired when a graceful stop's grace period is over.
    pub kill: KillSwitch,
}

/// "Cut every connection now", once per worker: fired when a graceful
/// stop runs out of time, waited on by every connection task. A connection
/// that sees it resets its sockets (a cut stream must not look complete)
/// and logs `KD` (`KC`, `KQ`, `KR` if cut before its relay), instead of
/// vanishing silently in the process exit.
///
/// Each waiting future has a slot for its waker, reused after it is
/// dropped, so a long relay that polls it often costs no allocation.
#[derive(Debug, Default)]
pub struct KillSwitch {
    fired: Cell<bool>,
    wakers: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl KillSwitch {
    /// Fires the switch: every future from [`KillSwitch::fired`] completes.
    pub fn fire(&self) {
        self.fired.set(true);
        let wakers: Vec<Waker> = self
            .wakers
            .borrow_mut()
            .iter_mut()
            .flat_map(Option::take)
            .collect();
        // Woken outside the borrow: a wake may run code of its own.
        for waker in wakers {
            waker.wake();
        }
    }

    /// A future that completes once the switch is fired.
    pub fn fired(&self) -> Fired<'_> {
        Fired {
            switch: self,
            slot: None,
        }
    }
}

/// The future of [`KillSwitch::fired`].
#[derive(Debug)]
pub struct Fired<'a> {
    switch: &'a KillSwitch,
    slot: Option<usize>,
}

impl Future for Fired<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.switch.fired.get() {
            return Poll::Ready(());
        }
        let mut wakers = self.switch.wakers.borrow_mut();
        let slot = match self.slot {
            Some(slot) => slot,
            None => {
                let slot = self.switch.free.borrow_mut().pop().unwrap_or_else(|| {
                    wakers.push(None);
                    wakers.len() - 1
                });
                self.slot = Some(slot);
                slot
            }
        };
        if let Some(entry) = wakers.get_mut(slot) {
            if !entry.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *entry = Some(cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Fired<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            if let Some(entry) = self.switch.wakers.borrow_mut().get_mut(slot) {
                *entry = None;
            }
            self.switch.free.borrow_mut().push(slot);
        }
    }
}
