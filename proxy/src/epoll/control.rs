//! The control thread: starts the workers, hands them the frontends, and
//! reads signals until a stop: SIGHUP reloads the file, SIGUSR1 reopens the
//! access log, SIGQUIT dumps the state of every frontend and backend to the
//! log ([`super::dump`]), SIGUSR2 starts a new binary that takes the
//! listeners over, SIGTERM or SIGINT stops accepting, drains, and cuts what
//! is left when the grace period is over.
//!
//! With an upgrade socket (ops/upgrade/), it also answers the "upgrade"
//! thread: a copy of every listener for a new process, and once that one
//! has taken them, the same stop as SIGTERM's. Started with
//! `--upgrade-from`, it takes the old process's listeners before anything
//! else, in place of binding them ([`super::handover`]).

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use runtime::combinator::{Either, select};
use runtime::signal::{Signal, Signals};
use runtime::{mpsc, oneshot, time};

use crate::conn::splice;
use crate::log::syslog::Syslog;
use crate::log::syslog::header::Severity;
use crate::ops::access_log::format::Format;
use crate::ops::access_log::sink::AccessLog;
use crate::ops::admin;
use crate::ops::metrics::counters::MoveCounters;
use crate::ops::metrics::exposition::{FrontendParts, Published, Registry, ServerLabels, Stopping};
use crate::ops::privileges::Applied;
use crate::ops::server_state;
use crate::ops::shutdown::{self, Drained};
use crate::ops::upgrade::notify::notify;
use crate::ops::upgrade::offer::{self, Offer, Request};
use crate::ops::upgrade::progress;
use crate::ops::upgrade::reexec::Reexec;
use crate::ops::upgrade::socket::SocketFile;
use crate::ops::upgrade::take::{self, Handed};
use crate::ops::upgrade::wire::Tag;
use crate::policy::descriptors::{Budget, Maxconn};
use crate::policy::limit::Limit;
use crate::settings::check::{self, Fixed};
use crate::settings::config::{AccessLogTarget, BackendServer, Config, Frontend, Global};
use crate::settings::file;
use crate::settings::resolve::{self, Answers};

use super::carry;
use super::checker;
use super::dump;
use super::dump::Bound;
use super::frontend::{PerWorker, SharedFrontend, bind_addresses, share, spread_handed};
use super::handover;
use super::operator;
use super::plan::Plan;
use super::resolver::{self, Resolver};
use super::worker::{Assignment, Command, worker};
use super::worker_context::WorkerContext;

/// Runs the epoll mode until a stop signal has been handled (see
/// [`crate::ops::shutdown`]) or a new process took the listeners; returns
/// when the process should exit.
pub fn run(plan: &Plan) -> io::Result<()> {
    crate::info!("{}", plan.budget.describe(plan.maxconn));
    // Both before any other thread starts: the socket file is made under a
    // umask (ops/upgrade/socket.rs), and the take blocks nothing else. The
    // file first: a directory it cannot be made in stops us before the old
    // process is asked for anything.
    let run_as = &plan.config.global.run_as;
    let user = run_as.user.as_ref().map(|(_, uid)| *uid);
    let socket_file = match &plan.config.global.upgrade_socket {
        Some(path) => Some(SocketFile::create(path, plan.upgrade_from.is_some(), user)?),
        None => None,
    };
    let mut handed = plan
        .upgrade_from
        .as_deref()
        .map(|path| take::take(path, user))
        .transpose()?;
    let mut control = Control::new(plan, socket_file.is_some())?;
    if let Some(handed) = &mut handed {
        control.handed = std::mem::take(&mut handed.listeners);
    }
    // Every listener is bound (or taken over) before any worker starts, so
    // a port in use is an error at startup, and every address is announced.
    // Up to here, a failure leaves an old process untouched: nothing of
    // ours accepted on its sockets yet.
    let (shared, listeners) = control.prepare(&plan.config)?;
    let mut answers = plan.answers.clone();
    for s in &shared {
        resolver::give(&s.addresses, &mut answers);
    }
    let admin = admin_listener(plan, &mut control.handed)?;
    handover::close_unclaimed(std::mem::take(&mut control.handed));
    // Everything that needs root is done: every listener bound, every
    // file open. Before any other thread starts, and before serving.
    switch_user(plan, socket_file.as_ref(), control.access_log.as_deref())?;
    carry_over(plan, &shared, handed.as_ref());
    let on_this_thread = control.start_workers()?;
    control.apply(shared, listeners);
    control.admin = admin
        .map(|listener| start_admin(plan, listener, &control.operating(), control.upgradable))
        .transpose()?;
    control.admin_socket = start_admin_socket(plan, &control.operating())?;
    let path = plan.config.global.upgrade_socket.as_deref();
    let requests = control.open_for_upgrades(socket_file, handed, path)?;
    let rt = runtime::Runtime::new()?;
    rt.block_on(async move {
        if let Some(worker) = on_this_thread {
            runtime::spawn_detached(async move {
                if let Err(e) = worker.await {
                    crate::error!("the worker stopped: {e}");
                }
            });
        }
        control.until_stopped(requests).await
    })
}

