//! One frontend as every worker shares it ([`SharedFrontend`]): its configuration,
//! its health board, where its backends are, its limits and its counters,
//! built anew by a reload that changes the frontend ([`share`]), with the
//! limits and the addresses of backends written with a host name carried
//! over (its totals and its servers' health too: [`super::carry`]); and
//! its listening sockets, one per worker and listen address
//! ([`bind_addresses`]), or the ones an old process handed over, spread over
//! the workers ([`spread_handed`]). Every listen address of a frontend
//! shares the one [`SharedFrontend`]: its limits and counters count the clients of
//! all of them together.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use runtime::net::{ListenOptions, bind_std};

use super::worker_context::WorkerContext;
use crate::ops::metrics::counters::FrontendCounters;
use crate::policy::address::{AddressBook, Lookup, Place};
use crate::policy::admin_state::AdminBoard;
use crate::policy::balance::Balancer;
use crate::policy::health::{HealthBoard, OnChange};
use crate::policy::limit::Limit;
use crate::policy::route::Routes;
use crate::policy::session_rate::SessionRate;
use crate::policy::source_limit::SourceLimits;
use crate::policy::source_rate::SourceRates;
use crate::settings::config::{BackendServer, Frontend};

/// One frontend's state shared by every worker.
#[derive(Debug)]
pub struct SharedFrontend {
    /// Its configuration, as the file (or the flags) gave it.
    pub frontend: Frontend,
    /// Which of its backends are up.
    pub board: Arc<HealthBoard>,
    /// Where each backend is now: its address, or its host name's last
    /// good answer (`policy/address.rs`; the resolver thread keeps it).
    pub addresses: Arc<AddressBook>,
    /// The frontend's `maxconn`.
    pub limit: Arc<Limit>,
    /// Each backend's `maxconn`, by index.
    pub backend_limits: Vec<Arc<Limit>>,
    /// Each backend's `maxqueue`: the clients waiting for one of its places
    /// (none: no limit).
    pub queues: Vec<Option<Arc<Limit>>>,
    /// `maxconn-per-source`, if set.
    pub sources: Option<Arc<SourceLimits>>,
    /// `rate-limit-per-source`, if set.
    pub source_rates: Option<SourceRates>,
    /// `rate-limit sessions`, if set: every accept loop of the frontend
    /// takes its turn on this one schedule.
    pub session_rate: Option<Arc<SessionRate>>,
    /// Its counters, one set per worker (`ops/metrics/counters.rs`: each
    /// written by one thread only).
    pub counters: Vec<Arc<FrontendCounters>>,
}

/// One frontend as one worker sees it: the shared state plus the worker's
/// own balancer.
#[derive(Debug)]
pub(crate) struct WorkerFrontend {
    pub shared: Arc<SharedFrontend>,
    pub worker: Rc<WorkerContext>,
    /// This worker's counters for this frontend.
    pub counters: Arc<FrontendCounters>,
    /// One balancer per group (`Frontend::group`), over its backends.
    pub(super) balancers: RefCell<Vec<Balancer>>,
    /// The generations of the health board and of the address book last
    /// copied into `balancers`.
    pub(super) seen_generation: Cell<(u64, u64)>,
}

/// The shared state of one frontend; `old` is the state it replaces, whose
/// limits carry over (their counts include the connections still open
/// under the old configuration).
pub fn share(
    frontend: &Frontend,
    old: Option<&SharedFrontend>,
    workers: usize,
) -> Arc<SharedFrontend> {
    // The board's addresses are not read (its labels name the servers in
    // its lines): a backend written with a host name gets the unspecified
    // address with its port.
    let unspecified = |port| SocketAddr::from(([0, 0, 0, 0], port));
    let servers: Vec<_> = frontend
        .backends
        .iter()
        .map(|b| (b.addr.ip().unwrap_or(unspecified(b.addr.port())), b.check))
        .collect();
    let limit = match old {
        Some(old) => {
            old.limit.set_max(frontend.maxconn);
            old.limit.clone()
        }
        None => Limit::new(frontend.maxconn),
    };
    let backend_limits = backend_limits(frontend, old);
    let queues = frontend
        .backends
        .iter()
        .map(|b| b.maxqueue.map(|n| Limit::new(Some(n))))
        .collect();
    Arc::new(SharedFrontend {
        queues,
        addresses: Arc::new(address_book(frontend, old)),
        board: Arc::new(
            HealthBoard::new(&frontend.name, &servers)
                .with_labels(frontend.backends.iter().map(|b| b.label()))
                .with_changes(on_changes(frontend))
                .with_admin(admin_board(frontend, old)),
        ),
        limit,
        backend_limits,
        sources: frontend.maxconn_per_source.map(SourceLimits::new),
        source_rates: frontend
            .rate_limit_per_source
            .map(|(max, period)| SourceRates::new(max, period)),
        session_rate: frontend.rate_limit.map(SessionRate::new),
        counters: (0..workers)
            .map(|_| {
                let routes = frontend.routing.as_ref().map_or(0, Routes::counters);
                Arc::new(FrontendCounters::with_routes(
                    frontend.backends.len(),
                    routes,
                ))
            })
            .collect(),
        frontend: frontend.clone(),
    })
}

