//! Async TCP: a listener that accepts and a stream that connects, reads and
//! writes, on top of [`AsyncFd`].
//!
//! Every socket is created non-blocking and close-on-exec in one system call
//! (`sys::tcp_socket`, `accept4`) and registered once with the reactor;
//! closing it is what takes it out of the epoll set (`reactor.rs`). The
//! operations are the ones a proxy needs and nothing more; each is the
//! `AsyncFd::poll_io` loop around one system call, and reads and writes
//! follow the short-transfer rule (`AsyncFd::poll_transfer`).
//!
//! ## Connecting without blocking
//!
//! ```text
//!   socket()  ->  connect() = EINPROGRESS  ->  wait until writable
//!             ->  EPOLLOUT alone: connected
//!                 EPOLLERR / EPOLLHUP too: getsockopt(SO_ERROR) says which
//!                 error (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ...)
//! ```
//!
//! The event itself says whether the handshake worked: a failed connect
//! always raises `EPOLLERR` (and `EPOLLHUP`), so the `getsockopt` is only
//! paid when there is an error to name.
//!
//! Bound how long a connect may take with `time::timeout`: the kernel's own
//! limit is minutes.
//!
//! `TcpStream::connect` does it in one call; `TcpStream::start_connect` and
//! `Connecting::handshake` do the same in two, so that the caller holds the
//! socket while the handshake is in progress (a proxy cut mid-connect wants
//! it to close with a reset).
//!
//! ## The last bytes and the FIN in one segment
//!
//! A relay that forwards a request and then the FIN behind it would send two
//! segments: `write` sends the bytes at once (TCP_NODELAY), `shutdown` then
//! sends the FIN alone, and the peer is woken and ACKs twice. When the
//! reactor already knows that the source is at end of file
//! ([`TcpStream::at_eof`]: its FIN came with the bytes just read), the relay
//! writes them with [`TcpStream::poll_write_before_fin`] instead: `MSG_MORE`
//! lets the kernel hold a tail shorter than a segment, and the `shutdown` or
//! `close` that follows at once puts the FIN on it (the kernel marks the
//! last unsent segment rather than queue a new one). Nothing is held for
//! long: the FIN pushes the tail out, and so does the next ACK if the
//! buffer was full. [`TcpStream::segments_sent`] (TCP_INFO) shows the
//! difference: one segment instead of two.
//!
//! ## Accepting when descriptors run out
//!
//! `accept` fails with EMFILE or ENFILE when the process or the system has
//! no descriptor left. The pending connection stays in the kernel's queue
//! and the listener stays readable, so retrying at once would spin. The
//! right answer (see [`is_fd_exhaustion`] and the `echo` example) is to back
//! off on a timer, keep serving open connections (they are what frees
//! descriptors), and accept again later: no queued connection is lost.

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use crate::async_fd::{AsyncFd, Origin};
use crate::pipe::Pipe;
use crate::reactor::Interest;
use crate::sys;

/// The listen backlog used by [`TcpListener::bind`]. The kernel caps it at
/// `net.core.somaxconn`; a high value lets bursts wait in the queue instead
/// of being refused.
pub const DEFAULT_BACKLOG: u32 = 4096;

/// How to open a listening socket.
///
/// # Examples
///
/// `reuse_port` lets a second listener bind the very same port, as each
/// thread of a server does (the kernel then spreads new connections across
/// them); without it the bind fails.
///
/// ```
/// use runtime::{Runtime, net::{ListenOptions, TcpListener}};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let options = ListenOptions { reuse_port: true, ..ListenOptions::default() };
///     let first = TcpListener::bind_with("127.0.0.1:0".parse().unwrap(), &options)?;
///     let addr = first.local_addr()?;
///     let second = TcpListener::bind_with(addr, &options)?;
///     assert_eq!(second.local_addr()?, addr);
///     let refused = TcpListener::bind(addr).unwrap_err();
///     assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse);
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ListenOptions {
    /// Length of the queue of connections not yet accepted.
    pub backlog: u32,
    /// SO_REUSEPORT: let several sockets (one per thread) bind the same
    /// address; the kernel spreads new connections across them.
    pub reuse_port: bool,
    /// For an IPv6 address: refuse IPv4-mapped clients (None: system default).
    pub only_v6: Option<bool>,
    /// TCP_NODELAY on the listener. Linux copies a listener's socket options
    /// into each connection it accepts (the new socket is a clone of the
    /// listening one), so one `setsockopt` here spares one per connection;
    /// `tests/net.rs` checks that the kernel still does so.
    pub nodelay: bool,
    /// IP_FREEBIND: bind even if the address is on no interface yet (a
    /// service address that a health-driven script or a routing daemon puts
    /// on `lo` later); the listener accepts once the address arrives.
    /// Without it such a bind fails with EADDRNOTAVAIL.
    pub freebind: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            backlog: DEFAULT_BACKLOG,
            reuse_port: false,
            only_v6: None,
            nodelay: false,
            freebind: false,
        }
    }
}

