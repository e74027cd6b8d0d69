//! The exposition: every counter of every worker, summed, with each
//! backend's health, in the Prometheus text exposition format 0.0.4 (what
//! `GET /metrics` answers).
//!
//! Why `Relaxed` loads are enough: a scrape wants each number, not a
//! relation between numbers; a counter read a moment early is simply the
//! value of a moment earlier. The numbers of one scrape are therefore not one
//! instant's snapshot (two counters may be read a few microseconds apart),
//! which Prometheus expects of any exporter.
//!
//! Health (up or down, check results) is not counted in the workers'
//! counters: it is read from each frontend's [`HealthBoard`] at scrape time.
//! The process's own figures come from [`Process`].
//!
//! The families are tables (name, type, help, where the value comes from),
//! so a metric is named once and its help text sits beside it.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use crate::policy::address::AddressBook;
use crate::policy::check::Status;
use crate::policy::health::HealthBoard;

use super::counters::{BackendCounters, FrontendCounters, MoveCounters};
use super::process::Process;
use super::rates::Rates;
use crate::policy::admin_state::AdminState;

/// One frontend as [`Registry::from_counters`] takes it.
#[derive(Debug)]
pub struct FrontendParts {
    /// Its name.
    pub name: String,
    /// Its backends, by index: address, group and name (their labels).
    pub backends: Vec<ServerLabels>,
    /// Each backend's configured `weight`, by index (0: drained, never
    /// picked for a new connection).
    pub weights: Vec<u32>,
    /// Its health board.
    pub board: Arc<HealthBoard>,
    /// Where its backends are now (`None`: every one at its address).
    pub addresses: Option<Arc<AddressBook>>,
    /// One set of counters per worker.
    pub counters: Vec<Arc<FrontendCounters>>,
    /// The labels of its routing counters ([`FrontendCounters::routes`]:
    /// the rule, the group), none without `use-group` rules.
    pub routes: Vec<(String, String)>,
}

/// What a backend's samples are labelled with: `backend` (its address as
/// written, the label it always had: a host name stays the label whatever
/// it resolves to, so that no series changes with an answer), `group` (its
/// group: the frontend's name for the frontend's own lines) and `server`
/// (its name; its address for a line without one). `frontend` comes first
/// on every sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLabels {
    /// Its address as written (`127.0.0.1:9001`, `db.internal:5432`).
    pub addr: String,
    /// Its group's name.
    pub group: String,
    /// Its name.
    pub name: String,
}

impl ServerLabels {
    /// A backend of the frontend `frontend`'s own lines, named by its address.
    pub fn unnamed(frontend: &str, addr: SocketAddr) -> ServerLabels {
        ServerLabels {
            addr: addr.to_string(),
            group: frontend.to_string(),
            name: addr.to_string(),
        }
    }
}

/// The registry the admin endpoint renders now: a reload swaps in a new one
/// (new frontends, new backends) in one step. The lock is taken by scrapes
/// and reloads only; workers hold their counters directly.
#[derive(Debug)]
pub struct Published {
    current: Mutex<Arc<Registry>>,
    /// How far a stop has gone: 0 running, else a [`Stopping`] phase
    /// (`/health` then answers 503).
    stopping: AtomicU8,
    /// The rows' rates and recent history, sampled by the admin thread
    /// (`ops/admin/views.rs`), kept by name across reloads.
    rates: Rates,
}

/// The phases of a graceful stop that `/health` reports (ops/shutdown.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopping {
    /// Still accepting and serving, but asking to be taken out of the
    /// rotation (`shutdown-delay`).
    Lameduck = 1,
    /// No longer accepting; open connections finish.
    Draining = 2,
}

impl Stopping {
    /// Its name, as `/health` answers it.
    pub fn name(self) -> &'static str {
        match self {
            Stopping::Lameduck => "lameduck",
            Stopping::Draining => "draining",
        }
    }
}

impl Published {
    /// Publishes `registry`.
    pub fn new(registry: Arc<Registry>) -> Arc<Published> {
        Arc::new(Published {
            current: Mutex::new(registry),
            stopping: AtomicU8::new(0),
            rates: Rates::new(),
        })
    }

    /// The rows' rates and recent history.
    pub fn rates(&self) -> &Rates {
        &self.rates
    }

    /// Replaces what is published.
    pub fn set(&self, registry: Arc<Registry>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = registry;
    }

    /// The registry published now.
    pub fn get(&self) -> Arc<Registry> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the phase a graceful stop has reached.
    pub fn set_stopping(&self, phase: Stopping) {
        self.stopping.store(phase as u8, Relaxed);
    }

