//! End to end, every mode: the real proxy binary (`e2e-proxy`, the very
//! entry point of `proxy`) in `--mode single`, `pool` (`--picker mutex` and
//! `atomic`), `epoll` (`--workers 1` and `2`; with the default `--splice
//! auto`, with `--splice off`, the copy path alone, and with `--splice on`,
//! the splice path from the first byte) and `states` (the hand-written
//! level-triggered loop), between real clients and real backends over
//! loopback.
//!
//! Each check below is one function taking the [`Mode`]; `every_mode!` at
//! the bottom turns it into one test per mode (`single::...`,
//! `pool_mutex::...`, `epoll_2::...`, `states::...`). Each test starts its own backends and
//! its own proxy on port 0 (the proxy says where in its `listening on`
//! line), and stops the proxy with SIGTERM, expecting exit status 0.
//!
//! The clauses are the connection contract of docs/RELAY.md and of
//! docs/EPOLL.md section 5. The blocking relay
//! (blocking/relay.rs) and the async relay (conn/relay.rs) keep the same
//! contract, down to closing a timed-out connection with a reset.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};

use common::*;

fn fixture(count: usize, mode: FixtureMode) -> Fixture {
    Fixture::start(
        count,
        FixtureOptions {
            mode,
            ..FixtureOptions::default()
        },
    )
    .expect("start the fixture")
}

// ---------------------------------------------------------------------------
// Round robin
// ---------------------------------------------------------------------------

