//! Network contracts on real loopback sockets: echo (IPv4, IPv6), connect
//! errors and timeouts, bulk transfer, half-close, addresses, many
//! connections, many registered descriptors, and readiness edges.

mod common;

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use common::{CountingWaker, Fnv1a, XorShift, within};
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, connect, socket};
use runtime::async_fd::AsyncFd;
use runtime::fd_limit::raise_nofile_limit;
use runtime::net::{
    ListenOptions, TcpListener, TcpStream, accept_std, bind_std, connect_std, connect_std_from,
};
use runtime::reactor::Interest;
use runtime::time::{Elapsed, timeout};
use runtime::{Builder, Runtime, spawn, yield_now};

fn v4() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Echoes everything it reads until EOF, then closes; returns the byte count.
async fn echo_conn(conn: TcpStream) -> io::Result<u64> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0;
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        conn.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Reads until EOF.
async fn read_to_end(conn: &TcpStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match conn.read(&mut buf).await? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Connects, sends `payload` then FIN (from a separate task, so any size
/// works), and returns everything read back until EOF.
async fn round_trip(addr: SocketAddr, payload: Vec<u8>) -> io::Result<Vec<u8>> {
    let conn = Rc::new(TcpStream::connect(addr).await?);
    let w = conn.clone();
    let writer = spawn(async move {
        w.write_all(&payload).await?;
        w.shutdown(Shutdown::Write)
    });
    let got = read_to_end(&conn).await?;
    writer.await.expect("writer task")?;
    Ok(got)
}

/// Runs one echo exchange against a listener bound to `addr`.
fn echo_test(addr: SocketAddr) {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(addr).unwrap();
        let local = listener.local_addr().unwrap();
        assert_eq!(local.ip(), addr.ip());
        assert_ne!(local.port(), 0);
        let server = spawn(async move {
            let (conn, peer) = listener.accept().await?;
            assert_eq!(peer.ip(), local.ip(), "the client is on loopback too");
            echo_conn(conn).await
        });
        let payload = XorShift::new(u64::from(local.port())).bytes(300_000);
        let got = round_trip(local, payload.clone()).await.unwrap();
        assert_eq!(got.len(), payload.len());
        assert!(got == payload, "echoed bytes differ");
        assert_eq!(server.await.unwrap().unwrap(), payload.len() as u64);
    });
    assert_eq!(rt.registered_fds(), 0, "every socket deregistered");
}

// Bytes sent to an echo server on 127.0.0.1 come back identical, then EOF.
#[test]
fn echo_over_ipv4_loopback() {
    within(30, || echo_test(v4()));
}

// Bytes sent to an echo server on [::1] come back identical (skipped where the host has no IPv6 loopback).
#[test]
fn echo_over_ipv6_loopback() {
    within(30, || {
        let addr = SocketAddr::from((Ipv6Addr::LOCALHOST, 0));
        // Probe with a plain socket first: the runtime is not under test here.
        if let Err(e) = std::net::TcpListener::bind(addr) {
            let unavailable = e.kind() == io::ErrorKind::AddrNotAvailable
                || e.raw_os_error() == Some(libc::EAFNOSUPPORT)
                || e.raw_os_error() == Some(libc::EADDRNOTAVAIL);
            if unavailable {
                eprintln!("note: skipping echo_over_ipv6_loopback, [::1] is unavailable here: {e}");
                return;
            }
            panic!("binding [::1]:0 failed: {e}");
        }
        echo_test(addr);
    });
}

