//! What every frontend on one worker shares: the worker's index, the global
//! `maxconn`, its access-log buffer, and the switch that cuts its
//! connections at the end of a graceful stop.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use runtime::notify::{Notified, Notify};

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
/// A flag and a [`Notify`]: a connection takes its `Notified` before it
/// looks at the flag, so a switch fired in between is not missed. Waiting
/// costs a connection one registration for its whole life (a lock of this
/// worker's own waiter list, which no other thread touches, when it first
/// waits, and once more when it ends), and nothing on the polls between.
#[derive(Debug, Default)]
pub struct KillSwitch {
    fired: Cell<bool>,
    notify: Notify,
}

impl KillSwitch {
    /// Fires the switch: every future from [`KillSwitch::fired`] completes.
    pub fn fire(&self) {
        self.fired.set(true);
        self.notify.notify_all();
    }

    /// A future that completes once the switch is fired. One per
    /// connection, for its whole life: it registers with the switch once.
    pub fn fired(&self) -> Fired<'_> {
        Fired {
            switch: self,
            notified: self.notify.notified(),
        }
    }
}

/// The future of [`KillSwitch::fired`]; `Unpin`, so a connection can poll
/// it by `&mut` from each of its phases in turn.
#[derive(Debug)]
pub struct Fired<'a> {
    switch: &'a KillSwitch,
    /// Made with the future, before the flag is first looked at: a switch
    /// fired in between is seen by one or the other.
    notified: Notified<'a>,
}

impl Future for Fired<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.switch.fired.get() {
            return Poll::Ready(());
        }
        Pin::new(&mut self.notified).poll(cx)
    }
}
