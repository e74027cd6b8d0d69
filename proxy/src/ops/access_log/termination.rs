//! The termination state: who ended a connection, and in which phase, in
//! HAProxy's two characters (the `%ts` field of the access log).
//!
//! The first character says what ended the connection: `-` nothing
//! abnormal, `C` the client (an abort: a reset), `S` the server (an abort,
//! or it refused the connection), `P` the proxy (a deny rule, a bad PROXY
//! header), `R` a local resource ran out (descriptors, memory, ports), `I`
//! an internal error, `D` the server was marked down and its connections
//! cut, `K` killed by the operator (the shutdown grace period ran out, or
//! the operator shut a server's sessions down at runtime), `c`
//! and `s` a client-side or server-side timeout. The second says where the
//! connection was: `R` before a server was chosen (PROXY header, access
//! control), `Q` waiting for a place, `C` connecting, `D` relaying data, `L`
//! the server had finished (sent its FIN) and the client was still to, `-`
//! a normal end. Tests use these two characters as their oracle.
//!
//! | where the connection ended | code | `%s` | `%Tw` | `%Tc` |
//! |----------------------------|------|------|-------|-------|
//! | relay [`Ending::Complete`]: both FINs passed on | `--` | server | wait | connect |
//! | relay [`Ending::ClientReset`] | `CD` | server | wait | connect |
//! | relay [`Ending::BackendReset`] | `SD` | server | wait | connect |
//! | relay [`Ending::IdleTimeout`] (one timer for both sides) | `cD` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], the server sent its FIN and the client stayed silent | `cL` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], the client sent its FIN and the server stayed silent | `sD` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], side unknown | `cL` | server | wait | connect |
//! | every backend at its maxconn for `timeout queue` | `sQ` | `<NOSRV>` | time waited | `-1` |
//! | every backend at its maxconn and its queue at its `maxqueue` | `SQ` | `<NOSRV>` | time waited | `-1` |
//! | no backend up (nothing was tried) | `SC` | `<NOSRV>` | `-1` | `-1` |
//! | the last connect refused, unreachable, reset (after the retries) | `SC` | last server tried | wait | `-1` |
//! | the last connect timed out (`timeout connect`) | `sC` | last server tried | wait | `-1` |
//! | the last connect failed for a local resource (EMFILE, ENFILE, ENOBUFS, ENOMEM, EADDRNOTAVAIL) | `RC` | last server tried | wait | `-1` |
//! | the client went away while waiting for a place | `CQ` | `<NOSRV>` | time waited | `-1` |
//! | the client went away while we connected | `CC` | server tried | wait | `-1` |
//! | denied by an access rule or the per-source limit | `PR` | `<NOSRV>` | `-1` | `-1` |
//! | a malformed PROXY header | `PR` | `<NOSRV>` | `-1` | `-1` |
//! | no complete PROXY header within its timeout / the client closed first | `cR` / `CR` | `<NOSRV>` | `-1` | `-1` |
//! | cut at the end of the shutdown grace period | `KD` (`KC`, `KQ`, `KR` before the relay) | server | wait | connect |
//! | cut because its server was marked down | `DD` | server | wait | connect |
//! | cut by the operator (`shutdown sessions server`, `maint shutdown-sessions`) | `KD` | server | wait | connect |
//!
//! Choices where HAProxy leaves room:
//!
//! - **Idle timeout is `cD`.** HAProxy has two timers (`timeout client`,
//!   `timeout server`); we have one for both sides. When both expire
//!   together HAProxy reports the client's first (its own example of an
//!   idle TCP session is `cD`), so we do too.
//! - **Half-closed timeouts are told apart.** HAProxy would log both as a
//!   data-phase timeout (the server socket is still open for writing). We
//!   log `cL` when the server had finished and the client never closed
//!   (HAProxy's `L`: "the server had already finished"), and `sD` when the
//!   client had finished and the server stopped answering, so a test can
//!   tell a half-closed timeout from an idle one. [`Ending::FinTimeout`]
//!   does not say which side sent its FIN, so [`Termination::of_relay`]
//!   takes that as an argument.
//! - **A backend maxconn wait that runs out is `sQ`**, HAProxy's queue
//!   timeout. At the global and frontend limits nobody is refused: the
//!   proxy stops accepting, as HAProxy does, and clients wait in the
//!   kernel's listen queue.
//! - **A reset after a half-close keeps `D`** (`CD`, `SD`): a reset is an
//!   abort whatever came before it.
//!

