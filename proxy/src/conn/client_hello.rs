//! A TLS client's first message, the ClientHello, read for routing only:
//! the server name it asks for (SNI) and the protocols it offers (ALPN),
//! without holding a key and without changing a byte.
//!
//! ```text
//!   client ──[ record 22 | handshake 1 (ClientHello) ... ]──▶ proxy ──[ the same bytes ]──▶ backend
//!                          parse() / read_hello()                the group the name routes to
//! ```
//!
//! # What is read
//!
//! ```text
//!   record     type 1 (22: handshake) │ version 2 (3.x) │ length 2 (1 to 2^14) │ fragment
//!   handshake  type 1 (1: ClientHello) │ length 3 │ body, across as many records as it takes
//!   body       legacy_version 2 │ random 32 │ session_id <0..32> │ cipher_suites <2..2^16-2>
//!              │ compression_methods <1..2^8-1> │ extensions <0..2^16-1> (absent: none)
//!   extension  type 2 │ length 2 │ data
//!     0  server_name  (RFC 6066, 3)  list <1..2^16-1> of: name_type 1 (0: host_name) │ name <1..2^16-1>
//!     16 ALPN         (RFC 7301, 3.1) list <2..2^16-1> of: protocol <1..2^8-1>
//! ```
//!
//! (RFC 8446 4.1.2 and 5.1.) A handshake message may be cut across several
//! records, which is legal and which some clients do with a large hello:
//! the reader follows the fragments across record boundaries in place, as
//! one stream, without copying them into a second buffer.
//!
//! # Strict, bounded, and quick to refuse
//!
//! - [`parse`] says [`Verdict::NotTls`] at the first byte that cannot start
//!   a TLS handshake record (`G` of `GET /`, SSH's `S`), so a frontend can
//!   send such clients to its default group at once.
//! - Every length must fit in the one around it, and the extensions must
//!   tile the message exactly; anything else is [`Verdict::Malformed`], with
//!   what was wrong. A second `server_name` or ALPN extension, or a second
//!   host name, is refused too (RFC 8446 4.2, RFC 6066 3): two names would
//!   let a client route by one and be served by the other.
//! - At most [`MAX_HELLO`] bytes are read, record headers included (16 KiB,
//!   nginx's `preread_buffer_size`): a hello with post-quantum key shares is
//!   about 2 KiB, and no real one comes near. A hello that would need more
//!   is [`Verdict::TooLarge`] as soon as that is certain.
//! - [`read_hello`] gives up after a time limit (`timeout client-hs`), and
//!   judges the bytes as they come a few dozen times at most, not once a
//!   byte, however slowly they come ([`judge`] says how many a hello needs).
//!
//! Host names are compared case-insensitively (RFC 6066 says they are DNS
//! names), so the reader gives them in lower case, without a trailing dot.

use std::fmt;
use std::io;
use std::time::Duration;

use runtime::net::TcpStream;
use runtime::time;

/// The most bytes read for a ClientHello, record headers included: 16 KiB,
/// nginx's `preread_buffer_size`.
pub const MAX_HELLO: usize = 16 * 1024;

/// A TLS record's header: type, version, length.
const RECORD_HEADER: usize = 5;
/// The largest plaintext record fragment (RFC 8446 5.1).
const MAX_FRAGMENT: usize = 1 << 14;
/// The record type of handshake messages.
const HANDSHAKE: u8 = 22;
/// The handshake type of a ClientHello.
const CLIENT_HELLO: u8 = 1;
/// The smallest ClientHello body: version, random, three empty-ish vectors.
const MIN_BODY: usize = 2 + 32 + 1 + 2 + 2 + 1 + 1;
const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const HOST_NAME: u8 = 0;

/// What the bytes seen so far are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not a TLS handshake record: another protocol.
    NotTls,
    /// A ClientHello so far: more bytes are needed.
    Incomplete,
    /// A ClientHello that would need more than [`MAX_HELLO`] bytes.
    TooLarge,
    /// TLS records, but not a well-formed ClientHello: what was wrong.
    Malformed(&'static str),
    /// A whole ClientHello.
    Hello(Hello),
}

/// What routing reads in a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hello {
    /// The `host_name` of `server_name`, lower case, no trailing dot.
    pub sni: Option<String>,
    /// The ALPN protocols offered, in the client's order.
    pub alpn: Vec<String>,
}

/// Why the reader stopped before the end.
enum Stop {
    /// The bytes run out: more may come.
    More,
    /// A verdict other than a hello.
    Verdict(Verdict),
}

fn malformed(why: &'static str) -> Stop {
    Stop::Verdict(Verdict::Malformed(why))
}

