//! Metrics: counters that cost the event loops nothing, summed when scraped.
//!
//! ```text
//!   worker 0: [web: conns 7, bytes .. | b0 | b1]   [db: ...]    (written by worker 0 only)
//!   worker 1: [web: conns 5, bytes .. | b0 | b1]   [db: ...]    (written by worker 1 only)
//!                        │ Relaxed loads, when scraped
//!                        ▼
//!   admin thread: Registry::render()  ->  proxy_frontend_connections_total{frontend="web"} 12
//! ```
//!
//! - [`counters`]: what each worker counts, in counters only it writes;
//! - [`exposition`]: the registry of every worker's counters, and the text a
//!   scrape gets;
//! - [`process`]: the process's own figures, from `/proc`;
//! - [`rates`]: session rates, the last minute's history and the time since
//!   each row's last change of state, sampled once a second for the views.

pub mod counters;
pub mod exposition;
pub mod process;
pub mod rates;
