//! A fixed-size pool of threads for blocking work.
//!
//! # Why a pool
//!
//! The executor runs many tasks on one thread. A task that blocks (a `getaddrinfo` lookup, a
//! file read, a long computation) would stall every other task on that thread, so blocking work
//! is handed to a pool: a few ordinary OS threads, started once, that take jobs from a shared
//! queue. A fresh thread per job would also work, but it pays for a thread (and its stack) every
//! time and puts no limit on how many run at once.
//!
//! This is milestone 2 of the C++ study project the runtime grew from (`std::mutex` +
//! `std::condition_variable` + a queue of `std::function`), written in Rust.
//!
//! ```text
//!  execute(job) ─┐     ┌──────────────── Mutex<Jobs> ────────────────┐
//!  execute(job) ─┼───▶ │ queue: [job][job][job]   shutting_down: no   │
//!  run(closure) ─┘     └───────┬─────────────────────────────▲────────┘
//!         job_ready.notify_one │ pop                         │ space_free.notify_one
//!                              ▼                             │ (only with a queue limit)
//!          pool-worker-0   pool-worker-1   pool-worker-2  ───┘
//!          each: take one job, unlock, run it, catch its panic, go round again
//! ```
//!
//! # How workers sleep
//!
//! A worker locks the state and looks at the queue. If it is empty, the worker calls
//! `Condvar::wait`, which releases the lock and puts the thread to sleep in one step, so no
//! `execute` can slip in between "I saw an empty queue" and "I am asleep". `execute` pushes under
//! the same lock and then calls `notify_one` to wake one sleeper.
//!
//! The wait sits in a `while` loop that re-checks the condition, never in an `if`. `wait` may
//! return although nobody notified (a *spurious wakeup*: POSIX and `std` both allow it), and even
//! a real notification can be stale by the time the woken worker has the lock again, because
//! another worker that was not asleep may have taken the job first. Only the condition, read
//! under the lock, says whether there is work.
//!
//! # Shutdown: stop, drain, join
//!
//! Shutdown sets `shutting_down` under the lock and calls `notify_all`, since every sleeper must
//! see the flag, not just one. From then on `execute` returns [`PoolClosed`]. Workers keep taking
//! jobs until the queue is empty and only then exit, so every job accepted before shutdown still
//! runs. Finally shutdown joins every worker, so when it returns no pool thread is left.
//!
//! # Panics
//!
//! A panicking job unwinds its worker's stack. Uncaught, it would end that thread and the pool
//! would quietly shrink, down to no workers and a queue nobody empties. So each job runs inside
//! `catch_unwind`; a panic is counted ([`ThreadPool::panicked_jobs`]), reported with one line on
//! stderr, and the worker goes on to the next job.
//!
//! Jobs run with the lock released. That is what lets the others take jobs meanwhile, and it also
//! means a panicking job can never poison the pool's mutex. The code that does run under the lock
//! only pushes, pops or sets a flag, and each of those leaves the state valid, so if a lock ever
//! were poisoned its data would still be sound: we take the guard back with
//! `PoisonError::into_inner` instead of spreading one panic to every thread that touches the pool.
//!
//! # Backpressure and the bridge to async
//!
//! [`ThreadPool::with_queue_limit`] bounds the queue: `execute` then blocks while `limit` jobs are
//! waiting, so a producer that outruns the workers (an accept loop, say) slows down instead of
//! growing the queue without end. (Do not `execute` on a bounded pool from inside one of its own
//! jobs: if every worker did so on a full queue, nobody would be left to empty it.)
//!
//! [`ThreadPool::run`] is the bridge from async code: it runs a closure on the pool and hands back
//! a [`Blocking`] future that resolves to the closure's value, or to a
//! [`JoinError`] if the closure panicked or never ran.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{Arc, Condvar, Mutex, MutexGuard, lock, thread};
use crate::task::{JoinError, panic_message};

