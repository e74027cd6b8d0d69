//! Bulk streams: bytes through a connection both ways, checksummed.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use runtime::combinator::join;
use runtime::net::TcpStream;
use runtime::{Runtime, spawn};

use super::shared::{
    JsonObject, MIB, bounded, invalid_input, per_second, process_cpu_time, stream_share,
    write_client_cpu,
};

/// Each write of a bulk stream, and the read buffer: big enough that the
/// system calls, not the bytes, are rare.
const BULK_CHUNK: usize = 64 * 1024;

/// What to stream.
#[derive(Debug, Clone)]
pub struct BulkOptions {
    /// Where to connect: an Echo backend, directly or through a proxy.
    pub target: SocketAddr,
    /// Bytes to send in total, split evenly over the streams; each comes
    /// back, so as many are received.
    pub bytes: u64,
    /// Connections streaming at once (at least 1).
    pub streams: usize,
    /// The longest a stream may go without progress: the connect, each
    /// 64 KiB write, each read. A bound on stalls, not on the whole run,
    /// so a big transfer through a slow proxy is not cut short.
    pub timeout: Duration,
}

/// What a bulk run moved, how fast, and whether it came back unchanged.
#[derive(Debug, Clone, Default)]
pub struct BulkReport {
    /// Streams run.
    pub streams: usize,
    /// Bytes echoed back, the total over streams; when `intact`, exactly
    /// the bytes sent, and as many went each way.
    pub bytes_each_way: u64,
    /// Wall-clock time from the first connect to the last end of file.
    pub elapsed: Duration,
    /// Every stream's echo matched what it sent, in checksum and length,
    /// and no stream failed.
    pub intact: bool,
    /// User plus system CPU time of this process during the run.
    pub client_cpu: Duration,
    /// The first failure, to say what went wrong.
    pub first_error: Option<String>,
}

impl BulkReport {
    /// Throughput each way: `bytes_each_way` in MiB per second of `elapsed`.
    pub fn mib_per_sec(&self) -> f64 {
        per_second(self.bytes_each_way as f64 / MIB as f64, self.elapsed)
    }

    /// The report as one line of JSON, for scripts:
    /// `{"streams":4,"bytes_each_way":67108864,"elapsed_s":0.081234,`
    /// `"mib_per_s":787.847,"intact":true,"client_cpu_s":0.070000,"first_error":null}`.
    pub fn to_json(&self) -> String {
        JsonObject::new()
            .uint("streams", self.streams as u64)
            .uint("bytes_each_way", self.bytes_each_way)
            .float("elapsed_s", self.elapsed.as_secs_f64(), 6)
            .float("mib_per_s", self.mib_per_sec(), 3)
            .boolean("intact", self.intact)
            .float("client_cpu_s", self.client_cpu.as_secs_f64(), 6)
            .string("first_error", self.first_error.as_deref())
            .finish()
    }
}

impl fmt::Display for BulkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} stream(s), {:.1} MiB each way in {:.2} s: {:.1} MiB/s, {}",
            self.streams,
            self.bytes_each_way as f64 / MIB as f64,
            self.elapsed.as_secs_f64(),
            self.mib_per_sec(),
            if self.intact { "intact" } else { "NOT intact" },
        )?;
        write_client_cpu(f, self.client_cpu, self.elapsed)?;
        if let Some(error) = &self.first_error {
            write!(f, "; first error: {error}")?;
        }
        Ok(())
    }
}

