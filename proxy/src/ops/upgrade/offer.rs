//! The old process's side: a thread ("upgrade") that waits on the socket
//! file for a new process, and hands it the listeners and the health of
//! every backend, then tells the control thread to stop accepting once the
//! new process says it took them.
//!
//! ```text
//!   upgrade thread                         control thread (epoll/control.rs)
//!   accept ─ SO_PEERCRED ─ hello ─▶ Request::Handover ─▶ a copy of every listener
//!                                   ◀── Offer ────────── (each worker's, the admin's)
//!   listeners (≤ 253 each) ─ health ─ end                 and every backend's health
//!   ... the new process starts accepting ...
//!   taken ─▶ Request::Taken ─────────────────────────────▶ stop accepting, drain
//!   ok
//!   adopt ─▶ the mover: every worker parks its relays ─▶ Outbounds
//!   connections, data ─▶ ◀─ adopted            (hand.rs, until this process exits)
//! ```
//!
//! The copies of the listeners this side sends are never registered with
//! an epoll set here: they close plainly once sent. The workers' own
//! descriptors stay registered, and are removed from their epoll sets
//! before they close (adopted, `runtime/src/async_fd.rs`), which matters
//! now: the new process holds the same open files, so a close alone would
//! not take them out of the old epoll sets.
//!
//! A new process that gives up half-way (a bad configuration found late, a
//! bind error, a crash) closes its end: this side logs it, drops the copies
//! and waits for the next one. Nothing changed for the running workers.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use runtime::fd_passing::MAX_FDS;

use super::hand::{self, Outbound};
use super::progress::{self, Tally, Way};
use super::socket::{Endpoint, SocketFile};
use super::wire::{BackendStanding, Message, PARCEL_VERSION, Tag, Totals, VERSION};
use crate::ops::server_state::ServerLine;

/// How long each step of a session may take while the new process only
/// reads and writes messages.
const STEP: Duration = Duration::from_secs(10);
/// How long the new process may take, once it has everything, to start
/// its workers and say "taken".
const TAKE: Duration = Duration::from_secs(60);
/// Backends' health lines per message: a few kilobytes each.
const HEALTH_PER_MESSAGE: usize = 200;

/// What the control thread hands over for one session: a copy of every
/// listener with its tag, every checked backend's health, and the
/// counters' totals so far.
#[derive(Debug, Default)]
pub struct Offer {
    /// The listeners.
    pub listeners: Vec<(Tag, OwnedFd)>,
    /// The backends' health.
    pub health: Vec<BackendStanding>,
    /// The frontends' and backends' counters.
    pub totals: Vec<Totals>,
    /// What the operator said of each server.
    pub servers: Vec<ServerLine>,
}

/// What the upgrade thread asks of the control thread.
#[derive(Debug)]
pub enum Request {
    /// A new process (this pid) asks for the listeners: answer on `reply`.
    Handover {
        /// The new process.
        pid: i32,
        /// Where the offer goes.
        reply: std::sync::mpsc::SyncSender<io::Result<Offer>>,
    },
    /// The new process took them and accepts: stop accepting and drain.
    Taken {
        /// The new process.
        pid: u32,
    },
}

/// What the epoll mode does when a new process adopts established
/// connections: have every worker park its relays and send them on this.
pub type Mover = Box<dyn Fn(std::sync::mpsc::Sender<Outbound>) + Send>;

/// How long a new process may take, once it said "taken", to ask for the
/// established connections; an older binary never does.
const ASK: Duration = Duration::from_secs(5);

/// Starts the upgrade thread on `file`; it asks `requests` (the control
/// thread) for what to hand over, and `mover` for the established
/// connections. It ends after a handover that worked, once the connections
/// are moved (or the process exits meanwhile).
pub fn spawn_offering(
    file: Arc<SocketFile>,
    requests: runtime::mpsc::Sender<Request>,
    mover: Mover,
) -> io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("upgrade".into())
        .spawn(move || offer_until_taken(&file, &requests, &mover))
}

fn offer_until_taken(file: &SocketFile, requests: &runtime::mpsc::Sender<Request>, mover: &Mover) {
    loop {
        let endpoint = match file.accept() {
            Ok(endpoint) => endpoint,
            Err(e) => {
                crate::error!("{e}; upgrades are off from now on");
                return;
            }
        };
        match session(&endpoint, requests) {
            Ok(pid) => {
                crate::info!("upgrade: pid {pid} took the listeners");
                hand_over_connections(&endpoint, pid, mover);
                return;
            }
            Err(e) => crate::warn!("upgrade: {e}; this process goes on serving"),
        }
    }
}

/// The second phase: the established connections to the new process, if
/// it asks for them in a format this process writes; else they drain here.
fn hand_over_connections(endpoint: &Endpoint, pid: u32, mover: &Mover) {
    let asked = endpoint.set_deadline(ASK).and_then(|()| endpoint.recv());
    match asked {
        Ok((Message::Adopt { version }, _)) if version == PARCEL_VERSION => {}
        Ok((Message::Adopt { version }, _)) => {
            crate::warn!(
                "upgrade: pid {pid} reads connections in format {version}, this process writes \
                 {PARCEL_VERSION}: they drain here"
            );
            return;
        }
        Ok((other, _)) => {
            let text = other.text();
            crate::warn!("upgrade: pid {pid} said {text:?}; the connections drain here");
            return;
        }
        Err(e) => {
            crate::info!("upgrade: pid {pid} takes no connections ({e}); they drain here");
            return;
        }
    }
    let (outbound, parked) = std::sync::mpsc::channel();
    mover(outbound);
    crate::info!("upgrade: moving the established connections to pid {pid}");
    progress::begin(Way::Out, pid);
    let ended = hand::move_connections(endpoint, &parked);
    let Tally {
        adopted, refused, ..
    } = progress::end(Way::Out);
    // Its end, when all went well, is this process's exit, which says it
    // (epoll/control.rs): the workers hold the way here to the last.
    if let Err(e) = ended {
        crate::warn!(
            "upgrade: moving to pid {pid} ended ({e}): {adopted} moved, {refused} resumed here; \
             the rest drain here"
        );
    }
}

