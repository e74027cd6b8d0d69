//! End to end: TLS routed by the server name of its ClientHello,
//! without terminating it, with real TLS on both sides.
//!
//! The backends are `openssl s_server -www` processes, each with its own
//! self-signed certificate made here (`CN=api-backend`, `CN=web-backend`,
//! `CN=default-backend`), which answer `GET /` with a status page and
//! close. The clients are `openssl s_client -servername NAME` processes
//! that send `GET /`: the certificate a client saw says which backend its
//! name reached, and the page (`HTTP/1.0 200 ok`) that bytes went both ways
//! through the proxy, end to end. Every process is started with the repo's
//! child wrapper (`tools::process::child`), bounded in time, and killed at the end.
//!
//! Without `openssl` the tests fail and say how to install it (`.ci/run`
//! installs it where it is missing).
//!
//! A small relay in the test stands between a client and the proxy where
//! the ClientHello must arrive in a shape `s_client` does not produce: its
//! first record re-framed as two records (legal TLS: a handshake message
//! may span records), or its bytes written one at a time with
//! TCP_NODELAY.

mod common;

use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit::prometheus;
use testkit::tcplog::{ParsedLine, parse_tcplog};
use tools::process::child::{self, Capture, ChildProcess, Ready, Spawn, free_port};

use common::*;

/// A bound on one `openssl` run, or on "soon" (a log line, a refusal).
const SOON: Duration = Duration::from_secs(10);

/// The `openssl` program, or a failure that says how to install it.
fn openssl() -> &'static str {
    static FOUND: OnceLock<bool> = OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        Spawn::new("openssl", "openssl")
            .args(["version"])
            .run(SOON)
            .is_ok_and(|f| f.status.success())
    });
    assert!(
        found,
        "these tests need the openssl command-line tool (s_server, s_client); install it with \
         'apt-get install -y openssl' (Debian, Ubuntu) or 'dnf install openssl', then run again"
    );
    "openssl"
}

/// A self-signed certificate and its key for `CN=cn`, in `dir`.
fn certificate(dir: &TestDir, cn: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.file(&format!("{cn}.crt")),
        dir.file(&format!("{cn}.key")),
    );
    let args = [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
    ];
    let finished = Spawn::new("openssl req", openssl())
        .args(args)
        .args([format!("/CN={cn}")])
        .args([
            "-keyout".as_ref(),
            key.as_os_str(),
            "-out".as_ref(),
            cert.as_os_str(),
        ])
        .run(SOON)
        .expect("openssl req");
    assert!(
        finished.status.success(),
        "openssl req: {:?}",
        finished.stderr
    );
    (cert, key)
}

/// `openssl s_server -www` on a port of its own, with a certificate for
/// `CN=cn`; ready once it accepts.
fn tls_backend(dir: &TestDir, cn: &str) -> ChildProcess {
    let (cert, key) = certificate(dir, cn);
    let port = free_port().expect("a free port");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    Spawn::new(cn, openssl())
        .args(["s_server", "-www", "-quiet", "-accept", &addr.to_string()])
        .args([
            "-cert".as_ref(),
            cert.as_os_str(),
            "-key".as_ref(),
            key.as_os_str(),
        ])
        .ready(Ready::Accepting(addr), SOON)
        .start()
        .expect("start openssl s_server")
}

/// What one `openssl s_client` saw: the peer certificate's subject, and
/// whether the backend's page came back.
#[derive(Debug)]
struct Session {
    subject: Option<String>,
    page: bool,
    output: Vec<String>,
}

