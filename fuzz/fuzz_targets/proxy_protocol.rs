//! Fuzzes the PROXY protocol parser (`proxy::conn::proxy_protocol::parse`),
//! which reads the first bytes of every client of an `accept-proxy`
//! frontend: bytes anyone who can connect chooses.
//!
//! Beyond "never panics", it holds the parser to what its docs promise, on
//! every input:
//! - a verdict, once given, is final: if a prefix of the bytes is refused,
//!   so are the bytes, and if a prefix is a whole header, the bytes are that
//!   same header (what follows it is the client's stream, never read);
//! - it never asks for more than [`MAX_HEADER`] bytes, nor a v1 line for
//!   more than [`V1_MAX`];
//! - an error names the version whose rules the bytes broke, and its
//!   message is printable ASCII (a logged error cannot forge log lines);
//! - the addresses of a header, written again by `encode`, read back the
//!   same in both versions.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxy::conn::proxy_protocol::{
    Addresses, MAX_HEADER, ParseError, V1_MAX, Version, encode, parse,
};

type Verdict = Result<Option<(Addresses, usize)>, ParseError>;

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    check_verdict(data, &whole);
    check_prefixes(data, &whole);
    if let Ok(Some((
        Addresses::Proxied {
            source,
            destination,
        },
        _,
    ))) = whole
    {
        for version in [Version::V1, Version::V2] {
            let header = encode(version, source, destination);
            let expected = Addresses::Proxied {
                source,
                destination,
            };
            assert_eq!(parse(&header), Ok(Some((expected, header.len()))));
        }
    }
});

/// What one verdict on `data` must be, taken alone.
fn check_verdict(data: &[u8], verdict: &Verdict) {
    match verdict {
        Ok(None) => {
            assert!(
                data.len() < MAX_HEADER,
                "asked for more after {} bytes",
                data.len()
            );
            if data.first() == Some(&b'P') {
                assert!(
                    data.len() < V1_MAX,
                    "a v1 line still open at {} bytes",
                    data.len()
                );
            }
        }
        Ok(Some((_, used))) => {
            assert!(*used <= data.len() && *used <= MAX_HEADER, "used {used}");
        }
        Err(e) => {
            let version = e.version();
            match data.first() {
                Some(b'P') => assert!(matches!(version, None | Some(Version::V1)), "{e:?}"),
                Some(b'\r') => assert!(matches!(version, None | Some(Version::V2)), "{e:?}"),
                _ => assert_eq!(e, &ParseError::NotProxyProtocol),
            }
            let message = e.to_string();
            assert!(!message.is_empty());
            assert!(
                message.bytes().all(|b| (b' '..=b'~').contains(&b)),
                "{message:?}"
            );
        }
    }
}

/// A verdict on a prefix binds the whole: parse never changes its mind as
/// bytes arrive. Prefixes past [`MAX_HEADER`] bytes cannot differ, since
/// parse never looks that far.
fn check_prefixes(data: &[u8], whole: &Verdict) {
    let longest = data.len().min(MAX_HEADER + 1);
    for cut in 0..longest {
        let prefix = data.get(..cut).unwrap_or_default();
        match parse(prefix) {
            Ok(None) => {}
            Ok(Some(header)) => {
                assert_eq!(
                    whole,
                    &Ok(Some(header)),
                    "a header of {cut} bytes, then more"
                );
            }
            Err(e) => assert!(
                whole.is_err(),
                "refused at {cut} bytes ({e}), taken at more"
            ),
        }
    }
}
