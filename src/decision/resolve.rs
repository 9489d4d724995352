//! `approval::resolve` — the decision plane's release
//! (`architecture/contract.md` § Resolve).
//!
//! [`decide`] is the one path a human decision takes, from
//! `approval::resolve` and from an approval link alike (which adds the
//! revision it names, and may ask to remember the function).
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

use crate::engine::ReleaseAction;
use crate::error::{validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::grant_watch::GrantScope;
use crate::inbox::{Claim, Outcome, RecordKind};
use crate::worker::Worker;

/// `approval::resolve`.
pub(crate) const ID: &str = "approval::resolve";

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

/// What the logs name as the rule behind a human's decision, as the denial
/// envelope names the decider (`denied_by: "user"`).
const USER_RULE: &str = "user";

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
    /// True when the harness no longer held the call (its hook budget ran
    /// out and it failed closed, the turn ended, or another decision won):
    /// the call did not run on this decision, and its record is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_held: Option<bool>,
}

/// The `pending-resolved` reason of a record whose call the harness no
/// longer held.
const NOT_HELD: &str = "not_held";

/// The default denial text.
const OPERATOR_REJECTED: &str = "Rejected by operator.";

/// The operator's reason, when it says something.
fn operator_reason(reason: &Option<String>) -> Option<String> {
    reason
        .as_ref()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// One human decision on one held call, from `approval::resolve` or an
/// approval link: both go through [`decide`].
#[derive(Debug, Clone)]
pub(crate) struct Decision {
    /// The session (validated by the caller).
    pub session_id: String,
    /// The held call (validated by the caller).
    pub function_call_id: String,
    /// allow or deny.
    pub decision: ResolveDecision,
    /// The operator's reason (deny).
    pub reason: Option<String>,
    /// For folder prompts: once (default), session or always.
    pub grant_scope: Option<GrantScope>,
    /// "Allow and don't ask again in this session": on an allowed function
    /// hold, `approve-always` the function for the session first.
    pub remember: bool,
    /// The revision `(pending_at, kind)` the decider saw (a link names one):
    /// any other record under the ids is left alone.
    pub expected: Option<(u64, RecordKind)>,
}

/// How [`decide`] ended.
#[derive(Debug)]
pub(crate) enum Decided {
    /// The harness was asked; its answer, as `approval::resolve` gives it.
    Answered(ResolveResponse),
    /// No record under the ids.
    Absent,
    /// A record under the ids, but not the expected revision.
    Stale,
    /// Another decision on the record is in flight.
    InFlight,
}

impl Decided {
    /// `approval::resolve`'s answer: anything but an answer is `{resolved: false}`.
    fn into_response(self) -> ResolveResponse {
        match self {
            Decided::Answered(response) => response,
            Decided::Absent | Decided::Stale | Decided::InFlight => ResolveResponse {
                resolved: false,
                turn_resumed: None,
                not_held: None,
            },
        }
    }
}

/// Resolves a held call (`approval::resolve`).
pub(crate) async fn resolve(
    worker: &Worker,
    request: ResolveRequest,
) -> Result<ResolveResponse, ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_id("function_call_id", &request.function_call_id)?;
    let decided = decide(
        worker,
        Decision {
            session_id: request.session_id,
            function_call_id: request.function_call_id,
            decision: request.decision,
            reason: request.reason,
            grant_scope: request.grant_scope,
            remember: false,
            expected: None,
        },
    )
    .await?;
    Ok(decided.into_response())
}

