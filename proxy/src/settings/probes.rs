//! The health-check options of a frontend or a group: which check its
//! servers with `check` get (`option tcp-check`, `option redis-check`...),
//! the steps of a `tcp-check`, and the request and expectations of an
//! `httpchk`. Read line by line into a [`ProbeDraft`], then, once the file
//! is read, [`finish`]ed into each checked backend's
//! [`Probe`].
//!
//! ```text
//!   option redis-check [role master|replica]
//!   option pgsql-check user NAME
//!   option mysql-check [user NAME [post-41|post-80]]
//!   option httpchk [[METHOD] URI [VERSION]]   http-check expect [!] status|rstatus|string|rstring VALUE
//!                                             http-check send [meth M] [uri U] [ver V] [hdr NAME VALUE]...
//!   option smtpchk [HELO|EHLO DOMAIN]
//!   option tcp-check                          tcp-check connect [port N]
//!                                             tcp-check send TEXT | send-binary HEX
//!                                             tcp-check expect [min-recv N] [!] string|rstring|binary|rbinary PATTERN
//!                                             tcp-check comment TEXT
//! ```
//!
//! A text (`send`, `expect string`) is the rest of the line, its words
//! joined by one space, outer double quotes removed, with HAProxy's
//! escapes: `\r` `\n` `\t` `\\` `\"` `\ ` and `\xHH` (`\x23` for a `#`,
//! which starts a comment, and `\x20\x20` for two spaces in a row). A
//! regular expression is the rest of the line too, quotes removed, its
//! escapes left to it (`policy/check/regex.rs`). HAProxy's words that this
//! proxy does not do are refused with the reason, never ignored.

use super::config::BackendServer;
use super::haproxy;
use super::reader::Reader;
use super::words::{Word, did_you_mean, list};
use crate::policy::check::Probe;
use crate::policy::check::http::{HttpCheck, HttpExpect, HttpMatch};
use crate::policy::check::mysql::MysqlCheck;
use crate::policy::check::pgsql::PgsqlCheck;
use crate::policy::check::redis::{RedisCheck, Role};
use crate::policy::check::regex::Regex;
use crate::policy::check::script::{Expect, Pattern, Script, Step};
use crate::policy::check::smtp::SmtpCheck;

/// A section's check options while its lines are read.
#[derive(Debug, Default)]
pub struct ProbeDraft {
    /// The `option` that chose the check, with its line and column.
    chosen: Option<(Probe, usize, usize)>,
    /// `tcp-check` steps, in order.
    steps: Vec<Step>,
    /// The first `tcp-check` line's line and column.
    first_tcp_check: Option<(usize, usize)>,
    /// `http-check send` and `http-check expect` lines, applied in order
    /// to the `option httpchk` request.
    http: Vec<HttpLine>,
    /// The first `http-check` line's line and column.
    first_http_check: Option<(usize, usize)>,
}

#[derive(Debug)]
enum HttpLine {
    Send(HttpSend),
    Expect(HttpExpect),
}

/// What an `http-check send` line sets.
#[derive(Debug, Default)]
struct HttpSend {
    method: Option<String>,
    uri: Option<String>,
    version: Option<String>,
    headers: Vec<(String, String)>,
}

/// The check options, in the order the messages list them.
const OPTIONS: &[&str] = &[
    "tcp-check",
    "redis-check",
    "pgsql-check",
    "mysql-check",
    "httpchk",
    "smtpchk",
];

/// HAProxy's other check options, and why they are not here.
const REFUSED_OPTIONS: &[(&str, &str)] = &[
    (
        "ldap-check",
        "LDAP checks are not built in; write the bind request with 'tcp-check send-binary' and 'expect binary'",
    ),
    (
        "ssl-hello-chk",
        "TLS checks are not supported: the proxy does not speak TLS",
    ),
    (
        "spop-check",
        "SPOP is HAProxy's own agent protocol; there are no SPOE agents here",
    ),
    (
        "external-check",
        "external check programs are not supported; use an 'agent-check' on the backend line",
    ),
];

/// `option NAME ...`: one check per section.
pub fn option(r: &mut Reader<'_>, draft: &mut ProbeDraft, words: &[Word<'_>]) {
    let hint = "a check, like 'option redis-check' or 'option tcp-check'";
    let Some(name) = r.value(words, 0, hint) else {
        return;
    };
    let args = words.get(2..).unwrap_or_default();
    let probe = match name.text {
        "tcp-check" => no_args(r, name, args).map(|()| Probe::Script(Script::default())),
        "redis-check" => redis(r, args).map(Probe::Redis),
        "pgsql-check" => pgsql(r, name, args).map(Probe::Pgsql),
        "mysql-check" => mysql(r, args).map(Probe::Mysql),
        "httpchk" => httpchk(r, args).map(Probe::Http),
        "smtpchk" => smtpchk(r, name, args).map(Probe::Smtp),
        other => return unknown_option(r, name, other),
    };
    let Some(probe) = probe else {
        return;
    };
    if let Some((earlier, line, _)) = &draft.chosen {
        let message = format!(
            "'option {}' and 'option {}' (line {line}) exclude each other: a section has one \
             check; keep one",
            name.text,
            option_name(earlier)
        );
        return r.error(name.column, message);
    }
    draft.chosen = Some((probe, r.line, words[0].column));
}

