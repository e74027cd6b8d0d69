//! Syslog: messages to a syslog daemon, with HAProxy's `log` line's
//! choices: where ([`target`]: UDP, TCP or a Unix socket), which header
//! ([`header`]: `local`, `rfc3164`, `rfc5424`; facility, tag, PID), how
//! long a message may be, and which severities go.
//!
//! ```text
//!   log 127.0.0.1:514 len 1024 format rfc5424 local0 info notice
//!       └ target     └ max_len    └ layout   └ facility └ level └ min_level
//! ```
//!
//! The access log sends its lines here (one per connection, severity
//! `info`), batched per event loop as it batches them for a file; the
//! daemon's own lines come here too (`error` as `err`, `warn` as
//! `warning`, `info` as `notice`, `debug` as `debug`), one at a time, and
//! still go to stderr as well. A message is one datagram over UDP and a
//! Unix socket ([`datagram`]: a batch is one `sendmmsg`), one frame on a
//! TCP connection ([`stream`]: a batch is one `write`, by a thread of its
//! own). Nothing here ever blocks the caller: a destination that is down
//! or slow loses messages, and [`Syslog::lost`] counts them.
//!
//! `len` bounds a message, header included, as HAProxy's does: a longer
//! one is cut (at a character boundary, so that it stays UTF-8).

pub mod datagram;
pub mod header;
pub mod stream;
pub mod target;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use datagram::Datagram;
use header::{Facility, Header, Layout, Severity, valid_tag};
use stream::Stream;
use target::Target;

/// `len`'s default: what every syslog server takes (RFC 3164's limit).
pub const DEFAULT_LEN: u32 = 1024;
/// `len`'s range, HAProxy's.
pub const LEN_RANGE: std::ops::RangeInclusive<u32> = 80..=65535;

/// A `log` line: where messages go, and what their headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Where.
    pub target: Target,
    /// `len N`: the longest message, header included.
    pub max_len: u32,
    /// `format`: the header's layout (`None`: `local`, or `rfc3164` with
    /// `log-send-hostname`, as HAProxy chooses).
    pub layout: Option<Layout>,
    /// The facility of every message.
    pub facility: Facility,
    /// The least severe messages sent (`None`: all of them).
    pub level: Option<Severity>,
    /// More severe messages are sent as this one (`None`: as they are).
    pub min_level: Option<Severity>,
}

impl Destination {
    /// The header of this destination's messages: `tag` (`log-tag`; else
    /// the program's name), and the host `log-send-hostname` names (`Some(None)`:
    /// this system's name; `None`: no such line, which also leaves the
    /// default layout `local`).
    pub fn header(&self, tag: Option<&str>, send_hostname: Option<Option<&str>>) -> Header {
        let default = match send_hostname {
            Some(_) => Layout::Rfc3164,
            None => Layout::Local,
        };
        Header {
            layout: self.layout.unwrap_or(default),
            facility: self.facility,
            hostname: send_hostname
                .flatten()
                .unwrap_or_else(|| hostname())
                .to_string(),
            tag: tag.map_or_else(program_name, str::to_string),
            pid: crate::log::pid(),
        }
    }
}

/// How messages travel.
#[derive(Debug)]
enum Transport {
    Datagram(Datagram),
    Stream(Stream),
}

/// An open syslog destination, shared by every thread that logs.
#[derive(Debug)]
pub struct Syslog {
    target: Target,
    header: Header,
    max_len: usize,
    level: Option<Severity>,
    min_level: Option<Severity>,
    transport: Transport,
    /// Messages lost (a failed send, a full queue, a destination down).
    lost: Arc<AtomicU64>,
}

impl Syslog {
    /// Opens `destination` with `header`: a socket (UDP, Unix), or the
    /// thread that owns the TCP connection (which connects on the first
    /// message: a server not yet up is not an error here).
    pub fn open(destination: &Destination, header: Header) -> io::Result<Arc<Syslog>> {
        let lost = Arc::new(AtomicU64::new(0));
        let target = &destination.target;
        let transport = match target {
            Target::Udp(addr) => Transport::Datagram(Datagram::udp(*addr)?),
            Target::Unix(path) => Transport::Datagram(Datagram::unix(path)?),
            Target::Tcp(addr) => Transport::Stream(Stream::start(*addr, lost.clone())?),
        };
        Ok(Arc::new(Syslog {
            target: target.clone(),
            header,
            max_len: destination.max_len as usize,
            level: destination.level,
            min_level: destination.min_level,
            transport,
            lost,
        }))
    }

