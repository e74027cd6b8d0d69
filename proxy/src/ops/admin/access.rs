//! Who may use the admin endpoint: who may read its views (an allow list
//! of address ranges, `admin-allow`), and who may act (change a server).
//!
//! ```text
//!   over TCP, from an address outside admin-allow     403 for everything
//!   (admin-allow not given: loopback only, 127.0.0.0/8 and ::1)
//!   over TCP, GET a view (/metrics, /health, ...)     answered
//!   over TCP, an action                               only with Authorization: Bearer TOKEN,
//!                                                     TOKEN the content of admin-token-file
//!   over the admin socket (mode 0600)                 everything: reaching the file is the right
//! ```
//!
//! The token is compared in constant time (every byte looked at, whatever
//! the first difference), so the time an answer takes does not tell how
//! much of a guess was right. Without `admin-token-file`, no HTTP request
//! may act: the socket is the only way. The file's content is read once at
//! start, its trailing newline dropped; a token must be at least 16 bytes.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::Path;

use crate::policy::cidr::Cidr;

/// The shortest token taken: a short one could be guessed.
pub const MIN_TOKEN: usize = 16;

/// Who may read and who may act (module docs).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Who may connect over TCP; empty: loopback only.
    pub allow: Vec<Cidr>,
    /// The token an HTTP action must carry; `None`: no HTTP action.
    pub token: Option<Vec<u8>>,
}

/// Why a request may not do what it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address is outside the allow list.
    Address,
    /// An action without the right token (or with no token configured).
    Token,
}

impl Refused {
    /// The 403's text.
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Address => "forbidden: this address is not in admin-allow\n",
            Refused::Token => {
                "forbidden: an action needs the admin socket, or Authorization: Bearer TOKEN \
                 with the token of admin-token-file\n"
            }
        }
    }
}

impl Access {
    /// May `peer` use the TCP endpoint at all?
    pub fn may_connect(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        match self.allow.is_empty() {
            true => peer.is_loopback(),
            false => self.allow.iter().any(|range| range.contains(peer)),
        }
    }

    /// May a request with this `Authorization` header value act?
    pub fn may_act(&self, authorization: Option<&str>) -> Result<(), Refused> {
        let Some(token) = &self.token else {
            return Err(Refused::Token);
        };
        let given = authorization
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or_default();
        match same(given.as_bytes(), token) {
            true => Ok(()),
            false => Err(Refused::Token),
        }
    }
}

/// An IPv4 address mapped into IPv6 as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// `a == b`, in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut differ = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        differ |= x ^ y;
    }
    differ == 0
}

/// Reads the token of `admin-token-file PATH`: its content without the
/// trailing newline; refused if empty, shorter than [`MIN_TOKEN`], or
/// readable by others than its owner and group.
pub fn read_token(path: &Path) -> io::Result<Vec<u8>> {
    let what = |e: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("admin-token-file {}: {e}", path.display()),
        )
    };
    let bytes = fs::read(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("admin-token-file {}: {e}", path.display()),
        )
    })?;
    let token = bytes.trim_ascii_end();
    if token.len() < MIN_TOKEN {
        return Err(what(format!(
            "the token has {} bytes; use at least {MIN_TOKEN} (head -c 32 /dev/urandom | base64)",
            token.len()
        )));
    }
    if token.iter().any(|b| !b.is_ascii_graphic()) {
        return Err(what(
            "the token has a space or a control byte; use printable characters only".into(),
        ));
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs::metadata(path)?.permissions());
    if mode & 0o004 != 0 {
        return Err(what(format!(
            "readable by every user (mode {:o}); chmod 0600 it",
            mode & 0o777
        )));
    }
    Ok(token.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_without_an_allow_list() {
        let access = Access::default();
        assert!(access.may_connect("127.0.0.1".parse().expect("ip")));
        assert!(access.may_connect("::1".parse().expect("ip")));
        assert!(access.may_connect("::ffff:127.0.0.2".parse().expect("ip")));
        assert!(!access.may_connect("10.0.0.1".parse().expect("ip")));
        let access = Access {
            allow: vec![Cidr::parse("10.0.0.0/8").expect("cidr")],
            token: None,
        };
        assert!(access.may_connect("10.1.2.3".parse().expect("ip")));
        assert!(!access.may_connect("127.0.0.1".parse().expect("ip")));
    }

    #[test]
    fn only_the_exact_token_acts() {
        let none = Access::default();
        assert_eq!(none.may_act(Some("Bearer x")), Err(Refused::Token));
        let access = Access {
            allow: Vec::new(),
            token: Some(b"0123456789abcdef".to_vec()),
        };
        assert_eq!(access.may_act(Some("Bearer 0123456789abcdef")), Ok(()));
        for wrong in [
            None,
            Some(""),
            Some("0123456789abcdef"),
            Some("Bearer 0123456789abcde"),
            Some("Bearer 0123456789abcdefg"),
            Some("Basic 0123456789abcdef"),
            Some("Bearer 0123456789abcdeF"),
        ] {
            assert_eq!(access.may_act(wrong), Err(Refused::Token), "{wrong:?}");
        }
    }
}
