//! Stopping and reloading, driven by signals.
//!
//! Signals are blocked in the main thread before any other thread starts
//! (threads inherit the mask), so no signal handler ever runs in the middle
//! of a relay, and the default action ("terminate") never fires. The main
//! thread then reads them as data, from a `signalfd` on a small runtime of
//! its own (runtime/src/signal.rs), and acts:
//!
//! ```text
//!   running ──SIGHUP──▶ reload the file (epoll mode), keep running
//!      │    ──SIGUSR1─▶ reopen the access-log file (epoll mode), keep running
//!      │    ──SIGQUIT─▶ dump the state to the log (HAProxy's meaning), keep running
//!      │    ──SIGUSR2─▶ start a new binary that takes the listeners (epoll mode with an
//!      │                upgrade socket, ops/upgrade/), keep running until it has them
//!      │
//!   SIGTERM / SIGINT
//!      ▼
//!   lameduck (`shutdown-delay`, epoll mode; skipped when it is 0, the default):
//!      │      /health answers 503 at once, the listeners keep accepting and
//!      │      serving; a health-driven load balancer or route announcer in
//!      │      front takes the node out of its rotation meanwhile
//!      ├── the delay is over ───────────────┐
//!      └── a second SIGTERM / SIGINT ───────┤  (ends the delay early)
//!                                           ▼
//!   (or a new process took the listeners, ops/upgrade/: straight here)
//!   draining: listeners closed (new clients are refused by the kernel),
//!      │      open connections go on; the last one to end wakes the drain
//!      │
//!      ├── none left ───────────────────────▶ exit 0
//!      ├── grace period over ───────────────▶ exit 0, closing what is left
//!      └── a second SIGTERM / SIGINT ───────▶ exit 0 at once
//! ```
//!
//! That is HAProxy's soft stop with `hard-stop-after` and nginx's graceful
//! shutdown with `worker_shutdown_timeout`. The lameduck phase is what a
//! node behind ECMP or another load balancer needs first (docs/CLUSTER.md):
//! closing the listeners at once would refuse the clients still routed to
//! it until its announcement is withdrawn; accepting for a few health-check
//! intervals more lets the route go first. HAProxy gets there with
//! `monitor fail if { stopping }` and its `grace`; Kubernetes users with a
//! `preStop` sleep. What is left at the end of the
//! grace period is cut: the epoll mode resets each such connection itself
//! and logs it (`KD`; the kill switch of `epoll/worker_context.rs`); the
//! pool mode leaves them to the process exit.
//!
//! The single mode has nothing to drain (it serves one connection at a
//! time, on the main thread) and keeps the simplest form: a thread that
//! exits at the first SIGTERM or SIGINT ([`exit_on_signals`]).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal as NixSignal};
use runtime::combinator::{Either, select};
use runtime::notify::Notify;
use runtime::signal::{Signal, Signals};
use runtime::time;

use crate::policy::limit::Limit;

/// The default grace period: as long as Kubernetes waits after SIGTERM.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// The signals the proxy acts on. SIGQUIT among them: its default action
/// would end the process with a core dump; here it asks for the state in
/// the log (HAProxy's meaning; nginx's graceful stop is our SIGTERM).
pub const HANDLED: [Signal; 6] = [
    Signal::Interrupt,
    Signal::Terminate,
    Signal::Hangup,
    Signal::User1,
    Signal::Quit,
    Signal::User2,
];

/// The same, as nix names them, for blocking them and for `sigwait`.
const HANDLED_NIX: [NixSignal; 6] = [
    NixSignal::SIGINT,
    NixSignal::SIGTERM,
    NixSignal::SIGHUP,
    NixSignal::SIGUSR1,
    NixSignal::SIGQUIT,
    NixSignal::SIGUSR2,
];

/// The signals the proxy acts on, as a set: what is blocked, and what a
/// `sigwait` or a `signalfd` (the states mode's) reads.
pub fn handled_set() -> SigSet {
    let mut set = SigSet::empty();
    for signal in HANDLED_NIX {
        set.add(signal);
    }
    set
}

/// Blocks SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT in this thread and in every thread it
/// starts afterwards. Call it first thing, before any thread exists.
pub fn block_signals() -> io::Result<()> {
    handled_set().thread_block().map_err(io::Error::from)
}

