//! The handover's words: what the old process and the new one say to each
//! other, one message per `SOCK_SEQPACKET` packet, as lines of text (an
//! operator can read them in `strace`), the first word naming the message.
//!
//! ```text
//!   new ─▶ old   hello 1 PID                       version 1 of this protocol, the new pid
//!   old ─▶ new   listeners N                       N descriptors attached, in this order:
//!                frontend NAME CONFIGURED BOUND WORKER     one per worker's listener
//!                admin CONFIGURED BOUND                    the admin listener
//!                (as many `listeners` messages as needed: at most 253 descriptors each)
//!   old ─▶ new   health                            each checked backend, where it stands:
//!                NAME BACKEND up|down FAILURES SUCCESSES
//!   old ─▶ new   end PID                           everything was sent
//!   old ─▶ new   servers                           what the operator said of each server (ops/server_state.rs):
//!                FRONTEND GROUP SERVER STATE WEIGHT CONFIGURED HEALTH
//!   old ─▶ new   counters                          the totals so far, that the new process goes on from:
//!                frontend NAME KEY=N ...           a frontend's
//!                backend NAME ADDR KEY=N ...       one of its backends'
//!   old ─▶ new   end PID                           everything was sent
//!   new ─▶ old   taken PID                         the new process accepts on them now
//!   old ─▶ new   ok                                the old one stops accepting
//!   new ─▶ old   adopt 1                           it takes established connections, in this format
//!   old ─▶ new   connections N                     N connections (parcel.rs), 2N descriptors attached:
//!                conn ID key=value ...             each one's client socket, then its backend socket
//!   old ─▶ new   data ID up|down                   the bytes a direction held, raw after the line
//!   new ─▶ old   adopted N                         each one's fate: ID ok, or ID refused WHY
//!                (connections, data, adopted, again, while the old process has any to move)
//! ```
//!
//! A new process that does not say `adopt` (an older binary), or an old
//! one that does not answer it, leaves the old process draining its
//! connections as before: each side moves on once the other is silent.
//!
//! `CONFIGURED` is the address the configuration asked for (`127.0.0.1:0`
//! is a valid one), `BOUND` the one the socket has: the new process finds
//! its frontends' sockets by either. Frontend names are single words (the
//! configuration file splits on blanks), so no quoting is needed. Every
//! message is text but `data`, whose first line says what its raw bytes
//! are.

use std::fmt;
use std::net::SocketAddr;

use super::parcel::Parcel;
use crate::conn::side::Side;
use crate::ops::server_state::ServerLine;
use crate::policy::health::Standing;

/// The version a `hello` announces; another one is refused.
pub const VERSION: u32 = 1;

/// The format of the connections an `adopt` asks for; another one is
/// refused, and the old process drains those connections itself.
pub const PARCEL_VERSION: u32 = 1;

/// One frontend's or backend's totals so far: its counters by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Totals {
    /// The frontend.
    pub frontend: String,
    /// The backend of that frontend, for a backend's totals: its address
    /// as written (`127.0.0.1:9001`, `db.internal:5432`).
    pub backend: Option<String>,
    /// Each counter's name and value.
    pub values: Vec<(String, u64)>,
}

/// What became of one connection sent: adopted, or why not.
pub type Fate = Result<(), String>;

/// One handed descriptor: what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// A frontend's listener, as one worker ran it.
    Frontend {
        /// The frontend's name.
        name: String,
        /// Its `listen` address as configured.
        configured: SocketAddr,
        /// The address the socket is bound to.
        bound: SocketAddr,
        /// The worker that accepted on it.
        worker: usize,
    },
    /// The admin listener.
    Admin {
        /// The `admin` address as configured.
        configured: SocketAddr,
        /// The address the socket is bound to.
        bound: SocketAddr,
    },
}

/// One checked backend's health, as the old process saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendStanding {
    /// The frontend it belongs to.
    pub frontend: String,
    /// The backend's address as written (`127.0.0.1:9001`,
    /// `db.internal:5432`): with its frontend, what the new process finds
    /// it by, wherever its host name points now.
    pub backend: String,
    /// Up or down, and the streak.
    pub standing: Standing,
}