/// `openssl s_client` to `addr` with `args` (`-servername NAME`,
/// `-tls1_3`...), sending `GET /` and reading to the end.
fn tls_client(dir: &TestDir, addr: SocketAddr, args: &[&str]) -> Session {
    let request = dir.file("request");
    fs::write(&request, "GET / HTTP/1.0\r\n\r\n").expect("write the request");
    let finished = Spawn::new("openssl s_client", openssl())
        .args(["s_client", "-connect", &addr.to_string(), "-ign_eof"])
        .args(args)
        .stdin_file(&request)
        .stdout(Capture::All)
        .run(SOON)
        .expect("openssl s_client");
    let output = finished.stdout;
    let subject = output
        .iter()
        .find_map(|l| {
            l.strip_prefix("subject=CN = ")
                .or_else(|| l.strip_prefix("subject=CN="))
        })
        .map(str::to_string);
    let page = output.iter().any(|l| l.starts_with("HTTP/1.0 200 ok"));
    Session {
        subject,
        page,
        output,
    }
}

/// Asserts that a client with `args` reached the backend `cn`, end to end.
fn reaches(dir: &TestDir, addr: SocketAddr, args: &[&str], cn: &str) {
    let session = tls_client(dir, addr, args);
    assert_eq!(
        session.subject.as_deref(),
        Some(cn),
        "s_client {args:?}: {:#?}",
        session.output
    );
    assert!(
        session.page,
        "s_client {args:?}: no page: {:#?}",
        session.output
    );
}

/// The backends and the proxy of a test: three TLS backends, a plain echo
/// backend, and three frontends (module docs of each test).
struct World {
    dir: TestDir,
    /// The TLS backends: api, web, default.
    addrs: [SocketAddr; 3],
    _backends: Vec<ChildProcess>,
    echo: StdBackend,
    proxy: ChildProcess,
}

/// The `tls` frontend's rules at the start.
const TLS_RULES: &str = "use-group web alpn acme-tls/1\n    \
                         use-group api sni api.example *.api.example\n    \
                         use-group web sni www.example\n";

/// The configuration of a [`World`]: two groups, and four frontends, the
/// first (`tls`) with `tls_rules`.
fn config([api, web, default]: [SocketAddr; 3], echo: SocketAddr, tls_rules: &str) -> String {
    format!(
        "global\n    admin 127.0.0.1:0\n\
         group api\n    backend {api}\n\
         group web\n    balance leastconn\n    backend {web}\n\
         frontend tls\n    listen 127.0.0.1:0\n    timeout client-hs 5s\n    backend {default}\n    \
         {tls_rules}\
         frontend mixed\n    listen 127.0.0.1:0\n    backend {echo}\n    use-group api sni api.example\n\
         frontend strict\n    listen 127.0.0.1:0\n    backend {default}\n    \
         use-group api sni api.example\n    not-tls refuse\n    timeout client-hs 300ms\n\
         frontend behind\n    listen 127.0.0.1:0\n    accept-proxy 127.0.0.1\n    backend {default}\n    \
         use-group api sni api.example\n"
    )
}

impl World {
    fn start(test: &str) -> World {
        let dir = TestDir::new(test);
        let backends: Vec<ChildProcess> = ["api-backend", "web-backend", "default-backend"]
            .iter()
            .map(|cn| tls_backend(&dir, cn))
            .collect();
        let echo = StdBackend::start(echo);
        let addrs = [0, 1, 2].map(|i| backends[i].addr());
        let config = config(addrs, echo.addr(), TLS_RULES);
        let path = dir.file("lb.conf");
        fs::write(&path, config).expect("write the configuration");
        let proxy = Spawn::new("proxy", proxy_exe())
            .args([
                "--config".as_ref(),
                path.as_os_str(),
                "--grace".as_ref(),
                "1s".as_ref(),
            ])
            .stderr(Capture::File(dir.file("stderr.log")))
            .start()
            .expect("start the proxy");
        World {
            dir,
            addrs,
            _backends: backends,
            echo,
            proxy,
        }
    }

