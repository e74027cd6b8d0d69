//! The admin listener: `GET /metrics` for Prometheus, `GET /stats` (a page,
//! and its rows as JSON and CSV) for a person, and `GET /health` and
//! `GET /health/FRONTEND` for whoever asks whether the proxy, or one of its
//! frontends, can take clients (a load balancer in front, a route
//! announcer beside it: docs/CLUSTER.md), over just enough HTTP/1.1; and
//! the actions that change a server at runtime (drain, maint, weight,
//! shutdown sessions), over HTTP with a token or over the admin socket.
//!
//! It is off unless the configuration says `admin 127.0.0.1:9100`. The
//! proxy lets it listen on any address; who may use it is the allow list
//! of [`access`] (loopback only by default). [`spawn`] alone refuses an
//! address that is not loopback unless [`AdminOptions::allow_remote`].
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the options, the thread, the accept loop |
//! | [`request`] | the request head, read as it arrives: [`parse_request`] |
//! | `places` | at most 64 connections, and who gives way when they are all taken |
//! | `connection` | one connection: its head, its answer, its close |
//! | `response` | which answer a request gets, and its bytes |
//! | [`views`] | the rows of `/stats.json` and `/stats.csv`: every frontend, group and server |
//! | [`page`] | `/stats`: the page that draws them, one self-contained HTML file |
//! | [`access`] | who may read (`admin-allow`), who may act (`admin-token-file`) |
//! | [`actions`] | the actions, in the runtime API's words and as HTTP requests, carried out |
//! | [`http_action`] | an action over HTTP: its body, its right, its answer |
//! | [`socket`] | the admin socket (`admin-socket PATH`), one command per connection |
//!
//! ## Its own thread, its own runtime
//!
//! The listener runs on a thread named `admin` with a runtime of its own,
//! like the health checker. A scrape reads every worker's counters (relaxed
//! loads, [`metrics`](crate::ops::metrics)), reads `/proc` and formats a page of
//! text: none of that happens on an event loop, and a flood of admin
//! connections waits on the admin thread's epoll, not the workers'.
//!
//! ## Just enough HTTP/1.1
//!
//! One request per connection, then `Connection: close`; no keep-alive, no
//! chunking, no body read but an action's (at most 1 KiB, by its
//! `Content-Length`: [`http_action`]). What a Prometheus scraper and `curl` send is all
//! it needs to understand, and everything else gets a precise refusal:
//!
//! ```text
//!   GET /metrics HTTP/1.1      200  text/plain; version=0.0.4; charset=utf-8
//!   GET /health HTTP/1.1       200  ok (503 lameduck or draining, once a graceful stop began)
//!   GET /health/web HTTP/1.1   200  ok: 2 of 3 servers usable (503 down: 0 of 3 servers
//!                                   usable, or lameduck, draining; 404 for no frontend 'web')
//!   GET /stats.json HTTP/1.1   200  every frontend, group and server, as JSON ([`views`])
//!   GET /stats.csv HTTP/1.1    200  the same, as CSV in HAProxy's `show stat` layout
//!   GET /stats HTTP/1.1        200  the page that draws them ([`page`])
//!   GET /servers/state, POST /servers/FRONTEND/SERVER/state|weight|shutdown-sessions
//!                              the actions ([`actions`]; 403 without the token)
//!   from outside admin-allow   403
//!   HEAD on any of them        200  the same head, no body
//!   POST /metrics ...          405  Allow: GET, HEAD
//!   GET /anything-else         404
//!   not a request line, not HTTP/1.0 or 1.1, bare LF line ends,
//!     a malformed header line, no Host (1.1) or two of them      400, at the first byte that shows it
//!   a head longer than 8 KiB   431
//!   no full head within 1 s    the connection is closed, no answer (timeout admin-request)
//! ```
//!
//! ## Junk cannot hold it
//!
//! A client cannot make the admin thread read forever (the head is read
//! into a fixed buffer, within a deadline of 1 s by default), wait for a
//! blank line that will never come (a head is refused with a 400 at the
//! first byte that cannot be HTTP/1.x: a TLS hello at its first byte), wait
//! forever (writing the answer has a deadline too), or hold descriptors
//! without end: at most 64 admin connections are open at once. And 64
//! clients that send nothing, or one byte, cannot make a scrape wait: when
//! every place is taken, the oldest connection that is only waiting (for
//! its head, or for its client to close after its answer) is closed to make
//! room (`places.rs`). A panic in one connection's task ends that task only
//! (the runtime catches it).
//!
//! ## Closing without losing the answer
//!
//! Closing a socket with unread bytes in its receive buffer sends a reset,
//! and a reset can overtake the answer still on its way to the client: an
//! oversized head, or a body after a GET, would turn a 431 or a 200 into
//! "connection reset". So after the answer the admin side shuts down its
//! writing half and reads (and discards) what the client still sends, until
//! the client closes or one second passes: the "lingering close" of Apache
//! and nginx.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use runtime::combinator::select;
use runtime::net::{ListenOptions, TcpListener, bind_std};
use runtime::notify::Notify;
use runtime::{spawn as spawn_task, time};