// Connecting to a port nobody listens on fails with ConnectionRefused and leaves nothing registered.
#[test]
fn connection_refused_is_an_error() {
    within(10, || {
        let addr = {
            let l = std::net::TcpListener::bind(v4()).unwrap();
            l.local_addr().unwrap()
        }; // closed here: the port is now free
        let rt = Runtime::new().unwrap();
        let result = rt.block_on(timeout(Duration::from_secs(5), TcpStream::connect(addr)));
        match result {
            Ok(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
            Ok(Ok(s)) => panic!("connected to a closed port: {s:?}"),
            Err(Elapsed) => panic!("a refused connect hung instead of failing"),
        }
        assert_eq!(rt.registered_fds(), 0);
    });
}

/// Starts a non-blocking connect to `addr` and returns the socket without
/// waiting: a filler for a listener's accept queue.
fn start_connect(addr: SocketAddrV4) -> OwnedFd {
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let fd = socket(AddressFamily::Inet, SockType::Stream, flags, None).expect("socket");
    match connect(fd.as_raw_fd(), &SockaddrIn::from(addr)) {
        Ok(()) | Err(Errno::EINPROGRESS) => fd,
        Err(e) => panic!("connect: {e}"),
    }
}

// A connect to a listener whose accept queue is full never completes; time::timeout bounds it, and it leaves nothing registered.
#[test]
fn connect_to_a_full_backlog_is_bounded_by_timeout() {
    within(60, || {
        const MAX_FILLERS: usize = 64;
        let probe_limit = Duration::from_millis(300);
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let options = ListenOptions {
                backlog: 1,
                ..ListenOptions::default()
            };
            let listener = TcpListener::bind_with(v4(), &options).unwrap(); // never accepts
            let SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
                unreachable!("bound to an IPv4 address")
            };
            let mut fillers = Vec::new();
            let mut completed = Vec::new(); // probes that got in: they fill the queue too
            let mut timed_out_after = None;
            loop {
                let start = Instant::now();
                match timeout(probe_limit, TcpStream::connect(addr.into())).await {
                    Err(Elapsed) => {
                        assert!(start.elapsed() >= probe_limit);
                        timed_out_after = Some(fillers.len());
                        break;
                    }
                    Ok(Ok(stream)) => completed.push(stream),
                    Ok(Err(e)) => panic!("connect failed instead of waiting: {e}"),
                }
                if fillers.len() == MAX_FILLERS {
                    break;
                }
                fillers.push(start_connect(addr));
            }
            let n = timed_out_after.unwrap_or_else(|| {
                panic!(
                    "with backlog 1 and {MAX_FILLERS} queued connections, a connect still \
                     completed: the backlog was not applied or the queue is being drained"
                )
            });
            eprintln!(
                "accept queue full after {n} fillers and {} probes",
                completed.len()
            );
            assert_eq!(
                rt.registered_fds(),
                1 + completed.len(),
                "the timed-out connect left its socket registered"
            );
        });
        assert_eq!(rt.registered_fds(), 0);
    });
}

// The blocking modes' connect and accept: each socket non-blocking from birth, a connect that
// succeeds, one refused (ConnectionRefused) and one into a full accept queue (TimedOut), each told
// apart as the async connect tells them.
#[test]
fn blocking_connect_and_accept_give_non_blocking_sockets_and_name_each_failure() {
    within(60, || {
        let listener = bind_std(v4(), &ListenOptions::default()).unwrap();
        listener.set_nonblocking(false).unwrap();
        let addr = listener.local_addr().unwrap();
        let near = connect_std(addr, Duration::from_secs(5)).expect("connect");
        let (far, _) = accept_std(&listener).expect("accept");
        let mut buf = [0u8; 8];
        for socket in [&near, &far] {
            let err = (&*socket).read(&mut buf).expect_err("nothing to read yet");
            assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "non-blocking: {err}");
        }

        let closed = {
            let l = std::net::TcpListener::bind(v4()).unwrap();
            l.local_addr().unwrap()
        };
        let err = connect_std(closed, Duration::from_secs(5)).expect_err("a closed port");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");

        let full = bind_std(
            v4(),
            &ListenOptions {
                backlog: 1,
                ..ListenOptions::default()
            },
        )
        .unwrap(); // never accepts
        let SocketAddr::V4(full_addr) = full.local_addr().unwrap() else {
            unreachable!("bound to an IPv4 address")
        };
        let limit = Duration::from_millis(300);
        let mut fillers = Vec::new();
        let timed_out = (0..64).find_map(|_| match connect_std(full_addr.into(), limit) {
            Err(e) => Some(e),
            Ok(got_in) => {
                fillers.push(got_in);
                fillers.push(std::net::TcpStream::from(start_connect(full_addr)));
                None
            }
        });
        let err = timed_out.expect("64 connects into a backlog of 1, and none waited");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    });
}

// 64 MiB of pseudo-random bytes cross one loopback connection intact: same length and FNV-1a checksum at both ends.
#[test]
fn sixty_four_mib_with_checksum() {
    within(300, || {
        const TOTAL: usize = 64 << 20;
        const CHUNK: usize = 64 << 10;
        let rt = Runtime::new().unwrap();
        let (sent, received) = rt.block_on(async {
            let listener = TcpListener::bind(v4()).unwrap();
            let addr = listener.local_addr().unwrap();
            let writer = spawn(async move {
                let (conn, _) = listener.accept().await?;
                let mut rng = XorShift::new(0xC0FF_EE00);
                let mut sum = Fnv1a::default();
                let mut buf = vec![0u8; CHUNK];
                for _ in 0..TOTAL / CHUNK {
                    rng.fill(&mut buf);
                    sum.update(&buf);
                    conn.write_all(&buf).await?;
                }
                conn.shutdown(Shutdown::Write)?;
                io::Result::Ok((TOTAL as u64, sum.finish()))
            });
            let reader = spawn(async move {
                let conn = TcpStream::connect(addr).await?;
                let mut sum = Fnv1a::default();
                let mut buf = vec![0u8; CHUNK];
                let mut count = 0u64;
                loop {
                    let n = conn.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    sum.update(&buf[..n]);
                    count += n as u64;
                }
                io::Result::Ok((count, sum.finish()))
            });
            (
                writer.await.unwrap().unwrap(),
                reader.await.unwrap().unwrap(),
            )
        });
        assert_eq!(received.0, sent.0, "byte count");
        assert_eq!(received.1, sent.1, "checksum");
        assert_eq!(rt.registered_fds(), 0);
    });
}

