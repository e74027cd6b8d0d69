//! The Markdown report: docs/BENCHMARKS.md.
//!
//! It is regenerated whole by each run, with one exception: the section
//! `## What the numbers say` is written by a person after reading the
//! numbers, and a regenerated report carries the old file's text of that
//! section over ([`carry_interpretation`]), up to the next `## ` heading.
//! A fresh report has a placeholder there ([`PLACEHOLDER`]).
//!
//! Every table says what it measured and how; every row that failed or was
//! skipped says why under its table, and so does every row with errors.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::load::{BulkReport, LoadReport};

use super::charts::{self, Chart};
use super::results::{
    CostRow, LoadRow, Measured, Outcome, Results, WorkloadA, WorkloadB, WorkloadC,
};
use super::subject::Subject;

/// The heading of the hand-written section.
pub const INTERPRETATION: &str = "## What the numbers say";
/// What that section holds until someone writes it.
pub const PLACEHOLDER: &str = "<!-- interpretation: written by hand after the run -->";

/// The seed's table (i5-9300H, 4 cores / 8 threads, 200 requests a run,
/// 50 ms backend): single-threaded (req/s, its "avg latency" in ms).
pub const SEED_SINGLE: f64 = 18.94;
const SEED_SINGLE_MS: f64 = 52.81;
/// The seed's pool: (threads, req/s, "avg latency" ms).
pub const SEED_POOL: [(usize, f64, f64); 7] = [
    (1, 19.55, 51.14),
    (2, 39.12, 25.56),
    (4, 74.99, 13.34),
    (8, 137.55, 7.27),
    (16, 239.52, 4.17),
    (32, 445.43, 2.25),
    (64, 583.09, 1.72),
];
/// The seed's epoll proxy on one thread: req/s.
pub const SEED_EPOLL: f64 = 696.86;
const SEED_EPOLL_MS: f64 = 1.44;

/// The seed's row for `subject`, if it has one: (req/s, ms).
fn seed_row(subject: Subject) -> Option<(f64, f64)> {
    match subject {
        Subject::Single => Some((SEED_SINGLE, SEED_SINGLE_MS)),
        Subject::Pool(threads) => SEED_POOL
            .iter()
            .find(|(t, _, _)| *t == threads)
            .map(|&(_, rate, ms)| (rate, ms)),
        Subject::Epoll(1) => Some((SEED_EPOLL, SEED_EPOLL_MS)),
        _ => None,
    }
}

/// The text of the hand-written section in `old` (an earlier report), if
/// someone wrote one: everything after the heading up to the next `## `
/// heading, unless it is empty or only the placeholder.
pub fn carry_interpretation(old: &str) -> Option<String> {
    let mut lines = old.lines();
    lines.by_ref().find(|l| l.trim_end() == INTERPRETATION)?;
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
    let body = body.join("\n");
    let body = body.trim();
    if body.is_empty() || body == PLACEHOLDER {
        None
    } else {
        Some(body.to_string())
    }
}

/// A Markdown table.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table; the first column left-aligned, the numbers right-aligned.
    fn render(&self) -> String {
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
        let mut out = String::new();
        let header: Vec<String> = self.header.iter().map(|h| cell(h)).collect();
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { ":---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }
}

/// A rate: `1,234` above a thousand, `123.4` below.
pub fn rate(value: f64) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    if value >= 1000.0 {
        let whole = value.round() as u64;
        let digits = whole.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{value:.1}")
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("—".to_string(), |d| {
        let ms = d.as_secs_f64() * 1000.0;
        if ms >= 100.0 {
            format!("{ms:.0}")
        } else {
            format!("{ms:.1}")
        }
    })
}

fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b > 0.0 && v.is_finite() => Some(v / b),
        _ => None,
    }
}

