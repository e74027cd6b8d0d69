//! One connection as an explicit state machine: its states and every
//! transition, written out, and nothing else: no socket, no clock, no
//! epoll. `connection.rs` makes the system calls and tells the machine what
//! they returned; `interest.rs` reads the states to decide what to ask epoll
//! for; the tests below drive every transition with plain values.
//!
//! Two machines, one inside the other. The connection's [`State`]:
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
//!                             grace over   ▶ Closed(Stopped)
//! ```
//!
//! and, while it relays, each direction's [`Flow`] (the client's bytes to
//! the backend, "up", and the backend's to the client, "down"):
//!
//! ```text
//!   Reading ──read n bytes──▶ Writing ──all written──▶ Reading
//!      │    ──read n bytes, the FIN behind them (EPOLLRDHUP, short read)──▶ Draining ──all written──▶ Done
//!      └────read 0 (the FIN)─────────────────────────────────────────────────────────────────────▶ Done
//! ```
//!
//! A direction that reaches `Done` passes its FIN on (`shutdown(Write)`, or,
//! for the second, the close), which is the connection's `Fin(side)` event.
//! These are the same steps as the async relay's `Direction::poll_copy`
//! (conn/relay.rs), where the compiler keeps the state in a future; here it
//! is kept in two small enums (docs/STATES.md sets them side by side).

use std::time::Duration;

use crate::conn::relay::{Ending, Limits};
use crate::conn::side::Side;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Accepted; no connect to a backend yet.
    Accepted,
    /// The backend's connect(2) is in flight. The client is not read yet:
    /// its bytes wait in its socket until there is somewhere to send them.
    Connecting,
    /// Both directions open.
    Relaying,
    /// The client's FIN is passed on to the backend; only the backend's
    /// bytes still flow (the backend is waited on: `server_fin_timeout`).
    ClientClosed,
    /// The backend's FIN is passed on to the client; only the client's bytes
    /// still flow (the client is waited on: `client_fin_timeout`).
    BackendClosed,
    /// Over: the sockets are closed, with FINs after a complete relay and
    /// with resets after anything else.
    Closed(End),
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The relay ran and ended this way (the async relay's verdicts).
    Relay(Ending),
    /// The backend refused, or failed before connecting.
    Unreachable,
    /// The backend did not answer within the connect timeout.
    ConnectTimeout,
}

/// What happened to a connection, as the machine is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// connect(2) returned EINPROGRESS.
    ConnectStarted,
    /// The backend's socket is connected: at once, or reported writable
    /// with no error.
    Connected,
    /// connect(2) failed, at once or in its report.
    ConnectFailed,
    /// `Side`'s FIN was passed on: its direction is done.
    Fin(Side),
    /// A read, write or shutdown on `Side`'s socket failed, or it was reset.
    Broke(Side),
    /// The state's deadline passed (connect, idle or fin timeout).
    TimedOut,
    /// The graceful stop's grace period is over, or a second stop signal came.
    Stopped,
}

/// The timeouts a connection runs under (the other modes' settings).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `--connect-timeout`.
    pub connect: Duration,
    /// `--idle-timeout` and `--fin-timeout`, as the async relay takes them.
    pub relay: Limits,
}

impl State {
    /// The transition table: the state after `event`.
    pub fn on(self, event: Event) -> State {
        use Event::*;
        use State::*;
        match (self, event) {
            (Closed(end), _) => Closed(end),
            (Accepted, ConnectStarted) => Connecting,
            (Accepted | Connecting, Connected) => Relaying,
            (Accepted | Connecting, ConnectFailed) => Closed(End::Unreachable),
            (Connecting, TimedOut) => Closed(End::ConnectTimeout),
            (Relaying, Fin(Side::Client)) => ClientClosed,
            (Relaying, Fin(Side::Backend)) => BackendClosed,
            (ClientClosed, Fin(Side::Backend)) | (BackendClosed, Fin(Side::Client)) => {
                Closed(End::Relay(Ending::Complete))
            }
            (_, Broke(Side::Client)) => Closed(End::Relay(Ending::ClientReset)),
            (_, Broke(Side::Backend)) => Closed(End::Relay(Ending::BackendReset)),
            (Relaying, TimedOut) => Closed(End::Relay(Ending::IdleTimeout)),
            (ClientClosed | BackendClosed, TimedOut) => Closed(End::Relay(Ending::FinTimeout)),
            (_, Stopped) => Closed(End::Relay(Ending::Stopped)),
            // What cannot happen (a FIN before the relay, a second FIN from
            // the same side, a connect report while relaying) changes
            // nothing: the state stays what the sockets say it is.
            (state, _) => state,
        }
    }

