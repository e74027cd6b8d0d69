//! The blocking modes: milestones 1 to 4.

pub mod picker;
pub mod pool;
pub mod relay;
pub mod single;
