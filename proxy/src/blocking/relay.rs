//! What the blocking modes ([`single`](crate::blocking::single) and
//! [`pool`](crate::blocking::pool)) share: a listener, one connection's life
//! (connect, relay, abort on failure), and the full-duplex [`relay`] on
//! `poll(2)`.
//!
//! # Why the seed's relay could hang
//!
//! The seed's milestones 1 to 4 relayed in turns: read the client's
//! request, write it to the backend, read the backend's response, write it
//! to the client, repeat. Each read blocks until *that* socket has
//! something to say. That fits a client that sends one request and waits,
//! but two ordinary peers break it:
//!
//! ```text
//!  client                     alternating relay                 backend
//!  send "data", then FIN ──▶  read(client) = "data"
//!                             write(backend, "data")       ──▶  reads "data", then waits
//!                             read(backend) ... blocks           for EOF before answering
//!                                            (sort, wc, an upload, a SQL COPY)
//!  the FIN sits unread: the relay only reads the client after the backend
//!  has answered, and the backend only answers after the client's FIN.
//!  Both wait forever.
//! ```
//!
//! A client that streams (an upload) while the backend streams back (a
//! progress feed) hangs the same way once a send buffer fills; a backend
//! that speaks first (an SMTP banner) waits for a request the client is
//! not going to send before it sees the banner.
//!
//! # How poll(2) fixes it
//!
//! The relay never blocks on one socket. It puts both sockets in
//! non-blocking mode and asks `poll(2)` one question about both: "which of
//! the operations I could make progress with now are possible?" Each
//! direction has its own 64 KiB buffer (`conn/buffers.rs`), whose bytes
//! `start..end` the relay machine (`conn/machine.rs`, the contract every
//! mode drives) says are read and not yet written:
//!
//! ```text
//!             up:   client ──read──▶ [start .. end] ──write──▶ backend
//!             down: client ◀─write── [start .. end] ◀──read─── backend
//!
//!   wait for POLLIN  on a direction's source      while its buffer is empty and no EOF was seen
//!   wait for POLLOUT on a direction's destination while its buffer holds bytes
//!                    (what Machine::wants says, turned into poll's flags)
//! ```
//!
//! So the FIN above is read as soon as it arrives, whatever the backend is
//! doing, and becomes `shutdown(Write)` toward the backend (once the
//! buffer ahead of it is flushed): the backend sees EOF and answers. The
//! other direction keeps flowing until its own EOF (half-close). The
//! relay ends when both directions have passed their FIN on.
//!
//! # Failures and timeouts
//!
//! - A read or write error on one side (ECONNRESET, EPIPE) aborts the
//!   connection: the other side is **reset** (`SO_LINGER` 0, then close),
//!   not closed with a FIN that would make a truncated stream look
//!   complete. Only a relay that ended with both FINs passed on closes
//!   cleanly; every other ending (`Ending::is_clean`) resets both sockets.
//! - No byte in either direction for `idle_timeout` ends it; once one side
//!   has sent its FIN, the other may stay silent only for `fin_timeout` (or
//!   `idle_timeout` if that is shorter), so half-closed connections in
//!   CLOSE_WAIT cannot pile up.
//! - `POLLHUP` and `POLLERR` are reported even when not asked for. They are
//!   answered by doing the read or write that is pending (whose error then
//!   says what happened), or, with nothing pending, by `SO_ERROR` for an
//!   error, and for a hang-up by leaving that socket out of the next polls
//!   until the relay has something to ask of it, so that a hang-up it
//!   cannot act on yet does not make `poll` return at once, over and over.
//!
//! This file is the relay machine's blocking driver: how it waits is
//! `poll(2)`, and what it adds is the hang-up rule above. The async relay
//! of the epoll mode ([`relay`](crate::conn::relay)) drives the same
//! machine with futures, and the states mode with level-triggered epoll.

#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{setsockopt, sockopt};
use runtime::net::{ListenOptions, bind_std, connect_std};

use crate::conn::buffers;
use crate::conn::machine::{Event, Machine, Op, Outcome};
use crate::conn::side::Side;
use crate::conn::timeouts::Timeouts;
use crate::settings::cli::Settings;

