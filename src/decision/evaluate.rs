//! `approval::evaluate` — the gate's ladder, read-only
//! (`architecture/contract.md` § Evaluate): the
//! verdict, the matched rule, and the rule-compile errors. Never writes,
//! never holds.
//!
//! # Format
//!
//! In: `{ session_id, function_id, arguments? }`
//! Out: `{ verdict: "allow"|"deny"|"needs_approval", rule_id?, reason, rule_errors?, deadline_ms? }`

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{validate_function_id, validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::gate::{settings_unknown, GATE_UNAVAILABLE};
use crate::inbox::{timeout_ms, HoldLimits};
use crate::policy::{decide, Call, Verdict};
use crate::settings::Known;
use crate::worker::Worker;

/// `approval::evaluate`.
pub(crate) const ID: &str = "approval::evaluate";

/// `approval::evaluate` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EvaluateRequest {
    /// The session whose settings apply.
    pub session_id: String,
    /// The function to evaluate.
    pub function_id: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// The verdict on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireVerdict {
    /// The gate would continue.
    Allow,
    /// The gate would deny.
    Deny,
    /// The gate would hold for a human.
    NeedsApproval,
}

/// `approval::evaluate` response.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EvaluateResponse {
    /// What the gate would answer.
    pub verdict: WireVerdict,
    /// The rule that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// Why.
    pub reason: String,
    /// Rules that do not compile (the rule set is then empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rule_errors: Vec<String>,
    /// On needs_approval: how long the hold would wait before it is denied
    /// for want of an answer (absent: until a human answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

/// How long evaluate may wait for a cold session's settings.
const SETTINGS_BUDGET: Duration = Duration::from_secs(5);

/// Evaluates a call without side effects.
pub(crate) async fn evaluate(
    worker: &Worker,
    request: &EvaluateRequest,
) -> Result<EvaluateResponse, ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_function_id(&request.function_id)?;
    let snapshot = worker.config.load();
    let known = match worker
        .settings
        .known(&request.session_id, SETTINGS_BUDGET)
        .await
    {
        Ok(known) => known,
        Err(err) => {
            return Ok(EvaluateResponse {
                verdict: WireVerdict::Deny,
                rule_id: Some(GATE_UNAVAILABLE.to_string()),
                reason: settings_unknown(&request.session_id, &request.function_id, err.code()),
                rule_errors: snapshot.errors(),
                deadline_ms: None,
            })
        }
    };
    let settings = match &known {
        Known::Stored(stored) => &stored.compiled,
        Known::Absent => &snapshot.defaults,
    };
    let decision = decide(
        settings,
        &snapshot.rules,
        &Call {
            function_id: &request.function_id,
            arguments: request.arguments.as_ref(),
        },
    );
    Ok(EvaluateResponse {
        verdict: match decision.verdict {
            Verdict::Allow => WireVerdict::Allow,
            Verdict::Deny => WireVerdict::Deny,
            Verdict::Hold => WireVerdict::NeedsApproval,
        },
        rule_id: decision.rule_id().map(str::to_string),
        reason: decision.reason(&request.function_id),
        rule_errors: snapshot.errors(),
        deadline_ms: (decision.verdict == Verdict::Hold)
            .then(|| timeout_ms(HoldLimits::of(&decision), &snapshot.config))
            .flatten(),
    })
}

/// Registers `approval::evaluate`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "Run the gate's ladder for a call without writing or holding: verdict, matched rule, reason, rule-compile errors.",
        |w, r: EvaluateRequest| async move { evaluate(&w, &r).await },
    );
}
