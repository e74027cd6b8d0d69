//! # backend: the fixture server the proxy is tested and measured against
//!
//! A load balancer is only as testable as what sits behind it. This crate
//! is that: a small server on our own runtime, with the behaviours the
//! tests, the demo and the benchmark need, and the `backend` program that
//! serves it on a few ports. What drives it (the load client, the bench,
//! the demo) is the `tools` crate's. Tools depend on the product, never
//! the reverse: this crate links the runtime and the proxy's flag reader,
//! and nothing of the tools.
//!
//! ```text
//!   load client ──GET n──▶ proxy ──▶ fixture :9001 ─┐
//!   (tools)     ◀─────────────────── fixture :9002 ─┼─ "port 9002: GET n"
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
//! - [`cli`]: the `backend` command line; [`main_with_args`] below runs it:
//!   one runtime on the main thread serving every port until SIGTERM.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod cli;
pub mod fixture;

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
