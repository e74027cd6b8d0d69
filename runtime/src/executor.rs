//! The executor: a single-threaded run queue of tasks, and the loop that
//! alternates between polling them and waiting for the driver.
//!
//! ```text
//!   block_on(main)
//!     loop {
//!        ┌─ run up to EVENT_INTERVAL ready tasks ─────────────────────────┐
//!        │   pop id ─> header.start_run ─> poll future with its waker     │
//!        │              Pending: maybe requeue   Ready: drop it, finish   │
//!        │   (the main future is one of them, under TaskId::BLOCK_ON;     │
//!        │    when it is Ready, block_on returns)                          │
//!        └─────────────────────────────────────────────────────────────────┘
//!        turn the driver: epoll_wait for I/O and timers
//!          - tasks still queued?  timeout 0 (just collect readiness)
//!          - nothing to run?      sleep until the next event or deadline
//!        collect wakes that came from other threads
//!     }
//! ```
//!
//! A task lives in a slab on this thread, in one allocation with its waker
//! and its future (a `Box`, not an `Arc`: it never moves to another thread,
//! so its future need not be `Send`); while it runs, it is taken out of
//! its slot, so that the slab is free for the tasks it spawns. Its `Header`
//! is the thread-safe part that wakers hold (`task.rs`, `waker.rs`), the one
//! other allocation a task needs.
//!
//! While `block_on` runs, this runtime fills the thread's context
//! (`context.rs`: driver, executor, local run queue, budget, deferred
//! wakes); one guard puts the previous context back when it returns or
//! unwinds. That is how `spawn`, sockets and timers find this runtime
//! without being handed it.
//!
//! Fairness comes from three things: the queue is FIFO; every poll gets an
//! I/O budget (`coop.rs`); and after `EVENT_INTERVAL` polls we turn the
//! driver even if tasks are still queued, so a task that yields forever
//! cannot keep socket readiness from being seen.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::context;
use crate::coop;
use crate::driver::Driver;
use crate::run_queue::{Mailbox, TaskId};
use crate::slab::Slab;
use crate::task::{self, Header, JoinHandle, Run, waker_for};

/// Polls between two looks at the reactor while tasks keep being ready
/// (tokio's default is 61).
pub const EVENT_INTERVAL: u32 = 61;

pin_project_lite::pin_project! {
    /// A spawned task as the executor stores it: its header's handle, the
    /// waker made from it once, and its future, in one allocation.
    struct Task<F> {
        header: Arc<Header>,
        waker: Waker,
        #[pin]
        future: F,
    }
}

/// What the executor asks of a task, whatever its future's type.
trait Runnable {
    fn header(&self) -> &Arc<Header>;
    /// Polls the future once, with the task's own waker.
    fn run(self: Pin<&mut Self>) -> Poll<()>;
}

impl<F: Future<Output = ()>> Runnable for Task<F> {
    fn header(&self) -> &Arc<Header> {
        &self.header
    }

    fn run(self: Pin<&mut Self>) -> Poll<()> {
        let this = self.project();
        this.future.poll(&mut Context::from_waker(this.waker))
    }
}

/// A task in its slot: `None` while it runs (taken out, so that the slab is
/// free for what it spawns).
type Slot = Option<Pin<Box<dyn Runnable>>>;

/// The executor's state, reachable from `spawn` through the thread's context
/// while `block_on` runs.
struct Core {
    tasks: RefCell<Slab<Slot>>,
    shared: Arc<Mailbox>,
    event_interval: u32,
    task_budget: u32,
    /// Reused buffer for ids taken from the remote queue.
    remote: RefCell<Vec<TaskId>>,
}

/// Settings for a [`Runtime`]; the defaults suit a proxy.
///
/// # Examples
///
/// The two knobs of fairness: how many polls run between two looks at
/// epoll, and how many I/O operations a task may complete per poll. Here
/// both are small, and [`Runtime::polls`] counts what the executor did: the
/// main future twice (before and after its task ran) and the task once.
///
/// ```
/// use runtime::Builder;
///
/// let rt = Builder::new().event_interval(8).task_budget(16).build()?;
/// let answer = rt.block_on(async { runtime::spawn(async { 42 }).await });
/// assert_eq!(answer.unwrap(), 42);
/// assert_eq!(rt.polls(), 3);
/// assert_eq!(rt.live_tasks(), 0, "the task finished and was freed");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    event_interval: u32,
    task_budget: u32,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            event_interval: EVENT_INTERVAL,
            task_budget: coop::TASK_BUDGET,
        }
    }
}

