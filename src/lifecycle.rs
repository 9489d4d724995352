//! The events the engine and the harness send the worker
//! (`architecture/contract.md` § Bindings): a completed turn and a deleted
//! session take their held calls out of the inbox (outcome `aborted`), with
//! the grant watch's memory and, for a session, its settings; a turn event
//! that names a session's parent is remembered for its records (§27.3); the
//! harness's `ready` reconciles the inbox with what it holds; a
//! configuration change re-reads the policy. Every record leaves through the
//! pending store's emit gate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::engine::HarnessStatus;
use crate::error::is_valid_id;
use crate::functions::{register_shaped, register_typed, Ack};
use crate::pending::{Purged, RecordKey, Resolution};
use crate::provenance::DecidedVia;
use crate::release::NOT_HELD;
use crate::worker::Worker;

pub(crate) use crate::bindings::{
    HARNESS_READY_ID, SESSION_DELETED_ID, TURN_COMPLETED_ID, TURN_STARTED_ID,
};

/// How many sessions a reconcile works on at once. Kept low so the pass
/// stays off the gate's path: with 10k held calls across 1k sessions on a
/// real engine, 8 at once slowed the gate's p99 about 13× during the pass
/// (`architecture/performance.md` § Reconcile with the harness).
const RECONCILE_CONCURRENCY: usize = 2;
/// How long a reconcile request waits before its pass starts: requests in
/// that time join it. At boot the worker asks for a pass, and today's harness
/// sends `harness::ready` at once to the binding boot just made: one pass,
/// not two (§27.4).
const RECONCILE_SETTLE: Duration = Duration::from_secs(1);

/// Asks for a reconcile pass: it starts [`RECONCILE_SETTLE`] from now, after
/// any pass under way; a request made before it starts joins it.
pub(crate) fn request_reconcile(worker: &Arc<Worker>) {
    if worker.reconciles.queued.swap(true, Ordering::SeqCst) {
        return;
    }
    let worker = worker.clone();
    tokio::spawn(async move {
        tokio::time::sleep(RECONCILE_SETTLE).await;
        let _one = worker.reconciles.running.lock().await;
        worker.reconciles.queued.store(false, Ordering::SeqCst);
        reconcile(&worker).await;
    });
}

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
    /// A sub-agent's turn: the call that spawned it.
    #[serde(default)]
    pub parent: Option<ParentLink>,
    /// A display parent (a sub-agent without a live parent turn).
    #[serde(default)]
    pub parent_session_id: Option<String>,
}

/// `harness::turn-started` payload (unknown fields ignored): read only for
/// the parent it names.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct TurnStarted {
    /// The session whose turn began.
    pub session_id: String,
    /// The turn.
    // Published in the schema; only the parent is read.
    #[serde(default)]
    #[allow(dead_code)]
    pub turn_id: Option<String>,
    /// A sub-agent's turn: the call that spawned it.
    #[serde(default)]
    pub parent: Option<ParentLink>,
    /// A display parent (a sub-agent without a live parent turn).
    #[serde(default)]
    pub parent_session_id: Option<String>,
}

/// The call a sub-agent's turn was spawned from (turn events' `parent`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct ParentLink {
    /// The parent session.
    pub session_id: String,
    /// The parent's turn.
    // Published in the schema; only the session is read.
    #[serde(default)]
    #[allow(dead_code)]
    pub turn_id: Option<String>,
    /// The parent's `harness::spawn` call.
    #[serde(default)]
    #[allow(dead_code)]
    pub function_call_id: Option<String>,
}

/// Remembers the parent a turn event names for its session: the link's
/// session, else the display parent.
fn learn_parent(
    worker: &Worker,
    session_id: &str,
    parent: Option<&ParentLink>,
    display: Option<&str>,
) {
    let named = parent
        .map(|p| p.session_id.as_str())
        .or(display)
        .filter(|p| !p.is_empty());
    if let Some(parent) = named {
        worker.lineage.learn(session_id, parent);
    }
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
    if let Some(sid) = event.session_id.as_deref() {
        learn_parent(
            worker,
            sid,
            event.parent.as_ref(),
            event.parent_session_id.as_deref(),
        );
    }
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
    worker.lineage.forget(sid);
    purged
}

