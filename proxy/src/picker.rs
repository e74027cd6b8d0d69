//! Round-robin backend pickers (being written).
use crate::cli::PickerKind;
use std::sync::Arc;

/// Chooses the index of the next backend.
pub trait Picker: Send + Sync + std::fmt::Debug {
    /// The index, in `0..backends`, of the backend for the next connection.
    fn pick(&self) -> usize;
}

/// Builds the picker `kind` over `backends` backends.
pub fn new_picker(kind: PickerKind, backends: usize) -> Arc<dyn Picker> {
    let _ = (kind, backends);
    unimplemented!("being written")
}