    /// Would a message of `severity` be sent (the `log` line's level)?
    pub fn accepts(&self, severity: Severity) -> bool {
        self.level.is_none_or(|level| severity <= level)
    }

    /// Appends one message of `severity` to `out`, ready to send: the
    /// header, then what `message` writes, cut to `len`, and on TCP its
    /// length in front. A batch is any number of these, back to back.
    pub fn frame(&self, severity: Severity, out: &mut String, message: impl FnOnce(&mut String)) {
        let severity = self.min_level.map_or(severity, |min| severity.max(min));
        let start = out.len();
        self.header.write(severity, SystemTime::now(), out);
        message(out);
        if out.len() - start > self.max_len {
            let mut cut = start + self.max_len;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
        }
        if let Transport::Stream(_) = self.transport {
            let length = out.len() - start;
            out.insert_str(start, &format!("{length} "));
        }
    }

    /// Sends the messages [`Syslog::frame`] put in `buffer`, message `i`
    /// ending at `ends[i]`. Those that cannot go are lost and counted; the
    /// error says why.
    pub fn send(&self, buffer: &str, ends: &[usize]) -> io::Result<()> {
        let count = ends.len() as u64;
        let result = match &self.transport {
            Transport::Datagram(socket) => {
                socket.send(buffer.as_bytes(), ends).map_err(|(sent, e)| {
                    self.lost.fetch_add(count - sent as u64, Ordering::Relaxed);
                    e
                })
            }
            Transport::Stream(stream) => stream
                .send(buffer.as_bytes().to_vec(), count)
                .inspect_err(|_| {
                    self.lost.fetch_add(count, Ordering::Relaxed);
                }),
        };
        result.map_err(|e| io::Error::new(e.kind(), format!("syslog {}: {e}", self.target)))
    }

    /// Sends one message of `severity` at once (a daemon line), if the
    /// level lets it through. A failure is only counted: the daemon's log
    /// cannot report on itself.
    pub fn send_line(&self, severity: Severity, text: &str) {
        if !self.accepts(severity) {
            return;
        }
        let mut buffer = String::with_capacity(text.len() + 64);
        self.frame(severity, &mut buffer, |out| out.push_str(text));
        let _ = self.send(&buffer, &[buffer.len()]);
    }

    /// Messages lost so far.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Waits, up to `limit`, until every message handed over is on its way
    /// (TCP: written by its thread); datagrams are, already.
    pub fn drain(&self, limit: Duration) {
        if let Transport::Stream(stream) = &self.transport {
            stream.drain(limit);
        }
    }

    /// Where it sends.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// What its headers say.
    pub fn header(&self) -> &Header {
        &self.header
    }
}

impl fmt::Display for Syslog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.header;
        write!(
            f,
            "syslog {} ({}, {}, tag {})",
            self.target,
            h.layout.name(),
            h.facility.name(),
            h.tag
        )
    }
}

/// This system's host name, read once (`localhost` if it cannot be).
pub fn hostname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        nix::unistd::gethostname()
            .ok()
            .and_then(|name| name.into_string().ok())
            .filter(|name| !name.is_empty() && !name.contains(char::is_whitespace))
            .unwrap_or_else(|| "localhost".to_string())
    })
}

