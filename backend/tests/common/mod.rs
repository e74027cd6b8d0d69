//! Helpers shared by the integration tests: the workspace's watchdog
//! (`testkit::watchdog`), a blocking request helper, a socket option and deterministic test data. (The descriptor
//! limit is raised with `runtime::fd_limit::raise_nofile_limit`.)
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};

use nix::sys::socket::{setsockopt, sockopt};

pub use testkit::watchdog::{IO_BOUND, within};

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