fn show_ratio(r: Option<f64>) -> String {
    r.map_or("—".to_string(), |r| format!("{r:.2}"))
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The proxy-cost cells: CPU seconds and peak RSS.
fn cost_cells<T>(m: &Measured<T>) -> [String; 2] {
    match &m.cost {
        Some(cost) => [format!("{:.2}", cost.cpu.as_secs_f64()), mib(cost.peak_kib)],
        None => ["—".to_string(), "—".to_string()],
    }
}

/// The notes under a table: why a row failed or was skipped, the first
/// error of a row with errors, anything else odd.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn outcome<T>(&mut self, label: &str, outcome: &Outcome<T>) {
        match outcome {
            Outcome::Failed(why) => self.0.push(format!("{label}: **failed**: {why}")),
            Outcome::Skipped(why) => self.0.push(format!("{label}: skipped: {why}")),
            Outcome::Done(m) => {
                if let Some(note) = &m.note {
                    self.0.push(format!("{label}: {note}"));
                }
            }
        }
    }

    fn load(&mut self, label: &str, outcome: &Outcome<LoadReport>) {
        self.outcome(label, outcome);
        if let Some(m) = outcome.done() {
            if m.value.errors > 0 {
                self.0.push(format!(
                    "{label}: {} errors; the first: {}",
                    m.value.errors,
                    m.value.first_error.as_deref().unwrap_or("(not recorded)")
                ));
            }
        }
    }

    fn render(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let mut out = String::from("\n");
        for note in &self.0 {
            let _ = writeln!(out, "- {note}");
        }
        out
    }
}

/// Cells for a row that did not run.
fn not_run<T>(outcome: &Outcome<T>) -> &'static str {
    match outcome {
        Outcome::Failed(_) => "failed",
        Outcome::Skipped(_) => "skipped",
        Outcome::Done(_) => "",
    }
}

/// The report's text; `interpretation` is the hand-written section carried
/// over from the previous report, if any. Returns the Markdown and the
/// charts it links to (written by the caller under `bench/`).
pub fn render(results: &Results, interpretation: Option<&str>) -> (String, Vec<Chart>) {
    let mut out = String::new();
    let mut charts = Vec::new();
    header(&mut out, results);
    let _ = writeln!(
        out,
        "{INTERPRETATION}\n\n{}\n",
        interpretation.unwrap_or(PLACEHOLDER)
    );
    if let Some(a) = &results.a {
        let a_charts = charts::workload_a(a);
        workload_a(&mut out, a, &a_charts);
        charts.extend(a_charts);
    }
    if let Some(b) = &results.b {
        let chart = charts::workload_b(b, results.machine.cores);
        workload_b(&mut out, b, results.machine.cores, &chart);
        charts.push(chart);
    }
    if let Some(c) = &results.c {
        if let Some(chart) = workload_c(&mut out, c, results) {
            charts.push(chart);
        }
    }
    method(&mut out, results);
    (out, charts)
}

fn embed(out: &mut String, chart: &Chart) {
    let _ = writeln!(out, "![{}](bench/{})\n", chart.alt, chart.file);
}

