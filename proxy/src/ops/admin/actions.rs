//! The actions: what an operator may change at runtime, read from HAProxy's
//! runtime-API words (the admin socket) or from an HTTP request (the
//! admin endpoint), and carried out on the frontend's health board, which
//! holds each server's admin state and weight (`policy/admin_state.rs`).
//!
//! ```text
//!   admin socket (one line)                  HTTP                                      does
//!   show servers state                       GET  /servers/state                        every server's line (ops/server_state.rs)
//!   set server F/S state ready|drain|maint   POST /servers/F/S/state   body: STATE      its admin state
//!   set server F/S state maint shutdown-sessions  (body: maint shutdown-sessions)       maint, then cut its sessions
//!   set weight F/S N   (set server F/S weight N)  POST /servers/F/S/weight  body: N     its weight, 0 to 256
//!   shutdown sessions server F/S             POST /servers/F/S/shutdown-sessions        cut its open sessions (logged KD)
//!   disable server F/S / enable server F/S   (maint / ready, HAProxy's older words)
//! ```
//!
//! `F` is a frontend's name, `S` a server's name in it (its address, for a
//! line without a name). A name that is no frontend's or server's is
//! answered 404 with the closest one ("did you mean"); anything else that
//! is not an action is 400; nothing changes in either case. An action is
//! carried out on the shared board before its answer is written, so every
//! worker's next pick sees it (`policy/admin_state.rs` says why nothing is
//! left for the workers to apply).

use crate::log::spelling::did_you_mean;
use crate::ops::metrics::exposition::Registry;
use crate::ops::server_state;
use crate::policy::admin_state::{AdminState, parse_weight};

/// A server, as an action names it: `FRONTEND/SERVER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerId {
    /// The frontend's name.
    pub frontend: String,
    /// The server's name in it.
    pub server: String,
}

impl ServerId {
    /// Reads `FRONTEND/SERVER`.
    pub fn parse(word: &str) -> Result<ServerId, String> {
        match word.split_once('/') {
            Some((frontend, server))
                if !frontend.is_empty() && !server.is_empty() && !server.contains('/') =>
            {
                Ok(ServerId {
                    frontend: frontend.to_string(),
                    server: server.to_string(),
                })
            }
            _ => Err(format!(
                "'{word}' does not name a server; write FRONTEND/SERVER, like web/s1"
            )),
        }
    }
}

impl std::fmt::Display for ServerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.frontend, self.server)
    }
}

/// What the operator asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Every server's state, weight and health.
    Show,
    /// A server's admin state; with `shutdown`, its sessions cut after.
    State {
        /// The server.
        target: ServerId,
        /// Its new state.
        state: AdminState,
        /// Cut its open sessions too.
        shutdown: bool,
    },
    /// A server's weight.
    Weight {
        /// The server.
        target: ServerId,
        /// Its new weight, 0 to 256.
        weight: u32,
    },
    /// Cut a server's open sessions.
    Shutdown {
        /// The server.
        target: ServerId,
    },
    /// The commands the socket understands.
    Help,
}

impl Action {
    /// Whether it changes anything (and so needs the right to act).
    pub fn changes(&self) -> bool {
        !matches!(self, Action::Show | Action::Help)
    }
}

/// The commands, as the socket's `help` lists them.
pub const HELP: &str = "\
show servers state                              every server: state, weight, health
set server FRONTEND/SERVER state ready|drain|maint [shutdown-sessions]
set weight FRONTEND/SERVER N                    N from 0 to 256 (also: set server F/S weight N)
shutdown sessions server FRONTEND/SERVER        cut its open sessions (logged KD)
disable server FRONTEND/SERVER                  the same as state maint
enable server FRONTEND/SERVER                   the same as state ready
";

/// An answer: an HTTP status (the socket shows only the text) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// 200, or the 4xx that says what was wrong.
    pub status: u16,
    /// What happened, or what was wrong; ends with a newline.
    pub text: String,
}

impl Reply {
    /// An answer of `status` with `text` (a newline added if missing).
    pub fn new(status: u16, text: impl Into<String>) -> Reply {
        let mut text = text.into();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Reply { status, text }
    }

    fn bad(text: impl Into<String>) -> Reply {
        Reply::new(400, text)
    }
}