/// One message of the handover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// The new process introduces itself.
    Hello {
        /// The protocol version it speaks.
        version: u32,
        /// Its pid.
        pid: u32,
    },
    /// Listeners; as many descriptors attached as tags, in order.
    Listeners(Vec<Tag>),
    /// Backends' health.
    Health(Vec<BackendStanding>),
    /// The old process has sent everything.
    End {
        /// The old process's pid.
        pid: u32,
    },
    /// The new process accepts on the listeners now.
    Taken {
        /// The new process's pid.
        pid: u32,
    },
    /// The old process stops accepting.
    Ok,
    /// The counters' totals so far.
    Counters(Vec<Totals>),
    /// Every server's admin state and weight.
    Servers(Vec<ServerLine>),
    /// The new process takes established connections in this format.
    Adopt {
        /// The parcel format it reads.
        version: u32,
    },
    /// Connections; two descriptors attached for each, in order.
    Connections(Vec<Parcel>),
    /// The bytes one direction of a connection held.
    Data {
        /// The connection.
        id: u64,
        /// The direction, by its source.
        from: Side,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// What became of each connection of the last `connections`.
    Adopted(Vec<(u64, Fate)>),
}

/// A message that is not one of ours: which line, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The line of the message (1 is the first).
    pub line: usize,
    /// What was wrong with it.
    pub what: String,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handover message, line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for WireError {}

impl Message {
    /// The message as the bytes that go on the socket.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Message::Data { id, from, bytes } => {
                let mut out = format!("data {id} {}\n", direction(*from)).into_bytes();
                out.extend_from_slice(bytes);
                out
            }
            other => other.text().into_bytes(),
        }
    }

    /// A text message's text (a `data` message's first line only).
    pub fn text(&self) -> String {
        match self {
            Message::Hello { version, pid } => format!("hello {version} {pid}\n"),
            Message::Listeners(tags) => {
                let mut text = format!("listeners {}\n", tags.len());
                for tag in tags {
                    text.push_str(&match tag {
                        Tag::Frontend {
                            name,
                            configured,
                            bound,
                            worker,
                        } => format!("frontend {name} {configured} {bound} {worker}\n"),
                        Tag::Admin { configured, bound } => format!("admin {configured} {bound}\n"),
                    });
                }
                text
            }
            Message::Health(standings) => {
                let mut text = String::from("health\n");
                for s in standings {
                    let state = if s.standing.up { "up" } else { "down" };
                    let (f, k) = (s.standing.failures, s.standing.successes);
                    text.push_str(&format!("{} {} {state} {f} {k}\n", s.frontend, s.backend));
                }
                text
            }
            Message::End { pid } => format!("end {pid}\n"),
            Message::Taken { pid } => format!("taken {pid}\n"),
            Message::Ok => "ok\n".to_string(),
            Message::Counters(totals) => lines("counters", totals.iter().map(totals_line)),
            Message::Servers(servers) => lines("servers", servers.iter().map(ServerLine::line)),
            Message::Adopt { version } => format!("adopt {version}\n"),
            Message::Connections(parcels) => {
                let head = format!("connections {}", parcels.len());
                lines(&head, parcels.iter().map(Parcel::line))
            }
            Message::Data { id, from, .. } => format!("data {id} {}\n", direction(*from)),
            Message::Adopted(fates) => {
                let head = format!("adopted {}", fates.len());
                lines(&head, fates.iter().map(fate_line))
            }
        }
    }

    /// Reads a message back from its bytes.
    pub fn decode(bytes: &[u8]) -> Result<Message, WireError> {
        if let Some(rest) = bytes.strip_prefix(b"data ") {
            return decode_data(rest);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Message::decode_text(text),
            Err(_) => Err(WireError {
                line: 1,
                what: "a message that is not text".into(),
            }),
        }
    }

    /// Reads a text message back.
    fn decode_text(text: &str) -> Result<Message, WireError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| Line {
            number: i + 1,
            words: l.split(' ').collect(),
        });
        let Some(head) = lines.next() else {
            return Err(WireError {
                line: 1,
                what: "an empty message".into(),
            });
        };
        let rest: Vec<Line<'_>> = lines.collect();
        let message = match head.words.as_slice() {
            ["hello", version, pid] => Message::Hello {
                version: head.number_at(version, "a version")?,
                pid: head.number_at(pid, "a pid")?,
            },
            ["listeners", count] => Message::Listeners(head.counted(count, &rest, Line::tag)?),
            ["health"] => {
                Message::Health(rest.iter().map(Line::standing).collect::<Result<_, _>>()?)
            }
            ["end", pid] => Message::End {
                pid: head.number_at(pid, "a pid")?,
            },
            ["taken", pid] => Message::Taken {
                pid: head.number_at(pid, "a pid")?,
            },
            ["ok"] => Message::Ok,
            ["servers"] => Message::Servers(
                rest.iter()
                    .map(|l| ServerLine::parse(&l.words.join(" ")).map_err(|why| l.error(why)))
                    .collect::<Result<_, _>>()?,
            ),
            ["counters"] => {
                Message::Counters(rest.iter().map(Line::totals).collect::<Result<_, _>>()?)
            }
            ["adopt", version] => Message::Adopt {
                version: head.number_at(version, "a version")?,
            },
            ["connections", count] => {
                Message::Connections(head.counted(count, &rest, Line::parcel)?)
            }
            ["adopted", count] => Message::Adopted(head.counted(count, &rest, Line::fate)?),
            _ => return Err(head.error("not a message of the handover".into())),
        };
        let listed = matches!(
            message,
            Message::Listeners(_)
                | Message::Health(_)
                | Message::Counters(_)
                | Message::Servers(_)
                | Message::Connections(_)
                | Message::Adopted(_)
        );
        match (listed, rest.first()) {
            (true, _) | (_, None) => Ok(message),
            (false, Some(extra)) => Err(extra.error("a line after the end of the message".into())),
        }
    }
}

