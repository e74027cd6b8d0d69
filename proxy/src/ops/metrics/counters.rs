//! The counters: each event loop counts its own connections in counters of
//! its own, so that counting costs the event loops nothing.
//!
//! Every event-loop worker counts its own connections in its own counters:
//! one [`FrontendCounters`] per frontend per worker, with a
//! [`BackendCounters`] for each of the frontend's backends. Each counter is
//! a plain `AtomicU64` updated with `Relaxed` ordering, and only its owner
//! thread writes it. Nothing else is shared, so no cache line moves between
//! the cores of two workers however busy they are; an uncontended atomic add
//! on a line the core already holds costs a few nanoseconds. (Atomic all the
//! same, because the admin thread reads while the owner writes: with a plain
//! `u64` that would be a data race, undefined behaviour.) The only other
//! visitor of those lines is a scrape, once every few seconds.
//!
//! ```text
//!   worker 0: [web: conns 7, bytes .. | b0 | b1]   [db: ...]    (written by worker 0 only)
//!   worker 1: [web: conns 5, bytes .. | b0 | b1]   [db: ...]    (written by worker 1 only)
//!                        │ Relaxed loads, when scraped
//!                        ▼
//!   admin thread: Registry::render()  ->  proxy_frontend_connections_total{frontend="web"} 12
//! ```
//!
//! The admin endpoint ([`admin`](crate::ops::admin)) reads every worker's values
//! and adds them up ([`exposition`](super::exposition)). Why `Relaxed` is enough: a scrape wants each number,
//! not a relation between numbers; a counter read a moment early is simply
//! the value of a moment earlier. The numbers of one scrape are therefore
//! not one instant's snapshot (two counters may be read a few microseconds
//! apart), which Prometheus expects of any exporter.
//!
//! Two details keep the "no sharing" promise and the sums right:
//!
//! - Each counter block is aligned to 128 bytes, so two workers' blocks never
//!   share a cache line (nor the pair of lines some CPUs fetch together),
//!   even when the allocator places them side by side.
//! - A gauge (`active`) goes up and down on the same worker, since a
//!   connection's task never leaves its event loop. The sums are taken with
//!   wrapping arithmetic all the same, so the total would stay right even if
//!   a connection were counted in on one worker and out on another (one
//!   worker's count wrapping below zero, another's above).
//!

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One frontend's counters, as one worker counts them (module docs). Add
/// with [`inc`] and [`add`]; hold an [`Active`] while a connection is open.
#[derive(Debug)]
#[repr(align(128))]
pub struct FrontendCounters {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Client connections open now (a gauge).
    pub active: AtomicU64,
    /// The most client connections this worker had open at once
    /// (HAProxy's `smax`, as one worker saw it: [`raise`]).
    pub max_active: AtomicU64,
    /// Bytes received from clients (relayed to backends).
    pub bytes_in: AtomicU64,
    /// Bytes sent to clients (received from backends).
    pub bytes_out: AtomicU64,
    /// Clients refused because no backend could be connected: none was up,
    /// or every try failed. (Each failed try is counted on its backend.)
    pub connect_errors: AtomicU64,
    /// Connects tried again on another backend after a failure.
    pub retries: AtomicU64,
    /// Connections the relay ended because a timeout expired (idle, or a
    /// half-closed connection whose other side stayed silent).
    pub timeouts: AtomicU64,
    /// Bytes either way that the relay moved by splice (of `bytes_in` and
    /// `bytes_out`).
    pub bytes_spliced: AtomicU64,
    /// Connections whose sockets could not splice, and went on by copy.
    pub splice_fallbacks: AtomicU64,
    /// Clients refused by access control (allow/deny lists, per-source limit).
    pub denied: AtomicU64,
    /// Clients refused after waiting `timeout queue` for a backend below its
    /// maxconn.
    pub queue_timeouts: AtomicU64,
    /// Clients refused at once because every candidate backend was at its
    /// maxconn and its queue at its `maxqueue`.
    pub queue_full: AtomicU64,
    /// Errors returned by `accept` on the frontend's listener.
    pub accept_errors: AtomicU64,
    /// Clients refused that had already gone (closed or reset their side
    /// before they were served): counted, and logged together, at most a
    /// line a second, not a warning each.
    pub gone: AtomicU64,
    /// The frontend's backends' counters, by backend index.
    pub backends: Vec<BackendCounters>,
    /// Connections routed, by the `use-group` rule that chose their group,
    /// then the ones no rule chose (`epoll/choose_group.rs`); empty on a frontend
    /// without rules.
    pub routes: Vec<AtomicU64>,
}

/// Established connections moved by upgrades (epoll/moving.rs): one set
/// for the process, shared by its workers (a move is rare: a contended add
/// now and then costs nothing that matters).
#[derive(Debug, Default)]
pub struct MoveCounters {
    /// Handed over to a new process, which adopted them.
    pub handed_over: AtomicU64,
    /// Adopted from an old process.
    pub adopted: AtomicU64,
    /// Parked for a new process that did not take them: relayed on here.
    pub resumed: AtomicU64,
}

