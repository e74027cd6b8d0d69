//! The `bench` command line.
//!
//! ```text
//! bench --proxy target/release/proxy [--baseline PATH] [--quick] [--out DIR] [--no-peers] [--only a,b,c,wrk,census,held]
//! ```
//!
//! One table of flags, read by the proxy's own flag reader
//! (`proxy::settings::flags`), as every command line of the workspace is.

use std::path::PathBuf;

use proxy::settings::flags::{self, Flag, Read, UsageError};

/// What a run should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our proxy binary.
    pub proxy: PathBuf,
    /// An earlier build of it, measured beside it in the same rounds.
    pub baseline: Option<PathBuf>,
    /// Tiny sizes, for checking the harness.
    pub quick: bool,
    /// Where BENCHMARKS.md and bench/*.svg go.
    pub out: PathBuf,
    /// Measure HAProxy and nginx when installed.
    pub peers: bool,
    /// Which parts of the benchmark run.
    pub parts: Parts,
    /// The command as the report quotes it.
    pub command: String,
}

/// The default output directory of a full run: the committed report.
pub const DEFAULT_OUT: &str = "docs";
/// The default output directory of a quick run: never the committed report.
pub const DEFAULT_QUICK_OUT: &str = "target/bench-quick";

/// The parts of a run `--only` picks from: the three workloads, workload
/// C's keep-alive HTTP through wrk, and the system-call census.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Workload A: the seed's.
    pub a: bool,
    /// Workload B: CPU bound.
    pub b: bool,
    /// Workload C: the proxy's own cost.
    pub c: bool,
    /// Keep-alive HTTP through wrk (a row of workload C's tables).
    pub wrk: bool,
    /// System calls per connection and per request (strace).
    pub census: bool,
    /// Idle connections held beside a keep-alive load.
    pub held: bool,
}

impl Parts {
    /// Every part: what a run without `--only` does.
    pub const ALL: Parts = Parts {
        a: true,
        b: true,
        c: true,
        wrk: true,
        census: true,
        held: true,
    };

    const NONE: Parts = Parts {
        a: false,
        b: false,
        c: false,
        wrk: false,
        census: false,
        held: false,
    };
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the benchmark.
    Run(Config),
    /// Print the help.
    Help,
    /// Print the version.
    Version,
}

/// The text of `bench --help`.
pub fn help() -> String {
    format!("{HELP_HEAD}{}{HELP_TAIL}", flags::help(FLAGS))
}

const HELP_HEAD: &str = "\
bench: the benchmark harness: our proxy, HAProxy and nginx, side by side

USAGE
    bench --proxy PATH [--quick] [--out DIR] [--no-peers] [--only LIST]

Usually run through scripts/bench.sh, which builds the release binaries first.

OPTIONS
";

const HELP_TAIL: &str = "
PARTS (--only)
    a       the seed's: 50 ms backend, a new connection per request; every mode of ours
    b       a CPU-bound backend: the pool's plateau at the core count
    c       the proxy's own cost: connections/s, keep-alive, bulk MiB/s, idle memory
    wrk     workload C's keep-alive as HTTP: wrk to nginx serving a small file
            (needs wrk and nginx; with --no-peers, direct and ours only)
    census  system calls per new connection and per keep-alive request, one
            thread each, counted by strace -c (needs strace and ptrace; with
            --no-peers, ours only)
    held    0, 3,000 and 7,000 idle connections held while a keep-alive load
            runs: CPU per request and memory per held connection, one thread each
";

/// What the flags set; [`parse`] turns it into a [`Config`].
#[derive(Debug)]
struct Args {
    proxy: Option<PathBuf>,
    baseline: Option<PathBuf>,
    quick: bool,
    out: Option<PathBuf>,
    peers: bool,
    parts: Parts,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            proxy: None,
            baseline: None,
            quick: false,
            out: None,
            peers: true,
            parts: Parts::ALL,
        }
    }
}