/// Judges the first bytes a client sent.
pub fn parse(buf: &[u8]) -> Verdict {
    judge(buf).0
}

/// [`parse`]'s verdict, with, when it is [`Verdict::Incomplete`], how many
/// bytes at least a whole hello needs (the bytes seen, and the rest of the
/// handshake message once its length is known): before that many have
/// come, the bytes can be refused but not yet be a hello. [`read_hello`]
/// uses it not to parse the whole buffer again for every byte a slow
/// client sends (16 KiB times 16 KiB, for one sent a byte at a time).
pub fn judge(buf: &[u8]) -> (Verdict, usize) {
    let verdict = match buf {
        [] => Some(Verdict::Incomplete),
        [first, ..] if *first != HANDSHAKE => Some(Verdict::NotTls),
        [_, major, ..] if *major != 3 => Some(Verdict::NotTls),
        _ => None,
    };
    if let Some(verdict) = verdict {
        return (verdict, buf.len() + 1);
    }
    let mut fragments = Fragments {
        buf,
        next_record: 0,
        pos: 0,
        end: 0,
        consumed: 0,
        message: None,
    };
    match hello(&mut fragments) {
        Ok(hello) => (Verdict::Hello(hello), buf.len()),
        Err(Stop::More) => {
            let owed = fragments.message.map_or(0, |m| m - fragments.consumed);
            (Verdict::Incomplete, buf.len() + owed.max(1))
        }
        Err(Stop::Verdict(verdict)) => (verdict, buf.len()),
    }
}

/// The handshake message's header, then its body within its length.
fn hello(fragments: &mut Fragments<'_>) -> Result<Hello, Stop> {
    let mut header = Body { fragments, left: 4 };
    if header.u8()? != CLIENT_HELLO {
        return Err(malformed(
            "the first handshake message is not a ClientHello",
        ));
    }
    let length = header.u24()?;
    if length < MIN_BODY {
        return Err(malformed("a ClientHello too short to hold its fields"));
    }
    // The body and at least one record header must fit in MAX_HELLO.
    if 4 + length + RECORD_HEADER > MAX_HELLO {
        return Err(Stop::Verdict(Verdict::TooLarge));
    }
    header.fragments.message = Some(4 + length);
    let mut body = Body {
        fragments: header.fragments,
        left: length,
    };
    let hello = body_fields(&mut body)?;
    if body.left != 0 {
        return Err(malformed("bytes after the extensions of the ClientHello"));
    }
    Ok(hello)
}

/// The fixed fields, then the extensions.
fn body_fields(b: &mut Body<'_, '_>) -> Result<Hello, Stop> {
    if b.u16()? >> 8 != 3 {
        return Err(malformed("a ClientHello version that is not 3.x"));
    }
    b.skip(32)?;
    let session = b.u8()? as usize;
    if session > 32 {
        return Err(malformed("a session id longer than 32 bytes"));
    }
    b.skip(session)?;
    let suites = b.u16()? as usize;
    if suites < 2 || suites % 2 != 0 {
        return Err(malformed("a cipher suite list that is empty or odd"));
    }
    b.skip(suites)?;
    let compression = b.u8()? as usize;
    if compression == 0 {
        return Err(malformed("no compression method"));
    }
    b.skip(compression)?;
    let mut hello = Hello::default();
    if b.left == 0 {
        // TLS 1.2 allows a hello without extensions.
        return Ok(hello);
    }
    let length = b.u16()? as usize;
    if length != b.left {
        return Err(malformed(
            "the extensions' length is not the rest of the ClientHello",
        ));
    }
    let (mut seen_name, mut seen_alpn) = (false, false);
    while b.left > 0 {
        let kind = b.u16()?;
        let length = b.u16()? as usize;
        let seen = match kind {
            EXT_SERVER_NAME => &mut seen_name,
            EXT_ALPN => &mut seen_alpn,
            _ => {
                b.skip(length)?;
                continue;
            }
        };
        if std::mem::replace(seen, true) {
            return Err(malformed("an extension given twice"));
        }
        b.within(length, "an extension longer than the ClientHello", |b| {
            match kind {
                EXT_SERVER_NAME => hello.sni = Some(server_name(b)?),
                _ => hello.alpn = alpn(b)?,
            }
            Ok(())
        })?;
    }
    Ok(hello)
}

