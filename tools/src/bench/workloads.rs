//! The three workloads: which rows each measures, and how.
//!
//! - **A, the seed's**: backends that wait 50 ms per request (I/O bound), a
//!   new connection per request. First at the seed's scale (200 requests a
//!   run), so our table can stand beside the seed's; then at 64, 256 and
//!   1,000 concurrent clients for a fixed time, where a pool of N threads
//!   saturates at N / 50 ms and an event loop approaches C / 50 ms.
//! - **B, CPU bound**: each request burns 10 ms of CPU in its backend, three
//!   backends each on a thread of its own. No proxy can beat the cores: the
//!   pool's throughput rises with threads until the CPUs are busy, then
//!   stays flat. The seed predicted this plateau and never measured it.
//! - **C, the proxy itself**: no delay at all, so what is left is the
//!   proxy's own cost: connections per second, keep-alive requests per
//!   second, bulk MiB/s, memory per idle connection, CPU per connection.
//!
//! How big each run is, [`Sizes`], lives in sizes.rs. Every subject runs
//! as a fresh process per measurement ([`measure`]); the fixture backends
//! run in this process, on threads of their own. C's rates and bulk rows
//! are measured [`Sizes::repetitions`] times, interleaved, and each row
//! keeps its median run (repeat.rs); idle memory is measured once.

use std::io;
use std::net::SocketAddr;

use crate::load::{BulkReport, LoadReport, Pattern};
use backend::fixture::{Fixture, FixtureMode, FixtureOptions};

use super::measure::{Load, Stop, bulk, closed_loop, idle_memory, measure};
use super::peers::{Peer, PeerKind};
use super::repeat::{Round, interleaved, median, median_unless};
use super::report::results::{
    CostRow, IdleMemory, LoadRow, Outcome, WorkloadA, WorkloadB, WorkloadC,
};
use super::sizes::Sizes;
use super::subject::{Setup, Subject};

// `Sizes` (sizes.rs) says how big; which subjects each workload measures is
// this file's business, so those methods are here, in an impl of their own.
impl Sizes {
    /// Our modes of workload A: single, every pool size, every epoll, and
    /// the hand-written loop beside them.
    fn ours(&self, pools: &[usize]) -> Vec<Subject> {
        let mut subjects = vec![Subject::Single];
        subjects.extend(pools.iter().map(|&t| Subject::Pool(t)));
        subjects.extend(self.epoll_workers.iter().map(|&w| Subject::Epoll(w)));
        subjects.push(Subject::States);
        subjects
    }

    /// The direct row and the installed peers, at every thread count.
    fn references(&self, setup: &Setup) -> Vec<Subject> {
        let mut subjects = vec![Subject::Direct];
        subjects.extend(self.peers(setup));
        subjects
    }

    fn peers(&self, setup: &Setup) -> Vec<Subject> {
        peers_at(setup, &self.peer_threads)
    }

    /// Workload C's subjects, and its keep-alive HTTP rows' (http.rs): the
    /// direct row, every epoll worker count with splice (the default
    /// `auto`) and without (`off`: what splicing saves, and what it must
    /// not cost the other rows), the hand-written loop (what the runtime
    /// costs is epoll 1 over it), the installed peers, and HAProxy again
    /// with `option splice-auto`; with `--baseline`, the earlier build at
    /// every epoll worker count.
    pub(super) fn cost_subjects(&self, setup: &Setup) -> Vec<Subject> {
        let mut subjects = vec![Subject::Direct];
        for &w in &self.epoll_workers {
            subjects.extend([Subject::Epoll(w), Subject::EpollCopy(w)]);
            if setup.baseline.is_some() {
                subjects.push(Subject::Baseline(w));
            }
        }
        subjects.push(Subject::States);
        subjects.extend(self.peers(setup));
        if setup.installed.has(PeerKind::HAProxySplice) {
            subjects.extend(self.peer_threads.iter().map(|&threads| {
                Subject::Peer(Peer {
                    kind: PeerKind::HAProxySplice,
                    threads,
                })
            }));
        }
        subjects
    }
}

/// Every installed peer at each of `threads`.
pub(super) fn peers_at(setup: &Setup, threads: &[usize]) -> Vec<Subject> {
    let mut subjects = Vec::new();
    for kind in [PeerKind::HAProxy, PeerKind::Nginx] {
        if setup.installed.has(kind) {
            for &threads in threads {
                subjects.push(Subject::Peer(Peer { kind, threads }));
            }
        }
    }
    subjects
}

