//! `state::*` (the engine's `iii-state` worker): an atomic swap, reads,
//! deletes and whole-scope lists.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{kind_of, CallError, Engine, Scope, BUILTIN_TIMEOUT};

/// A whole-scope list may be large (a bucket of held calls at scale).
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// `state::set` reply.
#[derive(Debug, Clone, Deserialize, Default)]
pub(crate) struct SetOutcome {
    /// The value the key held before the write (null when it was absent).
    #[serde(default)]
    pub old_value: Value,
}

impl Engine {
    /// `state::set`: an atomic swap; returns the old value.
    pub(crate) async fn state_set(
        &self,
        scope: &Scope,
        key: &str,
        value: Value,
    ) -> Result<SetOutcome, CallError> {
        const ID: &str = "state::set";
        let out = self
            .call(
                ID,
                json!({"scope": scope.as_str(), "key": key, "value": value}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        serde_json::from_value(out).map_err(|e| CallError::malformed(ID, e.to_string()))
    }

    /// `state::get`: the value, or null when missing.
    pub(crate) async fn state_get(&self, scope: &Scope, key: &str) -> Result<Value, CallError> {
        self.call(
            "state::get",
            json!({"scope": scope.as_str(), "key": key}),
            BUILTIN_TIMEOUT,
        )
        .await
    }

    /// `state::delete`: returns the old value (null when missing).
    pub(crate) async fn state_delete(&self, scope: &Scope, key: &str) -> Result<Value, CallError> {
        self.call(
            "state::delete",
            json!({"scope": scope.as_str(), "key": key}),
            BUILTIN_TIMEOUT,
        )
        .await
    }

    /// `state::list`: every value of a scope (values only, no keys).
    pub(crate) async fn state_list(&self, scope: &Scope) -> Result<Vec<Value>, CallError> {
        const ID: &str = "state::list";
        match self
            .call(ID, json!({"scope": scope.as_str()}), LIST_TIMEOUT)
            .await?
        {
            Value::Array(items) => Ok(items),
            Value::Null => Ok(Vec::new()),
            other => Err(CallError::malformed(
                ID,
                format!("expected an array, got {}", kind_of(&other)),
            )),
        }
    }
}
