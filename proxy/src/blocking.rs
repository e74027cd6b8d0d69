//! What the blocking modes share (being written).
