//! `configuration::*` (the engine's configuration worker).

use serde_json::{json, Value};

use super::{CallError, Engine, BUILTIN_TIMEOUT};

impl Engine {
    /// `configuration::get`; `raw` skips env expansion and validation (the
    /// stored template).
    pub(crate) async fn configuration_get(&self, id: &str, raw: bool) -> Result<Value, CallError> {
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
    pub(crate) async fn configuration_register(
        &self,
        entry: Entry<'_>,
        initial_value: Option<&Value>,
    ) -> Result<Value, CallError> {
        let mut payload = json!({
            "id": entry.id,
            "name": entry.name,
            "description": entry.description,
            "schema": entry.schema,
        });
        if let Some(v) = initial_value {
            payload["initial_value"] = v.clone();
        }
        if let Some(metadata) = entry.metadata {
            payload["metadata"] = metadata.clone();
        }
        self.call("configuration::register", payload, BUILTIN_TIMEOUT)
            .await
    }

    /// `configuration::set` (validated against the entry's schema).
    pub(crate) async fn configuration_set(
        &self,
        id: &str,
        value: &Value,
    ) -> Result<Value, CallError> {
        self.call(
            "configuration::set",
            json!({"id": id, "value": value}),
            BUILTIN_TIMEOUT,
        )
        .await
    }
}

/// What `configuration::register` declares about an entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    /// The entry id.
    pub id: &'a str,
    /// Its display name.
    pub name: &'a str,
    /// Its description.
    pub description: &'a str,
    /// Its JSON schema.
    pub schema: &'a Value,
    /// What the console reads about it (`ui_form`: the form to show it
    /// with).
    pub metadata: Option<&'a Value>,
}