/// One new process, from its hello to its "taken": its pid.
fn session(endpoint: &Endpoint, requests: &runtime::mpsc::Sender<Request>) -> io::Result<u32> {
    endpoint.set_deadline(STEP)?;
    let peer = endpoint.check_peer(None)?;
    let pid = match endpoint.recv()?.0 {
        Message::Hello {
            version: VERSION,
            pid,
        } => pid,
        Message::Hello { version, .. } => {
            return Err(refused(format!(
                "pid {peer} speaks version {version} of the handover, this process {VERSION}"
            )));
        }
        other => {
            return Err(refused(format!("pid {peer} began with {:?}", other.text())));
        }
    };
    crate::info!("upgrade: pid {pid} asks for the listeners");
    let (reply, offer) = std::sync::mpsc::sync_channel(1);
    requests
        .send(Request::Handover { pid: peer, reply })
        .map_err(|_| refused("the control thread is gone".into()))?;
    let offer = match offer.recv_timeout(STEP) {
        Ok(offer) => offer?,
        Err(_) => return Err(refused("this process is stopping; no handover".into())),
    };
    send_offer(endpoint, &offer)?;
    endpoint.set_deadline(TAKE)?;
    let gave_up = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("pid {pid} gave up before taking the listeners: {e}"),
        )
    };
    match endpoint.recv().map_err(gave_up)?.0 {
        Message::Taken { pid } => {
            // "ok" first: with nothing to drain, this process exits as soon
            // as the control thread hears "taken", and the new one would
            // read an end of file instead. (It serves already either way.)
            let _ = endpoint.send(&Message::Ok, &[]);
            let _ = requests.send(Request::Taken { pid });
            Ok(pid)
        }
        other => Err(refused(format!("pid {pid} answered {:?}", other.text()))),
    }
}

/// The listeners in batches of at most [`MAX_FDS`], the health, the end.
fn send_offer(endpoint: &Endpoint, offer: &Offer) -> io::Result<()> {
    for batch in offer.listeners.chunks(MAX_FDS) {
        let tags = batch.iter().map(|(tag, _)| tag.clone()).collect();
        let fds: Vec<_> = batch.iter().map(|(_, fd)| fd.as_fd()).collect();
        endpoint.send(&Message::Listeners(tags), &fds)?;
    }
    for batch in offer.health.chunks(HEALTH_PER_MESSAGE) {
        endpoint.send(&Message::Health(batch.to_vec()), &[])?;
    }
    for batch in offer.totals.chunks(HEALTH_PER_MESSAGE) {
        endpoint.send(&Message::Counters(batch.to_vec()), &[])?;
    }
    for batch in offer.servers.chunks(HEALTH_PER_MESSAGE) {
        endpoint.send(&Message::Servers(batch.to_vec()), &[])?;
    }
    endpoint.send(
        &Message::End {
            pid: std::process::id(),
        },
        &[],
    )
}

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    // More listeners than one message may carry (SCM_MAX_FD, 253) go in
    // batches, each tag with its own descriptor, in order.
    #[test]
    fn three_hundred_listeners_go_in_batches_of_at_most_253() {
        let dir = std::env::temp_dir().join(format!("proxy-offer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("0700");
        let path = dir.join("upgrade.sock");
        let mut file = SocketFile::create(&path, false, None).expect("the socket file");
        file.put_in_place(&path).expect("in place");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let bound = listener.local_addr().expect("its address");
        let offer = Offer {
            listeners: (0..300)
                .map(|worker| {
                    let tag = Tag::Frontend {
                        name: "web".into(),
                        configured: bound,
                        bound,
                        worker,
                    };
                    (tag, OwnedFd::from(listener.try_clone().expect("a copy")))
                })
                .collect(),
            health: Vec::new(),
            totals: Vec::new(),
            servers: Vec::new(),
        };
        let new = Endpoint::connect(&path).expect("connect");
        new.set_deadline(Duration::from_secs(10)).expect("deadline");
        let old = file.accept().expect("accept");
        send_offer(&old, &offer).expect("sent");
        let mut batches = Vec::new();
        let mut workers = Vec::new();
        for _ in 0..10 {
            match new.recv().expect("a message") {
                (Message::Listeners(tags), fds) => {
                    assert_eq!(tags.len(), fds.len());
                    batches.push(fds.len());
                    for (tag, fd) in tags.into_iter().zip(fds) {
                        let copy = std::net::TcpListener::from(fd);
                        assert_eq!(copy.local_addr().ok(), Some(bound));
                        if let Tag::Frontend { worker, .. } = tag {
                            workers.push(worker);
                        }
                    }
                }
                (Message::End { pid }, _) => {
                    assert_eq!(pid, std::process::id());
                    break;
                }
                (other, _) => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(batches, [253, 47]);
        assert_eq!(workers, (0..300).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
