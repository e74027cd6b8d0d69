//! One client connection's life in the epoll mode, from accept to its
//! access-log line.
//!
//! ```text
//!   accept loop: a place under the global and frontend maxconn (waits, never refuses)
//!        │
//!   1 PROXY header? ─▶ 2 allowed? ─▶ 3 pick a backend ─▶ connect ─▶ 4 PROXY header out?
//!   (accept-proxy)     (allow/deny,   (in the group its   (timeout    (send-proxy)
//!                       per source)    ClientHello's name  connect;          │
//!                                      routes to: choose_group.rs; retry elsewhere) │
//!                                      balance, health,                      │
//!                                      backend maxconn,                      │
//!                                      timeout queue)                        ▼
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
//! either the worker's own (`WorkerFrontend`: the balancer, the access-log buffer)
//! or shared through atomics (limits, health): no lock on this path.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, recv};
use runtime::combinator::{Either, select};
use runtime::net::TcpStream;
use runtime::notify::Notified;

use super::backend_socket::Backend;
use super::frontend::{SharedFrontend, WorkerFrontend};
use super::moving::{self, Handed};
use super::orders::Order;
use super::trace::{Micros, Relayed, Trace};
use super::worker_context::WorkerContext;
use crate::conn::machine::{Ending, Outcome};
use crate::conn::proxy_protocol::{self, Addresses};
use crate::conn::relay::{self, Interrupt, Start, Stopped};
use crate::conn::splice::Splicing;
use crate::conn::timeouts::Timeouts;
use crate::ops::access_log::record::{Record, ServerRef};
use crate::ops::access_log::termination::{Cause, Phase, Termination};
use crate::ops::metrics::counters::{self, Active, FrontendCounters};
use crate::policy::balance::{Algorithm, Balancer, Server};
use crate::policy::limit::Permit;
use crate::policy::source_limit::SourcePermit;
use crate::settings::config::BackendServer;

/// A connection ready for its relay: the backend's socket, which backend,
/// the client's bytes sent before the relay (counted with its own), and the
/// places it holds until it ends (its source's, its backend's, and the
/// backend's gauge of open connections).
pub(super) struct Connected<'a> {
    /// Resets when dropped until the relay takes it (backend_socket.rs).
    backend: Backend,
    index: usize,
    early_payload: u64,
    _places: (Option<Box<SourcePermit>>, Permit, Option<Active<'a>>),
}

/// The places a connection holds under the global and frontend maxconn.
pub(crate) type Admission = (Permit, Permit);

/// A client turned away: why (for the daemon's log) and how (for the
/// access log).
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) why: String,
    pub(super) termination: Termination,
    /// Turned away by an access rule (allow/deny, per-source limit): routine,
    /// counted as denied, logged only at debug level.
    pub(super) denied: bool,
}

impl Refusal {
    pub(super) fn new(why: impl Into<String>, termination: Termination) -> Refusal {
        Refusal {
            why: why.into(),
            termination,
            denied: false,
        }
    }

    pub(super) fn denied(why: impl Into<String>) -> Refusal {
        Refusal {
            denied: true,
            ..Refusal::new(why, Termination::DENIED)
        }
    }
}

/// The future of [`WorkerFrontend::interrupt`], written by hand: a relaying
/// connection keeps it for its whole life, and an `async` block would keep
/// a reference to each thing it waits on besides the waits themselves.
///
/// One registration hears all three: the worker's orders and a cut of any
/// server wake the same notify (`orders.rs`), and each wake-up looks at the
/// kill order, its server's cut count and the park order, in that order.
pub(super) struct Interrupting<'a> {
    local: &'a WorkerFrontend,
    /// Made before the first look, and again after each wake-up: an order
    /// or a cut given in between is seen by one or the other.
    notified: Notified<'a>,
    /// Its server, and that server's cut count when the relay began.
    server: u32,
    cuts: u32,
    /// Whether a park order may still stop it: not for a connection the
    /// new process refused, nor once a park found nowhere to go.
    parks: bool,
    /// Stopped by a cut of its server (`DD`, or `KD` by the operator).
    pub(super) server_cut: bool,
}

