//! The admin socket (`admin-socket PATH`): a Unix stream socket, mode
//! 0600, that takes one command of HAProxy's runtime API per connection
//! (its `stats socket ... level admin`), answers, and closes:
//!
//! ```text
//!   $ echo "set server web/s1 state drain" | socat stdio /run/proxy/admin.sock
//!   web/s1: state drain (was ready)
//!   $ echo "set weight web/s9 3" | socat stdio /run/proxy/admin.sock
//!   error: no server 's9' in frontend 'web' (did you mean 's1'?); its servers are: s1, s2
//! ```
//!
//! Reaching the file is the right to act: it is made `0600` at a temporary
//! name beside the path, then renamed over it, and each connection's peer
//! must be our own user or root (`SO_PEERCRED`), whoever slipped in before
//! the `chmod`. An answer that is a refusal starts with `error: `.
//!
//! Its own thread accepts; each connection gets a thread of its own, at
//! most [`MAX_CLIENTS`] at once (one more is told so and closed), with a
//! deadline of one second to send its line of at most [`MAX_LINE`] bytes:
//! a slow or silent client holds only its own thread, never the next
//! command or the HTTP endpoint. At a stop the file is removed if it is
//! still ours (a new process of an upgrade renamed its own over it).

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt};
use nix::unistd::geteuid;

use crate::ops::metrics::exposition::Published;

use super::actions::{self, Reply};
use super::http_action::Operator;

/// Connections served at once.
pub const MAX_CLIENTS: usize = 16;

/// The longest command line.
pub const MAX_LINE: usize = 1024;

/// How long a client has to send its line.
const DEADLINE: Duration = Duration::from_secs(1);

/// The admin socket's file, while this process serves on it.
#[derive(Debug)]
pub struct AdminSocket {
    path: PathBuf,
    /// The file's (device, inode), to remove it only if still ours.
    identity: (u64, u64),
}

