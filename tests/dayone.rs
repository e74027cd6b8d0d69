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

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use backend::child::{self, ChildProcess};
use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, User};

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
