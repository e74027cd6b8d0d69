//! Interest follows the machine: which epoll events each socket asks for,
//! from what the relay machine waits for on it (`Machine::wants`), and the
//! `epoll_ctl` calls that keep the kernel's set in step.
//!
//! Level-triggered epoll reports a socket *as long as* the condition holds,
//! on every `epoll_wait`. So a socket must be in the read interest set only
//! while the relay means to read it: one left there while its direction
//! waits for the other side (backpressure), or after its FIN was read, is
//! reported at once, every time, and the loop spins at 100% CPU without
//! moving a byte: the seed-era trap. The rules:
//!
//! | the machine wants of the socket | because | asks for |
//! |---|---|---|
//! | `read` | the direction *from* it is `Reading` | `EPOLLIN | EPOLLRDHUP` |
//! | `write` | the direction *to* it holds bytes (`Writing`, `Draining`), or it is the backend while `Connecting` (the connect's outcome) | `EPOLLOUT` |
//! | nothing | the client while `Connecting`, a socket whose FIN was read | nothing |
//!
//! A socket asking for nothing stays in the set with no events: epoll still
//! reports `EPOLLERR` and `EPOLLHUP` (they cannot be masked), which is how a
//! reset from a side whose FIN was already read is heard. But once a socket
//! has hung up (both directions shut), `EPOLLHUP` is a level that never
//! clears, so a socket that has hung up and asks for nothing leaves the set
//! (`EPOLL_CTL_DEL`) until it asks again: the blocking relay's rule for
//! `poll(2)`, where the same hang-up has the same effect.
//!
//! The edge-triggered runtime registers each socket once for everything and
//! never touches the set again; this is what level-triggering costs instead
//! (docs/STATES.md counts the calls).

use std::os::fd::AsFd;

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};

use crate::conn::machine::Wants;

/// Where one socket stands in the epoll set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Registered {
    /// Not in the set (not yet, or out after a hang-up).
    #[default]
    Absent,
    /// In the set, asking for these events.
    Asking(EpollFlags),
}

/// The events a socket asks for when the machine `wants` this of it.
pub fn wanted(wants: Wants) -> EpollFlags {
    let mut flags = EpollFlags::empty();
    if wants.read {
        flags |= EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
    }
    if wants.write {
        flags |= EpollFlags::EPOLLOUT;
    }
    flags
}

/// Where a socket standing at `now` should stand, asking for `wanted`: in
/// the set once it asks for anything, out of it only before that or once
/// it has hung up with nothing to ask (module docs).
pub fn target(now: Registered, wanted: EpollFlags, hung_up: bool) -> Registered {
    match now {
        _ if !wanted.is_empty() => Registered::Asking(wanted),
        Registered::Asking(_) if !hung_up => Registered::Asking(EpollFlags::empty()),
        _ => Registered::Absent,
    }
}

/// Moves `fd` from `now` to `to` in `epoll` (ADD, MOD or DEL; nothing if
/// they are the same), with `token` for its reports.
pub fn sync(
    epoll: &Epoll,
    fd: impl AsFd,
    token: u64,
    now: Registered,
    to: Registered,
) -> nix::Result<Registered> {
    match (now, to) {
        (now, to) if now == to => {}
        (Registered::Absent, Registered::Asking(flags)) => {
            epoll.add(fd, EpollEvent::new(flags, token))?;
        }
        (Registered::Asking(_), Registered::Asking(flags)) => {
            epoll.modify(fd, &mut EpollEvent::new(flags, token))?;
        }
        (Registered::Asking(_), Registered::Absent) => epoll.delete(fd)?,
        (Registered::Absent, Registered::Absent) => {}
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: EpollFlags = EpollFlags::EPOLLIN.union(EpollFlags::EPOLLRDHUP);
    const WRITE: EpollFlags = EpollFlags::EPOLLOUT;

    #[test]
    fn each_want_is_its_events_and_nothing_is_asked_unwanted() {
        let want = |read, write| wanted(Wants { read, write });
        assert_eq!(want(true, false), READ);
        assert_eq!(want(false, true), WRITE);
        assert_eq!(want(true, true), READ | WRITE);
        // Backpressure, a connecting client, a side whose FIN was read.
        assert!(want(false, false).is_empty());
    }

    /// What the machine wants, phase by phase, is what this mode asks.
    #[test]
    fn the_machine_asks_for_the_connect_report_then_for_bytes() {
        use crate::conn::machine::{Event, Machine};
        use crate::conn::side::Side;
        let t0 = std::time::Instant::now();
        let mut m = Machine::accepted(t0);
        m.on(Event::ConnectStarted, t0);
        assert_eq!(wanted(m.wants(Side::Backend)), WRITE);
        assert!(wanted(m.wants(Side::Client)).is_empty(), "not read yet");
        m.on(Event::Connected, t0);
        assert_eq!(wanted(m.wants(Side::Client)), READ);
        m.on(
            Event::Got {
                from: Side::Client,
                n: 3,
                fin_follows: false,
            },
            t0,
        );
        assert!(wanted(m.wants(Side::Client)).is_empty(), "backpressure");
        assert_eq!(wanted(m.wants(Side::Backend)), READ | WRITE);
    }

    #[test]
    fn a_socket_with_nothing_to_ask_stays_to_hear_a_reset_until_it_hangs_up() {
        let none = EpollFlags::empty();
        let absent = Registered::Absent;
        let asking = Registered::Asking(READ);
        assert_eq!(target(absent, none, false), absent, "not in before it asks");
        assert_eq!(target(absent, READ, false), asking);
        assert_eq!(target(asking, none, false), Registered::Asking(none));
        assert_eq!(target(asking, none, true), absent, "hung up: out");
        assert_eq!(
            target(absent, WRITE, true),
            Registered::Asking(WRITE),
            "asks again"
        );
    }

    #[test]
    fn sync_makes_one_call_per_change_and_none_without_one() {
        let epoll = Epoll::new(nix::sys::epoll::EpollCreateFlags::EPOLL_CLOEXEC).expect("epoll");
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let asking =
            sync(&epoll, &a, 7, Registered::Absent, Registered::Asking(WRITE)).expect("add");
        let mut events = [EpollEvent::empty(); 4];
        assert_eq!(epoll.wait(&mut events, 0u8).expect("wait"), 1);
        assert_eq!(events[0].data(), 7);
        // No events asked: nothing reported (a socket pair does not hang up).
        let quiet = sync(
            &epoll,
            &a,
            7,
            asking,
            Registered::Asking(EpollFlags::empty()),
        )
        .expect("mod");
        assert_eq!(epoll.wait(&mut events, 0u8).expect("wait"), 0);
        let out = sync(&epoll, &a, 7, quiet, Registered::Absent).expect("del");
        assert_eq!(out, Registered::Absent);
        // DEL of a socket not in the set would fail: nothing is called.
        assert_eq!(
            sync(&epoll, &a, 7, out, Registered::Absent),
            Ok(Registered::Absent)
        );
    }
}
