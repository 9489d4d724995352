//! `iii-state`: scoped key/value storage with the real engine's answers.
//!
//! Scopes and keys keep insertion order (the real store is an ordered map),
//! so `state::list` returns values in the order their keys were first set. A
//! `null` value is stored like any other: only `state::delete` removes a key.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{json, Map, Number, Value};

// Input types carry the real engine's names: a payload that does not fit is
// refused with the same serde message (`expected struct StateSetInput`).

#[derive(Debug, Deserialize)]
pub(crate) struct StateSetInput {
    pub scope: String,
    pub key: String,
    #[serde(alias = "data")]
    pub value: Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateGetInput {
    pub scope: String,
    pub key: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateDeleteInput {
    pub scope: String,
    pub key: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateUpdateInput {
    pub scope: String,
    pub key: String,
    pub ops: Vec<UpdateOp>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateGetGroupInput {
    pub scope: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateListGroupsInput {}

/// A merge or append path: absent or `""` is the root, a string one
/// first-level key, an array literal nested segments.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum MergePath {
    Single(String),
    Segments(Vec<String>),
}

/// One `state::update` operation, applied in order to the stored value.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum UpdateOp {
    Set {
        path: String,
        value: Option<Value>,
    },
    Merge {
        #[serde(default)]
        path: Option<MergePath>,
        value: Value,
    },
    Increment {
        path: String,
        by: i64,
    },
    Decrement {
        path: String,
        by: i64,
    },
    Append {
        #[serde(default)]
        path: Option<MergePath>,
        value: Value,
    },
    Remove {
        path: String,
    },
}

/// `state:created` / `state:updated` / `state:deleted`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StateEvent {
    Created,
    Updated,
    Deleted,
}

impl StateEvent {
    fn wire(self) -> &'static str {
        match self {
            StateEvent::Created => "state:created",
            StateEvent::Updated => "state:updated",
            StateEvent::Deleted => "state:deleted",
        }
    }
}

/// The payload a `state` trigger delivers.
///
/// # Format
///
/// ```text
/// {"type":"state","event_type":"state:updated","scope":"s","key":"k","old_value":1,"new_value":2}
/// ```
pub(crate) fn event(
    kind: StateEvent,
    scope: &str,
    key: &str,
    old_value: Option<Value>,
    new_value: Value,
) -> Value {
    json!({
        "type": "state",
        "event_type": kind.wire(),
        "scope": scope,
        "key": key,
        "old_value": old_value,
        "new_value": new_value,
    })
}

/// `{scope?, key?, condition_function_id?}`: the config of a `state` binding.
/// Named like the real engine's type so a bad config is refused with the same
/// message.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
pub(crate) struct StateTriggerConfig {
    pub scope: Option<String>,
    pub key: Option<String>,
    pub condition_function_id: Option<String>,
}

impl StateTriggerConfig {
    pub fn matches(&self, scope: &str, key: &str) -> bool {
        self.scope.as_deref().is_none_or(|s| s == scope)
            && self.key.as_deref().is_none_or(|k| k == key)
    }
}

#[derive(Debug, Default)]
pub(crate) struct StateStore {
    scopes: IndexMap<String, IndexMap<String, Value>>,
}

impl StateStore {
    /// Stores `value`, returning what was there (`None`: nothing, which makes
    /// the write a `state:created`).
    pub fn set(&mut self, scope: &str, key: &str, value: Value) -> Option<Value> {
        self.scopes
            .entry(scope.to_string())
            .or_default()
            .insert(key.to_string(), value)
    }

    pub fn get(&self, scope: &str, key: &str) -> Option<Value> {
        self.scopes.get(scope).and_then(|s| s.get(key)).cloned()
    }

    pub fn delete(&mut self, scope: &str, key: &str) -> Option<Value> {
        self.scopes.get_mut(scope).and_then(|s| s.shift_remove(key))
    }

    pub fn list(&self, scope: &str) -> Vec<Value> {
        self.scopes
            .get(scope)
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self.scopes.keys().cloned().collect();
        groups.sort();
        groups
    }

