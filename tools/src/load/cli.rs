//! `loadgen`: the load client ([`crate::load`]) on the command line.
//!
//! ```text
//! loadgen --target 127.0.0.1:8080 --clients 64 --duration 5s         # requests, new connections
//! loadgen --target 127.0.0.1:8080 --clients 64 --keepalive 100       # requests, keep-alive (echo)
//! loadgen --target 127.0.0.1:8080 --bulk 256 --streams 4             # MiB/s through and back
//! loadgen --target 127.0.0.1:8080 --idle 5000 --hold 10s             # held idle connections
//! ```
//!
//! It prints a summary for people, or with `--json` exactly one line of
//! JSON on stdout for scripts. Either way it says how much CPU it used
//! itself: a load client that saturates its core measures itself, not the
//! server, and the reader must be able to tell.
//!
//! The command line is read in two steps: `read_flags` turns the words
//! into typed values, each checked on its own, by one table of flags
//! (`FLAGS`) and the proxy's own flag reader (`proxy::settings::flags`,
//! the workspace's one); `command` checks how they combine and picks the
//! run. Every mistake is a [`UsageError`] and exit status 2.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use crate::load::{
    BulkOptions, LoadOptions, MIB, Pattern, cpu_share, open_idle, run_bulk, run_closed_loop,
};
use proxy::settings::flags::{self, Flag, Read, UsageError, count};
use proxy::settings::words::parse_duration;

/// From this share of one core up, the summary warns that the client may
/// have been the limit (the closed loop and bulk runs use one thread).
const SATURATED: f64 = 0.9;

/// How long `--idle` holds its connections unless told otherwise.
const DEFAULT_HOLD: Duration = Duration::from_secs(10);

/// How long any one step may take unless `--timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `--bulk` streams over unless `--streams` says otherwise.
const DEFAULT_STREAMS: usize = 1;

/// The `loadgen` binary: the process's arguments, run, and the exit status
/// [`main_with_args`] gives.
pub fn main() -> ExitCode {
    let args = proxy::settings::flags::program_args();
    ExitCode::from(main_with_args(&args))
}

/// The whole program: parses `args` (without the program name), runs, and
/// returns the exit status: 0 (done, or help), 1 (the run failed: it could
/// not start, a bulk echo was not intact, an idle connection died), 2 (bad
/// command line). A closed loop whose requests failed still exits 0: its
/// errors are part of the measurement, counted in the report.
pub fn main_with_args(args: &[String]) -> u8 {
    let command = match read_flags(args).and_then(command) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return 2;
        }
    };
    if let Command::Help = command {
        print!("{}", help());
        return 0;
    }
    // Before any socket: --idle 5000 or 1,000 clients need more descriptors
    // than the usual soft limit of 1024.
    if let Err(e) = runtime::fd_limit::raise_nofile_limit() {
        eprintln!("loadgen: warning: cannot raise the open-file limit: {e}");
    }
    let outcome = match command {
        Command::Help => Ok(()),
        Command::Closed { options, json } => closed_loop(&options, json),
        Command::Bulk { options, json } => bulk(&options, json),
        Command::Idle {
            target,
            count,
            hold,
            timeout,
        } => idle(target, count, hold, timeout),
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("loadgen: {e}");
            1
        }
    }
}

fn help() -> String {
    format!(
        "\
loadgen: the load client; a summary for people, or one JSON line with --json

USAGE
    loadgen --target ADDR [--clients C] [--requests N | --duration DUR]
            [--timeout DUR] [--keepalive K] [--json]
    loadgen --target ADDR --bulk MIB [--streams S] [--timeout DUR] [--json]
    loadgen --target ADDR --idle K [--hold DUR] [--timeout DUR]

RUNS
    (default)      closed loop: C clients, each sending its next request when
                   the last is answered, until N requests or DUR have passed.
                   Each request a new connection: \"GET n\\n\", FIN, the reply
                   to EOF (needs a `backend --mode reply` behind the target).
    --keepalive K  the same, K requests per connection: a line out, the same
                   line back (needs `--mode echo`).
    --bulk MIB     MIB mebibytes of pseudo-random bytes through the target and
                   back, split over S streams, checksummed both ways (echo).
    --idle K       opens K connections, one echo round trip each, holds them
                   idle for DUR, then checks each still answers and closes.

OPTIONS
{options}
    DUR is a whole number with a unit: 500ms, 2s, 1m.

CPU
    The summary ends with the CPU the client used and its share of one core.
    The closed loop and bulk runs use one thread: near 1.00 of one core the
    client itself may be the limit, and the numbers are its, not the target's.

EXIT STATUS
    0 done (request errors are counted in the report, not fatal); 1 the run
    failed (could not start, a bulk echo not intact, an idle connection lost);
    2 a bad command line.
",
        options = flags::help(FLAGS)
    )
}

