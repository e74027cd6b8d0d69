//! The operator's hand on the servers, wired into the epoll mode: who may
//! act (the admin endpoint's allow list and token, the admin socket), and
//! what the servers' admin states and weights survive.
//!
//! ```text
//!   SIGHUP reload   kept for every server the file still names (by frontend,
//!                   group and name: frontend.rs builds the new boards from the old)
//!   SIGUSR2 upgrade the old process sends a `servers` message (ops/upgrade/wire.rs),
//!                   the new one restores it before its workers start
//!   a restart       with server-state-file: written at each change and at the
//!                   stop, read back at start (ops/server_state.rs)
//! ```
//!
//! An upgrade's message wins over the state file: it is the newer word.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::ops::admin::Operator;
use crate::ops::admin::access::{Access, read_token};
use crate::ops::server_state::{self, ServerLine};
use crate::settings::config::Global;

use super::frontend::SharedFrontend;

/// Who may act, and where the states are kept, as `global` says; the
/// token file read here, so that a start refuses one it cannot use.
pub fn operator(global: &Global) -> io::Result<Operator> {
    let token = global
        .admin_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    Ok(Operator {
        access: Access {
            allow: global.admin_allow.clone(),
            token,
        },
        state_file: global.server_state_file.clone(),
    })
}

/// Restores `lines` on the boards of `shared`; logs how many servers were
/// found, naming where the lines came from (`from`).
pub fn restore(shared: &[Arc<SharedFrontend>], lines: &[ServerLine], from: &str) {
    if lines.is_empty() {
        return;
    }
    let mut found = 0;
    for s in shared {
        let f = &s.frontend;
        let names: Vec<(&str, &str)> = (0..f.backends.len())
            .map(|i| (f.group_name_of(i), f.backends[i].name.as_str()))
            .collect();
        found += server_state::restore(lines, &f.name, &names, &s.board);
    }
    crate::info!(
        "{from}: the admin state and weight of {found} of {} servers kept",
        lines.len()
    );
}

/// The lines of `server-state-file`, if there is one (its bad lines
/// logged and skipped; an unreadable file logged, and nothing restored).
pub fn read_state_file(path: Option<&Path>) -> Vec<ServerLine> {
    let Some(path) = path else {
        return Vec::new();
    };
    match server_state::read_file(path) {
        Ok((lines, errors)) => {
            for e in errors {
                crate::warn!("{e}; line skipped");
            }
            lines
        }
        Err(e) => {
            crate::error!("{e}; every server starts ready at its configured weight");
            Vec::new()
        }
    }
}

/// ` (servers added: s3; removed: s1)`, for a reload's line about a
/// changed frontend; nothing when its servers are the same.
pub fn servers_changed(old: &SharedFrontend, new: &SharedFrontend) -> String {
    let names = |s: &SharedFrontend| -> Vec<String> {
        let f = &s.frontend;
        (0..f.backends.len())
            .map(|i| match f.group_name_of(i) == f.name {
                true => f.backends[i].name.clone(),
                false => format!("{}/{}", f.group_name_of(i), f.backends[i].name),
            })
            .collect()
    };
    let (before, after) = (names(old), names(new));
    let added: Vec<&str> = after
        .iter()
        .filter(|n| !before.contains(n))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = before
        .iter()
        .filter(|n| !after.contains(n))
        .map(String::as_str)
        .collect();
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!("servers added: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        parts.push(format!("removed: {}", removed.join(", ")));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join("; ")),
    }
}
