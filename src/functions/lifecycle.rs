//! Lifecycle purges (contract §1, §8): a completed turn and a deleted session
//! take their held calls out of the inbox (outcome `aborted`), with the
//! grant watch's per-call and per-session memory.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::register_typed;
use super::settings::Ack;
use crate::error::validate_id;
use crate::pending::record::RecordKey;
use crate::subscriptions::{Outcome, PendingResolved};
use crate::worker::Worker;

/// `harness::turn-completed` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TurnCompleted {
    /// The turn that ended.
    pub turn_id: String,
    /// Its session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// completed, cancelled or failed.
    #[serde(default)]
    pub status: Option<String>,
}

/// `session::deleted` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SessionDeleted {
    /// The deleted session.
    pub session_id: String,
}

/// Takes records out through the emit gate, announcing each as aborted. A
/// state failure leaves that record for the next event. `why` names the
/// lifecycle event in the log (`turn_completed`, `session_deleted`).
async fn purge(worker: &Worker, keys: Vec<RecordKey>, why: &'static str) -> usize {
    let mut purged = 0;
    for (sid, cid) in keys {
        match worker.pending.settle(&sid, &cid).await {
            Ok(Some(record)) => {
                purged += 1;
                tracing::info!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = "aborted", rule = why, "held call purged");
                worker.subscriptions.emit_resolved(
                    &worker.sibling,
                    PendingResolved::of(&record, Outcome::Aborted, None),
                );
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(session_id = %sid, function_call_id = %cid, error = %err, "purge failed; retried on the next event")
            }
        }
    }
    purged
}

/// Purges a turn's held calls and its grant-watch attempt counters.
pub async fn on_turn_completed(worker: &Worker, event: TurnCompleted) -> usize {
    let keys: Vec<RecordKey> = worker
        .pending
        .keys_of_turn(&event.turn_id)
        .into_iter()
        .filter(|(sid, _)| event.session_id.as_deref().is_none_or(|s| s == sid))
        .collect();
    let purged = purge(worker, keys, "turn_completed").await;
    super::grant_watch::forget_turn(worker, &event.turn_id, event.session_id.as_deref()).await;
    purged
}

/// Purges a session: settings, denied dirs, attempt counters, held calls.
pub async fn on_session_deleted(worker: &Worker, event: SessionDeleted) -> usize {
    if validate_id("session_id", &event.session_id).is_err() {
        return 0;
    }
    let sid = event.session_id.as_str();
    let purged = purge(
        worker,
        worker.pending.keys_of_session(sid),
        "session_deleted",
    )
    .await;
    if let Err(err) = worker.settings.clear(sid).await {
        tracing::warn!(session_id = sid, error = %err, "settings not cleared");
    }
    super::grant_watch::forget_session(worker, sid).await;
    purged
}

/// Registers the lifecycle handlers.
pub fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        "approval::on-turn-completed",
        "Internal (harness::turn-completed): purges the turn's held calls (outcome aborted) and attempt counters.",
        |w, e: TurnCompleted| async move {
            on_turn_completed(&w, e).await;
            Ok(Ack { ok: true })
        },
    );
    register_typed(
        worker,
        "approval::on-session-deleted",
        "Internal (session::deleted): purges the session's settings, denied dirs, attempt counters and held calls.",
        |w, e: SessionDeleted| async move {
            on_session_deleted(&w, e).await;
            Ok(Ack { ok: true })
        },
    );
}
