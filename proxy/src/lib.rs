//! # proxy: an L4 load balancer, in five milestones
//!
//! Every connection accepted on a listen address is relayed, bytes
//! unchanged in both directions, to a backend the frontend's policy picks.
//! The C++ project this grew from reached that in five steps; each is a mode
//! of this one binary, so they can be run and measured side by side:
//!
//! ```text
//!   --mode single   milestone 1     one thread, blocking sockets, one connection at a time
//!   --mode pool     milestones 2-4  accept loop -> blocking thread pool; --picker mutex|atomic(|racy)
//!   --mode epoll    milestone 5     the async proxy on our runtime, one event loop per worker
//!   --mode states   milestone 5     the same by hand: one thread, level-triggered epoll, no runtime
//! ```
//!
//! ## The tour, floor by floor
//!
//! Each folder is a layer and opens with what it holds and what it may
//! import; imports only go down, and no file reaches itself through them.
//!
//! ```text
//!  ┌───────────────────────────────────────────────────────────────────────┐
//!  │ lib.rs: main_with_args, which mode runs; main.rs: the binary          │  entry
//!  ├────────────────────────────────────────┬──────────────────────────────┤
//!  │ epoll/ plan control orders worker      │ blocking/ single pool picker │  the modes
//!  │        worker_context frontend         │         relay                │
//!  │        connection trace connect        │ states/ interest deadlines   │
//!  │        backend_socket choose_group     │         connection           │
//!  │        checker probe resolver dump     │         event_loop           │
//!  │        handover moving carry operator  │ ctl/ args client             │
//!  ├────────────────────────────────────────┴──────────────────────────────┤
//!  │ settings/ cli flags config file drafts sections haproxy logging       │  what was asked
//!  │           probes reader words check address resolve groups            │
//!  ├───────────────────────────────────────────────────────────────────────┤
//!  │ ops/ access_log/ (termination record custom format sink) metrics/     │  what an operator
//!  │      (counters exposition process rates) admin/ (request places       │  sees and does
//!  │      connection response views page access actions http_action        │
//!  │      socket) server_state shutdown privileges supervise upgrade/      │
//!  │      (wire socket offer take hand adopt parcel progress reexec        │
//!  │      notify)                                                          │
//!  ├────────────────────────────────────────┬──────────────────────────────┤
//!  │ policy/ acl cidr source_limit limit    │ conn/ machine timeouts alarm │  decisions, and the
//!  │         source_rate session_rate       │       snapshot buffers relay │  pieces of a connection
//!  │         health agent_state admin_state │       splice proxy_protocol  │
//!  │         balance                        │                              │
//!  │         maglev descriptors address     │       client_hello accept    │
//!  │         route                          │       side                   │
//!  │         check/ (redis pgsql mysql http │                              │
//!  │           smtp script regex agent      │                              │
//!  │           dialogue)                    │                              │
//!  ├────────────────────────────────────────┴──────────────────────────────┤
//!  │ log/ grouped json utc spelling syslog/ (header target datagram        │  ground
//!  │      stream)                                                          │
//!  └───────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Read it in this order:
//! 1. [`conn::machine`]: the heart of any proxy, both directions at once,
//!    and its contract (half-close passed on, a reset as a reset, timeouts),
//!    as one state machine with no I/O; then [`conn::relay`], the async
//!    driver of it (docs/RELAY.md sets the three drivers side by side).
//! 2. [`blocking`]: milestones 1 to 4, the same machine driven on
//!    blocking sockets and `poll(2)`, and [`blocking::picker`], the race of
//!    milestone 3.
//! 3. [`epoll`]: milestone 5 grown into a load balancer: the control thread,
//!    one event loop per worker, and [`epoll::connection`], one connection's
//!    life from its PROXY header to its access-log line.
//! 4. [`states`]: milestone 5 again, by hand: one level-triggered loop
//!    driving the same machine per connection, to read beside
//!    [`epoll::connection`] (docs/STATES.md).
//! 5. [`policy`]: what those connections ask: may this client come in,
//!    which backend, is there room, is it up, where is it now
//!    ([`policy::address`]), and what a health check says to a server and
//!    expects back ([`policy::check`]).
//! 6. [`ops`]: what the operator sees: the access log, the metrics, the
//!    admin endpoint and its actions on servers, the graceful stop, the
//!    upgrade to a new binary; and [`ctl`], `proxy ctl`, the operator's
//!    client for those actions.
//! 7. [`settings`]: how a command line and a configuration file become the
//!    plain types all of the above run from.
//!
//! `docs/EPOLL.md` walks the epoll mode from accept to the last byte;
//! `docs/OPERATIONS.md` is the operator's manual.

