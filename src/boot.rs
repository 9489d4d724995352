//! Boot order (contract §10): connect → configuration (fatal) → trigger types
//! → functions → bindings → one "ready" line naming what was registered and
//! which bindings are parked.

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::{register_worker, IIIClient, InitOptions};
use serde_json::{json, Value};

use crate::client::{CallError, Sibling};
use crate::config::{schema, ApprovalConfig, ConfigCell, Snapshot, CONFIG_ID};
use crate::functions::{self, FUNCTION_IDS};
use crate::settings::store::SETTINGS_SCOPE;
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
    /// The engine refused the worker.
    #[error("the engine refused the worker: {0}")]
    Rejected(String),
    /// The pending store could not be read.
    #[error("the pending store (state scope approval_pending) cannot be read: {0}")]
    State(String),
    /// The configuration entry could not be registered or read.
    #[error("configuration entry {CONFIG_ID}: {0}")]
    Configuration(String),
}

/// A running worker.
pub struct Running {
    /// The SDK client.
    pub iii: IIIClient,
    /// The shared state.
    pub worker: Arc<Worker>,
}

impl Running {
    /// Graceful stop: wait (bounded) for handlers in flight, then disconnect.
    pub async fn shutdown(self, drain: Duration) {
        let deadline = tokio::time::Instant::now() + drain;
        while self.worker.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.iii.shutdown_async().await;
    }
}

/// Connects an SDK client named `approval-gate` (or `III_WORKER_NAME`) and
/// waits for the engine's handshake.
pub async fn connect(url: &str, otel: bool, timeout: Duration) -> Result<IIIClient, BootError> {
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
            Err(BootError::Rejected(other.to_string()))
        }
    }
}

/// Seeds, backfills and fetches the configuration entry (contract §9).
pub async fn bootstrap_config(
    sibling: &Sibling,
    seed: Option<Value>,
) -> Result<Snapshot, BootError> {
    let fatal = |what: &str, e: CallError| BootError::Configuration(format!("{what} failed: {e}"));
    let schema = schema();
    let (name, description) = entry_texts();
    let stored = match sibling.configuration_get(CONFIG_ID, true).await {
        Ok(Value::Null) => None,
        Ok(value) => Some(value),
        Err(e) if e.code == "NOT_FOUND" => None,
        Err(e) => return Err(fatal("configuration::get", e)),
    };
    match stored {
        None => {
            let initial = seed.unwrap_or_else(ApprovalConfig::defaults_json);
            with_retries(|| {
                sibling.configuration_register(
                    CONFIG_ID,
                    name,
                    description,
                    &schema,
                    Some(&initial),
                )
            })
            .await
            .map_err(|e| fatal("configuration::register", e))?;
            tracing::info!("configuration entry seeded");
        }
        Some(value) => {
            with_retries(|| {
                sibling.configuration_register(CONFIG_ID, name, description, &schema, None)
            })
            .await
            .map_err(|e| fatal("configuration::register", e))?;
            if let Value::Object(map) = &value {
                if !map.contains_key("rules") {
                    let mut merged = map.clone();
                    merged.insert("rules".into(), json!(crate::policy::default_rules()));
                    sibling
                        .configuration_set(CONFIG_ID, &Value::Object(merged))
                        .await
                        .map_err(|e| fatal("configuration::set (rules backfill)", e))?;
                    tracing::info!("configuration entry had no rules; default rules added");
                }
            }
        }
    }
    // The real engine may answer NOT_FOUND for a moment right after a
    // register (its store applies the write asynchronously): the read after
    // our own register retries that too.
    let mut attempt = 0u64;
    let value = loop {
        match sibling.configuration_get(CONFIG_ID, false).await {
            Ok(value) => break value,
            Err(e) if attempt < 5 && e.code != "SCHEMA_INVALID" => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "configuration not readable yet; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(fatal("configuration::get", e)),
        }
    };
    let config = ApprovalConfig::from_value(&value)
        .map_err(|e| BootError::Configuration(format!("stored value is invalid: {e}")))?;
    let snapshot = Snapshot::compile(config);
    for err in &snapshot.rule_errors {
        tracing::error!(error = %err, "rule does not compile; the rule set falls back to empty (every call reaching the rules holds)");
    }
    Ok(snapshot)
}

