//! Which group of backends a TLS connection goes to, by the server name of
//! its ClientHello (SNI) or the protocols it offers (ALPN): a frontend's
//! `use-group GROUP sni NAME...` and `use-group GROUP alpn PROTOCOL...`
//! rules.
//!
//! A name is exact (`a.example`) or a wildcard (`*.a.example`), both
//! case-insensitive. A wildcard matches any name that ends in `.a.example`,
//! at any depth (`x.a.example`, `x.y.a.example`), and not `a.example`
//! itself: HAProxy's `-m end .a.example` and nginx's `map` with
//! `hostnames` mean the same.
//!
//! The rules are tried in file order, as HAProxy's `use_backend` lines
//! are, and a rule that an earlier one makes unreachable is refused when
//! the file is read ([`Routes::add`]): a name already listed, or covered by
//! an earlier wildcard (`*.example` before `x.example` or `*.a.example`).
//! In a set of rules without such a rule, the first match in file order is
//! also the most specific match, which is the order nginx's `map` uses:
//! so the rules are kept in two hash maps and a name is routed in one
//! look-up per label, however many rules there are.
//!
//! An ALPN rule matches a client that offers its protocol among others
//! (`acme-tls/1`, `h2`; compared byte for byte, as RFC 7301 says), and is
//! unreachable only behind an earlier rule for the same protocol: a name
//! rule never hides it, nor it a name rule. A connection goes by the first
//! rule in file order that matches it, name or protocol: the name rule the
//! maps find and the first protocol rule that matches, whichever comes
//! first (`acme-tls/1` before the names sends every certificate challenge
//! to its group, whatever name it is for).

use std::collections::HashMap;
use std::fmt;

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// This name, in lower case.
    Exact(String),
    /// Names ending in `.` and this suffix (`*.a.example`: `a.example`).
    Wildcard(String),
    /// Clients offering this ALPN protocol.
    Alpn(String),
}

impl Pattern {
    /// `a.example` or `*.a.example`: letters, digits, `-` and `_`, in
    /// labels separated by dots, case-insensitive.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let lower = text.to_ascii_lowercase();
        let (name, wildcard) = match lower.strip_prefix("*.") {
            Some(suffix) => (suffix, true),
            None => (lower.as_str(), false),
        };
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        };
        if name.len() > 253 || !name.split('.').all(label_ok) {
            let hint = if name.contains('*') {
                "a wildcard is '*.' at the start only, like '*.a.example'"
            } else {
                "use a DNS name like 'a.example', or '*.a.example' for its subdomains"
            };
            return Err(format!("'{text}' is not a server name: {hint}"));
        }
        Ok(if wildcard {
            Pattern::Wildcard(name.to_string())
        } else {
            Pattern::Exact(name.to_string())
        })
    }

    /// An ALPN protocol as registered (`h2`, `http/1.1`, `acme-tls/1`):
    /// 1 to 255 printable ASCII characters, case-sensitive.
    pub fn alpn(text: &str) -> Result<Pattern, String> {
        let printable = text.bytes().all(|b| (b'!'..=b'~').contains(&b));
        if text.is_empty() || text.len() > 255 || !printable {
            return Err(format!(
                "'{text}' is not an ALPN protocol: use its registered name, like 'h2' or \
                 'acme-tls/1' (printable ASCII, up to 255 characters)"
            ));
        }
        Ok(Pattern::Alpn(text.to_string()))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(name) => f.write_str(name),
            Pattern::Wildcard(suffix) => write!(f, "*.{suffix}"),
            Pattern::Alpn(protocol) => write!(f, "alpn {protocol}"),
        }
    }
}

/// One pattern of a `use-group` line, and the group it sends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What it matches.
    pub pattern: Pattern,
    /// The group's index in the frontend's groups.
    pub group: usize,
}

/// What a frontend with rules does with a client that does not speak TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotTls {
    /// Sends it to the default group, as HAProxy's `default_backend` does.
    #[default]
    Default,
    /// Refuses it (reset, logged `PR`).
    Refuse,
}

