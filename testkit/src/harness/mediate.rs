//! Today's harness (generation 2): the calls it settles itself instead of
//! invoking a target, after the pre-trigger chain let them through (its
//! sources: `functions/subscribe.rs` `invoke`, `subagent.rs`).
//!
//! # Subscriptions
//!
//! The agent's `engine::register_trigger` never reaches the engine's
//! registrar. The harness reads it as a subscription owned by the calling
//! session, `{trigger_type, config?, label?, once?, function_id?, target?:
//! {function_id, payload?}, metadata?: {payload?}, conditions?: [{function_id,
//! config?}]}`:
//!
//! * a `harness::` trigger type is refused (turn events and hook points are
//!   not agent-bindable), except `harness::hook::post-turn`, a validator of
//!   the session's own turns that needs a `function_id` the session may
//!   call (no approval probe);
//! * no `function_id` / `target` is a wake: it notifies the session, no probe;
//! * a call target is refused when it is empty, a `harness::` function,
//!   `engine::register_trigger` / `engine::unregister_trigger`, or refused by
//!   the dispatch policy ([`super::HarnessDouble::deny_dispatch`]); then
//!   `approval::evaluate {session_id, function_id: <target>, arguments:
//!   <payload or {}>}` is asked, and the binding is made only on `verdict:
//!   "allow"`. An absent `approval::evaluate` (`function_not_found`, "not
//!   found", "no worker", "unregistered") counts as allow; any other failure
//!   refuses. Each condition's function is checked the same way, with the
//!   arguments `{event: null, condition_config, binding: {id: null, fires:
//!   0}, context: {owner_session_id}}`.
//!
//! The answer is `{subscription_id: "sub_<n>", once}`; a refusal is an
//! `is_error` result with the reason. The double records the subscription
//! ([`super::HarnessDouble::subscriptions`]) and binds nothing in the engine.
//!
//! `engine::unregister_trigger {id}` removes the caller's own subscription
//! (`{removed: true}`), refuses another session's, and answers `{removed:
//! false}` for any other id: it never reaches an engine binding, the gate's
//! included.
//!
//! # Sub-agents
//!
//! With [`super::HarnessDouble::play_spawns`], a `harness::spawn` call in a
//! turn starts a child instead of invoking a target (the dispatcher injects
//! the parent; the model's arguments never name it): the child session is
//! made with `session::ensure {session_id, metadata: {parent_session_id,
//! parent_turn_id, function_call_id, depth}}` (a session manager that is
//! absent or fails is ignored; a session that exists keeps its metadata),
//! inherits the parent's durable grants, and the call waits on it
//! ([`CallState::AwaitingChild`]): `harness::status` lists it among the
//! pending calls and under `children`. The child's turn starts at once, its
//! turn events carrying `parent: {session_id, turn_id, function_call_id}`.

use std::sync::atomic::Ordering;

use iii_sdk::Error;
use serde_json::{json, Map, Value};

use super::chain;
use super::model::{CallSpec, CallState};
use super::{lock, peer, CallKey, Core};

/// The agent-facing subscription controls.
pub const REGISTER_TRIGGER: &str = "engine::register_trigger";
pub const UNREGISTER_TRIGGER: &str = "engine::unregister_trigger";
/// The one harness trigger type an agent may bind: its own turns' validator.
pub const POST_TURN: &str = "harness::hook::post-turn";
/// The in-turn spawn.
pub const SPAWN: &str = "harness::spawn";
const EVALUATE: &str = "approval::evaluate";
const SESSION_ENSURE: &str = "session::ensure";

/// A subscription the harness made for a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub id: String,
    /// The owning session (the caller's, never an argument).
    pub session_id: String,
    pub trigger_type: String,
    pub config: Value,
    /// The function each fire calls; `None` for a wake.
    pub target: Option<String>,
}

/// A sub-agent's link to the call that spawned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentLink {
    pub session_id: String,
    pub turn_id: String,
    pub function_call_id: String,
}

impl ParentLink {
    pub fn to_json(&self) -> Value {
        json!({
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "function_call_id": self.function_call_id,
        })
    }
}

/// What the harness made of a call it settles itself.
pub(super) enum Mediated {
    /// A result, for the post-trigger chain.
    Result(Value),
    /// The call now waits on a child.
    Parked(CallState),
}

