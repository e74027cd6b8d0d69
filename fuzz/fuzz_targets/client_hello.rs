//! Fuzzes the ClientHello reader (`proxy::conn::client_hello::parse`),
//! which reads the first bytes of every client of a frontend with
//! `use-group` rules: bytes anyone who can connect chooses.
//!
//! Beyond "never panics", it holds the reader to what its docs promise, on
//! every input:
//! - a verdict, once given, is final: if a prefix of the bytes is refused
//!   (not TLS, malformed, too large), the bytes are refused the same way,
//!   and if a prefix is a whole hello, the bytes are that same hello (what
//!   follows is the client's stream, never read);
//! - it asks for more only below [`MAX_HELLO`] bytes, and the bytes it
//!   says an incomplete hello needs at least (`judge`) are needed: no
//!   longer prefix short of them is a hello (it may be a refusal);
//! - a server name is what routing compares: a DNS name in lower case,
//!   1 to 253 bytes, no empty label, no trailing dot; ALPN protocols are
//!   never empty; a refusal's reason is printable ASCII (it is logged).
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxy::conn::client_hello::{MAX_HELLO, Verdict, judge, parse};

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    check_verdict(data, &whole);
    check_prefixes(data, &whole);
});

/// What one verdict on `data` must be, taken alone.
fn check_verdict(data: &[u8], verdict: &Verdict) {
    match verdict {
        Verdict::Incomplete => {
            assert!(
                data.len() < MAX_HELLO,
                "asked for more after {} bytes",
                data.len()
            );
        }
        Verdict::Hello(hello) => {
            if let Some(name) = &hello.sni {
                let allowed = |b: u8| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
                };
                assert!(!name.is_empty() && name.len() <= 253, "{name:?}");
                assert!(name.bytes().all(allowed), "{name:?}");
                assert!(name.split('.').all(|label| !label.is_empty()), "{name:?}");
            }
            assert!(hello.alpn.iter().all(|p| !p.is_empty()), "{:?}", hello.alpn);
        }
        Verdict::Malformed(why) => {
            assert!(!why.is_empty() && why.bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
        Verdict::NotTls | Verdict::TooLarge => {}
    }
}

/// A verdict on a prefix binds the whole: the reader never changes its
/// mind as bytes arrive. Every cut of the first 600 bytes is tried, then
/// 64 cuts spread over the rest (each parse reads up to 16 KiB).
fn check_prefixes(data: &[u8], whole: &Verdict) {
    let longest = data.len().min(MAX_HELLO + 1);
    let step = (longest / 64).max(1);
    let cuts = (0..longest.min(600)).chain((600..longest).step_by(step));
    // The most bytes a prefix judged so far said it needs.
    let mut owed = 0;
    for cut in cuts.chain(std::iter::once(data.len())) {
        let prefix = data.get(..cut).unwrap_or_default();
        let (verdict, needed) = judge(prefix);
        assert_eq!(verdict, parse(prefix));
        match verdict {
            Verdict::Incomplete => {
                assert!(needed > cut, "at {cut} bytes, said to need {needed}");
                owed = owed.max(needed);
            }
            Verdict::Hello(_) => {
                assert!(
                    cut >= owed,
                    "a hello at {cut} bytes, though {owed} were needed"
                );
                assert_eq!(&verdict, whole, "at {cut} bytes, then more");
            }
            verdict => assert_eq!(&verdict, whole, "at {cut} bytes, then more"),
        }
    }
}
