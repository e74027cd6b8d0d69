//! A relay machine written as bytes, and read back: how a connection's
//! state can leave one process and carry on in another (the buffers'
//! bytes travel beside it; the sockets as descriptors).
//!
//! The machine holds one time, when its deadline counts from. An `Instant`
//! means nothing outside its process, so it travels as *how long ago* at
//! the moment of writing, and is read back against the reader's clock: a
//! connection silent for 3 s of its 10 s limit has 7 s left on arrival,
//! less the time in transit.
//!
//! ```text
//!   byte 0        the format's version (VERSION)
//!   byte 1        the phase: 0 accepted, 1 connecting, 2 relaying, 3 client closed,
//!                 4 backend closed, 16 + n closed with Ending::ALL[n]
//!   bytes 2..19   up:   flow (0 reading .. 4 done), start u32, end u32, bytes u64
//!   bytes 19..36  down: the same
//!   bytes 36..44  microseconds since the deadline's count began, u64
//!   byte 44       the first FIN: 0 none, 1 the client, 2 the backend
//!   byte 45       hang-ups: bit 0 the client, bit 1 the backend
//! ```
//!
//! Numbers are little-endian. A reader refuses a version it does not know,
//! and any byte out of its range, with the offset: it never guesses.

use std::fmt;
use std::time::{Duration, Instant};

use super::machine::{Direction, Ending, Flow, Machine, Phase};
use super::side::Side;

/// The format written by [`write()`].
pub const VERSION: u8 = 1;

/// How long a snapshot is.
pub const LEN: usize = 46;

/// Why bytes are not a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError {
    /// The offset of the byte refused.
    pub at: usize,
    /// What was wrong with it.
    pub what: &'static str,
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "relay snapshot, byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for SnapshotError {}

/// `machine` as bytes, its deadline's count as time before `now`.
pub fn write(machine: &Machine, now: Instant) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    out[0] = VERSION;
    out[1] = phase_code(machine.phase());
    for (i, side) in Side::BOTH.into_iter().enumerate() {
        let d = machine.direction(side);
        let at = 2 + 17 * i;
        out[at] = flow_code(d.flow);
        out[at + 1..at + 5].copy_from_slice(&d.start.to_le_bytes());
        out[at + 5..at + 9].copy_from_slice(&d.end.to_le_bytes());
        out[at + 9..at + 17].copy_from_slice(&d.bytes.to_le_bytes());
    }
    let ago = now.saturating_duration_since(machine.since());
    let micros = u64::try_from(ago.as_micros()).unwrap_or(u64::MAX);
    out[36..44].copy_from_slice(&micros.to_le_bytes());
    out[44] = match machine.first_fin() {
        None => 0,
        Some(Side::Client) => 1,
        Some(Side::Backend) => 2,
    };
    let [client, backend] = machine.hung_up();
    out[45] = u8::from(client) | u8::from(backend) << 1;
    out
}

/// The machine `bytes` hold, its deadline's count placed before `now`.
pub fn read(bytes: &[u8], now: Instant) -> Result<Machine, SnapshotError> {
    let bad = |at, what| SnapshotError { at, what };
    if bytes.len() != LEN {
        return Err(bad(bytes.len().min(LEN), "a snapshot is 46 bytes"));
    }
    if bytes[0] != VERSION {
        return Err(bad(0, "a version this binary does not know"));
    }
    let phase = phase_of(bytes[1]).ok_or(bad(1, "no such phase"))?;
    let mut directions = [Direction {
        flow: Flow::Reading,
        start: 0,
        end: 0,
        bytes: 0,
    }; 2];
    for (i, d) in directions.iter_mut().enumerate() {
        let at = 2 + 17 * i;
        d.flow = flow_of(bytes[at]).ok_or(bad(at, "no such flow"))?;
        d.start = u32::from_le_bytes(array(&bytes[at + 1..at + 5]));
        d.end = u32::from_le_bytes(array(&bytes[at + 5..at + 9]));
        d.bytes = u64::from_le_bytes(array(&bytes[at + 9..at + 17]));
    }
    let ago = Duration::from_micros(u64::from_le_bytes(array(&bytes[36..44])));
    // A count older than this clock's origin starts at the origin.
    let since = now.checked_sub(ago).unwrap_or(now);
    let first_fin = match bytes[44] {
        0 => None,
        1 => Some(Side::Client),
        2 => Some(Side::Backend),
        _ => return Err(bad(44, "no such side")),
    };
    if bytes[45] > 3 {
        return Err(bad(45, "hang-up bits beyond the two sides"));
    }
    let hung_up = [bytes[45] & 1 != 0, bytes[45] & 2 != 0];
    Machine::from_parts(phase, directions, since, first_fin, hung_up)
        .ok_or(bad(2, "a direction's start is past its end"))
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}

