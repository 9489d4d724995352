//! `approval::grant-watch` — the post-trigger hook (contract §6). Turns a
//! shell/coder jail rejection carrying a `grant_hint=` into a folder-access
//! hold. Only ever answers continue (the original result reaches the model)
//! or hold; every failure stands down.
//!
//! The stand-down ladder, in order: no call or bad ids; no jail hint; the dir
//! is the session's workspace or under it; the harness already granted a
//! root containing it (or has no workspace-grant plane); the user denied it
//! or a parent; the re-ask limit is reached.

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::RegisterFunction;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::gate::{build_record, parse_hook_input, session_context, HookInput, HookOutput};
use super::schema_of;
use crate::error::validate_id;
use crate::grant::hint::{contains, recognise};
use crate::pending::record::RecordKind;
use crate::pending::store::Written;
use crate::worker::Worker;

/// State scope of per-call re-ask counters: key `<session_id>/<function_call_id>`.
pub const ATTEMPTS_SCOPE: &str = "approval_grant_attempts";
/// Budget of `harness::workspace::grants` inside the hook's 5 s.
pub const GRANTS_BUDGET: Duration = Duration::from_millis(1500);

/// Why the watch let the original result through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandDown {
    /// No call, or ids that fail validation.
    NoCall,
    /// Not a jail rejection with a usable hint.
    NoHint,
    /// The dir is the session's own workspace or under it.
    Workspace,
    /// A durable grant already covers the dir.
    AlreadyGranted,
    /// The harness has no workspace-grant plane.
    NoGrantPlane,
    /// The user denied this dir (or a parent) earlier in the session.
    Denied,
    /// The call was re-asked `grant_reask_limit` times.
    ReaskLimit,
    /// A state call failed.
    StateFailed,
}

impl StandDown {
    fn as_str(self) -> &'static str {
        match self {
            StandDown::NoCall => "no_call",
            StandDown::NoHint => "no_hint",
            StandDown::Workspace => "workspace",
            StandDown::AlreadyGranted => "already_granted",
            StandDown::NoGrantPlane => "no_grant_plane",
            StandDown::Denied => "denied",
            StandDown::ReaskLimit => "reask_limit",
            StandDown::StateFailed => "state_failed",
        }
    }
}

/// A re-ask counter.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempts {
    /// The session.
    pub session_id: String,
    /// The call.
    pub function_call_id: String,
    /// The call's turn.
    pub turn_id: String,
    /// Holds so far.
    pub count: u32,
}

/// The watch: decides hold or continue.
pub async fn watch(worker: &Worker, input: Value) -> Result<HookOutput, StandDown> {
    let input: HookInput = parse_hook_input(input).map_err(|_| StandDown::NoCall)?;
    // Borrowed, not cloned: cloning a `Value` recurses once per nesting level.
    let call = input.call.as_ref().ok_or(StandDown::NoCall)?;
    let (sid, cid) = (input.session_id.clone(), call.id.clone());
    if validate_id("session_id", &sid).is_err() || validate_id("function_call_id", &cid).is_err() {
        return Err(StandDown::NoCall);
    }
    let grant = input
        .result
        .as_ref()
        .and_then(recognise)
        .ok_or(StandDown::NoHint)?;
    let workspace = input
        .metadata
        .as_ref()
        .and_then(|m| m.get("working_dir"))
        .and_then(Value::as_str);
    if let Some(ws) = workspace {
        if contains(ws, &grant.dir) {
            tracing::error!(session_id = %sid, function_call_id = %cid, dir = %grant.dir, "jail rejected a path inside the session workspace: a harness stamp hole, not something a grant fixes");
            return Err(StandDown::Workspace);
        }
    }
    let roots = worker
        .sibling
        .workspace_grants(&sid, GRANTS_BUDGET)
        .await
        .map_err(|_| StandDown::NoGrantPlane)?;
    if roots.iter().any(|r| contains(r, &grant.dir)) {
        return Err(StandDown::AlreadyGranted);
    }
    let denied = super::folder::denied_dirs(worker, &sid)
        .await
        .map_err(|_| StandDown::StateFailed)?;
    if denied.iter().any(|d| contains(d, &grant.dir)) {
        return Err(StandDown::Denied);
    }

    let lock = worker.pending.lock(&sid, &cid).await;
    if let Some(existing) = worker.pending.get(&sid, &cid) {
        // The same prompt again is a redelivery, unless that prompt is being
        // resolved right now: then the released call failed on the same dir
        // again, which is a new ask.
        if existing.grant_request.as_deref() == Some(&grant)
            && !worker.pending.is_resolving(&existing)
        {
            return Ok(HookOutput::Hold);
        }
    }
    let key = format!("{sid}/{cid}");
    let stored = worker
        .sibling
        .state_get(ATTEMPTS_SCOPE, &key)
        .await
        .map_err(|_| StandDown::StateFailed)?;
    let count = serde_json::from_value::<Attempts>(stored)
        .map(|a| a.count)
        .unwrap_or(0);
    if count >= worker.config.load().config.grant_reask_limit {
        return Err(StandDown::ReaskLimit);
    }
    let bumped = Attempts {
        session_id: sid.clone(),
        function_call_id: cid.clone(),
        turn_id: input.turn_id.clone(),
        count: count + 1,
    };
    worker
        .sibling
        .state_set(ATTEMPTS_SCOPE, &key, json!(bumped))
        .await
        .map_err(|_| StandDown::StateFailed)?;
    drop(lock);

    let context = session_context(worker, &sid).await;
    let mut record = build_record(&input, call, RecordKind::FolderAccess, context);
    record.grant_request = Some(Box::new(grant));
    let _lock = worker.pending.lock(&sid, &cid).await;
    match worker.pending.write(record.clone()).await {
        Err(_) => Err(StandDown::StateFailed),
        Ok(written) => {
            if let Written::New { displaced } = written {
                super::gate::announce_displaced(worker, displaced);
            }
            tracing::info!(session_id = %sid, function_call_id = %cid, function_id = %call.function_id, decision = "hold", rule = "folder_access", attempt = count + 1, "folder access asked");
            worker.subscriptions.emit_created(&worker.sibling, &record);
            Ok(HookOutput::Hold)
        }
    }
}

