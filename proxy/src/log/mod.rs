//! Logging: one line per event on stderr, with a level and a timestamp.
//!
//! A proxy logs what an operator needs to see (a backend refusing, a
//! descriptor shortage) and nothing per byte. Levels are a global setting
//! read with one relaxed atomic load, so a disabled `debug!` costs almost
//! nothing on the connection path. The macros are exported at the crate
//! root: `proxy::info!("listening on {addr}")`.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
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

/// A time since the Unix epoch, shown as ISO 8601 in UTC:
/// `2026-11-30T11:10:12.345Z`.
struct Utc(std::time::Duration);

impl fmt::Display for Utc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Civil {
            year,
            month,
            day,
            hour: h,
            minute: m,
            second: s,
            millis: ms,
        } = civil(self.0);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z"
        )
    }
}

/// A date and time of day in UTC, to the millisecond: what [`civil`] makes
/// of a time since the Unix epoch. The crate's one calendar conversion,
/// shared by this log and the access log (`access_log.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// The year, like 2026.
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59 (UTC as Unix time counts it: no leap seconds).
    pub second: u32,
    /// 0 to 999.
    pub millis: u32,
}

/// The UTC date and time `since_epoch` after 1970-01-01T00:00:00Z.
pub fn civil(since_epoch: std::time::Duration) -> Civil {
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    Civil {
        year,
        month,
        day,
        hour: (secs / 3600 % 24) as u32,
        minute: (secs / 60 % 60) as u32,
        second: (secs % 60) as u32,
        millis: since_epoch.subsec_millis(),
    }
}

/// Days since 1970-01-01 to a (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's algorithm: count in 400-year eras that start
/// on March 1st, so the leap day is the last day of the year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    use std::time::Duration;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(Utc(Duration::ZERO).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Utc(Duration::from_millis(951_782_400_250)).to_string(),
            "2000-02-29T00:00:00.250Z"
        );
        assert_eq!(
            Utc(Duration::from_secs(1_796_036_971)).to_string(),
            "2026-11-30T11:09:31.000Z"
        );
        assert_eq!(
            Utc(Duration::from_secs(4_107_542_399)).to_string(),
            "2100-02-28T23:59:59.000Z"
        );
    }

    #[test]
    fn civil_splits_a_time_into_utc_fields() {
        let c = civil(Duration::from_millis(1_796_036_971_123));
        let expected = Civil {
            year: 2026,
            month: 11,
            day: 30,
            hour: 11,
            minute: 9,
            second: 31,
            millis: 123,
        };
        assert_eq!(c, expected);
    }

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::parse("warn"), Some(Level::Warn));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Error < Level::Debug);
    }
}
