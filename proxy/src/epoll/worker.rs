//! One worker: an event loop that runs what the control thread says
//! ([`Command`]): one accept loop per listener of each frontend (one per
//! listen address, or more where a handover gave this worker several:
//! ops/upgrade/), one task per connection, the access-log flush timer, and
//! the timer that closes pipes pooled unused.
//! A frontend's accept loops share one state (`frontend::WorkerFrontend`): whatever address
//! a client came in on, it takes its places under the same limits.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use runtime::net::{TcpListener, TcpStream};
use runtime::{JoinHandle, mpsc, oneshot, spawn, spawn_detached, time};

use crate::conn::accept::AcceptErrors;
use crate::conn::splice;
use crate::ops::metrics::counters;

use super::connection::{self, Admission};
use super::frontend::WorkerFrontend;
use super::frontend::{Listener, SharedFrontend};
use super::moving;
use super::orders::Order;
use super::worker_context::WorkerContext;
use crate::ops::upgrade::adopt::Arrival;
use crate::ops::upgrade::hand::Outbound;
use crate::ops::upgrade::wire::Fate;

/// What the main thread tells a worker.
#[derive(Debug)]
pub enum Command {
    /// Run exactly these frontends from now on (at startup, and after each
    /// reload). A frontend new to the worker comes with its listeners; one
    /// the worker already runs keeps the listeners of the addresses it
    /// still has, closes the others, starts the new ones it comes with,
    /// and gets the new state.
    Apply(Vec<Assignment>),
    /// Close every listener; open connections go on (a graceful stop).
    StopAccepting,
    /// A new process took the listeners (ops/upgrade/): close them as
    /// [`Command::StopAccepting`] does, but serve a client accepted and still
    /// waiting for its place instead of resetting it; answer once the accept
    /// loops are gone, so that such a client holds its place before the
    /// drain first counts them.
    HandedOver(oneshot::Sender<()>),
    /// Write the buffered access-log lines now, then answer (before exit).
    Flush(oneshot::Sender<()>),
    /// Reset every open connection (the grace period is over), log them,
    /// write the access log, then answer.
    Cut(oneshot::Sender<()>),
    /// Answer with a copy of every listener, for a new process that takes
    /// them over (ops/upgrade/), or why one could not be copied (out of
    /// descriptors, say): a handover that left one out would reset the
    /// clients queued on it. The worker's own stay as they are.
    Lend(oneshot::Sender<io::Result<Vec<Lent>>>),
    /// A new process adopts established connections: park every relay,
    /// now and as each begins, and send it there (epoll/moving.rs).
    Move(std::sync::mpsc::Sender<Outbound>),
    /// An established connection an old process handed over: adopt it on
    /// this worker unless the instant given is past, and say its fate.
    Adopt(Box<Arrival>, Instant, std::sync::mpsc::Sender<(u64, Fate)>),
}

/// A copy of one of a worker's listeners, lent for a handover.
#[derive(Debug)]
pub struct Lent {
    /// The frontend it listens for.
    pub frontend: String,
    /// Its `listen` address as configured.
    pub configured: SocketAddr,
    /// The address it is bound to.
    pub bound: SocketAddr,
    /// The copy (close-on-exec, registered nowhere).
    pub fd: OwnedFd,
}

/// One frontend a worker is to run.
#[derive(Debug)]
pub struct Assignment {
    /// The frontend.
    pub shared: Arc<SharedFrontend>,
    /// Its listeners for this worker at the listen addresses new to it
    /// (each with the address it was configured for: usually one per
    /// address; after a handover, as many as the old process handed to
    /// this worker); empty: nothing new.
    pub listeners: Vec<Listener>,
}

/// A frontend running on a worker: its listeners, an accept loop on each,
/// and the state the loops hand to each new connection (swapped by a
/// reload).
#[derive(Debug)]
struct Running {
    slot: Rc<RefCell<Rc<WorkerFrontend>>>,
    accepting: Vec<Accepting>,
}

/// One listener and the loop that accepts on it.
#[derive(Debug)]
struct Accepting {
    /// The listen address it was configured for.
    configured: SocketAddr,
    listener: Rc<TcpListener>,
    task: JoinHandle<()>,
}

impl Running {
    /// A frontend new to this worker, with no listener yet.
    fn new(shared: Arc<SharedFrontend>, context: &Rc<WorkerContext>) -> Running {
        Running {
            slot: Rc::new(RefCell::new(Rc::new(WorkerFrontend::new(shared, context)))),
            accepting: Vec::new(),
        }
    }

    /// Stops accepting: the loops end at the executor's next turn and drop
    /// their listeners, which leave the epoll set before they close.
    fn stop(self) {
        for accepting in self.accepting {
            accepting.task.abort();
        }
    }

