//! # runtime: a small async runtime, built from the system calls up
//!
//! This crate is what tokio is to most Rust servers, written small enough to
//! read in an afternoon: an executor, its wakers, an epoll reactor, timers,
//! async TCP, signals, a few sync tools, and a blocking thread pool. The
//! proxy in this repository runs on it.
//!
//! ## The tour, floor by floor
//!
//! Imports go down, never up; inside a floor they go one way too (the
//! arrows), so no module reaches itself through its imports
//! (`runtime/tests/layout.rs` checks it).
//!
//! ```text
//!  ┌──────────────────────────────────────────────────────────────────────────┐
//!  │ executor   block_on, spawn, the run loop          threads (N runtimes)    │  top
//!  ├──────────────────────────────────────────────────────────────────────────┤
//!  │ async_fd <- net, signal  time  fd_limit  fd_passing  heap  pipe <- net   │  what tasks use
//!  │ oneshot  mpsc  notify  combinator  thread_pool                            │
//!  ├──────────────────────────────────────────────────────────────────────────┤
//!  │ run_queue <- context <- coop, task                                        │  tasks and wakes
//!  │ (remote queue) (the one thread-local) (budget) (state word, JoinHandle)   │
//!  ├──────────────────────────────────────────────────────────────────────────┤
//!  │ driver = reactor (epoll, readiness) + timer (deadline store)              │  what the thread waits on
//!  ├──────────────────────────────────────────────────────────────────────────┤
//!  │ sys (every system call, every unsafe)  slab  sync (std or loom)  waker    │  ground
//!  └──────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Read it in this order:
//! 1. `sys`: epoll, eventfd and sockets as safe functions.
//! 2. `slab` and [`reactor`]: how a readiness event finds its task, and why
//!    we chose edge-triggered epoll.
//! 3. `timer` and `driver`: how the nearest deadline bounds `epoll_wait`.
//! 4. [`waker`] and [`task`]: the waker contract, and the state word that
//!    makes wakes never lost and never doubled; `run_queue`: how a wake from
//!    another thread crosses over.
//! 5. `context`: the one thread-local a runtime fills while its `block_on`
//!    runs (driver, executor, local run queue, budget, deferred wakes), put
//!    back by one guard; [`coop`]: the budget, fairness.
//! 6. [`executor`]: `block_on`, the loop that ties it together.
//! 7. [`async_fd`], [`net`], [`time`], [`signal`]: the futures a program
//!    uses; [`pipe`]: the kernel-side buffer `splice(2)` moves bytes
//!    through; [`fd_limit`]: how many descriptors it may hold;
//!    [`fd_passing`]: descriptors handed to another process; [`heap`]: how
//!    the allocator grows a thread's heap.
//! 8. [`oneshot`], [`mpsc`], [`notify`], [`combinator`]: waiting for one
//!    value, for a stream of them, for an event many tasks wait on, and for
//!    two futures at once.
//! 9. [`thread_pool`]: the other model, a fixed set of blocking threads
//!    taking jobs from a queue, and the bridge between the two.
//!
//! `docs/RUNTIME.md` walks the same path with diagrams, from `block_on` to
//! `epoll_wait` and back.
//!
//! ## Hello world
//!
//! An echo server: a task accepts, and each connection gets a task of its
//! own that writes back what it reads. A real server accepts forever; this
//! one serves the one client it starts (on an ordinary thread, with
//! blocking std sockets), so that it ends.
//!
//! ```
//! use std::io::{Read, Write};
//! use runtime::{Runtime, net::TcpListener};
//!
//! fn main() -> std::io::Result<()> {
//!     let echoed = Runtime::new()?.block_on(async {
//!         let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
//!         let addr = listener.local_addr()?;
//!         let client = std::thread::spawn(move || -> std::io::Result<String> {
//!             let mut conn = std::net::TcpStream::connect(addr)?;
//!             conn.write_all(b"hello")?;
//!             conn.shutdown(std::net::Shutdown::Write)?;
//!             let mut reply = String::new();
//!             conn.read_to_string(&mut reply)?;
//!             Ok(reply)
//!         });
//!         let (conn, _peer) = listener.accept().await?;
//!         let echo = runtime::spawn(async move {
//!             let mut buf = [0u8; 4096];
//!             while let Ok(n @ 1..) = conn.read(&mut buf).await {
//!                 if conn.write_all(&buf[..n]).await.is_err() { break; }
//!             }
//!         });
//!         echo.await.expect("the echo task ends when the client does");
//!         Ok::<_, std::io::Error>(client)
//!     })?;
//!     assert_eq!(echoed.join().unwrap()?, "hello");
//!     Ok(())
//! }
//! ```
//!
//! `runtime/examples/echo.rs` is the complete version, and most public
//! items below have a short example of their own; `cargo test --doc -p
//! runtime` runs them all.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

// Ground floor.
mod slab;
mod sync;
mod sys;
#[cfg(all(test, not(loom)))]
mod test_support;
pub mod waker;

// What the thread waits on.
mod driver;
pub mod reactor;
mod timer;

// Tasks and wakes.
mod context;
pub mod coop;
mod run_queue;
pub mod task;

// What tasks use.
pub mod async_fd;
pub mod combinator;
pub mod fd_limit;
pub mod fd_passing;
pub mod heap;
pub mod mpsc;
pub mod net;
pub mod notify;
pub mod oneshot;
pub mod pipe;
pub mod signal;
pub mod thread_pool;
pub mod time;

// Top.
pub mod executor;
pub mod threads;

pub use coop::yield_now;
pub use executor::{Builder, Runtime, spawn, spawn_detached};
pub use task::{JoinError, JoinHandle};
