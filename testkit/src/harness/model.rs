//! What tests hand the harness double and what they read back from it.

use serde_json::Value;

use super::config::HookPoint;

/// The typed leads every denial text the approval gate writes starts with
/// (contract § Provenance and typed outcomes): policy, a human, the
/// reviewer, a timeout, an unavailable gate. Today's harness hands the model
/// only the text, so the lead is how the model tells who denied.
pub const DENIAL_LEADS: [&str; 5] = [
    "Permission denied by policy:",
    "Denied by a human:",
    "Denied by the reviewer:",
    "Approval timed out:",
    "Approval gate unavailable (retry later):",
];

/// The typed lead `text` starts with, if any.
pub fn denial_lead(text: &str) -> Option<&'static str> {
    DENIAL_LEADS
        .iter()
        .copied()
        .find(|lead| text.starts_with(lead))
}

/// What a human's edit writes before the arguments of the call to make
/// instead (contract §28): `… call <function_id> with these arguments
/// instead: <JSON>`.
pub const INSTEAD: &str = " with these arguments instead: ";

/// The call a denial tells the model to make instead, as a model reads it:
/// the function id after the last `call ` before [`INSTEAD`], and the JSON
/// after it. `None` when the text names no such call.
pub fn call_instead(text: &str) -> Option<(String, Value)> {
    let at = text.find(INSTEAD)?;
    let head = &text[..at];
    let function_id = &head[head.rfind("call ")? + "call ".len()..];
    if function_id.is_empty() || function_id.contains(' ') {
        return None;
    }
    let arguments = serde_json::from_str(&text[at + INSTEAD.len()..]).ok()?;
    Some((function_id.to_string(), arguments))
}

/// One function call a turn makes, as the harness would dispatch it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    pub session_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub function_id: String,
    pub arguments: Value,
    /// The turn's metadata (`working_dir` is the session workspace on
    /// generation 1, `fs_scope.root` on generation 2); sent to hooks as
    /// `metadata` and left out when `None`.
    pub metadata: Option<Value>,
    pub step: u64,
    pub depth: u64,
}

impl CallSpec {
    /// A call at step 0, depth 0, without turn metadata.
    pub fn new(
        session_id: impl Into<String>,
        turn_id: impl Into<String>,
        call_id: impl Into<String>,
        function_id: impl Into<String>,
        arguments: Value,
    ) -> CallSpec {
        CallSpec {
            session_id: session_id.into(),
            turn_id: turn_id.into(),
            call_id: call_id.into(),
            function_id: function_id.into(),
            arguments,
            metadata: None,
            step: 0,
            depth: 0,
        }
    }

    pub fn with_metadata(mut self, metadata: Value) -> CallSpec {
        self.metadata = Some(metadata);
        self
    }

    pub fn with_working_dir(self, dir: &str) -> CallSpec {
        self.with_metadata(serde_json::json!({ "working_dir": dir }))
    }

    /// Scopes the turn to `root` the way today's harness reads it:
    /// `metadata.fs_scope.root`, other metadata keys kept.
    pub fn with_fs_root(mut self, root: &str) -> CallSpec {
        let mut metadata = match self.metadata.take() {
            Some(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        metadata.insert("fs_scope".into(), serde_json::json!({ "root": root }));
        self.metadata = Some(Value::Object(metadata));
        self
    }

    pub fn at(mut self, step: u64, depth: u64) -> CallSpec {
        self.step = step;
        self.depth = depth;
        self
    }
}

/// Where a call stands. The harness keeps one per `(session_id, call_id)`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallState {
    /// A chain or the target is running for it right now.
    Running,
    /// Parked by a hook; the turn waits until a resolve. The arguments it
    /// holds are [`super::HarnessDouble::held_arguments`].
    Held { held_by: String, point: HookPoint },
    /// The turn got this result (target output, or an is_error result from a
    /// failed target or a policy denial).
    Completed { result: Value },
    /// A hook denied it (or a fail_closed hook failed); `result` is the
    /// is_error answer carrying `reason`.
    Denied {
        reason: String,
        point: HookPoint,
        result: Value,
    },
    /// A `deliver` resolve answered it under `entry_id`.
    Delivered { entry_id: String, result: Value },
    /// Its turn ended while it was held; a later resolve finds nothing
    /// (generation 1; on generation 2 the call stays `Held` on a finished
    /// turn).
    Abandoned { status: String },
    /// Generation 2: a `harness::spawn` that started a sub-agent; the call
    /// waits on the child (listed by `harness::status` as pending, and under
    /// `children`), it is not held.
    AwaitingChild {
        child_session_id: String,
        child_turn_id: String,
    },
}

/// What [`super::HarnessDouble::call`] returns: the state the call reached
/// when the turn either got an answer or parked it.
pub type CallOutcome = CallState;

impl CallState {
    pub fn is_held(&self) -> bool {
        matches!(self, CallState::Held { .. })
    }

