//! The health-check thread: for every backend configured with `check`, a
//! check every `inter`, its verdict reported to the frontend's
//! [`HealthBoard`], which decides UP and DOWN (`policy/health.rs`); and for
//! every backend with an `agent-check`, its agent asked every
//! `agent-inter`, its answer applied to the same board.
//!
//! One thread ("health-check") with a runtime of its own runs one task per
//! checked server and one per agent, whatever the number of event loops,
//! so a backend is checked once per `inter`, not once per worker. What one
//! check does on the wire (connect, PROXY header, the dialogue of its
//! `option`, the timeout, the close) is [`probe`]. Each check goes where
//! the server is at that moment (its frontend's [`AddressBook`]): a server
//! written with a host name is checked at its name's last good answer, and
//! one without an address yet fails its checks until it gets one.

use std::io;
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use runtime::time;

use super::probe::{self, Target};
use crate::conn::proxy_protocol::Version;
use crate::policy::address::AddressBook;
use crate::policy::check::agent::{AgentCheck, AgentReply};
use crate::policy::check::{Probe, Status, Verdict};
use crate::policy::health::{Check, HealthBoard};
use crate::settings::config::BackendServer;

/// The shortest interval between two checks of one server, whatever `inter`
/// says: a timer of zero would spin.
const MIN_INTER: Duration = Duration::from_millis(1);

/// A frontend as the checker takes it: its board, where its servers are,
/// and their configuration, by the board's indexes.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The board the verdicts go to.
    pub board: Arc<HealthBoard>,
    /// Where each server is now.
    pub addresses: Arc<AddressBook>,
    /// Its `backend` lines, in the board's order.
    pub servers: Vec<BackendServer>,
}

/// What one task checks: a server's regular check, or its agent.
#[derive(Debug)]
enum Duty {
    Check {
        check: Check,
        probe: Probe,
    },
    Agent {
        agent: AgentCheck,
        timeout: Duration,
    },
}

/// One task's work, as the checker thread sees it.
#[derive(Debug)]
struct Job {
    /// Weak: the checks of a board end when nothing else holds it.
    board: Weak<HealthBoard>,
    /// Where the server is, read before each check (it holds nothing
    /// else: the job still ends with its board).
    addresses: Arc<AddressBook>,
    index: usize,
    /// The PROXY header its checks start with, if any.
    send_proxy: Option<Version>,
    duty: Duty,
}

impl Job {
    fn inter(&self) -> Duration {
        match &self.duty {
            Duty::Check { check, .. } => check.inter,
            Duty::Agent { agent, .. } => agent.inter,
        }
    }
}

/// The jobs of every checked server and every agent of `frontends`.
fn jobs(frontends: &[Checked]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for frontend in frontends {
        let servers = frontend.servers.iter().take(frontend.board.len());
        for (index, server) in servers.enumerate() {
            let board = Arc::downgrade(&frontend.board);
            let addresses = frontend.addresses.clone();
            if let Some(check) = frontend.board.checked(index) {
                let probe = server.probe.clone();
                let duty = Duty::Check { check, probe };
                jobs.push(Job {
                    board: board.clone(),
                    addresses: addresses.clone(),
                    index,
                    send_proxy: server.send_proxy,
                    duty,
                });
            }
            if let Some(agent) = &server.agent {
                let timeout = server.check.map_or(agent.inter, |c| c.timeout);
                let duty = Duty::Agent {
                    agent: agent.clone(),
                    timeout,
                };
                jobs.push(Job {
                    board,
                    addresses,
                    index,
                    // The agent is another service: no PROXY header for it.
                    send_proxy: None,
                    duty,
                });
            }
        }
    }
    jobs
}

/// Runs every active check and agent of `frontends` on a thread of its own
/// ("health-check") with its own runtime: one task each. Returns `None`
/// (and starts nothing) when no server anywhere has `check` or an agent.
///
/// The checks run as long as some other owner keeps their board alive; once
/// every board is dropped, the thread ends within one `inter`.
pub fn spawn_checker(frontends: Vec<Checked>) -> io::Result<Option<JoinHandle<()>>> {
    let jobs = jobs(&frontends);
    drop(frontends); // the jobs hold the boards weakly, and only that
    if jobs.is_empty() {
        return Ok(None);
    }
    // A runtime cannot move between threads, so the thread builds its own
    // and tells us whether that worked.
    let (started, start_result) = std::sync::mpsc::sync_channel(1);
    let handle = thread::Builder::new()
        .name("health-check".into())
        .spawn(move || match runtime::Runtime::new() {
            Ok(rt) => {
                let _ = started.send(Ok(()));
                rt.block_on(run_checks(jobs));
            }
            Err(e) => {
                let _ = started.send(Err(e));
            }
        })?;
    match start_result.recv() {
        Ok(Ok(())) => Ok(Some(handle)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("the checker died while starting")),
    }
}