/// The `option` word of a probe.
fn option_name(probe: &Probe) -> &'static str {
    match probe.name() {
        "connect" => "tcp-check",
        name => name,
    }
}

fn unknown_option(r: &mut Reader<'_>, name: Word<'_>, other: &str) {
    if let Some(here) = haproxy::option(other) {
        let message = format!("HAProxy's 'option {other}': {here}");
        return r.error(name.column, message);
    }
    let message = match REFUSED_OPTIONS.iter().find(|(o, _)| *o == other) {
        Some((_, why)) => format!("option {other}: {why}"),
        None => format!(
            "unknown option '{other}'{}; 'option' here chooses a health check: {}",
            did_you_mean(other, OPTIONS),
            list(OPTIONS, "or")
        ),
    };
    r.error(name.column, message);
}

fn no_args(r: &mut Reader<'_>, name: Word<'_>, args: &[Word<'_>]) -> Option<()> {
    match args.first() {
        None => Some(()),
        Some(extra) => {
            let message = format!(
                "unexpected '{}' after 'option {}'; its steps go on 'tcp-check' lines below it",
                extra.text, name.text
            );
            r.error(extra.column, message);
            None
        }
    }
}

/// `option redis-check [role master|replica]`.
fn redis(r: &mut Reader<'_>, args: &[Word<'_>]) -> Option<RedisCheck> {
    match args {
        [] => Some(RedisCheck::default()),
        [key, value] if key.text == "role" => match Role::parse(value.text) {
            Some(role) => Some(RedisCheck { role: Some(role) }),
            None => {
                let message = format!(
                    "option redis-check: unknown role '{}'; use {}",
                    value.text,
                    list(&Role::NAMES, "or")
                );
                r.error(value.column, message);
                None
            }
        },
        [first, ..] => {
            let message = format!(
                "option redis-check: unexpected '{}'; it takes 'role master' or 'role replica', \
                 or nothing",
                first.text
            );
            r.error(first.column, message);
            None
        }
    }
}

/// `option pgsql-check user NAME`.
fn pgsql(r: &mut Reader<'_>, name: Word<'_>, args: &[Word<'_>]) -> Option<PgsqlCheck> {
    match args {
        [key, user] if key.text == "user" => Some(PgsqlCheck {
            user: user.text.to_string(),
        }),
        _ => {
            let at = args.first().map_or(name.column, |w| w.column);
            let message = "option pgsql-check needs the user its StartupMessage names, like \
                           'option pgsql-check user haproxy'";
            r.error(at, message);
            None
        }
    }
}

/// `option mysql-check [user NAME [post-41|post-80]]`.
fn mysql(r: &mut Reader<'_>, args: &[Word<'_>]) -> Option<MysqlCheck> {
    match args {
        [] => Some(MysqlCheck::default()),
        [key, user] if key.text == "user" => Some(MysqlCheck {
            user: Some(user.text.to_string()),
        }),
        [key, user, version] if key.text == "user" => match version.text {
            // The login adapts to what the server offers (mysql.rs).
            "post-41" | "post-80" => Some(MysqlCheck {
                user: Some(user.text.to_string()),
            }),
            "pre-41" => {
                let message = "option mysql-check: pre-41 is not supported: servers before \
                               MySQL 4.1 are gone; remove it";
                r.error(version.column, message);
                None
            }
            other => {
                let message = format!(
                    "option mysql-check: unknown '{other}'; write 'post-41' or nothing after the user"
                );
                r.error(version.column, message);
                None
            }
        },
        [first, ..] => {
            let message = format!(
                "option mysql-check: unexpected '{}'; it takes 'user NAME', or nothing",
                first.text
            );
            r.error(first.column, message);
            None
        }
    }
}

/// `option httpchk [[METHOD] URI [VERSION]]`.
fn httpchk(r: &mut Reader<'_>, args: &[Word<'_>]) -> Option<HttpCheck> {
    let mut check = HttpCheck::default();
    match args {
        [] => {}
        [uri] => check.uri = uri.text.to_string(),
        [method, uri] => {
            (check.method, check.uri) = (method.text.to_string(), uri.text.to_string())
        }
        [method, uri, version] => {
            check.version = http_version(r, *version)?;
            (check.method, check.uri) = (method.text.to_string(), uri.text.to_string());
        }
        [.., extra] => {
            let message = format!(
                "option httpchk: unexpected '{}'; it takes [METHOD] URI [VERSION]; headers go on \
                 'http-check send hdr NAME VALUE' lines",
                extra.text
            );
            r.error(extra.column, message);
            return None;
        }
    }
    Some(check)
}

