//! A seeded simulator for the relay's contract: one connection at a time,
//! driven through the very relay machine the proxy runs
//! (`proxy::conn::machine`), in a virtual world where every schedule a
//! real kernel could produce is a choice: a read that stops at one byte, a
//! FIN that arrives while the other side's queue is full, a reset during a
//! short write, a deadline that comes in the same instant as the last
//! byte. Real sockets on loopback visit few of these; a seed visits
//! hundreds, and the same seed visits the same ones again.
//!
//! ```text
//!   choices (a seed, or bytes) ─▶ each step, one of:
//!        the proxy runs a ready operation    (driver.rs: the machine's op, made on the world)
//!        a peer sends, ends, reads, pauses   (world.rs: checks each byte and each end it reads)
//!        the clock moves, at most to the armed timer, only while the proxy has nothing to do
//!        a stop; a snapshot of the machine written and read back
//!   every step ─▶ the oracle (oracle.rs): interest matches the ops, the timer is armed in time,
//!                 an operation moved the machine, an ending is one the world allows, at its time
//! ```
//!
//! A run ends when the connection is closed and both peers saw its end. A
//! failing run is a [`Failure`]: its [`Violation`], and a line that
//! replays it. [`search`] runs seeds until a budget of steps is spent,
//! and shrinks the schedule of the first failure it meets
//! ([`shrink`](shrink::shrink)) to a short one.

pub mod choices;
pub mod driver;
pub mod oracle;
pub mod shrink;
pub mod world;

use std::fmt;
use std::time::{Duration, Instant};

use proxy::conn::machine::{Ending, Event};
use proxy::conn::side::Side;
use proxy::conn::snapshot;
use proxy::conn::timeouts::Timeouts;

use choices::Choices;
use driver::{Bug, Driver};
use oracle::Record;
use world::{Closed, Leg, Peer, Plan, World};

/// A broken promise: which one (a short, fixed phrase, by which a shrunk
/// schedule is known to fail the same way), and the details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which promise.
    pub kind: &'static str,
    /// What was seen.
    pub detail: String,
}

impl Violation {
    /// A violation of `kind`.
    pub fn new(kind: &'static str, detail: impl Into<String>) -> Violation {
        Violation {
            kind,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

/// How a run goes.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Steps of free choice; then the run winds down: the peers finish
    /// their plans, the clock goes to each deadline, until the end.
    pub steps: usize,
    /// A bug planted in the driver, to see it caught.
    pub bug: Option<Bug>,
    /// Keep a line per step, to print with a failure.
    pub trace: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            steps: 400,
            bug: None,
            trace: false,
        }
    }
}

/// Steps a winding-down run may take before it counts as never ending.
const WIND_DOWN: usize = 20_000;

/// A run that broke a promise.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The promise.
    pub violation: Violation,
    /// At which step.
    pub step: usize,
    /// The steps before it, if traced.
    pub trace: Vec<String>,
}

/// A run that kept every promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Steps taken.
    pub steps: usize,
    /// How the connection ended.
    pub ending: Ending,
}

/// When the backend answers the connect, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Accept(Instant),
    Refuse(Instant),
    Never,
}

/// Something the proxy can do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// The connect's outcome is in.
    Answer,
    /// A hang-up to report.
    HangUp(Side),
    /// The machine's operation for the direction from this side.
    Op(Side),
}

/// One simulated connection.
struct Sim {
    world: World,
    driver: Driver,
    record: Record,
    answer: Answer,
    now: Instant,
    trace: Option<Vec<String>>,
}

