//! The engine and the sibling workers, as a small typed client: the one place
//! that names a sibling function id (`state::*`, `configuration::*`,
//! `harness::*`, `session::get`, `engine::*`). Handlers never build a raw
//! trigger request.
//!
//! Every failed call becomes a [`CallError`] carrying the called id and a
//! typed [`ErrorCode`], so callers branch on an enum, never on a string.

mod configuration;
mod harness;
mod registry;
mod reviewer;
mod scope;
mod state;

use std::time::Duration;

use iii_sdk::protocol::TriggerRequest;
use iii_sdk::{IIIClient, TriggerAction};
use serde_json::Value;

pub(crate) use configuration::Entry;
pub use harness::SessionContext;
pub(crate) use harness::{Generation, HarnessStatus, Release, ReleaseAction};
pub(crate) use scope::{Scope, PENDING_BUCKETS};

/// Timeout for calls to the engine's built-in workers.
pub(crate) const BUILTIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A remote error code, as the engine or a sibling sent it. The codes the
/// worker reasons about have their own variant; anything else is kept as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCode {
    /// `function_not_found`: nothing serves the id (an absent sibling, an
    /// older harness without a function).
    FunctionNotFound,
    /// `invocation_stopped`: the callee disconnected mid-call.
    InvocationStopped,
    /// `NOT_FOUND` (configuration): no such entry.
    NotFound,
    /// `NOT_REGISTERED` (configuration): set before register.
    NotRegistered,
    /// `SCHEMA_INVALID` (configuration): the value does not fit the schema.
    SchemaInvalid,
    /// No answer within the call's timeout (client side).
    Timeout,
    /// The SDK has no connection to the engine.
    NotConnected,
    /// The reply did not have the shape the function promises.
    MalformedReply,
    /// Any other code, as sent.
    Other(String),
}

impl ErrorCode {
    /// Reads a remote code.
    pub fn parse(code: &str) -> ErrorCode {
        match code {
            "function_not_found" => ErrorCode::FunctionNotFound,
            "invocation_stopped" => ErrorCode::InvocationStopped,
            "NOT_FOUND" => ErrorCode::NotFound,
            "NOT_REGISTERED" => ErrorCode::NotRegistered,
            "SCHEMA_INVALID" => ErrorCode::SchemaInvalid,
            "timeout" => ErrorCode::Timeout,
            "not_connected" => ErrorCode::NotConnected,
            "malformed_reply" => ErrorCode::MalformedReply,
            other => ErrorCode::Other(other.to_string()),
        }
    }

    /// The wire spelling (what logs and deny reasons show).
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::FunctionNotFound => "function_not_found",
            ErrorCode::InvocationStopped => "invocation_stopped",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::NotRegistered => "NOT_REGISTERED",
            ErrorCode::SchemaInvalid => "SCHEMA_INVALID",
            ErrorCode::Timeout => "timeout",
            ErrorCode::NotConnected => "not_connected",
            ErrorCode::MalformedReply => "malformed_reply",
            ErrorCode::Other(code) => code,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call to the engine or a sibling, reduced to what the worker
/// reasons about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{function_id} failed ({code}): {message}")]
pub struct CallError {
    /// The function that was called.
    pub function_id: String,
    /// Why it failed.
    pub code: ErrorCode,
    /// The remote message.
    pub message: String,
}

impl CallError {
    fn from_sdk(function_id: &str, err: iii_sdk::Error) -> CallError {
        let (code, message) = match err {
            iii_sdk::Error::Remote { code, message, .. } => (ErrorCode::parse(&code), message),
            iii_sdk::Error::Timeout => (ErrorCode::Timeout, "invocation timed out".to_string()),
            iii_sdk::Error::NotConnected => {
                (ErrorCode::NotConnected, "iii is not connected".to_string())
            }
            other => (
                ErrorCode::Other("invocation_failed".into()),
                other.to_string(),
            ),
        };
        CallError {
            function_id: function_id.to_string(),
            code,
            message,
        }
    }

    /// A reply that did not have the promised shape.
    fn malformed(function_id: &str, message: impl Into<String>) -> CallError {
        CallError {
            function_id: function_id.to_string(),
            code: ErrorCode::MalformedReply,
            message: message.into(),
        }
    }

    /// A call given up because the connection it went out on is gone (its
    /// answer, if any, is no longer awaited).
    pub(crate) fn abandoned(function_id: &str) -> CallError {
        CallError {
            function_id: function_id.to_string(),
            code: ErrorCode::Other("connection_lost".into()),
            message: "begun on a connection that is gone; given up".to_string(),
        }
    }

    /// Whether the configuration entry (or other keyed item) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == ErrorCode::NotFound
    }

    /// Whether nothing serves the called function.
    pub fn is_function_not_found(&self) -> bool {
        self.code == ErrorCode::FunctionNotFound
    }

    /// Whether the failure is a definite answer about the request (it will
    /// not change by asking again), as opposed to a passing fault.
    pub fn is_definite(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::NotFound | ErrorCode::SchemaInvalid | ErrorCode::NotRegistered
        )
    }

    /// Whether the request surely never reached a handler: nothing was
    /// connected, or nothing serves the function. Anything else (a timeout, a
    /// callee that disconnected mid-call) may have been acted on.
    pub fn surely_not_delivered(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::NotConnected | ErrorCode::FunctionNotFound
        )
    }

    /// Whether the callee may have acted without its answer reaching us: the
    /// reply did not come in time, or the callee went away mid-call.
    pub fn answer_lost(&self) -> bool {
        matches!(self.code, ErrorCode::Timeout | ErrorCode::InvocationStopped)
    }
}

/// Typed access to the engine and the sibling workers.
#[derive(Clone)]
pub(crate) struct Engine {
    iii: IIIClient,
}

impl Engine {
    /// Wraps a connected SDK client.
    pub(crate) fn new(iii: IIIClient) -> Engine {
        Engine { iii }
    }

    /// The SDK client.
    pub(crate) fn iii(&self) -> &IIIClient {
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

    /// A fire-and-forget call, in a namespace and with metadata when given
    /// (how the worker delivers its trigger types to their bindings).
    pub(crate) async fn fire(
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
}

/// What kind of JSON value `v` is, for error messages.
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

#[cfg(test)]
mod tests;