use crate::conn::accept::AcceptErrors;
use crate::ops::metrics::exposition::Published;

pub mod access;
pub mod actions;
mod connection;
pub mod http_action;
pub mod page;
mod places;
pub mod request;
mod response;
pub mod socket;
pub mod views;

pub use http_action::Operator;
pub use request::{BadRequest, HeadScanner, Request, parse_request};

use places::Places;

/// How long a client has to send its whole request head unless the
/// configuration says otherwise (`timeout admin-request`): a scraper sends
/// its request at once, so a second is plenty, and short enough that
/// clients holding connections open cannot pile up.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// How the admin listener may be used; [`AdminOptions::default`] is what
/// [`spawn`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminOptions {
    /// Listen on an address that is not loopback. Off by default; the
    /// proxy turns it on, and lets in only the addresses of `admin-allow`
    /// ([`access`]).
    pub allow_remote: bool,
    /// How long a client has to send its whole request head, from its
    /// accept ([`DEFAULT_REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// How long a client has to take the whole answer.
    pub write_timeout: Duration,
    /// The longest request head read; a longer one is answered 431.
    pub max_head: usize,
    /// Admin connections open at once; when all are taken, the oldest that
    /// only waits gives way to a new one.
    pub max_connections: u32,
}

impl Default for AdminOptions {
    fn default() -> Self {
        AdminOptions {
            allow_remote: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            write_timeout: Duration::from_secs(5),
            max_head: 8 * 1024,
            max_connections: 64,
        }
    }
}

/// How often the views' rates are sampled (`ops/metrics/rates.rs`).
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The admin listener's listen queue: connections that find every place
/// answering wait there.
const BACKLOG: u32 = 128;

/// Binds `addr` (a loopback address) and serves `GET /metrics` and
/// `GET /health` on a thread of its own ("admin") with its own runtime,
/// with the default [`AdminOptions`]. Returns the address bound (with its
/// port, if 0 was asked) and the thread, which runs until the process ends.
pub fn spawn(
    addr: SocketAddr,
    registry: Arc<Published>,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    spawn_with(addr, registry, AdminOptions::default())
}

/// [`spawn`] with chosen options: the configured request deadline, shorter
/// timeouts for tests, or (with `allow_remote`) an address that is not
/// loopback.
pub fn spawn_with(
    addr: SocketAddr,
    registry: Arc<Published>,
    options: AdminOptions,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = bind(addr, &options)?;
    serve_on(
        listener,
        (registry, Arc::default()),
        options,
        Arc::default(),
    )
}

/// Binds the admin listener on `addr` (a loopback address unless the
/// options allow others), for [`serve_on`].
pub fn bind(addr: SocketAddr, options: &AdminOptions) -> io::Result<std::net::TcpListener> {
    if !options.allow_remote && !is_loopback(addr.ip()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "admin: {addr} is not a loopback address; the admin listener is for this host only"
            ),
        ));
    }
    let listen = ListenOptions {
        backlog: BACKLOG,
        ..ListenOptions::default()
    };
    bind_std(addr, &listen)
        .map_err(|e| io::Error::new(e.kind(), format!("admin: cannot listen on {addr}: {e}")))
}

