//! # backend: the fixture server and the load client
//!
//! A load balancer is only as testable as what sits behind it and what
//! drives it. This crate is both ends, on our own runtime:
//!
//! ```text
//!   load client ──GET n──▶ proxy ──▶ fixture :9001 ─┐
//!   (load.rs)   ◀─────────────────── fixture :9002 ─┼─ "port 9002: GET n"
//!                                    fixture :9003 ─┘   (fixture.rs)
//! ```
//!
//! ## The tour
//!
//! - [`fixture`]: the backend. Five behaviours ([`FixtureMode`](fixture::FixtureMode)):
//!   `reply` (a line tagged with its own port, after a delay that never
//!   blocks the thread), `echo` (half-close aware), `cpu` (a delay that
//!   does block it), `banner` (the server speaks first) and `reset`. The
//!   accept loop [`fixture::serve`], and [`Fixture`](fixture::Fixture),
//!   a whole fixture on a thread of its own for tests and the demo.
//! - [`load`]: the closed-loop load client, a new connection per request,
//!   and its [`LoadReport`](load::LoadReport): counts, req/s, exact
//!   percentiles, replies per backend.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod fixture;
pub mod load;
