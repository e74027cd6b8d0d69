//! The fixture backend and the load client (placeholder while being written).
#![deny(unsafe_op_in_unsafe_fn)]
