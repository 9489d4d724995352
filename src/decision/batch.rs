//! `approval::resolve-batch` — one human decision on several held calls of
//! one turn (`architecture/contract.md` § What-if and batch decisions).
//! Human-only (`approval::*`).
//!
//! 1. **Choose.** With `items`: exactly those revisions — a held call whose
//!    `pending_at` differs is skipped (the human did not see it). Without:
//!    every record of the turn held now. A record of another turn, one
//!    already releasing, and (on allow) a folder prompt are skipped; each
//!    skipped record is listed with why ([`plan`], pure).
//! 2. **Claim**, in `pending_at` order: each through the one release path's
//!    claim (`ReleaseVia::Batch`, `expected` = the revision), so a record that
//!    expired, was purged, changed or is being released by someone else
//!    meanwhile is skipped and listed, never decided twice.
//! 3. **Carry**, in `pending_at` order, at most [`CONCURRENCY`] at once, in a
//!    task of its own (a caller that goes away does not stop it). The caller
//!    waits `resolve_wait_ms` in all; a release still under way then answers
//!    `releasing: true`, and its `pending-resolved` follows.
//!
//! Each record leaves through the release path's emit gate: exactly one
//! `pending-resolved` per record, whatever races the batch.
//!
//! # Format
//!
//! In: `{ session_id, turn_id, decision: "allow"|"deny", reason?, items?: [{function_call_id, pending_at}] }`
//! Out: `{ results: [{function_call_id, resolved, turn_resumed?, not_held?, releasing?, unknown?, error?}], skipped: [{function_call_id, why}] }`

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::resolve::{operator_reason, response, ResolveDecision};
use crate::error::{validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::pending::{PendingRecord, RecordKind, ReleaseVia};
use crate::provenance::Caller;
use crate::release::{Answer, Remember, Request, Ruling};
use crate::worker::Worker;

/// `approval::resolve-batch`.
pub(crate) const ID: &str = "approval::resolve-batch";

/// How many releases of one batch run at once.
pub(crate) const CONCURRENCY: usize = 8;
/// The most items one request may name.
pub(crate) const MAX_ITEMS: usize = 1_000;

/// One revision the human saw.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub(crate) struct BatchItem {
    /// The held call (non-empty, no `/`).
    pub function_call_id: String,
    /// Its `pending_at` as the human saw it.
    pub pending_at: u64,
}

/// `approval::resolve-batch` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct BatchRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// The turn whose held calls are decided (required).
    pub turn_id: String,
    /// allow or deny, for every call.
    pub decision: ResolveDecision,
    /// The operator's reason, shown to the model on deny.
    #[serde(default)]
    pub reason: Option<String>,
    /// Exactly these revisions (absent: every call of the turn held now).
    #[serde(default)]
    pub items: Option<Vec<BatchItem>>,
    /// The engine's stamp of the calling worker (it overwrites any value a
    /// caller put there); not part of the published request.
    #[serde(default, rename = "_caller_worker_id")]
    #[schemars(skip)]
    pub caller_worker_id: Option<String>,
}

/// One decided record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct BatchResult {
    /// The held call.
    pub function_call_id: String,
    /// This batch took the call out of the inbox.
    pub resolved: bool,
    /// Copied from the harness's reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_resumed: Option<bool>,
    /// The harness no longer held the call; nothing ran on this decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_held: Option<bool>,
    /// The decision is taken and still on its way; `pending-resolved`
    /// follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub releasing: Option<bool>,
    /// The harness's answer was lost; the call may have run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<bool>,
    /// The error code when the decision could not be carried
    /// (`approval/harness_unavailable`: the call is pending again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a record was left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SkipWhy {
    /// No record under the id (decided, expired or purged).
    Gone,
    /// The record is another revision than the one named: the human did not
    /// see it.
    Stale,
    /// The record belongs to another turn.
    OtherTurn,
    /// Another decision on it is under way.
    Releasing,
    /// A folder prompt: each names its own folder, so none is allowed in a
    /// batch (a batch deny denies it).
    FolderPrompt,
}

