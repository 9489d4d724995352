//! The gate's durable binding on `harness::hook::pre-trigger`
//! (`architecture/contract.md` § Bindings). Made with
//! `engine::register_trigger`, it outlives the worker: while the worker is
//! down the harness's call to `approval::gate` fails and its `fail_closed`
//! policy denies, so a crashed gate never waves calls through.

use serde_json::{json, Value};

use super::ID;
use crate::engine::{CallError, Engine};

/// The gate's hook type.
pub(crate) const PRE_TRIGGER: &str = "harness::hook::pre-trigger";

/// The gate's binding config: every call, fail closed.
pub(crate) fn config() -> Value {
    json!({"timeout_ms": 5000, "on_error": "fail_closed"})
}

/// Makes sure exactly one durable binding of the gate exists with the
/// contract's config: reuses a matching one, removes the others.
pub(crate) async fn ensure(engine: &Engine) -> Result<String, CallError> {
    let desired = config();
    let mut keep: Option<String> = None;
    for trigger in engine.registered_triggers().await? {
        if trigger.function_id != ID || trigger.trigger_type != PRE_TRIGGER {
            continue;
        }
        if keep.is_none() && trigger.config == desired {
            keep = Some(trigger.id);
        } else if !trigger.id.is_empty() {
            tracing::info!(id = %trigger.id, "removing a stale or duplicate durable gate binding");
            engine.unregister_durable_trigger(&trigger.id).await?;
        }
    }
    match keep {
        Some(id) => Ok(id),
        None => {
            engine
                .register_durable_trigger(PRE_TRIGGER, ID, &desired)
                .await
        }
    }
}

/// Removes every durable binding of the gate (`approval-gate unbind`);
/// returns how many.
pub(crate) async fn remove_all(engine: &Engine) -> Result<usize, CallError> {
    let mut removed = 0;
    for trigger in engine.registered_triggers().await? {
        if trigger.function_id == ID && !trigger.id.is_empty() {
            engine.unregister_durable_trigger(&trigger.id).await?;
            removed += 1;
        }
    }
    Ok(removed)
}
