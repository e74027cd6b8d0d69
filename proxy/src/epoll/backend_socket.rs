//! A backend's socket between its connect and its relay, as a guard: if
//! the connection ends before the relay takes the socket (a graceful stop
//! that cuts it mid-handshake or while its PROXY header is sent, a refusal
//! after connecting), the socket closes with a reset, not a FIN, so that
//! the backend cannot take an aborted connection for a complete, empty one.
//!
//! Its own file so that both sides of it can import it one way: connect.rs
//! makes one (`Backend::new`), connection.rs holds it until the relay
//! (`Backend::into_relay`).

use runtime::net::{Connecting, TcpStream};

/// A backend socket from the start of its connect until the relay takes
/// it ([`Backend::into_relay`]): dropped before that (a graceful stop that
/// cuts the connection mid-handshake or while its PROXY header is sent, a
/// refusal after connecting), it closes with a reset, not a FIN, so that
/// the backend cannot take an aborted connection for a complete, empty one.
/// The reset is set only then: a connection that reaches its relay pays no
/// system call for it.
#[derive(Debug)]
pub(super) struct Backend {
    connecting: Option<Connecting>,
}

impl Backend {
    pub(super) fn new(connecting: Connecting) -> Backend {
        Backend {
            connecting: Some(connecting),
        }
    }

    /// The socket, connected or still connecting.
    pub(super) fn stream(&self) -> &TcpStream {
        self.connecting
            .as_ref()
            .map(Connecting::stream)
            .expect("a Backend holds its socket until into_relay")
    }

    /// Waits for the handshake (see [`Connecting::handshake`]).
    pub(super) async fn handshake(&mut self) -> std::io::Result<()> {
        match &mut self.connecting {
            Some(connecting) => connecting.handshake().await,
            None => Ok(()),
        }
    }

    /// The connected socket, for the relay: from here on it closes the
    /// relay's way (a FIN passed on, or a reset passed on).
    pub(super) fn into_relay(mut self) -> TcpStream {
        self.connecting
            .take()
            .map(Connecting::into_stream)
            .expect("a Backend holds its socket until into_relay")
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(connecting) = &self.connecting {
            let _ = connecting.stream().set_reset_on_close();
        }
    }
}
