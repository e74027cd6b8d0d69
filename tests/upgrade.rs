//! End to end: the listeners handed over to a new process
//! (ops/upgrade/), under load.
//!
//! Every test here runs a proxy with an upgrade socket, puts load on it
//! (clients that each send a pseudo-random payload through it to an echo
//! backend and check what comes back, byte for byte), and replaces the
//! proxy by a new process of the same binary started with
//! `--upgrade-from`, three times in a row: not one client may be refused,
//! reset or answered wrongly, and the connections open across each
//! handover (held by the old process while it drains) must finish
//! byte-exact. Variants: one worker, two, a configuration and a worker
//! count that change between upgrades; clients waiting in the listen
//! queues of a full proxy; a new process that fails (a bad file, a port in
//! use) leaves the old one serving; a process of another user is refused
//! (when the tests run as root); SIGUSR2 does the same as the flag.
//!
//! Real processes, real sockets on 127.0.0.1, the in-process fixture as the
//! backends. Every loop is bounded in count and time, every wait is for a
//! condition with a deadline, and every process is stopped by a guard's
//! `Drop` when an assertion fails half-way.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tools::process::child::{self, ChildProcess};

use common::*;

/// Clients of the steady load.
const CLIENTS: usize = 50;
/// Connections opened before each handover and held open across it.
const HELD: usize = 6;
/// A bound on "soon": a log line, a process that takes over, an exit.
const SOON: Duration = Duration::from_secs(15);
/// The grace of every proxy here: far longer than any test, so that a
/// drain that ends is one whose connections finished, never one cut.
const GRACE: &str = "60s";

// ---------------------------------------------------------------------------
// The proxies
// ---------------------------------------------------------------------------

/// A `frontend` section with `backends`, plus `extra` lines.
fn frontend(name: &str, backends: &[SocketAddr], extra: &str) -> String {
    let mut text = format!("frontend {name}\n    listen 127.0.0.1:0\n");
    for backend in backends {
        text.push_str(&format!("    backend {backend}\n"));
    }
    text.push_str(extra);
    text
}

/// The arguments of every proxy of a test: the file, the socket, the
/// workers, and `--upgrade-from` for all but the first.
fn args(config: &ConfigFile, workers: usize, from: Option<&Path>) -> Vec<String> {
    let socket = socket_path(config);
    let mut args = vec![
        "--config".to_string(),
        config.path().display().to_string(),
        "--upgrade-socket".to_string(),
        socket.display().to_string(),
        "--workers".to_string(),
        workers.to_string(),
        "--grace".to_string(),
        GRACE.to_string(),
    ];
    if let Some(from) = from {
        args.extend(["--upgrade-from".to_string(), from.display().to_string()]);
    }
    args
}

fn socket_path(config: &ConfigFile) -> PathBuf {
    config.dir().join("upgrade.sock")
}

/// The first proxy, ready once its upgrade socket is in place.
fn start_first(config: &ConfigFile, workers: usize) -> ChildProcess {
    let proxy = child::proxy(proxy_exe(), &args(config, workers, None))
        .start()
        .unwrap_or_else(|e| panic!("start the proxy: {e}"));
    expect_log(&proxy, "upgrade socket ");
    proxy
}

/// Starts the next proxy from `old`'s socket and waits until it took over
/// and `old` heard it; returns it.
fn start_next(old: &ChildProcess, config: &ConfigFile, workers: usize) -> ChildProcess {
    let socket = socket_path(config);
    let new = child::proxy(proxy_exe(), &args(config, workers, Some(&socket)))
        .start()
        .unwrap_or_else(|e| {
            panic!(
                "start the next proxy: {e}; the old one said:\n{}",
                said(old)
            )
        });
    expect_log(&new, "upgrade: took over from pid");
    expect_log(&new, "upgrade socket ");
    expect_log(old, "took the listeners: stopping");
    new
}

/// Waits for a log line containing `needle`, failing the test if it does
/// not come within [`SOON`].
fn expect_log(proxy: &ChildProcess, needle: &str) -> String {
    expect_log_within(proxy, needle, SOON)
}