/// Is this accept error "out of descriptors or memory", the kind to back off from?
pub fn is_fd_exhaustion(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Is this accept error about the one connection being accepted, not the
/// listener? The client gave up while it waited in the queue
/// (ECONNABORTED), or the new socket met a network error that Linux's
/// accept(2) passes on "to be treated like EAGAIN by retrying". Either way:
/// accept the next connection at once.
pub fn is_dead_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
    ) || matches!(
        err.raw_os_error(),
        Some(
            libc::EPROTO
                | libc::ENOPROTOOPT
                | libc::ENETDOWN
                | libc::ENETUNREACH
                | libc::EHOSTDOWN
                | libc::EHOSTUNREACH
                | libc::ENONET
                | libc::EOPNOTSUPP
                | libc::EPERM
        )
    )
}

/// Opens a listening socket (SO_REUSEADDR, the options' backlog and
/// SO_REUSEPORT), close-on-exec and non-blocking, *not* registered with any
/// runtime: for blocking code (call `set_nonblocking(false)`), or to hand to
/// a runtime thread ([`TcpListener::from_std`]).
///
/// # Examples
///
/// The blocking trio, no runtime at all: a listener, a connect bounded in
/// time, an accept. Both connected sockets come out non-blocking, ready for
/// a `poll(2)` loop, so a read with nothing to read says `WouldBlock`.
///
/// ```
/// use std::{io::{ErrorKind, Read}, time::Duration};
/// use runtime::net::{ListenOptions, accept_std, bind_std, connect_std};
///
/// let listener = bind_std("127.0.0.1:0".parse().unwrap(), &ListenOptions::default())?;
/// listener.set_nonblocking(false)?; // accept_std below waits for the client
/// let client = connect_std(listener.local_addr()?, Duration::from_secs(1))?;
/// let (server, peer) = accept_std(&listener)?;
/// assert_eq!(peer, client.local_addr()?);
/// let empty = (&server).read(&mut [0u8; 16]).unwrap_err();
/// assert_eq!(empty.kind(), ErrorKind::WouldBlock);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn bind_std(addr: SocketAddr, options: &ListenOptions) -> io::Result<std::net::TcpListener> {
    let socket = sys::tcp_socket(&addr)?;
    sys::set_reuse_addr(socket.as_fd())?;
    if options.reuse_port {
        sys::set_reuse_port(socket.as_fd())?;
    }
    if let (SocketAddr::V6(_), Some(only)) = (addr, options.only_v6) {
        sys::set_only_v6(socket.as_fd(), only)?;
    }
    if options.nodelay {
        sys::set_nodelay(socket.as_fd())?;
    }
    if options.freebind {
        sys::set_freebind(socket.as_fd())?;
    }
    sys::bind(socket.as_fd(), &addr)?;
    sys::listen(socket.as_fd(), options.backlog)?;
    Ok(std::net::TcpListener::from(socket))
}

/// Accepts one connection for blocking code (a listener from [`bind_std`],
/// set blocking): the new socket comes out non-blocking and close-on-exec
/// (accept4's flags), ready for a `poll(2)` relay without an `ioctl` of its
/// own. std's `accept` would hand out a blocking one.
pub fn accept_std(
    listener: &std::net::TcpListener,
) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    let (socket, peer) = sys::accept(listener.as_fd())?;
    Ok((std::net::TcpStream::from(socket), peer))
}

/// Connects to `addr` for blocking code, giving up after `limit`
/// (`ErrorKind::TimedOut`). The socket is non-blocking and close-on-exec
/// from birth and stays non-blocking, for a `poll(2)` relay: `socket`,
/// `connect`, one `poll` until writable, and `SO_ERROR` only when that poll
/// reports an error. (std's `connect_timeout` pays two `fcntl` more and
/// leaves a blocking socket behind.)
pub fn connect_std(addr: SocketAddr, limit: Duration) -> io::Result<std::net::TcpStream> {
    connect_std_inner(None, addr, limit)
}

