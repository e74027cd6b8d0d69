//! # policy/check: what a health check says to a server, and what it expects
//!
//! A plain `check` only connects. The checks here go on talking, each in
//! its protocol, on a connection of their own, and judge the answer: the
//! difference between "the port is open" and "the service works" (a Redis
//! that answers `-LOADING`, a PostgreSQL that is shutting down, an HTTP
//! service answering 503 all accept connections).
//!
//! Every check is a sans-I/O state machine (a [`Dialogue`]): it says what to
//! send and judges the bytes it is given, and the health-check thread
//! (`epoll/probe.rs`) moves the bytes and keeps the time. So each file
//! below is tested with plain byte strings, and the thread's I/O with real
//! servers.
//!
//! | file | HAProxy's option | what it checks |
//! |---|---|---|
//! | [`dialogue`] | | the vocabulary: [`Dialogue`], [`Next`], [`Inbox`], [`Verdict`], [`Status`] |
//! | [`script`] | `option tcp-check`, `tcp-check ...` | steps: connect, send, expect string / regex / binary |
//! | [`regex`] | (`rstring`, `rbinary`) | a linear-time regular-expression subset |
//! | [`redis`] | `option redis-check` | `PING` answered `+PONG`; optionally the role |
//! | [`pgsql`] | `option pgsql-check` | a StartupMessage answered by an Authentication request |
//! | [`mysql`] | `option mysql-check` | the handshake; optionally a login, then `COM_QUIT` |
//! | [`http`] | `option httpchk`, `http-check ...` | a request, its status and body |
//! | [`smtp`] | `option smtpchk` | the 220 greeting and the answer to HELO / EHLO |
//! | [`agent`] | `agent-check` | a line from an agent that steers the server |
//!
//! May import: [`crate::log`] and its siblings in `policy/`. The settings
//! build a [`Probe`] from the configuration; the checker thread runs it.

pub mod agent;
pub mod dialogue;
pub mod http;
pub mod mysql;
pub mod pgsql;
pub mod redis;
pub mod regex;
pub mod script;
pub mod smtp;

pub use dialogue::{Dialogue, Inbox, Next, Status, Verdict};

use std::net::SocketAddr;

/// What a server's active check does once connected: the option of its
/// frontend or group (`option redis-check`...), or nothing (`Connect`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Probe {
    /// Connect, and close: the plain `check`.
    #[default]
    Connect,
    /// `option tcp-check` and its steps.
    Script(script::Script),
    /// `option redis-check`.
    Redis(redis::RedisCheck),
    /// `option pgsql-check`.
    Pgsql(pgsql::PgsqlCheck),
    /// `option mysql-check`.
    Mysql(mysql::MysqlCheck),
    /// `option httpchk`.
    Http(http::HttpCheck),
    /// `option smtpchk`.
    Smtp(smtp::SmtpCheck),
}

impl Probe {
    /// Its HAProxy name, for the log and the dump: `tcp-check`,
    /// `redis-check`... (`connect` for the plain check).
    pub fn name(&self) -> &'static str {
        match self {
            Probe::Connect => "connect",
            Probe::Script(_) => "tcp-check",
            Probe::Redis(_) => "redis-check",
            Probe::Pgsql(_) => "pgsql-check",
            Probe::Mysql(_) => "mysql-check",
            Probe::Http(_) => "httpchk",
            Probe::Smtp(_) => "smtpchk",
        }
    }

    /// A check of the server at `server`, from its first step.
    pub fn start(&self, server: SocketAddr) -> Box<dyn Dialogue + '_> {
        match self {
            Probe::Connect => Box::new(Connected),
            Probe::Script(script) => script.start(),
            Probe::Redis(redis) => redis.start(),
            Probe::Pgsql(pgsql) => pgsql.start(),
            Probe::Mysql(mysql) => mysql.start(),
            Probe::Http(http) => http.start(server.to_string()),
            Probe::Smtp(smtp) => smtp.start(),
        }
    }
}

/// The plain check: connected is all it asks.
struct Connected;

impl Dialogue for Connected {
    fn next(&mut self, _: &mut Inbox) -> Next {
        Next::done(Verdict {
            status: Status::L4Ok,
            detail: "connected".to_string(),
        })
    }

    fn awaiting(&self) -> String {
        "the connect".to_string()
    }
}
