//! The old process's side of moving established connections: once the new
//! process accepts on the listeners and asks for them (`adopt`), each
//! relaying connection, parked by its worker, comes here as an
//! [`Outbound`], goes over in a batch, and learns its fate.
//!
//! ```text
//!   worker: relay parked ─ both sockets out of its epoll set ─ bytes taken out ─▶ Outbound
//!   upgrade thread (this file): a batch (≤ 126: two descriptors each, SCM_MAX_FD 253)
//!     connections N + 2N descriptors ─▶ data ID up|down (the bytes held) ─▶
//!     ◀─ adopted N: ID ok | ID refused WHY
//!   ok:      the new process registered them: this side closes its copies
//!   refused: the sockets and bytes go back to the worker, which resumes the relay
//! ```
//!
//! Two phases, so that nothing is lost whatever fails: until the new process
//! says `ok` for a connection, this process keeps its descriptors (the same
//! sockets), and a new process that dies, refuses, or falls silent leaves
//! every connection of the batch resuming here where it stood. One batch is
//! in flight at a time: the descriptors in flight count against this
//! process's descriptor limit, and the new process's, until received.
//!
//! An [`Outbound`] never vanishes without its answer: dropped unanswered
//! (this thread ending on an error), it gives its sockets back as refused.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use runtime::fd_passing::MAX_FDS;
use runtime::oneshot;

use super::parcel::Parcel;
use super::progress::{self, Way};
use super::socket::{Endpoint, MAX_MESSAGE};
use super::wire::{Fate, Message};
use crate::conn::side::Side;

/// Connections per batch: two descriptors each.
pub const BATCH: usize = MAX_FDS / 2;
/// Bytes of one `data` message, its line aside.
const DATA_CHUNK: usize = MAX_MESSAGE - 256;
/// How long the new process may take to answer a batch: above its own
/// bound on its workers (`epoll/handover.rs`), which answer in time or refuse.
const ANSWER: Duration = Duration::from_secs(30);
/// How long this side waits for more connections before it looks again.
const IDLE: Duration = Duration::from_millis(200);

/// What a connection gets back.
#[derive(Debug)]
pub enum Returned {
    /// The new process adopted it: this process's copies are closed.
    Adopted,
    /// It stays here: why, and its sockets and bytes, to resume with.
    Refused {
        /// Why it was not adopted.
        why: String,
        /// Its client's socket, then its backend's.
        sockets: [OwnedFd; 2],
        /// The bytes each direction held.
        held: [Vec<u8>; 2],
    },
}

/// One connection on its way out (module docs).
#[derive(Debug)]
pub struct Outbound {
    /// What travels with it.
    pub parcel: Parcel,
    goods: Option<([OwnedFd; 2], [Vec<u8>; 2])>,
    fate: Option<oneshot::Sender<Returned>>,
}

impl Outbound {
    /// A connection to send: its parcel, its sockets (out of every epoll
    /// set), the bytes each direction held, and where its fate goes.
    pub fn new(
        parcel: Parcel,
        sockets: [OwnedFd; 2],
        held: [Vec<u8>; 2],
        fate: oneshot::Sender<Returned>,
    ) -> Outbound {
        Outbound {
            parcel,
            goods: Some((sockets, held)),
            fate: Some(fate),
        }
    }

    /// Says its fate: adopted (its copies close here), or refused (they go
    /// back, with its bytes).
    pub fn answer(mut self, fate: Fate) {
        self.settle(fate);
    }

    fn settle(&mut self, fate: Fate) {
        let (Some((sockets, held)), Some(tx)) = (self.goods.take(), self.fate.take()) else {
            return;
        };
        let returned = match fate {
            Ok(()) => {
                drop(sockets);
                Returned::Adopted
            }
            Err(why) => Returned::Refused { why, sockets, held },
        };
        // A worker that is gone (its process exiting) takes nothing back.
        let _ = tx.send(returned);
    }

    fn sockets(&self) -> impl Iterator<Item = std::os::fd::BorrowedFd<'_>> {
        self.goods
            .iter()
            .flat_map(|(s, _)| s.iter().map(AsFd::as_fd))
    }

    fn held(&self) -> Option<&[Vec<u8>; 2]> {
        self.goods.as_ref().map(|(_, held)| held)
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        self.settle(Err("the handover ended before its answer".into()));
    }
}

/// Sends the connections that come on `outbound` to the new process at
/// `endpoint`, a batch at a time, until every sender is gone or the new
/// process is: then the connections not sent resume here. Each batch's
/// fates are counted in [`progress`] ([`Way::Out`]).
pub fn move_connections(endpoint: &Endpoint, outbound: &Receiver<Outbound>) -> io::Result<()> {
    loop {
        let first = match outbound.recv_timeout(IDLE) {
            Ok(first) => first,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match outbound.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        progress::sent(Way::Out, batch.len() as u64);
        match send_batch(endpoint, &batch).and_then(|()| fates(endpoint, &batch)) {
            Ok(fates) => {
                let held: usize = batch
                    .iter()
                    .map(|o| o.parcel.held.iter().sum::<usize>())
                    .sum();
                let adopted = fates.iter().filter(|fate| fate.is_ok()).count() as u64;
                let refused = fates.len() as u64 - adopted;
                progress::fates(Way::Out, adopted, refused);
                for (outbound, fate) in batch.into_iter().zip(fates) {
                    outbound.answer(fate);
                }
                crate::info!(
                    "upgrade: moved a batch of {} connections holding {held} bytes: {adopted} adopted, \
                     {refused} refused",
                    adopted + refused
                );
            }
            Err(e) => {
                progress::fates(Way::Out, 0, batch.len() as u64);
                let why = format!("the new process did not adopt it: {e}");
                for outbound in batch {
                    outbound.answer(Err(why.clone()));
                }
                return Err(e);
            }
        }
    }
}

/// One batch: its parcels with their descriptors, then their bytes.
fn send_batch(endpoint: &Endpoint, batch: &[Outbound]) -> io::Result<()> {
    let parcels = batch.iter().map(|o| o.parcel.clone()).collect();
    let fds: Vec<_> = batch.iter().flat_map(Outbound::sockets).collect();
    endpoint.send(&Message::Connections(parcels), &fds)?;
    for outbound in batch {
        let Some(held) = outbound.held() else {
            continue;
        };
        for from in Side::BOTH {
            for chunk in held[from.index()].chunks(DATA_CHUNK) {
                let data = Message::Data {
                    id: outbound.parcel.id,
                    from,
                    bytes: chunk.to_vec(),
                };
                endpoint.send(&data, &[])?;
            }
        }
    }
    Ok(())
}

/// The new process's answer for `batch`, in its order; a connection it
/// did not name is refused.
fn fates(endpoint: &Endpoint, batch: &[Outbound]) -> io::Result<Vec<Fate>> {
    endpoint.set_deadline(ANSWER)?;
    let answered = match endpoint.recv()?.0 {
        Message::Adopted(fates) => fates,
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the new process answered {:?}", other.text()),
            ));
        }
    };
    Ok(batch
        .iter()
        .map(|o| {
            answered
                .iter()
                .find(|(id, _)| *id == o.parcel.id)
                .map_or_else(
                    || Err("the new process did not say".into()),
                    |(_, f)| f.clone(),
                )
        })
        .collect())
}
