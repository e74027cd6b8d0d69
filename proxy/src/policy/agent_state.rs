//! What a server's agent has said so far (`agent-check`, whose line is read
//! in `policy/check/agent.rs`), and what that does to the server: beside
//! the health of [`health`](super::health) (UP or DOWN by checks and
//! traffic), the agent can take a server out of rotation or change its
//! weight.
//!
//! ```text
//!   the agent says      the server
//!   down/fail/stopped   out of rotation until the agent says up
//!   maint               out of rotation until the agent says ready
//!   drain               weight 0 (open connections go on) until ready
//!   75%                 weight 75% of its configured weight, until another %
//! ```
//!
//! A server is in rotation when its checks say UP and its agent says
//! neither down nor maint; its weight is the agent's share of its
//! configured one, 0 while draining. Each word holds until the agent takes
//! it back, as in HAProxy.

use super::check::agent::{Admin, AgentReply};

/// A server's agent state (module docs). The default: nothing said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentState {
    /// `down`, `fail` or `stopped`, not taken back by `up`.
    pub down: bool,
    /// `maint`, not taken back by `ready`.
    pub maint: bool,
    /// `drain`, not taken back by `ready`.
    pub drain: bool,
    /// The last `N%` (100 until one comes).
    pub percent: u32,
    /// The agent's last line, as it said it.
    pub last: String,
}

impl Default for AgentState {
    fn default() -> Self {
        AgentState {
            down: false,
            maint: false,
            drain: false,
            percent: 100,
            last: String::new(),
        }
    }
}

impl AgentState {
    /// Takes in the agent's `line`, read as `reply`.
    pub fn apply(&mut self, line: &str, reply: &AgentReply) {
        if let Some(up) = reply.up {
            self.down = !up;
        }
        match reply.admin {
            Some(Admin::Ready) => (self.maint, self.drain) = (false, false),
            Some(Admin::Drain) => self.drain = true,
            Some(Admin::Maint) => self.maint = true,
            None => {}
        }
        if let Some(percent) = reply.percent {
            self.percent = percent;
        }
        self.last = line.to_string();
    }

    /// Whether the agent keeps the server out of rotation.
    pub fn is_out(&self) -> bool {
        self.down || self.maint
    }

    /// The weight, in percent of the configured one, the agent asks for.
    pub fn weight_percent(&self) -> u32 {
        if self.drain { 0 } else { self.percent }
    }

    /// `down`, `maint`, `drain`, `75%` or `ready`: the state in words, for
    /// the log and the dump.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if self.down {
            words.push("down".to_string());
        }
        if self.maint {
            words.push("maint".to_string());
        }
        if self.drain {
            words.push("drain".to_string());
        }
        if self.percent != 100 {
            words.push(format!("{}%", self.percent));
        }
        if words.is_empty() {
            words.push("ready".to_string());
        }
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(state: &mut AgentState, line: &str) -> (bool, u32) {
        state.apply(line, &AgentReply::parse(line));
        (state.is_out(), state.weight_percent())
    }

    #[test]
    fn each_word_holds_until_taken_back() {
        let mut s = AgentState::default();
        assert_eq!(said(&mut s, "75%"), (false, 75));
        assert_eq!(said(&mut s, "drain"), (false, 0));
        assert_eq!(s.describe(), "drain 75%");
        assert_eq!(said(&mut s, "up"), (false, 0), "up does not end a drain");
        assert_eq!(said(&mut s, "ready"), (false, 75));
        assert_eq!(said(&mut s, "down # disk full"), (true, 75));
        assert_eq!(
            said(&mut s, "ready"),
            (true, 75),
            "ready does not undo down"
        );
        assert_eq!(said(&mut s, "up 100%"), (false, 100));
        assert_eq!(said(&mut s, "maint"), (true, 100));
        assert_eq!(said(&mut s, "ready"), (false, 100));
        assert_eq!(s.describe(), "ready");
        assert_eq!(s.last, "ready");
    }
}
