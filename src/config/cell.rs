//! The reactive configuration cell: what every decision reads, and what the
//! parts that act on a change (the gate's binding guard, the link routes)
//! subscribe to.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use super::Snapshot;

/// The reactive configuration cell: readers take the current snapshot; a
/// reload swaps the whole snapshot at once and publishes it on a
/// [`watch`] channel. Reading clones an `Arc` under the channel's lock, which
/// is held for nothing else and never across an `.await`.
///
/// The cell knows nobody who reacts to a change: whoever must act on one
/// subscribes ([`ConfigCell::subscribe`]) and wakes on the next swap.
///
/// Reloads are serialized by their own async lock so that the last reload to
/// finish is the one that read the newest value (see `reload`). The lock
/// also guards the last good value as last written to state, so an unchanged
/// value is not written again.
#[derive(Debug)]
pub(crate) struct ConfigCell {
    /// The configuration entry this worker follows (`III_CONFIG_NAME`,
    /// default `approval-gate`; contract §27.2).
    id: String,
    current: watch::Sender<Arc<Snapshot>>,
    pub(super) reloading: tokio::sync::Mutex<Persisted>,
}

/// The last good configuration as this instance last wrote it to state.
#[derive(Debug, Default)]
pub(crate) struct Persisted(pub(super) Option<Value>);

impl ConfigCell {
    /// A cell of the default entry holding `snapshot`.
    #[cfg(test)]
    pub(crate) fn new(snapshot: Snapshot) -> ConfigCell {
        ConfigCell::named(super::CONFIG_ID, snapshot)
    }

    /// A cell of the entry `id` holding `snapshot`.
    pub(crate) fn named(id: impl Into<String>, snapshot: Snapshot) -> ConfigCell {
        ConfigCell {
            id: id.into(),
            current: watch::Sender::new(Arc::new(snapshot)),
            reloading: tokio::sync::Mutex::new(Persisted::default()),
        }
    }

    /// The configuration entry's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The current snapshot.
    pub(crate) fn load(&self) -> Arc<Snapshot> {
        self.current.borrow().clone()
    }

    /// A receiver that wakes on every swap after this call (the snapshot
    /// in force now counts as seen). Never hold its `borrow()` across an
    /// `.await`: a reload would wait for it.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.current.subscribe()
    }

    /// Replaces the snapshot and wakes every subscriber.
    pub(crate) fn store(&self, snapshot: Snapshot) {
        self.current.send_replace(Arc::new(snapshot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ApprovalConfig;
    use crate::terms::Mode;

    #[tokio::test]
    async fn a_subscriber_wakes_on_a_swap_and_sees_the_new_snapshot() {
        let cell = ConfigCell::new(Snapshot::compile(ApprovalConfig::default()));
        let mut changes = cell.subscribe();
        assert!(!changes.has_changed().unwrap());
        let auto = ApprovalConfig {
            default_mode: Mode::Auto,
            ..ApprovalConfig::default()
        };
        cell.store(Snapshot::compile(auto));
        changes.changed().await.unwrap();
        assert_eq!(changes.borrow_and_update().config.default_mode, Mode::Auto);
        assert_eq!(cell.load().config.default_mode, Mode::Auto);
        assert!(!changes.has_changed().unwrap());
    }
}
