//! The one loop of the states mode: one thread, one level-triggered epoll
//! set holding the listener, a `signalfd` and every connection's sockets;
//! the deadline list bounding each wait.
//!
//! ```text
//!   loop {
//!       epoll_wait(timeout: the earliest of the deadlines, the accept pause, the grace period)
//!       each report:  the signalfd  ─▶ stop (SIGTERM, SIGINT), log the open count (SIGQUIT),
//!                                       or log and ignore (SIGHUP, SIGUSR1)
//!                     a connection  ─▶ Connection::on_event, then close it or re-arm its deadline
//!                     the listener  ─▶ noted; accepted after the others (below)
//!       accept, up to ACCEPT_BATCH: pick a backend (round robin), open a Connection
//!       due deadlines ─▶ time out, or re-arm once for the rest
//!       draining with none left, or the grace period over ─▶ return
//!   }
//! ```
//!
//! Accepting after the batch's other reports means a slot freed by a
//! connection that closed in this batch is never handed to a new one while
//! reports for the old one may still follow in the same batch.
//!
//! On the first SIGTERM or SIGINT the listener is closed (the kernel
//! refuses new clients) and the open connections go on for `--grace`; the
//! last one to end, the end of the grace period, or a second signal ends
//! the loop, cutting what is left with resets (ops/shutdown.rs's drain,
//! with its very words, written as part of the loop). An accept that fails
//! for lack of descriptors takes the listener's read interest away for
//! [`ACCEPT_BACKOFF`](crate::conn::accept::ACCEPT_BACKOFF): level-triggered,
//! a listener left in the set with a full queue would be reported again at
//! once, and the loop would spin.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};
use runtime::net::{ListenOptions, accept_std, bind_std};

use super::connection::{Connection, Cx, untoken};
use super::deadlines::{Deadlines, wait_timeout};
use crate::conn::accept::AcceptErrors;
use crate::conn::timeouts::Timeouts;
use crate::ops::shutdown::{self, say};
use crate::policy::balance::{Algorithm, Balancer, Server};
use crate::settings::cli::Settings;
use crate::settings::resolve;

/// The listener's report token (connections use `slot << 1 | side`).
const LISTENER: u64 = u64::MAX;
/// The signalfd's report token.
const SIGNALS: u64 = u64::MAX - 1;
/// Reports taken from one `epoll_wait`.
const EVENTS: usize = 256;
/// Connections accepted per turn at most, so that a flood of new clients
/// cannot starve the open ones.
const ACCEPT_BATCH: usize = 64;

/// A connection's key in the deadline list: its slot and serial.
type Key = (usize, u64);

/// The connections, each in a slot that names it in its epoll tokens.
#[derive(Debug, Default)]
struct Slots {
    slots: Vec<Option<Connection>>,
    free: Vec<usize>,
    open: usize,
}

impl Slots {
    /// The slot the next [`Slots::insert`] fills.
    fn next(&self) -> usize {
        self.free.last().copied().unwrap_or(self.slots.len())
    }

    fn insert(&mut self, connection: Connection) {
        let slot = self.next();
        match self.free.pop() {
            Some(_) => self.slots[slot] = Some(connection),
            None => self.slots.push(Some(connection)),
        }
        self.open += 1;
    }

    fn get(&mut self, slot: usize) -> Option<&mut Connection> {
        self.slots.get_mut(slot)?.as_mut()
    }

    fn remove(&mut self, slot: usize) -> Option<Connection> {
        let connection = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.open -= 1;
        Some(connection)
    }
}

/// The graceful stop under way: when it ends, however many are left.
#[derive(Debug, Clone, Copy)]
struct Stopping {
    until: Instant,
}

/// Everything the loop holds.
#[derive(Debug)]
struct EventLoop {
    epoll: Epoll,
    listener: Option<TcpListener>,
    signals: SignalFd,
    connections: Slots,
    deadlines: Deadlines<Key>,
    balancer: Balancer,
    backends: Vec<SocketAddr>,
    timeouts: Timeouts,
    grace: Duration,
    accept_errors: AcceptErrors,
    /// Accepting pauses after an error that would spin (EMFILE) until then.
    accept_paused_until: Option<Instant>,
    stopping: Option<Stopping>,
    /// Every connection was cut (a second stop signal): the loop ends.
    cut: bool,
    next_serial: u64,
}

