//! The timeouts of one connection, from its first byte to its close: one
//! type from the settings (a file's `timeout KIND DURATION` lines, or the
//! command line's flags) down to the relay machine that enforces them.
//!
//! ```text
//!   accepted ─▶ PROXY header, ClientHello ─▶ waiting for a backend ─▶ connecting ─▶ relaying ─▶ half-closed
//!               client_hs (each)             queue                    connect       idle()      client_fin / server_fin
//! ```
//!
//! [`Timeouts::idle`] and the two fin limits are what the relay machine
//! (`conn/machine.rs`) turns into a deadline, phase by phase; `connect`
//! bounds its connecting phase. `client_hs` and `queue` bound the epoll
//! mode's steps before the relay.

use std::time::Duration;

/// `timeout KIND 0`: no timeout, as HAProxy reads a zero. Held as thirty
/// years, the longest wait the runtime's timers hold (`runtime/src/time.rs`
/// says the same of "never"): no deadline computed from it overflows, and
/// no connection lives that long.
pub const NO_TIMEOUT: Duration = Duration::from_secs(86_400 * 365 * 30);

/// A connection's timeouts (`timeout KIND DURATION`, HAProxy's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `timeout connect`: give up connecting to a backend (default 5s).
    pub connect: Duration,
    /// `timeout client`: the client side silent this long (default 10m).
    pub client: Duration,
    /// `timeout server`: the backend side silent this long (default 10m).
    pub server: Duration,
    /// `timeout client-fin`: the client side silent this long once one
    /// direction is shut, e.g. after the backend's FIN (default 30s).
    pub client_fin: Duration,
    /// `timeout server-fin`: the backend side silent this long once one
    /// direction is shut, e.g. after the client's FIN (default 30s).
    pub server_fin: Duration,
    /// `timeout tunnel`: once connected, replaces `client` and `server`
    /// (HAProxy's meaning; default: unset, so those two apply).
    pub tunnel: Option<Duration>,
    /// `timeout queue`: how long a client may wait for a backend below its
    /// `maxconn` (default: unset, meaning `timeout connect`, as HAProxy).
    pub queue: Option<Duration>,
    /// `timeout client-hs`: how long a client may take to send its PROXY
    /// header (`accept-proxy`), and then its TLS ClientHello (a frontend
    /// with `use-group` rules), each (default 5s: a real client sends both
    /// with its first packets, and a longer wait only holds places for
    /// clients that say nothing).
    pub client_hs: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            client: Duration::from_secs(600),
            server: Duration::from_secs(600),
            client_fin: Duration::from_secs(30),
            server_fin: Duration::from_secs(30),
            tunnel: None,
            queue: None,
            client_hs: Duration::from_secs(5),
        }
    }
}

impl Timeouts {
    /// The idle limit of an established connection: `tunnel` if set, else
    /// the shorter of `client` and `server` (a silent tunnel is silent on
    /// both sides, so the first of the two to expire ends it).
    pub fn idle(&self) -> Duration {
        self.tunnel.unwrap_or(self.client.min(self.server))
    }

    /// How long a client may wait for a backend slot.
    pub fn queue(&self) -> Duration {
        self.queue.unwrap_or(self.connect)
    }

    /// Sets `client` and `server` together: the command line's one idle
    /// limit (`--idle-timeout`).
    pub fn set_idle(&mut self, limit: Duration) {
        (self.client, self.server) = (limit, limit);
    }

    /// Sets `client_fin` and `server_fin` together: the command line's one
    /// half-closed limit (`--fin-timeout`).
    pub fn set_fin(&mut self, limit: Duration) {
        (self.client_fin, self.server_fin) = (limit, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_is_the_tunnel_or_the_shorter_side() {
        let mut t = Timeouts {
            client: Duration::from_secs(60),
            server: Duration::from_secs(90),
            ..Timeouts::default()
        };
        assert_eq!(t.idle(), Duration::from_secs(60));
        t.tunnel = Some(Duration::from_secs(3600));
        assert_eq!(t.idle(), Duration::from_secs(3600));
        assert_eq!(t.queue(), t.connect, "unset: the connect timeout");
        t.set_idle(Duration::from_secs(7));
        t.set_fin(Duration::from_secs(3));
        assert_eq!(
            (t.client, t.server),
            (Duration::from_secs(7), Duration::from_secs(7))
        );
        assert_eq!(
            (t.client_fin, t.server_fin),
            (Duration::from_secs(3), Duration::from_secs(3))
        );
    }
}
