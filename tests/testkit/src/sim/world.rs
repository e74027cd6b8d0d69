//! The virtual world one simulated connection lives in: a client and a
//! backend (the peers), and the kernel's queues between each of them and
//! the proxy (the legs). The proxy's system calls are methods here, with
//! what a real socket would answer: short reads and writes, would-block,
//! end of file, a reset.
//!
//! ```text
//!   client ──send──▶ [inbound  ▸ cap] ──read──▶          ◀──read── [inbound ▸ cap] ◀──send── backend
//!          ◀──read── [outbound ▸ cap] ◀──write── proxy ──write──▶ [outbound ▸ cap] ──read──▶
//!   a FIN waits behind the bytes it follows; a reset discards what is queued
//! ```
//!
//! A peer checks every byte it reads against the other peer's stream at
//! that offset (in order, once), and every end of file it sees against
//! what the other peer did (a FIN, after all its bytes).

use std::collections::VecDeque;
use std::io;

use proxy::conn::side::Side;

use super::Violation;

/// Byte `i` of the stream `side` sends: a pattern with no short period, so
/// a byte lost, doubled or moved is seen.
pub fn byte_of(side: Side, i: usize) -> u8 {
    let x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
    x as u8 ^ (side.index() as u8 * 0x5a)
}

/// How a peer ends its side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Sends its whole stream, then a FIN.
    Fin,
    /// Sends `after` bytes, then resets.
    Reset {
        /// Bytes sent before the reset.
        after: usize,
    },
    /// Sends its whole stream, then nothing: only a timeout ends it.
    Silent,
}

/// One peer: what it sends and what it has seen.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The length of its stream.
    pub len: usize,
    /// How it ends.
    pub plan: Plan,
    /// Bytes of its stream handed to the kernel.
    pub sent: usize,
    /// Its FIN is sent.
    pub fin_sent: bool,
    /// It reset the connection.
    pub reset_sent: bool,
    /// Bytes it read from the proxy.
    pub received: usize,
    /// It read the proxy's FIN.
    pub eof_seen: bool,
    /// It saw the proxy's reset.
    pub rst_seen: bool,
    /// It does not read for now (backpressure on the proxy).
    pub paused: bool,
}

/// How the proxy closed a leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// With a FIN after what was queued.
    Fin,
    /// With a reset: what was queued is lost.
    Reset,
}

/// The kernel's queues between one peer and the proxy.
#[derive(Debug, Clone)]
pub struct Leg {
    /// The peer's bytes the proxy has not read.
    pub inbound: VecDeque<u8>,
    /// How many `inbound` holds at most (both ends' buffers).
    pub inbound_cap: usize,
    /// The peer's FIN, behind `inbound`.
    pub inbound_fin: bool,
    /// The proxy's bytes the peer has not read.
    pub outbound: VecDeque<u8>,
    /// How many `outbound` holds at most.
    pub outbound_cap: usize,
    /// The proxy's FIN (its `shutdown(Write)`), behind `outbound`.
    pub outbound_fin: bool,
    /// The peer reset: the proxy's calls fail.
    pub peer_reset: bool,
    /// How the proxy closed it.
    pub closed: Option<Closed>,
}

/// Both peers and both legs, indexed by `Side`.
#[derive(Debug, Clone)]
pub struct World {
    /// The client and the backend.
    pub peers: [Peer; 2],
    /// Their legs to the proxy.
    pub legs: [Leg; 2],
}

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

impl Peer {
    /// A peer that will send `len` bytes and end by `plan`.
    pub fn new(len: usize, plan: Plan) -> Peer {
        Peer {
            len,
            plan,
            sent: 0,
            fin_sent: false,
            reset_sent: false,
            received: 0,
            eof_seen: false,
            rst_seen: false,
            paused: false,
        }
    }

    /// How many bytes it still has to send before its plan's end.
    pub fn to_send(&self) -> usize {
        match self.plan {
            Plan::Reset { after } => after.min(self.len).saturating_sub(self.sent),
            Plan::Fin | Plan::Silent => self.len - self.sent,
        }
    }

    /// Whether it has done all it will do (sent, and ended as planned).
    pub fn has_ended(&self) -> bool {
        self.to_send() == 0
            && match self.plan {
                Plan::Fin => self.fin_sent,
                Plan::Reset { .. } => self.reset_sent,
                Plan::Silent => true,
            }
    }

    /// Whether it sent a FIN after every byte of its stream.
    pub fn finished_cleanly(&self) -> bool {
        self.fin_sent && !self.reset_sent && self.sent == self.len
    }
}

impl Leg {
    /// A leg whose queues hold `inbound_cap` and `outbound_cap` bytes.
    pub fn new(inbound_cap: usize, outbound_cap: usize) -> Leg {
        Leg {
            inbound: VecDeque::new(),
            inbound_cap: inbound_cap.max(1),
            inbound_fin: false,
            outbound: VecDeque::new(),
            outbound_cap: outbound_cap.max(1),
            outbound_fin: false,
            peer_reset: false,
            closed: None,
        }
    }
}