/// Runs one connection on `choices`.
pub fn run(choices: &mut Choices, config: &Config) -> Result<Report, Failure> {
    let mut sim = Sim::new(choices, config);
    let mut steps = 0;
    let fail = |sim: &mut Sim, step, violation| Failure {
        violation,
        step,
        trace: sim.trace.take().unwrap_or_default(),
    };
    loop {
        steps += 1;
        if steps > config.steps + WIND_DOWN {
            let v = Violation::new(
                "no end",
                format!("still open after {steps} steps: {:?}", sim.driver.machine),
            );
            return Err(fail(&mut sim, steps, v));
        }
        if let Err(v) = sim.close_if_over() {
            return Err(fail(&mut sim, steps, v));
        }
        if sim.driver.closed && sim.settled() {
            if let Err(v) = oracle::end_of_run(&sim.driver, &sim.world, &sim.record) {
                return Err(fail(&mut sim, steps, v));
            }
            let ending = sim.driver.machine.outcome().ending;
            return Ok(Report { steps, ending });
        }
        let winding = steps > config.steps || choices.exhausted();
        let turned = sim
            .turn(choices, winding)
            .and_then(|()| oracle::step(&sim.driver));
        if let Err(v) = turned {
            return Err(fail(&mut sim, steps, v));
        }
    }
}

impl Sim {
    /// A connection's world, its peers' plans and its timeouts, from the
    /// first choices.
    fn new(c: &mut Choices, config: &Config) -> Sim {
        // The one reading of the real clock: only differences matter after it.
        let t0 = Instant::now();
        let ms =
            |c: &mut Choices, low, high| Duration::from_millis(u64::from(c.between(low, high)));
        let mut timeouts = Timeouts {
            connect: ms(c, 5, 60),
            client: ms(c, 20, 300),
            server: ms(c, 20, 300),
            client_fin: ms(c, 5, 200),
            server_fin: ms(c, 5, 200),
            ..Timeouts::default()
        };
        if c.chance(10) {
            timeouts.tunnel = Some(ms(c, 30, 400));
        }
        let capacity = if c.chance(10) {
            4096
        } else {
            c.between(1, 24) as usize
        };
        let peers = [Side::Client, Side::Backend].map(|_| peer(c));
        let legs = [0, 1].map(|_| Leg::new(c.between(1, 40) as usize, c.between(1, 40) as usize));
        let at = |c: &mut Choices| t0 + Duration::from_micros(u64::from(c.below(8_000)));
        let answer = match c.below(20) {
            0..=16 => Answer::Accept(at(c)),
            17..=18 => Answer::Refuse(at(c)),
            _ => Answer::Never,
        };
        let mut driver = Driver::new(capacity, timeouts, config.bug, t0);
        driver.rearm();
        Sim {
            world: World { peers, legs },
            driver,
            record: Record::new(t0),
            answer,
            now: t0,
            trace: config.trace.then(Vec::new),
        }
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if let Some(trace) = &mut self.trace {
            trace.push(what());
        }
    }

    /// The machine just closed: its ending is checked, and the driver
    /// closes the legs.
    fn close_if_over(&mut self) -> Result<(), Violation> {
        if !self.driver.machine.is_closed() || self.driver.closed {
            return Ok(());
        }
        oracle::ending(&self.driver, &self.world, &self.record, self.now)?;
        self.driver.close(&mut self.world, self.record.connected);
        let ending = self.driver.machine.ending();
        self.note(|| format!("closed: {ending:?}"));
        Ok(())
    }

    /// Whether every peer still there has read all and seen the close (a
    /// peer that read a FIN passed on earlier may see a reset after it).
    fn settled(&self) -> bool {
        Side::BOTH.into_iter().all(|side| {
            let (peer, leg) = (self.world.peer(side), self.world.leg(side));
            let absent = side == Side::Backend && !self.record.connected;
            let seen = match leg.closed {
                Some(Closed::Reset) => peer.rst_seen,
                Some(Closed::Fin) => peer.eof_seen,
                None => false,
            };
            absent || peer.reset_sent || (leg.outbound.is_empty() && seen)
        })
    }

