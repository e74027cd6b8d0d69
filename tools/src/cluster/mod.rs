//! The client side of a cluster of proxies behind one address
//! (scripts/cluster.sh, docs/CLUSTER.md): connections through the VIP, and
//! what became of each.
//!
//! Every backend of the cluster is the fixture in `whoami` mode, whose
//! first line names the backend and the address the connection came from.
//! That address is the proxy node's own on the backend network, so one
//! line tells a client both halves of its path:
//!
//! ```text
//!   client 203.0.113.7:41000 ──▶ VIP 198.51.100.1:80 ──ECMP──▶ node lb2 ──balance source──▶ be3
//!   "backend 10.12.0.23:8080 client 10.12.0.12:52144\n"     (10.12.0.1N is node lbN)
//! ```
//!
//! [`probe`] is one short connection (the line, one echo, a clean close
//! both ways); [`Held`] a connection kept open and pinged, to learn whether
//! an event (a node leaving, a crash) reset it; [`load`] probes one after
//! the other and keeps every [`Sample`] with its times, to tell a refusal
//! or a reset before an event from one after it.
//!
//! Everything here runs in the client's network namespace: the demo binary
//! under `ip netns exec`, the tests in threads that entered it.
//!
//! The room also holds that program, `cluster_client` ([`cli`]): its
//! command line, the spread and the watch.
//!
//! May import: nothing of the crate; the runtime's blocking connects and
//! the proxy's shared settings (flags, durations) outside it.

pub mod cli;

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use runtime::net::{connect_std, connect_std_from};

/// The service address every node announces, and its port.
pub const VIP: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)), 80);

/// How many client addresses the client namespace has on `lo`
/// (203.0.113.1 to 203.0.113.30).
pub const CLIENT_ADDRESSES: u8 = 30;

/// The nodes of the cluster: lb1, lb2, lb3.
pub const NODES: usize = 3;

/// The client addresses, 203.0.113.1 up to [`CLIENT_ADDRESSES`].
pub fn client_addresses() -> Vec<IpAddr> {
    (1..=CLIENT_ADDRESSES)
        .map(|n| IpAddr::V4(Ipv4Addr::new(203, 0, 113, n)))
        .collect()
}

/// The node (1 to 3) whose backend-side address is `ip` (10.12.0.1N).
pub fn node_of(ip: IpAddr) -> Option<usize> {
    let IpAddr::V4(v4) = ip else {
        return None;
    };
    match v4.octets() {
        [10, 12, 0, n @ 11..=13] => Some(usize::from(n - 10)),
        _ => None,
    }
}

/// Which node and which backend served a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The node, 1 to [`NODES`].
    pub node: usize,
    /// The backend, as it named itself.
    pub backend: SocketAddr,
    /// The client's own end of the connection.
    pub local: SocketAddr,
}

/// How a connection failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The connect was answered with a reset: nothing listened there.
    Refused,
    /// An established connection was reset.
    Reset,
    /// It ended (a FIN) where more was due.
    Closed,
    /// Nothing came within the timeout.
    TimedOut,
    /// Anything else: what, and where.
    Other(String),
}

impl Failure {
    /// The failure an I/O error means.
    pub fn of(e: &io::Error) -> Failure {
        match e.kind() {
            ErrorKind::ConnectionRefused => Failure::Refused,
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted => {
                Failure::Reset
            }
            ErrorKind::TimedOut | ErrorKind::WouldBlock => Failure::TimedOut,
            ErrorKind::UnexpectedEof => Failure::Closed,
            _ => Failure::Other(e.to_string()),
        }
    }

    /// A word for counts and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::Reset => "reset",
            Failure::Closed => "closed",
            Failure::TimedOut => "timed out",
            Failure::Other(_) => "other",
        }
    }
}

/// Reads `backend <addr> client <addr>` as the fixture's `whoami` says it.
pub fn parse_whoami(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.trim_end().strip_prefix("backend ")?;
    let (backend, client) = rest.split_once(" client ")?;
    Some((backend.parse().ok()?, client.parse().ok()?))
}

/// A connection to the VIP from `source` (any address if `None`), its
/// `whoami` line read: open, with `timeout` on every read and write.
fn open(source: Option<IpAddr>, timeout: Duration) -> Result<(TcpStream, Served), Failure> {
    let stream = match source {
        Some(ip) => connect_std_from(SocketAddr::new(ip, 0), VIP, timeout),
        None => connect_std(VIP, timeout),
    }
    .map_err(|e| Failure::of(&e))?;
    stream.set_nonblocking(false).map_err(|e| Failure::of(&e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| Failure::of(&e))?;
    let local = stream.local_addr().map_err(|e| Failure::of(&e))?;
    let line = read_line(&stream)?;
    let Some((backend, peer)) = parse_whoami(&line) else {
        return Err(Failure::Other(format!("not a whoami line: {line:?}")));
    };
    let Some(node) = node_of(peer.ip()) else {
        return Err(Failure::Other(format!("{peer} is no node's address")));
    };
    let served = Served {
        node,
        backend,
        local,
    };
    Ok((stream, served))
}

/// Reads one line, up to its newline (the fixture says nothing more until
/// it is spoken to, so nothing after it is lost). At most 256 bytes.
fn read_line(mut stream: &TcpStream) -> Result<String, Failure> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 256 {
        match stream.read(&mut byte) {
            Ok(0) => return Err(Failure::Closed),
            Ok(_) if byte[0] == b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::of(&e)),
        }
    }
    Err(Failure::Other("a line longer than 256 bytes".to_string()))
}