/// Serves on `listener` (bound by [`bind`], or handed over by the process
/// this one replaces, ops/upgrade/) on the "admin" thread, until `stop`
/// says to stop accepting. Returns the address and the thread.
pub fn serve_on(
    listener: std::net::TcpListener,
    (registry, operator): (Arc<Published>, Arc<Operator>),
    options: AdminOptions,
    stop: Arc<StopAccepting>,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let local = listener.local_addr()?;
    // A runtime cannot move between threads, so the thread builds its own
    // (and registers the listener with it) and tells us whether that worked.
    let (started, start_result) = std::sync::mpsc::sync_channel(1);
    let handle = thread::Builder::new().name("admin".into()).spawn(move || {
        let rt = match runtime::Runtime::new() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = started.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => {
                    let _ = started.send(Ok(()));
                    let stopped = stop.stopped();
                    // Stopped: the accept loop and its listener are dropped;
                    // the connections it spawned run on to their end.
                    let _ = select(
                        serve_forever(listener, (registry, operator), options),
                        stopped,
                    )
                    .await;
                    std::future::pending::<()>().await;
                }
                Err(e) => {
                    let _ = started.send(Err(e));
                }
            }
        });
    })?;
    match start_result.recv() {
        Ok(Ok(())) => Ok((local, handle)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("the admin thread died while starting")),
    }
}

/// "Stop accepting" for the admin listener, from another thread: once a
/// new process has taken the listeners (ops/upgrade/), scrapes go to it.
/// The listener closes (after its `EPOLL_CTL_DEL`: the new process holds the
/// same socket); connections already accepted finish.
#[derive(Debug, Default)]
pub struct StopAccepting {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopAccepting {
    /// Stops the accept loop.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_all();
    }

