//! # conn: what a proxied connection is made of
//!
//! The pieces every mode's connections use, free of any configuration:
//! the bytes between the two sockets, the header that names the client,
//! what to do when `accept` fails, and the word for which end is which.
//!
//! | file | what it holds |
//! |---|---|
//! | [`machine`] | the relay's contract, once: one connection as a state machine with no I/O |
//! | [`timeouts`] | a connection's timeouts, from the settings to the machine |
//! | [`alarm`] | when a driver (re)arms its timer for the machine's deadline |
//! | [`snapshot`] | a machine as bytes and back, its deadline as time left |
//! | [`buffers`] | the relay's buffers and the per-thread pool they come from |
//! | [`relay`] | the async driver of the machine: both directions in one future, on our runtime |
//! | [`splice`] | the async driver's zero-copy path: `splice(2)` through pooled pipes, and when to take it |
//! | [`proxy_protocol`] | HAProxy's PROXY header, v1 and v2: encoded, parsed, read from a client |
//! | [`client_hello`] | a TLS ClientHello read for its server name and ALPN, bytes unchanged |
//! | [`accept`] | accept errors: skip a dead connection, back off from EMFILE |
//! | [`side`] | the client or the backend |
//!
//! May import: the ground floor ([`crate::log`]), the runtime, and
//! [`crate::policy::limit`] (a pipe is a place under the pipe ceiling and a
//! loan from the global `maxconn`). The
//! layers above take their parameters as plain values (the connection's
//! [`timeouts::Timeouts`], a PROXY [`proxy_protocol::Version`]). The
//! machine, its alarm and its snapshot import nothing but [`side`] and
//! [`timeouts`]: the other two modes' drivers (`blocking/relay.rs`,
//! `states/connection.rs`) use them without the runtime.

pub mod accept;
pub mod alarm;
pub mod buffers;
pub mod client_hello;
pub mod machine;
pub mod proxy_protocol;
pub mod relay;
pub mod side;
pub mod snapshot;
pub mod splice;
pub mod timeouts;
