//! One access-log line: a finished connection ([`Record`]) written in
//! HAProxy's `tcplog` layout (the fields are in the [layer's
//! docs](super)), as one JSON object, or in a format of the operator's
//! ([`custom`](super::custom)): the three formats of
//! [`format`](super::format).
//!
//! `--log-format json` writes one object per line with the same fields
//! under plain names, plus `bytes_up`:
//!
//! ```text
//! {"time":"2026-11-30T12:00:00.123Z","client_ip":"127.0.0.1","client_port":51234,
//!  "frontend":"web","backend":"web","server":"db1","server_addr":"127.0.0.1:9001","wait_ms":0,"connect_ms":1,
//!  "total_ms":25,"bytes_down":120,"bytes_up":42,"termination":"--","retries":0,
//!  "redispatched":false,"active_process":1,"active_frontend":1,"active_backend":1,
//!  "active_server":1,"server_queue":0,"backend_queue":0,"server_name":null,"moves":0}
//! ```
//!
//! (on one line). `server` is the server's name (its address for a
//! `backend` line without one) and `server_addr` its address (for a server
//! written with a host name, the name's answer when the connection went
//! there); both are `null` where tcplog says `<NOSRV>`; times
//! that tcplog prints as `-1` are `-1` here too. `server_name` is the TLS
//! server name read by a frontend with `use-group` rules (`null` without
//! one), which tcplog prints in braces at the end of the line on those
//! frontends only, where HAProxy puts a capture (`{api.example}`, `{}`). [`JSON_KEYS`] lists the keys in
//! the order they are written, for the tools that read the lines back.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use crate::log::json;
use crate::log::utc::{Civil, Utc, civil, since_epoch};

use super::termination::Termination;

/// One finished connection, as the log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// When it was accepted (`%t`).
    pub accepted: SystemTime,
    /// The client's address (`%ci:%cp`).
    pub client: SocketAddr,
    /// The frontend's name (`%ft`).
    pub frontend: &'a str,
    /// The group of backends it went to (`%b`): the frontend's name for
    /// its own backend lines, else the `group` section's.
    pub group: &'a str,
    /// The server name of its TLS ClientHello, on a frontend with
    /// `use-group` rules (`Some(None)`: no name, or not TLS); `None` on
    /// any other frontend, whose tcplog lines stay HAProxy's exactly.
    pub server_name: Option<Option<&'a str>>,
    /// The last server tried: its name (`%s`) and address (`%si:%sp`);
    /// `None` prints `<NOSRV>`.
    pub backend: Option<ServerRef<'a>>,
    /// Time spent waiting for a place (`%Tw`); `None` prints `-1`.
    pub wait: Option<Duration>,
    /// Time to connect, retries included (`%Tc`); `None`: never connected.
    pub connect: Option<Duration>,
    /// From accept to close (`%Tt`).
    pub total: Duration,
    /// Bytes from the server to the client (`%B`).
    pub bytes_down: u64,
    /// Bytes from the client to the server (JSON only).
    pub bytes_up: u64,
    /// Who ended it, and where (`%ts`).
    pub termination: Termination,
    /// Connect retries (`%rc`).
    pub retries: u32,
    /// Whether a retry went to another server than the first: prints `+`
    /// before the retries. Always `retries > 0` in our proxy.
    pub redispatched: bool,
    /// Connections open in the process (`%ac`).
    pub active_process: u32,
    /// Connections open on the frontend (`%fc`).
    pub active_frontend: u32,
    /// Connections open to the frontend's backends (`%bc`).
    pub active_backend: u32,
    /// Connections open to this server (`%sc`); 0 with `<NOSRV>`.
    pub active_server: u32,
    /// Where the client connected to (`%fi:%fp`): gathered only for a
    /// format that shows it ([`Needs`](super::custom::Needs)), `None` otherwise.
    pub frontend_addr: Option<SocketAddr>,
    /// Where the server was connected from (`%bi:%bp`): gathered only for a
    /// format that shows it; `None` otherwise, or never connected.
    pub backend_source: Option<SocketAddr>,
    /// The connection's number in this process, from 1 (`%rt`): counted
    /// only for a format that shows it, 0 otherwise.
    pub id: u64,
    /// How many upgrades moved it to a new process (0: it never moved):
    /// `moved:N` after a tcplog line's fields, `"moves"` in JSON.
    pub moves: u32,
}