/// A record left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct Skipped {
    /// The held call.
    pub function_call_id: String,
    /// Why.
    pub why: SkipWhy,
}

/// `approval::resolve-batch` response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct BatchResponse {
    /// One per record decided, in `pending_at` order.
    pub results: Vec<BatchResult>,
    /// One per record left alone.
    pub skipped: Vec<Skipped>,
}

/// A record to decide: its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub function_call_id: String,
    pub pending_at: u64,
    pub kind: RecordKind,
}

/// One candidate: the id asked for, the live record under it, and the
/// revision the human saw (items only).
pub(crate) type Candidate = (String, Option<Arc<PendingRecord>>, Option<u64>);

/// Step 1 (PURE): which candidates to decide, in `pending_at` order, and
/// which to skip.
pub(crate) fn plan(
    turn_id: &str,
    allow: bool,
    candidates: Vec<Candidate>,
) -> (Vec<Target>, Vec<Skipped>) {
    let mut targets = Vec::new();
    let mut skipped = Vec::new();
    for (function_call_id, record, seen) in candidates {
        let why = match &record {
            None => Some(SkipWhy::Gone),
            Some(r) if r.turn_id != turn_id => Some(SkipWhy::OtherTurn),
            Some(r) if seen.is_some_and(|at| at != r.pending_at) => Some(SkipWhy::Stale),
            Some(r) if r.releasing => Some(SkipWhy::Releasing),
            Some(r) if allow && r.kind.is_folder() => Some(SkipWhy::FolderPrompt),
            Some(_) => None,
        };
        match (why, record) {
            (Some(why), _) => skipped.push(Skipped {
                function_call_id,
                why,
            }),
            (None, Some(r)) => targets.push(Target {
                function_call_id,
                pending_at: r.pending_at,
                kind: r.kind,
            }),
            (None, None) => {}
        }
    }
    targets.sort_by(|a, b| {
        (a.pending_at, &a.function_call_id).cmp(&(b.pending_at, &b.function_call_id))
    });
    (targets, skipped)
}

/// Checks the request's shape: ids, no duplicate or empty item list.
fn validate(request: &BatchRequest) -> Result<(), ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_id("turn_id", &request.turn_id)?;
    if let Some(items) = &request.items {
        if items.is_empty() {
            return Err(ApprovalError::InvalidPayload(
                "items must not be empty; omit it to decide every held call of the turn".into(),
            ));
        }
        if items.len() > MAX_ITEMS {
            return Err(ApprovalError::InvalidPayload(format!(
                "items: at most {MAX_ITEMS} per request, got {}",
                items.len()
            )));
        }
        let mut seen = HashSet::new();
        for item in items {
            validate_id("function_call_id", &item.function_call_id)?;
            if !seen.insert(item.function_call_id.as_str()) {
                return Err(ApprovalError::InvalidPayload(format!(
                    "items: function_call_id {} appears twice",
                    item.function_call_id
                )));
            }
        }
    }
    Ok(())
}

/// `approval::resolve-batch`.
pub(crate) async fn resolve_batch(
    worker: &Worker,
    request: BatchRequest,
) -> Result<BatchResponse, ApprovalError> {
    validate(&request)?;
    let decision = match request.decision {
        ResolveDecision::Allow => Ruling::Allow {
            grant_scope: None,
            remember: Remember::Nothing,
        },
        ResolveDecision::Deny => Ruling::Deny {
            reason: operator_reason(&request.reason),
        },
    };
    let items = request.items.map(|items| {
        items
            .into_iter()
            .map(|i| (i.function_call_id, i.pending_at))
            .collect()
    });
    let caller = worker.callers.of(request.caller_worker_id.as_deref()).await;
    Ok(decide(
        worker,
        &request.session_id,
        &request.turn_id,
        decision,
        items,
        (ReleaseVia::Batch, caller),
    )
    .await)
}

