//! Reaching a backend for one connection: pick one with the frontend's
//! algorithm, pass over those at their `maxconn` and queue when all are,
//! connect within `timeout connect`, and on a failure try another one, up to
//! `retries` (nginx's `proxy_next_upstream`; HAProxy's `option redispatch`).
//!
//! ```text
//!   pick (balance, health) ──full──▶ next one ──all full──▶ wait for room (timeout queue)
//!     │ a place under its maxconn
//!     ▼
//!   connect (timeout connect) ──failed──▶ report to health, pick another ──none left──▶ refuse
//!     │ connected
//!     ▼
//!   the relay (connection.rs)
//! ```
//!
//! These are methods of the connection's `WorkerFrontend`, in a file of their own
//! because they are one idea: the rest of a connection's steps are in
//! `connection.rs`. Nothing has been sent to a backend before it accepts,
//! so a retry never duplicates data; a backend is never tried twice for one
//! client.

use std::future::{Future, poll_fn};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use runtime::net::{TcpStream, is_fd_exhaustion};
use runtime::time;

use crate::ops::access_log::termination::{Phase, Termination};
use crate::ops::metrics::counters::{self, Active};
use crate::policy::health;
use crate::policy::limit::Permit;

use super::backend_socket::Backend;
use super::connection::Refusal;
use super::frontend::WorkerFrontend;
use super::trace::{Micros, Trace};

/// Why no backend could be picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoBackend {
    /// None is up (or every one left was tried already).
    Unavailable,
    /// Some are up but all are at their maxconn, and stayed so for the
    /// queue timeout.
    Full,
    /// All are at their maxconn, and their queues at their `maxqueue`.
    QueuesFull,
}

/// How often a client waiting for a backend in its slowstart looks again:
/// that backend's `maxconn` grows with time, not only when a place is
/// given back.
const RAMP_LOOK: Duration = Duration::from_millis(100);

/// How one connect attempt ended, when it did not connect.
enum Failed {
    /// Try another backend: this one refused, or did not answer.
    Retry(Refusal),
    /// Give up at once: our own shortage (no descriptor for the socket),
    /// which another backend would meet too.
    Fatal(Refusal),
}

impl WorkerFrontend {
    /// Connects to a backend, trying another one after each failure, up to
    /// the frontend's `retries`. Returns the backend's index, the socket and
    /// its place under the backend's maxconn. `waiting` is when the wait
    /// for places began (the end of the waits is the start of `Tc`).
    pub(super) async fn connect(
        &self,
        trace: &mut Trace,
        waiting: Instant,
        deadline: Instant,
    ) -> Result<(usize, Backend, Permit), Refusal> {
        let retries = self.shared.frontend.retries;
        let mut tried: Vec<usize> = Vec::new();
        // The last failure, once there is one.
        let mut failure: Option<Refusal> = None;
        let mut connecting: Option<Instant> = None;
        for attempt in 0..=retries {
            let (index, place) = self
                .next_backend(trace, &tried, &failure, waiting, deadline)
                .await?;
            // Tw ends, and Tc begins, at the first connect attempt; a
            // client that never got one logs Tw as -1, as HAProxy does.
            let started = *connecting.get_or_insert_with(Instant::now);
            trace.wait.first(started - waiting);
            trace.backend = u32::try_from(index).ok();
            trace.server_addr = self.shared.addresses.get(index);
            if let Some(last) = &failure {
                self.note_retry(trace, attempt, last, index);
            }
            match self.attempt(index, trace.server_addr).await {
                Ok(stream) => {
                    trace.connect = Micros::of(Some(started.elapsed()));
                    return Ok((index, stream, place));
                }
                Err(Failed::Fatal(refusal)) => return Err(refusal),
                Err(Failed::Retry(refusal)) => {
                    let server = self.counters.backends.get(index);
                    if let Some(server) = server.filter(|_| attempt < retries) {
                        counters::inc(&server.redispatches);
                    }
                    tried.push(index);
                    failure = Some(refusal);
                }
            }
        }
        let last = failure.unwrap_or_else(|| Refusal::new("", Termination::NO_SERVER));
        Err(Refusal::new(
            format!("{}; all {retries} retries used", last.why),
            last.termination,
        ))
    }

