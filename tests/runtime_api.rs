//! End to end, servers changed at runtime: drain, maint with its sessions
//! shut down, weights, who may act, states that survive a reload, an
//! upgrade and a restart, and `proxy ctl`'s errors.
//!
//! Real processes (the proxy, two workers, and `proxy ctl`), real sockets
//! on loopback. The backends are the test's own: each reads a client's id
//! line, records it, answers with its name, then echoes until the client's
//! FIN, so that "which server got which connection" is counted at the
//! backends, by the ids the clients chose. Every wait has a deadline, every
//! loop a bound, every child a guard that kills it.
//!
//! The drain's oracle: a client records the instant before it connects;
//! the instant the action's answer was read splits the clients in two, and
//! no client of the second half may be recorded at the drained server.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    ConfigFile, Prng, StdBackend, connect, expect_log_within, proxy_exe, read_line, said,
    set_timeouts, stop_cleanly, wait_until,
};
use nix::sys::signal::Signal;
use testkit::tcplog::parse_tcplog;
use tools::process::child::{self, ChildProcess, Spawn};

/// A generous bound on "soon".
const SOON: Duration = Duration::from_secs(20);

/// The admin token the tests write to the token file.
const TOKEN: &str = "0123456789abcdef0123456789abcdef";

// ---------------------------------------------------------------------------
// Backends that record who came
// ---------------------------------------------------------------------------

/// The ids each server was reached by, in the order they came.
#[derive(Default)]
struct Guestbook(Mutex<HashMap<String, Vec<String>>>);

impl Guestbook {
    fn record(&self, server: &str, id: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(server.to_string())
            .or_default()
            .push(id.to_string());
    }

    fn ids(&self, server: &str) -> Vec<String> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(server).cloned().unwrap_or_default()
    }

    fn count(&self, server: &str, prefix: &str) -> usize {
        self.ids(server)
            .iter()
            .filter(|id| id.starts_with(prefix))
            .count()
    }
}

/// Backends named `names`, recording in one guestbook.
struct Servers {
    guestbook: Arc<Guestbook>,
    servers: Vec<(String, StdBackend)>,
}

impl Servers {
    fn new(names: &[&str]) -> Servers {
        let guestbook = Arc::new(Guestbook::default());
        let servers = names
            .iter()
            .map(|&name| {
                let (guestbook, me) = (guestbook.clone(), name.to_string());
                let backend = StdBackend::start(move |mut stream: TcpStream| {
                    let id = read_line(&mut stream)?;
                    let id = String::from_utf8_lossy(&id).trim().to_string();
                    guestbook.record(&me, &id);
                    stream.write_all(format!("{me}\n").as_bytes())?;
                    common::echo(stream)
                });
                (name.to_string(), backend)
            })
            .collect();
        Servers { guestbook, servers }
    }