fn header(out: &mut String, results: &Results) {
    let m = &results.machine;
    let _ = writeln!(
        out,
        "# Benchmarks\n\n\
         Generated by `scripts/bench.sh` (backend/src/bench/); every table and chart below is \
         rewritten by each run, except the section \"What the numbers say\", which is kept.{}\n",
        if results.sizes.quick {
            " **This is a `--quick` run: tiny sizes, for checking the harness, not for reading.**"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "## The machine and the run\n");
    let _ = writeln!(out, "- CPU: {}, {} cores available", m.cpu_model, m.cores);
    let _ = writeln!(out, "- kernel {}, {} MiB of memory", m.kernel, m.memory_mib);
    let _ = writeln!(out, "- date: {}", results.date);
    let _ = writeln!(out, "- command: `{}`", results.command);
    let _ = writeln!(
        out,
        "- the whole run took {:.0} s; descriptors allowed per process: {}",
        results.elapsed.as_secs_f64(),
        results.nofile
    );
    match &results.installed.haproxy {
        Ok(h) => {
            let _ = writeln!(out, "- peer: {}", h.version);
        }
        Err(why) => {
            let _ = writeln!(out, "- peer HAProxy: not measured: {why}");
        }
    }
    match &results.installed.nginx {
        Ok(n) => {
            let _ = writeln!(
                out,
                "- peer: nginx {} (stream module {})",
                n.version,
                n.stream_module
                    .as_ref()
                    .map_or("built in".to_string(), |p| format!(
                        "loaded from {}",
                        p.display()
                    ))
            );
        }
        Err(why) => {
            let _ = writeln!(out, "- peer nginx: not measured: {why}");
        }
    }
    for note in &results.notes {
        let _ = writeln!(out, "- {note}");
    }
    out.push('\n');
}

/// The client-CPU cell: the load client's CPU as a share of one core.
fn client_cell<T>(m: &Measured<T>) -> String {
    percent(m.client_load())
}

fn workload_a(out: &mut String, a: &WorkloadA, charts: &[Chart]) {
    let delay = a.delay.as_millis();
    let _ = writeln!(
        out,
        "## Workload A: the seed's experiment ({delay} ms backend, a new connection per request)\n\n\
         Three fixture backends (one thread, a timer per request, so the delay never blocks it) \
         answer each request after {delay} ms. Each request opens a new connection, sends a line, \
         half-closes and reads the reply to the end. A pool of N blocking threads holds one \
         connection per thread, so it completes at most N / {delay} ms requests a second however \
         idle the CPU; an event loop holds them all, and approaches C / {delay} ms (Little's law) \
         for C concurrent clients.\n"
    );
    if !a.seed.is_empty() {
        let clients = a.seed.first().map_or(0, |r| r.clients);
        let requests = a
            .seed
            .iter()
            .find_map(|r| r.report().map(|r| r.requests))
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "### At the seed's scale: {requests} requests a run\n\n\
             The seed does not say how many clients it ran concurrently; these runs use \
             **{clients}**. Its \"avg latency\" column is the run's wall time divided by the \
             number of requests (1000 / req/s, to the rounding), not the time a request took, \
             so it is set beside our *ms per request*; our true average latency is the next \
             column. The seed ran on a 4-core/8-thread i5-9300H; the ratios matter, not the \
             absolute numbers.\n"
        );
        let mut table = Table::new(&[
            "mode",
            "req/s",
            "ms per request",
            "avg latency ms",
            "p99 ms",
            "errors",
            "seed req/s",
            "seed ms",
            "proxy CPU s",
            "peak RSS MiB",
            "client CPU",
        ]);
        let mut notes = Notes::default();
        for row in &a.seed {
            let label = row.subject.to_string();
            notes.load(&label, &row.outcome);
            let seed = seed_row(row.subject);
            let seed_cells = [
                seed.map_or("—".to_string(), |(r, _)| rate(r)),
                seed.map_or("—".to_string(), |(_, m)| format!("{m:.2}")),
            ];
            match row.outcome.done() {
                Some(m) => {
                    let r = &m.value;
                    let per_request = if r.requests > 0 {
                        format!(
                            "{:.2}",
                            r.elapsed.as_secs_f64() * 1000.0 / r.requests as f64
                        )
                    } else {
                        "—".to_string()
                    };
                    let [cpu, rss] = cost_cells(m);
                    table.row(vec![
                        label,
                        rate(r.req_per_sec()),
                        per_request,
                        ms(r.average()),
                        ms(r.percentile(99.0)),
                        r.errors.to_string(),
                        seed_cells[0].clone(),
                        seed_cells[1].clone(),
                        cpu,
                        rss,
                        client_cell(m),
                    ]);
                }
                None => {
                    let mut cells = vec![label, not_run(&row.outcome).to_string()];
                    cells.extend(["—"; 4].map(String::from));
                    cells.extend(seed_cells);
                    cells.extend(["—"; 3].map(String::from));
                    table.row(cells);
                }
            }
        }
        out.push_str(&table.render());
        out.push_str(&notes.render());
        out.push('\n');
        if let Some(chart) = charts.iter().find(|c| c.file == "a-seed.svg") {
            embed(out, chart);
        }
    }
    for (clients, rows) in &a.by_clients {
        let _ = writeln!(out, "### {clients} concurrent clients\n");
        let direct = rows
            .iter()
            .find(|r| r.subject == Subject::Direct)
            .and_then(LoadRow::report)
            .map(LoadReport::req_per_sec);
        let mut table = Table::new(&[
            "subject",
            "req/s",
            "bound",
            "of bound",
            "avg ms",
            "p50 ms",
            "p99 ms",
            "requests",
            "errors",
            "proxy CPU s",
            "peak RSS MiB",
            "client CPU",
            "ratio to direct",
        ]);
        let mut notes = Notes::default();
        for row in rows {
            let label = row.subject.to_string();
            notes.load(&label, &row.outcome);
            let bound = row.subject.bound(*clients, a.delay);
            match row.outcome.done() {
                Some(m) => {
                    let r = &m.value;
                    let [cpu, rss] = cost_cells(m);
                    table.row(vec![
                        label,
                        rate(r.req_per_sec()),
                        rate(bound),
                        percent(r.req_per_sec() / bound),
                        ms(r.average()),
                        ms(r.percentile(50.0)),
                        ms(r.percentile(99.0)),
                        r.requests.to_string(),
                        r.errors.to_string(),
                        cpu,
                        rss,
                        client_cell(m),
                        show_ratio(ratio(Some(r.req_per_sec()), direct)),
                    ]);
                }
                None => {
                    let mut cells = vec![label, not_run(&row.outcome).to_string(), rate(bound)];
                    cells.extend(["—"; 10].map(String::from));
                    table.row(cells);
                }
            }
        }
        out.push_str(&table.render());
        let _ = writeln!(
            out,
            "\nThe bound: min(C, threads) / {delay} ms for a pool (single: 1 / {delay} ms), \
             C / {delay} ms for everything else. *client CPU*: the load client's CPU time as a \
             share of one core during the run; near 100% the client, not the proxy, was the limit."
        );
        out.push_str(&notes.render());
        out.push('\n');
        if let Some(chart) = charts
            .iter()
            .find(|c| c.file == format!("a-c{clients}.svg"))
        {
            embed(out, chart);
        }
    }
    if let Some(chart) = charts.iter().find(|c| c.file.starts_with("a-latency")) {
        let _ = writeln!(
            out,
            "### Latency\n\nMedian and 99th percentile per subject (log scale): a pool that cannot \
             hold every client makes the others queue, and the queue is the latency.\n"
        );
        embed(out, chart);
    }
}

