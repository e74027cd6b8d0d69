//! # The benchmark harness (issue 4), being built: see the final mod.rs.

pub mod svg;
pub mod procstat;
pub mod machine;
pub mod child;
pub mod peers;
