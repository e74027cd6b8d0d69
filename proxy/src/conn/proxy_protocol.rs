//! HAProxy's PROXY protocol, versions 1 and 2: telling the next hop who the
//! client really is.
//!
//! A load balancer in TCP mode opens its own connection to the backend, so
//! the backend sees the balancer's address, never the client's. The PROXY
//! protocol puts the lost facts back: before the first byte of the client's
//! stream, the connecting side sends one header with the client's address
//! and port and the address and port the client connected to. The receiver
//! reads the header, keeps the addresses, and from the next byte on the
//! connection carries the client's bytes, unchanged. The header is sent once,
//! at the start, and never answered.
//!
//! ```text
//!   client ──▶ proxy ──[ header | client's bytes ... ]──▶ backend
//!              encode()                                   parse() / read_header()
//! ```
//!
//! The proxy uses it in both directions: `send-proxy` / `send-proxy-v2`
//! write a header to a backend ([`encode`]); `accept-proxy` reads one from
//! the clients of a frontend that sits behind another load balancer
//! ([`read_header`], built on [`parse`]).
//!
//! # Version 1: one line of text
//!
//! ```text
//!   PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n
//!   │     │    │           │            │     │  └─ CRLF: the line ends by byte 107
//!   │     │    │           │            │     └─ destination port
//!   │     │    │           │            └─ source port: decimal 0-65535
//!   │     │    │           └─ destination address (the one the client connected to)
//!   │     │    └─ source address (the client)
//!   │     └─ TCP4, TCP6, or UNKNOWN (then anything up to the CRLF)
//!   └─ fields separated by exactly one space
//! ```
//!
//! # Version 2: binary
//!
//! ```text
//!   byte  size  what
//!   0     12    signature  0D 0A 0D 0A 00 0D 0A 51 55 49 54 0A   ("\r\n\r\n\0\r\nQUIT\n")
//!   12    1     high nibble: version, always 2  │ low nibble: command, 0 LOCAL or 1 PROXY
//!   13    1     high nibble: family (0 UNSPEC, 1 INET, 2 INET6, 3 UNIX)
//!               low nibble: protocol (0 UNSPEC, 1 STREAM, 2 DGRAM)
//!   14    2     length of what follows, big-endian
//!   16    len   addresses   INET:  source 4, destination 4, source port 2, destination port 2 (12)
//!                           INET6: source 16, destination 16, ports 2 and 2                  (36)
//!               then TLVs to the end: type 1 byte, length 2 bytes, value
//! ```
//!
//! # Strict, bounded, and quick to refuse
//!
//! A header is trusted to rewrite the client's address, so anything that
//! is not exactly a header is refused, and [`parse`] says so as soon as the
//! bytes seen cannot begin a valid header, without waiting for more: `GET /`
//! is refused at its first byte, `PROXY TCP5` at its last.
//!
//! - v1: `PROXY `, then `TCP4`, `TCP6` or `UNKNOWN`, single spaces, a CRLF
//!   within 107 bytes (a lone CR or LF is refused). IPv4 addresses are four
//!   decimal numbers 0-255; IPv6 addresses are what `Ipv6Addr` parses
//!   (zones are refused). The family must match the protocol: `TCP4 ::1` is
//!   refused, and so is `TCP6 1.2.3.4` (`TCP6 ::ffff:1.2.3.4` is fine).
//!   Leading zeros are refused in ports and in IPv4 numbers (`080`,
//!   `192.168.000.1`), as the specification says, since they read as octal
//!   to some parsers; so are `+80` and anything over 65535. `UNKNOWN` may
//!   be followed by a space and anything but CR and LF, all ignored: the
//!   connection's own addresses are used.
//! - v2: the signature, version 2, command LOCAL or PROXY, a family and
//!   protocol the specification defines. LOCAL means "use the connection's
//!   own addresses", whatever the family says, and its block is skipped
//!   unread. Under PROXY: TCP over IPv4 or IPv6 gives addresses; an
//!   unspecified family or protocol (`AF_UNSPEC`) is taken like LOCAL, as
//!   the specification allows. UDP and `AF_UNIX` are refused: the
//!   specification would let us fall back to the connection's addresses,
//!   but a header announcing them in front of a TCP listener means a
//!   misconfigured sender, better seen at once. The length must hold the
//!   family's addresses and may not exceed [`V2_MAX_LENGTH`], room for IPv6
//!   addresses and [`V2_MAX_TLVS`] bytes of TLVs. TLVs must tile the rest of
//!   the header exactly; a `CRC32C` TLV is verified (the specification's
//!   MUST for receivers that know it); the others are skipped.
//!
//! The longest header accepted is [`MAX_HEADER`] bytes, so a reader never
//! needs more than that much buffer, and [`read_header`] gives up after a
//! time limit: a client cannot hold a connection open by sending half a
//! header, nor make the proxy buffer without bound.
//!
//! The specification's one rule for operators matters more than any of the
//! above: a listener that accepts the header must require it, and only
//! trusted load balancers should reach it. Anyone who can connect can claim
//! any address.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use runtime::net::TcpStream;
use runtime::time;

/// What a header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addresses {
    /// The connection was relayed on behalf of a client.
    Proxied {
        /// The client's address and port.
        source: SocketAddr,
        /// The address and port the client connected to.
        destination: SocketAddr,
    },
    /// No addresses to use (v2 LOCAL or `AF_UNSPEC`, v1 `UNKNOWN`): the
    /// connection's own addresses stand.
    Local,
}

/// Which version of header [`encode`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The text line (`send-proxy`).
    V1,
    /// The binary header (`send-proxy-v2`).
    V2,
}

/// The longest v1 line, CRLF included: the specification's worst case,
/// `PROXY UNKNOWN` followed by two full IPv6 addresses and two ports.
pub const V1_MAX: usize = 107;

/// The most bytes of TLVs a v2 header with IPv6 addresses may carry.
pub const V2_MAX_TLVS: usize = 512;

/// The largest v2 length field accepted: IPv6 addresses and ports (36
/// bytes) and [`V2_MAX_TLVS`]. (IPv4 headers may use the same room.)
pub const V2_MAX_LENGTH: usize = V6_BLOCK + V2_MAX_TLVS;

/// The most bytes a header we accept may take: 564, a v2 header of
/// [`V2_MAX_LENGTH`]; the longest v1 line is shorter.
pub const MAX_HEADER: usize = V2_FIXED + V2_MAX_LENGTH;

/// The start of every v1 line.
const V1_PREFIX: &[u8] = b"PROXY ";

/// What may follow it.
const V1_PROTOCOLS: [&[u8]; 3] = [b"TCP4", b"TCP6", b"UNKNOWN"];

/// The first 12 bytes of every v2 header; its NUL and `QUIT` make it
/// unlike the start of any common protocol.
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// Signature, version and command, family and protocol, length.
const V2_FIXED: usize = 16;

/// The v2 address block of TCP over IPv4, and over IPv6.
const V4_BLOCK: usize = 12;
const V6_BLOCK: usize = 36;

/// The v2 TLV type of a CRC32C of the whole header.
const TLV_CRC32C: u8 = 0x03;

/// Why some bytes are not a PROXY protocol header.
///
/// Texts taken from the peer's bytes are kept escaped (`\r`, `\x00`), so
/// a logged error cannot forge log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Neither `PROXY ` nor the v2 signature.
    NotProxyProtocol,
    /// No CRLF within the first 107 bytes.
    V1TooLong,
    /// A CR not followed by LF.
    V1LoneCr,
    /// An LF without a CR before it.
    V1LoneLf,
    /// The protocol field is not `TCP4`, `TCP6` or `UNKNOWN`.
    V1Protocol(String),
    /// Two spaces in a row, or a space before the CRLF.
    V1Spacing,
    /// `TCP4` or `TCP6` followed by other than four fields.
    V1FieldCount {
        /// `TCP4` or `TCP6`.
        protocol: &'static str,
        /// How many fields followed it.
        found: usize,
    },
    /// An address that is not one of the protocol's family.
    V1Address {
        /// `TCP4` or `TCP6`.
        protocol: &'static str,
        /// The field as seen.
        text: String,
    },
    /// A port that is not a decimal number 0-65535 without leading zeros.
    V1Port(String),
    /// A version nibble other than 2.
    V2Version(u8),
    /// A command other than LOCAL (0) and PROXY (1).
    V2Command(u8),
    /// A family or protocol nibble the specification does not define.
    V2Family(u8),
    /// UDP (`DGRAM`): not something a TCP proxy can relay.
    V2Datagram(u8),
    /// `AF_UNIX`: no IP addresses to hand on.
    V2Unix(u8),
    /// A length field over [`V2_MAX_LENGTH`].
    V2TooLong(usize),
    /// A length field too small for the family's addresses.
    V2ShortAddresses {
        /// The length field.
        length: usize,
        /// `AF_INET` or `AF_INET6`.
        family: &'static str,
    },
    /// A TLV whose type and length, or whose value, run past the header's end.
    V2Tlv {
        /// Where the TLV starts, counted from the header's first byte.
        offset: usize,
    },
    /// A `CRC32C` TLV whose value is not 4 bytes.
    V2ChecksumLength(usize),
    /// A `CRC32C` TLV that does not match the header.
    V2Checksum,
}

