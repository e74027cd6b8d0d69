//! Words: what the command line and the configuration file share, and what
//! the tools' command lines borrow. A line split into words with their
//! columns, "did you mean" by edit distance, lists written as prose
//! ("a, b or c"), and durations with a unit.

use std::time::Duration;

/// A word of a configuration line, with its 1-based column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word<'a> {
    /// The word itself.
    pub text: &'a str,
    /// Where it starts, counted in characters from 1.
    pub column: usize,
}

/// Splits a line into words at white space, dropping the comment (`#` to the
/// end of the line). A double-quoted part is part of its word, blanks and
/// `#` included, and a backslash in it keeps the next character from
/// ending it (`"a \"b\" #c"`): the word keeps its quotes, for [`unquote`].
pub fn words(line: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let (mut quoted, mut escaped) = (false, false);
    let mut end = line.len();
    for (column, (byte, c)) in line.char_indices().enumerate() {
        if quoted {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => quoted = false,
                _ => {}
            }
            continue;
        }
        if c == '#' {
            end = byte;
            break;
        }
        quoted = c == '"';
        match (c.is_whitespace(), start) {
            (true, Some((from, col))) => {
                out.push(Word {
                    text: &line[from..byte],
                    column: col + 1,
                });
                start = None;
            }
            (false, None) => start = Some((byte, column)),
            _ => {}
        }
    }
    if let Some((from, col)) = start {
        out.push(Word {
            text: &line[from..end],
            column: col + 1,
        });
    }
    out
}

/// A word that is one double-quoted string (`"%ci %B"`), its quotes taken
/// off and `\"` and `\\` made `"` and `\`: `None` if it does not start with
/// a quote, an error if it does not end with the one that closes it.
pub fn unquote(word: &str) -> Option<Result<String, String>> {
    let inside = word.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = inside.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ ('"' | '\\')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            '"' if chars.as_str().is_empty() => return Some(Ok(out)),
            '"' => {
                return Some(Err(format!(
                    "'{word}': text after the closing quote; put the whole value in the quotes"
                )));
            }
            _ => out.push(c),
        }
    }
    Some(Err(format!(
        "'{word}': no closing quote; end the value with \""
    )))
}

pub use crate::log::spelling::{did_you_mean, edit_distance, suggest};

/// `'word' (did you mean 'best'?); use a, b or c`: what a message says of
/// a word that names none of `names`.
pub fn not_one_of(word: &str, names: &[&str]) -> String {
    format!(
        "'{word}'{}; use {}",
        did_you_mean(word, names),
        list(names, "or")
    )
}

/// `a, b and c` (with `last` "and") or `a, b or c` (with "or").
pub fn list(items: &[&str], last: &str) -> String {
    match items {
        [] => String::new(),
        [only] => only.to_string(),
        [init @ .., tail] => format!("{} {last} {tail}", init.join(", ")),
    }
}

/// Parses a duration with a unit: `500ms`, `2s`, `1m`, `1h` (also `us` and
/// `d`). A bare number is refused: `30` could mean seconds or milliseconds,
/// and guessing wrong by a factor of 1,000 is worse than asking.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{value}' is not a duration like 500ms, 2s, 1m or 1h"))?;
    let scale = match unit {
        "us" => Duration::from_micros(1),
        "ms" => Duration::from_millis(1),
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        "" => {
            return Err(format!(
                "'{value}' has no unit: write {value}s or {value}ms"
            ));
        }
        other => {
            return Err(format!(
                "'{value}': unknown unit '{other}'; use us, ms, s, m, h or d"
            ));
        }
    };
    u32::try_from(n)
        .ok()
        .and_then(|n| scale.checked_mul(n))
        .ok_or_else(|| format!("'{value}' is too long"))
}

/// A word that names a server (`backend db1 ADDR`) rather than being its
/// address: letters, digits, `-`, `_` and `.`, and not an IP address (a
/// forgotten port is the address's error, not a name).
pub fn is_server_name(word: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    !word.is_empty() && word.chars().all(allowed) && word.parse::<std::net::IpAddr>().is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<(&str, usize)> {
        words(line).iter().map(|w| (w.text, w.column)).collect()
    }

    #[test]
    fn lines_split_into_words_with_their_columns() {
        assert_eq!(
            texts("  backend 127.0.0.1:1 weight 5"),
            [
                ("backend", 3),
                ("127.0.0.1:1", 11),
                ("weight", 23),
                ("5", 30)
            ]
        );
        assert_eq!(texts("\tlisten 1#comment"), [("listen", 2), ("1", 9)]);
        assert_eq!(texts("é x"), [("é", 1), ("x", 3)]);
        assert!(texts("# only a comment").is_empty());
        assert!(texts("").is_empty());
    }

    #[test]
    fn a_quoted_part_keeps_blanks_and_hashes_in_its_word() {
        assert_eq!(
            texts(r#"log-format "%ci %B #1" # a comment"#),
            [("log-format", 1), (r#""%ci %B #1""#, 12)]
        );
        assert_eq!(
            texts(r#"x "a \" b" y"#),
            [("x", 1), (r#""a \" b""#, 3), ("y", 12)]
        );
        // An unclosed quote runs to the end of the line, comment and all.
        assert_eq!(texts(r#"x "a # b"#), [("x", 1), (r#""a # b"#, 3)]);
        assert_eq!(texts("a\"b c\"d e"), [("a\"b c\"d", 1), ("e", 9)]);
    }

    #[test]
    fn unquote_takes_the_quotes_off() {
        assert_eq!(unquote("plain"), None);
        assert_eq!(unquote(r#""%ci %B""#), Some(Ok("%ci %B".to_string())));
        assert_eq!(
            unquote(r#""a\"b\\c\d""#),
            Some(Ok(r#"a"b\c\d"#.to_string()))
        );
        assert_eq!(unquote(r#""""#), Some(Ok(String::new())));
        assert!(unquote(r#""abc"#).is_some_and(|r| r.is_err()));
        assert!(unquote(r#""a"b"#).is_some_and(|r| r.is_err()));
    }

    #[test]
    fn suggestions_are_for_typos_only() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(suggest("wieght", &["weight", "backup"]), Some("weight"));
        assert_eq!(suggest("ab", &["abc"]), Some("abc"));
        assert_eq!(suggest("ab", &["xyz"]), None);
        assert_eq!(suggest("frobnicate", &["weight"]), None);
        assert_eq!(
            did_you_mean("lisen", &["listen"]),
            " (did you mean 'listen'?)"
        );
        assert_eq!(did_you_mean("x", &[]), "");
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(list(&["a", "b", "c"], "or"), "a, b or c");
        assert_eq!(list(&["a", "b"], "and"), "a and b");
        assert_eq!(list(&["a"], "and"), "a");
        assert_eq!(list(&[], "and"), "");
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("3us"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("30").unwrap_err().contains("has no unit"));
        assert!(parse_duration("3x").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999999s").is_err());
    }
}
