//! `splice(2)` through a [`Pipe`] on real loopback sockets: bytes moved end
//! to end without entering user space, end of file, a destination that
//! stops reading (backpressure: the pipe holds the bytes, the splice
//! waits), the pipe read back by copy, and a pipe grown with bytes in it.

mod common;

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::task::{Context, Poll, Waker};
use std::thread;

use common::{Fnv1a, XorShift, within};
use runtime::Runtime;
use runtime::net::{TcpListener, TcpStream};
use runtime::pipe::Pipe;

const PIPE_SIZE: usize = 256 * 1024;

/// A connected pair on loopback: (our runtime end, the std peer).
async fn pair() -> io::Result<(TcpStream, std::net::TcpStream)> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let addr = listener.local_addr()?;
    let peer = thread::spawn(move || std::net::TcpStream::connect(addr));
    let (ours, _) = listener.accept().await?;
    let peer = peer
        .join()
        .map_err(|_| io::Error::other("connect thread"))??;
    Ok((ours, peer))
}

/// Sends `len` deterministic bytes and a FIN from a thread; their checksum.
fn send_from_thread(
    mut to: std::net::TcpStream,
    len: usize,
) -> thread::JoinHandle<io::Result<u64>> {
    thread::spawn(move || {
        let mut rng = XorShift::new(12);
        let mut sum = Fnv1a::default();
        let mut chunk = vec![0u8; 64 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            rng.fill(&mut chunk[..n]);
            sum.update(&chunk[..n]);
            to.write_all(&chunk[..n])?;
            left -= n;
        }
        to.shutdown(Shutdown::Write)?;
        Ok(sum.finish())
    })
}

/// Reads to end of file on a thread: (bytes, checksum).
fn read_from_thread(mut from: std::net::TcpStream) -> thread::JoinHandle<io::Result<(u64, u64)>> {
    thread::spawn(move || {
        let mut sum = Fnv1a::default();
        let mut total = 0u64;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf)? {
                0 => return Ok((total, sum.finish())),
                n => {
                    sum.update(&buf[..n]);
                    total += n as u64;
                }
            }
        }
    })
}

/// Splices everything from `from` to `to` through `pipe`, then passes the
/// FIN on: the bytes moved.
async fn splice_all(from: &TcpStream, to: &TcpStream, pipe: &mut Pipe) -> io::Result<u64> {
    let mut total = 0;
    loop {
        if poll_fn(|cx| from.poll_splice_to(cx, pipe)).await? == 0 {
            to.shutdown(Shutdown::Write)?;
            return Ok(total);
        }
        while !pipe.is_empty() {
            total += poll_fn(|cx| to.poll_splice_from(cx, pipe)).await? as u64;
        }
    }
}

#[test]
fn sixteen_mib_spliced_end_to_end_with_their_fin() {
    within(60, || {
        Runtime::new().unwrap().block_on(async {
            let (source, writer) = pair().await.unwrap();
            let (destination, reader) = pair().await.unwrap();
            let len = 16 * 1024 * 1024;
            let sent = send_from_thread(writer, len);
            let got = read_from_thread(reader);
            let mut pipe = Pipe::new(PIPE_SIZE).unwrap();
            let moved = splice_all(&source, &destination, &mut pipe).await.unwrap();
            assert_eq!(moved, len as u64);
            drop(destination);
            let sum = sent.join().unwrap().unwrap();
            assert_eq!(got.join().unwrap().unwrap(), (len as u64, sum));
        })
    })
}

#[test]
fn end_of_file_is_a_splice_of_zero_and_a_pipe_can_be_read_back() {
    within(30, || {
        Runtime::new().unwrap().block_on(async {
            let (source, mut writer) = pair().await.unwrap();
            writer.write_all(b"hello").unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
            let mut pipe = Pipe::new(PIPE_SIZE).unwrap();
            let mut buf = [0u8; 16];
            let mut text = Vec::new();
            // Bounded: five bytes, then the end of file.
            for _ in 0..10 {
                match poll_fn(|cx| source.poll_splice_to(cx, &mut pipe))
                    .await
                    .unwrap()
                {
                    0 => break,
                    n => {
                        assert_eq!(pipe.len(), n);
                        let read = pipe.read_into(&mut buf).unwrap();
                        text.extend_from_slice(&buf[..read]);
                        assert!(pipe.is_empty());
                    }
                }
            }
            assert_eq!(text, b"hello");
            assert_eq!(
                pipe.read_into(&mut buf).unwrap(),
                0,
                "empty: nothing to read"
            );
        })
    })
}