impl ParseError {
    /// The version whose rules the bytes broke; `None` when they started
    /// like neither version.
    pub fn version(&self) -> Option<Version> {
        match self {
            ParseError::NotProxyProtocol => None,
            ParseError::V1TooLong
            | ParseError::V1LoneCr
            | ParseError::V1LoneLf
            | ParseError::V1Protocol(_)
            | ParseError::V1Spacing
            | ParseError::V1FieldCount { .. }
            | ParseError::V1Address { .. }
            | ParseError::V1Port(_) => Some(Version::V1),
            ParseError::V2Version(_)
            | ParseError::V2Command(_)
            | ParseError::V2Family(_)
            | ParseError::V2Datagram(_)
            | ParseError::V2Unix(_)
            | ParseError::V2TooLong(_)
            | ParseError::V2ShortAddresses { .. }
            | ParseError::V2Tlv { .. }
            | ParseError::V2ChecksumLength(_)
            | ParseError::V2Checksum => Some(Version::V2),
        }
    }

    /// The sentence of a v1 error ([`ParseError::version`] routes them here).
    fn fmt_v1(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::V1TooLong => write!(f, "v1 line longer than {V1_MAX} bytes"),
            ParseError::V1LoneCr => f.write_str("v1 line has a CR not followed by LF"),
            ParseError::V1LoneLf => f.write_str("v1 line has an LF without a CR before it"),
            ParseError::V1Protocol(text) => {
                write!(f, "v1 protocol \"{text}\" is not TCP4, TCP6 or UNKNOWN")
            }
            ParseError::V1Spacing => {
                f.write_str("v1 fields must be separated by exactly one space")
            }
            ParseError::V1FieldCount { protocol, found } => write!(
                f,
                "v1 {protocol} line has {found} fields after the protocol, not 4 (two addresses, two ports)"
            ),
            ParseError::V1Address { protocol, text } => {
                let family = if *protocol == "TCP4" { "IPv4" } else { "IPv6" };
                write!(
                    f,
                    "v1 address \"{text}\" is not an {family} address, as {protocol} requires"
                )
            }
            ParseError::V1Port(text) => write!(
                f,
                "v1 port \"{text}\" is not a decimal number 0-65535 without leading zeros"
            ),
            _ => Ok(()),
        }
    }

    /// The sentence of a v2 error ([`ParseError::version`] routes them here).
    fn fmt_v2(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::V2Version(version) => {
                write!(f, "v2 version {version} unsupported (only 2 is defined)")
            }
            ParseError::V2Command(command) => write!(
                f,
                "v2 command {command} unsupported (only 0 LOCAL and 1 PROXY are defined)"
            ),
            ParseError::V2Family(byte) => write!(
                f,
                "v2 family/protocol byte 0x{byte:02x} is not defined by the specification"
            ),
            ParseError::V2Datagram(byte) => write!(
                f,
                "v2 header announces UDP (byte 0x{byte:02x}), but this proxy relays TCP"
            ),
            ParseError::V2Unix(byte) => write!(
                f,
                "v2 header announces AF_UNIX (byte 0x{byte:02x}), but this proxy relays TCP over IPv4 and IPv6"
            ),
            ParseError::V2TooLong(length) => write!(
                f,
                "v2 length of {length} bytes is over our limit of {V2_MAX_LENGTH}"
            ),
            ParseError::V2ShortAddresses { length, family } => {
                write!(
                    f,
                    "v2 address block of {length} bytes too short for {family}"
                )
            }
            ParseError::V2Tlv { offset } => {
                write!(f, "v2 TLV at byte {offset} runs past the end of the header")
            }
            ParseError::V2ChecksumLength(length) => {
                write!(f, "v2 CRC32C TLV of {length} bytes, not 4")
            }
            ParseError::V2Checksum => f.write_str("v2 CRC32C checksum does not match the header"),

            _ => Ok(()),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version() {
            None => f.write_str("not a PROXY protocol header"),
            Some(Version::V1) => self.fmt_v1(f),
            Some(Version::V2) => self.fmt_v2(f),
        }
    }
}

impl std::error::Error for ParseError {}

/// The header that tells the next hop about a connection from `source` to
/// `destination`: always the PROXY command, TCP, no TLVs.
///
/// Both addresses are written in one family. When one is IPv4 and the other
/// IPv6, the IPv4 one is written as IPv6 (`::ffff:a.b.c.d`, the form an
/// IPv6 socket gives IPv4 peers), and the header is `TCP6` or `AF_INET6`.
/// IPv6 scope ids and flow labels are not part of the protocol and are
/// dropped.
pub fn encode(version: Version, source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    match (version, same_family(source, destination)) {
        (Version::V1, Pair::V4(s, d)) => format!(
            "PROXY TCP4 {} {} {} {}\r\n",
            s.ip(),
            d.ip(),
            s.port(),
            d.port()
        )
        .into_bytes(),
        (Version::V1, Pair::V6(s, d)) => {
            // Display writes the canonical text: compressed hex, and
            // ::ffff:a.b.c.d for mapped IPv4 addresses; at most 39 bytes.
            format!(
                "PROXY TCP6 {} {} {} {}\r\n",
                s.ip(),
                d.ip(),
                s.port(),
                d.port()
            )
            .into_bytes()
        }
        (Version::V2, Pair::V4(s, d)) => {
            let mut out = v2_start(0x11, V4_BLOCK);
            out.extend_from_slice(&s.ip().octets());
            out.extend_from_slice(&d.ip().octets());
            out.extend_from_slice(&s.port().to_be_bytes());
            out.extend_from_slice(&d.port().to_be_bytes());
            out
        }
        (Version::V2, Pair::V6(s, d)) => {
            let mut out = v2_start(0x21, V6_BLOCK);
            out.extend_from_slice(&s.ip().octets());
            out.extend_from_slice(&d.ip().octets());
            out.extend_from_slice(&s.port().to_be_bytes());
            out.extend_from_slice(&d.port().to_be_bytes());
            out
        }
    }
}

/// The header of a connection that carries no client: v1 `PROXY UNKNOWN`,
/// v2 the LOCAL command with no addresses. What a health check sends to a
/// server that expects a header ("use the connection's own addresses",
/// which the receiver treats as a probe of its own: HAProxy's checks send
/// the same).
pub fn encode_local(version: Version) -> Vec<u8> {
    match version {
        Version::V1 => b"PROXY UNKNOWN\r\n".to_vec(),
        Version::V2 => {
            let mut out = v2_start(0x00, 0); // AF_UNSPEC, UNSPEC
            out[12] = 0x20; // version 2, command LOCAL
            out
        }
    }
}

/// Two addresses of one family.
enum Pair {
    V4(SocketAddrV4, SocketAddrV4),
    V6(SocketAddrV6, SocketAddrV6),
}

fn same_family(source: SocketAddr, destination: SocketAddr) -> Pair {
    match (source, destination) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => Pair::V4(s, d),
        (s, d) => Pair::V6(as_v6(s), as_v6(d)),
    }
}

fn as_v6(address: SocketAddr) -> SocketAddrV6 {
    match address {
        SocketAddr::V6(v6) => v6,
        SocketAddr::V4(v4) => SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0),
    }
}

/// The 16 fixed bytes of a v2 PROXY header, with room for the block.
fn v2_start(family_protocol: u8, block: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(V2_FIXED + block);
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x21); // version 2, command PROXY
    out.push(family_protocol);
    // The blocks we write are 12 or 36 bytes: they fit.
    out.extend_from_slice(&u16::try_from(block).unwrap_or(u16::MAX).to_be_bytes());
    out
}

/// Parses a header at the start of `buf`.
///
/// - `Ok(None)`: what is there is the valid start of a header; read more.
/// - `Ok(Some((addresses, used)))`: a complete header of `used` bytes; the
///   rest of `buf` is the client's stream, to be forwarded.
/// - `Err`: not a header, decided as soon as the bytes seen cannot start one.
///
/// Never looks past [`MAX_HEADER`] bytes, and never panics, whatever `buf` holds.
pub fn parse(buf: &[u8]) -> Result<Option<(Addresses, usize)>, ParseError> {
    // The two versions differ from the first byte: 'P' or CR.
    match buf.first() {
        None => Ok(None),
        Some(b'P') => parse_v1(buf),
        Some(b'\r') => parse_v2(buf),
        Some(_) => Err(ParseError::NotProxyProtocol),
    }
}