/// Carries out one decision: claim the record (the expected revision, if
/// given), remember the function for the session if asked, release the call
/// through the harness, then remove the record through the emit gate.
pub(crate) async fn decide(worker: &Worker, d: Decision) -> Result<Decided, ApprovalError> {
    let (sid, cid) = (d.session_id.as_str(), d.function_call_id.as_str());
    let record = match worker.inbox.claim(sid, cid, d.expected).await {
        Claim::Claimed(record) => record,
        Claim::Absent => return Ok(Decided::Absent),
        Claim::Stale => return Ok(Decided::Stale),
        Claim::InFlight => return Ok(Decided::InFlight),
    };
    let reason = operator_reason(&d.reason);
    if d.remember {
        if record.kind == RecordKind::Function && d.decision == ResolveDecision::Allow {
            let function_id = record.function_id.clone();
            if let Err(err) = worker
                .settings
                .mutate(sid, |s, now| s.approve_always(&function_id, now))
                .await
            {
                worker.inbox.abandon_resolve(&record.key());
                tracing::warn!(session_id = sid, function_call_id = cid, function_id = %record.function_id, error = %err, "approve-always not stored; the call stays held");
                return Err(err);
            }
            tracing::info!(session_id = sid, function_id = %record.function_id, "approved always");
        } else {
            tracing::info!(
                session_id = sid,
                function_call_id = cid,
                "remember ignored: only an allowed function hold is remembered"
            );
        }
    }
    let action = match (record.kind, d.decision) {
        (RecordKind::Function, decision) => {
            if d.grant_scope.is_some() {
                tracing::info!(
                    session_id = sid,
                    function_call_id = cid,
                    "grant_scope ignored: the record is not a folder-access prompt"
                );
            }
            match decision {
                ResolveDecision::Allow => ReleaseAction::execute(None),
                ResolveDecision::Deny => {
                    record.user_denial(reason.as_deref().unwrap_or(OPERATOR_REJECTED))
                }
            }
        }
        (RecordKind::FolderAccess, ResolveDecision::Allow) => {
            let scope = d.grant_scope.unwrap_or(GrantScope::Once);
            worker
                .grant_watch
                .allow(&worker.engine, &record, scope)
                .await
        }
        (RecordKind::FolderAccess, ResolveDecision::Deny) => {
            worker.grant_watch.deny(&record, reason.as_deref()).await
        }
    };
    let released = match worker.engine.harness_resolve(&record.release(action)).await {
        Ok(released) => released,
        Err(err) => {
            worker.inbox.abandon_resolve(&record.key());
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %record.function_id, decision = d.decision.as_str(), error = %err, "harness did not take the decision; the call stays held");
            return Err(ApprovalError::HarnessUnavailable(err));
        }
    };
    // The harness's answer is the truth: only a call it still held ran (or
    // was answered) on this decision.
    let taken = released.resolved == Some(true);
    let (outcome, reason) = match (taken, d.decision) {
        (false, _) => (Outcome::Aborted, Some(NOT_HELD.to_string())),
        (true, ResolveDecision::Allow) => (Outcome::Allow, None),
        (true, ResolveDecision::Deny) => (Outcome::Deny, reason),
    };
    let settled = match worker.inbox.finish_resolve(&record, outcome, reason).await {
        Ok(settled) => settled,
        Err(err) => {
            worker.inbox.abandon_resolve(&record.key());
            return Err(err.into());
        }
    };
    if !taken {
        tracing::warn!(
            session_id = sid,
            function_call_id = cid,
            function_id = %record.function_id,
            decision = d.decision.as_str(),
            settled,
            "the harness no longer held the call; its record is removed and nothing ran on this decision"
        );
        return Ok(Decided::Answered(ResolveResponse {
            resolved: false,
            turn_resumed: Some(false),
            not_held: Some(true),
        }));
    }
    let grant_scope = match record.kind {
        RecordKind::FolderAccess if d.decision == ResolveDecision::Allow => {
            Some(d.grant_scope.unwrap_or(GrantScope::Once).as_str())
        }
        _ => None,
    };
    tracing::info!(
        session_id = sid,
        function_call_id = cid,
        function_id = %record.function_id,
        decision = d.decision.as_str(),
        rule = USER_RULE,
        kind = record.kind.as_str(),
        grant_scope,
        remembered = d.remember && record.kind == RecordKind::Function && d.decision == ResolveDecision::Allow,
        settled,
        "call resolved"
    );
    Ok(Decided::Answered(ResolveResponse {
        resolved: settled,
        turn_resumed: released.turn_resumed,
        not_held: None,
    }))
}

/// Registers `approval::resolve`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "Release a held call: allow runs it, deny answers it with the operator's reason. Human/console only.",
        |w, r: ResolveRequest| async move { resolve(&w, r).await },
    );
}
