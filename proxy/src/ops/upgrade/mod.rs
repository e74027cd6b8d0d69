//! # upgrade: a new binary without a refused connection or an old process left behind
//!
//! The running proxy (started with `upgrade-socket PATH` or
//! `--upgrade-socket PATH`, epoll mode) offers its listening sockets on a
//! Unix socket; a new process started with `--upgrade-from PATH` takes
//! them, accepts on them, and tells the old one, which stops accepting
//! (HAProxy's `-x` with `expose-fd listeners`, in a protocol of our own:
//! [`wire`]). Then the second phase, which no peer has: the old process
//! hands over its established connections, both sockets and the relay's
//! state ([`hand`], [`adopt`]), and exits as soon as none is left, instead
//! of living as long as its longest stream.
//!
//! ```text
//!   new process                                   old process (serving all along)
//!   parse and check the configuration
//!   connect to PATH, SO_PEERCRED: our uid? ─────▶ SO_PEERCRED: our uid?
//!   hello ──────────────────────────────────────▶ a copy of every listener
//!   ◀─── listeners (SCM_RIGHTS, ≤ 253 a message), health, end
//!   keep the sockets of the frontends it still has (by name or address),
//!     bind more beside them (SO_REUSEPORT) if it has more workers,
//!     bind the new frontends, close the ones it no longer has
//!   seed the health boards; start the workers; they accept
//!   (systemd: MAINPID=, READY=1)
//!   taken ──────────────────────────────────────▶ stop accepting (EPOLL_CTL_DEL, close)
//!   ◀───────────────────────────────────────── ok  begin the drain
//!   its own socket file (made at startup under a temporary name) renamed
//!   over PATH, for the next upgrade
//!   adopt (the parcel format's version) ────────▶ every relaying connection parked
//!   ◀─── connections (≤ 126 a batch, 2 descriptors each), their bytes
//!   adopted: each one's fate ───────────────────▶ close the copies of those adopted,
//!                                                 resume the refused; exit 0 when
//!                                                 none is left (grace at most)
//! ```
//!
//! Any failure before "taken" (a configuration that does not parse, a port
//! that cannot be bound, the old process gone) ends the new process with
//! an error and leaves the old one as it was: it sees our end of the socket
//! close, and goes on serving.
//!
//! ## Why nothing queued is lost
//!
//! A handed socket is one socket with two owners (`runtime::fd_passing`):
//! its queue of connections not yet accepted is shared, and it closes only
//! when its last descriptor does. While both processes accept, a client
//! goes to one or the other; once the old one closes its copies, the new
//! one's keep the socket, and its queue, alive. Two traps:
//!
//! 1. **epoll registrations outlive a close.** They belong to the open file,
//!    not to the descriptor number: had the old process only closed its
//!    copy, its epoll set would keep reporting a socket the other process
//!    accepts on. Listeners are registered as *adopted* descriptors
//!    (`TcpListener::from_std`, `runtime/src/async_fd.rs`), which are
//!    removed with `EPOLL_CTL_DEL` before they close: the one kind of
//!    descriptor the runtime cannot assume it owns alone.
//! 2. **SO_REUSEPORT groups.** Each worker has its own listening socket per
//!    frontend, and the kernel spreads new connections over the group by a
//!    hash: closing one socket of the group resets the connections queued
//!    on it. So the new process accepts on *every* socket handed for a
//!    frontend it keeps, socket i on worker i mod n (a worker may accept on
//!    several), and binds more beside them if it has more workers than
//!    sockets. With an upgrade socket, every listener is bound with
//!    SO_REUSEPORT, even with one worker, so that a successor can.
//!
//! The listeners of a frontend the new configuration no longer has are
//! closed by the new process, as a SIGHUP reload that removes a frontend
//! closes its listener: the clients queued on them are reset, since no
//! frontend is left to serve them. That is the one loss, and the operator
//! asked for it.
//!
//! ## What else moves
//!
//! - **Health**: each checked backend's standing (up or down, and how far
//!   into `fall` or `rise`), keyed by frontend name and backend address,
//!   seeds the new process's boards: a backend known down gets no traffic
//!   until it passes `rise` checks ([`crate::policy::health::Standing`]).
//! - **Counters**: every frontend's and backend's totals as the old
//!   process lends its listeners, added to the new process's own, so that a
//!   total scraped before and after an upgrade does not go backwards.
//! - **Established connections**, in the second phase ([`hand`], [`adopt`]):
//!   each one a [`parcel`] (what the log and the limits need, and the relay
//!   machine's snapshot, `conn/snapshot.rs`) with its two descriptors and
//!   the bytes it held; `epoll/moving.rs` is what the workers do at each end.
//!
//! | file | what it holds |
//! |---|---|
//! | [`wire`] | the messages: lines of text, and the bytes a connection held |
//! | [`socket`] | the socket file (0600, a safe directory), one connection, the peer's uid |
//! | [`offer`] | the old process's side: the "upgrade" thread |
//! | [`take`] | the new process's side: take, then confirm |
//! | [`hand`] | the old process's second phase: connections out, in batches, two-phase |
//! | [`adopt`] | the new process's second phase: batches in, each one's fate |
//! | [`parcel`] | what travels with one connection, as one line |
//! | [`progress`] | how far a handover has come, for SIGQUIT |
//! | [`reexec`] | SIGUSR2: the own binary again, with `--upgrade-from` |
//! | [`notify`] | systemd's `READY=1` and `MAINPID=` |
//!
//! May import: [`crate::log`], [`crate::policy`] (a backend's standing) and
//! [`crate::conn`] (a direction, a relay's snapshot).
//! The epoll mode (`epoll/control.rs`) drives it.

pub mod adopt;
pub mod hand;
pub mod notify;
pub mod offer;
pub mod parcel;
pub mod progress;
pub mod reexec;
pub mod socket;
pub mod take;
pub mod wire;