/// Whether `buf` and `expected` agree as far as both go.
fn starts_like(buf: &[u8], expected: &[u8]) -> bool {
    buf.iter().zip(expected).all(|(a, b)| a == b)
}

/// The peer's bytes, escaped for an error message.
fn escaped(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

fn parse_v1(buf: &[u8]) -> Result<Option<(Addresses, usize)>, ParseError> {
    if !starts_like(buf, V1_PREFIX) {
        return Err(ParseError::NotProxyProtocol);
    }
    // The line is everything before the first CR, looked for within the
    // 107 bytes a line may take.
    let window = buf.get(..V1_MAX).unwrap_or(buf);
    let mut halves = window.splitn(2, |&b| b == b'\r');
    let line = halves.next().unwrap_or_default();
    let after_cr = halves.next();
    // Even if the CRLF came right now, would the line fit?
    if line.len() + 2 > V1_MAX {
        return Err(ParseError::V1TooLong);
    }
    let complete = match after_cr.map(<[u8]>::first) {
        None | Some(None) => false,
        Some(Some(b'\n')) => true,
        Some(Some(_)) => return Err(ParseError::V1LoneCr),
    };
    if line.contains(&b'\n') {
        return Err(ParseError::V1LoneLf);
    }
    let fields = line.get(V1_PREFIX.len()..).unwrap_or_default();
    let addresses = v1_fields(fields, complete)?;
    Ok(addresses.map(|addresses| (addresses, line.len() + 2)))
}

/// Checks the fields after `PROXY `, of a whole line (`complete`) or of the
/// part seen so far, and gives the addresses of a whole line.
fn v1_fields(rest: &[u8], complete: bool) -> Result<Option<Addresses>, ParseError> {
    let fields: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
    // A field is finished when a space or the end of the line follows it;
    // until then it may still grow, and only needs to be a valid start.
    let finished = |i: usize| i + 1 < fields.len() || complete;
    let protocol = fields.first().copied().unwrap_or_default();
    let family = match protocol {
        b"TCP4" => V1Family::TCP4,
        b"TCP6" => V1Family::TCP6,
        // Whatever follows UNKNOWN and a space is to be ignored.
        b"UNKNOWN" if finished(0) => return Ok(complete.then_some(Addresses::Local)),
        b"" if finished(0) => return Err(ParseError::V1Spacing),
        p if !finished(0) && V1_PROTOCOLS.iter().any(|known| known.starts_with(p)) => {
            return Ok(None);
        }
        p => return Err(ParseError::V1Protocol(escaped(p))),
    };
    let values = fields.get(1..).unwrap_or_default();
    // An empty field that is finished: two spaces in a row, or a space
    // before the CRLF.
    let empty = |(i, value): (usize, &&[u8])| value.is_empty() && finished(i + 1);
    if values.iter().enumerate().any(empty) {
        return Err(ParseError::V1Spacing);
    }
    if values.len() > 4 || (complete && values.len() < 4) {
        return Err(ParseError::V1FieldCount {
            protocol: family.name,
            found: values.len(),
        });
    }
    if let ([source, destination, source_port, destination_port], true) = (values, complete) {
        return Ok(Some(Addresses::Proxied {
            source: SocketAddr::new(family.address(source)?, v1_port(source_port)?),
            destination: SocketAddr::new(family.address(destination)?, v1_port(destination_port)?),
        }));
    }
    // Part of a line: every finished field must be valid, and the last one
    // the valid start of one.
    for (i, value) in values.iter().enumerate() {
        family.check_start(i, value, finished(i + 1))?;
    }
    Ok(None)
}

/// The address family a v1 line names, and how its fields are read.
#[derive(Debug, Clone, Copy)]
struct V1Family {
    name: &'static str,
    v4: bool,
}

impl V1Family {
    const TCP4: V1Family = V1Family {
        name: "TCP4",
        v4: true,
    };
    const TCP6: V1Family = V1Family {
        name: "TCP6",
        v4: false,
    };

    /// A whole address field, of this family only.
    fn address(self, text: &[u8]) -> Result<IpAddr, ParseError> {
        let ip = if self.v4 {
            parse_ipv4(text).map(IpAddr::from)
        } else {
            parse_ipv6(text).map(IpAddr::from)
        };
        ip.ok_or_else(|| self.address_error(text))
    }

    fn address_error(self, text: &[u8]) -> ParseError {
        ParseError::V1Address {
            protocol: self.name,
            text: escaped(text),
        }
    }

    /// Field `i` of a partial line (0 and 1 addresses, 2 and 3 ports):
    /// valid if `finished`, else the valid start of one.
    fn check_start(self, i: usize, value: &[u8], finished: bool) -> Result<(), ParseError> {
        match (i < 2, finished) {
            (true, true) => self.address(value).map(drop),
            (true, false) => {
                let could_be = if self.v4 {
                    ipv4_prefix(value)
                } else {
                    ipv6_prefix(value)
                };
                if could_be {
                    Ok(())
                } else {
                    Err(self.address_error(value))
                }
            }
            // A valid port's every non-empty start is a valid port itself.
            (false, _) if value.is_empty() => Ok(()),
            (false, _) => v1_port(value).map(drop),
        }
    }
}

/// A v1 port: decimal 0-65535, no sign, no leading zero.
fn v1_port(text: &[u8]) -> Result<u16, ParseError> {
    decimal(text, 5)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| ParseError::V1Port(escaped(text)))
}

/// A decimal number of at most `digits` digits, without sign or leading
/// zeros ("0" itself is fine).
fn decimal(text: &[u8], digits: usize) -> Option<u32> {
    let plain = !text.is_empty()
        && text.len() <= digits
        && text.iter().all(u8::is_ascii_digit)
        && (text.len() == 1 || text.first() != Some(&b'0'));
    plain.then(|| {
        text.iter()
            .fold(0, |n, &digit| n * 10 + u32::from(digit - b'0'))
    })
}

fn octet(text: &[u8]) -> Option<u8> {
    decimal(text, 3).and_then(|n| u8::try_from(n).ok())
}

