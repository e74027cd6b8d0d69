//! The demo: the seed's experiment, on this code, in a few seconds
//! (`cargo run --release -p tools --bin demo [-- --quick]`).
//!
//! Three fixture backends answer each request after 50 ms (an I/O-bound
//! service: the time is spent waiting, not computing). The proxy runs in
//! each mode in turn, as a child process, and a closed-loop load of 256
//! concurrent clients goes through it, a new connection per request: more
//! clients than the biggest pool has threads, as in the seed's argument.
//! The table shows what the seed measured: a pool can complete at most
//! `threads / 50 ms` requests per second however idle the CPU, while one
//! event loop approaches `clients / 50 ms`.
//!
//! Each mode runs until it is stopped, so it needs a process of its own.
//! `cargo run -p tools --bin demo` builds this binary and no other, so
//! the child is this very binary, started with a hidden first argument:
//! `demo --run-proxy ARGS...` runs `proxy::main_with_args(ARGS)`, the
//! `proxy` binary's own entry point, and nothing of the demo. A fresh clone
//! needs one build, and the proxy measured is the code that ships.
//!
//! May import: [`crate::load`] (the closed loop) and [`crate::process`]
//! (the proxy as a child); [`backend::fixture`] for the backends.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use proxy::settings::flags::{self, Flag, Read};

use crate::load::{LoadOptions, LoadReport, run_closed_loop};
use crate::process::child;
use backend::fixture::{Fixture, FixtureMode, FixtureOptions};

/// The hidden first argument that makes this binary the proxy (module docs).
pub const RUN_PROXY: &str = "--run-proxy";

/// The backends' delay per request.
const DELAY: Duration = Duration::from_millis(50);
/// Concurrent clients, each waiting for its reply before the next request.
const CLIENTS: usize = 256;

/// One row of the table: a mode, its flags, and how many requests to send.
struct Row {
    mode: &'static str,
    threads: usize,
    flags: Vec<String>,
    requests: usize,
}

fn rows(quick: bool) -> Vec<Row> {
    // Sized so each row takes about a second at its expected rate.
    let scale = |n: usize| if quick { (n / 4).max(8) } else { n };
    let row = |mode, threads, flags: &[&str], requests| Row {
        mode,
        threads,
        flags: flags.iter().map(|f| f.to_string()).collect(),
        requests: scale(requests),
    };
    vec![
        row("single", 1, &["--mode", "single"], 40),
        row("pool", 8, &["--mode", "pool", "--threads", "8"], 160),
        row("pool", 64, &["--mode", "pool", "--threads", "64"], 1280),
        row("epoll", 1, &["--mode", "epoll", "--workers", "1"], 5120),
        row("epoll", 2, &["--mode", "epoll", "--workers", "2"], 5120),
        // Milestone 5 the seed's way: one thread, level-triggered, by hand.
        row("states", 1, &["--mode", "states"], 5120),
    ]
}

/// The whole `demo` program: `args` without the program name. Returns
/// the exit status: 0 (the table printed, or the help), 1 (the demo could
/// not run), 2 (a bad command line); as the proxy (`--run-proxy`), the
/// proxy's.
pub fn main_with_args(args: &[String]) -> i32 {
    if let Some((first, proxy_args)) = args.split_first() {
        if first == RUN_PROXY {
            return proxy::main_with_args(proxy_args);
        }
    }
    let mut quick = false;
    match flags::read("demo", args, FLAGS, &mut quick) {
        Ok(Read::Flags(_)) => {}
        Ok(Read::Help) => {
            print!("{HELP}{}", flags::help(FLAGS));
            return 0;
        }
        Ok(Read::Version) => {
            println!("demo {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("demo: {e}");
            return 2;
        }
    }
    match run(quick) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("demo: {e}");
            1
        }
    }
}

const HELP: &str = "\
demo: the seed's experiment: three backends that answer after 50 ms, the
proxy in each mode in front of them, 256 clients through each, one table

USAGE
    demo [--quick]

OPTIONS
";