/// One unit of work, boxed so that closures of different types fit in one queue.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed number of worker threads taking jobs from a shared queue.
///
/// Dropping the pool (or calling [`shutdown`](ThreadPool::shutdown)) runs every job already
/// queued and joins every worker.
///
/// # Examples
///
/// Jobs for ordinary threads, no runtime involved: ten are queued, and `shutdown` returns only
/// once every one of them has run and every worker has exited.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use runtime::thread_pool::ThreadPool;
///
/// let pool = ThreadPool::new(2)?;
/// let done = Arc::new(AtomicUsize::new(0));
/// for _ in 0..10 {
///     let done = done.clone();
///     pool.execute(move || {
///         done.fetch_add(1, Ordering::Relaxed);
///     })
///     .expect("the pool is open");
/// }
/// pool.shutdown();
/// assert_eq!(done.load(Ordering::Relaxed), 10);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ThreadPool {
    shared: Arc<JobQueue>,
    workers: Vec<thread::JoinHandle<()>>,
    threads: usize,
}

/// The part the workers share with the pool handle.
struct JobQueue {
    state: Mutex<Jobs>,
    /// Workers sleep here until the queue has a job or shutdown began.
    job_ready: Condvar,
    /// Submitters sleep here while a bounded queue is full.
    space_free: Condvar,
    /// `None`: the queue is unbounded.
    queue_limit: Option<usize>,
    panicked_jobs: AtomicUsize,
}

struct Jobs {
    queue: VecDeque<Job>,
    shutting_down: bool,
}

/// The pool is shutting down and accepts no more jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolClosed;

impl fmt::Display for PoolClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the thread pool is shutting down and accepts no more jobs")
    }
}

impl std::error::Error for PoolClosed {}

impl ThreadPool {
    /// Starts `threads` workers named `pool-worker-0`, `pool-worker-1`, ... with an unbounded queue.
    pub fn new(threads: usize) -> io::Result<ThreadPool> {
        ThreadPool::start(threads, None)
    }

    /// Like [`new`](ThreadPool::new), but [`execute`](ThreadPool::execute) blocks while `limit`
    /// jobs are waiting in the queue.
    pub fn with_queue_limit(threads: usize, limit: usize) -> io::Result<ThreadPool> {
        if limit == 0 {
            return Err(invalid_input(
                "a thread pool's queue limit must be at least 1 (0 would block every execute)",
            ));
        }
        ThreadPool::start(threads, Some(limit))
    }

    fn start(threads: usize, queue_limit: Option<usize>) -> io::Result<ThreadPool> {
        if threads == 0 {
            return Err(invalid_input("a thread pool needs at least 1 thread"));
        }
        let mut pool = ThreadPool {
            shared: Arc::new(JobQueue::new(queue_limit)),
            workers: Vec::with_capacity(threads),
            threads,
        };
        for index in 0..threads {
            // If the OS refuses a thread, `?` drops `pool`, and its Drop shuts down and joins
            // the workers already started: no thread outlives a failed constructor.
            pool.workers.push(spawn_worker(&pool.shared, index)?);
        }
        Ok(pool)
    }

    /// Queues `job` to run on a worker. With a queue limit this blocks while the queue is full.
    pub fn execute<F>(&self, job: F) -> Result<(), PoolClosed>
    where
        F: FnOnce() + Send + 'static,
    {
        self.shared.submit(Box::new(job))
    }

