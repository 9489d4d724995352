//! `approval::resolve` — the decision plane's release
//! (`architecture/contract.md` § Resolve).
//!
//! The decision goes through the one release path (`crate::release`), as a
//! link's, an expiry's and a batch's do: the claim, the harness, then the
//! emit-gated delete and `pending-resolved`. A harness failure is
//! `approval/harness_unavailable` and the call is pending again: a decision
//! is never lost. A release still under way after `resolve_wait_ms` answers
//! `releasing`.
//!
//! # Format
//!
//! In: `{ session_id, function_call_id, decision: "allow"|"deny"|"edit", reason?: string|null, grant_scope? | access_duration?: "once"|"session"|"always", arguments?: object, ttl_ms?: int }`
//! (`arguments` and `ttl_ms` with `edit` only: `crate::decision::edit`)
//! Out: `{ resolved: bool, turn_resumed?: bool, not_held?: true, releasing?: true, unknown?: true }`

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{validate_id, ApprovalError, StateError};
use crate::folders::GrantScope;
use crate::functions::register_typed;
use crate::pending::ReleaseVia;
use crate::provenance::{DecidedBy, DecidedVia};
use crate::release::{Answer, Remember, Request, Ruling};
use crate::worker::Worker;

/// `approval::resolve`.
pub(crate) const ID: &str = "approval::resolve";

/// The human's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResolveDecision {
    /// Run the call.
    Allow,
    /// Answer the call with a denial.
    Deny,
}

/// What `approval::resolve` may decide: a decision, or an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResolveChoice {
    /// Run the call.
    Allow,
    /// Answer the call with a denial.
    Deny,
    /// Deny the call with an edited call to make instead, which a one-shot
    /// grant lets through once (contract §28).
    Edit,
}

/// `approval::resolve` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct ResolveRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// The held call (non-empty, no `/`).
    pub function_call_id: String,
    /// allow, deny or edit.
    pub decision: ResolveChoice,
    /// The operator's reason, shown to the model on deny.
    #[serde(default)]
    pub reason: Option<String>,
    /// For folder prompts: once (default), session or always.
    #[serde(default)]
    pub grant_scope: Option<GrantScope>,
    /// The same as `grant_scope`, as today's consoles spell it; both given
    /// and different is an error.
    #[serde(default)]
    pub access_duration: Option<GrantScope>,
    /// With `edit`: the edited call's arguments (an object).
    #[serde(default)]
    pub arguments: Option<Value>,
    /// With `edit`: how long the edited call's grant lives (default
    /// 600000, capped by the configuration's `edit_ttl_max_ms`).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// The engine's stamp of the calling worker (it overwrites any value a
    /// caller put there); not part of the published request.
    #[serde(default, rename = "_caller_worker_id")]
    #[schemars(skip)]
    pub caller_worker_id: Option<String>,
}

/// `approval::resolve` response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct ResolveResponse {
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
    /// True when the decision is taken and still on its way (the harness is
    /// running the call): `approval::pending-resolved` follows when the
    /// harness answers. Also the answer to any other decision on the call
    /// meanwhile, which changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub releasing: Option<bool>,
    /// True when the harness's answer was lost and it cannot say what became
    /// of the call: it may have run (`pending-resolved` says `unknown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<bool>,
}

