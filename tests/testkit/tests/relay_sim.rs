//! The relay simulator's command line, run as a process: the replay line a
//! failure prints replays it, and a clean search says so.

use std::process::Command;

use testkit::sim::driver::Bug;
use testkit::sim::{Budget, Config, search};

fn relay_sim(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_relay-sim"))
        .args(args)
        .output()
        .expect("relay-sim runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The arguments of a printed replay line (after `--`).
fn arguments(line: &str) -> Vec<&str> {
    let (_, args) = line.split_once(" -- ").expect("a cargo run line");
    args.split_whitespace().collect()
}

#[test]
fn a_printed_replay_line_replays_the_failure_with_its_steps() {
    let config = Config {
        bug: Some(Bug::ResetAsFin),
        ..Config::default()
    };
    let budget = Budget {
        first_seed: 0,
        steps: 1_000_000,
        config,
    };
    let found = search(&budget).found.expect("the planted bug is found");
    for line in [&found.replay, &found.replay_shrunk] {
        let (code, out) = relay_sim(&arguments(line));
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(found.failure.violation.kind), "{out}");
        assert!(out.contains("proxy: Op("), "a step per line: {out}");
    }
}

#[test]
fn a_search_without_a_bug_passes_and_counts_its_endings() {
    let (code, out) = relay_sim(&["--from", "500", "--budget", "200000"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("complete"), "{out}");
    let (code, out) = relay_sim(&["--bug", "no-such-bug"]);
    assert_eq!(code, Some(2), "{out}");
}
