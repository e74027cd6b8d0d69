//! Logging: one line per event on stderr, with a level and a timestamp.
//! The ground floor of the proxy: every layer may import it, and it imports
//! nothing of the crate. Beside the daemon's log it holds the two ways the
//! proxy writes values into lines, which the access log and the tools share:
//! [`utc`] (dates, without a date library), [`json`] (JSON strings) and
//! [`grouped`] (numbers by thousands).
//!
//! A proxy logs what an operator needs to see (a backend refusing, a
//! descriptor shortage) and nothing per byte. Levels are a global setting
//! read with one relaxed atomic load, so a disabled `debug!` costs almost
//! nothing on the connection path. The macros are exported at the crate
//! root: `proxy::info!("listening on {addr}")`.

pub mod grouped;
pub mod json;
pub mod utc;

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::SystemTime;

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

/// Prints one line. Use the macros instead.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    let now = utc::since_epoch(SystemTime::now());
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("-");
    // One write_fmt on a locked handle: lines from two threads never interleave.
    // A closed stderr must not become a panic, so the result is ignored.
    let _ = writeln!(
        std::io::stderr().lock(),
        "{} {:5} [{name}] {args}",
        Utc(now),
        level.label()
    );
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