/// Replies per backend, as `67/66/67`.
fn spread(report: &LoadReport) -> String {
    let counts: Vec<String> = report.per_backend.values().map(u64::to_string).collect();
    if counts.is_empty() {
        "—".to_string()
    } else {
        counts.join("/")
    }
}

fn workload_b(out: &mut String, b: &WorkloadB, cores: usize, chart: &Chart) {
    let cpu_ms = b.cpu_per_request.as_millis();
    let clients = b.rows.first().map_or(0, |r| r.clients);
    let bound = cores.min(b.backends) as f64 / b.cpu_per_request.as_secs_f64().max(1e-9);
    let _ = writeln!(
        out,
        "## Workload B: a CPU-bound backend ({cpu_ms} ms of CPU per request)\n\n\
         {} backends, each a fixture on a thread of its own, burn {cpu_ms} ms of CPU per request; \
         {clients} clients, a new connection per request. With {cores} cores no proxy can exceed \
         {cores} / {cpu_ms} ms = {} req/s (less the CPU the proxy and the load client take): the \
         pool's throughput climbs with its threads only until the cores are busy, then stays \
         flat. The seed predicted this plateau and never measured it.\n",
        b.backends,
        rate(bound)
    );
    let mut table = Table::new(&[
        "subject",
        "req/s",
        "of CPU bound",
        "avg ms",
        "p50 ms",
        "p99 ms",
        "requests",
        "errors",
        "proxy CPU s",
        "client CPU",
        "replies per backend",
    ]);
    let mut notes = Notes::default();
    for row in &b.rows {
        let label = row.subject.to_string();
        notes.load(&label, &row.outcome);
        match row.outcome.done() {
            Some(m) => {
                let r = &m.value;
                let [cpu, _] = cost_cells(m);
                table.row(vec![
                    label,
                    rate(r.req_per_sec()),
                    percent(r.req_per_sec() / bound),
                    ms(r.average()),
                    ms(r.percentile(50.0)),
                    ms(r.percentile(99.0)),
                    r.requests.to_string(),
                    r.errors.to_string(),
                    cpu,
                    client_cell(m),
                    spread(r),
                ]);
            }
            None => {
                let mut cells = vec![label, not_run(&row.outcome).to_string()];
                cells.extend(["—"; 9].map(String::from));
                table.row(cells);
            }
        }
    }
    out.push_str(&table.render());
    out.push_str(&notes.render());
    out.push('\n');
    embed(out, chart);
}

