//! How many descriptors this process may hold: `RLIMIT_NOFILE`.
//!
//! Every connection costs a proxy two descriptors (the client's socket and
//! the backend's), so the soft limit, often 1,024 by default, caps a server
//! long before memory does. The hard limit is the most an unprivileged
//! process may raise it to; servers (nginx's `worker_rlimit_nofile`, HAProxy
//! at startup) raise the soft limit to it, and so do our load clients and
//! tests, whose children inherit the raised limit.

use std::io;

use crate::sys;

/// The soft and the hard limit, in that order.
pub fn nofile_limits() -> io::Result<(u64, u64)> {
    sys::nofile_limits()
}

/// Raises the soft limit to the hard limit; returns the new soft limit.
///
/// # Examples
///
/// What a server does at startup: take all the descriptors it is allowed.
///
/// ```
/// use runtime::fd_limit::{nofile_limits, raise_nofile_limit};
///
/// let (soft, hard) = nofile_limits()?;
/// let raised = raise_nofile_limit()?;
/// assert!(soft <= raised && raised == hard);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn raise_nofile_limit() -> io::Result<u64> {
    let (soft, hard) = sys::nofile_limits()?;
    if soft < hard {
        sys::set_nofile_soft_limit(hard)?;
    }
    Ok(sys::nofile_limits()?.0)
}

/// Sets the soft limit (at most the hard one): a test that wants to run out
/// of descriptors lowers it for itself, or for a child before it starts.
///
/// # Examples
///
/// Running out on purpose: under a limit of 64, opening files soon fails
/// with EMFILE, the error an accept loop must back off from
/// ([`crate::net::is_fd_exhaustion`]) rather than retry at once.
///
/// ```
/// use runtime::{fd_limit, net::is_fd_exhaustion};
///
/// let (soft, _) = fd_limit::nofile_limits()?;
/// fd_limit::set_nofile_soft_limit(64)?;
/// let opened: Vec<_> = (0..=64).map(|_| std::fs::File::open("/dev/null")).collect();
/// let error = opened.iter().find_map(|r| r.as_ref().err()).expect("the limit was hit");
/// assert!(is_fd_exhaustion(error), "{error}");
/// drop(opened);
/// fd_limit::set_nofile_soft_limit(soft)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_nofile_soft_limit(soft: u64) -> io::Result<()> {
    sys::set_nofile_soft_limit(soft)
}

/// Sets the soft limit of another process (of the same user), keeping its
/// hard limit: how a test lowers the limit of a server it started, once the
/// server is running and its own descriptors are known.
pub fn set_nofile_soft_limit_of(pid: u32, soft: u64) -> io::Result<()> {
    sys::set_nofile_soft_limit_of(pid, soft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit_and_never_lowers() {
        let (soft, hard) = nofile_limits().expect("getrlimit");
        assert!(soft <= hard);
        let raised = raise_nofile_limit().expect("setrlimit");
        assert_eq!(raised, hard);
        assert!(raised >= soft);
    }

    #[test]
    fn another_process_limit_is_set_by_pid_and_a_missing_one_is_an_error() {
        // This process, by its pid, to the soft limit it has: nothing
        // changes for the tests running beside this one.
        let (soft, _) = nofile_limits().expect("getrlimit");
        set_nofile_soft_limit_of(std::process::id(), soft).expect("prlimit of ourselves");
        assert_eq!(nofile_limits().expect("getrlimit").0, soft);
        assert!(set_nofile_soft_limit_of(u32::MAX, soft).is_err());
    }
}
