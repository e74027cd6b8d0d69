//! `option tcp-check` and its `tcp-check connect | send | send-binary |
//! expect` lines: a check written as steps, run in order on a connection of
//! its own, HAProxy's rules:
//!
//! ```text
//!   tcp-check connect                    a connection (the first is implicit)
//!   tcp-check send PING\r\n              write these bytes
//!   tcp-check expect string +PONG        wait until the answer holds +PONG
//! ```
//!
//! How an expect waits and judges (HAProxy's): it looks at everything
//! received and not consumed yet; a match passes it, and consumes the input
//! up to the match's end, so that the next expect reads what follows. No
//! match yet: it waits for more, until the server closes, the inbox is full
//! ([`INBOX_LIMIT`](super::dialogue::INBOX_LIMIT)), or at least `min-recv`
//! bytes are there, if it has one; then it fails. With `!` the answer is
//! turned around: a match fails the check, and the expect passes once no
//! match can come any more (closed, full, or `min-recv` reached). The
//! check's `timeout` bounds it all: an answer that never matches fails
//! with L7TOUT, saying what came.
//!
//! `rbinary` is HAProxy's: the regular expression is matched against the
//! received bytes written as upper-case hex (`52000000...`).

use std::fmt;

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, find_bytes, got, shown};
use super::regex::Regex;

/// A `tcp-check` list, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The steps.
    pub steps: Vec<Step>,
}

/// One `tcp-check` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `tcp-check connect [port N]`.
    Connect {
        /// `port N`: another port of the server's address.
        port: Option<u16>,
    },
    /// `tcp-check send TEXT` or `send-binary HEX`.
    Send(Vec<u8>),
    /// `tcp-check expect ...`.
    Expect(Expect),
}

/// `tcp-check expect [min-recv N] [!] KIND PATTERN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// `!`: the pattern must not be there.
    pub negate: bool,
    /// What to look for.
    pub pattern: Pattern,
    /// `min-recv N`: judge once this many bytes are there, rather than
    /// waiting for the end of the answer.
    pub min_recv: Option<usize>,
}

/// What an expect looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `string TEXT`: these bytes, anywhere.
    String(Vec<u8>),
    /// `rstring REGEX`: a match of the expression, anywhere.
    Rstring(Regex),
    /// `binary HEX`: these bytes, anywhere.
    Binary(Vec<u8>),
    /// `rbinary REGEX`: a match in the upper-case hex of the bytes.
    Rbinary(Regex),
}

impl Pattern {
    /// Where the first match in `input` ends (in bytes of `input`).
    pub fn find(&self, input: &[u8]) -> Option<usize> {
        match self {
            Pattern::String(text) | Pattern::Binary(text) => find_bytes(input, text),
            Pattern::Rstring(regex) => regex.find(input),
            // Two hex digits per byte: a match ending inside a byte's pair
            // has used that byte.
            Pattern::Rbinary(regex) => regex.find(hex(input).as_bytes()).map(|end| end.div_ceil(2)),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::String(text) => write!(f, "string {}", shown(text)),
            Pattern::Rstring(regex) => write!(f, "rstring {regex}"),
            Pattern::Binary(bytes) => write!(f, "binary {}", hex(bytes)),
            Pattern::Rbinary(regex) => write!(f, "rbinary {regex}"),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not = if self.negate { "! " } else { "" };
        write!(f, "{not}{}", self.pattern)
    }
}

/// Bytes as upper-case hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A script being run.
struct Run<'a> {
    script: &'a Script,
    /// The step to do next.
    step: usize,
}

impl Script {
    /// A run of the script from its first step.
    pub fn start(&self) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            script: self,
            step: 0,
        })
    }
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        let Some(step) = self.script.steps.get(self.step) else {
            let detail = match self.script.steps.len() {
                0 => "tcp-check: connected (no steps)".to_string(),
                1 => "tcp-check: 1 step passed".to_string(),
                n => format!("tcp-check: {n} steps passed"),
            };
            return Next::done(Verdict::passed(detail));
        };
        match step {
            Step::Connect { port } => {
                self.step += 1;
                Next::Connect { port: *port }
            }
            Step::Send(bytes) => {
                self.step += 1;
                Next::Send(bytes.clone())
            }
            Step::Expect(expect) => match judge(expect, inbox) {
                Judged::Wait => Next::Receive,
                Judged::Passed => {
                    self.step += 1;
                    self.next(inbox)
                }
                Judged::Failed(detail) => {
                    let detail = format!("tcp-check step {}: {detail}", self.step + 1);
                    Next::done(Verdict::failed(Status::L7Rsp, detail))
                }
            },
        }
    }

    fn awaiting(&self) -> String {
        match self.script.steps.get(self.step) {
            Some(Step::Expect(expect)) => format!("tcp-check step {}: {expect}", self.step + 1),
            _ => format!("tcp-check step {}", self.step + 1),
        }
    }
}

/// An expect's judgement of the inbox now.
enum Judged {
    Wait,
    Passed,
    Failed(String),
}

