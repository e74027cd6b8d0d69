//! Settings: what the operator asked for.

pub mod check;
pub mod cli;
pub mod config;