    /// The next backend to try and a place under its maxconn, or why the
    /// client is refused: every backend full past `timeout queue`, or none
    /// left (down, drained, or tried: then the last failure is the reason).
    async fn next_backend(
        &self,
        trace: &mut Trace,
        tried: &[usize],
        failure: &Option<Refusal>,
        waiting: Instant,
        deadline: Instant,
    ) -> Result<(usize, Permit), Refusal> {
        // Waiting here means waiting for a backend below its maxconn.
        trace.phase = Phase::Queue;
        let picked = self
            .pick(trace.client.ip(), trace.group, tried, deadline)
            .await;
        trace.phase = Phase::Connect;
        match (picked, failure) {
            (Ok(picked), _) => Ok(picked),
            (Err(NoBackend::Full), _) => {
                trace.wait.first(waiting.elapsed());
                Err(Refusal::new(
                    "every backend is at its maxconn, past the timeout queue",
                    Termination::QUEUE_TIMEOUT,
                ))
            }
            (Err(NoBackend::QueuesFull), _) => {
                trace.wait.first(waiting.elapsed());
                Err(Refusal::new(
                    "every backend is at its maxconn and its queue at its maxqueue",
                    Termination::QUEUE_FULL,
                ))
            }
            (Err(NoBackend::Unavailable), None) => Err(Refusal::new(
                "no backend available (all down or drained)",
                Termination::NO_SERVER,
            )),
            (Err(NoBackend::Unavailable), Some(last)) => Err(Refusal::new(
                format!("{}; no other backend to try", last.why),
                last.termination,
            )),
        }
    }

    /// Counts and logs a retry on backend `index` after `last` failed.
    fn note_retry(&self, trace: &mut Trace, attempt: u32, last: &Refusal, index: usize) {
        let frontend = &self.shared.frontend;
        trace.retries = attempt;
        counters::inc(&self.counters.retries);
        if let Some(server) = self.counters.backends.get(index) {
            counters::inc(&server.retries);
        }
        crate::warn!(
            "frontend {}: {}: {}; retrying on {} (retry {attempt} of {})",
            frontend.name,
            trace.client,
            last.why,
            frontend.backends[index].label(),
            frontend.retries
        );
    }

    /// One connect to backend `index`, at `addr` (where it is now: its
    /// address, or its host name's last good answer), within `timeout
    /// connect`, reported to its health board and counters.
    async fn attempt(&self, index: usize, addr: Option<SocketAddr>) -> Result<Backend, Failed> {
        let frontend = &self.shared.frontend;
        let Some(addr) = addr else {
            // Out of rotation until its name resolves: a pick that raced
            // its way here, not the server's fault.
            let server = frontend.backends[index].label();
            let why = format!("backend {server} has no address: its name has not resolved");
            return Err(Failed::Retry(Refusal::new(why, Termination::NO_SERVER)));
        };
        let limit = frontend.timeouts.connect;
        // The socket is held here, not inside a connect future, so that a
        // connection cut mid-handshake still resets it (`Backend`).
        let outcome = match TcpStream::start_connect(addr) {
            Ok(connecting) => {
                let mut backend = Backend::new(connecting);
                match time::timeout(limit, backend.handshake()).await {
                    Ok(Ok(())) => Ok(Ok(backend)),
                    Ok(Err(e)) => Ok(Err(e)),
                    Err(elapsed) => Err(elapsed),
                }
            }
            Err(e) => Ok(Err(e)),
        };
        let (why, termination) = match outcome {
            Ok(Ok(backend)) => {
                self.shared.board.passive_success(index);
                return Ok(backend);
            }
            // Our shortage, not the backend's fault: it must not count
            // against its health, and another backend would fare no better.
            Ok(Err(e)) if is_fd_exhaustion(&e) => {
                return Err(Failed::Fatal(Refusal::new(
                    format!("no socket for a backend connection: {e}"),
                    Termination::CONNECT_NO_RESOURCE,
                )));
            }
            Ok(Err(e)) => (health::reason(&e), Termination::of_connect_error(&e)),
            Err(_) => (
                format!("no answer within {limit:?}"),
                Termination::CONNECT_TIMEOUT,
            ),
        };
        self.shared.board.passive_failure(index, &why);
        if let Some(server) = self.counters.backends.get(index) {
            counters::inc(&server.connect_errors);
        }
        let server = &frontend.backends[index];
        let server = match server.addr.host() {
            Some(_) => format!("{} at {addr}", server.label()),
            None => server.label(),
        };
        let refusal = Refusal::new(format!("connect to {server} failed: {why}"), termination);
        Err(Failed::Retry(refusal))
    }

