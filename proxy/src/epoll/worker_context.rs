//! What every frontend on one worker shares: the worker's index, the global
//! `maxconn`, its access-log buffer, and the switch that cuts its
//! connections at the end of a graceful stop.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use runtime::notify::Notify;

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
/// costs a connection one registration (a lock of this worker's own waiter
/// list, which no other thread touches) when its relay first waits, and
/// nothing on the polls after that.
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

    /// Completes once the switch is fired.
    pub async fn fired(&self) {
        let notified = self.notify.notified();
        if self.fired.get() {
            return;
        }
        notified.await;
    }
}
