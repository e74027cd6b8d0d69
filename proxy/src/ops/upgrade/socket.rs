//! The handover's Unix socket: the file the old process listens on, made
//! so that only the proxy's own user can use it, and one connection on it,
//! that carries [`Message`]s and descriptors and knows who is at the other
//! end.
//!
//! ## Who may connect
//!
//! Whoever receives the listeners can answer (or spy on) every client, so
//! three fences stand in the way of anyone else:
//!
//! - the socket file is created `0600` (under a umask of `0177`, so it never
//!   exists with wider rights, then `chmod` again in case the file system
//!   ignores the umask): connecting needs write permission on it;
//! - its directory must not let others swap it: owned by us, root, or the
//!   user the proxy switches to after startup (`user` in `global`), and
//!   not writable by group or others unless sticky (`/tmp`, `/run/user`
//!   are fine, a world-writable directory without the sticky bit is not);
//! - both ends check the other's user with `SO_PEERCRED`: a peer whose uid
//!   is not ours is refused and logged, whichever side it is on (a new
//!   process does not take descriptors from an impostor listening at the
//!   path either); root is let through (it could take the sockets anyway),
//!   and so is, for a process started as root, the user it switches to.
//!
//! ## Replacing the file without a gap
//!
//! The new process makes its own socket for the next upgrade under a
//! temporary name beside the path, and renames it over the path once it
//! has taken over: `rename(2)` replaces the old process's file atomically,
//! so the path always names a live socket. At a plain stop, a process
//! removes the path only if it still names its own file (same inode).

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::socket::{
    self as sock, AddressFamily, Backlog, SockFlag, SockType, UnixAddr, sockopt,
};
use nix::sys::stat::{Mode, umask};
use nix::sys::time::TimeVal;
use nix::unistd::geteuid;
use std::os::fd::AsRawFd;

use super::wire::Message;

/// The longest message read: 253 tags of long names fit.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The listening socket file of a process that offers its listeners.
#[derive(Debug)]
pub struct SocketFile {
    listener: OwnedFd,
    path: PathBuf,
    /// The inode the path had when this file was put there.
    identity: (u64, u64),
    /// Renamed over the path it is for: from then on, only a plain stop
    /// removes it ([`SocketFile::remove_if_ours`]).
    in_place: bool,
}

/// One connection on the handover socket: blocking, with deadlines.
#[derive(Debug)]
pub struct Endpoint {
    socket: OwnedFd,
}

fn nix_error(what: String) -> impl FnOnce(nix::Error) -> io::Error {
    move |e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("{what}: {e}"))
    }
}

/// Refuses a directory that others could use to swap the socket file:
/// it must be ours, root's, or (`user`) the user the proxy switches to
/// after startup (`user` in `global`), whose successors make their sockets
/// there.
fn check_directory(path: &Path, user: Option<u32>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let meta = fs::metadata(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "upgrade socket {}: its directory {}: {e}",
                path.display(),
                dir.display()
            ),
        )
    })?;
    let mode = meta.permissions().mode();
    let owner_ok = meta.uid() == geteuid().as_raw() || meta.uid() == 0 || Some(meta.uid()) == user;
    let others_write = mode & 0o022 != 0;
    let sticky = mode & 0o1000 != 0;
    if !owner_ok || (others_write && !sticky) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "upgrade socket {}: its directory {} (mode {:o}, owner uid {}) lets others replace \
                 the socket; use a directory of the proxy's user, like /run/proxy (mode 0700)",
                path.display(),
                dir.display(),
                mode & 0o7777,
                meta.uid()
            ),
        ));
    }
    Ok(())
}

fn seqpacket() -> io::Result<OwnedFd> {
    sock::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(nix_error("a Unix socket".into()))
}

fn unix_addr(path: &Path) -> io::Result<UnixAddr> {
    UnixAddr::new(path).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "upgrade socket {}: {e} (a Unix socket path has at most 107 bytes)",
                path.display()
            ),
        )
    })
}

