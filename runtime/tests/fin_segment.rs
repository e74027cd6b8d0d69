//! The last bytes and the FIN in one segment (`net.rs`): bytes written with
//! `poll_write_before_fin` and a `shutdown` or `close` right after leave in
//! one TCP segment, where a plain write and a shutdown take two; and nothing
//! is lost or held back on the way. The segment counts come from the
//! kernel's own TCP_INFO on real loopback sockets, so each test also runs the
//! plain case beside it: the contrast shows the count measures what it says.
//!
//! The runtimes here poll the reactor on every turn (`event_interval(1)`),
//! so one `yield_now` is exactly one `epoll_wait`.

mod common;

use std::future::poll_fn;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::thread;
use std::time::Duration;

use common::within;
use runtime::net::{ListenOptions, TcpListener, TcpStream};
use runtime::{Builder, Runtime, yield_now};

fn runtime() -> Runtime {
    Builder::new().event_interval(1).build().expect("a runtime")
}

/// An accepted socket (ours, TCP_NODELAY as the proxy's) and a blocking std
/// socket at the other end, with a read timeout so no test can hang on it.
async fn accepted_pair() -> (TcpStream, std::net::TcpStream) {
    let options = ListenOptions {
        nodelay: true,
        ..ListenOptions::default()
    };
    let listener =
        TcpListener::bind_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), &options).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let peer = std::net::TcpStream::connect(addr).expect("connect");
    peer.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let (ours, _) = listener.accept().await.expect("accept");
    (ours, peer)
}

/// Writes all of `bytes`, each write with or without `MSG_MORE`.
async fn write_all(ours: &TcpStream, mut bytes: &[u8], before_fin: bool) {
    while !bytes.is_empty() {
        let n = poll_fn(|cx| {
            if before_fin {
                ours.poll_write_before_fin(cx, bytes)
            } else {
                ours.poll_write(cx, bytes)
            }
        })
        .await
        .expect("write");
        assert!(n > 0, "a write took nothing");
        bytes = &bytes[n..];
    }
}

/// Everything the peer reads up to end of file (a clean FIN, not a reset).
fn read_to_end(peer: &mut std::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    peer.read_to_end(&mut got)
        .expect("everything, then a clean end of file");
    got
}

/// Segments our socket sends for "bytes, then FIN", either way.
async fn segments_for_bytes_then_fin(before_fin: bool) -> u32 {
    let (ours, mut peer) = accepted_pair().await;
    let before = ours.segments_sent().expect("TCP_INFO");
    write_all(&ours, b"a reply of a few bytes", before_fin).await;
    ours.shutdown(Shutdown::Write).expect("FIN");
    let after = ours.segments_sent().expect("TCP_INFO");
    assert_eq!(read_to_end(&mut peer), b"a reply of a few bytes");
    after - before
}

#[test]
fn bytes_written_before_the_fin_leave_with_it_in_one_segment() {
    within(10, || {
        runtime().block_on(async {
            assert_eq!(
                segments_for_bytes_then_fin(false).await,
                2,
                "a plain write goes at once (TCP_NODELAY); the FIN follows alone"
            );
            assert_eq!(
                segments_for_bytes_then_fin(true).await,
                1,
                "MSG_MORE holds the bytes, and the shutdown's FIN rides on them"
            );
        });
    });
}

// The close that ends a relay sends the last FIN (no shutdown): it must
// flush the held tail just as a shutdown does.
#[test]
fn a_close_after_a_write_before_the_fin_delivers_every_byte() {
    within(10, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair().await;
            write_all(&ours, b"the last words", true).await;
            drop(ours);
            assert_eq!(read_to_end(&mut peer), b"the last words");
        });
    });
}

// More than the socket buffers hold, so some writes are short and wait for
// the peer to drain: the tail each one leaves is pushed out by the ACKs, not
// held until the FIN, and the peer gets every byte in order.
#[test]
fn a_large_write_before_the_fin_waits_for_the_peer_and_loses_nothing() {
    within(30, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair().await;
            let data: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
            let expected = data.clone();
            let reader = thread::spawn(move || read_to_end(&mut peer));
            write_all(&ours, &data, true).await;
            ours.shutdown(Shutdown::Write).expect("FIN");
            let got = reader.join().expect("the reader thread");
            assert_eq!(got.len(), expected.len(), "every byte arrived");
            assert!(got == expected, "in order and unchanged");
        });
    });
}

// `at_eof` is what lets a relay send bytes and FIN together: true only once
// the FIN's event was seen and a read found nothing after the bytes.
#[test]
fn at_eof_is_known_only_after_the_fin_was_seen_and_the_bytes_were_read() {
    within(10, || {
        runtime().block_on(async {
            let (ours, mut peer) = accepted_pair().await;
            let mut buf = [0u8; 64];
            peer.write_all(b"no fin yet").expect("write");
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"no fin yet");
            assert!(!ours.at_eof(), "a short read alone says nothing of a FIN");

            peer.write_all(b"request").expect("write");
            peer.shutdown(Shutdown::Write).expect("FIN");
            yield_now().await; // one epoll_wait: EPOLLIN | EPOLLRDHUP recorded
            assert!(!ours.at_eof(), "bytes are still queued before the FIN");
            let n = ours.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], b"request");
            assert!(
                ours.at_eof(),
                "FIN seen and the queue emptied by a short read"
            );
            assert_eq!(ours.read(&mut buf).await.expect("read"), 0);
        });
    });
}
