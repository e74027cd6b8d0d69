//! Fuzzes the configuration file parser, `proxy::settings::file::parse`:
//! what `proxy --check-config`, startup and every SIGHUP reload run on a
//! file, its whole-file checks (a `listen` and a backend per frontend, no
//! address or name twice) included, since they are the last step of `parse`.
//!
//! The bytes are read as UTF-8, invalid sequences replaced (as
//! `String::from_utf8_lossy` does), so that every mutation reaches the
//! parser; `file::load`'s own work on a non-UTF-8 file is to report where
//! the first bad byte is, which its unit tests hold.
//!
//! Beyond "never panics", every verdict must keep the promises of
//! docs/OPERATIONS.md ("Grammar", and the rules beyond it):
//! - a configuration it accepts has a frontend, and every frontend a
//!   `listen`, a backend, and values within their documented ranges; names
//!   are unique, so are `listen` addresses (but port 0), a port listened on
//!   at every address is not listened on again at one, and a frontend's
//!   backend addresses are unique, and its backends' names in each group;
//!   `init-addr` and `resolve-prefer` are on backends written with a host
//!   name only;
//!   its groups tile its backends, none empty, and each `use-group` rule
//!   names one of them and can be reached;
//! - a file it refuses gets at least one error, each on one line, in file
//!   order, pointing at a real line and at a column within it (or at the
//!   file as a whole, line 0).
#![no_main]

use std::collections::HashSet;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use proxy::policy::route::Pattern;
use proxy::settings::config::{Config, ConfigError, Frontend, InitAddr, MAX_WEIGHT};
use proxy::settings::file::parse;

/// What errors name the file: the parser does not care, the checks do.
const PATH: &str = "fuzz.conf";

/// `maxconn`, `maxconn-per-source` and a backend's `maxconn`.
const CONNECTIONS: std::ops::RangeInclusive<u32> = 1..=10_000_000;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse(PATH, &text) {
        Ok(config) => check_config(&config),
        Err(errors) => check_errors(&text, &errors),
    }
});

fn check_config(config: &Config) {
    assert!(!config.frontends.is_empty(), "accepted without a frontend");
    let global = &config.global;
    assert!(global.maxconn.is_none_or(|n| CONNECTIONS.contains(&n)));
    assert!(global.workers.is_none_or(|n| (1..=1024).contains(&n)));
    assert!(global.grace.is_none_or(|d| d > Duration::ZERO));
    assert!(
        global.admin.is_none_or(|a| a.ip().is_loopback()),
        "{:?}",
        global.admin
    );
    let mut names = HashSet::new();
    let mut listening = HashSet::new();
    for frontend in &config.frontends {
        assert!(
            names.insert(&frontend.name),
            "frontend {} twice",
            frontend.name
        );
        assert!(
            !frontend.listen.is_empty(),
            "{} listens nowhere",
            frontend.name
        );
        for &addr in frontend.listen.iter().filter(|a| a.port() != 0) {
            assert!(listening.insert(addr), "{addr} twice");
        }
        check_frontend(frontend);
    }
    // A port of every address of a family is not also one address's.
    for addr in &listening {
        let wide = match addr {
            std::net::SocketAddr::V4(_) => std::net::SocketAddr::from(([0u8; 4], addr.port())),
            std::net::SocketAddr::V6(_) => std::net::SocketAddr::from(([0u16; 8], addr.port())),
        };
        assert!(
            *addr == wide || !listening.contains(&wide),
            "{addr} and {wide}"
        );
    }
}

