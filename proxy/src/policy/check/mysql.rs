//! `option mysql-check [user NAME]`: the start of a MySQL / MariaDB
//! session, from the client/server protocol's description (MySQL's
//! "Connection Phase" pages: Initial Handshake, HandshakeResponse41,
//! OK_Packet, ERR_Packet, AuthSwitchRequest, COM_QUIT; MariaDB's
//! "Connection" pages say the same for it).
//!
//! Every packet is a 3-byte little-endian length, a sequence number, then
//! the payload. The server speaks first:
//!
//! ```text
//!   server ─▶ Initial Handshake: 0x0a, version NUL, thread id, capabilities...
//!          or ERR_Packet: 0xff, error code, '#' SQL state, message
//!   without a user: the handshake alone is UP (its version is shown), ERR is DOWN
//!   with a user:
//!   check  ─▶ HandshakeResponse41 (seq 1): capabilities, max packet, charset,
//!             23 zero bytes, the user NUL, an empty password
//!   server ─▶ OK_Packet (0x00): UP, and the check sends COM_QUIT
//!          or ERR_Packet (0xff): DOWN ("Access denied for user ...")
//!          or AuthSwitchRequest (0xfe, plugin NUL, data): the check answers
//!             for an empty password (mysql_native_password: nothing;
//!             caching_sha2_password: one NUL byte), then OK or ERR as above
//! ```
//!
//! The user must exist without a password (`CREATE USER 'haproxy'@'HOST'`),
//! HAProxy's rule. A check without a user leaves each session before its
//! handshake ends, which the server counts as an aborted connect: with
//! enough of them, and no good session from the proxy's address in
//! between, it blocks that address (`max_connect_errors`); with a user,
//! every session ends with COM_QUIT, cleanly.

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, got, shown};

// Capability flags of the HandshakeResponse41.
const CLIENT_LONG_PASSWORD: u32 = 0x0000_0001;
const CLIENT_PROTOCOL_41: u32 = 0x0000_0200;
const CLIENT_SECURE_CONNECTION: u32 = 0x0000_8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x0008_0000;

/// utf8mb4_general_ci, a character set every server since 5.5 has.
const CHARSET: u8 = 45;

/// The most a check reads of one packet.
const MAX_PACKET: usize = 8192;

/// COM_QUIT: a 1-byte payload, sequence 0.
const COM_QUIT: &[u8] = &[1, 0, 0, 0, 1];

/// `option mysql-check [user NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MysqlCheck {
    /// `user NAME`: log in as this user (no password), then quit.
    pub user: Option<String>,
}

impl MysqlCheck {
    /// A check from its first step.
    pub fn start(&self) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            check: self,
            stage: Stage::Greeting,
            server: String::new(),
            switched: false,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for the Initial Handshake.
    Greeting,
    /// The HandshakeResponse41 (or the auth switch's answer) is sent:
    /// waiting for OK, ERR or a switch.
    Answer,
}

struct Run<'a> {
    check: &'a MysqlCheck,
    stage: Stage,
    /// The server's version, from its handshake.
    server: String,
    /// An AuthSwitchRequest was answered already (a second is refused).
    switched: bool,
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        let (sequence, payload, used) = match packet(inbox.bytes()) {
            Packet::Incomplete if inbox.is_final() => {
                let what = self.awaiting();
                let detail = format!("expected {what}, got {}", got(inbox));
                return Next::done(Verdict::failed(Status::L7Rsp, detail));
            }
            Packet::Incomplete => return Next::Receive,
            Packet::Bad(detail) => return Next::done(Verdict::failed(Status::L7Rsp, detail)),
            Packet::Whole(sequence, payload, used) => (sequence, payload.to_vec(), used),
        };
        inbox.consume(used);
        if payload.first() == Some(&0xff) {
            return Next::done(Verdict::failed(Status::L7Sts, err_packet(&payload)));
        }
        match self.stage {
            Stage::Greeting => self.greeting(&payload),
            Stage::Answer => self.answer(sequence, &payload),
        }
    }

    fn awaiting(&self) -> String {
        match self.stage {
            Stage::Greeting => "mysql: the server's handshake packet".to_string(),
            Stage::Answer => "mysql: the answer to the login (OK or ERR)".to_string(),
        }
    }
}

