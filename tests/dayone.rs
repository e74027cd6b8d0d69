//! End to end: what an HAProxy operator configures on day one. Named
//! servers in the access log, the JSON log, the metrics and the state
//! dump; one frontend listening on 127.0.0.1 and ::1 with limits shared by
//! both; the proxy dropping root after binding a port below 1024, and still
//! reloading, upgrading and reopening its log as `nobody`; `balance first`,
//! `maxqueue`, `slowstart`, `on-marked-down shutdown-sessions`,
//! `on-marked-up shutdown-backup-sessions`, and the two connection-rate
//! limits.
//!
//! Real processes (the proxy under test, and for the privilege test the
//! new process an upgrade starts), real sockets on loopback, real bytes
//! checked end to end. Every wait is for a condition with a deadline, and
//! every process is stopped by a guard's `Drop` when an assertion fails.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, User};
use testkit::prometheus::{self, Exposition};
use tools::process::child::{self, ChildProcess};

use common::*;

/// A bound on "soon": a log line, a reload, a process that takes over.
const SOON: Duration = Duration::from_secs(15);

fn echo_fixture(count: usize) -> Fixture {
    Fixture::start(count, FixtureOptions::at_once(FixtureMode::Echo)).expect("the echo fixture")
}

fn start_with(config: &ConfigFile, extra: &[&str]) -> ChildProcess {
    let mut args = vec!["--config".to_string(), config.path().display().to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    child::proxy(proxy_exe(), &args)
        .ready(child::Ready::AtOnce, SOON)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"))
}

/// One line echoed through `addr`, then a clean close both ways.
fn echo_once(addr: SocketAddr, line: &str) -> Result<(), String> {
    let mut stream = try_connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    let back = read_all(&stream).map_err(|e| format!("receive: {e}"))?;
    match back == format!("{line}\n").as_bytes() {
        true => Ok(()),
        false => Err(format!(
            "sent {line:?}, got {:?}",
            String::from_utf8_lossy(&back)
        )),
    }
}

/// [`echo_once`] through a [`named_backend`]: its name first, then the echo.
fn echo_once_named(addr: SocketAddr, name: &str, line: &str) -> Result<(), String> {
    let mut stream = try_connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    let back = read_all(&stream).map_err(|e| format!("receive: {e}"))?;
    match back == format!("{name}\n{line}\n").as_bytes() {
        true => Ok(()),
        false => Err(format!("got {:?}", String::from_utf8_lossy(&back))),
    }
}

// ---------------------------------------------------------------------------
// Privileges
// ---------------------------------------------------------------------------

/// Uid and gid lines of /proc/PID/status: (real, effective, saved, fs).
fn ids_of(pid: u32) -> (Vec<u32>, Vec<u32>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> Vec<u32> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        line[name.len()..]
            .split_whitespace()
            .map(|n| n.parse().expect("an id"))
            .collect()
    };
    (field("Uid:"), field("Gid:"))
}

/// A port below 1024 free on 127.0.0.1 now (bound and closed again; the
/// proxy binds it a moment later).
fn low_port() -> u16 {
    (700..1000)
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port below 1024")
}

/// The pid in `SIGUSR2: started PATH as pid N ...`.
fn started_pid(line: &str) -> u32 {
    line.split(" as pid ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"))
}

/// A process started by an upgrade: SIGKILLed if the test ends first.
struct Stray(u32);

impl Drop for Stray {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0 as i32), Signal::SIGKILL);
    }
}

