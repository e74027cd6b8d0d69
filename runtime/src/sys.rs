//! The floor everything stands on: the Linux system calls, and all of the
//! crate's `unsafe` except the one place the waker needs none.
//!
//! Every function here is a thin, safe wrapper: it takes Rust types, calls
//! libc, turns `-1` into [`std::io::Error`], and hands back an [`OwnedFd`] so
//! that a descriptor is closed exactly once, by `Drop`. Nothing above this
//! file calls libc for I/O, so the whole contract with the kernel can be
//! checked in one read.
//!
//! ```text
//!   executor ─ driver ─┬─ reactor ──┐
//!                      └─ timers    ├──>  sys.rs  ──>  libc  ──>  kernel
//!   net, signal ───────── async_fd ─┘
//! ```
//!
//! Two rules hold for every descriptor created here:
//! - it is opened `CLOEXEC`, so a child process started with `fork`+`exec`
//!   never inherits our epoll set, our eventfd or a client's socket;
//! - sockets are opened non-blocking, in the same system call that creates
//!   them (`SOCK_NONBLOCK`), so no extra `fcntl` is paid per connection.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Turns the C convention (`-1` and `errno`) into `io::Result`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Wraps a descriptor a system call has just returned to us.
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: callers pass a descriptor a successful system call has just
    // created (epoll_create1, eventfd, socket, accept4, signalfd): nobody else
    // holds it, so `OwnedFd` becomes its one owner and closes it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

// ---------------------------------------------------------------------------
// epoll
// ---------------------------------------------------------------------------

/// Interest and event bits, re-exported under readable names.
pub(crate) const EPOLLIN: u32 = libc::EPOLLIN as u32;
pub(crate) const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
pub(crate) const EPOLLRDHUP: u32 = libc::EPOLLRDHUP as u32;
pub(crate) const EPOLLHUP: u32 = libc::EPOLLHUP as u32;
pub(crate) const EPOLLERR: u32 = libc::EPOLLERR as u32;
pub(crate) const EPOLLET: u32 = libc::EPOLLET as u32;

/// One readiness report from `epoll_wait`: which bits, for which token.
pub(crate) type EpollEvent = libc::epoll_event;

/// An epoll instance: the kernel's set of watched descriptors.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flags word and touches no memory of ours.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd: owned(fd) })
    }

    /// Starts watching `fd`; events for it will carry `token`.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: `event` is a valid, initialised epoll_event that lives across
        // the call; the kernel copies it and keeps no pointer to it.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })?;
        Ok(())
    }

    /// Stops watching `fd`. Must run *before* `fd` is closed: epoll watches
    /// the open file description, so a dup'd copy of a closed descriptor
    /// would otherwise keep delivering events. ENOENT (never added) and EBADF
    /// (already closed) mean "not watched any more", which is what we wanted.
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        // A non-null event pointer keeps kernels older than 2.6.9 happy;
        // the kernel ignores its contents for EPOLL_CTL_DEL.
        let mut unused = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `add`; the pointer is valid for the call.
        let ret =
            unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut unused) };
        match cvt(ret) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EBADF)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Waits for events, at most `timeout_ms` milliseconds (-1: no limit),
    /// filling `events` from its start. Returns how many arrived. EINTR is
    /// returned to the caller, who knows the absolute deadline to retry with.
    pub(crate) fn wait(&self, events: &mut Vec<EpollEvent>, timeout_ms: i32) -> io::Result<usize> {
        events.clear();
        let capacity = events.capacity().min(libc::c_int::MAX as usize) as libc::c_int;
        // SAFETY: the kernel writes at most `capacity` epoll_event records into
        // the vector's spare capacity, which is allocated and writable.
        let n = cvt(unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                capacity,
                timeout_ms,
            )
        })?;
        // SAFETY: epoll_wait initialised exactly the first `n` records, and
        // `n <= capacity`.
        unsafe { events.set_len(n as usize) };
        Ok(n as usize)
    }
}

