//! The report's workload C: the cost of the proxy itself, and the two
//! comparisons that judge it: every subject's ratio to the direct
//! connection beside the bar the peers set, and ours against theirs at the
//! same thread count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::load::{BulkReport, LoadReport};

use super::charts::{self, Chart};
use super::http_report;
use super::markdown::{
    Notes, Table, client_cell, embed, ms, not_run, rate, ratio, runs_cell, runs_intro, show_ratio,
};
use super::rank;
use super::results::{
    CostRow, HttpKeepAlive, IdleMemory, Measured, Outcome, Results, WorkloadA, WorkloadC,
};
use crate::bench::sizes::Sizes;
use crate::bench::subject::Subject;

/// One workload C measure: a name, the peers' bar for it, and a value per subject.
struct Measure {
    name: String,
    /// The label in the chart of workload C (None: not in the chart).
    short: Option<String>,
    bar: &'static str,
    /// Higher is better (a rate), or lower is (a cost).
    higher_is_better: bool,
    /// A ratio to direct (a rate), or an absolute figure (a cost).
    relative: bool,
    /// Decimals of an absolute figure: enough to tell apart what is compared.
    decimals: usize,
    values: Values,
    /// Every run's value, for the subjects whose runs all finished (a
    /// measure taken once has none): what the rank test compares.
    runs: Runs,
}

impl Measure {
    /// A rate, shown as a ratio to direct (higher is better); `short` is
    /// its label in workload C's chart.
    fn rate(name: String, short: Option<&str>, bar: &'static str, values: Values) -> Measure {
        Measure {
            name,
            short: short.map(str::to_string),
            bar,
            higher_is_better: true,
            relative: true,
            decimals: 2,
            values,
            runs: Runs::new(),
        }
    }

    /// The same measure with every run of each subject beside its median.
    fn with_runs(self, runs: Runs) -> Measure {
        Measure { runs, ..self }
    }

    /// A cost, shown as an absolute figure with `decimals` (lower is better).
    fn cost(name: &str, bar: &'static str, decimals: usize, values: Values) -> Measure {
        Measure {
            name: name.to_string(),
            short: None,
            bar,
            higher_is_better: false,
            relative: false,
            decimals,
            values,
            runs: Runs::new(),
        }
    }
}

/// A value per subject.
type Values = BTreeMap<Subject, f64>;

/// Every run's value per subject.
type Runs = BTreeMap<Subject, Vec<f64>>;

/// A row's runs, if it was measured more than once and every run finished
/// (a failed run already fails the row; the test is for rates that exist).
fn finished(runs: &[Option<f64>]) -> Option<Vec<f64>> {
    let all: Vec<f64> = runs.iter().copied().collect::<Option<_>>()?;
    (all.len() > 1).then_some(all)
}

/// The [`finished`] runs of each row, by subject: `of` says whose they are
/// and which of the row's runs (any table's rows: A's, C's, wrk's).
fn runs_of<R>(rows: &[R], of: impl Fn(&R) -> (Subject, &[Option<f64>])) -> Runs {
    rows.iter()
        .filter_map(|row| {
            let (subject, runs) = of(row);
            Some((subject, finished(runs)?))
        })
        .collect()
}

/// Workload A's rates at each concurrency, for the ratio tables.
fn a_measures(a: &WorkloadA) -> Vec<Measure> {
    a.by_clients
        .iter()
        .map(|(clients, rows)| {
            let bar = if *clients >= 1000 {
                "HAProxy 0.74 / 0.81, nginx 0.76 / 0.85"
            } else {
                "0.93–1.00"
            };
            let values = rows
                .iter()
                .filter_map(|r| Some((r.subject, r.report()?.req_per_sec())))
                .collect();
            let runs = runs_of(rows, |r| (r.subject, &r.runs));
            let name = format!(
                "A: req/s, {clients} clients, {} ms backend",
                a.delay.as_millis()
            );
            Measure::rate(name, None, bar, values).with_runs(runs)
        })
        .collect()
}

/// `f` of each of workload C's rows, where it has a value.
fn per_subject(c: &WorkloadC, f: impl Fn(&CostRow) -> Option<f64>) -> Values {
    c.rows
        .iter()
        .filter_map(|row| Some((row.subject, f(row)?)))
        .collect()
}

/// The runs of each of workload C's rows that `f` names.
fn runs_per_subject(c: &WorkloadC, f: impl Fn(&CostRow) -> &[Option<f64>]) -> Runs {
    runs_of(&c.rows, |row| (row.subject, f(row)))
}