/// One workload C measure: a name, issue 4's bar for it, and a value per subject.
struct Measure {
    name: String,
    /// The label in the chart of workload C (None: not in the chart).
    short: Option<String>,
    bar: &'static str,
    /// Higher is better (a rate), or lower is (a cost).
    higher_is_better: bool,
    /// A ratio to direct (a rate), or an absolute figure (a cost).
    relative: bool,
    values: BTreeMap<Subject, f64>,
}

fn cost_measures(c: &WorkloadC, a: Option<&WorkloadA>, streams: usize) -> Vec<Measure> {
    let mut measures = Vec::new();
    if let Some(a) = a {
        for (clients, rows) in &a.by_clients {
            let bar = if *clients >= 1000 {
                "HAProxy 0.74 / 0.81, nginx 0.76 / 0.85"
            } else {
                "0.93–1.00"
            };
            let values = rows
                .iter()
                .filter_map(|r| Some((r.subject, r.report()?.req_per_sec())))
                .collect();
            measures.push(Measure {
                short: None,
                name: format!(
                    "A: req/s, {clients} clients, {} ms backend",
                    a.delay.as_millis()
                ),
                bar,
                higher_is_better: true,
                relative: true,
                values,
            });
        }
    }
    let collect = |f: &dyn Fn(&CostRow) -> Option<f64>| -> BTreeMap<Subject, f64> {
        c.rows
            .iter()
            .filter_map(|row| Some((row.subject, f(row)?)))
            .collect()
    };
    measures.push(Measure {
        name: "C: connections/s (a new connection per request, no delay)".to_string(),
        short: Some("connections/s".to_string()),
        bar: "0.46–0.57",
        higher_is_better: true,
        relative: true,
        values: collect(&|r| Some(r.connect.done()?.value.req_per_sec())),
    });
    measures.push(Measure {
        name: "C: keep-alive requests/s (echo backend)".to_string(),
        short: Some("keep-alive req/s".to_string()),
        bar: "0.78–0.80 (HTTP with wrk: not the same test)",
        higher_is_better: true,
        relative: true,
        values: collect(&|r| Some(r.keep_alive.done()?.value.req_per_sec())),
    });
    measures.push(Measure {
        name: "C: bulk MiB/s, one stream".to_string(),
        short: Some("bulk, 1 stream".to_string()),
        bar: "HAProxy 0.73, nginx 0.67",
        higher_is_better: true,
        relative: true,
        values: collect(&|r| Some(r.bulk_one.done()?.value.mib_per_sec())),
    });
    measures.push(Measure {
        name: format!("C: bulk MiB/s, {streams} streams"),
        short: Some(format!("bulk, {streams} streams")),
        bar: "—",
        higher_is_better: true,
        relative: true,
        values: collect(&|r| Some(r.bulk_many.done()?.value.mib_per_sec())),
    });
    measures.push(Measure {
        name: "C: proxy CPU per connection, µs".to_string(),
        short: None,
        bar: "35–39 µs",
        higher_is_better: false,
        relative: false,
        values: collect(&|r| cpu_per_connection(r.connect.done()?)),
    });
    measures.push(Measure {
        name: "C: memory per idle connection, KiB".to_string(),
        short: None,
        bar: "HAProxy 3.3, nginx 9.5",
        higher_is_better: false,
        relative: false,
        values: collect(&|r| {
            let m = r.idle.done()?;
            (r.subject != Subject::Direct).then(|| m.value.per_connection_kib())
        }),
    });
    measures.push(Measure {
        name: "C: memory kept after they close, KiB per connection".to_string(),
        short: None,
        bar: "HAProxy 3.3 (kept after close)",
        higher_is_better: false,
        relative: false,
        values: collect(&|r| {
            let m = r.idle.done()?;
            (r.subject != Subject::Direct).then(|| m.value.kept_kib())
        }),
    });
    measures
}