/// Retries a boot-time configuration call a few times on errors that may be
/// passing (an adapter's I/O error, a timeout); answers such as `NOT_FOUND` or
/// `SCHEMA_INVALID` are returned at once. Bounded: about two seconds.
async fn with_retries<F, Fut>(mut f: F) -> Result<Value, CallError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Value, CallError>>,
{
    let mut attempt = 0u64;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e)
                if attempt < 3
                    && !matches!(
                        e.code.as_str(),
                        "NOT_FOUND" | "SCHEMA_INVALID" | "NOT_REGISTERED"
                    ) =>
            {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "configuration call failed; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Boots the worker: connect, configuration, functions, bindings, ready.
pub async fn boot(options: BootOptions) -> Result<Running, BootError> {
    let iii = connect(&options.url, options.otel, options.connect_timeout).await?;
    let sibling = Sibling::new(iii.clone());
    let snapshot = match bootstrap_config(&sibling, options.seed.clone()).await {
        Ok(snapshot) => snapshot,
        Err(err) => {
            iii.shutdown_async().await;
            return Err(err);
        }
    };
    let worker = Worker::new(sibling.clone(), Arc::new(ConfigCell::new(snapshot)));
    match worker.settings.load().await {
        Ok(n) => tracing::debug!(sessions = n, "settings view loaded"),
        Err(err) => {
            tracing::warn!(error = %err, "settings view not loaded; sessions use defaults until they are written")
        }
    }
    let held = match load_pending(&worker).await {
        Ok(n) => n,
        Err(err) => {
            iii.shutdown_async().await;
            return Err(err);
        }
    };

    worker.subscriptions.register(&iii);
    functions::register_all(&worker);
    let parked = bind_all(&worker).await;

    if let Err(err) = wait_until_live(&sibling, FUNCTION_IDS, Duration::from_secs(15)).await {
        iii.shutdown_async().await;
        return Err(err);
    }
    if let Some(err) = iii.fatal_error() {
        iii.shutdown_async().await;
        return Err(BootError::Rejected(err.to_string()));
    }
    tracing::info!(
        url = %options.url,
        functions = FUNCTION_IDS.len(),
        held,
        parked = ?parked,
        "approval-gate ready"
    );
    tokio::spawn(rebind_on_reconnect(worker.clone()));
    Ok(Running { iii, worker })
}

/// The gate's hook type.
pub const PRE_TRIGGER: &str = "harness::hook::pre-trigger";
/// The gate's function.
pub const GATE_FUNCTION: &str = "approval::gate";

/// The gate's binding config (contract §8): every call, fail closed.
pub fn gate_binding_config() -> Value {
    json!({"timeout_ms": 5000, "on_error": "fail_closed"})
}

/// Rebuilds the pending index from state. Retried briefly; a store that
/// cannot be read aborts boot (an empty inbox would hide held calls).
async fn load_pending(worker: &Worker) -> Result<usize, BootError> {
    let mut last = None;
    for attempt in 0..5u64 {
        match worker.pending.load().await {
            Ok(n) => return Ok(n),
            Err(err) => {
                tracing::warn!(attempt, error = %err, "pending records not loaded; retrying");
                last = Some(err);
                tokio::time::sleep(Duration::from_millis(500 * (attempt + 1))).await;
            }
        }
    }
    Err(BootError::State(
        last.map(|e| e.to_string()).unwrap_or_default(),
    ))
}

/// Makes sure exactly one durable binding of the gate exists with the
/// contract's config: reuses a matching one, removes the others.
pub async fn ensure_gate_binding(sibling: &Sibling) -> Result<String, CallError> {
    let desired = gate_binding_config();
    let mut keep: Option<String> = None;
    for trigger in sibling.registered_triggers().await? {
        let is_gate = trigger.get("function_id").and_then(Value::as_str) == Some(GATE_FUNCTION)
            && trigger.get("trigger_type").and_then(Value::as_str) == Some(PRE_TRIGGER);
        if !is_gate {
            continue;
        }
        let id = trigger
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if keep.is_none() && trigger.get("config") == Some(&desired) {
            keep = Some(id);
        } else if !id.is_empty() {
            tracing::info!(id, "removing a stale or duplicate durable gate binding");
            sibling.unregister_durable_trigger(&id).await?;
        }
    }
    match keep {
        Some(id) => Ok(id),
        None => {
            sibling
                .register_durable_trigger(PRE_TRIGGER, GATE_FUNCTION, &desired)
                .await
        }
    }
}

/// After the SDK reconnects (an engine restart), what the SDK does not replay
/// is made again: the configuration entry's schema (an engine restarted from
/// its store keeps values but not schemas), a fresh read of the policy, and
/// the durable gate binding — an engine that lost it must not run calls
/// ungated.
async fn rebind_on_reconnect(worker: Arc<Worker>) {
    use iii_sdk::runtime::IIIConnectionState;
    let mut was_connected = true;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let connected =
            worker.sibling.iii().get_connection_state() == IIIConnectionState::Connected;
        if connected && !was_connected {
            // Let the SDK's replay land first.
            tokio::time::sleep(Duration::from_millis(200)).await;
            after_reconnect(&worker).await;
        }
        if !connected && worker.sibling.iii().fatal_error().is_some() {
            return;
        }
        was_connected = connected;
    }
}