/// Workload C's rates, the wrk rows' among them.
fn c_rates(c: &WorkloadC, http: Option<&HttpKeepAlive>, streams: usize) -> Vec<Measure> {
    let wrk: Values = http.map_or_else(Values::new, |http| {
        http.rows
            .iter()
            .filter_map(|r| Some((r.subject, r.outcome.done()?.value.req_per_sec)))
            .collect()
    });
    let wrk_runs = http.map_or_else(Runs::new, |http| {
        runs_of(&http.rows, |r| (r.subject, &r.runs))
    });
    vec![
        Measure::rate(
            "C: connections/s (a new connection per request, no delay)".to_string(),
            Some("connections/s"),
            "0.46–0.57",
            per_subject(c, |r| Some(r.connect.done()?.value.req_per_sec())),
        )
        .with_runs(runs_per_subject(c, |r| &r.connect_runs)),
        Measure::rate(
            "C: keep-alive requests/s (echo backend)".to_string(),
            Some("keep-alive req/s"),
            "— (the bar is HTTP through wrk: the next row)",
            per_subject(c, |r| Some(r.keep_alive.done()?.value.req_per_sec())),
        )
        .with_runs(runs_per_subject(c, |r| &r.keep_alive_runs)),
        Measure::rate(
            "C: keep-alive HTTP requests/s (wrk, nginx static file)".to_string(),
            Some("HTTP keep-alive (wrk)"),
            "0.78–0.80",
            wrk,
        )
        .with_runs(wrk_runs),
        Measure::rate(
            "C: bulk MiB/s, one stream".to_string(),
            Some("bulk, 1 stream"),
            "HAProxy 0.73, nginx 0.67",
            per_subject(c, |r| Some(r.bulk_one.done()?.value.mib_per_sec())),
        )
        .with_runs(runs_per_subject(c, |r| &r.bulk_one_runs)),
        Measure::rate(
            format!("C: bulk MiB/s, {streams} streams"),
            Some(&format!("bulk, {streams} streams")),
            "—",
            per_subject(c, |r| Some(r.bulk_many.done()?.value.mib_per_sec())),
        )
        .with_runs(runs_per_subject(c, |r| &r.bulk_many_runs)),
    ]
}

/// Decimals of every CPU-per-GiB figure: whether splice costs at most
/// half of the copy path is a question these figures answer, and with one decimal 0.4 against
/// 0.7 cannot say.
const GIB_DECIMALS: usize = 2;

/// Workload C's costs: CPU per connection, memory per idle connection.
fn c_costs(c: &WorkloadC) -> Vec<Measure> {
    let idle = |f: fn(&IdleMemory) -> f64| {
        per_subject(c, move |r| {
            let m = r.idle.done()?;
            (r.subject != Subject::Direct).then(|| f(&m.value))
        })
    };
    vec![
        Measure::cost(
            "C: proxy CPU per connection, µs",
            "35–39 µs",
            1,
            per_subject(c, |r| r.connect.done()?.cpu_per_request_us()),
        )
        .with_runs(runs_per_subject(c, |r| &r.connect_cpu_runs)),
        Measure::cost(
            "C: proxy CPU per keep-alive request, µs",
            "—",
            1,
            per_subject(c, |r| r.keep_alive.done()?.cpu_per_request_us()),
        )
        .with_runs(runs_per_subject(c, |r| &r.keep_alive_cpu_runs)),
        Measure::cost(
            "C: TCP segments per connection, machine-wide",
            "—",
            1,
            per_subject(c, |r| segments_per_connection(r.connect.done()?)),
        ),
        Measure::cost(
            "C: proxy CPU per GiB relayed (both ways), bulk 1 stream, s",
            "—",
            GIB_DECIMALS,
            per_subject(c, |r| cpu_per_gib(r.bulk_one.done()?)),
        ),
        Measure::cost(
            "C: proxy CPU per GiB relayed (both ways), bulk streams, s",
            "—",
            GIB_DECIMALS,
            per_subject(c, |r| cpu_per_gib(r.bulk_many.done()?)),
        ),
        Measure::cost(
            "C: memory per idle connection, KiB",
            "HAProxy 3.3, nginx 9.5",
            1,
            idle(IdleMemory::per_connection_kib),
        ),
        Measure::cost(
            "C: memory kept after they close, KiB per connection",
            "HAProxy 3.3 (kept after close)",
            1,
            idle(IdleMemory::kept_kib),
        ),
    ]
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

/// The whole machine's CPU during each bulk row's run, for every subject,
/// direct included: where direct already keeps the cores busy, no proxy
/// can reach direct's rate (its relay needs CPU the machine has not got),
/// and that bounds every ratio to direct. `cores` is the fallback count
/// when /proc/stat gave none.
fn machine_table(out: &mut String, c: &WorkloadC, streams: usize, cores: usize) {
    let cpus = c
        .rows
        .iter()
        .flat_map(|r| [&r.bulk_one, &r.bulk_many])
        .find_map(|o| Some(o.done()?.machine?.cpus))
        .unwrap_or(cores);
    let _ = writeln!(
        out,
        "The whole machine's CPU during each bulk run (the first `cpu` line of /proc/stat \
         before and after it, over its wall time): *busy* is user + nice + system + irq + \
         softirq, in cores of the {cpus} the kernel counts: the client's, the backends', the \
         subject's and anyone else's on the machine together. *Steal* (time this VM wanted a \
         CPU and the host gave it to another) is not in busy, and shown on its own. The kernel \
         counts in clock ticks (1/100 s per CPU), so a run of under a second can read a few \
         hundredths off, even above {cpus}.00. Near \
         {cpus}.00 busy for direct, the bytes alone already fill the machine, and a proxy, \
         whose relay needs cores too, cannot come near direct's rate.\n"
    );
    let mut header = vec!["measure".to_string()];
    header.extend(c.rows.iter().map(|r| r.subject.to_string()));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header_refs);
    let of = format!("cores (of {cpus})");
    type Figure = fn(&Measured<BulkReport>) -> Option<f64>;
    let figures: [(&str, Figure, &str); 3] = [
        ("machine busy", Measured::machine_busy_cores, &of),
        ("machine steal", Measured::machine_steal_cores, &of),
        (
            "machine CPU per GiB relayed (both ways)",
            machine_per_gib,
            "s",
        ),
    ];
    let many = format!("bulk {streams} streams");
    for (what, figure, unit) in figures {
        for (during, many) in [("bulk 1 stream", false), (many.as_str(), true)] {
            let mut cells = vec![format!("C: {what} during {during}, {unit}")];
            cells.extend(c.rows.iter().map(|r| {
                let bulk = if many { &r.bulk_many } else { &r.bulk_one };
                let value = bulk.done().and_then(figure);
                value.map_or("—".to_string(), |v| format!("{v:.GIB_DECIMALS$}"))
            }));
            table.row(cells);
        }
    }
    out.push_str(&table.render());
    out.push('\n');
}

