//! Connections: the pieces a proxied connection is made of.

pub mod accept;
pub mod proxy_protocol;
pub mod relay;
pub mod side;