/// Reads one line of the admin socket (HAProxy's runtime-API words).
pub fn parse_command(line: &str) -> Result<Action, Reply> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let target = |word: &str| ServerId::parse(word).map_err(Reply::bad);
    match words[..] {
        ["help"] => Ok(Action::Help),
        ["show", "servers", "state"] | ["show", "servers"] => Ok(Action::Show),
        ["set", "server", t, "state", state, ref rest @ ..] => Ok(Action::State {
            target: target(t)?,
            state: parse_state(state)?,
            shutdown: parse_shutdown_option(rest)?,
        }),
        ["set", "server", t, "weight", n] | ["set", "weight", t, n] => Ok(Action::Weight {
            target: target(t)?,
            weight: parse_weight(n).map_err(Reply::bad)?,
        }),
        ["shutdown", "sessions", "server", t] => Ok(Action::Shutdown { target: target(t)? }),
        ["disable", "server", t] | ["enable", "server", t] => Ok(Action::State {
            target: target(t)?,
            state: match words[0] {
                "disable" => AdminState::Maint,
                _ => AdminState::Ready,
            },
            shutdown: false,
        }),
        [] => Err(Reply::bad("an empty command; try 'help'")),
        _ => Err(Reply::bad(format!(
            "unknown command '{}'; the commands are:\n{HELP}",
            line.trim()
        ))),
    }
}

