//! Descriptors handed to another process: a message on a Unix socket with
//! copies of open descriptors attached (`SCM_RIGHTS`, unix(7)).
//!
//! The receiver gets new descriptor numbers for the *same open files*: a
//! listening socket handed over is one socket with two owners, and its
//! queue of connections not yet accepted is shared, not copied. The kernel
//! closes the socket only when the last descriptor of it closes, in
//! whichever process. Two consequences the callers must keep in mind:
//!
//! - an epoll registration belongs to the open file, not to the descriptor
//!   number: a process that closes its copy of a handed socket without
//!   `EPOLL_CTL_DEL` first keeps getting events for it, because the file
//!   lives on in the other process. [`crate::net::TcpListener::from_std`]
//!   registers its listener as *adopted* (`async_fd.rs`), which removes it
//!   from the epoll set before it closes;
//! - at most [`MAX_FDS`] descriptors go in one message (the kernel's
//!   `SCM_MAX_FD`): more must be batched over several messages.
//!
//! Received descriptors are opened close-on-exec (`MSG_CMSG_CLOEXEC`).
//! The socket itself (a `SOCK_SEQPACKET` one keeps message boundaries) is
//! made by the caller; these two calls are the part that needs `unsafe`.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use crate::sys;

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD`).
pub const MAX_FDS: usize = sys::MAX_FDS_PER_MESSAGE;

/// Sends `bytes` on the Unix socket `socket` with copies of `fds` (at most
/// [`MAX_FDS`]) attached; returns how many bytes went. Ours stay open.
///
/// # Examples
///
/// A listening socket handed over a socket pair, as a server hands its
/// listeners to the new binary in a hitless upgrade: the copy is the same
/// socket, so a client that connected to the original is accepted
/// through the copy, after the original is closed.
///
/// ```
/// use std::os::{fd::AsFd, unix::net::UnixDatagram};
/// use runtime::fd_passing;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let (old, new) = UnixDatagram::pair()?;
/// fd_passing::send(old.as_fd(), b"listener", &[listener.as_fd()])?;
///
/// let mut buf = [0u8; 16];
/// let message = fd_passing::recv(new.as_fd(), &mut buf)?;
/// assert_eq!((&buf[..message.len], message.truncated), (&b"listener"[..], false));
/// let copy = std::net::TcpListener::from(message.fds.into_iter().next().unwrap());
///
/// let client = std::net::TcpStream::connect(listener.local_addr()?)?;
/// drop(listener);
/// let (_conn, peer) = copy.accept()?;
/// assert_eq!(peer, client.local_addr()?);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn send(socket: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    sys::send_with_fds(socket, bytes, fds)
}

/// One message received by [`recv`].
#[derive(Debug)]
pub struct Message {
    /// How many bytes of the buffer it filled.
    pub len: usize,
    /// The descriptors that came with it, now ours.
    pub fds: Vec<OwnedFd>,
    /// The message or its descriptors did not fit and were cut: the
    /// protocol on top should refuse it.
    pub truncated: bool,
}

/// Receives one message on the Unix socket `socket` into `buf`, with the
/// descriptors attached to it. `len == 0` with no descriptor: the peer closed.
pub fn recv(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Message> {
    let sys::Received {
        len,
        fds,
        truncated,
    } = sys::recv_with_fds(socket, buf)?;
    Ok(Message {
        len,
        fds,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    // A descriptor sent is a new number for the same open file: bytes
    // written to the copy come out of the original's peer.
    #[test]
    fn a_sent_descriptor_is_the_same_open_file() {
        let (a, b) = UnixDatagram::pair().expect("a socket pair");
        let (mut left, mut right) = std::os::unix::net::UnixStream::pair().expect("a stream pair");
        send(a.as_fd(), b"take", &[left.as_fd()]).expect("send");
        let mut buf = [0u8; 16];
        let message = recv(b.as_fd(), &mut buf).expect("recv");
        assert_eq!(&buf[..message.len], b"take");
        assert!(!message.truncated);
        assert_eq!(message.fds.len(), 1);
        let mut copy =
            std::os::unix::net::UnixStream::from(message.fds.into_iter().next().expect("one"));
        copy.write_all(b"via the copy").expect("write");
        left.write_all(b"!").expect("write");
        drop((copy, left));
        let mut got = String::new();
        right.read_to_string(&mut got).expect("read");
        assert_eq!(got, "via the copy!");
    }

    #[test]
    fn more_than_the_kernel_takes_is_refused_before_sending() {
        let (a, _b) = UnixDatagram::pair().expect("a socket pair");
        let fds: Vec<_> = (0..=MAX_FDS).map(|_| a.as_fd()).collect();
        let e = send(a.as_fd(), b"x", &fds).expect_err("too many");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
