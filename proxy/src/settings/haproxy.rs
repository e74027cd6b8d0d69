//! HAProxy's words, for an operator who writes them out of habit or
//! translates a configuration line by line: what each one is here, or, for
//! those without an equivalent, why not. Only words this file does not
//! read are here: a word it reads means what the tables of `sections.rs`
//! say, and never reaches these lists.
//!
//! ```text
//!   section headers   defaults, backend NAME, listen NAME, userlist ...   the lines under it are skipped
//!   global            nbthread, uid, chroot, daemon, stats, tune.* ...
//!   frontend, group   bind, mode, default_backend, use_backend, server, stick-table, tcp-request ...
//!   option X          redispatch, tcpka, splice-auto, httplog ...
//!   backend line      disabled, ssl, resolvers, track, observe ...
//!   timeout KIND      http-request, tarpit ...
//!   balance ALGO      static-rr, uri, hash ...
//! ```
//!
//! Each message says it once, here; `file.rs` and `sections.rs` put it
//! after the word's position. A foreign section header makes the reader
//! skip its lines (they are HAProxy's too, and each would be an error of
//! its own), and remembers its name, so that a `default-group` naming it
//! is not reported again.

use super::words::is_server_name;

/// Why the HTTP words have no equivalent: said once.
const HTTP: &str = "not supported: an HTTP feature, and this proxy relays TCP without reading \
                    HTTP";

/// Why TLS words have no equivalent.
const TLS: &str = "not supported: the proxy neither terminates nor originates TLS (a client's \
                   TLS passes through, and 'use-group' reads its ClientHello only)";

/// Why HAProxy's resolver words are not needed here.
const NAMES: &str = "not needed: a backend's host name is looked up by the system's resolver \
                     (getaddrinfo: /etc/hosts, then DNS as /etc/resolv.conf says) at start, at a \
                     reload and every 'resolve-interval' (global; HAProxy's 'hold valid')";

/// HAProxy's section headers other than `backend NAME` and `listen NAME`
/// (which need their name: [`section`]), and what each is here.
const SECTIONS: &[(&str, &str)] = &[
    (
        "defaults",
        "there are no defaults sections: set each option in the frontend that needs it \
         ('balance' also in a group)",
    ),
    (
        "userlist",
        "not supported: user lists authenticate HTTP requests, and this proxy relays TCP",
    ),
    (
        "peers",
        "not supported: it shares stick tables between HAProxy processes, and this proxy has \
         none to share (its per-source counts are its own)",
    ),
    ("resolvers", NAMES),
    (
        "mailers",
        "not supported: alert on the metrics (proxy_backend_up) or on the log's DOWN lines",
    ),
    (
        "program",
        "not supported: run other programs as units of their own (systemd)",
    ),
    ("http-errors", HTTP),
    ("cache", HTTP),
];

/// If `words` open one of HAProxy's sections: the message, and the
/// section's name when it has one (`backend pg` names `pg`).
pub fn section(words: &[&str]) -> Option<(String, Option<String>)> {
    let (&first, rest) = words.split_first()?;
    if let Some((_, here)) = SECTIONS.iter().find(|(word, _)| *word == first) {
        let name = rest.first().map(|n| n.to_string());
        let message = format!("HAProxy's '{first}' section: {here}; its lines are skipped");
        return Some((message, name));
    }
    let name = rest.first().copied().filter(|n| is_section_name(n))?;
    let message = match (first, rest.len()) {
        ("backend", 1) => format!(
            "'backend {name}' without an address: HAProxy's 'backend NAME' section is 'group \
             {name}' here, chosen with 'default-group {name}' or 'use-group {name} ...', and \
             each of its 'server NAME ADDR' lines is 'backend NAME ADDR'; a backend line is \
             'backend [NAME] ADDR ...'. The lines up to the next section are skipped"
        ),
        ("listen", _) => format!(
            "HAProxy's 'listen {name}' section is a 'frontend {name}' here, with its 'bind' lines \
             as 'listen ADDR' and its 'server' lines as 'backend NAME ADDR'; its lines are \
             skipped"
        ),
        _ => return None,
    };
    Some((message, Some(name.to_string())))
}

