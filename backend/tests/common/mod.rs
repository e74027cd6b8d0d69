//! Helpers shared by the integration tests: a watchdog, a blocking request
//! helper, a socket option and deterministic test data. (The descriptor
//! limit is raised with `runtime::fd_limit::raise_nofile_limit`.)
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::panic;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt};

/// How long a blocking test socket waits for the fixture before the read
/// fails: a bound, so a fixture that never answers fails the test instead
/// of hanging it. Far above any delay a test uses.
pub const IO_BOUND: Duration = Duration::from_secs(10);

/// Runs `f` on a fresh thread and returns its result; panics if it takes
/// longer than `secs` seconds (the hung thread is left behind: the test has
/// failed anyway), and re-raises `f`'s own panic unchanged.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let name = thread::current().name().unwrap_or("test").to_string();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .name(format!("{name}/body"))
        .spawn(move || {
            let out = f();
            let _ = done_tx.send(());
            out
        })
        .expect("spawn the test body thread");
    match done_rx.recv_timeout(Duration::from_secs(secs)) {
        // Disconnected: the body panicked before it could report; join to get the payload.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(out) => out,
            Err(payload) => panic::resume_unwind(payload),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("watchdog: `{name}` did not finish within {secs} s (hung?)")
        }
    }
}

/// Connects with blocking std sockets bounded by [`IO_BOUND`].
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(IO_BOUND))?;
    conn.set_write_timeout(Some(IO_BOUND))?;
    Ok(conn)
}

/// One exchange: sends `request`, half-closes, reads the reply to EOF.
pub fn ask(addr: SocketAddr, request: &[u8]) -> io::Result<Vec<u8>> {
    let mut conn = connect(addr)?;
    conn.write_all(request)?;
    conn.shutdown(Shutdown::Write)?;
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply)?;
    Ok(reply)
}

/// A xorshift64 generator: a deterministic pseudo-random byte stream.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // Zero is the one state xorshift never leaves.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// `len` bytes of the stream.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// FNV-1a, 64 bits.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Shrinks a socket's receive buffer (SO_RCVBUF), so that a peer's large
/// reply must wait in the peer's send queue until we read.
pub fn shrink_receive_buffer(conn: &TcpStream, bytes: usize) -> io::Result<()> {
    setsockopt(conn, sockopt::RcvBuf, &bytes).map_err(io::Error::from)
}