/// The load client's CPU per workload C measurement: where it nears 100%,
/// the client, not the subject, set the pace (and the ratio to direct says
/// little).
fn client_cpu_table(out: &mut String, c: &WorkloadC, streams: usize) {
    let _ = writeln!(
        out,
        "The load client's CPU during each measurement, as a share of one core (it is one \
         thread; near 100% it, not the subject, set the pace):\n"
    );
    let many = format!("bulk, {streams} streams");
    let mut table = Table::new(&[
        "subject",
        "connections",
        "keep-alive",
        "bulk, 1 stream",
        &many,
    ]);
    for row in &c.rows {
        let load = |o: &Outcome<LoadReport>| o.done().map_or("—".to_string(), client_cell);
        let bulk = |o: &Outcome<BulkReport>| o.done().map_or("—".to_string(), client_cell);
        table.row(vec![
            row.subject.to_string(),
            load(&row.connect),
            load(&row.keep_alive),
            bulk(&row.bulk_one),
            bulk(&row.bulk_many),
        ]);
    }
    out.push_str(&table.render());
    out.push('\n');
}

/// The proxy's CPU per connection in µs: its CPU time over the requests
/// (one connection each).
fn cpu_per_connection(m: &Measured<LoadReport>) -> Option<f64> {
    let cost = m.cost?;
    (m.value.requests > 0).then(|| cost.cpu.as_secs_f64() * 1e6 / m.value.requests as f64)
}