/// Prints one finished row on stderr, so a long run shows its progress.
pub(super) fn progress<T>(
    what: &str,
    subject: Subject,
    outcome: &Outcome<T>,
    summary: impl Fn(&T) -> String,
) {
    let said = match outcome {
        Outcome::Done(m) => summary(&m.value),
        Outcome::Failed(why) => format!("FAILED: {why}"),
        Outcome::Skipped(why) => format!("skipped: {why}"),
    };
    eprintln!("bench: {what:<22} {:<20} {said}", subject.to_string());
}

fn load_summary(report: &crate::load::LoadReport) -> String {
    format!(
        "{:>9.1} req/s, {} ok, {} errors",
        report.req_per_sec(),
        report.ok,
        report.errors
    )
}

/// One request/response row: `subject` in front of `backends`, `load` through it.
fn load_row(setup: &Setup, subject: Subject, backends: &[SocketAddr], load: &Load) -> LoadRow {
    let outcome = measure(setup, subject, backends, |running| {
        closed_loop(running.addr(), load)
    });
    LoadRow {
        subject,
        clients: load.clients,
        outcome,
        runs: Vec::new(),
    }
}

/// Workload A.
pub fn workload_a(setup: &Setup, sizes: &Sizes) -> io::Result<WorkloadA> {
    let fixture = Fixture::start(
        3,
        FixtureOptions {
            mode: FixtureMode::Reply,
            delay: sizes.delay,
            banner: String::new(),
        },
    )?;
    let backends = fixture.addrs().to_vec();
    let mut subjects = sizes.ours(&sizes.pool_threads);
    subjects.extend(sizes.references(setup));

    let seed_load = Load {
        clients: sizes.seed_clients,
        stop: Stop::Requests(sizes.seed_requests),
        timeout: sizes.timeout,
        pattern: Pattern::NewConnection,
    };
    let mut seed = Vec::new();
    for &subject in &subjects {
        let row = load_row(setup, subject, &backends, &seed_load);
        progress("A seed scale", subject, &row.outcome, load_summary);
        seed.push(row);
    }

    let by_clients = sizes
        .clients
        .iter()
        .map(|&clients| {
            let rows = timed_rows(setup, sizes, &subjects, &backends, clients);
            (clients, rows)
        })
        .collect();
    fixture.stop();
    Ok(WorkloadA {
        delay: sizes.delay,
        seed,
        by_clients,
    })
}

/// Workload A at `clients` concurrent clients for a fixed time: one row
/// per subject, skipped where each request would queue longer than
/// [`Sizes::max_queue_wait`] behind the others. The rows a ratio to direct
/// is compared on ([`Subject::is_compared`]: direct, epoll, the peers) run
/// [`Sizes::repetitions`] times, interleaved (repeat.rs), and keep their
/// median run; the pool, single and states rows, which tell the seed's
/// story rather than race the peers, run once, in round 1.
fn timed_rows(
    setup: &Setup,
    sizes: &Sizes,
    subjects: &[Subject],
    backends: &[SocketAddr],
    clients: usize,
) -> Vec<LoadRow> {
    let load = Load {
        clients,
        stop: Stop::Duration(sizes.run_for),
        timeout: sizes.timeout,
        pattern: Pattern::NewConnection,
    };
    let what = format!("A C={clients}");
    let runs = interleaved(sizes.repetitions, subjects, |round, subject| {
        if !round.is_first() && !subject.is_compared() {
            return None;
        }
        let outcome = timed_run(setup, sizes, subject, backends, &load);
        progress(&round.label(&what), subject, &outcome, load_summary);
        Some(outcome)
    });
    subjects
        .iter()
        .zip(runs)
        .map(|(&subject, runs)| {
            let runs: Vec<_> = runs.into_iter().flatten().collect();
            let several = runs.len() > 1;
            let (outcome, rates) = median(runs, LoadReport::req_per_sec);
            if several {
                progress(&format!("{what}, median"), subject, &outcome, load_summary);
            }
            LoadRow {
                subject,
                clients,
                outcome,
                runs: if several { rates } else { Vec::new() },
            }
        })
        .collect()
}

/// One timed run of workload A, or why it was skipped: a pool too small
/// for `load`'s clients would only measure its own queue.
fn timed_run(
    setup: &Setup,
    sizes: &Sizes,
    subject: Subject,
    backends: &[SocketAddr],
    load: &Load,
) -> Outcome<LoadReport> {
    let wait = subject.queue_wait(load.clients, sizes.delay);
    if wait > sizes.max_queue_wait {
        return Outcome::Skipped(format!(
            "each request would queue {:.1} s behind the others ({} clients, {} at a time)",
            wait.as_secs_f64(),
            load.clients,
            subject.parallelism(load.clients)
        ));
    }
    load_row(setup, subject, backends, load).outcome
}

