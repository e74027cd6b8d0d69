//! Health: which backends are up, from active checks and from real traffic.
//!
//! [`balance`](crate::policy::balance) picks among the servers that are up; this
//! module decides which those are, with HAProxy's rules for `check inter
//! fall rise` and `observe layer4`. Two sources of evidence feed it:
//!
//! - **active checks**: for a server configured with `check`, a dedicated
//!   thread opens a TCP connection to it every `inter`. A plain check
//!   closes it at once: connected is a success; refused, unreachable or no
//!   answer within `timeout` is a failure. An application check (`option
//!   redis-check`, `tcp-check` steps...: [`check`](super::check)) goes on
//!   talking, and its [`Verdict`] says whether the service answered right.
//! - **passive reports**: when a real client's connect to the server fails
//!   (or succeeds), the event loop says so.
//!
//! # The state machine, per server
//!
//! ```text
//!            any success (check or traffic): failures = 0
//!              ┌────┐
//!              │    ▼
//!   start ──► ┌──────┐   `fall` failures in a row        ┌──────┐
//!             │  UP  │ ────────────────────────────────► │ DOWN │
//!             │      │   (check or traffic failures)     │      │
//!             └──────┘ ◄──────────────────────────────── └──────┘
//!                        `rise` successful checks in a      │  ▲
//!                        row (traffic is ignored here:      └──┘
//!                        none goes to a down server)   failed check: successes = 0
//! ```
//!
//! A server *without* `check` is always up, and reports about it are
//! ignored, as in HAProxy, where `observe` needs `check`: a server taken
//! down by traffic would otherwise never be probed back up.
//!
//! # When a server changes
//!
//! Beyond taking it in and out of the balancing, a change can act, as the
//! server's line asks ([`OnChange`], HAProxy's words):
//!
//! - `on-marked-down shutdown-sessions`: marked down, its open connections
//!   are cut (each resets both sides, logged `DD`), instead of going on
//!   with a server that is probably gone;
//! - `on-marked-up shutdown-backup-sessions`: back up, the connections to
//!   its group's backups are cut, so that clients come back to it;
//! - `slowstart T`: back up (never at startup), its weight and `maxconn`
//!   start at a sliver and grow to full over T ([`HealthBoard::weight_percent_now`]),
//!   so that a cold server is not handed its full share at once. Its
//!   weight grows at each check, when the generation moves.
//!
//! A cut is a count per server ([`HealthBoard::cuts`]) and a wake-up of
//! every worker that asked for one ([`HealthBoard::wake_on_cuts`]): a
//! relaying connection notes its server's count as its relay begins, and
//! each time its worker wakes it, compares. No connection waits on its
//! server by itself: the wait it already keeps for its worker's orders
//! (`epoll/orders.rs`) hears cuts too, so an idle connection keeps one
//! registration, not two. The price is paid at a cut, which is rare: every
//! connection of the frontend's workers wakes once and looks.
//!
//! Every change is logged once with its reason, DOWN as a warning:
//!
//! ```text
//! frontend web: backend db1 (127.0.0.1:9001) is DOWN: 3 consecutive failures (last: check: connection refused)
//! frontend web: backend db1 (127.0.0.1:9001) is UP: 2 consecutive successful checks (last: redis: +PONG)
//! frontend db: backend 127.0.0.1:5432 is DOWN: 3 consecutive failures (last: check: pgsql: ErrorResponse FATAL 57P03: the database system is shutting down)
//! ```
//!
//! Beside this state machine, a server's agent (`agent-check`) may keep it
//! out of rotation or change its weight ([`agent_state`](super::agent_state)):
//! [`HealthBoard::is_up`] is both together, and
//! [`HealthBoard::weight_percent`] the agent's weight.
//!
//! # Sharing one board between threads
//!
//! A frontend has one [`HealthBoard`], shared through an `Arc` by its event
//! loops (which report traffic) and the checker thread (which reports
//! checks). Each loop keeps its own `Balancer` and copies the board into it
//! only when the board's *generation*, bumped after every change, moved:
//!
//! ```
//! use proxy::policy::balance::{Algorithm, Balancer, Server};
//! use proxy::policy::health::HealthBoard;
//! # let addr = "127.0.0.1:9001".parse().unwrap();
//! let board = HealthBoard::new("web", &[(addr, None)]);
//! let mut balancer = Balancer::new(vec![Server::new(addr)], Algorithm::RoundRobin);
//! let mut seen = 0;
//! // Before each pick: one atomic load when nothing changed.
//! let now = board.generation();
//! if now != seen {
//!     for i in 0..board.len() {
//!         balancer.set_up(i, board.is_up(i));
//!     }
//!     seen = now;
//! }
//! ```
//!
//! The generation is read *before* the flags: if a change lands in between,
//! the loop copies a flag newer than `seen`, and the next comparison copies
//! again. A loop may lag one connection behind a change, never forever.
//!
//! The failure and success counters sit behind a small `Mutex` per server,
//! but the healthy path never takes it. A successful client connect (by far
//! the most frequent report) first reads an atomic flag, `failing`, which is
//! true only while an UP server has a failure streak in progress; when it
//! is false there is nothing to reset, and the report costs one load. The
//! flag is only written under the lock, so the lock holder always knows the
//! truth; a reader that saw a stale `false` raced with a failure, and
//! counting its success as the earlier of the two is a valid order. Checks
//! (one every `inter`) and failures (rare, and worth the care) take the
//! lock. The up flags and the generation are atomics, read by every loop.
//!
//! The board also counts every check's result, for the admin endpoint's
//! metrics ([`HealthBoard::check_counts`]): two relaxed counters per server,
//! written by the checker thread only (`epoll/checker.rs`), and keeps the
//! last check's verdict and duration ([`HealthBoard::last_check`]) for the
//! metrics and the SIGQUIT dump, behind a lock taken once per check and
//! once per scrape.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use runtime::notify::Notify;

