//! The relay's contract, written once: one connection as a state machine
//! that makes no system call, reads no clock and allocates nothing. A
//! driver (one per mode) does the I/O and tells the machine what happened;
//! the machine says what to do next. Its state is a plain value: it can be
//! printed, compared, copied, written to another process (`snapshot.rs`)
//! and driven by a simulator through schedules no real socket would show.
//!
//! ```text
//!   a driver: blocking poll(2) │ futures on our runtime │ level-triggered epoll
//!      │ what happened ─▶ Machine::on(Event, now): n bytes read, EOF, k written,
//!      │                  the FIN passed on, a reset, a hang-up, a stop
//!      │ the deadline ──▶ Machine::on_deadline(now, timeouts)
//!      ▼
//!   Machine ─ op(from) ────────▶ what to do next: read, write these bytes, shut down
//!           ─ wants(side) ─────▶ what to wait for: readable, writable
//!           ─ deadline(timeouts) ▶ when to wake at the latest
//!           ─ ending() ────────▶ over: close with FINs, or with resets
//! ```
//!
//! Two tables, one inside the other. The connection's [`Phase`]:
//!
//! ```text
//!   Accepted ──connect EINPROGRESS──▶ Connecting ──writable, no error──▶ Relaying
//!      │ connected at once ───────────────────────────────────────────────▲ │
//!      └─ refused at once ─┐          │ refused, timed out                  │ │
//!                          ▼          ▼                                     │ │
//!                        Closed(Unreachable | ConnectTimeout)               │ │
//!                                                                           │ │
//!   Relaying ──the client's FIN passed on──▶ ClientClosed ──the backend's FIN──▶ Closed(Complete)
//!      │     ──the backend's FIN passed on─▶ BackendClosed ─the client's FIN───▶ Closed(Complete)
//!      └─ any of these three: a side broke ▶ Closed(ClientReset | BackendReset)
//!                             the deadline ▶ Closed(IdleTimeout) from Relaying,
//!                                            Closed(FinTimeout) from a half-closed state
//!                             a stop       ▶ Closed(Stopped)
//! ```
//!
//! and, while it relays, each direction's [`Flow`], named by its source
//! (the client's bytes go "up" to the backend, the backend's "down"):
//!
//! ```text
//!   Reading ──got n bytes──▶ Writing ──all written──▶ Reading
//!      │    ──got n bytes, the FIN behind them──▶ Draining ──all written──▶ Closing ──shut down──▶ Done
//!      └────EOF (a read returned 0)──────────────────────────────────────▶ Closing
//! ```
//!
//! The rules that make it a relay and not a copy loop:
//!
//! - **Backpressure.** A direction reads only when it holds nothing
//!   (`Reading`); while bytes wait for the destination it asks only to
//!   write them. A driver waits for what [`Machine::wants`] names and for
//!   nothing else, so a full destination stops its source without a busy
//!   loop.
//! - **A FIN after every byte before it.** A direction passes its FIN on
//!   (`Closing`: `shutdown(Write)` toward the destination) only once all
//!   it read is written. The *second* FIN needs no call: the relay is then
//!   complete and the close of each socket sends it.
//! - **A FIN that came with the bytes leaves with them.** A read that
//!   emptied a source whose FIN is known to follow (`fin_follows`) makes the
//!   write of those bytes a [`Op::Write`] with `fin_follows`: the driver
//!   sends them with `MSG_MORE`, then the FIN at once, in one segment.
//! - **A reset as a reset.** Only [`Ending::Complete`] closes cleanly;
//!   every other ending closes both sockets with a reset
//!   ([`Ending::is_clean`]), so no cut-off stream looks complete. A side
//!   whose FIN was read is read no more, so a reset it sends later is heard
//!   as a hang-up ([`Event::HungUp`]).
//! - **Deadlines.** Each phase has its limit ([`Phase::limit`]): nothing
//!   moved for that long since the last byte (or since the phase began)
//!   ends the connection. The machine keeps the time of the last movement,
//!   so a driver's timer may fire early (it asks again: [`Alarm`]) but the
//!   machine never ends a connection before its time.
//!
//! [`Alarm`]: super::alarm::Alarm

use std::io;
use std::time::{Duration, Instant};

use super::side::Side;
use super::timeouts::Timeouts;

