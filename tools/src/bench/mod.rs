//! # The benchmark harness
//!
//! Reproduces the seed's epoll-against-threads table on our runtime,
//! explains it with numbers, and sets our proxy beside HAProxy and nginx,
//! in one run, on one machine, into one report (docs/BENCHMARKS.md):
//!
//! ```text
//!   scripts/bench.sh ──▶ target/release/bench --proxy target/release/proxy
//!        │
//!        ├─ workloads A, B, C  (workloads.rs: which rows; sizes.rs: how big)
//!        │     each row: start a subject (subject.rs, peers.rs, as a
//!        │                             crate::process::child process)
//!        │               measure it   (measure.rs: the load client from
//!        │                             crate::load, CPU and memory (the
//!        │                             subject's and the machine's) from
//!        │                             /proc via crate::process::procstat, TCP
//!        │                             segments via segments.rs)
//!        │               stop it
//!        ├─ C's keep-alive as HTTP (http.rs: wrk.rs against nginx backends)
//!        ├─ the system-call census (census.rs: strace.rs on each proxy)
//!        ├─ idle connections held beside a keep-alive load (held.rs)
//!        └─ report/ (report/mod.rs, charts.rs, svg.rs) ──▶ BENCHMARKS.md, bench/*.svg
//! ```
//!
//! The pieces, each in a file of its own:
//!
//! - [`cli`]: the command line and [`cli::Config`].
//! - [`machine`]: the machine's description.
//! - [`peers`]: HAProxy and nginx: detection, configuration, start.
//! - [`subject`]: what a row measures (direct, one of our modes, a peer).
//! - [`measure`]: one measurement, the same way for every subject.
//! - [`segments`]: TCP segments sent, machine-wide, around a measurement.
//! - [`sizes`]: how big each measurement is (full or quick).
//! - [`workloads`]: the three workloads: which rows, measured how.
//! - [`repeat`]: workload C's rates and bulk rows, measured several times
//!   interleaved, and the median run of each subject.
//! - [`http`] and [`wrk`]: workload C's keep-alive as HTTP, through wrk.
//! - [`census`] and [`strace`]: system calls per connection and request.
//! - [`held`]: idle connections held beside a keep-alive load.
//! - [`report`]: a room of its own: what a run found ([`report::results`],
//!   plain data the files above fill) and the report written from it, with
//!   its charts.
//!
//! The harness never panics on what the OS or a peer can fail: a row that
//! cannot run is a row marked failed, with the reason.
//!
//! May import: [`crate::load`] (the load client), [`crate::process`] (child
//! processes, /proc); [`backend::fixture`] (the backends a row measures
//! through), the proxy's settings and calendar, the runtime. Never
//! [`crate::demo`], [`crate::cluster`] or [`crate::race`]: they are programs
//! beside it.

pub mod census;
pub mod cli;
pub mod held;
pub mod http;
pub mod machine;
pub mod measure;
pub mod peers;
pub mod repeat;
pub mod report;
pub mod segments;
pub mod sizes;
pub mod strace;
pub mod subject;
pub mod workloads;
pub mod wrk;

use std::fs;
use std::io;
use std::path::Path;
use std::time::Instant;

use cli::{Command, Config};
use machine::Machine;
use report::results::Results;
use sizes::Sizes;
use subject::Setup;

/// Descriptors the harness keeps for itself beyond the idle connections.
const SPARE_DESCRIPTORS: u64 = 512;

/// Runs the benchmark `config` describes, writes the report and its charts
/// under `config.out`, and returns what it found.
pub fn run(config: &Config) -> io::Result<Results> {
    let started = Instant::now();
    check_proxy(config)?;
    let mut notes = Vec::new();
    // Thousands of idle connections need thousands of descriptors, here
    // (both the client's and the fixture's ends) and in the proxy, which as
    // our child inherits the raised limit.
    let nofile = runtime::fd_limit::raise_nofile_limit()?;
    let sizes = fit_sizes(config.quick, nofile, &mut notes);
    let installed = find_peers(config);
    let setup = Setup {
        proxy: config.proxy.clone(),
        baseline: config.baseline.clone(),
        installed: installed.clone(),
        nofile,
    };
    let machine = Machine::describe();
    let date = machine::utc_now();
    let parts = config.parts;
    let a = parts
        .a
        .then(|| workloads::workload_a(&setup, &sizes))
        .transpose()?;
    let b = parts
        .b
        .then(|| workloads::workload_b(&setup, &sizes))
        .transpose()?;
    let c = parts
        .c
        .then(|| workloads::workload_c(&setup, &sizes))
        .transpose()?;
    let http = parts.wrk.then(|| http::http_keep_alive(&setup, &sizes));
    let census = parts
        .census
        .then(|| census::census(&setup, &sizes, &config.out))
        .transpose()?;
    let room = nofile.saturating_sub(SPARE_DESCRIPTORS) / 2;
    let held = parts
        .held
        .then(|| held::held(&setup, &sizes, room as usize))
        .transpose()?;
    let results = Results {
        machine,
        date,
        command: config.command.clone(),
        sizes,
        installed,
        nofile,
        a,
        b,
        c,
        http,
        census,
        held,
        elapsed: started.elapsed(),
        notes,
    };
    write_report(&results, &config.out)?;
    Ok(results)
}