fn workload_c(out: &mut String, c: &WorkloadC, results: &Results) -> Option<Chart> {
    let sizes = &results.sizes;
    let _ = writeln!(
        out,
        "## Workload C: the cost of the proxy itself\n\n\
         No delay anywhere, so what is left is the proxy's own work, measured against the \
         direct connection (no proxy) in the same run. *Connections*: {} clients, a new \
         connection per request to backends that answer at once. *Keep-alive*: {} requests per \
         connection through an echo backend. *Bulk*: {} MiB each way in all (split over the \
         streams) through an echo backend, checksummed. *Idle*: {} connections, each after one echo round trip, held open; \
         the proxy's resident memory (summed over its processes) before, with them open, and \
         after they closed. *Proxy CPU per connection*: the proxy's CPU time (utime + stime from \
         /proc, all its processes) during the connection run, over the connections.\n",
        sizes.cost_clients,
        sizes.keep_alive_per_connection,
        sizes.bulk_bytes / (1024 * 1024),
        sizes.idle
    );
    let many = format!("bulk MiB/s, {} streams", sizes.bulk_streams);
    let mut table = Table::new(&[
        "subject",
        "connections/s",
        "p99 ms",
        "proxy CPU µs/conn",
        "keep-alive req/s",
        "bulk MiB/s, 1 stream",
        &many,
        "idle KiB/conn",
        "kept after close KiB/conn",
    ]);
    let mut notes = Notes::default();
    for row in &c.rows {
        let label = row.subject.to_string();
        notes.load(&format!("{label}, connections"), &row.connect);
        notes.load(&format!("{label}, keep-alive"), &row.keep_alive);
        notes.outcome(&format!("{label}, bulk 1 stream"), &row.bulk_one);
        notes.outcome(
            &format!("{label}, bulk {} streams", sizes.bulk_streams),
            &row.bulk_many,
        );
        notes.outcome(&format!("{label}, idle"), &row.idle);
        for (what, bulk) in [
            ("one stream", &row.bulk_one),
            ("several streams", &row.bulk_many),
        ] {
            if let Some(m) = bulk.done() {
                if !m.value.intact {
                    notes.0.push(format!(
                        "{label}, bulk {what}: **the bytes came back altered**"
                    ));
                }
            }
        }
        let connect = row.connect.done();
        let cell = |o: Option<String>, outcome: &str| o.unwrap_or_else(|| outcome.to_string());
        let idle = row.idle.done();
        let is_direct = row.subject == Subject::Direct;
        table.row(vec![
            label,
            cell(
                connect.map(|m| rate(m.value.req_per_sec())),
                not_run(&row.connect),
            ),
            connect.map_or("—".to_string(), |m| ms(m.value.percentile(99.0))),
            connect
                .and_then(cpu_per_connection)
                .map_or("—".to_string(), |us| format!("{us:.1}")),
            cell(
                row.keep_alive.done().map(|m| rate(m.value.req_per_sec())),
                not_run(&row.keep_alive),
            ),
            cell(
                row.bulk_one.done().map(|m| rate(m.value.mib_per_sec())),
                not_run(&row.bulk_one),
            ),
            cell(
                row.bulk_many.done().map(|m| rate(m.value.mib_per_sec())),
                not_run(&row.bulk_many),
            ),
            if is_direct {
                "— (no proxy)".to_string()
            } else {
                cell(
                    idle.map(|m| format!("{:.1}", m.value.per_connection_kib())),
                    not_run(&row.idle),
                )
            },
            if is_direct {
                "—".to_string()
            } else {
                idle.map_or("—".to_string(), |m| format!("{:.1}", m.value.kept_kib()))
            },
        ]);
    }
    out.push_str(&table.render());
    out.push_str(&notes.render());
    out.push('\n');
    client_cpu_table(out, c, sizes.bulk_streams);

    // Ratios to direct, ours and each peer's, beside issue 4's bar.
    let measures = cost_measures(c, results.a.as_ref(), sizes.bulk_streams);
    let subjects: Vec<Subject> = c
        .rows
        .iter()
        .map(|r| r.subject)
        .filter(|s| *s != Subject::Direct)
        .collect();
    let mut header = vec!["measure".to_string(), "issue 4's bar (peers)".to_string()];
    header.extend(subjects.iter().map(Subject::to_string));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header_refs);
    let mut chart_groups = Vec::new();
    for measure in &measures {
        let direct = measure.values.get(&Subject::Direct).copied();
        let mut cells = vec![
            if measure.relative {
                format!("{} (ratio to direct)", measure.name)
            } else {
                measure.name.clone()
            },
            measure.bar.to_string(),
        ];
        let mut bars = Vec::new();
        for subject in &subjects {
            let value = measure.values.get(subject).copied();
            if measure.relative {
                let r = ratio(value, direct);
                cells.push(show_ratio(r));
                bars.push(r);
            } else {
                cells.push(value.map_or("—".to_string(), |v| format!("{v:.1}")));
            }
        }
        table.row(cells);
        if let Some(short) = &measure.short {
            chart_groups.push((short.clone(), bars));
        }
    }
    let _ = writeln!(
        out,
        "### Ratios to direct, ours and the peers'\n\n\
         Rates as a ratio to the direct connection measured in the same run (1.00: as fast as \
         no proxy; higher is better); costs as absolute figures (lower is better). The bar is \
         what issue 4 measured for the peers on this machine class; our goal is to beat it.\n"
    );
    out.push_str(&table.render());
    out.push('\n');

    // Ours against theirs at the same thread count.
    let pairs: Vec<(Subject, Subject)> = subjects
        .iter()
        .filter_map(|&theirs| match theirs {
            Subject::Peer(peer) => Some((Subject::Epoll(peer.threads), theirs)),
            _ => None,
        })
        .filter(|(ours, _)| subjects.contains(ours))
        .collect();
    if !pairs.is_empty() {
        let _ = writeln!(
            out,
            "### Ours against theirs, thread for thread\n\n\
             Our epoll proxy with N workers divided by the peer with N threads or workers. For a \
             rate, above 1 means we are faster; for a cost, below 1 means we spend less.\n"
        );
        let mut header = vec!["measure".to_string(), "we win when".to_string()];
        header.extend(pairs.iter().map(|(o, t)| format!("{o} / {t}")));
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = Table::new(&header_refs);
        for measure in &measures {
            let mut cells = vec![
                measure.name.clone(),
                if measure.higher_is_better {
                    "> 1"
                } else {
                    "< 1"
                }
                .to_string(),
            ];
            for (ours, theirs) in &pairs {
                cells.push(show_ratio(ratio(
                    measure.values.get(ours).copied(),
                    measure.values.get(theirs).copied(),
                )));
            }
            table.row(cells);
        }
        out.push_str(&table.render());
        out.push('\n');
    }
    if chart_groups.is_empty() || subjects.is_empty() {
        return None;
    }
    let names: Vec<String> = subjects.iter().map(Subject::to_string).collect();
    let chart = charts::workload_c(&names, chart_groups);
    embed(out, &chart);
    Some(chart)
}

