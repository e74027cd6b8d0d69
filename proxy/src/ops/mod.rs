//! # ops: what an operator sees and does
//!
//! Everything that faces the person running the proxy rather than its
//! clients: one line per connection, the numbers a scrape reads, the admin
//! endpoint that serves them, and the signals that stop or reload it.
//!
//! | file | what it holds |
//! |---|---|
//! | [`access_log`] | termination codes, one line (tcplog, JSON or the operator's `log-format`), and where lines go (stderr, a file, syslog) |
//! | [`metrics`] | per-worker counters, the Prometheus exposition, the process's figures |
//! | [`admin`] | `GET /metrics` and `GET /health`, over just enough HTTP/1.1, that junk cannot hold; the actions on servers, over HTTP with a token or the admin socket |
//! | [`server_state`] | every server's admin state and weight as lines: `show servers state`, the `server-state-file`, an upgrade's |
//! | [`shutdown`] | SIGTERM and SIGINT drain then exit; the signals blocked in every thread |
//! | [`privileges`] | `user` and `group`: root dropped once the listeners are bound |
//! | [`upgrade`] | listeners and established connections handed to a new process over a Unix socket, SIGUSR2 |
//! | [`supervise`] | the proxy as PID 1: a parent that stays, so that an upgrade does not end the namespace |
//!
//! May import: [`crate::log`], [`crate::policy`] (a backend's health for the
//! metrics, the count of open connections a graceful stop waits on) and
//! [`crate::conn`] (accept errors, a relay's ending for its termination
//! code). The settings name the access log's format from here.

pub mod access_log;
pub mod admin;
pub mod metrics;
pub mod privileges;
pub mod server_state;
pub mod shutdown;
pub mod supervise;
pub mod upgrade;