/// A word that reads as a section's name, not an address: a server name
/// (letters, digits, `-`, `_`, `.`) with a letter, `-` or `_` in it, so
/// that `listen 80` is a port without its colon, not a section.
fn is_section_name(word: &str) -> bool {
    is_server_name(word)
        && word
            .chars()
            .any(|c| c.is_ascii_alphabetic() || "-_".contains(c))
}

/// HAProxy's `global` words, and what each is here.
const GLOBAL: &[(&str, &str)] = &[
    ("nbthread", "write 'workers N'"),
    (
        "nbproc",
        "not supported: one process runs every worker thread; write 'workers N'",
    ),
    ("uid", "write 'user UID [GROUP]' (a name or a number each)"),
    ("gid", "write 'user USER GID' (a name or a number each)"),
    (
        "chroot",
        "not supported: a jail would hide the configuration file that SIGHUP reads again and the \
         binary that SIGUSR2 starts; confine the proxy with systemd instead (ProtectSystem=strict, \
         ProtectHome=yes, PrivateTmp=yes; docs/OPERATIONS.md)",
    ),
    (
        "daemon",
        "not supported: the proxy runs in the foreground; let systemd (Type=notify) or another \
         supervisor run it",
    ),
    (
        "master-worker",
        "not supported: one process; SIGUSR2 starts a new binary, which takes the listeners over",
    ),
    (
        "pidfile",
        "not supported: systemd (Type=notify) follows the main pid, across upgrades too \
         (MAINPID=)",
    ),
    (
        "stats",
        "its stats socket is several options here: 'admin-socket PATH' (level admin: set server, \
         set weight, shutdown sessions, show servers state), 'admin ADDR' (GET /metrics, GET \
         /health), 'upgrade-socket PATH' (expose-fd listeners) and 'timeout admin-request' (stats \
         timeout)",
    ),
    ("hard-stop-after", "write 'grace DURATION'"),
    (
        "ulimit-n",
        "not supported: the proxy raises its soft RLIMIT_NOFILE to the hard one; raise that \
         (LimitNOFILE= in the systemd unit)",
    ),
    (
        "maxpipes",
        "not supported: the splice path's pipes are lent descriptors from the connections' room as they are needed",
    ),
    ("nosplice", "write 'splice off' in each frontend"),
    (
        "spread-checks",
        "not supported: the checks of different backends are spread over each interval already",
    ),
    (
        "cpu-map",
        "not supported: the kernel places the worker threads",
    ),
];

/// `HAProxy's 'WORD': what it is here`, for an unknown word of `global`
/// that is one of HAProxy's.
pub fn global(word: &str) -> Option<String> {
    let here = match GLOBAL.iter().find(|(w, _)| *w == word) {
        Some((_, here)) => *here,
        None if word.starts_with("tune.") => {
            "not supported: buffers (64 KiB) and pipes (256 KiB) have fixed sizes"
        }
        None if word.starts_with("ssl-") => TLS,
        None => return None,
    };
    Some(format!("HAProxy's '{word}': {here}"))
}

