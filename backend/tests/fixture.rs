//! The fixture and the load client through real sockets on 127.0.0.1.
//!
//! Clients are plain blocking std sockets (with read timeouts as bounds),
//! except where thousands of connections or the load client call for our
//! runtime. Every test runs under a watchdog; timing assertions are lower
//! bounds, except the one that checks delays overlap, whose bound is ten
//! times generous.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions, MAX_REQUEST};
use common::{XorShift, ask, connect, fnv1a, within};
use tools::load::{LoadOptions, run_closed_loop};

fn options(mode: FixtureMode, delay_ms: u64) -> FixtureOptions {
    FixtureOptions {
        mode,
        delay: Duration::from_millis(delay_ms),
        ..FixtureOptions::default()
    }
}

fn start(count: usize, mode: FixtureMode, delay_ms: u64) -> Fixture {
    Fixture::start(count, options(mode, delay_ms)).expect("start the fixture")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---- reply ---------------------------------------------------------------

#[test]
fn reply_answers_with_its_own_port_after_the_delay() {
    within(30, || {
        let fixture = start(2, FixtureMode::Reply, 100);
        for &addr in fixture.addrs() {
            let started = Instant::now();
            let reply = ask(addr, b"hello\n").expect("ask");
            assert_eq!(text(&reply), format!("port {}: hello\n", addr.port()));
            assert!(
                started.elapsed() >= Duration::from_millis(100),
                "answered before the delay: {:?}",
                started.elapsed()
            );
        }
        fixture.stop();
    });
}

#[test]
fn reply_takes_end_of_file_or_crlf_as_the_end_of_the_line() {
    within(30, || {
        let fixture = start(1, FixtureMode::Reply, 0);
        let addr = fixture.addrs()[0];
        let port = addr.port();
        assert_eq!(
            text(&ask(addr, b"abc").unwrap()),
            format!("port {port}: abc\n")
        );
        assert_eq!(
            text(&ask(addr, b"x\r\n").unwrap()),
            format!("port {port}: x\n")
        );
        assert_eq!(text(&ask(addr, b"").unwrap()), format!("port {port}: \n"));
        assert_eq!(
            text(&ask(addr, b"first\nsecond\n").unwrap()),
            format!("port {port}: first\n"),
            "only the first line is the request"
        );
    });
}

#[test]
fn reply_is_not_destroyed_by_bytes_the_client_sends_after_its_line() {
    within(30, || {
        let fixture = start(1, FixtureMode::Reply, 0);
        let addr = fixture.addrs()[0];
        // A long line, then more bytes the fixture never reads, and no
        // half-close. Closing a socket with unread bytes sends a reset,
        // and a reset throws away what is still in the fixture's send
        // queue; our small receive buffer keeps most of the reply there.
        // The lingering close (drain until the client's FIN) prevents it:
        // without it this fails every time with a reset (Linux, loopback).
        let mut conn = connect(addr).unwrap();
        common::shrink_receive_buffer(&conn, 2048).unwrap();
        let line = vec![b'a'; 48 * 1024];
        let mut request = line.clone();
        request.push(b'\n');
        request.extend(XorShift::new(1).bytes(16 * 1024));
        conn.write_all(&request).unwrap();
        let mut reply = Vec::new();
        conn.read_to_end(&mut reply)
            .expect("the whole reply then EOF, not a reset");
        assert_eq!(reply, backend::fixture::reply_line(addr.port(), &line));
    });
}

#[test]
fn reply_cuts_off_a_request_line_longer_than_the_limit() {
    within(30, || {
        let fixture = start(1, FixtureMode::Reply, 0);
        let mut conn = connect(fixture.addrs()[0]).unwrap();
        // The fixture may close while we are still writing: that is the point.
        let _ = conn.write_all(&vec![b'a'; MAX_REQUEST + 4096]);
        let _ = conn.shutdown(Shutdown::Write);
        let mut reply = Vec::new();
        match conn.read_to_end(&mut reply) {
            Ok(_) => assert!(reply.is_empty(), "answered: {}", text(&reply[..20])),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        }
        // And it goes on serving others.
        let port = fixture.addrs()[0].port();
        let reply = ask(fixture.addrs()[0], b"next\n").unwrap();
        assert_eq!(text(&reply), format!("port {port}: next\n"));
    });
}

#[test]
fn reply_delays_overlap_instead_of_queueing() {
    within(30, || {
        const CLIENTS: u32 = 20;
        let delay = Duration::from_millis(200);
        let fixture = start(1, FixtureMode::Reply, 200);
        let addr = fixture.addrs()[0];
        let started = Instant::now();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| thread::spawn(move || (i, ask(addr, format!("req {i}\n").as_bytes()))))
            .collect();
        for client in clients {
            let (i, reply) = client.join().expect("client thread");
            let reply = reply.expect("ask");
            assert_eq!(text(&reply), format!("port {}: req {i}\n", addr.port()));
        }
        let elapsed = started.elapsed();
        assert!(elapsed >= delay, "faster than one delay: {elapsed:?}");
        // Serially this would take CLIENTS * delay = 4 s; overlapping, one
        // delay plus overhead. Half the serial time is a generous bound.
        assert!(
            elapsed < delay * 10,
            "{CLIENTS} requests took {elapsed:?}: the delay blocks the thread"
        );
    });
}

