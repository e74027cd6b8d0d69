//! An established connection moved to a new process: parked and handed
//! over here (the old process), adopted there (the new one), and relayed on
//! from where it stood. The upgrade's protocol is ops/upgrade/ (`hand.rs`
//! the old side, `adopt.rs` the new); this file is what a connection and a
//! worker do at each end.
//!
//! ```text
//!   old process, a worker                          new process, a worker
//!   the park switch fires (a new process adopts)
//!   relay_or_park ─▶ Parked (machine, bytes)
//!   both sockets out of the epoll set (into_std)
//!   Outbound ─▶ upgrade thread ─▶ ── SCM_RIGHTS ──▶ adopt thread ─▶ adopt():
//!                                                     snapshot read, sockets registered,
//!                                                     places taken, the relay resumed
//!   ◀── fate ◀── ok ◀────────────────────────────── ok
//!   adopted: its copies closed, no log line            at its close: the line it would have had
//!   refused: registered again, the relay resumed
//! ```
//!
//! Only relaying connections move: one still being set up (its PROXY header,
//! its ClientHello, its connect) finishes that here, and moves the moment its
//! relay begins, since a relay parks at once when the switch is already
//! fired. A connection still being set up when the grace period ends is
//! cut, as in any drain.

use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use runtime::net::TcpStream;
use runtime::oneshot;

use super::frontend::WorkerFrontend;
use super::trace::{Extra, Micros, Trace};
use crate::conn::relay::{Parked, Start};
use crate::conn::side::Side;
use crate::conn::snapshot;
use crate::ops::metrics::counters::{self, Active};
use crate::ops::upgrade::adopt::Arrival;
use crate::ops::upgrade::hand::{Outbound, Returned};
use crate::ops::upgrade::parcel::Parcel;
use crate::ops::upgrade::wire::Fate;
use crate::policy::limit::Permit;
use crate::settings::config::BackendServer;

/// The numbers this process gives the connections it hands over.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What became of a parked connection.
pub(super) enum Handed {
    /// The new process took it: nothing is left here.
    Adopted,
    /// It stays: its sockets registered again, and its relay where it stood.
    Resumed(TcpStream, TcpStream, Box<Parked>),
    /// It stays, but could not be registered again: it ends, cut.
    Lost(Box<Parked>),
}

/// Hands a parked connection over, and waits for its fate.
pub(super) async fn hand_over(
    local: &WorkerFrontend,
    (client, backend): (TcpStream, TcpStream),
    parked: Box<Parked>,
    (index, early): (usize, u64),
    trace: &Trace,
) -> Handed {
    let Some(outbound) = local.worker.moving.outbound.borrow().clone() else {
        return Handed::Resumed(client, backend, parked);
    };
    let parcel = parcel_of(local, trace, &parked, index, early);
    // Out of this worker's epoll set before anyone else may read them.
    let sockets = [
        OwnedFd::from(client.into_std()),
        OwnedFd::from(backend.into_std()),
    ];
    let (tx, rx) = oneshot::channel();
    let Parked {
        machine,
        held,
        spliced,
    } = *parked;
    if let Err(refused) = outbound.send(Outbound::new(parcel, sockets, held, tx)) {
        // The upgrade thread is gone: no more parking here, and this one
        // comes back as refused (an unanswered Outbound gives its goods back).
        local.worker.moving.outbound.take();
        drop(refused);
    }
    match rx.await {
        Ok(Returned::Adopted) => Handed::Adopted,
        Ok(Returned::Refused { why, sockets, held }) => {
            crate::warn!(
                "frontend {}: {}: not moved ({why}); relaying on here",
                local.shared.frontend.name,
                trace.client
            );
            let parked = Parked {
                machine,
                held,
                spliced,
            };
            resume(sockets, Box::new(parked))
        }
        // Cannot happen (an Outbound always answers), and its sockets went
        // with it.
        Err(_) => Handed::Lost(Box::new(Parked {
            machine,
            held: [Vec::new(), Vec::new()],
            spliced,
        })),
    }
}

/// Registers a refused connection's sockets again.
fn resume([client, backend]: [OwnedFd; 2], parked: Box<Parked>) -> Handed {
    let adopt = |fd: OwnedFd| TcpStream::from_std(std::net::TcpStream::from(fd));
    match (adopt(client), adopt(backend)) {
        (Ok(client), Ok(backend)) => Handed::Resumed(client, backend, parked),
        (Err(e), _) | (_, Err(e)) => {
            crate::error!("a connection could not be registered again: {e}; it is cut");
            Handed::Lost(parked)
        }
    }
}

/// What travels with a connection (ops/upgrade/parcel.rs).
fn parcel_of(
    local: &WorkerFrontend,
    trace: &Trace,
    parked: &Parked,
    index: usize,
    early: u64,
) -> Parcel {
    let frontend = &local.shared.frontend;
    let group = frontend
        .group(trace.group)
        .map_or(frontend.name.as_str(), |g| g.name);
    let now = Instant::now();
    Parcel {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        frontend: frontend.name.clone(),
        group: group.to_string(),
        server: trace.server_addr.unwrap_or(trace.client),
        name: frontend
            .backends
            .get(index)
            .map_or_else(|| "-".to_string(), |b| b.name.clone()),
        client: trace.client,
        accepted_unix_us: trace.accepted_us,
        age: now.saturating_duration_since(trace.started),
        wait: trace.wait.get(),
        connect: trace.connect.get(),
        retries: trace.retries,
        early,
        spliced: parked.spliced,
        client_sent: trace.client_sent || parked.machine.direction(Side::Client).bytes > 0,
        destination: trace.extra().destination,
        backend_source: trace.extra().backend_source,
        log_id: trace.id,
        sni: trace.extra().sni.clone(),
        moves: trace.moves,
        machine: snapshot::write(&parked.machine, now),
        held: [parked.held[0].len(), parked.held[1].len()],
    }
}

