//! JSON strings: the one escaper of the workspace, for the access log's JSON
//! lines and the tools' JSON reports.
//!
//! A line of JSON must stay one line and parse anywhere: quotes and
//! backslashes are escaped, and so is every control character (JSON forbids
//! them raw, and a raw newline would split the line), DEL (U+007F) included,
//! which JSON allows but terminals and log viewers do not show. Everything
//! else, non-ASCII text included, is written as it is (UTF-8).

use std::fmt::Write as _;

/// Appends `s` to `out` as a JSON string, quotes included.
pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(s: &str) -> String {
        let mut out = String::new();
        push_string(&mut out, s);
        out
    }

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped() {
        assert_eq!(
            quoted("a\"b\\c\nd\re\tf\u{1}g\u{1f}h\u{7f}é"),
            "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g\\u001fh\\u007fé\""
        );
        assert_eq!(quoted(""), "\"\"");
    }
}
