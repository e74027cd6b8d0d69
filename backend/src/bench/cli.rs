//! The `bench` command line.
//!
//! ```text
//! bench --proxy target/release/proxy [--quick] [--out DIR] [--no-peers] [--only a,b,c]
//! ```

use std::path::PathBuf;

/// What a run should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our proxy binary.
    pub proxy: PathBuf,
    /// Tiny sizes, for checking the harness.
    pub quick: bool,
    /// Where BENCHMARKS.md and bench/*.svg go.
    pub out: PathBuf,
    /// Measure HAProxy and nginx when installed.
    pub peers: bool,
    /// Which workloads: A, B, C.
    pub workloads: [bool; 3],
    /// The command as the report quotes it.
    pub command: String,
}

/// The default output directory of a full run: the committed report.
pub const DEFAULT_OUT: &str = "docs";
/// The default output directory of a quick run: never the committed report.
pub const DEFAULT_QUICK_OUT: &str = "target/bench-quick";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the benchmark.
    Run(Config),
    /// Print the help.
    Help,
}

/// The text of `bench --help`.
pub fn help() -> String {
    format!(
        "\
bench: the benchmark harness (issue 4): our proxy, HAProxy and nginx, side by side

USAGE
    bench --proxy PATH [--quick] [--out DIR] [--no-peers] [--only LIST]

Usually run through scripts/bench.sh, which builds the release binaries first.

OPTIONS
    --proxy PATH    the proxy binary to measure (required)
    --quick         tiny sizes: checks the harness end to end in well under a minute
    --out DIR       write DIR/BENCHMARKS.md and DIR/bench/*.svg
                    [default: {DEFAULT_OUT}; with --quick: {DEFAULT_QUICK_OUT}, so a quick run
                    never overwrites the committed report unless --out says so]
    --no-peers      do not measure HAProxy and nginx even if installed
    --only LIST     only these workloads, comma-separated: a, b, c  [default: a,b,c]
    -h, --help      this text

WORKLOADS
    a   the seed's: 50 ms backend, a new connection per request; every mode of ours
    b   a CPU-bound backend: the pool's plateau at the core count
    c   the proxy's own cost: connections/s, keep-alive, bulk MiB/s, idle memory
"
    )
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut proxy = None;
    let mut quick = false;
    let mut out = None;
    let mut peers = true;
    let mut workloads = [true; 3];
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--proxy" => {
                proxy = Some(PathBuf::from(
                    it.next()
                        .ok_or("--proxy needs the path of the proxy binary")?,
                ))
            }
            "--quick" => quick = true,
            "--out" => out = Some(PathBuf::from(it.next().ok_or("--out needs a directory")?)),
            "--no-peers" => peers = false,
            "--only" => {
                let list = it.next().ok_or("--only needs a list like a,c")?;
                workloads = [false; 3];
                for name in list.split(',') {
                    match name.trim().to_ascii_lowercase().as_str() {
                        "a" => workloads[0] = true,
                        "b" => workloads[1] = true,
                        "c" => workloads[2] = true,
                        other => {
                            return Err(format!(
                                "--only: unknown workload '{other}'; use a, b or c"
                            ));
                        }
                    }
                }
            }
            other => return Err(format!("unknown option '{other}' (see 'bench --help')")),
        }
    }
    let proxy = proxy.ok_or("--proxy PATH is required: the proxy binary to measure")?;
    let out = out.unwrap_or_else(|| {
        PathBuf::from(if quick {
            DEFAULT_QUICK_OUT
        } else {
            DEFAULT_OUT
        })
    });
    // scripts/bench.sh says how it was called; run directly, the arguments do.
    let command = std::env::var("BENCH_COMMAND")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| format!("bench {}", args.join(" ")));
    Ok(Command::Run(Config {
        proxy,
        quick,
        out,
        peers,
        workloads,
        command,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn config(s: &str) -> Config {
        match parse(&args(s)) {
            Ok(Command::Run(config)) => config,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn a_quick_run_never_defaults_to_the_committed_report() {
        assert_eq!(config("--proxy p").out, PathBuf::from("docs"));
        assert_eq!(
            config("--proxy p --quick").out,
            PathBuf::from(DEFAULT_QUICK_OUT)
        );
        assert_eq!(
            config("--proxy p --quick --out docs").out,
            PathBuf::from("docs")
        );
    }

    #[test]
    fn options_parse() {
        let c = config("--proxy target/release/proxy --no-peers --only a,C");
        assert_eq!(c.proxy, PathBuf::from("target/release/proxy"));
        assert!(!c.peers);
        assert_eq!(c.workloads, [true, false, true]);
        assert!(matches!(parse(&args("--help")), Ok(Command::Help)));
        assert!(
            parse(&args(""))
                .unwrap_err()
                .contains("--proxy PATH is required")
        );
        assert!(
            parse(&args("--proxy p --only d"))
                .unwrap_err()
                .contains("unknown workload")
        );
        assert!(
            parse(&args("--proxy p --fast"))
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(parse(&args("--proxy")).is_err());
    }
}
