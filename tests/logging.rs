//! End to end, the logging: syslog lines received by a real rsyslog, over
//! UDP, TCP and a Unix socket, in RFC 3164 and RFC 5424; a syslog server
//! that is down, then back; `dontlognull` with silent clients and PROXY v2
//! `LOCAL` probes; a `log-format` of HAProxy's variables rendered for a
//! real proxied connection; and the PID on every daemon line.
//!
//! Each test that needs rsyslog starts its own `rsyslogd -n` with a
//! configuration of its own ([`Rsyslog`]): a UDP and a TCP input on free
//! loopback ports, a Unix socket in the test's directory, and one output
//! file where each message is written with the fields rsyslog parsed out of
//! it (facility, severity, host, tag, PROCID, version, message) and the raw
//! message. rsyslog is the oracle: a header it cannot parse shows up with
//! the wrong fields. Where `rsyslogd` is not installed those tests print
//! that they are skipped and pass (`apt-get install rsyslog`; `.ci/run`
//! installs it).
//!
//! Real processes and sockets on loopback only; every wait is bounded, and
//! every child (the proxy, rsyslogd) is killed by its guard's `Drop` even
//! when an assertion fails half-way.

mod common;

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit::tcplog::{ParsedLine, parse_tcplog};
use tools::process::child::{Capture, ChildProcess, Ready, Spawn, free_port};

use common::*;

/// A bound on "soon": a line reaching rsyslog, the proxy starting.
const SOON: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// rsyslogd, one per test
// ---------------------------------------------------------------------------

/// One message as rsyslog parsed it (the template in [`Rsyslog::start`]).
#[derive(Debug, Clone)]
struct Message {
    /// `imudp`, `imtcp` or `imuxsock`: how it arrived.
    input: String,
    facility: String,
    severity: String,
    hostname: String,
    /// The tag (RFC 3164) or APP-NAME (RFC 5424).
    app: String,
    /// The PID, from `tag[PID]:` or RFC 5424's PROCID.
    procid: String,
    /// 1 for RFC 5424, 0 for RFC 3164.
    version: String,
    /// The message after the header (RFC 3164's leading space taken off).
    msg: String,
    /// The message as it arrived, header and all.
    raw: String,
}

impl Message {
    fn parse(line: &str) -> Option<Message> {
        let f: Vec<&str> = line.splitn(9, '\t').collect();
        let [
            input,
            facility,
            severity,
            hostname,
            app,
            procid,
            version,
            msg,
            raw,
        ] = f[..]
        else {
            return None;
        };
        Some(Message {
            input: input.into(),
            facility: facility.into(),
            severity: severity.into(),
            hostname: hostname.into(),
            app: app.into(),
            procid: procid.into(),
            version: version.into(),
            msg: msg.strip_prefix(' ').unwrap_or(msg).into(),
            raw: raw.into(),
        })
    }

    /// The tcplog line it carries, if it is one.
    fn tcplog(&self) -> Option<ParsedLine> {
        parse_tcplog(&self.msg)
    }
}

/// An rsyslogd of the test's own, killed on drop.
struct Rsyslog {
    // Declared first, dropped first: the process goes before its files.
    _process: ChildProcess,
    dir: TestDir,
    udp: SocketAddr,
    tcp: SocketAddr,
    socket: PathBuf,
}

/// Where `rsyslogd` is, if installed (it lives in sbin, which a user's
/// PATH may lack).
fn rsyslogd() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin".into(), "/sbin".into()]);
    dirs.map(|d: PathBuf| d.join("rsyslogd"))
        .find(|p| p.is_file())
}

/// rsyslogd, or `None` with a printed note that `test` is skipped.
fn rsyslog_or_skip(test: &str) -> Option<PathBuf> {
    let found = rsyslogd();
    if found.is_none() {
        eprintln!("skipped {test}: rsyslogd is not installed (apt-get install rsyslog)");
    }
    found
}