impl Builder {
    /// Starts from the defaults.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Polls between two looks at the reactor while tasks keep being ready.
    pub fn event_interval(mut self, polls: u32) -> Builder {
        self.event_interval = polls.max(1);
        self
    }

    /// I/O operations a task may complete in one poll before it must yield.
    pub fn task_budget(mut self, operations: u32) -> Builder {
        self.task_budget = operations.max(1);
        self
    }

    /// Creates the epoll set, the eventfd and the queues.
    pub fn build(self) -> io::Result<Runtime> {
        let driver = Rc::new(Driver::new()?);
        let shared = Arc::new(Mailbox::new()?);
        driver.reactor.watch_eventfd(shared.eventfd.as_raw_fd())?;
        let core = Rc::new(Core {
            tasks: RefCell::new(Slab::new()),
            shared,
            event_interval: self.event_interval,
            task_budget: self.task_budget,
            remote: RefCell::new(Vec::new()),
        });
        Ok(Runtime {
            driver,
            core,
            polls: Cell::new(0),
        })
    }
}

/// A single-threaded runtime: one epoll set, one timer store, one run queue.
/// For many cores, start one per thread ([`crate::threads`]).
///
/// # Examples
///
/// The counters show what lives in a runtime: a pending sleep is one entry
/// in its timer store, a socket one registration in its epoll set, and
/// both are gone once dropped.
///
/// ```
/// use std::time::Duration;
/// use runtime::{Runtime, net::TcpListener, time};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let sleeper = runtime::spawn(time::sleep(Duration::from_secs(60)));
///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
///     runtime::yield_now().await; // the sleeper runs once and registers
///     assert_eq!((rt.pending_timers(), rt.registered_fds()), (1, 1));
///     sleeper.abort();
///     drop(listener);
///     runtime::yield_now().await; // the abort is carried out
///     assert_eq!((rt.pending_timers(), rt.registered_fds()), (0, 0));
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Runtime {
    driver: Rc<Driver>,
    core: Rc<Core>,
    /// Task polls so far (for tests and curiosity).
    polls: Cell<u64>,
}

