//! `agent-check agent-port N [agent-inter T] [agent-send TEXT]`: HAProxy's
//! agent check. A small program beside the server (the "agent") answers
//! one line on a port of its own, and the line steers the server:
//!
//! ```text
//!   up | down | fail | stopped      the server's health, by the agent's judgement
//!   ready | drain | maint           its administrative state: in rotation, no new
//!                                   connections (weight 0), or out altogether
//!   75%                             its weight: that share of its configured weight
//!   # free text                     a description, for the log
//! ```
//!
//! Words are separated by spaces, tabs or commas, and may be combined (`up
//! 50%`, `drain # backup running`). A word the check does not know is
//! ignored and named in the log, as HAProxy ignores it. The agent runs on
//! its own `agent-inter` beside the regular check; an agent that cannot be
//! reached changes nothing (the regular check is what judges whether the
//! server answers), also HAProxy's rule. How the board applies a reply is
//! in `policy/health.rs`.

use std::time::Duration;

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, got};

/// The most an agent's line may weigh, in percent of the configured weight
/// (the weight itself is still capped at 256).
pub const MAX_PERCENT: u32 = 1000;

/// An agent line's length limit: its first line, up to this.
const MAX_LINE: usize = 1024;

/// A server's agent check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCheck {
    /// `agent-port N`: where the agent listens, on the server's address.
    pub port: u16,
    /// `agent-inter T`: time between two agent checks (default: the
    /// server's `inter`, else 2s).
    pub inter: Duration,
    /// `agent-send TEXT`: sent to the agent first (default: nothing).
    pub send: Vec<u8>,
}

/// What an agent's line says; `None` where it says nothing of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentReply {
    /// `up` (true) or `down`, `fail`, `stopped` (false).
    pub up: Option<bool>,
    /// `ready`, `drain` or `maint`.
    pub admin: Option<Admin>,
    /// `N%`.
    pub percent: Option<u32>,
    /// `# ...`.
    pub description: String,
    /// Words it did not know, ignored.
    pub unknown: Vec<String>,
}

/// An agent's administrative word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admin {
    /// `ready`: in rotation again.
    Ready,
    /// `drain`: no new connections; open ones go on.
    Drain,
    /// `maint`: out of rotation, as if down.
    Maint,
}

impl AgentReply {
    /// Reads one agent line (module docs).
    pub fn parse(line: &str) -> AgentReply {
        let (words, description) = match line.split_once('#') {
            Some((words, description)) => (words, description.trim()),
            None => (line, ""),
        };
        let mut reply = AgentReply {
            description: description.to_string(),
            ..AgentReply::default()
        };
        let separators = |c: char| c == ',' || c.is_ascii_whitespace();
        for word in words.split(separators).filter(|w| !w.is_empty()) {
            let lower = word.to_ascii_lowercase();
            match lower.as_str() {
                "up" => reply.up = Some(true),
                "down" | "fail" | "failed" | "stopped" => reply.up = Some(false),
                "ready" => reply.admin = Some(Admin::Ready),
                "drain" => reply.admin = Some(Admin::Drain),
                "maint" => reply.admin = Some(Admin::Maint),
                _ => match percent(&lower) {
                    Some(n) => reply.percent = Some(n),
                    None => reply.unknown.push(word.to_string()),
                },
            }
        }
        reply
    }
}

/// `75%` as 75, up to [`MAX_PERCENT`].
fn percent(word: &str) -> Option<u32> {
    let digits = word.strip_suffix('%')?;
    let ok = !digits.is_empty() && digits.len() <= 4 && digits.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| digits.parse().ok())
        .flatten()
        .filter(|&n| n <= MAX_PERCENT)
}

impl AgentCheck {
    /// One agent check: send `agent-send`, then read the first line (to
    /// its `\n`, or to the close).
    pub fn start(&self) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            check: self,
            connected: false,
            sent: false,
        })
    }
}

struct Run<'a> {
    check: &'a AgentCheck,
    connected: bool,
    sent: bool,
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        if !self.connected {
            self.connected = true;
            return Next::Connect {
                port: Some(self.check.port),
            };
        }
        if !self.sent {
            self.sent = true;
            if !self.check.send.is_empty() {
                return Next::Send(self.check.send.clone());
            }
        }
        let bytes = inbox.bytes();
        let end = bytes.iter().position(|&b| b == b'\n');
        let line = match end {
            Some(end) => &bytes[..end],
            None if inbox.is_final() || bytes.len() >= MAX_LINE => bytes,
            None => return Next::Receive,
        };
        let line = String::from_utf8_lossy(line).trim().to_string();
        if line.is_empty() {
            let detail = format!("agent: expected a line, got {}", got(inbox));
            return Next::done(Verdict::failed(Status::L7Rsp, detail));
        }
        Next::done(Verdict::passed(line))
    }

    fn awaiting(&self) -> String {
        "agent: a line".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    #[test]
    fn words_combine_and_unknown_ones_are_kept_aside() {
        assert_eq!(
            AgentReply::parse("up 75%"),
            AgentReply {
                up: Some(true),
                percent: Some(75),
                ..AgentReply::default()
            }
        );
        let drain = AgentReply::parse("drain,  50% # backup running");
        assert_eq!(drain.admin, Some(Admin::Drain));
        assert_eq!(drain.percent, Some(50));
        assert_eq!(drain.description, "backup running");
        let down = AgentReply::parse("STOPPED\tmaint frobnicate 2000% 12");
        assert_eq!(down.up, Some(false));
        assert_eq!(down.admin, Some(Admin::Maint));
        assert_eq!(down.percent, None, "above 1000% is not a weight");
        assert_eq!(down.unknown, ["frobnicate", "2000%", "12"]);
        assert_eq!(AgentReply::parse("ready").admin, Some(Admin::Ready));
        assert_eq!(AgentReply::parse("fail").up, Some(false));
    }

    #[test]
    fn the_agent_is_asked_on_its_port_and_its_first_line_read() {
        let check = AgentCheck {
            port: 9999,
            inter: Duration::from_secs(1),
            send: b"hello\n".to_vec(),
        };
        let mut dialogue = check.start();
        let mut inbox = Inbox::default();
        assert_eq!(
            dialogue.next(&mut inbox),
            Next::Connect { port: Some(9999) }
        );
        let (sent, verdict) = run(&mut *dialogue, &[Some(b"up 7"), Some(b"5%\r\nignored\n")]);
        assert_eq!(sent, b"hello\n");
        assert_eq!(verdict, Some(Verdict::passed("up 75%")));
        let (_, verdict) = run(&mut *check.start(), &[Some(b"drain"), None]);
        assert_eq!(
            verdict,
            Some(Verdict::passed("drain")),
            "the close ends the line"
        );
        let (_, verdict) = run(&mut *check.start(), &[None]);
        assert_eq!(verdict.map(|v| v.status), Some(Status::L7Rsp));
    }
}
