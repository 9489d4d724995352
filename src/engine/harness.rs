//! The harness (`harness::function::resolve`, `harness::status`, the
//! filesystem grants of either generation) and the
//! session manager (`session::get`): the peers the decision plane and the
//! hooks talk to. Their published shapes are in `architecture/contract.md`
//! § Peers.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{CallError, Engine};

/// Timeout for the harness's filesystem-grant calls (`grant`, `revoke`)
/// while a folder prompt is released. Every call to another worker carries a
/// short timeout of its own: the engine can drop a reply
/// (`architecture/integration.md` § Lost replies), and the SDK's default
/// would leave the resolver waiting 30 s. A grant that does not answer in
/// time falls back to the release's one-shot root, so the click still works.
pub(crate) const GRANT_TIMEOUT: Duration = Duration::from_secs(3);

/// Timeout for `harness::status` and the generation look-up.
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(3);

/// Which harness the engine serves (`architecture/contract.md` § Two harness
/// generations): told apart by the functions it registers, never configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Generation {
    /// The brief's harness: `harness::workspace::*`, `extra_roots`, an
    /// `execute` that answers once the call is re-dispatched.
    G1,
    /// Today's harness: `harness::filesystem::*`, `fs_scope.grants`, an
    /// `execute` that runs the target inline, `harness::status`.
    G2,
}

impl Generation {
    /// The family of the durable filesystem grants.
    fn grants_family(self) -> &'static str {
        match self {
            Generation::G1 => "harness::workspace::",
            Generation::G2 => "harness::filesystem::",
        }
    }

    /// The name logs give it.
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// A decision carried to the harness: which held call, and what to do.
///
/// # Format
///
/// ```json
/// { "session_id": "s", "turn_id": "t", "function_call_id": "c", "action": "execute",
///   "extra_roots": ["/dir"], "fs_scope": {"grants": ["/dir"]} }
/// { "session_id": "s", "turn_id": "t", "function_call_id": "c", "action": "deliver",
///   "is_error": true, "content": [{"type": "text", "text": "<reason>"}], "details": <DenialEnvelope> }
/// ```
///
/// A one-shot root goes out in both spellings: each harness generation reads
/// its own and ignores the other's.
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

/// `fs_scope` of a release: the one-shot roots of today's harness.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OneShotScope {
    /// Roots trusted for this run only.
    pub grants: [String; 1],
}

