//! Idle connections: opened, checked once, then held.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::shared::stream_share;

/// The line each idle connection sends and expects back, once when opened
/// and once per [`IdleConnections::verify`].
const PING: &[u8] = b"ping\n";

/// The most threads [`open_idle`] opens connections from.
const OPENER_THREADS: usize = 8;

/// Connections held open and idle, to measure what an idle connection costs
/// a proxy (memory, mostly). Each has done one echo round trip, so the
/// proxy's connection to its backend is open too, not just the client side.
///
/// Plain blocking std sockets: an idle connection does nothing, so it needs
/// no event loop.
#[derive(Debug)]
pub struct IdleConnections {
    target: SocketAddr,
    conns: Vec<std::net::TcpStream>,
}

/// Opens `count` connections to `target` (an Echo backend, directly or
/// through a proxy), does one `ping` round trip on each, and leaves them
/// idle. `timeout` bounds each connect and each read or write.
///
/// Opening runs on a few threads at once, since each connection waits for
/// its round trip. If any connection fails, all are closed and the error
/// says how many had succeeded.
pub fn open_idle(
    target: SocketAddr,
    count: usize,
    timeout: Duration,
) -> io::Result<IdleConnections> {
    let threads = count.clamp(1, OPENER_THREADS);
    // Set by the first failure, so the other threads stop soon after it
    // rather than keep opening connections that will be closed.
    let failed = AtomicBool::new(false);
    let shares = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let share = stream_share(count as u64, threads, index) as usize;
            let failed = &failed;
            let handle = thread::Builder::new()
                .name(format!("open-idle-{index}"))
                .spawn_scoped(scope, move || open_share(target, share, timeout, failed))?;
            handles.push(handle);
        }
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .map_err(|_| io::Error::other("a thread opening idle connections panicked"))
            })
            .collect::<io::Result<Vec<_>>>()
    })?;
    let mut conns = Vec::with_capacity(count);
    let mut first_error = None;
    for (opened, error) in shares {
        conns.extend(opened);
        if first_error.is_none() {
            first_error = error;
        }
    }
    match first_error {
        None => Ok(IdleConnections { target, conns }),
        Some(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "opened {} of {count} idle connections to {target}, then: {e}",
                conns.len()
            ),
        )),
    }
}

/// One opening thread's work: up to `count` connections, stopping at the
/// first failure (its own or, through `failed`, another thread's).
fn open_share(
    target: SocketAddr,
    count: usize,
    timeout: Duration,
    failed: &AtomicBool,
) -> (Vec<std::net::TcpStream>, Option<io::Error>) {
    let mut opened = Vec::with_capacity(count);
    for _ in 0..count {
        if failed.load(Ordering::Relaxed) {
            break;
        }
        match open_one(target, timeout) {
            Ok(conn) => opened.push(conn),
            Err(e) => {
                failed.store(true, Ordering::Relaxed);
                return (opened, Some(e));
            }
        }
    }
    (opened, None)
}

/// One idle connection: connected, bounded by `timeout`, one ping done.
fn open_one(target: SocketAddr, timeout: Duration) -> io::Result<std::net::TcpStream> {
    let mut conn = std::net::TcpStream::connect_timeout(&target, timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    ping(&mut conn)?;
    Ok(conn)
}

/// One round trip: `ping\n` out, the same five bytes back.
fn ping(conn: &mut std::net::TcpStream) -> io::Result<()> {
    conn.write_all(PING)?;
    let mut echo = [0u8; PING.len()];
    conn.read_exact(&mut echo).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => {
            io::Error::new(e.kind(), "the connection closed instead of echoing")
        }
        // A read timeout shows up as WouldBlock (EAGAIN) on Linux.
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            io::Error::new(io::ErrorKind::TimedOut, "no echo within the timeout")
        }
        _ => e,
    })?;
    if echo != PING {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected echo {:?}", String::from_utf8_lossy(&echo)),
        ));
    }
    Ok(())
}

impl IdleConnections {
    /// How many connections are held.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// One more round trip on each connection: are they all still alive
    /// (neither the proxy nor the backend dropped one while it was idle)?
    /// Fails at the first that is not, saying which.
    pub fn verify(&mut self) -> io::Result<()> {
        let total = self.conns.len();
        let target = self.target;
        for (index, conn) in self.conns.iter_mut().enumerate() {
            ping(conn).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("idle connection {index} of {total} to {target}: {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// Closes every connection. Each echo was read, so nothing is left
    /// unread and each close is a FIN, not a reset.
    pub fn close(self) {
        drop(self.conns);
    }
}