/// How long to ask `epoll_wait` to sleep: `None` waits without limit, and a
/// duration is rounded *up* to whole milliseconds, so a timer 300 µs away
/// costs one 1 ms sleep rather than a busy loop of zero-timeout waits.
pub(crate) fn epoll_timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as i32
        }
    }
}

// ---------------------------------------------------------------------------
// eventfd: how another thread interrupts epoll_wait
// ---------------------------------------------------------------------------

/// A kernel counter that becomes readable when anyone adds to it. The
/// executor watches it in its epoll set; a waker on another thread writes
/// to it to pull the executor out of `epoll_wait`.
#[derive(Debug)]
pub(crate) struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes an initial value and flags, no pointers.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        Ok(EventFd { fd: owned(fd) })
    }

    pub(crate) fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Adds one to the counter, waking the epoll that watches it.
    pub(crate) fn notify(&self) {
        let one: u64 = 1;
        for _ in 0..2 {
            // SAFETY: we pass a pointer to 8 readable bytes, as eventfd requires.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
            if n == 8 {
                return;
            }
            // EAGAIN: the counter is at its maximum, so a wake is pending
            // anyway; reset it and write once more so the edge is fresh.
            self.drain();
        }
    }

    /// Resets the counter to zero, so the next `notify` is a fresh edge.
    pub(crate) fn drain(&self) {
        let mut value: u64 = 0;
        // SAFETY: we pass a pointer to 8 writable bytes, as eventfd requires.
        // EAGAIN (already zero) is the only expected failure and is harmless.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    }
}

// ---------------------------------------------------------------------------
// sockets
// ---------------------------------------------------------------------------

/// Creates a TCP socket for `addr`'s family, non-blocking and close-on-exec.
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes three integers and touches no memory of ours.
    let fd = cvt(unsafe { libc::socket(domain, ty, 0) })?;
    Ok(owned(fd))
}

fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: `value` is a live `T` and we pass its exact size, so the kernel
    // reads only bytes that belong to it. Every caller passes the type the
    // option expects (c_int or linger).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads a socket option into `T`, a plain C value (an `int`, a struct of
/// integers such as `tcp_info`), starting from all zeroes.
fn getsockopt<T: Copy>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, which has
    // exactly that size, and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    // SAFETY: `value` was zeroed, then partly or wholly overwritten by the
    // kernel; every `T` read here is made of integers only, for which any
    // bytes, zero included, are a valid value.
    Ok(unsafe { value.assume_init() })
}

/// SO_REUSEADDR: a restarted listener may bind while old connections to the
/// same port sit in TIME_WAIT.
pub(crate) fn set_reuse_addr(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1 as libc::c_int)
}

/// SO_REUSEPORT: several listeners (one per thread) bind the same port and
/// the kernel spreads new connections across them.
pub(crate) fn set_reuse_port(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1 as libc::c_int)
}

/// TCP_NODELAY: send small writes at once. On a listener, inherited by
/// every connection it accepts.
pub(crate) fn set_nodelay(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1 as libc::c_int)
}

/// IPV6_V6ONLY: whether an IPv6 socket refuses IPv4-mapped peers.
pub(crate) fn set_only_v6(fd: BorrowedFd<'_>, only: bool) -> io::Result<()> {
    setsockopt(
        fd,
        libc::IPPROTO_IPV6,
        libc::IPV6_V6ONLY,
        only as libc::c_int,
    )
}

/// IP_FREEBIND: bind to an address that is not (yet) on any interface,
/// such as a service address that arrives later. Linux reads the same flag
/// for IPv6 sockets, so it is set at the IP level for both families.
pub(crate) fn set_freebind(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::SOL_IP, libc::IP_FREEBIND, 1 as libc::c_int)
}

/// SO_LINGER with a zero timeout: `close` then sends a reset (RST) instead of
/// a clean FIN. A proxy uses it to pass a reset on rather than make a cut-off
/// stream look complete.
pub(crate) fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, linger)
}

/// SO_ERROR: the pending error of a socket, cleared by reading it. After a
/// non-blocking connect this is how we learn whether it succeeded.
pub(crate) fn take_socket_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let err: libc::c_int = getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// TCP_INFO's count of the segments this socket has sent, retransmissions
/// and pure ACKs included: what tells one segment carrying bytes and a FIN
/// from two.
pub(crate) fn segments_sent(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let info: libc::tcp_info = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO)?;
    Ok(info.tcpi_segs_out)
}