/// HAProxy's frontend, backend and listen words, and what each is here.
const PROXY: &[(&str, &str)] = &[
    (
        "bind",
        "write 'listen ADDR' (a line for each bind, or several addresses on one line); bind's \
         accept-proxy is the frontend's 'accept-proxy' line",
    ),
    ("default_backend", "write 'default-group NAME'"),
    (
        "use_backend",
        "write 'use-group NAME sni PATTERN...' or 'use-group NAME alpn PROTOCOL...': a group is \
         chosen by the ClientHello's server name or ALPN, what HAProxy's req.ssl_sni and \
         req.ssl_alpn test",
    ),
    (
        "server",
        "write 'backend NAME ADDR ...', with the same parameters where they exist here",
    ),
    (
        "default-server",
        "not supported: write the parameters on each backend line",
    ),
    (
        "server-template",
        "not supported: it makes servers of a DNS answer's records; write a backend line for each \
         server, with its host name if it has one",
    ),
    (
        "stick-table",
        "no table is declared here: a frontend counts each source itself, with \
         'maxconn-per-source N' (conn_cur) and 'rate-limit-per-source N PERIOD' (conn_rate)",
    ),
    (
        "stick",
        "not supported: to keep a client on one backend, write 'balance source' (consistent \
         hashing of its address)",
    ),
    (
        "tcp-request",
        "its rules are options here: 'allow'/'deny' RANGE (reject if { src ... }), \
         'maxconn-per-source' and 'rate-limit-per-source' (track-sc0 src with sc0_conn_cur, \
         sc0_conn_rate), 'use-group' with 'timeout client-hs' (inspect-delay, req.ssl_sni), \
         'not-tls refuse' (reject unless { req.ssl_hello_type 1 })",
    ),
    (
        "tcp-response",
        "not supported: the backend's bytes are relayed, never inspected",
    ),
    (
        "acl",
        "not supported: conditions are written where they act: 'allow'/'deny' RANGE, \
         'use-group GROUP sni NAME...'",
    ),
    (
        "hash-type",
        "not supported: 'balance source' hashes consistently already (Maglev)",
    ),
    (
        "fullconn",
        "not supported: a backend's 'maxconn' is fixed (no minconn/fullconn scaling)",
    ),
    (
        "backlog",
        "write '--backlog N' on the command line: the listen queue of every listener",
    ),
    ("description", "write it as a comment (# ...)"),
    (
        "disabled",
        "not supported: remove the frontend, or drain its backends with 'weight 0'",
    ),
    ("enabled", "remove the line: every frontend runs"),
    (
        "capture",
        "not supported: a frontend with 'use-group' rules logs the ClientHello's server name in \
         braces, where HAProxy puts a capture",
    ),
    (
        "source",
        "not supported: connections to backends leave from the address the kernel chooses",
    ),
    ("http-request", HTTP),
    ("http-response", HTTP),
    ("http-reuse", HTTP),
    ("cookie", HTTP),
    ("compression", HTTP),
    ("errorfile", HTTP),
    ("redirect", HTTP),
    ("monitor-uri", HTTP),
];

/// `HAProxy's 'WORD': what it is here`, for a frontend or group line that
/// starts with one of HAProxy's words (`words`: the whole line, for `mode
/// tcp`).
pub fn proxy(words: &[&str]) -> Option<String> {
    let (&first, rest) = words.split_first()?;
    let (word, here) = match (first, rest.first()) {
        ("mode", Some(&"tcp")) => (
            "mode tcp".to_string(),
            "every frontend relays TCP: remove the line",
        ),
        ("mode", value) => (
            format!("mode {}", value.unwrap_or(&"")),
            "not supported: this proxy relays TCP (HAProxy's 'mode tcp') and reads no HTTP",
        ),
        _ => {
            let (_, here) = PROXY.iter().find(|(word, _)| *word == first)?;
            (first.to_string(), *here)
        }
    };
    Some(format!("HAProxy's '{}': {here}", word.trim_end()))
}

/// HAProxy's `option` words that have no line of their own here.
const OPTIONS: &[(&str, &str)] = &[
    (
        "tcplog",
        "always so here: tcplog is the access log's format by default ('log-format' in global \
         chooses another)",
    ),
    (
        "dontlognull",
        "write 'dontlognull' on a line of its own in the frontend",
    ),
    (
        "redispatch",
        "always so here: a retry goes to another backend ('retries N')",
    ),
    ("splice-auto", "write 'splice auto' (the default)"),
    ("splice-request", "write 'splice on' (both directions)"),
    ("splice-response", "write 'splice on' (both directions)"),
    (
        "tcpka",
        "not supported: no TCP keep-alive probes are set; 'timeout client' and 'timeout server' \
         end idle connections",
    ),
    (
        "clitcpka",
        "not supported: no TCP keep-alive probes are set; 'timeout client' ends idle clients",
    ),
    (
        "srvtcpka",
        "not supported: no TCP keep-alive probes are set; 'timeout server' ends idle backends",
    ),
    (
        "allbackups",
        "always so here: every backup takes connections when no normal backend can",
    ),
    (
        "nolinger",
        "not supported: a connection ends with a FIN after a complete relay, with a reset \
         otherwise",
    ),
    (
        "logasap",
        "not supported: a connection's line is written when it ends",
    ),
    (
        "log-health-checks",
        "always so here: every change is logged, and each failed check with --log-level debug",
    ),
    (
        "prefer-last-server",
        "not supported: to keep a client on one backend, write 'balance source'",
    ),
    (
        "transparent",
        "not supported: connections go to the configured backends' addresses",
    ),
    ("httplog", HTTP),
    ("httpclose", HTTP),
    ("http-server-close", HTTP),
    ("http-keep-alive", HTTP),
    ("forwardfor", HTTP),
    ("http-buffer-request", HTTP),
];