/// `old` exits 0 once its held connections are done (they are, when this
/// is called), and said it finished draining rather than cut.
fn expect_drained_exit(old: &ChildProcess) {
    match old.wait_exit(SOON).expect("wait for the old proxy") {
        Some(status) => assert_eq!(status.code(), Some(0), "{status}; stderr:\n{}", said(old)),
        None => panic!(
            "the old proxy still runs after {SOON:?}; stderr:\n{}",
            said(old)
        ),
    }
    let log = said(old);
    assert!(log.contains("every connection finished; exiting"), "{log}");
    assert!(!log.contains(" KD "), "a connection was cut:\n{log}");
    assert!(!log.contains(" KQ "), "a waiting client was reset:\n{log}");
}

fn echo_fixture(count: usize) -> Fixture {
    Fixture::start(count, FixtureOptions::at_once(FixtureMode::Echo)).expect("the echo fixture")
}

// ---------------------------------------------------------------------------
// The load
// ---------------------------------------------------------------------------

/// Every outcome of the load: how many round trips, and each failure.
#[derive(Default)]
struct Outcomes {
    done: AtomicUsize,
    failures: Mutex<Vec<String>>,
}

impl Outcomes {
    fn record(&self, what: &str, result: Result<(), String>) {
        self.done.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = result {
            self.failures.lock().unwrap().push(format!("{what}: {e}"));
        }
    }

    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Waits until `more` round trips past `from` are done.
    fn wait_for(&self, from: usize, more: usize) {
        assert!(
            wait_until(SOON, || self.done() >= from + more),
            "the load stalled: {} round trips done",
            self.done()
        );
    }

    fn assert_none_failed(&self, proxies: &str) {
        let failures = self.failures.lock().unwrap();
        assert!(
            failures.is_empty(),
            "{} of {} round trips failed:\n{}\n{proxies}",
            failures.len(),
            self.done(),
            failures.join("\n")
        );
    }
}

/// One client of the steady load: round trip after round trip through
/// `addr` (a payload of 1 byte to 32 KiB, checked on its way back), until
/// `stop`, bounded in count and time.
fn client(addr: SocketAddr, id: usize, stop: &AtomicBool, outcomes: &Outcomes, until: Instant) {
    let mut prng = Prng::new(id as u64 + 1);
    for n in 0..100_000u64 {
        if stop.load(Ordering::SeqCst) || Instant::now() >= until {
            return;
        }
        let len = 1 + prng.up_to(32 * 1024);
        let seed = prng.next_u64();
        outcomes.record(
            &format!("client {id}.{n} ({len} bytes)"),
            echo_round_trip(addr, seed, len),
        );
    }
}

/// Opens the `HELD` connections (threads of scope `s`) and waits until all
/// are open: transfers that are in flight while the listeners change hands.
fn open_held<'s>(
    s: &'s thread::Scope<'s, '_>,
    addr: SocketAddr,
    opened: &'s AtomicUsize,
    finish: &'s AtomicBool,
) -> Vec<thread::ScopedJoinHandle<'s, Result<(), String>>> {
    let holders = (0..HELD)
        .map(|i| s.spawn(move || held(addr, i, opened, finish)))
        .collect();
    assert!(
        wait_until(SOON, || opened.load(Ordering::SeqCst) == HELD),
        "held connections"
    );
    holders
}

/// Joins each client thread and records its outcome as `what i`.
fn record_all(
    outcomes: &Outcomes,
    what: &str,
    clients: Vec<thread::ScopedJoinHandle<'_, Result<(), String>>>,
) {
    for (i, client) in clients.into_iter().enumerate() {
        let result = client.join().unwrap_or_else(|_| Err("panicked".into()));
        outcomes.record(&format!("{what} {i}"), result);
    }
}