fn phase_code(phase: Phase) -> u8 {
    match phase {
        Phase::Accepted => 0,
        Phase::Connecting => 1,
        Phase::Relaying => 2,
        Phase::ClientClosed => 3,
        Phase::BackendClosed => 4,
        Phase::Closed(ending) => {
            16 + Ending::ALL.iter().position(|&e| e == ending).unwrap_or(0) as u8
        }
    }
}

fn phase_of(code: u8) -> Option<Phase> {
    Some(match code {
        0 => Phase::Accepted,
        1 => Phase::Connecting,
        2 => Phase::Relaying,
        3 => Phase::ClientClosed,
        4 => Phase::BackendClosed,
        16.. => Phase::Closed(*Ending::ALL.get(usize::from(code - 16))?),
        _ => return None,
    })
}

const FLOWS: [Flow; 5] = [
    Flow::Reading,
    Flow::Writing,
    Flow::Draining,
    Flow::Closing,
    Flow::Done,
];

fn flow_code(flow: Flow) -> u8 {
    FLOWS.iter().position(|&f| f == flow).unwrap_or(0) as u8
}

fn flow_of(code: u8) -> Option<Flow> {
    FLOWS.get(usize::from(code)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::machine::Event;
    use crate::conn::timeouts::Timeouts;

    #[test]
    fn a_machine_comes_back_as_it_was_with_its_time_left() {
        let t0 = Instant::now();
        let mut m = Machine::relaying(t0);
        m.on(Event::read(Side::Client, Ok(9), true).expect("bytes"), t0);
        m.on(
            Event::Wrote {
                from: Side::Client,
                n: 4,
            },
            t0,
        );
        m.on(Event::Eof(Side::Backend), t0);
        m.on(Event::HungUp(Side::Client), t0);
        let written = write(&m, t0 + Duration::from_secs(3));
        // Read back 2 s later by another clock's reckoning: the count began
        // 3 s before the reading, as it did before the writing.
        let later = t0 + Duration::from_secs(5);
        let back = read(&written, later).expect("a snapshot");
        assert_eq!(back.phase(), m.phase());
        assert_eq!(back.direction(Side::Client), m.direction(Side::Client));
        assert_eq!(back.direction(Side::Backend), m.direction(Side::Backend));
        assert_eq!(back.hung_up(), m.hung_up());
        assert_eq!(back.first_fin(), m.first_fin());
        assert_eq!(later - back.since(), Duration::from_secs(3));
        let t = Timeouts::default();
        assert_eq!(
            back.deadline(&t).map(|d| d - later),
            m.deadline(&t).map(|d| d - (t0 + Duration::from_secs(3)))
        );
    }

    #[test]
    fn every_phase_and_flow_has_a_code_that_reads_back() {
        let phases = [
            Phase::Accepted,
            Phase::Connecting,
            Phase::Relaying,
            Phase::ClientClosed,
            Phase::BackendClosed,
        ]
        .into_iter()
        .chain(Ending::ALL.map(Phase::Closed));
        for phase in phases {
            assert_eq!(phase_of(phase_code(phase)), Some(phase));
        }
        for flow in FLOWS {
            assert_eq!(flow_of(flow_code(flow)), Some(flow));
        }
    }

    #[test]
    fn bad_bytes_are_refused_with_their_offset() {
        let t0 = Instant::now();
        let good = write(&Machine::relaying(t0), t0);
        let refused = |mut bytes: [u8; LEN], at: usize, value: u8| {
            bytes[at] = value;
            read(&bytes, t0).expect_err("refused").at
        };
        assert_eq!(refused(good, 0, 2), 0, "an unknown version");
        assert_eq!(refused(good, 1, 9), 1);
        assert_eq!(refused(good, 1, 16 + 8), 1);
        assert_eq!(refused(good, 2, 5), 2);
        assert_eq!(refused(good, 44, 3), 44);
        assert_eq!(refused(good, 45, 4), 45);
        assert_eq!(refused(good, 3, 1), 2, "start past end");
        assert_eq!(read(&good[..10], t0).expect_err("short").at, 10);
        let e = read(&[0; 3], t0).expect_err("short");
        assert!(e.to_string().contains("46 bytes"), "{e}");
    }
}
