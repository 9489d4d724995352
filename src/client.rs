//! The one place that names sibling function ids (`state::*`, `configuration::*`,
//! `harness::*`, `session::get`, `engine::*`): a small typed client. Handlers
//! never build raw trigger requests.

use std::time::Duration;

use iii_sdk::protocol::TriggerRequest;
use iii_sdk::{IIIClient, TriggerAction};
use serde::Deserialize;
use serde_json::{json, Value};

/// Timeout for calls to the engine's built-in workers.
pub const BUILTIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout for `harness::function::resolve` during `approval::resolve`: short
/// enough that the resolve answers before its caller gives up (the console and
/// `iii trigger` wait 10 s or more); a harness slower than this keeps the record
/// and the caller retries.
pub const HARNESS_TIMEOUT: Duration = Duration::from_secs(8);

/// A failed sibling call, reduced to what the worker reasons about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{function_id} failed ({code}): {message}")]
pub struct CallError {
    /// The function that was called.
    pub function_id: String,
    /// The remote code (`function_not_found`, `NOT_FOUND`, `timeout`, ...).
    pub code: String,
    /// The remote message.
    pub message: String,
}

impl CallError {
    fn from_sdk(function_id: &str, err: iii_sdk::Error) -> CallError {
        let (code, message) = match err {
            iii_sdk::Error::Remote { code, message, .. } => (code, message),
            iii_sdk::Error::Timeout => ("timeout".to_string(), "invocation timed out".to_string()),
            iii_sdk::Error::NotConnected => (
                "not_connected".to_string(),
                "iii is not connected".to_string(),
            ),
            other => ("invocation_failed".to_string(), other.to_string()),
        };
        CallError {
            function_id: function_id.to_string(),
            code,
            message,
        }
    }
}

/// `state::set` reply.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct SetOutcome {
    /// The value the key held before the write (null when it was absent).
    #[serde(default)]
    pub old_value: Value,
}

/// Typed access to the engine and the sibling workers.
#[derive(Clone)]
pub struct Sibling {
    iii: IIIClient,
}

impl Sibling {
    /// Wraps a connected SDK client.
    pub fn new(iii: IIIClient) -> Sibling {
        Sibling { iii }
    }

    /// The SDK client.
    pub fn iii(&self) -> &IIIClient {
        &self.iii
    }

    /// A synchronous call with a timeout.
    async fn call(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let request = TriggerRequest {
            function_id: function_id.to_string(),
            payload,
            action: None,
            timeout_ms: Some(timeout.as_millis() as u64),
        };
        self.iii
            .trigger(request)
            .await
            .map_err(|e| CallError::from_sdk(function_id, e))
    }

    /// A fire-and-forget call, in a namespace and with metadata when given.
    pub async fn fire(
        &self,
        function_id: &str,
        payload: Value,
        namespace: Option<&str>,
        metadata: Option<&Value>,
    ) -> Result<(), CallError> {
        let mut request: iii_sdk::protocol::TriggerRequestWithMetadata = TriggerRequest {
            function_id: function_id.to_string(),
            payload,
            action: Some(TriggerAction::Void),
            timeout_ms: None,
        }
        .into();
        if let Some(ns) = namespace {
            request = request.namespace(ns);
        }
        if let Some(meta) = metadata {
            request = request.metadata(meta.clone());
        }
        self.iii
            .trigger(request)
            .await
            .map(|_| ())
            .map_err(|e| CallError::from_sdk(function_id, e))
    }

    // ── state ──────────────────────────────────────────────────────────────

