//! Mode pool (being written).
use crate::cli::Settings;
use std::io;

/// Runs the pool mode until the process is stopped.
pub fn run(settings: &Settings) -> io::Result<()> {
    let _ = settings;
    Err(io::Error::other("the pool mode is being written"))
}