/// Sends `line` and reads the same bytes back.
fn echo(mut stream: &TcpStream, line: &str) -> Result<(), Failure> {
    stream
        .write_all(line.as_bytes())
        .map_err(|e| Failure::of(&e))?;
    let mut back = vec![0u8; line.len()];
    stream.read_exact(&mut back).map_err(|e| Failure::of(&e))?;
    if back != line.as_bytes() {
        return Err(Failure::Other(format!(
            "sent {line:?}, got {:?} back",
            String::from_utf8_lossy(&back)
        )));
    }
    Ok(())
}

/// The client's FIN, then the whole way back: the backend's FIN must
/// arrive with nothing before it.
fn close(mut stream: TcpStream) -> Result<(), Failure> {
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| Failure::of(&e))?;
    let mut rest = [0u8; 64];
    match stream.read(&mut rest) {
        Ok(0) => Ok(()),
        Ok(n) => Err(Failure::Other(format!("{n} bytes after the FIN"))),
        Err(e) => Err(Failure::of(&e)),
    }
}

/// One short connection through the VIP: the `whoami` line, one echo, a
/// clean close both ways. Which node and backend served it, or how it
/// failed.
pub fn probe(source: Option<IpAddr>, timeout: Duration) -> Result<Served, Failure> {
    let (stream, served) = open(source, timeout)?;
    echo(&stream, "ping\n")?;
    close(stream)?;
    Ok(served)
}

/// A connection held open, to be pinged now and then.
#[derive(Debug)]
pub struct Held {
    stream: TcpStream,
    /// Who serves it.
    pub served: Served,
    pings: u64,
}

impl Held {
    /// Opens a connection from `source` and reads who serves it.
    pub fn open(source: Option<IpAddr>, timeout: Duration) -> Result<Held, Failure> {
        let (stream, served) = open(source, timeout)?;
        Ok(Held {
            stream,
            served,
            pings: 0,
        })
    }

    /// One line there and back: still alive, or how it ended.
    pub fn ping(&mut self) -> Result<(), Failure> {
        self.pings += 1;
        echo(&self.stream, &format!("ping {}\n", self.pings))
    }

    /// Closes it cleanly both ways, or says how that failed.
    pub fn close(self) -> Result<(), Failure> {
        close(self.stream)
    }
}

/// One connection of a [`load`]: from where, when, and how it went.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The client address it came from (`None`: whichever the kernel chose).
    pub source: Option<IpAddr>,
    /// When its connect began.
    pub started: Instant,
    /// When it was over, served or failed.
    pub ended: Instant,
    /// Who served it, or how it failed.
    pub outcome: Result<Served, Failure>,
}

/// Probes one after the other, from `sources` in turn starting at `first`,
/// `pause` apart, until `stop` is set or `until` passes, handing each
/// connection's [`Sample`] to `record` as soon as it is over.
pub fn load(
    sources: &[IpAddr],
    first: usize,
    pause: Duration,
    timeout: Duration,
    stop: &AtomicBool,
    until: Instant,
    mut record: impl FnMut(Sample),
) {
    let mut next = first;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        let source = sources.get(next % sources.len().max(1)).copied();
        next += 1;
        let started = Instant::now();
        let outcome = probe(source, timeout);
        record(Sample {
            source,
            started,
            ended: Instant::now(),
            outcome,
        });
        thread::sleep(pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whoami_line_names_the_backend_and_the_node() {
        let (backend, client) =
            parse_whoami("backend 10.12.0.23:8080 client 10.12.0.12:52144\n").expect("parses");
        assert_eq!(backend, "10.12.0.23:8080".parse().expect("addr"));
        assert_eq!(node_of(client.ip()), Some(2));
        assert_eq!(parse_whoami("port 9001: ping"), None);
        assert_eq!(node_of("10.12.0.21".parse().expect("ip")), None);
        assert_eq!(node_of("10.12.0.13".parse().expect("ip")), Some(3));
    }

    #[test]
    fn failures_are_named_by_the_error() {
        let refused = io::Error::from(ErrorKind::ConnectionRefused);
        assert_eq!(Failure::of(&refused), Failure::Refused);
        let broken = io::Error::from(ErrorKind::BrokenPipe);
        assert_eq!(Failure::of(&broken).name(), "reset");
        assert_eq!(client_addresses().len(), usize::from(CLIENT_ADDRESSES));
    }
}
