//! `option pgsql-check user NAME`: the start of a PostgreSQL session, from
//! the frontend/backend protocol's own description (PostgreSQL manual,
//! "Frontend/Backend Protocol": "Message Flow / Start-up" and "Message
//! Formats").
//!
//! ```text
//!   check ─▶ StartupMessage: Int32 length, Int32 196608 (protocol 3.0),
//!            "user" NUL NAME NUL, NUL
//!   server ─▶ 'R' Int32 length, Int32 code     an Authentication request: UP
//!                                              (0 Ok, 3 cleartext, 5 MD5, 10 SASL...)
//!          ─▶ 'E' Int32 length, fields         an ErrorResponse: DOWN, with its
//!                                              severity, code and message
//! ```
//!
//! A server that asks for a password is up: it is accepting sessions, and
//! the check has none to give (HAProxy's rule too). After AuthenticationOk
//! (a `trust` user) the check says goodbye with a Terminate message (`X`);
//! after a password request it just closes. A server starting up, shutting
//! down or in recovery answers with an ErrorResponse (`57P03 the database
//! system is starting up`), which is what takes a stopping primary down
//! before its port closes.

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, got, shown};

/// The protocol version of the StartupMessage: 3.0.
const PROTOCOL_3_0: u32 = 196_608;

/// The longest message the check reads (an ErrorResponse is a few hundred
/// bytes; a length beyond this is not PostgreSQL).
const MAX_MESSAGE: usize = 8192;

/// Terminate: 'X' and its length, 4.
const TERMINATE: &[u8] = b"X\0\0\0\x04";

/// `option pgsql-check user NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgsqlCheck {
    /// The user the StartupMessage names.
    pub user: String,
}

impl PgsqlCheck {
    /// The StartupMessage (module docs).
    pub fn startup_message(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&PROTOCOL_3_0.to_be_bytes());
        for text in ["user", &self.user] {
            body.extend_from_slice(text.as_bytes());
            body.push(0);
        }
        body.push(0);
        let length = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
        let mut message = length.to_be_bytes().to_vec();
        message.extend(body);
        message
    }

    /// A check from its first step.
    pub fn start(&self) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            check: self,
            sent: false,
        })
    }
}

struct Run<'a> {
    check: &'a PgsqlCheck,
    sent: bool,
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        if !self.sent {
            self.sent = true;
            return Next::Send(self.check.startup_message());
        }
        loop {
            match message(inbox.bytes()) {
                Message::Incomplete if inbox.is_final() => {
                    let detail = format!(
                        "pgsql: expected an Authentication request, got {}",
                        got(inbox)
                    );
                    return Next::done(Verdict::failed(Status::L7Rsp, detail));
                }
                Message::Incomplete => return Next::Receive,
                Message::Bad(detail) => return Next::done(Verdict::failed(Status::L7Rsp, detail)),
                Message::Whole(kind, body, used) => match judge(kind, body) {
                    Some(next) => return next,
                    None => inbox.consume(used),
                },
            }
        }
    }

    fn awaiting(&self) -> String {
        "pgsql: an Authentication request".to_string()
    }
}

/// What one whole message means: the end of the check, or `None` to read
/// the next (a NoticeResponse or NegotiateProtocolVersion may come first).
fn judge(kind: u8, body: &[u8]) -> Option<Next> {
    match kind {
        b'R' => {
            let code = body
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let name = code.map_or("Authentication", authentication);
            let verdict = Verdict::passed(format!("pgsql: {name}"));
            Some(match code {
                Some(0) => Next::Done {
                    verdict,
                    goodbye: TERMINATE.to_vec(),
                },
                _ => Next::done(verdict),
            })
        }
        b'E' => Some(Next::done(Verdict::failed(
            Status::L7Sts,
            error_response(body),
        ))),
        b'N' | b'v' => None,
        other => {
            let detail = format!("pgsql: unexpected message {}", shown(&[other]));
            Some(Next::done(Verdict::failed(Status::L7Rsp, detail)))
        }
    }
}

/// The name of an Authentication request's code.
fn authentication(code: u32) -> &'static str {
    match code {
        0 => "AuthenticationOk",
        2 => "AuthenticationKerberosV5",
        3 => "AuthenticationCleartextPassword",
        5 => "AuthenticationMD5Password",
        7 => "AuthenticationGSS",
        9 => "AuthenticationSSPI",
        10 => "AuthenticationSASL",
        _ => "Authentication request",
    }
}

