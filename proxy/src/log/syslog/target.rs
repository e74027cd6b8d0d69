//! Where syslog messages go, written as HAProxy's `log` line writes it: an
//! address (UDP), `tcp@ADDR`, or the path of a Unix datagram socket.
//!
//! ```text
//!   127.0.0.1:514  127.0.0.1  [::1]:514  ::1   UDP (port 514 when none is given)
//!   udp@ADDR  udp4@ADDR  udp6@ADDR            UDP, said explicitly
//!   tcp@ADDR  tcp4@ADDR  tcp6@ADDR            TCP, octet-counted frames (RFC 6587)
//!   /dev/log  unix@PATH  uxdg@PATH            a Unix datagram socket (the local syslog daemon's)
//! ```
//!
//! Host names are not resolved (as everywhere in the configuration).
//! HAProxy's other targets are refused with what to use instead: `stdout`,
//! `stderr` and `fd@N` (the access log has `access-log stderr`, and the
//! daemon's lines always go to stderr), `ring@` and `backend@` (no rings or
//! log backends here), `uxst@` (Unix stream sockets: use a datagram
//! socket or TCP) and `abns@` (abstract sockets: use a path).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// The standard syslog port, for an address written without one.
pub const SYSLOG_PORT: u16 = 514;

/// Where a syslog destination is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A UDP address: one datagram per message.
    Udp(SocketAddr),
    /// A TCP address: one connection, messages framed by their length.
    Tcp(SocketAddr),
    /// A Unix datagram socket, by its path: one datagram per message.
    Unix(PathBuf),
}

/// The families of the prefixes that name one (`udp4@` takes IPv4 only).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Any,
    V4,
    V6,
}

/// Prefixes of an IP target: HAProxy's, with the transport and family each
/// means.
const IP_PREFIXES: [(&str, bool, Family); 8] = [
    ("udp@", false, Family::Any),
    ("udp4@", false, Family::V4),
    ("udp6@", false, Family::V6),
    ("ipv4@", false, Family::V4),
    ("ipv6@", false, Family::V6),
    ("tcp@", true, Family::Any),
    ("tcp4@", true, Family::V4),
    ("tcp6@", true, Family::V6),
];

/// What to write instead of one of HAProxy's targets that has no meaning
/// here.
const REFUSED: [(&str, &str); 7] = [
    (
        "stdout",
        "the access log goes to stderr with 'access-log stderr', and the daemon's lines always do",
    ),
    (
        "stderr",
        "the access log goes to stderr with 'access-log stderr', and the daemon's lines always do",
    ),
    (
        "fd@",
        "the access log goes to stderr with 'access-log stderr', or to a file with 'access-log PATH'",
    ),
    (
        "ring@",
        "there are no rings here; send to a syslog daemon (tcp@ADDR keeps lines in order)",
    ),
    (
        "backend@",
        "there are no log backends here; send to one syslog daemon, which can forward",
    ),
    (
        "uxst@",
        "Unix stream sockets are not supported; use the datagram socket (a path, like /dev/log) or tcp@ADDR",
    ),
    (
        "abns@",
        "abstract Unix sockets are not supported; use a socket's path",
    ),
];

impl Target {
    /// Reads a `log` line's target (module docs); the error says what was
    /// wrong and what to write.
    pub fn parse(word: &str) -> Result<Target, String> {
        for (prefix, why) in REFUSED {
            if word == prefix || (prefix.ends_with('@') && word.starts_with(prefix)) {
                return Err(format!("'{word}' is HAProxy's, not ours: {why}"));
            }
        }
        if word.starts_with('/') {
            return Ok(Target::Unix(PathBuf::from(word)));
        }
        for prefix in ["unix@", "uxdg@"] {
            if let Some(path) = word.strip_prefix(prefix) {
                if path.is_empty() {
                    return Err(format!("'{word}' needs a socket path after '{prefix}'"));
                }
                return Ok(Target::Unix(PathBuf::from(path)));
            }
        }
        for (prefix, tcp, family) in IP_PREFIXES {
            if let Some(rest) = word.strip_prefix(prefix) {
                let addr = ip_target(rest, family)?;
                return Ok(if tcp {
                    Target::Tcp(addr)
                } else {
                    Target::Udp(addr)
                });
            }
        }
        ip_target(word, Family::Any).map(Target::Udp)
    }
}

/// `127.0.0.1:514`, `127.0.0.1`, `[::1]:514`, `[::1]` or `::1` (no port:
/// 514), of `family`.
fn ip_target(text: &str, family: Family) -> Result<SocketAddr, String> {
    let addr = text.parse::<SocketAddr>().ok().or_else(|| {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        bare.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, SYSLOG_PORT))
    });
    let Some(addr) = addr else {
        return Err(format!(
            "'{text}' is not a syslog target; write an IP address with an optional port \
             (127.0.0.1:514, [::1]:514: UDP), tcp@ADDR, or a Unix socket's path (/dev/log); \
             host names are not resolved"
        ));
    };
    if addr.port() == 0 {
        return Err(format!(
            "'{text}': port 0 is nowhere to send to; use 514 or the server's port"
        ));
    }
    match (family, addr) {
        (Family::V4, SocketAddr::V6(_)) => {
            Err(format!("'{text}' is IPv6, after a prefix for IPv4"))
        }
        (Family::V6, SocketAddr::V4(_)) => {
            Err(format!("'{text}' is IPv4, after a prefix for IPv6"))
        }
        _ => Ok(addr),
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Udp(addr) => write!(f, "udp@{addr}"),
            Target::Tcp(addr) => write!(f, "tcp@{addr}"),
            Target::Unix(path) => write!(f, "unix@{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(word: &str) -> String {
        match Target::parse(word) {
            Ok(target) => target.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn haproxys_forms_name_the_three_transports() {
        for (word, target) in [
            ("127.0.0.1:514", "udp@127.0.0.1:514"),
            ("127.0.0.1", "udp@127.0.0.1:514"),
            ("[::1]:1514", "udp@[::1]:1514"),
            ("[::1]", "udp@[::1]:514"),
            ("::1", "udp@[::1]:514"),
            ("udp@127.0.0.2:5140", "udp@127.0.0.2:5140"),
            ("udp4@127.0.0.1", "udp@127.0.0.1:514"),
            ("ipv6@[::1]:9", "udp@[::1]:9"),
            ("tcp@127.0.0.1:601", "tcp@127.0.0.1:601"),
            ("tcp6@::1", "tcp@[::1]:514"),
            ("/dev/log", "unix@/dev/log"),
            ("unix@/run/x.sock", "unix@/run/x.sock"),
            ("uxdg@relative.sock", "unix@relative.sock"),
        ] {
            assert_eq!(parsed(word), target, "{word}");
        }
    }

    #[test]
    fn what_cannot_be_a_target_says_what_to_write() {
        for (word, says) in [
            ("stderr", "access-log stderr"),
            ("stdout", "access-log stderr"),
            ("fd@2", "access-log"),
            ("ring@buf", "no rings"),
            ("uxst@/x", "datagram socket"),
            ("logs.example:514", "host names are not resolved"),
            ("tcp@", "not a syslog target"),
            ("unix@", "needs a socket path"),
            ("127.0.0.1:0", "port 0"),
            ("udp4@[::1]:514", "is IPv6"),
            ("tcp6@127.0.0.1", "is IPv4"),
        ] {
            let got = parsed(word);
            assert!(
                got.starts_with("error: ") && got.contains(says),
                "{word}: {got}"
            );
        }
    }
}
