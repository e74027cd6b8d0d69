//! The relay's second way to move bytes: `splice(2)` through a pipe, so
//! that bulk bytes go socket → pipe → socket inside the kernel and never
//! through a buffer of ours.
//!
//! ```text
//!   copy:    client ──read──> [64 KiB buffer] ──write──> backend
//!   splice:  client ──splice──> [pipe, 256 KiB] ──splice──> backend
//! ```
//!
//! This file holds the pipes a direction moves through, the pool they come
//! from, and when a connection may use them. The async driver (`relay.rs`,
//! its `Carrier`) makes the splice calls where the relay machine asks for a
//! read or a write: to the machine a pipe is a buffer, so the contract (the
//! FIN passed on once the pipe is empty, resets, timeouts, the counts) is
//! the machine's, whichever path the bytes take.
//!
//! Which path a direction uses is the frontend's `splice` option:
//!
//! - `off`: always copy.
//! - `on`: splice from the first byte.
//! - `auto` (the default): start on the copy path, and move a direction to
//!   splice once one read fills the whole buffer (HAProxy's `splice-auto`
//!   heuristic): a request, a reply, a prompt fit in one read and pay
//!   nothing, a bulk stream switches after its first 64 KiB.
//!
//! ## Pipes are a resource
//!
//! A pipe is two descriptors. A direction takes one only while it has bytes
//! to move and gives it back as soon as the pipe is empty and the source
//! has nothing more (the same thrift as the copy buffers): an idle
//! connection holds none. Given back, it goes to this worker's pool (at
//! most [`POOL_LIMIT`], the rest are closed), so a busy worker reuses the
//! same few pipes without a system call. A pipe given back with bytes still
//! in it (its relay ended mid-transfer) is closed, never reused.
//!
//! Every pipe, in use or pooled, holds a place under the process's pipe
//! budget (a [`Limit`] that `policy/descriptors.rs` sizes from what the
//! global `maxconn` leaves): a pipe can never take a descriptor the budget
//! promised to a backend socket. No place left, or `pipe2` failing with
//! EMFILE (or any error): the direction copies, and the connection goes on.
//!
//! ## Falling back
//!
//! An error that means "these descriptors cannot splice" ([`cannot_splice`]:
//! EINVAL and the like) moves the whole connection back to the copy path,
//! for good: the relay reports it ([`crate::conn::machine::Outcome`]) to be
//! counted and logged. Bytes already in the pipe are not lost: the copy path
//! reads them out of the pipe first, in order.
//!
//! ## What splice does not do
//!
//! The copy path writes the last bytes before a FIN with `MSG_MORE`, so that
//! bytes and FIN leave in one segment. The splice path has no equivalent and
//! needs none: it runs for bulk transfers, where one segment more at the end
//! of megabytes is noise, and a FIN that comes with the bytes is only seen
//! on the next splice, which returns 0.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;

use runtime::pipe::Pipe;

use crate::policy::limit::{Limit, Permit};

/// The pipe size asked for (`F_SETPIPE_SZ`): four times the copy buffer, so
/// one splice moves what four reads would. Bounded by
/// `/proc/sys/fs/pipe-max-size` (1 MiB by default). The price: a user's
/// pipes share `pipe-user-pages-soft` (64 MiB by default), 256 of these;
/// past it the kernel makes small pipes, which still work, moving less per
/// call. (64 KiB, the kernel's default, cost the same CPU per GiB in a hand
/// measurement on a busy 2-core machine; 256 KiB makes a quarter of the calls.)
pub const PIPE_SIZE: usize = 256 * 1024;

/// How many empty pipes a worker keeps for reuse.
pub const POOL_LIMIT: usize = 64;

/// A frontend's `splice` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Splice {
    /// Copy first, splice a direction once a read fills the buffer.
    #[default]
    Auto,
    /// Splice every direction from its first byte.
    On,
    /// Always copy.
    Off,
}

impl Splice {
    /// Every value, in the order the messages list them.
    pub const ALL: [Splice; 3] = [Splice::Auto, Splice::On, Splice::Off];

    /// Its word in a configuration file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Splice::Auto => "auto",
            Splice::On => "on",
            Splice::Off => "off",
        }
    }

    /// The value named `word`.
    pub fn parse(word: &str) -> Option<Splice> {
        Splice::ALL.into_iter().find(|s| s.name() == word)
    }
}

/// What a relay needs to splice: the frontend's option and the process's
/// pipe budget.
#[derive(Debug, Clone, Copy)]
pub struct Splicing<'a> {
    /// `splice auto | on | off`.
    pub mode: Splice,
    /// Pipes open in the whole process (in use or pooled), and how many may be.
    pub pipes: &'a Arc<Limit>,
}

