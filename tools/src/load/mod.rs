//! The load client: closed-loop request load, bulk streams, and idle
//! connections, with the numbers that describe how each went.
//!
//! Four ways to load a server (a proxy, or a fixture backend directly):
//!
//! | what                 | function            | how                                              | backend |
//! |----------------------|---------------------|--------------------------------------------------|---------|
//! | requests, new conns  | [`run_closed_loop`] | [`Pattern::NewConnection`]: a connection each    | `reply` |
//! | requests, keep-alive | [`run_closed_loop`] | [`Pattern::KeepAlive`]: many lines on one conn   | `echo`  |
//! | throughput           | [`run_bulk`]        | S streams of pseudo-random bytes, echoed back    | `echo`  |
//! | held connections     | [`open_idle`]       | K connections, one round trip each, then idle    | `echo`  |
//!
//! ## The closed loop
//!
//! *Closed loop* means each client sends its next request only when the
//! previous one has finished, so at most C requests are in flight and the
//! offered load adapts to the server's speed. (An open-loop client sends at
//! a fixed rate whatever happens; it measures something else.) By Little's
//! law a closed loop of C clients against a server that takes L per request
//! cannot go faster than C / L requests per second.
//!
//! ```text
//!   shared counter: tickets left ───┬── client task 1: take n ─> request n ─> record ─> take ...
//!   (until N are taken, or the      ├── client task 2: ...
//!    duration is over)              └── client task C: ...
//!
//!   new connection:  connect ─> "GET n\n" ─> FIN ─> read to EOF ─> "port 9002: GET n\n"
//!                    └──────────────── latency, bounded by the timeout ───────────┘
//!   keep-alive:      (connect once) "GET n\n" ─> read one line ─> "GET n\n" ─> next request ...
//!                                   └──────────── latency ─────────────┘
//! ```
//!
//! A reply must answer *this* request: `<tag>: GET n` from a `reply`
//! backend, exactly `GET n` from an `echo` one. A reply to some other
//! request would mean a proxy crossed two connections, and that is counted
//! as an error, not a success. The tag before the `:` (`port 9002`) says
//! which backend answered; the report counts replies per tag.
//!
//! ## Not being the bottleneck
//!
//! A load client that saturates its own CPU measures itself, not the
//! server. So every report carries the CPU time this process used during
//! the run ([`LoadReport::client_cpu`], from `getrusage`): a closed loop or
//! a bulk run uses one thread, so CPU time close to the elapsed time means
//! the client was the limit.
//!
//! Where that CPU goes depends on the run. With a new connection per
//! request it is mostly the kernel's, in `connect`: the client sends the
//! first FIN, so every finished connection leaves a TIME_WAIT entry on the
//! client's side, and `connect` must search the ephemeral port range
//! (`net.ipv4.ip_local_port_range`) for a port whose pair with the target
//! is not still waiting. On loopback Linux reuses a waiting pair after a
//! second, so one source address to one target runs out of cheap ports at
//! a rate of the order of the range's size per second. Measured on a
//! 2-core VM with the default 28,232 ports: about 14,000 new connections
//! per second straight to a `reply` fixture, the client at a full core,
//! half of it in the kernel's port search (`__inet_hash_connect`). A proxy
//! meets the same wall on its connections to the backends. Keep-alive and
//! bulk runs spend it on system calls, copies and (bulk) the checksum.
//!
//! Every closed-loop client task and every bulk stream runs on one
//! [`Runtime`](runtime::Runtime) on the calling thread: the load client is itself an event
//! loop, so it keeps a thousand requests in flight without a thousand
//! threads. Idle connections need no event loop at all (they do nothing),
//! so they are plain blocking sockets.
//!
//! The three patterns live in their own files: `closed` (a closed loop of
//! requests, a new connection each or keep-alive), `bulk` (streams with a
//! checksum) and `idle` (connections opened and held); what their reports
//! share (CPU accounting, JSON) is in `shared.rs`. This file only re-exports:
//! every import runs from here down, none back up.
//!
//! The room also holds `loadgen`'s command line ([`cli`]), so its binary
//! is a shim.
//!
//! May import: nothing of the crate: the load client is the floor the bench,
//! the demo and the race reproduction stand on. Outside it, the runtime and
//! the proxy's shared settings (flags, durations) only.

mod bulk;
pub mod cli;
mod closed;
mod idle;
mod shared;