// ---- the command line -------------------------------------------------------

/// Every flag's value, each checked on its own; how they combine is
/// [`command`]'s business.
#[derive(Debug, Default)]
struct Flags {
    json: bool,
    target: Option<SocketAddr>,
    clients: Option<usize>,
    requests: Option<usize>,
    duration: Option<Duration>,
    timeout: Option<Duration>,
    keepalive: Option<usize>,
    bulk_mib: Option<u64>,
    streams: Option<usize>,
    idle: Option<usize>,
    hold: Option<Duration>,
}

/// What to run.
#[derive(Debug)]
enum Command {
    Help,
    Closed {
        options: LoadOptions,
        json: bool,
    },
    Bulk {
        options: BulkOptions,
        json: bool,
    },
    Idle {
        target: SocketAddr,
        count: usize,
        hold: Duration,
        timeout: Duration,
    },
}

/// Reads the words of the command line into [`Flags`], with the names of
/// the flags given (for [`command`]'s "does not apply"); `None` for the
/// help. `--help` anywhere wins over everything else, mistakes included.
fn read_flags(args: &[String]) -> Result<Option<(Flags, Vec<&str>)>, UsageError> {
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        return Ok(None);
    }
    let mut flags = Flags::default();
    match flags::read("loadgen", args, FLAGS, &mut flags)? {
        Read::Flags(given) => Ok(Some((flags, given))),
        // -V: this tool has no version of its own to tell; the help says
        // what it is.
        Read::Help | Read::Version => Ok(None),
    }
}

/// Every flag: its name, its value, its help, what it sets.
const FLAGS: &[Flag<Flags>] = &[
    Flag {
        name: "--target",
        arg: "ADDR",
        needs: "a value: IP:PORT, like 127.0.0.1:8080",
        help: "where to connect: IP:PORT (a proxy, or a backend)",
        set: |f, v| set(&mut f.target, address(v)?),
    },
    Flag {
        name: "--clients",
        arg: "C",
        needs: "a value: a number of clients",
        help: "concurrent clients (default 64)",
        set: |f, v| set(&mut f.clients, count(v)?),
    },
    Flag {
        name: "--requests",
        arg: "N",
        needs: "a value: a number of requests",
        help: "requests in total (default 1000)",
        set: |f, v| set(&mut f.requests, count(v)?),
    },
    Flag {
        name: "--duration",
        arg: "DUR",
        needs: "a value: a duration like 5s",
        help: "issue requests for DUR instead of counting them",
        set: |f, v| set(&mut f.duration, duration(v)?),
    },
    Flag {
        name: "--timeout",
        arg: "DUR",
        needs: "a value: a duration like 10s",
        help: "the longest one request, or one stalled step, may take\n\
               \x20                            (default 10s)",
        set: |f, v| set(&mut f.timeout, duration(v)?),
    },
    Flag {
        name: "--keepalive",
        arg: "K",
        needs: "a value: requests per connection",
        help: "K requests per connection (an echo backend)",
        set: |f, v| set(&mut f.keepalive, count(v)?),
    },
    Flag {
        name: "--bulk",
        arg: "MIB",
        needs: "a value: a number of MiB",
        help: "MIB mebibytes through the target and back",
        set: |f, v| set(&mut f.bulk_mib, count(v)? as u64),
    },
    Flag {
        name: "--streams",
        arg: "S",
        needs: "a value: a number of streams",
        help: "bulk connections at once (default 1)",
        set: |f, v| set(&mut f.streams, count(v)?),
    },
    Flag {
        name: "--idle",
        arg: "K",
        needs: "a value: a number of connections",
        help: "K idle connections, held for --hold",
        set: |f, v| set(&mut f.idle, count(v)?),
    },
    Flag {
        name: "--hold",
        arg: "DUR",
        needs: "a value: a duration like 10s",
        help: "how long --idle holds its connections (default 10s)",
        set: |f, v| set(&mut f.hold, duration(v)?),
    },
    Flag {
        name: "--json",
        arg: "",
        needs: "",
        help: "print only the report, as one line of JSON",
        set: |f, _| {
            f.json = true;
            Ok(())
        },
    },
];