    /// Rewrites the configuration with `tls_rules` as the `tls` frontend's
    /// rules, and reloads it (SIGHUP), waiting until the proxy says so.
    fn reload(&self, tls_rules: &str) {
        let text = config(self.addrs, self.echo.addr(), tls_rules);
        fs::write(self.dir.file("lb.conf"), text).expect("rewrite the configuration");
        self.proxy.signal(Signal::SIGHUP).expect("SIGHUP");
        let said = self.proxy.wait_for_log("reloaded", SOON);
        said.unwrap_or_else(|e| panic!("{e}; stderr:\n{}", self.proxy.said()));
    }

    /// Where frontend `name` listens.
    fn frontend(&self, name: &str) -> SocketAddr {
        let needle = format!("frontend {name} listening on ");
        let line = self
            .proxy
            .wait_for_log(&needle, SOON)
            .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", self.proxy.said()));
        child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
    }

    /// Stops the proxy (it must exit 0) and returns its access-log lines.
    fn stop(self) -> Vec<ParsedLine> {
        let status = self
            .proxy
            .stop_with(Signal::SIGTERM, SOON)
            .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", self.proxy.said()));
        assert_eq!(status.code(), Some(0), "stderr:\n{}", self.proxy.said());
        self.proxy
            .log()
            .iter()
            .filter_map(|l| parse_tcplog(l))
            .collect()
    }
}

// Two names on one port reach two groups with real
// TLS clients, TLS 1.2 and 1.3; no SNI and unknown names reach the
// default; the log and the metrics say which rule routed each.
#[test]
fn two_names_on_one_port_reach_two_groups_and_the_rest_the_default() {
    let world = World::start("names");
    let tls = world.frontend("tls");
    let dir = &world.dir;
    for version in ["-tls1_2", "-tls1_3"] {
        reaches(
            dir,
            tls,
            &["-servername", "api.example", version],
            "api-backend",
        );
        reaches(
            dir,
            tls,
            &["-servername", "www.example", version],
            "web-backend",
        );
    }
    // An ALPN rule before the names: certificate challenges (TLS-ALPN-01)
    // go to their group, whatever name they are for.
    let challenge = ["-servername", "api.example", "-alpn", "acme-tls/1"];
    reaches(dir, tls, &challenge, "web-backend");
    // Case-insensitive, and wildcards at any depth.
    reaches(dir, tls, &["-servername", "WWW.Example"], "web-backend");
    reaches(dir, tls, &["-servername", "a.b.api.example"], "api-backend");
    // No name, an unknown name, and the wildcard's bare suffix's neighbour.
    reaches(dir, tls, &["-noservername"], "default-backend");
    reaches(
        dir,
        tls,
        &["-servername", "unknown.example"],
        "default-backend",
    );
    reaches(
        dir,
        tls,
        &["-servername", "api.example.org"],
        "default-backend",
    );

    let admin = world
        .proxy
        .wait_for_log("admin listening on ", SOON)
        .expect("admin");
    let admin = child::listening_addr(&admin).expect("the admin address");
    let routed = |rule: &str, group: &str| {
        let (status, head, body) = http_get(admin, "/metrics");
        assert_eq!(status, 200, "GET /metrics: {head}\n{body}");
        let exposition = prometheus::parse(&body)
            .unwrap_or_else(|e| panic!("/metrics is not valid Prometheus text: {e}\n{body}"));
        let labels = [("frontend", "tls"), ("rule", rule), ("group", group)];
        exposition.value("proxy_frontend_routed_total", &labels)
    };
    assert_eq!(routed("api.example", "api"), Some(2.0));
    assert_eq!(routed("*.api.example", "api"), Some(1.0));
    assert_eq!(routed("www.example", "web"), Some(3.0));
    assert_eq!(routed("alpn acme-tls/1", "web"), Some(1.0));
    assert_eq!(routed("(no sni)", "tls"), Some(1.0));
    assert_eq!(routed("(no match)", "tls"), Some(2.0));
    assert_eq!(routed("(not tls)", "tls"), Some(0.0));

    let lines = world.stop();
    let on_tls: Vec<&ParsedLine> = lines.iter().filter(|l| l.frontend == "tls").collect();
    assert_eq!(on_tls.len(), 10, "{lines:#?}");
    let seen = |group: &str, capture: &str| {
        on_tls
            .iter()
            .filter(|l| l.backend == group && l.capture.as_deref() == Some(capture))
            .count()
    };
    assert_eq!(seen("api", "api.example"), 2, "{on_tls:#?}");
    assert_eq!(seen("api", "a.b.api.example"), 1, "{on_tls:#?}");
    assert_eq!(seen("web", "www.example"), 3, "{on_tls:#?}");
    assert_eq!(seen("web", "api.example"), 1, "{on_tls:#?}");
    assert_eq!(seen("tls", ""), 1, "{on_tls:#?}");
    assert_eq!(seen("tls", "unknown.example"), 1, "{on_tls:#?}");
    for line in &on_tls {
        assert_eq!(line.termination.to_string(), "--", "{line:#?}");
    }
}