/// The proxy's CPU seconds per GiB it relayed, counting both directions
/// (the echo sends each byte back): what splice(2) is meant to cut.
fn cpu_per_gib(m: &Measured<BulkReport>) -> Option<f64> {
    per_gib(m, m.cost?.cpu)
}

/// The whole machine's busy CPU seconds per GiB relayed (procstat.rs): the
/// client's, the backends' and the proxy's together; direct's is what
/// moving the bytes costs without a proxy.
fn machine_per_gib(m: &Measured<BulkReport>) -> Option<f64> {
    per_gib(m, m.machine?.busy)
}

/// `cpu` over the GiB a bulk run moved both ways, if its bytes came back
/// intact (a broken run's CPU is no price of a GiB).
fn per_gib(m: &Measured<BulkReport>, cpu: Duration) -> Option<f64> {
    let gib = 2.0 * m.value.bytes_each_way as f64 / (1u64 << 30) as f64;
    (m.value.intact && gib > 0.0).then(|| cpu.as_secs_f64() / gib)
}

/// TCP segments the machine sent per connection (segments.rs): the load
/// client's, the subject's and the backends' together.
fn segments_per_connection(m: &Measured<LoadReport>) -> Option<f64> {
    let segments = m.segments?;
    (m.value.requests > 0).then(|| segments as f64 / m.value.requests as f64)
}

/// Workload C's section: its table, the wrk table, the client's CPU, the
/// ratio tables and the chart (returned, for the caller to write).
pub(super) fn workload_c(out: &mut String, c: &WorkloadC, results: &Results) -> Option<Chart> {
    let sizes = &results.sizes;
    intro(out, sizes);
    cost_table(out, c, results.http.as_ref(), sizes.bulk_streams);
    runs_table(out, c, sizes.repetitions, sizes.bulk_streams);
    if let Some(http) = &results.http {
        http_report::section(out, http, sizes, "###");
    }
    client_cpu_table(out, c, sizes.bulk_streams);
    machine_table(out, c, sizes.bulk_streams, results.machine.cores);
    let mut measures = results.a.as_ref().map_or_else(Vec::new, a_measures);
    measures.extend(c_rates(c, results.http.as_ref(), sizes.bulk_streams));
    measures.extend(c_costs(c));
    let subjects: Vec<Subject> = c
        .rows
        .iter()
        .map(|r| r.subject)
        .filter(|s| *s != Subject::Direct)
        .collect();
    let chart_groups = ratios_table(out, &measures, &subjects, sizes.repetitions);
    versus_table(out, &measures, &subjects);
    overhead_table(out, c);
    if chart_groups.is_empty() || subjects.is_empty() {
        return None;
    }
    let names: Vec<String> = subjects.iter().map(Subject::to_string).collect();
    let chart = charts::workload_c(&names, chart_groups);
    embed(out, &chart);
    Some(chart)
}