/// The `server_name` extension's data: its one `host_name`. Other name
/// types (none is defined) are skipped.
fn server_name(b: &mut Body<'_, '_>) -> Result<String, Stop> {
    let length = b.u16()? as usize;
    if length == 0 || length != b.left {
        return Err(malformed(
            "a server_name list whose length is not its extension's",
        ));
    }
    let mut name = None;
    while b.left > 0 {
        let kind = b.u8()?;
        let length = b.u16()? as usize;
        if kind != HOST_NAME {
            b.skip(length)?;
            continue;
        }
        if name.is_some() {
            return Err(malformed("two host names in server_name"));
        }
        let mut bytes = Vec::with_capacity(length.min(255));
        b.take(length, &mut bytes)?;
        name = Some(host_name(bytes)?);
    }
    name.ok_or_else(|| malformed("a server_name without a host_name"))
}

/// A host name's bytes as a DNS name: letters, digits, `-`, `_` and dots,
/// 1 to 253 of them (a trailing dot dropped), in lower case.
fn host_name(mut bytes: Vec<u8>) -> Result<String, Stop> {
    if bytes.last() == Some(&b'.') {
        bytes.pop();
    }
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if bytes.is_empty() || bytes.len() > 253 || !bytes.iter().all(allowed) {
        return Err(malformed("a host name that is not a DNS name"));
    }
    if bytes.starts_with(b".") || bytes.windows(2).any(|w| w == b"..") {
        return Err(malformed("a host name with an empty label"));
    }
    bytes.make_ascii_lowercase();
    String::from_utf8(bytes).map_err(|_| malformed("a host name that is not a DNS name"))
}

/// The ALPN extension's data: the protocols, each 1 to 255 bytes.
fn alpn(b: &mut Body<'_, '_>) -> Result<Vec<String>, Stop> {
    let length = b.u16()? as usize;
    if length < 2 || length != b.left {
        return Err(malformed(
            "an ALPN list whose length is not its extension's",
        ));
    }
    let mut protocols = Vec::new();
    while b.left > 0 {
        let length = b.u8()? as usize;
        if length == 0 {
            return Err(malformed("an empty ALPN protocol name"));
        }
        let mut bytes = Vec::with_capacity(length);
        b.take(length, &mut bytes)?;
        protocols.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    Ok(protocols)
}

/// The handshake bytes of the records at the start of a buffer, read as one
/// stream across record boundaries, in place.
struct Fragments<'a> {
    buf: &'a [u8],
    /// Where the next record's header starts.
    next_record: usize,
    /// The next byte of the current fragment.
    pos: usize,
    /// The end of the current fragment (which may lie past `buf`).
    end: usize,
    /// Handshake bytes read so far, its header included.
    consumed: usize,
    /// The handshake message's length, its header included, once known.
    message: Option<usize>,
}

impl Fragments<'_> {
    /// Needs `buf[at]`: more bytes, or too many once `at` is past the bound.
    fn need(&self, at: usize) -> Result<(), Stop> {
        if at >= MAX_HELLO {
            Err(Stop::Verdict(Verdict::TooLarge))
        } else if at >= self.buf.len() {
            Err(Stop::More)
        } else {
            Ok(())
        }
    }

    /// The bytes of the current fragment available now, moving on to the
    /// next record when it is used up (never an empty slice).
    fn available(&mut self) -> Result<&[u8], Stop> {
        if self.pos == self.end {
            self.next_header()?;
        }
        self.need(self.pos)?;
        let until = self.end.min(self.buf.len());
        Ok(self.buf.get(self.pos..until).unwrap_or_default())
    }

    /// Reads the next record's header: a handshake record of 1 to 2^14
    /// bytes.
    fn next_header(&mut self) -> Result<(), Stop> {
        let at = self.next_record;
        self.need(at + RECORD_HEADER - 1)?;
        let header = self.buf.get(at..at + RECORD_HEADER).unwrap_or_default();
        let [kind, major, _, high, low] = header else {
            return Err(Stop::More);
        };
        if *kind != HANDSHAKE {
            return Err(malformed(
                "a record of another type before the ClientHello was whole",
            ));
        }
        if *major != 3 {
            return Err(malformed("a record version that is not 3.x"));
        }
        let length = usize::from(u16::from_be_bytes([*high, *low]));
        if length == 0 || length > MAX_FRAGMENT {
            return Err(malformed("a record that is empty or longer than 2^14"));
        }
        self.pos = at + RECORD_HEADER;
        self.end = self.pos + length;
        self.next_record = self.end;
        Ok(())
    }
}

/// A length-delimited part of the handshake message: `left` bytes of it
/// remain, and reading past them is malformed.
struct Body<'f, 'a> {
    fragments: &'f mut Fragments<'a>,
    left: usize,
}

impl Body<'_, '_> {
    /// Passes `n` bytes, giving each slice of them to `each`.
    fn consume(&mut self, n: usize, mut each: impl FnMut(&[u8])) -> Result<(), Stop> {
        if n > self.left {
            return Err(malformed("a length past the end of what holds it"));
        }
        let mut wanted = n;
        while wanted > 0 {
            let available = self.fragments.available()?;
            let step = available.len().min(wanted);
            each(available.get(..step).unwrap_or_default());
            self.fragments.pos += step;
            self.fragments.consumed += step;
            self.left -= step;
            wanted -= step;
        }
        Ok(())
    }