// A ClientHello in two records, and in one-byte TCP segments: the same
// routing, and the same bytes reach the backend (the session works).
#[test]
fn a_hello_split_across_records_or_segments_routes_the_same() {
    let world = World::start("split");
    let tls = world.frontend("tls");
    for reshape in [Reshape::TwoRecords, Reshape::ByteByByte] {
        let relay = Relay::start(tls, reshape);
        for (name, cn) in [
            ("api.example", "api-backend"),
            ("www.example", "web-backend"),
        ] {
            for version in ["-tls1_2", "-tls1_3"] {
                let args = ["-servername", name, version];
                reaches(&world.dir, relay.addr, &args, cn);
            }
        }
        assert_eq!(relay.finish(), 4, "{reshape:?}: connections relayed");
    }
    // Behind another balancer: the hello's first bytes come with the
    // PROXY header, and reach the backend after it, unchanged.
    let relay = Relay::start(world.frontend("behind"), Reshape::ProxyHeader);
    for version in ["-tls1_2", "-tls1_3"] {
        let args = ["-servername", "api.example", version];
        reaches(&world.dir, relay.addr, &args, "api-backend");
    }
    reaches(
        &world.dir,
        relay.addr,
        &["-noservername"],
        "default-backend",
    );
    assert_eq!(relay.finish(), 3, "behind: connections relayed");
    let lines = world.stop();
    let captured = lines
        .iter()
        .filter(|l| l.frontend == "tls" && l.capture.is_some());
    assert_eq!(captured.count(), 8, "{lines:#?}");
    let behind: Vec<&ParsedLine> = lines.iter().filter(|l| l.frontend == "behind").collect();
    assert_eq!(behind.len(), 3, "{lines:#?}");
    for line in &behind {
        assert_eq!(
            line.client,
            SocketAddr::from(([192, 0, 2, 7], 51234)),
            "{line:#?}"
        );
        assert_eq!(line.termination.to_string(), "--", "{line:#?}");
    }
    assert_eq!(
        behind.iter().filter(|l| l.backend == "api").count(),
        2,
        "{behind:#?}"
    );
}

