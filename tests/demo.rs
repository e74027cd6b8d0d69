//! End to end, the demo: `demo --quick` as a child process, as a newcomer
//! would run it (the README's first command, shortened), through the
//! `e2e-demo` binary, the demo's own entry point.

mod common;

use std::time::Duration;

use common::*;
use tools::process::child::{Capture, Spawn};

/// The demo takes about 5 s; past this, it is hung (and is killed).
const WATCHDOG: Duration = Duration::from_secs(90);

/// One row of the demo's table.
#[derive(Debug)]
struct Row {
    mode: String,
    requests: u64,
    errors: u64,
}

/// The table's rows: `mode threads requests req/s avg p99 errors served...`.
fn rows(table: &str) -> Vec<Row> {
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 7 || !["single", "pool", "epoll", "states"].contains(&fields[0]) {
                return None;
            }
            Some(Row {
                mode: fields[0].to_string(),
                requests: fields[2].parse().ok()?,
                errors: fields[6].parse().ok()?,
            })
        })
        .collect()
}

// The demo: every mode runs through `demo --quick`, exit status 0, no errors in any row.
#[test]
fn the_quick_demo_runs_every_mode_without_errors() {
    let ran = Spawn::new("demo", demo_exe())
        .args(["--quick"])
        .stdout(Capture::All)
        .run(WATCHDOG)
        .unwrap_or_else(|e| panic!("the demo: {e}"));
    let table = ran.stdout.join("\n");
    let stderr = ran.stderr.join("\n");
    let status = ran.status;
    assert!(status.success(), "exit status {status}\n{table}\n{stderr}");

    let rows = rows(&table);
    for mode in ["single", "pool", "epoll", "states"] {
        assert!(
            rows.iter().any(|r| r.mode == mode),
            "no row for {mode}:\n{table}"
        );
    }
    assert_eq!(rows.len(), 6, "rows:\n{table}");
    for row in &rows {
        assert!(row.requests > 0, "{row:?}\n{table}");
        assert_eq!(row.errors, 0, "{row:?}\n{table}\n{stderr}");
    }
}
