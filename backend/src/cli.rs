//! The `backend` command line, checked before anything starts.
//!
//! ```text
//! backend --port 9001 --port 9002 --delay-ms 50 --mode reply
//! ```
//!
//! Hand-written like the proxy's (no clap): one loop over the arguments,
//! one `match` per flag. Every mistake becomes a [`UsageError`] that says
//! what was wrong and what to do; the binary prints it and exits with
//! status 2.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::fixture::{FixtureMode, FixtureOptions};

/// What a running `backend` serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Ports to listen on, all served by the same thread (0: any free port).
    pub ports: Vec<u16>,
    /// The address to listen on.
    pub host: IpAddr,
    /// What each connection gets.
    pub mode: FixtureMode,
    /// `reply`: the wait before answering; `cpu`: the CPU time per request.
    pub delay: Duration,
    /// `banner`: the first line sent.
    pub banner: String,
}

impl Settings {
    /// The part of the settings every connection reads.
    pub fn fixture_options(&self) -> FixtureOptions {
        FixtureOptions {
            mode: self.mode,
            delay: self.delay,
            banner: self.banner.clone(),
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Serve.
    Run(Settings),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// A command-line mistake, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (see 'backend --help')", self.0)
    }
}

impl std::error::Error for UsageError {}

fn err<T>(message: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(message.into()))
}

/// The text of `backend --help`.
pub fn help() -> String {
    let defaults = FixtureOptions::default();
    format!(
        "\
backend: the fixture server the proxy is tested and measured against

USAGE
    backend --port N [--port N ...] [OPTIONS]

Listens on every --port at once, all on one thread (an event loop on our own
runtime, one task per connection), and answers each connection by --mode.

MODES (--mode)
    reply    read a line, wait --delay-ms (without blocking the thread), answer
             'port N: <the line>' where N is the port it came in on, close (default)
    echo     send every byte back until the client's end of file, then close
    cpu      like reply, but burn the CPU for --delay-ms: a CPU-bound backend
             (it blocks the thread, so requests queue one behind the other)
    banner   send --banner first, before reading anything (like SMTP), then echo
    reset    read a line, then close with a reset (the client sees ECONNRESET)

OPTIONS
    --port N         a port to listen on; repeat for more; 0 picks a free port
    --host IP        the address to listen on            [default: 127.0.0.1]
    --mode MODE      reply | echo | cpu | banner | reset  [default: reply]
    --delay-ms MS    reply, cpu: the delay per request     [default: 0]
    --banner TEXT    banner: the first line sent           [default: {banner}]
    -h, --help       this text
    -V, --version    the version

Each port is announced on stderr once it listens, with its real port:
    backend: listening on 127.0.0.1:9001 (reply, delay 50ms)
SIGTERM or Ctrl-C (SIGINT) stops it with exit status 0.

EXAMPLES
    backend --port 9001 --port 9002 --port 9003 --delay-ms 50
    backend --port 0 --mode echo
",
        banner = defaults.banner
    )
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    let defaults = FixtureOptions::default();
    let mut settings = Settings {
        ports: Vec::new(),
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        mode: defaults.mode,
        delay: defaults.delay,
        banner: defaults.banner,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = |what: &str| match it.next() {
            Some(v) => Ok(v.as_str()),
            None => err(format!("{flag} needs {what}")),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--port" => add_port(&mut settings.ports, value("a port number")?)?,
            "--host" => settings.host = parse_host(value("an IP address")?)?,
            "--mode" => settings.mode = parse_mode(value("a mode")?)?,
            "--delay-ms" => settings.delay = parse_delay(value("a number of milliseconds")?)?,
            "--banner" => settings.banner = value("the banner text")?.to_string(),
            other => return err(unknown_flag(other)),
        }
    }
    if settings.ports.is_empty() {
        return err("no port: give at least one --port N (0 picks a free one)");
    }
    Ok(Command::Run(settings))
}

/// Adds a port, refusing one given twice (only port 0, "any", may repeat:
/// each 0 becomes a different port).
fn add_port(ports: &mut Vec<u16>, value: &str) -> Result<(), UsageError> {
    let port: u16 = match value.parse() {
        Ok(port) => port,
        Err(_) => {
            return err(format!(
                "--port: '{value}' is not a port number (0 to 65535)"
            ));
        }
    };
    if port != 0 && ports.contains(&port) {
        return err(format!("--port {port} is given twice"));
    }
    ports.push(port);
    Ok(())
}