fn round_robin(mode: Mode) {
    let fixture = fixture(3, FixtureMode::Reply);
    let backends = fixture.addrs().to_vec();
    let proxy = start_proxy(mode, &backends, &[]);
    let mut counts = [0usize; 3];
    for _ in 0..300 {
        let port = which_backend(proxy.addr());
        let index = backends.iter().position(|b| b.port() == port);
        counts[index.expect("a port we started")] += 1;
    }
    // The single mode always uses the first backend; the pool's workers
    // share one counter, so they rotate exactly.
    match mode {
        Mode::Single => assert_eq!(counts, [300, 0, 0]),
        _ if mode.is_two_workers() => {
            // Each event loop rotates exactly over the connections the
            // kernel gave it (per-worker balancers, as nginx's workers), so
            // each backend is off by at most one per worker.
            for count in counts {
                assert!((98..=102).contains(&count), "{mode:?}: {counts:?}");
            }
        }
        _ => assert_eq!(counts, [100, 100, 100], "{mode:?}"),
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Bytes delivered exactly
// ---------------------------------------------------------------------------

fn concurrent_random_payloads(mode: Mode) {
    const CLIENTS: u64 = 200;
    const MAX: u64 = 1 << 20;
    let fixture = fixture(1, FixtureMode::Echo);
    let proxy = start_proxy(mode, fixture.addrs(), &[]);
    let addr = proxy.addr();
    let mut sizes = Prng::new(2024);
    let lengths: Vec<u64> = (0..CLIENTS).map(|_| sizes.up_to(MAX)).collect();
    let failures: Vec<String> = thread::scope(|s| {
        let clients: Vec<_> = lengths
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                s.spawn(move || {
                    echo_round_trip(addr, i as u64, len)
                        .map_err(|e| format!("client {i} ({len} bytes): {e}"))
                })
            })
            .collect();
        clients
            .into_iter()
            .filter_map(|c| c.join().expect("client thread").err())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{mode:?}: {} of {CLIENTS} clients failed:\n{}\nproxy stderr:\n{}",
        failures.len(),
        failures.join("\n"),
        proxy.log().join("\n")
    );
    stop_cleanly(proxy);
}

fn hundred_mib(mode: Mode) {
    const SIZE: u64 = 100 << 20;
    let fixture = fixture(1, FixtureMode::Echo);
    let proxy = start_proxy(mode, fixture.addrs(), &[]);
    if let Err(e) = echo_round_trip(proxy.addr(), 100, SIZE) {
        panic!("{mode:?}: {e}\nproxy stderr:\n{}", proxy.log().join("\n"));
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Half-close, banners
// ---------------------------------------------------------------------------

/// Reads everything until the client's FIN, then answers it reversed: a
/// backend that answers only after EOF (sort, wc, an upload).
fn answer_after_eof(mut stream: TcpStream) -> std::io::Result<()> {
    let mut request = read_all(&stream)?;
    request.reverse();
    stream.write_all(&request)
}

fn half_close(mode: Mode) {
    let backend = StdBackend::start(answer_after_eof);
    let proxy = start_proxy(mode, &[backend.addr()], &[]);
    let mut request = vec![0u8; 200_000];
    Prng::new(7).fill(&mut request);
    let stream = connect(proxy.addr());
    // The backend answers only after our FIN: a relay that does not pass
    // the FIN on, or that stops reading the backend once the client has
    // closed its side, fails here.
    (&stream).write_all(&request).expect("send");
    stream.shutdown(Shutdown::Write).expect("FIN");
    let answer = read_all(&stream).expect("the answer after our FIN");
    assert_eq!(answer.len(), request.len());
    assert!(answer.iter().rev().eq(request.iter()), "answer mangled");
    stop_cleanly(proxy);
}

fn banner(mode: Mode) {
    let fixture = Fixture::start(
        1,
        FixtureOptions {
            mode: FixtureMode::Banner,
            banner: "220 e2e ready".into(),
            ..FixtureOptions::default()
        },
    )
    .expect("fixture");
    let proxy = start_proxy(mode, fixture.addrs(), &[]);
    let mut stream = connect(proxy.addr());
    // We send nothing: the relay must not wait for the client first.
    let mut line = [0u8; 14];
    stream
        .read_exact(&mut line)
        .expect("the banner, before we send");
    assert_eq!(&line, b"220 e2e ready\n");
    stream.write_all(b"after the banner\n").expect("write");
    let mut echoed = [0u8; 17];
    stream.read_exact(&mut echoed).expect("echo");
    assert_eq!(&echoed, b"after the banner\n");
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Resets
// ---------------------------------------------------------------------------

fn backend_reset(mode: Mode) {
    let fixture = fixture(1, FixtureMode::Reset);
    let proxy = start_proxy(mode, fixture.addrs(), &[]);
    let mut stream = connect(proxy.addr());
    stream.write_all(b"please reset\n").expect("request");
    let e = read_all(&stream).expect_err("a reset, not an EOF");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{mode:?}: {e}");
    stop_cleanly(proxy);
}

fn backend_reset_mid_reply(mode: Mode) {
    const REPLY: usize = 4 << 20;
    let backend = StdBackend::start(|mut stream| {
        // A long reply, cut off by a reset.
        read_line(&mut stream)?;
        let chunk = vec![b'r'; 64 * 1024];
        for _ in 0..REPLY / chunk.len() {
            stream.write_all(&chunk)?;
        }
        proxy::blocking::relay::reset(stream);
        Ok(())
    });
    let proxy = start_proxy(mode, &[backend.addr()], &[]);
    let mut stream = connect(proxy.addr());
    stream.write_all(b"a long one, please\n").expect("request");
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        match stream.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got += n,
            Err(e) => break Err(e),
        }
        assert!(got <= REPLY, "{mode:?}: more bytes than the backend sent");
    };
    // Whatever part of the reply arrived, a cut-off stream must not end
    // like a complete one.
    match end {
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{mode:?}: {e}"),
        Ok(()) => panic!("{mode:?}: a clean EOF after {got} of {REPLY} bytes"),
    }
    stop_cleanly(proxy);
}

/// A backend that echoes one line, then reports what its next read got.
fn line_then_report(reports: mpsc::Sender<String>) -> StdBackend {
    StdBackend::start(move |mut stream| {
        let line = read_line(&mut stream)?;
        stream.write_all(&line)?;
        let mut buf = [0u8; 64];
        let _ = reports.send(describe(&stream.read(&mut buf)));
        Ok(())
    })
}

fn client_reset(mode: Mode) {
    let (tx, reports) = mpsc::channel();
    let backend = line_then_report(tx);
    let proxy = start_proxy(mode, &[backend.addr()], &[]);
    let mut stream = connect(proxy.addr());
    stream.write_all(b"hello\n").expect("request");
    let mut echoed = [0u8; 6];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    // SO_LINGER 0, then close: our side sends RST.
    proxy::blocking::relay::reset(stream);
    let seen = wait_report(&reports, "its read after our reset");
    assert_eq!(seen, "reset", "{mode:?}: the backend's read saw {seen}");
    stop_cleanly(proxy);
}

fn client_reset_after_fin(mode: Mode) {
    let (tx, reports) = mpsc::channel();
    let backend = StdBackend::start(move |mut stream| {
        // Echoes until the client's FIN, then waits in silence to see
        // whether the connection is reset.
        let line = read_line(&mut stream)?;
        stream.write_all(&line)?;
        read_all(&stream)?;
        let _ = tx.send("eof".to_string());
        let reset = hangs_up_within(&stream, Duration::from_secs(5));
        let _ = tx.send(if reset { "reset" } else { "nothing within 5 s" }.to_string());
        Ok(())
    });
    // Timeouts far away: whatever happens within 5 s is the reset's doing.
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "30s", "--fin-timeout", "30s"],
    );
    let mut stream = connect(proxy.addr());
    stream.write_all(b"hello\n").expect("request");
    let mut echoed = [0u8; 6];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    stream.shutdown(Shutdown::Write).expect("FIN");
    assert_eq!(wait_report(&reports, "the client's FIN"), "eof");
    // The client goes away for good: SO_LINGER 0, then close.
    proxy::blocking::relay::reset(stream);
    let seen = wait_report(&reports, "whether it was reset");
    assert_eq!(
        seen, "reset",
        "{mode:?}: after the client's FIN and reset, the backend saw"
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Refused backends
// ---------------------------------------------------------------------------

/// The client of a refused connection sees it end promptly: a reset, or
/// (if the reset raced our write) an EOF; never a hang, never bytes. The
/// proxy runs with `--connect-timeout 30s`, so this is the refusal, not a
/// timeout.
fn assert_closed_promptly(proxy: SocketAddr) {
    let begun = Instant::now();
    // The reset may come so fast that it beats the end of our own connect.
    let ended = try_connect(proxy).and_then(|stream| read_all(&stream));
    assert!(
        matches!(&ended, Err(e) if e.kind() == ErrorKind::ConnectionReset)
            || matches!(&ended, Ok(bytes) if bytes.is_empty()),
        "{ended:?}"
    );
    let waited = begun.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "closed only after {waited:?}"
    );
}

fn refused_backend(mode: Mode) {
    let refused = ClosedPort::new();
    if mode == Mode::Single {
        // The single mode has one backend and one connection at a time: no
        // concurrent good connection is possible. It must close each
        // refused client promptly and go on: once the backend is up, the
        // next client is served.
        let proxy = start_proxy(mode, &[refused.addr()], &["--connect-timeout", "30s"]);
        for _ in 0..3 {
            assert_closed_promptly(proxy.addr());
        }
        let backend = StdBackend::serve(refused.listen(), echo);
        let mut stream = connect(proxy.addr());
        stream.write_all(b"up now\n").expect("write");
        let mut got = [0u8; 7];
        stream
            .read_exact(&mut got)
            .expect("served once the backend is up");
        assert_eq!(&got, b"up now\n");
        drop((stream, backend));
        stop_cleanly(proxy);
        return;
    }
    // Round robin sends the first connection to the echo backend and the
    // second to the refused port (the epoll mode without retries: with them
    // it would try the echo instead, tested below). The second is closed at
    // once; the first, open all along, does not notice; the third goes to
    // the echo again. With two event loops, each rotates on its own, so the
    // refused one and the next good one are found within a few connections.
    let fixture = fixture(1, FixtureMode::Echo);
    let backends = [fixture.addrs()[0], refused.addr()];
    let no_retries: &[&str] = if mode.is_epoll() {
        &["--connect-timeout", "30s", "--retries", "0"]
    } else {
        &["--connect-timeout", "30s"]
    };
    let proxy = start_proxy(mode, &backends, no_retries);
    let mut got = [0u8; 7];
    // With two event loops, each starts its rotation at a different
    // backend: the first connection may be the refused one. Open until one
    // reaches the echo (it stays open for the rest of the test).
    let mut good = (0..8)
        .find_map(|_| {
            let mut stream = try_connect(proxy.addr()).ok()?;
            set_timeouts(&stream, Duration::from_secs(10));
            stream.write_all(b"before\n").ok()?;
            stream.read_exact(&mut got).ok()?;
            Some(stream)
        })
        .expect("a connection reaches the echo backend");
    assert_eq!(&got, b"before\n");
    if mode.is_two_workers() {
        let refused_seen = (0..8).any(|_| !echoes(proxy.addr()));
        assert!(refused_seen, "no connection went to the refused backend");
    } else {
        assert_closed_promptly(proxy.addr());
    }
    good.write_all(b"after!\n").expect("write");
    good.read_exact(&mut got).expect("echo after");
    assert_eq!(&got, b"after!\n");
    let served = (0..8).any(|_| echoes(proxy.addr()));
    assert!(served, "no later connection was served");
    // Logged before the reset; the test reads the log on another thread.
    let logged = wait_until(Duration::from_secs(5), || {
        proxy
            .log()
            .iter()
            .any(|l| l.to_lowercase().contains("connection refused"))
    });
    assert!(logged, "not logged:\n{}", proxy.log().join("\n"));
    drop(good);
    stop_cleanly(proxy);
}

/// One connection through `proxy`: true if it echoes a line, false if it
/// is closed promptly (a refused backend); anything else fails the test.
fn echoes(proxy: SocketAddr) -> bool {
    let begun = Instant::now();
    let mut stream = match try_connect(proxy) {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => return false,
        Err(e) => panic!("connect: {e}"),
    };
    set_timeouts(&stream, Duration::from_secs(10));
    let line = b"third\n";
    let _ = stream.write_all(line);
    let mut got = [0u8; 6];
    match stream.read_exact(&mut got) {
        Ok(()) => {
            assert_eq!(&got, line);
            true
        }
        Err(e) => {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof
                ),
                "{e}"
            );
            assert!(begun.elapsed() < Duration::from_secs(5), "closed late");
            false
        }
    }
}

