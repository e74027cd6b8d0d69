//! Helpers shared by the integration tests: a watchdog, a waker that counts
//! its wakes, thread CPU time and id, and a few deterministic data
//! generators. (Descriptor limits come
//! from the runtime itself: `runtime::fd_limit`.)
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::panic;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::task::Wake;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;

/// Runs `f` on a fresh thread and returns its result; panics if it takes
/// longer than `secs` seconds (the hung thread is left behind: the test has
/// failed anyway), and re-raises `f`'s own panic unchanged.
///
/// A fresh thread also keeps per-thread state (signal masks, runtime
/// thread-locals) out of the harness thread that runs the next test.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let name = thread::current().name().unwrap_or("test").to_string();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .name(format!("{name}/body"))
        .spawn(move || {
            let out = f();
            let _ = done_tx.send(());
            out
        })
        .expect("spawn the test body thread");
    match done_rx.recv_timeout(Duration::from_secs(secs)) {
        // Disconnected: the body panicked before it could report; join to get the payload.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(out) => out,
            Err(payload) => panic::resume_unwind(payload),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("watchdog: `{name}` did not finish within {secs} s (hung?)")
        }
    }
}

/// CPU time (user + system) consumed so far by the calling thread.
pub fn thread_cpu_time() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_THREAD).expect("getrusage");
    let tv = |t: TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    tv(usage.user_time()) + tv(usage.system_time())
}

/// The kernel id of the calling thread.
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// A xorshift64 generator: a deterministic pseudo-random byte stream.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // Zero is the one state xorshift never leaves.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Fills `buf` (its length a multiple of 8) with the next bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        assert_eq!(buf.len() % 8, 0, "fill takes whole words");
        for chunk in buf.chunks_exact_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len.next_multiple_of(8)];
        self.fill(&mut v);
        v.truncate(len);
        v
    }
}

/// FNV-1a, 64 bits, fed incrementally.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn update(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

/// A waker that only counts how often it was woken: "woken exactly once",
/// "never woken" become assertions.
#[derive(Debug, Default)]
pub struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountingWaker {
    /// The wakes so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Lets the runtime turn (in sleeps of 1 ms) until `counter` was woken;
/// fails after `limit`. For a wake that another thread's work causes.
pub async fn until_woken(counter: &CountingWaker, limit: Duration) {
    let started = Instant::now();
    while counter.count() == 0 {
        assert!(started.elapsed() < limit, "never woken in {limit:?}");
        runtime::time::sleep(Duration::from_millis(1)).await;
    }
}