/// HAProxy's rules (module docs); a pass consumes what it used.
fn judge(expect: &Expect, inbox: &mut Inbox) -> Judged {
    let found = expect.pattern.find(inbox.bytes());
    let enough = expect.min_recv.is_some_and(|n| inbox.bytes().len() >= n);
    let conclusive = found.is_some() || inbox.is_final() || enough;
    if !conclusive || (expect.min_recv.is_some() && !enough && !inbox.is_final()) {
        return Judged::Wait;
    }
    match (found, expect.negate) {
        (Some(end), false) => {
            inbox.consume(end);
            Judged::Passed
        }
        (Some(_), true) => Judged::Failed(format!(
            "found {} where it must not be: {}",
            expect.pattern,
            got(inbox)
        )),
        (None, true) => {
            let all = inbox.bytes().len();
            inbox.consume(all);
            Judged::Passed
        }
        (None, false) => Judged::Failed(format!("expected {}, got {}", expect.pattern, got(inbox))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    fn expect(negate: bool, pattern: Pattern, min_recv: Option<usize>) -> Step {
        Step::Expect(Expect {
            negate,
            pattern,
            min_recv,
        })
    }

    fn string(text: &str) -> Pattern {
        Pattern::String(text.as_bytes().to_vec())
    }

    fn redis_script() -> Script {
        Script {
            steps: vec![
                Step::Send(b"PING\r\n".to_vec()),
                expect(false, string("+PONG"), None),
                Step::Send(b"INFO replication\r\n".to_vec()),
                expect(
                    false,
                    Pattern::Rstring(Regex::new("role:(master|slave)").unwrap()),
                    None,
                ),
            ],
        }
    }

    #[test]
    fn steps_run_in_order_and_an_expect_reads_across_reads() {
        let script = redis_script();
        let answers: [Option<&[u8]>; 3] = [
            Some(b"+PO"),
            Some(b"NG\r\n$30\r\n# Replication\r\nrole:ma"),
            Some(b"ster\r\n"),
        ];
        let (sent, verdict) = run(&mut *script.start(), &answers);
        assert_eq!(sent, b"PING\r\nINFO replication\r\n");
        assert_eq!(verdict, Some(Verdict::passed("tcp-check: 4 steps passed")));
    }

    #[test]
    fn a_wrong_answer_fails_when_no_more_can_come_and_says_what_came() {
        let script = redis_script();
        let (_, verdict) = run(&mut *script.start(), &[Some(b"-ERR unknown\r\n"), None]);
        let verdict = verdict.expect("closed: judged");
        assert_eq!(verdict.status, Status::L7Rsp);
        assert_eq!(
            verdict.detail,
            "tcp-check step 2: expected string \"+PONG\", got \"-ERR unknown\\r\\n\" then the \
             connection closed"
        );
        // Without the close it waits: the timeout ends it (L7TOUT, driver).
        let mut dialogue = script.start();
        assert_eq!(run(&mut *dialogue, &[Some(b"-ERR unknown\r\n")]).1, None);
        assert_eq!(dialogue.awaiting(), "tcp-check step 2: string \"+PONG\"");
    }

    #[test]
    fn min_recv_judges_early_and_negation_needs_the_end() {
        let script = Script {
            steps: vec![expect(false, string("OK"), Some(4))],
        };
        let (_, verdict) = run(&mut *script.start(), &[Some(b"NO"), Some(b"PE")]);
        assert_eq!(verdict.map(|v| v.status), Some(Status::L7Rsp));
        let not_err = Script {
            steps: vec![expect(true, string("ERR"), None)],
        };
        assert_eq!(
            run(&mut *not_err.start(), &[Some(b"fine")]).1,
            None,
            "waits for the end"
        );
        let (_, verdict) = run(&mut *not_err.start(), &[Some(b"fine"), None]);
        assert!(verdict.expect("judged").status.is_ok());
        let (_, verdict) = run(&mut *not_err.start(), &[Some(b"-ERR x")]);
        let verdict = verdict.expect("a match is conclusive");
        assert!(
            verdict
                .detail
                .contains("found string \"ERR\" where it must not be")
        );
    }

    #[test]
    fn binary_patterns_and_connect_steps() {
        let script = Script {
            steps: vec![
                Step::Connect { port: Some(5432) },
                Step::Send(vec![0, 0, 0, 8]),
                expect(
                    false,
                    Pattern::Rbinary(Regex::new("^5200000008").unwrap()),
                    None,
                ),
                expect(false, Pattern::Binary(vec![0xff]), None),
            ],
        };
        let mut dialogue = script.start();
        let mut inbox = Inbox::default();
        assert_eq!(
            dialogue.next(&mut inbox),
            Next::Connect { port: Some(5432) }
        );
        let (sent, verdict) = run(
            &mut *dialogue,
            &[Some(b"R\0\0\0\x08\0\0"), Some(b"\0\0\xff")],
        );
        assert_eq!(sent, [0, 0, 0, 8]);
        assert!(verdict.expect("judged").status.is_ok());
        assert_eq!(
            Pattern::Rbinary(Regex::new("0A").unwrap()).find(b"\x00\x0a\x01"),
            Some(2)
        );
    }
}