/// What the frontends keep from before this process: what the old process
/// of an upgrade handed over (its servers' health, its counters, the
/// operator's states and weights), or else the states of
/// `server-state-file` (`epoll/operator.rs`).
fn carry_over(plan: &Plan, shared: &[Arc<SharedFrontend>], handed: Option<&Handed>) {
    match handed {
        Some(handed) => {
            handover::seed(shared, &handed.health);
            handover::seed_totals(shared, &handed.totals);
            operator::restore(shared, &handed.servers, "upgrade");
        }
        None => {
            let kept = operator::read_state_file(plan.config.global.server_state_file.as_deref());
            operator::restore(shared, &kept, "server-state-file");
        }
    }
}

/// The admin socket (`admin-socket PATH`), if the file asks for one.
fn start_admin_socket(
    plan: &Plan,
    (published, operator): &(Arc<Published>, Arc<admin::Operator>),
) -> io::Result<Option<admin::socket::AdminSocket>> {
    let Some(path) = &plan.config.global.admin_socket else {
        return Ok(None);
    };
    let socket = admin::socket::start(path, published.clone(), operator.clone())?;
    crate::info!(
        "admin socket {} (0600): set server, set weight, shutdown sessions, show servers state",
        socket.path().display()
    );
    Ok(Some(socket))
}

/// The one worker's loop, when it runs on the control's thread: with
/// `--workers 1` the process has one thread on the hot path, so its system
/// calls on descriptors take the kernel's single-threaded shortcuts (a
/// process with one thread skips the file table's reference counting) and
/// no wake-up crosses threads. The control's work (signals, reload, the
/// health board's results) is rare and runs between the worker's events;
/// only a reload's host-name lookups block, the worker with them, for as
/// long as the resolver takes.
type OnThisThread = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>>>>;

/// `user` in `global`: the files made as root handed to that user, then
/// root dropped for good (ops/privileges.rs). The upgrade socket's
/// directory must be the user's: the new process of an upgrade runs as
/// that user and makes its own socket there.
fn switch_user(
    plan: &Plan,
    socket: Option<&SocketFile>,
    access_log: Option<&AccessLog>,
) -> io::Result<()> {
    let run_as = &plan.config.global.run_as;
    if run_as.is_empty() {
        return Ok(());
    }
    let who = run_as.describe();
    if let (Some(socket), Some(path)) = (socket, &plan.config.global.upgrade_socket) {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(std::path::Path::new("."));
        if run_as.writable_by(dir)? == Some(false) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "upgrade socket {}: its directory {} is not writable by {who}, which the \
                     proxy runs as after startup: the new process of an upgrade could not make \
                     its socket there; give the directory to that user (chown, mode 0700)",
                    path.display(),
                    dir.display()
                ),
            ));
        }
        run_as.hand_over(socket.path())?;
    }
    if let Some(path) = access_log.and_then(AccessLog::path) {
        run_as.hand_over(path)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if run_as.writable_by(dir.unwrap_or(std::path::Path::new(".")))? == Some(false) {
            crate::warn!(
                "access log {}: its directory is not writable by {who}: after a rotation that \
                 renames the file, SIGUSR1 cannot make a new one (logrotate's 'create' or \
                 'copytruncate' work)",
                path.display()
            );
        }
    }
    match run_as.apply()? {
        Applied::Dropped => crate::info!("running as {who} from now on"),
        Applied::AlreadySo => crate::info!("running as {who} already"),
        Applied::Nothing => {}
    }
    Ok(())
}

/// The admin listener the configuration asks for: the one the old process
/// handed over if it listens there, else bound now.
fn admin_listener(
    plan: &Plan,
    handed: &mut Vec<(Tag, OwnedFd)>,
) -> io::Result<Option<std::net::TcpListener>> {
    let Some(addr) = plan.config.global.admin else {
        return Ok(None);
    };
    match handover::take_admin(handed, addr) {
        Some(listener) => Ok(Some(listener)),
        None => admin::bind(addr, &admin_options(plan)).map(Some),
    }
}

fn admin_options(plan: &Plan) -> admin::AdminOptions {
    admin::AdminOptions {
        // Who may use it is `admin-allow` (loopback only by default).
        allow_remote: true,
        request_timeout: plan
            .config
            .global
            .admin_request
            .unwrap_or(admin::DEFAULT_REQUEST_TIMEOUT),
        ..admin::AdminOptions::default()
    }
}

/// The admin listener running on its own thread: it reads what `published`
/// holds at each scrape. With an upgrade socket, a copy of it is kept, to
/// lend to a new process.
fn start_admin(
    plan: &Plan,
    listener: std::net::TcpListener,
    (published, operator): &(Arc<Published>, Arc<admin::Operator>),
    upgradable: bool,
) -> io::Result<Admin> {
    let configured = plan.config.global.admin.unwrap_or(listener.local_addr()?);
    let copy = match upgradable {
        true => Some(OwnedFd::from(listener.try_clone()?)),
        false => None,
    };
    let stop = Arc::new(admin::StopAccepting::default());
    let (bound, _thread) = admin::serve_on(
        listener,
        (published.clone(), operator.clone()),
        admin_options(plan),
        stop.clone(),
    )?;
    crate::info!(
        "admin listening on {bound} (GET /metrics, GET /health, GET /stats; POST \
         /servers/FRONTEND/SERVER/... with the admin-token-file's token)"
    );
    Ok(Admin {
        configured,
        bound,
        copy,
        stop,
    })
}