    fn skip(&mut self, n: usize) -> Result<(), Stop> {
        self.consume(n, |_| {})
    }

    fn take(&mut self, n: usize, into: &mut Vec<u8>) -> Result<(), Stop> {
        self.consume(n, |bytes| into.extend_from_slice(bytes))
    }

    /// A big-endian number of `N` bytes.
    fn number<const N: usize>(&mut self) -> Result<usize, Stop> {
        let mut value = 0;
        self.consume(N, |bytes| {
            for &b in bytes {
                value = value << 8 | usize::from(b);
            }
        })?;
        Ok(value)
    }

    fn u8(&mut self) -> Result<u8, Stop> {
        Ok(self.number::<1>()? as u8)
    }

    fn u16(&mut self) -> Result<u16, Stop> {
        Ok(self.number::<2>()? as u16)
    }

    fn u24(&mut self) -> Result<usize, Stop> {
        self.number::<3>()
    }

    /// Runs `read` on the next `n` bytes as a part of their own, which it
    /// must read to the end.
    fn within<T>(
        &mut self,
        n: usize,
        why: &'static str,
        read: impl FnOnce(&mut Body<'_, '_>) -> Result<T, Stop>,
    ) -> Result<T, Stop> {
        if n > self.left {
            return Err(malformed(why));
        }
        let mut inner = Body {
            fragments: &mut *self.fragments,
            left: n,
        };
        let value = read(&mut inner)?;
        if inner.left != 0 {
            return Err(malformed("an extension with bytes after its list"));
        }
        self.left -= n;
        Ok(value)
    }
}

/// Why [`read_hello`] gave up.
#[derive(Debug)]
pub enum HelloError {
    /// No whole ClientHello within the time limit, after this many bytes.
    TimedOut(Duration, usize),
    /// The client closed after this many bytes, before its hello was whole.
    Closed(usize),
    /// Over [`MAX_HELLO`] bytes.
    TooLarge,
    /// Not a well-formed ClientHello.
    Malformed(&'static str),
    /// The read failed.
    Io(io::Error),
}

impl fmt::Display for HelloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HelloError::TimedOut(limit, n) => write!(
                f,
                "no whole ClientHello within {limit:?} (timeout client-hs), after {n} bytes"
            ),
            HelloError::Closed(n) => write!(
                f,
                "the client closed after {n} bytes, before its ClientHello was whole"
            ),
            HelloError::TooLarge => write!(f, "a ClientHello over {MAX_HELLO} bytes"),
            HelloError::Malformed(why) => write!(f, "a malformed ClientHello: {why}"),
            HelloError::Io(e) => write!(f, "reading the ClientHello: {e}"),
        }
    }
}

impl std::error::Error for HelloError {}

/// What [`read_hello`] comes to: a hello, not TLS (`None`), or a refusal.
pub type Outcome = Result<Option<Hello>, HelloError>;

/// Reads a client's first bytes after `early` (what came past its PROXY
/// header, if any) until they are a whole ClientHello or cannot be one,
/// within `limit`. `early` is extended with every byte read: they are the
/// client's, to be sent to the backend first.
///
/// `Ok(None)`: not TLS, or nothing at all within `limit` (a protocol
/// whose server speaks first), as HAProxy's `inspect-delay` ends.
pub async fn read_hello(client: &TcpStream, early: &mut Vec<u8>, limit: Duration) -> Outcome {
    let mut filled = early.len();
    early.resize(filled.max(MAX_HELLO), 0);
    let outcome = time::timeout(limit, read_until_judged(client, early, &mut filled)).await;
    early.truncate(filled);
    match outcome {
        Ok(result) => result,
        Err(_) if filled == 0 => Ok(None),
        // Bytes not judged yet may already be a refusal: say that one.
        Err(_) => decided(judge(early)).unwrap_or(Err(HelloError::TimedOut(limit, filled))),
    }
}

