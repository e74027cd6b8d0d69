//! The demo (being written).
use std::io;

/// Runs the demo.
pub fn run(quick: bool) -> io::Result<()> {
    let _ = quick;
    Err(io::Error::other("being written"))
}