/// Exactly four numbers 0-255 in plain decimal, separated by dots.
fn parse_ipv4(text: &[u8]) -> Option<Ipv4Addr> {
    let mut parts = text.split(|&b| b == b'.');
    let mut octets = [0; 4];
    for slot in &mut octets {
        *slot = octet(parts.next()?)?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// Whether some continuation of `text` is an IPv4 address (exact).
fn ipv4_prefix(text: &[u8]) -> bool {
    let parts: Vec<&[u8]> = text.split(|&b| b == b'.').collect();
    let last = parts.len().saturating_sub(1);
    parts.len() <= 4
        && parts
            .iter()
            .enumerate()
            .all(|(i, part)| (i == last && part.is_empty()) || octet(part).is_some())
}

/// What `Ipv6Addr` parses: hex groups, one `::` at most, an IPv4 tail
/// allowed; no zone (`%eth0`), no brackets.
fn parse_ipv6(text: &[u8]) -> Option<Ipv6Addr> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Whether `text` may be the start of an IPv6 address. Close, not exact
/// (a ninth group is caught only when the field ends); the whole field is
/// checked with [`parse_ipv6`] once it ends.
fn ipv6_prefix(text: &[u8]) -> bool {
    let groups: Vec<&[u8]> = text.split(|&b| b == b':').collect();
    let last = groups.len().saturating_sub(1);
    let hex_group = |g: &[u8]| g.len() <= 4 && g.iter().all(u8::is_ascii_hexdigit);
    let groups_ok = groups.iter().enumerate().all(|(i, group)| {
        // Only the last group may be (the start of) an IPv4 address.
        hex_group(group) || (i == last && group.contains(&b'.') && ipv4_prefix(group))
    });
    let double_colons = text.windows(2).filter(|pair| pair == b"::").count();
    // The longest form is "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255".
    text.len() <= 45 && groups.len() <= 9 && double_colons <= 1 && groups_ok
}

/// v2's family and protocol byte, as far as we are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V2Kind {
    /// Addresses to ignore: a LOCAL command, or an unspecified family or protocol.
    Local,
    /// TCP over IPv4.
    Tcp4,
    /// TCP over IPv6.
    Tcp6,
}

fn v2_kind(proxy_command: bool, byte: u8) -> Result<V2Kind, ParseError> {
    let (family, protocol) = (byte >> 4, byte & 0x0f);
    if family > 3 || protocol > 2 {
        return Err(ParseError::V2Family(byte));
    }
    if !proxy_command {
        // LOCAL: "the family is ignored".
        return Ok(V2Kind::Local);
    }
    match (family, protocol) {
        (3, _) => Err(ParseError::V2Unix(byte)),
        (_, 2) => Err(ParseError::V2Datagram(byte)),
        (1, 1) => Ok(V2Kind::Tcp4),
        (2, 1) => Ok(V2Kind::Tcp6),
        // AF_UNSPEC, or an unspecified protocol: the receiver may use the
        // connection's own addresses, and we do.
        _ => Ok(V2Kind::Local),
    }
}

fn parse_v2(buf: &[u8]) -> Result<Option<(Addresses, usize)>, ParseError> {
    if !starts_like(buf, &V2_SIGNATURE) {
        return Err(ParseError::NotProxyProtocol);
    }
    // Each fixed byte is checked as soon as it is there.
    let Some(&version_command) = buf.get(12) else {
        return Ok(None);
    };
    let (version, command) = (version_command >> 4, version_command & 0x0f);
    if version != 2 {
        return Err(ParseError::V2Version(version));
    }
    if command > 1 {
        return Err(ParseError::V2Command(command));
    }
    let Some(&family_protocol) = buf.get(13) else {
        return Ok(None);
    };
    let kind = v2_kind(command == 1, family_protocol)?;
    let (Some(&high), Some(&low)) = (buf.get(14), buf.get(15)) else {
        return Ok(None);
    };
    let length = usize::from(u16::from_be_bytes([high, low]));
    if length > V2_MAX_LENGTH {
        return Err(ParseError::V2TooLong(length));
    }
    let (needed, family) = match kind {
        V2Kind::Local => (0, ""),
        V2Kind::Tcp4 => (V4_BLOCK, "AF_INET"),
        V2Kind::Tcp6 => (V6_BLOCK, "AF_INET6"),
    };
    if length < needed {
        return Err(ParseError::V2ShortAddresses { length, family });
    }
    // The block is read only once it is all there.
    let total = V2_FIXED + length;
    let Some(header) = buf.get(..total) else {
        return Ok(None);
    };
    let block = header.get(V2_FIXED..).unwrap_or_default();
    let addresses = match kind {
        V2Kind::Local => Addresses::Local,
        V2Kind::Tcp4 | V2Kind::Tcp6 => {
            check_tlvs(header, V2_FIXED + needed)?;
            // The length was checked against the family: this cannot fail.
            v2_addresses(kind == V2Kind::Tcp4, block)
                .ok_or(ParseError::V2ShortAddresses { length, family })?
        }
    };
    Ok(Some((addresses, total)))
}

/// The addresses at the start of a v2 block of TCP over IPv4 (`tcp4`) or
/// IPv6; `None` if the block is too short.
fn v2_addresses(tcp4: bool, mut block: &[u8]) -> Option<Addresses> {
    let (source, destination): (IpAddr, IpAddr) = if tcp4 {
        (take::<4>(&mut block)?.into(), take::<4>(&mut block)?.into())
    } else {
        (
            take::<16>(&mut block)?.into(),
            take::<16>(&mut block)?.into(),
        )
    };
    let source_port = u16::from_be_bytes(take(&mut block)?);
    let destination_port = u16::from_be_bytes(take(&mut block)?);
    Some(Addresses::Proxied {
        source: SocketAddr::new(source, source_port),
        destination: SocketAddr::new(destination, destination_port),
    })
}

/// Takes the first `N` bytes off `bytes`.
fn take<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = bytes.split_first_chunk::<N>()?;
    *bytes = rest;
    Some(*head)
}

/// Walks the TLVs from `start` to the end of `header`: each must fit
/// whole, and a CRC32C must match. Their contents are otherwise skipped.
fn check_tlvs(header: &[u8], start: usize) -> Result<(), ParseError> {
    let mut offset = start;
    while offset < header.len() {
        let Some(&[kind, high, low]) = header.get(offset..offset + 3) else {
            return Err(ParseError::V2Tlv { offset });
        };
        let value_length = usize::from(u16::from_be_bytes([high, low]));
        let value_start = offset + 3;
        let end = value_start + value_length;
        if end > header.len() {
            return Err(ParseError::V2Tlv { offset });
        }
        if kind == TLV_CRC32C {
            if value_length != 4 {
                return Err(ParseError::V2ChecksumLength(value_length));
            }
            if !checksum_matches(header, value_start) {
                return Err(ParseError::V2Checksum);
            }
        }
        offset = end;
    }
    Ok(())
}

/// Whether the 4 bytes at `at` (big-endian) are the CRC32C of `header`
/// computed with those 4 bytes as zeros, which is how the sender made it.
fn checksum_matches(header: &[u8], at: usize) -> bool {
    let Some(&sent) = header.get(at..).and_then(|rest| rest.first_chunk::<4>()) else {
        return false;
    };
    let mut zeroed = header.to_vec();
    if let Some(field) = zeroed.get_mut(at..at + 4) {
        field.fill(0);
    }
    crc32c(&zeroed) == u32::from_be_bytes(sent)
}

/// CRC-32C (Castagnoli), as in RFC 4960 appendix B: the reflected
/// polynomial 0x82F63B78, all ones in and out. Bit by bit: a header is at
/// most 564 bytes and carries a checksum rarely, so no table.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let low_bit = crc & 1;
            crc = (crc >> 1) ^ (0x82F6_3B78 & low_bit.wrapping_neg());
        }
    }
    !crc
}

/// Reads a PROXY protocol header from a freshly accepted `client`: at most
/// [`MAX_HEADER`] bytes, within `limit`.
///
/// Returns the addresses and the bytes read past the header (the start of
/// the client's stream, to send to the backend first). Fails with
/// `InvalidData` (carrying the [`ParseError`]) as soon as the bytes cannot
/// be a header, `UnexpectedEof` if the client closes before the header is
/// whole, `TimedOut` if it is not whole within `limit`, or the read's own
/// error.
pub async fn read_header(client: &TcpStream, limit: Duration) -> io::Result<(Addresses, Vec<u8>)> {
    match time::timeout(limit, read_until_parsed(client)).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no complete PROXY protocol header within {limit:?}"),
        )),
    }
}

