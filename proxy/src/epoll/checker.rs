//! The health-check thread: for every backend configured with `check`, a
//! TCP connect every `inter`, its result reported to the frontend's
//! [`HealthBoard`], which decides UP and DOWN (`policy/health.rs`).
//!
//! One thread ("health-check") with a runtime of its own runs one task per
//! checked server, whatever the number of event loops, so a backend is
//! checked once per `inter`, not once per worker. Connected is a success;
//! refused, unreachable or no answer within `timeout` is a failure.
//!
//! ## The check itself, and TIME_WAIT
//!
//! The check connects and closes at once. The side that closes a TCP
//! connection first keeps it in TIME_WAIT for 60 seconds on Linux, holding
//! a local port: one check every 2 s would keep 30 such sockets per server
//! on the proxy. So the checker closes with a reset (SO_LINGER 0), which
//! skips TIME_WAIT, as HAProxy does for its checks.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use runtime::net::TcpStream;
use runtime::time;

use crate::policy::health::{Check, HealthBoard, reason};

/// The shortest interval between two checks of one server, whatever `inter`
/// says: a timer of zero would spin.
const MIN_INTER: Duration = Duration::from_millis(1);

/// One check: connect to `addr` within `limit`, then close with a reset
/// (module docs). `Err` holds the reason, for the log.
pub async fn check_once(addr: SocketAddr, limit: Duration) -> Result<(), String> {
    match time::timeout(limit, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => {
            if let Err(e) = stream.set_reset_on_close() {
                // The check still succeeded; the socket will just linger.
                crate::debug!("health check of {addr}: SO_LINGER: {}", reason(&e));
            }
            Ok(())
        }
        Ok(Err(e)) => Err(reason(&e)),
        Err(time::Elapsed) => Err(format!("no answer within {limit:?}")),
    }
}

/// One checked server, as the checker thread sees it.
struct Job {
    /// Weak: the checks of a board end when nothing else holds it.
    board: Weak<HealthBoard>,
    index: usize,
    addr: SocketAddr,
    check: Check,
}

/// Runs every active check of every board on a thread of its own
/// ("health-check") with its own runtime: one task per checked server.
/// Returns `None` (and starts nothing) when no server anywhere has `check`.
///
/// The checks run as long as some other owner keeps their board alive; once
/// every board is dropped, the thread ends within one `inter`.
pub fn spawn_checker(boards: Vec<Arc<HealthBoard>>) -> io::Result<Option<JoinHandle<()>>> {
    let mut jobs = Vec::new();
    for board in &boards {
        for index in 0..board.len() {
            if let Some(check) = board.checked(index) {
                jobs.push(Job {
                    board: Arc::downgrade(board),
                    index,
                    addr: board.addr(index),
                    check,
                });
            }
        }
    }
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
            let offset = job.check.inter / n * k; // at most `inter`: no overflow
            runtime::spawn(check_forever(job, offset))
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

/// Checks one server every `inter`, the first time after `offset`, while its
/// board lives. A check longer than `inter` delays the next, never overlaps it.
async fn check_forever(job: Job, offset: Duration) {
    let period = job.check.inter.max(MIN_INTER);
    let mut ticks = time::interval_at(Instant::now() + offset, period);
    loop {
        ticks.tick().await;
        let result = check_once(job.addr, job.check.timeout).await;
        match job.board.upgrade() {
            Some(board) => board.check_result(job.index, result),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

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

    #[test]
    fn no_checked_server_starts_no_thread() {
        let web = Arc::new(HealthBoard::new("web", &[(addr(9001), None)]));
        let db = Arc::new(HealthBoard::new("db", &[(addr(9003), None)]));
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
        let b = Arc::new(HealthBoard::new("web", &[(at, check(2, 2))]));
        let checker = spawn_checker(vec![b.clone()]).expect("spawn");
        let checker = checker.expect("a checked server");

        wait_for("a check connects", || listener.accept().is_ok());
        assert!(b.is_up(0));
        drop(listener);
        wait_for("DOWN once the listener is closed", || !b.is_up(0));
        assert_eq!(b.generation(), 1);

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
    fn a_check_of_a_listener_succeeds_and_of_a_closed_port_fails() {
        let listener = TcpListener::bind(addr(0)).expect("bind");
        let at = listener.local_addr().expect("local addr");
        let rt = runtime::Runtime::new().expect("runtime");
        let limit = Duration::from_secs(2);
        assert_eq!(rt.block_on(check_once(at, limit)), Ok(()));
        drop(listener);
        let refused = Err("connection refused".to_string());
        assert_eq!(rt.block_on(check_once(at, limit)), refused);
    }

    /// A connect that gets no answer: on Linux, a listener whose accept
    /// queue is full drops new SYNs, and the client waits. Fill a backlog
    /// of 0 with connects until one times out, then check.
    #[test]
    fn a_check_without_answer_ends_at_its_timeout() {
        let options = runtime::net::ListenOptions {
            backlog: 0,
            ..Default::default()
        };
        let listener = runtime::net::bind_std(addr(0), &options).expect("bind");
        let at = listener.local_addr().expect("local addr");
        let mut queued = Vec::new();
        let full = (0..8).any(|_| {
            let connect = std::net::TcpStream::connect_timeout(&at, Duration::from_millis(200));
            connect.map(|stream| queued.push(stream)).is_err()
        });
        if !full {
            eprintln!("skipped: a backlog of 0 took 8 connections without filling");
            return;
        }
        let (limit, started) = (Duration::from_millis(300), Instant::now());
        let result = runtime::Runtime::new()
            .expect("runtime")
            .block_on(check_once(at, limit));
        let took = started.elapsed();
        assert_eq!(result, Err("no answer within 300ms".to_string()));
        assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
    }
}
