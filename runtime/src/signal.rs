//! Signals as a stream: SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT read
//! from a `signalfd`.
//!
//! A classic signal handler runs in the middle of whatever the thread was
//! doing and may call almost nothing safely. A `signalfd` turns signals
//! into data instead: we *block* the signals (so their default action,
//! usually "terminate", does not run) and the kernel keeps them pending;
//! the signalfd becomes readable, the reactor wakes the task that waits on
//! it, and the task reads one 128-byte record per signal.
//!
//! ```text
//!   kill -TERM <pid> ──> pending (blocked) ──> signalfd readable ──> reactor
//!                                                                      │ wake
//!   task: signals.recv().await  <── Signal::Terminate  <── read record ┘
//! ```
//!
//! **Create [`Signals`] before starting other threads.** Blocking is per
//! thread (new threads inherit the mask of their creator). A process-wide
//! signal is delivered to any thread that does not block it; if a worker
//! thread started earlier does not block SIGTERM, it receives the signal and
//! the process dies the default way.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::async_fd::AsyncFd;
use crate::reactor::Interest;
use crate::sys;

/// The signals a server reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: the polite request to stop (what `kill` and service managers send).
    Terminate,
    /// SIGHUP: by convention, reload the configuration.
    Hangup,
    /// SIGUSR1: by nginx's convention, reopen the log files (after a
    /// rotation renamed them).
    User1,
    /// SIGQUIT: by HAProxy's convention, dump the state to the log and keep
    /// running (its default action would end the process with a core).
    Quit,
    /// SIGUSR2: by nginx's convention, start a new binary that takes over
    /// the listeners (a hitless upgrade).
    User2,
}

impl Signal {
    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Interrupt => libc::SIGINT,
            Signal::Terminate => libc::SIGTERM,
            Signal::Hangup => libc::SIGHUP,
            Signal::User1 => libc::SIGUSR1,
            Signal::Quit => libc::SIGQUIT,
            Signal::User2 => libc::SIGUSR2,
        }
    }

    /// Its conventional name, for logs: `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
            Signal::User1 => "SIGUSR1",
            Signal::Quit => "SIGQUIT",
            Signal::User2 => "SIGUSR2",
        }
    }

    fn from_number(n: i32) -> Option<Signal> {
        [
            Signal::Interrupt,
            Signal::Terminate,
            Signal::Hangup,
            Signal::User1,
            Signal::Quit,
            Signal::User2,
        ]
        .into_iter()
        .find(|s| s.number() == n)
    }
}

/// A stream of the signals it was created for.
///
/// # Examples
///
/// The thread sends itself SIGUSR1 (`nix`'s `raise`). Since [`Signals::new`]
/// blocked it, its default action (ending the process) does not run: it
/// waits in the kernel, the signalfd turns readable, and the task reads it
/// as data.
///
/// ```
/// use runtime::{Runtime, signal::{Signal, Signals}};
///
/// let rt = Runtime::new()?;
/// let got = rt.block_on(async {
///     let signals = Signals::new(&[Signal::User1])?;
///     nix::sys::signal::raise(nix::sys::signal::Signal::SIGUSR1)?;
///     signals.recv().await
/// })?;
/// assert_eq!(got, Signal::User1);
/// assert_eq!(got.name(), "SIGUSR1");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Signals {
    fd: AsyncFd<File>,
}

impl Signals {
    /// Blocks `signals` on this thread (and the threads it starts from now
    /// on) and opens a signalfd for them, registered with the current runtime.
    pub fn new(signals: &[Signal]) -> io::Result<Signals> {
        let numbers: Vec<i32> = signals.iter().map(|s| s.number()).collect();
        let set = sys::sigset(&numbers)?;
        sys::block_signals(&set)?;
        let fd = sys::signalfd(&set)?;
        Ok(Signals {
            fd: AsyncFd::new(File::from(fd))?,
        })
    }

    /// Waits for the next signal.
    pub async fn recv(&self) -> io::Result<Signal> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Poll form of [`Signals::recv`].
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<io::Result<Signal>> {
        loop {
            let mut record = [0u8; sys::SIGNALFD_RECORD];
            let n = ready!(
                self.fd
                    .poll_io(Interest::Read, cx, |mut f| f.read(&mut record))
            )?;
            if n < 4 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "short read from signalfd",
                )));
            }
            // The record starts with `ssi_signo`, a u32 in the machine's byte order.
            let number = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]) as i32;
            if let Some(signal) = Signal::from_number(number) {
                return Poll::Ready(Ok(signal));
            }
            // Only the signals we asked for reach this descriptor; anything
            // else would be a kernel surprise, skipped rather than fatal.
        }
    }
}

impl futures_core::Stream for Signals {
    type Item = io::Result<Signal>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_recv(cx).map(Some)
    }
}

impl fmt::Debug for Signals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signals").finish_non_exhaustive()
    }
}