impl Run<'_> {
    fn greeting(&mut self, payload: &[u8]) -> Next {
        let Some(handshake) = Handshake::parse(payload) else {
            let detail = format!("mysql: not a handshake packet: {}", shown(payload));
            return Next::done(Verdict::failed(Status::L7Rsp, detail));
        };
        self.server = handshake.version;
        let Some(user) = &self.check.user else {
            return Next::done(Verdict::passed(format!("mysql: {} handshake", self.server)));
        };
        if handshake.capabilities & CLIENT_PROTOCOL_41 == 0 {
            let detail = format!("mysql: {} speaks a protocol before 4.1", self.server);
            return Next::done(Verdict::failed(Status::L7Rsp, detail));
        }
        self.stage = Stage::Answer;
        Next::Send(handshake_response(user, handshake.capabilities))
    }

    fn answer(&mut self, sequence: u8, payload: &[u8]) -> Next {
        match payload.first() {
            Some(0x00) => Next::Done {
                verdict: Verdict::passed(format!("mysql: {} login OK", self.server)),
                goodbye: COM_QUIT.to_vec(),
            },
            Some(0xfe) if !self.switched => {
                self.switched = true;
                self.switch(sequence, &payload[1..])
            }
            // caching_sha2_password's "fast auth" result: the OK follows.
            Some(0x01) => Next::Receive,
            _ => {
                let detail = format!("mysql: expected OK after the login, got {}", shown(payload));
                Next::done(Verdict::failed(Status::L7Rsp, detail))
            }
        }
    }

    /// An AuthSwitchRequest: the plugin's answer for an empty password.
    fn switch(&mut self, sequence: u8, request: &[u8]) -> Next {
        let plugin = request.split(|&b| b == 0).next().unwrap_or_default();
        let answer: &[u8] = match plugin {
            b"mysql_native_password" => &[],
            b"caching_sha2_password" => &[0],
            other => {
                let detail = format!(
                    "mysql: the server asks for authentication plugin {} for the check user; \
                     create it without a password, identified with mysql_native_password",
                    shown(other)
                );
                return Next::done(Verdict::failed(Status::L7Sts, detail));
            }
        };
        Next::Send(framed(sequence.wrapping_add(1), answer))
    }
}

/// What the check reads of an Initial Handshake (protocol 10).
struct Handshake {
    version: String,
    capabilities: u32,
}

impl Handshake {
    /// 0x0a, version NUL, thread id (4), auth data (8), filler (1),
    /// capabilities low (2), charset (1), status (2), capabilities high (2).
    fn parse(payload: &[u8]) -> Option<Handshake> {
        let (&protocol, rest) = payload.split_first()?;
        if protocol != 10 {
            return None;
        }
        let end = rest.iter().position(|&b| b == 0)?;
        let version = String::from_utf8_lossy(&rest[..end]).into_owned();
        let after = &rest[end + 1..];
        let low = after.get(13..15)?;
        let high = after.get(18..20).unwrap_or(&[0, 0]);
        let capabilities = u32::from(u16::from_le_bytes([low[0], low[1]]))
            | u32::from(u16::from_le_bytes([high[0], high[1]])) << 16;
        Some(Handshake {
            version,
            capabilities,
        })
    }
}

/// A HandshakeResponse41 for `user` with an empty password (module docs).
fn handshake_response(user: &str, server: u32) -> Vec<u8> {
    let mut flags = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION;
    flags |= server & CLIENT_PLUGIN_AUTH;
    let mut payload = Vec::new();
    payload.extend_from_slice(&flags.to_le_bytes());
    payload.extend_from_slice(&(16u32 << 20).to_le_bytes()); // max packet: 16 MiB
    payload.push(CHARSET);
    payload.extend_from_slice(&[0; 23]);
    payload.extend_from_slice(user.as_bytes());
    payload.push(0);
    payload.push(0); // the auth response's length: an empty password
    if flags & CLIENT_PLUGIN_AUTH != 0 {
        payload.extend_from_slice(b"mysql_native_password\0");
    }
    framed(1, &payload)
}

/// `payload` as a packet with sequence number `sequence`.
fn framed(sequence: u8, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap_or(0).to_le_bytes();
    let mut packet = vec![length[0], length[1], length[2], sequence];
    packet.extend_from_slice(payload);
    packet
}

/// `ERR 1045 (28000): Access denied for user ...`: 0xff, the code (2 bytes
/// LE), `#` and the SQL state (5) when there is one, the message.
fn err_packet(payload: &[u8]) -> String {
    let code = payload
        .get(1..3)
        .map_or(0, |c| u16::from_le_bytes([c[0], c[1]]));
    let rest = payload.get(3..).unwrap_or_default();
    let (state, message) = match rest.strip_prefix(b"#") {
        Some(after) if after.len() >= 5 => (
            format!(" ({})", String::from_utf8_lossy(&after[..5])),
            &after[5..],
        ),
        _ => (String::new(), rest),
    };
    format!(
        "mysql: ERR {code}{state}: {}",
        String::from_utf8_lossy(message)
    )
}

enum Packet<'a> {
    Incomplete,
    /// Its sequence number, its payload, and its length in all.
    Whole(u8, &'a [u8], usize),
    Bad(String),
}