use std::fmt::{self, Write as _};
use std::io;

use crate::conn::machine::Ending;
use crate::conn::side::Side;

/// What ended a connection: the first character of the termination state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `-`: nothing abnormal; both sides closed.
    Normal,
    /// `C`: the client aborted (a reset).
    ClientAbort,
    /// `S`: the server aborted, or refused the connection.
    ServerAbort,
    /// `P`: the proxy refused or cut it (a deny rule, a bad PROXY header).
    Proxy,
    /// `R`: a local resource ran out (descriptors, memory, source ports).
    Resource,
    /// `I`: an internal error; a bug.
    Internal,
    /// `D`: the server was marked down and its connections cut.
    ServerDown,
    /// `K`: killed on the operator's behalf (the shutdown grace period).
    Killed,
    /// `c`: the client-side timeout expired.
    ClientTimeout,
    /// `s`: the server-side timeout expired.
    ServerTimeout,
}

/// Where the connection was when it ended: the second character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `R`: before a server was chosen (PROXY header, access control).
    Request,
    /// `Q`: waiting for a place under a maxconn.
    Queue,
    /// `C`: connecting to the server.
    Connect,
    /// `D`: relaying data.
    Data,
    /// `L`: the server had finished; the client was still to.
    Last,
    /// `-`: a normal end, after the data.
    Normal,
}

impl Cause {
    /// Every cause, in the order of HAProxy's manual.
    pub const ALL: [Cause; 10] = [
        Cause::ClientAbort,
        Cause::ServerAbort,
        Cause::Proxy,
        Cause::Resource,
        Cause::Internal,
        Cause::ServerDown,
        Cause::Killed,
        Cause::ClientTimeout,
        Cause::ServerTimeout,
        Cause::Normal,
    ];

    /// Its character in the termination state.
    pub fn char(self) -> u8 {
        match self {
            Cause::Normal => b'-',
            Cause::ClientAbort => b'C',
            Cause::ServerAbort => b'S',
            Cause::Proxy => b'P',
            Cause::Resource => b'R',
            Cause::Internal => b'I',
            Cause::ServerDown => b'D',
            Cause::Killed => b'K',
            Cause::ClientTimeout => b'c',
            Cause::ServerTimeout => b's',
        }
    }
}

impl Phase {
    /// Every phase, in the order a connection goes through them.
    pub const ALL: [Phase; 6] = [
        Phase::Request,
        Phase::Queue,
        Phase::Connect,
        Phase::Data,
        Phase::Last,
        Phase::Normal,
    ];

    /// Its character in the termination state.
    pub fn char(self) -> u8 {
        match self {
            Phase::Request => b'R',
            Phase::Queue => b'Q',
            Phase::Connect => b'C',
            Phase::Data => b'D',
            Phase::Last => b'L',
            Phase::Normal => b'-',
        }
    }
}

/// Who ended a connection and in which phase: HAProxy's two characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termination {
    /// What ended it.
    pub cause: Cause,
    /// Where it was.
    pub phase: Phase,
}

