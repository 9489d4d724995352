//! The events the engine and the harness send the worker
//! (`architecture/contract.md` § Bindings): a completed turn and a deleted
//! session take their held calls out of the inbox (outcome `aborted`), with
//! the grant watch's memory and, for a session, its settings; the harness's
//! `ready` reconciles the inbox with what it holds; a configuration change
//! re-reads the policy. Every record leaves through the pending store's emit
//! gate.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::is_valid_id;
use crate::functions::{register_shaped, register_typed, Ack};
use crate::pending::{Purged, RecordKey, Resolution};
use crate::provenance::DecidedVia;
use crate::release::NOT_HELD;
use crate::worker::Worker;

pub(crate) use crate::bindings::{HARNESS_READY_ID, SESSION_DELETED_ID, TURN_COMPLETED_ID};

/// How many sessions a reconcile works on at once. Kept low so the pass
/// stays off the gate's path: with 10k held calls across 1k sessions on a
/// real engine, 8 at once slowed the gate's p99 about 13× during the pass
/// (`architecture/performance.md` § Reconcile with the harness).
const RECONCILE_CONCURRENCY: usize = 2;
/// A record younger than this is left alone by a reconcile: the harness
/// may not have parked its call yet (twice the hooks' 5 s timeout).
const RECONCILE_MIN_AGE_MS: u64 = 10_000;

/// `harness::turn-completed` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct TurnCompleted {
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

/// `harness::ready` payload (read as nothing).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct Empty {}

/// `session::deleted` payload (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct SessionDeleted {
    /// The deleted session.
    pub session_id: String,
}

