//! `approval::gate` — the pre-trigger hook (contract §3).
//!
//! Reads settings from the in-memory view and the compiled rules from the
//! configuration cell: continue and deny cost no engine round trip. Never
//! returns a handler error: every failure is an explicit deny. On hold:
//! idempotency check, soft session context under a budget, durable write
//! before answering, `pending-created` after answering.
//!
//! # Format
//!
//! In: `{ point, session_id, turn_id, step?, depth?, metadata?, call?: {id, function_id, arguments?}, result? }`
//! Out: `{"decision":"continue"}` | `{"decision":"deny","reason":"..."}` | `{"decision":"hold"}`

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::RegisterFunction;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::schema_of;
use crate::error::validate_id;
use crate::pending::record::{PendingRecord, RecordKind};
use crate::pending::store::Written;
use crate::policy::{decide, Call, Verdict, HUMAN_ONLY_RULE};
use crate::redact::redact;
use crate::worker::Worker;

/// How long a hold may wait for `session::get` (well inside the hook's 5 s).
pub const SESSION_BUDGET: Duration = Duration::from_millis(1500);

/// The call a hook is asked about.
// Its arguments are dropped iteratively (see `crate::deep`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HookCall {
    /// The call's id.
    pub id: String,
    /// The target function.
    pub function_id: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl Drop for HookCall {
    fn drop(&mut self) {
        if let Some(arguments) = self.arguments.take() {
            crate::deep::dismantle(arguments);
        }
    }
}

impl Drop for HookInput {
    fn drop(&mut self) {
        if let Some(result) = self.result.take() {
            crate::deep::dismantle(result);
        }
    }
}

/// A hook input that does not have the contract's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed hook input")]
pub struct MalformedInput;

/// Parses a hook input without recursing into the call's arguments (they are
/// moved, not deserialized). Any shape error is [`MalformedInput`].
pub fn parse_hook_input(mut input: Value) -> Result<HookInput, MalformedInput> {
    let arguments = input
        .get_mut("call")
        .and_then(Value::as_object_mut)
        .and_then(|call| call.remove("arguments"));
    let result = input.as_object_mut().and_then(|o| o.remove("result"));
    let parsed = serde_json::from_value::<HookInput>(input);
    let mut parsed = match parsed {
        Ok(p) => p,
        Err(_) => {
            arguments
                .into_iter()
                .chain(result)
                .for_each(crate::deep::dismantle);
            return Err(MalformedInput);
        }
    };
    if let Some(call) = parsed.call.as_mut() {
        call.arguments = arguments;
    } else if let Some(a) = arguments {
        crate::deep::dismantle(a);
    }
    parsed.result = result;
    Ok(parsed)
}

/// The harness's hook input (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HookInput {
    /// `pre_trigger` or `post_trigger`.
    #[serde(default)]
    pub point: Option<String>,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The step within the turn.
    // Read as raw JSON: the gate never looks at it.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub step: Option<Value>,
    /// Nesting depth of the session (0 = top level).
    #[serde(default)]
    pub depth: u64,
    /// The turn's metadata (`working_dir` is the session workspace).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// The call (absent input is denied).
    #[serde(default)]
    pub call: Option<HookCall>,
    /// The call's result (post_trigger only).
    // Kept as raw JSON: only the grant watch reads it, field by field.
    #[serde(default)]
    #[schemars(with = "Option<HookResult>")]
    pub result: Option<Value>,
}

/// A call's result, as the harness hands it to post-trigger hooks.
// Only a schema: `HookInput::result` is read as raw JSON.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct HookResult {
    /// The call's id.
    pub function_call_id: String,
    /// The target function.
    pub function_id: String,
    /// What the model would see.
    pub content: Vec<ContentBlock>,
    /// Whether the target failed.
    pub is_error: bool,
    /// On a target error, `error: {code, message}` (a jail rejection carries
    /// its `grant_hint=` at the end of the message); `error` is a plain
    /// string when the harness's dispatch policy refused the call.
    #[serde(default)]
    pub details: Option<Map<String, Value>>,
}

