//! The options of each section, one table each: every option's name, what
//! its value looks like, and what to do with it (the grammar, with every
//! default and its HAProxy / nginx equivalent, is in docs/OPERATIONS.md).
//!
//! ```text
//!   global      GLOBAL        maxconn workers grace shutdown-delay admin access-log log-format
//!                             log log-tag log-send-hostname timeout upgrade-socket user
//!                             resolve-interval
//!     timeout   GLOBAL_TIMEOUTS  admin-request
//!   frontend    FRONTEND      listen balance maxconn timeout retries backend allow deny splice ...
//!                             use-group default-group not-tls dontlognull option tcp-check http-check
//!     timeout   TIMEOUTS      connect client server client-fin server-fin tunnel queue client-hs
//!     backend   PARAMS        weight backup maxconn check send-proxy send-proxy-v2
//!                             agent-check agent-port agent-inter agent-send slowstart
//!                             maxqueue on-marked-down on-marked-up init-addr resolve-prefer
//!       check   CHECK_PARAMS  inter fall rise timeout
//!   group       GROUP         balance backend (the same PARAMS) option tcp-check http-check
//!
//!   option, tcp-check, http-check: the section's health check (probes.rs)
//! ```
//!
//! Mistakes that are not about one option (an option in the wrong section,
//! HAProxy's or nginx's words for ours) are answered here too, from the
//! tables, so the lists in the messages cannot drift from what is read.

use std::collections::hash_map::Entry;
use std::net::SocketAddr;
use std::time::Duration;

use crate::conn::proxy_protocol::Version;
use crate::conn::splice::Splice;
use crate::conn::timeouts::Timeouts;
use crate::ops::privileges::{find_group, find_user, group_name};
use crate::policy::acl::AccessList;
use crate::policy::address::Family;
use crate::policy::balance::Algorithm;
use crate::policy::check::agent::AgentCheck;
use crate::policy::cidr::Cidr;
use crate::policy::health::Check;
use crate::policy::route::{NotTls, Pattern};

use super::config::{
    AccessLogTarget, Address, BackendServer, DEFAULT_RETRIES, Global, HostLine, InitAddr,
    MAX_WEIGHT,
};
use super::drafts::{FrontendDraft, GlobalDraft, GroupDraft, PoolDraft, RuleDraft};
use super::haproxy;
use super::logging;
use super::probes;
use super::reader::{Opt, Reader, Seen, Setter};
use super::words::{Word, did_you_mean, is_server_name, list, not_one_of, parse_duration, suggest};

/// The section headers.
pub const SECTIONS: &[&str] = &["global", "frontend", "group"];

impl GlobalDraft {
    /// What only the whole section says: who to run as (the group given,
    /// else the user's primary group). A uid the user database does not know needs
    /// its `group` written out.
    pub fn finish(&mut self, r: &mut Reader<'_>) {
        let group = self.group.clone();
        let user = self.user.take();
        let run_as = &mut self.global.run_as;
        run_as.group = group.map(|(gid, word)| (word, gid));
        let Some((found, word, line, column)) = user else {
            return;
        };
        if run_as.group.is_none() {
            match found.gid {
                Some(gid) => run_as.group = Some((group_name(gid), gid)),
                None => {
                    r.line = line;
                    let message = format!(
                        "user {word}: uid {} has no entry in the user database, so its group is \
                         unknown; write it after the user: 'user {word} GROUP'",
                        found.uid
                    );
                    r.error(column, message);
                }
            }
        }
        run_as.user = Some((word, found.uid));
    }
}

impl FrontendDraft {
    /// A frontend named `name` whose header is at `line`, `column`.
    pub fn new(name: &str, line: usize, column: usize) -> FrontendDraft {
        FrontendDraft {
            name: name.to_string(),
            line,
            column,
            listen: Vec::new(),
            freebind: false,
            pool: PoolDraft::default(),
            maxconn: None,
            timeouts: Timeouts::default(),
            retries: DEFAULT_RETRIES,
            access: AccessList::default(),
            maxconn_per_source: None,
            rate_limit: None,
            rate_limit_per_source: None,
            accept_proxy: false,
            proxy_from: Vec::new(),
            default_group: None,
            rules: Vec::new(),
            not_tls: None,
            splice: Splice::default(),
            dontlognull: false,
            erred: false,
            seen: Seen::default(),
        }
    }
}

impl GroupDraft {
    /// A group named `name` whose header is at `line`, `column`.
    pub fn new(name: &str, line: usize, column: usize) -> GroupDraft {
        GroupDraft {
            name: name.to_string(),
            line,
            column,
            pool: PoolDraft::default(),
            erred: false,
            seen: Seen::default(),
        }
    }
}

/// A connection count: at least 1, and no limit when left out.
fn connections(r: &mut Reader<'_>, option: &str, w: Word<'_>) -> Option<u32> {
    r.number(option, w, 1, 10_000_000, "; leave it out for no limit")
}

// ---- global ----

