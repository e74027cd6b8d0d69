//! End to end, backends written with a host name: the proxy runs in a
//! network namespace of the test's own, where `ip netns exec` gives it an
//! `/etc/hosts` of the test's (it bind-mounts `/etc/netns/NAME/hosts` over
//! `/etc/hosts` for the program it starts), so the test says what a name
//! resolves to, and changes it while the proxy runs. The backends listen in
//! that namespace too, on 127.0.0.1 and 127.0.0.2 with one port, and the
//! clients are threads of this process that entered it.
//!
//! What is shown: a new answer moves new connections (and health checks) to
//! the new address without a reload, while a connection open to the old one
//! finishes byte-exact; a name that stops resolving keeps its last good
//! address and says so once, in the log, the metrics and the SIGQUIT dump;
//! a name that never resolves fails `--check-config` and the start at its
//! line, unless `init-addr none` starts the backend out of rotation until
//! it resolves; with `resolve-interval off`, a reload looks names up again.
//!
//! Needs root and iproute2 (`ip netns`); without them each test says so and
//! passes without running. No lookup leaves the namespace: it has only `lo`,
//! so a name missing from its hosts file fails at once (the DNS server of
//! `/etc/resolv.conf` is unreachable from there). Every wait is bounded, and
//! the namespace, its `/etc/netns` directory and every process are removed
//! by guards even when an assertion fails.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, setns};
use nix::sys::signal::Signal;
use testkit::json;
use testkit::prometheus::{self, Exposition};
use tools::process::child::{self, ChildProcess, Ready};

use common::*;

/// A bound on "soon": a log line, a lookup, a process that starts.
const SOON: Duration = Duration::from_secs(15);
/// How often the proxies here look names up again.
const INTERVAL: &str = "100ms";

// ---------------------------------------------------------------------------
// The namespace
// ---------------------------------------------------------------------------

/// A network namespace of the test's own, with its own `/etc/hosts`;
/// removed on drop, with `/etc/netns/NAME`.
struct Netns {
    name: String,
}