/// The admin listener as the control thread knows it.
#[derive(Debug)]
struct Admin {
    configured: SocketAddr,
    bound: SocketAddr,
    /// A copy to lend to a new process (with an upgrade socket only).
    copy: Option<OwnedFd>,
    stop: Arc<admin::StopAccepting>,
}

/// What the control loop waits for.
enum Event {
    Signal(Signal),
    Request(Request),
}

/// The next signal, or the next request of the upgrade thread if there is one.
async fn next_event(
    signals: &Signals,
    requests: &mut Option<mpsc::Receiver<Request>>,
) -> io::Result<Event> {
    if let Some(rx) = requests.as_mut() {
        match select(signals.recv(), rx.recv()).await {
            Either::Left(signal) => return signal.map(Event::Signal),
            Either::Right(Some(request)) => return Ok(Event::Request(request)),
            // The upgrade thread ended (after a handover, or on an error
            // it logged): signals only from now on.
            Either::Right(None) => *requests = None,
        }
    }
    signals.recv().await.map(Event::Signal)
}

/// The main thread's side: the running frontends, and how to change them.
#[derive(Debug)]
struct Control {
    path: Option<PathBuf>,
    workers: usize,
    backlog: u32,
    global: Arc<Limit>,
    /// The splice path's pipes, every worker's (renewed with the budget).
    pipes: Arc<Limit>,
    /// The places for long pipes, every worker's (`conn/splice.rs`).
    long_pipes: Arc<Limit>,
    /// The descriptor budget the global maxconn was judged by, and that
    /// maxconn (both renewed by a reload).
    budget: Budget,
    maxconn: Maxconn,
    /// What the budget keeps from the start (descriptors inherited, workers,
    /// the admin listener, an access-log file): in every reload's budget.
    fixed: Fixed,
    /// Where each frontend listens, as bound (port 0 resolved), for SIGQUIT.
    listening: Vec<Bound>,
    senders: Vec<mpsc::Sender<Command>>,
    /// The frontends running now, in file order.
    running: Vec<Arc<SharedFrontend>>,
    /// What the admin endpoint shows, republished after each reload.
    published: Arc<Published>,
    /// The access log, for SIGUSR1 (`None`: off).
    access_log: Option<Arc<AccessLog>>,
    /// The `log` line's syslog destination, drained before the exit.
    syslog: Option<Arc<Syslog>>,
    /// How long a graceful stop waits (a reload may change it).
    grace: Duration,
    /// How long a stop accepts on, `/health` answering 503, before it
    /// drains (`shutdown-delay`; a reload may change it).
    shutdown_delay: Duration,
    grace_from_flag: bool,
    /// The file's `global` section at startup.
    started_with: Global,
    /// With an upgrade socket: every listener is bound with SO_REUSEPORT,
    /// so that a successor with more workers can bind beside them.
    upgradable: bool,
    /// Sockets an old process handed over, until the frontends take theirs.
    handed: Vec<(Tag, OwnedFd)>,
    /// The admin listener, if on.
    admin: Option<Admin>,
    /// Who may act on the servers, and the state file (`epoll/operator.rs`).
    operator: Arc<admin::Operator>,
    /// The admin socket, if on.
    admin_socket: Option<admin::socket::AdminSocket>,
    /// The upgrade socket file and how SIGUSR2 starts the next process.
    upgrade: Option<(Arc<SocketFile>, Reexec)>,
    /// Connections moved by upgrades, counted by every worker.
    moves: Arc<MoveCounters>,
    /// `resolve-interval` (`None`: off; a reload may change it).
    resolve_every: Option<Duration>,
    /// The resolver thread, once a backend is written with a host name.
    resolver: Option<Resolver>,
}

/// The global `maxconn`, which lends pipes the descriptors of the room's
/// `lendable` pairs that connections leave (policy/limit.rs).
fn lending(maxconn: u32, lendable: u32) -> Arc<Limit> {
    let global = Limit::new(Some(maxconn));
    global.set_lendable(lendable);
    global
}

/// Per frontend, per worker: the new listeners of each frontend.
type Listeners = Vec<PerWorker>;

impl Control {
    /// The control of `plan`, before any frontend runs.
    fn new(plan: &Plan, upgradable: bool) -> io::Result<Control> {
        let syslog = open_syslog(&plan.config.global)?;
        let access_log = open_access_log(&plan.config, syslog.as_ref())?;
        let operator = Arc::new(operator::operator(&plan.config.global)?);
        Ok(Control {
            operator,
            admin_socket: None,
            path: plan.path.clone(),
            workers: plan.workers.max(1),
            backlog: plan.backlog,
            // Never `None`: without a global maxconn the budget's applies, so
            // that accepting stops before a backend socket could not be made.
            global: lending(plan.maxconn.get(), plan.budget.lendable()),
            pipes: Limit::new(Some(plan.budget.pipes(plan.maxconn))),
            long_pipes: splice::long_pipes(),
            budget: plan.budget.clone(),
            maxconn: plan.maxconn,
            fixed: plan.fixed,
            listening: Vec::new(),
            senders: Vec::new(),
            running: Vec::new(),
            published: Published::new(Registry::from_counters(Vec::new())),
            access_log,
            syslog,
            grace: plan.grace,
            shutdown_delay: plan.config.global.shutdown_delay.unwrap_or_default(),
            grace_from_flag: plan.grace_from_flag,
            started_with: plan.started_with.clone(),
            upgradable,
            handed: Vec::new(),
            admin: None,
            upgrade: None,
            moves: Arc::default(),
            resolve_every: plan.config.global.resolve_every(),
            resolver: None,
        })
    }