/// The `global` section's options, in the order the messages list them.
pub const GLOBAL: &[Opt<GlobalDraft>] = &[
    Opt {
        name: "maxconn",
        setter: Setter::Value {
            hint: "a number of connections",
            set: |r, g, v| g.global.maxconn = connections(r, "maxconn", v),
        },
    },
    Opt {
        name: "workers",
        setter: Setter::Value {
            hint: "a number of threads",
            set: |r, g, v| g.global.workers = r.number("workers", v, 1, 1024, ""),
        },
    },
    Opt {
        name: "grace",
        setter: Setter::Value {
            hint: "a duration, like 30s",
            set: |r, g, v| g.global.grace = r.duration("grace", v),
        },
    },
    Opt {
        name: "shutdown-delay",
        setter: Setter::Value {
            hint: "a duration, like 5s",
            set: set_shutdown_delay,
        },
    },
    Opt {
        name: "admin",
        setter: Setter::Value {
            hint: "an address like 127.0.0.1:9100",
            set: set_admin,
        },
    },
    Opt {
        name: "access-log",
        setter: Setter::Value {
            hint: "stderr, off or a file path",
            set: |_, g, v| g.global.access_log = Some(AccessLogTarget::parse(v.text)),
        },
    },
    Opt {
        name: "log-format",
        setter: Setter::Value {
            hint: "tcplog, json, or a format in quotes like \"%ci:%cp %ft %B %ts\"",
            set: logging::set_log_format,
        },
    },
    Opt {
        name: "log",
        setter: Setter::Line(logging::set_log),
    },
    Opt {
        name: "log-tag",
        setter: Setter::Value {
            hint: "a name, like 'log-tag proxy'",
            set: logging::set_log_tag,
        },
    },
    Opt {
        name: "log-send-hostname",
        setter: Setter::Line(logging::set_log_send_hostname),
    },
    Opt {
        name: "timeout",
        setter: Setter::Line(set_global_timeout),
    },
    Opt {
        name: "admin-socket",
        setter: Setter::Value {
            hint: "a path, like /run/proxy/admin.sock",
            set: |_, g, v| g.global.admin_socket = Some(v.text.into()),
        },
    },
    Opt {
        name: "admin-token-file",
        setter: Setter::Value {
            hint: "a path, like /etc/proxy/admin.token",
            set: |_, g, v| g.global.admin_token_file = Some(v.text.into()),
        },
    },
    Opt {
        name: "admin-allow",
        setter: Setter::Line(|r, g, words| add_ranges(r, &mut g.global.admin_allow, words)),
    },
    Opt {
        name: "server-state-file",
        setter: Setter::Value {
            hint: "a path, like /var/lib/proxy/servers.state",
            set: |_, g, v| g.global.server_state_file = Some(v.text.into()),
        },
    },
    Opt {
        name: "upgrade-socket",
        setter: Setter::Value {
            hint: "a path, like /run/proxy/upgrade.sock",
            set: |_, g, v| g.global.upgrade_socket = Some(v.text.into()),
        },
    },
    Opt {
        name: "user",
        setter: Setter::Line(set_user),
    },
    Opt {
        name: "resolve-interval",
        setter: Setter::Value {
            hint: "a duration, like 10s, or off",
            set: set_resolve_interval,
        },
    },
];

/// `resolve-interval DURATION|off`: how often the backends written with a
/// host name are looked up again (HAProxy's `hold valid`, nginx's
/// `resolver ... valid=`); `off`: at start and at a reload only.
fn set_resolve_interval(r: &mut Reader<'_>, g: &mut GlobalDraft, v: Word<'_>) {
    if v.text == "off" {
        g.global.resolve_interval = Some(None);
        return;
    }
    match parse_duration(v.text) {
        Ok(every) if !every.is_zero() => g.global.resolve_interval = Some(Some(every)),
        Ok(_) => r.error(
            v.column,
            "resolve-interval: 0 would look names up without a pause; write 'off' to look them \
             up at start and at a reload only, or a duration like 10s",
        ),
        Err(why) => r.error(v.column, format!("resolve-interval: {why}; or off")),
    }
}

/// `user ID [GROUP]`: who to run as once the listeners are bound (nginx's
/// `user USER [GROUP]`; HAProxy's `user` and `group`, the latter a section
/// header here), each a name or a number.
fn set_user(r: &mut Reader<'_>, g: &mut GlobalDraft, words: &[Word<'_>]) {
    let hint = "a user's name or uid, and optionally a group, like 'user nobody nogroup'";
    let Some(user) = r.value(words, 0, hint) else {
        return;
    };
    r.no_more(words, 3);
    if !r.once(&mut g.seen, "user", words[0].column) {
        return;
    }
    match find_user(user.text) {
        Ok(found) => g.user = Some((found, user.text.to_string(), r.line, user.column)),
        Err(why) => r.error(user.column, format!("user: {why}")),
    }
    let Some(&group) = words.get(2) else {
        return;
    };
    match find_group(group.text) {
        Ok(gid) => g.group = Some((gid, group.text.to_string())),
        Err(why) => r.error(group.column, format!("user: {why}")),
    }
}

fn set_admin(r: &mut Reader<'_>, g: &mut GlobalDraft, v: Word<'_>) {
    let Some(addr) = r.addr("admin", v) else {
        return;
    };
    // Any address: who may use it is `admin-allow` (loopback only by
    // default), and who may act, `admin-token-file`.
    g.global.admin = Some(addr);
}

/// `shutdown-delay DURATION`; 0 is allowed and means none, the default.
fn set_shutdown_delay(r: &mut Reader<'_>, g: &mut GlobalDraft, v: Word<'_>) {
    match parse_duration(v.text) {
        Ok(delay) => g.global.shutdown_delay = Some(delay),
        Err(why) => r.error(v.column, format!("shutdown-delay: {why}")),
    }
}

/// What an unknown first word in `global` gets: an option of another
/// section, one of HAProxy's words, or a typo.
pub fn unknown_in_global(r: &mut Reader<'_>, words: &[Word<'_>]) {
    let Some(&first) = words.first() else {
        return;
    };
    let other = first.text;
    if let Some(message) = haproxy::global(other) {
        return r.error(first.column, message);
    }
    if FRONTEND.iter().any(|o| o.name == other) {
        let message = format!("'{other}' belongs in a frontend section, not in 'global'");
        return r.error(first.column, message);
    }
    let names = names(GLOBAL);
    let mut candidates = names.clone();
    candidates.extend_from_slice(SECTIONS);
    let message = format!(
        "unknown option '{other}'{} in 'global', which takes {}",
        did_you_mean(other, &candidates),
        list(&names, "and")
    );
    r.error(first.column, message);
}

// ---- frontend ----

