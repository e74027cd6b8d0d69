//! Milestone 5 and after: the async load balancer on our own runtime.
//!
//! One event loop per worker thread, the HAProxy model (one loop per thread)
//! rather than tokio's work-stealing. Each frontend (a `listen` address and
//! its pool of backends) has one listening socket per worker on the same
//! port (SO_REUSEPORT), and the kernel spreads new connections across them.
//!
//! ```text
//!   main thread:  bind every frontend's listeners ─▶ health-check thread ─▶ N workers, wait
//!   worker i:     Runtime ── one accept loop per frontend ──spawn──▶ one task per connection
//!                   wait for room under maxconn                 (connection.rs):
//!                   accept                                        PROXY header, access rules
//!                   take a place (global, frontend)               pick a backend (balance.rs),
//!                                                                   skipping full ones; queue if all are
//!                                                                 connect, bounded by timeout connect;
//!                                                                   on failure retry another backend
//!                                                                 relay both ways (relay.rs)
//!                                                                 close, passing on a reset
//! ```
//!
//! ## What is shared between workers, and what is not
//!
//! | state                        | where                       | cost on each connection      |
//! |------------------------------|-----------------------------|------------------------------|
//! | balancer (round-robin scores, leastconn counts) | per worker (`RefCell`) | none: no sharing |
//! | health (up / down)           | one [`HealthBoard`] per frontend | one atomic load         |
//! | maxconn counts               | one [`Limit`] each (global, frontend, backend) | a compare-and-swap |
//!
//! Each worker's balancer sees only its own connections, as nginx's workers
//! do without a shared `zone`: with two workers, leastconn means least
//! connections *of this worker*. Limits, though, must hold for the whole
//! process (an operator's `maxconn 100` is a promise to the backend), so
//! they are counted in atomics shared by all workers. Health verdicts come
//! from one checker thread (health.rs); a worker copies them into its
//! balancer when the board's generation number changes.
//!
//! ## Failures stay with their connection
//!
//! A refused or timed-out connect is retried on another backend, up to the
//! frontend's `retries` (nothing has been sent to a backend before it
//! accepts, so a retry never duplicates data); a backend is never tried twice
//! for one client (nginx's `proxy_next_upstream`; HAProxy retries the same
//! server unless `option redispatch`). When nothing is left to try, that
//! client alone is reset. An accept that fails for lack of descriptors
//! (EMFILE) pauses accepting briefly, while open connections keep flowing.

pub mod connection;

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use runtime::net::{ListenOptions, TcpListener, bind_std};
use runtime::signal::{Signal, Signals};
use runtime::{JoinHandle, mpsc, oneshot, spawn, time};

use crate::conn::accept::AcceptErrors;
use crate::conn::relay::Limits;
use crate::ops::access_log::record::Format;
use crate::ops::access_log::sink::AccessLog;
use crate::ops::admin;
use crate::ops::metrics::counters::{self, FrontendCounters};
use crate::ops::metrics::exposition::{Published, Registry};
use crate::ops::shutdown::{self, Drained};
use crate::policy::acl::SourceLimits;
use crate::policy::health::{self, HealthBoard};
use crate::policy::limit::Limit;
use crate::settings::config::{self, AccessLogTarget, Config, Frontend, Global};
use connection::{KillSwitch, Local, Places, WorkerContext};

/// How the epoll mode runs: the frontends, and the process-wide settings
/// that are not part of a configuration file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The frontends and the global `maxconn`.
    pub config: Config,
    /// The file `config` came from, read again on SIGHUP (`None`: flags).
    pub path: Option<PathBuf>,
    /// Event-loop threads.
    pub workers: usize,
    /// The listen queue length of every listener.
    pub backlog: u32,
    /// On SIGTERM, how long open connections may take to finish.
    pub grace: Duration,
    /// Whether `--grace` set it (then a reload does not change it).
    pub grace_from_flag: bool,
    /// The file's `global` section as it was read at startup, before the
    /// flags' overrides: what a reload compares the new file with.
    pub started_with: Global,
}

