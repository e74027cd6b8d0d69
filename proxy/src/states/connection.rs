//! One connection of the states mode: its two sockets, its [`State`] and
//! two [`Flow`]s, and the system calls that move it from one state to the
//! next. Every call's result goes through the machine's transition tables
//! (machine.rs); after each report from epoll the connection moves as far
//! as it can, then brings its sockets' interest in line with where it ended
//! up (interest.rs).
//!
//! ```text
//!   epoll report ─▶ on_event: what the socket can do now (readable, writable, FIN seen, hung up)
//!                   connecting? the connect's outcome ─▶ Connected | ConnectFailed
//!                ─▶ advance: per direction, read or write, until nothing moves (or a budget)
//!                   read 0 / short read after EPOLLRDHUP ─▶ the FIN, passed on: Fin(side)
//!                   an error ─▶ Broke(side)
//!                ─▶ sync: the interest set follows the new state
//! ```
//!
//! What a peer does to one connection stays with it: every failure ends
//! in a state of this connection, never in an error for the loop.

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
use super::machine::{End, Event, Flow, Io, State, Timeouts};
use crate::blocking::relay::reset;
use crate::conn::relay::{Ending, give_buffer, take_buffer};
use crate::conn::side::Side;

/// Rounds of reads and writes one report may run before the loop moves on
/// to the others: a bulk transfer would otherwise keep the one thread to
/// itself. Level-triggered, a socket left readable or writable is simply
/// reported again by the next `epoll_wait`.
const ROUNDS: usize = 16;

/// One direction's bytes in flight: a buffer from the per-thread pool
/// (conn/relay.rs) held only while bytes wait for the destination.
#[derive(Debug)]
struct Direction {
    flow: Flow,
    buffer: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    bytes: u64,
}

impl Direction {
    fn new() -> Direction {
        Direction {
            flow: Flow::Reading,
            buffer: None,
            start: 0,
            end: 0,
            bytes: 0,
        }
    }