/// What HAProxy's `option NAME` is here, if it is one of those that are not
/// a health check: `option` lines are read by `probes.rs`, which asks here
/// before it calls a name unknown.
pub fn option(name: &str) -> Option<&'static str> {
    OPTIONS
        .iter()
        .find(|(word, _)| *word == name)
        .map(|(_, here)| *here)
}

/// HAProxy's `server` parameters, and what each is here.
const SERVER: &[(&str, &str)] = &[
    ("disabled", "write 'weight 0' to drain the backend"),
    ("id", "not supported: a backend is known by its name"),
    ("ssl", TLS),
    ("verify", TLS),
    ("sni", TLS),
    ("alpn", TLS),
    ("check-ssl", TLS),
    ("resolvers", NAMES),
    ("track", "not supported: each backend has checks of its own"),
    (
        "observe",
        "always so with 'check': failed client connects count toward 'fall'",
    ),
    (
        "error-limit",
        "not supported: with 'check', every failed client connect counts toward 'fall'",
    ),
    (
        "on-error",
        "not supported: with 'check', every failed client connect counts toward 'fall'",
    ),
    ("fastinter", "not supported: one interval, 'check inter'"),
    ("downinter", "not supported: one interval, 'check inter'"),
    ("minconn", "not supported: 'maxconn' is fixed"),
    ("cookie", HTTP),
    ("redir", HTTP),
    (
        "source",
        "not supported: connections to backends leave from the address the kernel chooses",
    ),
    (
        "send-proxy-v2-ssl",
        "write 'send-proxy-v2': there is no TLS to describe",
    ),
];

/// What an unknown word of a backend line is in HAProxy, if it is one of
/// its `server` parameters.
pub fn server_param(word: &str) -> Option<&'static str> {
    SERVER
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, here)| *here)
}

/// What an unknown `timeout KIND` is in HAProxy, if it is one of its.
pub fn timeout(kind: &str) -> Option<&'static str> {
    matches!(kind, "http-request" | "http-keep-alive" | "tarpit").then_some(HTTP)
}

