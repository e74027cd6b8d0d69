//! Operations: what an operator sees and does.

pub mod access_log;
pub mod admin;
pub mod metrics;
pub mod shutdown;