/// A frontend's options, in the order the messages list them.
pub const FRONTEND: &[Opt<FrontendDraft>] = &[
    Opt {
        name: "listen",
        setter: Setter::Line(add_listens),
    },
    Opt {
        name: "balance",
        setter: Setter::Value {
            hint: "roundrobin, leastconn, random, source or first",
            set: |r, f, v| set_balance(r, &mut f.pool, v),
        },
    },
    Opt {
        name: "maxconn",
        setter: Setter::Value {
            hint: "a number of connections",
            set: |r, f, v| f.maxconn = connections(r, "maxconn", v),
        },
    },
    Opt {
        name: "timeout",
        setter: Setter::Line(set_timeout),
    },
    Opt {
        name: "retries",
        setter: Setter::Value {
            hint: "a number of retries",
            set: |r, f, v| {
                if let Some(n) = r.number("retries", v, 0, 100, "") {
                    f.retries = n;
                }
            },
        },
    },
    Opt {
        name: "backend",
        setter: Setter::Line(|r, f, words| add_backend(r, &mut f.pool, words)),
    },
    Opt {
        name: "allow",
        setter: Setter::Line(|r, f, words| add_ranges(r, &mut f.access.allow, words)),
    },
    Opt {
        name: "deny",
        setter: Setter::Line(|r, f, words| add_ranges(r, &mut f.access.deny, words)),
    },
    Opt {
        name: "maxconn-per-source",
        setter: Setter::Value {
            hint: "a number of connections",
            set: |r, f, v| f.maxconn_per_source = connections(r, "maxconn-per-source", v),
        },
    },
    Opt {
        name: "rate-limit",
        setter: Setter::Line(set_rate_limit),
    },
    Opt {
        name: "rate-limit-per-source",
        setter: Setter::Line(set_rate_limit_per_source),
    },
    Opt {
        name: "accept-proxy",
        setter: Setter::Line(set_accept_proxy),
    },
    Opt {
        name: "use-group",
        setter: Setter::Line(add_rules),
    },
    Opt {
        name: "default-group",
        setter: Setter::Value {
            hint: "a group's name, like 'default-group web'",
            set: |r, f, v| f.default_group = Some((v.text.to_string(), r.line, v.column)),
        },
    },
    Opt {
        name: "not-tls",
        setter: Setter::Value {
            hint: "default or refuse",
            set: set_not_tls,
        },
    },
    Opt {
        name: "splice",
        setter: Setter::Value {
            hint: "auto, on or off",
            set: set_splice,
        },
    },
    Opt {
        name: "dontlognull",
        setter: Setter::Line(logging::set_dontlognull),
    },
    Opt {
        name: "option",
        setter: Setter::Line(|r, f, words| probes::option(r, &mut f.pool.probe, words)),
    },
    Opt {
        name: "tcp-check",
        setter: Setter::Line(|r, f, words| probes::tcp_check(r, &mut f.pool.probe, words)),
    },
    Opt {
        name: "http-check",
        setter: Setter::Line(|r, f, words| probes::http_check(r, &mut f.pool.probe, words)),
    },
];

/// `listen ADDR... [freebind]`: one address or several, on one line or
/// many (HAProxy's `bind` lines), each once per frontend. `freebind` binds
/// them even when they are on no interface yet (IP_FREEBIND; HAProxy's
/// `bind ... freebind`), once per line.
fn add_listens(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let [option, words @ ..] = words else {
        return;
    };
    let (flags, addrs): (Vec<Word<'_>>, Vec<Word<'_>>) =
        words.iter().partition(|w| w.text == "freebind");
    if let [_, again, ..] = flags.as_slice() {
        r.error(
            again.column,
            "'freebind' is given twice on this line; keep one",
        );
    }
    f.freebind |= !flags.is_empty();
    if addrs.is_empty() {
        let message = "'listen' needs an address like 127.0.0.1:8080, or :8080 for every IPv4 \
                       address";
        return r.error(option.column, message);
    }
    for &w in &addrs {
        let Some(addr) = listen_addr(r, w) else {
            continue;
        };
        if let Some(&(_, line, _)) = f.listen.iter().find(|(a, ..)| *a == addr) {
            let message =
                format!("listen {addr} is already in this frontend (line {line}); keep one");
            r.error(w.column, message);
            continue;
        }
        f.listen.push((addr, r.line, w.column));
    }
}

/// A listen address: `IP:PORT`, `[IPv6]:PORT`, or `:PORT` and `*:PORT` for
/// every IPv4 address (`0.0.0.0:PORT`, as HAProxy reads them).
fn listen_addr(r: &mut Reader<'_>, w: Word<'_>) -> Option<SocketAddr> {
    let port = w.text.strip_prefix('*').unwrap_or(w.text).strip_prefix(':');
    if let Some(port) = port.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        return match port.parse::<u16>() {
            Ok(port) => Some(SocketAddr::from(([0, 0, 0, 0], port))),
            Err(_) => {
                let message = format!("listen: '{}': {port} is not a port (0 to 65535)", w.text);
                r.error(w.column, message);
                None
            }
        };
    }
    if !w.text.contains(':') && w.text.parse::<std::net::IpAddr>().is_err() {
        let message = format!(
            "unknown listen parameter '{}'{}; 'listen ADDR' takes 'freebind' (bind an address \
             that is on no interface yet)",
            w.text,
            did_you_mean(w.text, &["freebind"])
        );
        r.error(w.column, message);
        return None;
    }
    r.addr("listen", w)
}

// ---- group ----

/// A group's options: the backends and how they are balanced.
pub const GROUP: &[Opt<GroupDraft>] = &[
    Opt {
        name: "balance",
        setter: Setter::Value {
            hint: "roundrobin, leastconn, random, source or first",
            set: |r, g, v| set_balance(r, &mut g.pool, v),
        },
    },
    Opt {
        name: "backend",
        setter: Setter::Line(|r, g, words| add_backend(r, &mut g.pool, words)),
    },
    Opt {
        name: "option",
        setter: Setter::Line(|r, g, words| probes::option(r, &mut g.pool.probe, words)),
    },
    Opt {
        name: "tcp-check",
        setter: Setter::Line(|r, g, words| probes::tcp_check(r, &mut g.pool.probe, words)),
    },
    Opt {
        name: "http-check",
        setter: Setter::Line(|r, g, words| probes::http_check(r, &mut g.pool.probe, words)),
    },
];

/// What an unknown first word in a group gets: one of HAProxy's words, a
/// frontend's option, or a typo.
pub fn unknown_in_group(r: &mut Reader<'_>, words: &[Word<'_>]) {
    let Some(&first) = words.first() else {
        return;
    };
    let other = first.text;
    if let Some(message) = haproxy_proxy_word(words) {
        return r.error(first.column, message);
    }
    let message = if FRONTEND.iter().any(|o| o.name == other) {
        let quoted: Vec<String> = names(GROUP).iter().map(|n| format!("'{n}'")).collect();
        let quoted: Vec<&str> = quoted.iter().map(String::as_str).collect();
        format!(
            "'{other}' is a frontend's option; a group holds only {} lines",
            list(&quoted, "and")
        )
    } else {
        let names = names(GROUP);
        format!(
            "unknown option '{other}'{} in a group, which takes {}",
            did_you_mean(other, &names),
            list(&names, "and")
        )
    };
    r.error(first.column, message);
}