/// How a connection ended: the one vocabulary of every mode, the access
/// log's termination codes and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    /// Both directions delivered everything and their FINs.
    Complete,
    /// The client's side failed (a reset, or our writes refused); the
    /// backend is reset in turn.
    ClientReset,
    /// The backend's side failed; the client is reset in turn.
    BackendReset,
    /// No byte either way for the idle limit.
    IdleTimeout,
    /// One direction was done and the other stayed silent too long.
    FinTimeout,
    /// The proxy cut it: its graceful stop ran out of time.
    Stopped,
    /// The backend refused, or failed before connecting.
    Unreachable,
    /// The backend did not answer within the connect limit.
    ConnectTimeout,
}

impl Ending {
    /// Every ending, in the order of the enum.
    pub const ALL: [Ending; 8] = [
        Ending::Complete,
        Ending::ClientReset,
        Ending::BackendReset,
        Ending::IdleTimeout,
        Ending::FinTimeout,
        Ending::Stopped,
        Ending::Unreachable,
        Ending::ConnectTimeout,
    ];

    /// A short word for logs.
    pub fn label(self) -> &'static str {
        match self {
            Ending::Complete => "complete",
            Ending::ClientReset => "client-reset",
            Ending::BackendReset => "backend-reset",
            Ending::IdleTimeout => "idle-timeout",
            Ending::FinTimeout => "fin-timeout",
            Ending::Stopped => "stopped",
            Ending::Unreachable => "unreachable",
            Ending::ConnectTimeout => "connect-timeout",
        }
    }

    /// Whether the sockets close with FINs. Every other ending is an abort,
    /// and both sockets close with a reset: a FIN would tell a peer that
    /// reads until the close (an HTTP/1.0 body, a dump) that a cut-off
    /// stream is complete.
    pub fn is_clean(self) -> bool {
        self == Ending::Complete
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted; no connect to a backend yet.
    Accepted,
    /// The backend's connect(2) is in flight. The client is not read yet:
    /// its bytes wait in its socket until there is somewhere to send them.
    Connecting,
    /// Both directions open.
    Relaying,
    /// The client's FIN is passed on to the backend; only the backend's
    /// bytes still flow (the backend is waited on: `server_fin`).
    ClientClosed,
    /// The backend's FIN is passed on to the client; only the client's
    /// bytes still flow (the client is waited on: `client_fin`).
    BackendClosed,
    /// Over: the sockets are to be closed, with FINs after a complete relay
    /// and with resets after anything else.
    Closed(Ending),
}

/// What moves a connection from one [`Phase`] to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// connect(2) returned EINPROGRESS.
    ConnectStarted,
    /// The backend's socket is connected.
    Connected,
    /// connect(2) failed, at once or in its report.
    ConnectFailed,
    /// `Side`'s FIN was passed on: its direction is done.
    Fin(Side),
    /// A call on `Side`'s socket failed, or it was reset.
    Broke(Side),
    /// The phase's deadline passed.
    TimedOut,
    /// The graceful stop is over, or a second stop signal came.
    Stopped,
}

impl Phase {
    /// The phase table: the phase after `change`.
    pub fn on(self, change: Change) -> Phase {
        use Change::*;
        use Phase::*;
        match (self, change) {
            (Closed(end), _) => Closed(end),
            (Accepted, ConnectStarted) => Connecting,
            (Accepted | Connecting, Connected) => Relaying,
            (Accepted | Connecting, ConnectFailed) => Closed(Ending::Unreachable),
            (Accepted | Connecting, TimedOut) => Closed(Ending::ConnectTimeout),
            (Relaying, Fin(Side::Client)) => ClientClosed,
            (Relaying, Fin(Side::Backend)) => BackendClosed,
            (ClientClosed, Fin(Side::Backend)) | (BackendClosed, Fin(Side::Client)) => {
                Closed(Ending::Complete)
            }
            (_, Broke(Side::Client)) => Closed(Ending::ClientReset),
            (_, Broke(Side::Backend)) => Closed(Ending::BackendReset),
            (Relaying, TimedOut) => Closed(Ending::IdleTimeout),
            (ClientClosed | BackendClosed, TimedOut) => Closed(Ending::FinTimeout),
            (_, Stopped) => Closed(Ending::Stopped),
            // What cannot happen (a FIN before the relay, a second FIN from
            // the same side, a connect report while relaying) changes
            // nothing: the phase stays what the sockets say it is.
            (phase, _) => phase,
        }
    }

    /// How long the connection may go without a byte moving (or, before
    /// it relays, without connecting) in this phase; `None` once closed.
    pub fn limit(self, t: &Timeouts) -> Option<Duration> {
        match self {
            Phase::Accepted | Phase::Connecting => Some(t.connect),
            Phase::Relaying => Some(t.idle()),
            // After the client's FIN the backend is waited on, and the
            // other way; never longer than the idle limit.
            Phase::ClientClosed => Some(t.server_fin.min(t.idle())),
            Phase::BackendClosed => Some(t.client_fin.min(t.idle())),
            Phase::Closed(_) => None,
        }
    }

