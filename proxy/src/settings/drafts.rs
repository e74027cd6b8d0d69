//! The drafts: a section of the file while its lines are read, everything
//! in it still optional, before the whole file is checked and turned into
//! the plain types of `config.rs`.
//!
//! They sit in a file of their own because every reader of a line writes
//! into one: `sections.rs` (most lines), `logging.rs` (the `log` lines),
//! `probes.rs` (the check options, into a [`PoolDraft`]'s probe). The
//! readers import the drafts; the drafts import none of the readers but the
//! check options' own draft.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::conn::splice::Splice;
use crate::conn::timeouts::Timeouts;
use crate::ops::privileges::FoundUser;
use crate::policy::acl::AccessList;
use crate::policy::balance::Algorithm;
use crate::policy::cidr::Cidr;
use crate::policy::route::{NotTls, Pattern};

use super::config::{Address, BackendServer, Global, HostLine};
use super::probes::ProbeDraft;
use super::reader::{Draft, Seen};

/// The `global` section while its lines are read.
#[derive(Debug, Default)]
pub struct GlobalDraft {
    /// What it says so far.
    pub global: Global,
    /// The line of its header, once there is one.
    pub line: Option<usize>,
    /// `user`'s user: found, as written, with its line and column.
    pub(super) user: Option<(FoundUser, String, usize, usize)>,
    /// `user`'s group, if given: its gid, as written.
    pub(super) group: Option<(u32, String)>,
    pub(super) seen: Seen,
}

/// The backends of a frontend or a group while their lines are read.
#[derive(Debug, Default)]
pub struct PoolDraft {
    /// `balance`.
    pub balance: Algorithm,
    /// Where `balance` was given (its line and column), if it was.
    pub balance_at: Option<(usize, usize)>,
    /// `backend` lines that were good, in file order.
    pub backends: Vec<BackendServer>,
    /// The address of each good `backend` line, with its line: a second
    /// line for an address is found in one look-up, not by comparing it with
    /// every backend before it (a frontend may have 100,000).
    pub backend_at: HashMap<Address, usize>,
    /// The good `backend` lines written with a host name, where they are.
    pub hosts: Vec<HostLine>,
    /// The name of each good `backend` line (its address for an unnamed
    /// one), with its line: names are unique in a section.
    pub name_at: HashMap<String, usize>,
    /// `backend` lines, good or bad (a bad one is reported on its own).
    pub backend_lines: usize,
    /// `option redis-check`, `tcp-check` lines...: the check its servers
    /// with `check` get (`probes.rs`).
    pub probe: ProbeDraft,
}

/// A `use-group GROUP sni NAME...` line's pattern, as it was read.
#[derive(Debug)]
pub struct RuleDraft {
    /// The group named, with its column.
    pub group: (String, usize),
    /// The pattern, with its column.
    pub pattern: (Pattern, usize),
    /// The line.
    pub line: usize,
}

/// A frontend while its lines are read: everything optional until the end.
#[derive(Debug)]
pub struct FrontendDraft {
    /// Its name, unique in the file.
    pub name: String,
    /// Where its header is.
    pub line: usize,
    /// The column of its header.
    pub column: usize,
    /// `listen` addresses, each with the line and column of its word.
    pub listen: Vec<(SocketAddr, usize, usize)>,
    /// `freebind` on a `listen` line.
    pub freebind: bool,
    /// `balance` and `backend` lines: its default group, unless
    /// `default-group`.
    pub pool: PoolDraft,
    /// `maxconn`.
    pub maxconn: Option<u32>,
    /// `timeout ...`.
    pub timeouts: Timeouts,
    /// `retries`.
    pub retries: u32,
    /// `allow`, `deny`.
    pub access: AccessList,
    /// `maxconn-per-source`.
    pub maxconn_per_source: Option<u32>,
    /// `rate-limit sessions`.
    pub rate_limit: Option<u32>,
    /// `rate-limit-per-source`.
    pub rate_limit_per_source: Option<(u32, Duration)>,
    /// `accept-proxy`.
    pub accept_proxy: bool,
    /// `accept-proxy RANGE...`.
    pub proxy_from: Vec<Cidr>,
    /// `default-group NAME`, with its line and column.
    pub default_group: Option<(String, usize, usize)>,
    /// `use-group` patterns, in file order.
    pub rules: Vec<RuleDraft>,
    /// `not-tls`, with its line and column.
    pub not_tls: Option<(NotTls, usize, usize)>,
    /// `splice`.
    pub splice: Splice,
    /// `dontlognull`.
    pub dontlognull: bool,
    /// A line of it was in error: whether it is complete (a `listen`, a
    /// backend) is then not judged.
    pub erred: bool,
    pub(super) seen: Seen,
}

/// A `group NAME` section while its lines are read.
#[derive(Debug)]
pub struct GroupDraft {
    /// Its name, unique among groups.
    pub name: String,
    /// Where its header is.
    pub line: usize,
    /// The column of its header.
    pub column: usize,
    /// `balance` and `backend` lines.
    pub pool: PoolDraft,
    /// A line of it was in error ([`FrontendDraft::erred`]).
    pub erred: bool,
    pub(super) seen: Seen,
}

impl Draft for GroupDraft {
    fn seen(&mut self) -> &mut Seen {
        &mut self.seen
    }
}

impl Draft for GlobalDraft {
    fn seen(&mut self) -> &mut Seen {
        &mut self.seen
    }
}

impl Draft for FrontendDraft {
    fn seen(&mut self) -> &mut Seen {
        &mut self.seen
    }
}