/// What workload C measures, and how.
fn intro(out: &mut String, sizes: &Sizes) {
    let _ = writeln!(
        out,
        "## Workload C: the cost of the proxy itself\n\n\
         No delay anywhere, so what is left is the proxy's own work, measured against the \
         direct connection (no proxy) in the same run. *Connections*: {} clients, a new \
         connection per request to backends that answer at once. *Keep-alive*: {} requests per \
         connection through an echo backend. *HTTP (wrk)*: the same keep-alive as HTTP, wrk to \
         nginx static backends (below). *Bulk*: {} MiB each way in all (split over the \
         streams) through an echo backend, checksummed. *Idle*: {} connections, each after one \
         echo round trip, held open; the proxy's resident memory (summed over its processes) \
         before, with them open, and after they closed. *Proxy CPU per connection*: the proxy's \
         CPU time (utime + stime from /proc, all its processes) during the connection run, over \
         the connections. *TCP segments per connection*: the segments the whole machine sent \
         during that run (the kernel's `OutSegs`, /proc/net/snmp), over the connections; on \
         loopback each is counted once, by its sender, so this is the client's, the subject's and \
         the backends' together: about 10 direct, 20 for a proxy that merges nothing. \
         *Splice*: `epoll N` runs the default `splice auto` (a bulk stream moves by splice(2) \
         after its first 64 KiB read), `epoll N, splice off` copies every byte; HAProxy runs \
         again with `option splice-auto`. *Proxy CPU per GiB*: the proxy's CPU time during a \
         bulk run over the bytes it relayed, both ways counted. {}\n",
        sizes.cost_clients,
        sizes.keep_alive_per_connection,
        sizes.bulk_bytes / (1024 * 1024),
        sizes.idle,
        runs_said(sizes.repetitions)
    );
}

/// How often each measurement of workload C ran, for its introduction.
fn runs_said(repetitions: usize) -> String {
    if repetitions < 2 {
        return "*Runs*: one per subject and measurement, each on a fresh process.".to_string();
    }
    format!(
        "*Runs*: the three rates (connections, keep-alive, HTTP) and the two bulk rows (by \
         MiB/s) are each the median of {repetitions} runs per subject, interleaved: round 1 \
         measures every subject once, in the table's order, then round 2, and so on, so that \
         the machine's drift spreads over all of them; each run is a fresh process. A row shows \
         its median run whole (the latency and CPU beside a rate, a bulk row's proxy, client \
         and machine CPU, are that run's), every ratio to direct divides by direct's median, \
         and a failed run fails the row, as does a bulk run whose bytes did not all come back \
         intact (the row is then that run). Idle: one run, in round 1."
    )
}

/// Every run of the connection and keep-alive rates and of the bulk rows
/// (wrk's are in its own table), so that a reader sees how far apart they
/// are.
fn runs_table(out: &mut String, c: &WorkloadC, repetitions: usize, streams: usize) {
    if repetitions < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        runs_intro(
            repetitions,
            "rate and bulk row (and the proxy's CPU in each connection and keep-alive run)",
        )
    );
    let many = format!("bulk MiB/s, {streams} streams");
    let mut table = Table::new(&[
        "subject",
        "connections/s",
        "keep-alive req/s",
        "bulk MiB/s, 1 stream",
        &many,
        "proxy CPU µs/conn",
        "proxy CPU µs/keep-alive request",
    ]);
    // Direct has no proxy, so no CPU figure in any run: a dash, not "failed".
    let cpu = |runs: &[Option<f64>]| {
        if runs.iter().all(Option::is_none) {
            "—".to_string()
        } else {
            runs_cell(runs)
        }
    };
    for row in &c.rows {
        table.row(vec![
            row.subject.to_string(),
            runs_cell(&row.connect_runs),
            runs_cell(&row.keep_alive_runs),
            runs_cell(&row.bulk_one_runs),
            runs_cell(&row.bulk_many_runs),
            cpu(&row.connect_cpu_runs),
            cpu(&row.keep_alive_cpu_runs),
        ]);
    }
    out.push_str(&table.render());
    out.push('\n');
}

/// Workload C's main table: a row per subject, a column per measurement.
fn cost_table(out: &mut String, c: &WorkloadC, http: Option<&HttpKeepAlive>, streams: usize) {
    let many = format!("bulk MiB/s, {streams} streams");
    let mut table = Table::new(&[
        "subject",
        "connections/s",
        "p99 ms",
        "proxy CPU µs/conn",
        "TCP segments/conn",
        "keep-alive req/s",
        "HTTP req/s (wrk)",
        "bulk MiB/s, 1 stream",
        &many,
        "idle KiB/conn",
        "kept after close KiB/conn",
    ]);
    let mut notes = Notes::default();
    for row in &c.rows {
        cost_notes(&mut notes, row, streams);
        table.row(cost_cells(row, http));
    }
    out.push_str(&table.render());
    out.push_str(&notes.render());
    out.push('\n');
}