    pub fn held_by(&self) -> Option<&str> {
        match self {
            CallState::Held { held_by, .. } => Some(held_by),
            _ => None,
        }
    }

    /// The answer the turn received, once it has one.
    pub fn result(&self) -> Option<&Value> {
        match self {
            CallState::Completed { result }
            | CallState::Denied { result, .. }
            | CallState::Delivered { result, .. } => Some(result),
            _ => None,
        }
    }

    /// The text the model reads of the answer: a hook's denial reason, or
    /// the first text item of a delivered or completed result.
    pub fn answer_text(&self) -> Option<String> {
        if let Some(reason) = self.deny_reason() {
            return Some(reason.to_string());
        }
        let content = self.result()?.get("content")?;
        let first = content.as_array()?.first()?;
        first
            .get("text")
            .and_then(Value::as_str)
            .or_else(|| first.as_str())
            .map(str::to_string)
    }

    pub fn deny_reason(&self) -> Option<&str> {
        match self {
            CallState::Denied { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// A binding as the harness stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingInfo {
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    /// The config exactly as the binder sent it.
    pub config: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
}

/// One invocation of a hook function and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCall {
    pub point: HookPoint,
    pub binding_id: String,
    pub function_id: String,
    pub session_id: String,
    pub call_id: String,
    pub input: Value,
    /// The reply, or the error text (`timed out` for a timeout).
    pub reply: Result<Value, String>,
}

/// One run of a call's target function.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRun {
    pub function_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub call_id: String,
    /// The arguments as the last pre-trigger hook left them.
    pub arguments: Value,
    /// The invocation metadata the target received (see the module doc of
    /// [`super`] for its format).
    pub metadata: Value,
    /// One-shot roots of this run (generation 1: `extra_roots`, generation
    /// 2: `fs_scope.grants` of an `execute` resolve); empty otherwise.
    pub extra_roots: Vec<String>,
    /// The boundary the trusted stamp carried (`workspace` or
    /// `configured_roots`); `None` on generation 1 and for unstamped calls.
    pub boundary: Option<String>,
    /// The result handed to the post-trigger chain.
    pub result: Value,
}

/// A result appended to a turn by a `deliver` resolve.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub entry_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub function_call_id: String,
    pub result: Value,
}

/// A `harness::turn-completed` event to emit.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnCompletion {
    pub session_id: String,
    pub turn_id: String,
    /// `completed`, `cancelled` or `failed`.
    pub status: String,
    pub result: Option<Value>,
    pub result_error: Option<Value>,
    pub reason: Option<String>,
    /// The parent session of a child session's turn; sent as
    /// `parent: {session_id}` (generation 2: `parent: {session_id, turn_id,
    /// function_call_id}` and `parent_session_id`) and matched by
    /// `parent_session_id` filters.
    pub parent_session_id: Option<String>,
    /// Generation 2: the parent's turn and call in the `parent` link (empty
    /// strings when `None`).
    pub parent_turn_id: Option<String>,
    pub parent_function_call_id: Option<String>,
    /// Generation 2: `false` marks a turn after which the session still runs.
    pub terminal: bool,
    /// Generation 2: the context accounting, sent as is when present.
    pub context: Option<Value>,
    /// Generation 2: the depth of a reactively spawned turn.
    pub reactive_depth: Option<u32>,
}

impl TurnCompletion {
    pub fn new(
        session_id: impl Into<String>,
        turn_id: impl Into<String>,
        status: impl Into<String>,
    ) -> TurnCompletion {
        TurnCompletion {
            session_id: session_id.into(),
            turn_id: turn_id.into(),
            status: status.into(),
            result: None,
            result_error: None,
            reason: None,
            parent_session_id: None,
            parent_turn_id: None,
            parent_function_call_id: None,
            terminal: true,
            context: None,
            reactive_depth: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_23_a_denial_is_read_by_its_lead() {
        assert_eq!(
            denial_lead("Denied by a human: not on prod"),
            Some("Denied by a human:")
        );
        assert_eq!(
            denial_lead("Approval timed out: no one approved shell::run"),
            Some("Approval timed out:")
        );
        assert_eq!(denial_lead("denied by hook"), None);
        assert_eq!(denial_lead("Permission denied: x matched rule y"), None);
    }
}