/// Takes records out through the emit gate, announced as aborted. A state
/// failure leaves that record for the next event. `why`, the lifecycle
/// path (`turn_completed`, `session_deleted`), is the event's reason, the
/// log's rule and `decided_by.via`.
async fn purge(worker: &Worker, keys: Vec<RecordKey>, why: DecidedVia) -> usize {
    let mut purged = 0;
    for (sid, cid) in keys {
        let lock = worker.pending.lock(&sid, &cid).await;
        match lock.purge(Resolution::Aborted, why.as_str(), why).await {
            Ok(Purged::Removed(record)) => {
                purged += 1;
                tracing::info!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = "aborted", rule = why.as_str(), "held call purged");
            }
            Ok(Purged::Releasing) => {
                tracing::info!(session_id = %sid, function_call_id = %cid, rule = why.as_str(), "held call left to the decision under way; its release settles it");
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
        .pending
        .keys_of_turn(&event.turn_id)
        .into_iter()
        .filter(|(sid, _)| event.session_id.as_deref().is_none_or(|s| s == sid))
        .collect();
    let purged = purge(worker, keys, DecidedVia::TurnCompleted).await;
    worker
        .folders
        .memory
        .forget_turn(&event.turn_id, event.session_id.as_deref())
        .await;
    purged
}

/// Purges a session: settings, denied dirs, attempt counters, held calls,
/// the reviewer's memory of it (its recent verdicts and breaker).
async fn on_session_deleted(worker: &Worker, event: SessionDeleted) -> usize {
    if !is_valid_id(&event.session_id) {
        return 0;
    }
    let sid = event.session_id.as_str();
    let purged = purge(
        worker,
        worker.pending.keys_of_session(sid),
        DecidedVia::SessionDeleted,
    )
    .await;
    if let Err(err) = worker.settings.clear(sid).await {
        tracing::warn!(session_id = sid, error = %err, "settings not cleared");
    }
    worker.folders.memory.forget_session(sid).await;
    if let Err(err) = worker.edits.forget_session(sid).await {
        tracing::warn!(session_id = sid, error = %err, "edit grants not cleared");
    }
    worker.reviews.forget_session(sid);
    purged
}

/// Reconciles the inbox with the harness (`architecture/contract.md` § Two
/// harness generations, "Reconcile"): for each session with records, ask
/// `harness::status` which calls are pending; a record whose call is not
/// (and that is neither `releasing` nor younger than twice the hook timeout)
/// leaves through the emit gate as `aborted` / `not_held`. The brief's
/// harness has no `harness::status`: nothing is done. Bounded concurrency;
/// never on the gate's path. Returns how many records left.
pub(crate) async fn reconcile(worker: &Worker) -> usize {
    use futures_util::stream::{self, StreamExt};
    let sessions = worker.pending.session_ids();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let removed: Vec<usize> = stream::iter(sessions)
        .map(|sid| {
            let stop = &stop;
            async move {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return 0;
                }
                match worker.engine.harness_pending_calls(&sid).await {
                    Ok(pending) => reconcile_session(worker, &sid, &pending).await,
                    Err(err) if err.is_function_not_found() => {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        0
                    }
                    Err(err) => {
                        tracing::warn!(session_id = %sid, error = %err, "harness::status failed; the session's records are kept");
                        0
                    }
                }
            }
        })
        .buffer_unordered(RECONCILE_CONCURRENCY)
        .collect()
        .await;
    let removed = removed.into_iter().sum();
    if removed > 0 {
        tracing::info!(
            removed,
            "reconciled with the harness: records of calls it no longer holds removed"
        );
    }
    removed
}

/// One session of [`reconcile`].
async fn reconcile_session(worker: &Worker, sid: &str, pending: &[String]) -> usize {
    let now = crate::time::now_ms();
    let mut removed = 0;
    for (_, cid) in worker.pending.keys_of_session(sid) {
        if pending.contains(&cid) {
            continue;
        }
        let lock = worker.pending.lock(sid, &cid).await;
        let Some(record) = lock.get() else {
            continue;
        };
        if record.pending_at + RECONCILE_MIN_AGE_MS > now {
            continue;
        }
        match lock
            .purge(Resolution::Aborted, NOT_HELD, DecidedVia::Reconcile)
            .await
        {
            Ok(Purged::Removed(record)) => {
                removed += 1;
                tracing::info!(session_id = sid, function_call_id = %cid, function_id = %record.function_id, decision = "aborted", rule = "reconcile", "the harness no longer holds the call; its record is removed");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(session_id = sid, function_call_id = %cid, error = %err, "reconcile could not remove a record; kept")
            }
        }
    }
    removed
}

/// A `configuration` change event; the worker re-reads the entry rather
/// than trust it.
// Only a schema: the handler takes the payload as raw JSON and ignores it.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(crate) struct ConfigurationEvent {
    /// Always `configuration`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `configuration:registered`, `configuration:updated` or `configuration:deleted`.
    pub event_type: Option<String>,
    /// The entry's id (`approval-gate`).
    pub id: Option<String>,
    /// The value before the change.
    pub old_value: Option<serde_json::Value>,
    /// The value after the change.
    pub new_value: Option<serde_json::Value>,
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
    register_shaped::<ConfigurationEvent, _, _, _>(
        worker,
        crate::config::ID,
        "Internal (configuration trigger): re-reads the approval-gate entry and swaps the compiled policy.",
        |w, _event| async move {
            if let Err(err) = crate::config::reload(&w.engine, &w.config).await {
                tracing::error!(error = %err, "configuration reload failed; keeping the last good configuration");
            }
            Ok(Ack { ok: true })
        },
    );
    register_shaped::<Empty, _, _, _>(
        worker,
        HARNESS_READY_ID,
        "Internal (harness::ready): the harness booted; reconciles the inbox with what it holds (today's harness only).",
        |w, _e| async move {
            w.folders.forget_generation();
            for durable in [&w.gate_binding, &w.watch_binding] {
                durable.check_soon();
            }
            let worker = w.clone();
            tokio::spawn(async move {
                reconcile(&worker).await;
            });
            Ok(Ack { ok: true })
        },
    );
    register_typed(
        worker,
        SESSION_DELETED_ID,
        "Internal (session::deleted): purges the session's settings, denied dirs, attempt counters, held calls and the reviewer's memory of it.",
        |w, e: SessionDeleted| async move {
            on_session_deleted(&w, e).await;
            Ok(Ack { ok: true })
        },
    );
}
