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
//!   new ─▶ old   taken PID                         the new process accepts on them now
//!   old ─▶ new   ok                                the old one stops accepting and drains
//! ```
//!
//! `CONFIGURED` is the address the configuration asked for (`127.0.0.1:0`
//! is a valid one), `BOUND` the one the socket has: the new process finds
//! its frontends' sockets by either. Frontend names are single words (the
//! configuration file splits on blanks), so no quoting is needed.

use std::fmt;
use std::net::SocketAddr;

use crate::policy::health::Standing;

/// The version a `hello` announces; another one is refused.
pub const VERSION: u32 = 1;

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
    /// The backend's address.
    pub backend: SocketAddr,
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
    /// The message as the text that goes on the socket.
    pub fn encode(&self) -> String {
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
        }
    }

    /// Reads a message back from its text.
    pub fn decode(text: &str) -> Result<Message, WireError> {
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
            ["listeners", count] => {
                let count: usize = head.number_at(count, "a count")?;
                if count != rest.len() {
                    return Err(
                        head.error(format!("says {count} listeners, {} follow", rest.len()))
                    );
                }
                Message::Listeners(rest.iter().map(Line::tag).collect::<Result<_, _>>()?)
            }
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
            _ => return Err(head.error("not a message of the handover".into())),
        };
        match (&message, rest.first()) {
            (Message::Listeners(_) | Message::Health(_), _) | (_, None) => Ok(message),
            (_, Some(extra)) => Err(extra.error("a line after the end of the message".into())),
        }
    }
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
            backend: self.addr(backend)?,
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
                backend: addr("127.0.0.1:9001"),
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
        ];
        for (text, line, what) in cases {
            let e = Message::decode(text).expect_err(text);
            assert_eq!((e.line, e.what.as_str()), (line, what), "{text:?}");
        }
    }
}
