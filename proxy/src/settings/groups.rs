//! A frontend's groups and routing rules, once the whole file is read:
//! `default-group`, `use-group GROUP sni NAME...` and `not-tls` checked
//! against the `group` sections, into the frontend's one list of backends
//! (the default group's first, then each routed group's) and its
//! [`Routes`].
//!
//! ```text
//!   frontend tls                         backends  [ 0 1 | 2 3 | 4 ]
//!       backend A  backend B              groups      tls   api   web
//!       use-group api sni api.example     rules      api.example ─▶ 1, *.web.example ─▶ 2
//!       use-group web sni *.web.example
//! ```
//!
//! What is refused here, each at the word that is wrong: a group no
//! section defines ("did you mean"), a rule an earlier one makes
//! unreachable (`policy/route.rs`), a default given twice (own `backend`
//! lines and `default-group`), `balance` beside `default-group` (the
//! group's is used), `not-tls` without rules, and an address in two of the
//! frontend's groups (its counters and health would be one backend's,
//! under two names).

use std::collections::HashMap;

use super::config::{Address, BackendServer, Group};
use super::drafts::{FrontendDraft, GroupDraft};
use super::reader::Reader;
use super::words::did_you_mean;
use crate::policy::balance::Algorithm;
use crate::policy::route::Routes;

/// A frontend's groups as [`resolve`] finds them.
#[derive(Debug)]
pub struct Resolved {
    /// The default group's algorithm.
    pub balance: Algorithm,
    /// Every group's backends, the default's first.
    pub backends: Vec<BackendServer>,
    /// `default-group`'s name, if it has one.
    pub default_group: Option<String>,
    /// The routed groups, after the default.
    pub groups: Vec<Group>,
    /// The rules, if there are any.
    pub routing: Option<Routes>,
}

/// The groups and rules of `draft`, against the file's `groups`; `None` if
/// anything was wrong (reported).
pub fn resolve(
    r: &mut Reader<'_>,
    draft: &mut FrontendDraft,
    groups: &HashMap<String, GroupDraft>,
) -> Option<Resolved> {
    let mut ok = true;
    let mut resolved = default_group(r, draft, groups, &mut ok)?;
    // Where each address is, by group name: one look-up each.
    let mut at: HashMap<Address, String> = HashMap::new();
    let first = resolved.default_group.clone().unwrap_or(draft.name.clone());
    for b in &resolved.backends {
        at.insert(b.addr.clone(), first.clone());
    }
    let mut routes = Routes::default();
    for rule in std::mem::take(&mut draft.rules) {
        r.line = rule.line;
        let (name, column) = &rule.group;
        // The default group by its name: `default-group`'s, or the
        // frontend's for its own lines (unless a section has that name).
        let default = *name == first
            && (resolved.default_group.is_some() || !groups.contains_key(name.as_str()));
        let index = if default {
            Some(0)
        } else {
            group_index(r, &mut resolved, groups, name, *column, &mut at)
        };
        let Some(index) = index else {
            ok = false;
            continue;
        };
        let (pattern, column) = rule.pattern;
        if let Err(earlier) = routes.add(pattern.clone(), index) {
            let shadow = routes.rules().get(earlier).map(|e| e.pattern.to_string());
            let message = format!(
                "use-group: '{pattern}' can never match: '{}' comes before it and matches it \
                 first; put the more specific name first, or remove one",
                shadow.unwrap_or_default()
            );
            r.error(column, message);
            ok = false;
        }
    }
    match draft.not_tls {
        Some((choice, line, column)) if routes.is_empty() => {
            r.line = line;
            let message = format!(
                "not-tls {}: this frontend has no 'use-group' rule, so it reads no ClientHello; \
                 remove the line or add rules",
                choice.name()
            );
            r.error(column, message);
            ok = false;
        }
        Some((choice, _, _)) => routes.not_tls = choice,
        None => {}
    }
    resolved.routing = (!routes.is_empty()).then_some(routes);
    ok.then_some(resolved)
}

/// The default group: the frontend's own lines, or `default-group`'s.
fn default_group(
    r: &mut Reader<'_>,
    draft: &mut FrontendDraft,
    groups: &HashMap<String, GroupDraft>,
    ok: &mut bool,
) -> Option<Resolved> {
    let pool = &mut draft.pool;
    let mut resolved = Resolved {
        balance: pool.balance,
        backends: std::mem::take(&mut pool.backends),
        default_group: None,
        groups: Vec::new(),
        routing: None,
    };
    let Some((name, line, column)) = draft.default_group.take() else {
        return Some(resolved);
    };
    r.line = line;
    if pool.backend_lines > 0 {
        let message = format!(
            "default-group {name}: frontend '{}' has backend lines of its own, which are its \
             default group; keep one or the other",
            draft.name
        );
        r.error(column, message);
        *ok = false;
    }
    if let Some((line, column)) = pool.balance_at {
        r.line = line;
        let message = format!(
            "'balance' with 'default-group {name}': the group's own 'balance' is used; move \
             the line into 'group {name}'"
        );
        r.error(column, message);
        *ok = false;
    }
    r.line = line;
    let group = known(r, groups, &name, column)?;
    resolved.balance = group.pool.balance;
    resolved.backends = group.pool.backends.clone();
    resolved.default_group = Some(name);
    Some(resolved)
}

