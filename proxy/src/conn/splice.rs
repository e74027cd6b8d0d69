//! The relay's second way to move bytes: `splice(2)` through a pipe, so
//! that bulk bytes go socket → pipe → socket inside the kernel and never
//! through a buffer of ours.
//!
//! ```text
//!   copy:    client ──read──> [64 KiB buffer] ──write──> backend
//!   splice:  client ──splice──> [pipe, 256 KiB, 1 MiB once full] ──splice──> backend
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
//! Every pipe, in use or pooled, holds two things: a place under the
//! process's pipe ceiling (a [`Limit`], one pipe per four connections of
//! `maxconn`, a bound on the memory pipes pin), and a loan of its two
//! descriptors from the global `maxconn`'s room ([`Limit::lend`]): a pipe is
//! lent a pair only while connections leave the last few free, and a
//! connection is admitted only where the loans leave its pair, so a pipe
//! can never take a descriptor a backend socket needs
//! (`policy/descriptors.rs`). No place or no loan, or `pipe2` failing with
//! EMFILE (or any error): the direction copies, and the connection goes on.
//!
//! A pooled pipe goes back (closed, its loan returned) when it has been
//! idle for [`POOL_IDLE`], and when the connections need its descriptors:
//! a pipe given back while the loans no longer fit is closed, not pooled,
//! and an accept loop that finds no room while pipes are lent empties its
//! worker's pool ([`give_back_pooled`]).
//!
//! ## Long streams get long pipes
//!
//! A splice into a pipe that fills it says the source had more queued than
//! the pipe holds: a long stream, whose sender keeps its queue full. Such a
//! pipe grows to [`LONG_PIPE_SIZE`] (`F_SETPIPE_SZ`, which keeps what it
//! holds) and keeps that size while it lives, pooled or not. On this
//! machine's loopback most of the proxy's CPU per GiB is paid per splice
//! (the segments each call makes, the wake-up of the peer it sends to,
//! docs/EPOLL.md, "What splice saves"), so a stream that moves four times
//! as much per call pays about a third less. Long pipes are few: the
//! kernel counts a user's pipe pages against `pipe-user-pages-soft` (64 MiB
//! by default) and, past it, makes new pipes of two pages and refuses to
//! grow them, for every process of that user. So long pipes may take a
//! quarter of that limit ([`long_pipes`]: 16 by default), a place each; a
//! pipe that cannot have one, or that the kernel refuses, stays at
//! [`PIPE_SIZE`] and moves less per call, nothing else.
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
use std::time::{Duration, Instant};

use runtime::pipe::Pipe;

use crate::policy::limit::{Limit, Loan, Permit};

/// The pipe size asked for (`F_SETPIPE_SZ`): four times the copy buffer, so
/// one splice moves what four reads would. Bounded by
/// `/proc/sys/fs/pipe-max-size` (1 MiB by default). The price: a user's
/// pipes share `pipe-user-pages-soft` (64 MiB by default), 256 of these;
/// past it the kernel makes small pipes, which still work, moving less per
/// call. (64 KiB, the kernel's default, cost the same CPU per GiB in a hand
/// measurement on a busy 2-core machine; 256 KiB makes a quarter of the calls.)
pub const PIPE_SIZE: usize = 256 * 1024;

/// The size a pipe grows to once a splice filled it (a long stream; module
/// docs): `pipe-max-size`'s default, the most an unprivileged user may ask.
pub const LONG_PIPE_SIZE: usize = 1024 * 1024;

/// How many empty pipes a worker keeps for reuse.
pub const POOL_LIMIT: usize = 64;

/// How long an empty pipe stays pooled unused before it is closed.
pub const POOL_IDLE: Duration = Duration::from_secs(10);

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

/// The process's pipes: how many may be open at once, and who lends them
/// their descriptors.
#[derive(Debug, Clone)]
pub struct Pipes {
    /// Pipes open in the whole process (in use or pooled), and how many may be.
    pub ceiling: Arc<Limit>,
    /// The global `maxconn`, which lends each pipe its descriptors.
    pub lender: Arc<Limit>,
    /// The process's places for long pipes ([`long_pipes`]).
    pub long: Arc<Limit>,
}

impl Pipes {
    /// Pipes under `ceiling`, lent their descriptors by `lender`, none of
    /// them long.
    pub fn new(ceiling: Arc<Limit>, lender: Arc<Limit>) -> Pipes {
        let long = Limit::new(Some(0));
        Pipes {
            ceiling,
            lender,
            long,
        }
    }

    /// The same pipes, which may grow long under `long`'s places.
    pub fn with_long(self, long: Arc<Limit>) -> Pipes {
        Pipes { long, ..self }
    }
}

