//! One admin connection: read its request head (within the request
//! deadline, refused at the first byte that cannot be HTTP/1.x), answer,
//! close without losing the answer; and at every wait, give way to a
//! newcomer if the listener is full ([`places`](super::places)).
//!
//! ```text
//!   accepted ──▶ waiting for its head ──▶ answering ──▶ lingering ──▶ closed
//!                 │  gives way, deadline                 │  gives way, 1 s, EOF
//!                 │  bad byte: 400, too long: 431 ───────┘
//! ```

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use runtime::combinator::{Either, select};
use runtime::net::TcpStream;
use runtime::time;

use crate::ops::metrics::exposition::Published;

use super::AdminOptions;
use super::access::Refused;
use super::actions;
use super::http_action::{self, Operator};
use super::places::{GiveWay, Place, Waiting};
use super::request::{BadRequest, HeadScanner, parse_request};
use super::response::{Response, respond};

/// How long the lingering close reads what a client still sends (module
/// docs of [`admin`](super)).
const LINGER: Duration = Duration::from_secs(1);

/// How much the lingering close reads at most.
const LINGER_BYTES: usize = 256 * 1024;

/// How reading a request head ended, short of the peer leaving.
#[derive(Debug)]
enum Head {
    /// The blank line came: the head is that many bytes, of that many
    /// read (the rest, the start of a body).
    Complete(usize, usize),
    /// A byte that shows it is no HTTP/1.x request.
    Bad(BadRequest),
    /// The buffer filled up first.
    TooLarge,
}

/// Serves one admin connection from accept to close, in its `place`.
pub(super) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    (registry, operator): (&Published, &Operator),
    options: &AdminOptions,
    mut place: Place,
    give_way: GiveWay,
) {
    let mut buf = vec![0u8; options.max_head];
    let read = time::timeout(options.request_timeout, read_head(&stream, &mut buf));
    let head = match select(give_way, read).await {
        Either::Left(()) => {
            crate::debug!(
                "admin: {peer}: no request yet and all {} places taken; closing it to make room \
                 for a newer connection",
                options.max_connections
            );
            return;
        }
        Either::Right(Err(time::Elapsed)) => {
            crate::debug!(
                "admin: {peer}: no complete request within {:?}; closing",
                options.request_timeout
            );
            return;
        }
        // Closed or reset before a whole head: nobody to answer.
        Either::Right(Ok(Err(_))) => return,
        Either::Right(Ok(Ok(head))) => head,
    };
    place.work();
    let response = match operator.access.may_connect(peer.ip()) {
        true => answer(head, &buf, (&stream, peer), (registry, operator), options).await,
        false => {
            crate::debug!("admin: {peer}: not in admin-allow; 403");
            Response::text(403, Refused::Address.reason())
        }
    };
    let write = async {
        stream.write_all(&response.to_bytes()).await?;
        stream.shutdown(Shutdown::Write)
    };
    if let Ok(Ok(())) = time::timeout(options.write_timeout, write).await {
        let give_way = place.wait(Waiting::ForClose);
        let _ = select(give_way, time::timeout(LINGER, drain(&stream))).await;
    }
}

/// The answer to what was read: an action's ([`http_action`](super::http_action)),
/// or a view's.
async fn answer(
    head: Head,
    buf: &[u8],
    (stream, peer): (&TcpStream, SocketAddr),
    (registry, operator): (&Published, &Operator),
    options: &AdminOptions,
) -> Response {
    // The whole head goes through `parse_request` once more: the function
    // the fuzz target calls is the one that decides.
    let (len, filled) = match head {
        Head::Complete(len, filled) => (len, filled),
        _ => (0, 0),
    };
    let head_bytes = buf.get(..len).unwrap_or_default();
    let parsed = match head {
        Head::Complete(..) => parse_request(head_bytes),
        Head::Bad(why) => Err(why),
        Head::TooLarge => {
            crate::debug!(
                "admin: {peer}: request head over {} bytes",
                options.max_head
            );
            return Response::text(431, "request head too large\n");
        }
    };
    match parsed {
        Ok(request) if actions::parse_http(request.method, request.path, "").is_some() => {
            let early = buf.get(len..filled).unwrap_or_default();
            let what = (request.method, request.path);
            let deadline = options.request_timeout;
            let operating = (registry, operator);
            http_action::answer(head_bytes, early, stream, what, operating, deadline).await
        }
        Ok(request) => respond(&request, registry),
        Err(why) => {
            crate::debug!("admin: {peer}: bad request: {why}");
            Response::text(400, format!("bad request: {why}\n"))
        }
    }
}

/// Reads until the blank line that ends a request head, or the first byte
/// that cannot belong to one. An error if the peer closed
/// (`UnexpectedEof`) or reset before either.
async fn read_head(stream: &TcpStream, buf: &mut [u8]) -> io::Result<Head> {
    let mut scanner = HeadScanner::new();
    let mut filled: usize = 0;
    loop {
        match scanner.feed(&buf[..filled]) {
            Ok(Some(len)) => return Ok(Head::Complete(len, filled)),
            Err(why) => return Ok(Head::Bad(why)),
            Ok(None) if filled == buf.len() => return Ok(Head::TooLarge),
            Ok(None) => {}
        }
        match stream.read(&mut buf[filled..]).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => filled += n,
        }
    }
}

/// Reads and discards until end of file (the lingering close), at most
/// [`LINGER_BYTES`]: a client still sending after that gets its reset.
async fn drain(stream: &TcpStream) {
    let mut sink = [0u8; 4096];
    let mut left = LINGER_BYTES;
    while let Ok(n @ 1..) = stream.read(&mut sink).await {
        left = left.saturating_sub(n);
        if left == 0 {
            return;
        }
    }
}