/// `ErrorResponse FATAL 57P03: the database system is starting up`: the
/// fields a reader needs, from the body's (type, NUL-terminated text)
/// pairs: V (severity, never localized) or S, C (code), M (message).
fn error_response(body: &[u8]) -> String {
    let mut severity = None;
    let mut fallback = None;
    let mut code = None;
    let mut text = None;
    for field in body.split(|&b| b == 0) {
        let Some((&kind, value)) = field.split_first() else {
            continue;
        };
        let value = String::from_utf8_lossy(value).into_owned();
        match kind {
            b'V' => severity = Some(value),
            b'S' => fallback = Some(value),
            b'C' => code = Some(value),
            b'M' => text = Some(value),
            _ => {}
        }
    }
    let severity = severity.or(fallback).unwrap_or_else(|| "ERROR".to_string());
    let code = code.map_or(String::new(), |c| format!(" {c}"));
    let text = text.unwrap_or_default();
    format!("pgsql: ErrorResponse {severity}{code}: {text}")
}

/// One backend message at the start of the input.
enum Message<'a> {
    Incomplete,
    /// Its type byte, its body, and its length in all.
    Whole(u8, &'a [u8], usize),
    Bad(String),
}

fn message(bytes: &[u8]) -> Message<'_> {
    let Some(&[kind, a, b, c, d]) = bytes.get(..5).and_then(|h| <&[u8; 5]>::try_from(h).ok())
    else {
        return Message::Incomplete;
    };
    let length = u32::from_be_bytes([a, b, c, d]) as usize;
    if !(4..=MAX_MESSAGE).contains(&length) {
        let head = &bytes[..bytes.len().min(16)];
        return Message::Bad(format!("pgsql: not a PostgreSQL message: {}", shown(head)));
    }
    match bytes.get(5..1 + length) {
        Some(body) => Message::Whole(kind, body, 1 + length),
        None => Message::Incomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    fn check() -> PgsqlCheck {
        PgsqlCheck {
            user: "haproxy".into(),
        }
    }

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(u32::try_from(body.len()).unwrap() + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn the_startup_message_is_the_protocols() {
        let m = check().startup_message();
        assert_eq!(&m[..4], &(m.len() as u32).to_be_bytes());
        assert_eq!(&m[4..8], &[0, 3, 0, 0]);
        assert_eq!(&m[8..], b"user\0haproxy\0\0");
    }

    #[test]
    fn an_authentication_request_is_up() {
        let check = check();
        let ok = msg(b'R', &[0, 0, 0, 0]);
        let (sent, verdict) = run(&mut *check.start(), &[Some(&ok[..3]), Some(&ok[3..])]);
        assert!(sent.ends_with(TERMINATE), "AuthenticationOk: Terminate");
        assert_eq!(verdict, Some(Verdict::passed("pgsql: AuthenticationOk")));
        let sasl = msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256\0\0");
        let (sent, verdict) = run(&mut *check.start(), &[Some(&sasl)]);
        assert!(
            !sent.ends_with(TERMINATE),
            "no goodbye in mid-authentication"
        );
        assert_eq!(verdict, Some(Verdict::passed("pgsql: AuthenticationSASL")));
        let notice_first = [
            msg(b'N', b"SNOTICE\0Mhello\0\0"),
            msg(b'R', &[0, 0, 0, 5, 1, 2, 3, 4]),
        ]
        .concat();
        let (_, verdict) = run(&mut *check.start(), &[Some(&notice_first)]);
        assert_eq!(
            verdict,
            Some(Verdict::passed("pgsql: AuthenticationMD5Password"))
        );
    }

    #[test]
    fn an_error_response_is_down_with_its_words() {
        let error = msg(
            b'E',
            b"SFATAL\0VFATAL\0C57P03\0Mthe database system is starting up\0Fpostmaster.c\0\0",
        );
        let (_, verdict) = run(&mut *check().start(), &[Some(&error)]);
        assert_eq!(
            verdict,
            Some(Verdict::failed(
                Status::L7Sts,
                "pgsql: ErrorResponse FATAL 57P03: the database system is starting up"
            ))
        );
    }

    #[test]
    fn anything_else_is_not_postgresql() {
        let (_, verdict) = run(
            &mut *check().start(),
            &[Some(b"HTTP/1.1 400 Bad Request\r\n")],
        );
        let verdict = verdict.expect("judged");
        assert_eq!(verdict.status, Status::L7Rsp);
        assert!(
            verdict
                .detail
                .starts_with("pgsql: not a PostgreSQL message"),
            "{}",
            verdict.detail
        );
        let (_, verdict) = run(&mut *check().start(), &[Some(b"R\0\0"), None]);
        assert!(
            verdict
                .expect("closed")
                .detail
                .contains("then the connection closed")
        );
    }
}