pub(crate) fn bind(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (storage, len) = sockaddr_from(addr);
    // SAFETY: `storage` holds a sockaddr of `len` valid bytes for the call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    Ok(())
}

pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: u32) -> io::Result<()> {
    let backlog = backlog.min(libc::c_int::MAX as u32) as libc::c_int;
    // SAFETY: listen takes two integers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(())
}

/// Starts a connect. On a non-blocking socket this usually returns
/// `EINPROGRESS`: the handshake goes on in the kernel and the socket turns
/// writable when it is done, successfully or not (then read SO_ERROR).
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (storage, len) = sockaddr_from(addr);
    // SAFETY: `storage` holds a sockaddr of `len` valid bytes for the call.
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    Ok(())
}

/// `send(2)` with `MSG_MORE`: the caller is about to end the stream
/// (`shutdown` or `close` follows at once), so the kernel may hold a small
/// tail back and send it in the same segment as the FIN. `MSG_NOSIGNAL`, as
/// every write of std's: a peer that is gone is an `EPIPE`, not a SIGPIPE.
pub(crate) fn send_before_fin(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call, and
    // `fd` is a descriptor the caller keeps open while borrowed.
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_MORE | libc::MSG_NOSIGNAL,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

// ---------------------------------------------------------------------------
// the allocator
// ---------------------------------------------------------------------------

/// `mallopt(M_TOP_PAD, bytes)`: how much more than asked glibc grows a heap
/// by. True if glibc took it.
#[cfg(target_env = "gnu")]
pub(crate) fn set_malloc_top_pad(bytes: usize) -> bool {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt takes two ints and touches no memory of ours; glibc
    // takes its arenas' locks to change the setting, so any thread may call it.
    unsafe { libc::mallopt(libc::M_TOP_PAD, bytes) == 1 }
}

/// Not glibc: no such setting.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn set_malloc_top_pad(_bytes: usize) -> bool {
    false
}

// ---------------------------------------------------------------------------
// pipes and splice
// ---------------------------------------------------------------------------

/// A pipe, both ends non-blocking and close-on-exec from birth
/// (`pipe2(O_NONBLOCK | O_CLOEXEC)`): `(read end, write end)`.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [libc::c_int; 2] = [-1, -1];
    // SAFETY: `fds` is valid for writes of the two descriptors pipe2 fills in.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    Ok((owned(fds[0]), owned(fds[1])))
}

/// `fcntl(F_SETPIPE_SZ)`: asks for a pipe of `size` bytes; the size the
/// kernel gave (rounded up to a power of two pages).
pub(crate) fn set_pipe_size(fd: BorrowedFd<'_>, size: usize) -> io::Result<usize> {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an int and touches no memory of ours; `fd`
    // is open while borrowed.
    let given = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size) })?;
    Ok(given as usize)
}

/// `splice(2)` of up to `len` bytes from `from` to `to` (one of them a
/// pipe), `SPLICE_F_NONBLOCK | SPLICE_F_MOVE`: the bytes move as page
/// references inside the kernel, never through a buffer of ours.
pub(crate) fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: null offsets (both ends are streams) and no memory of ours is
    // touched; both descriptors are open while borrowed.
    let moved = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE,
        )
    };
    if moved < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(moved as usize)
    }
}

/// Waits up to `timeout_ms` for `fd` to turn writable (poll(2)): the events
/// reported (`POLLOUT`, `POLLERR`, `POLLHUP`), or 0 if the time ran out.
/// For blocking code; the runtime itself waits in epoll.
pub(crate) fn poll_writable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<libc::c_short> {
    let mut watched = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `watched` is one valid pollfd that lives across the call,
    // and the count says one.
    let ready = cvt(unsafe { libc::poll(&mut watched, 1, timeout_ms) })?;
    Ok(if ready == 0 { 0 } else { watched.revents })
}

