//! The machinery of the configuration file, free of any one option: a
//! [`Reader`] that collects every error with its `file:line:column`, reads
//! values (numbers in a range, durations, addresses), and runs one line
//! against a section's table of [`Opt`]ions.
//!
//! An option is named once, in its section's table (`sections.rs`), with
//! what its value looks like and what to do with it; the table is what
//! dispatches a line, what "did you mean" searches, and what the error
//! messages list. The reader never stops at the first mistake: a bad value
//! is reported and the line skipped, and the next line is read.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::config::ConfigError;
use super::words::{Word, parse_duration};
use crate::conn::timeouts::NO_TIMEOUT;

/// One option of a section.
pub struct Opt<T> {
    /// Its name, the first word of its line.
    pub name: &'static str,
    /// What the line holds and what to do with it.
    pub setter: Setter<T>,
}

/// How an option's line is read.
pub enum Setter<T> {
    /// One value, and the option at most once per section: `maxconn 100`.
    /// `hint` says what the value looks like ("'maxconn' needs a number of
    /// connections").
    Value {
        /// What the value looks like.
        hint: &'static str,
        /// Stores the value (reporting it if it is bad).
        set: fn(&mut Reader<'_>, &mut T, Word<'_>),
    },
    /// The setter reads the whole line itself (`timeout KIND DUR`, `backend
    /// ADDR PARAMS...`, `allow RANGE...`), the option's own word first.
    Line(fn(&mut Reader<'_>, &mut T, &[Word<'_>])),
}

impl<T> fmt::Debug for Opt<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opt")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Setter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setter::Value { hint, .. } => f.debug_struct("Value").field("hint", hint).finish(),
            Setter::Line(_) => f.write_str("Line"),
        }
    }
}

/// A section while its lines are read: its options, and which of them were
/// given already.
pub trait Draft {
    /// The options given once, with the line where each first came.
    fn seen(&mut self) -> &mut Seen;
}

/// Options given in a section (or on a line), with where each first came.
///
/// A list searched from the start, which stays linear over a whole file: it
/// holds each option name of one section at most once (a second one is an
/// error and not added), so it never grows past the section's table, however
/// many lines the section has. What can repeat without bound (frontend
/// names, `listen` addresses, `backend` addresses) is kept in hash maps.
#[derive(Debug, Default)]
pub struct Seen(Vec<(String, usize, String)>);

/// Collects the errors of one file, and knows which line it is on.
#[derive(Debug)]
pub struct Reader<'p> {
    path: &'p str,
    /// Every error so far, in the order found.
    pub errors: Vec<ConfigError>,
    /// The line being read (1-based; 0 for the file as a whole).
    pub line: usize,
}