/// What an unknown `balance` algorithm is in HAProxy, if it is one of its.
pub fn balance(algorithm: &str) -> Option<&'static str> {
    match algorithm {
        "static-rr" => Some(
            "write 'roundrobin': weights change here only during a slowstart, which static-rr \
             would ignore",
        ),
        "uri" | "url_param" | "hdr" | "rdp-cookie" => Some(
            "not supported: it hashes what an HTTP request (or an RDP cookie) says, which this \
             proxy does not read; 'balance source' hashes the client's address",
        ),
        "hash" => Some(
            "not supported: 'balance source' hashes the client's address, the one key this \
             proxy reads",
        ),
        a if a.starts_with("random(") => Some("write 'random', which draws two (random(2))"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{GLOBAL, OPTIONS, PROXY, SECTIONS, SERVER};
    use crate::settings::file::testing::errors;

    /// Every word of the tables above, in the line it would come in, and
    /// the one message it gets: no second one after it (its section's
    /// lines skipped, its frontend not told it is incomplete).
    #[test]
    fn every_haproxy_word_gets_one_message_and_no_other() {
        let cases: &[(&str, &str)] = &[
            (
                "defaults\n    mode tcp\n    timeout connect 5s\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:1:1: HAProxy's 'defaults' section: there are no defaults sections: set each option in the frontend that needs it ('balance' also in a group); its lines are skipped",
            ),
            (
                "userlist\n",
                "lb.conf:1:1: HAProxy's 'userlist' section: not supported: user lists authenticate HTTP requests, and this proxy relays TCP; its lines are skipped",
            ),
            (
                "peers\n",
                "lb.conf:1:1: HAProxy's 'peers' section: not supported: it shares stick tables between HAProxy processes, and this proxy has none to share (its per-source counts are its own); its lines are skipped",
            ),
            (
                "resolvers\n",
                "lb.conf:1:1: HAProxy's 'resolvers' section: not needed: a backend's host name is looked up by the system's resolver (getaddrinfo: /etc/hosts, then DNS as /etc/resolv.conf says) at start, at a reload and every 'resolve-interval' (global; HAProxy's 'hold valid'); its lines are skipped",
            ),
            (
                "mailers\n",
                "lb.conf:1:1: HAProxy's 'mailers' section: not supported: alert on the metrics (proxy_backend_up) or on the log's DOWN lines; its lines are skipped",
            ),
            (
                "program\n",
                "lb.conf:1:1: HAProxy's 'program' section: not supported: run other programs as units of their own (systemd); its lines are skipped",
            ),
            (
                "http-errors\n",
                "lb.conf:1:1: HAProxy's 'http-errors' section: not supported: an HTTP feature, and this proxy relays TCP without reading HTTP; its lines are skipped",
            ),
            (
                "cache\n",
                "lb.conf:1:1: HAProxy's 'cache' section: not supported: an HTTP feature, and this proxy relays TCP without reading HTTP; its lines are skipped",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\nbackend pg_primary\n    balance first\n    server db1 10.0.0.1:5432 check\n",
                "lb.conf:4:1: 'backend pg_primary' without an address: HAProxy's 'backend NAME' section is 'group pg_primary' here, chosen with 'default-group pg_primary' or 'use-group pg_primary ...', and each of its 'server NAME ADDR' lines is 'backend NAME ADDR'; a backend line is 'backend [NAME] ADDR ...'. The lines up to the next section are skipped",
            ),
            (
                "listen pg\n    bind :5432\n    server db1 10.0.0.1:5432\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:1:1: HAProxy's 'listen pg' section is a 'frontend pg' here, with its 'bind' lines as 'listen ADDR' and its 'server' lines as 'backend NAME ADDR'; its lines are skipped",
            ),
            (
                "global\n    nbthread X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'nbthread': write 'workers N'",
            ),
            (
                "global\n    nbproc X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'nbproc': not supported: one process runs every worker thread; write 'workers N'",
            ),
            (
                "global\n    uid X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'uid': write 'user UID [GROUP]' (a name or a number each)",
            ),
            (
                "global\n    gid X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'gid': write 'user USER GID' (a name or a number each)",
            ),
            (
                "global\n    chroot X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'chroot': not supported: a jail would hide the configuration file that SIGHUP reads again and the binary that SIGUSR2 starts; confine the proxy with systemd instead (ProtectSystem=strict, ProtectHome=yes, PrivateTmp=yes; docs/OPERATIONS.md)",
            ),
            (
                "global\n    daemon X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'daemon': not supported: the proxy runs in the foreground; let systemd (Type=notify) or another supervisor run it",
            ),
            (
                "global\n    master-worker X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'master-worker': not supported: one process; SIGUSR2 starts a new binary, which takes the listeners over",
            ),
            (
                "global\n    pidfile X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'pidfile': not supported: systemd (Type=notify) follows the main pid, across upgrades too (MAINPID=)",
            ),
            (
                "global\n    stats X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'stats': its stats socket is several options here: 'admin-socket PATH' (level admin: set server, set weight, shutdown sessions, show servers state), 'admin ADDR' (GET /metrics, GET /health), 'upgrade-socket PATH' (expose-fd listeners) and 'timeout admin-request' (stats timeout)",
            ),
            (
                "global\n    hard-stop-after X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'hard-stop-after': write 'grace DURATION'",
            ),
            (
                "global\n    ulimit-n X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'ulimit-n': not supported: the proxy raises its soft RLIMIT_NOFILE to the hard one; raise that (LimitNOFILE= in the systemd unit)",
            ),
            (
                "global\n    maxpipes X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'maxpipes': not supported: the splice path's pipes are lent descriptors from the connections' room as they are needed",
            ),
            (
                "global\n    nosplice X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'nosplice': write 'splice off' in each frontend",
            ),
            (
                "global\n    spread-checks X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'spread-checks': not supported: the checks of different backends are spread over each interval already",
            ),
            (
                "global\n    cpu-map X\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'cpu-map': not supported: the kernel places the worker threads",
            ),
            (
                "global\n    tune.bufsize 16384\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'tune.bufsize': not supported: buffers (64 KiB) and pipes (256 KiB) have fixed sizes",
            ),
            (
                "global\n    ssl-default-bind-options no-sslv3\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:2:5: HAProxy's 'ssl-default-bind-options': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "global\n    user nobody\n    group nogroup\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n",
                "lb.conf:3:5: HAProxy's 'group nogroup' of its global section is written after the user here: 'user USER nogroup' ('group NAME' starts a section of backends)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    bind X\n",
                "lb.conf:4:5: HAProxy's 'bind': write 'listen ADDR' (a line for each bind, or several addresses on one line); bind's accept-proxy is the frontend's 'accept-proxy' line",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    default_backend X\n",
                "lb.conf:4:5: HAProxy's 'default_backend': write 'default-group NAME'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    use_backend X\n",
                "lb.conf:4:5: HAProxy's 'use_backend': write 'use-group NAME sni PATTERN...' or 'use-group NAME alpn PROTOCOL...': a group is chosen by the ClientHello's server name or ALPN, what HAProxy's req.ssl_sni and req.ssl_alpn test",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    server X\n",
                "lb.conf:4:5: HAProxy's 'server': write 'backend NAME ADDR ...', with the same parameters where they exist here",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    default-server X\n",
                "lb.conf:4:5: HAProxy's 'default-server': not supported: write the parameters on each backend line",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    server-template X\n",
                "lb.conf:4:5: HAProxy's 'server-template': not supported: it makes servers of a DNS answer's records; write a backend line for each server, with its host name if it has one",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    stick-table X\n",
                "lb.conf:4:5: HAProxy's 'stick-table': no table is declared here: a frontend counts each source itself, with 'maxconn-per-source N' (conn_cur) and 'rate-limit-per-source N PERIOD' (conn_rate)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    stick X\n",
                "lb.conf:4:5: HAProxy's 'stick': not supported: to keep a client on one backend, write 'balance source' (consistent hashing of its address)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    tcp-request X\n",
                "lb.conf:4:5: HAProxy's 'tcp-request': its rules are options here: 'allow'/'deny' RANGE (reject if { src ... }), 'maxconn-per-source' and 'rate-limit-per-source' (track-sc0 src with sc0_conn_cur, sc0_conn_rate), 'use-group' with 'timeout client-hs' (inspect-delay, req.ssl_sni), 'not-tls refuse' (reject unless { req.ssl_hello_type 1 })",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    tcp-response X\n",
                "lb.conf:4:5: HAProxy's 'tcp-response': not supported: the backend's bytes are relayed, never inspected",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    acl X\n",
                "lb.conf:4:5: HAProxy's 'acl': not supported: conditions are written where they act: 'allow'/'deny' RANGE, 'use-group GROUP sni NAME...'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    hash-type X\n",
                "lb.conf:4:5: HAProxy's 'hash-type': not supported: 'balance source' hashes consistently already (Maglev)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    fullconn X\n",
                "lb.conf:4:5: HAProxy's 'fullconn': not supported: a backend's 'maxconn' is fixed (no minconn/fullconn scaling)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    backlog X\n",
                "lb.conf:4:5: HAProxy's 'backlog': write '--backlog N' on the command line: the listen queue of every listener",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    description X\n",
                "lb.conf:4:5: HAProxy's 'description': write it as a comment (# ...)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    disabled X\n",
                "lb.conf:4:5: HAProxy's 'disabled': not supported: remove the frontend, or drain its backends with 'weight 0'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    enabled X\n",
                "lb.conf:4:5: HAProxy's 'enabled': remove the line: every frontend runs",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    capture X\n",
                "lb.conf:4:5: HAProxy's 'capture': not supported: a frontend with 'use-group' rules logs the ClientHello's server name in braces, where HAProxy puts a capture",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    source X\n",
                "lb.conf:4:5: HAProxy's 'source': not supported: connections to backends leave from the address the kernel chooses",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    http-request X\n",
                "lb.conf:4:5: HAProxy's 'http-request': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    http-response X\n",
                "lb.conf:4:5: HAProxy's 'http-response': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    http-reuse X\n",
                "lb.conf:4:5: HAProxy's 'http-reuse': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    cookie X\n",
                "lb.conf:4:5: HAProxy's 'cookie': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    compression X\n",
                "lb.conf:4:5: HAProxy's 'compression': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    errorfile X\n",
                "lb.conf:4:5: HAProxy's 'errorfile': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    redirect X\n",
                "lb.conf:4:5: HAProxy's 'redirect': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    monitor-uri X\n",
                "lb.conf:4:5: HAProxy's 'monitor-uri': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option redispatch\n",
                "lb.conf:4:12: HAProxy's 'option redispatch': always so here: a retry goes to another backend ('retries N')",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option splice-auto\n",
                "lb.conf:4:12: HAProxy's 'option splice-auto': write 'splice auto' (the default)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option splice-request\n",
                "lb.conf:4:12: HAProxy's 'option splice-request': write 'splice on' (both directions)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option splice-response\n",
                "lb.conf:4:12: HAProxy's 'option splice-response': write 'splice on' (both directions)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option tcpka\n",
                "lb.conf:4:12: HAProxy's 'option tcpka': not supported: no TCP keep-alive probes are set; 'timeout client' and 'timeout server' end idle connections",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option clitcpka\n",
                "lb.conf:4:12: HAProxy's 'option clitcpka': not supported: no TCP keep-alive probes are set; 'timeout client' ends idle clients",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option srvtcpka\n",
                "lb.conf:4:12: HAProxy's 'option srvtcpka': not supported: no TCP keep-alive probes are set; 'timeout server' ends idle backends",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option allbackups\n",
                "lb.conf:4:12: HAProxy's 'option allbackups': always so here: every backup takes connections when no normal backend can",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option nolinger\n",
                "lb.conf:4:12: HAProxy's 'option nolinger': not supported: a connection ends with a FIN after a complete relay, with a reset otherwise",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option logasap\n",
                "lb.conf:4:12: HAProxy's 'option logasap': not supported: a connection's line is written when it ends",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option log-health-checks\n",
                "lb.conf:4:12: HAProxy's 'option log-health-checks': always so here: every change is logged, and each failed check with --log-level debug",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option prefer-last-server\n",
                "lb.conf:4:12: HAProxy's 'option prefer-last-server': not supported: to keep a client on one backend, write 'balance source'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option transparent\n",
                "lb.conf:4:12: HAProxy's 'option transparent': not supported: connections go to the configured backends' addresses",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option httplog\n",
                "lb.conf:4:12: HAProxy's 'option httplog': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option httpclose\n",
                "lb.conf:4:12: HAProxy's 'option httpclose': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option http-server-close\n",
                "lb.conf:4:12: HAProxy's 'option http-server-close': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option http-keep-alive\n",
                "lb.conf:4:12: HAProxy's 'option http-keep-alive': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option forwardfor\n",
                "lb.conf:4:12: HAProxy's 'option forwardfor': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option http-buffer-request\n",
                "lb.conf:4:12: HAProxy's 'option http-buffer-request': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    mode tcp\n",
                "lb.conf:4:5: HAProxy's 'mode tcp': every frontend relays TCP: remove the line",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    mode http\n",
                "lb.conf:4:5: HAProxy's 'mode http': not supported: this proxy relays TCP (HAProxy's 'mode tcp') and reads no HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 disabled X\n",
                "lb.conf:3:28: HAProxy's 'disabled': write 'weight 0' to drain the backend",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 id X\n",
                "lb.conf:3:28: HAProxy's 'id': not supported: a backend is known by its name",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 ssl X\n",
                "lb.conf:3:28: HAProxy's 'ssl': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 verify X\n",
                "lb.conf:3:28: HAProxy's 'verify': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 sni X\n",
                "lb.conf:3:28: HAProxy's 'sni': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 alpn X\n",
                "lb.conf:3:28: HAProxy's 'alpn': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 check-ssl X\n",
                "lb.conf:3:28: HAProxy's 'check-ssl': not supported: the proxy neither terminates nor originates TLS (a client's TLS passes through, and 'use-group' reads its ClientHello only)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 resolvers X\n",
                "lb.conf:3:28: HAProxy's 'resolvers': not needed: a backend's host name is looked up by the system's resolver (getaddrinfo: /etc/hosts, then DNS as /etc/resolv.conf says) at start, at a reload and every 'resolve-interval' (global; HAProxy's 'hold valid')",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 track X\n",
                "lb.conf:3:28: HAProxy's 'track': not supported: each backend has checks of its own",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 observe X\n",
                "lb.conf:3:28: HAProxy's 'observe': always so with 'check': failed client connects count toward 'fall'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 error-limit X\n",
                "lb.conf:3:28: HAProxy's 'error-limit': not supported: with 'check', every failed client connect counts toward 'fall'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 on-error X\n",
                "lb.conf:3:28: HAProxy's 'on-error': not supported: with 'check', every failed client connect counts toward 'fall'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 fastinter X\n",
                "lb.conf:3:28: HAProxy's 'fastinter': not supported: one interval, 'check inter'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 downinter X\n",
                "lb.conf:3:28: HAProxy's 'downinter': not supported: one interval, 'check inter'",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 minconn X\n",
                "lb.conf:3:28: HAProxy's 'minconn': not supported: 'maxconn' is fixed",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 cookie X\n",
                "lb.conf:3:28: HAProxy's 'cookie': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 redir X\n",
                "lb.conf:3:28: HAProxy's 'redir': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 source X\n",
                "lb.conf:3:28: HAProxy's 'source': not supported: connections to backends leave from the address the kernel chooses",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001 send-proxy-v2-ssl X\n",
                "lb.conf:3:28: HAProxy's 'send-proxy-v2-ssl': write 'send-proxy-v2': there is no TLS to describe",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    timeout http-request 5s\n",
                "lb.conf:4:13: HAProxy's 'timeout http-request': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    timeout http-keep-alive 5s\n",
                "lb.conf:4:13: HAProxy's 'timeout http-keep-alive': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    timeout tarpit 5s\n",
                "lb.conf:4:13: HAProxy's 'timeout tarpit': not supported: an HTTP feature, and this proxy relays TCP without reading HTTP",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance static-rr\n",
                "lb.conf:4:13: HAProxy's 'balance static-rr': write 'roundrobin': weights change here only during a slowstart, which static-rr would ignore",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance uri\n",
                "lb.conf:4:13: HAProxy's 'balance uri': not supported: it hashes what an HTTP request (or an RDP cookie) says, which this proxy does not read; 'balance source' hashes the client's address",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance url_param\n",
                "lb.conf:4:13: HAProxy's 'balance url_param': not supported: it hashes what an HTTP request (or an RDP cookie) says, which this proxy does not read; 'balance source' hashes the client's address",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance hdr\n",
                "lb.conf:4:13: HAProxy's 'balance hdr': not supported: it hashes what an HTTP request (or an RDP cookie) says, which this proxy does not read; 'balance source' hashes the client's address",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance rdp-cookie\n",
                "lb.conf:4:13: HAProxy's 'balance rdp-cookie': not supported: it hashes what an HTTP request (or an RDP cookie) says, which this proxy does not read; 'balance source' hashes the client's address",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance hash\n",
                "lb.conf:4:13: HAProxy's 'balance hash': not supported: 'balance source' hashes the client's address, the one key this proxy reads",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    balance random(2)\n",
                "lb.conf:4:13: HAProxy's 'balance random(2)': write 'random', which draws two (random(2))",
            ),
            (
                "group api\n    server a1 127.0.0.1:1\nfrontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    use-group api sni a.example\n",
                "lb.conf:2:5: HAProxy's 'server': write 'backend NAME ADDR ...', with the same parameters where they exist here",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option tcplog\n",
                "lb.conf:4:12: HAProxy's 'option tcplog': always so here: tcplog is the access log's format by default ('log-format' in global chooses another)",
            ),
            (
                "frontend web\n    listen 127.0.0.1:8080\n    backend 127.0.0.1:9001\n    option dontlognull\n",
                "lb.conf:4:12: HAProxy's 'option dontlognull': write 'dontlognull' on a line of its own in the frontend",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(errors(text), [*expected], "for:\n{text}");
        }
        // And no word of the tables is left out of the cases.
        let tables = [SECTIONS, GLOBAL, PROXY, OPTIONS, SERVER];
        for (word, _) in tables.iter().flat_map(|t| t.iter()) {
            let said = cases
                .iter()
                .any(|(_, e)| e.contains(&format!("'{word}")) || e.contains(&format!(" {word}'")));
            assert!(said, "no case for {word}");
        }
    }
}