/// One frontend's state shared by every worker.
#[derive(Debug)]
pub(crate) struct Shared {
    pub frontend: Frontend,
    pub board: Arc<HealthBoard>,
    /// The frontend's `maxconn`.
    pub limit: Arc<Limit>,
    /// Each backend's `maxconn`, by index.
    pub backend_limits: Vec<Arc<Limit>>,
    /// `maxconn-per-source`, if set.
    pub sources: Option<Arc<SourceLimits>>,
    pub relay_limits: Limits,
    /// Its counters, one set per worker (metrics.rs: each written by one
    /// thread only).
    pub counters: Vec<Arc<FrontendCounters>>,
}

/// What the main thread tells a worker.
#[derive(Debug)]
enum Command {
    /// Run exactly these frontends from now on (at startup, and after each
    /// reload). A frontend new to the worker comes with its listener; one
    /// the worker already runs keeps its listener and gets the new state.
    Apply(Vec<Assignment>),
    /// Close every listener; open connections go on (a graceful stop).
    StopAccepting,
    /// Write the buffered access-log lines now, then answer (before exit).
    Flush(oneshot::Sender<()>),
    /// Reset every open connection (the grace period is over), log them,
    /// write the access log, then answer.
    Cut(oneshot::Sender<()>),
}

#[derive(Debug)]
struct Assignment {
    shared: Arc<Shared>,
    listener: Option<std::net::TcpListener>,
}

/// Runs the epoll mode until a stop signal has been handled (see
/// [`crate::ops::shutdown`]); returns when the process should exit.
pub fn run(plan: &Plan) -> io::Result<()> {
    let workers = plan.workers.max(1);
    let mut control = Control {
        path: plan.path.clone(),
        workers,
        backlog: plan.backlog,
        global: Limit::new(plan.config.global.maxconn),
        senders: Vec::new(),
        running: Vec::new(),
        published: Published::new(Registry::from_counters(Vec::new())),
        access_log: open_access_log(&plan.config)?,
        grace: plan.grace,
        grace_from_flag: plan.grace_from_flag,
        started_with: plan.started_with.clone(),
    };
    // Every listener is bound before any worker starts, so a port in use is
    // an error at startup, and every address is announced.
    let (shared, listeners) = control.prepare(&plan.config)?;
    let mut receivers = Vec::new();
    for _ in 0..workers {
        let (tx, rx) = mpsc::channel();
        control.senders.push(tx);
        receivers.push(Some(rx));
    }
    let receivers = Arc::new(Mutex::new(receivers));
    let global = control.global.clone();
    let access_log = control.access_log.clone();
    // Detached: the workers run until the process exits.
    let _workers = runtime::threads::spawn_runtimes(workers, "epoll-worker", move |index| {
        let commands = receivers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
            .and_then(Option::take);
        let context = WorkerContext {
            index,
            kill: KillSwitch::default(),
            global: global.clone(),
            sink: access_log.as_ref().map(|log| RefCell::new(log.sink())),
        };
        worker(commands, Rc::new(context))
    })?;
    control.apply(shared, listeners);
    if let Some(addr) = plan.config.global.admin {
        let (addr, _thread) = admin::spawn(addr, control.published.clone())
            .map_err(|e| io::Error::new(e.kind(), format!("admin {addr}: {e}")))?;
        crate::info!("admin listening on {addr} (GET /metrics, GET /health)");
    }
    let rt = runtime::Runtime::new()?;
    rt.block_on(control.until_stopped())
}

/// The main thread's side: the running frontends, and how to change them.
#[derive(Debug)]
struct Control {
    path: Option<PathBuf>,
    workers: usize,
    backlog: u32,
    global: Arc<Limit>,
    senders: Vec<mpsc::Sender<Command>>,
    /// The frontends running now, in file order.
    running: Vec<Arc<Shared>>,
    /// What the admin endpoint shows, republished after each reload.
    published: Arc<Published>,
    /// The access log, for SIGUSR1 (`None`: off).
    access_log: Option<Arc<AccessLog>>,
    /// How long a graceful stop waits (a reload may change it).
    grace: Duration,
    grace_from_flag: bool,
    /// The file's `global` section at startup.
    started_with: Global,
}

/// Per frontend, per worker: a listener for a frontend that needs new ones.
type Listeners = Vec<Option<Vec<std::net::TcpListener>>>;