impl Core {
    /// Settles `spec` here when today's harness would (see the module doc);
    /// `None`: invoke the target.
    pub(super) async fn mediate(
        &self,
        key: &CallKey,
        spec: &CallSpec,
        arguments: &Value,
    ) -> Option<Mediated> {
        match spec.function_id.as_str() {
            REGISTER_TRIGGER => Some(Mediated::Result(self.subscribe(spec, arguments).await)),
            UNREGISTER_TRIGGER => Some(Mediated::Result(self.unsubscribe(spec, arguments))),
            SPAWN if self.play_spawns.load(Ordering::SeqCst) => {
                let child = arguments
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{}-child-{}", spec.session_id, spec.call_id));
                let link = ParentLink {
                    session_id: spec.session_id.clone(),
                    turn_id: spec.turn_id.clone(),
                    function_call_id: spec.call_id.clone(),
                };
                self.spawn_child_session(&link, &child, spec.depth + 1)
                    .await;
                let state = CallState::AwaitingChild {
                    child_session_id: child.clone(),
                    child_turn_id: child_turn(&child),
                };
                Some(Mediated::Parked(self.settle(key, None, state)))
            }
            _ => None,
        }
    }

    /// Makes `child` a sub-agent of `link`'s call and starts its turn.
    /// Returns whether the session manager made the session (`false` when
    /// it existed, or no session manager answered).
    pub(super) async fn spawn_child_session(
        &self,
        link: &ParentLink,
        child: &str,
        depth: u64,
    ) -> bool {
        let linkage = json!({
            "parent_session_id": link.session_id,
            "parent_turn_id": link.turn_id,
            "function_call_id": link.function_call_id,
            "depth": depth,
        });
        let ensured = self
            .iii
            .trigger(peer::request(
                SESSION_ENSURE,
                json!({"session_id": child, "metadata": linkage}),
                None,
                Some(5_000),
                None,
                None,
            ))
            .await;
        let created = match ensured {
            Ok(reply) => reply.get("created").and_then(Value::as_bool) == Some(true),
            Err(err) => {
                tracing::debug!(error = %err, "no session manager made the child session");
                false
            }
        };
        {
            let mut grants = lock(&self.grants);
            let copied = grants.get(&link.session_id).cloned().unwrap_or_default();
            grants.entry(child.to_string()).or_default().extend(copied);
        }
        lock(&self.lineage).insert(child.to_string(), link.clone());
        let turn = child_turn(child);
        self.note_turn(child, &turn);
        self.emit_turn_started(child, &turn).await;
        created
    }

    /// The parent link of `session_id`, when the double spawned it.
    pub(super) fn parent_of(&self, session_id: &str) -> Option<ParentLink> {
        lock(&self.lineage).get(session_id).cloned()
    }

    async fn subscribe(&self, spec: &CallSpec, arguments: &Value) -> Value {
        match self.register(spec, arguments).await {
            Ok(output) => chain::output_result(&spec.call_id, &spec.function_id, &output),
            Err(reason) => {
                chain::error_result(&spec.call_id, &spec.function_id, "invalid_request", &reason)
            }
        }
    }

    async fn register(&self, spec: &CallSpec, arguments: &Value) -> Result<Value, String> {
        let trigger_type = arguments
            .get("trigger_type")
            .and_then(Value::as_str)
            .ok_or("invalid subscribe arguments: missing `trigger_type`")?;
        let explicit = arguments
            .pointer("/target/function_id")
            .or_else(|| arguments.get("function_id"))
            .and_then(Value::as_str);
        if trigger_type == POST_TURN {
            let target = explicit.ok_or("harness::hook::post-turn needs `function_id`")?;
            self.callable(target)?;
            return Ok(self.record(spec, trigger_type, arguments, Some(target), false));
        }
        if trigger_type.starts_with("harness::") {
            return Err(format!(
                "cannot bind harness-internal trigger type `{trigger_type}`: turn events are not agent-bindable"
            ));
        }
        let Some(target) = explicit else {
            let once = arguments
                .get("once")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            return Ok(self.record(spec, trigger_type, arguments, None, once));
        };
        self.callable(target)?;
        let payload = arguments
            .pointer("/target/payload")
            .or_else(|| arguments.pointer("/metadata/payload"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.allows_unattended(&spec.session_id, target, payload)
            .await?;
        for condition in arguments
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let function_id = condition
                .get("function_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.callable(function_id)?;
            let probe = json!({
                "event": null,
                "condition_config": condition.get("config").cloned().unwrap_or(Value::Null),
                "binding": {"id": null, "fires": 0},
                "context": {"owner_session_id": spec.session_id},
            });
            self.allows_unattended(&spec.session_id, function_id, probe)
                .await?;
        }
        let once = arguments
            .get("once")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(self.record(spec, trigger_type, arguments, Some(target), once))
    }

    /// The harness's own checks of a binding target, before the probe.
    fn callable(&self, target: &str) -> Result<(), String> {
        if target.is_empty() {
            return Err("`function_id` must name the function to call".into());
        }
        if target.starts_with("harness::") {
            return Err(format!("`{target}` is not a binding target"));
        }
        if matches!(target, REGISTER_TRIGGER | UNREGISTER_TRIGGER) {
            return Err(format!(
                "`{target}` requires the harness's agent-call intercept; call it directly from a turn"
            ));
        }
        if lock(&self.policy_denied).contains(target) {
            return Err(format!(
                "`{target}` is not permitted by this session's dispatch policy"
            ));
        }
        Ok(())
    }

    /// `approval::evaluate` about a call that would run unattended.
    async fn allows_unattended(
        &self,
        session_id: &str,
        target: &str,
        arguments: Value,
    ) -> Result<(), String> {
        let payload =
            json!({"session_id": session_id, "function_id": target, "arguments": arguments});
        let answer = self
            .iii
            .trigger(peer::request(
                EVALUATE,
                payload.clone(),
                None,
                Some(self.options.target_timeout_ms),
                None,
                None,
            ))
            .await;
        lock(&self.journal)
            .probes
            .push((payload, answer.as_ref().map_err(Error::to_string).cloned()));
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) if function_absent(&err) => return Ok(()),
            Err(err) => {
                return Err(format!(
                    "could not check whether `{target}` needs approval ({err}); refusing to bind"
                ))
            }
        };
        match answer.get("verdict").and_then(Value::as_str) {
            Some("allow") => Ok(()),
            Some(other) => Err(format!(
                "`{target}` is `{other}` for this session: {}",
                answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
            )),
            None => Err(format!(
                "the approval gate returned no verdict for `{target}`"
            )),
        }
    }

