//! End to end, N proxies behind one address (docs/CLUSTER.md): three
//! nodes, each with our proxy and a BGP speaker (ExaBGP) announcing the
//! VIP while the node's `/health/web` answers 200, behind a router (BIRD 2)
//! that spreads flows over them by ECMP, all in network namespaces that
//! scripts/cluster.sh builds and removes. The clients are threads of this
//! process that entered the client namespace; every backend is the fixture
//! in `whoami` mode, so each connection says which node and which backend
//! served it (tools::cluster).
//!
//! Needs root, iproute2, bird2, exabgp and curl (and nftables for second
//! chance); where one is missing the test says so and passes without
//! running, as the script's exit status 3 tells. The one test that needs
//! none of it (`balance source` across processes, on loopback) always runs.
//!
//! One cluster at a time (a lock): the namespaces have fixed names
//! (prefix `lbt`, not the demo's `lbc`) and the timers are seconds long.
//! Every wait is bounded, every client socket has timeouts, and the
//! cluster is removed by a guard's `Drop` even when an assertion fails (its
//! logs printed first). The figures each test measures (spread, withdrawal
//! times, connections reset) are printed, for docs/CLUSTER.md.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use backend::fixture::{Fixture, FixtureMode, FixtureOptions};
use nix::sched::{CloneFlags, setns};
use tools::cluster::{self, Failure, Held, NODES, Sample, Served};
use tools::process::child::{Capture, Spawn};

use common::*;

/// The namespaces' prefix: lbt-client, lbt-router, lbt-lb1...
const PREFIX: &str = "lbt";
/// Any client read or write, any connect.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The cluster's timers (scripts/cluster): a speaker checks its node every
/// second, the router's hold time is 3 s, and a proxy takes its backends
/// down after two failed checks half a second apart.
const SPEAKER_INTERVAL: Duration = Duration::from_secs(1);
const HOLD_TIME: Duration = Duration::from_secs(3);
const PROXY_CHECKS: Duration = Duration::from_secs(1);
/// The proxies' shutdown-delay (scripts/cluster/proxy.conf).
const SHUTDOWN_DELAY: Duration = Duration::from_secs(5);

/// One cluster at a time in this process.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster.sh")
}

/// A cluster built by scripts/cluster.sh, removed on drop.
struct Cluster {
    dir: TestDir,
    _one: MutexGuard<'static, ()>,
}