impl Control {
    /// Reads signals until a stop: SIGHUP reloads; SIGTERM or SIGINT stops
    /// accepting, then drains for at most the grace period.
    async fn until_stopped(mut self) -> io::Result<()> {
        let signals = Signals::new(&shutdown::HANDLED)?;
        let first = loop {
            let signal = signals.recv().await?;
            match signal {
                Signal::Hangup => self.reload(),
                Signal::User1 => self.reopen_access_log(),
                Signal::Interrupt | Signal::Terminate => break signal,
            }
        };
        for tx in &self.senders {
            let _ = tx.send(Command::StopAccepting);
        }
        self.published.set_draining();
        // Every connection holds a place under the global maxconn from its
        // accept to its end: the count of those places is the count to drain.
        let global = self.global.clone();
        let open = move || global.open() as usize;
        let cut = shutdown::drain(&signals, open, self.grace, first).await == Drained::Cut;
        self.finish(cut).await;
        Ok(())
    }

    /// SIGUSR1: opens the access-log file again by its path (nginx's
    /// meaning), so that a rotation that renamed it gets a new file; lines
    /// go on to the old one if the new one cannot be opened.
    fn reopen_access_log(&self) {
        match &self.access_log {
            Some(log) => match log.reopen() {
                Ok(Some(path)) => crate::info!("SIGUSR1: access log reopened: {}", path.display()),
                Ok(None) => {
                    crate::info!("SIGUSR1: the access log goes to stderr; nothing to reopen")
                }
                Err(e) => crate::error!("SIGUSR1: {e}; lines go on to the old file"),
            },
            None => crate::info!("SIGUSR1: access-log off; nothing to reopen"),
        }
    }

    /// The last word to every worker before the process exits: cut what is
    /// still open (each connection reset and logged `KD`) if `cut`, then
    /// write the buffered access-log lines; waits (a second at most) for
    /// every worker to say it did.
    async fn finish(&self, cut: bool) {
        let mut answers = Vec::new();
        for tx in &self.senders {
            let (done, answer) = oneshot::channel();
            let command = if cut {
                Command::Cut(done)
            } else {
                Command::Flush(done)
            };
            if tx.send(command).is_ok() {
                answers.push(answer);
            }
        }
        let all = async {
            for answer in answers {
                let _ = answer.await;
            }
        };
        if time::timeout(Duration::from_secs(1), all).await.is_err() {
            crate::warn!("a worker did not flush its access log within 1s");
        }
    }

    /// The shared state of every frontend of `config`, reusing what has not
    /// changed, and listeners for those that listen somewhere new. Binding
    /// happens here, on the main thread, so that a port in use refuses the
    /// whole configuration before any worker sees it.
    fn prepare(&self, config: &Config) -> io::Result<(Vec<Arc<Shared>>, Listeners)> {
        let mut shared = Vec::new();
        let mut listeners = Vec::new();
        for frontend in &config.frontends {
            let old = self
                .running
                .iter()
                .find(|s| s.frontend.name == frontend.name);
            let same_listener = old.is_some_and(|s| s.frontend.listen == frontend.listen);
            listeners.push(if same_listener {
                None
            } else {
                Some(bind_listeners(frontend, self.workers, self.backlog)?)
            });
            shared.push(match old {
                Some(old) if old.frontend == *frontend => old.clone(),
                _ => share(frontend, old.map(|s| &**s), self.workers),
            });
        }
        Ok((shared, listeners))
    }

    /// Hands the frontends to every worker, starts their health checks, and
    /// logs where each listens.
    fn apply(&mut self, shared: Vec<Arc<Shared>>, mut listeners: Listeners) {
        let fresh_boards: Vec<_> = shared
            .iter()
            .filter(|s| !self.running.iter().any(|r| Arc::ptr_eq(r, s)))
            .map(|s| s.board.clone())
            .collect();
        // The checker of the boards replaced here stops by itself once their
        // last connection is gone (it holds them weakly).
        if let Err(e) = health::spawn_checker(fresh_boards) {
            crate::error!("health checks could not start: {e}; backends count as up");
        }
        for (s, bound) in shared.iter().zip(&listeners) {
            if let Some(addr) = bound.as_ref().and_then(|l| l.first()?.local_addr().ok()) {
                crate::info!(
                    "frontend {} listening on {addr} ({}, {} backends, epoll, {} workers)",
                    s.frontend.name,
                    s.frontend.balance.name(),
                    s.frontend.backends.len(),
                    self.workers
                );
            }
        }
        for (index, tx) in self.senders.iter().enumerate() {
            let assignments = shared
                .iter()
                .zip(listeners.iter_mut())
                .map(|(s, bound)| Assignment {
                    shared: s.clone(),
                    listener: bound
                        .as_mut()
                        .and_then(|l| l.get_mut(index)?.try_clone().ok()),
                })
                .collect();
            if tx.send(Command::Apply(assignments)).is_err() {
                crate::error!("epoll worker {index} is gone; its share of connections is lost");
            }
        }
        self.running = shared;
        self.published.set(Registry::from_counters(
            self.running
                .iter()
                .map(|s| {
                    let backends = s.frontend.backends.iter().map(|b| b.addr).collect();
                    (
                        s.frontend.name.clone(),
                        backends,
                        s.board.clone(),
                        s.counters.clone(),
                    )
                })
                .collect(),
        ));
    }