/// The index among the frontend's groups of the one named `name`, added
/// (its backends appended) the first time a rule names it.
fn group_index(
    r: &mut Reader<'_>,
    resolved: &mut Resolved,
    groups: &HashMap<String, GroupDraft>,
    name: &str,
    column: usize,
    at: &mut HashMap<Address, String>,
) -> Option<usize> {
    if let Some(i) = resolved.groups.iter().position(|g| g.name == name) {
        return Some(i + 1);
    }
    let group = known(r, groups, name, column)?;
    for b in &group.pool.backends {
        if let Some(other) = at.insert(b.addr.clone(), name.to_string()) {
            let message = format!(
                "backend {} is in group '{name}' and in '{other}', both routed to by this \
                 frontend; a backend belongs to one of a frontend's groups",
                b.addr
            );
            r.error(column, message);
            return None;
        }
    }
    resolved.groups.push(Group {
        name: name.to_string(),
        balance: group.pool.balance,
        start: resolved.backends.len(),
    });
    resolved
        .backends
        .extend(group.pool.backends.iter().cloned());
    Some(resolved.groups.len())
}

/// The group named `name`, or an error at `column` that no section is.
fn known<'g>(
    r: &mut Reader<'_>,
    groups: &'g HashMap<String, GroupDraft>,
    name: &str,
    column: usize,
) -> Option<&'g GroupDraft> {
    let found = groups.get(name);
    if found.is_none() {
        let names: Vec<&str> = groups.keys().map(String::as_str).collect();
        let message = format!(
            "unknown group '{name}'{}; define it with a 'group {name}' section and its \
             'backend' lines",
            did_you_mean(name, &names)
        );
        r.error(column, message);
    }
    found
}

#[cfg(test)]
mod tests {
    use crate::policy::balance::Algorithm;
    use crate::policy::route::NotTls;
    use crate::settings::config::Frontend;
    use crate::settings::file::testing::{errors, ok};

    /// Two groups, then a frontend around `lines` (from line 9).
    fn routed(lines: &str) -> String {
        format!(
            "group api\n    balance leastconn\n    backend 127.0.0.1:9101\n    backend 127.0.0.1:9102\n\
             group web\n    backend 127.0.0.1:9201\n\
             frontend tls\n    listen 127.0.0.1:8443\n{lines}"
        )
    }

    fn group_of(f: &Frontend, name: &str) -> Option<usize> {
        let routes = f.routing.as_ref()?;
        routes.route(name).map(|i| routes.rules()[i].group)
    }

    #[test]
    fn rules_route_names_to_groups_whose_backends_follow_the_default() {
        let c = ok(&routed(
            "    backend 127.0.0.1:9001\n    use-group api sni api.example *.API.example\n    \
             use-group web sni www.example\n    not-tls refuse\n",
        ));
        let f = &c.frontends[0];
        let addrs: Vec<String> = f.backends.iter().map(|b| b.addr.to_string()).collect();
        assert_eq!(
            addrs,
            [
                "127.0.0.1:9001",
                "127.0.0.1:9101",
                "127.0.0.1:9102",
                "127.0.0.1:9201"
            ]
        );
        let view = |i| f.group(i).expect("a group");
        assert_eq!((view(0).name, view(0).backends), ("tls", 0..1));
        assert_eq!(
            (view(1).name, view(1).balance, view(1).backends),
            ("api", Algorithm::LeastConn, 1..3)
        );
        assert_eq!((view(2).name, view(2).backends), ("web", 3..4));
        assert_eq!(f.group(3), None);
        assert_eq!([f.group_of(0), f.group_of(2), f.group_of(3)], [0, 1, 2]);
        assert_eq!(group_of(f, "x.api.example"), Some(1));
        assert_eq!(group_of(f, "www.example"), Some(2));
        assert_eq!(group_of(f, "api2.example"), None);
        assert_eq!(f.routing.as_ref().map(|r| r.not_tls), Some(NotTls::Refuse));
    }

