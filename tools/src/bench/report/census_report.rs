//! The report's census section: the system calls per new connection and
//! per keep-alive request that census.rs counted, call by call, ours
//! beside the peers'.

use std::fmt::Write as _;

use super::markdown::{Notes, Table, not_run};
use super::results::{Census, CensusRow, Counted, Outcome};
use crate::bench::sizes::Sizes;

/// The section's heading.
pub const HEADING: &str = "## System calls per connection and per request (strace census)";

/// Every way to read from a socket, and to write to one: proxies differ in
/// which they use (nginx `writev`s where we `sendto`), not in what it does.
const READS: &[&str] = &["read", "recvfrom", "readv", "recvmsg"];
const WRITES: &[&str] = &["write", "sendto", "writev", "sendmsg"];
const WAITS: &[&str] = &["epoll_wait", "epoll_pwait", "epoll_pwait2"];

/// A column: its heading and the system calls it sums.
type Column = (&'static str, &'static [&'static str]);

/// The per-connection table: every call a relayed connection needs, in the
/// order of the table; the rest under "others".
const PER_CONNECTION: &[Column] = &[
    ("reads", READS),
    ("epoll_ctl", &["epoll_ctl"]),
    ("shutdown", &["shutdown"]),
    ("setsockopt", &["setsockopt"]),
    ("writes", WRITES),
    ("close", &["close"]),
    ("getsockopt", &["getsockopt"]),
    ("accept4", &["accept4", "accept"]),
    ("socket", &["socket"]),
    ("connect", &["connect"]),
    ("epoll_wait", WAITS),
];

/// The per-request table: the copy itself, and what it costs beyond.
const PER_REQUEST: &[Column] = &[("reads", READS), ("writes", WRITES)];

/// A share of calls below this is left out of the "others" cell's names.
const NEGLIGIBLE: f64 = 0.005;

/// The census section: how it was counted, the two tables, the notes and
/// strace's own tables.
pub(super) fn section(out: &mut String, census: &Census, sizes: &Sizes) {
    let _ = writeln!(out, "{HEADING}\n");
    let version = match &census.strace {
        Ok(version) => version,
        Err(why) => {
            let _ = writeln!(out, "Not measured: {why}.\n");
            return;
        }
    };
    let _ = writeln!(
        out,
        "Each proxy at one thread (ours `--mode epoll --workers 1`, HAProxy `nbthread 1`, nginx \
         `worker_processes 1`) in front of three fixture backends, started fresh for each count \
         and warmed up with {} requests; then `strace -c -f` ({version}) attached to the process \
         that does the work (ours and HAProxy: the process, every thread; nginx: its worker) \
         while {} new connections ({} clients, `reply` backends) or {} keep-alive requests ({} \
         per connection, `echo` backends) went through, and its counts divided by the requests. \
         A new connection is two sockets (the client's, accepted; the backend's, connected), a \
         request and its reply; a keep-alive request is one line each way, with its share of its \
         connection's open and close: the copy alone is 4 calls (a read and a write each way). \
         *reads*: read, recvfrom, readv, recvmsg; *writes*: write, sendto, writev, sendmsg; \
         *others*: every other call, the largest by name. strace stops the proxy at every call, \
         so these runs count calls and say nothing about speed.\n",
        sizes.census_warmup,
        sizes.census_connections,
        sizes.cost_clients,
        sizes.census_requests,
        sizes.census_per_connection,
    );
    let _ = writeln!(out, "Per new connection:\n");
    out.push_str(&table(&census.rows, |r| &r.connect, PER_CONNECTION, false));
    let _ = writeln!(out, "\nPer keep-alive request:\n");
    out.push_str(&table(&census.rows, |r| &r.keep_alive, PER_REQUEST, true));
    out.push_str(&notes(&census.rows).render());
    out.push('\n');
    raw_tables(out, &census.rows);
}

/// One table: a row per subject, `columns` after the total, then (with
/// `failed_reads`) the reads that returned an error, then "others".
fn table(
    rows: &[CensusRow],
    pick: fn(&CensusRow) -> &Outcome<Counted>,
    columns: &[Column],
    failed_reads: bool,
) -> String {
    let mut header = vec!["subject", "total"];
    header.extend(columns.iter().map(|(name, _)| *name));
    if failed_reads {
        header.push("reads that failed (EAGAIN)");
    }
    header.push("others");
    let mut table = Table::new(&header);
    for row in rows {
        let outcome = pick(row);
        let mut cells = vec![row.subject.to_string()];
        match outcome.done() {
            Some(m) => {
                let counted = &m.value;
                cells.push(total(counted));
                cells.extend(
                    columns
                        .iter()
                        .map(|(heading, names)| group(counted, heading, names)),
                );
                if failed_reads {
                    cells.push(per(counted, counted.summary.of_all(READS).errors));
                }
                cells.push(others(counted, columns));
            }
            None => {
                cells.push(not_run(outcome).to_string());
                cells.resize(header.len(), "—".to_string());
            }
        }
        table.row(cells);
    }
    table.render()
}

/// Every call per request, to three decimals: the totals are what issue
/// 10 compares with the peers', and a keep-alive request's differ in the
/// third (4.051 against 4.054), which two would round into a tie.
fn total(counted: &Counted) -> String {
    format!("{:.3}", counted.per_request(counted.summary.total().calls))
}

/// `calls` per request, to two decimals.
fn per(counted: &Counted, calls: u64) -> String {
    format!("{:.2}", counted.per_request(calls))
}

/// A column's cell: its calls per request, and which of its calls were
/// made unless the heading says (`4.00 (recvfrom)`, `2.00 (read 1.00,
/// readv 1.00)`, but `1.02` under accept4 for accept4 alone).
fn group(counted: &Counted, heading: &str, names: &[&str]) -> String {
    let total = per(counted, counted.summary.of_all(names).calls);
    let made: Vec<(&str, u64)> = names
        .iter()
        .map(|&name| (name, counted.summary.of(name).calls))
        .filter(|&(_, calls)| calls > 0)
        .collect();
    match made.as_slice() {
        [] => total,
        [(name, _)] if *name == heading => total,
        [(name, _)] => format!("{total} ({name})"),
        _ => {
            let each: Vec<String> = made
                .iter()
                .map(|&(name, calls)| format!("{name} {}", per(counted, calls)))
                .collect();
            format!("{total} ({})", each.join(", "))
        }
    }
}

/// Every call no column counts: their sum, and the names of those made at
/// least once in 200 requests, largest first.
fn others(counted: &Counted, columns: &[Column]) -> String {
    let counted_by_columns = |name: &str| columns.iter().any(|(_, names)| names.contains(&name));
    let mut rest: Vec<(&str, u64)> = counted
        .summary
        .by_name
        .iter()
        .filter(|(name, _)| !counted_by_columns(name))
        .map(|(name, calls)| (name.as_str(), calls.calls))
        .collect();
    rest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let sum: u64 = rest.iter().map(|(_, calls)| calls).sum();
    let named: Vec<String> = rest
        .iter()
        .filter(|&&(_, calls)| counted.per_request(calls) >= NEGLIGIBLE)
        .map(|&(name, calls)| format!("{name} {}", per(counted, calls)))
        .collect();
    if named.is_empty() {
        per(counted, sum)
    } else {
        format!("{}: {}", per(counted, sum), named.join(", "))
    }
}

/// Why a count is missing, and which counted runs had errors.
fn notes(rows: &[CensusRow]) -> Notes {
    let mut notes = Notes::default();
    for row in rows {
        for (what, outcome) in [
            ("connections", &row.connect),
            ("keep-alive", &row.keep_alive),
        ] {
            let label = format!("{}, {what}", row.subject);
            notes.outcome(&label, outcome);
            if let Some(m) = outcome.done() {
                let load = &m.value.load;
                if load.errors > 0 {
                    notes.0.push(format!(
                        "{label}: {} of the {} counted requests failed; the first: {}",
                        load.errors,
                        load.requests,
                        load.first_error.as_deref().unwrap_or("(not recorded)")
                    ));
                }
            }
        }
    }
    notes
}

/// Where strace's own tables are, beside the charts. Named, not linked:
/// every `bench/` link of the report is a chart (tests/bench_quick.rs
/// checks each as an SVG document).
fn raw_tables(out: &mut String, rows: &[CensusRow]) {
    let files: Vec<String> = rows
        .iter()
        .flat_map(|row| [&row.connect, &row.keep_alive])
        .filter_map(|outcome| Some(format!("`{}`", outcome.done()?.value.raw)))
        .collect();
    if !files.is_empty() {
        let _ = writeln!(out, "strace's own tables: {}.\n", files.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::results::Measured;
    use crate::bench::strace::Summary;
    use crate::bench::subject::Subject;
    use crate::load::LoadReport;
    use std::time::Duration;

    fn counted(table: &str, requests: u64) -> Outcome<Counted> {
        let mut text = String::from(
            "% time     seconds  usecs/call     calls    errors syscall\n\
             ------ ----------- ----------- --------- --------- ----------------\n",
        );
        text.push_str(table);
        Outcome::Done(Measured {
            value: Counted {
                summary: Summary::parse(&text).unwrap(),
                load: LoadReport {
                    requests,
                    ok: requests,
                    ..LoadReport::default()
                },
                raw: "bench/strace-epoll-1-connections.txt".to_string(),
            },
            cost: None,
            client_cpu: Duration::ZERO,
            wall: Duration::from_secs(1),
            segments: None,
            machine: None,
            note: None,
        })
    }

    #[test]
    fn groups_name_their_calls_and_others_sum_the_rest() {
        let rows = vec![CensusRow {
            subject: Subject::Epoll(1),
            connect: counted(
                " 50.00 1.0 1 400 0 recvfrom\n 10.00 1.0 1 100 100 readv\n \
                 10.00 1.0 1 200 0 writev\n 10.00 1.0 1 100 0 fcntl\n \
                 10.00 1.0 1 1 0 brk\n",
                100,
            ),
            keep_alive: Outcome::Skipped("not today".to_string()),
        }];
        let text = table(&rows, |r| &r.connect, PER_CONNECTION, false);
        assert!(
            text.contains("| epoll 1 | 8.010 | 5.00 (recvfrom 4.00, readv 1.00) |"),
            "{text}"
        );
        assert!(text.contains("| 2.00 (writev) |"), "{text}");
        assert!(text.contains("| 1.01: fcntl 1.00, brk 0.01 |"), "{text}");
        let text = table(&rows, |r| &r.keep_alive, PER_REQUEST, true);
        assert!(
            text.contains("| epoll 1 | skipped | — | — | — | — |"),
            "{text}"
        );
        let failed = table(&rows, |r| &r.connect, PER_REQUEST, true);
        assert!(
            failed.contains("| 1.00 | 1.01: fcntl 1.00, brk 0.01 |"),
            "{failed}"
        );
    }
}