/// A `use-group` condition: its word, how a value is read, an example.
type Condition = (
    &'static str,
    fn(&str) -> Result<Pattern, String>,
    &'static str,
);

/// The conditions of `use-group`, in the order the messages list them.
const CONDITIONS: &[Condition] = &[
    ("sni", Pattern::parse, "sni api.example *.api.example"),
    ("alpn", Pattern::alpn, "alpn acme-tls/1"),
];

/// `use-group GROUP sni NAME...` or `use-group GROUP alpn PROTOCOL...`:
/// one rule per name or protocol, in order.
fn add_rules(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let hint = "a group and the names it takes, like 'use-group api sni api.example *.api.example'";
    let Some(group) = r.value(words, 0, hint) else {
        return;
    };
    let hint = "'sni' and server names, like 'sni api.example', or 'alpn' and protocols";
    let Some(kind) = r.value(words, 1, hint) else {
        return;
    };
    let Some(&(_, parse, example)) = CONDITIONS.iter().find(|(name, ..)| *name == kind.text) else {
        let names: Vec<&str> = CONDITIONS.iter().map(|(name, ..)| *name).collect();
        let message = format!(
            "use-group: unknown condition '{}'{}; rules match the TLS server name or the ALPN \
             protocols: write 'use-group {} sni NAME...' or '... alpn PROTOCOL...'",
            kind.text,
            did_you_mean(kind.text, &names),
            group.text
        );
        return r.error(kind.column, message);
    };
    let names = words.get(3..).unwrap_or_default();
    if names.is_empty() {
        let message = format!("'{}' needs values, like '{example}'", kind.text);
        return r.error(kind.column, message);
    }
    for name in names {
        match parse(name.text) {
            Ok(pattern) => f.rules.push(RuleDraft {
                group: (group.text.to_string(), group.column),
                pattern: (pattern, name.column),
                line: r.line,
            }),
            Err(why) => r.error(name.column, format!("use-group: {why}")),
        }
    }
}

fn set_not_tls(r: &mut Reader<'_>, f: &mut FrontendDraft, v: Word<'_>) {
    let why = " (the default group, or a reset)";
    if let Some(choice) = one_of(
        r,
        v,
        NotTls::ALL,
        NotTls::name,
        "not-tls: unknown choice",
        why,
    ) {
        f.not_tls = Some((choice, r.line, v.column));
    }
}

/// `splice auto | on | off`.
fn set_splice(r: &mut Reader<'_>, f: &mut FrontendDraft, v: Word<'_>) {
    if let Some(splice) = one_of(
        r,
        v,
        Splice::ALL,
        Splice::name,
        "splice: unknown choice",
        "",
    ) {
        f.splice = splice;
    }
}

fn set_balance(r: &mut Reader<'_>, f: &mut PoolDraft, v: Word<'_>) {
    f.balance_at = Some((r.line, v.column));
    if let Some(here) = haproxy::balance(v.text) {
        return r.error(v.column, format!("HAProxy's 'balance {}': {here}", v.text));
    }
    let what = "unknown balance algorithm";
    if let Some(algorithm) = one_of(r, v, Algorithm::ALL, Algorithm::name, what, "") {
        f.balance = algorithm;
    }
}

/// `v` as the one of `all` that `name` calls so; otherwise an error at its
/// column that lists them all, and the nearest one for a typo:
/// `WHAT 'v' (did you mean ...?); use a, b or c WHY`.
fn one_of<T: Copy, const N: usize>(
    r: &mut Reader<'_>,
    v: Word<'_>,
    all: [T; N],
    name: fn(T) -> &'static str,
    what: &str,
    why: &str,
) -> Option<T> {
    if let Some(found) = all.into_iter().find(|t| name(*t) == v.text) {
        return Some(found);
    }
    let names = all.map(name);
    r.error(
        v.column,
        format!("{what} {}{why}", not_one_of(v.text, &names)),
    );
    None
}

/// `allow RANGE...` and `deny RANGE...`: at least one range.
fn add_ranges(r: &mut Reader<'_>, into: &mut Vec<Cidr>, words: &[Word<'_>]) {
    let [option, ranges @ ..] = words else {
        return;
    };
    if ranges.is_empty() {
        let name = option.text;
        let message =
            format!("'{name}' needs address ranges, like '{name} 10.0.0.0/8 2001:db8::/32'");
        return r.error(option.column, message);
    }
    add_cidrs(r, option.text, into, ranges);
}

/// `rate-limit sessions N`: HAProxy's words, its one kind.
fn set_rate_limit(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let hint = "'sessions' and a rate, like 'rate-limit sessions 1000' (new connections a second)";
    let Some(kind) = r.value(words, 0, hint) else {
        return;
    };
    if kind.text != "sessions" {
        let message = format!(
            "rate-limit: unknown kind '{}'{}; write 'rate-limit sessions N' (new connections a \
             second; per client address: 'rate-limit-per-source N PERIOD')",
            kind.text,
            did_you_mean(kind.text, &["sessions"])
        );
        return r.error(kind.column, message);
    }
    let Some(rate) = r.value(words, 1, "a number of new connections a second") else {
        return;
    };
    r.no_more(words, 3);
    if r.once(&mut f.seen, "rate-limit", words[0].column) {
        f.rate_limit = r.number("rate-limit sessions", rate, 1, 10_000_000, "");
    }
}

/// `rate-limit-per-source N PERIOD`: new connections from one address per
/// period (HAProxy's stick table `conn_rate(PERIOD)`).
fn set_rate_limit_per_source(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let hint = "a number of connections and a period, like 'rate-limit-per-source 20 10s'";
    let Some(count) = r.value(words, 0, hint) else {
        return;
    };
    let Some(&period) = words.get(2) else {
        let message = format!(
            "'rate-limit-per-source {0}' needs a period after the count, like \
             'rate-limit-per-source {0} 10s'",
            count.text
        );
        return r.error(words[0].column, message);
    };
    r.no_more(words, 3);
    if !r.once(&mut f.seen, "rate-limit-per-source", words[0].column) {
        return;
    }
    let option = "rate-limit-per-source";
    let count = r.number(option, count, 1, 10_000_000, "; leave it out for no limit");
    let period = r.duration(option, period);
    if let (Some(count), Some(period)) = (count, period) {
        f.rate_limit_per_source = Some((count, period));
    }
}