    /// How long the connection may go without a byte moving (or, while
    /// connecting, without connecting) in this state; `None` once closed.
    pub fn limit(self, timeouts: &Timeouts) -> Option<Duration> {
        let relay = &timeouts.relay;
        match self {
            State::Accepted | State::Connecting => Some(timeouts.connect),
            State::Relaying => Some(relay.idle_timeout),
            State::ClientClosed => Some(relay.server_fin_timeout.min(relay.idle_timeout)),
            State::BackendClosed => Some(relay.client_fin_timeout.min(relay.idle_timeout)),
            State::Closed(_) => None,
        }
    }

    /// Whether bytes are relayed in this state (the flows mean something).
    pub fn is_relaying(self) -> bool {
        matches!(
            self,
            State::Relaying | State::ClientClosed | State::BackendClosed
        )
    }

    /// Whether a FIN from `side` would end the relay: the other direction
    /// is done already, and the close passes this FIN on (no `shutdown`).
    pub fn is_last(self, side: Side) -> bool {
        matches!(
            (self, side),
            (State::ClientClosed, Side::Backend) | (State::BackendClosed, Side::Client)
        )
    }

    /// A short word for the daemon's log.
    pub fn label(self) -> &'static str {
        match self {
            State::Closed(End::Relay(ending)) => ending.label(),
            State::Closed(End::Unreachable) => "unreachable",
            State::Closed(End::ConnectTimeout) => "connect-timeout",
            _ => "open",
        }
    }
}

/// One direction of a relaying connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Nothing in flight: waiting for the source. No buffer held.
    Reading,
    /// Bytes read and not all written: waiting for the destination to take
    /// them. The source is not read meanwhile (backpressure), so it leaves
    /// the read interest set.
    Writing,
    /// The source's FIN came behind the bytes held: write them, then pass
    /// the FIN on, with no read for the EOF.
    Draining,
    /// The FIN is passed on: this direction is over.
    Done,
}

/// What a system call on a direction returned, as the flow is told. (A
/// read or write that would block changes nothing; one that fails is the
/// connection's [`Event::Broke`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// A read brought bytes. `fin_behind`: they were all the source had
    /// before its FIN (EPOLLRDHUP was reported, and the read came back
    /// short of the buffer: Linux copies everything queued up to the
    /// buffer's size, so nothing but the EOF is left).
    Got {
        /// The FIN follows the bytes.
        fin_behind: bool,
    },
    /// A read returned 0: the source's FIN.
    Eof,
    /// Every byte held was written.
    Flushed,
}

impl Flow {
    /// The transition table of one direction.
    pub fn on(self, io: Io) -> Flow {
        match (self, io) {
            (Flow::Reading, Io::Got { fin_behind: false }) => Flow::Writing,
            (Flow::Reading, Io::Got { fin_behind: true }) => Flow::Draining,
            (Flow::Reading, Io::Eof) => Flow::Done,
            (Flow::Writing, Io::Flushed) => Flow::Reading,
            (Flow::Draining, Io::Flushed) => Flow::Done,
            // A read while bytes are held, a flush with nothing held: not
            // asked for, so not met; the flow stays.
            (flow, _) => flow,
        }
    }

    /// Whether bytes wait for the destination.
    pub fn holds_bytes(self) -> bool {
        matches!(self, Flow::Writing | Flow::Draining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(5),
            relay: Limits {
                idle_timeout: Duration::from_secs(600),
                client_fin_timeout: Duration::from_secs(30),
                server_fin_timeout: Duration::from_secs(20),
            },
        }
    }

    fn run(events: &[Event]) -> State {
        events.iter().fold(State::Accepted, |s, &e| s.on(e))
    }