/// One backend's counters, as one worker counts them.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct BackendCounters {
    /// Connections established to the backend.
    pub connections: AtomicU64,
    /// Connections to the backend open now (a gauge).
    pub active: AtomicU64,
    /// Bytes sent to the backend (from clients): HAProxy's `bin`.
    pub bytes_in: AtomicU64,
    /// Bytes received from the backend (sent to clients): HAProxy's `bout`.
    pub bytes_out: AtomicU64,
    /// Connect attempts that failed: refused, unreachable, or no answer
    /// within `timeout connect`.
    pub connect_errors: AtomicU64,
    /// The most connections this worker had open to it at once (`smax`).
    pub max_active: AtomicU64,
    /// Clients waiting now in its queue for a place under its `maxconn`
    /// (a gauge: HAProxy's `qcur`).
    pub queued: AtomicU64,
    /// The most clients this worker had waiting in its queue at once
    /// (`qmax`).
    pub max_queued: AtomicU64,
    /// Connects tried on it after a failed one on another backend
    /// (HAProxy's `wretr`).
    pub retries: AtomicU64,
    /// Clients whose connect to it failed and who were tried on another
    /// backend (HAProxy's `wredis`: redispatched from this server).
    pub redispatches: AtomicU64,
}

impl FrontendCounters {
    /// Zeroed counters for a frontend of `backends` backends.
    pub fn new(backends: usize) -> FrontendCounters {
        FrontendCounters::with_routes(backends, 0)
    }

    /// Zeroed counters for a frontend of `backends` backends and `routes`
    /// routing counters.
    pub fn with_routes(backends: usize, routes: usize) -> FrontendCounters {
        FrontendCounters {
            connections: AtomicU64::new(0),
            active: AtomicU64::new(0),
            max_active: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            bytes_spliced: AtomicU64::new(0),
            splice_fallbacks: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
            queue_full: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            gone: AtomicU64::new(0),
            backends: (0..backends).map(|_| BackendCounters::default()).collect(),
            routes: (0..routes).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// Adds one to `counter`: `counters::inc(&counters.connections)`.
pub fn inc(counter: &AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to `counter`. Only its own worker's thread ever writes a
/// counter (module docs), so a plain load and store is enough: no other
/// writer can slip in between, and a scrape on another thread reads either
/// the old value or the new one. A locked read-modify-write (`fetch_add`)
/// would cost several times more, on every connection, for nothing.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Raises `peak` to `value` if `value` is higher: the single writer's
/// running maximum of a gauge, read after each rise of the gauge.
pub fn raise(peak: &AtomicU64, value: u64) {
    if value > peak.load(Relaxed) {
        peak.store(value, Relaxed);
    }
}

/// One unit of a gauge held for a while: +1 when made, -1 when dropped, so
/// a connection cannot forget to leave the `active` count (like a
/// [`Permit`](crate::policy::limit::Permit) and its limit).
#[derive(Debug)]
#[must_use = "the gauge goes back down when this is dropped"]
pub struct Active<'a> {
    gauge: &'a AtomicU64,
}

impl<'a> Active<'a> {
    /// Adds one to `gauge` until the returned value is dropped.
    pub fn new(gauge: &'a AtomicU64) -> Active<'a> {
        add(gauge, 1);
        Active { gauge }
    }

    /// [`Active::new`], raising `peak` to the gauge's new value.
    pub fn with_peak(gauge: &'a AtomicU64, peak: &AtomicU64) -> Active<'a> {
        let active = Active::new(gauge);
        raise(peak, gauge.load(Relaxed));
        active
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        add(self.gauge, u64::MAX); // minus one, wrapping: the single writer's decrement
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_blocks_do_not_share_cache_lines() {
        assert_eq!(std::mem::align_of::<FrontendCounters>(), 128);
        assert_eq!(std::mem::size_of::<BackendCounters>(), 128);
    }

    #[test]
    fn a_gauge_goes_back_down_when_its_unit_is_dropped() {
        let counters = FrontendCounters::new(2);
        let open = Active::new(&counters.active);
        let other = Active::new(&counters.active);
        assert_eq!(counters.active.load(Relaxed), 2);
        drop((open, other));
        assert_eq!(counters.active.load(Relaxed), 0);
        let peaks = [
            Active::with_peak(&counters.active, &counters.max_active),
            Active::with_peak(&counters.active, &counters.max_active),
        ];
        drop(peaks);
        let _again = Active::with_peak(&counters.active, &counters.max_active);
        assert_eq!(counters.max_active.load(Relaxed), 2, "the peak stays");
        add(&counters.backends[1].bytes_in, 5);
        inc(&counters.backends[1].bytes_in);
        assert_eq!(counters.backends[1].bytes_in.load(Relaxed), 6);
    }
}
