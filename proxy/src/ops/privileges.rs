//! Dropping root: `user ID [GROUP]` in `global` (nginx's `user USER
//! [GROUP]`; HAProxy's `user` / `uid` and `group` / `gid`). The proxy is started as root
//! so that it can bind ports below 1024, open its files and raise its
//! descriptor limit; once every listener is bound and every file open, and
//! before it serves anyone, it becomes that user for good.
//!
//! ```text
//!   root: parse, raise RLIMIT_NOFILE, upgrade socket (chown), take or bind every
//!         listener, admin listener, access log (chown)
//!   drop: setgroups (the user's groups) ─▶ setresgid ─▶ setresuid ─▶ root is gone for good
//!   user: workers, health checks, admin thread, signals: serving starts
//! ```
//!
//! What keeps working as that user, and what it needs:
//!
//! - **SIGHUP** reads the file again as that user (the process has no
//!   root left to read it with, as nginx's master would): the file must be
//!   readable by it (0644, the default of /etc, is). A reload may bind new
//!   listen addresses, but not a port below 1024.
//! - **SIGUSR2** starts the binary again, and the new process runs as that
//!   user from the start: it takes the listeners over the upgrade socket
//!   (no bind needed), and puts its own socket in the socket's directory,
//!   which must therefore be the user's ([`RunAs::writable_by`] checks it at
//!   startup); the socket file made by root is handed to the user.
//! - **SIGUSR1** reopens the access log as that user: the file opened at
//!   startup is handed to it (nginx does the same with its log files), and
//!   a new one, after a rotation renamed the old, is made in its directory,
//!   which the user must be able to write to.
//!
//! Failing to drop (not root, an id the kernel refuses) stops the start
//! with an error: running as root when the file says otherwise would be
//! worse than not running.

use std::ffi::CString;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use nix::unistd::{self, Gid, Group, Uid, User};

/// Who the proxy runs as once its listeners are bound (`user ID [GROUP]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunAs {
    /// The user: as written (a name, or a number) and its uid.
    pub user: Option<(String, u32)>,
    /// The group written after the user, or else the user's primary group:
    /// as written (or the group's name) and its gid.
    pub group: Option<(String, u32)>,
}

/// A user found for `user WORD`: its uid, its name in the user database
/// (for its supplementary groups), and its primary group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundUser {
    /// Its uid.
    pub uid: u32,
    /// Its name, if the user database has it.
    pub name: Option<String>,
    /// Its primary group, if the user database has it.
    pub gid: Option<u32>,
}

/// The user `word` names: a name the user database knows, or a number
/// (which it may not know).
pub fn find_user(word: &str) -> Result<FoundUser, String> {
    let entry = match word.parse::<u32>() {
        Ok(uid) => User::from_uid(Uid::from_raw(uid)),
        Err(_) => User::from_name(word),
    };
    match (entry, word.parse::<u32>()) {
        (Ok(Some(user)), _) => Ok(FoundUser {
            uid: user.uid.as_raw(),
            name: Some(user.name),
            gid: Some(user.gid.as_raw()),
        }),
        (Ok(None), Ok(uid)) => Ok(FoundUser {
            uid,
            name: None,
            gid: None,
        }),
        (Ok(None), Err(_)) => Err(format!(
            "no user '{word}' in the user database (getent passwd {word}); write an existing \
             user, or a uid"
        )),
        (Err(e), _) => Err(format!("cannot look user '{word}' up: {e}")),
    }
}

/// The gid `word` names: a group the database knows, or a number.
pub fn find_group(word: &str) -> Result<u32, String> {
    if let Ok(gid) = word.parse::<u32>() {
        return Ok(gid);
    }
    match Group::from_name(word) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(format!(
            "no group '{word}' in the group database (getent group {word}); write an existing \
             group, or a gid"
        )),
        Err(e) => Err(format!("cannot look group '{word}' up: {e}")),
    }
}

/// The name of group `gid`, or the number.
pub fn group_name(gid: u32) -> String {
    match Group::from_gid(Gid::from_raw(gid)) {
        Ok(Some(group)) => group.name,
        _ => gid.to_string(),
    }
}

impl RunAs {
    /// No `user`: the proxy stays who it was started as.
    pub fn is_empty(&self) -> bool {
        self.user.is_none() && self.group.is_none()
    }

