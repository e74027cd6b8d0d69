//! The report's charts, from the results: which numbers go on which axis.
//! (How a chart is drawn is [`super::svg`]'s business.)
//!
//! - `a-seed.svg`: the seed's table as a chart, ours beside the seed's.
//! - `a-c{N}.svg`: req/s against pool threads at N clients, with the pool's
//!   bound, and the epoll modes as horizontal lines across it (an event
//!   loop has no thread count to put on the x axis: that is the point).
//! - `a-latency-c{N}.svg`: p50 and p99 per subject, on a log scale.
//! - `b-plateau.svg`: workload B, req/s against pool threads, with the
//!   CPU bound.
//! - `c-ratios.svg`: workload C, each subject's ratio to direct.

use super::results::{LoadRow, WorkloadA, WorkloadB};
use super::seed::{SEED_EPOLL, SEED_POOL, SEED_SINGLE};
use super::svg::{Axis, BarChart, LineChart, Reference, Series};
use crate::bench::subject::Subject;

/// A chart ready to write: its file name (under `bench/`), its alt text and
/// its SVG.
#[derive(Debug, Clone)]
pub struct Chart {
    /// `a-c256.svg`.
    pub file: String,
    /// What it shows, for the Markdown image's alt text.
    pub alt: String,
    /// The document.
    pub svg: String,
}

/// req/s of a subject's row, if it ran.
fn rate_of(rows: &[LoadRow], subject: Subject) -> Option<f64> {
    rows.iter()
        .find(|r| r.subject == subject)
        .and_then(LoadRow::report)
        .map(|r| r.req_per_sec())
}

/// The pool's points: (threads, req/s) for each pool row that ran.
fn pool_points(rows: &[LoadRow]) -> Vec<(f64, f64)> {
    rows.iter()
        .filter_map(|r| match r.subject {
            Subject::Pool(threads) => Some((threads as f64, r.report()?.req_per_sec())),
            _ => None,
        })
        .collect()
}

/// Horizontal lines for the rows of `subjects` that ran.
fn references(rows: &[LoadRow], subjects: &[Subject]) -> Vec<Reference> {
    subjects
        .iter()
        .filter_map(|&s| {
            Some(Reference {
                name: s.to_string(),
                y: rate_of(rows, s)?,
            })
        })
        .collect()
}

/// The event loops among `rows`: every epoll row, and the states mode's.
fn event_loops(rows: &[LoadRow]) -> Vec<Subject> {
    rows.iter()
        .map(|r| r.subject)
        .filter(|s| matches!(s, Subject::Epoll(_) | Subject::States))
        .collect()
}

/// Workload A's charts: the seed's scale, one per concurrency, and the
/// latency bars.
pub fn workload_a(a: &WorkloadA) -> Vec<Chart> {
    let mut charts = Vec::new();
    if !a.seed.is_empty() {
        charts.push(seed_chart(a));
    }
    for (clients, rows) in &a.by_clients {
        charts.push(concurrency_chart(a, *clients, rows));
    }
    // Latency at 256 clients, or the largest concurrency run.
    let latency = a
        .by_clients
        .iter()
        .find(|(c, _)| *c == 256)
        .or(a.by_clients.last());
    if let Some((clients, rows)) = latency {
        charts.push(latency_chart(*clients, rows));
    }
    charts
}

/// Workload A at the seed's scale, beside the seed's own table.
fn seed_chart(a: &WorkloadA) -> Chart {
    let delay_ms = a.delay.as_millis();
    let mut refs = references(
        &a.seed,
        &[Subject::Single, Subject::Epoll(1), Subject::States],
    );
    refs.push(Reference {
        name: "seed: epoll 1 thread".to_string(),
        y: SEED_EPOLL,
    });
    refs.push(Reference {
        name: "seed: single".to_string(),
        y: SEED_SINGLE,
    });
    Chart {
        file: "a-seed.svg".to_string(),
        alt: "Workload A at the seed's scale: ours beside the seed's table".to_string(),
        svg: LineChart {
            title: format!("Workload A, the seed's scale ({delay_ms} ms backend)"),
            x_label: "pool threads".to_string(),
            y_label: "requests per second".to_string(),
            x_axis: Axis::Log2,
            series: vec![
                Series {
                    name: "pool (ours)".to_string(),
                    points: pool_points(&a.seed),
                    dashed: false,
                },
                Series {
                    name: "pool (seed)".to_string(),
                    points: SEED_POOL.iter().map(|&(t, r, _)| (t as f64, r)).collect(),
                    dashed: false,
                },
            ],
            references: refs,
        }
        .render(),
    }
}

