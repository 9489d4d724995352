//! The worker's shared state: what the four surfaces share. One value, built
//! at boot, handed to every handler in an `Arc`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::client::Sibling;
use crate::config::ConfigCell;
use crate::pending::store::PendingStore;
use crate::settings::store::SettingsStore;
use crate::subscriptions::Subscriptions;

/// Shared state of the running worker.
pub struct Worker {
    /// Typed access to the engine and sibling workers.
    pub sibling: Sibling,
    /// The reactive configuration cell.
    pub config: Arc<ConfigCell>,
    /// Per-session settings and their in-memory view.
    pub settings: SettingsStore,
    /// Held calls: state plus the in-memory index.
    pub pending: PendingStore,
    /// Bindings of the pending-created / pending-resolved trigger types.
    pub subscriptions: Arc<Subscriptions>,
    /// Serializes read-merge-writes of the denied-dirs lists.
    pub grant_lock: tokio::sync::Mutex<()>,
    /// Serializes read-merge-writes of the shell's configuration.
    pub shell_config_lock: tokio::sync::Mutex<()>,
    /// Serializes configuration reloads so the last one to finish read the
    /// newest value.
    pub reload_lock: tokio::sync::Mutex<()>,
    in_flight: AtomicUsize,
}

impl Worker {
    /// Builds the shared state.
    pub fn new(sibling: Sibling, config: Arc<ConfigCell>) -> Arc<Worker> {
        Arc::new(Worker {
            settings: SettingsStore::new(sibling.clone(), config.clone()),
            pending: PendingStore::new(sibling.clone()),
            subscriptions: Arc::new(Subscriptions::default()),
            grant_lock: tokio::sync::Mutex::new(()),
            shell_config_lock: tokio::sync::Mutex::new(()),
            sibling,
            config,
            reload_lock: tokio::sync::Mutex::new(()),
            in_flight: AtomicUsize::new(0),
        })
    }

    /// Marks a handler as running until the guard drops (graceful shutdown
    /// waits for these).
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Handlers running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// Guard of one running handler.
pub struct InFlight(Arc<Worker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}