/// Stores `value` in `slot` unless the flag was already given.
fn set<T>(slot: &mut Option<T>, value: T) -> Result<(), String> {
    if slot.is_some() {
        return Err("given twice".to_string());
    }
    *slot = Some(value);
    Ok(())
}

fn address(value: &str) -> Result<SocketAddr, String> {
    value
        .parse()
        .map_err(|_| format!("'{value}' is not IP:PORT (e.g. 127.0.0.1:8080)"))
}

/// A duration above zero, read by the proxy's parser (the workspace's one:
/// `500ms`, `2s`, `1m`, `1h`, as in the proxy's settings).
fn duration(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        d if d.is_zero() => Err(format!("'{value}': a duration above zero is needed")),
        d => Ok(d),
    }
}

/// A mistake in how the flags combine.
fn usage(message: impl Into<String>) -> UsageError {
    UsageError::new("loadgen", message)
}

/// Checks how the flags combine and builds the run they ask for (`None`
/// from [`read_flags`]: the help).
fn command(read: Option<(Flags, Vec<&str>)>) -> Result<Command, UsageError> {
    let Some((flags, given)) = read else {
        return Ok(Command::Help);
    };
    let target = flags
        .target
        .ok_or_else(|| usage("--target ADDR is required: where to send the load"))?;
    let timeout = flags.timeout.unwrap_or(DEFAULT_TIMEOUT);
    match (flags.bulk_mib, flags.idle) {
        (Some(_), Some(_)) => Err(usage("--bulk and --idle are two different runs; give one")),
        (Some(mib), None) => {
            refuse(&given, "--bulk", BULK_REFUSES)?;
            bulk_command(&flags, target, mib, timeout)
        }
        (None, Some(count)) => {
            refuse(&given, "--idle", IDLE_REFUSES)?;
            Ok(idle_command(&flags, target, count, timeout))
        }
        (None, None) => {
            refuse(&given, "the closed loop", &["--streams", "--hold"])?;
            closed_loop_command(&flags, target, timeout)
        }
    }
}

/// What the closed loop's and the idle run's flags mean to a bulk run: nothing.
const BULK_REFUSES: &[&str] = &[
    "--clients",
    "--requests",
    "--duration",
    "--keepalive",
    "--hold",
];

/// What the closed loop's and the bulk run's flags, and `--json`, mean to
/// an idle run: nothing.
const IDLE_REFUSES: &[&str] = &[
    "--clients",
    "--requests",
    "--duration",
    "--keepalive",
    "--streams",
    "--json",
];

/// The bulk run's options (`--bulk MIB`).
fn bulk_command(
    flags: &Flags,
    target: SocketAddr,
    mib: u64,
    timeout: Duration,
) -> Result<Command, UsageError> {
    let bytes = mib
        .checked_mul(MIB)
        .ok_or_else(|| usage(format!("--bulk {mib}: too many MiB")))?;
    let options = BulkOptions {
        target,
        bytes,
        streams: flags.streams.unwrap_or(DEFAULT_STREAMS),
        timeout,
    };
    Ok(Command::Bulk {
        options,
        json: flags.json,
    })
}

/// The idle run's options (`--idle COUNT`).
fn idle_command(flags: &Flags, target: SocketAddr, count: usize, timeout: Duration) -> Command {
    Command::Idle {
        target,
        count,
        hold: flags.hold.unwrap_or(DEFAULT_HOLD),
        timeout,
    }
}