/// What a relay needs to splice: the frontend's option and the process's
/// pipes.
#[derive(Debug, Clone, Copy)]
pub struct Splicing<'a> {
    /// `splice auto | on | off`.
    pub mode: Splice,
    /// The process's pipes.
    pub pipes: &'a Pipes,
}

/// A pipe and its place under the budget.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) pipe: Pipe,
    _place: Permit,
    loan: Loan,
    /// Its place among the long pipes, once it grew.
    long: Option<Permit>,
}

impl Held {
    /// After a splice into it moved `moved` bytes: if that filled it, a long
    /// stream fills it (module docs), so it grows to [`LONG_PIPE_SIZE`],
    /// if one of `long`'s places is free and the kernel agrees.
    fn grow_if_filled(&mut self, moved: usize, long: &Arc<Limit>) {
        if self.long.is_some() || moved < self.pipe.size() || self.pipe.size() >= LONG_PIPE_SIZE {
            return;
        }
        let Some(place) = long.try_acquire() else {
            return;
        };
        if self.pipe.grow(LONG_PIPE_SIZE).is_ok() {
            self.long = Some(place);
        }
    }
}

/// The process's places for long pipes, made once at startup: a quarter of
/// the pipe pages a user may have (`/proc/sys/fs/pipe-user-pages-soft`) in
/// pipes of [`LONG_PIPE_SIZE`], at least one; 16 where that limit is
/// unknown, and 64 where there is none (0).
pub fn long_pipes() -> Arc<Limit> {
    let soft = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft");
    let pages = soft.ok().and_then(|s| s.trim().parse::<u64>().ok());
    Limit::new(Some(long_pipes_for(pages)))
}

/// [`long_pipes`]' count for a `pipe-user-pages-soft` of `pages`.
fn long_pipes_for(pages: Option<u64>) -> u32 {
    const PAGE: u64 = 4096;
    match pages {
        None => 16,
        Some(0) => 64,
        Some(pages) => {
            let quarter = pages * PAGE / 4 / LONG_PIPE_SIZE as u64;
            u32::try_from(quarter.max(1)).unwrap_or(u32::MAX)
        }
    }
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
    /// Empty pipes, each with when it was given back; the newest last.
    static POOL: RefCell<Vec<(Held, Instant)>> = const { RefCell::new(Vec::new()) };
}

/// A connection's splice state, shared by its two directions: a fallback
/// or a failed `pipe2` puts the whole connection on the copy path.
#[derive(Debug)]
pub(crate) struct SpliceState<'a> {
    splicing: Splicing<'a>,
    /// Bytes spliced out, both directions, since the connection began (a
    /// resumed connection starts from its old process's count).
    spliced: u64,
    /// The error that made it fall back, if one did (an errno).
    fallback: Option<i32>,
    /// `pipe2` failed (EMFILE and the like): no more tries.
    no_pipes: bool,
}

impl<'a> SpliceState<'a> {
    /// A connection that spliced `spliced` bytes so far (0 if new).
    pub(crate) fn new(splicing: Splicing<'a>, spliced: u64) -> SpliceState<'a> {
        SpliceState {
            splicing,
            spliced,
            fallback: None,
            no_pipes: false,
        }
    }

    /// Counts `n` bytes spliced out.
    pub(crate) fn count(&mut self, n: usize) {
        self.spliced += n as u64;
    }

    /// Bytes spliced out since the connection began.
    pub(crate) fn spliced(&self) -> u64 {
        self.spliced
    }

    /// A splice into `held` moved `moved` bytes: if that filled it, it
    /// grows, under the process's places for long pipes.
    pub(crate) fn grow_if_filled(&self, held: &mut Held, moved: usize) {
        held.grow_if_filled(moved, &self.splicing.pipes.long);
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

/// An empty pipe from this worker's pool, or a new one under the pipe
/// ceiling and lent its descriptors.
pub(crate) fn take(pipes: &Pipes) -> Result<Held, NoPipe> {
    let now = Instant::now();
    if let Some(held) = POOL.with(|p| {
        let mut pool = p.borrow_mut();
        close_idle(&mut pool, now);
        pool.pop().map(|(held, _)| held)
    }) {
        return Ok(held);
    }
    let place = pipes.ceiling.try_acquire().ok_or(NoPipe::Budget)?;
    let loan = pipes.lender.lend().ok_or(NoPipe::Budget)?;
    match Pipe::new(PIPE_SIZE) {
        Ok(pipe) => Ok(Held {
            pipe,
            _place: place,
            loan,
            long: None,
        }),
        Err(_) => Err(NoPipe::Failed),
    }
}

/// Gives a pipe back: to the pool if it is empty, the pool has room and the
/// connections do not need its descriptors, else closed (its place and its
/// loan with it).
pub(crate) fn give(held: Held) {
    if !held.pipe.is_empty() || !held.loan.fits() {
        return;
    }
    let now = Instant::now();
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        close_idle(&mut pool, now);
        if pool.len() < POOL_LIMIT {
            pool.push((held, now));
        }
    });
}

/// Closes this worker's pooled pipes, returning their descriptors: for an
/// accept loop that found no room while pipes are lent. How many it closed.
pub fn give_back_pooled() -> usize {
    POOL.with(|p| p.borrow_mut().drain(..).count())
}

/// Closes this worker's pooled pipes idle for [`POOL_IDLE`], or all of them
/// if the loans of `lender` no longer fit (connections need the room): what
/// a worker does every half [`POOL_IDLE`] while its pool is not empty
/// (epoll/worker.rs), so that a pipe idle for long goes back even on a
/// worker that splices no more. How many it closed.
pub fn tidy_pool(lender: &Limit) -> usize {
    if !lender.loans_fit() {
        return give_back_pooled();
    }
    let now = Instant::now();
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        let before = pool.len();
        close_idle(&mut pool, now);
        before - pool.len()
    })
}

