//! How far a handover of established connections has come: one tally, kept
//! by the thread that moves them (the old process's "upgrade" thread) or
//! adopts them (the new process's "adopt" thread), read by SIGQUIT's dump
//! on the main thread.
//!
//! A process takes part in at most one handover each way in its life: it
//! adopts once (it was started by an upgrade) and hands over once (it is
//! replaced), so one record per way, for the whole process, is all there
//! is to know; a static, since nothing else in the process owns the two
//! threads.

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

/// What a handover came to, or has come to so far: connections by fate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Batches sent (or received).
    pub batches: u64,
    /// Connections in them.
    pub sent: u64,
    /// Connections the new process adopted.
    pub adopted: u64,
    /// Connections it refused, or never answered for: the old process
    /// resumes them.
    pub refused: u64,
}

/// Where a handover stands (the values of a record's `stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandoverStage {
    /// None began.
    Idle = 0,
    /// Batches go (or come) now.
    Running = 1,
    /// The peer said its last word, or is gone.
    Over = 2,
}

/// One way's record: its stage, its peer, its tally. Each field is written
/// by one thread only; a reader may see a batch half counted, which a dump
/// line can live with.
struct WayRecord {
    stage: AtomicU8,
    peer: AtomicU32,
    batches: AtomicU64,
    sent: AtomicU64,
    adopted: AtomicU64,
    refused: AtomicU64,
}

impl WayRecord {
    const fn new() -> WayRecord {
        WayRecord {
            stage: AtomicU8::new(HandoverStage::Idle as u8),
            peer: AtomicU32::new(0),
            batches: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            adopted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn stage(&self) -> HandoverStage {
        match self.stage.load(Ordering::Relaxed) {
            0 => HandoverStage::Idle,
            1 => HandoverStage::Running,
            _ => HandoverStage::Over,
        }
    }

    fn tally(&self) -> Tally {
        Tally {
            batches: self.batches.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            adopted: self.adopted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

/// Which way a handover goes, seen from this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// This process hands its connections over to a new one.
    Out,
    /// This process adopts an old one's connections.
    In,
}

static OUT: WayRecord = WayRecord::new();
static IN: WayRecord = WayRecord::new();

fn record(way: Way) -> &'static WayRecord {
    match way {
        Way::Out => &OUT,
        Way::In => &IN,
    }
}

/// A handover with `peer` begins.
pub fn begin(way: Way, peer: u32) {
    let record = record(way);
    record.peer.store(peer, Ordering::Relaxed);
    record
        .stage
        .store(HandoverStage::Running as u8, Ordering::Relaxed);
}

/// A batch of `connections` sent (or received), their fates not known yet.
pub fn sent(way: Way, connections: u64) {
    let record = record(way);
    record.batches.fetch_add(1, Ordering::Relaxed);
    record.sent.fetch_add(connections, Ordering::Relaxed);
}

/// A batch's fates counted.
pub fn fates(way: Way, adopted: u64, refused: u64) {
    let record = record(way);
    record.adopted.fetch_add(adopted, Ordering::Relaxed);
    record.refused.fetch_add(refused, Ordering::Relaxed);
}

/// The handover is over; its tally.
pub fn end(way: Way) -> Tally {
    let record = record(way);
    record
        .stage
        .store(HandoverStage::Over as u8, Ordering::Relaxed);
    record.tally()
}

/// What this process handed over, said once as it exits (the thread that
/// moved the connections may not outlive it to say so): `None` if nothing
/// began.
pub fn handed_over() -> Option<String> {
    let record = record(Way::Out);
    if record.stage() == HandoverStage::Idle {
        return None;
    }
    let (peer, t) = (record.peer.load(Ordering::Relaxed), record.tally());
    Some(format!(
        "upgrade: {} connections moved to pid {peer} in {} batches, {} refused and relayed here",
        t.adopted, t.batches, t.refused
    ))
}

/// The dump's lines: one per way a handover began.
pub fn lines() -> Vec<String> {
    let mut lines = Vec::new();
    for way in [Way::Out, Way::In] {
        let record = record(way);
        let (stage, peer) = (record.stage(), record.peer.load(Ordering::Relaxed));
        let what = match (way, stage) {
            (_, HandoverStage::Idle) => continue,
            (Way::Out, HandoverStage::Running) => "handing the established connections over to",
            (Way::Out, HandoverStage::Over) => "handed the established connections over to",
            (Way::In, HandoverStage::Running) => "adopting established connections from",
            (Way::In, HandoverStage::Over) => "adopted established connections from",
        };
        let now = if stage == HandoverStage::Running {
            " so far"
        } else {
            ""
        };
        lines.push(format!(
            "SIGQUIT: upgrade: {what} pid {peer}: {}{now}",
            tally_text(record.tally())
        ));
    }
    lines
}

/// "6 connections in 2 batches: 3 adopted, 1 refused, 2 awaiting their fate"
fn tally_text(t: Tally) -> String {
    let waiting = t.sent.saturating_sub(t.adopted + t.refused);
    let batches = if t.batches == 1 { "batch" } else { "batches" };
    format!(
        "{} connections in {} {batches}: {} adopted, {} refused, {waiting} awaiting their fate",
        t.sent, t.batches, t.adopted, t.refused
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // The one test of the statics (tests run on threads of one process).
    #[test]
    fn a_handover_shows_in_the_dump_from_its_start_to_its_end() {
        assert!(lines().is_empty(), "no handover began");
        assert_eq!(handed_over(), None);
        begin(Way::Out, 42);
        sent(Way::Out, 4);
        fates(Way::Out, 3, 1);
        sent(Way::Out, 2);
        let running = "SIGQUIT: upgrade: handing the established connections over to pid 42: 6 \
                       connections in 2 batches: 3 adopted, 1 refused, 2 awaiting their fate so far";
        assert_eq!(lines(), [running]);
        fates(Way::Out, 2, 0);
        let all = Tally {
            batches: 2,
            sent: 6,
            adopted: 5,
            refused: 1,
        };
        assert_eq!(end(Way::Out), all);
        let over = "SIGQUIT: upgrade: handed the established connections over to pid 42: 6 \
                    connections in 2 batches: 5 adopted, 1 refused, 0 awaiting their fate";
        assert_eq!(lines(), [over]);
        let said =
            "upgrade: 5 connections moved to pid 42 in 2 batches, 1 refused and relayed here";
        assert_eq!(handed_over().as_deref(), Some(said));
    }
}
