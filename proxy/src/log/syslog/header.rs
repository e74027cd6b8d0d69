//! The header in front of every syslog message: its priority (facility and
//! severity), its time, the host, the tag and the PID, in one of the three
//! layouts HAProxy's `log ... format` names.
//!
//! ```text
//!   local    <134>Nov 30 12:00:00 proxy[4242]: MSG                        RFC 3164 without the host (HAProxy's default)
//!   rfc3164  <134>Nov 30 12:00:00 lb1 proxy[4242]: MSG                    RFC 3164 (BSD syslog)
//!   rfc5424  <134>1 2026-11-30T12:00:00.123Z lb1 proxy 4242 - - MSG      RFC 5424: version 1, no MSGID, no structured data
//! ```
//!
//! The priority is `facility × 8 + severity` (`local0` is 16, `info` 6:
//! 134). Times are UTC, as everywhere in this proxy: RFC 5424's with a `Z`,
//! RFC 3164's without a zone (it has no way to say one; HAProxy writes its
//! local time there, and a receiver reads it as its own local time, so run
//! the receiver in UTC, or use rfc5424, to compare stamps). A day of the
//! month below 10 is padded with a space (`Nov  3`), as RFC 3164 says.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::log::utc::{Utc, civil, since_epoch};

/// A syslog facility: the part of the system a message comes from, by its
/// number (0 to 23). Its names are HAProxy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facility(u8);

/// The 24 facilities, by number: HAProxy's names (`auth2` is what Linux
/// calls `authpriv`).
pub const FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
    "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

impl Facility {
    /// The facility named `word` (`local0`, `daemon`...).
    pub fn parse(word: &str) -> Option<Facility> {
        let n = FACILITIES.iter().position(|name| *name == word)?;
        u8::try_from(n).ok().map(Facility)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        FACILITIES.get(usize::from(self.0)).copied().unwrap_or("?")
    }
}

/// A syslog severity, 0 (`emerg`, the most severe) to 7 (`debug`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Severity(u8);

/// The eight severities, by number: RFC 5424's, HAProxy's names.
pub const SEVERITIES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

impl Severity {
    /// Errors an operator must act on: the daemon's `error` lines.
    pub const ERR: Severity = Severity(3);
    /// The daemon's `warn` lines.
    pub const WARNING: Severity = Severity(4);
    /// The daemon's `info` lines: starts, stops, reloads, backends up and
    /// down (HAProxy logs those at `notice`).
    pub const NOTICE: Severity = Severity(5);
    /// Access-log lines, one per connection (as HAProxy logs connections).
    pub const INFO: Severity = Severity(6);
    /// The daemon's `debug` lines.
    pub const DEBUG: Severity = Severity(7);

    /// The severity named `word` (`info`, `notice`...).
    pub fn parse(word: &str) -> Option<Severity> {
        let n = SEVERITIES.iter().position(|name| *name == word)?;
        u8::try_from(n).ok().map(Severity)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        SEVERITIES.get(usize::from(self.0)).copied().unwrap_or("?")
    }
}

/// The layout of the header: HAProxy's `log ... format` choices that put
/// one in front of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// RFC 3164 without the host name: for a syslog daemon on this host
    /// (`/dev/log`), which adds its own. HAProxy's default.
    Local,
    /// RFC 3164, the BSD syslog format, with the host name.
    Rfc3164,
    /// RFC 5424, with the host name, and the PID as PROCID.
    Rfc5424,
}

impl Layout {
    /// Every layout, the default first.
    pub const ALL: [Layout; 3] = [Layout::Local, Layout::Rfc3164, Layout::Rfc5424];

    /// The layout named `word` (`local`, `rfc3164`, `rfc5424`).
    pub fn parse(word: &str) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.name() == word)
    }

    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Local => "local",
            Layout::Rfc3164 => "rfc3164",
            Layout::Rfc5424 => "rfc5424",
        }
    }
}

/// What every header of one destination says: its layout, facility, host,
/// tag and PID. Only the severity and the time change from one message to
/// the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its layout.
    pub layout: Layout,
    /// The facility of every message.
    pub facility: Facility,
    /// The host name (`rfc3164`, `rfc5424`; `local` leaves it out).
    pub hostname: String,
    /// The tag (RFC 3164) or APP-NAME (RFC 5424): the program's name.
    pub tag: String,
    /// The process's id: in brackets after the tag, or RFC 5424's PROCID.
    pub pid: u32,
}

