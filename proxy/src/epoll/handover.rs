//! The epoll mode's side of an upgrade (ops/upgrade/ holds the protocol):
//! what the old process lends its successor, and how the new process finds
//! its frontends' sockets among what it was handed, closes the rest, and
//! seeds its health boards.
//!
//! A handed socket belongs to a listen address of a frontend of the new
//! configuration if it is bound to that address, or if it was the listener
//! of a frontend of the same name configured with the same address (which
//! is how `listen 127.0.0.1:0` finds its socket again). Each address gets
//! every socket that matches: all of its SO_REUSEPORT group
//! ([`super::frontend::spread_handed`]).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runtime::{mpsc, oneshot, time};

use std::sync::atomic::Ordering::Relaxed;

use crate::ops::metrics::exposition::{
    BackendCounter, FrontendCounter, backend_totals, frontend_totals,
};
use std::sync::atomic::AtomicUsize;

use crate::ops::upgrade::adopt::Arrival;
use crate::ops::upgrade::wire::{BackendStanding, Fate, Tag, Totals};
use crate::settings::config::Frontend;

use super::frontend::SharedFrontend;
use super::worker::Command;

/// How long a worker may take to lend its listeners.
const LEND: Duration = Duration::from_secs(2);

/// Takes out of `handed` the sockets that belong to the listen address
/// `addr` of `frontend` (module docs), in the order they came.
pub fn take_address(
    handed: &mut Vec<(Tag, OwnedFd)>,
    frontend: &Frontend,
    addr: SocketAddr,
) -> Vec<std::net::TcpListener> {
    let (mine, rest) = std::mem::take(handed)
        .into_iter()
        .partition(|(tag, _)| match tag {
            Tag::Frontend {
                name,
                configured,
                bound,
                ..
            } => *bound == addr || (*name == frontend.name && *configured == addr),
            Tag::Admin { .. } => false,
        });
    *handed = rest;
    let mine: Vec<(Tag, OwnedFd)> = mine;
    mine.into_iter()
        .map(|(_, fd)| std::net::TcpListener::from(fd))
        .collect()
}

/// Takes out of `handed` the admin listener, if it was bound to or
/// configured with `addr`.
pub fn take_admin(
    handed: &mut Vec<(Tag, OwnedFd)>,
    addr: SocketAddr,
) -> Option<std::net::TcpListener> {
    let at = handed.iter().position(|(tag, _)| {
        matches!(tag, Tag::Admin { configured, bound } if *configured == addr || *bound == addr)
    })?;
    Some(std::net::TcpListener::from(handed.remove(at).1))
}

/// Closes what no frontend of the new configuration took, and says so:
/// clients queued on those sockets are reset once the old process closes
/// its copies, as a reload that removes a frontend resets them. They were
/// never registered with an epoll set here, so a plain close is the whole
/// of it.
pub fn close_unclaimed(handed: Vec<(Tag, OwnedFd)>) {
    let mut gone: BTreeMap<String, (SocketAddr, usize)> = BTreeMap::new();
    for (tag, fd) in handed {
        let (name, bound) = match tag {
            Tag::Frontend { name, bound, .. } => (format!("frontend {name}"), bound),
            Tag::Admin { bound, .. } => ("the admin listener".to_string(), bound),
        };
        gone.entry(name).or_insert((bound, 0)).1 += 1;
        drop(fd);
    }
    for (name, (bound, count)) in gone {
        crate::warn!(
            "upgrade: {name} on {bound} is not in this configuration: its {count} handed \
             socket(s) closed; clients queued on them are reset"
        );
    }
}

/// Starts each backend of `shared` where the old process left it.
pub fn seed(shared: &[Arc<SharedFrontend>], health: &[BackendStanding]) {
    for s in shared {
        for h in health.iter().filter(|h| h.frontend == s.frontend.name) {
            let index = s
                .frontend
                .backends
                .iter()
                .position(|b| b.addr.to_string() == h.backend);
            if let Some(index) = index {
                s.board.seed(index, h.standing);
            }
        }
    }
}

