//! Access control by source address: `allow` / `deny` lists of address
//! ranges, and a ceiling on each source's concurrent connections.
//!
//! Both answer one question about a freshly accepted client, before any
//! backend is connected: may this address come in? A refused client is
//! closed at once; it never costs a backend connection.
//!
//! ```text
//!   accept() ──▶ AccessList::admits(ip)? ──no──▶ close, count "denied"
//!                        │ yes
//!                        ▼
//!                SourceLimits::try_acquire(ip)? ──None──▶ close, count "over per-source limit"
//!                        │ Some(permit)
//!                        ▼
//!                pick a backend, connect, relay ...   drop(permit): this source's count -= 1
//! ```
//!
//!
//! The ranges themselves are [`Cidr`]s ([`cidr`](super::cidr)); the
//! per-source ceiling is [`SourceLimits`](super::source_limit::SourceLimits).
//!
//! # Allow and deny
//!
//! An [`AccessList`] is a frontend's two lists. The rule is the same whatever
//! order the lines are written in:
//!
//! ```text
//!   deny covers ip?            yes ──▶ refused        (deny always wins)
//!   allow list empty?          yes ──▶ admitted       (no allow rule: everyone not denied)
//!   allow covers ip?           yes ──▶ admitted
//!                              no  ──▶ refused        (allow rules exist: only what they cover)
//! ```
//!
//! nginx (and HAProxy's `tcp-request` rules) instead take the first
//! matching line in file order, so `allow 10.0.0.0/8; deny 10.6.6.6` lets
//! `10.6.6.6` in. Here "deny wins" means a deny line can be added anywhere
//! and always does what it says.
//!
use std::net::IpAddr;

use super::cidr::Cidr;

/// A frontend's `allow` and `deny` lists (module docs: the rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessList {
    /// If any: only sources in one of these ranges are admitted.
    pub allow: Vec<Cidr>,
    /// Sources in any of these ranges are refused, even if allowed.
    pub deny: Vec<Cidr>,
}

impl AccessList {
    /// Deny wins; if any allow rule exists, only sources it covers are
    /// admitted; with no rules, everyone.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let covers = |rules: &[Cidr]| rules.iter().any(|cidr| cidr.contains(ip));
        !covers(&self.deny) && (self.allow.is_empty() || covers(&self.allow))
    }

    /// No rules at all: everyone is admitted.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect("a test range")
    }

    #[test]
    fn access_list_precedence() {
        let list = |allow: &[&str], deny: &[&str]| AccessList {
            allow: allow.iter().map(|t| cidr(t)).collect(),
            deny: deny.iter().map(|t| cidr(t)).collect(),
        };
        let none = list(&[], &[]);
        let only_deny = list(&[], &["10.6.0.0/16", "2001:db8::/32"]);
        let only_allow = list(&["10.0.0.0/8", "::1"], &[]);
        // Overlapping: a denied hole in an allowed range.
        let both = list(&["10.0.0.0/8"], &["10.6.0.0/16"]);
        // Deny covering more than allow: the allowed part is still refused.
        let deny_wider = list(&["10.6.0.0/16"], &["10.0.0.0/8"]);

        let table: &[(&AccessList, &str, bool)] = &[
            (&none, "10.6.6.6", true),
            (&none, "2001:db8::1", true),
            (&only_deny, "10.6.6.6", false),
            (&only_deny, "::ffff:10.6.6.6", false),
            (&only_deny, "2001:db8::1", false),
            (&only_deny, "10.7.0.1", true),
            (&only_deny, "::1", true),
            (&only_allow, "10.7.0.1", true),
            (&only_allow, "::ffff:10.7.0.1", true),
            (&only_allow, "::1", true),
            (&only_allow, "192.0.2.1", false),
            (&only_allow, "::2", false),
            (&both, "10.7.0.1", true),
            (&both, "10.6.6.6", false),
            (&both, "::ffff:10.6.6.6", false),
            (&both, "192.0.2.1", false),
            (&deny_wider, "10.6.6.6", false),
            (&deny_wider, "10.7.0.1", false),
            (&deny_wider, "192.0.2.1", false),
        ];
        for &(acl, client, admitted) in table {
            assert_eq!(acl.admits(ip(client)), admitted, "{client} with {acl:?}");
        }
        assert!(none.is_empty());
        assert!(!only_deny.is_empty());
        assert_eq!(AccessList::default(), none);
    }

    // ---- SourceLimits ----
}