impl Runtime {
    /// A runtime with the default settings.
    ///
    /// # Examples
    ///
    /// A runtime is a value on this thread: building it opens an epoll set
    /// and an eventfd, and nothing runs until [`Runtime::block_on`]. It
    /// outlives each `block_on`: a task spawned in one and not finished
    /// when it returned runs in the next.
    ///
    /// ```
    /// let rt = runtime::Runtime::new()?;
    /// assert_eq!(rt.block_on(async { 6 * 7 }), 42);
    /// let handle = rt.block_on(async { runtime::spawn(async { "later" }) });
    /// assert!(!handle.is_finished(), "block_on returned before the task ran");
    /// assert_eq!(rt.block_on(handle).unwrap(), "later");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Runs `future` to completion on this thread, running spawned tasks and
    /// waiting for I/O and timers while it is pending.
    ///
    /// # Examples
    ///
    /// The thread sleeps in `epoll_wait` while the future waits; here it
    /// waits for a value sent from another thread, whose wake crosses over
    /// through the runtime's eventfd.
    ///
    /// ```
    /// use runtime::{Runtime, oneshot};
    ///
    /// let rt = Runtime::new()?;
    /// let (tx, rx) = oneshot::channel();
    /// let sender = std::thread::spawn(move || tx.send("from another thread"));
    /// let got = rt.block_on(rx);
    /// assert_eq!(got, Ok("from another thread"));
    /// sender.join().unwrap().unwrap();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If called from inside another `block_on` on the same thread: the
    /// inner call would block the thread that runs every other task.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _enter = self.enter();
        let mut future = pin!(future);
        let main = Arc::new(Header::new(TaskId::BLOCK_ON, self.core.shared.clone()));
        let main_waker = waker_for(&main);
        // Tasks spawned before entering (Runtime::spawn) wait in the remote
        // queue; they go first, so a main future that yields lets them run.
        self.collect_remote();
        main.schedule();
        loop {
            if let Some(output) = self.run_ready(&main, &main_waker, future.as_mut()) {
                // Tasks still queued, or yielded and not yet woken, are
                // handed to the remote queue by the guard, for the next
                // block_on of this runtime.
                return output;
            }
            self.park();
        }
    }

    /// Spawns a task on this runtime; it starts running at the next
    /// `block_on` (or right away, if called from inside one).
    ///
    /// # Examples
    ///
    /// Tasks queued before entering wait for the runtime to run; the main
    /// future of `block_on` drives them by awaiting their handles.
    ///
    /// ```
    /// let rt = runtime::Runtime::new()?;
    /// let handles: Vec<_> = (1..=3).map(|i| rt.spawn(async move { i * 10 })).collect();
    /// assert_eq!(rt.live_tasks(), 3, "queued, not run yet");
    /// let sum = rt.block_on(async {
    ///     let mut sum = 0;
    ///     for handle in handles {
    ///         sum += handle.await.unwrap();
    ///     }
    ///     sum
    /// });
    /// assert_eq!(sum, 60);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.core.spawn(future)
    }

    /// Task polls done so far, the main future's included.
    pub fn polls(&self) -> u64 {
        self.polls.get()
    }

    /// Spawned tasks that have not finished.
    pub fn live_tasks(&self) -> usize {
        self.core.tasks.borrow().len()
    }

    /// Descriptors registered with this runtime's reactor.
    pub fn registered_fds(&self) -> usize {
        self.driver.reactor.registered()
    }

    /// Timers waiting in this runtime's timer store.
    pub fn pending_timers(&self) -> usize {
        self.driver.timers.borrow().len()
    }

    /// Installs this runtime in the thread's context (driver, executor, local
    /// queue, budget, deferred wakes); the guard puts back what was there.
    fn enter(&self) -> context::EnterGuard {
        assert!(
            !context::is_entered(),
            "Runtime::block_on called from inside a running runtime: it would block \
             the thread every task runs on; spawn the future instead"
        );
        self.enter_unchecked()
    }

    fn enter_unchecked(&self) -> context::EnterGuard {
        context::enter(&self.core.shared, self.driver.clone(), self.core.clone())
    }

    /// Runs up to `event_interval` queued tasks. Returns the main future's
    /// output if it finished.
    fn run_ready<T>(
        &self,
        main: &Header,
        main_waker: &Waker,
        mut future: Pin<&mut impl Future<Output = T>>,
    ) -> Option<T> {
        for _ in 0..self.core.event_interval {
            let id = context::pop_local()?;
            self.polls.set(self.polls.get() + 1);
            if id != TaskId::BLOCK_ON {
                self.core.run_task(id);
                continue;
            }
            if main.start_run() != Run::Poll {
                continue;
            }
            let mut cx = Context::from_waker(main_waker);
            match coop::with_budget(self.core.task_budget, || future.as_mut().poll(&mut cx)) {
                Poll::Ready(output) => return Some(output),
                Poll::Pending => {
                    if main.end_run_pending() {
                        context::schedule(&self.core.shared, TaskId::BLOCK_ON);
                    }
                }
            }
        }
        None
    }

    /// Waits for the driver: briefly if tasks are queued, otherwise until an
    /// event, a deadline or a wake from another thread.
    fn park(&self) {
        let shared = &self.core.shared;
        let busy = context::local_len() > 0 || shared.has_remote() || coop::has_deferred();
        let max_wait = if busy { Some(Duration::ZERO) } else { None };
        if let Err(e) = self.driver.turn(max_wait) {
            // epoll_wait fails only on a bad descriptor or pointer (EBADF,
            // EFAULT, EINVAL): a bug in this crate, not a condition to handle.
            panic!("epoll_wait failed, the runtime cannot go on: {e}");
        }
        if self.driver.reactor.take_remote_wake() {
            shared.eventfd.drain();
        }
        self.collect_remote();
        coop::wake_deferred();
    }

    /// Moves tasks woken from other threads into the local queue.
    fn collect_remote(&self) {
        let mut remote = self.core.remote.borrow_mut();
        self.core.shared.take_remote(&mut *remote);
        context::extend_local(&mut remote);
    }
}