    /// Runs `f` on the pool and returns a future for its result: the bridge from async code.
    ///
    /// The future resolves to `Err(JoinError::Panicked)` if `f` panicked, and to
    /// `Err(JoinError::Cancelled)` if `f` never ran because the pool was closed. Dropping the
    /// future does not stop `f`; its result is then discarded.
    ///
    /// # Examples
    ///
    /// A job that blocks (here on a std channel) sits on a pool thread, and the event loop goes
    /// on meanwhile: its timer still fires, and it is the event loop that then unblocks the job.
    /// Had the job run on the runtime's thread, the timer would never have fired.
    ///
    /// ```
    /// use std::time::Duration;
    /// use runtime::{Runtime, thread_pool::ThreadPool, time};
    ///
    /// let pool = ThreadPool::new(1)?;
    /// let (tx, rx) = std::sync::mpsc::channel::<u32>();
    /// let answer = Runtime::new()?.block_on(async {
    ///     let blocked = pool.run(move || rx.recv().map(|n| n * 2));
    ///     time::sleep(Duration::from_millis(1)).await;
    ///     tx.send(21).unwrap();
    ///     blocked.await
    /// });
    /// assert_eq!(answer.unwrap(), Ok(42));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn run<F, T>(&self, f: F) -> Blocking<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (job, blocking) = bridge(f);
        // On PoolClosed the pool has dropped the job, and dropping it already resolved the
        // future to Cancelled, so there is nothing left to do with the error.
        let _ = self.execute(job);
        blocking
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How many jobs given to [`execute`](ThreadPool::execute) have panicked so far.
    ///
    /// Panics in [`run`](ThreadPool::run) closures are not counted: they reach their caller as
    /// `JoinError::Panicked` instead.
    ///
    /// # Examples
    ///
    /// A panicking job does not take its worker with it: the one worker of this pool runs the
    /// next job, and by then the panic has been counted (the queue is first in, first out).
    ///
    /// ```
    /// use runtime::{Runtime, thread_pool::ThreadPool};
    ///
    /// let pool = ThreadPool::new(1)?;
    /// pool.execute(|| panic!("a bad job")).expect("the pool is open");
    /// let after = Runtime::new()?.block_on(pool.run(|| "the worker is still there"));
    /// assert_eq!(after.unwrap(), "the worker is still there");
    /// assert_eq!(pool.panicked_jobs(), 1);
    ///
    /// let failed = Runtime::new()?.block_on(pool.run(|| -> u32 { panic!("bad input") }));
    /// assert_eq!(failed.unwrap_err().panic_message(), Some("bad input"));
    /// assert_eq!(pool.panicked_jobs(), 1, "a run's panic goes to its caller instead");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn panicked_jobs(&self) -> usize {
        // A statistic read on its own: it orders nothing, so Relaxed is enough.
        self.shared.panicked_jobs.load(Ordering::Relaxed)
    }

    /// Stops accepting jobs, runs every job already queued, and joins every worker.
    pub fn shutdown(mut self) {
        self.shut_down_and_join();
        // Drop runs next and calls shut_down_and_join again. With `workers` now empty it joins
        // nothing: it sets a flag that is already set and notifies threads that are gone.
    }

    fn shut_down_and_join(&mut self) {
        self.shared.close();
        let current = thread::current().id();
        for worker in self.workers.drain(..) {
            // When a job held the last handle to its own pool, this runs on a worker, and that
            // worker would wait for itself forever. It has seen the flag; it exits by itself
            // once the queue is empty.
            if worker.thread().id() == current {
                continue;
            }
            // An Err would mean the worker panicked outside any job, which `run_job` rules out.
            // Panicking here, possibly inside Drop, would help nobody.
            let _ = worker.join();
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shut_down_and_join();
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared.state);
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads)
            .field("queued", &state.queue.len())
            .field("queue_limit", &self.shared.queue_limit)
            .field("shutting_down", &state.shutting_down)
            .field("panicked_jobs", &self.panicked_jobs())
            .finish()
    }
}

