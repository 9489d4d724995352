//! Boot order (`architecture/contract.md` § Process): connect →
//! configuration (fatal) → held calls → trigger types → functions → bindings
//! → one "ready" line naming what was registered and which bindings are
//! parked. [`Running`] is the handle a booted worker is driven by.

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{register_worker, IIIClient, InitOptions};
use serde_json::Value;

use crate::bindings::plain_bindings;
use crate::config::{self, ApprovalConfig, BootstrapError, ConfigCell, CONFIG_ID};
use crate::engine::{CallError, Engine};
use crate::function_table::{self, FUNCTION_IDS};
use crate::gate::binding::{self as gate_binding, PRE_TRIGGER};
use crate::inbox::timer::Timer;
use crate::inbox::PendingRecord;
use crate::settings::{ApprovalSettings, Known};
use crate::worker::Worker;

/// The worker's registered name (notification workers find the gate by it).
pub const WORKER_NAME: &str = "approval-gate";
/// What the worker does, as shown by `engine::workers::list`.
pub const DESCRIPTION: &str = "Human-in-the-loop approval gate: decides whether each agent function call runs, is denied, or waits for a human";

/// How to start.
#[derive(Debug, Clone)]
pub struct BootOptions {
    /// Engine WebSocket URL.
    pub url: String,
    /// The `--config` seed (used only when nothing is stored).
    pub seed: Option<Value>,
    /// How long to wait for the engine at start-up.
    pub connect_timeout: Duration,
    /// Whether the SDK opens its OpenTelemetry connection.
    pub otel: bool,
}

