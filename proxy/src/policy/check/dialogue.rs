//! The vocabulary every check speaks: a [`Dialogue`] is asked what to do
//! [`Next`] (connect, send these bytes, wait for more, or done), given the
//! bytes received so far in its [`Inbox`]; it ends with a [`Verdict`]. No
//! socket and no clock here: the health-check thread (`epoll/probe.rs`)
//! does the I/O and keeps the time, and each protocol's file is a plain
//! state machine that a test feeds with bytes.
//!
//! ```text
//!   driver                                    dialogue
//!     │ ── next(inbox) ───────────────────────▶ │
//!     │ ◀── Connect / Send(bytes) / Receive ──── │   (Receive: the driver reads more
//!     │ ── next(inbox) ───────────────────────▶ │    into the inbox, or marks it
//!     │ ◀── Done { verdict, goodbye } ────────── │    closed or full)
//! ```

use std::fmt;

/// The most a check keeps of what a server sent and no step consumed yet
/// (HAProxy's check buffer is one `tune.bufsize`, 16 KiB by default). Once
/// full, an expect judges what is there, as at the end of the connection.
pub const INBOX_LIMIT: usize = 16 * 1024;

/// What the server sent, not yet consumed by a step, and whether it has
/// closed its side.
#[derive(Debug, Default)]
pub struct Inbox {
    bytes: Vec<u8>,
    /// How the server's side ended, once it has: `the connection closed`,
    /// or the error a read returned (`connection reset by peer`).
    closed: Option<String>,
}

impl Inbox {
    /// The bytes received and not consumed.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Adds what a read returned; at most up to [`INBOX_LIMIT`] in all
    /// (the rest is dropped: a check reads no more than it judges).
    pub fn push(&mut self, data: &[u8]) {
        let room = INBOX_LIMIT.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// Drops the first `n` bytes (a step used them).
    pub fn consume(&mut self, n: usize) {
        self.bytes.drain(..n.min(self.bytes.len()));
    }

    /// The server closed its side (a read returned 0).
    pub fn close(&mut self) {
        self.closed = Some("the connection closed".to_string());
    }

    /// A read failed with `why` (`connection reset by peer`): nothing more
    /// will come either.
    pub fn fail(&mut self, why: String) {
        self.closed = Some(why);
    }

    /// A new connection: nothing received on it yet.
    pub fn reset(&mut self) {
        self.bytes.clear();
        self.closed = None;
    }

    /// Whether the server closed its side (or a read failed).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// No more will come into it: closed, or full. An expect that does not
    /// match by then never will.
    pub fn is_final(&self) -> bool {
        self.closed.is_some() || self.bytes.len() >= INBOX_LIMIT
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Open a connection to the server (to `port` instead of the server's
    /// own, if given), closing any open one. A dialogue whose first answer
    /// is not `Connect` gets one to the server's address first.
    Connect {
        /// Another port of the server's address.
        port: Option<u16>,
    },
    /// Write all of these bytes, then ask again.
    Send(Vec<u8>),
    /// Read more into the inbox (or mark it closed or full), then ask
    /// again. Never answered once the inbox [is final](Inbox::is_final).
    Receive,
    /// The check is over.
    Done {
        /// Its result.
        verdict: Verdict,
        /// Bytes to send before closing (a protocol's polite goodbye:
        /// `QUIT`, `COM_QUIT`, `Terminate`); the driver then waits briefly
        /// for the server to close first, so that the server, not the
        /// proxy, keeps the connection's TIME_WAIT.
        goodbye: Vec<u8>,
    },
}

impl Next {
    /// Done, with nothing to say before closing.
    pub fn done(verdict: Verdict) -> Next {
        Next::Done {
            verdict,
            goodbye: Vec::new(),
        }
    }
}

/// A check in progress: one per check, made by
/// [`Probe::start`](super::Probe::start).
pub trait Dialogue: Send {
    /// What to do now, given what was received and not consumed.
    fn next(&mut self, inbox: &mut Inbox) -> Next;

    /// What it is waiting for, for the message of a check that timed out
    /// (`"+PONG"`, `"the handshake packet"`).
    fn awaiting(&self) -> String;
}

/// How a check ended: HAProxy's check status codes (its `check_status`
/// field, its stats page and its `haproxy_server_check_status` metric), so
/// that an operator reads the same words here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Connected, and nothing more was asked (a plain `check`).
    L4Ok,
    /// The connect took longer than the check's timeout.
    L4Tout,
    /// The connect failed: refused, unreachable, reset.
    L4Con,
    /// The server answered as expected.
    L7Ok,
    /// Connected, but the expected answer did not come in time.
    L7Tout,
    /// The answer was not what was expected, or not the protocol at all
    /// (a string missing, a packet malformed, the connection closed early).
    L7Rsp,
    /// The server answered in its protocol, with an error: an HTTP status,
    /// a Redis `-ERR`, a PostgreSQL ErrorResponse, a MySQL ERR packet, an
    /// SMTP 5xx.
    L7Sts,
}

impl Status {
    /// Every status, in the order the metrics list them.
    pub const ALL: [Status; 7] = [
        Status::L4Ok,
        Status::L4Tout,
        Status::L4Con,
        Status::L7Ok,
        Status::L7Tout,
        Status::L7Rsp,
        Status::L7Sts,
    ];

    /// HAProxy's code: `L4OK`, `L7STS`...
    pub fn code(self) -> &'static str {
        match self {
            Status::L4Ok => "L4OK",
            Status::L4Tout => "L4TOUT",
            Status::L4Con => "L4CON",
            Status::L7Ok => "L7OK",
            Status::L7Tout => "L7TOUT",
            Status::L7Rsp => "L7RSP",
            Status::L7Sts => "L7STS",
        }
    }

    /// Whether the check passed.
    pub fn is_ok(self) -> bool {
        matches!(self, Status::L4Ok | Status::L7Ok)
    }
}

/// A check's result: its status, and what was seen (`redis: +PONG`) or
/// why it failed (`redis: expected +PONG, got "-ERR unknown command"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// HAProxy's code for it.
    pub status: Status,
    /// For the log, the dump and the admin endpoint.
    pub detail: String,
}

