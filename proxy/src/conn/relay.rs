//! The async relay: one connection's bytes in both directions, and the
//! contract for how it ends.
//!
//! A connection is two independent *directions*, each a small state machine
//! that copies from one socket to the other:
//!
//! ```text
//!              client ──read──> [buffer] ──write──> backend     "upstream"
//!              client <─write── [buffer] <──read─── backend     "downstream"
//!
//!   one direction:   Reading ──data──> Writing ──all written──> Reading
//!                       │                                            ...
//!                       └─EOF (the source sent FIN)─> shutdown(Write) on the
//!                                                     destination ──> Done
//! ```
//!
//! A direction copies through a buffer of ours, or, with the frontend's
//! `splice` option, moves its bytes by `splice(2)` through a pipe, inside the
//! kernel (`conn/splice.rs`: the splice loop, the pipes, the fallback). The
//! contract below is the same on both paths: the pipe's fill level stands for
//! the buffer, bytes in it are in flight until spliced out, and the FIN is
//! passed on once it is empty.
//!
//! Both directions are polled by the same future, so neither waits for the
//! other: a backend that speaks first (an SMTP banner) is relayed while the
//! client is still silent, and a client that streams a large upload keeps
//! sending while the response streams back.
//!
//! ## The contract (docs/EPOLL.md tests it clause by clause)
//!
//! - **Half-close.** A FIN from one side becomes `shutdown(Write)` toward the
//!   other, once everything before it is delivered; the opposite direction
//!   keeps flowing until its own FIN. The connection is done when both
//!   directions are. The second FIN needs no `shutdown`: the relay is then
//!   over, and the caller's `close` of each socket, which follows at once,
//!   sends it (its receive queue is empty, since its own FIN was read, so
//!   the close is a clean FIN and not a reset). One system call fewer per
//!   connection, as HAProxy.
//! - **A FIN that came with the bytes leaves with them.** When the read that
//!   took a request (or a reply) also emptied a source whose FIN the reactor
//!   has seen (`TcpStream::at_eof`), the direction knows its end before it
//!   writes: it writes with `poll_write_before_fin` and shuts down (or, the
//!   last, closes) at once, and the destination gets bytes and FIN in one
//!   segment instead of two. For a connection per request that is one
//!   segment fewer each way, and one ACK fewer from each peer: about 16 TCP
//!   segments per proxied connection instead of 20.
//! - **Resets.** An error on one side (a read that fails with ECONNRESET, a
//!   write that fails with EPIPE) becomes a *reset* on the other side
//!   (SO_LINGER 0, then close), never a clean FIN: a FIN would tell the peer
//!   that a cut-off stream is complete.
//! - **Idle.** No byte either way for `idle_timeout`: both sides are reset
//!   (a timeout is an abort, and must not look like a complete stream).
//! - **Half-closed and silent.** Once one direction is done, the other must
//!   move a byte at least every `server_fin_timeout` (after the client's
//!   FIN, the backend is waited on; HAProxy's `timeout server-fin`) or
//!   `client_fin_timeout` (after the backend's FIN; `timeout client-fin`),
//!   or both sides are reset, so sockets cannot pile up in CLOSE_WAIT.
//!
//! ## Memory
//!
//! A direction holds a buffer only while bytes are in flight: it takes one
//! from a per-thread pool before reading and gives it back as soon as it is
//! empty and the next read would block. An idle connection holds no buffer
//! at all, and a busy one reuses the same few buffers without allocating.
//! A splicing direction does the same with its pipe (its own pool, in
//! `conn/splice.rs`).
//!
//! Timers follow the same thrift: the idle deadline is *not* reset on every
//! read (that would be a timer-store removal and insertion per read). The
//! relay records when bytes last moved; when the timer fires it checks that
//! time and, if bytes moved since, re-arms once for the remainder.

use std::cell::RefCell;
use std::future::{Future, poll_fn};
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use runtime::net::TcpStream;
use runtime::time::{self, Sleep};

use super::side::Side;
use super::splice::{self, Held, Splice, SpliceState, Splicing, Stopped};

/// Bytes moved per read. Large enough that a bulk transfer costs few system
/// calls; it is only held while data is in flight.
pub const BUFFER_SIZE: usize = 64 * 1024;

/// How many free buffers a thread keeps for reuse.
const POOL_LIMIT: usize = 256;