impl Interrupting<'_> {
    /// What stops the relay now, if anything does.
    fn look(&mut self) -> Option<Interrupt> {
        let worker = &self.local.worker;
        if worker.orders.given(Order::Kill) {
            return Some(Interrupt::Stop);
        }
        if self.local.shared.board.cuts(self.server as usize) != self.cuts {
            self.server_cut = true;
            return Some(Interrupt::Stop);
        }
        if self.parks && worker.orders.given(Order::Park) {
            if worker.moving.outbound.borrow().is_some() {
                return Some(Interrupt::Park);
            }
            // Park, with nowhere to go any more: kill and cuts alone, from
            // now on.
            self.parks = false;
        }
        None
    }
}

impl Future for Interrupting<'_> {
    type Output = Interrupt;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Interrupt> {
        let this = &mut *self;
        // At most twice round: a wake-up for something else (a park with
        // nowhere to go, another server's cut) makes a new `Notified`,
        // which then waits for the next.
        loop {
            if let Some(interrupt) = this.look() {
                return Poll::Ready(interrupt);
            }
            if Pin::new(&mut this.notified).poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.notified = this.local.worker.orders.notified();
        }
    }
}

/// One connection's whole life (module docs). `places` are its places
/// under the global and frontend maxconn, taken by the accept loop; they
/// also keep it in the count a graceful stop waits on.
pub(crate) fn serve(
    client: TcpStream,
    peer: SocketAddr,
    local: Rc<WorkerFrontend>,
    places: Admission,
) -> impl Future<Output = ()> {
    // A block, not an `async fn`, so that what it captures is kept once
    // (WorkerFrontend::relay_phase says why); the trace made now, at the accept, so
    // that the block keeps it and not the peer's address besides. The
    // client is an `Option` the relay takes it from when the connection
    // moves to a new process: the relay borrows this one place instead of
    // keeping a second.
    let mut trace = Trace::new(peer, local.worker.log_needs.counter);
    let mut client = Some(client);
    async move {
        counters::inc(&local.counters.connections);
        let _active = Active::with_peak(&local.counters.active, &local.counters.max_active);
        let Some(stream) = client.as_ref() else {
            return;
        };
        // The prepared connection is taken apart at once, each part a local
        // of its own: what the relay does not need is not kept while it runs.
        let (backend, index, early, backend_places) =
            match local.prepare_or_kill(stream, &mut trace).await {
                Ok(c) => (c.backend, c.index, c.early_payload, c._places),
                Err(refusal) => {
                    if let Some(client) = client.take() {
                        local.turn_away(client, trace, refusal, places);
                    }
                    return;
                }
            };
        let backend = backend.into_relay();
        let relayed = local.relay_phase(
            &mut client,
            backend,
            (index, early),
            Start::Fresh,
            &mut trace,
        );
        let relayed = relayed.await;
        // Its backend's places go with its backend's socket, before its line.
        drop(backend_places);
        // `None`: moved to a new process, which logs it at its close.
        if let Some(client) = client.take() {
            local.close(client, &trace, relayed, places);
        }
    }
}

impl WorkerFrontend {
    /// A connection refused before its relay: counted and logged as
    /// [`WorkerFrontend::refused`] says, then closed.
    fn turn_away(&self, client: TcpStream, mut trace: Trace, refusal: Refusal, places: Admission) {
        self.refused(&client, &mut trace, refusal);
        self.close(client, &trace, Relayed::default(), places);
    }

    /// A connection's end: its access-log line, then its client's socket
    /// closed, then its places given back. The descriptor goes first: the
    /// place freed may let another client be accepted at once, and the
    /// descriptor budget counts two descriptors per place (descriptors.rs).
    fn close(&self, client: TcpStream, trace: &Trace, relayed: Relayed, places: Admission) {
        self.log(&client, trace, relayed);
        drop(client);
        drop(places);
    }

