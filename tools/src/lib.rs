//! # tools: what drives the proxy, measures it and shows it
//!
//! The load balancer is the product (`proxy`, on `runtime`); the fixture
//! backend it is tested against is `backend`. This crate is everything
//! around them: the programs a person runs to see the proxy work, and the
//! helpers the end-to-end tests share. Tools depend on the product, never
//! the reverse: this crate links the proxy, the runtime and the backend;
//! nothing links it but tests.
//!
//! ```text
//!   load client ──GET n──▶ proxy ──▶ fixture :9001 ─┐
//!   (load/)     ◀─────────────────── fixture :9002 ─┼─ "port 9002: GET n"
//!                                    fixture :9003 ─┘   (backend::fixture)
//! ```
//!
//! ## The rooms
//!
//! Each folder's `mod.rs` says what it holds and what it may import
//! (tests/layout.rs checks it). From the ground up:
//!
//! - [`process`]: a program as a child process ([`process::child`]), the
//!   workspace's one way to run one, and a process tree's cost from /proc
//!   ([`process::procstat`]).
//! - [`load`]: the load client behind the `loadgen` binary ([`load::cli`]):
//!   a closed loop (a new connection per request, or keep-alive), bulk
//!   streams with a checksum, and idle connections held open; its
//!   [`LoadReport`](load::LoadReport) has counts, req/s, exact percentiles,
//!   replies per backend and the client's own CPU, as text or one JSON line.
//! - [`bench`](mod@bench): the benchmark harness (the `bench` binary): our
//!   proxy's modes, HAProxy and nginx, measured side by side; its report
//!   (docs/BENCHMARKS.md and the charts) in a room of its own,
//!   [`bench::report`].
//! - [`demo`]: the `demo` binary, the README's first command: fixture
//!   backends, the proxy in every mode, the load client, one table.
//! - [`cluster`]: the client side of a cluster of proxies behind one
//!   address (scripts/cluster.sh) and its `cluster_client` binary
//!   ([`cluster::cli`]).
//! - [`race`]: the `race_load` binary, the load half of
//!   scripts/race-repro.sh: a sanitizer build of the proxy under load, and
//!   its count of data-race reports.
//!
//! Each `src/bin/` file is a shim that calls its room's `main`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod bench;
pub mod cluster;
pub mod demo;
pub mod load;
pub mod process;
pub mod race;