/// Workload A at `clients` concurrent clients: the pool against its bound,
/// epoll and direct as lines across.
fn concurrency_chart(a: &WorkloadA, clients: usize, rows: &[LoadRow]) -> Chart {
    let delay_ms = a.delay.as_millis();
    let bound: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| match r.subject {
            Subject::Pool(t) => Some((t as f64, r.subject.bound(clients, a.delay))),
            _ => None,
        })
        .collect();
    let mut refs = references(rows, &event_loops(rows));
    refs.extend(references(rows, &[Subject::Direct]));
    refs.push(Reference {
        name: format!("bound {clients} / {delay_ms} ms"),
        y: Subject::Epoll(1).bound(clients, a.delay),
    });
    Chart {
        file: format!("a-c{clients}.svg"),
        alt: format!("Workload A, {clients} clients: req/s against pool threads, epoll across"),
        svg: LineChart {
            title: format!("Workload A, {clients} clients, {delay_ms} ms backend"),
            x_label: "pool threads".to_string(),
            y_label: "requests per second".to_string(),
            x_axis: Axis::Log2,
            series: vec![
                Series {
                    name: "pool".to_string(),
                    points: pool_points(rows),
                    dashed: false,
                },
                Series {
                    name: format!("pool bound t / {delay_ms} ms"),
                    points: bound,
                    dashed: true,
                },
            ],
            references: refs,
        }
        .render(),
    }
}

/// p50 and p99 latency of every subject at `clients` clients.
fn latency_chart(clients: usize, rows: &[LoadRow]) -> Chart {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let groups = rows
        .iter()
        .filter_map(|r| {
            let report = r.report()?;
            let label = match r.subject {
                Subject::Direct => "direct".to_string(),
                Subject::Peer(p) => short_peer(p),
                s => s.to_string(),
            };
            Some((
                label,
                vec![ms(report.percentile(50.0)), ms(report.percentile(99.0))],
            ))
        })
        .collect();
    Chart {
        file: format!("a-latency-c{clients}.svg"),
        alt: format!("Workload A, {clients} clients: p50 and p99 latency per mode"),
        svg: BarChart {
            title: format!("Workload A, {clients} clients: latency (log scale)"),
            y_label: "milliseconds".to_string(),
            y_axis: Axis::Log10,
            series: vec!["p50".to_string(), "p99".to_string()],
            groups,
        }
        .render(),
    }
}

/// A peer's name short enough for a bar group's label.
fn short_peer(peer: crate::bench::peers::Peer) -> String {
    match peer.kind {
        crate::bench::peers::PeerKind::HAProxy => format!("HAProxy {}", peer.threads),
        crate::bench::peers::PeerKind::HAProxySplice => format!("HAProxy {} splice", peer.threads),
        crate::bench::peers::PeerKind::Nginx => format!("nginx {}", peer.threads),
    }
}

/// Workload B's chart; `cores` draws the CPU bound.
pub fn workload_b(b: &WorkloadB, cores: usize) -> Chart {
    let per_core = 1.0 / b.cpu_per_request.as_secs_f64().max(1e-9);
    let mut refs = references(&b.rows, &event_loops(&b.rows));
    refs.push(Reference {
        name: format!(
            "bound: {cores} cores / {} ms",
            b.cpu_per_request.as_millis()
        ),
        y: cores.min(b.backends) as f64 * per_core,
    });
    Chart {
        file: "b-plateau.svg".to_string(),
        alt: "Workload B: the pool's plateau at the core count".to_string(),
        svg: LineChart {
            title: format!(
                "Workload B, CPU-bound backends ({} ms of CPU per request)",
                b.cpu_per_request.as_millis()
            ),
            x_label: "pool threads".to_string(),
            y_label: "requests per second".to_string(),
            x_axis: Axis::Log2,
            series: vec![Series {
                name: "pool".to_string(),
                points: pool_points(&b.rows),
                dashed: false,
            }],
            references: refs,
        }
        .render(),
    }
}

/// Workload C's chart: each subject's ratio to direct, per measure.
/// `ratios` is (measure, one ratio per subject) and `subjects` the legend.
pub fn workload_c(subjects: &[String], ratios: Vec<(String, Vec<Option<f64>>)>) -> Chart {
    Chart {
        file: "c-ratios.svg".to_string(),
        alt: "Workload C: throughput as a ratio to the direct connection".to_string(),
        svg: BarChart {
            title: "Workload C: ratio to direct (1 = as fast as no proxy)".to_string(),
            y_label: "ratio to direct".to_string(),
            y_axis: Axis::Linear,
            series: subjects.to_vec(),
            groups: ratios,
        }
        .render(),
    }
}
