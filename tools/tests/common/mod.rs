//! Helpers shared by the tools' integration tests: a watchdog and the
//! bound on a blocking test socket. (The fixture's own tests have theirs in
//! backend/tests/common.)
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::panic;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// How long a blocking test socket waits for the fixture before the read
/// fails: a bound, so a fixture that never answers fails the test instead
/// of hanging it. Far above any delay a test uses.
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
