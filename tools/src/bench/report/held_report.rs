//! The report's held-connections section: the proxy's CPU per keep-alive
//! request and its memory per held connection, at each number of idle
//! connections held (bench/held.rs), ours beside the peers', with two charts:
//! `held-cpu.svg` (CPU per request against connections held) and
//! `held-memory.svg` (KiB per held connection, a bar per subject).

use std::fmt::Write as _;

use proxy::log::grouped::grouped;

use super::charts::Chart;
use super::markdown::Table;
use super::results::{Held, HeldRow, Level};
use super::svg::{Axis, BarChart, LineChart, Series};

/// The section's heading.
pub const HEADING: &str = "## Idle connections held beside a keep-alive load";

/// The section, and its charts.
pub(super) fn section(out: &mut String, held: &Held) -> Vec<Chart> {
    let _ = writeln!(out, "{HEADING}\n");
    let levels: Vec<String> = held.levels.iter().map(|&n| grouped(n as u64)).collect();
    let _ = writeln!(
        out,
        "Each proxy at one thread (ours `--mode epoll --workers 1`, HAProxy `nbthread 1`, nginx \
         `worker_processes 1`), started fresh and warmed; then {} idle connections held in turn \
         (each made one echo round trip, then kept silent; the set grows from one level to the \
         next), and at each level a keep-alive load beside them: {} clients, {} requests per \
         connection, a line out and back through echo backends, for {:.1} s. *CPU per request*: \
         the proxy's utime + stime over the load, divided by the requests. *KiB per held \
         connection*: its resident memory at the end of the load, above the level without held \
         connections, divided by the connections held. Every held connection answers once more \
         at the end.\n",
        levels.join(", then "),
        held.clients,
        held.per_connection,
        held.run_for.as_secs_f64()
    );
    let mut header = vec!["subject".to_string()];
    for n in &levels {
        header.push(format!("µs/request, {n} held"));
    }
    for n in levels.iter().skip(1) {
        header.push(format!("KiB per held, {n}"));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header);
    for row in &held.rows {
        table.row(cells(row, held.levels.len()));
    }
    let _ = writeln!(out, "{}", table.render());
    let charts = vec![cpu_chart(held), memory_chart(held)];
    for chart in &charts {
        let _ = writeln!(out, "![{}](bench/{})\n", chart.alt, chart.file);
    }
    charts
}

/// One row's cells: CPU per request at each level, then KiB per held
/// connection at each level but the first.
fn cells(row: &HeldRow, count: usize) -> Vec<String> {
    let mut cells = vec![row.subject.to_string()];
    let levels = match &row.levels {
        Ok(levels) => levels,
        Err(why) => {
            cells.push(format!("failed: {why}"));
            cells.extend((2..2 * count).map(|_| "—".to_string()));
            return cells;
        }
    };
    let dash = || "—".to_string();
    for level in levels {
        cells.push(
            level
                .cpu_per_request_us()
                .map_or_else(dash, |us| format!("{us:.1}")),
        );
    }
    for level in levels.iter().skip(1) {
        cells.push(
            row.kib_per_held(level)
                .map_or_else(dash, |k| format!("{k:.2}")),
        );
    }
    cells
}

/// The levels of a row that ran.
fn done(row: &HeldRow) -> &[Level] {
    row.levels.as_deref().unwrap_or(&[])
}

/// CPU per request against connections held, a line per subject.
fn cpu_chart(held: &Held) -> Chart {
    let series = held
        .rows
        .iter()
        .map(|row| Series {
            name: row.subject.to_string(),
            points: done(row)
                .iter()
                .filter_map(|l| Some((l.held as f64, l.cpu_per_request_us()?)))
                .collect(),
            dashed: false,
        })
        .collect();
    Chart {
        file: "held-cpu.svg".to_string(),
        alt: "The proxy's CPU per keep-alive request against idle connections held".to_string(),
        svg: LineChart {
            title: "CPU per keep-alive request, idle connections held beside".to_string(),
            x_label: "idle connections held".to_string(),
            y_label: "proxy CPU per request, µs".to_string(),
            x_axis: Axis::Linear,
            series,
            references: Vec::new(),
        }
        .render(),
    }
}

/// KiB per held connection at each level, a bar per subject.
fn memory_chart(held: &Held) -> Chart {
    let series: Vec<String> = held.rows.iter().map(|r| r.subject.to_string()).collect();
    let groups = held
        .levels
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, &n)| {
            let values = held
                .rows
                .iter()
                .map(|row| row.kib_per_held(done(row).get(i)?))
                .collect();
            (format!("{} held", grouped(n as u64)), values)
        })
        .collect();
    Chart {
        file: "held-memory.svg".to_string(),
        alt: "Resident memory per idle connection held".to_string(),
        svg: BarChart {
            title: "Memory per idle connection held (KiB)".to_string(),
            y_label: "KiB per held connection".to_string(),
            y_axis: Axis::Linear,
            series,
            groups,
        }
        .render(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::subject::Subject;

    fn level(held: usize, requests: u64, cpu_ms: u64, rss_kib: u64) -> Level {
        Level {
            held,
            requests,
            cpu: Duration::from_millis(cpu_ms),
            rss_kib,
        }
    }

    #[test]
    fn the_table_says_cpu_per_request_and_kib_per_held_connection() {
        let held = Held {
            levels: vec![0, 3000, 7000],
            clients: 64,
            per_connection: 100,
            run_for: Duration::from_secs(3),
            rows: vec![
                HeldRow {
                    subject: Subject::Epoll(1),
                    // 13 µs a request; 1.3 KiB and 1.25 KiB a held connection.
                    levels: Ok(vec![
                        level(0, 100_000, 1300, 4000),
                        level(3000, 100_000, 1300, 7900),
                        level(7000, 100_000, 1400, 12_750),
                    ]),
                },
                HeldRow {
                    subject: Subject::States,
                    levels: Err("could not start".to_string()),
                },
            ],
        };
        let mut out = String::new();
        let charts = section(&mut out, &held);
        assert!(
            out.contains("| epoll 1 | 13.0 | 13.0 | 14.0 | 1.30 | 1.25 |"),
            "{out}"
        );
        assert!(
            out.contains("| states | failed: could not start | — | — | — | — |"),
            "{out}"
        );
        assert_eq!(charts.len(), 2);
        assert!(out.contains("![Resident memory per idle connection held](bench/held-memory.svg)"));
    }
}