    /// What the admin endpoint and socket serve from: the registry, and
    /// who may act.
    fn operating(&self) -> (Arc<Published>, Arc<admin::Operator>) {
        (self.published.clone(), self.operator.clone())
    }

    /// Writes `server-state-file`, if there is one (`when`: for the log).
    fn save_server_states(&self, when: &str) {
        if let Some(path) = &self.operator.state_file {
            if let Err(e) = server_state::write_file(path, &self.published.get()) {
                crate::error!("{when}: {e}");
            }
        }
    }

    /// Starts the workers, each waiting for its first [`Command::Apply`]:
    /// a thread each, or with one worker, none: its loop is returned, to
    /// run on this thread beside the control ([`OnThisThread`]).
    fn start_workers(&mut self) -> io::Result<Option<OnThisThread>> {
        if self.workers == 1 {
            let (tx, rx) = mpsc::channel();
            self.senders.push(tx);
            let context = self.worker_context(0);
            return Ok(Some(Box::pin(worker(Some(rx), Rc::new(context)))));
        }
        let mut receivers = Vec::new();
        for _ in 0..self.workers {
            let (tx, rx) = mpsc::channel();
            self.senders.push(tx);
            receivers.push(Some(rx));
        }
        let receivers = Arc::new(Mutex::new(receivers));
        let global = self.global.clone();
        let pipes = (self.pipes.clone(), self.long_pipes.clone());
        let access_log = self.access_log.clone();
        let moves = self.moves.clone();
        // Detached: the workers run until the process exits.
        let _workers =
            runtime::threads::spawn_runtimes(self.workers, "epoll-worker", move |index| {
                let commands = receivers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_mut(index)
                    .and_then(Option::take);
                let context = WorkerContext::new(
                    index,
                    global.clone(),
                    access_log.as_ref().map(|log| log.sink()),
                )
                .with_pipes(pipes.0.clone(), pipes.1.clone())
                .with_moves(moves.clone());
                worker(commands, Rc::new(context))
            })?;
        Ok(None)
    }

    /// Worker `index`'s context, for a worker on this thread.
    fn worker_context(&self, index: usize) -> WorkerContext {
        let sink = self.access_log.as_ref().map(|log| log.sink());
        WorkerContext::new(index, self.global.clone(), sink)
            .with_pipes(self.pipes.clone(), self.long_pipes.clone())
            .with_moves(self.moves.clone())
    }

    /// Once the workers accept: a new process tells the old one it took
    /// over (and systemd that it is the main process now), then puts its own
    /// upgrade socket in place and starts the upgrade thread on it.
    fn open_for_upgrades(
        &mut self,
        file: Option<SocketFile>,
        handed: Option<Handed>,
        path: Option<&std::path::Path>,
    ) -> io::Result<Option<mpsc::Receiver<Request>>> {
        match handed {
            Some(handed) => self.take_over(handed),
            None => notify("READY=1"),
        }
        let (Some(mut file), Some(path)) = (file, path) else {
            return Ok(None);
        };
        if let Err(e) = file.put_in_place(path) {
            crate::error!("{e}; upgrades are off");
            return Ok(None);
        }
        crate::info!(
            "upgrade socket {}: a new process started with --upgrade-from {} (or SIGUSR2) takes \
             the listeners over",
            path.display(),
            path.display()
        );
        let file = Arc::new(file);
        let (tx, rx) = mpsc::channel();
        offer::spawn_offering(file.clone(), tx, self.mover())?;
        self.upgrade = Some((file, Reexec::at_startup(path)));
        Ok(Some(rx))
    }

    /// A new process's side, once its workers accept: tells the old process
    /// it took over (and systemd that it is the main process now), then
    /// asks for the established connections (epoll/moving.rs).
    fn take_over(&self, handed: Handed) {
        // Before "taken": systemd must know the new main pid before the old
        // one can exit (ops/upgrade/notify.rs).
        notify(&format!("MAINPID={}\nREADY=1", std::process::id()));
        let old = handed.old_pid;
        match handed.confirm() {
            Ok(()) => crate::info!(
                "upgrade: took over from pid {old}, which stops accepting and moves or drains \
                 its connections"
            ),
            Err(e) => {
                crate::warn!(
                    "upgrade: pid {old} did not confirm ({e}); it may still accept beside this \
                     process (harmless): stop it with SIGTERM"
                );
                return;
            }
        }
        if let Err(e) = handed.adopt(self.adopter()) {
            crate::warn!("upgrade: no connection can be adopted from pid {old}: {e}");
        }
    }

    /// What the upgrade thread calls when a new process adopts established
    /// connections: every worker parks its relays and sends them there.
    fn mover(&self) -> offer::Mover {
        let senders = self.senders.clone();
        Box::new(move |outbound| {
            for tx in &senders {
                let _ = tx.send(Command::Move(outbound.clone()));
            }
        })
    }

