//! The reactive configuration cell: what every decision reads.

use std::sync::{Arc, RwLock};

use super::Snapshot;

/// The reactive configuration cell: readers take the current snapshot; a
/// reload swaps the whole snapshot at once. The lock is held only to clone
/// or replace an `Arc`, never across an `.await`.
///
/// Reloads are serialized by their own async lock so that the last reload to
/// finish is the one that read the newest value (see [`reload`]).
#[derive(Debug)]
pub(crate) struct ConfigCell {
    current: RwLock<Arc<Snapshot>>,
    pub(super) reloading: tokio::sync::Mutex<()>,
}

impl ConfigCell {
    /// A cell holding `snapshot`.
    pub(crate) fn new(snapshot: Snapshot) -> ConfigCell {
        ConfigCell {
            current: RwLock::new(Arc::new(snapshot)),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// The current snapshot.
    pub(crate) fn load(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the snapshot.
    pub(crate) fn store(&self, snapshot: Snapshot) {
        let next = Arc::new(snapshot);
        match self.current.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}
