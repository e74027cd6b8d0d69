//! One client connection's life in the epoll mode, from accept to its
//! access-log line.
//!
//! ```text
//!   accept loop: a place under the global and frontend maxconn (waits, never refuses)
//!        │
//!   1 PROXY header? ─▶ 2 allowed? ─▶ 3 pick a backend ─▶ connect ─▶ 4 PROXY header out?
//!   (accept-proxy)     (allow/deny,   (balance, health,   (timeout    (send-proxy)
//!                       per source)    backend maxconn,    connect;          │
//!                                      timeout queue)      retry elsewhere)  ▼
//!   access-log line ◀── close (FIN or reset) ◀──────────────────── 5 relay both ways
//! ```
//!
//! Every step can refuse the client: it is then reset (a reset, not a FIN,
//! so that it cannot mistake the refusal for an empty but complete reply),
//! and the step's [`Termination`] code goes into the access log, HAProxy's
//! way of saying who ended a connection and when (`PR` denied by a rule,
//! `sQ` waited too long for a backend below its maxconn, `SC` every connect
//! failed...). A connection that got through ends with the relay's own
//! verdict (`--` for both FINs passed on, `CD` for a client reset...).
//!
//! Everything here runs on one worker's event loop. The state it reads is
//! either the worker's own (`Local`: the balancer, the access-log buffer)
//! or shared through atomics (limits, health): no lock on this path.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use runtime::combinator::{Either, select};
use runtime::net::{TcpStream, is_fd_exhaustion};
use runtime::time;

use super::frontend::Shared;
use super::worker_context::WorkerContext;
use crate::conn::proxy_protocol::{self, Addresses};
use crate::conn::relay::{self, Ending};
use crate::ops::access_log::record::Record;
use crate::ops::access_log::termination::{Cause, Phase, Termination};
use crate::ops::metrics::counters::{self, Active, FrontendCounters};
use crate::policy::balance::{Algorithm, Balancer, Server};
use crate::policy::health;
use crate::policy::limit::Permit;

/// One frontend as one worker sees it: the shared state plus the worker's
/// own balancer.
#[derive(Debug)]
pub(crate) struct Local {
    pub shared: Arc<Shared>,
    pub worker: Rc<WorkerContext>,
    /// This worker's counters for this frontend.
    pub counters: Arc<FrontendCounters>,
    balancer: RefCell<Balancer>,
    /// The board generation last copied into `balancer`.
    seen_generation: Cell<u64>,
}

/// The places a connection holds under the global and frontend maxconn.
pub(crate) type Places = (Permit, Permit);

/// Why no backend could be picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoBackend {
    /// None is up (or every one left was tried already).
    Unavailable,
    /// Some are up but all are at their maxconn, and stayed so for the
    /// queue timeout.
    Full,
}

/// A client turned away: why (for the daemon's log) and how (for the
/// access log).
#[derive(Debug)]
struct Refusal {
    why: String,
    termination: Termination,
    /// Turned away by an access rule (allow/deny, per-source limit): routine,
    /// counted as denied, logged only at debug level.
    denied: bool,
}

impl Refusal {
    fn new(why: impl Into<String>, termination: Termination) -> Refusal {
        Refusal {
            why: why.into(),
            termination,
            denied: false,
        }
    }

    fn denied(why: impl Into<String>) -> Refusal {
        Refusal {
            denied: true,
            ..Refusal::new(why, Termination::DENIED)
        }
    }
}

/// What happened to one connection, gathered for its access-log line.
#[derive(Debug)]
struct Trace {
    accepted: SystemTime,
    started: Instant,
    /// The client: the peer address, or the one its PROXY header gave.
    client: SocketAddr,
    /// The backend connected to, or the last one tried.
    backend: Option<usize>,
    /// Time spent waiting for places (HAProxy's `Tw`).
    wait: Option<Duration>,
    /// Time from the first connect attempt to a connected backend (`Tc`).
    connect: Option<Duration>,
    retries: u32,
    bytes_up: u64,
    bytes_down: u64,
    termination: Termination,
    /// The backend's open connections at the end of the relay, this one
    /// included (`%sc`).
    server_open: u32,
    /// Where the connection is in its life, for the second letter of its
    /// termination code if a graceful stop cuts it (`KR`, `KQ`, `KC`).
    phase: Phase,
}

