//! What the four surfaces share: one value, built at boot, handed to every
//! handler in an `Arc`. Each part owns its own locks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::bindings::durable::{DurableBinding, GATE, WATCH};
use crate::config::cell::ConfigCell;
use crate::engine::Engine;
use crate::folders::Folders;
use crate::pending::PendingStore;
use crate::provenance::Callers;
use crate::release::Releaser;
use crate::review::Reviews;
use crate::settings::store::SettingsStore;

/// Shared state of the running worker.
pub(crate) struct Worker {
    /// Typed access to the engine and sibling workers.
    pub(crate) engine: Engine,
    /// The reactive configuration cell.
    pub(crate) config: Arc<ConfigCell>,
    /// Per-session settings and their in-memory view.
    pub(crate) settings: Arc<SettingsStore>,
    /// Held calls: state plus the in-memory index; announces them.
    pub(crate) pending: Arc<PendingStore>,
    /// Folder access: the grant watch's memory, the harness's grants,
    /// revokes to retry.
    pub(crate) folders: Arc<Folders>,
    /// The one release path every decision takes.
    pub(crate) releaser: Arc<Releaser>,
    /// The reviewer's memory (recent verdicts, breakers, reviewed calls,
    /// counts); the release path shares it.
    pub(crate) reviews: Arc<Reviews>,
    /// Callers' worker names, looked up once per worker id.
    pub(crate) callers: Callers,
    /// The gate's durable binding, as last checked.
    pub(crate) gate_binding: DurableBinding,
    /// The folder-access watch's durable binding, as last checked.
    pub(crate) watch_binding: DurableBinding,
    /// When the worker booted.
    pub(crate) started: std::time::Instant,
    /// How it came to hold the worker name (stood by first or not).
    pub(crate) tenure: Tenure,
    /// Reads command fields off the hook's thread, under a budget (the
    /// command model's containment pool).
    pub(crate) commands: crate::shell::Reader,
    /// The parents the harness's turn events named (§27.3).
    pub(crate) lineage: crate::lineage::Lineage,
    /// The reconciles with the harness: one pass at a time, `null`s read
    /// twice (§27.4).
    pub(crate) reconciles: Reconciles,
    /// The one-shot grants humans' edits leave (contract §28).
    pub(crate) edits: Arc<crate::edits::store::EditStore>,
    in_flight: AtomicUsize,
}

impl Worker {
    /// Builds the shared state around `pending`, which boot may have filled
    /// already (the held calls are read while the worker name is confirmed).
    pub(crate) fn new(
        engine: Engine,
        config: Arc<ConfigCell>,
        tenure: Tenure,
        pending: Arc<PendingStore>,
        reconcile_age: Duration,
    ) -> Arc<Worker> {
        let settings = Arc::new(SettingsStore::new(engine.clone(), config.clone()));
        let folders = Arc::new(Folders::new(engine.clone()));
        let edits = Arc::new(crate::edits::store::EditStore::new(engine.clone()));
        let releaser = Releaser::new(
            engine.clone(),
            pending.clone(),
            settings.clone(),
            folders.clone(),
            config.clone(),
            edits.clone(),
        );
        Arc::new(Worker {
            reviews: releaser.reviews().clone(),
            callers: Callers::new(engine.clone()),
            settings,
            pending,
            folders,
            releaser,
            gate_binding: DurableBinding::new(GATE),
            watch_binding: DurableBinding::new(WATCH),
            started: std::time::Instant::now(),
            tenure,
            engine,
            config,
            commands: crate::shell::Reader::new(crate::shell::Limits::default()),
            lineage: crate::lineage::Lineage::default(),
            reconciles: Reconciles::new(reconcile_age),
            edits,
            in_flight: AtomicUsize::new(0),
        })
    }

    /// Marks a handler as running until the guard drops (graceful shutdown
    /// waits for these).
    pub(crate) fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Handlers running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// Guard of one running handler.
pub(crate) struct InFlight(Arc<Worker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How this instance came to hold the worker name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tenure {
    /// `Some(time spent waiting)` when another live instance held the name
    /// at the first attempt and this one took over when it came free.
    pub(crate) stood_by: Option<Duration>,
}

impl Tenure {
    /// `standby` or `primary`, as the ready line says it.
    pub(crate) fn started_as(&self) -> &'static str {
        if self.stood_by.is_some() {
            "standby"
        } else {
            "primary"
        }
    }
}

/// The reconciles of a worker: one pass at a time, requests that arrive
/// before a pass starts joining it, and the sessions `harness::status`
/// answered `null` for, waiting for their second read.
#[derive(Debug)]
pub(crate) struct Reconciles {
    /// How old a record must be before a pass may remove it, and how long
    /// after a first `null` the second read comes: twice the harness's hook
    /// timeout (`BootOptions::reconcile_age`).
    pub(crate) age: Duration,
    /// A pass is asked for and has not started.
    pub(crate) queued: std::sync::atomic::AtomicBool,
    /// One pass at a time.
    pub(crate) running: tokio::sync::Mutex<()>,
    /// `harness::ready` arrived: the harness has booted, so a `null` is
    /// worth reading again (a booting harness may answer `null` for
    /// sessions it has not loaded).
    pub(crate) ready: std::sync::atomic::AtomicBool,
    /// Sessions read `null`, waiting for their second read.
    pub(crate) rechecking: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Reconciles {
    /// No pass asked for yet, before `harness::ready`, records younger than
    /// `age` left alone.
    pub(crate) fn new(age: Duration) -> Reconciles {
        Reconciles {
            age,
            queued: Default::default(),
            running: Default::default(),
            ready: Default::default(),
            rechecking: Default::default(),
        }
    }

    pub(crate) fn rechecking(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.rechecking.lock().unwrap_or_else(|e| e.into_inner())
    }
}
