//! The load client through real sockets on 127.0.0.1: the duration mode,
//! keep-alive, bulk streams, idle connections, and the JSON reports read
//! back with a parser of their own.
//!
//! Every test runs under a watchdog. Times are asserted as lower bounds,
//! except that a duration run must stop near its duration, checked with a
//! bound many times the slack it needs.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::thread;
use std::time::Duration;

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use testkit::json::{self, Json};
use testkit::watchdog::{IO_BOUND, within};
use tools::load::{
    BulkOptions, BulkReport, ECHO_TAG, LoadOptions, LoadReport, MIB, Pattern, open_idle, run_bulk,
    run_closed_loop,
};

fn start(mode: FixtureMode, delay_ms: u64) -> Fixture {
    let options = FixtureOptions {
        mode,
        delay: Duration::from_millis(delay_ms),
        ..FixtureOptions::default()
    };
    Fixture::start(1, options).expect("start the fixture")
}

/// The invariants every closed-loop report keeps, whatever happened.
fn check_counts(report: &LoadReport) {
    assert_eq!(report.requests, report.ok + report.errors, "{report}");
    assert_eq!(report.latencies.len() as u64, report.ok, "{report}");
    assert_eq!(report.per_backend.values().sum::<u64>(), report.ok);
    assert!(report.latencies.windows(2).all(|w| w[0] <= w[1]), "sorted");
}

// ---- the duration mode --------------------------------------------------------

