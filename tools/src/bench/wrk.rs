//! `wrk`, the HTTP load generator operators measure proxies with: one run
//! against one URL, and its report read into numbers.
//!
//! ```text
//!   Running 3s test @ http://127.0.0.1:40123/file
//!     1 threads and 64 connections
//!     ...
//!     Latency Distribution
//!        50%    2.86ms
//!        99%   19.93ms
//!     37162 requests in 2.03s, 11.98MB read
//!     Socket errors: connect 0, read 0, write 0, timeout 0     (only if any)
//!     Non-2xx or 3xx responses: 5                               (only if any)
//!   Requests/sec:  18340.17
//! ```
//!
//! Its times carry their unit (`850.00us`, `2.86ms`, `1.20s`, `2.00m`);
//! its durations on the command line must be whole (`-d3s`, not `-d0.5s`).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::process::child::{Capture, Spawn, TAIL_LINES, one_line};

/// What one wrk run reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WrkReport {
    /// Requests completed.
    pub requests: u64,
    /// How long the run took, as wrk measured it.
    pub elapsed: Duration,
    /// wrk's own rate: completed requests over the run.
    pub req_per_sec: f64,
    /// The latency distribution (`--latency`): percent -> latency.
    pub latency: BTreeMap<u32, Duration>,
    /// Connect, read, write errors and timeouts, summed.
    pub socket_errors: u64,
    /// Replies with a status other than 2xx or 3xx.
    pub bad_status: u64,
}

impl WrkReport {
    /// Requests that failed: a socket error or a bad status.
    pub fn errors(&self) -> u64 {
        self.socket_errors + self.bad_status
    }

    /// Reads wrk's report (its stdout).
    pub fn parse(text: &str) -> Result<WrkReport, String> {
        let mut report = WrkReport::default();
        let mut rate = None;
        for line in text.lines().map(str::trim) {
            if let Some(value) = line.strip_prefix("Requests/sec:") {
                rate = value.trim().parse().ok();
            } else if let Some(errors) = line.strip_prefix("Socket errors:") {
                report.socket_errors = errors
                    .split(',')
                    .filter_map(|e| e.split_whitespace().last()?.parse::<u64>().ok())
                    .sum();
            } else if let Some(count) = line.strip_prefix("Non-2xx or 3xx responses:") {
                report.bad_status = count.trim().parse().unwrap_or(0);
            } else if let Some((count, elapsed)) = requests_line(line) {
                (report.requests, report.elapsed) = (count, elapsed);
            } else if let Some((percent, latency)) = percentile_line(line) {
                report.latency.insert(percent, latency);
            }
        }
        report.req_per_sec =
            rate.ok_or_else(|| format!("no Requests/sec in wrk's report: {}", one_line(text)))?;
        Ok(report)
    }
}

/// `37162 requests in 2.03s, 11.98MB read`.
fn requests_line(line: &str) -> Option<(u64, Duration)> {
    let (count, rest) = line.split_once(" requests in ")?;
    let elapsed = rest.split(',').next()?;
    Some((count.trim().parse().ok()?, duration(elapsed.trim())?))
}

/// `99%   19.93ms`.
fn percentile_line(line: &str) -> Option<(u32, Duration)> {
    let (percent, latency) = line.split_once('%')?;
    Some((percent.trim().parse().ok()?, duration(latency.trim())?))
}

/// A time as wrk prints it: a number and its unit.
fn duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// How `wrk` is run: one thread, like our load client, against `url` on
/// `target` with `connections` kept open for `duration` (rounded up to whole
/// seconds, which is all wrk takes); each request may take `timeout`.
#[derive(Debug, Clone, Copy)]
pub struct WrkRun<'a> {
    /// The program.
    pub program: &'a Path,
    /// Where it connects.
    pub target: SocketAddr,
    /// The path it asks for.
    pub path: &'a str,
    /// Connections kept open.
    pub connections: usize,
    /// How long it runs.
    pub duration: Duration,
    /// The longest one request may take.
    pub timeout: Duration,
}