    /// A connection that will not be relayed: counted, said in the daemon's
    /// log as its kind deserves, and its client set to be reset.
    fn refused(&self, client: &TcpStream, trace: &mut Trace, refusal: Refusal) {
        let counters = &self.counters;
        count_refusal(counters, &refusal);
        // Denials are routine (a scanner, a client over its limit): the
        // access log has them; the daemon's log only at debug level.
        let name = &self.shared.frontend.name;
        if refusal.denied {
            crate::debug!(
                "frontend {name}: {}: {}; resetting",
                trace.client,
                refusal.why
            );
        } else if has_gone(client) {
            // Nobody is there to be told: counted, and said with the others
            // at most once a second (worker_context.rs).
            counters::inc(&counters.gone);
            self.worker.note_gone(format!(
                "frontend {name}: {}: {}",
                trace.client, refusal.why
            ));
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
}

/// Has a client being refused gone already: reset its connection, or sent
/// its FIN with nothing before it? One `recv(MSG_PEEK)`, on the refusal path
/// only.
fn has_gone(client: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    match recv(client.as_raw_fd(), &mut byte, flags) {
        Ok(0) => true,
        Ok(_) | Err(Errno::EAGAIN | Errno::EINTR) => false,
        // ECONNRESET, ETIMEDOUT, EPIPE: the connection is dead.
        Err(_) => true,
    }
}

/// A client accepted in the race for the last place (worker.rs, `admit`)
/// whose accept loop ended while it waited: its listener was closed by a
/// graceful stop, or by a reload that moved or removed its frontend. It
/// goes the way of the clients still in that listener's queue, which the
/// kernel resets, but with its access-log line: reset, and logged `KQ`
/// (killed while waiting for a place), with the time it waited as `%Tw`.
pub(crate) fn cut_while_waiting(
    client: TcpStream,
    peer: SocketAddr,
    accepted: SystemTime,
    started: Instant,
    local: &WorkerFrontend,
) {
    counters::inc(&local.counters.connections);
    let counted = local.worker.log_needs.counter;
    let trace = Trace {
        wait: Micros::of(Some(started.elapsed())),
        termination: Termination::new(Cause::Killed, Phase::Queue),
        phase: Phase::Queue,
        ..Trace::at(peer, accepted, started, counted)
    };
    crate::warn!(
        "frontend {}: {peer}: its listener closed (a stop, or a reload that moved or removed the \
         frontend) while it waited for a place under the global or frontend maxconn; resetting \
         the client",
        local.shared.frontend.name
    );
    let _ = client.set_reset_on_close();
    local.log(&client, &trace, Relayed::default());
    drop(client);
}

impl WorkerFrontend {
    pub fn new(shared: Arc<SharedFrontend>, worker: &Rc<WorkerContext>) -> WorkerFrontend {
        let frontend = &shared.frontend;
        let balancers = (0..frontend.group_count())
            .filter_map(|g| frontend.group(g))
            .map(|group| {
                let servers = frontend.backends.get(group.backends).unwrap_or_default();
                group_balancer(servers, group.balance, worker.index)
            })
            .collect();
        let counters = shared
            .counters
            .get(worker.index)
            .cloned()
            .unwrap_or_else(|| Arc::new(FrontendCounters::new(shared.frontend.backends.len())));
        // Its relaying connections hear their servers' cuts through the
        // worker's orders (orders.rs).
        shared.board.wake_on_cuts(worker.orders.notify());
        WorkerFrontend {
            shared,
            worker: worker.clone(),
            counters,
            balancers: RefCell::new(balancers),
            // Never seen: the first pick copies the board (every server
            // up, as a new balancer has them) and the address book (which
            // may have servers without an address yet).
            seen_generation: Cell::new((u64::MAX, u64::MAX)),
        }
    }

    /// Steps 1 to 4, raced against the kill order; the relay listens for
    /// it itself (it must reset both sockets when it comes).
    async fn prepare_or_kill(
        &self,
        client: &TcpStream,
        trace: &mut Trace,
    ) -> Result<Connected<'_>, Refusal> {
        let kill = self.worker.orders.heard(&[Order::Kill]);
        // Boxed: the setup lives a few round trips, and its future, the
        // widest of the connection's steps, would otherwise widen the
        // state every connection keeps for its whole life.
        let prepare = Box::pin(self.prepare(client, trace));
        match select(prepare, kill).await {
            Either::Left(prepared) => prepared,
            // Cut before its relay began: the phase says where it was, as
            // HAProxy's `K` codes do. Dropping `prepare` dropped the
            // backend's socket if it had one (connecting, or sending a PROXY
            // header), with a reset (backend_socket.rs, `Backend`).
            Either::Right(()) => {
                let cut = Termination::new(Cause::Killed, trace.phase);
                Err(Refusal::new("cut by the stop", cut))
            }
        }
    }

    /// Steps 1 to 4 of the module docs: everything before the relay.
    async fn prepare(
        &self,
        client: &TcpStream,
        trace: &mut Trace,
    ) -> Result<Connected<'_>, Refusal> {
        // 1. Who is the client? Behind another balancer, its PROXY header says.
        let (destination, early) = self.identify(client, trace).await?;
        // 2. May it connect at all?
        let per_source = self.admit(trace.client.ip())?;
        // With `use-group` rules, its ClientHello says which group.
        let mut early = early;
        trace.group = self.route(client, &mut early, trace).await?;
        // 3. A backend (the places under the global and frontend maxconn
        // were taken by the accept loop): waiting for one below its maxconn
        // may take `timeout queue`, retries included.
        let waiting = Instant::now();
        let deadline = waiting + self.shared.frontend.timeouts.queue();
        let (index, backend, backend_place) = self.connect(trace, waiting, deadline).await?;
        if self.worker.log_needs.backend_source {
            trace.extra_mut().backend_source = backend.stream().local_addr().ok();
        }
        // Small writes (a request line, a prompt) go out at once, not
        // batched. The client has TCP_NODELAY from its listener already
        // (`bind_listeners`); a connecting socket has no listener to copy.
        let _ = backend.stream().set_nodelay(true);
        let server_counters = self.counters.backends.get(index);
        if let Some(c) = server_counters {
            counters::inc(&c.connections);
        }
        let server_active = server_counters.map(|c| Active::with_peak(&c.active, &c.max_active));
        // 4. What the backend must hear before the client's bytes.
        let early_payload = early.len() as u64;
        // A failure here drops `backend`, which resets it.
        self.preamble(client, backend.stream(), index, destination, early, trace)
            .await?;
        Ok(Connected {
            backend,
            index,
            early_payload,
            _places: (per_source, backend_place, server_active),
        })
    }