// The proxy started as root binds a port below 1024, then runs as nobody:
// it serves, reopens its access log (a new file, made as nobody), reloads
// its file, and upgrades (SIGUSR2: the new binary runs as nobody from the
// start and takes the listeners over the socket, which nobody owns now).
#[test]
fn started_as_root_it_binds_a_low_port_then_serves_reloads_and_upgrades_as_nobody() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: dropping privileges needs the test to run as root");
        return;
    }
    let Ok(Some(nobody)) = User::from_name("nobody") else {
        eprintln!("skipped: no user 'nobody' here");
        return;
    };
    let (uid, gid) = (nobody.uid.as_raw(), nobody.gid.as_raw());
    let echo = echo_fixture(1);
    let port = low_port();
    let config = ConfigFile::new("nobody", "");
    let dir = config.dir();
    let log = dir.join("access.log");
    let text = |extra: &str| {
        format!(
            "global\n    user nobody\n    access-log {}\nfrontend low\n    listen \
             127.0.0.1:{port}\n    backend echo1 {}\n{extra}",
            log.display(),
            echo.addrs()[0]
        )
    };
    config.write(&text(""));
    // The directory is nobody's: the upgrade's new process makes its socket
    // there, and SIGUSR1 a new access log; the file is readable by it.
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown the directory");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).expect("chmod 0700");
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o644)).expect("0644");
    let socket = dir.join("upgrade.sock");
    let args = [
        "--upgrade-socket",
        socket.to_str().expect("a path"),
        "--workers",
        "1",
        "--grace",
        "5s",
    ];
    let old = start_with(&config, &args);
    expect_log_within(&old, "running as user nobody", SOON);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
    let (uids, gids) = ids_of(old.pid());
    assert_eq!(uids, [uid; 4], "{}", said(&old));
    assert_eq!(gids, [gid; 4], "{}", said(&old));
    echo_once(addr, "as nobody").unwrap_or_else(|e| panic!("{e}\n{}", said(&old)));
    // The log file root made is nobody's now.
    assert_eq!(std::fs::metadata(&log).expect("the access log").uid(), uid);

    // SIGUSR1 after a rotation: a new file, made by nobody.
    std::fs::rename(&log, dir.join("access.log.1")).expect("rotate");
    old.signal(Signal::SIGUSR1).expect("SIGUSR1");
    expect_log_within(&old, "SIGUSR1: access log reopened", SOON);
    echo_once(addr, "after the rotation").expect("served after SIGUSR1");
    assert!(
        wait_until(SOON, || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains(" low low/echo1 "))),
        "no line in the new access log; stderr:\n{}",
        said(&old)
    );
    assert_eq!(std::fs::metadata(&log).expect("the new log").uid(), uid);

    // SIGHUP: the file read again as nobody.
    config.write(&text("    retries 1\n"));
    old.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_within(&old, "reloaded ", SOON);
    echo_once(addr, "after the reload").expect("served after SIGHUP");

    // SIGUSR2: a new process, nobody from the start, takes the low port.
    old.signal(Signal::SIGUSR2).expect("SIGUSR2");
    let new = Stray(started_pid(&expect_log_within(
        &old,
        "SIGUSR2: started ",
        SOON,
    )));
    expect_log_within(&old, "upgrade: took over from pid", SOON);
    match old.wait_exit(SOON).expect("wait for the old proxy") {
        Some(status) => assert_eq!(status.code(), Some(0), "{}", said(&old)),
        None => panic!("the old proxy still runs; stderr:\n{}", said(&old)),
    }
    let (uids, gids) = ids_of(new.0);
    assert_eq!((uids, gids), (vec![uid; 4], vec![gid; 4]));
    echo_once(addr, "through the new process").unwrap_or_else(|e| panic!("{e}\n{}", said(&old)));
    kill(Pid::from_raw(new.0 as i32), Signal::SIGTERM).expect("SIGTERM to the new process");
}

// ---------------------------------------------------------------------------
// Helpers: the admin endpoint, the access log, backends that say who they are
// ---------------------------------------------------------------------------