/// With retries (the epoll mode's default, 3), a refused backend in the
/// pool costs its clients nothing: each is served by another backend, and
/// the refusals are logged.
fn retried_elsewhere(mode: Mode) {
    let refused = ClosedPort::new();
    let fixture = fixture(1, FixtureMode::Echo);
    let backends = [refused.addr(), fixture.addrs()[0]];
    let proxy = start_proxy(mode, &backends, &["--connect-timeout", "30s"]);
    for n in 0..20 {
        assert!(echoes(proxy.addr()), "connection {n} was not served");
    }
    let logged = wait_until(Duration::from_secs(5), || {
        proxy.log().iter().any(|l| l.contains("retrying on"))
    });
    assert!(logged, "not logged:\n{}", proxy.log().join("\n"));
    stop_cleanly(proxy);
}

fn connect_timeout(mode: Mode) {
    let (listener, _fillers) = unanswering_backend();
    let addr = listener.local_addr().expect("addr");
    let proxy = start_proxy(mode, &[addr], &["--connect-timeout", "300ms"]);
    let begun = Instant::now();
    let ended = try_connect(proxy.addr()).and_then(|stream| read_all(&stream));
    let waited = begun.elapsed();
    assert!(
        matches!(&ended, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "{mode:?}: expected a reset, got {ended:?}"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "reset before the timeout: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "reset only after {waited:?}"
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Timeouts and half-closed connections
// ---------------------------------------------------------------------------

/// The client's last read, as [`describe`] says it.
fn last_read(stream: &TcpStream) -> String {
    describe(&read_all(stream).map(|bytes| bytes.len()))
}

fn idle_timeout(mode: Mode) {
    let (tx, reports) = mpsc::channel();
    let backend = line_then_report(tx);
    let proxy = start_proxy(mode, &[backend.addr()], &["--idle-timeout", "300ms"]);
    let begun = Instant::now();
    let mut stream = connect(proxy.addr());
    stream.write_all(b"x\n").expect("write");
    let mut echoed = [0u8; 2];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    // Now silent both ways.
    let client_saw = last_read(&stream);
    let waited = begun.elapsed();
    let expected = Closed::Reset.word();
    assert_eq!(client_saw, expected, "{mode:?}: the client saw");
    assert!(
        waited >= Duration::from_millis(300),
        "closed before the idle timeout: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "closed only after {waited:?}"
    );
    let backend_saw = wait_report(&reports, "its read");
    assert_eq!(backend_saw, expected, "{mode:?}: the backend saw");
    stop_cleanly(proxy);
}

fn traffic_keeps_alive(mode: Mode) {
    let fixture = fixture(1, FixtureMode::Echo);
    // The idle timeout is 40 times the gap between two bytes, so that a
    // machine busy with other tests cannot stretch a gap into a timeout
    // (20 times was not enough at a load average of 45 on 2 cores).
    let proxy = start_proxy(mode, fixture.addrs(), &["--idle-timeout", "2s"]);
    let mut stream = connect(proxy.addr());
    let begun = Instant::now();
    // A byte every 50 ms for 2.5 seconds: never two seconds of silence.
    for i in 0..50u8 {
        thread::sleep(Duration::from_millis(50));
        stream.write_all(&[i]).expect("write");
        let mut one = [0u8; 1];
        stream.read_exact(&mut one).expect("still relayed");
        assert_eq!(one[0], i);
    }
    assert!(begun.elapsed() >= Duration::from_millis(2500));
    stream.shutdown(Shutdown::Write).expect("FIN");
    assert_eq!(last_read(&stream), "eof", "{mode:?}: a clean end");
    stop_cleanly(proxy);
}

fn fin_timeout_after_client_fin(mode: Mode) {
    // Dropped at the end of the test: lets the backend's handler go.
    let (done, wait_done) = mpsc::channel::<()>();
    let wait_done = Mutex::new(wait_done);
    let backend = StdBackend::start(move |mut stream| {
        // Echoes until the client's FIN, then says nothing and keeps the
        // socket open until the test is over.
        let line = read_line(&mut stream)?;
        stream.write_all(&line)?;
        read_all(&stream)?;
        if let Ok(done) = wait_done.lock() {
            let _ = done.recv_timeout(IO_TIMEOUT);
        }
        Ok(())
    });
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "10s", "--fin-timeout", "300ms"],
    );
    let begun = Instant::now();
    let mut stream = connect(proxy.addr());
    stream.write_all(b"x\n").expect("write");
    let mut echoed = [0u8; 2];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    stream.shutdown(Shutdown::Write).expect("FIN");
    let client_saw = last_read(&stream);
    let waited = begun.elapsed();
    assert_eq!(client_saw, Closed::Reset.word(), "{mode:?}: the client saw");
    assert!(
        waited >= Duration::from_millis(300),
        "closed before the fin timeout: {waited:?}"
    );
    // Well before the 10 s idle timeout: this was the fin timeout.
    assert!(
        waited < Duration::from_secs(5),
        "closed only after {waited:?}"
    );
    drop(done);
    stop_cleanly(proxy);
}

fn fin_timeout_after_backend_fin(mode: Mode) {
    let (tx, reports) = mpsc::channel();
    let backend = StdBackend::start(move |mut stream| {
        // Answers one line, sends its FIN, and reports how the proxy then
        // closes its side.
        let line = read_line(&mut stream)?;
        stream.write_all(&line)?;
        stream.shutdown(Shutdown::Write)?;
        let mut buf = [0u8; 64];
        let _ = tx.send(describe(&stream.read(&mut buf)));
        Ok(())
    });
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "10s", "--fin-timeout", "300ms"],
    );
    let begun = Instant::now();
    let mut stream = connect(proxy.addr());
    stream.write_all(b"x\n").expect("write");
    let mut echoed = [0u8; 2];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    let mut eof = [0u8; 1];
    assert_eq!(stream.read(&mut eof).expect("the backend's FIN"), 0);
    // The client keeps its side open and says nothing.
    let backend_saw = wait_report(&reports, "how its connection ended");
    let waited = begun.elapsed();
    assert_eq!(
        backend_saw,
        Closed::Reset.word(),
        "{mode:?}: the backend saw"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "closed before the fin timeout: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "closed only after {waited:?}"
    );
    drop(stream);
    stop_cleanly(proxy);
}

