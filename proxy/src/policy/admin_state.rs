//! What the operator says about each server at runtime: its admin state
//! (`ready`, `drain`, `maint`) and its weight, HAProxy's `set server
//! BE/SRV state` and `set weight`, kept beside its health and read by
//! every worker on every pick.
//!
//! ```text
//!   state   new connections   open connections   health checks
//!   ready   yes (by weight)   go on              yes
//!   drain   none              go on to their end yes
//!   maint   none              go on, unless cut  none
//! ```
//!
//! Health and admin state are two separate things, as in HAProxy: a server
//! in `drain` is still checked and can be up or down; `proxy_backend_up`
//! stays its health, and the admin state has gauges of its own.
//!
//! # Shared by every worker, applied before the answer
//!
//! One [`AdminBoard`] per frontend, inside its health board, holds one
//! state and one weight per server in atomics. An action stores them, then
//! bumps the health board's generation (`policy/health.rs`); a worker
//! compares that generation before every pick and copies the board into
//! its balancer when it moved. So there is nothing for a worker to apply
//! later: a pick that starts after the store sees the new state, and the
//! answer to the action is written after the store. A client that connects
//! once the answer is read cannot reach a drained server.
//!
//! # Cut by the operator
//!
//! `shutdown sessions server` cuts a server's open connections through the
//! same per-server wake-up as `on-marked-down shutdown-sessions`; this
//! board remembers who asked the last cut, so that each connection logs
//! `KD` (killed on the operator's behalf, HAProxy's `K`) rather than `DD`.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};

use super::balance::MAX_WEIGHT;

/// A server's admin state (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdminState {
    /// In rotation, by its weight.
    #[default]
    Ready,
    /// No new connection; the open ones finish.
    Drain,
    /// No new connection, no health check.
    Maint,
}

impl AdminState {
    /// Every state, in the order of the docs.
    pub const ALL: [AdminState; 3] = [AdminState::Ready, AdminState::Drain, AdminState::Maint];

    /// Its name, as actions, the state file and the metrics write it
    /// (HAProxy's words).
    pub fn name(self) -> &'static str {
        match self {
            AdminState::Ready => "ready",
            AdminState::Drain => "drain",
            AdminState::Maint => "maint",
        }
    }

    /// The state named `word`.
    pub fn parse(word: &str) -> Option<AdminState> {
        AdminState::ALL.into_iter().find(|s| s.name() == word)
    }

    fn from_u8(value: u8) -> AdminState {
        match value {
            1 => AdminState::Drain,
            2 => AdminState::Maint,
            _ => AdminState::Ready,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            AdminState::Ready => 0,
            AdminState::Drain => 1,
            AdminState::Maint => 2,
        }
    }
}

/// A weight outside `0..=256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightOutOfRange(pub u64);

impl std::fmt::Display for WeightOutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "weight {} is out of range; a weight is 0 to {MAX_WEIGHT}",
            self.0
        )
    }
}

/// One server's admin state and weight, as a value: what a reload, an
/// upgrade and the state file carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// Its admin state.
    pub state: AdminState,
    /// Its weight, 0 to [`MAX_WEIGHT`].
    pub weight: u32,
}

#[derive(Debug)]
struct ServerAdmin {
    state: AtomicU8,
    weight: AtomicU32,
    /// Its weight in the configuration, for `show servers state`.
    configured: u32,
    /// The last cut of its connections was the operator's.
    cut_by_operator: AtomicBool,
}

/// Every server's admin state and weight for one frontend (module docs).
#[derive(Debug, Default)]
pub struct AdminBoard {
    servers: Vec<ServerAdmin>,
}

impl AdminBoard {
    /// Every server `ready`, at its configured weight (`weights`, by index).
    pub fn new(weights: impl IntoIterator<Item = u32>) -> AdminBoard {
        let servers = weights
            .into_iter()
            .map(|w| ServerAdmin {
                state: AtomicU8::new(AdminState::Ready.to_u8()),
                weight: AtomicU32::new(w.min(MAX_WEIGHT)),
                configured: w.min(MAX_WEIGHT),
                cut_by_operator: AtomicBool::new(false),
            })
            .collect();
        AdminBoard { servers }
    }

    /// How many servers (0 for a board built without weights: every
    /// server then reads `ready` at its configured weight).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// No servers?
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Server `index`'s admin state (`ready` for an index beyond the board).
    pub fn state(&self, index: usize) -> AdminState {
        self.servers.get(index).map_or(AdminState::Ready, |s| {
            AdminState::from_u8(s.state.load(Ordering::Acquire))
        })
    }

