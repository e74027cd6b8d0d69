//! Reading a `tcplog` access-log line back into its fields: ours (the
//! proxy's `ops::access_log::record`), or HAProxy's, whose syslog header is
//! skipped, so that a test can hold the two side by side.
//!
//! ```
//! let line = "127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/127.0.0.1:9001 \
//!             0/1/25 120 -- 1/1/1/1/0 0/0";
//! let fields = testkit::tcplog::parse_tcplog(line).expect("a tcplog line");
//! assert_eq!(fields.bytes_down, 120);
//! assert_eq!(fields.termination.to_string(), "--");
//! ```

use std::net::{IpAddr, SocketAddr};

use proxy::ops::access_log::termination::{Cause, Phase, Termination};

/// One tcplog line read back into its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine {
    /// `%ci:%cp`.
    pub client: SocketAddr,
    /// `%t`, the text between the brackets.
    pub time: String,
    /// `%ft`, unescaped.
    pub frontend: String,
    /// `%b`, unescaped.
    pub backend: String,
    /// `%s`, unescaped; `None` for `<NOSRV>`.
    pub server: Option<String>,
    /// `%Tw` in ms, `-1` for none.
    pub wait_ms: i64,
    /// `%Tc` in ms, `-1` for none.
    pub connect_ms: i64,
    /// `%Tt` in ms.
    pub total_ms: i64,
    /// `%B`.
    pub bytes_down: u64,
    /// `%ts`.
    pub termination: Termination,
    /// `%rc`, without its `+`.
    pub retries: u32,
    /// Whether `%rc` had a `+`.
    pub redispatched: bool,
    /// `%ac`.
    pub active_process: u32,
    /// `%fc`.
    pub active_frontend: u32,
    /// `%bc`.
    pub active_backend: u32,
    /// `%sc`.
    pub active_server: u32,
    /// `%sq`.
    pub server_queue: u32,
    /// `%bq`.
    pub backend_queue: u32,
    /// The capture in braces after the standard fields, unescaped: the TLS
    /// server name on a frontend with `use-group` rules (`Some("")`: none);
    /// `None` on a line without a capture.
    pub capture: Option<String>,
    /// `moved:N` at the end: how many upgrades moved the connection to a
    /// new process (0 on a line without the mark).
    pub moves: u32,
}

/// Reads one tcplog line back into its fields (for tests and tools).
/// Whatever precedes the last nine fields (and a capture in braces after
/// them) is ignored, so a line with a syslog header (`Nov 30 12:00:00 host
/// haproxy[42]: ...`) reads too, and the `+` that HAProxy's `option logasap`
/// puts before `%Tt` and `%B` is accepted. `None` if the fields do not have
/// the tcplog shape.
pub fn parse_tcplog(line: &str) -> Option<ParsedLine> {
    let mut fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let moves = match fields.last()?.strip_prefix("moved:") {
        Some(n) => {
            fields.pop();
            n.parse().ok().filter(|&n| n > 0)?
        }
        None => 0,
    };
    let last = fields.last()?;
    let capture = match last.strip_prefix('{').and_then(|l| l.strip_suffix('}')) {
        Some(inside) => {
            let inside = unescape_name(inside)?;
            fields.pop();
            Some(inside)
        }
        None => None,
    };
    let [
        client,
        time,
        frontend,
        backend_server,
        timers,
        bytes,
        code,
        counts,
        queues,
    ] = fields.get(fields.len().checked_sub(9)?..)?
    else {
        return None;
    };
    let (ip, port) = client.rsplit_once(':')?;
    let client = SocketAddr::new(ip.parse::<IpAddr>().ok()?, port.parse().ok()?);
    let time = time.strip_prefix('[')?.strip_suffix(']')?.to_string();
    let (backend, server) = backend_server.split_once('/')?;
    let server = match server {
        "<NOSRV>" => None,
        s => Some(unescape_name(s)?),
    };
    let [wait_ms, connect_ms, total_ms] = numbers::<i64, 3>(timers, true)?;
    let [
        active_process,
        active_frontend,
        active_backend,
        active_server,
        retries,
    ] = numbers::<u32, 5>(counts, true)?;
    let redispatched = counts.rsplit('/').next()?.starts_with('+');
    let [server_queue, backend_queue] = numbers::<u32, 2>(queues, false)?;
    let [bytes_down] = numbers::<u64, 1>(bytes, true)?;
    if wait_ms < -1 || connect_ms < -1 || total_ms < 0 {
        return None;
    }
    Some(ParsedLine {
        client,
        time,
        frontend: unescape_name(frontend)?,
        backend: unescape_name(backend)?,
        server,
        wait_ms,
        connect_ms,
        total_ms,
        bytes_down,
        termination: termination(code)?,
        retries,
        redispatched,
        active_process,
        active_frontend,
        active_backend,
        active_server,
        server_queue,
        backend_queue,
        capture,
        moves,
    })
}