// Not TLS at all: the default group (a plain echo backend here), or, with
// 'not-tls refuse', a reset logged PR; a client that says nothing is
// judged when 'timeout client-hs' ends, as HAProxy's inspect-delay.
#[test]
fn not_tls_goes_to_the_default_group_or_is_refused() {
    let world = World::start("plain");
    let mixed = world.frontend("mixed");
    let strict = world.frontend("strict");
    let mut client = connect(mixed);
    set_timeouts(&client, SOON);
    client.write_all(b"plain text\n").expect("send");
    assert_eq!(read_line(&mut client).expect("the echo"), b"plain text\n");
    drop(client);

    let mut refused = connect(strict);
    set_timeouts(&refused, SOON);
    let _ = refused.write_all(b"GET / HTTP/1.0\r\n\r\n");
    let mut rest = Vec::new();
    let read = refused.read_to_end(&mut rest);
    assert!(
        matches!(&read, Err(e) if e.kind() == io::ErrorKind::ConnectionReset) || rest.is_empty(),
        "{read:?} {rest:?}"
    );
    // Silent for timeout client-hs (300ms): not TLS, so refused too.
    let mut silent = connect(strict);
    set_timeouts(&silent, SOON);
    let started = Instant::now();
    let read = silent.read(&mut [0; 16]);
    assert!(started.elapsed() < SOON, "{read:?}");
    // A TLS client with a routed name still gets through the strict one.
    reaches(
        &world.dir,
        strict,
        &["-servername", "api.example"],
        "api-backend",
    );

    let lines = world.stop();
    let strict_lines: Vec<String> = lines
        .iter()
        .filter(|l| l.frontend == "strict")
        .map(|l| format!("{} {}", l.termination, l.capture.as_deref().unwrap_or("-")))
        .collect();
    assert_eq!(strict_lines.len(), 3, "{lines:#?}");
    assert_eq!(
        strict_lines.iter().filter(|l| *l == "PR ").count(),
        2,
        "{strict_lines:?}"
    );
    assert!(
        strict_lines.contains(&"-- api.example".to_string()),
        "{strict_lines:?}"
    );
    let mixed_line = lines
        .iter()
        .find(|l| l.frontend == "mixed")
        .expect("a mixed line");
    assert_eq!(
        (mixed_line.backend.as_str(), mixed_line.capture.as_deref()),
        ("mixed", Some(""))
    );
}

// A reload (SIGHUP) that changes the rules routes new connections the new
// way, on the same port, and the metrics name the new rules.
#[test]
fn a_reload_changes_the_routes() {
    let world = World::start("reload");
    let tls = world.frontend("tls");
    reaches(
        &world.dir,
        tls,
        &["-servername", "api.example"],
        "api-backend",
    );
    world.reload("use-group web sni api.example\n    use-group api sni *.example\n");
    // Each worker takes the new configuration on its next turn: wait
    // (bounded) for the new route, then it must hold.
    let subject = || tls_client(&world.dir, tls, &["-servername", "api.example"]).subject;
    let deadline = Instant::now() + SOON;
    while subject().as_deref() != Some("web-backend") {
        assert!(
            Instant::now() < deadline,
            "api.example never reached the web group"
        );
    }
    for _ in 0..4 {
        reaches(
            &world.dir,
            tls,
            &["-servername", "api.example"],
            "web-backend",
        );
    }
    reaches(
        &world.dir,
        tls,
        &["-servername", "www.example"],
        "api-backend",
    );
    let admin = world.proxy.wait_for_log("admin listening on ", SOON);
    let admin = child::listening_addr(&admin.expect("admin")).expect("the admin address");
    let (_, _, body) = http_get(admin, "/metrics");
    let exposition = prometheus::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let labels = [("frontend", "tls"), ("rule", "*.example"), ("group", "api")];
    assert_eq!(
        exposition.value("proxy_frontend_routed_total", &labels),
        Some(1.0)
    );
    let old = [
        ("frontend", "tls"),
        ("rule", "www.example"),
        ("group", "web"),
    ];
    assert_eq!(exposition.value("proxy_frontend_routed_total", &old), None);
    world.stop();
}

// ---------------------------------------------------------------------------
// The relay that reshapes a ClientHello
// ---------------------------------------------------------------------------

/// How the relay passes on the client's first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reshape {
    /// Its fragment cut in two, each half in a record of its own.
    TwoRecords,
    /// Unchanged, one byte per write, with TCP_NODELAY.
    ByteByByte,
    /// After a PROXY v1 header, in the same write: the proxy reads the
    /// start of the hello with the header.
    ProxyHeader,
}