/// `duration` as wrk takes it: whole seconds, rounded up, at least one.
pub fn whole_seconds(duration: Duration) -> u64 {
    (duration.as_secs() + u64::from(duration.subsec_nanos() > 0)).max(1)
}

impl WrkRun<'_> {
    /// Runs wrk to its end and reads its report.
    pub fn run(&self) -> io::Result<WrkReport> {
        let seconds = |d: Duration| format!("{}s", whole_seconds(d));
        let url = format!("http://{}{}", self.target, self.path);
        let finished = Spawn::new("wrk", self.program)
            .args(["-t1", "--latency"])
            .args([format!("-c{}", self.connections)])
            .args([format!("-d{}", seconds(self.duration))])
            .args(["--timeout".to_string(), seconds(self.timeout)])
            .args([url])
            .stdout(Capture::All)
            .stderr(Capture::Tail(TAIL_LINES))
            .run(self.duration + self.timeout + Duration::from_secs(10))?;
        let said = || {
            one_line(
                &[finished.stdout.clone(), finished.stderr.clone()]
                    .concat()
                    .join("\n"),
            )
        };
        if !finished.status.success() {
            return Err(io::Error::other(format!(
                "wrk failed ({}): {}",
                finished.status,
                said()
            )));
        }
        WrkReport::parse(&finished.stdout.join("\n")).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `wrk -t1 -c64 -d2s --latency` against nginx 1.22 serving a 100-byte
    /// file on loopback, wrk 4.1.0.
    const NGINX_DIRECT: &str = "\
Running 2s test @ http://127.0.0.1:18090/file
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.75ms    3.63ms  30.85ms   89.94%
    Req/Sec    18.55k     2.98k   24.77k    75.00%
  Latency Distribution
     50%    2.86ms
     75%    5.13ms
     90%    7.40ms
     99%   19.93ms
  37162 requests in 2.03s, 11.98MB read
Requests/sec:  18340.17
Transfer/sec:      5.91MB
";

    #[test]
    fn a_real_report_reads() {
        let report = WrkReport::parse(NGINX_DIRECT).unwrap();
        assert_eq!(report.requests, 37162);
        assert_eq!(report.elapsed, Duration::from_millis(2030));
        assert_eq!(report.req_per_sec, 18340.17);
        assert_eq!(report.latency.len(), 4);
        assert_eq!(report.latency[&50], Duration::from_micros(2860));
        assert_eq!(report.latency[&99], Duration::from_micros(19930));
        assert_eq!(report.errors(), 0);
    }

    #[test]
    fn errors_and_bad_statuses_are_counted() {
        let text = NGINX_DIRECT.replace(
            "Requests/sec:",
            "  Socket errors: connect 2, read 3, write 0, timeout 1\n  \
             Non-2xx or 3xx responses: 7\nRequests/sec:",
        );
        let report = WrkReport::parse(&text).unwrap();
        assert_eq!(report.socket_errors, 6);
        assert_eq!(report.bad_status, 7);
        assert_eq!(report.errors(), 13);
        let e = WrkReport::parse("unable to connect to 127.0.0.1:1 Connection refused");
        assert!(e.unwrap_err().contains("Connection refused"));
    }

    #[test]
    fn durations_on_its_command_line_are_whole_seconds() {
        assert_eq!(whole_seconds(Duration::from_millis(500)), 1);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
        assert_eq!(whole_seconds(Duration::from_millis(3001)), 4);
    }

    #[test]
    fn times_carry_their_unit() {
        assert_eq!(duration("850.00us"), Some(Duration::from_micros(850)));
        assert_eq!(duration("1.20s"), Some(Duration::from_millis(1200)));
        assert_eq!(duration("2.00m"), Some(Duration::from_secs(120)));
        assert_eq!(duration("12"), None);
        assert_eq!(duration("3.1parsecs"), None);
    }
}
