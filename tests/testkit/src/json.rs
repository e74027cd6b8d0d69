//! The workspace's one JSON reader: for the proxy's JSON access-log lines and
//! the load client's JSON reports, both written by hand, so read back with a
//! parser that owes nothing to their writers.
//!
//! It follows RFC 8259 strictly where a hand-written writer is likely to
//! slip: raw control characters inside strings, unknown escapes, `\u` without
//! exactly four hex digits, lone surrogates, numbers like `01`, `1.`, `.5`,
//! `+1` or `NaN`, trailing commas, anything after the value.
//!
//! ```
//! use testkit::json::{self, Json};
//! let report = json::parse(r#"{"ok":3,"errors":[]}"#).expect("valid");
//! assert_eq!(report.get("ok").whole(), 3);
//! let line = json::read_object(r#"{"server":null,"wait_ms":-1}"#).expect("flat");
//! assert_eq!(line[0], ("server".to_string(), Json::Null));
//! ```

/// A JSON value. Objects keep their keys in the order written, duplicates
/// included, so that a test can check both.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// Any number (exact for integers up to 2^53).
    Number(f64),
    /// A string, its escapes undone.
    String(String),
    /// `[...]`.
    Array(Vec<Json>),
    /// `{...}`, fields in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value under `key` of an object; panics, quoting the value,
    /// otherwise (for tests).
    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Object(fields) => fields
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("no key {key:?} in {self:?}")),
            _ => panic!("not an object: {self:?}"),
        }
    }

    /// The keys of an object, in order; panics otherwise.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Json::Object(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
            _ => panic!("not an object: {self:?}"),
        }
    }

    /// A number; panics otherwise.
    pub fn number(&self) -> f64 {
        match self {
            Json::Number(n) => *n,
            _ => panic!("not a number: {self:?}"),
        }
    }

    /// A number that must be a whole, non-negative integer; panics otherwise.
    pub fn whole(&self) -> u64 {
        let n = self.number();
        assert!(n >= 0.0 && n.fract() == 0.0, "not a whole number: {n}");
        n as u64
    }

    /// A string; panics otherwise.
    pub fn string(&self) -> &str {
        match self {
            Json::String(s) => s,
            _ => panic!("not a string: {self:?}"),
        }
    }
}

/// Parses exactly one JSON value (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Json, String> {
    let mut parser = Parser { text, at: 0 };
    let value = parser.value()?;
    parser.skip_space();
    if parser.at != text.len() {
        return Err(parser.error("text after the value"));
    }
    Ok(value)
}

/// Reads one flat object, such as a JSON access-log line: an object whose
/// values are all scalars (no array, no object), with no key twice. The
/// fields come in the order written.
pub fn read_object(text: &str) -> Result<Vec<(String, Json)>, String> {
    let Json::Object(fields) = parse(text)? else {
        return Err("not an object".to_string());
    };
    for (i, (key, value)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(k, _)| k == key) {
            return Err(format!("key {key:?} twice"));
        }
        if matches!(value, Json::Array(_) | Json::Object(_)) {
            return Err(format!("key {key:?} holds a nested value"));
        }
    }
    Ok(fields)
}