    /// `backend NAME ADDR` lines, in order, each with `extra`.
    fn lines(&self, extra: &str) -> String {
        self.servers
            .iter()
            .map(|(name, b)| format!("    backend {name} {} {extra}\n", b.addr()))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The proxy
// ---------------------------------------------------------------------------

/// A test's files: the config, the token, the sockets, the state file.
struct Lab {
    config: ConfigFile,
}

impl Lab {
    fn new(name: &str, pool: &Servers, backend_extra: &str) -> Lab {
        let config = ConfigFile::new(name, "");
        let lab = Lab { config };
        let token = lab.file("admin.token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("the token file");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("0600");
        lab.write(pool, "", backend_extra);
        lab
    }

    fn file(&self, name: &str) -> PathBuf {
        self.config.dir().join(name)
    }

    fn socket(&self) -> PathBuf {
        self.file("admin.sock")
    }

    /// Writes the config: two workers, the admin endpoint, socket and
    /// token, `global_extra`, and frontend `web` with `pool`'s servers,
    /// each line ending with `backend_extra`.
    fn write(&self, pool: &Servers, global_extra: &str, backend_extra: &str) {
        let text = format!(
            "global\n    workers 2\n    admin 127.0.0.1:0\n    admin-socket {}\n    \
             admin-token-file {}\n{global_extra}\nfrontend web\n    listen 127.0.0.1:0\n{}",
            self.socket().display(),
            self.file("admin.token").display(),
            pool.lines(backend_extra),
        );
        self.config.write(&text);
    }

    fn start(&self, extra: &[&str]) -> Proxy {
        let mut args = vec![
            "--config".to_string(),
            self.config.path().display().to_string(),
            "--grace".to_string(),
            "2s".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let process = child::proxy(proxy_exe(), &args)
            .start()
            .unwrap_or_else(|e| panic!("start the proxy: {e}"));
        Proxy::of(process)
    }
}

/// A running proxy and where it answers.
struct Proxy {
    process: ChildProcess,
    web: SocketAddr,
    admin: SocketAddr,
}

impl Proxy {
    fn of(process: ChildProcess) -> Proxy {
        let web = process.frontend_addr("web").expect("frontend web");
        let line = expect_log_within(&process, "admin listening on ", SOON);
        let admin = child::listening_addr(&line).expect("the admin address");
        Proxy {
            process,
            web,
            admin,
        }
    }
}

/// One command over the admin socket at `path`: its answer.
fn on_socket(path: &Path, line: &str) -> String {
    let mut stream = UnixStream::connect(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    stream.set_read_timeout(Some(SOON)).expect("timeout");
    stream
        .write_all(format!("{line}\n").as_bytes())
        .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    answer
}

/// An HTTP exchange with the admin endpoint: status and body.
fn http(
    admin: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw_http(admin, request.as_bytes())
}

fn raw_http(admin: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = connect(admin);
    stream.write_all(request).expect("send");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("the answer");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_string())
}

/// `show servers state`'s line for `server` (its columns after the names).
fn state_of(socket: &Path, server: &str) -> String {
    let text = on_socket(socket, "show servers state");
    text.lines()
        .find(|l| l.split(' ').nth(2) == Some(server))
        .map(|l| l.split(' ').skip(3).take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("no line for {server} in:\n{text}"))
}

/// `proxy ctl ARGS`: exit code, stdout, stderr.
fn ctl(args: &[&str]) -> (i32, String, String) {
    let mut words = vec!["ctl".to_string()];
    words.extend(args.iter().map(|s| s.to_string()));
    let done = Spawn::new("proxy ctl", proxy_exe())
        .args(words)
        .stdout(child::Capture::All)
        .run(SOON)
        .expect("proxy ctl runs");
    (
        done.status.code().unwrap_or(-1),
        done.stdout.join("\n"),
        done.stderr.join("\n"),
    )
}

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

/// One short connection with id `id`: the server that answered.
fn one_shot(web: SocketAddr, id: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&web, SOON).map_err(|e| format!("connect: {e}"))?;
    set_timeouts(&stream, SOON);
    stream
        .write_all(format!("{id}\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let name = read_line(&mut stream).map_err(|e| format!("name: {e}"))?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("shutdown: {e}"))?;
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .map_err(|e| format!("end: {e}"))?;
    Ok(String::from_utf8_lossy(&name).trim().to_string())
}

/// A held connection: its server, and the stream, checked byte-exact at
/// each exchange.
struct LongConnection {
    server: String,
    stream: TcpStream,
    rng: Prng,
    sent: u64,
}

impl LongConnection {
    fn open(web: SocketAddr, id: &str, seed: u64) -> LongConnection {
        let mut stream = connect(web);
        stream
            .write_all(format!("{id}\n").as_bytes())
            .expect("send the id");
        let name = read_line(&mut stream).expect("the server's name");
        LongConnection {
            server: String::from_utf8_lossy(&name).trim().to_string(),
            stream,
            rng: Prng::new(seed),
            sent: 0,
        }
    }

    /// Sends 16 KiB and reads them back: equal, or the error.
    fn exchange(&mut self) -> std::io::Result<()> {
        let mut chunk = vec![0u8; 16 * 1024];
        self.rng.fill(&mut chunk);
        self.stream.write_all(&chunk)?;
        let mut back = vec![0u8; chunk.len()];
        self.stream.read_exact(&mut back)?;
        assert_eq!(back, chunk, "byte-exact through {}", self.server);
        self.sent += chunk.len() as u64;
        Ok(())
    }

    /// Half-closes and reads the server's FIN: a clean end.
    fn finish(mut self) {
        self.stream.shutdown(Shutdown::Write).expect("FIN");
        let mut rest = Vec::new();
        self.stream
            .read_to_end(&mut rest)
            .expect("the server's FIN");
        assert!(rest.is_empty(), "nothing after the echo");
    }
}

/// Opens held connections until each server of `servers` holds at least
/// `each` (at most 40 tries).
fn hold(web: SocketAddr, servers: &[&str], each: usize) -> Vec<LongConnection> {
    let mut held: Vec<LongConnection> = Vec::new();
    for k in 0..40u64 {
        let enough = servers
            .iter()
            .all(|s| held.iter().filter(|h| h.server == *s).count() >= each);
        if enough {
            return held;
        }
        held.push(LongConnection::open(web, &format!("held-{k}"), k + 1));
    }
    panic!("not {each} held connections on each of {servers:?} in 40 tries");
}

/// Clients on `threads` threads, one short connection after another until
/// `stop`, each recording (the instant before its connect, its server).
fn load(
    web: SocketAddr,
    threads: usize,
    stop: &AtomicBool,
    done: &AtomicU64,
    log: &Mutex<Vec<(Instant, String, String)>>,
) {
    thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for n in 0..100_000u64 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let id = format!("load-{t}-{n}");
                    let started = Instant::now();
                    let server = one_shot(web, &id).unwrap_or_else(|e| panic!("{id}: {e}"));
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((started, id, server));
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

// Drain under load: from the moment the action's answer is read, no new
// connection reaches s1 (counted at the backends by the clients' ids),
// while s1's held connections go on and finish byte-exact.
#[test]
fn a_drained_server_gets_no_new_connection_and_its_open_ones_finish() {
    let pool = Servers::new(&["s1", "s2"]);
    let lab = Lab::new("drain", &pool, "");
    let proxy = lab.start(&[]);
    let mut held = hold(proxy.web, &["s1", "s2"], 2);
    let (stop, done, log) = (
        AtomicBool::new(false),
        AtomicU64::new(0),
        Mutex::new(Vec::new()),
    );
    let drained_at = thread::scope(|s| {
        s.spawn(|| load(proxy.web, 4, &stop, &done, &log));
        assert!(
            wait_until(SOON, || done.load(Ordering::SeqCst) >= 300),
            "load runs"
        );
        let answer = on_socket(&lab.socket(), "set server web/s1 state drain");
        let at = Instant::now();
        assert_eq!(answer, "web/s1: state drain (was ready)\n");
        let after = done.load(Ordering::SeqCst);
        assert!(
            wait_until(SOON, || done.load(Ordering::SeqCst) >= after + 600),
            "load goes on"
        );
        stop.store(true, Ordering::SeqCst);
        at
    });
    for h in &mut held {
        h.exchange()
            .unwrap_or_else(|e| panic!("held on {}: {e}", h.server));
    }
    let on_s1: std::collections::HashSet<String> = pool.guestbook.ids("s1").into_iter().collect();
    let log = log.into_inner().unwrap_or_else(PoisonError::into_inner);
    let (before, after): (Vec<_>, Vec<_>) = log.iter().partition(|(t, _, _)| *t < drained_at);
    let late: Vec<_> = after
        .iter()
        .filter(|(_, id, _)| on_s1.contains(id))
        .collect();
    assert!(
        late.is_empty(),
        "{} connections begun after the drain reached s1",
        late.len()
    );
    let s1_before = before.iter().filter(|(_, _, s)| s == "s1").count();
    eprintln!(
        "drain: {} connections before the answer ({s1_before} on s1), {} after (0 on s1: \
         {} at the backend s1 in all, {} at s2)",
        before.len(),
        after.len(),
        pool.guestbook.count("s1", "load-"),
        pool.guestbook.count("s2", "load-"),
    );
    assert!(after.len() >= 600 && s1_before > 0);
    for h in held {
        h.finish();
    }
    let (status, metrics) = http(proxy.admin, "GET", "/metrics", None, "");
    assert_eq!(status, 200);
    let gauge = |name: &str| {
        metrics
            .lines()
            .any(|l| l.starts_with(name) && l.contains("server=\"s1\"") && l.ends_with(" 1"))
    };
    assert!(
        gauge("proxy_server_admin_state{") && metrics.contains("state=\"drain\"} 1"),
        "{metrics}"
    );
    assert!(
        gauge("proxy_backend_up{"),
        "drained is still up by its health"
    );
    let (_, csv) = http(proxy.admin, "GET", "/stats.csv", None, "");
    let row = csv.lines().find(|l| l.starts_with("web,s1,"));
    assert!(
        row.is_some_and(|r| r.contains(",DRAIN,")),
        "the views say DRAIN:\n{csv}"
    );
    stop_cleanly(proxy.process);
}

// maint with shutdown-sessions, by `proxy ctl`: exactly s1's held
// connections are reset and logged KD; s2's go on byte-exact.
#[test]
fn maint_with_shutdown_sessions_resets_exactly_that_servers_sessions() {
    let pool = Servers::new(&["s1", "s2"]);
    let lab = Lab::new("maint", &pool, "check inter 100ms");
    let proxy = lab.start(&[]);
    let held = hold(proxy.web, &["s1", "s2"], 3);
    let socket = lab.socket().display().to_string();
    let (code, out, err) = ctl(&[
        "--socket",
        &socket,
        "maint",
        "web/s1",
        "--shutdown-sessions",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "web/s1: state maint (was ready), its sessions cut");
    let (mut cut, mut kept) = (0, 0);
    for mut h in held {
        match h.server.as_str() {
            "s1" => {
                let mut byte = [0u8; 1];
                let read = h.stream.read(&mut byte);
                assert_eq!(
                    read.map_err(|e| e.kind()).err(),
                    Some(ErrorKind::ConnectionReset)
                );
                cut += 1;
            }
            _ => {
                h.exchange().expect("s2's connection goes on");
                h.finish();
                kept += 1;
            }
        }
    }
    let killed = |p: &ChildProcess, server: &str| {
        p.log()
            .iter()
            .filter_map(|l| parse_tcplog(l))
            .filter(|l| l.server.as_deref() == Some(server) && l.termination.to_string() == "KD")
            .count()
    };
    assert!(
        wait_until(SOON, || killed(&proxy.process, "s1") == cut),
        "{cut} lines KD for s1; stderr:\n{}",
        said(&proxy.process)
    );
    assert_eq!(killed(&proxy.process, "s2"), 0);
    eprintln!(
        "maint + shutdown-sessions: {cut} sessions of s1 reset and logged KD, {kept} of s2 kept"
    );
    // maint stops s1's checks: s2's go on meanwhile (at most one of s1's
    // was under way when the order came).
    let checks = |server: &str| {
        let (_, metrics) = http(proxy.admin, "GET", "/metrics", None, "");
        sample(&metrics, "proxy_backend_check_successes_total", server)
    };
    let (s1_before, s2_before) = (checks("s1"), checks("s2"));
    assert!(
        wait_until(SOON, || checks("s2") >= s2_before + 5),
        "s2 is checked"
    );
    let s1_after = checks("s1");
    assert!(
        s1_after <= s1_before + 1,
        "s1 in maint: checks {s1_before} then {s1_after}"
    );
    eprintln!(
        "maint: s1's checks {s1_before} -> {s1_after} while s2's went {s2_before} -> {}",
        checks("s2")
    );
    // New connections all go to s2.
    for n in 0..20 {
        assert_eq!(
            one_shot(proxy.web, &format!("after-{n}")).as_deref(),
            Ok("s2")
        );
    }
    stop_cleanly(proxy.process);
}

// Weights 1:3 set over HTTP with the token: 4,000 connections split
// within 5 % of 1,000 and 3,000.
#[test]
fn weights_1_to_3_split_4000_connections() {
    let pool = Servers::new(&["s1", "s2"]);
    let lab = Lab::new("weights", &pool, "");
    let proxy = lab.start(&[]);
    let (status, body) = http(
        proxy.admin,
        "POST",
        "/servers/web/s2/weight",
        Some(TOKEN),
        "3",
    );
    assert_eq!((status, body.as_str()), (200, "web/s2: weight 3 (was 1)\n"));
    let next = AtomicU64::new(0);
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..4000 {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= 4000 {
                        return;
                    }
                    one_shot(proxy.web, &format!("w-{n}")).unwrap_or_else(|e| panic!("{n}: {e}"));
                }
            });
        }
    });
    let (s1, s2) = (
        pool.guestbook.count("s1", "w-"),
        pool.guestbook.count("s2", "w-"),
    );
    eprintln!("weights 1:3: s1 {s1}, s2 {s2} of 4000");
    assert_eq!(s1 + s2, 4000);
    assert!(
        s1.abs_diff(1000) <= 50 && s2.abs_diff(3000) <= 150,
        "s1 {s1}, s2 {s2}"
    );
    let (_, metrics) = http(proxy.admin, "GET", "/metrics", None, "");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("proxy_server_weight{")
                && l.contains("server=\"s2\"")
                && l.ends_with(" 3")),
        "{metrics}"
    );
    stop_cleanly(proxy.process);
}

