//! `option redis-check [role master|replica]`: Redis's own protocol (RESP,
//! redis.io/docs/reference/protocol-spec). `PING` must be answered with the
//! simple string `+PONG`; an error reply (`-ERR ...`, `-NOAUTH ...`,
//! `-LOADING ...`) is the server saying no, and anything else is not Redis.
//!
//! With a role, the check also sends `INFO replication`, whose answer is a
//! bulk string (`$LENGTH\r\n` then that many bytes and a CRLF) of
//! `field:value` lines, one of them `role:master` or `role:slave` (Redis
//! calls a replica a slave there, even in version 7): the primary-finding
//! check that HAProxy configurations write as `tcp-check send info
//! replication` / `tcp-check expect string role:master`.
//!
//! The check ends with `QUIT`, after which Redis closes the connection
//! itself.

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, got, line, shown};

/// The role a Redis server must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `role:master`: the primary.
    Master,
    /// `role:slave`: a replica.
    Replica,
}

impl Role {
    /// The words the configuration takes.
    pub const NAMES: [&'static str; 3] = ["master", "replica", "slave"];

    /// `master`; `replica` or `slave`.
    pub fn parse(word: &str) -> Option<Role> {
        match word {
            "master" => Some(Role::Master),
            "replica" | "slave" => Some(Role::Replica),
            _ => None,
        }
    }

    /// The value `INFO replication` gives it.
    fn info_value(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Replica => "slave",
        }
    }
}

/// `option redis-check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RedisCheck {
    /// `role ROLE`: the role it must have (`None`: any).
    pub role: Option<Role>,
}

/// Where a check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Ping,
    AwaitPong,
    Info,
    AwaitInfo,
}

struct Run {
    check: RedisCheck,
    stage: Stage,
}

impl RedisCheck {
    /// A check from its first step.
    pub fn start(self) -> Box<dyn Dialogue> {
        Box::new(Run {
            check: self,
            stage: Stage::Ping,
        })
    }
}

const QUIT: &[u8] = b"QUIT\r\n";

impl Dialogue for Run {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        match self.stage {
            Stage::Ping => {
                self.stage = Stage::AwaitPong;
                Next::Send(b"PING\r\n".to_vec())
            }
            Stage::AwaitPong => self.pong(inbox),
            Stage::Info => {
                self.stage = Stage::AwaitInfo;
                Next::Send(b"INFO replication\r\n".to_vec())
            }
            Stage::AwaitInfo => self.info(inbox),
        }
    }

    fn awaiting(&self) -> String {
        match self.stage {
            Stage::Ping | Stage::AwaitPong => "redis: +PONG".to_string(),
            Stage::Info | Stage::AwaitInfo => "redis: the INFO replication reply".to_string(),
        }
    }
}

impl Run {
    fn pong(&mut self, inbox: &mut Inbox) -> Next {
        let Some((reply, used)) = line(inbox.bytes()) else {
            return wait_or_fail(inbox, "+PONG");
        };
        if reply == b"+PONG" {
            inbox.consume(used);
            return match self.check.role {
                Some(_) => {
                    self.stage = Stage::Info;
                    self.next(inbox)
                }
                None => goodbye(Verdict::passed("redis: +PONG")),
            };
        }
        let status = if reply.starts_with(b"-") {
            Status::L7Sts
        } else {
            Status::L7Rsp
        };
        let detail = format!("redis: expected +PONG, got {}", shown(reply));
        Next::done(Verdict::failed(status, detail))
    }

    fn info(&mut self, inbox: &mut Inbox) -> Next {
        let Some(want) = self.check.role else {
            return goodbye(Verdict::passed("redis: +PONG"));
        };
        let text = match bulk_string(inbox.bytes()) {
            Bulk::Incomplete => return wait_or_fail(inbox, "the INFO replication reply"),
            Bulk::Bad(detail) => return Next::done(Verdict::failed(Status::L7Rsp, detail)),
            Bulk::Error(reply) => {
                let detail = format!("redis: INFO replication: {}", shown(reply));
                return Next::done(Verdict::failed(Status::L7Sts, detail));
            }
            Bulk::Text(text) => text,
        };
        let role = text
            .split(|&b| b == b'\n')
            .find_map(|l| l.strip_prefix(b"role:"))
            .map(|v| String::from_utf8_lossy(v).trim_end().to_string());
        match role {
            Some(role) if role == want.info_value() => {
                goodbye(Verdict::passed(format!("redis: +PONG, role:{role}")))
            }
            Some(role) => Next::done(Verdict::failed(
                Status::L7Rsp,
                format!("redis: role:{role}, expected role:{}", want.info_value()),
            )),
            None => Next::done(Verdict::failed(
                Status::L7Rsp,
                "redis: INFO replication has no role: line",
            )),
        }
    }
}

