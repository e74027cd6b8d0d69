//! How big each measurement of a run is: [`Sizes::full`] for the report,
//! [`Sizes::quick`] for the end-to-end check of the harness.
//!
//! Why a file of its own: the workloads (workloads.rs) run at these sizes,
//! and the results (results.rs) record which sizes a run used. Here, with
//! nothing of the harness imported, both can take it without reaching each
//! other, and the imports run one way: workloads → measure → results →
//! sizes. (Which subjects a workload measures at these sizes is the
//! workloads' business: those methods are in workloads.rs.)

use std::time::Duration;

/// How big each measurement is. [`Sizes::full`] is what the report is made
/// of; [`Sizes::quick`] checks the harness end to end in seconds.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// The quick variant.
    pub quick: bool,
    /// Workload A: the backends' delay per request.
    pub delay: Duration,
    /// A at the seed's scale: requests per run.
    pub seed_requests: usize,
    /// A at the seed's scale: concurrent clients (the seed does not say).
    pub seed_clients: usize,
    /// A: pool sizes.
    pub pool_threads: Vec<usize>,
    /// A: concurrency levels of the timed runs.
    pub clients: Vec<usize>,
    /// How long each timed run lasts.
    pub run_for: Duration,
    /// A timed row whose requests would each queue longer than this behind
    /// the others (a pool of 1 thread at 1,000 clients: 50 s) is skipped:
    /// its bound says all there is to say, in a fraction of the time.
    pub max_queue_wait: Duration,
    /// The most one request may take before it counts as an error.
    pub timeout: Duration,
    /// Epoll worker counts.
    pub epoll_workers: Vec<usize>,
    /// Peer thread (HAProxy) or worker (nginx) counts.
    pub peer_threads: Vec<usize>,
    /// Workload B: CPU per request.
    pub cpu_per_request: Duration,
    /// Workload B: backends, each a fixture on its own thread.
    pub cpu_backends: usize,
    /// Workload B: concurrent clients.
    pub cpu_clients: usize,
    /// Workload B: pool sizes.
    pub cpu_pool_threads: Vec<usize>,
    /// Workload C: concurrent clients.
    pub cost_clients: usize,
    /// Workload C: the most connections a connection-rate run makes (see
    /// [`Sizes::fit_ephemeral_ports`]).
    pub connect_requests: usize,
    /// Workload C: requests per keep-alive connection.
    pub keep_alive_per_connection: usize,
    /// Workload C: bytes a bulk run sends in total (split over its streams),
    /// and gets back.
    pub bulk_bytes: u64,
    /// Workload C: streams of the "several streams" bulk run.
    pub bulk_streams: usize,
    /// Workload C: idle connections held open.
    pub idle: usize,
    /// Workload C's rates (connections/s, echo keep-alive req/s, wrk's HTTP
    /// req/s) and its two bulk rows (MiB/s): runs of each subject,
    /// interleaved, of which the row keeps the median (repeat.rs). One
    /// 3-second run varies by some ±15-25% from the next on a shared
    /// machine, and splice's saving is judged on the bulk rows; idle memory is
    /// measured once (it does not drift like a rate).
    pub repetitions: usize,
    /// The census: requests each subject serves untraced before strace
    /// attaches, so the count starts on a warm process (its buffers,
    /// pools and backend sockets past their first use).
    pub census_warmup: usize,
    /// The census: new connections counted (capped like
    /// [`Sizes::connect_requests`]).
    pub census_connections: usize,
    /// The census: requests per keep-alive connection. Longer-lived than
    /// workload C's, so that a request's count is the steady state of a
    /// keep-alive connection (as wrk's connections, which last the whole
    /// run) with a small share of its connection's open and close.
    pub census_per_connection: usize,
    /// The census: keep-alive requests counted; a multiple of the clients
    /// times [`Sizes::census_per_connection`], so that every counted
    /// connection carries all its requests, its connect and close included.
    pub census_requests: usize,
}

impl Sizes {
    /// The full benchmark: a few minutes on a 2-core machine.
    pub fn full() -> Sizes {
        Sizes {
            quick: false,
            delay: Duration::from_millis(50),
            seed_requests: 200,
            seed_clients: 64,
            pool_threads: vec![1, 2, 4, 8, 16, 32, 64],
            clients: vec![64, 256, 1000],
            run_for: Duration::from_secs(3),
            max_queue_wait: Duration::from_secs(4),
            timeout: Duration::from_secs(15),
            epoll_workers: vec![1, 2],
            peer_threads: vec![1, 2],
            cpu_per_request: Duration::from_millis(10),
            cpu_backends: 3,
            cpu_clients: 64,
            cpu_pool_threads: vec![1, 2, 4, 8, 16, 32, 64],
            cost_clients: 64,
            connect_requests: usize::MAX,
            keep_alive_per_connection: 100,
            bulk_bytes: 512 * 1024 * 1024,
            bulk_streams: 4,
            idle: 5000,
            repetitions: 5,
            // Under strace every call of the proxy stops for the tracer:
            // here some 350 connections or 2,500 keep-alive requests a
            // second, so these take about 30 s each for each subject. The
            // counts per connection settle within the first thousand.
            census_warmup: 3000,
            census_connections: 10_000,
            census_per_connection: 1000,
            census_requests: 64 * 1000 * 2,
        }
    }

    /// The same harness, tiny: every code path, in under a minute.
    pub fn quick() -> Sizes {
        Sizes {
            quick: true,
            seed_requests: 40,
            pool_threads: vec![1, 8, 64],
            clients: vec![64],
            run_for: Duration::from_millis(500),
            max_queue_wait: Duration::from_millis(1500),
            timeout: Duration::from_secs(10),
            peer_threads: vec![1],
            cpu_clients: 16,
            cpu_pool_threads: vec![1, 2, 8],
            bulk_bytes: 16 * 1024 * 1024,
            bulk_streams: 2,
            idle: 200,
            repetitions: 1,
            census_warmup: 1000,
            census_connections: 1000,
            census_per_connection: 100,
            census_requests: 64 * 100,
            ..Sizes::full()
        }
    }

    /// Caps the connection-rate runs to what `ports` ephemeral ports allow.
    ///
    /// The client closes first, so each of its connections ends in
    /// TIME_WAIT, holding its port towards that destination; on loopback
    /// the kernel may reuse it only from the next second on
    /// (`tcp_tw_reuse` = 2, the default). And connect(2) looks for a free
    /// port among half the range first (one parity; the other is left for
    /// bind(2)). Measured here: 38,000 connections a second to one address
    /// until about half the range is in TIME_WAIT, then 17,000, with the
    /// client's CPU spent searching for ports. Past that point a run
    /// measures the port range, not the proxy; 40% of the range keeps a
    /// margin below it.
    pub fn fit_ephemeral_ports(&mut self, ports: u64) {
        self.connect_requests = usize::try_from(ports.saturating_mul(2) / 5)
            .unwrap_or(usize::MAX)
            .max(1000);
        // The census's connections take their ports from the same range.
        self.census_connections = self.census_connections.min(self.connect_requests);
    }
}