/// Where every checked backend of `running` stands.
pub fn standings(running: &[Arc<SharedFrontend>]) -> Vec<BackendStanding> {
    let mut all = Vec::new();
    for s in running {
        for (index, backend) in s.frontend.backends.iter().enumerate() {
            if backend.check.is_some() {
                all.push(BackendStanding {
                    frontend: s.frontend.name.clone(),
                    backend: backend.addr.to_string(),
                    standing: s.board.standing(index),
                });
            }
        }
    }
    all
}

/// Every frontend's and backend's counters of `running`, summed over the
/// workers: what a new process goes on from.
pub fn totals(running: &[Arc<SharedFrontend>]) -> Vec<Totals> {
    let mut all = Vec::new();
    for s in running {
        let sum = |counter: FrontendCounter| {
            s.counters
                .iter()
                .map(|c| counter(c).load(Relaxed))
                .fold(0, u64::wrapping_add)
        };
        let values = frontend_totals()
            .map(|(name, c)| (name.to_string(), sum(c)))
            .collect();
        all.push(Totals {
            frontend: s.frontend.name.clone(),
            backend: None,
            values,
        });
        for (index, backend) in s.frontend.backends.iter().enumerate() {
            let sum = |counter: BackendCounter| {
                let each = s.counters.iter().filter_map(|c| c.backends.get(index));
                each.map(|b| counter(b).load(Relaxed))
                    .fold(0, u64::wrapping_add)
            };
            let values = backend_totals()
                .map(|(name, c)| (name.to_string(), sum(c)))
                .collect();
            all.push(Totals {
                frontend: s.frontend.name.clone(),
                backend: Some(backend.addr.to_string()),
                values,
            });
        }
    }
    all
}

/// Adds an old process's `totals` to the counters of `shared` (worker
/// 0's, before any worker counts), by frontend name and backend address
/// as written: a total goes on from where the old process left it. A frontend or a
/// backend this configuration no longer has, or a counter this binary does
/// not know, is left out.
pub fn seed_totals(shared: &[Arc<SharedFrontend>], totals: &[Totals]) {
    for t in totals {
        let Some(s) = shared.iter().find(|s| s.frontend.name == t.frontend) else {
            continue;
        };
        let Some(first) = s.counters.first() else {
            continue;
        };
        match &t.backend {
            None => {
                for (name, value) in &t.values {
                    if let Some((_, c)) = frontend_totals().find(|(n, _)| n == name) {
                        c(first).fetch_add(*value, Relaxed);
                    }
                }
            }
            Some(addr) => {
                let index = s
                    .frontend
                    .backends
                    .iter()
                    .position(|b| b.addr.to_string() == *addr);
                let Some(counters) = index.and_then(|i| first.backends.get(i)) else {
                    continue;
                };
                for (name, value) in &t.values {
                    if let Some((_, c)) = backend_totals().find(|(n, _)| n == name) {
                        c(counters).fetch_add(*value, Relaxed);
                    }
                }
            }
        }
    }
}

/// Each of `arrivals` to a worker in turn (from `next`), and each one's
/// fate once its worker says. A worker that is gone refuses; one that
/// does not answer in a minute is taken as refusing too, and said loudly:
/// the old process then resumes a connection this one may still hold.
pub fn adopt_on_workers(
    senders: &[mpsc::Sender<Command>],
    next: &AtomicUsize,
    arrivals: Vec<Arrival>,
) -> Vec<Fate> {
    let ids: Vec<u64> = arrivals.iter().map(|a| a.parcel.id).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut fates: Vec<Option<Fate>> = vec![None; ids.len()];
    let mut asked = 0;
    let until = Instant::now() + ADOPT;
    for (i, arrival) in arrivals.into_iter().enumerate() {
        let worker = next.fetch_add(1, Relaxed) % senders.len().max(1);
        match senders
            .get(worker)
            .map(|s| s.send(Command::Adopt(Box::new(arrival), until, tx.clone())))
        {
            Some(Ok(())) => asked += 1,
            _ => fates[i] = Some(Err(format!("worker {worker} is gone"))),
        }
    }
    for _ in 0..asked {
        let left = (until + LATE).saturating_duration_since(Instant::now());
        let Ok((id, fate)) = rx.recv_timeout(left) else {
            crate::error!("upgrade: a worker did not adopt its connections within {ADOPT:?}");
            break;
        };
        if let Some(i) = ids.iter().position(|&x| x == id) {
            fates[i] = Some(fate);
        }
    }
    fates
        .into_iter()
        .map(|f| f.unwrap_or_else(|| Err("no worker answered".into())))
        .collect()
}