fn parse_host(value: &str) -> Result<IpAddr, UsageError> {
    value.parse().or_else(|_| {
        err(format!(
            "--host: '{value}' is not an IP address like 127.0.0.1 or ::1 \
             (host names are not resolved)"
        ))
    })
}

fn parse_mode(value: &str) -> Result<FixtureMode, UsageError> {
    FixtureMode::parse(value).ok_or_else(|| {
        let names: Vec<&str> = FixtureMode::ALL.iter().map(|m| m.name()).collect();
        UsageError(format!(
            "--mode: unknown mode '{value}'; use {}",
            names.join(", ")
        ))
    })
}

fn parse_delay(value: &str) -> Result<Duration, UsageError> {
    match value.parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => err(format!(
            "--delay-ms: '{value}' is not a whole number of milliseconds"
        )),
    }
}

const FLAGS: &[&str] = &[
    "--port",
    "--host",
    "--mode",
    "--delay-ms",
    "--banner",
    "--help",
    "--version",
];

fn unknown_flag(flag: &str) -> String {
    match FLAGS.iter().min_by_key(|known| edit_distance(flag, known)) {
        Some(best) if edit_distance(flag, best) <= 2 => {
            format!("unknown option '{flag}' (did you mean '{best}'?)")
        }
        _ => format!("unknown option '{flag}'"),
    }
}

/// Levenshtein distance, for "did you mean" hints.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn settings(s: &str) -> Settings {
        match parse(&args(s)) {
            Ok(Command::Run(settings)) => settings,
            other => panic!("expected settings from '{s}', got {other:?}"),
        }
    }

    fn error(s: &str) -> String {
        match parse(&args(s)) {
            Err(UsageError(message)) => message,
            other => panic!("expected an error from '{s}', got {other:?}"),
        }
    }

    #[test]
    fn a_full_command_line_parses() {
        let s = settings(
            "--port 9001 --port 9002 --port 0 --port 0 --host ::1 --mode cpu --delay-ms 50 \
             --banner hi",
        );
        assert_eq!(s.ports, vec![9001, 9002, 0, 0]);
        assert_eq!(s.host, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(s.mode, FixtureMode::Cpu);
        assert_eq!(s.delay, Duration::from_millis(50));
        assert_eq!(s.banner, "hi");
    }

    #[test]
    fn defaults_are_reply_on_loopback_without_delay() {
        let s = settings("--port 9001");
        assert_eq!(s.host, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(s.fixture_options().mode, FixtureMode::Reply);
        assert_eq!(s.delay, Duration::ZERO);
        for mode in FixtureMode::ALL {
            assert_eq!(settings(&format!("--port 1 --mode {mode}")).mode, mode);
        }
    }

    #[test]
    fn mistakes_say_what_was_wrong_and_what_to_do() {
        assert!(error("").contains("no port"));
        assert!(error("--delay-ms 5").contains("no port"));
        assert!(error("--port").contains("--port needs a port number"));
        assert!(error("--port 70000").contains("not a port number"));
        assert!(error("--port -1").contains("not a port number"));
        assert!(error("--port 9001 --port 9001").contains("given twice"));
        assert!(error("--port 1 --host localhost").contains("not an IP address"));
        assert!(error("--port 1 --mode fast").contains("use reply, echo, cpu, banner, reset"));
        assert!(error("--port 1 --delay-ms 1.5").contains("whole number of milliseconds"));
        assert!(error("--port 1 --delay-ms -3").contains("whole number of milliseconds"));
        assert!(error("--port 1 --banner").contains("needs the banner text"));
        assert_eq!(
            error("--prot 1"),
            "unknown option '--prot' (did you mean '--port'?)"
        );
        assert_eq!(error("9001"), "unknown option '9001'");
        let shown = UsageError("x".to_string()).to_string();
        assert_eq!(shown, "x (see 'backend --help')");
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&args("--help")), Ok(Command::Help));
        assert_eq!(parse(&args("--port 1 -h")), Ok(Command::Help));
        assert_eq!(parse(&args("-V")), Ok(Command::Version));
        let text = help();
        for flag in FLAGS {
            assert!(text.contains(flag), "the help lacks {flag}");
        }
    }
}