// Half-close: after the client's shutdown(Write) the server reads the whole request then EOF, and its reply still reaches the client, then EOF.
#[test]
fn half_close_request_then_reply() {
    within(30, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind(v4()).unwrap();
            let addr = listener.local_addr().unwrap();
            let request = XorShift::new(1).bytes(50_000);
            let reply = XorShift::new(2).bytes(120_000);
            let (req, rep) = (request.clone(), reply.clone());
            let server = spawn(async move {
                let (conn, _) = listener.accept().await.unwrap();
                let got = read_to_end(&conn).await.unwrap();
                assert!(got == req, "request corrupted ({} bytes)", got.len());
                assert!(
                    conn.is_read_closed(),
                    "EOF read but read side not marked closed"
                );
                conn.write_all(&rep).await.unwrap();
                // Dropping `conn` closes it: the client sees EOF after the reply.
            });
            let client = TcpStream::connect(addr).await.unwrap();
            client.write_all(&request).await.unwrap();
            client.shutdown(Shutdown::Write).unwrap();
            let err = client.write(b"late").await.unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::BrokenPipe,
                "write after shutdown(Write)"
            );
            let got = read_to_end(&client).await.unwrap();
            assert!(got == reply, "reply corrupted ({} bytes)", got.len());
            let mut buf = [0u8; 16];
            assert_eq!(client.read(&mut buf).await.unwrap(), 0, "EOF stays EOF");
            server.await.unwrap();
        });
    });
}

// Both ends agree on the connection's addresses, accept reports the client's address, and set_nodelay round-trips.
#[test]
fn addresses_agree_and_nodelay_round_trips() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind(v4()).unwrap();
            let laddr = listener.local_addr().unwrap();
            let accept = spawn(async move { listener.accept().await.unwrap() });
            let client = TcpStream::connect(laddr).await.unwrap();
            let (server, peer) = accept.await.unwrap();
            assert_eq!(client.peer_addr().unwrap(), laddr);
            assert_eq!(server.local_addr().unwrap(), laddr);
            assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(peer.ip(), Ipv4Addr::LOCALHOST);
            for on in [true, false, true] {
                client.set_nodelay(on).unwrap();
                assert_eq!(client.nodelay().unwrap(), on);
            }
            assert!(!server.nodelay().unwrap(), "not inherited from the peer");
        });
    });
}

// 1,000 concurrent clients on one runtime each get their own 4 KiB payload echoed back intact.
/// A connection from a chosen source address: the server sees that address.
#[test]
fn connect_std_from_binds_the_source_address() {
    let listener = bind_std(v4(), &ListenOptions::default()).expect("bind");
    listener.set_nonblocking(false).expect("blocking");
    let to = listener.local_addr().expect("addr");
    let source = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0));
    let stream = connect_std_from(source, to, Duration::from_secs(5)).expect("connect");
    let (_accepted, peer) = listener.accept().expect("accept");
    assert_eq!(peer.ip(), source.ip());
    assert_eq!(stream.local_addr().expect("local"), peer);
}

/// IP_FREEBIND lets a listener bind an address that is on no interface
/// (192.0.2.1, TEST-NET-1, is on none here); without it the bind fails.
/// Nothing is sent: a listener only waits.
#[test]
fn freebind_binds_an_address_that_is_on_no_interface() {
    let absent = SocketAddr::from((Ipv4Addr::new(192, 0, 2, 1), 0));
    let refused = bind_std(absent, &ListenOptions::default()).map(|_| ());
    assert_eq!(
        refused.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EADDRNOTAVAIL)),
        "192.0.2.1 is expected on no interface of this host"
    );
    let options = ListenOptions {
        freebind: true,
        ..ListenOptions::default()
    };
    let listener = bind_std(absent, &options).expect("bound with IP_FREEBIND");
    let local = listener.local_addr().expect("local address");
    assert_eq!(local.ip(), absent.ip());
    assert_ne!(local.port(), 0);
    let absent_v6 = SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 0));
    if bind_std(
        SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        &ListenOptions::default(),
    )
    .is_ok()
    {
        let listener = bind_std(absent_v6, &options).expect("an IPv6 one too");
        assert_eq!(
            listener.local_addr().expect("local address").ip(),
            absent_v6.ip()
        );
    }
}

