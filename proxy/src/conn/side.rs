//! Which side of a proxied connection: the client, which connected to us, or
//! the backend, which we connected to. One type for every layer that has to
//! say it: the relays (which socket failed, whose FIN came first), the
//! access log (who stayed silent), the daemon's log lines.

use std::fmt;

/// One end of a relayed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client, which connected to us.
    Client,
    /// The backend (HAProxy's "server"), which we connected to.
    Backend,
}

impl Side {
    /// Both sides, client first.
    pub const BOTH: [Side; 2] = [Side::Client, Side::Backend];

    /// The other end.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Backend,
            Side::Backend => Side::Client,
        }
    }

    /// 0 for the client, 1 for the backend: an index into per-side arrays.
    pub fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Backend => 1,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Client => "client",
            Side::Backend => "backend",
        })
    }
}
