//! What the operator said of every server, as lines of text: the answer
//! to `show servers state`, the `server-state-file` a restart reads back,
//! and what an upgrade hands the new process (`ops/upgrade/wire.rs`), one
//! format for all three, as HAProxy's `show servers state` output is its
//! `server-state-file`.
//!
//! ```text
//!   # frontend group server state weight configured-weight health
//!   web web s1 ready 1 1 up
//!   web web s2 drain 3 1 up
//! ```
//!
//! Names are single words (the configuration splits on blanks), so no
//! quoting is needed. `health` is there for the reader; reading a line
//! back takes the state and, when the operator changed it (it differs from
//! `configured-weight`), the weight. A server is found again by its
//! frontend, group and name: one the file no longer names is left out, one
//! it names anew starts `ready` at its configured weight.
//!
//! The file is written whole to a temporary name beside it, then renamed
//! over it (mode 0600), one writer at a time: a crash mid-write leaves the
//! previous file.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::ops::metrics::exposition::Registry;
use crate::policy::admin_state::{AdminState, parse_weight};
use crate::policy::health::HealthBoard;

/// The first line of the text: the columns.
pub const HEADER: &str = "# frontend group server state weight configured-weight health";

/// One server's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// Its frontend's name.
    pub frontend: String,
    /// Its group's name (the frontend's own, for its own lines).
    pub group: String,
    /// Its name (its address, for a line without one).
    pub server: String,
    /// The operator's state.
    pub state: AdminState,
    /// Its weight in force.
    pub weight: u32,
    /// Its weight in the configuration.
    pub configured: u32,
    /// Up by its health (`None` when read back: not the operator's).
    pub up: Option<bool>,
}

impl ServerLine {
    /// The line, without its newline.
    pub fn line(&self) -> String {
        let health = match self.up {
            Some(true) => "up",
            Some(false) => "down",
            None => "-",
        };
        format!(
            "{} {} {} {} {} {} {health}",
            self.frontend,
            self.group,
            self.server,
            self.state.name(),
            self.weight,
            self.configured
        )
    }

    /// Reads a line back (the health column may be missing).
    pub fn parse(line: &str) -> Result<ServerLine, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [frontend, group, server, state, weight, configured, ..] = words[..] else {
            return Err(format!(
                "'{line}': not a server's line; expected: {}",
                HEADER.trim_start_matches("# ")
            ));
        };
        let state = AdminState::parse(state)
            .ok_or_else(|| format!("'{state}' is not a state; use ready, drain or maint"))?;
        let up = match words.get(6) {
            Some(&"up") => Some(true),
            Some(&"down") => Some(false),
            _ => None,
        };
        Ok(ServerLine {
            frontend: frontend.to_string(),
            group: group.to_string(),
            server: server.to_string(),
            state,
            weight: parse_weight(weight)?,
            configured: parse_weight(configured)?,
            up,
        })
    }
}

/// Every server of every frontend `registry` shows, in order.
pub fn lines(registry: &Registry) -> Vec<ServerLine> {
    let mut all = Vec::new();
    for frontend in registry.frontend_names() {
        let Some((board, servers)) = registry.servers(frontend) else {
            continue;
        };
        for (index, labels) in servers.iter().enumerate().take(board.len()) {
            let admin = board.admin();
            let Some(setting) = admin.setting(index) else {
                continue;
            };
            all.push(ServerLine {
                frontend: frontend.to_string(),
                group: labels.group.clone(),
                server: labels.name.clone(),
                state: setting.state,
                weight: setting.weight,
                configured: admin.configured(index).unwrap_or(setting.weight),
                up: Some(board.is_up(index)),
            });
        }
    }
    all
}

/// The text: [`HEADER`], then one line per server.
pub fn render(lines: &[ServerLine]) -> String {
    let mut text = format!("{HEADER}\n");
    for line in lines {
        text.push_str(&line.line());
        text.push('\n');
    }
    text
}