    /// SIGHUP: reads the file again and applies it; a file that does not
    /// parse, or a listener that cannot be bound, leaves everything as it is.
    fn reload(&mut self) {
        let Some(path) = self.path.clone() else {
            crate::warn!("SIGHUP: started without --config, nothing to reload; ignored");
            return;
        };
        let config = match config::load(&path) {
            Ok(config) => config,
            Err(errors) => {
                for e in &errors {
                    crate::error!("reload: {e}");
                }
                crate::error!(
                    "reload: {} has {} error(s); the running configuration stays",
                    path.display(),
                    errors.len()
                );
                return;
            }
        };
        let (shared, listeners) = match self.prepare(&config) {
            Ok(prepared) => prepared,
            Err(e) => {
                crate::error!("reload: {e}; the running configuration stays");
                return;
            }
        };
        self.note_global_changes(&config.global);
        self.global.set_max(config.global.maxconn);
        let summary = describe_changes(&self.running, &shared);
        self.apply(shared, listeners);
        crate::info!("reloaded {}: {summary}", path.display());
    }
}

impl Control {
    /// The `global` options a reload can change (`maxconn`, `grace`) are
    /// changed by the caller and here; the others are read at startup
    /// only, and a change to them is logged rather than ignored silently.
    fn note_global_changes(&mut self, new: &Global) {
        if !self.grace_from_flag {
            let grace = new.grace.unwrap_or(shutdown::DEFAULT_GRACE);
            if grace != self.grace {
                crate::info!("reload: grace is now {grace:?}");
                self.grace = grace;
            }
        }
        let old = &self.started_with;
        let mut fixed = Vec::new();
        if new.workers != old.workers {
            fixed.push("workers");
        }
        if new.admin != old.admin {
            fixed.push("admin");
        }
        if new.access_log != old.access_log {
            fixed.push("access-log");
        }
        if new.log_format != old.log_format {
            fixed.push("log-format");
        }
        if !fixed.is_empty() {
            crate::warn!(
                "reload: {} changed in the file; read at startup only, it takes effect at the next \
                 start",
                fixed.join(", ")
            );
        }
    }
}

/// "web: unchanged; api: changed; old: removed", for the reload's log line.
fn describe_changes(old: &[Arc<Shared>], new: &[Arc<Shared>]) -> String {
    let mut parts = Vec::new();
    for s in new {
        let name = &s.frontend.name;
        let before = old.iter().find(|o| o.frontend.name == *name);
        parts.push(match before {
            Some(o) if Arc::ptr_eq(o, s) => format!("{name}: unchanged"),
            Some(_) => format!("{name}: changed"),
            None => format!("{name}: added"),
        });
    }
    for o in old {
        if !new.iter().any(|s| s.frontend.name == o.frontend.name) {
            parts.push(format!("{}: removed", o.frontend.name));
        }
    }
    parts.join("; ")
}

