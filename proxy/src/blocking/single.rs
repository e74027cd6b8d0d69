//! Mode `single`, milestone 1: one thread, one connection at a time.
//!
//! ```text
//!   loop {
//!       accept()                       blocks until a client is queued
//!       connect(first backend)         bounded by --connect-timeout
//!       relay(client, backend)         both directions, until both are done
//!   }
//! ```
//!
//! While one connection is relayed, the next clients wait in the kernel's
//! listen queue (`--backlog`): their connect succeeds (the kernel completes
//! the handshake), but nothing reads their bytes until the current
//! connection ends. That is the point of this mode: the plumbing (a
//! listener, a connect, a relay that handles partial reads and writes,
//! half-close and resets) with no concurrency at all, to compare the other
//! modes against. Only the first `--backend` is used; round robin starts
//! with the pool. A backend written with a host name is looked up once,
//! at start (`settings/resolve.rs`); only the epoll mode looks again.
//!
//! The relay is the same [`relay`] the pool's workers use, on
//! `poll(2)`, not the seed's alternating loop (see [`relay`] for why
//! that one can hang).

#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;

use runtime::net::accept_std;

use crate::blocking::relay;
use crate::conn::accept::AcceptErrors;
use crate::settings::cli::Settings;
use crate::settings::resolve;

/// Runs the single mode until the process is stopped (by a signal: see
/// [`shutdown`](crate::ops::shutdown)). Returns only if it cannot start.
pub fn run(settings: &Settings) -> io::Result<()> {
    let backend = first_backend(settings)?;
    let listener = relay::listen(settings)?;
    let addr = listener.local_addr()?;
    crate::info!("listening on {} (single)", addr);
    crate::info!("relaying one connection at a time to {backend}");
    let mut accept_errors = AcceptErrors::new();
    loop {
        match accept_std(&listener) {
            Ok((client, peer)) => relay::serve(client, peer, backend, settings),
            Err(e) => {
                if let Some(pause) = accept_errors.note(&e) {
                    std::thread::sleep(pause);
                }
            }
        }
    }
}

fn first_backend(settings: &Settings) -> io::Result<SocketAddr> {
    let Some(first) = settings.backends.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the single mode needs a backend",
        ));
    };
    let found = resolve::once(std::slice::from_ref(first))?;
    found
        .first()
        .copied()
        .ok_or_else(|| io::Error::other("no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_backend_it_refuses_to_start() {
        let settings = Settings::default(); // no backends
        let e = run(&settings).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
