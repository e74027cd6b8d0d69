//! The readiness shortcuts on real loopback sockets (`reactor.rs`, "A short
//! transfer is as good as EAGAIN"): a short read or write forgets the
//! readiness without the system call that would have returned EAGAIN, and
//! none of it may lose a wake. Each test pins what the shortcut changes (a
//! poll that no longer calls the kernel) and what it must not change (the
//! bytes, the end of file, the wake that follows).
//!
//! The runtimes here poll the reactor on every turn (`event_interval(1)`),
//! so one `yield_now` is exactly one `epoll_wait`.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use common::{CountingWaker, until_woken, within};
use runtime::net::{ListenOptions, TcpListener, TcpStream};
use runtime::{Builder, Runtime, yield_now};

fn runtime() -> Runtime {
    Builder::new().event_interval(1).build().expect("a runtime")
}

fn v4() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// An accepted socket (ours) and a blocking std socket at the other end.
async fn accepted_pair(options: &ListenOptions) -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind_with(v4(), options).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let peer = std::net::TcpStream::connect(addr).expect("connect");
    let (ours, _) = listener.accept().await.expect("accept");
    (ours, peer)
}

// A short read forgets the readiness: bytes that arrive afterwards are not
// read until their own edge is seen, and that edge does wake the reader (the
// race of a short read against new data loses nothing).
#[test]
fn a_short_read_waits_for_the_next_edge_and_the_edge_wakes_it() {
    within(10, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair(&ListenOptions::default()).await;
            let mut buf = [0u8; 64];
            peer.write_all(b"first").expect("write");
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"first", "5 bytes of the 64 asked: a short read");

            // Queued on our socket before any epoll_wait could see it.
            peer.write_all(b"second").expect("write");
            let counter = Arc::new(CountingWaker::default());
            let waker = Waker::from(counter.clone());
            assert!(
                ours.poll_read(&mut Context::from_waker(&waker), &mut buf)
                    .is_pending(),
                "after a short read, the next read waits for an edge instead of calling read(2)"
            );
            until_woken(&counter, Duration::from_secs(5)).await;
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"second", "the bytes that raced the short read");
        });
    });
}

// The FIN was seen before a short read: that read took everything there
// will ever be, so the next read is end of file at once, and stays so.
#[test]
fn a_short_read_after_the_fin_is_followed_by_end_of_file() {
    within(10, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair(&ListenOptions::default()).await;
            peer.write_all(b"last words").expect("write");
            peer.shutdown(Shutdown::Write).expect("FIN");
            yield_now().await; // one epoll_wait: EPOLLIN | EPOLLRDHUP recorded
            assert!(ours.is_read_closed(), "the FIN's event was recorded");

            let mut buf = [0u8; 64];
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"last words");
            let noop = &mut Context::from_waker(Waker::noop());
            for _ in 0..2 {
                match ours.poll_read(noop, &mut buf) {
                    Poll::Ready(Ok(0)) => {}
                    other => panic!("end of file expected at once, got {other:?}"),
                }
            }
            // The write side is untouched by the peer's FIN.
            ours.write_all(b"reply")
                .await
                .expect("write after the peer's FIN");
            let mut reply = [0u8; 5];
            peer.read_exact(&mut reply).expect("the reply");
            assert_eq!(&reply, b"reply");
        });
    });
}

// The FIN arrives after a short read emptied the queue: the read waits, the
// FIN's own event wakes it, and the read then reports end of file.
#[test]
fn a_fin_after_a_short_read_still_wakes_the_reader_with_end_of_file() {
    within(10, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair(&ListenOptions::default()).await;
            peer.write_all(b"data").expect("write");
            let mut buf = [0u8; 64];
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"data");

            peer.shutdown(Shutdown::Write).expect("FIN");
            let counter = Arc::new(CountingWaker::default());
            let waker = Waker::from(counter.clone());
            assert!(
                ours.poll_read(&mut Context::from_waker(&waker), &mut buf)
                    .is_pending(),
                "the FIN's event is not recorded yet: the reader waits for it"
            );
            until_woken(&counter, Duration::from_secs(5)).await;
            assert_eq!(ours.read(&mut buf).await.expect("read"), 0, "end of file");
        });
    });
}

