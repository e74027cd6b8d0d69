//! Accept errors: which to shrug off, which to back off from, and how to
//! say so without flooding the log.
//!
//! Every accept loop in the proxy (the blocking modes' `accept()` and the
//! epoll workers' `accept().await`) meets the same errors and applies the
//! same policy, kept here once.

use std::io;
use std::time::{Duration, Instant};

use runtime::net::{is_dead_connection_error, is_fd_exhaustion};

/// What an accept loop does with an `accept` error: go on at once, or back
/// off, with a warning at most once a second. [`AcceptErrors::note`] decides
/// and logs; the caller pauses its own way (a thread sleeps, a task awaits a
/// timer).
///
/// Most accept errors belong to one connection that died while queued
/// (ECONNABORTED, and on Linux the network errors accept(2) passes on):
/// try the next one at once. Running out of descriptors (EMFILE, ENFILE)
/// is different: the connection stays queued and the listener stays
/// readable, so retrying at once would spin at 100% CPU and log a line per
/// try. Instead: log (rate-limited), sleep [`ACCEPT_BACKOFF`], retry. The
/// open connections finishing are what frees descriptors, and nothing
/// queued is lost. An error nobody expects gets the same backoff: the loop
/// must neither spin nor give up.
#[derive(Debug, Default)]
pub struct AcceptErrors {
    throttle: Throttle,
}

/// "At most one line per [`WARNING_INTERVAL`]": whether a line may be
/// logged now, and how many were held back since the last one. The accept
/// loops' warnings use it, and so does the epoll mode's line for clients
/// refused after they had gone (`epoll/worker_context.rs`).
#[derive(Debug, Default)]
pub struct Throttle {
    last_line: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    /// `Some(lines held back since the last one)` if a line may be logged
    /// at `now` (and it counts as logged); `None`, counting one more held
    /// back, if the last one was less than [`WARNING_INTERVAL`] ago.
    pub fn due(&mut self, now: Instant) -> Option<u64> {
        match self.last_line {
            Some(last) if now.duration_since(last) < WARNING_INTERVAL => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last_line = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// When the next line may be logged (`None`: now).
    pub fn next_due(&self) -> Option<Instant> {
        self.last_line.map(|last| last + WARNING_INTERVAL)
    }
}

/// How long an accept loop sleeps after an error that would otherwise spin.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// At most one accept warning (or one throttled line) per this interval.
pub const WARNING_INTERVAL: Duration = Duration::from_secs(1);

impl AcceptErrors {
    /// A fresh tracker.
    pub fn new() -> AcceptErrors {
        AcceptErrors::default()
    }

    /// Notes one accept error and logs it (rate-limited). Returns how long
    /// to pause before accepting again: `None` to go on at once.
    pub fn note(&mut self, error: &io::Error) -> Option<Duration> {
        if is_dead_connection_error(error) {
            crate::debug!("accept: {error}; next connection");
            return None;
        }
        if let Some(suppressed) = self.warning_due(Instant::now()) {
            let why = if is_fd_exhaustion(error) {
                "out of file descriptors or memory; "
            } else {
                ""
            };
            crate::warn!(
                "accept: {error}: {why}retrying every {} ms ({suppressed} similar errors not logged)",
                ACCEPT_BACKOFF.as_millis()
            );
        }
        Some(ACCEPT_BACKOFF)
    }

    /// `Some(errors not logged since the last warning)` if a warning may be
    /// logged at `now`.
    fn warning_due(&mut self, now: Instant) -> Option<u64> {
        self.throttle.due(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_queued_connection_is_skipped_at_once() {
        let mut errors = AcceptErrors::new();
        for errno in [libc::ECONNABORTED, libc::EPROTO, libc::ENETUNREACH] {
            assert_eq!(errors.note(&io::Error::from_raw_os_error(errno)), None);
        }
    }

    #[test]
    fn running_out_of_descriptors_backs_off_instead_of_spinning() {
        let mut errors = AcceptErrors::new();
        for errno in [libc::EMFILE, libc::ENFILE, libc::EBADF] {
            assert_eq!(
                errors.note(&io::Error::from_raw_os_error(errno)),
                Some(ACCEPT_BACKOFF)
            );
        }
    }

    #[test]
    fn accept_warnings_come_at_most_once_a_second() {
        let mut errors = AcceptErrors::new();
        let t0 = Instant::now();
        assert_eq!(errors.warning_due(t0), Some(0));
        for ms in [1, 50, 999] {
            assert_eq!(errors.warning_due(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(
            errors.warning_due(t0 + Duration::from_millis(1000)),
            Some(3)
        );
        assert_eq!(errors.warning_due(t0 + Duration::from_millis(1001)), None);
    }
}