/// `N` numbers separated by `/`; with `plus_on_last`, the last may carry a
/// `+` (HAProxy's redispatch and logasap marks), which is skipped.
fn numbers<T: std::str::FromStr + Copy + Default, const N: usize>(
    field: &str,
    plus_on_last: bool,
) -> Option<[T; N]> {
    let mut out = [T::default(); N];
    let mut parts = field.split('/');
    for (i, slot) in out.iter_mut().enumerate() {
        let mut part = parts.next()?;
        if plus_on_last && i + 1 == N {
            part = part.strip_prefix('+').unwrap_or(part);
        }
        // Integer parsing accepts a leading `+`: nowhere else is one allowed.
        if part.starts_with('+') {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Undoes [`escape_name`]; `None` for a bad escape or invalid UTF-8.
fn unescape_name(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'#' {
            let hex = field.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A termination state read back from its two characters (`SC`, `--`...);
/// `None` for anything else.
pub fn termination(code: &str) -> Option<Termination> {
    let [c, p] = code.as_bytes() else {
        return None;
    };
    let cause = Cause::ALL.into_iter().find(|cause| cause.char() == *c)?;
    let phase = Phase::ALL.into_iter().find(|phase| phase.char() == *p)?;
    Some(Termination::new(cause, phase))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxy::conn::machine::Ending;
    use proxy::conn::side::Side;
    use proxy::ops::access_log::record::{Record, ServerRef};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    /// 2026-11-30T12:00:00.123Z.
    const NOON: u64 = 1_796_040_000_123;

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn v6(a: Ipv6Addr, port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    /// A connection relayed to its end, as in the proxy's record docs.
    fn record() -> Record<'static> {
        Record {
            accepted: SystemTime::UNIX_EPOCH + Duration::from_millis(NOON),
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
    fn refused() -> Record<'static> {
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

    fn tcplog(r: &Record<'_>) -> String {
        let mut line = String::new();
        r.write_tcplog(&mut line);
        line
    }

    #[test]
    fn a_moved_connections_mark_reads_back() {
        let r = Record {
            moves: 2,
            ..record()
        };
        let line = tcplog(&r);
        assert!(line.ends_with(" 0/0 moved:2"), "{line}");
        assert_eq!(parse_tcplog(&line).map(|p| p.moves), Some(2));
        assert_eq!(parse_tcplog(&tcplog(&record())).map(|p| p.moves), Some(0));
        assert!(parse_tcplog(&line.replace("moved:2", "moved:0")).is_none());
    }

    #[test]
    fn a_routed_frontends_capture_reads_back() {
        let r = Record {
            frontend: "tls",
            group: "api",
            server_name: Some(Some("api.example")),
            ..record()
        };
        let parsed = parse_tcplog(&tcplog(&r)).expect("a line with a capture");
        assert_eq!(
            (parsed.frontend.as_str(), parsed.backend.as_str()),
            ("tls", "api")
        );
        assert_eq!(parsed.capture.as_deref(), Some("api.example"));
        assert_eq!(parsed.bytes_down, 120);
        let none = tcplog(&Record {
            server_name: Some(None),
            ..r
        });
        assert!(none.ends_with(" 0/0 {}"), "{none}");
        assert_eq!(
            parse_tcplog(&none).and_then(|p| p.capture),
            Some(String::new())
        );
        assert_eq!(
            parse_tcplog(&tcplog(&record())).and_then(|p| p.capture),
            None
        );
    }

    #[test]
    fn ipv6_clients_read_back() {
        let r = Record {
            client: v6(Ipv6Addr::LOCALHOST, 51234),
            backend: Some(ServerRef {
                name: "[::1]:9001",
                addr: Some(v6(Ipv6Addr::LOCALHOST, 9001)),
            }),
            ..record()
        };
        let parsed = parse_tcplog(&tcplog(&r)).expect("an IPv6 line");
        assert_eq!(parsed.client, r.client);
        assert_eq!(parsed.server.as_deref(), Some("[::1]:9001"));
        // An IPv4 client on a dual-stack listener: inet_ntop's mapped form.
        let mapped = v6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped(), 4000);
        let line = tcplog(&Record {
            client: mapped,
            ..record()
        });
        assert_eq!(parse_tcplog(&line).map(|p| p.client), Some(mapped));
    }

    #[test]
    fn every_cause_and_phase_reads_back_and_nothing_else_does() {
        for cause in Cause::ALL {
            for phase in Phase::ALL {
                let t = Termination::new(cause, phase);
                assert_eq!(termination(&t.to_string()), Some(t));
                let line = tcplog(&Record {
                    termination: t,
                    ..record()
                });
                assert_eq!(parse_tcplog(&line).map(|p| p.termination), Some(t));
            }
        }
        for bad in ["", "-", "---", "ZD", "CZ", "cd", "--\n", "é"] {
            assert_eq!(termination(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn escaped_names_read_back() {
        let name = "a b#c/d\"é\t";
        let line = tcplog(&Record {
            frontend: name,
            group: name,
            ..record()
        });
        let parsed = parse_tcplog(&line).expect("an escaped line");
        assert_eq!(
            (parsed.frontend.as_str(), parsed.backend.as_str()),
            (name, name)
        );
    }

    #[test]
    fn tcplog_lines_read_back_field_by_field() {
        let records = [
            record(),
            refused(),
            Record {
                client: v6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7), 65535),
                backend: Some(ServerRef {
                    name: "[fd00::1]:1",
                    addr: Some(v6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 1)),
                }),
                wait: Some(Duration::from_millis(1500)),
                connect: Some(Duration::from_millis(30)),
                total: Duration::from_millis(61_234),
                bytes_down: 1 << 40,
                termination: Termination::of_relay(Ending::FinTimeout, Some(Side::Client)),
                retries: 2,
                redispatched: true,
                active_process: 4000,
                active_frontend: 300,
                active_backend: 299,
                active_server: 17,
                ..record()
            },
            Record {
                termination: Termination::QUEUE_TIMEOUT,
                backend: None,
                wait: Some(Duration::from_millis(5000)),
                connect: None,
                ..record()
            },
        ];
        for r in &records {
            let line = tcplog(r);
            let p = parse_tcplog(&line).unwrap_or_else(|| panic!("unreadable: {line}"));
            let ms = |d: Option<Duration>| d.map_or(-1, |d| d.as_millis() as i64);
            assert_eq!(p.client, r.client);
            assert_eq!(p.time, "30/Nov/2026:12:00:00.123");
            assert_eq!((p.frontend.as_str(), p.backend.as_str()), ("web", "web"));
            assert_eq!(p.server.as_deref(), r.server());
            assert_eq!(
                (p.wait_ms, p.connect_ms, p.total_ms),
                (ms(r.wait), ms(r.connect), r.total.as_millis() as i64)
            );
            assert_eq!(p.bytes_down, r.bytes_down);
            assert_eq!(p.termination, r.termination);
            assert_eq!((p.retries, p.redispatched), (r.retries, r.redispatched));
            assert_eq!(
                [
                    p.active_process,
                    p.active_frontend,
                    p.active_backend,
                    p.active_server
                ],
                [
                    r.active_process,
                    r.active_frontend,
                    r.active_backend,
                    r.active_server
                ]
            );
            assert_eq!((p.server_queue, p.backend_queue), (0, 0));
            // With its newline, as it sits in a file.
            assert_eq!(parse_tcplog(&format!("{line}\n")), Some(p));
        }
        assert!(UNIX_EPOCH < records[0].accepted);
    }

    #[test]
    fn haproxy_lines_with_a_syslog_header_read() {
        let line = "Nov 30 12:00:05 lb1 haproxy[4242]: 192.0.2.10:40000 \
                    [30/Nov/2026:12:00:00.100] front back/srv2 12/3/4876 +1024 cD 7/5/5/2/+1 0/4";
        let p = parse_tcplog(line).expect("an HAProxy line");
        assert_eq!(p.client, v4([192, 0, 2, 10], 40000));
        assert_eq!(
            (p.frontend.as_str(), p.backend.as_str(), p.server.as_deref()),
            ("front", "back", Some("srv2"))
        );
        assert_eq!((p.wait_ms, p.connect_ms, p.total_ms), (12, 3, 4876));
        assert_eq!(
            (p.bytes_down, p.termination),
            (1024, Termination::IDLE_TIMEOUT)
        );
        assert_eq!((p.retries, p.redispatched), (1, true));
        assert_eq!((p.server_queue, p.backend_queue), (0, 4));
    }

    #[test]
    fn what_is_not_a_tcplog_line_is_refused() {
        let good = tcplog(&record());
        assert!(parse_tcplog(&good).is_some());
        let bad = [
            String::new(),
            "hello world".to_string(),
            good.replace(" 0/0", ""),
            good.replace("127.0.0.1:51234", "127.0.0.1"),
            good.replace("127.0.0.1:51234", "localhost:51234"),
            good.replace("127.0.0.1:51234", "127.0.0.1:70000"),
            good.replace("[30/Nov/2026:12:00:00.123]", "30/Nov/2026:12:00:00.123"),
            good.replace("web/127.0.0.1:9001", "web"),
            good.replace("0/1/25", "0/1"),
            good.replace("0/1/25", "0/1/25/4"),
            good.replace("0/1/25", "-2/1/25"),
            good.replace("0/1/25", "0/1/-1"),
            good.replace("0/1/25", "+0/1/25"),
            good.replace(" 120 ", " -120 "),
            good.replace(" -- ", " ZZ "),
            good.replace(" -- ", " --- "),
            good.replace("1/1/1/1/0", "1/1/1/0"),
            good.replace("1/1/1/1/0", "1/1/1/1/++0"),
            good.replace("1/1/1/1/0", "+1/1/1/1/0"),
            good.replace(" 0/0", " 0/+0"),
            good.replace("web web/", "w#zz web/"),
            good.replace("web web/", "w#F0 web/"),
        ];
        for line in &bad {
            assert_eq!(parse_tcplog(line), None, "{line:?}");
        }
    }

    /// The JSON variant of the same records, read with the workspace's JSON
    /// reader: every key of `JSON_KEYS`, in order, with the values of the
    /// tcplog line.
    #[test]
    fn json_lines_read_back_with_every_key_in_order() {
        use crate::json::{Json, read_object};
        use proxy::ops::access_log::record::JSON_KEYS;
        let json = |r: &Record<'_>| {
            let mut line = String::new();
            r.write_json(&mut line);
            line
        };
        for line in [json(&record()), json(&refused())] {
            let fields = read_object(&line).expect("valid JSON");
            let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, JSON_KEYS, "{line}");
        }
        let fields = read_object(&json(&refused())).expect("valid JSON");
        let field = |key: &str| &fields.iter().find(|(k, _)| k == key).expect(key).1;
        assert_eq!(field("server"), &Json::Null);
        assert_eq!(field("wait_ms"), &Json::Number(-1.0));
        assert_eq!(field("connect_ms"), &Json::Number(-1.0));
        assert_eq!(field("termination"), &Json::String("SC".into()));

        let name = "we\"b\\\n\r\t\u{1}\u{7f}é/";
        let line = json(&Record {
            frontend: name,
            group: name,
            client: v6(Ipv6Addr::LOCALHOST, 5),
            backend: Some(ServerRef {
                name: "[::1]:9001",
                addr: Some(v6(Ipv6Addr::LOCALHOST, 9001)),
            }),
            termination: Termination::CLIENT_SILENT_AFTER_SERVER_FIN,
            retries: 1,
            redispatched: true,
            ..record()
        });
        let fields = read_object(&line).unwrap_or_else(|e| panic!("invalid JSON ({e}): {line}"));
        let field = |key: &str| &fields.iter().find(|(k, _)| k == key).expect(key).1;
        assert_eq!(field("frontend"), &Json::String(name.into()));
        assert_eq!(field("backend"), &Json::String(name.into()));
        assert_eq!(field("client_ip"), &Json::String("::1".into()));
        assert_eq!(field("client_port"), &Json::Number(5.0));
        assert_eq!(field("server"), &Json::String("[::1]:9001".into()));
        assert_eq!(field("termination"), &Json::String("cL".into()));
        assert_eq!(field("redispatched"), &Json::Bool(true));
        assert!(
            read_object(&line[..line.len() - 1]).is_err(),
            "a cut line read"
        );
    }
}
