//! The relay's buffers, and the per-thread pool they come from.
//!
//! A direction holds a buffer only while bytes are in flight: it takes one
//! before it reads and gives it back once it is empty and the next read
//! would block. So an idle connection holds no buffer at all, and a busy
//! thread reuses the same few buffers without allocating. Every relay of a
//! thread shares its pool: the async driver's directions, the states
//! mode's, and a blocking thread's.

use std::cell::RefCell;

/// Bytes moved per read. Large enough that a bulk transfer costs few system
/// calls; it is only held while data is in flight.
pub const BUFFER_SIZE: usize = 64 * 1024;

/// How much more than asked the allocator grows a thread's heap by
/// (runtime::heap, set at startup): sixteen buffers, so that as concurrency
/// rises a worker's heap grows one system call (`mprotect`, or `brk` on the
/// main thread) per sixteen buffers taken, not per one or two. Address
/// space, not memory, until written.
pub const HEAP_GROWTH: usize = 16 * BUFFER_SIZE;

/// How many free buffers a thread keeps for reuse.
const POOL_LIMIT: usize = 256;

thread_local! {
    static POOL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of [`BUFFER_SIZE`] bytes from this thread's pool (a new one if
/// the pool is empty).
pub fn take() -> Box<[u8]> {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| vec![0; BUFFER_SIZE].into_boxed_slice())
}

/// Gives a buffer back to this thread's pool, for the next read anywhere
/// (dropped if the pool already holds `POOL_LIMIT`, or if it is not of the
/// pool's size: a buffer made for bytes a pipe held, conn/relay.rs).
pub fn give(buffer: Box<[u8]>) {
    if buffer.len() != BUFFER_SIZE {
        return;
    }
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_LIMIT {
            pool.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_the_next_one_taken() {
        let first = take();
        assert_eq!(first.len(), BUFFER_SIZE);
        let address = first.as_ptr();
        give(first);
        let again = take();
        assert_eq!(again.as_ptr(), address, "reused, not allocated");
        give(again);
        give(vec![0; 10].into_boxed_slice());
        assert_eq!(take().len(), BUFFER_SIZE, "an odd size is not pooled");
    }
}
