//! The views: one row per frontend, per group and per server, read from the
//! published registry and the rates the admin thread samples, written as
//! JSON (`GET /stats.json`) or CSV (`GET /stats.csv`, HAProxy's `show stat`
//! column names where the field is the same).
//!
//! ```text
//!   # pxname,svname,qcur,qmax,scur,smax,stot,bin,bout,econ,wretr,wredis,status,weight,...
//!   web,FRONTEND,0,0,3,9,1200,...,OPEN,...            the frontend: its clients
//!   web,BACKEND,0,2,3,9,1190,...,UP,...               its group: its servers summed
//!   web,a,0,2,2,5,600,...,UP,...                      one server
//! ```
//!
//! A frontend's own lines make the group named after it; each `group`
//! section of its is a group of its own. A row's state comes from one
//! function, [`server_state`]; a group is up while one of its servers is.
//! The rows are made anew at each request, from relaxed loads of the
//! workers' counters (as a scrape's): their number is the configuration's,
//! and nothing else is kept per request.

use std::fmt::Write as _;
use std::time::Instant;

use crate::log::json::push_string;
use crate::ops::metrics::exposition::{
    BackendCounter, FrontendCounter, FrontendView, Published, Registry,
};
use crate::ops::metrics::rates::Recent;
use crate::policy::admin_state::AdminState;
use crate::policy::health::HealthBoard;

/// What a row is: HAProxy's `type` column (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// A frontend: its clients.
    Frontend,
    /// A group of servers (HAProxy's backend): its servers summed.
    Group,
    /// One server.
    #[default]
    Server,
}

impl Kind {
    /// HAProxy's number for it.
    fn number(self) -> u8 {
        match self {
            Kind::Frontend => 0,
            Kind::Group => 1,
            Kind::Server => 2,
        }
    }

    /// Its name in the JSON.
    fn name(self) -> &'static str {
        match self {
            Kind::Frontend => "frontend",
            Kind::Group => "group",
            Kind::Server => "server",
        }
    }
}

/// One row of the views.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Frontend, group or server.
    pub kind: Kind,
    /// The frontend it belongs to.
    pub frontend: String,
    /// HAProxy's `pxname`: the frontend's name, or the group's.
    pub pxname: String,
    /// HAProxy's `svname`: `FRONTEND`, `BACKEND` or the server's name.
    pub svname: String,
    /// A server's address as written (empty for the others).
    pub addr: String,
    /// `open` (a frontend), `up`, `down`.
    pub state: &'static str,
    /// Whether a server is checked (`check` on its line).
    pub checked: bool,
    /// Its last check: HAProxy's status code, what it saw, how long it took
    /// in milliseconds (none yet, or not checked: empty).
    pub check: Option<(&'static str, String, u64)>,
    /// Its weight (a group: its usable servers' weights summed).
    pub weight: u64,
    /// Sessions open now.
    pub scur: u64,
    /// The most sessions open at once: each worker's peak, summed (exact
    /// with one worker; with more, the workers' peaks may not have come at
    /// the same moment).
    pub smax: u64,
    /// Sessions so far.
    pub stot: u64,
    /// Clients waiting now for a place under a server's `maxconn`.
    pub qcur: u64,
    /// The most clients waiting at once (each worker's peak, summed).
    pub qmax: u64,
    /// Bytes from clients (to the server).
    pub bin: u64,
    /// Bytes to clients (from the server).
    pub bout: u64,
    /// Failed connects (a frontend: clients refused for want of a server).
    pub econ: u64,
    /// Connects retried on this server (a frontend: all its retries).
    pub wretr: u64,
    /// Clients moved from this server to another after a failed connect.
    pub wredis: u64,
    /// Rate, history, time in its state (`ops/metrics/rates.rs`).
    pub recent: Recent,
}

impl Row {
    /// The name its track is kept by: frontend, proxy, server.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.frontend, self.pxname, self.svname)
    }
}

/// The state of server `index` of `board`: `maint` while the operator
/// keeps it so (`policy/admin_state.rs`), else `down` by its health, else
/// `drain` while the operator drains it, else `up` (`up` for a server the
/// board does not have: one without health). Every row's state comes from
/// here (a group's from its servers').
pub fn server_state(board: &HealthBoard, index: usize) -> &'static str {
    let admin = board.admin().state(index);
    let down = index < board.len() && !board.is_up(index);
    match (admin, down) {
        (AdminState::Maint, _) => admin.name(),
        (_, true) => "down",
        (AdminState::Drain, false) => admin.name(),
        (AdminState::Ready, false) => "up",
    }
}