impl Netns {
    /// A namespace for `test` with `lo` up, or `None` (said) where it
    /// cannot be made: not root, or no `ip`.
    fn new(test: &str) -> Option<Netns> {
        if !nix::unistd::geteuid().is_root() {
            println!("{test}: skipped: needs root, to make a network namespace (ip netns add)");
            return None;
        }
        let name = format!("lbr{}-{test}", std::process::id());
        match Command::new("ip").args(["netns", "add", &name]).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                println!("{test}: skipped: ip netns add {name}: {}", why.trim());
                return None;
            }
            Err(e) => {
                println!("{test}: skipped: no ip command (install iproute2): {e}");
                return None;
            }
        }
        // From here on, the guard removes it.
        let ns = Netns { name };
        let up = Command::new("ip")
            .args(["-n", &ns.name, "link", "set", "lo", "up"])
            .status();
        assert!(
            up.is_ok_and(|s| s.success()),
            "ip -n {} link set lo up",
            ns.name
        );
        fs::create_dir_all(ns.etc()).expect("create /etc/netns/NAME");
        Some(ns)
    }

    /// `/etc/netns/NAME`: what `ip netns exec` mounts over `/etc`'s files.
    fn etc(&self) -> PathBuf {
        PathBuf::from("/etc/netns").join(&self.name)
    }

    /// Writes the namespace's hosts file, in place: the proxy sees this
    /// very file through its bind mount, and a file renamed over it would
    /// leave the proxy the old one.
    fn hosts(&self, text: &str) {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.etc().join("hosts"))
            .expect("open the namespace's hosts file");
        file.write_all(text.as_bytes())
            .expect("write the hosts file");
    }

    /// Runs `work` on a thread inside the namespace: the sockets it makes
    /// are the namespace's.
    fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        thread::spawn(move || {
            let ns = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            setns(&ns, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {path}: {e}"));
            work()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }

    /// The proxy under test, in the namespace, with `args`.
    fn proxy(&self, args: &[String]) -> ChildProcess {
        let mut words: Vec<String> = ["netns", "exec", &self.name].map(String::from).to_vec();
        words.push(proxy_exe().display().to_string());
        words.extend(args.iter().cloned());
        child::proxy("ip", &words)
            .ready(Ready::AtOnce, SOON)
            .start()
            .unwrap_or_else(|e| panic!("start the proxy in {}: {e}", self.name))
    }

    /// `proxy --check-config PATH` in the namespace, run to its end.
    fn check_config(&self, config: &ConfigFile) -> (Option<i32>, String) {
        let words = [
            "netns".to_string(),
            "exec".to_string(),
            self.name.clone(),
            proxy_exe().display().to_string(),
            "--check-config".to_string(),
            config.path().display().to_string(),
        ];
        let finished = child::Spawn::new("check-config", "ip")
            .args(words)
            .stdout(child::Capture::All)
            .run(SOON)
            .expect("proxy --check-config");
        let said = [finished.stdout, finished.stderr].concat().join("\n");
        (finished.status.code(), said)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = fs::remove_dir_all(self.etc());
    }
}

// ---------------------------------------------------------------------------
// The backends: `a` at 127.0.0.1:PORT, `b` at 127.0.0.2:PORT
// ---------------------------------------------------------------------------

/// Two backends in the namespace on one port. Each says its name on a line,
/// then echoes; each counts the connections it accepted (clients' and
/// health checks').
struct Pair {
    port: u16,
    accepted: [Arc<AtomicUsize>; 2],
    /// Each one's accept loop, listening in the namespace.
    loops: Vec<thread::JoinHandle<()>>,
    /// To wake the accept loops at the end: a thread in the namespace.
    ns: String,
    stop: Arc<AtomicBool>,
}

impl Pair {
    fn start(ns: &Netns) -> Pair {
        let (a, b) = ns.run(|| {
            let a = TcpListener::bind("127.0.0.1:0").expect("bind a at 127.0.0.1");
            let port = a.local_addr().expect("a's address").port();
            let b = TcpListener::bind(("127.0.0.2", port)).expect("bind b at 127.0.0.2");
            (a, b)
        });
        let port = a.local_addr().expect("a's address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        let loops = [("a", a), ("b", b)]
            .into_iter()
            .zip(&accepted)
            .map(|((name, listener), count)| {
                let (count, stop) = (count.clone(), stop.clone());
                thread::spawn(move || serve(name, &listener, &count, &stop))
            })
            .collect();
        Pair {
            port,
            accepted,
            loops,
            ns: ns.name.clone(),
            stop,
        }
    }

    fn accepted(&self) -> [usize; 2] {
        self.accepted.each_ref().map(|c| c.load(Ordering::SeqCst))
    }
}

/// One backend's accept loop: each connection counted, then its name and
/// an echo, on a thread of its own.
fn serve(name: &'static str, listener: &TcpListener, count: &AtomicUsize, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        count.fetch_add(1, Ordering::SeqCst);
        set_timeouts(&stream, IO_TIMEOUT);
        thread::spawn(move || {
            // A health check resets at once: not this thread's business.
            if stream.write_all(format!("{name}\n").as_bytes()).is_ok() {
                let _ = echo(stream);
            }
        });
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // The loops wake on a connection, made from inside the namespace.
        let (path, port) = (format!("/run/netns/{}", self.ns), self.port);
        let waker = thread::spawn(move || {
            let Ok(ns) = File::open(&path) else { return };
            if setns(&ns, CloneFlags::CLONE_NEWNET).is_err() {
                return;
            }
            for ip in ["127.0.0.1", "127.0.0.2"] {
                let to: SocketAddr = format!("{ip}:{port}").parse().expect("an address");
                let _ = TcpStream::connect_timeout(&to, Duration::from_secs(1));
            }
        });
        let _ = waker.join();
        for accept_loop in self.loops.drain(..) {
            let _ = accept_loop.join();
        }
    }
}

// ---------------------------------------------------------------------------
// Clients, logs and scrapes (on threads in the namespace)
// ---------------------------------------------------------------------------

/// The name of the backend a new connection through `proxy` reaches, or
/// why none did.
fn reached(ns: &Netns, proxy: SocketAddr) -> Result<String, String> {
    ns.run(move || {
        let mut stream = try_connect(proxy).map_err(|e| format!("connect: {e}"))?;
        let line = read_line(&mut stream).map_err(|e| format!("read: {e}"))?;
        match String::from_utf8(line) {
            Ok(name) if name.ends_with('\n') => Ok(name.trim_end().to_string()),
            other => Err(format!("no backend's name: {other:?}")),
        }
    })
}

/// Asks until a new connection reaches `name` (within [`SOON`]): how long
/// that took, or a failure that shows the proxy's log.
fn until_reached(ns: &Netns, proxy: &ChildProcess, at: SocketAddr, name: &str) -> Duration {
    let started = Instant::now();
    let mut last = Err(String::new());
    while started.elapsed() < SOON {
        last = reached(ns, at);
        if last.as_deref() == Ok(name) {
            return started.elapsed();
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "no connection reached {name} within {SOON:?} (last: {last:?}); the proxy said:\n{}",
        said(proxy)
    );
}

/// `GET /metrics` of the admin endpoint at `admin`, in the namespace.
fn scrape(ns: &Netns, admin: SocketAddr) -> Exposition {
    let body = ns.run(move || {
        let mut stream = try_connect(admin).expect("connect to the admin endpoint");
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: {admin}\r\n\r\n").expect("request");
        let raw = String::from_utf8(read_all(&stream).expect("the answer")).expect("UTF-8");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        body.to_string()
    });
    prometheus::parse(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Where the proxy announced `what ... listening on ADDR`.
fn announced(proxy: &ChildProcess, needle: &str) -> SocketAddr {
    let line = expect_log_within(proxy, needle, SOON);
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// The JSON access-log lines of `config`'s directory, once `enough` holds
/// of them (lines are written every 200 ms).
fn access_lines(config: &ConfigFile, enough: impl Fn(&[json::Json]) -> bool) -> Vec<json::Json> {
    let path = config.dir().join("access.log");
    let mut lines = Vec::new();
    let done = wait_until(SOON, || {
        let text = fs::read_to_string(&path).unwrap_or_default();
        lines = text
            .lines()
            .map(|l| json::parse(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        enough(&lines)
    });
    assert!(done, "not the access-log lines expected:\n{lines:#?}");
    lines
}

/// A configuration with one frontend on a port of the namespace's
/// loopback, the admin endpoint, a JSON access log, and `backends`.
fn config(test: &str, global: &str, backends: &str) -> ConfigFile {
    let config = ConfigFile::new(test, "");
    let log = config.dir().join("access.log");
    config.write(&format!(
        "global\n    admin 127.0.0.1:0\n    access-log {}\n    log-format json\n{global}\
         frontend web\n    listen 127.0.0.1:0\n{backends}",
        log.display()
    ));
    config
}

fn config_args(config: &ConfigFile) -> Vec<String> {
    vec![
        "--config".to_string(),
        config.path().display().to_string(),
        "--grace".to_string(),
        "1s".to_string(),
    ]
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

// The answer changes while a connection is open to the old address: new
// connections and checks go to the new one within a few intervals, without
// a reload; the open one relays on to its end, every byte.
#[test]
fn a_new_answer_moves_new_connections_while_an_open_one_finishes_byte_exact() {
    let Some(ns) = Netns::new("moves") else {
        return;
    };
    ns.hosts("127.0.0.1 db.test\n");
    let pair = Pair::start(&ns);
    let port = pair.port;
    let config = config(
        "resolve_moves",
        &format!("    resolve-interval {INTERVAL}\n"),
        &format!("    backend db1 db.test:{port} check inter 100ms\n"),
    );
    let proxy = ns.proxy(&config_args(&config));
    let at = proxy.frontend_addr("web").expect("the frontend's address");
    let admin = announced(&proxy, "admin listening on ");
    expect_log_within(
        &proxy,
        &format!("db.test resolves to 127.0.0.1:{port}"),
        SOON,
    );
    assert_eq!(reached(&ns, at), Ok("a".to_string()));

    // One connection to a, held open with half of its bytes sent.
    const HALF: u64 = 512 * 1024;
    let (open, reader) = ns.run(move || {
        let mut stream = try_connect(at).expect("connect");
        assert_eq!(read_line(&mut stream).expect("the name"), b"a\n");
        let reader = {
            let stream = stream.try_clone().expect("clone");
            thread::spawn(move || receive_checksum(&stream))
        };
        (stream, reader)
    });
    let mut prng = Prng::new(25);
    let mut sent = Checksum::default();
    let mut send = |stream: &mut TcpStream, len: u64| {
        let mut chunk = vec![0u8; 64 * 1024];
        for _ in 0..len / chunk.len() as u64 {
            prng.fill(&mut chunk);
            stream
                .write_all(&chunk)
                .expect("send on the open connection");
            sent.update(&chunk);
        }
    };
    let mut open = open;
    send(&mut open, HALF);

    // The name moves to b: new connections follow, without a reload.
    ns.hosts("127.0.0.2 db.test\n");
    let took = until_reached(&ns, &proxy, at, "b");
    println!("new connections reached the new address {took:?} after the change");
    expect_log_within(
        &proxy,
        &format!("db.test resolves to 127.0.0.2:{port}, no longer 127.0.0.1:{port}"),
        SOON,
    );
    for i in 0..20 {
        assert_eq!(
            reached(&ns, at),
            Ok("b".to_string()),
            "connection {i} after the move"
        );
    }

    // The open connection is still a's, and finishes byte-exact.
    send(&mut open, HALF);
    open.shutdown(Shutdown::Write).expect("FIN");
    let received = reader.join().expect("the reader").expect("the echo");
    assert_eq!(
        received,
        sent.finish(),
        "the open connection's echo, byte for byte"
    );
    assert_eq!(received.0, 2 * HALF);

    // Health checks follow the name: b is checked, a no longer is.
    let before = pair.accepted();
    assert!(
        wait_until(SOON, || pair.accepted()[1] >= before[1] + 3),
        "no check reached b: {:?} then {:?}",
        before,
        pair.accepted()
    );
    assert_eq!(pair.accepted()[0], before[0], "a is checked no more");

    // The access log shows where each connection went; the metrics, where
    // the name points now, under the labels it always had.
    let is_held = |l: &json::Json| l.get("bytes_down").whole() == 2 * HALF + 2;
    let lines = access_lines(&config, |lines| {
        lines.len() >= 23 && lines.iter().any(is_held)
    });
    let at_of = |l: &json::Json| l.get("server_addr").string().to_string();
    assert!(lines.iter().all(|l| l.get("server").string() == "db1"));
    let held = lines.iter().find(|l| is_held(l)).expect("the held line");
    assert_eq!(at_of(held), format!("127.0.0.1:{port}"));
    let to_b = lines
        .iter()
        .filter(|l| at_of(l) == format!("127.0.0.2:{port}"))
        .count();
    assert!(to_b >= 21, "{to_b} lines with b's address");
    let metrics = scrape(&ns, admin);
    let labels = |address: &str| {
        [
            ("frontend", "web"),
            ("backend", &*format!("db.test:{port}")),
            ("group", "web"),
            ("server", "db1"),
            ("address", address),
        ]
        .map(|(k, v)| (k, v.to_string()))
    };
    let now = labels(&format!("127.0.0.2:{port}"));
    let now: Vec<(&str, &str)> = now.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(metrics.value("proxy_backend_address", &now), Some(1.0));
    let samples = metrics
        .family("proxy_backend_address")
        .expect("the family")
        .samples
        .len();
    assert_eq!(
        samples, 1,
        "one series per backend: the old address's is gone"
    );
    let base = &now[..4];
    assert_eq!(
        metrics.value("proxy_backend_resolve_failures_total", base),
        Some(0.0)
    );
    assert_eq!(metrics.value("proxy_backend_up", base), Some(1.0));
    stop_cleanly(proxy);
}

/// `proxy_backend_*` labels of backend db1 at `db.test:PORT`.
fn db1(host: &str, port: u16) -> [(&'static str, String); 4] {
    [
        ("frontend", "web".to_string()),
        ("backend", format!("{host}:{port}")),
        ("group", "web".to_string()),
        ("server", "db1".to_string()),
    ]
}

fn borrowed<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

// The name stops resolving: the backend keeps its last good address, and
// the log says so once however many lookups fail; the metrics count them,
// and the dump shows them; when the name comes back, elsewhere, new
// connections follow.
#[test]
fn a_name_that_stops_resolving_keeps_its_address_and_says_so_once() {
    let Some(ns) = Netns::new("fails") else {
        return;
    };
    ns.hosts("127.0.0.1 db.test\n");
    let pair = Pair::start(&ns);
    let port = pair.port;
    let config = config(
        "resolve_fails",
        "    resolve-interval 50ms\n",
        &format!("    backend db1 db.test:{port}\n"),
    );
    let proxy = ns.proxy(&config_args(&config));
    let at = proxy.frontend_addr("web").expect("the frontend's address");
    let admin = announced(&proxy, "admin listening on ");
    assert_eq!(reached(&ns, at), Ok("a".to_string()));

    ns.hosts("");
    let line = expect_log_within(&proxy, "db.test does not resolve: ", SOON);
    let kept = format!("keeping its last good address 127.0.0.1:{port}");
    assert!(line.contains(&kept), "{line}");
    let labels = db1("db.test", port);
    let labels = borrowed(&labels);
    let failures = |m: &Exposition| m.value("proxy_backend_resolve_failures_total", &labels);
    assert!(
        wait_until(SOON, || failures(&scrape(&ns, admin)) >= Some(10.0)),
        "fewer than 10 failed lookups counted:\n{}",
        said(&proxy)
    );
    let metrics = scrape(&ns, admin);
    assert_eq!(
        metrics.value("proxy_backend_resolve_failing", &labels),
        Some(1.0)
    );
    let mut still = labels.clone();
    let address = format!("127.0.0.1:{port}");
    still.push(("address", &address));
    assert_eq!(metrics.value("proxy_backend_address", &still), Some(1.0));
    for i in 0..5 {
        assert_eq!(
            reached(&ns, at),
            Ok("a".to_string()),
            "connection {i} while failing"
        );
    }
    let lines = said(&proxy);
    assert_eq!(
        lines.matches("db.test does not resolve").count(),
        1,
        "{lines}"
    );

    proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
    let dump = expect_log_within(&proxy, "SIGQUIT: backend web/db1", SOON);
    let failing = format!("db.test at 127.0.0.1:{port}, NOT RESOLVING for ");
    assert!(
        dump.contains(&failing) && dump.contains(": keeping its last good address"),
        "{dump}"
    );

    ns.hosts("127.0.0.2 db.test\n");
    let back = expect_log_within(
        &proxy,
        &format!("db.test resolves to 127.0.0.2:{port}"),
        SOON,
    );
    assert!(back.contains("(again, after failing for "), "{back}");
    until_reached(&ns, &proxy, at, "b");
    let metrics = scrape(&ns, admin);
    assert_eq!(
        metrics.value("proxy_backend_resolve_failing", &labels),
        Some(0.0)
    );
    stop_cleanly(proxy);
}

// A name that does not resolve at all: `--check-config` and the start
// fail at its line, saying what to do; with `init-addr none` the file is
// good and the backend starts out of rotation, until the name resolves.
#[test]
fn a_name_that_never_resolved_fails_the_start_unless_init_addr_none() {
    let Some(ns) = Netns::new("never") else {
        return;
    };
    ns.hosts("127.0.0.1 other.test\n");
    let pair = Pair::start(&ns);
    let port = pair.port;
    let strict = config(
        "resolve_never",
        "",
        &format!("    backend db1 nowhere.test:{port}\n"),
    );
    let (code, out) = ns.check_config(&strict);
    assert_eq!(code, Some(2), "{out}");
    let error = format!(
        "{}:7:17: backend db1: nowhere.test does not resolve: ",
        strict.path().display()
    );
    assert!(
        out.contains(&error) && out.contains("add 'init-addr none' to its line"),
        "{out}"
    );
    let refused = ns.proxy(&config_args(&strict));
    let status = refused.wait_exit(SOON).expect("wait").expect("an exit");
    assert_eq!(status.code(), Some(2));
    let out = said(&refused);
    assert!(
        out.contains(&error) && out.contains("nothing started"),
        "{out}"
    );

    let lenient = config(
        "resolve_never_none",
        &format!("    resolve-interval {INTERVAL}\n"),
        &format!("    backend db1 nowhere.test:{port} init-addr none\n"),
    );
    let (code, out) = ns.check_config(&lenient);
    assert_eq!(code, Some(0), "{out}");
    let head = format!("backend web/db1 (nowhere.test:{port}): does not resolve (");
    let tail = "starts out of rotation until it does (init-addr none)";
    assert!(out.contains(&head) && out.contains(tail), "{out}");
    let proxy = ns.proxy(&config_args(&lenient));
    let at = proxy.frontend_addr("web").expect("the frontend's address");
    let line = expect_log_within(&proxy, "nowhere.test does not resolve: ", SOON);
    assert!(line.contains("no address yet"), "{line}");
    assert!(reached(&ns, at).is_err(), "no backend to reach yet");
    ns.hosts("127.0.0.1 nowhere.test\n");
    let found = format!("nowhere.test resolves to 127.0.0.1:{port}");
    let line = expect_log_within(&proxy, &found, SOON);
    assert!(line.contains("in rotation"), "{line}");
    until_reached(&ns, &proxy, at, "a");
    stop_cleanly(proxy);
}

// With `resolve-interval off`, names are looked up at start and at each
// reload only: a new answer waits for SIGHUP, which applies it without
// restarting anything; a reload that adds a name that does not resolve is
// refused, and the running configuration stays.
#[test]
fn with_resolve_interval_off_a_reload_looks_names_up_again() {
    let Some(ns) = Netns::new("reload") else {
        return;
    };
    ns.hosts("127.0.0.1 db.test\n");
    let pair = Pair::start(&ns);
    let port = pair.port;
    let db1 = format!("    backend db1 db.test:{port}\n");
    let config = config("resolve_reload", "    resolve-interval off\n", &db1);
    let proxy = ns.proxy(&config_args(&config));
    let at = proxy.frontend_addr("web").expect("the frontend's address");
    assert_eq!(reached(&ns, at), Ok("a".to_string()));
    ns.hosts("127.0.0.2 db.test\n");
    for i in 0..10 {
        assert_eq!(
            reached(&ns, at),
            Ok("a".to_string()),
            "connection {i}: no lookup yet"
        );
        thread::sleep(Duration::from_millis(20));
    }
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_within(&proxy, "reloaded ", SOON);
    assert_eq!(
        reached(&ns, at),
        Ok("b".to_string()),
        "looked up again by the reload"
    );

    let text = fs::read_to_string(config.path()).expect("the file");
    config.write(&format!("{text}    backend db2 gone.test:{port}\n"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let line = expect_log_within(&proxy, "backend db2: gone.test does not resolve", SOON);
    assert!(line.contains(":9:17: "), "{line}");
    expect_log_within(&proxy, "the running configuration stays", SOON);
    assert_eq!(reached(&ns, at), Ok("b".to_string()));
    stop_cleanly(proxy);
}

// The modes that look names up once (single, pool, states) and the epoll
// mode's command line: `--backend NAME:PORT` reaches the name's address at
// start; the first three never look again; a name that does not resolve
// fails the start, saying so.
#[test]
fn every_mode_takes_a_host_name_on_the_command_line() {
    let Some(ns) = Netns::new("modes") else {
        return;
    };
    ns.hosts("127.0.0.1 db.test\n");
    let pair = Pair::start(&ns);
    let port = pair.port;
    let backend = format!("db.test:{port}");
    for mode in ["single", "pool", "states", "epoll"] {
        ns.hosts("127.0.0.1 db.test\n");
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--mode",
            mode,
            "--backend",
            &backend,
        ];
        let mut args: Vec<String> = args.map(String::from).to_vec();
        if mode != "single" {
            args.extend(["--grace".to_string(), "1s".to_string()]);
        }
        let proxy = ns.proxy(&args);
        let at = announced(&proxy, "listening on ");
        assert_eq!(reached(&ns, at), Ok("a".to_string()), "{mode}");
        if mode != "epoll" {
            expect_log_within(&proxy, "db.test resolves to 127.0.0.1:", SOON);
            ns.hosts("127.0.0.2 db.test\n");
            for i in 0..5 {
                let got = reached(&ns, at);
                assert_eq!(
                    got,
                    Ok("a".to_string()),
                    "{mode}, connection {i}: looked up once"
                );
            }
        }
        stop_cleanly(proxy);
    }
    let args = ["--listen", "127.0.0.1:0", "--backend", "nowhere.test:1"].map(String::from);
    let refused = ns.proxy(&args);
    let status = refused.wait_exit(SOON).expect("wait").expect("an exit");
    assert_eq!(status.code(), Some(2));
    let out = said(&refused);
    let error = "the command line: backend nowhere.test:1: nowhere.test does not resolve: ";
    assert!(
        out.contains(error) && out.contains("nothing started"),
        "{out}"
    );
    assert!(
        !out.contains("init-addr"),
        "a command line has no line to add it to: {out}"
    );
}