fn invalid_input(message: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn spawn_worker(shared: &Arc<JobQueue>, index: usize) -> io::Result<thread::JoinHandle<()>> {
    let name = format!("pool-worker-{index}");
    let shared = Arc::clone(shared);
    thread::Builder::new()
        .name(name.clone())
        .spawn(move || shared.work(&name))
}

impl JobQueue {
    fn new(queue_limit: Option<usize>) -> JobQueue {
        JobQueue {
            state: Mutex::new(Jobs {
                queue: VecDeque::new(),
                shutting_down: false,
            }),
            job_ready: Condvar::new(),
            space_free: Condvar::new(),
            queue_limit,
            panicked_jobs: AtomicUsize::new(0),
        }
    }

    /// A worker's whole life.
    fn work(&self, worker: &str) {
        while let Some(job) = self.next_job() {
            self.run_job(job, worker);
        }
    }

    /// Sleeps until there is a job. `None` means "shutting down and nothing left": time to exit.
    fn next_job(&self) -> Option<Job> {
        let mut state = lock(&self.state);
        while state.queue.is_empty() && !state.shutting_down {
            state = wait(&self.job_ready, state);
        }
        let job = state.queue.pop_front();
        drop(state);
        // A std Condvar notify is a syscall even with nobody waiting, so an unbounded pool,
        // which never has a submitter waiting, skips it.
        if job.is_some() && self.queue_limit.is_some() {
            self.space_free.notify_one();
        }
        job
    }

    fn run_job(&self, job: Job, worker: &str) {
        // AssertUnwindSafe: after a panic nothing the job touched is used again here; the job
        // itself is gone, and the pool's state was never lent to it.
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(job)) {
            self.panicked_jobs.fetch_add(1, Ordering::Relaxed);
            report_panic(worker, &*payload);
        }
    }

    fn submit(&self, job: Job) -> Result<(), PoolClosed> {
        let mut state = lock(&self.state);
        while self.is_full(&state) && !state.shutting_down {
            state = wait(&self.space_free, state);
        }
        if state.shutting_down {
            // Unlock before the job is dropped: dropping it runs the captured values' Drop
            // code (for `run`, waking a future), which must not run under the pool's lock.
            drop(state);
            drop(job);
            return Err(PoolClosed);
        }
        state.queue.push_back(job);
        // Notify after unlocking, so the woken worker does not wake up only to block on the
        // lock we still hold. No wakeup is lost: a worker checks the queue under the lock, so it
        // either saw this job already or is waiting and gets this notify.
        drop(state);
        self.job_ready.notify_one();
        Ok(())
    }

    fn is_full(&self, state: &Jobs) -> bool {
        self.queue_limit
            .is_some_and(|limit| state.queue.len() >= limit)
    }

    fn close(&self) {
        lock(&self.state).shutting_down = true;
        // Everyone must see the flag: every sleeping worker, so it drains and exits, and every
        // submitter blocked on a full queue, so it returns PoolClosed instead of waiting for
        // room that may never come.
        self.job_ready.notify_all();
        self.space_free.notify_all();
    }
}

/// `Condvar::wait` with the same poison recovery as [`lock`].
fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

fn report_panic(worker: &str, payload: &(dyn Any + Send)) {
    // Not eprintln!: it panics if stderr is gone, and a report must not become a second panic.
    let _ = writeln!(
        io::stderr(),
        "{worker}: a job panicked: {}; the worker carries on",
        panic_message(payload).unwrap_or("(a panic payload that is not a string)")
    );
}

// ---------------------------------------------------------------------------------------------
// The bridge: a blocking closure on the pool, awaited as a future.
//
//   async task                         slot: Mutex<ResultCell>                    pool worker
//   poll: lock; done? take result;  ─▶ result / waker / done  ◀─ complete: lock; store result;
//         else keep waker; unlock                                          take waker; unlock;
//                                                                          wake
// ---------------------------------------------------------------------------------------------

/// A future for the result of a closure given to [`ThreadPool::run`].
///
/// It works with any executor that honours the `Waker` contract: the pool thread wakes the last
/// waker the future was polled with.
pub struct Blocking<T> {
    slot: Arc<Mutex<ResultCell<T>>>,
}

/// Where the pool thread leaves the result for the future.
struct ResultCell<T> {
    result: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
    /// Set once a result was stored. It tells "not finished yet" (`!done`) apart from "finished,
    /// and the future already took the result" (`done` with `result` empty).
    done: bool,
}

/// The job's end of the slot. It always completes the future: with the closure's outcome when
/// the job runs, or with `Cancelled` from its Drop when the job is dropped without running.
struct Completer<T> {
    slot: Arc<Mutex<ResultCell<T>>>,
}

/// Splits `f` into a pool job and the future that observes it.
fn bridge<F, T>(f: F) -> (impl FnOnce() + Send + 'static, Blocking<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let slot = Arc::new(Mutex::new(ResultCell {
        result: None,
        waker: None,
        done: false,
    }));
    let completer = Completer {
        slot: Arc::clone(&slot),
    };
    let job = move || {
        // Caught here rather than by the worker, so the payload reaches whoever awaits it.
        let outcome = panic::catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panicked);
        completer.complete(outcome);
    };
    (job, Blocking { slot })
}

