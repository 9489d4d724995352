//! Reading the entry: at boot ([`bootstrap`]: seed, backfill, fetch), on
//! every `configuration:updated` event (`approval::on-config-change`,
//! [`reload`]) and after a reconnect ([`reregister_schema`]).
//! See `architecture/contract.md` § Configuration.
//!
//! A reload never trusts the event payload: it re-reads the entry with
//! `configuration::get`, validates, compiles and swaps the whole snapshot. A
//! value that cannot be used whole — it does not parse, the engine finds it
//! does not fit the schema, a rule does not compile, a field cannot be used
//! (contract §21.1, §26.2) — keeps the snapshot in force whole, is reported
//! (ERROR logs, `health.config`, `approval::evaluate`); at boot it starts
//! the worker from the last good value, or in lockdown. A value used whole
//! is kept in state as the last good one of its entry ([`last_good`]).
//!
//! Nothing here acts on a change: the cell publishes each new snapshot, and
//! the gate's binding guard and the link routes follow it themselves.

use std::future::Future;
use std::time::Duration;

use serde_json::{json, Value};

use super::cell::ConfigCell;
use super::{last_good, schema, ApprovalConfig, Refused, Snapshot};
use crate::engine::{CallError, Engine, Entry, ErrorCode};

/// `approval::on-config-change`.
pub(crate) const ID: &str = "approval::on-config-change";

/// The entry's display name and description.
const NAME: &str = "Approval gate";
const DESCRIPTION: &str =
    "Policy for the approval gate: default mode, rules, folder-access re-ask limit.";

/// Why the entry could not be read at boot (boot stops). A value that was
/// read but cannot be used is no such reason: the worker then starts from
/// the last good value, or in lockdown.
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
}

/// Why a reload kept the previous snapshot without reading a value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    /// `configuration::get` failed (not for the value's sake).
    #[error("configuration::get {id} failed: {source}")]
    Fetch {
        /// The entry.
        id: String,
        /// Why.
        #[source]
        source: CallError,
    },
}

fn entry<'a>(id: &'a str, schema: &'a Value, metadata: &'a Value) -> Entry<'a> {
    Entry {
        id,
        name: NAME,
        description: DESCRIPTION,
        schema,
        metadata: Some(metadata),
    }
}

/// The entry's metadata: the console's form for it, whatever its id
/// (contract §27.2).
fn metadata() -> Value {
    json!({"ui_form": super::identity::UI_FORM})
}

/// The engine's answer to a validated read: the value, or why it cannot be
/// used (`SCHEMA_INVALID`: the stored value does not fit the entry's
/// schema, a value refused like any other), or the call's own failure.
fn read_value(got: Result<Value, CallError>) -> Result<Result<ApprovalConfig, Refused>, CallError> {
    match got {
        Ok(value) => Ok(ApprovalConfig::from_value(&value).map_err(|err| Refused::unparsed(&err))),
        Err(err) if err.code == ErrorCode::SchemaInvalid => Ok(Err(Refused {
            rule_errors: Vec::new(),
            errors: vec![format!(
                "the stored value does not fit the entry's schema: {}",
                crate::redact::redact_text(&err.to_string())
            )],
        })),
        Err(err) => Err(err),
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
    let metadata = metadata();
    let id = cell.id();
    let stored = match engine.configuration_get(id, true).await {
        Ok(Value::Null) => None,
        Ok(value) => Some(value),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(fatal("configuration::get")(e)),
    };
    match stored {
        None => {
            let initial = seed.unwrap_or_else(ApprovalConfig::defaults_json);
            with_retries(|| {
                engine.configuration_register(entry(id, &schema, &metadata), Some(&initial))
            })
            .await
            .map_err(fatal("configuration::register"))?;
            tracing::info!("configuration entry seeded");
        }
        Some(value) => {
            with_retries(|| engine.configuration_register(entry(id, &schema, &metadata), None))
                .await
                .map_err(fatal("configuration::register"))?;
            if let Value::Object(map) = &value {
                if !map.contains_key("rules") {
                    let mut merged = map.clone();
                    merged.insert("rules".into(), json!(crate::policy::default_rules()));
                    engine
                        .configuration_set(id, &Value::Object(merged))
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
    let parsed = loop {
        match read_value(engine.configuration_get(id, false).await) {
            Ok(parsed) => break parsed,
            Err(e) if attempt < 5 => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "configuration not readable yet; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(fatal("configuration::get")(e)),
        }
    };
    let mut persisted = cell.reloading.lock().await;
    let snapshot = match parsed.and_then(Snapshot::try_compile) {
        Ok(good) => {
            last_good::write(engine, &mut persisted, id, &good.config).await;
            good
        }
        Err(refused) => match last_good::read(engine, id).await {
            Some(kept) => kept.keeping(refused),
            None => Snapshot::lockdown(refused),
        },
    };
    report(id, &snapshot);
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
pub(crate) async fn reregister_schema(engine: &Engine, id: &str) -> Result<(), CallError> {
    let schema = schema();
    let metadata = metadata();
    with_retries(|| engine.configuration_register(entry(id, &schema, &metadata), None))
        .await
        .map(|_| ())
}

/// Logs what is wrong with the configuration just read, and what is in force.
fn report(id: &str, snapshot: &Snapshot) {
    let in_force = if snapshot.lockdown {
        "no configuration that can be used whole is known: the gate runs in lockdown (every call held, human-only calls denied) until one is stored"
    } else {
        "the value is refused whole: the previous configuration stays in force (rules, precedence, modes, guards, every field)"
    };
    for err in &snapshot.rule_errors {
        tracing::error!(configuration_id = id, rule = err.index, error = %err, "rule does not compile or one of its examples failed; {in_force}");
    }
    for err in &snapshot.refused {
        tracing::error!(configuration_id = id, error = %err, "configuration value cannot be used; {in_force}");
    }
    if snapshot.lockdown && !snapshot.is_refused() {
        tracing::error!(configuration_id = id, "{in_force}");
    }
    for err in &snapshot.guard_errors {
        tracing::error!(configuration_id = id, error = %err, "human_only_extra glob of the kept configuration does not compile; it guards its exact text");
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
        refused = snapshot.is_refused(),
        configuration_id = id,
        "configuration in force"
    );
}

/// Re-reads the entry into `cell`: a value that can be used whole replaces
/// the snapshot and is kept as the last good one; any other keeps the
/// snapshot in force (or lockdown) and reports its errors.
pub(crate) async fn reload(engine: &Engine, cell: &ConfigCell) -> Result<(), ReloadError> {
    let mut persisted = cell.reloading.lock().await;
    let id = cell.id();
    let parsed = read_value(engine.configuration_get(id, false).await).map_err(|source| {
        ReloadError::Fetch {
            id: id.to_string(),
            source,
        }
    })?;
    let current = cell.load();
    let snapshot = match parsed.and_then(Snapshot::try_compile) {
        Ok(next) => next,
        Err(refused) if current.lockdown => Snapshot::lockdown(refused),
        Err(refused) => current.keeping(refused),
    };
    report(id, &snapshot);
    let good = (!snapshot.is_refused() && !snapshot.lockdown).then(|| snapshot.config.clone());
    cell.store(snapshot);
    if let Some(config) = good {
        last_good::write(engine, &mut persisted, id, &config).await;
    }
    Ok(())
}
