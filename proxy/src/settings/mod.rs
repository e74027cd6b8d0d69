//! # settings: what the operator asked for
//!
//! The command line and the configuration file, read and checked before
//! anything starts, into plain types the modes run from. Every mistake is
//! reported with where it is and what to write instead, and none stops the
//! reading: a file with five mistakes gets five messages.
//!
//! | file | what it holds |
//! |---|---|
//! | [`cli`] | the proxy's flags, one table, and the rules that tie them together |
//! | [`flags`] | reading a command line against a table of flags (the tools use it too) |
//! | [`config`] | the configuration, as types: frontends, backends, timeouts, `global` |
//! | [`address`] | a backend's address as written: an IP address or a host name, and `init-addr` |
//! | [`resolve`] | host names to addresses, by the system's resolver, at start and at a reload |
//! | [`file`](mod@file) | reading a file: sections, then the checks of a complete frontend |
//! | [`drafts`] | a section while its lines are read, everything still optional |
//! | [`sections`] | every option of every section, one table each |
//! | [`logging`] | the logging options' values: `log` (syslog), `log-tag`, `log-format`, `dontlognull` |
//! | [`probes`] | a section's health check: `option redis-check`, `tcp-check` steps, `http-check` |
//! | [`groups`] | a frontend's groups and `use-group` rules, checked against the `group` sections |
//! | [`haproxy`] | HAProxy's words: what each is here, or why it has no equivalent |
//! | [`reader`] | the machinery: errors with `file:line:column`, values, dispatch |
//! | [`words`] | words and their columns, "did you mean", lists, durations |
//! | [`check`] | `proxy --check-config FILE` |
//!
//! May import: [`crate::log`], [`crate::policy`], [`crate::conn`] and
//! [`crate::ops`], whose types a configuration names (an algorithm, a PROXY
//! version, a log format). The modes above read the settings; nothing here
//! starts a thread or opens a socket of its own. Besides reading files, a
//! configuration asks the system's databases for the names it holds: users
//! (`user`), and host names ([`resolve`], which the modes also call, off
//! their event loops).

pub mod address;
pub mod check;
pub mod cli;
pub mod config;
pub mod drafts;
pub mod file;
pub mod flags;
pub mod groups;
pub mod haproxy;
pub mod logging;
pub mod probes;
pub mod reader;
pub mod resolve;
pub mod sections;
pub mod words;