/// [`connect_std`] from a chosen local address (`source`, port 0 for any):
/// a client with several addresses, as one behind a cluster of proxies
/// that hash on the client's address (scripts/cluster.sh).
pub fn connect_std_from(
    source: SocketAddr,
    addr: SocketAddr,
    limit: Duration,
) -> io::Result<std::net::TcpStream> {
    connect_std_inner(Some(source), addr, limit)
}

fn connect_std_inner(
    source: Option<SocketAddr>,
    addr: SocketAddr,
    limit: Duration,
) -> io::Result<std::net::TcpStream> {
    let socket = sys::tcp_socket(&addr)?;
    if let Some(source) = source {
        sys::bind(socket.as_fd(), &source)?;
    }
    match sys::connect(socket.as_fd(), &addr) {
        Ok(()) => return Ok(socket.into()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match sys::poll_writable(socket.as_fd(), sys::epoll_timeout_ms(Some(left))) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect to {addr} timed out after {limit:?}"),
                ));
            }
            Ok(events) => {
                if events & (libc::POLLERR | libc::POLLHUP) != 0 {
                    if let Some(err) = sys::take_socket_error(socket.as_fd())? {
                        return Err(err);
                    }
                }
                return Ok(socket.into());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A listening TCP socket.
///
/// # Examples
///
/// An echo server and two clients, all tasks on one thread. The accept
/// loop spawns a task per connection and goes back to accepting; each
/// client sends, half-closes (its FIN tells the server it is done), and
/// reads the echo until the server closes in turn.
///
/// ```
/// use std::net::Shutdown;
/// use runtime::net::{TcpListener, TcpStream};
/// use runtime::{Runtime, spawn};
///
/// let rt = Runtime::new()?;
/// rt.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
///     let addr = listener.local_addr()?;
///     let clients: Vec<_> = ["one", "two"].into_iter().map(|word| spawn(async move {
///         let conn = TcpStream::connect(addr).await?;
///         conn.write_all(word.as_bytes()).await?;
///         conn.shutdown(Shutdown::Write)?;
///         let (mut echo, mut buf) = (Vec::new(), [0u8; 64]);
///         while let n @ 1.. = conn.read(&mut buf).await? {
///             echo.extend_from_slice(&buf[..n]);
///         }
///         Ok::<_, std::io::Error>(echo == word.as_bytes())
///     })).collect();
///     for _ in 0..clients.len() {
///         let (conn, _peer) = listener.accept().await?;
///         spawn(async move {
///             let mut buf = [0u8; 1024];
///             while let Ok(n @ 1..) = conn.read(&mut buf).await {
///                 if conn.write_all(&buf[..n]).await.is_err() { break; }
///             }
///         });
///     }
///     for client in clients {
///         assert!(client.await.unwrap()?, "each client got its own bytes back");
///     }
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpListener {
    fd: AsyncFd<std::net::TcpListener>,
}

impl TcpListener {
    /// Binds `addr` with SO_REUSEADDR and the default backlog.
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        TcpListener::bind_with(addr, &ListenOptions::default())
    }

    /// Binds `addr` with explicit options.
    pub fn bind_with(addr: SocketAddr, options: &ListenOptions) -> io::Result<TcpListener> {
        TcpListener::from_std(bind_std(addr, options)?)
    }

    /// Adopts a listening std socket (switched to non-blocking) and registers
    /// it with the current runtime. With [`bind_std`], this is how a socket
    /// opened on one thread becomes the listener of a runtime on another.
    ///
    /// # Examples
    ///
    /// The listener is opened here and served by a runtime on another
    /// thread: a socket is a descriptor, and any thread may adopt it.
    ///
    /// ```
    /// use runtime::net::{ListenOptions, TcpListener, bind_std};
    ///
    /// let opened = bind_std("127.0.0.1:0".parse().unwrap(), &ListenOptions::default())?;
    /// let addr = opened.local_addr()?;
    /// let server = std::thread::spawn(move || -> std::io::Result<_> {
    ///     runtime::Runtime::new()?.block_on(async {
    ///         let listener = TcpListener::from_std(opened)?;
    ///         let (_conn, peer) = listener.accept().await?;
    ///         Ok(peer)
    ///     })
    /// });
    /// let client = std::net::TcpStream::connect(addr)?;
    /// assert_eq!(server.join().unwrap()?, client.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        Ok(TcpListener {
            fd: AsyncFd::new(listener)?,
        })
    }

    /// Accepts one connection, waiting for one if none is queued.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Poll form of [`TcpListener::accept`].
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (socket, peer) = ready!(
            self.fd
                .poll_io(Interest::Read, cx, |l| sys::accept(l.as_fd()))
        )?;
        Poll::Ready(TcpStream::from_owned(socket, Origin::CreatedConnected).map(|s| (s, peer)))
    }

    /// The address the listener is bound to (with the real port if 0 was asked).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.fd.get_ref().local_addr()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