pub use bulk::{BulkOptions, BulkReport, run_bulk};
pub use closed::{LoadOptions, LoadReport, Pattern, reply_tag, run_closed_loop};
pub use idle::{IdleConnections, open_idle};
pub use shared::{ECHO_TAG, MAX_REPLY, MIB, cpu_share, process_cpu_time};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::net::SocketAddr;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn report_of(latencies_ms: &[u64]) -> LoadReport {
        let mut latencies: Vec<Duration> = latencies_ms.iter().map(|&n| ms(n)).collect();
        latencies.sort_unstable();
        LoadReport {
            requests: latencies.len() as u64,
            ok: latencies.len() as u64,
            latencies,
            elapsed: Duration::from_secs(2),
            ..LoadReport::default()
        }
    }

    #[test]
    fn percentiles_are_exact_nearest_ranks() {
        let report = report_of(&(1..=100).collect::<Vec<_>>());
        assert_eq!(report.percentile(50.0), Some(ms(50)));
        assert_eq!(report.p50(), Some(ms(50)));
        assert_eq!(report.percentile(99.0), Some(ms(99)));
        assert_eq!(report.percentile(99.5), Some(ms(100)));
        assert_eq!(report.percentile(100.0), Some(ms(100)));
        assert_eq!(report.percentile(0.0), Some(ms(1)), "p0 is the minimum");
        assert_eq!(report.percentile(1.0), Some(ms(1)));
        assert_eq!(report.percentile(1.1), Some(ms(2)));
        assert_eq!(report.percentile(250.0), Some(ms(100)), "clamped");
        assert_eq!(report.percentile(f64::NAN), None);
        assert_eq!(report.max(), Some(ms(100)));
    }

    #[test]
    fn rounding_does_not_push_a_percentile_one_rank_up() {
        // 99.9% of 1000 is rank 999 exactly, though 99.9 * 1000 / 100 in
        // floating point is not exactly 999.
        let report = report_of(&(1..=1000).collect::<Vec<_>>());
        assert_eq!(report.percentile(99.9), Some(ms(999)));
        assert_eq!(report.percentile(99.99), Some(ms(1000)));
    }

    #[test]
    fn few_samples_and_none() {
        let one = report_of(&[7]);
        assert_eq!(one.percentile(50.0), Some(ms(7)));
        assert_eq!(one.percentile(99.0), Some(ms(7)));
        let two = report_of(&[10, 20]);
        assert_eq!(two.percentile(50.0), Some(ms(10)));
        assert_eq!(two.percentile(51.0), Some(ms(20)));
        let none = LoadReport::default();
        assert_eq!(none.percentile(50.0), None);
        assert_eq!(none.p50(), None);
        assert_eq!(none.average(), None);
        assert_eq!(none.max(), None);
        assert_eq!(none.req_per_sec(), 0.0);
    }

    #[test]
    fn average_and_rate() {
        let report = report_of(&[10, 20, 30, 40]);
        assert_eq!(report.average(), Some(ms(25)));
        assert_eq!(report.req_per_sec(), 2.0, "4 ok in 2 s");
        let text = report.to_string();
        assert!(text.starts_with("4 requests (4 ok, 0 errors)"), "{text}");
    }

    #[test]
    fn the_summary_names_the_client_cpu_and_its_share_of_a_core() {
        let report = LoadReport {
            client_cpu: ms(500),
            ..report_of(&[10])
        };
        let text = report.to_string();
        assert!(
            text.contains("client CPU 0.50 s (25% of one core)"),
            "{text}"
        );
        assert_eq!(cpu_share(ms(500), Duration::from_secs(2)), 0.25);
        assert_eq!(cpu_share(ms(500), Duration::ZERO), 0.0);
    }

    #[test]
    fn a_reply_must_answer_this_request() {
        assert_eq!(
            reply_tag(b"port 9001: GET 3\n", "GET 3"),
            Ok("port 9001".to_string())
        );
        let bad = |reply: &[u8]| reply_tag(reply, "GET 3").unwrap_err();
        assert!(bad(b"").contains("without a reply"));
        assert!(bad(b"port 9001: GET 4\n").contains("unexpected reply"));
        assert!(bad(b"port 9001: GET 3").contains("unexpected reply"));
        assert!(bad(b"GET 3\n").contains("unexpected reply"));
        assert!(bad(b": GET 3\n").contains("unexpected reply"));
        assert!(bad(b"port 9001: GET 3\nmore\n").contains("unexpected reply"));
    }

    #[test]
    fn zero_clients_or_an_empty_keep_alive_is_refused() {
        let options = LoadOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 9)),
            clients: 0,
            requests: 1,
            ..LoadOptions::default()
        };
        let e = run_closed_loop(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let options = LoadOptions {
            pattern: Pattern::KeepAlive { per_connection: 0 },
            ..LoadOptions::default()
        };
        let e = run_closed_loop(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn default_options() {
        let o = LoadOptions::default();
        assert_eq!(o.target, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!((o.clients, o.requests, o.duration), (64, 1000, None));
        assert_eq!(o.timeout, Duration::from_secs(10));
        assert_eq!(o.pattern, Pattern::NewConnection);
    }

    #[test]
    fn json_of_an_empty_report_has_nulls_for_latencies() {
        let json = LoadReport::default().to_json();
        assert_eq!(
            json,
            "{\"requests\":0,\"ok\":0,\"errors\":0,\"elapsed_s\":0.000000,\"req_per_s\":0.000,\
             \"avg_ms\":null,\"p50_ms\":null,\"p99_ms\":null,\"max_ms\":null,\
             \"client_cpu_s\":0.000000,\"per_backend\":{},\"first_error\":null}"
        );
    }

    #[test]
    fn bulk_json_and_rate() {
        let report = BulkReport {
            streams: 2,
            bytes_each_way: 8 * MIB,
            elapsed: Duration::from_secs(2),
            intact: true,
            client_cpu: ms(250),
            first_error: None,
        };
        assert_eq!(report.mib_per_sec(), 4.0);
        assert_eq!(
            report.to_json(),
            "{\"streams\":2,\"bytes_each_way\":8388608,\"elapsed_s\":2.000000,\
             \"mib_per_s\":4.000,\"intact\":true,\"client_cpu_s\":0.250000,\"first_error\":null}"
        );
        let text = report.to_string();
        assert!(text.contains("8.0 MiB each way") && text.contains("4.0 MiB/s, intact"));
        assert_eq!(BulkReport::default().mib_per_sec(), 0.0);
    }

    #[test]
    fn zero_streams_is_refused() {
        let options = BulkOptions {
            target: SocketAddr::from(([127, 0, 0, 1], 9)),
            bytes: 1,
            streams: 0,
            timeout: Duration::from_secs(1),
        };
        let e = run_bulk(&options).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn process_cpu_time_grows_with_work() {
        let before = process_cpu_time().expect("getrusage");
        std::hint::black_box(backend::fixture::burn_cpu(ms(30)));
        let after = process_cpu_time().expect("getrusage");
        assert!(after > before, "{before:?} then {after:?}");
    }
}
