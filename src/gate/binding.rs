//! The gate's durable binding on `harness::hook::pre-trigger`
//! (`architecture/contract.md` § Bindings, § Never ungated). Made with
//! `engine::register_trigger`, it outlives the worker: while the worker is
//! down the harness's call to `approval::gate` fails and its `fail_closed`
//! policy denies, so a crashed gate never waves calls through.
//!
//! What keeps calls gated:
//! * boot makes the binding before it reports ready, and says `gated=` on the
//!   ready line;
//! * a replacement (a changed `gate_priority`, a stale config) is made
//!   **before** the old binding is removed, so no call slips between the two;
//! * the guard (`gate::guard_binding`) re-checks the binding every `binding_check_interval_ms`, after
//!   every reconnect and after every configuration change, makes it again if
//!   the engine lost it, and retries with backoff until it exists;
//! * the id of the binding is remembered in state, because the engine does
//!   not list a binding parked for a trigger type nobody provides yet: a
//!   restart can then remove its own parked binding instead of leaving a
//!   second one to activate when the harness appears.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::ID;
use crate::engine::{CallError, Engine, Scope};

/// The gate's hook type.
pub(crate) const PRE_TRIGGER: &str = "harness::hook::pre-trigger";

/// The key of the remembered binding in [`Scope::BINDINGS`].
const REMEMBERED_KEY: &str = "gate";

/// The first retry after a failed check; doubles up to the check interval.
pub(crate) const FIRST_RETRY: Duration = Duration::from_millis(250);

/// The gate's binding config: every call, fail closed, run after the hooks
/// of a lower priority.
pub(crate) fn config(priority: i64) -> Value {
    json!({"timeout_ms": 5000, "on_error": "fail_closed", "priority": priority})
}

/// What the engine said about the binding at the last check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// The binding's id, once one was made or found.
    pub id: Option<String>,
    /// The binding exists and is active: the harness calls the gate.
    pub gated: bool,
    /// The harness's trigger type does not exist: the binding is parked
    /// until it appears (there is nothing to gate yet).
    pub parked: bool,
}

/// The binding's state, shared by the guard, boot and `approval::health`.
#[derive(Default)]
pub(crate) struct GateBinding {
    status: Mutex<Status>,
    /// The parked binding this connection made, with its config: the
    /// engine does not list parked bindings, so without it every check would
    /// make another one (and remove the last). Forgotten on reconnect, when
    /// the engine may have restarted and lost it.
    parked: Mutex<Option<(String, Value)>>,
    /// Wakes the guard early (a configuration change, a reconnect).
    wake: tokio::sync::Notify,
}

/// The binding as remembered in state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Remembered {
    id: String,
}

