//! `approval::resolve` — the decision plane's release (contract §5).
//!
//! Order: the harness first, then the emit-gated delete, then
//! `pending-resolved`. A harness failure is `approval/harness_unavailable`
//! and the record stays for a retry: a decision is never lost. A follow-up
//! hold written under the same key while the resolve is in flight survives.
//!
//! # Format
//!
//! In: `{ session_id, function_call_id, decision: "allow"|"deny", reason?: string|null, grant_scope?: "once"|"session"|"always" }`
//! Out: `{ resolved: bool, turn_resumed?: bool }`

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::register_typed;
use crate::error::{validate_id, ApprovalError};
use crate::pending::record::{PendingRecord, RecordKind};
use crate::policy::DenialEnvelope;
use crate::subscriptions::{Outcome, PendingResolved};
use crate::worker::Worker;

/// The human's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResolveDecision {
    /// Run the call.
    Allow,
    /// Answer the call with a denial.
    Deny,
}

impl ResolveDecision {
    /// The wire spelling (also what the logs say).
    pub fn as_str(self) -> &'static str {
        match self {
            ResolveDecision::Allow => "allow",
            ResolveDecision::Deny => "deny",
        }
    }
}

/// How long a folder grant lasts (folder_access records only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GrantScope {
    /// This one call.
    Once,
    /// The rest of the session.
    Session,
    /// The session, and the shell's configured roots.
    Always,
}

impl GrantScope {
    /// The wire spelling (also what the logs say).
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Once => "once",
            GrantScope::Session => "session",
            GrantScope::Always => "always",
        }
    }
}

/// What the logs name as the rule behind a human's decision, as the denial
/// envelope names the decider (`denied_by: "user"`).
pub const USER_RULE: &str = "user";

/// `approval::resolve` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ResolveRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// The held call (non-empty, no `/`).
    pub function_call_id: String,
    /// allow or deny.
    pub decision: ResolveDecision,
    /// The operator's reason, shown to the model on deny.
    #[serde(default)]
    pub reason: Option<String>,
    /// For folder_access records: once (default), session or always.
    #[serde(default)]
    pub grant_scope: Option<GrantScope>,
}

/// `approval::resolve` response.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResolveResponse {
    /// Whether this call took a held call out of the inbox.
    pub resolved: bool,
    /// Copied from the harness's reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_resumed: Option<bool>,
}

/// The default denial text.
pub const OPERATOR_REJECTED: &str = "Rejected by operator.";

fn operator_reason(reason: &Option<String>) -> Option<String> {
    reason
        .as_ref()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// The harness payload that carries out a decision on a function record.
pub fn function_release(
    record: &PendingRecord,
    decision: ResolveDecision,
    reason: &Option<String>,
) -> Value {
    match decision {
        ResolveDecision::Allow => json!({
            "session_id": record.session_id,
            "turn_id": record.turn_id,
            "function_call_id": record.function_call_id,
            "action": "execute",
        }),
        ResolveDecision::Deny => {
            let text = operator_reason(reason).unwrap_or_else(|| OPERATOR_REJECTED.to_string());
            deliver_denial(record, text)
        }
    }
}

/// A `deliver` payload with a denial by the user.
pub fn deliver_denial(record: &PendingRecord, text: String) -> Value {
    let envelope = DenialEnvelope::by_user(
        &record.function_id,
        &text,
        Some(record.arguments_excerpt.to_value()),
    );
    json!({
        "session_id": record.session_id,
        "turn_id": record.turn_id,
        "function_call_id": record.function_call_id,
        "action": "deliver",
        "is_error": true,
        "content": [{"type": "text", "text": text}],
        "details": envelope,
    })
}

/// Resolves a held call.
pub async fn resolve(
    worker: &Worker,
    request: ResolveRequest,
) -> Result<ResolveResponse, ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_id("function_call_id", &request.function_call_id)?;
    let (sid, cid) = (
        request.session_id.as_str(),
        request.function_call_id.as_str(),
    );
    let Some(record) = worker.pending.get(sid, cid) else {
        return Ok(ResolveResponse {
            resolved: false,
            turn_resumed: None,
        });
    };
    if !worker.pending.begin_resolve(&record) {
        return Ok(ResolveResponse {
            resolved: false,
            turn_resumed: None,
        });
    }
    let payload = match record.kind {
        RecordKind::Function => {
            if request.grant_scope.is_some() {
                tracing::info!(
                    session_id = sid,
                    function_call_id = cid,
                    "grant_scope ignored: the record is not a folder-access prompt"
                );
            }
            function_release(&record, request.decision, &request.reason)
        }
        RecordKind::FolderAccess => {
            super::folder::release(
                worker,
                &record,
                request.decision,
                request.grant_scope,
                &request.reason,
            )
            .await
        }
    };
    let reply = match worker.sibling.harness_resolve(payload).await {
        Ok(reply) => reply,
        Err(err) => {
            worker.pending.abandon_resolve(&record.key());
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %record.function_id, decision = request.decision.as_str(), error = %err, "harness did not take the decision; the call stays held");
            return Err(ApprovalError::HarnessUnavailable(err.to_string()));
        }
    };
    let turn_resumed = reply.get("turn_resumed").and_then(Value::as_bool);
    let settled = match worker.pending.finish_resolve(&record).await {
        Ok(settled) => settled,
        Err(err) => {
            worker.pending.abandon_resolve(&record.key());
            return Err(ApprovalError::StateUnavailable(err.to_string()));
        }
    };
    let outcome = match request.decision {
        ResolveDecision::Allow => Outcome::Allow,
        ResolveDecision::Deny => Outcome::Deny,
    };
    if settled {
        let reason = match request.decision {
            ResolveDecision::Deny => operator_reason(&request.reason),
            ResolveDecision::Allow => None,
        };
        worker.subscriptions.emit_resolved(
            &worker.sibling,
            PendingResolved::of(&record, outcome, reason),
        );
    }
    let grant_scope = match record.kind {
        RecordKind::FolderAccess if request.decision == ResolveDecision::Allow => {
            Some(request.grant_scope.unwrap_or(GrantScope::Once).as_str())
        }
        _ => None,
    };
    tracing::info!(
        session_id = sid,
        function_call_id = cid,
        function_id = %record.function_id,
        decision = request.decision.as_str(),
        rule = USER_RULE,
        kind = record.kind.as_str(),
        grant_scope,
        settled,
        "call resolved"
    );
    Ok(ResolveResponse {
        resolved: settled,
        turn_resumed,
    })
}

/// Registers `approval::resolve`.
pub fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        "approval::resolve",
        "Release a held call: allow runs it, deny answers it with the operator's reason. Human/console only.",
        |w, r: ResolveRequest| async move { resolve(&w, r).await },
    );
}