impl SocketFile {
    /// Makes the socket file at a temporary name beside `path` (mode 0600,
    /// in a directory others cannot write to: ours, root's, or that of
    /// `user`, the uid the proxy switches to), listening;
    /// [`SocketFile::put_in_place`] renames it over `path`. A fresh start
    /// (`replacing` false) refuses a `path` on which a process is
    /// listening, and anything that is not a socket.
    pub fn create(path: &Path, replacing: bool, user: Option<u32>) -> io::Result<SocketFile> {
        check_directory(path, user)?;
        match fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "upgrade socket {}: the path exists and is not a socket; remove it or \
                         choose another",
                        path.display()
                    ),
                ));
            }
            Ok(_) if !replacing && Endpoint::connect(path).is_ok() => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "upgrade socket {}: a running proxy listens there; to replace it, start with \
                         --upgrade-from {} (or send it SIGUSR2)",
                        path.display(),
                        path.display()
                    ),
                ));
            }
            _ => {}
        }
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(format!(".{}.new", std::process::id()));
        let temporary = PathBuf::from(temporary);
        let _ = fs::remove_file(&temporary);
        let listener = seqpacket()?;
        let addr = unix_addr(&temporary)?;
        // The umask is the process's: this runs before any other thread
        // exists (control.rs), so nothing else creates a file meanwhile.
        let before = umask(Mode::from_bits_truncate(0o177));
        let bound = sock::bind(listener.as_raw_fd(), &addr);
        umask(before);
        bound.map_err(nix_error(format!("upgrade socket {}", temporary.display())))?;
        fs::set_permissions(&temporary, fs::Permissions::from_mode(0o600))?;
        sock::listen(&listener, Backlog::new(4).unwrap_or(Backlog::MAXCONN))
            .map_err(nix_error(format!("upgrade socket {}", temporary.display())))?;
        let meta = fs::metadata(&temporary)?;
        let file = SocketFile {
            listener,
            path: temporary,
            identity: (meta.dev(), meta.ino()),
            in_place: false,
        };
        Ok(file)
    }

    /// Renames the socket file over the path it is for: from now on a new
    /// process that connects there reaches this one.
    pub fn put_in_place(&mut self, path: &Path) -> io::Result<()> {
        fs::rename(&self.path, path).map_err(|e| {
            let _ = fs::remove_file(&self.path);
            io::Error::new(e.kind(), format!("upgrade socket {}: {e}", path.display()))
        })?;
        self.path = path.to_path_buf();
        self.in_place = true;
        Ok(())
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the next connection (blocking).
    pub fn accept(&self) -> io::Result<Endpoint> {
        loop {
            match sock::accept4(self.listener.as_fd(), SockFlag::SOCK_CLOEXEC) {
                Ok(socket) => return Ok(Endpoint { socket }),
                Err(nix::Error::EINTR | nix::Error::ECONNABORTED) => continue,
                Err(e) => {
                    return Err(nix_error(format!("upgrade socket {}", self.path.display()))(e));
                }
            }
        }
    }

    /// Removes the file if the path still names it (a successor may have
    /// put its own there).
    pub fn remove_if_ours(&self) {
        if let Ok(meta) = fs::symlink_metadata(&self.path) {
            if (meta.dev(), meta.ino()) == self.identity {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

impl Drop for SocketFile {
    /// A file never put in place (the process failed before it took over)
    /// does not stay behind under its temporary name.
    fn drop(&mut self) {
        if !self.in_place {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Endpoint {
    /// Connects to the socket at `path` (blocking).
    pub fn connect(path: &Path) -> io::Result<Endpoint> {
        let socket = seqpacket()?;
        sock::connect(socket.as_raw_fd(), &unix_addr(path)?)
            .map_err(nix_error(format!("upgrade socket {}", path.display())))?;
        Ok(Endpoint { socket })
    }

    /// Bounds every send and receive from now on by `limit`.
    pub fn set_deadline(&self, limit: Duration) -> io::Result<()> {
        let time = TimeVal::new(limit.as_secs() as i64, limit.subsec_micros() as i64);
        sock::setsockopt(&self.socket, sockopt::ReceiveTimeout, &time)
            .and_then(|()| sock::setsockopt(&self.socket, sockopt::SendTimeout, &time))
            .map_err(nix_error("upgrade socket: timeouts".into()))
    }

    /// The uid and pid of the process at the other end (`SO_PEERCRED`).
    pub fn peer(&self) -> io::Result<(u32, i32)> {
        let cred = sock::getsockopt(&self.socket, sockopt::PeerCredentials)
            .map_err(nix_error("upgrade socket: SO_PEERCRED".into()))?;
        Ok((cred.uid(), cred.pid()))
    }

    /// Refuses a peer that does not run as our user, root, or `user` (the
    /// user a process started as root switches to: its predecessor may run
    /// as that user already).
    pub fn check_peer(&self, user: Option<u32>) -> io::Result<i32> {
        let (uid, pid) = self.peer()?;
        if Some(uid) != user {
            check_uid(uid, geteuid().as_raw(), pid)?;
        }
        Ok(pid)
    }

    /// Sends one message with `fds` attached.
    pub fn send(&self, message: &Message, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        runtime::fd_passing::send(self.socket.as_fd(), &message.encode(), fds)?;
        Ok(())
    }

    /// Receives one message and the descriptors attached to it. The peer
    /// gone, or a message that is not ours, is an error that says so.
    pub fn recv(&self) -> io::Result<(Message, Vec<OwnedFd>)> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let got = runtime::fd_passing::recv(self.socket.as_fd(), &mut buf)?;
        if got.len == 0 && got.fds.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the other process closed the upgrade socket",
            ));
        }
        if got.truncated {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a handover message too long; refused",
            ));
        }
        let message = Message::decode(&buf[..got.len])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok((message, got.fds))
    }
}

/// The `SO_PEERCRED` rule: the peer runs as `ours`, or as root (who could
/// take the sockets anyway), or it is refused.
pub fn check_uid(peer: u32, ours: u32, pid: i32) -> io::Result<()> {
    if peer == ours || peer == 0 {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "upgrade socket: pid {pid} runs as uid {peer}, not the proxy's uid {ours}; refused"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("proxy-upgrade-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).expect("a directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("0700");
        dir
    }

    // The socket file is the proxy's user's alone, and a peer of
    // another uid is refused (the other uid as a unit: the tests run as one).
    #[test]
    fn the_socket_file_is_0600_and_a_peer_of_another_uid_is_refused() {
        let dir = temp_dir("mode");
        let path = dir.join("upgrade.sock");
        let mut file = SocketFile::create(&path, false, None).expect("create");
        file.put_in_place(&path).expect("in place");
        let meta = fs::symlink_metadata(&path).expect("the file");
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let client = Endpoint::connect(&path).expect("connect");
        let server = file.accept().expect("accept");
        assert_eq!(
            server.check_peer(None).expect("our own uid") as u32,
            std::process::id()
        );
        assert_eq!(client.peer().expect("peer").0, geteuid().as_raw());
        check_uid(0, 1000, 7).expect("root may");
        let e = check_uid(4242, 1000, 7).expect_err("another uid");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("pid 7 runs as uid 4242"), "{e}");
        // A second fresh start on a live socket is refused.
        let e = SocketFile::create(&path, false, None).expect_err("in use");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        file.remove_if_ours();
        assert!(!path.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_others_can_write_to_is_refused() {
        let dir = temp_dir("open");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("0777");
        let e = SocketFile::create(&dir.join("upgrade.sock"), false, None).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            e.to_string().contains("lets others replace the socket"),
            "{e}"
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).expect("sticky");
        SocketFile::create(&dir.join("upgrade.sock"), false, None).expect("sticky is fine");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn messages_and_descriptors_cross_and_a_closed_peer_is_said() {
        let dir = temp_dir("cross");
        let path = dir.join("upgrade.sock");
        let mut file = SocketFile::create(&path, false, None).expect("create");
        file.put_in_place(&path).expect("in place");
        let client = Endpoint::connect(&path).expect("connect");
        let server = file.accept().expect("accept");
        server
            .set_deadline(Duration::from_secs(10))
            .expect("deadline");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        client
            .send(&Message::Hello { version: 1, pid: 3 }, &[listener.as_fd()])
            .expect("send");
        let (message, fds) = server.recv().expect("recv");
        assert_eq!(message, Message::Hello { version: 1, pid: 3 });
        let copy = std::net::TcpListener::from(fds.into_iter().next().expect("a descriptor"));
        assert_eq!(copy.local_addr().ok(), listener.local_addr().ok());
        drop(client);
        let e = server.recv().expect_err("closed");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let _ = fs::remove_dir_all(&dir);
    }
}