fn flows_after_half_close(mode: Mode) {
    const CHUNKS: usize = 20;
    const CHUNK: usize = 1000;
    let backend = StdBackend::start(|mut stream| {
        // Waits for the client's FIN, then keeps talking for a second, a
        // chunk every 50 ms (more than the fin timeout in all, never that
        // long a pause), then closes.
        read_all(&stream)?;
        for i in 0..CHUNKS {
            thread::sleep(Duration::from_millis(50));
            stream.write_all(&[b'a' + (i % 26) as u8; CHUNK])?;
        }
        stream.shutdown(Shutdown::Write)
    });
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "10s", "--fin-timeout", "300ms"],
    );
    let mut stream = connect(proxy.addr());
    stream.write_all(b"go\n").expect("request");
    stream.shutdown(Shutdown::Write).expect("FIN");
    let got = read_all(&stream).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    let expected: Vec<u8> = (0..CHUNKS)
        .flat_map(|i| [b'a' + (i % 26) as u8; CHUNK])
        .collect();
    assert_eq!(got.len(), expected.len(), "{mode:?}: bytes after our FIN");
    assert!(got == expected, "{mode:?}: bytes mangled");
    stop_cleanly(proxy);
}

fn flows_after_backend_fin(mode: Mode) {
    const CHUNKS: usize = 20;
    const CHUNK: usize = 1000;
    let (tx, reports) = mpsc::channel();
    let backend = StdBackend::start(move |mut stream| {
        // Speaks first and sends its FIN at once, then takes the client's
        // whole upload and reports what came.
        stream.write_all(b"bye\n")?;
        stream.shutdown(Shutdown::Write)?;
        let (upload, end) = match read_all(&stream) {
            Ok(upload) => (upload, Ok(0)),
            Err(e) => (Vec::new(), Err(e)),
        };
        let expected: Vec<u8> = (0..CHUNKS)
            .flat_map(|i| [b'A' + (i % 26) as u8; CHUNK])
            .collect();
        let _ = tx.send(format!(
            "{} bytes, {}, ended with {}",
            upload.len(),
            if upload == expected {
                "intact"
            } else {
                "mangled"
            },
            describe(&end)
        ));
        Ok(())
    });
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "10s", "--fin-timeout", "300ms"],
    );
    let mut stream = connect(proxy.addr());
    assert_eq!(
        read_all(&stream).expect("the backend's words, then its FIN"),
        b"bye\n"
    );
    // A second of upload after the backend's FIN, a chunk every 50 ms.
    for i in 0..CHUNKS {
        thread::sleep(Duration::from_millis(50));
        stream
            .write_all(&[b'A' + (i % 26) as u8; CHUNK])
            .unwrap_or_else(|e| panic!("{mode:?}: chunk {i}: {e}"));
    }
    stream.shutdown(Shutdown::Write).expect("FIN");
    let seen = wait_report(&reports, "the upload");
    assert_eq!(
        seen,
        format!("{} bytes, intact, ended with eof", CHUNKS * CHUNK),
        "{mode:?}"
    );
    stop_cleanly(proxy);
}