/// A connection opened (and used) now, held open while `finish` is not
/// set, used all along, then closed: it lives across a handover on the
/// process that accepted it. Every chunk is checked as it comes back.
fn held(
    addr: SocketAddr,
    id: usize,
    opened: &AtomicUsize,
    finish: &AtomicBool,
) -> Result<(), String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    set_timeouts(&stream, IO_TIMEOUT);
    let mut prng = Prng::new(1000 + id as u64);
    let (mut out, mut back) = (vec![0u8; 4096], vec![0u8; 4096]);
    let deadline = Instant::now() + Duration::from_secs(40);
    for n in 0..1_000_000u64 {
        if n == 1 {
            opened.fetch_add(1, Ordering::SeqCst);
        }
        if n > 1 && finish.load(Ordering::SeqCst) {
            break;
        }
        if Instant::now() >= deadline {
            return Err("never told to finish".into());
        }
        prng.fill(&mut out);
        stream
            .write_all(&out)
            .map_err(|e| format!("chunk {n}: write: {e}"))?;
        stream
            .read_exact(&mut back)
            .map_err(|e| format!("chunk {n}: read: {e}"))?;
        if out != back {
            return Err(format!("chunk {n} came back different"));
        }
    }
    stream
        .shutdown(std::net::Shutdown::Write)
        .map_err(|e| format!("FIN: {e}"))?;
    match read_all(&stream) {
        Ok(rest) if rest.is_empty() => Ok(()),
        Ok(rest) => Err(format!("{} bytes after the last chunk", rest.len())),
        Err(e) => Err(format!("to EOF: {e}")),
    }
}

/// One handover under load: connections held on `old` across it, the
/// next process started, the held ones finished byte-exact, `old` gone
/// after draining them. Returns the new process.
fn hand_over(
    old: ChildProcess,
    addr: SocketAddr,
    config: &ConfigFile,
    workers: usize,
    outcomes: &Outcomes,
) -> ChildProcess {
    let (opened, finish) = (AtomicUsize::new(0), AtomicBool::new(false));
    let new = thread::scope(|s| {
        let holders = open_held(s, addr, &opened, &finish);
        // Raised however the scope ends, so the holders finish.
        struct Finish<'a>(&'a AtomicBool);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let guard = Finish(&finish);
        let at = outcomes.done();
        let new = start_next(&old, config, workers);
        // The load goes on through the new process.
        outcomes.wait_for(at, 200);
        drop(guard);
        record_all(outcomes, "held", holders);
        new
    });
    expect_drained_exit(&old);
    new
}

/// Runs `CLIENTS` clients on `addr` while `body` runs, then stops them.
fn under_load<T>(addr: SocketAddr, outcomes: &Outcomes, body: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    let until = Instant::now() + Duration::from_secs(50);
    thread::scope(|s| {
        for id in 0..CLIENTS {
            let stop = &stop;
            s.spawn(move || client(addr, id, stop, outcomes, until));
        }
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let _stop = Stop(&stop);
        outcomes.wait_for(0, 200);
        body()
    })
}

/// Three upgrades in a row under load, each process with `workers[i]`
/// workers (the first with `workers[0]`), the file rewritten to
/// `configs[i]` before upgrade i.
fn three_upgrades(name: &str, workers: [usize; 4]) {
    let echo = echo_fixture(2);
    let config = ConfigFile::new(name, &frontend("web", echo.addrs(), ""));
    let mut proxy = start_first(&config, workers[0]);
    let addr = proxy.frontend_addr("web").expect("frontend web");
    let socket = socket_path(&config);
    let meta = std::fs::symlink_metadata(&socket).expect("the upgrade socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "the proxy's user only"
    );
    let outcomes = Outcomes::default();
    let mut pids = vec![proxy.pid()];
    proxy = under_load(addr, &outcomes, || {
        for &n in &workers[1..] {
            proxy = hand_over(proxy, addr, &config, n, &outcomes);
            pids.push(proxy.pid());
            assert_eq!(
                proxy.frontend_addr("web").ok(),
                Some(addr),
                "the same socket"
            );
        }
        proxy
    });
    outcomes.assert_none_failed(&said(&proxy));
    assert!(outcomes.done() > 600, "{} round trips", outcomes.done());
    pids.dedup();
    assert_eq!(pids.len(), 4, "each upgrade a new process: {pids:?}");
    stop_cleanly(proxy);
    assert!(!socket.exists(), "the last proxy removes its socket file");
}

// Three upgrades in a row under load, one worker each: zero
// refused, reset or corrupted connections, every held one byte-exact.
#[test]
fn three_upgrades_in_a_row_under_load_lose_nothing() {
    three_upgrades("one-worker", [1, 1, 1, 1]);
}

