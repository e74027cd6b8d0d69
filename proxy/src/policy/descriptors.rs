//! Descriptors as a budget: how many the process may hold
//! (`RLIMIT_NOFILE`), how many it keeps for itself, and so the largest
//! global `maxconn` it can honour without an accepted client ever finding
//! no descriptor for its backend socket.
//!
//! HAProxy derives its `maxconn` from the descriptor limit the same way;
//! without that, an accept loop accepts while it has descriptors but keeps
//! none back for the second socket of each connection, and under a flood
//! the last clients it accepts are reset (`RC`) for want of one.
//!
//! ```text
//!   limit (the soft RLIMIT_NOFILE, raised to the hard one at startup)
//!     − reserve (what the configuration opens besides connections, plus a margin)
//!     = room for connections;  ÷ PER_CONNECTION (2)  =  the largest maxconn
//! ```
//!
//! ## Pipes are lent, not reserved
//!
//! With splice on, a pipe (two descriptors) is had only while a direction
//! moves bytes through it. Its descriptors are lent from the same room as
//! the connections' ([`Limit::lend`](super::limit::Limit::lend)), so the
//! derived `maxconn` is the same with `splice off` as with `auto` or `on`:
//! a pipe takes a pair only while connections leave one free, never the last
//! [`kept_for_connections`] of them, and a connection is admitted
//! only where the pipes lent leave its pair. When descriptors run short, a
//! new direction copies. (HAProxy instead sets `maxpipes` aside: `maxconn /
//! 4` pipes off the derived `maxconn`, a fifth of the connections given up
//! whether anything splices or not.)
//!
//! Decisions only, from plain numbers: the settings count what a
//! configuration opens ([`Opens`]), the caller reads the limit, and
//! [`Budget`] says what `maxconn` applies or why an explicit one cannot be
//! honoured, with the arithmetic.

use std::fmt::{self, Write as _};

use super::limit::kept_for_connections;
use crate::log::grouped::grouped;

/// Sockets one proxied connection holds: the client's and the backend's.
pub const SOCKETS_PER_CONNECTION: u64 = 2;

/// Pipe descriptors a connection holds for its whole life: none. A relay by
/// `splice(2)` holds a pipe (2 descriptors) per direction, but only while
/// bytes flow, so pipes are not counted per connection: they are lent
/// descriptors from the connections' room while held (this file's opening).
pub const PIPES_PER_CONNECTION: u64 = 0;

/// Descriptors one proxied connection holds, for its whole life.
pub const PER_CONNECTION: u64 = SOCKETS_PER_CONNECTION + PIPES_PER_CONNECTION;

/// Descriptors of one pipe.
pub const PER_PIPE: u64 = 2;

/// With splice on, at most a pipe for every this many connections open at
/// once (HAProxy's default `maxpipes` is `maxconn / 4`): a bound on the
/// memory pipes pin (256 KiB each), not a share of descriptors.
pub const CONNECTIONS_PER_PIPE: u64 = 4;

/// Kept spare on top of everything counted: the configuration file read on
/// a reload, `/proc` files read for `/metrics`, a descriptor the standard
/// library opens for a moment, and what nobody thought of.
pub const MARGIN: u64 = 16;

/// stdin, stdout and stderr: open in every process, counted even if closed.
const STDIO: u64 = 3;

/// What a configuration opens besides its connections: the counts the
/// reserve is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opens {
    /// Descriptors already open when the proxy started, before it opened
    /// any: stdin, stdout, stderr, and whatever its parent left open to it
    /// (counted from `/proc/self/fd` at startup). Fewer than 3 counts as 3.
    pub inherited: u64,
    /// Event-loop workers.
    pub workers: u64,
    /// Listen addresses, over every frontend (each has one listener per
    /// worker).
    pub listen_addresses: u64,
    /// Checks and agents of backend lines (`check`, `agent-check`): each has
    /// one socket at a time.
    pub checks: u64,
    /// The access log goes to a file (not stderr, not off).
    pub access_log_file: bool,
    /// A `log` line: one socket to the syslog server (UDP, TCP or Unix).
    pub syslog: bool,
    /// Some backend is written with a host name: the resolver thread's
    /// lookups, and a reload's at the same time.
    pub lookups: bool,
    /// The admin listener, with the most connections it takes at once.
    pub admin_connections: Option<u64>,
    /// The admin Unix socket, with the most clients it serves at once.
    pub admin_socket_clients: Option<u64>,
    /// Some frontend may splice (`splice auto` or `on`, the epoll mode):
    /// pipes get a ceiling ([`Budget::pipes`]) and are lent descriptors.
    pub splice: bool,
    /// An upgrade socket is set (ops/upgrade/).
    pub upgrade: bool,
}

