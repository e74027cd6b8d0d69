//! One frontend as every worker shares it ([`Shared`]): its configuration,
//! its health board, its limits and its counters, built anew by a reload
//! that changes the frontend ([`share`]), with the limits carried over; and
//! its listening sockets, one per worker ([`bind_listeners`]), or the ones
//! an old process handed over, spread over the workers ([`spread_handed`]).

use std::io;
use std::sync::Arc;

use runtime::net::{ListenOptions, bind_std};

use crate::ops::metrics::counters::FrontendCounters;
use crate::policy::health::HealthBoard;
use crate::policy::limit::Limit;
use crate::policy::route::Routes;
use crate::policy::source_limit::SourceLimits;
use crate::settings::config::Frontend;

/// One frontend's state shared by every worker.
#[derive(Debug)]
pub struct Shared {
    /// Its configuration, as the file (or the flags) gave it.
    pub frontend: Frontend,
    /// Which of its backends are up.
    pub board: Arc<HealthBoard>,
    /// The frontend's `maxconn`.
    pub limit: Arc<Limit>,
    /// Each backend's `maxconn`, by index.
    pub backend_limits: Vec<Arc<Limit>>,
    /// `maxconn-per-source`, if set.
    pub sources: Option<Arc<SourceLimits>>,
    /// Its counters, one set per worker (`ops/metrics/counters.rs`: each
    /// written by one thread only).
    pub counters: Vec<Arc<FrontendCounters>>,
}

/// The shared state of one frontend; `old` is the state it replaces, whose
/// limits carry over (their counts include the connections still open
/// under the old configuration).
pub fn share(frontend: &Frontend, old: Option<&Shared>, workers: usize) -> Arc<Shared> {
    let servers: Vec<_> = frontend
        .backends
        .iter()
        .map(|b| (b.addr, b.check))
        .collect();
    let limit = match old {
        Some(old) => {
            old.limit.set_max(frontend.maxconn);
            old.limit.clone()
        }
        None => Limit::new(frontend.maxconn),
    };
    let backend_limits = frontend
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
        .collect();
    Arc::new(Shared {
        board: Arc::new(
            HealthBoard::new(&frontend.name, &servers)
                .with_labels(frontend.backends.iter().map(|b| b.label())),
        ),
        limit,
        backend_limits,
        sources: frontend.maxconn_per_source.map(SourceLimits::new),
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

/// Each worker's listeners of one frontend.
pub type PerWorker = Vec<Vec<std::net::TcpListener>>;

/// How a frontend's listeners are bound: with SO_REUSEPORT when several
/// workers share the address, or when a process that takes them over
/// later (`upgradable`, ops/upgrade/) may need to bind more beside them;
/// with IP_FREEBIND if the frontend asks (`listen ADDR freebind`).
fn listen_options(
    frontend: &Frontend,
    workers: usize,
    backlog: u32,
    upgradable: bool,
) -> ListenOptions {
    ListenOptions {
        backlog,
        reuse_port: workers > 1 || upgradable,
        // Small writes (a request line, a prompt) go out at once, not
        // batched; every accepted client inherits it from the listener.
        nodelay: true,
        freebind: frontend.freebind,
        ..ListenOptions::default()
    }
}

/// A frontend's listeners, one per worker, on the same address: the first
/// binds (and learns the port, if 0 was asked), the others join it with
/// SO_REUSEPORT.
pub fn bind_listeners(
    frontend: &Frontend,
    workers: usize,
    backlog: u32,
    upgradable: bool,
) -> io::Result<PerWorker> {
    let options = listen_options(frontend, workers, backlog, upgradable);
    let first = bind_std(frontend.listen, &options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "frontend {}: cannot listen on {}: {e}",
                frontend.name, frontend.listen
            ),
        )
    })?;
    let addr = first.local_addr()?;
    let mut listeners = vec![vec![first]];
    for _ in 1..workers {
        listeners.push(vec![bind_std(addr, &options)?]);
    }
    Ok(listeners)
}

/// The listeners an old process handed over for one frontend, spread over
/// `workers`: socket i to worker i mod n, so that every socket of the
/// SO_REUSEPORT group keeps being accepted on (closing one would reset the
/// clients queued on it), and one more bound beside them (SO_REUSEPORT)
/// for each worker left without one.
pub fn spread_handed(
    frontend: &Frontend,
    handed: Vec<std::net::TcpListener>,
    workers: usize,
    backlog: u32,
) -> io::Result<PerWorker> {
    let mut per_worker: PerWorker = (0..workers).map(|_| Vec::new()).collect();
    let addr = match handed.first() {
        Some(first) => first.local_addr()?,
        None => return bind_listeners(frontend, workers, backlog, true),
    };
    for (i, listener) in handed.into_iter().enumerate() {
        per_worker[i % workers].push(listener);
    }
    let options = listen_options(frontend, workers, backlog, true);
    for listeners in per_worker.iter_mut().filter(|l| l.is_empty()) {
        let more = bind_std(addr, &options).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "frontend {}: cannot listen on {addr} beside the sockets handed over (the old \
                     process bound them without SO_REUSEPORT?): {e}",
                    frontend.name
                ),
            )
        })?;
        listeners.push(more);
    }
    Ok(per_worker)
}
