//! The async driver of the relay machine (`conn/machine.rs`): one
//! connection's bytes in both directions, in one future, on our runtime.
//!
//! The machine says what to do next for each direction; this driver does
//! it with the runtime's `poll_*` calls, and waits the runtime's way: a call
//! that cannot go on returns `Pending` and leaves the task's waker with the
//! reactor, which wakes the task when the socket is ready. Each wake runs
//! both directions as far as they go, then the timer.
//!
//! ```text
//!   poll_fn, each wake:
//!     stop fired?                      ─▶ Event::Stop
//!     for the client's direction, then the backend's:
//!       loop: machine.op(from) ─▶ Read: poll_read | poll_splice_to        ─▶ Event::Got / Eof / Broke
//!                                 Write: poll_write(_before_fin) | splice ─▶ Event::Wrote / Broke
//!                                 Shutdown: shutdown(Write)               ─▶ Event::ShutDown / Broke
//!             until one is Pending (its waker is with the reactor) or the direction is done
//!     a done side that hangs up        ─▶ Event::HungUp
//!     the machine's deadline, through the Alarm ─▶ the Sleep ─▶ machine.on_deadline
//! ```
//!
//! Both directions are polled by the same future, so neither waits for the
//! other: a backend that speaks first (an SMTP banner) is relayed while the
//! client is still silent, and a client that streams a large upload keeps
//! sending while the response streams back.
//!
//! What this driver adds to the machine is how it holds bytes: a direction
//! copies through a buffer from the thread's pool (`conn/buffers.rs`), held
//! only while bytes are in flight, or, with the frontend's `splice` option,
//! moves them by `splice(2)` through a pipe (`conn/splice.rs`). To the
//! machine a pipe is a buffer: the bytes spliced in are read, the bytes
//! spliced out are written, and its FIN waits until the pipe is empty.

use std::future::Future;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use runtime::net::TcpStream;
use runtime::time::{self, Sleep};

use super::alarm::Alarm;
use super::buffers;
use super::machine::{Event, Flow, Machine, Op, Outcome};
use super::side::Side;
use super::splice::{self, Held, Splice, SpliceState, Splicing};
use super::timeouts::Timeouts;

/// The time of a wake, read from the clock only if an event needs it.
struct Now(Option<Instant>);

impl Now {
    fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// What carries one direction's bytes: a buffer or a pipe, each held only
/// while bytes are in flight.
#[derive(Debug, Default)]
struct Carrier {
    buffer: Option<Box<[u8]>>,
    /// The pipe, while bytes are in flight through it (boxed: most
    /// connections never splice, and an idle one keeps its carriers).
    pipe: Option<Box<Held>>,
    /// Moving by splice, not by copy.
    splicing: bool,
    /// Switch to splice before the next read (`auto` saw a full read; `on`).
    wants_splice: bool,
}

impl Carrier {
    fn new(mode: Splice) -> Carrier {
        let mut carrier = Carrier::default();
        carrier.wants_splice = mode == Splice::On;
        carrier
    }

