//! A backend's address as written: an IP address and a port, or a host
//! name and a port (`backend db1 db.internal:5432`, HAProxy's `server db1
//! db.internal:5432`, nginx's `server db.internal:5432`), and what a line
//! with a name says to do when the name does not resolve at start
//! (`init-addr`).
//!
//! The address as written is part of a server's identity, with its name:
//! a host name is shown as written (`db.internal:5432`) wherever the
//! server is named, and where it is now is a value of its own
//! (`policy/address.rs`), looked up by `resolve.rs`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::policy::maglev::Key;

/// Where a backend is, as its line says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `127.0.0.1:9001`, `[::1]:9001`: there, for good.
    Ip(SocketAddr),
    /// `db.internal:5432`: wherever the system's resolver says the name is.
    Host {
        /// The host name, as written.
        name: String,
        /// The port.
        port: u16,
    },
}

/// What the errors show as examples of an address.
const EXAMPLES: &str = "like 127.0.0.1:8080, [::1]:8080 or db.example:8080";

/// The longest host name DNS allows (RFC 1035), and the longest label.
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

impl Address {
    /// Reads `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT`; the error says what
    /// is wrong and what to write.
    pub fn parse(text: &str) -> Result<Address, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(Address::Ip(addr));
        }
        let wrong = |why: &str| format!("'{text}' is not an address with a port, {EXAMPLES}{why}");
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(wrong(": it has no port"));
        };
        if host.contains(':') || host.starts_with('[') {
            return Err(wrong(
                " (an IPv6 address goes in brackets, with its port after)",
            ));
        }
        if host.parse::<IpAddr>().is_ok() {
            return Err(wrong(&format!(": bad port '{port}'")));
        }
        if host.chars().all(|c| c.is_ascii_digit() || c == '.') && !host.is_empty() {
            return Err(wrong(&format!(": '{host}' is not an IPv4 address")));
        }
        host_name(host).map_err(|why| wrong(&format!(": {why}")))?;
        match port.parse::<u16>() {
            Ok(port) if port > 0 => Ok(Address::Host {
                name: host.to_string(),
                port,
            }),
            _ => Err(wrong(&format!(": bad port '{port}' (1 to 65535)"))),
        }
    }

    /// The address, for one written as an IP address.
    pub fn ip(&self) -> Option<SocketAddr> {
        match self {
            Address::Ip(addr) => Some(*addr),
            Address::Host { .. } => None,
        }
    }

    /// The host name, for one written with a name.
    pub fn host(&self) -> Option<&str> {
        match self {
            Address::Ip(_) => None,
            Address::Host { name, .. } => Some(name),
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            Address::Ip(addr) => addr.port(),
            Address::Host { port, .. } => *port,
        }
    }

    /// Who it is in a `balance source` table: the address itself, or the
    /// name as written, so that a new answer of the resolver moves no
    /// client.
    pub fn key(&self) -> Key {
        match self {
            Address::Ip(addr) => Key::of_addr(*addr),
            Address::Host { .. } => Key::of_bytes(self.to_string().as_bytes()),
        }
    }
}

/// A host name: dot-separated labels of letters, digits, `-` and `_` (which
/// `/etc/hosts` and many internal zones use), a trailing dot allowed.
fn host_name(host: &str) -> Result<(), String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Err("the host name is empty".into());
    }
    if host.len() > MAX_NAME {
        return Err(format!("a host name has {MAX_NAME} characters at most"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if let Some(c) = name.chars().find(|&c| !allowed(c) && c != '.') {
        return Err(format!(
            "'{c}' in the host name (letters, digits, '-', '_' and '.')"
        ));
    }
    match name
        .split('.')
        .find(|l| l.is_empty() || l.len() > MAX_LABEL)
    {
        Some("") => Err("an empty label in the host name ('..', or a leading '.')".into()),
        Some(_) => Err(format!(
            "a label of the host name is over {MAX_LABEL} characters"
        )),
        None => Ok(()),
    }
}

impl std::str::FromStr for Address {
    type Err = String;

    fn from_str(text: &str) -> Result<Address, String> {
        Address::parse(text)
    }
}

impl From<SocketAddr> for Address {
    fn from(addr: SocketAddr) -> Address {
        Address::Ip(addr)
    }
}

impl fmt::Display for Address {
    /// As written, but an IP address in its one standard form
    /// (`[::1]:9001`), as a backend without a name is named by it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(addr) => write!(f, "{addr}"),
            Address::Host { name, port } => write!(f, "{name}:{port}"),
        }
    }
}

/// `init-addr`: where a backend written with a host name starts when its
/// name does not resolve at start, or at the reload that adds it. A name
/// is always looked up then; this says what to do without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitAddr {
    /// `libc`, the default: the start fails (a reload is refused), as with
    /// HAProxy's default `last,libc` and nginx: a name that does not
    /// resolve is most often a typo, and a proxy that starts without one of
    /// its servers hides it.
    #[default]
    Fail,
    /// `none`: it starts without an address, out of rotation, until its
    /// name resolves.
    Down,
    /// `IP`: it starts at this address (with the line's port) until its
    /// name resolves.
    At(IpAddr),
}