    /// What the proxy can do now, in a fixed order.
    fn work(&self) -> Vec<Work> {
        let mut work = Vec::new();
        let due = match self.answer {
            Answer::Accept(at) | Answer::Refuse(at) => self.now >= at,
            Answer::Never => false,
        };
        if self.driver.connecting() && due {
            work.push(Work::Answer);
        }
        if let Some(side) = self.driver.hang_up_due(&self.world) {
            work.push(Work::HangUp(side));
        }
        for from in Side::BOTH {
            if self.driver.ready(&self.world, from) {
                work.push(Work::Op(from));
            }
        }
        work
    }

    /// One step: the proxy's work, a peer's move, the clock, or a rarity.
    fn turn(&mut self, c: &mut Choices, winding: bool) -> Result<(), Violation> {
        let work = self.work();
        if winding {
            if let Some(&first) = work.first() {
                return self.work_on(first, c);
            }
            if self.wind_peers()? {
                return Ok(());
            }
            return self.advance(c, true);
        }
        match c.below(10) {
            0..=3 if !work.is_empty() => {
                let pick = work[c.below(work.len() as u32) as usize];
                self.work_on(pick, c)
            }
            0..=5 => self.peer_move(Side::Client, c),
            6..=7 => self.peer_move(Side::Backend, c),
            8 if work.is_empty() => self.advance(c, false),
            8 => self.work_on(work[0], c),
            _ => self.rarity(c),
        }
    }

    fn work_on(&mut self, work: Work, c: &mut Choices) -> Result<(), Violation> {
        let now = self.now;
        let event = match work {
            Work::Answer => {
                let event = match self.answer {
                    Answer::Refuse(_) => Event::ConnectFailed,
                    _ => Event::Connected,
                };
                self.driver.machine.on(event, now);
                Some(event)
            }
            Work::HangUp(side) => {
                let as_error = c.chance(50);
                self.driver.tell_hang_up(&self.world, side, as_error, now);
                None
            }
            Work::Op(from) => {
                let before = self.driver.machine;
                let event = self.driver.step(&mut self.world, from, c, now);
                oracle::progress(&before, &self.driver.machine, event)?;
                event
            }
        };
        if let Some(event) = event {
            self.record.note(&event, now);
        }
        self.note(|| format!("proxy: {work:?} -> {event:?}"));
        self.driver.rearm();
        Ok(())
    }

    /// A peer does one thing it may: send, end as planned, read, pause.
    fn peer_move(&mut self, side: Side, c: &mut Choices) -> Result<(), Violation> {
        if side == Side::Backend && !self.record.connected {
            return Ok(());
        }
        let moved = match c.below(5) {
            0 => self.world.peer_send(side, c.between(1, 64) as usize),
            1 => self.world.peer_end(side),
            2 | 3 => self.world.peer_read(side, c.between(1, 64) as usize)?,
            _ => {
                let peer = &mut self.world.peers[side.index()];
                peer.paused = !peer.paused && c.chance(60);
                true
            }
        };
        if moved {
            let peer = self.world.peer(side).clone();
            self.note(|| {
                format!(
                    "{side}: sent {}, received {}, {peer:?}",
                    peer.sent, peer.received
                )
            });
        }
        Ok(())
    }