// Without the socket or the token: 403, and nothing changes; junk is 4xx
// and changes nothing; a slow client holds nobody else.
#[test]
fn an_action_without_the_socket_or_the_token_is_refused_and_changes_nothing() {
    let pool = Servers::new(&["s1", "s2"]);
    let lab = Lab::new("refused", &pool, "");
    let proxy = lab.start(&[]);
    let before = on_socket(&lab.socket(), "show servers state");
    // A slow client holds its own connection only.
    let mut slow = connect(proxy.admin);
    slow.write_all(
        b"POST /servers/web/s1/state HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\ndr",
    )
    .expect("half a request");
    let refused = [
        http(proxy.admin, "POST", "/servers/web/s1/state", None, "maint"),
        http(
            proxy.admin,
            "POST",
            "/servers/web/s1/state",
            Some("0123456789abcdef0123456789abcdeX"),
            "maint",
        ),
        http(proxy.admin, "POST", "/servers/web/s1/weight", Some(""), "0"),
        http(
            proxy.admin,
            "POST",
            "/servers/web/s1/shutdown-sessions",
            None,
            "",
        ),
    ];
    for (status, body) in &refused {
        assert_eq!(*status, 403, "{body}");
        assert!(body.starts_with("forbidden: "), "{body}");
    }
    let junk = [
        (
            http(
                proxy.admin,
                "POST",
                "/servers/web/s1/state",
                Some(TOKEN),
                "sideways",
            ),
            400,
        ),
        (
            http(
                proxy.admin,
                "POST",
                "/servers/web/s1/weight",
                Some(TOKEN),
                "257",
            ),
            400,
        ),
        (
            http(
                proxy.admin,
                "POST",
                "/servers/web/s9/weight",
                Some(TOKEN),
                "2",
            ),
            404,
        ),
        (
            http(
                proxy.admin,
                "POST",
                "/servers/web/s1/weight",
                Some(TOKEN),
                &"9".repeat(2000),
            ),
            413,
        ),
        (
            http(
                proxy.admin,
                "PUT",
                "/servers/web/s1/weight",
                Some(TOKEN),
                "2",
            ),
            405,
        ),
    ];
    for ((status, body), want) in &junk {
        assert_eq!(status, want, "{body}");
    }
    assert!(
        junk[2].0.1.contains("did you mean 's1'?"),
        "{}",
        junk[2].0.1
    );
    assert_eq!(
        http(proxy.admin, "GET", "/metrics", None, "").0,
        200,
        "views need no token"
    );
    assert_eq!(
        on_socket(&lab.socket(), "show servers state"),
        before,
        "nothing changed"
    );
    let mut answer = String::new();
    slow.read_to_string(&mut answer)
        .expect("the slow one's answer");
    assert!(
        answer.starts_with("HTTP/1.1 408 "),
        "its body came too late: {answer}"
    );
    assert_eq!(one_shot(proxy.web, "probe").map(|_| ()), Ok(()));
    let mode = std::fs::metadata(lab.socket())
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    stop_cleanly(proxy.process);
}