/// Opens the listening socket for a blocking mode: the configured backlog,
/// `SO_REUSEADDR`, and blocking `accept`.
pub fn listen(settings: &Settings) -> io::Result<TcpListener> {
    let options = ListenOptions {
        backlog: settings.backlog,
        // Every accepted client inherits TCP_NODELAY from the listener: one
        // setsockopt here instead of one per connection.
        nodelay: true,
        ..ListenOptions::default()
    };
    let listener = bind_std(settings.listen, &options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}", settings.listen),
        )
    })?;
    // bind_std hands out a non-blocking socket (what the runtime wants);
    // these modes block in accept.
    listener.set_nonblocking(false)?;
    Ok(listener)
}

/// One connection's whole life: connect to `backend`, relay, close.
///
/// Never fails and never panics: whatever happens concerns this connection
/// only, and is logged. If the backend cannot be reached the client is
/// reset, so it sees ECONNRESET rather than an empty stream that ends
/// cleanly and looks like a complete (empty) answer.
pub fn serve(client: TcpStream, peer: SocketAddr, backend: SocketAddr, settings: &Settings) {
    let upstream = match connect_std(backend, settings.timeouts.connect) {
        Ok(stream) => stream,
        Err(e) => {
            crate::warn!("{peer}: backend {backend} unreachable: {e}; resetting the client");
            reset(client);
            return;
        }
    };
    // A relay forwards what it has as soon as it has it; Nagle's algorithm
    // would hold small writes back waiting for an ACK. Failing to turn it
    // off costs latency, not correctness. (The client has it from the
    // listener.)
    if let Err(e) = upstream.set_nodelay(true) {
        crate::debug!("{peer}: TCP_NODELAY: {e}");
    }
    match relay(client, upstream, &settings.timeouts) {
        Ok(outcome) => crate::debug!(
            "{peer} <-> {backend}: {}, {} bytes up, {} down",
            outcome.ending.label(),
            outcome.upstream,
            outcome.downstream
        ),
        Err(e) => crate::warn!("{peer} <-> {backend}: relay failed: {e}"),
    }
}

/// Closes `stream` with a reset (RST) instead of a FIN: `SO_LINGER` with a
/// zero timeout makes `close` abort the connection, discarding unsent data.
/// The peer's next read fails with ECONNRESET.
pub fn reset(stream: TcpStream) {
    let abort = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    if let Err(e) = setsockopt(&stream, sockopt::Linger, &abort) {
        // Still closed below, just with a FIN.
        crate::debug!("SO_LINGER: {e}; closing without a reset");
    }
    drop(stream);
}

/// Relays bytes both ways between `client` and `backend` until both
/// directions are done, a side fails, or a timeout expires (module docs).
/// Both sockets must be non-blocking: as `accept_std` and `connect_std`
/// make them, with no system call of their own.
///
/// Returns `Err` only if the relay itself could not run (`poll` failing);
/// both sockets are then reset. Everything a peer can cause is an `Ok` with
/// the machine's [`Outcome`].
pub fn relay(client: TcpStream, backend: TcpStream, timeouts: &Timeouts) -> io::Result<Outcome> {
    let mut relay = Relay::new(&client, &backend, timeouts);
    let ran = relay.run();
    let outcome = relay.machine.outcome();
    for buffer in relay.buffers {
        buffers::give(buffer);
    }
    // Only both FINs passed on close cleanly (machine.rs); a relay that
    // could not run is cut, and cut streams end with resets.
    if ran.is_err() || !outcome.ending.is_clean() {
        reset(client);
        reset(backend);
    }
    ran.map(|()| outcome)
}

/// The state of one relayed connection: the machine, and what this driver
/// holds to drive it.
struct Relay<'a> {
    /// The client's socket, then the backend's (indexed by `Side`).
    sockets: [&'a TcpStream; 2],
    machine: Machine,
    /// Per direction (by source), its buffer, held for the relay's life.
    buffers: [Box<[u8]>; 2],
    /// Per side: a hang-up was reported that nothing could be done about
    /// yet. Such a socket is polled only while the relay asks something of
    /// it (a hang-up stays reported, and polling for it would spin).
    hung_up: [bool; 2],
    timeouts: &'a Timeouts,
}

