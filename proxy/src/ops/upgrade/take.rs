//! The new process's side: connect to the old process's socket, check
//! that it runs as our user, and take what it hands over; once the
//! workers accept on the listeners, [`Handed::confirm`] says "taken".
//!
//! Everything here runs on the main thread before any worker starts, with
//! blocking calls bounded by deadlines: a failure is an error that ends the
//! new process before it accepted anything, and leaves the old one as it
//! was (it sees our end close and goes on serving).

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use std::thread::{self, JoinHandle};

use super::adopt::{Arrival, adopt_connections};
use super::progress::{self, Tally, Way};
use super::socket::Endpoint;
use super::wire::{BackendStanding, Fate, Message, PARCEL_VERSION, Tag, Totals, VERSION};
use crate::ops::server_state::ServerLine;

/// How long the old process may take to answer each message.
const STEP: Duration = Duration::from_secs(10);
/// The most listener messages taken: far more than any configuration has
/// (253 listeners each); a peer that never says `end` is refused.
const MAX_MESSAGES: usize = 10_000;

/// What the old process handed over.
#[derive(Debug)]
pub struct Handed {
    /// Its pid.
    pub old_pid: u32,
    /// Its listeners, each with its tag.
    pub listeners: Vec<(Tag, OwnedFd)>,
    /// Its backends' health.
    pub health: Vec<BackendStanding>,
    /// Its counters' totals, which this process goes on from.
    pub totals: Vec<Totals>,
    /// What the operator said of each server, which this process keeps.
    pub servers: Vec<ServerLine>,
    endpoint: Endpoint,
}

/// What the epoll mode does with a batch of established connections an
/// old process hands over: adopt each on a worker, and say its fate.
pub type Adopter = Box<dyn Fn(Vec<Arrival>) -> Vec<Fate> + Send>;

/// Connects to the old process at `path` and takes its listeners and its
/// backends' health. `user`: the uid this process switches to after
/// startup, which the old one may run as already.
pub fn take(path: &Path, user: Option<u32>) -> io::Result<Handed> {
    let context = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!(
                "--upgrade-from {}: {e}; nothing was taken over (an old process, if any, serves on)",
                path.display()
            ),
        )
    };
    take_from(path, user).map_err(context)
}

fn take_from(path: &Path, user: Option<u32>) -> io::Result<Handed> {
    let endpoint = Endpoint::connect(path)?;
    endpoint.set_deadline(STEP)?;
    endpoint.check_peer(user)?;
    let hello = Message::Hello {
        version: VERSION,
        pid: std::process::id(),
    };
    endpoint.send(&hello, &[])?;
    let mut listeners = Vec::new();
    let mut health = Vec::new();
    let mut totals = Vec::new();
    let mut servers = Vec::new();
    for _ in 0..MAX_MESSAGES {
        let (message, fds) = endpoint.recv()?;
        match message {
            Message::Listeners(tags) if tags.len() == fds.len() => {
                listeners.extend(tags.into_iter().zip(fds));
            }
            Message::Listeners(tags) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} listeners said, {} descriptors came",
                        tags.len(),
                        fds.len()
                    ),
                ));
            }
            Message::Health(standings) => health.extend(standings),
            Message::Counters(more) => totals.extend(more),
            Message::Servers(more) => servers.extend(more),
            Message::End { pid } => {
                return Ok(Handed {
                    old_pid: pid,
                    listeners,
                    health,
                    totals,
                    servers,
                    endpoint,
                });
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the old process sent {:?} before the end", other.text()),
                ));
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "the old process never said end",
    ))
}

impl Handed {
    /// Says "taken": the old process stops accepting and drains. Called
    /// once our workers accept. An error here means the old process did not
    /// hear it: it may still be accepting beside us (harmless for clients,
    /// both serve), and the caller says so.
    pub fn confirm(&self) -> io::Result<()> {
        self.endpoint.send(
            &Message::Taken {
                pid: std::process::id(),
            },
            &[],
        )?;
        match self.endpoint.recv()?.0 {
            Message::Ok => Ok(()),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the old process answered {:?}", other.text()),
            )),
        }
    }

    /// After [`Handed::confirm`]: asks the old process for its established
    /// connections, and starts the thread ("adopt") that takes them, each
    /// batch given to `adopt`, until the old process is gone.
    pub fn adopt(self, adopt: Adopter) -> io::Result<JoinHandle<()>> {
        let old = self.old_pid;
        let endpoint = self.endpoint;
        let ask = Message::Adopt {
            version: PARCEL_VERSION,
        };
        endpoint.send(&ask, &[])?;
        thread::Builder::new().name("adopt".into()).spawn(move || {
            progress::begin(Way::In, old);
            let ended = adopt_connections(&endpoint, &*adopt);
            let Tally {
                adopted, refused, ..
            } = progress::end(Way::In);
            match ended {
                Ok(()) => crate::info!(
                    "upgrade: {adopted} connections adopted from pid {old}, {refused} refused"
                ),
                Err(e) => crate::warn!(
                    "upgrade: adopting from pid {old} ended ({e}): {adopted} adopted, {refused} \
                     refused"
                ),
            }
        })
    }
}
