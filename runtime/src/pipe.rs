//! A pipe as a kernel-side buffer: what `splice(2)` moves bytes through, so
//! that a relay never copies them into user space.
//!
//! ```text
//!   socket A ──splice──> [ pipe: page references, not copies ] ──splice──> socket B
//!            TcpStream::poll_splice_to         TcpStream::poll_splice_from
//! ```
//!
//! `splice` needs a pipe on one side of every call, so a socket-to-socket
//! move is two calls through one. The pipe is never registered with epoll:
//! its one user knows its fill level ([`Pipe::len`], counted from what each
//! call moved), and that is all the readiness it needs. It is empty or not,
//! and only an empty pipe is filled (see [`crate::net::TcpStream::poll_splice_to`]
//! for why a partly full one must not be).
//!
//! Both ends are created non-blocking and close-on-exec in one call
//! (`pipe2`), and the size is asked for with `F_SETPIPE_SZ`. If the kernel
//! refuses that size (over `/proc/sys/fs/pipe-max-size`, or the user's
//! `pipe-user-pages-soft` is used up), the pipe keeps the size it was born
//! with: splices then move less per call, nothing else changes.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};

use crate::sys;

/// A non-blocking pipe and how many bytes are in it.
///
/// # Examples
///
/// An echo that never copies the bytes into the program: they go from the
/// server's socket into the pipe and from the pipe back into the same
/// socket, as page references inside the kernel.
///
/// ```
/// use std::future::poll_fn;
/// use runtime::{Runtime, net::{TcpListener, TcpStream}, pipe::Pipe};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
///     let client = TcpStream::connect(listener.local_addr()?).await?;
///     let (server, _) = listener.accept().await?;
///     client.write_all(b"zero copy").await?;
///     let mut pipe = Pipe::new(64 * 1024)?;
///     let spliced_in = poll_fn(|cx| server.poll_splice_to(cx, &mut pipe)).await?;
///     assert_eq!((spliced_in, pipe.len()), (9, 9));
///     poll_fn(|cx| server.poll_splice_from(cx, &mut pipe)).await?;
///     assert!(pipe.is_empty());
///     let mut buf = [0u8; 16];
///     let n = client.read(&mut buf).await?;
///     assert_eq!(&buf[..n], b"zero copy");
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Pipe {
    /// The read end, as a file so that a fallback can `read` it.
    read: File,
    write: std::os::fd::OwnedFd,
    /// The size asked for: what one splice into it is offered.
    size: usize,
    /// Bytes spliced in and not yet out.
    held: usize,
}

impl Pipe {
    /// A pipe of `size` bytes (as `F_SETPIPE_SZ` rounds it: a power of two
    /// pages), or of the kernel's default size if that one is refused.
    /// EMFILE and ENFILE come back as they are: the caller decides what a
    /// missing pipe means.
    pub fn new(size: usize) -> io::Result<Pipe> {
        let (read, write) = sys::pipe()?;
        // A refusal leaves the default size (module docs): not an error.
        let size = sys::set_pipe_size(write.as_fd(), size).unwrap_or(size);
        Ok(Pipe {
            read: File::from(read),
            write,
            size,
            held: 0,
        })
    }

    /// Bytes in the pipe, spliced in and not yet out.
    pub fn len(&self) -> usize {
        self.held
    }

    /// Is the pipe empty (everything spliced in was spliced out)?
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// The size asked for at creation or by [`Pipe::grow`] (what the kernel
    /// said it gave).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Asks for a pipe of `size` bytes from now on (`F_SETPIPE_SZ`, which
    /// keeps what the pipe holds). A refusal (over `pipe-max-size`, or the
    /// user's pipe pages used up) comes back as the error and leaves the
    /// pipe as it was.
    pub fn grow(&mut self, size: usize) -> io::Result<()> {
        self.size = sys::set_pipe_size(self.write.as_fd(), size)?;
        Ok(())
    }

    /// Reads bytes out of the pipe into `buf` (a copy, as `read(2)`): how
    /// a user that can no longer splice out takes back what is in it.
    /// `Ok(0)` if the pipe is empty.
    pub fn read_into(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.held == 0 {
            return Ok(0);
        }
        let n = self.read.read(buf)?;
        self.held = self.held.saturating_sub(n);
        Ok(n)
    }

    pub(crate) fn write_end(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }

    pub(crate) fn read_end(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    pub(crate) fn filled(&mut self, n: usize) {
        self.held += n;
    }

    pub(crate) fn drained(&mut self, n: usize) {
        self.held = self.held.saturating_sub(n);
    }
}

impl fmt::Debug for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipe")
            .field("size", &self.size)
            .field("held", &self.held)
            .finish()
    }
}