/// Reconciles the inbox with the harness (`architecture/contract.md` § Two
/// harness generations, "Reconcile"; §27.4): for each session with records,
/// ask `harness::status` which calls are pending; a record whose call the
/// harness cannot be holding — not listed, or listed as waiting on the
/// sub-agent it spawned — leaves through the emit gate as `aborted` /
/// `not_held`, unless it is `releasing` or younger than twice the hook
/// timeout (`Reconciles::age`: the harness may not have parked the call
/// yet). A listed call is kept (it may be held) but is no proof of a hold.
/// A `null` (no turn of the session) is acted on only after `harness::ready`
/// and a second read the same age later. The brief's harness has no
/// `harness::status`: nothing is done. Bounded concurrency; never on the
/// gate's path. Returns how many records left.
async fn reconcile(worker: &Arc<Worker>) -> usize {
    use futures_util::stream::{self, StreamExt};
    let sessions = worker.pending.session_ids();
    let stop = AtomicBool::new(false);
    let removed: Vec<usize> = stream::iter(sessions)
        .map(|sid| {
            let stop = &stop;
            async move {
                if stop.load(Ordering::Relaxed) {
                    return 0;
                }
                match worker.engine.harness_status(&sid).await {
                    Ok(HarnessStatus::Unknown) => {
                        recheck_later(worker, sid);
                        0
                    }
                    Ok(status) => reconcile_session(worker, &sid, &status).await,
                    Err(err) if err.is_function_not_found() => {
                        stop.store(true, Ordering::Relaxed);
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

/// A session `harness::status` answered `null` for: once the harness has
/// said `ready`, read it again `Reconciles::age` (twice the hook timeout)
/// later, and only a second `null` removes its records (as a turn that
/// holds nothing would). Before `ready`, the records are kept; the pass
/// `ready` asks for reads again.
fn recheck_later(worker: &Arc<Worker>, sid: String) {
    if !worker.reconciles.ready.load(Ordering::SeqCst) {
        tracing::debug!(session_id = %sid, "harness::status knows no turn of the session before harness::ready; records kept");
        return;
    }
    if !worker.reconciles.rechecking().insert(sid.clone()) {
        return;
    }
    let worker = worker.clone();
    tokio::spawn(async move {
        tokio::time::sleep(worker.reconciles.age).await;
        let status = worker.engine.harness_status(&sid).await;
        worker.reconciles.rechecking().remove(&sid);
        match status {
            Ok(status) => {
                reconcile_session(&worker, &sid, &status).await;
            }
            Err(err) => {
                tracing::warn!(session_id = %sid, error = %err, "harness::status failed on the second read; the session's records are kept");
            }
        }
    });
}

/// One session of [`reconcile`]: removes the records of calls the harness
/// cannot be holding (`status` is the current turn, or a second `null`).
async fn reconcile_session(worker: &Worker, sid: &str, status: &HarnessStatus) -> usize {
    let now = crate::time::now_ms();
    let min_age = u64::try_from(worker.reconciles.age.as_millis()).unwrap_or(u64::MAX);
    let mut removed = 0;
    for (_, cid) in worker.pending.keys_of_session(sid) {
        if status.may_hold(&cid) {
            continue;
        }
        let lock = worker.pending.lock(sid, &cid).await;
        let Some(record) = lock.get() else {
            continue;
        };
        if record.pending_at.saturating_add(min_age) > now {
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
    register_typed(
        worker,
        TURN_STARTED_ID,
        "Internal (harness::turn-started): remembers the parent a sub-agent's turn names, for its held calls' session_metadata.parent_session_id.",
        |w, e: TurnStarted| async move {
            learn_parent(
                &w,
                &e.session_id,
                e.parent.as_ref(),
                e.parent_session_id.as_deref(),
            );
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
            w.reconciles.ready.store(true, Ordering::SeqCst);
            request_reconcile(&w);
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