    /// Stops accepting on the listen addresses not in `keep` (a reload
    /// removed them).
    fn keep_only(&mut self, keep: &[SocketAddr]) {
        let (kept, gone) = std::mem::take(&mut self.accepting)
            .into_iter()
            .partition(|a| keep.contains(&a.configured));
        self.accepting = kept;
        for accepting in gone {
            accepting.task.abort();
        }
    }

    /// Registers `listeners` here and starts an accept loop on each.
    fn start(&mut self, listeners: Vec<Listener>) {
        let name = self.slot.borrow().shared.frontend.name.clone();
        for (configured, listener) in listeners {
            // Adopted (from_std): removed from the epoll set before it closes,
            // since a copy may live on elsewhere (a handover, ops/upgrade/).
            match TcpListener::from_std(listener) {
                Ok(listener) => {
                    let listener = Rc::new(listener);
                    let task = spawn(accept_loop(listener.clone(), self.slot.clone()));
                    self.accepting.push(Accepting {
                        configured,
                        listener,
                        task,
                    });
                }
                Err(e) => crate::error!(
                    "frontend {name}: cannot watch its listener on {configured}: {e}; not \
                     accepting there on this worker"
                ),
            }
        }
    }

    /// A copy of each listener, into `lent`.
    fn lend(&self, lent: &mut Vec<Lent>) -> io::Result<()> {
        let name = &self.slot.borrow().shared.frontend.name;
        let context = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("frontend {name}: a listener cannot be copied: {e}"),
            )
        };
        for accepting in &self.accepting {
            let listener = &accepting.listener;
            lent.push(Lent {
                frontend: name.clone(),
                configured: accepting.configured,
                bound: listener.local_addr().map_err(context)?,
                fd: listener.as_fd().try_clone_to_owned().map_err(context)?,
            });
        }
        Ok(())
    }
}

/// One worker: runs what the main thread says, until the process exits.
pub async fn worker(
    commands: Option<mpsc::Receiver<Command>>,
    context: Rc<WorkerContext>,
) -> io::Result<()> {
    let Some(mut commands) = commands else {
        return Err(io::Error::other("a worker found no command channel"));
    };
    if context.sink.is_some() {
        spawn(flush_every(context.clone(), ACCESS_LOG_FLUSH));
    }
    // Even with splice off: a reload may turn it on.
    spawn(tidy_pipes(context.clone()));
    let mut running: Vec<Running> = Vec::new();
    while let Some(command) = commands.recv().await {
        match command {
            Command::Apply(assignments) => {
                running = apply(std::mem::take(&mut running), assignments, &context);
            }
            Command::StopAccepting => {
                for frontend in running.drain(..) {
                    frontend.stop();
                }
            }
            Command::HandedOver(done) => {
                context.handed_over.set(true);
                for frontend in running.drain(..) {
                    frontend.stop();
                }
                // The aborted loops are dropped before this task comes back
                // from its yields (each goes to the back of the queue).
                for _ in 0..3 {
                    runtime::yield_now().await;
                }
                let _ = done.send(());
            }
            Command::Lend(answer) => {
                let mut lent = Vec::new();
                let result = running.iter().try_for_each(|r| r.lend(&mut lent));
                let _ = answer.send(result.map(|()| lent));
            }
            Command::Move(outbound) => {
                context.moving.outbound.replace(Some(outbound));
                context.orders.give(Order::Park);
            }
            Command::Adopt(arrival, until, fate) => adopt_until(&running, *arrival, until, &fate),
            Command::Flush(done) => {
                flush(&context);
                let _ = done.send(());
            }
            Command::Cut(done) => cut(&context, done).await,
        }
    }
    // The main thread never drops its senders before the process exits.
    std::future::pending().await
}

/// Adopts a connection an old process handed over unless `until` is past,
/// and says its fate.
fn adopt_until(
    running: &[Running],
    arrival: Arrival,
    until: Instant,
    fate: &std::sync::mpsc::Sender<(u64, Fate)>,
) {
    let id = arrival.parcel.id;
    // Past `until`, the adopt thread no longer waits for this answer, and
    // the old process would resume what it adopted.
    let adopted = match Instant::now() <= until {
        true => adopt(running, arrival),
        false => Err("the new process's workers were too slow to adopt it".into()),
    };
    let _ = fate.send((id, adopted));
}

