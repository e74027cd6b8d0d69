//! The simulated driver: what a real driver does with the relay machine
//! (ask for the next operation, make the call, tell the machine what it
//! returned, keep a timer by the alarm's rule, close with FINs or resets),
//! done against the virtual world instead of sockets, so that any schedule
//! can be tried. It makes each call only when the world says the socket is
//! ready, as every real driver waits for readiness first.
//!
//! A [`Bug`] makes it break the contract on purpose, the way a driver
//! could: the simulator's own test shows that each is caught.

use std::time::Instant;

use proxy::conn::alarm::Alarm;
use proxy::conn::machine::{Event, Machine, Op, Phase};
use proxy::conn::side::Side;
use proxy::conn::timeouts::Timeouts;

use super::choices::Choices;
use super::world::{Closed, World};

/// A planted bug: a driver that breaks the contract one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// After writing the bytes a FIN follows, it passes the FIN on at once,
    /// whether or not the write took every byte.
    FinBeforeFlush,
    /// It closes every connection with FINs, a cut one too.
    ResetAsFin,
    /// When its timer fires before a deadline that bytes pushed back, it
    /// re-arms for a whole limit from now, not for the deadline.
    LateRearm,
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 3] = [Bug::FinBeforeFlush, Bug::ResetAsFin, Bug::LateRearm];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Bug::FinBeforeFlush => "fin-before-flush",
            Bug::ResetAsFin => "reset-as-fin",
            Bug::LateRearm => "late-rearm",
        }
    }

    /// The bug named `name`.
    pub fn parse(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// The simulated driver of one connection.
#[derive(Debug, Clone)]
pub struct Driver {
    /// The machine it drives.
    pub machine: Machine,
    /// Its timer, by the alarm's rule.
    pub alarm: Alarm,
    /// The timeouts it runs under.
    pub timeouts: Timeouts,
    /// Per direction (by source), its buffer.
    buffers: [Vec<u8>; 2],
    /// Per side, a hang-up already told to the machine.
    told_hang_up: [bool; 2],
    /// It closed both legs.
    pub closed: bool,
    bug: Option<Bug>,
}

impl Driver {
    /// A driver whose buffers hold `capacity` bytes, its backend connecting.
    pub fn new(capacity: usize, timeouts: Timeouts, bug: Option<Bug>, now: Instant) -> Driver {
        let mut machine = Machine::accepted(now);
        machine.on(Event::ConnectStarted, now);
        Driver {
            machine,
            alarm: Alarm::default(),
            timeouts,
            buffers: [vec![0; capacity.max(1)], vec![0; capacity.max(1)]],
            told_hang_up: [false; 2],
            closed: false,
            bug,
        }
    }

    /// Whether the machine's operation for the direction from `from` can
    /// run now (a shutdown always can).
    pub fn ready(&self, world: &World, from: Side) -> bool {
        match self.machine.op(from) {
            Some(Op::Read) => world.readable(from),
            Some(Op::Write { .. }) => world.writable(from.other()),
            Some(Op::Shutdown) => true,
            None => false,
        }
    }

    /// A hang-up the kernel would report and the machine was not told of:
    /// a reset peer, or a socket shut both ways.
    pub fn hang_up_due(&self, world: &World) -> Option<Side> {
        if self.machine.is_closed() {
            return None;
        }
        Side::BOTH.into_iter().find(|&side| {
            let leg = world.leg(side);
            let hung = leg.peer_reset || (leg.outbound_fin && leg.inbound_fin);
            hung && !self.told_hang_up[side.index()]
        })
    }

    /// Tells the machine of the hang-up of `side`: with the error the
    /// kernel reports beside it (a reset), as EPOLLERR is, or as a bare
    /// hang-up; `as_error` picks.
    pub fn tell_hang_up(&mut self, world: &World, side: Side, as_error: bool, now: Instant) {
        self.told_hang_up[side.index()] = true;
        let event = match world.leg(side).peer_reset && as_error {
            true => Event::Broke(side),
            false => Event::HungUp(side),
        };
        self.machine.on(event, now);
    }

    /// Runs the operation for the direction from `from` (it must be ready):
    /// the call, then the event. Returns the event told.
    pub fn step(
        &mut self,
        world: &mut World,
        from: Side,
        c: &mut Choices,
        now: Instant,
    ) -> Option<Event> {
        let event = match self.machine.op(from)? {
            Op::Read => self.read(world, from, c),
            Op::Write {
                start,
                end,
                fin_follows,
            } => self.write(world, from, (start as usize, end as usize, fin_follows), c),
            Op::Shutdown => Some(Event::shut(from, world.shutdown(from.other()))),
        }?;
        self.machine.on(event, now);
        Some(event)
    }

    fn read(&mut self, world: &mut World, from: Side, c: &mut Choices) -> Option<Event> {
        let buffer = &mut self.buffers[from.index()];
        let short = match c.chance(30) {
            true => c.between(1, buffer.len() as u32) as usize,
            false => buffer.len(),
        };
        let result = world.read(from, buffer, short);
        // A driver knows the FIN follows only sometimes (EPOLLRDHUP seen, a
        // read that came back short); it never thinks so wrongly.
        let fin_follows = world.fin_is_next(from) && !c.chance(20);
        Event::read(from, result, fin_follows)
    }

    fn write(
        &mut self,
        world: &mut World,
        from: Side,
        (start, end, fin_follows): (usize, usize, bool),
        c: &mut Choices,
    ) -> Option<Event> {
        let to = from.other();
        let short = match c.chance(30) {
            true => c.between(1, (end - start) as u32) as usize,
            false => end - start,
        };
        let result = world.write(to, &self.buffers[from.index()][start..end], short);
        if self.bug == Some(Bug::FinBeforeFlush) && fin_follows && result.is_ok() {
            let _ = world.shutdown(to);
        }
        Event::wrote(from, result)
    }

    /// The armed time came (`now` is it): the machine looks at its real
    /// deadline, and the timer is armed again if the connection lives.
    pub fn on_alarm(&mut self, now: Instant) {
        self.alarm.fired();
        self.machine.on_deadline(now, &self.timeouts);
        if self.bug == Some(Bug::LateRearm) && !self.machine.is_closed() {
            // The bug: a whole limit from now, as if nothing had moved.
            let limit = self.machine.phase().limit(&self.timeouts);
            if let Some(late) = limit.and_then(|l| now.checked_add(l)) {
                let _ = self.alarm.arm(Some(late));
                return;
            }
        }
        self.rearm();
    }

    /// Arms the timer by the alarm's rule (conn/alarm.rs).
    pub fn rearm(&mut self) {
        let _ = self.alarm.arm(self.machine.deadline(&self.timeouts));
    }

    /// Closes both legs as the machine's ending says: FINs after a complete
    /// relay, resets after anything else. A backend that never connected
    /// has no leg to close.
    pub fn close(&mut self, world: &mut World, backend_connected: bool) {
        let clean = self.machine.ending().is_some_and(|e| e.is_clean());
        let how = match clean || self.bug == Some(Bug::ResetAsFin) {
            true => Closed::Fin,
            false => Closed::Reset,
        };
        world.close(Side::Client, how);
        if backend_connected {
            world.close(Side::Backend, how);
        }
        self.closed = true;
    }

    /// Whether the machine is still connecting.
    pub fn connecting(&self) -> bool {
        self.machine.phase() == Phase::Connecting
    }
}