impl<T> Completer<T> {
    /// Stores the outcome and wakes the future. Only the first call has an effect.
    fn complete(&self, outcome: Result<T, JoinError>) {
        let waker = {
            let mut slot = lock(&self.slot);
            if slot.done {
                return;
            }
            slot.result = Some(outcome);
            slot.done = true;
            slot.waker.take()
        };
        // Wake with the lock released: waking runs executor code, which may poll this future
        // right away on this thread, and that poll takes the same (non-reentrant) lock.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        // After a normal completion this does nothing; otherwise the job was dropped unrun.
        self.complete(Err(JoinError::Cancelled));
    }
}

impl<T> Future for Blocking<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.slot);
        if !slot.done {
            // The waker is stored under the lock that `complete` takes, so a completion either
            // happened before this lock (and `done` is set) or happens after the unlock and
            // finds this waker. There is no gap for a wakeup to fall into.
            crate::waker::store(&mut slot.waker, cx.waker());
            return Poll::Pending;
        }
        let result = slot.result.take();
        drop(slot); // never panic while holding the lock
        match result {
            Some(result) => Poll::Ready(result),
            None => panic!("`Blocking` polled again after it returned Ready"),
        }
    }
}

impl<T> fmt::Debug for Blocking<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blocking")
            .field("done", &lock(&self.slot).done)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_support::{block_on, with_watchdog};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier};
    use std::task::Wake;
    use std::thread;

    /// Generous: these tests take milliseconds; the limit only turns a hang into a failure.
    const WATCHDOG_SECS: u64 = 10;

    /// A waker that reports its name on a channel each time it is woken.
    struct Named {
        name: &'static str,
        woken: mpsc::Sender<&'static str>,
    }

    impl Wake for Named {
        fn wake(self: Arc<Self>) {
            let _ = self.woken.send(self.name);
        }
    }

    #[test]
    fn zero_threads_or_zero_limit_is_invalid_input() {
        let kind = |result: io::Result<ThreadPool>| result.expect_err("must be refused").kind();
        assert_eq!(kind(ThreadPool::new(0)), io::ErrorKind::InvalidInput);
        assert_eq!(
            kind(ThreadPool::with_queue_limit(0, 4)),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            kind(ThreadPool::with_queue_limit(2, 0)),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn accessors_and_debug() {
        let pool = ThreadPool::with_queue_limit(3, 8).unwrap();
        assert_eq!(pool.threads(), 3);
        assert_eq!(pool.panicked_jobs(), 0);
        let shown = format!("{pool:?}");
        assert!(
            shown.contains("threads: 3") && shown.contains("Some(8)"),
            "{shown}"
        );
        assert_eq!(
            PoolClosed.to_string(),
            "the thread pool is shutting down and accepts no more jobs"
        );
    }

    #[test]
    fn jobs_really_overlap() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(4).unwrap();
            // Each job waits until all four are inside it; one at a time would never get there.
            let barrier = Arc::new(Barrier::new(4));
            let (passed_tx, passed_rx) = mpsc::channel();
            for _ in 0..4 {
                let (barrier, passed_tx) = (Arc::clone(&barrier), passed_tx.clone());
                pool.execute(move || {
                    barrier.wait();
                    passed_tx.send(()).unwrap();
                })
                .unwrap();
            }
            for _ in 0..4 {
                passed_rx.recv().unwrap();
            }
            pool.shutdown();
        });
    }

    #[test]
    fn every_job_runs_exactly_once_under_contention() {
        const SUBMITTERS: usize = 4;
        const PER_SUBMITTER: usize = 2_500;
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(4).unwrap();
            let runs: Arc<Vec<AtomicUsize>> = Arc::new(
                (0..SUBMITTERS * PER_SUBMITTER)
                    .map(|_| AtomicUsize::new(0))
                    .collect(),
            );
            thread::scope(|scope| {
                for submitter in 0..SUBMITTERS {
                    let (pool, runs) = (&pool, &runs);
                    scope.spawn(move || {
                        for i in 0..PER_SUBMITTER {
                            let (runs, slot) = (Arc::clone(runs), submitter * PER_SUBMITTER + i);
                            pool.execute(move || {
                                runs[slot].fetch_add(1, SeqCst);
                            })
                            .unwrap();
                        }
                    });
                }
            });
            pool.shutdown();
            let wrong: Vec<usize> = (0..runs.len())
                .filter(|&i| runs[i].load(SeqCst) != 1)
                .collect();
            assert!(wrong.is_empty(), "jobs not run exactly once: {wrong:?}");
        });
    }

    #[test]
    fn shutdown_drains_the_queue_and_joins() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(2).unwrap();
            let count = Arc::new(AtomicUsize::new(0));
            for _ in 0..1_000 {
                let count = Arc::clone(&count);
                pool.execute(move || {
                    count.fetch_add(1, SeqCst);
                })
                .unwrap();
            }
            let shared = Arc::clone(&pool.shared);
            pool.shutdown();
            assert_eq!(count.load(SeqCst), 1_000);
            // Joined: every worker has dropped its handle on the shared state.
            assert_eq!(Arc::strong_count(&shared), 1);
        });
    }

    #[test]
    fn a_panicking_job_leaves_the_pool_working() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(1).unwrap();
            pool.execute(|| panic!("deliberate panic from a pool job (test)"))
                .unwrap();
            let (ran_tx, ran_rx) = mpsc::channel();
            for i in 0..10 {
                let ran_tx = ran_tx.clone();
                pool.execute(move || ran_tx.send(i).unwrap()).unwrap();
            }
            let ran: Vec<i32> = (0..10).map(|_| ran_rx.recv().unwrap()).collect();
            assert_eq!(ran, (0..10).collect::<Vec<_>>());
            // One worker: the panicking job finished (and was counted) before these ran.
            assert_eq!(pool.panicked_jobs(), 1);
            pool.shutdown();
        });
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        assert_eq!(panic_message(&"static"), Some("static"));
        assert_eq!(panic_message(&String::from("formatted")), Some("formatted"));
        assert_eq!(panic_message(&42_u8), None);
    }

    #[test]
    fn execute_after_shutdown_began_is_refused() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(2).unwrap();
            pool.shared.close(); // what shutdown does first, before it joins
            assert_eq!(pool.execute(|| {}), Err(PoolClosed));
            drop(pool); // Drop after close must still join, and not hang
        });
    }

    #[test]
    fn shutdown_releases_a_submitter_blocked_on_a_full_queue() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::with_queue_limit(1, 1).unwrap();
            let (started_tx, started_rx) = mpsc::channel();
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let ran = Arc::new(AtomicUsize::new(0));
            pool.execute(move || {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
            .unwrap();
            started_rx.recv().unwrap(); // the worker is busy, the queue is empty
            let filler_ran = Arc::clone(&ran);
            pool.execute(move || {
                filler_ran.fetch_add(1, SeqCst);
            })
            .unwrap(); // the queue is full now and stays full until we release the worker

            // Only the internal handle can submit while the pool itself is being shut down.
            let shared = Arc::clone(&pool.shared);
            let late_ran = Arc::clone(&ran);
            let submitter = thread::spawn(move || {
                shared.submit(Box::new(move || {
                    late_ran.fetch_add(100, SeqCst);
                }))
            });
            let shutter = thread::spawn(move || pool.shutdown());
            // The queue cannot drain before the release below, so this submit can only end by
            // seeing the shutdown flag, whether it was already blocked or arrived late.
            assert_eq!(submitter.join().unwrap(), Err(PoolClosed));
            release_tx.send(()).unwrap();
            shutter.join().unwrap();
            assert_eq!(
                ran.load(SeqCst),
                1,
                "the queued job ran, the refused one did not"
            );
        });
    }

    #[test]
    fn queue_limit_applies_backpressure() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::with_queue_limit(1, 1).unwrap();
            let returned = Arc::new(AtomicBool::new(false));
            let (started_tx, started_rx) = mpsc::channel();
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let (observed_tx, observed_rx) = mpsc::channel();
            let seen_by_worker = Arc::clone(&returned);
            pool.execute(move || {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                // Still inside the first job, so the second still fills the queue: the third
                // execute cannot have returned yet.
                observed_tx.send(seen_by_worker.load(SeqCst)).unwrap();
            })
            .unwrap();
            started_rx.recv().unwrap(); // the worker holds job 1; the queue is empty
            pool.execute(|| {}).unwrap(); // job 2 fills the queue

            thread::scope(|scope| {
                let (about_tx, about_rx) = mpsc::channel();
                let (pool, returned) = (&pool, &returned);
                scope.spawn(move || {
                    about_tx.send(()).unwrap();
                    pool.execute(|| {}).unwrap(); // job 3: must block until job 2 is taken
                    returned.store(true, SeqCst);
                });
                about_rx.recv().unwrap();
                assert!(!returned.load(SeqCst));
                release_tx.send(()).unwrap();
                assert!(
                    !observed_rx.recv().unwrap(),
                    "execute returned while the queue was full"
                );
            });
            assert!(returned.load(SeqCst)); // the scope joined the submitter: it got through
            pool.shutdown();
        });
    }

    #[test]
    fn last_handle_dropped_inside_its_own_job_does_not_hang() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = Arc::new(ThreadPool::new(2).unwrap());
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let (dropped_tx, dropped_rx) = mpsc::channel();
            let own_handle = Arc::clone(&pool);
            pool.execute(move || {
                release_rx.recv().unwrap();
                drop(own_handle); // the last handle: ThreadPool::drop runs on this worker
                dropped_tx.send(()).unwrap();
            })
            .unwrap();
            drop(pool);
            release_tx.send(()).unwrap();
            dropped_rx.recv().unwrap();
        });
    }

    #[test]
    fn run_returns_the_closures_value() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(2).unwrap();
            assert!(matches!(block_on(pool.run(|| 6 * 7)), Ok(42)));
            pool.shutdown();
        });
    }

    #[test]
    fn run_reports_a_panic_as_join_error() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(1).unwrap();
            let result = block_on(pool.run(|| -> u8 { panic!("deliberate panic in run (test)") }));
            match result {
                Err(JoinError::Panicked(payload)) => {
                    assert_eq!(
                        panic_message(&*payload),
                        Some("deliberate panic in run (test)")
                    );
                }
                _ => panic!("expected JoinError::Panicked"),
            }
            // Delivered to the caller, so not counted as an unreported job panic.
            assert_eq!(pool.panicked_jobs(), 0);
            assert!(
                matches!(block_on(pool.run(|| 1)), Ok(1)),
                "the worker survived"
            );
            pool.shutdown();
        });
    }

    #[test]
    fn run_on_a_closed_pool_is_cancelled() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(1).unwrap();
            pool.shared.close();
            let ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&ran);
            let result = block_on(pool.run(move || flag.store(true, SeqCst)));
            assert!(matches!(result, Err(JoinError::Cancelled)));
            assert!(!ran.load(SeqCst));
        });
    }

    #[test]
    fn a_bridge_job_dropped_unrun_cancels_its_future() {
        with_watchdog(WATCHDOG_SECS, || {
            let (job, blocking) = bridge(|| 5);
            drop(job);
            assert!(matches!(block_on(blocking), Err(JoinError::Cancelled)));
        });
    }

    #[test]
    fn completion_wakes_the_latest_waker_only() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(1).unwrap();
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let mut blocking = pool.run(move || {
                release_rx.recv().unwrap();
                7
            });
            let (woken_tx, woken_rx) = mpsc::channel();
            let waker = |name| {
                Waker::from(Arc::new(Named {
                    name,
                    woken: woken_tx.clone(),
                }))
            };
            let (first, second) = (waker("first"), waker("second"));
            let mut poll =
                |waker: &Waker| Pin::new(&mut blocking).poll(&mut Context::from_waker(waker));
            assert!(poll(&first).is_pending()); // the closure is held at the channel
            assert!(poll(&second).is_pending()); // the task moved: the waker must be replaced
            assert!(poll(&second).is_pending()); // same waker again: kept (will_wake)
            release_tx.send(()).unwrap();
            assert_eq!(woken_rx.recv().unwrap(), "second");
            assert!(matches!(poll(&second), Poll::Ready(Ok(7))));
            assert!(
                woken_rx.try_recv().is_err(),
                "exactly one wake, and not the stale waker"
            );
            pool.shutdown();
        });
    }

    #[test]
    fn a_thousand_concurrent_runs_all_complete() {
        with_watchdog(WATCHDOG_SECS, || {
            let pool = ThreadPool::new(4).unwrap();
            let futures: Vec<Blocking<usize>> =
                (0..1_000).map(|i| pool.run(move || i * 2)).collect();
            let sum = block_on(async move {
                let mut sum = 0;
                for future in futures {
                    match future.await {
                        Ok(value) => sum += value,
                        Err(_) => panic!("a run future failed"),
                    }
                }
                sum
            });
            assert_eq!(sum, 2 * (0..1_000).sum::<usize>());
            pool.shutdown();
        });
    }
}