impl<'p> Reader<'p> {
    /// A reader of the file named `path` (in errors only).
    pub fn new(path: &'p str) -> Reader<'p> {
        Reader {
            path,
            errors: Vec::new(),
            line: 0,
        }
    }

    /// Reports a mistake at `column` of the current line.
    pub fn error(&mut self, column: usize, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path: self.path.to_string(),
            line: self.line,
            column,
            message: message.into(),
        });
    }

    /// Runs `words` (a line whose first word names an option) against
    /// `table`; `false` if no option of the table has that name.
    pub fn dispatch<T: Draft>(
        &mut self,
        table: &[Opt<T>],
        target: &mut T,
        words: &[Word<'_>],
    ) -> bool {
        let Some(first) = words.first() else {
            return false;
        };
        let Some(opt) = table.iter().find(|o| o.name == first.text) else {
            return false;
        };
        match opt.setter {
            Setter::Value { hint, set } => {
                let Some(value) = self.value(words, 0, hint) else {
                    return true;
                };
                self.no_more(words, 2);
                if self.once(target.seen(), first.text, first.column) {
                    set(self, target, value);
                }
            }
            Setter::Line(set) => set(self, target, words),
        }
        true
    }

    /// The value word after `words[i]`, or an error at `words[i]` saying it
    /// needs `what`.
    pub fn value<'a>(&mut self, words: &[Word<'a>], i: usize, what: &str) -> Option<Word<'a>> {
        if let Some(value) = words.get(i + 1) {
            return Some(*value);
        }
        let option = words.get(i).map_or("", |w| w.text);
        let column = words.get(i).map_or(1, |w| w.column);
        self.error(column, format!("'{option}' needs {what}"));
        None
    }

    /// Reports any word after the `used` first ones.
    pub fn no_more(&mut self, words: &[Word<'_>], used: usize) {
        let Some(extra) = words.get(used) else {
            return;
        };
        let head: Vec<&str> = words[..used].iter().map(|w| w.text).collect();
        self.error(
            extra.column,
            format!(
                "unexpected '{}' after '{}'; put one option per line",
                extra.text,
                head.join(" ")
            ),
        );
    }

    /// Marks `key` as given in this section; reports a second one.
    pub fn once(&mut self, seen: &mut Seen, key: &str, column: usize) -> bool {
        if let Some(first) = seen.line_of(key) {
            self.error(
                column,
                format!("'{key}' is given twice (first at line {first}); keep one"),
            );
            return false;
        }
        seen.0.push((key.to_string(), self.line, key.to_string()));
        true
    }

    /// Marks `key` as given on this line, written as `name` (two names may
    /// share a key when they exclude each other: `send-proxy` and
    /// `send-proxy-v2`); reports a second one.
    pub fn once_on_line(&mut self, seen: &mut Seen, key: &str, name: &str, column: usize) -> bool {
        if let Some((_, _, first)) = seen.first(key) {
            // The key says more when it is the name in context ('check
            // inter'); otherwise the name is what was written.
            let shown = if key.ends_with(name) { key } else { name };
            let why = if first == name {
                format!("'{shown}' is given twice on this line; keep one")
            } else {
                format!("'{first}' and '{name}' exclude each other; keep one")
            };
            self.error(column, why);
            return false;
        }
        seen.0.push((key.to_string(), self.line, name.to_string()));
        true
    }

    /// A whole number from `min` to `max`; `hint` follows the range in the
    /// error (`; leave it out for no limit`).
    pub fn number(
        &mut self,
        option: &str,
        w: Word<'_>,
        min: u32,
        max: u32,
        hint: &str,
    ) -> Option<u32> {
        let digits = !w.text.is_empty() && w.text.bytes().all(|b| b.is_ascii_digit());
        let Some(n) = digits.then(|| w.text.parse::<u64>().ok()).flatten() else {
            let message = format!("{option}: '{}' is not a whole number", w.text);
            self.error(w.column, message);
            return None;
        };
        if n < u64::from(min) || n > u64::from(max) {
            let message = format!(
                "{option}: {} is out of range; use {min} to {max}{hint}",
                w.text
            );
            self.error(w.column, message);
            return None;
        }
        u32::try_from(n).ok()
    }

    /// A `timeout KIND` value: a duration with a unit, or `0` (or `0s`)
    /// for none, as HAProxy reads it ([`NO_TIMEOUT`]).
    pub fn timeout(&mut self, option: &str, w: Word<'_>) -> Option<Duration> {
        if is_zero(w.text) {
            return Some(NO_TIMEOUT);
        }
        self.duration(option, w)
    }

    /// A duration with a unit, never zero (a zero timeout would end
    /// everything at once).
    pub fn duration(&mut self, option: &str, w: Word<'_>) -> Option<Duration> {
        if w.text == "0" {
            let message = format!("{option}: 0 would end everything at once; use at least 1ms");
            self.error(w.column, message);
            return None;
        }
        match parse_duration(w.text) {
            Ok(d) if d.is_zero() => {
                let message = format!(
                    "{option}: {} would end everything at once; use at least 1ms",
                    w.text
                );
                self.error(w.column, message);
                None
            }
            Ok(d) => Some(d),
            Err(why) => {
                self.error(w.column, format!("{option}: {why}"));
                None
            }
        }
    }

    /// An IP address with a port (host names are not resolved).
    pub fn addr(&mut self, option: &str, w: Word<'_>) -> Option<SocketAddr> {
        let parsed = w.text.parse().ok();
        if parsed.is_none() {
            let message = format!(
                "{option}: '{}' is not an IP address with a port, like 127.0.0.1:8080 or \
                 [::1]:8080 (host names are not resolved)",
                w.text
            );
            self.error(w.column, message);
        }
        parsed
    }
}

/// `0`, `0s`, `0ms`...: a duration of nothing, with or without its unit.
fn is_zero(word: &str) -> bool {
    word == "0" || parse_duration(word).is_ok_and(|d| d.is_zero())
}

impl Seen {
    /// The line where `key` was first given, if it was.
    fn line_of(&self, key: &str) -> Option<usize> {
        self.first(key).map(|&(_, line, _)| line)
    }

    /// Where `key` was first given: its entry (key, line, the name written).
    fn first(&self, key: &str) -> Option<&(String, usize, String)> {
        self.0.iter().find(|(k, _, _)| k == key)
    }
}
