//! Stopping: SIGTERM and SIGINT end the process with status 0.
//!
//! Signals are blocked in the main thread before any other thread starts
//! (threads inherit the mask), and one small thread waits for them with
//! `sigwait`. So no signal handler ever runs in the middle of a relay, and
//! whatever mode is running needs no code of its own to stop.
//!
//! SIGHUP is caught too, so that the conventional "reload" signal does not
//! kill the process by its default action; reloading is not implemented yet,
//! so it is logged and ignored.

use std::io;
use std::thread;

use nix::sys::signal::{SigSet, Signal};

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and every thread it
/// starts afterwards) and starts the thread that acts on them.
pub fn exit_on_signals() -> io::Result<()> {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    set.thread_block().map_err(io::Error::from)?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || wait_for_signals(set))?;
    Ok(())
}

fn wait_for_signals(set: SigSet) {
    loop {
        match set.wait() {
            Ok(Signal::SIGHUP) => {
                crate::warn!("SIGHUP: configuration reload is not supported yet; ignored")
            }
            Ok(signal) => {
                crate::info!("{signal}: exiting");
                std::process::exit(0);
            }
            Err(e) => {
                crate::error!("waiting for signals failed: {e}; SIGTERM will not be handled");
                return;
            }
        }
    }
}