/// Resets every open connection, writes the access log, then answers.
async fn cut(context: &WorkerContext, done: oneshot::Sender<()>) {
    context.orders.give(Order::Kill);
    // The connections woken by the switch run before this task comes back
    // from its yields (a yield goes to the back of the queue): by then each
    // has reset its sockets and written its access-log line.
    for _ in 0..3 {
        runtime::yield_now().await;
    }
    flush(context);
    let _ = done.send(());
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

/// Every half [`splice::POOL_IDLE`], closes the pooled pipes idle that long
/// or all of them if connections need their descriptors (conn/splice.rs):
/// a pipe idle for long goes back even on a worker that splices no more.
async fn tidy_pipes(context: Rc<WorkerContext>) {
    loop {
        time::sleep(splice::POOL_IDLE / 2).await;
        splice::tidy_pool(&context.global);
    }
}

/// Writes the worker's buffered access-log lines; a failure is said at most
/// once a second (a syslog server that is down fails every flush), with the
/// count of lines lost so far.
fn flush(context: &WorkerContext) {
    let Some(sink) = &context.sink else {
        return;
    };
    let mut sink = sink.borrow_mut();
    if let Err(e) = sink.flush() {
        let due = context.lost_lines.borrow_mut().due(Instant::now());
        if due.is_some() {
            crate::error!(
                "access log: {e}; lines lost ({} since the start, at most one such line a second)",
                sink.log().lost_lines()
            );
        }
    }
}

/// Adopts `arrival` for the frontend of `running` its parcel names.
fn adopt(running: &[Running], arrival: Arrival) -> Fate {
    let name = &arrival.parcel.frontend;
    let local = running
        .iter()
        .map(|r| r.slot.borrow().clone())
        .find(|local| local.shared.frontend.name == *name)
        .ok_or_else(|| format!("no frontend {name} here"))?;
    moving::adopt(&local, arrival)
}

/// One worker's side of [`Command::Apply`].
fn apply(
    before: Vec<Running>,
    assignments: Vec<Assignment>,
    context: &Rc<WorkerContext>,
) -> Vec<Running> {
    let mut before: Vec<Option<Running>> = before.into_iter().map(Some).collect();
    let mut after = Vec::new();
    for Assignment { shared, listeners } in assignments {
        let name = &shared.frontend.name;
        let old = before
            .iter_mut()
            .find(|r| {
                r.as_ref()
                    .is_some_and(|r| r.slot.borrow().shared.frontend.name == *name)
            })
            .and_then(Option::take);
        let mut running = match old {
            Some(mut running) => {
                running.keep_only(&shared.frontend.listen);
                let unchanged = Arc::ptr_eq(&running.slot.borrow().shared, &shared);
                if !unchanged {
                    // New connections get the new pool; open ones keep the
                    // WorkerFrontend (and backends) they started with.
                    *running.slot.borrow_mut() =
                        Rc::new(WorkerFrontend::new(shared.clone(), context));
                }
                running
            }
            None => Running::new(shared.clone(), context),
        };
        running.start(listeners);
        if running.accepting.is_empty() {
            crate::error!("frontend {name}: no listener on this worker");
        }
        after.push(running);
    }
    // Frontends the new configuration dropped: their listeners close.
    for running in before.into_iter().flatten() {
        running.stop();
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
/// clients"), and this loop accepts no one else meanwhile. If the loop
/// ends meanwhile (its listener closed by a stop or a reload), the client is
/// reset and logged `KQ` ([`Waiting`]).
async fn await_admission(slot: &RefCell<Rc<WorkerFrontend>>) -> (Rc<WorkerFrontend>, Admission) {
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
            splice::tidy_pool(&local.worker.global);
            local.worker.global.room().await;
        }
    }
}

/// Accepts until aborted (a stop, or the frontend removed by a reload),
/// one task per connection. At the frontend's or the global maxconn, or
/// over its `rate-limit sessions`, it stops accepting: new clients wait in
/// the kernel's listen queue (HAProxy's behaviour) instead of being
/// accepted and dropped.
async fn accept_loop(listener: Rc<TcpListener>, slot: Rc<RefCell<Rc<WorkerFrontend>>>) {
    let mut errors = AcceptErrors::new();
    loop {
        let local = slot.borrow().clone();
        if !local.worker.global.has_room() {
            // Connections come first: pooled pipes give their descriptors back.
            splice::tidy_pool(&local.worker.global);
        }
        local.worker.global.room().await;
        local.shared.limit.room().await;
        if let Some(rate) = &local.shared.session_rate {
            // Over `rate-limit sessions`: the clients wait in the kernel's
            // queue while this loop waits for its turn.
            while let Err(wait) = rate.take(Instant::now()) {
                time::sleep(wait).await;
            }
        }
        match listener.accept().await {
            Ok((client, peer)) => {
                let waiting = Waiting::new(client, peer, &slot);
                // The state of now, not of before the wait: a reload may
                // have swapped it meanwhile.
                // Taken here, before the next look for room, so that one
                // freed place lets in one client, not the whole queue.
                let (local, places) = await_admission(&slot).await;
                spawn_detached(connection::serve(waiting.admitted(), peer, local, places));
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

/// A client accepted but not yet admitted (it may wait in [`await_admission`]): if
/// the accept loop is dropped meanwhile (aborted by a stop or a reload that
/// closes its listener), the client is reset and gets its access-log line
/// (`KQ`, connection.rs `cut_while_waiting`) instead of vanishing with the
/// loop; unless a new process took the listeners (an upgrade), which must
/// lose no client: then it is served here, over the maxconn.
struct Waiting<'a> {
    client: Option<TcpStream>,
    peer: SocketAddr,
    accepted: SystemTime,
    started: Instant,
    slot: &'a RefCell<Rc<WorkerFrontend>>,
}

impl<'a> Waiting<'a> {
    fn new(
        client: TcpStream,
        peer: SocketAddr,
        slot: &'a RefCell<Rc<WorkerFrontend>>,
    ) -> Waiting<'a> {
        Waiting {
            client: Some(client),
            peer,
            accepted: SystemTime::now(),
            started: Instant::now(),
            slot,
        }
    }

    /// The client, with its places taken: its connection task serves it.
    fn admitted(mut self) -> TcpStream {
        self.client
            .take()
            .expect("a Waiting holds its client until admitted")
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let local = self.slot.borrow().clone();
            if local.worker.handed_over.get() {
                // Its listener went to a new process: the client cannot go
                // back to the kernel's queue, so it is served here, over the
                // maxconn (by one client per loop, once), and the drain waits
                // for it like any other.
                let places = local.admit_over();
                spawn_detached(connection::serve(client, self.peer, local, places));
                return;
            }
            connection::cut_while_waiting(client, self.peer, self.accepted, self.started, &local);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoll::frontend;
    use crate::ops::access_log::format::Format;
    use crate::ops::access_log::sink::AccessLog;
    use crate::policy::limit::Limit;
    use crate::settings::cli::Settings;
    use std::io::{ErrorKind, Read};

    // A client accepted in the race for the last place, still
    // waiting for it when its accept loop ends (a stop closes the
    // listeners), is reset and gets its access-log line, `KQ`.
    #[test]
    fn a_client_waiting_for_its_place_when_the_loop_ends_is_reset_and_logged_kq() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("proxy-kq-{}-{nanos}.log", std::process::id()));
        let log = AccessLog::file(&path, Format::Tcplog).expect("an access log");
        let listener =
            std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("a listener");
        let addr = listener.local_addr().expect("its address");
        let config = Settings {
            backends: vec![addr.into()],
            ..Settings::default()
        }
        .to_config();
        let global = Limit::new(Some(1));
        let context = Rc::new(WorkerContext::new(0, global.clone(), Some(log.sink())));
        let shared = frontend::share(&config.frontends[0], None, 1);
        let slot = Rc::new(RefCell::new(Rc::new(WorkerFrontend::new(shared, &context))));
        let rt = runtime::Runtime::new().expect("a runtime");
        let mut client = rt.block_on(async {
            let listener = Rc::new(TcpListener::from_std(listener).expect("registered"));
            let accept = spawn(accept_loop(listener, slot.clone()));
            // The loop sees room and waits in accept; another worker (here,
            // the test) takes the last place before the client comes.
            for _ in 0..3 {
                runtime::yield_now().await;
            }
            let held = global.try_acquire().expect("the only place");
            let client = std::net::TcpStream::connect(addr).expect("connect");
            // Accepted and waiting for a place: `await_admission` holds one more
            // reference to the frontend's state than `accept` does.
            let deadline = Instant::now() + Duration::from_secs(10);
            while Rc::strong_count(&slot.borrow()) < 3 {
                assert!(Instant::now() < deadline, "the client was never accepted");
                time::sleep(Duration::from_millis(5)).await;
            }
            accept.abort();
            // The executor drops the aborted loop at its next turn.
            while Rc::strong_count(&slot.borrow()) > 1 {
                assert!(Instant::now() < deadline, "the loop was never dropped");
                time::sleep(Duration::from_millis(5)).await;
            }
            flush(&context);
            drop(held);
            client
        });
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        let read = client.read(&mut [0u8; 16]).map_err(|e| e.kind());
        assert_eq!(read, Err(ErrorKind::ConnectionReset));
        let text = std::fs::read_to_string(&path).expect("the access log");
        let _ = std::fs::remove_file(&path);
        let port = client.local_addr().expect("its address").port();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(
            lines[0].starts_with(&format!("127.0.0.1:{port} ")),
            "{text}"
        );
        assert!(lines[0].contains(" KQ "), "{text}");
    }
}