// `proxy ctl`: clear errors, did-you-mean from the proxy (404) and from
// ctl itself (2), and HTTP with and without the token.
#[test]
fn ctl_says_what_is_wrong_and_suggests_names() {
    let pool = Servers::new(&["app1", "app2"]);
    let lab = Lab::new("ctl", &pool, "");
    let proxy = lab.start(&[]);
    let socket = lab.socket().display().to_string();
    let (code, _, err) = ctl(&["--socket", &socket, "drain", "web/ap1"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no server 'ap1' in frontend 'web' (did you mean 'app1'?)"),
        "{err}"
    );
    let (code, _, err) = ctl(&["--socket", &socket, "drain", "webb/app1"]);
    assert_eq!(code, 1);
    assert!(err.contains("did you mean 'web'?"), "{err}");
    let (code, _, err) = ctl(&["--socket", &socket, "drian", "web/app1"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean 'drain'?"), "{err}");
    let (code, _, err) = ctl(&["--socket", &socket, "weight", "web/app1", "300"]);
    assert_eq!(code, 2);
    assert!(err.contains("out of range"), "{err}");
    let missing = lab.file("nowhere.sock").display().to_string();
    let (code, _, err) = ctl(&["--socket", &missing, "show", "servers"]);
    assert_eq!(code, 1);
    assert!(err.contains("nowhere.sock"), "{err}");
    let admin = proxy.admin.to_string();
    let (code, _, err) = ctl(&["--admin", &admin, "drain", "web/app1"]);
    assert_eq!(code, 1);
    assert!(err.contains("forbidden: an action needs"), "{err}");
    let token = lab.file("admin.token").display().to_string();
    let (code, out, err) = ctl(&[
        "--admin",
        &admin,
        "--token-file",
        &token,
        "weight",
        "web/app2",
        "4",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "web/app2: weight 4 (was 1)"),
        "{err}"
    );
    let (code, out, _) = ctl(&["--socket", &socket, "show", "servers"]);
    assert_eq!(code, 0);
    assert!(out.contains("web web app2 ready 4 1 up"), "{out}");
    stop_cleanly(proxy.process);
}

// States survive a reload (the servers the file still names), an upgrade
// (handed to the new process) and a restart (the state file).
#[test]
fn states_survive_reload_upgrade_and_restart() {
    let pool = Servers::new(&["s1", "s2", "s3"]);
    let lab = Lab::new("lasting", &pool, "");
    let global = format!(
        "    upgrade-socket {}\n    server-state-file {}\n",
        lab.file("upgrade.sock").display(),
        lab.file("servers.state").display()
    );
    lab.write(&pool, &global, "");
    let first = lab.start(&[]);
    let socket = lab.socket();
    on_socket(&socket, "set server web/s1 state drain");
    on_socket(&socket, "set weight web/s2 3");
    on_socket(&socket, "set server web/s3 state maint");
    for n in 0..40 {
        one_shot(first.web, &format!("pre-{n}")).expect("served");
    }
    let (_, metrics) = http(first.admin, "GET", "/metrics", None, "");
    let before = connections_of(&metrics, "s2");
    // A reload that changes a timeout and drops s3 for s4.
    let s4 = Servers::new(&["s4"]);
    let mut lines = pool.lines("");
    lines = lines
        .lines()
        .filter(|l| !l.contains(" s3 "))
        .map(|l| format!("{l}\n"))
        .collect();
    lines.push_str(&s4.lines(""));
    let text = format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n    admin-socket {}\n    admin-token-file {}\n{global}\n\
         frontend web\n    listen 127.0.0.1:0\n    timeout connect 3s\n{lines}",
        socket.display(),
        lab.file("admin.token").display(),
    );
    lab.config.write(&text);
    first.process.signal(Signal::SIGHUP).expect("SIGHUP");
    let line = expect_log_within(&first.process, "reloaded ", SOON);
    assert!(
        line.contains("web: changed (servers added: s4; removed: s3)"),
        "{line}"
    );
    assert_eq!(state_of(&socket, "s1"), "drain 1 1");
    assert_eq!(state_of(&socket, "s2"), "ready 3 1");
    assert_eq!(state_of(&socket, "s4"), "ready 1 1");
    let (_, metrics) = http(first.admin, "GET", "/metrics", None, "");
    eprintln!(
        "reload: s2 connections counter before {before}, after {}",
        connections_of(&metrics, "s2")
    );
    for n in 0..40 {
        let server = one_shot(first.web, &format!("reloaded-{n}")).expect("served");
        assert_ne!(server, "s1", "s1 stays drained");
    }
    // An upgrade: the new process takes the listeners and the states.
    let upgrade = lab.file("upgrade.sock").display().to_string();
    let second = lab.start(&["--upgrade-from", &upgrade]);
    expect_log_within(
        &second.process,
        "upgrade: the admin state and weight of 3 of 3 servers kept",
        SOON,
    );
    expect_log_within(&first.process, "took the listeners: stopping", SOON);
    assert_eq!(state_of(&socket, "s1"), "drain 1 1");
    assert_eq!(state_of(&socket, "s2"), "ready 3 1");
    let _ = first.process.wait_exit(SOON);
    // A restart: the state file written at the stop is read back.
    stop_cleanly(second.process);
    let saved = std::fs::read_to_string(lab.file("servers.state")).expect("the state file");
    assert!(saved.contains("web web s1 drain 1 1"), "{saved}");
    let third = lab.start(&[]);
    expect_log_within(
        &third.process,
        "server-state-file: the admin state and weight of 3 of 3",
        SOON,
    );
    assert_eq!(state_of(&socket, "s1"), "drain 1 1");
    assert_eq!(state_of(&socket, "s2"), "ready 3 1");
    stop_cleanly(third.process);
    drop(s4);
}

/// `proxy_backend_connections_total` of `server` in a scrape.
fn connections_of(metrics: &str, server: &str) -> u64 {
    sample(metrics, "proxy_backend_connections_total", server)
}

/// The value of family `name`'s sample for `server` in a scrape (0 if none).
fn sample(metrics: &str, name: &str, server: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{")) && l.contains(&format!("server=\"{server}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