fn method(out: &mut String, results: &Results) {
    let sizes = &results.sizes;
    let _ = writeln!(
        out,
        "## How it was measured\n\n\
         - Everything on 127.0.0.1: the load client and the fixture backends are threads of the \
         harness (`target/release/bench`); each proxy is a child process, started fresh for each \
         measurement on a free port and stopped with SIGTERM after it.\n\
         - The load client is one event loop on one thread (our runtime): closed loop, each \
         client sends its next request when the previous one finished. Timed runs last {:.1} s; \
         a request taking over {:.0} s counts as an error. Percentiles are exact (nearest rank \
         over every recorded latency).\n\
         - Proxy CPU: utime + stime of the proxy's process tree from /proc, before and after. \
         Peak RSS: VmHWM summed over the tree (for one process, its peak; for nginx's master \
         and workers, an upper bound).\n\
         - Timed rows whose requests would each wait over {:.1} s in the queue (a small pool \
         under many clients) are skipped: their bound says what they would show.\n\
         - The peers run with generated configurations (backend/src/bench/peers.rs): HAProxy \
         `mode tcp`, `balance roundrobin`, `timeout client/server 10m`; nginx `stream` with \
         `proxy_half_close on` (without it nginx cuts a half-closed request) and `backlog=4096` \
         (as ours and HAProxy's). Nothing else is tuned, for any of them.\n\
         - One run on a shared, noisy 2-core machine: differences of a few percent are noise.\n",
        sizes.run_for.as_secs_f64(),
        sizes.timeout.as_secs_f64(),
        sizes.max_queue_wait.as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpretation_is_carried_over_and_the_placeholder_is_not() {
        let fresh = format!("# B\n\n{INTERPRETATION}\n\n{PLACEHOLDER}\n\n## Workload A\n");
        assert_eq!(carry_interpretation(&fresh), None);
        let written = format!(
            "# B\n\n{INTERPRETATION}\n\nWe win at 1,000 clients.\n\n### Why\n\nTasks.\n\n## Workload A\nx\n"
        );
        assert_eq!(
            carry_interpretation(&written).as_deref(),
            Some("We win at 1,000 clients.\n\n### Why\n\nTasks.")
        );
        let last = format!("{INTERPRETATION}\nAt the end.\n");
        assert_eq!(carry_interpretation(&last).as_deref(), Some("At the end."));
        assert_eq!(carry_interpretation("# nothing here\n"), None);
    }

    #[test]
    fn tables_escape_pipes_and_align_numbers() {
        let mut table = Table::new(&["mode", "req/s"]);
        table.row(vec!["a|b".to_string(), "1".to_string()]);
        assert_eq!(
            table.render(),
            "| mode | req/s |\n|:---|---:|\n| a\\|b | 1 |\n"
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(1000.0), "1,000");
        assert_eq!(rate(999.94), "999.9");
        assert_eq!(rate(f64::INFINITY), "—");
        assert_eq!(ms(Some(Duration::from_micros(52_810))), "52.8");
        assert_eq!(ms(Some(Duration::from_millis(1600))), "1600");
        assert_eq!(ms(None), "—");
        assert_eq!(show_ratio(ratio(Some(3.0), Some(4.0))), "0.75");
        assert_eq!(show_ratio(ratio(Some(3.0), Some(0.0))), "—");
    }

    #[test]
    fn the_seed_rows_match_the_seed_table() {
        assert_eq!(seed_row(Subject::Pool(64)), Some((583.09, 1.72)));
        assert_eq!(seed_row(Subject::Epoll(1)), Some((696.86, 1.44)));
        assert_eq!(seed_row(Subject::Epoll(2)), None);
        assert_eq!(seed_row(Subject::Direct), None);
        // The seed's "avg latency" is 1000 / req/s, to the rounding.
        for (_, rate, ms) in SEED_POOL {
            assert!((1000.0 / rate - ms).abs() < 0.02, "{rate} {ms}");
        }
    }
}