impl GateBinding {
    /// The last check's result.
    pub(crate) fn status(&self) -> Status {
        match self.status.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(crate) fn set(&self, status: Status) {
        match self.status.lock() {
            Ok(mut s) => *s = status,
            Err(p) => *p.into_inner() = status,
        }
    }

    /// Asks the guard to check now.
    pub(crate) fn check_soon(&self) {
        self.wake.notify_one();
    }

    /// After a reconnect: the engine may have restarted and lost a parked
    /// binding, so the next check makes one again rather than trust it.
    pub(crate) fn forget_parked(&self) {
        *lock(&self.parked) = None;
    }

    /// Waits until [`GateBinding::check_soon`] is called.
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Makes sure exactly one durable binding of the gate exists with the
    /// desired config, the new one before any old one is removed, and
    /// records the result.
    pub(crate) async fn ensure(&self, engine: &Engine, priority: i64) -> Result<Status, CallError> {
        let desired = config(priority);
        let trusted = lock(&self.parked)
            .clone()
            .filter(|(_, config)| *config == desired)
            .map(|(id, _)| id);
        let status = ensure(engine, &desired, trusted).await?;
        *lock(&self.parked) = match (&status.id, status.parked) {
            (Some(id), true) => Some((id.clone(), desired)),
            _ => None,
        };
        self.set(status.clone());
        Ok(status)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

async fn remembered(engine: &Engine) -> Option<String> {
    let value = engine
        .state_get(&Scope::BINDINGS, REMEMBERED_KEY)
        .await
        .ok()?;
    serde_json::from_value::<Remembered>(value)
        .ok()
        .map(|r| r.id)
}

/// One check: find or make the binding, then remove every other one.
/// `trusted`: a parked binding with the desired config that this connection
/// made (the engine cannot list it); kept while the hook type is absent.
async fn ensure(
    engine: &Engine,
    desired: &Value,
    trusted: Option<String>,
) -> Result<Status, CallError> {
    let present = engine.trigger_type_ids().await?;
    let parked = !present.iter().any(|t| t == PRE_TRIGGER);
    let active: Vec<_> = engine
        .registered_triggers()
        .await?
        .into_iter()
        .filter(|t| t.function_id == ID && t.trigger_type == PRE_TRIGGER)
        .collect();
    let previous = remembered(engine).await;
    let keep = match active.iter().find(|t| t.config == *desired) {
        Some(found) => found.id.clone(),
        None if parked && trusted.is_some() => trusted.unwrap_or_default(),
        None => {
            let id = engine
                .register_durable_trigger(PRE_TRIGGER, ID, desired)
                .await?;
            tracing::info!(id, parked, "durable gate binding made");
            id
        }
    };
    // Only now, with the binding in place, the others go.
    for stale in active.iter().filter(|t| t.id != keep) {
        tracing::info!(id = %stale.id, "removing a stale or duplicate durable gate binding");
        engine.unregister_durable_trigger(&stale.id).await?;
    }
    let already_remembered = previous.as_deref() == Some(keep.as_str());
    if let Some(old) = previous.filter(|old| *old != keep) {
        // Perhaps parked (the engine does not list parked bindings): remove
        // it by id so it cannot activate beside the new one.
        engine.unregister_durable_trigger(&old).await?;
    }
    let remember = json!(Remembered { id: keep.clone() });
    if already_remembered {
        // Nothing to write.
    } else if let Err(err) = engine
        .state_set(&Scope::BINDINGS, REMEMBERED_KEY, remember)
        .await
    {
        tracing::warn!(error = %err, "gate binding id not remembered; a restart before the harness appears may leave a parked duplicate");
    }
    let gated = !parked
        && (active.iter().any(|t| t.id == keep)
            || engine
                .registered_triggers()
                .await?
                .iter()
                .any(|t| t.id == keep));
    Ok(Status {
        id: Some(keep),
        gated,
        parked,
    })
}

/// The next retry delay: doubled each time, at most `cap`.
pub(crate) fn backoff(retry: &mut Duration, cap: Duration) -> Duration {
    let wait = (*retry).min(cap);
    *retry = (*retry * 2).min(cap);
    wait
}

/// Removes every durable binding of the gate (`approval-gate unbind`),
/// parked ones included; returns how many.
pub(crate) async fn remove_all(engine: &Engine) -> Result<usize, CallError> {
    let mut removed = 0;
    for trigger in engine.registered_triggers().await? {
        if trigger.function_id == ID && !trigger.id.is_empty() {
            engine.unregister_durable_trigger(&trigger.id).await?;
            removed += 1;
        }
    }
    if let Some(old) = remembered(engine).await {
        if engine.unregister_durable_trigger(&old).await? {
            removed += 1;
        }
    }
    engine
        .state_delete(&Scope::BINDINGS, REMEMBERED_KEY)
        .await?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_interval() {
        let cap = Duration::from_secs(2);
        let mut retry = FIRST_RETRY;
        let waits: Vec<u128> = (0..6)
            .map(|_| backoff(&mut retry, cap).as_millis())
            .collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
    }

    #[test]
    fn the_binding_config_carries_the_priority() {
        assert_eq!(
            config(1000),
            json!({"timeout_ms": 5000, "on_error": "fail_closed", "priority": 1000})
        );
    }
}