/// `accept-proxy [RANGE...]`: once, with the peers trusted to send the
/// header (none: any peer).
fn set_accept_proxy(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let [option, ranges @ ..] = words else {
        return;
    };
    if r.once(&mut f.seen, option.text, option.column) {
        f.accept_proxy = true;
        add_cidrs(r, option.text, &mut f.proxy_from, ranges);
    }
}

/// Every range of `words` into `into`; each bad one reported at its column.
fn add_cidrs(r: &mut Reader<'_>, option: &str, into: &mut Vec<Cidr>, words: &[Word<'_>]) {
    for w in words {
        match Cidr::parse(w.text) {
            Ok(cidr) => into.push(cidr),
            Err(why) => r.error(w.column, format!("{option}: {why}")),
        }
    }
}

// ---- timeout ----

/// `timeout KIND DURATION` read against a section's `kinds`, each kind once
/// per section (`seen`): the kind's slot and the duration, or `None` once
/// what was wrong is reported (`unknown` answers a kind not in `kinds`).
fn timeout_line<'k, S>(
    r: &mut Reader<'_>,
    seen: &mut Seen,
    words: &[Word<'_>],
    kinds: &'k [(&'static str, S)],
    unknown: fn(&mut Reader<'_>, Word<'_>),
) -> Option<(&'k S, Duration)> {
    let example = kinds.first().map_or("connect", |(name, _)| *name);
    let hint = format!("a kind and a duration, like 'timeout {example} 5s'");
    let kind = r.value(words, 0, &hint)?;
    let Some((name, slot)) = kinds.iter().find(|(name, _)| *name == kind.text) else {
        unknown(r, kind);
        return None;
    };
    let option = format!("timeout {name}");
    let value = r.value(words, 1, "a duration, like 5s")?;
    r.no_more(words, 3);
    if !r.once(seen, &option, words[0].column) {
        return None;
    }
    Some((slot, r.timeout(&option, value)?))
}

