//! The admin listener's request head, read byte by byte as it arrives, so
//! that a head that cannot be HTTP/1.x is refused at the first byte that
//! proves it, not at a blank line that may never come.
//!
//! ```text
//!   GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n   complete: GET /metrics
//!   \x16\x03\x01...                            refused at its first byte: not a method
//!   GET /metrics HTTP/2                        refused at the "2"
//!   GET /metrics HTTP/1.1\n                    refused at the LF: lines end with CRLF
//!   GET /metr                                  not decided yet: it may still become a request
//! ```
//!
//! What is accepted is strict: `METHOD SP TARGET SP HTTP/1.x CRLF`, single
//! spaces, a method that is a token, a target that is a path or an absolute
//! `http(s)://` URL, header lines `NAME: VALUE CRLF` with a token for a name,
//! no colon-less line, no folded line, no control character in a value, and
//! for HTTP/1.1 exactly one `Host` (RFC 9112, 3 and 5).
//!
//! [`HeadScanner::feed`] resumes where it stopped, so every byte is looked
//! at once: a client sending one byte at a time costs linear work, not a
//! rescan of the head at every read. [`parse_request`] is the same scanner
//! run over a whole head; it is the listener's entry point for a complete
//! head and the fuzz target's, and no input makes it panic.

use std::fmt;

/// The parts of a request the admin listener looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method, a token, case-sensitive (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// The path, without its query string (of an absolute URL, its path;
    /// `/` when it has none).
    pub path: &'a str,
}

/// Why a head is not a request the admin listener understands: each is
/// answered 400, with [`BadRequest::reason`] in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// A method byte that is not a token character.
    Method,
    /// Not three parts one space apart: an empty part, a second space, or a
    /// line that ends too early.
    RequestLine,
    /// A target byte that is not visible ASCII.
    Target,
    /// A target that is neither a path nor an absolute `http(s)://` URL.
    TargetForm,
    /// A version other than `HTTP/1.0` and `HTTP/1.1`.
    Version,
    /// A line feed without its carriage return.
    BareLf,
    /// A carriage return not followed by a line feed.
    BareCr,
    /// A header name byte that is not a token character (a space before
    /// the colon, a folded line, an empty name).
    HeaderName,
    /// A header line that ends without a colon.
    NoColon,
    /// A control character in a header value.
    ControlChar,
    /// Two `Host` headers, or an HTTP/1.1 request without one.
    Host,
    /// The bytes end before the blank line that ends a head
    /// ([`parse_request`] only: the listener waits for more).
    Unfinished,
}

impl BadRequest {
    /// What was wrong, as the 400's body says it.
    pub fn reason(self) -> &'static str {
        match self {
            BadRequest::Method => "a malformed method",
            BadRequest::RequestLine => {
                "the request line is not: method, target, version, one space apart"
            }
            BadRequest::Target => "a malformed request target",
            BadRequest::TargetForm => "a request target that is neither a path nor an absolute URL",
            BadRequest::Version => "only HTTP/1.0 and HTTP/1.1 are spoken here",
            BadRequest::BareLf => "lines must end with CRLF",
            BadRequest::BareCr => "a CR inside a line",
            BadRequest::HeaderName => "a malformed header name",
            BadRequest::NoColon => "a header line without a colon",
            BadRequest::ControlChar => "a control character in a header value",
            BadRequest::Host => "an HTTP/1.1 request needs exactly one Host header",
            BadRequest::Unfinished => "the head ends before its blank line",
        }
    }
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for BadRequest {}

/// Parses the request head at the start of `head`: `Ok` once its blank line
/// is read (bytes after it, a body, are not looked at); the first thing
/// wrong otherwise, [`BadRequest::Unfinished`] if nothing is wrong but the
/// blank line has not come. Never panics, whatever the bytes.
pub fn parse_request(head: &[u8]) -> Result<Request<'_>, BadRequest> {
    let mut scanner = HeadScanner::new();
    match scanner.feed(head)? {
        Some(len) => scanner.request(head.get(..len).unwrap_or_default()),
        None => Err(BadRequest::Unfinished),
    }
}

