//! # conn: what a proxied connection is made of
//!
//! The pieces every mode's connections use, free of any configuration:
//! the bytes between the two sockets, the header that names the client,
//! what to do when `accept` fails, and the word for which end is which.
//!
//! | file | what it holds |
//! |---|---|
//! | [`relay`] | both directions at once until both are done: half-close, resets, timeouts |
//! | [`splice`] | the relay's zero-copy path: `splice(2)` through pooled pipes, and when to take it |
//! | [`proxy_protocol`] | HAProxy's PROXY header, v1 and v2: encoded, parsed, read from a client |
//! | [`client_hello`] | a TLS ClientHello read for its server name and ALPN, bytes unchanged |
//! | [`accept`] | accept errors: skip a dead connection, back off from EMFILE |
//! | [`side`] | the client or the backend |
//!
//! May import: the ground floor ([`crate::log`]), the runtime, and
//! [`crate::policy::limit`] (a pipe is a place under the pipe budget). The
//! layers above take their parameters as plain values (the relay's
//! [`relay::Limits`], a PROXY [`proxy_protocol::Version`]).

pub mod accept;
pub mod client_hello;
pub mod proxy_protocol;
pub mod relay;
pub mod side;
pub mod splice;