thread_local! {
    static POOL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of [`BUFFER_SIZE`] bytes from this thread's pool (a new one if
/// the pool is empty). Every relay of the thread shares the pool: this one's
/// directions, and the states mode's.
pub fn take_buffer() -> Box<[u8]> {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| vec![0; BUFFER_SIZE].into_boxed_slice())
}

/// Gives a buffer back to this thread's pool, for the next read anywhere
/// (dropped if the pool already holds `POOL_LIMIT`).
pub fn give_buffer(buffer: Box<[u8]>) {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_LIMIT {
            pool.push(buffer);
        }
    });
}

/// The timeouts a relay enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// No byte in either direction for this long: close.
    pub idle_timeout: Duration,
    /// Once one direction is shut, the client side may be silent this long
    /// (HAProxy's `timeout client-fin`): after the backend's FIN, waiting
    /// for the client to finish.
    pub client_fin_timeout: Duration,
    /// Once one direction is shut, the backend side may be silent this long
    /// (HAProxy's `timeout server-fin`): after the client's FIN, waiting for
    /// the backend to finish.
    pub server_fin_timeout: Duration,
}

/// How a relayed connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Both directions delivered everything and their FINs.
    Complete,
    /// The client's side failed (reset, or refused our writes); the backend
    /// was reset in turn.
    ClientReset,
    /// The backend's side failed; the client was reset in turn.
    BackendReset,
    /// No byte either way for the idle timeout.
    IdleTimeout,
    /// One direction was done and the other stayed silent too long.
    FinTimeout,
    /// The proxy cut it: its graceful stop ran out of time.
    Stopped,
}

impl Ending {
    /// A short word for logs.
    pub fn label(self) -> &'static str {
        match self {
            Ending::Complete => "complete",
            Ending::ClientReset => "client-reset",
            Ending::BackendReset => "backend-reset",
            Ending::IdleTimeout => "idle-timeout",
            Ending::FinTimeout => "fin-timeout",
            Ending::Stopped => "stopped",
        }
    }
}

/// What a relay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Bytes delivered from the client to the backend.
    pub upstream: u64,
    /// Bytes delivered from the backend to the client.
    pub downstream: u64,
    /// The side whose FIN came first, if one came (for the access log: a
    /// fin timeout is the *other* side's silence).
    pub first_fin: Option<Side>,
    /// Of the bytes both ways, those moved by splice (conn/splice.rs).
    pub spliced: u64,
    /// The error (errno) that put the connection back on the copy path
    /// because its sockets could not splice, if one did.
    pub splice_fallback: Option<i32>,
}

/// Which socket of a direction failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broke {
    Source,
    Destination,
}

/// What one turn of a direction's copy or splice loop came to.
enum Step {
    /// The direction changed paths (copy to splice or back): run the other.
    Switch,
    /// Blocked, done or broken.
    Poll(Poll<Result<(), Broke>>),
}

/// One direction: a buffer (or a pipe) in flight, and whether the source
/// reached EOF.
#[derive(Debug, Default)]
struct Direction {
    buffer: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
    bytes: u64,
    /// Moving by splice, not by copy (conn/splice.rs).
    splicing: bool,
    /// Switch to splice before the next read (`auto` saw a full read; `on`).
    wants_splice: bool,
    /// The pipe, while bytes are in flight through it (or left in it by a
    /// fallback, for the copy path to read out first).
    pipe: Option<Held>,
    /// Of `bytes`, those that went by splice.
    spliced: u64,
}

impl Direction {
    fn new(mode: Splice) -> Direction {
        let mut direction = Direction::default();
        direction.wants_splice = mode == Splice::On;
        direction
    }

