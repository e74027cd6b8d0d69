//! The seed's published table, to set beside ours.
//!
//! Measured on an i5-9300H (4 cores, 8 threads), 200 requests a run against
//! a backend that waits 50 ms, concurrency not stated. Its "avg latency"
//! column is the run's wall time over the number of requests (1000 / req/s,
//! to the rounding), not the time one request took; the test below checks
//! that reading.

use crate::bench::subject::Subject;

/// Single-threaded (milestone 1): req/s.
pub const SEED_SINGLE: f64 = 18.94;
/// Single-threaded: its "avg latency", ms.
pub const SEED_SINGLE_MS: f64 = 52.81;
/// The seed's pool: (threads, req/s, "avg latency" ms).
pub const SEED_POOL: [(usize, f64, f64); 7] = [
    (1, 19.55, 51.14),
    (2, 39.12, 25.56),
    (4, 74.99, 13.34),
    (8, 137.55, 7.27),
    (16, 239.52, 4.17),
    (32, 445.43, 2.25),
    (64, 583.09, 1.72),
];
/// The seed's epoll proxy on one thread: req/s.
pub const SEED_EPOLL: f64 = 696.86;
/// The epoll proxy: its "avg latency", ms.
pub const SEED_EPOLL_MS: f64 = 1.44;

/// The seed's row for `subject`, if it has one: (req/s, ms).
pub fn seed_row(subject: Subject) -> Option<(f64, f64)> {
    match subject {
        Subject::Single => Some((SEED_SINGLE, SEED_SINGLE_MS)),
        Subject::Pool(threads) => SEED_POOL
            .iter()
            .find(|(t, _, _)| *t == threads)
            .map(|&(_, rate, ms)| (rate, ms)),
        // The seed's v5 was one level-triggered thread: both of ours.
        Subject::Epoll(1) | Subject::States => Some((SEED_EPOLL, SEED_EPOLL_MS)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_rows_match_the_seed_table() {
        assert_eq!(seed_row(Subject::Pool(64)), Some((583.09, 1.72)));
        assert_eq!(seed_row(Subject::Epoll(1)), Some((696.86, 1.44)));
        assert_eq!(seed_row(Subject::States), Some((696.86, 1.44)));
        assert_eq!(seed_row(Subject::Epoll(2)), None);
        assert_eq!(seed_row(Subject::Direct), None);
        // The seed's "avg latency" is 1000 / req/s, to the rounding.
        for (_, rate, ms) in SEED_POOL {
            assert!((1000.0 / rate - ms).abs() < 0.02, "{rate} {ms}");
        }
    }
}