/// The descriptors kept back, item by item: what the message and the docs
/// show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserve {
    items: Vec<(u64, String)>,
}

impl Reserve {
    /// The reserve of a configuration that opens `opens`.
    pub fn of(opens: &Opens) -> Reserve {
        let w = opens.workers.max(1);
        let f = opens.listen_addresses;
        let listeners = f * w;
        let inherited = opens.inherited.max(STDIO);
        let open_at_start = if inherited == STDIO {
            "stdin, stdout, stderr".to_string()
        } else {
            format!(
                "open at startup: stdin, stdout, stderr and {} inherited",
                inherited - STDIO
            )
        };
        let mut items = vec![
            (inherited, open_at_start),
            (3, "main thread: epoll, eventfd, signalfd".to_string()),
            (2 * w, format!("{w} worker(s) × epoll and eventfd")),
            (
                2 * listeners,
                format!(
                    "{listeners} listener(s) = {f} listen address(es) × {w} worker(s), twice: a reload \
                     binds new ones before the old close"
                ),
            ),
            (
                listeners,
                "an accepted client per accept loop, waiting for its place".to_string(),
            ),
        ];
        items.extend(optional_items(opens, listeners));
        items.push((MARGIN, "margin".to_string()));
        Reserve { items }
    }

    /// Every descriptor kept back.
    pub fn total(&self) -> u64 {
        self.items.iter().map(|(n, _)| n).sum()
    }

    /// `3 (stdin, stdout, stderr) + 3 (main thread: ...) + ... + 16 (margin)`.
    pub fn arithmetic(&self) -> String {
        let mut out = String::new();
        for (i, (n, what)) in self.items.iter().enumerate() {
            let plus = if i == 0 { "" } else { " + " };
            let _ = write!(out, "{plus}{n} ({what})");
        }
        out
    }
}

/// The items only some configurations have: health checks, an access-log
/// file, a syslog socket, the admin listener and socket, an upgrade socket (`listeners`: listen
/// addresses × workers).
fn optional_items(opens: &Opens, listeners: u64) -> Vec<(u64, String)> {
    let mut items = Vec::new();
    if opens.checks > 0 {
        items.push((
            2 * (2 + opens.checks),
            format!(
                "health checks, twice (a reload's checker overlaps the old): epoll, eventfd and \
                 {} check socket(s)",
                opens.checks
            ),
        ));
    }
    if opens.access_log_file {
        items.push((
            2,
            "the access-log file, twice (SIGUSR1 opens the new one first)".to_string(),
        ));
    }
    if opens.syslog {
        items.push((1, "the syslog socket (log)".to_string()));
    }
    if opens.lookups {
        // getaddrinfo holds /etc/hosts and a socket to a DNS server a moment.
        let what =
            "host-name lookups: a file and a socket each, the resolver thread's and a reload's";
        items.push((4, what.to_string()));
    }
    items.extend(admin_items(opens));
    if opens.upgrade {
        // The admin listener's copy is kept for the whole run, and lent.
        let admin = if opens.admin_connections.is_some() {
            2
        } else {
            0
        };
        items.push((
            2 + listeners + admin,
            format!(
                "upgrade: the socket file, a handover's connection, and a copy of each of the \
                 {listeners} listener(s){} while it is handed over",
                if admin > 0 {
                    " and of the admin's (kept)"
                } else {
                    ""
                }
            ),
        ));
    }
    items
}

/// The admin endpoint's items: its listener and connections, and its Unix
/// socket and clients.
fn admin_items(opens: &Opens) -> Vec<(u64, String)> {
    let mut items = Vec::new();
    if let Some(connections) = opens.admin_connections {
        // One more connection for a moment: a newcomer is accepted
        // before the one that gives way to it is closed (ops/admin).
        items.push((
            3 + connections + 1,
            format!(
                "admin: epoll, eventfd, listener and {connections} connections, one more \
                 while a newcomer takes a place"
            ),
        ));
    }
    if let Some(clients) = opens.admin_socket_clients {
        // One more client for a moment: it is accepted, told to retry and
        // closed (ops/admin/socket.rs).
        items.push((
            1 + clients + 1,
            format!("admin socket: listener and {clients} clients, one more told to retry"),
        ));
    }
    items
}