/// Streams `options.bytes` through the target and back on `options.streams`
/// connections at once, on a new [`Runtime`] on the calling thread.
///
/// ```text
///   stream i:  write 64 KiB, 64 KiB, ... FIN ──▶ echo ──┐
///              (pattern of stream i, checksummed)      │ both at once
///              read ◀── ... ◀── EOF ◀──────────────────┘ (checksummed)
///              intact = same checksum and same length both ways
/// ```
///
/// Writing and reading run at once (a `join` in the stream's task): a
/// client that wrote everything before reading would stall as soon as the
/// echo filled the socket buffers in both directions. A failed stream is
/// recorded in the report (`intact` false), not returned as an error; only
/// a runtime that cannot start, or zero streams, is an error.
pub fn run_bulk(options: &BulkOptions) -> io::Result<BulkReport> {
    if options.streams == 0 {
        return Err(invalid_input("a bulk run needs at least one stream"));
    }
    let runtime = Runtime::new()?;
    let cpu_before = process_cpu_time()?;
    let mut report = runtime.block_on(drive_bulk(options.clone()))?;
    report.client_cpu = process_cpu_time()?.saturating_sub(cpu_before);
    Ok(report)
}

/// Starts one task per stream, waits for all, and adds up what they did.
async fn drive_bulk(options: BulkOptions) -> io::Result<BulkReport> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.streams)
        .map(|index| {
            let len = stream_share(options.bytes, options.streams, index);
            spawn(bulk_stream(options.target, index, len, options.timeout))
        })
        .collect();
    let mut report = BulkReport {
        streams: options.streams,
        intact: true,
        ..BulkReport::default()
    };
    for task in tasks {
        let outcome = task
            .await
            .map_err(|e| io::Error::other(format!("a bulk stream task failed: {e}")))?;
        report.bytes_each_way += outcome.echoed;
        if let Some(error) = outcome.error {
            report.intact = false;
            report.first_error.get_or_insert(error);
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// How one stream ended: the bytes it got back, and what went wrong, if
/// anything did (a failure, or an echo that does not match).
struct StreamOutcome {
    echoed: u64,
    error: Option<String>,
}

/// One stream: connect, then send `len` bytes and read the echo at once,
/// and compare the two checksums.
async fn bulk_stream(target: SocketAddr, index: usize, len: u64, limit: Duration) -> StreamOutcome {
    let failed = |e: io::Error| StreamOutcome {
        echoed: 0,
        error: Some(format!("stream {index}: {e}")),
    };
    let conn = match bounded(limit, "not connected", TcpStream::connect(target)).await {
        Ok(conn) => conn,
        Err(e) => return failed(e),
    };
    let seed = index as u64;
    let (sent, echoed) = join(
        stop_both_on_error(&conn, send_stream(&conn, seed, len, limit)),
        stop_both_on_error(&conn, receive_echo(&conn, len, limit)),
    )
    .await;
    let echoed_bytes = echoed.as_ref().map_or(0, |sum| sum.len());
    // The sender's error first: when it fails, the reader only sees the
    // consequence (an early end of file).
    let error = match (sent, echoed) {
        (Err(e), _) | (Ok(_), Err(e)) => Some(format!("stream {index}: {e}")),
        (Ok(sent), Ok(echoed)) if sent != echoed => Some(format!(
            "stream {index}: the echo ({} bytes, checksum {:016x}) does not match \
             what was sent ({} bytes, checksum {:016x})",
            echoed.len(),
            echoed.digest(),
            sent.len(),
            sent.digest()
        )),
        (Ok(_), Ok(_)) => None,
    };
    StreamOutcome {
        echoed: echoed_bytes,
        error,
    }
}

/// Runs one direction of a stream; if it fails, shuts the connection down
/// both ways, so the other direction stops at once (its read sees end of
/// file, its write an error) instead of waiting out its timeout.
async fn stop_both_on_error<T>(
    conn: &TcpStream,
    direction: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let outcome = direction.await;
    if outcome.is_err() {
        // Already broken: a failure to shut it down changes nothing.
        let _ = conn.shutdown(Shutdown::Both);
    }
    outcome
}

/// Sends `len` bytes of the pattern of stream `seed` in 64 KiB writes,
/// then a FIN; returns their checksum.
async fn send_stream(
    conn: &TcpStream,
    seed: u64,
    len: u64,
    limit: Duration,
) -> io::Result<StreamSum> {
    let mut chunk = vec![0u8; BULK_CHUNK];
    let mut sum = StreamSum::default();
    let mut offset = 0;
    while offset < len {
        let n = usize::try_from(len - offset).map_or(BULK_CHUNK, |left| left.min(BULK_CHUNK));
        let part = &mut chunk[..n];
        fill_pattern(seed, offset, part);
        sum.update(part);
        bounded(limit, "no write progress", conn.write_all(part)).await?;
        offset += n as u64;
    }
    // The FIN tells the echo "that was all"; it answers with its own.
    conn.shutdown(Shutdown::Write)?;
    Ok(sum)
}

/// Reads the echo to end of file; returns its checksum. More bytes than
/// were sent is an error at once (no point reading a runaway echo to EOF).
async fn receive_echo(conn: &TcpStream, expected: u64, limit: Duration) -> io::Result<StreamSum> {
    let mut chunk = vec![0u8; BULK_CHUNK];
    let mut sum = StreamSum::default();
    loop {
        let n = bounded(limit, "no echo", conn.read(&mut chunk)).await?;
        if n == 0 {
            return Ok(sum);
        }
        sum.update(&chunk[..n]);
        if sum.len() > expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("echoed more bytes than the {expected} sent"),
            ));
        }
    }
}

