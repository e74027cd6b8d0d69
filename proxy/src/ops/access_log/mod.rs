//! The access log: one line per finished connection, in the layout of
//! HAProxy's `option tcplog`, so that tools written for HAProxy's logs
//! (and people used to reading them) read ours.
//!
//! ```text
//!   format   %ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq
//!   example  127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/127.0.0.1:9001 0/1/25 120 -- 1/1/1/1/0 0/0
//! ```
//!
//! HAProxy's syslog header (`Nov 30 12:00:00 host haproxy[42]:`) is left
//! out: the lines go to a file or standard error, not to syslog.
//!
//! | field | meaning here |
//! |-------|--------------|
//! | `%ci:%cp` | the client's address and port. An IPv6 address is printed bare, as HAProxy does (`inet_ntop`, then `:` and the port): `::1:51234`; the port is what follows the last colon. |
//! | `[%t]` | when the connection was accepted, `dd/Mon/yyyy:hh:mm:ss.mmm`, **in UTC** (HAProxy prints local time; run it with `TZ=UTC` to compare lines). |
//! | `%ft` | the frontend's name. |
//! | `%b/%s` | the backend and the server. We have no separate backend sections, so `%b` is the frontend's name (as with HAProxy's `listen`), and the server is named by its address (`127.0.0.1:9001`, `[::1]:9001`). `<NOSRV>` when no server was tried. |
//! | `%Tw` | milliseconds spent waiting for a backend below its maxconn; `-1` if no backend was ever tried (refused before, or none up). |
//! | `%Tc` | milliseconds to connect to the server, retries included; `-1` if no connect succeeded. |
//! | `%Tt` | milliseconds from accept to close. |
//! | `%B` | bytes from the server to the client (the JSON variant adds `bytes_up`). |
//! | `%ts` | the termination state, two characters: below. |
//! | `%ac/%fc/%bc/%sc` | connections open in the process, the frontend, the backend and the server when the line was made, this one included (the line is made before the connection gives its places back, as HAProxy does). |
//! | `%rc` | connect retries; prefixed with `+` when a retry went to another server (HAProxy's redispatch). Our proxy never retries the same server, so any retry is a redispatch: the count is not the logged server's. |
//! | `%sq/%bq` | HAProxy's positions in the server and backend queues. Our waiting is not an ordered queue, so both are always `0/0`; the time spent waiting is in `%Tw`. |
//!
//! Names are escaped as HAProxy escapes non-printable characters (section
//! 8.6 of its manual): every byte outside `!`..`~`, and `#`, `"` and `/`
//! (which would break the fields apart), becomes `#` and two hex digits.
//! Our configuration only allows letters, digits, `-`, `_` and `.` in a
//! name, so in practice nothing is escaped.
//!
//! ## The termination state: who ended it, and in which phase
//!
//! The first character says what ended the connection: `-` nothing
//! abnormal, `C` the client (an abort: a reset), `S` the server (an abort,
//! or it refused the connection), `P` the proxy (a deny rule, a bad PROXY
//! header), `R` a local resource ran out (descriptors, memory, ports), `I`
//! an internal error, `D` the server was marked down and its connections
//! cut, `K` killed by the operator (the shutdown grace period ran out), `c`
//! and `s` a client-side or server-side timeout. The second says where the
//! connection was: `R` before a server was chosen (PROXY header, access
//! control), `Q` waiting for a place, `C` connecting, `D` relaying data, `L`
//! the server had finished (sent its FIN) and the client was still to, `-`
//! a normal end. Tests use these two characters as their oracle.
//!
//! | where the connection ended | code | `%s` | `%Tw` | `%Tc` |
//! |----------------------------|------|------|-------|-------|
//! | relay [`Ending::Complete`]: both FINs passed on | `--` | server | wait | connect |
//! | relay [`Ending::ClientReset`] | `CD` | server | wait | connect |
//! | relay [`Ending::BackendReset`] | `SD` | server | wait | connect |
//! | relay [`Ending::IdleTimeout`] (one timer for both sides) | `cD` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], the server sent its FIN and the client stayed silent | `cL` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], the client sent its FIN and the server stayed silent | `sD` | server | wait | connect |
//! | relay [`Ending::FinTimeout`], side unknown | `cL` | server | wait | connect |
//! | every backend at its maxconn for `timeout queue` | `sQ` | `<NOSRV>` | time waited | `-1` |
//! | no backend up (nothing was tried) | `SC` | `<NOSRV>` | `-1` | `-1` |
//! | the last connect refused, unreachable, reset (after the retries) | `SC` | last server tried | wait | `-1` |
//! | the last connect timed out (`timeout connect`) | `sC` | last server tried | wait | `-1` |
//! | the last connect failed for a local resource (EMFILE, ENFILE, ENOBUFS, ENOMEM, EADDRNOTAVAIL) | `RC` | last server tried | wait | `-1` |
//! | the client went away while waiting for a place | `CQ` | `<NOSRV>` | time waited | `-1` |
//! | the client went away while we connected | `CC` | server tried | wait | `-1` |
//! | denied by an access rule or the per-source limit | `PR` | `<NOSRV>` | `-1` | `-1` |
//! | a malformed PROXY header | `PR` | `<NOSRV>` | `-1` | `-1` |
//! | no complete PROXY header within its timeout / the client closed first | `cR` / `CR` | `<NOSRV>` | `-1` | `-1` |
//! | cut at the end of the shutdown grace period | `KD` (`KC`, `KQ`, `KR` before the relay) | server | wait | connect |
//! | cut because its server was marked down | `DD` | server | wait | connect |
//!
//! Choices where HAProxy leaves room:
//!
//! - **Idle timeout is `cD`.** HAProxy has two timers (`timeout client`,
//!   `timeout server`); we have one for both sides. When both expire
//!   together HAProxy reports the client's first (its own example of an
//!   idle TCP session is `cD`), so we do too.
//! - **Half-closed timeouts are told apart.** HAProxy would log both as a
//!   data-phase timeout (the server socket is still open for writing). We
//!   log `cL` when the server had finished and the client never closed
//!   (HAProxy's `L`: "the server had already finished"), and `sD` when the
//!   client had finished and the server stopped answering, so a test can
//!   tell a half-closed timeout from an idle one. [`Ending::FinTimeout`]
//!   does not say which side sent its FIN, so [`Termination::of_relay`]
//!   takes that as an argument.
//! - **A backend maxconn wait that runs out is `sQ`**, HAProxy's queue
//!   timeout. At the global and frontend limits nobody is refused: the
//!   proxy stops accepting, as HAProxy does, and clients wait in the
//!   kernel's listen queue.
//! - **A reset after a half-close keeps `D`** (`CD`, `SD`): a reset is an
//!   abort whatever came before it.
//!
//! ## Buffering: a syscall per connection, or a little delay
//!
//! [`AccessLog`] is the destination, shared by every event loop: standard
//! error, or a file opened with `O_APPEND` (created `0640` if missing, less
//! the umask). Each event loop writes through its own [`Sink`], which
//! appends each line to a private buffer (no system call, no lock) and
//! writes the buffer with **one** `write(2)` when it passes
//! [`FLUSH_THRESHOLD`] (16 KiB, about 150 lines) or when [`Sink::flush`]
//! is called: from a timer every ~200 ms, and at shutdown; dropping a
//! `Sink` flushes it too.
//!
//! The trade: writing each line at once would cost a system call (and, on
//! a slow disk or a blocked stderr pipe, a stall) per connection on the
//! event loop that relays everyone's bytes. Buffering costs a few hundred
//! milliseconds before a line shows up, and the lines still in buffers are
//! lost if the process is killed with SIGKILL (a clean shutdown flushes).
//! A busy proxy makes one write per ~150 connections; a quiet one one per
//! timer tick at most.
//!
//! Because every write is whole lines, to a file opened with `O_APPEND`,
//! lines from several event loops (or processes) never interleave mid-line:
//! the kernel appends each write(2) to a regular file as one piece. Only a
//! write the kernel cuts short (a full disk) could split a line. To standard
//! error the write is made under the lock of `std::io::stderr()`, which the
//! daemon log takes too, so within the process lines stay whole; if stderr
//! is a pipe shared with other processes, the kernel keeps only writes of up
//! to `PIPE_BUF` (4 KiB) in one piece. A write that fails drops its buffer (it must not
//! grow without bound) and counts the lines in [`AccessLog::lost_lines`].
//!
//! Log rotation: rename-and-reopen is not supported yet; `copytruncate`
//! works, since `O_APPEND` writes always go to the current end of the file.
//!
//! ## JSON
//!
//! `--log-format json` writes one object per line with the same fields
//! under plain names, plus `bytes_up`:
//!
//! ```text
//! {"time":"2026-11-30T12:00:00.123Z","client_ip":"127.0.0.1","client_port":51234,
//!  "frontend":"web","backend":"web","server":"127.0.0.1:9001","wait_ms":0,"connect_ms":1,
//!  "total_ms":25,"bytes_down":120,"bytes_up":42,"termination":"--","retries":0,
//!  "redispatched":false,"active_process":1,"active_frontend":1,"active_backend":1,
//!  "active_server":1,"server_queue":0,"backend_queue":0}
//! ```
//!
//! (on one line). `server` is `null` where tcplog says `<NOSRV>`; times that
//! tcplog prints as `-1` are `-1` here too. For tests and tools,
//! [`json::read_object`] reads such a line back strictly and [`JSON_KEYS`]
//! lists its keys in order, so that they check our lines with one reader
//! and without a JSON dependency.