impl Core {
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let mut join = None;
        self.insert(|header| {
            let (spawned, handle) = task::spawned(future, header.clone());
            join = Some(handle);
            spawned
        });
        join.expect("insert always calls its closure")
    }

    /// A task of `make`'s future, given the task's header, queued to run.
    fn insert<F: Future<Output = ()> + 'static>(&self, make: impl FnOnce(&Arc<Header>) -> F) {
        let mut header = None;
        self.tasks.borrow_mut().insert_with(|id| {
            let h = Arc::new(Header::new(TaskId(id), self.shared.clone()));
            let future = make(&h);
            header = Some(h.clone());
            let task = Task {
                waker: waker_for(&h),
                header: h,
                future,
            };
            Some(Box::pin(task) as Pin<Box<dyn Runnable>>)
        });
        if let Some(header) = header {
            header.schedule();
        }
    }

    /// Polls one task once, or cancels it if an abort is pending.
    fn run_task(&self, id: TaskId) {
        // Taken out of its slot while it runs, so the slab is free (it may
        // spawn); put back if it is not done.
        let taken = self.tasks.borrow_mut().get_mut(id.0).and_then(Option::take);
        let Some(mut task) = taken else {
            return; // already finished: a stale id
        };
        match task.header().start_run() {
            Run::Skip => return self.put_back(id, task),
            Run::Cancel => return self.finish(id, task),
            Run::Poll => {}
        }
        match coop::with_budget(self.task_budget, || task.as_mut().run()) {
            Poll::Ready(()) => self.finish(id, task),
            Poll::Pending => {
                let again = task.header().end_run_pending();
                self.put_back(id, task);
                if again {
                    context::schedule(&self.shared, id);
                }
            }
        }
    }

    fn put_back(&self, id: TaskId, task: Pin<Box<dyn Runnable>>) {
        if let Some(slot) = self.tasks.borrow_mut().get_mut(id.0) {
            *slot = Some(task);
        }
    }

    /// Marks the task complete and drops it (its future with it).
    fn finish(&self, id: TaskId, task: Pin<Box<dyn Runnable>>) {
        task.header().complete();
        self.tasks.borrow_mut().remove(id.0);
        // Dropped after the slab's borrow ended, so that a destructor that
        // spawns or aborts finds the slab free.
        drop(task);
    }
}

/// Spawns a task on the runtime running on this thread.
///
/// # Examples
///
/// Two tasks take turns on one thread: each `await` that cannot finish
/// returns control to the executor, which runs the other. The pong task
/// answers the ping task over two channels, and its `JoinHandle` brings
/// back its output.
///
/// ```
/// use runtime::{Runtime, mpsc, spawn};
///
/// let rt = Runtime::new()?;
/// let total = rt.block_on(async {
///     let (ping_tx, mut ping_rx) = mpsc::channel::<u32>();
///     let (pong_tx, mut pong_rx) = mpsc::channel::<u32>();
///     let pong = spawn(async move {
///         let mut answered = 0;
///         while let Some(n) = ping_rx.recv().await {
///             pong_tx.send(n + 1).unwrap();
///             answered += 1;
///         }
///         answered // ping_tx dropped: the loop ends
///     });
///     let mut n = 0;
///     for _ in 0..3 {
///         ping_tx.send(n).unwrap();
///         n = pong_rx.recv().await.unwrap();
///     }
///     drop(ping_tx);
///     (n, pong.await.unwrap())
/// });
/// assert_eq!(total, (3, 3));
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Panics
///
/// Outside `Runtime::block_on`: there is no runtime to run it. Use
/// [`Runtime::spawn`] to queue tasks before entering.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    current("spawn").spawn(future)
}

/// Spawns a task whose end nobody awaits: no [`JoinHandle`], and no room
/// kept for one (a `JoinHandle` dropped at once detaches its task too, but
/// its output's slot lives as long as the task). For tasks spawned by the
/// thousand that each end on their own, such as a proxy's connections. A
/// panic in it ends it alone, said by the panic hook.
///
/// # Examples
///
/// Fire and forget: a detached task reports through a channel, if at all.
/// Here ten of them each send their number, and the receiver sees the end
/// of the stream once the last task (and with it the last sender) is gone.
///
/// ```
/// use runtime::{Runtime, mpsc, spawn_detached};
///
/// let rt = Runtime::new()?;
/// let sum = rt.block_on(async {
///     let (tx, mut rx) = mpsc::channel();
///     for i in 0..10 {
///         let tx = tx.clone();
///         spawn_detached(async move {
///             tx.send(i).unwrap();
///         });
///     }
///     drop(tx);
///     let mut sum = 0;
///     while let Some(i) = rx.recv().await {
///         sum += i;
///     }
///     sum
/// });
/// assert_eq!(sum, 45);
/// assert_eq!(rt.live_tasks(), 0);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Panics
///
/// Outside `Runtime::block_on`, as [`spawn`].
pub fn spawn_detached<F>(future: F)
where
    F: Future<Output = ()> + 'static,
{
    current("spawn_detached").insert(|_| task::detached(future));
}