impl<'a> Relay<'a> {
    fn new(client: &'a TcpStream, backend: &'a TcpStream, timeouts: &'a Timeouts) -> Relay<'a> {
        Relay {
            sockets: [client, backend],
            machine: Machine::relaying(Instant::now()),
            buffers: [buffers::take(), buffers::take()],
            hung_up: [false; 2],
            timeouts,
        }
    }

    fn run(&mut self) -> io::Result<()> {
        loop {
            let now = Instant::now();
            self.pass_fins_on(now);
            if self.machine.is_closed() {
                return Ok(());
            }
            let left = match self.machine.deadline(self.timeouts) {
                Some(due) if due <= now => {
                    self.machine.on_deadline(now, self.timeouts);
                    continue;
                }
                Some(due) => due - now,
                None => Duration::MAX,
            };
            let ready = self.wait(left)?;
            self.act(ready, Instant::now());
        }
    }

    /// The machine's `Shutdown`s: a direction whose source sent FIN and
    /// whose bytes are all written passes the FIN on. (The second needs no
    /// call: the machine is then complete, and the close sends it.)
    fn pass_fins_on(&mut self, now: Instant) {
        for from in Side::BOTH {
            if self.machine.op(from) == Some(Op::Shutdown) {
                let shut = self.sockets[from.other().index()].shutdown(Shutdown::Write);
                self.machine.on(Event::shut(from, shut), now);
            }
        }
    }

    fn interest(&self, side: Side) -> PollFlags {
        let wants = self.machine.wants(side);
        let mut flags = PollFlags::empty();
        if wants.read {
            flags |= PollFlags::POLLIN;
        }
        if wants.write {
            flags |= PollFlags::POLLOUT;
        }
        flags
    }

    /// Polls: the sockets it asks something of, plus, with an empty
    /// interest, any that has not hung up (so an error on it still wakes
    /// the relay). Returns each side's `revents`, all empty on a timeout.
    fn wait(&mut self, left: Duration) -> io::Result<[PollFlags; 2]> {
        let flags = [self.interest(Side::Client), self.interest(Side::Backend)];
        let watched = [Side::Client, Side::Backend]
            .map(|side| !flags[side.index()].is_empty() || !self.hung_up[side.index()]);
        let mut fds = [
            PollFd::new(self.sockets[0].as_fd(), flags[0]),
            PollFd::new(self.sockets[1].as_fd(), flags[1]),
        ];
        let (first, count) = match watched {
            [true, true] => (0, 2),
            [true, false] => (0, 1),
            [false, true] => (1, 1),
            // Cannot happen while a direction is open (one side then wants
            // something); sleeping out the timeout is a safe answer anyway.
            [false, false] => (0, 0),
        };
        let set = &mut fds[first..first + count];
        match poll(set, poll_timeout(left)) {
            Ok(_) => {}
            // Signals are blocked in every thread (shutdown.rs), but a stop
            // and continue can still interrupt poll: just poll again.
            Err(Errno::EINTR) => return Ok([PollFlags::empty(); 2]),
            Err(e) => return Err(io::Error::from(e)),
        }
        let mut ready = [PollFlags::empty(); 2];
        for (i, fd) in set.iter().enumerate() {
            ready[first + i] = fd.revents().unwrap_or(PollFlags::empty());
        }
        Ok(ready)
    }

    /// Does what `poll` said is possible.
    fn act(&mut self, ready: [PollFlags; 2], now: Instant) {
        for side in Side::BOTH {
            let events = ready[side.index()];
            if !events.is_empty() && !self.machine.is_closed() {
                self.on_ready(side, events, now);
            }
        }
    }

    fn on_ready(&mut self, side: Side, events: PollFlags, now: Instant) {
        if events.contains(PollFlags::POLLNVAL) {
            self.machine.on(Event::Broke(side), now);
            return;
        }
        // A hang-up or an error makes the pending read or write return at
        // once, with the EOF or the error: that is how we learn which.
        let trouble = PollFlags::POLLHUP | PollFlags::POLLERR;
        let readable = events.intersects(PollFlags::POLLIN | trouble);
        let writable = events.intersects(PollFlags::POLLOUT | trouble);
        let wants = self.machine.wants(side);
        if wants.read && readable {
            self.pump(side, true, false, now);
        }
        if wants.write && writable {
            self.pump(side.other(), false, true, now);
        }
        let acted = (wants.read && readable) || (wants.write && writable);
        if !acted && events.intersects(trouble) {
            self.nothing_pending(side, events, now);
        }
    }

    /// Runs the direction from `from`: a read if `readable`, and after a
    /// read, while the bytes are hot, a write at once (usually the
    /// destination has room, and that saves a poll); a write if `writable`.
    fn pump(&mut self, from: Side, mut readable: bool, mut writable: bool, now: Instant) {
        loop {
            let event = match self.machine.op(from) {
                Some(Op::Read) if readable => {
                    (readable, writable) = (false, true);
                    let mut source = self.sockets[from.index()];
                    let got = retry_interrupted(|| source.read(&mut self.buffers[from.index()]));
                    Event::read(from, got, false)
                }
                Some(Op::Write { start, end, .. }) if writable => {
                    writable = false;
                    let mut destination = self.sockets[from.other().index()];
                    let pending = &self.buffers[from.index()][start as usize..end as usize];
                    Event::wrote(from, retry_interrupted(|| destination.write(pending)))
                }
                _ => return,
            };
            match event {
                Some(event) => self.machine.on(event, now),
                None => return,
            }
        }
    }

    /// A hang-up or error on a socket the relay asks nothing of right now.
    fn nothing_pending(&mut self, side: Side, events: PollFlags, now: Instant) {
        if events.contains(PollFlags::POLLERR) {
            match self.sockets[side.index()].take_error() {
                Ok(Some(_)) | Err(_) => return self.machine.on(Event::Broke(side), now),
                Ok(None) => {} // already consumed: treat like a hang-up
            }
        }
        // Both directions of that socket are shut at the kernel level; what
        // is left (reading the data before its FIN) is done when the buffer
        // has room. Until then, poll it only if there is something to ask;
        // and once its FIN was read, the machine takes it for a reset.
        self.hung_up[side.index()] = true;
        self.machine.on(Event::HungUp(side), now);
    }
}

fn retry_interrupted<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `left`, rounded *up* to whole milliseconds: rounding down would turn the
/// last fraction of a millisecond into a zero timeout, and the loop would
/// spin until the deadline passed. (The states mode's `epoll_wait` takes
/// the same type, and the same rule.)
pub fn poll_timeout(left: Duration) -> PollTimeout {
    let millis = left.as_micros().div_ceil(1000);
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::machine::Ending;
    use std::io::ErrorKind;
    use std::sync::mpsc;
    use std::thread::{self, JoinHandle};

    /// Two connected loopback sockets.
    fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let near = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (far, _) = listener.accept().expect("accept");
        (near, far)
    }

