//! The harness's hook protocol, shared by the gate (pre-trigger) and the
//! grant watch (post-trigger): the input, its depth-safe parse, the answer.
//! See `architecture/contract.md` § The gate.
//!
//! # Format
//!
//! In: `{ point, session_id, turn_id, step?, depth?, metadata?, call?: {id, function_id, arguments?}, result? }`
//! Out: `{"decision":"continue"}` | `{"decision":"deny","reason":"..."}` | `{"decision":"hold"}`

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::policy::DenialEnvelope;

/// The call a hook is asked about.
// Its arguments are dropped iteratively (see `crate::deep`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HookCall {
    /// The call's id.
    pub id: String,
    /// The target function.
    pub function_id: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl Drop for HookCall {
    fn drop(&mut self) {
        if let Some(arguments) = self.arguments.take() {
            crate::deep::dismantle(arguments);
        }
    }
}

impl Drop for HookInput {
    fn drop(&mut self) {
        let kept = [
            self.result.take(),
            self.step.take(),
            self.metadata.take().map(Value::Object),
        ];
        kept.into_iter().flatten().for_each(crate::deep::dismantle);
    }
}

/// A hook input that does not have the contract's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed hook input")]
pub struct MalformedInput;

/// The scalar fields of the input and of its call: the only ones serde sees.
const INPUT_FIELDS: [&str; 4] = ["point", "session_id", "turn_id", "depth"];
const CALL_FIELDS: [&str; 2] = ["id", "function_id"];

/// Parses a hook input without recursing into any of its values, whatever
/// their depth: `call.arguments`, `result`, `step` and `metadata` are moved,
/// not deserialized; unknown fields are dropped unread; only the scalar
/// fields reach serde, and a container where one is expected is a shape
/// error. Any shape error is [`MalformedInput`].
pub fn parse_hook_input(input: Value) -> Result<HookInput, MalformedInput> {
    let mut discard = Vec::new();
    let parsed = parse_shallow(input, &mut discard);
    discard.into_iter().for_each(crate::deep::dismantle);
    parsed
}

/// The values a hook input keeps as they are (moved, never deserialized).
#[derive(Default)]
struct Kept {
    arguments: Option<Value>,
    result: Option<Value>,
    step: Option<Value>,
    metadata: Option<Map<String, Value>>,
}

impl Kept {
    fn discard_into(self, discard: &mut Vec<Value>) {
        discard.extend(self.arguments);
        discard.extend(self.result);
        discard.extend(self.step);
        discard.extend(self.metadata.map(Value::Object));
    }
}

/// [`parse_hook_input`], leaving every value it does not keep in `discard`.
fn parse_shallow(input: Value, discard: &mut Vec<Value>) -> Result<HookInput, MalformedInput> {
    let Value::Object(top) = input else {
        discard.push(input);
        return Err(MalformedInput);
    };
    let mut shallow = Map::new();
    let mut kept = Kept::default();
    let (mut call, mut metadata) = (None, None);
    for (key, value) in top {
        match key.as_str() {
            "call" => call = Some(value),
            "metadata" => metadata = Some(value),
            "result" => kept.result = Some(value),
            "step" => kept.step = Some(value).filter(|s| !s.is_null()),
            k if INPUT_FIELDS.contains(&k) => {
                shallow.insert(key, value);
            }
            _ => discard.push(value),
        }
    }
    let mut malformed = false;
    match call {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            let mut shallow_call = Map::new();
            for (key, value) in fields {
                match key.as_str() {
                    "arguments" => kept.arguments = Some(value),
                    k if CALL_FIELDS.contains(&k) => {
                        shallow_call.insert(key, value);
                    }
                    _ => discard.push(value),
                }
            }
            shallow.insert("call".into(), Value::Object(shallow_call));
        }
        Some(other) => {
            discard.push(other);
            malformed = true;
        }
    }
    match metadata {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => kept.metadata = Some(map),
        Some(other) => {
            discard.push(other);
            malformed = true;
        }
    }
    if malformed || !scalars_only(&shallow) {
        discard.push(Value::Object(shallow));
        kept.discard_into(discard);
        return Err(MalformedInput);
    }
    let Ok(mut parsed) = serde_json::from_value::<HookInput>(Value::Object(shallow)) else {
        kept.discard_into(discard);
        return Err(MalformedInput);
    };
    let Kept {
        arguments,
        result,
        step,
        metadata,
    } = kept;
    match parsed.call.as_mut() {
        Some(call) => call.arguments = arguments,
        None => discard.extend(arguments),
    }
    parsed.result = result;
    parsed.step = step;
    parsed.metadata = metadata;
    Ok(parsed)
}

