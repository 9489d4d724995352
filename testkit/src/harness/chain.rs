//! The pure half of a hook chain: order, HookInput, reading a reply, and the
//! result shapes the harness hands to post-trigger hooks and to the turn.
//!
//! # HookInput
//!
//! ```json
//! { "point": "pre_trigger", "session_id": "s1", "turn_id": "t1", "step": 0, "depth": 0,
//!   "metadata": { "working_dir": "/w/s1" },
//!   "call": { "id": "c1", "function_id": "shell::run", "arguments": {} },
//!   "result": { ... } }
//! ```
//!
//! `metadata` is left out when the turn has none; `result` is present on
//! `post_trigger` only.
//!
//! # Reply
//!
//! `null`, `{}` or `{"decision": "continue"}` → continue; `{"decision": "deny",
//! "reason"?}` → deny; `{"decision": "hold"}` → hold. A reply may carry
//! `arguments`: they replace the call's arguments for the hooks after it and
//! for the target (pre-trigger only). Anything else — a non-object reply, an
//! unknown `decision` — counts as a failed hook, so `on_error` decides.

use serde_json::{json, Map, Value};

use super::config::{HookPoint, OnError};

/// Sort key of a binding inside its point's chain: ascending priority, ties by
/// function id, then by binding id so two bindings of one function keep a
/// stable order. A held call remembers its holder's key, and `execute`
/// resumes with the bindings that sort after it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChainKey {
    pub priority: i64,
    pub function_id: String,
    pub binding_id: String,
}

/// What one hook's reply means for the chain.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Go on; `Some` replaces the arguments seen from here on.
    Continue(Option<Value>),
    Deny(String),
    Hold,
}

/// Why a hook produced no usable reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookFailure {
    Failed(String),
    TimedOut,
}

pub const DEFAULT_DENY_REASON: &str = "denied by hook";

/// Reads a hook reply (see the module doc).
pub fn read_reply(reply: &Value) -> Result<Verdict, String> {
    let obj = match reply {
        Value::Null => return Ok(Verdict::Continue(None)),
        Value::Object(obj) => obj,
        other => return Err(format!("reply is not an object: {other}")),
    };
    let arguments = obj.get("arguments").cloned();
    match obj.get("decision") {
        None | Some(Value::Null) => Ok(Verdict::Continue(arguments)),
        Some(Value::String(d)) if d == "continue" => Ok(Verdict::Continue(arguments)),
        Some(Value::String(d)) if d == "deny" => {
            let reason = obj
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or(DEFAULT_DENY_REASON);
            Ok(Verdict::Deny(reason.to_string()))
        }
        Some(Value::String(d)) if d == "hold" => Ok(Verdict::Hold),
        Some(other) => Err(format!("unknown decision {other}")),
    }
}

/// The verdict for a hook that failed: fail_closed denies with the harness's
/// wording, fail_open skips (`None`).
pub fn failure_verdict(
    on_error: OnError,
    function_id: &str,
    failure: &HookFailure,
) -> Option<Verdict> {
    match on_error {
        OnError::FailOpen => None,
        OnError::FailClosed => Some(Verdict::Deny(match failure {
            HookFailure::Failed(err) => format!("hook {function_id} failed: {err}"),
            HookFailure::TimedOut => format!("hook {function_id} timed out"),
        })),
    }
}

/// The call fields a HookInput is built from.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    pub session_id: &'a str,
    pub turn_id: &'a str,
    pub call_id: &'a str,
    pub function_id: &'a str,
    pub step: u64,
    pub depth: u64,
    pub metadata: Option<&'a Value>,
}

pub fn hook_input(
    point: HookPoint,
    call: CallView<'_>,
    arguments: &Value,
    result: Option<&Value>,
) -> Value {
    let mut input = Map::new();
    input.insert("point".into(), json!(point.wire_name()));
    input.insert("session_id".into(), json!(call.session_id));
    input.insert("turn_id".into(), json!(call.turn_id));
    input.insert("step".into(), json!(call.step));
    input.insert("depth".into(), json!(call.depth));
    if let Some(metadata) = call.metadata {
        input.insert("metadata".into(), metadata.clone());
    }
    input.insert(
        "call".into(),
        json!({ "id": call.call_id, "function_id": call.function_id, "arguments": arguments }),
    );
    if let Some(result) = result {
        input.insert("result".into(), result.clone());
    }
    Value::Object(input)
}

fn text_content(text: &str) -> Value {
    json!([{ "type": "text", "text": text }])
}

/// A target's successful output as the turn sees it: a string stays as is,
/// anything else is its JSON text.
pub fn success_result(call_id: &str, function_id: &str, output: &Value) -> Value {
    let text = match output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(&text),
        "is_error": false,
    })
}

/// A target's error: the text block and `details.error.message` carry the same
/// message, so a reader that looks at either finds the grant hint tail.
pub fn error_result(call_id: &str, function_id: &str, code: &str, message: &str) -> Value {
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(message),
        "is_error": true,
        "details": { "error": { "code": code, "message": message } },
    })
}