/// The names of a table of timeout kinds, in table order.
fn kind_names<S>(kinds: &[(&'static str, S)]) -> Vec<&'static str> {
    kinds.iter().map(|(name, _)| *name).collect()
}

/// Where a `timeout KIND` of `global` goes.
type GlobalSlot = fn(&mut Global) -> &mut Option<Duration>;

/// The kinds of `timeout KIND DURATION` in `global`: the process-wide ones.
const GLOBAL_TIMEOUTS: &[(&str, GlobalSlot)] = &[("admin-request", |g| &mut g.admin_request)];

/// `timeout KIND DURATION` in `global`, each kind once.
fn set_global_timeout(r: &mut Reader<'_>, g: &mut GlobalDraft, words: &[Word<'_>]) {
    let unknown = unknown_global_timeout;
    if let Some((field, d)) = timeout_line(r, &mut g.seen, words, GLOBAL_TIMEOUTS, unknown) {
        *field(&mut g.global) = Some(d);
    }
}

/// A frontend's timeout in `global`, or a typo.
fn unknown_global_timeout(r: &mut Reader<'_>, kind: Word<'_>) {
    let message = if kind_names(TIMEOUTS).contains(&kind.text) {
        format!(
            "'timeout {}' is set per frontend, not in 'global'",
            kind.text
        )
    } else {
        let kinds = kind_names(GLOBAL_TIMEOUTS);
        format!(
            "unknown timeout '{}'{} in 'global'; use {}",
            kind.text,
            did_you_mean(kind.text, &kinds),
            list(&kinds, "or")
        )
    };
    r.error(kind.column, message);
}

/// Where a `timeout KIND` goes.
enum Slot {
    Always(fn(&mut Timeouts) -> &mut Duration),
    Optional(fn(&mut Timeouts) -> &mut Option<Duration>),
}

/// The kinds of `timeout KIND DURATION`, in the order the messages list them.
const TIMEOUTS: &[(&str, Slot)] = &[
    ("connect", Slot::Always(|t| &mut t.connect)),
    ("client", Slot::Always(|t| &mut t.client)),
    ("server", Slot::Always(|t| &mut t.server)),
    ("client-fin", Slot::Always(|t| &mut t.client_fin)),
    ("server-fin", Slot::Always(|t| &mut t.server_fin)),
    ("tunnel", Slot::Optional(|t| &mut t.tunnel)),
    ("queue", Slot::Optional(|t| &mut t.queue)),
    ("client-hs", Slot::Always(|t| &mut t.client_hs)),
];

/// `timeout KIND DURATION`, each kind once per frontend.
fn set_timeout(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    let Some((slot, d)) = timeout_line(r, &mut f.seen, words, TIMEOUTS, unknown_timeout) else {
        return;
    };
    match slot {
        Slot::Always(field) => *field(&mut f.timeouts) = d,
        Slot::Optional(field) => *field(&mut f.timeouts) = Some(d),
    }
}

/// A backend's or the process's timeout in a frontend, or a typo.
fn unknown_timeout(r: &mut Reader<'_>, kind: Word<'_>) {
    if kind.text == "check" {
        let message = "'timeout check' is set per backend: write 'check timeout DUR' on the \
                       backend line";
        return r.error(kind.column, message);
    }
    if kind_names(GLOBAL_TIMEOUTS).contains(&kind.text) {
        let message = format!(
            "'timeout {}' is set in the 'global' section, not in a frontend",
            kind.text
        );
        return r.error(kind.column, message);
    }
    if let Some(here) = haproxy::timeout(kind.text) {
        let message = format!("HAProxy's 'timeout {}': {here}", kind.text);
        return r.error(kind.column, message);
    }
    let kinds = kind_names(TIMEOUTS);
    let message = format!("unknown timeout {}", not_one_of(kind.text, &kinds));
    r.error(kind.column, message);
}

// ---- backend ----

/// `backend [NAME] ADDR [PARAM...]`: one server of the frontend or group
/// (HAProxy's `server NAME ADDR ...`), its address and its name never
/// twice in the section.
fn add_backend(r: &mut Reader<'_>, f: &mut PoolDraft, words: &[Word<'_>]) {
    f.backend_lines += 1;
    let Some((name, v)) = name_and_address(r, words) else {
        return;
    };
    let params = if name.is_some() { 3 } else { 2 };
    let addr = Address::parse(v.text)
        .map_err(|e| r.error(v.column, format!("backend: {e}")))
        .ok();
    let Some(mut server) = backend_params(r, words.get(params..).unwrap_or_default(), addr) else {
        return;
    };
    if let Some(name) = name {
        server.name = name.text.to_string();
    }
    if let Some(first) = f.backend_at.get(&server.addr) {
        let message = format!(
            "backend {} is already in this section (line {first}); list it once and use \
             'weight' to send it more",
            server.addr
        );
        return r.error(v.column, message);
    }
    match (name, f.name_at.entry(server.name.clone())) {
        (Some(name), Entry::Occupied(first)) => {
            let message = format!(
                "backend name '{}' is already used in this section (line {}); give each \
                 backend its own name",
                name.text,
                first.get()
            );
            r.error(name.column, message);
        }
        (_, slot) => {
            if let Entry::Vacant(slot) = slot {
                slot.insert(r.line);
            }
            f.backend_at.insert(server.addr.clone(), r.line);
            if server.addr.host().is_some() {
                f.hosts.push(HostLine {
                    line: r.line,
                    column: v.column,
                    name: server.name.clone(),
                    address: server.addr.clone(),
                });
            }
            f.backends.push(server);
        }
    }
}

/// The name (if any) and the address word of a `backend` line: a name if
/// the first word is not an address but the second one is (or the first
/// could only be a name). `None` once what was wrong is reported.
fn name_and_address<'w>(
    r: &mut Reader<'_>,
    words: &[Word<'w>],
) -> Option<(Option<Word<'w>>, Word<'w>)> {
    let hint = "an address like 127.0.0.1:9001 or db.example:9001, or a name and an address: \
                'backend db1 127.0.0.1:9001'";
    let first = r.value(words, 0, hint)?;
    let second_is_addr = words.get(2).is_some_and(|w| Address::parse(w.text).is_ok());
    let named =
        Address::parse(first.text).is_err() && (second_is_addr || is_server_name(first.text));
    if !named {
        return Some((None, first));
    }
    if !is_server_name(first.text) {
        let message = format!(
            "backend name '{}': use only letters, digits, '-', '_' and '.'",
            first.text
        );
        r.error(first.column, message);
        return None;
    }
    let hint = "an address after its name, like 'backend db1 127.0.0.1:9001'";
    let v = r.value(words, 1, hint)?;
    Some((Some(first), v))
}

/// A `backend` line's server while its parameters are read.
struct ServerDraft {
    server: BackendServer,
    /// `check timeout`, which defaults to `inter` once the line is read.
    check_timeout: Option<Duration>,
    /// `agent-check`, `agent-port`, `agent-inter`, `agent-send`: checked
    /// together once the line is read.
    agent: AgentDraft,
    /// The column of each parameter given, for what only the whole line
    /// can judge ([`consistent`]).
    columns: Vec<(&'static str, usize)>,
}

/// An agent's parameters while a backend line is read.
#[derive(Default)]
struct AgentDraft {
    /// `agent-check`, at this column.
    on: Option<usize>,
    /// `agent-port N`, at this column.
    port: Option<(u16, usize)>,
    inter: Option<Duration>,
    send: Vec<u8>,
}

/// One parameter of a backend line.
struct Param {
    name: &'static str,
    /// What a second one is reported as: `send-proxy` for both versions,
    /// `check inter` for the check's parameters.
    key: &'static str,
    kind: ParamKind,
}

enum ParamKind {
    /// A value follows: `weight 5`. `None` when the value was bad.
    Value(fn(&mut Reader<'_>, &mut ServerDraft, Word<'_>) -> Option<()>),
    /// On its own: `backup`.
    Flag(fn(&mut ServerDraft)),
}

/// A backend's parameters, in the order suggestions prefer them.
const PARAMS: &[Param] = &[
    Param {
        name: "weight",
        key: "weight",
        kind: ParamKind::Value(|r, d, v| {
            let n = r.number("weight", v, 0, MAX_WEIGHT, " (0 drains the backend)")?;
            d.server.weight = n;
            Some(())
        }),
    },
    Param {
        name: "backup",
        key: "backup",
        kind: ParamKind::Flag(|d| d.server.backup = true),
    },
    Param {
        name: "maxconn",
        key: "maxconn",
        kind: ParamKind::Value(|r, d, v| {
            d.server.maxconn = Some(connections(r, "maxconn", v)?);
            Some(())
        }),
    },
    Param {
        name: "check",
        key: "check",
        kind: ParamKind::Flag(|d| d.server.check = Some(Check::default())),
    },
    Param {
        name: "send-proxy",
        key: "send-proxy",
        kind: ParamKind::Flag(|d| d.server.send_proxy = Some(Version::V1)),
    },
    Param {
        name: "send-proxy-v2",
        key: "send-proxy",
        kind: ParamKind::Flag(|d| d.server.send_proxy = Some(Version::V2)),
    },
    Param {
        name: "agent-check",
        key: "agent-check",
        // backend_params notes its column, for agent_of's messages.
        kind: ParamKind::Flag(|d| d.agent.on = Some(0)),
    },
    Param {
        name: "agent-port",
        key: "agent-port",
        kind: ParamKind::Value(|r, d, v| {
            let port = r.number("agent-port", v, 1, 65_535, "")?;
            d.agent.port = Some((u16::try_from(port).ok()?, v.column));
            Some(())
        }),
    },
    Param {
        name: "agent-inter",
        key: "agent-inter",
        kind: ParamKind::Value(|r, d, v| {
            d.agent.inter = Some(r.duration("agent-inter", v)?);
            Some(())
        }),
    },
    Param {
        name: "agent-send",
        key: "agent-send",
        kind: ParamKind::Value(|r, d, v| match probes::unescape(v.text) {
            Ok(bytes) => {
                d.agent.send = bytes;
                Some(())
            }
            Err(why) => {
                r.error(v.column, format!("agent-send '{}': {why}", v.text));
                None
            }
        }),
    },
    Param {
        name: "slowstart",
        key: "slowstart",
        kind: ParamKind::Value(|r, d, v| {
            d.server.slowstart = Some(r.duration("slowstart", v)?);
            Some(())
        }),
    },
    Param {
        name: "maxqueue",
        key: "maxqueue",
        kind: ParamKind::Value(|r, d, v| {
            let hint = "; leave it out for no limit (HAProxy's maxqueue 0)";
            d.server.maxqueue = Some(r.number("maxqueue", v, 1, 10_000_000, hint)?);
            Some(())
        }),
    },
    Param {
        name: "on-marked-down",
        key: "on-marked-down",
        kind: ParamKind::Value(|r, d, v| {
            d.server.shutdown_on_down = action(r, "on-marked-down", v, "shutdown-sessions")?;
            Some(())
        }),
    },
    Param {
        name: "on-marked-up",
        key: "on-marked-up",
        kind: ParamKind::Value(|r, d, v| {
            let name = "on-marked-up";
            d.server.shutdown_backups_on_up = action(r, name, v, "shutdown-backup-sessions")?;
            Some(())
        }),
    },
    Param {
        name: "init-addr",
        key: "init-addr",
        kind: ParamKind::Value(|r, d, v| match InitAddr::parse(v.text) {
            Ok(rule) => {
                d.server.init_addr = rule;
                Some(())
            }
            Err(e) => {
                r.error(v.column, e);
                None
            }
        }),
    },
    Param {
        name: "resolve-prefer",
        key: "resolve-prefer",
        kind: ParamKind::Value(|r, d, v| {
            d.server.resolve_prefer = Some(family(r, v)?);
            Some(())
        }),
    },
];

/// `resolve-prefer`'s value.
fn family(r: &mut Reader<'_>, v: Word<'_>) -> Option<Family> {
    let families = [Family::V4, Family::V6];
    if let Some(&found) = families.iter().find(|f| f.name() == v.text) {
        return Some(found);
    }
    let names = families.map(Family::name);
    let message = format!("resolve-prefer: {}", not_one_of(v.text, &names));
    r.error(v.column, message);
    None
}

/// The one action HAProxy's `on-marked-down` / `on-marked-up` take that
/// this proxy does: `true` if `v` is it.
fn action(r: &mut Reader<'_>, param: &str, v: Word<'_>, only: &str) -> Option<bool> {
    if v.text == only {
        return Some(true);
    }
    let message = format!(
        "{param}: unknown action '{}'{}; the one action is {only}",
        v.text,
        did_you_mean(v.text, &[only])
    );
    r.error(v.column, message);
    None
}

/// What only the whole backend line can judge: parameters that need
/// another one to mean anything. Reported at the parameter's column.
fn consistent(r: &mut Reader<'_>, d: &ServerDraft) -> bool {
    let s = &d.server;
    let at = |name: &str| {
        d.columns
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(1, |&(_, column)| column)
    };
    let mut problems = Vec::new();
    if s.check.is_none() {
        let needs_check = [
            (
                "slowstart",
                s.slowstart.is_some(),
                "ramps up after the backend comes back up",
            ),
            (
                "on-marked-down",
                s.shutdown_on_down,
                "acts when the backend is marked down",
            ),
            (
                "on-marked-up",
                s.shutdown_backups_on_up,
                "acts when the backend comes back up",
            ),
        ];
        for (name, given, what) in needs_check {
            if given {
                problems.push((
                    at(name),
                    format!("'{name}' {what}, which only a checked backend does: add 'check'"),
                ));
            }
        }
    }
    if s.maxqueue.is_some() && s.maxconn.is_none() {
        problems.push((
            at("maxqueue"),
            "'maxqueue' bounds the clients waiting for a place under 'maxconn': add 'maxconn N'"
                .to_string(),
        ));
    }
    problems.extend(nothing_to_resolve(d));
    if s.shutdown_backups_on_up && s.backup {
        problems.push((
            at("on-marked-up"),
            "'on-marked-up shutdown-backup-sessions' on a backup: it is a normal backend's \
             coming up that cuts its group's backups; move it to the normal backends"
                .to_string(),
        ));
    }
    let ok = problems.is_empty();
    for (column, message) in problems {
        r.error(column, message);
    }
    ok
}

/// The parameters of a host name's lookups on a backend written with an IP
/// address, each with its column and what to do.
fn nothing_to_resolve(d: &ServerDraft) -> Vec<(usize, String)> {
    let Some(ip) = d.server.addr.ip() else {
        return Vec::new();
    };
    let given = ["init-addr", "resolve-prefer"]
        .into_iter()
        .filter_map(|name| {
            let &(_, column) = d.columns.iter().find(|(n, _)| *n == name)?;
            Some((name, column))
        });
    given
        .map(|(name, column)| {
            let message = format!(
                "'{name}' is for a backend written with a host name, and {ip} is an IP address: \
                 remove it"
            );
            (column, message)
        })
        .collect()
}

/// The health check's parameters, read only after `check`.
const CHECK_PARAMS: &[Param] = &[
    Param {
        name: "inter",
        key: "check inter",
        kind: ParamKind::Value(|r, d, v| {
            check_of(d).inter = r.duration("check inter", v)?;
            Some(())
        }),
    },
    Param {
        name: "fall",
        key: "check fall",
        kind: ParamKind::Value(|r, d, v| {
            check_of(d).fall = r.number("check fall", v, 1, 100, "")?;
            Some(())
        }),
    },
    Param {
        name: "rise",
        key: "check rise",
        kind: ParamKind::Value(|r, d, v| {
            check_of(d).rise = r.number("check rise", v, 1, 100, "")?;
            Some(())
        }),
    },
    Param {
        name: "timeout",
        key: "check timeout",
        kind: ParamKind::Value(|r, d, v| {
            d.check_timeout = Some(r.duration("check timeout", v)?);
            Some(())
        }),
    },
];

/// The check a check parameter sets: read only after `check`, so there is
/// one.
fn check_of(d: &mut ServerDraft) -> &mut Check {
    d.server.check.get_or_insert_with(Check::default)
}

/// The words after `backend ADDR`. `addr` is `None` when the address was
/// bad: the parameters are still checked, for their own errors. `None` if
/// anything was wrong.
fn backend_params(
    r: &mut Reader<'_>,
    words: &[Word<'_>],
    addr: Option<Address>,
) -> Option<BackendServer> {
    let mut ok = addr.is_some();
    let mut d = ServerDraft {
        server: BackendServer::new(addr.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)).into())),
        check_timeout: None,
        agent: AgentDraft::default(),
        columns: Vec::new(),
    };
    let mut seen = Seen::default();
    let mut i = 0;
    while let Some(&w) = words.get(i) {
        let in_check = d.server.check.is_some();
        let found = PARAMS
            .iter()
            .chain(CHECK_PARAMS.iter().filter(|_| in_check));
        let Some(param) = found.into_iter().find(|p| p.name == w.text) else {
            // What follows may be its value: stop at the first unknown word.
            unknown_param(r, w, in_check, i == 0);
            return None;
        };
        i += 1;
        let value = match param.kind {
            ParamKind::Value(_) => {
                let Some(&v) = words.get(i) else {
                    r.error(w.column, format!("'{}' needs a value", w.text));
                    return None;
                };
                i += 1;
                Some(v)
            }
            ParamKind::Flag(_) => None,
        };
        if !r.once_on_line(&mut seen, param.key, param.name, w.column) {
            ok = false;
            continue;
        }
        d.columns.push((param.name, w.column));
        ok &= match (&param.kind, value) {
            (ParamKind::Value(set), Some(v)) => set(r, &mut d, v).is_some(),
            (ParamKind::Flag(set), _) => {
                set(&mut d);
                if param.name == "agent-check" {
                    d.agent.on = Some(w.column);
                }
                true
            }
            (ParamKind::Value(_), None) => false,
        };
    }
    if let Some(check) = d.server.check.as_mut() {
        check.timeout = d.check_timeout.unwrap_or(check.inter);
    }
    ok &= agent_of(r, &mut d);
    ok &= consistent(r, &d);
    ok.then_some(d.server)
}