    /// Winding down: each peer finishes what it planned and reads all.
    fn wind_peers(&mut self) -> Result<bool, Violation> {
        for side in Side::BOTH {
            if side == Side::Backend && !self.record.connected {
                continue;
            }
            self.world.peers[side.index()].paused = false;
            let moved = self.world.peer_send(side, usize::MAX)
                || self.world.peer_end(side)
                || self.world.peer_read(side, usize::MAX)?;
            if moved {
                self.note(|| format!("{side}: winding down"));
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The clock moves, only while the proxy has nothing to do (a driver
    /// sleeps only then): by a random step, or (`to_timer`) to the armed
    /// timer, never past it nor past the connect's answer.
    fn advance(&mut self, c: &mut Choices, to_timer: bool) -> Result<(), Violation> {
        let armed = self.driver.alarm.armed();
        let mut next = match to_timer {
            true => armed.unwrap_or(self.now),
            false => self.now + Duration::from_micros(u64::from(c.between(1, 30_000))),
        };
        if let Some(armed) = armed {
            next = next.min(armed);
        }
        if let (true, Answer::Accept(at) | Answer::Refuse(at)) =
            (self.driver.connecting(), self.answer)
        {
            if at > self.now {
                next = next.min(at);
            }
        }
        self.now = next.max(self.now);
        if armed == Some(self.now) {
            self.driver.on_alarm(self.now);
        }
        let (now, machine) = (self.now, self.driver.machine);
        self.note(|| format!("clock: {now:?}, {machine:?}"));
        Ok(())
    }

    /// A stop, rarely; otherwise the machine written as a snapshot and
    /// read back, which must give the same machine.
    fn rarity(&mut self, c: &mut Choices) -> Result<(), Violation> {
        if c.chance(1) && !self.driver.machine.is_closed() {
            self.driver.machine.on(Event::Stop, self.now);
            self.record.note(&Event::Stop, self.now);
            self.note(|| "stop".into());
            return Ok(());
        }
        let written = snapshot::write(&self.driver.machine, self.now);
        match snapshot::read(&written, self.now) {
            Ok(back) if back == self.driver.machine => Ok(()),
            Ok(back) => Err(Violation::new(
                "a snapshot that reads back different",
                format!("{back:?}"),
            )),
            Err(e) => Err(Violation::new(
                "a snapshot that does not read back",
                e.to_string(),
            )),
        }
    }
}

/// A peer's plan: how much it sends, and how it ends.
fn peer(c: &mut Choices) -> Peer {
    let len = match c.chance(5) {
        true => c.between(0, 5000),
        false => c.between(0, 120),
    } as usize;
    let plan = match c.below(10) {
        0..=6 => Plan::Fin,
        7..=8 => Plan::Reset {
            after: c.between(0, len as u32) as usize,
        },
        _ => Plan::Silent,
    };
    Peer::new(len, plan)
}

/// What [`search`] spends.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The first seed; the others follow it.
    pub first_seed: u64,
    /// Steps to take in all, over as many runs as that takes.
    pub steps: u64,
    /// How each run goes.
    pub config: Config,
}

/// The first failure [`search`] met, shrunk.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its seed.
    pub seed: u64,
    /// How it failed.
    pub failure: Failure,
    /// The steps of its run.
    pub seed_steps: usize,
    /// The shrunk schedule, failing the same way.
    pub schedule: Vec<u8>,
    /// The steps of the shrunk run.
    pub shrunk_steps: usize,
    /// A command that replays the seed.
    pub replay: String,
    /// A command that replays the shrunk schedule, with its trace.
    pub replay_shrunk: String,
}

/// What a [`search`] did.
#[derive(Debug, Clone)]
pub struct Searched {
    /// Runs made.
    pub runs: u64,
    /// Steps taken in all.
    pub steps: u64,
    /// The first failure, if one came.
    pub found: Option<Box<Found>>,
    /// How many runs ended each way, by `Ending::ALL`'s order.
    pub ended: [u64; Ending::ALL.len()],
}

impl Searched {
    /// Each ending met, with how many runs ended so.
    pub fn endings(&self) -> impl Iterator<Item = (Ending, u64)> + '_ {
        Ending::ALL
            .into_iter()
            .zip(self.ended)
            .filter(|&(_, n)| n > 0)
    }
}

/// Runs seeds from `budget.first_seed` until `budget.steps` are spent or
/// one fails; a failure is shrunk, with a replay line for each form.
pub fn search(budget: &Budget) -> Searched {
    let (mut runs, mut steps) = (0u64, 0u64);
    let mut ended = [0u64; Ending::ALL.len()];
    let mut seed = budget.first_seed;
    while steps < budget.steps {
        let mut choices = Choices::seeded(seed);
        runs += 1;
        match run(&mut choices, &budget.config) {
            Ok(report) => {
                steps += report.steps as u64;
                if let Some(i) = Ending::ALL.iter().position(|&e| e == report.ending) {
                    ended[i] += 1;
                }
            }
            Err(failure) => {
                steps += failure.step as u64;
                let found = shrink::found(seed, failure, choices.used(), &budget.config);
                return Searched {
                    runs,
                    steps,
                    found: Some(Box::new(found)),
                    ended,
                };
            }
        }
        seed = seed.wrapping_add(1);
    }
    Searched {
        runs,
        steps,
        found: None,
        ended,
    }
}

/// The command that replays a run: `--seed N` or `--schedule HEX`.
pub fn replay_line(what: &str, config: &Config) -> String {
    let bug = config
        .bug
        .map_or(String::new(), |b| format!(" --bug {}", b.name()));
    format!(
        "cargo run -q -p testkit --bin relay-sim -- {what} --steps {}{bug}",
        config.steps
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget CI spends: over five million steps, a few seconds.
    const STEPS: u64 = 5_000_000;

    #[test]
    fn five_million_steps_of_seeds_keep_every_promise() {
        let budget = Budget {
            first_seed: 0,
            steps: STEPS,
            config: Config::default(),
        };
        let searched = search(&budget);
        if let Some(found) = &searched.found {
            panic!(
                "seed {} broke a promise at step {}: {}\n  replay: {}\n  shrunk: {}",
                found.seed,
                found.seed_steps,
                found.failure.violation,
                found.replay,
                found.replay_shrunk
            );
        }
        assert!(searched.steps >= STEPS, "{}", searched.steps);
        let met: Vec<Ending> = searched.endings().map(|(e, _)| e).collect();
        assert_eq!(
            met,
            Ending::ALL,
            "every ending is reached: {:?}",
            searched.ended
        );
        println!(
            "{} runs, {} steps: {:?}",
            searched.runs, searched.steps, searched.ended
        );
    }

    #[test]
    fn every_planted_bug_is_caught_shrunk_and_replayable() {
        let expected: [(Bug, &[&str]); 3] = [
            (Bug::FinBeforeFlush, &["a FIN that was not earned"]),
            (
                Bug::ResetAsFin,
                &[
                    "a FIN that was not earned",
                    "a reset not passed on as a reset",
                ],
            ),
            (
                Bug::LateRearm,
                &["a timer armed late", "a deadline fired late"],
            ),
        ];
        for (bug, kinds) in expected {
            let config = Config {
                bug: Some(bug),
                ..Config::default()
            };
            let budget = Budget {
                first_seed: 0,
                steps: 1_000_000,
                config,
            };
            let searched = search(&budget);
            let found = searched
                .found
                .unwrap_or_else(|| panic!("{bug:?} not caught in {} steps", searched.steps));
            let kind = found.failure.violation.kind;
            assert!(
                kinds.contains(&kind),
                "{bug:?}: {}",
                found.failure.violation
            );
            let seed = format!("--seed {} --steps 400 --bug {}", found.seed, bug.name());
            assert!(found.replay.ends_with(&seed), "{}", found.replay);
            assert!(
                found.replay_shrunk.contains("--schedule "),
                "{}",
                found.replay_shrunk
            );
            assert!(
                found.shrunk_steps <= found.seed_steps,
                "{bug:?} shrank to more steps"
            );
            let again = run(&mut Choices::given(&found.schedule), &config);
            let again = again.expect_err("the shrunk schedule fails again");
            assert_eq!(again.violation.kind, kind, "{bug:?}: the same way");
            println!(
                "{bug:?}: seed {} at step {}, shrunk to {} steps: {}",
                found.seed, found.seed_steps, found.shrunk_steps, found.failure.violation
            );
        }
    }

    #[test]
    fn the_same_seed_is_the_same_run() {
        for seed in [3, 77, 1 << 40] {
            let once = run(&mut Choices::seeded(seed), &Config::default());
            let twice = run(&mut Choices::seeded(seed), &Config::default());
            assert_eq!(once.ok(), twice.ok(), "seed {seed}");
        }
    }
}
