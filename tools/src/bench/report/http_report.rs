//! The report's keep-alive HTTP table (http.rs): wrk through each subject
//! to nginx serving a small file, every rate beside the direct one.

use std::fmt::Write as _;

use super::markdown::{Notes, Table, ms, not_run, rate, ratio, runs_cell, show_ratio};
use super::results::{HttpKeepAlive, HttpRow, Measured};
use crate::bench::sizes::Sizes;
use crate::bench::subject::Subject;
use crate::bench::wrk::{WrkReport, whole_seconds};

/// The wrk table, under workload C's heading (`level` `###`) or on its own
/// (`##`, when only `--only wrk` ran).
pub(super) fn section(out: &mut String, http: &HttpKeepAlive, sizes: &Sizes, level: &str) {
    let _ = writeln!(out, "{level} Keep-alive HTTP through wrk\n");
    let versions = match &http.tools {
        Ok(versions) => versions,
        Err(why) => {
            let _ = writeln!(out, "Not measured: {why}.\n");
            return;
        }
    };
    let _ = writeln!(
        out,
        "The keep-alive row as operators measure it ({versions}): `wrk -t1 -c{} -d{}s \
         --latency` asks for a {}-byte static file from one nginx (`http`, `worker_processes \
         1`, `access_log off`, `keepalive_requests 1000000`) listening on three loopback ports: \
         direct to the first, or through each proxy in front of all three. One nginx process \
         answers on every row, so the ratio to direct is what the proxy costs, not backend \
         capacity it adds. *Proxy CPU*: the proxy's CPU time during the run over wrk's \
         requests.{}\n",
        http.connections,
        whole_seconds(sizes.run_for),
        http.file_bytes,
        runs_said(sizes.repetitions),
    );
    let direct = http.report(Subject::Direct).map(|m| m.value.req_per_sec);
    let several = sizes.repetitions > 1;
    let runs_header = format!("requests/s of the {} runs", sizes.repetitions);
    let mut header = HEADER.to_vec();
    if several {
        header.push(&runs_header);
    }
    let mut table = Table::new(&header);
    let mut notes = Notes::default();
    for row in &http.rows {
        notes.outcome(&row.subject.to_string(), &row.outcome);
        let mut cells = cells(row, direct, &mut notes);
        if several {
            cells.push(runs_cell(&row.runs));
        }
        table.row(cells);
    }
    out.push_str(&table.render());
    out.push_str(&notes.render());
    out.push('\n');
}

/// How often each subject ran, for the paragraph above the table.
fn runs_said(repetitions: usize) -> String {
    if repetitions < 2 {
        return String::new();
    }
    format!(
        " *Runs*: every subject {repetitions} times, interleaved with the others (a round \
         runs each once), each on a fresh process; a row is the run with the median \
         requests/s, and the last column lists all {repetitions} in round order (in \
         brackets, half their range over the median)."
    )
}

const HEADER: [&str; 8] = [
    "subject",
    "requests/s",
    "ratio to direct",
    "p50 ms",
    "p99 ms",
    "requests",
    "errors",
    "proxy CPU µs/request",
];

/// `row`'s cells, its rate beside `direct`'s; its errors go to `notes`.
fn cells(row: &HttpRow, direct: Option<f64>, notes: &mut Notes) -> Vec<String> {
    let label = row.subject.to_string();
    let Some(m) = row.outcome.done() else {
        let mut cells = vec![label, not_run(&row.outcome).to_string()];
        cells.resize(HEADER.len(), "—".to_string());
        return cells;
    };
    let r = &m.value;
    if r.errors() > 0 {
        notes.0.push(format!(
            "{label}: {} socket errors, {} replies not 2xx or 3xx",
            r.socket_errors, r.bad_status
        ));
    }
    vec![
        label,
        rate(r.req_per_sec),
        show_ratio(ratio(Some(r.req_per_sec), direct)),
        ms(r.latency.get(&50).copied()),
        ms(r.latency.get(&99).copied()),
        r.requests.to_string(),
        r.errors().to_string(),
        cpu_per_request(m).map_or("—".to_string(), |us| format!("{us:.1}")),
    ]
}

/// The proxy's CPU per request in µs (None for direct: no proxy).
fn cpu_per_request(m: &Measured<WrkReport>) -> Option<f64> {
    let cost = m.cost?;
    (m.value.requests > 0).then(|| cost.cpu.as_secs_f64() * 1e6 / m.value.requests as f64)
}