/// The versions spoken here.
const VERSIONS: [&[u8]; 2] = [b"HTTP/1.1", b"HTTP/1.0"];

/// The schemes of an absolute target.
const SCHEMES: [&[u8]; 2] = [b"http://", b"https://"];

/// Where the scanner is in the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Method,
    Target,
    Version,
    /// After a CR: only an LF may follow; `ends_head` if it is the blank
    /// line's.
    LineFeed {
        ends_head: bool,
    },
    /// The first byte of a header line, or of the blank line.
    LineStart,
    Name,
    Value,
    /// The blank line is read.
    Done,
}

/// A request head read as it arrives (module docs): feed it the bytes
/// received so far, again after every read, until it says the head is
/// complete or cannot be a request.
#[derive(Debug, Clone)]
pub struct HeadScanner {
    at: At,
    /// Bytes looked at so far.
    pos: usize,
    /// Where the part being read (target, version, header name) starts.
    start: usize,
    /// Where the method ends (the first space).
    method_end: usize,
    /// The target's bytes, once its space is read.
    target: (usize, usize),
    http11: bool,
    hosts: u32,
}

impl Default for HeadScanner {
    fn default() -> Self {
        HeadScanner::new()
    }
}

impl HeadScanner {
    /// A scanner that has seen nothing.
    pub fn new() -> HeadScanner {
        HeadScanner {
            at: At::Method,
            pos: 0,
            start: 0,
            method_end: 0,
            target: (0, 0),
            http11: false,
            hosts: 0,
        }
    }

    /// Looks at the bytes of `head` it has not seen yet (`head` is the head
    /// so far, grown since the last call): `Ok(Some(length))` once the blank
    /// line is in (the head is `head[..length]`), `Ok(None)` while it may
    /// still become a request, `Err` at the first byte that proves it
    /// cannot (and again at every later call).
    pub fn feed(&mut self, head: &[u8]) -> Result<Option<usize>, BadRequest> {
        while self.at != At::Done {
            let Some(&byte) = head.get(self.pos) else {
                return Ok(None);
            };
            self.at = self.step(head, byte)?;
            self.pos += 1;
        }
        Ok(Some(self.pos))
    }

