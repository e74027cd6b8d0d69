//! Interest follows the state: which epoll events each socket asks for in
//! each state of the machine, and the `epoll_ctl` calls that keep the
//! kernel's set in step.
//!
//! Level-triggered epoll reports a socket *as long as* the condition holds,
//! on every `epoll_wait`. So a socket must be in the read interest set only
//! while the relay means to read it: one left there while its direction
//! waits for the other side (backpressure), or after its FIN was read, is
//! reported at once, every time, and the loop spins at 100% CPU without
//! moving a byte: the seed-era trap. The rules:
//!
//! | the socket's state | asks for |
//! |---|---|
//! | the direction *from* it is `Reading` | `EPOLLIN | EPOLLRDHUP` |
//! | the direction *to* it holds bytes (`Writing`, `Draining`) | `EPOLLOUT` |
//! | the backend, while `Connecting` | `EPOLLOUT` (the connect's outcome) |
//! | the client, while `Connecting` | nothing: not in the set yet |
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

use super::machine::{Flow, State};
use crate::conn::side::Side;

/// Where one socket stands in the epoll set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Registered {
    /// Not in the set (not yet, or out after a hang-up).
    #[default]
    Absent,
    /// In the set, asking for these events.
    Asking(EpollFlags),
}

/// The events `side`'s socket asks for in `state`; `from` is the direction
/// whose source it is, `to` the one whose destination it is.
pub fn wanted(state: State, side: Side, from: Flow, to: Flow) -> EpollFlags {
    match state {
        State::Connecting if side == Side::Backend => EpollFlags::EPOLLOUT,
        state if state.is_relaying() => {
            let mut flags = EpollFlags::empty();
            if from == Flow::Reading {
                flags |= EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
            }
            if to.holds_bytes() {
                flags |= EpollFlags::EPOLLOUT;
            }
            flags
        }
        _ => EpollFlags::empty(),
    }
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
    fn a_connecting_backend_waits_to_be_writable_and_its_client_is_not_asked() {
        let (reading, done) = (Flow::Reading, Flow::Done);
        assert_eq!(
            wanted(State::Connecting, Side::Backend, reading, reading),
            WRITE
        );
        assert!(wanted(State::Connecting, Side::Client, reading, reading).is_empty());
        assert!(wanted(State::Accepted, Side::Backend, reading, done).is_empty());
    }

    #[test]
    fn read_interest_only_while_reading_write_interest_only_while_holding_bytes() {
        let relaying = State::Relaying;
        assert_eq!(
            wanted(relaying, Side::Client, Flow::Reading, Flow::Reading),
            READ
        );
        // Backpressure: the direction from this socket holds bytes the other
        // side has not taken; reading on would only fill a second buffer.
        assert!(wanted(relaying, Side::Client, Flow::Writing, Flow::Reading).is_empty());
        assert_eq!(
            wanted(relaying, Side::Client, Flow::Writing, Flow::Writing),
            WRITE
        );
        assert_eq!(
            wanted(relaying, Side::Backend, Flow::Reading, Flow::Draining),
            READ | WRITE
        );
        // Its FIN was read: never again in the read set.
        assert!(wanted(State::ClientClosed, Side::Client, Flow::Done, Flow::Reading).is_empty());
        assert!(
            wanted(
                State::Closed(super::super::machine::End::Unreachable),
                Side::Client,
                Flow::Reading,
                Flow::Reading
            )
            .is_empty()
        );
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
