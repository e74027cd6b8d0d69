//! The logging options' values, read and checked: the syslog destination
//! (`log`, HAProxy's line, word for word), the syslog header's tag and host
//! (`log-tag`, `log-send-hostname`), the access log's format (`log-format`:
//! a name, or a format of the operator's, usually in quotes) and
//! `dontlognull`. The tables of `sections.rs` name these options; this file
//! reads them.
//!
//! ```text
//!   log TARGET [len N] [format local|rfc3164|rfc5424] FACILITY [LEVEL [MINLEVEL]]
//!   log-tag NAME
//!   log-send-hostname [NAME]
//!   log-format tcplog | json | "FORMAT"
//!   dontlognull                                   (frontend)
//! ```

use crate::log::syslog::header::{FACILITIES, Facility, Layout, SEVERITIES, Severity, valid_tag};
use crate::log::syslog::target::Target;
use crate::log::syslog::{DEFAULT_LEN, Destination, LEN_RANGE};

use super::config;
use super::drafts::{FrontendDraft, GlobalDraft};
use super::reader::{Draft, Reader};
use super::words::{Word, list, not_one_of, unquote};

/// HAProxy's `format` choices without a syslog header of ours: for its
/// stdout and local targets, which the proxy does not have.
const HEADERLESS: [&str; 5] = ["priority", "short", "timed", "iso", "raw"];

/// `log TARGET [len N] [format F] FACILITY [LEVEL [MINLEVEL]]`.
pub fn set_log(r: &mut Reader<'_>, g: &mut GlobalDraft, words: &[Word<'_>]) {
    let hint = "a target and a facility, like 'log 127.0.0.1:514 local0'";
    let Some(target) = r.value(words, 0, hint) else {
        return;
    };
    if !r.once(g.seen(), "log", words[0].column) {
        return;
    }
    let target = match Target::parse(target.text) {
        Ok(t) => Some(t),
        Err(why) => {
            r.error(target.column, format!("log: {why}"));
            None
        }
    };
    let mut rest = &words[2..];
    let (mut max_len, mut layout) = (DEFAULT_LEN, None);
    while let [option, tail @ ..] = rest {
        match option.text {
            "len" | "format" | "sample" | "profile" => {}
            _ => break,
        }
        let Some(value) = r.value(rest, 0, "a value") else {
            return;
        };
        match option.text {
            "len" => {
                let (min, max) = (*LEN_RANGE.start(), *LEN_RANGE.end());
                match r.number("log len", value, min, max, "") {
                    Some(n) => max_len = n,
                    None => return,
                }
            }
            "format" => match read_layout(r, value) {
                Some(l) => layout = Some(l),
                None => return,
            },
            _ => {
                let message = format!(
                    "log: '{}' is not supported: every message is sent, with the settings of \
                     this one line",
                    option.text
                );
                return r.error(option.column, message);
            }
        }
        rest = tail.get(1..).unwrap_or_default();
    }
    let Some((facility, level, min_level)) = read_levels(r, words, rest) else {
        return;
    };
    g.global.log = target.map(|target| Destination {
        target,
        max_len,
        layout,
        facility,
        level,
        min_level,
    });
}

/// `format`'s value.
fn read_layout(r: &mut Reader<'_>, w: Word<'_>) -> Option<Layout> {
    if let Some(layout) = Layout::parse(w.text) {
        return Some(layout);
    }
    let names = Layout::ALL.map(Layout::name);
    let message = if HEADERLESS.contains(&w.text) {
        format!(
            "log format: '{}' is HAProxy's for its stdout and local targets; use {}",
            w.text,
            list(&names, "or")
        )
    } else {
        format!("log format: unknown {}", not_one_of(w.text, &names))
    };
    r.error(w.column, message);
    None
}

