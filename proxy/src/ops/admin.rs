//! The admin listener: `GET /metrics` for Prometheus and `GET /health` for
//! whoever asks whether the proxy is alive, over just enough HTTP/1.1.
//!
//! It is off unless the configuration says `admin 127.0.0.1:9100`, and it
//! listens on a loopback address only (a remote scraper goes through an SSH
//! tunnel or a sidecar): [`spawn`] refuses any other address.
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
//! chunking, no body read. What a Prometheus scraper and `curl` send is all
//! it needs to understand, and everything else gets a precise refusal:
//!
//! ```text
//!   GET /metrics HTTP/1.1      200  text/plain; version=0.0.4; charset=utf-8
//!   GET /health HTTP/1.1       200  ok (503 draining, once a graceful stop began)
//!   HEAD on either             200  the same head, no body
//!   POST /metrics ...          405  Allow: GET, HEAD
//!   GET /anything-else         404
//!   not a request line, not HTTP/1.0 or 1.1, bare LF line ends,
//!     a malformed header line, no Host (1.1) or two of them      400
//!   a head longer than 8 KiB   431
//!   no full head within 5 s    the connection is closed, no answer
//! ```
//!
//! ## Bounded in every direction
//!
//! A client cannot make the admin thread read forever (the head is read
//! into a fixed buffer, within a deadline), wait forever (writing the answer
//! has a deadline too), or hold descriptors without end: at most 64 admin
//! connections are open at once, and while 64 are, the listener stops
//! accepting, so more wait in the kernel's queue and cost the process
//! nothing. A panic in one connection's task ends that task only (the
//! runtime catches it).
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
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use runtime::net::{ListenOptions, TcpListener, TcpStream, bind_std};
use runtime::{spawn as spawn_task, time};

use crate::conn::accept::AcceptErrors;
use crate::ops::metrics::exposition::Published;
use crate::policy::limit::Limit;

/// How the admin listener may be used; [`AdminOptions::default`] is what
/// [`spawn`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminOptions {
    /// Listen on an address that is not loopback. Off by default; the proxy
    /// never turns it on.
    pub allow_remote: bool,
    /// How long a client has to send its whole request head.
    pub read_timeout: Duration,
    /// How long a client has to take the whole answer.
    pub write_timeout: Duration,
    /// The longest request head read; a longer one is answered 431.
    pub max_head: usize,
    /// Admin connections open at once; more wait in the listen queue.
    pub max_connections: u32,
}

impl Default for AdminOptions {
    fn default() -> Self {
        AdminOptions {
            allow_remote: false,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            max_head: 8 * 1024,
            max_connections: 64,
        }
    }
}

/// The admin listener's listen queue: connections over `max_connections`
/// wait there.
const BACKLOG: u32 = 128;

/// How long the lingering close reads what a client still sends (module docs).
const LINGER: Duration = Duration::from_secs(1);

/// How much the lingering close reads at most.
const LINGER_BYTES: usize = 256 * 1024;

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