    async fn stopped(&self) {
        loop {
            // Taken before the flag is read, so a stop in between is seen.
            let notified = self.notify.notified();
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// 127.0.0.0/8, ::1, and ::ffff:127.0.0.0/104.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Accepts forever, one task per connection, each in a place
/// ([`places`]): at most `max_connections` at once, the oldest waiting one
/// giving way to a newcomer when all are taken.
async fn serve_forever(
    listener: TcpListener,
    (registry, operator): (Arc<Published>, Arc<Operator>),
    options: AdminOptions,
) {
    let sampled = registry.clone();
    spawn_task(async move {
        let mut every = time::interval(SAMPLE_EVERY);
        loop {
            every.tick().await;
            views::sample(&sampled);
        }
    });
    let places = Places::new(usize::try_from(options.max_connections).unwrap_or(usize::MAX));
    let mut errors = AcceptErrors::new();
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let (place, give_way) = places.take().await;
                let (registry, operator) = (registry.clone(), operator.clone());
                spawn_task(async move {
                    let operating = (&*registry, &*operator);
                    connection::serve(stream, peer, operating, &options, place, give_way).await;
                });
            }
            Err(e) => {
                if let Some(pause) = errors.note(&e) {
                    time::sleep(pause).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::response::METRICS_TYPE;
    use super::*;
    use crate::ops::metrics::counters::add;
    use crate::ops::metrics::exposition::{Registry, Stopping};
    use crate::policy::health::HealthBoard;
    use std::io::{Read, Write};
    use std::net::TcpStream as StdStream;
    use std::time::Instant;

    /// A registry of one frontend `web` with one backend, 3 connections counted.
    fn registry() -> Arc<Published> {
        let backend = SocketAddr::from(([127, 0, 0, 1], 9001));
        let board = Arc::new(HealthBoard::new("web", &[(backend, None)]));
        let registry = Registry::new(&[("web".to_string(), vec![backend], board)], 2);
        add(&registry.worker(1, 0).connections, 3);
        Published::new(registry)
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    fn start(options: AdminOptions) -> SocketAddr {
        let (addr, _thread) = spawn_with(loopback(), registry(), options).expect("admin starts");
        addr
    }

    fn connect(addr: SocketAddr) -> StdStream {
        let stream = StdStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        stream
    }

    /// Sends `request`, reads the answer to the end.
    fn exchange(addr: SocketAddr, request: &[u8]) -> Answer {
        let mut stream = connect(addr);
        stream.write_all(request).expect("send");
        read_answer(&mut stream)
    }

    fn read_answer(stream: &mut StdStream) -> Answer {
        let mut bytes = Vec::new();
        stream
            .read_to_end(&mut bytes)
            .expect("an answer, then end of file");
        Answer::parse(&bytes)
    }

    /// A response as the tests check it.
    #[derive(Debug)]
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Answer {
        /// Parses a whole response, checking what every answer must have.
        fn parse(bytes: &[u8]) -> Answer {
            let text = String::from_utf8(bytes.to_vec()).expect("UTF-8");
            let (head, body) = text.split_once("\r\n\r\n").expect("a head");
            let mut lines = head.split("\r\n");
            let status_line = lines.next().expect("a status line");
            let status = status_line
                .strip_prefix("HTTP/1.1 ")
                .and_then(|s| s.get(..3))
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("status line {status_line:?}"));
            let headers: Vec<(String, String)> = lines
                .map(|l| {
                    let (k, v) = l.split_once(": ").expect("name: value");
                    (k.to_ascii_lowercase(), v.to_string())
                })
                .collect();
            let answer = Answer {
                status,
                headers,
                body: body.to_string(),
            };
            assert_eq!(answer.header("connection"), Some("close"));
            answer
        }

        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }

        fn content_length(&self) -> usize {
            self.header("content-length")
                .and_then(|v| v.parse().ok())
                .expect("a Content-Length")
        }
    }

    fn get(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n").into_bytes()
    }

    #[test]
    fn get_metrics_answers_the_exposition() {
        let addr = start(AdminOptions::default());
        let answer = exchange(addr, &get("/metrics"));
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-type"), Some(METRICS_TYPE));
        assert_eq!(answer.content_length(), answer.body.len());
        // The body is the registry's exposition (the end-to-end tests read
        // it with a strict parser): worker 1's three connections summed.
        assert!(
            answer
                .body
                .contains("\nproxy_frontend_connections_total{frontend=\"web\"} 3\n"),
            "{}",
            answer.body
        );
        // Prometheus's own request: a query string, an Accept header.
        let scrape = b"GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                       Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\n\r\n";
        assert_eq!(exchange(addr, scrape).status, 200);
        // HTTP/1.0 without Host, and the absolute form.
        assert_eq!(exchange(addr, b"GET /metrics HTTP/1.0\r\n\r\n").status, 200);
        let absolute = b"GET http://localhost:9100/metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(exchange(addr, absolute).status, 200);
    }

    #[test]
    fn health_answers_503_once_draining() {
        let published = registry();
        let (addr, _thread) = spawn_with(loopback(), published.clone(), AdminOptions::default())
            .expect("admin starts");
        assert_eq!(exchange(addr, &get("/health")).status, 200);
        published.set_stopping(Stopping::Lameduck);
        let answer = exchange(addr, &get("/health"));
        assert_eq!((answer.status, answer.body.as_str()), (503, "lameduck\n"));
        let answer = exchange(addr, &get("/health/web"));
        assert_eq!((answer.status, answer.body.as_str()), (503, "lameduck\n"));
        published.set_stopping(Stopping::Draining);
        let answer = exchange(addr, &get("/health"));
        assert_eq!((answer.status, answer.body.as_str()), (503, "draining\n"));
        assert_eq!(exchange(addr, &get("/metrics")).status, 200);
    }

    #[test]
    fn health_of_a_frontend_is_503_without_a_usable_server_and_404_unknown() {
        let check = Some(crate::policy::health::Check {
            fall: 1,
            ..crate::policy::health::Check::default()
        });
        let (a, b) = (
            SocketAddr::from(([127, 0, 0, 1], 9001)),
            SocketAddr::from(([127, 0, 0, 1], 9002)),
        );
        let board = Arc::new(HealthBoard::new("web", &[(a, check), (b, None)]));
        // b has weight 0: up, but drained, so never usable.
        let parts = crate::ops::metrics::exposition::FrontendParts {
            name: "web".to_string(),
            backends: [a, b]
                .map(|addr| crate::ops::metrics::exposition::ServerLabels::unnamed("web", addr))
                .to_vec(),
            weights: vec![1, 0],
            board: board.clone(),
            addresses: None,
            counters: Vec::new(),
            routes: Vec::new(),
        };
        let published = Published::new(Registry::from_counters(vec![parts]));
        let (addr, _thread) = spawn_with(loopback(), published.clone(), AdminOptions::default())
            .expect("admin starts");
        let answer = exchange(addr, &get("/health/web"));
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (200, "ok: 1 of 2 servers usable\n")
        );
        board.check_result(
            0,
            crate::policy::check::dialogue::Verdict::failed(
                crate::policy::check::dialogue::Status::L4Con,
                "connection refused",
            ),
            std::time::Duration::from_millis(1),
        );
        let answer = exchange(addr, &get("/health/web"));
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (503, "down: 0 of 2 servers usable\n")
        );
        assert_eq!(
            exchange(addr, b"HEAD /health/web HTTP/1.1\r\nHost: x\r\n\r\n").status,
            503
        );
        // The process itself is still fine.
        assert_eq!(exchange(addr, &get("/health")).status, 200);
        let answer = exchange(addr, &get("/health/api"));
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (404, "not found: no frontend named 'api'\n")
        );
        assert_eq!(exchange(addr, &get("/health/")).status, 404);
    }

