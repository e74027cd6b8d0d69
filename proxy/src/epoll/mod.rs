//! Milestone 5 and after: the async load balancer on our own runtime.
//!
//! One event loop per worker thread, the HAProxy model (one loop per thread)
//! rather than tokio's work-stealing. Each frontend (its `listen` addresses
//! and its pool of backends) has one listening socket per worker on each of
//! its addresses (SO_REUSEPORT), and the kernel spreads new connections
//! across them.
//!
//! ```text
//!   main thread:  bind every frontend's listeners ─▶ health-check thread ─▶ N workers, wait
//!   worker i:     Runtime ── one accept loop per address ─spawn─▶ one task per connection
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
//! | health (up / down)           | one [`HealthBoard`](crate::policy::health::HealthBoard) per frontend | one atomic load         |
//! | where each backend is        | one [`AddressBook`](crate::policy::address::AddressBook) per frontend | four atomic loads (a seqlock) |
//! | maxconn counts               | one [`Limit`](crate::policy::limit::Limit) each (global, frontend, backend) | a compare-and-swap |
//! | the operator's states and weights (drain, maint, `set weight`) | one [`AdminBoard`](crate::policy::admin_state::AdminBoard) per frontend, in its health board | none: a change moves the board's generation |
//!
//! Each worker's balancer sees only its own connections, as nginx's workers
//! do without a shared `zone`: with two workers, leastconn means least
//! connections *of this worker*. Limits, though, must hold for the whole
//! process (an operator's `maxconn 100` is a promise to the backend), so
//! they are counted in atomics shared by all workers. Health verdicts come
//! from one checker thread ([`checker`], writing the board of
//! [`crate::policy::health`]); a worker copies them into its balancer when
//! the board's generation number changes.
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
//!
//! ## The files
//!
//! - [`plan`]: what runs (the configuration, the flags around it);
//! - [`control`]: the control thread: workers started, frontends handed out,
//!   signals read, reloads applied, the graceful stop;
//! - [`worker`]: one event loop: the accept loops and the commands;
//! - [`worker_context`]: what a worker's connections share (the global
//!   limit, the access-log buffer, the orders);
//! - [`orders`]: kill and park, given to every connection of a worker at
//!   once, heard on one registration;
//! - [`frontend`]: one frontend as every worker shares it (`SharedFrontend`),
//!   as one worker sees it (`WorkerFrontend`), and its listeners;
//! - [`connection`]: one connection's life, from accept to its access-log line;
//! - [`trace`]: what its access-log line needs, gathered as it goes;
//! - [`choose_group`]: which group a connection's TLS server name sends it to
//!   (a frontend with `use-group` rules only);
//! - [`connect`]: how a connection reaches a backend: pick, queue, connect, retry;
//! - [`backend_socket`]: the backend's socket until the relay takes it,
//!   reset if the connection ends before;
//! - [`handover`]: an upgrade's side here: what the old process lends,
//!   how the new one finds its frontends' sockets and seeds its health;
//! - [`carry`]: what a reload carries from a frontend it replaces to the
//!   new one: its totals and its servers' health;
//! - [`moving`]: an established connection moved by an upgrade: parked and
//!   handed over by the old process, adopted and relayed on by the new;
//! - [`operator`]: who may act on the servers at runtime, and what their
//!   admin states and weights survive (reload, upgrade, restart);
//! - [`checker`]: the health-check thread;
//! - [`resolver`]: the resolver thread: backends written with a host name
//!   looked up again every `resolve-interval`;
//! - [`probe`]: one health check on the wire (connect, PROXY header, the
//!   dialogue of its `option`, the timeout, the close);
//! - [`dump`]: SIGQUIT's state of every frontend and backend, to the log.
//!
//! May import: every floor below the modes ([`crate::log`],
//! [`crate::policy`], [`crate::conn`], [`crate::ops`], [`crate::settings`]);
//! never [`crate::blocking`] or [`crate::states`]: the models share no code
//! above the ground floors, so each reads on its own.

pub mod backend_socket;
pub mod carry;
pub mod checker;
pub mod choose_group;
pub mod connect;
pub mod connection;
pub mod control;
pub mod dump;
pub mod frontend;
pub mod handover;
pub mod moving;
pub mod operator;
pub mod orders;
pub mod plan;
pub mod probe;
pub mod resolver;
pub mod trace;
pub mod worker;
pub mod worker_context;