    /// Whether bytes are relayed in this phase (the flows mean something).
    pub fn is_relaying(self) -> bool {
        matches!(
            self,
            Phase::Relaying | Phase::ClientClosed | Phase::BackendClosed
        )
    }
}

/// One direction of a relaying connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Nothing held: waiting for the source.
    Reading,
    /// Bytes read and not all written: waiting for the destination. The
    /// source is not read meanwhile (backpressure).
    Writing,
    /// The source's FIN came behind the bytes held: write them, then pass
    /// the FIN on, with no read for the EOF.
    Draining,
    /// Everything is written: the FIN is to be passed on (`shutdown`).
    Closing,
    /// The FIN is passed on: this direction is over.
    Done,
}

/// What happened to a direction, as its flow is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// A read brought bytes; `fin_follows`: they were all the source had
    /// before its FIN.
    Got {
        /// The FIN follows the bytes.
        fin_follows: bool,
    },
    /// A read returned 0: the source's FIN.
    Eof,
    /// Every byte held was written.
    Flushed,
    /// The FIN was passed on.
    ShutDown,
}

impl Flow {
    /// The flow table of one direction.
    pub fn on(self, io: Io) -> Flow {
        match (self, io) {
            (Flow::Reading, Io::Got { fin_follows: false }) => Flow::Writing,
            (Flow::Reading, Io::Got { fin_follows: true }) => Flow::Draining,
            (Flow::Reading, Io::Eof) => Flow::Closing,
            (Flow::Writing, Io::Flushed) => Flow::Reading,
            (Flow::Draining, Io::Flushed) => Flow::Closing,
            (Flow::Closing, Io::ShutDown) => Flow::Done,
            // Not asked for, so not met: the flow stays.
            (flow, _) => flow,
        }
    }

    /// Whether bytes wait for the destination.
    pub fn holds_bytes(self) -> bool {
        matches!(self, Flow::Writing | Flow::Draining)
    }
}

/// What a driver is to do next for one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read from the source into the direction's empty buffer (or pipe).
    Read,
    /// Write bytes `start..end` of the direction's buffer (for a pipe, its
    /// `end - start` bytes) to the destination. `fin_follows`: they are the
    /// last before the FIN, which is passed on as soon as they are taken
    /// (`MSG_MORE`, so both leave in one segment).
    Write {
        /// First byte not yet written.
        start: u32,
        /// One past the last byte read.
        end: u32,
        /// The FIN follows these bytes.
        fin_follows: bool,
    },
    /// Pass the source's FIN on: `shutdown(Write)` on the destination.
    Shutdown,
}

/// What a driver waits for on one socket ([`Machine::wants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wants {
    /// Readable: the direction from this socket is reading.
    pub read: bool,
    /// Writable: the direction to this socket holds bytes, or, while
    /// connecting, the backend's connect is to report.
    pub write: bool,
}

/// What happened, as a driver tells the machine ([`Machine::on`]). A read
/// or write that would block is not an event: the operation stays what it
/// was, and the driver waits for the socket, each mode in its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// connect(2) returned EINPROGRESS.
    ConnectStarted,
    /// The backend's socket is connected: at once, or reported writable
    /// with no error.
    Connected,
    /// connect(2) failed, at once or in its report.
    ConnectFailed,
    /// A read from `from` brought `n` bytes (n > 0) into its direction's
    /// empty buffer. `fin_follows`: the source's FIN is known to be queued
    /// behind them (a short read after EPOLLRDHUP, the reactor's `at_eof`).
    Got {
        /// The source.
        from: Side,
        /// How many bytes.
        n: usize,
        /// The FIN follows.
        fin_follows: bool,
    },
    /// A read from `from` returned 0: its FIN.
    Eof(Side),
    /// `n` bytes of the direction from `from` were written to the other side.
    Wrote {
        /// The direction's source.
        from: Side,
        /// How many bytes (n > 0).
        n: usize,
    },
    /// The FIN of `from` was passed on to the other side.
    ShutDown(Side),
    /// A read, write or shutdown on `side`'s socket failed (a reset, EPIPE).
    Broke(Side),
    /// `side`'s socket hung up (EPOLLHUP, POLLHUP, the reactor's hang-up):
    /// once its FIN was read, with our write side toward it still open,
    /// that can only be a reset.
    HungUp(Side),
    /// Stop: the graceful stop's grace is over, or a second signal came.
    Stop,
}