/// Whether the shallow input holds scalars only (the call's fields included).
fn scalars_only(shallow: &Map<String, Value>) -> bool {
    let scalar = |v: &Value| !matches!(v, Value::Array(_) | Value::Object(_));
    shallow.iter().all(|(key, value)| match value {
        Value::Object(call) if key == "call" => call.values().all(scalar),
        other => scalar(other),
    })
}

/// The harness's hook input (unknown fields ignored).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HookInput {
    /// `pre_trigger` or `post_trigger`.
    #[serde(default)]
    pub point: Option<String>,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The step within the turn.
    // Read as raw JSON: the gate never looks at it.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub step: Option<Value>,
    /// Nesting depth of the session (0 = top level).
    #[serde(default)]
    pub depth: u64,
    /// The turn's metadata (`working_dir` is the session workspace).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// The call (absent input is denied).
    #[serde(default)]
    pub call: Option<HookCall>,
    /// The call's result (post_trigger only).
    // Kept as raw JSON: only the grant watch reads it, field by field.
    #[serde(default)]
    #[schemars(with = "Option<HookResult>")]
    pub result: Option<Value>,
}

/// A call's result, as the harness hands it to post-trigger hooks.
// Only a schema: `HookInput::result` is read as raw JSON.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(crate) struct HookResult {
    /// The call's id.
    pub function_call_id: String,
    /// The target function.
    pub function_id: String,
    /// What the model would see.
    pub content: Vec<ContentBlock>,
    /// Whether the target failed.
    pub is_error: bool,
    /// On a target error, `error: {code, message}` (a jail rejection carries
    /// its `grant_hint=` at the end of the message); `error` is a plain
    /// string when the harness's dispatch policy refused the call.
    #[serde(default)]
    pub details: Option<Map<String, Value>>,
}

/// One block of a result's content.
#[derive(JsonSchema)]
#[allow(dead_code)] // only a schema
pub(crate) struct ContentBlock {
    /// The block type (`text`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    pub text: String,
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum HookOutput {
    /// Let the call (or its result) through.
    Continue,
    /// Answer the call with an error carrying `reason`.
    Deny {
        /// Written for the model, so it can adapt.
        reason: String,
        /// Who denied and why, structured (the reviewer's denials only; the
        /// brief's harness keeps it, today's keeps only `reason`).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Option<ReviewerDenial>")]
        details: Option<Box<DenialEnvelope>>,
    },
    /// Park the call until a human decides.
    Hold,
}

/// The `details` of a deny answer, as published: only the reviewer's
/// denials carry them (a `DenialEnvelope` with `denied_by: "reviewer"`).
// Only a schema: the answer carries the envelope itself.
#[allow(dead_code)]
#[derive(JsonSchema)]
struct ReviewerDenial {
    /// Always 1.
    schema_version: u32,
    /// Always `"denied"`.
    status: String,
    /// `"reviewer"`.
    denied_by: String,
    /// The denied call's target.
    function_id: String,
    /// The call's arguments, redacted.
    args_excerpt: Option<Value>,
    /// The text shown to the model (led `Denied by the reviewer:`).
    reason: String,
}

/// A deny answer.
impl HookOutput {
    /// The decision's wire word: `continue`, `deny` or `hold`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            HookOutput::Continue => "continue",
            HookOutput::Deny { .. } => "deny",
            HookOutput::Hold => "hold",
        }
    }
}