/// The text and a byte position in it, always on a character boundary.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Steps over `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let here = self.peek() == Some(byte);
        if here {
            self.at += 1;
        }
        here
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", char::from(byte))))
        }
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.skip_space();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("expected a value")),
        }
    }

    fn object(&mut self) -> Result<Json, String> {
        self.expect(b'{')?;
        let mut fields = Vec::new();
        self.skip_space();
        if self.eat(b'}') {
            return Ok(Json::Object(fields));
        }
        loop {
            self.skip_space();
            let key = self.string()?;
            self.skip_space();
            self.expect(b':')?;
            fields.push((key, self.value()?));
            self.skip_space();
            if self.eat(b'}') {
                return Ok(Json::Object(fields));
            }
            if !self.eat(b',') {
                return Err(self.error("expected ',' or '}'"));
            }
        }
    }

    fn array(&mut self) -> Result<Json, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_space();
        if self.eat(b']') {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            if self.eat(b']') {
                return Ok(Json::Array(items));
            }
            if !self.eat(b',') {
                return Err(self.error("expected ',' or ']'"));
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.at..].chars().next() else {
                return Err(self.error("unterminated string"));
            };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                c if u32::from(c) < 0x20 => {
                    return Err(self.error("a raw control character in a string"));
                }
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, String> {
        let c = self
            .peek()
            .ok_or_else(|| self.error("unterminated escape"))?;
        self.at += 1;
        Ok(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => self.unicode_escape()?,
            _ => return Err(self.error("unknown escape")),
        })
    }

    /// After `\u`: four hex digits, or a surrogate pair of two escapes.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let high = self.hex4()?;
        if (0xDC00..0xE000).contains(&high) {
            return Err(self.error("a lone low surrogate"));
        }
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high).ok_or_else(|| self.error("bad \\u escape"));
        }
        if !(self.eat(b'\\') && self.eat(b'u')) {
            return Err(self.error("a lone high surrogate"));
        }
        let low = self.hex4()?;
        if !(0xDC00..0xE000).contains(&low) {
            return Err(self.error("a lone high surrogate"));
        }
        let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
        char::from_u32(code).ok_or_else(|| self.error("bad surrogate pair"))
    }

    /// Exactly four hex digits (`from_str_radix` alone would take a sign).
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("bad \\u escape"))?;
        let value = u32::from_str_radix(digits, 16).map_err(|e| self.error(&e.to_string()))?;
        self.at += 4;
        Ok(value)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, then f64.
    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("expected a digit")),
        }
        if self.eat(b'.') {
            self.required_digits()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            self.required_digits()?;
        }
        self.text[start..self.at]
            .parse::<f64>()
            .map(Json::Number)
            .map_err(|e| self.error(&e.to_string()))
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn required_digits(&mut self) -> Result<(), String> {
        let before = self.at;
        self.digits();
        if self.at == before {
            return Err(self.error("expected a digit"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_every_kind_parse() {
        assert_eq!(parse(" null "), Ok(Json::Null));
        assert_eq!(parse("-1.5e3"), Ok(Json::Number(-1500.0)));
        assert_eq!(
            parse(r#""a\"\\\n\u0001\ud83d\ude00""#),
            Ok(Json::String("a\"\\\n\u{1}\u{1F600}".to_string()))
        );
        assert_eq!(
            parse(r#"{"a":[1,{"b":true}],"a":[]}"#),
            Ok(Json::Object(vec![
                (
                    "a".into(),
                    Json::Array(vec![
                        Json::Number(1.0),
                        Json::Object(vec![("b".into(), Json::Bool(true))])
                    ])
                ),
                ("a".into(), Json::Array(vec![])),
            ]))
        );
    }

    #[test]
    fn what_json_forbids_is_refused() {
        for bad in [
            "",
            "{",
            "{\"a\":1,}",
            "[1,]",
            "01",
            "1.",
            ".5",
            "NaN",
            "+1",
            "-",
            "1e",
            "\"\u{1}\"",
            "\"\\x\"",
            "\"\\u41\"",
            "\"\\u+041\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "{\"a\" 1}",
            "1 2",
            "{a:1}",
            "\"abc",
            "tru",
            "{\"a\":1}}",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn a_flat_object_is_read_strictly() {
        let ok = read_object(r#"{"a":1,"b":"x\"y\u0041","c":null,"d":true,"e":-1.5e3}"#)
            .expect("valid JSON");
        assert_eq!(ok.len(), 5);
        assert_eq!(ok[1].1, Json::String("x\"yA".into()));
        assert_eq!(ok[4].1, Json::Number(-1500.0));
        assert_eq!(read_object(" { } "), Ok(Vec::new()));
        assert_eq!(
            read_object("{ \"a\" : false ,\"b\":0.5E+1}"),
            Ok(vec![
                ("a".into(), Json::Bool(false)),
                ("b".into(), Json::Number(5.0))
            ])
        );
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":01}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"{"a":1}}"#,
            "{\"a\":\"tab\t\"}",
            "{\"a\":\"\n\"}",
            r#"{"a":nul}"#,
            r#"{"a" 1}"#,
            r#"{"a":1"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e}"#,
            r#"{"a":+1}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u41"}"#,
            r#"{"a":"\u+041"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"é"#,
            r#"{"a":[1]}"#,
            r#"{"a":{}}"#,
            r#"{a:1}"#,
            "[]",
            "",
        ] {
            assert!(read_object(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
