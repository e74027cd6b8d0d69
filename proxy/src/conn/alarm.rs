//! When a driver arms its timer: the lazy re-arm rule every mode with a
//! timer store follows (the runtime's `Sleep` for the async relay, the
//! deadline heap of the states mode).
//!
//! A relay's deadline moves with every byte (`Machine::deadline`). Moving
//! the timer with it would cost a timer-store removal and insertion per
//! read. Instead the timer stays where it was armed, which is never later
//! than the deadline: when it fires, the machine compares the time with its
//! real deadline (`Machine::on_deadline`) and, if bytes moved since, the
//! timer is armed once more, for the remainder. Only a deadline that comes
//! *earlier* than the armed time (a half-close brings the shorter fin
//! limit) re-arms at once: a timer must never fire late.
//!
//! ```text
//!   armed    due      what the driver does
//!   none     t        arm at t
//!   a        t ≥ a    nothing: at a the machine says "not yet", then arm at t
//!   a        t < a    arm at t now (a shorter limit)
//!   any      none     disarm (closed)
//! ```

use std::time::Instant;

/// The time a driver's timer is armed for, if one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Alarm {
    armed: Option<Instant>,
}

impl Alarm {
    /// An alarm armed for `armed` (none: disarmed), for a driver whose
    /// timer remembers the time itself (the async relay's `Sleep`).
    pub fn armed_at(armed: Option<Instant>) -> Alarm {
        Alarm { armed }
    }

    /// Given the machine's deadline `due`, the time to arm the timer at
    /// now, if it must move (the table above); `None`: leave it.
    pub fn arm(&mut self, due: Option<Instant>) -> Option<Instant> {
        match (self.armed, due) {
            (Some(armed), Some(due)) if armed <= due => None,
            (_, Some(due)) => {
                self.armed = Some(due);
                Some(due)
            }
            (_, None) => {
                self.armed = None;
                None
            }
        }
    }

    /// The timer fired (or was dropped): nothing is armed any more.
    pub fn fired(&mut self) {
        self.armed = None;
    }

    /// The time armed, if any.
    pub fn armed(&self) -> Option<Instant> {
        self.armed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_timer_moves_only_to_come_earlier() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut alarm = Alarm::default();
        assert_eq!(alarm.arm(Some(at(600))), Some(at(600)), "none armed");
        assert_eq!(alarm.arm(Some(at(700))), None, "bytes moved: stays early");
        assert_eq!(alarm.arm(Some(at(30))), Some(at(30)), "a shorter limit");
        assert_eq!(alarm.armed(), Some(at(30)));
        alarm.fired();
        assert_eq!(alarm.arm(Some(at(45))), Some(at(45)), "re-armed once");
        assert_eq!(alarm.arm(None), None);
        assert_eq!(alarm.armed(), None, "closed: disarmed");
    }

    #[test]
    fn an_alarm_made_from_its_timers_time_follows_the_same_rule() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(Alarm::armed_at(Some(at(600))).arm(Some(at(700))), None);
        assert_eq!(
            Alarm::armed_at(Some(at(600))).arm(Some(at(30))),
            Some(at(30))
        );
        assert_eq!(Alarm::armed_at(None).arm(Some(at(45))), Some(at(45)));
        let mut closed = Alarm::armed_at(Some(at(600)));
        assert_eq!((closed.arm(None), closed.armed()), (None, None));
    }
}