// ---- cpu ------------------------------------------------------------------

#[test]
fn cpu_replies_after_burning_and_its_requests_queue() {
    within(30, || {
        const CLIENTS: u32 = 3;
        let delay = Duration::from_millis(100);
        let fixture = start(1, FixtureMode::Cpu, 100);
        let addr = fixture.addrs()[0];
        let started = Instant::now();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| thread::spawn(move || (i, ask(addr, format!("work {i}\n").as_bytes()))))
            .collect();
        for client in clients {
            let (i, reply) = client.join().expect("client thread");
            assert_eq!(
                text(&reply.expect("ask")),
                format!("port {}: work {i}\n", addr.port())
            );
        }
        // One thread burning: the bursts cannot overlap.
        let elapsed = started.elapsed();
        assert!(
            elapsed >= delay * CLIENTS,
            "{CLIENTS} CPU-bound requests overlapped: {elapsed:?}"
        );
    });
}

// ---- echo and banner ------------------------------------------------------

#[test]
fn echo_round_trips_one_mebibyte_and_honours_half_close() {
    within(60, || {
        let fixture = start(1, FixtureMode::Echo, 0);
        let sent = XorShift::new(42).bytes(1 << 20);
        let expected = fnv1a(&sent);
        let conn = connect(fixture.addrs()[0]).unwrap();
        let mut writer = conn.try_clone().unwrap();
        // Writing and reading at once: echo sends back while we still send,
        // so a writer that waited for nothing but itself could deadlock.
        let writing = thread::spawn(move || -> io::Result<()> {
            writer.write_all(&sent)?;
            // Half-close: the fixture must still send back all of it.
            writer.shutdown(Shutdown::Write)
        });
        let mut received = Vec::new();
        (&conn).read_to_end(&mut received).expect("read the echo");
        writing.join().expect("writer thread").expect("write");
        assert_eq!(received.len(), 1 << 20);
        assert_eq!(fnv1a(&received), expected, "the bytes came back changed");
    });
}

#[test]
fn echo_answers_after_the_clients_fin() {
    within(30, || {
        let fixture = start(1, FixtureMode::Echo, 0);
        // Everything is sent and the write side closed before reading:
        // the answer travels on the half that is still open.
        assert_eq!(
            ask(fixture.addrs()[0], b"ping\npong").unwrap(),
            b"ping\npong"
        );
        assert_eq!(ask(fixture.addrs()[0], b"").unwrap(), b"");
    });
}