/// Why a measurement of `row` is missing, its errors, bulk bytes that did
/// not come back whole.
fn cost_notes(notes: &mut Notes, row: &CostRow, streams: usize) {
    let label = row.subject.to_string();
    notes.load(&format!("{label}, connections"), &row.connect);
    notes.load(&format!("{label}, keep-alive"), &row.keep_alive);
    let one = format!("{label}, bulk 1 stream");
    let many = format!("{label}, bulk {streams} streams");
    notes.outcome(&one, &row.bulk_one);
    notes.outcome(&many, &row.bulk_many);
    notes.outcome(&format!("{label}, idle"), &row.idle);
    for (what, bulk) in [(one, &row.bulk_one), (many, &row.bulk_many)] {
        if let Some(note) = bulk.done().and_then(|m| not_whole(&m.value)) {
            notes.0.push(format!("{what}: {note}"));
        }
    }
}

/// What went wrong with a bulk run's bytes, if anything: a stream that
/// failed (a reset, say) did not bring every byte back; with no error,
/// the bytes came back but differed.
fn not_whole(report: &BulkReport) -> Option<String> {
    match (&report.first_error, report.intact) {
        (_, true) => None,
        (Some(why), false) => Some(format!("**the bytes did not all come back**: {why}")),
        (None, false) => Some("**the bytes came back altered**".to_string()),
    }
}

/// The cells of `row` in workload C's main table (the wrk rate from `http`).
fn cost_cells(row: &CostRow, http: Option<&HttpKeepAlive>) -> Vec<String> {
    let cell = |o: Option<String>, outcome: &str| o.unwrap_or_else(|| outcome.to_string());
    let connect = row.connect.done();
    let idle = row.idle.done();
    let is_direct = row.subject == Subject::Direct;
    let wrk = http.and_then(|h| h.report(row.subject));
    vec![
        row.subject.to_string(),
        cell(
            connect.map(|m| rate(m.value.req_per_sec())),
            not_run(&row.connect),
        ),
        connect.map_or("—".to_string(), |m| ms(m.value.percentile(99.0))),
        connect
            .and_then(Measured::cpu_per_request_us)
            .map_or("—".to_string(), |us| format!("{us:.1}")),
        connect
            .and_then(segments_per_connection)
            .map_or("—".to_string(), |n| format!("{n:.1}")),
        cell(
            row.keep_alive.done().map(|m| rate(m.value.req_per_sec())),
            not_run(&row.keep_alive),
        ),
        wrk.map_or("—".to_string(), |m| rate(m.value.req_per_sec)),
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
        match (is_direct, idle) {
            (false, Some(m)) => format!("{:.1}", m.value.kept_kib()),
            _ => "—".to_string(),
        },
    ]
}

/// Ratios to direct, ours and each peer's, beside the peers' bar; returns
/// the chart's groups (the rates that have a short label).
fn ratios_table(
    out: &mut String,
    measures: &[Measure],
    subjects: &[Subject],
    repetitions: usize,
) -> Vec<(String, Vec<Option<f64>>)> {
    let mut header = vec!["measure".to_string(), "the peers' bar".to_string()];
    header.extend(subjects.iter().map(Subject::to_string));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header_refs);
    let mut chart_groups = Vec::new();
    for measure in measures {
        let direct = measure.values.get(&Subject::Direct).copied();
        let name = if measure.relative {
            format!("{} (ratio to direct)", measure.name)
        } else {
            measure.name.clone()
        };
        let mut cells = vec![name, measure.bar.to_string()];
        let mut bars = Vec::new();
        for subject in subjects {
            let value = measure.values.get(subject).copied();
            if measure.relative {
                let r = ratio(value, direct);
                cells.push(show_ratio(r));
                bars.push(r);
            } else {
                let decimals = measure.decimals;
                cells.push(value.map_or("—".to_string(), |v| format!("{v:.decimals$}")));
            }
        }
        table.row(cells);
        if let Some(short) = &measure.short {
            chart_groups.push((short.clone(), bars));
        }
    }
    let medians = if repetitions > 1 {
        format!(
            "; for C's connections, keep-alive, HTTP and bulk, each subject's median of \
             {repetitions} runs over direct's"
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "### Ratios to direct, ours and the peers'\n\n\
         Rates as a ratio to the direct connection measured in the same run (1.00: as fast as \
         no proxy; higher is better){medians}. Costs as absolute figures (lower is better). The \
         bar is what HAProxy and nginx reached when first measured on this machine class; our \
         goal is to beat it.\n"
    );
    out.push_str(&table.render());
    out.push('\n');
    chart_groups
}