/// The new process's side: adopts `arrival` on this worker, for the
/// frontend `local` runs (the one its parcel names): its machine read
/// back, its sockets registered, its places taken, and a task that relays
/// on from where it stood. The global `maxconn` is this process's
/// descriptor budget, so a connection beyond it is refused (the old
/// process keeps it); the other ceilings take it over their limit, since
/// it exists already and the old process counted it there.
pub(super) fn adopt(local: &Rc<WorkerFrontend>, arrival: Arrival) -> Fate {
    let Arrival {
        parcel,
        sockets,
        held,
    } = arrival;
    let Some(global) = local.worker.global.try_acquire() else {
        return Err("no room under this process's global maxconn".into());
    };
    let now = Instant::now();
    let machine = snapshot::read(&parcel.machine, now).map_err(|e| e.to_string())?;
    for from in [Side::Client, Side::Backend] {
        if machine.direction(from).held() as usize != held[from.index()].len() {
            return Err(format!("the bytes of the {from}'s direction do not add up"));
        }
    }
    let index = server_index(local, &parcel)?;
    let [client, backend] = sockets.map(|fd| TcpStream::from_std(std::net::TcpStream::from(fd)));
    let (client, backend) = (
        client.map_err(|e| e.to_string())?,
        backend.map_err(|e| e.to_string())?,
    );
    let trace = trace_of(local, &parcel, index, now);
    let parked = Box::new(Parked {
        machine,
        held,
        spliced: parcel.spliced,
    });
    runtime::spawn_detached(adopted(
        local.clone(),
        (client, backend),
        (parked, global),
        (index, parcel.early),
        trace,
    ));
    Ok(())
}

/// The index, in this process's configuration, of the backend a parcel
/// names: the same address in the same group; for a backend written with
/// a host name, whose answer may differ here, the same name in the same
/// group will do.
fn server_index(local: &WorkerFrontend, parcel: &Parcel) -> Result<usize, String> {
    let frontend = &local.shared.frontend;
    let in_group = |i: usize| {
        let group = frontend.group(frontend.group_of(i));
        group.map_or(frontend.name.as_str(), |g| g.name) == parcel.group
    };
    let addresses = &local.shared.addresses;
    let candidates = frontend.backends.iter().enumerate();
    let same_host = |i: usize, b: &BackendServer| {
        b.addr.host().is_some() && b.name == parcel.name && in_group(i)
    };
    let found = candidates
        .filter(|&(i, b)| addresses.get(i) == Some(parcel.server) || same_host(i, b))
        .map(|(i, _)| i);
    let mut found: Vec<usize> = found.collect();
    // Its own name in its own group first; the same address elsewhere
    // (renamed, or moved to another group by the new file) after.
    let named = |i: usize| frontend.backends[i].name == parcel.name;
    found.sort_by_key(|&i| (!(named(i) && in_group(i)), !in_group(i), !named(i)));
    found.first().copied().ok_or_else(|| {
        format!(
            "frontend {} has no backend {} here",
            parcel.frontend, parcel.server
        )
    })
}

/// The access-log facts of an adopted connection, as its old process had
/// them.
fn trace_of(local: &WorkerFrontend, parcel: &Parcel, index: usize, now: Instant) -> Trace {
    let accepted = UNIX_EPOCH + std::time::Duration::from_micros(parcel.accepted_unix_us);
    let started = now.checked_sub(parcel.age).unwrap_or(now);
    let mut trace = Trace::at(
        parcel.client,
        accepted.min(SystemTime::now()),
        started,
        false,
    );
    trace.group = local.shared.frontend.group_of(index);
    trace.backend = u32::try_from(index).ok();
    trace.server_addr = Some(parcel.server);
    trace.wait = Micros::of(parcel.wait);
    trace.connect = Micros::of(parcel.connect);
    trace.retries = parcel.retries;
    trace.client_sent = parcel.client_sent;
    if parcel.sni.is_some() || parcel.destination.is_some() || parcel.backend_source.is_some() {
        trace.extra = Some(Box::new(Extra {
            sni: parcel.sni.clone(),
            destination: parcel.destination,
            backend_source: parcel.backend_source,
        }));
    }
    trace.id = parcel.log_id;
    trace.moves = parcel.moves + 1;
    trace
}

/// An adopted connection's life here: counted open, its places held, its
/// relay resumed, and its access-log line at its close. A function that
/// returns a block, as `serve` is (connection.rs), so that what it keeps
/// for the relay's whole life is kept once.
fn adopted(
    local: Rc<WorkerFrontend>,
    (client, backend): (TcpStream, TcpStream),
    (parked, global): (Box<Parked>, Permit),
    (index, early): (usize, u64),
    mut trace: Trace,
) -> impl Future<Output = ()> {
    let mut client = Some(client);
    async move {
        let shared = &local.shared;
        let _places = (
            global,
            shared.limit.acquire_over(),
            shared
                .sources
                .as_ref()
                .map(|s| s.acquire_over(trace.client.ip())),
            shared.backend_limits.get(index).map(|l| l.acquire_over()),
        );
        let counters = &local.counters;
        let _active = Active::new(&counters.active);
        let _server_active = counters.backends.get(index).map(|c| Active::new(&c.active));
        counters::inc(&local.worker.moves.adopted);
        let start = Start::Resume(parked);
        let relayed = local.relay_phase(&mut client, backend, (index, early), start, &mut trace);
        let relayed = relayed.await;
        if let Some(client) = client {
            local.log(&client, &trace, relayed);
        }
    }
}