/// A UDP port free on 127.0.0.1 now.
fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    socket.local_addr().expect("its address").port()
}

impl Rsyslog {
    /// Starts `program` with its inputs (TCP on `tcp_port`, or a free port)
    /// and output in a directory of its own, and waits until a datagram
    /// sent to its UDP input has come out in its file.
    fn start(program: &Path, test: &str, tcp_port: Option<u16>) -> Rsyslog {
        let dir = TestDir::new(&format!("rsyslog-{test}"));
        let udp = SocketAddr::from(([127, 0, 0, 1], free_udp_port()));
        let tcp_port = tcp_port.unwrap_or_else(|| free_port().expect("a free TCP port"));
        let tcp = SocketAddr::from(([127, 0, 0, 1], tcp_port));
        let socket = dir.file("log.sock");
        let config = format!(
            "global(workDirectory=\"{dir}\")\n\
             module(load=\"imudp\")\n\
             module(load=\"imtcp\")\n\
             module(load=\"imuxsock\" SysSock.Use=\"off\")\n\
             input(type=\"imudp\" address=\"127.0.0.1\" port=\"{udp_port}\")\n\
             input(type=\"imtcp\" address=\"127.0.0.1\" port=\"{tcp_port}\")\n\
             input(type=\"imuxsock\" Socket=\"{socket}\" CreatePath=\"on\" RateLimit.Interval=\"0\" \
             UseSpecialParser=\"off\" ParseHostname=\"on\")\n\
             template(name=\"fields\" type=\"string\" string=\"%inputname%\\t%syslogfacility-text%\\t\
             %syslogseverity-text%\\t%hostname%\\t%app-name%\\t%procid%\\t%protocol-version%\\t%msg%\\t\
             %rawmsg%\\n\")\n\
             *.* action(type=\"omfile\" file=\"{out}\" template=\"fields\")\n",
            dir = dir.path().display(),
            udp_port = udp.port(),
            socket = socket.display(),
            out = dir.file("out.log").display(),
        );
        let conf = dir.file("rsyslog.conf");
        fs::write(&conf, config).expect("write rsyslog.conf");
        let args = [
            "-n".to_string(),
            "-f".to_string(),
            conf.display().to_string(),
            "-i".to_string(),
            dir.file("rsyslogd.pid").display().to_string(),
        ];
        let process = Spawn::new("rsyslogd", program)
            .args(args)
            .stderr(Capture::File(dir.file("rsyslogd.stderr")))
            .ready(Ready::Accepting(tcp), SOON)
            .start()
            .unwrap_or_else(|e| panic!("start rsyslogd: {e}"));
        let rsyslog = Rsyslog {
            _process: process,
            dir,
            udp,
            tcp,
            socket,
        };
        assert!(
            wait_until(SOON, || rsyslog.socket.exists()),
            "rsyslogd made no socket at {}",
            rsyslog.socket.display()
        );
        rsyslog.sync();
        rsyslog
    }

    /// Every message received so far.
    fn messages(&self) -> Vec<Message> {
        let text = fs::read_to_string(self.dir.file("out.log")).unwrap_or_default();
        text.lines().filter_map(Message::parse).collect()
    }

    /// The messages tagged `tag`.
    fn tagged(&self, tag: &str) -> Vec<Message> {
        self.messages()
            .into_iter()
            .filter(|m| m.app == tag)
            .collect()
    }

    /// Waits until the messages tagged `tag` satisfy `done`, and returns
    /// them; fails the test, showing what came, if they do not within
    /// [`SOON`].
    fn wait_for(&self, tag: &str, what: &str, done: impl Fn(&[Message]) -> bool) -> Vec<Message> {
        let mut last = Vec::new();
        let held = wait_until(SOON, || {
            last = self.tagged(tag);
            done(&last)
        });
        assert!(
            held,
            "rsyslog never got {what} from {tag}; it has: {last:#?}"
        );
        last
    }