#[test]
fn banner_is_sent_before_the_client_says_anything() {
    within(30, || {
        let banner = "220 fixture ready".to_string();
        let options = FixtureOptions {
            mode: FixtureMode::Banner,
            banner: banner.clone(),
            ..FixtureOptions::default()
        };
        let fixture = Fixture::start(1, options).unwrap();
        let mut conn = connect(fixture.addrs()[0]).unwrap();
        let mut first = vec![0u8; banner.len() + 1];
        conn.read_exact(&mut first).expect("the banner, unprompted");
        assert_eq!(text(&first), format!("{banner}\n"));
        // Then it echoes.
        conn.write_all(b"HELO").unwrap();
        conn.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        conn.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"HELO");
    });
}

// ---- whoami ---------------------------------------------------------------

#[test]
fn whoami_names_both_ends_then_echoes() {
    within(30, || {
        let fixture = start(1, FixtureMode::Whoami, 0);
        let mut conn = connect(fixture.addrs()[0]).unwrap();
        let expected = format!(
            "backend {} client {}\n",
            fixture.addrs()[0],
            conn.local_addr().unwrap()
        );
        let mut first = vec![0u8; expected.len()];
        conn.read_exact(&mut first).expect("the line, unprompted");
        assert_eq!(text(&first), expected);
        conn.write_all(b"ping\n").unwrap();
        conn.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        conn.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"ping\n");
    });
}

// ---- reset ----------------------------------------------------------------

#[test]
fn reset_reaches_the_client_as_a_connection_reset() {
    within(30, || {
        let fixture = start(1, FixtureMode::Reset, 0);
        for _ in 0..3 {
            let mut conn = connect(fixture.addrs()[0]).unwrap();
            conn.write_all(b"GET 1\n").unwrap();
            let mut buf = [0u8; 64];
            match conn.read(&mut buf) {
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
                Ok(n) => panic!("expected a reset, read {n} bytes (0 = a clean EOF)"),
            }
        }
    });
}

// ---- many connections -----------------------------------------------------

#[test]
fn two_thousand_echo_connections_are_held_at_once_then_all_answered() {
    const CONNECTIONS: usize = 2000;
    // Each connection costs two descriptors in this process (ours and the
    // fixture's), plus a margin for the other tests running alongside.
    let needed = (2 * CONNECTIONS + 500) as u64;
    let limit = runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    if limit < needed {
        eprintln!("skipped: RLIMIT_NOFILE hard limit {limit} < {needed} descriptors needed");
        return;
    }
    within(120, || {
        let fixture = start(1, FixtureMode::Echo, 0);
        let addr = fixture.addrs()[0];
        let answered = runtime::Runtime::new()
            .expect("runtime")
            .block_on(hold_then_answer(addr, CONNECTIONS))
            .expect("hold the connections");
        assert_eq!(answered, CONNECTIONS);
        fixture.stop();
    });
}

/// Opens `count` connections, each proven served by one echoed byte, keeps
/// them all open, then has every one exchange a line at once. Returns how
/// many got their own line back.
async fn hold_then_answer(addr: SocketAddr, count: usize) -> io::Result<usize> {
    use runtime::net::TcpStream;
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let conn = TcpStream::connect(addr).await?;
        // An answer proves the fixture accepted it and a task serves it.
        conn.write_all(b"+").await?;
        let mut one = [0u8; 1];
        if conn.read(&mut one).await? != 1 || one != *b"+" {
            return Err(io::Error::other("no echo of the first byte"));
        }
        held.push(conn);
    }
    // All `count` are open and served at this point.
    let tasks: Vec<_> = held
        .into_iter()
        .enumerate()
        .map(|(i, conn)| {
            runtime::spawn(async move {
                let line = format!("connection {i}\n");
                conn.write_all(line.as_bytes()).await?;
                conn.shutdown(Shutdown::Write)?;
                let mut reply = Vec::new();
                let mut buf = [0u8; 64];
                loop {
                    match conn.read(&mut buf).await? {
                        0 => break,
                        n => reply.extend_from_slice(&buf[..n]),
                    }
                }
                Ok::<bool, io::Error>(reply == line.as_bytes())
            })
        })
        .collect();
    let mut answered = 0;
    for task in tasks {
        match task.await {
            Ok(Ok(true)) => answered += 1,
            Ok(Ok(false)) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
    }
    Ok(answered)
}