/// One connection's whole life (module docs). `_places` are its places
/// under the global and frontend maxconn, taken by the accept loop; they
/// also keep it in the count a graceful stop waits on.
pub(crate) async fn serve(client: TcpStream, peer: SocketAddr, local: Rc<Local>, _places: Places) {
    let mut trace = Trace {
        accepted: SystemTime::now(),
        started: Instant::now(),
        client: peer,
        backend: None,
        wait: None,
        connect: None,
        retries: 0,
        bytes_up: 0,
        bytes_down: 0,
        termination: Termination::COMPLETE,
        server_open: 0,
        phase: Phase::Request,
    };
    let counters = local.counters.clone();
    counters::inc(&counters.connections);
    let _active = Active::new(&counters.active);
    let ran = select(local.run(&client, &mut trace), local.worker.kill.fired()).await;
    let result = match ran {
        Either::Left(result) => result,
        // Cut before its relay began (the relay reacts to the switch on
        // its own): the phase says where it was, as HAProxy's `K` codes do.
        Either::Right(()) => Err(Refusal::new(
            "cut by the stop",
            Termination::new(Cause::Killed, trace.phase),
        )),
    };
    if let Err(refusal) = result {
        count_refusal(&counters, &refusal);
        // Denials are routine (a scanner, a client over its limit): the
        // access log has them; the daemon's log only at debug level.
        let name = &local.shared.frontend.name;
        if refusal.denied {
            crate::debug!(
                "frontend {name}: {}: {}; resetting",
                trace.client,
                refusal.why
            );
        } else {
            crate::warn!(
                "frontend {name}: {}: {}; resetting the client",
                trace.client,
                refusal.why
            );
        }
        let _ = client.set_reset_on_close();
        trace.termination = refusal.termination;
    }
    local.log(&trace);
}

impl Local {
    pub fn new(shared: Arc<Shared>, worker: &Rc<WorkerContext>) -> Local {
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
        let mut balancer = Balancer::new(servers, shared.frontend.balance);
        // Every worker's balancer would start its rotation on the first
        // backend, so a few connections spread over N workers would all
        // land there: each worker starts `index` picks further on.
        if matches!(
            balancer.algorithm(),
            Algorithm::RoundRobin | Algorithm::LeastConn
        ) {
            for _ in 0..worker.index {
                let _ = balancer.pick(IpAddr::from([0, 0, 0, 0]));
            }
        }
        let counters = shared
            .counters
            .get(worker.index)
            .cloned()
            .unwrap_or_else(|| Arc::new(FrontendCounters::new(shared.frontend.backends.len())));
        Local {
            shared,
            worker: worker.clone(),
            counters,
            balancer: RefCell::new(balancer),
            // The board starts at generation 0 with every server up, as a
            // new balancer does.
            seen_generation: Cell::new(0),
        }
    }

    /// The steps of the module docs, up to the end of the relay.
    async fn run(&self, client: &TcpStream, trace: &mut Trace) -> Result<(), Refusal> {
        let frontend = &self.shared.frontend;
        // 1. Who is the client? Behind another balancer, its PROXY header says.
        // Where the client connected to, for a PROXY header we send: from
        // its own header, or (asked of the kernel only when needed, one
        // syscall) the socket's local address.
        let mut destination = None;
        let mut early = Vec::new();
        if frontend.accept_proxy {
            // Only a trusted peer (the balancer in front) may speak for a
            // client: anyone else could claim any address, and with it get
            // past allow/deny and the per-source limit.
            let peer = trace.client.ip();
            if !frontend.proxy_from.is_empty()
                && !frontend.proxy_from.iter().any(|c| c.contains(peer))
            {
                return Err(Refusal::denied(
                    "not among the peers trusted to send a PROXY header (accept-proxy)",
                ));
            }
            let (addresses, rest) = self.read_proxy_header(client).await?;
            if let Addresses::Proxied {
                source,
                destination: to,
            } = addresses
            {
                trace.client = source;
                destination = Some(to);
            }
            early = rest;
        }
        // 2. May it connect at all?
        let ip = trace.client.ip();
        if !frontend.access.admits(ip) {
            return Err(Refusal::denied("denied by allow/deny"));
        }
        let _per_source = match &self.shared.sources {
            Some(sources) => Some(sources.try_acquire(ip).ok_or_else(|| {
                Refusal::denied(format!("over maxconn-per-source {}", sources.max()))
            })?),
            None => None,
        };
        // 3. A backend (the places under the global and frontend maxconn
        // were taken by the accept loop): waiting for one below its maxconn
        // may take `timeout queue`, retries included.
        let waiting = Instant::now();
        let deadline = waiting + frontend.timeouts.queue();
        let (index, backend, _backend_place) = self.connect(trace, waiting, deadline).await?;
        let server = &frontend.backends[index];
        // Small writes (a request line, a prompt) go out at once, not batched.
        let _ = client.set_nodelay(true);
        let _ = backend.set_nodelay(true);
        let server_counters = self.counters.backends.get(index);
        if let Some(c) = server_counters {
            counters::inc(&c.connections);
        }
        let _server_active = server_counters.map(|c| Active::new(&c.active));
        // 4. What the backend must hear before the client's bytes. The
        // client's bytes read with its PROXY header go first, outside the
        // relay: they are counted with the relay's below.
        let early_payload = early.len() as u64;
        if let Some(version) = server.send_proxy {
            let to = destination
                .or_else(|| client.local_addr().ok())
                .unwrap_or(server.addr);
            early.splice(0..0, proxy_protocol::encode(version, trace.client, to));
        }
        if !early.is_empty() {
            if let Err(e) = backend.write_all(&early).await {
                let _ = backend.set_reset_on_close();
                return Err(Refusal::new(
                    format!("backend {} failed before the relay: {e}", server.addr),
                    Termination::SERVER_RESET,
                ));
            }
        }
        // 5. The relay.
        trace.phase = Phase::Data;
        self.balancer.borrow_mut().connection_opened(index);
        let stop = self.worker.kill.fired();
        let mut outcome =
            relay::relay_until(client, &backend, self.shared.relay_limits, stop).await;
        outcome.upstream += early_payload;
        self.balancer.borrow_mut().connection_closed(index);
        // Counted while this connection still holds its place, as HAProxy's
        // %sc includes the connection being logged.
        trace.server_open = self
            .shared
            .backend_limits
            .get(index)
            .map_or(0, |limit| limit.open());
        self.count_outcome(index, &outcome);
        trace.bytes_up = outcome.upstream;
        trace.bytes_down = outcome.downstream;
        trace.termination = Termination::of_relay(outcome.ending, outcome.first_fin);
        Ok(())
    }

