//! The views and the stats page, end to end: a real proxy with real
//! backends and traffic, its `/stats.json` read back, and its `/stats` page
//! driven in a real headless browser (Debian's `chromium` through its
//! `chromedriver`, spoken to by hand: `testkit::webdriver`).
//!
//! - the page shows every frontend, group and server with its state, sorts
//!   by a click on a column, and shows a server down once it is killed;
//! - totals and health last: a reload that changes a frontend (only its
//!   `timeout connect`) and an upgrade to a new binary (SIGUSR2) go on from the old
//!   totals (7 sessions, 20 more: 27), and a server known down (a
//!   blackholed one, whose check takes 1.5 s to fail) never reads up again.
//!
//! The page's test is skipped, saying so, where `chromium` or
//! `chromedriver` is missing (`.ci/run` installs both). With
//! `STATS_PAGE_PNG=path` it also saves a screenshot there, once the chart
//! has a few seconds of traffic (docs/stats-page.png is made that way).

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use testkit::json::{self, Json};
use testkit::webdriver::{self, Session};
use tools::process::child::{self, ChildProcess, Ready, Spawn};

/// A bound on "soon": a log line, a state, an exit.
const SOON: Duration = Duration::from_secs(20);
/// How long a blackholed server's check takes to fail: a state kept
/// across a reload must hold at least that long after it.
const CHECK_TIMEOUT: &str = "1500ms";

// ---------------------------------------------------------------------------
// The views, read back
// ---------------------------------------------------------------------------

/// `GET path` on the admin endpoint: its body, which must be a 200.
fn get(admin: SocketAddr, path: &str) -> String {
    let (status, body) = webdriver::request(admin, "GET", path, None)
        .unwrap_or_else(|e| panic!("GET {path} on {admin}: {e}"));
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// The rows of `/stats.json`.
fn rows(admin: SocketAddr) -> Vec<Json> {
    let body = get(admin, "/stats.json");
    match json::parse(&body).unwrap_or_else(|e| panic!("/stats.json: {e}: {body}")) {
        Json::Object(mut fields) => match fields.remove(0) {
            (key, Json::Array(rows)) if key == "rows" => rows,
            other => panic!("/stats.json: {other:?}"),
        },
        other => panic!("/stats.json: {other:?}"),
    }
}

/// The row of `frontend`'s `svname`.
fn row(rows: &[Json], frontend: &str, svname: &str) -> Json {
    rows.iter()
        .find(|r| r.get("frontend").string() == frontend && r.get("svname").string() == svname)
        .unwrap_or_else(|| panic!("no row {frontend}/{svname} in {rows:?}"))
        .clone()
}

/// Reads the rows until `condition` holds of them, within [`SOON`].
fn rows_until(admin: SocketAddr, what: &str, condition: impl Fn(&[Json]) -> bool) -> Vec<Json> {
    let mut last = Vec::new();
    let held = common::wait_until(SOON, || {
        last = rows(admin);
        condition(&last)
    });
    assert!(held, "not {what} within {SOON:?}: {last:?}");
    last
}

/// A number of a row.
fn n(row: &Json, field: &str) -> u64 {
    row.get(field).whole()
}

/// `count` clients through `frontend`, each answered by the server at
/// `port`; then waits until none is open and the frontend has `total`.
fn clients(admin: SocketAddr, frontend: SocketAddr, port: u16, count: usize, total: u64) {
    for _ in 0..count {
        assert_eq!(which_backend(frontend), port, "a client went elsewhere");
    }
    rows_until(admin, "every client counted", |rows| {
        let f = row(rows, "web", "FRONTEND");
        n(&f, "scur") == 0 && n(&f, "stot") == total && n(&row(rows, "web", "a"), "stot") == total
    });
}

// ---------------------------------------------------------------------------
// Totals and health across a reload and an upgrade
// ---------------------------------------------------------------------------

/// One frontend `web`: server `a` answering, server `b` blackholed and
/// checked (fall 1: its first check's timeout takes it down).
fn lasting_config(a: SocketAddr, b: SocketAddr, connect: &str) -> String {
    format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend web\n    listen 127.0.0.1:0\n    timeout connect {connect}\n    \
         backend a {a}\n    \
         backend b {b} check inter 300ms fall 1 rise 2 timeout {CHECK_TIMEOUT}\n"
    )
}

