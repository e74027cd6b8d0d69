//! # states: milestone 5 the seed's way, by hand
//!
//! One thread, no runtime, no futures: a level-triggered `epoll_wait` loop
//! over non-blocking sockets, through nix's epoll and socket wrappers, and
//! per connection the relay machine, an explicit `enum` of states with
//! every transition written out, held in a plain struct. It keeps the
//! contract of the other modes (round robin,
//! both directions at once, a half-close passed on as a half-close and a
//! reset as a reset, the connect, idle and fin timeouts, a refused backend
//! resetting its client, EMFILE backing off, SIGTERM draining), so that the
//! state machine the compiler writes for the epoll mode's `async fn` can be
//! read beside one written by hand, and the runtime's cost measured against
//! a loop with nothing between it and the kernel (docs/STATES.md).
//!
//! | file | its one idea |
//! |---|---|
//! | [`interest`] | what each socket asks epoll for, from what the machine wants, and the `epoll_ctl` calls |
//! | [`deadlines`] | the deadline list that bounds each `epoll_wait` |
//! | [`connection`] | one connection: its sockets, its relay machine, and the calls that move it |
//! | [`event_loop`] | the loop: accept, reports, deadlines, signals, the drain |
//!
//! The contract itself, the states and every transition, is the relay
//! machine every mode drives (`conn/machine.rs`); this mode is its
//! level-triggered driver, the one with nothing between it and the kernel.
//!
//! Imports run one way: `event_loop` ▶ `connection` ▶ `interest`, and
//! `event_loop` ▶ `deadlines`.
//!
//! May import: the floors below the modes ([`crate::log`], [`crate::conn`]:
//! the relay machine, its alarm, the timeouts, the buffer pool, accept errors;
//! [`crate::policy`]: the round-robin balancer; [`crate::ops`]: the signals
//! and the drain's words; [`crate::settings`]), and from
//! [`crate::blocking::relay`] two helpers of its own level, `reset` and
//! `poll_timeout`. Never [`crate::epoll`], and nothing of the runtime's
//! executor, reactor or futures: only its two std-level socket helpers
//! (`bind_std`, `accept_std`, which the blocking modes use too).

pub mod connection;
pub mod deadlines;
pub mod event_loop;
pub mod interest;

pub use event_loop::run;
