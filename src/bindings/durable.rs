//! The durable bindings (`architecture/contract.md` § Bindings, § Never
//! ungated, § Two harness generations): the gate's on
//! `harness::hook::pre-trigger` and the folder-access watch's on
//! `harness::hook::post-trigger`. Made with `engine::register_trigger`, they
//! outlive the worker: while the worker is down the harness's call to
//! `approval::gate` fails and its `fail_closed` policy denies, so a crashed
//! gate never waves calls through; and today's harness enforces a session's
//! folder boundary only while a post-trigger binding of
//! `approval::filesystem-access-watch` exists, so that one must survive
//! restarts too (a down watch fails open: the original error reaches the
//! model).
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

use crate::config::ApprovalConfig;
use crate::engine::{CallError, Engine, Scope};

/// The gate's hook type.
pub(crate) const PRE_TRIGGER: &str = "harness::hook::pre-trigger";
/// The folder-access watch's hook type.
pub(crate) const POST_TRIGGER: &str = "harness::hook::post-trigger";
/// The gate's function.
pub(crate) const GATE_ID: &str = "approval::gate";
/// The folder-access watch's function: today's harness recognises exactly
/// this id.
pub(crate) const WATCH_ID: &str = "approval::filesystem-access-watch";

/// The first retry after a failed check; doubles up to the check interval.
pub(crate) const FIRST_RETRY: Duration = Duration::from_millis(250);

/// One durable binding: what it binds and under which key its id is
/// remembered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    /// The hook type.
    pub trigger_type: &'static str,
    /// The worker's function it calls.
    pub function_id: &'static str,
    /// The key of the remembered id in [`Scope::BINDINGS`].
    key: &'static str,
    /// The binding config the configuration asks for.
    config: fn(&ApprovalConfig) -> Value,
}

impl Spec {
    /// The config a binding must have now.
    pub(crate) fn desired(&self, config: &ApprovalConfig) -> Value {
        (self.config)(config)
    }
}

/// The gate's binding: every call, fail closed, run after the hooks of a
/// lower priority.
pub(crate) const GATE: Spec = Spec {
    trigger_type: PRE_TRIGGER,
    function_id: GATE_ID,
    key: "gate",
    config: |c| config(c.gate_priority),
};

/// The folder-access watch's binding: shell and coder calls, fail open.
pub(crate) const WATCH: Spec = Spec {
    trigger_type: POST_TRIGGER,
    function_id: WATCH_ID,
    key: "watch",
    config: |_| watch_config(),
};

/// The `timeout_ms` both hook bindings give the harness (contract
/// § Bindings); a reconcile's age is twice it (`boot::RECONCILE_AGE`).
pub(crate) const HOOK_TIMEOUT_MS: u64 = 5000;

/// The gate's binding config at a priority.
pub(crate) fn config(priority: i64) -> Value {
    json!({"timeout_ms": HOOK_TIMEOUT_MS, "on_error": "fail_closed", "priority": priority})
}

/// The watch's binding config (only keys every harness generation accepts).
pub(crate) fn watch_config() -> Value {
    json!({"functions": ["shell::*", "coder::*"], "timeout_ms": HOOK_TIMEOUT_MS, "on_error": "fail_open"})
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

/// A durable binding's state, shared by its guard, boot and
/// `approval::health`.
pub(crate) struct DurableBinding {
    spec: Spec,
    /// One check at a time: two at once could each make a binding.
    ensuring: tokio::sync::Mutex<()>,
    status: Mutex<Status>,
    /// The parked binding this connection made, with its config: the
    /// engine does not list parked bindings, so without it every check would
    /// make another one (and remove the last). Forgotten on reconnect, when
    /// the engine may have restarted and lost it.
    parked: Mutex<Option<(String, Value)>>,
    /// Wakes the guard early (a configuration change, a reconnect).
    wake: tokio::sync::Notify,
    /// Bumped by [`DurableBinding::new_connection`]: a check still waiting
    /// on the lost connection gives up, so the next one is not held behind
    /// it.
    abandon: tokio::sync::watch::Sender<u64>,
}

/// The binding as remembered in state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Remembered {
    id: String,
}

impl DurableBinding {
    pub(crate) fn new(spec: Spec) -> DurableBinding {
        DurableBinding {
            spec,
            ensuring: tokio::sync::Mutex::new(()),
            status: Mutex::default(),
            parked: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            abandon: tokio::sync::watch::Sender::new(0),
        }
    }

    /// What it binds.
    pub(crate) fn spec(&self) -> &Spec {
        &self.spec
    }

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

