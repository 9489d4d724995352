//! `approval::health` (`architecture/contract.md` § Health): what an operator
//! needs to know the gate is doing its job — whether calls are gated, which
//! bindings wait for a provider, whether the policy compiled, how many
//! sessions and held calls the worker holds.
//!
//! # Format
//!
//! In: `{}`
//! Out: `{ gated, gate_binding_id?, parked: [trigger_type], config: {ok, rule_errors},
//!        settings: {mode: "cache", cached, loaded}, held, unreadable, standby, standby_waited_ms?,
//!        uptime_ms, reviewer?: {function_id?, timeout_ms?, calls, allows, denies,
//!        escalations, errors, timeouts, held_by_breaker, p50_ms?, p99_ms?},
//!        decision_log: {on, queued, sent, dropped, errors} }`
//!
//! `standby` says how the answering instance started: `true` when another
//! live instance held the worker name at its first attempt and this one
//! stood by, then took over. An instance that is standing by now registers
//! nothing (not even this function), so it never answers: the instance that
//! answers is always the active one, and while two run, the standby is known
//! only by its log (`standing by: …`).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::functions::register_typed;
use crate::provenance::DecisionLogHealth;
use crate::worker::Worker;

/// `approval::health`.
pub(crate) const ID: &str = "approval::health";

/// `approval::health` request: nothing.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct HealthRequest {}

/// Whether the configuration compiled.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ConfigHealth {
    /// The stored configuration is the one in force and nothing in it
    /// failed; false in lockdown and while any error is reported.
    pub ok: bool,
    /// What failed. A stored value whose rules do not compile is refused
    /// whole: its errors are listed here while the previous configuration
    /// stays in force (or, with none, the gate runs in lockdown).
    pub rule_errors: Vec<String>,
}

/// How the worker knows sessions' settings.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SettingsHealth {
    /// `cache`: a bounded cache filled on a session's first call.
    pub mode: String,
    /// Sessions held in memory.
    pub cached: usize,
    /// Whether the worker can serve sessions' settings (always true in
    /// `cache` mode, where nothing is loaded ahead).
    pub loaded: bool,
}

/// What the reviewer did since boot (`architecture/contract.md` § The
/// reviewer); in memory only.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewerHealth {
    /// The reviewer's function id, while one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_id: Option<String>,
    /// The wait in force (ms): `timeout_ms` clamped to the hook budget less
    /// 1000 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Reviews asked.
    pub calls: u64,
    /// Answered `allow`.
    pub allows: u64,
    /// Answered `deny`.
    pub denies: u64,
    /// Answered `escalate`.
    pub escalations: u64,
    /// Failed, or answered something of another shape.
    pub errors: u64,
    /// Did not answer in time.
    pub timeouts: u64,
    /// Denials the circuit breaker sent to a human.
    pub held_by_breaker: u64,
    /// Median latency of the last 1,024 reviews (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 99th percentile latency of the last 1,024 reviews (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// `approval::health` response.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Health {
    /// The gate's durable binding exists and is active: every call is gated.
    pub gated: bool,
    /// The binding's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_binding_id: Option<String>,
    /// The folder-access watch's durable binding exists and is active:
    /// today's harness enforces sessions' folder boundaries.
    pub watching: bool,
    /// The watch binding's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_binding_id: Option<String>,
    /// Trigger types the worker binds to that no provider serves now (their
    /// bindings are parked by the engine).
    pub parked: Vec<String>,
    /// The configuration.
    pub config: ConfigHealth,
    /// Sessions' settings.
    pub settings: SettingsHealth,
    /// Calls held now.
    pub held: usize,
    /// Stored held calls that do not parse (§21.9): kept, listed by
    /// `list-pending` as `kind: "unreadable"`, removed by a human's deny.
    pub unreadable: usize,
    /// Whether this instance started as a standby: another live instance
    /// held the worker name when it started, and it took over when the name
    /// came free. (A standby still waiting registers nothing and cannot be
    /// asked; the instance that answers is the active one.)
    pub standby: bool,
    /// How long it stood by before taking over; absent for an instance
    /// that found the name free.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby_waited_ms: Option<u64>,
    /// Time since boot.
    pub uptime_ms: u64,
    /// The reviewer: present while one is configured, or once one was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<ReviewerHealth>,
    /// The decision log: whether it is on, and records queued, sent,
    /// dropped (the oldest of a full queue) and failed.
    pub decision_log: DecisionLogHealth,
}

/// The health report.
pub(crate) async fn health(worker: &Worker) -> Health {
    let binding = worker.gate_binding.status();
    let watch = worker.watch_binding.status();
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
    let counts = worker.reviews.stats().counts();
    let configured = snapshot.config.reviewer.as_ref();
    let reviewer = (configured.is_some() || counts.calls > 0).then(|| ReviewerHealth {
        function_id: configured.map(|r| r.function_id.clone()),
        timeout_ms: configured.map(|r| r.timeout()),
        calls: counts.calls,
        allows: counts.allows,
        denies: counts.denies,
        escalations: counts.escalations,
        errors: counts.errors,
        timeouts: counts.timeouts,
        held_by_breaker: counts.held_by_breaker,
        p50_ms: counts.p50_ms,
        p99_ms: counts.p99_ms,
    });
    Health {
        gated: binding.gated,
        gate_binding_id: binding.id,
        watching: watch.gated,
        watch_binding_id: watch.id,
        parked,
        config: ConfigHealth {
            ok: snapshot.is_ok(),
            rule_errors: snapshot.errors(),
        },
        settings: SettingsHealth {
            mode: "cache".into(),
            cached: worker.settings.cached_len(),
            loaded: true,
        },
        held: worker.pending.len(),
        unreadable: worker.pending.unreadable_len(),
        standby: worker.tenure.stood_by.is_some(),
        standby_waited_ms: worker.tenure.stood_by.map(|d| d.as_millis() as u64),
        uptime_ms: worker.started.elapsed().as_millis() as u64,
        reviewer,
        decision_log: worker.pending.decision_log().health(),
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