/// What the harness does with a held call.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub(crate) enum ReleaseAction {
    /// Run the call through the rest of the hook chain, then the target.
    Execute {
        /// One-shot roots trusted for this run only (the brief's harness).
        #[serde(skip_serializing_if = "Option::is_none")]
        extra_roots: Option<[String; 1]>,
        /// The same root, as today's harness reads it.
        #[serde(skip_serializing_if = "Option::is_none")]
        fs_scope: Option<OneShotScope>,
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
            fs_scope: extra_root.map(|dir| OneShotScope {
                grants: [dir.to_string()],
            }),
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

    /// Whether the call runs on this release.
    pub(crate) fn is_execute(&self) -> bool {
        matches!(self, ReleaseAction::Execute { .. })
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

/// What `harness::status` says of a session (`architecture/contract.md`
/// § Two harness generations, "Reconcile"; §27.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HarnessStatus {
    /// `null`: the harness knows no turn of the session (deleted, never
    /// seen, or not loaded yet by a harness that is still booting).
    Unknown,
    /// The current turn.
    Known {
        /// `pending_function_calls`: the calls that await a result — held
        /// by a hook, running, or waiting on a sub-agent.
        pending: Vec<String>,
        /// The calls among `children` (`function_call_id`): they spawned a
        /// sub-agent and wait on it, so they ran; they are not held.
        children: Vec<String>,
    },
}

impl HarnessStatus {
    /// Reads a verbose `harness::status` reply.
    fn of(reply: &Value) -> Result<HarnessStatus, CallError> {
        if reply.is_null() {
            return Ok(HarnessStatus::Unknown);
        }
        let Some(calls) = reply
            .get("pending_function_calls")
            .and_then(Value::as_array)
        else {
            return Err(CallError::malformed(
                "harness::status",
                format!(
                    "pending_function_calls is {}",
                    super::kind_of(&reply["pending_function_calls"])
                ),
            ));
        };
        let ids = |items: &[Value], field: &str| -> Vec<String> {
            items
                .iter()
                .filter_map(|c| c.as_str().or_else(|| c.get(field).and_then(Value::as_str)))
                .map(str::to_string)
                .collect()
        };
        let children = reply
            .get("children")
            .and_then(Value::as_array)
            .map(|c| ids(c, "function_call_id"))
            .unwrap_or_default();
        Ok(HarnessStatus::Known {
            pending: ids(calls, "id"),
            children,
        })
    }

    /// Whether the harness may still hold `call_id`: listed as pending and
    /// not waiting on a sub-agent. A listed call is no proof of a hold (it
    /// may be running), but an unlisted one, or one waiting on its child,
    /// is certainly not held.
    pub(crate) fn may_hold(&self, call_id: &str) -> bool {
        match self {
            HarnessStatus::Unknown => false,
            HarnessStatus::Known { pending, children } => {
                pending.iter().any(|c| c == call_id) && !children.iter().any(|c| c == call_id)
            }
        }
    }

    /// Whether `call_id` waits on a sub-agent it spawned.
    pub(crate) fn awaits_child(&self, call_id: &str) -> bool {
        matches!(self, HarnessStatus::Known { children, .. } if children.iter().any(|c| c == call_id))
    }
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
    /// `harness::function::resolve`: carries a decision to a held call and
    /// waits up to `timeout` for the answer (today's harness answers an
    /// `execute` only when the target has run).
    pub(crate) async fn harness_resolve(
        &self,
        release: &Release,
        timeout: Duration,
    ) -> Result<Released, CallError> {
        let payload = serde_json::to_value(release).unwrap_or(Value::Null);
        let reply = self
            .call("harness::function::resolve", payload, timeout)
            .await?;
        Ok(Released {
            resolved: reply.get("resolved").and_then(Value::as_bool),
            turn_resumed: reply.get("turn_resumed").and_then(Value::as_bool),
        })
    }

    /// `harness::status {session_id, verbose: true}` → what the harness says
    /// of the session's current turn (today's harness only; the brief's has
    /// none, and the call fails `function_not_found`). `null` is a session
    /// it knows no turn of.
    pub(crate) async fn harness_status(
        &self,
        session_id: &str,
    ) -> Result<HarnessStatus, CallError> {
        let reply = self
            .call(
                "harness::status",
                json!({"session_id": session_id, "verbose": true}),
                STATUS_TIMEOUT,
            )
            .await?;
        HarnessStatus::of(&reply)
    }

    /// Which harness serves the engine now: today's when
    /// `harness::filesystem::grants` exists, else the brief's when
    /// `harness::workspace::grants` does, else `None` (no grant plane).
    pub(crate) async fn harness_generation(&self) -> Result<Option<Generation>, CallError> {
        let ids = self.function_ids("harness::").await?;
        let has = |id: &str| ids.iter().any(|i| i == id);
        Ok(if has("harness::filesystem::grants") {
            Some(Generation::G2)
        } else if has("harness::workspace::grants") {
            Some(Generation::G1)
        } else {
            None
        })
    }

    /// `harness::{workspace,filesystem}::grant {session_id, root}` → the
    /// session's roots.
    pub(crate) async fn fs_grant(
        &self,
        generation: Generation,
        session_id: &str,
        root: &str,
    ) -> Result<Vec<String>, CallError> {
        let id = format!("{}grant", generation.grants_family());
        let out = self
            .call(
                &id,
                json!({"session_id": session_id, "root": root}),
                GRANT_TIMEOUT,
            )
            .await?;
        Ok(roots_of(&out))
    }

    /// `harness::{workspace,filesystem}::revoke {session_id, root}` → the
    /// session's roots.
    pub(crate) async fn fs_revoke(
        &self,
        generation: Generation,
        session_id: &str,
        root: &str,
    ) -> Result<Vec<String>, CallError> {
        let id = format!("{}revoke", generation.grants_family());
        let out = self
            .call(
                &id,
                json!({"session_id": session_id, "root": root}),
                GRANT_TIMEOUT,
            )
            .await?;
        Ok(roots_of(&out))
    }

    /// `harness::{workspace,filesystem}::grants {session_id}` → the session's
    /// durable roots.
    pub(crate) async fn fs_grants(
        &self,
        generation: Generation,
        session_id: &str,
        budget: Duration,
    ) -> Result<Vec<String>, CallError> {
        let id = format!("{}grants", generation.grants_family());
        let out = self
            .call(&id, json!({"session_id": session_id}), budget)
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
