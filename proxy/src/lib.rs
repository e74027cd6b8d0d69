//! # proxy: an L4 load balancer, in five milestones
//!
//! Every connection accepted on the listen address is relayed, bytes
//! unchanged in both directions, to a backend picked in round-robin order.
//! The C++ project this grew from reached that in five steps; each is a
//! mode of this one binary, so they can be run and measured side by side:
//!
//! ```text
//!   --mode single   milestone 1   one thread, blocking sockets, one connection at a time
//!   --mode pool     milestones 2-4  accept loop -> blocking thread pool; --picker mutex|atomic(|racy)
//!   --mode epoll    milestone 5   the async proxy on our runtime, one event loop per worker
//! ```
//!
//! ## The tour
//!
//! - [`cli`]: the command line and its [`Settings`](cli::Settings); [`log`]: leveled lines on stderr.
//! - [`access_log`]: one line per finished connection, HAProxy's `tcplog`
//!   layout (or JSON), with its two-letter termination state.
//! - [`config`]: the configuration file (several frontends, each with its
//!   pool), run by `proxy --config FILE`, checked by `--check-config FILE`.
//! - [`picker`]: round-robin over the backends, and the race of milestone 3.
//! - [`balance`]: the `balance` algorithms (smooth weighted round-robin,
//!   leastconn, power of two choices, Maglev) with weights and backups.
//! - [`health`]: which backends are up: active checks (`check inter fall
//!   rise`) and clients' failed connects, on a board the event loops share.
//! - [`acl`]: who may connect: `allow` / `deny` address ranges, and a
//!   ceiling on each source address's concurrent connections.
//! - [`accept`]: what every accept loop does with an error (skip, or back off).
//! - [`blocking`]: what the blocking modes share: a listener with a chosen
//!   backlog, and a full-duplex relay on `poll(2)`.
//! - [`single`], [`pool`]: milestones 1 to 4.
//! - [`relay`]: the async relay and its connection contract (half-close,
//!   resets, timeouts); [`epoll`]: milestone 5 grown into a load balancer:
//!   event loops, accept loops, maxconn ([`limit`]), health ([`health`]),
//!   reload; [`connection`]: one connection's life there, from its PROXY
//!   header to its access-log line.
//! - [`metrics`]: counters each event loop owns (no contention), summed
//!   into Prometheus text when scraped; [`admin`]: the admin listener,
//!   `GET /metrics` and `GET /health` over just enough HTTP/1.1.
//! - [`proxy_protocol`]: HAProxy's PROXY protocol, v1 and v2: the header that
//!   tells a backend the client's address (`send-proxy`, `accept-proxy`).
//! - [`shutdown`]: signals: SIGTERM and SIGINT drain then exit, SIGHUP reloads.
//! - [`demo`]: fixture backends, every mode, a table; [`process`]: a proxy
//!   as a child process (the demo's and the end-to-end tests').
//!
//! `docs/EPOLL.md` walks the epoll mode from accept to the last byte.

#![deny(unsafe_op_in_unsafe_fn)]
// No unsafe in the proxy: system calls go through the runtime and nix. The
// one deliberate exception, the racy picker of milestone 3, opts out in
// picker.rs, and only in `race-demo` builds.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod log;

pub mod blocking;
pub mod conn;
pub mod epoll;
pub mod ops;
pub mod policy;
pub mod settings;

pub mod process;

use blocking::{pool, single};
use epoll::control;
use epoll::plan::Plan;
use ops::shutdown;
use settings::check;
use settings::cli::{self, Command, Mode};

/// The whole program: parses `args` (without the program name), runs what
/// they ask for, and returns the process exit status (0 ok, 1 runtime
/// failure, 2 bad command line or configuration).
pub fn main_with_args(args: &[String]) -> i32 {
    let command = match cli::parse(args) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("proxy: {e}");
            return 2;
        }
    };
    let result = match command {
        Command::Help => {
            print!("{}", cli::help());
            return 0;
        }
        Command::Version => {
            println!("proxy {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Command::CheckConfig(path) => return check::check_config(&path),
        Command::Run(settings) => run(&settings),
    };
    match result {
        Ok(()) => 0,
        Err(Exit::Status(status)) => status,
        Err(Exit::Failed(e)) => {
            error!("{e}");
            1
        }
    }
}

/// How a run ends early: a configuration refused before anything started
/// (its errors already printed), or a failure while running.
enum Exit {
    Status(i32),
    Failed(std::io::Error),
}

/// Runs the mode `settings` asks for until it is stopped.
fn run(settings: &cli::Settings) -> Result<(), Exit> {
    log::set_level(settings.log_level);
    let plan = match settings.mode {
        Mode::Epoll => Some(Plan::new(settings).map_err(|errors| {
            check::print_errors(&errors);
            let path = settings
                .config
                .as_deref()
                .unwrap_or(std::path::Path::new("-"));
            eprintln!("proxy: {} is not valid; nothing started", path.display());
            Exit::Status(2)
        })?),
        Mode::Single | Mode::Pool => None,
    };
    // Before any other thread starts, so every thread inherits the mask.
    match settings.mode {
        Mode::Single => shutdown::exit_on_signals(),
        Mode::Pool | Mode::Epoll => shutdown::block_signals(),
    }
    .map_err(Exit::Failed)?;
    match plan {
        Some(plan) => control::run(&plan),
        None if settings.mode == Mode::Single => single::run(settings),
        None => pool::run(settings),
    }
    .map_err(Exit::Failed)
}