/// Reads `text` back: its lines, and a message for each line that is not
/// one (`PATH:LINE: what`), which the caller logs; comments and blank
/// lines are skipped.
pub fn parse(path: &Path, text: &str) -> (Vec<ServerLine>, Vec<String>) {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match ServerLine::parse(line) {
            Ok(parsed) => lines.push(parsed),
            Err(why) => errors.push(format!("{}:{}: {why}", path.display(), number + 1)),
        }
    }
    (lines, errors)
}

/// Restores what `lines` say of frontend `frontend`'s servers (each by
/// its group and name, `servers[i]`) on `board`. Returns how many servers
/// were found.
pub fn restore(
    lines: &[ServerLine],
    frontend: &str,
    servers: &[(&str, &str)],
    board: &HealthBoard,
) -> usize {
    let mut found = 0;
    for line in lines.iter().filter(|l| l.frontend == frontend) {
        let index = servers
            .iter()
            .position(|&(group, name)| group == line.group && name == line.server);
        let Some(index) = index else {
            continue;
        };
        found += 1;
        board.set_admin_state(index, line.state);
        let configured = board.admin().configured(index);
        if line.weight != line.configured && configured.is_some() {
            let _ = board.set_admin_weight(index, line.weight);
        }
    }
    found
}

/// One writer at a time: the admin thread, the socket's threads and the
/// control thread all write the file, through the same temporary name.
static WRITING: Mutex<()> = Mutex::new(());

/// Writes every server's line to `path` (mode 0600), through a temporary
/// file renamed over it.
pub fn write_file(path: &Path, registry: &Registry) -> io::Result<()> {
    let _one = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    let text = render(&lines(registry));
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("server-state-file {}: {e}", path.display()),
        )
    })
}

/// Reads `path`: its lines and its errors (an absent file is no lines, no
/// error: the first start).
pub fn read_file(path: &Path) -> io::Result<(Vec<ServerLine>, Vec<String>)> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(parse(path, &text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((Vec::new(), Vec::new())),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("server-state-file {}: {e}", path.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::admin_state::AdminBoard;
    use std::net::SocketAddr;

    #[test]
    fn a_line_round_trips_and_junk_is_refused() {
        let line = ServerLine {
            frontend: "web".into(),
            group: "web".into(),
            server: "s2".into(),
            state: AdminState::Drain,
            weight: 3,
            configured: 1,
            up: Some(true),
        };
        assert_eq!(line.line(), "web web s2 drain 3 1 up");
        assert_eq!(ServerLine::parse(&line.line()), Ok(line.clone()));
        let short = ServerLine::parse("web web s2 drain 3 1").expect("no health column");
        assert_eq!(short.up, None);
        for junk in [
            "web web s2 sideways 3 1",
            "web web s2 drain 300 1",
            "web s2 drain",
            "web web s2 drain x 1",
        ] {
            assert!(ServerLine::parse(junk).is_err(), "{junk}");
        }
        let (lines, errors) = parse(Path::new("f"), "# c\n\nweb web s2 maint 0 1\nnope\n");
        assert_eq!(lines.len(), 1);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("f:4: "), "{}", errors[0]);
    }

    #[test]
    fn restore_finds_servers_by_group_and_name() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let board = HealthBoard::new("web", &[(addr, None), (addr, None)])
            .with_admin(AdminBoard::new([1, 1]));
        let (lines, _) = parse(
            Path::new("f"),
            "web web s2 drain 3 1 up\nweb web gone maint 1 1\napi api s1 maint 1 1\n",
        );
        let found = restore(&lines, "web", &[("web", "s1"), ("web", "s2")], &board);
        assert_eq!(found, 1);
        assert_eq!(board.admin().state(1), AdminState::Drain);
        assert_eq!(board.admin().weight(1), Some(3));
        assert_eq!(board.admin().state(0), AdminState::Ready);
    }
}
