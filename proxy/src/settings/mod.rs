//! Settings: what the operator asked for.

pub mod check;
pub mod cli;
pub mod config;
pub mod file;
pub mod flags;
pub mod reader;
pub mod sections;
pub mod words;