    /// Sends a marker of its own to the UDP input and waits until it is in
    /// the file: every datagram sent to that input before it has been
    /// written by then (one input, one queue, in order).
    fn sync(&self) {
        let marker = format!("marker-{:x}", rand_u64());
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let deadline = Instant::now() + SOON;
        loop {
            let datagram = format!("<14>Nov 30 12:00:00 sync[1]: {marker}");
            sender
                .send_to(datagram.as_bytes(), self.udp)
                .expect("send the marker");
            if wait_until(Duration::from_millis(200), || {
                self.tagged("sync").iter().any(|m| m.msg == marker)
            }) {
                return;
            }
            assert!(Instant::now() < deadline, "rsyslogd never wrote {marker}");
        }
    }
}

/// A number that differs between calls (a marker's name).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

// ---------------------------------------------------------------------------
// The proxy
// ---------------------------------------------------------------------------

/// Writes `config` into `dir` and starts the proxy on it (stderr into a
/// file, `--grace 1s`), ready once its first frontend listens.
fn start_proxy_with(dir: &TestDir, config: &str) -> ChildProcess {
    let path = dir.file("lb.conf");
    fs::write(&path, config).expect("write lb.conf");
    let args = vec![
        "--config".to_string(),
        path.display().to_string(),
        "--grace".to_string(),
        "1s".to_string(),
    ];
    Spawn::new("proxy", proxy_exe())
        .args(args)
        .stderr(Capture::File(dir.file("stderr.log")))
        .ready(Ready::Announced(1), SOON)
        .start()
        .expect("start the proxy")
}

/// Where frontend `name` listens.
fn frontend_addr(proxy: &ChildProcess, name: &str) -> SocketAddr {
    proxy
        .frontend_addr(name)
        .unwrap_or_else(|e| panic!("{e}; stderr:\n{}", said(proxy)))
}

/// SIGTERM; the proxy must exit 0. Its buffered lines are sent by then.
fn stop_proxy(proxy: ChildProcess) -> Vec<String> {
    match proxy.stop_with(Signal::SIGTERM, SOON) {
        Ok(status) => assert_eq!(status.code(), Some(0), "stderr:\n{}", said(&proxy)),
        Err(e) => panic!("{e}; stderr:\n{}", said(&proxy)),
    }
    proxy.log()
}

/// An echo backend.
fn echo_backend() -> StdBackend {
    StdBackend::start(echo)
}

/// One client through `addr`: sends `payload`, its FIN, and reads the echo
/// to the end. Returns its own address (what the access log calls `%ci:%cp`).
fn echo_through(addr: SocketAddr, payload: &[u8]) -> SocketAddr {
    let mut stream = connect(addr);
    let me = stream.local_addr().expect("local address");
    stream.write_all(payload).expect("send");
    stream.shutdown(Shutdown::Write).expect("FIN");
    let mut back = Vec::new();
    stream.read_to_end(&mut back).expect("the echo");
    assert_eq!(back, payload, "the echo through {addr}");
    me
}

// ---------------------------------------------------------------------------
// Syslog: formats and transports
// ---------------------------------------------------------------------------

/// One proxy per way of sending: where, in which layout, with which
/// facility and tag.
struct Way {
    target: String,
    layout: &'static str,
    facility: &'static str,
    tag: String,
    input: &'static str,
}

fn ways(rsyslog: &Rsyslog) -> Vec<Way> {
    let targets = [
        (rsyslog.udp.to_string(), "udp", "imudp"),
        (format!("tcp@{}", rsyslog.tcp), "tcp", "imtcp"),
        (rsyslog.socket.display().to_string(), "unix", "imuxsock"),
    ];
    let mut ways = Vec::new();
    let facilities = [
        "local0", "local1", "local2", "local3", "local4", "local5", "daemon",
    ];
    for (target, transport, input) in targets {
        for layout in ["rfc3164", "rfc5424"] {
            ways.push(Way {
                target: target.clone(),
                layout,
                facility: facilities[ways.len()],
                tag: format!("t-{transport}-{layout}"),
                input,
            });
        }
    }
    // HAProxy's default layout, for the local daemon's socket.
    ways.push(Way {
        target: rsyslog.socket.display().to_string(),
        layout: "local",
        facility: facilities[ways.len()],
        tag: "t-unix-local".into(),
        input: "imuxsock",
    });
    ways
}

