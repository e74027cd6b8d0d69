//! One exchange with a running proxy: the action written in the runtime
//! API's words on the admin socket, or as an HTTP request to the admin
//! endpoint (with `Authorization: Bearer` and the token file's content),
//! and the answer read back as a status and a text. Every read and write
//! has a deadline of five seconds.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::ops::admin::actions::{Action, Reply};

use super::args::{Ctl, Via};

/// How long a step of the exchange may take.
const DEADLINE: Duration = Duration::from_secs(5);

/// The largest answer read: `show servers` of a few thousand servers.
const MAX_ANSWER: u64 = 16 * 1024 * 1024;

/// Sends `ctl`'s action where it says, and reads the answer.
pub fn exchange(ctl: &Ctl) -> io::Result<Reply> {
    match &ctl.via {
        Via::Socket(path) => over_socket(path, &command(&ctl.action)),
        Via::Http(addr, token_file) => {
            let token = token_file.as_deref().map(read_token).transpose()?;
            let request = request(&ctl.action, token.as_deref());
            let mut stream = TcpStream::connect_timeout(addr, DEADLINE)
                .map_err(|e| io::Error::new(e.kind(), format!("admin {addr}: {e}")))?;
            stream.set_read_timeout(Some(DEADLINE))?;
            stream.set_write_timeout(Some(DEADLINE))?;
            stream.write_all(request.as_bytes())?;
            let mut bytes = Vec::new();
            stream.take(MAX_ANSWER).read_to_end(&mut bytes)?;
            parse_response(&bytes)
        }
    }
}

/// The action in the admin socket's words.
pub fn command(action: &Action) -> String {
    match action {
        Action::Show => "show servers state".into(),
        Action::Help => "help".into(),
        Action::State {
            target,
            state,
            shutdown,
        } => {
            let option = if *shutdown { " shutdown-sessions" } else { "" };
            format!("set server {target} state {}{option}", state.name())
        }
        Action::Weight { target, weight } => format!("set weight {target} {weight}"),
        Action::Shutdown { target } => format!("shutdown sessions server {target}"),
    }
}

/// The action as an HTTP request.
pub fn request(action: &Action, token: Option<&str>) -> String {
    let (method, path, body) = match action {
        Action::Show | Action::Help => ("GET", "/servers/state".to_string(), String::new()),
        Action::State {
            target,
            state,
            shutdown,
        } => {
            let option = if *shutdown { " shutdown-sessions" } else { "" };
            let body = format!("{}{option}", state.name());
            ("POST", format!("/servers/{target}/state"), body)
        }
        Action::Weight { target, weight } => (
            "POST",
            format!("/servers/{target}/weight"),
            weight.to_string(),
        ),
        Action::Shutdown { target } => (
            "POST",
            format!("/servers/{target}/shutdown-sessions"),
            String::new(),
        ),
    };
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "{method} {path} HTTP/1.1\r\nHost: proxy\r\n{authorization}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One line on the socket; its answer (a refusal starts with `error: `).
fn over_socket(path: &Path, line: &str) -> io::Result<Reply> {
    let mut stream = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("admin socket {}: {e}", path.display())))?;
    stream.set_read_timeout(Some(DEADLINE))?;
    stream.set_write_timeout(Some(DEADLINE))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    let mut text = String::new();
    stream.take(MAX_ANSWER).read_to_string(&mut text)?;
    Ok(match text.strip_prefix("error: ") {
        Some(why) => Reply::new(400, why),
        None => Reply::new(200, text),
    })
}

/// The token file's content, without its trailing newline.
fn read_token(path: &Path) -> io::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("--token-file {}: {e}", path.display())))?;
    Ok(text.trim_end().to_string())
}

/// The status and body of an HTTP response.
fn parse_response(bytes: &[u8]) -> io::Result<Reply> {
    let text = String::from_utf8_lossy(bytes);
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the admin endpoint's answer is not HTTP",
        )
    };
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(bad)?;
    Ok(Reply::new(status, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::admin::actions::{ServerId, parse_command, parse_http};
    use crate::policy::admin_state::AdminState;

    /// What ctl sends is what the proxy reads back as the same action.
    #[test]
    fn both_transports_carry_the_action_unchanged() {
        let target = ServerId::parse("web/s1").expect("target");
        let actions = [
            Action::Show,
            Action::State {
                target: target.clone(),
                state: AdminState::Maint,
                shutdown: true,
            },
            Action::State {
                target: target.clone(),
                state: AdminState::Drain,
                shutdown: false,
            },
            Action::Weight {
                target: target.clone(),
                weight: 3,
            },
            Action::Shutdown { target },
        ];
        for action in actions {
            assert_eq!(parse_command(&command(&action)), Ok(action.clone()));
            let request = request(&action, Some("t"));
            let (head, body) = request.split_once("\r\n\r\n").expect("a head");
            let mut line = head.lines().next().expect("a line").split(' ');
            let (method, path) = (line.next().expect("m"), line.next().expect("p"));
            assert_eq!(parse_http(method, path, body), Some(Ok(action)));
            assert!(head.contains("Authorization: Bearer t\r\n"));
        }
        let answer = parse_response(b"HTTP/1.1 404 Not Found\r\nX: y\r\n\r\nno server\n");
        assert_eq!(answer.expect("parses"), Reply::new(404, "no server"));
    }
}
