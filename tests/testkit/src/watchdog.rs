//! A watchdog for tests that block: a test body that hangs fails within a
//! bound instead of holding the whole run, and a blocking socket's reads
//! and writes get a bound of their own ([`IO_BOUND`]).
//!
//! The tools' and the fixture backend's integration tests use it; the
//! runtime's tests keep their own copy, since the runtime is below
//! everything this crate depends on.

use std::panic;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// How long a blocking test socket waits for its peer before the read
/// fails: a bound, so a peer that never answers fails the test instead of
/// hanging it. Far above any delay a test uses.
pub const IO_BOUND: Duration = Duration::from_secs(10);

/// Runs `f` on a fresh thread and returns its result; panics if it takes
/// longer than `secs` seconds (the hung thread is left behind: the test has
/// failed anyway), and re-raises `f`'s own panic unchanged.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let name = thread::current().name().unwrap_or("test").to_string();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .name(format!("{name}/body"))
        .spawn(move || {
            let out = f();
            let _ = done_tx.send(());
            out
        })
        .expect("spawn the test body thread");
    match done_rx.recv_timeout(Duration::from_secs(secs)) {
        // Disconnected: the body panicked before it could report; join to get the payload.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(out) => out,
            Err(payload) => panic::resume_unwind(payload),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("watchdog: `{name}` did not finish within {secs} s (hung?)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_finishes_returns_its_value() {
        assert_eq!(within(5, || 7), 7);
    }

    #[test]
    #[should_panic(expected = "did not finish within 1 s")]
    fn a_body_that_hangs_fails_within_the_bound() {
        within(1, || thread::sleep(Duration::from_secs(30)));
    }

    #[test]
    #[should_panic(expected = "the body's own panic")]
    fn a_body_that_panics_panics_with_its_own_message() {
        within(5, || panic!("the body's own panic"));
    }
}
