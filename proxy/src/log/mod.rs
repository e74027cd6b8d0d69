//! Logging: one line per event on stderr, with a timestamp, a level, the
//! process's id and the thread's name:
//!
//! ```text
//! 2026-11-30T12:49:47.527Z info  (4242) [main] frontend web listening on 127.0.0.1:8080 (...)
//! ```
//!
//! The PID tells two processes apart when both write to one place: during
//! an upgrade (the old one drains while the new one serves) or under a
//! supervisor that collects several. With a `log` line in the
//! configuration, each line also goes to [`syslog`] (without the time,
//! level and PID, which its header carries), as HAProxy's global `log`
//! receives its own messages.
//!
//! The ground floor of the proxy: every layer may import it, and it imports
//! nothing of the crate. Beside the daemon's log it holds the ways the
//! proxy writes values into lines, which the access log and the tools share:
//! [`utc`] (dates, without a date library), [`json`] (JSON strings) and
//! [`grouped`] (numbers by thousands), [`spelling`] (the "did you mean" of
//! a message that refuses a name), and [`syslog`], which the access log
//! sends its lines to as well.
//!
//! A proxy logs what an operator needs to see (a backend refusing, a
//! descriptor shortage) and nothing per byte. Levels are a global setting
//! read with one relaxed atomic load, so a disabled `debug!` costs almost
//! nothing on the connection path. The macros are exported at the crate
//! root: `proxy::info!("listening on {addr}")`.

pub mod grouped;
pub mod json;
pub mod spelling;
pub mod syslog;
pub mod utc;

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use syslog::Syslog;
use syslog::header::Severity;
use utc::Utc;

/// How much to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed that an operator must act on.
    Error = 1,
    /// Something failed for one connection, or a resource runs short.
    Warn = 2,
    /// Start, stop, configuration.
    Info = 3,
    /// Detail: routine refusals by an access rule (the access log has one
    /// line per connection).
    Debug = 4,
}

impl Level {
    /// Parses `error`, `warn`, `info` or `debug`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "error" => Some(Level::Error),
            "warn" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// Its syslog severity. `info` lines (starts, stops, reloads, backends
    /// up and down) are `notice`, as HAProxy sends such events, one step
    /// above the access log's `info`: `log ... notice` keeps them and
    /// leaves the connections out.
    pub fn severity(self) -> Severity {
        match self {
            Level::Error => Severity::ERR,
            Level::Warn => Severity::WARNING,
            Level::Info => Severity::NOTICE,
            Level::Debug => Severity::DEBUG,
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the most detailed level that is printed.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Would a message at `level` be printed?
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// This process's id, read once: the process never forks without an exec,
/// so it cannot change under a running proxy.
pub fn pid() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// The syslog destination the daemon's lines also go to, once set.
static SYSLOG: OnceLock<Arc<Syslog>> = OnceLock::new();

/// Sends every later line to `syslog` too (a `log` line in the
/// configuration, read at startup); `false` if one was set already.
pub fn also_to_syslog(syslog: Arc<Syslog>) -> bool {
    SYSLOG.set(syslog).is_ok()
}

/// Prints one line. Use the macros instead.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    let now = utc::since_epoch(SystemTime::now());
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("-");
    // The whole line in one write(2): stderr is unbuffered, so writeln! on
    // it would make a system call per piece, and the pieces of two
    // processes sharing it (an upgrade's old and new) would interleave. One
    // write of a line under PIPE_BUF (4 KiB) to a pipe or O_APPEND file is
    // never split; the lock keeps this process's threads in line too. A
    // closed stderr must not become a panic, so the result is ignored.
    let line = format!(
        "{} {:5} ({}) [{name}] {args}\n",
        Utc(now),
        level.label(),
        pid()
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(syslog) = SYSLOG.get() {
        syslog.send_line(level.severity(), &format!("[{name}] {args}"));
    }
}

/// Logs at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { if $crate::log::enabled($crate::log::Level::Error) { $crate::log::write($crate::log::Level::Error, format_args!($($arg)*)) } };
}
/// Logs at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { if $crate::log::enabled($crate::log::Level::Warn) { $crate::log::write($crate::log::Level::Warn, format_args!($($arg)*)) } };
}
/// Logs at info level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { if $crate::log::enabled($crate::log::Level::Info) { $crate::log::write($crate::log::Level::Info, format_args!($($arg)*)) } };
}
/// Logs at debug level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { if $crate::log::enabled($crate::log::Level::Debug) { $crate::log::write($crate::log::Level::Debug, format_args!($($arg)*)) } };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::parse("warn"), Some(Level::Warn));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Error < Level::Debug);
    }
}
