//! A process tree read from /proc: which processes it holds, and what it
//! costs (CPU time and memory); and the whole machine's CPU time beside it.
//! The child helper kills a whole tree with it ([`crate::process::child`]); the
//! benchmark sums a subject's cost over one, and reads how busy the machine
//! was around it.
//!
//! A proxy may be one process with threads (ours, HAProxy) or a master with
//! worker processes (nginx), so every figure is summed over the *tree*: the
//! process and all its descendants, found through the parent pid in each
//! `/proc/PID/stat`.
//!
//! - CPU: `utime + stime` (fields 14 and 15 of `/proc/PID/stat`), in clock
//!   ticks (`sysconf(_SC_CLK_TCK)`, usually 100 a second). They include the
//!   process's threads, even those that have exited. Take a [`CpuTicks`]
//!   before and after a run; the difference is what the run cost.
//! - Memory: `VmRSS` (resident now) and `VmHWM` (the "high water mark", the
//!   peak resident size since the process started) from `/proc/PID/status`,
//!   in KiB. Summing VmHWM over several processes gives an upper bound of the
//!   tree's peak (their peaks need not be simultaneous); for one process it
//!   is exact.
//! - The machine: the first line of `/proc/stat` (`cpu  user nice system
//!   idle iowait irq softirq steal guest guest_nice`, clock ticks summed
//!   over every CPU). Busy is `user + nice + system + irq + softirq`; guest
//!   time is already inside `user` and `nice`, and `iowait` is idle time.
//!   `steal` is kept apart: it is time this VM wanted a CPU and the host
//!   ran someone else, so it is not work done here, but a reader of a
//!   shared machine needs to see it. Take a [`MachineTicks`] before and
//!   after a run; [`MachineTicks::since`] is what the machine spent.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::time::Duration;

use nix::unistd::{SysconfVar, sysconf};

/// The stat fields after the command name that we read (counted from
/// field 3, the state, as index 0).
const PPID: usize = 1;
const UTIME: usize = 11;
const STIME: usize = 12;

/// The fields of `/proc/PID/stat` after the command name.
///
/// The name (field 2) is in parentheses and may itself contain spaces and
/// parentheses, so the fields are split after the *last* `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    Some(after_name.split_whitespace().collect())
}

fn read_stat(pid: u32) -> io::Result<String> {
    fs::read_to_string(format!("/proc/{pid}/stat"))
}

/// The parent of every process now running (pid -> parent pid).
fn parents() -> io::Result<BTreeMap<u32, u32>> {
    let mut map = BTreeMap::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // A process that exited since the listing has no stat any more.
        if let Ok(stat) = read_stat(pid) {
            if let Some(ppid) = stat_fields(&stat).and_then(|f| f.get(PPID)?.parse().ok()) {
                map.insert(pid, ppid);
            }
        }
    }
    Ok(map)
}

/// `root` and every live descendant of it, root first.
pub fn tree(root: u32) -> io::Result<Vec<u32>> {
    let parents = parents()?;
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, &ppid) in &parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut seen = BTreeSet::new();
    let mut order = vec![root];
    seen.insert(root);
    // Breadth first; `seen` keeps a (theoretically impossible) cycle from
    // looping, and the walk ends when every process was visited at most once.
    let mut next = 0;
    while next < order.len() {
        let pid = order[next];
        next += 1;
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(child) {
                order.push(child);
            }
        }
    }
    Ok(order)
}

/// The kernel's clock ticks per second (the unit of utime and stime).
pub fn ticks_per_second() -> u64 {
    let ticks = sysconf(SysconfVar::CLK_TCK).ok().flatten();
    // Unknown cannot happen on Linux; 100 is what it always is there.
    ticks
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// CPU time of a process tree at one moment, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks(pub u64);

impl CpuTicks {
    /// `utime + stime` summed over `root`'s tree, now.
    pub fn of_tree(root: u32) -> io::Result<CpuTicks> {
        let mut total = 0;
        for pid in tree(root)? {
            // A worker that exited between the walk and this read is gone
            // with its ticks; skipping it is all we can do.
            if let Ok(stat) = read_stat(pid) {
                total += cpu_of_stat(&stat).unwrap_or(0);
            }
        }
        Ok(CpuTicks(total))
    }

    /// The CPU time spent between `earlier` and `self`.
    pub fn since(self, earlier: CpuTicks) -> Duration {
        let ticks = self.0.saturating_sub(earlier.0);
        Duration::from_secs_f64(ticks as f64 / ticks_per_second() as f64)
    }
}

/// utime + stime from the text of a `/proc/PID/stat`.
fn cpu_of_stat(stat: &str) -> Option<u64> {
    let fields = stat_fields(stat)?;
    let utime: u64 = fields.get(UTIME)?.parse().ok()?;
    let stime: u64 = fields.get(STIME)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory of a process tree, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    /// VmRSS summed: resident now.
    pub rss_kib: u64,
    /// VmHWM summed: each process's peak since it started.
    pub peak_kib: u64,
}

impl Memory {
    /// The memory of `root`'s tree, now.
    pub fn of_tree(root: u32) -> io::Result<Memory> {
        let mut total = Memory::default();
        for pid in tree(root)? {
            if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
                total.rss_kib += status_kib(&status, "VmRSS:").unwrap_or(0);
                total.peak_kib += status_kib(&status, "VmHWM:").unwrap_or(0);
            }
        }
        Ok(total)
    }
}

/// A `Key:   1234 kB` line of `/proc/PID/status`, in KiB.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// Open descriptors of `root`'s tree, now (the entries of /proc/PID/fd).
pub fn descriptors(root: u32) -> io::Result<usize> {
    let mut total = 0;
    for pid in tree(root)? {
        // Another user's process (nginx's workers, when run as root, are
        // `nobody`) is still readable by root; a vanished one counts 0.
        if let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) {
            total += entries.count();
        }
    }
    Ok(total)
}

