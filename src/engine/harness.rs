//! The harness (`harness::function::resolve`, `harness::workspace::*`) and the
//! session manager (`session::get`): the peers the decision plane and the
//! hooks talk to. Their published shapes are in `architecture/contract.md`
//! § Peers.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{CallError, Engine};

/// Timeout for `harness::function::resolve`: short enough that a resolve
/// answers before its caller gives up (the console and `iii trigger` wait
/// 10 s or more); a harness slower than this keeps the record and the caller
/// retries.
pub(crate) const HARNESS_TIMEOUT: Duration = Duration::from_secs(8);

/// Timeout for `harness::workspace::grant` while a folder prompt is
/// released. Every call to another worker carries a short timeout of its
/// own: the engine can drop a reply (`architecture/integration.md` § Lost
/// replies), and the SDK's default would leave the resolver waiting 30 s. A
/// grant that does not answer in time falls back to the release's
/// `extra_roots`, so the click still works.
pub(crate) const WORKSPACE_GRANT_TIMEOUT: Duration = Duration::from_secs(3);

/// A decision carried to the harness: which held call, and what to do.
///
/// # Format
///
/// ```json
/// { "session_id": "s", "turn_id": "t", "function_call_id": "c", "action": "execute", "extra_roots": ["/dir"] }
/// { "session_id": "s", "turn_id": "t", "function_call_id": "c", "action": "deliver",
///   "is_error": true, "content": [{"type": "text", "text": "<reason>"}], "details": <DenialEnvelope> }
/// ```
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Release {
    /// The held call's session.
    pub session_id: String,
    /// The held call's turn.
    pub turn_id: String,
    /// The held call.
    pub function_call_id: String,
    /// What the harness does with it.
    #[serde(flatten)]
    pub action: ReleaseAction,
}

/// What the harness does with a held call.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub(crate) enum ReleaseAction {
    /// Run the call through the rest of the hook chain, then the target.
    Execute {
        /// One-shot roots trusted for this run only.
        #[serde(skip_serializing_if = "Option::is_none")]
        extra_roots: Option<[String; 1]>,
    },
    /// Answer the call with this result instead of running it.
    Deliver {
        /// Always true: a delivered decision is a refusal.
        is_error: bool,
        /// `[{type: "text", text}]`: what the model reads.
        content: Value,
        /// The denial envelope.
        details: Value,
    },
}

impl ReleaseAction {
    /// Run the call, trusting `extra_root` for this run only when given.
    pub(crate) fn execute(extra_root: Option<&str>) -> ReleaseAction {
        ReleaseAction::Execute {
            extra_roots: extra_root.map(|dir| [dir.to_string()]),
        }
    }

    /// Answer the call with a refusal the model reads as `text`.
    pub(crate) fn deny(text: &str, envelope: Value) -> ReleaseAction {
        ReleaseAction::Deliver {
            is_error: true,
            content: json!([{"type": "text", "text": text}]),
            details: envelope,
        }
    }
}

/// The harness's answer to a release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Released {
    /// Whether the harness still held the call and took the decision.
    pub resolved: Option<bool>,
    /// Whether the parked turn resumed.
    pub turn_resumed: Option<bool>,
}

/// Session context for a record: title, description, metadata.
#[derive(Debug, Default, Clone)]
pub struct SessionContext {
    /// `meta.title`.
    pub title: Option<String>,
    /// `meta.description`.
    pub description: Option<String>,
    /// `meta.metadata` (objects only).
    pub metadata: Option<Map<String, Value>>,
}

impl SessionContext {
    /// Reads a `session::get` reply; empty strings are dropped.
    pub fn of(reply: &Value) -> SessionContext {
        let meta = reply.get("meta");
        let text = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        SessionContext {
            title: text("title"),
            description: text("description"),
            metadata: meta
                .and_then(|m| m.get("metadata"))
                .and_then(Value::as_object)
                .cloned(),
        }
    }
}

impl Engine {
    /// `harness::function::resolve`: carries a decision to a held call.
    pub(crate) async fn harness_resolve(&self, release: &Release) -> Result<Released, CallError> {
        let payload = serde_json::to_value(release).unwrap_or(Value::Null);
        let reply = self
            .call("harness::function::resolve", payload, HARNESS_TIMEOUT)
            .await?;
        Ok(Released {
            resolved: reply.get("resolved").and_then(Value::as_bool),
            turn_resumed: reply.get("turn_resumed").and_then(Value::as_bool),
        })
    }

    /// `harness::workspace::grant {session_id, root}` → the session's roots.
    pub(crate) async fn workspace_grant(
        &self,
        session_id: &str,
        root: &str,
    ) -> Result<Vec<String>, CallError> {
        let out = self
            .call(
                "harness::workspace::grant",
                json!({"session_id": session_id, "root": root}),
                WORKSPACE_GRANT_TIMEOUT,
            )
            .await?;
        Ok(roots_of(&out))
    }

    /// `harness::workspace::grants {session_id}` → the session's durable roots.
    pub(crate) async fn workspace_grants(
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

    /// `session::get`, under a budget; any failure is the caller's to soften.
    pub(crate) async fn session_context(
        &self,
        session_id: &str,
        budget: Duration,
    ) -> Result<SessionContext, CallError> {
        let reply = self
            .call("session::get", json!({"session_id": session_id}), budget)
            .await?;
        Ok(SessionContext::of(&reply))
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