    /// `state::set`: an atomic swap; returns the old value.
    pub async fn state_set(
        &self,
        scope: &str,
        key: &str,
        value: Value,
    ) -> Result<SetOutcome, CallError> {
        let out = self
            .call(
                "state::set",
                json!({"scope": scope, "key": key, "value": value}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        serde_json::from_value(out).map_err(|e| malformed("state::set", e))
    }

    /// `state::get`: the value, or null when missing.
    pub async fn state_get(&self, scope: &str, key: &str) -> Result<Value, CallError> {
        self.call(
            "state::get",
            json!({"scope": scope, "key": key}),
            BUILTIN_TIMEOUT,
        )
        .await
    }

    /// `state::delete`: returns the old value (null when missing).
    pub async fn state_delete(&self, scope: &str, key: &str) -> Result<Value, CallError> {
        self.call(
            "state::delete",
            json!({"scope": scope, "key": key}),
            BUILTIN_TIMEOUT,
        )
        .await
    }

    /// `state::list`: every value of a scope (values only, no keys).
    pub async fn state_list(&self, scope: &str) -> Result<Vec<Value>, CallError> {
        let out = self
            .call(
                "state::list",
                json!({"scope": scope}),
                Duration::from_secs(60),
            )
            .await?;
        match out {
            Value::Array(items) => Ok(items),
            Value::Null => Ok(Vec::new()),
            other => Err(CallError {
                function_id: "state::list".into(),
                code: "malformed_reply".into(),
                message: format!("expected an array, got {}", kind_of(&other)),
            }),
        }
    }

    // ── configuration ──────────────────────────────────────────────────────

    /// `configuration::get`; `raw` skips env expansion and validation (the
    /// stored template).
    pub async fn configuration_get(&self, id: &str, raw: bool) -> Result<Value, CallError> {
        let mut payload = json!({"id": id});
        if raw {
            payload["raw"] = Value::Bool(true);
        }
        let out = self
            .call("configuration::get", payload, BUILTIN_TIMEOUT)
            .await?;
        Ok(out.get("value").cloned().unwrap_or(Value::Null))
    }

    /// `configuration::register`, with `initial_value` only when given (one
    /// overwrites the stored value).
    pub async fn configuration_register(
        &self,
        id: &str,
        name: &str,
        description: &str,
        schema: &Value,
        initial_value: Option<&Value>,
    ) -> Result<Value, CallError> {
        let mut payload =
            json!({"id": id, "name": name, "description": description, "schema": schema});
        if let Some(v) = initial_value {
            payload["initial_value"] = v.clone();
        }
        self.call("configuration::register", payload, BUILTIN_TIMEOUT)
            .await
    }

    /// `configuration::set` (validated against the entry's schema).
    pub async fn configuration_set(&self, id: &str, value: &Value) -> Result<Value, CallError> {
        self.call(
            "configuration::set",
            json!({"id": id, "value": value}),
            BUILTIN_TIMEOUT,
        )
        .await
    }

    // ── harness ────────────────────────────────────────────────────────────

    /// `harness::function::resolve`: releases a held call.
    pub async fn harness_resolve(&self, payload: Value) -> Result<Value, CallError> {
        self.call("harness::function::resolve", payload, HARNESS_TIMEOUT)
            .await
    }

    // ── session manager ────────────────────────────────────────────────────

    /// `session::get`, under a budget.
    pub async fn session_get(
        &self,
        session_id: &str,
        budget: Duration,
    ) -> Result<Value, CallError> {
        self.call("session::get", json!({"session_id": session_id}), budget)
            .await
    }

    // ── engine ─────────────────────────────────────────────────────────────

    /// `engine::registered-triggers::list`.
    pub async fn registered_triggers(&self) -> Result<Vec<Value>, CallError> {
        let out = self
            .call(
                "engine::registered-triggers::list",
                json!({}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        Ok(match out.get("registered_triggers") {
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        })
    }

    /// `engine::register_trigger`: a durable binding; returns its id.
    pub async fn register_durable_trigger(
        &self,
        trigger_type: &str,
        function_id: &str,
        config: &Value,
    ) -> Result<String, CallError> {
        let out = self
            .call(
                "engine::register_trigger",
                json!({"trigger_type": trigger_type, "function_id": function_id, "config": config}),
                Duration::from_secs(15),
            )
            .await?;
        Ok(out
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// `engine::unregister_trigger`.
    pub async fn unregister_durable_trigger(&self, id: &str) -> Result<(), CallError> {
        self.call(
            "engine::unregister_trigger",
            json!({"id": id}),
            BUILTIN_TIMEOUT,
        )
        .await
        .map(|_| ())
    }

    /// `engine::functions::list {prefix}`: the live function ids.
    pub async fn function_ids(&self, prefix: &str) -> Result<Vec<String>, CallError> {
        let out = self
            .call(
                "engine::functions::list",
                json!({"prefix": prefix}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        Ok(out
            .get("functions")
            .and_then(Value::as_array)
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| f.get("function_id").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `engine::triggers::list`: the ids of the trigger types that exist now.
    pub async fn trigger_type_ids(&self) -> Result<Vec<String>, CallError> {
        let out = self
            .call("engine::triggers::list", json!({}), BUILTIN_TIMEOUT)
            .await?;
        Ok(out
            .get("triggers")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| t.get("id").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }
}

fn malformed(function_id: &str, err: serde_json::Error) -> CallError {
    CallError {
        function_id: function_id.to_string(),
        code: "malformed_reply".into(),
        message: err.to_string(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Sibling {
    /// `harness::workspace::grant {session_id, root}` → `{session_id, roots}`.
    pub async fn workspace_grant(
        &self,
        session_id: &str,
        root: &str,
    ) -> Result<Vec<String>, CallError> {
        let out = self
            .call(
                "harness::workspace::grant",
                json!({"session_id": session_id, "root": root}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        Ok(roots_of(&out))
    }

    /// `harness::workspace::grants {session_id}` → the session's durable roots.
    pub async fn workspace_grants(
        &self,
        session_id: &str,
        budget: Duration,
    ) -> Result<Vec<String>, CallError> {
        let out = self
            .call(
                "harness::workspace::grants",
                json!({"session_id": session_id}),
                budget,
            )
            .await?;
        Ok(roots_of(&out))
    }
}

fn roots_of(reply: &Value) -> Vec<String> {
    reply
        .get("roots")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
