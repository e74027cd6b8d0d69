//! SIGQUIT: the state of every frontend and backend, to the log, and the
//! proxy keeps running (HAProxy's SIGQUIT, which dumps its proxies' and
//! servers' state). One line for the process, one per frontend, one per
//! backend line, one per way a handover of established connections began
//! (to a new process, from an old one: `ops/upgrade/progress.rs`), then one
//! that closes the dump, all at info level:
//!
//! ```text
//! SIGQUIT: state: 3 open of global maxconn 114 (derived from RLIMIT_NOFILE 256, 27 reserved), 1 frontend, 1 worker, 2 of 28 splice pipes open, running
//! SIGQUIT: frontend web on 127.0.0.1:8080 (roundrobin): 3 open (maxconn none), 120 accepted, 1,234 bytes in, 5,678 bytes out; refused: 0 denied, 0 connect, 0 queue timeout, 0 queue full; 0 retries, 0 timeouts, 0 accept errors, 0 gone before served
//! SIGQUIT: backend web/db1 (127.0.0.1:9001): UP, 2 open (maxconn 100), 60 connected, 1,234 bytes in, 5,678 bytes out, 0 connect errors; checks (redis-check): 10 ok, 0 failed, last L7OK in 1.2ms: redis: +PONG
//! SIGQUIT: backend web/127.0.0.1:9002: UP, ...
//! SIGQUIT: upgrade: handing the established connections over to pid 4242: 300 connections in 3 batches: 252 adopted, 0 refused, 48 awaiting their fate so far
//! SIGQUIT: end of state
//! ```
//!
//! A backend is shown as `GROUP/NAME (ADDRESS)`, as the access log's
//! `group/server`, or `GROUP/ADDRESS` for a `backend` line without a name.
//! One written with a host name says where it is now, and how its lookups
//! go, at the end of its line:
//!
//! ```text
//! SIGQUIT: backend web/db1 (db.internal:5432): UP, ...; not checked; db.internal at 10.0.0.7:5432, resolving (0 failed lookups)
//! SIGQUIT: backend web/db2 (db2.internal:5432): UP, ...; not checked; db2.internal at 10.0.0.8:5432, NOT RESOLVING for 40s (name or service not known; 4 failed lookups): keeping its last good address
//! ```
//!
//! The counters are the same as `/metrics` shows, summed over the workers
//! with relaxed loads (`ops/metrics/counters.rs`): each number is right, the
//! set is not one instant's snapshot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::log::grouped::grouped;
use crate::ops::metrics::counters::{BackendCounters, FrontendCounters};
use crate::ops::upgrade::progress;
use crate::policy::descriptors::{Budget, Maxconn};
use crate::policy::limit::Limit;

use super::frontend::SharedFrontend;

/// What a dump reads.
#[derive(Debug)]
pub struct Sources<'a> {
    /// The global maxconn's count of open connections.
    pub global: &'a Limit,
    /// The global maxconn, and whether the file gave it.
    pub maxconn: Maxconn,
    /// The descriptor budget it was judged by.
    pub budget: &'a Budget,
    /// The splice path's pipes, in use or pooled, and their budget.
    pub pipes: &'a Limit,
    /// Event-loop workers.
    pub workers: usize,
    /// A graceful stop has begun.
    pub draining: bool,
    /// The frontends running now.
    pub frontends: &'a [Arc<SharedFrontend>],
    /// Where each listens, as bound (a `listen` address not in this list
    /// is shown as configured).
    pub listening: &'a [Bound],
}

/// One listen address of a frontend, as bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The frontend.
    pub frontend: String,
    /// The `listen` address as configured.
    pub configured: SocketAddr,
    /// The address its listeners are bound to (port 0 resolved).
    pub bound: SocketAddr,
}

