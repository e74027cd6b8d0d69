//! The new process's side of moving established connections: after it
//! took the listeners, it asks for them (`adopt`), and a thread ("adopt")
//! takes each batch the old process sends, with its descriptors and bytes,
//! gives it to the workers to adopt, and says each one's fate.
//!
//! ```text
//!   adopt thread (this file)                  the epoll mode (its `adopt` closure)
//!   ◀─ connections N + 2N descriptors
//!   ◀─ data ID up|down ...  (until every parcel has its bytes)
//!   Arrivals ─────────────────────────────▶ each to a worker: register both sockets,
//!                                            take its places, resume its relay
//!   ◀───────────────────────────────────── each one's fate
//!   adopted N: ID ok | ID refused WHY ─▶
//! ```
//!
//! A batch whose descriptors or bytes do not add up is refused whole:
//! those descriptors are this process's copies only, and closing them
//! changes nothing for the old process, which resumes the connections. The
//! thread ends when the old process closes the socket (it exited, having
//! nothing left to move) or says something that is not ours.

use std::io;
use std::os::fd::OwnedFd;

use super::parcel::Parcel;
use super::progress::{self, Way};
use super::socket::Endpoint;
use super::wire::{Fate, Message};

/// One connection come over: what travels with it, its client's socket
/// then its backend's, and the bytes each direction held.
#[derive(Debug)]
pub struct Arrival {
    /// What travels with it.
    pub parcel: Parcel,
    /// Its client's socket, then its backend's.
    pub sockets: [OwnedFd; 2],
    /// The bytes each direction held (the client's first).
    pub held: [Vec<u8>; 2],
}

/// Takes batches from `endpoint` until the old process is gone, each
/// adopted by `adopt`, which says every connection's fate in its order.
/// Each batch's fates are counted in [`progress`] ([`Way::In`]).
pub fn adopt_connections(
    endpoint: &Endpoint,
    adopt: &dyn Fn(Vec<Arrival>) -> Vec<Fate>,
) -> io::Result<()> {
    loop {
        // No deadline between batches: the old process sends stragglers as
        // they start relaying, and closes the socket when it exits.
        endpoint.set_deadline(std::time::Duration::ZERO)?;
        let (parcels, fds) = match endpoint.recv() {
            Ok((Message::Connections(parcels), fds)) => (parcels, fds),
            Ok((other, _)) => return Err(unexpected(&other)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let ids: Vec<u64> = parcels.iter().map(|p| p.id).collect();
        progress::sent(Way::In, ids.len() as u64);
        let fates = match arrivals(endpoint, parcels, fds) {
            Ok(arrivals) => adopt(arrivals),
            Err(why) => ids.iter().map(|_| Err(why.clone())).collect(),
        };
        let adopted = fates.iter().filter(|fate| fate.is_ok()).count() as u64;
        progress::fates(Way::In, adopted, fates.len() as u64 - adopted);
        let answer = Message::Adopted(ids.into_iter().zip(fates).collect());
        endpoint.send(&answer, &[])?;
    }
}

/// A batch's parcels, each with its two descriptors and then its bytes,
/// or why the batch does not add up.
fn arrivals(
    endpoint: &Endpoint,
    parcels: Vec<Parcel>,
    fds: Vec<OwnedFd>,
) -> Result<Vec<Arrival>, String> {
    let counts = (parcels.len(), fds.len());
    if counts.1 != 2 * counts.0 {
        return Err(format!(
            "{} connections came with {} descriptors",
            counts.0, counts.1
        ));
    }
    let mut fds = fds.into_iter();
    let mut arrivals = Vec::with_capacity(parcels.len());
    for parcel in parcels {
        let (Some(client), Some(backend)) = (fds.next(), fds.next()) else {
            return Err("a connection without its two descriptors".into());
        };
        let held = [
            Vec::with_capacity(parcel.held[0]),
            Vec::with_capacity(parcel.held[1]),
        ];
        arrivals.push(Arrival {
            parcel,
            sockets: [client, backend],
            held,
        });
    }
    fill(endpoint, &mut arrivals)?;
    Ok(arrivals)
}

/// Reads `data` messages until every arrival holds the bytes its parcel
/// says, in the order they were sent.
fn fill(endpoint: &Endpoint, arrivals: &mut [Arrival]) -> Result<(), String> {
    endpoint
        .set_deadline(std::time::Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let missing = |a: &Arrival| (0..2).any(|i| a.held[i].len() < a.parcel.held[i]);
    while arrivals.iter().any(missing) {
        let (id, from, bytes) = match endpoint.recv() {
            Ok((Message::Data { id, from, bytes }, _)) => (id, from, bytes),
            Ok((other, _)) => return Err(unexpected(&other).to_string()),
            Err(e) => return Err(format!("the bytes did not come: {e}")),
        };
        let arrival = arrivals
            .iter_mut()
            .find(|a| a.parcel.id == id)
            .ok_or(format!("bytes for connection {id}, not of this batch"))?;
        let (want, have) = (
            &arrival.parcel.held[from.index()],
            &mut arrival.held[from.index()],
        );
        if have.len() + bytes.len() > *want {
            return Err(format!("more bytes for connection {id} than it held"));
        }
        have.extend_from_slice(&bytes);
    }
    Ok(())
}

fn unexpected(message: &Message) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the old process sent {:?} where connections were due",
            message.text()
        ),
    )
}
