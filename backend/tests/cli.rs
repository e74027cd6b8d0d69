//! The `backend` program: usage errors through `main_with_args` directly,
//! and the real binary serving, announcing its ports and stopping on
//! SIGTERM and SIGINT with status 0.

mod common;

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::time::Duration;

use common::{ask, within};
use nix::sys::signal::Signal;
use tools::process::child::{ChildProcess, Spawn};

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

/// How long the binary may take to say a line, or to exit.
const BOUND: Duration = Duration::from_secs(10);

/// The binary, started with `args`, its stderr kept line by line
/// (`tools::process::child`, killed on drop, so none outlives the test).
fn start(args: &str) -> ChildProcess {
    Spawn::new("backend", env!("CARGO_BIN_EXE_backend"))
        .args(args.split_whitespace())
        .start()
        .expect("start the backend binary")
}

/// Its stderr line `n` (from 0), waiting (bounded) for it.
fn line(backend: &ChildProcess, n: usize) -> String {
    // Every line contains "": the first n + 1 lines.
    let lines = backend
        .wait_for_logs("", n + 1, BOUND)
        .unwrap_or_else(|e| panic!("line {n} from the backend: {e}"));
    lines[n].clone()
}

/// Waits (bounded) for the process to exit.
fn wait(backend: &ChildProcess) -> ExitStatus {
    match backend.wait_exit(BOUND).expect("wait for the backend") {
        Some(status) => status,
        None => panic!("the backend did not exit within {BOUND:?}"),
    }
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
        let backend = start("--port 0 --port 0 --delay-ms 10");
        let first = listening_addr(&line(&backend, 0), "reply", 10);
        let second = listening_addr(&line(&backend, 1), "reply", 10);
        assert_ne!(first.port(), 0, "the real port is shown");
        assert_ne!(first, second);
        for addr in [first, second] {
            let reply = ask(addr, b"GET 1\n").expect("ask the binary");
            assert_eq!(reply, format!("port {}: GET 1\n", addr.port()).as_bytes());
        }
        backend.signal(Signal::SIGTERM).expect("SIGTERM");
        assert!(line(&backend, 2).contains("SIGTERM, stopping"));
        let status = wait(&backend);
        assert_eq!(status.code(), Some(0), "{status}");
    });
}

#[test]
fn the_binary_stops_on_sigint_too() {
    within(30, || {
        let backend = start("--port 0 --mode echo");
        let addr = listening_addr(&line(&backend, 0), "echo", 0);
        assert_eq!(ask(addr, b"echo me").expect("ask"), b"echo me");
        backend.signal(Signal::SIGINT).expect("SIGINT");
        assert_eq!(wait(&backend).code(), Some(0));
    });
}

#[test]
fn a_port_in_use_exits_with_status_1() {
    within(30, || {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let backend = start(&format!("--port {port}"));
        let said = line(&backend, 0);
        assert!(said.contains("cannot listen on 127.0.0.1"), "{said}");
        assert_eq!(wait(&backend).code(), Some(1));
    });
}