impl World {
    /// The leg of `side`.
    pub fn leg(&self, side: Side) -> &Leg {
        &self.legs[side.index()]
    }

    fn leg_mut(&mut self, side: Side) -> &mut Leg {
        &mut self.legs[side.index()]
    }

    /// The peer at `side`.
    pub fn peer(&self, side: Side) -> &Peer {
        &self.peers[side.index()]
    }

    // ---- the proxy's calls ----

    /// Whether a read of `side` would not block.
    pub fn readable(&self, side: Side) -> bool {
        let leg = self.leg(side);
        !leg.inbound.is_empty() || leg.inbound_fin || leg.peer_reset
    }

    /// Whether a write to `side` would not block.
    pub fn writable(&self, side: Side) -> bool {
        let leg = self.leg(side);
        leg.outbound.len() < leg.outbound_cap || leg.peer_reset
    }

    /// `read(2)` on the proxy's socket of `side`, taking at most `short`
    /// bytes (a short read) and at most `buf.len()`.
    pub fn read(&mut self, side: Side, buf: &mut [u8], short: usize) -> io::Result<usize> {
        let leg = self.leg_mut(side);
        if leg.peer_reset {
            return Err(reset());
        }
        if leg.inbound.is_empty() {
            return match leg.inbound_fin {
                true => Ok(0),
                false => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        let n = buf.len().min(leg.inbound.len()).min(short.max(1));
        for (slot, byte) in buf.iter_mut().zip(leg.inbound.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }

    /// Whether the source `side`'s FIN is queued right behind what was read.
    pub fn fin_is_next(&self, side: Side) -> bool {
        let leg = self.leg(side);
        leg.inbound.is_empty() && leg.inbound_fin
    }

    /// `write(2)` of `bytes` to the proxy's socket of `side`, taking at most
    /// `short` of them (a short write).
    pub fn write(&mut self, side: Side, bytes: &[u8], short: usize) -> io::Result<usize> {
        let leg = self.leg_mut(side);
        if leg.peer_reset {
            return Err(reset());
        }
        if leg.outbound_fin || leg.closed.is_some() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let room = leg.outbound_cap - leg.outbound.len();
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = bytes.len().min(room).min(short.max(1));
        leg.outbound.extend(&bytes[..n]);
        Ok(n)
    }

    /// `shutdown(Write)` on the proxy's socket of `side`: its FIN, behind
    /// what is queued. A reset socket is no longer connected.
    pub fn shutdown(&mut self, side: Side) -> io::Result<()> {
        let leg = self.leg_mut(side);
        if leg.peer_reset {
            return Err(io::ErrorKind::NotConnected.into());
        }
        leg.outbound_fin = true;
        Ok(())
    }

    /// `close(2)` of the proxy's socket of `side`. As Linux does, a close
    /// with bytes still unread in the receive queue is a reset, whatever
    /// was asked (the FIN itself is not data).
    pub fn close(&mut self, side: Side, how: Closed) {
        let leg = self.leg_mut(side);
        let how = match how {
            Closed::Fin if !leg.inbound.is_empty() => Closed::Reset,
            how => how,
        };
        if how == Closed::Reset {
            leg.outbound.clear();
        }
        leg.closed = Some(how);
    }

    // ---- the peers' moves ----

    /// The peer at `side` sends up to `n` bytes, as many as its queue takes.
    pub fn peer_send(&mut self, side: Side, n: usize) -> bool {
        let i = side.index();
        let (peer, leg) = (&self.peers[i], &self.legs[i]);
        let room = leg.inbound_cap.saturating_sub(leg.inbound.len());
        let n = n.min(peer.to_send()).min(room);
        if n == 0 || leg.closed.is_some() || peer.reset_sent || peer.fin_sent {
            return false;
        }
        let start = peer.sent;
        self.legs[i]
            .inbound
            .extend((start..start + n).map(|k| byte_of(side, k)));
        self.peers[i].sent += n;
        true
    }

    /// The peer at `side` ends its sending as planned, if it has sent what
    /// comes before: a FIN, or a reset (which discards every queue).
    pub fn peer_end(&mut self, side: Side) -> bool {
        let i = side.index();
        let peer = &self.peers[i];
        if peer.to_send() > 0 || peer.has_ended() || self.legs[i].closed.is_some() {
            return false;
        }
        match peer.plan {
            Plan::Fin => {
                self.peers[i].fin_sent = true;
                self.legs[i].inbound_fin = true;
            }
            Plan::Reset { .. } => {
                self.peers[i].reset_sent = true;
                let leg = &mut self.legs[i];
                leg.peer_reset = true;
                leg.inbound.clear();
                leg.outbound.clear();
            }
            Plan::Silent => return false,
        }
        true
    }

    /// The peer at `side` reads up to `n` bytes, checking each against the
    /// other peer's stream, then the end of file or the reset behind them.
    pub fn peer_read(&mut self, side: Side, n: usize) -> Result<bool, Violation> {
        let i = side.index();
        if self.peers[i].reset_sent || self.peers[i].paused {
            return Ok(false);
        }
        let mut moved = false;
        for _ in 0..n {
            let Some(byte) = self.legs[i].outbound.pop_front() else {
                break;
            };
            let at = self.peers[i].received;
            let expected = byte_of(side.other(), at);
            if byte != expected {
                return Err(Violation::new(
                    "bytes out of order",
                    format!(
                        "the {side} read {byte:#04x} at offset {at}, where the {} sent {expected:#04x}",
                        side.other()
                    ),
                ));
            }
            self.peers[i].received += 1;
            moved = true;
        }
        if self.legs[i].outbound.is_empty() {
            moved |= self.peer_sees_the_end(side)?;
        }
        Ok(moved)
    }

    /// With nothing left to read: the proxy's FIN or reset, if one came.
    fn peer_sees_the_end(&mut self, side: Side) -> Result<bool, Violation> {
        let i = side.index();
        let leg = &self.legs[i];
        let (eof_seen, rst_seen) = (self.peers[i].eof_seen, self.peers[i].rst_seen);
        let eof = leg.outbound_fin || leg.closed == Some(Closed::Fin);
        if leg.closed == Some(Closed::Reset) && !rst_seen {
            self.peers[i].rst_seen = true;
            return Ok(true);
        }
        if !eof || eof_seen || rst_seen {
            return Ok(false);
        }
        self.peers[i].eof_seen = true;
        let peer = &self.peers[i];
        let other = &self.peers[side.other().index()];
        if !other.finished_cleanly() || peer.received != other.len {
            return Err(Violation::new(
                "a FIN that was not earned",
                format!(
                    "the {side} read the end of the stream after {} bytes, but the {} sent {} of \
                     {} and {}",
                    peer.received,
                    side.other(),
                    other.sent,
                    other.len,
                    if other.reset_sent {
                        "reset"
                    } else if other.fin_sent {
                        "its FIN"
                    } else {
                        "no FIN"
                    }
                ),
            ));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        World {
            peers: [
                Peer::new(5, Plan::Fin),
                Peer::new(3, Plan::Reset { after: 2 }),
            ],
            legs: [Leg::new(4, 4), Leg::new(4, 4)],
        }
    }

    #[test]
    fn queues_bound_sends_and_reads_come_short_and_in_order() {
        let mut w = world();
        assert!(w.peer_send(Side::Client, 10));
        assert_eq!(w.leg(Side::Client).inbound.len(), 4, "the queue's cap");
        let mut buf = [0u8; 8];
        assert_eq!(w.read(Side::Client, &mut buf, 3).expect("bytes"), 3);
        assert_eq!(buf[..3], [0, 1, 2].map(|i| byte_of(Side::Client, i)));
        assert!(!w.peer_end(Side::Client), "not all sent yet");
        assert!(w.peer_send(Side::Client, 10));
        assert!(w.peer_end(Side::Client));
        assert_eq!(w.read(Side::Client, &mut buf, 8).expect("bytes"), 2);
        assert!(w.fin_is_next(Side::Client));
        assert_eq!(w.read(Side::Client, &mut buf, 8).expect("EOF"), 0);
    }

    #[test]
    fn a_peer_checks_every_byte_and_every_end_it_reads() {
        let mut w = world();
        let wrong = [byte_of(Side::Client, 1)];
        assert_eq!(w.write(Side::Backend, &wrong, 9).expect("taken"), 1);
        let e = w.peer_read(Side::Backend, 9).expect_err("out of order");
        assert_eq!(e.kind, "bytes out of order");
        let mut w = world();
        w.shutdown(Side::Backend).expect("shut");
        let e = w
            .peer_read(Side::Backend, 9)
            .expect_err("no FIN from the client");
        assert_eq!(e.kind, "a FIN that was not earned");
    }

    #[test]
    fn a_reset_fails_the_proxys_calls_and_a_close_over_unread_bytes_resets() {
        let mut w = world();
        assert!(w.peer_send(Side::Backend, 9));
        assert!(w.peer_end(Side::Backend));
        let mut buf = [0u8; 4];
        assert!(w.read(Side::Backend, &mut buf, 4).is_err());
        assert!(w.write(Side::Backend, b"x", 1).is_err());
        assert!(w.peer_send(Side::Client, 1));
        w.close(Side::Client, Closed::Fin);
        assert_eq!(w.leg(Side::Client).closed, Some(Closed::Reset));
        assert!(w.peer_read(Side::Client, 1).expect("the reset"));
        assert!(w.peer(Side::Client).rst_seen);
    }
}
