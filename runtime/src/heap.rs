//! How the allocator grows a thread's heap: `M_TOP_PAD`.
//!
//! glibc gives each thread that allocates an arena of its own (the main
//! thread's grows with `brk`, the others' are heaps mapped once and made
//! usable with `mprotect` as allocations reach their end), and grows it by
//! what the allocation at hand needs, plus the top pad (128 KiB by default).
//! A server whose 64 KiB relay buffers are taken as concurrency rises grows
//! its heaps a buffer or two at a time, one system call each. A larger top
//! pad makes each growth, and each thread's first heap, take that much more
//! address space at once: memory only once written, so an idle server's
//! resident size does not change.
//!
//! On a C library other than glibc this does nothing (and says so).

use crate::sys;

/// Grows every heap by at least `bytes` more than an allocation needs
/// (glibc's `mallopt(M_TOP_PAD)`), from now on and in every thread. True if
/// the allocator took it. Call it before the threads that allocate start:
/// a thread's first heap is sized when it first allocates.
///
/// # Examples
///
/// ```
/// // A megabyte at a time: sixteen 64 KiB buffers per growth.
/// let took = runtime::heap::pad_heap_growth(1 << 20);
/// assert_eq!(took, cfg!(target_env = "gnu"));
/// ```
pub fn pad_heap_growth(bytes: usize) -> bool {
    sys::set_malloc_top_pad(bytes)
}