    /// The request of a head that [`feed`](HeadScanner::feed) found
    /// complete; [`BadRequest::Unfinished`] before that.
    pub fn request<'a>(&self, head: &'a [u8]) -> Result<Request<'a>, BadRequest> {
        if self.at != At::Done {
            return Err(BadRequest::Unfinished);
        }
        let method = ascii(head, 0, self.method_end).ok_or(BadRequest::Method)?;
        let (from, to) = self.target;
        let target = ascii(head, from, to).ok_or(BadRequest::Target)?;
        Ok(Request {
            method,
            path: path_of(target)?,
        })
    }

    /// Where `byte`, at `self.pos`, takes the scanner.
    fn step(&mut self, head: &[u8], byte: u8) -> Result<At, BadRequest> {
        let i = self.pos;
        if byte == b'\n' && !matches!(self.at, At::LineFeed { .. }) {
            return Err(BadRequest::BareLf);
        }
        match self.at {
            At::Method | At::Target | At::Version => self.request_line(head, byte),
            At::LineFeed { ends_head } => match byte {
                b'\n' if ends_head => self.finish(),
                b'\n' => Ok(At::LineStart),
                _ => Err(BadRequest::BareCr),
            },
            At::LineStart => match byte {
                b'\r' => Ok(At::LineFeed { ends_head: true }),
                b if is_tchar(b) => {
                    self.start = i;
                    Ok(At::Name)
                }
                _ => Err(BadRequest::HeaderName),
            },
            At::Name => match byte {
                b':' => self.count_host(part(head, self.start, i)),
                b'\r' => Err(BadRequest::NoColon),
                b if is_tchar(b) => Ok(At::Name),
                _ => Err(BadRequest::HeaderName),
            },
            At::Value => match byte {
                b'\r' => Ok(At::LineFeed { ends_head: false }),
                b'\t' => Ok(At::Value),
                b if b < 0x20 || b == 0x7f => Err(BadRequest::ControlChar),
                _ => Ok(At::Value),
            },
            At::Done => Ok(At::Done),
        }
    }

    /// A byte of the request line: `METHOD SP TARGET SP HTTP/1.x CR`.
    fn request_line(&mut self, head: &[u8], byte: u8) -> Result<At, BadRequest> {
        let i = self.pos;
        match (self.at, byte) {
            (At::Method, b' ') if i > 0 => {
                self.method_end = i;
                self.start = i + 1;
                Ok(At::Target)
            }
            (At::Method, b) if is_tchar(b) => Ok(At::Method),
            (At::Method, b' ' | b'\r') => Err(BadRequest::RequestLine),
            (At::Method, _) => Err(BadRequest::Method),
            (At::Target, b' ') if i > self.start => {
                self.target = (self.start, i);
                ascii(head, self.start, i)
                    .ok_or(BadRequest::Target)
                    .and_then(path_of)?;
                self.start = i + 1;
                Ok(At::Version)
            }
            (At::Target, b' ' | b'\r') => Err(BadRequest::RequestLine),
            (At::Target, b) if b.is_ascii_graphic() => {
                target_may_start(part(head, self.start, i + 1))?;
                Ok(At::Target)
            }
            (At::Target, _) => Err(BadRequest::Target),
            (_, b'\r') => {
                let version = part(head, self.start, i);
                self.http11 = version == VERSIONS[0];
                match VERSIONS.contains(&version) {
                    true => Ok(At::LineFeed { ends_head: false }),
                    false => Err(BadRequest::Version),
                }
            }
            (_, b' ') => Err(BadRequest::RequestLine),
            _ => {
                let so_far = part(head, self.start, i + 1);
                match VERSIONS.iter().any(|v| v.starts_with(so_far)) {
                    true => Ok(At::Version),
                    false => Err(BadRequest::Version),
                }
            }
        }
    }

    /// A header name, complete at its colon: at most one `Host`.
    fn count_host(&mut self, name: &[u8]) -> Result<At, BadRequest> {
        if name.eq_ignore_ascii_case(b"host") {
            self.hosts += 1;
        }
        match self.hosts {
            0 | 1 => Ok(At::Value),
            _ => Err(BadRequest::Host),
        }
    }

    /// The blank line: an HTTP/1.1 request must have had its `Host`
    /// (RFC 9112, 3.2).
    fn finish(&self) -> Result<At, BadRequest> {
        match self.http11 && self.hosts == 0 {
            true => Err(BadRequest::Host),
            false => Ok(At::Done),
        }
    }
}

/// `head[from..to]`, or nothing if that is out of bounds (it never is, for
/// the positions the scanner keeps; this keeps "never panics" local).
fn part(head: &[u8], from: usize, to: usize) -> &[u8] {
    head.get(from..to).unwrap_or_default()
}

/// `head[from..to]` as text, if it is ASCII.
fn ascii(head: &[u8], from: usize, to: usize) -> Option<&str> {
    std::str::from_utf8(part(head, from, to))
        .ok()
        .filter(|s| s.is_ascii())
}

/// Whether the start of a target, `so_far`, may still become a path or an
/// absolute URL: decided within its first eight bytes.
fn target_may_start(so_far: &[u8]) -> Result<(), BadRequest> {
    let longest = SCHEMES.iter().map(|s| s.len()).max().unwrap_or_default();
    if so_far.first() == Some(&b'/') || so_far.len() > longest {
        return Ok(());
    }
    let fits = |scheme: &&[u8]| {
        let n = so_far.len().min(scheme.len());
        so_far
            .get(..n)
            .unwrap_or_default()
            .eq_ignore_ascii_case(&scheme[..n])
    };
    match SCHEMES.iter().any(fits) {
        true => Ok(()),
        false => Err(BadRequest::TargetForm),
    }
}

