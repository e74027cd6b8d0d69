//! One connection of the states mode: its two sockets, its relay
//! [`Machine`] (conn/machine.rs, the contract every mode drives), and the
//! system calls that move it. The machine says what to do next; this file
//! does it when epoll has said the socket can, tells the machine what the
//! call returned, and brings its sockets' interest in line with where the
//! machine ended up (interest.rs).
//!
//! ```text
//!   epoll report ─▶ on_event: what the socket can do now (readable, writable, FIN seen, hung up)
//!                   connecting? the connect's outcome ─▶ Event::Connected | ConnectFailed
//!                ─▶ advance: per direction, machine.op(from) if the socket allows it,
//!                   until nothing moves (or a budget)  ─▶ Event::Got / Eof / Wrote / ShutDown / Broke
//!                ─▶ sync: the interest set follows machine.wants(side)
//! ```
//!
//! What this driver adds to the machine is how it waits: level-triggered
//! epoll reports a socket as long as it is readable or writable, so each
//! socket keeps what it is known to allow (`Socket`): set by a report,
//! cleared by a call that came back short or would block. A read is made
//! only when the socket may have bytes, a write only when it may take them.
//!
//! What a peer does to one connection stays with it: every failure ends
//! in an ending of this connection, never in an error for the loop.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollFlags};
use nix::sys::socket::{
    self as sock, AddressFamily, MsgFlags, SockFlag, SockType, SockaddrStorage,
};

use super::interest::{self, Registered};
use crate::blocking::relay::reset;
use crate::conn::alarm::Alarm;
use crate::conn::buffers;
use crate::conn::machine::{Event, Machine, Op, Phase};
use crate::conn::side::Side;
use crate::conn::timeouts::Timeouts;

/// Rounds of reads and writes one report may run before the loop moves on
/// to the others: a bulk transfer would otherwise keep the one thread to
/// itself. Level-triggered, a socket left readable or writable is simply
/// reported again by the next `epoll_wait`.
const ROUNDS: usize = 16;

/// What one socket is known to allow, from its reports and its last calls.
#[derive(Debug, Default, Clone, Copy)]
struct Socket {
    /// A read may return something (reported, or the last read filled the
    /// buffer); false after a read came back short or would block.
    readable: bool,
    /// A write may take bytes; false after one came back short or would block.
    writable: bool,
    /// EPOLLRDHUP was reported: the peer's FIN is queued behind its bytes.
    fin_seen: bool,
    /// EPOLLHUP was reported: both directions are shut (or it was reset).
    hung_up: bool,
    registered: Registered,
}

/// One client and its backend.
#[derive(Debug)]
pub struct Connection {
    /// Tells this connection from an earlier one in the same slot.
    pub serial: u64,
    /// The deadline entry that counts (deadlines.rs), if one is armed.
    pub alarm: Alarm,
    slot: usize,
    client: TcpStream,
    backend: TcpStream,
    peer: SocketAddr,
    backend_addr: SocketAddr,
    machine: Machine,
    /// Per direction (by source): the buffer its bytes wait in, from the
    /// thread's pool, held only while bytes are in flight.
    buffers: [Option<Box<[u8]>>; 2],
    sockets: [Socket; 2],
}

/// What every call of a connection needs from its loop.
#[derive(Debug, Clone, Copy)]
pub struct Cx<'a> {
    /// The loop's epoll set.
    pub epoll: &'a Epoll,
    /// The time of this turn of the loop (read once per `epoll_wait`).
    pub now: Instant,
    /// The mode's timeouts.
    pub timeouts: &'a Timeouts,
}

/// epoll's report token for `side`'s socket of the connection in `slot`.
pub fn token(slot: usize, side: Side) -> u64 {
    (slot as u64) << 1 | side.index() as u64
}

/// The slot and side a token names.
pub fn untoken(token: u64) -> (usize, Side) {
    let side = if token & 1 == 0 {
        Side::Client
    } else {
        Side::Backend
    };
    ((token >> 1) as usize, side)
}