    /// Applies `ops` atomically; returns `(old, new, errors)`. An op that
    /// cannot apply is reported and skipped; the others still apply.
    pub fn update(
        &mut self,
        scope: &str,
        key: &str,
        ops: &[UpdateOp],
    ) -> (Option<Value>, Value, Vec<Value>) {
        let entries = self.scopes.entry(scope.to_string()).or_default();
        let old = entries.get(key).cloned();
        let (new, errors) = apply_update_ops(old.clone(), ops);
        entries.insert(key.to_string(), new.clone());
        (old, new, errors)
    }
}

fn op_error(index: usize, code: &str, message: String) -> Value {
    json!({
        "op_index": index,
        "code": code,
        "message": message,
        "doc_url": "https://iii.dev/docs/workers/iii-state#error-codes",
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn label(path: &str) -> &str {
    if path.is_empty() {
        "root"
    } else {
        path
    }
}

fn segments(path: &Option<MergePath>) -> Vec<String> {
    match path {
        None => Vec::new(),
        Some(MergePath::Single(s)) if s.is_empty() => Vec::new(),
        Some(MergePath::Single(s)) => vec![s.clone()],
        Some(MergePath::Segments(v)) => v.clone(),
    }
}

fn add(value: &Value, by: i64) -> Option<Value> {
    if let Some(n) = value.as_i64() {
        return n
            .checked_add(by)
            .map(|sum| Value::Number(Number::from(sum)));
    }
    if let Some(n) = value.as_u64() {
        let sum = if by >= 0 {
            n.checked_add(by as u64)?
        } else {
            n.checked_sub(by.unsigned_abs())?
        };
        return Some(Value::Number(Number::from(sum)));
    }
    value
        .as_f64()
        .and_then(|f| Number::from_f64(f + by as f64))
        .map(Value::Number)
}

/// Walks `segments` from the root, replacing anything that is not an object
/// on the way with an empty object.
fn walk<'a>(root: &'a mut Value, segments: &[String]) -> Option<&'a mut Map<String, Value>> {
    if !root.is_object() {
        *root = Value::Object(Map::new());
    }
    let mut node = root;
    for segment in segments {
        let map = match node {
            Value::Object(map) => map,
            _ => return None,
        };
        let next = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        node = next;
    }
    match node {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Appends to an array, concatenates to a string, starts a missing value;
/// the error is `(code, message)` as the real engine words it.
fn append_to(target: &mut Value, value: &Value, path: &str) -> Result<(), (String, String)> {
    match target {
        Value::Array(items) => {
            items.push(value.clone());
            Ok(())
        }
        Value::String(text) => match value.as_str() {
            Some(chunk) => {
                text.push_str(chunk);
                Ok(())
            }
            None => Err((
                "append.type_mismatch".into(),
                format!(
                    "Expected string append value at path '{}', got {}.",
                    label(path),
                    type_name(value)
                ),
            )),
        },
        Value::Null => {
            *target = first_append(value);
            Ok(())
        }
        other => Err((
            "append.type_mismatch".into(),
            format!(
                "Cannot append at path '{}': target is {}, expected array, string, null, or \
                 missing field.",
                label(path),
                type_name(other)
            ),
        )),
    }
}

fn first_append(value: &Value) -> Value {
    if value.is_string() {
        value.clone()
    } else {
        Value::Array(vec![value.clone()])
    }
}

/// The real engine's update semantics for first-level paths and merge or
/// append paths; a missing value starts as `{}`.
fn apply_update_ops(old: Option<Value>, ops: &[UpdateOp]) -> (Value, Vec<Value>) {
    let mut missing = old.is_none();
    let mut current = old.unwrap_or_else(|| Value::Object(Map::new()));
    let mut errors = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        match op {
            UpdateOp::Set { path, value } => {
                let value = value.clone().unwrap_or(Value::Null);
                if path.is_empty() {
                    current = value;
                } else if let Value::Object(map) = &mut current {
                    map.insert(path.clone(), value);
                } else {
                    errors.push(op_error(
                        index,
                        "set.target_not_object",
                        format!(
                            "Cannot set at path '{}': target is {}, expected object.",
                            label(path),
                            type_name(&current)
                        ),
                    ));
                    continue;
                }
                missing = false;
            }
            UpdateOp::Merge { path, value } => {
                let Value::Object(patch) = value else {
                    errors.push(op_error(
                        index,
                        "merge.value.not_an_object",
                        "Merge value must be a JSON object".to_string(),
                    ));
                    continue;
                };
                let segments = segments(path);
                if segments.is_empty() && !current.is_object() {
                    continue;
                }
                if let Some(target) = walk(&mut current, &segments) {
                    for (k, v) in patch {
                        target.insert(k.clone(), v.clone());
                    }
                    missing = false;
                }
            }
            UpdateOp::Increment { path, by } | UpdateOp::Decrement { path, by } => {
                let (by, name) = match op {
                    UpdateOp::Increment { .. } => (*by, "increment"),
                    _ => (by.checked_neg().unwrap_or(i64::MAX), "decrement"),
                };
                let slot = if path.is_empty() {
                    if missing {
                        current = Value::Number(Number::from(by));
                        missing = false;
                        continue;
                    }
                    Some(&mut current)
                } else if let Value::Object(map) = &mut current {
                    if !map.contains_key(path) {
                        map.insert(path.clone(), Value::Number(Number::from(by)));
                        missing = false;
                        continue;
                    }
                    map.get_mut(path)
                } else {
                    errors.push(op_error(
                        index,
                        &format!("{name}.target_not_object"),
                        format!(
                            "Cannot {name} at path '{}': target is {}, expected object.",
                            label(path),
                            type_name(&current)
                        ),
                    ));
                    continue;
                };
                let Some(slot) = slot else { continue };
                match add(slot, by) {
                    Some(updated) => {
                        *slot = updated;
                        missing = false;
                    }
                    None => errors.push(op_error(
                        index,
                        &format!("{name}.not_number"),
                        format!(
                            "Expected number at path '{}', got {}.",
                            label(path),
                            type_name(slot)
                        ),
                    )),
                }
            }
            UpdateOp::Append { path, value } => {
                let segments = segments(path);
                let outcome = if segments.is_empty() {
                    if missing {
                        current = Value::Null;
                    }
                    append_to(&mut current, value, "")
                } else if !current.is_object() {
                    Err((
                        "append.target_not_object".into(),
                        format!(
                            "Cannot append at path '[{}]': target is {}, expected object.",
                            segments.join(", "),
                            type_name(&current)
                        ),
                    ))
                } else {
                    let (leaf, parents) = segments.split_last().map_or_else(
                        || (String::new(), Vec::new()),
                        |(leaf, parents)| (leaf.clone(), parents.to_vec()),
                    );
                    let nested = !parents.is_empty();
                    match walk(&mut current, &parents) {
                        None => Ok(()),
                        Some(parent) => match parent.get_mut(&leaf) {
                            Some(existing) => append_to(existing, value, &leaf),
                            None => {
                                let initial = if nested {
                                    Value::Array(vec![value.clone()])
                                } else {
                                    first_append(value)
                                };
                                parent.insert(leaf, initial);
                                Ok(())
                            }
                        },
                    }
                };
                match outcome {
                    Ok(()) => missing = false,
                    Err((code, message)) => errors.push(op_error(index, &code, message)),
                }
            }
            UpdateOp::Remove { path } => {
                if path.is_empty() {
                    current = Value::Null;
                } else if let Value::Object(map) = &mut current {
                    map.remove(path);
                } else {
                    errors.push(op_error(
                        index,
                        "remove.target_not_object",
                        format!(
                            "Cannot remove at path '{}': target is {}, expected object.",
                            label(path),
                            type_name(&current)
                        ),
                    ));
                    continue;
                }
                missing = false;
            }
        }
    }
    (current, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(value: Value) -> Vec<UpdateOp> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn null_is_stored_and_list_keeps_first_set_order() {
        let mut store = StateStore::default();
        assert_eq!(store.set("s", "b", json!(1)), None);
        assert_eq!(store.set("s", "a", Value::Null), None);
        assert_eq!(store.set("s", "b", json!(2)), Some(json!(1)));
        assert_eq!(store.get("s", "a"), Some(Value::Null));
        assert_eq!(store.list("s"), vec![json!(2), Value::Null]);
        assert_eq!(store.delete("s", "a"), Some(Value::Null));
        assert!(store.list("missing").is_empty());
    }

    #[test]
    fn update_ops_apply_in_order() {
        let mut store = StateStore::default();
        let (old, new, errors) = store.update(
            "s",
            "k",
            &ops(json!([
                {"type": "set", "path": "name", "value": "x"},
                {"type": "increment", "path": "count", "by": 2},
                {"type": "increment", "path": "count", "by": 3},
                {"type": "append", "path": "log", "value": {"n": 1}},
                {"type": "merge", "path": ["deep", "er"], "value": {"a": true}},
                {"type": "increment", "path": "name", "by": 1}
            ])),
        );
        assert_eq!(old, None);
        assert_eq!(
            new,
            json!({"name": "x", "count": 5, "log": [{"n": 1}], "deep": {"er": {"a": true}}})
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0]["code"], "increment.not_number");
    }
}