/// How long the workers may take to adopt a batch: a worker past it
/// refuses, and so, with [`LATE`], within the old process's wait for an
/// answer (30 s, `ops/upgrade/hand.rs`), so that no connection is adopted
/// here after the old process gave up and resumed it.
const ADOPT: Duration = Duration::from_secs(20);
/// How long an answer may take once its worker began in time (an adoption
/// is a few system calls).
const LATE: Duration = Duration::from_secs(5);

/// A copy of every listener of every worker, tagged. A worker that does
/// not answer fails the whole handover: a socket left out would be closed
/// with its queue when this process stops accepting.
pub async fn lend(senders: &[mpsc::Sender<Command>]) -> io::Result<Vec<(Tag, OwnedFd)>> {
    let mut answers = Vec::new();
    for tx in senders {
        let (done, answer) = oneshot::channel();
        tx.send(Command::Lend(done))
            .map_err(|_| io::Error::other("a worker is gone; no handover"))?;
        answers.push(answer);
    }
    let mut all = Vec::new();
    for (worker, answer) in answers.into_iter().enumerate() {
        let lent = match time::timeout(LEND, answer).await {
            Ok(Ok(Ok(lent))) => lent,
            Ok(Ok(Err(e))) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("worker {worker}: {e}; no handover"),
                ));
            }
            _ => {
                return Err(io::Error::other(format!(
                    "worker {worker} did not lend its listeners within {LEND:?}; no handover"
                )));
            }
        };
        all.extend(lent.into_iter().map(|l| {
            let tag = Tag::Frontend {
                name: l.frontend,
                configured: l.configured,
                bound: l.bound,
                worker,
            };
            (tag, l.fd)
        }));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::cli::Settings;

    fn tag(name: &str, configured: &str, bound: &str) -> Tag {
        Tag::Frontend {
            name: name.into(),
            configured: configured.parse().expect("an address"),
            bound: bound.parse().expect("an address"),
            worker: 0,
        }
    }

    fn fd() -> OwnedFd {
        OwnedFd::from(std::net::TcpListener::bind("127.0.0.1:0").expect("a listener"))
    }

    #[test]
    fn a_listen_address_finds_its_sockets_by_address_or_by_name_and_configured_address() {
        let mut frontend = Settings {
            backends: vec!["127.0.0.1:9".parse().expect("an address")],
            ..Settings::default()
        }
        .to_config()
        .frontends
        .remove(0);
        let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let v6: SocketAddr = "[::1]:0".parse().expect("an address");
        frontend.listen = vec![any, v6];
        let mut handed = vec![
            (tag("default", "127.0.0.1:0", "127.0.0.1:4000"), fd()),
            (tag("other", "127.0.0.1:0", "127.0.0.1:4001"), fd()),
            (tag("default", "[::1]:0", "[::1]:4000"), fd()),
            (tag("default", "127.0.0.1:0", "127.0.0.1:4000"), fd()),
        ];
        assert_eq!(take_address(&mut handed, &frontend, any).len(), 2);
        assert_eq!(take_address(&mut handed, &frontend, v6).len(), 1);
        assert_eq!(handed.len(), 1);
        // Renamed, same address: found by the address.
        frontend.name = "renamed".into();
        let moved: SocketAddr = "127.0.0.1:4001".parse().expect("an address");
        frontend.listen = vec![moved];
        assert_eq!(take_address(&mut handed, &frontend, moved).len(), 1);
        assert!(handed.is_empty());
    }
}