/// Fills `buf` with the bytes of stream `seed`'s pattern from byte `offset`
/// on (`offset` a multiple of 8, as every write's start is).
///
/// The pattern is a function of the position, word by word (the 8-byte
/// word at `w` is a mix of the seed and `w`), rather than a generator's
/// sequence: any part can be made without making what comes before it, and
/// the words are independent, so the CPU computes several at once.
fn fill_pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    debug_assert_eq!(offset % 8, 0, "writes start on a word");
    let seed_key = seed.wrapping_mul(POSITION_STEP);
    let mut position = offset / 8;
    // Whole words first: a copy of exactly 8 bytes is one store, where a
    // copy of a length only known at run time would be a call to memcpy.
    let mut words = buf.chunks_exact_mut(8);
    for bytes in &mut words {
        bytes.copy_from_slice(&mix64(seed_key ^ position).to_le_bytes());
        position += 1;
    }
    let rest = words.into_remainder();
    let last = mix64(seed_key ^ position).to_le_bytes();
    rest.copy_from_slice(&last[..rest.len()]);
}

/// A 64-bit finalizer (the one that ends splitmix64): every input bit
/// changes about half the output bits.
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A checksum of a byte stream that does not depend on how the stream was
/// cut into reads: the sender checksums 64 KiB writes, the receiver
/// whatever each read returned, and equal bytes give equal sums.
///
/// Each 8-byte word gives a [`checksum_term`] that depends on the word and
/// on its position, and the terms are added. The position makes swapped
/// words change the sum; the addition makes each word's work independent of
/// the last, so the CPU overlaps them, and one multiply a word keeps the
/// checksum far faster than loopback. (A byte-at-a-time hash such as
/// FNV-1a waits for each multiply before starting the next, and made the
/// client the bottleneck it must not be.)
#[derive(Debug, Clone, Copy, Default)]
struct StreamSum {
    sum: u64,
    /// Bytes seen; the whole words seen are `len / 8`.
    len: u64,
    /// The start of a word a read cut in two, waiting for the rest.
    tail: [u8; 8],
}