async fn read_until_parsed(client: &TcpStream) -> io::Result<(Addresses, Vec<u8>)> {
    let mut buf = vec![0; MAX_HEADER];
    let mut filled = 0;
    loop {
        // parse() refuses anything that cannot fit in MAX_HEADER bytes, so
        // there is always room; were there not, refuse rather than spin.
        let Some(room) = buf.get_mut(filled..).filter(|room| !room.is_empty()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no PROXY protocol header within {MAX_HEADER} bytes"),
            ));
        };
        let n = client.read(room).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the client closed after {filled} bytes, before its PROXY protocol header was whole"
                ),
            ));
        }
        filled += n;
        match parse(buf.get(..filled).unwrap_or_default()) {
            Ok(None) => {}
            Ok(Some((addresses, used))) => {
                buf.truncate(filled);
                buf.drain(..used.min(filled));
                return Ok((addresses, buf));
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::{Read, Write};
    use std::net::Shutdown;
    use std::time::Instant;

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn v6(text: &str, port: u16) -> SocketAddr {
        SocketAddr::new(
            text.parse::<Ipv6Addr>().expect("an IPv6 address").into(),
            port,
        )
    }

    fn proxied(source: SocketAddr, destination: SocketAddr) -> Addresses {
        Addresses::Proxied {
            source,
            destination,
        }
    }

    /// A v2 header built by hand: signature, the two bytes, the length, the block.
    fn v2(version_command: u8, family_protocol: u8, block: &[u8]) -> Vec<u8> {
        let mut out = V2_SIGNATURE.to_vec();
        out.push(version_command);
        out.push(family_protocol);
        out.extend_from_slice(&u16::try_from(block.len()).expect("short").to_be_bytes());
        out.extend_from_slice(block);
        out
    }

    /// 127.0.0.1:1234 -> 127.0.0.2:80, the v2 block of TCP over IPv4.
    const BLOCK_V4: [u8; 12] = [127, 0, 0, 1, 127, 0, 0, 2, 0x04, 0xd2, 0x00, 0x50];

    fn block_v6() -> Vec<u8> {
        let mut block = Vec::new();
        block.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().expect("v6").octets());
        block.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().expect("v6").octets());
        block.extend_from_slice(&[0xc3, 0x50, 0x01, 0xbb]); // 50000, 443
        block
    }

    /// A TLV: type, big-endian length, value.
    fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&u16::try_from(value.len()).expect("short").to_be_bytes());
        out.extend_from_slice(value);
        out
    }

    /// A v2 PROXY TCP4 header with a CRC32C TLV, correct unless `spoil`.
    fn with_checksum(spoil: bool) -> Vec<u8> {
        let mut block = BLOCK_V4.to_vec();
        block.extend(tlv(0x01, b"h2")); // ALPN, before the checksum
        let at = V2_FIXED + block.len() + 3;
        block.extend(tlv(TLV_CRC32C, &[0; 4]));
        let mut header = v2(0x21, 0x11, &block);
        let crc = crc32c(&header) ^ u32::from(spoil);
        header
            .get_mut(at..at + 4)
            .expect("room")
            .copy_from_slice(&crc.to_be_bytes());
        header
    }

    fn parsed(bytes: &[u8]) -> (Addresses, usize) {
        match parse(bytes) {
            Ok(Some(done)) => done,
            other => panic!("{:?}: {other:?}", bytes.escape_ascii().to_string()),
        }
    }

    fn refused(bytes: &[u8]) -> ParseError {
        match parse(bytes) {
            Err(e) => e,
            other => panic!("{:?}: {other:?}", bytes.escape_ascii().to_string()),
        }
    }

    /// Every strict prefix is "more, please", never an error.
    fn assert_prefixes_wait(header: &[u8]) {
        for cut in 0..header.len() {
            let prefix = header.get(..cut).expect("in range");
            assert_eq!(
                parse(prefix),
                Ok(None),
                "prefix of {cut} bytes of {:?}",
                header.escape_ascii().to_string()
            );
        }
    }

    // ---- the specification's examples and hand-built bytes ----

    #[test]
    fn the_v2_bytes_for_127_0_0_1_to_127_0_0_2() {
        let expected: &[u8] = &[
            0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54,
            0x0a, // signature
            0x21, // version 2, PROXY
            0x11, // AF_INET, STREAM
            0x00, 0x0c, // 12 bytes follow
            127, 0, 0, 1, 127, 0, 0, 2, // source, destination
            0x04, 0xd2, 0x00, 0x50, // 1234, 80
        ];
        let (source, destination) = (v4([127, 0, 0, 1], 1234), v4([127, 0, 0, 2], 80));
        assert_eq!(encode(Version::V2, source, destination), expected);
        assert_eq!(v2(0x21, 0x11, &BLOCK_V4), expected);
        assert_eq!(parsed(expected), (proxied(source, destination), 28));
    }

    #[test]
    fn the_v1_examples_of_the_specification() {
        let request = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\nHost: 192.168.0.11\r\n\r\n";
        let source = v4([192, 168, 0, 1], 56324);
        let destination = v4([192, 168, 0, 11], 443);
        assert_eq!(parsed(request), (proxied(source, destination), 47));
        assert_eq!(
            encode(Version::V1, source, destination),
            request.get(..47).expect("the line")
        );

        assert_eq!(parsed(b"PROXY UNKNOWN\r\n"), (Addresses::Local, 15));
        for version in [Version::V1, Version::V2] {
            let local = encode_local(version);
            assert_eq!(
                parsed(&local),
                (Addresses::Local, local.len()),
                "{version:?}"
            );
        }
        let max4 = b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n";
        assert_eq!(max4.len(), 56);
        let all = v4([255; 4], 65535);
        assert_eq!(parsed(max4), (proxied(all, all), 56));

        let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        let max6 = format!("PROXY TCP6 {f} {f} 65535 65535\r\n");
        assert_eq!(max6.len(), 104);
        let all = v6(f, 65535);
        assert_eq!(parsed(max6.as_bytes()), (proxied(all, all), 104));

        // The worst case: UNKNOWN with everything, 107 bytes, ignored.
        let worst = format!("PROXY UNKNOWN {f} {f} 65535 65535\r\n");
        assert_eq!(worst.len(), V1_MAX);
        assert_eq!(parsed(worst.as_bytes()), (Addresses::Local, 107));
    }

    #[test]
    fn v1_forms_that_are_accepted() {
        let cases: &[(&[u8], Addresses)] = &[
            (
                b"PROXY TCP4 0.0.0.0 10.0.0.1 0 80\r\n",
                proxied(v4([0; 4], 0), v4([10, 0, 0, 1], 80)),
            ),
            (
                b"PROXY TCP6 ::1 2001:DB8::2 1 65535\r\n",
                proxied(v6("::1", 1), v6("2001:db8::2", 65535)),
            ),
            (
                b"PROXY TCP6 ::ffff:1.2.3.4 :: 5 6\r\n",
                proxied(v6("::ffff:1.2.3.4", 5), v6("::", 6)),
            ),
            (
                b"PROXY UNKNOWN anything at all, even \x00 \xff\r\n",
                Addresses::Local,
            ),
            (b"PROXY UNKNOWN \r\n", Addresses::Local),
        ];
        for (bytes, addresses) in cases {
            assert_eq!(parsed(bytes), (*addresses, bytes.len()));
            assert_prefixes_wait(bytes);
        }
    }

    #[test]
    fn v2_local_unspec_and_tlvs() {
        // LOCAL with no block, as senders should send it.
        assert_eq!(parsed(&v2(0x20, 0x00, &[])), (Addresses::Local, 16));
        // LOCAL with addresses anyway: skipped, family ignored, even UDP or unix.
        for family in [0x11, 0x12, 0x21, 0x31, 0x32] {
            assert_eq!(parsed(&v2(0x20, family, &BLOCK_V4)), (Addresses::Local, 28));
        }
        // LOCAL with a block that would be short for its family: still skipped.
        assert_eq!(parsed(&v2(0x20, 0x21, &[1, 2, 3])), (Addresses::Local, 19));
        // PROXY with AF_UNSPEC, or an unspecified protocol: the connection's own.
        for family in [0x00, 0x01, 0x10, 0x20] {
            assert_eq!(parsed(&v2(0x21, family, &BLOCK_V4)), (Addresses::Local, 28));
        }
        // IPv6.
        let header = v2(0x21, 0x21, &block_v6());
        let expected = proxied(v6("2001:db8::1", 50000), v6("2001:db8::2", 443));
        assert_eq!(parsed(&header), (expected, 52));
        // TLVs are skipped; the header ends where the length says.
        let mut block = BLOCK_V4.to_vec();
        block.extend(tlv(0x02, b"example.com"));
        block.extend(tlv(0x04, &[])); // NOOP, empty
        block.extend(tlv(0x20, &[1, 0, 0, 0, 0]));
        let mut bytes = v2(0x21, 0x11, &block);
        let length = bytes.len();
        bytes.extend_from_slice(b"payload");
        let (source, destination) = (v4([127, 0, 0, 1], 1234), v4([127, 0, 0, 2], 80));
        assert_eq!(parsed(&bytes), (proxied(source, destination), length));
        // The most TLVs we take, after IPv6 addresses.
        let mut block = block_v6();
        block.extend(tlv(0x04, &[0; V2_MAX_TLVS - 3]));
        let header = v2(0x21, 0x21, &block);
        assert_eq!(header.len(), MAX_HEADER);
        assert_eq!(parsed(&header), (expected, MAX_HEADER));
        // A correct CRC32C.
        assert_eq!(
            parsed(&with_checksum(false)),
            (proxied(source, destination), 40)
        );
    }

    #[test]
    fn crc32c_of_the_standard_check_string() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    // ---- round trips ----

    #[test]
    fn encode_then_parse_gives_the_addresses_back() {
        let four = (v4([192, 0, 2, 7], 40000), v4([198, 51, 100, 1], 443));
        let six = (v6("2001:db8::7", 40000), v6("fe80::1:2:3:4", 8443));
        let mapped = v6("::ffff:192.0.2.7", 40000);
        let mixed = [
            ((four.0, six.1), (mapped, six.1)),
            ((six.0, four.0), (six.0, mapped)),
        ];
        for version in [Version::V1, Version::V2] {
            let cases = [(four, four), (six, six)].into_iter().chain(mixed);
            for ((source, destination), (want_source, want_destination)) in cases {
                let mut bytes = encode(version, source, destination);
                let length = bytes.len();
                assert_prefixes_wait(&bytes);
                bytes.extend_from_slice(b"\r\nand then the client's bytes");
                assert_eq!(
                    parsed(&bytes),
                    (proxied(want_source, want_destination), length),
                    "{version:?} {source} -> {destination}"
                );
            }
        }
        // The mixed pair's v1 line, as text.
        assert_eq!(
            encode(Version::V1, four.0, six.1),
            b"PROXY TCP6 ::ffff:192.0.2.7 fe80::1:2:3:4 40000 8443\r\n"
        );
        // A scope id is not part of the protocol.
        let scoped = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().expect("v6"), 9, 0, 3));
        let (addresses, _) = parsed(&encode(Version::V2, scoped, scoped));
        let plain = v6("fe80::1", 9);
        assert_eq!(addresses, proxied(plain, plain));
    }

    // ---- malformed headers, each with its error ----

    fn address(protocol: &'static str, text: &str) -> ParseError {
        ParseError::V1Address {
            protocol,
            text: text.to_string(),
        }
    }

    fn port(text: &str) -> ParseError {
        ParseError::V1Port(text.to_string())
    }

    #[test]
    fn malformed_v1_lines() {
        use ParseError::*;
        let count = |protocol, found| V1FieldCount { protocol, found };
        let long = format!("PROXY UNKNOWN {}", "a".repeat(V1_MAX - 14));
        let line = "PROXY TCP4 1.2.3.4 5.6.7.8 1 2";
        let cases: Vec<(&[u8], ParseError)> = vec![
            (b"GET / HTTP/1.1\r\n", NotProxyProtocol),
            (b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n", NotProxyProtocol),
            (b"PROXY\r\n", NotProxyProtocol),
            (b"PROXYTCP4", NotProxyProtocol),
            (b"PROXY\tTCP4", NotProxyProtocol),
            (
                b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
                V1Protocol("TCP5".into()),
            ),
            (
                b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n",
                V1Protocol("tcp4".into()),
            ),
            (
                b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
                V1Protocol("UDP4".into()),
            ),
            (b"PROXY UNKNOWNX\r\n", V1Protocol("UNKNOWNX".into())),
            (b"PROXY TCP4\r\n", count("TCP4", 0)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", count("TCP4", 3)),
            (b"PROXY TCP6 ::1 ::2 1 2 3\r\n", count("TCP6", 5)),
            (b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", V1Spacing),
            (b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", V1Spacing),
            (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", V1Spacing),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1  2\r\n", V1Spacing),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", V1Spacing),
            (b"PROXY \r\n", V1Spacing),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", V1LoneLf),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", V1LoneCr),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n", V1LoneCr),
            (b"PROXY UNKNOWN a\nb\r\n", V1LoneLf),
            (b"PROXY TCP6 \xff:: ::1 1 2\r\n", address("TCP6", "\\xff::")),
            (long.as_bytes(), V1TooLong),
        ];
        for (bytes, error) in cases {
            let shown = bytes.escape_ascii().to_string();
            assert_eq!(refused(bytes), error, "{shown:?}");
        }
        assert_eq!(parsed(format!("{line}\r\n").as_bytes()).1, line.len() + 2);

        // Addresses, as the source; the destination is a good one.
        let addresses = [
            ("TCP4", "1.2.3"),
            ("TCP4", "1.2.3.4.5"),
            ("TCP4", "1.2.3.256"),
            ("TCP4", "1.2.3.08"),
            ("TCP4", "192.168.000.1"),
            ("TCP4", "1.2..4"),
            ("TCP4", "::1"),
            ("TCP4", "::ffff:1.2.3.4"),
            ("TCP4", "a.b.c.d"),
            ("TCP4", "-1.2.3.4"),
            ("TCP6", "1.2.3.4"),
            ("TCP6", "::1::2"),
            ("TCP6", "fe80::1%eth0"),
            ("TCP6", "[::1]"),
            ("TCP6", "12345::"),
            ("TCP6", "1:2:3:4:5:6:7:8:9"),
            ("TCP6", "1:2:3:4:5:6:7:1.2.3.4"),
            ("TCP6", "::ffff:01.2.3.4"),
            ("TCP6", "::g"),
        ];
        for (protocol, text) in addresses {
            let good = if protocol == "TCP4" { "5.6.7.8" } else { "::1" };
            let line = format!("PROXY {protocol} {text} {good} 1 2\r\n");
            assert_eq!(
                refused(line.as_bytes()),
                address(protocol, text),
                "{line:?}"
            );
        }

        // Ports, as the source port and as the destination port.
        let ports = [
            "65536", "99999", "123456", "080", "00", "+80", "-1", "0x50", "1e3",
        ];
        for text in ports {
            let line = format!("PROXY TCP4 1.2.3.4 5.6.7.8 {text} 2\r\n");
            assert_eq!(refused(line.as_bytes()), port(text), "{line:?}");
            let line = format!("PROXY TCP4 1.2.3.4 5.6.7.8 2 {text}\r\n");
            assert_eq!(refused(line.as_bytes()), port(text), "{line:?}");
        }
    }

    #[test]
    fn v1_length_limit_at_the_byte() {
        // 14 bytes of "PROXY UNKNOWN " and filler: the CRLF must end by byte 107.
        let line = |filler: usize| format!("PROXY UNKNOWN {}", "x".repeat(filler));
        // 105 bytes without CR: a CRLF could still make 107.
        assert_eq!(parse(line(91).as_bytes()), Ok(None));
        // 106 bytes without CR: the CRLF would make 108.
        assert_eq!(parse(line(92).as_bytes()), Err(ParseError::V1TooLong));
        // A CR as the 107th byte: its LF would be the 108th.
        let late_cr = line(92) + "\r";
        assert_eq!(parse(late_cr.as_bytes()), Err(ParseError::V1TooLong));
        // A CR as the 106th: the line can still end in time, and does.
        let on_time = line(91) + "\r";
        assert_eq!(parse(on_time.as_bytes()), Ok(None));
        assert_eq!(parsed((on_time + "\n").as_bytes()), (Addresses::Local, 107));
        // A long TCP6 line (two IPv4-tailed addresses) goes over too.
        let a = "1111:2222:3333:4444:5555:6666:255.255.255.255";
        let tcp6 = format!("PROXY TCP6 {a} {a} 65535 65535\r\n");
        assert_eq!(refused(tcp6.as_bytes()), ParseError::V1TooLong);
    }

    #[test]
    fn errors_come_as_soon_as_the_bytes_cannot_be_a_header() {
        use ParseError::*;
        let cases: &[(&[u8], ParseError)] = &[
            (b"G", NotProxyProtocol),
            (b"\x16\x03\x01", NotProxyProtocol), // a TLS hello
            (b"PROXX", NotProxyProtocol),
            (b"\r\n\r\n\0\r\nQUIX", NotProxyProtocol),
            (b"\r\n\r\n\x01", NotProxyProtocol),
            (b"PROXY X", V1Protocol("X".into())),
            (b"PROXY TCP5", V1Protocol("TCP5".into())),
            (b"PROXY  ", V1Spacing),
            (b"PROXY TCP4 1.2.3.4  ", V1Spacing),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 ", count_five()),
            (b"PROXY TCP4 :", address("TCP4", ":")),
            (b"PROXY TCP4 1.2.3.4.", address("TCP4", "1.2.3.4.")),
            (b"PROXY TCP4 256", address("TCP4", "256")),
            (b"PROXY TCP4 01", address("TCP4", "01")),
            (b"PROXY TCP4 1.2.3 ", address("TCP4", "1.2.3")),
            (b"PROXY TCP6 g", address("TCP6", "g")),
            (b"PROXY TCP6 1:::", address("TCP6", "1:::")),
            (b"PROXY TCP6 ::1::", address("TCP6", "::1::")),
            (b"PROXY TCP6 12345", address("TCP6", "12345")),
            (b"PROXY TCP6 1.2.3.4:", address("TCP6", "1.2.3.4:")),
            (b"PROXY TCP6 ::1%", address("TCP6", "::1%")),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 00", port("00")),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536", port("65536")),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 +", port("+")),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", V1LoneLf),
            (b"PROXY UNKNOWN\n", V1LoneLf),
            (b"PROXY TCP4\rx", V1LoneCr),
        ];
        for (bytes, error) in cases {
            let shown = bytes.escape_ascii().to_string();
            assert_eq!(refused(bytes), *error, "{shown:?}");
        }
        // "0" is a port, so far: it waits.
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 0"), Ok(None));
        // v2: each fixed byte is judged on arrival, the length at 16 bytes.
        let start = |rest: &[u8]| [&V2_SIGNATURE[..], rest].concat();
        assert_eq!(refused(&start(&[0x31])), V2Version(3));
        assert_eq!(refused(&start(&[0x22])), V2Command(2));
        assert_eq!(refused(&start(&[0x21, 0x12])), V2Datagram(0x12));
        assert_eq!(refused(&start(&[0x21, 0x11, 0x02, 0x25])), V2TooLong(549));
        let header = start(&[0x21, 0x21, 0x00, 0x0c]);
        assert_eq!(refused(&header), short(12, "AF_INET6"));
        // ...but the block only once it is all there.
        assert_eq!(parse(&start(&[0x21, 0x11, 0x00, 0x0f, 1, 2, 3])), Ok(None));
    }

    fn short(length: usize, family: &'static str) -> ParseError {
        ParseError::V2ShortAddresses { length, family }
    }

    fn count_five() -> ParseError {
        ParseError::V1FieldCount {
            protocol: "TCP4",
            found: 5,
        }
    }

    #[test]
    fn malformed_v2_headers() {
        use ParseError::*;
        let mut bad_signature = v2(0x21, 0x11, &BLOCK_V4);
        if let Some(byte) = bad_signature.get_mut(11) {
            *byte = b'X';
        }
        let mut trailing_tlv_header = BLOCK_V4.to_vec();
        trailing_tlv_header.extend_from_slice(&[0x01, 0x00]); // a TLV cut after 2 bytes
        let mut overrunning_tlv = BLOCK_V4.to_vec();
        overrunning_tlv.extend(tlv(0x02, b"12345"));
        overrunning_tlv.extend_from_slice(&[0x02, 0x00, 0x09, b'a']); // says 9, has 1
        let mut crc_of_three = BLOCK_V4.to_vec();
        crc_of_three.extend(tlv(TLV_CRC32C, &[0, 0, 0]));
        let cases: Vec<(Vec<u8>, ParseError)> = vec![
            (bad_signature, NotProxyProtocol),
            (v2(0x11, 0x11, &BLOCK_V4), V2Version(1)),
            (v2(0x31, 0x11, &BLOCK_V4), V2Version(3)),
            (v2(0x01, 0x11, &BLOCK_V4), V2Version(0)),
            (v2(0xf1, 0x11, &BLOCK_V4), V2Version(15)),
            (v2(0x22, 0x11, &BLOCK_V4), V2Command(2)),
            (v2(0x2f, 0x11, &BLOCK_V4), V2Command(15)),
            (v2(0x21, 0x12, &BLOCK_V4), V2Datagram(0x12)),
            (v2(0x21, 0x22, &block_v6()), V2Datagram(0x22)),
            (v2(0x21, 0x02, &[]), V2Datagram(0x02)),
            (v2(0x21, 0x31, &[0; 216]), V2Unix(0x31)),
            (v2(0x21, 0x32, &[0; 216]), V2Unix(0x32)),
            (v2(0x21, 0x30, &[]), V2Unix(0x30)),
            (v2(0x21, 0x41, &BLOCK_V4), V2Family(0x41)),
            (v2(0x21, 0x13, &BLOCK_V4), V2Family(0x13)),
            (v2(0x20, 0xff, &[]), V2Family(0xff)),
            (v2(0x21, 0x11, &[0; 11]), short(11, "AF_INET")),
            (v2(0x21, 0x21, &BLOCK_V4), short(12, "AF_INET6")),
            (v2(0x21, 0x11, &[]), short(0, "AF_INET")),
            (v2(0x21, 0x11, &[0; V2_MAX_LENGTH + 1]), V2TooLong(549)),
            (v2(0x20, 0x00, &[0; V2_MAX_LENGTH + 1]), V2TooLong(549)),
            (v2(0x21, 0x11, &trailing_tlv_header), V2Tlv { offset: 28 }),
            (v2(0x21, 0x11, &overrunning_tlv), V2Tlv { offset: 36 }),
            (v2(0x21, 0x11, &crc_of_three), V2ChecksumLength(3)),
            (with_checksum(true), V2Checksum),
        ];
        for (bytes, error) in cases {
            assert_eq!(refused(&bytes), error, "{:02x?}", bytes);
        }
        // The length field itself, at its largest.
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(refused(&huge), V2TooLong(65535));
    }

    #[test]
    fn every_strict_prefix_of_a_valid_header_waits_for_more() {
        let mut headers = vec![
            v2(0x21, 0x11, &BLOCK_V4),
            v2(0x21, 0x21, &block_v6()),
            v2(0x20, 0x00, &[]),
            v2(0x20, 0x11, &BLOCK_V4),
            v2(0x21, 0x00, &[9; 40]),
            with_checksum(false),
            b"PROXY UNKNOWN\r\n".to_vec(),
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n".to_vec(),
            b"PROXY TCP6 2001:db8::1 ::ffff:10.0.0.1 0 65535\r\n".to_vec(),
        ];
        let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        headers.push(format!("PROXY UNKNOWN {f} {f} 65535 65535\r\n").into_bytes());
        for header in &headers {
            assert!(parse(header).is_ok_and(|done| done.is_some()));
            assert_prefixes_wait(header);
        }
    }

    #[test]
    fn errors_read_as_one_sentence() {
        let cases = [
            (ParseError::NotProxyProtocol, "not a PROXY protocol header"),
            (ParseError::V1TooLong, "v1 line longer than 107 bytes"),
            (
                ParseError::V2Version(3),
                "v2 version 3 unsupported (only 2 is defined)",
            ),
            (
                ParseError::V2ShortAddresses {
                    length: 12,
                    family: "AF_INET6",
                },
                "v2 address block of 12 bytes too short for AF_INET6",
            ),
            (
                address("TCP4", "::1"),
                "v1 address \"::1\" is not an IPv4 address, as TCP4 requires",
            ),
            (
                port("65536"),
                "v1 port \"65536\" is not a decimal number 0-65535 without leading zeros",
            ),
            (
                ParseError::V2Datagram(0x12),
                "v2 header announces UDP (byte 0x12), but this proxy relays TCP",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
        // The peer's bytes come out escaped: no CR, LF or NUL in a log line.
        let error = refused(b"PROXY T\0CP\r\n");
        assert_eq!(error, ParseError::V1Protocol("T\\x00CP".into()));
    }

    // ---- property tests ----

    fn ipv6() -> impl Strategy<Value = Ipv6Addr> {
        prop_oneof![
            any::<[u8; 16]>().prop_map(Ipv6Addr::from),
            any::<[u8; 4]>().prop_map(|a| Ipv4Addr::from(a).to_ipv6_mapped()),
            Just(Ipv6Addr::UNSPECIFIED),
            Just(Ipv6Addr::LOCALHOST),
            Just(Ipv6Addr::from([0xff; 16])),
            // Few groups, many zeros: every place for the "::".
            proptest::collection::vec(prop_oneof![Just(0u16), any::<u16>()], 8).prop_map(|g| {
                let mut groups = [0u16; 8];
                groups
                    .iter_mut()
                    .zip(g)
                    .for_each(|(slot, value)| *slot = value);
                Ipv6Addr::from(groups)
            }),
        ]
    }

    fn socket_address() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
            (ipv6(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip.into(), port)),
        ]
    }

    /// What parse gives for an encoded pair: the same, or, for a mixed
    /// pair, the IPv4 one mapped into IPv6.
    fn expected(source: SocketAddr, destination: SocketAddr) -> Addresses {
        match same_family(source, destination) {
            Pair::V4(s, d) => proxied(s.into(), d.into()),
            Pair::V6(s, d) => proxied(s.into(), d.into()),
        }
    }

    /// A valid header of any kind, and what it says.
    fn valid_header() -> impl Strategy<Value = (Vec<u8>, Addresses)> {
        let encoded = (
            prop_oneof![Just(Version::V1), Just(Version::V2)],
            socket_address(),
            socket_address(),
        )
            .prop_map(|(version, s, d)| (encode(version, s, d), expected(s, d)));
        let tlvs = proptest::collection::vec(
            (
                (0x04u8..=0xff),
                proptest::collection::vec(any::<u8>(), 0..40),
            ),
            0..6,
        )
        .prop_map(|tlvs| {
            tlvs.into_iter()
                .flat_map(|(kind, value)| tlv(kind, &value))
                .collect::<Vec<u8>>()
        });
        let with_tlvs = (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u16>(),
            any::<u16>(),
            tlvs,
        )
            .prop_map(|(s, d, sp, dp, tlvs)| {
                let mut block = [s, d].concat();
                block.extend_from_slice(&sp.to_be_bytes());
                block.extend_from_slice(&dp.to_be_bytes());
                block.extend(tlvs);
                let addresses = proxied(SocketAddr::from((s, sp)), SocketAddr::from((d, dp)));
                (v2(0x21, 0x11, &block), addresses)
            });
        let local = (
            prop_oneof![Just(0x20u8), Just(0x21)],
            proptest::collection::vec(any::<u8>(), 0..100),
        )
            .prop_map(|(command, block)| (v2(command, 0x00, &block), Addresses::Local));
        let unknown = "[ -~]{0,91}".prop_map(|text| {
            let line = format!("PROXY UNKNOWN {text}\r\n").into_bytes();
            (line, Addresses::Local)
        });
        prop_oneof![4 => encoded, 2 => with_tlvs, 1 => local, 1 => unknown]
    }

    /// Bytes that go deep: random, or random after a real start.
    fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
        let random = proptest::collection::vec(any::<u8>(), 0..700);
        let after = |start: &'static [u8]| {
            proptest::collection::vec(any::<u8>(), 0..700)
                .prop_map(move |rest| [start, &rest[..]].concat())
        };
        let v1_alphabet = proptest::collection::vec(
            proptest::sample::select(b"0123456789abcdefABCDEF.: \r\n+-%".to_vec()),
            0..120,
        );
        let v1_like = (
            proptest::sample::select(vec![&b"PROXY TCP4 "[..], b"PROXY TCP6 ", b"PROXY UNKNOWN "]),
            v1_alphabet,
        )
            .prop_map(|(start, rest)| [start, &rest[..]].concat());
        let v2_like = (
            any::<[u8; 4]>(),
            proptest::collection::vec(any::<u8>(), 0..700),
        )
            .prop_map(|(fixed, rest)| [&V2_SIGNATURE[..], &fixed[..], &rest[..]].concat());
        let v2_sane = (
            proptest::sample::select(vec![0x20u8, 0x21]),
            proptest::sample::select(vec![0x00u8, 0x11, 0x21]),
            proptest::collection::vec(any::<u8>(), 0..120),
        )
            .prop_map(|(command, family, block)| v2(command, family, &block));
        prop_oneof![
            random,
            after(b"PROXY "),
            after(&V2_SIGNATURE),
            v1_like,
            v2_like,
            v2_sane
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic_nor_overrun(bytes in hostile_bytes()) {
            if let Ok(Some((_, used))) = parse(&bytes) {
                prop_assert!(used <= bytes.len());
                prop_assert!(used <= MAX_HEADER);
                // What was accepted is accepted alone, and is not a prefix of itself.
                let header = bytes.get(..used).unwrap_or_default();
                prop_assert_eq!(parse(header).map(|done| done.map(|(_, n)| n)), Ok(Some(used)));
            }
        }

        #[test]
        fn a_valid_header_then_payload_parses_to_itself(
            (header, addresses) in valid_header(),
            payload in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            prop_assert!(header.len() <= MAX_HEADER);
            let bytes = [&header[..], &payload[..]].concat();
            prop_assert_eq!(parse(&bytes), Ok(Some((addresses, header.len()))));
        }

        #[test]
        fn every_prefix_of_a_valid_header_is_incomplete((header, _) in valid_header()) {
            for cut in 0..header.len() {
                let prefix = header.get(..cut).unwrap_or_default();
                prop_assert_eq!(parse(prefix), Ok(None), "cut at {}", cut);
            }
        }
    }

    // ---- read_header over real sockets ----

    type HeaderRead = io::Result<(Addresses, Vec<u8>)>;

    /// A listener on the runtime, a std client on a thread doing `client`,
    /// and `read_header` on the accepted side. The client is handed the
    /// connection; the server's side closes when `read_header` is done
    /// and `after` (given the server's stream) has run.
    fn over_loopback<C, A>(limit: Duration, client: C, after: A) -> (HeaderRead, Duration, Vec<u8>)
    where
        C: FnOnce(std::net::TcpStream) + Send + 'static,
        A: AsyncFnOnce(&TcpStream) -> Vec<u8>,
    {
        let rt = runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let listener = runtime::net::TcpListener::bind(v4([127, 0, 0, 1], 0)).expect("bind");
            let at = listener.local_addr().expect("local address");
            let thread = std::thread::spawn(move || {
                client(std::net::TcpStream::connect(at).expect("connect"));
            });
            let (stream, _) = listener.accept().await.expect("accept");
            let started = Instant::now();
            let result = read_header(&stream, limit).await;
            let took = started.elapsed();
            let rest = after(&stream).await;
            drop(stream);
            thread.join().expect("the client thread");
            (result, took, rest)
        })
    }

    /// Reads the server side to the end.
    async fn read_to_end(stream: &TcpStream) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = [0; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return all,
                Ok(n) => all.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        }
    }

    async fn nothing(_: &TcpStream) -> Vec<u8> {
        Vec::new()
    }

    /// What a client does after writing: wait until the proxy closes.
    fn wait_for_close(mut stream: std::net::TcpStream) {
        let _ = stream.read(&mut [0; 64]);
    }

    const PAYLOAD: &[u8] = b"GET / HTTP/1.1\r\nHost: example\r\n\r\n";

    #[test]
    fn read_header_with_payload_in_one_write() {
        let (source, destination) = (v4([203, 0, 113, 9], 51000), v4([10, 0, 0, 1], 443));
        for version in [Version::V1, Version::V2] {
            let bytes = [encode(version, source, destination), PAYLOAD.to_vec()].concat();
            let client = move |mut stream: std::net::TcpStream| {
                stream.write_all(&bytes).expect("write");
                stream.shutdown(Shutdown::Write).expect("shutdown");
                wait_for_close(stream);
            };
            let (result, _, rest) = over_loopback(Duration::from_secs(5), client, read_to_end);
            let (addresses, early) = result.expect("a header");
            assert_eq!(addresses, proxied(source, destination));
            // Whatever came with the header is handed back, and the rest
            // follows on the socket: nothing lost, nothing doubled.
            assert_eq!([early, rest].concat(), PAYLOAD);
        }
    }

    #[test]
    fn read_header_split_byte_by_byte() {
        let (source, destination) = (v6("2001:db8::5", 1), v6("2001:db8::6", 2));
        for version in [Version::V1, Version::V2] {
            let header = encode(version, source, destination);
            let client = move |mut stream: std::net::TcpStream| {
                stream.set_nodelay(true).expect("nodelay");
                for byte in &header {
                    stream.write_all(&[*byte]).expect("write");
                    std::thread::sleep(Duration::from_millis(1));
                }
                stream.write_all(b"after").expect("write");
                stream.shutdown(Shutdown::Write).expect("shutdown");
                wait_for_close(stream);
            };
            let (result, _, rest) = over_loopback(Duration::from_secs(5), client, read_to_end);
            let (addresses, early) = result.expect("a header");
            assert_eq!(addresses, proxied(source, destination));
            assert_eq!([early, rest].concat(), b"after");
        }
    }

    #[test]
    fn a_silent_client_times_out() {
        let limit = Duration::from_millis(200);
        let (result, took, _) = over_loopback(limit, wait_for_close, nothing);
        let error = result.expect_err("no header");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
        // Half a header is no better than none.
        let half = |mut stream: std::net::TcpStream| {
            stream.write_all(b"PROXY TCP4 1.2.").expect("write");
            wait_for_close(stream);
        };
        let (result, took, _) = over_loopback(limit, half, nothing);
        assert_eq!(result.expect_err("half").kind(), io::ErrorKind::TimedOut);
        assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn a_client_closing_mid_header_is_an_unexpected_eof() {
        let header = encode(Version::V2, v4([1, 2, 3, 4], 5), v4([6, 7, 8, 9], 10));
        let client = move |mut stream: std::net::TcpStream| {
            stream
                .write_all(header.get(..20).expect("20 bytes"))
                .expect("write");
        };
        let (result, _, _) = over_loopback(Duration::from_secs(5), client, nothing);
        let error = result.expect_err("cut short");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(error.to_string().contains("after 20 bytes"), "{error}");
    }

    #[test]
    fn garbage_is_invalid_data_at_once() {
        let client = |mut stream: std::net::TcpStream| {
            stream.write_all(PAYLOAD).expect("write");
            wait_for_close(stream);
        };
        let (result, took, _) = over_loopback(Duration::from_secs(10), client, nothing);
        let error = result.expect_err("garbage");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(error.to_string(), "not a PROXY protocol header");
        let inner = error.get_ref().and_then(|e| e.downcast_ref::<ParseError>());
        assert_eq!(inner, Some(&ParseError::NotProxyProtocol));
        assert!(took < Duration::from_secs(2), "{took:?}");
        // A v1 line that never ends is refused at byte 106, not at the limit.
        let endless = |mut stream: std::net::TcpStream| {
            let _ = stream.write_all(format!("PROXY UNKNOWN {}", "x".repeat(200)).as_bytes());
            wait_for_close(stream);
        };
        let (result, took, _) = over_loopback(Duration::from_secs(10), endless, nothing);
        let error = result.expect_err("too long");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(error.to_string(), "v1 line longer than 107 bytes");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}