/// `FACILITY [LEVEL [MINLEVEL]]`, the end of a `log` line (`rest`).
fn read_levels(
    r: &mut Reader<'_>,
    words: &[Word<'_>],
    rest: &[Word<'_>],
) -> Option<(Facility, Option<Severity>, Option<Severity>)> {
    let Some(facility_word) = rest.first() else {
        let last = words.last().map_or(1, |w| w.column);
        let message = format!(
            "'log' needs a facility after its target, like local0; use {}",
            list(&FACILITIES, "or")
        );
        r.error(last, message);
        return None;
    };
    let Some(facility) = Facility::parse(facility_word.text) else {
        let message = format!(
            "log: unknown facility {}",
            not_one_of(facility_word.text, &FACILITIES)
        );
        r.error(facility_word.column, message);
        return None;
    };
    let mut levels = [None, None];
    for (slot, w) in levels.iter_mut().zip(rest.iter().skip(1)) {
        match Severity::parse(w.text) {
            Some(s) => *slot = Some(s),
            None => {
                let message = format!("log: unknown level {}", not_one_of(w.text, &SEVERITIES));
                r.error(w.column, message);
                return None;
            }
        }
    }
    let used = words.len() - rest.len() + 3;
    r.no_more(words, used.min(words.len()));
    let [level, min_level] = levels;
    if let (Some(level), Some(min), Some(w)) = (level, min_level, rest.get(2)) {
        if min > level {
            let message = format!(
                "log: the minimum level '{}' is less severe than the level '{}'; messages more \
                 severe than the minimum are sent as it, so give one as severe as '{}' or more",
                min.name(),
                level.name(),
                level.name()
            );
            r.error(w.column, message);
            return None;
        }
    }
    Some((facility, level, min_level))
}

/// `log-tag NAME`.
pub fn set_log_tag(r: &mut Reader<'_>, g: &mut GlobalDraft, v: Word<'_>) {
    if valid_tag(v.text) {
        g.global.log_tag = Some(v.text.to_string());
    } else {
        let message = format!(
            "log-tag: '{}' cannot be a syslog tag; use 1 to 32 letters, digits, '-', '_' or '.'",
            v.text
        );
        r.error(v.column, message);
    }
}

/// `log-send-hostname [NAME]`.
pub fn set_log_send_hostname(r: &mut Reader<'_>, g: &mut GlobalDraft, words: &[Word<'_>]) {
    if !r.once(g.seen(), "log-send-hostname", words[0].column) {
        return;
    }
    r.no_more(words, 2);
    let name = words.get(1);
    if let Some(w) = name {
        let printable = w.text.bytes().all(|b| b.is_ascii_graphic());
        if !printable || w.text.len() > 255 {
            let message = format!(
                "log-send-hostname: '{}' cannot be a host name in a syslog header; use up to 255 \
                 printable ASCII characters, or leave it out for this system's name",
                w.text
            );
            return r.error(w.column, message);
        }
    }
    g.global.log_send_hostname = Some(name.map(|w| w.text.to_string()));
}

/// `log-format tcplog | json | "FORMAT"`; an error in a format points at
/// its place in the line.
pub fn set_log_format(r: &mut Reader<'_>, g: &mut GlobalDraft, v: Word<'_>) {
    let read = match unquote(v.text) {
        Some(Ok(text)) => config::log_format(&text, true).map_err(|e| (e, 1)),
        Some(Err(why)) => return r.error(v.column, format!("log-format: {why}")),
        None => config::log_format(v.text, false).map_err(|e| (e, 0)),
    };
    match read {
        Ok(format) => g.global.log_format = Some(format),
        Err((e, quote)) => r.error(
            v.column + quote + e.offset,
            format!("log-format: {}", e.message),
        ),
    }
}

/// `dontlognull`, on a line of its own.
pub fn set_dontlognull(r: &mut Reader<'_>, f: &mut FrontendDraft, words: &[Word<'_>]) {
    if r.once(f.seen(), "dontlognull", words[0].column) {
        f.dontlognull = true;
    }
    r.no_more(words, 1);
}

#[cfg(test)]
mod tests {
    use super::super::file::testing::{errors, ok};
    use super::*;
    use crate::ops::access_log::format::Format;
    use std::net::SocketAddr;

    fn global(lines: &str) -> String {
        format!("global\n{lines}frontend web\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:9001\n")
    }

    fn log_line(line: &str) -> Option<Destination> {
        ok(&global(&format!("  {line}\n"))).global.log
    }

    /// The one error of `lines` in `global` (which start at line 2).
    fn error(lines: &str) -> String {
        let all = errors(&global(lines));
        assert_eq!(all.len(), 1, "expected one error, got {all:#?}");
        all[0].clone()
    }

    #[test]
    fn a_log_line_reads_as_haproxys() {
        let d = log_line("log 127.0.0.1:514 local0").expect("a destination");
        assert_eq!(
            d,
            Destination {
                target: Target::Udp(SocketAddr::from(([127, 0, 0, 1], 514))),
                max_len: 1024,
                layout: None,
                facility: Facility::parse("local0").expect("local0"),
                level: None,
                min_level: None,
            }
        );
        let d = log_line("log tcp@[::1]:601 format rfc5424 len 4096 daemon notice err")
            .expect("a destination");
        assert_eq!(d.target.to_string(), "tcp@[::1]:601");
        assert_eq!((d.max_len, d.layout), (4096, Some(Layout::Rfc5424)));
        assert_eq!(d.facility.name(), "daemon");
        assert_eq!(d.level.map(Severity::name), Some("notice"));
        assert_eq!(d.min_level.map(Severity::name), Some("err"));
        let d = log_line("log /dev/log len 80 format local user debug").expect("a destination");
        assert_eq!(d.target.to_string(), "unix@/dev/log");
    }

    #[test]
    fn the_options_beside_it_read_too() {
        let c = ok(&global(
            "  log 127.0.0.1 local1\n  log-tag lb-1\n  log-send-hostname\n  log-format \"%ci %B\"\n",
        ));
        assert_eq!(c.global.log_tag.as_deref(), Some("lb-1"));
        assert_eq!(c.global.log_send_hostname, Some(None));
        assert_eq!(c.global.log_format, Format::custom("%ci %B").ok());
        let c = ok(&global(
            "  log-send-hostname edge.example\n  log-format json\n",
        ));
        assert_eq!(
            c.global.log_send_hostname,
            Some(Some("edge.example".into()))
        );
        assert_eq!(c.global.log_format, Some(Format::Json));
        let c = ok(&global("  log-format %ci:%cp\n"));
        assert_eq!(c.global.log_format, Format::custom("%ci:%cp").ok());
        let c =
            ok("frontend web\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:9001\n  dontlognull\n");
        assert!(c.frontends[0].dontlognull);
    }