/// A pipe and its place under the budget.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) pipe: Pipe,
    _place: Permit,
}

/// Why no pipe was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoPipe {
    /// The budget is spent for now: try again later.
    Budget,
    /// `pipe2` failed (EMFILE and the like): do not try again on this connection.
    Failed,
}

thread_local! {
    static POOL: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// A connection's splice state, shared by its two directions: a fallback
/// or a failed `pipe2` puts the whole connection on the copy path.
#[derive(Debug)]
pub(crate) struct SpliceState<'a> {
    splicing: Splicing<'a>,
    /// The error that made it fall back, if one did (an errno).
    fallback: Option<i32>,
    /// `pipe2` failed (EMFILE and the like): no more tries.
    no_pipes: bool,
}

impl<'a> SpliceState<'a> {
    /// A connection that has not spliced yet.
    pub(crate) fn new(splicing: Splicing<'a>) -> SpliceState<'a> {
        SpliceState {
            splicing,
            fallback: None,
            no_pipes: false,
        }
    }

    /// The frontend's option.
    pub(crate) fn mode(&self) -> Splice {
        self.splicing.mode
    }

    /// May a direction of this connection (still) splice?
    pub(crate) fn may_splice(&self) -> bool {
        self.splicing.mode != Splice::Off && self.fallback.is_none() && !self.no_pipes
    }

    /// `err` said these sockets cannot splice: copy from now on.
    pub(crate) fn fall_back(&mut self, err: &io::Error) {
        self.fallback = self.fallback.or(err.raw_os_error());
    }

    /// The error that put the connection back on the copy path, if one did.
    pub(crate) fn fallback(&self) -> Option<i32> {
        self.fallback
    }

    /// An empty pipe for a direction, or `None`: the budget is spent for now,
    /// or `pipe2` failed (then this connection stops asking).
    pub(crate) fn take_pipe(&mut self) -> Option<Held> {
        match take(self.splicing.pipes) {
            Ok(held) => Some(held),
            Err(no) => {
                self.no_pipes |= no == NoPipe::Failed;
                None
            }
        }
    }
}

/// An empty pipe from this worker's pool, or a new one under the budget.
pub(crate) fn take(pipes: &Arc<Limit>) -> Result<Held, NoPipe> {
    if let Some(held) = POOL.with(|p| p.borrow_mut().pop()) {
        return Ok(held);
    }
    let place = pipes.try_acquire().ok_or(NoPipe::Budget)?;
    match Pipe::new(PIPE_SIZE) {
        Ok(pipe) => Ok(Held {
            pipe,
            _place: place,
        }),
        Err(_) => Err(NoPipe::Failed),
    }
}

/// Gives a pipe back: to the pool if it is empty and the pool has room,
/// else closed (its place under the budget with it).
pub(crate) fn give(held: Held) {
    if !held.pipe.is_empty() {
        return;
    }
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_LIMIT {
            pool.push(held);
        }
    });
}

/// Does `err` mean "this pair of descriptors cannot splice" (a socket type
/// or a kernel without it), rather than a failed connection?
pub fn cannot_splice(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ESPIPE)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for s in Splice::ALL {
            assert_eq!(Splice::parse(s.name()), Some(s));
        }
        assert_eq!(Splice::parse("yes"), None);
        assert_eq!(Splice::default(), Splice::Auto);
    }

    #[test]
    fn pipes_come_back_to_the_pool_and_the_budget_bounds_them() {
        let budget = Limit::new(Some(2));
        let a = take(&budget).unwrap();
        let b = take(&budget).unwrap();
        assert_eq!(take(&budget).unwrap_err(), NoPipe::Budget, "two at most");
        give(a);
        // Reused from the pool: the budget still counts it.
        let c = take(&budget).unwrap();
        assert_eq!(budget.open(), 2);
        drop(c);
        drop(b);
        assert_eq!(budget.open(), 0, "a closed pipe gives its place back");
    }

    #[test]
    fn only_errors_about_splicing_itself_fall_back() {
        for errno in [libc::EINVAL, libc::ENOSYS, libc::EOPNOTSUPP] {
            assert!(cannot_splice(&io::Error::from_raw_os_error(errno)));
        }
        for errno in [libc::ECONNRESET, libc::EPIPE, libc::EAGAIN] {
            assert!(!cannot_splice(&io::Error::from_raw_os_error(errno)));
        }
    }
}
