//! The `backend` command line, checked before anything starts.
//!
//! ```text
//! backend --port 9001 --port 9002 --delay-ms 50 --mode reply
//! ```
//!
//! One table of flags ([`FLAGS`]), read by the proxy's own flag reader
//! (`proxy::settings::flags`): the same rules, the same "did you mean",
//! the same messages as `proxy`'s command line. Every mistake becomes a
//! [`UsageError`] that says what was wrong and what to do; the binary
//! prints it and exits with status 2.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

pub use proxy::settings::flags::UsageError;
use proxy::settings::flags::{self, Flag, Read};

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

impl Default for Settings {
    fn default() -> Self {
        let defaults = FixtureOptions::default();
        Settings {
            ports: Vec::new(),
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            mode: defaults.mode,
            delay: defaults.delay,
            banner: defaults.banner,
        }
    }
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

/// The text of `backend --help`.
pub fn help() -> String {
    format!("{HELP_HEAD}{}{HELP_TAIL}", flags::help(FLAGS))
}

const HELP_HEAD: &str = "\
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
    whoami   send 'backend <address reached> client <address it came from>' first,
             then echo: which backend, and through which proxy (scripts/cluster.sh)

OPTIONS
";

const HELP_TAIL: &str = "
Each port is announced on stderr once it listens, with its real port:
    backend: listening on 127.0.0.1:9001 (reply, delay 50ms)
SIGTERM or Ctrl-C (SIGINT) stops it with exit status 0.

EXAMPLES
    backend --port 9001 --port 9002 --port 9003 --delay-ms 50
    backend --port 0 --mode echo
";

/// Every flag: its name, its value, its help, what it sets.
pub const FLAGS: &[Flag<Settings>] = &[
    Flag {
        name: "--port",
        arg: "N",
        needs: "a port number",
        help: "a port to listen on; repeat for more; 0 picks a free port",
        set: |s, v| add_port(&mut s.ports, v),
    },
    Flag {
        name: "--host",
        arg: "IP",
        needs: "an IP address",
        help: "the address to listen on            [default: 127.0.0.1]",
        set: |s, v| {
            s.host = parse_host(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--mode",
        arg: "MODE",
        needs: "a mode",
        help: "reply | echo | cpu | banner | reset [default: reply]",
        set: |s, v| {
            s.mode = parse_mode(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--delay-ms",
        arg: "MS",
        needs: "a number of milliseconds",
        help: "reply, cpu: the delay per request   [default: 0]",
        set: |s, v| {
            s.delay = parse_delay(v)?;
            Ok(())
        },
    },
    Flag {
        name: "--banner",
        arg: "TEXT",
        needs: "the banner text",
        help: "banner: the first line sent         [default: backend ready]",
        set: |s, v| {
            s.banner = v.to_string();
            Ok(())
        },
    },
];

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    let mut settings = Settings::default();
    match flags::read("backend", args, FLAGS, &mut settings)? {
        Read::Help => return Ok(Command::Help),
        Read::Version => return Ok(Command::Version),
        Read::Flags(_) => {}
    }
    if settings.ports.is_empty() {
        return Err(UsageError::new(
            "backend",
            "no port: give at least one --port N (0 picks a free one)",
        ));
    }
    Ok(Command::Run(settings))
}

/// Adds a port, refusing one given twice (only port 0, "any", may repeat:
/// each 0 becomes a different port).
fn add_port(ports: &mut Vec<u16>, value: &str) -> Result<(), String> {
    let port: u16 = value
        .parse()
        .map_err(|_| format!("'{value}' is not a port number (0 to 65535)"))?;
    if port != 0 && ports.contains(&port) {
        return Err(format!("{port} is given twice"));
    }
    ports.push(port);
    Ok(())
}

fn parse_host(value: &str) -> Result<IpAddr, String> {
    value.parse().map_err(|_| {
        format!(
            "'{value}' is not an IP address like 127.0.0.1 or ::1 (host names are not resolved)"
        )
    })
}

fn parse_mode(value: &str) -> Result<FixtureMode, String> {
    FixtureMode::parse(value).ok_or_else(|| {
        let names: Vec<&str> = FixtureMode::ALL.iter().map(|m| m.name()).collect();
        format!("unknown mode '{value}'; use {}", names.join(", "))
    })
}

fn parse_delay(value: &str) -> Result<Duration, String> {
    value
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("'{value}' is not a whole number of milliseconds"))
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
            Err(e) => e.message,
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
        assert!(
            error("--port 1 --mode fast").contains("use reply, echo, cpu, banner, reset, whoami")
        );
        assert!(error("--port 1 --delay-ms 1.5").contains("whole number of milliseconds"));
        assert!(error("--port 1 --delay-ms -3").contains("whole number of milliseconds"));
        assert!(error("--port 1 --banner").contains("needs the banner text"));
        assert_eq!(
            error("--prot 1"),
            "unknown option '--prot' (did you mean '--port'?)"
        );
        assert_eq!(error("9001"), "unknown option '9001'");
        let shown = UsageError::new("backend", "x").to_string();
        assert_eq!(shown, "x (see 'backend --help')");
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&args("--help")), Ok(Command::Help));
        assert_eq!(parse(&args("--port 1 -h")), Ok(Command::Help));
        assert_eq!(parse(&args("-V")), Ok(Command::Version));
        let text = help();
        for flag in FLAGS {
            assert!(text.contains(flag.name), "the help lacks {}", flag.name);
        }
        for also in ["-h, --help", "-V, --version"] {
            assert!(text.contains(also), "the help lacks {also}");
        }
        let banner = FixtureOptions::default().banner;
        assert!(
            text.contains(&format!("[default: {banner}]")),
            "the help's banner default is the fixture's"
        );
    }
}