/// The loop of [`read_hello`]: `buf[..filled]` is what was read.
///
/// The bytes are judged when what a hello needs at least has come
/// ([`judge`]), when they have doubled since the last look (a refusal can
/// show at any byte), when the buffer is full, and at the end of the
/// stream: a few dozen looks for a hello sent a byte at a time, not one a
/// byte, and a hello sent whole is judged at once.
async fn read_until_judged(client: &TcpStream, buf: &mut [u8], filled: &mut usize) -> Outcome {
    let (mut needed, mut looked) = (0, 0);
    loop {
        if *filled >= needed || *filled >= 2 * looked || *filled >= MAX_HELLO {
            looked = *filled;
            match decided(judge(buf.get(..*filled).unwrap_or_default())) {
                Ok(outcome) => return outcome,
                Err(at_least) => needed = at_least,
            }
        }
        // judge() says TooLarge before it needs a byte past MAX_HELLO; a
        // hello that still needs more is over the bound.
        let Some(room) = buf.get_mut(*filled..MAX_HELLO).filter(|r| !r.is_empty()) else {
            return Err(HelloError::TooLarge);
        };
        match client.read(room).await {
            Ok(0) => {
                let seen = buf.get(..*filled).unwrap_or_default();
                return decided(judge(seen)).unwrap_or(Err(HelloError::Closed(*filled)));
            }
            Ok(n) => *filled += n,
            Err(e) => return Err(HelloError::Io(e)),
        }
    }
}

