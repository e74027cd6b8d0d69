//! Mode single (being written).
use crate::cli::Settings;
use std::io;

/// Runs the single mode until the process is stopped.
pub fn run(settings: &Settings) -> io::Result<()> {
    let _ = settings;
    Err(io::Error::other("the single mode is being written"))
}