/// The program's name as it was started (the last part of `argv[0]`), the
/// default tag as HAProxy's is; `proxy` if that is not a valid tag.
pub fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|arg0| {
            let path = std::path::PathBuf::from(arg0);
            path.file_name()?.to_str().map(str::to_string)
        })
        .filter(|name| valid_tag(name))
        .unwrap_or_else(|| "proxy".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, UdpSocket};

    fn destination(target: Target) -> Destination {
        Destination {
            target,
            max_len: DEFAULT_LEN,
            layout: Some(Layout::Rfc5424),
            facility: Facility::parse("local3").expect("local3"),
            level: None,
            min_level: None,
        }
    }

    fn receiver() -> (UdpSocket, SocketAddr) {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let addr = socket.local_addr().expect("address");
        (socket, addr)
    }

    fn open(d: &Destination) -> Arc<Syslog> {
        Syslog::open(d, d.header(Some("t"), Some(Some("h")))).expect("open")
    }

    #[test]
    fn the_header_follows_haproxys_defaults() {
        let d = Destination {
            layout: None,
            ..destination(Target::Udp(SocketAddr::from(([127, 0, 0, 1], 514))))
        };
        let plain = d.header(None, None);
        assert_eq!(plain.layout, Layout::Local);
        assert_eq!(plain.tag, program_name());
        assert_eq!(plain.pid, std::process::id());
        let named = d.header(Some("lb"), Some(Some("edge1")));
        assert_eq!(
            (named.layout, named.tag.as_str(), named.hostname.as_str()),
            (Layout::Rfc3164, "lb", "edge1")
        );
        assert_eq!(d.header(None, Some(None)).hostname, hostname());
    }

    #[test]
    fn a_long_message_is_cut_to_len_whole_characters_and_all() {
        let (socket, addr) = receiver();
        let d = Destination {
            max_len: 80,
            ..destination(Target::Udp(addr))
        };
        let syslog = open(&d);
        syslog.send_line(Severity::INFO, &"é".repeat(100));
        let mut got = vec![0u8; 1024];
        let n = socket.recv(&mut got).expect("a datagram");
        assert!((79..=80).contains(&n), "{n}");
        let text = std::str::from_utf8(&got[..n]).expect("still UTF-8");
        assert!(
            text.starts_with("<158>1 ") && text.contains(" h t "),
            "{text}"
        );
        assert!(text.ends_with('é'), "{text}");
    }

    #[test]
    fn the_level_filters_and_the_min_level_caps() {
        let (socket, addr) = receiver();
        let d = Destination {
            level: Severity::parse("notice"),
            min_level: Severity::parse("err"),
            ..destination(Target::Udp(addr))
        };
        let syslog = open(&d);
        assert!(!syslog.accepts(Severity::INFO));
        syslog.send_line(Severity::INFO, "dropped");
        syslog.send_line(Severity::parse("emerg").expect("emerg"), "capped");
        syslog.send_line(Severity::NOTICE, "kept");
        let mut got = vec![0u8; 1024];
        let n = socket.recv(&mut got).expect("a datagram");
        let first = String::from_utf8_lossy(&got[..n]).to_string();
        // local3 (19) × 8 + err (3).
        assert!(
            first.starts_with("<155>1 ") && first.ends_with("capped"),
            "{first}"
        );
        let n = socket.recv(&mut got).expect("a datagram");
        let second = String::from_utf8_lossy(&got[..n]).to_string();
        assert!(
            second.starts_with("<157>1 ") && second.ends_with("kept"),
            "{second}"
        );
        assert_eq!(syslog.lost(), 0);
    }

    #[test]
    fn tcp_frames_carry_their_length() {
        let syslog = open(&destination(Target::Tcp(SocketAddr::from((
            [127, 0, 0, 1],
            9,
        )))));
        let mut out = String::new();
        syslog.frame(Severity::INFO, &mut out, |o| o.push_str("hi"));
        let (length, message) = out.split_once(' ').expect("a length");
        assert_eq!(length.parse::<usize>().ok(), Some(message.len()));
        assert!(message.starts_with("<158>1 "), "{out}");
        let tail = format!(" h t {} - - hi", std::process::id());
        assert!(message.ends_with(&tail), "{out}");
    }

    #[test]
    fn a_destination_that_is_not_there_counts_what_it_loses() {
        let path = std::env::temp_dir().join(format!("proxy-absent-{}.sock", std::process::id()));
        let syslog = open(&destination(Target::Unix(path)));
        let mut buffer = String::new();
        let mut ends = Vec::new();
        for _ in 0..3 {
            syslog.frame(Severity::INFO, &mut buffer, |o| o.push('x'));
            ends.push(buffer.len());
        }
        let e = syslog.send(&buffer, &ends).expect_err("no such socket");
        assert!(e.to_string().starts_with("syslog unix@"), "{e}");
        assert_eq!(syslog.lost(), 3);
    }
}