/// The closed loop's options: `--requests` and `--duration` exclude each
/// other, since the run stops at whichever comes first and a reader would
/// not know which one meant it.
fn closed_loop_command(
    flags: &Flags,
    target: SocketAddr,
    timeout: Duration,
) -> Result<Command, UsageError> {
    let defaults = LoadOptions::default();
    let requests = match (flags.requests, flags.duration) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "--requests and --duration both say when to stop; give one",
            ));
        }
        (Some(n), None) => n,
        (None, Some(_)) => usize::MAX,
        (None, None) => defaults.requests,
    };
    let pattern = match flags.keepalive {
        Some(per_connection) => Pattern::KeepAlive { per_connection },
        None => Pattern::NewConnection,
    };
    let options = LoadOptions {
        target,
        clients: flags.clients.unwrap_or(defaults.clients),
        requests,
        duration: flags.duration,
        timeout,
        pattern,
    };
    Ok(Command::Closed {
        options,
        json: flags.json,
    })
}

/// Fails if any of `names` was `given`: it means nothing to `run`.
fn refuse(given: &[&str], run: &str, names: &[&str]) -> Result<(), UsageError> {
    match names.iter().find(|name| given.contains(name)) {
        Some(name) => Err(usage(format!("{name} does not apply to {run}"))),
        None => Ok(()),
    }
}

// ---- the runs ---------------------------------------------------------------

fn closed_loop(options: &LoadOptions, json: bool) -> io::Result<()> {
    if !json {
        println!("loadgen: {}", describe_closed_loop(options));
    }
    let report = run_closed_loop(options)?;
    if json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
        println!("{}", cpu_verdict(report.client_cpu, report.elapsed));
    }
    Ok(())
}

/// One line that says what the closed loop is about to do.
fn describe_closed_loop(options: &LoadOptions) -> String {
    let pattern = match options.pattern {
        Pattern::NewConnection => "a new connection per request".to_string(),
        Pattern::KeepAlive { per_connection } => {
            format!("{per_connection} requests per connection")
        }
    };
    let stop = match options.duration {
        Some(d) => format!("for {d:?}"),
        None => format!("{} requests", options.requests),
    };
    format!(
        "{} clients against {}, {pattern}, {stop}",
        options.clients, options.target
    )
}

fn bulk(options: &BulkOptions, json: bool) -> io::Result<()> {
    if !json {
        println!(
            "loadgen: {} MiB through {} and back, over {} stream(s)",
            options.bytes / MIB,
            options.target,
            options.streams
        );
    }
    let report = run_bulk(options)?;
    if json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
        println!("{}", cpu_verdict(report.client_cpu, report.elapsed));
    }
    if report.intact {
        Ok(())
    } else {
        Err(io::Error::other("the echo did not match what was sent"))
    }
}

fn idle(target: SocketAddr, count: usize, hold: Duration, timeout: Duration) -> io::Result<()> {
    let started = Instant::now();
    let mut conns = open_idle(target, count, timeout)?;
    // Printed (and flushed: stdout is line-buffered) before holding, so a
    // script can measure the proxy while the connections are open.
    println!(
        "loadgen: opened {} idle connections to {target} in {:.2} s; holding them for {hold:?}",
        conns.len(),
        started.elapsed().as_secs_f64()
    );
    thread::sleep(hold);
    conns.verify()?;
    println!(
        "loadgen: after {hold:?} all {} idle connections still answered; closing them",
        conns.len()
    );
    conns.close();
    Ok(())
}