// A reset after the FIN: the error bit keeps the reactor from answering the
// read itself, so the kernel's own answer comes through (Linux reports end
// of file once the FIN was queued; never data, never a hang).
#[test]
fn a_reset_after_the_fin_is_left_to_the_kernel_to_report() {
    within(10, || {
        runtime().block_on(async {
            let (ours, peer) = accepted_pair(&ListenOptions::default()).await;
            (&peer).write_all(b"partial").expect("write");
            peer.shutdown(Shutdown::Write).expect("FIN");
            nix::sys::socket::setsockopt(
                &peer,
                nix::sys::socket::sockopt::Linger,
                &nix::libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                },
            )
            .expect("SO_LINGER 0");
            drop(peer); // the reset
            yield_now().await;
            let mut buf = [0u8; 64];
            let n = ours.read(&mut buf).await.expect("the bytes before the FIN");
            assert_eq!(&buf[..n], b"partial");
            let end = ours.read(&mut buf).await;
            assert!(
                matches!(end, Ok(0)) || end.is_err(),
                "end of file or the reset, got {end:?}"
            );
        });
    });
}

// A short write means the send buffer is full: the next write waits without
// trying, and the peer's draining wakes it.
#[test]
fn a_short_write_waits_and_the_peers_drain_wakes_the_writer() {
    within(20, || {
        runtime().block_on(async {
            let (ours, peer) = accepted_pair(&ListenOptions::default()).await;
            let chunk = vec![7u8; 1 << 20];
            let mut queued = 0usize;
            let noop = &mut Context::from_waker(Waker::noop());
            // Fill the send buffer: stop at the first write that took less
            // than offered (64 MiB is far beyond any loopback buffer).
            let short = loop {
                assert!(queued < 64 << 20, "64 MiB queued without a short write");
                match ours.poll_write(noop, &chunk) {
                    Poll::Ready(Ok(n)) if n < chunk.len() => break n,
                    Poll::Ready(Ok(n)) => queued += n,
                    other => panic!("a writable socket refused a write: {other:?}"),
                }
            };
            queued += short;
            let counter = Arc::new(CountingWaker::default());
            let waker = Waker::from(counter.clone());
            assert!(
                ours.poll_write(&mut Context::from_waker(&waker), &chunk)
                    .is_pending(),
                "after a short write, the next write waits instead of calling write(2)"
            );
            let reader = thread::spawn(move || {
                let mut sink = vec![0u8; 1 << 16];
                let mut total = 0usize;
                let started = Instant::now();
                while total < queued && started.elapsed() < Duration::from_secs(10) {
                    match (&peer).read(&mut sink) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => total += n,
                    }
                }
                total
            });
            until_woken(&counter, Duration::from_secs(5)).await;
            assert!(
                ours.poll_write(&mut Context::from_waker(Waker::noop()), &chunk[..1])
                    .is_ready(),
                "writable after the peer drained"
            );
            drop(ours);
            assert!(reader.join().expect("the reader") >= queued);
        });
    });
}

// TCP_NODELAY set on a listener reaches every socket it accepts: the proxy
// counts on it to skip one setsockopt per connection (`ListenOptions::nodelay`).
#[test]
fn an_accepted_socket_inherits_nodelay_from_its_listener() {
    within(10, || {
        runtime().block_on(async {
            let with = ListenOptions {
                nodelay: true,
                ..ListenOptions::default()
            };
            let (ours, _peer) = accepted_pair(&with).await;
            assert!(
                ours.nodelay().expect("TCP_NODELAY"),
                "inherited from the listener"
            );
            let (plain, _peer) = accepted_pair(&ListenOptions::default()).await;
            assert!(!plain.nodelay().expect("TCP_NODELAY"), "off by default");
        });
    });
}