    #[test]
    fn get_health_answers_ok_and_head_has_no_body() {
        let addr = start(AdminOptions::default());
        let answer = exchange(addr, &get("/health"));
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
        assert_eq!(answer.content_length(), 3);
        let head = exchange(addr, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(head.status, 200);
        assert!(head.body.is_empty());
        assert!(head.content_length() > 100, "the length of the GET's body");
    }

    #[test]
    fn unknown_paths_are_404_and_other_methods_405() {
        let addr = start(AdminOptions::default());
        let answer = exchange(addr, &get("/nope"));
        assert_eq!(answer.status, 404);
        assert_eq!(answer.content_length(), answer.body.len());
        assert_eq!(exchange(addr, &get("/metrics/")).status, 404);
        let post = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
        let answer = exchange(addr, post);
        assert_eq!(answer.status, 405);
        assert_eq!(answer.header("allow"), Some("GET, HEAD"));
        let lower = b"get /health HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(
            exchange(addr, lower).status,
            405,
            "methods are case-sensitive"
        );
    }

    #[test]
    fn garbage_is_400() {
        let addr = start(AdminOptions::default());
        let garbage: [&[u8]; 5] = [
            b"hello\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/1.1\n\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        ];
        for request in garbage {
            let answer = exchange(addr, request);
            assert_eq!(answer.status, 400, "{request:?}");
            assert!(answer.body.starts_with("bad request: "), "{}", answer.body);
            assert_eq!(answer.content_length(), answer.body.len());
        }
    }

    #[test]
    fn a_head_sent_one_byte_at_a_time_is_answered() {
        let addr = start(AdminOptions::default());
        let mut stream = connect(addr);
        for byte in get("/health") {
            stream.write_all(&[byte]).expect("send");
            stream.flush().expect("flush");
        }
        assert_eq!(read_answer(&mut stream).status, 200);
    }

    #[test]
    fn an_oversized_head_is_431_without_reading_forever() {
        let addr = start(AdminOptions::default());
        // A head of 16 KiB sent at once.
        let mut request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: ".to_vec();
        request.resize(16 * 1024, b'a');
        request.extend_from_slice(b"\r\n\r\n");
        assert_eq!(exchange(addr, &request).status, 431);
        // A client that never stops sending its head.
        let mut stream = connect(addr);
        let mut writer = stream.try_clone().expect("clone");
        let flood = thread::spawn(move || {
            let _ = writer.write_all(b"GET /metrics HTTP/1.1\r\nX: ");
            let chunk = [b'a'; 1024];
            // Until the admin side closes (a reset ends the writes).
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && writer.write_all(&chunk).is_ok() {}
        });
        let started = Instant::now();
        assert_eq!(read_answer(&mut stream).status, 431);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        drop(stream);
        flood.join().expect("the flood thread");
    }

    #[test]
    fn a_silent_client_is_closed_after_the_request_timeout() {
        let request_timeout = Duration::from_millis(200);
        let addr = start(AdminOptions {
            request_timeout,
            ..AdminOptions::default()
        });
        for request in [&b""[..], b"GET /metrics HTTP/1.1\r\n"] {
            let mut stream = connect(addr);
            stream.write_all(request).expect("send");
            let mut buf = [0u8; 64];
            let read = stream.read(&mut buf);
            assert!(matches!(read, Ok(0)), "closed without an answer: {read:?}");
        }
    }

    /// Options that no deadline can interfere with: whatever closes a
    /// connection in these tests, it is not the request timeout.
    fn patient(max_connections: u32) -> AdminOptions {
        AdminOptions {
            request_timeout: Duration::from_secs(600),
            max_connections,
            ..AdminOptions::default()
        }
    }

    #[test]
    fn a_head_that_cannot_be_http_is_answered_400_before_any_blank_line() {
        let addr = start(patient(64));
        // Each is sent alone, and the client keeps its side open: only the
        // early decision can produce the answer.
        let starts: [&[u8]; 6] = [
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x00",
            b"SSH-2.0-OpenSSH_9.6\r\n",
            b"GET /metrics HTTP/2",
            b"GET /metrics HTTP/1.1\n",
            b"GET /metrics HTTP/1.1\r\nHost : x",
        ];
        for bytes in starts {
            let mut stream = connect(addr);
            stream.write_all(bytes).expect("send");
            let answer = read_answer(&mut stream);
            assert_eq!(answer.status, 400, "{bytes:?}");
            assert!(answer.body.starts_with("bad request: "), "{}", answer.body);
        }
    }

    #[test]
    fn a_client_gone_mid_request_does_not_break_the_next() {
        let addr = start(AdminOptions::default());
        for _ in 0..20 {
            let mut stream = connect(addr);
            stream.write_all(b"GET /metr").expect("send");
            drop(stream);
            // And one that leaves without reading its answer.
            let mut stream = connect(addr);
            stream.write_all(&get("/metrics")).expect("send");
            drop(stream);
        }
        assert_eq!(exchange(addr, &get("/health")).status, 200);
        assert_eq!(exchange(addr, &get("/metrics")).status, 200);
    }

    /// Whether `stream` is still open with nothing to read (its peer has
    /// neither answered nor closed), asked without waiting.
    fn still_open(stream: &StdStream) -> bool {
        stream.set_nonblocking(true).expect("non-blocking");
        let mut byte = [0u8; 1];
        let mut reader = stream;
        let open = matches!(
            reader.read(&mut byte),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        );
        stream.set_nonblocking(false).expect("blocking");
        open
    }

    #[test]
    fn when_every_place_is_taken_the_oldest_waiting_gives_way() {
        let addr = start(patient(3));
        // Three clients hold every place: silent, one byte that may start
        // a method, half a request line. Accepted in that order, before
        // the scrape behind them in the listen queue.
        let holders: Vec<StdStream> = [&b""[..], b"x", b"GET /metr"]
            .iter()
            .map(|bytes| {
                let mut stream = connect(addr);
                stream.write_all(bytes).expect("send");
                stream
            })
            .collect();
        let mut scrape = connect(addr);
        scrape.write_all(&get("/metrics")).expect("send");
        assert_eq!(read_answer(&mut scrape).status, 200);
        let mut oldest = &holders[0];
        let mut byte = [0u8; 1];
        assert!(
            matches!(oldest.read(&mut byte), Ok(0)),
            "the oldest gave way"
        );
        // The others are still open: no deadline closed anything.
        assert!(still_open(&holders[1]) && still_open(&holders[2]));
    }

    #[test]
    fn an_answered_client_that_lingers_gives_way_first() {
        let addr = start(patient(2));
        let silent = connect(addr);
        let mut answered = connect(addr);
        answered.write_all(&get("/health")).expect("send");
        // Its answer, then the admin side lingers: the client keeps its
        // side open.
        let mut head = [0u8; 12];
        answered.read_exact(&mut head).expect("the answer's start");
        assert_eq!(&head, b"HTTP/1.1 200");
        assert_eq!(exchange(addr, &get("/metrics")).status, 200);
        let mut rest = Vec::new();
        answered.read_to_end(&mut rest).expect("then end of file");
        assert!(still_open(&silent), "the older, unanswered one stays");
    }

    #[test]
    fn only_loopback_unless_allowed() {
        let anywhere = SocketAddr::from(([0, 0, 0, 0], 0));
        let refused = spawn(anywhere, registry()).map(|(addr, _)| addr);
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
        let options = AdminOptions {
            allow_remote: true,
            ..AdminOptions::default()
        };
        let (addr, _thread) = spawn_with(anywhere, registry(), options).expect("allowed");
        let local = SocketAddr::from(([127, 0, 0, 1], addr.port()));
        assert_eq!(exchange(local, &get("/health")).status, 200);
        assert!(is_loopback("::1".parse().expect("ip")));
        assert!(is_loopback("::ffff:127.0.0.1".parse().expect("ip")));
        assert!(is_loopback("127.1.2.3".parse().expect("ip")));
        assert!(!is_loopback("::".parse().expect("ip")));
        assert!(!is_loopback("10.0.0.1".parse().expect("ip")));
    }

    #[test]
    fn a_port_in_use_is_an_error_at_spawn() {
        let addr = start(AdminOptions::default());
        let again = spawn(addr, registry()).map(|(addr, _)| addr);
        assert_eq!(again.map_err(|e| e.kind()), Err(io::ErrorKind::AddrInUse));
    }
}
