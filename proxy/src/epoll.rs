//! Milestone 5: the async proxy on our own runtime.
//!
//! One event loop per worker thread, sharing nothing but the round-robin
//! counter: the HAProxy model (one loop per thread) rather than tokio's
//! work-stealing. Each worker has its own listening socket on the same port
//! (SO_REUSEPORT), and the kernel spreads new connections across them.
//!
//! ```text
//!   main thread:  bind N listeners on one port ──> start N workers, then wait
//!   worker i:     Runtime ── accept loop ──spawn──> one task per connection:
//!                                                     pick a backend (round-robin)
//!                                                     connect, bounded by --connect-timeout
//!                                                     relay both ways (relay.rs)
//!                                                     close, passing on a reset
//! ```
//!
//! A connection is a task of a few hundred bytes plus its two sockets; it
//! holds a buffer only while bytes are in flight (`relay.rs`). Nothing in
//! this file blocks a thread: a slow backend costs a waiting task, not a
//! waiting thread, which is the whole argument of the seed's benchmark.
//!
//! Failures stay with their connection: a refused or timed-out connect
//! resets that client only; an accept that fails for lack of descriptors
//! (EMFILE) pauses accepting briefly, while open connections keep flowing.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runtime::net::{ListenOptions, TcpListener, TcpStream, bind_std};
use runtime::{spawn, time};

use crate::accept::AcceptErrors;
use crate::cli::{PickerKind, Settings};
use crate::picker::{Picker, new_picker};
use crate::relay::{self, Limits, Outcome};

/// What every connection of a worker needs; one per worker (an `Rc`).
#[derive(Debug)]
struct Worker {
    backends: Vec<SocketAddr>,
    picker: Arc<dyn Picker>,
    connect_timeout: Duration,
    limits: Limits,
}

/// Runs the epoll mode until the process is stopped.
pub fn run(settings: &Settings) -> io::Result<()> {
    let listeners = bind_listeners(settings)?;
    let addr = listeners[0].local_addr()?;
    crate::info!("listening on {addr} (epoll, {} workers)", listeners.len());
    // The pool mode offers a choice of pickers to show the race; here the
    // counter is shared by every worker and the list never changes, so one
    // fetch_add is all the synchronization needed.
    let picker = new_picker(PickerKind::Atomic, settings.backends.len());
    let slots: Arc<Mutex<Vec<Option<std::net::TcpListener>>>> =
        Arc::new(Mutex::new(listeners.into_iter().map(Some).collect()));
    let (backends, connect_timeout) = (settings.backends.clone(), settings.connect_timeout);
    let limits = Limits {
        idle_timeout: settings.idle_timeout,
        fin_timeout: settings.fin_timeout,
    };
    let workers =
        runtime::threads::spawn_runtimes(settings.workers, "epoll-worker", move |index| {
            let listener = slots
                .lock()
                .ok()
                .and_then(|mut slots| slots.get_mut(index).and_then(Option::take));
            let worker = Worker {
                backends: backends.clone(),
                picker: picker.clone(),
                connect_timeout,
                limits,
            };
            async move {
                match listener {
                    Some(listener) => accept_loop(listener, Rc::new(worker)).await,
                    None => Err(io::Error::other(format!(
                        "worker {index} found no listener"
                    ))),
                }
            }
        })?;
    // Workers only return on a fatal error; the process ends on SIGTERM.
    for result in workers.join()? {
        result?;
    }
    Ok(())
}

/// One listener per worker, all on the same address: the first binds (and
/// learns the port, if 0 was asked), the others join it with SO_REUSEPORT.
fn bind_listeners(settings: &Settings) -> io::Result<Vec<std::net::TcpListener>> {
    let options = ListenOptions {
        backlog: settings.backlog,
        reuse_port: settings.workers > 1,
        ..ListenOptions::default()
    };
    let first = bind_std(settings.listen, &options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}", settings.listen),
        )
    })?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..settings.workers {
        listeners.push(bind_std(addr, &options)?);
    }
    Ok(listeners)
}

/// Accepts forever, one task per connection.
async fn accept_loop(listener: std::net::TcpListener, worker: Rc<Worker>) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let mut errors = AcceptErrors::new();
    loop {
        match listener.accept().await {
            Ok((client, peer)) => {
                spawn(serve(client, peer, worker.clone()));
            }
            // Out of descriptors, say: the connection waits in the kernel's
            // queue, and accepting again at once would spin. The pause is a
            // timer, so open connections keep running meanwhile.
            Err(e) => {
                if let Some(pause) = errors.note(&e) {
                    time::sleep(pause).await;
                }
            }
        }
    }
}

/// One connection's life: pick, connect, relay, close.
async fn serve(client: TcpStream, peer: SocketAddr, worker: Rc<Worker>) {
    let started = Instant::now();
    let index = worker.picker.pick() % worker.backends.len();
    let addr = worker.backends[index];
    let backend = match time::timeout(worker.connect_timeout, TcpStream::connect(addr)).await {
        Ok(Ok(backend)) => backend,
        Ok(Err(e)) => return refuse(&client, peer, addr, &e.to_string()),
        Err(_) => {
            return refuse(
                &client,
                peer,
                addr,
                &format!("no answer within {:?}", worker.connect_timeout),
            );
        }
    };
    // Small writes (a request line, a prompt) go out at once, not batched.
    let _ = client.set_nodelay(true);
    let _ = backend.set_nodelay(true);
    let outcome = relay::relay(&client, &backend, worker.limits).await;
    log_outcome(peer, addr, &outcome, started);
}

/// The backend could not be reached: reset the client, so it sees a failed
/// connection rather than an empty reply that looks complete.
fn refuse(client: &TcpStream, peer: SocketAddr, backend: SocketAddr, why: &str) {
    crate::warn!("{peer} -> {backend}: connect failed: {why}; resetting the client");
    let _ = client.set_reset_on_close();
}

fn log_outcome(peer: SocketAddr, backend: SocketAddr, outcome: &Outcome, started: Instant) {
    crate::debug!(
        "{peer} -> {backend}: {}, {} B up, {} B down, {:?}",
        outcome.ending.label(),
        outcome.upstream,
        outcome.downstream,
        started.elapsed()
    );
}