/// Loom models. Run with:
/// `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release loom`
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::task::Wake;

    #[test]
    fn loom_every_queued_job_runs_once_and_shutdown_joins() {
        loom::model(|| {
            let pool = ThreadPool::new(2).expect("loom threads cannot fail to spawn");
            let runs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
            for job in 0..2 {
                let runs = Arc::clone(&runs);
                pool.execute(move || {
                    runs[job].fetch_add(1, SeqCst);
                })
                .expect("the pool is open");
            }
            // Loom reports a deadlock if some interleaving leaves a worker asleep forever.
            pool.shutdown();
            for run in runs.iter() {
                assert_eq!(run.load(SeqCst), 1);
            }
        });
    }

    #[test]
    fn loom_a_full_queue_blocks_then_lets_the_submitter_through() {
        loom::model(|| {
            let pool =
                ThreadPool::with_queue_limit(1, 1).expect("loom threads cannot fail to spawn");
            let runs = Arc::new(AtomicUsize::new(0));
            for _ in 0..2 {
                let runs = Arc::clone(&runs);
                // The second call may find the queue full and must be woken by the worker's pop.
                pool.execute(move || {
                    runs.fetch_add(1, SeqCst);
                })
                .expect("the pool is open");
            }
            pool.shutdown();
            assert_eq!(runs.load(SeqCst), 2);
        });
    }

    /// A waker that only raises a flag, so loom sees every access.
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }

    /// A future under test, the waker it is polled with, and that waker's flag.
    struct Probe {
        future: Blocking<i32>,
        flag: std::sync::Arc<Flag>,
        waker: Waker,
    }

    impl Probe {
        fn new(future: Blocking<i32>) -> Probe {
            let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(std::sync::Arc::clone(&flag));
            Probe {
                future,
                flag,
                waker,
            }
        }

        fn poll(&mut self) -> Poll<Result<i32, JoinError>> {
            Pin::new(&mut self.future).poll(&mut Context::from_waker(&self.waker))
        }

        /// Called once the job has surely finished: a first poll that said Pending must have
        /// been followed by a wake, and the next poll must then be Ready.
        fn value(&mut self, first: Poll<Result<i32, JoinError>>) -> i32 {
            let result = match first {
                Poll::Ready(result) => result,
                Poll::Pending => {
                    assert!(
                        self.flag.0.load(SeqCst),
                        "lost wakeup: Pending, and never woken"
                    );
                    match self.poll() {
                        Poll::Ready(result) => result,
                        Poll::Pending => panic!("woken, yet still Pending"),
                    }
                }
            };
            match result {
                Ok(value) => value,
                Err(_) => panic!("the job neither panicked nor was cancelled"),
            }
        }
    }

    #[test]
    fn loom_bridge_completion_racing_a_poll_never_loses_the_wake() {
        loom::model(|| {
            let pool = ThreadPool::new(2).expect("loom threads cannot fail to spawn");
            // Two bridged jobs on two workers: each completion races the first poll of its future.
            let mut a = Probe::new(pool.run(|| 40));
            let mut b = Probe::new(pool.run(|| 2));
            let (first_a, first_b) = (a.poll(), b.poll());
            pool.shutdown(); // joins the workers, so both jobs have completed
            assert_eq!(a.value(first_a) + b.value(first_b), 42);
        });
    }
}