/// A direction's word.
fn direction(from: Side) -> &'static str {
    match from {
        Side::Client => "up",
        Side::Backend => "down",
    }
}

/// `head`, then each of `items` on a line of its own.
fn lines(head: &str, items: impl Iterator<Item = String>) -> String {
    let mut text = format!("{head}\n");
    for item in items {
        text.push_str(&item);
        text.push('\n');
    }
    text
}

fn totals_line(t: &Totals) -> String {
    let mut line = match &t.backend {
        None => format!("frontend {}", t.frontend),
        Some(backend) => format!("backend {} {backend}", t.frontend),
    };
    for (name, value) in &t.values {
        line.push_str(&format!(" {name}={value}"));
    }
    line
}

fn fate_line((id, fate): &(u64, Fate)) -> String {
    match fate {
        Ok(()) => format!("{id} ok"),
        // One line: a reason's own newlines would start another fate.
        Err(why) => format!("{id} refused {}", why.replace('\n', " ")),
    }
}

/// `data ID up|down`, its line, then the raw bytes.
fn decode_data(rest: &[u8]) -> Result<Message, WireError> {
    let bad = |what: &str| WireError {
        line: 1,
        what: what.into(),
    };
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("a data message without its line"))?;
    let head =
        std::str::from_utf8(&rest[..end]).map_err(|_| bad("a data line that is not text"))?;
    let (id, from) = head.split_once(' ').ok_or_else(|| bad("data ID up|down"))?;
    let from = match from {
        "up" => Side::Client,
        "down" => Side::Backend,
        _ => return Err(bad("a direction that is neither up nor down")),
    };
    Ok(Message::Data {
        id: id
            .parse()
            .map_err(|_| bad("a connection number that is not one"))?,
        from,
        bytes: rest[end + 1..].to_vec(),
    })
}

/// One line of a message, split on blanks.
struct Line<'a> {
    number: usize,
    words: Vec<&'a str>,
}