// The same with two workers: two SO_REUSEPORT sockets per frontend, both
// handed over and both accepted on.
#[test]
fn three_upgrades_with_two_workers_lose_nothing() {
    three_upgrades("two-workers", [2, 2, 2, 2]);
}

// Upgrades with a configuration change between upgrades: a backend
// added; a frontend added and one removed; and the worker count going
// 2, 1, 3, 2 (one worker accepting on both handed sockets, then one socket
// bound beside them). A backend known down stays down in the new process,
// and the last one reloads on SIGHUP as any other.
#[test]
fn upgrades_with_configuration_changes_lose_nothing() {
    let echo = echo_fixture(3);
    let [a, b, c] = [echo.addrs()[0], echo.addrs()[1], echo.addrs()[2]];
    let down = ClosedPort::new();
    let check = format!(
        "    backend {} check inter 100ms fall 1 rise 100\n",
        down.addr()
    );
    let spare = frontend("spare", &[c], "");
    let config = ConfigFile::new(
        "changes",
        &format!("{}{spare}", frontend("web", &[a], &check)),
    );
    let mut proxy = start_first(&config, 2);
    expect_log(&proxy, &format!("backend {} is DOWN", down.addr()));
    let addr = proxy.frontend_addr("web").expect("frontend web");
    let spare_addr = proxy.frontend_addr("spare").expect("frontend spare");
    let outcomes = Outcomes::default();
    proxy = under_load(addr, &outcomes, || {
        config.write(&format!("{}{spare}", frontend("web", &[a, b], &check)));
        proxy = hand_over(proxy, addr, &config, 1, &outcomes);
        let seeded = format!(
            "backend {} is DOWN: as the previous process left it",
            down.addr()
        );
        expect_log(&proxy, &seeded);
        config.write(&format!(
            "{}{}",
            frontend("web", &[a, b], &check),
            frontend("api", &[c], "")
        ));
        proxy = hand_over(proxy, addr, &config, 3, &outcomes);
        expect_log(&proxy, "upgrade: frontend spare on");
        proxy = hand_over(proxy, addr, &config, 2, &outcomes);
        // The down backend was never rediscovered: it came down once, in
        // the first process, and started down in each later one.
        let log = said(&proxy);
        assert!(log.contains("as the previous process left it"), "{log}");
        assert!(!log.contains("consecutive failure"), "{log}");
        // A reload still works in a process whose listeners were handed
        // over (their frontends unchanged keep them; web's pool changes).
        let at = outcomes.done();
        config.write(&format!(
            "{}{}",
            frontend("web", &[b, a], &check),
            frontend("api", &[c], "")
        ));
        proxy.signal(Signal::SIGHUP).expect("SIGHUP");
        let reloaded = expect_log(&proxy, "reloaded ");
        assert!(
            reloaded.contains("web: changed; api: unchanged"),
            "{reloaded}"
        );
        outcomes.wait_for(at, 200);
        proxy
    });
    outcomes.assert_none_failed(&said(&proxy));
    // The added frontend serves; the removed one is gone with the last
    // process that had it.
    let api = proxy.frontend_addr("api").expect("frontend api");
    echo_round_trip(api, 7, 100_000).unwrap_or_else(|e| panic!("api: {e}\n{}", said(&proxy)));
    let refused = TcpStream::connect_timeout(&spare_addr, IO_TIMEOUT);
    assert!(
        refused.is_err(),
        "the removed frontend still accepts: {refused:?}"
    );
    stop_cleanly(proxy);
}

