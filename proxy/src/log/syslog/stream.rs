//! Syslog over TCP: one connection, messages framed by their length
//! (RFC 6587's octet counting: `LEN SP MSG`, no newline), written by a
//! thread of its own so that no event loop ever waits on it.
//!
//! ```text
//!   event loops, daemon lines ──try_send(batch)──▶ [ 64 batches ] ──▶ "syslog" thread ──write──▶ TCP
//!        full queue: the batch is lost, counted        connect (1 s at most), reconnect after 1 s
//! ```
//!
//! A batch is a worker's buffer of framed messages (up to ~16 KiB), written
//! with one `write(2)`; a daemon line is a batch of one. The thread
//! connects on the first batch, and again after any failure, but not more
//! often than once a second: while the destination is down, the batches
//! that arrive are lost (counted), and the event loops go on. Before each
//! write it checks that the server has not closed the connection (a
//! syslog server never sends anything, so a readable socket means a FIN or
//! a reset), so that a restarted server gets a new connection instead of a
//! batch written into the old one's void. A batch written in part when the
//! connection fails is counted lost whole, and the connection is dropped:
//! a frame cut in the middle would garble the stream.
//!
//! What the thread has to say (the destination down, then back) goes to the
//! daemon's log once per outage, not once per batch.

use std::io::{self, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, recv};

/// Batches waiting for the thread; one more is lost.
const QUEUE: usize = 64;
/// The longest a connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest a write may block (the server not reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// No new connect sooner than this after a failure.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// What the thread is handed.
enum Message {
    /// Framed messages to write, and how many.
    Batch(Vec<u8>, u64),
    /// Answer once every batch before this one is written (or lost).
    Drain(mpsc::Sender<()>),
}

/// The sending side of a TCP destination: a queue to its thread.
#[derive(Debug)]
pub struct Stream {
    queue: SyncSender<Message>,
}

impl Stream {
    /// Starts the thread that sends to `to`; its losses are added to `lost`.
    pub fn start(to: SocketAddr, lost: Arc<AtomicU64>) -> io::Result<Stream> {
        let (queue, batches) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("syslog".into())
            .spawn(move || Link::new(to, lost).serve(&batches))?;
        Ok(Stream { queue })
    }

