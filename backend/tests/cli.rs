//! The `backend` program: usage errors through `main_with_args` directly,
//! and the real binary serving, announcing its ports and stopping on
//! SIGTERM and SIGINT with status 0.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use common::{ask, within};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn usage_errors_exit_with_status_2() {
    for bad in [
        "",
        "--port",
        "--port 65536",
        "--port 9001 --port 9001",
        "--port 1 --mode fast",
        "--port 1 --delay-ms soon",
        "--port 1 --host example.com",
        "--prot 1",
    ] {
        assert_eq!(backend::main_with_args(&args(bad)), 2, "'{bad}'");
    }
}

#[test]
fn help_and_version_exit_with_status_0() {
    assert_eq!(backend::main_with_args(&args("--help")), 0);
    assert_eq!(backend::main_with_args(&args("--version")), 0);
}

/// The binary, started with `args`, its stderr read line by line on a
/// thread so that every wait for a line can be bounded.
/// Dropping it (a failed test) kills the process, so none outlives the test.
struct Backend {
    child: Option<Child>,
    lines: Receiver<String>,
}

impl Backend {
    fn start(args: &str) -> Backend {
        let mut child = Command::new(env!("CARGO_BIN_EXE_backend"))
            .args(args.split_whitespace())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the backend binary");
        let stderr = child.stderr.take().expect("piped stderr");
        Backend {
            child: Some(child),
            lines: forward_lines(stderr),
        }
    }

    /// Waits (bounded) for the next stderr line.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from the backend within 10 s")
    }

    /// Waits (bounded) for the process to exit.
    fn wait(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("not waited for yet");
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(status) => status.expect("wait for the backend"),
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                panic!("the backend did not exit within 10 s");
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn forward_lines(stderr: ChildStderr) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Parses `backend: listening on 127.0.0.1:9001 (reply, delay 50ms)`.
fn listening_addr(line: &str, mode: &str, delay_ms: u64) -> SocketAddr {
    let rest = line
        .strip_prefix("backend: listening on ")
        .unwrap_or_else(|| panic!("not a listening line: {line}"));
    let (addr, tail) = rest.split_once(' ').expect("address, then details");
    assert_eq!(tail, format!("({mode}, delay {delay_ms}ms)"));
    addr.parse().expect("a socket address")
}

#[test]
fn the_binary_serves_every_port_and_stops_on_sigterm() {
    within(30, || {
        let backend = Backend::start("--port 0 --port 0 --delay-ms 10");
        let first = listening_addr(&backend.line(), "reply", 10);
        let second = listening_addr(&backend.line(), "reply", 10);
        assert_ne!(first.port(), 0, "the real port is shown");
        assert_ne!(first, second);
        for addr in [first, second] {
            let reply = ask(addr, b"GET 1\n").expect("ask the binary");
            assert_eq!(reply, format!("port {}: GET 1\n", addr.port()).as_bytes());
        }
        backend.signal("TERM");
        assert!(backend.line().contains("SIGTERM, stopping"));
        let status = backend.wait();
        assert_eq!(status.code(), Some(0), "{status}");
    });
}

#[test]
fn the_binary_stops_on_sigint_too() {
    within(30, || {
        let backend = Backend::start("--port 0 --mode echo");
        let addr = listening_addr(&backend.line(), "echo", 0);
        assert_eq!(ask(addr, b"echo me").expect("ask"), b"echo me");
        backend.signal("INT");
        assert_eq!(backend.wait().code(), Some(0));
    });
}

#[test]
fn a_port_in_use_exits_with_status_1() {
    within(30, || {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let backend = Backend::start(&format!("--port {port}"));
        let line = backend.line();
        assert!(line.contains("cannot listen on 127.0.0.1"), "{line}");
        assert_eq!(backend.wait().code(), Some(1));
    });
}