/// The shared state of one frontend; `old` is the state it replaces, whose
/// limits carry over (their counts include the connections still open
/// under the old configuration).
fn share(frontend: &Frontend, old: Option<&Shared>, workers: usize) -> Arc<Shared> {
    let servers: Vec<_> = frontend
        .backends
        .iter()
        .map(|b| (b.addr, b.check))
        .collect();
    let t = &frontend.timeouts;
    let limit = match old {
        Some(old) => {
            old.limit.set_max(frontend.maxconn);
            old.limit.clone()
        }
        None => Limit::new(frontend.maxconn),
    };
    let backend_limits = frontend
        .backends
        .iter()
        .map(|b| {
            let before = old.and_then(|old| {
                let i = old
                    .frontend
                    .backends
                    .iter()
                    .position(|o| o.addr == b.addr)?;
                old.backend_limits.get(i).cloned()
            });
            match before {
                Some(limit) => {
                    limit.set_max(b.maxconn);
                    limit
                }
                None => Limit::new(b.maxconn),
            }
        })
        .collect();
    Arc::new(Shared {
        board: Arc::new(HealthBoard::new(&frontend.name, &servers)),
        limit,
        backend_limits,
        sources: frontend.maxconn_per_source.map(SourceLimits::new),
        counters: (0..workers)
            .map(|_| Arc::new(FrontendCounters::new(frontend.backends.len())))
            .collect(),
        relay_limits: Limits {
            idle_timeout: t.idle(),
            client_fin_timeout: t.client_fin,
            server_fin_timeout: t.server_fin,
        },
        frontend: frontend.clone(),
    })
}

/// A frontend running on a worker: its accept loop, and the state the loop
/// hands to each new connection (swapped by a reload).
#[derive(Debug)]
struct Running {
    slot: Rc<RefCell<Rc<Local>>>,
    accept: JoinHandle<()>,
}

/// One worker: runs what the main thread says, until the process exits.
async fn worker(
    commands: Option<mpsc::Receiver<Command>>,
    context: Rc<WorkerContext>,
) -> io::Result<()> {
    let Some(mut commands) = commands else {
        return Err(io::Error::other("a worker found no command channel"));
    };
    if context.sink.is_some() {
        spawn(flush_every(context.clone(), ACCESS_LOG_FLUSH));
    }
    let mut running: Vec<Running> = Vec::new();
    while let Some(command) = commands.recv().await {
        match command {
            Command::Apply(assignments) => {
                running = apply(std::mem::take(&mut running), assignments, &context);
            }
            Command::StopAccepting => {
                for frontend in running.drain(..) {
                    frontend.accept.abort();
                }
            }
            Command::Flush(done) => {
                flush(&context);
                let _ = done.send(());
            }
            Command::Cut(done) => {
                context.kill.fire();
                // The connections woken by the switch run before this task
                // comes back from its yields (a yield goes to the back of
                // the queue): by then each has reset its sockets and
                // written its access-log line.
                for _ in 0..3 {
                    runtime::yield_now().await;
                }
                flush(&context);
                let _ = done.send(());
            }
        }
    }
    // The main thread never drops its senders before the process exits.
    std::future::pending().await
}

/// How long an access-log line may wait in a worker's buffer: lines are
/// written in batches, one write(2) per batch, instead of one per connection.
const ACCESS_LOG_FLUSH: Duration = Duration::from_millis(200);

/// Writes the worker's buffered access-log lines every `period`.
async fn flush_every(context: Rc<WorkerContext>, period: Duration) {
    loop {
        time::sleep(period).await;
        flush(&context);
    }
}

fn flush(context: &WorkerContext) {
    if let Some(sink) = &context.sink {
        if let Err(e) = sink.borrow_mut().flush() {
            crate::error!("access log: {e}; lines lost");
        }
    }
}

/// The access log the configuration asks for (stderr by default).
fn open_access_log(config: &Config) -> io::Result<Option<Arc<AccessLog>>> {
    let format = config.global.log_format.unwrap_or(Format::Tcplog);
    Ok(match &config.global.access_log {
        Some(AccessLogTarget::Off) => None,
        None | Some(AccessLogTarget::Stderr) => Some(AccessLog::stderr(format)),
        Some(AccessLogTarget::File(path)) => Some(AccessLog::file(path, format)?),
    })
}