// ---- the load client ----------------------------------------------------------

/// A minimal round-robin relay for `connections` connections, each relayed
/// request first, reply second (the load client half-closes after its
/// request), so that one target can reach three backends. Not the proxy,
/// though this crate links it: these tests check the load client's
/// counting, and a relay with no modes, timeouts or balancing of its own
/// cannot be what a failure here is about (the proxy is tested end to end
/// in tests/).
fn round_robin_relay(
    backends: Vec<SocketAddr>,
    connections: usize,
) -> (SocketAddr, thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
    let addr = listener.local_addr().expect("relay address");
    let relay = thread::spawn(move || {
        for (i, client) in listener.incoming().take(connections).enumerate() {
            let backend = backends[i % backends.len()];
            match client {
                Ok(client) => {
                    thread::spawn(move || relay_one(client, backend));
                }
                Err(e) => eprintln!("relay: accept: {e}"),
            }
        }
    });
    (addr, relay)
}

fn relay_one(client: std::net::TcpStream, backend: SocketAddr) -> io::Result<()> {
    let server = std::net::TcpStream::connect(backend)?;
    io::copy(&mut &client, &mut &server)?;
    server.shutdown(Shutdown::Write)?;
    io::copy(&mut &server, &mut &client)?;
    client.shutdown(Shutdown::Write)
}

#[test]
fn load_through_a_round_robin_relay_is_counted_per_backend() {
    within(60, || {
        const REQUESTS: usize = 300;
        let fixture = start(3, FixtureMode::Reply, 20);
        let (target, relay) = round_robin_relay(fixture.addrs().to_vec(), REQUESTS);
        let report = run_closed_loop(&LoadOptions {
            target,
            clients: 10,
            requests: REQUESTS,
            timeout: Duration::from_secs(10),
            ..LoadOptions::default()
        })
        .expect("run the load");
        relay.join().expect("relay thread");
        assert_eq!(report.requests, REQUESTS as u64);
        assert_eq!(report.requests, report.ok + report.errors);
        assert_eq!(
            report.ok, REQUESTS as u64,
            "first error: {:?}",
            report.first_error
        );
        assert_eq!(report.latencies.len() as u64, report.ok);
        assert_eq!(report.per_backend.values().sum::<u64>(), report.ok);
        // Exact round-robin, one connection per request: 100 each.
        let expected: Vec<(String, u64)> = fixture
            .addrs()
            .iter()
            .map(|a| (format!("port {}", a.port()), 100))
            .collect();
        let mut got: Vec<(String, u64)> = report.per_backend.clone().into_iter().collect();
        got.sort();
        let mut expected_sorted = expected;
        expected_sorted.sort();
        assert_eq!(got, expected_sorted);
        check_latencies(&report, Duration::from_millis(20));
        eprintln!("{report}");
    });
}

/// Latencies are sorted, at least the fixture's delay, and their
/// percentiles ordered.
fn check_latencies(report: &tools::load::LoadReport, delay: Duration) {
    assert!(report.latencies.windows(2).all(|w| w[0] <= w[1]), "sorted");
    assert!(report.latencies[0] >= delay, "faster than the delay");
    let p50 = report.percentile(50.0).unwrap();
    let p99 = report.percentile(99.0).unwrap();
    let max = report.max().unwrap();
    assert!(
        p50 <= p99 && p99 <= max,
        "p50 {p50:?} p99 {p99:?} max {max:?}"
    );
    let average = report.average().unwrap();
    assert!(report.latencies[0] <= average && average <= max);
    assert!(report.req_per_sec() > 0.0);
}

#[test]
fn load_straight_to_one_backend_sees_its_port() {
    within(60, || {
        let fixture = start(1, FixtureMode::Reply, 5);
        let addr = fixture.addrs()[0];
        let report = run_closed_loop(&LoadOptions {
            target: addr,
            clients: 4,
            requests: 40,
            timeout: Duration::from_secs(10),
            ..LoadOptions::default()
        })
        .expect("run the load");
        assert_eq!((report.requests, report.ok, report.errors), (40, 40, 0));
        let tags: Vec<_> = report.per_backend.iter().collect();
        assert_eq!(tags, vec![(&format!("port {}", addr.port()), &40)]);
        check_latencies(&report, Duration::from_millis(5));
    });
}