use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::conn::relay::Ending;
use crate::log::{Civil, civil};

/// A [`Sink`] writes its buffer once it holds this many bytes.
pub const FLUSH_THRESHOLD: usize = 16 * 1024;

/// What ended a connection: the first character of the termination state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `-`: nothing abnormal; both sides closed.
    Normal,
    /// `C`: the client aborted (a reset).
    ClientAbort,
    /// `S`: the server aborted, or refused the connection.
    ServerAbort,
    /// `P`: the proxy refused or cut it (a deny rule, a bad PROXY header).
    Proxy,
    /// `R`: a local resource ran out (descriptors, memory, source ports).
    Resource,
    /// `I`: an internal error; a bug.
    Internal,
    /// `D`: the server was marked down and its connections cut.
    ServerDown,
    /// `K`: killed on the operator's behalf (the shutdown grace period).
    Killed,
    /// `c`: the client-side timeout expired.
    ClientTimeout,
    /// `s`: the server-side timeout expired.
    ServerTimeout,
}

/// Where the connection was when it ended: the second character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `R`: before a server was chosen (PROXY header, access control).
    Request,
    /// `Q`: waiting for a place under a maxconn.
    Queue,
    /// `C`: connecting to the server.
    Connect,
    /// `D`: relaying data.
    Data,
    /// `L`: the server had finished; the client was still to.
    Last,
    /// `-`: a normal end, after the data.
    Normal,
}

impl Cause {
    /// Every cause, in the order of HAProxy's manual.
    pub const ALL: [Cause; 10] = [
        Cause::ClientAbort,
        Cause::ServerAbort,
        Cause::Proxy,
        Cause::Resource,
        Cause::Internal,
        Cause::ServerDown,
        Cause::Killed,
        Cause::ClientTimeout,
        Cause::ServerTimeout,
        Cause::Normal,
    ];

    /// Its character in the termination state.
    pub fn char(self) -> u8 {
        match self {
            Cause::Normal => b'-',
            Cause::ClientAbort => b'C',
            Cause::ServerAbort => b'S',
            Cause::Proxy => b'P',
            Cause::Resource => b'R',
            Cause::Internal => b'I',
            Cause::ServerDown => b'D',
            Cause::Killed => b'K',
            Cause::ClientTimeout => b'c',
            Cause::ServerTimeout => b's',
        }
    }

    /// The cause a character stands for.
    pub fn from_char(ch: u8) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.char() == ch)
    }
}

impl Phase {
    /// Every phase, in the order a connection goes through them.
    pub const ALL: [Phase; 6] = [
        Phase::Request,
        Phase::Queue,
        Phase::Connect,
        Phase::Data,
        Phase::Last,
        Phase::Normal,
    ];

    /// Its character in the termination state.
    pub fn char(self) -> u8 {
        match self {
            Phase::Request => b'R',
            Phase::Queue => b'Q',
            Phase::Connect => b'C',
            Phase::Data => b'D',
            Phase::Last => b'L',
            Phase::Normal => b'-',
        }
    }

    /// The phase a character stands for.
    pub fn from_char(ch: u8) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.char() == ch)
    }
}

/// A side of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client, which connected to us.
    Client,
    /// The server (backend) we connected to.
    Server,
}

/// Who ended a connection and in which phase: HAProxy's two characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termination {
    /// What ended it.
    pub cause: Cause,
    /// Where it was.
    pub phase: Phase,
}

impl Termination {
    /// `--`: both sides finished and their FINs were passed on.
    pub const COMPLETE: Termination = Termination::new(Cause::Normal, Phase::Normal);
    /// `CD`: the client reset the connection while data flowed.
    pub const CLIENT_RESET: Termination = Termination::new(Cause::ClientAbort, Phase::Data);
    /// `SD`: the server reset the connection while data flowed.
    pub const SERVER_RESET: Termination = Termination::new(Cause::ServerAbort, Phase::Data);
    /// `cD`: no byte either way for the idle timeout.
    pub const IDLE_TIMEOUT: Termination = Termination::new(Cause::ClientTimeout, Phase::Data);
    /// `cL`: the server sent its FIN and the client stayed silent for
    /// `timeout server-fin` (the relay's `server_fin_timeout`).
    pub const CLIENT_SILENT_AFTER_SERVER_FIN: Termination =
        Termination::new(Cause::ClientTimeout, Phase::Last);
    /// `sD`: the client sent its FIN and the server stayed silent for
    /// `timeout client-fin` (the relay's `client_fin_timeout`).
    pub const SERVER_SILENT_AFTER_CLIENT_FIN: Termination =
        Termination::new(Cause::ServerTimeout, Phase::Data);
    /// `sQ`: no place under every backend's maxconn within
    /// `timeout queue`.
    pub const QUEUE_TIMEOUT: Termination = Termination::new(Cause::ServerTimeout, Phase::Queue);
    /// `SC`: no backend is up; logged with `<NOSRV>`.
    pub const NO_SERVER: Termination = Termination::new(Cause::ServerAbort, Phase::Connect);
    /// `SC`: the last connect was refused (or unreachable).
    pub const CONNECT_REFUSED: Termination = Termination::new(Cause::ServerAbort, Phase::Connect);
    /// `sC`: the last connect did not complete within `timeout connect`.
    pub const CONNECT_TIMEOUT: Termination = Termination::new(Cause::ServerTimeout, Phase::Connect);
    /// `RC`: the last connect failed for lack of a local resource.
    pub const CONNECT_NO_RESOURCE: Termination = Termination::new(Cause::Resource, Phase::Connect);
    /// `CQ`: the client went away while waiting for a place.
    pub const CLIENT_ABORT_IN_QUEUE: Termination =
        Termination::new(Cause::ClientAbort, Phase::Queue);
    /// `CC`: the client went away while we connected to a server.
    pub const CLIENT_ABORT_IN_CONNECT: Termination =
        Termination::new(Cause::ClientAbort, Phase::Connect);
    /// `PR`: denied by an access rule or the per-source limit.
    pub const DENIED: Termination = Termination::new(Cause::Proxy, Phase::Request);
    /// `PR`: the PROXY protocol header was malformed.
    pub const BAD_PROXY_HEADER: Termination = Termination::new(Cause::Proxy, Phase::Request);
    /// `cR`: no complete PROXY header within its timeout.
    pub const PROXY_HEADER_TIMEOUT: Termination =
        Termination::new(Cause::ClientTimeout, Phase::Request);
    /// `CR`: the client closed before its PROXY header was complete.
    pub const CLIENT_ABORT_IN_REQUEST: Termination =
        Termination::new(Cause::ClientAbort, Phase::Request);
    /// `KD`: cut at the end of the shutdown grace period while relaying
    /// (cut earlier, `Termination::new(Cause::Killed, phase)`: `KC`, `KQ`,
    /// `KR`).
    pub const KILLED: Termination = Termination::new(Cause::Killed, Phase::Data);
    /// `DD`: cut because its server was marked down.
    pub const SERVER_DOWN: Termination = Termination::new(Cause::ServerDown, Phase::Data);

