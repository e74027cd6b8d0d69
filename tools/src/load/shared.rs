//! What the three load patterns (closed.rs, bulk.rs, idle.rs) share: the
//! limits and units of their reports, CPU accounting, JSON, and the small
//! helpers each run uses (an input check, a bounded wait, a split of bytes
//! over streams).
//!
//! Why a file of its own: load/mod.rs re-exports the patterns, so a pattern
//! that took these from load/mod.rs would import the file that imports it.
//! Here, importing nothing of the crate, it is taken by every pattern, and
//! load/mod.rs re-exports what of it is public. Strings in the JSON reports
//! are escaped by the proxy's escaper (`proxy::log::json`), the
//! workspace's one, so a report and an access-log line agree on JSON.

use std::fmt;
use std::future::Future;
use std::io;
use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use proxy::log::json::push_string;
use runtime::time;

/// The longest reply read; a peer that sends more is misbehaving and the
/// request counts as an error.
pub const MAX_REPLY: usize = 64 * 1024;

/// The tag under which keep-alive replies are counted in
/// [`LoadReport::per_backend`](super::LoadReport::per_backend): an echo cannot say which backend sent it.
pub const ECHO_TAG: &str = "echo";

/// Bytes in a mebibyte, the unit of bulk throughput.
pub const MIB: u64 = 1024 * 1024;

/// `count` per second of `elapsed`; 0 for an instant run.
pub(super) fn per_second(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count / secs } else { 0.0 }
}

/// How much of one core `cpu` is over `elapsed`: 1.0 is one core busy the
/// whole time (a one-thread client that is its own bottleneck).
pub fn cpu_share(cpu: Duration, elapsed: Duration) -> f64 {
    per_second(cpu.as_secs_f64(), elapsed)
}

/// The client CPU part of a summary: seconds, and the share of one core.
pub(super) fn write_client_cpu(
    f: &mut fmt::Formatter<'_>,
    cpu: Duration,
    elapsed: Duration,
) -> fmt::Result {
    write!(
        f,
        "; client CPU {:.2} s ({:.0}% of one core)",
        cpu.as_secs_f64(),
        cpu_share(cpu, elapsed) * 100.0
    )
}

// ---- the closed loop --------------------------------------------------------

/// User plus system CPU time this process (all its threads) has used so far.
pub fn process_cpu_time() -> io::Result<Duration> {
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    Ok(timeval_duration(usage.user_time()) + timeval_duration(usage.system_time()))
}

/// A `timeval` as a `Duration` (a negative field, which the kernel never
/// reports for CPU time, counts as zero).
fn timeval_duration(tv: TimeVal) -> Duration {
    let secs = u64::try_from(tv.tv_sec()).unwrap_or(0);
    let micros = u64::try_from(tv.tv_usec()).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

// ---- JSON -------------------------------------------------------------------

/// One JSON object, written key by key on one line. Hand-written because
/// the crate takes no dependencies, and a report is a handful of numbers.
pub(super) struct JsonObject {
    text: String,
}

impl JsonObject {
    pub(super) fn new() -> JsonObject {
        JsonObject {
            text: String::from("{"),
        }
    }

    /// Writes `"key":` (after a comma unless it is the first key).
    pub(super) fn key(mut self, key: &str) -> JsonObject {
        if self.text.len() > 1 {
            self.text.push(',');
        }
        push_string(&mut self.text, key);
        self.text.push(':');
        self
    }

    pub(super) fn raw(mut self, key: &str, value: &str) -> JsonObject {
        self = self.key(key);
        self.text.push_str(value);
        self
    }

    pub(super) fn uint(self, key: &str, value: u64) -> JsonObject {
        self.raw(key, &value.to_string())
    }

    /// A number with `decimals` digits after the point. JSON has no NaN or
    /// infinity, so those (which no report should hold) become `null`.
    pub(super) fn float(self, key: &str, value: f64, decimals: usize) -> JsonObject {
        if value.is_finite() {
            self.raw(key, &format!("{value:.decimals$}"))
        } else {
            self.raw(key, "null")
        }
    }

    /// A duration in milliseconds (to the microsecond), or `null`.
    pub(super) fn millis(self, key: &str, value: Option<Duration>) -> JsonObject {
        match value {
            Some(d) => self.float(key, d.as_secs_f64() * 1000.0, 3),
            None => self.raw(key, "null"),
        }
    }

    pub(super) fn boolean(self, key: &str, value: bool) -> JsonObject {
        self.raw(key, if value { "true" } else { "false" })
    }

    /// A string, escaped, or `null`.
    pub(super) fn string(self, key: &str, value: Option<&str>) -> JsonObject {
        match value {
            Some(s) => {
                let mut quoted = String::with_capacity(s.len() + 2);
                push_string(&mut quoted, s);
                self.raw(key, &quoted)
            }
            None => self.raw(key, "null"),
        }
    }

    pub(super) fn object(self, key: &str, value: JsonObject) -> JsonObject {
        self.raw(key, &value.finish())
    }

    pub(super) fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

// ---- bulk streams -----------------------------------------------------------

pub(super) fn invalid_input(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

/// Runs `future`, turning "it took longer than `limit`" into a `TimedOut`
/// error that says `{what} within {limit}`.
pub(super) async fn bounded<T>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match time::timeout(limit, future).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} within {limit:?}"),
        )),
    }
}

/// Stream `index`'s part of `total` bytes: an even split, the first
/// `total % streams` streams taking one byte more, so the parts add up to
/// exactly `total`.
pub(super) fn stream_share(total: u64, streams: usize, index: usize) -> u64 {
    let (streams, index) = (streams as u64, index as u64);
    total / streams + u64::from(index < total % streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The escaping itself is proxy::log::json's, and tested there; this
    // checks that keys and strings go through it.
    #[test]
    fn keys_and_strings_are_escaped() {
        let text = JsonObject::new()
            .string("a\"b", Some("c\nd\u{7f}"))
            .string("none", None)
            .finish();
        assert_eq!(text, r#"{"a\"b":"c\nd\u007f","none":null}"#);
    }
}