/// Each backend's `maxconn` limit: the one of the same address in `old`,
/// its ceiling moved, so that its count goes on; else a new one.
fn backend_limits(frontend: &Frontend, old: Option<&SharedFrontend>) -> Vec<Arc<Limit>> {
    frontend
        .backends
        .iter()
        .map(|b| {
            let before = old.and_then(|old| {
                let i = old
                    .frontend
                    .backends
                    .iter()
                    .position(|o| o.addr == b.addr)?;
                old.backend_limits.get(i).cloned()
            });
            match before {
                Some(limit) => {
                    limit.set_max(b.maxconn);
                    limit
                }
                None => Limit::new(b.maxconn),
            }
        })
        .collect()
}

/// Where each backend of `frontend` starts: its IP address; for one
/// written with a host name, the address the same backend (its name and
/// its address as written) has in `old`, else its `init-addr` one, else
/// none, until the answers of this start or reload are given to the book.
fn address_book(frontend: &Frontend, old: Option<&SharedFrontend>) -> AddressBook {
    let places = frontend.backends.iter().map(|b| {
        let lookup = b.addr.host().map(|host| Lookup {
            host: host.to_string(),
            port: b.addr.port(),
            prefer: b.resolve_prefer,
        });
        let carried = || {
            let old = old?;
            let same = |o: &&BackendServer| o.name == b.name && o.addr == b.addr;
            let index = old.frontend.backends.iter().position(|o| same(&o))?;
            old.addresses.get(index)
        };
        let start = match &lookup {
            None => b.addr.ip(),
            Some(_) => carried().or(b.init_addr.start(b.addr.port())),
        };
        Place {
            label: b.label(),
            start,
            lookup,
        }
    });
    AddressBook::new(&frontend.name, places)
}

/// The operator's state and weight of each backend of `frontend`: those
/// of the backend of the same group and name in `old`, when `old` has one
/// (a reload keeps what the operator said of every server the file still
/// names); else `ready` at its configured weight. A weight the operator
/// never changed follows the file's.
fn admin_board(frontend: &Frontend, old: Option<&SharedFrontend>) -> AdminBoard {
    let board = AdminBoard::new(frontend.backends.iter().map(|b| b.weight));
    let Some(old) = old else {
        return board;
    };
    let before = old.board.admin();
    for (index, b) in frontend.backends.iter().enumerate() {
        let group = frontend.group_name_of(index);
        let was = old
            .frontend
            .backends
            .iter()
            .enumerate()
            .position(|(i, o)| o.name == b.name && old.frontend.group_name_of(i) == group);
        let Some(was) = was else {
            continue;
        };
        let (Some(setting), Some(configured)) = (before.setting(was), before.configured(was))
        else {
            continue;
        };
        board.store_state(index, setting.state);
        if setting.weight != configured {
            let _ = board.store_weight(index, setting.weight);
        }
    }
    board
}

/// What each backend's changes of state do (`on-marked-down`,
/// `on-marked-up`, `slowstart`): a normal backend that cuts the backups
/// when it comes back cuts those of its own group.
fn on_changes(frontend: &Frontend) -> Vec<OnChange> {
    let backends = &frontend.backends;
    (0..backends.len())
        .map(|index| {
            let b = &backends[index];
            let group = frontend.group(frontend.group_of(index));
            let backups = group.map_or(0..0, |g| g.backends);
            OnChange {
                cut_when_down: b.shutdown_on_down,
                cut_when_up: match b.shutdown_backups_on_up {
                    true => backups.filter(|&i| backends[i].backup).collect(),
                    false => Vec::new(),
                },
                slowstart: b.slowstart,
            }
        })
        .collect()
}

/// A listener, with the `listen` address it was configured for (its bound
/// address differs for port 0).
pub type Listener = (SocketAddr, std::net::TcpListener);

