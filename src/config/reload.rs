//! Reading the entry: at boot ([`bootstrap`]: seed, backfill, fetch), on
//! every `configuration:updated` event (`approval::on-config-change`,
//! [`reload`]) and after a reconnect ([`reregister_schema`]).
//! See `architecture/contract.md` § Configuration.
//!
//! A reload never trusts the event payload: it re-reads the entry with
//! `configuration::get`, validates, compiles and swaps the whole snapshot. An
//! invalid value, or one whose rules do not all compile, keeps the snapshot in
//! force whole and logs an ERROR (with the rules' indexes); a value whose
//! rules compile is kept in state as the last good one ([`last_good`]).
//!
//! Nothing here acts on a change: the cell publishes each new snapshot, and
//! the gate's binding guard and the link routes follow it themselves.

use std::future::Future;
use std::time::Duration;

use serde_json::{json, Value};

use super::cell::ConfigCell;
use super::{last_good, schema, ApprovalConfig, ConfigError, Snapshot, CONFIG_ID};
use crate::engine::{CallError, Engine, Entry, ErrorCode};

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

/// Seeds, backfills and fetches the entry (boot), then puts it in force in
/// `cell`: when nothing is stored, register with the seed (or the built-in
/// defaults) as `initial_value`; otherwise register without one (registering
/// with one overwrites) and add the default `rules` if the stored object has
/// none — to the raw template, so `${NAME}` references survive.
///
/// A stored value whose rules do not compile is not used: the last good one
/// kept in state is, or, with none, the gate runs in lockdown.
pub(crate) async fn bootstrap(
    engine: &Engine,
    cell: &ConfigCell,
    seed: Option<Value>,
) -> Result<(), BootstrapError> {
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
    let config = ApprovalConfig::from_value(&value)?;
    let mut persisted = cell.reloading.lock().await;
    let snapshot = match Snapshot::try_compile(config) {
        Ok(good) => {
            last_good::write(engine, &mut persisted, &good.config).await;
            good
        }
        Err(refused) => match last_good::read(engine).await {
            Some(kept) => kept.keeping(refused.rule_errors),
            None => Snapshot::lockdown(refused.rule_errors),
        },
    };
    report(&snapshot);
    cell.store(snapshot);
    Ok(())
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

/// Logs what is wrong with the configuration just read, and what is in force.
fn report(snapshot: &Snapshot) {
    let in_force = if snapshot.lockdown {
        "no configuration whose rules compile is known: the gate runs in lockdown (every call held, human-only calls denied) until one is stored"
    } else {
        "the value is refused whole: the previous configuration stays in force (rules, precedence, modes, every field)"
    };
    for err in &snapshot.rule_errors {
        tracing::error!(rule = err.index, error = %err, "rule does not compile or one of its examples failed; {in_force}");
    }
    if snapshot.lockdown && snapshot.rule_errors.is_empty() {
        tracing::error!("{in_force}");
    }
    for err in &snapshot.guard_errors {
        tracing::error!(error = %err, "human_only_extra glob does not compile; it guards its exact text");
    }
    for err in &snapshot.link_errors {
        tracing::error!(error = %err, "links cannot be used as configured");
    }
    tracing::info!(
        rules = snapshot.config.rules.len(),
        default_mode = snapshot.config.default_mode.as_str(),
        grant_reask_limit = snapshot.config.grant_reask_limit,
        links = snapshot.links.is_some(),
        lockdown = snapshot.lockdown,
        refused = !snapshot.rule_errors.is_empty(),
        "configuration in force"
    );
}

/// Re-reads the entry into `cell`: a value whose rules compile replaces the
/// snapshot and is kept as the last good one; one whose rules do not keeps
/// the snapshot in force (or lockdown) and reports its errors.
pub(crate) async fn reload(engine: &Engine, cell: &ConfigCell) -> Result<(), ReloadError> {
    let mut persisted = cell.reloading.lock().await;
    let value = engine
        .configuration_get(CONFIG_ID, false)
        .await
        .map_err(ReloadError::Fetch)?;
    let config = ApprovalConfig::from_value(&value).map_err(ReloadError::Invalid)?;
    let snapshot = Snapshot::succeed(&cell.load(), config);
    report(&snapshot);
    let good =
        (snapshot.rule_errors.is_empty() && !snapshot.lockdown).then(|| snapshot.config.clone());
    cell.store(snapshot);
    if let Some(config) = good {
        last_good::write(engine, &mut persisted, &config).await;
    }
    Ok(())
}