pub(crate) fn deny(reason: impl Into<String>) -> HookOutput {
    HookOutput::Deny {
        reason: reason.into(),
        details: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `n` nested one-element arrays, built without recursion.
    fn deep(n: usize) -> Value {
        let mut v = json!("leaf");
        for _ in 0..n {
            v = Value::Array(vec![v]);
        }
        v
    }

    fn base() -> Map<String, Value> {
        let input = json!({"point": "pre_trigger", "session_id": "s", "turn_id": "t",
                           "call": {"id": "c", "function_id": "demo::echo"}});
        match input {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    fn call_of(input: &mut Map<String, Value>) -> &mut Map<String, Value> {
        input
            .get_mut("call")
            .and_then(Value::as_object_mut)
            .expect("the base input has a call")
    }

    #[test]
    fn values_of_any_depth_in_any_field_neither_recurse_nor_overflow() {
        const LEVELS: usize = 200_000;
        let put = |field: &str| {
            let mut input = base();
            match field {
                "metadata.k" => {
                    let mut meta = Map::new();
                    meta.insert("k".into(), deep(LEVELS));
                    input.insert("metadata".into(), Value::Object(meta));
                }
                "call.arguments" | "call.extra" | "call.id" => {
                    let key = field.trim_start_matches("call.");
                    call_of(&mut input).insert(key.into(), deep(LEVELS));
                }
                top => {
                    input.insert(top.into(), deep(LEVELS));
                }
            }
            Value::Object(input)
        };
        for (field, parses) in [
            ("step", true),
            ("metadata.k", true),
            ("result", true),
            ("call.arguments", true),
            ("extra", true),
            ("call.extra", true),
            ("metadata", false),
            ("session_id", false),
            ("call.id", false),
            ("call", false),
        ] {
            let parsed = parse_hook_input(put(field));
            assert_eq!(parsed.is_ok(), parses, "{field}");
            drop(parsed);
        }
        // The same input failing for another reason still drops safely.
        let mut input = base();
        input.remove("turn_id");
        input.insert("step".into(), deep(LEVELS));
        input.insert("result".into(), deep(LEVELS));
        call_of(&mut input).insert("arguments".into(), deep(LEVELS));
        assert_eq!(
            parse_hook_input(Value::Object(input)).err(),
            Some(MalformedInput)
        );
        crate::deep::dismantle(deep(LEVELS));
    }

    #[test]
    fn parsing_keeps_every_field_and_its_meaning() {
        let input = json!({
            "point": "post_trigger", "session_id": "s", "turn_id": "t", "step": {"n": 3},
            "depth": 2, "metadata": {"working_dir": "/w"}, "extra": [1],
            "call": {"id": "c", "function_id": "f", "arguments": {"a": [1]}, "extra": {}},
            "result": {"is_error": true}
        });
        let parsed = parse_hook_input(input).expect("parses");
        assert_eq!(parsed.point.as_deref(), Some("post_trigger"));
        assert_eq!((&*parsed.session_id, &*parsed.turn_id), ("s", "t"));
        assert_eq!(parsed.step, Some(json!({"n": 3})));
        assert_eq!(parsed.depth, 2);
        assert_eq!(
            parsed.metadata.as_ref().and_then(|m| m.get("working_dir")),
            Some(&json!("/w"))
        );
        let call = parsed.call.as_ref().expect("call");
        assert_eq!((&*call.id, &*call.function_id), ("c", "f"));
        assert_eq!(call.arguments, Some(json!({"a": [1]})));
        assert_eq!(parsed.result, Some(json!({"is_error": true})));

        // Absent and null optional fields.
        let bare = parse_hook_input(json!({"session_id": "s", "turn_id": "t", "step": null,
            "metadata": null, "call": null}))
        .expect("parses");
        assert!(bare.point.is_none() && bare.step.is_none() && bare.metadata.is_none());
        assert!(bare.call.is_none() && bare.result.is_none());
        assert_eq!(bare.depth, 0);
        let null_args = parse_hook_input(json!({"session_id": "s", "turn_id": "t",
            "call": {"id": "c", "function_id": "f", "arguments": null}, "result": null}))
        .expect("parses");
        assert_eq!(
            null_args.call.as_ref().and_then(|c| c.arguments.clone()),
            Some(Value::Null)
        );
        assert_eq!(null_args.result, Some(Value::Null));

        for bad in [
            json!(null),
            json!([1]),
            json!("s"),
            json!({"turn_id": "t"}),
            json!({"session_id": 5, "turn_id": "t"}),
            json!({"session_id": ["s"], "turn_id": "t"}),
            json!({"session_id": "s", "turn_id": "t", "depth": -1}),
            json!({"session_id": "s", "turn_id": "t", "depth": "deep"}),
            json!({"session_id": "s", "turn_id": "t", "point": {"p": 1}}),
            json!({"session_id": "s", "turn_id": "t", "metadata": "m"}),
            json!({"session_id": "s", "turn_id": "t", "metadata": [1]}),
            json!({"session_id": "s", "turn_id": "t", "call": "not a call"}),
            json!({"session_id": "s", "turn_id": "t", "call": [1]}),
            json!({"session_id": "s", "turn_id": "t", "call": {"id": 7, "function_id": "f"}}),
            json!({"session_id": "s", "turn_id": "t", "call": {"id": "c", "function_id": ["f"]}}),
            json!({"session_id": "s", "turn_id": "t", "call": {"id": "c"}}),
        ] {
            assert_eq!(
                parse_hook_input(bad.clone()).err(),
                Some(MalformedInput),
                "{bad}"
            );
        }
    }
}
