//! SIGUSR2 (nginx's way): the running proxy starts its own binary again,
//! with the same arguments plus `--upgrade-from PATH`, and the new process
//! takes the listeners over the socket.
//!
//! ## Which binary: the path, resolved at startup
//!
//! An upgrade means a new binary at the same path, put there by a package
//! manager (a new file renamed over the old one) or a deploy (a symlink
//! switched to a new release). `/proc/self/exe` is no good for either: it
//! names the *running* file, resolved through symlinks, so it runs the old
//! release again (or a deleted inode). So the path is `argv[0]` as it was
//! started, made absolute at startup (against the working directory if it
//! has a slash, else looked up in `PATH`, as the shell did), without
//! following symlinks: a relative path still works after the process has
//! changed directory, and a switched symlink leads to the new release.
//! Only if that fails is `/proc/self/exe` the fallback, and the log says so.
//!
//! The child inherits stdout and stderr (the log goes on in one place),
//! starts with an empty signal mask (std resets it between fork and exec),
//! and inherits no descriptor (all are close-on-exec): it takes the
//! listeners over the socket like any other new process. A thread waits
//! for it, so that one that fails (a bad configuration) is reaped and its
//! status logged.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

/// The flag that names the old process's socket.
pub const UPGRADE_FROM: &str = "--upgrade-from";

/// How to start the next process: its path and arguments.
#[derive(Debug, Clone)]
pub struct Reexec {
    exe: PathBuf,
    args: Vec<OsString>,
    /// The pid of the new process started and still running, 0 if none: a
    /// second SIGUSR2 meanwhile is refused rather than start a second one,
    /// which would only wait behind the first and time out.
    started: Arc<AtomicU32>,
}

impl Reexec {
    /// Reads how this process was started (module docs), for an upgrade
    /// over `socket` later.
    pub fn at_startup(socket: &Path) -> Reexec {
        let mut argv = std::env::args_os();
        let argv0 = argv.next();
        let exe = argv0
            .as_deref()
            .and_then(|a| resolve(Path::new(a)))
            .or_else(|| {
                let exe = std::env::current_exe().ok()?;
                crate::warn!(
                    "SIGUSR2 will start {} (argv[0] could not be resolved)",
                    exe.display()
                );
                Some(exe)
            })
            .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
        Reexec {
            exe,
            args: next_args(argv.collect(), socket),
            started: Arc::default(),
        }
    }

    /// The binary SIGUSR2 starts.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Starts the new process; a thread reaps it and logs how it ended if
    /// it ends while this process still runs (it failed, or it stopped).
    pub fn start(&self) -> io::Result<u32> {
        let running = self.started.load(Ordering::SeqCst);
        if running != 0 {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "pid {running}, started by an earlier SIGUSR2, still runs; not a second one"
                ),
            ));
        }
        let mut child = Command::new(&self.exe)
            .args(&self.args)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start {}: {e}", self.exe.display()),
                )
            })?;
        let pid = child.id();
        self.started.store(pid, Ordering::SeqCst);
        let started = self.started.clone();
        thread::Builder::new()
            .name("upgrade-child".into())
            .spawn(move || {
                match child.wait() {
                    Ok(status) if status.success() => {
                        crate::info!("upgrade: pid {pid} exited: {status}")
                    }
                    Ok(status) => crate::error!(
                        "upgrade: the new process, pid {pid}, failed: {status}; this one goes on \
                         serving"
                    ),
                    Err(e) => crate::warn!("upgrade: waiting for pid {pid}: {e}"),
                }
                started.store(0, Ordering::SeqCst);
            })?;
        Ok(pid)
    }
}

/// `argv[0]` as an absolute path, symlinks left alone.
fn resolve(argv0: &Path) -> Option<PathBuf> {
    if argv0.as_os_str().is_empty() {
        return None;
    }
    if argv0.is_absolute() {
        return Some(argv0.to_path_buf());
    }
    if argv0.components().count() > 1 {
        return Some(std::env::current_dir().ok()?.join(argv0));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(argv0))
        .find(|candidate| candidate.is_file())
        .and_then(|found| resolve(&found).filter(|p| p.is_absolute()))
}

/// This process's arguments without any `--upgrade-from X`, then
/// `--upgrade-from socket`.
fn next_args(args: Vec<OsString>, socket: &Path) -> Vec<OsString> {
    let mut next = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == UPGRADE_FROM {
            args.next();
        } else {
            next.push(arg);
        }
    }
    next.push(UPGRADE_FROM.into());
    next.push(socket.into());
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_process_gets_the_same_arguments_and_one_upgrade_from() {
        let args = [
            "--config",
            "lb.conf",
            "--upgrade-from",
            "/run/old.sock",
            "--workers",
            "2",
        ];
        let next = next_args(
            args.iter().map(OsString::from).collect(),
            Path::new("/run/p.sock"),
        );
        let next: Vec<_> = next
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            next,
            [
                "--config",
                "lb.conf",
                "--workers",
                "2",
                "--upgrade-from",
                "/run/p.sock"
            ]
        );
    }

    #[test]
    fn argv0_is_made_absolute_without_following_symlinks() {
        assert_eq!(
            resolve(Path::new("/usr/sbin/proxy")),
            Some(PathBuf::from("/usr/sbin/proxy"))
        );
        let here = std::env::current_dir().expect("a working directory");
        assert_eq!(
            resolve(Path::new("bin/proxy")),
            Some(here.join("bin/proxy"))
        );
        assert_eq!(resolve(Path::new("")), None);
        let sh = resolve(Path::new("sh")).expect("sh is on PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
    }
}