#[test]
fn load_counts_refusals_resets_and_timeouts_as_errors() {
    within(60, || {
        // Refused: a port nobody listens on (bound, then closed).
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = free.local_addr().unwrap();
        drop(free);
        let report = load(refused, 3, 6, 5_000);
        assert_eq!((report.requests, report.ok, report.errors), (6, 0, 6));
        assert!(report.first_error.is_some());
        assert!(report.per_backend.is_empty() && report.latencies.is_empty());

        // Reset: a backend that answers with a reset.
        let resetting = start(1, FixtureMode::Reset, 0);
        let report = load(resetting.addrs()[0], 2, 4, 5_000);
        assert_eq!((report.requests, report.ok, report.errors), (4, 0, 4));

        // Timed out: a listener that never accepts (connections wait in
        // its backlog), so no reply ever comes.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let report = load(silent.local_addr().unwrap(), 3, 3, 200);
        assert_eq!((report.requests, report.ok, report.errors), (3, 0, 3));
        let error = report.first_error.unwrap_or_default();
        assert!(error.contains("no complete reply within"), "{error}");

        // An echo backend answers, but not with a tagged reply to the request.
        let echo = start(1, FixtureMode::Echo, 0);
        let report = load(echo.addrs()[0], 2, 4, 5_000);
        assert_eq!((report.ok, report.errors), (0, 4));
        let error = report.first_error.unwrap_or_default();
        assert!(error.contains("unexpected reply"), "{error}");
    });
}

fn load(
    target: SocketAddr,
    clients: usize,
    requests: usize,
    timeout_ms: u64,
) -> tools::load::LoadReport {
    run_closed_loop(&LoadOptions {
        target,
        clients,
        requests,
        timeout: Duration::from_millis(timeout_ms),
        ..LoadOptions::default()
    })
    .expect("run the load")
}

// ---- starting and stopping ------------------------------------------------------

#[test]
fn stop_returns_with_connections_open_and_closes_the_listeners() {
    within(30, || {
        let fixture = start(2, FixtureMode::Echo, 0);
        let addrs = fixture.addrs().to_vec();
        // An idle connection that is mid-echo when the fixture stops.
        let mut idle = connect(addrs[0]).unwrap();
        idle.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        idle.read_exact(&mut one).unwrap();
        fixture.stop();
        for addr in addrs {
            let e = std::net::TcpStream::connect(addr).expect_err("still listening");
            assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        }
        // The held connection was closed too: end of file (or a reset).
        let mut rest = Vec::new();
        match idle.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty()),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        }
    });
}

#[test]
fn dropping_a_fixture_stops_it_too() {
    within(30, || {
        let fixture = start(1, FixtureMode::Reply, 0);
        let addr = fixture.addrs()[0];
        drop(fixture);
        let e = std::net::TcpStream::connect(addr).expect_err("still listening");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    });
}

#[test]
fn start_on_fixed_addresses_and_a_taken_port() {
    within(30, || {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_addr = taken.local_addr().unwrap();
        let e = Fixture::start_on(&[taken_addr], FixtureOptions::default())
            .expect_err("the port is taken");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");

        // Port 0 in a fixed address: the real port is reported.
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let fixture = Fixture::start_on(&[any, any], FixtureOptions::default()).unwrap();
        assert_eq!(fixture.addrs().len(), 2);
        assert!(
            fixture
                .addrs()
                .iter()
                .all(|a| a.port() != 0 && a.ip() == any.ip())
        );
        assert_ne!(fixture.addrs()[0], fixture.addrs()[1]);
        let port = fixture.addrs()[1].port();
        assert_eq!(
            text(&ask(fixture.addrs()[1], b"hi\n").unwrap()),
            format!("port {port}: hi\n")
        );
    });
}
