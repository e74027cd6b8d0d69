//! The machine the numbers came from.
//!
//! A benchmark without its machine is a rumour: the report opens with the
//! CPU model, the number of cores, the kernel and the memory, all read from
//! /proc (no `lscpu`, `uname` or `free` subprocess needed), and the date
//! (by the proxy's calendar, `proxy::log::utc`, the workspace's one).
//!
//! The one limit the harness raises, RLIMIT_NOFILE, is raised with
//! [`runtime::fd_limit::raise_nofile_limit`], the workspace's one copy.

use std::fs;
use std::time::{Duration, SystemTime};

use proxy::log::utc::{Civil, civil, since_epoch};

/// What the report says about the machine.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs this process may run on (what the proxy's defaults use too).
    pub cores: usize,
    /// `uname -r`, from /proc/sys/kernel/osrelease.
    pub kernel: String,
    /// MemTotal from /proc/meminfo, in MiB.
    pub memory_mib: u64,
}

impl Machine {
    /// Reads the machine's description; a missing piece reads "unknown".
    pub fn describe() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, model)| model.trim().to_string())
            .unwrap_or_else(|| "unknown".to_string());
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| k.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        let memory_mib = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib / 1024);
        Machine {
            cpu_model,
            cores: runtime::threads::available_cores(),
            kernel,
            memory_mib,
        }
    }
}

/// How many ephemeral ports outgoing connections can use
/// (`net.ipv4.ip_local_port_range`), if it can be read.
pub fn ephemeral_ports() -> Option<u64> {
    let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = range.split_whitespace().map(|n| n.parse::<u64>().ok());
    let (low, high) = (bounds.next()??, bounds.next()??);
    Some(high.checked_sub(low)? + 1)
}

/// Now, as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    report_date(since_epoch(SystemTime::now()))
}

/// A time since the Unix epoch as the report's date line shows it,
/// `YYYY-MM-DD HH:MM UTC`: to the minute, which is all a run's date needs.
pub fn report_date(since_epoch: Duration) -> String {
    let Civil {
        year,
        month,
        day,
        hour,
        minute,
        ..
    } = civil(since_epoch);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The calendar is proxy::log::utc's, and tested there; this checks the
    // report's layout of it.
    #[test]
    fn the_report_date_is_to_the_minute_in_utc() {
        assert_eq!(report_date(Duration::ZERO), "1970-01-01 00:00 UTC");
        let leap_day = Duration::from_millis(1_709_210_096_999);
        assert_eq!(report_date(leap_day), "2024-02-29 12:34 UTC");
    }

    #[test]
    fn the_machine_describes_itself() {
        let machine = Machine::describe();
        assert!(machine.cores >= 1);
        assert!(!machine.kernel.is_empty());
        let (soft, hard) = runtime::fd_limit::nofile_limits().unwrap();
        assert!(soft <= hard);
        assert!(ephemeral_ports().is_some_and(|n| n > 0));
    }
}