/// The distance between two positions' keys: odd, so no two of 2^64
/// positions share a key.
const POSITION_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// What the word `word` adds to the checksum at the position whose key is
/// `key`. For a given position it is a bijection of the word (xor with the
/// key, an xorshift, a multiply by an odd number: each can be undone), so a
/// change confined to one word always changes the sum.
fn checksum_term(word: u64, key: u64) -> u64 {
    let x = word ^ key;
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl StreamSum {
    fn update(&mut self, mut bytes: &[u8]) {
        let pending = (self.len % 8) as usize;
        if pending > 0 {
            let take = (8 - pending).min(bytes.len());
            self.tail[pending..pending + take].copy_from_slice(&bytes[..take]);
            self.len += take as u64;
            bytes = &bytes[take..];
            if self.len % 8 != 0 {
                return;
            }
            let key = (self.len / 8 - 1).wrapping_mul(POSITION_STEP);
            self.sum = self
                .sum
                .wrapping_add(checksum_term(u64::from_le_bytes(self.tail), key));
        }
        let mut words = bytes.chunks_exact(8);
        // Locals, so the loop keeps them in registers.
        let mut sum = self.sum;
        let mut key = (self.len / 8).wrapping_mul(POSITION_STEP);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            sum = sum.wrapping_add(checksum_term(u64::from_le_bytes(w), key));
            key = key.wrapping_add(POSITION_STEP);
        }
        self.sum = sum;
        let rest = words.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.len += bytes.len() as u64;
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// The checksum of everything so far, the last partial word included
    /// (its missing bytes as zeros; the length tells the rest).
    fn digest(&self) -> u64 {
        let pending = (self.len % 8) as usize;
        if pending == 0 {
            return self.sum;
        }
        let mut word = [0u8; 8];
        word[..pending].copy_from_slice(&self.tail[..pending]);
        let key = (self.len / 8).wrapping_mul(POSITION_STEP);
        self.sum
            .wrapping_add(checksum_term(u64::from_le_bytes(word), key))
    }
}

impl PartialEq for StreamSum {
    /// The same bytes: the same length and the same digest (the `tail`
    /// buffer beyond the length is scratch, not content).
    fn eq(&self, other: &StreamSum) -> bool {
        self.len == other.len && self.digest() == other.digest()
    }
}

// ---- idle connections -------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_shares_add_up_to_the_total() {
        for (total, streams) in [(0, 3), (10, 3), (1_000_003, 4), (64 * MIB, 4), (2, 5)] {
            let parts: Vec<u64> = (0..streams)
                .map(|i| stream_share(total, streams, i))
                .collect();
            assert_eq!(parts.iter().sum::<u64>(), total, "{total} over {streams}");
            let (min, max) = (parts.iter().min(), parts.iter().max());
            assert!(max.zip(min).is_some_and(|(max, min)| max - min <= 1));
        }
    }

    /// The pattern of `len` bytes, made in one piece.
    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        fill_pattern(seed, 0, &mut bytes);
        bytes
    }

    #[test]
    fn the_pattern_is_the_same_whatever_the_pieces() {
        let whole = pattern(7, 1000);
        let mut pieces = vec![0u8; 1000];
        for start in (0..1000).step_by(96) {
            let end = (start + 96).min(1000);
            fill_pattern(7, start as u64, &mut pieces[start..end]);
        }
        assert_eq!(whole, pieces);
        assert_ne!(whole, pattern(8, 1000), "another stream, other bytes");
    }

    fn sum_in_pieces(bytes: &[u8], piece: usize) -> StreamSum {
        let mut sum = StreamSum::default();
        for part in bytes.chunks(piece) {
            sum.update(part);
        }
        sum
    }

    #[test]
    fn the_checksum_does_not_depend_on_how_reads_cut_the_stream() {
        let bytes = pattern(3, 10_007);
        let whole = sum_in_pieces(&bytes, bytes.len());
        assert_eq!(whole.len(), 10_007);
        for piece in [1, 3, 7, 8, 9, 1000, 4096] {
            assert_eq!(sum_in_pieces(&bytes, piece), whole, "pieces of {piece}");
        }
    }

    #[test]
    fn the_checksum_sees_a_flipped_bit_swapped_words_and_a_lost_byte() {
        let bytes = pattern(5, 4096);
        let good = sum_in_pieces(&bytes, 4096);
        let mut flipped = bytes.clone();
        flipped[1234] ^= 0x10;
        assert_ne!(sum_in_pieces(&flipped, 4096), good);
        let mut swapped = bytes.clone();
        swapped[..16].rotate_left(8);
        assert_ne!(sum_in_pieces(&swapped, 4096), good);
        assert_ne!(sum_in_pieces(&bytes[..4095], 4096), good);
        // A partial last word counts too.
        assert_ne!(
            sum_in_pieces(&bytes[..4093], 4096),
            sum_in_pieces(&bytes[..4094], 4096)
        );
    }
}