#[test]
fn a_thousand_concurrent_clients() {
    within(120, || {
        const CLIENTS: usize = 1000;
        const SIZE: usize = 4096;
        let limit = raise_nofile_limit().expect("raise RLIMIT_NOFILE");
        assert!(
            limit >= 2 * CLIENTS as u64 + 200,
            "RLIMIT_NOFILE hard limit {limit} is too low"
        );
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind(v4()).unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                let mut conns = Vec::with_capacity(CLIENTS);
                for _ in 0..CLIENTS {
                    let (conn, _) = listener.accept().await?;
                    conns.push(spawn(echo_conn(conn)));
                }
                let mut total = 0;
                for c in conns {
                    total += c.await.expect("echo task")?;
                }
                io::Result::Ok(total)
            });
            let clients: Vec<_> = (0..CLIENTS)
                .map(|i| {
                    spawn(async move {
                        let mut payload = XorShift::new(i as u64 + 1000).bytes(SIZE);
                        payload[..8].copy_from_slice(&(i as u64).to_le_bytes()); // unique
                        let got = round_trip(addr, payload.clone()).await?;
                        io::Result::Ok(got == payload)
                    })
                })
                .collect();
            let mut intact = 0;
            for (i, c) in clients.into_iter().enumerate() {
                match c.await.expect("client task") {
                    Ok(true) => intact += 1,
                    Ok(false) => panic!("client {i} got someone else's or corrupt bytes"),
                    Err(e) => panic!("client {i} failed: {e}"),
                }
            }
            assert_eq!(intact, CLIENTS);
            assert_eq!(server.await.unwrap().unwrap(), (CLIENTS * SIZE) as u64);
        });
        assert_eq!(rt.live_tasks(), 0);
        assert_eq!(rt.registered_fds(), 0);
    });
}

// 10,000 descriptors registered at once (5,000 socket pairs) all report readiness: one byte through every pair arrives.
#[test]
fn five_thousand_socket_pairs_registered_at_once() {
    within(120, || {
        const PAIRS: usize = 5000;
        let limit = raise_nofile_limit().expect("raise RLIMIT_NOFILE");
        if limit < 10_300 {
            eprintln!("note: skipping, RLIMIT_NOFILE hard limit is {limit}, need ~10,300");
            return;
        }
        let rt = Runtime::new().unwrap();
        let before = rt.registered_fds();
        rt.block_on(async {
            let mut pairs = Vec::with_capacity(PAIRS);
            for _ in 0..PAIRS {
                let (a, b) = UnixStream::pair().unwrap();
                a.set_nonblocking(true).unwrap();
                b.set_nonblocking(true).unwrap();
                pairs.push((AsyncFd::new(a).unwrap(), AsyncFd::new(b).unwrap()));
            }
            assert!(rt.registered_fds() >= before + 2 * PAIRS);
            for (i, (a, _)) in pairs.iter().enumerate() {
                let n = a.get_ref().write(&[(i % 251) as u8]).unwrap();
                assert_eq!(n, 1);
            }
            let mut arrived = 0;
            for (i, (_, b)) in pairs.iter().enumerate() {
                let mut buf = [0u8; 4];
                let n = b
                    .io(Interest::Read, |mut s| s.read(&mut buf))
                    .await
                    .unwrap();
                assert_eq!(n, 1, "pair {i}");
                assert_eq!(buf[0], (i % 251) as u8, "pair {i} got another pair's byte");
                arrived += 1;
            }
            assert_eq!(arrived, PAIRS);
        });
        assert_eq!(
            rt.registered_fds(),
            before,
            "dropping the AsyncFds deregisters them"
        );
    });
}