    /// A termination state from its two parts.
    pub const fn new(cause: Cause, phase: Phase) -> Termination {
        Termination { cause, phase }
    }

    /// The two characters, like `*b"SC"`.
    pub fn code(&self) -> [u8; 2] {
        [self.cause.char(), self.phase.char()]
    }

    /// Reads two characters like `SC` back; `None` for anything else.
    pub fn parse(code: &str) -> Option<Termination> {
        match code.as_bytes() {
            [c, p] => Some(Termination::new(
                Cause::from_char(*c)?,
                Phase::from_char(*p)?,
            )),
            _ => None,
        }
    }

    /// How a relay's ending is logged. `half_closed_by` is the side that
    /// sent its FIN first, if one did; only [`Ending::FinTimeout`] needs it
    /// (the other side is the one that stayed silent), and when it is
    /// unknown the client is blamed, as for the idle timeout.
    pub fn of_relay(ending: Ending, half_closed_by: Option<Side>) -> Termination {
        match ending {
            Ending::Complete => Termination::COMPLETE,
            Ending::ClientReset => Termination::CLIENT_RESET,
            Ending::BackendReset => Termination::SERVER_RESET,
            Ending::IdleTimeout => Termination::IDLE_TIMEOUT,
            Ending::Stopped => Termination::KILLED,
            Ending::FinTimeout => match half_closed_by {
                Some(Side::Client) => Termination::SERVER_SILENT_AFTER_CLIENT_FIN,
                Some(Side::Server) | None => Termination::CLIENT_SILENT_AFTER_SERVER_FIN,
            },
        }
    }

    /// How a failed connect to a server is logged when no retry is left:
    /// `sC` for a timeout reported by the kernel, `RC` when a local
    /// resource ran out, `SC` otherwise (refused, unreachable, reset). A
    /// connect cut by our own `timeout connect` is
    /// [`Termination::CONNECT_TIMEOUT`].
    pub fn of_connect_error(e: &io::Error) -> Termination {
        const RESOURCES: [i32; 5] = [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ];
        if e.kind() == io::ErrorKind::TimedOut {
            Termination::CONNECT_TIMEOUT
        } else if e.raw_os_error().is_some_and(|n| RESOURCES.contains(&n))
            || e.kind() == io::ErrorKind::OutOfMemory
        {
            Termination::CONNECT_NO_RESOURCE
        } else {
            Termination::CONNECT_REFUSED
        }
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char(char::from(self.cause.char()))?;
        f.write_char(char::from(self.phase.char()))
    }
}

/// The layout of the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// HAProxy's `option tcplog` (the default).
    Tcplog,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// Parses `tcplog` or `json` (the `--log-format` flag).
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "tcplog" => Some(Format::Tcplog),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tcplog => "tcplog",
            Format::Json => "json",
        }
    }
}

/// One finished connection, as the log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// When it was accepted (`%t`).
    pub accepted: SystemTime,
    /// The client's address (`%ci:%cp`).
    pub client: SocketAddr,
    /// The frontend's name (`%ft`, and `%b`).
    pub frontend: &'a str,
    /// The last server tried (`%s`); `None` prints `<NOSRV>`.
    pub backend: Option<SocketAddr>,
    /// Time spent waiting for a place (`%Tw`); `None` prints `-1`.
    pub wait: Option<Duration>,
    /// Time to connect, retries included (`%Tc`); `None`: never connected.
    pub connect: Option<Duration>,
    /// From accept to close (`%Tt`).
    pub total: Duration,
    /// Bytes from the server to the client (`%B`).
    pub bytes_down: u64,
    /// Bytes from the client to the server (JSON only).
    pub bytes_up: u64,
    /// Who ended it, and where (`%ts`).
    pub termination: Termination,
    /// Connect retries (`%rc`).
    pub retries: u32,
    /// Whether a retry went to another server than the first: prints `+`
    /// before the retries. Always `retries > 0` in our proxy.
    pub redispatched: bool,
    /// Connections open in the process (`%ac`).
    pub active_process: u32,
    /// Connections open on the frontend (`%fc`).
    pub active_frontend: u32,
    /// Connections open to the frontend's backends (`%bc`).
    pub active_backend: u32,
    /// Connections open to this server (`%sc`); 0 with `<NOSRV>`.
    pub active_server: u32,
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A time in milliseconds, or `-1` for none.
struct Millis(Option<Duration>);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{}", d.as_millis()),
            None => f.write_str("-1"),
        }
    }
}

impl Record<'_> {
    fn civil_accepted(&self) -> Civil {
        civil(self.accepted.duration_since(UNIX_EPOCH).unwrap_or_default())
    }

    /// Appends the tcplog line, without its newline.
    pub fn write_tcplog(&self, out: &mut String) {
        let Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
            millis,
        } = self.civil_accepted();
        let mon = MONTHS
            .get(month.saturating_sub(1) as usize)
            .copied()
            .unwrap_or("???");
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "{}:{} [{day:02}/{mon}/{year:04}:{hour:02}:{minute:02}:{second:02}.{millis:03}] ",
            self.client.ip(),
            self.client.port(),
        );
        escape_name(self.frontend, out);
        out.push(' ');
        escape_name(self.frontend, out);
        out.push('/');
        match self.backend {
            Some(server) => {
                let _ = write!(out, "{server}");
            }
            None => out.push_str("<NOSRV>"),
        }
        let plus = if self.redispatched { "+" } else { "" };
        let _ = write!(
            out,
            " {}/{}/{} {} {} {}/{}/{}/{}/{plus}{} 0/0",
            Millis(self.wait),
            Millis(self.connect),
            self.total.as_millis(),
            self.bytes_down,
            self.termination,
            self.active_process,
            self.active_frontend,
            self.active_backend,
            self.active_server,
            self.retries,
        );
    }

    /// Appends the JSON object, without its newline.
    pub fn write_json(&self, out: &mut String) {
        let Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
            millis,
        } = self.civil_accepted();
        let _ = write!(
            out,
            "{{\"time\":\"{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z\",\
             \"client_ip\":\"{}\",\"client_port\":{},\"frontend\":",
            self.client.ip(),
            self.client.port(),
        );
        json_string(self.frontend, out);
        out.push_str(",\"backend\":");
        json_string(self.frontend, out);
        out.push_str(",\"server\":");
        match self.backend {
            Some(server) => {
                let _ = write!(out, "\"{server}\"");
            }
            None => out.push_str("null"),
        }
        let _ = write!(
            out,
            ",\"wait_ms\":{},\"connect_ms\":{},\"total_ms\":{},\"bytes_down\":{},\"bytes_up\":{},\
             \"termination\":\"{}\",\"retries\":{},\"redispatched\":{},\"active_process\":{},\
             \"active_frontend\":{},\"active_backend\":{},\"active_server\":{},\
             \"server_queue\":0,\"backend_queue\":0}}",
            Millis(self.wait),
            Millis(self.connect),
            self.total.as_millis(),
            self.bytes_down,
            self.bytes_up,
            self.termination,
            self.retries,
            self.redispatched,
            self.active_process,
            self.active_frontend,
            self.active_backend,
            self.active_server,
        );
    }

    /// Appends the line in `format`, without its newline.
    pub fn write(&self, format: Format, out: &mut String) {
        match format {
            Format::Tcplog => self.write_tcplog(out),
            Format::Json => self.write_json(out),
        }
    }
}

/// HAProxy's escaping of log fields: `#` and two hex digits for any byte
/// outside `!`..`~`, and for `#`, `"` and `/`.
fn escape_name(name: &str, out: &mut String) {
    for &b in name.as_bytes() {
        if (b'!'..=b'~').contains(&b) && !matches!(b, b'#' | b'"' | b'/') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "#{b:02X}");
        }
    }
}