/// Workload B.
pub fn workload_b(setup: &Setup, sizes: &Sizes) -> io::Result<WorkloadB> {
    // One fixture per backend: each is one thread, and a CPU-bound backend
    // must be able to use a core of its own.
    let fixtures = (0..sizes.cpu_backends)
        .map(|_| {
            Fixture::start(
                1,
                FixtureOptions {
                    mode: FixtureMode::Cpu,
                    delay: sizes.cpu_per_request,
                    banner: String::new(),
                },
            )
        })
        .collect::<io::Result<Vec<_>>>()?;
    let backends: Vec<SocketAddr> = fixtures.iter().flat_map(|f| f.addrs().to_vec()).collect();
    let load = Load {
        clients: sizes.cpu_clients,
        stop: Stop::Duration(sizes.run_for),
        timeout: sizes.timeout,
        pattern: Pattern::NewConnection,
    };
    let mut subjects: Vec<Subject> = sizes
        .cpu_pool_threads
        .iter()
        .map(|&t| Subject::Pool(t))
        .collect();
    subjects.extend(sizes.epoll_workers.iter().map(|&w| Subject::Epoll(w)));
    let mut rows = Vec::new();
    for subject in subjects {
        let row = load_row(setup, subject, &backends, &load);
        progress("B cpu-bound", subject, &row.outcome, load_summary);
        rows.push(row);
    }
    for fixture in fixtures {
        fixture.stop();
    }
    Ok(WorkloadB {
        cpu_per_request: sizes.cpu_per_request,
        backends: sizes.cpu_backends,
        rows,
    })
}

/// Workload C.
pub fn workload_c(setup: &Setup, sizes: &Sizes) -> io::Result<WorkloadC> {
    let echo = Fixture::start(3, FixtureOptions::at_once(FixtureMode::Echo))?;
    let echoes = echo.addrs().to_vec();
    let subjects = sizes.cost_subjects(setup);
    let connect_load = Load {
        clients: sizes.cost_clients,
        stop: Stop::Either(sizes.connect_requests, sizes.run_for),
        timeout: sizes.timeout,
        pattern: Pattern::NewConnection,
    };
    let keep_alive_load = Load {
        clients: sizes.cost_clients,
        stop: Stop::Duration(sizes.run_for),
        timeout: sizes.timeout,
        pattern: Pattern::KeepAlive {
            per_connection: sizes.keep_alive_per_connection,
        },
    };
    let plan = CostPlan {
        setup,
        sizes,
        echoes: &echoes,
        connect: connect_load,
        keep_alive: keep_alive_load,
    };
    let rows = plan.rows(&subjects);
    echo.stop();
    Ok(WorkloadC { rows })
}

/// What workload C measures every subject with: its backends and loads.
struct CostPlan<'a> {
    setup: &'a Setup,
    sizes: &'a Sizes,
    /// `echo` backends, for everything but the connection rate (whose
    /// `reply` backends are new for each run: see `connection_rate`).
    echoes: &'a [SocketAddr],
    /// A new connection per request.
    connect: Load,
    /// Many requests per connection.
    keep_alive: Load,
}

