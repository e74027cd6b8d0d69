//! What a benchmark run found: plain data, filled by the workloads, read by
//! the report and by the test that checks the harness's numbers add up.
//!
//! Every measurement ends in an [`Outcome`]: done (with the proxy's cost),
//! failed (with the reason: a peer that would not start, a load client that
//! could not run), or skipped (with the reason: a row that would take
//! minutes to say what its bound already says). A failure is a row in the
//! report, never a crash of the harness.

use std::time::Duration;

use crate::load::{BulkReport, LoadReport};
use crate::process::procstat::MachineCpu;

use crate::bench::machine::Machine;
use crate::bench::peers::Installed;
use crate::bench::sizes::Sizes;
use crate::bench::strace::Summary;
use crate::bench::subject::Subject;
use crate::bench::wrk::WrkReport;

/// What the proxy process tree cost during one measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// CPU time (user + system) of the whole tree during the measurement.
    pub cpu: Duration,
    /// Peak resident memory (VmHWM) of the tree, in KiB, since it started.
    pub peak_kib: u64,
}

/// One measurement that ran.
#[derive(Debug, Clone)]
pub struct Measured<T> {
    /// What the load client reported.
    pub value: T,
    /// The proxy's cost (None for `direct`: no proxy).
    pub cost: Option<Cost>,
    /// CPU time of the load client's thread during the measurement: if it
    /// is close to the wall time, the client was the bottleneck.
    pub client_cpu: Duration,
    /// Wall time of the measurement (client's view).
    pub wall: Duration,
    /// TCP segments the whole machine sent during it (segments.rs), if the
    /// kernel's counter could be read.
    pub segments: Option<u64>,
    /// What the whole machine's CPUs spent during it (procstat.rs), if
    /// /proc/stat could be read: the subject's, the client's, the backends'
    /// and anyone else's on the machine together.
    pub machine: Option<MachineCpu>,
    /// Something worth knowing that did not spoil the numbers (the proxy
    /// did not exit cleanly, say).
    pub note: Option<String>,
}

impl<T> Measured<T> {
    /// The client's CPU use as a share of the wall time (1.0 = one core busy).
    pub fn client_load(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall > 0.0 {
            self.client_cpu.as_secs_f64() / wall
        } else {
            0.0
        }
    }

    /// How many of the machine's CPUs were busy on average during the
    /// measurement (2.0 = two cores busy the whole time).
    pub fn machine_busy_cores(&self) -> Option<f64> {
        self.machine.and_then(|m| cores(m.busy, self.wall))
    }

    /// The same for stolen time: CPUs this VM wanted and did not get.
    pub fn machine_steal_cores(&self) -> Option<f64> {
        self.machine.and_then(|m| cores(m.steal, self.wall))
    }
}

impl Measured<LoadReport> {
    /// The proxy's CPU per request in µs: its CPU time over the requests
    /// (a connection each, in a connection-rate run). None for direct.
    pub fn cpu_per_request_us(&self) -> Option<f64> {
        let cost = self.cost?;
        let requests = self.value.requests;
        (requests > 0).then(|| cost.cpu.as_secs_f64() * 1e6 / requests as f64)
    }
}

/// CPU time spent over `wall`, in cores; None for a run of no length.
fn cores(cpu: Duration, wall: Duration) -> Option<f64> {
    let wall = wall.as_secs_f64();
    (wall > 0.0).then(|| cpu.as_secs_f64() / wall)
}

/// How one measurement ended.
#[derive(Debug, Clone)]
pub enum Outcome<T> {
    /// It ran.
    Done(Measured<T>),
    /// It could not run; why.
    Failed(String),
    /// It was not run on purpose; why.
    Skipped(String),
}

impl<T> Outcome<T> {
    /// The measurement, if it ran.
    pub fn done(&self) -> Option<&Measured<T>> {
        match self {
            Outcome::Done(measured) => Some(measured),
            _ => None,
        }
    }
}

/// One row of a request/response table.
#[derive(Debug, Clone)]
pub struct LoadRow {
    /// Through what.
    pub subject: Subject,
    /// Concurrent clients.
    pub clients: usize,
    /// What happened: with several runs, the median one.
    pub outcome: Outcome<LoadReport>,
    /// Every run's rate in round order, when the row was measured more
    /// than once (None where a run did not finish); empty for one run.
    pub runs: Vec<Option<f64>>,
}

impl LoadRow {
    /// The report, if the row ran.
    pub fn report(&self) -> Option<&LoadReport> {
        self.outcome.done().map(|m| &m.value)
    }
}

/// Idle connections held open through a subject, and what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IdleMemory {
    /// Connections opened (each did one echo round trip, then idled).
    pub connections: usize,
    /// Resident memory of the proxy tree before opening any, in KiB.
    pub before_kib: u64,
    /// With all of them open.
    pub open_kib: u64,
    /// After closing them all (memory a proxy keeps for reuse shows here).
    pub after_close_kib: u64,
}

