//! `harness::function::resolve`: releasing a held call.
//!
//! # Format
//!
//! Generation 1:
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "action": "execute", "extra_roots": ["/data/x"] }
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "action": "deliver", "is_error": true,
//!   "content": [{ "type": "text", "text": "Rejected by operator." }], "details": { ... } }
//! ```
//!
//! Generation 2 reads `fs_scope: {grants: [dir]}` instead of `extra_roots`
//! (which it drops silently). A `deliver` without `content` appends
//! `[{"type": "text", "text": ""}]`, without `is_error` false, without
//! `details` null. An `execute` answers only once the target and the whole
//! post-trigger chain have run (see the `today` module); a call held again
//! there answers `resolved: true, turn_resumed: false`. A call of a finished
//! turn is never resolved.
//!
//! → `{ "resolved": true, "turn_resumed": true }`, both always present.
//! Unknown fields are ignored, as the real harness does.

use std::sync::{Arc, Weak};

use iii_sdk::{Error, RegisterFunction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::chain;
use super::config::HookPoint;
use super::model::{CallState, Entry};
use super::run::Parked;
use super::{lock, CallKey, Core, ResolveFault, ResolveTiming, RESOLVE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAction {
    /// Append the given result to the turn under `e_<turn_id>_<function_call_id>`.
    Deliver,
    /// Run the rest of the chain, the target and the post-trigger chain.
    Execute,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ResolveRequest {
    pub session_id: String,
    pub turn_id: String,
    pub function_call_id: String,
    /// Absent means `deliver`.
    pub action: Option<ResolveAction>,
    /// One-shot roots trusted for the `execute` run only.
    pub extra_roots: Option<Vec<String>>,
    pub content: Option<Value>,
    pub is_error: Option<bool>,
    pub details: Option<Value>,
}

/// The same request as today's harness reads it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TodayResolveRequest {
    pub session_id: String,
    pub turn_id: String,
    pub function_call_id: String,
    /// Absent means `deliver`.
    pub action: Option<ResolveAction>,
    /// One-shot grants for the `execute` run only, with the durable ones.
    pub fs_scope: Option<ResolveScope>,
    pub content: Option<Value>,
    pub is_error: Option<bool>,
    pub details: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ResolveScope {
    #[serde(default)]
    pub grants: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResolveResponse {
    pub resolved: bool,
    /// The turn has no held call left after this resolve.
    pub turn_resumed: bool,
}

pub(super) fn register(core: &Arc<Core>) {
    let weak = Arc::downgrade(core);
    let schema = if core.today() {
        serde_json::to_value(schemars::schema_for!(TodayResolveRequest))
    } else {
        serde_json::to_value(schemars::schema_for!(ResolveRequest))
    }
    .unwrap_or(Value::Null);
    core.iii.register_function(
        RESOLVE,
        RegisterFunction::new_async(move |input: Value| {
            let weak: Weak<Core> = weak.clone();
            async move {
                let core = weak
                    .upgrade()
                    .ok_or_else(|| Error::Handler("harness stopped".into()))?;
                core.resolve(input).await
            }
        })
        .description("Release a held function call: deliver a result or execute it")
        .request_format(schema),
    );
}

fn unavailable() -> Error {
    Error::Remote {
        code: "harness_unavailable".into(),
        message: "harness_unavailable: the harness is failing (test switch)".into(),
        stacktrace: None,
    }
}

fn invalid(e: serde_json::Error) -> Error {
    Error::Remote {
        code: "invalid_payload".into(),
        message: format!("invalid_payload: {e}"),
        stacktrace: None,
    }
}

fn answer(resolved: bool, turn_resumed: bool) -> Value {
    json!(ResolveResponse {
        resolved,
        turn_resumed
    })
}

impl Core {
    async fn resolve(self: Arc<Self>, raw: Value) -> Result<Value, Error> {
        lock(&self.journal).resolve_requests.push(raw.clone());
        {
            let mut failing = lock(&self.failing_resolves);
            if *failing > 0 {
                *failing -= 1;
                return Err(unavailable());
            }
        }
        let fault = lock(&self.resolve_faults).pop_front();
        let lose_reply = match fault {
            Some(ResolveFault::Fail) => return Err(unavailable()),
            Some(ResolveFault::Refuse) => return Ok(answer(false, false)),
            Some(ResolveFault::Hang) => return std::future::pending().await,
            Some(ResolveFault::LoseReply) => true,
            None => false,
        };
        let reply = if self.today() {
            self.resolve_today(raw).await
        } else {
            self.resolve_brief(raw).await
        };
        if lose_reply {
            tracing::debug!(?reply, "resolve reply lost (test switch)");
            return std::future::pending().await;
        }
        reply
    }

    /// The turn has no held call left.
    fn turn_resumed(&self, session_id: &str, turn_id: &str) -> bool {
        !lock(&self.calls).values().any(|r| {
            r.spec.session_id == session_id && r.spec.turn_id == turn_id && r.state.is_held()
        })
    }

    async fn resolve_today(self: Arc<Self>, raw: Value) -> Result<Value, Error> {
        let request: TodayResolveRequest = serde_json::from_value(raw).map_err(invalid)?;
        let key: CallKey = (request.session_id.clone(), request.function_call_id.clone());
        if self.turn_finished(&request.session_id, &request.turn_id) {
            return Ok(answer(false, false));
        }
        let Some(parked) = self.claim(&key, &request.turn_id) else {
            return Ok(answer(false, false));
        };
        match request.action.unwrap_or(ResolveAction::Deliver) {
            ResolveAction::Deliver => {
                let content = request
                    .content
                    .clone()
                    .unwrap_or_else(|| json!([{ "type": "text", "text": "" }]));
                let details = request.details.clone().unwrap_or(Value::Null);
                self.deliver(&key, &request.turn_id, content, request.is_error, details);
            }
            ResolveAction::Execute => {
                let holder = match parked {
                    Parked::Pre { holder } | Parked::PostBy { holder } => holder.function_id,
                    Parked::Post => String::new(),
                };
                let one_shot = request.fs_scope.unwrap_or_default().grants;
                self.execute_today(&key, holder, one_shot).await;
            }
        }
        Ok(answer(
            true,
            self.turn_resumed(&request.session_id, &request.turn_id),
        ))
    }

    async fn resolve_brief(self: Arc<Self>, raw: Value) -> Result<Value, Error> {
        let request: ResolveRequest = serde_json::from_value(raw).map_err(invalid)?;
        let key: CallKey = (request.session_id.clone(), request.function_call_id.clone());
        let Some(parked) = self.claim(&key, &request.turn_id) else {
            return Ok(answer(false, false));
        };
        match request.action.unwrap_or(ResolveAction::Deliver) {
            ResolveAction::Deliver => {
                let content = request.content.clone().unwrap_or_else(|| json!([]));
                let details = request.details.clone();
                self.deliver_brief(&key, &request.turn_id, content, request.is_error, details);
            }
            ResolveAction::Execute => {
                let roots = request.extra_roots.clone().unwrap_or_default();
                match self.options.resolve_timing {
                    ResolveTiming::BeforeReply => {
                        self.resume(&key, parked, roots).await;
                    }
                    ResolveTiming::AfterReply => {
                        let core = self.clone();
                        tokio::spawn(async move {
                            core.resume(&key, parked, roots).await;
                        });
                    }
                }
            }
        }
        Ok(answer(
            true,
            self.turn_resumed(&request.session_id, &request.turn_id),
        ))
    }

    /// Takes a held call out of the held state (so a second resolve finds
    /// nothing) and says where it was parked.
    fn claim(&self, key: &CallKey, turn_id: &str) -> Option<Parked> {
        let mut calls = lock(&self.calls);
        let record = calls.get_mut(key)?;
        if record.spec.turn_id != turn_id {
            return None;
        }
        let parked = match (&record.state, &record.holder) {
            (
                CallState::Held {
                    point: HookPoint::PreTrigger,
                    ..
                },
                Some(holder),
            ) => Parked::Pre {
                holder: holder.clone(),
            },
            (CallState::Held { .. }, Some(holder)) => Parked::PostBy {
                holder: holder.clone(),
            },
            (CallState::Held { .. }, None) => Parked::Post,
            _ => return None,
        };
        record.state = CallState::Running;
        record.holder = None;
        Some(parked)
    }

    /// Generation 2: `details` is always present (null when not given).
    fn deliver(
        &self,
        key: &CallKey,
        turn_id: &str,
        content: Value,
        is_error: Option<bool>,
        details: Value,
    ) {
        self.deliver_brief(key, turn_id, content, is_error, Some(details));
    }

    fn deliver_brief(
        &self,
        key: &CallKey,
        turn_id: &str,
        content: Value,
        is_error: Option<bool>,
        details: Option<Value>,
    ) {
        let (session_id, function_call_id) = key;
        let mut calls = lock(&self.calls);
        let Some(record) = calls.get_mut(key) else {
            return;
        };
        let mut result = json!({
            "function_call_id": function_call_id,
            "function_id": record.spec.function_id,
            "content": content,
            "is_error": is_error.unwrap_or(false),
        });
        if let Some(details) = details {
            result["details"] = details;
        }
        let entry_id = chain::entry_id(turn_id, function_call_id);
        record.state = CallState::Delivered {
            entry_id: entry_id.clone(),
            result: result.clone(),
        };
        let mut journal = lock(&self.journal);
        if !journal.entries.iter().any(|e| e.entry_id == entry_id) {
            journal.entries.push(Entry {
                entry_id,
                session_id: session_id.clone(),
                turn_id: turn_id.to_string(),
                function_call_id: function_call_id.clone(),
                result,
            });
        }
    }
}