/// Steps 1–3 for a validated request; also what a link's "Allow all"
/// runs with the revisions its page showed. `by`: how the decision came and
/// who carried it (`pending-resolved`'s `decided_by`).
pub(crate) async fn decide(
    worker: &Worker,
    session_id: &str,
    turn_id: &str,
    decision: Ruling,
    items: Option<Vec<(String, u64)>>,
    by: (ReleaseVia, Option<Caller>),
) -> BatchResponse {
    let (via, caller) = by;
    let started = tokio::time::Instant::now();
    let candidates: Vec<Candidate> = match items {
        Some(items) => items
            .into_iter()
            .map(|(cid, at)| {
                let record = worker.pending.get(session_id, &cid);
                (cid, record, Some(at))
            })
            .collect(),
        None => worker
            .pending
            .keys_of_turn(turn_id)
            .into_iter()
            .filter(|(sid, _)| sid == session_id)
            .map(|(_, cid)| {
                let record = worker.pending.get(session_id, &cid);
                (cid, record, None)
            })
            .collect(),
    };
    let allow = matches!(decision, Ruling::Allow { .. });
    let (targets, mut skipped) = plan(turn_id, allow, candidates);

    // Claim each, in pending_at order.
    let requests = targets.into_iter().map(|t| Request {
        session_id: session_id.to_string(),
        function_call_id: t.function_call_id,
        expected: Some((t.pending_at, t.kind)),
        decision: decision.clone(),
        via,
        caller: caller.clone(),
    });
    let releaser = &worker.releaser;
    let claimed: Vec<_> = futures_util::stream::iter(requests)
        .map(|request| async move {
            let claim = releaser.claim(&request).await;
            (request, claim)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut results = Vec::new();
    let mut carried = Vec::new();
    for (request, claim) in claimed {
        match claim {
            Ok(claim) => carried.push((claim, request)),
            Err(answer) => match skip_of(&answer) {
                Some(why) => skipped.push(Skipped {
                    function_call_id: request.function_call_id,
                    why,
                }),
                None => results.push(result_of(request.function_call_id, answer)),
            },
        }
    }

    // Carry them in a task of their own; wait resolve_wait_ms in all.
    let ids: Vec<String> = carried
        .iter()
        .map(|(_, r)| r.function_call_id.clone())
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let carrier = releaser.clone();
    tokio::spawn(async move {
        let carrier = &carrier;
        let mut answers = futures_util::stream::iter(carried.into_iter().enumerate())
            .map(|(i, (claim, request))| async move { (i, carrier.carry(claim, request).await) })
            .buffered(CONCURRENCY);
        while let Some(answer) = answers.next().await {
            // The caller may have gone; the releases go on regardless.
            let _ = tx.send(answer);
        }
    });
    let deadline = started + releaser.resolve_wait();
    let mut answers: Vec<Option<Answer>> = ids.iter().map(|_| None).collect();
    let mut pending = ids.len();
    while pending > 0 {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((i, answer))) => {
                answers[i] = Some(answer);
                pending -= 1;
            }
            Ok(None) | Err(_) => break,
        }
    }
    for (cid, answer) in ids.into_iter().zip(answers) {
        results.push(result_of(cid, answer.unwrap_or(Answer::Releasing)));
    }
    BatchResponse { results, skipped }
}

/// A claim that could not be taken, as a skip.
fn skip_of(answer: &Answer) -> Option<SkipWhy> {
    match answer {
        Answer::Absent => Some(SkipWhy::Gone),
        Answer::Stale => Some(SkipWhy::Stale),
        Answer::Releasing => Some(SkipWhy::Releasing),
        _ => None,
    }
}

/// One release's outcome, as `approval::resolve` would answer it.
fn result_of(function_call_id: String, answer: Answer) -> BatchResult {
    match response(answer) {
        Ok(out) => BatchResult {
            function_call_id,
            resolved: out.resolved,
            turn_resumed: out.turn_resumed,
            not_held: out.not_held,
            releasing: out.releasing,
            unknown: out.unknown,
            error: None,
        },
        Err(err) => BatchResult {
            function_call_id,
            error: Some(err.code().to_string()),
            ..BatchResult::default()
        },
    }
}