// A new process that cannot start (a file with an error, a port in use)
// exits with a clear message, and the old one serves on, untouched: its
// socket is still there, and a later good upgrade works. One pointed at a
// path where no proxy listens says that nothing was taken over.
#[test]
fn a_failed_upgrade_leaves_the_old_process_serving() {
    let echo = echo_fixture(1);
    let web = frontend("web", echo.addrs(), "");
    let config = ConfigFile::new("failed", &web);
    let proxy = start_first(&config, 2);
    let addr = proxy.frontend_addr("web").expect("frontend web");
    let socket = socket_path(&config);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port in use");
    let in_use = taken.local_addr().expect("its address");
    let broken = [
        (format!("{web}    bogus 1\n"), 2, "unknown option 'bogus'"),
        (
            format!(
                "{web}frontend other\n    listen {in_use}\n    backend {}\n",
                echo.addrs()[0]
            ),
            1,
            "cannot listen on",
        ),
    ];
    for (text, status, why) in broken {
        config.write(&text);
        let run = child::proxy(proxy_exe(), &args(&config, 2, Some(&socket)))
            .ready(child::Ready::AtOnce, SOON)
            .run(SOON)
            .expect("the new proxy runs to its end");
        let words = run.stderr.join("\n");
        assert_eq!(run.status.code(), Some(status), "{words}");
        assert!(words.contains(why), "{words}");
        echo_round_trip(addr, 3, 50_000).unwrap_or_else(|e| panic!("after a failed upgrade: {e}"));
        let log = said(&proxy);
        assert!(!log.contains("took the listeners"), "{log}");
    }
    config.write(&web);
    // No old process at the path: nothing to take, said so, status 1.
    let nobody = config.dir().join("nobody.sock");
    let mut lone = args(&config, 1, Some(&nobody));
    lone[3] = config.dir().join("lone.sock").display().to_string();
    let run = child::proxy(proxy_exe(), &lone)
        .ready(child::Ready::AtOnce, SOON)
        .run(SOON)
        .expect("the lone proxy runs to its end");
    let words = run.stderr.join("\n");
    assert_eq!(run.status.code(), Some(1), "{words}");
    assert!(words.contains("nothing was taken over"), "{words}");
    let new = start_next(&proxy, &config, 1);
    expect_drained_exit(&proxy);
    echo_round_trip(addr, 4, 50_000).unwrap_or_else(|e| panic!("after the upgrade: {e}"));
    stop_cleanly(new);
}

// SIGUSR2: the proxy starts its own binary again with --upgrade-from, and
// that process takes over; without an upgrade socket, SIGUSR2 is ignored.
#[test]
fn sigusr2_starts_the_new_binary_which_takes_over() {
    let echo = echo_fixture(1);
    let plain = start_proxy(Mode::Epoll1, echo.addrs(), &[]);
    plain.signal(Signal::SIGUSR2).expect("SIGUSR2");
    expect_log(&plain, "SIGUSR2: started without an upgrade socket");
    echo_round_trip(plain.addr(), 1, 10_000).expect("still serving");
    stop_cleanly(plain);

    let config = ConfigFile::new("sigusr2", &frontend("web", echo.addrs(), ""));
    let old = start_first(&config, 2);
    let addr = old.frontend_addr("web").expect("frontend web");
    old.signal(Signal::SIGUSR2).expect("SIGUSR2");
    let started = expect_log(&old, "SIGUSR2: started ");
    let pid: i32 = started
        .split(" as pid ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {started:?}"));
    let stray = Stray(Pid::from_raw(pid));
    // The new process writes to the old one's stderr, which it inherited:
    // each line says which process wrote it.
    let took = expect_log(&old, "upgrade: took over from pid");
    let old_pid = old.pid();
    assert!(
        took.contains(&format!(
            " ({pid}) [main] upgrade: took over from pid {old_pid},"
        )),
        "{took}"
    );
    assert!(
        started.contains(&format!(" ({old_pid}) [main] SIGUSR2: started ")),
        "{started}"
    );
    expect_drained_exit(&old);
    echo_round_trip(addr, 2, 50_000).unwrap_or_else(|e| panic!("through the new process: {e}"));
    kill(stray.0, Signal::SIGTERM).expect("SIGTERM to the new process");
    assert!(
        wait_until(SOON, || ended(stray.0)),
        "pid {pid} still runs after SIGTERM"
    );
}