impl Event {
    /// What a read of `from` that returned `result` is, or `None` if it
    /// would block (or was interrupted: the next readiness retries it).
    pub fn read(from: Side, result: io::Result<usize>, fin_follows: bool) -> Option<Event> {
        match result {
            Ok(0) => Some(Event::Eof(from)),
            Ok(n) => Some(Event::Got {
                from,
                n,
                fin_follows,
            }),
            Err(e) if would_block(&e) => None,
            Err(_) => Some(Event::Broke(from)),
        }
    }

    /// What a write of the direction from `from` that returned `result` is,
    /// or `None` if it would block. A write that takes nothing is a broken
    /// destination (the other side).
    pub fn wrote(from: Side, result: io::Result<usize>) -> Option<Event> {
        match result {
            Ok(0) => Some(Event::Broke(from.other())),
            Ok(n) => Some(Event::Wrote { from, n }),
            Err(e) if would_block(&e) => None,
            Err(_) => Some(Event::Broke(from.other())),
        }
    }

    /// What passing `from`'s FIN on with `shutdown(Write)` came to. ENOTCONN:
    /// the destination is gone already; its own direction says how, so the
    /// FIN counts as passed on.
    pub fn shut(from: Side, result: io::Result<()>) -> Event {
        match result {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Event::Broke(from.other()),
            _ => Event::ShutDown(from),
        }
    }
}

/// Would-block and interrupted: nothing happened, try when ready again.
fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// One direction's state: its flow and the bytes it holds, as offsets into
/// the buffer (or pipe) the driver keeps. Buffers are not part of the
/// state: a driver may hand them back to a pool whenever `start == end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Direction {
    /// Where the direction is.
    pub flow: Flow,
    /// First byte held and not yet written.
    pub start: u32,
    /// One past the last byte held.
    pub end: u32,
    /// Bytes delivered to the destination.
    pub bytes: u64,
}

impl Direction {
    const NEW: Direction = Direction {
        flow: Flow::Reading,
        start: 0,
        end: 0,
        bytes: 0,
    };

    /// Bytes read and not yet written.
    pub fn held(&self) -> u32 {
        self.end - self.start
    }
}

/// What a relay did, for the access log and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Bytes delivered from the client to the backend.
    pub upstream: u64,
    /// Bytes delivered from the backend to the client.
    pub downstream: u64,
    /// The side whose FIN came first, if one came (for the access log: a
    /// fin timeout is the *other* side's silence).
    pub first_fin: Option<Side>,
    /// Of the bytes both ways, those moved by splice (a driver that splices
    /// fills it in: conn/splice.rs).
    pub spliced: u64,
    /// The error (errno) that put the connection back on the copy path
    /// because its sockets could not splice, if one did.
    pub splice_fallback: Option<i32>,
}

/// One relayed connection's state: its phase, its two directions, and the
/// time its deadline counts from (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    phase: Phase,
    /// The client's bytes to the backend.
    up: Direction,
    /// The backend's bytes to the client.
    down: Direction,
    /// When bytes last moved, or the phase last changed its limit.
    since: Instant,
    /// The side whose FIN was passed on first.
    first_fin: Option<Side>,
    /// Per side: a hang-up was reported.
    hung_up: [bool; 2],
}

impl Machine {
    /// A connection just accepted at `now`, before any connect.
    pub fn accepted(now: Instant) -> Machine {
        Machine {
            phase: Phase::Accepted,
            up: Direction::NEW,
            down: Direction::NEW,
            since: now,
            first_fin: None,
            hung_up: [false; 2],
        }
    }

    /// A connection whose backend is connected at `now`: relaying.
    pub fn relaying(now: Instant) -> Machine {
        let mut machine = Machine::accepted(now);
        machine.on(Event::Connected, now);
        machine
    }