/// The address a log line `... listening on ADDR ...` containing `needle`
/// announces.
fn announced(proxy: &ChildProcess, needle: &str) -> SocketAddr {
    let line = expect_log_within(proxy, needle, SOON);
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// `GET /metrics` from the admin endpoint, parsed.
fn scrape(admin: SocketAddr) -> Exposition {
    let mut stream = try_connect(admin).expect("connect to the admin endpoint");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {admin}\r\n\r\n").expect("request");
    let raw = String::from_utf8(read_all(&stream).expect("the answer")).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    prometheus::parse(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The lines of the access log at `path` once one contains `needle`
/// (lines are written every 200 ms).
fn logged(path: &Path, needle: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let found = wait_until(SOON, || {
        lines = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        lines.iter().any(|l| l.contains(needle))
    });
    assert!(
        found,
        "no {needle:?} in {}:\n{}",
        path.display(),
        lines.join("\n")
    );
    lines
}

/// A backend that first says `name` on a line of its own, then echoes:
/// a client knows which backend it reached, and can hold the connection.
/// Dropping it stops accepting (new connects are refused: a check fails),
/// while the connections it has go on.
fn named_backend(name: &'static str, listener: TcpListener) -> StdBackend {
    StdBackend::serve(listener, move |mut stream: TcpStream| {
        stream.write_all(format!("{name}\n").as_bytes())?;
        echo(stream)
    })
}

fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("a backend listener")
}

/// A client through `addr` that reads the backend's name and checks one
/// echoed line; it stays open.
fn held(addr: SocketAddr) -> (TcpStream, String) {
    let mut stream = try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    let name =
        String::from_utf8(read_line(&mut stream).expect("the backend's name")).expect("UTF-8");
    stream.write_all(b"ping\n").expect("send");
    assert_eq!(read_line(&mut stream).expect("the echo"), b"ping\n");
    (stream, name.trim_end().to_string())
}

/// Whether `stream` gets nothing back within `quiet` (a client left in
/// the listen queue): its read times out.
fn unanswered(stream: &mut TcpStream, quiet: Duration) -> bool {
    stream
        .set_read_timeout(Some(quiet))
        .expect("a read timeout");
    let got = stream.read(&mut [0u8; 64]);
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("a read timeout");
    matches!(got, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// Whether the proxy cut `stream` with a reset.
fn reset(stream: &mut TcpStream) -> bool {
    let got = stream.read(&mut [0u8; 64]);
    matches!(got, Err(e) if e.kind() == ErrorKind::ConnectionReset)
}

// ---------------------------------------------------------------------------
// Named servers
// ---------------------------------------------------------------------------

// A server's name, not its address, is what the access log (tcplog and
// JSON), the metrics, the state dump, the health lines and --check-config
// call it; the address stays beside it.
#[test]
fn a_named_server_is_named_in_the_logs_the_metrics_the_dump_and_check_config() {
    let echo = echo_fixture(2);
    let dead = ClosedPort::new();
    let config = ConfigFile::new("named", "");
    let log = config.dir().join("access.log");
    let text = |format: &str| {
        format!(
            "global\n    admin 127.0.0.1:0\n    access-log {}\n    log-format {format}\n\
             frontend web\n    listen 127.0.0.1:0\n    backend db1 {} weight 100\n    \
             backend {}\n    backend gone {} check inter 100ms fall 1\n",
            log.display(),
            echo.addrs()[0],
            echo.addrs()[1],
            dead.addr()
        )
    };
    config.write(&text("tcplog"));
    let checked = child::Spawn::new("check", proxy_exe())
        .args([
            "--check-config".to_string(),
            config.path().display().to_string(),
        ])
        .stdout(child::Capture::All)
        .run(SOON)
        .expect("--check-config runs");
    let said = checked.stdout.join("\n");
    let (db1, other) = (echo.addrs()[0], echo.addrs()[1]);
    assert!(
        said.contains(&format!(
            "group web (roundrobin): db1 ({db1}), {other}, gone ({})",
            dead.addr()
        )),
        "{said}"
    );

    let proxy = start_with(&config, &["--workers", "1"]);
    let web = announced(&proxy, "frontend web listening on ");
    let admin = announced(&proxy, "admin listening on ");
    expect_log_within(
        &proxy,
        &format!("frontend web: backend gone ({}) is DOWN", dead.addr()),
        SOON,
    );
    // Weight 100 to 1: the first connections all go to db1.
    echo_once(web, "to db1").expect("served");
    let lines = logged(&log, " web web/db1 ");
    assert!(
        lines.iter().all(|l| !l.contains(&db1.to_string())),
        "{lines:?}"
    );
    let x = scrape(admin);
    let named = db1.to_string();
    let labels = [
        ("frontend", "web"),
        ("backend", named.as_str()),
        ("group", "web"),
        ("server", "db1"),
    ];
    assert_eq!(
        x.value("proxy_backend_connections_total", &labels),
        Some(1.0)
    );
    let unnamed = other.to_string();
    let labels = [
        ("frontend", "web"),
        ("backend", unnamed.as_str()),
        ("group", "web"),
        ("server", unnamed.as_str()),
    ];
    assert_eq!(x.value("proxy_backend_up", &labels), Some(1.0));
    proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
    expect_log_within(
        &proxy,
        &format!("SIGQUIT: backend web/db1 ({db1}): UP"),
        SOON,
    );
    expect_log_within(&proxy, &format!("SIGQUIT: backend web/{other}: UP"), SOON);
    expect_log_within(
        &proxy,
        &format!("SIGQUIT: backend web/gone ({}): DOWN", dead.addr()),
        SOON,
    );
    stop_cleanly(proxy);

    // JSON: the name and the address, each under its key.
    std::fs::remove_file(&log).expect("a fresh log");
    config.write(&text("json"));
    let proxy = start_with(&config, &["--workers", "1"]);
    let web = announced(&proxy, "frontend web listening on ");
    echo_once(web, "to db1 again").expect("served");
    let lines = logged(&log, "\"server\":\"db1\"");
    let line = lines
        .iter()
        .find(|l| l.contains("\"db1\""))
        .expect("the line");
    assert!(
        line.contains(&format!("\"server\":\"db1\",\"server_addr\":\"{db1}\"")),
        "{line}"
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Several listen addresses
// ---------------------------------------------------------------------------

/// Whether this host has an IPv6 loopback to listen on.
fn has_ipv6_loopback() -> bool {
    TcpListener::bind("[::1]:0").is_ok()
}

// One frontend listening on 127.0.0.1 and ::1: its maxconn counts the
// clients of both; the state dump lists both addresses; a reload that drops
// one closes it and keeps the other (and its port); a reload that adds one
// back binds it.
#[test]
fn one_frontend_on_ipv4_and_ipv6_loopback_shares_its_maxconn_and_reloads_its_addresses() {
    if !has_ipv6_loopback() {
        eprintln!("skipped: no IPv6 loopback (::1) here");
        return;
    }
    let a = named_backend("A", listener());
    let text = |listen: &str| {
        format!(
            "frontend both\n    listen {listen}\n    maxconn 2\n    backend {}\n",
            a.addr()
        )
    };
    let config = ConfigFile::new("both", &text("127.0.0.1:0 [::1]:0"));
    let proxy = start_with(&config, &["--workers", "2", "--grace", "1s"]);
    let v4 = announced(&proxy, "frontend both listening on 127.0.0.1:");
    let v6 = announced(&proxy, "frontend both listening on [::1]:");
    let (first, _) = held(v4);
    let (second, _) = held(v6);
    // maxconn 2 is reached by one client on each address: a third, on
    // either, waits in the listen queue, unserved.
    let mut third = try_connect(v4).expect("a connect the kernel completes");
    third.write_all(b"third\n").expect("send");
    assert!(
        unanswered(&mut third, Duration::from_millis(500)),
        "served over maxconn"
    );
    drop(second); // a place given back on the other address
    assert_eq!(read_line(&mut third).expect("served now"), b"A\n");
    proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
    expect_log_within(
        &proxy,
        &format!("SIGQUIT: frontend both on {v4}, {v6} (roundrobin)"),
        SOON,
    );
    drop((first, third));

    // A reload without 127.0.0.1: that address closes, ::1 stays as it was.
    config.write(&text("[::1]:0"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_within(&proxy, "reloaded ", SOON);
    assert!(
        wait_until(SOON, || TcpStream::connect_timeout(&v4, IO_TIMEOUT)
            .is_err()),
        "{v4} still accepts"
    );
    assert_eq!(held(v6).1, "A", "served on the address kept");
    // And with it again: bound anew.
    config.write(&text("[::1]:0 127.0.0.1:0"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    let lines = proxy.wait_for_logs("frontend both listening on 127.0.0.1:", 2, SOON);
    let again = lines
        .ok()
        .and_then(|l| l.last().and_then(|l| child::listening_addr(l)))
        .expect("the address bound again");
    assert_eq!(held(again).1, "A");
    assert_eq!(held(v6).1, "A");
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// balance first, maxqueue
// ---------------------------------------------------------------------------

/// The lines of the last complete state dump, after a SIGQUIT, once
/// `ready` holds for them (bounded by [`SOON`]).
fn dump_until(proxy: &ChildProcess, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut last = Vec::new();
    let found = wait_until(SOON, || {
        let before = proxy.log().len();
        proxy.signal(Signal::SIGQUIT).expect("SIGQUIT");
        let done = wait_until(SOON, || {
            proxy.log()[before..]
                .iter()
                .any(|l| l.contains("SIGQUIT: end of state"))
        });
        assert!(done, "no dump: {}", said(proxy));
        last = proxy.log()[before..]
            .iter()
            .filter(|l| l.contains("SIGQUIT: "))
            .cloned()
            .collect();
        ready(&last)
    });
    assert!(found, "the dump never showed it:\n{}", last.join("\n"));
    last
}

// `balance first`: every client goes to the first backend while it has a
// place under its maxconn, then to the next: counted for the process, over
// two workers.
#[test]
fn balance_first_fills_the_first_backend_up_to_its_maxconn_then_the_next() {
    let (a, b) = (
        named_backend("A", listener()),
        named_backend("B", listener()),
    );
    let text = format!(
        "frontend f\n    listen 127.0.0.1:0\n    balance first\n    backend a {} maxconn 2\n    \
         backend b {} maxconn 2\n",
        a.addr(),
        b.addr()
    );
    let config = ConfigFile::new("first", &text);
    let proxy = start_with(&config, &["--workers", "2", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend f listening on ");
    let mut open = Vec::new();
    let mut names = String::new();
    for _ in 0..4 {
        let (stream, name) = held(addr);
        names.push_str(&name);
        open.push(stream);
    }
    assert_eq!(names, "AABB");
    // A place freed on the first: the next client goes back there.
    drop(open.remove(0));
    assert_eq!(held(addr).1, "A");
    stop_cleanly(proxy);
}

// `maxqueue 1` on two backends of `maxconn 1`: with both full, a client
// waits in the first's queue, the next in the second's, and the one after
// is refused at once (SQ) rather than left waiting; the queued ones are
// served as places free up.
#[test]
fn maxqueue_sends_a_client_to_another_queue_then_refuses_it() {
    let (a, b) = (
        named_backend("A", listener()),
        named_backend("B", listener()),
    );
    let config = ConfigFile::new("maxqueue", "");
    let log = config.dir().join("access.log");
    config.write(&format!(
        "global\n    access-log {}\nfrontend q\n    listen 127.0.0.1:0\n    timeout queue 30s\n    \
         backend a {} maxconn 1 maxqueue 1\n    backend b {} maxconn 1 maxqueue 1\n",
        log.display(),
        a.addr(),
        b.addr()
    ));
    let proxy = start_with(&config, &["--workers", "1", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend q listening on ");
    let (first, _) = held(addr);
    let (second, _) = held(addr);
    let mut queued: Vec<TcpStream> = Vec::new();
    for n in 1..=2 {
        queued.push(try_connect(addr).expect("connect"));
        dump_until(&proxy, |dump| {
            dump.iter()
                .filter(|l| l.contains(" 1 queued (maxqueue 1)"))
                .count()
                == n
        });
    }
    let (_, refused) = open_from(None, addr, IO_TIMEOUT);
    let mut refused = refused.expect("connected, then refused");
    assert!(
        reset(&mut refused),
        "the client beyond every queue was not refused"
    );
    logged(&log, " SQ ");
    // Places freed: the queued clients are served, one by each backend.
    drop(first);
    drop(second);
    let mut names: Vec<String> = queued
        .iter_mut()
        .map(|s| String::from_utf8(read_line(s).expect("served")).expect("UTF-8"))
        .collect();
    names.sort();
    assert_eq!(names, ["A\n", "B\n"]);
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Health changes: slowstart, on-marked-down, on-marked-up
// ---------------------------------------------------------------------------

// `slowstart`: a backend back up gets a sliver of its weight at first
// (here at most a tenth for the first minute of ten), while another of the
// same weight takes the rest; the dump says where it is in its ramp.
#[test]
fn slowstart_gives_a_backend_back_up_a_sliver_of_its_weight() {
    let a_listener = listener();
    let a_addr = a_listener.local_addr().expect("an address");
    let a = named_backend("A", a_listener);
    let b = named_backend("B", listener());
    let text = format!(
        "frontend s\n    listen 127.0.0.1:0\n    backend a {a_addr} weight 100 check inter 100ms \
         fall 1 rise 1 slowstart 10m\n    backend b {} weight 100\n",
        b.addr()
    );
    let config = ConfigFile::new("slowstart", &text);
    let proxy = start_with(&config, &["--workers", "1", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend s listening on ");
    let count_a = |n: usize| (0..n).filter(|_| held(addr).1 == "A").count();
    // Up from the start: no slowstart, half each.
    assert_eq!(count_a(20), 10);
    drop(a);
    expect_log_within(&proxy, &format!("backend a ({a_addr}) is DOWN"), SOON);
    let _a = named_backend(
        "A",
        TcpListener::bind(a_addr).expect("A back on its address"),
    );
    expect_log_within(&proxy, &format!("backend a ({a_addr}) is UP"), SOON);
    let to_a = count_a(40);
    assert!(to_a <= 4, "{to_a} of 40 to a backend in its slowstart");
    let dump = dump_until(&proxy, |d| d.iter().any(|l| l.contains("UP (slowstart: ")));
    assert!(
        dump.iter()
            .any(|l| l.contains(&format!("backend s/a ({a_addr}): UP (slowstart: "))),
        "{dump:?}"
    );
    stop_cleanly(proxy);
}

// `on-marked-down shutdown-sessions`: a backend marked down has its open
// connections cut (reset, logged DD), not another backend's.
#[test]
fn on_marked_down_shutdown_sessions_cuts_the_connections_of_the_backend_marked_down() {
    let a = named_backend("A", listener());
    let b = named_backend("B", listener());
    let config = ConfigFile::new("marked-down", "");
    let log = config.dir().join("access.log");
    config.write(&format!(
        "global\n    access-log {}\nfrontend d\n    listen 127.0.0.1:0\n    balance first\n    \
         backend a {} maxconn 1 check inter 100ms fall 1 on-marked-down shutdown-sessions\n    \
         backend b {}\n",
        log.display(),
        a.addr(),
        b.addr()
    ));
    let proxy = start_with(&config, &["--workers", "2", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend d listening on ");
    let (mut on_a, name) = held(addr);
    assert_eq!(name, "A");
    let (mut on_b, name) = held(addr);
    assert_eq!(name, "B");
    // A stops accepting (its open connection would go on): its check fails.
    drop(a);
    expect_log_within(
        &proxy,
        "cutting its connections (on-marked-down shutdown-sessions)",
        SOON,
    );
    assert!(
        reset(&mut on_a),
        "the connection to the backend marked down was not cut"
    );
    logged(&log, " d d/a ");
    assert!(
        logged(&log, " DD ")
            .iter()
            .any(|l| l.contains(" d d/a ") && l.contains(" DD "))
    );
    on_b.write_all(b"still\n").expect("send");
    assert_eq!(read_line(&mut on_b).expect("the other goes on"), b"still\n");
    stop_cleanly(proxy);
}

// `on-marked-up shutdown-backup-sessions`: while the normal backend is
// down its clients go to the backup; once it is back, the backup's
// connections are cut, and new clients go to it.
#[test]
fn on_marked_up_shutdown_backup_sessions_cuts_the_backups_when_the_backend_returns() {
    let normal = ClosedPort::new();
    let backup = named_backend("B", listener());
    let text = format!(
        "frontend u\n    listen 127.0.0.1:0\n    backend main {} check inter 100ms fall 1 rise 1 \
         on-marked-up shutdown-backup-sessions\n    backend spare {} backup\n",
        normal.addr(),
        backup.addr()
    );
    let config = ConfigFile::new("marked-up", &text);
    let proxy = start_with(&config, &["--workers", "1", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend u listening on ");
    expect_log_within(&proxy, "backend main (", SOON);
    expect_log_within(&proxy, ") is DOWN", SOON);
    let (mut on_spare, name) = held(addr);
    assert_eq!(name, "B");
    let _main = named_backend("A", normal.listen());
    expect_log_within(&proxy, "(on-marked-up shutdown-backup-sessions)", SOON);
    assert!(reset(&mut on_spare), "the backup's connection was not cut");
    assert_eq!(held(addr).1, "A");
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// Connection-rate limits
// ---------------------------------------------------------------------------

/// The accept time of an access-log line, in milliseconds of its day.
fn accepted_ms(line: &str) -> u64 {
    let time = line
        .split('[')
        .nth(1)
        .and_then(|t| t.split(']').next())
        .unwrap_or_else(|| panic!("no time in {line}"));
    // dd/Mon/yyyy:hh:mm:ss.mmm
    let clock = &time[12..];
    let parts: Vec<u64> = clock
        .split([':', '.'])
        .map(|n| n.parse().expect("a number"))
        .collect();
    ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1000 + parts[3]
}

// `rate-limit sessions 5`: fifteen clients at once, over two workers, are
// all served, but accepted no faster than the rate: five at once (an idle
// frontend's burst), then one every 200 ms, so the last is accepted at
// least 1.6 s after the first (a lower bound: a slow machine only spreads
// them further).
#[test]
fn rate_limit_sessions_paces_the_accepts_of_every_worker_and_refuses_none() {
    let a = named_backend("A", listener());
    let config = ConfigFile::new("rate", "");
    let log = config.dir().join("access.log");
    config.write(&format!(
        "global\n    access-log {}\nfrontend r\n    listen 127.0.0.1:0\n    rate-limit sessions 5\n    \
         backend {}\n",
        log.display(),
        a.addr()
    ));
    let proxy = start_with(&config, &["--workers", "2", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend r listening on ");
    let served = std::thread::scope(|s| {
        let clients: Vec<_> = (0..15)
            .map(|_| s.spawn(move || echo_once_named(addr, "A", "paced")))
            .collect();
        clients
            .into_iter()
            .map(|c| c.join())
            .filter(|outcome| matches!(outcome, Ok(Ok(()))))
            .count()
    });
    assert_eq!(served, 15, "{}", said(&proxy));
    let lines = logged(&log, " r r/");
    let mut times: Vec<u64> = Vec::new();
    assert!(
        wait_until(SOON, || {
            times = logged(&log, " r r/")
                .iter()
                .map(|l| accepted_ms(l))
                .collect();
            times.len() == 15
        }),
        "{lines:?}"
    );
    times.sort_unstable();
    assert!(
        times[14] - times[0] >= 1600,
        "accepted over {} ms: {times:?}",
        times[14] - times[0]
    );
    stop_cleanly(proxy);
}

// `rate-limit-per-source 3 10s`: a client address makes three connections
// in the period, the fourth is refused (PR, counted as denied); another
// address has its own count.
#[test]
fn rate_limit_per_source_refuses_a_source_beyond_its_rate_and_no_other() {
    let a = named_backend("A", listener());
    let config = ConfigFile::new("source-rate", "");
    let log = config.dir().join("access.log");
    config.write(&format!(
        "global\n    access-log {}\n    admin 127.0.0.1:0\nfrontend p\n    listen 127.0.0.1:0\n    \
         rate-limit-per-source 3 10s\n    backend {}\n",
        log.display(),
        a.addr()
    ));
    let proxy = start_with(&config, &["--workers", "2", "--grace", "1s"]);
    let addr = announced(&proxy, "frontend p listening on ");
    let admin = announced(&proxy, "admin listening on ");
    let from = |source: [u8; 4]| {
        let (_, stream) = open_from(Some(source.into()), addr, IO_TIMEOUT);
        let mut stream = stream.map_err(|e| e.kind())?;
        read_line(&mut stream).map_err(|e| e.kind())
    };
    for _ in 0..3 {
        assert_eq!(from([127, 0, 0, 2]), Ok(b"A\n".to_vec()));
    }
    assert_eq!(from([127, 0, 0, 2]), Err(ErrorKind::ConnectionReset));
    assert_eq!(from([127, 0, 0, 3]), Ok(b"A\n".to_vec()), "another source");
    logged(&log, " PR ");
    let x = scrape(admin);
    assert_eq!(
        x.value("proxy_frontend_denied_total", &[("frontend", "p")]),
        Some(1.0)
    );
    stop_cleanly(proxy);
}

// An upgrade hands every listen address of a frontend over: the new
// process (SIGUSR2) serves on both, on the same ports.
#[test]
fn an_upgrade_hands_over_every_listen_address_of_a_frontend() {
    if !has_ipv6_loopback() {
        eprintln!("skipped: no IPv6 loopback (::1) here");
        return;
    }
    let a = named_backend("A", listener());
    let config = ConfigFile::new(
        "upgrade-both",
        &format!(
            "frontend both\n    listen 127.0.0.1:0 [::1]:0\n    backend {}\n",
            a.addr()
        ),
    );
    std::fs::set_permissions(config.dir(), std::fs::Permissions::from_mode(0o700)).expect("0700");
    let socket = config.dir().join("upgrade.sock");
    let socket = socket.to_str().expect("a path");
    let old = start_with(
        &config,
        &[
            "--upgrade-socket",
            socket,
            "--workers",
            "2",
            "--grace",
            "5s",
        ],
    );
    let v4 = announced(&old, "frontend both listening on 127.0.0.1:");
    let v6 = announced(&old, "frontend both listening on [::1]:");
    expect_log_within(&old, "upgrade socket ", SOON);
    old.signal(Signal::SIGUSR2).expect("SIGUSR2");
    let new = Stray(started_pid(&expect_log_within(
        &old,
        "SIGUSR2: started ",
        SOON,
    )));
    expect_log_within(&old, "upgrade: took over from pid", SOON);
    match old.wait_exit(SOON).expect("wait for the old proxy") {
        Some(status) => assert_eq!(status.code(), Some(0), "{}", said(&old)),
        None => panic!("the old proxy still runs; stderr:\n{}", said(&old)),
    }
    // The new process writes to the old one's stderr, which it inherited:
    // it took both sockets (one per worker) of each address.
    let log = said(&old);
    for configured in ["127.0.0.1:0", "[::1]:0"] {
        let took = format!("frontend both takes 2 handed socket(s) over for {configured}");
        assert!(log.contains(&took), "{took:?} not in:\n{log}");
    }
    for addr in [v4, v6] {
        assert_eq!(held(addr).1, "A", "{addr} after the upgrade");
    }
    kill(Pid::from_raw(new.0 as i32), Signal::SIGTERM).expect("SIGTERM to the new process");
}
