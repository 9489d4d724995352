//! The engine's side of the WebSocket protocol: what a worker may send, and
//! the frames the engine sends back.
//!
//! # Format
//!
//! Every frame is one JSON text message tagged by a lowercase `type`:
//!
//! ```text
//! {"type":"invokefunction","invocation_id":"6f…","function_id":"state::get","data":{"scope":"s","key":"k"}}
//! {"type":"invocationresult","invocation_id":"6f…","function_id":"state::get","result":null}
//! ```
//!
//! Inbound frames are parsed leniently (unknown fields are ignored, absent
//! optional fields read as `None`), as the real engine does; a frame whose
//! `type` is unknown is logged and dropped. Outbound frames are built here so
//! every producer spells a frame the same way.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The namespace an absent `namespace` field means.
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// An error as it travels in `invocationresult.error` and
/// `triggerregistrationresult.error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacktrace: Option<String>,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            stacktrace: None,
        }
    }
}

/// `invokefunction.action`: absent for a request/response call.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Action {
    Void,
    Enqueue {
        #[allow(dead_code)]
        queue: String,
    },
}

/// A frame a worker sends to the engine.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Inbound {
    RegisterFunction {
        id: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        metadata: Option<Value>,
        /// JSON schemas of the input and output, served back by
        /// `engine::functions::info`.
        #[serde(default)]
        request_format: Option<Value>,
        #[serde(default)]
        response_format: Option<Value>,
        /// HTTP-invoked functions need the engine's HTTP module, which the test
        /// engine does not have.
        #[serde(default)]
        invocation: Option<Value>,
    },
    UnregisterFunction {
        id: String,
    },
    RegisterTriggerType {
        id: String,
        #[serde(default)]
        description: String,
        #[serde(default)]
        namespace: Option<String>,
        /// JSON schemas of a binding's config and of the payload the
        /// provider fires, served back by `engine::triggers::info`.
        #[serde(default)]
        trigger_request_format: Option<Value>,
        #[serde(default)]
        call_request_format: Option<Value>,
    },
    RegisterTrigger {
        id: String,
        trigger_type: String,
        function_id: String,
        #[serde(default)]
        config: Value,
        #[serde(default)]
        metadata: Option<Value>,
        #[serde(default)]
        namespace: Option<String>,
        #[serde(default)]
        trigger_namespace: Option<String>,
    },
    UnregisterTrigger {
        id: String,
    },
    TriggerRegistrationResult {
        id: String,
        #[serde(default)]
        error: Option<ErrorBody>,
    },
    InvokeFunction {
        #[serde(default)]
        invocation_id: Option<String>,
        function_id: String,
        #[serde(default)]
        data: Value,
        #[serde(default)]
        traceparent: Option<String>,
        #[serde(default)]
        baggage: Option<String>,
        #[serde(default)]
        action: Option<Action>,
        #[serde(default)]
        metadata: Option<Value>,
        #[serde(default)]
        namespace: Option<String>,
    },
    InvocationResult {
        invocation_id: String,
        #[serde(default)]
        result: Option<Value>,
        #[serde(default)]
        error: Option<ErrorBody>,
    },
    Reattach {
        previous_worker_id: String,
        #[serde(default)]
        reattach_token: Option<String>,
    },
    Ping,
    Pong,
}

impl Inbound {
    /// Registrations are the frames whose effect depends on the connection's
    /// namespace, which is only known once `engine::workers::register`
    /// arrives: until then they queue, in arrival order.
    pub fn is_registration(&self) -> bool {
        matches!(
            self,
            Inbound::RegisterFunction { .. }
                | Inbound::UnregisterFunction { .. }
                | Inbound::RegisterTriggerType { .. }
                | Inbound::RegisterTrigger { .. }
                | Inbound::UnregisterTrigger { .. }
        )
    }
}

/// A namespace that was named and left blank is refused rather than read as
/// absent: absent asks for `default`, blank asks for nothing.
pub(crate) fn is_blank(namespace: &Option<String>) -> bool {
    namespace.as_deref().is_some_and(|ns| ns.trim().is_empty())
}

/// The message every blank-namespace refusal carries.
pub(crate) fn blank_namespace_message(field: &str) -> String {
    format!(
        "`{field}` is empty: it was named and left blank. Give it a name, or omit it to use \
         `{DEFAULT_NAMESPACE}`."
    )
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_string(), value);
    }
}

/// `workerregistered`: the first frame of every connection. No `features`:
/// the engine this imitates advertises none, so the SDK keeps observers and
/// local dispatch off.
pub(crate) fn worker_registered(worker_id: &str, reattach_token: &str) -> Value {
    json!({
        "type": "workerregistered",
        "worker_id": worker_id,
        "reattach_token": reattach_token,
    })
}