fn http_version(r: &mut Reader<'_>, w: Word<'_>) -> Option<String> {
    match w.text {
        "HTTP/1.0" | "HTTP/1.1" => Some(w.text.to_string()),
        other => {
            let message = format!("http version '{other}': use HTTP/1.0 or HTTP/1.1");
            r.error(w.column, message);
            None
        }
    }
}

/// `option smtpchk [HELO|EHLO DOMAIN]`.
fn smtpchk(r: &mut Reader<'_>, name: Word<'_>, args: &[Word<'_>]) -> Option<SmtpCheck> {
    match args {
        [] => Some(SmtpCheck::default()),
        [hello, domain] if matches!(hello.text, "HELO" | "EHLO") => Some(SmtpCheck {
            hello: hello.text.to_string(),
            domain: domain.text.to_string(),
        }),
        _ => {
            let at = args.first().map_or(name.column, |w| w.column);
            let message = "option smtpchk takes HELO or EHLO and a domain, like 'option smtpchk \
                           EHLO lb.example', or nothing (HELO localhost)";
            r.error(at, message);
            None
        }
    }
}

// ---- tcp-check ----

/// `tcp-check ACTION ...`: one step.
pub fn tcp_check(r: &mut Reader<'_>, draft: &mut ProbeDraft, words: &[Word<'_>]) {
    let hint = "an action: connect, send, send-binary, expect or comment";
    let Some(action) = r.value(words, 0, hint) else {
        return;
    };
    let args = words.get(2..).unwrap_or_default();
    let step = match action.text {
        "connect" => connect_step(r, args),
        "send" => text_value(r, action, args).map(Step::Send),
        "send-binary" => hex_value(r, action, args).map(Step::Send),
        "expect" => expect_step(r, action, args).map(Step::Expect),
        "comment" => None, // HAProxy's label for its stats page: nothing to do
        "send-lf" | "send-binary-lf" => refuse(
            r,
            action,
            "log-format strings are not supported; write the bytes with 'send' or 'send-binary'",
        ),
        "set-var" | "set-var-fmt" | "unset-var" => {
            refuse(r, action, "variables are not supported in checks")
        }
        other => {
            let actions = ["connect", "send", "send-binary", "expect", "comment"];
            let message = format!(
                "tcp-check: unknown action '{other}'{}; use {}",
                did_you_mean(other, &actions),
                list(&actions, "or")
            );
            r.error(action.column, message);
            None
        }
    };
    draft
        .first_tcp_check
        .get_or_insert((r.line, words[0].column));
    if let Some(step) = step {
        draft.steps.push(step);
    }
}

fn refuse<T>(r: &mut Reader<'_>, w: Word<'_>, why: &str) -> Option<T> {
    r.error(w.column, format!("'{}': {why}", w.text));
    None
}

/// `tcp-check connect [port N]`.
fn connect_step(r: &mut Reader<'_>, args: &[Word<'_>]) -> Option<Step> {
    match args {
        [] => Some(Step::Connect { port: None }),
        [key, port] if key.text == "port" => {
            let port = r.number("tcp-check connect port", *port, 1, 65_535, "")?;
            Some(Step::Connect {
                port: u16::try_from(port).ok(),
            })
        }
        [other, ..] => {
            let why = match other.text {
                "send-proxy" => {
                    "the check sends the server's PROXY header when its backend line has send-proxy or send-proxy-v2"
                }
                "ssl" | "sni" | "alpn" => "TLS is not supported: the proxy does not speak TLS",
                "addr" => "a check connects to its server's address; use 'port N' for another port",
                _ => "'tcp-check connect' takes 'port N', or nothing",
            };
            let message = format!("tcp-check connect: '{}': {why}", other.text);
            r.error(other.column, message);
            None
        }
    }
}

/// HAProxy's expect options that shape its own status texts.
const REFUSED_EXPECT: &[&str] = &[
    "comment",
    "ok-status",
    "error-status",
    "tout-status",
    "on-success",
    "on-error",
    "status-code",
];

