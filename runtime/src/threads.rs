//! Many cores: one runtime per thread, sharing nothing.
//!
//! The runtime is single-threaded on purpose: no lock on the epoll path, no
//! task migrating between caches. To use N cores we run N of them, each
//! with its own epoll set, timers and tasks, the way HAProxy runs one event
//! loop per thread and nginx one per worker process. For a server, each
//! thread binds its own listener with `SO_REUSEPORT` and the kernel spreads
//! new connections across them.
//!
//! ```text
//!   thread 0: Runtime ── TcpListener(:8080, reuse_port) ── its connections
//!   thread 1: Runtime ── TcpListener(:8080, reuse_port) ── its connections
//!   ...                       ^
//!                  the kernel picks a listener per new connection
//! ```

use std::fmt;
use std::future::Future;
use std::io;
use std::thread;

use crate::executor::Runtime;
use crate::task::panic_message;

/// How many threads the machine can run at once (at least 1).
pub fn available_cores() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// The threads started by [`spawn_runtimes`].
pub struct RuntimeThreads<T> {
    handles: Vec<thread::JoinHandle<io::Result<T>>>,
}

/// Starts `count` threads named `{name}-{index}`, each building its own
/// [`Runtime`] and running `make(index)` on it to completion.
///
/// # Examples
///
/// Three runtimes, one per thread, sharing nothing: inside each, `spawn`
/// finds that thread's own runtime. `join` gives the outputs in index order.
///
/// ```
/// use runtime::threads::spawn_runtimes;
///
/// let threads = spawn_runtimes(3, "worker", |index| async move {
///     let doubled = runtime::spawn(async move { index * 2 }).await.unwrap();
///     let thread = std::thread::current().name().unwrap_or("?").to_owned();
///     (thread, doubled)
/// })?;
/// assert_eq!(threads.len(), 3);
/// let outputs = threads.join()?;
/// assert_eq!(outputs[0], ("worker-0".to_owned(), 0));
/// assert_eq!(outputs[2], ("worker-2".to_owned(), 4));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn spawn_runtimes<F, Fut>(
    count: usize,
    name: &str,
    make: F,
) -> io::Result<RuntimeThreads<Fut::Output>>
where
    F: Fn(usize) -> Fut + Send + Clone + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let mut handles = Vec::with_capacity(count);
    for index in 0..count {
        let make = make.clone();
        let handle = thread::Builder::new()
            .name(format!("{name}-{index}"))
            .spawn(move || {
                let runtime = Runtime::new()?;
                Ok(runtime.block_on(make(index)))
            })?;
        handles.push(handle);
    }
    Ok(RuntimeThreads { handles })
}

impl<T> RuntimeThreads<T> {
    /// How many threads were started.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// True when no thread was started.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Waits for every thread; returns their outputs in index order, or the
    /// first failure (a runtime that could not be built, or a panic).
    pub fn join(self) -> io::Result<Vec<T>> {
        let mut outputs = Vec::with_capacity(self.handles.len());
        for (index, handle) in self.handles.into_iter().enumerate() {
            match handle.join() {
                Ok(result) => outputs.push(result?),
                Err(payload) => {
                    let msg = panic_message(payload.as_ref()).unwrap_or("<non-string payload>");
                    return Err(io::Error::other(format!(
                        "runtime thread {index} panicked: {msg}"
                    )));
                }
            }
        }
        Ok(outputs)
    }
}

impl<T> fmt::Debug for RuntimeThreads<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeThreads")
            .field("threads", &self.handles.len())
            .finish()
    }
}
