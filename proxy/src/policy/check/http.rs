//! `option httpchk [METHOD] [URI] [VERSION]` and `http-check expect`: one
//! HTTP/1 request, the answer judged by its status and its body (RFC 9112
//! for the message syntax, RFC 9110 for status classes).
//!
//! ```text
//!   check  ─▶ GET /health HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n
//!   server ─▶ HTTP/1.1 200 OK\r\n ... \r\n\r\n body
//! ```
//!
//! HAProxy's defaults: `OPTIONS / HTTP/1.0`, and without an `http-check
//! expect` any 2xx or 3xx status is up. An HTTP/1.1 request carries a
//! `Host` header (the server's address unless `http-check send hdr Host
//! NAME` gives one), as the protocol requires; every request asks the
//! server to close (`Connection: close`), so the body ends at the latest
//! when the connection does.
//!
//! Each `http-check expect` must hold: `status` (codes and ranges, `200`,
//! `200-299,302`), `rstatus REGEX`, `string TEXT` (in the body), `rstring
//! REGEX` (in the body), each of them turned around by `!`. A status
//! expect is judged as soon as the status line is in; a body expect waits
//! for the whole body (its `Content-Length`, the last chunk of a chunked
//! one, the close), or judges the first 16 KiB.

use std::fmt;

use super::dialogue::{
    Dialogue, INBOX_LIMIT, Inbox, Next, Status, Verdict, find_bytes, got, shown,
};
use super::regex::Regex;

/// `option httpchk` and its `http-check` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCheck {
    /// The request method (default `OPTIONS`, HAProxy's).
    pub method: String,
    /// The request target (default `/`).
    pub uri: String,
    /// `HTTP/1.0` (the default) or `HTTP/1.1`.
    pub version: String,
    /// `http-check send hdr NAME VALUE`, in order.
    pub headers: Vec<(String, String)>,
    /// `http-check expect` lines; none: 2xx or 3xx.
    pub expects: Vec<HttpExpect>,
}

impl Default for HttpCheck {
    fn default() -> Self {
        HttpCheck {
            method: "OPTIONS".to_string(),
            uri: "/".to_string(),
            version: "HTTP/1.0".to_string(),
            headers: Vec::new(),
            expects: Vec::new(),
        }
    }
}

/// One `http-check expect [!] KIND VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpExpect {
    /// `!`.
    pub negate: bool,
    /// What must hold.
    pub what: HttpMatch,
}

/// What an `http-check expect` looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpMatch {
    /// `status 200` or `status 200-299,302`: inclusive ranges.
    Status(Vec<(u16, u16)>),
    /// `rstatus REGEX`, against the three digits.
    Rstatus(Regex),
    /// `string TEXT`, in the body.
    String(Vec<u8>),
    /// `rstring REGEX`, in the body.
    Rstring(Regex),
}

impl HttpMatch {
    /// Whether it needs the body (else the status line is enough).
    fn needs_body(&self) -> bool {
        matches!(self, HttpMatch::String(_) | HttpMatch::Rstring(_))
    }

    fn holds(&self, status: u16, body: &[u8]) -> bool {
        match self {
            HttpMatch::Status(ranges) => ranges
                .iter()
                .any(|&(low, high)| (low..=high).contains(&status)),
            HttpMatch::Rstatus(regex) => regex.is_match(status.to_string().as_bytes()),
            HttpMatch::String(text) => find_bytes(body, text).is_some(),
            HttpMatch::Rstring(regex) => regex.is_match(body),
        }
    }
}

impl fmt::Display for HttpExpect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negate {
            f.write_str("! ")?;
        }
        match &self.what {
            HttpMatch::Status(ranges) => {
                let list: Vec<String> = ranges
                    .iter()
                    .map(|&(l, h)| {
                        if l == h {
                            l.to_string()
                        } else {
                            format!("{l}-{h}")
                        }
                    })
                    .collect();
                write!(f, "status {}", list.join(","))
            }
            HttpMatch::Rstatus(regex) => write!(f, "rstatus {regex}"),
            HttpMatch::String(text) => write!(f, "string {}", shown(text)),
            HttpMatch::Rstring(regex) => write!(f, "rstring {regex}"),
        }
    }
}

impl HttpCheck {
    /// The request for the server at `host` (module docs).
    pub fn request(&self, host: &str) -> Vec<u8> {
        let mut head = format!("{} {} {}\r\n", self.method, self.uri, self.version);
        let has_host = self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("host"));
        if self.version == "HTTP/1.1" && !has_host {
            head.push_str(&format!("Host: {host}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }

    /// A check of the server at `host` from its first step.
    pub fn start(&self, host: String) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            check: self,
            host,
            sent: false,
        })
    }
}