fn goodbye(verdict: Verdict) -> Next {
    Next::Done {
        verdict,
        goodbye: QUIT.to_vec(),
    }
}

/// Waits for more of a reply, or fails if no more can come.
fn wait_or_fail(inbox: &Inbox, what: &str) -> Next {
    if !inbox.is_final() {
        return Next::Receive;
    }
    let detail = format!("redis: expected {what}, got {}", got(inbox));
    Next::done(Verdict::failed(Status::L7Rsp, detail))
}

/// A RESP bulk string at the start of the input.
enum Bulk<'a> {
    Incomplete,
    Text(&'a [u8]),
    /// An error reply instead (`-ERR ...`), without its CRLF.
    Error(&'a [u8]),
    Bad(String),
}

fn bulk_string(bytes: &[u8]) -> Bulk<'_> {
    let Some((head, used)) = line(bytes) else {
        return Bulk::Incomplete;
    };
    if head.starts_with(b"-") {
        return Bulk::Error(head);
    }
    let length = head
        .strip_prefix(b"$")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<usize>().ok());
    let Some(length) = length else {
        return Bulk::Bad(format!(
            "redis: expected a bulk string, got {}",
            shown(head)
        ));
    };
    match bytes.get(used..used + length) {
        Some(text) => Bulk::Text(text),
        None => Bulk::Incomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    fn check(role: Option<Role>) -> Box<dyn Dialogue> {
        RedisCheck { role }.start()
    }

    fn info(role: &str) -> Vec<u8> {
        let body = format!("# Replication\r\nrole:{role}\r\nconnected_slaves:0\r\n");
        format!("${}\r\n{body}\r\n", body.len()).into_bytes()
    }

    #[test]
    fn pong_passes_and_says_goodbye() {
        let (sent, verdict) = run(&mut *check(None), &[Some(b"+PO"), Some(b"NG\r\n")]);
        assert_eq!(sent, b"PING\r\nQUIT\r\n");
        assert_eq!(verdict, Some(Verdict::passed("redis: +PONG")));
    }

    #[test]
    fn an_error_reply_or_garbage_fails_at_once() {
        let (_, verdict) = run(
            &mut *check(None),
            &[Some(b"-NOAUTH Authentication required.\r\n")],
        );
        let verdict = verdict.expect("judged without waiting");
        assert_eq!(verdict.status, Status::L7Sts);
        assert_eq!(
            verdict.detail,
            "redis: expected +PONG, got \"-NOAUTH Authentication required.\""
        );
        let (_, verdict) = run(&mut *check(None), &[Some(b"HTTP/1.1 400 Bad\r\n")]);
        assert_eq!(verdict.map(|v| v.status), Some(Status::L7Rsp));
        let (_, verdict) = run(&mut *check(None), &[None]);
        assert_eq!(
            verdict.map(|v| v.detail),
            Some("redis: expected +PONG, got nothing: the connection closed".into())
        );
    }

    #[test]
    fn the_role_is_read_from_info_replication() {
        let master = info("master");
        let (sent, verdict) = run(
            &mut *check(Some(Role::Master)),
            &[Some(b"+PONG\r\n"), Some(&master[..10]), Some(&master[10..])],
        );
        assert_eq!(sent, b"PING\r\nINFO replication\r\nQUIT\r\n");
        assert_eq!(verdict, Some(Verdict::passed("redis: +PONG, role:master")));
        let slave = info("slave");
        let (_, verdict) = run(
            &mut *check(Some(Role::Master)),
            &[Some(b"+PONG\r\n"), Some(&slave)],
        );
        assert_eq!(
            verdict,
            Some(Verdict::failed(
                Status::L7Rsp,
                "redis: role:slave, expected role:master"
            ))
        );
        let (_, verdict) = run(
            &mut *check(Some(Role::Replica)),
            &[Some(b"+PONG\r\n"), Some(&slave)],
        );
        assert!(verdict.expect("judged").status.is_ok());
    }
}