/// The work [`rebind_on_reconnect`] does once the link is back.
pub async fn after_reconnect(worker: &Worker) {
    let (name, description) = entry_texts();
    let schema = schema();
    if let Err(err) = with_retries(|| {
        worker
            .sibling
            .configuration_register(CONFIG_ID, name, description, &schema, None)
    })
    .await
    {
        tracing::warn!(error = %err, "reconnected; configuration schema not registered again");
    }
    if let Err(err) = crate::functions::config_change::reload(worker).await {
        tracing::error!(error = %err, "reconnected; configuration not re-read, keeping the last good one");
    }
    match ensure_gate_binding(&worker.sibling).await {
        Ok(id) => tracing::info!(id, "reconnected; durable gate binding checked"),
        Err(err) => tracing::warn!(error = %err, "reconnected; durable gate binding not checked"),
    }
}

/// The entry's display name and description.
fn entry_texts() -> (&'static str, &'static str) {
    (
        "Approval gate",
        "Policy for the approval gate: default mode, rules, folder-access re-ask limit.",
    )
}

/// The ordinary (non-durable) bindings of the worker: `(type, function, config)`.
fn plain_bindings() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "harness::hook::post-trigger",
            "approval::grant-watch",
            json!({"functions": ["shell::*", "coder::*"], "timeout_ms": 5000, "on_error": "fail_open"}),
        ),
        (
            "harness::turn-completed",
            "approval::on-turn-completed",
            json!({}),
        ),
        (
            "session::deleted",
            "approval::on-session-deleted",
            json!({}),
        ),
        (
            "configuration",
            "approval::on-config-change",
            json!({"configuration_id": CONFIG_ID, "event_types": ["configuration:updated"]}),
        ),
        (
            "state",
            "approval::on-settings-change",
            json!({"scope": SETTINGS_SCOPE}),
        ),
    ]
}

/// Makes the start-up bindings; returns the trigger types that were absent
/// (their bindings are parked by the engine until a provider appears).
async fn bind_all(worker: &Arc<Worker>) -> Vec<String> {
    let present = worker.sibling.trigger_type_ids().await.unwrap_or_default();
    let mut parked = Vec::new();
    if !present.iter().any(|t| t == PRE_TRIGGER) {
        tracing::warn!(
            trigger_type = PRE_TRIGGER,
            function_id = GATE_FUNCTION,
            "trigger_type_not_found: durable gate binding parked until the harness registers the type"
        );
        parked.push(PRE_TRIGGER.to_string());
    }
    match ensure_gate_binding(&worker.sibling).await {
        Ok(id) => tracing::debug!(id, "durable gate binding in place"),
        Err(err) => {
            tracing::error!(error = %err, "durable gate binding failed: calls are not gated until it is made")
        }
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
            .sibling
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
    sibling: &Sibling,
    ids: &[&str],
    timeout: Duration,
) -> Result<(), BootError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let live = sibling.function_ids("approval::").await.unwrap_or_default();
        let missing: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !live.iter().any(|l| l == id))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(BootError::Rejected(format!(
                "functions not live after {} s: {}",
                timeout.as_secs(),
                missing.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