/// The harness's own dispatch policy refused the target: `details.error` is a
/// plain string, unlike a target error.
pub fn policy_denied_result(call_id: &str, function_id: &str) -> Value {
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(&format!("{function_id} is not allowed by the dispatch policy")),
        "is_error": true,
        "details": { "error": "policy_denied" },
    })
}

/// The answer a denied call gets.
pub fn denied_result(call_id: &str, function_id: &str, reason: &str) -> Value {
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(reason),
        "is_error": true,
    })
}

// ---- today's harness (generation 2) ---------------------------------------

/// The rewrites and notes a generation-2 hook reply may carry, on `continue`
/// and on `hold` alike.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mutations {
    /// `mutations.arguments`: the call's new arguments (pre-trigger).
    pub arguments: Option<Value>,
    /// `mutations.content` / `details` / `is_error`: the result rewritten
    /// (post-trigger).
    pub content: Option<Value>,
    pub details: Option<Value>,
    pub is_error: Option<bool>,
    /// `annotations`: merged into what the harness records with the result.
    pub annotations: Map<String, Value>,
}

/// A generation-2 hook reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Continue(Mutations),
    /// Only `reason` survives (`denied by hook` when absent); any other
    /// field, `details` included, is dropped.
    Deny(String),
    Hold(Mutations),
}

/// Reads a generation-2 hook reply: `decision: "deny"` and `"hold"` are
/// read; anything else — `null`, no decision, an unknown decision, a reply
/// that is not an object — continues.
pub fn read_reply_today(reply: &Value) -> Reply {
    match reply.get("decision").and_then(Value::as_str) {
        Some("deny") => Reply::Deny(
            reply
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_DENY_REASON)
                .to_string(),
        ),
        Some("hold") => Reply::Hold(read_mutations(reply)),
        _ => Reply::Continue(read_mutations(reply)),
    }
}

fn read_mutations(reply: &Value) -> Mutations {
    let mut out = Mutations::default();
    if let Some(m) = reply.get("mutations") {
        out.arguments = m.get("arguments").cloned();
        out.content = m.get("content").filter(|c| c.is_array()).cloned();
        out.details = m.get("details").cloned();
        out.is_error = m.get("is_error").and_then(Value::as_bool);
    }
    if let Some(Value::Object(notes)) = reply.get("annotations") {
        out.annotations = notes.clone();
    }
    out
}

/// The generation-2 reading of a failed hook: fail_closed denies with the
/// harness's wording, fail_open continues unchanged.
pub fn failure_reply(on_error: OnError, function_id: &str, failure: &HookFailure) -> Reply {
    match failure_verdict(on_error, function_id, failure) {
        Some(Verdict::Deny(reason)) => Reply::Deny(reason),
        _ => Reply::Continue(Mutations::default()),
    }
}

/// Applies a post-trigger hook's result rewrites.
pub fn rewrite_result(result: &mut Value, mutations: &Mutations) {
    if let Some(content) = &mutations.content {
        result["content"] = content.clone();
    }
    if let Some(details) = &mutations.details {
        result["details"] = details.clone();
    }
    if let Some(is_error) = mutations.is_error {
        result["is_error"] = json!(is_error);
    }
}

/// A generation-2 denial: the reason as text and as
/// `details: {error: "hook_denied", message}`.
pub fn hook_denied_result(call_id: &str, function_id: &str, reason: &str) -> Value {
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(reason),
        "is_error": true,
        "details": { "error": "hook_denied", "message": reason },
    })
}

/// A target's output as generation 2 shapes it: `details` is the raw output;
/// the text is the string itself, the output's own non-empty `content`
/// blocks, or its compact JSON; `is_error` is the output's own `is_error`.
pub fn output_result(call_id: &str, function_id: &str, output: &Value) -> Value {
    let content = match output {
        Value::String(s) => text_content(s),
        other => match other.get("content") {
            Some(Value::Array(blocks)) if !blocks.is_empty() => Value::Array(blocks.clone()),
            _ => text_content(&other.to_string()),
        },
    };
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": content,
        "is_error": output.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        "details": output,
    })
}

/// A generation-2 dispatch-policy refusal: `details.error` is the string
/// `policy_denied`, with the function id and the message beside it.
pub fn policy_refusal_result(call_id: &str, function_id: &str) -> Value {
    let message = format!("{function_id} is not allowed by the dispatch policy");
    json!({
        "function_call_id": call_id,
        "function_id": function_id,
        "content": text_content(&message),
        "is_error": true,
        "details": { "error": "policy_denied", "function_id": function_id, "message": message },
    })
}