    /// Moves bytes from `from` to `to` until blocked, done or broken, by
    /// copy or by splice. `last`: the other direction is done, so this
    /// one's FIN ends the relay.
    fn poll_move(
        &mut self,
        from: &TcpStream,
        to: &TcpStream,
        last: bool,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Broke>> {
        loop {
            let step = if self.splicing {
                self.poll_splice(from, to, last, sp, cx)
            } else {
                self.poll_copy(from, to, last, sp, cx)
            };
            match step {
                Step::Switch => continue,
                Step::Poll(poll) => return poll,
            }
        }
    }

    /// The copy path: read into the buffer, write it out.
    fn poll_copy(
        &mut self,
        from: &TcpStream,
        to: &TcpStream,
        last: bool,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Step {
        loop {
            if let Some(poll) = self.poll_flush(to, cx) {
                return Step::Poll(poll);
            }
            if self.eof {
                return Step::Poll(Poll::Ready(self.finish(to, last)));
            }
            if self.wants_splice && self.start_splicing(sp) {
                return Step::Switch;
            }
            if let Some(poll) = self.poll_fill(from, sp.mode(), cx) {
                return Step::Poll(poll);
            }
        }
    }

    /// Writes what the buffer holds: `None` once it is all written.
    fn poll_flush(
        &mut self,
        to: &TcpStream,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Result<(), Broke>>> {
        while let Some(pending) = self
            .buffer
            .as_deref()
            .and_then(|b| b.get(self.start..self.end))
            .filter(|p| !p.is_empty())
        {
            let written = if self.eof {
                to.poll_write_before_fin(cx, pending)
            } else {
                to.poll_write(cx, pending)
            };
            match written {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    return Some(Poll::Ready(Err(Broke::Destination)));
                }
                Poll::Ready(Ok(n)) => {
                    self.start += n;
                    self.bytes += n as u64;
                }
                Poll::Pending => return Some(Poll::Pending),
            }
        }
        None
    }

    /// Reads into the empty buffer: from a pipe a fallback left bytes in,
    /// else from `from`. `None` once it read (or reached EOF).
    fn poll_fill(
        &mut self,
        from: &TcpStream,
        mode: Splice,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Result<(), Broke>>> {
        let buffer = self.buffer.get_or_insert_with(take_buffer);
        if let Some(held) = self.pipe.as_mut().filter(|h| !h.pipe.is_empty()) {
            return match held.pipe.read_into(buffer) {
                Ok(n) => {
                    (self.start, self.end) = (0, n);
                    None
                }
                Err(_) => Some(Poll::Ready(Err(Broke::Source))),
            };
        }
        match from.poll_read(cx, buffer) {
            Poll::Ready(Ok(0)) => self.eof = true,
            Poll::Ready(Ok(n)) => {
                // `auto`: a read that fills the buffer is a bulk stream.
                self.wants_splice =
                    mode == Splice::On || (mode == Splice::Auto && n == buffer.len());
                (self.start, self.end) = (0, n);
                // The FIN came with these bytes: they go with it (module
                // docs), and the read that would return 0 is not made.
                self.eof = from.at_eof();
            }
            Poll::Ready(Err(_)) => return Some(Poll::Ready(Err(Broke::Source))),
            Poll::Pending => {
                // Nothing in flight: the buffer goes back to the pool
                // while this direction waits.
                self.release();
                return Some(Poll::Pending);
            }
        }
        None
    }

    /// With the buffer empty: takes a pipe and switches to splice, if the
    /// connection may and the budget has one. No pipe: go on copying (and
    /// after a failed `pipe2`, stop asking).
    fn start_splicing(&mut self, sp: &mut SpliceState<'_>) -> bool {
        self.wants_splice = false;
        if !sp.may_splice() || self.pipe.as_ref().is_some_and(|h| !h.pipe.is_empty()) {
            return false;
        }
        if self.pipe.is_none() {
            self.pipe = sp.take_pipe();
        }
        if self.pipe.is_some() {
            if let Some(buffer) = self.buffer.take() {
                give_buffer(buffer);
            }
            self.splicing = true;
        }
        self.splicing
    }

    /// The splice path (`splice::poll_splice`), and what its stopping means
    /// here: the bytes it spliced out count as delivered, its EOF (with the
    /// pipe empty) passes the FIN on, a fallback switches to the copy path.
    fn poll_splice(
        &mut self,
        from: &TcpStream,
        to: &TcpStream,
        last: bool,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Step {
        if !self.eof {
            let mut out = 0;
            let stopped = splice::poll_splice(&mut self.pipe, from, to, sp, &mut out, cx);
            self.bytes += out;
            self.spliced += out;
            match stopped {
                Poll::Pending => return Step::Poll(Poll::Pending),
                Poll::Ready(Stopped::Eof) => self.eof = true,
                Poll::Ready(Stopped::Copy) => {
                    self.splicing = false;
                    return Step::Switch;
                }
                Poll::Ready(Stopped::SourceBroke) => {
                    return Step::Poll(Poll::Ready(Err(Broke::Source)));
                }
                Poll::Ready(Stopped::DestinationBroke) => {
                    return Step::Poll(Poll::Ready(Err(Broke::Destination)));
                }
            }
        }
        Step::Poll(Poll::Ready(self.finish(to, last)))
    }

    /// The source sent FIN and everything before it is delivered: pass the
    /// FIN on, unless this is the `last` direction, whose FIN the closing
    /// socket sends (module docs, "Half-close").
    fn finish(&mut self, to: &TcpStream, last: bool) -> Result<(), Broke> {
        if !self.done {
            self.done = true;
            self.release();
            if last {
                return Ok(());
            }
            // ENOTCONN: the destination is already gone; its own direction
            // will report how.
            if let Err(e) = to.shutdown(Shutdown::Write) {
                if e.kind() != io::ErrorKind::NotConnected {
                    return Err(Broke::Destination);
                }
            }
        }
        Ok(())
    }

    /// Gives the buffer and the pipe back (a pipe that still holds bytes is
    /// closed instead: splice.rs).
    fn release(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            give_buffer(buffer);
        }
        if let Some(held) = self.pipe.take() {
            splice::give(held);
        }
        (self.start, self.end) = (0, 0);
    }
}

impl Drop for Direction {
    fn drop(&mut self) {
        self.release();
    }
}

/// Relays between `client` and `backend` until both directions are done,
/// one side fails, or a timeout expires. Unless both directions finished
/// cleanly, both sockets are set to reset when closed. Either way the caller
/// drops them as soon as it returns: for a complete relay, that close is
/// what sends the last FIN.
pub async fn relay(
    client: &TcpStream,
    backend: &TcpStream,
    limits: Limits,
    splicing: Splicing<'_>,
) -> Outcome {
    relay_until(client, backend, limits, splicing, std::future::pending()).await
}

/// [`relay`], cut short (both sides reset, [`Ending::Stopped`]) when `stop`
/// completes: how a graceful stop ends the connections still open when its
/// grace period is over.
pub async fn relay_until(
    client: &TcpStream,
    backend: &TcpStream,
    limits: Limits,
    splicing: Splicing<'_>,
    stop: impl Future<Output = ()>,
) -> Outcome {
    let mut stop = std::pin::pin!(stop);
    let mut up = Direction::new(splicing.mode);
    let mut down = Direction::new(splicing.mode);
    let mut sp = SpliceState::new(splicing);
    let mut timer = IdleTimer::new(limits);
    let mut first_fin = None;
    let ending = poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ending::Stopped);
        }
        let moved_before = up.bytes + down.bytes;
        if let Some(ending) = poll_both(&mut up, &mut down, client, backend, &mut sp, cx) {
            return Poll::Ready(ending);
        }
        // Who has sent its FIN (the other direction is still open).
        let half_closed = match (up.done, down.done) {
            (true, _) => Some(Side::Client),
            (_, true) => Some(Side::Backend),
            _ => None,
        };
        if first_fin.is_none() {
            first_fin = half_closed;
        }
        timer.poll_expired(cx, up.bytes + down.bytes != moved_before, half_closed)
    })
    .await;
    pass_on_reset(ending, client, backend);
    Outcome {
        ending,
        upstream: up.bytes,
        downstream: down.bytes,
        first_fin,
        spliced: up.spliced + down.spliced,
        splice_fallback: sp.fallback(),
    }
}