/// `tcp-check expect [min-recv N] [!] KIND PATTERN`.
fn expect_step(r: &mut Reader<'_>, action: Word<'_>, args: &[Word<'_>]) -> Option<Expect> {
    let mut min_recv = None;
    let mut negate = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        match w.text {
            "min-recv" => {
                let Some(&n) = args.get(i + 1) else {
                    return refuse(r, *w, "needs a number of bytes");
                };
                let limit =
                    u32::try_from(crate::policy::check::dialogue::INBOX_LIMIT).unwrap_or(u32::MAX);
                min_recv = Some(r.number("min-recv", n, 1, limit, "")? as usize);
                i += 2;
            }
            "!" => {
                negate = true;
                i += 1;
            }
            word if REFUSED_EXPECT.contains(&word) => {
                return refuse(
                    r,
                    *w,
                    "not supported: it shapes HAProxy's status texts; the log says what was expected and what came",
                );
            }
            _ => break,
        }
    }
    let pattern = pattern(r, action, &args[i..])?;
    Some(Expect {
        negate,
        pattern,
        min_recv,
    })
}

/// `string|rstring|binary|rbinary PATTERN`.
fn pattern(r: &mut Reader<'_>, action: Word<'_>, args: &[Word<'_>]) -> Option<Pattern> {
    let Some((kind, rest)) = args.split_first() else {
        let message =
            "'tcp-check expect' needs what to look for, like 'tcp-check expect string +PONG'";
        r.error(action.column, message);
        return None;
    };
    match kind.text {
        "string" => text_value(r, *kind, rest).map(Pattern::String),
        "rstring" => regex_value(r, *kind, rest).map(Pattern::Rstring),
        "binary" => hex_value(r, *kind, rest).map(Pattern::Binary),
        "rbinary" => regex_value(r, *kind, rest).map(Pattern::Rbinary),
        "string-lf" | "binary-lf" => refuse(r, *kind, "log-format patterns are not supported"),
        other => {
            let kinds = ["string", "rstring", "binary", "rbinary"];
            let message = format!(
                "tcp-check expect: unknown match '{other}'{}; use {}",
                did_you_mean(other, &kinds),
                list(&kinds, "or")
            );
            r.error(kind.column, message);
            None
        }
    }
}

// ---- http-check ----

/// `http-check expect ...` or `http-check send ...`.
pub fn http_check(r: &mut Reader<'_>, draft: &mut ProbeDraft, words: &[Word<'_>]) {
    let Some(action) = r.value(words, 0, "'expect' or 'send'") else {
        return;
    };
    let args = words.get(2..).unwrap_or_default();
    let line = match action.text {
        "expect" => http_expect(r, action, args).map(HttpLine::Expect),
        "send" => http_send(r, args).map(HttpLine::Send),
        "disable-on-404" | "send-state" | "connect" | "set-var" | "unset-var" | "comment" => {
            refuse(
                r,
                action,
                "not supported; this proxy's httpchk takes 'send' and 'expect'",
            )
        }
        other => {
            let message = format!(
                "http-check: unknown action '{other}'{}; use expect or send",
                did_you_mean(other, &["expect", "send"])
            );
            r.error(action.column, message);
            None
        }
    };
    draft
        .first_http_check
        .get_or_insert((r.line, words[0].column));
    if let Some(line) = line {
        draft.http.push(line);
    }
}