/// Drops the attempt counters of a turn (optionally only of one session).
pub async fn forget_turn(worker: &Worker, turn_id: &str, session_id: Option<&str>) {
    forget_attempts(worker, |a| {
        a.turn_id == turn_id && session_id.is_none_or(|s| s == a.session_id)
    })
    .await;
}

/// Drops a session's denied dirs and attempt counters.
pub async fn forget_session(worker: &Worker, session_id: &str) {
    if let Err(err) = worker
        .sibling
        .state_delete(super::folder::DENIED_SCOPE, session_id)
        .await
    {
        tracing::warn!(session_id, error = %err, "denied dirs not cleared");
    }
    forget_attempts(worker, |a| a.session_id == session_id).await;
}

async fn forget_attempts(worker: &Worker, which: impl Fn(&Attempts) -> bool) {
    let Ok(values) = worker.sibling.state_list(ATTEMPTS_SCOPE).await else {
        tracing::warn!("attempt counters not listed; left for the next event");
        return;
    };
    for attempts in values
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Attempts>(v).ok())
    {
        if which(&attempts) {
            let key = format!("{}/{}", attempts.session_id, attempts.function_call_id);
            if let Err(err) = worker.sibling.state_delete(ATTEMPTS_SCOPE, &key).await {
                tracing::warn!(key, error = %err, "attempt counter not deleted");
            }
        }
    }
}

/// The ids a stand-down log names, read before the input is parsed (the
/// parse consumes it). Strings only; the arguments are never looked at.
fn log_ids(input: &Value) -> (String, String, String) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let call = input.get("call");
    (
        text(input.get("session_id")),
        text(call.and_then(|c| c.get("id"))),
        text(call.and_then(|c| c.get("function_id"))),
    )
}

/// Registers `approval::grant-watch` (raw input; it only holds or continues).
pub fn register(worker: &Arc<Worker>) {
    let w = worker.clone();
    let registration = RegisterFunction::new_async(move |input: Value| {
        let worker = w.clone();
        async move {
            let _running = worker.enter();
            let (session_id, function_call_id, function_id) = log_ids(&input);
            let out = match watch(&worker, input).await {
                Ok(out) => out,
                Err(reason) => {
                    // A result that is not a jail rejection is the common
                    // case, not a stand-down: it is not logged.
                    if reason != StandDown::NoHint {
                        tracing::info!(session_id, function_call_id, function_id, decision = "continue", rule = reason.as_str(), "grant watch stood down");
                    }
                    HookOutput::Continue
                }
            };
            serde_json::to_value(out).map_err(|e| iii_sdk::Error::Serde(e.to_string()))
        }
    })
    .description("Post-trigger hook on shell::* / coder::*: turns a jail rejection with a grant hint into a folder-access hold. Harness only.")
    .request_format(schema_of::<HookInput>())
    .response_format(schema_of::<HookOutput>());
    worker
        .sibling
        .iii()
        .register_function("approval::grant-watch", registration);
}