/// Takes one connection from a listening socket's queue. The new socket is
/// non-blocking and close-on-exec from birth (accept4 flags), saving two
/// `fcntl` calls per connection.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: the kernel writes at most `len` bytes of address into
    // `storage`, which is that large, and updates `len`.
    let new = cvt(unsafe {
        libc::accept4(fd.as_raw_fd(), storage.as_mut_ptr().cast(), &mut len, flags)
    })?;
    let new = owned(new);
    // SAFETY: zeroed() initialised every byte, and accept4 wrote a valid
    // address over the first `len` of them.
    let storage = unsafe { storage.assume_init() };
    Ok((new, sockaddr_to(&storage)?))
}

fn sockaddr_from(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data for which all-zero bytes
    // are a valid (unspecified-family) value.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for every
            // sockaddr type; we write one sockaddr_in at its start.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for one sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn sockaddr_to(storage: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is aligned and large enough to read one.
            let sin: &libc::sockaddr_in =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: &libc::sockaddr_in6 =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                port,
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        family => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the kernel returned an address of family {family}, not IPv4 or IPv6"),
        )),
    }
}

// ---------------------------------------------------------------------------
// signals
// ---------------------------------------------------------------------------

/// A set of signal numbers, as the kernel wants it.
pub(crate) fn sigset(signals: &[libc::c_int]) -> io::Result<libc::sigset_t> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given a pointer to.
    cvt(unsafe { libc::sigemptyset(set.as_mut_ptr()) })?;
    // SAFETY: sigemptyset succeeded, so the set is initialised.
    let mut set = unsafe { set.assume_init() };
    for &signal in signals {
        // SAFETY: `set` is an initialised sigset_t; sigaddset rejects
        // invalid signal numbers with EINVAL.
        cvt(unsafe { libc::sigaddset(&mut set, signal) })?;
    }
    Ok(set)
}

/// Blocks `set` for the calling thread (threads it starts later inherit the
/// mask), so those signals stay pending for a signalfd to read instead of
/// running their default action.
pub(crate) fn block_signals(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `set` is an initialised sigset_t; a null old-set pointer is allowed.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    Ok(())
}

/// A descriptor that turns pending signals of `set` into readable records.
pub(crate) fn signalfd(set: &libc::sigset_t) -> io::Result<OwnedFd> {
    let flags = libc::SFD_NONBLOCK | libc::SFD_CLOEXEC;
    // SAFETY: `set` is an initialised sigset_t; -1 asks for a new descriptor.
    let fd = cvt(unsafe { libc::signalfd(-1, set, flags) })?;
    Ok(owned(fd))
}

/// The size of one record read from a signalfd.
pub(crate) const SIGNALFD_RECORD: usize = mem::size_of::<libc::signalfd_siginfo>();

// ---------------------------------------------------------------------------
// the descriptor limit
// ---------------------------------------------------------------------------

/// RLIMIT_NOFILE: the soft limit (what `open`, `socket` and `accept` are held
/// to now) and the hard limit (how far an unprivileged process may raise it).
pub(crate) fn nofile_limits() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the whole call.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Sets RLIMIT_NOFILE's soft limit, keeping the hard one.
pub(crate) fn set_nofile_soft_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = nofile_limits()?;
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a valid rlimit, only read by the call; the kernel
    // refuses (EINVAL, EPERM) a soft limit above the hard one.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    Ok(())
}

/// Sets the soft RLIMIT_NOFILE of process `pid` (0: this one), keeping its
/// hard limit: prlimit(2), which may act on another process of the same
/// user (a parent lowering its running child's limit).
pub(crate) fn set_nofile_soft_limit_of(pid: u32, soft: u64) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new-limit pointer only reads the limits into `old`,
    // which is valid and writable for the whole call.
    cvt(unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) })?;
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit, only read by the call; a null
    // old-limit pointer is allowed. The kernel refuses (EINVAL, EPERM) a soft
    // limit above the hard one, and a process we may not act on.
    cvt(unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) })?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Descriptors passed between processes (SCM_RIGHTS)
// ---------------------------------------------------------------------------