/// A non-blocking socket connecting to `addr`: `Ok(true)` if connect(2)
/// finished at once, `Ok(false)` if it is in progress (EINPROGRESS).
fn start_connect(addr: SocketAddr) -> io::Result<(TcpStream, bool)> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let fd = sock::socket(family, SockType::Stream, flags, None)?;
    let done = match sock::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => true,
        Err(Errno::EINPROGRESS) => false,
        Err(e) => return Err(e.into()),
    };
    Ok((TcpStream::from(fd), done))
}

impl Connection {
    /// Connects `client` to `backend_addr` and registers the backend's
    /// socket; `None` if that failed at once (the client is then reset,
    /// and the failure logged).
    pub fn open(
        client: TcpStream,
        peer: SocketAddr,
        backend_addr: SocketAddr,
        (slot, serial): (usize, u64),
        cx: &Cx<'_>,
    ) -> Option<Connection> {
        let (backend, connected) = match start_connect(backend_addr) {
            Ok(started) => started,
            Err(e) => {
                crate::warn!(
                    "{peer}: backend {backend_addr} unreachable: {e}; resetting the client"
                );
                reset(client);
                return None;
            }
        };
        let mut connection = Connection {
            serial,
            alarm: Alarm::default(),
            slot,
            client,
            backend,
            peer,
            backend_addr,
            machine: Machine::accepted(cx.now),
            buffers: [None, None],
            sockets: [Socket::default(); 2],
        };
        match connected {
            true => connection.connected(cx),
            false => connection.machine.on(Event::ConnectStarted, cx.now),
        }
        connection.sync(cx);
        Some(connection)
    }