/// The PROXY header [`Reshape::ProxyHeader`] sends, for a client at
/// 192.0.2.7:51234.
const PROXIED_HEADER: &[u8] = b"PROXY TCP4 192.0.2.7 127.0.0.1 51234 443\r\n";

/// A listener that relays each connection to `to`, reshaping the first
/// TLS record (bounded: each connection's reads time out).
struct Relay {
    addr: SocketAddr,
    thread: thread::JoinHandle<usize>,
}

impl Relay {
    fn start(to: SocketAddr, reshape: Reshape) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("the relay's address");
        let thread = thread::spawn(move || relay_connections(&listener, to, reshape));
        Relay { addr, thread }
    }

    /// Stops accepting; the number of connections relayed.
    fn finish(self) -> usize {
        // One more connect, closed at once, tells the loop to end.
        drop(TcpStream::connect(self.addr));
        self.thread.join().expect("the relay thread")
    }
}

/// Relays connections until one closes without a byte (the `finish`
/// signal) or 60 s pass.
fn relay_connections(listener: &TcpListener, to: SocketAddr, reshape: Reshape) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut relayed = 0;
    while Instant::now() < deadline {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Nothing to accept yet: wait on the listener, bounded.
                let _ = nix::poll::poll(
                    &mut [nix::poll::PollFd::new(
                        std::os::fd::AsFd::as_fd(listener),
                        nix::poll::PollFlags::POLLIN,
                    )],
                    100u16,
                );
                continue;
            }
            Err(e) => panic!("relay accept: {e}"),
        };
        client.set_nonblocking(false).expect("blocking");
        set_timeouts(&client, SOON);
        match first_record(&client) {
            Ok(Some(record)) => {
                relay_one(client, record, to, reshape);
                relayed += 1;
            }
            Ok(None) => return relayed,
            Err(e) => panic!("relay: reading the first record: {e}"),
        }
    }
    relayed
}

/// The client's first TLS record, whole; `None` if it closed first.
fn first_record(mut client: &TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; 5];
    match client.read_exact(&mut header) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        other => other?,
    }
    let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
    let mut record = header.to_vec();
    record.resize(5 + length, 0);
    client.read_exact(&mut record[5..])?;
    Ok(Some(record))
}

/// Sends `record` reshaped to `to`, then copies both ways until both ends
/// are done.
fn relay_one(client: TcpStream, record: Vec<u8>, to: SocketAddr, reshape: Reshape) {
    let upstream = TcpStream::connect(to).expect("connect to the proxy");
    set_timeouts(&upstream, SOON);
    upstream.set_nodelay(true).expect("TCP_NODELAY");
    let mut writer = &upstream;
    match reshape {
        Reshape::TwoRecords => {
            let fragment = &record[5..];
            let (a, b) = fragment.split_at(fragment.len() / 2);
            for half in [a, b] {
                let mut out = record[..3].to_vec();
                out.extend_from_slice(&(half.len() as u16).to_be_bytes());
                out.extend_from_slice(half);
                writer.write_all(&out).expect("send a record");
            }
        }
        Reshape::ByteByByte => {
            for byte in &record {
                writer.write_all(&[*byte]).expect("send a byte");
            }
        }
        Reshape::ProxyHeader => {
            let mut out = PROXIED_HEADER.to_vec();
            out.extend_from_slice(&record);
            writer
                .write_all(&out)
                .expect("send the header and the record");
        }
    }
    let (c2, u2) = (
        client.try_clone().expect("clone"),
        upstream.try_clone().expect("clone"),
    );
    let up = thread::spawn(move || pump(&c2, &u2));
    pump(&upstream, &client);
    let _ = up.join();
}

/// Copies `from` to `to` until `from` ends, then passes the FIN on.
fn pump(mut from: &TcpStream, mut to: &TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

/// A bare `GET` to the admin endpoint: status, head, body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = connect(addr);
    set_timeouts(&stream, SOON);
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send the request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    let text = String::from_utf8(raw).expect("a UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}