impl NotTls {
    /// Every choice, the default first.
    pub const ALL: [NotTls; 2] = [NotTls::Default, NotTls::Refuse];

    /// Its word in the configuration (`not-tls default|refuse`).
    pub fn name(self) -> &'static str {
        match self {
            NotTls::Default => "default",
            NotTls::Refuse => "refuse",
        }
    }
}

/// The connections no rule chose, each counted on its own after the
/// rules' counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// A ClientHello without a server name: the default group.
    NoName,
    /// A server name no rule matches: the default group.
    NoMatch,
    /// Not TLS (or nothing sent): the default group, or refused.
    NotTls,
}

impl Unmatched {
    /// Every one, in counter order.
    pub const ALL: [Unmatched; 3] = [Unmatched::NoName, Unmatched::NoMatch, Unmatched::NotTls];

    /// The `rule` label of its counter, which no pattern can be.
    pub fn label(self) -> &'static str {
        match self {
            Unmatched::NoName => "(no sni)",
            Unmatched::NoMatch => "(no match)",
            Unmatched::NotTls => "(not tls)",
        }
    }
}

/// A frontend's routing rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routes {
    rules: Vec<Rule>,
    /// Exact names, to the index of their rule.
    exact: HashMap<String, usize>,
    /// Wildcards' suffixes, to the index of their rule.
    wildcard: HashMap<String, usize>,
    /// ALPN protocols, with the index of their rule, in file order (a few,
    /// tried in turn).
    alpn: Vec<(String, usize)>,
    /// `not-tls`.
    pub not_tls: NotTls,
}

impl Routes {
    /// Adds a rule after the others and returns its index, or the index of
    /// the earlier rule that would make it unreachable.
    pub fn add(&mut self, pattern: Pattern, group: usize) -> Result<usize, usize> {
        let index = self.rules.len();
        if let Some(earlier) = self.shadow(&pattern) {
            return Err(earlier);
        }
        match &pattern {
            Pattern::Exact(name) => {
                self.exact.insert(name.clone(), index);
            }
            Pattern::Wildcard(suffix) => {
                self.wildcard.insert(suffix.clone(), index);
            }
            Pattern::Alpn(protocol) => self.alpn.push((protocol.clone(), index)),
        }
        self.rules.push(Rule { pattern, group });
        Ok(index)
    }

    /// The earlier rule that matches everything `pattern` would.
    fn shadow(&self, pattern: &Pattern) -> Option<usize> {
        let (map, key) = match pattern {
            Pattern::Exact(name) => (&self.exact, name),
            Pattern::Wildcard(suffix) => (&self.wildcard, suffix),
            Pattern::Alpn(protocol) => return self.first_offered(std::slice::from_ref(protocol)),
        };
        map.get(key)
            .or_else(|| self.covering_wildcard(key))
            .copied()
    }

    /// The rule for a server `name` (lower case, as the ClientHello reader
    /// gives it), if one matches.
    pub fn route(&self, name: &str) -> Option<usize> {
        self.exact
            .get(name)
            .or_else(|| self.covering_wildcard(name))
            .copied()
    }

