//! The `configuration` worker: typed entries with a JSON Schema, validated on
//! write and expanded from the environment on read, as the real engine does.
//!
//! `${NAME}` and `${NAME:default}` in string leaves are replaced from the
//! engine's process environment when a value is read; a string that is one
//! lone placeholder is re-read as a YAML scalar, so `"${PORT:8080}"` reads as
//! the number `8080`. Stored values keep the placeholders.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

static PLACEHOLDER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\$\{([^}:]+)(?::([^}]*))?\}").ok());

static LONE_PLACEHOLDER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\s*\$\{[^}]*\}\s*$").ok());

/// One stored entry, as `configuration::register` returns it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub schema: Value,
    #[serde(default)]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Entry {
    /// The schema-only view `configuration::list` and `::schema` return.
    pub fn view(&self) -> Value {
        let mut view = json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "schema": self.schema,
        });
        if let (Some(metadata), Value::Object(map)) = (&self.metadata, &mut view) {
            map.insert("metadata".into(), metadata.clone());
        }
        view
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConfigurationRegisterInput {
    pub id: String,
    pub name: String,
    pub description: String,
    pub schema: Value,
    pub initial_value: Option<Value>,
    pub metadata: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConfigurationSetInput {
    pub id: String,
    pub value: Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConfigurationGetInput {
    pub id: String,
    #[serde(default)]
    pub raw: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConfigurationSchemaInput {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConfigurationListInput {}

/// `{configuration_id?, event_types?, condition_function_id?}`: the config of
/// a `configuration` binding.
#[derive(Debug, Default, Deserialize)]
#[allow(dead_code)]
pub(crate) struct ConfigurationTriggerConfig {
    #[serde(default)]
    pub configuration_id: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    pub condition_function_id: Option<String>,
}

impl ConfigurationTriggerConfig {
    pub fn matches(&self, id: &str, event_type: &str) -> bool {
        self.configuration_id.as_deref().is_none_or(|c| c == id)
            && self
                .event_types
                .as_ref()
                .is_none_or(|types| types.iter().any(|t| t == event_type))
    }
}

/// A refused configuration call: `{code, message}` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: String) -> Refusal {
    Refusal { code, message }
}

/// What a write changed, for the trigger fan-out.
#[derive(Debug)]
pub(crate) struct Change {
    pub event_type: &'static str,
    pub entry: Entry,
    pub old_value: Option<Value>,
}

impl Change {
    /// The payload a `configuration` binding receives; values are expanded.
    ///
    /// # Format
    ///
    /// ```text
    /// {"type":"configuration","event_type":"configuration:updated","id":"x","name":"…",
    ///  "description":"…","schema":{…},"old_value":{…},"new_value":{…}}
    /// ```
    pub fn event(&self) -> Value {
        let mut event = json!({
            "type": "configuration",
            "event_type": self.event_type,
            "id": self.entry.id,
            "name": self.entry.name,
            "description": self.entry.description,
            "schema": self.entry.schema,
            "old_value": self.old_value.as_ref().map(|v| expand(v).0),
            "new_value": expand(&self.entry.value).0,
        });
        if let (Some(metadata), Value::Object(map)) = (&self.entry.metadata, &mut event) {
            map.insert("metadata".into(), metadata.clone());
        }
        event
    }
}

#[derive(Debug, Default)]
pub(crate) struct ConfigurationStore {
    entries: BTreeMap<String, Entry>,
}

fn valid_id(id: &str) -> Result<(), Refusal> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(refuse(
            "INVALID_ID",
            format!("invalid configuration id '{id}': must match [a-z0-9_-]{{1,64}}"),
        ))
    }
}

/// Validates with the same `jsonschema` release as the real engine, so error
/// texts match.
pub(crate) fn validate(value: &Value, schema: &Value) -> Result<(), Vec<String>> {
    let validator = jsonschema::Validator::new(schema)
        .map_err(|err| vec![format!("invalid JSON Schema: {err}")])?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn expand_leaf(text: &str, missing: &mut Vec<String>) -> String {
    let Some(placeholder) = PLACEHOLDER.as_ref() else {
        return text.to_string();
    };
    placeholder
        .replace_all(text, |caps: &regex::Captures| {
            let name = &caps[1];
            match (std::env::var(name), caps.get(2)) {
                (Ok(value), _) => value,
                (Err(_), Some(default)) => default.as_str().to_string(),
                (Err(_), None) => {
                    missing.push(name.to_string());
                    caps[0].to_string()
                }
            }
        })
        .to_string()
}

fn expand_string(text: &str, missing: &mut Vec<String>) -> Value {
    let substituted = expand_leaf(text, missing);
    let lone = LONE_PLACEHOLDER
        .as_ref()
        .is_some_and(|lone| lone.is_match(text));
    if lone {
        let trimmed = substituted.trim();
        if trimmed.is_empty() {
            return Value::String(substituted);
        }
        if let Ok(parsed) = serde_saphyr::from_str::<Value>(trimmed) {
            return parsed;
        }
    }
    Value::String(substituted)
}

fn expand_into(value: &Value, missing: &mut Vec<String>) -> Value {
    match value {
        Value::String(text) => expand_string(text, missing),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| expand_into(i, missing)).collect())
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, item) in map {
                out.insert(key.clone(), expand_into(item, missing));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Expands placeholders; the second value lists variables that had neither
/// a value nor a default.
pub(crate) fn expand(value: &Value) -> (Value, Vec<String>) {
    let mut missing = Vec::new();
    let expanded = expand_into(value, &mut missing);
    (expanded, missing)
}

impl ConfigurationStore {
    /// Registering again with `initial_value` replaces the stored value;
    /// without it the stored value stays (and is not re-validated). A new
    /// entry without one stores `null`, never validated.
    pub fn register(&mut self, input: ConfigurationRegisterInput) -> Result<Change, Refusal> {
        valid_id(&input.id)?;
        let prior = self.entries.get(&input.id).cloned();
        let (value, check) = match (input.initial_value, &prior) {
            (Some(value), _) => (value, true),
            (None, Some(existing)) => (existing.value.clone(), false),
            (None, None) => (Value::Null, false),
        };
        if check {
            let (applied, missing) = expand(&value);
            if missing.is_empty() {
                validate(&applied, &input.schema).map_err(|errors| {
                    refuse(
                        "SCHEMA_INVALID",
                        format!("schema validation failed: {}", errors.join("; ")),
                    )
                })?;
            }
        }
        let entry = Entry {
            id: input.id.clone(),
            name: input.name,
            description: input.description,
            schema: input.schema,
            value,
            metadata: input.metadata,
        };
        self.entries.insert(input.id, entry.clone());
        Ok(Change {
            event_type: if prior.is_some() {
                "configuration:updated"
            } else {
                "configuration:registered"
            },
            entry,
            old_value: prior.map(|p| p.value),
        })
    }

    pub fn set(&mut self, input: ConfigurationSetInput) -> Result<Change, Refusal> {
        valid_id(&input.id)?;
        let Some(entry) = self.entries.get_mut(&input.id) else {
            return Err(refuse(
                "NOT_REGISTERED",
                format!(
                    "configuration '{}' is not registered; call configuration::register first",
                    input.id
                ),
            ));
        };
        if entry.schema.is_null() {
            return Err(refuse(
                "SCHEMA_UNAVAILABLE",
                format!(
                    "configuration '{}' has no schema available yet; the owning worker must \
                     register before values can be set",
                    input.id
                ),
            ));
        }
        let (applied, missing) = expand(&input.value);
        if missing.is_empty() {
            validate(&applied, &entry.schema).map_err(|errors| {
                refuse(
                    "SCHEMA_INVALID",
                    format!("schema validation failed: {}", errors.join("; ")),
                )
            })?;
        }
        let old_value = std::mem::replace(&mut entry.value, input.value);
        Ok(Change {
            event_type: "configuration:updated",
            entry: entry.clone(),
            old_value: Some(old_value),
        })
    }

    /// `{id, value}` with placeholders expanded, refused when the expanded
    /// value no longer fits the schema (a `null` placeholder included).
    pub fn get(&self, input: ConfigurationGetInput) -> Result<Value, Refusal> {
        let Some(entry) = self.entries.get(&input.id) else {
            return Err(refuse(
                "NOT_FOUND",
                format!("configuration '{}' not found", input.id),
            ));
        };
        if input.raw {
            return Ok(json!({ "id": entry.id, "value": entry.value }));
        }
        let (applied, missing) = expand(&entry.value);
        if !missing.is_empty() {
            return Err(refuse(
                "EXPAND_FAILED",
                format!(
                    "configuration '{}' references unset environment variable(s) with no \
                     default: {}",
                    entry.id,
                    missing.join(", ")
                ),
            ));
        }
        if !entry.schema.is_null() {
            validate(&applied, &entry.schema).map_err(|errors| {
                refuse(
                    "SCHEMA_INVALID",
                    format!("schema validation failed: {}", errors.join("; ")),
                )
            })?;
        }
        Ok(json!({ "id": entry.id, "value": applied }))
    }

    /// Every entry's schema view, sorted by id.
    pub fn list(&self) -> Value {
        json!({ "configurations": self.entries.values().map(Entry::view).collect::<Vec<_>>() })
    }

    pub fn schema(&self, id: &str) -> Result<Value, Refusal> {
        self.entries
            .get(id)
            .map(Entry::view)
            .ok_or_else(|| refuse("NOT_FOUND", format!("configuration '{id}' not found")))
    }

    /// What the real engine's file store keeps over a restart: ids, names and
    /// values, but not schemas, which come back only when the owning worker
    /// registers again.
    pub fn forget_schemas(&mut self) {
        for entry in self.entries.values_mut() {
            entry.schema = Value::Null;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(store: &mut ConfigurationStore, initial: Option<Value>) -> Result<Change, Refusal> {
        store.register(ConfigurationRegisterInput {
            id: "gate".into(),
            name: "Gate".into(),
            description: "d".into(),
            schema: json!({"type": "object", "required": ["mode"]}),
            initial_value: initial,
            metadata: None,
        })
    }

    #[test]
    fn register_keeps_or_overwrites_and_get_validates() {
        let mut store = ConfigurationStore::default();
        let first = register(&mut store, None).unwrap();
        assert_eq!(first.event_type, "configuration:registered");
        let refused = store
            .get(ConfigurationGetInput {
                id: "gate".into(),
                raw: false,
            })
            .unwrap_err();
        assert_eq!(refused.code, "SCHEMA_INVALID");
        register(&mut store, Some(json!({"mode": "a"}))).unwrap();
        let again = register(&mut store, None).unwrap();
        assert_eq!(again.event_type, "configuration:updated");
        assert_eq!(again.entry.value, json!({"mode": "a"}));
        assert_eq!(
            register(&mut store, Some(json!({}))).unwrap_err().code,
            "SCHEMA_INVALID"
        );
    }

    #[test]
    fn lone_placeholders_are_typed() {
        let (value, missing) = expand(
            &json!({"port": "${TESTKIT_SURELY_UNSET_VAR:8080}", "s": "a-${TESTKIT_SURELY_UNSET_VAR:b}"}),
        );
        assert!(missing.is_empty());
        assert_eq!(value, json!({"port": 8080, "s": "a-b"}));
        let (_, missing) = expand(&json!("${TESTKIT_SURELY_UNSET_VAR}"));
        assert_eq!(missing, vec!["TESTKIT_SURELY_UNSET_VAR".to_string()]);
    }

    #[test]
    fn ids_are_checked() {
        let mut store = ConfigurationStore::default();
        let refused = store
            .set(ConfigurationSetInput {
                id: "Bad Id".into(),
                value: json!(1),
            })
            .unwrap_err();
        assert_eq!(refused.code, "INVALID_ID");
        let refused = store
            .set(ConfigurationSetInput {
                id: "nope".into(),
                value: json!(1),
            })
            .unwrap_err();
        assert_eq!(refused.code, "NOT_REGISTERED");
    }
}