/// A connected TCP socket. `read` and `write` take `&self`, so one task may
/// read while another (or another branch of a `join`) writes: the reactor
/// keeps one waiting reader and one waiting writer per socket.
pub struct TcpStream {
    fd: AsyncFd<std::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr` without blocking the thread.
    ///
    /// # Examples
    ///
    /// A client task talking to a server on an ordinary thread with blocking
    /// std sockets: write the request, then read until the server closes.
    /// `read` may return fewer bytes than were sent, so it is read in a loop.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use runtime::{Runtime, net::TcpStream};
    ///
    /// let server = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = server.local_addr()?;
    /// let thread = std::thread::spawn(move || -> std::io::Result<()> {
    ///     let (mut conn, _) = server.accept()?;
    ///     let mut request = [0u8; 4];
    ///     conn.read_exact(&mut request)?;
    ///     conn.write_all(if &request == b"ping" { b"pong" } else { b"what" })
    /// });
    /// let reply = Runtime::new()?.block_on(async {
    ///     let conn = TcpStream::connect(addr).await?;
    ///     conn.write_all(b"ping").await?;
    ///     let (mut reply, mut buf) = (Vec::new(), [0u8; 64]);
    ///     while let n @ 1.. = conn.read(&mut buf).await? {
    ///         reply.extend_from_slice(&buf[..n]);
    ///     }
    ///     Ok::<_, std::io::Error>(reply)
    /// })?;
    /// assert_eq!(reply, b"pong");
    /// thread.join().unwrap()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let mut connecting = TcpStream::start_connect(addr)?;
        connecting.handshake().await?;
        Ok(connecting.into_stream())
    }

    /// [`TcpStream::connect`] in two steps: the socket is made and its
    /// connect started here, and the handshake is waited for with
    /// [`Connecting::handshake`]. The same system calls; what the caller
    /// gains is the socket itself while the handshake is in progress
    /// ([`Connecting::stream`]), to decide how it closes if the caller
    /// gives up meanwhile (a reset, say: a handshake the kernel completed
    /// just before the caller gave up would otherwise end with a FIN).
    ///
    /// # Examples
    ///
    /// The socket exists before the handshake ends: here it is told to
    /// close with a reset, and the handshake is bounded by a timeout (its
    /// `Elapsed` becomes an `io::Error` through `?`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use runtime::net::{TcpListener, TcpStream};
    /// use runtime::{Runtime, time};
    ///
    /// let rt = Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
    ///     let mut connecting = TcpStream::start_connect(listener.local_addr()?)?;
    ///     connecting.stream().set_reset_on_close()?;
    ///     time::timeout(Duration::from_secs(5), connecting.handshake()).await??;
    ///     let client = connecting.into_stream();
    ///     let (_server, peer) = listener.accept().await?;
    ///     assert_eq!(peer, client.local_addr()?);
    ///     Ok::<_, std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_connect(addr: SocketAddr) -> io::Result<Connecting> {
        let socket = sys::tcp_socket(&addr)?;
        let in_progress = match sys::connect(socket.as_fd(), &addr) {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => true,
            Err(e) => return Err(e),
        };
        Ok(Connecting {
            stream: TcpStream::from_owned(socket, Origin::Created)?,
            in_progress,
        })
    }

    /// Wraps a non-blocking socket the runtime created: just accepted
    /// ([`Origin::CreatedConnected`], speculative readiness) or still
    /// connecting ([`Origin::Created`], it must wait for "writable").
    fn from_owned(socket: OwnedFd, origin: Origin) -> io::Result<TcpStream> {
        let socket = std::net::TcpStream::from(socket);
        Ok(TcpStream {
            fd: AsyncFd::new_alone(socket, origin)?,
        })
    }

    /// Adopts a connected std socket (it is switched to non-blocking).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream {
            fd: AsyncFd::new(stream)?,
        })
    }

    /// Gives the socket back as a std one, out of this runtime's epoll set:
    /// removed explicitly (`EPOLL_CTL_DEL`), whatever its origin, since the
    /// socket may live on elsewhere (handed to another process, whose copy
    /// keeps the open file, and with it this registration, alive). What
    /// the reactor knew of its readiness is forgotten: a runtime that
    /// adopts it again ([`TcpStream::from_std`]) asks epoll afresh.
    pub fn into_std(self) -> std::net::TcpStream {
        self.fd.into_inner()
    }

    /// Reads into `buf`; `Ok(0)` is end of file (the peer shut down its writing side).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read(cx, buf)).await
    }

    /// Poll form of [`TcpStream::read`].
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let asked = buf.len();
        self.fd
            .poll_transfer(Interest::Read, cx, asked, |mut s| s.read(buf))
    }

    /// Writes some of `buf`, returning how much was taken.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_write(cx, buf)).await
    }

    /// Poll form of [`TcpStream::write`].
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.fd
            .poll_transfer(Interest::Write, cx, buf.len(), |mut s| s.write(buf))
    }

    /// [`TcpStream::poll_write`] for the last bytes before a FIN ("The last
    /// bytes and the FIN in one segment", above). The caller must shut the
    /// writing side down, or close, as soon as they are taken: until then the
    /// kernel may hold a short tail back.
    pub fn poll_write_before_fin(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.fd.poll_transfer(Interest::Write, cx, buf.len(), |s| {
            sys::send_before_fin(s.as_fd(), buf)
        })
    }

    /// Moves bytes from this socket into `pipe` without copying them
    /// (`splice(2)`): how many, `Ok(0)` at end of file. Waits for
    /// readability as [`TcpStream::poll_read`] does, and EAGAIN clears it.
    ///
    /// The pipe must be empty: an error says so otherwise. Into a partly
    /// full pipe, EAGAIN could mean "the pipe is full" as well as "the
    /// socket is empty", and forgetting a readiness the socket still has
    /// would leave its bytes unread with no edge to come. For the same
    /// reason a short splice does *not* clear the readiness (the
    /// short-transfer rule of `reactor.rs`): a splice also stops when the
    /// pipe runs out of slots (one per page fragment), not only when the
    /// socket's queue is dry, so only EAGAIN proves the socket empty.
    pub fn poll_splice_to(&self, cx: &mut Context<'_>, pipe: &mut Pipe) -> Poll<io::Result<usize>> {
        if !pipe.is_empty() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "splice into a pipe that still holds bytes: splice them out first",
            )));
        }
        if self.fd.at_eof() {
            return Poll::Ready(Ok(0));
        }
        let size = pipe.size();
        let moved = ready!(self.fd.poll_io(Interest::Read, cx, |s| {
            sys::splice(s.as_fd(), pipe.write_end(), size)
        }))?;
        pipe.filled(moved);
        Poll::Ready(Ok(moved))
    }

    /// Moves bytes from `pipe` into this socket without copying them: how
    /// many (`Ok(0)` only for an empty pipe). Waits for writability as
    /// [`TcpStream::poll_write`] does, short-write rule included: the pipe
    /// is offered all it holds, so taking less means the send buffer filled.
    ///
    /// Unlike our writes, splice to a socket does not pass `MSG_NOSIGNAL`:
    /// a peer that is gone raises SIGPIPE, which Rust programs ignore from
    /// the start (std sets it to `SIG_IGN`), and the call fails with EPIPE.
    pub fn poll_splice_from(
        &self,
        cx: &mut Context<'_>,
        pipe: &mut Pipe,
    ) -> Poll<io::Result<usize>> {
        let held = pipe.len();
        if held == 0 {
            return Poll::Ready(Ok(0));
        }
        let moved = ready!(self.fd.poll_transfer(Interest::Write, cx, held, |s| {
            sys::splice(pipe.read_end(), s.as_fd(), held)
        }))?;
        pipe.drained(moved);
        Poll::Ready(Ok(moved))
    }

    /// Writes all of `buf`, however many writes it takes.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }

    /// Shuts down one or both directions. `Shutdown::Write` sends a FIN: the
    /// peer reads end of file but may still send to us (a half-close).
    ///
    /// # Examples
    ///
    /// A half-close: the client says it is done sending, the server reads
    /// end of file, and the connection still carries the server's answer.
    ///
    /// ```
    /// use std::net::Shutdown;
    /// use runtime::{Runtime, net::{TcpListener, TcpStream}};
    ///
    /// let rt = Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.shutdown(Shutdown::Write)?;
    ///     let mut buf = [0u8; 16];
    ///     assert_eq!(server.read(&mut buf).await?, 0, "end of file");
    ///     server.write_all(b"bye").await?;
    ///     assert_eq!(client.read(&mut buf).await?, 3);
    ///     Ok::<_, std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.fd.get_ref().shutdown(how)
    }

    /// TCP_NODELAY: send small writes at once rather than batching them.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.fd.get_ref().set_nodelay(on)
    }

    /// Reads back TCP_NODELAY.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.fd.get_ref().nodelay()
    }

    /// Makes `close` send a reset (RST) instead of a FIN (SO_LINGER 0): how a
    /// proxy passes a reset on instead of making a cut stream look complete.
    ///
    /// # Examples
    ///
    /// The peer of a socket closed this way reads an error, not end of
    /// file: it can tell a cut connection from a finished one.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use runtime::{Runtime, net::{TcpListener, TcpStream}};
    ///
    /// let rt = Runtime::new()?;
    /// rt.block_on(async {
    ///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
    ///     let client = TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.set_reset_on_close()?;
    ///     drop(client);
    ///     let cut = server.read(&mut [0u8; 16]).await.unwrap_err();
    ///     assert_eq!(cut.kind(), ErrorKind::ConnectionReset);
    ///     Ok::<_, std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_reset_on_close(&self) -> io::Result<()> {
        sys::set_linger_zero(self.fd.get_ref().as_fd())
    }

    /// Ready once the socket hung up or failed (EPOLLHUP or EPOLLERR seen).
    /// While our own side still sends, a hang-up can only be a reset: this
    /// is how a relay that no longer reads a side (its FIN came) still
    /// notices that side's reset. Call it only after reading EOF.
    pub fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.fd.poll_hang_up(cx)
    }

    /// Will the next read return end of file? Known without a system call
    /// when the peer's FIN was seen and a read since found nothing more (the
    /// reactor's `at_eof`). A relay that reads a request and knows this can
    /// send the bytes and the FIN together.
    pub fn at_eof(&self) -> bool {
        self.fd.at_eof()
    }

    /// Has the reactor seen the peer close its sending side?
    pub fn is_read_closed(&self) -> bool {
        self.fd.is_read_closed()
    }

    /// How many TCP segments this socket has sent, pure ACKs and
    /// retransmissions included (TCP_INFO `tcpi_segs_out`).
    pub fn segments_sent(&self) -> io::Result<u32> {
        sys::segments_sent(self.fd.get_ref().as_fd())
    }

    /// Our end's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.fd.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.fd.get_ref().peer_addr()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

