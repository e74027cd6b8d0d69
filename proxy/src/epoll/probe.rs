//! One check on the wire: the [`Dialogue`] of `policy/check/` driven over a
//! connection of its own, within the check's `timeout`.
//!
//! ```text
//!   connect (the server's port, or a `tcp-check connect port N`)
//!     └─ PROXY header first, if the server takes one (send-proxy, -v2):
//!        a LOCAL one (v2) or `PROXY UNKNOWN` (v1), as HAProxy's checks send,
//!        since a check carries no client
//!   then as the dialogue says: send, read into its inbox, ask again
//!   done: its goodbye (QUIT...), a short wait for the server to close first,
//!         and the socket is closed with a reset (SO_LINGER 0)
//! ```
//!
//! Everything, connect included, must end within `timeout`: a connect that
//! takes longer is L4TOUT, a dialogue that takes longer L7TOUT, with what
//! it was waiting for and what had come. Why the reset: the side that
//! closes first keeps the connection in TIME_WAIT for 60 s, holding a
//! local port; one check every 2 s would hold 30 per server. A protocol
//! with a goodbye makes the server close first, and the reset after its
//! FIN costs nothing; without one, the reset skips TIME_WAIT, as HAProxy's
//! checks do.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use runtime::net::TcpStream;
use runtime::time;

use crate::conn::proxy_protocol::{Version, encode_local};
use crate::policy::check::dialogue::got;
use crate::policy::check::{Dialogue, Inbox, Next, Status, Verdict};
use crate::policy::health::reason;

/// The most a check waits for the server to close after its goodbye.
const GOODBYE_WAIT: Duration = Duration::from_millis(500);

/// Where a check goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The server.
    pub addr: SocketAddr,
    /// The PROXY header version its connections start with, if any.
    pub send_proxy: Option<Version>,
}

/// Runs `dialogue` against `target`, all of it within `limit`.
pub async fn run(dialogue: &mut dyn Dialogue, target: Target, limit: Duration) -> Verdict {
    let deadline = Instant::now() + limit;
    let mut wire = Wire {
        target,
        limit,
        deadline,
        stream: None,
        inbox: Inbox::default(),
    };
    let mut next = dialogue.next(&mut wire.inbox);
    if !matches!(next, Next::Connect { .. })
        && let Err(verdict) = wire.connect(None).await
    {
        return verdict;
    }
    loop {
        let step = match next {
            Next::Connect { port } => wire.connect(port).await,
            Next::Send(bytes) => wire.send(&bytes).await,
            Next::Receive => wire.receive(&*dialogue).await,
            Next::Done { verdict, goodbye } => {
                wire.goodbye(&goodbye).await;
                return verdict;
            }
        };
        if let Err(verdict) = step {
            return verdict;
        }
        next = dialogue.next(&mut wire.inbox);
    }
}

/// One check's connection and what came on it.
struct Wire {
    target: Target,
    limit: Duration,
    deadline: Instant,
    stream: Option<TcpStream>,
    inbox: Inbox,
}

impl Wire {
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// A new connection (the old one, if any, reset), its PROXY header
    /// sent.
    async fn connect(&mut self, port: Option<u16>) -> Result<(), Verdict> {
        self.stream = None;
        self.inbox.reset();
        let mut addr = self.target.addr;
        if let Some(port) = port {
            addr.set_port(port);
        }
        let stream = match time::timeout(self.left(), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(Verdict::failed(Status::L4Con, reason(&e))),
            Err(time::Elapsed) => {
                let detail = format!("no answer within {:?}", self.limit);
                return Err(Verdict::failed(Status::L4Tout, detail));
            }
        };
        if let Err(e) = stream.set_reset_on_close() {
            // The check goes on; the socket will just linger.
            crate::debug!("health check of {addr}: SO_LINGER: {}", reason(&e));
        }
        let _ = stream.set_nodelay(true);
        self.stream = Some(stream);
        if let Some(version) = self.target.send_proxy {
            self.send(&encode_local(version)).await?;
        }
        Ok(())
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), Verdict> {
        let Some(stream) = &self.stream else {
            return Err(Verdict::failed(Status::L7Rsp, "no connection to send on"));
        };
        match time::timeout(self.left(), stream.write_all(bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let detail = format!("{} while sending", reason(&e));
                Err(Verdict::failed(Status::L7Rsp, detail))
            }
            Err(time::Elapsed) => Err(self.timed_out("sending")),
        }
    }

    /// One read into the inbox: data, or the end (a FIN or an error).
    async fn receive(&mut self, dialogue: &dyn Dialogue) -> Result<(), Verdict> {
        let Some(stream) = &self.stream else {
            return Err(Verdict::failed(Status::L7Rsp, "no connection to read from"));
        };
        if self.inbox.is_final() {
            // A dialogue must judge a final inbox; asking for more would loop.
            let detail = format!("expected {}, got {}", dialogue.awaiting(), got(&self.inbox));
            return Err(Verdict::failed(Status::L7Rsp, detail));
        }
        let mut buf = [0u8; 4096];
        match time::timeout(self.left(), stream.read(&mut buf)).await {
            Ok(Ok(0)) => self.inbox.close(),
            Ok(Ok(n)) => self.inbox.push(&buf[..n]),
            Ok(Err(e)) => self.inbox.fail(reason(&e)),
            Err(time::Elapsed) => return Err(self.timed_out(&dialogue.awaiting())),
        }
        Ok(())
    }