/// Runs the states mode until it is stopped (module docs).
pub fn run(settings: &Settings) -> io::Result<()> {
    if settings.backends.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the states mode needs a backend",
        ));
    }
    let mut event_loop = EventLoop::new(settings)?;
    event_loop.serve()
}

impl EventLoop {
    fn new(settings: &Settings) -> io::Result<EventLoop> {
        let options = ListenOptions {
            backlog: settings.backlog,
            // Every accepted client inherits TCP_NODELAY from the listener.
            nodelay: true,
            ..ListenOptions::default()
        };
        let listener = bind_std(settings.listen, &options).map_err(|e| {
            let what = format!("cannot listen on {}: {e}", settings.listen);
            io::Error::new(e.kind(), what)
        })?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        epoll.add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))?;
        // The signals were blocked before this (lib.rs); here they are read
        // as data, one more descriptor in the set.
        let flags = SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC;
        let signals = SignalFd::with_flags(&shutdown::handled_set(), flags)?;
        epoll.add(&signals, EpollEvent::new(EpollFlags::EPOLLIN, SIGNALS))?;
        // Host names looked up once, here: this mode never looks again.
        let backends = resolve::once(&settings.backends)?;
        let servers = backends.iter().map(|&a| Server::new(a)).collect();
        crate::info!(
            "listening on {} (states: one thread, level-triggered epoll, {} backends round-robin)",
            listener.local_addr()?,
            settings.backends.len()
        );
        Ok(EventLoop {
            epoll,
            listener: Some(listener),
            signals,
            connections: Slots::default(),
            deadlines: Deadlines::new(),
            balancer: Balancer::new(servers, Algorithm::RoundRobin),
            backends,
            timeouts: settings.timeouts,
            grace: settings.grace.unwrap_or(shutdown::DEFAULT_GRACE),
            accept_errors: AcceptErrors::new(),
            accept_paused_until: None,
            stopping: None,
            cut: false,
            next_serial: 0,
        })
    }

    /// The loop (module docs); returns once stopped.
    fn serve(&mut self) -> io::Result<()> {
        let mut events = vec![EpollEvent::empty(); EVENTS];
        loop {
            let wakes = [
                self.deadlines.next(),
                self.accept_paused_until,
                self.stopping.map(|s| s.until),
            ];
            let timeout = wait_timeout(Instant::now(), wakes);
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(Errno::EINTR) => 0,
                Err(e) => return Err(io::Error::from(e)),
            };
            let now = Instant::now();
            let mut accept = false;
            for event in &events[..n] {
                match event.data() {
                    LISTENER => accept = true,
                    SIGNALS => self.on_signals()?,
                    token => self.on_connection(token, event.events(), now),
                }
            }
            if accept {
                self.accept(now);
            }
            self.resume_accepting(now)?;
            self.expire(now);
            if self.is_over(now) {
                return Ok(());
            }
        }
    }

    fn cx(&self, now: Instant) -> Cx<'_> {
        Cx {
            epoll: &self.epoll,
            now,
            timeouts: &self.timeouts,
        }
    }

    /// One report for a connection's socket.
    fn on_connection(&mut self, token: u64, events: EpollFlags, now: Instant) {
        let (slot, side) = untoken(token);
        let cx = Cx {
            epoll: &self.epoll,
            now,
            timeouts: &self.timeouts,
        };
        // Gone: it closed earlier in this batch.
        let Some(connection) = self.connections.get(slot) else {
            return;
        };
        connection.on_event(side, events, &cx);
        self.settle(slot);
    }

    /// After a connection moved: closed, it leaves its slot; open, its
    /// deadline is armed anew by the alarm's rule (conn/alarm.rs: only if it
    /// came closer; a later one waits for the armed entry to come due).
    fn settle(&mut self, slot: usize) {
        let Some(connection) = self.connections.get(slot) else {
            return;
        };
        if connection.is_closed() {
            if let Some(connection) = self.connections.remove(slot) {
                connection.close();
            }
            return;
        }
        let due = connection.deadline(&self.timeouts);
        if let Some(at) = connection.alarm.arm(due) {
            self.deadlines.push(at, (slot, connection.serial));
        }
    }

    /// Accepts what the listener has queued, up to [`ACCEPT_BATCH`].
    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            let Some(listener) = &self.listener else {
                return;
            };
            match accept_std(listener) {
                Ok((client, peer)) => self.open(client, peer, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    if let Some(pause) = self.accept_errors.note(&e) {
                        self.pause_accepting(now + pause);
                        return;
                    }
                }
            }
        }
    }

    /// A new client: the next backend in the rotation, and a connection.
    fn open(&mut self, client: TcpStream, peer: SocketAddr, now: Instant) {
        // Round robin over backends that are all up: always a pick.
        let Some(index) = self.balancer.pick(peer.ip()) else {
            crate::warn!("{peer}: no backend to pick; resetting the client");
            crate::blocking::relay::reset(client);
            return;
        };
        let slot = self.connections.next();
        self.next_serial += 1;
        let serial = self.next_serial;
        let cx = self.cx(now);
        let backend = self.backends[index];
        if let Some(connection) = Connection::open(client, peer, backend, (slot, serial), &cx) {
            self.connections.insert(connection);
            self.settle(slot);
        }
    }

    /// Takes the listener's read interest away until `until`.
    fn pause_accepting(&mut self, until: Instant) {
        let Some(listener) = &self.listener else {
            return;
        };
        let mut none = EpollEvent::new(EpollFlags::empty(), LISTENER);
        if let Err(e) = self.epoll.modify(listener, &mut none) {
            crate::error!("epoll_ctl on the listener: {e}");
        }
        self.accept_paused_until = Some(until);
    }

    /// Gives the listener its read interest back once the pause is over.
    fn resume_accepting(&mut self, now: Instant) -> io::Result<()> {
        match (self.accept_paused_until, &self.listener) {
            (Some(until), Some(listener)) if now >= until => {
                let mut read = EpollEvent::new(EpollFlags::EPOLLIN, LISTENER);
                self.epoll.modify(listener, &mut read)?;
                self.accept_paused_until = None;
            }
            _ => {}
        }
        Ok(())
    }

    /// Every deadline due at `now`: a timeout, or a re-arm once for the
    /// rest when bytes moved since it was armed.
    fn expire(&mut self, now: Instant) {
        while let Some((when, (slot, serial))) = self.deadlines.pop_due(now) {
            let timeouts = self.timeouts;
            let Some(connection) = self.connections.get(slot) else {
                continue;
            };
            if connection.serial != serial || connection.alarm.armed() != Some(when) {
                continue; // stale: closed, or armed again since
            }
            connection.alarm.fired();
            connection.on_deadline(now, &timeouts);
            self.settle(slot);
        }
    }

    /// Reads every pending signal and acts on it.
    fn on_signals(&mut self) -> io::Result<()> {
        while let Some(info) = self.signals.read_signal()? {
            let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
                continue;
            };
            if signal == Signal::SIGQUIT {
                say::state("states", Some(self.connections.open));
                continue;
            }
            let stop = matches!(signal, Signal::SIGTERM | Signal::SIGINT);
            match (stop, self.stopping) {
                (true, None) => self.begin_stop(signal),
                (true, Some(_)) => {
                    say::again(signal.as_str(), self.connections.open);
                    self.cut();
                }
                (false, None) => say::nothing_to_reload(signal.as_str(), "states"),
                (false, Some(_)) => say::ignored_while_stopping(signal.as_str()),
            }
        }
        Ok(())
    }

    /// The first stop signal: no new clients, the open ones go on.
    fn begin_stop(&mut self, signal: Signal) {
        // Closing the listener takes it out of the set, and the kernel
        // refuses new clients (a reset) instead of queueing them.
        self.listener = None;
        self.accept_paused_until = None;
        say::stopping(signal.as_str(), self.connections.open, self.grace);
        self.stopping = Some(Stopping {
            until: Instant::now() + self.grace,
        });
    }

    /// Cuts every connection left, with resets; the loop then ends.
    fn cut(&mut self) {
        for slot in 0..self.connections.slots.len() {
            if let Some(mut connection) = self.connections.remove(slot) {
                connection.stop(Instant::now());
                connection.close();
            }
        }
        self.cut = true;
    }

    /// Whether the loop is done: stopping, and none left or out of time.
    fn is_over(&mut self, now: Instant) -> bool {
        let Some(stopping) = self.stopping else {
            return false;
        };
        if self.cut {
            return true;
        }
        if self.connections.open == 0 {
            say::finished();
            return true;
        }
        if now >= stopping.until {
            say::grace_over(self.grace, self.connections.open);
            self.cut();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_backend_it_refuses_to_start() {
        let settings = Settings {
            mode: crate::settings::cli::Mode::States,
            ..Settings::default()
        };
        let e = run(&settings).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