/// The descriptor limit and what it leaves for connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The soft limit the proxy runs with (raised to the hard one).
    pub limit: u64,
    /// The hard limit (the most the soft one could be raised to).
    pub hard: u64,
    /// What the process keeps for itself.
    pub reserve: Reserve,
    /// Whether pipes get a budget (some frontend may splice).
    pub splice: bool,
}

/// The global `maxconn` that applies, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maxconn {
    /// The configuration's, which the budget can honour.
    Explicit(u32),
    /// None was given: the largest the budget can honour.
    Derived(u32),
}

impl Maxconn {
    /// The number, whichever it is.
    pub fn get(self) -> u32 {
        match self {
            Maxconn::Explicit(n) | Maxconn::Derived(n) => n,
        }
    }
}

/// Why the budget cannot run the configuration: the message says the
/// arithmetic and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget(pub String);

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Budget {
    /// The budget of `limit` (soft, as the proxy will run) and `hard`, for
    /// a configuration that opens `opens`.
    pub fn new(limit: u64, hard: u64, opens: &Opens) -> Budget {
        Budget {
            limit,
            hard,
            reserve: Reserve::of(opens),
            splice: opens.splice,
        }
    }

    /// Descriptors left after the reserve.
    fn room(&self) -> u64 {
        self.limit.saturating_sub(self.reserve.total())
    }

    /// The largest `maxconn` the limit can honour: what is left after the
    /// reserve, [`PER_CONNECTION`] descriptors each. Below `u32::MAX`, which
    /// a [`Limit`](super::limit::Limit) reads as "no ceiling".
    pub fn largest_maxconn(&self) -> u32 {
        let room = self.room() / PER_CONNECTION;
        u32::try_from(room).unwrap_or(u32::MAX).min(u32::MAX - 1)
    }

    /// The `maxconn` derived when none is given: the largest, splice or
    /// not (pipes are lent, not set aside: this file's opening).
    fn derived_maxconn(&self) -> u32 {
        self.largest_maxconn()
    }

    /// The most pipes the splice path may hold at once, in use or pooled:
    /// one for every [`CONNECTIONS_PER_PIPE`] connections of `maxconn`
    /// (none under 4), each lent its descriptors while it is held. None with
    /// splice off everywhere.
    pub fn pipes(&self, maxconn: Maxconn) -> u32 {
        if !self.splice {
            return 0;
        }
        let wanted = u64::from(maxconn.get()) / CONNECTIONS_PER_PIPE;
        u32::try_from(wanted).unwrap_or(u32::MAX - 1)
    }

    /// The descriptor room in pairs, which connections and lent pipes
    /// share: [`Budget::largest_maxconn`], whatever `maxconn` applies (an
    /// explicit one below it leaves the difference to pipes alone).
    pub fn lendable(&self) -> u32 {
        self.largest_maxconn()
    }

    /// The global `maxconn` to run with: `explicit` if the budget can honour
    /// it, the largest it can without one; an error with the arithmetic if
    /// `explicit` is over it, or if not even one connection fits.
    pub fn maxconn(&self, explicit: Option<u32>) -> Result<Maxconn, OverBudget> {
        let largest = self.largest_maxconn();
        let reserved = self.reserve.total();
        match explicit {
            Some(n) if n > largest => Err(OverBudget(format!(
                "global maxconn {} needs {} descriptors + {} reserved, but RLIMIT_NOFILE is {} \
                 (hard {}): lower maxconn to {} or raise the limit (ulimit -n / LimitNOFILE=); \
                 {PER_CONNECTION} descriptors per connection, reserved: {}",
                grouped(u64::from(n)),
                grouped(u64::from(n) * PER_CONNECTION),
                grouped(reserved),
                grouped(self.limit),
                grouped(self.hard),
                grouped(u64::from(largest)),
                self.reserve.arithmetic()
            ))),
            _ if largest == 0 => Err(OverBudget(format!(
                "RLIMIT_NOFILE is {} (hard {}): after {} reserved, not one connection fits \
                 ({PER_CONNECTION} descriptors each); raise the limit (ulimit -n / LimitNOFILE=) \
                 to at least {}; reserved: {}",
                grouped(self.limit),
                grouped(self.hard),
                grouped(reserved),
                grouped(reserved + PER_CONNECTION),
                self.reserve.arithmetic()
            ))),
            Some(n) => Ok(Maxconn::Explicit(n)),
            None => Ok(Maxconn::Derived(self.derived_maxconn())),
        }
    }

    /// The info line that says what the budget gave.
    pub fn describe(&self, maxconn: Maxconn) -> String {
        let head = format!(
            "descriptors: RLIMIT_NOFILE {} (hard {}), {} reserved",
            grouped(self.limit),
            grouped(self.hard),
            grouped(self.reserve.total())
        );
        let line = match maxconn {
            Maxconn::Derived(n) => format!(
                "{head}: global maxconn {} derived ({PER_CONNECTION} descriptors per connection; \
                 reserved: {})",
                grouped(u64::from(n)),
                self.reserve.arithmetic()
            ),
            Maxconn::Explicit(n) => format!(
                "{head}: global maxconn {} fits (the most would be {})",
                grouped(u64::from(n)),
                grouped(u64::from(self.largest_maxconn()))
            ),
        };
        format!("{line}; {}", self.describe_pipes(maxconn))
    }

    /// How the splice path is lent its pipes: `splice: up to 2,496 pipes
    /// at once, lent (...)`.
    pub fn describe_pipes(&self, maxconn: Maxconn) -> String {
        if !self.splice {
            return "splice: off everywhere, no pipes".to_string();
        }
        let over = self.lendable().saturating_sub(maxconn.get());
        let spare = if over > 0 {
            format!(
                " ({} to pipes alone, the room over maxconn)",
                grouped(u64::from(over))
            )
        } else {
            String::new()
        };
        format!(
            "splice: up to {} pipes at once (one per {CONNECTIONS_PER_PIPE} connections), \
             {PER_PIPE} descriptors each lent from the connections' room while a pipe is \
             held{spare}, never the last {} pairs (kept for connections); a direction copies \
             when none is lent",
            grouped(u64::from(self.pipes(maxconn))),
            grouped(u64::from(kept_for_connections(maxconn.get())))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_worker() -> Opens {
        Opens {
            workers: 1,
            listen_addresses: 1,
            ..Opens::default()
        }
    }

    #[test]
    fn the_reserve_counts_what_the_configuration_opens() {
        // 3 stdio + 3 main + 2 worker + 2 listener + 1 waiting client + 16.
        assert_eq!(Reserve::of(&one_worker()).total(), 27);
        let big = Opens {
            inherited: 3,
            workers: 4,
            listen_addresses: 3,
            checks: 5,
            access_log_file: true,
            syslog: true,
            lookups: true,
            admin_connections: Some(64),
            admin_socket_clients: None,
            splice: false,
            upgrade: false,
        };
        // 3 + 3 + 8 + 2×12 + 12 + 2×(2+5) + 2 + 1 + 4 + (3+64+1) + 16.
        assert_eq!(
            Reserve::of(&big).total(),
            3 + 3 + 8 + 24 + 12 + 14 + 2 + 1 + 4 + 68 + 16
        );
        // An upgrade socket: its file, a handover's connection, a copy of
        // each of the 12 listeners and two of the admin's.
        let upgradable = Opens {
            upgrade: true,
            ..big
        };
        assert_eq!(
            Reserve::of(&upgradable).total(),
            Reserve::of(&big).total() + 2 + 12 + 2
        );
        // The admin socket: its listener, 16 clients and one told to retry.
        let with_socket = Opens {
            admin_socket_clients: Some(16),
            ..big
        };
        assert_eq!(
            Reserve::of(&with_socket).total(),
            Reserve::of(&big).total() + 1 + 16 + 1
        );
        // No workers still counts one event loop.
        assert_eq!(
            Reserve::of(&Opens {
                workers: 0,
                ..one_worker()
            })
            .total(),
            27
        );
    }

    #[test]
    fn descriptors_inherited_at_startup_are_reserved_too() {
        let inherited = Opens {
            inherited: 5,
            ..one_worker()
        };
        let reserve = Reserve::of(&inherited);
        assert_eq!(reserve.total(), 29);
        assert!(
            reserve
                .arithmetic()
                .starts_with("5 (open at startup: stdin, stdout, stderr and 2 inherited) + "),
            "{}",
            reserve.arithmetic()
        );
    }

    #[test]
    fn the_arithmetic_adds_up_to_the_total() {
        let reserve = Reserve::of(&Opens {
            checks: 2,
            admin_connections: Some(64),
            ..one_worker()
        });
        let sum: u64 = reserve
            .arithmetic()
            .split(" + ")
            .map(|item| item.split(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, reserve.total());
        assert!(reserve.arithmetic().ends_with("16 (margin)"));
    }

    #[test]
    fn the_largest_maxconn_is_what_the_reserve_leaves_two_each() {
        // ulimit -n 256: (256 - 27) / 2 = 114 (one descriptor left over).
        let budget = Budget::new(256, 256, &one_worker());
        assert_eq!(budget.largest_maxconn(), 114);
        assert_eq!(budget.maxconn(None), Ok(Maxconn::Derived(114)));
        assert_eq!(budget.maxconn(Some(114)), Ok(Maxconn::Explicit(114)));
        assert_eq!(budget.maxconn(Some(10)), Ok(Maxconn::Explicit(10)));
        // 1024 → 498; the hard limit does not enter the arithmetic.
        assert_eq!(
            Budget::new(1024, 4096, &one_worker()).largest_maxconn(),
            498
        );
        // A limit in the billions still leaves `u32::MAX` to mean "none".
        assert_eq!(
            Budget::new(u64::MAX, u64::MAX, &one_worker()).largest_maxconn(),
            u32::MAX - 1
        );
    }

    #[test]
    fn an_explicit_maxconn_over_the_budget_says_the_arithmetic() {
        let budget = Budget::new(1024, 1024, &one_worker());
        let err = budget.maxconn(Some(5000)).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "global maxconn 5,000 needs 10,000 descriptors + 27 reserved, but RLIMIT_NOFILE is \
                 1,024 (hard 1,024): lower maxconn to 498 or raise the limit (ulimit -n / \
                 LimitNOFILE=)"
            ),
            "{err}"
        );
        assert!(err.contains("2 descriptors per connection"), "{err}");
        assert!(err.contains("16 (margin)"), "{err}");
        // One over is one too many.
        assert!(budget.maxconn(Some(499)).is_err());
    }

    #[test]
    fn a_limit_that_fits_no_connection_is_an_error_even_without_maxconn() {
        let budget = Budget::new(28, 28, &one_worker());
        assert_eq!(budget.largest_maxconn(), 0);
        let err = budget.maxconn(None).unwrap_err().to_string();
        assert!(err.contains("not one connection fits"), "{err}");
        assert!(err.contains("to at least 29"), "{err}");
        assert_eq!(
            Budget::new(29, 29, &one_worker()).maxconn(None),
            Ok(Maxconn::Derived(1))
        );
    }

    #[test]
    fn with_splice_the_derived_maxconn_is_the_same_and_pipes_are_lent() {
        let splice = Opens {
            splice: true,
            ..one_worker()
        };
        // ulimit -n 256: room 229, 114 connections either way.
        let budget = Budget::new(256, 256, &splice);
        let maxconn = budget.maxconn(None).unwrap();
        assert_eq!(maxconn, Maxconn::Derived(114));
        assert_eq!(
            Budget::new(256, 256, &one_worker()).maxconn(None),
            Ok(maxconn)
        );
        assert_eq!(budget.pipes(maxconn), 28, "114 / 4");
        assert_eq!(budget.lendable(), 114);
        let said = budget.describe(maxconn);
        assert!(said.contains("splice: up to 28 pipes at once"), "{said}");
        assert!(said.contains("never the last 8 pairs"), "{said}");
        // An explicit maxconn below the room leaves the rest to pipes.
        let small = Maxconn::Explicit(40);
        assert_eq!(budget.pipes(small), 10);
        assert!(
            budget
                .describe(small)
                .contains("(74 to pipes alone, the room over maxconn)")
        );
        // 20,000 descriptors, the hard limit of the machine the benchmarks
        // run on: 9,986 either way.
        let big = Budget::new(20_000, 20_000, &splice);
        assert_eq!(big.maxconn(None), Ok(Maxconn::Derived(9_986)));
        assert_eq!(
            Budget::new(20_000, 20_000, &one_worker()).maxconn(None),
            Ok(Maxconn::Derived(9_986))
        );
        // Without splice, no pipe.
        let copy = Budget::new(256, 256, &one_worker());
        assert_eq!(copy.pipes(Maxconn::Derived(114)), 0);
    }
}