    /// `user nobody (uid 65534), group nogroup (gid 65534)`, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some((name, uid)) = &self.user {
            parts.push(format!("user {name} (uid {uid})"));
        }
        if let Some((name, gid)) = &self.group {
            parts.push(format!("group {name} (gid {gid})"));
        }
        parts.join(", ")
    }

    /// Becomes this user and group for good (module docs). Already so (a
    /// process started by an upgrade, or by a service manager as that
    /// user): nothing to do. Not root otherwise: an error.
    pub fn apply(&self) -> io::Result<Applied> {
        if self.is_empty() {
            return Ok(Applied::Nothing);
        }
        let uid = self.user.as_ref().map(|(_, uid)| Uid::from_raw(*uid));
        let gid = self.group.as_ref().map(|(_, gid)| Gid::from_raw(*gid));
        if !unistd::geteuid().is_root() {
            return self.already(uid, gid);
        }
        if let Some(gid) = gid {
            self.set_groups(gid)?;
            unistd::setresgid(gid, gid, gid).map_err(|e| self.failed("setresgid", e))?;
        }
        if let Some(uid) = uid {
            unistd::setresuid(uid, uid, uid).map_err(|e| self.failed("setresuid", e))?;
            // Paranoia, as OpenSSH and others: root must be gone for good.
            if !uid.is_root() && unistd::setuid(Uid::from_raw(0)).is_ok() {
                return Err(io::Error::other(format!(
                    "after switching to {}, the process could become root again; not serving",
                    self.describe()
                )));
            }
        }
        Ok(Applied::Dropped)
    }

    /// Not root: fine if the process runs as this user and group already.
    fn already(&self, uid: Option<Uid>, gid: Option<Gid>) -> io::Result<Applied> {
        let user_ok = uid.is_none_or(|u| u == unistd::getuid() && u == unistd::geteuid());
        let group_ok = gid.is_none_or(|g| g == unistd::getgid() && g == unistd::getegid());
        if user_ok && group_ok {
            return Ok(Applied::AlreadySo);
        }
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "cannot switch to {}: the proxy runs as uid {} and gid {}, not as root; start it \
                 as root (it binds its listeners, then switches), or as that user",
                self.describe(),
                unistd::getuid(),
                unistd::getgid()
            ),
        ))
    }

    /// The supplementary groups: the user's, from the group database
    /// (initgroups, as nginx), or only `gid` for a user it does not know.
    fn set_groups(&self, gid: Gid) -> io::Result<()> {
        let name = self
            .user
            .as_ref()
            .and_then(|(word, _)| find_user(word).ok()?.name);
        match name.and_then(|n| CString::new(n).ok()) {
            Some(name) => unistd::initgroups(&name, gid).map_err(|e| self.failed("initgroups", e)),
            None => unistd::setgroups(&[gid]).map_err(|e| self.failed("setgroups", e)),
        }
    }

    fn failed(&self, call: &str, e: nix::Error) -> io::Error {
        let e = io::Error::from(e);
        io::Error::new(
            e.kind(),
            format!("cannot switch to {}: {call}: {e}", self.describe()),
        )
    }

    /// Hands the file at `path`, made by root at startup, to this user and
    /// group, so that it can still use it (the upgrade socket). Nothing to
    /// do unless the process is root.
    pub fn hand_over(&self, path: &Path) -> io::Result<()> {
        if self.is_empty() || !unistd::geteuid().is_root() {
            return Ok(());
        }
        let uid = self.user.as_ref().map(|(_, uid)| *uid);
        let gid = self.group.as_ref().map(|(_, gid)| *gid);
        std::os::unix::fs::chown(path, uid, gid).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot give {} to {}: {e}", path.display(), self.describe()),
            )
        })
    }

    /// Whether this user may make files in `dir` (owner with `rwx`, or a
    /// sticky directory open to all, like /tmp); `None` without `user`.
    pub fn writable_by(&self, dir: &Path) -> io::Result<Option<bool>> {
        let Some((_, uid)) = &self.user else {
            return Ok(None);
        };
        if *uid == 0 {
            return Ok(Some(true));
        }
        let meta = std::fs::metadata(dir)?;
        let mode = meta.permissions().mode();
        let owner = meta.uid() == *uid && mode & 0o300 == 0o300;
        let everyone = mode & 0o1003 == 0o1003;
        Ok(Some(owner || everyone))
    }
}

/// What [`RunAs::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// No `user` or `group`.
    Nothing,
    /// Switched from root.
    Dropped,
    /// The process ran as that user and group already.
    AlreadySo,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_groups_are_found_by_name_or_number() {
        let root = find_user("root").expect("root is in every user database");
        assert_eq!(
            (root.uid, root.name.as_deref(), root.gid),
            (0, Some("root"), Some(0))
        );
        let by_number = find_user("0").expect("uid 0");
        assert_eq!(by_number.name.as_deref(), Some("root"));
        // A number the database does not know is taken as it is.
        let unknown = find_user("4000000000").expect("a bare uid");
        assert_eq!(
            (unknown.uid, unknown.name, unknown.gid),
            (4_000_000_000, None, None)
        );
        let e = find_user("no-such-user-here").expect_err("unknown");
        assert!(e.contains("no user 'no-such-user-here'"), "{e}");
        assert_eq!(find_group("0"), Ok(0));
        assert_eq!(find_group("root"), Ok(0));
        assert!(find_group("no-such-group-here").is_err());
        assert_eq!(group_name(0), "root");
    }

    #[test]
    fn a_process_already_running_as_the_user_has_nothing_to_drop() {
        let me = RunAs {
            user: Some(("me".into(), unistd::getuid().as_raw())),
            group: Some(("us".into(), unistd::getgid().as_raw())),
        };
        if !unistd::geteuid().is_root() {
            assert_eq!(me.apply().expect("already so"), Applied::AlreadySo);
            let other = RunAs {
                user: Some(("other".into(), unistd::getuid().as_raw() + 1)),
                group: None,
            };
            let e = other.apply().expect_err("not root");
            assert!(e.to_string().contains("not as root"), "{e}");
        }
        assert_eq!(RunAs::default().apply().expect("nothing"), Applied::Nothing);
        assert_eq!(
            me.describe(),
            format!(
                "user me (uid {}), group us (gid {})",
                unistd::getuid(),
                unistd::getgid()
            )
        );
    }
}
