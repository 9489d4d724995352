//! Reading the entry: at boot ([`bootstrap`]: seed, backfill, fetch), on
//! every `configuration:updated` event (`approval::on-config-change`,
//! [`reload`]) and after a reconnect ([`reregister_schema`]).
//! See `architecture/contract.md` § Configuration.
//!
//! A reload never trusts the event payload: it re-reads the entry with
//! `configuration::get`, validates, compiles and swaps the whole snapshot. An
//! invalid value keeps the last good snapshot and logs an ERROR.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde_json::{json, Value};

use super::{schema, ApprovalConfig, ConfigError, Snapshot, CONFIG_ID};
use crate::engine::{CallError, Engine, Entry, ErrorCode};
use crate::functions::{register_shaped, Ack};
use crate::worker::Worker;

/// `approval::on-config-change`.
pub(crate) const ID: &str = "approval::on-config-change";

/// The entry's display name and description.
const NAME: &str = "Approval gate";
const DESCRIPTION: &str =
    "Policy for the approval gate: default mode, rules, folder-access re-ask limit.";

/// Why the entry could not be read at boot (boot stops).
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// A configuration call failed.
    #[error("{step} failed: {source}")]
    Call {
        /// The step (`configuration::get`, `configuration::register`, ...).
        step: &'static str,
        /// Why.
        source: CallError,
    },
    /// The stored value does not have the entry's shape.
    #[error("stored value is invalid: {0}")]
    Invalid(#[from] ConfigError),
}

/// Why a reload kept the previous snapshot.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    /// `configuration::get` failed.
    #[error("configuration::get {CONFIG_ID} failed: {0}")]
    Fetch(#[source] CallError),
    /// The value does not fit the configuration's shape.
    #[error("configuration {CONFIG_ID} is invalid: {0}")]
    Invalid(#[source] ConfigError),
}

fn entry(schema: &Value) -> Entry<'_> {
    Entry {
        id: CONFIG_ID,
        name: NAME,
        description: DESCRIPTION,
        schema,
    }
}

/// Seeds, backfills and fetches the entry (boot): when nothing is stored,
/// register with the seed (or the built-in defaults) as `initial_value`;
/// otherwise register without one (registering with one overwrites) and add
/// the default `rules` if the stored object has none — to the raw template,
/// so `${NAME}` references survive.
pub(crate) async fn bootstrap(
    engine: &Engine,
    seed: Option<Value>,
) -> Result<Snapshot, BootstrapError> {
    let fatal = |step: &'static str| move |source: CallError| BootstrapError::Call { step, source };
    let schema = schema();
    let stored = match engine.configuration_get(CONFIG_ID, true).await {
        Ok(Value::Null) => None,
        Ok(value) => Some(value),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(fatal("configuration::get")(e)),
    };
    match stored {
        None => {
            let initial = seed.unwrap_or_else(ApprovalConfig::defaults_json);
            with_retries(|| engine.configuration_register(entry(&schema), Some(&initial)))
                .await
                .map_err(fatal("configuration::register"))?;
            tracing::info!("configuration entry seeded");
        }
        Some(value) => {
            with_retries(|| engine.configuration_register(entry(&schema), None))
                .await
                .map_err(fatal("configuration::register"))?;
            if let Value::Object(map) = &value {
                if !map.contains_key("rules") {
                    let mut merged = map.clone();
                    merged.insert("rules".into(), json!(crate::policy::default_rules()));
                    engine
                        .configuration_set(CONFIG_ID, &Value::Object(merged))
                        .await
                        .map_err(fatal("configuration::set (rules backfill)"))?;
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
        match engine.configuration_get(CONFIG_ID, false).await {
            Ok(value) => break value,
            Err(e) if attempt < 5 && e.code != ErrorCode::SchemaInvalid => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "configuration not readable yet; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(fatal("configuration::get")(e)),
        }
    };
    let snapshot = Snapshot::compile(ApprovalConfig::from_value(&value)?);
    report_rule_errors(&snapshot);
    Ok(snapshot)
}

/// Retries a boot-time configuration call a few times on errors that may be
/// passing (an adapter's I/O error, a timeout); definite answers such as
/// `NOT_FOUND` or `SCHEMA_INVALID` are returned at once. Bounded: about two
/// seconds.
async fn with_retries<F, Fut>(mut f: F) -> Result<Value, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Value, CallError>>,
{
    let mut attempt = 0u64;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < 3 && !e.is_definite() => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "configuration call failed; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Registers the entry's schema again without a value (an engine restarted
/// from its store keeps values but not schemas).
pub(crate) async fn reregister_schema(engine: &Engine) -> Result<(), CallError> {
    let schema = schema();
    with_retries(|| engine.configuration_register(entry(&schema), None))
        .await
        .map(|_| ())
}

fn report_rule_errors(snapshot: &Snapshot) {
    for err in &snapshot.rule_errors {
        tracing::error!(error = %err, "rule does not compile or one of its examples failed; the rule set falls back to empty (every call reaching the rules holds)");
    }
    for err in &snapshot.guard_errors {
        tracing::error!(error = %err, "human_only_extra glob does not compile; it guards its exact text");
    }
    for err in &snapshot.link_errors {
        tracing::error!(error = %err, "links cannot be used; approval links are off");
    }
}

/// Re-reads, validates and swaps the configuration snapshot.
pub(crate) async fn reload(worker: &Worker) -> Result<(), ReloadError> {
    let _serial = worker.config.reloading.lock().await;
    let value = worker
        .engine
        .configuration_get(CONFIG_ID, false)
        .await
        .map_err(ReloadError::Fetch)?;
    let config = ApprovalConfig::from_value(&value).map_err(ReloadError::Invalid)?;
    let snapshot = Snapshot::compile(config);
    report_rule_errors(&snapshot);
    tracing::info!(
        rules = snapshot.config.rules.len(),
        default_mode = snapshot.config.default_mode.as_str(),
        grant_reask_limit = snapshot.config.grant_reask_limit,
        links = snapshot.links.is_some(),
        "configuration loaded"
    );
    worker.config.store(snapshot);
    // `gate_priority` may have changed: the binding is replaced at once.
    worker.gate_binding.check_soon();
    // `links` may have been switched on or off.
    worker.link_routes.sync(worker).await;
    Ok(())
}

/// A `configuration` change event; the worker re-reads the entry rather
/// than trust it.
// Only a schema: the handler takes the payload as raw JSON and ignores it.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(crate) struct ConfigurationEvent {
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
pub(crate) fn register(worker: &Arc<Worker>) {
    register_shaped::<ConfigurationEvent, _, _, _>(
        worker,
        ID,
        "Internal (configuration trigger): re-reads the approval-gate entry and swaps the compiled policy.",
        |w, _event: Value| async move {
            if let Err(err) = reload(&w).await {
                tracing::error!(error = %err, "configuration reload failed; keeping the last good configuration");
            }
            Ok(Ack { ok: true })
        },
    );
}
