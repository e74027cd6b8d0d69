//! A backend's host name to addresses, through the system's resolver:
//! `getaddrinfo(3)`, by the standard library's `ToSocketAddrs`, which reads
//! `/etc/hosts` and asks DNS as `/etc/nsswitch.conf` and
//! `/etc/resolv.conf` say (HAProxy's `init-addr libc`; what nginx does when
//! it reads its configuration). No resolver of our own: the system's
//! knows the machine's files, its search domains and its caches.
//!
//! A lookup blocks, for as long as the resolver's timeouts allow (seconds
//! against a DNS server that does not answer), so it is made only where
//! blocking harms nobody: the control thread at start and at a reload,
//! `--check-config`, the blocking and states modes before they serve, and
//! the epoll mode's resolver thread (`epoll/resolver.rs`); never on an
//! event loop.
//!
//! At start, every name is looked up once ([`Answers::of`]), however many
//! lines write it; a name without an answer refuses the start at its line
//! ([`unresolved`]) unless its line says to start without it (`init-addr
//! none` or an address: `address.rs`), or, at a reload, a running server
//! keeps its last good address.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use super::address::{Address, InitAddr};
use super::config::{BackendServer, Config, ConfigError, Frontend};
use crate::policy::address::choose;

/// Looks `host` up, blocking (module docs): its addresses with `port`, in
/// the order the resolver sorted them (RFC 6724), or why there are none
/// (`name or service not known`).
pub fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| reason(&e))?
        .collect();
    match addrs.is_empty() {
        true => Err("no address".to_string()),
        false => Ok(addrs),
    }
}

/// std's `failed to lookup address information: Name or service not
/// known` as a log reason: `name or service not known`.
fn reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text
        .strip_prefix("failed to lookup address information: ")
        .unwrap_or(&text);
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if second.is_lowercase() => {
            first.to_lowercase().chain(text.chars().skip(1)).collect()
        }
        _ => text.to_string(),
    }
}

/// One round of lookups: each host name's answer (with port 0), or why it
/// has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers(HashMap<String, Result<Vec<SocketAddr>, String>>);

impl Answers {
    /// Looks up every host name the backends of `config` write, each once
    /// (blocking: module docs).
    pub fn of(config: &Config) -> Answers {
        let mut answers = Answers::default();
        let servers = config.frontends.iter().flat_map(|f| &f.backends);
        for host in servers.filter_map(|b| b.addr.host()) {
            // Kept, answer or failure: `unresolved` judges them.
            let _ = answers.ask(host, 0);
        }
        answers
    }

    /// What `host` answers, each address with `port`: looked up now
    /// (blocking) unless this round has asked already.
    pub fn ask(&mut self, host: &str, port: u16) -> Result<Vec<SocketAddr>, &str> {
        if !self.0.contains_key(host) {
            self.0.insert(host.to_string(), lookup(host, 0));
        }
        match self.get(host, port) {
            Some(answer) => answer,
            None => Err("not looked up"),
        }
    }

    /// What the lookup of `host` answered, each address with `port`
    /// (`None`: it was not looked up).
    pub fn get(&self, host: &str, port: u16) -> Option<Result<Vec<SocketAddr>, &str>> {
        let with_port = |addrs: &Vec<SocketAddr>| {
            let port = |mut a: SocketAddr| {
                a.set_port(port);
                a
            };
            addrs.iter().copied().map(port).collect()
        };
        Some(match self.0.get(host)? {
            Ok(addrs) => Ok(with_port(addrs)),
            Err(why) => Err(why.as_str()),
        })
    }

    /// The address server `b` would start at now: its own for one written
    /// as an IP address, else its name's (the one [`choose`] takes), else
    /// its `init-addr` one, if any.
    pub fn start_of(&self, b: &BackendServer) -> Option<SocketAddr> {
        let Address::Host { name, port } = &b.addr else {
            return b.addr.ip();
        };
        match self.get(name, *port) {
            Some(Ok(addrs)) => choose(&addrs, None, b.resolve_prefer),
            _ => b.init_addr.start(*port),
        }
    }
}

/// Looks up every host name of `config` before a start (or a
/// `--check-config`): the answers, or one error for each backend whose name
/// does not resolve and whose line does not say to start without it
/// ([`unresolved`]; `path` names the file in the errors).
pub fn at_start(path: &str, config: &Config) -> Result<Answers, Vec<ConfigError>> {
    let answers = Answers::of(config);
    let errors = unresolved(path, config, &answers, |_, _| false);
    match errors.is_empty() {
        true => Ok(answers),
        false => Err(errors),
    }
}

