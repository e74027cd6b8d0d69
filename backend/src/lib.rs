//! # backend: the tools around the proxy, and the fixture server first
//!
//! A load balancer is only as testable as what sits behind it and what
//! drives it. This crate is both ends, on our own runtime, and the
//! programs built from them. Tools depend on the product, never the
//! reverse: this crate links the proxy, the proxy links nothing of it.
//!
//! ```text
//!   load client ──GET n──▶ proxy ──▶ fixture :9001 ─┐
//!   (load/)     ◀─────────────────── fixture :9002 ─┼─ "port 9002: GET n"
//!                                    fixture :9003 ─┘   (fixture.rs)
//! ```
//!
//! ## The tour
//!
//! - [`fixture`]: the backend. Six behaviours ([`FixtureMode`](fixture::FixtureMode)):
//!   `reply` (a line tagged with its own port, after a delay that never
//!   blocks the thread), `echo` (half-close aware), `cpu` (a delay that
//!   does block it), `banner` (the server speaks first), `reset` and
//!   `whoami` (which backend, reached from which proxy, then echo). The
//!   accept loop [`fixture::serve`], and [`Fixture`](fixture::Fixture),
//!   a whole fixture on a thread of its own for tests and the demo.
//! - [`load`]: the load client behind the `loadgen` binary: a closed loop
//!   (a new connection per request, or keep-alive), bulk streams with a
//!   checksum, and idle connections held open; its
//!   [`LoadReport`](load::LoadReport) has counts, req/s, exact percentiles,
//!   replies per backend and the client's own CPU, as text or one JSON line.
//! - [`bench`](mod@bench): the benchmark harness of issue 4 (the `bench` binary):
//!   our proxy's modes, HAProxy and nginx, measured side by side into
//!   docs/BENCHMARKS.md.
//! - [`child`]: a program as a child process, the workspace's one way to
//!   run one (the demo's proxies, the benchmark's subjects, every
//!   end-to-end test's processes); [`procstat`]: a process tree from /proc,
//!   and the machine's CPU.
//! - [`cluster`]: the client side of a cluster of proxies behind one
//!   address (scripts/cluster.sh): probes, held connections and a load
//!   through the VIP, each saying which node and backend served it, or how
//!   it failed; the `cluster_client` binary runs them for the cluster's demo.
//! - [`demo`]: the `demo` binary, the README's first command: fixture
//!   backends, the proxy in every mode, the load client, one table.
//! - [`cli`]: the `backend` command line; [`main_with_args`] below runs it:
//!   one runtime on the main thread serving every port until SIGTERM.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod bench;
pub mod child;
pub mod cli;
pub mod cluster;
pub mod demo;
pub mod fixture;
pub mod load;
pub mod procstat;

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use runtime::combinator::{Either, select};
use runtime::net::TcpListener;
use runtime::signal::{Signal, Signals};
use runtime::{Runtime, mpsc, spawn};

use cli::{Command, Settings};
use fixture::FixtureOptions;

/// The whole `backend` program: parses `args` (without the program name),
/// serves, and returns the exit status: 0 (stopped by a signal, or help),
/// 1 (could not serve), 2 (bad command line).
pub fn main_with_args(args: &[String]) -> i32 {
    let settings = match cli::parse(args) {
        Ok(Command::Run(settings)) => settings,
        Ok(Command::Help) => {
            print!("{}", cli::help());
            return 0;
        }
        Ok(Command::Version) => {
            println!("backend {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("backend: {e}");
            return 2;
        }
    };
    let served = Runtime::new().and_then(|runtime| runtime.block_on(serve_until_signal(&settings)));
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("backend: {e}");
            1
        }
    }
}

/// Serves every port of `settings` until SIGTERM or SIGINT (`Ok`), or until
/// a listener fails beyond repair (`Err`).
async fn serve_until_signal(settings: &Settings) -> io::Result<()> {
    // First of all: the signals must be blocked before any other thread
    // exists, or that thread would take SIGTERM the default way (see
    // runtime::signal). None is started here; this keeps it true if one is.
    let signals = Signals::new(&[Signal::Interrupt, Signal::Terminate])?;
    let options = Rc::new(settings.fixture_options());
    // Each accept loop reports here if it gives up.
    let (failed_tx, mut failed_rx) = mpsc::channel();
    for &port in &settings.ports {
        let listener = listen(SocketAddr::new(settings.host, port), &options)?;
        let failed = failed_tx.clone();
        let options = options.clone();
        spawn(async move {
            if let Err(e) = fixture::serve(listener, options).await {
                let _ = failed.send(e);
            }
        });
    }
    // The signal first: select is biased, so stopping is never starved.
    match select(signals.recv(), failed_rx.recv()).await {
        Either::Left(Ok(signal)) => {
            eprintln!("backend: {}, stopping", signal.name());
            Ok(())
        }
        Either::Left(Err(e)) => Err(e),
        Either::Right(Some(e)) => Err(e),
        Either::Right(None) => Err(io::Error::other("every listener stopped")),
    }
}

/// Binds one port and announces it, with the real port, in the line tests
/// and scripts parse: `backend: listening on 127.0.0.1:9001 (reply, delay 50ms)`.
fn listen(addr: SocketAddr, options: &FixtureOptions) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr()?;
    eprintln!(
        "backend: listening on {local} ({}, delay {}ms)",
        options.mode,
        options.delay.as_millis()
    );
    Ok(listener)
}