/// A connect started by [`TcpStream::start_connect`]: the socket, and
/// whether its handshake is still to end. Dropped before
/// [`Connecting::handshake`] returns, the socket closes like any other
/// (with whatever [`TcpStream::set_reset_on_close`] said).
#[derive(Debug)]
pub struct Connecting {
    stream: TcpStream,
    in_progress: bool,
}

impl Connecting {
    /// Waits for the handshake to end: `Ok` once connected, the connect's
    /// error otherwise (after which this `Connecting` is spent: drop it).
    /// `&mut self`, so that a caller that stops waiting
    /// (a timeout, a cancellation) still holds the socket.
    ///
    /// # Examples
    ///
    /// A port nobody listens on answers the handshake with a reset: the
    /// event says "failed", and `SO_ERROR` says which error.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use runtime::{Runtime, net::TcpStream};
    ///
    /// // A port that was free a moment ago, closed again at once.
    /// let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    /// let rt = Runtime::new()?;
    /// let refused = rt.block_on(async {
    ///     let mut connecting = TcpStream::start_connect(closed)?;
    ///     connecting.handshake().await
    /// });
    /// assert_eq!(refused.unwrap_err().kind(), ErrorKind::ConnectionRefused);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn handshake(&mut self) -> io::Result<()> {
        if self.in_progress {
            // Writable means the handshake ended; an error or hang-up seen
            // with it means it failed, and SO_ERROR says how.
            self.stream.fd.ready(Interest::Write).await;
            if self.stream.fd.has_failed() {
                if let Some(err) = sys::take_socket_error(self.stream.fd.get_ref().as_fd())? {
                    return Err(err);
                }
            }
            self.in_progress = false;
        }
        Ok(())
    }

    /// The socket, connected or not yet.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The socket, once [`Connecting::handshake`] returned `Ok`.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .finish()
    }
}