impl CostPlan<'_> {
    /// Every subject's row. The rates and bulk [`Sizes::repetitions`]
    /// times, interleaved (repeat.rs), each row keeping its median runs;
    /// idle once, in round 1, right after that subject's first bulk runs
    /// (so one repetition measures in the order a row always did).
    fn rows(&self, subjects: &[Subject]) -> Vec<CostRow> {
        let mut idle = Vec::new();
        let runs = interleaved(self.sizes.repetitions, subjects, |round, subject| {
            let rates = self.rates(round, subject);
            if round.is_first() {
                idle.push(self.idle(subject));
            }
            rates
        });
        subjects
            .iter()
            .zip(runs)
            .zip(idle)
            .map(|((&subject, runs), idle)| row(subject, runs, idle))
            .collect()
    }

    /// One round's rates and bulk runs of `subject`, each on a fresh process.
    fn rates(&self, round: Round, subject: Subject) -> Rates {
        let connect = self.connection_rate(subject);
        progress(
            &round.label("C connections"),
            subject,
            &connect,
            load_summary,
        );
        let keep_alive = measure(self.setup, subject, self.echoes, |running| {
            closed_loop(running.addr(), &self.keep_alive)
        });
        progress(
            &round.label("C keep-alive"),
            subject,
            &keep_alive,
            load_summary,
        );
        let bulk_one = self.bulk(subject, 1);
        progress(
            &round.label("C bulk, 1 stream"),
            subject,
            &bulk_one,
            bulk_summary,
        );
        let bulk_many = self.bulk(subject, self.sizes.bulk_streams);
        progress(
            &round.label("C bulk, streams"),
            subject,
            &bulk_many,
            bulk_summary,
        );
        Rates {
            connect,
            keep_alive,
            bulk_one,
            bulk_many,
        }
    }

    /// One connection-rate run of `subject`, in front of `reply` backends of
    /// its own, on new ports. Each connection leaves a TIME_WAIT entry
    /// toward the port of the backend it reached, for a minute; backends
    /// shared by every run would make each run's connect(2) search past the
    /// entries of all the runs before it, and the later subjects of a round
    /// would pay for the earlier ones.
    fn connection_rate(&self, subject: Subject) -> Outcome<LoadReport> {
        let fresh = match Fixture::start(3, FixtureOptions::at_once(FixtureMode::Reply)) {
            Ok(fixture) => fixture,
            Err(e) => return Outcome::Failed(format!("reply backends: {e}")),
        };
        let connect = measure(self.setup, subject, fresh.addrs(), |running| {
            closed_loop(running.addr(), &self.connect)
        });
        fresh.stop();
        connect
    }

    /// One bulk run of `subject` over `streams` streams, on a fresh process.
    fn bulk(&self, subject: Subject, streams: usize) -> Outcome<BulkReport> {
        let sizes = self.sizes;
        measure(self.setup, subject, self.echoes, |running| {
            bulk(running.addr(), sizes.bulk_bytes, streams, sizes.timeout)
        })
    }

    /// The idle connections' memory (none for `direct`: no proxy to weigh).
    fn idle(&self, subject: Subject) -> Outcome<IdleMemory> {
        let idle = if subject == Subject::Direct {
            Outcome::Skipped("no proxy to weigh".to_string())
        } else {
            measure(self.setup, subject, self.echoes, |running| {
                idle_memory(running, self.sizes.idle, self.sizes.timeout)
            })
        };
        progress("C idle", subject, &idle, |m| {
            format!(
                "{} connections: {:.1} KiB each, {:.1} KiB kept after close",
                m.connections,
                m.per_connection_kib(),
                m.kept_kib()
            )
        });
        idle
    }
}

/// One round's measurements of a subject that are repeated.
struct Rates {
    connect: Outcome<LoadReport>,
    keep_alive: Outcome<LoadReport>,
    bulk_one: Outcome<BulkReport>,
    bulk_many: Outcome<BulkReport>,
}

/// `subject`'s row: the median of its `runs` (said on stderr when there
/// are several; a bulk run whose bytes came back altered is its row's run
/// whatever its rate), and its `idle` memory, measured once.
fn row(subject: Subject, runs: Vec<Rates>, idle: Outcome<IdleMemory>) -> CostRow {
    let several = runs.len() > 1;
    let (mut connects, mut keep_alives) = (Vec::new(), Vec::new());
    let (mut bulk_ones, mut bulk_manys) = (Vec::new(), Vec::new());
    for run in runs {
        connects.push(run.connect);
        keep_alives.push(run.keep_alive);
        bulk_ones.push(run.bulk_one);
        bulk_manys.push(run.bulk_many);
    }
    let cpu_runs = |runs: &[Outcome<LoadReport>]| -> Vec<Option<f64>> {
        let cpu = |run: &Outcome<LoadReport>| run.done()?.cpu_per_request_us();
        runs.iter().map(cpu).collect()
    };
    let (connect_cpu_runs, keep_alive_cpu_runs) = (cpu_runs(&connects), cpu_runs(&keep_alives));
    let (connect, connect_runs) = median(connects, LoadReport::req_per_sec);
    let (keep_alive, keep_alive_runs) = median(keep_alives, LoadReport::req_per_sec);
    let altered = |r: &BulkReport| !r.intact;
    let (bulk_one, bulk_one_runs) = median_unless(bulk_ones, BulkReport::mib_per_sec, altered);
    let (bulk_many, bulk_many_runs) = median_unless(bulk_manys, BulkReport::mib_per_sec, altered);
    if several {
        progress("C connections, median", subject, &connect, load_summary);
        progress("C keep-alive, median", subject, &keep_alive, load_summary);
        progress("C bulk, 1 stream, median", subject, &bulk_one, bulk_summary);
        progress("C bulk, streams, median", subject, &bulk_many, bulk_summary);
    }
    CostRow {
        subject,
        connect,
        keep_alive,
        bulk_one,
        bulk_many,
        idle,
        connect_runs,
        keep_alive_runs,
        bulk_one_runs,
        bulk_many_runs,
        connect_cpu_runs,
        keep_alive_cpu_runs,
    }
}

fn bulk_summary(report: &BulkReport) -> String {
    let verdict = match (&report.first_error, report.intact) {
        (_, true) => "intact".to_string(),
        (Some(why), false) => format!("NOT INTACT: {why}"),
        (None, false) => "NOT INTACT".to_string(),
    };
    format!("{:>9.1} MiB/s, {verdict}", report.mib_per_sec())
}