impl IdleMemory {
    /// KiB per connection while open: (open - before) / connections.
    pub fn per_connection_kib(&self) -> f64 {
        per(
            self.open_kib.saturating_sub(self.before_kib),
            self.connections,
        )
    }

    /// KiB per connection still resident after they closed.
    pub fn kept_kib(&self) -> f64 {
        per(
            self.after_close_kib.saturating_sub(self.before_kib),
            self.connections,
        )
    }
}

fn per(kib: u64, connections: usize) -> f64 {
    if connections == 0 {
        0.0
    } else {
        kib as f64 / connections as f64
    }
}

/// Workload A: the seed's I/O-bound backend.
#[derive(Debug, Clone, Default)]
pub struct WorkloadA {
    /// The backends' delay.
    pub delay: Duration,
    /// At the seed's scale: a fixed number of requests.
    pub seed: Vec<LoadRow>,
    /// At each concurrency, for a fixed time: (clients, rows).
    pub by_clients: Vec<(usize, Vec<LoadRow>)>,
}

/// Workload B: a CPU-bound backend.
#[derive(Debug, Clone, Default)]
pub struct WorkloadB {
    /// CPU time each request burns in its backend.
    pub cpu_per_request: Duration,
    /// Backends (each on its own thread).
    pub backends: usize,
    /// The rows.
    pub rows: Vec<LoadRow>,
}

/// Workload C, one subject: what the proxy itself costs.
#[derive(Debug, Clone)]
pub struct CostRow {
    /// Through what.
    pub subject: Subject,
    /// New connection per request, no delay: the connection rate.
    pub connect: Outcome<LoadReport>,
    /// Many requests per connection, through an echo backend.
    pub keep_alive: Outcome<LoadReport>,
    /// One bulk stream.
    pub bulk_one: Outcome<BulkReport>,
    /// Several bulk streams at once.
    pub bulk_many: Outcome<BulkReport>,
    /// Idle connections held open.
    pub idle: Outcome<IdleMemory>,
    /// The connection rate of every run of `connect`, in round order
    /// (None: that run did not finish); `connect` is the median's run.
    pub connect_runs: Vec<Option<f64>>,
    /// The same for `keep_alive`.
    pub keep_alive_runs: Vec<Option<f64>>,
    /// The MiB/s of every run of `bulk_one`, in round order.
    pub bulk_one_runs: Vec<Option<f64>>,
    /// The same for `bulk_many`.
    pub bulk_many_runs: Vec<Option<f64>>,
    /// The proxy's CPU µs per connection in every run of `connect`, in
    /// round order (None: no such figure, or the run did not finish).
    pub connect_cpu_runs: Vec<Option<f64>>,
    /// The proxy's CPU µs per request in every run of `keep_alive`.
    pub keep_alive_cpu_runs: Vec<Option<f64>>,
}

/// Workload C: the cost of the proxy itself.
#[derive(Debug, Clone, Default)]
pub struct WorkloadC {
    /// One row per subject.
    pub rows: Vec<CostRow>,
}

/// Workload C's keep-alive row as HTTP through wrk (http.rs), one subject.
#[derive(Debug, Clone)]
pub struct HttpRow {
    /// Through what.
    pub subject: Subject,
    /// What wrk reported in the run with the median rate.
    pub outcome: Outcome<WrkReport>,
    /// The rate of every run, in round order (None: that run did not finish).
    pub runs: Vec<Option<f64>>,
}

/// Keep-alive HTTP through wrk to nginx static backends.
#[derive(Debug, Clone)]
pub struct HttpKeepAlive {
    /// The versions of wrk and nginx, or why this part did not run.
    pub tools: Result<String, String>,
    /// The size of the file each request fetches.
    pub file_bytes: usize,
    /// wrk's connections, kept open for the whole run.
    pub connections: usize,
    /// One row per subject.
    pub rows: Vec<HttpRow>,
}

impl HttpKeepAlive {
    /// The row of `subject`'s report, if it ran.
    pub fn report(&self, subject: Subject) -> Option<&Measured<WrkReport>> {
        self.rows
            .iter()
            .find(|r| r.subject == subject)
            .and_then(|r| r.outcome.done())
    }
}

/// One counted run of the census (census.rs): strace's table and the load
/// that made the calls.
#[derive(Debug, Clone)]
pub struct Counted {
    /// strace's table for the counted run.
    pub summary: Summary,
    /// The counted run, as the load client saw it.
    pub load: LoadReport,
    /// strace's table as it wrote it, under the report's directory.
    pub raw: String,
}

impl Counted {
    /// `calls` per request of the counted run.
    pub fn per_request(&self, calls: u64) -> f64 {
        if self.load.requests == 0 {
            0.0
        } else {
            calls as f64 / self.load.requests as f64
        }
    }
}

/// The census, one subject at one thread.
#[derive(Debug, Clone)]
pub struct CensusRow {
    /// Which proxy.
    pub subject: Subject,
    /// A new connection per request, `reply` backends.
    pub connect: Outcome<Counted>,
    /// Keep-alive requests, `echo` backends.
    pub keep_alive: Outcome<Counted>,
}