// Seven proxies, one per transport and layout (and HAProxy's `local` to the
// Unix socket), each with a facility and a tag of its own: rsyslog must
// parse out of each header the facility, the severity (info for a
// connection, notice for the daemon's info lines), the tag, the host and
// the proxy's PID, and the message must be the tcplog line of the
// connection the test made, bytes and all.
#[test]
fn syslog_lines_arrive_in_rfc3164_and_rfc5424_over_udp_tcp_and_a_unix_socket() {
    let Some(program) = rsyslog_or_skip("the syslog transport test") else {
        return;
    };
    let rsyslog = Rsyslog::start(&program, "ways", None);
    let backend = echo_backend();
    let ways = ways(&rsyslog);
    let dirs: Vec<TestDir> = (0..ways.len())
        .map(|i| TestDir::new(&format!("ways-{i}")))
        .collect();
    let proxies: Vec<ChildProcess> = ways
        .iter()
        .zip(&dirs)
        .map(|(way, dir)| {
            let config = format!(
                "global\n    workers 1\n    log {} format {} {}\n    log-tag {}\n    \
                 log-send-hostname lb-test\n\
                 frontend f\n    listen 127.0.0.1:0\n    backend {}\n",
                way.target,
                way.layout,
                way.facility,
                way.tag,
                backend.addr()
            );
            start_proxy_with(dir, &config)
        })
        .collect();
    for (way, proxy) in ways.iter().zip(&proxies) {
        let client = echo_through(frontend_addr(proxy, "f"), b"hello syslog\n");
        let pid = proxy.pid().to_string();
        let got = rsyslog.wait_for(&way.tag, "the connection's line", |ms| {
            ms.iter()
                .any(|m| m.tcplog().is_some_and(|l| l.client == client))
        });
        let line = got
            .iter()
            .find(|m| m.tcplog().is_some_and(|l| l.client == client))
            .expect("found above");
        let fields = line.tcplog().expect("a tcplog line");
        assert_eq!(
            (
                fields.frontend.as_str(),
                fields.bytes_down,
                fields.termination.to_string()
            ),
            ("f", 13, "--".to_string()),
            "{line:#?}"
        );
        assert_eq!(
            (
                line.input.as_str(),
                line.facility.as_str(),
                line.severity.as_str()
            ),
            (way.input, way.facility, "info"),
            "{line:#?}"
        );
        assert_eq!(line.procid, pid, "{line:#?}");
        let version = if way.layout == "rfc5424" { "1" } else { "0" };
        assert_eq!(line.version, version, "{line:#?}");
        if way.layout != "local" {
            assert_eq!(line.hostname, "lb-test", "{line:#?}");
        }
        // facility × 8 + info (6): daemon is 3, localN is 16 + N.
        let code = match way.facility.strip_prefix("local") {
            Some(n) => 16 + n.parse::<u32>().expect("localN"),
            None => 3,
        };
        let priority = code * 8 + 6;
        assert!(line.raw.starts_with(&format!("<{priority}>")), "{line:#?}");
        // The daemon's own lines, with the same header, at notice.
        let daemon = rsyslog.wait_for(&way.tag, "the daemon's listening line", |ms| {
            ms.iter().any(|m| m.msg.contains("frontend f listening on"))
        });
        let listening = daemon
            .iter()
            .find(|m| m.msg.contains("frontend f listening on"))
            .expect("found above");
        assert_eq!(
            (listening.severity.as_str(), listening.procid.as_str()),
            ("notice", pid.as_str()),
            "{listening:#?}"
        );
        assert!(listening.msg.starts_with("[main] "), "{listening:#?}");
    }
    for proxy in proxies {
        stop_proxy(proxy);
    }
}

