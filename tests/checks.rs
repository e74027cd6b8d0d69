//! Application health checks against the real servers: Redis, PostgreSQL,
//! MariaDB, nginx and Python's SMTP server, each started by the test as a
//! child process on a free loopback port with a directory of its own, and
//! killed when the test ends (its `ChildProcess` is killed on drop, and
//! with the test process). Where a server is not installed, its test says
//! so and passes without running (`.ci/run` installs them all).
//!
//! Each test runs the proxy with checks of `inter 200ms fall 2 rise 1`
//! and a short `timeout`, waits for the verdicts the proxy logs (each
//! within fall × (inter + timeout), with slack for a loaded machine), and
//! then sends real requests through the proxy with the servers' own
//! clients or protocols: the traffic goes where the checks say it may.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use nix::sys::socket::{setsockopt, sockopt};
use tools::bench::peers::find_program;
use tools::process::child::{self, Capture, ChildProcess, Ready, Spawn};

/// Every check's parameters in these tests.
const CHECK: &str = "check inter 200ms fall 2 rise 1 timeout 500ms";

/// How long a verdict may take: fall × (inter + timeout), a first check
/// up to one `inter` late, and slack for a machine under load.
const VERDICT: Duration = Duration::from_millis(2 * 700 + 200 + 5000);

/// How long a server may take to start.
const SERVER_START: Duration = Duration::from_secs(30);

/// The program `name`, or `None` with a printed note that the test skips.
fn installed(name: &str, test: &str) -> Option<PathBuf> {
    let found = find_program(name);
    if found.is_none() {
        eprintln!("skipped: {test}: '{name}' is not installed (apt-get install it; .ci/run does)");
    }
    found
}