    /// Step 1: the client's address, and where it connected to, from its
    /// PROXY header with `accept-proxy` (with the bytes read past the
    /// header: the client's first payload). Without one, the peer address
    /// stands, and where it connected to is asked of the kernel only if a
    /// PROXY header is to be sent (one syscall saved per connection).
    async fn identify(
        &self,
        client: &TcpStream,
        trace: &mut Trace,
    ) -> Result<(Option<SocketAddr>, Vec<u8>), Refusal> {
        let frontend = &self.shared.frontend;
        if !frontend.accept_proxy {
            return Ok((None, Vec::new()));
        }
        // Only a trusted peer (the balancer in front) may speak for a
        // client: anyone else could claim any address, and with it get past
        // allow/deny and the per-source limit.
        let peer = trace.client.ip();
        if !frontend.proxy_from.is_empty() && !frontend.proxy_from.iter().any(|c| c.contains(peer))
        {
            return Err(Refusal::denied(
                "not among the peers trusted to send a PROXY header (accept-proxy)",
            ));
        }
        let (addresses, rest) = self
            .read_proxy_header(client)
            .await
            .inspect_err(|refusal| {
                // Bytes that were not a PROXY header are bytes the client sent.
                trace.client_sent |= refusal.termination == Termination::BAD_PROXY_HEADER;
            })?;
        trace.client_sent |= !rest.is_empty();
        match addresses {
            Addresses::Proxied {
                source,
                destination,
            } => {
                trace.client = source;
                trace.extra_mut().destination = Some(destination);
                Ok((Some(destination), rest))
            }
            // A LOCAL header (a health probe of the balancer in front):
            // the connection's own addresses stand.
            Addresses::Local => Ok((None, rest)),
        }
    }

