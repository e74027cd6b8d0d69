//! Settings: what the operator asked for.

pub mod cli;
pub mod config;