    /// Hands `frames` (`count` messages) to the thread; never waits. A full
    /// queue loses the batch: `Err` says so, and the caller counts it.
    pub fn send(&self, frames: Vec<u8>, count: u64) -> io::Result<()> {
        match self.queue.try_send(Message::Batch(frames, count)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the TCP syslog queue is full: the destination is slow or down",
            )),
            Err(TrySendError::Disconnected(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the TCP syslog thread is gone",
            )),
        }
    }

    /// Waits, up to `limit`, until every batch handed over so far is
    /// written or lost: at the end of a graceful stop.
    pub fn drain(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (done, answer) = mpsc::channel();
        let mut message = Message::Drain(done);
        loop {
            match self.queue.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    message = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
        let _ = answer.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// The thread's side: the connection, if any, and when it may try again.
struct Link {
    to: SocketAddr,
    lost: Arc<AtomicU64>,
    stream: Option<TcpStream>,
    /// No connect before this, after a failure.
    retry_at: Option<Instant>,
    /// Messages lost since the destination went down (`None`: it is up, or
    /// was never tried).
    down: Option<u64>,
}

impl Link {
    fn new(to: SocketAddr, lost: Arc<AtomicU64>) -> Link {
        Link {
            to,
            lost,
            stream: None,
            retry_at: None,
            down: None,
        }
    }

    /// Writes every batch, in order, until every sender is gone.
    fn serve(mut self, batches: &Receiver<Message>) {
        while let Ok(message) = batches.recv() {
            match message {
                Message::Batch(frames, count) => {
                    if let Err(e) = self.deliver(&frames) {
                        self.lose(count, &e);
                    }
                }
                Message::Drain(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    /// One batch, on the connection (made or made again first).
    fn deliver(&mut self, frames: &[u8]) -> io::Result<()> {
        let open = self.stream.take().filter(|s| !closed_by_peer(s));
        let mut stream = match open {
            Some(stream) => stream,
            None => self.connect()?,
        };
        let written = stream.write_all(frames);
        if written.is_ok() {
            self.stream = Some(stream);
        }
        written
    }

    /// A new connection, unless the last attempt failed under a second ago.
    fn connect(&mut self) -> io::Result<TcpStream> {
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "waiting to reconnect",
            ));
        }
        let connected = TcpStream::connect_timeout(&self.to, CONNECT_TIMEOUT).and_then(|s| {
            s.set_write_timeout(Some(WRITE_TIMEOUT))?;
            Ok(s)
        });
        match &connected {
            Ok(_) => {
                self.retry_at = None;
                if let Some(lost) = self.down.take() {
                    crate::info!(
                        "syslog tcp@{}: connected again; {lost} line(s) lost while it was down",
                        self.to
                    );
                }
            }
            Err(_) => self.retry_at = Some(Instant::now() + RECONNECT_DELAY),
        }
        connected
    }

    /// Counts `count` lost messages; says so once per outage.
    fn lose(&mut self, count: u64, why: &io::Error) {
        self.lost.fetch_add(count, Ordering::Relaxed);
        match &mut self.down {
            Some(lost) => *lost += count,
            None => {
                self.down = Some(count);
                crate::warn!(
                    "syslog tcp@{}: {why}; lines are lost until it answers (a new connection at \
                     most once a second)",
                    self.to
                );
            }
        }
    }
}

/// Has the server closed (or reset) the connection? It never sends, so
/// anything to read, or an error, says it is gone. One non-blocking peek.
fn closed_by_peer(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    !matches!(
        recv(stream.as_raw_fd(), &mut byte, flags),
        Err(Errno::EAGAIN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn accept_all(listener: &TcpListener, want: usize) -> Vec<u8> {
        let (mut conn, _) = listener.accept().expect("accept");
        conn.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut got = vec![0u8; want];
        conn.read_exact(&mut got).expect("the frames");
        got
    }

    #[test]
    fn batches_reach_the_server_in_order_and_a_drain_waits_for_them() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let lost = Arc::new(AtomicU64::new(0));
        let stream =
            Stream::start(listener.local_addr().expect("address"), lost.clone()).expect("a thread");
        stream.send(b"3 abc".to_vec(), 1).expect("queued");
        stream.send(b"2 de1 f".to_vec(), 2).expect("queued");
        stream.drain(Duration::from_secs(5));
        assert_eq!(accept_all(&listener, 12), b"3 abc2 de1 f");
        assert_eq!(lost.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_server_that_is_down_loses_batches_and_one_that_comes_back_gets_the_next() {
        // A port with nobody on it, then a listener on the same port.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let to = SocketAddr::from(([127, 0, 0, 1], port));
        let lost = Arc::new(AtomicU64::new(0));
        let stream = Stream::start(to, lost.clone()).expect("a thread");
        stream.send(b"1 a".to_vec(), 1).expect("queued");
        stream.send(b"1 b".to_vec(), 1).expect("queued");
        stream.drain(Duration::from_secs(5));
        assert_eq!(lost.load(Ordering::Relaxed), 2, "refused, then waiting");
        let Ok(listener) = TcpListener::bind(to) else {
            return; // taken meanwhile by another process: nothing to learn
        };
        // Past the reconnect delay, the next batch connects.
        std::thread::sleep(RECONNECT_DELAY + Duration::from_millis(100));
        stream.send(b"1 c".to_vec(), 1).expect("queued");
        stream.drain(Duration::from_secs(5));
        assert_eq!(accept_all(&listener, 3), b"1 c");
        assert_eq!(lost.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_server_that_closed_gets_a_new_connection_before_the_next_batch() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let lost = Arc::new(AtomicU64::new(0));
        let stream =
            Stream::start(listener.local_addr().expect("address"), lost.clone()).expect("a thread");
        stream.send(b"1 a".to_vec(), 1).expect("queued");
        stream.drain(Duration::from_secs(5));
        // The server reads the first batch and closes (a restart); on
        // loopback its FIN has reached our socket when close(2) returns.
        assert_eq!(accept_all(&listener, 3), b"1 a");
        stream.send(b"1 b".to_vec(), 1).expect("queued");
        stream.drain(Duration::from_secs(5));
        assert_eq!(accept_all(&listener, 3), b"1 b");
        assert_eq!(lost.load(Ordering::Relaxed), 0);
    }
}