impl Termination {
    /// `--`: both sides finished and their FINs were passed on.
    pub const COMPLETE: Termination = Termination::new(Cause::Normal, Phase::Normal);
    /// `CD`: the client reset the connection while data flowed.
    pub const CLIENT_RESET: Termination = Termination::new(Cause::ClientAbort, Phase::Data);
    /// `SD`: the server reset the connection while data flowed.
    pub const SERVER_RESET: Termination = Termination::new(Cause::ServerAbort, Phase::Data);
    /// `cD`: no byte either way for the idle timeout.
    pub const IDLE_TIMEOUT: Termination = Termination::new(Cause::ClientTimeout, Phase::Data);
    /// `cL`: the server sent its FIN and the client stayed silent for
    /// `timeout client-fin` (`Timeouts::client_fin`: the client is the
    /// side waited on).
    pub const CLIENT_SILENT_AFTER_SERVER_FIN: Termination =
        Termination::new(Cause::ClientTimeout, Phase::Last);
    /// `sD`: the client sent its FIN and the server stayed silent for
    /// `timeout server-fin` (`Timeouts::server_fin`).
    pub const SERVER_SILENT_AFTER_CLIENT_FIN: Termination =
        Termination::new(Cause::ServerTimeout, Phase::Data);
    /// `sQ`: no place under every backend's maxconn within
    /// `timeout queue`.
    pub const QUEUE_TIMEOUT: Termination = Termination::new(Cause::ServerTimeout, Phase::Queue);
    /// `SQ`: every candidate backend at its maxconn and its queue at its
    /// `maxqueue`: refused at once, without waiting.
    pub const QUEUE_FULL: Termination = Termination::new(Cause::ServerAbort, Phase::Queue);
    /// `SC`: no backend is up; logged with `<NOSRV>`.
    pub const NO_SERVER: Termination = Termination::new(Cause::ServerAbort, Phase::Connect);
    /// `SC`: the last connect was refused (or unreachable).
    pub const CONNECT_REFUSED: Termination = Termination::new(Cause::ServerAbort, Phase::Connect);
    /// `sC`: the last connect did not complete within `timeout connect`.
    pub const CONNECT_TIMEOUT: Termination = Termination::new(Cause::ServerTimeout, Phase::Connect);
    /// `RC`: the last connect failed for lack of a local resource.
    pub const CONNECT_NO_RESOURCE: Termination = Termination::new(Cause::Resource, Phase::Connect);
    /// `CQ`: the client went away while waiting for a place.
    pub const CLIENT_ABORT_IN_QUEUE: Termination =
        Termination::new(Cause::ClientAbort, Phase::Queue);
    /// `CC`: the client went away while we connected to a server.
    pub const CLIENT_ABORT_IN_CONNECT: Termination =
        Termination::new(Cause::ClientAbort, Phase::Connect);
    /// `PR`: denied by an access rule or the per-source limit.
    pub const DENIED: Termination = Termination::new(Cause::Proxy, Phase::Request);
    /// `PR`: the PROXY protocol header was malformed.
    pub const BAD_PROXY_HEADER: Termination = Termination::new(Cause::Proxy, Phase::Request);
    /// `cR`: no complete PROXY header within its timeout.
    pub const PROXY_HEADER_TIMEOUT: Termination =
        Termination::new(Cause::ClientTimeout, Phase::Request);
    /// `CR`: the client closed before its PROXY header was complete.
    pub const CLIENT_ABORT_IN_REQUEST: Termination =
        Termination::new(Cause::ClientAbort, Phase::Request);
    /// `KD`: cut at the end of the shutdown grace period while relaying
    /// (cut earlier, `Termination::new(Cause::Killed, phase)`: `KC`, `KQ`,
    /// `KR`).
    pub const KILLED: Termination = Termination::new(Cause::Killed, Phase::Data);
    /// `DD`: cut because its server was marked down.
    pub const SERVER_DOWN: Termination = Termination::new(Cause::ServerDown, Phase::Data);

    /// A termination state from its two parts.
    pub const fn new(cause: Cause, phase: Phase) -> Termination {
        Termination { cause, phase }
    }

    /// The two characters, like `*b"SC"`.
    pub fn code(&self) -> [u8; 2] {
        [self.cause.char(), self.phase.char()]
    }

    /// How a relay machine's ending is logged. `half_closed_by` is the side that
    /// sent its FIN first, if one did; only [`Ending::FinTimeout`] needs it
    /// (the other side is the one that stayed silent), and when it is
    /// unknown the client is blamed, as for the idle timeout.
    pub fn of_relay(ending: Ending, half_closed_by: Option<Side>) -> Termination {
        match ending {
            Ending::Complete => Termination::COMPLETE,
            Ending::ClientReset => Termination::CLIENT_RESET,
            Ending::BackendReset => Termination::SERVER_RESET,
            Ending::IdleTimeout => Termination::IDLE_TIMEOUT,
            Ending::Stopped => Termination::KILLED,
            Ending::FinTimeout => match half_closed_by {
                Some(Side::Client) => Termination::SERVER_SILENT_AFTER_CLIENT_FIN,
                Some(Side::Backend) | None => Termination::CLIENT_SILENT_AFTER_SERVER_FIN,
            },
            // A machine that connects itself (the states mode) ends here
            // when its connect fails; the epoll mode's connect step logs
            // its own, after its retries.
            Ending::Unreachable => Termination::CONNECT_REFUSED,
            Ending::ConnectTimeout => Termination::CONNECT_TIMEOUT,
        }
    }