#[test]
fn a_duration_run_stops_near_its_duration_and_counts_every_request() {
    within(60, || {
        let fixture = start(FixtureMode::Reply, 20);
        let duration = Duration::from_millis(600);
        let report = run_closed_loop(&LoadOptions {
            target: fixture.addrs()[0],
            clients: 8,
            requests: usize::MAX,
            duration: Some(duration),
            timeout: Duration::from_secs(5),
            pattern: Pattern::NewConnection,
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!(report.errors, 0, "first error: {:?}", report.first_error);
        // No ticket after the duration; the last requests (20 ms each) still
        // finish, so the run ends a little after it, never seconds after.
        assert!(report.elapsed >= duration, "{:?}", report.elapsed);
        assert!(
            report.elapsed < duration + Duration::from_secs(2),
            "did not stop near the duration: {:?}",
            report.elapsed
        );
        // 8 clients and 20 ms a request: about 240 in 600 ms; far fewer
        // would mean the clients were not running at once.
        assert!(report.ok >= 40, "{report}");
        assert!(report.latencies[0] >= Duration::from_millis(20));
        eprintln!("{report}");
    });
}

#[test]
fn the_request_count_stops_a_run_before_its_duration() {
    within(60, || {
        let fixture = start(FixtureMode::Reply, 0);
        let report = run_closed_loop(&LoadOptions {
            target: fixture.addrs()[0],
            clients: 4,
            requests: 50,
            duration: Some(Duration::from_secs(30)),
            ..LoadOptions::default()
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!((report.requests, report.ok), (50, 50));
        assert!(report.elapsed < Duration::from_secs(30));
    });
}

#[test]
fn a_duration_run_against_a_dead_port_still_keeps_its_counts() {
    within(60, || {
        let free = TcpListener::bind("127.0.0.1:0").expect("bind");
        let refused = free.local_addr().expect("address");
        drop(free);
        let report = run_closed_loop(&LoadOptions {
            target: refused,
            clients: 2,
            requests: usize::MAX,
            duration: Some(Duration::from_millis(200)),
            ..LoadOptions::default()
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!(report.ok, 0);
        assert!(report.errors > 0);
        assert!(report.first_error.is_some());
    });
}

// ---- keep-alive ---------------------------------------------------------------

#[test]
fn keep_alive_against_an_echo_fixture_answers_every_request() {
    within(60, || {
        let fixture = start(FixtureMode::Echo, 0);
        let report = run_closed_loop(&LoadOptions {
            target: fixture.addrs()[0],
            clients: 4,
            requests: 203,
            pattern: Pattern::KeepAlive { per_connection: 10 },
            ..LoadOptions::default()
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!(
            (report.requests, report.ok, report.errors),
            (203, 203, 0),
            "first error: {:?}",
            report.first_error
        );
        let tags: Vec<_> = report.per_backend.iter().collect();
        assert_eq!(tags, vec![(&ECHO_TAG.to_string(), &203)]);
        assert!(report.p50().is_some_and(|p50| p50 > Duration::ZERO));
        assert!(report.p50() <= report.max());
        eprintln!("{report}");
    });
}

/// An echo server on its own thread that serves `connections` connections
/// one after the other, line by line, and returns the lines each carried.
fn counting_echo(
    connections: usize,
) -> (SocketAddr, thread::JoinHandle<io::Result<Vec<Vec<String>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = thread::spawn(move || {
        let mut carried = Vec::new();
        for _ in 0..connections {
            let (conn, _) = listener.accept()?;
            conn.set_read_timeout(Some(IO_BOUND))?;
            let mut writer = conn.try_clone()?;
            let mut lines = Vec::new();
            for line in BufReader::new(conn).lines() {
                let line = line?;
                writer.write_all(format!("{line}\n").as_bytes())?;
                lines.push(line);
            }
            carried.push(lines);
        }
        Ok(carried)
    });
    (addr, server)
}

#[test]
fn keep_alive_carries_per_connection_requests_on_each_connection() {
    within(60, || {
        // One client, so the connections come one after the other and
        // their count is exact: 95 requests, 10 a connection = 10 connections.
        let (addr, server) = counting_echo(10);
        let report = run_closed_loop(&LoadOptions {
            target: addr,
            clients: 1,
            requests: 95,
            pattern: Pattern::KeepAlive { per_connection: 10 },
            ..LoadOptions::default()
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!(report.ok, 95, "first error: {:?}", report.first_error);
        let carried = server.join().expect("server thread").expect("serve");
        let sizes: Vec<usize> = carried.iter().map(Vec::len).collect();
        assert_eq!(sizes, [10, 10, 10, 10, 10, 10, 10, 10, 10, 5]);
        // The lines themselves: GET 0 .. GET 94, in order, none twice.
        let all: Vec<String> = carried.into_iter().flatten().collect();
        let expected: Vec<String> = (0..95).map(|n| format!("GET {n}")).collect();
        assert_eq!(all, expected);
    });
}

#[test]
fn keep_alive_against_a_reply_backend_is_all_errors() {
    within(60, || {
        // A reply backend answers "port N: GET 0", not the request itself.
        let fixture = start(FixtureMode::Reply, 0);
        let report = run_closed_loop(&LoadOptions {
            target: fixture.addrs()[0],
            clients: 2,
            requests: 6,
            pattern: Pattern::KeepAlive { per_connection: 3 },
            ..LoadOptions::default()
        })
        .expect("run the load");
        check_counts(&report);
        assert_eq!((report.ok, report.errors), (0, 6));
        let error = report.first_error.unwrap_or_default();
        assert!(error.contains("unexpected echo"), "{error}");
    });
}

// ---- bulk -----------------------------------------------------------------------

fn bulk(target: SocketAddr, bytes: u64, streams: usize) -> BulkReport {
    run_bulk(&BulkOptions {
        target,
        bytes,
        streams,
        timeout: Duration::from_secs(10),
    })
    .expect("run the bulk streams")
}

#[test]
fn bulk_64_mib_over_4_streams_comes_back_intact() {
    within(120, || {
        let fixture = start(FixtureMode::Echo, 0);
        let report = bulk(fixture.addrs()[0], 64 * MIB, 4);
        assert!(report.intact, "{report}");
        assert_eq!(report.first_error, None);
        assert_eq!(report.streams, 4);
        assert_eq!(report.bytes_each_way, 64 * MIB);
        assert!(report.mib_per_sec() > 0.0);
        assert!(report.client_cpu > Duration::ZERO);
        eprintln!("{report}");
    });
}

#[test]
fn bulk_bytes_that_do_not_divide_evenly_all_go_through() {
    within(60, || {
        let fixture = start(FixtureMode::Echo, 0);
        let report = bulk(fixture.addrs()[0], 1_000_003, 3);
        assert!(report.intact, "{report}");
        assert_eq!(report.bytes_each_way, 1_000_003);
    });
}

/// An echo server for one connection that changes one bit of the byte at
/// `position`: the checksum must notice.
fn corrupting_echo(position: u64) -> (SocketAddr, thread::JoinHandle<io::Result<u64>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = thread::spawn(move || {
        let (mut conn, _) = listener.accept()?;
        conn.set_read_timeout(Some(IO_BOUND))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut seen = 0u64;
        loop {
            let n = conn.read(&mut buf)?;
            if n == 0 {
                conn.shutdown(Shutdown::Write)?;
                return Ok(seen);
            }
            if (seen..seen + n as u64).contains(&position) {
                buf[(position - seen) as usize] ^= 0x04;
            }
            conn.write_all(&buf[..n])?;
            seen += n as u64;
        }
    });
    (addr, server)
}

#[test]
fn bulk_notices_one_changed_bit() {
    within(60, || {
        let (addr, server) = corrupting_echo(300_001);
        let report = bulk(addr, 2 * MIB, 1);
        let echoed = server.join().expect("server thread").expect("serve");
        assert_eq!(echoed, 2 * MIB, "the whole stream went through");
        assert!(!report.intact, "{report}");
        assert_eq!(report.bytes_each_way, 2 * MIB, "every byte came back");
        let error = report.first_error.unwrap_or_default();
        assert!(error.contains("does not match"), "{error}");
    });
}

#[test]
fn bulk_to_a_dead_port_is_not_intact() {
    within(60, || {
        let free = TcpListener::bind("127.0.0.1:0").expect("bind");
        let refused = free.local_addr().expect("address");
        drop(free);
        let report = bulk(refused, MIB, 2);
        assert!(!report.intact);
        assert_eq!(report.bytes_each_way, 0);
        assert!(report.first_error.is_some_and(|e| e.starts_with("stream ")));
    });
}

// ---- idle connections -----------------------------------------------------------

#[test]
fn open_idle_500_then_verify_then_close() {
    within(60, || {
        // 500 client sockets plus the fixture's 500, in one process.
        runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
        let fixture = start(FixtureMode::Echo, 0);
        let mut idle =
            open_idle(fixture.addrs()[0], 500, Duration::from_secs(10)).expect("open 500");
        assert_eq!(idle.len(), 500);
        assert!(!idle.is_empty());
        thread::sleep(Duration::from_millis(100));
        idle.verify().expect("all still alive");
        idle.verify().expect("and again");
        idle.close();
        // The fixture is unharmed: a new connection still echoes.
        let mut after =
            open_idle(fixture.addrs()[0], 1, Duration::from_secs(10)).expect("one more");
        after.verify().expect("alive");
    });
}

#[test]
fn open_idle_says_how_many_succeeded() {
    within(60, || {
        let free = TcpListener::bind("127.0.0.1:0").expect("bind");
        let refused = free.local_addr().expect("address");
        drop(free);
        let e = open_idle(refused, 10, Duration::from_secs(5)).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        assert!(e.to_string().contains("opened 0 of 10"), "{e}");
    });
}

#[test]
fn verify_notices_connections_that_died_while_idle() {
    within(60, || {
        let fixture = start(FixtureMode::Echo, 0);
        let mut idle = open_idle(fixture.addrs()[0], 20, Duration::from_secs(5)).expect("open");
        // Stopping the fixture closes every connection it holds.
        fixture.stop();
        let e = idle.verify().expect_err("the backend is gone");
        assert!(e.to_string().contains("idle connection 0 of 20"), "{e}");
    });
}

#[test]
fn zero_idle_connections_is_empty() {
    let free = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut idle = open_idle(
        free.local_addr().expect("address"),
        0,
        Duration::from_secs(1),
    )
    .expect("nothing to open");
    assert!(idle.is_empty());
    assert_eq!(idle.len(), 0);
    idle.verify().expect("nothing to verify");
    idle.close();
}

// ---- JSON -----------------------------------------------------------------------

const LOAD_KEYS: [&str; 12] = [
    "requests",
    "ok",
    "errors",
    "elapsed_s",
    "req_per_s",
    "avg_ms",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "client_cpu_s",
    "per_backend",
    "first_error",
];

/// Parses `report.to_json()` and checks every value against the report.
fn check_load_json(report: &LoadReport) -> Json {
    let line = report.to_json();
    assert!(!line.contains('\n'), "one line: {line}");
    let value = json::parse(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(value.keys(), LOAD_KEYS);
    assert_eq!(value.get("requests").whole(), report.requests);
    assert_eq!(value.get("ok").whole(), report.ok);
    assert_eq!(value.get("errors").whole(), report.errors);
    let close = |key: &str, expected: f64| {
        let got = value.get(key).number();
        assert!(
            (got - expected).abs() <= 1e-3 * expected.abs().max(1.0),
            "{key}: {got} vs {expected}"
        );
    };
    close("elapsed_s", report.elapsed.as_secs_f64());
    close("req_per_s", report.req_per_sec());
    close("client_cpu_s", report.client_cpu.as_secs_f64());
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    for (key, expected) in [
        ("avg_ms", ms(report.average())),
        ("p50_ms", ms(report.p50())),
        ("p99_ms", ms(report.percentile(99.0))),
        ("max_ms", ms(report.max())),
    ] {
        match expected {
            Some(expected) => close(key, expected),
            None => assert_eq!(value.get(key), &Json::Null, "{key}"),
        }
    }
    let per_backend = value.get("per_backend");
    assert_eq!(per_backend.keys().len(), report.per_backend.len());
    for (tag, count) in &report.per_backend {
        assert_eq!(per_backend.get(tag).whole(), *count, "{tag}");
    }
    match &report.first_error {
        Some(error) => assert_eq!(value.get("first_error").string(), error),
        None => assert_eq!(value.get("first_error"), &Json::Null),
    }
    value
}

#[test]
fn the_json_of_a_real_run_says_what_the_report_says() {
    within(60, || {
        let fixture = start(FixtureMode::Reply, 1);
        let report = run_closed_loop(&LoadOptions {
            target: fixture.addrs()[0],
            clients: 4,
            requests: 100,
            ..LoadOptions::default()
        })
        .expect("run the load");
        assert_eq!(report.ok, 100);
        check_load_json(&report);
        // And one with errors: a port nobody listens on.
        let free = TcpListener::bind("127.0.0.1:0").expect("bind");
        let refused = free.local_addr().expect("address");
        drop(free);
        let failed = run_closed_loop(&LoadOptions {
            target: refused,
            clients: 2,
            requests: 4,
            ..LoadOptions::default()
        })
        .expect("run the load");
        let value = check_load_json(&failed);
        assert_eq!(value.get("p99_ms"), &Json::Null);
    });
}

#[test]
fn json_escapes_quotes_backslashes_and_control_characters() {
    let nasty = "said \"no\" \\ C:\\path\nnext line\r\tbell\u{7} nul\u{0} esc\u{1b} é ✓";
    let mut per_backend = std::collections::BTreeMap::new();
    per_backend.insert("tag \"with\" quotes\\".to_string(), 2);
    let report = LoadReport {
        requests: 3,
        ok: 2,
        errors: 1,
        latencies: vec![Duration::from_micros(1500), Duration::from_micros(2500)],
        elapsed: Duration::from_millis(10),
        per_backend,
        first_error: Some(nasty.to_string()),
        client_cpu: Duration::from_millis(3),
    };
    let value = check_load_json(&report);
    assert_eq!(value.get("first_error").string(), nasty);
    assert_eq!(value.get("avg_ms").number(), 2.0);
    let bulk = BulkReport {
        first_error: Some(nasty.to_string()),
        ..BulkReport::default()
    };
    let line = bulk.to_json();
    assert!(!line.contains('\n'));
    let value = json::parse(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(value.get("first_error").string(), nasty);
}

#[test]
fn the_json_of_a_bulk_run_says_what_the_report_says() {
    within(60, || {
        let fixture = start(FixtureMode::Echo, 0);
        let report = bulk(fixture.addrs()[0], 4 * MIB, 2);
        let line = report.to_json();
        let value = json::parse(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(
            value.keys(),
            [
                "streams",
                "bytes_each_way",
                "elapsed_s",
                "mib_per_s",
                "intact",
                "client_cpu_s",
                "first_error"
            ]
        );
        assert_eq!(value.get("streams").whole(), 2);
        assert_eq!(value.get("bytes_each_way").whole(), 4 * MIB);
        assert_eq!(value.get("intact"), &Json::Bool(true));
        assert_eq!(value.get("first_error"), &Json::Null);
        let rate = value.get("mib_per_s").number();
        assert!((rate - report.mib_per_sec()).abs() <= 1e-3 * rate.max(1.0));
    });
}