use super::admin_state::{AdminBoard, AdminState, WeightOutOfRange};
use super::agent_state::AgentState;
use super::check::Verdict;
use super::check::agent::AgentReply;

/// Active health-check parameters (`check inter 2s fall 3 rise 2 timeout 1s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Time between two checks (default 2s).
    pub inter: Duration,
    /// Consecutive failures that mark the backend down (default 3).
    pub fall: u32,
    /// Consecutive successes that bring it back (default 2).
    pub rise: u32,
    /// How long one check's connect may take (default: `inter`).
    pub timeout: Duration,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            inter: Duration::from_secs(2),
            fall: 3,
            rise: 2,
            timeout: Duration::from_secs(2),
        }
    }
}

/// What a server's change of state does besides taking it in or out of
/// the balancing: HAProxy's `on-marked-down`, `on-marked-up` and
/// `slowstart` (module docs, "When a server changes").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OnChange {
    /// `on-marked-down shutdown-sessions`: its connections are cut when it
    /// is marked down.
    pub cut_when_down: bool,
    /// `on-marked-up shutdown-backup-sessions`: the servers whose
    /// connections are cut when it comes back up (its group's backups).
    pub cut_when_up: Vec<usize>,
    /// `slowstart`: once it comes back up, its weight and `maxconn` grow
    /// from almost nothing to full over this time.
    pub slowstart: Option<Duration>,
}

/// The health of one frontend's servers (module docs).
#[derive(Debug)]
pub struct HealthBoard {
    frontend: String,
    servers: Vec<ServerHealth>,
    /// Bumped (Release) after every change of an up flag, and at each check
    /// of a server in its slowstart (its weight changed).
    generation: AtomicU64,
    /// What the slowstart deadlines count from.
    epoch: Instant,
    /// What the operator says of each server (`policy/admin_state.rs`):
    /// its changes bump [`HealthBoard::generation`] too.
    admin: AdminBoard,
    /// What a cut wakes: the orders' notify of every worker that relays
    /// for this frontend (module docs, "When a server changes").
    cut_listeners: Mutex<Vec<Arc<Notify>>>,
}

#[derive(Debug)]
struct ServerHealth {
    addr: SocketAddr,
    /// How the log lines name it: `db1 (127.0.0.1:9001)`, or the address
    /// ([`HealthBoard::with_labels`]).
    label: String,
    check: Option<Check>,
    /// Written only with `streak` locked; read by anyone.
    up: AtomicBool,
    /// Up with `streak.failures > 0`. Written only with `streak` locked.
    failing: AtomicBool,
    streak: Mutex<Streak>,
    /// Active checks that succeeded, failed: counted for metrics only.
    check_successes: AtomicU64,
    check_failures: AtomicU64,
    /// The last active check, for the metrics and the dump.
    last: Mutex<Option<LastCheck>>,
    /// What its agent said (`agent_state.rs`); `agent_out` and `percent`
    /// are written only with it locked.
    agent: Mutex<AgentState>,
    /// The agent keeps it out of rotation (down or maint).
    agent_out: AtomicBool,
    /// The weight the agent asks for, in percent of the configured one.
    percent: AtomicU32,
    /// What its changes of state do.
    on_change: OnChange,
    /// How many times its connections were cut: a relaying connection
    /// made before the last cut holds an older count.
    cuts: AtomicU32,
    /// While in its slowstart: when it ends, in nanoseconds from the
    /// board's epoch; 0 otherwise.
    ramp_until: AtomicU64,
}

/// The last active check of a server: how it ended, and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastCheck {
    /// Its status and what it saw.
    pub verdict: Verdict,
    /// From the start of the connect to the verdict.
    pub took: Duration,
}