    /// How a failed connect to a server is logged when no retry is left:
    /// `sC` for a timeout reported by the kernel, `RC` when a local
    /// resource ran out, `SC` otherwise (refused, unreachable, reset). A
    /// connect cut by our own `timeout connect` is
    /// [`Termination::CONNECT_TIMEOUT`].
    pub fn of_connect_error(e: &io::Error) -> Termination {
        const RESOURCES: [i32; 5] = [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ];
        if e.kind() == io::ErrorKind::TimedOut {
            Termination::CONNECT_TIMEOUT
        } else if e.raw_os_error().is_some_and(|n| RESOURCES.contains(&n))
            || e.kind() == io::ErrorKind::OutOfMemory
        {
            Termination::CONNECT_NO_RESOURCE
        } else {
            Termination::CONNECT_REFUSED
        }
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char(char::from(self.cause.char()))?;
        f.write_char(char::from(self.phase.char()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_termination_of_the_table_has_its_code() {
        let named = [
            (Termination::COMPLETE, "--"),
            (Termination::CLIENT_RESET, "CD"),
            (Termination::SERVER_RESET, "SD"),
            (Termination::IDLE_TIMEOUT, "cD"),
            (Termination::CLIENT_SILENT_AFTER_SERVER_FIN, "cL"),
            (Termination::SERVER_SILENT_AFTER_CLIENT_FIN, "sD"),
            (Termination::QUEUE_TIMEOUT, "sQ"),
            (Termination::NO_SERVER, "SC"),
            (Termination::CONNECT_REFUSED, "SC"),
            (Termination::CONNECT_TIMEOUT, "sC"),
            (Termination::CONNECT_NO_RESOURCE, "RC"),
            (Termination::CLIENT_ABORT_IN_QUEUE, "CQ"),
            (Termination::CLIENT_ABORT_IN_CONNECT, "CC"),
            (Termination::DENIED, "PR"),
            (Termination::BAD_PROXY_HEADER, "PR"),
            (Termination::PROXY_HEADER_TIMEOUT, "cR"),
            (Termination::CLIENT_ABORT_IN_REQUEST, "CR"),
            (Termination::KILLED, "KD"),
            (Termination::SERVER_DOWN, "DD"),
        ];
        for (t, code) in named {
            assert_eq!(t.to_string(), code);
            assert_eq!(&t.code(), code.as_bytes());
        }
    }

    #[test]
    fn every_relay_ending_maps_to_the_documented_code() {
        use Ending::*;
        let cases = [
            (Complete, None, "--"),
            (ClientReset, None, "CD"),
            (BackendReset, None, "SD"),
            (IdleTimeout, None, "cD"),
            (FinTimeout, Some(Side::Backend), "cL"),
            (FinTimeout, Some(Side::Client), "sD"),
            (FinTimeout, None, "cL"),
            // Only the fin timeout looks at who half-closed.
            (Complete, Some(Side::Client), "--"),
            (ClientReset, Some(Side::Backend), "CD"),
            (BackendReset, Some(Side::Client), "SD"),
            (IdleTimeout, Some(Side::Client), "cD"),
            (Unreachable, None, "SC"),
            (ConnectTimeout, None, "sC"),
        ];
        for (ending, side, code) in cases {
            assert_eq!(
                Termination::of_relay(ending, side).to_string(),
                code,
                "{ending:?} {side:?}"
            );
        }
    }

    #[test]
    fn connect_errors_map_to_server_timeout_or_resource() {
        let code = |errno: i32| {
            Termination::of_connect_error(&io::Error::from_raw_os_error(errno)).to_string()
        };
        assert_eq!(code(libc::ECONNREFUSED), "SC");
        assert_eq!(code(libc::ENETUNREACH), "SC");
        assert_eq!(code(libc::EHOSTUNREACH), "SC");
        assert_eq!(code(libc::ECONNRESET), "SC");
        assert_eq!(code(libc::ETIMEDOUT), "sC");
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ] {
            assert_eq!(code(errno), "RC", "errno {errno}");
        }
    }

    #[test]
    fn every_cause_and_phase_makes_a_code_of_its_own() {
        let mut seen = Vec::new();
        for cause in Cause::ALL {
            for phase in Phase::ALL {
                let t = Termination::new(cause, phase);
                let text = String::from_utf8(t.code().to_vec()).expect("ASCII");
                assert!(!seen.contains(&text), "{text} twice");
                seen.push(text.clone());
                assert_eq!(t.to_string(), text);
            }
        }
        assert_eq!(seen.len(), Cause::ALL.len() * Phase::ALL.len());
    }
}