/// The proxy on the configuration file `config`, with a second's grace at
/// its stop.
fn proxy_on(config: &Path) -> ChildProcess {
    let args = ["--config", &config.display().to_string(), "--grace", "1s"].map(String::from);
    child::proxy(proxy_exe(), &args)
        .start()
        .expect("start the proxy")
}

fn admin_addr(proxy: &ChildProcess) -> SocketAddr {
    let line = expect_log_within(proxy, "admin listening on ", SOON);
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

fn web_addr(proxy: &ChildProcess) -> SocketAddr {
    let line = expect_log_within(proxy, "frontend web listening on ", SOON);
    child::listening_addr(&line).unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// Reads the rows for `hold` from now: server `b` must read down in every
/// one (a state kept, not found again by a check).
fn b_stays_down(admin: SocketAddr, hold: Duration) -> usize {
    let until = Instant::now() + hold;
    let mut reads = 0;
    while Instant::now() < until {
        let rows = rows(admin);
        let b = row(&rows, "web", "b");
        assert_eq!(b.get("state").string(), "down", "b read up again: {b:?}");
        reads += 1;
        thread::sleep(Duration::from_millis(20));
    }
    reads
}

/// Totals before and after: the frontend's and server a's.
fn totals(admin: SocketAddr) -> (u64, u64, u64) {
    let rows = rows(admin);
    let (f, a) = (row(&rows, "web", "FRONTEND"), row(&rows, "web", "a"));
    (n(&f, "stot"), n(&a, "stot"), n(&f, "bin"))
}

#[test]
fn totals_and_health_last_across_a_reload() {
    let backend = start_backend(1, &[]);
    let a = backend.addr();
    let (hole, _fillers) = unanswering_backend();
    let b = hole.local_addr().expect("the blackhole's address");
    let config = ConfigFile::new("reload", &lasting_config(a, b, "1s"));
    let proxy = proxy_on(config.path());
    let (admin, web) = (admin_addr(&proxy), web_addr(&proxy));
    rows_until(admin, "b down", |r| {
        row(r, "web", "b").get("state").string() == "down"
    });
    clients(admin, web, a.port(), 7, 7);
    let before = totals(admin);

    config.write(&lasting_config(a, b, "2s"));
    proxy.signal(Signal::SIGHUP).expect("SIGHUP");
    expect_log_within(&proxy, "reloaded ", SOON);
    let reads = b_stays_down(admin, Duration::from_millis(2500));
    let log = expect_log_within(&proxy, "as it was before the reload", SOON);
    assert!(log.contains("backend b") && log.contains("DOWN"), "{log}");
    clients(admin, web, a.port(), 20, 27);
    let after = totals(admin);
    eprintln!(
        "reload: (frontend stot, a stot, frontend bin) {before:?} -> {after:?}; b read down {reads} times"
    );
    assert_eq!((after.0, after.1), (27, 27));
    assert!(after.2 > before.2, "bytes go on from where they were");
    stop_cleanly(proxy);
}

#[test]
fn totals_and_health_last_across_an_upgrade() {
    let backend = start_backend(1, &[]);
    let a = backend.addr();
    let (hole, _fillers) = unanswering_backend();
    let b = hole.local_addr().expect("the blackhole's address");
    let config = ConfigFile::new("upgrade", &lasting_config(a, b, "1s"));
    let socket = config.dir().join("upgrade.sock");
    let mut args = vec!["--config".to_string(), config.path().display().to_string()];
    args.extend(["--upgrade-socket".into(), socket.display().to_string()]);
    args.extend(["--grace".into(), "5s".into()]);
    let old = child::proxy(proxy_exe(), &args)
        .start()
        .expect("start the proxy");
    expect_log_within(&old, "upgrade socket ", SOON);
    let (admin, web) = (admin_addr(&old), web_addr(&old));
    rows_until(admin, "b down", |r| {
        row(r, "web", "b").get("state").string() == "down"
    });
    clients(admin, web, a.port(), 7, 7);
    let before = totals(admin);

    // SIGUSR2: the old process starts the new binary, which takes the
    // listeners (the admin's too) and the totals and health with them. The
    // new one writes to the old one's stderr, which it inherited.
    old.signal(Signal::SIGUSR2).expect("SIGUSR2");
    let started = expect_log_within(&old, "SIGUSR2: started ", SOON);
    let pid: i32 = started
        .split(" as pid ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {started:?}"));
    let new = Stray(nix::unistd::Pid::from_raw(pid));
    expect_log_within(&old, "upgrade: took over from pid", SOON);
    let kept = expect_log_within(&old, "is DOWN: as the previous process left it", SOON);
    assert!(
        kept.contains(&format!("({pid})")) && kept.contains("backend b"),
        "{kept}"
    );
    let exit = old.wait_exit(SOON).expect("wait for the old proxy");
    assert!(
        exit.is_some_and(|s| s.success()),
        "{exit:?}: {}",
        said(&old)
    );
    let reads = b_stays_down(admin, Duration::from_millis(2500));
    clients(admin, web, a.port(), 20, 27);
    let after = totals(admin);
    eprintln!(
        "upgrade: (frontend stot, a stot, frontend bin) {before:?} -> {after:?}; b read down \
         {reads} times"
    );
    assert_eq!((after.0, after.1), (27, 27));
    assert!(after.2 > before.2, "bytes go on from where they were");
    nix::sys::signal::kill(new.0, Signal::SIGTERM).expect("SIGTERM to the new process");
    assert!(
        wait_until(SOON, || ended(new.0)),
        "pid {pid} still runs after SIGTERM"
    );
}

// ---------------------------------------------------------------------------
// The page, in a headless browser
// ---------------------------------------------------------------------------

/// The first of `names` found as an executable in PATH or /usr/bin.
fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/bin"),
            PathBuf::from("/usr/lib/chromium"),
        ])
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// A free loopback port, for a program that takes a port but not 0.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Steady traffic through `to` until dropped.
struct Traffic {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(to: Vec<SocketAddr>) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            let mut i = 0usize;
            while !flag.load(Ordering::Relaxed) && Instant::now() < until {
                let _ = ask_backend(to[i % to.len()]);
                i += 1;
                // Paced: a rate that moves, not the most the machine can.
                thread::sleep(Duration::from_millis(10 + (i % 7) as u64 * 5));
            }
        });
        Traffic {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the page shows: each row's key, its classes and its state's text.
const SHOWN: &str = "return Array.from(document.querySelectorAll('#rows tr')).map(tr => \
    [tr.dataset.key, tr.className, tr.querySelector('td.state').textContent, \
     tr.querySelectorAll('svg.spark polyline').length]);";

/// The page's rows: (key, classes, state), until `condition` holds.
fn shown_until(
    session: &Session,
    what: &str,
    condition: impl Fn(&[(String, String, String, u64)]) -> bool,
) -> Vec<(String, String, String, u64)> {
    let mut last = Vec::new();
    let held = common::wait_until(SOON, || {
        last = shown(session);
        condition(&last)
    });
    assert!(
        held,
        "the page did not show {what} within {SOON:?}: {last:?}"
    );
    last
}

/// The page's rows now: (key, classes, state, chart lines).
fn shown(session: &Session) -> Vec<(String, String, String, u64)> {
    let value = session.run(SHOWN).unwrap_or_else(|e| panic!("{e}"));
    let Json::Array(rows) = value else {
        panic!("the page's rows: {value:?}");
    };
    rows.iter()
        .map(|r| match r {
            Json::Array(f) => (
                f[0].string().to_string(),
                f[1].string().to_string(),
                f[2].string().to_string(),
                f[3].whole(),
            ),
            other => panic!("a row: {other:?}"),
        })
        .collect()
}

fn state_of<'a>(rows: &'a [(String, String, String, u64)], key: &str) -> Option<&'a str> {
    rows.iter().find(|r| r.0 == key).map(|r| r.2.as_str())
}

