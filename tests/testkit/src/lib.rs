//! # testkit: reading back what the proxy writes
//!
//! The proxy writes three kinds of text for machines: access-log lines in
//! HAProxy's `tcplog` layout, the same lines as JSON, and the Prometheus text
//! of `GET /metrics`. It never reads any of them back, so their readers are
//! not part of it: they live here, for the end-to-end tests (`tests/`), the
//! backend's tests and the fuzz targets (`fuzz/`), and each is strict, so
//! that a test that reads a line also checks that the line is well formed.
//!
//! - [`tcplog`]: one tcplog line into its fields (ours, or HAProxy's with its
//!   syslog header);
//! - [`json`]: the workspace's one JSON reader, for the JSON access log and
//!   the load client's reports;
//! - [`prometheus`]: the text exposition format 0.0.4, as `/metrics` writes it.
//!
//! And three tools that read nothing the proxy writes: [`sim`], the seeded
//! simulator of the relay's contract, with its command line (`relay-sim`)
//! and the fuzz target `relay_machine`; [`webdriver`], a WebDriver
//! client by hand, that drives a headless browser through the stats page
//! (`tests/stats_page.rs`); and [`watchdog`], the bound on a test that
//! blocks, for the tools' and the backend's tests.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod json;
pub mod prometheus;
pub mod sim;
pub mod tcplog;
pub mod watchdog;
pub mod webdriver;