    /// What the adopt thread calls with each batch an old process hands
    /// over: each connection to a worker in turn, each one's fate.
    fn adopter(&self) -> take::Adopter {
        let senders = self.senders.clone();
        let next = std::sync::atomic::AtomicUsize::new(0);
        Box::new(move |arrivals| handover::adopt_on_workers(&senders, &next, arrivals))
    }

    /// Reads signals (and the upgrade thread's requests) until a stop:
    /// SIGHUP reloads; SIGTERM or SIGINT, or a new process that took the
    /// listeners, stops accepting, then drains for at most the grace period.
    async fn until_stopped(
        mut self,
        mut requests: Option<mpsc::Receiver<Request>>,
    ) -> io::Result<()> {
        let signals = Signals::new(&shutdown::HANDLED)?;
        let (first, handed_over) = loop {
            match next_event(&signals, &mut requests).await? {
                Event::Signal(Signal::Hangup) => self.reload(),
                Event::Signal(Signal::User1) => self.reopen_access_log(),
                Event::Signal(Signal::User2) => self.start_upgrade(),
                Event::Signal(Signal::Quit) => self.dump(false),
                Event::Signal(stop @ (Signal::Interrupt | Signal::Terminate)) => {
                    break (stop.name().to_string(), false);
                }
                Event::Request(Request::Handover { pid, reply }) => {
                    let _ = reply.send(self.offer(pid).await);
                }
                Event::Request(Request::Taken { pid }) => {
                    break (format!("upgrade: pid {pid} took the listeners"), true);
                }
            }
        };
        if handed_over {
            self.handed_over().await;
        } else {
            // The servers' states, for the next start; a new process of an
            // upgrade has its own file and socket from now on.
            self.save_server_states("stop");
            if let Some(socket) = &self.admin_socket {
                socket.remove_if_ours();
            }
            self.published.set_stopping(Stopping::Lameduck);
            shutdown::lameduck(&signals, self.shutdown_delay, &first, || self.dump(true)).await;
            for tx in &self.senders {
                let _ = tx.send(Command::StopAccepting);
            }
        }
        self.published.set_stopping(Stopping::Draining);
        // Every connection holds a place under the global maxconn from its
        // accept to its end: the count of those places is the count to drain.
        let cut = shutdown::drain(&signals, &*self.global, self.grace, &first, || {
            self.dump(true)
        })
        .await
            == Drained::Cut;
        self.finish(cut).await;
        if let Some(line) = progress::handed_over() {
            crate::info!("{line}");
        }
        if let (false, Some((file, _))) = (handed_over, &self.upgrade) {
            file.remove_if_ours();
        }
        Ok(())
    }

    /// A new process took the listeners: every worker stops accepting (and
    /// says when it did, within a second), and so does the admin listener:
    /// scrapes go to the new process from now on.
    async fn handed_over(&mut self) {
        let mut answers = Vec::new();
        for tx in &self.senders {
            let (done, answer) = oneshot::channel();
            if tx.send(Command::HandedOver(done)).is_ok() {
                answers.push(answer);
            }
        }
        let all = async {
            for answer in answers {
                let _ = answer.await;
            }
        };
        if time::timeout(Duration::from_secs(1), all).await.is_err() {
            crate::warn!("a worker did not stop accepting within 1s");
        }
        if let Some(admin) = &mut self.admin {
            admin.stop.stop();
            // The kept copy too: a socket the new process did not want (its
            // file has no admin) must not linger here, queueing scrapes.
            admin.copy = None;
        }
    }

    /// SIGUSR2: the own binary again, with `--upgrade-from` (ops/upgrade/reexec.rs).
    fn start_upgrade(&self) {
        let Some((file, reexec)) = &self.upgrade else {
            crate::warn!(
                "SIGUSR2: started without an upgrade socket (upgrade-socket PATH in global, or \
                 --upgrade-socket PATH): nothing to hand the listeners over on; ignored"
            );
            return;
        };
        match reexec.start() {
            Ok(pid) => crate::info!(
                "SIGUSR2: started {} as pid {pid} with --upgrade-from {}; it takes the listeners \
                 once its configuration checks out",
                reexec.exe().display(),
                file.path().display()
            ),
            Err(e) => crate::error!("SIGUSR2: {e}; this process goes on serving"),
        }
    }

    /// What a new process (`pid`) gets: a copy of every listener, and every
    /// checked backend's health.
    async fn offer(&self, pid: i32) -> io::Result<Offer> {
        let mut listeners = handover::lend(&self.senders).await?;
        if let Some(Admin {
            configured,
            bound,
            copy: Some(copy),
            ..
        }) = &self.admin
        {
            let tag = Tag::Admin {
                configured: *configured,
                bound: *bound,
            };
            listeners.push((tag, copy.try_clone()?));
        }
        let health = handover::standings(&self.running);
        let totals = handover::totals(&self.running);
        let servers = server_state::lines(&self.published.get());
        crate::info!(
            "upgrade: lending {} listeners and {} backends' health to pid {pid}",
            listeners.len(),
            health.len()
        );
        Ok(Offer {
            listeners,
            health,
            totals,
            servers,
        })
    }