/// `http-check expect [!] status|rstatus|string|rstring VALUE`.
fn http_expect(r: &mut Reader<'_>, action: Word<'_>, args: &[Word<'_>]) -> Option<HttpExpect> {
    let negate = args.first().is_some_and(|w| w.text == "!");
    let args = &args[usize::from(negate)..];
    let Some((kind, rest)) = args.split_first() else {
        let message =
            "'http-check expect' needs what to look for, like 'http-check expect status 200'";
        r.error(action.column, message);
        return None;
    };
    let what = match kind.text {
        "status" => HttpMatch::Status(status_list(r, *kind, rest)?),
        "rstatus" => HttpMatch::Rstatus(regex_value(r, *kind, rest)?),
        "string" => HttpMatch::String(text_value(r, *kind, rest)?),
        "rstring" => HttpMatch::Rstring(regex_value(r, *kind, rest)?),
        "hdr" | "fhdr" => {
            return refuse(
                r,
                *kind,
                "header matching is not supported; match the status or the body",
            );
        }
        word if REFUSED_EXPECT.contains(&word) || word == "min-recv" => {
            return refuse(
                r,
                *kind,
                "not supported: the log says what was expected and what came",
            );
        }
        other => {
            let kinds = ["status", "rstatus", "string", "rstring"];
            let message = format!(
                "http-check expect: unknown match '{other}'{}; use {}",
                did_you_mean(other, &kinds),
                list(&kinds, "or")
            );
            r.error(kind.column, message);
            return None;
        }
    };
    Some(HttpExpect { negate, what })
}

/// `200`, `200-299,302`: codes and inclusive ranges.
fn status_list(r: &mut Reader<'_>, kind: Word<'_>, rest: &[Word<'_>]) -> Option<Vec<(u16, u16)>> {
    let value = one_word(r, kind, rest, "codes, like 200 or 200-299,302")?;
    let code = |text: &str| text.parse::<u16>().ok().filter(|c| (100..=999).contains(c));
    let mut ranges = Vec::new();
    for part in value.text.split(',') {
        let range = match part.split_once('-') {
            Some((low, high)) => code(low).zip(code(high)).filter(|(l, h)| l <= h),
            None => code(part).map(|c| (c, c)),
        };
        match range {
            Some(range) => ranges.push(range),
            None => {
                let message = format!(
                    "http-check expect status: '{part}' is not a status code (100 to 999) or a \
                     range of them, like 200-299"
                );
                r.error(value.column, message);
                return None;
            }
        }
    }
    Some(ranges)
}

/// `http-check send [meth M] [uri U] [ver V] [hdr NAME VALUE]...`.
fn http_send(r: &mut Reader<'_>, args: &[Word<'_>]) -> Option<HttpSend> {
    let mut send = HttpSend::default();
    let mut i = 0;
    while let Some(&key) = args.get(i) {
        let needed = if key.text == "hdr" { 2 } else { 1 };
        let values = args.get(i + 1..i + 1 + needed);
        let Some(values) = values else {
            let what = if needed == 2 {
                "a name and a value"
            } else {
                "a value"
            };
            return refuse(r, key, &format!("needs {what}"));
        };
        match key.text {
            "meth" => send.method = Some(values[0].text.to_string()),
            "uri" => send.uri = Some(values[0].text.to_string()),
            "ver" => send.version = Some(http_version(r, values[0])?),
            "hdr" => send
                .headers
                .push((values[0].text.to_string(), values[1].text.to_string())),
            "body" | "body-lf" | "uri-lf" | "body-fmt" => {
                return refuse(r, key, "not supported; a check request has no body here");
            }
            other => {
                let keys = ["meth", "uri", "ver", "hdr"];
                let message = format!(
                    "http-check send: unknown '{other}'{}; use {}",
                    did_you_mean(other, &keys),
                    list(&keys, "or")
                );
                r.error(key.column, message);
                return None;
            }
        }
        i += 1 + needed;
    }
    Some(send)
}

// ---- values ----

/// The single word after `kind`.
fn one_word<'a>(
    r: &mut Reader<'_>,
    kind: Word<'_>,
    rest: &[Word<'a>],
    what: &str,
) -> Option<Word<'a>> {
    match rest {
        [value] => Some(*value),
        [] => refuse(r, kind, &format!("needs {what}")),
        [_, extra, ..] => {
            let message = format!(
                "unexpected '{}'; '{}' takes one value",
                extra.text, kind.text
            );
            r.error(extra.column, message);
            None
        }
    }
}

/// The rest of the line after `kind`, words joined by one space, outer
/// double quotes removed (module docs).
fn rest_of_line<'a>(
    r: &mut Reader<'_>,
    kind: Word<'_>,
    rest: &[Word<'a>],
) -> Option<(String, usize)> {
    let Some(first) = rest.first() else {
        return refuse(r, kind, "needs a value");
    };
    let joined = rest.iter().map(|w| w.text).collect::<Vec<_>>().join(" ");
    let unquoted = match joined.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if joined.len() >= 2 => inner.to_string(),
        _ => joined,
    };
    Some((unquoted, first.column))
}

/// A text with HAProxy's escapes, as bytes (module docs).
fn text_value(r: &mut Reader<'_>, kind: Word<'_>, rest: &[Word<'_>]) -> Option<Vec<u8>> {
    let (text, column) = rest_of_line(r, kind, rest)?;
    match unescape(&text) {
        Ok(bytes) if !bytes.is_empty() => Some(bytes),
        Ok(_) => refuse(r, kind, "needs a value"),
        Err(why) => {
            r.error(column, format!("{} {text:?}: {why}", kind.text));
            None
        }
    }
}

/// `\r \n \t \\ \" \  \xHH` replaced by the bytes they stand for.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'r') => out.push(b'\r'),
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(c @ (b'\\' | b'"' | b' ')) => out.push(c),
            Some(b'x') => {
                let digits = [bytes.next(), bytes.next()];
                let hex = match digits {
                    [Some(a), Some(b)] => std::str::from_utf8(&[a, b])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok()),
                    _ => None,
                };
                out.push(hex.ok_or("'\\x' needs two hex digits, like \\x0d")?);
            }
            Some(other) => {
                return Err(format!(
                    "unknown escape '\\{}'; use \\r \\n \\t \\\\ \\\" \\xHH",
                    char::from(other)
                ));
            }
            None => return Err("a '\\' at the end; write '\\\\' for a '\\'".to_string()),
        }
    }
    Ok(out)
}

