//! `harness::function::resolve`: releasing a held call.
//!
//! # Format
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "action": "execute", "extra_roots": ["/data/x"] }
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "action": "deliver", "is_error": true,
//!   "content": [{ "type": "text", "text": "Rejected by operator." }], "details": { ... } }
//! ```
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
use super::{lock, CallKey, Core, ResolveTiming, RESOLVE};

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

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResolveResponse {
    pub resolved: bool,
    /// The turn has no held call left after this resolve.
    pub turn_resumed: bool,
}

pub(super) fn register(core: &Arc<Core>) {
    let weak = Arc::downgrade(core);
    let schema = serde_json::to_value(schemars::schema_for!(ResolveRequest)).unwrap_or(Value::Null);
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

impl Core {
    async fn resolve(self: Arc<Self>, raw: Value) -> Result<Value, Error> {
        lock(&self.journal).resolve_requests.push(raw.clone());
        {
            let mut failing = lock(&self.failing_resolves);
            if *failing > 0 {
                *failing -= 1;
                return Err(Error::Remote {
                    code: "harness_unavailable".into(),
                    message: "harness_unavailable: the harness is failing (test switch)".into(),
                    stacktrace: None,
                });
            }
        }
        let request: ResolveRequest = serde_json::from_value(raw).map_err(|e| Error::Remote {
            code: "invalid_payload".into(),
            message: format!("invalid_payload: {e}"),
            stacktrace: None,
        })?;
        let key: CallKey = (request.session_id.clone(), request.function_call_id.clone());
        let Some(parked) = self.claim(&key, &request.turn_id) else {
            return Ok(json!(ResolveResponse {
                resolved: false,
                turn_resumed: false
            }));
        };
        match request.action.unwrap_or(ResolveAction::Deliver) {
            ResolveAction::Deliver => self.deliver(&key, &request),
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
        let turn_resumed = !lock(&self.calls).values().any(|r| {
            r.spec.session_id == request.session_id
                && r.spec.turn_id == request.turn_id
                && r.state.is_held()
        });
        Ok(json!(ResolveResponse {
            resolved: true,
            turn_resumed
        }))
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
            (CallState::Held { .. }, _) => Parked::Post,
            _ => return None,
        };
        record.state = CallState::Running;
        record.holder = None;
        Some(parked)
    }

    fn deliver(&self, key: &CallKey, request: &ResolveRequest) {
        let mut calls = lock(&self.calls);
        let Some(record) = calls.get_mut(key) else {
            return;
        };
        let mut result = json!({
            "function_call_id": request.function_call_id,
            "function_id": record.spec.function_id,
            "content": request.content.clone().unwrap_or_else(|| json!([])),
            "is_error": request.is_error.unwrap_or(false),
        });
        if let Some(details) = &request.details {
            result["details"] = details.clone();
        }
        let entry_id = chain::entry_id(&request.turn_id, &request.function_call_id);
        record.state = CallState::Delivered {
            entry_id: entry_id.clone(),
            result: result.clone(),
        };
        let mut journal = lock(&self.journal);
        if !journal.entries.iter().any(|e| e.entry_id == entry_id) {
            journal.entries.push(Entry {
                entry_id,
                session_id: request.session_id.clone(),
                turn_id: request.turn_id.clone(),
                function_call_id: request.function_call_id.clone(),
                result,
            });
        }
    }
}