impl InitAddr {
    /// Reads HAProxy's list of methods, tried in order: `libc` (the
    /// resolver now) and `last` (the address it had: here, the one a
    /// running server keeps across a reload) are what this proxy always
    /// does, so only the first `none` or IP address in the list decides.
    pub fn parse(text: &str) -> Result<InitAddr, String> {
        let mut fallback = None;
        for method in text.split(',') {
            let this = match method {
                "libc" | "last" => continue,
                "none" => InitAddr::Down,
                _ => match method.parse::<IpAddr>() {
                    Ok(ip) => InitAddr::At(ip),
                    Err(_) => {
                        return Err(format!(
                            "init-addr: unknown method '{method}'; use libc (the default: the \
                             start fails), none (start out of rotation until the name \
                             resolves), an IP address to start with, or HAProxy's list like \
                             'last,libc,none'"
                        ));
                    }
                },
            };
            fallback.get_or_insert(this);
        }
        Ok(fallback.unwrap_or(InitAddr::Fail))
    }

    /// The address a server with this rule starts at, given its port,
    /// while its name has not resolved.
    pub fn start(self, port: u16) -> Option<SocketAddr> {
        match self {
            InitAddr::At(ip) => Some(SocketAddr::new(ip, port)),
            InitAddr::Fail | InitAddr::Down => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_an_ip_or_a_name_with_a_port() {
        let ip = Address::parse("[::1]:9001").expect("an IPv6 address");
        assert_eq!(
            (ip.ip(), ip.host(), ip.port()),
            ("[::1]:9001".parse().ok(), None, 9001)
        );
        assert_eq!(ip.to_string(), "[::1]:9001");
        for text in [
            "db.internal:5432",
            "localhost:80",
            "db-1_a.example.:1",
            "x:65535",
        ] {
            let host = Address::parse(text).expect(text);
            assert!(host.ip().is_none() && host.host().is_some(), "{text}");
            assert_eq!(host.to_string(), text);
        }
        let host = Address::parse("db.internal:5432").expect("a name");
        assert_eq!((host.host(), host.port()), (Some("db.internal"), 5432));
        assert_eq!(Address::from(ip.ip().unwrap()), ip);
    }

    #[test]
    fn a_bad_address_says_what_is_wrong() {
        for (text, why) in [
            ("localhost", "it has no port"),
            ("127.0.0.1", "it has no port"),
            ("db:", "bad port ''"),
            ("db:0", "bad port '0' (1 to 65535)"),
            ("db:65536", "bad port '65536'"),
            ("db:http", "bad port 'http'"),
            ("127.0.0.1:x", "bad port 'x'"),
            ("10.0.0.300:80", "'10.0.0.300' is not an IPv4 address"),
            ("::1:80", "an IPv6 address goes in brackets"),
            ("[::1:80", "an IPv6 address goes in brackets"),
            (":80", "the host name is empty"),
            ("db..example:80", "an empty label"),
            (".db:80", "an empty label"),
            ("db/1:80", "'/' in the host name"),
            ("dé.example:80", "'é' in the host name"),
        ] {
            let e = Address::parse(text).expect_err(text);
            assert!(
                e.starts_with(&format!("'{text}' is not an address with a port")),
                "{e}"
            );
            assert!(e.contains(why), "{text}: {e}");
        }
        let long = format!("{}:80", "a".repeat(64));
        assert!(Address::parse(&long).unwrap_err().contains("over 63"));
        let longer = format!("{}:80", ["a"; 130].join("."));
        assert!(
            Address::parse(&longer)
                .unwrap_err()
                .contains("253 characters")
        );
    }

    #[test]
    fn a_name_keeps_its_place_in_a_hash_table_whatever_it_resolves_to() {
        let ip: SocketAddr = "10.0.0.1:80".parse().unwrap();
        assert_eq!(Address::Ip(ip).key(), Key::of_addr(ip));
        let one = Address::parse("db.test:80").unwrap();
        let other = Address::parse("db.test:81").unwrap();
        assert_eq!(one.key(), Address::parse("db.test:80").unwrap().key());
        assert_ne!(one.key(), other.key());
    }

    #[test]
    fn init_addr_reads_haproxys_lists() {
        let ip = |text: &str| InitAddr::At(text.parse().unwrap());
        for (text, rule) in [
            ("libc", InitAddr::Fail),
            ("last,libc", InitAddr::Fail),
            ("none", InitAddr::Down),
            ("last,libc,none", InitAddr::Down),
            ("10.0.0.9", ip("10.0.0.9")),
            ("libc,::1,none", ip("::1")),
            ("none,10.0.0.9", InitAddr::Down),
        ] {
            assert_eq!(InitAddr::parse(text), Ok(rule), "{text}");
        }
        assert_eq!(ip("10.0.0.9").start(80), "10.0.0.9:80".parse().ok());
        assert_eq!(InitAddr::Down.start(80), None);
        let e = InitAddr::parse("libc,nope").unwrap_err();
        assert!(e.contains("unknown method 'nope'"), "{e}");
        assert!(InitAddr::parse("").unwrap_err().contains("method ''"));
    }
}
