//! Syslog over datagrams, UDP or a Unix socket: one datagram per message,
//! as the protocol wants (RFC 5426 for UDP; a local syslog daemon reads
//! `/dev/log` the same way), but as few system calls as a batch allows:
//! `sendmmsg(2)` hands the kernel up to 1,024 datagrams at once.
//!
//! The socket is non-blocking, so a send never waits: a Unix socket whose
//! reader has fallen behind (its queue full) answers `EAGAIN`, and the
//! messages not taken are lost and counted, never held by the event loop
//! that made them. The UDP socket is connected to its destination, so
//! that the kernel reports what it learns (`ECONNREFUSED` after an ICMP
//! "port unreachable" on the next send); what UDP loses on the way is
//! never known to the sender. The Unix socket is not connected: each batch
//! names the path, so a syslog daemon that restarted (a new socket at the
//! same path) gets the next batch without a reconnection.

use std::io::{self, IoSlice};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

use nix::sys::socket::{
    ControlMessage, MsgFlags, MultiHeaders, SockaddrLike, SockaddrStorage, UnixAddr, sendmmsg,
};

/// The most datagrams one `sendmmsg` takes (the kernel's `UIO_MAXIOV`).
const MAX_PER_CALL: usize = 1024;

/// A datagram socket and where its datagrams go.
#[derive(Debug)]
pub enum Datagram {
    /// UDP, connected to its destination.
    Udp(UdpSocket),
    /// A Unix datagram socket, unconnected, and the path it sends to.
    Unix(UnixDatagram, UnixAddr),
}

impl Datagram {
    /// A non-blocking UDP socket connected to `to`.
    pub fn udp(to: SocketAddr) -> io::Result<Datagram> {
        let any: SocketAddr = match to {
            SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(any)?;
        socket.connect(to)?;
        socket.set_nonblocking(true)?;
        Ok(Datagram::Udp(socket))
    }

    /// A non-blocking Unix datagram socket that sends to `path` (which
    /// need not exist yet: sends fail until it does).
    pub fn unix(path: &Path) -> io::Result<Datagram> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        let to = UnixAddr::new(path).map_err(io::Error::from)?;
        Ok(Datagram::Unix(socket, to))
    }

    /// Sends the messages of `buffer`, message `i` ending at `ends[i]`, one
    /// datagram each, in order. At the first failure the rest are not sent:
    /// `Err((sent, error))`.
    pub fn send(&self, buffer: &[u8], ends: &[usize]) -> Result<(), (usize, io::Error)> {
        let mut start = 0;
        let slices: Vec<[IoSlice<'_>; 1]> = ends
            .iter()
            .map(|&end| {
                let message = buffer.get(start..end).unwrap_or_default();
                start = end;
                [IoSlice::new(message)]
            })
            .collect();
        let mut sent = 0;
        while sent < slices.len() {
            let chunk = &slices[sent..slices.len().min(sent + MAX_PER_CALL)];
            let result = match self {
                Datagram::Udp(socket) => send_chunk::<SockaddrStorage>(socket, chunk, None),
                Datagram::Unix(socket, to) => send_chunk(socket, chunk, Some(*to)),
            };
            match result {
                Ok(0) => return Err((sent, io::Error::from(io::ErrorKind::WriteZero))),
                Ok(n) => sent += n,
                Err(e) => return Err((sent, e)),
            }
        }
        Ok(())
    }
}

/// One `sendmmsg` of `chunk`, each datagram to `to` (`None`: the connected
/// destination): how many the kernel took.
fn send_chunk<S: SockaddrLike + Copy>(
    socket: &impl AsRawFd,
    chunk: &[[IoSlice<'_>; 1]],
    to: Option<S>,
) -> io::Result<usize> {
    let mut headers = MultiHeaders::<S>::preallocate(chunk.len(), None);
    let addresses = vec![to; chunk.len()];
    let no_control: [ControlMessage<'_>; 0] = [];
    let results = sendmmsg(
        socket.as_raw_fd(),
        &mut headers,
        chunk,
        addresses,
        no_control,
        MsgFlags::MSG_DONTWAIT,
    )?;
    Ok(results.count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn messages(text: &[&str]) -> (String, Vec<usize>) {
        let mut buffer = String::new();
        let mut ends = Vec::new();
        for t in text {
            buffer.push_str(t);
            ends.push(buffer.len());
        }
        (buffer, ends)
    }

    #[test]
    fn a_batch_arrives_as_one_datagram_per_message_in_order() {
        let receiver = UdpSocket::bind("127.0.0.1:0").expect("bind");
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let to = receiver.local_addr().expect("address");
        let sender = Datagram::udp(to).expect("a UDP sender");
        // More than one sendmmsg's worth.
        let texts: Vec<String> = (0..MAX_PER_CALL + 5).map(|i| format!("line {i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (buffer, ends) = messages(&refs);
        // A loopback receiver's queue holds this many small datagrams.
        receiver_buffer(&receiver);
        sender.send(buffer.as_bytes(), &ends).expect("sent");
        let mut got = vec![0u8; 64];
        for text in &texts {
            let n = receiver.recv(&mut got).expect("a datagram");
            assert_eq!(&got[..n], text.as_bytes());
        }
    }

    fn receiver_buffer(socket: &UdpSocket) {
        let _ = nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::RcvBuf, &(4 << 20));
    }

    #[test]
    fn a_unix_socket_that_is_not_there_fails_the_batch() {
        let path =
            std::env::temp_dir().join(format!("proxy-no-syslog-{}.sock", std::process::id()));
        let sender = Datagram::unix(&path).expect("a Unix sender");
        let (buffer, ends) = messages(&["a", "b"]);
        let (sent, e) = sender
            .send(buffer.as_bytes(), &ends)
            .expect_err("nobody there");
        assert_eq!(sent, 0);
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_full_unix_socket_takes_what_fits_and_never_blocks() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("proxy-full-syslog-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let receiver = UnixDatagram::bind(&path).expect("bind");
        let sender = Datagram::unix(&path).expect("a Unix sender");
        // Nobody reads: the receiver's queue fills and the rest is refused
        // at once (EAGAIN), the sender never waits.
        let text = "x".repeat(1000);
        let texts = vec![text.as_str(); 5000];
        let (buffer, ends) = messages(&texts);
        let (sent, e) = sender
            .send(buffer.as_bytes(), &ends)
            .expect_err("a full queue");
        assert!(sent > 0 && sent < texts.len(), "{sent}");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        drop(receiver);
        let _ = std::fs::remove_file(&path);
    }
}
