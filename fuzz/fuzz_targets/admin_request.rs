//! Fuzzes the admin listener's request head (`proxy::ops::admin`): the
//! bytes anyone who can reach the admin port sends before its blank line.
//!
//! Beyond "never panics", it holds the scanner to what its docs promise, on
//! every input:
//! - fed in pieces, at any cut, it reaches the verdict that the whole bytes
//!   get at once (`parse_request`): a client sending one byte at a time is
//!   judged as one sending the head in one write;
//! - a refusal is final: once a prefix is refused, every longer input is;
//! - a complete head's length is within the bytes, ends with the blank line
//!   (CRLF CRLF), and a request read from it has a token for a method and
//!   a path that starts with `/`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxy::ops::admin::{BadRequest, HeadScanner, parse_request};

fuzz_target!(|data: &[u8]| {
    let whole = parse_request(data);
    check_complete(data);
    // The first byte says where to cut, so the cuts vary with the input.
    let step = usize::from(data.first().copied().unwrap_or(1) % 7) + 1;
    let (pieces, scanner) = scan_in_pieces(data, step);
    match pieces {
        Ok(Some(length)) => {
            let head = data.get(..length).unwrap_or_default();
            assert_eq!(whole, scanner.request(head), "in pieces of {step}");
        }
        Ok(None) => assert_eq!(whole, Err(BadRequest::Unfinished), "in pieces of {step}"),
        Err(e) => assert_eq!(whole, Err(e), "the same refusal in pieces of {step}"),
    }
});

/// The scanner fed `data` a few bytes more at each call, as reads arrive:
/// its last verdict, and the scanner.
fn scan_in_pieces(data: &[u8], step: usize) -> (Result<Option<usize>, BadRequest>, HeadScanner) {
    let mut scanner = HeadScanner::new();
    let mut refused = None;
    let mut end = 0;
    loop {
        end = (end + step).min(data.len());
        let verdict = scanner.feed(data.get(..end).unwrap_or_default());
        if let Some(earlier) = refused {
            assert_eq!(verdict, Err(earlier), "a refusal is final");
        }
        match verdict {
            Ok(Some(length)) => return (Ok(Some(length)), scanner),
            Err(e) => refused = Some(e),
            Ok(None) => {}
        }
        if end == data.len() {
            return (refused.map_or(Ok(None), Err), scanner);
        }
    }
}

/// What a complete head must look like.
fn check_complete(data: &[u8]) {
    let mut scanner = HeadScanner::new();
    let Ok(Some(length)) = scanner.feed(data) else {
        return;
    };
    assert!(
        length <= data.len(),
        "a head of {length} in {} bytes",
        data.len()
    );
    let head = data.get(..length).unwrap_or_default();
    assert!(
        head.ends_with(b"\r\n\r\n"),
        "a head ends with its blank line"
    );
    // A complete head may still be refused as a whole (its Host headers).
    let Ok(request) = scanner.request(head) else {
        return;
    };
    assert!(!request.method.is_empty(), "a method");
    assert!(
        request.method.bytes().all(|b| b.is_ascii_graphic()),
        "{:?}",
        request.method
    );
    assert!(request.path.starts_with('/'), "{:?}", request.path);
}