/// Why boot stopped.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The engine did not answer in time.
    #[error("cannot reach the iii engine at {url} within {secs} s (is it running? set --url or III_URL; --connect-timeout sets the wait)")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// The wait, in seconds.
        secs: u64,
    },
    /// The engine refused the worker (for example a second live worker with
    /// the same name).
    #[error("the engine refused the worker: {0}")]
    Rejected(#[source] iii_sdk::Error),
    /// The pending store could not be read.
    #[error("the pending store (state scopes approval_pending.*) cannot be read: {0}")]
    State(#[source] CallError),
    /// The configuration entry could not be registered or read.
    #[error("configuration entry {CONFIG_ID}: {0}")]
    Configuration(#[from] BootstrapError),
    /// The functions did not become live in time.
    #[error("functions not live after {secs} s: {}", missing.join(", "))]
    NotLive {
        /// The wait, in seconds.
        secs: u64,
        /// The ids still missing.
        missing: Vec<String>,
    },
    /// A call the command needed failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// A running worker: the SDK connection, the shared state and the deadline
/// timer (stopped when this is dropped).
pub struct Running {
    iii: IIIClient,
    worker: Arc<Worker>,
    timer: Timer,
}

impl Running {
    /// Graceful stop: the deadline timer takes no more records, then wait
    /// (bounded) for handlers and expiries in flight, then disconnect.
    pub async fn shutdown(self, drain: Duration) {
        let deadline = tokio::time::Instant::now() + drain;
        self.timer.stop(drain).await;
        while self.worker.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.iii.shutdown_async().await;
    }

    /// The SDK client the worker is connected with.
    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    /// The configuration in effect (the last good value read).
    pub fn config(&self) -> ApprovalConfig {
        self.worker.config.load().config.clone()
    }

    /// How many calls are held.
    pub fn held(&self) -> usize {
        self.worker.inbox.len()
    }

    /// One held call, as the inbox shows it.
    pub fn held_call(&self, session_id: &str, function_call_id: &str) -> Option<PendingRecord> {
        self.worker
            .inbox
            .get(session_id, function_call_id)
            .map(|record| (*record).clone())
    }

    /// The stored settings the gate decides a session with, when the worker
    /// holds them in memory (a session it has seen since boot).
    pub fn stored_settings(&self, session_id: &str) -> Option<ApprovalSettings> {
        match self.worker.settings.cached(session_id)? {
            Known::Stored(stored) => Some(stored.settings.clone()),
            Known::Absent => None,
        }
    }

    /// How many bindings of the worker's trigger types it serves.
    pub fn event_bindings(&self) -> usize {
        self.worker.inbox.events().len()
    }
}

/// Connects an SDK client named `approval-gate` (or `III_WORKER_NAME`) and
/// waits for the engine's handshake.
pub(crate) async fn connect(
    url: &str,
    otel: bool,
    timeout: Duration,
) -> Result<IIIClient, BootError> {
    let metadata = WorkerMetadata {
        name: WORKER_NAME.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        description: Some(DESCRIPTION.to_string()),
        ..WorkerMetadata::default()
    };
    let otel_config = iii_helpers::observability::OtelConfig {
        enabled: Some(otel),
        ..Default::default()
    };
    let iii = register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            otel: Some(otel_config),
            ..InitOptions::default()
        },
    );
    match iii.wait_until_registered(timeout).await {
        Ok(()) => Ok(iii),
        Err(iii_sdk::Error::Timeout) | Err(iii_sdk::Error::NotConnected) => {
            iii.shutdown_async().await;
            Err(BootError::Unreachable {
                url: url.to_string(),
                secs: timeout.as_secs(),
            })
        }
        Err(other) => {
            iii.shutdown_async().await;
            Err(BootError::Rejected(other))
        }
    }
}

/// Boots the worker: connect, configuration, held calls, functions,
/// bindings, ready.
pub async fn boot(options: BootOptions) -> Result<Running, BootError> {
    let iii = connect(&options.url, options.otel, options.connect_timeout).await?;
    match start(&iii, options).await {
        // After the ready line: holds whose deadline passed while the
        // worker was down are acted on at once.
        Ok(worker) => Ok(Running {
            timer: Timer::start(worker.clone()),
            iii,
            worker,
        }),
        Err(err) => {
            iii.shutdown_async().await;
            Err(err)
        }
    }
}

/// Everything after the handshake.
async fn start(iii: &IIIClient, options: BootOptions) -> Result<Arc<Worker>, BootError> {
    let engine = Engine::new(iii.clone());
    let snapshot = config::bootstrap(&engine, options.seed).await?;
    let worker = Worker::new(engine.clone(), ConfigCell::new(snapshot));
    let held = load_pending(&worker).await?;
    match worker.grant_watch.memory.migrate().await {
        Ok(0) => {}
        Ok(moved) => tracing::info!(
            moved,
            "grant-watch ask counters moved to the per-session layout"
        ),
        Err(err) => {
            tracing::warn!(error = %err, "grant-watch ask counters of the first layout not moved; tried again at the next boot")
        }
    }

    worker.inbox.events().register(iii);
    function_table::register_all(&worker);
    let parked = bind_all(&worker).await;
    worker.link_routes.sync(&worker).await;
    let binding = worker
        .gate_binding
        .ensure(&engine, worker.config.load().config.gate_priority)
        .await;

    wait_until_live(&engine, FUNCTION_IDS, Duration::from_secs(15)).await?;
    if let Some(err) = iii.fatal_error() {
        return Err(BootError::Rejected(err));
    }
    let gated = binding.as_ref().is_ok_and(|status| status.gated);
    if let Err(err) = &binding {
        tracing::error!(error = %err, "durable gate binding not made: calls are not gated until it is; retrying");
    }
    tracing::info!(
        url = %options.url,
        functions = FUNCTION_IDS.len(),
        held,
        parked = ?parked,
        gated,
        "approval-gate ready"
    );
    tokio::spawn(crate::gate::guard_binding(worker.clone(), binding));
    tokio::spawn(rebind_on_reconnect(worker.clone()));
    Ok(worker)
}

/// Rebuilds the pending index from state. Retried briefly; a store that
/// cannot be read aborts boot (an empty inbox would hide held calls).
async fn load_pending(worker: &Worker) -> Result<usize, BootError> {
    let mut attempt = 0u64;
    loop {
        match worker.inbox.load().await {
            Ok(n) => return Ok(n),
            Err(err) if attempt < 4 => {
                tracing::warn!(attempt, error = %err, "pending records not loaded; retrying");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
            }
            Err(err) => return Err(BootError::State(err)),
        }
    }
}

/// After the SDK reconnects (an engine restart), what the SDK does not replay
/// is made again: the configuration entry's schema (an engine restarted from
/// its store keeps values but not schemas), a fresh read of the policy, and
/// the durable gate binding is checked at once — an engine that lost it must
/// not run calls ungated.
async fn rebind_on_reconnect(worker: Arc<Worker>) {
    let mut was_connected = true;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let iii = worker.engine.iii();
        let connected = iii.get_connection_state() == IIIConnectionState::Connected;
        if connected && !was_connected {
            // Let the SDK's replay land first.
            tokio::time::sleep(Duration::from_millis(200)).await;
            after_reconnect(&worker).await;
        }
        if !connected && iii.fatal_error().is_some() {
            return;
        }
        was_connected = connected;
    }
}