/// A server as a log line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerRef<'a> {
    /// Its name (`backend NAME ADDR`; the address for a line without one).
    pub name: &'a str,
    /// Where it was when this connection went there: its address, or its
    /// host name's answer then (`None`: it had none, and was not
    /// connected).
    pub addr: Option<SocketAddr>,
}

/// A time in milliseconds, or `-1` for none.
pub(super) struct Millis(pub(super) Option<Duration>);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{}", d.as_millis()),
            None => f.write_str("-1"),
        }
    }
}

impl Record<'_> {
    /// The server as every format names it (`%s`): its name (`backend
    /// NAME ADDR`; its address for a line without one).
    pub fn server(&self) -> Option<&str> {
        self.backend.map(|server| server.name)
    }

    fn civil_accepted(&self) -> Civil {
        civil(since_epoch(self.accepted))
    }

    /// Appends the tcplog line, without its newline.
    pub fn write_tcplog(&self, out: &mut String) {
        let civil = self.civil_accepted();
        let mon = civil.month_name();
        let Civil {
            year,
            day,
            hour,
            minute,
            second,
            millis,
            ..
        } = civil;
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "{}:{} [{day:02}/{mon}/{year:04}:{hour:02}:{minute:02}:{second:02}.{millis:03}] ",
            self.client.ip(),
            self.client.port(),
        );
        escape_name(self.frontend, out);
        out.push(' ');
        escape_name(self.group, out);
        out.push('/');
        match self.server() {
            Some(name) => escape_name(name, out),
            None => out.push_str("<NOSRV>"),
        }
        let plus = if self.redispatched { "+" } else { "" };
        let _ = write!(
            out,
            " {}/{}/{} {} {} {}/{}/{}/{}/{plus}{} 0/0",
            Millis(self.wait),
            Millis(self.connect),
            self.total.as_millis(),
            self.bytes_down,
            self.termination,
            self.active_process,
            self.active_frontend,
            self.active_backend,
            self.active_server,
            self.retries,
        );
        // Where HAProxy puts a capture: braces after the standard fields.
        if let Some(name) = self.server_name {
            out.push_str(" {");
            escape_name(name.unwrap_or_default(), out);
            out.push('}');
        }
        // A mark only on a line that needs it: every other line stays
        // HAProxy's exactly.
        if self.moves > 0 {
            let _ = write!(out, " moved:{}", self.moves);
        }
    }

    /// Appends the JSON object, without its newline.
    pub fn write_json(&self, out: &mut String) {
        let _ = write!(
            out,
            "{{\"time\":\"{}\",\"client_ip\":\"{}\",\"client_port\":{},\"frontend\":",
            Utc(since_epoch(self.accepted)),
            self.client.ip(),
            self.client.port(),
        );
        json::push_string(out, self.frontend);
        out.push_str(",\"backend\":");
        json::push_string(out, self.group);
        out.push_str(",\"server\":");
        match self.backend {
            Some(server) => {
                json::push_string(out, server.name);
                match server.addr {
                    Some(addr) => _ = write!(out, ",\"server_addr\":\"{addr}\""),
                    None => out.push_str(",\"server_addr\":null"),
                }
            }
            None => out.push_str("null,\"server_addr\":null"),
        }
        let _ = write!(
            out,
            ",\"wait_ms\":{},\"connect_ms\":{},\"total_ms\":{},\"bytes_down\":{},\"bytes_up\":{},\
             \"termination\":\"{}\",\"retries\":{},\"redispatched\":{},\"active_process\":{},\
             \"active_frontend\":{},\"active_backend\":{},\"active_server\":{},\
             \"server_queue\":0,\"backend_queue\":0,\"server_name\":",
            Millis(self.wait),
            Millis(self.connect),
            self.total.as_millis(),
            self.bytes_down,
            self.bytes_up,
            self.termination,
            self.retries,
            self.redispatched,
            self.active_process,
            self.active_frontend,
            self.active_backend,
            self.active_server,
        );
        match self.server_name.flatten() {
            Some(name) => json::push_string(out, name),
            None => out.push_str("null"),
        }
        let _ = write!(out, ",\"moves\":{}}}", self.moves);
    }
}