/// Every row of `published` now, with its rates.
pub fn rows(published: &Published) -> Vec<Row> {
    let registry = published.get();
    let now = Instant::now();
    let mut rows = counted_rows(&registry);
    for row in &mut rows {
        row.recent = published.rates().recent(&row.key(), now);
    }
    rows
}

/// One sample of every row into the rates: run once a second by the admin
/// thread.
pub fn sample(published: &Published) {
    let rows = counted_rows(&published.get());
    let keys: Vec<String> = rows.iter().map(Row::key).collect();
    let now = Instant::now();
    let each = rows
        .iter()
        .zip(&keys)
        .map(|(r, k)| (k.as_str(), r.stot, r.state));
    published.rates().sample(now, each);
}

/// Every row with its counters, without rates.
fn counted_rows(registry: &Registry) -> Vec<Row> {
    let mut rows = Vec::new();
    for frontend in registry.frontends() {
        rows.push(frontend_row(registry, &frontend));
        let mut groups: Vec<&str> = Vec::new();
        for server in frontend.servers {
            if !groups.contains(&server.group.as_str()) {
                groups.push(&server.group);
            }
        }
        for group in groups {
            let start = rows.len() + 1;
            rows.push(Row::default());
            for (index, server) in frontend.servers.iter().enumerate() {
                if server.group == group {
                    rows.push(server_row(registry, &frontend, index));
                }
            }
            rows[start - 1] = group_row(&frontend, group, &rows[start..]);
        }
    }
    rows
}

fn frontend_row(registry: &Registry, f: &FrontendView<'_>) -> Row {
    let sum = |c: FrontendCounter| registry.frontend_sum(f.index, c);
    Row {
        kind: Kind::Frontend,
        frontend: f.name.to_string(),
        pxname: f.name.to_string(),
        svname: "FRONTEND".into(),
        state: "open",
        scur: sum(|c| &c.active),
        smax: sum(|c| &c.max_active),
        stot: sum(|c| &c.connections),
        bin: sum(|c| &c.bytes_in),
        bout: sum(|c| &c.bytes_out),
        econ: sum(|c| &c.connect_errors),
        wretr: sum(|c| &c.retries),
        ..Row::default()
    }
}

fn server_row(registry: &Registry, f: &FrontendView<'_>, index: usize) -> Row {
    let sum = |c: BackendCounter| registry.backend_sum(f.index, index, c);
    let labels = &f.servers[index];
    let board = f.board;
    let checked = index < board.len() && board.checked(index).is_some();
    let check = checked.then(|| board.last_check(index)).flatten().map(|c| {
        let millis = u64::try_from(c.took.as_millis()).unwrap_or(u64::MAX);
        (c.verdict.status.code(), c.verdict.detail, millis)
    });
    Row {
        kind: Kind::Server,
        frontend: f.name.to_string(),
        pxname: labels.group.clone(),
        svname: labels.name.clone(),
        addr: labels.addr.clone(),
        state: server_state(board, index),
        checked,
        check,
        weight: u64::from(
            board
                .admin()
                .weight(index)
                .or(f.weights.get(index).copied())
                .unwrap_or(1),
        ),
        scur: sum(|c| &c.active),
        smax: sum(|c| &c.max_active),
        stot: sum(|c| &c.connections),
        qcur: sum(|c| &c.queued),
        qmax: sum(|c| &c.max_queued),
        bin: sum(|c| &c.bytes_in),
        bout: sum(|c| &c.bytes_out),
        econ: sum(|c| &c.connect_errors),
        wretr: sum(|c| &c.retries),
        wredis: sum(|c| &c.redispatches),
        ..Row::default()
    }
}