    /// SIGQUIT: the state of every frontend and backend, to the log, as
    /// HAProxy does; the proxy keeps running (`draining`: a stop has begun).
    fn dump(&self, draining: bool) {
        let state = dump::Sources {
            global: &self.global,
            maxconn: self.maxconn,
            budget: &self.budget,
            pipes: &self.pipes,
            workers: self.workers,
            draining,
            frontends: &self.running,
            listening: &self.listening,
        };
        for line in state.lines() {
            crate::info!("{line}");
        }
    }

    /// SIGUSR1: opens the access-log file again by its path (nginx's
    /// meaning), so that a rotation that renamed it gets a new file; lines
    /// go on to the old one if the new one cannot be opened.
    fn reopen_access_log(&self) {
        match &self.access_log {
            Some(log) => match log.reopen() {
                Ok(Some(path)) => crate::info!("SIGUSR1: access log reopened: {}", path.display()),
                Ok(None) => {
                    crate::info!("SIGUSR1: the access log goes to {log}; nothing to reopen")
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
        if let Some(syslog) = &self.syslog {
            syslog.drain(Duration::from_secs(1));
        }
    }

    /// The shared state of every frontend of `config`, reusing what has not
    /// changed, and listeners for the listen addresses new to each (all of
    /// them for a new frontend; those a reload added to a running one).
    /// Binding happens here, on the main thread, so that a port in use
    /// refuses the whole configuration before any worker sees it.
    fn prepare(&mut self, config: &Config) -> io::Result<(Vec<Arc<SharedFrontend>>, Listeners)> {
        let mut shared = Vec::new();
        let mut listeners = Vec::new();
        for frontend in &config.frontends {
            let old = self
                .running
                .iter()
                .find(|s| s.frontend.name == frontend.name)
                .cloned();
            let kept = old.as_ref().map_or(&[][..], |s| &s.frontend.listen[..]);
            let new: Vec<SocketAddr> = frontend
                .listen
                .iter()
                .filter(|addr| !kept.contains(addr))
                .copied()
                .collect();
            listeners.push(self.listeners_for(frontend, &new)?);
            shared.push(match old {
                Some(old) if old.frontend == *frontend => old,
                Some(old) => {
                    let new = share(frontend, Some(&old), self.workers);
                    carry::carry(&old, &new);
                    new
                }
                None => share(frontend, None, self.workers),
            });
        }
        Ok((shared, listeners))
    }

    /// New listeners for the listen addresses `addrs` of `frontend`: for
    /// each, those an old process handed over for it, if any (every one of
    /// them, spread over the workers), else bound.
    fn listeners_for(
        &mut self,
        frontend: &Frontend,
        addrs: &[SocketAddr],
    ) -> io::Result<PerWorker> {
        let name = &frontend.name;
        let mut per_worker: PerWorker = (0..self.workers).map(|_| Vec::new()).collect();
        for &addr in addrs {
            let handed = handover::take_address(&mut self.handed, frontend, addr);
            let bound = if handed.is_empty() {
                bind_addresses(
                    frontend,
                    &[addr],
                    self.workers,
                    self.backlog,
                    self.upgradable,
                )?
            } else {
                crate::info!(
                    "upgrade: frontend {name} takes {} handed socket(s) over for {addr}, on {} \
                     worker(s)",
                    handed.len(),
                    self.workers
                );
                spread_handed(frontend, addr, handed, self.workers, self.backlog)?
            };
            for (mine, more) in per_worker.iter_mut().zip(bound) {
                mine.extend(more);
            }
        }
        Ok(per_worker)
    }

    /// Hands the frontends to every worker, starts their health checks, and
    /// logs where each listens.
    fn apply(&mut self, shared: Vec<Arc<SharedFrontend>>, listeners: Listeners) {
        let fresh_boards: Vec<_> = shared
            .iter()
            .filter(|s| !self.running.iter().any(|r| Arc::ptr_eq(r, s)))
            .map(|s| checker::Checked {
                board: s.board.clone(),
                addresses: s.addresses.clone(),
                servers: s.frontend.backends.clone(),
            })
            .collect();
        // The checker of the boards replaced here stops by itself once their
        // last connection is gone (it holds them weakly).
        if let Err(e) = checker::spawn_checker(fresh_boards) {
            crate::error!("health checks could not start: {e}; backends count as up");
        }
        self.listening.retain(|b| {
            shared
                .iter()
                .any(|s| s.frontend.name == b.frontend && s.frontend.listen.contains(&b.configured))
        });
        for (s, bound) in shared.iter().zip(&listeners) {
            // The first worker's listeners: one per new address at least.
            let Some(first) = bound.first() else {
                continue;
            };
            for (configured, listener) in first {
                let Ok(addr) = listener.local_addr() else {
                    continue;
                };
                if self
                    .listening
                    .iter()
                    .any(|b| b.frontend == s.frontend.name && b.configured == *configured)
                {
                    continue; // a second socket handed over for it
                }
                self.listening.push(Bound {
                    frontend: s.frontend.name.clone(),
                    configured: *configured,
                    bound: addr,
                });
                crate::info!(
                    "frontend {} listening on {addr} ({}, {} backends, epoll, {} workers)",
                    s.frontend.name,
                    s.frontend.balance.name(),
                    s.frontend.backends.len(),
                    self.workers
                );
            }
        }
        self.hand_out(&shared, listeners);
        self.running = shared;
        self.publish();
        self.keep_resolving();
    }

    /// Hands the resolver thread the books of the running frontends that
    /// have backends written with a host name, starting it the first time
    /// there are some (and `resolve-interval` is not off).
    fn keep_resolving(&mut self) {
        let books: Vec<_> = self
            .running
            .iter()
            .map(|s| s.addresses.clone())
            .filter(|book| book.has_names())
            .collect();
        let every = self.resolve_every;
        match (&self.resolver, every) {
            (Some(resolver), _) => resolver.set(&books, every),
            (None, Some(every)) if !books.is_empty() => {
                match Resolver::spawn(&books, Some(every)) {
                    Ok(resolver) => {
                        crate::info!(
                            "backends written with a host name are looked up again every {every:?} \
                         (resolve-interval)"
                        );
                        self.resolver = Some(resolver);
                    }
                    Err(e) => crate::error!(
                        "the resolver thread could not start: {e}; backends written with a host \
                     name keep the addresses they have"
                    ),
                }
            }
            (None, _) => {}
        }
    }

    /// Sends every worker its share: each frontend, and that worker's
    /// listeners of it. Each listener is moved, not duplicated: a listener
    /// costs one descriptor, even while it is handed out.
    fn hand_out(&self, shared: &[Arc<SharedFrontend>], mut listeners: Listeners) {
        let mut listeners: Vec<_> = listeners.drain(..).map(Vec::into_iter).collect();
        for (index, tx) in self.senders.iter().enumerate() {
            let assignments = shared
                .iter()
                .zip(listeners.iter_mut())
                .map(|(s, bound)| Assignment {
                    shared: s.clone(),
                    listeners: bound.next().unwrap_or_default(),
                })
                .collect();
            if tx.send(Command::Apply(assignments)).is_err() {
                crate::error!("epoll worker {index} is gone; its share of connections is lost");
            }
        }
    }

    /// What the metrics show from now on: the running frontends' counters.
    fn publish(&self) {
        let moves = self.moves.clone();
        self.published.set(Registry::with_moves(
            Registry::from_counters(
                self.running
                    .iter()
                    .map(|s| {
                        let f = &s.frontend;
                        let backends = (0..f.backends.len())
                            .map(|i| ServerLabels {
                                addr: f.backends[i].addr.to_string(),
                                group: f.group_name_of(i).to_string(),
                                name: f.backends[i].name.clone(),
                            })
                            .collect();
                        FrontendParts {
                            name: f.name.clone(),
                            backends,
                            weights: f.backends.iter().map(|b| b.weight).collect(),
                            board: s.board.clone(),
                            addresses: Some(s.addresses.clone()),
                            counters: s.counters.clone(),
                            routes: f.route_labels(),
                        }
                    })
                    .collect(),
            ),
            moves,
        ));
    }

    /// SIGHUP: reads the file again and applies it; a file that does not
    /// parse, or a listener that cannot be bound, leaves everything as it is.
    fn reload(&mut self) {
        let Some(path) = self.path.clone() else {
            crate::warn!("SIGHUP: started without --config, nothing to reload; ignored");
            return;
        };
        let config = match file::load(&path) {
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
        let Some(mut answers) = self.look_up_names(&path, &config) else {
            return;
        };
        // The new file's global maxconn against the descriptor budget of
        // the new file, as --check-config and the startup judge it.
        let (budget, maxconn) = match check::global_maxconn(&config, self.fixed) {
            Ok(judged) => judged,
            Err(e) => {
                crate::error!(
                    "reload: {}: {e}; the running configuration stays",
                    path.display()
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
        if (&budget, maxconn) != (&self.budget, self.maxconn) {
            crate::info!("reload: {}", budget.describe(maxconn));
        }
        self.global.set_max(Some(maxconn.get()));
        self.global.set_lendable(budget.lendable());
        self.pipes.set_max(Some(budget.pipes(maxconn)));
        self.budget = budget;
        self.maxconn = maxconn;
        for s in &shared {
            resolver::give(&s.addresses, &mut answers);
        }
        let summary = describe_changes(&self.running, &shared);
        self.apply(shared, listeners);
        self.save_server_states("reload");
        crate::info!("reloaded {}: {summary}", path.display());
    }
}

impl Control {
    /// A reload's lookups: every host name of `config` looked up again
    /// (blocking this thread, and with one worker the worker on it). `None`, said in
    /// the log, if one does not resolve and its line does not say to start
    /// without it, unless a running backend keeps its last good address:
    /// the running configuration then stays.
    fn look_up_names(&self, path: &std::path::Path, config: &Config) -> Option<Answers> {
        let answers = Answers::of(config);
        let shown = path.display().to_string();
        let unresolved = resolve::unresolved(&shown, config, &answers, |f, b| self.keeps(f, b));
        if unresolved.is_empty() {
            return Some(answers);
        }
        for e in &unresolved {
            crate::error!("reload: {e}");
        }
        crate::error!("reload: {shown}: the running configuration stays");
        None
    }

    /// Whether backend `b` of `frontend` runs now with an address: the
    /// same backend (its name and its address as written) of the running
    /// frontend of that name, which keeps its last good address if its
    /// name does not resolve at a reload.
    fn keeps(&self, frontend: &Frontend, b: &BackendServer) -> bool {
        let Some(running) = self
            .running
            .iter()
            .find(|s| s.frontend.name == frontend.name)
        else {
            return false;
        };
        let same = |o: &BackendServer| o.name == b.name && o.addr == b.addr;
        let index = running.frontend.backends.iter().position(same);
        index.is_some_and(|i| running.addresses.get(i).is_some())
    }

    /// The `global` options a reload can change (`maxconn`, `grace`,
    /// `shutdown-delay`, `resolve-interval`) are changed by the caller and
    /// here; the others are read at startup only, and a change to them is
    /// logged rather than ignored silently.
    fn note_global_changes(&mut self, new: &Global) {
        self.note_resolve_interval(new.resolve_every());
        let delay = new.shutdown_delay.unwrap_or_default();
        if delay != self.shutdown_delay {
            crate::info!("reload: shutdown-delay is now {delay:?}");
            self.shutdown_delay = delay;
        }
        if !self.grace_from_flag {
            let grace = new.grace.unwrap_or(shutdown::DEFAULT_GRACE);
            if grace != self.grace {
                crate::info!("reload: grace is now {grace:?}");
                self.grace = grace;
            }
        }
        let old = &self.started_with;
        let fixed: Vec<&str> = [
            ("workers", new.workers != old.workers),
            ("admin", new.admin != old.admin),
            (
                "timeout admin-request",
                new.admin_request != old.admin_request,
            ),
            ("admin-allow", new.admin_allow != old.admin_allow),
            ("admin-socket", new.admin_socket != old.admin_socket),
            (
                "admin-token-file",
                new.admin_token_file != old.admin_token_file,
            ),
            (
                "server-state-file",
                new.server_state_file != old.server_state_file,
            ),
            ("access-log", new.access_log != old.access_log),
            ("log-format", new.log_format != old.log_format),
            ("log", new.log != old.log),
            ("log-tag", new.log_tag != old.log_tag),
            (
                "log-send-hostname",
                new.log_send_hostname != old.log_send_hostname,
            ),
            ("upgrade-socket", new.upgrade_socket != old.upgrade_socket),
            ("user", new.run_as != old.run_as),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect();
        if !fixed.is_empty() {
            crate::warn!(
                "reload: {} changed in the file; read at startup only, it takes effect at the next \
                 start",
                fixed.join(", ")
            );
        }
    }
}

impl Control {
    /// A reload's `resolve-interval`: the resolver thread takes it with the
    /// books (`keep_resolving`).
    fn note_resolve_interval(&mut self, every: Option<Duration>) {
        if every == self.resolve_every {
            return;
        }
        match every {
            Some(every) => crate::info!("reload: resolve-interval is now {every:?}"),
            None => crate::info!("reload: resolve-interval is now off"),
        }
        self.resolve_every = every;
    }
}

/// "web: unchanged; api: changed; old: removed", for the reload's log line.
fn describe_changes(old: &[Arc<SharedFrontend>], new: &[Arc<SharedFrontend>]) -> String {
    let mut parts = Vec::new();
    for s in new {
        let name = &s.frontend.name;
        let before = old.iter().find(|o| o.frontend.name == *name);
        parts.push(match before {
            Some(o) if Arc::ptr_eq(o, s) => format!("{name}: unchanged"),
            Some(o) => format!("{name}: changed{}", operator::servers_changed(o, s)),
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

/// The `log` line's syslog destination, opened; from now on the daemon's
/// lines go there too.
fn open_syslog(global: &Global) -> io::Result<Option<Arc<Syslog>>> {
    let Some(destination) = &global.log else {
        return Ok(None);
    };
    let hostname = global.log_send_hostname.as_ref().map(Option::as_deref);
    let header = destination.header(global.log_tag.as_deref(), hostname);
    let syslog = Syslog::open(destination, header).map_err(|e| {
        let target = &destination.target;
        io::Error::new(e.kind(), format!("log {target}: cannot open it: {e}"))
    })?;
    crate::log::also_to_syslog(syslog.clone());
    crate::info!("the daemon's lines go to {syslog} too, besides stderr");
    Ok(Some(syslog))
}

/// The access log the configuration asks for: `access-log` if given, else
/// the `log` line's syslog destination if there is one, else stderr.
fn open_access_log(
    config: &Config,
    syslog: Option<&Arc<Syslog>>,
) -> io::Result<Option<Arc<AccessLog>>> {
    let format = config.global.log_format.clone().unwrap_or(Format::Tcplog);
    Ok(match (&config.global.access_log, syslog) {
        (Some(AccessLogTarget::Off), _) => None,
        (Some(AccessLogTarget::Stderr), _) | (None, None) => Some(AccessLog::stderr(format)),
        (Some(AccessLogTarget::File(path)), _) => Some(AccessLog::file(path, format)?),
        (None, Some(syslog)) => {
            if !syslog.accepts(Severity::INFO) {
                crate::warn!(
                    "access log: {syslog} takes nothing less severe than its level, and \
                     connections are logged at info: no access-log line will be sent (lower the \
                     log line's level to info, or send the access log elsewhere with access-log)"
                );
            }
            Some(AccessLog::to_syslog(syslog.clone(), format))
        }
    })
}