    /// Rebuilds a machine from its parts (`snapshot.rs`); `since` is when
    /// its deadline counts from. Offsets past each other are refused.
    pub(crate) fn from_parts(
        phase: Phase,
        directions: [Direction; 2],
        since: Instant,
        first_fin: Option<Side>,
        hung_up: [bool; 2],
    ) -> Option<Machine> {
        let [up, down] = directions;
        if up.start > up.end || down.start > down.end {
            return None;
        }
        Some(Machine {
            phase,
            up,
            down,
            since,
            first_fin,
            hung_up,
        })
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The direction whose source is `from`.
    pub fn direction(&self, from: Side) -> &Direction {
        match from {
            Side::Client => &self.up,
            Side::Backend => &self.down,
        }
    }

    fn direction_mut(&mut self, from: Side) -> &mut Direction {
        match from {
            Side::Client => &mut self.up,
            Side::Backend => &mut self.down,
        }
    }

    /// When the deadline counts from: the last movement, or the start of
    /// the phase.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Per side, whether a hang-up was reported.
    pub fn hung_up(&self) -> [bool; 2] {
        self.hung_up
    }

    /// The side whose FIN was passed on first, if one was.
    pub fn first_fin(&self) -> Option<Side> {
        self.first_fin
    }

    /// How it ended, once it has.
    pub fn ending(&self) -> Option<Ending> {
        match self.phase {
            Phase::Closed(ending) => Some(ending),
            _ => None,
        }
    }

    /// Whether the connection is over: its sockets are to be closed, with
    /// FINs if [`Ending::is_clean`], else with resets.
    pub fn is_closed(&self) -> bool {
        self.ending().is_some()
    }

    /// What to do next for the direction from `from`, if anything: nothing
    /// before the relay, after the direction is done, or once closed.
    pub fn op(&self, from: Side) -> Option<Op> {
        if !self.phase.is_relaying() {
            return None;
        }
        let d = self.direction(from);
        match d.flow {
            Flow::Reading => Some(Op::Read),
            Flow::Writing | Flow::Draining => Some(Op::Write {
                start: d.start,
                end: d.end,
                fin_follows: d.flow == Flow::Draining,
            }),
            Flow::Closing => Some(Op::Shutdown),
            Flow::Done => None,
        }
    }

    /// What a driver waits for on `side`'s socket: readable while the
    /// direction from it reads, writable while the direction to it holds
    /// bytes, or while connecting, the backend's connect report.
    pub fn wants(&self, side: Side) -> Wants {
        match self.phase {
            Phase::Connecting => Wants {
                read: false,
                write: side == Side::Backend,
            },
            phase if phase.is_relaying() => Wants {
                read: self.direction(side).flow == Flow::Reading,
                write: self.direction(side.other()).flow.holds_bytes(),
            },
            _ => Wants::default(),
        }
    }

    /// When the connection times out if nothing moves: `None` once closed,
    /// or if the limit is beyond what a clock can say.
    pub fn deadline(&self, t: &Timeouts) -> Option<Instant> {
        self.since.checked_add(self.phase.limit(t)?)
    }

    /// The deadline may have come: at `now`, the connection times out if it
    /// is due, and not a moment before (a timer armed earlier, before bytes
    /// moved, only makes the driver ask again).
    pub fn on_deadline(&mut self, now: Instant, t: &Timeouts) {
        if self.deadline(t).is_some_and(|due| now >= due) {
            self.change(Change::TimedOut, now);
        }
    }

    /// Tells the machine what happened at `now`.
    pub fn on(&mut self, event: Event, now: Instant) {
        match event {
            Event::ConnectStarted => self.change(Change::ConnectStarted, now),
            Event::Connected => self.change(Change::Connected, now),
            Event::ConnectFailed => self.change(Change::ConnectFailed, now),
            Event::Got {
                from,
                n,
                fin_follows,
            } => self.got(from, n, fin_follows, now),
            Event::Eof(from) => self.flow(from, Io::Eof, now),
            Event::Wrote { from, n } => self.wrote(from, n, now),
            Event::ShutDown(from) => self.flow(from, Io::ShutDown, now),
            Event::Broke(side) => self.change(Change::Broke(side), now),
            Event::HungUp(side) => self.hung_up[side.index()] = true,
            Event::Stop => self.change(Change::Stopped, now),
        }
        self.heed_hang_ups(now);
    }

    /// A summary of the relay, for the log (the splice fields are the
    /// driver's to fill in).
    pub fn outcome(&self) -> Outcome {
        Outcome {
            // Asked before the end (a driver that gave up): a stop.
            ending: self.ending().unwrap_or(Ending::Stopped),
            upstream: self.up.bytes,
            downstream: self.down.bytes,
            first_fin: self.first_fin,
            spliced: 0,
            splice_fallback: None,
        }
    }

    fn got(&mut self, from: Side, n: usize, fin_follows: bool, now: Instant) {
        let relaying = self.phase.is_relaying();
        let d = self.direction_mut(from);
        debug_assert!(
            relaying && d.flow == Flow::Reading && n > 0,
            "bytes read that were not asked for: {n} from the {from}, {:?}",
            d.flow
        );
        if !relaying || d.flow != Flow::Reading || n == 0 {
            return;
        }
        (d.start, d.end) = (0, u32::try_from(n).unwrap_or(u32::MAX));
        self.since = now;
        self.flow(from, Io::Got { fin_follows }, now);
    }

    fn wrote(&mut self, from: Side, n: usize, now: Instant) {
        let d = self.direction_mut(from);
        let taken = u32::try_from(n).unwrap_or(u32::MAX);
        debug_assert!(
            d.flow.holds_bytes() && taken > 0 && taken <= d.held(),
            "{n} bytes written of {} held by the {from}'s direction",
            d.held()
        );
        if !d.flow.holds_bytes() || taken == 0 || taken > d.held() {
            return;
        }
        d.start += taken;
        d.bytes += u64::from(taken);
        let flushed = d.start == d.end;
        if flushed {
            (d.start, d.end) = (0, 0);
        }
        self.since = now;
        if flushed {
            self.flow(from, Io::Flushed, now);
        }
    }

    /// Moves the direction from `from` by its table; a direction that
    /// reaches `Closing` as the last one open is done at once (the close
    /// sends its FIN), and one that is done ends its half of the phase.
    fn flow(&mut self, from: Side, io: Io, now: Instant) {
        if !self.phase.is_relaying() {
            return;
        }
        let other_done = self.direction(from.other()).flow == Flow::Done;
        let d = self.direction_mut(from);
        d.flow = d.flow.on(io);
        if d.flow == Flow::Closing && other_done {
            d.flow = Flow::Done;
        }
        if d.flow == Flow::Done {
            self.first_fin.get_or_insert(from);
            self.change(Change::Fin(from), now);
        }
    }

    /// Applies `change` to the phase; a change of limit (connected, a
    /// half-close) starts the deadline's count again: silence before it
    /// was the old limit's to judge.
    fn change(&mut self, change: Change, now: Instant) {
        let before = self.phase;
        self.phase = before.on(change);
        if self.phase != before && matches!(change, Change::Connected | Change::Fin(_)) {
            self.since = now;
        }
    }

    /// A side that hung up after its FIN was read, with the relay still
    /// writing to it, was reset (the event's docs).
    fn heed_hang_ups(&mut self, now: Instant) {
        for side in Side::BOTH {
            let done = self.direction(side).flow == Flow::Done;
            if self.hung_up[side.index()] && done && self.phase.is_relaying() {
                self.change(Change::Broke(side), now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(5),
            client: Duration::from_secs(600),
            server: Duration::from_secs(600),
            client_fin: Duration::from_secs(30),
            server_fin: Duration::from_secs(20),
            ..Timeouts::default()
        }
    }

    fn run(changes: &[Change]) -> Phase {
        changes.iter().fold(Phase::Accepted, |s, &e| s.on(e))
    }

    #[test]
    fn a_connection_that_ends_well_passes_both_fins_on() {
        use Change::*;
        assert_eq!(run(&[ConnectStarted]), Phase::Connecting);
        assert_eq!(run(&[ConnectStarted, Connected]), Phase::Relaying);
        assert_eq!(run(&[Connected]), Phase::Relaying, "connected at once");
        let client_first = [ConnectStarted, Connected, Fin(Side::Client)];
        assert_eq!(run(&client_first), Phase::ClientClosed);
        let backend_first = [ConnectStarted, Connected, Fin(Side::Backend)];
        assert_eq!(run(&backend_first), Phase::BackendClosed);
        let complete = Phase::Closed(Ending::Complete);
        assert_eq!(
            run(&[Connected, Fin(Side::Client), Fin(Side::Backend)]),
            complete
        );
        assert_eq!(
            run(&[Connected, Fin(Side::Backend), Fin(Side::Client)]),
            complete
        );
    }

    #[test]
    fn a_connect_that_fails_or_hangs_ends_before_any_relay() {
        use Change::*;
        let unreachable = Phase::Closed(Ending::Unreachable);
        assert_eq!(run(&[ConnectFailed]), unreachable, "refused at once");
        assert_eq!(run(&[ConnectStarted, ConnectFailed]), unreachable);
        assert_eq!(
            run(&[ConnectStarted, TimedOut]),
            Phase::Closed(Ending::ConnectTimeout)
        );
    }

    #[test]
    fn failures_timeouts_and_the_stop_end_it_from_any_open_phase() {
        use Change::*;
        let reset = |side| run(&[Connected, Broke(side)]);
        assert_eq!(reset(Side::Client), Phase::Closed(Ending::ClientReset));
        assert_eq!(reset(Side::Backend), Phase::Closed(Ending::BackendReset));
        assert_eq!(
            run(&[Connected, Fin(Side::Client), Broke(Side::Client)]),
            Phase::Closed(Ending::ClientReset),
            "a reset after the FIN"
        );
        assert_eq!(
            run(&[Connected, TimedOut]),
            Phase::Closed(Ending::IdleTimeout)
        );
        for side in Side::BOTH {
            assert_eq!(
                run(&[Connected, Fin(side), TimedOut]),
                Phase::Closed(Ending::FinTimeout)
            );
        }
        assert_eq!(
            run(&[ConnectStarted, Stopped]),
            Phase::Closed(Ending::Stopped)
        );
    }

    #[test]
    fn closed_is_final_and_impossible_changes_change_nothing() {
        use Change::*;
        let closed = run(&[Connected, Broke(Side::Backend)]);
        for change in [Connected, Fin(Side::Client), TimedOut, Stopped] {
            assert_eq!(closed.on(change), closed);
        }
        assert_eq!(Phase::Connecting.on(Fin(Side::Client)), Phase::Connecting);
        assert_eq!(
            Phase::ClientClosed.on(Fin(Side::Client)),
            Phase::ClientClosed
        );
        assert_eq!(Phase::Relaying.on(ConnectFailed), Phase::Relaying);
    }

    #[test]
    fn each_phase_has_its_own_limit() {
        let t = timeouts();
        let secs = Duration::from_secs;
        assert_eq!(Phase::Connecting.limit(&t), Some(secs(5)));
        assert_eq!(Phase::Relaying.limit(&t), Some(secs(600)));
        assert_eq!(Phase::ClientClosed.limit(&t), Some(secs(20)));
        assert_eq!(Phase::BackendClosed.limit(&t), Some(secs(30)));
        let mut short_idle = t;
        short_idle.set_idle(secs(1));
        assert_eq!(
            Phase::ClientClosed.limit(&short_idle),
            Some(secs(1)),
            "never longer than the idle limit"
        );
        assert_eq!(Phase::Closed(Ending::Unreachable).limit(&t), None);
    }

    #[test]
    fn a_direction_reads_writes_drains_closes_and_ends() {
        let got = Io::Got { fin_follows: false };
        let last = Io::Got { fin_follows: true };
        assert_eq!(Flow::Reading.on(got), Flow::Writing);
        assert_eq!(Flow::Writing.on(Io::Flushed), Flow::Reading);
        assert_eq!(Flow::Reading.on(Io::Eof), Flow::Closing);
        assert_eq!(Flow::Reading.on(last), Flow::Draining);
        assert_eq!(Flow::Draining.on(Io::Flushed), Flow::Closing);
        assert_eq!(Flow::Closing.on(Io::ShutDown), Flow::Done);
        // Not asked for, so nothing changes.
        assert_eq!(Flow::Writing.on(got), Flow::Writing);
        assert_eq!(Flow::Done.on(Io::Eof), Flow::Done);
        assert!(Flow::Writing.holds_bytes() && Flow::Draining.holds_bytes());
        assert!(!Flow::Reading.holds_bytes() && !Flow::Closing.holds_bytes());
    }

    /// Plays a whole relay: a request up with the client's FIN behind it,
    /// a reply down in two writes, the backend's FIN.
    #[test]
    fn a_request_and_its_reply_go_through_every_op_in_order() {
        let t0 = Instant::now();
        let mut m = Machine::relaying(t0);
        assert_eq!(m.op(Side::Client), Some(Op::Read));
        assert_eq!(
            m.wants(Side::Client),
            Wants {
                read: true,
                write: false
            }
        );
        m.on(
            Event::read(Side::Client, Ok(5), true).expect("an event"),
            t0,
        );
        let write = Op::Write {
            start: 0,
            end: 5,
            fin_follows: true,
        };
        assert_eq!(m.op(Side::Client), Some(write));
        assert!(m.wants(Side::Backend).write && !m.wants(Side::Client).read);
        m.on(
            Event::Wrote {
                from: Side::Client,
                n: 5,
            },
            t0,
        );
        assert_eq!(
            m.op(Side::Client),
            Some(Op::Shutdown),
            "FIN after the bytes"
        );
        m.on(Event::shut(Side::Client, Ok(())), t0);
        assert_eq!(m.phase(), Phase::ClientClosed);
        assert_eq!(m.op(Side::Client), None);
        m.on(
            Event::read(Side::Backend, Ok(8), false).expect("an event"),
            t0,
        );
        m.on(
            Event::Wrote {
                from: Side::Backend,
                n: 3,
            },
            t0,
        );
        assert_eq!(
            m.op(Side::Backend),
            Some(Op::Write {
                start: 3,
                end: 8,
                fin_follows: false
            })
        );
        m.on(
            Event::Wrote {
                from: Side::Backend,
                n: 5,
            },
            t0,
        );
        assert_eq!(m.op(Side::Backend), Some(Op::Read));
        m.on(Event::read(Side::Backend, Ok(0), false).expect("EOF"), t0);
        // The last FIN needs no shutdown: the close sends it.
        assert_eq!(m.ending(), Some(Ending::Complete));
        let outcome = m.outcome();
        assert_eq!((outcome.upstream, outcome.downstream), (5, 8));
        assert_eq!(outcome.first_fin, Some(Side::Client));
    }

    #[test]
    fn io_results_become_events_and_would_block_is_none() {
        let e = |kind| io::Error::from(kind);
        assert_eq!(
            Event::read(Side::Client, Err(e(io::ErrorKind::WouldBlock)), false),
            None
        );
        assert_eq!(
            Event::read(Side::Client, Err(e(io::ErrorKind::ConnectionReset)), false),
            Some(Event::Broke(Side::Client))
        );
        assert_eq!(
            Event::wrote(Side::Client, Err(e(io::ErrorKind::BrokenPipe))),
            Some(Event::Broke(Side::Backend)),
            "a write fails on the destination"
        );
        assert_eq!(
            Event::wrote(Side::Backend, Ok(0)),
            Some(Event::Broke(Side::Client))
        );
        assert_eq!(
            Event::shut(Side::Client, Err(e(io::ErrorKind::NotConnected))),
            Event::ShutDown(Side::Client),
            "gone already: its own direction says how"
        );
        assert_eq!(
            Event::shut(Side::Client, Err(e(io::ErrorKind::ConnectionReset))),
            Event::Broke(Side::Backend)
        );
    }

    #[test]
    fn the_deadline_moves_with_the_bytes_and_never_fires_early() {
        let t = timeouts();
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let mut m = Machine::relaying(t0);
        assert_eq!(m.deadline(&t), Some(t0 + secs(600)));
        m.on(
            Event::read(Side::Client, Ok(1), false).expect("bytes"),
            t0 + secs(100),
        );
        assert_eq!(m.deadline(&t), Some(t0 + secs(700)));
        m.on_deadline(t0 + secs(600), &t);
        assert!(!m.is_closed(), "a timer armed before the bytes moved");
        m.on(
            Event::Wrote {
                from: Side::Client,
                n: 1,
            },
            t0 + secs(101),
        );
        m.on(Event::Eof(Side::Backend), t0 + secs(102));
        m.on(Event::ShutDown(Side::Backend), t0 + secs(103));
        // Half-closed: the client is waited on, from the half-close.
        assert_eq!(m.deadline(&t), Some(t0 + secs(133)));
        m.on_deadline(t0 + secs(133), &t);
        assert_eq!(m.ending(), Some(Ending::FinTimeout));
        assert_eq!(m.deadline(&t), None);
    }

    #[test]
    fn a_hang_up_after_the_fin_is_a_reset_and_before_it_waits() {
        let t0 = Instant::now();
        let mut m = Machine::relaying(t0);
        m.on(Event::HungUp(Side::Client), t0);
        assert!(!m.is_closed(), "its bytes and FIN are still to be read");
        m.on(Event::Eof(Side::Client), t0);
        m.on(Event::ShutDown(Side::Client), t0);
        assert_eq!(m.ending(), Some(Ending::ClientReset));
        let mut m = Machine::relaying(t0);
        m.on(Event::Eof(Side::Backend), t0);
        m.on(Event::ShutDown(Side::Backend), t0);
        m.on(Event::HungUp(Side::Backend), t0);
        assert_eq!(m.ending(), Some(Ending::BackendReset));
        assert!(!Ending::BackendReset.is_clean() && Ending::Complete.is_clean());
    }

    #[test]
    fn while_connecting_only_the_backends_report_is_waited_for() {
        let t0 = Instant::now();
        let mut m = Machine::accepted(t0);
        m.on(Event::ConnectStarted, t0);
        assert!(m.wants(Side::Backend).write);
        assert_eq!(m.wants(Side::Client), Wants::default());
        assert_eq!(m.op(Side::Client), None, "the client is not read yet");
        let t = timeouts();
        m.on_deadline(t0 + t.connect, &t);
        assert_eq!(m.ending(), Some(Ending::ConnectTimeout));
    }

    #[test]
    fn a_machine_is_a_few_dozen_bytes() {
        let size = std::mem::size_of::<Machine>();
        println!(
            "Machine {size} bytes, Direction {}",
            std::mem::size_of::<Direction>()
        );
        assert!(size <= 96, "{size}");
    }
}