/// Undoes [`escape_name`]; `None` for a bad escape or invalid UTF-8.
fn unescape_name(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'#' {
            let hex = field.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A JSON string: quotes, backslashes and control characters escaped.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Where the lines go.
#[derive(Debug)]
enum Output {
    Stderr,
    /// The file behind a lock so that SIGUSR1 can swap in a new one
    /// ([`AccessLog::reopen`]); taken once per flush, not per line.
    File {
        file: RwLock<File>,
        path: PathBuf,
    },
}

/// An access log's destination and format, shared by every event loop;
/// each loop writes through its own [`Sink`].
#[derive(Debug)]
pub struct AccessLog {
    format: Format,
    output: Output,
    /// Lines dropped because a write failed.
    lost: AtomicU64,
}

impl AccessLog {
    /// A log on standard error.
    pub fn stderr(format: Format) -> Arc<AccessLog> {
        Arc::new(AccessLog {
            format,
            output: Output::Stderr,
            lost: AtomicU64::new(0),
        })
    }

    /// A log appended to the file at `path`, created (mode 0640, less the
    /// umask) if missing.
    pub fn file(path: &Path, format: Format) -> io::Result<Arc<AccessLog>> {
        let file = open_for_append(path)?;
        Ok(Arc::new(AccessLog {
            format,
            output: Output::File {
                file: RwLock::new(file),
                path: path.to_path_buf(),
            },
            lost: AtomicU64::new(0),
        }))
    }

    /// Opens the file again by its path, so that after a rotation renamed
    /// it (logrotate, `mv`), new lines go to a new file of the old name;
    /// what was written before stays in the renamed one. Returns the path,
    /// or `None` for standard error (nothing to reopen). If the path cannot
    /// be opened, lines go on to the file already open.
    pub fn reopen(&self) -> io::Result<Option<&Path>> {
        match &self.output {
            Output::Stderr => Ok(None),
            Output::File { file, path } => {
                let fresh = open_for_append(path)?;
                *file.write().unwrap_or_else(PoisonError::into_inner) = fresh;
                Ok(Some(path))
            }
        }
    }

    /// A buffer for one event loop.
    pub fn sink(self: &Arc<Self>) -> Sink {
        Sink {
            log: self.clone(),
            buffer: String::with_capacity(FLUSH_THRESHOLD + 512),
            lines: 0,
        }
    }

    /// The line format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The file written to; `None` for standard error.
    pub fn path(&self) -> Option<&Path> {
        match &self.output {
            Output::Stderr => None,
            Output::File { path, .. } => Some(path),
        }
    }

    /// Lines dropped so far because a write failed.
    pub fn lost_lines(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Whole lines, in one write(2) unless the kernel cuts it short.
    fn write_lines(&self, bytes: &[u8]) -> io::Result<()> {
        match &self.output {
            Output::Stderr => io::stderr().lock().write_all(bytes),
            Output::File { file, .. } => {
                let file = file.read().unwrap_or_else(PoisonError::into_inner);
                let mut file: &File = &file;
                file.write_all(bytes)
            }
        }
    }
}

/// Opens `path` for appending, created (mode 0640, less the umask) if
/// missing.
fn open_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open the access log {}: {e}", path.display()),
            )
        })
}

/// One event loop's buffer of lines for an [`AccessLog`]. Lines reach the
/// destination when the buffer passes [`FLUSH_THRESHOLD`], on
/// [`Sink::flush`], and when the sink is dropped.
#[derive(Debug)]
pub struct Sink {
    log: Arc<AccessLog>,
    buffer: String,
    /// Lines in `buffer`.
    lines: u64,
}

impl Sink {
    /// Adds one connection's line; writes the buffer if it is full. A
    /// failed write is counted in [`AccessLog::lost_lines`] (the next
    /// [`Sink::flush`] from the timer reports errors).
    pub fn record(&mut self, r: &Record<'_>) {
        r.write(self.log.format, &mut self.buffer);
        self.buffer.push('\n');
        self.lines += 1;
        if self.buffer.len() >= FLUSH_THRESHOLD {
            let _ = self.flush();
        }
    }

    /// Writes every buffered line now. On failure the lines are dropped
    /// (and counted): the buffer must not grow without bound.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let result = self.log.write_lines(self.buffer.as_bytes());
        if result.is_err() {
            self.log.lost.fetch_add(self.lines, Ordering::Relaxed);
        }
        self.buffer.clear();
        self.lines = 0;
        result
    }

    /// Bytes waiting in the buffer.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The log this sink writes to.
    pub fn log(&self) -> &Arc<AccessLog> {
        &self.log
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// One tcplog line read back into its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine {
    /// `%ci:%cp`.
    pub client: SocketAddr,
    /// `%t`, the text between the brackets.
    pub time: String,
    /// `%ft`, unescaped.
    pub frontend: String,
    /// `%b`, unescaped.
    pub backend: String,
    /// `%s`, unescaped; `None` for `<NOSRV>`.
    pub server: Option<String>,
    /// `%Tw` in ms, `-1` for none.
    pub wait_ms: i64,
    /// `%Tc` in ms, `-1` for none.
    pub connect_ms: i64,
    /// `%Tt` in ms.
    pub total_ms: i64,
    /// `%B`.
    pub bytes_down: u64,
    /// `%ts`.
    pub termination: Termination,
    /// `%rc`, without its `+`.
    pub retries: u32,
    /// Whether `%rc` had a `+`.
    pub redispatched: bool,
    /// `%ac`.
    pub active_process: u32,
    /// `%fc`.
    pub active_frontend: u32,
    /// `%bc`.
    pub active_backend: u32,
    /// `%sc`.
    pub active_server: u32,
    /// `%sq`.
    pub server_queue: u32,
    /// `%bq`.
    pub backend_queue: u32,
}

/// Reads one tcplog line back into its fields (for tests and tools).
/// Whatever precedes the last nine fields is ignored, so a line with a
/// syslog header (`Nov 30 12:00:00 host haproxy[42]: ...`) reads too, and
/// the `+` that HAProxy's `option logasap` puts before `%Tt` and `%B` is
/// accepted. `None` if the fields do not have the tcplog shape.
pub fn parse_tcplog(line: &str) -> Option<ParsedLine> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [
        client,
        time,
        frontend,
        backend_server,
        timers,
        bytes,
        code,
        counts,
        queues,
    ] = fields.get(fields.len().checked_sub(9)?..)?
    else {
        return None;
    };
    let (ip, port) = client.rsplit_once(':')?;
    let client = SocketAddr::new(ip.parse::<IpAddr>().ok()?, port.parse().ok()?);
    let time = time.strip_prefix('[')?.strip_suffix(']')?.to_string();
    let (backend, server) = backend_server.split_once('/')?;
    let server = match server {
        "<NOSRV>" => None,
        s => Some(unescape_name(s)?),
    };
    let [wait_ms, connect_ms, total_ms] = numbers::<i64, 3>(timers, true)?;
    let [
        active_process,
        active_frontend,
        active_backend,
        active_server,
        retries,
    ] = numbers::<u32, 5>(counts, true)?;
    let redispatched = counts.rsplit('/').next()?.starts_with('+');
    let [server_queue, backend_queue] = numbers::<u32, 2>(queues, false)?;
    let [bytes_down] = numbers::<u64, 1>(bytes, true)?;
    if wait_ms < -1 || connect_ms < -1 || total_ms < 0 {
        return None;
    }
    Some(ParsedLine {
        client,
        time,
        frontend: unescape_name(frontend)?,
        backend: unescape_name(backend)?,
        server,
        wait_ms,
        connect_ms,
        total_ms,
        bytes_down,
        termination: Termination::parse(code)?,
        retries,
        redispatched,
        active_process,
        active_frontend,
        active_backend,
        active_server,
        server_queue,
        backend_queue,
    })
}