/// Resolves a held call (`approval::resolve`) through the one release
/// path; answers within `resolve_wait_ms`.
pub(crate) async fn resolve(
    worker: &Worker,
    request: ResolveRequest,
) -> Result<ResolveResponse, ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_id("function_call_id", &request.function_call_id)?;
    let grant_scope = match (request.grant_scope, request.access_duration) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApprovalError::InvalidPayload(format!(
                "grant_scope ({}) and access_duration ({}) differ; send one of them",
                a.as_str(),
                b.as_str()
            )))
        }
        (a, b) => a.or(b),
    };
    if worker
        .pending
        .is_unreadable(&request.session_id, &request.function_call_id)
    {
        return resolve_unreadable(worker, &request).await;
    }
    let mut request = request;
    match (request.decision, request.arguments.take()) {
        (ResolveChoice::Edit, Some(arguments)) => {
            if grant_scope.is_some() {
                return Err(ApprovalError::InvalidPayload(
                    "grant_scope is for folder prompts, which cannot be edited".into(),
                ));
            }
            let caller = worker.callers.of(request.caller_worker_id.as_deref()).await;
            return super::edit::edit(worker, super::edit::Edit::of(request, arguments, caller))
                .await;
        }
        (ResolveChoice::Edit, None) => {
            return Err(ApprovalError::InvalidPayload(
                "an edit needs the edited call's arguments".into(),
            ))
        }
        (_, Some(_)) => {
            return Err(ApprovalError::InvalidPayload(
                "arguments are sent with decision edit only".into(),
            ))
        }
        (_, None) => {}
    }
    let decision = match request.decision {
        ResolveChoice::Allow => Ruling::Allow {
            grant_scope,
            remember: Remember::Nothing,
        },
        ResolveChoice::Deny | ResolveChoice::Edit => Ruling::Deny {
            reason: operator_reason(&request.reason),
        },
    };
    let caller = worker.callers.of(request.caller_worker_id.as_deref()).await;
    let release = Request {
        session_id: request.session_id,
        function_call_id: request.function_call_id,
        expected: None,
        decision,
        via: ReleaseVia::Resolve,
        caller,
    };
    let wait = worker.releaser.resolve_wait();
    response(worker.releaser.release(release, Some(wait)).await)
}

/// A decision on a stored value that does not parse as a record (§21.9):
/// a deny removes it without calling the harness (it has no usable
/// `turn_id`); an allow cannot be carried out.
async fn resolve_unreadable(
    worker: &Worker,
    request: &ResolveRequest,
) -> Result<ResolveResponse, ApprovalError> {
    match request.decision {
        ResolveChoice::Allow | ResolveChoice::Edit => Err(ApprovalError::InvalidPayload(
            "the stored held call does not parse (kind unreadable): it can only be denied".into(),
        )),
        ResolveChoice::Deny => {
            let caller = worker.callers.of(request.caller_worker_id.as_deref()).await;
            let decided_by = DecidedBy::by(DecidedVia::Resolve, caller, crate::time::now_ms());
            let removed = worker
                .pending
                .remove_unreadable(&request.session_id, &request.function_call_id, decided_by)
                .await?;
            if removed {
                // A human decided a call of the session: as on the release
                // path, the reviewer's breaker for it closes.
                worker.reviews.human_decided(&request.session_id);
            }
            Ok(ResolveResponse {
                resolved: removed,
                ..ResolveResponse::default()
            })
        }
    }
}

/// What `approval::resolve` answers for a release's outcome.
pub(crate) fn response(answer: Answer) -> Result<ResolveResponse, ApprovalError> {
    let mut out = ResolveResponse::default();
    match answer {
        Answer::Taken {
            turn_resumed,
            announced,
        } => {
            out.resolved = announced;
            out.turn_resumed = turn_resumed;
        }
        Answer::NotHeld => {
            out.turn_resumed = Some(false);
            out.not_held = Some(true);
        }
        Answer::Unknown => out.unknown = Some(true),
        Answer::Releasing => out.releasing = Some(true),
        Answer::Absent | Answer::Stale => {}
        Answer::Unavailable(err) => return Err(ApprovalError::HarnessUnavailable(err)),
        Answer::State(err) => return Err(state_unavailable(err)),
    }
    Ok(out)
}

/// A claim that could not be written: `approval/state_unavailable` (a
/// record under another key's lock, which no resolve makes, is the payload's).
fn state_unavailable(err: StateError) -> ApprovalError {
    match err {
        StateError::WrongKey => ApprovalError::InvalidPayload(err.to_string()),
        err => ApprovalError::from(err),
    }
}

/// The operator's reason, when it says something.
pub(crate) fn operator_reason(reason: &Option<String>) -> Option<String> {
    reason
        .as_ref()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .map(str::to_string)
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