// ---------------------------------------------------------------------------
// A syslog server that is down, then back
// ---------------------------------------------------------------------------

// A TCP syslog server that is not there: the proxy relays as ever, counts
// the lines it loses and says so once; once rsyslog listens on that port,
// the next batch after the reconnect delay gets through, and the proxy says
// how many were lost meanwhile.
#[test]
fn a_tcp_syslog_server_that_is_down_loses_lines_without_holding_traffic_and_is_reconnected() {
    let Some(program) = rsyslog_or_skip("the TCP reconnect test") else {
        return;
    };
    let port = free_port().expect("a free port");
    let backend = echo_backend();
    let dir = TestDir::new("tcp-down");
    let config = format!(
        "global\n    workers 1\n    log tcp@127.0.0.1:{port} local0\n    log-tag t-down\n\
         frontend f\n    listen 127.0.0.1:0\n    backend {}\n",
        backend.addr()
    );
    let proxy = start_proxy_with(&dir, &config);
    let addr = frontend_addr(&proxy, "f");
    // Nobody listens: every connection is relayed at once all the same.
    for i in 0..5 {
        let started = Instant::now();
        echo_through(addr, format!("while down {i}\n").as_bytes());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "connection {i} was held"
        );
    }
    expect_log_within(&proxy, "lines are lost until it answers", SOON);
    let rsyslog = Rsyslog::start(&program, "tcp-down", Some(port));
    // The thread reconnects at the first batch a second after its last
    // failure: a connection every 300 ms until one's line arrives.
    let deadline = Instant::now() + SOON;
    let arrived = loop {
        let client = echo_through(addr, b"back\n");
        let seen = wait_until(Duration::from_millis(300), || {
            rsyslog
                .tagged("t-down")
                .iter()
                .any(|m| m.tcplog().is_some_and(|l| l.client == client))
        });
        if seen {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
    };
    assert!(
        arrived,
        "no line after rsyslog came up; stderr:\n{}",
        said(&proxy)
    );
    let back = expect_log_within(&proxy, "connected again;", SOON);
    let lost: u64 = back
        .split("connected again; ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {back:?}"));
    assert!(lost >= 5, "{back}");
    // Not one of the lines made while it was down arrived.
    let early = rsyslog
        .tagged("t-down")
        .iter()
        .filter_map(Message::tcplog)
        .filter(|l| l.bytes_down == "while down 0\n".len() as u64)
        .count();
    assert_eq!(early, 0);
    stop_proxy(proxy);
}

// A Unix socket that is not there: each batch fails at once, is counted,
// and said at most once a second; once rsyslog has made the socket, lines
// arrive with no reconnection (each batch names the path).
#[test]
fn a_unix_syslog_socket_that_is_missing_loses_lines_and_the_next_batch_finds_it() {
    let Some(program) = rsyslog_or_skip("the Unix socket test") else {
        return;
    };
    let rsyslog = Rsyslog::start(&program, "unix-missing", None);
    let backend = echo_backend();
    let dir = TestDir::new("unix-missing");
    let missing = dir.file("not-yet.sock");
    let config = format!(
        "global\n    workers 1\n    log {} local0\n    log-tag t-missing\n\
         frontend f\n    listen 127.0.0.1:0\n    backend {}\n",
        missing.display(),
        backend.addr()
    );
    let proxy = start_proxy_with(&dir, &config);
    let addr = frontend_addr(&proxy, "f");
    echo_through(addr, b"lost\n");
    let said_lost = expect_log_within(&proxy, "lines lost (", SOON);
    assert!(
        said_lost.contains(&format!("syslog unix@{}", missing.display())),
        "{said_lost}"
    );
    // The socket appears (a link to rsyslog's, as a restarted daemon's
    // socket would): the next batch gets there.
    std::os::unix::fs::symlink(&rsyslog.socket, &missing).expect("link the socket");
    let client = echo_through(addr, b"found\n");
    rsyslog.wait_for(
        "t-missing",
        "the line sent once the socket was there",
        |ms| {
            ms.iter()
                .any(|m| m.tcplog().is_some_and(|l| l.client == client))
        },
    );
    stop_proxy(proxy);
}