/// The answer to one call. `result: None` leaves the field out, which the
/// SDK reads as `null`.
pub(crate) fn invocation_result(
    invocation_id: &str,
    function_id: &str,
    outcome: Result<Option<Value>, ErrorBody>,
) -> Value {
    let mut map = Map::new();
    map.insert("type".into(), json!("invocationresult"));
    map.insert("invocation_id".into(), json!(invocation_id));
    map.insert("function_id".into(), json!(function_id));
    match outcome {
        Ok(result) => insert_some(&mut map, "result", result),
        Err(error) => {
            map.insert("error".into(), json!(error));
        }
    }
    Value::Object(map)
}

/// A call delivered to the worker that owns `function_id`. The engine never
/// forwards the caller's namespace or action: the callee only runs it.
pub(crate) fn invoke_function(
    invocation_id: &str,
    function_id: &str,
    data: Value,
    metadata: Option<Value>,
    traceparent: Option<String>,
    baggage: Option<String>,
) -> Value {
    let mut map = Map::new();
    map.insert("type".into(), json!("invokefunction"));
    map.insert("invocation_id".into(), json!(invocation_id));
    map.insert("function_id".into(), json!(function_id));
    map.insert("data".into(), data);
    insert_some(&mut map, "traceparent", traceparent.map(Value::String));
    insert_some(&mut map, "baggage", baggage.map(Value::String));
    insert_some(&mut map, "metadata", metadata);
    Value::Object(map)
}

/// A binding forwarded to the worker that provides its trigger type.
/// `namespace` and `trigger_namespace` are left out when they are `default`.
pub(crate) fn register_trigger(
    id: &str,
    trigger_type: &str,
    function_id: &str,
    config: &Value,
    metadata: &Option<Value>,
    namespace: &str,
    provider_namespace: &str,
) -> Value {
    let mut map = Map::new();
    map.insert("type".into(), json!("registertrigger"));
    map.insert("id".into(), json!(id));
    map.insert("trigger_type".into(), json!(trigger_type));
    map.insert("function_id".into(), json!(function_id));
    map.insert("config".into(), config.clone());
    insert_some(&mut map, "metadata", metadata.clone());
    if namespace != DEFAULT_NAMESPACE {
        map.insert("namespace".into(), json!(namespace));
    }
    if provider_namespace != DEFAULT_NAMESPACE {
        map.insert("trigger_namespace".into(), json!(provider_namespace));
    }
    Value::Object(map)
}

/// Tells a provider to drop a binding; always names the trigger type.
pub(crate) fn unregister_trigger(id: &str, trigger_type: &str) -> Value {
    json!({ "type": "unregistertrigger", "id": id, "trigger_type": trigger_type })
}

/// A binding's outcome, sent to the worker that asked for it (only on failure).
pub(crate) fn trigger_registration_result(
    id: &str,
    trigger_type: &str,
    function_id: &str,
    error: ErrorBody,
) -> Value {
    json!({
        "type": "triggerregistrationresult",
        "id": id,
        "trigger_type": trigger_type,
        "function_id": function_id,
        "error": error,
    })
}

/// A refused registration. `FUNCTION_NAMESPACE_CONFLICT` costs the worker one
/// function; `WORKER_NAMESPACE_CONFLICT` is followed by a close.
pub(crate) fn registration_rejected(
    code: &str,
    namespace: &str,
    worker_name: Option<&str>,
    function_id: Option<&str>,
    owner_worker_id: &str,
) -> Value {
    let mut map = Map::new();
    map.insert("type".into(), json!("registrationrejected"));
    map.insert("code".into(), json!(code));
    map.insert("namespace".into(), json!(namespace));
    insert_some(&mut map, "worker_name", worker_name.map(|n| json!(n)));
    insert_some(&mut map, "function_id", function_id.map(|f| json!(f)));
    map.insert("owner_worker_id".into(), json!(owner_worker_id));
    Value::Object(map)
}

pub(crate) fn pong() -> Value {
    json!({ "type": "pong" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn void_invocation_parses_without_an_id() {
        let frame: Inbound = serde_json::from_str(r#"{"type":"invokefunction","function_id":"engine::workers::register","data":{"name":"w"},"action":{"type":"void"}}"#).unwrap();
        match frame {
            Inbound::InvokeFunction {
                invocation_id,
                action,
                ..
            } => {
                assert!(invocation_id.is_none());
                assert!(matches!(action, Some(Action::Void)));
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }

    #[test]
    fn forwarded_binding_leaves_default_namespaces_out() {
        let frame = register_trigger("t1", "kind", "f", &json!({}), &None, "default", "default");
        assert!(frame.get("namespace").is_none());
        assert!(frame.get("trigger_namespace").is_none());
        assert!(frame.get("metadata").is_none());
        let frame = register_trigger("t1", "kind", "f", &json!({}), &None, "orders", "default");
        assert_eq!(frame["namespace"], "orders");
    }

    #[test]
    fn an_empty_result_is_left_out() {
        let frame = invocation_result("i", "f", Ok(None));
        assert!(frame.get("result").is_none());
        assert!(frame.get("error").is_none());
    }
}