/// The executor of the runtime running on this thread.
fn current(what: &str) -> Rc<Core> {
    // Only `Runtime::enter` puts an executor in the context, and it is a Core.
    let core = context::executor().and_then(|e| e.downcast::<Core>().ok());
    match core {
        Some(core) => core,
        None => {
            panic!("runtime::{what} called outside Runtime::block_on; use Runtime::spawn instead")
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.core.shared.close();
        // Enter this runtime so that destructors find it: those that
        // deregister sockets or cancel timers find its driver, and those that
        // spawn clean-up tasks find its executor (such tasks are dropped in
        // the next round without running). Unlike block_on this may happen
        // inside another runtime's block_on; the guard restores that one.
        let _context = self.enter_unchecked();
        // Dropping a future can spawn (a destructor that starts clean-up);
        // drain until nothing is left, a bounded number of rounds.
        for _ in 0..16 {
            let tasks = self.core.tasks.borrow_mut().drain();
            if tasks.is_empty() {
                break;
            }
            for task in tasks.iter().flatten() {
                task.header().complete();
            }
            drop(tasks);
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("live_tasks", &self.live_tasks())
            .field("registered_fds", &self.registered_fds())
            .field("pending_timers", &self.pending_timers())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{oneshot, time};
    use std::sync::Weak;

    /// The one guard restores the whole context: a runtime dropped inside
    /// another's task (which enters the dropped one, so that destructors find
    /// it) hands back the outer runtime's driver, executor and queue.
    #[test]
    fn a_runtime_dropped_inside_a_task_gives_the_context_back() {
        let outer = Runtime::new().unwrap();
        let total = outer.block_on(async {
            let inner = Runtime::new().unwrap();
            inner.spawn(std::future::pending::<()>());
            let queued = spawn(async { 1 }); // in the outer local queue
            drop(inner);
            // The outer executor: spawn works and the queued task still runs.
            let later = spawn(async { 2 });
            // The outer driver: a timer registers and fires.
            time::sleep(Duration::from_millis(1)).await;
            queued.await.unwrap() + later.await.unwrap()
        });
        assert_eq!(total, 3);
        assert_eq!(outer.live_tasks(), 0);
    }

    /// A task that yielded just before the main future finished is not
    /// lost with the context: the guard wakes it into the remote queue, and
    /// it runs first at the next block_on.
    /// A detached task runs to its end like any other, and one that panics
    /// ends alone: the others, and the runtime, go on.
    #[test]
    fn detached_tasks_run_and_a_panic_ends_only_its_own() {
        let rt = Runtime::new().unwrap();
        let ran = Rc::new(Cell::new(0));
        rt.block_on(async {
            for i in 0..3 {
                let ran = ran.clone();
                spawn_detached(async move {
                    time::sleep(Duration::from_millis(1)).await;
                    assert!(i != 1, "deliberate panic from a detached task (test)");
                    ran.set(ran.get() + 1);
                });
            }
            while ran.get() < 2 {
                time::sleep(Duration::from_millis(1)).await;
            }
        });
        assert_eq!(ran.get(), 2);
        assert_eq!(rt.live_tasks(), 0);
    }

    #[test]
    fn a_task_deferred_when_block_on_returns_runs_at_the_next_one() {
        let rt = Runtime::new().unwrap();
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        rt.block_on(async move {
            let (tx, rx) = oneshot::channel();
            spawn(async move {
                let _ = tx.send(()); // queues the main future...
                crate::yield_now().await; // ...ahead of this task's deferred wake
                d.set(true);
            });
            rx.await.unwrap();
        });
        assert!(!done.get(), "the task had yielded: it has not finished");
        assert_eq!(rt.live_tasks(), 1);
        assert!(rt.block_on(async { done.get() }), "it ran before main");
        assert_eq!(rt.live_tasks(), 0);
    }

    /// Every waker clone holds the header; when the task and all its wakers
    /// are gone the header must be freed. A leak keeps it alive forever, a
    /// double drop would crash: both would show here.
    #[test]
    fn waker_clones_and_drops_balance() {
        let rt = Runtime::new().unwrap();
        let handle = rt.spawn(std::future::poll_fn(|cx| {
            let clones: Vec<Waker> = (0..1000).map(|_| cx.waker().clone()).collect();
            let sent = clones[0].clone();
            let wake_from_thread = std::thread::spawn(move || sent.wake());
            wake_from_thread.join().unwrap();
            clones.into_iter().take(10).for_each(Waker::wake);
            Poll::Ready(7)
        }));
        let header: Weak<Header> = Arc::downgrade(&handle.header);
        assert!(
            Arc::strong_count(&handle.header) >= 2,
            "the handle and the slab hold it"
        );
        assert_eq!(rt.block_on(handle).unwrap(), 7);
        assert_eq!(rt.live_tasks(), 0);
        assert!(
            header.upgrade().is_none(),
            "a waker clone leaked: the header is still alive"
        );
    }
}
