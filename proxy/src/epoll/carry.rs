//! What a reload carries from a frontend it replaces to the one that takes
//! its place: the totals and each server's health.
//!
//! A reload that changes a frontend (its `timeout connect`, a server
//! added) builds its shared state anew (`frontend.rs`): new counters, a new
//! health board. Without this, the frontend's totals would start from zero
//! (7 connections, 20 more, and the views say 20, not 27) and a server
//! known down would start up, taking clients until `fall` checks failed
//! again. So before the new state is handed to the workers:
//!
//! - every total (the counter families of `ops/metrics/exposition.rs`,
//!   gauges left out) of the frontend, and of each server the new file
//!   still names (same name, same address as written), is added to the new
//!   counters of worker 0, as an upgrade's new process does
//!   (`handover.rs`);
//! - each such server that is checked in both starts where it stood (up or
//!   down, and how far into `fall` or `rise`), with its last check shown
//!   until its first check here.
//!
//! The totals are read once, when the file is applied: what the old
//! counters count after that (the bytes of connections still open under
//! the old configuration, when they finish) stays with them and is not
//! seen in the views.

use std::sync::atomic::Ordering::Relaxed;

use crate::ops::metrics::exposition::{backend_totals, frontend_totals};
use crate::settings::config::BackendServer;

use super::frontend::SharedFrontend;

/// Carries `old`'s totals and health into `new` (module docs).
pub fn carry(old: &SharedFrontend, new: &SharedFrontend) {
    let (Some(into), false) = (new.counters.first(), old.counters.is_empty()) else {
        return;
    };
    for (_, counter) in frontend_totals() {
        let total = old
            .counters
            .iter()
            .map(|c| counter(c).load(Relaxed))
            .fold(0, u64::wrapping_add);
        counter(into).fetch_add(total, Relaxed);
    }
    for (at, server) in new.frontend.backends.iter().enumerate() {
        let same = |b: &BackendServer| b.name == server.name && b.addr == server.addr;
        let Some(was) = old.frontend.backends.iter().position(same) else {
            continue;
        };
        if let Some(counters) = into.backends.get(at) {
            for (_, counter) in backend_totals() {
                let each = old.counters.iter().filter_map(|c| c.backends.get(was));
                let total = each
                    .map(|c| counter(c).load(Relaxed))
                    .fold(0, u64::wrapping_add);
                counter(counters).fetch_add(total, Relaxed);
            }
        }
        let checked =
            |s: &SharedFrontend, i: usize| i < s.board.len() && s.board.checked(i).is_some();
        if checked(old, was) && checked(new, at) {
            let kept = "as it was before the reload";
            new.board.seed_as(at, old.board.standing(was), kept);
            if let Some(last) = old.board.last_check(was) {
                new.board.keep_last(at, last);
            }
        }
    }
}