    fn timed_out(&self, awaiting: &str) -> Verdict {
        let detail = format!(
            "no answer within {:?} (waiting for {awaiting}; got {})",
            self.limit,
            got(&self.inbox)
        );
        Verdict::failed(Status::L7Tout, detail)
    }

    /// Sends `goodbye` and waits a little for the server to close first
    /// (module docs); the stream is then dropped, with a reset.
    async fn goodbye(&mut self, goodbye: &[u8]) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        if goodbye.is_empty() || self.inbox.is_closed() {
            return;
        }
        let wait = self.left().min(GOODBYE_WAIT);
        let _ = time::timeout(wait, async {
            stream.write_all(goodbye).await?;
            let mut buf = [0u8; 512];
            // Bounded: at most 64 reads of whatever the server says last.
            for _ in 0..64 {
                if stream.read(&mut buf).await? == 0 {
                    break;
                }
            }
            Ok::<(), io::Error>(())
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::check::Probe;
    use crate::policy::check::redis::RedisCheck;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    fn check(probe: &Probe, target: Target, limit: Duration) -> Verdict {
        let rt = runtime::Runtime::new().expect("runtime");
        rt.block_on(async { run(&mut *probe.start(target.addr), target, limit).await })
    }

    #[test]
    fn a_plain_check_of_a_listener_passes_and_of_a_closed_port_fails() {
        let listener = TcpListener::bind(loopback()).expect("bind");
        let target = Target {
            addr: listener.local_addr().expect("addr"),
            send_proxy: None,
        };
        let limit = Duration::from_secs(2);
        assert_eq!(check(&Probe::Connect, target, limit).status, Status::L4Ok);
        drop(listener);
        let refused = Verdict::failed(Status::L4Con, "connection refused");
        assert_eq!(check(&Probe::Connect, target, limit), refused);
    }

    /// A connect that gets no answer: on Linux, a listener whose accept
    /// queue is full drops new SYNs, and the client waits. Fill a backlog
    /// of 0 with connects until one times out, then check.
    #[test]
    fn a_check_without_answer_ends_at_its_timeout() {
        let options = runtime::net::ListenOptions {
            backlog: 0,
            ..Default::default()
        };
        let listener = runtime::net::bind_std(loopback(), &options).expect("bind");
        let at = listener.local_addr().expect("local addr");
        let mut queued = Vec::new();
        let full = (0..8).any(|_| {
            let connect = std::net::TcpStream::connect_timeout(&at, Duration::from_millis(200));
            connect.map(|stream| queued.push(stream)).is_err()
        });
        if !full {
            eprintln!("skipped: a backlog of 0 took 8 connections without filling");
            return;
        }
        let (limit, started) = (Duration::from_millis(300), Instant::now());
        let target = Target {
            addr: at,
            send_proxy: None,
        };
        let verdict = check(&Probe::Connect, target, limit);
        let took = started.elapsed();
        assert_eq!(
            verdict,
            Verdict::failed(Status::L4Tout, "no answer within 300ms")
        );
        assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
    }

    /// A server on a thread: reads what the check sends first (`expect`
    /// bytes), answers `answer`, then keeps the connection open until the
    /// check closes it; returns everything it read.
    fn server(
        expect: usize,
        answer: &'static [u8],
    ) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind(loopback()).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let mut read = vec![0u8; expect];
            stream.read_exact(&mut read).expect("the check's bytes");
            stream.write_all(answer).expect("answer");
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest);
            read.extend(rest);
            read
        });
        (addr, thread)
    }

    #[test]
    fn the_proxy_header_comes_first_and_the_goodbye_last() {
        let local_v2 = encode_local(Version::V2);
        let (addr, thread) = server(local_v2.len() + 6, b"+PONG\r\n");
        let target = Target {
            addr,
            send_proxy: Some(Version::V2),
        };
        let probe = Probe::Redis(RedisCheck::default());
        let verdict = check(&probe, target, Duration::from_secs(5));
        assert_eq!(verdict, Verdict::passed("redis: +PONG"));
        let read = thread.join().expect("the server thread");
        assert_eq!(
            &read[..local_v2.len()],
            &local_v2[..],
            "a v2 LOCAL header first"
        );
        assert_eq!(&read[local_v2.len()..], b"PING\r\nQUIT\r\n");
    }

    #[test]
    fn an_answer_that_never_comes_is_l7tout_with_what_came() {
        let (addr, thread) = server(6, b"-LOADING Redis is loading");
        let target = Target {
            addr,
            send_proxy: None,
        };
        let probe = Probe::Redis(RedisCheck::default());
        let verdict = check(&probe, target, Duration::from_millis(300));
        assert_eq!(
            verdict,
            Verdict::failed(
                Status::L7Tout,
                "no answer within 300ms (waiting for redis: +PONG; got \"-LOADING Redis is loading\")"
            )
        );
        drop(thread);
    }
}