// ---------------------------------------------------------------------------
// dontlognull
// ---------------------------------------------------------------------------

/// The PROXY v2 signature (the specification's section 2.2).
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// A PROXY v2 header with the LOCAL command: what HAProxy's `check
/// send-proxy-v2` health probe sends, then closes.
fn v2_local() -> Vec<u8> {
    let mut header = V2_SIGNATURE.to_vec();
    header.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    header
}

/// A PROXY v2 header for a TCP over IPv4 client at `source` that reached
/// `destination`.
fn v2_proxy(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (SocketAddr::V4(s), SocketAddr::V4(d)) = (source, destination) else {
        panic!("IPv4 only here");
    };
    let mut header = V2_SIGNATURE.to_vec();
    header.extend_from_slice(&[0x21, 0x11, 0x00, 12]);
    header.extend_from_slice(&s.ip().octets());
    header.extend_from_slice(&d.ip().octets());
    header.extend_from_slice(&s.port().to_be_bytes());
    header.extend_from_slice(&d.port().to_be_bytes());
    header
}

/// Connects, sends `bytes` (maybe none) and closes; waits for the proxy to
/// close its side (its verdict, whatever it is), so that the connection is
/// over before the next one. A proxy that refuses what was sent (a PROXY
/// header it does not accept) may reset the connection before our FIN:
/// then the FIN finds it gone (`NotConnected`), which is that verdict.
fn say_and_leave(addr: SocketAddr, bytes: &[u8]) {
    let mut stream = connect(addr);
    if !bytes.is_empty() {
        stream.write_all(bytes).expect("send");
    }
    match stream.shutdown(Shutdown::Write) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotConnected => return,
        Err(e) => panic!("FIN: {e}"),
    }
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}

// Three frontends to one echo backend, logging over UDP: `plain` with
// dontlognull, `quiet` with accept-proxy and dontlognull, `loud` with
// accept-proxy only. Each gets a client that says nothing, a real client
// (behind a PROXY header where the frontend expects one), and the
// accept-proxy ones a PROXY v2 LOCAL probe and a client that sends garbage
// instead of a header. dontlognull leaves out exactly the silent client and
// the probe; `loud` logs everything.
#[test]
fn dontlognull_leaves_out_silent_clients_and_proxy_v2_local_probes() {
    let Some(program) = rsyslog_or_skip("the dontlognull test") else {
        return;
    };
    let rsyslog = Rsyslog::start(&program, "null", None);
    let backend = echo_backend();
    let dir = TestDir::new("null");
    let config = format!(
        "global\n    workers 1\n    log {} local0\n    log-tag t-null\n\
         frontend plain\n    listen 127.0.0.1:0\n    dontlognull\n    backend {b}\n\
         frontend quiet\n    listen 127.0.0.1:0\n    accept-proxy\n    dontlognull\n    backend {b}\n\
         frontend loud\n    listen 127.0.0.1:0\n    accept-proxy\n    backend {b}\n",
        rsyslog.udp,
        b = backend.addr()
    );
    let proxy = start_proxy_with(&dir, &config);
    let real_client = SocketAddr::from(([192, 0, 2, 7], 4321));
    let plain = frontend_addr(&proxy, "plain");
    say_and_leave(plain, b"");
    echo_through(plain, b"real\n");
    for name in ["quiet", "loud"] {
        let addr = frontend_addr(&proxy, name);
        say_and_leave(addr, b"");
        say_and_leave(addr, &v2_local());
        say_and_leave(addr, b"GET / HTTP/1.0\r\n\r\n");
        let mut bytes = v2_proxy(real_client, addr);
        bytes.extend_from_slice(b"real\n");
        say_and_leave(addr, &bytes);
    }
    stop_proxy(proxy);
    rsyslog.sync();
    let lines: Vec<ParsedLine> = rsyslog
        .tagged("t-null")
        .iter()
        .filter_map(Message::tcplog)
        .collect();
    let of = |frontend: &str| -> Vec<(String, u64)> {
        let mut codes: Vec<(String, u64)> = lines
            .iter()
            .filter(|l| l.frontend == frontend)
            .map(|l| (l.termination.to_string(), l.bytes_down))
            .collect();
        codes.sort();
        codes
    };
    // plain: the real client only.
    assert_eq!(of("plain"), [("--".to_string(), 5)], "{lines:#?}");
    // quiet: the real client (behind its header) and the garbage (PR).
    assert_eq!(
        of("quiet"),
        [("--".to_string(), 5), ("PR".to_string(), 0)],
        "{lines:#?}"
    );
    // loud: all four: silent (CR: closed before any header), the LOCAL
    // probe (relayed, nothing either way), the garbage, the real one.
    assert_eq!(
        of("loud"),
        [
            ("--".to_string(), 0),
            ("--".to_string(), 5),
            ("CR".to_string(), 0),
            ("PR".to_string(), 0)
        ],
        "{lines:#?}"
    );
    let real = lines
        .iter()
        .filter(|l| l.bytes_down == 5 && l.frontend != "plain")
        .map(|l| l.client)
        .collect::<Vec<_>>();
    assert_eq!(real, [real_client, real_client], "{lines:#?}");
}

