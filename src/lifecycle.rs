//! Lifecycle purges (`architecture/contract.md` § Bindings): a completed turn
//! and a deleted session take their held calls out of the inbox (outcome
//! `aborted`), with the grant watch's memory and, for a session, its
//! settings. Every record leaves through the inbox store's emit gate.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::is_valid_id;
use crate::functions::{register_typed, Ack};
use crate::inbox::{Outcome, Purged, RecordKey};
use crate::worker::Worker;

/// `approval::on-turn-completed`.
pub(crate) const TURN_COMPLETED_ID: &str = "approval::on-turn-completed";
/// `approval::on-session-deleted`.
pub(crate) const SESSION_DELETED_ID: &str = "approval::on-session-deleted";

/// `harness::turn-completed` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TurnCompleted {
    /// The turn that ended.
    pub turn_id: String,
    /// Its session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// completed, cancelled or failed.
    // Published in the schema; every status purges alike.
    #[serde(default)]
    #[allow(dead_code)]
    pub status: Option<String>,
}

/// `session::deleted` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SessionDeleted {
    /// The deleted session.
    pub session_id: String,
}

/// Takes records out through the emit gate, announced as aborted. A state
/// failure leaves that record for the next event. `why` names the lifecycle
/// event in the log (`turn_completed`, `session_deleted`).
async fn purge(worker: &Worker, keys: Vec<RecordKey>, why: &'static str) -> usize {
    let mut purged = 0;
    for (sid, cid) in keys {
        let lock = worker.inbox.lock(&sid, &cid).await;
        match lock.purge(Outcome::Aborted, why).await {
            Ok(Purged::Removed(record)) => {
                purged += 1;
                tracing::info!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = "aborted", rule = why, "held call purged");
            }
            Ok(Purged::Releasing) => {
                tracing::info!(session_id = %sid, function_call_id = %cid, rule = why, "held call left to the decision under way; its release settles it");
            }
            Ok(Purged::Absent) => {}
            Err(err) => {
                tracing::warn!(session_id = %sid, function_call_id = %cid, error = %err, "purge failed; retried on the next event")
            }
        }
    }
    purged
}

/// Purges a turn's held calls and its grant-watch attempt counters.
async fn on_turn_completed(worker: &Worker, event: TurnCompleted) -> usize {
    let keys: Vec<RecordKey> = worker
        .inbox
        .keys_of_turn(&event.turn_id)
        .into_iter()
        .filter(|(sid, _)| event.session_id.as_deref().is_none_or(|s| s == sid))
        .collect();
    let purged = purge(worker, keys, "turn_completed").await;
    worker
        .folders
        .memory
        .forget_turn(&event.turn_id, event.session_id.as_deref())
        .await;
    purged
}

/// Purges a session: settings, denied dirs, attempt counters, held calls.
async fn on_session_deleted(worker: &Worker, event: SessionDeleted) -> usize {
    if !is_valid_id(&event.session_id) {
        return 0;
    }
    let sid = event.session_id.as_str();
    let purged = purge(worker, worker.inbox.keys_of_session(sid), "session_deleted").await;
    if let Err(err) = worker.settings.clear(sid).await {
        tracing::warn!(session_id = sid, error = %err, "settings not cleared");
    }
    worker.folders.memory.forget_session(sid).await;
    purged
}

/// Registers the lifecycle handlers.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        TURN_COMPLETED_ID,
        "Internal (harness::turn-completed): purges the turn's held calls (outcome aborted) and attempt counters.",
        |w, e: TurnCompleted| async move {
            on_turn_completed(&w, e).await;
            Ok(Ack { ok: true })
        },
    );
    register_typed(
        worker,
        SESSION_DELETED_ID,
        "Internal (session::deleted): purges the session's settings, denied dirs, attempt counters and held calls.",
        |w, e: SessionDeleted| async move {
            on_session_deleted(&w, e).await;
            Ok(Ack { ok: true })
        },
    );
}