/// Ours against theirs at the same thread count.
fn versus_table(out: &mut String, measures: &[Measure], subjects: &[Subject]) {
    let pairs: Vec<(Subject, Subject)> = subjects
        .iter()
        .filter_map(|&theirs| match theirs {
            Subject::Peer(peer) => Some((Subject::Epoll(peer.threads), theirs)),
            _ => None,
        })
        .filter(|(ours, _)| subjects.contains(ours))
        .collect();
    if pairs.is_empty() {
        return;
    }
    let repeated = measures.iter().map(|m| m.runs.len()).max().unwrap_or(0) > 0;
    let _ = writeln!(
        out,
        "### Ours against theirs, thread for thread\n\n\
         Our epoll proxy with N workers divided by the peer with N threads or workers. For a \
         rate, above 1 means we are faster; for a cost, below 1 means we spend less.{}\n",
        if repeated { RANK_NOTE } else { "" }
    );
    let mut header = vec!["measure".to_string(), "we win when".to_string()];
    header.extend(pairs.iter().map(|(o, t)| format!("{o} / {t}")));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(&header_refs);
    for measure in measures {
        let when = if measure.higher_is_better {
            "> 1"
        } else {
            "< 1"
        };
        let mut cells = vec![measure.name.clone(), when.to_string()];
        cells.extend(
            pairs
                .iter()
                .map(|&(ours, theirs)| versus_cell(measure, ours, theirs)),
        );
        table.row(cells);
    }
    out.push_str(&table.render());
    out.push('\n');
}

/// What the word beside a repeated rate's ratio means.
const RANK_NOTE: &str = " Beside a rate measured in several runs, what those runs say (rank.rs): \
     *ahead* or *behind* when, of every way to shuffle the two subjects' runs between them, \
     fewer than 5% would leave one as far ahead as it is (the exact one-sided rank-sum test); \
     *level* when the runs cannot tell the two apart, whatever their medians' ratio.";

/// One cell of the table: `ours` over `theirs`, and the rank test's
/// verdict on their runs where the measure has them.
fn versus_cell(measure: &Measure, ours: Subject, theirs: Subject) -> String {
    let shown = show_ratio(ratio(
        measure.values.get(&ours).copied(),
        measure.values.get(&theirs).copied(),
    ));
    let verdict = match (measure.runs.get(&ours), measure.runs.get(&theirs)) {
        (Some(o), Some(t)) => rank::verdict(o, t, measure.higher_is_better),
        _ => None,
    };
    match verdict {
        Some(verdict) => format!("{shown} ({})", verdict.word()),
        None => shown,
    }
}

/// The goal for the runtime: at most this much more proxy CPU per
/// connection than the hand-written loop: the price of the runtime's
/// tasks, wakers and timers, kept within noise.
pub const OVERHEAD_GOAL: f64 = 1.05;

/// What the runtime costs over the hand-written loop: `epoll 1` against
/// `states`, the same work on one thread each, from the same run.
fn overhead_table(out: &mut String, c: &WorkloadC) {
    let find = |subject| c.rows.iter().find(|r| r.subject == subject);
    let (Some(epoll), Some(states)) = (find(Subject::Epoll(1)), find(Subject::States)) else {
        return;
    };
    let _ = writeln!(
        out,
        "### What the runtime costs over the hand-written loop\n\n\
         `epoll 1` (our runtime: tasks, wakers, edge-triggered readiness, timers) against \
         `states` (one level-triggered loop and a state machine per connection written by hand, \
         nothing between it and the kernel: docs/STATES.md), on the same backends in the same \
         run. Above 1, the runtime costs that much more; the goal is at most \
         {OVERHEAD_GOAL:.2} in proxy CPU per connection.\n"
    );
    let cpu = |o: &Outcome<LoadReport>| o.done().and_then(Measured::cpu_per_request_us);
    let per_second = |o: &Outcome<LoadReport>| o.done().map(|m| m.value.req_per_sec());
    let rows = [
        (
            "proxy CPU per connection, µs",
            cpu(&epoll.connect),
            cpu(&states.connect),
        ),
        (
            "proxy CPU per keep-alive request, µs",
            cpu(&epoll.keep_alive),
            cpu(&states.keep_alive),
        ),
        (
            "connections/s",
            per_second(&epoll.connect),
            per_second(&states.connect),
        ),
        (
            "keep-alive requests/s",
            per_second(&epoll.keep_alive),
            per_second(&states.keep_alive),
        ),
    ];
    let mut table = Table::new(&["measure", "epoll 1", "states", "epoll 1 / states"]);
    for (name, ours, by_hand) in rows {
        let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        table.row(vec![
            name.to_string(),
            cell(ours),
            cell(by_hand),
            show_ratio(ratio(ours, by_hand)),
        ]);
    }
    out.push_str(&table.render());
    let [per_connection, per_request] = [&rows[0], &rows[1]].map(|r| ratio(r.1, r.2));
    let _ = writeln!(
        out,
        "\n**Overhead ratio**, epoll 1 over states, proxy CPU per connection: {} (goal: at most \
         {OVERHEAD_GOAL:.2}); per keep-alive request: {}.\n",
        show_ratio(per_connection),
        show_ratio(per_request)
    );
}

