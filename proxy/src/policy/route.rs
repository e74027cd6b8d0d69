//! Which group of backends a TLS connection goes to, by the server name of
//! its ClientHello (SNI): a frontend's `use-group GROUP sni NAME...` rules.
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

use std::collections::HashMap;
use std::fmt;

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// This name, in lower case.
    Exact(String),
    /// Names ending in `.` and this suffix (`*.a.example`: `a.example`).
    Wildcard(String),
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
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(name) => f.write_str(name),
            Pattern::Wildcard(suffix) => write!(f, "*.{suffix}"),
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
    /// `not-tls`.
    pub not_tls: NotTls,
}

impl Routes {
    /// Adds a rule after the others and returns its index, or the index of
    /// the earlier rule that would make it unreachable.
    pub fn add(&mut self, pattern: Pattern, group: usize) -> Result<usize, usize> {
        let index = self.rules.len();
        let (map, key) = match &pattern {
            Pattern::Exact(name) => (&self.exact, name),
            Pattern::Wildcard(suffix) => (&self.wildcard, suffix),
        };
        if let Some(&earlier) = map.get(key).or_else(|| self.covering_wildcard(key)) {
            return Err(earlier);
        }
        match &pattern {
            Pattern::Exact(name) => self.exact.insert(name.clone(), index),
            Pattern::Wildcard(suffix) => self.wildcard.insert(suffix.clone(), index),
        };
        self.rules.push(Rule { pattern, group });
        Ok(index)
    }

    /// The rule for `name` (lower case, as the ClientHello reader gives it),
    /// if one matches.
    pub fn route(&self, name: &str) -> Option<usize> {
        self.exact
            .get(name)
            .or_else(|| self.covering_wildcard(name))
            .copied()
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
