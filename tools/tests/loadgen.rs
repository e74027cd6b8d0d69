//! The `loadgen` program, run as a real process: usage errors exit 2,
//! `--json` prints exactly one line of JSON, each run reports what it did.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use testkit::json::{self, Json};
use testkit::watchdog::within;
use tools::load::MIB;
use tools::process::child::{Capture, Finished, Spawn};

fn start(mode: FixtureMode) -> Fixture {
    let options = FixtureOptions {
        mode,
        ..FixtureOptions::default()
    };
    Fixture::start(1, options).expect("start the fixture")
}

/// Runs `loadgen` with `args` and returns what it printed and its status;
/// kills it and fails the test if it runs longer than `secs` seconds.
fn loadgen(args: &str, secs: u64) -> Finished {
    Spawn::new("loadgen", env!("CARGO_BIN_EXE_loadgen"))
        .args(args.split_whitespace())
        .stdout(Capture::All)
        .run(Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("loadgen {args}: {e}"))
}

/// Lines as the text they were.
fn text(lines: &[String]) -> String {
    lines.join("\n")
}

/// The single line a `--json` run printed, parsed.
fn the_json_line(output: &Finished) -> Json {
    let lines = &output.stdout;
    assert_eq!(lines.len(), 1, "exactly one line on stdout: {lines:?}");
    json::parse(&lines[0]).unwrap_or_else(|e| panic!("{e}: {}", lines[0]))
}

fn refused_port() -> SocketAddr {
    let free = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = free.local_addr().expect("address");
    drop(free);
    addr
}

#[test]
fn usage_errors_exit_with_status_2_and_say_why() {
    for (bad, why) in [
        ("", "--target ADDR is required"),
        ("--target", "needs a value"),
        ("--target localhost:80", "not IP:PORT"),
        ("--target 127.0.0.1:9 --clients 0", "at least 1"),
        ("--target 127.0.0.1:9 --requests many", "whole number"),
        ("--target 127.0.0.1:9 --duration 5", "no unit"),
        ("--target 127.0.0.1:9 --duration 0s", "above zero"),
        // An hour is a duration (the proxy's parser): what is wrong here is
        // only that two flags say when to stop.
        (
            "--target 127.0.0.1:9 --requests 5 --duration 1h",
            "give one",
        ),
        (
            "--target 127.0.0.1:9 --requests 5 --duration 1s",
            "give one",
        ),
        (
            "--target 127.0.0.1:9 --bulk 1 --clients 2",
            "does not apply",
        ),
        ("--target 127.0.0.1:9 --bulk 1 --idle 2", "give one"),
        ("--target 127.0.0.1:9 --idle 2 --json", "does not apply"),
        ("--target 127.0.0.1:9 --streams 2", "does not apply"),
        ("--target 127.0.0.1:9 --keepalive 0", "at least 1"),
        ("--target 127.0.0.1:9 --target 127.0.0.1:9", "given twice"),
        ("--frobnicate", "unknown option"),
    ] {
        let output = loadgen(bad, 30);
        assert_eq!(output.status.code(), Some(2), "'{bad}'");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(why), "'{bad}': {stderr}");
        assert!(stderr.contains("loadgen --help"), "'{bad}': {stderr}");
        assert!(output.stdout.is_empty(), "'{bad}': nothing on stdout");
    }
}

#[test]
fn help_exits_with_status_0() {
    let output = loadgen("--help", 30);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    for word in [
        "USAGE",
        "--keepalive",
        "--bulk",
        "--idle",
        "--json",
        "500ms",
    ] {
        assert!(stdout.contains(word), "{word} missing from the help");
    }
}

#[test]
fn a_json_closed_loop_prints_one_line_that_adds_up() {
    within(60, || {
        let fixture = start(FixtureMode::Reply);
        let addr = fixture.addrs()[0];
        let output = loadgen(
            &format!("--target {addr} --clients 4 --requests 40 --json"),
            30,
        );
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let report = the_json_line(&output);
        assert_eq!(report.get("requests").whole(), 40);
        assert_eq!(report.get("ok").whole(), 40);
        assert_eq!(report.get("errors").whole(), 0);
        let tag = format!("port {}", addr.port());
        assert_eq!(report.get("per_backend").get(&tag).whole(), 40);
        assert!(report.get("p50_ms").number() <= report.get("p99_ms").number());
    });
}

#[test]
fn a_duration_summary_names_the_client_cpu() {
    within(60, || {
        let fixture = start(FixtureMode::Reply);
        let addr = fixture.addrs()[0];
        let started = Instant::now();
        let output = loadgen(&format!("--target {addr} --clients 2 --duration 300ms"), 30);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let stdout = text(&output.stdout);
        assert!(stdout.contains("2 clients against"), "{stdout}");
        assert!(stdout.contains(" 0 errors)"), "{stdout}");
        assert!(stdout.contains("client CPU"), "{stdout}");
        assert!(stdout.contains("of one core"), "{stdout}");
    });
}

#[test]
fn keepalive_against_an_echo_fixture() {
    within(60, || {
        let fixture = start(FixtureMode::Echo);
        let addr = fixture.addrs()[0];
        let output = loadgen(
            &format!("--target {addr} --clients 3 --requests 60 --keepalive 7 --json"),
            30,
        );
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let report = the_json_line(&output);
        assert_eq!(report.get("ok").whole(), 60);
        assert_eq!(report.get("per_backend").get("echo").whole(), 60);
    });
}

#[test]
fn bulk_reports_intact_bytes_and_a_broken_run_exits_1() {
    within(60, || {
        let fixture = start(FixtureMode::Echo);
        let addr = fixture.addrs()[0];
        let output = loadgen(&format!("--target {addr} --bulk 8 --streams 2 --json"), 30);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let report = the_json_line(&output);
        assert_eq!(report.get("intact"), &Json::Bool(true));
        assert_eq!(report.get("bytes_each_way").whole(), 8 * MIB);
        assert_eq!(report.get("streams").whole(), 2);

        let output = loadgen(&format!("--target {} --bulk 1 --json", refused_port()), 30);
        assert_eq!(output.status.code(), Some(1));
        let report = the_json_line(&output);
        assert_eq!(report.get("intact"), &Json::Bool(false));
        assert!(report.get("first_error").string().starts_with("stream 0"));
    });
}

#[test]
fn idle_opens_holds_verifies_and_closes() {
    within(60, || {
        let fixture = start(FixtureMode::Echo);
        let addr = fixture.addrs()[0];
        let output = loadgen(&format!("--target {addr} --idle 50 --hold 200ms"), 30);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let stdout = text(&output.stdout);
        assert!(stdout.contains("opened 50 idle connections"), "{stdout}");
        assert!(
            stdout.contains("all 50 idle connections still answered"),
            "{stdout}"
        );

        let output = loadgen(&format!("--target {} --idle 5", refused_port()), 30);
        assert_eq!(output.status.code(), Some(1));
        assert!(text(&output.stderr).contains("opened 0 of 5"));
    });
}