#![deny(unsafe_op_in_unsafe_fn)]
// No unsafe in the proxy: system calls go through the runtime and nix. The
// one deliberate exception, the racy picker of milestone 3, opts out in
// picker.rs, and only in `race-demo` builds.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod log;

pub mod blocking;
pub mod conn;
pub mod ctl;
pub mod epoll;
pub mod ops;
pub mod policy;
pub mod settings;
pub mod states;

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
    if let Some(("ctl", words)) = args.split_first().map(|(a, rest)| (a.as_str(), rest)) {
        return ctl::main(words);
    }
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
        Command::Run(settings) => run(&settings, args),
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

/// Raises the soft `RLIMIT_NOFILE` to the hard one, as HAProxy and nginx
/// do, and says so: every mode holds two descriptors per connection, and a
/// soft limit of 1,024 (a common default) would cap it long before memory
/// does. The epoll mode then derives its global `maxconn` from the result
/// (`policy/descriptors.rs`); the other modes back off when accept runs out.
fn raise_descriptor_limit() {
    match runtime::fd_limit::nofile_limits() {
        Ok((soft, hard)) if soft < hard => match runtime::fd_limit::raise_nofile_limit() {
            Ok(now) => {
                info!("RLIMIT_NOFILE: soft limit raised from {soft} to {now} (the hard limit)")
            }
            Err(e) => warn!(
                "RLIMIT_NOFILE: the soft limit {soft} could not be raised to the hard limit {hard}: \
                 {e}; running with {soft}"
            ),
        },
        Ok((soft, _)) => info!("RLIMIT_NOFILE: {soft}, the hard limit already"),
        Err(e) => warn!("RLIMIT_NOFILE: cannot read it: {e}"),
    }
}

/// Runs the mode `settings` asks for until it is stopped; as PID 1 of its
/// namespace, the epoll mode runs as its own child, under a supervisor
/// (`args` are what the child is started with).
fn run(settings: &cli::Settings, args: &[String]) -> Result<(), Exit> {
    log::set_level(settings.log_level);
    if settings.mode == Mode::Epoll && ops::supervise::is_pid_one() {
        return match ops::supervise::run(args) {
            Ok(0) => Ok(()),
            Ok(code) => Err(Exit::Status(code)),
            Err(e) => Err(Exit::Failed(e)),
        };
    }
    raise_descriptor_limit();
    // Before any thread allocates: each thread's first heap is sized then.
    if !runtime::heap::pad_heap_growth(conn::buffers::HEAP_GROWTH) {
        info!("the allocator is not glibc's: its heaps grow as it decides");
    }
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
        Mode::Single | Mode::Pool | Mode::States => None,
    };
    // Before any other thread starts, so every thread inherits the mask.
    match settings.mode {
        Mode::Single => shutdown::exit_on_signals(),
        Mode::Pool | Mode::Epoll | Mode::States => shutdown::block_signals(),
    }
    .map_err(Exit::Failed)?;
    match (plan, settings.mode) {
        (Some(plan), _) => control::run(&plan),
        (None, Mode::Single) => single::run(settings),
        (None, Mode::States) => states::run(settings),
        (None, _) => pool::run(settings),
    }
    .map_err(Exit::Failed)
}