impl Sources<'_> {
    /// The dump, one log line each (module docs).
    pub fn lines(&self) -> Vec<String> {
        let source = match self.maxconn {
            Maxconn::Explicit(_) => "from the configuration",
            Maxconn::Derived(_) => "derived from",
        };
        let mut lines = vec![format!(
            "SIGQUIT: state: {} open of global maxconn {} ({source} RLIMIT_NOFILE {}, {} reserved), \
             {} frontend{}, {} worker{}, {} of {} splice pipes open, {}",
            self.global.open(),
            grouped(u64::from(self.maxconn.get())),
            grouped(self.budget.limit),
            self.budget.reserve.total(),
            self.frontends.len(),
            plural(self.frontends.len()),
            self.workers,
            plural(self.workers),
            grouped(u64::from(self.pipes.open())),
            grouped(u64::from(self.pipes.max().unwrap_or(0))),
            if self.draining {
                "draining (stopping)"
            } else {
                "running"
            }
        )];
        for shared in self.frontends {
            let f = &shared.frontend;
            let listen: Vec<String> = f
                .listen
                .iter()
                .map(|&configured| {
                    self.listening
                        .iter()
                        .find(|b| b.frontend == f.name && b.configured == configured)
                        .map_or(configured, |b| b.bound)
                        .to_string()
                })
                .collect();
            lines.push(frontend_line(shared, &listen.join(", ")));
            for index in 0..shared.frontend.backends.len() {
                lines.push(backend_line(shared, index));
            }
        }
        lines.extend(progress::lines());
        lines.push("SIGQUIT: end of state".to_string());
        lines
    }
}

fn frontend_line(shared: &SharedFrontend, listen: &str) -> String {
    let f = &shared.frontend;
    let sum = |counter: fn(&FrontendCounters) -> &AtomicU64| {
        shared
            .counters
            .iter()
            .map(|c| counter(c).load(Relaxed))
            .fold(0, u64::wrapping_add)
    };
    format!(
        "SIGQUIT: frontend {} on {} ({}): {} open (maxconn {}), {} accepted, {} bytes in, {} bytes \
         out; refused: {} denied, {} connect, {} queue timeout, {} queue full; {} retries, {} \
         timeouts, {} accept errors, {} gone before served",
        f.name,
        listen,
        f.balance.name(),
        shared.limit.open(),
        max_of(&shared.limit),
        grouped(sum(|c| &c.connections)),
        grouped(sum(|c| &c.bytes_in)),
        grouped(sum(|c| &c.bytes_out)),
        grouped(sum(|c| &c.denied)),
        grouped(sum(|c| &c.connect_errors)),
        grouped(sum(|c| &c.queue_timeouts)),
        grouped(sum(|c| &c.queue_full)),
        grouped(sum(|c| &c.retries)),
        grouped(sum(|c| &c.timeouts)),
        grouped(sum(|c| &c.accept_errors)),
        grouped(sum(|c| &c.gone)),
    )
}

fn backend_line(shared: &SharedFrontend, index: usize) -> String {
    let f = &shared.frontend;
    let server = &f.backends[index];
    let sum = |counter: fn(&BackendCounters) -> &AtomicU64| {
        shared
            .counters
            .iter()
            .filter_map(|c| c.backends.get(index))
            .map(|c| counter(c).load(Relaxed))
            .fold(0, u64::wrapping_add)
    };
    let role = match (server.backup, server.weight) {
        (true, _) => " (backup)",
        (false, 0) => " (weight 0: drained)",
        _ => "",
    };
    let open = shared
        .backend_limits
        .get(index)
        .map_or(0, |limit| limit.open());
    let maxconn = shared
        .backend_limits
        .get(index)
        .map_or_else(|| "none".to_string(), |limit| max_of(limit));
    let group = f.group_name_of(index);
    format!(
        "SIGQUIT: backend {group}/{}{role}: {}, {open} open (maxconn {maxconn}){}, {} connected, \
         {} bytes in, {} bytes out, {} connect errors; {}{}",
        server.label(),
        health_of(shared, index),
        queue_of(shared, index),
        grouped(sum(|c| &c.connections)),
        grouped(sum(|c| &c.bytes_in)),
        grouped(sum(|c| &c.bytes_out)),
        grouped(sum(|c| &c.connect_errors)),
        checks(shared, index),
        whereabouts(shared, index),
    )
}

