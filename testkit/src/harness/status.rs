//! Today's harness (generation 2): what it reports about itself and how it
//! forgets a deleted session.
//!
//! # Format
//!
//! `harness::status {session_id, verbose?}` → `null` for a session with no
//! turn, else
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "status": "awaiting_functions",
//!   "pending_function_calls": ["c1", "c2"] }
//! ```
//!
//! `status` is the finished turn's status, else `awaiting_functions` while
//! a call is held or waits on a sub-agent, else `running`.
//! `pending_function_calls` (the current turn's held calls, the calls
//! running right now, an `execute` in progress included, and the calls
//! waiting on a sub-agent; ids only, sorted) is sent only with `verbose:
//! true`, the form harness.md documents, so a caller that forgets the flag
//! finds nothing. `children` (always sent) lists the current turn's calls
//! that wait on a sub-agent: `[{function_call_id, session_id, turn_id}]`
//! (the child's). A listed call is not necessarily a held one.
//!
//! `harness::filesystem::info {}` → `{ "default_root": null, "boundary": "auto" }`.
//!
//! `harness::on-session-deleted {session_id}` (bound to `session::deleted`)
//! → `{ "ok": true, "removed": <the session's calls it knew> }`: the grants are
//! dropped, its turns end without any `turn-completed`, and `harness::status`
//! answers `null` for it.

use std::sync::{Arc, Weak};

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{Error, IIIClient, RegisterFunction};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::model::CallState;
use super::{lock, Core, FILESYSTEM_INFO, ON_SESSION_DELETED, STATUS};
use crate::session::SESSION_DELETED;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct StatusRequest {
    pub session_id: String,
    pub verbose: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct DeletedEvent {
    pub session_id: String,
}

fn gone() -> Error {
    Error::Handler("harness stopped".into())
}

pub(super) fn register(core: &Arc<Core>) {
    let weak: Weak<Core> = Arc::downgrade(core);
    core.iii.register_function(
        STATUS,
        RegisterFunction::new_async(move |req: StatusRequest| {
            let core = weak.upgrade();
            async move { Ok::<_, Error>(core.ok_or_else(gone)?.status(&req)) }
        })
        .description("The session's current turn and the calls it waits for"),
    );
    let weak: Weak<Core> = Arc::downgrade(core);
    core.iii.register_function(
        ON_SESSION_DELETED,
        RegisterFunction::new_async(move |event: DeletedEvent| {
            let core = weak.upgrade();
            async move { Ok::<_, Error>(core.ok_or_else(gone)?.forget_session(&event.session_id)) }
        })
        .description("Forget a deleted session: its grants and its turns"),
    );
}

/// `harness::filesystem::info`, registered with the grant functions.
pub(super) fn register_info(core: &Arc<Core>) {
    let weak: Weak<Core> = Arc::downgrade(core);
    core.iii.register_function(
        FILESYSTEM_INFO,
        RegisterFunction::new_async(move |_: Value| {
            let core = weak.upgrade();
            async move {
                let core = core.ok_or_else(gone)?;
                Ok::<_, Error>(json!({
                    "default_root": core.options.default_root,
                    "boundary": core.options.filesystem_boundary.as_str(),
                }))
            }
        })
        .description("The default session root and the filesystem boundary setting"),
    );
}

/// Binds [`ON_SESSION_DELETED`] to `session::deleted`, as today's harness
/// does at boot; the engine parks the binding until a session manager
/// provides the type.
pub(super) fn bind_session_deleted(iii: &IIIClient) {
    // The binding API is deprecated in 0.25 (gone in 0.26); the engine still
    // speaks it.
    #[allow(deprecated)]
    let sent = iii.register_trigger(RegisterTriggerInput::new(
        SESSION_DELETED,
        ON_SESSION_DELETED,
        json!({}),
    ));
    if let Err(err) = sent {
        tracing::warn!(error = %err, "binding session::deleted failed");
    }
}

impl Core {
    fn status(&self, req: &StatusRequest) -> Value {
        *lock(&self.status_reads)
            .entry(req.session_id.clone())
            .or_default() += 1;
        let Some(turn_id) = lock(&self.current_turn).get(&req.session_id).cloned() else {
            return Value::Null;
        };
        let finished = lock(&self.finished)
            .get(&(req.session_id.clone(), turn_id.clone()))
            .cloned();
        let pending = self.pending_calls(&req.session_id);
        let held = lock(&self.calls).values().any(|r| {
            r.spec.session_id == req.session_id
                && r.spec.turn_id == turn_id
                && (r.state.is_held() || matches!(r.state, CallState::AwaitingChild { .. }))
        });
        let children = self.children(&req.session_id, &turn_id);
        let status = match finished {
            Some(status) => status,
            None if held => "awaiting_functions".to_string(),
            None => "running".to_string(),
        };
        let mut report = json!({
            "session_id": req.session_id,
            "turn_id": turn_id,
            "status": status,
            "children": children,
        });
        if req.verbose == Some(true) {
            report["pending_function_calls"] = json!(pending);
        }
        report
    }

    fn forget_session(&self, session_id: &str) -> Value {
        lock(&self.grants).remove(session_id);
        lock(&self.current_turn).remove(session_id);
        let turns: Vec<String> = lock(&self.calls)
            .values()
            .filter(|r| r.spec.session_id == session_id)
            .map(|r| r.spec.turn_id.clone())
            .collect();
        let removed = turns.len();
        let mut finished = lock(&self.finished);
        for turn_id in turns {
            finished
                .entry((session_id.to_string(), turn_id))
                .or_insert_with(|| "deleted".to_string());
        }
        json!({ "ok": true, "removed": removed })
    }
}
