//! The async relay (being written).
