//! End to end, capacity with splice on: pipes are lent descriptors from the
//! connections' room, not given a share of it (policy/descriptors.rs), so
//! a proxy under `ulimit -n N` with `--splice on` derives the same global
//! `maxconn` as with `--splice off`, and holds that many connections at
//! once, every one relayed, with no backend connect failing for want of a
//! descriptor a pipe took.
//!
//! The limit is [`LIMIT`] (2,000 by default, for the time a CI run has);
//! `CAPACITY_LIMIT=20000` runs it at the hard limit of the machine the
//! benchmarks ran on (the test raises its own limit and skips, saying so,
//! when the hard limit is too low for the connections it holds).
//!
//! While the connections are opened, a few bulk streams run beside them
//! (a megabyte each way, each direction spliced while a pipe is lent), so
//! pipes are out while the room fills; each connection then exchanges a
//! line, all still open, and another once every one is in.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use tools::process::child::{self, ChildProcess};

use common::*;

/// The proxy's RLIMIT_NOFILE unless `CAPACITY_LIMIT` says another.
const LIMIT: u64 = 2000;
/// Bulk streams run while the connections are opened.
const BULK_STREAMS: usize = 4;
/// Bytes each bulk stream echoes per round trip.
const BULK_BYTES: u64 = 1 << 20;
/// Round trips each bulk stream makes, at most.
const BULK_ROUNDS: u64 = 50;

fn limit() -> u64 {
    std::env::var("CAPACITY_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIMIT)
}

/// The epoll proxy, one worker, `--splice` `splice`, under `ulimit -n limit`.
fn start_limited(splice: &str, backends: &[SocketAddr], limit: u64) -> ChildProcess {
    let exe = proxy_exe().to_str().expect("a UTF-8 path to e2e-proxy");
    let mut args: Vec<String> = vec![
        "-c".into(),
        format!("ulimit -n {limit} && exec \"$0\" \"$@\""),
        exe.into(),
    ];
    for arg in [
        "--listen",
        "127.0.0.1:0",
        "--mode",
        "epoll",
        "--workers",
        "1",
        "--splice",
        splice,
        "--grace",
        "1s",
    ] {
        args.push(arg.into());
    }
    for backend in backends {
        args.extend(["--backend".to_string(), backend.to_string()]);
    }
    child::proxy("/bin/sh", &args)
        .start()
        .unwrap_or_else(|e| panic!("start the proxy under ulimit -n {limit}: {e}"))
}

/// `(reserved, maxconn)` from the startup line `descriptors: RLIMIT_NOFILE
/// 2,000 (hard 2,000), 27 reserved: global maxconn 986 derived (...)`.
fn derived(proxy: &ChildProcess) -> (u64, u64) {
    let line = expect_log_within(proxy, "global maxconn", Duration::from_secs(10));
    let number = |after: &str, before: &str| -> u64 {
        let from = line.find(after).map(|i| i + after.len());
        let text = from.and_then(|i| line[i..].split(before).next());
        let digits: String = text
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no number after {after:?} in {line:?}"))
    };
    (
        number("), ", " reserved"),
        number("global maxconn ", " derived"),
    )
}

#[test]
fn splice_on_derives_the_same_maxconn_and_holds_it_all() {
    let limit = limit();
    let ours = runtime::fd_limit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    // Here: a descriptor per connection, about limit / 2; the backend (a
    // child, which inherits our limit): as many; the proxy's `ulimit -n`
    // may not exceed the hard limit.
    if ours < limit {
        println!("skipped: RLIMIT_NOFILE hard limit is {ours}, the test needs {limit}");
        return;
    }
    let backend = start_backend(1, &["--mode", "echo"]);

    // The same maxconn with splice off: the formula without pipes,
    // (limit - reserved) / 2.
    let off = start_limited("off", backend.addrs(), limit);
    let (reserved_off, maxconn_off) = derived(&off);
    stop_cleanly(off);
    let proxy = start_limited("on", backend.addrs(), limit);
    let (reserved, maxconn) = derived(&proxy);
    assert_eq!(
        (reserved, maxconn),
        (reserved_off, maxconn_off),
        "splice on and off derive different budgets"
    );
    assert_eq!(
        maxconn,
        (limit - reserved) / 2,
        "no share set aside for pipes"
    );
    let addr = proxy.addr();

    // Bulk streams beside the fill, spliced while pipes are lent.
    let stop = Arc::new(AtomicBool::new(false));
    let bulk: Vec<_> = (0..BULK_STREAMS)
        .map(|i| {
            let stop = stop.clone();
            thread::spawn(move || -> Result<u64, String> {
                let mut rounds = 0;
                // At least two rounds: the second takes pooled pipes.
                while rounds < 2 || (rounds < BULK_ROUNDS && !stop.load(Ordering::SeqCst)) {
                    echo_round_trip(addr, i as u64 * 1000 + rounds, BULK_BYTES)?;
                    rounds += 1;
                }
                Ok(rounds)
            })
        })
        .collect();

    // Every place but the bulk streams' is held, each exchanging a line.
    let held = maxconn as usize - BULK_STREAMS;
    let mut clients = Vec::with_capacity(held);
    for i in 0..held {
        let mut client = connect(addr);
        set_timeouts(&client, Duration::from_secs(30));
        client
            .write_all(format!("{i:06}\n").as_bytes())
            .unwrap_or_else(|e| panic!("connection {i}: write: {e}"));
        clients.push(client);
    }
    stop.store(true, Ordering::SeqCst);
    let mut rounds = 0;
    for stream in bulk {
        match stream.join() {
            Ok(Ok(n)) => rounds += n,
            Ok(Err(e)) => panic!("a bulk stream: {e}; stderr:\n{}", said(&proxy)),
            Err(_) => panic!("a bulk stream's thread panicked"),
        }
    }
    // The lines sent while connecting come back...
    exchange(&mut clients, "first", false, &proxy);
    // ...and another each, every connection still open.
    exchange(&mut clients, "second", true, &proxy);

    let log = said(&proxy);
    assert!(
        !log.contains("no socket for a backend"),
        "a backend connect failed for want of a descriptor:\n{log}"
    );
    assert!(
        !log.contains("Too many open files"),
        "the proxy ran out of descriptors:\n{log}"
    );
    println!(
        "ulimit -n {limit}: {reserved} reserved, global maxconn {maxconn} derived with splice \
         on and off; {held} connections held and relayed beside {BULK_STREAMS} bulk streams \
         ({rounds} round trips of {BULK_BYTES} bytes)"
    );
    drop(clients);
    stop_cleanly(proxy);
}

/// Each client sends a line (if `send`) and reads its line back, all
/// still open.
fn exchange(clients: &mut [TcpStream], round: &str, send: bool, proxy: &ChildProcess) {
    for (i, client) in clients.iter_mut().enumerate().filter(|_| send) {
        if let Err(e) = client.write_all(format!("{i:06}\n").as_bytes()) {
            panic!("{round} round, connection {i}: write: {e}");
        }
    }
    for (i, client) in clients.iter_mut().enumerate() {
        let mut got = [0u8; 7];
        if let Err(e) = client.read_exact(&mut got) {
            panic!(
                "{round} round, connection {i}: read: {e}; stderr:\n{}",
                said(proxy)
            );
        }
        assert_eq!(got, *format!("{i:06}\n").as_bytes(), "connection {i}");
    }
}