/// The demo's one flag, read like every command line of the workspace.
const FLAGS: &[Flag<bool>] = &[Flag {
    name: "--quick",
    arg: "",
    needs: "",
    help: "a quarter of the requests per row (a few seconds in all)",
    set: |quick, _| {
        *quick = true;
        Ok(())
    },
}];

/// Runs the demo and prints the table.
pub fn run(quick: bool) -> io::Result<()> {
    let fixture = Fixture::start(
        3,
        FixtureOptions {
            mode: FixtureMode::Reply,
            delay: DELAY,
            banner: String::new(),
        },
    )?;
    let backends = fixture.addrs().to_vec();
    let exe = std::env::current_exe()?;
    println!(
        "demo: 3 backends on {} answer each request after {} ms;\n\
         {CLIENTS} clients, a new connection per request, through each mode in turn.\n",
        ports(&backends),
        DELAY.as_millis()
    );
    println!(
        "{:<7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7}  served by (port: requests)",
        "mode", "threads", "requests", "req/s", "avg ms", "p99 ms", "errors"
    );
    for row in rows(quick) {
        let report = measure(&exe, &row, &backends)?;
        print_row(&row, &report);
    }
    println!(
        "\nA pool is capped at threads / {} ms = {:.0} req/s per thread; an event loop at\n\
         clients / {} ms = {:.0} req/s (Little's law), whatever its thread count.",
        DELAY.as_millis(),
        1.0 / DELAY.as_secs_f64(),
        DELAY.as_millis(),
        CLIENTS as f64 / DELAY.as_secs_f64()
    );
    fixture.stop();
    Ok(())
}

/// Starts the proxy for `row`, drives the load through it, stops it.
fn measure(exe: &Path, row: &Row, backends: &[SocketAddr]) -> io::Result<LoadReport> {
    // Port 0: the child picks a free port and reports it in its
    // "listening on" line (info level; per-connection lines are debug).
    let mut args: Vec<String> = vec![RUN_PROXY.into(), "--listen".into(), "127.0.0.1:0".into()];
    args.extend(row.flags.iter().cloned());
    for b in backends {
        args.extend(["--backend".to_string(), b.to_string()]);
    }
    let proxy = child::proxy(exe, &args).start()?;
    let options = LoadOptions {
        target: proxy.addr(),
        clients: CLIENTS,
        requests: row.requests,
        timeout: Duration::from_secs(30),
        ..LoadOptions::default()
    };
    let report = run_closed_loop(&options);
    let status = proxy.stop()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "the {} proxy exited with {status}",
            row.mode
        )));
    }
    report
}

fn print_row(row: &Row, report: &LoadReport) {
    let ms = |d: Option<Duration>| {
        d.map_or("-".to_string(), |d| {
            format!("{:.1}", d.as_secs_f64() * 1000.0)
        })
    };
    let served: Vec<String> = report
        .per_backend
        .iter()
        .map(|(tag, n)| format!("{}: {n}", tag.trim_start_matches("port ")))
        .collect();
    println!(
        "{:<7} {:>7} {:>9} {:>9.1} {:>9} {:>9} {:>7}  {}",
        row.mode,
        row.threads,
        report.requests,
        report.req_per_sec(),
        ms(report.average()),
        ms(report.percentile(99.0)),
        report.errors,
        served.join(", ")
    );
}

fn ports(addrs: &[SocketAddr]) -> String {
    let ports: Vec<String> = addrs.iter().map(|a| a.port().to_string()).collect();
    format!("127.0.0.1:{{{}}}", ports.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(line: &str) -> i32 {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        main_with_args(&args)
    }

    #[test]
    fn the_command_line_takes_quick_and_hands_run_proxy_to_the_proxy() {
        assert_eq!(status("--help"), 0);
        assert_eq!(status("--quik"), 2, "a typo is a usage error");
        assert_eq!(status("--quick --quick extra"), 2);
        // The proxy's own command line: its help, its usage errors.
        assert_eq!(status("--run-proxy --help"), 0);
        assert_eq!(status("--run-proxy --listen"), 2);
    }
}
