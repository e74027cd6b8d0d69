//! Milestone 5 and after: the async load balancer on our own runtime.
//!
//! One event loop per worker thread, the HAProxy model (one loop per thread)
//! rather than tokio's work-stealing. Each frontend (a `listen` address and
//! its pool of backends) has one listening socket per worker on the same
//! port (SO_REUSEPORT), and the kernel spreads new connections across them.
//!
//! ```text
//!   main thread:  bind every frontend's listeners ─▶ health-check thread ─▶ N workers, wait
//!   worker i:     Runtime ── one accept loop per frontend ──spawn──▶ one task per connection:
//!                   wait for room under maxconn                 take a place (global, frontend)
//!                   accept                                      pick a backend (balance.rs),
//!                                                                 skipping full ones; queue if all are
//!                                                               connect, bounded by timeout connect;
//!                                                                 on failure retry another backend
//!                                                               relay both ways (relay.rs)
//!                                                               close, passing on a reset
//! ```
//!
//! ## What is shared between workers, and what is not
//!
//! | state                        | where                       | cost on each connection      |
//! |------------------------------|-----------------------------|------------------------------|
//! | balancer (round-robin scores, leastconn counts) | per worker (`RefCell`) | none: no sharing |
//! | health (up / down)           | one [`HealthBoard`] per frontend | one atomic load         |
//! | maxconn counts               | one [`Limit`] each (global, frontend, backend) | a compare-and-swap |
//!
//! Each worker's balancer sees only its own connections, as nginx's workers
//! do without a shared `zone`: with two workers, leastconn means least
//! connections *of this worker*. Limits, though, must hold for the whole
//! process (an operator's `maxconn 100` is a promise to the backend), so
//! they are counted in atomics shared by all workers. Health verdicts come
//! from one checker thread (health.rs); a worker copies them into its
//! balancer when the board's generation number changes.
//!
//! ## Failures stay with their connection
//!
//! A refused or timed-out connect is retried on another backend, up to the
//! frontend's `retries` (nothing has been sent to a backend before it
//! accepts, so a retry never duplicates data); a backend is never tried twice
//! for one client (nginx's `proxy_next_upstream`; HAProxy retries the same
//! server unless `option redispatch`). When nothing is left to try, that
//! client alone is reset. An accept that fails for lack of descriptors
//! (EMFILE) pauses accepting briefly, while open connections keep flowing.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Instant;

use runtime::net::{ListenOptions, TcpListener, TcpStream, bind_std};
use runtime::{spawn, time};

use crate::accept::AcceptErrors;
use crate::balance::{Algorithm, Balancer, Server};
use crate::config::{Balance, Config, Frontend};
use crate::health::{self, HealthBoard};
use crate::limit::{Limit, Permit};
use crate::relay::{self, Limits, Outcome};

/// How the epoll mode runs: the frontends, and the process-wide settings
/// that are not part of a configuration file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The frontends and the global `maxconn`.
    pub config: Config,
    /// Event-loop threads.
    pub workers: usize,
    /// The listen queue length of every listener.
    pub backlog: u32,
}

/// One frontend's state shared by every worker.
#[derive(Debug)]
struct Shared {
    frontend: Frontend,
    board: Arc<HealthBoard>,
    /// The frontend's `maxconn`.
    limit: Arc<Limit>,
    /// Each backend's `maxconn`, by index.
    backend_limits: Vec<Arc<Limit>>,
    relay_limits: Limits,
}

/// One frontend as one worker sees it: the shared state plus the worker's
/// own balancer.
#[derive(Debug)]
struct Local {
    shared: Arc<Shared>,
    global: Arc<Limit>,
    balancer: RefCell<Balancer>,
    /// The board generation last copied into `balancer`.
    seen_generation: Cell<u64>,
}