    /// The engine is reachable again (a reconnect, or the early rebind's
    /// auxiliary connection): the engine may have restarted and lost a
    /// parked binding, so the next check makes one again rather than trust
    /// it; and a check begun before the outage gives up now. Its calls went
    /// to a connection that is gone, and the SDK answers them only when they
    /// time out (10 s): meanwhile it would hold the one-check-at-a-time lock
    /// and keep the binding from being made again (calls ran ungated).
    pub(crate) fn new_connection(&self) {
        *crate::sync::lock(&self.parked) = None;
        self.abandon.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Waits until [`GateBinding::check_soon`] is called.
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Makes sure exactly one durable binding exists with the config the
    /// configuration asks for, the new one before any old one is removed,
    /// and records the result. Gives up (`connection_lost`) when
    /// [`DurableBinding::new_connection`] is called meanwhile.
    pub(crate) async fn ensure(
        &self,
        engine: &Engine,
        config: &ApprovalConfig,
    ) -> Result<Status, CallError> {
        let _one = self.ensuring.lock().await;
        // Subscribed once the lock is held: a `new_connection` that came
        // before this check does not end it.
        let mut abandoned = self.abandon.subscribe();
        let desired = self.spec.desired(config);
        let trusted = crate::sync::lock(&self.parked)
            .clone()
            .filter(|(_, config)| *config == desired)
            .map(|(id, _)| id);
        let status = tokio::select! {
            status = ensure(engine, &self.spec, &desired, trusted) => status?,
            _ = abandoned.changed() => return Err(CallError::abandoned(self.spec.function_id)),
        };
        *crate::sync::lock(&self.parked) = match (&status.id, status.parked) {
            (Some(id), true) => Some((id.clone(), desired)),
            _ => None,
        };
        self.set(status.clone());
        Ok(status)
    }
}

async fn remembered(engine: &Engine, spec: &Spec) -> Option<String> {
    let value = engine.state_get(&Scope::BINDINGS, spec.key).await.ok()?;
    serde_json::from_value::<Remembered>(value)
        .ok()
        .map(|r| r.id)
}

/// One check: find or make the binding, then remove every other one.
/// `trusted`: a parked binding with the desired config that this connection
/// made (the engine cannot list it); kept while the hook type is absent.
async fn ensure(
    engine: &Engine,
    spec: &Spec,
    desired: &Value,
    trusted: Option<String>,
) -> Result<Status, CallError> {
    let present = engine.trigger_type_ids().await?;
    let parked = !present.iter().any(|t| t == spec.trigger_type);
    let active: Vec<_> = engine
        .registered_triggers()
        .await?
        .into_iter()
        .filter(|t| t.function_id == spec.function_id && t.trigger_type == spec.trigger_type)
        .collect();
    let previous = remembered(engine, spec).await;
    let keep = match active.iter().find(|t| t.config == *desired) {
        Some(found) => found.id.clone(),
        None if parked && trusted.is_some() => trusted.unwrap_or_default(),
        None => {
            let id = engine
                .register_durable_trigger(spec.trigger_type, spec.function_id, desired)
                .await?;
            tracing::info!(
                id,
                parked,
                function_id = spec.function_id,
                "durable binding made"
            );
            id
        }
    };
    // Only now, with the binding in place, the others go.
    for stale in active.iter().filter(|t| t.id != keep) {
        tracing::info!(id = %stale.id, function_id = spec.function_id, "removing a stale or duplicate durable binding");
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
    } else if let Err(err) = engine.state_set(&Scope::BINDINGS, spec.key, remember).await {
        tracing::warn!(error = %err, function_id = spec.function_id, "binding id not remembered; a restart before the harness appears may leave a parked duplicate");
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

/// Removes every durable binding of the worker — the gate's and the
/// watch's — (`approval-gate unbind`), parked ones included; returns how
/// many.
pub(crate) async fn remove_all(engine: &Engine) -> Result<usize, CallError> {
    let mut removed = 0;
    let triggers = engine.registered_triggers().await?;
    for spec in [GATE, WATCH] {
        for trigger in &triggers {
            if trigger.function_id == spec.function_id && !trigger.id.is_empty() {
                engine.unregister_durable_trigger(&trigger.id).await?;
                removed += 1;
            }
        }
        if let Some(old) = remembered(engine, &spec).await {
            if engine.unregister_durable_trigger(&old).await? {
                removed += 1;
            }
        }
        engine.state_delete(&Scope::BINDINGS, spec.key).await?;
    }
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