#[cfg(test)]
mod tests {
    use crate::process::procstat::MachineCpu;

    use super::super::results::Cost;

    use super::*;

    fn skipped<T>() -> Outcome<T> {
        Outcome::Skipped("not here".to_string())
    }

    fn row(connect_runs: Vec<Option<f64>>) -> CostRow {
        CostRow {
            subject: Subject::Epoll(1),
            connect: skipped(),
            keep_alive: skipped(),
            bulk_one: skipped(),
            bulk_many: skipped(),
            idle: skipped(),
            connect_runs,
            keep_alive_runs: vec![Some(50_000.0), None, Some(40_000.0)],
            bulk_one_runs: vec![Some(520.0), Some(480.0), Some(500.0)],
            bulk_many_runs: vec![Some(700.0), None, Some(650.0)],
            connect_cpu_runs: Vec::new(),
            keep_alive_cpu_runs: Vec::new(),
        }
    }

    /// A bulk run of 512 MiB each way (1 GiB relayed) in 2 s, intact or not.
    fn bulk(intact: bool, proxy_ms: u64, busy_ms: u64) -> Outcome<BulkReport> {
        Outcome::Done(Measured {
            value: BulkReport {
                streams: 1,
                bytes_each_way: 512 << 20,
                elapsed: Duration::from_secs(2),
                intact,
                client_cpu: Duration::ZERO,
                first_error: None,
            },
            cost: (proxy_ms > 0).then_some(Cost {
                cpu: Duration::from_millis(proxy_ms),
                peak_kib: 0,
            }),
            client_cpu: Duration::ZERO,
            wall: Duration::from_secs(2),
            segments: None,
            machine: Some(MachineCpu {
                busy: Duration::from_millis(busy_ms),
                steal: Duration::from_millis(40),
                cpus: 2,
            }),
            note: None,
        })
    }

    #[test]
    fn the_runs_are_listed_only_when_there_are_several() {
        let mut epoll = row(vec![Some(23_100.0), Some(24_000.0), Some(22_800.0)]);
        epoll.connect_cpu_runs = vec![Some(104.0), Some(101.0), Some(103.0)];
        epoll.keep_alive_cpu_runs = vec![None; 3];
        let c = WorkloadC { rows: vec![epoll] };
        let mut out = String::new();
        runs_table(&mut out, &c, 3, 4);
        assert!(
            out.starts_with("The 3 runs of each rate and bulk row"),
            "{out}"
        );
        assert!(
            out.contains("| bulk MiB/s, 1 stream | bulk MiB/s, 4 streams |"),
            "{out}"
        );
        assert!(
            out.contains(
                "| epoll 1 | 23,100 / 24,000 / 22,800 (±2.6%) | 50,000 / failed / 40,000 \
                 | 520.0 / 480.0 / 500.0 (±4.0%) | 700.0 / failed / 650.0 \
                 | 104.0 / 101.0 / 103.0 (±1.5%) | — |"
            ),
            "{out}"
        );
        let mut once = String::new();
        runs_table(&mut once, &c, 1, 4);
        assert_eq!(once, "");
        let said = runs_said(5);
        assert!(said.contains("median of 5 runs"), "{said}");
        assert!(said.contains("the two bulk rows"), "{said}");
        assert!(said.contains("Idle: one run"), "{said}");
        assert!(runs_said(1).contains("one per subject"));
    }