/// A group's row: its `servers`' rows summed; up while one usable server
/// is (up, with a weight above 0).
fn group_row(f: &FrontendView<'_>, group: &str, servers: &[Row]) -> Row {
    let usable = |s: &&Row| s.state == "up" && s.weight > 0;
    let total = |field: fn(&Row) -> u64| servers.iter().map(field).sum::<u64>();
    Row {
        kind: Kind::Group,
        frontend: f.name.to_string(),
        pxname: group.to_string(),
        svname: "BACKEND".into(),
        state: if servers.iter().any(|s| usable(&s)) {
            "up"
        } else {
            "down"
        },
        weight: servers.iter().filter(usable).map(|s| s.weight).sum(),
        scur: total(|r| r.scur),
        smax: total(|r| r.smax),
        stot: total(|r| r.stot),
        qcur: total(|r| r.qcur),
        qmax: total(|r| r.qmax),
        bin: total(|r| r.bin),
        bout: total(|r| r.bout),
        econ: total(|r| r.econ),
        wretr: total(|r| r.wretr),
        wredis: total(|r| r.wredis),
        ..Row::default()
    }
}

/// The numbers of a row, by their HAProxy names, in the order both forms
/// write them.
fn numbers(row: &Row) -> [(&'static str, u64); 11] {
    [
        ("qcur", row.qcur),
        ("qmax", row.qmax),
        ("scur", row.scur),
        ("smax", row.smax),
        ("stot", row.stot),
        ("bin", row.bin),
        ("bout", row.bout),
        ("econ", row.econ),
        ("wretr", row.wretr),
        ("wredis", row.wredis),
        ("weight", row.weight),
    ]
}

/// `GET /stats.json`: `{"rows": [...]}`, one object per row.
pub fn json(rows: &[Row]) -> String {
    let mut out = String::with_capacity(256 + rows.len() * 512);
    out.push_str("{\"rows\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_row(&mut out, row);
    }
    out.push_str("]}\n");
    out
}

fn json_row(out: &mut String, row: &Row) {
    let text = [
        ("type", row.kind.name()),
        ("frontend", &row.frontend),
        ("pxname", &row.pxname),
        ("svname", &row.svname),
        ("addr", &row.addr),
        ("state", row.state),
        ("check_status", check_status(row)),
        ("check_desc", row.check.as_ref().map_or("", |c| &c.1)),
    ];
    out.push('{');
    for (i, (name, value)) in text.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(out, "{comma}\"{name}\":");
        push_string(out, value);
    }
    for (name, value) in numbers(row) {
        let _ = write!(out, ",\"{name}\":{value}");
    }
    let recent = &row.recent;
    let _ = write!(
        out,
        ",\"check_duration\":{},\"chkdown\":{},\"lastchg\":{},\"rate\":{},\"rate_max\":{},\"history\":[",
        row.check.as_ref().map_or(-1, |c| c.2 as i64),
        recent.downs,
        recent.since_change.as_secs(),
        recent.rate,
        recent.rate_max,
    );
    for (i, count) in recent.history.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(out, "{comma}{count}");
    }
    out.push_str("]}");
}

/// A row's check, as HAProxy's `check_status` column has it: the last
/// check's code, `no check` for a server without one, empty before the
/// first and for frontends and groups.
fn check_status(row: &Row) -> &'static str {
    match (&row.check, row.kind, row.checked) {
        (Some(c), _, _) => c.0,
        (None, Kind::Server, false) => "no check",
        _ => "",
    }
}

/// The CSV's header line, HAProxy's `# ` first.
const CSV_HEAD: &str = "# pxname,svname,qcur,qmax,scur,smax,stot,bin,bout,econ,wretr,wredis,\
weight,status,chkdown,lastchg,rate,rate_max,check_status,check_duration,check_desc,type,frontend,\
addr\n";

/// `GET /stats.csv`: HAProxy's `show stat` layout, its column names where
/// the field is the same, ours (`frontend`, `addr`) at the end.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::with_capacity(CSV_HEAD.len() + rows.len() * 160);
    out.push_str(CSV_HEAD);
    for row in rows {
        push_csv(&mut out, &row.pxname);
        out.push(',');
        push_csv(&mut out, &row.svname);
        for (_, value) in numbers(row) {
            let _ = write!(out, ",{value}");
        }
        let recent = &row.recent;
        let duration = row.check.as_ref().map(|c| c.2.to_string());
        let _ = write!(
            out,
            ",{},{},{},{},{},{},{},",
            csv_status(row),
            recent.downs,
            recent.since_change.as_secs(),
            recent.rate,
            recent.rate_max,
            check_status(row),
            duration.unwrap_or_default(),
        );
        push_csv(&mut out, row.check.as_ref().map_or("", |c| &c.1));
        let _ = write!(out, ",{},", row.kind.number());
        push_csv(&mut out, &row.frontend);
        out.push(',');
        push_csv(&mut out, &row.addr);
        out.push('\n');
    }
    out
}