/// The backends of `config` written with a name that has no answer and may
/// not start without one (`init-addr libc`, the default), but those `kept`
/// says keep the address they have (a reload's running servers): one error
/// each, at its line of `path`, saying what to do.
pub fn unresolved(
    path: &str,
    config: &Config,
    answers: &Answers,
    kept: impl Fn(&Frontend, &BackendServer) -> bool,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut reported = BTreeSet::new();
    for frontend in &config.frontends {
        for b in &frontend.backends {
            let Address::Host { name: host, port } = &b.addr else {
                continue;
            };
            let Some(Err(why)) = answers.get(host, *port) else {
                continue;
            };
            if b.init_addr != InitAddr::Fail || kept(frontend, b) {
                continue;
            }
            let at = config
                .hosts
                .iter()
                .find(|h| h.name == b.name && h.address == b.addr);
            let (line, column) = at.map_or((0, 0), |h| (h.line, h.column));
            if !reported.insert((line, column, b.name.clone())) {
                continue; // a group's line, in a second frontend
            }
            // A line of a file can say what to do without an answer; the
            // command line's --backend cannot.
            let or = match at {
                Some(_) => {
                    ", or add 'init-addr none' to its line to start it out of rotation \
                           until it resolves"
                }
                None => "",
            };
            errors.push(ConfigError {
                path: path.to_string(),
                line,
                column,
                message: format!(
                    "backend {}: {host} does not resolve: {why}; correct the name or make it \
                     resolvable (/etc/hosts, DNS){or}",
                    b.name
                ),
            });
        }
    }
    errors
}

/// The addresses of `backends` for a mode that looks names up once, at
/// start, and never again (single, pool, states): each one's own, or its
/// name's first answer; a name without one fails the start.
pub fn once(backends: &[Address]) -> io::Result<Vec<SocketAddr>> {
    let mut addrs = Vec::new();
    for b in backends {
        let Address::Host { name, port } = b else {
            addrs.extend(b.ip());
            continue;
        };
        let found = lookup(name, *port)
            .and_then(|a| choose(&a, None, None).ok_or_else(|| "no address".to_string()));
        match found {
            Ok(addr) => {
                crate::info!("backend {b}: {name} resolves to {addr} (looked up once, at start)");
                addrs.push(addr);
            }
            Err(why) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "backend {b}: {name} does not resolve: {why}; correct the name or make \
                         it resolvable (/etc/hosts, DNS)"
                    ),
                ));
            }
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Config {
        crate::settings::file::parse("lb.conf", text).expect("a good file")
    }

    // Numeric hosts only: a test never asks the machine's DNS.
    #[test]
    fn an_address_literal_is_its_own_answer() {
        assert_eq!(
            lookup("127.0.0.1", 80),
            Ok(vec!["127.0.0.1:80".parse().unwrap()])
        );
        assert_eq!(lookup("::1", 9), Ok(vec!["[::1]:9".parse().unwrap()]));
        let e = io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(reason(&e), "name or service not known");
        assert_eq!(reason(&io::Error::other("EAI_AGAIN")), "EAI_AGAIN");
    }

    fn config() -> Config {
        ok(
            "frontend web\n  listen 127.0.0.1:1\n  backend db1 db.test:9000 resolve-prefer ipv4\n  \
            backend db2 db.test:9001 init-addr none\n  backend cache.test:80 init-addr 10.0.0.9\n  \
            backend 127.0.0.1:2\n",
        )
    }

    fn answers(pairs: &[(&str, Result<Vec<&str>, &str>)]) -> Answers {
        let parse = |a: &&str| a.parse::<SocketAddr>().expect("an address");
        Answers(
            pairs
                .iter()
                .map(|(host, answer)| {
                    let answer = match answer {
                        Ok(addrs) => Ok(addrs.iter().map(parse).collect()),
                        Err(why) => Err(why.to_string()),
                    };
                    (host.to_string(), answer)
                })
                .collect(),
        )
    }

    #[test]
    fn a_name_without_an_answer_fails_at_its_line_unless_its_line_says_otherwise() {
        let config = config();
        let none = answers(&[
            ("db.test", Err("name or service not known")),
            ("cache.test", Err("x")),
        ]);
        let errors = unresolved("lb.conf", &config, &none, |_, _| false);
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            texts,
            [
                "lb.conf:3:15: backend db1: db.test does not resolve: name or service not known; \
              correct the name or make it resolvable (/etc/hosts, DNS), or add 'init-addr none' \
              to its line to start it out of rotation until it resolves"
            ]
        );
        assert!(unresolved("lb.conf", &config, &none, |_, b| b.name == "db1").is_empty());
        let b = &config.frontends[0].backends;
        assert_eq!(none.start_of(&b[1]), None, "init-addr none: down");
        assert_eq!(
            none.start_of(&b[2]),
            "10.0.0.9:80".parse().ok(),
            "init-addr IP"
        );
        assert_eq!(none.start_of(&b[3]), "127.0.0.1:2".parse().ok());
    }

    #[test]
    fn each_server_gets_its_port_and_its_family() {
        let config = config();
        let found = answers(&[
            ("db.test", Ok(vec!["[::1]:0", "127.0.0.1:0"])),
            ("cache.test", Ok(vec![])),
        ]);
        assert!(unresolved("lb.conf", &config, &found, |_, _| false).is_empty());
        let b = &config.frontends[0].backends;
        assert_eq!(
            found.start_of(&b[0]),
            "127.0.0.1:9000".parse().ok(),
            "prefers ipv4"
        );
        assert_eq!(found.start_of(&b[1]), "[::1]:9001".parse().ok());
        assert_eq!(
            found.get("db.test", 7).map(|a| a.map(|a| a.len())),
            Some(Ok(2))
        );
        assert_eq!(found.get("other.test", 7), None);
    }
}