    fn record(
        &self,
        spec: &CallSpec,
        trigger_type: &str,
        arguments: &Value,
        target: Option<&str>,
        once: bool,
    ) -> Value {
        let mut subscriptions = lock(&self.subscriptions);
        let id = format!("sub_{}", subscriptions.made + 1);
        subscriptions.made += 1;
        subscriptions.live.push(Subscription {
            id: id.clone(),
            session_id: spec.session_id.clone(),
            trigger_type: trigger_type.to_string(),
            config: arguments.get("config").cloned().unwrap_or(Value::Null),
            target: target.map(str::to_string),
        });
        json!({"subscription_id": id, "once": once})
    }

    fn unsubscribe(&self, spec: &CallSpec, arguments: &Value) -> Value {
        let Some(id) = arguments.get("id").and_then(Value::as_str) else {
            return chain::error_result(
                &spec.call_id,
                &spec.function_id,
                "invalid_request",
                "engine::unregister_trigger requires a string `id`",
            );
        };
        let mut subscriptions = lock(&self.subscriptions);
        let found = subscriptions.live.iter().position(|s| s.id == id);
        let output = match found {
            Some(i) if subscriptions.live[i].session_id != spec.session_id => {
                return chain::error_result(
                    &spec.call_id,
                    &spec.function_id,
                    "invalid_request",
                    "subscription belongs to a different session",
                )
            }
            Some(i) => {
                subscriptions.live.remove(i);
                json!({"removed": true})
            }
            None => json!({"removed": false}),
        };
        chain::output_result(&spec.call_id, &spec.function_id, &output)
    }

    /// The `children` of `harness::status`: the current turn's calls that
    /// spawned a child.
    pub(super) fn children(&self, session_id: &str, turn_id: &str) -> Vec<Value> {
        let mut out: Vec<(String, Value)> = lock(&self.calls)
            .values()
            .filter(|r| r.spec.session_id == session_id && r.spec.turn_id == turn_id)
            .filter_map(|r| match &r.state {
                CallState::AwaitingChild {
                    child_session_id,
                    child_turn_id,
                } => Some((
                    r.spec.call_id.clone(),
                    json!({
                        "function_call_id": r.spec.call_id,
                        "session_id": child_session_id,
                        "turn_id": child_turn_id,
                    }),
                )),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// Adds `parent` to a turn event of a session the double spawned.
    pub(super) fn stamp_parent(&self, session_id: &str, payload: &mut Map<String, Value>) {
        if payload.contains_key("parent") {
            return;
        }
        if let Some(link) = self.parent_of(session_id) {
            payload.insert("parent".into(), link.to_json());
        }
    }
}

/// The subscriptions made so far and how many were ever made.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    pub(super) live: Vec<Subscription>,
    made: usize,
}

/// The turn a spawned child starts with.
pub(super) fn child_turn(child: &str) -> String {
    format!("t_{child}")
}

/// "No approval worker registered", as the harness reads it.
fn function_absent(err: &Error) -> bool {
    if let Error::Remote { code, .. } = err {
        if code == "function_not_found" {
            return true;
        }
    }
    let text = err.to_string().to_ascii_lowercase();
    [
        "function_not_found",
        "not found",
        "no worker",
        "unregistered",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}