/// The whole machine's CPU time at one moment, from `/proc/stat`'s first
/// line, in clock ticks summed over every CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MachineTicks {
    /// `user + nice + system + irq + softirq`.
    pub busy: u64,
    /// `steal` (0 where the kernel does not count it).
    pub steal: u64,
    /// How many CPUs the kernel counts (the `cpuN` lines).
    pub cpus: usize,
}

/// The fields of the `cpu` line, counted after the word `cpu`, that make
/// up busy time, and where steal is.
const BUSY_FIELDS: [usize; 5] = [0, 1, 2, 5, 6];
const STEAL_FIELD: usize = 7;

impl MachineTicks {
    /// The machine's CPU time now.
    pub fn now() -> io::Result<MachineTicks> {
        let stat = fs::read_to_string("/proc/stat")?;
        parse_machine(&stat).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "/proc/stat: its first line is not `cpu` and at least 7 counters",
            )
        })
    }

    /// What the machine spent between `earlier` and `self`.
    pub fn since(self, earlier: MachineTicks) -> MachineCpu {
        let time = |ticks: u64| Duration::from_secs_f64(ticks as f64 / ticks_per_second() as f64);
        MachineCpu {
            busy: time(self.busy.saturating_sub(earlier.busy)),
            steal: time(self.steal.saturating_sub(earlier.steal)),
            cpus: self.cpus,
        }
    }
}

/// The machine's CPU time over some interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MachineCpu {
    /// Busy CPU time, every CPU's summed (see [`MachineTicks::busy`]).
    pub busy: Duration,
    /// Stolen CPU time, summed the same way.
    pub steal: Duration,
    /// CPUs the kernel counts.
    pub cpus: usize,
}

/// The machine's counters from the text of `/proc/stat`: its first line
/// must be the `cpu` total, with at least user through softirq (steal came
/// later, in Linux 2.6.11, and reads 0 where it is missing).
fn parse_machine(stat: &str) -> Option<MachineTicks> {
    let mut fields = stat.lines().next()?.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let counters: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let busy = BUSY_FIELDS
        .iter()
        .map(|&i| counters.get(i).copied())
        .sum::<Option<u64>>()?;
    let cpus = stat
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    Some(MachineTicks {
        busy,
        steal: counters.get(STEAL_FIELD).copied().unwrap_or(0),
        cpus,
    })
}

/// CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID): what the load
/// client, which runs on the calling thread, spent.
pub use backend::fixture::thread_cpu_time as thread_cpu;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let stat = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[PPID], "17");
        assert_eq!(cpu_of_stat(stat), Some(281));
        assert_eq!(cpu_of_stat("garbage"), None);
    }

    #[test]
    fn status_lines_give_kib() {
        let status = "Name:\tproxy\nVmHWM:\t   10240 kB\nVmRSS:\t    8192 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(10240));
        assert_eq!(status_kib(status, "VmRSS:"), Some(8192));
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn the_machine_line_gives_busy_and_steal_apart() {
        let stat = "cpu  4705 356 584 3699176 23060 10 93 40 7 0\n\
                    cpu0 2400 200 300 1849000 11000 5 50 20 7 0\n\
                    cpu1 2305 156 284 1850176 12060 5 43 20 0 0\n\
                    intr 1462898 0 9\nctxt 2319231\ncpufreq 3\n";
        let ticks = parse_machine(stat).unwrap();
        // user + nice + system + irq + softirq; idle, iowait and guest not.
        assert_eq!(ticks.busy, 4705 + 356 + 584 + 10 + 93);
        assert_eq!(ticks.steal, 40);
        assert_eq!(ticks.cpus, 2, "cpufreq is not a CPU");
        let old = parse_machine("cpu 10 0 5 900 1 2 3\ncpu0 10 0 5 900 1 2 3\n").unwrap();
        assert_eq!((old.busy, old.steal, old.cpus), (20, 0, 1));
        for bad in ["", "intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"] {
            assert_eq!(parse_machine(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn machine_ticks_subtract_into_cpu_time() {
        let hz = ticks_per_second();
        let before = MachineTicks {
            busy: 100,
            steal: 5,
            cpus: 2,
        };
        let after = MachineTicks {
            busy: 100 + 3 * hz,
            steal: 5 + hz,
            cpus: 2,
        };
        let spent = after.since(before);
        assert_eq!(spent.busy, Duration::from_secs(3));
        assert_eq!(spent.steal, Duration::from_secs(1));
        assert_eq!(spent.cpus, 2);
        assert_eq!(before.since(after).busy, Duration::ZERO);
        let now = MachineTicks::now().unwrap();
        assert!(now.cpus >= 1);
    }

    #[test]
    fn this_process_has_a_tree_cpu_and_memory() {
        let me = std::process::id();
        let tree = tree(me).unwrap();
        assert_eq!(tree[0], me);
        let before = CpuTicks::of_tree(me).unwrap();
        std::hint::black_box(backend::fixture::burn_cpu(Duration::from_millis(30)));
        let after = CpuTicks::of_tree(me).unwrap();
        assert!(after.0 >= before.0);
        assert!(
            descriptors(me).unwrap() >= 3,
            "at least stdin, stdout, stderr"
        );
        let memory = Memory::of_tree(me).unwrap();
        assert!(memory.rss_kib > 0 && memory.peak_kib >= memory.rss_kib);
        assert!(thread_cpu() > Duration::ZERO);
        assert!(ticks_per_second() > 0);
    }
}