    #[test]
    fn ours_against_theirs_says_what_the_runs_can_tell() {
        use crate::bench::peers::{Peer, PeerKind};
        let nginx = Subject::Peer(Peer {
            kind: PeerKind::Nginx,
            threads: 2,
        });
        let mut ours = row(vec![
            Some(11.0),
            Some(12.0),
            Some(13.0),
            Some(14.0),
            Some(15.0),
        ]);
        ours.subject = Subject::Epoll(2);
        // Keep-alive: the medians 0.90 apart, the runs overlapping.
        ours.keep_alive_runs = vec![Some(9.0), Some(4.0), Some(10.0), Some(12.0), Some(8.0)];
        let mut theirs = row(vec![Some(1.0), Some(2.0), Some(3.0), Some(4.0), Some(5.0)]);
        theirs.subject = nginx;
        theirs.keep_alive_runs = vec![Some(11.0), Some(7.0), Some(10.0), Some(5.0), Some(13.0)];
        // CPU per connection: every run of ours below every run of theirs.
        ours.connect_cpu_runs = [100.0, 104.0, 102.0, 101.0, 103.0].map(Some).to_vec();
        theirs.connect_cpu_runs = [120.0, 118.0, 125.0, 119.0, 121.0].map(Some).to_vec();
        let c = WorkloadC {
            rows: vec![ours, theirs],
        };
        let mut costs = c_costs(&c);
        costs[0].values = [(Subject::Epoll(2), 102.0), (nginx, 120.0)].into();
        let mut out = String::new();
        versus_table(&mut out, &costs, &[Subject::Epoll(2), nginx]);
        assert!(
            out.contains("| C: proxy CPU per connection, µs | < 1 | 0.85 (ahead) |"),
            "{out}"
        );
        let mut measures = c_rates(&c, None, 4);
        // The rows are skipped, so give the medians the runs would have.
        measures[0].values = [(Subject::Epoll(2), 13.0), (nginx, 3.0)].into();
        measures[1].values = [(Subject::Epoll(2), 9.0), (nginx, 10.0)].into();
        let mut out = String::new();
        versus_table(&mut out, &measures, &[Subject::Epoll(2), nginx]);
        assert!(out.contains("*level* when the runs cannot tell"), "{out}");
        assert!(
            out.contains(
                "| C: connections/s (a new connection per request, no delay) | > 1 | 4.33 (ahead) |"
            ),
            "{out}"
        );
        assert!(
            out.contains("| C: keep-alive requests/s (echo backend) | > 1 | 0.90 (level) |"),
            "{out}"
        );
        // A bulk row with a failed run has no verdict, only its ratio.
        assert!(
            out.contains("| C: bulk MiB/s, 4 streams | > 1 | — |"),
            "{out}"
        );
    }

    #[test]
    fn a_bulk_run_says_whether_its_bytes_were_cut_off_or_changed() {
        let Outcome::Done(mut m) = bulk(true, 500, 3000) else {
            unreachable!("bulk() makes a finished run")
        };
        assert_eq!(not_whole(&m.value), None);
        m.value.intact = false;
        assert_eq!(
            not_whole(&m.value).as_deref(),
            Some("**the bytes came back altered**")
        );
        m.value.first_error = Some("stream 1: Connection reset by peer".to_string());
        let mut epoll = row(Vec::new());
        epoll.bulk_many = Outcome::Done(m);
        let mut notes = Notes::default();
        cost_notes(&mut notes, &epoll, 4);
        assert!(
            notes.0.contains(
                &"epoll 1, bulk 4 streams: **the bytes did not all come back**: stream 1: \
                  Connection reset by peer"
                    .to_string()
            ),
            "{:?}",
            notes.0
        );
    }

    #[test]
    fn cpu_per_gib_has_two_decimals() {
        let mut epoll = row(Vec::new());
        epoll.bulk_one = bulk(true, 437, 3000);
        let c = WorkloadC { rows: vec![epoll] };
        let mut out = String::new();
        ratios_table(&mut out, &c_costs(&c), &[Subject::Epoll(1)], 5);
        assert!(
            out.contains(
                "| C: proxy CPU per GiB relayed (both ways), bulk 1 stream, s | — | 0.44 |"
            ),
            "{out}"
        );
        assert!(
            out.contains("| C: proxy CPU per connection, µs | 35–39 µs | — |"),
            "{out}"
        );
    }

    #[test]
    fn the_machine_table_shows_every_subject_direct_included() {
        let mut direct = row(Vec::new());
        direct.subject = Subject::Direct;
        direct.bulk_one = bulk(true, 0, 3900);
        direct.bulk_many = bulk(true, 0, 3800);
        let mut epoll = row(Vec::new());
        epoll.bulk_one = bulk(false, 500, 3000);
        epoll.bulk_many = bulk(true, 500, 2500);
        let c = WorkloadC {
            rows: vec![direct, epoll],
        };
        let mut out = String::new();
        machine_table(&mut out, &c, 4, 8);
        assert!(out.contains("cores of the 2 the kernel counts"), "{out}");
        assert!(
            out.contains("| measure | direct (no proxy) | epoll 1 |"),
            "{out}"
        );
        for line in [
            "| C: machine busy during bulk 1 stream, cores (of 2) | 1.95 | 1.50 |",
            "| C: machine busy during bulk 4 streams, cores (of 2) | 1.90 | 1.25 |",
            "| C: machine steal during bulk 1 stream, cores (of 2) | 0.02 | 0.02 |",
            // 1 GiB relayed; an altered run has no price per GiB.
            "| C: machine CPU per GiB relayed (both ways) during bulk 1 stream, s | 3.90 | — |",
            "| C: machine CPU per GiB relayed (both ways) during bulk 4 streams, s | 3.80 | 2.50 |",
        ] {
            assert!(out.contains(line), "{line}\n{out}");
        }
        let mut none = String::new();
        machine_table(
            &mut none,
            &WorkloadC {
                rows: vec![row(Vec::new())],
            },
            4,
            8,
        );
        assert!(none.contains("cores (of 8) | — |"), "{none}");
    }
}