    /// The first rule, in file order, for a ClientHello with this server
    /// name (if any) offering these ALPN protocols.
    pub fn route_hello(&self, name: Option<&str>, offered: &[String]) -> Option<usize> {
        let by_name = name.and_then(|name| self.route(name));
        match (by_name, self.first_offered(offered)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first ALPN rule whose protocol is among `offered`.
    fn first_offered(&self, offered: &[String]) -> Option<usize> {
        self.alpn
            .iter()
            .find(|(protocol, _)| offered.contains(protocol))
            .map(|&(_, index)| index)
    }

    /// The wildcard rule covering `name`: the longest suffix of it after a
    /// dot that a wildcard names.
    fn covering_wildcard(&self, name: &str) -> Option<&usize> {
        name.match_indices('.')
            .find_map(|(dot, _)| self.wildcard.get(name.get(dot + 1..)?))
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// How many routing counters a frontend with these rules keeps: one per
    /// rule, then one per [`Unmatched`].
    pub fn counters(&self) -> usize {
        self.rules.len() + Unmatched::ALL.len()
    }

    /// The counter of the connections `unmatched` describes.
    pub fn slot(&self, unmatched: Unmatched) -> usize {
        self.rules.len() + unmatched as usize
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Pattern {
        Pattern::parse(text).expect("a pattern")
    }

    fn routes(rules: &[(&str, usize)]) -> Routes {
        let mut routes = Routes::default();
        for (text, group) in rules {
            routes.add(p(text), *group).expect("reachable");
        }
        routes
    }

    #[test]
    fn exact_names_and_wildcards_at_any_depth_but_not_the_bare_suffix() {
        let r = routes(&[("a.example", 1), ("*.b.example", 2), ("*.example", 3)]);
        let group = |name: &str| r.route(name).map(|i| r.rules()[i].group);
        assert_eq!(group("a.example"), Some(1));
        assert_eq!(group("x.b.example"), Some(2));
        assert_eq!(group("x.y.b.example"), Some(2));
        // `*.b.example` does not match `b.example`; `*.example` does.
        assert_eq!(group("b.example"), Some(3));
        assert_eq!(group("x.a.example"), Some(3));
        assert_eq!(group("example"), None);
        assert_eq!(group("other.test"), None);
    }

    #[test]
    fn patterns_are_dns_names_in_lower_case() {
        assert_eq!(p("A.Example"), Pattern::Exact("a.example".into()));
        assert_eq!(p("*.A.example"), Pattern::Wildcard("a.example".into()));
        assert_eq!(p("*.a.example").to_string(), "*.a.example");
        for bad in [
            "",
            "*",
            "*.",
            "a.*.example",
            "a..example",
            ".a",
            "a b",
            "é.example",
            "a.example.",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        let wildcard = Pattern::parse("a*.example").expect_err("a star inside");
        assert!(wildcard.contains("'*.' at the start only"), "{wildcard}");
    }

    #[test]
    fn alpn_rules_and_name_rules_take_the_first_match_in_file_order() {
        let mut r = Routes::default();
        let alpn = |t: &str| Pattern::alpn(t).expect("a protocol");
        assert_eq!(r.add(alpn("acme-tls/1"), 1), Ok(0));
        assert_eq!(r.add(p("a.example"), 2), Ok(1));
        assert_eq!(r.add(alpn("h2"), 3), Ok(2));
        let offered = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            r.route_hello(Some("a.example"), &offered(&["acme-tls/1"])),
            Some(0)
        );
        assert_eq!(
            r.route_hello(Some("a.example"), &offered(&["h2", "http/1.1"])),
            Some(1)
        );
        assert_eq!(
            r.route_hello(Some("b.example"), &offered(&["http/1.1", "h2"])),
            Some(2)
        );
        assert_eq!(r.route_hello(None, &offered(&["h2"])), Some(2));
        assert_eq!(r.route_hello(None, &offered(&["H2"])), None);
        assert_eq!(r.route_hello(None, &[]), None);
        // The same protocol twice is unreachable; a name never hides one.
        assert_eq!(r.add(alpn("h2"), 1), Err(2));
        assert_eq!(r.add(p("*.a.example"), 1), Ok(3));
        assert_eq!(alpn("acme-tls/1").to_string(), "alpn acme-tls/1");
        for bad in ["", "a b", "é"] {
            assert!(Pattern::alpn(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_rule_an_earlier_one_shadows_is_refused_with_that_one() {
        let mut r = routes(&[("a.example", 0), ("*.b.example", 0), ("*.c.example", 1)]);
        assert_eq!(r.add(p("A.example"), 1), Err(0));
        assert_eq!(r.add(p("x.b.example"), 1), Err(1));
        assert_eq!(r.add(p("*.x.c.example"), 0), Err(2));
        assert_eq!(r.add(p("*.c.example"), 0), Err(2));
        // Not shadowed: the bare suffix, and a more specific name first.
        assert_eq!(r.add(p("b.example"), 1), Ok(3));
        let mut specific_first = routes(&[("x.d.example", 0)]);
        assert_eq!(specific_first.add(p("*.d.example"), 1), Ok(1));
    }
}