    /// The phase of the graceful stop under way, if one is.
    pub fn stopping(&self) -> Option<Stopping> {
        match self.stopping.load(Relaxed) {
            1 => Some(Stopping::Lameduck),
            2 => Some(Stopping::Draining),
            _ => None,
        }
    }

    /// What a scrape answers: [`Registry::render`] of the current registry.
    pub fn render(&self) -> String {
        self.get().render()
    }
}

/// One frontend of a [`Registry`], for the views (`ops/admin/views.rs`):
/// its counters are summed with [`Registry::frontend_sum`] and
/// [`Registry::backend_sum`] at `index`.
#[derive(Debug, Clone, Copy)]
pub struct FrontendView<'a> {
    /// Its place in the registry.
    pub index: usize,
    /// Its name.
    pub name: &'a str,
    /// Its servers' labels, by index.
    pub servers: &'a [ServerLabels],
    /// Its servers' configured weights, by index.
    pub weights: &'a [u32],
    /// Its health board.
    pub board: &'a HealthBoard,
}

/// What [`Registry::frontend_health`] finds: a frontend with no usable
/// server cannot serve a new client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontendHealth {
    /// Servers up with a weight above 0 (backups included).
    pub usable: usize,
    /// All its servers.
    pub servers: usize,
}

/// Every counter of the process: the frontends' names, their backends'
/// addresses and health boards, and each worker's counters.
#[derive(Debug, Clone)]
pub struct Registry {
    frontends: Vec<FrontendInfo>,
    /// `counters[worker][frontend]`.
    counters: Vec<Vec<Arc<FrontendCounters>>>,
    /// Connections moved by upgrades (the epoll mode's).
    moves: Option<Arc<MoveCounters>>,
}

#[derive(Debug, Clone)]
struct FrontendInfo {
    name: String,
    backends: Vec<ServerLabels>,
    /// Each backend's weight, by index.
    weights: Vec<u32>,
    board: Arc<HealthBoard>,
    addresses: Option<Arc<AddressBook>>,
    /// The labels (rule, group) of its routing counters, by index.
    routes: Vec<(String, String)>,
}

impl Registry {
    /// A registry for `frontends` (each: its name, its backends' addresses
    /// by index, its health board) and `workers` event loops (at least one
    /// is counted, as the epoll mode runs at least one).
    pub fn new(
        frontends: &[(String, Vec<SocketAddr>, Arc<HealthBoard>)],
        workers: usize,
    ) -> Arc<Registry> {
        let counters = (0..workers.max(1))
            .map(|_| {
                frontends
                    .iter()
                    .map(|(_, backends, _)| Arc::new(FrontendCounters::new(backends.len())))
                    .collect()
            })
            .collect();
        let frontends = frontends
            .iter()
            .map(|(name, backends, board)| FrontendInfo {
                name: name.clone(),
                backends: backends
                    .iter()
                    .map(|&addr| ServerLabels::unnamed(name, addr))
                    .collect(),
                weights: vec![1; backends.len()],
                board: board.clone(),
                addresses: None,
                routes: Vec::new(),
            })
            .collect();
        Arc::new(Registry {
            frontends,
            counters,
            moves: None,
        })
    }

    /// A registry over counters that already exist: for each frontend, its
    /// name, backends, health board and one [`FrontendCounters`] per worker
    /// (all frontends with the same number of workers). A reload builds one
    /// this way, so that a frontend it did not change keeps counting on.
    pub fn from_counters(frontends: Vec<FrontendParts>) -> Arc<Registry> {
        let workers = frontends
            .iter()
            .map(|f| f.counters.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut counters: Vec<Vec<Arc<FrontendCounters>>> = vec![Vec::new(); workers];
        let mut infos = Vec::new();
        for parts in frontends {
            for (worker, row) in counters.iter_mut().enumerate() {
                // A frontend short of counters for a worker reads as zeros.
                let mine = parts.counters.get(worker).cloned().unwrap_or_else(|| {
                    Arc::new(FrontendCounters::with_routes(
                        parts.backends.len(),
                        parts.routes.len(),
                    ))
                });
                row.push(mine);
            }
            infos.push(FrontendInfo {
                name: parts.name,
                backends: parts.backends,
                weights: parts.weights,
                board: parts.board,
                addresses: parts.addresses,
                routes: parts.routes,
            });
        }
        Arc::new(Registry {
            frontends: infos,
            counters,
            moves: None,
        })
    }

    /// The same registry, showing the process's moved connections too.
    pub fn with_moves(self: Arc<Self>, moves: Arc<MoveCounters>) -> Arc<Registry> {
        let mut registry = Arc::unwrap_or_clone(self);
        registry.moves = Some(moves);
        Arc::new(registry)
    }

    /// Whether frontend `name` can serve a new client now: how many of its
    /// servers are usable (up, with a weight above 0, not in the
    /// operator's `drain` or `maint`, HAProxy's `nbsrv`, and with an
    /// address), out of how many. `None` if no frontend has
    /// that name.
    pub fn frontend_health(&self, name: &str) -> Option<FrontendHealth> {
        let frontend = self.frontends.iter().find(|f| f.name == name)?;
        let servers = frontend.backends.len();
        let located = |i: usize| {
            frontend
                .addresses
                .as_ref()
                .is_none_or(|a| a.get(i).is_some())
        };
        let usable = (0..servers.min(frontend.board.len()))
            .filter(|&i| frontend.board.is_up(i) && frontend.board.admin().takes_new(i))
            .filter(|&i| {
                let admin = frontend.board.admin().weight(i);
                admin.or(frontend.weights.get(i).copied()) != Some(0)
            })
            .filter(|&i| located(i))
            .count();
        Some(FrontendHealth { usable, servers })
    }

    /// Every frontend, in order, as the views read it.
    pub fn frontends(&self) -> impl Iterator<Item = FrontendView<'_>> {
        self.frontends
            .iter()
            .enumerate()
            .map(|(index, f)| FrontendView {
                index,
                name: &f.name,
                servers: &f.backends,
                weights: &f.weights,
                board: &f.board,
            })
    }

