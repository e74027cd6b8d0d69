//! Telling systemd (`sd_notify(3)`, without libsystemd): `READY=1` once
//! the proxy accepts, and after an upgrade `MAINPID=` so that the unit
//! follows the new process when the old one exits.
//!
//! With `Type=notify`, systemd waits for `READY=1` before it counts the
//! service as started, and takes the exit of the main process as the
//! service's end. After an upgrade the new process is not the main one:
//! it sends `MAINPID=<its pid>` (which needs `NotifyAccess=all`, since it
//! is not the main process yet) *before* it tells the old one "taken", so
//! that systemd knows of it before the old one can exit. systemd reads its
//! notification socket before it handles a child's exit, for this reason.
//!
//! Nothing happens without `$NOTIFY_SOCKET` (not started by systemd).

use std::io;
use std::os::unix::net::UnixDatagram;

/// Sends `state` (lines like `READY=1`) to systemd, if it is listening.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&target.to_string_lossy(), state) {
        crate::warn!("sd_notify to {}: {e}", target.to_string_lossy());
    }
}

fn send(target: &str, state: &str) -> io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    match target.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            socket.send_to(state.as_bytes(), target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reaches_the_notify_socket() {
        let path = std::env::temp_dir().join(format!("proxy-notify-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let systemd = UnixDatagram::bind(&path).expect("bind");
        send(&path.to_string_lossy(), "MAINPID=42\nREADY=1").expect("send");
        let mut buf = [0u8; 64];
        let n = systemd.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"MAINPID=42\nREADY=1");
        let _ = std::fs::remove_file(&path);
    }
}