    #[test]
    fn every_mistake_says_where_and_what_to_write() {
        for (lines, expected) in [
            (
                "  log\n",
                "lb.conf:2:3: 'log' needs a target and a facility, like 'log 127.0.0.1:514 local0'",
            ),
            (
                "  log 127.0.0.1:514\n",
                "lb.conf:2:7: 'log' needs a facility after its target, like local0; use kern, \
                 user, mail, daemon, auth, syslog, lpr, news, uucp, cron, auth2, ftp, ntp, audit, \
                 alert, cron2, local0, local1, local2, local3, local4, local5, local6 or local7",
            ),
            (
                "  log 127.0.0.1:514 lcal0\n",
                "lb.conf:2:21: log: unknown facility 'lcal0' (did you mean 'local0'?); use kern, \
                 user, mail, daemon, auth, syslog, lpr, news, uucp, cron, auth2, ftp, ntp, audit, \
                 alert, cron2, local0, local1, local2, local3, local4, local5, local6 or local7",
            ),
            (
                "  log 127.0.0.1:514 local0 inf\n",
                "lb.conf:2:28: log: unknown level 'inf' (did you mean 'info'?); use emerg, alert, \
                 crit, err, warning, notice, info or debug",
            ),
            (
                "  log 127.0.0.1:514 local0 info debug\n",
                "lb.conf:2:33: log: the minimum level 'debug' is less severe than the level \
                 'info'; messages more severe than the minimum are sent as it, so give one as \
                 severe as 'info' or more",
            ),
            (
                "  log 127.0.0.1:514 local0 info err extra\n",
                "lb.conf:2:37: unexpected 'extra' after 'log 127.0.0.1:514 local0 info err'; put \
                 one option per line",
            ),
            (
                "  log stdout daemon\n",
                "lb.conf:2:7: log: 'stdout' is HAProxy's, not ours: the access log goes to \
                 stderr with 'access-log stderr', and the daemon's lines always do",
            ),
            (
                "  log 127.0.0.1 format short daemon\n",
                "lb.conf:2:24: log format: 'short' is HAProxy's for its stdout and local \
                 targets; use local, rfc3164 or rfc5424",
            ),
            (
                "  log 127.0.0.1 len 10 local0\n",
                "lb.conf:2:21: log len: 10 is out of range; use 80 to 65535",
            ),
            (
                "  log 127.0.0.1 sample 1:2 local0\n",
                "lb.conf:2:17: log: 'sample' is not supported: every message is sent, with the \
                 settings of this one line",
            ),
            (
                "  log 127.0.0.1 local0\n  log 127.0.0.2 local1\n",
                "lb.conf:3:3: 'log' is given twice (first at line 2); keep one",
            ),
            (
                "  log-tag \"my proxy\"\n",
                "lb.conf:2:11: log-tag: '\"my proxy\"' cannot be a syslog tag; use 1 to 32 \
                 letters, digits, '-', '_' or '.'",
            ),
            (
                "  log-format tcplg\n",
                "lb.conf:2:14: log-format: unknown log format 'tcplg' (did you mean \
                 'tcplog'?); use tcplog, json, or a format of your own in quotes, like \
                 \"%ci:%cp %ft %b/%s %Tt %B %ts\"",
            ),
            (
                "  log-format \"%ci %Tq\"\n",
                "lb.conf:2:19: log-format: '%Tq' is HAProxy's for HTTP or TLS; this proxy \
                 relays TCP and terminates no TLS; use %ci %cp %fi %fp %f %ft %b %s %si %sp %bi \
                 %bp %t %T %Tl %Ts %ms %Tw %Tc %Tt %B %U %ts %ac %fc %bc %sc %rc %sq %bq %pid %H \
                 %rt %ID",
            ),
            (
                "  log-format \"%ci\n",
                "lb.conf:2:14: log-format: '\"%ci': no closing quote; end the value with \"",
            ),
        ] {
            assert_eq!(error(lines), expected, "{lines}");
        }
        let wrong_place = errors(
            "frontend web\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:9001\n  log 127.0.0.1 local0\n",
        );
        assert_eq!(
            wrong_place,
            ["lb.conf:4:3: 'log' belongs in the 'global' section, not in a frontend"]
        );
        let twice = errors(
            "frontend web\n  listen 127.0.0.1:8080\n  backend 127.0.0.1:9001\n  dontlognull\n  dontlognull x\n",
        );
        assert_eq!(
            twice,
            [
                "lb.conf:5:3: 'dontlognull' is given twice (first at line 4); keep one",
                "lb.conf:5:15: unexpected 'x' after 'dontlognull'; put one option per line",
            ]
        );
    }
}
