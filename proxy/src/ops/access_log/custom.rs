//! A log format of the operator's choosing: `log-format "..."` with the
//! variables of HAProxy's custom log format (section 8.2.6 of its manual)
//! that have a meaning for a TCP relay, compiled once when the
//! configuration is read into a list of pieces (text, and variables with
//! their flags), so that a line is written by walking the list, never by
//! parsing the format again.
//!
//! ```text
//!   "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts"
//!    ──▶ [ci] ":" [cp] " [" [t] "] " [ft] " " [b] "/" [s] " " [Tw] "/" [Tc] "/" [Tt] " " [B] " " [ts]
//! ```
//!
//! | variable | value |
//! |---|---|
//! | `%ci` `%cp` | the client's address and port (the PROXY header's, with `accept-proxy`) |
//! | `%fi` `%fp` | the address and port the client connected to (the PROXY header's destination, with `accept-proxy`) |
//! | `%f` `%ft` | the frontend's name (`%ft` adds `~` for TLS in HAProxy; never here) |
//! | `%b` | the group of backends (the frontend's name for its own backend lines) |
//! | `%s` | the server: its name, or its address for a `backend` line without one (`<NOSRV>` when none was tried) |
//! | `%si` `%sp` | the server's address and port (`-` when none was tried) |
//! | `%bi` `%bp` | the address and port the proxy connected to the server from (`-` if it never connected) |
//! | `%t` | the accept date, `30/Nov/2026:12:00:00.123` (UTC) |
//! | `%T` `%Tl` | the accept date, `30/Nov/2026:12:00:00 +0000` (both UTC: there is no time-zone database here) |
//! | `%Ts` `%ms` | the accept date in seconds since the epoch; its milliseconds (`123`) |
//! | `%Tw` `%Tc` `%Tt` | wait, connect and total times in milliseconds (`-1`: never measured), as in tcplog |
//! | `%B` `%U` | bytes from the server to the client; from the client to the server |
//! | `%ts` | the termination state (`--`, `SC`, `cD`...) |
//! | `%ac` `%fc` `%bc` `%sc` `%rc` `%sq` `%bq` | the counts of tcplog (`%rc` with its `+` for a redispatch) |
//! | `%pid` `%H` | the process's id; the host name |
//! | `%rt` | the connection's number in this process, from 1 in the order accepted (0 in a format without `%rt` or `%ID`, which do not count) |
//! | `%ID` | a unique id: HAProxy's example `unique-id-format`, `%{+X}o %ci:%cp_%fi:%fp_%Ts_%rt:%pid` |
//! | `%%` | a `%` |
//!
//! As in HAProxy, a run of spaces is one separator, written as one space,
//! and never at the start of a line. Flags go in braces before a
//! variable's name, as in HAProxy: `+Q`
//! quotes a text value, `+X` writes addresses, ports, `%Ts`, `%rt` and
//! `%pid` in hexadecimal, `+E` escapes `"`, `\` and `]` with a backslash
//! (for RFC 5424 structured data); `-Q`, `-X`, `-E` take one off again, and
//! `%{...}o` sets flags for every variable after it. Text values (names,
//! `%s`, `%ts`, `%H`) are escaped as in tcplog (HAProxy's section 8.6: `#`
//! and two hex digits for anything outside `!`..`~`, and for `#`, `"`, `/`,
//! `{`, `}`), so no value can split or forge a line.
//!
//! Refused, each with where it is in the format and what to use: unknown
//! names (HAProxy's HTTP and TLS variables among them: this proxy relays
//! TCP and terminates no TLS), sample expressions `%[...]`, named items
//! `%(name)`, and the `json` / `cbor` / `bin` flags (the `json` format
//! exists whole: `log-format json`).

use std::fmt::{self, Write as _};
use std::net::{IpAddr, SocketAddr};

use super::record::{Millis, Record, escape_name};
use crate::log::utc::{civil, since_epoch};

/// HAProxy's `option tcplog` as a log-format string: `Record::write_tcplog`
/// writes exactly the line this would (a test holds the two together).
pub const TCPLOG: &str = "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq";

/// A compiled format.
#[derive(Debug, Clone)]
pub struct CustomFormat {
    source: String,
    pieces: Vec<Piece>,
}