fn check_frontend(frontend: &Frontend) {
    let name_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    assert!(!frontend.name.is_empty() && frontend.name.chars().all(name_char));
    assert!(
        !frontend.backends.is_empty(),
        "frontend {} without a backend",
        frontend.name
    );
    assert!(frontend.retries <= 100);
    assert!(frontend.maxconn.is_none_or(|n| CONNECTIONS.contains(&n)));
    assert!(
        frontend
            .maxconn_per_source
            .is_none_or(|n| CONNECTIONS.contains(&n))
    );
    assert!(frontend.proxy_from.is_empty() || frontend.accept_proxy);
    let t = &frontend.timeouts;
    let set = [
        t.connect,
        t.client,
        t.server,
        t.client_fin,
        t.server_fin,
        t.client_hs,
    ];
    let unset = [t.tunnel, t.queue];
    let mut all = set.into_iter().chain(unset.into_iter().flatten());
    assert!(all.all(|d| d > Duration::ZERO), "a zero timeout: {t:?}");
    check_groups(frontend);
    let mut addresses = HashSet::new();
    for backend in &frontend.backends {
        assert!(
            addresses.insert(&backend.addr),
            "backend {} twice",
            backend.addr
        );
        // Only a host name is looked up: the lookup's parameters are its.
        assert!(
            backend.addr.host().is_some()
                || (backend.init_addr == InitAddr::Fail && backend.resolve_prefer.is_none()),
            "{backend:?}"
        );
        assert!(backend.weight <= MAX_WEIGHT);
        assert!(backend.maxconn.is_none_or(|n| CONNECTIONS.contains(&n)));
        if let Some(check) = &backend.check {
            assert!((1..=100).contains(&check.fall) && (1..=100).contains(&check.rise));
            assert!(check.inter > Duration::ZERO && check.timeout > Duration::ZERO);
        }
        assert!(backend.maxqueue.is_none_or(|n| CONNECTIONS.contains(&n)));
        assert!(backend.maxqueue.is_none() || backend.maxconn.is_some());
        let checked = backend.check.is_some();
        assert!(checked || (backend.slowstart.is_none() && !backend.shutdown_on_down));
        assert!(!backend.shutdown_backups_on_up || (checked && !backend.backup));
        assert!(backend.slowstart.is_none_or(|d| d > Duration::ZERO));
    }
    assert!(frontend.rate_limit.is_none_or(|n| CONNECTIONS.contains(&n)));
    assert!(
        frontend
            .rate_limit_per_source
            .is_none_or(|(n, d)| CONNECTIONS.contains(&n) && d > Duration::ZERO)
    );
    // A backend's name is unique in its group.
    for g in 0..frontend.group_count() {
        let Some(group) = frontend.group(g) else {
            continue;
        };
        let mut names = HashSet::new();
        for backend in &frontend.backends[group.backends] {
            assert!(
                names.insert(&backend.name),
                "backend name {} twice",
                backend.name
            );
        }
    }
}

fn check_errors(text: &str, errors: &[ConfigError]) {
    assert!(!errors.is_empty(), "refused without a reason");
    let lines: Vec<&str> = text.lines().collect();
    let places: Vec<(usize, usize)> = errors.iter().map(|e| (e.line, e.column)).collect();
    assert!(places.is_sorted(), "errors out of order: {places:?}");
    for e in errors {
        let shown = e.to_string();
        assert!(
            shown.starts_with(PATH) && !shown.contains('\n'),
            "{shown:?}"
        );
        assert!(!e.message.is_empty());
        if e.line == 0 {
            continue;
        }
        let line = lines
            .get(e.line - 1)
            .unwrap_or_else(|| panic!("no line {}: {shown}", e.line));
        let columns = line.chars().count();
        assert!(
            (1..=columns).contains(&e.column),
            "column {} of {columns}: {shown}",
            e.column
        );
    }
}

/// The groups tile the backends, none empty; every rule names a group and
/// is reachable: an exact name routes to its own rule, a wildcard never
/// matches its bare suffix, and a protocol alone routes to its own rule.
fn check_groups(frontend: &Frontend) {
    let mut end = 0;
    for g in 0..frontend.group_count() {
        let Some(group) = frontend.group(g) else {
            panic!("group {g} of {} missing", frontend.group_count());
        };
        assert_eq!(group.backends.start, end, "groups do not tile the backends");
        assert!(
            !group.backends.is_empty(),
            "group {} without a backend",
            group.name
        );
        end = group.backends.end;
    }
    assert_eq!(end, frontend.backends.len());
    let Some(routes) = &frontend.routing else {
        return;
    };
    assert!(!routes.is_empty(), "routing without a rule");
    for (i, rule) in routes.rules().iter().enumerate() {
        assert!(rule.group < frontend.group_count());
        match &rule.pattern {
            Pattern::Exact(name) => assert_eq!(routes.route(name), Some(i), "{name} unreachable"),
            Pattern::Wildcard(suffix) => assert_ne!(routes.route(suffix), Some(i), "*.{suffix}"),
            Pattern::Alpn(protocol) => {
                let offered = [protocol.clone()];
                assert_eq!(
                    routes.route_hello(None, &offered),
                    Some(i),
                    "alpn {protocol}"
                );
            }
        }
    }
}