/// Each worker's new listeners of one frontend (one per new listen address,
/// or more after a handover).
pub type PerWorker = Vec<Vec<Listener>>;

/// How a frontend's listeners are bound: with SO_REUSEPORT when several
/// workers share the address, or when a process that takes them over
/// later (`upgradable`, ops/upgrade/) may need to bind more beside them;
/// an IPv6 one with IPV6_V6ONLY, so that `[::]:PORT` is IPv6's alone and
/// `0.0.0.0:PORT` can be bound beside it, whatever the system's default
/// (`net.ipv6.bindv6only`; nginx's `ipv6only=on`); with IP_FREEBIND if the
/// frontend asks (`listen ADDR freebind`).
fn listen_options(
    frontend: &Frontend,
    addr: SocketAddr,
    workers: usize,
    backlog: u32,
    upgradable: bool,
) -> ListenOptions {
    ListenOptions {
        backlog,
        reuse_port: workers > 1 || upgradable,
        only_v6: addr.is_ipv6().then_some(true),
        // Small writes (a request line, a prompt) go out at once, not
        // batched; every accepted client inherits it from the listener.
        nodelay: true,
        freebind: frontend.freebind,
    }
}

/// Listeners for the listen addresses `addrs` of `frontend`, one per worker
/// each.
pub fn bind_addresses(
    frontend: &Frontend,
    addrs: &[SocketAddr],
    workers: usize,
    backlog: u32,
    upgradable: bool,
) -> io::Result<PerWorker> {
    let mut per_worker: PerWorker = (0..workers).map(|_| Vec::new()).collect();
    for &addr in addrs {
        let bound = bind_listeners(frontend, addr, workers, backlog, upgradable)?;
        for (mine, listener) in per_worker.iter_mut().zip(bound) {
            mine.push((addr, listener));
        }
    }
    Ok(per_worker)
}

/// A listen address's listeners, one per worker, on the same address: the
/// first binds (and learns the port, if 0 was asked), the others join it
/// with SO_REUSEPORT.
fn bind_listeners(
    frontend: &Frontend,
    addr: SocketAddr,
    workers: usize,
    backlog: u32,
    upgradable: bool,
) -> io::Result<Vec<std::net::TcpListener>> {
    let options = listen_options(frontend, addr, workers, backlog, upgradable);
    let first = bind_std(addr, &options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "frontend {}: cannot listen on {addr}: {e}{}",
                frontend.name,
                bind_hint(&e, addr)
            ),
        )
    })?;
    let bound = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind_std(bound, &options)?);
    }
    Ok(listeners)
}

/// What to do about a port below 1024 refused to a process that is not
/// root (it dropped its privileges at startup: `user` in `global`).
fn bind_hint(e: &io::Error, addr: SocketAddr) -> &'static str {
    let refused = e.kind() == io::ErrorKind::PermissionDenied;
    if refused && addr.port() < 1024 && !nix::unistd::geteuid().is_root() {
        " (a port below 1024 needs root, and this process runs as another user: bind it at \
         startup, or lower net.ipv4.ip_unprivileged_port_start)"
    } else {
        ""
    }
}

/// The listeners an old process handed over for one listen address of
/// `frontend`, spread over `workers`: socket i to worker i mod n, so
/// that every socket of the SO_REUSEPORT group keeps being accepted on
/// (closing one would reset the clients queued on it), and one more bound
/// beside them (SO_REUSEPORT) for each worker left without one.
pub fn spread_handed(
    frontend: &Frontend,
    configured: SocketAddr,
    handed: Vec<std::net::TcpListener>,
    workers: usize,
    backlog: u32,
) -> io::Result<PerWorker> {
    let mut per_worker: PerWorker = (0..workers).map(|_| Vec::new()).collect();
    let addr = match handed.first() {
        Some(first) => first.local_addr()?,
        None => return bind_addresses(frontend, &[configured], workers, backlog, true),
    };
    for (i, listener) in handed.into_iter().enumerate() {
        per_worker[i % workers].push((configured, listener));
    }
    let options = listen_options(frontend, addr, workers, backlog, true);
    for listeners in per_worker.iter_mut().filter(|l| l.is_empty()) {
        let more = bind_std(addr, &options).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "frontend {}: cannot listen on {addr} beside the sockets handed over (the \
                     old process bound them without SO_REUSEPORT?): {e}",
                    frontend.name
                ),
            )
        })?;
        listeners.push((configured, more));
    }
    Ok(per_worker)
}