/// Reads an HTTP request as an action: `None` when its path is not one of
/// the actions' (the views and `/metrics` answer those).
pub fn parse_http(method: &str, path: &str, body: &str) -> Option<Result<Action, Reply>> {
    let rest = path.strip_prefix("/servers/")?;
    if rest == "state" {
        return Some(match method {
            "GET" | "HEAD" => Ok(Action::Show),
            _ => Err(Reply::new(405, "method not allowed: GET /servers/state")),
        });
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let [frontend, server, what] = parts[..] else {
        return Some(Err(Reply::new(
            404,
            "not found: the actions are POST /servers/FRONTEND/SERVER/state, .../weight and \
             .../shutdown-sessions, and GET /servers/state",
        )));
    };
    if method != "POST" {
        return Some(Err(Reply::new(405, "method not allowed: POST")));
    }
    let target = match ServerId::parse(&format!("{frontend}/{server}")) {
        Ok(target) => target,
        Err(why) => return Some(Err(Reply::bad(why))),
    };
    let body = body.trim();
    Some(match what {
        "state" => {
            let words: Vec<&str> = body.split_whitespace().collect();
            match words[..] {
                [state, ref rest @ ..] => parse_state(state).and_then(|state| {
                    Ok(Action::State {
                        target,
                        state,
                        shutdown: parse_shutdown_option(rest)?,
                    })
                }),
                [] => Err(Reply::bad("an empty body; send ready, drain or maint")),
            }
        }
        "weight" => parse_weight(body)
            .map(|weight| Action::Weight { target, weight })
            .map_err(Reply::bad),
        "shutdown-sessions" if body.is_empty() => Ok(Action::Shutdown { target }),
        "shutdown-sessions" => Err(Reply::bad("shutdown-sessions takes no body")),
        other => Err(Reply::new(
            404,
            format!(
                "not found: '{other}'{}; use state, weight or shutdown-sessions",
                did_you_mean(other, &["state", "weight", "shutdown-sessions"])
            ),
        )),
    })
}

fn parse_state(word: &str) -> Result<AdminState, Reply> {
    AdminState::parse(word).ok_or_else(|| {
        let names = AdminState::ALL.map(AdminState::name);
        Reply::bad(format!(
            "'{word}' is not a state{}; use ready, drain or maint",
            did_you_mean(word, &names)
        ))
    })
}

fn parse_shutdown_option(rest: &[&str]) -> Result<bool, Reply> {
    match rest {
        [] => Ok(false),
        ["shutdown-sessions"] => Ok(true),
        _ => Err(Reply::bad(format!(
            "'{}' after the state; the only option is shutdown-sessions",
            rest.join(" ")
        ))),
    }
}

/// Carries `action` out on `registry`'s boards; the answer says what
/// changed, or why nothing did.
pub fn perform(action: &Action, registry: &Registry) -> Reply {
    match action {
        Action::Help => Reply::new(200, HELP),
        Action::Show => Reply::new(200, server_state::render(&server_state::lines(registry))),
        Action::State {
            target,
            state,
            shutdown,
        } => with_server(registry, target, |board, index| {
            let before = board.admin().state(index);
            board.set_admin_state(index, *state);
            if *shutdown {
                board.shutdown_sessions(index);
            }
            let cut = if *shutdown { ", its sessions cut" } else { "" };
            format!(
                "{target}: state {} (was {}){cut}",
                state.name(),
                before.name()
            )
        }),
        Action::Weight { target, weight } => with_server(registry, target, |board, index| {
            let before = board.admin().weight(index).unwrap_or(0);
            // In range: the parser took 0 to 256 only.
            let _ = board.set_admin_weight(index, *weight);
            format!("{target}: weight {weight} (was {before})")
        }),
        Action::Shutdown { target } => with_server(registry, target, |board, index| {
            board.shutdown_sessions(index);
            format!("{target}: its sessions cut")
        }),
    }
}

/// Runs `act` on `target`'s board and index, or answers 404 with the
/// closest name.
fn with_server(
    registry: &Registry,
    target: &ServerId,
    act: impl FnOnce(&crate::policy::health::HealthBoard, usize) -> String,
) -> Reply {
    let Some((board, servers)) = registry.servers(&target.frontend) else {
        let names = registry.frontend_names();
        return Reply::new(
            404,
            format!(
                "no frontend '{}'{}; the frontends are: {}",
                target.frontend,
                did_you_mean(&target.frontend, &names),
                names.join(", ")
            ),
        );
    };
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    let matching: Vec<usize> = (0..names.len().min(board.len()))
        .filter(|&i| names[i] == target.server || servers[i].addr == target.server)
        .collect();
    match matching[..] {
        [index] => Reply::new(200, act(board, index)),
        [] => Reply::new(
            404,
            format!(
                "no server '{}' in frontend '{}'{}; its servers are: {}",
                target.server,
                target.frontend,
                did_you_mean(&target.server, &names),
                names.join(", ")
            ),
        ),
        _ => Reply::new(
            409,
            format!(
                "'{target}' names {} servers (in different groups); give each a unique name",
                matching.len()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::counters::FrontendCounters;
    use crate::ops::metrics::exposition::{FrontendParts, ServerLabels};
    use crate::policy::admin_state::AdminBoard;
    use crate::policy::health::HealthBoard;
    use std::net::SocketAddr;
    use std::sync::Arc;

    fn target(f: &str, s: &str) -> ServerId {
        ServerId {
            frontend: f.into(),
            server: s.into(),
        }
    }

    #[test]
    fn socket_commands_parse_in_haproxy_words() {
        let state = |state, shutdown| Action::State {
            target: target("web", "s1"),
            state,
            shutdown,
        };
        let cases = [
            (
                "set server web/s1 state drain",
                state(AdminState::Drain, false),
            ),
            (
                "  set server web/s1 state maint shutdown-sessions\r",
                state(AdminState::Maint, true),
            ),
            ("disable server web/s1", state(AdminState::Maint, false)),
            ("enable server web/s1", state(AdminState::Ready, false)),
            (
                "set weight web/s1 3",
                Action::Weight {
                    target: target("web", "s1"),
                    weight: 3,
                },
            ),
            (
                "set server web/s1 weight 0",
                Action::Weight {
                    target: target("web", "s1"),
                    weight: 0,
                },
            ),
            (
                "shutdown sessions server web/s1",
                Action::Shutdown {
                    target: target("web", "s1"),
                },
            ),
            ("show servers state", Action::Show),
            ("help", Action::Help),
        ];
        for (line, action) in cases {
            assert_eq!(parse_command(line), Ok(action), "{line}");
        }
        for junk in [
            "",
            "set server web/s1 state sideways",
            "set server web/s1 state drain now",
            "set weight web/s1 257",
            "set weight web/s1 -1",
            "set weight web 3",
            "set weight /s1 3",
            "set weight web/s1/x 3",
            "frobnicate",
        ] {
            let answer = parse_command(junk).expect_err(junk);
            assert_eq!(answer.status, 400, "{junk}: {}", answer.text);
        }
        let typo = parse_command("set server web/s1 state drian").expect_err("a typo");
        assert!(typo.text.contains("did you mean 'drain'"), "{}", typo.text);
    }

    #[test]
    fn http_requests_parse_to_the_same_actions() {
        let drain = Action::State {
            target: target("web", "s1"),
            state: AdminState::Drain,
            shutdown: false,
        };
        assert_eq!(
            parse_http("POST", "/servers/web/s1/state", "drain\n"),
            Some(Ok(drain))
        );
        assert_eq!(
            parse_http("POST", "/servers/web/s1/weight", "3"),
            Some(Ok(Action::Weight {
                target: target("web", "s1"),
                weight: 3
            }))
        );
        assert_eq!(
            parse_http("POST", "/servers/web/s1/shutdown-sessions", ""),
            Some(Ok(Action::Shutdown {
                target: target("web", "s1")
            }))
        );
        assert_eq!(
            parse_http("GET", "/servers/state", ""),
            Some(Ok(Action::Show))
        );
        assert_eq!(parse_http("GET", "/metrics", ""), None);
        let status = |m, p, b| parse_http(m, p, b).and_then(Result::err).map(|a| a.status);
        assert_eq!(status("GET", "/servers/web/s1/state", ""), Some(405));
        assert_eq!(
            status("POST", "/servers/web/s1/state", "sideways"),
            Some(400)
        );
        assert_eq!(status("POST", "/servers/web/s1/state", ""), Some(400));
        assert_eq!(status("POST", "/servers/web/s1/weight", "x"), Some(400));
        assert_eq!(status("POST", "/servers/web/s1/weight", "1000"), Some(400));
        assert_eq!(status("POST", "/servers/web/s1/wieght", "1"), Some(404));
        assert_eq!(status("POST", "/servers/web", ""), Some(404));
        assert_eq!(
            status("POST", "/servers/web/s1/shutdown-sessions", "x"),
            Some(400)
        );
    }

    fn registry() -> Arc<Registry> {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9001));
        let board = Arc::new(
            HealthBoard::new("web", &[(addr, None), (addr, None)])
                .with_admin(AdminBoard::new([1, 1])),
        );
        let labels = |name: &str| ServerLabels {
            addr: format!("127.0.0.1:900{}", &name[1..]),
            group: "web".into(),
            name: name.into(),
        };
        Registry::from_counters(vec![FrontendParts {
            name: "web".into(),
            backends: vec![labels("s1"), labels("s2")],
            weights: vec![1, 1],
            board,
            addresses: None,
            counters: vec![Arc::new(FrontendCounters::new(2))],
            routes: Vec::new(),
        }])
    }

    #[test]
    fn actions_change_the_board_and_unknown_names_say_did_you_mean() {
        let registry = registry();
        let drain = parse_command("set server web/s2 state drain").expect("parses");
        let answer = perform(&drain, &registry);
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(answer.text, "web/s2: state drain (was ready)\n");
        let (board, _) = registry.servers("web").expect("web");
        assert_eq!(board.admin().state(1), AdminState::Drain);
        let by_addr = parse_command("set weight web/127.0.0.1:9001 5").expect("parses");
        assert_eq!(perform(&by_addr, &registry).status, 200);
        assert_eq!(board.admin().weight(0), Some(5));

        let unknown = perform(&parse_command("set weight web/s3 1").expect("p"), &registry);
        assert_eq!(unknown.status, 404);
        assert!(
            unknown.text.contains("did you mean 's1'?"),
            "{}",
            unknown.text
        );
        let frontend = perform(
            &parse_command("set weight webb/s1 1").expect("p"),
            &registry,
        );
        assert_eq!(frontend.status, 404);
        assert!(
            frontend.text.contains("did you mean 'web'?"),
            "{}",
            frontend.text
        );
        assert_eq!(board.admin().weight(0), Some(5), "nothing changed");

        let show = perform(&Action::Show, &registry);
        assert_eq!(
            show.text,
            format!(
                "{}\nweb web s1 ready 5 1 up\nweb web s2 drain 1 1 up\n",
                server_state::HEADER
            )
        );
    }
}