/// The system-call census.
#[derive(Debug, Clone)]
pub struct Census {
    /// strace's version, or why there is no census.
    pub strace: Result<String, String>,
    /// One row per subject.
    pub rows: Vec<CensusRow>,
}

/// One level's measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Idle connections held through the load.
    pub held: usize,
    /// Keep-alive requests served meanwhile.
    pub requests: u64,
    /// The proxy's CPU over the load.
    pub cpu: Duration,
    /// Its resident memory at the end of the load, held connections open.
    pub rss_kib: u64,
}

impl Level {
    /// The proxy's CPU per request, in microseconds.
    pub fn cpu_per_request_us(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.cpu.as_secs_f64() * 1e6 / self.requests as f64)
    }
}

/// One subject's levels, or why it has none.
#[derive(Debug, Clone)]
pub struct HeldRow {
    /// Whose.
    pub subject: Subject,
    /// Its levels, in order, or what went wrong.
    pub levels: Result<Vec<Level>, String>,
}

impl HeldRow {
    /// KiB of resident memory per held connection at `level`, above level 0's.
    pub fn kib_per_held(&self, level: &Level) -> Option<f64> {
        let base = self.levels.as_ref().ok()?.first()?;
        (level.held > 0 && base.held == 0)
            .then(|| (level.rss_kib as f64 - base.rss_kib as f64) / level.held as f64)
    }
}

/// The held-connections workload (bench/held.rs): a proxy's CPU per
/// keep-alive request and memory per idle connection held beside.
#[derive(Debug, Clone)]
pub struct Held {
    /// The levels asked for.
    pub levels: Vec<usize>,
    /// Concurrent keep-alive clients of the load.
    pub clients: usize,
    /// Keep-alive requests per connection of the load.
    pub per_connection: usize,
    /// How long each level's load ran.
    pub run_for: Duration,
    /// One row per subject.
    pub rows: Vec<HeldRow>,
}

/// Everything one run found.
#[derive(Debug, Clone)]
pub struct Results {
    /// Where.
    pub machine: Machine,
    /// When it started (`YYYY-MM-DD HH:MM UTC`).
    pub date: String,
    /// The command that produced it.
    pub command: String,
    /// The sizes used.
    pub sizes: Sizes,
    /// The peers found (or why not).
    pub installed: Installed,
    /// The descriptor limit the run had.
    pub nofile: u64,
    /// Workload A (None: not selected).
    pub a: Option<WorkloadA>,
    /// Workload B.
    pub b: Option<WorkloadB>,
    /// Workload C.
    pub c: Option<WorkloadC>,
    /// Workload C's keep-alive as HTTP through wrk.
    pub http: Option<HttpKeepAlive>,
    /// The system-call census.
    pub census: Option<Census>,
    /// Idle connections held beside a keep-alive load.
    pub held: Option<Held>,
    /// How long the whole run took.
    pub elapsed: Duration,
    /// What the report should say about the run itself (a size reduced to
    /// fit a limit, say).
    pub notes: Vec<String>,
}

impl Results {
    /// Every request/response row of every workload (for consistency checks).
    pub fn load_rows(&self) -> Vec<&LoadRow> {
        let mut rows = Vec::new();
        if let Some(a) = &self.a {
            rows.extend(a.seed.iter());
            for (_, by) in &a.by_clients {
                rows.extend(by.iter());
            }
        }
        if let Some(b) = &self.b {
            rows.extend(b.rows.iter());
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_memory_per_connection() {
        let idle = IdleMemory {
            connections: 1000,
            before_kib: 4000,
            open_kib: 7500,
            after_close_kib: 5000,
        };
        assert_eq!(idle.per_connection_kib(), 3.5);
        assert_eq!(idle.kept_kib(), 1.0);
        assert_eq!(IdleMemory::default().per_connection_kib(), 0.0);
    }

    #[test]
    fn client_load_is_cpu_over_wall() {
        let measured = Measured {
            value: (),
            cost: None,
            client_cpu: Duration::from_millis(500),
            wall: Duration::from_secs(2),
            segments: None,
            machine: None,
            note: None,
        };
        assert_eq!(measured.client_load(), 0.25);
        assert_eq!(measured.machine_busy_cores(), None);
    }

    #[test]
    fn machine_cores_are_cpu_over_wall_with_steal_apart() {
        let measured = Measured {
            value: (),
            cost: None,
            client_cpu: Duration::ZERO,
            wall: Duration::from_secs(2),
            segments: None,
            machine: Some(MachineCpu {
                busy: Duration::from_millis(3500),
                steal: Duration::from_millis(100),
                cpus: 2,
            }),
            note: None,
        };
        assert_eq!(measured.machine_busy_cores(), Some(1.75));
        assert_eq!(measured.machine_steal_cores(), Some(0.05));
        let instant = Measured {
            wall: Duration::ZERO,
            ..measured
        };
        assert_eq!(instant.machine_busy_cores(), None);
    }
}