    /// Frontend `name`'s health board (which holds the operator's states
    /// and weights) and its servers' labels by index, for the admin
    /// actions (`ops/admin/actions.rs`).
    pub fn servers(&self, name: &str) -> Option<(&Arc<HealthBoard>, &[ServerLabels])> {
        let frontend = self.frontends.iter().find(|f| f.name == name)?;
        Some((&frontend.board, &frontend.backends))
    }

    /// Every frontend's name, in order.
    pub fn frontend_names(&self) -> Vec<&str> {
        self.frontends.iter().map(|f| f.name.as_str()).collect()
    }

    /// How many workers' counters are kept.
    pub fn workers(&self) -> usize {
        self.counters.len()
    }

    /// The counters worker `worker` keeps for frontend `frontend` (by their
    /// indexes in the configuration): what a worker's state holds, and the
    /// only thread that writes them.
    ///
    /// # Panics
    ///
    /// If either index is out of range: a mistake in the caller, not
    /// something a peer can cause.
    pub fn worker(&self, worker: usize, frontend: usize) -> Arc<FrontendCounters> {
        self.counters[worker][frontend].clone()
    }

    /// Every metric, summed over the workers, in the Prometheus text
    /// exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut out = Exposition::default();
        self.render_frontends(&mut out);
        self.render_routes(&mut out);
        self.render_backends(&mut out);
        if let Some(moves) = &self.moves {
            render_moves(&mut out, moves);
        }
        render_process(&mut out, &Process::read());
        out.text
    }

    /// The sum over workers of one counter of frontend `index`.
    pub fn frontend_sum(&self, index: usize, counter: FrontendCounter) -> u64 {
        self.counters
            .iter()
            .map(|worker| counter(&worker[index]).load(Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// The sum over workers of one counter of backend `backend` of
    /// frontend `frontend`.
    pub fn backend_sum(&self, frontend: usize, backend: usize, counter: BackendCounter) -> u64 {
        self.counters
            .iter()
            .filter_map(|worker| worker[frontend].backends.get(backend))
            .map(|counters| counter(counters).load(Relaxed))
            .fold(0, u64::wrapping_add)
    }

    fn render_frontends(&self, out: &mut Exposition) {
        if self.frontends.is_empty() {
            return;
        }
        for &(name, kind, help, counter) in FRONTEND_FAMILIES {
            out.family(name, kind, help);
            for (index, frontend) in self.frontends.iter().enumerate() {
                let labels = [("frontend", frontend.name.as_str())];
                out.sample(name, &labels, self.frontend_sum(index, counter));
            }
        }
    }

    /// `proxy_frontend_routed_total{frontend,rule,group}`: only frontends
    /// with `use-group` rules have samples, and without any the family is
    /// left out.
    fn render_routes(&self, out: &mut Exposition) {
        let name = "proxy_frontend_routed_total";
        if self.frontends.iter().all(|f| f.routes.is_empty()) {
            return;
        }
        let help = "Client connections by the use-group rule that chose their group; '(no sni)', \
                    '(no match)' and '(not tls)' count those sent to the default group, or \
                    refused (not-tls refuse).";
        out.family(name, Kind::Counter, help);
        for (index, frontend) in self.frontends.iter().enumerate() {
            for (slot, (rule, group)) in frontend.routes.iter().enumerate() {
                let sum = self
                    .counters
                    .iter()
                    .filter_map(|worker| worker[index].routes.get(slot))
                    .map(|c| c.load(Relaxed))
                    .fold(0, u64::wrapping_add);
                let labels = [
                    ("frontend", frontend.name.as_str()),
                    ("rule", rule.as_str()),
                    ("group", group.as_str()),
                ];
                out.sample(name, &labels, sum);
            }
        }
    }

    fn render_backends(&self, out: &mut Exposition) {
        // (frontend index, backend index, its labels)
        let mut backends = Vec::new();
        for (f, frontend) in self.frontends.iter().enumerate() {
            for (b, server) in frontend.backends.iter().enumerate() {
                let labels = [
                    ("frontend", frontend.name.clone()),
                    ("backend", server.addr.clone()),
                    ("group", server.group.clone()),
                    ("server", server.name.clone()),
                ];
                backends.push((f, b, labels));
            }
        }
        if backends.is_empty() {
            return;
        }
        for &(name, kind, help, counter) in BACKEND_FAMILIES {
            out.family(name, kind, help);
            for (f, b, labels) in &backends {
                out.sample(name, &borrowed(labels), self.backend_sum(*f, *b, counter));
            }
        }
        // Health, read from the boards. A board shorter than the list of
        // addresses (a caller's mistake) leaves those backends out.
        for &(name, kind, help, read) in HEALTH_FAMILIES {
            out.family(name, kind, help);
            for (f, b, labels) in &backends {
                let board = &self.frontends[*f].board;
                if *b < board.len() {
                    out.sample(name, &borrowed(labels), read(board, *b));
                }
            }
        }
        self.render_last_checks(out, &backends);
        self.render_addresses(out, &backends);
        self.render_admin(out, &backends);
    }

    /// What the operator said of each server (`policy/admin_state.rs`):
    /// `proxy_server_admin_state`, one series per state, 1 for the one it
    /// is in (the usual way to export an enum), and `proxy_server_weight`.
    fn render_admin(&self, out: &mut Exposition, backends: &[(usize, usize, Labels)]) {
        let name = "proxy_server_admin_state";
        let help = "The operator's state of a server: 1 for the one it is in (ready: in \
                    rotation; drain: no new connection; maint: none, and no health check).";
        out.family(name, Kind::Gauge, help);
        for (f, b, labels) in backends {
            let admin = self.frontends[*f].board.admin();
            for state in AdminState::ALL {
                let [frontend, backend, group, server] = borrowed(labels);
                let labels = [frontend, backend, group, server, ("state", state.name())];
                out.sample(name, &labels, u8::from(admin.state(*b) == state));
            }
        }
        let name = "proxy_server_weight";
        let help =
            "A server's weight (0 to 256): its configured one, or the operator's (set weight).";
        out.family(name, Kind::Gauge, help);
        for (f, b, labels) in backends {
            let frontend = &self.frontends[*f];
            let weight = frontend.board.admin().weight(*b);
            let weight = weight.or(frontend.weights.get(*b).copied()).unwrap_or(0);
            out.sample(name, &borrowed(labels), weight);
        }
    }

    /// The backends written with a host name: where each connects now, and
    /// how its lookups go. The address is a label of its own family, one
    /// series per backend at a time: a new answer ends a series and starts
    /// another (as often as the name's records change), and every other
    /// family keeps its labels.
    fn render_addresses(&self, out: &mut Exposition, backends: &[(usize, usize, Labels)]) {
        let named: Vec<_> = backends
            .iter()
            .filter_map(|(f, b, labels)| {
                let book = self.frontends[*f].addresses.as_ref()?;
                book.lookup(*b)?;
                Some((book, *b, borrowed(labels)))
            })
            .collect();
        if named.is_empty() {
            return;
        }
        let name = "proxy_backend_address";
        let help = "Where a backend written with a host name connects now: 1, with its name's \
                    answer as the address label; 0 with address=\"\" before its first answer.";
        out.family(name, Kind::Gauge, help);
        for (book, b, labels) in &named {
            let at = book.get(*b).map_or(String::new(), |a| a.to_string());
            let [frontend, backend, group, server] = *labels;
            let labels = [frontend, backend, group, server, ("address", at.as_str())];
            out.sample(name, &labels, u8::from(!at.is_empty()));
        }
        let name = "proxy_backend_resolve_failures_total";
        let help = "Lookups of a backend's host name that failed (it keeps its last good address).";
        out.family(name, Kind::Counter, help);
        for (book, b, labels) in &named {
            out.sample(name, labels, book.failures(*b));
        }
        let name = "proxy_backend_resolve_failing";
        let help = "1 while the lookups of a backend's host name fail (since the last one that \
                    answered), else 0.";
        out.family(name, Kind::Gauge, help);
        for (book, b, labels) in &named {
            out.sample(name, labels, u8::from(book.failing(*b).is_some()));
        }
    }

    /// The last check of each checked backend that had one: its status,
    /// one sample per HAProxy status code (1 for the one it ended with,
    /// like HAProxy's `haproxy_server_check_status`), and how long it took.
    fn render_last_checks(&self, out: &mut Exposition, backends: &[(usize, usize, Labels)]) {
        let last: Vec<_> = backends
            .iter()
            .filter_map(|(f, b, labels)| {
                let board = &self.frontends[*f].board;
                let checked = *b < board.len() && board.checked(*b).is_some();
                let last = checked.then(|| board.last_check(*b)).flatten()?;
                Some((borrowed(labels), last))
            })
            .collect();
        if last.is_empty() {
            return;
        }
        let name = "proxy_backend_check_status";
        let help = "The last active check's status, HAProxy's codes: 1 for the one it ended with \
                    (L4OK connected, L7OK answered right; L4CON, L4TOUT, L7TOUT, L7RSP, L7STS failed).";
        out.family(name, Kind::Gauge, help);
        for (labels, check) in &last {
            for status in Status::ALL {
                let [frontend, backend, group, server] = *labels;
                let labels = [frontend, backend, group, server, ("status", status.code())];
                out.sample(name, &labels, u8::from(check.verdict.status == status));
            }
        }
        let name = "proxy_backend_check_duration_seconds";
        let help = "How long the last active check took, from its connect to its verdict.";
        out.family(name, Kind::Gauge, help);
        for (labels, check) in &last {
            out.sample(name, labels, Float(check.took.as_secs_f64()));
        }
    }
}

/// A backend's labels: frontend, backend (its address), group, server.
type Labels = [(&'static str, String); 4];

/// A backend's labels as [`Exposition::sample`] takes them.
fn borrowed(labels: &Labels) -> [(&'static str, &str); 4] {
    labels.each_ref().map(|(k, v)| (*k, v.as_str()))
}

/// How a family's samples behave: only ever up (and reset by a restart), or
/// up and down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// A family: its name, type, help text, and where its values come from.
type Family<Source> = (&'static str, Kind, &'static str, Source);
/// Where a frontend family's values come from.
pub type FrontendCounter = fn(&FrontendCounters) -> &AtomicU64;
/// Where a backend family's values come from.
pub type BackendCounter = fn(&BackendCounters) -> &AtomicU64;

/// Every frontend counter (its family's name, and the counter), gauges
/// left out: the totals an upgrade carries over, so that no total goes
/// backwards when a new process takes over.
pub fn frontend_totals() -> impl Iterator<Item = (&'static str, FrontendCounter)> {
    FRONTEND_FAMILIES
        .iter()
        .filter(|f| f.1 == Kind::Counter)
        .map(|f| (f.0, f.3))
}

/// Every backend counter, as [`frontend_totals`].
pub fn backend_totals() -> impl Iterator<Item = (&'static str, BackendCounter)> {
    BACKEND_FAMILIES
        .iter()
        .filter(|f| f.1 == Kind::Counter)
        .map(|f| (f.0, f.3))
}
type HealthReading = fn(&HealthBoard, usize) -> u64;

/// Every per-frontend family: name, type, help, and the counter it sums.
const FRONTEND_FAMILIES: &[Family<FrontendCounter>] = &[
    (
        "proxy_frontend_connections_total",
        Kind::Counter,
        "Client connections accepted.",
        |c| &c.connections,
    ),
    (
        "proxy_frontend_active_connections",
        Kind::Gauge,
        "Client connections open now.",
        |c| &c.active,
    ),
    (
        "proxy_frontend_bytes_in_total",
        Kind::Counter,
        "Bytes received from clients (and relayed to backends).",
        |c| &c.bytes_in,
    ),
    (
        "proxy_frontend_bytes_out_total",
        Kind::Counter,
        "Bytes sent to clients (received from backends).",
        |c| &c.bytes_out,
    ),
    (
        "proxy_frontend_connect_errors_total",
        Kind::Counter,
        "Clients refused because no backend could be connected (none up, or every try failed).",
        |c| &c.connect_errors,
    ),
    (
        "proxy_frontend_retries_total",
        Kind::Counter,
        "Backend connects retried on another backend after a failure.",
        |c| &c.retries,
    ),
    (
        "proxy_frontend_timeouts_total",
        Kind::Counter,
        "Connections ended by a relay timeout (idle, or half-closed too long).",
        |c| &c.timeouts,
    ),
    (
        "proxy_frontend_bytes_spliced_total",
        Kind::Counter,
        "Bytes either way moved by splice(2), inside the kernel (part of bytes in and out).",
        |c| &c.bytes_spliced,
    ),
    (
        "proxy_frontend_splice_fallbacks_total",
        Kind::Counter,
        "Connections whose sockets could not splice (EINVAL and the like) and went on by copy.",
        |c| &c.splice_fallbacks,
    ),
    (
        "proxy_frontend_denied_total",
        Kind::Counter,
        "Clients refused by access control (allow/deny lists, per-source limit).",
        |c| &c.denied,
    ),
    (
        "proxy_frontend_queue_timeouts_total",
        Kind::Counter,
        "Clients refused after waiting timeout queue for a backend below its maxconn.",
        |c| &c.queue_timeouts,
    ),
    (
        "proxy_frontend_queue_full_total",
        Kind::Counter,
        "Clients refused at once: every candidate backend at its maxconn and its queue at its maxqueue.",
        |c| &c.queue_full,
    ),
    (
        "proxy_accept_errors_total",
        Kind::Counter,
        "Errors returned by accept on the frontend's listeners (EMFILE and the like).",
        |c| &c.accept_errors,
    ),
    (
        "proxy_frontend_clients_gone_total",
        Kind::Counter,
        "Clients refused that had already gone (closed or reset) before they were served.",
        |c| &c.gone,
    ),
];

/// Every per-backend family counted by the workers.
const BACKEND_FAMILIES: &[Family<BackendCounter>] = &[
    (
        "proxy_backend_connections_total",
        Kind::Counter,
        "Connections established to the backend.",
        |c| &c.connections,
    ),
    (
        "proxy_backend_active_connections",
        Kind::Gauge,
        "Connections to the backend open now.",
        |c| &c.active,
    ),
    (
        "proxy_backend_bytes_in_total",
        Kind::Counter,
        "Bytes sent to the backend (from clients).",
        |c| &c.bytes_in,
    ),
    (
        "proxy_backend_bytes_out_total",
        Kind::Counter,
        "Bytes received from the backend (sent to clients).",
        |c| &c.bytes_out,
    ),
    (
        "proxy_backend_connect_errors_total",
        Kind::Counter,
        "Connect attempts to the backend that failed (refused, unreachable, timed out).",
        |c| &c.connect_errors,
    ),
    (
        "proxy_backend_retries_total",
        Kind::Counter,
        "Connects tried on the backend after a failed one on another backend (retries).",
        |c| &c.retries,
    ),
    (
        "proxy_backend_redispatches_total",
        Kind::Counter,
        "Clients whose connect to the backend failed and who were tried on another backend.",
        |c| &c.redispatches,
    ),
];

/// Every per-backend family read from the health boards.
const HEALTH_FAMILIES: &[Family<HealthReading>] = &[
    (
        "proxy_backend_up",
        Kind::Gauge,
        "1 if the backend is up (health checks and client connects), 0 if down.",
        |board, b| u64::from(board.is_up(b)),
    ),
    (
        "proxy_backend_check_successes_total",
        Kind::Counter,
        "Active health checks that passed: connected, or answered right (0 for a backend without check).",
        |board, b| board.check_counts(b).successes,
    ),
    (
        "proxy_backend_check_failures_total",
        Kind::Counter,
        "Active health checks that failed: refused, unreachable, unanswered in time, or answered wrong.",
        |board, b| board.check_counts(b).failures,
    ),
    (
        "proxy_backend_weight_percent",
        Kind::Gauge,
        "The share of its configured weight the backend gets: 100, or what its agent-check said (0: drained).",
        |board, b| u64::from(board.weight_percent(b)),
    ),
];

/// The text being written, family by family.
#[derive(Debug, Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// The `# HELP` and `# TYPE` lines that open a family.
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {}", escape(help, false));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.name());
    }

    /// One sample: `name{label="value",...} value`.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(self.text, "{comma}{label}=\"{}\"", escape(value, true));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Escapes a label value (backslash, double quote, line feed) or a help
/// text (backslash and line feed only), as the format requires.
fn escape(text: &str, quote: bool) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\\', '\n', '"']) {
        return text.into();
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '"' if quote => escaped.push_str("\\\""),
            c => escaped.push(c),
        }
    }
    escaped.into()
}

/// A float as the format writes it: `+Inf`, `-Inf` and `NaN` by those
/// names (Rust would write `inf`), anything else in plain decimal.
#[derive(Debug, Clone, Copy)]
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// The connections upgrades moved: handed over by this process, adopted
/// from an older one, and parked for a new one that did not take them.
fn render_moves(out: &mut Exposition, moves: &MoveCounters) {
    let families: [(&str, &str, &AtomicU64); 3] = [
        (
            "proxy_connections_handed_over_total",
            "Established connections handed over to a new process (an upgrade), which adopted them.",
            &moves.handed_over,
        ),
        (
            "proxy_connections_adopted_total",
            "Established connections adopted from an older process (an upgrade).",
            &moves.adopted,
        ),
        (
            "proxy_connections_resumed_total",
            "Established connections parked for a new process that did not take them, relayed on here.",
            &moves.resumed,
        ),
    ];
    for (name, help, value) in families {
        out.family(name, Kind::Counter, help);
        out.sample(name, &[], value.load(Relaxed));
    }
}

fn render_process(out: &mut Exposition, process: &Process) {
    let integers = [
        (
            "proxy_process_open_fds",
            "File descriptors the process has open.",
            process.open_fds,
        ),
        (
            "proxy_process_max_fds",
            "The process's limit of open file descriptors (soft RLIMIT_NOFILE).",
            process.max_fds,
        ),
        (
            "proxy_process_resident_memory_bytes",
            "Resident memory size (RSS) in bytes.",
            process.resident_bytes,
        ),
    ];
    for (name, help, value) in integers {
        if let Some(value) = value {
            out.family(name, Kind::Gauge, help);
            out.sample(name, &[], value);
        }
    }
    let floats = [
        (
            "proxy_process_start_time_seconds",
            Kind::Gauge,
            "When the process started, in seconds since the Unix epoch.",
            process.start_time,
        ),
        (
            "proxy_process_cpu_seconds_total",
            Kind::Counter,
            "CPU time used by the process, user and system, in seconds.",
            process.cpu_seconds,
        ),
    ];
    for (name, kind, help, value) in floats {
        if let Some(value) = value {
            out.family(name, kind, help);
            out.sample(name, &[], Float(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::counters::{Active, add, inc};
    use crate::policy::check::Verdict;
    use crate::policy::health::Check;
    use std::time::Duration;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Two frontends of two backends each; the second backend of `db` is
    /// checked.
    fn registry(workers: usize) -> (Arc<Registry>, Vec<Arc<HealthBoard>>) {
        let check = Some(Check {
            inter: Duration::from_secs(1),
            fall: 1,
            rise: 1,
            timeout: Duration::from_secs(1),
        });
        let web = vec![addr(9001), addr(9002)];
        let db = vec![addr(9101), addr(9102)];
        let web_board = Arc::new(HealthBoard::new("web", &[(web[0], None), (web[1], None)]));
        let db_board = Arc::new(HealthBoard::new("db", &[(db[0], None), (db[1], check)]));
        let frontends = [
            ("web".to_string(), web, web_board.clone()),
            ("db".to_string(), db, db_board.clone()),
        ];
        (
            Registry::new(&frontends, workers),
            vec![web_board, db_board],
        )
    }

    #[test]
    fn render_sums_the_workers_sample_by_sample() {
        let (registry, boards) = registry(2);
        assert_eq!(registry.workers(), 2);
        let w0 = registry.worker(0, 0);
        add(&w0.connections, 3);
        let _open = Active::new(&w0.active);
        add(&w0.backends[1].bytes_out, 2000);
        let w1 = registry.worker(1, 0);
        add(&w1.connections, 2);
        inc(&w1.backends[0].connect_errors);
        inc(&registry.worker(1, 1).denied);
        let refused = Verdict::failed(Status::L4Con, "connection refused");
        boards[1].check_result(1, refused, Duration::from_millis(1500));
        let text = registry.render();
        for line in [
            "# HELP proxy_frontend_connections_total Client connections accepted.\n",
            "# TYPE proxy_frontend_connections_total counter\n",
            "proxy_frontend_connections_total{frontend=\"web\"} 5\n",
            "proxy_frontend_connections_total{frontend=\"db\"} 0\n",
            "# TYPE proxy_frontend_active_connections gauge\n",
            "proxy_frontend_active_connections{frontend=\"web\"} 1\n",
            "proxy_frontend_denied_total{frontend=\"db\"} 1\n",
            "proxy_backend_bytes_out_total{frontend=\"web\",backend=\"127.0.0.1:9002\",group=\"web\",server=\"127.0.0.1:9002\"} 2000\n",
            "proxy_backend_connect_errors_total{frontend=\"web\",backend=\"127.0.0.1:9001\",group=\"web\",server=\"127.0.0.1:9001\"} 1\n",
            "proxy_backend_up{frontend=\"web\",backend=\"127.0.0.1:9001\",group=\"web\",server=\"127.0.0.1:9001\"} 1\n",
            "proxy_backend_up{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\"} 0\n",
            "proxy_backend_check_failures_total{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\"} 1\n",
            "proxy_backend_weight_percent{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\"} 100\n",
            "# TYPE proxy_backend_check_status gauge\n",
            "proxy_backend_check_status{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\",status=\"L4OK\"} 0\n",
            "proxy_backend_check_status{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\",status=\"L4CON\"} 1\n",
            "proxy_backend_check_duration_seconds{frontend=\"db\",backend=\"127.0.0.1:9102\",group=\"db\",server=\"127.0.0.1:9102\"} 1.5\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }

    // A backend written with a host name keeps its labels; where it is now
    // is a family of its own, with how its lookups go.
    #[test]
    fn a_host_name_keeps_its_labels_and_its_address_has_a_family_of_its_own() {
        use crate::policy::address::{Lookup, Place};
        let named = |host: &str| Place {
            label: format!("{host}:5432"),
            start: None,
            lookup: Some(Lookup {
                host: host.to_string(),
                port: 5432,
                prefer: None,
            }),
        };
        let fixed = Place {
            label: "127.0.0.1:9001".to_string(),
            start: Some(addr(9001)),
            lookup: None,
        };
        let book = Arc::new(AddressBook::new(
            "db",
            [named("db.test"), named("gone.test"), fixed],
        ));
        book.answer(0, Ok(&[addr(5432)]));
        book.answer(0, Err("temporary failure in name resolution"));
        book.answer(1, Err("name or service not known"));
        let labels = |address: &str| ServerLabels {
            addr: address.to_string(),
            group: "db".to_string(),
            name: address.to_string(),
        };
        let board = Arc::new(HealthBoard::new("db", &[(addr(1), None); 3]));
        let registry = Registry::from_counters(vec![FrontendParts {
            name: "db".to_string(),
            backends: vec![
                labels("db.test:5432"),
                labels("gone.test:5432"),
                labels("127.0.0.1:9001"),
            ],
            weights: vec![1; 3],
            board,
            addresses: Some(book),
            counters: Vec::new(),
            routes: Vec::new(),
        }]);
        let text = registry.render();
        let db = "frontend=\"db\",backend=\"db.test:5432\",group=\"db\",server=\"db.test:5432\"";
        let gone =
            "frontend=\"db\",backend=\"gone.test:5432\",group=\"db\",server=\"gone.test:5432\"";
        for line in [
            format!("proxy_backend_up{{{db}}} 1\n"),
            format!("proxy_backend_address{{{db},address=\"127.0.0.1:5432\"}} 1\n"),
            format!("proxy_backend_address{{{gone},address=\"\"}} 0\n"),
            format!("proxy_backend_resolve_failures_total{{{db}}} 1\n"),
            format!("proxy_backend_resolve_failing{{{db}}} 1\n"),
            format!("proxy_backend_resolve_failures_total{{{gone}}} 1\n"),
        ] {
            assert!(text.contains(&line), "no {line:?} in\n{text}");
        }
        assert!(
            !text.contains("address=\"127.0.0.1:9001\""),
            "an IP backend has none"
        );
        let health = registry.frontend_health("db").expect("the frontend");
        assert_eq!(
            (health.usable, health.servers),
            (2, 3),
            "no address: not usable"
        );
    }

    #[test]
    fn label_values_and_help_texts_are_escaped() {
        let name = "a \"quoted\" \\ name\nwith a line feed";
        let board = Arc::new(HealthBoard::new(name, &[(addr(1), None)]));
        let frontends = [(name.to_string(), vec![addr(1)], board)];
        let text = Registry::new(&frontends, 1).render();
        assert!(
            text.contains(r#"{frontend="a \"quoted\" \\ name\nwith a line feed"}"#),
            "{text}"
        );
        assert_eq!(escape("a\\b\nc\"d", false), "a\\\\b\\nc\"d");
        assert_eq!(escape("a\\b\nc\"d", true), "a\\\\b\\nc\\\"d");
    }

    #[test]
    fn an_empty_registry_renders_only_the_process() {
        let text = Registry::new(&[], 4).render();
        assert!(!text.is_empty());
        for line in text.lines() {
            let name = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
                .unwrap_or(line);
            assert!(name.starts_with("proxy_process_"), "{line}");
        }
    }

    #[test]
    fn floats_use_the_formats_names() {
        assert_eq!(Float(f64::INFINITY).to_string(), "+Inf");
        assert_eq!(Float(f64::NEG_INFINITY).to_string(), "-Inf");
        assert_eq!(Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Float(1.5).to_string(), "1.5");
        assert_eq!(Float(1e21).to_string(), "1000000000000000000000");
    }
}
