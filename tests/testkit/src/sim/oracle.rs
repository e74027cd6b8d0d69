//! What the simulator holds the relay to, checked from outside: from what
//! the world saw, never from what the machine says of itself.
//!
//! | promise | checked |
//! |---|---|
//! | bytes delivered exactly, in order, once | each byte a peer reads (world.rs) |
//! | a FIN passed on only after every byte before it | each end of file a peer reads (world.rs) |
//! | a reset passed on as a reset | each peer's end, once the run settles ([`end_of_run`]) |
//! | one end, with the right ending | the moment the machine closes ([`ending`]) |
//! | each deadline at its time, not before, not after | the same moment, against the world's own clock of silence ([`Record`]) |
//! | no step without progress, no wait without a wake | every step ([`step`], [`progress`]) |

use std::time::{Duration, Instant};

use proxy::conn::machine::{Ending, Event, Flow, Machine, Op, Phase};
use proxy::conn::side::Side;
use proxy::conn::timeouts::Timeouts;

use super::Violation;
use super::driver::Driver;
use super::world::World;

/// What happened, as the world saw it: the oracle's own account of time.
#[derive(Debug, Clone)]
pub struct Record {
    /// When bytes last moved through the proxy, or the proxy's silence
    /// limit last changed (connected, the first FIN passed on).
    pub quiet_since: Instant,
    /// The side whose FIN the proxy passed on first.
    pub first_fin: Option<Side>,
    /// The backend accepted the connect.
    pub connected: bool,
    /// The backend refused it.
    pub refused: bool,
    /// The simulator told the machine to stop.
    pub stopped: bool,
}

impl Record {
    /// A connection whose connect began at `now`.
    pub fn new(now: Instant) -> Record {
        Record {
            quiet_since: now,
            first_fin: None,
            connected: false,
            refused: false,
            stopped: false,
        }
    }

    /// Takes note of an event the driver told the machine at `now`.
    pub fn note(&mut self, event: &Event, now: Instant) {
        match *event {
            Event::Got { .. } | Event::Wrote { .. } => self.quiet_since = now,
            Event::Connected => {
                self.connected = true;
                self.quiet_since = now;
            }
            Event::ConnectFailed => self.refused = true,
            Event::ShutDown(from) if self.first_fin.is_none() => {
                self.first_fin = Some(from);
                self.quiet_since = now;
            }
            Event::Stop => self.stopped = true,
            _ => {}
        }
    }

    /// The timeout the silence leads to now, and after how long.
    fn limit(&self, t: &Timeouts) -> (Ending, Duration) {
        match (self.connected, self.first_fin) {
            (false, _) => (Ending::ConnectTimeout, t.connect),
            (true, None) => (Ending::IdleTimeout, t.idle()),
            (true, Some(Side::Client)) => (Ending::FinTimeout, t.server_fin.min(t.idle())),
            (true, Some(Side::Backend)) => (Ending::FinTimeout, t.client_fin.min(t.idle())),
        }
    }
}

/// After every step: what the machine waits for matches what it would do
/// (else a level-triggered driver spins, or an edge-triggered one sleeps
/// forever), and its timer is armed, never later than its deadline.
pub fn step(driver: &Driver) -> Result<(), Violation> {
    let m = &driver.machine;
    if m.is_closed() {
        return Ok(());
    }
    for side in Side::BOTH {
        let wants = m.wants(side);
        let reads = m.op(side) == Some(Op::Read);
        let writes = matches!(m.op(side.other()), Some(Op::Write { .. }))
            || (m.phase() == Phase::Connecting && side == Side::Backend);
        if wants.read != reads || wants.write != writes {
            return Err(Violation::new(
                "interest and operation disagree",
                format!(
                    "the {side}: waits for {wants:?}, while the ops are up {:?}, down {:?}",
                    m.op(Side::Client),
                    m.op(Side::Backend)
                ),
            ));
        }
    }
    match (driver.alarm.armed(), m.deadline(&driver.timeouts)) {
        (None, Some(due)) => Err(Violation::new(
            "no timer for a deadline",
            format!("the connection is open with a deadline {due:?} and no timer armed"),
        )),
        (Some(armed), Some(due)) if armed > due => Err(Violation::new(
            "a timer armed late",
            format!("armed {:?} after the deadline", armed - due),
        )),
        _ => Ok(()),
    }
}