fn packet(bytes: &[u8]) -> Packet<'_> {
    let Some(header) = bytes.get(..4) else {
        return Packet::Incomplete;
    };
    let length =
        usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if length == 0 || length > MAX_PACKET {
        let head = &bytes[..bytes.len().min(16)];
        return Packet::Bad(format!("mysql: not a MySQL packet: {}", shown(head)));
    }
    match bytes.get(4..4 + length) {
        Some(payload) => Packet::Whole(header[3], payload, 4 + length),
        None => Packet::Incomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    /// A MariaDB-like Initial Handshake (sequence 0).
    fn greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.6-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&[7, 0, 0, 0]); // thread id
        p.extend_from_slice(b"abcdefgh\0"); // auth data part 1, filler
        let caps = CLIENT_LONG_PASSWORD
            | CLIENT_PROTOCOL_41
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH;
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[2, 0]);
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
        framed(0, &p)
    }

    fn user() -> MysqlCheck {
        MysqlCheck {
            user: Some("haproxy".into()),
        }
    }

    #[test]
    fn the_handshake_alone_is_up_without_a_user() {
        let check = MysqlCheck::default();
        let g = greeting();
        let (sent, verdict) = run(&mut *check.start(), &[Some(&g[..7]), Some(&g[7..])]);
        assert!(sent.is_empty());
        assert_eq!(
            verdict,
            Some(Verdict::passed(
                "mysql: 5.5.5-10.11.6-MariaDB-0+deb12u1 handshake"
            ))
        );
    }

    #[test]
    fn a_login_that_is_ok_is_up_and_quits() {
        let check = user();
        let ok = framed(2, &[0, 0, 0, 2, 0, 0, 0]);
        let (sent, verdict) = run(&mut *check.start(), &[Some(&greeting()), Some(&ok)]);
        let response = &sent[..sent.len() - COM_QUIT.len()];
        assert_eq!(response[3], 1, "sequence 1");
        let flags = u32::from_le_bytes([response[4], response[5], response[6], response[7]]);
        assert_ne!(flags & CLIENT_PROTOCOL_41, 0);
        assert_ne!(flags & CLIENT_PLUGIN_AUTH, 0, "the server offered it");
        assert_eq!(&response[4 + 32..4 + 32 + 8], b"haproxy\0");
        assert!(response.ends_with(b"\0mysql_native_password\0"));
        assert!(sent.ends_with(COM_QUIT));
        assert_eq!(
            verdict.map(|v| v.detail),
            Some("mysql: 5.5.5-10.11.6-MariaDB-0+deb12u1 login OK".into())
        );
    }

    #[test]
    fn an_err_packet_is_down_with_its_message() {
        let mut err = vec![0xff, 0x15, 0x04];
        err.extend_from_slice(b"#28000Access denied for user 'haproxy'@'localhost'");
        let (_, verdict) = run(
            &mut *user().start(),
            &[Some(&greeting()), Some(&framed(2, &err))],
        );
        assert_eq!(
            verdict,
            Some(Verdict::failed(
                Status::L7Sts,
                "mysql: ERR 1045 (28000): Access denied for user 'haproxy'@'localhost'"
            ))
        );
        // Before any handshake (a blocked host): no SQL state.
        let mut blocked = vec![0xff, 0x69, 0x04];
        blocked.extend_from_slice(b"Host '10.0.0.1' is blocked");
        let (_, verdict) = run(
            &mut *MysqlCheck::default().start(),
            &[Some(&framed(0, &blocked))],
        );
        assert_eq!(
            verdict.map(|v| v.detail),
            Some("mysql: ERR 1129: Host '10.0.0.1' is blocked".into())
        );
    }

    #[test]
    fn an_auth_switch_is_answered_for_an_empty_password() {
        let switch = framed(2, b"\xfecaching_sha2_password\0scramble0123456789ab\0");
        let fast = framed(4, &[0x01, 0x03]);
        let ok = framed(5, &[0, 0, 0, 2, 0, 0, 0]);
        let (sent, verdict) = run(
            &mut *user().start(),
            &[Some(&greeting()), Some(&switch), Some(&fast), Some(&ok)],
        );
        assert!(verdict.expect("judged").status.is_ok());
        let quit_at = sent.len() - COM_QUIT.len();
        assert_eq!(
            &sent[quit_at - 5..quit_at],
            &[1, 0, 0, 3, 0],
            "one NUL, sequence 3"
        );
        let other = framed(2, b"\xfeauth_gssapi_client\0x\0");
        let (_, verdict) = run(&mut *user().start(), &[Some(&greeting()), Some(&other)]);
        assert!(
            verdict
                .expect("judged")
                .detail
                .contains("auth_gssapi_client")
        );
    }

    #[test]
    fn garbage_is_not_mysql() {
        let (_, verdict) = run(&mut *MysqlCheck::default().start(), &[Some(b"+PONG\r\n")]);
        assert_eq!(verdict.map(|v| v.status), Some(Status::L7Rsp));
        let (_, verdict) = run(
            &mut *MysqlCheck::default().start(),
            &[Some(b"\x05\0\0"), None],
        );
        assert!(verdict.expect("closed").detail.contains("handshake packet"));
    }
}