/// How many active checks of one server succeeded and failed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckCounts {
    /// Checks that connected.
    pub successes: u64,
    /// Checks refused, unreachable or unanswered within their timeout.
    pub failures: u64,
}

/// Where one server stands: up or down, and how far into `fall` (while
/// up) or `rise` (while down) it is. What an upgrade carries from the old
/// process to the new one, so that a server known down stays down until it
/// passes `rise` checks (`ops/upgrade/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Up (traffic goes there) or down.
    pub up: bool,
    /// Failures in a row while up.
    pub failures: u32,
    /// Successful checks in a row while down.
    pub successes: u32,
}

/// Consecutive failures (counted while up) or successes (while down).
#[derive(Debug, Default)]
struct Streak {
    failures: u32,
    successes: u32,
}

/// Where a report comes from, for the rules and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Check,
    Traffic,
}

impl HealthBoard {
    /// `servers`: each backend's address and its `check` parameters (None:
    /// not checked). Every server starts up.
    pub fn new(frontend: &str, servers: &[(SocketAddr, Option<Check>)]) -> HealthBoard {
        let servers = servers
            .iter()
            .map(|&(addr, check)| ServerHealth {
                addr,
                label: addr.to_string(),
                check,
                up: AtomicBool::new(true),
                failing: AtomicBool::new(false),
                streak: Mutex::new(Streak::default()),
                check_successes: AtomicU64::new(0),
                check_failures: AtomicU64::new(0),
                last: Mutex::new(None),
                agent: Mutex::new(AgentState::default()),
                agent_out: AtomicBool::new(false),
                percent: AtomicU32::new(100),
                on_change: OnChange::default(),
                cuts: AtomicU32::new(0),
                ramp_until: AtomicU64::new(0),
            })
            .collect();
        HealthBoard {
            frontend: frontend.to_string(),
            servers,
            generation: AtomicU64::new(0),
            epoch: Instant::now(),
            admin: AdminBoard::default(),
            cut_listeners: Mutex::new(Vec::new()),
        }
    }

    /// The same board with the operator's states and weights (by default
    /// none: every server `ready` at its configured weight).
    pub fn with_admin(mut self, admin: AdminBoard) -> HealthBoard {
        self.admin = admin;
        self
    }

    /// What the operator says of each server (`policy/admin_state.rs`).
    pub fn admin(&self) -> &AdminBoard {
        &self.admin
    }

    /// Sets server `index`'s admin state and bumps the generation: every
    /// pick that starts after this returns sees it. Logged when it changes.
    /// False for an index beyond the board.
    pub fn set_admin_state(&self, index: usize, state: AdminState) -> bool {
        let before = self.admin.state(index);
        if !self.admin.store_state(index, state) {
            return false;
        }
        self.generation.fetch_add(1, Ordering::Release);
        if before != state {
            let name = self.servers.get(index).map(|s| self.name(s));
            let name = name.unwrap_or_default();
            crate::info!(
                "{name}: admin state {} -> {} (operator)",
                before.name(),
                state.name()
            );
        }
        true
    }

    /// Sets server `index`'s weight (0 to 256) and bumps the generation.
    /// `Ok(false)` for an index beyond the board.
    pub fn set_admin_weight(&self, index: usize, weight: u32) -> Result<bool, WeightOutOfRange> {
        let before = self.admin.weight(index);
        if !self.admin.store_weight(index, weight)? {
            return Ok(false);
        }
        self.generation.fetch_add(1, Ordering::Release);
        if let (Some(before), Some(server)) = (before, self.servers.get(index)) {
            if before != weight {
                let name = self.name(server);
                crate::info!("{name}: weight {before} -> {weight} (operator)");
            }
        }
        Ok(true)
    }

    /// Cuts server `index`'s open connections on the operator's behalf
    /// (`shutdown sessions server`): each resets both sides and logs `KD`.
    /// False for an index beyond the board.
    pub fn shutdown_sessions(&self, index: usize) -> bool {
        let Some(server) = self.servers.get(index) else {
            return false;
        };
        self.admin.note_cut(index, true);
        crate::warn!(
            "{}: cutting its connections (operator: shutdown sessions)",
            self.name(server)
        );
        self.cut_connections(server);
        true
    }

    /// The same board with what each server's changes of state do, in
    /// order (by default: nothing but the balancing).
    pub fn with_changes(mut self, changes: impl IntoIterator<Item = OnChange>) -> HealthBoard {
        for (server, on_change) in self.servers.iter_mut().zip(changes) {
            server.on_change = on_change;
        }
        self
    }

    /// The same board with the servers' names for its log lines, in
    /// order (`db1 (127.0.0.1:9001)`; by default each server's address).
    pub fn with_labels(mut self, labels: impl IntoIterator<Item = String>) -> HealthBoard {
        for (server, label) in self.servers.iter_mut().zip(labels) {
            server.label = label;
        }
        self
    }