/// The last line of a summary: the client's CPU, its share of one core,
/// and what that share means.
fn cpu_verdict(cpu: Duration, elapsed: Duration) -> String {
    let share = cpu_share(cpu, elapsed);
    let meaning = if share >= SATURATED {
        "near a full core: the client may have been the bottleneck, so read these \
         numbers as a lower bound for the target"
    } else {
        "the client runs on one thread and had CPU to spare"
    };
    format!(
        "client CPU {:.2} s over {:.2} s elapsed = {share:.2} of one core ({meaning})",
        cpu.as_secs_f64(),
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Command, String> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        read_flags(&args)
            .and_then(command)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn durations_are_the_proxys_and_above_zero() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in [
            "",
            "5",
            "ms",
            "1.5s",
            "2 s",
            "-1s",
            "0s",
            "1sec",
            "99999999999999999999s",
        ] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
        assert!(duration("0s").unwrap_err().contains("above zero"));
        assert!(duration("5").unwrap_err().contains("no unit"));
    }

    #[test]
    fn an_hour_long_run_is_accepted() {
        let Ok(Command::Closed { options, .. }) =
            parse("--target 127.0.0.1:9 --clients 8 --duration 1h")
        else {
            panic!("--duration 1h is a closed loop");
        };
        assert_eq!(options.duration, Some(Duration::from_secs(3600)));
        assert_eq!(options.requests, usize::MAX);
    }

    #[test]
    fn a_duration_run_has_no_request_limit() {
        let Ok(Command::Closed { options, json }) =
            parse("--target 127.0.0.1:9 --clients 8 --duration 2s --json")
        else {
            panic!("not a closed loop");
        };
        assert!(json);
        assert_eq!(options.requests, usize::MAX);
        assert_eq!(options.duration, Some(Duration::from_secs(2)));
        assert_eq!(options.clients, 8);
        assert_eq!(options.pattern, Pattern::NewConnection);
    }

    #[test]
    fn keepalive_bulk_and_idle_are_recognized() {
        let Ok(Command::Closed { options, .. }) = parse("--target 127.0.0.1:9 --keepalive 50")
        else {
            panic!("not a closed loop");
        };
        assert_eq!(options.pattern, Pattern::KeepAlive { per_connection: 50 });
        assert_eq!(options.requests, 1000);
        let Ok(Command::Bulk { options, .. }) = parse("--target 127.0.0.1:9 --bulk 3 --streams 2")
        else {
            panic!("not bulk");
        };
        assert_eq!((options.bytes, options.streams), (3 * MIB, 2));
        let Ok(Command::Idle { count, hold, .. }) = parse("--target 127.0.0.1:9 --idle 7") else {
            panic!("not idle");
        };
        assert_eq!((count, hold), (7, DEFAULT_HOLD));
    }

    #[test]
    fn help_wins_over_mistakes() {
        assert!(matches!(parse("--frobnicate --help"), Ok(Command::Help)));
        assert!(matches!(parse("-h"), Ok(Command::Help)));
    }

    #[test]
    fn mistakes_say_what_is_wrong() {
        let error = |line: &str| parse(line).err().unwrap_or_default();
        assert!(error("").contains("--target ADDR is required"));
        assert!(error("--target").contains("needs a value"));
        assert!(error("--target localhost").contains("not IP:PORT"));
        assert!(error("--target 127.0.0.1:9 --clients 0").contains("at least 1"));
        assert!(error("--target 127.0.0.1:9 --clients 1 --clients 2").contains("given twice"));
        assert!(error("--target 127.0.0.1:9 --requests 5 --duration 1s").contains("give one"));
        assert!(error("--target 127.0.0.1:9 --bulk 1 --idle 1").contains("give one"));
        assert!(error("--target 127.0.0.1:9 --bulk 1 --clients 2").contains("does not apply"));
        assert!(error("--target 127.0.0.1:9 --idle 1 --json").contains("does not apply"));
        assert!(error("--target 127.0.0.1:9 --hold 1s").contains("does not apply"));
        assert!(error("--target 127.0.0.1:9 --timeout 0s").contains("above zero"));
        assert!(error("--target 127.0.0.1:9 --bulk 99999999999999").contains("too many MiB"));
        assert!(error("--prot 1").contains("unknown option"));
    }

    #[test]
    fn the_cpu_verdict_warns_near_a_full_core() {
        let second = Duration::from_secs(1);
        let busy = cpu_verdict(Duration::from_millis(950), second);
        assert!(
            busy.contains("0.95 of one core") && busy.contains("bottleneck"),
            "{busy}"
        );
        let idle = cpu_verdict(Duration::from_millis(200), second);
        assert!(
            idle.contains("0.20 of one core") && idle.contains("to spare"),
            "{idle}"
        );
    }
}