/// Moves what can be moved both ways; the ending if the relay is over: both
/// directions done, or a side failed or reset.
fn poll_both(
    up: &mut Direction,
    down: &mut Direction,
    client: &TcpStream,
    backend: &TcpStream,
    sp: &mut SpliceState<'_>,
    cx: &mut Context<'_>,
) -> Option<Ending> {
    if !up.done {
        if let Poll::Ready(Err(broke)) = up.poll_move(client, backend, down.done, sp, cx) {
            return Some(match broke {
                Broke::Source => Ending::ClientReset,
                Broke::Destination => Ending::BackendReset,
            });
        }
    }
    if !down.done {
        if let Poll::Ready(Err(broke)) = down.poll_move(backend, client, up.done, sp, cx) {
            return Some(match broke {
                Broke::Source => Ending::BackendReset,
                Broke::Destination => Ending::ClientReset,
            });
        }
    }
    if up.done && down.done {
        return Some(Ending::Complete);
    }
    // A side whose FIN came is no longer read, so a reset it sends later
    // would go unnoticed: watch it for a hang-up. (Our write side toward it
    // is still open, so a hang-up there can only be a reset.)
    if up.done && client.poll_hang_up(cx).is_ready() {
        return Some(Ending::ClientReset);
    }
    if down.done && backend.poll_hang_up(cx).is_ready() {
        return Some(Ending::BackendReset);
    }
    None
}

