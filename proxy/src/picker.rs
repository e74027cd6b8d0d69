//! Round-robin backend pickers (the full version, with the race, is being written).
use crate::cli::PickerKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Chooses the index of the next backend.
pub trait Picker: Send + Sync + std::fmt::Debug {
    /// The index, in `0..backends`, of the backend for the next connection.
    fn pick(&self) -> usize;
}

#[derive(Debug)]
struct Atomic(AtomicUsize, usize);

impl Picker for Atomic {
    fn pick(&self) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed) % self.1
    }
}

/// Builds the picker `kind` over `backends` backends.
pub fn new_picker(kind: PickerKind, backends: usize) -> Arc<dyn Picker> {
    let _ = kind;
    Arc::new(Atomic(AtomicUsize::new(0), backends.max(1)))
}