// ---------------------------------------------------------------------------
// log-format
// ---------------------------------------------------------------------------

/// A backend that reads `expect` bytes, answers `reply` bytes and closes,
/// and reports the address the proxy connected from.
fn sized_backend(expect: usize, reply: usize, seen: mpsc::Sender<SocketAddr>) -> StdBackend {
    let seen = std::sync::Mutex::new(seen);
    StdBackend::start(move |mut stream| {
        let peer = stream.peer_addr()?;
        let mut request = vec![0u8; expect];
        stream.read_exact(&mut request)?;
        stream.write_all(&vec![b'r'; reply])?;
        stream.shutdown(Shutdown::Write)?;
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest)?;
        let _ = seen.lock().map(|tx| tx.send(peer));
        Ok(())
    })
}

// A log-format of most variables, over TCP in RFC 5424: one real
// connection, 1,000 bytes up and 3,000 down, every field checked against
// what the test knows: its own address, the frontend's, the backend's, the
// address the backend saw the proxy connect from, the byte counts, the
// termination, the PID, the connection's number and the unique id made of
// them.
#[test]
fn a_log_format_renders_the_variables_of_a_real_connection() {
    let Some(program) = rsyslog_or_skip("the log-format test") else {
        return;
    };
    let rsyslog = Rsyslog::start(&program, "format", None);
    let (tx, rx) = mpsc::channel();
    let backend = sized_backend(1000, 3000, tx);
    let dir = TestDir::new("format");
    let format =
        "%ci|%cp|%fi|%fp|%f|%b|%s|%si|%sp|%bi|%bp|%B|%U|%ts|%pid|%rt|%ID|%{+Q}ft|%Tw|%Tt|%ac";
    let config = format!(
        "global\n    workers 1\n    log tcp@{} format rfc5424 local6\n    log-tag t-format\n    \
         log-format \"{format}\"\n\
         frontend web\n    listen 127.0.0.1:0\n    backend {}\n",
        rsyslog.tcp,
        backend.addr()
    );
    let proxy = start_proxy_with(&dir, &config);
    let addr = frontend_addr(&proxy, "web");
    let mut stream = connect(addr);
    let client = stream.local_addr().expect("local address");
    stream.write_all(&[b'q'; 1000]).expect("send");
    let mut reply = Vec::new();
    stream.shutdown(Shutdown::Write).expect("FIN");
    stream.read_to_end(&mut reply).expect("the reply");
    assert_eq!(reply.len(), 3000);
    let source = rx.recv_timeout(SOON).expect("the backend saw the proxy");
    let got = rsyslog.wait_for("t-format", "the formatted line", |ms| {
        ms.iter().any(|m| m.msg.starts_with("127.0.0.1|"))
    });
    let line = got
        .iter()
        .find(|m| m.msg.starts_with("127.0.0.1|"))
        .expect("found above");
    let fields: Vec<&str> = line.msg.split('|').collect();
    let pid = proxy.pid();
    let b = backend.addr();
    let hex_ip = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => format!("{:08X}", u32::from(*v4.ip())),
        SocketAddr::V6(_) => panic!("IPv4 here"),
    };
    let accepted_secs = fields
        .get(16)
        .and_then(|id| id.split('_').nth(2))
        .unwrap_or("");
    let expected_id = format!(
        "{}:{:04X}_{}:{:04X}_{accepted_secs}_0001:{pid:04X}",
        hex_ip(client),
        client.port(),
        hex_ip(addr),
        addr.port()
    );
    let expected = [
        client.ip().to_string(),
        client.port().to_string(),
        addr.ip().to_string(),
        addr.port().to_string(),
        "web".into(),
        "web".into(),
        b.to_string(),
        b.ip().to_string(),
        b.port().to_string(),
        source.ip().to_string(),
        source.port().to_string(),
        "3000".into(),
        "1000".into(),
        "--".into(),
        pid.to_string(),
        "1".into(),
        expected_id,
        "\"web\"".into(),
    ];
    assert_eq!(&fields[..expected.len()], &expected[..], "{line:#?}");
    // %Ts in the id is the accept time: within this test's run.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let ts = u64::from_str_radix(accepted_secs, 16).expect("hexadecimal seconds");
    assert!(ts <= now && now - ts < 120, "{ts} vs {now}");
    let wait: i64 = fields[18].parse().expect("%Tw");
    let total: i64 = fields[19].parse().expect("%Tt");
    assert!(wait >= 0 && total >= wait, "{line:#?}");
    assert_eq!(fields[20], "1", "the connection itself, open when logged");
    assert_eq!(
        (
            line.version.as_str(),
            line.facility.as_str(),
            line.procid.as_str()
        ),
        ("1", "local6", pid.to_string().as_str())
    );
    stop_proxy(proxy);
}