/// The path of a request target: origin form (`/metrics?x=1`), or absolute
/// form (`http://host/metrics`), which servers must accept too.
fn path_of(target: &str) -> Result<&str, BadRequest> {
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(BadRequest::Target);
    }
    let scheme = SCHEMES.iter().find(|s| {
        target
            .as_bytes()
            .get(..s.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(s))
    });
    let path = match (target.starts_with('/'), scheme) {
        (true, _) => target,
        (false, Some(scheme)) => {
            let rest = target.get(scheme.len()..).unwrap_or_default();
            match rest.find(['/', '?']) {
                Some(i) if rest.as_bytes().get(i) == Some(&b'/') => &rest[i..],
                _ => "/",
            }
        }
        (false, None) => return Err(BadRequest::TargetForm),
    };
    Ok(path.split('?').next().unwrap_or(path))
}

/// A byte of RFC 9110's `token`: a method or a header name.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (method, path) of `head` and the blank line that ends it.
    fn ok(head: &str) -> Result<(String, String), BadRequest> {
        let head = format!("{head}\r\n");
        let request = parse_request(head.as_bytes())?;
        Ok((request.method.to_string(), request.path.to_string()))
    }

    #[test]
    fn the_request_line_and_headers_are_parsed_strictly() {
        let path = |head: &str| ok(head).map(|(_, path)| path);
        let request = ok("GET /metrics?a=b HTTP/1.1\r\nHost: x\r\n");
        assert_eq!(request, Ok(("GET".into(), "/metrics".into())));
        assert_eq!(path("GET /health HTTP/1.0\r\n"), Ok("/health".into()));
        assert_eq!(path("GET HTTP://h HTTP/1.0\r\n"), Ok("/".into()));
        assert_eq!(path("GET https://h:1/x?y HTTP/1.0\r\n"), Ok("/x".into()));
        assert_eq!(path("GET http://h?q HTTP/1.0\r\n"), Ok("/".into()));
        assert_eq!(path("GET / HTTP/1.1\r\nhOsT: x\r\n"), Ok("/".into()));
        assert_eq!(
            path("GET / HTTP/1.1\r\nHost: x\r\nX: a\tbé\r\n"),
            Ok("/".into())
        );
        let request = ok("DELETE /metrics HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n");
        assert_eq!(request, Ok(("DELETE".into(), "/metrics".into())));
        let with_body = b"POST / HTTP/1.0\r\n\r\n\x00\xff anything";
        assert_eq!(parse_request(with_body).map(|r| r.method), Ok("POST"));
    }

    /// Heads that are wrong once whole (a CRLF added to each), with why.
    const BAD: &[(&str, BadRequest)] = &[
        ("", BadRequest::RequestLine),
        ("\r\n", BadRequest::RequestLine),
        ("GET /metrics HTTP/1.1", BadRequest::Unfinished),
        (
            "GET  /metrics HTTP/1.1\r\nHost: x\r\n",
            BadRequest::RequestLine,
        ),
        (
            "GET /metrics  HTTP/1.1\r\nHost: x\r\n",
            BadRequest::RequestLine,
        ),
        (
            "GET /metrics HTTP/1.1 \r\nHost: x\r\n",
            BadRequest::RequestLine,
        ),
        (" GET /metrics HTTP/1.1\r\n", BadRequest::RequestLine),
        ("GET /metrics\r\n", BadRequest::RequestLine),
        ("GET\r\n", BadRequest::RequestLine),
        (
            "GET metrics HTTP/1.1\r\nHost: x\r\n",
            BadRequest::TargetForm,
        ),
        (
            "GET ftp://h/metrics HTTP/1.1\r\nHost: x\r\n",
            BadRequest::TargetForm,
        ),
        (
            "GET httpx://h/ HTTP/1.1\r\nHost: x\r\n",
            BadRequest::TargetForm,
        ),
        ("GET /metrics HTTP/1.2\r\nHost: x\r\n", BadRequest::Version),
        ("GET /metrics http/1.1\r\nHost: x\r\n", BadRequest::Version),
        ("GET /metrics HTTP/0.9\r\n", BadRequest::Version),
        ("GET /metrics HTTP/1\r\n", BadRequest::Version),
        ("GET /metrics HTTP/1.10\r\n", BadRequest::Version),
        ("GET /métrics HTTP/1.1\r\nHost: x\r\n", BadRequest::Target),
        ("GET /m\x7f HTTP/1.1\r\nHost: x\r\n", BadRequest::Target),
        ("G(T /metrics HTTP/1.1\r\nHost: x\r\n", BadRequest::Method),
        ("\x16\x03\x01\x02\x00", BadRequest::Method),
        ("GET /metrics HTTP/1.1\r\n", BadRequest::Host),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n",
            BadRequest::Host,
        ),
        (
            "GET /metrics HTTP/1.0\r\nHost: x\r\nhost: y\r\n",
            BadRequest::Host,
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost x\r\n",
            BadRequest::HeaderName,
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost : x\r\n",
            BadRequest::HeaderName,
        ),
        ("GET /metrics HTTP/1.1\r\n: x\r\n", BadRequest::HeaderName),
        ("GET /metrics HTTP/1.1\r\nHostx\r\n", BadRequest::NoColon),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n",
            BadRequest::HeaderName,
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\ry\r\n",
            BadRequest::BareCr,
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\x01\r\n",
            BadRequest::ControlChar,
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\x7f\r\n",
            BadRequest::ControlChar,
        ),
        ("GET /metrics HTTP/1.1\nHost: x\r\n", BadRequest::BareLf),
        ("GET /metrics HTTP/1.0\r\n\n", BadRequest::BareLf),
        ("GET /metrics HTTP/1.1\r\r\n", BadRequest::BareCr),
    ];

    #[test]
    fn malformed_heads_are_refused_with_their_reason() {
        for &(head, why) in BAD {
            assert_eq!(ok(head), Err(why), "{head:?}");
            assert!(!why.reason().is_empty());
        }
    }

    /// Where `bytes`, fed one byte at a time, is first refused (the number
    /// of bytes seen then), or `None` if it never is.
    fn refused_after(bytes: &[u8]) -> Option<(usize, BadRequest)> {
        let mut scanner = HeadScanner::new();
        (1..=bytes.len()).find_map(|n| scanner.feed(&bytes[..n]).err().map(|why| (n, why)))
    }

    #[test]
    fn a_head_that_cannot_be_http_is_refused_at_the_byte_that_shows_it() {
        // (what a client sends, never followed by a blank line; how many
        // bytes it takes to know)
        let cases: &[(&[u8], usize, BadRequest)] = &[
            (b"\x16\x03\x01\x02\x00\x01\x00", 1, BadRequest::Method),
            (b"\x00", 1, BadRequest::Method),
            (b"\r\n", 1, BadRequest::RequestLine),
            (b" GET", 1, BadRequest::RequestLine),
            (b"{\"json\": 1}", 1, BadRequest::Method),
            (b"GET\n", 4, BadRequest::BareLf),
            (b"GET  /", 5, BadRequest::RequestLine),
            (b"GET metrics", 5, BadRequest::TargetForm),
            (b"GET hTtPs:/x", 12, BadRequest::TargetForm),
            (b"GET ftp://", 5, BadRequest::TargetForm),
            (b"GET /m\xc3\xa9", 7, BadRequest::Target),
            (b"GET / HTTP/2", 12, BadRequest::Version),
            (b"GET / http", 7, BadRequest::Version),
            (b"GET / HTTP/1.1 ", 15, BadRequest::RequestLine),
            (b"GET / HTTP/1.1x", 15, BadRequest::Version),
            (b"GET / HTTP/1.1\n", 15, BadRequest::BareLf),
            (b"GET / HTTP/1.1\r\r", 16, BadRequest::BareCr),
            (b"GET / HTTP/1.1\r\n folded", 17, BadRequest::HeaderName),
            (b"GET / HTTP/1.1\r\nHost : x", 21, BadRequest::HeaderName),
            (b"GET / HTTP/1.1\r\nHost\r\n", 21, BadRequest::NoColon),
            (b"GET / HTTP/1.1\r\nX: \x00", 20, BadRequest::ControlChar),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost:", 30, BadRequest::Host),
            (b"GET / HTTP/1.1\r\n\r\n", 18, BadRequest::Host),
        ];
        for &(bytes, at, why) in cases {
            assert_eq!(refused_after(bytes), Some((at, why)), "{bytes:?}");
        }
    }

    #[test]
    fn every_prefix_of_a_good_head_waits_for_more() {
        let heads: [&[u8]; 4] = [
            b"GET /metrics HTTP/1.1\r\nHost: localhost:9100\r\nUser-Agent: curl/8\r\n\r\n",
            b"HEAD https://h/health?x HTTP/1.0\r\n\r\n",
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
              Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\n\r\n",
            b"OPTIONS http://h HTTP/1.1\r\nhost:\r\nX:\t\xff\r\n\r\n",
        ];
        for head in heads {
            for n in 0..head.len() {
                assert_eq!(parse_request(&head[..n]), Err(BadRequest::Unfinished));
                let mut scanner = HeadScanner::new();
                assert_eq!(scanner.feed(&head[..n]), Ok(None), "{:?}", &head[..n]);
                // The rest of the head, in a second read.
                assert_eq!(scanner.feed(head), Ok(Some(head.len())));
                assert_eq!(scanner.request(head), parse_request(head));
            }
            assert!(parse_request(head).is_ok(), "{head:?}");
        }
    }

    #[test]
    fn a_refused_head_stays_refused_and_a_complete_one_complete() {
        let mut scanner = HeadScanner::new();
        assert_eq!(scanner.feed(b"GET\x00"), Err(BadRequest::Method));
        assert_eq!(
            scanner.feed(b"GET\x00 / HTTP/1.0\r\n\r\n"),
            Err(BadRequest::Method)
        );
        assert_eq!(scanner.request(b"GET"), Err(BadRequest::Unfinished));
        let mut scanner = HeadScanner::new();
        let head = b"GET / HTTP/1.0\r\n\r\n";
        assert_eq!(scanner.feed(head), Ok(Some(head.len())));
        assert_eq!(
            scanner.feed(b"GET / HTTP/1.0\r\n\r\nmore"),
            Ok(Some(head.len()))
        );
        // Fed a shorter slice by mistake: no panic.
        assert_eq!(scanner.feed(b""), Ok(Some(head.len())));
        let mut scanner = HeadScanner::new();
        assert_eq!(scanner.feed(b"GET /metr"), Ok(None));
        assert_eq!(scanner.feed(b"G"), Ok(None));
    }

    #[test]
    fn no_bytes_make_the_parser_panic_and_feeding_in_pieces_changes_nothing() {
        // A small xorshift: random bytes, and random bytes after good starts.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"GET /HTP1.0\r\n:HhOoSsTt\t\x00\x7f\xff x?";
        let starts: [&[u8]; 3] = [b"", b"GET / HTTP/1.1\r\n", b"GET http://a/"];
        for round in 0..3000 {
            let mut bytes = starts[round % starts.len()].to_vec();
            for _ in 0..next() % 40 {
                let r = next() as usize;
                bytes.push(match r % 3 {
                    0 => r as u8,
                    _ => alphabet[r % alphabet.len()],
                });
            }
            let whole = parse_request(&bytes);
            let mut scanner = HeadScanner::new();
            let mut fed = 0;
            let mut pieces = Ok(None);
            while fed < bytes.len() && matches!(pieces, Ok(None)) {
                fed = (fed + 1 + next() as usize % 5).min(bytes.len());
                pieces = scanner.feed(&bytes[..fed]);
            }
            let pieces = match pieces {
                Ok(Some(_)) => scanner.request(&bytes),
                Ok(None) => Err(BadRequest::Unfinished),
                Err(why) => Err(why),
            };
            assert_eq!(whole, pieces, "{bytes:?}");
        }
    }
}
