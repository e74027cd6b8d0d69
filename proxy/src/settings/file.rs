//! Reading a configuration file: its lines into sections, each section's
//! lines through its table of options (`sections.rs`), then what can only be
//! checked once a frontend is complete (a `listen`, a backend, addresses
//! that do not clash).
//!
//! ```text
//!   line ──▶ words ──▶ "global" / "frontend NAME"?  ──▶ open that section
//!                      an option of the open section? ──▶ its setter
//!                      anything else                  ──▶ an error, with a hint
//! ```
//!
//! Parsing never stops at the first mistake and never panics: every
//! problem of the file becomes a [`ConfigError`] that says where
//! (`file:line:column` of the offending word), what was wrong, and what to do.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;

use super::config::{Config, ConfigError, Frontend};
use super::drafts::{FrontendDraft, GlobalDraft, GroupDraft};
use super::groups;
use super::haproxy;
use super::probes;
use super::reader::Reader;
use super::sections::{
    FRONTEND, GLOBAL, GROUP, SECTIONS, names, unknown_in_frontend, unknown_in_global,
    unknown_in_group,
};
use super::words::{Word, did_you_mean, words};

/// Reads and parses a file. Unreadable or non-UTF-8 files are errors too.
pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let name = path.display().to_string();
    let whole_file = |message: String| ConfigError {
        path: name.clone(),
        line: 0,
        column: 0,
        message,
    };
    let bytes =
        std::fs::read(path).map_err(|e| vec![whole_file(format!("cannot read the file: {e}"))])?;
    match std::str::from_utf8(&bytes) {
        Ok(text) => parse(&name, text),
        Err(e) => {
            // Everything before the bad byte is valid UTF-8.
            let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
            let line = valid.matches('\n').count() + 1;
            let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Err(vec![ConfigError {
                line,
                column,
                ..whole_file("the file is not UTF-8 text; save it as UTF-8".to_string())
            }])
        }
    }
}

/// Where the reader is in the file.
enum Section {
    /// Before the first section.
    None,
    Global,
    /// The index into the drafts of the open frontend.
    Frontend(usize),
    /// The name of the open group.
    Group(String),
    /// After a bad section header: its lines are skipped, not reported.
    Skip,
}

/// The file as it is read: the sections so far, and which one is open.
struct File<'p> {
    r: Reader<'p>,
    global: GlobalDraft,
    frontends: Vec<FrontendDraft>,
    /// Each frontend's name, with the line of its header: a second use of a
    /// name is found in one look-up, not by comparing it with every
    /// frontend before it.
    names: HashMap<String, usize>,
    /// The `group` sections, by name.
    groups: HashMap<String, GroupDraft>,
    /// The names of HAProxy's sections met and skipped (`backend pg`): a
    /// `default-group pg` is not reported again as an unknown group.
    skipped: HashSet<String>,
    section: Section,
}

/// Parses the text of a configuration file; `path` only names it in errors.
/// Returns every error of the file, in order, or the configuration.
pub fn parse(path: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    let mut file = File {
        r: Reader::new(path),
        global: GlobalDraft::default(),
        frontends: Vec::new(),
        names: HashMap::new(),
        groups: HashMap::new(),
        skipped: HashSet::new(),
        section: Section::None,
    };
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        file.r.line = index + 1;
        let words = words(line);
        if file.haproxy_group(&words, &lines[index + 1..]) {
            continue;
        }
        file.line(&words);
    }
    file.finish()
}