/// Runs the epoll mode until the process is stopped.
pub fn run(plan: &Plan) -> io::Result<()> {
    let workers = plan.workers.max(1);
    let global = Limit::new(plan.config.global.maxconn);
    let shared: Vec<Arc<Shared>> = plan.config.frontends.iter().map(share).collect();
    // Every listener is bound before any worker starts, so a port in use is
    // an error at startup, and every address is announced.
    let mut by_worker: Vec<Vec<std::net::TcpListener>> = (0..workers).map(|_| Vec::new()).collect();
    for fe in &shared {
        let listeners = bind_listeners(&fe.frontend, workers, plan.backlog)?;
        crate::info!(
            "frontend {} listening on {} ({}, {} backends, epoll, {workers} workers)",
            fe.frontend.name,
            listeners[0].local_addr()?,
            fe.frontend.balance.name(),
            fe.frontend.backends.len()
        );
        for (worker, listener) in by_worker.iter_mut().zip(listeners) {
            worker.push(listener);
        }
    }
    let _checker = health::spawn_checker(shared.iter().map(|fe| fe.board.clone()).collect())?;
    let slots = Arc::new(Mutex::new(
        by_worker.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let handles = runtime::threads::spawn_runtimes(workers, "epoll-worker", move |index| {
        let listeners = slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
            .and_then(Option::take)
            .unwrap_or_default();
        let locals: Vec<Rc<Local>> = shared
            .iter()
            .map(|fe| Rc::new(Local::new(fe.clone(), global.clone())))
            .collect();
        worker(listeners, locals)
    })?;
    // Workers only return on a fatal error; the process ends on SIGTERM.
    for result in handles.join()? {
        result?;
    }
    Ok(())
}

/// The shared state of one frontend.
fn share(frontend: &Frontend) -> Arc<Shared> {
    let servers: Vec<_> = frontend
        .backends
        .iter()
        .map(|b| (b.addr, b.check))
        .collect();
    let t = &frontend.timeouts;
    Arc::new(Shared {
        board: Arc::new(HealthBoard::new(&frontend.name, &servers)),
        limit: Limit::new(frontend.maxconn),
        backend_limits: frontend
            .backends
            .iter()
            .map(|b| Limit::new(b.maxconn))
            .collect(),
        relay_limits: Limits {
            idle_timeout: t.idle(),
            client_fin_timeout: t.client_fin,
            server_fin_timeout: t.server_fin,
        },
        frontend: frontend.clone(),
    })
}

/// One worker: an accept loop per frontend, until one fails.
async fn worker(listeners: Vec<std::net::TcpListener>, locals: Vec<Rc<Local>>) -> io::Result<()> {
    if listeners.len() != locals.len() {
        return Err(io::Error::other("a worker found no listeners"));
    }
    let loops: Vec<_> = listeners
        .into_iter()
        .zip(locals)
        .map(|(listener, local)| spawn(accept_loop(listener, local)))
        .collect();
    for handle in loops {
        handle
            .await
            .map_err(|e| io::Error::other(format!("an accept loop failed: {e}")))??;
    }
    Ok(())
}

/// A frontend's listeners, one per worker, on the same address: the first
/// binds (and learns the port, if 0 was asked), the others join it with
/// SO_REUSEPORT.
fn bind_listeners(
    frontend: &Frontend,
    workers: usize,
    backlog: u32,
) -> io::Result<Vec<std::net::TcpListener>> {
    let options = ListenOptions {
        backlog,
        reuse_port: workers > 1,
        ..ListenOptions::default()
    };
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
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind_std(addr, &options)?);
    }
    Ok(listeners)
}

/// Accepts until a fatal error, one task per connection. At the frontend's
/// or the global maxconn it stops accepting: new clients wait in the
/// kernel's listen queue (HAProxy's behaviour) instead of being accepted
/// and dropped.
async fn accept_loop(listener: std::net::TcpListener, local: Rc<Local>) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let mut errors = AcceptErrors::new();
    loop {
        local.global.room().await;
        local.shared.limit.room().await;
        match listener.accept().await {
            Ok((client, peer)) => {
                spawn(serve(client, peer, local.clone()));
            }
            // Out of descriptors, say: the connection waits in the kernel's
            // queue, and accepting again at once would spin. The pause is a
            // timer, so open connections keep running meanwhile.
            Err(e) => {
                if let Some(pause) = errors.note(&e) {
                    time::sleep(pause).await;
                }
            }
        }
    }
}