/// Every flag: its name, its value, its help, what it sets.
const FLAGS: &[Flag<Args>] = &[
    Flag {
        name: "--proxy",
        arg: "PATH",
        needs: "the path of the proxy binary",
        help: "the proxy binary to measure (required)",
        set: |a, v| {
            a.proxy = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--baseline",
        arg: "PATH",
        needs: "the path of a proxy binary",
        help: "an earlier build to measure beside --proxy in workload C and the\n\
               \x20                            census, in the same interleaved rounds (\"baseline\" rows)",
        set: |a, v| {
            a.baseline = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--quick",
        arg: "",
        needs: "",
        help: "tiny sizes: checks the harness end to end in under a minute",
        set: |a, _| {
            a.quick = true;
            Ok(())
        },
    },
    Flag {
        name: "--out",
        arg: "DIR",
        needs: "a directory",
        help: "write DIR/BENCHMARKS.md and DIR/bench/*.svg\n\
               \x20                            [default: docs; with --quick: target/bench-quick, so\n\
               \x20                            a quick run never overwrites the committed report\n\
               \x20                            unless --out says so]",
        set: |a, v| {
            a.out = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        name: "--no-peers",
        arg: "",
        needs: "",
        help: "do not measure HAProxy and nginx even if installed",
        set: |a, _| {
            a.peers = false;
            Ok(())
        },
    },
    Flag {
        name: "--only",
        arg: "LIST",
        needs: "a list like a,c",
        help: "only these parts, comma-separated: a, b, c, wrk, census, held\n\
               \x20                            [default: all of them]",
        set: |a, v| {
            a.parts = parse_parts(v)?;
            Ok(())
        },
    },
];

/// `a,census` as which parts run.
fn parse_parts(list: &str) -> Result<Parts, String> {
    let mut parts = Parts::NONE;
    for name in list.split(',') {
        let part = match name.trim().to_ascii_lowercase().as_str() {
            "a" => &mut parts.a,
            "b" => &mut parts.b,
            "c" => &mut parts.c,
            "wrk" => &mut parts.wrk,
            "census" => &mut parts.census,
            "held" => &mut parts.held,
            other => {
                return Err(format!(
                    "unknown part '{other}'; use a, b, c, wrk, census or held"
                ));
            }
        };
        *part = true;
    }
    Ok(parts)
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    let mut read = Args::default();
    match flags::read("bench", args, FLAGS, &mut read)? {
        Read::Help => return Ok(Command::Help),
        Read::Version => return Ok(Command::Version),
        Read::Flags(_) => {}
    }
    let proxy = read.proxy.ok_or_else(|| {
        UsageError::new(
            "bench",
            "--proxy PATH is required: the proxy binary to measure",
        )
    })?;
    let quick = read.quick;
    let out = read.out.unwrap_or_else(|| {
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
        baseline: read.baseline,
        quick,
        out,
        peers: read.peers,
        parts: read.parts,
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
    fn the_help_says_the_default_directories() {
        let text = help();
        let defaults = format!("[default: {DEFAULT_OUT}; with --quick: {DEFAULT_QUICK_OUT},");
        assert!(text.contains(&defaults), "{text}");
        for flag in FLAGS {
            assert!(text.contains(flag.name), "the help lacks {}", flag.name);
        }
    }

    #[test]
    fn options_parse() {
        let c = config("--proxy target/release/proxy --no-peers --only a,C");
        assert_eq!(c.proxy, PathBuf::from("target/release/proxy"));
        assert_eq!(c.baseline, None);
        let with_baseline = config("--proxy p --baseline old/proxy");
        assert_eq!(with_baseline.baseline, Some(PathBuf::from("old/proxy")));
        assert!(!c.peers);
        assert_eq!(
            c.parts,
            Parts {
                a: true,
                c: true,
                ..Parts::NONE
            }
        );
        let c = config("--proxy p --only census,wrk");
        assert!(c.parts.census && c.parts.wrk && !c.parts.a && !c.parts.c);
        assert_eq!(config("--proxy p").parts, Parts::ALL);
        assert!(matches!(parse(&args("--help")), Ok(Command::Help)));
        let error = |s: &str| parse(&args(s)).unwrap_err().to_string();
        assert!(error("").contains("--proxy PATH is required"));
        assert!(error("--proxy p --only d").contains("unknown part"));
        assert!(error("--proxy p --fast").contains("unknown option"));
        assert!(error("--proxy p --fast").ends_with("(see 'bench --help')"));
        assert!(error("--proxy").contains("--proxy needs the path of the proxy binary"));
        assert!(matches!(parse(&args("-V")), Ok(Command::Version)));
    }
}