    #[test]
    fn alpn_rules_route_by_protocol_in_file_order_with_the_names() {
        let c = ok(&routed(
            "    backend 127.0.0.1:9001\n    use-group web alpn acme-tls/1\n    \
             use-group api sni api.example\n",
        ));
        let routes = c.frontends[0].routing.as_ref().expect("rules");
        let offered = vec!["acme-tls/1".to_string()];
        // Groups are numbered as the rules first name them: web 1, api 2.
        let rule = routes.route_hello(Some("api.example"), &offered);
        assert_eq!(rule.map(|i| routes.rules()[i].group), Some(1));
        let rule = routes.route_hello(Some("api.example"), &[]);
        assert_eq!(rule.map(|i| routes.rules()[i].group), Some(2));
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group web alpn h2\n    use-group api alpn h2 a\tb\n",
        ));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("lb.conf:11:24: use-group: 'alpn h2' can never match"),
            "{e:?}"
        );
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group api alpm h2\n",
        ));
        assert!(
            e[0].contains("unknown condition 'alpm' (did you mean 'alpn'?)"),
            "{e:?}"
        );
    }

    #[test]
    fn a_rule_may_name_the_default_group_to_keep_a_name_from_a_wildcard() {
        let c = ok(&routed(
            "    backend 127.0.0.1:9001\n    use-group tls sni www.example\n    \
             use-group api sni *.example\n",
        ));
        let f = &c.frontends[0];
        assert_eq!(group_of(f, "www.example"), Some(0));
        assert_eq!(group_of(f, "x.example"), Some(1));
        let c = ok(&routed(
            "    default-group web\n    use-group web sni www.example\n",
        ));
        assert_eq!(group_of(&c.frontends[0], "www.example"), Some(0));
        assert!(c.frontends[0].groups.is_empty());
    }

    #[test]
    fn a_default_group_instead_of_backend_lines() {
        let c = ok(&routed(
            "    default-group web\n    use-group api sni api.example\n",
        ));
        let f = &c.frontends[0];
        assert_eq!(
            f.group(0).map(|g| (g.name, g.backends)),
            Some(("web", 0..1))
        );
        assert_eq!(f.default_group.as_deref(), Some("web"));
        // Without rules, nothing is read: a frontend that uses a group.
        let c = ok(&routed("    default-group api\n"));
        assert_eq!(c.frontends[0].routing, None);
        assert_eq!(c.frontends[0].balance, Algorithm::LeastConn);
        assert_eq!(c.frontends[0].backends.len(), 2);
    }

    #[test]
    fn mistakes_are_refused_at_their_word() {
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group apl sni a.example\n",
        ));
        assert_eq!(
            e,
            [
                "lb.conf:10:15: unknown group 'apl' (did you mean 'api'?); define it with a \
              'group apl' section and its 'backend' lines"
            ]
        );
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group api sni *.example\n    \
             use-group web sni www.example\n",
        ));
        assert_eq!(
            e,
            [
                "lb.conf:11:23: use-group: 'www.example' can never match: '*.example' comes \
              before it and matches it first; put the more specific name first, or remove one"
            ]
        );
        let e = errors(&routed("    backend 127.0.0.1:9001\n    not-tls refuse\n"));
        assert!(
            e[0].starts_with("lb.conf:10:13: not-tls refuse: this frontend has no"),
            "{e:?}"
        );
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    default-group web\n",
        ));
        assert!(e[0].contains("has backend lines of its own"), "{e:?}");
        let e = errors(&routed("    balance source\n    default-group web\n"));
        assert!(
            e[0].starts_with("lb.conf:9:13: 'balance' with 'default-group web'"),
            "{e:?}"
        );
        let e = errors(&routed(
            "    backend 127.0.0.1:9201\n    use-group web sni a.example\n",
        ));
        assert!(e[0].contains("is in group 'web' and in 'tls'"), "{e:?}");
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group api host a.example\n",
        ));
        assert!(e[0].contains("unknown condition 'host'"), "{e:?}");
        let e = errors(&routed(
            "    backend 127.0.0.1:9001\n    use-group api sni a.*.example\n",
        ));
        assert!(e[0].contains("'*.' at the start only"), "{e:?}");
        let e = errors(&routed("    use-group api sni a.example\n"));
        assert!(e[0].contains("frontend 'tls' has no backend"), "{e:?}");
        let e = errors(
            "group api\n    listen 127.0.0.1:1\ngroup api\nfrontend f\n    listen 127.0.0.1:1\n    backend 127.0.0.1:2\n",
        );
        assert!(
            e.iter()
                .any(|e| e.contains("'listen' is a frontend's option")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|e| e.contains("duplicate group 'api' (the first is at line 1)")),
            "{e:?}"
        );
        // Its one line was in error (it may have been meant as its
        // backend): no second message that it has none.
        assert!(
            !e.iter().any(|e| e.contains("group 'api' has no backend")),
            "{e:?}"
        );
        let e = errors("group api\nfrontend f\n    listen 127.0.0.1:1\n    backend 127.0.0.1:2\n");
        assert!(
            e.iter().any(|e| e.contains("group 'api' has no backend")),
            "{e:?}"
        );
    }
}