/// [`spawn`] with chosen options: shorter timeouts for tests, or (with
/// `allow_remote`) an address that is not loopback.
pub fn spawn_with(
    addr: SocketAddr,
    registry: Arc<Published>,
    options: AdminOptions,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
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
    let listener = bind_std(addr, &listen)
        .map_err(|e| io::Error::new(e.kind(), format!("admin: cannot listen on {addr}: {e}")))?;
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
                    serve_forever(listener, registry, options).await;
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

/// 127.0.0.0/8, ::1, and ::ffff:127.0.0.0/104.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Accepts forever, one task per connection, at most `max_connections` at
/// once: at the ceiling it stops accepting until one ends (as the proxy's
/// maxconn does), so the rest wait in the kernel's queue.
async fn serve_forever(listener: TcpListener, registry: Arc<Published>, options: AdminOptions) {
    let open = Limit::new(Some(options.max_connections.max(1)));
    let mut errors = AcceptErrors::new();
    loop {
        open.room().await;
        match listener.accept().await {
            Ok((stream, peer)) => {
                // Only this loop takes places, and there was room.
                let Some(place) = open.try_acquire() else {
                    continue;
                };
                let registry = registry.clone();
                spawn_task(async move {
                    serve(stream, peer, &registry, &options).await;
                    drop(place);
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

/// One admin connection: read the head, answer, close.
async fn serve(stream: TcpStream, peer: SocketAddr, registry: &Published, options: &AdminOptions) {
    let mut buf = vec![0u8; options.max_head];
    let response = match time::timeout(options.read_timeout, read_head(&stream, &mut buf)).await {
        Ok(Ok(Some(len))) => match parse_request(&buf[..len]) {
            Ok(request) => respond(&request, registry),
            Err(why) => {
                crate::debug!("admin: {peer}: bad request: {why}");
                Response::text(400, format!("bad request: {why}\n"))
            }
        },
        Ok(Ok(None)) => {
            crate::debug!(
                "admin: {peer}: request head over {} bytes",
                options.max_head
            );
            Response::text(431, "request head too large\n")
        }
        // Closed or reset before a whole head: nobody to answer.
        Ok(Err(_)) => return,
        Err(time::Elapsed) => {
            crate::debug!(
                "admin: {peer}: no request within {:?}; closing",
                options.read_timeout
            );
            return;
        }
    };
    let answer = async {
        stream.write_all(&response.to_bytes()).await?;
        stream.shutdown(Shutdown::Write)
    };
    if let Ok(Ok(())) = time::timeout(options.write_timeout, answer).await {
        let _ = time::timeout(LINGER, drain(&stream)).await;
    }
}

/// Reads until the blank line that ends a request head. `Some(length of the
/// head)`, blank line included; `None` if `buf` filled up first; an error
/// if the peer closed (`UnexpectedEof`) or reset before that.
async fn read_head(stream: &TcpStream, buf: &mut [u8]) -> io::Result<Option<usize>> {
    let mut filled: usize = 0;
    loop {
        if filled == buf.len() {
            return Ok(None);
        }
        let n = match stream.read(&mut buf[filled..]).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => n,
        };
        // Only the new bytes, and the three before them, can complete an end.
        let from = filled.saturating_sub(3);
        filled += n;
        if let Some(end) = head_end(&buf[from..filled]) {
            return Ok(Some(from + end));
        }
    }
}

/// Where the head ends in `bytes` (just after its blank line): at the first
/// `\r\n\r\n`, or `\n\n`, so that a client using bare line feeds gets a
/// 400 at once rather than a wait for the timeout.
fn head_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| {
        let rest = &bytes[i..];
        if rest.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if rest.starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// Reads and discards until end of file (the lingering close), at most
/// [`LINGER_BYTES`]: a client still sending after that gets its reset.
async fn drain(stream: &TcpStream) {
    let mut sink = [0u8; 4096];
    let mut left = LINGER_BYTES;
    while let Ok(n @ 1..) = stream.read(&mut sink).await {
        left = left.saturating_sub(n);
        if left == 0 {
            return;
        }
    }
}

/// The parts of a request the admin listener looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Request<'a> {
    method: &'a str,
    /// The path, without its query string.
    path: &'a str,
}

/// Parses a request head, blank line included: a strict request line and
/// well-formed header lines. `Err` says why not, for the 400's body.
fn parse_request(head: &[u8]) -> Result<Request<'_>, &'static str> {
    // Every line ends with CRLF, the blank one too: less its last LF and
    // blank line, the head is split at LF, and each piece must end with its
    // CR and hold no other.
    let head = head
        .strip_suffix(b"\n\r\n")
        .ok_or("lines must end with CRLF")?;
    let mut lines = head.split(|&b| b == b'\n').map(|line| {
        let line = line.strip_suffix(b"\r").ok_or("lines must end with CRLF")?;
        if line.contains(&b'\r') {
            return Err("a CR inside a line");
        }
        Ok(line)
    });
    let request_line = lines.next().ok_or("no request line")??;
    let request_line =
        std::str::from_utf8(request_line).map_err(|_| "a request line not in ASCII")?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the request line is not: method, target, version, one space apart");
    };
    if !is_token(method) {
        return Err("a malformed method");
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err("only HTTP/1.0 and HTTP/1.1 are spoken here"),
    };
    let path = path_of(target)?;
    let mut hosts = 0;
    for line in lines {
        let line = line?;
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("a header line without a colon")?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        // No space before the colon (RFC 9112, 5.1) and no folded lines.
        if !std::str::from_utf8(name).is_ok_and(is_token) {
            return Err("a malformed header name");
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err("a control character in a header value");
        }
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        }
    }
    // RFC 9112, 3.2: a 1.1 request has exactly one Host; any request at most one.
    if hosts > 1 || (http11 && hosts == 0) {
        return Err("an HTTP/1.1 request needs exactly one Host header");
    }
    Ok(Request { method, path })
}

/// The path of a request target: origin form (`/metrics?x=1`), or absolute
/// form (`http://host/metrics`), which servers must accept too.
fn path_of(target: &str) -> Result<&str, &'static str> {
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a malformed request target");
    }
    let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
    let path = if target.starts_with('/') {
        target
    } else if let Some(scheme) = ["http://", "https://"]
        .iter()
        .find(|s| lower.starts_with(**s))
    {
        let rest = &target[scheme.len()..];
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            _ => "/",
        }
    } else {
        return Err("a request target that is neither a path nor an absolute URL");
    };
    Ok(path.split('?').next().unwrap_or(path))
}

/// RFC 9110's `token`: a method or a header name.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The answer to a well-formed request.
fn respond(request: &Request<'_>, registry: &Published) -> Response {
    let known = matches!(request.path, "/metrics" | "/health");
    if !known {
        return Response::text(404, "not found: try /metrics or /health\n");
    }
    let head_only = match request.method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let mut response = Response::text(405, "method not allowed: GET or HEAD\n");
            response.allow = true;
            return response;
        }
    };
    let mut response = match request.path {
        "/metrics" => Response {
            content_type: METRICS_TYPE,
            ..Response::text(200, registry.render())
        },
        // A draining proxy is alive but takes no new clients: a load
        // balancer in front of it must stop sending them.
        _ if registry.is_draining() => Response::text(503, "draining\n"),
        _ => Response::text(200, "ok\n"),
    };
    response.head_only = head_only;
    response
}