/// One worker's side of [`Command::Apply`].
fn apply(
    before: Vec<Running>,
    assignments: Vec<Assignment>,
    context: &Rc<WorkerContext>,
) -> Vec<Running> {
    let mut before: Vec<Option<Running>> = before.into_iter().map(Some).collect();
    let mut after = Vec::new();
    for Assignment { shared, listener } in assignments {
        let name = &shared.frontend.name;
        let old = before
            .iter_mut()
            .find(|r| {
                r.as_ref()
                    .is_some_and(|r| r.slot.borrow().shared.frontend.name == *name)
            })
            .and_then(Option::take);
        match (old, listener) {
            (Some(running), None) => {
                let unchanged = Arc::ptr_eq(&running.slot.borrow().shared, &shared);
                if !unchanged {
                    // New connections get the new pool; open ones keep the
                    // Local (and backends) they started with.
                    *running.slot.borrow_mut() = Rc::new(Local::new(shared, context));
                }
                after.push(running);
            }
            (old, Some(listener)) => {
                if let Some(old) = old {
                    old.accept.abort(); // it moved to another address
                }
                let slot = Rc::new(RefCell::new(Rc::new(Local::new(shared, context))));
                let accept = spawn(accept_loop(listener, slot.clone()));
                after.push(Running { slot, accept });
            }
            (None, None) => crate::error!("frontend {name}: no listener on this worker"),
        }
    }
    // Frontends the new configuration dropped: their listeners close.
    for running in before.into_iter().flatten() {
        running.accept.abort();
    }
    after
}

/// The places under the global and the frontend maxconn for a client the
/// accept loop just accepted, and the frontend's state of now to serve it
/// with (a reload may swap it while this waits).
///
/// The loop saw room before accepting, so this waits only when another
/// worker (or, for the global limit, another frontend) took the last place
/// in between: two loops woken by one freed place both accept. The client
/// then waits here as long as it would have in the kernel's queue, with no
/// timeout (`timeout queue` is about a backend's maxconn: resetting a
/// client for the frontend's would break "the kernel backlog holds new
/// clients"), and this loop accepts no one else meanwhile.
async fn admit(slot: &RefCell<Rc<Local>>) -> (Rc<Local>, Places) {
    loop {
        let local = slot.borrow().clone();
        if let Some(places) = local.try_admit() {
            return (local, places);
        }
        // Whichever is full now; room() checks again after registering, so
        // a place freed meanwhile is not missed.
        if local.worker.global.has_room() {
            local.shared.limit.room().await;
        } else {
            local.worker.global.room().await;
        }
    }
}

/// A frontend's listeners, one per worker, on the same address: the first
/// binds (and learns the port, if 0 was asked), the others join it with
/// SO_REUSEPORT.
fn bind_listeners(
    frontend: &Frontend,
    workers: usize,
    backlog: u32,
) -> io::Result<Vec<std::net::TcpListener>> {
    let options = ListenOptions {
        backlog,
        reuse_port: workers > 1,
        ..ListenOptions::default()
    };
    let first = bind_std(frontend.listen, &options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "frontend {}: cannot listen on {}: {e}",
                frontend.name, frontend.listen
            ),
        )
    })?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind_std(addr, &options)?);
    }
    Ok(listeners)
}

/// Accepts until aborted (a stop, or the frontend removed by a reload),
/// one task per connection. At the frontend's or the global maxconn it
/// stops accepting: new clients wait in the kernel's listen queue
/// (HAProxy's behaviour) instead of being accepted and dropped.
async fn accept_loop(listener: std::net::TcpListener, slot: Rc<RefCell<Rc<Local>>>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            let name = slot.borrow().shared.frontend.name.clone();
            crate::error!("frontend {name}: cannot watch its listener: {e}; not accepting here");
            return;
        }
    };
    let mut errors = AcceptErrors::new();
    loop {
        let local = slot.borrow().clone();
        local.worker.global.room().await;
        local.shared.limit.room().await;
        match listener.accept().await {
            Ok((client, peer)) => {
                // The state of now, not of before the wait: a reload may
                // have swapped it meanwhile.
                // Taken here, before the next look for room, so that one
                // freed place lets in one client, not the whole queue.
                let (local, places) = admit(&slot).await;
                spawn(connection::serve(client, peer, local, places));
            }
            // Out of descriptors, say: the connection waits in the kernel's
            // queue, and accepting again at once would spin. The pause is a
            // timer, so open connections keep running meanwhile.
            Err(e) => {
                counters::inc(&local.counters.accept_errors);
                if let Some(pause) = errors.note(&e) {
                    time::sleep(pause).await;
                }
            }
        }
    }
}