// ---------------------------------------------------------------------------
// The daemon's lines carry the PID
// ---------------------------------------------------------------------------

// Every line the daemon writes on stderr carries its PID, in parentheses
// after the level: through a start, a reload and a stop.
#[test]
fn every_daemon_line_on_stderr_carries_the_pid() {
    let backend = echo_backend();
    let dir = TestDir::new("pid");
    let config = format!(
        "frontend f\n    listen 127.0.0.1:0\n    backend {}\n",
        backend.addr()
    );
    let proxy = start_proxy_with(&dir, &config);
    let pid = proxy.pid();
    echo_through(frontend_addr(&proxy, "f"), b"x\n");
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_within(&proxy, "reloaded", SOON);
    let lines = stop_proxy(proxy);
    // Daemon lines start with a date (`2026-11-30T...`); access-log lines
    // with the client's address.
    let is_date = |l: &str| {
        let b = l.as_bytes();
        b.len() > 11 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[10] == b'T'
    };
    let daemon: Vec<&String> = lines.iter().filter(|l| is_date(l)).collect();
    assert!(daemon.len() >= 4, "{lines:#?}");
    for line in &daemon {
        let level_and_pid: Vec<&str> = line.split_whitespace().take(3).collect();
        assert_eq!(
            level_and_pid.get(2).copied(),
            Some(format!("({pid})").as_str()),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| parse_tcplog(l).is_some()),
        "the access line: {lines:#?}"
    );
}