/// Two formats are the same if they were written the same.
impl PartialEq for CustomFormat {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for CustomFormat {}

/// What a connection must gather for its line beyond what every line
/// has: each costs a system call per connection, so only a format that
/// shows it asks for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// `%fi`, `%fp`, `%ID`: the address the client connected to.
    pub frontend_addr: bool,
    /// `%bi`, `%bp`: the address the server was connected from.
    pub backend_source: bool,
    /// `%rt`, `%ID`: the connection's number, from a counter every worker
    /// shares.
    pub counter: bool,
}

/// A format, wrong at `offset` (in characters from its start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// Where in the format text, in characters from 0.
    pub offset: usize,
    /// What was wrong and what to write.
    pub message: String,
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    /// A run of spaces: one space, unless the line is empty so far or
    /// already ends with one (HAProxy: "spaces are considered as
    /// delimiters and are merged").
    Separator,
    Item(Var, Flags),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flags {
    quote: bool,
    hex: bool,
    escape: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    ClientIp,
    ClientPort,
    FrontendIp,
    FrontendPort,
    Frontend,
    Group,
    Server,
    ServerIp,
    ServerPort,
    SourceIp,
    SourcePort,
    AcceptDate,
    DateWithZone,
    Timestamp,
    Millis,
    Wait,
    Connect,
    Total,
    BytesDown,
    BytesUp,
    Termination,
    ActiveProcess,
    ActiveFrontend,
    ActiveBackend,
    ActiveServer,
    Retries,
    ServerQueue,
    BackendQueue,
    Pid,
    Hostname,
    Counter,
    UniqueId,
}

/// Every variable by its name, in the order the error lists them.
const VARIABLES: &[(&str, Var)] = &[
    ("ci", Var::ClientIp),
    ("cp", Var::ClientPort),
    ("fi", Var::FrontendIp),
    ("fp", Var::FrontendPort),
    ("f", Var::Frontend),
    ("ft", Var::Frontend),
    ("b", Var::Group),
    ("s", Var::Server),
    ("si", Var::ServerIp),
    ("sp", Var::ServerPort),
    ("bi", Var::SourceIp),
    ("bp", Var::SourcePort),
    ("t", Var::AcceptDate),
    ("T", Var::DateWithZone),
    ("Tl", Var::DateWithZone),
    ("Ts", Var::Timestamp),
    ("ms", Var::Millis),
    ("Tw", Var::Wait),
    ("Tc", Var::Connect),
    ("Tt", Var::Total),
    ("B", Var::BytesDown),
    ("U", Var::BytesUp),
    ("ts", Var::Termination),
    ("ac", Var::ActiveProcess),
    ("fc", Var::ActiveFrontend),
    ("bc", Var::ActiveBackend),
    ("sc", Var::ActiveServer),
    ("rc", Var::Retries),
    ("sq", Var::ServerQueue),
    ("bq", Var::BackendQueue),
    ("pid", Var::Pid),
    ("H", Var::Hostname),
    ("rt", Var::Counter),
    ("ID", Var::UniqueId),
];

/// HAProxy's variables that mean nothing for a TCP relay that terminates no
/// TLS: named in the error, rather than "unknown".
const HTTP_OR_TLS: &[&str] = &[
    "r", "ST", "HM", "HP", "HPO", "HQ", "HU", "HV", "CC", "CS", "hr", "hrl", "hs", "hsl", "tsc",
    "Tq", "TR", "Tr", "Ta", "Ti", "Tu", "Th", "Td", "tr", "trg", "trl", "sslc", "sslv",
];

impl CustomFormat {
    /// Compiles `source` (module docs).
    pub fn compile(source: &str) -> Result<CustomFormat, FormatError> {
        Compiler::new(source).run()
    }

    /// The format as it was written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What its variables need gathered.
    pub fn needs(&self) -> Needs {
        let uses = |vars: &[Var]| {
            self.pieces
                .iter()
                .any(|p| matches!(p, Piece::Item(v, _) if vars.contains(v)))
        };
        Needs {
            frontend_addr: uses(&[Var::FrontendIp, Var::FrontendPort, Var::UniqueId]),
            backend_source: uses(&[Var::SourceIp, Var::SourcePort]),
            counter: uses(&[Var::Counter, Var::UniqueId]),
        }
    }