/// The content type of the Prometheus text format 0.0.4.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// An answer, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    /// Add `Allow: GET, HEAD` (a 405).
    allow: bool,
    /// A HEAD request: the head of the GET answer, without its body.
    head_only: bool,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            allow: false,
            head_only: false,
        }
    }

    /// Status line, headers, blank line, body: always a `Content-Length`
    /// and `Connection: close`.
    fn to_bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            431 => "Request Header Fields Too Large",
            503 => "Service Unavailable",
            _ => "Error",
        };
        let allow = if self.allow {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        };
        let mut bytes = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
             Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !self.head_only {
            bytes.extend_from_slice(self.body.as_bytes());
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::counters::add;
    use crate::ops::metrics::exposition::Registry;
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
        published.set_draining();
        let answer = exchange(addr, &get("/health"));
        assert_eq!((answer.status, answer.body.as_str()), (503, "draining\n"));
        assert_eq!(exchange(addr, &get("/metrics")).status, 200);
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
    fn the_request_line_and_headers_are_parsed_strictly() {
        /// (method, path) of `head` and the blank line that ends it.
        fn ok(head: &str) -> Result<(String, String), &'static str> {
            let head = format!("{head}\r\n");
            let request = parse_request(head.as_bytes())?;
            Ok((request.method.to_string(), request.path.to_string()))
        }
        let path = |head: &str| ok(head).map(|(_, path)| path);
        let request = ok("GET /metrics?a=b HTTP/1.1\r\nHost: x\r\n");
        assert_eq!(request, Ok(("GET".into(), "/metrics".into())));
        assert_eq!(path("GET /health HTTP/1.0\r\n"), Ok("/health".into()));
        assert_eq!(path("GET HTTP://h HTTP/1.0\r\n"), Ok("/".into()));
        assert_eq!(path("GET https://h:1/x?y HTTP/1.0\r\n"), Ok("/x".into()));
        assert_eq!(path("GET / HTTP/1.1\r\nhOsT: x\r\n"), Ok("/".into()));
        let request = ok("DELETE /metrics HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n");
        assert_eq!(request, Ok(("DELETE".into(), "/metrics".into())));
        let bad = [
            "",
            "\r\n",
            "GET /metrics HTTP/1.1",
            "GET  /metrics HTTP/1.1\r\nHost: x\r\n",
            "GET /metrics  HTTP/1.1\r\nHost: x\r\n",
            "GET /metrics HTTP/1.1 \r\nHost: x\r\n",
            "GET metrics HTTP/1.1\r\nHost: x\r\n",
            "GET /metrics HTTP/1.2\r\nHost: x\r\n",
            "GET /metrics http/1.1\r\nHost: x\r\n",
            "GET /metrics HTTP/0.9\r\n",
            "GET /métrics HTTP/1.1\r\nHost: x\r\n",
            "G(T /metrics HTTP/1.1\r\nHost: x\r\n",
            "GET /metrics HTTP/1.1\r\n",
            "GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n",
            "GET /metrics HTTP/1.1\r\nHost x\r\n",
            "GET /metrics HTTP/1.1\r\nHost : x\r\n",
            "GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n",
            "GET /metrics HTTP/1.1\r\nHost: x\ry\r\n",
            "GET /metrics HTTP/1.1\r\nHost: x\x01\r\n",
            "GET /metrics HTTP/1.1\nHost: x\r\n",
            "GET /metrics HTTP/1.0\r\n\n",
            "GET ftp://h/metrics HTTP/1.1\r\nHost: x\r\n",
        ];
        for head in bad {
            assert!(ok(head).is_err(), "accepted {head:?}");
        }
    }

    #[test]
    fn head_ends_are_found_across_reads() {
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n"), None);
        let addr = start(AdminOptions::default());
        let mut stream = connect(addr);
        // One byte at a time, the end split between writes.
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
    fn a_silent_client_is_closed_after_the_read_timeout() {
        let read_timeout = Duration::from_millis(200);
        let addr = start(AdminOptions {
            read_timeout,
            ..AdminOptions::default()
        });
        for request in [&b""[..], b"GET /metrics HTTP/1.1\r\n"] {
            let mut stream = connect(addr);
            stream.write_all(request).expect("send");
            let started = Instant::now();
            let mut buf = [0u8; 64];
            let read = stream.read(&mut buf);
            let took = started.elapsed();
            assert!(matches!(read, Ok(0)), "closed without an answer: {read:?}");
            assert!(took >= read_timeout - Duration::from_millis(50), "{took:?}");
            assert!(took < Duration::from_secs(5), "{took:?}");
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

    #[test]
    fn at_most_max_connections_are_served_at_once() {
        let addr = start(AdminOptions {
            max_connections: 2,
            ..AdminOptions::default()
        });
        let silent: Vec<StdStream> = (0..2).map(|_| connect(addr)).collect();
        let mut third = connect(addr);
        third.write_all(&get("/health")).expect("send");
        third
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("read timeout");
        let mut buf = [0u8; 64];
        let early = third.read(&mut buf);
        assert!(
            early.is_err(),
            "answered while 2 others held the places: {early:?}"
        );
        // One place given back: the third is accepted and answered.
        drop(silent);
        third
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        assert_eq!(read_answer(&mut third).status, 200);
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
