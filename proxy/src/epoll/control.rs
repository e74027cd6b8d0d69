//! The control thread: starts the workers, hands them the frontends, and
//! reads signals until a stop: SIGHUP reloads the file, SIGUSR1 reopens the
//! access log, SIGQUIT dumps the state of every frontend and backend to the
//! log ([`super::dump`]), SIGTERM or SIGINT stops accepting, drains, and cuts
//! what is left when the grace period is over.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use runtime::signal::{Signal, Signals};
use runtime::{mpsc, oneshot, time};

use crate::ops::access_log::record::Format;
use crate::ops::access_log::sink::AccessLog;
use crate::ops::admin;
use crate::ops::metrics::exposition::{Published, Registry};
use crate::ops::shutdown::{self, Drained};
use crate::policy::descriptors::{Budget, Maxconn};
use crate::policy::limit::Limit;
use crate::settings::check::{self, Fixed};
use crate::settings::config::{AccessLogTarget, Config, Global};
use crate::settings::file;

use super::checker;
use super::dump;
use super::frontend::{Shared, bind_listeners, share};
use super::plan::Plan;
use super::worker::{Assignment, Command, worker};
use super::worker_context::WorkerContext;

/// Runs the epoll mode until a stop signal has been handled (see
/// [`crate::ops::shutdown`]); returns when the process should exit.
pub fn run(plan: &Plan) -> io::Result<()> {
    let workers = plan.workers.max(1);
    crate::info!("{}", plan.budget.describe(plan.maxconn));
    let mut control = Control {
        path: plan.path.clone(),
        workers,
        backlog: plan.backlog,
        // Never `None`: without a global maxconn the budget's applies, so
        // that accepting stops before a backend socket could not be made.
        global: Limit::new(Some(plan.maxconn.get())),
        pipes: Limit::new(Some(plan.budget.pipes(plan.maxconn))),
        budget: plan.budget.clone(),
        maxconn: plan.maxconn,
        fixed: plan.fixed,
        listening: Vec::new(),
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
    let pipes = control.pipes.clone();
    let access_log = control.access_log.clone();
    // Detached: the workers run until the process exits.
    let _workers = runtime::threads::spawn_runtimes(workers, "epoll-worker", move |index| {
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
        .with_pipes(pipes.clone());
        worker(commands, Rc::new(context))
    })?;
    control.apply(shared, listeners);
    start_admin(plan, &control.published)?;
    let rt = runtime::Runtime::new()?;
    rt.block_on(control.until_stopped())
}

/// Starts the admin listener, if the configuration has one, on its own
/// thread: it reads what `published` holds at each scrape.
fn start_admin(plan: &Plan, published: &Arc<Published>) -> io::Result<()> {
    let Some(addr) = plan.config.global.admin else {
        return Ok(());
    };
    let options = admin::AdminOptions {
        request_timeout: plan
            .config
            .global
            .admin_request
            .unwrap_or(admin::DEFAULT_REQUEST_TIMEOUT),
        ..admin::AdminOptions::default()
    };
    let (addr, _thread) = admin::spawn_with(addr, published.clone(), options)
        .map_err(|e| io::Error::new(e.kind(), format!("admin {addr}: {e}")))?;
    crate::info!("admin listening on {addr} (GET /metrics, GET /health)");
    Ok(())
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
    /// The descriptor budget the global maxconn was judged by, and that
    /// maxconn (both renewed by a reload).
    budget: Budget,
    maxconn: Maxconn,
    /// What the budget keeps from the start (descriptors inherited, workers,
    /// the admin listener, an access-log file): in every reload's budget.
    fixed: Fixed,
    /// Where each frontend listens, as bound (port 0 resolved), for SIGQUIT.
    listening: Vec<(String, SocketAddr)>,
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
                Signal::Quit => self.dump(false),
                Signal::Interrupt | Signal::Terminate => break signal,
            }
        };
        for tx in &self.senders {
            let _ = tx.send(Command::StopAccepting);
        }
        self.published.set_draining();
        // Every connection holds a place under the global maxconn from its
        // accept to its end: the count of those places is the count to drain.
        let cut = shutdown::drain(&signals, &*self.global, self.grace, first, || {
            self.dump(true)
        })
        .await
            == Drained::Cut;
        self.finish(cut).await;
        Ok(())
    }

    /// SIGQUIT: the state of every frontend and backend, to the log, as
    /// HAProxy does; the proxy keeps running (`draining`: a stop has begun).
    fn dump(&self, draining: bool) {
        let state = dump::State {
            global: &self.global,
            maxconn: self.maxconn,
            budget: &self.budget,
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
    fn apply(&mut self, shared: Vec<Arc<Shared>>, listeners: Listeners) {
        let fresh_boards: Vec<_> = shared
            .iter()
            .filter(|s| !self.running.iter().any(|r| Arc::ptr_eq(r, s)))
            .map(|s| s.board.clone())
            .collect();
        // The checker of the boards replaced here stops by itself once their
        // last connection is gone (it holds them weakly).
        if let Err(e) = checker::spawn_checker(fresh_boards) {
            crate::error!("health checks could not start: {e}; backends count as up");
        }
        self.listening
            .retain(|(name, _)| shared.iter().any(|s| s.frontend.name == *name));
        for (s, bound) in shared.iter().zip(&listeners) {
            if let Some(addr) = bound.as_ref().and_then(|l| l.first()?.local_addr().ok()) {
                let name = &s.frontend.name;
                self.listening.retain(|(n, _)| n != name);
                self.listening.push((name.clone(), addr));
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
    }

    /// Sends every worker its share: each frontend, and that worker's
    /// listener of it. Each listener is moved, not duplicated: a listener
    /// costs one descriptor, even while it is handed over.
    fn hand_out(&self, shared: &[Arc<Shared>], mut listeners: Listeners) {
        let mut listeners: Vec<_> = listeners
            .drain(..)
            .map(|bound| bound.map(Vec::into_iter))
            .collect();
        for (index, tx) in self.senders.iter().enumerate() {
            let assignments = shared
                .iter()
                .zip(listeners.iter_mut())
                .map(|(s, bound)| Assignment {
                    shared: s.clone(),
                    listener: bound.as_mut().and_then(Iterator::next),
                })
                .collect();
            if tx.send(Command::Apply(assignments)).is_err() {
                crate::error!("epoll worker {index} is gone; its share of connections is lost");
            }
        }
    }

    /// What the metrics show from now on: the running frontends' counters.
    fn publish(&self) {
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
                        s.frontend.route_labels(),
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
        self.pipes.set_max(Some(budget.pipes(maxconn)));
        self.budget = budget;
        self.maxconn = maxconn;
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
        if new.admin_request != old.admin_request {
            fixed.push("timeout admin-request");
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

/// The access log the configuration asks for (stderr by default).
fn open_access_log(config: &Config) -> io::Result<Option<Arc<AccessLog>>> {
    let format = config.global.log_format.unwrap_or(Format::Tcplog);
    Ok(match &config.global.access_log {
        Some(AccessLogTarget::Off) => None,
        None | Some(AccessLogTarget::Stderr) => Some(AccessLog::stderr(format)),
        Some(AccessLogTarget::File(path)) => Some(AccessLog::file(path, format)?),
    })
}
