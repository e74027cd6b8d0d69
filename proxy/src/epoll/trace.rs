//! What one connection's access-log line needs, gathered as it goes: when
//! it was accepted, from whom, which group and server, how long it waited
//! and connected, the bytes each way, how it ended. A relaying connection
//! carries its `Trace` for its whole life, so it is kept small: the accept
//! date is eight bytes of microseconds, the two waits are four-byte
//! `Micros` times, and what few connections have (a
//! TLS server name, a PROXY destination, the backend's source address) is
//! boxed apart in an `Extra`.
//!
//! It travels with a connection handed to a new process (`moving.rs`), so
//! that the line the new process writes is the one it would have had.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::ops::access_log::termination::{Phase, Termination};

/// Connections accepted by this process, for `%rt` and `%ID`.
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

/// What happened to one connection, gathered for its access-log line.
#[derive(Debug)]
pub(super) struct Trace {
    /// When it was accepted, in microseconds since the Unix epoch (half a
    /// `SystemTime`): [`Trace::accepted`].
    pub(super) accepted_us: u64,
    pub(super) started: Instant,
    /// The client: the peer address, or the one its PROXY header gave.
    pub(super) client: SocketAddr,
    /// The group its backends are chosen from (0: the default).
    pub(super) group: usize,
    /// The backend connected to, or the last one tried (its index: a
    /// `u32` rather than a `usize`, as the two waits below are 4 bytes
    /// rather than 16: the trace is kept for the connection's whole life).
    pub(super) backend: Option<u32>,
    /// Where that backend was when this connection went there: its
    /// address, or its host name's answer then (`%si:%sp`, `server_addr`).
    pub(super) server_addr: Option<SocketAddr>,
    /// Time spent waiting for places (HAProxy's `Tw`).
    pub(super) wait: Micros,
    /// Time from the first connect attempt to a connected backend (`Tc`).
    pub(super) connect: Micros,
    pub(super) retries: u32,
    pub(super) termination: Termination,
    /// The backend's open connections at the end of the relay, this one
    /// included (`%sc`).
    pub(super) server_open: u32,
    /// Where the connection is in its life, for the second letter of its
    /// termination code if a graceful stop cuts it (`KR`, `KQ`, `KC`).
    pub(super) phase: Phase,
    /// The client sent a byte that was read (its PROXY header aside, if
    /// valid): what `dontlognull` asks.
    pub(super) client_sent: bool,
    /// What only some connections have (`None` for the others).
    pub(super) extra: Option<Box<Extra>>,
    /// Its number in the process (only for a log format that shows it).
    pub(super) id: u64,
    /// How many upgrades moved it to a new process (epoll/moving.rs).
    pub(super) moves: u32,
}

/// The bytes a relay moved each way, for the access-log line. Not part of
/// the [`Trace`]: they are known only at the relay's end, right before the
/// line, and the trace is kept for the connection's whole life.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Relayed {
    /// From the client to the backend.
    pub(super) up: u64,
    /// From the backend to the client.
    pub(super) down: u64,
}

/// A time a connection took, or none yet, in four bytes: microseconds,
/// up to 71 minutes (longer reads as that), `u32::MAX` for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Micros(u32);

impl Micros {
    /// None yet.
    pub(super) const NONE: Micros = Micros(u32::MAX);

    /// `d`, or none.
    pub(super) fn of(d: Option<Duration>) -> Micros {
        d.map_or(Micros::NONE, |d| {
            Micros(
                u32::try_from(d.as_micros())
                    .unwrap_or(u32::MAX - 1)
                    .min(u32::MAX - 1),
            )
        })
    }

    /// The time, if one was set.
    pub(super) fn get(self) -> Option<Duration> {
        (self != Micros::NONE).then(|| Duration::from_micros(u64::from(self.0)))
    }

    /// Sets `d` unless a time is set already (the first one counts).
    pub(super) fn first(&mut self, d: Duration) {
        if *self == Micros::NONE {
            *self = Micros::of(Some(d));
        }
    }
}

/// What only some connections have, kept apart so that the others do not
/// carry its room for their whole life (88 bytes, against a box's 8).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Extra {
    /// The server name of its ClientHello (a frontend with rules).
    pub(super) sni: Option<String>,
    /// Where the client connected to, as its PROXY header says.
    pub(super) destination: Option<SocketAddr>,
    /// Where the backend was connected from (only for a log format that
    /// shows it).
    pub(super) backend_source: Option<SocketAddr>,
}

impl Trace {
    /// When it was accepted, by the wall clock.
    pub(super) fn accepted(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.accepted_us)
    }

    /// What only some connections have, or nothing.
    pub(super) fn extra(&self) -> &Extra {
        static NONE: Extra = Extra {
            sni: None,
            destination: None,
            backend_source: None,
        };
        self.extra.as_deref().unwrap_or(&NONE)
    }

    /// What only some connections have, made when first needed.
    pub(super) fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// A connection just accepted from `peer`: nothing done yet; numbered
    /// if `counted`.
    pub(super) fn new(peer: SocketAddr, counted: bool) -> Trace {
        Trace::at(peer, SystemTime::now(), Instant::now(), counted)
    }

    /// A connection accepted from `peer` at `accepted` (`started` on the
    /// monotonic clock).
    pub(super) fn at(
        peer: SocketAddr,
        accepted: SystemTime,
        started: Instant,
        counted: bool,
    ) -> Trace {
        let since_epoch = accepted.duration_since(UNIX_EPOCH).unwrap_or_default();
        Trace {
            accepted_us: u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX),
            started,
            client: peer,
            group: 0,
            backend: None,
            server_addr: None,
            wait: Micros::NONE,
            connect: Micros::NONE,
            retries: 0,
            termination: Termination::COMPLETE,
            server_open: 0,
            phase: Phase::Request,
            client_sent: false,
            extra: None,
            id: if counted {
                ACCEPTED.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                0
            },
            moves: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elapsed_time_keeps_the_first_and_says_none_until_set() {
        let mut wait = Micros::NONE;
        assert_eq!(wait.get(), None);
        wait.first(Duration::from_micros(1500));
        wait.first(Duration::from_secs(9));
        assert_eq!(
            wait.get(),
            Some(Duration::from_micros(1500)),
            "the first counts"
        );
        let long = Micros::of(Some(Duration::from_secs(5 * 3600)));
        assert_eq!(
            long.get(),
            Some(Duration::from_micros(u64::from(u32::MAX - 1)))
        );
        assert_eq!(Micros::of(None), Micros::NONE);
    }
}
