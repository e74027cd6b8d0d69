//! # blocking: milestones 1 to 4, one thread per connection
//!
//! The seed's first four steps, kept runnable so they can be measured
//! beside the event loop: a blocking proxy that serves one connection at a
//! time, then a fixed pool of blocking threads fed by an accept loop, with
//! the round-robin counter they share, racy (milestone 3) or not.
//!
//! | file | what it holds |
//! |---|---|
//! | [`single`] | milestone 1: one thread, one connection at a time |
//! | [`pool`] | milestones 2 to 4: an accept loop and a pool of `--threads` workers |
//! | [`picker`] | the shared round-robin counter: mutex, atomic, and the racy one |
//! | [`relay`] | the blocking relay both use: both directions at once on `poll(2)` |
//!
//! May import: everything below the modes ([`crate::log`], [`crate::conn`],
//! [`crate::ops`], [`crate::settings`]), never [`crate::epoll`]: the two
//! models share no code above the ground floors, so each reads on its own.

pub mod picker;
pub mod pool;
pub mod relay;
pub mod single;
