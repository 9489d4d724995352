//! `engine::*`: durable bindings and introspection.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{CallError, Engine, BUILTIN_TIMEOUT};

/// `engine::register_trigger` waits up to 10 s for the provider's verdict.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(15);

/// One bound trigger, as `engine::registered-triggers::list` reports it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub(crate) struct RegisteredTrigger {
    /// The binding id.
    #[serde(default)]
    pub id: String,
    /// The trigger type.
    #[serde(default)]
    pub trigger_type: String,
    /// The bound function.
    #[serde(default)]
    pub function_id: String,
    /// The binding config.
    #[serde(default)]
    pub config: Value,
}

impl Engine {
    /// `engine::registered-triggers::list`.
    pub(crate) async fn registered_triggers(&self) -> Result<Vec<RegisteredTrigger>, CallError> {
        const ID: &str = "engine::registered-triggers::list";
        let out = self.call(ID, json!({}), BUILTIN_TIMEOUT).await?;
        match out.get("registered_triggers") {
            Some(Value::Array(items)) => Ok(items
                .iter()
                .filter_map(|t| RegisteredTrigger::deserialize(t).ok())
                .collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// `engine::register_trigger`: a durable binding; returns its id.
    pub(crate) async fn register_durable_trigger(
        &self,
        trigger_type: &str,
        function_id: &str,
        config: &Value,
    ) -> Result<String, CallError> {
        const ID: &str = "engine::register_trigger";
        let out = self
            .call(
                ID,
                json!({"trigger_type": trigger_type, "function_id": function_id, "config": config}),
                REGISTER_TIMEOUT,
            )
            .await?;
        match out.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err(CallError::malformed(ID, "the reply carries no binding id")),
        }
    }

    /// `engine::unregister_trigger` (parked bindings included); whether a
    /// binding with that id existed.
    pub(crate) async fn unregister_durable_trigger(&self, id: &str) -> Result<bool, CallError> {
        let out = self
            .call(
                "engine::unregister_trigger",
                json!({"id": id}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        Ok(out.get("removed").and_then(Value::as_bool).unwrap_or(true))
    }

    /// `engine::functions::list {prefix}`: the live function ids, internal
    /// ones included (the console's content function is one).
    pub(crate) async fn function_ids(&self, prefix: &str) -> Result<Vec<String>, CallError> {
        let out = self
            .call(
                "engine::functions::list",
                json!({"prefix": prefix, "include_internal": true}),
                BUILTIN_TIMEOUT,
            )
            .await?;
        Ok(ids_in(&out, "functions", "function_id"))
    }

    /// `engine::workers::list`: `(worker id, worker name)` of every worker
    /// the engine lists.
    pub(crate) async fn workers(&self) -> Result<Vec<(String, String)>, CallError> {
        let out = self
            .call("engine::workers::list", json!({}), BUILTIN_TIMEOUT)
            .await?;
        Ok(out
            .get("workers")
            .and_then(Value::as_array)
            .map(|rows| {
                rows.iter()
                    .filter_map(|row| {
                        let id = row.get("id").and_then(Value::as_str)?;
                        let name = row.get("name").and_then(Value::as_str)?;
                        Some((id.to_string(), name.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `engine::triggers::list`: the ids of the trigger types that exist now.
    pub(crate) async fn trigger_type_ids(&self) -> Result<Vec<String>, CallError> {
        let out = self
            .call("engine::triggers::list", json!({}), BUILTIN_TIMEOUT)
            .await?;
        Ok(ids_in(&out, "triggers", "id"))
    }
}

/// The string `field` of every item of the array `list` in `reply`.
fn ids_in(reply: &Value, list: &str, field: &str) -> Vec<String> {
    reply
        .get(list)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get(field).and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
