//! The load half of `scripts/race-repro.sh`: one run of a (ThreadSanitizer)
//! proxy build under concurrent load, and its count of data-race reports.
//!
//! ```text
//! race_load --proxy PROXY_BINARY --picker PICKER [--threads N] [--requests N]
//!           [--clients N] [--log FILE]
//! ```
//!
//! It starts three fixture backends on loopback (`reply` mode: each answers
//! a request line with `port N: ...`), starts `PROXY_BINARY --mode pool
//! --picker PICKER` in front of them with its stderr in `FILE`, sends
//! `--requests` requests from `--clients` concurrent clients (the load
//! client's closed loop, a new connection per request), stops the proxy
//! with SIGTERM, and prints one line:
//!
//! ```text
//! picker=racy tsan_reports=2 ok=400/400 served=134/133/133 exit=66
//! ```
//!
//! `tsan_reports` counts `WARNING: ThreadSanitizer: data race` in the
//! proxy's stderr; `exit` is its exit status (ThreadSanitizer turns 0 into
//! 66 when it reported anything). The script builds the table from these
//! lines. This program is an ordinary build: only the proxy under test
//! carries the sanitizer.
//!
//! May import: [`crate::load`] (the closed loop) and [`crate::process`]
//! (the proxy as a child); [`backend::fixture`] for the backends.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::load::{LoadOptions, run_closed_loop};
use crate::process::child::{Capture, ChildProcess, Ready, Spawn};
use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sys::signal::Signal;
use proxy::settings::flags::{self, Flag, Read, count};

const TSAN_RACE: &str = "WARNING: ThreadSanitizer: data race";
/// A sanitizer build starts slowly and serves slowly: generous bounds.
const START: Duration = Duration::from_secs(60);
const STOP: Duration = Duration::from_secs(30);
const REQUEST: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Options {
    proxy: Option<PathBuf>,
    picker: Option<String>,
    threads: usize,
    requests: usize,
    clients: usize,
    log: Option<PathBuf>,
}

const FLAGS: &[Flag<Options>] = &[
    Flag {
        name: "--proxy",
        arg: "PATH",
        needs: "the proxy binary",
        help: "the proxy binary under test (required)",
        set: |o, v| {
            o.proxy = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--picker",
        arg: "KIND",
        needs: "racy, mutex or atomic",
        help: "the pool's picker (required)",
        set: |o, v| {
            o.picker = Some(v.to_string());
            Ok(())
        },
    },
    Flag {
        name: "--threads",
        arg: "N",
        needs: "a number of threads",
        help: "the pool's threads                [default: 8]",
        set: |o, v| {
            o.threads = count(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--requests",
        arg: "N",
        needs: "a number of requests",
        help: "requests in all                    [default: 400]",
        set: |o, v| {
            o.requests = count(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--clients",
        arg: "N",
        needs: "a number of clients",
        help: "concurrent clients                 [default: 32]",
        set: |o, v| {
            o.clients = count(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--log",
        arg: "FILE",
        needs: "a file",
        help: "the proxy's stderr                 [default: race-PICKER.log]",
        set: |o, v| {
            o.log = Some(PathBuf::from(v));
            Ok(())
        },
    },
];

/// The `race_load` binary: 0 (the run done, whatever it found), 1 (it
/// could not run), 2 (bad command line).
pub fn main() -> ExitCode {
    let args = flags::program_args();
    let mut options = Options {
        proxy: None,
        picker: None,
        threads: 8,
        requests: 400,
        clients: 32,
        log: None,
    };
    match flags::read("race_load", &args, FLAGS, &mut options) {
        Ok(Read::Flags(_)) => {}
        Ok(Read::Help | Read::Version) => {
            print!(
                "race_load: one loaded run of a proxy in pool mode\n\nOPTIONS\n{}",
                flags::help(FLAGS)
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("race_load: {e}");
            return ExitCode::from(2);
        }
    }
    match run(&options) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("race_load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The run: backends, the proxy, the load, the stop; the line to print.
fn run(options: &Options) -> io::Result<String> {
    let (Some(exe), Some(picker)) = (&options.proxy, &options.picker) else {
        return Err(io::Error::other(
            "--proxy and --picker are required (see --help)",
        ));
    };
    let log = options
        .log
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("race-{picker}.log")));
    let fixture = Fixture::start(
        3,
        FixtureOptions {
            mode: FixtureMode::Reply,
            delay: Duration::ZERO,
            banner: String::new(),
        },
    )?;
    let proxy = start_proxy(exe, picker, options.threads, fixture.addrs(), &log)?;
    let load = LoadOptions {
        target: proxy.addr(),
        clients: options.clients,
        requests: options.requests,
        timeout: REQUEST,
        ..LoadOptions::default()
    };
    let report = run_closed_loop(&load);
    // Stopped whatever happened, so that it prints its last reports.
    let status = proxy.stop_with(Signal::SIGTERM, STOP);
    let report = report?;
    let tsan_reports = std::fs::read_to_string(&log)?.matches(TSAN_RACE).count();
    let served: Vec<String> = fixture
        .addrs()
        .iter()
        .map(|b| {
            let tag = format!("port {}", b.port());
            report
                .per_backend
                .get(&tag)
                .copied()
                .unwrap_or(0)
                .to_string()
        })
        .collect();
    fixture.stop();
    let exit = match status {
        Ok(status) => status
            .code()
            .map_or_else(|| status.to_string(), |code| code.to_string()),
        Err(e) => format!("killed ({e})"),
    };
    Ok(format!(
        "picker={picker} tsan_reports={tsan_reports} ok={}/{} served={} exit={exit}",
        report.ok,
        options.requests,
        served.join("/")
    ))
}

/// The proxy in pool mode in front of `backends`, its stderr in `log`,
/// ready once it says where it listens.
fn start_proxy(
    exe: &Path,
    picker: &str,
    threads: usize,
    backends: &[std::net::SocketAddr],
    log: &Path,
) -> io::Result<ChildProcess> {
    let mut args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--mode",
        "pool",
        "--picker",
        picker,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(["--threads".to_string(), threads.to_string()]);
    for backend in backends {
        args.extend(["--backend".to_string(), backend.to_string()]);
    }
    Spawn::new("proxy", exe)
        .args(args)
        .stderr(Capture::File(log.to_path_buf()))
        .ready(Ready::Announced(1), START)
        .start()
}