    /// Step 2: the access rules, the source's rate (this connection
    /// counted, refused or not), then a place under `maxconn-per-source`
    /// (held until the connection ends; boxed: few frontends limit their
    /// sources, and every connection keeps the room for one for its whole
    /// life).
    fn admit(&self, ip: IpAddr) -> Result<Option<Box<SourcePermit>>, Refusal> {
        if !self.shared.frontend.access.admits(ip) {
            return Err(Refusal::denied("denied by allow/deny"));
        }
        if let Some(rates) = &self.shared.source_rates {
            if !rates.admit(ip, Instant::now()) {
                return Err(Refusal::denied(format!(
                    "over rate-limit-per-source {} per {:?}",
                    rates.max(),
                    rates.period()
                )));
            }
        }
        let Some(sources) = &self.shared.sources else {
            return Ok(None);
        };
        match sources.try_acquire(ip) {
            Some(permit) => Ok(Some(Box::new(permit))),
            None => Err(Refusal::denied(format!(
                "over maxconn-per-source {}",
                sources.max()
            ))),
        }
    }

    /// Step 4: the PROXY header the backend is to hear (`send-proxy`), then
    /// the client's bytes read with its own header, before the relay (they
    /// are counted with the relay's).
    async fn preamble(
        &self,
        client: &TcpStream,
        backend: &TcpStream,
        index: usize,
        destination: Option<SocketAddr>,
        mut early: Vec<u8>,
        trace: &Trace,
    ) -> Result<(), Refusal> {
        let server = &self.shared.frontend.backends[index];
        if let Some(version) = server.send_proxy {
            let to = destination
                .or_else(|| client.local_addr().ok())
                .or(trace.server_addr)
                .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
            early.splice(0..0, proxy_protocol::encode(version, trace.client, to));
        }
        if early.is_empty() {
            return Ok(());
        }
        backend.write_all(&early).await.map_err(|e| {
            Refusal::new(
                format!("backend {} failed before the relay: {e}", server.label()),
                Termination::SERVER_RESET,
            )
        })
    }