    fn timeouts(idle: Duration, fin: Duration) -> Timeouts {
        let mut t = Timeouts::default();
        t.set_idle(idle);
        t.set_fin(fin);
        t
    }

    /// A relay running on its own thread, with the test holding the far
    /// ends: `client` plays the client, `backend` the backend.
    struct Harness {
        client: TcpStream,
        backend: TcpStream,
        relay: JoinHandle<io::Result<Outcome>>,
    }

    fn start(timeouts: Timeouts) -> Harness {
        let (client, proxy_client) = socket_pair();
        let (proxy_backend, backend) = socket_pair();
        for s in [&proxy_client, &proxy_backend] {
            s.set_nonblocking(true)
                .expect("non-blocking, as relay() wants");
        }
        for s in [&client, &backend] {
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
        }
        let relay = thread::spawn(move || relay(proxy_client, proxy_backend, &timeouts));
        Harness {
            client,
            backend,
            relay,
        }
    }

    fn start_default() -> Harness {
        start(timeouts(Duration::from_secs(10), Duration::from_secs(10)))
    }

    impl Harness {
        fn finish(self) -> Outcome {
            drop((self.client, self.backend));
            self.relay
                .join()
                .expect("relay panicked")
                .expect("relay error")
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    fn read_all(mut s: &TcpStream) -> io::Result<Vec<u8>> {
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok(got)
    }

    /// Writes `data` then FIN on a thread of its own.
    fn send_then_fin(s: &TcpStream, data: Vec<u8>) -> JoinHandle<()> {
        let mut s = s.try_clone().expect("clone");
        thread::spawn(move || {
            s.write_all(&data).expect("write");
            s.shutdown(Shutdown::Write).expect("shutdown");
        })
    }

    #[test]
    fn both_directions_stream_at_once() {
        // Each side sends 4 MiB while the other does: far more than the
        // socket buffers and the relay's hold, so an alternating relay
        // would stop with both sides blocked in write.
        let h = start_default();
        let (up, down) = (pattern(4 << 20, 1), pattern(4 << 20, 2));
        let writers = [
            send_then_fin(&h.client, up.clone()),
            send_then_fin(&h.backend, down.clone()),
        ];
        assert!(read_all(&h.backend).expect("backend read") == up);
        assert!(read_all(&h.client).expect("client read") == down);
        for writer in writers {
            writer.join().expect("writer");
        }
        let outcome = h.finish();
        assert_eq!(outcome.ending, Ending::Complete);
        assert_eq!((outcome.upstream, outcome.downstream), (4 << 20, 4 << 20));
    }

    /// The backend answers only after the client's EOF (like `sort`).
    fn answer_after_eof(backend: &TcpStream) -> JoinHandle<()> {
        let mut backend = backend.try_clone().expect("clone");
        thread::spawn(move || {
            let request = read_all(&backend).expect("request");
            let answer: Vec<u8> = request.iter().rev().copied().collect();
            backend.write_all(&answer).expect("answer");
            // The test still holds a handle, so dropping ours sends no FIN.
            let _ = backend.shutdown(Shutdown::Write);
        })
    }

    #[test]
    fn a_half_closed_client_still_gets_the_whole_answer() {
        let h = start_default();
        let request = pattern(300_000, 3);
        let backend = answer_after_eof(&h.backend);
        send_then_fin(&h.client, request.clone())
            .join()
            .expect("client writer");
        let answer = read_all(&h.client).expect("answer");
        assert!(answer.iter().rev().eq(request.iter()), "answer mangled");
        backend.join().expect("backend");
        assert_eq!(h.finish().ending, Ending::Complete);
    }

    /// The seed's relay (v1-v4), for comparison: read the client, write the
    /// backend, read the backend, write the client, in turns.
    fn alternating_relay(mut client: &TcpStream, mut backend: &TcpStream) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let n = client.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            backend.write_all(&buf[..n])?;
            let n = backend.read(&mut buf)?; // waits for the backend's answer...
            client.write_all(&buf[..n])?;
        }
    }

