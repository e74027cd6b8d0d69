//! `cluster_client`: the client of scripts/cluster.sh's demo, run inside
//! the client namespace (`ip netns exec lbc-client cluster_client ...`).
//!
//! ```text
//! cluster_client --spread 3000            # connections through the VIP: per node, per backend
//! cluster_client --watch 10s --hold 60    # a timeline, second by second, while the script
//!                                         # removes or crashes a node
//! ```
//!
//! `--spread` says how the router's ECMP spread the connections over the
//! nodes, and whether each client address kept one backend whichever node
//! served it (`balance source` on every node). `--watch` holds connections
//! open and pings them, opens new ones all the time, and prints each second
//! what became of both per node: the demo's view of a planned removal and
//! of a crash. The work is [`crate::cluster`]'s; this file is the program.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{self, Failure, Held, NODES, Sample, Served};
use proxy::settings::flags::{self, Flag, Read, UsageError};

/// Any one connect, read or write.
const TIMEOUT: Duration = Duration::from_secs(3);
/// Threads of new connections during a watch, and the pause of each.
const LOAD_THREADS: usize = 2;
const LOAD_PAUSE: Duration = Duration::from_millis(10);
/// Between two pings of a held connection.
const PING_EVERY: Duration = Duration::from_millis(250);

/// The `cluster_client` binary: 0 (done, or help), 1 (a run failed), 2
/// (bad command line).
pub fn main() -> ExitCode {
    let args = flags::program_args();
    let mut options = Options::default();
    let what = match flags::read("cluster_client", &args, FLAGS, &mut options) {
        Ok(Read::Flags(_)) => what_to_run(&options),
        Ok(Read::Help | Read::Version) => {
            print!("{}", help());
            return ExitCode::SUCCESS;
        }
        Err(e) => Err(e),
    };
    let run = match what {
        Ok(What::Spread(n)) => spread(n),
        Ok(What::Watch(duration)) => watch(duration, options.hold),
        Err(e) => {
            eprintln!("cluster_client: {e}");
            return ExitCode::from(2);
        }
    };
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster_client: {e}");
            ExitCode::from(1)
        }
    }
}

/// The one thing the command line asks for.
enum What {
    Spread(usize),
    Watch(Duration),
}

fn what_to_run(options: &Options) -> Result<What, UsageError> {
    match (options.spread, options.watch) {
        (Some(n), None) => Ok(What::Spread(n)),
        (None, Some(duration)) => Ok(What::Watch(duration)),
        _ => Err(UsageError::new(
            "cluster_client",
            "give one of --spread N and --watch DUR",
        )),
    }
}

fn help() -> String {
    format!(
        "\
cluster_client: connections through the VIP of scripts/cluster.sh, run in its client namespace

USAGE
    cluster_client --spread N
    cluster_client --watch DUR [--hold K]

OPTIONS
{}",
        flags::help(FLAGS)
    )
}

#[derive(Debug, Default)]
struct Options {
    spread: Option<usize>,
    watch: Option<Duration>,
    hold: usize,
}

