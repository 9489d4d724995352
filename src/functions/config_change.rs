//! `approval::on-config-change`: the reactive reload (contract §9). The event
//! payload is ignored; the entry is re-read with `configuration::get`,
//! validated, compiled and swapped atomically. An invalid value keeps the
//! last good snapshot and logs an ERROR.

use std::sync::Arc;

use schemars::JsonSchema;
use serde_json::Value;

use super::register_shaped;
use super::settings::Ack;
use crate::config::{ApprovalConfig, Snapshot, CONFIG_ID};
use crate::worker::Worker;

/// Why a reload kept the previous snapshot.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// `configuration::get` failed.
    #[error("configuration::get {CONFIG_ID} failed: {0}")]
    Fetch(String),
    /// The value does not fit the configuration's shape.
    #[error("configuration {CONFIG_ID} is invalid: {0}")]
    Invalid(String),
}

/// Re-reads, validates and swaps the configuration snapshot.
pub async fn reload(worker: &Worker) -> Result<(), ReloadError> {
    let _serial = worker.reload_lock.lock().await;
    let value = worker
        .sibling
        .configuration_get(CONFIG_ID, false)
        .await
        .map_err(|e| ReloadError::Fetch(e.to_string()))?;
    let config = ApprovalConfig::from_value(&value).map_err(ReloadError::Invalid)?;
    let snapshot = Snapshot::compile(config);
    for err in &snapshot.rule_errors {
        tracing::error!(error = %err, "rule does not compile; the rule set falls back to empty (every call reaching the rules holds)");
    }
    tracing::info!(
        rules = snapshot.config.rules.len(),
        default_mode = snapshot.config.default_mode.as_str(),
        grant_reask_limit = snapshot.config.grant_reask_limit,
        "configuration loaded"
    );
    worker.config.store(snapshot);
    Ok(())
}

/// A `configuration` change event; the worker re-reads the entry rather
/// than trust it.
// Only a schema: the handler takes the payload as raw JSON and ignores it.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct ConfigurationEvent {
    /// Always `configuration`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `configuration:registered`, `configuration:updated` or `configuration:deleted`.
    pub event_type: Option<String>,
    /// The entry's id (`approval-gate`).
    pub id: Option<String>,
    /// The value before the change.
    pub old_value: Option<Value>,
    /// The value after the change.
    pub new_value: Option<Value>,
}

/// Registers `approval::on-config-change`.
pub fn register(worker: &Arc<Worker>) {
    register_shaped::<ConfigurationEvent, _, _, _>(
        worker,
        "approval::on-config-change",
        "Internal (configuration trigger): re-reads the approval-gate entry and swaps the compiled policy.",
        |w, _event: Value| async move {
            if let Err(err) = reload(&w).await {
                tracing::error!(error = %err, "configuration reload failed; keeping the last good configuration");
            }
            Ok(Ack { ok: true })
        },
    );
}