/// Starts one task per job, the k-th of n after k/n of its `inter`, so that
/// the checks of many servers do not all fire at once.
async fn run_checks(jobs: Vec<Job>) {
    let n = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
    let tasks: Vec<_> = jobs
        .into_iter()
        .zip(0u32..)
        .map(|(job, k)| {
            let offset = job.inter() / n * k; // at most `inter`: no overflow
            runtime::spawn(check_forever(job, offset))
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

/// Checks one server (or asks its agent) every `inter`, the first time
/// after `offset`, while its board lives and its server is not in maint. A check longer than `inter`
/// delays the next, never overlaps it.
async fn check_forever(job: Job, offset: Duration) {
    let period = job.inter().max(MIN_INTER);
    let mut ticks = time::interval_at(Instant::now() + offset, period);
    loop {
        ticks.tick().await;
        // In maint (the operator's `set server ... state maint`), neither
        // its check nor its agent is asked; `ready` or `drain` resumes them.
        match job.board.upgrade() {
            Some(board) if !board.admin().checks_on(job.index) => continue,
            Some(_) => {}
            None => return,
        }
        let started = Instant::now();
        let at = job.addresses.get(job.index);
        let target = at.map(|addr| Target {
            addr,
            send_proxy: job.send_proxy,
        });
        let verdict = match (&job.duty, target) {
            (_, None) => Verdict::failed(Status::L4Con, "no address: its name has not resolved"),
            (Duty::Check { check, probe }, Some(target)) => {
                let mut dialogue = probe.start(target.addr);
                probe::run(&mut *dialogue, target, check.timeout).await
            }
            (Duty::Agent { agent, timeout }, Some(target)) => {
                probe::run(&mut *agent.start(), target, *timeout).await
            }
        };
        let Some(board) = job.board.upgrade() else {
            return;
        };
        match &job.duty {
            Duty::Check { .. } => board.check_result(job.index, verdict, started.elapsed()),
            Duty::Agent { .. } if verdict.status.is_ok() => {
                let reply = AgentReply::parse(&verdict.detail);
                board.agent_result(job.index, &verdict.detail, &reply);
            }
            // An agent out of reach changes nothing (agent.rs).
            Duty::Agent { .. } => crate::debug!(
                "agent of backend {}: {verdict}; its last word stands",
                at.map_or("(no address)".to_string(), |a| a.to_string())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::address::Place;
    use std::net::{SocketAddr, TcpListener};

    fn check(fall: u32, rise: u32) -> Option<Check> {
        Some(Check {
            inter: Duration::from_millis(50),
            fall,
            rise,
            timeout: Duration::from_millis(500),
        })
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A frontend of one server at `at` with `check`, as the checker takes it.
    fn checked(at: SocketAddr, check: Option<Check>) -> (Arc<HealthBoard>, Checked) {
        let board = Arc::new(HealthBoard::new("web", &[(at, check)]));
        let mut server = BackendServer::new(at);
        server.check = check;
        let place = Place {
            label: server.label(),
            start: Some(at),
            lookup: None,
        };
        let addresses = Arc::new(AddressBook::new("web", [place]));
        let servers = vec![server];
        let checked = Checked {
            board: board.clone(),
            addresses,
            servers,
        };
        (board, checked)
    }

    #[test]
    fn no_checked_server_starts_no_thread() {
        let (_web, web) = checked(addr(9001), None);
        let (_db, db) = checked(addr(9003), None);
        assert!(spawn_checker(vec![web, db]).expect("spawn").is_none());
        assert!(spawn_checker(Vec::new()).expect("spawn").is_none());
    }

    /// Polls `condition` every 10 ms until it holds, failing after 5 s.
    fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !condition() {
            assert!(Instant::now() < deadline, "not within 5s: {what}");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn the_checker_takes_a_dead_server_down_and_brings_it_back() {
        let listener = TcpListener::bind(addr(0)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let at = listener.local_addr().expect("local addr");
        let (b, frontend) = checked(at, check(2, 2));
        let checker = spawn_checker(vec![frontend]).expect("spawn");
        let checker = checker.expect("a checked server");

        wait_for("a check connects", || listener.accept().is_ok());
        assert!(b.is_up(0));
        drop(listener);
        wait_for("DOWN once the listener is closed", || !b.is_up(0));
        assert_eq!(b.generation(), 1);
        let last = b.last_check(0).expect("checks ran");
        assert_eq!(last.verdict.detail, "connection refused");

        // The same port again (std sets SO_REUSEADDR). Retried, in case a
        // connection of another test was given it as its local port.
        let mut listener = None;
        wait_for("listening again", || {
            listener = TcpListener::bind(at).ok();
            listener.is_some()
        });
        wait_for("UP once listening again", || b.is_up(0));
        assert_eq!(b.generation(), 2);

        drop(b); // nothing else holds the board: the checker ends
        wait_for("the checker thread ends", || checker.is_finished());
        assert!(checker.join().is_ok());
    }

    #[test]
    fn an_agent_steers_its_server_from_its_own_port() {
        use std::io::Write;
        let agent = TcpListener::bind(addr(0)).expect("bind the agent");
        let server = addr(9005); // never connected: only the agent is asked
        let (b, mut frontend) = checked(server, None);
        frontend.servers[0].agent = Some(AgentCheck {
            port: agent.local_addr().expect("agent addr").port(),
            inter: Duration::from_millis(20),
            send: Vec::new(),
        });
        let checker = spawn_checker(vec![frontend])
            .expect("spawn")
            .expect("an agent");
        for line in ["drain\n", "up 50%\n", "ready\n", "down # disk full\n"] {
            let (mut stream, _) = agent.accept().expect("the agent is asked");
            stream.write_all(line.as_bytes()).expect("answer");
        }
        // Its last word itself: a server out of rotation could be another
        // cause's doing, seen before the agent's last answers were read.
        wait_for("the agent's last word", || {
            b.agent(0).last == "down # disk full"
        });
        assert!(!b.is_up(0));
        assert_eq!(b.weight_percent(0), 50);
        drop(b);
        drop(agent);
        wait_for("the checker thread ends", || checker.is_finished());
    }
}