fn page_config(s1: SocketAddr, s2: SocketAddr, s3: SocketAddr) -> String {
    let check = "check inter 200ms fall 1 rise 1 timeout 500ms";
    format!(
        "global\n    workers 2\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend web\n    listen 127.0.0.1:0\n    retries 1\n    \
         backend s1 {s1} {check}\n    backend s2 {s2} {check}\n\
         frontend db\n    listen 127.0.0.1:0\n    backend primary {s3}\n"
    )
}

#[test]
fn the_page_shows_rows_states_sorts_and_a_server_going_down() {
    let (Some(chromium), Some(driver)) = (
        find(&["chromium", "chromium-browser"]),
        find(&["chromedriver"]),
    ) else {
        eprintln!(
            "skipped: chromium or chromedriver not found (apt-get install chromium \
             chromium-driver; .ci/run does)"
        );
        return;
    };
    let started = Instant::now();
    let (b1, b2, b3) = (
        start_backend(1, &[]),
        start_backend(1, &[]),
        start_backend(1, &[]),
    );
    let dir = TestDir::new("page");
    let conf = dir.file("lb.conf");
    std::fs::write(&conf, page_config(b1.addr(), b2.addr(), b3.addr())).expect("write");
    let proxy = proxy_on(&conf);
    let admin = admin_addr(&proxy);
    let web = web_addr(&proxy);
    let db = child::listening_addr(&expect_log_within(
        &proxy,
        "frontend db listening on ",
        SOON,
    ))
    .expect("db's address");
    let _traffic = Traffic::start(vec![web, web, db]);

    let port = free_port();
    let driver_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let _driver = Spawn::new("chromedriver", &driver)
        .args([format!("--port={port}")])
        .ready(Ready::Accepting(driver_addr), SOON)
        .start()
        .unwrap_or_else(|e| panic!("start {}: {e}", driver.display()));
    let driver_up = started.elapsed();
    let chromium = chromium.display().to_string();
    let browser_args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1500,560",
    ];
    let session = Session::chromium(driver_addr, &chromium, &browser_args)
        .unwrap_or_else(|e| panic!("a browser session: {e}"));
    let session_up = started.elapsed();
    session
        .open(&format!("http://{admin}/stats"))
        .unwrap_or_else(|e| panic!("{e}"));
    let keys = [
        "web/web/FRONTEND",
        "web/web/BACKEND",
        "web/web/s1",
        "web/web/s2",
        "db/db/FRONTEND",
        "db/db/BACKEND",
        "db/db/primary",
    ];
    let rows = shown_until(&session, "every row, servers up", |rows| {
        keys.iter().all(|k| state_of(rows, k).is_some())
            && ["web/web/s1", "web/web/s2"]
                .iter()
                .all(|k| state_of(rows, k) == Some("up"))
    });
    let first_rows = started.elapsed();
    assert_eq!(state_of(&rows, "web/web/FRONTEND"), Some("open"));
    assert_eq!(state_of(&rows, "db/db/primary"), Some("up"));
    assert!(
        rows.iter().all(|r| r.1.contains(&format!("state-{}", r.2))),
        "{rows:?}"
    );

    sorts_by_a_click(&session, admin);

    drop(b2);
    let killed = Instant::now();
    let rows = shown_until(&session, "s2 down", |rows| {
        state_of(rows, "web/web/s2") == Some("down")
    });
    let seen_down = killed.elapsed();
    let s2 = rows.iter().find(|r| r.0 == "web/web/s2").expect("s2");
    assert!(s2.1.contains("state-down"), "{s2:?}");
    assert_eq!(state_of(&rows, "web/web/s1"), Some("up"));
    assert_eq!(
        state_of(&rows, "web/web/BACKEND"),
        Some("up"),
        "s1 still serves"
    );
    eprintln!(
        "page: chromedriver up {driver_up:?}, browser session {session_up:?}, first rows \
         {first_rows:?} (from the test's start); s2 shown down {seen_down:?} after its kill; \
         total {:?}",
        started.elapsed()
    );
    if let Some(png) = std::env::var_os("STATS_PAGE_PNG") {
        // Opened again: in the order of the JSON, not as the clicks left it.
        session
            .open(&format!("http://{admin}/stats"))
            .unwrap_or_else(|e| panic!("{e}"));
        shown_until(&session, "s2 down", |rows| {
            state_of(rows, "web/web/s2") == Some("down")
        });
        screenshot(&session, Path::new(&png));
    }
    drop(session);
    stop_cleanly(proxy);
}

