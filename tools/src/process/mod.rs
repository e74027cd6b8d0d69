//! Child processes and /proc: how the workspace runs a program and reads
//! what it costs.
//!
//! - [`child`]: a program as a child process, the workspace's one way to
//!   run one (the demo's proxies, the benchmark's subjects, every
//!   end-to-end test's processes): started until ready, its words kept,
//!   stopped within a bound, its whole tree killed on drop.
//! - [`procstat`]: a process tree from /proc (which processes, their CPU
//!   time and memory), and the machine's CPU beside it.
//!
//! May import: nothing of the crate: every other room stands on this one.
//! Outside it, libc and nix for the system calls, and the fixture's thread
//! CPU clock (`backend::fixture`), the workspace's one.

pub mod child;
pub mod procstat;