/// The deterministic entry id a `deliver` appends under.
pub fn entry_id(turn_id: &str, function_call_id: &str) -> String {
    format!("e_{turn_id}_{function_call_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        assert_eq!(read_reply(&Value::Null), Ok(Verdict::Continue(None)));
        assert_eq!(read_reply(&json!({})), Ok(Verdict::Continue(None)));
        assert_eq!(
            read_reply(&json!({"decision": "continue", "arguments": {"a": 1}})),
            Ok(Verdict::Continue(Some(json!({"a": 1}))))
        );
        assert_eq!(
            read_reply(&json!({"decision": "deny"})),
            Ok(Verdict::Deny("denied by hook".into()))
        );
        assert_eq!(
            read_reply(&json!({"decision": "deny", "reason": "no"})),
            Ok(Verdict::Deny("no".into()))
        );
        assert_eq!(read_reply(&json!({"decision": "hold"})), Ok(Verdict::Hold));
        assert!(read_reply(&json!({"decision": "allow"})).is_err());
        assert!(read_reply(&json!("hold")).is_err());
    }

    #[test]
    fn generation_2_replies() {
        assert_eq!(
            read_reply_today(&Value::Null),
            Reply::Continue(Mutations::default())
        );
        assert_eq!(
            read_reply_today(&json!({"decision": "allow"})),
            Reply::Continue(Mutations::default())
        );
        assert_eq!(
            read_reply_today(&json!("hold")),
            Reply::Continue(Mutations::default())
        );
        assert_eq!(
            read_reply_today(&json!({"decision": "deny", "details": {"x": 1}})),
            Reply::Deny("denied by hook".into())
        );
        let hold = read_reply_today(&json!({
            "decision": "hold",
            "mutations": {"arguments": {"a": 2}},
            "annotations": {"by": "gate"}
        }));
        let Reply::Hold(m) = hold else {
            panic!("a hold: {hold:?}")
        };
        assert_eq!(m.arguments, Some(json!({"a": 2})));
        assert_eq!(m.annotations["by"], "gate");
        let legacy = read_reply_today(&json!({"decision": "continue", "arguments": {"a": 3}}));
        assert_eq!(
            legacy,
            Reply::Continue(Mutations::default()),
            "top-level arguments are not read"
        );
    }

    #[test]
    fn generation_2_results() {
        let denied = hook_denied_result("c", "f::g", "no");
        assert_eq!(
            denied["details"],
            json!({"error": "hook_denied", "message": "no"})
        );
        assert_eq!(denied["content"], json!([{"type": "text", "text": "no"}]));
        let out = output_result("c", "f::g", &json!({"a": 1}));
        assert_eq!(
            out["content"],
            json!([{"type": "text", "text": "{\"a\":1}"}])
        );
        assert_eq!(out["details"], json!({"a": 1}));
        assert_eq!(out["is_error"], false);
        let mut result = out.clone();
        rewrite_result(
            &mut result,
            &Mutations {
                is_error: Some(true),
                ..Mutations::default()
            },
        );
        assert_eq!(result["is_error"], true);
        assert_eq!(
            failure_reply(OnError::FailOpen, "h", &HookFailure::TimedOut),
            Reply::Continue(Mutations::default())
        );
        assert_eq!(
            failure_reply(OnError::FailClosed, "h", &HookFailure::TimedOut),
            Reply::Deny("hook h timed out".into())
        );
    }

    #[test]
    fn failures() {
        let f = HookFailure::Failed("function_not_found: gone".into());
        assert_eq!(
            failure_verdict(OnError::FailClosed, "approval::gate", &f),
            Some(Verdict::Deny(
                "hook approval::gate failed: function_not_found: gone".into()
            ))
        );
        assert_eq!(
            failure_verdict(OnError::FailClosed, "h::x", &HookFailure::TimedOut),
            Some(Verdict::Deny("hook h::x timed out".into()))
        );
        assert_eq!(
            failure_verdict(OnError::FailOpen, "h::x", &HookFailure::TimedOut),
            None
        );
    }

    #[test]
    fn chain_keys_order_by_priority_then_function() {
        let k = |p, f: &str, b: &str| ChainKey {
            priority: p,
            function_id: f.into(),
            binding_id: b.into(),
        };
        let mut keys = [
            k(1, "a", "x"),
            k(-1, "z", "y"),
            k(1, "a", "a"),
            k(0, "b", "z"),
        ];
        keys.sort();
        let order: Vec<_> = keys
            .iter()
            .map(|k| (k.priority, k.function_id.as_str(), k.binding_id.as_str()))
            .collect();
        assert_eq!(
            order,
            vec![(-1, "z", "y"), (0, "b", "z"), (1, "a", "a"), (1, "a", "x")]
        );
    }

    #[test]
    fn input_shape() {
        let meta = json!({"working_dir": "/w"});
        let view = CallView {
            session_id: "s",
            turn_id: "t",
            call_id: "c",
            function_id: "f::g",
            step: 2,
            depth: 1,
            metadata: Some(&meta),
        };
        let input = hook_input(
            HookPoint::PostTrigger,
            view,
            &json!({"x": 1}),
            Some(&json!({"is_error": false})),
        );
        assert_eq!(input["point"], "post_trigger");
        assert_eq!(
            input["call"],
            json!({"id": "c", "function_id": "f::g", "arguments": {"x": 1}})
        );
        assert_eq!(input["metadata"]["working_dir"], "/w");
        assert_eq!(input["result"]["is_error"], false);
        let bare = hook_input(
            HookPoint::PreTrigger,
            CallView {
                metadata: None,
                ..view
            },
            &json!({}),
            None,
        );
        assert!(bare.get("metadata").is_none() && bare.get("result").is_none());
    }
}
