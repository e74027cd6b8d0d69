//! Fuzzes the access log both ways: the readers of its lines, and the
//! product's writer through them.
//!
//! The proxy writes access-log lines and never reads them back; their
//! readers are the test kit's (`testkit::tcplog`, `testkit::json`), which
//! the end-to-end tests hold every line to. So each input is used twice:
//! - as text, fed to those readers (a tcplog line, a JSON value, a flat JSON
//!   object, a termination code), which must never panic;
//! - as the fields of a finished connection (`Record`: any frontend name,
//!   addresses, times, counts), written by the product in both formats and
//!   read back, which must give every field back. The lines must also stay
//!   one line each, whatever the names hold: tcplog only printable ASCII in
//!   exactly nine fields (ten with a routed frontend's `{server name}`),
//!   JSON no control character, so a frontend, group or server name can
//!   never forge or split a log line.
//!
//! The time of a line is checked against a civil calendar of its own
//! (`days_from_civil` below), not the proxy's.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use proxy::ops::access_log::record::{JSON_KEYS, Record, ServerRef};
use proxy::ops::access_log::termination::{Cause, Phase, Termination};
use testkit::json::{self, Json};
use testkit::tcplog::{self, ParsedLine};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tcplog::parse_tcplog(text);
        let _ = tcplog::termination(text);
        let _ = json::parse(text);
        let _ = json::read_object(text);
    }
    if let Ok(record) = record(&mut Unstructured::new(data)) {
        round_trip_tcplog(&record);
        round_trip_json(&record);
    }
});

/// A finished connection made of fuzz bytes, within what the proxy can
/// log: times below 2^63 ms, as the readers' `i64` milliseconds need (292
/// million years: no connection lasts that long, and no clock reads that
/// late), and a frontend name of at least one character (a file's frontend
/// needs a name, the command line's is `default`), of any characters.
fn record<'a>(u: &mut Unstructured<'a>) -> Result<Record<'a>> {
    let accepted = UNIX_EPOCH.checked_add(duration(u)?).unwrap_or(UNIX_EPOCH);
    let client = address(u)?;
    let frontend: &str = u.arbitrary()?;
    let group: &str = u.arbitrary()?;
    if frontend.is_empty() || group.is_empty() {
        return Err(libfuzzer_sys::arbitrary::Error::IncorrectFormat);
    }
    // A frontend with use-group rules logs the server name, or none.
    let server_name: Option<Option<&str>> = u.arbitrary()?;
    let backend = maybe(u, |u| server(u))?;
    let wait = maybe(u, duration)?;
    let connect = maybe(u, duration)?;
    let termination = Termination::new(*u.choose(&Cause::ALL)?, *u.choose(&Phase::ALL)?);
    Ok(Record {
        accepted,
        client,
        frontend,
        group,
        server_name,
        backend,
        wait,
        connect,
        total: duration(u)?,
        bytes_down: u.arbitrary()?,
        bytes_up: u.arbitrary()?,
        termination,
        retries: u.arbitrary()?,
        redispatched: u.arbitrary()?,
        active_process: u.arbitrary()?,
        active_frontend: u.arbitrary()?,
        active_backend: u.arbitrary()?,
        active_server: u.arbitrary()?,
        frontend_addr: maybe(u, address)?,
        backend_source: maybe(u, address)?,
        id: u.arbitrary()?,
        moves: u.arbitrary()?,
    })
}

/// A server: any name of at least one character but `<NOSRV>` (what the
/// line says when there is none; a file's names have letters, digits,
/// `-`, `_` and `.` only), and an address.
fn server<'a>(u: &mut Unstructured<'a>) -> Result<ServerRef<'a>> {
    let name: &str = u.arbitrary()?;
    if name.is_empty() || name == "<NOSRV>" {
        return Err(libfuzzer_sys::arbitrary::Error::IncorrectFormat);
    }
    Ok(ServerRef {
        name,
        addr: maybe(u, address)?,
    })
}

/// A duration of less than 2^63 ms.
fn duration(u: &mut Unstructured<'_>) -> Result<Duration> {
    let secs = u.int_in_range(0..=i64::MAX as u64 / 1000 - 1)?;
    Ok(Duration::new(secs, u.int_in_range(0..=999_999_999)?))
}

/// `Some` of what `make` makes, or `None`, as the next byte says.
fn maybe<'a, T>(
    u: &mut Unstructured<'a>,
    make: fn(&mut Unstructured<'a>) -> Result<T>,
) -> Result<Option<T>> {
    if u.arbitrary()? {
        make(u).map(Some)
    } else {
        Ok(None)
    }
}

/// An IPv4 or IPv6 socket address; IPv6 ones may carry a flow label and
/// a scope id, as accepted sockets can.
fn address(u: &mut Unstructured<'_>) -> Result<SocketAddr> {
    Ok(if u.arbitrary()? {
        SocketAddr::from((u.arbitrary::<[u8; 4]>()?, u.arbitrary()?))
    } else {
        let ip = std::net::Ipv6Addr::from(u.arbitrary::<[u8; 16]>()?);
        let v6 = std::net::SocketAddrV6::new(ip, u.arbitrary()?, u.arbitrary()?, u.arbitrary()?);
        SocketAddr::V6(v6)
    })
}