/// One block of a result's content.
#[derive(JsonSchema)]
#[allow(dead_code)] // only a schema
pub struct ContentBlock {
    /// The block type (`text`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    pub text: String,
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum HookOutput {
    /// Let the call (or its result) through.
    Continue,
    /// Answer the call with an error carrying `reason`.
    Deny {
        /// Written for the model, so it can adapt.
        reason: String,
    },
    /// Park the call until a human decides.
    Hold,
}

fn deny(reason: impl Into<String>) -> HookOutput {
    HookOutput::Deny {
        reason: reason.into(),
    }
}

/// Session context for a record: title, description, metadata.
#[derive(Debug, Default, Clone)]
pub struct SessionContext {
    /// `meta.title`.
    pub title: Option<String>,
    /// `meta.description`.
    pub description: Option<String>,
    /// `meta.metadata` (objects only).
    pub metadata: Option<Map<String, Value>>,
}

/// Soft-fetches session context: any failure or a slow answer omits it.
pub async fn session_context(worker: &Worker, session_id: &str) -> SessionContext {
    match worker.sibling.session_get(session_id, SESSION_BUDGET).await {
        Ok(reply) => context_of(&reply),
        Err(err) => {
            tracing::debug!(session_id, error = %err, "no session context");
            SessionContext::default()
        }
    }
}

/// Extracts the context from a `session::get` reply; empty strings dropped.
pub fn context_of(reply: &Value) -> SessionContext {
    let meta = reply.get("meta");
    let text = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    SessionContext {
        title: text("title"),
        description: text("description"),
        metadata: meta
            .and_then(|m| m.get("metadata"))
            .and_then(Value::as_object)
            .cloned(),
    }
}

/// Builds a record for a held call (arguments redacted once, here).
pub fn build_record(
    input: &HookInput,
    call: &HookCall,
    kind: RecordKind,
    context: SessionContext,
) -> PendingRecord {
    let empty = Value::Object(Map::new());
    PendingRecord {
        session_id: input.session_id.clone(),
        turn_id: input.turn_id.clone(),
        function_call_id: call.id.clone(),
        function_id: call.function_id.clone(),
        kind,
        arguments_excerpt: redact(call.arguments.as_ref().unwrap_or(&empty)),
        pending_at: crate::time::now_ms(),
        depth: input.depth,
        session_title: context.title,
        session_description: context.description,
        session_metadata: context.metadata,
        grant_request: None,
        assistant_excerpt: None,
    }
}

/// The gate.
pub async fn gate(worker: &Worker, input: Value) -> HookOutput {
    let input = match parse_hook_input(input) {
        Ok(input) => input,
        Err(_) => {
            tracing::warn!("malformed pre_trigger hook input; denying");
            return deny(
                "approval-gate received a malformed pre_trigger hook input; the call is denied",
            );
        }
    };
    let Some(call) = input.call.as_ref() else {
        return deny("approval-gate received a pre_trigger hook input without a call payload");
    };
    let snapshot = worker.config.load();
    let ids_ok = validate_id("session_id", &input.session_id).is_ok()
        && validate_id("function_call_id", &call.id).is_ok();
    let cached = if ids_ok {
        worker.settings.cached(&input.session_id)
    } else {
        None
    };
    let settings = cached
        .as_ref()
        .map(|s| &s.compiled)
        .unwrap_or(&snapshot.defaults);
    let decision = decide(
        settings,
        &snapshot.rules,
        &Call {
            function_id: &call.function_id,
            arguments: call.arguments.as_ref(),
        },
    );
    if !ids_ok && decision.rule_id() != Some(HUMAN_ONLY_RULE) {
        return deny(format!(
            "approval-gate cannot evaluate {}: session_id / function_call_id must be non-empty and must not contain \"/\"",
            call.function_id
        ));
    }
    match decision.verdict {
        Verdict::Allow => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "continue", rule = decision.rule_id(), "gate");
            HookOutput::Continue
        }
        Verdict::Deny => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "deny", rule = decision.rule_id(), "gate");
            deny(decision.reason(&call.function_id))
        }
        Verdict::Hold => hold(worker, &input, call).await,
    }
}

async fn hold(worker: &Worker, input: &HookInput, call: &HookCall) -> HookOutput {
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    if worker.pending.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    let context = session_context(worker, sid).await;
    let record = build_record(input, call, RecordKind::Function, context);
    let lock = worker.pending.lock(sid, cid).await;
    if worker.pending.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    match worker.pending.write(record.clone()).await {
        Err(err) => {
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, error = %err, "hold not recorded; denying");
            deny(format!(
                "approval-gate could not record the held call to {} ({}); the call is denied rather than held without a record",
                call.function_id, err.code
            ))
        }
        Ok(Written::DuplicateWon) => HookOutput::Hold,
        Ok(Written::New { displaced }) => {
            drop(lock);
            announce_displaced(worker, displaced);
            tracing::info!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", rule = "no_match", "call held");
            worker.subscriptions.emit_created(&worker.sibling, &record);
            HookOutput::Hold
        }
    }
}

/// Announces, as aborted, a record a new hold replaced outside any resolve.
pub fn announce_displaced(worker: &Worker, displaced: Option<Arc<PendingRecord>>) {
    if let Some(old) = displaced {
        worker.subscriptions.emit_resolved(
            &worker.sibling,
            crate::subscriptions::PendingResolved::of(
                &old,
                crate::subscriptions::Outcome::Aborted,
                None,
            ),
        );
    }
}

/// Registers `approval::gate` (raw input, typed schema published).
pub fn register(worker: &Arc<Worker>) {
    let w = worker.clone();
    let registration = RegisterFunction::new_async(move |input: Value| {
        let worker = w.clone();
        async move {
            let _running = worker.enter();
            let out = gate(&worker, input).await;
            serde_json::to_value(out).map_err(|e| iii_sdk::Error::Serde(e.to_string()))
        }
    })
    .description(
        "Pre-trigger hook: decides continue, deny or hold for one function call. Harness only.",
    )
    .request_format(schema_of::<HookInput>())
    .response_format(schema_of::<HookOutput>());
    worker
        .sibling
        .iii()
        .register_function("approval::gate", registration);
}