/// A free port on 127.0.0.1, as an address.
fn free_addr() -> SocketAddr {
    let port = child::free_port().expect("a free port");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Starts the proxy on `config`, ready once every frontend listens.
fn start_proxy_with(dir: &TestDir, config: &str) -> ChildProcess {
    let path = dir.file("lb.conf");
    fs::write(&path, config).expect("write the configuration");
    let args = ["--config", &path.display().to_string(), "--grace", "1s"].map(String::from);
    child::proxy(proxy_exe(), &args)
        .start()
        .expect("start the proxy")
}

/// Waits for `frontend F: backend ADDR is DOWN` and returns the line.
fn down(proxy: &ChildProcess, frontend: &str, addr: SocketAddr) -> String {
    let needle = format!("frontend {frontend}: backend {addr} is DOWN");
    expect_log_within(proxy, &needle, VERDICT)
}

/// Asserts that `line` holds `part`, showing the line if not.
fn says(line: &str, part: &str) {
    assert!(line.contains(part), "{part:?} not in {line:?}");
}

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

/// `redis-server` on a free port, with no persistence, `extra` arguments.
fn start_redis(program: &Path, dir: &TestDir, extra: &[&str]) -> (ChildProcess, SocketAddr) {
    let addr = free_addr();
    let port = addr.port().to_string();
    let args = [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ];
    let dir_arg = dir.path().display().to_string();
    let process = Spawn::new("redis-server", program)
        .args(args)
        .args(["--dir", &dir_arg])
        .args(extra)
        .ready(Ready::Accepting(addr), SERVER_START)
        .start()
        .expect("start redis-server");
    (process, addr)
}

/// One command on a new connection through `proxy`; the reply's first
/// line, or the bulk string it announces.
fn redis(proxy: SocketAddr, command: &str) -> Result<String, String> {
    let stream = try_connect(proxy).map_err(|e| format!("connect: {e}"))?;
    (&stream)
        .write_all(format!("{command}\r\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(|e| format!("reply: {e}"))?;
    let Some(length) = line
        .strip_prefix('$')
        .and_then(|n| n.trim().parse::<usize>().ok())
    else {
        return Ok(line.trim_end().to_string());
    };
    let mut bulk = vec![0u8; length];
    reader
        .read_exact(&mut bulk)
        .map_err(|e| format!("bulk: {e}"))?;
    Ok(String::from_utf8_lossy(&bulk).into_owned())
}

/// A stand-in that accepts every connection and resets it at once.
fn resetting_backend() -> StdBackend {
    StdBackend::start(|stream| {
        let reset = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        setsockopt(&stream, sockopt::Linger, &reset)?;
        Ok(())
    })
}

#[test]
fn redis_checks_take_down_what_answers_wrong_and_find_the_primary() {
    let Some(program) = installed("redis-server", "redis checks") else {
        return;
    };
    let dir = TestDir::new("redis");
    let (_master, master) = start_redis(&program, &dir, &[]);
    let replica_of = ["--replicaof", "127.0.0.1", &master.port().to_string()];
    let (_replica, replica) = start_redis(&program, &dir, &replica_of);
    let (_auth, auth) = start_redis(&program, &dir, &["--requirepass", "secret"]);
    let reset = resetting_backend();
    let config = format!(
        "frontend script\n  listen 127.0.0.1:0\n  option tcp-check\n  tcp-check send PING\\r\\n\n  \
         tcp-check expect string +PONG\n  backend {master} {CHECK}\n  backend {auth} {CHECK}\n  \
         backend {reset} {CHECK}\n\
         frontend primary\n  listen 127.0.0.1:0\n  option redis-check role master\n  \
         backend {replica} {CHECK}\n  backend {master} {CHECK}\n\
         frontend ping\n  listen 127.0.0.1:0\n  option redis-check\n  backend {auth} {CHECK}\n  \
         backend {master} {CHECK}\n",
        reset = reset.addr()
    );
    let started = Instant::now();
    let proxy = start_proxy_with(&dir, &config);
    // The issue's configuration: a Redis that answers -NOAUTH and a
    // stand-in that resets are DOWN, each with what it said.
    says(
        &down(&proxy, "script", auth),
        "got \"-NOAUTH Authentication required.",
    );
    says(&down(&proxy, "script", reset.addr()), "reset");
    says(
        &down(&proxy, "ping", auth),
        "redis: expected +PONG, got \"-NOAUTH Authentication required.\"",
    );
    says(
        &down(&proxy, "primary", replica),
        "redis: role:slave, expected role:master",
    );
    eprintln!("redis: four verdicts in {:?}", started.elapsed());

    // Real traffic: every request reaches the one Redis that works.
    let script = proxy.frontend_addr("script").expect("script");
    for i in 0..10 {
        assert_eq!(
            redis(script, "PING"),
            Ok("+PONG".into()),
            "request {i}\n{}",
            said(&proxy)
        );
    }
    assert_eq!(redis(script, "SET checks-key 42"), Ok("+OK".into()));
    assert_eq!(redis(script, "GET checks-key"), Ok("42".into()));
    let primary = proxy.frontend_addr("primary").expect("primary");
    for _ in 0..4 {
        let info = redis(primary, "INFO replication").expect("INFO through the proxy");
        says(&info, "role:master");
    }
    let lines = proxy.log().join("\n");
    assert!(
        !lines.contains(&format!("backend {master} is DOWN")),
        "{lines}"
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------

/// PostgreSQL's programs: Debian keeps them in /usr/lib/postgresql/N/bin,
/// off the PATH; the newest version there, else the PATH.
fn postgres_bin(name: &str) -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| Some(e.ok()?.path().join("bin").join(name)))
                .collect()
        })
        .unwrap_or_default();
    versions.retain(|p| p.is_file());
    versions.sort();
    versions.pop().or_else(|| find_program(name))
}

/// Who runs PostgreSQL: it refuses root, so as root the `postgres` user
/// (the Debian package's) or `nobody`; otherwise ourselves.
fn postgres_user() -> Option<(u32, u32)> {
    if !nix::unistd::Uid::effective().is_root() {
        return None;
    }
    let user = ["postgres", "nobody"]
        .iter()
        .find_map(|name| nix::unistd::User::from_name(name).ok().flatten())?;
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

/// `program args`, as `user`, to its end (at most a minute); panics with
/// what it said if it fails.
fn run_as(user: Option<(u32, u32)>, program: &Path, args: &[&str]) -> Vec<String> {
    let mut spawn = Spawn::new(&program.display().to_string(), program)
        .args(args)
        .stdout(Capture::All);
    if let Some((uid, gid)) = user {
        spawn = spawn.user(uid, gid);
    }
    let done = spawn.run(Duration::from_secs(60)).expect("run it");
    assert!(
        done.status.success(),
        "{program:?} {args:?}: {}",
        done.stderr.join("\n")
    );
    done.stdout
}

/// A data directory of PostgreSQL's, owned by `user`, initialised once.
fn initdb(user: Option<(u32, u32)>, dir: &TestDir) -> PathBuf {
    let data = dir.file("pg1");
    fs::create_dir(&data).expect("mkdir");
    if let Some((uid, gid)) = user {
        let (uid, gid) = (
            nix::unistd::Uid::from_raw(uid),
            nix::unistd::Gid::from_raw(gid),
        );
        nix::unistd::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        nix::unistd::chown(&data, Some(uid), Some(gid)).expect("chown");
    }
    let initdb = postgres_bin("initdb").expect("initdb");
    let data_arg = data.display().to_string();
    let args = [
        "-D",
        &data_arg,
        "--auth=trust",
        "-U",
        "postgres",
        "--no-sync",
        "--locale=C",
        "-E",
        "UTF8",
    ];
    run_as(user, &initdb, &args);
    data
}

/// `postgres` on `data`, on a free port, its socket in `data`.
fn start_postgres(user: Option<(u32, u32)>, data: &Path) -> (ChildProcess, SocketAddr) {
    let addr = free_addr();
    let (port, data) = (addr.port().to_string(), data.display().to_string());
    let args = [
        "-D",
        &data,
        "-k",
        &data,
        "-p",
        &port,
        "-h",
        "127.0.0.1",
        "-c",
        "fsync=off",
    ];
    let mut spawn = Spawn::new("postgres", postgres_bin("postgres").expect("postgres"))
        .args(args)
        .args(["-c", "shared_buffers=16MB", "-c", "max_connections=20"])
        .ready(Ready::Accepting(addr), SERVER_START);
    if let Some((uid, gid)) = user {
        spawn = spawn.user(uid, gid);
    }
    (spawn.start().expect("start postgres"), addr)
}

/// `select inet_server_port()` through `proxy` with `psql`: the port of the
/// server that answered.
fn served_by_postgres(psql: &Path, proxy: SocketAddr) -> u16 {
    let port = proxy.port().to_string();
    let args = [
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-U",
        "postgres",
        "-d",
        "postgres",
        "-Atc",
    ];
    let out = run_as(
        None,
        psql,
        &[&args[..], &["select inet_server_port()"]].concat(),
    );
    out.first()
        .and_then(|l| l.trim().parse().ok())
        .expect("a port from psql")
}

#[test]
fn a_postgresql_that_stops_is_marked_down_and_traffic_moves() {
    let test = "postgresql checks";
    let (Some(_), Some(psql)) = (postgres_bin("initdb"), postgres_bin("psql")) else {
        eprintln!("skipped: {test}: initdb or psql is not installed (apt-get install postgresql)");
        return;
    };
    let dir = TestDir::new("pgsql");
    let user = postgres_user();
    let started = Instant::now();
    let data = initdb(user, &dir);
    // A second server from a copy of the first's directory: no second initdb.
    let copy = dir.file("pg2");
    run_as(
        user,
        &find_program("cp").expect("cp"),
        &[
            "-a",
            &data.display().to_string(),
            &copy.display().to_string(),
        ],
    );
    // The copy refuses one user in pg_hba.conf: an ErrorResponse, before
    // any authentication (with trust, an unknown user is sent
    // AuthenticationOk first, which is UP, as in HAProxy).
    let hba = copy.join("pg_hba.conf");
    let rules = fs::read_to_string(&hba).expect("pg_hba.conf");
    fs::write(
        &hba,
        format!("host all refused 127.0.0.1/32 reject\n{rules}"),
    )
    .expect("write pg_hba.conf");
    let (primary, pg1) = start_postgres(user, &data);
    let (_standby, pg2) = start_postgres(user, &copy);
    eprintln!("postgresql: two servers up in {:?}", started.elapsed());
    let config = format!(
        "frontend pg\n  listen 127.0.0.1:0\n  option pgsql-check user postgres\n  \
         backend {pg1} {CHECK}\n  backend {pg2} {CHECK}\n\
         frontend wrong\n  listen 127.0.0.1:0\n  option pgsql-check user refused\n  \
         backend {pg2} {CHECK}\n"
    );
    let proxy = start_proxy_with(&dir, &config);
    says(
        &down(&proxy, "wrong", pg2),
        "pgsql: ErrorResponse FATAL 28000: pg_hba.conf rejects connection",
    );
    let pg = proxy.frontend_addr("pg").expect("pg");
    let served: Vec<u16> = (0..4).map(|_| served_by_postgres(&psql, pg)).collect();
    assert!(
        served.contains(&pg1.port()) && served.contains(&pg2.port()),
        "{served:?}"
    );

    // The primary stops (a fast shutdown): DOWN, and psql goes to the other.
    primary.signal(Signal::SIGINT).expect("SIGINT to postgres");
    let stopped = Instant::now();
    let line = down(&proxy, "pg", pg1);
    assert!(
        line.contains("pgsql: ErrorResponse") || line.contains("connection refused"),
        "{line}"
    );
    eprintln!(
        "postgresql: DOWN {:?} after the stop: {line}",
        stopped.elapsed()
    );
    primary
        .wait_exit(Duration::from_secs(20))
        .expect("postgres exits");
    for _ in 0..4 {
        assert_eq!(
            served_by_postgres(&psql, pg),
            pg2.port(),
            "{}",
            said(&proxy)
        );
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// MariaDB
// ---------------------------------------------------------------------------

/// A MariaDB server in `dir`: installed, started on a free port, with a
/// user `haproxy`@`127.0.0.1` without a password.
fn start_mariadb(dir: &TestDir, client: &Path) -> (ChildProcess, SocketAddr) {
    let root = nix::unistd::Uid::effective().is_root();
    let data = dir.file("data").display().to_string();
    let socket = dir.file("mysqld.sock").display().to_string();
    let install = find_program("mariadb-install-db").expect("mariadb-install-db");
    let mut args = vec![
        "--no-defaults",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
    ];
    let datadir = format!("--datadir={data}");
    args.push(&datadir);
    if root {
        args.push("--user=root");
    }
    run_as(None, &install, &args);
    let addr = free_addr();
    let port = format!("--port={}", addr.port());
    let socket_arg = format!("--socket={socket}");
    let mut server_args = vec![
        "--no-defaults",
        &datadir,
        &socket_arg,
        &port,
        "--bind-address=127.0.0.1",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=16M",
        "--skip-log-bin",
    ];
    if root {
        server_args.push("--user=root");
    }
    let server = Spawn::new("mariadbd", find_program("mariadbd").expect("mariadbd"))
        .args(server_args)
        .ready(Ready::Accepting(addr), SERVER_START)
        .start()
        .expect("start mariadbd");
    let create = "CREATE USER 'haproxy'@'127.0.0.1'";
    run_as(
        None,
        client,
        &["--no-defaults", &socket_arg, "-uroot", "-e", create],
    );
    (server, addr)
}

#[test]
fn mariadb_is_up_on_a_login_and_down_on_an_err_packet_or_a_stop() {
    let test = "mariadb checks";
    let (Some(_), Some(_), Some(client)) = (
        installed("mariadbd", test),
        installed("mariadb-install-db", test),
        installed("mariadb", test),
    ) else {
        return;
    };
    let dir = TestDir::new("mariadb");
    let started = Instant::now();
    let (server, db) = start_mariadb(&dir, &client);
    eprintln!("mariadb: up in {:?}", started.elapsed());
    let config = format!(
        "frontend login\n  listen 127.0.0.1:0\n  option mysql-check user haproxy\n  backend {db} {CHECK}\n\
         frontend handshake\n  listen 127.0.0.1:0\n  option mysql-check\n  backend {db} {CHECK}\n\
         frontend wrong\n  listen 127.0.0.1:0\n  option mysql-check user nosuch\n  backend {db} {CHECK}\n"
    );
    let proxy = start_proxy_with(&dir, &config);
    says(
        &down(&proxy, "wrong", db),
        "mysql: ERR 1045 (28000): Access denied for user 'nosuch'@'127.0.0.1'",
    );
    // A real client through the proxy: the check user logs in and asks.
    let login = proxy.frontend_addr("login").expect("login");
    let port = login.port().to_string();
    let args = [
        "--no-defaults",
        "-h127.0.0.1",
        "-P",
        &port,
        "-uhaproxy",
        "-N",
        "-e",
        "select @@port",
    ];
    let out = run_as(None, &client, &args);
    assert_eq!(
        out.first().map(|l| l.trim().to_string()),
        Some(db.port().to_string()),
        "{out:?}"
    );

    server.signal(Signal::SIGTERM).expect("SIGTERM to mariadbd");
    for frontend in ["login", "handshake"] {
        let line = down(&proxy, frontend, db);
        assert!(
            line.contains("mysql:") || line.contains("connection refused"),
            "{line}"
        );
    }
    stop_cleanly(proxy);
    server
        .wait_exit(Duration::from_secs(30))
        .expect("mariadbd exits");
}

// ---------------------------------------------------------------------------
// nginx (HTTP), with the PROXY header on the checks
// ---------------------------------------------------------------------------

/// nginx with three servers: `ok` answers /health 200 "ready", `sick` 503,
/// `behind` 200 but expects a PROXY header first.
fn start_nginx(program: &Path, dir: &TestDir) -> (ChildProcess, [SocketAddr; 3]) {
    let [ok, sick, behind] = [free_addr(), free_addr(), free_addr()];
    let d = dir.path().display();
    let server = |addr: SocketAddr, listen: &str, health: &str, name: &str| {
        format!(
            "server {{ listen {addr}{listen}; location = /health {{ {health} }} \
             location / {{ return 200 \"served by {name}\\n\"; }} }}\n"
        )
    };
    let conf = format!(
        "daemon off;\nmaster_process off;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n \
         client_body_temp_path {d}/t1; proxy_temp_path {d}/t2; fastcgi_temp_path {d}/t3;\n \
         uwsgi_temp_path {d}/t4; scgi_temp_path {d}/t5;\n{}{}{}}}\n",
        server(ok, "", "return 200 \"ready\\n\";", "ok"),
        server(sick, "", "return 503 \"maintenance\\n\";", "sick"),
        server(
            behind,
            " proxy_protocol",
            "return 200 \"ready\\n\";",
            "behind"
        ),
    );
    let path = dir.file("nginx.conf");
    fs::write(&path, conf).expect("write nginx.conf");
    let path = path.display().to_string();
    let process = Spawn::new("nginx", program)
        .args([
            "-p",
            &d.to_string(),
            "-c",
            &path,
            "-e",
            &format!("{d}/error.log"),
        ])
        .ready(Ready::Accepting(behind), SERVER_START)
        .start()
        .expect("start nginx");
    (process, [ok, sick, behind])
}

/// `GET /` through `proxy`: the body.
fn http_get(proxy: SocketAddr) -> String {
    let mut stream = connect(proxy);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
        .rsplit("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn nginx_httpchk_judges_status_and_body_and_sends_the_proxy_header() {
    let Some(program) = installed("nginx", "http checks") else {
        return;
    };
    let dir = TestDir::new("nginx");
    let (_nginx, [ok, sick, behind]) = start_nginx(&program, &dir);
    let config = format!(
        "frontend web\n  listen 127.0.0.1:0\n  option httpchk GET /health HTTP/1.1\n  \
         http-check expect status 200\n  http-check expect string ready\n  \
         backend {ok} {CHECK}\n  backend {sick} {CHECK}\n  backend {behind} send-proxy-v2 {CHECK}\n\
         frontend bare\n  listen 127.0.0.1:0\n  option httpchk GET /health\n  backend {behind} {CHECK}\n"
    );
    let proxy = start_proxy_with(&dir, &config);
    says(
        &down(&proxy, "web", sick),
        "http: status 503 Service Temporarily Unavailable, expected status 200",
    );
    // nginx wants a PROXY header on `behind`: without one, the check fails.
    says(&down(&proxy, "bare", behind), "http: ");
    let web = proxy.frontend_addr("web").expect("web");
    let mut seen: Vec<String> = (0..6).map(|_| http_get(web)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        ["served by behind", "served by ok"],
        "{}",
        said(&proxy)
    );
    let lines = proxy.log().join("\n");
    assert!(
        !lines.contains(&format!("web: backend {behind} is DOWN")),
        "{lines}"
    );
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// SMTP
// ---------------------------------------------------------------------------

/// Python's own SMTP server (`smtpd`, in Python up to 3.11), or `None`.
fn start_smtpd() -> Option<(ChildProcess, SocketAddr)> {
    let python = find_program("python3")?;
    let probe = Spawn::new("python3", &python)
        .args(["-W", "ignore", "-c", "import smtpd"])
        .run(Duration::from_secs(20))
        .ok()?;
    if !probe.status.success() {
        return None;
    }
    let addr = free_addr();
    let process = Spawn::new("smtpd", python)
        .args([
            "-W",
            "ignore",
            "-m",
            "smtpd",
            "-n",
            "-c",
            "DebuggingServer",
            &addr.to_string(),
        ])
        .ready(Ready::Accepting(addr), SERVER_START)
        .start()
        .ok()?;
    Some((process, addr))
}

#[test]
fn smtpchk_wants_a_2xx_greeting_and_a_2xx_answer() {
    let Some((_smtpd, smtpd)) = start_smtpd() else {
        eprintln!(
            "skipped: smtp checks: python3 with its smtpd module (3.11 or older) is not installed"
        );
        return;
    };
    // Two peers of the fixture backend that greet, then echo: one refuses
    // in its greeting, one greets well and then answers EHLO with its echo.
    let refusing = start_backend(
        1,
        &["--mode", "banner", "--banner", "554 no service here\r"],
    );
    let echoing = start_backend(
        1,
        &["--mode", "banner", "--banner", "220 not really smtp\r"],
    );
    let (refusing, echoing) = (refusing.addrs()[0], echoing.addrs()[0]);
    let dir = TestDir::new("smtp");
    let config = format!(
        "frontend mail\n  listen 127.0.0.1:0\n  option smtpchk EHLO lb.test\n  \
         backend {smtpd} {CHECK}\n  backend {refusing} {CHECK}\n  backend {echoing} {CHECK}\n"
    );
    let proxy = start_proxy_with(&dir, &config);
    says(
        &down(&proxy, "mail", refusing),
        "smtp: greeting: 554 no service here",
    );
    says(
        &down(&proxy, "mail", echoing),
        "smtp: not an SMTP reply: \"EHLO lb.test\"",
    );
    let mail = proxy.frontend_addr("mail").expect("mail");
    for _ in 0..4 {
        let mut stream = connect(mail);
        let greeting = read_line(&mut stream).expect("a greeting through the proxy");
        assert!(
            greeting.starts_with(b"220 "),
            "{}",
            String::from_utf8_lossy(&greeting)
        );
        stream.write_all(b"QUIT\r\n").expect("quit");
    }
    stop_cleanly(proxy);
}

// ---------------------------------------------------------------------------
// The agent check
// ---------------------------------------------------------------------------

/// An agent answering whatever `word` holds now, one line per question.
fn agent(word: Arc<Mutex<String>>) -> StdBackend {
    StdBackend::start(move |mut stream| {
        let line = word.lock().map(|w| w.clone()).unwrap_or_default();
        stream.write_all(format!("{line}\n").as_bytes())
    })
}

#[test]
fn an_agent_drains_its_backend_and_takes_it_out() {
    let backends = start_backend(2, &["--mode", "reply"]);
    let (one, two) = (backends.addrs()[0], backends.addrs()[1]);
    let word = Arc::new(Mutex::new("drain".to_string()));
    let agent = agent(word.clone());
    let dir = TestDir::new("agent");
    let config = format!(
        "frontend web\n  listen 127.0.0.1:0\n  backend {one}\n  \
         backend {two} agent-check agent-port {} agent-inter 100ms\n",
        agent.addr().port()
    );
    // The agent listens on its own port of the same address (127.0.0.1).
    let proxy = start_proxy_with(&dir, &config);
    let web = proxy.frontend_addr("web").expect("web");
    expect_log_within(
        &proxy,
        &format!("backend {two}: weight 0% of its configured one"),
        VERDICT,
    );
    assert!(
        (0..6).all(|_| which_backend(web) == one.port()),
        "drained: {}",
        said(&proxy)
    );
    *word.lock().expect("the word") = "ready".to_string();
    expect_log_within(&proxy, &format!("backend {two}: weight 100%"), VERDICT);
    let served: Vec<u16> = (0..6).map(|_| which_backend(web)).collect();
    assert!(served.contains(&two.port()), "ready again: {served:?}");
    *word.lock().expect("the word") = "down # maintenance".to_string();
    let line = expect_log_within(&proxy, &format!("backend {two} is DOWN"), VERDICT);
    says(&line, "its agent says 'down # maintenance'");
    assert!(
        (0..6).all(|_| which_backend(web) == one.port()),
        "out: {}",
        said(&proxy)
    );
    stop_cleanly(proxy);
}