impl AdminSocket {
    /// Removes the file if the path still names ours.
    pub fn remove_if_ours(&self) {
        if let Ok(meta) = fs::symlink_metadata(&self.path) {
            if (meta.dev(), meta.ino()) == self.identity {
                let _ = fs::remove_file(&self.path);
            }
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes the socket at `path` (replacing a stale file or an older
/// process's socket there) and serves it on a thread named `admin-socket`.
pub fn start(
    path: &Path,
    registry: Arc<Published>,
    operator: Arc<Operator>,
) -> io::Result<AdminSocket> {
    let what =
        |e: io::Error| io::Error::new(e.kind(), format!("admin-socket {}: {e}", path.display()));
    if let Ok(meta) = fs::symlink_metadata(path) {
        if !std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
            return Err(what(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket; remove it or choose another",
            )));
        }
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.new", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let _ = fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary).map_err(what)?;
    let placed = fs::set_permissions(&temporary, fs::Permissions::from_mode(0o600))
        .and_then(|()| fs::rename(&temporary, path));
    if let Err(e) = placed {
        let _ = fs::remove_file(&temporary);
        return Err(what(e));
    }
    let meta = fs::symlink_metadata(path).map_err(what)?;
    thread::Builder::new()
        .name("admin-socket".into())
        .spawn(move || accept_forever(&listener, &registry, &operator))
        .map_err(what)?;
    Ok(AdminSocket {
        path: path.to_path_buf(),
        identity: (meta.dev(), meta.ino()),
    })
}

/// Accepts until the process ends, a thread per connection.
fn accept_forever(listener: &UnixListener, registry: &Arc<Published>, operator: &Arc<Operator>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            // EMFILE and the like: a pause, then on.
            thread::sleep(Duration::from_millis(100));
            continue;
        };
        if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            busy.fetch_sub(1, Ordering::AcqRel);
            let _ = stream.set_write_timeout(Some(DEADLINE));
            let _ = stream.write_all(b"error: too many admin socket clients at once; retry\n");
            continue;
        }
        let (registry, operator, busy) = (registry.clone(), operator.clone(), busy.clone());
        let spawned = thread::Builder::new()
            .name("admin-client".into())
            .spawn(move || {
                serve(stream, &registry, &operator);
                busy.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            crate::warn!("admin-socket: cannot start a thread for a client: {e}");
        }
    }
}

/// One connection: its peer checked, its line read, answered, closed.
fn serve(mut stream: UnixStream, registry: &Published, operator: &Operator) {
    if let Err(e) = check_peer(&stream) {
        crate::warn!("admin-socket: {e}");
        return;
    }
    let _ = stream.set_read_timeout(Some(DEADLINE));
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let answer = match read_line(&mut stream) {
        Ok(line) => match actions::parse_command(&line) {
            Ok(action) => operator.perform(&action, registry),
            Err(answer) => answer,
        },
        Err(answer) => answer,
    };
    let text = match answer.status {
        200 => answer.text,
        _ => format!("error: {}", answer.text),
    };
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Closing with unread bytes would reset the connection, and the reset
    // can overtake the answer: what the client still sends is read and
    // dropped first (a second and 64 KiB at most).
    let _ = io::copy(&mut (&stream).take(LINGER_BYTES), &mut io::sink());
}

/// How much a client's extra bytes are read before the close.
const LINGER_BYTES: u64 = 64 * 1024;

/// The first line (to its newline, or to the client's end of writing).
fn read_line(stream: &mut UnixStream) -> Result<String, Reply> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Reply::new(408, "no command line within 1s"));
            }
            Err(e) => return Err(Reply::new(400, format!("reading the command: {e}"))),
        }
        if let Some(end) = line.iter().position(|&b| b == b'\n') {
            line.truncate(end);
            break;
        }
        if line.len() > MAX_LINE {
            return Err(Reply::new(
                413,
                format!("a command is at most {MAX_LINE} bytes"),
            ));
        }
    }
    String::from_utf8(line).map_err(|_| Reply::new(400, "a command is text"))
}

/// Our own user or root only.
fn check_peer(stream: &UnixStream) -> io::Result<()> {
    let creds = getsockopt(stream, sockopt::PeerCredentials).map_err(io::Error::from)?;
    let (uid, ours) = (creds.uid(), geteuid().as_raw());
    match uid == ours || uid == 0 {
        true => Ok(()),
        false => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "a client of uid {uid} (pid {}) refused: only uid {ours} or root",
                creds.pid()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::exposition::Registry;
    use crate::policy::health::HealthBoard;
    use std::net::SocketAddr;

    fn ask(path: &Path, line: &[u8]) -> String {
        let mut stream = UnixStream::connect(path).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.write_all(line).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        answer
    }

    #[test]
    fn commands_are_answered_and_the_file_is_0600() {
        let dir = std::env::temp_dir().join(format!("admin-socket-{}", std::process::id()));
        let _ = fs::create_dir_all(&dir);
        let path = dir.join("admin.sock");
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let board = Arc::new(HealthBoard::new("web", &[(addr, None)]));
        let published = Published::new(Registry::new(&[("web".into(), vec![addr], board)], 1));
        let socket = start(&path, published, Arc::default()).expect("starts");
        let mode = fs::metadata(&path).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(ask(&path, b"help\n").contains("show servers state"));
        let wrong = ask(&path, b"set weight web/s9 3\n");
        assert!(wrong.starts_with("error: no server 's9'"), "{wrong}");
        let junk = ask(&path, &[b'x'; 4096]);
        assert!(junk.starts_with("error: "), "{junk}");
        // A silent client holds nothing: the next is answered.
        let _silent = UnixStream::connect(&path).expect("connect");
        assert!(ask(&path, b"show servers state\n").starts_with("# frontend"));
        socket.remove_if_ours();
        assert!(!path.exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