/// The single mode's way: a thread that ends the process with status 0 at
/// the first SIGTERM or SIGINT. SIGHUP, SIGUSR1 and SIGUSR2 are logged and ignored;
/// SIGQUIT logs the little state the mode has and it goes on.
pub fn exit_on_signals() -> io::Result<()> {
    block_signals()?;
    let set = handled_set();
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                match set.wait() {
                    Ok(signal @ (NixSignal::SIGHUP | NixSignal::SIGUSR1 | NixSignal::SIGUSR2)) => {
                        crate::warn!(
                            "{signal}: the single mode has nothing to reload, reopen or upgrade; \
                             ignored"
                        )
                    }
                    Ok(NixSignal::SIGQUIT) => say::state("single", None),
                    Ok(signal) => {
                        crate::info!("{signal}: exiting");
                        std::process::exit(0);
                    }
                    Err(e) => {
                        crate::error!("waiting for signals failed: {e}; SIGTERM is not handled");
                        return;
                    }
                }
            }
        })?;
    Ok(())
}

/// What a drain waits on: the connections a mode has open, counted, and a
/// way to be woken when the last one ends (no polling of the count).
pub trait OpenCount {
    /// Connections open now.
    fn open(&self) -> usize;
    /// Completes once none is open.
    fn drained(&self) -> impl Future<Output = ()> + '_;
}

/// The pool mode's count of the connections it has open. Each connection
/// holds a [`Counted`] guard for its whole life. (The epoll mode counts
/// its places under the global `maxconn` instead, which every connection
/// holds anyway: one shared count per connection, not two.)
#[derive(Debug, Default)]
pub struct Live {
    open: AtomicUsize,
    /// Notified by the guard that brings the count to zero.
    emptied: Notify,
}

/// One open connection, counted in [`Live`] until dropped.
#[derive(Debug)]
pub struct Counted {
    live: Arc<Live>,
}

impl Live {
    /// A count starting at zero.
    pub fn new() -> Arc<Live> {
        Arc::new(Live::default())
    }

    /// Counts a connection in; the guard counts it out when dropped.
    pub fn enter(self: &Arc<Self>) -> Counted {
        self.open.fetch_add(1, Ordering::Relaxed);
        Counted { live: self.clone() }
    }
}

impl OpenCount for Live {
    fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    async fn drained(&self) {
        loop {
            // Taken before the count is read: a last connection that ends in
            // between is not missed.
            let emptied = self.emptied.notified();
            if self.open() == 0 {
                return;
            }
            emptied.await;
        }
    }
}

impl OpenCount for Limit {
    fn open(&self) -> usize {
        Limit::open(self) as usize
    }

    fn drained(&self) -> impl Future<Output = ()> + '_ {
        Limit::drained(self)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.live.open.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.live.emptied.notify_all();
        }
    }
}

/// Whether `signal` asks the process to stop.
pub fn is_stop(signal: Signal) -> bool {
    matches!(signal, Signal::Interrupt | Signal::Terminate)
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished on its own.
    Finished,
    /// Some were still open: the grace period ran out, or a second stop
    /// signal came. The caller closes them.
    Cut,
}

/// Waits, after a stop signal (`first`, its name or what else began the
/// stop), until every connection of `count` is done, the grace period is
/// over, or a stop signal comes. The caller has already stopped accepting. Woken by the last connection's end, by a
/// signal, or by the end of the grace period: nothing polls the count.
/// A SIGQUIT meanwhile calls `dump` (the mode's state to the log) and the
/// drain goes on.
pub async fn drain(
    signals: &Signals,
    count: &impl OpenCount,
    grace: Duration,
    first: &str,
    dump: impl Fn(),
) -> Drained {
    let deadline = Instant::now() + grace;
    say::stopping(first, count.open(), grace);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ended = time::timeout(left, select(count.drained(), signals.recv())).await;
        let open = count.open();
        match ended {
            Ok(Either::Left(())) => {
                say::finished();
                return Drained::Finished;
            }
            Err(time::Elapsed) => {
                say::grace_over(grace, open);
                return Drained::Cut;
            }
            Ok(Either::Right(Ok(signal))) if is_stop(signal) => {
                say::again(signal.name(), open);
                return Drained::Cut;
            }
            Ok(Either::Right(Ok(Signal::Quit))) => dump(),
            Ok(Either::Right(Ok(signal))) => say::ignored_while_stopping(signal.name()),
            Ok(Either::Right(Err(e))) => {
                // Signals can no longer be read: drain on the clock alone.
                crate::error!("reading signals failed: {e}");
                return match time::timeout(left, count.drained()).await {
                    Ok(()) => Drained::Finished,
                    Err(time::Elapsed) => Drained::Cut,
                };
            }
        }
    }
}

