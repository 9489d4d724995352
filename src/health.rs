//! `approval::health` (`architecture/contract.md` § Health): what an operator
//! needs to know the gate is doing its job — whether calls are gated, which
//! bindings wait for a provider, whether the policy compiled, how many
//! sessions and held calls the worker holds.
//!
//! # Format
//!
//! In: `{}`
//! Out: `{ gated, gate_binding_id?, parked: [trigger_type], config: {ok, rule_errors},
//!        settings: {mode: "cache", cached, loaded}, held, standby, uptime_ms }`

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::functions::register_typed;
use crate::worker::Worker;

/// `approval::health`.
pub(crate) const ID: &str = "approval::health";

/// `approval::health` request: nothing.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct HealthRequest {}

/// Whether the configuration compiled.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConfigHealth {
    /// No rule or guard failed to compile.
    pub ok: bool,
    /// What failed (an empty rule set then holds every call reaching the rules).
    pub rule_errors: Vec<String>,
}

/// How the worker knows sessions' settings.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SettingsHealth {
    /// `cache`: a bounded cache filled on a session's first call.
    pub mode: String,
    /// Sessions held in memory.
    pub cached: usize,
    /// Whether the worker can serve sessions' settings (always true in
    /// `cache` mode, where nothing is loaded ahead).
    pub loaded: bool,
}

/// `approval::health` response.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Health {
    /// The gate's durable binding exists and is active: every call is gated.
    pub gated: bool,
    /// The binding's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_binding_id: Option<String>,
    /// Trigger types the worker binds to that no provider serves now (their
    /// bindings are parked by the engine).
    pub parked: Vec<String>,
    /// The configuration.
    pub config: ConfigHealth,
    /// Sessions' settings.
    pub settings: SettingsHealth,
    /// Calls held now.
    pub held: usize,
    /// Whether this instance is a standby waiting for the active one.
    pub standby: bool,
    /// Time since boot.
    pub uptime_ms: u64,
}

/// The health report.
pub(crate) async fn health(worker: &Worker) -> Health {
    let binding = worker.gate_binding.status();
    let links_on = worker.config.load().links.is_some();
    let parked = match worker.engine.trigger_type_ids().await {
        Ok(present) => crate::bindings::BOUND_TYPES
            .iter()
            .copied()
            .chain(links_on.then_some(crate::links::HTTP))
            .filter(|t| !present.iter().any(|p| p == *t))
            .map(|t| t.to_string())
            .collect(),
        Err(err) => {
            tracing::warn!(error = %err, "trigger types not listed for health");
            Vec::new()
        }
    };
    let snapshot = worker.config.load();
    let rule_errors = snapshot.errors();
    Health {
        gated: binding.gated,
        gate_binding_id: binding.id,
        parked,
        config: ConfigHealth {
            ok: rule_errors.is_empty(),
            rule_errors,
        },
        settings: SettingsHealth {
            mode: "cache".into(),
            cached: worker.settings.cached_len(),
            loaded: true,
        },
        held: worker.inbox.len(),
        standby: false,
        uptime_ms: worker.started.elapsed().as_millis() as u64,
    }
}

/// Registers `approval::health`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "Whether the gate is doing its job: gated, parked bindings, configuration errors, cached sessions, held calls, uptime. Operator only.",
        |w, _r: HealthRequest| async move { Ok(health(&w).await) },
    );
}