/// A client that connects, says so, then sends `len` bytes and checks
/// their echo: while the proxy is full it waits in a listen queue.
fn queued_client(addr: SocketAddr, seed: u64, connected: &AtomicUsize) -> Result<(), String> {
    let stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    set_timeouts(&stream, IO_TIMEOUT);
    connected.fetch_add(1, Ordering::SeqCst);
    let sent = send_payload(&stream, seed, 20_000).map_err(|e| format!("send: {e}"))?;
    let back = receive_checksum(&stream).map_err(|e| format!("receive: {e}"))?;
    match sent == back {
        true => Ok(()),
        false => Err(format!("sent {sent:?}, got back {back:?}")),
    }
}

// No queued connection is lost, made certain: the old process
// is full (global maxconn, every place held), so clients wait in the
// kernel's listen queues of both workers' sockets, unaccepted, while the
// new process takes over. It must accept from every socket of the
// SO_REUSEPORT group: a socket left behind would be closed with its queue
// when the old process stops accepting, and its clients reset.
#[test]
fn clients_waiting_in_the_listen_queues_are_served_by_the_new_process() {
    const QUEUED: usize = 24;
    let echo = echo_fixture(1);
    let web = frontend("web", echo.addrs(), "");
    let config = ConfigFile::new("queued", &format!("global\n    maxconn {HELD}\n{web}"));
    let old = start_first(&config, 2);
    let addr = old.frontend_addr("web").expect("frontend web");
    let outcomes = Outcomes::default();
    let (opened, finish, connected) = (
        AtomicUsize::new(0),
        AtomicBool::new(false),
        AtomicUsize::new(0),
    );
    let new = thread::scope(|s| {
        let holders = open_held(s, addr, &opened, &finish);
        let queued: Vec<_> = (0..QUEUED)
            .map(|i| {
                s.spawn({
                    let connected = &connected;
                    move || queued_client(addr, 500 + i as u64, connected)
                })
            })
            .collect();
        assert!(
            wait_until(SOON, || connected.load(Ordering::SeqCst) == QUEUED),
            "queued clients"
        );
        // Room for everyone in the new process.
        config.write(&web);
        let new = start_next(&old, &config, 2);
        record_all(&outcomes, "queued", queued);
        finish.store(true, Ordering::SeqCst);
        record_all(&outcomes, "held", holders);
        new
    });
    outcomes.assert_none_failed(&format!("old:\n{}\nnew:\n{}", said(&old), said(&new)));
    expect_drained_exit(&old);
    stop_cleanly(new);
}

// The SO_PEERCRED check with a real second user: a process of
// another uid that reaches the socket (its file opened to everyone here,
// on purpose, the way a careless chmod would) is refused by the old
// process, which logs it and serves on. (A new process refuses an old one
// of another user too, unless it is root: socket.rs's unit test.) Needs
// root, to start a process as nobody.
#[test]
fn a_peer_of_another_user_is_refused_both_ways() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: starting a process of another user needs root");
        return;
    }
    let echo = echo_fixture(1);
    let config = ConfigFile::new("other-user", &frontend("web", echo.addrs(), ""));
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let old = start_first(&config, 1);
    let addr = old.frontend_addr("web").expect("frontend web");
    let socket = socket_path(&config);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let nobody = 65534;
    // Its own upgrade socket where nobody may make one: /tmp (sticky).
    let mut words = args(&config, 1, Some(&socket));
    let own = std::env::temp_dir().join(format!("e2e-upgrade-{}-nobody.sock", std::process::id()));
    words[3] = own.display().to_string();
    let run = child::proxy(proxy_exe(), &words)
        .user(nobody, nobody)
        .ready(child::Ready::AtOnce, SOON)
        .run(SOON)
        .expect("the other user's proxy runs to its end");
    let words = run.stderr.join("\n");
    assert_eq!(run.status.code(), Some(1), "{words}");
    // Root may hand sockets to anyone (it could take them anyway): the
    // refusal is the old process's, and the new one took nothing.
    assert!(words.contains("nothing was taken over"), "{words}");
    let refused = expect_log(&old, "runs as uid 65534, not the proxy's uid 0; refused");
    assert!(
        refused.contains("this process goes on serving"),
        "{refused}"
    );
    echo_round_trip(addr, 5, 50_000).unwrap_or_else(|e| panic!("after the refusal: {e}"));
    let new = start_next(&old, &config, 1);
    expect_drained_exit(&old);
    stop_cleanly(new);
}