/// A click on the "total" column sorts the rows by it (ascending, then
/// descending on a second click), as the JSON's `stot` orders them.
fn sorts_by_a_click(session: &Session, admin: SocketAddr) {
    let column = "#head th:nth-child(7)";
    let title = session
        .run(&format!(
            "return document.querySelector('{column}').textContent;"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(title.string(), "total");
    let totals = "return Array.from(document.querySelectorAll('#rows tr td:nth-child(7)')).map(td => Number(td.textContent));";
    for (click, ascending) in [(1, true), (2, false)] {
        session
            .click(column)
            .unwrap_or_else(|e| panic!("click {click}: {e}"));
        let Json::Array(values) = session.run(totals).unwrap_or_else(|e| panic!("{e}")) else {
            panic!("the totals");
        };
        let values: Vec<u64> = values.iter().map(Json::whole).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        if !ascending {
            sorted.reverse();
        }
        assert_eq!(values, sorted, "click {click} on total");
        assert_eq!(values.len(), rows(admin).len());
    }
}

/// Waits until the charts have 40 seconds of history, then saves the page
/// as a PNG at `path`.
fn screenshot(session: &Session, path: &Path) {
    let history = "return Math.max(...Array.from(document.querySelectorAll('svg.spark polyline')).map(p => p.getAttribute('points').split(' ').length));";
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let points = session.run(history).map(|v| v.number()).unwrap_or(0.0);
        if points >= 40.0 {
            break;
        }
        thread::sleep(Duration::from_millis(500));
    }
    let png = session.screenshot().unwrap_or_else(|e| panic!("{e}"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    std::fs::write(path, &png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!(
        "page: screenshot of {} bytes at {}",
        png.len(),
        path.display()
    );
}

// ---------------------------------------------------------------------------
// The views under junk
// ---------------------------------------------------------------------------

#[test]
fn the_views_answer_while_junk_holds_the_admin_endpoint() {
    use std::io::Write as _;
    let backend = start_backend(1, &[]);
    let dir = TestDir::new("junk");
    let conf = dir.file("lb.conf");
    let text = format!(
        "global\n    admin 127.0.0.1:0\n    timeout admin-request 1m\n    access-log off\n\
         frontend web\n    listen 127.0.0.1:0\n    backend a {}\n",
        backend.addr()
    );
    std::fs::write(&conf, text).expect("write");
    let proxy = proxy_on(&conf);
    let (admin, web) = (admin_addr(&proxy), web_addr(&proxy));
    clients(admin, web, backend.addr().port(), 3, 3);
    // Every place taken by a client that sent half a request line and
    // waits (the request deadline is a minute), and more behind them.
    let mut junk = Vec::new();
    for i in 0..80 {
        let mut stream = connect(admin);
        let _ = stream.write_all(if i % 2 == 0 { b"GET /st" } else { b"G" });
        junk.push(stream);
    }
    let started = Instant::now();
    const ROUNDS: usize = 50;
    for _ in 0..ROUNDS {
        let rows = rows(admin);
        assert_eq!(n(&row(&rows, "web", "FRONTEND"), "stot"), 3);
        let csv = get(admin, "/stats.csv");
        assert!(csv.starts_with("# pxname,svname,"), "{csv}");
        assert_eq!(csv.lines().count(), 4, "a header and three rows: {csv}");
    }
    let took = started.elapsed();
    eprintln!(
        "junk: {ROUNDS} rounds of /stats.json + /stats.csv with {} junk connections open: {took:?} \
         ({:?} a round)",
        junk.len(),
        took / ROUNDS as u32
    );
    // Junk as a request: answered, and the views go on.
    for (request, status) in [
        (&b"\x16\x03\x01\x00\xa5\x01\x00\x00"[..], 400),
        (&b"GET /stats.json HTTP/1.1\r\nHost: x\r\nX: "[..], 431),
    ] {
        let mut stream = connect(admin);
        let mut bytes = request.to_vec();
        if status == 431 {
            bytes.resize(9 * 1024, b'a');
        }
        let _ = stream.write_all(&bytes);
        let answer = String::from_utf8_lossy(&read_all(&stream).unwrap_or_default()).into_owned();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{answer:?}"
        );
    }
    assert_eq!(rows(admin).len(), 3);
    drop(junk);
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// The counters the views added: queue, peaks, retries, redispatches
// ---------------------------------------------------------------------------

/// Writes `byte` and reads it back through an echo: the relay is up.
fn echoed(stream: &mut std::net::TcpStream, byte: u8) -> bool {
    use std::io::{Read as _, Write as _};
    let mut got = [0u8; 1];
    stream.write_all(&[byte]).is_ok() && stream.read_exact(&mut got).is_ok() && got[0] == byte
}

#[test]
fn a_queued_client_a_peak_and_a_redispatch_show_in_their_rows() {
    let live = StdBackend::start(echo);
    let dead = ClosedPort::new();
    let dir = TestDir::new("queue");
    let conf = dir.file("lb.conf");
    let text = format!(
        "global\n    workers 1\n    admin 127.0.0.1:0\n    access-log off\n\
         frontend web\n    listen 127.0.0.1:0\n    retries 1\n    timeout queue 30s\n    \
         backend dead {}\n    backend live {} maxconn 1\n",
        dead.addr(),
        live.addr()
    );
    std::fs::write(&conf, text).expect("write");
    let proxy = proxy_on(&conf);
    let (admin, web) = (admin_addr(&proxy), web_addr(&proxy));
    // Two clients: each is sent to `dead` first or second, and reaches
    // `live` on its retry if not at once; the first holds live's one place.
    let mut first = connect(web);
    assert!(echoed(&mut first, b'1'), "the first client is relayed");
    let mut second = connect(web);
    use std::io::Write as _;
    second.write_all(b"2").expect("the second client's byte");
    let rows = rows_until(admin, "the second client queued", |rows| {
        n(&row(rows, "web", "live"), "qcur") == 1
    });
    let group = row(&rows, "web", "BACKEND");
    assert_eq!((n(&group, "qcur"), n(&group, "scur")), (1, 1), "{group:?}");
    drop(first);
    let mut got = [0u8; 1];
    std::io::Read::read_exact(&mut second, &mut got).expect("served once the place is free");
    assert_eq!(&got, b"2");
    let rows = rows_until(admin, "the queue empty", |rows| {
        n(&row(rows, "web", "live"), "qcur") == 0
    });
    let (l, d) = (row(&rows, "web", "live"), row(&rows, "web", "dead"));
    eprintln!("queue: live {l:?}\n       dead {d:?}");
    assert_eq!(
        (n(&l, "qmax"), n(&l, "smax"), n(&l, "stot")),
        (1, 1, 2),
        "{l:?}"
    );
    // Round-robin sent at least one of the two clients to `dead` first.
    assert!(
        n(&d, "econ") >= 1 && n(&d, "wredis") == n(&d, "econ"),
        "{d:?}"
    );
    assert_eq!(
        n(&l, "wretr"),
        n(&d, "wredis"),
        "each redispatch a retry on live"
    );
    let f = row(&rows, "web", "FRONTEND");
    assert_eq!(
        (n(&f, "wretr"), n(&f, "smax")),
        (n(&l, "wretr"), 2),
        "{f:?}"
    );
    drop(second);
    stop_cleanly(proxy);
}