impl Verdict {
    /// The server answered as expected: `detail` says what it said.
    pub fn passed(detail: impl Into<String>) -> Verdict {
        Verdict {
            status: Status::L7Ok,
            detail: detail.into(),
        }
    }

    /// The check failed with `status`, because of `detail`.
    pub fn failed(status: Status, detail: impl Into<String>) -> Verdict {
        Verdict {
            status,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status.code(), self.detail)
    }
}

/// The most bytes of a server's answer a message shows.
const SHOWN: usize = 80;

/// `bytes` as a message shows them: quoted, printable ASCII as it is,
/// anything else escaped (`\r`, `\n`, `\x00`), cut after 80 bytes
/// with `...`. A server's answer is never written to a log raw.
pub fn shown(bytes: &[u8]) -> String {
    let mut text = String::from("\"");
    for &b in bytes.iter().take(SHOWN) {
        match b {
            b'\r' => text.push_str("\\r"),
            b'\n' => text.push_str("\\n"),
            b'\t' => text.push_str("\\t"),
            b'"' => text.push_str("\\\""),
            b'\\' => text.push_str("\\\\"),
            0x20..=0x7e => text.push(char::from(b)),
            _ => text.push_str(&format!("\\x{b:02x}")),
        }
    }
    text.push('"');
    if bytes.len() > SHOWN {
        text.push_str("...");
    }
    text
}

/// What a failed expect says it got: the bytes, or that there were none
/// and why.
pub fn got(inbox: &Inbox) -> String {
    match (inbox.bytes().is_empty(), &inbox.closed) {
        (true, Some(how)) => format!("nothing: {how}"),
        (true, None) => "nothing".to_string(),
        (false, Some(how)) => format!("{} then {how}", shown(inbox.bytes())),
        (false, None) => shown(inbox.bytes()),
    }
}

/// Finds `needle` in `haystack`: where it ends, if it is there.
pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| at + needle.len())
}

/// A line ending in CRLF at the start of `inbox`: its text without the
/// CRLF, and its length with it. `None` while the line is incomplete.
pub fn line(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let end = find_bytes(bytes, b"\r\n")?;
    Some((&bytes[..end - 2], end))
}

/// What the protocols' tests drive their dialogues with.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Dialogue, Inbox, Next, Verdict};

    /// Runs `dialogue` against `answers` (each arriving on one read;
    /// `None`: the server closes), returning all it sent (its goodbye
    /// included) and its verdict; no verdict if it would still wait (the
    /// driver's timeout would end it).
    pub(crate) fn run(
        dialogue: &mut dyn Dialogue,
        answers: &[Option<&[u8]>],
    ) -> (Vec<u8>, Option<Verdict>) {
        let mut inbox = Inbox::default();
        let mut sent = Vec::new();
        let mut answers = answers.iter();
        for _ in 0..100 {
            match dialogue.next(&mut inbox) {
                Next::Connect { .. } => inbox.reset(),
                Next::Send(bytes) => sent.extend(bytes),
                Next::Receive => {
                    assert!(!inbox.is_final(), "Receive on a final inbox");
                    match answers.next() {
                        Some(Some(bytes)) => inbox.push(bytes),
                        Some(None) => inbox.close(),
                        None => return (sent, None),
                    }
                }
                Next::Done { verdict, goodbye } => {
                    sent.extend(goodbye);
                    return (sent, Some(verdict));
                }
            }
        }
        panic!("the dialogue did not end in 100 steps");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_shown_quoted_escaped_and_cut() {
        assert_eq!(shown(b"+PONG\r\n"), "\"+PONG\\r\\n\"");
        assert_eq!(shown(b"a\x00\xff\"\\"), "\"a\\x00\\xff\\\"\\\\\"");
        let long = shown(&[b'x'; 100]);
        assert!(
            long.ends_with("\"...") && long.len() == 80 + 2 + 3,
            "{long}"
        );
    }

    #[test]
    fn the_inbox_keeps_at_most_its_limit() {
        let mut inbox = Inbox::default();
        inbox.push(&[b'a'; INBOX_LIMIT - 1]);
        assert!(!inbox.is_final());
        inbox.push(b"bcd");
        assert_eq!(inbox.bytes().len(), INBOX_LIMIT);
        assert!(inbox.is_final(), "full counts as final");
        inbox.consume(INBOX_LIMIT - 1);
        assert_eq!(inbox.bytes(), b"b");
        inbox.close();
        assert!(inbox.is_final());
        assert_eq!(got(&inbox), "\"b\" then the connection closed");
        inbox.reset();
        assert_eq!(got(&inbox), "nothing");
    }

    #[test]
    fn lines_and_needles() {
        assert_eq!(line(b"+PONG\r\nrest"), Some((&b"+PONG"[..], 7)));
        assert_eq!(line(b"+PONG\r"), None);
        assert_eq!(find_bytes(b"abcabc", b"ca"), Some(4));
        assert_eq!(find_bytes(b"abc", b"x"), None);
        assert!(Status::ALL.iter().filter(|s| s.is_ok()).count() == 2);
    }
}
