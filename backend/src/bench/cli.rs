//! The `bench` command line.
//!
//! ```text
//! bench --proxy target/release/proxy [--quick] [--out DIR] [--no-peers] [--only a,b,c]
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
    /// Print the version.
    Version,
}

/// The text of `bench --help`.
pub fn help() -> String {
    format!("{HELP_HEAD}{}{HELP_TAIL}", flags::help(FLAGS))
}

const HELP_HEAD: &str = "\
bench: the benchmark harness (issue 4): our proxy, HAProxy and nginx, side by side

USAGE
    bench --proxy PATH [--quick] [--out DIR] [--no-peers] [--only LIST]

Usually run through scripts/bench.sh, which builds the release binaries first.

OPTIONS
";

const HELP_TAIL: &str = "
WORKLOADS
    a   the seed's: 50 ms backend, a new connection per request; every mode of ours
    b   a CPU-bound backend: the pool's plateau at the core count
    c   the proxy's own cost: connections/s, keep-alive, bulk MiB/s, idle memory
";

/// What the flags set; [`parse`] turns it into a [`Config`].
#[derive(Debug)]
struct Args {
    proxy: Option<PathBuf>,
    quick: bool,
    out: Option<PathBuf>,
    peers: bool,
    workloads: [bool; 3],
}

impl Default for Args {
    fn default() -> Self {
        Args {
            proxy: None,
            quick: false,
            out: None,
            peers: true,
            workloads: [true; 3],
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
        name: "--quick",
        arg: "",
        needs: "",
        help: "tiny sizes: checks the harness end to end in well under a minute",
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
        help: "only these workloads, comma-separated: a, b, c  [default: a,b,c]",
        set: |a, v| {
            a.workloads = parse_workloads(v)?;
            Ok(())
        },
    },
];

/// `a,c` as which of the workloads A, B, C run.
fn parse_workloads(list: &str) -> Result<[bool; 3], String> {
    let mut workloads = [false; 3];
    for name in list.split(',') {
        match name.trim().to_ascii_lowercase().as_str() {
            "a" => workloads[0] = true,
            "b" => workloads[1] = true,
            "c" => workloads[2] = true,
            other => return Err(format!("unknown workload '{other}'; use a, b or c")),
        }
    }
    Ok(workloads)
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
        quick,
        out,
        peers: read.peers,
        workloads: read.workloads,
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
        assert!(!c.peers);
        assert_eq!(c.workloads, [true, false, true]);
        assert!(matches!(parse(&args("--help")), Ok(Command::Help)));
        let error = |s: &str| parse(&args(s)).unwrap_err().to_string();
        assert!(error("").contains("--proxy PATH is required"));
        assert!(error("--proxy p --only d").contains("unknown workload"));
        assert!(error("--proxy p --fast").contains("unknown option"));
        assert!(error("--proxy p --fast").ends_with("(see 'bench --help')"));
        assert!(error("--proxy").contains("--proxy needs the path of the proxy binary"));
        assert!(matches!(parse(&args("-V")), Ok(Command::Version)));
    }
}