    #[test]
    fn the_seeds_alternating_relay_hangs_where_poll_does_not() {
        // Same peers as the half-close test, relayed the seed's way. The
        // relay reads the request, then waits for the backend, which waits
        // for the client's FIN, which nobody reads. A read timeout stands
        // in for "forever".
        let (client, proxy_client) = socket_pair();
        let (proxy_backend, backend) = socket_pair();
        proxy_backend
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let backend = answer_after_eof(&backend);
        send_then_fin(&client, b"3\n1\n2\n".to_vec())
            .join()
            .expect("client writer");
        let stuck = alternating_relay(&proxy_client, &proxy_backend).unwrap_err();
        assert!(
            matches!(stuck.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{stuck}"
        );
        drop((proxy_client, proxy_backend)); // lets the backend thread end
        let _ = backend.join();
    }

    #[test]
    fn a_backend_that_speaks_first_is_heard() {
        let h = start_default();
        (&h.backend).write_all(b"220 ready\r\n").expect("banner");
        let mut banner = [0u8; 11];
        (&h.client).read_exact(&mut banner).expect("banner relayed");
        assert_eq!(&banner, b"220 ready\r\n");
        assert_eq!(h.finish().downstream, 11);
    }

    #[test]
    fn a_backend_reset_reaches_the_client_as_a_reset() {
        let h = start_default();
        (&h.client).write_all(b"hello").expect("request");
        let mut got = [0u8; 5];
        (&h.backend).read_exact(&mut got).expect("request relayed");
        reset(h.backend);
        let e = read_all(&h.client).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
        let outcome = h.relay.join().expect("relay panicked").expect("relay");
        assert_eq!(outcome.ending, Ending::BackendReset);
    }

    #[test]
    fn a_client_reset_reaches_the_backend_as_a_reset() {
        let h = start_default();
        reset(h.client);
        let e = read_all(&h.backend).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
        let outcome = h.relay.join().expect("relay panicked").expect("relay");
        assert_eq!(outcome.ending, Ending::ClientReset);
    }

    #[test]
    fn a_silent_connection_is_reset_after_the_idle_timeout() {
        let h = start(timeouts(
            Duration::from_millis(200),
            Duration::from_secs(10),
        ));
        let begun = Instant::now();
        let e = read_all(&h.client).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
        let waited = begun.elapsed();
        assert!(waited >= Duration::from_millis(190), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        let outcome = h.relay.join().expect("relay panicked").expect("relay");
        assert_eq!(outcome.ending, Ending::IdleTimeout);
    }

    #[test]
    fn traffic_keeps_a_connection_alive_past_the_idle_timeout() {
        // 8 x 100 ms of traffic outlasts a 600 ms idle timeout: each byte
        // resets the clock. (600 ms leaves room for a loaded machine.)
        let h = start(timeouts(
            Duration::from_millis(600),
            Duration::from_secs(10),
        ));
        for _ in 0..8 {
            thread::sleep(Duration::from_millis(100));
            (&h.client).write_all(b"x").expect("write");
            let mut one = [0u8; 1];
            (&h.backend).read_exact(&mut one).expect("relayed");
        }
        assert_eq!(h.finish().ending, Ending::Complete);
    }

    #[test]
    fn a_half_closed_connection_is_bounded_by_the_fin_timeout() {
        let h = start(timeouts(
            Duration::from_secs(10),
            Duration::from_millis(200),
        ));
        h.client.shutdown(Shutdown::Write).expect("shutdown");
        // The backend sees the FIN, then stays silent.
        assert!(read_all(&h.backend).expect("eof").is_empty());
        let e = read_all(&h.client).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
        let outcome = h.relay.join().expect("relay panicked").expect("relay");
        assert_eq!(outcome.ending, Ending::FinTimeout);
    }

    #[test]
    fn a_reset_close_is_seen_as_a_reset() {
        let (near, far) = socket_pair();
        far.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        reset(near);
        let e = read_all(&far).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    }

    #[test]
    fn poll_timeouts_round_up() {
        let ms = |d: Duration| poll_timeout(d).as_millis();
        assert_eq!(ms(Duration::ZERO), Some(0));
        assert_eq!(ms(Duration::from_micros(1)), Some(1));
        assert_eq!(ms(Duration::from_micros(1500)), Some(2));
        assert_eq!(ms(Duration::from_secs(2)), Some(2000));
        assert_eq!(poll_timeout(Duration::MAX), PollTimeout::MAX);
    }

    #[test]
    fn listen_reports_the_address_it_could_not_bind() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let settings = Settings {
            listen: taken.local_addr().expect("addr"),
            ..Settings::default()
        };
        let e = listen(&settings).unwrap_err();
        assert!(e.to_string().contains("cannot listen on 127.0.0.1:"), "{e}");
    }

    #[test]
    fn listen_gives_a_blocking_listener_with_the_real_port() {
        let settings = Settings {
            listen: "127.0.0.1:0".parse().expect("addr"),
            ..Settings::default()
        };
        let listener = listen(&settings).expect("listen");
        let addr = listener.local_addr().expect("addr");
        assert_ne!(addr.port(), 0);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || tx.send(listener.accept().map(|_| ())));
        let _client = TcpStream::connect(addr).expect("connect");
        let accepted = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("accept returned");
        accepted.expect("a blocking accept waited for the client");
    }
}