/// One connection's life: a place under maxconn, a backend, the relay.
async fn serve(client: TcpStream, peer: SocketAddr, local: Rc<Local>) {
    let started = Instant::now();
    let name = &local.shared.frontend.name;
    let Some(_places) = local.admit().await else {
        let queue = local.shared.frontend.timeouts.queue();
        return refuse(
            &client,
            name,
            peer,
            &format!("maxconn: no room within {queue:?}"),
        );
    };
    let (index, backend, _backend_place) = match local.connect(peer).await {
        Ok(connected) => connected,
        Err(why) => return refuse(&client, name, peer, &why),
    };
    // Small writes (a request line, a prompt) go out at once, not batched.
    let _ = client.set_nodelay(true);
    let _ = backend.set_nodelay(true);
    local.balancer.borrow_mut().connection_opened(index);
    let outcome = relay::relay(&client, &backend, local.shared.relay_limits).await;
    local.balancer.borrow_mut().connection_closed(index);
    let addr = local.shared.frontend.backends[index].addr;
    log_outcome(name, peer, addr, &outcome, started);
}

/// Why no backend could be picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoBackend {
    /// None is up (or every one left was tried already).
    Unavailable,
    /// Some are up but all are at their maxconn, and stayed so for the
    /// queue timeout.
    Full,
}

impl Local {
    fn new(shared: Arc<Shared>, global: Arc<Limit>) -> Local {
        let servers = shared
            .frontend
            .backends
            .iter()
            .map(|b| Server {
                addr: b.addr,
                weight: b.weight,
                backup: b.backup,
            })
            .collect();
        let balancer = Balancer::new(servers, algorithm(shared.frontend.balance));
        Local {
            shared,
            global,
            balancer: RefCell::new(balancer),
            // The board starts at generation 0 with every server up, as a
            // new balancer does.
            seen_generation: Cell::new(0),
        }
    }