/// A regular expression (`policy/check/regex.rs`), refused with where and why.
fn regex_value(r: &mut Reader<'_>, kind: Word<'_>, rest: &[Word<'_>]) -> Option<Regex> {
    let (text, column) = rest_of_line(r, kind, rest)?;
    match Regex::new(&text) {
        Ok(regex) => Some(regex),
        Err(e) => {
            let message = format!(
                "{} {text:?}: {e} (the supported subset is in docs/OPERATIONS.md, \"Application checks\")",
                kind.text
            );
            r.error(column, message);
            None
        }
    }
}

/// Hex digits, two per byte (`send-binary`, `expect binary`).
fn hex_value(r: &mut Reader<'_>, kind: Word<'_>, rest: &[Word<'_>]) -> Option<Vec<u8>> {
    let value = one_word(r, kind, rest, "hex digits, like 0d0a")?;
    let text = value.text;
    let even = text.len() % 2 == 0 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if !even {
        let message = format!(
            "{} '{text}': write hex digits, two per byte, like 50494e470d0a",
            kind.text
        );
        r.error(value.column, message);
        return None;
    }
    let bytes = (0..text.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect();
    Some(bytes)
}

// ---- the end of a section ----

/// The section's check, built from its lines and given to each of the section's
/// backends with `check`; what cannot be known before the section ends is
/// reported here, at the line it is about.
pub fn finish(
    r: &mut Reader<'_>,
    draft: &mut ProbeDraft,
    backends: &mut [BackendServer],
    backend_lines: usize,
) {
    let Some(probe) = build(r, std::mem::take(draft)) else {
        return;
    };
    let (probe, line, column) = probe;
    let mut checked = backends.iter_mut().filter(|b| b.check.is_some()).peekable();
    if checked.peek().is_none() && backend_lines > 0 {
        r.line = line;
        let message = format!(
            "option {}: no backend of this section has 'check', so nothing would run it; add \
             'check' to the backend lines it should check",
            option_name(&probe)
        );
        return r.error(column, message);
    }
    for backend in checked {
        backend.probe = probe.clone();
    }
}

/// The probe of a section's lines, with where its `option` line is; `None`
/// if something was wrong (reported).
fn build(r: &mut Reader<'_>, draft: ProbeDraft) -> Option<(Probe, usize, usize)> {
    let ProbeDraft {
        chosen,
        steps,
        first_tcp_check,
        http,
        first_http_check,
    } = draft;
    let stray = |kind: &str, needs: &str| match &chosen {
        Some((probe, line, _)) => format!(
            "{kind} lines, but this section's check is 'option {}' (line {line}); keep one",
            option_name(probe)
        ),
        None => format!("{kind} lines need 'option {needs}' in this section; add it"),
    };
    let mut ok = true;
    if let Some((line, column)) = first_tcp_check
        && !matches!(chosen, Some((Probe::Script(_), ..)))
    {
        (r.line, ok) = (line, false);
        r.error(column, stray("tcp-check", "tcp-check"));
    }
    if let Some((line, column)) = first_http_check
        && !matches!(chosen, Some((Probe::Http(_), ..)))
    {
        (r.line, ok) = (line, false);
        r.error(column, stray("http-check", "httpchk"));
    }
    let (probe, line, column) = chosen.filter(|_| ok)?;
    let probe = match probe {
        Probe::Script(_) => Probe::Script(Script { steps }),
        Probe::Http(check) => Probe::Http(with_http_lines(check, http)),
        other => other,
    };
    Some((probe, line, column))
}

/// The `option httpchk` request with its `http-check` lines applied.
fn with_http_lines(mut check: HttpCheck, lines: Vec<HttpLine>) -> HttpCheck {
    for line in lines {
        match line {
            HttpLine::Expect(expect) => check.expects.push(expect),
            HttpLine::Send(send) => {
                check.method = send.method.unwrap_or(check.method);
                check.uri = send.uri.unwrap_or(check.uri);
                check.version = send.version.unwrap_or(check.version);
                check.headers.extend(send.headers);
            }
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::config::Config;
    use crate::settings::file::testing::{errors, ok};

    /// The probe of the `index`th backend of the first frontend.
    fn probe(config: &Config, index: usize) -> Probe {
        config.frontends[0].backends[index].probe.clone()
    }

    /// A frontend with one checked backend and `lines` (from line 4).
    fn fe(lines: &str) -> String {
        format!("frontend db\n  listen 127.0.0.1:5432\n  backend 127.0.0.1:5433 check\n{lines}")
    }

    /// The one error of `text`.
    fn error(text: &str) -> String {
        let all = errors(text);
        assert_eq!(all.len(), 1, "{all:#?}");
        all[0].clone()
    }

    #[test]
    fn the_issues_configuration_reads_line_by_line() {
        let c = ok(r"frontend pg
  listen 127.0.0.1:5432
  option pgsql-check user haproxy
  backend 127.0.0.1:6432 check inter 2s fall 3 rise 2
  backend 127.0.0.1:6433 check backup
frontend redis
  listen 127.0.0.1:6379
  option tcp-check
  tcp-check send PING\r\n
  tcp-check expect string +PONG
  tcp-check send info\ replication\r\n
  tcp-check expect rstring role:(master|primary)
  backend 127.0.0.1:6380 check maxconn 1000
  backend 127.0.0.1:6381 maxconn 1000
");
        let pg = Probe::Pgsql(PgsqlCheck {
            user: "haproxy".into(),
        });
        assert_eq!(probe(&c, 0), pg);
        assert_eq!(probe(&c, 1), pg);
        let script = match &c.frontends[1].backends[0].probe {
            Probe::Script(script) => script.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(script.steps.len(), 4);
        assert_eq!(script.steps[0], Step::Send(b"PING\r\n".to_vec()));
        assert_eq!(
            script.steps[2],
            Step::Send(b"info replication\r\n".to_vec())
        );
        let Step::Expect(expect) = &script.steps[3] else {
            panic!("{:?}", script.steps[3]);
        };
        assert_eq!(expect.to_string(), "rstring role:(master|primary)");
        assert_eq!(
            c.frontends[1].backends[1].probe,
            Probe::Connect,
            "not checked"
        );
    }

    #[test]
    fn every_option_reads_to_its_check() {
        let cases: Vec<(&str, Probe)> = vec![
            ("option redis-check", Probe::Redis(RedisCheck::default())),
            (
                "option redis-check role replica",
                Probe::Redis(RedisCheck {
                    role: Some(Role::Replica),
                }),
            ),
            ("option mysql-check", Probe::Mysql(MysqlCheck::default())),
            (
                "option mysql-check user haproxy post-41",
                Probe::Mysql(MysqlCheck {
                    user: Some("haproxy".into()),
                }),
            ),
            ("option smtpchk", Probe::Smtp(SmtpCheck::default())),
            (
                "option smtpchk EHLO lb.example",
                Probe::Smtp(SmtpCheck {
                    hello: "EHLO".into(),
                    domain: "lb.example".into(),
                }),
            ),
            ("option httpchk", Probe::Http(HttpCheck::default())),
            ("option tcp-check", Probe::Script(Script::default())),
        ];
        for (line, expected) in cases {
            assert_eq!(
                probe(&ok(&fe(&format!("  {line}\n"))), 0),
                expected,
                "{line}"
            );
        }
        let http = ok(&fe(
            "  option httpchk GET /health HTTP/1.1\n  http-check send hdr Host db.example\n  \
             http-check expect status 200-299,302\n  http-check expect ! string maintenance\n",
        ));
        let Probe::Http(check) = probe(&http, 0) else {
            panic!("not an httpchk");
        };
        assert_eq!(
            (check.method.as_str(), check.uri.as_str()),
            ("GET", "/health")
        );
        assert_eq!(
            check.headers,
            [("Host".to_string(), "db.example".to_string())]
        );
        let expects: Vec<String> = check.expects.iter().map(ToString::to_string).collect();
        assert_eq!(expects, ["status 200-299,302", "! string \"maintenance\""]);
    }

    #[test]
    fn a_group_has_its_own_check() {
        let c = ok("\
frontend tls
  listen 127.0.0.1:8443
  backend 127.0.0.1:9001 check
  use-group api sni api.example
group api
  option redis-check
  backend 127.0.0.1:9002 check
");
        assert_eq!(probe(&c, 0), Probe::Connect);
        assert_eq!(probe(&c, 1), Probe::Redis(RedisCheck::default()));
    }

    #[test]
    fn agent_parameters_read_together() {
        let c = ok(&fe(
            "  backend 127.0.0.1:1 agent-check agent-port 9999 agent-send hi\\n\n",
        ));
        let agent = c.frontends[0].backends[1].agent.clone().expect("an agent");
        assert_eq!((agent.port, agent.send), (9999, b"hi\n".to_vec()));
        assert_eq!(agent.inter, crate::policy::health::Check::default().inter);
        let c = ok(&fe(
            "  backend 127.0.0.1:1 check inter 5s agent-check agent-port 9 agent-inter 1s\n",
        ));
        assert_eq!(
            c.frontends[0].backends[1].agent.as_ref().map(|a| a.inter),
            Some(std::time::Duration::from_secs(1))
        );
    }

    #[test]
    fn every_mistake_says_where_and_what_to_do() {
        let cases = [
            (
                fe("  option redis-chek\n"),
                "lb.conf:4:10: unknown option 'redis-chek' (did you mean 'redis-check'?); 'option' here chooses a health check: tcp-check, redis-check, pgsql-check, mysql-check, httpchk or smtpchk",
            ),
            (
                fe("  option ssl-hello-chk\n"),
                "lb.conf:4:10: option ssl-hello-chk: TLS checks are not supported: the proxy does not speak TLS",
            ),
            (
                fe("  option redis-check\n  option pgsql-check user x\n"),
                "lb.conf:5:10: 'option pgsql-check' and 'option redis-check' (line 4) exclude each other: a section has one check; keep one",
            ),
            (
                fe("  option pgsql-check\n"),
                "lb.conf:4:10: option pgsql-check needs the user its StartupMessage names, like 'option pgsql-check user haproxy'",
            ),
            (
                fe("  option redis-check role boss\n"),
                "lb.conf:4:27: option redis-check: unknown role 'boss'; use master, replica or slave",
            ),
            (
                fe("  option mysql-check user x pre-41\n"),
                "lb.conf:4:29: option mysql-check: pre-41 is not supported: servers before MySQL 4.1 are gone; remove it",
            ),
            (
                fe("  option httpchk GET / HTTP/2\n"),
                "lb.conf:4:24: http version 'HTTP/2': use HTTP/1.0 or HTTP/1.1",
            ),
            (
                fe("  tcp-check send PING\\r\\n\n"),
                "lb.conf:4:3: tcp-check lines need 'option tcp-check' in this section; add it",
            ),
            (
                fe("  option redis-check\n  tcp-check send PING\n"),
                "lb.conf:5:3: tcp-check lines, but this section's check is 'option redis-check' (line 4); keep one",
            ),
            (
                fe("  http-check expect status 200\n"),
                "lb.conf:4:3: http-check lines need 'option httpchk' in this section; add it",
            ),
            (
                fe("  option tcp-check\n  tcp-check expect rstring (a)\\1\n"),
                "lb.conf:5:28: rstring \"(a)\\\\1\": at offset 3: back-references are not supported: no linear-time matcher has them (the supported subset is in docs/OPERATIONS.md, \"Application checks\")",
            ),
            (
                fe("  option tcp-check\n  tcp-check send-binary 0d0\n"),
                "lb.conf:5:25: send-binary '0d0': write hex digits, two per byte, like 50494e470d0a",
            ),
            (
                fe("  option tcp-check\n  tcp-check send PING\\q\n"),
                "lb.conf:5:18: send \"PING\\\\q\": unknown escape '\\q'; use \\r \\n \\t \\\\ \\\" \\xHH",
            ),
            (
                fe("  option tcp-check\n  tcp-check expect comment x string y\n"),
                "lb.conf:5:20: 'comment': not supported: it shapes HAProxy's status texts; the log says what was expected and what came",
            ),
            (
                fe("  option tcp-check\n  tcp-check expect strin +PONG\n"),
                "lb.conf:5:20: tcp-check expect: unknown match 'strin' (did you mean 'string'?); use string, rstring, binary or rbinary",
            ),
            (
                fe("  option tcp-check\n  tcp-check connect ssl\n"),
                "lb.conf:5:21: tcp-check connect: 'ssl': TLS is not supported: the proxy does not speak TLS",
            ),
            (
                fe("  option tcp-check\n  tcp-check sned x\n"),
                "lb.conf:5:13: tcp-check: unknown action 'sned' (did you mean 'send'?); use connect, send, send-binary, expect or comment",
            ),
            (
                fe("  option httpchk\n  http-check expect hdr name x\n"),
                "lb.conf:5:21: 'hdr': header matching is not supported; match the status or the body",
            ),
            (
                fe("  option httpchk\n  http-check expect status 2xx\n"),
                "lb.conf:5:28: http-check expect status: '2xx' is not a status code (100 to 999) or a range of them, like 200-299",
            ),
            (
                "frontend db\n  listen 127.0.0.1:1\n  option smtpchk\n  backend 127.0.0.1:2\n"
                    .to_string(),
                "lb.conf:3:3: option smtpchk: no backend of this section has 'check', so nothing would run it; add 'check' to the backend lines it should check",
            ),
            (
                fe("  backend 127.0.0.1:1 agent-check\n"),
                "lb.conf:4:23: agent-check needs the agent's port: add 'agent-port N' to the line",
            ),
            (
                fe("  backend 127.0.0.1:1 agent-port 99\n"),
                "lb.conf:4:34: agent-port without agent-check: add 'agent-check' to ask the agent",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(error(&text), expected, "for:\n{text}");
        }
    }

    #[test]
    fn escapes_are_haproxys() {
        assert_eq!(unescape("PING\\r\\n"), Ok(b"PING\r\n".to_vec()));
        assert_eq!(
            unescape("info\\ replication\\x0d\\x0A"),
            Ok(b"info replication\r\n".to_vec())
        );
        assert_eq!(unescape("a\\\\b\\\"c\\td"), Ok(b"a\\b\"c\td".to_vec()));
        assert!(
            unescape("\\q")
                .unwrap_err()
                .contains("unknown escape '\\q'")
        );
        assert!(unescape("\\x4").unwrap_err().contains("two hex digits"));
        assert!(unescape("end\\").unwrap_err().contains("at the end"));
    }
}