/// Registers `approval::resolve-batch`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "Decide every held call of one turn (or exactly the listed revisions) at once: each goes through the one release path in pending_at order; calls the human did not see, releasing ones and (on allow) folder prompts are skipped and listed. Human/console only.",
        |w, r: BatchRequest| async move { resolve_batch(&w, r).await },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pending::PendingRecord;

    fn record(cid: &str, turn: &str, at: u64, kind: RecordKind) -> Arc<PendingRecord> {
        let value = serde_json::json!({
            "session_id": "s", "turn_id": turn, "function_call_id": cid,
            "function_id": "demo::echo", "kind": kind, "arguments_excerpt": {},
            "pending_at": at, "depth": 0,
        });
        Arc::new(serde_json::from_value(value).expect("a record"))
    }

    #[test]
    fn rule_24_plan_takes_the_turns_calls_in_pending_at_order_and_lists_the_rest() {
        let mut releasing = (*record("c5", "t", 5, RecordKind::Function)).clone();
        releasing.releasing = true;
        let candidates = vec![
            (
                "c3".into(),
                Some(record("c3", "t", 30, RecordKind::Function)),
                None,
            ),
            (
                "c1".into(),
                Some(record("c1", "t", 10, RecordKind::Function)),
                None,
            ),
            (
                "c2".into(),
                Some(record("c2", "t", 20, RecordKind::FilesystemAccess)),
                None,
            ),
            (
                "c4".into(),
                Some(record("c4", "other", 1, RecordKind::Function)),
                None,
            ),
            ("c5".into(), Some(Arc::new(releasing)), None),
            ("c6".into(), None, Some(7)),
            (
                "c7".into(),
                Some(record("c7", "t", 70, RecordKind::Function)),
                Some(69),
            ),
            (
                "c8".into(),
                Some(record("c8", "t", 80, RecordKind::Function)),
                Some(80),
            ),
        ];
        let (targets, skipped) = plan("t", true, candidates.clone());
        let order: Vec<_> = targets
            .iter()
            .map(|t| t.function_call_id.as_str())
            .collect();
        assert_eq!(order, ["c1", "c3", "c8"]);
        let why: Vec<_> = skipped
            .iter()
            .map(|s| (s.function_call_id.as_str(), s.why))
            .collect();
        assert_eq!(
            why,
            [
                ("c2", SkipWhy::FolderPrompt),
                ("c4", SkipWhy::OtherTurn),
                ("c5", SkipWhy::Releasing),
                ("c6", SkipWhy::Gone),
                ("c7", SkipWhy::Stale),
            ]
        );
        // A deny takes the folder prompt too.
        let (targets, _) = plan("t", false, candidates);
        let order: Vec<_> = targets
            .iter()
            .map(|t| t.function_call_id.as_str())
            .collect();
        assert_eq!(order, ["c1", "c2", "c3", "c8"]);
        assert_eq!(targets[1].kind, RecordKind::FilesystemAccess);
    }

    #[test]
    fn rule_24_bad_batches_are_invalid_payloads() {
        let base = BatchRequest {
            session_id: "s".into(),
            turn_id: "t".into(),
            decision: ResolveDecision::Allow,
            reason: None,
            items: None,
            caller_worker_id: None,
        };
        assert!(validate(&base).is_ok());
        let item = |cid: &str| BatchItem {
            function_call_id: cid.into(),
            pending_at: 1,
        };
        for bad in [
            BatchRequest {
                turn_id: String::new(),
                ..base.clone()
            },
            BatchRequest {
                session_id: "a/b".into(),
                ..base.clone()
            },
            BatchRequest {
                items: Some(vec![]),
                ..base.clone()
            },
            BatchRequest {
                items: Some(vec![item("c"), item("c")]),
                ..base.clone()
            },
            BatchRequest {
                items: Some(vec![item("x/y")]),
                ..base.clone()
            },
        ] {
            let err = validate(&bad).expect_err("refused");
            assert_eq!(err.code(), "approval/invalid_payload", "{bad:?}");
        }
    }
}