struct Run<'a> {
    check: &'a HttpCheck,
    host: String,
    sent: bool,
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        if !self.sent {
            self.sent = true;
            return Next::Send(self.check.request(&self.host));
        }
        let response = match Response::parse(inbox.bytes()) {
            Parsed::Incomplete if inbox.is_final() => {
                let detail = format!("http: expected a status line, got {}", got(inbox));
                return Next::done(Verdict::failed(Status::L7Rsp, detail));
            }
            Parsed::Incomplete => return Next::Receive,
            Parsed::Bad(detail) => return Next::done(Verdict::failed(Status::L7Rsp, detail)),
            Parsed::Head(response) => response,
        };
        // The status is judged first: a 503 fails without its body.
        let verdict = self.judge(&response, None);
        let needs_body = self.check.expects.iter().any(|e| e.what.needs_body());
        if !verdict.status.is_ok() || !needs_body {
            return Next::done(verdict);
        }
        match response.body(inbox) {
            Some(body) => Next::done(self.judge(&response, Some(&body))),
            None => Next::Receive,
        }
    }

    fn awaiting(&self) -> String {
        "http: the response".to_string()
    }
}

impl Run<'_> {
    /// The expects on the status line, and with `body` those on the body.
    fn judge(&self, response: &Response, body: Option<&[u8]>) -> Verdict {
        let line = format!("{} {}", response.status, response.reason);
        if self.check.expects.is_empty() {
            return match response.status {
                200..=399 => Verdict::passed(format!("http: {line}")),
                _ => Verdict::failed(
                    Status::L7Sts,
                    format!("http: status {line}, expected 2xx or 3xx"),
                ),
            };
        }
        for expect in &self.check.expects {
            let judged = match (expect.what.needs_body(), body) {
                (false, _) => expect.what.holds(response.status, &[]),
                (true, Some(body)) => expect.what.holds(response.status, body),
                (true, None) => continue,
            };
            if judged == expect.negate {
                let status = match expect.what.needs_body() {
                    true => Status::L7Rsp,
                    false => Status::L7Sts,
                };
                return Verdict::failed(status, format!("http: status {line}, expected {expect}"));
            }
        }
        Verdict::passed(format!("http: {line}"))
    }
}

/// A response's head, as far as the check reads it.
struct Response {
    status: u16,
    reason: String,
    /// Where the body starts in the inbox.
    body_at: usize,
    length: Option<usize>,
    chunked: bool,
}

enum Parsed {
    Incomplete,
    Head(Response),
    Bad(String),
}

impl Response {
    fn parse(bytes: &[u8]) -> Parsed {
        let Some(head_end) = find_bytes(bytes, b"\r\n\r\n") else {
            // The status line alone is judged when the head never ends.
            return match bytes.len() >= INBOX_LIMIT {
                true => Parsed::Bad("http: a response head over 16 KiB".to_string()),
                false => Parsed::Incomplete,
            };
        };
        let head = String::from_utf8_lossy(&bytes[..head_end - 4]);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        let code = parts
            .next()
            .and_then(|c| c.parse::<u16>().ok())
            .filter(|c| (100..=999).contains(c));
        let (true, Some(status)) = (version.starts_with("HTTP/"), code) else {
            return Parsed::Bad(format!(
                "http: not a status line: {}",
                shown(status_line.as_bytes())
            ));
        };
        let mut response = Response {
            status,
            reason: parts.next().unwrap_or_default().to_string(),
            body_at: head_end,
            length: None,
            chunked: false,
        };
        for header in lines {
            let Some((name, value)) = header.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                response.length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                response.chunked = value.to_ascii_lowercase().ends_with("chunked");
            }
        }
        Parsed::Head(response)
    }

    /// The whole body, once it is in (or no more can come); `None` while
    /// more is due.
    fn body(&self, inbox: &Inbox) -> Option<Vec<u8>> {
        let raw = inbox.bytes().get(self.body_at..).unwrap_or_default();
        if self.chunked {
            return match dechunk(raw) {
                Some(body) => Some(body),
                None if inbox.is_final() => Some(raw.to_vec()),
                None => None,
            };
        }
        match self.length {
            Some(n) if raw.len() >= n => Some(raw[..n].to_vec()),
            _ if inbox.is_final() => Some(raw.to_vec()),
            _ => None,
        }
    }
}