/// Closes the pooled pipes unused for [`POOL_IDLE`] (the oldest are first).
fn close_idle(pool: &mut Vec<(Held, Instant)>, now: Instant) {
    let fresh = pool
        .iter()
        .position(|(_, since)| now.duration_since(*since) < POOL_IDLE)
        .unwrap_or(pool.len());
    pool.drain(..fresh);
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
    fn a_pipe_that_a_splice_filled_grows_once_and_one_that_it_did_not_stays() {
        let long = Limit::new(Some(1));
        let pipes = Pipes::new(Limit::new(Some(3)), Limit::new(None)).with_long(long.clone());
        let mut full = take(&pipes).expect("a pipe");
        let mut partly = take(&pipes).expect("another");
        assert_eq!(full.pipe.size(), PIPE_SIZE);
        partly.grow_if_filled(PIPE_SIZE - 1, &pipes.long);
        full.grow_if_filled(PIPE_SIZE, &pipes.long);
        assert_eq!(
            partly.pipe.size(),
            PIPE_SIZE,
            "not filled: not a long stream"
        );
        assert_eq!(full.pipe.size(), LONG_PIPE_SIZE);
        assert_eq!(long.open(), 1, "it holds a place among the long pipes");
        full.grow_if_filled(LONG_PIPE_SIZE, &pipes.long);
        assert_eq!(long.open(), 1, "grown once");
        let mut third = take(&pipes).expect("a third");
        third.grow_if_filled(PIPE_SIZE, &pipes.long);
        assert_eq!(third.pipe.size(), PIPE_SIZE, "no place left: it stays");
        drop(full);
        assert_eq!(long.open(), 0, "closed, its place is back");
    }

    #[test]
    fn long_pipes_take_a_quarter_of_a_users_pipe_pages() {
        // Debian's default, 64 MiB: 16 MiB of long pipes.
        assert_eq!(long_pipes_for(Some(16384)), 16);
        assert_eq!(long_pipes_for(Some(1024)), 1, "at least one");
        assert_eq!(long_pipes_for(Some(0)), 64, "no limit");
        assert_eq!(long_pipes_for(None), 16, "unknown");
    }

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
        let lender = Limit::new(Some(100));
        lender.set_lendable(100);
        let pipes = Pipes::new(budget.clone(), lender.clone());
        let a = take(&pipes).unwrap();
        let b = take(&pipes).unwrap();
        assert_eq!(take(&pipes).unwrap_err(), NoPipe::Budget, "two at most");
        assert_eq!(lender.lent(), 2);
        give(a);
        // Reused from the pool: the budget still counts it.
        let c = take(&pipes).unwrap();
        assert_eq!(budget.open(), 2);
        drop(c);
        drop(b);
        assert_eq!(budget.open(), 0, "a closed pipe gives its place back");
        assert_eq!(lender.lent(), 0, "and its loan");
    }

    #[test]
    fn connections_come_first_a_pooled_pipe_goes_back_when_they_need_it() {
        // Ten pairs, eight kept for connections: two pipes may be lent.
        let lender = Limit::new(Some(10));
        lender.set_lendable(10);
        let pipes = Pipes::new(Limit::new(Some(10)), lender.clone());
        let a = take(&pipes).unwrap();
        let b = take(&pipes).unwrap();
        assert_eq!(take(&pipes).unwrap_err(), NoPipe::Budget);
        give(a);
        assert_eq!(lender.lent(), 2, "pooled, still lent");
        // Eight connections: every pair is taken, none is free.
        let conns: Vec<_> = (0..10).filter_map(|_| lender.try_acquire()).collect();
        assert_eq!(conns.len(), 8);
        give(b);
        assert_eq!(lender.lent(), 1, "given back while short: closed");
        assert_eq!(give_back_pooled(), 1);
        assert_eq!(lender.lent(), 0);
        assert!(lender.try_acquire().is_some(), "a pair for a connection");
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