    /// Handles one report from epoll for `side`'s socket.
    pub fn on_event(&mut self, side: Side, events: EpollFlags, cx: &Cx<'_>) {
        let trouble = EpollFlags::EPOLLERR | EpollFlags::EPOLLHUP;
        let socket = &mut self.sockets[side.index()];
        // A hang-up or an error makes the pending read or write return at
        // once, with the EOF or the error: that is how we learn which.
        socket.readable |=
            events.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | trouble);
        socket.writable |= events.intersects(EpollFlags::EPOLLOUT | trouble);
        socket.fin_seen |= events.contains(EpollFlags::EPOLLRDHUP);
        socket.hung_up |= events.contains(EpollFlags::EPOLLHUP);
        let error = match events.contains(EpollFlags::EPOLLERR) {
            true => self.stream(side).take_error().unwrap_or_else(Some),
            false => None,
        };
        if self.machine.phase() == Phase::Connecting {
            // Only the backend's report means something yet.
            if side == Side::Backend {
                self.on_connect_report(events.intersects(trouble), error, cx);
            }
        } else if error.is_some() {
            self.machine.on(Event::Broke(side), cx.now);
        } else {
            if self.sockets[side.index()].hung_up {
                self.machine.on(Event::HungUp(side), cx.now);
            }
            self.advance(cx.now);
        }
        self.sync(cx);
    }

    /// The connect's outcome: writable with no error is connected.
    fn on_connect_report(&mut self, trouble: bool, error: Option<io::Error>, cx: &Cx<'_>) {
        if !trouble {
            self.connected(cx);
            return;
        }
        let why = error.map_or("closed while connecting".to_string(), |e| e.to_string());
        crate::warn!(
            "{}: backend {} unreachable: {why}; resetting the client",
            self.peer,
            self.backend_addr
        );
        self.machine.on(Event::ConnectFailed, cx.now);
    }

    /// Connecting ──▶ Relaying: the idle clock starts, and the client is
    /// asked for its bytes from now on (it joins the set in `sync`).
    fn connected(&mut self, cx: &Cx<'_>) {
        // A relay forwards what it has at once; Nagle's algorithm would hold
        // small writes back. Failing costs latency, not correctness. (The
        // client has it from the listener.)
        if let Err(e) = self.backend.set_nodelay(true) {
            crate::debug!("{}: TCP_NODELAY: {e}", self.peer);
        }
        self.machine.on(Event::Connected, cx.now);
        for socket in &mut self.sockets {
            socket.writable = true;
        }
    }

    /// When the connection times out if nothing moves.
    pub fn deadline(&self, timeouts: &Timeouts) -> Option<Instant> {
        self.machine.deadline(timeouts)
    }

    /// Its armed deadline came: the machine times it out if it is due (the
    /// connect, idle or fin timeout), or says nothing if bytes moved since.
    pub fn on_deadline(&mut self, now: Instant, timeouts: &Timeouts) {
        let connecting = self.machine.phase() == Phase::Connecting;
        self.machine.on_deadline(now, timeouts);
        if connecting && self.is_closed() {
            crate::warn!(
                "{}: backend {} unreachable: no answer within the connect timeout; resetting the \
                 client",
                self.peer,
                self.backend_addr
            );
        }
    }

    /// The graceful stop is over: cut.
    pub fn stop(&mut self, now: Instant) {
        self.machine.on(Event::Stop, now);
    }

    /// Whether the connection is over (its sockets to be closed by [`Connection::close`]).
    pub fn is_closed(&self) -> bool {
        self.machine.is_closed()
    }

    /// Closes both sockets: with FINs after a complete relay (the second
    /// FIN is this close's), with resets after anything else, so that no
    /// cut-off stream looks complete. The close also takes each socket out
    /// of the epoll set: no `EPOLL_CTL_DEL`.
    pub fn close(mut self) {
        for side in Side::BOTH {
            self.release(side);
        }
        let outcome = self.machine.outcome();
        crate::debug!(
            "{} <-> {}: {}, {} bytes up, {} down",
            self.peer,
            self.backend_addr,
            outcome.ending.label(),
            outcome.upstream,
            outcome.downstream
        );
        if !outcome.ending.is_clean() {
            reset(self.client);
            reset(self.backend);
        }
    }

    fn stream(&self, side: Side) -> &TcpStream {
        match side {
            Side::Client => &self.client,
            Side::Backend => &self.backend,
        }
    }

    /// Runs the machine's operations both ways until nothing more moves
    /// now, the connection closes, or the budget of [`ROUNDS`] is spent.
    fn advance(&mut self, now: Instant) {
        for _ in 0..ROUNDS {
            let moved = self.step(Side::Client, now) | self.step(Side::Backend, now);
            if !moved || self.is_closed() {
                return;
            }
        }
    }

    /// The machine's next operation for the direction from `source`, if its
    /// socket allows it now. Whether anything happened.
    fn step(&mut self, source: Side, now: Instant) -> bool {
        let destination = source.other();
        let event = match self.machine.op(source) {
            Some(Op::Read) if self.sockets[source.index()].readable => self.read(source),
            Some(Op::Write {
                start,
                end,
                fin_follows,
            }) if self.sockets[destination.index()].writable => {
                self.write(source, start as usize..end as usize, fin_follows)
            }
            Some(Op::Shutdown) => {
                let shut = self.stream(destination).shutdown(Shutdown::Write);
                Some(Event::shut(source, shut))
            }
            _ => None,
        };
        let Some(event) = event else {
            return false;
        };
        self.machine.on(event, now);
        // Nothing in flight (all written, or the FIN read): the buffer goes
        // back to the pool until the next read.
        if self.machine.direction(source).held() == 0 {
            self.release(source);
        }
        true
    }

    /// Gives the buffer of the direction from `source` back to the pool.
    fn release(&mut self, source: Side) {
        if let Some(buffer) = self.buffers[source.index()].take() {
            buffers::give(buffer);
        }
    }

    /// Reads from `source` into its direction's buffer; `None` if it would
    /// block (the buffer goes back to the pool meanwhile).
    fn read(&mut self, source: Side) -> Option<Event> {
        let i = source.index();
        let buffer = self.buffers[i].get_or_insert_with(buffers::take);
        let capacity = buffer.len();
        let stream = match source {
            Side::Client => &self.client,
            Side::Backend => &self.backend,
        };
        let result = (&*stream).read(buffer);
        let socket = &mut self.sockets[i];
        // Short: the queue is empty now; wait for the next report.
        socket.readable = matches!(result, Ok(n) if n == capacity);
        // A short read after EPOLLRDHUP took everything before the FIN
        // (Linux copies all it has queued up to the buffer's size).
        let fin_follows = socket.fin_seen && !socket.readable;
        let event = Event::read(source, result, fin_follows);
        if event.is_none() {
            self.release(source);
        }
        event
    }

    /// Writes bytes `range` of the direction from `source` to the other
    /// side; `None` if it would block.
    fn write(
        &mut self,
        source: Side,
        range: std::ops::Range<usize>,
        fin_follows: bool,
    ) -> Option<Event> {
        let destination = source.other();
        let pending = self.buffers[source.index()]
            .as_deref()
            .and_then(|b| b.get(range))
            .unwrap_or_default();
        let stream = self.stream(destination);
        let written = if fin_follows {
            // The FIN follows these bytes at once (the machine's Shutdown,
            // or the close of a complete relay): with MSG_MORE it rides on
            // their segment. nix 0.32 names no MSG_MORE; the bit is libc's.
            let flags = MsgFlags::from_bits_retain(libc::MSG_MORE) | MsgFlags::MSG_NOSIGNAL;
            sock::send(stream.as_raw_fd(), pending, flags).map_err(io::Error::from)
        } else {
            (&*stream).write(pending)
        };
        // Short: the send buffer is full; wait for EPOLLOUT.
        self.sockets[destination.index()].writable = matches!(written, Ok(n) if n == pending.len());
        Event::wrote(source, written)
    }

    /// Brings both sockets' place in the epoll set in line with what the
    /// machine waits for (interest.rs). A failed `epoll_ctl` (out of
    /// memory) ends this connection alone: it could no longer hear its
    /// sockets.
    fn sync(&mut self, cx: &Cx<'_>) {
        if self.is_closed() {
            return;
        }
        for side in Side::BOTH {
            let socket = self.sockets[side.index()];
            let wanted = interest::wanted(self.machine.wants(side));
            let target = interest::target(socket.registered, wanted, socket.hung_up);
            let token = token(self.slot, side);
            match interest::sync(
                cx.epoll,
                self.stream(side),
                token,
                socket.registered,
                target,
            ) {
                Ok(now) => self.sockets[side.index()].registered = now,
                Err(e) => {
                    crate::warn!("{}: epoll_ctl: {e}; resetting the connection", self.peer);
                    self.machine.on(Event::Broke(side), cx.now);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one connection holds in this mode: the struct, in its slot.
    /// Printed for the walkthrough (`cargo test -p proxy --lib sizes --
    /// --nocapture`); its buffers come from the pool only while bytes are
    /// in flight.
    #[test]
    fn sizes_of_a_connection_by_hand() {
        let (connection, slot) = (
            std::mem::size_of::<Connection>(),
            std::mem::size_of::<Option<Connection>>(),
        );
        println!(
            "states mode: Connection {connection} bytes ({slot} in its slot); its Machine {} B",
            std::mem::size_of::<Machine>(),
        );
        assert!(connection < 512, "{connection}");
    }

    #[test]
    fn tokens_name_a_slot_and_a_side() {
        for slot in [0, 1, 4095, 1 << 40] {
            for side in Side::BOTH {
                assert_eq!(untoken(token(slot, side)), (slot, side));
            }
        }
    }

    #[test]
    fn a_connect_to_a_closed_port_fails_at_once_or_in_progress() {
        // Bound, not listening: refused.
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = socket.local_addr().expect("addr");
        match start_connect(addr) {
            Ok((_, connected)) => assert!(!connected, "connected to nothing?"),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        }
    }
}