    /// Picks a backend not in `tried` that is below its maxconn, and takes a
    /// place there. If every candidate is full, waits (until `deadline`)
    /// for one of them to have room: HAProxy's server queue, where a
    /// backend with a `maxqueue` holds that many waiting clients at most (a
    /// client then waits in another's queue, or is refused when all are
    /// full).
    async fn pick(
        &self,
        client: IpAddr,
        group: usize,
        tried: &[usize],
        deadline: Instant,
    ) -> Result<(usize, Permit), NoBackend> {
        // `tried`, then the servers found full during this pick.
        let mut avoid: Vec<usize> = tried.to_vec();
        loop {
            if let Some(picked) = self.pick_with_room(client, group, tried, &mut avoid) {
                return Ok(picked);
            }
            let full = &avoid[tried.len()..];
            if full.is_empty() {
                return Err(NoBackend::Unavailable);
            }
            let Some((queue, _queued)) = self.queue_place(full) else {
                return Err(NoBackend::QueuesFull);
            };
            let _waiting = self
                .counters
                .backends
                .get(queue)
                .map(|c| Active::with_peak(&c.queued, &c.max_queued));
            let now = Instant::now();
            let mut left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(NoBackend::Full);
            }
            let board = &self.shared.board;
            if full.iter().any(|&i| board.ramp(i, now).is_some()) {
                left = left.min(RAMP_LOOK);
            }
            // Boxed: the wait for room is the rare path (every candidate at
            // its maxconn), and held inline its timer would make every
            // connection's task, for its whole life, that much bigger.
            let waited = Box::pin(time::timeout(left, self.some_room(full))).await;
            if waited.is_err() && Instant::now() >= deadline {
                return Err(NoBackend::Full);
            }
            avoid.truncate(tried.len());
        }
    }

    /// One round of picks: a backend not in `avoid` with a place under its
    /// `maxconn` (as its slowstart has it now), and the place; each one
    /// found full is added to `avoid`. `None` when none is left.
    fn pick_with_room(
        &self,
        client: IpAddr,
        group: usize,
        tried: &[usize],
        avoid: &mut Vec<usize>,
    ) -> Option<(usize, Permit)> {
        let backends = &self.shared.frontend.backends;
        loop {
            self.sync_health();
            let index = self.pick_in(group, client, avoid)?;
            // A backup serves only when every normal backend is down or
            // failed, as HAProxy's: normal ones merely full mean "queue".
            if backends[index].backup && avoid[tried.len()..].iter().any(|&f| !backends[f].backup) {
                return None;
            }
            let cap = self
                .shared
                .board
                .maxconn_now(index, backends[index].maxconn, Instant::now());
            match self.shared.backend_limits[index].try_acquire_under(cap) {
                Some(place) => return Some((index, place)),
                None => avoid.push(index),
            }
        }
    }

    /// A place in the queue of one of the `full` backends, for a client
    /// about to wait: the first without a `maxqueue`, or with room in it
    /// (`None` for the place: a backend without one), and that backend's
    /// index. `None` when every queue is at its `maxqueue`.
    fn queue_place(&self, full: &[usize]) -> Option<(usize, Option<Permit>)> {
        let queues = &self.shared.queues;
        full.iter()
            .find_map(|&index| match queues.get(index).and_then(Option::as_ref) {
                None => Some((index, None)),
                Some(queue) => queue.try_acquire().map(|p| (index, Some(p))),
            })
    }

    /// The pick of `group`'s balancer, avoiding `avoid` (indexes in the
    /// frontend's list, all of that group: they came from its picks).
    fn pick_in(&self, group: usize, client: IpAddr, avoid: &[usize]) -> Option<usize> {
        let start = self.shared.frontend.group(group)?.backends.start;
        let mut balancers = self.balancers.borrow_mut();
        let balancer = balancers.get_mut(group)?;
        if start == 0 {
            // The default group: its indexes are the frontend's.
            return balancer.pick_avoiding(client, avoid);
        }
        let local: Vec<usize> = avoid.iter().map(|&i| i.saturating_sub(start)).collect();
        balancer.pick_avoiding(client, &local).map(|i| i + start)
    }

    /// Ready once any of the `full` backends has room again: this task
    /// waits on every one of them, so the first place given back anywhere
    /// wakes it. The waits are taken before the limits are looked at, so a
    /// place given back in between is not missed.
    async fn some_room(&self, full: &[usize]) {
        let limits = &self.shared.backend_limits;
        let mut changes: Vec<_> = full.iter().map(|&index| limits[index].changed()).collect();
        if full.iter().any(|&index| limits[index].has_room()) {
            return;
        }
        poll_fn(|cx| {
            let mut ready = false;
            for change in &mut changes {
                ready |= Pin::new(change).poll(cx).is_ready();
            }
            if ready {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// Copies the health board's verdicts and weights (its agents', those
    /// of servers in their slowstart, and the operator's states and
    /// weights: `policy/admin_state.rs`) into this worker's balancers if
    /// they changed since the last time (two atomic loads when they did
    /// not). A server without an address yet (its name has not resolved)
    /// counts as down; the address book's generation moves when one gets
    /// an address.
    fn sync_health(&self) {
        let board = &self.shared.board;
        let addresses = &self.shared.addresses;
        let generation = (board.generation(), addresses.generation());
        if generation == self.seen_generation.get() {
            return;
        }
        let frontend = &self.shared.frontend;
        let now = Instant::now();
        let mut balancers = self.balancers.borrow_mut();
        for (g, balancer) in balancers.iter_mut().enumerate() {
            let Some(group) = frontend.group(g) else {
                continue;
            };
            let start = group.backends.start;
            let admin = board.admin();
            for index in group.backends.filter(|&i| i < board.len()) {
                let located = addresses.get(index).is_some();
                let takes_new = admin.takes_new(index);
                balancer.set_up(index - start, board.is_up(index) && located && takes_new);
                let percent = board.weight_percent_now(index, now);
                match admin.weight(index) {
                    Some(weight) => balancer.set_configured_weight(index - start, weight, percent),
                    None => balancer.set_weight_percent(index - start, percent),
                }
            }
        }
        self.seen_generation.set(generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read};
    use std::time::Duration;

    /// What the backend's side reads once ours is gone: `Ok(0)` for a FIN,
    /// the error for a reset.
    fn peer_sees(peer: &mut std::net::TcpStream) -> std::io::Result<usize> {
        peer.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        peer.read(&mut [0u8; 16])
    }

    // A connection cut before its relay (a graceful stop, a
    // refusal after connecting) resets its backend socket, whether the
    // handshake was awaited or only done by the kernel; once the relay has
    // it, it closes the relay's way (here: a FIN).
    #[test]
    fn a_backend_socket_resets_unless_the_relay_took_it() {
        let listener =
            std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("a listener");
        let addr = listener.local_addr().expect("its address");
        let rt = runtime::Runtime::new().expect("a runtime");
        rt.block_on(async {
            // Connected, then dropped (cut while its PROXY header was sent).
            let mut backend = Backend::new(TcpStream::start_connect(addr).expect("connect"));
            backend.handshake().await.expect("connected");
            let (mut peer, _) = listener.accept().expect("accept");
            drop(backend);
            let read = peer_sees(&mut peer);
            assert_eq!(read.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));

            // The handshake done by the kernel but not yet seen by the task
            // (a cut mid-connect): without the reset this would be a FIN.
            let backend = Backend::new(TcpStream::start_connect(addr).expect("connect"));
            let (mut peer, _) = listener.accept().expect("accept");
            drop(backend);
            let read = peer_sees(&mut peer);
            assert_eq!(read.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));

            // Handed to the relay: closing is the relay's business.
            let mut backend = Backend::new(TcpStream::start_connect(addr).expect("connect"));
            backend.handshake().await.expect("connected");
            let stream = backend.into_relay();
            let (mut peer, _) = listener.accept().expect("accept");
            drop(stream);
            assert_eq!(peer_sees(&mut peer).map_err(|e| e.kind()), Ok(0));
        });
    }
}
