//! Dates in UTC, from a time since the Unix epoch, with no date library:
//! the daemon log's ISO 8601 stamps, the access log's HAProxy dates, the
//! benchmark report's date line. One calendar conversion for the workspace.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time since the Unix epoch, shown as ISO 8601 in UTC:
/// `2026-11-30T11:10:12.345Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc(pub Duration);

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
/// shared by this log, the access log and the benchmark report.
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
pub fn civil(since_epoch: Duration) -> Civil {
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

/// The months' English abbreviations, as HAProxy's dates and syslog's
/// RFC 3164 stamps write them.
pub const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Civil {
    /// The month's abbreviation (`Nov`).
    pub fn month_name(&self) -> &'static str {
        MONTHS
            .get(self.month.saturating_sub(1) as usize)
            .copied()
            .unwrap_or("???")
    }
}

/// The time since the Unix epoch of `time` (zero for a time before 1970,
/// which a clock set that far back would give).
pub fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(UNIX_EPOCH).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