    /// Appends `r`'s line, without its newline.
    pub fn write(&self, r: &Record<'_>, out: &mut String) {
        let start = out.len();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Separator => {
                    if out.len() > start && !out.ends_with(' ') {
                        out.push(' ');
                    }
                }
                Piece::Item(var, flags) => write_var(*var, *flags, r, out),
            }
        }
    }
}

/// The compiler's state: the format's characters, where it is, the text
/// since the last variable, and the flags `%o` set.
struct Compiler<'a> {
    source: &'a str,
    chars: Vec<char>,
    at: usize,
    text: String,
    defaults: Flags,
    pieces: Vec<Piece>,
}

impl<'a> Compiler<'a> {
    fn new(source: &'a str) -> Compiler<'a> {
        Compiler {
            source,
            chars: source.chars().collect(),
            at: 0,
            text: String::new(),
            defaults: Flags::default(),
            pieces: Vec::new(),
        }
    }

    fn run(mut self) -> Result<CustomFormat, FormatError> {
        while let Some(&c) = self.chars.get(self.at) {
            self.at += 1;
            if c == ' ' {
                self.push_text();
                while self.chars.get(self.at) == Some(&' ') {
                    self.at += 1;
                }
                self.pieces.push(Piece::Separator);
            } else if c != '%' {
                self.text.push(c);
            } else if self.chars.get(self.at) == Some(&'%') {
                self.at += 1;
                self.text.push('%');
            } else {
                self.item(self.at - 1)?;
            }
        }
        self.push_text();
        Ok(CustomFormat {
            source: self.source.to_string(),
            pieces: self.pieces,
        })
    }

    /// The item whose `%` is at `percent`: flags, then a name.
    fn item(&mut self, percent: usize) -> Result<(), FormatError> {
        let mut flags = self.defaults;
        if self.chars.get(self.at) == Some(&'{') {
            flags = self.flags(flags)?;
        }
        let refuse = |message: &str| {
            Err(FormatError {
                offset: percent,
                message: message.to_string(),
            })
        };
        match self.chars.get(self.at) {
            Some('[') => {
                return refuse("sample expressions (%[...]) are not supported; use the variables");
            }
            Some('(') => {
                return refuse("named items (%(name)...) are not supported; use the variables");
            }
            _ => {}
        }
        let start = self.at;
        while self
            .chars
            .get(self.at)
            .is_some_and(char::is_ascii_alphanumeric)
        {
            self.at += 1;
        }
        let name: String = self.chars[start..self.at].iter().collect();
        if name.is_empty() {
            return refuse(
                "'%' must be followed by a variable's name; write %% for a percent sign",
            );
        }
        if name == "o" {
            self.defaults = flags;
            return Ok(());
        }
        let Some(&(_, var)) = VARIABLES.iter().find(|(n, _)| *n == name) else {
            return Err(FormatError {
                offset: percent,
                message: unknown(&name),
            });
        };
        self.push_text();
        self.pieces.push(Piece::Item(var, flags));
        Ok(())
    }

    /// The text read since the last piece, as a piece of its own.
    fn push_text(&mut self) {
        if !self.text.is_empty() {
            self.pieces
                .push(Piece::Text(std::mem::take(&mut self.text)));
        }
    }

    /// `{+Q,-X,...}`, starting at its `{`: `flags` changed by each.
    fn flags(&mut self, mut flags: Flags) -> Result<Flags, FormatError> {
        let open = self.at;
        let Some(close) = self.chars[open..].iter().position(|&c| c == '}') else {
            return Err(FormatError {
                offset: open,
                message: "'{' of flags without its '}'".to_string(),
            });
        };
        let inside: String = self.chars[open + 1..open + close].iter().collect();
        for flag in inside.split(',') {
            let (on, name) = match flag.split_at_checked(1) {
                Some(("+", name)) => (true, name),
                Some(("-", name)) => (false, name),
                _ => (true, flag),
            };
            match name {
                "Q" => flags.quote = on,
                "X" => flags.hex = on,
                "E" => flags.escape = on,
                _ => {
                    return Err(FormatError {
                        offset: open,
                        message: format!(
                            "unknown flag '{flag}'; use +Q (quote), +X (hexadecimal) or +E \
                             (escape), or -Q, -X, -E (for JSON lines: log-format json)"
                        ),
                    });
                }
            }
        }
        self.at = open + close + 1;
        Ok(flags)
    }
}

/// What an unknown variable's error says.
fn unknown(name: &str) -> String {
    let names: Vec<String> = VARIABLES.iter().map(|(n, _)| format!("%{n}")).collect();
    let why = if HTTP_OR_TLS.contains(&name) {
        " is HAProxy's for HTTP or TLS; this proxy relays TCP and terminates no TLS"
    } else {
        " is not a log-format variable"
    };
    format!("'%{name}'{why}; use {}", names.join(" "))
}

/// Writes one variable.
fn write_var(var: Var, flags: Flags, r: &Record<'_>, out: &mut String) {
    match var {
        Var::ClientIp => ip(Some(r.client.ip()), flags, out),
        Var::ClientPort => port(Some(r.client), flags, out),
        Var::FrontendIp => ip(r.frontend_addr.map(|a| a.ip()), flags, out),
        Var::FrontendPort => port(r.frontend_addr, flags, out),
        Var::Frontend => text(Some(r.frontend), flags, out),
        Var::Group => text(Some(r.group), flags, out),
        Var::Server => text(Some(r.server().unwrap_or("<NOSRV>")), flags, out),
        Var::ServerIp => ip(r.backend.and_then(|s| s.addr).map(|a| a.ip()), flags, out),
        Var::ServerPort => port(r.backend.and_then(|s| s.addr), flags, out),
        Var::SourceIp => ip(r.backend_source.map(|a| a.ip()), flags, out),
        Var::SourcePort => port(r.backend_source, flags, out),
        Var::Wait => shown(Millis(r.wait), out),
        Var::Connect => shown(Millis(r.connect), out),
        Var::Total => shown(r.total.as_millis(), out),
        Var::BytesDown => shown(r.bytes_down, out),
        Var::BytesUp => shown(r.bytes_up, out),
        Var::Termination => text(Some(&r.termination.to_string()), flags, out),
        Var::ActiveProcess => shown(r.active_process, out),
        Var::ActiveFrontend => shown(r.active_frontend, out),
        Var::ActiveBackend => shown(r.active_backend, out),
        Var::ActiveServer => shown(r.active_server, out),
        Var::Retries => {
            let plus = if r.redispatched { "+" } else { "" };
            let _ = write!(out, "{plus}{}", r.retries);
        }
        Var::ServerQueue | Var::BackendQueue => out.push('0'),
        Var::Pid => number(u64::from(crate::log::pid()), 4, flags, out),
        Var::Hostname => text(Some(crate::log::syslog::hostname()), flags, out),
        Var::Counter => number(r.id, 4, flags, out),
        Var::UniqueId => unique_id(r, out),
        Var::AcceptDate | Var::DateWithZone | Var::Timestamp | Var::Millis => {
            date(var, r, flags, out)
        }
    }
}

/// The accept date, in one of its four forms.
fn date(var: Var, r: &Record<'_>, flags: Flags, out: &mut String) {
    let since = since_epoch(r.accepted);
    let c = civil(since);
    let (day, mon, year) = (c.day, c.month_name(), c.year);
    let (h, m, s) = (c.hour, c.minute, c.second);
    let _ = match var {
        Var::AcceptDate => write!(
            out,
            "{day:02}/{mon}/{year:04}:{h:02}:{m:02}:{s:02}.{:03}",
            c.millis
        ),
        Var::DateWithZone => write!(out, "{day:02}/{mon}/{year:04}:{h:02}:{m:02}:{s:02} +0000"),
        Var::Millis => write!(out, "{:03}", c.millis),
        _ => {
            number(since.as_secs(), 8, flags, out);
            Ok(())
        }
    };
}

/// HAProxy's example unique id: `%{+X}o %ci:%cp_%fi:%fp_%Ts_%rt:%pid`.
fn unique_id(r: &Record<'_>, out: &mut String) {
    let hex = Flags {
        hex: true,
        ..Flags::default()
    };
    ip(Some(r.client.ip()), hex, out);
    out.push(':');
    port(Some(r.client), hex, out);
    out.push('_');
    ip(r.frontend_addr.map(|a| a.ip()), hex, out);
    out.push(':');
    port(r.frontend_addr, hex, out);
    out.push('_');
    number(since_epoch(r.accepted).as_secs(), 8, hex, out);
    out.push('_');
    number(r.id, 4, hex, out);
    out.push(':');
    number(u64::from(crate::log::pid()), 4, hex, out);
}

fn shown(value: impl fmt::Display, out: &mut String) {
    let _ = write!(out, "{value}");
}

/// A number; in hexadecimal, at least `width` digits, with `+X`.
fn number(n: u64, width: usize, flags: Flags, out: &mut String) {
    let _ = if flags.hex {
        write!(out, "{n:0width$X}")
    } else {
        write!(out, "{n}")
    };
}

/// An address (`-` for none); with `+X`, 8 or 32 hexadecimal digits.
fn ip(addr: Option<IpAddr>, flags: Flags, out: &mut String) {
    let _ = match (addr, flags.hex) {
        (None, _) => write!(out, "-"),
        (Some(IpAddr::V4(v4)), true) => write!(out, "{:08X}", u32::from(v4)),
        (Some(IpAddr::V6(v6)), true) => write!(out, "{:032X}", u128::from(v6)),
        (Some(ip), false) => write!(out, "{ip}"),
    };
}

/// A port (`-` for none).
fn port(addr: Option<SocketAddr>, flags: Flags, out: &mut String) {
    match addr {
        Some(a) => number(u64::from(a.port()), 4, flags, out),
        None => out.push('-'),
    }
}

/// A text value (`-` for none): escaped as tcplog escapes names, quoted
/// with `+Q`, its `"`, `\` and `]` backslashed with `+E`.
fn text(value: Option<&str>, flags: Flags, out: &mut String) {
    let Some(value) = value else {
        out.push('-');
        return;
    };
    if flags.quote {
        out.push('"');
    }
    if flags.escape {
        let mut escaped = String::new();
        escape_name(value, &mut escaped);
        for c in escaped.chars() {
            if matches!(c, '"' | '\\' | ']') {
                out.push('\\');
            }
            out.push(c);
        }
    } else {
        escape_name(value, out);
    }
    if flags.quote {
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::access_log::record::ServerRef;
    use crate::ops::access_log::record::tests::{record, refused, tcplog};
    use crate::ops::access_log::termination::Termination;
    use std::net::Ipv6Addr;

    fn line(format: &str, r: &Record<'_>) -> String {
        let compiled = CustomFormat::compile(format).expect("a valid format");
        let mut out = String::new();
        compiled.write(r, &mut out);
        out
    }

    fn error(format: &str) -> FormatError {
        CustomFormat::compile(format).expect_err("an invalid format")
    }

    #[test]
    fn haproxys_tcplog_string_writes_our_tcplog_line() {
        let retried = Record {
            retries: 2,
            redispatched: true,
            termination: Termination::CONNECT_TIMEOUT,
            connect: None,
            ..record()
        };
        let v6 = Record {
            client: SocketAddr::from((Ipv6Addr::LOCALHOST, 4000)),
            backend: Some(ServerRef {
                name: "[::1]:9001",
                addr: Some(SocketAddr::from((Ipv6Addr::LOCALHOST, 9001))),
            }),
            frontend: "a b#c",
            ..record()
        };
        for r in [record(), refused(), retried, v6] {
            assert_eq!(line(TCPLOG, &r), tcplog(&r));
        }
    }

    #[test]
    fn every_variable_writes_its_value() {
        let r = Record {
            frontend_addr: Some(SocketAddr::from(([127, 0, 0, 30], 8080))),
            backend_source: Some(SocketAddr::from(([127, 0, 0, 1], 40000))),
            id: 3,
            ..record()
        };
        let pid = std::process::id();
        for (format, expected) in [
            (
                "%ci %cp %fi %fp",
                "127.0.0.1 51234 127.0.0.30 8080".to_string(),
            ),
            ("%f %ft %b %s", "web web web 127.0.0.1:9001".to_string()),
            (
                "%si:%sp %bi:%bp",
                "127.0.0.1:9001 127.0.0.1:40000".to_string(),
            ),
            (
                "%t|%T|%Tl",
                "30/Nov/2026:12:00:00.123|30/Nov/2026:12:00:00 +0000|30/Nov/2026:12:00:00 +0000"
                    .to_string(),
            ),
            ("%Ts.%ms", "1796040000.123".to_string()),
            ("%Tw/%Tc/%Tt %B %U %ts", "0/1/25 120 42 --".to_string()),
            ("%ac/%fc/%bc/%sc/%rc %sq/%bq", "1/1/1/1/0 0/0".to_string()),
            (
                "%pid %rt %H",
                format!("{pid} 3 {}", crate::log::syslog::hostname()),
            ),
            ("100%% %B", "100% 120".to_string()),
        ] {
            assert_eq!(line(format, &r), expected, "{format}");
        }
    }

    #[test]
    fn absent_values_are_a_dash_as_in_haproxy() {
        let r = refused();
        assert_eq!(
            line("%s %si:%sp %bi:%bp %fi:%fp", &r),
            "<NOSRV> -:- -:- -:-"
        );
        assert_eq!(line("%Tw/%Tc", &r), "-1/-1");
    }

    #[test]
    fn flags_quote_hex_and_escape() {
        let r = Record {
            frontend_addr: Some(SocketAddr::from(([127, 0, 0, 30], 8080))),
            id: 3,
            ..record()
        };
        assert_eq!(line("%{+Q}ft %{+X}ci:%{+X}cp", &r), "\"web\" 7F000001:C822");
        assert_eq!(
            line("%{+Q}o %ft %b %{-Q}s", &r),
            "\"web\" \"web\" 127.0.0.1:9001"
        );
        let pid = std::process::id();
        assert_eq!(
            line("%ID", &r),
            format!("7F000001:C822_7F00001E:1F90_6B0D6540_0003:{pid:04X}")
        );
        assert_eq!(line("%{+X}Ts %{+X}rt", &r), "6B0D6540 0003");
        let odd = Record {
            frontend: "a]b\\c",
            ..record()
        };
        assert_eq!(line("%{+E}f", &odd), "a\\]b\\\\c");
        let v6 = Record {
            client: SocketAddr::from((Ipv6Addr::LOCALHOST, 1)),
            ..record()
        };
        assert_eq!(line("%{+X}ci", &v6), format!("{:032X}", 1));
    }

    #[test]
    fn a_format_without_variables_is_its_text() {
        assert_eq!(line("plain text", &record()), "plain text");
        assert_eq!(line("", &record()), "");
    }

    #[test]
    fn spaces_are_merged_and_never_lead_as_in_haproxy() {
        assert_eq!(line("  %ci   %B  ", &record()), "127.0.0.1 120 ");
        assert_eq!(line("a\tb", &record()), "a\tb");
    }

    #[test]
    fn mistakes_say_where_and_what_to_write() {
        let e = error("%ci %xyz");
        assert_eq!(e.offset, 4);
        assert!(
            e.message
                .starts_with("'%xyz' is not a log-format variable; use %ci %cp "),
            "{}",
            e.message
        );
        let e = error("%ci %r");
        assert!(e.message.contains("for HTTP or TLS"), "{}", e.message);
        assert_eq!(error("abc %[src]").offset, 4);
        assert!(error("%(n)ci").message.contains("named items"));
        assert!(
            error("%{+json}o %ci")
                .message
                .contains("unknown flag '+json'")
        );
        assert!(error("%{+Q ci").message.contains("without its '}'"));
        assert!(error("50%").message.contains("%% for a percent sign"));
        assert!(error("% ci").message.contains("%% for a percent sign"));
        // Offsets count characters, not bytes.
        assert_eq!(error("é%x").offset, 1);
    }

    #[test]
    fn only_the_variables_that_need_a_system_call_ask_for_one() {
        let needs = |f: &str| CustomFormat::compile(f).expect("valid").needs();
        assert_eq!(needs(TCPLOG), Needs::default());
        assert!(needs("%fp").frontend_addr && !needs("%fp").backend_source);
        assert!(needs("%ID").frontend_addr && needs("%ID").counter);
        assert!(needs("%rt").counter && !needs("%ci").counter);
        assert!(needs("%bi").backend_source);
        assert_eq!(
            CustomFormat::compile("%ci").ok(),
            CustomFormat::compile("%ci").ok()
        );
        assert_eq!(
            CustomFormat::compile("%ci").map(|f| f.source().len()),
            Ok(3)
        );
    }
}