/// The agent of a backend line, if it has `agent-check`: it needs its
/// port; its parameters without `agent-check` are a mistake.
fn agent_of(r: &mut Reader<'_>, d: &mut ServerDraft) -> bool {
    let agent = std::mem::take(&mut d.agent);
    match (agent.on, agent.port) {
        (Some(_), Some((port, _))) => {
            let inter = agent.inter.or(d.server.check.map(|c| c.inter));
            d.server.agent = Some(AgentCheck {
                port,
                inter: inter.unwrap_or(Check::default().inter),
                send: agent.send,
            });
            true
        }
        (Some(column), None) => {
            let message = "agent-check needs the agent's port: add 'agent-port N' to the line";
            r.error(column, message);
            false
        }
        (None, Some((_, column))) => {
            let message = "agent-port without agent-check: add 'agent-check' to ask the agent";
            r.error(column, message);
            false
        }
        (None, None) => true,
    }
}

/// An unknown word on a backend line: a check parameter before `check`, a
/// name after the address (`first`: right after it), a typo, or something
/// else.
fn unknown_param(r: &mut Reader<'_>, w: Word<'_>, in_check: bool, first: bool) {
    let other = w.text;
    if let Some(here) = haproxy::server_param(other) {
        return r.error(w.column, format!("HAProxy's '{other}': {here}"));
    }
    if CHECK_PARAMS.iter().any(|p| p.name == other) {
        let message = format!(
            "'{other}' is a health-check parameter: write it after 'check', like 'check {other} ...'"
        );
        return r.error(w.column, message);
    }
    let mut candidates = names_of(PARAMS);
    let checks = names_of(CHECK_PARAMS);
    if in_check {
        candidates.extend_from_slice(&checks);
    }
    let hint = match suggest(other, &candidates) {
        Some(best) => format!(" (did you mean '{best}'?)"),
        None if first && is_server_name(other) => {
            format!("; a backend's name comes before its address: 'backend {other} ADDR ...'")
        }
        None if in_check => format!(
            "; a backend takes {} (with {})",
            list(&names_of(PARAMS), "and"),
            list(&checks, "and")
        ),
        None => format!("; a backend takes {}", list(&names_of(PARAMS), "and")),
    };
    r.error(w.column, format!("unknown option '{other}'{hint}"));
}