/// `; db.internal at 10.0.0.7:5432, resolving (0 failed lookups)` for a
/// backend written with a host name, or that its lookups fail, since when
/// and why; nothing for one written with an IP address.
fn whereabouts(shared: &SharedFrontend, index: usize) -> String {
    let book = &shared.addresses;
    let Some(lookup) = book.lookup(index) else {
        return String::new();
    };
    let at = match book.get(index) {
        Some(addr) => format!("at {addr}"),
        None => "with no address yet (out of rotation)".to_string(),
    };
    let failures = grouped(book.failures(index));
    let state = match book.failing(index) {
        None => format!("resolving ({failures} failed lookups)"),
        Some(failing) => {
            let since = failing.since.elapsed().as_secs();
            let kept = match book.get(index) {
                Some(_) => ": keeping its last good address",
                None => "",
            };
            format!(
                "NOT RESOLVING for {since}s ({}; {failures} failed lookups){kept}",
                failing.why
            )
        }
    };
    format!("; {} {at}, {state}", lookup.host)
}

/// `UP`, `DOWN`, or `UP (slowstart: 12%)` while it ramps up (the share of
/// its configured weight it gets now); `NO ADDRESS` for a backend whose
/// host name has not resolved yet (out of rotation, whatever its checks).
fn health_of(shared: &SharedFrontend, index: usize) -> String {
    let board = &shared.board;
    if shared.addresses.get(index).is_none() {
        return "NO ADDRESS".to_string();
    }
    if index >= board.len() {
        return "UP".to_string();
    }
    if !board.is_up(index) {
        return "DOWN".to_string();
    }
    let now = Instant::now();
    match board.ramp(index, now) {
        Some(_) => format!("UP (slowstart: {}%)", board.weight_percent_now(index, now)),
        None => "UP".to_string(),
    }
}

/// `, 2 queued (maxqueue 10)` for a backend with a `maxqueue`.
fn queue_of(shared: &SharedFrontend, index: usize) -> String {
    match shared.queues.get(index).and_then(Option::as_ref) {
        Some(queue) => format!(", {} queued (maxqueue {})", queue.open(), max_of(queue)),
        None => String::new(),
    }
}

/// `checks (redis-check): 10 ok, 0 failed, last L7OK in 1.2ms: redis:
/// +PONG`, then the agent's word if it has one; or `not checked`.
fn checks(shared: &SharedFrontend, index: usize) -> String {
    let board = &shared.board;
    let server = &shared.frontend.backends[index];
    let checked = index < board.len() && board.checked(index).is_some();
    let mut text = match checked {
        false => "not checked".to_string(),
        true => {
            let counts = board.check_counts(index);
            let last = board.last_check(index).map_or(String::new(), |last| {
                format!(
                    ", last {} in {:?}: {}",
                    last.verdict.status.code(),
                    last.took,
                    last.verdict.detail
                )
            });
            format!(
                "checks ({}): {} ok, {} failed{last}",
                server.probe.name(),
                grouped(counts.successes),
                grouped(counts.failures)
            )
        }
    };
    if server.agent.is_some() && index < board.len() {
        let agent = board.agent(index);
        let said = match agent.last.is_empty() {
            true => "nothing yet".to_string(),
            false => format!("'{}'", agent.last),
        };
        text.push_str(&format!("; agent: {} (last said {said})", agent.describe()));
    }
    text
}