/// HAProxy's escaping of log fields: `#` and two hex digits for any byte
/// outside `!`..`~`, and for `#`, `"` and `/`; and for the braces, which
/// close a capture.
pub(super) fn escape_name(name: &str, out: &mut String) {
    for &b in name.as_bytes() {
        if (b'!'..=b'~').contains(&b) && !matches!(b, b'#' | b'"' | b'/' | b'{' | b'}') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "#{b:02X}");
        }
    }
}

/// The keys of a JSON line, in the order [`Record::write_json`] writes them
/// (for tests and tools; a unit test holds the two together).
pub const JSON_KEYS: [&str; 23] = [
    "time",
    "client_ip",
    "client_port",
    "frontend",
    "backend",
    "server",
    "server_addr",
    "wait_ms",
    "connect_ms",
    "total_ms",
    "bytes_down",
    "bytes_up",
    "termination",
    "retries",
    "redispatched",
    "active_process",
    "active_frontend",
    "active_backend",
    "active_server",
    "server_queue",
    "backend_queue",
    "server_name",
    "moves",
];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::access_log::termination::{Cause, Phase};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::time::UNIX_EPOCH;

    /// 2026-11-30T12:00:00.123Z.
    const NOON: u64 = 1_796_040_000_123;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn v6(a: Ipv6Addr, port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    /// A connection relayed to its end, as in the module docs.
    pub(crate) fn record() -> Record<'static> {
        Record {
            accepted: at(NOON),
            client: v4([127, 0, 0, 1], 51234),
            frontend: "web",
            group: "web",
            server_name: None,
            backend: Some(ServerRef {
                name: "127.0.0.1:9001",
                addr: Some(v4([127, 0, 0, 1], 9001)),
            }),
            wait: Some(Duration::ZERO),
            connect: Some(Duration::from_millis(1)),
            total: Duration::from_millis(25),
            bytes_down: 120,
            bytes_up: 42,
            termination: Termination::COMPLETE,
            retries: 0,
            redispatched: false,
            active_process: 1,
            active_frontend: 1,
            active_backend: 1,
            active_server: 1,
            frontend_addr: None,
            backend_source: None,
            id: 1,
            moves: 0,
        }
    }

    /// A client refused before any server was tried.
    pub(crate) fn refused() -> Record<'static> {
        Record {
            backend: None,
            wait: None,
            connect: None,
            total: Duration::from_millis(3),
            bytes_down: 0,
            bytes_up: 0,
            termination: Termination::NO_SERVER,
            active_backend: 0,
            active_server: 0,
            ..record()
        }
    }

    pub(crate) fn tcplog(r: &Record<'_>) -> String {
        let mut line = String::new();
        r.write_tcplog(&mut line);
        line
    }

    pub(crate) fn json(r: &Record<'_>) -> String {
        let mut line = String::new();
        r.write_json(&mut line);
        line
    }

    #[test]
    fn a_finished_connection_reads_like_haproxy_tcplog() {
        assert_eq!(
            tcplog(&record()),
            "127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/127.0.0.1:9001 0/1/25 120 -- \
             1/1/1/1/0 0/0"
        );
    }

    #[test]
    fn a_connection_without_a_server_prints_nosrv_and_minus_one() {
        assert_eq!(
            tcplog(&refused()),
            "127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/<NOSRV> -1/-1/3 0 SC 1/1/0/0/0 0/0"
        );
    }

    #[test]
    fn a_failed_connect_after_retries_names_the_last_server_and_marks_the_redispatch() {
        let r = Record {
            backend: Some(ServerRef {
                name: "10.0.0.3:5432",
                addr: Some(v4([10, 0, 0, 3], 5432)),
            }),
            wait: Some(Duration::from_millis(7)),
            connect: None,
            total: Duration::from_millis(4012),
            bytes_down: 0,
            termination: Termination::CONNECT_TIMEOUT,
            retries: 3,
            redispatched: true,
            ..record()
        };
        assert!(
            tcplog(&r).ends_with(" web/10.0.0.3:5432 7/-1/4012 0 sC 1/1/1/1/+3 0/0"),
            "{}",
            tcplog(&r)
        );
        let same_server = Record {
            redispatched: false,
            ..r
        };
        assert!(tcplog(&same_server).ends_with(" 1/1/1/1/3 0/0"));
    }

    #[test]
    fn times_are_whole_milliseconds_rounded_down() {
        let r = Record {
            wait: Some(Duration::from_micros(1999)),
            connect: Some(Duration::from_micros(999)),
            total: Duration::from_secs(3 * 86_400) + Duration::from_micros(500),
            bytes_down: u64::MAX,
            ..record()
        };
        assert!(
            tcplog(&r).contains(" 1/0/259200000 18446744073709551615 -- "),
            "{}",
            tcplog(&r)
        );
    }

    #[test]
    fn accept_dates_are_haproxy_dates_in_utc() {
        let cases = [
            (0, "01/Jan/1970:00:00:00.000"),
            (951_782_400_250, "29/Feb/2000:00:00:00.250"),
            (1_735_689_599_999, "31/Dec/2024:23:59:59.999"),
            (1_735_866_184_000, "03/Jan/2025:01:03:04.000"),
            (1_738_721_168_000, "05/Feb/2025:02:06:08.000"),
            (1_741_316_952_000, "07/Mar/2025:03:09:12.000"),
            (1_744_171_936_000, "09/Apr/2025:04:12:16.000"),
            (1_746_940_520_000, "11/May/2025:05:15:20.000"),
            (1_749_795_504_000, "13/Jun/2025:06:18:24.000"),
            (1_752_564_088_000, "15/Jul/2025:07:21:28.000"),
            (1_755_419_072_000, "17/Aug/2025:08:24:32.000"),
            (1_758_274_056_000, "19/Sep/2025:09:27:36.000"),
            (1_761_042_640_000, "21/Oct/2025:10:30:40.000"),
            (1_763_897_624_000, "23/Nov/2025:11:33:44.000"),
            (1_766_666_208_000, "25/Dec/2025:12:36:48.000"),
        ];
        for (ms, expected) in cases {
            let line = tcplog(&Record {
                accepted: at(ms),
                ..record()
            });
            assert!(line.contains(&format!(" [{expected}] ")), "{line}");
        }
        // Before the epoch (a clock gone wrong): printed as the epoch, not a panic.
        let early = Record {
            accepted: UNIX_EPOCH - Duration::from_secs(1),
            ..record()
        };
        assert!(tcplog(&early).contains(" [01/Jan/1970:00:00:00.000] "));
    }

    #[test]
    fn ipv6_clients_print_bare_as_haproxy_does() {
        let r = Record {
            client: v6(Ipv6Addr::LOCALHOST, 51234),
            backend: Some(ServerRef {
                name: "[::1]:9001",
                addr: Some(v6(Ipv6Addr::LOCALHOST, 9001)),
            }),
            ..record()
        };
        let line = tcplog(&r);
        assert!(
            line.starts_with("::1:51234 [30/Nov/2026:12:00:00.123] web web/[::1]:9001 "),
            "{line}"
        );
        // An IPv4 client on a dual-stack listener: inet_ntop's mapped form.
        let mapped = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped();
        let line = tcplog(&Record {
            client: v6(mapped, 4000),
            ..record()
        });
        assert!(line.starts_with("::ffff:10.0.0.1:4000 ["), "{line}");
    }

    #[test]
    fn every_termination_code_reaches_the_line_in_its_place() {
        for cause in Cause::ALL {
            for phase in Phase::ALL {
                let t = Termination::new(cause, phase);
                let line = tcplog(&Record {
                    termination: t,
                    ..record()
                });
                assert!(line.contains(&format!(" 120 {t} 1/1/")), "{line}");
                let line = json(&Record {
                    termination: t,
                    ..record()
                });
                assert!(
                    line.contains(&format!(",\"termination\":\"{t}\",")),
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn names_are_escaped_as_haproxy_does() {
        let name = "a b#c/d\"é\t";
        let line = tcplog(&Record {
            frontend: name,
            group: name,
            ..record()
        });
        let escaped = "a#20b#23c#2Fd#22#C3#A9#09";
        assert!(
            line.contains(&format!("] {escaped} {escaped}/127.0.0.1:9001 ")),
            "{line}"
        );
        // A plain name, as the configuration allows, is left alone.
        assert!(
            tcplog(&Record {
                frontend: "db-1_main.v2",
                group: "db-1_main.v2",
                ..record()
            })
            .contains("] db-1_main.v2 db-1_main.v2/")
        );
    }

    #[test]
    fn json_lines_have_every_field_under_a_plain_name() {
        assert_eq!(
            json(&record()),
            "{\"time\":\"2026-11-30T12:00:00.123Z\",\"client_ip\":\"127.0.0.1\",\
             \"client_port\":51234,\"frontend\":\"web\",\"backend\":\"web\",\
             \"server\":\"127.0.0.1:9001\",\"server_addr\":\"127.0.0.1:9001\",\"wait_ms\":0,\"connect_ms\":1,\"total_ms\":25,\
             \"bytes_down\":120,\"bytes_up\":42,\"termination\":\"--\",\"retries\":0,\
             \"redispatched\":false,\"active_process\":1,\"active_frontend\":1,\
             \"active_backend\":1,\"active_server\":1,\"server_queue\":0,\"backend_queue\":0,\
             \"server_name\":null,\"moves\":0}"
        );
        // Without a server: null, and -1 for the times never measured.
        let line = json(&refused());
        assert!(
            line.contains(
                ",\"server\":null,\"server_addr\":null,\"wait_ms\":-1,\"connect_ms\":-1,"
            ),
            "{line}"
        );
        assert!(line.contains(",\"termination\":\"SC\","), "{line}");
        // JSON_KEYS names every key in the order written.
        let mut at = 0;
        for key in JSON_KEYS {
            let quoted = format!("\"{key}\":");
            let found = line[at..].find(&quoted).map(|i| at + i + quoted.len());
            at = found.unwrap_or_else(|| panic!("{key} missing or out of order in {line}"));
        }
        assert_eq!(line.matches("\":").count(), JSON_KEYS.len(), "{line}");
    }

    #[test]
    fn a_named_server_is_logged_by_its_name_with_its_address_beside_it_in_json() {
        let named = Record {
            group: "pg",
            backend: Some(ServerRef {
                name: "db1",
                addr: Some(v4([10, 0, 0, 3], 5432)),
            }),
            ..record()
        };
        assert!(
            tcplog(&named).contains("] web pg/db1 0/1/25 120 -- "),
            "{}",
            tcplog(&named)
        );
        assert!(
            json(&named).contains(",\"server\":\"db1\",\"server_addr\":\"10.0.0.3:5432\","),
            "{}",
            json(&named)
        );
    }

    #[test]
    fn a_routed_connection_names_its_group_and_its_server_name() {
        let routed = Record {
            frontend: "tls",
            group: "api",
            server_name: Some(Some("api.example")),
            ..record()
        };
        assert!(
            tcplog(&routed)
                .ends_with("] tls api/127.0.0.1:9001 0/1/25 120 -- 1/1/1/1/0 0/0 {api.example}"),
            "{}",
            tcplog(&routed)
        );
        assert!(json(&routed).contains(",\"backend\":\"api\","));
        assert!(json(&routed).ends_with(",\"server_name\":\"api.example\",\"moves\":0}"));
        // A frontend with rules, a client without a name: empty braces.
        let nameless = Record {
            server_name: Some(None),
            ..routed
        };
        assert!(
            tcplog(&nameless).ends_with(" 0/0 {}"),
            "{}",
            tcplog(&nameless)
        );
        assert!(json(&nameless).ends_with(",\"server_name\":null,\"moves\":0}"));
        // Braces in a name (never from the reader, which refuses them) are escaped.
        let odd = Record {
            server_name: Some(Some("a}b")),
            ..record()
        };
        assert!(tcplog(&odd).ends_with(" {a#7Db}"), "{}", tcplog(&odd));
    }

    #[test]
    fn json_lines_stay_one_line_whatever_the_name() {
        let name = "we\"b\\\n\r\t\u{1}\u{7f}é/";
        let line = json(&Record {
            frontend: name,
            group: name,
            ..record()
        });
        assert!(!line.contains('\n') && !line.contains('\u{1}'), "{line:?}");
        assert!(
            line.contains(r#""frontend":"we\"b\\\n\r\t\u0001\u007fé/""#),
            "{line}"
        );
    }
}