/// HAProxy's `status` column: `OPEN`, `UP`, `DOWN`, and `no check` for a
/// server up without checks.
fn csv_status(row: &Row) -> String {
    match (row.kind, row.checked, row.state) {
        (Kind::Server, false, "up") => "no check".into(),
        (_, _, state) => state.to_ascii_uppercase(),
    }
}

/// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or
/// a line end.
fn push_csv(out: &mut String, field: &str) {
    if field.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::counters::{FrontendCounters, add};
    use crate::ops::metrics::exposition::{FrontendParts, ServerLabels};
    use crate::policy::check::{Status, Verdict};
    use crate::policy::health::Check;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    fn published() -> Arc<Published> {
        let a: SocketAddr = "127.0.0.1:9001".parse().expect("an address");
        let b: SocketAddr = "127.0.0.1:9002".parse().expect("an address");
        let check = Check {
            fall: 1,
            ..Check::default()
        };
        let board = Arc::new(HealthBoard::new("web", &[(a, Some(check)), (b, None)]));
        let labels = |addr: SocketAddr, name: &str| ServerLabels {
            addr: addr.to_string(),
            group: "web".into(),
            name: name.into(),
        };
        let counters: Vec<_> = (0..2).map(|_| Arc::new(FrontendCounters::new(2))).collect();
        add(&counters[0].connections, 7);
        add(&counters[1].connections, 5);
        add(&counters[1].backends[0].connections, 4);
        add(&counters[0].backends[1].connections, 8);
        add(&counters[0].backends[1].redispatches, 1);
        let registry = Registry::from_counters(vec![FrontendParts {
            name: "web".into(),
            backends: vec![labels(a, "a"), labels(b, "b,\"x\"")],
            weights: vec![1, 3],
            board: board.clone(),
            addresses: None,
            counters,
            routes: Vec::new(),
        }]);
        let verdict = Verdict::failed(Status::L4Con, "connection refused");
        board.check_result(0, verdict, Duration::from_millis(2));
        Published::new(registry)
    }

    #[test]
    fn rows_sum_the_workers_and_a_group_its_servers() {
        let published = published();
        sample(&published);
        let rows = rows(&published);
        let names: Vec<_> = rows.iter().map(|r| r.svname.as_str()).collect();
        assert_eq!(names, ["FRONTEND", "BACKEND", "a", "b,\"x\""]);
        assert_eq!((rows[0].stot, rows[0].state), (12, "open"));
        assert_eq!((rows[2].stot, rows[2].state), (4, "down"));
        assert_eq!(rows[2].check.as_ref().map(|c| c.0), Some("L4CON"));
        assert_eq!((rows[3].stot, rows[3].state, rows[3].wredis), (8, "up", 1));
        assert_eq!((rows[1].stot, rows[1].state, rows[1].weight), (12, "up", 3));
    }

    #[test]
    fn csv_has_haproxys_header_and_quotes_what_needs_it() {
        let published = published();
        let text = csv(&rows(&published));
        let mut lines = text.lines();
        let head = lines.next().expect("a header");
        assert!(head.starts_with("# pxname,svname,qcur,qmax,scur,smax,stot,bin,bout,econ"));
        let columns = head.trim_start_matches("# ").split(',').count();
        let server = text.lines().nth(4).expect("server b");
        assert!(
            server.starts_with("web,\"b,\"\"x\"\"\",0,0,0,0,8,"),
            "{server}"
        );
        assert!(server.contains(",no check,"), "{server}");
        let down = text.lines().nth(3).expect("server a");
        assert!(
            down.contains(",DOWN,") && down.contains(",L4CON,2,"),
            "{down}"
        );
        assert_eq!(down.split(',').count(), columns, "{down}");
    }

    #[test]
    fn json_names_every_field_and_escapes_names() {
        let published = published();
        let text = json(&rows(&published));
        assert!(text.starts_with("{\"rows\":[{\"type\":\"frontend\""));
        assert!(text.contains("\"svname\":\"b,\\\"x\\\"\""), "{text}");
        assert!(text.contains("\"check_status\":\"L4CON\""), "{text}");
        assert!(text.contains("\"history\":[]"), "{text}");
    }
}
