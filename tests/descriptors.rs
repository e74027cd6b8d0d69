//! End to end, descriptors: many of them (2,000 connections held open at
//! once by one epoll worker, and by the states mode's loop) and too few (a proxy whose RLIMIT_NOFILE runs
//! out must back off without spinning, and recover; a splice path with no descriptor left for
//! its pipe must copy instead).

mod common;

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use tools::process::child::ChildProcess;

use common::*;

fn sockets(fds: &[(u32, String)]) -> usize {
    fds.iter()
        .filter(|(_, what)| what.starts_with("socket:"))
        .count()
}

/// 2,000 concurrent connections at once through one event loop of `mode`,
/// each relayed both ways.
fn holds_2000_connections_at_once(mode: Mode) {
    const CONNECTIONS: usize = 2000;
    // Per connection: one descriptor here, two in the proxy, one in the
    // backend; the children inherit the raised limit. Room for the rest.
    let needed = 2 * CONNECTIONS as u64 + 1024;
    let limit = runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    if limit < needed {
        println!(
            "skipped: RLIMIT_NOFILE hard limit is {limit}, the test needs {needed} descriptors per process"
        );
        return;
    }
    // The real backend binary, in its own process: its 2,000 sockets are not ours.
    let backend = start_backend(1, &["--mode", "echo"]);
    let proxy = start_proxy(mode, backend.addrs(), &[]);
    let mut clients: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(proxy.addr())).collect();

    // All open at once: the proxy holds a client and a backend socket for
    // each (plus its listener) before any byte moves.
    let pid = proxy.pid();
    let held = wait_until(Duration::from_secs(30), || {
        sockets(&open_fds(pid)) > 2 * CONNECTIONS
    });
    assert!(
        held,
        "the proxy holds {} sockets, not {} (2 per connection + the listener)",
        sockets(&open_fds(pid)),
        2 * CONNECTIONS + 1
    );

    // Then every connection exchanges bytes, all still open.
    for (i, client) in clients.iter_mut().enumerate() {
        client
            .write_all(format!("{i:05}\n").as_bytes())
            .unwrap_or_else(|e| panic!("connection {i}: write: {e}"));
    }
    for (i, client) in clients.iter_mut().enumerate() {
        let mut got = [0u8; 6];
        client
            .read_exact(&mut got)
            .unwrap_or_else(|e| panic!("connection {i}: read: {e}"));
        assert_eq!(got, *format!("{i:05}\n").as_bytes(), "connection {i}");
    }
    // And each ends cleanly: our FIN, the echo's FIN back.
    for client in &clients {
        client.shutdown(Shutdown::Write).expect("FIN");
    }
    for (i, client) in clients.iter_mut().enumerate() {
        let rest = read_all(client).unwrap_or_else(|e| panic!("connection {i}: end: {e}"));
        assert!(
            rest.is_empty(),
            "connection {i}: {} bytes too many",
            rest.len()
        );
    }
    drop(clients);
    stop_cleanly(proxy);
    let status = backend.stop().expect("stop the backend");
    assert!(status.success(), "the backend's exit status: {status}");
}

// Epoll: 2,000 concurrent connections at once through --workers 1, each relayed both ways.
#[test]
fn epoll_one_worker_holds_2000_connections_at_once() {
    holds_2000_connections_at_once(Mode::Epoll1);
}

// The same through the splice path: every direction splices its
// first byte, and pipes are taken and given back as bytes come and go.
#[test]
fn epoll_one_worker_holds_2000_splicing_connections_at_once() {
    holds_2000_connections_at_once(Mode::EpollSplice1);
}

// The same through the hand-written level-triggered loop.
#[test]
fn states_holds_2000_connections_at_once() {
    holds_2000_connections_at_once(Mode::States);
}

/// The lowest RLIMIT_NOFILE that leaves exactly `free` descriptor numbers
/// unused by `fds`. (The limit caps the descriptor *number*; a new
/// descriptor takes the lowest free number.)
fn limit_leaving(fds: &[(u32, String)], free: usize) -> u64 {
    let mut left = free;
    let mut fd = 0;
    loop {
        if !fds.iter().any(|(open, _)| *open == fd) {
            left -= 1;
            if left == 0 {
                return u64::from(fd) + 1;
            }
        }
        fd += 1;
    }
}