impl Header {
    /// Appends the header of a message of `severity` made at `now`, up to
    /// the message itself (which follows it directly).
    pub fn write(&self, severity: Severity, now: SystemTime, out: &mut String) {
        let priority = u32::from(self.facility.0) * 8 + u32::from(severity.0);
        let (tag, pid, host) = (&self.tag, self.pid, &self.hostname);
        // Writing to a String cannot fail.
        let _ = match self.layout {
            Layout::Local => write!(out, "<{priority}>{} {tag}[{pid}]: ", Bsd(now)),
            Layout::Rfc3164 => write!(out, "<{priority}>{} {host} {tag}[{pid}]: ", Bsd(now)),
            Layout::Rfc5424 => write!(
                out,
                "<{priority}>1 {} {host} {tag} {pid} - - ",
                Utc(since_epoch(now))
            ),
        };
    }
}

/// RFC 3164's time stamp: `Nov 30 12:00:00`, `Nov  3 09:05:00`.
struct Bsd(SystemTime);

impl std::fmt::Display for Bsd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = civil(since_epoch(self.0));
        write!(
            f,
            "{} {:>2} {:02}:{:02}:{:02}",
            c.month_name(),
            c.day,
            c.hour,
            c.minute,
            c.second
        )
    }
}

/// Whether `tag` can be a syslog tag: 1 to 32 letters, digits, `-`, `_` or
/// `.`. RFC 3164 allows 32 alphanumeric characters; RFC 5424's APP-NAME is
/// printable ASCII up to 48; these keep a tag valid in both, and
/// unmistakable for the `[` of the PID or the `:` that ends it.
pub fn valid_tag(tag: &str) -> bool {
    (1..=32).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// 2026-11-30T12:00:00.123Z.
    fn noon() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_796_040_000_123)
    }

    fn header(layout: Layout) -> Header {
        Header {
            layout,
            facility: Facility::parse("local0").expect("local0"),
            hostname: "lb1".into(),
            tag: "proxy".into(),
            pid: 4242,
        }
    }

    fn written(layout: Layout, severity: Severity, at: SystemTime) -> String {
        let mut out = String::new();
        header(layout).write(severity, at, &mut out);
        out
    }

    #[test]
    fn each_layout_writes_its_rfcs_header() {
        assert_eq!(
            written(Layout::Local, Severity::INFO, noon()),
            "<134>Nov 30 12:00:00 proxy[4242]: "
        );
        assert_eq!(
            written(Layout::Rfc3164, Severity::INFO, noon()),
            "<134>Nov 30 12:00:00 lb1 proxy[4242]: "
        );
        assert_eq!(
            written(Layout::Rfc5424, Severity::INFO, noon()),
            "<134>1 2026-11-30T12:00:00.123Z lb1 proxy 4242 - - "
        );
    }

    #[test]
    fn the_priority_is_facility_times_eight_plus_severity() {
        let mut h = header(Layout::Local);
        for (facility, severity, priority) in [
            ("kern", "emerg", 0),
            ("user", "notice", 13),
            ("daemon", "err", 27),
            ("local7", "debug", 191),
        ] {
            h.facility = Facility::parse(facility).expect("a facility");
            let mut out = String::new();
            let severity = Severity::parse(severity).expect("a severity");
            h.write(severity, noon(), &mut out);
            assert!(out.starts_with(&format!("<{priority}>")), "{out}");
        }
    }

    #[test]
    fn an_early_day_is_padded_with_a_space() {
        // 2025-01-03T01:03:04Z.
        let at = UNIX_EPOCH + Duration::from_secs(1_735_866_184);
        assert_eq!(
            written(Layout::Local, Severity::NOTICE, at),
            "<133>Jan  3 01:03:04 proxy[4242]: "
        );
    }

    #[test]
    fn names_parse_both_ways() {
        for name in FACILITIES {
            assert_eq!(Facility::parse(name).map(Facility::name), Some(name));
        }
        for name in SEVERITIES {
            assert_eq!(Severity::parse(name).map(Severity::name), Some(name));
        }
        assert_eq!(Facility::parse("local8"), None);
        assert_eq!(Severity::parse("warn"), None);
        assert!(Severity::ERR < Severity::INFO, "lower is more severe");
        assert_eq!(Layout::parse("rfc5424"), Some(Layout::Rfc5424));
        assert_eq!(Layout::parse("short"), None);
    }

    #[test]
    fn tags_are_short_plain_words() {
        assert!(valid_tag("proxy"));
        assert!(valid_tag("e2e-proxy_1.2"));
        assert!(!valid_tag(""));
        assert!(!valid_tag("a b"));
        assert!(!valid_tag("proxy[1]"));
        assert!(!valid_tag("proxy:"));
        assert!(!valid_tag(&"x".repeat(33)));
    }
}