/// The lameduck phase, after the first stop signal (`first`, its name):
/// the caller has already made `/health` answer 503 and keeps accepting;
/// this waits out `delay`, or less if another stop signal comes (then the
/// drain begins at once). A SIGQUIT meanwhile calls `dump`; other signals
/// are ignored, as during a drain.
pub async fn lameduck(signals: &Signals, delay: Duration, first: &str, dump: impl Fn()) {
    if delay.is_zero() {
        return;
    }
    let deadline = Instant::now() + delay;
    say::lameduck(first, delay);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match time::timeout(left, signals.recv()).await {
            Err(time::Elapsed) => return,
            Ok(Ok(signal)) if is_stop(signal) => {
                say::lameduck_cut(signal.name());
                return;
            }
            Ok(Ok(Signal::Quit)) => dump(),
            Ok(Ok(signal)) => say::ignored_while_stopping(signal.name()),
            Ok(Err(e)) => {
                // Signals can no longer be read: wait on the clock alone.
                crate::error!("reading signals failed: {e}");
                time::sleep(left).await;
                return;
            }
        }
    }
}

/// The lines a drain logs, one wording for every mode that drains (the
/// async [`drain`] above, the states mode's own loop): operators and the
/// tests read them.
pub mod say {
    use std::time::Duration;

    /// The first stop signal, with a `shutdown-delay`: what happens now.
    pub fn lameduck(signal: &str, delay: Duration) {
        crate::info!(
            "{signal}: lameduck for {delay:?}: /health answers 503 so that whatever routes \
             clients here stops; still accepting meanwhile, then stopping (send it again to \
             stop accepting now)"
        );
    }

    /// A second stop signal during the lameduck phase.
    pub fn lameduck_cut(signal: &str) {
        crate::info!("{signal} again: lameduck ended early; stopping now");
    }

    /// The first stop signal: what happens now.
    pub fn stopping(signal: &str, open: usize, grace: Duration) {
        crate::info!(
            "{signal}: stopping: no new connections; {open} open may take up to {grace:?} to \
             finish (send it again to exit at once)"
        );
    }

    /// The last connection ended within the grace period.
    pub fn finished() {
        crate::info!("every connection finished; exiting");
    }

    /// The grace period ran out with `open` connections left.
    pub fn grace_over(grace: Duration, open: usize) {
        crate::warn!("grace period of {grace:?} over: closing {open} connections; exiting");
    }

    /// A second stop signal.
    pub fn again(signal: &str, open: usize) {
        crate::warn!("{signal} again: closing {open} connections; exiting");
    }

    /// Another signal during the drain.
    pub fn ignored_while_stopping(signal: &str) {
        crate::warn!("{signal} while stopping: ignored");
    }

    /// SIGQUIT to a mode without frontends and counters to dump (`mode`:
    /// single, pool, states): what it has, `open` connections if it counts
    /// them, and it goes on. (The epoll mode's dump is epoll/dump.rs.)
    pub fn state(mode: &str, open: Option<usize>) {
        let open = open.map_or(String::new(), |n| format!("{n} connections open; "));
        crate::info!(
            "SIGQUIT: {mode} mode: {open}no frontends or counters to dump (the epoll mode's \
             SIGQUIT dumps them); still running"
        );
    }

    /// SIGHUP or SIGUSR1 to a mode that takes flags only and writes no
    /// access log (`mode`: pool, states).
    pub fn nothing_to_reload(signal: &str, mode: &str) {
        crate::warn!(
            "{signal}: the {mode} mode takes flags only and has no access log, nothing to reload, \
             reopen or upgrade; ignored"
        );
    }
}
