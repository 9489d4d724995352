//! `approval::simulate` — the gate's verdicts now and under a draft
//! configuration, side by side (`architecture/contract.md` § What-if and
//! batch decisions). Human-only (`approval::*`).
//!
//! 1. Parse the draft (`config`, absent: the configuration in force).
//! 2. Read the settings of every session named (a supplied call's
//!    `session_id`, a held call's session) — reads only, from the cache or
//!    one `state::get` each.
//! 3. Judge each supplied call, then (`from_pending`) each held function
//!    call on its stored redacted arguments (`approximate: true`), with the
//!    pure core ([`super::whatif`]), which runs the gate's one ladder.
//!
//! Nothing is written, no event is emitted, no reviewer or harness is
//! called, no grant's use is spent.
//!
//! # Format
//!
//! In: `{ config?: <configuration value>, calls?: [{id?, session_id?, function_id, arguments?, mode?}], from_pending?: bool }`
//! Out: `{ results: [{id? | session_id, function_call_id?, function_id, verdict_now, verdict_draft, rule_id_now, rule_id_draft, changed, approximate?}], rule_errors: [string] }`

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::evaluate::WireVerdict;
use super::whatif::{SimCall, SimulateResponse, Verdicts, WhatIf};
use crate::config::ApprovalConfig;
use crate::error::{validate_function_id, validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::gate::GATE_UNAVAILABLE;
use crate::pending::RecordKind;
use crate::settings::Known;
use crate::worker::Worker;

/// `approval::simulate`.
pub(crate) const ID: &str = "approval::simulate";

/// The most calls one request may supply.
pub(crate) const MAX_CALLS: usize = 100_000;
/// How many cold sessions' settings are read at once.
const SETTINGS_CONCURRENCY: usize = 32;
/// How long one cold session's settings may take.
const SETTINGS_BUDGET: Duration = Duration::from_secs(5);

/// `approval::simulate` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct SimulateRequest {
    /// The draft configuration value (the `approval-gate` entry's shape);
    /// absent: the configuration in force.
    #[serde(default)]
    #[schemars(schema_with = "draft_schema")]
    pub config: Option<Value>,
    /// Calls to judge.
    #[serde(default)]
    pub calls: Vec<SimCall>,
    /// Also judge every held function call, on its stored redacted
    /// arguments.
    #[serde(default)]
    pub from_pending: bool,
}

/// The draft's schema: the configuration entry's own.
fn draft_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    let mut schema = crate::config::schema();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    serde_json::from_value(schema).unwrap_or(schemars::schema::Schema::Bool(true))
}

/// Judges the calls without side effects.
pub(crate) async fn simulate(
    worker: &Worker,
    request: SimulateRequest,
) -> Result<SimulateResponse, ApprovalError> {
    if request.calls.len() > MAX_CALLS {
        return Err(ApprovalError::InvalidPayload(format!(
            "calls: at most {MAX_CALLS} calls per request, got {}",
            request.calls.len()
        )));
    }
    for call in &request.calls {
        validate_function_id(&call.function_id)?;
        if let Some(sid) = &call.session_id {
            validate_id("session_id", sid)?;
        }
    }
    let draft = request
        .config
        .as_ref()
        .map(ApprovalConfig::from_value)
        .transpose()
        .map_err(|err| ApprovalError::InvalidPayload(format!("config: {err}")))?;
    let held = if request.from_pending {
        worker.pending.records()
    } else {
        Vec::new()
    };
    let held: Vec<_> = held
        .into_iter()
        .filter(|r| r.kind == RecordKind::Function)
        .collect();
    let sessions: Vec<&str> = request
        .calls
        .iter()
        .filter_map(|c| c.session_id.as_deref())
        .chain(held.iter().map(|r| r.session_id.as_str()))
        .collect();
    let settings = read_settings(worker, sessions).await;
    let snapshot = worker.config.load();
    // Judging is CPU work (commands are read inline): off the hook's
    // thread, on the runtime's blocking pool.
    tokio::task::spawn_blocking(move || {
        judge_all(&snapshot, draft, &request.calls, &held, &settings)
    })
    .await
    .map_err(|err| ApprovalError::InvalidPayload(format!("simulate did not finish: {err}")))
}

/// Every supplied call, then every held one, judged now and under the draft.
fn judge_all(
    snapshot: &crate::config::Snapshot,
    draft: Option<ApprovalConfig>,
    calls: &[SimCall],
    held: &[Arc<crate::pending::PendingRecord>],
    settings: &HashMap<String, Option<Known>>,
) -> SimulateResponse {
    let whatif = WhatIf::new(snapshot, draft);
    let mut results = Vec::with_capacity(calls.len() + held.len());
    for call in calls {
        results.push(match call.session_id.as_deref().map(|s| settings.get(s)) {
            Some(Some(None)) | Some(None) => unknown().result(
                call.id.clone(),
                call.session_id.clone(),
                None,
                &call.function_id,
            ),
            Some(Some(Some(known))) => whatif.supplied(stored(known), call),
            None => whatif.supplied(None, call),
        });
    }
    for record in held {
        let verdicts = match settings.get(record.session_id.as_str()) {
            Some(Some(known)) => {
                let arguments = record.arguments_excerpt.to_value();
                let arguments = (!arguments.is_null()).then_some(&arguments);
                whatif.compare(stored(known), &record.function_id, arguments, None)
            }
            _ => unknown(),
        };
        let mut result = verdicts.result(
            None,
            Some(record.session_id.clone()),
            Some(record.function_call_id.clone()),
            &record.function_id,
        );
        result.approximate = Some(true);
        results.push(result);
    }
    SimulateResponse {
        results,
        rule_errors: whatif.errors().to_vec(),
    }
}

/// A session's stored settings, when it has any.
fn stored(known: &Known) -> Option<&crate::policy::CompiledSettings> {
    match known {
        Known::Stored(stored) => Some(&stored.compiled),
        Known::Absent => None,
    }
}

/// A session whose settings cannot be read: the gate denies its calls
/// whatever the configuration says, now and under the draft.
fn unknown() -> Verdicts {
    Verdicts::same((WireVerdict::Deny, Some(GATE_UNAVAILABLE.to_string())))
}

/// The settings of each distinct session (`None`: unreadable), read with
/// bounded concurrency.
async fn read_settings(worker: &Worker, sessions: Vec<&str>) -> HashMap<String, Option<Known>> {
    let mut distinct: Vec<String> = sessions.into_iter().map(str::to_string).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let store = worker.settings.clone();
    futures_util::stream::iter(distinct)
        .map(move |sid| {
            let store = store.clone();
            async move {
                let known = store.known(&sid, SETTINGS_BUDGET).await.ok();
                (sid, known)
            }
        })
        .buffer_unordered(SETTINGS_CONCURRENCY)
        .collect()
        .await
}

/// Registers `approval::simulate`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "What-if: the gate's verdict on supplied or held calls under the configuration in force and under a draft, side by side. Never writes, holds, emits or calls the harness. Human/console only.",
        |w, r: SimulateRequest| async move { simulate(&w, r).await },
    );
}
