//! The machine the numbers came from.
//!
//! A benchmark without its machine is a rumour: the report opens with the
//! CPU model, the number of cores, the kernel and the memory, all read from
//! /proc (no `lscpu`, `uname` or `free` subprocess needed), and the date.
//!
//! The one limit the harness raises, RLIMIT_NOFILE, is raised with
//! [`runtime::fd_limit::raise_nofile_limit`], the workspace's one copy.

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

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
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_from_unix(secs)
}

/// Seconds since 1970 as `YYYY-MM-DD HH:MM UTC`, by the civil-from-days
/// algorithm (Howard Hinnant's), so no date library is needed.
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let minute_of_day = (secs % 86_400) / 60;
    // Shift the epoch to 0000-03-01, so leap days fall at the end of a year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        minute_of_day / 60,
        minute_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_unix_seconds() {
        assert_eq!(utc_from_unix(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_from_unix(1_709_210_096), "2024-02-29 12:34 UTC");
        assert_eq!(utc_from_unix(4_102_444_799), "2099-12-31 23:59 UTC");
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