    /// Step 5: the relay from `start` (afresh, or an adopted connection's
    /// state), until both sides are done, one fails, a timeout expires or
    /// the kill switch fires, parking and handing the connection over
    /// whenever a new process asks (epoll/moving.rs); its outcome into the
    /// counters and the trace; the bytes it moved. `client` is left `None`
    /// once the connection moved (or was lost on its way), else it is to be
    /// logged and closed.
    ///
    /// A function that returns an `async` block, not an `async fn`: the
    /// block keeps what it captures in place, where an `async fn` keeps
    /// each argument and the local it moves it into, both for the whole
    /// relay (docs/EPOLL.md, "What an idle connection keeps"). The client
    /// is borrowed, not moved in, for the same reason: its owner's place is
    /// the only one kept.
    #[allow(clippy::manual_async_fn)] // the point: see above
    pub(super) fn relay_phase<'a>(
        &'a self,
        client: &'a mut Option<TcpStream>,
        mut backend: TcpStream,
        (index, early): (usize, u64),
        mut start: Start,
        trace: &'a mut Trace,
    ) -> impl Future<Output = Relayed> + 'a {
        async move {
            trace.phase = Phase::Data;
            self.with_balancer(index, |b, i| b.connection_opened(i));
            // Its server's cut count as the relay begins, for the whole
            // relay, across its parks: a later cut stops it.
            let cuts = self.shared.board.cuts(index);
            let mut parks = true;
            let (mut outcome, server_cut) = loop {
                let Some(stream) = client.as_ref() else {
                    return Relayed::default();
                };
                let mut interrupt = self.interrupt(index, cuts, parks);
                let (timeouts, splicing) = self.relay_settings();
                let pair = [stream, &backend];
                let run = relay::relay_or_park(pair, timeouts, splicing, start, &mut interrupt);
                let parked = match run.await {
                    Stopped::Over(outcome) => break (outcome, interrupt.server_cut),
                    Stopped::Parked(parked) => parked,
                };
                let Some(stream) = client.take() else {
                    return Relayed::default();
                };
                // Boxed: a handover happens once in a connection's life, and
                // its future would otherwise widen every connection's.
                let handed =
                    moving::hand_over(self, (stream, backend), parked, (index, early), trace);
                match Box::pin(handed).await {
                    Handed::Adopted => {
                        counters::inc(&self.worker.moves.handed_over);
                        self.with_balancer(index, |b, i| b.connection_closed(i));
                        return Relayed::default();
                    }
                    Handed::Resumed(c, b, parked) => {
                        counters::inc(&self.worker.moves.resumed);
                        (*client, backend, start) = (Some(c), b, Start::Resume(parked));
                        parks = false;
                    }
                    Handed::Lost(parked) => {
                        self.lost(*parked, index, trace);
                        return Relayed::default();
                    }
                }
            };
            outcome.upstream += early;
            self.with_balancer(index, |b, i| b.connection_closed(i));
            self.finish(index, &outcome, server_cut, trace);
            Relayed {
                up: outcome.upstream,
                down: outcome.downstream,
            }
        }
    }

    /// What interrupts a relay: the kill order, or a cut of its server
    /// (`DD`: its server marked down, or its group's normal server back;
    /// health.rs, "When a server changes"; `server_cut` is then set), both
    /// as a stop; the park order, while there is somewhere to park to,
    /// if it `parks`: a connection the new process refused stays here,
    /// since asked again it would only be refused again. `cuts` is its
    /// server's cut count when its relay began.
    fn interrupt(&self, index: usize, cuts: u32, parks: bool) -> Interrupting<'_> {
        Interrupting {
            local: self,
            notified: self.worker.orders.notified(),
            server: u32::try_from(index).unwrap_or(u32::MAX),
            cuts,
            parks,
            server_cut: false,
        }
    }

    /// The relay's timeouts and splice settings (made where they are used,
    /// so that no copy is kept across the relay).
    fn relay_settings(&self) -> (&Timeouts, Splicing<'_>) {
        let splicing = Splicing {
            mode: self.shared.frontend.splice,
            pipes: &self.worker.pipes,
        };
        (&self.shared.frontend.timeouts, splicing)
    }

    /// The relay's end into the counters and the trace (`server_cut`: its
    /// server's state change cut it).
    fn finish(&self, index: usize, outcome: &Outcome, server_cut: bool, trace: &mut Trace) {
        // Counted while this connection still holds its place, as HAProxy's
        // %sc includes the connection being logged.
        trace.server_open = self
            .shared
            .backend_limits
            .get(index)
            .map_or(0, |limit| limit.open());
        self.count_outcome(index, outcome);
        trace.client_sent |= outcome.upstream > 0;
        // A cut is the operator's (`shutdown sessions server`: `KD`, as
        // HAProxy's) or its health's (`DD`): the board remembers which.
        let by_operator = server_cut && self.shared.board.admin().cut_by_operator(index);
        trace.termination = match (server_cut, by_operator) {
            (true, true) => Termination::KILLED,
            (true, false) => Termination::SERVER_DOWN,
            (false, _) => Termination::of_relay(outcome.ending, outcome.first_fin),
        };
    }

    /// A refused connection that could not be registered again: its
    /// sockets are gone with the error; it is counted as cut, and has no
    /// socket to log with.
    fn lost(&self, parked: relay::Parked, index: usize, trace: &mut Trace) {
        let mut machine = parked.machine;
        machine.on(crate::conn::machine::Event::Stop, Instant::now());
        self.with_balancer(index, |b, i| b.connection_closed(i));
        self.finish(index, &machine.outcome(), false, trace);
    }

    /// Adds a finished relay to the frontend's and the backend's counters.
    fn count_outcome(&self, index: usize, outcome: &Outcome) {
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
        counters::add(&c.bytes_spliced, outcome.spliced);
        if let Some(errno) = outcome.splice_fallback {
            counters::inc(&c.splice_fallbacks);
            self.note_splice_fallback(errno);
        }
    }

    /// Says that a connection's sockets could not splice and it went on by
    /// copy: at most a line a second per worker, with how many were held
    /// back (the metric counts each one).
    fn note_splice_fallback(&self, errno: i32) {
        let due = self
            .worker
            .splice_fallbacks
            .borrow_mut()
            .due(Instant::now());
        if let Some(held_back) = due {
            let why = io::Error::from_raw_os_error(errno);
            crate::warn!(
                "frontend {}: splice failed ({why}); the connection went on by copy (and {held_back} \
                 more since the last such line; proxy_frontend_splice_fallbacks_total counts them)",
                self.shared.frontend.name
            );
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

    /// Runs `f` on the balancer of backend `index`'s group, with the
    /// backend's index in that group.
    pub(super) fn with_balancer(&self, index: usize, f: impl FnOnce(&mut Balancer, usize)) {
        let frontend = &self.shared.frontend;
        let group = frontend.group_of(index);
        let start = frontend.group(group).map_or(0, |g| g.backends.start);
        if let Some(balancer) = self.balancers.borrow_mut().get_mut(group) {
            f(balancer, index - start);
        }
    }

    /// A place under the global and the frontend maxconn, if both have one.
    pub fn try_admit(&self) -> Option<Admission> {
        let global = self.worker.global.try_acquire()?;
        let frontend = self.shared.limit.try_acquire()?;
        Some((global, frontend))
    }

    /// A place under both even at their ceilings ([`Limit::acquire_over`]).
    pub fn admit_over(&self) -> Admission {
        (
            self.worker.global.acquire_over(),
            self.shared.limit.acquire_over(),
        )
    }

    /// Writes the connection's access-log line into the worker's buffer,
    /// unless `dontlognull` leaves out a client that sent nothing.
    pub(super) fn log(&self, client: &TcpStream, trace: &Trace, relayed: Relayed) {
        let Some(sink) = &self.worker.sink else {
            return;
        };
        let shared = &self.shared;
        let frontend = &shared.frontend;
        if frontend.dontlognull && !trace.client_sent && !has_bytes_waiting(client) {
            return;
        }
        let backend = trace
            .backend
            .and_then(|i| frontend.backends.get(usize::try_from(i).ok()?));
        let group = frontend.group(trace.group);
        let frontend_addr = match self.worker.log_needs.frontend_addr {
            true => trace
                .extra()
                .destination
                .or_else(|| client.local_addr().ok()),
            false => None,
        };
        let record = Record {
            accepted: trace.accepted(),
            client: trace.client,
            frontend: &frontend.name,
            group: group.map_or(&frontend.name, |g| g.name),
            server_name: frontend
                .routing
                .as_ref()
                .map(|_| trace.extra().sni.as_deref()),
            backend: backend.map(|b| ServerRef {
                name: &b.name,
                addr: trace.server_addr,
            }),
            wait: trace.wait.get(),
            connect: trace.connect.get(),
            total: trace.started.elapsed(),
            bytes_down: relayed.down,
            bytes_up: relayed.up,
            termination: trace.termination,
            retries: trace.retries,
            // Every retry goes to another backend (a redispatch).
            redispatched: trace.retries > 0,
            active_process: self.worker.global.open(),
            active_frontend: shared.limit.open(),
            active_backend: shared.limit.open(),
            active_server: trace.server_open,
            frontend_addr,
            backend_source: trace.extra().backend_source,
            id: trace.id,
            moves: trace.moves,
        };
        sink.borrow_mut().record(&record);
    }
}

/// Has a client bytes the proxy never read (one refused before its relay,
/// on a frontend with `dontlognull`)? Then it was not a null connection.
/// One `recv(MSG_PEEK)`, only for a line about to be left out.
fn has_bytes_waiting(client: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    matches!(recv(client.as_raw_fd(), &mut byte, flags), Ok(n) if n > 0)
}

/// A balancer over one group's `servers`, started `worker` picks further
/// on: every worker's balancer would start its rotation on the first
/// backend, so a few connections spread over N workers would all land
/// there.
fn group_balancer(servers: &[BackendServer], balance: Algorithm, worker: usize) -> Balancer {
    let servers = servers
        .iter()
        .map(|b| Server {
            key: b.addr.key(),
            weight: b.weight,
            backup: b.backup,
        })
        .collect();
    let mut balancer = Balancer::new(servers, balance);
    if matches!(balance, Algorithm::RoundRobin | Algorithm::LeastConn) {
        for _ in 0..worker {
            let _ = balancer.pick(IpAddr::from([0, 0, 0, 0]));
        }
    }
    balancer
}

/// Counts a refused client under the counter its refusal belongs to.
fn count_refusal(counters: &FrontendCounters, refusal: &Refusal) {
    let counter = match refusal.termination.phase {
        _ if refusal.denied => &counters.denied,
        _ if refusal.termination == Termination::QUEUE_FULL => &counters.queue_full,
        Phase::Queue => &counters.queue_timeouts,
        Phase::Connect => &counters.connect_errors,
        _ => return,
    };
    counters::inc(counter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoll::frontend;
    use crate::policy::limit::Limit;
    use crate::settings::cli::Settings;
    use std::io::Write;
    use std::time::Duration;

    /// What one connection holds in this mode: the task's future, the
    /// state machine the compiler writes for `serve` (docs/STATES.md sets
    /// it beside the states mode's hand-written struct). Printed, for the
    /// walkthrough: `cargo test -p proxy --lib sizes -- --nocapture`.
    #[test]
    fn sizes_of_a_connections_future() {
        let rt = runtime::Runtime::new().expect("runtime");
        let bytes = rt.block_on(async {
            let listener = runtime::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let client = TcpStream::connect(addr).await.expect("connect");
            let settings = Settings {
                backends: vec![addr.into()],
                ..Settings::default()
            };
            let config = settings.to_config();
            let shared = frontend::share(&config.frontends[0], None, 1);
            let context = Rc::new(WorkerContext::new(0, Limit::new(None), None));
            let local = Rc::new(WorkerFrontend::new(shared, &context));
            let places = local.try_admit().expect("no limits");
            let future = serve(client, addr, local, places);
            std::mem::size_of_val(&future)
        });
        println!(
            "epoll mode: serve's future {bytes} bytes; its Trace {}; the runtime's TcpStream {} \
             bytes",
            std::mem::size_of::<Trace>(),
            std::mem::size_of::<TcpStream>()
        );
        // Kept for the connection's whole life. The rest of what an idle
        // connection keeps (its task's header, two sockets' slots, a timer,
        // a waiter) is some 270 bytes (docs/EPOLL.md, "What an idle
        // connection keeps"): under 768 here, the whole stays under 1 KiB
        // with room for the allocator's rounding.
        assert!(bytes > 0 && bytes < 768, "{bytes}");
    }

    // A refused client whose connection is reset, or whose FIN
    // came with nothing before it, has gone; one that sent bytes, or sent
    // nothing yet, has not.
    #[test]
    fn a_refused_client_has_gone_if_it_reset_or_closed_before_saying_anything() {
        let rt = runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let listener = runtime::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let pair = || async {
                let ours = std::net::TcpStream::connect(addr).expect("connect");
                let (theirs, _) = listener.accept().await.expect("accept");
                (ours, theirs)
            };
            let settle = || runtime::time::sleep(Duration::from_millis(50));

            let (quiet, proxied) = pair().await;
            assert!(!has_gone(&proxied), "a client that sent nothing yet");
            drop(quiet);
            settle().await;
            assert!(has_gone(&proxied), "a client that closed without a word");

            let (mut talker, proxied) = pair().await;
            talker.write_all(b"GET /").expect("send");
            talker.shutdown(std::net::Shutdown::Write).expect("FIN");
            settle().await;
            assert!(
                !has_gone(&proxied),
                "a client that sent a request, then its FIN"
            );

            let (resetter, proxied) = pair().await;
            runtime::net::TcpStream::from_std(resetter)
                .expect("adopt")
                .set_reset_on_close()
                .expect("SO_LINGER");
            settle().await;
            assert!(has_gone(&proxied), "a client that reset");
        });
    }
}