/// `N` numbers separated by `/`; with `plus_on_last`, the last may carry a
/// `+` (HAProxy's redispatch and logasap marks), which is skipped.
fn numbers<T: std::str::FromStr + Copy + Default, const N: usize>(
    field: &str,
    plus_on_last: bool,
) -> Option<[T; N]> {
    let mut out = [T::default(); N];
    let mut parts = field.split('/');
    for (i, slot) in out.iter_mut().enumerate() {
        let mut part = parts.next()?;
        if plus_on_last && i + 1 == N {
            part = part.strip_prefix('+').unwrap_or(part);
        }
        // Integer parsing accepts a leading `+`: nowhere else is one allowed.
        if part.starts_with('+') {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// The keys of a JSON line, in the order [`Record::write_json`] writes them
/// (for tests and tools; a unit test holds the two together).
pub const JSON_KEYS: [&str; 20] = [
    "time",
    "client_ip",
    "client_port",
    "frontend",
    "backend",
    "server",
    "wait_ms",
    "connect_ms",
    "total_ms",
    "bytes_down",
    "bytes_up",
    "termination",
    "retries",
    "redispatched",
    "active_process",
    "active_frontend",
    "active_backend",
    "active_server",
    "server_queue",
    "backend_queue",
];

/// A strict reader of one flat JSON object, such as a JSON access-log line
/// (for tests and tools).
pub mod json {
    /// A JSON scalar: the values an access-log line holds.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        /// `null`.
        Null,
        /// `true` or `false`.
        Bool(bool),
        /// Any JSON number (exact for integers up to 2^53).
        Number(f64),
        /// A string, its escapes undone.
        Text(String),
    }

    /// Reads one JSON object whose values are all scalars (what the access
    /// log writes), strictly: JSON's grammar for strings and numbers,
    /// whitespace only between tokens, no duplicate key, nothing after the
    /// closing brace. The fields come in the order written. A `\u` escape
    /// of a surrogate is refused, even as a valid pair (our lines write
    /// such characters unescaped). `Err` says what is wrong, and where.
    pub fn read_object(text: &str) -> Result<Vec<(String, Value)>, String> {
        let mut r = Reader { text, i: 0 };
        let mut fields: Vec<(String, Value)> = Vec::new();
        r.skip_space();
        r.expect(b'{')?;
        r.skip_space();
        if !r.eat(b'}') {
            loop {
                r.skip_space();
                let at = r.i;
                let key = r.string()?;
                if fields.iter().any(|(k, _)| *k == key) {
                    return Err(format!("key {key:?} twice, at byte {at}"));
                }
                r.skip_space();
                r.expect(b':')?;
                r.skip_space();
                let value = r.value()?;
                fields.push((key, value));
                r.skip_space();
                if r.eat(b'}') {
                    break;
                }
                if !r.eat(b',') {
                    return Err(format!("expected ',' or '}}' at byte {}", r.i));
                }
            }
        }
        r.skip_space();
        if r.i != text.len() {
            return Err(format!("trailing bytes at {}", r.i));
        }
        Ok(fields)
    }

    /// The text and a byte position in it, always on a character boundary.
    struct Reader<'a> {
        text: &'a str,
        i: usize,
    }

    impl Reader<'_> {
        fn peek(&self) -> Option<u8> {
            self.text.as_bytes().get(self.i).copied()
        }

        fn next_char(&mut self) -> Option<char> {
            let c = self.text.get(self.i..)?.chars().next()?;
            self.i += c.len_utf8();
            Some(c)
        }

        /// Steps over `b` if it is next.
        fn eat(&mut self, b: u8) -> bool {
            let here = self.peek() == Some(b);
            if here {
                self.i += 1;
            }
            here
        }

        fn expect(&mut self, b: u8) -> Result<(), String> {
            if self.eat(b) {
                Ok(())
            } else {
                Err(format!("expected {:?} at byte {}", char::from(b), self.i))
            }
        }

        fn skip_space(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
        }

        /// Steps over a run of ASCII digits; how many.
        fn digits(&mut self) -> usize {
            let from = self.i;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.i += 1;
            }
            self.i - from
        }

        fn value(&mut self) -> Result<Value, String> {
            match self.peek() {
                Some(b'"') => Ok(Value::Text(self.string()?)),
                Some(b'n') => self.word("null", Value::Null),
                Some(b't') => self.word("true", Value::Bool(true)),
                Some(b'f') => self.word("false", Value::Bool(false)),
                Some(b'-' | b'0'..=b'9') => self.number(),
                _ => Err(format!("no value at byte {}", self.i)),
            }
        }

        fn word(&mut self, word: &str, value: Value) -> Result<Value, String> {
            let rest = self.text.as_bytes().get(self.i..).unwrap_or_default();
            if rest.starts_with(word.as_bytes()) {
                self.i += word.len();
                Ok(value)
            } else {
                Err(format!("no value at byte {}", self.i))
            }
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
        fn number(&mut self) -> Result<Value, String> {
            let start = self.i;
            self.eat(b'-');
            let int_start = self.i;
            let n = self.digits();
            if n == 0 || (n > 1 && self.text.as_bytes().get(int_start) == Some(&b'0')) {
                return Err(format!("bad number at byte {start}"));
            }
            if self.eat(b'.') && self.digits() == 0 {
                return Err(format!("bad fraction at byte {start}"));
            }
            if self.eat(b'e') || self.eat(b'E') {
                if !self.eat(b'+') {
                    self.eat(b'-');
                }
                if self.digits() == 0 {
                    return Err(format!("bad exponent at byte {start}"));
                }
            }
            let number = self.text.get(start..self.i).unwrap_or_default();
            number
                .parse()
                .map(Value::Number)
                .map_err(|e| format!("{e} at byte {start}"))
        }

        fn string(&mut self) -> Result<String, String> {
            self.expect(b'"')?;
            let mut out = String::new();
            loop {
                let at = self.i;
                match self.next_char().ok_or("unterminated string")? {
                    '"' => return Ok(out),
                    '\\' => match self.next_char().ok_or("unterminated escape")? {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            // Exactly four hex digits (`from_str_radix` alone
                            // would take a sign).
                            let hex = self
                                .text
                                .get(self.i..self.i + 4)
                                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                                .ok_or_else(|| format!("bad \\u escape at byte {at}"))?;
                            let code = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let c = char::from_u32(code)
                                .ok_or_else(|| format!("a surrogate escape at byte {at}"))?;
                            out.push(c);
                        }
                        other => return Err(format!("bad escape \\{other} at byte {at}")),
                    },
                    c if u32::from(c) < 0x20 => {
                        return Err(format!("a raw control character at byte {at}"));
                    }
                    c => out.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::json::{Value, read_object};
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// 2026-11-30T12:00:00.123Z.
    const NOON: u64 = 1_796_040_000_123;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn v6(a: Ipv6Addr, port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    /// A connection relayed to its end, as in the module docs.
    fn record() -> Record<'static> {
        Record {
            accepted: at(NOON),
            client: v4([127, 0, 0, 1], 51234),
            frontend: "web",
            backend: Some(v4([127, 0, 0, 1], 9001)),
            wait: Some(Duration::ZERO),
            connect: Some(Duration::from_millis(1)),
            total: Duration::from_millis(25),
            bytes_down: 120,
            bytes_up: 42,
            termination: Termination::COMPLETE,
            retries: 0,
            redispatched: false,
            active_process: 1,
            active_frontend: 1,
            active_backend: 1,
            active_server: 1,
        }
    }

    /// A client refused before any server was tried.
    fn refused() -> Record<'static> {
        Record {
            backend: None,
            wait: None,
            connect: None,
            total: Duration::from_millis(3),
            bytes_down: 0,
            bytes_up: 0,
            termination: Termination::NO_SERVER,
            active_backend: 0,
            active_server: 0,
            ..record()
        }
    }

    fn tcplog(r: &Record<'_>) -> String {
        let mut line = String::new();
        r.write_tcplog(&mut line);
        line
    }

    fn json(r: &Record<'_>) -> String {
        let mut line = String::new();
        r.write_json(&mut line);
        line
    }

    #[test]
    fn a_finished_connection_reads_like_haproxy_tcplog() {
        assert_eq!(
            tcplog(&record()),
            "127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/127.0.0.1:9001 0/1/25 120 -- \
             1/1/1/1/0 0/0"
        );
    }

    #[test]
    fn a_connection_without_a_server_prints_nosrv_and_minus_one() {
        assert_eq!(
            tcplog(&refused()),
            "127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/<NOSRV> -1/-1/3 0 SC 1/1/0/0/0 0/0"
        );
    }

    #[test]
    fn a_failed_connect_after_retries_names_the_last_server_and_marks_the_redispatch() {
        let r = Record {
            backend: Some(v4([10, 0, 0, 3], 5432)),
            wait: Some(Duration::from_millis(7)),
            connect: None,
            total: Duration::from_millis(4012),
            bytes_down: 0,
            termination: Termination::CONNECT_TIMEOUT,
            retries: 3,
            redispatched: true,
            ..record()
        };
        assert!(
            tcplog(&r).ends_with(" web/10.0.0.3:5432 7/-1/4012 0 sC 1/1/1/1/+3 0/0"),
            "{}",
            tcplog(&r)
        );
        let same_server = Record {
            redispatched: false,
            ..r
        };
        assert!(tcplog(&same_server).ends_with(" 1/1/1/1/3 0/0"));
    }

    #[test]
    fn times_are_whole_milliseconds_rounded_down() {
        let r = Record {
            wait: Some(Duration::from_micros(1999)),
            connect: Some(Duration::from_micros(999)),
            total: Duration::from_secs(3 * 86_400) + Duration::from_micros(500),
            bytes_down: u64::MAX,
            ..record()
        };
        assert!(
            tcplog(&r).contains(" 1/0/259200000 18446744073709551615 -- "),
            "{}",
            tcplog(&r)
        );
    }

    #[test]
    fn accept_dates_are_haproxy_dates_in_utc() {
        let cases = [
            (0, "01/Jan/1970:00:00:00.000"),
            (951_782_400_250, "29/Feb/2000:00:00:00.250"),
            (1_735_689_599_999, "31/Dec/2024:23:59:59.999"),
            (1_735_866_184_000, "03/Jan/2025:01:03:04.000"),
            (1_738_721_168_000, "05/Feb/2025:02:06:08.000"),
            (1_741_316_952_000, "07/Mar/2025:03:09:12.000"),
            (1_744_171_936_000, "09/Apr/2025:04:12:16.000"),
            (1_746_940_520_000, "11/May/2025:05:15:20.000"),
            (1_749_795_504_000, "13/Jun/2025:06:18:24.000"),
            (1_752_564_088_000, "15/Jul/2025:07:21:28.000"),
            (1_755_419_072_000, "17/Aug/2025:08:24:32.000"),
            (1_758_274_056_000, "19/Sep/2025:09:27:36.000"),
            (1_761_042_640_000, "21/Oct/2025:10:30:40.000"),
            (1_763_897_624_000, "23/Nov/2025:11:33:44.000"),
            (1_766_666_208_000, "25/Dec/2025:12:36:48.000"),
        ];
        for (ms, expected) in cases {
            let line = tcplog(&Record {
                accepted: at(ms),
                ..record()
            });
            assert!(line.contains(&format!(" [{expected}] ")), "{line}");
        }
        // Before the epoch (a clock gone wrong): printed as the epoch, not a panic.
        let early = Record {
            accepted: UNIX_EPOCH - Duration::from_secs(1),
            ..record()
        };
        assert!(tcplog(&early).contains(" [01/Jan/1970:00:00:00.000] "));
    }

    #[test]
    fn ipv6_clients_print_bare_as_haproxy_does_and_read_back() {
        let r = Record {
            client: v6(Ipv6Addr::LOCALHOST, 51234),
            backend: Some(v6(Ipv6Addr::LOCALHOST, 9001)),
            ..record()
        };
        let line = tcplog(&r);
        assert!(
            line.starts_with("::1:51234 [30/Nov/2026:12:00:00.123] web web/[::1]:9001 "),
            "{line}"
        );
        let parsed = parse_tcplog(&line).expect("an IPv6 line");
        assert_eq!(parsed.client, r.client);
        assert_eq!(parsed.server.as_deref(), Some("[::1]:9001"));

        // An IPv4 client on a dual-stack listener: inet_ntop's mapped form.
        let mapped = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped();
        let line = tcplog(&Record {
            client: v6(mapped, 4000),
            ..record()
        });
        assert!(line.starts_with("::ffff:10.0.0.1:4000 ["), "{line}");
        let parsed = parse_tcplog(&line).expect("a mapped line");
        assert_eq!(parsed.client, v6(mapped, 4000));
    }

    #[test]
    fn every_termination_of_the_table_has_its_code() {
        let named = [
            (Termination::COMPLETE, "--"),
            (Termination::CLIENT_RESET, "CD"),
            (Termination::SERVER_RESET, "SD"),
            (Termination::IDLE_TIMEOUT, "cD"),
            (Termination::CLIENT_SILENT_AFTER_SERVER_FIN, "cL"),
            (Termination::SERVER_SILENT_AFTER_CLIENT_FIN, "sD"),
            (Termination::QUEUE_TIMEOUT, "sQ"),
            (Termination::NO_SERVER, "SC"),
            (Termination::CONNECT_REFUSED, "SC"),
            (Termination::CONNECT_TIMEOUT, "sC"),
            (Termination::CONNECT_NO_RESOURCE, "RC"),
            (Termination::CLIENT_ABORT_IN_QUEUE, "CQ"),
            (Termination::CLIENT_ABORT_IN_CONNECT, "CC"),
            (Termination::DENIED, "PR"),
            (Termination::BAD_PROXY_HEADER, "PR"),
            (Termination::PROXY_HEADER_TIMEOUT, "cR"),
            (Termination::CLIENT_ABORT_IN_REQUEST, "CR"),
            (Termination::KILLED, "KD"),
            (Termination::SERVER_DOWN, "DD"),
        ];
        for (t, code) in named {
            assert_eq!(t.to_string(), code);
            assert_eq!(&t.code(), code.as_bytes());
            assert_eq!(Termination::parse(code), Some(t));
            // And the code reaches the line, in its place.
            let line = tcplog(&Record {
                termination: t,
                ..record()
            });
            assert!(line.contains(&format!(" 120 {code} 1/1/")), "{line}");
            assert_eq!(parse_tcplog(&line).map(|p| p.termination), Some(t));
        }
    }

    #[test]
    fn every_relay_ending_maps_to_the_documented_code() {
        use Ending::*;
        let cases = [
            (Complete, None, "--"),
            (ClientReset, None, "CD"),
            (BackendReset, None, "SD"),
            (IdleTimeout, None, "cD"),
            (FinTimeout, Some(Side::Server), "cL"),
            (FinTimeout, Some(Side::Client), "sD"),
            (FinTimeout, None, "cL"),
            // Only the fin timeout looks at who half-closed.
            (Complete, Some(Side::Client), "--"),
            (ClientReset, Some(Side::Server), "CD"),
            (BackendReset, Some(Side::Client), "SD"),
            (IdleTimeout, Some(Side::Client), "cD"),
        ];
        for (ending, side, code) in cases {
            assert_eq!(
                Termination::of_relay(ending, side).to_string(),
                code,
                "{ending:?} {side:?}"
            );
        }
    }

    #[test]
    fn connect_errors_map_to_server_timeout_or_resource() {
        let code = |errno: i32| {
            Termination::of_connect_error(&io::Error::from_raw_os_error(errno)).to_string()
        };
        assert_eq!(code(libc::ECONNREFUSED), "SC");
        assert_eq!(code(libc::ENETUNREACH), "SC");
        assert_eq!(code(libc::EHOSTUNREACH), "SC");
        assert_eq!(code(libc::ECONNRESET), "SC");
        assert_eq!(code(libc::ETIMEDOUT), "sC");
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ] {
            assert_eq!(code(errno), "RC", "errno {errno}");
        }
    }

    #[test]
    fn every_cause_and_phase_reads_back_and_nothing_else_does() {
        let mut seen = Vec::new();
        for cause in Cause::ALL {
            for phase in Phase::ALL {
                let t = Termination::new(cause, phase);
                let text = String::from_utf8(t.code().to_vec()).expect("ASCII");
                assert!(!seen.contains(&text), "{text} twice");
                seen.push(text.clone());
                assert_eq!(t.to_string(), text);
                assert_eq!(Termination::parse(&text), Some(t));
            }
        }
        for bad in ["", "-", "---", "ZD", "CZ", "cd", "--\n", "é"] {
            assert_eq!(Termination::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_are_escaped_as_haproxy_does_and_read_back() {
        let name = "a b#c/d\"é\t";
        let line = tcplog(&Record {
            frontend: name,
            ..record()
        });
        let escaped = "a#20b#23c#2Fd#22#C3#A9#09";
        assert!(
            line.contains(&format!("] {escaped} {escaped}/127.0.0.1:9001 ")),
            "{line}"
        );
        let parsed = parse_tcplog(&line).expect("an escaped line");
        assert_eq!(
            (parsed.frontend.as_str(), parsed.backend.as_str()),
            (name, name)
        );
        // A plain name, as the configuration allows, is left alone.
        assert!(
            tcplog(&Record {
                frontend: "db-1_main.v2",
                ..record()
            })
            .contains("] db-1_main.v2 db-1_main.v2/")
        );
    }

    #[test]
    fn tcplog_lines_read_back_field_by_field() {
        let records = [
            record(),
            refused(),
            Record {
                client: v6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7), 65535),
                backend: Some(v6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 1)),
                wait: Some(Duration::from_millis(1500)),
                connect: Some(Duration::from_millis(30)),
                total: Duration::from_millis(61_234),
                bytes_down: 1 << 40,
                termination: Termination::of_relay(Ending::FinTimeout, Some(Side::Client)),
                retries: 2,
                redispatched: true,
                active_process: 4000,
                active_frontend: 300,
                active_backend: 299,
                active_server: 17,
                ..record()
            },
            Record {
                termination: Termination::QUEUE_TIMEOUT,
                backend: None,
                wait: Some(Duration::from_millis(5000)),
                connect: None,
                ..record()
            },
        ];
        for r in &records {
            let line = tcplog(r);
            let p = parse_tcplog(&line).unwrap_or_else(|| panic!("unreadable: {line}"));
            let ms = |d: Option<Duration>| d.map_or(-1, |d| d.as_millis() as i64);
            assert_eq!(p.client, r.client);
            assert_eq!(p.time, "30/Nov/2026:12:00:00.123");
            assert_eq!((p.frontend.as_str(), p.backend.as_str()), ("web", "web"));
            assert_eq!(p.server, r.backend.map(|a| a.to_string()));
            assert_eq!(
                (p.wait_ms, p.connect_ms, p.total_ms),
                (ms(r.wait), ms(r.connect), r.total.as_millis() as i64)
            );
            assert_eq!(p.bytes_down, r.bytes_down);
            assert_eq!(p.termination, r.termination);
            assert_eq!((p.retries, p.redispatched), (r.retries, r.redispatched));
            assert_eq!(
                [
                    p.active_process,
                    p.active_frontend,
                    p.active_backend,
                    p.active_server
                ],
                [
                    r.active_process,
                    r.active_frontend,
                    r.active_backend,
                    r.active_server
                ]
            );
            assert_eq!((p.server_queue, p.backend_queue), (0, 0));
            // With its newline, as it sits in a file.
            assert_eq!(parse_tcplog(&format!("{line}\n")), Some(p));
        }
    }

    #[test]
    fn the_parser_reads_haproxy_lines_with_a_syslog_header() {
        let line = "Nov 30 12:00:05 lb1 haproxy[4242]: 192.0.2.10:40000 \
                    [30/Nov/2026:12:00:00.100] front back/srv2 12/3/4876 +1024 cD 7/5/5/2/+1 0/4";
        let p = parse_tcplog(line).expect("an HAProxy line");
        assert_eq!(p.client, v4([192, 0, 2, 10], 40000));
        assert_eq!(
            (p.frontend.as_str(), p.backend.as_str(), p.server.as_deref()),
            ("front", "back", Some("srv2"))
        );
        assert_eq!((p.wait_ms, p.connect_ms, p.total_ms), (12, 3, 4876));
        assert_eq!(
            (p.bytes_down, p.termination),
            (1024, Termination::IDLE_TIMEOUT)
        );
        assert_eq!((p.retries, p.redispatched), (1, true));
        assert_eq!((p.server_queue, p.backend_queue), (0, 4));
    }

    #[test]
    fn the_parser_refuses_what_is_not_a_tcplog_line() {
        let good = tcplog(&record());
        assert!(parse_tcplog(&good).is_some());
        let bad = [
            String::new(),
            "hello world".to_string(),
            good.replace(" 0/0", ""),
            good.replace("127.0.0.1:51234", "127.0.0.1"),
            good.replace("127.0.0.1:51234", "localhost:51234"),
            good.replace("127.0.0.1:51234", "127.0.0.1:70000"),
            good.replace("[30/Nov/2026:12:00:00.123]", "30/Nov/2026:12:00:00.123"),
            good.replace("web/127.0.0.1:9001", "web"),
            good.replace("0/1/25", "0/1"),
            good.replace("0/1/25", "0/1/25/4"),
            good.replace("0/1/25", "-2/1/25"),
            good.replace("0/1/25", "0/1/-1"),
            good.replace("0/1/25", "+0/1/25"),
            good.replace(" 120 ", " -120 "),
            good.replace(" -- ", " ZZ "),
            good.replace(" -- ", " --- "),
            good.replace("1/1/1/1/0", "1/1/1/0"),
            good.replace("1/1/1/1/0", "1/1/1/1/++0"),
            good.replace("1/1/1/1/0", "+1/1/1/1/0"),
            good.replace(" 0/0", " 0/+0"),
            good.replace("web web/", "w#zz web/"),
            good.replace("web web/", "w#F0 web/"),
        ];
        for line in &bad {
            assert_eq!(parse_tcplog(line), None, "{line:?}");
        }
    }

    fn field<'a>(fields: &'a [(String, Value)], key: &str) -> &'a Value {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {key}"))
    }

    #[test]
    fn json_lines_have_every_field_under_a_plain_name() {
        let line = json(&record());
        assert_eq!(
            line,
            "{\"time\":\"2026-11-30T12:00:00.123Z\",\"client_ip\":\"127.0.0.1\",\
             \"client_port\":51234,\"frontend\":\"web\",\"backend\":\"web\",\
             \"server\":\"127.0.0.1:9001\",\"wait_ms\":0,\"connect_ms\":1,\"total_ms\":25,\
             \"bytes_down\":120,\"bytes_up\":42,\"termination\":\"--\",\"retries\":0,\
             \"redispatched\":false,\"active_process\":1,\"active_frontend\":1,\
             \"active_backend\":1,\"active_server\":1,\"server_queue\":0,\"backend_queue\":0}"
        );
        // The writer and JSON_KEYS cannot drift apart: same keys, same order,
        // with a server and without.
        for line in [line, json(&refused())] {
            let fields = read_object(&line).expect("valid JSON");
            let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, JSON_KEYS, "{line}");
        }

        let fields = read_object(&json(&refused())).expect("valid JSON");
        assert_eq!(field(&fields, "server"), &Value::Null);
        assert_eq!(field(&fields, "wait_ms"), &Value::Number(-1.0));
        assert_eq!(field(&fields, "connect_ms"), &Value::Number(-1.0));
        assert_eq!(field(&fields, "termination"), &Value::Text("SC".into()));
    }

    #[test]
    fn json_escapes_what_must_be_escaped_and_still_reads() {
        let name = "we\"b\\\n\r\t\u{1}\u{7f}é/";
        let r = Record {
            frontend: name,
            client: v6(Ipv6Addr::LOCALHOST, 5),
            backend: Some(v6(Ipv6Addr::LOCALHOST, 9001)),
            termination: Termination::CLIENT_SILENT_AFTER_SERVER_FIN,
            retries: 1,
            redispatched: true,
            ..record()
        };
        let line = json(&r);
        assert!(!line.contains('\n') && !line.contains('\u{1}'), "{line:?}");
        let fields = read_object(&line).unwrap_or_else(|e| panic!("invalid JSON ({e}): {line}"));
        assert_eq!(field(&fields, "frontend"), &Value::Text(name.into()));
        assert_eq!(field(&fields, "backend"), &Value::Text(name.into()));
        assert_eq!(field(&fields, "client_ip"), &Value::Text("::1".into()));
        assert_eq!(field(&fields, "client_port"), &Value::Number(5.0));
        assert_eq!(field(&fields, "server"), &Value::Text("[::1]:9001".into()));
        assert_eq!(field(&fields, "termination"), &Value::Text("cL".into()));
        assert_eq!(field(&fields, "redispatched"), &Value::Bool(true));
        assert!(
            read_object(&line[..line.len() - 1]).is_err(),
            "a cut line read"
        );
    }

    #[test]
    fn the_json_reader_is_strict() {
        let ok = read_object(r#"{"a":1,"b":"x\"y\u0041","c":null,"d":true,"e":-1.5e3}"#)
            .expect("valid JSON");
        assert_eq!(ok.len(), 5);
        assert_eq!(ok[1].1, Value::Text("x\"yA".into()));
        assert_eq!(ok[4].1, Value::Number(-1500.0));
        assert_eq!(read_object(" { } "), Ok(Vec::new()));
        assert_eq!(
            read_object("{ \"a\" : false ,\"b\":0.5E+1}"),
            Ok(vec![
                ("a".into(), Value::Bool(false)),
                ("b".into(), Value::Number(5.0))
            ])
        );
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":01}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"{"a":1}}"#,
            "{\"a\":\"tab\t\"}",
            "{\"a\":\"\n\"}",
            r#"{"a":nul}"#,
            r#"{"a" 1}"#,
            r#"{"a":1"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e}"#,
            r#"{"a":+1}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u41"}"#,
            r#"{"a":"\u+041"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"é"#,
            r#"{"a":[1]}"#,
            r#"{a:1}"#,
            "",
        ] {
            assert!(read_object(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn formats_parse_by_name() {
        assert_eq!(Format::parse("tcplog"), Some(Format::Tcplog));
        assert_eq!(Format::parse("json"), Some(Format::Json));
        assert_eq!(Format::parse("JSON"), None);
        assert_eq!(Format::Json.name(), "json");
    }

    /// A fresh path in the temporary directory, removed when dropped.
    struct TempPath(PathBuf);

    impl TempPath {
        fn new(tag: &str) -> TempPath {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            TempPath(std::env::temp_dir().join(format!(
                "proxy-access-log-{tag}-{}-{nanos}.log",
                std::process::id()
            )))
        }

        fn lines(&self) -> Vec<String> {
            std::fs::read_to_string(&self.0)
                .expect("the log file")
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn a_sink_writes_nothing_before_the_threshold_or_a_flush() {
        let path = TempPath::new("buffering");
        let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
        let mut sink = log.sink();
        let line_len = tcplog(&record()).len() + 1;

        sink.record(&record());
        assert_eq!(sink.buffered(), line_len);
        assert!(path.lines().is_empty(), "written before a flush");

        // Up to the threshold, still nothing; the line that reaches it
        // writes the whole buffer at once.
        let mut recorded = 1;
        while sink.buffered() > 0 {
            assert!(
                path.lines().is_empty(),
                "written at {} bytes",
                sink.buffered()
            );
            sink.record(&record());
            recorded += 1;
        }
        assert_eq!(recorded, FLUSH_THRESHOLD.div_ceil(line_len));
        let lines = path.lines();
        assert_eq!(lines.len(), recorded);
        assert!(lines.iter().all(|l| parse_tcplog(l).is_some()));

        sink.record(&refused());
        assert_eq!(path.lines().len(), recorded);
        sink.flush().expect("a flush");
        assert_eq!(sink.buffered(), 0);
        let lines = path.lines();
        assert_eq!(lines.len(), recorded + 1);
        assert_eq!(lines.last(), Some(&tcplog(&refused())));
        sink.flush().expect("an empty flush");

        // Dropping a sink flushes it.
        sink.record(&record());
        drop(sink);
        assert_eq!(path.lines().len(), recorded + 2);
        assert_eq!(log.lost_lines(), 0);
        assert_eq!(log.path(), Some(path.0.as_path()));
    }

    #[test]
    fn a_file_log_appends_and_creates_the_file_0640() {
        use std::os::unix::fs::PermissionsExt;
        let path = TempPath::new("append");
        {
            let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
            let mode = std::fs::metadata(&path.0)
                .expect("the new file")
                .permissions()
                .mode();
            // 0640, less whatever the umask takes away.
            assert_eq!(mode & 0o777 & !0o640, 0, "mode {mode:o}");
            assert_eq!(mode & 0o600, 0o600, "mode {mode:o}");
            log.sink().record(&record());
        }
        // A second opening (a restart) appends after what is there.
        let log = AccessLog::file(&path.0, Format::Json).expect("the existing file");
        assert_eq!(log.format(), Format::Json);
        log.sink().record(&refused());
        let lines = path.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], tcplog(&record()));
        assert_eq!(lines[1], json(&refused()));
    }

    #[test]
    fn reopen_after_a_rename_starts_a_new_file_of_the_old_name() {
        let path = TempPath::new("reopen");
        let rotated = TempPath::new("reopen-rotated");
        let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
        let mut sink = log.sink();
        sink.record(&record());
        sink.flush().expect("flush");
        // logrotate's way: rename, then tell the process.
        std::fs::rename(&path.0, &rotated.0).expect("rename");
        sink.record(&refused());
        sink.flush().expect("flush");
        assert_eq!(log.reopen().expect("reopen"), Some(path.0.as_path()));
        sink.record(&record());
        sink.flush().expect("flush");
        // Before the reopen, lines follow the renamed file; after, the new one.
        assert_eq!(rotated.lines(), [tcplog(&record()), tcplog(&refused())]);
        assert_eq!(path.lines(), [tcplog(&record())]);
        // Standard error has nothing to reopen.
        assert_eq!(
            AccessLog::stderr(Format::Json).reopen().expect("stderr"),
            None
        );
    }

    #[test]
    fn opening_a_log_where_it_cannot_be_says_where() {
        let path = Path::new("/nonexistent-directory/access.log");
        let e = AccessLog::file(path, Format::Tcplog).expect_err("no such directory");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("/nonexistent-directory/access.log"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_write_drops_and_counts_the_lines() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let Ok(log) = AccessLog::file(Path::new("/dev/full"), Format::Tcplog) else {
            return;
        };
        let mut sink = log.sink();
        for _ in 0..3 {
            sink.record(&record());
        }
        assert!(sink.flush().is_err());
        assert_eq!((sink.buffered(), log.lost_lines()), (0, 3));
        // The threshold flush fails the same way, without a panic, and
        // empties the buffer all the same.
        let mut recorded = 0;
        while recorded == 0 || sink.buffered() > 0 {
            sink.record(&record());
            recorded += 1;
            assert!(recorded < 10_000, "the buffer never reached the threshold");
        }
        assert_eq!(log.lost_lines(), 3 + recorded);
    }

    #[test]
    fn two_threads_appending_to_one_file_never_split_a_line() {
        const PER_THREAD: usize = 3000;
        let path = TempPath::new("threads");
        let names = ["first", "second-with-a-longer-name"];
        let threads: Vec<_> = names
            .iter()
            .map(|&name| {
                let path = path.0.clone();
                std::thread::spawn(move || {
                    // Each thread opens the file itself: two descriptors, as
                    // two processes would have, each with O_APPEND.
                    let log = AccessLog::file(&path, Format::Tcplog).expect("the shared file");
                    let mut sink = log.sink();
                    for i in 0..PER_THREAD {
                        sink.record(&Record {
                            frontend: name,
                            bytes_down: i as u64,
                            ..record()
                        });
                        if i % 500 == 0 {
                            sink.flush().expect("a flush");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a writer thread");
        }
        let lines = path.lines();
        assert_eq!(lines.len(), names.len() * PER_THREAD);
        for name in names {
            let mut seen: Vec<u64> = lines
                .iter()
                .map(|l| parse_tcplog(l).unwrap_or_else(|| panic!("a split line: {l:?}")))
                .filter(|p| p.frontend == name)
                .map(|p| p.bytes_down)
                .collect();
            // Each thread's lines arrive whole and in its order.
            assert!(seen.is_sorted(), "{name}: out of order");
            seen.dedup();
            assert_eq!(seen.len(), PER_THREAD, "{name}");
        }
    }

    #[test]
    fn a_json_sink_writes_json_lines() {
        let path = TempPath::new("json");
        let log = AccessLog::file(&path.0, Format::Json).expect("a new log file");
        let mut sink = log.sink();
        sink.record(&record());
        sink.record(&refused());
        sink.flush().expect("a flush");
        let lines = path.lines();
        assert_eq!(lines.len(), 2);
        for line in &lines {
            let fields = read_object(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, JSON_KEYS);
        }
    }

    #[test]
    fn a_stderr_log_takes_lines_without_a_file() {
        let log = AccessLog::stderr(Format::Tcplog);
        assert_eq!((log.path(), log.format()), (None, Format::Tcplog));
        let mut sink = log.sink();
        assert!(sink.flush().is_ok());
        assert_eq!(sink.buffered(), 0);
        assert!(Arc::ptr_eq(sink.log(), &log));
    }
}