/// After an operation the world said could run: it returned something,
/// and the machine moved.
pub fn progress(before: &Machine, after: &Machine, event: Option<Event>) -> Result<(), Violation> {
    match event {
        None => Err(Violation::new(
            "a step without progress",
            format!("a ready operation did nothing, in {:?}", before.phase()),
        )),
        Some(event) if before == after => Err(Violation::new(
            "a step without progress",
            format!("{event:?} changed nothing in {before:?}"),
        )),
        Some(_) => Ok(()),
    }
}

/// The moment the machine closes, at `now`: the ending is one the world
/// allows, and a timeout came exactly when the silence reached its limit.
pub fn ending(
    driver: &Driver,
    world: &World,
    record: &Record,
    now: Instant,
) -> Result<(), Violation> {
    let m = &driver.machine;
    let Some(ending) = m.ending() else {
        return Ok(());
    };
    let [client, backend] = [world.peer(Side::Client), world.peer(Side::Backend)];
    let wrong = |why: String| {
        Err(Violation::new(
            "the wrong ending",
            format!("{ending:?}: {why}"),
        ))
    };
    match ending {
        Ending::Complete => {
            let delivered = [client.len, backend.len].map(|n| n as u64);
            let moved = [
                m.direction(Side::Client).bytes,
                m.direction(Side::Backend).bytes,
            ];
            if !client.finished_cleanly() || !backend.finished_cleanly() || moved != delivered {
                return wrong(format!(
                    "the peers sent {delivered:?} bytes and their FINs: {}, {}; the proxy moved {moved:?}",
                    client.finished_cleanly(),
                    backend.finished_cleanly()
                ));
            }
        }
        Ending::ClientReset if !client.reset_sent => {
            return wrong("the client did not reset".into());
        }
        Ending::BackendReset if !backend.reset_sent => {
            return wrong("the backend did not reset".into());
        }
        Ending::Stopped if !record.stopped => return wrong("nobody stopped it".into()),
        Ending::Unreachable if !record.refused => {
            return wrong("the backend did not refuse".into());
        }
        Ending::IdleTimeout | Ending::FinTimeout | Ending::ConnectTimeout => {
            return timeout(driver, world, record, ending, now);
        }
        _ => {}
    }
    Ok(())
}

/// A timeout: the right one for where the connection was, at the exact
/// time its silence reached the limit, with nothing the proxy could move.
fn timeout(
    driver: &Driver,
    world: &World,
    record: &Record,
    ending: Ending,
    now: Instant,
) -> Result<(), Violation> {
    let (expected, limit) = record.limit(&driver.timeouts);
    if ending != expected {
        let why = format!("{ending:?}, where the silence was a {expected:?}'s");
        return Err(Violation::new("the wrong ending", why));
    }
    let due = record.quiet_since + limit;
    if now < due {
        return Err(Violation::new(
            "a deadline fired early",
            format!("{ending:?} {:?} before its time", due - now),
        ));
    }
    if now > due {
        return Err(Violation::new(
            "a deadline fired late",
            format!("{ending:?} {:?} after its time", now - due),
        ));
    }
    if ending == Ending::ConnectTimeout {
        return Ok(()); // the client is not read before there is a backend
    }
    for from in Side::BOTH {
        let d = driver.machine.direction(from);
        let stuck_read = d.flow == Flow::Reading && world.readable(from);
        let stuck_write = d.flow.holds_bytes() && world.writable(from.other());
        if stuck_read || stuck_write {
            let why = format!(
                "the {from}'s direction could move ({:?}) when it timed out",
                d.flow
            );
            return Err(Violation::new("a hang", why));
        }
    }
    Ok(())
}

/// Once the run has settled: every peer still there saw one end, a FIN
/// after a complete relay and a reset after anything else.
pub fn end_of_run(driver: &Driver, world: &World, record: &Record) -> Result<(), Violation> {
    let clean = driver.machine.ending().is_some_and(|e| e.is_clean());
    for side in Side::BOTH {
        let peer = world.peer(side);
        if peer.reset_sent || (side == Side::Backend && !record.connected) {
            continue;
        }
        let ok = match clean {
            true => peer.eof_seen && !peer.rst_seen,
            false => peer.rst_seen,
        };
        if !ok {
            let saw = match (peer.eof_seen, peer.rst_seen) {
                (true, _) => "a FIN",
                (false, true) => "a reset",
                (false, false) => "no end",
            };
            let why = format!(
                "the relay ended {:?} and the {side} saw {saw}",
                driver.machine.ending()
            );
            let kind = match clean {
                true => "a complete relay not closed with FINs",
                false => "a reset not passed on as a reset",
            };
            return Err(Violation::new(kind, why));
        }
    }
    Ok(())
}