const FLAGS: &[Flag<Options>] = &[
    Flag {
        name: "--spread",
        arg: "N",
        needs: "a number of connections",
        help: "N connections from the 30 client addresses in turn: per node, per backend",
        set: |o, v| {
            o.spread = Some(number(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--watch",
        arg: "DUR",
        needs: "a duration, like 10s",
        help: "a timeline for DUR: new connections and held ones, per node, each second",
        set: |o, v| {
            o.watch = Some(proxy::settings::words::parse_duration(v)?);
            Ok(())
        },
    },
    Flag {
        name: "--hold",
        arg: "K",
        needs: "a number of connections",
        help: "with --watch: K connections held open and pinged  [default: 0]",
        set: |o, v| {
            o.hold = number(v)?;
            Ok(())
        },
    },
];

fn number(v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!("'{v}' is not a whole number"))
}

// ---- --spread ----------------------------------------------------------------

fn spread(count: usize) -> Result<(), String> {
    let sources = cluster::client_addresses();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let sources = sources.clone();
            thread::spawn(move || {
                (t..count)
                    .step_by(4)
                    .map(|i| {
                        let source = sources[i % sources.len()];
                        (source, cluster::probe(Some(source), TIMEOUT))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<(IpAddr, Result<Served, Failure>)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap_or_default())
        .collect();
    print_spread(&results);
    Ok(())
}

fn print_spread(results: &[(IpAddr, Result<Served, Failure>)]) {
    let served: Vec<(IpAddr, Served)> = results
        .iter()
        .filter_map(|(source, r)| Some((*source, *r.as_ref().ok()?)))
        .collect();
    let failed = results.len() - served.len();
    println!(
        "{} connections from {} client addresses, their source ports varied by the kernel: {} \
         served, {failed} failed",
        results.len(),
        cluster::CLIENT_ADDRESSES,
        served.len()
    );
    let mut per_node = BTreeMap::new();
    let mut per_backend: BTreeMap<SocketAddr, usize> = BTreeMap::new();
    let mut by_source: BTreeMap<IpAddr, (BTreeSet<SocketAddr>, BTreeSet<usize>)> = BTreeMap::new();
    for (source, s) in &served {
        *per_node.entry(s.node).or_insert(0usize) += 1;
        *per_backend.entry(s.backend).or_default() += 1;
        let entry = by_source.entry(*source).or_default();
        entry.0.insert(s.backend);
        entry.1.insert(s.node);
    }
    for (node, n) in &per_node {
        let share = *n as f64 * 100.0 / served.len().max(1) as f64;
        println!("  lb{node}: {n:5} connections ({share:.1} %)");
    }
    let one_backend = by_source.values().filter(|(b, _)| b.len() == 1).count();
    let many_nodes = by_source.values().filter(|(_, n)| n.len() > 1).count();
    println!(
        "  balance source: {one_backend} of {} client addresses kept one backend, {many_nodes} of \
         them through more than one node; per backend: {}",
        by_source.len(),
        per_backend
            .iter()
            .map(|(b, n)| format!("{b} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

// ---- --watch -----------------------------------------------------------------

/// What happened in one second of a watch.
#[derive(Debug, Default, Clone)]
struct Second {
    /// New connections served, by node.
    served: [usize; NODES + 1],
    refused: usize,
    reset: usize,
    other: usize,
    /// Held connections lost this second, by node.
    lost: [usize; NODES + 1],
}

fn watch(duration: Duration, hold: usize) -> Result<(), String> {
    let sources = cluster::client_addresses();
    let mut held = Vec::new();
    for i in 0..hold {
        let conn = Held::open(Some(sources[i % sources.len()]), TIMEOUT)
            .map_err(|e| format!("held connection {i}: {e:?}"))?;
        held.push(conn);
    }
    let mut per_node = [0usize; NODES + 1];
    for conn in &held {
        per_node[conn.served.node] += 1;
    }
    println!(
        "holding {hold} connections (lb1 {}, lb2 {}, lb3 {}), pinged every {PING_EVERY:?}; new \
         connections from {LOAD_THREADS} threads, for {duration:?}",
        per_node[1], per_node[2], per_node[3]
    );
    println!(
        "   time | new served by  lb1  lb2  lb3 | refused reset other | held lost  lb1  lb2  lb3"
    );
    let start = Instant::now();
    let until = start + duration;
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let loaders = start_load(&sources, &stop, &samples, until);
    let lost = ping_and_print(held, start, until, &samples);
    stop.store(true, Ordering::SeqCst);
    for loader in loaders {
        let _ = loader.join();
    }
    print_summary(
        &lost,
        &samples.lock().unwrap_or_else(PoisonError::into_inner),
    );
    Ok(())
}

fn start_load(
    sources: &[IpAddr],
    stop: &Arc<AtomicBool>,
    samples: &Arc<Mutex<Vec<Sample>>>,
    until: Instant,
) -> Vec<thread::JoinHandle<()>> {
    (0..LOAD_THREADS)
        .map(|t| {
            let (sources, stop, samples) = (sources.to_vec(), stop.clone(), samples.clone());
            thread::spawn(move || {
                cluster::load(&sources, t * 11, LOAD_PAUSE, TIMEOUT, &stop, until, |s| {
                    samples
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(s);
                });
            })
        })
        .collect()
}

/// Pings the held connections until `until`, printing a line each second;
/// returns the lost ones: when, on which node, how.
fn ping_and_print(
    mut held: Vec<Held>,
    start: Instant,
    until: Instant,
    samples: &Mutex<Vec<Sample>>,
) -> Vec<(Duration, usize, Failure)> {
    let mut alive = vec![true; held.len()];
    let mut lost = Vec::new();
    let mut second = 1;
    while Instant::now() < until {
        for (conn, alive) in held.iter_mut().zip(alive.iter_mut()) {
            if *alive {
                if let Err(e) = conn.ping() {
                    *alive = false;
                    lost.push((start.elapsed(), conn.served.node, e));
                }
            }
        }
        if start.elapsed() >= Duration::from_secs(second) {
            let line = tally(
                second,
                start,
                &samples.lock().unwrap_or_else(PoisonError::into_inner),
                &lost,
            );
            print_second(second, &line);
            second += 1;
        }
        thread::sleep(PING_EVERY);
    }
    for (conn, alive) in held.into_iter().zip(alive) {
        let node = conn.served.node;
        if alive {
            if let Err(e) = conn.close() {
                lost.push((start.elapsed(), node, e));
            }
        }
    }
    lost
}

/// What second `second` (the one ending `second` seconds after `start`) saw.
fn tally(
    second: u64,
    start: Instant,
    samples: &[Sample],
    lost: &[(Duration, usize, Failure)],
) -> Second {
    let from = Duration::from_secs(second - 1);
    let to = Duration::from_secs(second);
    let within = |at: Duration| at >= from && at < to;
    let mut line = Second::default();
    for s in samples
        .iter()
        .filter(|s| within(s.started.saturating_duration_since(start)))
    {
        match &s.outcome {
            Ok(served) => line.served[served.node] += 1,
            Err(Failure::Refused) => line.refused += 1,
            Err(Failure::Reset) => line.reset += 1,
            Err(_) => line.other += 1,
        }
    }
    for (_, node, _) in lost.iter().filter(|(at, ..)| within(*at)) {
        line.lost[*node] += 1;
    }
    line
}

fn print_second(second: u64, s: &Second) {
    println!(
        "  +{second:3}s |              {:4} {:4} {:4} | {:7} {:5} {:5} |           {:4} {:4} {:4}",
        s.served[1],
        s.served[2],
        s.served[3],
        s.refused,
        s.reset,
        s.other,
        s.lost[1],
        s.lost[2],
        s.lost[3]
    );
}

fn print_summary(lost: &[(Duration, usize, Failure)], samples: &[Sample]) {
    let failed: Vec<&Sample> = samples.iter().filter(|s| s.outcome.is_err()).collect();
    let refused = failed
        .iter()
        .filter(|s| s.outcome == Err(Failure::Refused))
        .count();
    println!(
        "new connections: {} in all, {} refused, {} failed otherwise",
        samples.len(),
        refused,
        failed.len() - refused
    );
    let mut by_node: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, node, _) in lost {
        *by_node.entry(*node).or_default() += 1;
    }
    let kinds: BTreeSet<&str> = lost.iter().map(|(.., e)| e.name()).collect();
    if lost.is_empty() {
        println!("held connections lost: 0");
        return;
    }
    println!(
        "held connections lost: {} ({}){}",
        lost.len(),
        by_node
            .iter()
            .map(|(n, c)| format!("lb{n} {c}"))
            .collect::<Vec<_>>()
            .join(", "),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(", by {}", kinds.into_iter().collect::<Vec<_>>().join(", "))
        }
    );
}