    /// Where server `index` is.
    pub fn addr(&self, index: usize) -> SocketAddr {
        self.servers[index].addr
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// No servers at all?
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Is server `index` in rotation: up by its checks, and not kept out by
    /// its agent? (Every method taking an index panics if it is out of
    /// range, like the `Balancer`'s.)
    pub fn is_up(&self, index: usize) -> bool {
        let server = &self.servers[index];
        server.up.load(Ordering::Acquire) && !server.agent_out.load(Ordering::Acquire)
    }

    /// The weight its agent asks for server `index`, in percent of the
    /// configured one (100 without an agent; 0 while it drains).
    pub fn weight_percent(&self, index: usize) -> u32 {
        self.servers[index].percent.load(Ordering::Acquire)
    }

    /// Server `index`'s last active check, if it had one.
    pub fn last_check(&self, index: usize) -> Option<LastCheck> {
        let last = self.servers[index].last.lock();
        last.unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What server `index`'s agent has said (the default if it has none).
    pub fn agent(&self, index: usize) -> AgentState {
        let agent = self.servers[index].agent.lock();
        agent.unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Changes so far: compare with the last value seen to know whether to
    /// copy the flags again.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Server `index`'s check parameters, if it is checked.
    pub fn checked(&self, index: usize) -> Option<Check> {
        self.servers[index].check
    }

    /// Server `index`'s check results so far (zero for a server without
    /// `check`). Relaxed reads: a metric, not a decision.
    pub fn check_counts(&self, index: usize) -> CheckCounts {
        let server = &self.servers[index];
        CheckCounts {
            successes: server.check_successes.load(Ordering::Relaxed),
            failures: server.check_failures.load(Ordering::Relaxed),
        }
    }

    /// Where server `index` stands now.
    pub fn standing(&self, index: usize) -> Standing {
        let server = &self.servers[index];
        let streak = server.streak.lock().unwrap_or_else(PoisonError::into_inner);
        Standing {
            up: server.up.load(Ordering::Relaxed),
            failures: streak.failures,
            successes: streak.successes,
        }
    }

    /// Starts server `index` where `standing` says (a checked server only:
    /// one without `check` is always up). Before any traffic: a server
    /// seeded down bumps the generation, so every balancer copies it before
    /// its first pick. Streaks longer than this board's `fall` or `rise`
    /// (the new configuration may have shortened them) are cut to one short
    /// of the change, so the next report decides.
    pub fn seed(&self, index: usize, standing: Standing) {
        self.seed_as(index, standing, "as the previous process left it");
    }

    /// [`HealthBoard::seed`], its log line saying `why` (a reload keeps a
    /// server's standing too: `epoll/carry.rs`).
    pub fn seed_as(&self, index: usize, standing: Standing, why: &str) {
        let server = &self.servers[index];
        let Some(check) = server.check else {
            return;
        };
        let mut streak = server.streak.lock().unwrap_or_else(PoisonError::into_inner);
        streak.failures = match standing.up {
            true => standing.failures.min(check.fall.saturating_sub(1)),
            false => 0,
        };
        streak.successes = match standing.up {
            true => 0,
            false => standing.successes.min(check.rise.saturating_sub(1)),
        };
        server.failing.store(streak.failures > 0, Ordering::Relaxed);
        if server.up.load(Ordering::Relaxed) != standing.up {
            self.set_up(server, standing.up);
            let state = if standing.up { "UP" } else { "DOWN" };
            crate::info!("{} is {state}: {why}", self.name(server));
        }
    }

    /// Server `index`'s last check is `last` (carried from the board a
    /// reload replaces, for the views, until its own first check).
    pub fn keep_last(&self, index: usize, last: LastCheck) {
        let server = &self.servers[index];
        let mut kept = server.last.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get_or_insert(last);
    }

    /// A real client's connect to server `index` failed, because of `why`.
    pub fn passive_failure(&self, index: usize, why: &str) {
        self.report(index, Source::Traffic, Err(why));
    }

    /// A real client's connect to server `index` succeeded. One atomic load
    /// unless a failure streak is in progress (module docs).
    pub fn passive_success(&self, index: usize) {
        if self.servers[index].failing.load(Ordering::Relaxed) {
            self.report(index, Source::Traffic, Ok("connected"));
        }
    }

    /// The outcome of an active check of server `index`, which took `took`.
    pub fn check_result(&self, index: usize, verdict: Verdict, took: Duration) {
        let server = &self.servers[index];
        if server.check.is_some() {
            let count = match verdict.status.is_ok() {
                true => &server.check_successes,
                false => &server.check_failures,
            };
            count.fetch_add(1, Ordering::Relaxed);
        }
        let result = match verdict.status.is_ok() {
            true => Ok(verdict.detail.as_str()),
            false => Err(verdict.detail.as_str()),
        };
        self.report(index, Source::Check, result);
        let last = LastCheck { verdict, took };
        *server.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(last);
        self.step_ramp(index);
    }

    /// What server `index`'s agent said: `line`, read as `reply`. A change
    /// of rotation or weight bumps the generation and is logged.
    pub fn agent_result(&self, index: usize, line: &str, reply: &AgentReply) {
        let server = &self.servers[index];
        let mut agent = server.agent.lock().unwrap_or_else(PoisonError::into_inner);
        let before = (agent.is_out(), agent.weight_percent());
        agent.apply(line, reply);
        let after = (agent.is_out(), agent.weight_percent());
        if !reply.unknown.is_empty() {
            let words = reply.unknown.join(" ");
            crate::debug!(
                "{}: agent said {line:?}: ignored '{words}'",
                self.name(server)
            );
        }
        if before == after {
            return;
        }
        server.agent_out.store(after.0, Ordering::Release);
        server.percent.store(after.1, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
        let name = self.name(server);
        let state = agent.describe();
        match (before.0, after.0) {
            (false, true) => crate::warn!("{name} is DOWN: its agent says '{line}' ({state})"),
            (true, false) => crate::info!("{name} is back: its agent says '{line}' ({state})"),
            _ => crate::info!(
                "{name}: weight {}% of its configured one: its agent says '{line}' ({state})",
                after.1
            ),
        }
    }

    /// The state machine of the module docs.
    /// `result`: what was seen (`Ok`), or why it failed.
    fn report(&self, index: usize, source: Source, result: Result<&str, &str>) {
        let server = &self.servers[index];
        let Some(check) = server.check else {
            return; // not checked: always up
        };
        // Only counting and logging happen under this lock, so a panic
        // cannot leave the counters half-updated; if one ever poisoned it,
        // the numbers would still be valid, so take the guard back rather
        // than spread one panic to every event loop.
        let mut streak = server.streak.lock().unwrap_or_else(PoisonError::into_inner);
        let up = server.up.load(Ordering::Relaxed); // only written under this lock
        match (up, result) {
            (true, Ok(_)) => {
                streak.failures = 0;
                server.failing.store(false, Ordering::Relaxed);
            }
            (true, Err(why)) => {
                streak.failures = streak.failures.saturating_add(1);
                if streak.failures < check.fall {
                    server.failing.store(true, Ordering::Relaxed);
                    let (n, fall) = (streak.failures, check.fall);
                    crate::debug!(
                        "{}: {source} failed ({n} of {fall}): {why}",
                        self.name(server)
                    );
                    return;
                }
                let failures = streak.failures;
                *streak = Streak::default();
                server.failing.store(false, Ordering::Relaxed);
                self.set_up(server, false);
                // Logged under the lock, so that two changes of one server
                // are always logged in the order they happened.
                let name = self.name(server);
                let streak = in_a_row(failures, "failure");
                crate::warn!("{name} is DOWN: {streak} (last: {source}: {why})");
                self.went_down(server);
            }
            (false, _) if source == Source::Traffic => {} // no traffic goes there anyway
            (false, Ok(seen)) => {
                streak.successes = streak.successes.saturating_add(1);
                if streak.successes >= check.rise {
                    let successes = streak.successes;
                    *streak = Streak::default();
                    self.set_up(server, true);
                    let name = self.name(server);
                    let streak = in_a_row(successes, "successful check");
                    crate::info!("{name} is UP: {streak} (last: {seen})");
                    self.came_up(server);
                }
            }
            (false, Err(_)) => streak.successes = 0,
        }
    }

    /// A server just marked down: its connections cut, if it says so
    /// (each sees its server's [`HealthBoard::cuts`] move when its worker
    /// wakes it).
    fn went_down(&self, server: &ServerHealth) {
        server.ramp_until.store(0, Ordering::Relaxed);
        if server.on_change.cut_when_down {
            crate::warn!(
                "{}: cutting its connections (on-marked-down shutdown-sessions)",
                self.name(server)
            );
            if let Some(index) = self.index_of(server) {
                self.admin.note_cut(index, false);
            }
            self.cut_connections(server);
        }
    }

    /// The index of `server`, one of this board's.
    fn index_of(&self, server: &ServerHealth) -> Option<usize> {
        self.servers.iter().position(|s| std::ptr::eq(s, server))
    }

    /// A server just back up: its slowstart begins, and its group's backups
    /// lose their connections, if it says so.
    fn came_up(&self, server: &ServerHealth) {
        if let Some(ramp) = server.on_change.slowstart {
            let until = self.epoch.elapsed() + ramp;
            let nanos = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX).max(1);
            server.ramp_until.store(nanos, Ordering::Relaxed);
        }
        for &backup in &server.on_change.cut_when_up {
            if let Some(backup) = self.servers.get(backup) {
                crate::info!(
                    "{}: cutting its connections: {} is back (on-marked-up \
                     shutdown-backup-sessions)",
                    self.name(backup),
                    server.label
                );
                if let Some(index) = self.index_of(backup) {
                    self.admin.note_cut(index, false);
                }
                self.cut_connections(backup);
            }
        }
    }

    /// How many times server `index`'s connections were cut so far (it was
    /// marked down with `on-marked-down shutdown-sessions`, a normal server
    /// of its group came back with `on-marked-up shutdown-backup-sessions`,
    /// or the operator said `shutdown sessions`): a connection notes it as
    /// its relay begins, and is cut once it changes.
    pub fn cuts(&self, index: usize) -> u32 {
        self.servers
            .get(index)
            .map_or(0, |s| s.cuts.load(Ordering::Acquire))
    }

    /// Makes every cut wake `notify` (a worker's orders, which its relaying
    /// connections wait on), once per worker however often it asks.
    pub fn wake_on_cuts(&self, notify: &Arc<Notify>) {
        let mut listeners = self
            .cut_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !listeners.iter().any(|n| Arc::ptr_eq(n, notify)) {
            listeners.push(notify.clone());
        }
    }

    /// Cuts `server`'s connections: its count first (Release), then the
    /// wake-ups, so that a woken connection sees the new count.
    fn cut_connections(&self, server: &ServerHealth) {
        server.cuts.fetch_add(1, Ordering::Release);
        let listeners = self
            .cut_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for notify in listeners.iter() {
            notify.notify_all();
        }
    }

    /// How far server `index` is into its slowstart at `now`: (elapsed,
    /// whole), or `None` when it is not in one (it never went down and
    /// came back, or its slowstart is over).
    pub fn ramp(&self, index: usize, now: Instant) -> Option<(Duration, Duration)> {
        let server = &self.servers[index];
        let until = server.ramp_until.load(Ordering::Relaxed);
        let whole = server.on_change.slowstart?;
        let now = now.saturating_duration_since(self.epoch);
        let left = Duration::from_nanos(until).checked_sub(now)?;
        (until != 0 && !left.is_zero()).then(|| (whole.saturating_sub(left), whole))
    }

    /// The share of its configured weight server `index` gets at `now`, in
    /// percent: its agent's ([`HealthBoard::weight_percent`]), and during
    /// its slowstart a part of that which grows with the time elapsed, at
    /// least 1% (0, a drained server, stays 0), as HAProxy's.
    pub fn weight_percent_now(&self, index: usize, now: Instant) -> u32 {
        let percent = self.weight_percent(index);
        match self.ramp(index, now) {
            Some((elapsed, whole)) if percent > 0 => scaled(percent, elapsed, whole).max(1),
            _ => percent,
        }
    }

    /// Server `index`'s `maxconn` at `now`: during its slowstart a share
    /// of it that grows with the time elapsed, at least 1.
    pub fn maxconn_now(&self, index: usize, maxconn: Option<u32>, now: Instant) -> Option<u32> {
        let max = maxconn?;
        Some(match self.ramp(index, now) {
            Some((elapsed, whole)) => scaled(max, elapsed, whole).max(1),
            None => max,
        })
    }

    /// After each check of a server in its slowstart: the balancers copy
    /// its grown weight (the generation moves), once more when it ends.
    fn step_ramp(&self, index: usize) {
        let server = &self.servers[index];
        if server.ramp_until.load(Ordering::Relaxed) == 0 {
            return;
        }
        if self.ramp(index, Instant::now()).is_none() {
            server.ramp_until.store(0, Ordering::Relaxed);
            crate::info!("{}: slowstart over, at full weight", self.name(server));
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Stores a new up flag, then bumps the generation: a loop that sees the
    /// new generation (Acquire) sees the new flag.
    fn set_up(&self, server: &ServerHealth, up: bool) {
        server.up.store(up, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// `frontend web: backend db1 (127.0.0.1:9001)`, the start of every
    /// log line (`backend 127.0.0.1:9001` for a server without a name).
    fn name(&self, server: &ServerHealth) -> String {
        format!("frontend {}: backend {}", self.frontend, server.label)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Check => "check",
            Source::Traffic => "traffic",
        })
    }
}

/// `value × elapsed / whole`, in integers (u128: no overflow).
fn scaled(value: u32, elapsed: Duration, whole: Duration) -> u32 {
    let whole = whole.as_nanos().max(1);
    let share = u128::from(value) * elapsed.as_nanos().min(whole) / whole;
    u32::try_from(share).unwrap_or(value)
}

/// `1 consecutive failure`, `3 consecutive failures`.
fn in_a_row(n: u32, what: &str) -> String {
    format!("{n} consecutive {what}{}", if n == 1 { "" } else { "s" })
}

/// An io error as a log reason: `connection refused` rather than std's
/// `Connection refused (os error 111)`. For passive reports too, so that
/// both sources read alike.
pub fn reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error ").next().unwrap_or_default();
    // Lowercase "Connection ...", but leave "I/O error" or "EOF" alone.
    match text.chars().nth(1) {
        Some(c) if c.is_lowercase() && text.is_char_boundary(1) => {
            text[..1].to_lowercase() + &text[1..]
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::check::Status;
    use super::*;
    use runtime::notify::Notified;

    fn check(fall: u32, rise: u32) -> Option<Check> {
        let (inter, timeout) = (Duration::from_millis(50), Duration::from_millis(500));
        Some(Check {
            inter,
            fall,
            rise,
            timeout,
        })
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    const TOOK: Duration = Duration::from_millis(3);

    fn failed(why: &str) -> Verdict {
        Verdict::failed(Status::L4Con, why)
    }

    /// One checked server (fall 3, rise 2), one unchecked.
    fn board() -> HealthBoard {
        HealthBoard::new("web", &[(addr(9001), check(3, 2)), (addr(9002), None)])
    }

    /// Feeds server 0 the reports of `script` (`f`/`s`: a check failed or
    /// succeeded; `F`/`S`: a client's connect did) and returns the state
    /// after each, `U`p or `D`own.
    fn trace(board: &HealthBoard, script: &str) -> String {
        let refused = "connection refused";
        let mut states = String::new();
        for event in script.chars() {
            match event {
                'f' => board.check_result(0, failed(refused), TOOK),
                's' => board.check_result(0, Verdict::passed("connected"), TOOK),
                'F' => board.passive_failure(0, refused),
                'S' => board.passive_success(0),
                _ => unreachable!("unknown event {event:?}"),
            }
            states.push(if board.is_up(0) { 'U' } else { 'D' });
        }
        states
    }

    #[test]
    fn fall_failures_in_a_row_mark_down_and_rise_successes_bring_up() {
        let b = board();
        assert_eq!(trace(&b, "fffffssss"), "UUDDDDUUU");
        assert_eq!(b.generation(), 2, "one bump per change, not per report");
    }

    #[test]
    fn a_success_resets_the_failures_and_a_failure_the_successes() {
        assert_eq!(trace(&board(), "ffsfff"), "UUUUUD");
        assert_eq!(trace(&board(), "fffsfss"), "UUDDDDU");
    }

    #[test]
    fn client_failures_count_with_check_failures_and_client_successes_reset() {
        assert_eq!(trace(&board(), "FfF"), "UUD");
        let b = board();
        assert_eq!(trace(&b, "ff"), "UU");
        assert!(
            b.servers[0].failing.load(Ordering::Relaxed),
            "a streak is on"
        );
        assert_eq!(trace(&b, "S"), "U");
        assert!(
            !b.servers[0].failing.load(Ordering::Relaxed),
            "fast path again"
        );
        assert_eq!(trace(&b, "fff"), "UUD");
    }

    #[test]
    fn traffic_is_ignored_while_down() {
        let b = board();
        assert_eq!(trace(&b, "fffSFSFsFs"), "UUDDDDDDDU");
        assert_eq!(b.generation(), 2);
    }

    #[test]
    fn check_results_are_counted_for_checked_servers_only() {
        let b = board();
        trace(&b, "ffsFS");
        let counts = b.check_counts(0);
        assert_eq!(
            (counts.successes, counts.failures),
            (1, 2),
            "traffic is not a check"
        );
        b.check_result(1, failed("connection refused"), TOOK);
        assert_eq!(b.check_counts(1), CheckCounts::default());
    }

    #[test]
    fn an_unchecked_server_is_always_up() {
        let b = board();
        for _ in 0..100 {
            b.passive_failure(1, "connection refused");
            b.check_result(1, failed("connection refused"), TOOK);
        }
        assert!(b.is_up(1) && b.checked(1).is_none() && b.generation() == 0);
    }

    // A server the old process knew to be down starts down in the
    // new one, and needs `rise` checks to come back; its streaks carry over.
    #[test]
    fn a_seeded_standing_carries_over_down_until_rise_checks() {
        let old = board();
        trace(&old, "fffs");
        let standing = old.standing(0);
        assert_eq!(
            standing,
            Standing {
                up: false,
                failures: 0,
                successes: 1
            }
        );
        let new = board();
        new.seed(0, standing);
        assert!(!new.is_up(0));
        assert_eq!(
            new.generation(),
            1,
            "a balancer copies it before its first pick"
        );
        assert_eq!(trace(&new, "s"), "U", "one more success makes rise 2");
        let failing = board();
        failing.seed(
            0,
            Standing {
                up: true,
                failures: 7,
                successes: 0,
            },
        );
        assert_eq!(trace(&failing, "f"), "D", "cut to one short of fall 3");
        new.seed(
            1,
            Standing {
                up: false,
                failures: 0,
                successes: 0,
            },
        );
        assert!(new.is_up(1), "an unchecked server is always up");
    }

    /// Whether `notified` completes within a second.
    fn fires(notified: Notified<'_>) -> bool {
        let rt = runtime::Runtime::new().expect("a runtime");
        rt.block_on(async {
            runtime::time::timeout(Duration::from_secs(1), notified)
                .await
                .is_ok()
        })
    }

    #[test]
    fn a_change_cuts_connections_and_a_server_back_up_ramps_its_weight() {
        let board = HealthBoard::new(
            "web",
            &[
                (addr(1), check(1, 1)),
                (addr(2), None),
                (addr(3), check(1, 1)),
            ],
        )
        .with_changes([
            OnChange {
                cut_when_down: true,
                slowstart: Some(Duration::from_secs(100)),
                ..OnChange::default()
            },
            OnChange::default(),
            OnChange {
                cut_when_up: vec![1],
                ..OnChange::default()
            },
        ]);
        // Up from the start: no slowstart (HAProxy's: never at startup).
        assert_eq!(board.weight_percent_now(0, Instant::now()), 100);
        let worker = Arc::new(Notify::new());
        board.wake_on_cuts(&worker);
        board.wake_on_cuts(&worker);
        assert_eq!(board.cut_listeners.lock().map(|l| l.len()).ok(), Some(1));
        let woken = worker.notified();
        let before = [board.cuts(0), board.cuts(2)];
        board.check_result(0, failed("refused"), TOOK);
        assert!(!board.is_up(0));
        assert!(fires(woken), "a cut wakes the workers");
        assert_ne!(
            board.cuts(0),
            before[0],
            "marked down: its connections are cut"
        );
        assert_eq!(board.cuts(2), before[1], "another server's are not");
        // Back up: its weight and maxconn start at a sliver.
        board.check_result(0, Verdict::passed("connected"), TOOK);
        let now = Instant::now();
        let (elapsed, whole) = board.ramp(0, now).expect("in its slowstart");
        assert!(elapsed < Duration::from_secs(5) && whole == Duration::from_secs(100));
        assert!(board.weight_percent_now(0, now) <= 5);
        assert!(board.maxconn_now(0, Some(1000), now) <= Some(50));
        let later = now + Duration::from_secs(50);
        assert!((49..=51).contains(&board.weight_percent_now(0, later)));
        assert_eq!(
            board.weight_percent_now(0, now + Duration::from_secs(101)),
            100
        );
        assert_eq!(board.maxconn_now(0, None, now), None);
        // Server 2 back up cuts server 1's connections (its backup).
        let backup = board.cuts(1);
        board.check_result(2, failed("refused"), TOOK);
        let woken = worker.notified();
        board.check_result(2, Verdict::passed("connected"), TOOK);
        assert!(fires(woken));
        assert_ne!(board.cuts(1), backup);
    }

    #[test]
    fn the_last_check_is_kept_for_the_metrics_and_the_dump() {
        let b = board();
        assert_eq!(b.last_check(0), None);
        let verdict = Verdict::failed(Status::L7Sts, "redis: expected +PONG, got \"-ERR\"");
        b.check_result(0, verdict.clone(), TOOK);
        let last = b.last_check(0).expect("a check ran");
        assert_eq!((last.verdict, last.took), (verdict, TOOK));
    }

    #[test]
    fn the_agent_steers_rotation_and_weight_checked_or_not() {
        let b = board();
        let say = |line: &str| {
            let before = b.generation();
            b.agent_result(1, line, &AgentReply::parse(line));
            (b.is_up(1), b.weight_percent(1), b.generation() - before)
        };
        assert_eq!(say("up 50%"), (true, 50, 1));
        assert_eq!(say("up 50%"), (true, 50, 0), "no change, no bump");
        assert_eq!(say("drain"), (true, 0, 1));
        assert_eq!(say("down # disk full"), (false, 0, 1));
        assert_eq!(say("up ready"), (true, 50, 1));
        assert_eq!(b.agent(1).last, "up ready");
        // Checked: both must agree for the server to be in rotation.
        trace(&b, "fff");
        assert!(!b.is_up(0));
        b.agent_result(0, "up", &AgentReply::parse("up"));
        assert!(!b.is_up(0), "the agent's up does not override the checks");
    }

    #[test]
    fn io_errors_read_as_short_reasons() {
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(reason(&refused), "connection refused");
        assert_eq!(reason(&io::Error::other("I/O error")), "I/O error");
    }
}