/// Only a connection that passed both FINs on closes cleanly. Every other
/// ending is an abort, and both sockets are closed with a reset: a FIN would
/// tell a peer that reads until close (an HTTP/1.0 body, a dump) that a
/// cut-off stream is complete. For the side that failed it changes nothing;
/// for the other it is the whole point.
fn pass_on_reset(ending: Ending, client: &TcpStream, backend: &TcpStream) {
    if ending == Ending::Complete {
        return;
    }
    // If SO_LINGER cannot be set the socket closes with a FIN instead; the
    // connection is over either way, so there is nothing more to do.
    let _ = client.set_reset_on_close();
    let _ = backend.set_reset_on_close();
}

/// The idle and half-closed timeouts, with one timer re-armed lazily.
struct IdleTimer {
    limits: Limits,
    last_activity: Instant,
    sleep: Sleep,
    /// Whether the connection was half-closed at the last poll.
    half_closed: bool,
}

impl IdleTimer {
    fn new(limits: Limits) -> IdleTimer {
        let now = Instant::now();
        let sleep = time::sleep_until(now + limits.idle_timeout);
        IdleTimer {
            limits,
            last_activity: now,
            sleep,
            half_closed: false,
        }
    }

    /// Pending while the connection is alive; Ready with the timeout's
    /// ending once it has been silent too long.
    fn poll_expired(
        &mut self,
        cx: &mut Context<'_>,
        moved: bool,
        half_closed: Option<Side>,
    ) -> Poll<Ending> {
        let limit = match half_closed {
            // The side still sending is the one waited on.
            Some(Side::Client) => self.limits.server_fin_timeout,
            Some(Side::Backend) => self.limits.client_fin_timeout,
            None => self.limits.idle_timeout,
        }
        .min(self.limits.idle_timeout);
        let half_closed = half_closed.is_some();
        // The half-close itself starts the fin timeout: silence before it was
        // allowed (by the idle timeout), so it must not count against it.
        if moved || (half_closed && !self.half_closed) {
            self.last_activity = Instant::now();
        }
        self.half_closed = half_closed;
        loop {
            // A shorter limit (the connection just became half-closed) must
            // take effect now, not when the longer timer fires.
            let deadline = self.last_activity + limit;
            if deadline < self.sleep.deadline() {
                self.sleep.reset(deadline);
            }
            if Pin::new(&mut self.sleep).poll(cx).is_pending() {
                return Poll::Pending;
            }
            let deadline = self.last_activity + limit;
            if Instant::now() >= deadline {
                return Poll::Ready(if half_closed {
                    Ending::FinTimeout
                } else {
                    Ending::IdleTimeout
                });
            }
            // Bytes moved since the timer was armed: one re-arm for the rest.
            self.sleep.reset(deadline);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, TcpListener};

    use super::*;
    use crate::policy::limit::Limit;

    /// A connected pair on loopback: (our end, registered; the std peer).
    fn pair() -> (TcpStream, std::net::TcpStream) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        (TcpStream::from_std(ours).unwrap(), peer)
    }

    // A connection that falls back with bytes in its pipe (a splice out
    // failed with EINVAL) copies them out first, then the socket's, in order.
    #[test]
    fn a_fallback_copies_what_the_pipe_holds_before_reading_on() {
        runtime::Runtime::new().unwrap().block_on(async {
            let (source, mut writer) = pair();
            let (destination, mut reader) = pair();
            let pipes = Limit::new(Some(1));
            let mut held = splice::take(&pipes).unwrap();
            writer.write_all(b"first,").unwrap();
            let n = poll_fn(|cx| source.poll_splice_to(cx, &mut held.pipe)).await;
            assert_eq!(n.unwrap(), 6);
            writer.write_all(b" then the rest").unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
            let mut direction = Direction::default();
            direction.pipe = Some(held);
            let mut sp = SpliceState::new(Splicing {
                mode: Splice::On,
                pipes: &pipes,
            });
            sp.fall_back(&io::Error::from_raw_os_error(libc::EINVAL));
            let moved =
                poll_fn(|cx| direction.poll_move(&source, &destination, false, &mut sp, cx)).await;
            assert_eq!(moved, Ok(()));
            assert!(direction.done && !direction.splicing);
            assert_eq!((direction.bytes, direction.spliced), (20, 0));
            let mut got = String::new();
            reader.read_to_string(&mut got).unwrap();
            assert_eq!(got, "first, then the rest", "in order, then the FIN");
            drop(direction);
            assert_eq!(pipes.open(), 1, "the emptied pipe went back to the pool");
        });
    }
}