/// The work [`rebind_on_reconnect`] does once the link is back.
async fn after_reconnect(worker: &Worker) {
    if let Err(err) = config::reregister_schema(&worker.engine).await {
        tracing::warn!(error = %err, "reconnected; configuration schema not registered again");
    }
    if let Err(err) = config::reload(worker).await {
        tracing::error!(error = %err, "reconnected; configuration not re-read, keeping the last good one");
    }
    worker.gate_binding.check_soon();
}

/// Makes the ordinary start-up bindings; returns the trigger types that were
/// absent (their bindings are parked by the engine until a provider appears).
/// The gate's durable binding is made by [`gate_binding`].
async fn bind_all(worker: &Arc<Worker>) -> Vec<String> {
    let present = worker.engine.trigger_type_ids().await.unwrap_or_default();
    let mut parked = Vec::new();
    if !present.iter().any(|t| t == PRE_TRIGGER) {
        tracing::warn!(
            trigger_type = PRE_TRIGGER,
            function_id = crate::gate::ID,
            "trigger_type_not_found: durable gate binding parked until the harness registers the type"
        );
        parked.push(PRE_TRIGGER.to_string());
    }
    for (trigger_type, function_id, config) in plain_bindings() {
        if !present.iter().any(|t| t == trigger_type) {
            tracing::warn!(
                trigger_type,
                function_id,
                "trigger_type_not_found: binding parked until a provider registers the type"
            );
            parked.push(trigger_type.to_string());
        }
        #[allow(deprecated)] // 0.26 removed register_trigger; the engine still speaks it.
        let bound = worker
            .engine
            .iii()
            .register_trigger(RegisterTriggerInput::new(trigger_type, function_id, config));
        if let Err(err) = bound {
            tracing::warn!(trigger_type, function_id, error = %err, "binding failed");
        }
    }
    parked
}

/// Polls `engine::functions::list` until every id is live.
async fn wait_until_live(
    engine: &Engine,
    ids: &[&str],
    timeout: Duration,
) -> Result<(), BootError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let live = engine.function_ids("approval::").await.unwrap_or_default();
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !live.iter().any(|l| l == *id))
            .map(|id| id.to_string())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(BootError::NotLive {
                secs: timeout.as_secs(),
                missing,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `approval-gate unbind`: removes the gate's durable bindings (the only way
/// to uninstall the gate without denying every call); returns how many.
pub async fn unbind(url: &str, otel: bool, timeout: Duration) -> Result<usize, BootError> {
    let iii = connect(url, otel, timeout).await?;
    let result = gate_binding::remove_all(&Engine::new(iii.clone())).await;
    iii.shutdown_async().await;
    Ok(result?)
}