    fn release(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            give_buffer(buffer);
        }
        (self.start, self.end) = (0, 0);
    }
}

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
    pub armed: Option<Instant>,
    /// When bytes last moved, or the state last changed its limit.
    last_activity: Instant,
    slot: usize,
    client: TcpStream,
    backend: TcpStream,
    peer: SocketAddr,
    backend_addr: SocketAddr,
    state: State,
    up: Direction,
    down: Direction,
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
            armed: None,
            last_activity: cx.now,
            slot,
            client,
            backend,
            peer,
            backend_addr,
            state: State::Accepted,
            up: Direction::new(),
            down: Direction::new(),
            sockets: [Socket::default(); 2],
        };
        match connected {
            true => connection.connected(cx),
            false => connection.state = connection.state.on(Event::ConnectStarted),
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
        if self.state == State::Connecting {
            if side == Side::Backend {
                self.on_connect_report(events.intersects(trouble), error, cx);
            }
        } else if error.is_some() {
            self.transition(Event::Broke(side));
        } else {
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
        self.transition(Event::ConnectFailed);
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
        self.transition(Event::Connected);
        self.last_activity = cx.now;
        for socket in &mut self.sockets {
            socket.writable = true;
        }
    }

    /// The deadline of the current state: when it times out if nothing moves.
    pub fn deadline(&self, timeouts: &Timeouts) -> Option<Instant> {
        Some(self.last_activity + self.state.limit(timeouts)?)
    }

    /// The deadline came: the connect, idle or fin timeout.
    pub fn time_out(&mut self) {
        if self.state == State::Connecting {
            crate::warn!(
                "{}: backend {} unreachable: no answer within the connect timeout; resetting the \
                 client",
                self.peer,
                self.backend_addr
            );
        }
        self.transition(Event::TimedOut);
    }

    /// The graceful stop is over: cut.
    pub fn stop(&mut self) {
        self.transition(Event::Stopped);
    }

    /// Whether the connection is over (its sockets to be closed by [`Connection::close`]).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    /// Closes both sockets: with FINs after a complete relay (the second
    /// FIN is this close's), with resets after anything else, so that no
    /// cut-off stream looks complete. The close also takes each socket out
    /// of the epoll set: no `EPOLL_CTL_DEL`.
    pub fn close(mut self) {
        self.up.release();
        self.down.release();
        crate::debug!(
            "{} <-> {}: {}, {} bytes up, {} down",
            self.peer,
            self.backend_addr,
            self.state.label(),
            self.up.bytes,
            self.down.bytes
        );
        if self.state != State::Closed(End::Relay(Ending::Complete)) {
            reset(self.client);
            reset(self.backend);
        }
    }

    fn transition(&mut self, event: Event) {
        self.state = self.state.on(event);
    }

    fn stream(&self, side: Side) -> &TcpStream {
        match side {
            Side::Client => &self.client,
            Side::Backend => &self.backend,
        }
    }

    /// The direction whose source is `side`.
    fn from(&self, side: Side) -> &Direction {
        match side {
            Side::Client => &self.up,
            Side::Backend => &self.down,
        }
    }

    /// Moves bytes both ways until nothing more moves now, the connection
    /// closes, or the budget of [`ROUNDS`] is spent.
    fn advance(&mut self, now: Instant) {
        for _ in 0..ROUNDS {
            if !self.state.is_relaying() {
                return;
            }
            let moved = self.pump(Side::Client, now) | self.pump(Side::Backend, now);
            if !moved {
                break;
            }
        }
        // A side whose FIN was read is read no more, so a reset it sends
        // later would go unheard but for EPOLLHUP: with our write side
        // toward it still open, a hang-up there can only be a reset.
        for side in Side::BOTH {
            let hung_up = self.sockets[side.index()].hung_up;
            if hung_up && self.state.is_relaying() && self.from(side).flow == Flow::Done {
                self.transition(Event::Broke(side));
            }
        }
    }

    /// One step of the direction from `source`: a read if it is `Reading`
    /// and its source may have bytes, a write if it holds bytes and its
    /// destination may take them. Whether anything moved.
    fn pump(&mut self, source: Side, now: Instant) -> bool {
        let destination = source.other();
        let flow = self.from(source).flow;
        let socket = |side: Side| self.sockets[side.index()];
        match flow {
            Flow::Reading if socket(source).readable => self.read(source, now),
            Flow::Writing | Flow::Draining if socket(destination).writable => {
                self.write(source, now)
            }
            _ => false,
        }
    }

    /// Reads from `source` into its direction's buffer.
    fn read(&mut self, source: Side, now: Instant) -> bool {
        let (stream, direction) = match source {
            Side::Client => (&self.client, &mut self.up),
            Side::Backend => (&self.backend, &mut self.down),
        };
        let socket = &mut self.sockets[source.index()];
        let buffer = direction.buffer.get_or_insert_with(take_buffer);
        let capacity = buffer.len();
        match (&*stream).read(buffer) {
            Ok(0) => {
                direction.release();
                direction.flow = direction.flow.on(Io::Eof);
                self.pass_fin(source, now);
                true
            }
            Ok(n) => {
                (direction.start, direction.end) = (0, n);
                // Short: the queue is empty now; wait for the next report.
                socket.readable = n == capacity;
                let fin_behind = socket.fin_seen && n < capacity;
                direction.flow = direction.flow.on(Io::Got { fin_behind });
                self.last_activity = now;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                socket.readable = false;
                direction.release();
                false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(_) => {
                direction.release();
                self.transition(Event::Broke(source));
                false
            }
        }
    }

    /// Writes what the direction from `source` holds to the other side.
    fn write(&mut self, source: Side, now: Instant) -> bool {
        let destination = source.other();
        let (stream, direction) = match source {
            Side::Client => (&self.backend, &mut self.up),
            Side::Backend => (&self.client, &mut self.down),
        };
        let socket = &mut self.sockets[destination.index()];
        let pending = direction
            .buffer
            .as_deref()
            .and_then(|b| b.get(direction.start..direction.end))
            .unwrap_or_default();
        let held = pending.len();
        let written = match direction.flow {
            // The FIN follows these bytes at once (`pass_fin`, or the close
            // of a complete relay): with MSG_MORE it rides on their segment,
            // as the async relay does (conn/relay.rs, "A FIN that came with
            // the bytes leaves with them").
            Flow::Draining => {
                // nix 0.32 names no MSG_MORE; the bit is libc's.
                let flags = MsgFlags::from_bits_retain(libc::MSG_MORE) | MsgFlags::MSG_NOSIGNAL;
                sock::send(stream.as_raw_fd(), pending, flags).map_err(io::Error::from)
            }
            _ => (&*stream).write(pending),
        };
        match written {
            Ok(n) if n > 0 => {
                direction.start += n;
                direction.bytes += n as u64;
                self.last_activity = now;
                // Short: the send buffer is full; wait for EPOLLOUT.
                socket.writable = n == held;
                if direction.start == direction.end {
                    direction.release();
                    direction.flow = direction.flow.on(Io::Flushed);
                    if direction.flow == Flow::Done {
                        self.pass_fin(source, now);
                    }
                }
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                socket.writable = false;
                false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            _ => {
                self.transition(Event::Broke(destination));
                false
            }
        }
    }

    /// The direction from `source` is done: its FIN goes on with a
    /// `shutdown(Write)`, unless it is the last, whose FIN the close sends.
    /// The half-close starts the fin timeout: silence before it was the
    /// idle timeout's to judge.
    fn pass_fin(&mut self, source: Side, now: Instant) {
        if !self.state.is_last(source) {
            let destination = source.other();
            match self.stream(destination).shutdown(Shutdown::Write) {
                // ENOTCONN: the destination is gone already; its own
                // direction says how.
                Err(e) if e.kind() != io::ErrorKind::NotConnected => {
                    self.transition(Event::Broke(destination));
                    return;
                }
                _ => {}
            }
        }
        self.transition(Event::Fin(source));
        self.last_activity = now;
    }

    /// Brings both sockets' place in the epoll set in line with the state
    /// (interest.rs). A failed `epoll_ctl` (out of memory) ends this
    /// connection alone: it could no longer hear its sockets.
    fn sync(&mut self, cx: &Cx<'_>) {
        if self.is_closed() {
            return;
        }
        for side in Side::BOTH {
            let (from, to) = match side {
                Side::Client => (self.up.flow, self.down.flow),
                Side::Backend => (self.down.flow, self.up.flow),
            };
            let socket = self.sockets[side.index()];
            let wanted = interest::wanted(self.state, side, from, to);
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
                    self.transition(Event::Broke(side));
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
            "states mode: Connection {connection} bytes ({slot} in its slot); State {} B, Flow {} \
             B, a direction {} B",
            std::mem::size_of::<State>(),
            std::mem::size_of::<Flow>(),
            std::mem::size_of::<Direction>()
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
