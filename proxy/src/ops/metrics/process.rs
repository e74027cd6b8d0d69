//! The process's own figures (open descriptors and their limit, resident
//! memory, start time, CPU time), read from `/proc` at each scrape. Where a
//! file cannot be read (another system, a restricted `/proc`) the figure is
//! left out rather than made up.

use nix::unistd::{SysconfVar, sysconf};

/// What `/proc` says about this process; `None` where it could not be read
/// (another system, a restricted `/proc`): that metric is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Process {
    /// Descriptors open now.
    pub open_fds: Option<u64>,
    /// The soft RLIMIT_NOFILE.
    pub max_fds: Option<u64>,
    /// Resident memory (RSS), in bytes.
    pub resident_bytes: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time: Option<f64>,
    /// User and system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
}

impl Process {
    /// Reads every figure from `/proc` now.
    pub fn read() -> Process {
        let ticks = clock_ticks_per_second();
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.as_deref().and_then(stat_fields);
        let field = |n: usize| -> Option<f64> {
            // Field n of proc_pid_stat(5), counted from 1; after the
            // command's closing parenthesis the list starts at field 3.
            stat.as_ref()?
                .get(n - 3)?
                .parse::<u64>()
                .ok()
                .map(|v| v as f64)
        };
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| boot_time(&text));
        Process {
            open_fds: open_fds(),
            max_fds: std::fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|text| max_open_files(&text)),
            resident_bytes: std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|text| resident_bytes(&text)),
            // starttime (22) is in clock ticks since boot.
            start_time: boot_time
                .zip(field(22))
                .map(|(boot, start)| boot as f64 + start / ticks),
            // utime (14) and stime (15), in clock ticks.
            cpu_seconds: field(14).zip(field(15)).map(|(u, s)| (u + s) / ticks),
        }
    }
}

/// Open descriptors: the entries of `/proc/self/fd`, less the one used to
/// list them.
fn open_fds() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    let count = entries.filter(Result::is_ok).count();
    Some((count as u64).saturating_sub(1))
}

/// The fields of `/proc/self/stat` after the command name, which is in
/// parentheses and may itself hold spaces and parentheses: the list starts
/// after the *last* `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// `btime`, the boot time in seconds since the epoch, from `/proc/stat`.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// `VmRSS:  1234 kB` in `/proc/self/status`, in bytes.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`None` when
/// it is `unlimited`).
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The clock tick of `/proc`'s times (`sysconf(_SC_CLK_TCK)`); 100,
/// Linux's value everywhere but alpha, if it cannot be asked.
fn clock_ticks_per_second() -> f64 {
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(hz)) if hz > 0 => hz as f64,
        _ => 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let stat = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n";
        let fields = stat_fields(stat).expect("fields");
        assert_eq!(fields[0], "S", "field 3");
        assert_eq!(fields[22 - 3], "19", "field 22 (starttime)");
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t    2048 kB\n"),
            Some(2048 * 1024)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            max_open_files("Max open files  unlimited  unlimited  files\n"),
            None
        );
        assert!(clock_ticks_per_second() > 0.0);
    }

    #[test]
    fn this_process_has_figures() {
        let p = Process::read();
        let open = p.open_fds.expect("/proc/self/fd");
        assert!(open >= 3, "stdin, stdout, stderr: {open}");
        assert!(p.max_fds.expect("/proc/self/limits") >= open);
        assert!(p.resident_bytes.expect("/proc/self/status") > 100_000);
        assert!(p.start_time.expect("/proc/self/stat") > 1.6e9);
        assert!(p.cpu_seconds.expect("/proc/self/stat") >= 0.0);
    }
}
