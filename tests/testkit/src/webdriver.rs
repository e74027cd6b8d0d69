//! A WebDriver client, by hand: just enough of the W3C protocol (HTTP/1.1
//! and JSON, over std's `TcpStream`) to open a page in a headless browser,
//! run a script in it, click an element and take a screenshot, for the
//! stats page's test (`tests/stats_page.rs`) against Debian's
//! `chromedriver`.
//!
//! ```text
//!   POST /session                       {"capabilities": ...}  -> {"value":{"sessionId":..}}
//!   POST /session/ID/url                {"url": ...}
//!   POST /session/ID/execute/sync       {"script": ..., "args": []} -> {"value": ...}
//!   POST /session/ID/element            {"using":"css selector","value":..}
//!   POST /session/ID/element/E/click    {}
//!   GET  /session/ID/screenshot         -> {"value": "<base64 PNG>"}
//!   DELETE /session/ID
//! ```
//!
//! Every request is one connection (`Connection: close`) with a read
//! deadline, so a driver that hangs fails the test rather than holding it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::json::{self, Json};

/// How long one WebDriver command may take (a page load included).
const COMMAND: Duration = Duration::from_secs(30);

/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One browser session of a driver listening at an address.
#[derive(Debug)]
pub struct Session {
    driver: SocketAddr,
    id: String,
}

impl Session {
    /// Opens a session of headless Chromium (`binary`), with `args` added
    /// to its command line.
    pub fn chromium(driver: SocketAddr, binary: &str, args: &[&str]) -> Result<Session, String> {
        let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let body = format!(
            "{{\"capabilities\":{{\"alwaysMatch\":{{\"browserName\":\"chrome\",\
             \"goog:chromeOptions\":{{\"binary\":{},\"args\":[{}]}}}}}}}}",
            quote(binary),
            args.join(",")
        );
        let value = command(driver, "POST", "/session", Some(&body))?;
        let id = value.get("sessionId").string().to_string();
        Ok(Session { driver, id })
    }

    /// Loads `url`, returning once the page has loaded.
    pub fn open(&self, url: &str) -> Result<(), String> {
        let body = format!("{{\"url\":{}}}", quote(url));
        self.post("url", &body).map(drop)
    }

    /// Runs `script` (a function body: `return ...;`) in the page and
    /// returns what it returned.
    pub fn run(&self, script: &str) -> Result<Json, String> {
        let body = format!("{{\"script\":{},\"args\":[]}}", quote(script));
        self.post("execute/sync", &body)
    }

    /// Clicks the first element matching the CSS `selector`.
    pub fn click(&self, selector: &str) -> Result<(), String> {
        let body = format!(
            "{{\"using\":\"css selector\",\"value\":{}}}",
            quote(selector)
        );
        let element = self.post("element", &body)?;
        let id = element.get(ELEMENT).string().to_string();
        self.post(&format!("element/{id}/click"), "{}").map(drop)
    }

    /// A PNG of the window, as its bytes.
    pub fn screenshot(&self) -> Result<Vec<u8>, String> {
        let path = format!("/session/{}/screenshot", self.id);
        let value = command(self.driver, "GET", &path, None)?;
        base64(value.string())
    }

    fn post(&self, what: &str, body: &str) -> Result<Json, String> {
        let path = format!("/session/{}/{what}", self.id);
        command(self.driver, "POST", &path, Some(body))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.id);
        let _ = command(self.driver, "DELETE", &path, None);
    }
}

/// `s` as a JSON string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One command: its answer's `value`, or the driver's error as text.
fn command(
    driver: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Json, String> {
    let (status, text) = request(driver, method, path, body)
        .map_err(|e| format!("webdriver {method} {path}: {e}"))?;
    let answer =
        json::parse(&text).map_err(|e| format!("webdriver {method} {path}: {e}: {text}"))?;
    let value = answer.get("value").clone();
    match status {
        200 => Ok(value),
        _ => Err(format!("webdriver {method} {path}: HTTP {status}: {text}")),
    }
}

/// One HTTP/1.1 exchange: the status and the body.
pub fn request(
    to: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(COMMAND))?;
    stream.set_write_timeout(Some(COMMAND))?;
    let body = body.unwrap_or("");
    let kind = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {to}\r\n{kind}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    read_answer(&mut stream)
}

/// Reads an answer: its head, then as many bytes as its `Content-Length`
/// says (a driver may keep the connection open after it), or to the end
/// without one.
fn read_answer(stream: &mut TcpStream) -> io::Result<(u16, String)> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            return Err(bad(format!("closed before a whole head: {raw:?}")));
        }
        raw.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("no status: {head:?}")))?;
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    let mut body = raw.split_off(end + 4);
    match length {
        Some(length) => {
            while body.len() < length {
                let read = stream.read(&mut chunk)?;
                if read == 0 {
                    return Err(bad(format!("closed {} bytes short", length - body.len())));
                }
                body.extend_from_slice(&chunk[..read]);
            }
            body.truncate(length);
        }
        None => {
            stream.read_to_end(&mut body)?;
        }
    }
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Standard base64 (with padding) to bytes.
pub fn base64(text: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("not base64: {:?}", c as char)),
        }
        .into())
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for chunk in clean.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut bits = 0u32;
        for &c in &data {
            bits = (bits << 6) | value(c)?;
        }
        bits <<= 6 * (4 - data.len() as u32);
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..data.len().max(1)]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(base64("aGVsbG8=").expect("base64"), b"hello");
        assert_eq!(base64("aGk=").expect("base64"), b"hi");
        assert_eq!(base64("YWJj").expect("base64"), b"abc");
        assert!(base64("a$==").is_err());
    }

    #[test]
    fn quote_escapes_what_json_needs() {
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
    }
}
