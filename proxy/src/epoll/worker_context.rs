//! What every frontend on one worker shares: the worker's index, the global
//! `maxconn`, the pipe budget of the splice path, its access-log buffer, the
//! orders it gives all its connections (`orders.rs`), and the
//! lines of at most one a second that say how many clients were refused
//! after they had gone, and how many connections could not splice.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::conn::accept::Throttle;
use crate::conn::splice::Pipes;
use crate::ops::access_log::custom::Needs;
use crate::ops::access_log::sink::Sink;
use crate::ops::metrics::counters::MoveCounters;
use crate::ops::upgrade::hand::Outbound;
use crate::policy::limit::Limit;

#[cfg(doc)]
use super::orders::Order;
use super::orders::Orders;

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
    /// What a connection gathers for its access-log line beyond the usual
    /// (its format's [`Needs`]).
    pub log_needs: Needs,
    /// The once-a-second line for access-log lines lost.
    pub lost_lines: RefCell<Throttle>,
    /// Kill and park, each given to every connection at once.
    pub orders: Orders,
    /// Moving this worker's relaying connections to a new process.
    pub moving: Moving,
    /// Connections moved by upgrades, counted for the whole process.
    pub moves: Arc<MoveCounters>,
    /// Clients refused after they had gone, not yet said.
    pub gone: RefCell<GoneClients>,
    /// The process's pipes for the splice path: their ceiling, shared by
    /// every worker (none until [`WorkerContext::with_pipes`]: copy only),
    /// and the global `maxconn`, which lends them their descriptors.
    pub pipes: Pipes,
    /// The once-a-second line for connections that fell back from splice.
    pub splice_fallbacks: RefCell<Throttle>,
    /// A new process took the listeners (ops/upgrade/): a client accepted
    /// but still waiting for its place is served anyway, not reset.
    pub handed_over: Cell<bool>,
}

/// Moving established connections to a new process (`epoll/moving.rs`):
/// where the connections parked by [`Order::Park`] go (to the upgrade
/// thread, ops/upgrade/hand.rs). Without a way out (none yet, or the
/// handover ended), nothing parks.
#[derive(Debug, Default)]
pub struct Moving {
    /// Where parked connections go.
    pub outbound: RefCell<Option<std::sync::mpsc::Sender<Outbound>>>,
}

/// Clients refused after they had gone (closed or reset their side before
/// they were served): each is counted (`proxy_frontend_clients_gone_total`)
/// and has its access-log line, but the daemon's log says them together, at
/// most once a second per worker, with the count: after a flood, hundreds
/// of clients that gave up while queued would otherwise get a warning each.
#[derive(Debug, Default)]
pub struct GoneClients {
    throttle: Throttle,
    /// Noted since the last line.
    pending: u64,
    /// The last one noted: who, and why it was refused.
    last: String,
    /// A line is due later, and a timer task will log it.
    scheduled: bool,
}

impl WorkerContext {
    /// Worker `index`'s context: its place under the `global` maxconn and
    /// its access-log buffer, with no order given and no gone
    /// client noted yet.
    pub fn new(index: usize, global: Arc<Limit>, sink: Option<Sink>) -> WorkerContext {
        let pipes = Pipes::new(Limit::new(Some(0)), global.clone());
        WorkerContext {
            index,
            global,
            log_needs: sink
                .as_ref()
                .map_or_else(Needs::default, |s| s.log().format().needs()),
            lost_lines: RefCell::default(),
            sink: sink.map(RefCell::new),
            orders: Orders::default(),
            moving: Moving::default(),
            moves: Arc::default(),
            gone: RefCell::default(),
            pipes,
            splice_fallbacks: RefCell::default(),
            handed_over: Cell::new(false),
        }
    }

    /// The same context with the process's pipe ceiling and its places for
    /// long pipes, so that its connections may splice (`conn/splice.rs`),
    /// lent descriptors by its global `maxconn`.
    pub fn with_pipes(self, ceiling: Arc<Limit>, long: Arc<Limit>) -> WorkerContext {
        let pipes = Pipes::new(ceiling, self.global.clone()).with_long(long);
        WorkerContext { pipes, ..self }
    }

    /// The same context counting moved connections in the process's `moves`.
    pub fn with_moves(self, moves: Arc<MoveCounters>) -> WorkerContext {
        WorkerContext { moves, ..self }
    }

    /// Notes one client refused after it had gone (`what`: who and why):
    /// said at once if no line was logged in the last second, else in one
    /// line when the second is over, with however many came meanwhile.
    pub fn note_gone(self: &Rc<Self>, what: String) {
        let mut gone = self.gone.borrow_mut();
        gone.pending += 1;
        gone.last = what;
        if gone.scheduled {
            return;
        }
        if gone.throttle.due(Instant::now()).is_some() {
            say_gone(&mut gone);
            return;
        }
        gone.scheduled = true;
        let at = gone.throttle.next_due().unwrap_or_else(Instant::now);
        let context = self.clone();
        runtime::spawn(async move {
            runtime::time::sleep_until(at).await;
            let mut gone = context.gone.borrow_mut();
            gone.scheduled = false;
            let _ = gone.throttle.due(Instant::now());
            say_gone(&mut gone);
        });
    }
}

fn say_gone(gone: &mut GoneClients) {
    let n = std::mem::take(&mut gone.pending);
    if n > 0 {
        let clients = if n == 1 { "client" } else { "clients" };
        crate::warn!(
            "{n} {clients} refused after they had gone (closed or reset before they were served; at \
             most one such line a second); the last: {}",
            gone.last
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // Clients refused after they had gone are said at once, then
    // together once the second is over, however many came meanwhile.
    #[test]
    fn clients_gone_are_said_at_most_once_a_second_with_the_count() {
        let context = Rc::new(WorkerContext::new(0, Limit::new(None), None));
        let rt = runtime::Runtime::new().expect("a runtime");
        rt.block_on(async {
            context.note_gone("frontend web: 127.0.0.1:1: first".into());
            // Said at once: nothing pending, nothing scheduled.
            assert_eq!(context.gone.borrow().pending, 0);
            assert!(!context.gone.borrow().scheduled);
            for i in 2..=5 {
                context.note_gone(format!("frontend web: 127.0.0.1:{i}: later"));
            }
            // Held for one line when the second is over.
            assert_eq!(context.gone.borrow().pending, 4);
            assert!(context.gone.borrow().scheduled);
            assert!(context.gone.borrow().last.contains("127.0.0.1:5"));
            let deadline = Instant::now() + Duration::from_secs(10);
            while context.gone.borrow().scheduled {
                assert!(Instant::now() < deadline, "the held line was never said");
                runtime::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(context.gone.borrow().pending, 0);
        });
    }
}