    /// The machine's `Read`: into the buffer, or, splicing, into the pipe.
    fn poll_read(
        &mut self,
        from: Side,
        source: &TcpStream,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Event> {
        if self.wants_splice {
            self.start_splicing(sp);
        }
        if self.splicing {
            match self.poll_splice_in(from, source, sp, cx) {
                Some(poll) => return poll,
                None => self.splicing = false, // fell back: copy from here on
            }
        }
        let buffer = self.buffer.get_or_insert_with(buffers::take);
        let result = match source.poll_read(cx, buffer) {
            Poll::Ready(result) => result,
            Poll::Pending => {
                // Nothing in flight: the buffer goes back to the pool
                // while this direction waits.
                self.release();
                return Poll::Pending;
            }
        };
        if let Ok(n) = result {
            // `auto`: a read that fills the buffer is a bulk stream.
            self.wants_splice =
                sp.mode() == Splice::On || (sp.mode() == Splice::Auto && n == buffers::BUFFER_SIZE);
        }
        // The reactor saw the FIN and this read emptied the socket: the
        // bytes go with it (machine.rs, "A FIN that came with the bytes").
        ready_or_retry(Event::read(from, result, source.at_eof()), cx)
    }

    /// Splices from `source` into the empty pipe. `None`: these sockets
    /// cannot splice, or no pipe is to be had; go on by copy.
    fn poll_splice_in(
        &mut self,
        from: Side,
        source: &TcpStream,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Event>> {
        if self.pipe.is_none() {
            // It gave its own back while it waited.
            self.pipe = Some(Box::new(sp.take_pipe()?));
        }
        let held = self.pipe.as_mut()?;
        match source.poll_splice_to(cx, &mut held.pipe) {
            Poll::Ready(Err(e)) if splice::cannot_splice(&e) => {
                sp.fall_back(&e);
                self.release();
                None
            }
            Poll::Ready(result) => {
                if let Ok(n) = result {
                    sp.grow_if_filled(held, n);
                }
                Some(ready_or_retry(Event::read(from, result, false), cx))
            }
            Poll::Pending => {
                // Empty, and the source dry: back to the pool meanwhile.
                self.release();
                Some(Poll::Pending)
            }
        }
    }

    /// The machine's `Write` of bytes `start..end`: from the buffer, or,
    /// splicing, out of the pipe.
    fn poll_write(
        &mut self,
        from: Side,
        destination: &TcpStream,
        (start, end, fin_follows): (u32, u32, bool),
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Event> {
        if self.pipe.as_ref().is_some_and(|h| !h.pipe.is_empty()) {
            match self.poll_splice_out(from, destination, sp, cx) {
                Some(poll) => return poll,
                // Fell back: the pipe's bytes are in the buffer now.
                None => self.unsplice(start, end),
            }
        }
        let range = start as usize..end as usize;
        let Some(pending) = self.buffer.as_deref().and_then(|b| b.get(range)) else {
            // The bytes held are gone (a pipe that could not be read out):
            // the stream cannot go on whole.
            return Poll::Ready(Event::Broke(from));
        };
        let written = if fin_follows {
            destination.poll_write_before_fin(cx, pending)
        } else {
            destination.poll_write(cx, pending)
        };
        match written {
            Poll::Ready(result) => ready_or_retry(Event::wrote(from, result), cx),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Splices the pipe's bytes out to `destination`. `None`: these sockets
    /// cannot splice; the copy path writes what the pipe holds.
    fn poll_splice_out(
        &mut self,
        from: Side,
        destination: &TcpStream,
        sp: &mut SpliceState<'_>,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Event>> {
        let held = self.pipe.as_mut()?;
        let moved = match destination.poll_splice_from(cx, &mut held.pipe) {
            Poll::Pending => return Some(Poll::Pending),
            Poll::Ready(Err(e)) if splice::cannot_splice(&e) => {
                sp.fall_back(&e);
                return None;
            }
            Poll::Ready(moved) => moved,
        };
        if let Ok(n) = moved {
            sp.count(n);
        }
        Some(ready_or_retry(Event::wrote(from, moved), cx))
    }

    /// With the buffer empty (before a read): takes a pipe and splices from
    /// now on, if the connection may and the budget has one. No pipe: go on
    /// copying (and after a failed `pipe2`, the connection stops asking).
    fn start_splicing(&mut self, sp: &mut SpliceState<'_>) {
        self.wants_splice = false;
        if self.splicing || !sp.may_splice() {
            return;
        }
        if let Some(held) = sp.take_pipe() {
            if let Some(buffer) = self.buffer.take() {
                buffers::give(buffer);
            }
            self.pipe = Some(Box::new(held));
            self.splicing = true;
        }
    }

    /// A fallback with bytes in the pipe: they are bytes `start..end` of the
    /// direction (a pipe fills from 0, as a buffer does), read out into a
    /// buffer at those places for the copy path to write. A rare path (a
    /// socket that spliced in but cannot splice out), so the buffer is made
    /// to measure. If the pipe cannot be read, no buffer: the write reports
    /// the direction broken.
    fn unsplice(&mut self, start: u32, end: u32) {
        self.splicing = false;
        let Some(mut held) = self.pipe.take() else {
            return;
        };
        let mut buffer = vec![0u8; end as usize].into_boxed_slice();
        let mut at = start as usize;
        while at < buffer.len() {
            match held.pipe.read_into(&mut buffer[at..]) {
                Ok(n) if n > 0 => at += n,
                _ => break,
            }
        }
        splice::give(*held);
        self.buffer = (at == buffer.len()).then_some(buffer);
    }

    /// The bytes `start..end` it holds, taken out (a pipe's read out, as
    /// the copy path would), the buffer and the pipe given back; `None` if
    /// a pipe could not be read out whole.
    fn take_held(&mut self, start: usize, end: usize) -> Option<Vec<u8>> {
        let mut bytes = vec![0u8; end.saturating_sub(start)];
        if let Some(held) = self.pipe.as_mut().filter(|h| !h.pipe.is_empty()) {
            let mut at = 0;
            while at < bytes.len() {
                match held.pipe.read_into(&mut bytes[at..]) {
                    Ok(n) if n > 0 => at += n,
                    _ => return None,
                }
            }
        } else if !bytes.is_empty() {
            bytes.copy_from_slice(self.buffer.as_deref()?.get(start..end)?);
        }
        self.release();
        Some(bytes)
    }

    /// Holds `bytes` as bytes `start..end` of its buffer: a resumed relay's
    /// (the pool's buffer when they fit in one, else one made to measure).
    fn hold(&mut self, bytes: &[u8], start: usize, end: usize) {
        if bytes.is_empty() || end.saturating_sub(start) != bytes.len() {
            return;
        }
        let mut buffer = match end <= buffers::BUFFER_SIZE {
            true => buffers::take(),
            false => vec![0u8; end].into_boxed_slice(),
        };
        buffer[start..end].copy_from_slice(bytes);
        self.buffer = Some(buffer);
    }

    /// Gives the buffer and the pipe back (a pipe that still holds bytes is
    /// closed instead: splice.rs).
    fn release(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            buffers::give(buffer);
        }
        if let Some(held) = self.pipe.take() {
            splice::give(*held);
        }
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        self.release();
    }
}

/// A call that was interrupted (the event is `None`) is tried again at once.
fn ready_or_retry(event: Option<Event>, cx: &mut Context<'_>) -> Poll<Event> {
    match event {
        Some(event) => Poll::Ready(event),
        None => {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A relay stopped between two of its polls, whole: its machine, and the
/// bytes each direction had read and not yet written (a pipe's read out).
/// What a connection handover moves to another process, and what a relay
/// resumes from ([`Start::Resume`]). The sockets are the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    /// The relay machine, as it stood.
    pub machine: Machine,
    /// Per direction (by source: the client's first): the bytes
    /// `start..end` its machine says it holds.
    pub held: [Vec<u8>; 2],
    /// Bytes moved by splice so far.
    pub spliced: u64,
}

/// Where a relay starts.
#[derive(Debug)]
pub enum Start {
    /// Afresh, its backend just connected.
    Fresh,
    /// Where a parked relay stopped (boxed: a relay starts afresh all but
    /// once in its life, and a `Start` is kept for the relay's whole life
    /// by the futures that pass it on).
    Resume(Box<Parked>),
}

/// What may interrupt a relay from outside, between two of its polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// End now, both sides reset (`Ending::Stopped`).
    Stop,
    /// Park: give the whole state back, for another process.
    Park,
}

/// How a relay stopped.
#[derive(Debug)]
pub enum Stopped {
    /// It ended: both directions done, a side broke, a timeout, a stop.
    Over(Outcome),
    /// It was asked to park, and did.
    Parked(Box<Parked>),
}

/// Relays between `client` and `backend` until both directions are done,
/// one side fails, or a timeout expires. Unless both directions finished
/// cleanly, both sockets are set to reset when closed. Either way the caller
/// drops them as soon as it returns: for a complete relay, that close is
/// what sends the last FIN.
pub async fn relay(
    client: &TcpStream,
    backend: &TcpStream,
    timeouts: &Timeouts,
    splicing: Splicing<'_>,
) -> Outcome {
    relay_until(client, backend, timeouts, splicing, std::future::pending()).await
}

/// [`relay`], cut short (both sides reset, `Ending::Stopped`) when `stop`
/// completes: how a graceful stop ends the connections still open when its
/// grace period is over.
pub async fn relay_until(
    client: &TcpStream,
    backend: &TcpStream,
    timeouts: &Timeouts,
    splicing: Splicing<'_>,
    stop: impl Future<Output = ()>,
) -> Outcome {
    let stop = std::pin::pin!(async {
        stop.await;
        Interrupt::Stop
    });
    let sockets = [client, backend];
    match relay_or_park(sockets, timeouts, splicing, Start::Fresh, stop).await {
        Stopped::Over(outcome) => outcome,
        // `stop` never says park, so this relay never parks.
        Stopped::Parked(parked) => parked.machine.outcome(),
    }
}

/// [`relay_until`] from `start`, interrupted by what `interrupt` says when
/// it completes: [`Interrupt::Stop`] ends it as a stop does;
/// [`Interrupt::Park`], while the connection is open, makes it stop between
/// two polls and give its whole state back ([`Parked`]), having made no
/// call that another process could not take on from. `sockets` are the
/// client's, then the backend's. `interrupt` is polled in place: pin it
/// first (`pin!`), so that it is stored once, by the caller.
pub fn relay_or_park<'a, I>(
    sockets: [&'a TcpStream; 2],
    timeouts: &'a Timeouts,
    splicing: Splicing<'a>,
    start: Start,
    interrupt: I,
) -> RelayOrPark<'a, I>
where
    I: Future<Output = Interrupt> + Unpin,
{
    let (machine, carriers, spliced_before) = start.open(splicing.mode);
    RelayOrPark {
        sockets,
        timeouts,
        machine,
        carriers,
        sp: SpliceState::new(splicing, spliced_before),
        timer: Timer::default(),
        interrupt: Some(interrupt),
    }
}

/// The future of [`relay_or_park`], written by hand rather than as an
/// `async fn`: this is the state an open connection keeps while it waits,
/// and a hand-written future stores each piece of it once (an `async fn`
/// keeps its arguments for its whole life beside the locals it moves them
/// into, and its `poll_fn` closure a reference to each local).
pub struct RelayOrPark<'a, I> {
    sockets: [&'a TcpStream; 2],
    timeouts: &'a Timeouts,
    machine: Machine,
    carriers: [Carrier; 2],
    sp: SpliceState<'a>,
    timer: Timer,
    /// `None` once it completed: a finished future is not polled again.
    interrupt: Option<I>,
}

impl<I> std::fmt::Debug for RelayOrPark<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayOrPark")
            .field("machine", &self.machine)
            .finish_non_exhaustive()
    }
}

impl<I> Future for RelayOrPark<'_, I>
where
    I: Future<Output = Interrupt> + Unpin,
{
    type Output = Stopped;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Stopped> {
        let relay = self.get_mut();
        match relay.step(cx) {
            Poll::Ready(parked) => Poll::Ready(relay.finish(parked)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I> RelayOrPark<'_, I>
where
    I: Future<Output = Interrupt> + Unpin,
{
    /// One wake-up: the interrupt, both directions, the hang-ups, the
    /// timer. Ready once the connection is over (`false`) or asked to park
    /// (`true`).
    fn step(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut now = Now(None);
        let machine = &mut self.machine;
        let heard = match &mut self.interrupt {
            Some(interrupt) => Pin::new(interrupt).poll(cx),
            None => Poll::Pending,
        };
        if let Poll::Ready(interrupt) = heard {
            self.interrupt = None;
            match interrupt {
                Interrupt::Stop => machine.on(Event::Stop, now.get()),
                Interrupt::Park if !machine.is_closed() => return Poll::Ready(true),
                // Closed already: it ends below, with nothing to park.
                Interrupt::Park => {}
            }
        }
        for from in Side::BOTH {
            let carrier = &mut self.carriers[from.index()];
            let pair = (
                self.sockets[from.index()],
                self.sockets[from.other().index()],
            );
            drive(machine, from, carrier, pair, &mut self.sp, cx, &mut now);
        }
        watch_hang_ups(machine, self.sockets, cx, &mut now);
        if machine.is_closed() {
            return Poll::Ready(false);
        }
        self.timer.poll(machine, self.timeouts, cx).map(|()| false)
    }

    /// The relay's end: parked whole (`parked`, if its pipes could be read
    /// out), or over, both sockets set to reset unless it ended cleanly.
    fn finish(&mut self, parked: bool) -> Stopped {
        let spliced = self.sp.spliced();
        if parked {
            match park_carriers(&self.machine, &mut self.carriers) {
                Some(held) => {
                    let machine = self.machine;
                    return Stopped::Parked(Box::new(Parked {
                        machine,
                        held,
                        spliced,
                    }));
                }
                // A pipe that could not be read out: its bytes cannot go on
                // whole, so the connection ends, cut.
                None => self.machine.on(Event::Stop, Instant::now()),
            }
        }
        let mut outcome = self.machine.outcome();
        if !outcome.ending.is_clean() {
            // If SO_LINGER cannot be set the socket closes with a FIN
            // instead; the connection is over either way.
            for socket in self.sockets {
                let _ = socket.set_reset_on_close();
            }
        }
        outcome.spliced = spliced;
        outcome.splice_fallback = self.sp.fallback();
        Stopped::Over(outcome)
    }
}

impl Start {
    /// The machine and carriers a relay starts with, and the bytes spliced
    /// before.
    fn open(self, mode: Splice) -> (Machine, [Carrier; 2], u64) {
        let mut carriers = [Carrier::new(mode), Carrier::new(mode)];
        match self {
            Start::Fresh => (Machine::relaying(Instant::now()), carriers, 0),
            Start::Resume(parked) => {
                for from in Side::BOTH {
                    let d = parked.machine.direction(from);
                    let held = &parked.held[from.index()];
                    carriers[from.index()].hold(held, d.start as usize, d.end as usize);
                }
                (parked.machine, carriers, parked.spliced)
            }
        }
    }
}

/// Takes each direction's bytes out of its carrier (`None` if a pipe
/// could not be read out), and gives buffers and pipes back.
fn park_carriers(machine: &Machine, carriers: &mut [Carrier; 2]) -> Option<[Vec<u8>; 2]> {
    let mut held = [Vec::new(), Vec::new()];
    for from in Side::BOTH {
        let d = machine.direction(from);
        held[from.index()] = carriers[from.index()].take_held(d.start as usize, d.end as usize)?;
    }
    Some(held)
}

/// Runs the direction from `from` until an operation is pending, the
/// direction is done, or the connection is over.
fn drive(
    machine: &mut Machine,
    from: Side,
    carrier: &mut Carrier,
    (source, destination): (&TcpStream, &TcpStream),
    sp: &mut SpliceState<'_>,
    cx: &mut Context<'_>,
    now: &mut Now,
) {
    while let Some(op) = machine.op(from) {
        let done = match op {
            Op::Read => carrier.poll_read(from, source, sp, cx),
            Op::Write {
                start,
                end,
                fin_follows,
            } => carrier.poll_write(from, destination, (start, end, fin_follows), sp, cx),
            Op::Shutdown => {
                carrier.release();
                Poll::Ready(Event::shut(from, destination.shutdown(Shutdown::Write)))
            }
        };
        match done {
            Poll::Ready(event) => machine.on(event, now.get()),
            Poll::Pending => return,
        }
    }
    carrier.release();
}

/// A side whose FIN came is read no more, so a reset it sends later would
/// go unnoticed: it is watched for a hang-up instead. (Our write side
/// toward it is still open, so a hang-up there can only be a reset.)
fn watch_hang_ups(
    machine: &mut Machine,
    sockets: [&TcpStream; 2],
    cx: &mut Context<'_>,
    now: &mut Now,
) {
    for side in Side::BOTH {
        let done = machine.direction(side).flow == Flow::Done;
        if done && !machine.is_closed() && sockets[side.index()].poll_hang_up(cx).is_ready() {
            machine.on(Event::HungUp(side), now.get());
        }
    }
}

/// The runtime's timer for the machine's deadline, armed by the
/// [`Alarm`]'s rule: moved only to come earlier, and re-armed once when it
/// fires before a deadline that bytes pushed back. The time armed is the
/// sleep's own deadline until it fires: the alarm is made from it at each
/// look rather than kept beside it (16 bytes an idle connection does not
/// keep).
#[derive(Default)]
struct Timer {
    sleep: Option<Sleep>,
}

impl Timer {
    /// The time the timer is armed for: its sleep's, unless it fired.
    fn alarm(&self) -> Alarm {
        let armed = self.sleep.as_ref().filter(|s| !s.is_elapsed());
        Alarm::armed_at(armed.map(Sleep::deadline))
    }

    /// Pending while the connection lives; Ready once its deadline came.
    fn poll(&mut self, machine: &mut Machine, t: &Timeouts, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let mut alarm = self.alarm();
            if let Some(at) = alarm.arm(machine.deadline(t)) {
                match &mut self.sleep {
                    Some(sleep) => sleep.reset(at),
                    None => self.sleep = Some(time::sleep_until(at)),
                }
            }
            let Some(sleep) = self.sleep.as_mut().filter(|_| alarm.armed().is_some()) else {
                return Poll::Pending; // no limit the clock can say
            };
            if Pin::new(sleep).poll(cx).is_pending() {
                return Poll::Pending;
            }
            machine.on_deadline(Instant::now(), t);
            if machine.is_closed() {
                return Poll::Ready(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::io::{self, Read, Write};
    use std::net::{Ipv4Addr, TcpListener};

    use super::*;
    use crate::conn::splice::Pipes;
    use crate::policy::limit::Limit;

    /// A connected pair on loopback: (our end, registered; the std peer).
    fn pair() -> (TcpStream, std::net::TcpStream) {
        let (ours, peer) = std_pair();
        (TcpStream::from_std(ours).unwrap(), peer)
    }

    /// A connected pair on loopback, neither registered: (ours, the peer).
    fn std_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        (ours, peer)
    }

    // A connection that falls back with bytes in its pipe (a splice out
    // failed with EINVAL) copies them out first, then the socket's, in order.
    #[test]
    fn a_fallback_writes_what_the_pipe_holds_before_reading_on() {
        runtime::Runtime::new().unwrap().block_on(async {
            let (source, mut writer) = pair();
            let (destination, mut reader) = pair();
            let pipes = Pipes::new(Limit::new(Some(1)), Limit::new(None));
            let splicing = Splicing {
                mode: Splice::On,
                pipes: &pipes,
            };
            let mut sp = SpliceState::new(splicing, 0);
            let mut carrier = Carrier::new(Splice::On);
            let now = Instant::now();
            let mut machine = Machine::relaying(now);
            writer.write_all(b"first,").unwrap();
            let got = poll_fn(|cx| carrier.poll_read(Side::Client, &source, &mut sp, cx)).await;
            assert_eq!(
                got,
                Event::Got {
                    from: Side::Client,
                    n: 6,
                    fin_follows: false
                }
            );
            assert!(carrier.splicing, "spliced into the pipe");
            machine.on(got, now);
            writer.write_all(b" then the rest").unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
            // These sockets "cannot splice" from now on.
            sp.fall_back(&io::Error::from_raw_os_error(libc::EINVAL));
            carrier.unsplice(0, 6);
            assert!(!carrier.splicing && carrier.pipe.is_none());
            let t = Timeouts::default();
            let mut now = Now(None);
            poll_fn(|cx| {
                let sockets = (&source, &destination);
                drive(
                    &mut machine,
                    Side::Client,
                    &mut carrier,
                    sockets,
                    &mut sp,
                    cx,
                    &mut now,
                );
                match machine.op(Side::Client) {
                    None => Poll::Ready(()),
                    Some(_) => Poll::Pending,
                }
            })
            .await;
            assert_eq!(machine.direction(Side::Client).bytes, 20);
            assert!(machine.deadline(&t).is_some());
            drop(destination);
            let mut got = String::new();
            reader.read_to_string(&mut got).unwrap();
            assert_eq!(got, "first, then the rest", "in order, then the FIN");
            drop(carrier);
            assert_eq!(
                pipes.ceiling.open(),
                1,
                "the emptied pipe went back to the pool"
            );
        });
    }

    /// A relay parked mid-stream and resumed by another runtime, on another
    /// thread (as another process would take it on), delivers every byte
    /// once and in order, and counts them all.
    #[test]
    fn a_relay_parked_mid_stream_resumes_elsewhere_with_every_byte() {
        const TOTAL: usize = 4 << 20;
        let (source, mut writer) = std_pair();
        let (destination, mut reader) = std_pair();
        let sent = std::thread::spawn(move || {
            let chunk: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
            writer.write_all(&chunk).unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
        });
        let received = std::thread::spawn(move || {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).unwrap();
            got
        });
        let pipes = Pipes::new(Limit::new(Some(4)), Limit::new(None));
        let t = Timeouts::default();
        let splicing = Splicing {
            mode: Splice::Auto,
            pipes: &pipes,
        };
        let (source, destination, parked) = runtime::Runtime::new().unwrap().block_on(async {
            let source = TcpStream::from_std(source).unwrap();
            let destination = TcpStream::from_std(destination).unwrap();
            let park = runtime::time::sleep(std::time::Duration::from_millis(5));
            let sockets = [&source, &destination];
            let stopped = relay_or_park(
                sockets,
                &t,
                splicing,
                Start::Fresh,
                std::pin::pin!(async {
                    park.await;
                    Interrupt::Park
                }),
            )
            .await;
            let Stopped::Parked(parked) = stopped else {
                panic!("it ended before it parked: {stopped:?}");
            };
            (source.into_std(), destination.into_std(), parked)
        });
        let moved_before = parked.machine.direction(Side::Client).bytes;
        let outcome = std::thread::spawn(move || {
            runtime::Runtime::new().unwrap().block_on(async move {
                let (source, destination) = (
                    TcpStream::from_std(source).unwrap(),
                    TcpStream::from_std(destination).unwrap(),
                );
                let pipes = Pipes::new(Limit::new(Some(4)), Limit::new(None));
                let splicing = Splicing {
                    mode: Splice::Auto,
                    pipes: &pipes,
                };
                let t = Timeouts::default();
                // Only the client's direction has a peer here: the backend's
                // side is the same kind of socket, so its direction reads
                // the destination's reader, which sends nothing.
                let resumed = relay_or_park(
                    [&source, &destination],
                    &t,
                    splicing,
                    Start::Resume(parked),
                    std::future::pending::<Interrupt>(),
                );
                match resumed.await {
                    Stopped::Over(outcome) => outcome,
                    Stopped::Parked(_) => panic!("parked again"),
                }
            })
        });
        sent.join().unwrap();
        // The client's FIN went on; the reader's end then closes its side,
        // which ends the relay.
        let got = received.join().unwrap();
        assert_eq!(got.len(), TOTAL, "{moved_before} moved before the park");
        assert!(
            got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
            "in order"
        );
        let outcome = outcome.join().unwrap();
        assert_eq!(outcome.upstream, TOTAL as u64);
    }

    /// Bytes a parked relay held are the first its resumed relay writes.
    #[test]
    fn held_bytes_are_written_first_when_a_relay_resumes() {
        let (source, mut writer) = std_pair();
        let (destination, mut reader) = std_pair();
        let now = Instant::now();
        let mut machine = Machine::relaying(now);
        machine.on(
            Event::Got {
                from: Side::Client,
                n: 5,
                fin_follows: false,
            },
            now,
        );
        let parked = Parked {
            machine,
            held: [b"hello".to_vec(), Vec::new()],
            spliced: 0,
        };
        writer.write_all(b", world").unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
        let pipes = Pipes::new(Limit::new(Some(0)), Limit::new(None));
        let t = Timeouts::default();
        let splicing = Splicing {
            mode: Splice::Off,
            pipes: &pipes,
        };
        let reading = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            while got.len() < 12 {
                let n = reader.read(&mut buf).unwrap();
                assert!(n > 0, "closed early: {got:?}");
                got.extend_from_slice(&buf[..n]);
            }
            drop(reader);
            got
        });
        let stopped = runtime::Runtime::new().unwrap().block_on(async {
            let source = TcpStream::from_std(source).unwrap();
            let destination = TcpStream::from_std(destination).unwrap();
            let run = relay_or_park(
                [&source, &destination],
                &t,
                splicing,
                Start::Resume(Box::new(parked)),
                std::future::pending::<Interrupt>(),
            );
            run.await
        });
        assert_eq!(reading.join().unwrap(), b"hello, world");
        let Stopped::Over(outcome) = stopped else {
            panic!("parked")
        };
        assert_eq!(outcome.upstream, 12);
    }
}