// Readiness on a socketpair: not readable before a write; one wake per edge; EOF and is_read_closed after the peer closes; then EPIPE on write, not a hang.
#[test]
fn readiness_edges_on_a_socketpair() {
    within(10, || {
        // One poll per turn of the driver: each yield_now below is exactly one epoll_wait.
        let rt = Builder::new().event_interval(1).build().unwrap();
        rt.block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let fd = AsyncFd::new(a).unwrap();
            let counter = Arc::new(CountingWaker::default());
            let waker = Waker::from(counter.clone());
            let mut cx = Context::from_waker(&waker);

            assert!(
                fd.poll_ready(Interest::Read, &mut cx).is_pending(),
                "readable before any write"
            );
            yield_now().await; // a turn: the registration reports "writable" only
            assert_eq!(counter.count(), 0, "the reader was woken without data");
            assert!(fd.poll_ready(Interest::Read, &mut cx).is_pending());
            assert!(
                fd.poll_ready(Interest::Write, &mut Context::from_waker(Waker::noop()))
                    .is_ready()
            );

            (&b).write_all(b"x").unwrap();
            assert_eq!(
                counter.count(),
                0,
                "nothing happens before the runtime turns"
            );
            yield_now().await; // one turn: the EPOLLIN edge
            assert_eq!(counter.count(), 1, "one write, one wake");
            yield_now().await;
            assert_eq!(counter.count(), 1, "woken twice for one edge");
            assert!(fd.poll_ready(Interest::Read, &mut cx).is_ready());

            let mut buf = [0u8; 8];
            let n = fd
                .io(Interest::Read, |mut s| s.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(&buf[..n], b"x");
            // Drained: the next read would block, so it waits (with our counter).
            assert!(
                fd.poll_io(Interest::Read, &mut cx, |mut s| s.read(&mut buf))
                    .is_pending()
            );
            assert!(!fd.is_read_closed());

            drop(b);
            yield_now().await; // one turn: hang-up seen
            assert_eq!(
                counter.count(),
                2,
                "the peer closing must wake the waiting reader"
            );
            assert!(fd.is_read_closed());
            let n = fd
                .io(Interest::Read, |mut s| s.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(n, 0, "EOF");
            let result = timeout(
                Duration::from_secs(5),
                fd.io(Interest::Write, |mut s| s.write(b"y")),
            )
            .await
            .expect("a write to a hung-up socket must fail, not wait");
            let err = result.expect_err("write to a closed peer");
            assert_eq!(err.kind(), io::ErrorKind::BrokenPipe, "{err}");
        });
        assert_eq!(rt.registered_fds(), 0);
    });
}

// Accept errors are sorted into "this one connection died" (accept the next
// at once), "out of descriptors" (back off) and the rest.
#[test]
fn accept_errors_are_classified() {
    use runtime::net::{is_dead_connection_error, is_fd_exhaustion};
    let errno = io::Error::from_raw_os_error;
    for dead in [
        libc::ECONNABORTED,
        libc::EPROTO,
        libc::ENETUNREACH,
        libc::EINTR,
    ] {
        assert!(is_dead_connection_error(&errno(dead)), "errno {dead}");
        assert!(!is_fd_exhaustion(&errno(dead)), "errno {dead}");
    }
    for exhausted in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
        assert!(is_fd_exhaustion(&errno(exhausted)), "errno {exhausted}");
        assert!(
            !is_dead_connection_error(&errno(exhausted)),
            "errno {exhausted}"
        );
    }
    assert!(!is_dead_connection_error(&errno(libc::EBADF)));
    assert!(!is_dead_connection_error(&io::Error::other("no errno")));
}

// A stream given back with into_std leaves this runtime's epoll set at once
// (its copy lives on, as one handed to another process would), and another
// runtime, on another thread, adopts it and reads on where this one stopped.
#[test]
fn a_stream_given_back_leaves_the_epoll_set_and_reads_on_elsewhere() {
    within(30, || {
        let listener = std::net::TcpListener::bind(v4()).unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let rt = Runtime::new().unwrap();
        let given = rt.block_on(async {
            let before = rt.registered_fds();
            let stream = TcpStream::from_std(accepted).unwrap();
            assert_eq!(rt.registered_fds(), before + 1);
            peer.write_all(b"first,").unwrap();
            let mut buf = [0u8; 6];
            let mut got = 0;
            while got < buf.len() {
                got += stream.read(&mut buf[got..]).await.unwrap();
            }
            assert_eq!(&buf, b"first,");
            let copy = std::os::fd::AsFd::as_fd(&stream)
                .try_clone_to_owned()
                .unwrap();
            let given = stream.into_std();
            assert_eq!(rt.registered_fds(), before, "out of the set");
            drop(copy);
            given
        });
        peer.write_all(b" then the rest").unwrap();
        peer.shutdown(Shutdown::Write).unwrap();
        let rest = std::thread::spawn(move || {
            Runtime::new().unwrap().block_on(async move {
                let stream = TcpStream::from_std(given).unwrap();
                read_to_end(&stream).await.unwrap()
            })
        })
        .join()
        .unwrap();
        assert_eq!(rest, b" then the rest");
    });
}