impl Line<'_> {
    fn error(&self, what: String) -> WireError {
        WireError {
            line: self.number,
            what,
        }
    }

    /// `count` lines of `rest`, each read by `read`.
    fn counted<'a, T>(
        &self,
        count: &str,
        rest: &[Line<'a>],
        read: impl Fn(&Line<'a>) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let count: usize = self.number_at(count, "a count")?;
        if count != rest.len() {
            let what = self.words.first().copied().unwrap_or("lines");
            return Err(self.error(format!("says {count} {what}, {} follow", rest.len())));
        }
        rest.iter().map(read).collect()
    }

    fn parcel(&self) -> Result<Parcel, WireError> {
        Parcel::parse(&self.words.join(" ")).map_err(|what| self.error(what))
    }

    fn fate(&self) -> Result<(u64, Fate), WireError> {
        match self.words.as_slice() {
            [id, "ok"] => Ok((self.number_at(id, "a connection number")?, Ok(()))),
            [id, "refused", why @ ..] => Ok((
                self.number_at(id, "a connection number")?,
                Err(why.join(" ")),
            )),
            _ => Err(self.error("not a connection's fate (ID ok, or ID refused WHY)".into())),
        }
    }

    fn totals(&self) -> Result<Totals, WireError> {
        let (frontend, backend, pairs) = match self.words.as_slice() {
            ["frontend", name, pairs @ ..] => (name, None, pairs),
            ["backend", name, addr, pairs @ ..] => (name, Some(addr.to_string()), pairs),
            _ => {
                return Err(
                    self.error("not totals (frontend NAME ..., backend NAME ADDR ...)".into())
                );
            }
        };
        let values = pairs
            .iter()
            .map(|pair| match pair.split_once('=') {
                Some((key, n)) => Ok((key.to_string(), self.number_at(n, "a count")?)),
                None => Err(self.error(format!("{pair:?} is not KEY=N"))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Totals {
            frontend: frontend.to_string(),
            backend,
            values,
        })
    }

    fn number_at<T: std::str::FromStr>(&self, word: &str, what: &str) -> Result<T, WireError> {
        word.parse()
            .map_err(|_| self.error(format!("{word:?} is not {what}")))
    }

    fn addr(&self, word: &str) -> Result<SocketAddr, WireError> {
        self.number_at(word, "an address")
    }

    fn tag(&self) -> Result<Tag, WireError> {
        match self.words.as_slice() {
            ["frontend", name, configured, bound, worker] => Ok(Tag::Frontend {
                name: name.to_string(),
                configured: self.addr(configured)?,
                bound: self.addr(bound)?,
                worker: self.number_at(worker, "a worker index")?,
            }),
            ["admin", configured, bound] => Ok(Tag::Admin {
                configured: self.addr(configured)?,
                bound: self.addr(bound)?,
            }),
            _ => Err(self.error("not a listener's tag (frontend ... or admin ...)".into())),
        }
    }

    fn standing(&self) -> Result<BackendStanding, WireError> {
        let [frontend, backend, state, failures, successes] = self.words.as_slice() else {
            return Err(self.error("not a backend's health (NAME BACKEND up|down F S)".into()));
        };
        let up = match *state {
            "up" => true,
            "down" => false,
            other => return Err(self.error(format!("{other:?} is neither up nor down"))),
        };
        Ok(BackendStanding {
            frontend: frontend.to_string(),
            backend: backend.to_string(),
            standing: Standing {
                up,
                failures: self.number_at(failures, "a count of failures")?,
                successes: self.number_at(successes, "a count of successes")?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn every_message_reads_back_as_it_was_written() {
        let messages = [
            Message::Hello {
                version: 1,
                pid: 42,
            },
            Message::Listeners(vec![
                Tag::Frontend {
                    name: "web".into(),
                    configured: addr("127.0.0.1:0"),
                    bound: addr("127.0.0.1:8080"),
                    worker: 1,
                },
                Tag::Admin {
                    configured: addr("[::1]:9100"),
                    bound: addr("[::1]:9100"),
                },
            ]),
            Message::Health(vec![BackendStanding {
                frontend: "web".into(),
                backend: "db.internal:5432".into(),
                standing: Standing {
                    up: false,
                    failures: 0,
                    successes: 1,
                },
            }]),
            Message::Health(Vec::new()),
            Message::End { pid: 7 },
            Message::Taken { pid: 8 },
            Message::Ok,
            Message::Counters(vec![
                Totals {
                    frontend: "web".into(),
                    backend: None,
                    values: vec![("connections".into(), 12), ("bytes_in".into(), 3)],
                },
                Totals {
                    frontend: "web".into(),
                    backend: Some("127.0.0.1:9001".into()),
                    values: vec![("connect_errors".into(), 1)],
                },
            ]),
            Message::Adopt { version: 1 },
            Message::Connections(vec![crate::ops::upgrade::parcel::tests::sample()]),
            Message::Data {
                id: 7,
                from: Side::Backend,
                bytes: vec![0, 10, 255, b'\n'],
            },
            Message::Adopted(vec![(7, Ok(())), (8, Err("no frontend web here".into()))]),
        ];
        for message in messages {
            assert_eq!(Message::decode(&message.encode()), Ok(message.clone()));
        }
    }

    #[test]
    fn what_is_not_ours_is_refused_with_its_line() {
        let cases = [
            ("", 1, "an empty message"),
            ("GET / HTTP/1.1\n", 1, "not a message of the handover"),
            ("hello one 2\n", 1, "\"one\" is not a version"),
            (
                "listeners 2\nadmin 127.0.0.1:1 127.0.0.1:1\n",
                1,
                "says 2 listeners, 1 follow",
            ),
            (
                "listeners 1\nadmin 127.0.0.1 127.0.0.1:1\n",
                2,
                "\"127.0.0.1\" is not an address",
            ),
            (
                "health\nweb 127.0.0.1:1 sideways 0 0\n",
                2,
                "\"sideways\" is neither up nor down",
            ),
            ("ok\nok\n", 2, "a line after the end of the message"),
            (
                "adopted 1\n7 maybe\n",
                2,
                "not a connection's fate (ID ok, or ID refused WHY)",
            ),
            ("connections 2\n", 1, "says 2 connections, 0 follow"),
        ];
        for (text, line, what) in cases {
            let e = Message::decode(text.as_bytes()).expect_err(text);
            assert_eq!((e.line, e.what.as_str()), (line, what), "{text:?}");
        }
        assert!(Message::decode(b"data 7 sideways\nxy").is_err());
        assert!(Message::decode(&[0xff, 0xfe]).is_err(), "not text");
    }
}