fn fin_timeout_counts_from_the_half_close(mode: Mode) {
    let backend = StdBackend::start(|mut stream| {
        // Answers a line at once; after the client's FIN, takes 100 ms
        // (well within the fin timeout) to send its last words.
        let line = read_line(&mut stream)?;
        stream.write_all(&line)?;
        read_all(&stream)?;
        thread::sleep(Duration::from_millis(100));
        stream.write_all(b"last words\n")?;
        stream.shutdown(Shutdown::Write)
    });
    let proxy = start_proxy(
        mode,
        &[backend.addr()],
        &["--idle-timeout", "10s", "--fin-timeout", "300ms"],
    );
    let mut stream = connect(proxy.addr());
    stream.write_all(b"x\n").expect("write");
    let mut echoed = [0u8; 2];
    stream.read_exact(&mut echoed).expect("relayed both ways");
    // Quiet both ways for longer than the fin timeout (not the idle one),
    // then the client half-closes: only now is the connection half-closed.
    thread::sleep(Duration::from_millis(600));
    stream.shutdown(Shutdown::Write).expect("FIN");
    let rest = read_all(&stream);
    assert!(
        matches!(&rest, Ok(bytes) if bytes == b"last words\n"),
        "{mode:?}: the backend answered 100 ms after the client's FIN, with a 300 ms fin \
         timeout, and the client got {:?}",
        rest.map(|b| String::from_utf8_lossy(&b).into_owned())
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Stopping
// ---------------------------------------------------------------------------

fn sigterm(mode: Mode) {
    let fixture = fixture(1, FixtureMode::Reply);
    // The pool and epoll modes drain first: the idle connection below holds
    // them for the grace period (tests/lifecycle.rs tests the drain itself).
    let grace: &[&str] = if mode == Mode::Single {
        &[]
    } else {
        &["--grace", "500ms"]
    };
    let proxy = start_proxy(mode, fixture.addrs(), grace);
    which_backend(proxy.addr());
    let _open = connect(proxy.addr()); // a connection still open at SIGTERM
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Every check, for every mode
// ---------------------------------------------------------------------------

macro_rules! every_mode {
    ($($name:ident: $mode:expr;)*) => {$(
        mod $name {
            use super::*;

            const MODE: Mode = $mode;

            // Round robin is exact over 3 backends (single: always the first).
            #[test]
            fn round_robin_over_three_backends() {
                round_robin(MODE);
            }

            // Bytes exactly, both ways: 200 concurrent random payloads of up to 1 MiB.
            #[test]
            fn two_hundred_concurrent_payloads_come_back_intact() {
                concurrent_random_payloads(MODE);
            }

            // Bytes exactly, both ways: a 100 MiB transfer, streamed.
            #[test]
            fn a_100_mib_transfer_arrives_intact() {
                hundred_mib(MODE);
            }

            // Half-close: the client's FIN is passed on and the backend's reply still flows.
            #[test]
            fn a_half_closed_client_gets_the_whole_answer() {
                half_close(MODE);
            }

            // The backend speaks first: its banner is relayed before the client sends.
            #[test]
            fn a_backend_that_speaks_first_is_relayed() {
                banner(MODE);
            }

            // Reset: a backend reset reaches the client as a reset, not an EOF.
            #[test]
            fn a_backend_reset_reaches_the_client_as_a_reset() {
                backend_reset(MODE);
            }

            // Reset: a backend reset in the middle of a long reply reaches the client as a reset, never a clean end.
            #[test]
            fn a_backend_reset_mid_reply_reaches_the_client_as_a_reset() {
                backend_reset_mid_reply(MODE);
            }

            // Reset: a client reset reaches the backend as a reset, not an EOF.
            #[test]
            fn a_client_reset_reaches_the_backend_as_a_reset() {
                client_reset(MODE);
            }

            // Reset: a client reset after its own FIN still reaches the (silent) backend as a reset.
            #[test]
            fn a_client_reset_after_its_fin_reaches_the_backend_as_a_reset() {
                client_reset_after_fin(MODE);
            }

            // Connect fails: a refused backend closes its client promptly, others unharmed.
            #[test]
            fn a_refused_backend_closes_the_client_and_spares_the_others() {
                refused_backend(MODE);
            }

            // Connect fails: a backend that never answers the SYN resets the client after --connect-timeout.
            #[test]
            fn an_unanswered_connect_resets_the_client_after_the_connect_timeout() {
                connect_timeout(MODE);
            }

            // Idle: no byte either way for --idle-timeout closes both sides, not earlier.
            #[test]
            fn an_idle_connection_is_closed_after_the_idle_timeout() {
                idle_timeout(MODE);
            }

            // Idle: bytes moving keep a connection open past --idle-timeout.
            #[test]
            fn traffic_keeps_a_connection_past_the_idle_timeout() {
                traffic_keeps_alive(MODE);
            }

            // Half-closed and silent: after the client's FIN, a silent backend is cut at --fin-timeout.
            #[test]
            fn a_silent_backend_after_the_clients_fin_is_cut_at_the_fin_timeout() {
                fin_timeout_after_client_fin(MODE);
            }

            // Half-closed and silent: after the backend's FIN, a silent client is cut at --fin-timeout.
            #[test]
            fn a_silent_client_after_the_backends_fin_is_cut_at_the_fin_timeout() {
                fin_timeout_after_backend_fin(MODE);
            }

            // Half-close: the opposite direction keeps flowing, past --fin-timeout, while it moves.
            #[test]
            fn the_other_direction_flows_on_after_a_half_close() {
                flows_after_half_close(MODE);
            }

            // Half-close: after the backend's FIN, the client's upload keeps flowing, past --fin-timeout.
            #[test]
            fn the_clients_upload_flows_on_after_the_backends_fin() {
                flows_after_backend_fin(MODE);
            }

            // Half-closed and silent: the fin timeout counts from the half-close, not from the last byte.
            #[test]
            fn the_fin_timeout_counts_from_the_half_close() {
                fin_timeout_counts_from_the_half_close(MODE);
            }

            // Stopping: SIGTERM ends the process with exit status 0, a connection open.
            #[test]
            fn sigterm_exits_with_status_0() {
                sigterm(MODE);
            }
        }
    )*};
}

every_mode! {
    single: Mode::Single;
    pool_mutex: Mode::PoolMutex;
    pool_atomic: Mode::PoolAtomic;
    epoll_1: Mode::Epoll1;
    epoll_2: Mode::Epoll2;
    epoll_copy_1: Mode::EpollCopy1;
    epoll_splice_1: Mode::EpollSplice1;
    epoll_splice_2: Mode::EpollSplice2;
    states: Mode::States;
}

// The epoll mode only: it balances, the others rotate blindly.

#[test]
fn epoll_1_retries_a_refused_connect_on_another_backend() {
    retried_elsewhere(Mode::Epoll1);
}

#[test]
fn epoll_2_retries_a_refused_connect_on_another_backend() {
    retried_elsewhere(Mode::Epoll2);
}