    /// Server `index`'s weight as the operator set it (its configured one
    /// until then); `None` beyond the board.
    pub fn weight(&self, index: usize) -> Option<u32> {
        let server = self.servers.get(index)?;
        Some(server.weight.load(Ordering::Acquire))
    }

    /// Server `index`'s weight in the configuration.
    pub fn configured(&self, index: usize) -> Option<u32> {
        self.servers.get(index).map(|s| s.configured)
    }

    /// Both, as a value.
    pub fn setting(&self, index: usize) -> Option<Setting> {
        Some(Setting {
            state: self.state(index),
            weight: self.weight(index)?,
        })
    }

    /// Stores server `index`'s state; the caller bumps the generation
    /// (`HealthBoard::set_admin_state`). False beyond the board.
    pub fn store_state(&self, index: usize, state: AdminState) -> bool {
        let Some(server) = self.servers.get(index) else {
            return false;
        };
        server.state.store(state.to_u8(), Ordering::Release);
        true
    }

    /// Stores server `index`'s weight, refused outside `0..=256`; the
    /// caller bumps the generation. `Ok(false)` beyond the board.
    pub fn store_weight(&self, index: usize, weight: u32) -> Result<bool, WeightOutOfRange> {
        if weight > MAX_WEIGHT {
            return Err(WeightOutOfRange(u64::from(weight)));
        }
        let Some(server) = self.servers.get(index) else {
            return Ok(false);
        };
        server.weight.store(weight, Ordering::Release);
        Ok(true)
    }

    /// Records who cuts server `index`'s connections, just before they are
    /// woken: the operator (`true`), or its health (`false`).
    pub fn note_cut(&self, index: usize, by_operator: bool) {
        if let Some(server) = self.servers.get(index) {
            server.cut_by_operator.store(by_operator, Ordering::Release);
        }
    }

    /// Was the last cut of server `index`'s connections the operator's?
    pub fn cut_by_operator(&self, index: usize) -> bool {
        self.servers
            .get(index)
            .is_some_and(|s| s.cut_by_operator.load(Ordering::Acquire))
    }

    /// May server `index` get new connections, as far as the operator says?
    pub fn takes_new(&self, index: usize) -> bool {
        self.state(index) == AdminState::Ready
    }

    /// Are its health checks on (not in `maint`)?
    pub fn checks_on(&self, index: usize) -> bool {
        self.state(index) != AdminState::Maint
    }
}

/// Parses a weight as an action writes it: a decimal number, 0 to 256.
pub fn parse_weight(word: &str) -> Result<u32, String> {
    let word = word.trim();
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{word}' is not a weight; a weight is a whole number, 0 to {MAX_WEIGHT}"
        ));
    }
    match word.parse::<u64>() {
        Ok(n) if n <= u64::from(MAX_WEIGHT) => Ok(u32::try_from(n).unwrap_or(MAX_WEIGHT)),
        Ok(n) => Err(WeightOutOfRange(n).to_string()),
        Err(_) => Err(WeightOutOfRange(u64::MAX).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_and_names_round_trip() {
        let board = AdminBoard::new([1, 3]);
        assert_eq!(board.state(1), AdminState::Ready);
        assert!(board.store_state(1, AdminState::Drain));
        assert_eq!(board.state(1), AdminState::Drain);
        assert!(!board.takes_new(1) && board.checks_on(1));
        assert!(board.store_state(0, AdminState::Maint));
        assert!(!board.checks_on(0));
        assert!(!board.store_state(2, AdminState::Maint), "beyond the board");
        for state in AdminState::ALL {
            assert_eq!(AdminState::parse(state.name()), Some(state));
        }
        assert_eq!(AdminState::parse("DRAIN"), None);
    }

    #[test]
    fn weights_are_0_to_256() {
        let board = AdminBoard::new([1, 300]);
        assert_eq!(board.configured(1), Some(256), "clamped");
        assert_eq!(board.store_weight(0, 0), Ok(true));
        assert_eq!(board.store_weight(0, 256), Ok(true));
        assert_eq!(board.store_weight(0, 257), Err(WeightOutOfRange(257)));
        assert_eq!(board.weight(0), Some(256));
        assert_eq!(parse_weight("3"), Ok(3));
        assert_eq!(parse_weight(" 0 "), Ok(0));
        for junk in [
            "",
            "-1",
            "3.5",
            "x",
            "0x10",
            "257",
            "99999999999999999999999",
        ] {
            assert!(parse_weight(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn the_last_cut_says_who_asked() {
        let board = AdminBoard::new([1]);
        assert!(!board.cut_by_operator(0));
        board.note_cut(0, true);
        assert!(board.cut_by_operator(0));
        board.note_cut(0, false);
        assert!(!board.cut_by_operator(0));
    }
}