impl File<'_> {
    /// HAProxy's `group NAME` in its global section (the group to run as)
    /// rather than a `group` section here: `group NAME` in `global`, not
    /// followed by a line of a group (whose first word is not one of
    /// `global`'s, HAProxy's global words, a section header, or nothing).
    /// Reported with what to write instead; `true` if it was one.
    fn haproxy_group(&mut self, words: &[Word<'_>], rest: &[&str]) -> bool {
        let [first, name] = words else {
            return false;
        };
        if first.text != "group" || !matches!(self.section, Section::Global) {
            return false;
        }
        let next = rest.iter().map(|l| words_of(l)).find(|w| !w.is_empty());
        let global_line = next.as_ref().and_then(|w| w.first()).is_none_or(|w| {
            names(GLOBAL).contains(&w.as_str())
                || SECTIONS.contains(&w.as_str())
                || haproxy::global(w).is_some()
        });
        if global_line {
            let message = format!(
                "HAProxy's 'group {0}' of its global section is written after the user here: \
                 'user USER {0}' ('group NAME' starts a section of backends)",
                name.text
            );
            self.r.error(first.column, message);
        }
        global_line
    }

    fn line(&mut self, words: &[Word<'_>]) {
        let Some(&first) = words.first() else {
            return;
        };
        match first.text {
            "global" => return self.open_global(words),
            "frontend" => return self.open_frontend(words),
            "group" => return self.open_group(words),
            _ => {}
        }
        let texts: Vec<&str> = words.iter().map(|w| w.text).collect();
        if let Some((message, name)) = haproxy::section(&texts) {
            self.r.error(first.column, message);
            self.skipped.extend(name);
            self.section = Section::Skip;
            return;
        }
        let before = self.r.errors.len();
        self.read_option(words);
        if self.r.errors.len() > before {
            self.note_error();
        }
    }

    /// A section's line with an error: the section's own completeness
    /// ("no backend", "no listen") is then not judged, since the line in
    /// error may be the one that would have made it complete.
    fn note_error(&mut self) {
        match self.section {
            Section::Frontend(i) => {
                if let Some(draft) = self.frontends.get_mut(i) {
                    draft.erred = true;
                }
            }
            Section::Group(ref name) => {
                if let Some(draft) = self.groups.get_mut(name) {
                    draft.erred = true;
                }
            }
            _ => {}
        }
    }

    /// A line of the open section: one of its options, or an error.
    fn read_option(&mut self, words: &[Word<'_>]) {
        let Some(&first) = words.first() else {
            return;
        };
        let known = match self.section {
            Section::Skip => true,
            Section::None => {
                self.outside_sections(first);
                true
            }
            Section::Global => self.r.dispatch(GLOBAL, &mut self.global, words),
            Section::Frontend(i) => match self.frontends.get_mut(i) {
                Some(draft) => self.r.dispatch(FRONTEND, draft, words),
                None => true,
            },
            Section::Group(ref name) => match self.groups.get_mut(name) {
                Some(draft) => self.r.dispatch(GROUP, draft, words),
                None => true,
            },
        };
        if !known {
            match self.section {
                Section::Global => unknown_in_global(&mut self.r, words),
                Section::Group(_) => unknown_in_group(&mut self.r, words),
                _ => unknown_in_frontend(&mut self.r, words),
            }
        }
    }

    fn open_global(&mut self, words: &[Word<'_>]) {
        if let Some(earlier) = self.global.line {
            let message = format!(
                "a second 'global' section (the first is at line {earlier}); merge them into one"
            );
            self.r.error(words[0].column, message);
            self.section = Section::Skip;
            return;
        }
        self.global.line = Some(self.r.line);
        self.section = Section::Global;
        self.r.no_more(words, 1);
    }

    /// The name of a section header (`frontend NAME`, `group NAME`), if it
    /// is one: letters, digits, '-', '_' and '.'.
    fn section_name<'w>(&mut self, words: &[Word<'w>], kind: &str) -> Option<Word<'w>> {
        self.section = Section::Skip;
        let name = self
            .r
            .value(words, 0, &format!("a name, like '{kind} web'"))?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if !name.text.chars().all(allowed) {
            let message = format!(
                "{kind} name '{}': use only letters, digits, '-', '_' and '.'",
                name.text
            );
            self.r.error(name.column, message);
            return None;
        }
        self.r.no_more(words, 2);
        Some(name)
    }

    fn open_frontend(&mut self, words: &[Word<'_>]) {
        let Some(name) = self.section_name(words, "frontend") else {
            return;
        };
        if let Some(first) = self.names.get(name.text) {
            let message = format!(
                "duplicate frontend '{}' (the first is at line {first}); give each frontend its own name",
                name.text
            );
            return self.r.error(name.column, message);
        }
        self.names.insert(name.text.to_string(), self.r.line);
        let draft = FrontendDraft::new(name.text, self.r.line, words[0].column);
        self.frontends.push(draft);
        self.section = Section::Frontend(self.frontends.len() - 1);
    }

    /// `group NAME`: backends that frontends route to by name.
    fn open_group(&mut self, words: &[Word<'_>]) {
        let Some(name) = self.section_name(words, "group") else {
            return;
        };
        if let Some(first) = self.groups.get(name.text) {
            let message = format!(
                "duplicate group '{}' (the first is at line {}); give each group its own name",
                name.text, first.line
            );
            return self.r.error(name.column, message);
        }
        let draft = GroupDraft::new(name.text, self.r.line, words[0].column);
        self.groups.insert(name.text.to_string(), draft);
        self.section = Section::Group(name.text.to_string());
    }

    /// A line before any section: HAProxy's and nginx's section names get
    /// what to write instead.
    fn outside_sections(&mut self, first: Word<'_>) {
        let word = first.text;
        let is_option =
            |name: &str| names(GLOBAL).contains(&name) || names(FRONTEND).contains(&name);
        let message = if let Some(hint) = foreign_section(word) {
            format!("unknown section '{word}': {hint}")
        } else if is_option(word) {
            format!(
                "'{word}' outside any section; start one with 'global', 'frontend NAME' or \
                 'group NAME' above it"
            )
        } else {
            format!(
                "unknown section '{word}'{}; a file has 'global', 'frontend NAME' and 'group \
                 NAME' sections",
                did_you_mean(word, SECTIONS)
            )
        };
        self.r.error(first.column, message);
        self.section = Section::Skip;
    }

    /// What can only be checked once every section is read.
    fn finish(mut self) -> Result<Config, Vec<ConfigError>> {
        let mut frontends = Vec::new();
        let mut listening = Listening::default();
        for group in self.groups.values_mut() {
            let pool = &mut group.pool;
            probes::finish(
                &mut self.r,
                &mut pool.probe,
                &mut pool.backends,
                pool.backend_lines,
            );
        }
        for draft in &mut self.frontends {
            let pool = &mut draft.pool;
            probes::finish(
                &mut self.r,
                &mut pool.probe,
                &mut pool.backends,
                pool.backend_lines,
            );
        }
        self.global.finish(&mut self.r);
        self.check_groups();
        let pools = self.groups.values_mut().map(|g| &mut g.pool);
        let pools = pools.chain(self.frontends.iter_mut().map(|f| &mut f.pool));
        let mut hosts: Vec<_> = pools.flat_map(|p| std::mem::take(&mut p.hosts)).collect();
        hosts.sort_by_key(|h| (h.line, h.column));
        for mut draft in std::mem::take(&mut self.frontends) {
            self.forget_skipped(&mut draft);
            if let Some(frontend) = self.complete(draft, &mut listening) {
                frontends.push(frontend);
            }
        }
        let r = &mut self.r;
        if r.errors.is_empty() && frontends.is_empty() {
            r.line = 0;
            r.error(
                0,
                "no frontend; add a 'frontend NAME' section with a 'listen' and a 'backend' \
                 (see docs/OPERATIONS.md)",
            );
        }
        r.errors.sort_by_key(|e| (e.line, e.column));
        if r.errors.is_empty() {
            let global = self.global.global;
            Ok(Config {
                global,
                frontends,
                hosts,
            })
        } else {
            Err(self.r.errors)
        }
    }

    /// Every group needs a backend.
    fn check_groups(&mut self) {
        for group in self.groups.values() {
            if group.pool.backend_lines == 0 && !group.erred {
                self.r.line = group.line;
                let message = format!(
                    "group '{}' has no backend; add a line like 'backend 127.0.0.1:9001'",
                    group.name
                );
                self.r.error(group.column, message);
            }
        }
    }

    /// A frontend's references to HAProxy sections that were skipped
    /// (`default-group pg` after `backend pg`): reported once, at the
    /// section, so dropped here, and the frontend counts as erred.
    fn forget_skipped(&self, draft: &mut FrontendDraft) {
        let skipped = |name: &str| self.skipped.contains(name) && !self.groups.contains_key(name);
        if draft
            .default_group
            .as_ref()
            .is_some_and(|(name, ..)| skipped(name))
        {
            draft.default_group = None;
            draft.erred = true;
        }
        let rules = draft.rules.len();
        draft.rules.retain(|rule| !skipped(&rule.group.0));
        draft.erred |= draft.rules.len() < rules;
    }

    /// A frontend whose lines are all read: it needs a `listen` and a
    /// backend, and addresses of its own.
    fn complete(
        &mut self,
        mut draft: FrontendDraft,
        listening: &mut Listening,
    ) -> Option<Frontend> {
        let r = &mut self.r;
        r.line = draft.line;
        let name = &draft.name;
        if draft.listen.is_empty() {
            if !draft.erred {
                let message = format!(
                    "frontend '{name}' has no 'listen'; add a line like 'listen 127.0.0.1:8080'"
                );
                r.error(draft.column, message);
            }
            return None;
        }
        if draft.pool.backend_lines == 0 && draft.default_group.is_none() && !draft.erred {
            let message = format!(
                "frontend '{name}' has no backend; add a line like 'backend 127.0.0.1:9001', \
                 or 'default-group NAME'"
            );
            r.error(draft.column, message);
        }
        for &(addr, line, column) in &draft.listen {
            if let Err(message) = listening.claim(addr, name) {
                r.line = line;
                r.error(column, message);
            }
        }
        let resolved = groups::resolve(&mut self.r, &mut draft, &self.groups)?;
        Some(Frontend {
            name: draft.name,
            listen: draft.listen.iter().map(|&(addr, ..)| addr).collect(),
            freebind: draft.freebind,
            balance: resolved.balance,
            maxconn: draft.maxconn,
            timeouts: draft.timeouts,
            retries: draft.retries,
            backends: resolved.backends,
            access: draft.access,
            maxconn_per_source: draft.maxconn_per_source,
            rate_limit: draft.rate_limit,
            rate_limit_per_source: draft.rate_limit_per_source,
            accept_proxy: draft.accept_proxy,
            proxy_from: draft.proxy_from,
            default_group: resolved.default_group,
            groups: resolved.groups,
            routing: resolved.routing,
            splice: draft.splice,
            dontlognull: draft.dontlognull,
        })
    }
}

/// Where each address is listened on, by which frontend: an address is
/// one frontend's, and so is a port on every address of a family
/// (`0.0.0.0:80` and `127.0.0.1:80` would both bind with SO_REUSEPORT, and
/// the second would take the first's clients on 127.0.0.1). Port 0 asks
/// the kernel for a free port, so such addresses never clash.
#[derive(Debug, Default)]
struct Listening {
    /// Each address, with its frontend.
    at: HashMap<SocketAddr, String>,
    /// Each (family, port) with an address of any kind, with the first
    /// address and frontend: a wildcard there, or a wildcard's claim, finds
    /// the clash in one look-up.
    ports: HashMap<(bool, u16), (SocketAddr, String)>,
}

impl Listening {
    /// Claims `addr` for frontend `name`, or says whose it is.
    fn claim(&mut self, addr: SocketAddr, name: &str) -> Result<(), String> {
        if addr.port() == 0 {
            return Ok(());
        }
        // A frontend's own repeats are refused as its lines are read.
        if let Some(other) = self.at.get(&addr) {
            return Err(format!(
                "frontend '{name}' listens on {addr}, as frontend '{other}' does; give each \
                 frontend its own address"
            ));
        }
        let key = (addr.is_ipv6(), addr.port());
        if let Some((first, other)) = self.ports.get(&key) {
            if addr.ip().is_unspecified() || first.ip().is_unspecified() {
                let (wide, narrow) = match addr.ip().is_unspecified() {
                    true => (addr, *first),
                    false => (*first, addr),
                };
                return Err(format!(
                    "frontend '{name}' listens on {addr}, and frontend '{other}' on {first}: \
                     {wide} takes every address of port {}, {narrow} included; give them \
                     different ports",
                    addr.port()
                ));
            }
        } else {
            self.ports.insert(key, (addr, name.to_string()));
        }
        self.at.insert(addr, name.to_string());
        Ok(())
    }
}

/// The words of `line`, owned (for a look ahead).
fn words_of(line: &str) -> Vec<String> {
    words(line).iter().map(|w| w.text.to_string()).collect()
}

/// Section names of HAProxy and nginx, and what to write instead.
fn foreign_section(word: &str) -> Option<&'static str> {
    match word {
        "listen" => Some("write 'frontend NAME' and put 'listen ADDR' inside it"),
        "backend" | "upstream" => Some(
            "backends are listed inside their frontend, one 'backend ADDR ...' line each, or \
             in a 'group NAME' section that frontends route to with 'use-group'",
        ),
        "stream" | "server" => Some("write 'frontend NAME' sections (see docs/OPERATIONS.md)"),
        _ => None,
    }
}

/// What the settings' tests parse with (here and in groups.rs): a file
/// that must read, or the errors of one that must not.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Config, parse};

    /// The config `text` reads as; panics with its errors if it does not.
    pub(crate) fn ok(text: &str) -> Config {
        match parse("lb.conf", text) {
            Ok(config) => config,
            Err(errors) => panic!("expected a config, got {errors:#?}"),
        }
    }

    /// Every error of `text`, displayed; panics if it reads.
    pub(crate) fn errors(text: &str) -> Vec<String> {
        match parse("lb.conf", text) {
            Ok(config) => panic!("expected errors, got {config:#?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{errors, ok};
    use super::*;
    use crate::conn::proxy_protocol::Version;
    use crate::conn::timeouts::NO_TIMEOUT;
    use crate::conn::timeouts::Timeouts;
    use crate::log::syslog::Destination;
    use crate::log::syslog::header::{Facility, Layout, Severity};
    use crate::log::syslog::target::Target;
    use crate::ops::access_log::format::Format;
    use crate::ops::privileges::RunAs;
    use crate::policy::balance::Algorithm;
    use crate::policy::check::Probe;
    use crate::policy::check::agent::AgentCheck;
    use crate::policy::check::http::{HttpCheck, HttpExpect, HttpMatch};
    use crate::policy::check::pgsql::PgsqlCheck;
    use crate::policy::check::script::Step;
    use crate::policy::cidr::Cidr;
    use crate::policy::health::Check;
    use crate::settings::config::{AccessLogTarget, BackendServer, Global};
    use std::time::Duration;

    /// The one error of `text`, displayed.
    fn error(text: &str) -> String {
        let all = errors(text);
        assert_eq!(all.len(), 1, "expected one error, got {all:#?}");
        all[0].clone()
    }

    /// A frontend around `lines`, which start at line 4.
    fn fe(lines: &str) -> String {
        format!("frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n{lines}")
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("a range")
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const FULL: &str = include_str!("../../examples/full.conf");

    #[test]
    fn the_full_example_parses_to_what_it_says() {
        let c = ok(FULL);
        assert_eq!(
            c.global,
            Global {
                maxconn: Some(4000),
                workers: Some(2),
                grace: Some(Duration::from_secs(30)),
                shutdown_delay: Some(Duration::from_secs(5)),
                admin: Some(addr("127.0.0.1:9100")),
                access_log: Some(AccessLogTarget::Stderr),
                log_format: Some(Format::Tcplog),
                admin_request: Some(Duration::from_secs(1)),
                admin_allow: vec![
                    Cidr::parse("127.0.0.0/8").unwrap(),
                    Cidr::parse("::1").unwrap(),
                ],
                admin_socket: None,
                admin_token_file: None,
                server_state_file: None,
                upgrade_socket: None,
                log: Some(Destination {
                    target: Target::Udp(addr("127.0.0.1:514")),
                    max_len: 1024,
                    layout: Some(Layout::Rfc5424),
                    facility: Facility::parse("local0").unwrap(),
                    level: Severity::parse("info"),
                    min_level: None,
                }),
                log_tag: Some("proxy".into()),
                log_send_hostname: Some(Some("lb1".into())),
                run_as: RunAs::default(),
                resolve_interval: None,
            }
        );
        assert_eq!(c.frontends.len(), 3);
        let web = &c.frontends[0];
        assert_eq!(web.name, "web");
        assert_eq!(web.listen, [addr("127.0.0.1:8080")]);
        assert_eq!(web.balance, Algorithm::RoundRobin);
        assert_eq!(web.maxconn, Some(3000));
        assert_eq!(
            web.timeouts,
            Timeouts {
                queue: Some(Duration::from_secs(10)),
                ..Timeouts::default()
            }
        );
        assert_eq!(web.retries, 3);
        assert_eq!(web.maxconn_per_source, Some(100));
        assert_eq!(web.rate_limit, Some(1000));
        assert_eq!(
            web.rate_limit_per_source,
            Some((50, Duration::from_secs(10)))
        );
        assert_eq!(
            web.access.deny,
            vec![cidr("10.0.0.0/8"), cidr("192.168.0.0/16")]
        );
        assert_eq!(web.access.allow, vec![cidr("0.0.0.0/0"), cidr("::/0")]);
        assert!(!web.accept_proxy);
        assert!(web.dontlognull);
        assert_eq!(
            web.backends,
            vec![
                BackendServer {
                    name: "app1".to_string(),
                    addr: addr("127.0.0.1:9001").into(),
                    weight: 5,
                    backup: false,
                    maxconn: Some(100),
                    check: Some(Check {
                        inter: Duration::from_secs(2),
                        fall: 3,
                        rise: 2,
                        timeout: Duration::from_secs(1),
                    }),
                    send_proxy: None,
                    probe: Probe::Http(HttpCheck {
                        method: "GET".into(),
                        uri: "/health".into(),
                        version: "HTTP/1.1".into(),
                        headers: Vec::new(),
                        expects: vec![HttpExpect {
                            negate: false,
                            what: HttpMatch::Status(vec![(200, 299)]),
                        }],
                    }),
                    agent: None,
                    slowstart: Some(Duration::from_secs(30)),
                    maxqueue: Some(50),
                    ..BackendServer::new(addr("127.0.0.1:9001"))
                },
                BackendServer {
                    name: "app2".to_string(),
                    addr: addr("127.0.0.1:9002").into(),
                    weight: 1,
                    backup: true,
                    maxconn: None,
                    check: None,
                    send_proxy: Some(Version::V2),
                    probe: Probe::Connect,
                    agent: Some(AgentCheck {
                        port: 9003,
                        inter: Duration::from_secs(5),
                        send: Vec::new(),
                    }),
                    ..BackendServer::new(addr("127.0.0.1:9002"))
                },
            ]
        );
        let db = &c.frontends[1];
        assert_eq!(
            (db.name.as_str(), &db.listen[..]),
            ("db", &[addr("[::1]:5433"), addr("127.0.0.1:5433")][..])
        );
        assert_eq!(db.backends[0].addr, addr("[::1]:5432").into());
        let pgsql = PgsqlCheck {
            user: "haproxy".into(),
        };
        assert_eq!(db.backends[0].probe, Probe::Pgsql(pgsql));
        assert_eq!(
            db.timeouts,
            Timeouts {
                tunnel: Some(Duration::from_secs(3600)),
                ..Timeouts::default()
            }
        );
        assert_eq!(db.timeouts.idle(), Duration::from_secs(3600));
        assert!(db.accept_proxy);
        assert_eq!(db.proxy_from, vec![cidr("10.0.0.0/8"), cidr("::1")]);
        assert_eq!(web.timeouts.queue(), Duration::from_secs(10));
        let tls = &c.frontends[2];
        assert!(tls.freebind && !c.frontends[0].freebind);
        let routes = tls.routing.as_ref().expect("rules");
        assert_eq!(routes.rules().len(), 2);
        assert_eq!(routes.not_tls, crate::policy::route::NotTls::Refuse);
        let api = tls.group(1).expect("the api group");
        assert_eq!(
            (api.name, api.balance, api.backends),
            ("api", Algorithm::LeastConn, 1..3)
        );
        assert_eq!(tls.backends[0].addr, addr("127.0.0.1:9201").into());
        let Probe::Script(script) = &tls.backends[1].probe else {
            panic!("the api group's check: {:?}", tls.backends[1].probe);
        };
        assert_eq!(script.steps[0], Step::Send(b"PING\r\n".to_vec()));
        assert_eq!(tls.backends[0].probe, Probe::Connect, "not checked");
    }

    #[test]
    fn defaults_are_haproxy_like() {
        let c = ok("frontend a\nlisten 127.0.0.1:1\nbackend 127.0.0.1:2 check\n");
        assert_eq!(c.global, Global::default());
        let f = &c.frontends[0];
        assert_eq!(f.balance, Algorithm::RoundRobin);
        assert_eq!(f.maxconn, None);
        assert_eq!(f.retries, 3);
        assert_eq!(f.timeouts.connect, Duration::from_secs(5));
        assert_eq!(f.timeouts.client, Duration::from_secs(600));
        assert_eq!(f.timeouts.server, Duration::from_secs(600));
        assert_eq!(f.timeouts.client_fin, Duration::from_secs(30));
        assert_eq!(f.timeouts.server_fin, Duration::from_secs(30));
        let b = &f.backends[0];
        assert_eq!((b.weight, b.backup, b.maxconn), (1, false, None));
        assert_eq!(b.check, Some(Check::default()));
    }

    #[test]
    fn every_option_is_read() {
        let c = ok(&fe(
            "    balance source\n    timeout connect 500ms\n    timeout client 1m\n    \
             timeout server 2m\n    timeout client-fin 3s\n    timeout server-fin 4s\n    \
             timeout tunnel 1h\n    timeout queue 2s\n    retries 0\n    backend [::1]:9 weight 0 check inter 1s fall 5 rise 7 timeout 300ms\n",
        ));
        let f = &c.frontends[0];
        assert_eq!(f.balance, Algorithm::Source);
        assert_eq!(
            f.timeouts,
            Timeouts {
                connect: Duration::from_millis(500),
                client: Duration::from_secs(60),
                server: Duration::from_secs(120),
                client_fin: Duration::from_secs(3),
                server_fin: Duration::from_secs(4),
                tunnel: Some(Duration::from_secs(3600)),
                queue: Some(Duration::from_secs(2)),
                client_hs: Duration::from_secs(5),
            }
        );
        assert_eq!(f.retries, 0);
        let b = &f.backends[1];
        assert_eq!(b.weight, 0);
        assert_eq!(
            b.check,
            Some(Check {
                inter: Duration::from_secs(1),
                fall: 5,
                rise: 7,
                timeout: Duration::from_millis(300),
            })
        );
        // The check timeout defaults to the interval.
        let c = ok(&fe("    backend 127.0.0.1:7 check inter 750ms\n"));
        assert_eq!(
            c.frontends[0].backends[1].check.unwrap().timeout,
            Duration::from_millis(750)
        );
        for (word, balance) in [
            ("leastconn", Algorithm::LeastConn),
            ("random", Algorithm::Random),
            ("roundrobin", Algorithm::RoundRobin),
        ] {
            let c = ok(&fe(&format!("balance {word}\n")));
            assert_eq!(c.frontends[0].balance, balance);
            assert_eq!(balance.name(), word);
        }
    }

    #[test]
    fn backends_are_named_or_named_by_their_address() {
        let c = ok(
            "frontend pg\n  listen 127.0.0.1:5432\n  backend db1 10.0.0.1:5432 check\n  \
                    backend 10.0.0.2:5432 backup\ngroup ro\n  backend db1 10.0.0.3:5432\n",
        );
        let f = &c.frontends[0];
        let b = &f.backends;
        assert_eq!(
            (b[0].name.as_str(), &b[0].addr),
            ("db1", &addr("10.0.0.1:5432").into())
        );
        assert!(b[0].is_named() && b[0].check.is_some());
        assert_eq!(b[0].label(), "db1 (10.0.0.1:5432)");
        assert_eq!(b[1].name, "10.0.0.2:5432");
        assert!(!b[1].is_named() && b[1].backup);
        assert_eq!(b[1].label(), "10.0.0.2:5432");
        assert_eq!(f.group_name_of(1), "pg");
        // Names are unique per section: the same name in another group is
        // another server.
        let c = ok(
            "group ro\n  backend db1 10.0.0.3:5432\nfrontend pg\n  listen 127.0.0.1:1\n  \
                    backend db1 10.0.0.1:5432\n  use-group ro sni ro.example\n",
        );
        let f = &c.frontends[0];
        assert_eq!((f.group_name_of(0), f.group_name_of(1)), ("pg", "ro"));
        assert_eq!(
            (f.backends[0].name.as_str(), f.backends[1].name.as_str()),
            ("db1", "db1")
        );
        let ipv6 = ok(&fe("  backend v6 [::1]:9\n"));
        assert_eq!(ipv6.frontends[0].backends[1].label(), "v6 ([::1]:9)");
    }

    #[test]
    fn a_frontend_listens_on_several_addresses_and_a_bare_port_is_every_ipv4_address() {
        let c = ok(
            "frontend pg\n  listen 127.0.0.1:5432 [::1]:5432\n  listen :6432\n  \
                    listen *:7432 [::]:7432\n  backend 127.0.0.1:1\n",
        );
        assert_eq!(
            c.frontends[0].listen,
            [
                addr("127.0.0.1:5432"),
                addr("[::1]:5432"),
                addr("0.0.0.0:6432"),
                addr("0.0.0.0:7432"),
                addr("[::]:7432"),
            ]
        );
        // Port 0 twice: each gets a port of its own.
        let c = ok(
            "frontend a\n listen 127.0.0.1:0\n backend 127.0.0.1:1\nfrontend b\n listen \
                    127.0.0.1:0\n backend 127.0.0.1:1\n",
        );
        assert_eq!(c.frontends.len(), 2);
    }

    #[test]
    fn user_names_a_user_and_its_group_or_the_users_own() {
        let c = ok(&format!("global\n  user root\n{}", fe("")));
        let run_as = &c.global.run_as;
        assert_eq!(run_as.user, Some(("root".to_string(), 0)));
        assert_eq!(run_as.group, Some(("root".to_string(), 0)));
        let c = ok(&format!("global\n  user 0 0\n{}", fe("")));
        assert_eq!(c.global.run_as.group, Some(("0".to_string(), 0)));
        // A uid the user database does not know needs its group.
        let c = ok(&format!("global\n  user 4000000000 4000000000\n{}", fe("")));
        assert_eq!(
            c.global.run_as.user,
            Some(("4000000000".to_string(), 4_000_000_000))
        );
        assert_eq!(
            errors(&format!("global\n  user 4000000000\n{}", fe(""))),
            [
                "lb.conf:2:8: user 4000000000: uid 4000000000 has no entry in the user database, so \
              its group is unknown; write it after the user: 'user 4000000000 GROUP'"
            ]
        );
        assert_eq!(
            errors(&format!("global\n  user no-such-user-here\n{}", fe(""))),
            [
                "lb.conf:2:8: user: no user 'no-such-user-here' in the user database (getent \
              passwd no-such-user-here); write an existing user, or a uid"
            ]
        );
        // HAProxy's 'group NAME' of its global section, said once; a group
        // section after 'global' is still one.
        assert_eq!(
            errors(&format!(
                "global\n  user root\n  group root\n  maxconn 10\n{}",
                fe("")
            )),
            [
                "lb.conf:3:3: HAProxy's 'group root' of its global section is written after the \
              user here: 'user USER root' ('group NAME' starts a section of backends)"
            ]
        );
        let c = ok(&format!(
            "global\n  user root\ngroup api\n  backend 127.0.0.1:7\n{}",
            fe("  use-group api sni a.example\n")
        ));
        assert_eq!(c.frontends[0].groups[0].name, "api");
    }

    #[test]
    fn the_options_tcp_configurations_use_are_read() {
        let c = ok(
            "frontend r\n  listen 127.0.0.1:1\n  balance first\n  rate-limit sessions 500\n  \
                    rate-limit-per-source 20 10s\n  backend r1 127.0.0.1:2 maxconn 10 maxqueue 5 \
                    check slowstart 30s on-marked-down shutdown-sessions on-marked-up \
                    shutdown-backup-sessions\n  backend r2 127.0.0.1:3 backup\n",
        );
        let f = &c.frontends[0];
        assert_eq!(f.balance, Algorithm::First);
        assert_eq!(f.rate_limit, Some(500));
        assert_eq!(f.rate_limit_per_source, Some((20, Duration::from_secs(10))));
        let r1 = &f.backends[0];
        assert_eq!((r1.maxconn, r1.maxqueue), (Some(10), Some(5)));
        assert_eq!(r1.slowstart, Some(Duration::from_secs(30)));
        assert!(r1.shutdown_on_down && r1.shutdown_backups_on_up);
        assert_eq!(
            r1.check,
            Some(Check::default()),
            "slowstart is not a check parameter"
        );
        let r2 = &f.backends[1];
        assert!(!r2.shutdown_on_down && r2.slowstart.is_none() && r2.maxqueue.is_none());
    }

    #[test]
    fn a_zero_timeout_is_no_timeout_as_haproxy_reads_it() {
        let c = ok(&fe(
            "  timeout client 0\n  timeout server 0s\n  timeout tunnel 0\n  \
                        timeout queue 0ms\n",
        ));
        let t = &c.frontends[0].timeouts;
        assert_eq!((t.client, t.server), (NO_TIMEOUT, NO_TIMEOUT));
        assert_eq!((t.tunnel, t.queue), (Some(NO_TIMEOUT), Some(NO_TIMEOUT)));
        assert_eq!(t.idle(), NO_TIMEOUT);
        let c = ok(&format!("global\n  timeout admin-request 0\n{}", fe("")));
        assert_eq!(c.global.admin_request, Some(NO_TIMEOUT));
    }

    // The configuration an HAProxy operator brings (a typical PostgreSQL and Redis one, less its
    // syslog line), pasted as it is: one message for each line of
    // HAProxy's, each pointing to what to write, and nothing after (no
    // "has no listen", no "unknown group", no line of a skipped section).
    #[test]
    fn an_haproxy_file_pasted_as_it_is_gets_one_message_per_foreign_line() {
        let text = "\
global
  maxconn 50000
defaults
  mode tcp
  timeout connect 5s
  option tcplog
frontend pg
  bind :5432
  default_backend pg_primary
backend pg_primary
  option pgsql-check user haproxy
  server db1 10.0.0.1:5432 check inter 2s fall 3 rise 2
  server db2 10.0.0.2:5432 check backup
frontend redis
  bind :6379
  default_backend redis
backend redis
  balance first
  server r1 10.0.0.11:6379 check maxconn 1000
";
        let bind = "HAProxy's 'bind': write 'listen ADDR' (a line for each bind, or several \
                    addresses on one line); bind's accept-proxy is the frontend's 'accept-proxy' \
                    line";
        let section = |line: usize, name: &str| {
            format!(
                "lb.conf:{line}:1: 'backend {name}' without an address: HAProxy's 'backend NAME' \
                 section is 'group {name}' here, chosen with 'default-group {name}' or \
                 'use-group {name} ...', and each of its 'server NAME ADDR' lines is 'backend \
                 NAME ADDR'; a backend line is 'backend [NAME] ADDR ...'. The lines up to the \
                 next section are skipped"
            )
        };
        assert_eq!(
            errors(text),
            [
                "lb.conf:3:1: HAProxy's 'defaults' section: there are no defaults sections: set \
                 each option in the frontend that needs it ('balance' also in a group); its lines \
                 are skipped"
                    .to_string(),
                format!("lb.conf:8:3: {bind}"),
                "lb.conf:9:3: HAProxy's 'default_backend': write 'default-group NAME'".to_string(),
                section(10, "pg_primary"),
                format!("lb.conf:15:3: {bind}"),
                "lb.conf:16:3: HAProxy's 'default_backend': write 'default-group NAME'".to_string(),
                section(17, "redis"),
            ]
        );
    }

    #[test]
    fn comments_blank_lines_tabs_and_crlf() {
        let c = ok(
            "# top\r\n\r\n\tfrontend a # named a\r\n\t\tlisten 127.0.0.1:1#no space\r\n\
                    backend 127.0.0.1:2   \r\n",
        );
        assert_eq!(c.frontends[0].listen, [addr("127.0.0.1:1")]);
    }

    #[test]
    fn each_mistake_says_where_what_and_what_to_do() {
        let cases: &[(&str, &str)] = &[
            (
                "frontnd web\n",
                "lb.conf:1:1: unknown section 'frontnd' (did you mean 'frontend'?); a file has \
                 'global', 'frontend NAME' and 'group NAME' sections",
            ),
            (
                "defaults\n",
                "lb.conf:1:1: HAProxy's 'defaults' section: there are no defaults sections: set \
                 each option in the frontend that needs it ('balance' also in a group); its lines \
                 are skipped",
            ),
            (
                "listen 127.0.0.1:1\n",
                "lb.conf:1:1: unknown section 'listen': write 'frontend NAME' and put \
                 'listen ADDR' inside it",
            ),
            (
                "maxconn 10\n",
                "lb.conf:1:1: 'maxconn' outside any section; start one with 'global', \
                 'frontend NAME' or 'group NAME' above it",
            ),
            (
                &fe("    backend 127.0.0.1:9002 wieght 5\n"),
                "lb.conf:4:28: unknown option 'wieght' (did you mean 'weight'?)",
            ),
            (
                &fe("  balanse leastconn\n"),
                "lb.conf:4:3: unknown option 'balanse' (did you mean 'balance'?)",
            ),
            (
                &fe("  deny 10.0.0.1/8\n"),
                "lb.conf:4:8: deny: '10.0.0.1/8' has host bits set; did you mean 10.0.0.0/8?",
            ),
            (
                &fe("  allow\n"),
                "lb.conf:4:3: 'allow' needs address ranges, like 'allow 10.0.0.0/8 \
                 2001:db8::/32'",
            ),
            (
                "global\n  admin-allow\n",
                "lb.conf:2:3: 'admin-allow' needs address ranges, like 'admin-allow 10.0.0.0/8 \
                 2001:db8::/32'",
            ),
            (
                "global\n  log-format xml\n",
                "lb.conf:2:14: log-format: unknown log format 'xml'; use tcplog, json, or a format \
                 of your own in quotes, like \"%ci:%cp %ft %b/%s %Tt %B %ts\"",
            ),
            (
                "global\n  timeout connect 5s\n",
                "lb.conf:2:11: 'timeout connect' is set per frontend, not in 'global'",
            ),
            (
                "global\n  timeout admin-reqest 1s\n",
                "lb.conf:2:11: unknown timeout 'admin-reqest' (did you mean 'admin-request'?) in \
                 'global'; use admin-request",
            ),
            (
                "global\n  grace 0s\n",
                "lb.conf:2:9: grace: 0s would end everything at once; use at least 1ms",
            ),
            (
                "global\n  grace 0\n",
                "lb.conf:2:9: grace: 0 would end everything at once; use at least 1ms",
            ),
            (
                "global\n  timeout\n",
                "lb.conf:2:3: 'timeout' needs a kind and a duration, like 'timeout admin-request \
                 5s'",
            ),
            (
                &fe("  timeout admin-request 1s\n"),
                "lb.conf:4:11: 'timeout admin-request' is set in the 'global' section, not in a \
                 frontend",
            ),
            (
                &fe("  accept-proxy v2\n"),
                "lb.conf:4:16: accept-proxy: 'v2' is not an IP address; write an address \
                 (10.0.0.1, 2001:db8::1) or a range (10.0.0.0/8, 2001:db8::/32)",
            ),
            (
                &fe("  splice yes\n"),
                "lb.conf:4:10: splice: unknown choice 'yes'; use auto, on or off",
            ),
            (
                &fe("  splice of\n"),
                "lb.conf:4:10: splice: unknown choice 'of' (did you mean 'on'?); use auto, on \
                 or off",
            ),
            (
                &fe("  maxconn-per-source 0\n"),
                "lb.conf:4:22: maxconn-per-source: 0 is out of range; use 1 to 10000000; leave \
                 it out for no limit",
            ),
            (
                &fe("  bind 127.0.0.1:1\n"),
                "lb.conf:4:3: HAProxy's 'bind': write 'listen ADDR' (a line for each bind, or \
                 several addresses on one line); bind's accept-proxy is the frontend's \
                 'accept-proxy' line",
            ),
            (
                &fe("  weight 5\n"),
                "lb.conf:4:3: unknown option 'weight'; 'weight' goes on a backend line, like \
                 'backend ADDR weight ...'",
            ),
            (
                &fe("  workers 4\n"),
                "lb.conf:4:3: 'workers' belongs in the 'global' section, not in a frontend",
            ),
            (
                "global\n  listen 127.0.0.1:1\n",
                "lb.conf:2:3: 'listen' belongs in a frontend section, not in 'global'",
            ),
            (
                "global\n  maxconns 10\n",
                "lb.conf:2:3: unknown option 'maxconns' (did you mean 'maxconn'?) in 'global', \
                 which takes maxconn, workers, grace, shutdown-delay, admin, access-log, \
                 log-format, log, log-tag, log-send-hostname, timeout, admin-socket, \
                 admin-token-file, admin-allow, server-state-file, upgrade-socket, user and \
                 resolve-interval",
            ),
            (
                &fe("  backend db::1:80\n"),
                "lb.conf:4:11: backend: 'db::1:80' is not an address with a port, like \
                 127.0.0.1:8080, [::1]:8080 or db.example:8080 (an IPv6 address goes in \
                 brackets, with its port after)",
            ),
            (
                &fe("  timeout connect 5x\n"),
                "lb.conf:4:19: timeout connect: '5x': unknown unit 'x'; use us, ms, s, m, h or d",
            ),
            (
                &fe("  timeout client 30\n"),
                "lb.conf:4:18: timeout client: '30' has no unit: write 30s or 30ms",
            ),
            (
                &fe("  backend 127.0.0.1:2 check inter 0\n"),
                "lb.conf:4:35: check inter: 0 would end everything at once; use at least 1ms",
            ),
            (
                &fe("  timeout conect 5s\n"),
                "lb.conf:4:11: unknown timeout 'conect' (did you mean 'connect'?); use connect, \
                 client, server, client-fin, server-fin, tunnel, queue or client-hs",
            ),
            (
                &fe("  timeout check 5s\n"),
                "lb.conf:4:11: 'timeout check' is set per backend: write 'check timeout DUR' on \
                 the backend line",
            ),
            (
                &fe("  maxconn\n"),
                "lb.conf:4:3: 'maxconn' needs a number of connections",
            ),
            (
                &fe("  timeout connect\n"),
                "lb.conf:4:11: 'connect' needs a duration, like 5s",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight\n"),
                "lb.conf:4:23: 'weight' needs a value",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight 300\n"),
                "lb.conf:4:30: weight: 300 is out of range; use 0 to 256 (0 drains the backend)",
            ),
            (
                &fe("  backend 127.0.0.1:2 weight -1\n"),
                "lb.conf:4:30: weight: '-1' is not a whole number",
            ),
            (
                &fe("  backend 127.0.0.1:2 maxconn 0\n"),
                "lb.conf:4:31: maxconn: 0 is out of range; use 1 to 10000000; leave it out for \
                 no limit",
            ),
            (
                &fe("  balance fastest\n"),
                "lb.conf:4:11: unknown balance algorithm 'fastest'; use roundrobin, leastconn, \
                 random, source or first",
            ),
            (
                &fe("  balance leastcon\n"),
                "lb.conf:4:11: unknown balance algorithm 'leastcon' (did you mean 'leastconn'?); \
                 use roundrobin, leastconn, random, source or first",
            ),
            (
                &fe("  listen 127.0.0.1:8080\n"),
                "lb.conf:4:10: listen 127.0.0.1:8080 is already in this frontend (line 2); keep one",
            ),
            (
                &fe("  listen :80 127.0.0.1:80\n"),
                "lb.conf:4:14: frontend 'web' listens on 127.0.0.1:80, and frontend 'web' on \
                 0.0.0.0:80: 0.0.0.0:80 takes every address of port 80, 127.0.0.1:80 included; \
                 give them different ports",
            ),
            (
                &fe("frontend api\n  listen :8080\n  backend 127.0.0.1:3\n"),
                "lb.conf:5:10: frontend 'api' listens on 0.0.0.0:8080, and frontend 'web' on \
                 127.0.0.1:8080: 0.0.0.0:8080 takes every address of port 8080, 127.0.0.1:8080 \
                 included; give them different ports",
            ),
            (
                &fe("  listen :99999\n"),
                "lb.conf:4:10: listen: ':99999': 99999 is not a port (0 to 65535)",
            ),
            (
                &fe("  backend 127.0.0.1:9001 weight 2\n"),
                "lb.conf:4:11: backend 127.0.0.1:9001 is already in this section (line 3); \
                 list it once and use 'weight' to send it more",
            ),
            (
                &fe("  listen\n"),
                "lb.conf:4:3: 'listen' needs an address like 127.0.0.1:8080, or :8080 for every \
                 IPv4 address",
            ),
            (
                "frontend web\n  listen 127.0.0.1:1 freebnd\n  backend 127.0.0.1:2\n",
                "lb.conf:2:22: unknown listen parameter 'freebnd' (did you mean 'freebind'?); \
                 'listen ADDR' takes 'freebind' (bind an address that is on no interface yet)",
            ),
            (
                "frontend web\n  listen 127.0.0.1:1 freebind freebind\n  backend 127.0.0.1:2\n",
                "lb.conf:2:31: 'freebind' is given twice on this line; keep one",
            ),
            (
                &fe("  retries 3 4\n"),
                "lb.conf:4:13: unexpected '4' after 'retries 3'; put one option per line",
            ),
            (
                &fe("frontend web\n  listen 127.0.0.1:2\n  backend 127.0.0.1:3\n"),
                "lb.conf:4:10: duplicate frontend 'web' (the first is at line 1); give each \
                 frontend its own name",
            ),
            (
                &fe("frontend web2\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:3\n"),
                "lb.conf:5:10: frontend 'web2' listens on 127.0.0.1:8080, as frontend 'web' \
                 does; give each frontend its own address",
            ),
            (
                "frontend empty\n  listen 127.0.0.1:1\n",
                "lb.conf:1:1: frontend 'empty' has no backend; add a line like \
                 'backend 127.0.0.1:9001', or 'default-group NAME'",
            ),
            (
                "frontend deaf\n  backend 127.0.0.1:1\n",
                "lb.conf:1:1: frontend 'deaf' has no 'listen'; add a line like \
                 'listen 127.0.0.1:8080'",
            ),
            (
                "frontend\n",
                "lb.conf:1:1: 'frontend' needs a name, like 'frontend web'",
            ),
            (
                "# nothing\n",
                "lb.conf: no frontend; add a 'frontend NAME' section with a 'listen' and a \
                 'backend' (see docs/OPERATIONS.md)",
            ),
            (
                "global\nglobal\n",
                "lb.conf:2:1: a second 'global' section (the first is at line 1); merge them \
                 into one",
            ),
            // Names: before the address, once per section.
            (
                &fe("  backend db1 10.0.0.1:1\n  backend db1 10.0.0.2:1\n"),
                "lb.conf:5:11: backend name 'db1' is already used in this section (line 4); give \
                 each backend its own name",
            ),
            (
                &fe("  backend 10.0.0.1:1 db1 check\n"),
                "lb.conf:4:22: unknown option 'db1'; a backend's name comes before its address: \
                 'backend db1 ADDR ...'",
            ),
            (
                &fe("  backend db1 localhost:http\n"),
                "lb.conf:4:15: backend: 'localhost:http' is not an address with a port, like \
                 127.0.0.1:8080, [::1]:8080 or db.example:8080: bad port 'http' (1 to 65535)",
            ),
            (
                &fe("  backend db1 db.example:5432 init-addr maybe\n"),
                "lb.conf:4:41: init-addr: unknown method 'maybe'; use libc (the default: the \
                 start fails), none (start out of rotation until the name resolves), an IP \
                 address to start with, or HAProxy's list like 'last,libc,none'",
            ),
            (
                &fe("  backend db1 10.0.0.1:5432 init-addr none\n"),
                "lb.conf:4:29: 'init-addr' is for a backend written with a host name, and \
                 10.0.0.1:5432 is an IP address: remove it",
            ),
            (
                &fe("  backend db.example:5432 resolve-prefer ipv5\n"),
                "lb.conf:4:42: resolve-prefer: 'ipv5' (did you mean 'ipv4'?); use ipv4 or ipv6",
            ),
            (
                &fe("  backend db.example:1\n  backend db.example:1\n"),
                "lb.conf:5:11: backend db.example:1 is already in this section (line 4); list it \
                 once and use 'weight' to send it more",
            ),
            (
                "global\n  resolve-interval 0s\n",
                "lb.conf:2:20: resolve-interval: 0 would look names up without a pause; write \
                 'off' to look them up at start and at a reload only, or a duration like 10s",
            ),
            (
                "global\n  resolve-interval soon\n",
                "lb.conf:2:20: resolve-interval: 'soon' is not a duration like 500ms, 2s, 1m or 1h; or off",
            ),
            (
                &fe("  backend db/1 10.0.0.1:1\n"),
                "lb.conf:4:11: backend name 'db/1': use only letters, digits, '-', '_' and '.'",
            ),
            (
                &fe("  backend\n"),
                "lb.conf:4:3: 'backend' needs an address like 127.0.0.1:9001 or \
                 db.example:9001, or a name and an address: 'backend db1 127.0.0.1:9001'",
            ),
            // The options TCP configurations use, and what they need.
            (
                &fe("  backend 127.0.0.1:2 slowstart 30s\n"),
                "lb.conf:4:23: 'slowstart' ramps up after the backend comes back up, which only a \
                 checked backend does: add 'check'",
            ),
            (
                &fe("  backend 127.0.0.1:2 on-marked-down shutdown-sessions\n"),
                "lb.conf:4:23: 'on-marked-down' acts when the backend is marked down, which only \
                 a checked backend does: add 'check'",
            ),
            (
                &fe("  backend 127.0.0.1:2 check on-marked-down shutdown\n"),
                "lb.conf:4:44: on-marked-down: unknown action 'shutdown'; the one action is \
                 shutdown-sessions",
            ),
            (
                &fe("  backend 127.0.0.1:2 backup check on-marked-up shutdown-backup-sessions\n"),
                "lb.conf:4:36: 'on-marked-up shutdown-backup-sessions' on a backup: it is a normal \
                 backend's coming up that cuts its group's backups; move it to the normal backends",
            ),
            (
                &fe("  backend 127.0.0.1:2 maxqueue 10\n"),
                "lb.conf:4:23: 'maxqueue' bounds the clients waiting for a place under 'maxconn': \
                 add 'maxconn N'",
            ),
            (
                &fe("  backend 127.0.0.1:2 maxconn 1 maxqueue 0\n"),
                "lb.conf:4:42: maxqueue: 0 is out of range; use 1 to 10000000; leave it out for no \
                 limit (HAProxy's maxqueue 0)",
            ),
            (
                &fe("  rate-limit connections 10\n"),
                "lb.conf:4:14: rate-limit: unknown kind 'connections'; write 'rate-limit sessions \
                 N' (new connections a second; per client address: 'rate-limit-per-source N \
                 PERIOD')",
            ),
            (
                &fe("  rate-limit sessions 0\n"),
                "lb.conf:4:23: rate-limit sessions: 0 is out of range; use 1 to 10000000",
            ),
            (
                &fe("  rate-limit-per-source 20\n"),
                "lb.conf:4:3: 'rate-limit-per-source 20' needs a period after the count, like \
                 'rate-limit-per-source 20 10s'",
            ),
            (
                &fe("  rate-limit-per-source 20 10\n"),
                "lb.conf:4:28: rate-limit-per-source: '10' has no unit: write 10s or 10ms",
            ),
            // check parameters: after 'check', known, in range, once.
            (
                &fe("  backend 127.0.0.1:2 inter 2s check\n"),
                "lb.conf:4:23: 'inter' is a health-check parameter: write it after 'check', \
                 like 'check inter ...'",
            ),
            (
                &fe("  backend 127.0.0.1:2 check intre 2s\n"),
                "lb.conf:4:29: unknown option 'intre' (did you mean 'inter'?)",
            ),
            (
                &fe("  backend 127.0.0.1:2 check inter 2s fall 0\n"),
                "lb.conf:4:43: check fall: 0 is out of range; use 1 to 100",
            ),
            (
                &fe("  backend 127.0.0.1:2 check inter 2s inter 3s\n"),
                "lb.conf:4:38: 'check inter' is given twice on this line; keep one",
            ),
            (
                &fe("  backend 127.0.0.1:2 check rise\n"),
                "lb.conf:4:29: 'rise' needs a value",
            ),
            (
                &fe("  backend 127.0.0.1:2 send-proxy send-proxy-v2\n"),
                "lb.conf:4:34: 'send-proxy' and 'send-proxy-v2' exclude each other; keep one",
            ),
            (
                &fe("  backend 127.0.0.1:2 send-proxy-v2 send-proxy-v2\n"),
                "lb.conf:4:37: 'send-proxy-v2' is given twice on this line; keep one",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&error(text), expected, "for:\n{text}");
        }
    }

    #[test]
    fn all_errors_of_a_file_are_reported_in_order() {
        let text = "\
global
    maxconn lots
frontend web
    listen 127.0.0.1:8080
    balance fastest
    backend 127.0.0.1:9001 wieght 5
    timeout client 10x
frontend web
frontend api
    listen 127.0.0.1:8080
    backend localhost:99999
";
        let all = errors(text);
        assert_eq!(
            all,
            vec![
                "lb.conf:2:13: maxconn: 'lots' is not a whole number",
                "lb.conf:5:13: unknown balance algorithm 'fastest'; use roundrobin, leastconn, \
                 random, source or first",
                "lb.conf:6:28: unknown option 'wieght' (did you mean 'weight'?)",
                "lb.conf:7:20: timeout client: '10x': unknown unit 'x'; use us, ms, s, m, h or d",
                "lb.conf:8:10: duplicate frontend 'web' (the first is at line 3); give each \
                 frontend its own name",
                "lb.conf:10:12: frontend 'api' listens on 127.0.0.1:8080, as frontend 'web' \
                 does; give each frontend its own address",
                "lb.conf:11:13: backend: 'localhost:99999' is not an address with a port, like \
                 127.0.0.1:8080, [::1]:8080 or db.example:8080: bad port '99999' (1 to 65535)",
            ]
        );
    }

    /// A tiny xorshift: the same "random" inputs on every run.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn check_shape(text: &str) {
        if let Err(errors) = parse("fuzz.conf", text) {
            assert!(!errors.is_empty());
            let lines = text.lines().count();
            for e in &errors {
                assert!(e.line <= lines.max(1), "{e} beyond the last line");
                assert!(!e.message.is_empty());
            }
        }
    }

    #[test]
    fn random_bytes_and_token_soups_never_panic() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            check_shape(&String::from_utf8_lossy(&bytes));
        }
        let vocabulary = [
            "global",
            "frontend",
            "web",
            "listen",
            "balance",
            "maxconn",
            "workers",
            "timeout",
            "connect",
            "client",
            "server",
            "client-fin",
            "server-fin",
            "tunnel",
            "queue",
            "check",
            "retries",
            "backend",
            "weight",
            "backup",
            "inter",
            "fall",
            "rise",
            "roundrobin",
            "source",
            "option",
            "redis-check",
            "pgsql-check",
            "httpchk",
            "tcp-check",
            "http-check",
            "expect",
            "send",
            "string",
            "rstring",
            "status",
            "user",
            "agent-check",
            "agent-port",
            "(a|b",
            "\\x4",
            "PING\\r\\n",
            "127.0.0.1:8080",
            "[::1]:1",
            "[::1",
            "0",
            "1",
            "256",
            "257",
            "4294967296",
            "2s",
            "500ms",
            "1m",
            "0s",
            "99999999999h",
            "x",
            "#",
            "é",
            "\t",
            "\n",
            "\n",
            "\n",
            "\r\n",
            "",
            " ",
        ];
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..rng.below(60) {
                text.push_str(vocabulary[rng.below(vocabulary.len())]);
                text.push(if rng.below(4) == 0 { '\n' } else { ' ' });
            }
            check_shape(&text);
        }
    }

    #[test]
    fn every_example_config_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "conf") {
                if let Err(errors) = load(&path) {
                    panic!("{}: {errors:#?}", path.display());
                }
                seen += 1;
            }
        }
        assert!(seen >= 2, "expected example configs in {}", dir.display());
    }

    #[test]
    fn the_documented_examples_are_the_example_files() {
        // docs/OPERATIONS.md shows examples/full.conf and the translation of
        // an HAProxy file, examples/haproxy.conf; they must not drift apart.
        let doc = include_str!("../../../docs/OPERATIONS.md");
        let files = [
            ("full.conf", FULL),
            ("haproxy.conf", include_str!("../../examples/haproxy.conf")),
        ];
        for (name, text) in files {
            let body: String = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(doc.contains(body.trim()), "docs/OPERATIONS.md lacks {name}");
        }
    }

    fn temp_file(tag: &str, contents: &[u8]) -> std::path::PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "proxy-config-{tag}-{}-{nanos}.conf",
            std::process::id()
        ));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn check_config_exits_0_for_a_good_file_and_2_for_a_bad_one() {
        let run = |path: &Path| crate::settings::check::check_config(path);
        // FULL's global maxconn 4000 needs some 8,100 descriptors; a machine
        // whose hard limit is lower would make --check-config say so
        // (check.rs), so the good file asks for little.
        let good = FULL.replace("maxconn 4000 ", "maxconn 100 ");
        assert_ne!(good, FULL, "the global maxconn line was found");
        let good = temp_file("good", good.as_bytes());
        let bad = temp_file("bad", fe("  balance fastest\n").as_bytes());
        let binary = temp_file("binary", b"frontend a\n\xff\xfe\n");
        let (good_status, bad_status, binary_status) = (run(&good), run(&bad), run(&binary));
        let binary_errors = load(&binary).unwrap_err();
        for path in [&good, &bad, &binary] {
            std::fs::remove_file(path).unwrap();
        }
        assert_eq!((good_status, bad_status, binary_status), (0, 2, 2));
        assert_eq!((binary_errors[0].line, binary_errors[0].column), (2, 1));
        assert_eq!(run(Path::new("/nonexistent/lb.conf")), 2);
        let missing = load(Path::new("/nonexistent/lb.conf")).unwrap_err();
        assert!(
            missing[0]
                .to_string()
                .starts_with("/nonexistent/lb.conf: cannot read the file")
        );
    }

    /// A directory of the test's own under the temporary directory,
    /// removed on drop.
    struct PrivateDir(std::path::PathBuf);

    impl PrivateDir {
        fn new(tag: &str) -> PrivateDir {
            let path = std::env::temp_dir().join(format!("proxy-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir(&path).expect("a directory of the test's own");
            PrivateDir(path)
        }
    }

    impl Drop for PrivateDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Backend lines of the big frontend, and small frontends after it
    /// (four lines each), in [`big_config`].
    const BIG_BACKENDS: usize = 159_996;
    const SMALL_FRONTENDS: usize = 10_000;

    /// A file of 200,000 lines: a `global`, one frontend with
    /// [`BIG_BACKENDS`] backends (from line 5), then [`SMALL_FRONTENDS`]
    /// frontends with a listen and a backend each.
    fn big_config() -> Vec<String> {
        let mut lines = vec![
            "global".to_string(),
            "    admin 127.0.0.1:9100".to_string(),
            "frontend big".to_string(),
            "    listen 127.0.0.1:8080".to_string(),
        ];
        lines.extend((0..BIG_BACKENDS).map(|i| {
            let (a, b, c) = (i >> 16, (i >> 8) & 255, i & 255);
            format!("    backend 10.{a}.{b}.{c}:9001 weight 2")
        }));
        for i in 0..SMALL_FRONTENDS {
            lines.push(format!("frontend f{i}"));
            lines.push(format!("    listen 127.1.{}.{}:8080", i >> 8, i & 255));
            lines.push("    backend 127.0.0.1:9001".to_string());
            lines.push(String::new());
        }
        assert_eq!(lines.len(), 200_000);
        lines
    }

    /// The 1-based line where small frontend `i`'s header is.
    fn small_frontend_line(i: usize) -> usize {
        4 + BIG_BACKENDS + 4 * i + 1
    }

    #[test]
    fn a_file_of_200000_lines_is_checked() {
        let dir = PrivateDir::new("big-config");
        let path = dir.0.join("big.conf");
        std::fs::write(&path, big_config().join("\n")).expect("write the file");
        // `load` is every check of the file itself, the duplicate searches
        // included. (`--check-config` adds the descriptor budget, which
        // 10,000 frontends' listeners exceed on most machines: check.rs.)
        let config = load(&path).expect("a good file");
        assert_eq!(config.frontends.len(), 1 + SMALL_FRONTENDS);
        assert_eq!(config.frontends[0].backends.len(), BIG_BACKENDS);
    }

    #[test]
    fn repeats_far_apart_in_a_file_of_200000_lines_name_both_lines() {
        let mut lines = big_config();
        // The big frontend's last backend repeats its first (line 5); the
        // last small frontend takes the first one's name; the one before it
        // listens where the second one does.
        let first_backend = lines[4].clone();
        lines[4 + BIG_BACKENDS - 1] = first_backend;
        let last = SMALL_FRONTENDS - 1;
        lines[small_frontend_line(last) - 1] = "frontend f0".to_string();
        lines[small_frontend_line(last - 1)] = "    listen 127.1.0.1:8080".to_string();
        let errors = match parse("big.conf", &lines.join("\n")) {
            Ok(_) => panic!("the repeated names and addresses were not found"),
            Err(errors) => errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        };
        let expected = [
            format!(
                "big.conf:{}:13: backend 10.0.0.0:9001 is already in this section (line 5); \
                 list it once and use 'weight' to send it more",
                4 + BIG_BACKENDS
            ),
            format!(
                "big.conf:{}:12: frontend 'f{}' listens on 127.1.0.1:8080, as frontend 'f1' \
                 does; give each frontend its own address",
                small_frontend_line(last - 1) + 1,
                last - 1
            ),
            format!(
                "big.conf:{}:10: duplicate frontend 'f0' (the first is at line {}); give each \
                 frontend its own name",
                small_frontend_line(last),
                small_frontend_line(0)
            ),
        ];
        assert_eq!(errors, expected);
    }

    #[test]
    fn backends_written_with_a_host_name_are_read_with_where_they_are() {
        use crate::policy::address::Family;
        use crate::settings::config::{Address, InitAddr};
        let c = ok(
            "global\n  resolve-interval 2s\ngroup ro\n  backend ro1 ro.db.test:5432\n\
                    frontend pg\n  listen 127.0.0.1:5432\n  backend db1 db.test:5432 init-addr \
                    last,libc,none resolve-prefer ipv6\n  backend db.test:5433 init-addr 10.0.0.9\n  \
                    backend 10.0.0.2:5432\n  use-group ro sni ro.example\n",
        );
        assert_eq!(c.global.resolve_every(), Some(Duration::from_secs(2)));
        let b = &c.frontends[0].backends;
        let host = |name: &str, port| Address::Host {
            name: name.to_string(),
            port,
        };
        assert_eq!(
            (b[0].name.as_str(), &b[0].addr),
            ("db1", &host("db.test", 5432))
        );
        assert_eq!(
            (b[0].init_addr, b[0].resolve_prefer),
            (InitAddr::Down, Some(Family::V6))
        );
        assert_eq!(b[0].label(), "db1 (db.test:5432)");
        assert_eq!(
            (b[1].name.as_str(), b[1].label()),
            ("db.test:5433", "db.test:5433".into())
        );
        assert_eq!(b[1].init_addr, InitAddr::At("10.0.0.9".parse().unwrap()));
        assert_eq!(
            (b[2].init_addr, b[3].addr.host()),
            (InitAddr::Fail, Some("ro.db.test"))
        );
        // Every line with a name, once (a group's too), where its address is.
        let at: Vec<(usize, usize, &str)> = c
            .hosts
            .iter()
            .map(|h| (h.line, h.column, h.name.as_str()))
            .collect();
        assert_eq!(
            at,
            [(4, 15, "ro1"), (7, 15, "db1"), (8, 11, "db.test:5433")]
        );
        let defaults = ok(&fe(""));
        assert_eq!(
            defaults.global.resolve_every(),
            Some(Duration::from_secs(10))
        );
        let off =
            ok("global\n  resolve-interval off\nfrontend f\n  listen 127.0.0.1:1\n  backend b:1\n");
        assert_eq!(off.global.resolve_every(), None);
    }

    #[test]
    fn listen_freebind_is_read_and_off_by_default() {
        let text = "frontend vip\n  listen 198.51.100.1:80 freebind\n  backend 127.0.0.1:2\n\
                    frontend web\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:3\n";
        let c = ok(text);
        assert_eq!(c.frontends[0].listen, [addr("198.51.100.1:80")]);
        assert!(c.frontends[0].freebind);
        assert!(!c.frontends[1].freebind);
    }
}