    /// Adds a finished relay to the frontend's and the backend's counters.
    fn count_outcome(&self, index: usize, outcome: &relay::Outcome) {
        let c = &self.counters;
        counters::add(&c.bytes_in, outcome.upstream);
        counters::add(&c.bytes_out, outcome.downstream);
        if let Some(server) = c.backends.get(index) {
            counters::add(&server.bytes_in, outcome.upstream);
            counters::add(&server.bytes_out, outcome.downstream);
        }
        if matches!(outcome.ending, Ending::IdleTimeout | Ending::FinTimeout) {
            counters::inc(&c.timeouts);
        }
    }

    /// Reads an `accept-proxy` client's PROXY header within `timeout
    /// client-hs`; the bytes read past it are the client's first payload.
    async fn read_proxy_header(&self, client: &TcpStream) -> Result<(Addresses, Vec<u8>), Refusal> {
        let limit = self.shared.frontend.timeouts.client_hs;
        proxy_protocol::read_header(client, limit)
            .await
            .map_err(|e| {
                let termination = match e.kind() {
                    io::ErrorKind::TimedOut => Termination::PROXY_HEADER_TIMEOUT,
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                        Termination::CLIENT_ABORT_IN_REQUEST
                    }
                    _ => Termination::BAD_PROXY_HEADER,
                };
                Refusal::new(format!("PROXY header: {e}"), termination)
            })
    }

    /// A place under the global and the frontend maxconn, if both have one.
    pub fn try_admit(&self) -> Option<Places> {
        let global = self.worker.global.try_acquire()?;
        let frontend = self.shared.limit.try_acquire()?;
        Some((global, frontend))
    }

    /// Connects to a backend, trying another one after each failure, up to
    /// the frontend's `retries`. Returns the backend's index, the socket and
    /// its place under the backend's maxconn. `waiting` is when the wait
    /// for places began (the end of the waits is the start of `Tc`).
    async fn connect(
        &self,
        trace: &mut Trace,
        waiting: Instant,
        deadline: Instant,
    ) -> Result<(usize, TcpStream, Permit), Refusal> {
        let frontend = &self.shared.frontend;
        let peer = trace.client;
        let mut tried: Vec<usize> = Vec::new();
        // The last failure, once there is one.
        let mut failure: Option<Refusal> = None;
        let mut connecting: Option<Instant> = None;
        for attempt in 0..=frontend.retries {
            // Waiting here means waiting for a backend below its maxconn.
            trace.phase = Phase::Queue;
            let picked = self.pick(peer.ip(), &tried, deadline).await;
            trace.phase = Phase::Connect;
            let (index, place) = match picked {
                Ok(picked) => picked,
                Err(NoBackend::Full) => {
                    trace.wait.get_or_insert(waiting.elapsed());
                    return Err(Refusal::new(
                        "every backend is at its maxconn, past the timeout queue",
                        Termination::QUEUE_TIMEOUT,
                    ));
                }
                Err(NoBackend::Unavailable) => {
                    return Err(match failure {
                        None => Refusal::new(
                            "no backend available (all down or drained)",
                            Termination::NO_SERVER,
                        ),
                        Some(last) => Refusal::new(
                            format!("{}; no other backend to try", last.why),
                            last.termination,
                        ),
                    });
                }
            };
            // Tw ends, and Tc begins, at the first connect attempt; a
            // client that never got one logs Tw as -1, as HAProxy does.
            let started = *connecting.get_or_insert_with(Instant::now);
            trace.wait.get_or_insert(started - waiting);
            let addr = frontend.backends[index].addr;
            trace.backend = Some(index);
            if let Some(last) = &failure {
                trace.retries = attempt;
                counters::inc(&self.counters.retries);
                crate::warn!(
                    "frontend {}: {peer}: {}; retrying on {addr} (retry {attempt} of {})",
                    frontend.name,
                    last.why,
                    frontend.retries
                );
            }
            let connect = time::timeout(frontend.timeouts.connect, TcpStream::connect(addr));
            let (why, termination) = match connect.await {
                Ok(Ok(stream)) => {
                    self.shared.board.passive_success(index);
                    trace.connect = Some(started.elapsed());
                    return Ok((index, stream, place));
                }
                // Our shortage, not the backend's fault: it must not count
                // against its health, and another backend would fare no
                // better.
                Ok(Err(e)) if is_fd_exhaustion(&e) => {
                    return Err(Refusal::new(
                        format!("no socket for a backend connection: {e}"),
                        Termination::CONNECT_NO_RESOURCE,
                    ));
                }
                Ok(Err(e)) => (health::reason(&e), Termination::of_connect_error(&e)),
                Err(_) => (
                    format!("no answer within {:?}", frontend.timeouts.connect),
                    Termination::CONNECT_TIMEOUT,
                ),
            };
            self.shared.board.passive_failure(index, &why);
            if let Some(server) = self.counters.backends.get(index) {
                counters::inc(&server.connect_errors);
            }
            tried.push(index);
            failure = Some(Refusal::new(
                format!("connect to {addr} failed: {why}"),
                termination,
            ));
        }
        let last = failure.unwrap_or_else(|| Refusal::new("", Termination::NO_SERVER));
        Err(Refusal::new(
            format!("{}; all {} retries used", last.why, frontend.retries),
            last.termination,
        ))
    }

    /// Picks a backend not in `tried` that is below its maxconn, and takes a
    /// place there. If every candidate is full, waits (until `deadline`)
    /// for one of them to have room: HAProxy's server queue.
    async fn pick(
        &self,
        client: IpAddr,
        tried: &[usize],
        deadline: Instant,
    ) -> Result<(usize, Permit), NoBackend> {
        // `tried`, then the servers found full during this pick.
        let mut avoid: Vec<usize> = tried.to_vec();
        loop {
            self.sync_health();
            let chosen = self.balancer.borrow_mut().pick_avoiding(client, &avoid);
            // A backup serves only when every normal backend is down or
            // failed, as HAProxy's: normal ones merely full mean "queue".
            let backends = &self.shared.frontend.backends;
            let chosen = chosen.filter(|&index| {
                !backends[index].backup
                    || !avoid[tried.len()..].iter().any(|&f| !backends[f].backup)
            });
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

    /// Writes the connection's access-log line into the worker's buffer.
    fn log(&self, trace: &Trace) {
        let Some(sink) = &self.worker.sink else {
            return;
        };
        let shared = &self.shared;
        let backend = trace.backend.and_then(|i| shared.frontend.backends.get(i));
        let record = Record {
            accepted: trace.accepted,
            client: trace.client,
            frontend: &shared.frontend.name,
            backend: backend.map(|b| b.addr),
            wait: trace.wait,
            connect: trace.connect,
            total: trace.started.elapsed(),
            bytes_down: trace.bytes_down,
            bytes_up: trace.bytes_up,
            termination: trace.termination,
            retries: trace.retries,
            // Every retry goes to another backend (a redispatch).
            redispatched: trace.retries > 0,
            active_process: self.worker.global.open(),
            active_frontend: shared.limit.open(),
            active_backend: shared.limit.open(),
            active_server: trace.server_open,
        };
        sink.borrow_mut().record(&record);
    }
}

/// Counts a refused client under the counter its refusal belongs to.
fn count_refusal(counters: &FrontendCounters, refusal: &Refusal) {
    let counter = match refusal.termination.phase {
        _ if refusal.denied => &counters.denied,
        Phase::Queue => &counters.queue_timeouts,
        Phase::Connect => &counters.connect_errors,
        _ => return,
    };
    counters::inc(counter);
}