/// What `cluster.sh` printed and how it ended.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Cluster {
    /// Builds a cluster whose router uses `fib` (resilient or plain), or
    /// says why it cannot and returns `None` (the test then passes without
    /// running).
    fn up(test: &str, fib: &str) -> Option<Cluster> {
        let one = ONE_CLUSTER.lock().unwrap_or_else(PoisonError::into_inner);
        let cluster = Cluster {
            dir: TestDir::new(test),
            _one: one,
        };
        let ran = cluster.run(&["up", fib], Duration::from_secs(90));
        match ran.code {
            Some(0) => {
                println!("{test}: {}", ran.stdout.trim());
                Some(cluster)
            }
            Some(3) => {
                println!("{test}: skipped: {}", ran.stderr.trim());
                None
            }
            _ => panic!(
                "cluster.sh up {fib} failed ({:?}):\n{}\n{}",
                ran.code, ran.stdout, ran.stderr
            ),
        }
    }

    /// `cluster.sh ARGS` with this cluster's prefix, state directory and the
    /// binaries under test, for at most `limit`.
    fn run(&self, args: &[&str], limit: Duration) -> Ran {
        let mut words = vec![
            format!("CLUSTER_PREFIX={PREFIX}"),
            format!("CLUSTER_RUN={}", self.dir.path().display()),
            format!("PROXY_BIN={}", proxy_exe().display()),
            format!("BACKEND_BIN={}", backend_exe().display()),
            script().display().to_string(),
        ];
        words.extend(args.iter().map(|a| a.to_string()));
        let finished = Spawn::new("cluster.sh", "env")
            .args(words)
            .stdout(Capture::All)
            .stderr(Capture::All)
            .run(limit)
            .unwrap_or_else(|e| panic!("cluster.sh {args:?}: {e}"));
        Ran {
            code: finished.status.code(),
            stdout: finished.stdout.join("\n"),
            stderr: finished.stderr.join("\n"),
        }
    }

    /// `cluster.sh ARGS`, which must succeed.
    fn must(&self, args: &[&str]) -> String {
        let ran = self.run(args, Duration::from_secs(30));
        assert_eq!(
            ran.code,
            Some(0),
            "cluster.sh {args:?}:\n{}\n{}",
            ran.stdout,
            ran.stderr
        );
        ran.stdout
    }

    /// The nodes the router sends the VIP to now, in its FIB's order.
    fn paths(&self) -> Vec<usize> {
        self.must(&["paths"])
            .split_whitespace()
            .filter_map(|n| n.strip_prefix("lb")?.parse().ok())
            .collect()
    }

    /// Polls the router until `done` holds of its paths (within `limit`):
    /// how long that took from `since`, or `None`.
    fn until_paths(
        &self,
        since: Instant,
        limit: Duration,
        done: impl Fn(&[usize]) -> bool,
    ) -> Option<Duration> {
        while since.elapsed() < limit {
            if done(&self.paths()) {
                return Some(since.elapsed());
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// All of a log of the cluster's state directory.
    fn said(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.file(name)).unwrap_or_default()
    }

    /// The tail of a log of the cluster's state directory.
    fn log(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.file(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if thread::panicking() {
            let status = self.run(&["status"], Duration::from_secs(20));
            eprintln!("cluster status:\n{}\n{}", status.stdout, status.stderr);
            for name in [
                "mirror.log",
                "proxy-lb1.log",
                "proxy-lb2.log",
                "exabgp-lb2.log",
            ] {
                eprintln!("--- {name}\n{}", self.log(name));
            }
        }
        let ran = self.run(&["down"], Duration::from_secs(60));
        if ran.code != Some(0) {
            eprintln!("cluster.sh down: {}\n{}", ran.stdout, ran.stderr);
        }
    }
}

/// Moves the calling thread into the cluster's client namespace: the
/// sockets it opens from now on are the client's.
fn enter_client() {
    let path = format!("/run/netns/{PREFIX}-client");
    let ns = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    setns(&ns, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {path}: {e}"));
}

/// Runs `work` on a thread inside the client namespace.
fn in_client<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    thread::spawn(move || {
        enter_client();
        work()
    })
}

/// `count` probes from the client addresses in turn, over `threads` threads.
fn probes(count: usize, threads: usize) -> Vec<(IpAddr, Result<Served, Failure>)> {
    let sources = cluster::client_addresses();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let sources = sources.clone();
            in_client(move || {
                (t..count)
                    .step_by(threads)
                    .map(|i| {
                        let source = sources[i % sources.len()];
                        (source, cluster::probe(Some(source), CLIENT_TIMEOUT))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    workers
        .into_iter()
        .flat_map(|w| w.join().expect("a probe thread"))
        .collect()
}

/// How many of `served` each node had, by node (1 to 3).
fn per_node(served: impl Iterator<Item = usize>) -> BTreeMap<usize, usize> {
    let mut counts: BTreeMap<usize, usize> = (1..=NODES).map(|n| (n, 0)).collect();
    for node in served {
        *counts.entry(node).or_default() += 1;
    }
    counts
}

// ---------------------------------------------------------------------------
// Held connections, pinged until told to stop
// ---------------------------------------------------------------------------

/// One held connection's story.
#[derive(Debug, Clone)]
struct HeldFate {
    served: Served,
    /// When it failed, and how (`None`: alive at the end).
    failed: Option<(Instant, Failure)>,
    /// It closed cleanly at the end.
    closed: bool,
}

/// `count` connections held open from the client addresses in turn, each
/// pinged every `every` until `stop`, then closed: each one's fate.
struct Pinger {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Vec<HeldFate>>,
    /// Who holds each, known once all are open.
    opened: Vec<Served>,
}

impl Pinger {
    fn start(count: usize, every: Duration) -> Pinger {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let flag = stop.clone();
        let thread = in_client(move || ping_until(count, every, &flag, tx));
        let opened = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the held connections opened");
        Pinger {
            stop,
            thread,
            opened,
        }
    }

    fn per_node(&self) -> BTreeMap<usize, usize> {
        per_node(self.opened.iter().map(|s| s.node))
    }

    fn finish(self) -> Vec<HeldFate> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the pinger thread")
    }
}

fn ping_until(
    count: usize,
    every: Duration,
    stop: &AtomicBool,
    opened: mpsc::Sender<Vec<Served>>,
) -> Vec<HeldFate> {
    let sources = cluster::client_addresses();
    let mut held: Vec<Held> = (0..count)
        .map(|i| {
            Held::open(Some(sources[i % sources.len()]), CLIENT_TIMEOUT)
                .unwrap_or_else(|e| panic!("held connection {i}: {e:?}"))
        })
        .collect();
    let mut fates: Vec<HeldFate> = held
        .iter()
        .map(|h| HeldFate {
            served: h.served,
            failed: None,
            closed: false,
        })
        .collect();
    let _ = opened.send(fates.iter().map(|f| f.served).collect());
    // Bounded: the test stops it within a minute.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        for (conn, fate) in held.iter_mut().zip(fates.iter_mut()) {
            if fate.failed.is_none() {
                if let Err(e) = conn.ping() {
                    fate.failed = Some((Instant::now(), e));
                }
            }
        }
        thread::sleep(every);
    }
    for (conn, fate) in held.into_iter().zip(fates.iter_mut()) {
        if fate.failed.is_none() {
            match conn.close() {
                Ok(()) => fate.closed = true,
                Err(e) => fate.failed = Some((Instant::now(), e)),
            }
        }
    }
    fates
}

/// Client load: `threads` threads probing from the client addresses, `pause`
/// apart each, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<Vec<Sample>>>,
}

impl Load {
    fn start(threads: usize, pause: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let until = Instant::now() + Duration::from_secs(120);
        let threads = (0..threads)
            .map(|t| {
                let stop = stop.clone();
                in_client(move || {
                    let sources = cluster::client_addresses();
                    let mut samples = Vec::new();
                    cluster::load(&sources, t * 7, pause, CLIENT_TIMEOUT, &stop, until, |s| {
                        samples.push(s)
                    });
                    samples
                })
            })
            .collect();
        Load { stop, threads }
    }

    fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        let mut samples: Vec<Sample> = self
            .threads
            .into_iter()
            .flat_map(|t| t.join().expect("a load thread"))
            .collect();
        samples.sort_by_key(|s| s.started);
        samples
    }
}

/// "lb1 30, lb2 29, lb3 31".
fn show(counts: &BTreeMap<usize, usize>) -> String {
    counts
        .iter()
        .map(|(node, n)| format!("lb{node} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failed samples, counted by how they failed, with when each was
/// started relative to `t0`.
fn failures(samples: &[&Sample], t0: Instant) -> Vec<String> {
    samples
        .iter()
        .filter_map(|s| {
            let e = s.outcome.as_ref().err()?;
            let at = s.started.saturating_duration_since(t0);
            let from = s
                .source
                .map_or("any address".to_string(), |ip| ip.to_string());
            Some(format!("{} from {from} at +{at:?}: {e:?}", e.name()))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// balance source across processes (no root needed)
// ---------------------------------------------------------------------------

/// Three proxy processes with the same server list (one of them given it in
/// another order) send each client address to the same backend: Maglev's
/// table depends on the set of servers only, so nodes agree without
/// talking to each other.
#[test]
fn balance_source_picks_the_same_server_in_every_process() {
    let fixture = Fixture::start(
        5,
        FixtureOptions {
            mode: FixtureMode::Whoami,
            ..FixtureOptions::default()
        },
    )
    .expect("five backends");
    let mut orders: Vec<Vec<SocketAddr>> = vec![fixture.addrs().to_vec(); 3];
    orders[2].reverse();
    let proxies: Vec<_> = orders
        .iter()
        .map(|order| {
            let mut args = vec!["--mode".to_string(), "epoll".into(), "--balance".into()];
            args.push("source".into());
            args.extend(["--listen".to_string(), "127.0.0.1:0".into()]);
            for backend in order {
                args.extend(["--backend".to_string(), backend.to_string()]);
            }
            tools::process::child::proxy(proxy_exe(), &args)
                .start()
                .expect("start a proxy")
        })
        .collect();
    let mut chosen: BTreeMap<IpAddr, BTreeSet<SocketAddr>> = BTreeMap::new();
    for n in 2..=61u8 {
        let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, n));
        for proxy in &proxies {
            for _ in 0..2 {
                let backend = whoami_through(source, proxy.addr());
                chosen.entry(source).or_default().insert(backend);
            }
        }
    }
    let split: Vec<_> = chosen.iter().filter(|(_, b)| b.len() > 1).collect();
    assert!(
        split.is_empty(),
        "client addresses sent to different backends by different processes: {split:?}"
    );
    let used: BTreeSet<_> = chosen.values().flatten().collect();
    println!(
        "60 client addresses, 3 processes, 6 connections each: every address on one backend; {} \
         of 5 backends used",
        used.len()
    );
    assert!(
        used.len() >= 4,
        "the addresses spread over the servers: {used:?}"
    );
}

/// Which backend a connection from `source` through `proxy` reached.
fn whoami_through(source: IpAddr, proxy: SocketAddr) -> SocketAddr {
    let stream = runtime::net::connect_std_from(SocketAddr::new(source, 0), proxy, CLIENT_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect from {source}: {e}"));
    stream.set_nonblocking(false).expect("blocking");
    set_timeouts(&stream, CLIENT_TIMEOUT);
    let mut stream: TcpStream = stream;
    let line = read_line(&mut stream).expect("the whoami line");
    let line = String::from_utf8_lossy(&line).into_owned();
    let (backend, _) = cluster::parse_whoami(&line).unwrap_or_else(|| panic!("{line:?}"));
    stream.shutdown(Shutdown::Write).expect("FIN");
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("to EOF");
    assert!(rest.is_empty(), "{rest:?} after the FIN");
    backend
}

// ---------------------------------------------------------------------------
// The cluster (root)
// ---------------------------------------------------------------------------

/// 3,000 connections from 30 client addresses and their varied source
/// ports spread over the three nodes, each within 33 % ± 8 %; and each
/// client address reaches one backend, whichever nodes its connections
/// went through (every node runs `balance source` on the same servers).
#[test]
fn three_thousand_connections_spread_over_three_nodes_and_keep_their_backend() {
    let Some(_cluster) = Cluster::up("spread", "resilient") else {
        return;
    };
    let results = probes(3000, 6);
    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    let served: Vec<(IpAddr, Served)> = results
        .into_iter()
        .filter_map(|(source, r)| Some((source, r.ok()?)))
        .collect();
    let counts = per_node(served.iter().map(|(_, s)| s.node));
    println!("3000 connections per node: {}", show(&counts));
    for (node, n) in &counts {
        let share = *n as f64 / 3000.0;
        assert!(
            (0.25..=0.41).contains(&share),
            "lb{node} took {:.1} % of the connections (33 % ± 8 % wanted): {}",
            share * 100.0,
            show(&counts)
        );
    }
    let mut by_source: BTreeMap<IpAddr, (BTreeSet<SocketAddr>, BTreeSet<usize>)> = BTreeMap::new();
    for (source, s) in &served {
        let entry = by_source.entry(*source).or_default();
        entry.0.insert(s.backend);
        entry.1.insert(s.node);
    }
    for (source, (backends, nodes)) in &by_source {
        assert_eq!(
            backends.len(),
            1,
            "{source} reached {backends:?} through nodes {nodes:?}"
        );
        assert!(nodes.len() >= 2, "{source} went through {nodes:?} only");
    }
    let backends: BTreeSet<_> = by_source.values().flat_map(|(b, _)| b).collect();
    println!(
        "30 client addresses: each on one backend through 2 or 3 nodes; {} backends used",
        backends.len()
    );
    assert!(backends.len() >= 2, "{backends:?}");
}

/// A node whose backends are all unreachable has `/health/web` at 503, its
/// speaker withdraws the VIP, and the router stops sending it flows: within
/// the proxy's checks plus the speaker's interval plus the hold time. New
/// connections then all go to the other two and are served; once the
/// backends are back, so is the node.
#[test]
fn a_node_that_loses_its_backends_is_withdrawn() {
    let Some(cluster) = Cluster::up("lost-backends", "resilient") else {
        return;
    };
    let bound = PROXY_CHECKS + SPEAKER_INTERVAL + HOLD_TIME;
    let t0 = Instant::now();
    cluster.must(&["cut", "lb3"]);
    let took = cluster.until_paths(t0, Duration::from_secs(30), |p| !p.contains(&3));
    let took = took.unwrap_or_else(|| panic!("lb3 still carries the VIP after 30 s"));
    println!("lb3 lost its backends: withdrawn by the router after {took:?} (bound {bound:?})");
    assert!(
        took <= bound,
        "withdrawn after {took:?}, more than {bound:?}"
    );
    let results = probes(300, 3);
    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of 300 failed: {failed:?}",
        failed.len()
    );
    let counts = per_node(
        results
            .iter()
            .filter_map(|(_, r)| Some(r.as_ref().ok()?.node)),
    );
    println!("300 connections after the withdrawal: {}", show(&counts));
    assert_eq!(counts[&3], 0, "{}", show(&counts));

    let t1 = Instant::now();
    cluster.must(&["mend", "lb3"]);
    let back = cluster.until_paths(t1, Duration::from_secs(30), |p| p.contains(&3));
    let back = back.unwrap_or_else(|| panic!("lb3 not back 30 s after its backends"));
    println!("lb3's backends back: announced again after {back:?}");
}

/// A planned removal under load: SIGTERM to lb2's proxy. Its lameduck
/// phase keeps accepting while the speaker withdraws the VIP, so no
/// connection is refused; none that started after the withdrawal fails;
/// with resilient groups the other nodes' held connections are untouched.
/// lb2's own held connections are lost when the router moves their flows
/// (a proxy owns its sockets): counted and reported.
#[test]
fn a_planned_removal_under_load_refuses_nothing() {
    let Some(cluster) = Cluster::up("planned", "resilient") else {
        return;
    };
    let removal = planned_removal(&cluster);
    let lb2 = removal.held_lost_on(2);
    println!(
        "planned removal of lb2: withdrawn after {:?}; {} new connections ({} of them accepted by \
         lb2 in its lameduck phase), {} refused, {} failed (all started before the withdrawal); \
         lb2 held {} connections: {} lost ({}); lb1 and lb3 lost {}",
        removal.withdrawn,
        removal.samples,
        removal.lameduck_served,
        removal.refused,
        removal.failed_before.len(),
        removal.held.get(&2).copied().unwrap_or(0),
        lb2,
        removal.lost.first().map_or("", String::as_str),
        removal.held_lost_elsewhere(2),
    );
    assert_eq!(removal.refused, 0, "{:?}", removal.failed_before);
    assert_eq!(removal.held_lost_elsewhere(2), 0, "{:?}", removal.lost);
    let said = cluster.said("proxy-lb2.log");
    for line in ["SIGTERM: lameduck for 5s", "stopping: no new connections"] {
        assert!(
            said.contains(line),
            "lb2's proxy did not say {line:?}:\n{said}"
        );
    }
}

/// The same planned removal with second chance: lb1 and lb3 pass the
/// packets of flows they never saw (lb2's, once the router moved them) to
/// lb2 over the backend network, so lb2's held connections live on
/// through the withdrawal and its drain, and close cleanly: nothing lost.
#[test]
fn second_chance_keeps_the_removed_nodes_connections() {
    let Some(cluster) = Cluster::up("second-chance", "resilient") else {
        return;
    };
    let nft = cluster.run(&["second-chance", "lb2"], Duration::from_secs(30));
    if nft.code == Some(3) {
        println!("second chance: skipped: {}", nft.stderr.trim());
        return;
    }
    assert_eq!(nft.code, Some(0), "{}\n{}", nft.stdout, nft.stderr);
    let removal = planned_removal(&cluster);
    println!(
        "planned removal of lb2 with second chance: withdrawn after {:?}; {} new connections, {} \
         refused, {} failed; lb2 held {}: {} lost",
        removal.withdrawn,
        removal.samples,
        removal.refused,
        removal.failed_before.len(),
        removal.held.get(&2).copied().unwrap_or(0),
        removal.held_lost_on(2),
    );
    assert_eq!(removal.refused, 0, "{:?}", removal.failed_before);
    assert_eq!(removal.lost, Vec::<String>::new());
    assert!(
        removal.failed_before.is_empty(),
        "{:?}",
        removal.failed_before
    );
}

/// What a planned removal of lb2 did.
struct Removal {
    withdrawn: Duration,
    samples: usize,
    /// New connections lb2 served between its SIGTERM and its withdrawal.
    lameduck_served: usize,
    refused: usize,
    /// Failed new connections, all started before the withdrawal.
    failed_before: Vec<String>,
    /// Held connections per node.
    held: BTreeMap<usize, usize>,
    /// Held connections that failed: "lbN: how, when".
    lost: Vec<String>,
}

impl Removal {
    fn held_lost_on(&self, node: usize) -> usize {
        let prefix = format!("lb{node}:");
        self.lost.iter().filter(|l| l.starts_with(&prefix)).count()
    }

    fn held_lost_elsewhere(&self, node: usize) -> usize {
        self.lost.len() - self.held_lost_on(node)
    }
}

/// SIGTERM to lb2's proxy under load, with 60 held connections; the load
/// runs on past the end of the lameduck phase (the listener closed), and
/// the held connections are closed then, during lb2's drain. Checks that
/// nothing that started after the withdrawal failed.
fn planned_removal(cluster: &Cluster) -> Removal {
    let pinger = Pinger::start(60, Duration::from_millis(250));
    let held = pinger.per_node();
    let load = Load::start(3, Duration::from_millis(10));
    thread::sleep(Duration::from_secs(1));
    let t0 = Instant::now();
    cluster.must(&["stop", "lb2"]);
    let bound = SPEAKER_INTERVAL + HOLD_TIME;
    let withdrawn = cluster.until_paths(t0, Duration::from_secs(30), |p| !p.contains(&2));
    let withdrawn = withdrawn.unwrap_or_else(|| panic!("lb2 still carries the VIP after 30 s"));
    assert!(
        withdrawn <= bound,
        "withdrawn after {withdrawn:?}, more than {bound:?}"
    );
    let at = t0 + withdrawn;
    // Past the lameduck phase: lb2's listener is closed by then.
    thread::sleep((SHUTDOWN_DELAY + Duration::from_secs(2)).saturating_sub(t0.elapsed()));
    let samples = load.finish();
    // Closed now, during lb2's drain: with second chance its held
    // connections close cleanly through lb1 and lb3.
    let fates = pinger.finish();
    let after: Vec<&Sample> = samples.iter().filter(|s| s.started > at).collect();
    let after_failed = failures(&after, t0);
    assert!(
        after_failed.is_empty(),
        "connections started after the withdrawal failed: {after_failed:?}"
    );
    let all: Vec<&Sample> = samples.iter().collect();
    let failed_before = failures(&all, t0);
    let refused = samples
        .iter()
        .filter(|s| s.outcome == Err(Failure::Refused))
        .count();
    let on_lb2 = per_node(
        after
            .iter()
            .filter_map(|s| Some(s.outcome.as_ref().ok()?.node)),
    );
    assert_eq!(
        on_lb2[&2], 0,
        "new connections reached lb2 after its withdrawal"
    );
    let lameduck_served = samples
        .iter()
        .filter(|s| s.started >= t0 && s.started < at)
        .filter(|s| matches!(&s.outcome, Ok(served) if served.node == 2))
        .count();
    let lost = fates
        .iter()
        .filter_map(|f| {
            let (when, how) = f.failed.as_ref()?;
            let at = when.saturating_duration_since(t0);
            Some(format!("lb{}: {} at +{at:?}", f.served.node, how.name()))
        })
        .collect();
    Removal {
        withdrawn,
        samples: samples.len(),
        lameduck_served,
        refused,
        failed_before,
        held,
        lost,
    }
}

/// A node crashes (SIGKILL to its proxy) under held connections: the
/// speaker withdraws it at its next check. With resilient nexthop groups
/// only the crashed node's connections are lost; the other two nodes'
/// live on. New connections that reached the dead node before the
/// withdrawal were refused: counted.
#[test]
fn a_crash_with_resilient_groups_resets_only_the_crashed_nodes_flows() {
    let Some(cluster) = Cluster::up("crash-resilient", "resilient") else {
        return;
    };
    let crash = crash(&cluster, 1);
    println!(
        "crash of lb1 (resilient): withdrawn after {:?}; held {}; lost: lb1 {}, the others {}; \
         new connections refused before the withdrawal: {} of {}",
        crash.withdrawn,
        show(&crash.held),
        crash.lost_on_victim,
        crash.lost_elsewhere,
        crash.refused,
        crash.samples
    );
    assert_eq!(
        crash.lost_on_victim, crash.held[&1],
        "every lb1 connection died with it"
    );
    assert_eq!(crash.lost_elsewhere, 0, "flows of lb2 and lb3 were reset");
}

/// The same crash with plain multipath routes (hash-threshold): the node
/// that dies first in the route's order takes part of a survivor's hash
/// range with it, and those flows move and are reset. Measured, and
/// documented in docs/CLUSTER.md.
#[test]
fn a_crash_with_plain_multipath_also_resets_flows_of_a_survivor() {
    let Some(cluster) = Cluster::up("crash-plain", "plain") else {
        return;
    };
    let first = cluster.paths()[0];
    let crash = crash(&cluster, first);
    println!(
        "crash of lb{first}, first of the route (plain multipath): withdrawn after {:?}; held {}; \
         lost: lb{first} {}, the others {} ({})",
        crash.withdrawn,
        show(&crash.held),
        crash.lost_on_victim,
        crash.lost_elsewhere,
        crash.lost.join(", ")
    );
    assert_eq!(crash.lost_on_victim, crash.held[&first]);
    assert!(
        crash.lost_elsewhere > 0,
        "hash-threshold moves part of a survivor's range when the first nexthop goes"
    );
}

/// What a crash did.
struct Crash {
    withdrawn: Duration,
    held: BTreeMap<usize, usize>,
    lost_on_victim: usize,
    lost_elsewhere: usize,
    /// The lost connections per node.
    lost: Vec<String>,
    refused: usize,
    samples: usize,
}

/// SIGKILL to node `victim`'s proxy with 90 held connections and a light
/// load; waits for the withdrawal, pings everything once more, counts.
fn crash(cluster: &Cluster, victim: usize) -> Crash {
    let pinger = Pinger::start(90, Duration::from_millis(250));
    let held = pinger.per_node();
    let load = Load::start(2, Duration::from_millis(20));
    thread::sleep(Duration::from_secs(1));
    let t0 = Instant::now();
    let node = format!("lb{victim}");
    cluster.must(&["kill", &node]);
    let bound = SPEAKER_INTERVAL + HOLD_TIME;
    let withdrawn = cluster.until_paths(t0, Duration::from_secs(30), |p| !p.contains(&victim));
    let withdrawn = withdrawn.unwrap_or_else(|| panic!("{node} still carries the VIP after 30 s"));
    assert!(
        withdrawn <= bound,
        "withdrawn after {withdrawn:?}, more than {bound:?}"
    );
    // Every held connection pinged at least twice after the route changed.
    thread::sleep(Duration::from_secs(1));
    let samples = load.finish();
    let fates = pinger.finish();
    let mut lost = per_node(std::iter::empty());
    for fate in fates.iter().filter(|f| f.failed.is_some()) {
        *lost.entry(fate.served.node).or_default() += 1;
    }
    let at = t0 + withdrawn;
    let after: Vec<&Sample> = samples.iter().filter(|s| s.started > at).collect();
    assert_eq!(
        failures(&after, t0),
        Vec::<String>::new(),
        "after the withdrawal"
    );
    Crash {
        withdrawn,
        held,
        lost_on_victim: lost[&victim],
        lost_elsewhere: lost
            .iter()
            .filter(|(n, _)| **n != victim)
            .map(|(_, c)| c)
            .sum(),
        lost: lost.iter().map(|(n, c)| format!("lb{n} {c}")).collect(),
        refused: samples
            .iter()
            .filter(|s| s.outcome == Err(Failure::Refused))
            .count(),
        samples: samples.len(),
    }
}