    #[test]
    fn a_connection_that_ends_well_passes_both_fins_on() {
        use Event::*;
        assert_eq!(run(&[ConnectStarted]), State::Connecting);
        assert_eq!(run(&[ConnectStarted, Connected]), State::Relaying);
        assert_eq!(run(&[Connected]), State::Relaying, "connected at once");
        let client_first = [ConnectStarted, Connected, Fin(Side::Client)];
        assert_eq!(run(&client_first), State::ClientClosed);
        let backend_first = [ConnectStarted, Connected, Fin(Side::Backend)];
        assert_eq!(run(&backend_first), State::BackendClosed);
        let complete = State::Closed(End::Relay(Ending::Complete));
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
        use Event::*;
        let unreachable = State::Closed(End::Unreachable);
        assert_eq!(run(&[ConnectFailed]), unreachable, "refused at once");
        assert_eq!(run(&[ConnectStarted, ConnectFailed]), unreachable);
        assert_eq!(
            run(&[ConnectStarted, TimedOut]),
            State::Closed(End::ConnectTimeout)
        );
    }

    #[test]
    fn failures_timeouts_and_the_stop_end_it_from_any_open_state() {
        use Event::*;
        let reset = |side| run(&[Connected, Broke(side)]);
        assert_eq!(
            reset(Side::Client),
            State::Closed(End::Relay(Ending::ClientReset))
        );
        assert_eq!(
            reset(Side::Backend),
            State::Closed(End::Relay(Ending::BackendReset))
        );
        assert_eq!(
            run(&[Connected, Fin(Side::Client), Broke(Side::Client)]),
            State::Closed(End::Relay(Ending::ClientReset)),
            "a reset after the FIN"
        );
        assert_eq!(
            run(&[Connected, TimedOut]),
            State::Closed(End::Relay(Ending::IdleTimeout))
        );
        for side in Side::BOTH {
            assert_eq!(
                run(&[Connected, Fin(side), TimedOut]),
                State::Closed(End::Relay(Ending::FinTimeout))
            );
        }
        assert_eq!(
            run(&[ConnectStarted, Stopped]),
            State::Closed(End::Relay(Ending::Stopped))
        );
    }

    #[test]
    fn closed_is_final_and_impossible_events_change_nothing() {
        use Event::*;
        let closed = run(&[Connected, Broke(Side::Backend)]);
        for event in [Connected, Fin(Side::Client), TimedOut, Stopped] {
            assert_eq!(closed.on(event), closed);
        }
        assert_eq!(State::Connecting.on(Fin(Side::Client)), State::Connecting);
        assert_eq!(
            State::ClientClosed.on(Fin(Side::Client)),
            State::ClientClosed
        );
        assert_eq!(State::Relaying.on(ConnectFailed), State::Relaying);
    }

    #[test]
    fn each_state_has_its_own_limit() {
        let t = timeouts();
        assert_eq!(State::Connecting.limit(&t), Some(Duration::from_secs(5)));
        assert_eq!(State::Relaying.limit(&t), Some(Duration::from_secs(600)));
        // After the client's FIN the backend is waited on, and the other way.
        assert_eq!(State::ClientClosed.limit(&t), Some(Duration::from_secs(20)));
        assert_eq!(
            State::BackendClosed.limit(&t),
            Some(Duration::from_secs(30))
        );
        let mut short_idle = t;
        short_idle.relay.idle_timeout = Duration::from_secs(1);
        assert_eq!(
            State::ClientClosed.limit(&short_idle),
            Some(Duration::from_secs(1)),
            "never longer than the idle limit"
        );
        assert_eq!(State::Closed(End::Unreachable).limit(&t), None);
    }

    #[test]
    fn only_the_second_fin_is_last() {
        assert!(!State::Relaying.is_last(Side::Client));
        assert!(State::ClientClosed.is_last(Side::Backend));
        assert!(!State::ClientClosed.is_last(Side::Client));
        assert!(State::BackendClosed.is_last(Side::Client));
    }

    #[test]
    fn a_direction_reads_writes_drains_and_ends() {
        let got = Io::Got { fin_behind: false };
        let last = Io::Got { fin_behind: true };
        assert_eq!(Flow::Reading.on(got), Flow::Writing);
        assert_eq!(Flow::Writing.on(Io::Flushed), Flow::Reading);
        assert_eq!(Flow::Reading.on(Io::Eof), Flow::Done);
        assert_eq!(Flow::Reading.on(last), Flow::Draining);
        assert_eq!(Flow::Draining.on(Io::Flushed), Flow::Done);
        // Not asked for, so nothing changes.
        assert_eq!(Flow::Writing.on(got), Flow::Writing);
        assert_eq!(Flow::Done.on(Io::Eof), Flow::Done);
        assert!(Flow::Writing.holds_bytes() && Flow::Draining.holds_bytes());
        assert!(!Flow::Reading.holds_bytes() && !Flow::Done.holds_bytes());
    }
}