/// The proxy under test must be there before anything starts.
fn check_proxy(config: &Config) -> io::Result<()> {
    if config.proxy.is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no proxy binary at {} (build it: cargo build --release -p proxy)",
            config.proxy.display()
        ),
    ))
}

/// The full or quick sizes, cut down to what this machine allows: the
/// idle connections to the descriptor limit `nofile`, the connection-rate
/// runs to the ephemeral ports. Each cut is a note for the report.
fn fit_sizes(quick: bool, nofile: u64, notes: &mut Vec<String>) -> Sizes {
    let mut sizes = if quick { Sizes::quick() } else { Sizes::full() };
    // Each idle connection is two descriptors here (the client's end and
    // the fixture's) and two in the proxy.
    let room = nofile.saturating_sub(SPARE_DESCRIPTORS) / 2;
    if (sizes.idle as u64) > room {
        notes.push(format!(
            "the descriptor limit ({nofile}) allows only {room} idle connections instead of {}",
            sizes.idle
        ));
        sizes.idle = room as usize;
    }
    if let Some(ports) = machine::ephemeral_ports() {
        sizes.fit_ephemeral_ports(ports);
        notes.push(format!(
            "connection-rate runs (workload C) stop after {} connections or {:.1} s, whichever \
             comes first: past half of the {ports} ephemeral ports in TIME_WAIT, connect(2) \
             slows down and the run would measure the port search, not the proxy",
            sizes.connect_requests,
            sizes.run_for.as_secs_f64()
        ));
    }
    sizes
}

/// The peers to measure beside ours (none with `--no-peers`); says on
/// stderr which will not be measured, and why.
fn find_peers(config: &Config) -> peers::Installed {
    let installed = if config.peers {
        peers::detect()
    } else {
        peers::Installed::none("not asked for (--no-peers)")
    };
    for (name, found) in [
        ("HAProxy", installed.haproxy.as_ref().err()),
        ("nginx", installed.nginx.as_ref().err()),
    ] {
        if let Some(why) = found {
            eprintln!("bench: {name} will not be measured: {why}");
        }
    }
    installed
}

/// Writes `out/BENCHMARKS.md` and `out/bench/*.svg`, keeping the
/// hand-written interpretation of an existing report.
pub fn write_report(results: &Results, out: &Path) -> io::Result<()> {
    let report_path = out.join("BENCHMARKS.md");
    let old = fs::read_to_string(&report_path).unwrap_or_default();
    let interpretation = report::carry_interpretation(&old);
    let (markdown, charts) = report::render(results, interpretation.as_deref());
    let chart_dir = out.join("bench");
    fs::create_dir_all(&chart_dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", chart_dir.display()),
        )
    })?;
    for chart in &charts {
        fs::write(chart_dir.join(&chart.file), &chart.svg)?;
    }
    fs::write(&report_path, markdown).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot write {}: {e}", report_path.display()),
        )
    })
}

/// The whole `bench` program; returns the exit status: 0 done, 1 failed,
/// 2 bad command line.
pub fn main_with_args(args: &[String]) -> i32 {
    let config = match cli::parse(args) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            print!("{}", cli::help());
            return 0;
        }
        Ok(Command::Version) => {
            println!("bench {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("bench: {e}");
            return 2;
        }
    };
    match run(&config) {
        Ok(results) => {
            eprintln!(
                "bench: done in {:.0} s: {} and {}",
                results.elapsed.as_secs_f64(),
                config.out.join("BENCHMARKS.md").display(),
                config.out.join("bench").display()
            );
            0
        }
        Err(e) => {
            eprintln!("bench: {e}");
            1
        }
    }
}