    /// A place under the global and the frontend maxconn, waiting for one at
    /// most `timeout queue`. The accept loop already waits for room, so this
    /// waits only when another worker took the last place first.
    async fn admit(&self) -> Option<(Permit, Permit)> {
        let deadline = Instant::now() + self.shared.frontend.timeouts.queue();
        loop {
            let waiting_on = match self.global.try_acquire() {
                Some(global) => match self.shared.limit.try_acquire() {
                    Some(frontend) => return Some((global, frontend)),
                    None => &self.shared.limit,
                },
                None => &self.global,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || time::timeout(left, waiting_on.room()).await.is_err() {
                return None;
            }
        }
    }

    /// Connects to a backend, trying another one after each failure, up to
    /// the frontend's `retries`. Returns the backend's index, the socket and
    /// its place under the backend's maxconn; or why the client is refused.
    async fn connect(&self, peer: SocketAddr) -> Result<(usize, TcpStream, Permit), String> {
        let frontend = &self.shared.frontend;
        let attempts = frontend.retries.saturating_add(1);
        let mut tried: Vec<usize> = Vec::new();
        let mut last_failure = String::new();
        for attempt in 1..=attempts {
            let (index, place) = match self.pick(peer.ip(), &tried).await {
                Ok(picked) => picked,
                Err(NoBackend::Full) => {
                    let queue = frontend.timeouts.queue();
                    return Err(format!(
                        "every backend is at its maxconn, for {queue:?} (timeout queue)"
                    ));
                }
                Err(NoBackend::Unavailable) if tried.is_empty() => {
                    return Err("no backend is up".to_string());
                }
                Err(NoBackend::Unavailable) => {
                    return Err(format!("{last_failure}; no other backend to try"));
                }
            };
            let addr = frontend.backends[index].addr;
            let connect = time::timeout(frontend.timeouts.connect, TcpStream::connect(addr));
            let why = match connect.await {
                Ok(Ok(stream)) => {
                    self.shared.board.passive_success(index);
                    return Ok((index, stream, place));
                }
                Ok(Err(e)) => health::reason(&e),
                Err(_) => format!("no answer within {:?}", frontend.timeouts.connect),
            };
            self.shared.board.passive_failure(index, &why);
            if attempt < attempts {
                crate::warn!(
                    "frontend {}: {peer} -> {addr}: connect failed: {why}; trying another backend \
                     (retry {attempt} of {})",
                    frontend.name,
                    frontend.retries
                );
            }
            tried.push(index);
            last_failure = format!("connect to {addr} failed: {why}");
        }
        Err(format!("{last_failure}; {} retries used", frontend.retries))
    }

    /// Picks a backend not in `tried` that is below its maxconn, and takes a
    /// place there. If every candidate is full, waits (at most `timeout
    /// queue`) for one of them to have room: HAProxy's server queue.
    async fn pick(&self, client: IpAddr, tried: &[usize]) -> Result<(usize, Permit), NoBackend> {
        let deadline = Instant::now() + self.shared.frontend.timeouts.queue();
        // `tried`, then the servers found full during this pick.
        let mut avoid: Vec<usize> = tried.to_vec();
        loop {
            self.sync_health();
            let chosen = self.balancer.borrow_mut().pick_avoiding(client, &avoid);
            if let Some(index) = chosen {
                match self.shared.backend_limits[index].try_acquire() {
                    Some(place) => return Ok((index, place)),
                    None => {
                        avoid.push(index);
                        continue;
                    }
                }
            }
            let full = &avoid[tried.len()..];
            if full.is_empty() {
                return Err(NoBackend::Unavailable);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let limits = &self.shared.backend_limits;
            let some_room = poll_fn(|cx| {
                // Every full server's waker list gets this task, so the
                // first place given back anywhere wakes it.
                let mut ready = false;
                for &index in full {
                    ready |= limits[index].poll_room(cx).is_ready();
                }
                if ready {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            });
            if left.is_zero() || time::timeout(left, some_room).await.is_err() {
                return Err(NoBackend::Full);
            }
            avoid.truncate(tried.len());
        }
    }

    /// Copies the health board's verdicts into this worker's balancer if
    /// they changed since the last time (one atomic load when they did not).
    fn sync_health(&self) {
        let board = &self.shared.board;
        let generation = board.generation();
        if generation == self.seen_generation.get() {
            return;
        }
        let mut balancer = self.balancer.borrow_mut();
        for index in 0..board.len() {
            balancer.set_up(index, board.is_up(index));
        }
        self.seen_generation.set(generation);
    }
}

fn algorithm(balance: Balance) -> Algorithm {
    match balance {
        Balance::RoundRobin => Algorithm::RoundRobin,
        Balance::LeastConn => Algorithm::LeastConn,
        Balance::Random => Algorithm::Random,
        Balance::Source => Algorithm::Source,
    }
}

/// No backend for this client: reset it, so it sees a failed connection
/// rather than an empty reply that looks complete.
fn refuse(client: &TcpStream, frontend: &str, peer: SocketAddr, why: &str) {
    crate::warn!("frontend {frontend}: {peer}: {why}; resetting the client");
    let _ = client.set_reset_on_close();
}

fn log_outcome(
    frontend: &str,
    peer: SocketAddr,
    backend: SocketAddr,
    outcome: &Outcome,
    started: Instant,
) {
    crate::debug!(
        "frontend {frontend}: {peer} -> {backend}: {}, {} B up, {} B down, {:?}",
        outcome.ending.label(),
        outcome.upstream,
        outcome.downstream,
        started.elapsed()
    );
}
