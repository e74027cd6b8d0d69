//! What the epoll mode runs: the configuration (the file's, or the one
//! frontend of the flags) and the process-wide settings around it, with
//! the flags given beside `--config` winning over the file's `global`.

use std::path::PathBuf;
use std::time::Duration;

use crate::ops::shutdown;
use crate::policy::descriptors::{Budget, Maxconn};
use crate::settings::check::{self, Fixed};
use crate::settings::cli::Settings;
use crate::settings::config::{Config, ConfigError, Global};
use crate::settings::file;
use crate::settings::resolve::{self, Answers};

/// How the epoll mode runs: the frontends, and the process-wide settings
/// that are not part of a configuration file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The frontends and the global `maxconn`.
    pub config: Config,
    /// The file `config` came from, read again on SIGHUP (`None`: flags).
    pub path: Option<PathBuf>,
    /// Event-loop threads.
    pub workers: usize,
    /// The listen queue length of every listener.
    pub backlog: u32,
    /// On SIGTERM, how long open connections may take to finish.
    pub grace: Duration,
    /// Whether `--grace` set it (then a reload does not change it).
    pub grace_from_flag: bool,
    /// The file's `global` section as it was read at startup, before the
    /// flags' overrides: what a reload compares the new file with.
    pub started_with: Global,
    /// The descriptor limit and what it leaves for connections.
    pub budget: Budget,
    /// What that budget keeps from the start, for every reload's.
    pub fixed: Fixed,
    /// The global `maxconn` to run with: the file's, which the budget can
    /// honour, or the largest it can.
    pub maxconn: Maxconn,
    /// `--upgrade-from PATH`: take the listeners of the proxy offering them
    /// there instead of binding them (ops/upgrade/).
    pub upgrade_from: Option<PathBuf>,
    /// What each host name of the backends resolved to at start.
    pub answers: Answers,
}

impl Plan {
    /// The plan for `settings`: the file's frontends with `--config` (its
    /// errors, if it has any), else the one frontend of the flags.
    pub fn new(settings: &Settings) -> Result<Plan, Vec<ConfigError>> {
        let config = match &settings.config {
            Some(path) => file::load(path)?,
            None => settings.to_config(),
        };
        // Flags given beside --config win over the file's global options.
        let started_with = config.global.clone();
        let mut config = config;
        if let Some(admin) = settings.admin {
            config.global.admin = Some(admin);
        }
        if let Some(limit) = settings.admin_request_timeout {
            config.global.admin_request = Some(limit);
        }
        if let Some(target) = &settings.access_log {
            config.global.access_log = Some(target.clone());
        }
        if let Some(format) = &settings.log_format {
            config.global.log_format = Some(format.clone());
        }
        if let Some(path) = &settings.upgrade_socket {
            config.global.upgrade_socket = Some(path.clone());
        }
        let workers = match (settings.workers_given, config.global.workers) {
            (false, Some(n)) => n as usize,
            _ => settings.workers,
        };
        let grace = settings
            .grace
            .or(config.global.grace)
            .unwrap_or(shutdown::DEFAULT_GRACE);
        // With the limit already raised (lib.rs): an explicit global maxconn
        // over what it can honour refuses the start, as --check-config does.
        let fixed = Fixed::of(&config, workers.max(1), check::open_at_startup());
        let path = settings
            .config
            .as_deref()
            .unwrap_or(std::path::Path::new("the command line"));
        let (budget, maxconn) = check::global_maxconn(&config, fixed)
            .map_err(|message| vec![check::whole_file(path, message)])?;
        // Every host name, looked up before anything starts: one that does
        // not resolve refuses the start, unless its line says otherwise.
        let answers = resolve::at_start(&path.display().to_string(), &config)?;
        Ok(Plan {
            budget,
            fixed,
            maxconn,
            config,
            path: settings.config.clone(),
            workers,
            backlog: settings.backlog,
            grace,
            grace_from_flag: settings.grace.is_some(),
            started_with,
            upgrade_from: settings.upgrade_from.clone(),
            answers,
        })
    }
}