/// What a verdict decides, or, for an incomplete hello, `Err` with the
/// bytes it needs at least.
fn decided((verdict, needed): (Verdict, usize)) -> Result<Outcome, usize> {
    Ok(match verdict {
        Verdict::Incomplete => return Err(needed),
        Verdict::NotTls => Ok(None),
        Verdict::Hello(hello) => Ok(Some(hello)),
        Verdict::TooLarge => Err(HelloError::TooLarge),
        Verdict::Malformed(why) => Err(HelloError::Malformed(why)),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;
    use std::net::{Shutdown, SocketAddr};

    /// An extension: type, length, data.
    fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    /// `server_name` with these (type, name) entries.
    fn names(entries: &[(u8, &[u8])]) -> Vec<u8> {
        let mut list = Vec::new();
        for (kind, name) in entries {
            list.push(*kind);
            list.extend_from_slice(&(name.len() as u16).to_be_bytes());
            list.extend_from_slice(name);
        }
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        extension(EXT_SERVER_NAME, &data)
    }

    fn alpn_extension(protocols: &[&[u8]]) -> Vec<u8> {
        let mut list = Vec::new();
        for p in protocols {
            list.push(p.len() as u8);
            list.extend_from_slice(p);
        }
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        extension(EXT_ALPN, &data)
    }

    /// A ClientHello body with these extensions (`None`: no extensions
    /// field at all).
    fn body(extensions: Option<&[Vec<u8>]>) -> Vec<u8> {
        let mut out = vec![3, 3];
        out.extend_from_slice(&[7; 32]);
        out.push(32);
        out.extend_from_slice(&[9; 32]);
        out.extend_from_slice(&[0, 4, 0x13, 0x01, 0xc0, 0x2f]);
        out.extend_from_slice(&[1, 0]);
        if let Some(extensions) = extensions {
            let all = extensions.concat();
            out.extend_from_slice(&(all.len() as u16).to_be_bytes());
            out.extend(all);
        }
        out
    }

    /// The handshake message around `body`.
    fn handshake(kind: u8, body: &[u8]) -> Vec<u8> {
        let length = (body.len() as u32).to_be_bytes();
        let mut out = vec![kind, length[1], length[2], length[3]];
        out.extend_from_slice(body);
        out
    }

    /// `message` in records of at most `size` bytes each.
    pub(crate) fn records(message: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in message.chunks(size.max(1)) {
            out.extend_from_slice(&[HANDSHAKE, 3, 1]);
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    /// A typical hello: a name, ALPN, and an extension the reader skips.
    pub(crate) fn typical(name: &[u8]) -> Vec<u8> {
        let extensions = [
            extension(0x002b, &[2, 3, 4]),
            names(&[(HOST_NAME, name)]),
            alpn_extension(&[b"h2", b"http/1.1"]),
            extension(0x0033, &[0; 40]),
        ];
        records(
            &handshake(CLIENT_HELLO, &body(Some(&extensions))),
            MAX_FRAGMENT,
        )
    }

    fn hello(sni: Option<&str>, alpn: &[&str]) -> Verdict {
        Verdict::Hello(Hello {
            sni: sni.map(str::to_string),
            alpn: alpn.iter().map(|p| p.to_string()).collect(),
        })
    }

    fn with(extensions: &[Vec<u8>]) -> Verdict {
        parse(&records(
            &handshake(CLIENT_HELLO, &body(Some(extensions))),
            MAX_FRAGMENT,
        ))
    }

    #[test]
    fn the_name_and_the_protocols_of_a_hello() {
        let expected = hello(Some("a.example"), &["h2", "http/1.1"]);
        assert_eq!(parse(&typical(b"a.example")), expected);
        // Case-insensitive, as DNS names are; a trailing dot is dropped.
        assert_eq!(parse(&typical(b"A.Example.")), expected);
        // Bytes after the hello (TLS 1.3 early data) are not the reader's.
        let mut more = typical(b"a.example");
        more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert_eq!(parse(&more), expected);
    }

    #[test]
    fn a_hello_without_a_name_or_without_extensions() {
        assert_eq!(with(&[alpn_extension(&[b"h2"])]), hello(None, &["h2"]));
        assert_eq!(with(&[]), hello(None, &[]));
        let bare = records(&handshake(CLIENT_HELLO, &body(None)), MAX_FRAGMENT);
        assert_eq!(parse(&bare), hello(None, &[]));
        // An unknown name type is skipped, the host name still found.
        let both = names(&[(7, b"opaque"), (HOST_NAME, b"b.example")]);
        assert_eq!(with(&[both]), hello(Some("b.example"), &[]));
    }

    // Hellos openssl 3.0's s_client sent (the fuzz target's seeds).
    #[test]
    fn openssl_hellos_read_as_sent() {
        let seed = |name: &str| -> &[u8] {
            match name {
                "tls13" => include_bytes!("../../../fuzz/corpus/client_hello/tls13-sni-alpn"),
                "tls12" => include_bytes!("../../../fuzz/corpus/client_hello/tls12-sni"),
                "two" => include_bytes!("../../../fuzz/corpus/client_hello/tls13-two-records"),
                _ => include_bytes!("../../../fuzz/corpus/client_hello/no-sni"),
            }
        };
        assert_eq!(
            parse(seed("tls13")),
            hello(Some("api.example"), &["h2", "http/1.1"])
        );
        assert_eq!(
            parse(seed("two")),
            hello(Some("api.example"), &["h2", "http/1.1"])
        );
        assert_eq!(parse(seed("tls12")), hello(Some("www.example"), &[]));
        assert_eq!(parse(seed("none")), hello(None, &[]));
    }

    #[test]
    fn every_strict_prefix_waits_for_more() {
        let whole = typical(b"a.example");
        for end in 0..whole.len() {
            assert_eq!(parse(&whole[..end]), Verdict::Incomplete, "at {end}");
        }
    }

    #[test]
    fn a_hello_across_records_reads_as_in_one() {
        let message = handshake(CLIENT_HELLO, &body(Some(&[names(&[(0, b"x.example")])])));
        let expected = hello(Some("x.example"), &[]);
        for size in [1, 2, 3, 4, 5, 17, 40, 100] {
            let bytes = records(&message, size);
            assert_eq!(parse(&bytes), expected, "records of {size}");
            assert_eq!(parse(&bytes[..bytes.len() - 1]), Verdict::Incomplete);
        }
    }

    #[test]
    fn an_incomplete_hello_says_how_many_bytes_it_needs_at_least() {
        // In one record: exactly its length, once the handshake header is in.
        let whole = typical(b"a.example");
        for end in 9..whole.len() {
            assert_eq!(
                judge(&whole[..end]),
                (Verdict::Incomplete, whole.len()),
                "{end}"
            );
        }
        assert_eq!(judge(&whole[..3]), (Verdict::Incomplete, 4));
        // In one-byte records, a bound below the truth, and never below
        // what came: each judging is owed more bytes than the last had.
        let message = handshake(CLIENT_HELLO, &body(Some(&[names(&[(0, b"x.example")])])));
        let tiny = records(&message, 1);
        let mut end = 40;
        let mut judged = 0;
        while end < tiny.len() {
            let (verdict, needed) = judge(&tiny[..end]);
            assert_eq!(verdict, Verdict::Incomplete);
            assert!(needed > end && needed <= tiny.len(), "{end}: {needed}");
            end = needed;
            judged += 1;
        }
        assert!(
            judged < 40,
            "judged {judged} times for {} bytes",
            tiny.len()
        );
        assert_eq!(judge(&tiny).0, hello(Some("x.example"), &[]));
    }

    #[test]
    fn other_protocols_are_not_tls_at_their_first_bytes() {
        for first in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"SSH-2.0-",
            b"\x80\x2e\x01",
            b"\x16\x01",
        ] {
            assert_eq!(parse(first), Verdict::NotTls, "{first:?}");
        }
        assert_eq!(parse(b"\x16"), Verdict::Incomplete);
    }

    #[test]
    fn malformed_hellos_say_what_was_wrong() {
        let m = |bytes: &[u8]| match parse(bytes) {
            Verdict::Malformed(why) => why,
            other => panic!("expected malformed, got {other:?}"),
        };
        let good = body(Some(&[]));
        assert!(m(&records(&handshake(2, &good), 999)).contains("not a ClientHello"));
        assert!(m(&records(&handshake(1, &good[..20]), 999)).contains("too short"));
        let mut long_session = good.clone();
        long_session[34] = 33;
        assert!(m(&records(&handshake(1, &long_session), 999)).contains("session id"));
        let mut odd = good.clone();
        odd[68] = 3;
        assert!(matches!(
            parse(&records(&handshake(1, &odd), 999)),
            Verdict::Malformed(_)
        ));
        let twice = [names(&[(0, b"a.example")]), names(&[(0, b"b.example")])];
        assert_eq!(with(&twice), Verdict::Malformed("an extension given twice"));
        let two_names = names(&[(0, b"a.example"), (0, b"b.example")]);
        assert_eq!(
            with(&[two_names]),
            Verdict::Malformed("two host names in server_name")
        );
        for bad in [
            &b"a b.example"[..],
            b"",
            b".a",
            b"a..b",
            b"caf\xc3\xa9",
            b"a/b",
        ] {
            let verdict = with(&[names(&[(0, bad)])]);
            assert!(
                matches!(verdict, Verdict::Malformed(_)),
                "{bad:?}: {verdict:?}"
            );
        }
        let mut trailing = body(Some(&[]));
        trailing.push(0);
        assert!(matches!(
            parse(&records(&handshake(1, &trailing), 999)),
            Verdict::Malformed(_)
        ));
        // An extension claiming more than the hello holds.
        let mut lying = body(Some(&[extension(5, &[1, 2, 3])]));
        let n = lying.len();
        lying[n - 4] = 0x10;
        assert!(matches!(
            parse(&records(&handshake(1, &lying), 999)),
            Verdict::Malformed(_)
        ));
        assert_eq!(
            with(&[extension(EXT_ALPN, &[0, 2, 0, 1])]),
            Verdict::Malformed("an empty ALPN protocol name")
        );
    }

    #[test]
    fn records_between_the_fragments_must_be_handshake_records() {
        let message = handshake(CLIENT_HELLO, &body(Some(&[])));
        let (first, rest) = message.split_at(10);
        let mut bytes = records(first, 999);
        bytes.extend_from_slice(&[21, 3, 3, 0, 2, 2, 40]);
        bytes.extend(records(rest, 999));
        assert_eq!(
            parse(&bytes),
            Verdict::Malformed("a record of another type before the ClientHello was whole")
        );
        let mut empty = records(first, 999);
        empty.extend_from_slice(&[22, 3, 3, 0, 0]);
        assert!(matches!(parse(&empty), Verdict::Malformed(_)));
        let huge = [22, 3, 1, 0x40, 0x01, 1, 0, 0, 50];
        assert!(matches!(parse(&huge), Verdict::Malformed(_)));
    }

    #[test]
    fn too_large_as_soon_as_it_is_certain() {
        // A length that cannot fit: said at the fourth byte of the message.
        assert_eq!(parse(&[22, 3, 1, 0, 9, 1, 0, 0x40, 0]), Verdict::TooLarge);
        // A hello that fits but in records too small to: said at the bound.
        let padding = extension(21, &vec![0; 4000]);
        let message = handshake(CLIENT_HELLO, &body(Some(&[padding])));
        let bytes = records(&message, 1);
        assert!(bytes.len() > MAX_HELLO);
        assert_eq!(parse(&bytes), Verdict::TooLarge);
        assert_eq!(parse(&bytes[..MAX_HELLO / 2]), Verdict::Incomplete);
    }

    fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
        let random = proptest::collection::vec(any::<u8>(), 0..600);
        let after_header = proptest::collection::vec(any::<u8>(), 0..600)
            .prop_map(|rest| [&[22u8, 3, 1, 2, 0, 1, 0, 1, 252][..], &rest].concat());
        let spoiled = (0..200usize, any::<u8>()).prop_map(|(at, byte)| {
            let mut bytes = typical(b"a.example");
            let i = at % bytes.len();
            bytes[i] = byte;
            bytes
        });
        prop_oneof![random, after_header, spoiled]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn hostile_bytes_never_panic(bytes in hostile_bytes()) {
            let verdict = parse(&bytes);
            // A verdict is final: more bytes never change a refusal.
            if matches!(verdict, Verdict::NotTls | Verdict::Malformed(_) | Verdict::TooLarge) {
                let mut more = bytes.clone();
                more.extend_from_slice(&[0; 64]);
                prop_assert_eq!(parse(&more), verdict);
            }
        }

        #[test]
        fn any_cut_into_records_reads_the_same(
            name in "[a-z0-9]{1,20}(\\.[a-z0-9-]{1,20}){0,4}",
            size in 1usize..300,
        ) {
            let extensions = [names(&[(0, name.as_bytes())]), alpn_extension(&[b"h2"])];
            let message = handshake(CLIENT_HELLO, &body(Some(&extensions)));
            let bytes = records(&message, size);
            prop_assert_eq!(parse(&bytes), hello(Some(&name), &["h2"]));
            for end in 0..bytes.len() {
                prop_assert_eq!(parse(&bytes[..end]), Verdict::Incomplete);
            }
        }
    }

    // ---- read_hello over real sockets ----

    /// `read_hello` on the accepted side of a loopback connection whose
    /// client (a thread) does `client`; the bytes it gathered come back too.
    fn over_loopback<C>(limit: Duration, client: C) -> (Outcome, Vec<u8>)
    where
        C: FnOnce(std::net::TcpStream) + Send + 'static,
    {
        let rt = runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let any = SocketAddr::from(([127, 0, 0, 1], 0));
            let listener = runtime::net::TcpListener::bind(any).expect("bind");
            let at = listener.local_addr().expect("local address");
            let thread = std::thread::spawn(move || {
                client(std::net::TcpStream::connect(at).expect("connect"));
            });
            let (stream, _) = listener.accept().await.expect("accept");
            let mut early = Vec::new();
            let result = read_hello(&stream, &mut early, limit).await;
            drop(stream);
            thread.join().expect("the client thread");
            (result, early)
        })
    }

    /// What a client does after writing: wait until the proxy closes.
    fn wait_for_close(mut stream: std::net::TcpStream) {
        use std::io::Read;
        let _ = stream.read(&mut [0; 64]);
    }

    #[test]
    fn read_a_hello_sent_one_byte_at_a_time() {
        let bytes = typical(b"slow.example");
        let sent = bytes.clone();
        let client = move |mut stream: std::net::TcpStream| {
            stream.set_nodelay(true).expect("nodelay");
            for byte in &sent {
                stream.write_all(&[*byte]).expect("write");
            }
            wait_for_close(stream);
        };
        let (result, early) = over_loopback(Duration::from_secs(10), client);
        let hello = result.expect("a hello").expect("TLS");
        assert_eq!(hello.sni.as_deref(), Some("slow.example"));
        // Every byte read is kept, to be sent on unchanged.
        assert_eq!(early, bytes);
    }

    #[test]
    fn silence_is_not_tls_and_half_a_hello_times_out() {
        let limit = Duration::from_millis(200);
        let (result, early) = over_loopback(limit, wait_for_close);
        assert!(matches!(result, Ok(None)), "{result:?}");
        assert!(early.is_empty());
        let half = |mut stream: std::net::TcpStream| {
            stream
                .write_all(&typical(b"a.example")[..30])
                .expect("write");
            wait_for_close(stream);
        };
        let (result, early) = over_loopback(limit, half);
        assert!(
            matches!(result, Err(HelloError::TimedOut(_, 30))),
            "{result:?}"
        );
        assert_eq!(early.len(), 30);
    }

    // Found by the fuzz target: a refusal can show before the bytes a
    // hello needs have come. Sent a byte at a time, then nothing, the
    // bytes are judged when the time is up: refused for what they are.
    #[test]
    fn a_malformed_hello_trickled_then_stopped_is_refused_for_what_it_is() {
        let bytes: &[u8] = &[22, 3, 1, 1, 36, 1, 0, 1, 32, 22, 3];
        let client = move |mut stream: std::net::TcpStream| {
            stream.set_nodelay(true).expect("nodelay");
            for byte in bytes {
                stream.write_all(&[*byte]).expect("write");
                std::thread::sleep(Duration::from_millis(5));
            }
            wait_for_close(stream);
        };
        let (result, early) = over_loopback(Duration::from_millis(300), client);
        let error = result.expect_err("malformed");
        assert!(matches!(error, HelloError::Malformed(_)), "{error:?}");
        assert_eq!(early, bytes);
    }

    #[test]
    fn other_protocols_and_early_closes() {
        let http = |mut stream: std::net::TcpStream| {
            stream.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("write");
            wait_for_close(stream);
        };
        let (result, early) = over_loopback(Duration::from_secs(10), http);
        assert!(matches!(result, Ok(None)), "{result:?}");
        assert!(early.starts_with(b"GET /"), "{early:?}");
        let cut = |mut stream: std::net::TcpStream| {
            stream
                .write_all(&typical(b"a.example")[..12])
                .expect("write");
            stream.shutdown(Shutdown::Write).expect("FIN");
            wait_for_close(stream);
        };
        let (result, _) = over_loopback(Duration::from_secs(10), cut);
        let error = result.expect_err("cut short");
        assert!(error.to_string().contains("after 12 bytes"), "{error}");
    }
}
