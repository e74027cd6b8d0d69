//! `proxy ctl`'s command line: where the proxy is (`--socket PATH`, or
//! `--admin ADDR` with `--token-file FILE`), and one command, checked here
//! so that a typo is told before anything is sent.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::log::spelling::did_you_mean;
use crate::ops::admin::actions::{Action, ServerId};
use crate::policy::admin_state::{AdminState, parse_weight};

/// The text of `proxy ctl --help`.
pub const HELP: &str = "\
proxy ctl: change a running proxy's servers, or show them

USAGE
    proxy ctl --socket PATH COMMAND                     over the admin socket (admin-socket PATH)
    proxy ctl --admin ADDR [--token-file FILE] COMMAND  over the admin endpoint (admin ADDR);
                                                        changes need admin-token-file's token

COMMANDS
    show servers                          every server: state, weight, health
    ready FRONTEND/SERVER                 back in rotation
    drain FRONTEND/SERVER                 no new connection; the open ones finish
    maint FRONTEND/SERVER [--shutdown-sessions]
                                          no new connection, no health check; with the
                                          option, its open sessions are cut (logged KD)
    weight FRONTEND/SERVER N              its weight, 0 to 256
    shutdown-sessions FRONTEND/SERVER     cut its open sessions (logged KD)

EXIT STATUS
    0 done; 1 refused by the proxy (its message on stderr) or not reached; 2 a bad command line
";

/// The commands, for a misspelt one.
const COMMANDS: [&str; 7] = [
    "show",
    "ready",
    "drain",
    "maint",
    "weight",
    "shutdown-sessions",
    "help",
];

/// Where the proxy is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Its admin socket.
    Socket(PathBuf),
    /// Its admin endpoint, and the file with the token, if given.
    Http(SocketAddr, Option<PathBuf>),
}

/// A command line read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ctl {
    /// Where to.
    pub via: Via,
    /// What.
    pub action: Action,
}

/// What the command line asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// `--help`.
    Help,
    /// An exchange.
    Run(Ctl),
}

/// Reads the words after `ctl`.
pub fn parse(words: &[String]) -> Result<Asked, String> {
    let (mut socket, mut admin, mut token) = (None, None, None);
    let mut rest = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let mut value = |flag: &str| {
            words
                .next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match word.as_str() {
            "--help" | "-h" | "help" => return Ok(Asked::Help),
            "--socket" => socket = Some(PathBuf::from(value("--socket")?)),
            "--admin" => {
                let text = value("--admin")?;
                let addr = text.parse::<SocketAddr>().map_err(|_| {
                    format!("--admin '{text}' is not an address; write one like 127.0.0.1:9100")
                })?;
                admin = Some(addr);
            }
            "--token-file" => token = Some(PathBuf::from(value("--token-file")?)),
            other => rest.push(other),
        }
    }
    let action = command(&rest)?;
    let via = match (socket, admin) {
        (Some(path), None) if token.is_none() => Via::Socket(path),
        (Some(_), None) => return Err("--token-file goes with --admin, not --socket".into()),
        (None, Some(addr)) => Via::Http(addr, token),
        (Some(_), Some(_)) => return Err("--socket or --admin, not both".into()),
        (None, None) => return Err("where is the proxy? give --socket PATH or --admin ADDR".into()),
    };
    Ok(Asked::Run(Ctl { via, action }))
}

/// The command's words as an action.
fn command(words: &[&str]) -> Result<Action, String> {
    let target = |word: &str| ServerId::parse(word);
    let state = |word: &str, state, shutdown| {
        Ok(Action::State {
            target: target(word)?,
            state,
            shutdown,
        })
    };
    match words {
        ["show", "servers"] | ["show", "servers", "state"] | ["show"] => Ok(Action::Show),
        ["ready", t] => state(t, AdminState::Ready, false),
        ["drain", t] => state(t, AdminState::Drain, false),
        ["maint", t] => state(t, AdminState::Maint, false),
        ["maint", t, "--shutdown-sessions"] | ["maint", "--shutdown-sessions", t] => {
            state(t, AdminState::Maint, true)
        }
        ["weight", t, n] => Ok(Action::Weight {
            target: target(t)?,
            weight: parse_weight(n)?,
        }),
        ["shutdown-sessions", t] => Ok(Action::Shutdown { target: target(t)? }),
        [] => Err("no command; try 'show servers'".into()),
        [word, ..] if !COMMANDS.contains(word) => Err(format!(
            "unknown command '{word}'{}",
            did_you_mean(word, &COMMANDS)
        )),
        [word, ..] => Err(format!(
            "'{}': not how {word} is written; see 'proxy ctl --help'",
            words.join(" ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn commands_read_into_actions() {
        let Ok(Asked::Run(ctl)) = parse(&words("--socket /s drain web/s1")) else {
            panic!("parses");
        };
        assert_eq!(ctl.via, Via::Socket("/s".into()));
        assert!(matches!(
            ctl.action,
            Action::State {
                state: AdminState::Drain,
                shutdown: false,
                ..
            }
        ));
        let Ok(Asked::Run(ctl)) = parse(&words(
            "--admin 127.0.0.1:9100 --token-file /t weight web/s1 3",
        )) else {
            panic!("parses");
        };
        assert_eq!(
            ctl.via,
            Via::Http("127.0.0.1:9100".parse().expect("addr"), Some("/t".into()))
        );
        assert!(matches!(ctl.action, Action::Weight { weight: 3, .. }));
        let Ok(Asked::Run(ctl)) = parse(&words("--socket /s maint web/s1 --shutdown-sessions"))
        else {
            panic!("parses");
        };
        assert!(matches!(ctl.action, Action::State { shutdown: true, .. }));
    }

    #[test]
    fn mistakes_are_told_before_anything_is_sent() {
        let error = |line: &str| parse(&words(line)).expect_err(line);
        assert!(error("--socket /s drian web/s1").contains("did you mean 'drain'?"));
        assert!(error("drain web/s1").contains("--socket PATH or --admin ADDR"));
        assert!(
            error("drian web/s1").contains("did you mean 'drain'?"),
            "the command first"
        );
        assert!(error("--socket /s weight web/s1 300").contains("out of range"));
        assert!(error("--socket /s drain web").contains("FRONTEND/SERVER"));
        assert!(error("--admin localhost drain web/s1").contains("not an address"));
        assert!(error("--socket /s --admin 127.0.0.1:1 show servers").contains("not both"));
        assert!(error("--socket /s").contains("no command"));
        assert_eq!(parse(&words("--help")), Ok(Asked::Help));
    }
}