#[test]
fn a_destination_that_stops_reading_leaves_the_bytes_in_the_pipe() {
    within(60, || {
        Runtime::new().unwrap().block_on(async {
            let (source, writer) = pair().await.unwrap();
            let (destination, reader) = pair().await.unwrap();
            // More than loopback's socket buffers can hold, both ends together.
            let len = 64 * 1024 * 1024;
            let sent = send_from_thread(writer, len);
            let mut pipe = Pipe::new(PIPE_SIZE).unwrap();
            let mut noop = Context::from_waker(Waker::noop());
            let mut moved = 0u64;
            // Nobody reads `reader`: splicing out must come to Pending with
            // bytes left in the pipe, long before everything is sent.
            let blocked = loop {
                if pipe.is_empty() {
                    let n = poll_fn(|cx| source.poll_splice_to(cx, &mut pipe))
                        .await
                        .unwrap();
                    assert_ne!(n, 0, "the sender's FIN cannot come before its bytes moved");
                }
                match destination.poll_splice_from(&mut noop, &mut pipe) {
                    Poll::Pending => break pipe.len(),
                    Poll::Ready(n) => moved += n.unwrap() as u64,
                }
                assert!(moved < len as u64, "64 MiB went into a socket nobody reads");
                runtime::yield_now().await;
            };
            assert!(blocked > 0, "the bytes wait in the pipe");
            // The reader starts: everything arrives, in order.
            let got = read_from_thread(reader);
            while !pipe.is_empty() {
                moved += poll_fn(|cx| destination.poll_splice_from(cx, &mut pipe))
                    .await
                    .unwrap() as u64;
            }
            moved += splice_all(&source, &destination, &mut pipe).await.unwrap();
            drop(destination);
            assert_eq!(moved, len as u64);
            let sum = sent.join().unwrap().unwrap();
            assert_eq!(got.join().unwrap().unwrap(), (len as u64, sum));
        })
    })
}

#[test]
fn splicing_into_a_pipe_that_holds_bytes_is_refused() {
    within(30, || {
        Runtime::new().unwrap().block_on(async {
            let (source, mut writer) = pair().await.unwrap();
            writer.write_all(b"abc").unwrap();
            let mut pipe = Pipe::new(PIPE_SIZE).unwrap();
            assert_eq!(
                poll_fn(|cx| source.poll_splice_to(cx, &mut pipe))
                    .await
                    .unwrap(),
                3
            );
            let err = poll_fn(|cx| source.poll_splice_to(cx, &mut pipe))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        })
    })
}

#[test]
fn a_pipe_grown_with_bytes_in_it_keeps_them() {
    let rt = Runtime::new().expect("runtime");
    let got = rt.block_on(async {
        let (ours, mut peer) = pair().await?;
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        peer.write_all(b"kept across the growth")?;
        let mut pipe = Pipe::new(64 * 1024)?;
        assert_eq!(pipe.size(), 64 * 1024);
        poll_fn(|cx| ours.poll_splice_to(cx, &mut pipe)).await?;
        pipe.grow(PIPE_SIZE)?;
        assert_eq!((pipe.size(), pipe.len()), (PIPE_SIZE, 22));
        poll_fn(|cx| ours.poll_splice_from(cx, &mut pipe)).await?;
        let mut buf = [0u8; 32];
        let n = peer.read(&mut buf)?;
        Ok::<_, io::Error>(buf[..n].to_vec())
    });
    assert_eq!(got.expect("spliced"), b"kept across the growth");
}