/// Floods a proxy that has descriptors for exactly two relayed connections
/// (a client and a backend socket each). It must back off instead of
/// spinning, say why (rate-limited), and serve again once descriptors are
/// free.
///
/// `started` says when the proxy is at rest with its startup descriptors
/// open; `reserved` is how many descriptor numbers it holds invisibly (a
/// thread blocked in accept(2) has already reserved the number it will
/// return).
fn out_of_descriptors(proxy: ChildProcess, started: fn(&[(u32, String)]) -> bool, reserved: usize) {
    let pid = proxy.pid();
    assert!(
        wait_until(Duration::from_secs(10), || started(&open_fds(pid))),
        "the proxy never came to rest: {:?}",
        open_fds(pid)
    );
    let limit = limit_leaving(&open_fds(pid), reserved + 2 * 2);
    set_nofile_limit_of(pid, limit);

    let held: Vec<TcpStream> = (0..2)
        .map(|i| {
            let mut stream = connect(proxy.addr());
            let mut got = [0u8; 2];
            let echoed = stream
                .write_all(b"hi")
                .and_then(|()| stream.read_exact(&mut got));
            if let Err(e) = echoed {
                panic!(
                    "held connection {i}: {e}; stderr:\n{}",
                    proxy.log().join("\n")
                );
            }
            stream
        })
        .collect();

    // Out of descriptors now. Which call hits EMFILE (the accept loop's next
    // accept, or the connect to the backend, which then resets its client)
    // depends on the mode and on timing; either way nothing may spin.
    // A client the proxy resets at once (its backend connect hit EMFILE) may
    // see the reset before its own connect returns: closed, as below.
    let extra: Vec<io::Result<TcpStream>> = (0..3).map(|_| try_connect(proxy.addr())).collect();
    let before = cpu_ticks(pid);
    thread::sleep(Duration::from_millis(1200));
    let spent = cpu_ticks(pid) - before;
    // Ticks are 10 ms: a spinning accept loop would burn about 120.
    assert!(spent <= 30, "{spent} ticks of CPU in 1.2 s: spinning?");
    let said_why = wait_until(Duration::from_secs(5), || {
        proxy
            .log()
            .iter()
            .any(|l| l.contains("Too many open files"))
    });
    let log = proxy.log().join("\n");
    assert!(said_why, "no EMFILE warning:\n{log}");
    let accept_warnings = log.matches("accept: ").count();
    assert!(accept_warnings <= 2, "not rate-limited:\n{log}");

    // The held relays end and give their descriptors back. Each client that
    // waited meanwhile is then served or closed, promptly: none hangs.
    drop(held);
    for (i, stream) in extra.into_iter().enumerate() {
        let mut stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                assert_eq!(
                    e.kind(),
                    ErrorKind::ConnectionReset,
                    "waiting client {i}: {e}"
                );
                continue;
            }
        };
        set_timeouts(&stream, Duration::from_secs(10));
        let mut got = [0u8; 5];
        let outcome = stream
            .write_all(b"again")
            .and_then(|()| stream.read_exact(&mut got));
        match outcome {
            Ok(()) => assert_eq!(&got, b"again", "waiting client {i}"),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe
                ),
                "waiting client {i} neither served nor closed: {e}"
            ),
        }
    }
    // Then a new client is served. Descriptors come back asynchronously:
    // until they have, a new client may still be reset.
    let deadline = Instant::now() + Duration::from_secs(10);
    let served_again = loop {
        let attempt = try_connect(proxy.addr()).and_then(|mut fresh| {
            let mut got = [0u8; 5];
            fresh.write_all(b"fresh")?;
            fresh.read_exact(&mut got)?;
            Ok(got)
        });
        if matches!(attempt, Ok(got) if &got == b"fresh") {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(
        served_again,
        "not served after recovery; stderr:\n{}",
        proxy.log().join("\n")
    );
    stop_cleanly(proxy);
}

fn echo_fixture() -> Fixture {
    Fixture::start(
        1,
        FixtureOptions {
            mode: FixtureMode::Echo,
            ..FixtureOptions::default()
        },
    )
    .expect("fixture")
}

/// An epoll proxy of one worker at rest: the listener, the worker's
/// runtime (its epoll set and eventfd), and the main thread's (the same,
/// and the signalfd it reads SIGTERM and SIGHUP from).
/// At rest with one worker: the listener, and the one runtime's epoll,
/// eventfd and signalfd (the worker runs on the main thread's runtime).
fn epoll_at_rest(fds: &[(u32, String)]) -> bool {
    let count = |what: &str| fds.iter().filter(|(_, w)| w == what).count();
    sockets(fds) == 1
        && count("anon_inode:[eventpoll]") == 1
        && count("anon_inode:[eventfd]") == 1
        && count("anon_inode:[signalfd]") == 1
}

// Accept, out of descriptors (epoll): back off without spinning, then recover.
#[test]
fn epoll_out_of_descriptors_backs_off_without_spinning_and_recovers() {
    let fixture = echo_fixture();
    let proxy = start_proxy(Mode::Epoll1, fixture.addrs(), &[]);
    out_of_descriptors(proxy, epoll_at_rest, 0);
}

// `pipe2` failing with EMFILE (the limit leaves the client's and
// the backend's sockets, nothing for a pipe) puts the connection on the copy
// path: a megabyte echoed whole, both FINs passed on, nothing spinning.
#[test]
fn epoll_without_a_descriptor_for_a_pipe_copies_instead() {
    const SIZE: u64 = 1 << 20;
    let fixture = echo_fixture();
    let proxy = start_proxy(Mode::EpollSplice1, fixture.addrs(), &[]);
    let pid = proxy.pid();
    assert!(
        wait_until(Duration::from_secs(10), || epoll_at_rest(&open_fds(pid))),
        "the proxy never came to rest: {:?}",
        open_fds(pid)
    );
    // Pipes it has at rest (its stderr, say) are not the splice path's.
    let pipes = || {
        open_fds(pid)
            .iter()
            .filter(|(_, what)| what.starts_with("pipe:"))
            .count()
    };
    let at_rest = pipes();
    set_nofile_limit_of(pid, limit_leaving(&open_fds(pid), 2));
    if let Err(e) = echo_round_trip(proxy.addr(), 7, SIZE) {
        panic!("{e}; stderr:\n{}", proxy.log().join("\n"));
    }
    assert_eq!(
        pipes(),
        at_rest,
        "no pipe could be made: {:?}",
        open_fds(pid)
    );
    let log = proxy.log().join("\n");
    assert!(!log.contains("error"), "a copy is not an error:\n{log}");
    stop_cleanly(proxy);
}

// Accept, out of descriptors (pool): back off without spinning, then recover.
#[test]
fn pool_out_of_descriptors_backs_off_without_spinning_and_recovers() {
    let fixture = echo_fixture();
    let proxy = start_proxy(Mode::PoolMutex, fixture.addrs(), &["--threads", "4"]);
    // At rest: the listener, the accept thread blocked in accept(2), which
    // holds the number of the descriptor it will return (Linux reserves it
    // before waiting): one number fewer than /proc shows; and the main
    // thread's runtime, reading signals from a signalfd.
    fn started(fds: &[(u32, String)]) -> bool {
        sockets(fds) == 1 && fds.iter().any(|(_, w)| w == "anon_inode:[signalfd]")
    }
    out_of_descriptors(proxy, started, 1);
}

// Accept, out of descriptors (states): the listener leaves the read set for the backoff, no spin.
#[test]
fn states_out_of_descriptors_backs_off_without_spinning_and_recovers() {
    let fixture = echo_fixture();
    let proxy = start_proxy(Mode::States, fixture.addrs(), &[]);
    // At rest: the listener, the one epoll set, and the signalfd in it.
    fn started(fds: &[(u32, String)]) -> bool {
        let count = |what: &str| fds.iter().filter(|(_, w)| w == what).count();
        sockets(fds) == 1
            && count("anon_inode:[eventpoll]") == 1
            && count("anon_inode:[signalfd]") == 1
    }
    out_of_descriptors(proxy, started, 0);
}