fn names_of(params: &[Param]) -> Vec<&'static str> {
    params.iter().map(|p| p.name).collect()
}

/// The names of a section's options, in table order.
pub fn names<T>(table: &[Opt<T>]) -> Vec<&'static str> {
    table.iter().map(|o| o.name).collect()
}

/// The message for a line that starts with one of HAProxy's frontend or
/// backend words, if it does.
fn haproxy_proxy_word(words: &[Word<'_>]) -> Option<String> {
    let texts: Vec<&str> = words.iter().map(|w| w.text).collect();
    haproxy::proxy(&texts)
}

/// What an unknown first word in a frontend gets: a word of HAProxy's or
/// nginx's, an option of `global`, a typo, or a backend's parameter.
pub fn unknown_in_frontend(r: &mut Reader<'_>, words: &[Word<'_>]) {
    let Some(&first) = words.first() else {
        return;
    };
    let other = first.text;
    if GLOBAL.iter().any(|o| o.name == other) {
        let message = format!("'{other}' belongs in the 'global' section, not in a frontend");
        return r.error(first.column, message);
    }
    if let Some(message) = haproxy_proxy_word(words) {
        return r.error(first.column, message);
    }
    let hint = match other {
        "proxy_pass" => " (list the backends with 'backend ADDR' lines)".to_string(),
        _ => {
            let mut candidates = names(FRONTEND);
            candidates.extend_from_slice(SECTIONS);
            did_you_mean(other, &candidates)
        }
    };
    let hint = if !hint.is_empty() {
        hint
    } else if let Some(param) =
        suggest(other, &names_of(PARAMS)).or_else(|| suggest(other, &names_of(CHECK_PARAMS)))
    {
        format!("; '{param}' goes on a backend line, like 'backend ADDR {param} ...'")
    } else {
        format!("; a frontend takes {}", list(&names(FRONTEND), "and"))
    };
    r.error(first.column, format!("unknown option '{other}'{hint}"));
}