fn round_trip_tcplog(r: &Record<'_>) {
    let mut line = String::new();
    r.write_tcplog(&mut line);
    assert!(line.bytes().all(|b| (b' '..=b'~').contains(&b)), "{line:?}");
    let fields: Vec<&str> = line.split(' ').collect();
    // Nine fields, and the capture in braces on a routed frontend.
    let count = 9 + usize::from(r.server_name.is_some());
    assert!(
        fields.len() == count && fields.iter().all(|f| !f.is_empty()),
        "{line:?}"
    );
    let Some(p) = tcplog::parse_tcplog(&line) else {
        panic!("unreadable: {line:?}");
    };
    // The log shows the client's address and port, not its IPv6 scope.
    assert_eq!(
        (p.client.ip(), p.client.port()),
        (r.client.ip(), r.client.port())
    );
    assert_eq!(
        tcplog_time(&p.time),
        Some(since_epoch_ms(r.accepted)),
        "{line}"
    );
    let expected = ParsedLine {
        client: p.client,
        time: p.time.clone(),
        frontend: r.frontend.to_string(),
        backend: r.group.to_string(),
        server: r.server().map(str::to_string),
        wait_ms: millis_or_none(r.wait),
        connect_ms: millis_or_none(r.connect),
        total_ms: millis_or_none(Some(r.total)),
        bytes_down: r.bytes_down,
        termination: r.termination,
        retries: r.retries,
        redispatched: r.redispatched,
        active_process: r.active_process,
        active_frontend: r.active_frontend,
        active_backend: r.active_backend,
        active_server: r.active_server,
        server_queue: 0,
        backend_queue: 0,
        capture: r
            .server_name
            .map(|name| name.unwrap_or_default().to_string()),
        moves: r.moves,
    };
    assert_eq!(p, expected, "{line}");
}

fn round_trip_json(r: &Record<'_>) {
    let mut line = String::new();
    r.write_json(&mut line);
    assert!(!line.chars().any(|c| c < ' ' || c == '\u{7f}'), "{line:?}");
    let fields = json::read_object(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, JSON_KEYS, "{line}");
    let Some(Json::String(time)) = fields.first().map(|(_, v)| v) else {
        panic!("no time: {line}");
    };
    assert_eq!(json_time(time), Some(since_epoch_ms(r.accepted)), "{line}");
    let number = |n: f64| Json::Number(n);
    let text = |s: String| Json::String(s);
    let ms = |d: Option<Duration>| number(millis_or_none(d) as f64);
    let values = [
        Json::String(time.clone()),
        text(r.client.ip().to_string()),
        number(f64::from(r.client.port())),
        text(r.frontend.to_string()),
        text(r.group.to_string()),
        r.backend.map_or(Json::Null, |s| text(s.name.to_string())),
        r.backend
            .and_then(|s| s.addr)
            .map_or(Json::Null, |a| text(a.to_string())),
        ms(r.wait),
        ms(r.connect),
        ms(Some(r.total)),
        number(r.bytes_down as f64),
        number(r.bytes_up as f64),
        text(r.termination.to_string()),
        number(f64::from(r.retries)),
        Json::Bool(r.redispatched),
        number(f64::from(r.active_process)),
        number(f64::from(r.active_frontend)),
        number(f64::from(r.active_backend)),
        number(f64::from(r.active_server)),
        number(0.0),
        number(0.0),
        r.server_name
            .flatten()
            .map_or(Json::Null, |n| text(n.to_string())),
    ];
    let got: Vec<&Json> = fields.iter().map(|(_, v)| v).collect();
    assert_eq!(got, values.iter().collect::<Vec<_>>(), "{line}");
}

/// A time in whole milliseconds as the log prints it, `-1` for none.
fn millis_or_none(d: Option<Duration>) -> i64 {
    d.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn since_epoch_ms(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i128)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `30/Nov/2026:12:00:00.123` in milliseconds since the epoch.
fn tcplog_time(text: &str) -> Option<i128> {
    let (day, rest) = text.split_once('/')?;
    let (month, rest) = rest.split_once('/')?;
    let (year, clock) = rest.split_once(':')?;
    let month = MONTHS.iter().position(|m| *m == month)? as i128 + 1;
    civil_ms(year.parse().ok()?, month, day.parse().ok()?, clock)
}

/// `2026-11-30T12:00:00.123Z` in milliseconds since the epoch. The year
/// is split off at the last two dashes, since it may be longer than four
/// digits.
fn json_time(text: &str) -> Option<i128> {
    let (date, clock) = text.strip_suffix('Z')?.split_once('T')?;
    let (rest, day) = date.rsplit_once('-')?;
    let (year, month) = rest.rsplit_once('-')?;
    civil_ms(
        year.parse().ok()?,
        month.parse().ok()?,
        day.parse().ok()?,
        clock,
    )
}

/// A date and `hh:mm:ss.mmm` in milliseconds since the epoch, with every
/// field in its range (no 31 February).
fn civil_ms(year: i128, month: i128, day: i128, clock: &str) -> Option<i128> {
    let (hms, millis) = clock.split_once('.')?;
    let mut parts = hms.split(':').map(|p| p.parse::<i128>().ok());
    let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
    let millis: i128 = millis.parse().ok()?;
    let in_range = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && (0..24).contains(&h)
        && (0..60).contains(&m)
        && (0..60).contains(&s)
        && (0..1000).contains(&millis)
        && parts.next().is_none();
    let days = days_from_civil(year, month, day);
    in_range.then_some((((days * 24 + h) * 60 + m) * 60 + s) * 1000 + millis)
}

fn days_in_month(year: i128, month: i128) -> i128 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`, the inverse of the proxy's `civil_from_days`).
fn days_from_civil(year: i128, month: i128, day: i128) -> i128 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400);
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
