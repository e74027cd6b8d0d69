//! An action over HTTP: its body read (a `Content-Length` of at most
//! [`MAX_BODY`] bytes, within the request deadline), who may act checked
//! ([`access`](super::access) says), then carried out ([`super::actions`])
//! and the state file written, if there is one.
//!
//! ```text
//!   POST /servers/web/s1/state HTTP/1.1
//!   Host: x
//!   Authorization: Bearer 6f1c...
//!   Content-Length: 5
//!
//!   drain                       200 web/s1: state drain (was ready)
//!
//!   no token, a wrong one       403, nothing changed
//!   no Content-Length, chunked  411
//!   a body over 1 KiB           413, the body not read
//!   the body late               the connection closed, nothing changed (timeout admin-request)
//! ```

use std::path::PathBuf;
use std::time::Duration;

use runtime::net::TcpStream;
use runtime::time;

use crate::ops::metrics::exposition::Published;
use crate::ops::server_state;

use super::access::Access;
use super::actions::{self, Action, Reply};
use super::response::Response;

/// The longest body an action takes: a state or a weight is a few bytes.
pub const MAX_BODY: usize = 1024;

/// What an action needs beside the registry: who may act, and where the
/// servers' states are kept across a restart.
#[derive(Debug, Clone, Default)]
pub struct Operator {
    /// Who may read and who may act.
    pub access: Access,
    /// `server-state-file`: written after every change.
    pub state_file: Option<PathBuf>,
}

impl Operator {
    /// Carries out `action` (the right to act already checked) and, when
    /// it changed something, writes the state file.
    pub fn perform(&self, action: &Action, registry: &Published) -> Reply {
        let current = registry.get();
        let answer = actions::perform(action, &current);
        if answer.status == 200 && action.changes() {
            if let Some(path) = &self.state_file {
                if let Err(e) = server_state::write_file(path, &current) {
                    crate::error!("{e}; the change is made, but a restart would not keep it");
                }
            }
        }
        answer
    }
}

/// The value of header `name` (case-insensitive) in a complete, checked
/// request `head`.
pub fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    let head = std::str::from_utf8(head).ok()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The answer to an action request: `head` its head, `early` the bytes
/// read after it (the start of its body).
pub(super) async fn answer(
    head: &[u8],
    early: &[u8],
    stream: &TcpStream,
    (method, path): (&str, &str),
    (registry, operator): (&Published, &Operator),
    deadline: Duration,
) -> Response {
    let body = match method {
        "POST" => match time::timeout(deadline, read_body(head, early, stream)).await {
            Ok(Ok(body)) => body,
            Ok(Err(response)) => return response,
            Err(time::Elapsed) => return Response::text(408, "the body did not come in time\n"),
        },
        _ => String::new(),
    };
    let action = match actions::parse_http(method, path, &body) {
        Some(Ok(action)) => action,
        Some(Err(answer)) => return Response::text(answer.status, answer.text),
        None => return Response::text(404, "not found\n"),
    };
    if action.changes() {
        if let Err(refused) = operator.access.may_act(header(head, "authorization")) {
            crate::warn!(
                "admin: {method} {path} refused: {}",
                refused.reason().trim_end()
            );
            return Response::text(403, refused.reason());
        }
    }
    let answer = operator.perform(&action, registry);
    let mut response = Response::text(answer.status, answer.text);
    response.head_only = method == "HEAD";
    response
}

/// Reads the body `Content-Length` announces (the first `early` bytes of
/// it came with the head).
async fn read_body(head: &[u8], early: &[u8], stream: &TcpStream) -> Result<String, Response> {
    if header(head, "transfer-encoding").is_some() {
        return Err(Response::text(
            411,
            "send the body with a Content-Length, not chunked\n",
        ));
    }
    let length = match header(head, "content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= MAX_BODY => n,
        Some(Ok(n)) => {
            return Err(Response::text(
                413,
                format!("a body of {n} bytes; an action's body is at most {MAX_BODY}\n"),
            ));
        }
        Some(Err(_)) => {
            return Err(Response::text(
                400,
                "bad request: a malformed Content-Length\n",
            ));
        }
    };
    let mut body = early
        .get(..length.min(early.len()))
        .unwrap_or_default()
        .to_vec();
    let mut chunk = [0u8; MAX_BODY];
    while body.len() < length {
        let want = length - body.len();
        match stream.read(&mut chunk[..want]).await {
            Ok(0) | Err(_) => {
                return Err(Response::text(400, "bad request: the body ended early\n"));
            }
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8(body).map_err(|_| Response::text(400, "bad request: the body is not text\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_found_by_name_whatever_their_case() {
        let head = b"POST /x HTTP/1.1\r\nHost: a\r\nauthorization:  Bearer t \r\n\r\n";
        assert_eq!(header(head, "Authorization"), Some("Bearer t"));
        assert_eq!(header(head, "host"), Some("a"));
        assert_eq!(header(head, "content-length"), None);
    }
}