/// The most descriptors one message may carry: the kernel's SCM_MAX_FD.
pub(crate) const MAX_FDS_PER_MESSAGE: usize = 253;

/// Room for one SCM_RIGHTS control message of [`MAX_FDS_PER_MESSAGE`]
/// descriptors, in `u64` words so that it is aligned for a `cmsghdr`.
const CMSG_WORDS: usize = (MAX_FDS_PER_MESSAGE * mem::size_of::<RawFd>() + 64) / 8;

/// Sends `bytes` on a Unix socket with copies of `fds` attached (at most
/// [`MAX_FDS_PER_MESSAGE`]). The descriptors stay open here: the receiver
/// gets new ones for the same open files.
pub(crate) fn send_with_fds(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<usize> {
    if fds.len() > MAX_FDS_PER_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} descriptors in one message; the kernel takes at most {MAX_FDS_PER_MESSAGE}",
                fds.len()
            ),
        ));
    }
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let mut control = [0u64; CMSG_WORDS];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: all-zero bytes are a valid msghdr (null pointers, zero lengths).
    let mut header: libc::msghdr = unsafe { mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    if !raw.is_empty() {
        let data_len = (raw.len() * mem::size_of::<RawFd>()) as libc::c_uint;
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = space;
        // `header` points at `control`, aligned (u64) and at least `space`
        // bytes long (CMSG_WORDS holds 253 descriptors and the header).
        // SAFETY: so the first cmsghdr and its data fit, and the copy writes
        // `raw.len()` descriptors into the CMSG_LEN(data_len) bytes reserved.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as usize;
            std::ptr::copy_nonoverlapping(
                raw.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                raw.len(),
            );
        }
    }
    // SAFETY: `header` points at `iov` (over `bytes`, only read by the kernel)
    // and at `control`, both alive across the call.
    let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &header, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// What one [`recv_with_fds`] read: the bytes, the descriptors that came
/// with them (close-on-exec), and whether either was cut for lack of room.
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) fds: Vec<OwnedFd>,
    pub(crate) truncated: bool,
}

/// Receives one message on a Unix socket into `buf`, with the descriptors
/// attached to it, each opened close-on-exec (MSG_CMSG_CLOEXEC): a child
/// this process starts later never inherits them by accident.
pub(crate) fn recv_with_fds(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    let mut control = [0u64; CMSG_WORDS];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero bytes are a valid msghdr (null pointers, zero lengths).
    let mut header: libc::msghdr = unsafe { mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = mem::size_of_val(&control);
    // SAFETY: `header` points at `iov` (over `buf`, writable, `buf.len()`
    // bytes) and at `control` (its size given), both alive across the call.
    let len = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // The kernel filled `control` with `msg_controllen` bytes of well-formed
    // control messages, and CMSG_FIRSTHDR and CMSG_NXTHDR stay within them.
    // SAFETY: an SCM_RIGHTS message's data is `cmsg_len - CMSG_LEN(0)` bytes
    // of descriptors new to this process: `owned` makes each its one owner.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..bytes / mem::size_of::<RawFd>() {
                    fds.push(owned(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&header, cmsg);
        }
    }
    let truncated = header.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
    Ok(Received {
        len: len as usize,
        fds,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoll_timeouts_round_up_never_down_to_zero() {
        assert_eq!(
            epoll_timeout_ms(None),
            -1,
            "no deadline: wait without limit"
        );
        assert_eq!(
            epoll_timeout_ms(Some(Duration::ZERO)),
            0,
            "only a zero wait is zero"
        );
        assert_eq!(epoll_timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(
            epoll_timeout_ms(Some(Duration::from_micros(300))),
            1,
            "a timer 0.3 ms away sleeps 1 ms, no busy loop"
        );
        assert_eq!(epoll_timeout_ms(Some(Duration::from_millis(5))), 5);
        assert_eq!(
            epoll_timeout_ms(Some(Duration::from_micros(5_001))),
            6,
            "never wakes before the deadline"
        );
        assert_eq!(
            epoll_timeout_ms(Some(Duration::from_secs(u64::MAX))),
            i32::MAX,
            "huge waits clamp"
        );
    }
}