/// A chunked body, decoded, once its last chunk is in (trailers are not
/// needed: the check judges the body only).
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let end = find_bytes(raw, b"\r\n")?;
        let size_line = String::from_utf8_lossy(&raw[..end - 2]);
        let size_text = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        // A size from the server: checked, never trusted to fit.
        let chunk_end = end.checked_add(size)?;
        body.extend_from_slice(raw.get(end..chunk_end)?);
        raw = raw.get(chunk_end.checked_add(2)?..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    fn check(expects: Vec<HttpExpect>) -> HttpCheck {
        HttpCheck {
            method: "GET".into(),
            uri: "/health".into(),
            version: "HTTP/1.1".into(),
            headers: Vec::new(),
            expects,
        }
    }

    fn expect(negate: bool, what: HttpMatch) -> HttpExpect {
        HttpExpect { negate, what }
    }

    #[test]
    fn the_request_is_http_with_a_host_for_1_1() {
        let c = check(Vec::new());
        assert_eq!(
            c.request("127.0.0.1:80"),
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:80\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            HttpCheck::default().request("x"),
            b"OPTIONS / HTTP/1.0\r\nConnection: close\r\n\r\n"
        );
        let named = HttpCheck {
            headers: vec![("Host".into(), "db.example".into())],
            ..c
        };
        assert!(
            String::from_utf8(named.request("x"))
                .unwrap()
                .contains("Host: db.example\r\nConnection")
        );
    }

    #[test]
    fn without_expect_2xx_and_3xx_are_up() {
        let c = check(Vec::new());
        let (_, v) = run(
            &mut *c.start("h".into()),
            &[Some(b"HTTP/1.1 204 No Content\r\n\r\n")],
        );
        assert_eq!(v, Some(Verdict::passed("http: 204 No Content")));
        let (_, v) = run(
            &mut *c.start("h".into()),
            &[Some(b"HTTP/1.1 503 Service Unavailable\r\nX: y\r\n\r\n")],
        );
        assert_eq!(
            v,
            Some(Verdict::failed(
                Status::L7Sts,
                "http: status 503 Service Unavailable, expected 2xx or 3xx"
            ))
        );
    }

    #[test]
    fn status_and_body_expects() {
        let c = check(vec![
            expect(false, HttpMatch::Status(vec![(200, 200)])),
            expect(false, HttpMatch::String(b"ready".to_vec())),
            expect(
                true,
                HttpMatch::Rstring(Regex::new("maint(enance)?").unwrap()),
            ),
        ]);
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nready\r\n";
        let (_, v) = run(
            &mut *c.start("h".into()),
            &[Some(&ok[..20]), Some(&ok[20..])],
        );
        assert_eq!(v, Some(Verdict::passed("http: 200 OK")));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nrea\r\n4\r\ndy!!\r\n0\r\n\r\n";
        let (_, v) = run(&mut *c.start("h".into()), &[Some(chunked)]);
        assert!(v.expect("judged").status.is_ok(), "chunks are joined");
        let (_, v) = run(
            &mut *c.start("h".into()),
            &[Some(b"HTTP/1.0 200 OK\r\n\r\nin maintenance"), None],
        );
        assert_eq!(
            v,
            Some(Verdict::failed(
                Status::L7Rsp,
                "http: status 200 OK, expected string \"ready\""
            ))
        );
        let (_, v) = run(
            &mut *c.start("h".into()),
            &[Some(b"HTTP/1.0 404 Not Found\r\n\r\n")],
        );
        assert_eq!(
            v.map(|v| v.detail),
            Some("http: status 404 Not Found, expected status 200".into())
        );
    }

    #[test]
    fn what_is_not_http_says_so() {
        let c = check(Vec::new());
        let (_, v) = run(&mut *c.start("h".into()), &[Some(b"+PONG\r\n\r\n")]);
        assert_eq!(
            v,
            Some(Verdict::failed(
                Status::L7Rsp,
                "http: not a status line: \"+PONG\""
            ))
        );
        let huge = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx";
        let body = check(vec![expect(false, HttpMatch::String(b"x".to_vec()))]);
        let (_, v) = run(&mut *body.start("h".into()), &[Some(huge), None]);
        // Undecodable: judged as it came, once the connection closed.
        assert_eq!(
            v.map(|v| v.status),
            Some(Status::L7Ok),
            "a huge chunk size is no panic"
        );
        let (_, v) = run(&mut *c.start("h".into()), &[Some(b"HTTP/1.1 200"), None]);
        assert!(
            v.expect("closed")
                .detail
                .starts_with("http: expected a status line")
        );
    }
}