fn max_of(limit: &Limit) -> String {
    limit
        .max()
        .map_or_else(|| "none".to_string(), |n| grouped(u64::from(n)))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::counters;
    use crate::policy::check::agent::{AgentCheck, AgentReply};
    use crate::policy::check::redis::RedisCheck;
    use crate::policy::check::{Probe, Status, Verdict};
    use crate::policy::descriptors::Opens;
    use crate::settings::cli::Settings;
    use std::net::SocketAddr;

    #[test]
    fn a_dump_has_the_process_every_frontend_and_every_backend() {
        let settings = Settings {
            backends: vec![
                SocketAddr::from(([127, 0, 0, 1], 9001)).into(),
                SocketAddr::from(([127, 0, 0, 1], 9002)).into(),
            ],
            maxconn: Some(50),
            ..Settings::default()
        };
        let mut config = settings.to_config();
        let checked = &mut config.frontends[0].backends[1];
        checked.check = Some(crate::policy::health::Check::default());
        checked.probe = Probe::Redis(RedisCheck::default());
        checked.agent = Some(AgentCheck {
            port: 9003,
            inter: std::time::Duration::from_secs(2),
            send: Vec::new(),
        });
        checked.name = "db2".to_string();
        let shared = super::super::frontend::share(&config.frontends[0], None, 2);
        // Worker 0 and worker 1 each count some: the dump sums them.
        counters::add(&shared.counters[0].connections, 3);
        counters::add(&shared.counters[1].connections, 4);
        counters::add(&shared.counters[1].backends[1].bytes_out, 1500);
        shared.board.passive_failure(1, "refused");
        shared.board.passive_failure(1, "refused");
        shared.board.passive_failure(1, "refused");
        let error = Verdict::failed(Status::L7Sts, "redis: expected +PONG, got \"-ERR\"");
        shared
            .board
            .check_result(1, error, std::time::Duration::from_millis(2));
        shared
            .board
            .agent_result(1, "drain", &AgentReply::parse("drain"));
        let global = Limit::new(Some(114));
        let _held = global.try_acquire();
        let opens = Opens {
            workers: 2,
            listen_addresses: 1,
            ..Opens::default()
        };
        let budget = Budget::new(256, 256, &opens);
        let pipes = Limit::new(Some(28));
        let _pipe = pipes.try_acquire();
        let state = Sources {
            global: &global,
            maxconn: Maxconn::Derived(114),
            budget: &budget,
            pipes: &pipes,
            workers: 2,
            draining: false,
            frontends: &[shared],
            listening: &[Bound {
                frontend: "default".to_string(),
                configured: SocketAddr::from(([127, 0, 0, 1], 8080)),
                bound: SocketAddr::from(([127, 0, 0, 1], 8443)),
            }],
        };
        let lines = state.lines();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(
            lines[0].starts_with(
                "SIGQUIT: state: 1 open of global maxconn 114 (derived from RLIMIT_NOFILE 256"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("1 frontend, 2 workers, 1 of 28 splice pipes open, running"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with(
                "SIGQUIT: frontend default on 127.0.0.1:8443 (roundrobin): 0 open (maxconn 50), 7 \
                 accepted"
            ),
            "{}",
            lines[1]
        );
        assert!(
            lines[2]
                .starts_with("SIGQUIT: backend default/127.0.0.1:9001: UP, 0 open (maxconn none)"),
            "{}",
            lines[2]
        );
        assert!(lines[2].ends_with("not checked"), "{}", lines[2]);
        // Three passive failures (the default fall) mark it down.
        assert!(
            lines[3].starts_with("SIGQUIT: backend default/db2 (127.0.0.1:9002): DOWN"),
            "{}",
            lines[3]
        );
        assert!(lines[3].contains("1,500 bytes out"), "{}", lines[3]);
        assert!(
            lines[3].ends_with(
                "checks (redis-check): 0 ok, 1 failed, last L7STS in 2ms: redis: expected +PONG, \
                 got \"-ERR\"; agent: drain (last said 'drain')"
            ),
            "{}",
            lines[3]
        );
        assert_eq!(lines[4], "SIGQUIT: end of state");
    }

    #[test]
    fn a_backend_written_with_a_host_name_says_where_it_is_and_how_its_lookups_go() {
        let settings = Settings {
            backends: ["db.test:9000", "nowhere.test:9000"]
                .map(|a| a.parse().expect("an address"))
                .to_vec(),
            ..Settings::default()
        };
        let config = settings.to_config();
        let shared = super::super::frontend::share(&config.frontends[0], None, 1);
        let found = SocketAddr::from(([127, 0, 0, 1], 9000));
        shared.addresses.answer(0, Ok(&[found]));
        shared
            .addresses
            .answer(0, Err("temporary failure in name resolution"));
        shared.addresses.answer(1, Err("name or service not known"));
        let lines: Vec<String> = (0..2).map(|i| backend_line(&shared, i)).collect();
        assert!(
            lines[0].starts_with("SIGQUIT: backend default/db.test:9000: UP,"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with(
                "not checked; db.test at 127.0.0.1:9000, NOT RESOLVING for 0s (temporary failure \
                 in name resolution; 1 failed lookups): keeping its last good address"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("SIGQUIT: backend default/nowhere.test:9000: NO ADDRESS,"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with(
                "nowhere.test with no address yet (out of rotation), NOT RESOLVING for 0s (name \
                 or service not known; 1 failed lookups)"
            ),
            "{}",
            lines[1]
        );
        shared.addresses.answer(1, Ok(&[found]));
        assert!(
            backend_line(&shared, 1)
                .ends_with("nowhere.test at 127.0.0.1:9000, resolving (1 failed lookups)"),
        );
    }
}
