//! What a hold writes: the session's context (soft-fetched under a budget)
//! and the inbox record built from the hook input. Shared by the gate and the
//! grant watch.

use std::time::Duration;

use serde_json::{Map, Value};

use super::protocol::{HookCall, HookInput};
use crate::config::ApprovalConfig;
use crate::engine::{Engine, SessionContext};
use crate::lineage::Lineage;
use crate::pending::{deadlines, HoldLimits, Metadata, PendingRecord, RecordKind};
use crate::redact::{redact, redact_call, redact_call_full, redact_text, Full};

/// The argument today's harness stamps onto shell, coder and pipe calls:
/// its trusted filesystem scope, not the agent's.
pub(crate) const FS_SCOPE: &str = crate::policy::STAMP;

/// How long a hold may wait for `session::get` (well inside the hook's 5 s).
pub(crate) const SESSION_BUDGET: Duration = Duration::from_millis(1500);

/// Soft-fetches session context within `budget`: any failure or a slow
/// answer omits it. The session's parent, when `session::get` does not name
/// one, comes from what the harness's turn events named ([`Lineage`]);
/// never from the turn's metadata.
pub(crate) async fn session_context(
    engine: &Engine,
    lineage: &Lineage,
    session_id: &str,
    budget: Duration,
) -> SessionContext {
    let mut context = if budget.is_zero() {
        SessionContext::default()
    } else {
        match engine.session_context(session_id, budget).await {
            Ok(context) => context,
            Err(err) => {
                tracing::debug!(session_id, error = %err, "no session context");
                SessionContext::default()
            }
        }
    };
    lineage.complete(session_id, &mut context.metadata);
    context
}

/// The session's metadata as a record keeps it: redacted like arguments
/// (secret-named keys, secrets inside values, long strings clipped). Tenancy
/// filters match against this form.
fn redact_metadata(metadata: Map<String, Value>) -> Metadata {
    match redact(&Value::Object(metadata)) {
        Value::Object(redacted) => Metadata::from(redacted),
        _ => Metadata::from(Map::new()),
    }
}

/// Builds a record for a held call: the arguments, the session's title,
/// description and metadata are redacted once, here.
pub fn build_record(
    input: &HookInput,
    call: &HookCall,
    kind: RecordKind,
    context: SessionContext,
) -> PendingRecord {
    let empty = Value::Object(Map::new());
    // Redacted output is depth-bounded, so taking the stamp out of it is
    // safe whatever the input's depth.
    let mut arguments = redact_call(&call.function_id, call.arguments.as_ref().unwrap_or(&empty));
    let fs_scope = match &mut arguments {
        Value::Object(map) => match map.remove(FS_SCOPE) {
            Some(Value::Object(scope)) => Some(Metadata::from(scope)),
            // Not the harness's stamp (that is an object): the agent's own.
            Some(other) => {
                map.insert(FS_SCOPE.to_string(), other);
                None
            }
            None => None,
        },
        _ => None,
    };
    PendingRecord {
        session_id: input.session_id.clone(),
        turn_id: input.turn_id.clone(),
        function_call_id: call.id.clone(),
        function_id: call.function_id.clone(),
        kind,
        arguments_excerpt: arguments.into(),
        fs_scope,
        pending_at: crate::time::now_ms(),
        depth: input.depth,
        session_title: context.title.map(|t| redact_text(&t).into_owned()),
        session_description: context.description.map(|d| redact_text(&d).into_owned()),
        session_metadata: context.metadata.map(redact_metadata),
        grant_request: None,
        access_request: None,
        assistant_excerpt: None,
        expires_at: None,
        escalate_at: None,
        escalated_at: None,
        releasing: false,
        release: None,
        uncertain: false,
        review: None,
        runs: None,
        suggested_prefix: None,
        protected_path: None,
        digest: Some(crate::pending::digest(
            &call.function_id,
            call.arguments.as_ref(),
        )),
        // The gate sets it at its hold; a folder prompt has none.
        held_by_rule: None,
    }
}

/// The whole redacted arguments of a held call (contract §21.6), kept
/// under their own key: the harness's `fs_scope` stamp is left out, as in
/// the excerpt (the record shows it apart).
pub(crate) fn whole_arguments(call: &HookCall) -> Full {
    let empty = Value::Object(Map::new());
    let arguments = call.arguments.as_ref().unwrap_or(&empty);
    match arguments {
        Value::Object(map) if map.get(FS_SCOPE).is_some_and(Value::is_object) => {
            let mut agent = map.clone();
            agent.remove(FS_SCOPE);
            redact_call_full(&call.function_id, &Value::Object(agent))
        }
        other => redact_call_full(&call.function_id, other),
    }
}

/// Gives a hold its deadlines: the deciding rule's `limits`, else the
/// configuration's, counted from `pending_at`.
pub(crate) fn set_deadlines(
    record: &mut PendingRecord,
    limits: HoldLimits,
    config: &ApprovalConfig,
) {
    let deadlines = deadlines(record.pending_at, limits, config);
    record.expires_at = deadlines.expires_at;
    record.escalate_at = deadlines.escalate_at;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(arguments: Value) -> HookCall {
        HookCall {
            id: "c".into(),
            function_id: "shell::exec".into(),
            arguments: Some(arguments),
        }
    }

    #[test]
    fn rule_21_6_the_whole_arguments_leave_the_harness_stamp_out_and_keep_everything_else() {
        let long = "x".repeat(5_000);
        let whole = whole_arguments(&call(json!({
            "command": long, "password": "hunter2", "fs_scope": {"root": "/w/s"}
        })));
        assert_eq!(whole.value["command"], long, "whole, not the excerpt");
        assert_ne!(whole.value["password"], "hunter2", "redacted");
        assert!(
            whole.value.get("fs_scope").is_none(),
            "the stamp is shown apart"
        );
        assert!(!whole.clipped);
        // An `fs_scope` that is not the harness's object is the agent's own.
        let own = whole_arguments(&call(json!({"fs_scope": "mine"})));
        assert_eq!(own.value["fs_scope"], "mine");
        // No arguments: an empty object.
        let none = whole_arguments(&HookCall {
            id: "c".into(),
            function_id: "f".into(),
            arguments: None,
        });
        assert_eq!(none.value, json!({}));
    }
}
