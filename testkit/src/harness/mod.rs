//! `HarnessDouble`: an SDK worker named `harness` that behaves like the harness
//! of `harness.md` — owner of the hook trigger types, runner of hook chains,
//! receiver of `harness::function::resolve`, keeper of durable workspace
//! grants, emitter of `harness::turn-completed`.
//!
//! It plays only the function-call part of a turn: a test hands it a
//! [`CallSpec`] and it runs the pre-trigger chain, the target and the
//! post-trigger chain through the engine, recording what happened so the
//! test can check what the harness *did*, not only what it answered.
//!
//! # Choices where `harness.md` leaves room
//!
//! * A hook reply may carry `arguments`; they replace the call's arguments for
//!   the next hooks and the target (pre-trigger only; post-trigger hooks cannot
//!   rewrite the result). A non-object reply or an unknown `decision` counts
//!   as a failed hook, so a fail_closed binding denies.
//! * A target error becomes `is_error` with `details.error {code, message}`;
//!   the text block repeats the message. Errors that are not structured map
//!   to code `timeout` or `invocation_failed`.
//! * A pre-trigger deny never reaches the target nor the post-trigger chain.
//!   A post-trigger deny replaces the result with the denial.
//! * `execute` of a call held at pre-trigger runs the pre-trigger bindings
//!   that sort after the holder (as the chain stands at resolve time), the
//!   target, then the whole post-trigger chain. `execute` of a call held at
//!   post-trigger runs the target again and then the whole post-trigger chain
//!   (the holder included: it must see the new result, which is how a
//!   folder-access hold is re-asked or stands down).
//! * `action` absent means `deliver`. A resolve finds a call only when it is
//!   held and `turn_id` matches; anything else is `resolved: false`,
//!   `turn_resumed: false`. `deliver` runs no hook.
//! * By default the harness runs an `execute` before answering the resolve
//!   ([`ResolveTiming::BeforeReply`]), so `turn_resumed` tells whether the
//!   call was held again; [`ResolveTiming::AfterReply`] answers first.
//! * A turn that completes drops the calls it still had held
//!   ([`CallState::Abandoned`]).
//! * Turn lifecycle binding configs ignore unknown keys (only hook configs are
//!   documented as strict).
//!
//! # Target invocation metadata
//!
//! The target runs with the call's arguments as payload and this invocation
//! metadata, which is where a jailing target finds the roots it may trust:
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "working_dir": "/w/s1",          // from the turn metadata, when present
//!   "granted_roots": ["/data"],      // durable workspace grants of the session
//!   "extra_roots": ["/tmp/x"] }      // one-shot roots of an execute resolve
//! ```

pub mod bindings;
pub mod chain;
pub mod config;
pub mod model;
pub(crate) mod peer;
mod resolve;
mod run;
mod workspace;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use iii_sdk::{IIIClient, RegisterTriggerType};
use serde_json::{json, Map, Value};

pub use config::{ConfigError, HookConfig, HookPoint, OnError, TurnFilter};
pub use model::{
    BindingInfo, CallOutcome, CallSpec, CallState, Entry, HookCall, TargetRun, TurnCompletion,
};

use bindings::{BindingTable, TypeHandler, TRIGGER_TYPES, TURN_COMPLETED, TURN_STARTED};
use chain::ChainKey;

/// The worker name the harness registers under.
pub const WORKER_NAME: &str = "harness";

pub const RESOLVE: &str = "harness::function::resolve";
pub const WORKSPACE_GRANT: &str = "harness::workspace::grant";
pub const WORKSPACE_GRANTS: &str = "harness::workspace::grants";
pub const WORKSPACE_REVOKE: &str = "harness::workspace::revoke";

/// When an `execute` resolve runs the released call relative to its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResolveTiming {
    /// Run the rest of the chain, the target and the post-trigger chain, then
    /// answer: a follow-up hold lands before the resolver hears back.
    #[default]
    BeforeReply,
    /// Answer at once and run the call in the background.
    AfterReply,
}

/// Which harness build the double plays.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    /// `false` plays an older harness without `harness::workspace::*` (calls
    /// to them fail `function_not_found`).
    pub workspace_grants: bool,
    pub resolve_timing: ResolveTiming,
    /// Newer harness builds prefix a target's error message with
    /// `"<function_id>: "`.
    pub prefix_target_errors: bool,
    /// Client-side timeout of a target run, milliseconds.
    pub target_timeout_ms: u64,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        HarnessOptions {
            workspace_grants: true,
            resolve_timing: ResolveTiming::BeforeReply,
            prefix_target_errors: false,
            target_timeout_ms: 30_000,
        }
    }
}

type CallKey = (String, String);

/// A call's record: the spec, its arguments as rewritten so far, its state,
/// and what a resume needs (the holder's chain key).
#[derive(Debug, Clone)]
struct CallRecord {
    spec: CallSpec,
    arguments: Value,
    state: CallState,
    holder: Option<ChainKey>,
}

#[derive(Debug, Default)]
struct Journal {
    hook_calls: Vec<HookCall>,
    target_runs: Vec<TargetRun>,
    entries: Vec<Entry>,
    resolve_requests: Vec<Value>,
}

/// Everything the double's handlers and its test-facing API share. Each lock
/// guards one table and is never held across an `.await`.
struct Core {
    iii: IIIClient,
    options: HarnessOptions,
    bindings: Arc<BindingTable>,
    calls: Mutex<HashMap<CallKey, CallRecord>>,
    journal: Mutex<Journal>,
    grants: Mutex<HashMap<String, BTreeSet<String>>>,
    policy_denied: Mutex<HashSet<String>>,
    /// How many more `harness::function::resolve` calls fail (a harness
    /// that is failing; a test's fault switch, on any engine).
    failing_resolves: Mutex<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running harness double. Cheap to clone; all clones share one worker,
/// which disconnects when the last clone drops.
#[derive(Clone)]
pub struct HarnessDouble {
    core: Arc<Core>,
    _closer: Arc<peer::Closer>,
}

impl HarnessDouble {
    /// Connects as `harness`, registers the trigger types and functions, and
    /// returns once the engine lists all of them.
    pub async fn start(url: &str, options: HarnessOptions) -> HarnessDouble {
        let iii = peer::connect(url, WORKER_NAME);
        let table = Arc::new(BindingTable::default());
        for (trigger_type, description) in TRIGGER_TYPES {
            // Provider APIs are deprecated in 0.25 and gone in 0.26, but the
            // engine still speaks them and the real harness provides its
            // hook points this way.
            #[allow(deprecated)]
            iii.register_trigger_type(RegisterTriggerType::new(
                trigger_type,
                description,
                TypeHandler {
                    trigger_type,
                    table: table.clone(),
                },
            ));
        }
        let core = Arc::new(Core {
            iii: iii.clone(),
            options: options.clone(),
            bindings: table,
            calls: Mutex::default(),
            journal: Mutex::default(),
            grants: Mutex::default(),
            policy_denied: Mutex::default(),
            failing_resolves: Mutex::default(),
        });
        let mut functions = vec![RESOLVE];
        resolve::register(&core);
        if options.workspace_grants {
            workspace::register(&core);
            functions.extend([WORKSPACE_GRANT, WORKSPACE_GRANTS, WORKSPACE_REVOKE]);
        }
        let types: Vec<&str> = TRIGGER_TYPES.iter().map(|(t, _)| *t).collect();
        let closer = Arc::new(peer::Closer(iii.clone()));
        peer::wait_live(&iii, &functions, &types).await;
        HarnessDouble {
            core,
            _closer: closer,
        }
    }

    /// Disconnects; the engine drops the bindings made on this connection's
    /// types and calls to its functions fail from then on.
    pub async fn shutdown(&self) {
        peer::shutdown(&self.core.iii).await;
    }

    /// The double's own SDK client (to call engine functions as `harness`).
    pub fn client(&self) -> &IIIClient {
        &self.core.iii
    }

    /// Runs one call through the pre-trigger chain, the target and the
    /// post-trigger chain. Returns when the turn has an answer or the call is
    /// parked (a later resolve moves it on; watch it with
    /// [`wait_for_state`](Self::wait_for_state)). Calling again with the same
    /// `(session_id, call_id)` replays the call from the start, which is how a
    /// test plays the harness redelivering a step.
    pub async fn call(&self, spec: CallSpec) -> CallOutcome {
        self.core.run_call(spec).await
    }

    /// Emits `harness::turn-started` `{session_id, turn_id, timestamp}`.
    pub async fn start_turn(&self, session_id: &str, turn_id: &str) -> usize {
        let payload = json!({
            "session_id": session_id,
            "turn_id": turn_id,
            "timestamp": crate::time::now_ms(),
        });
        self.core
            .emit(TURN_STARTED, session_id, None, payload)
            .await
    }

    /// Emits `harness::turn-completed` for a turn without result or parent.
    /// Returns how many bindings it was fired to.
    pub async fn complete_turn(&self, session_id: &str, turn_id: &str, status: &str) -> usize {
        self.complete_turn_with(TurnCompletion::new(session_id, turn_id, status))
            .await
    }

    /// Emits `harness::turn-completed` (void, to every binding whose
    /// `{session_id?, parent_session_id?}` filter matches) and drops the calls
    /// the turn still had held.
    ///
    /// # Format
    ///
    /// ```json
    /// { "session_id": "s1", "turn_id": "t1", "status": "cancelled", "timestamp": 1700000000000,
    ///   "result": ..., "result_error": ..., "reason": "...", "parent": { "session_id": "p1" } }
    /// ```
    pub async fn complete_turn_with(&self, turn: TurnCompletion) -> usize {
        self.core
            .abandon_turn(&turn.session_id, &turn.turn_id, &turn.status);
        let mut payload = Map::new();
        payload.insert("session_id".into(), json!(turn.session_id));
        payload.insert("turn_id".into(), json!(turn.turn_id));
        payload.insert("status".into(), json!(turn.status));
        payload.insert("timestamp".into(), json!(crate::time::now_ms()));
        if let Some(result) = turn.result {
            payload.insert("result".into(), result);
        }
        if let Some(error) = turn.result_error {
            payload.insert("result_error".into(), error);
        }
        if let Some(reason) = turn.reason {
            payload.insert("reason".into(), json!(reason));
        }
        if let Some(parent) = &turn.parent_session_id {
            payload.insert("parent".into(), json!({ "session_id": parent }));
        }
        self.core
            .emit(
                TURN_COMPLETED,
                &turn.session_id,
                turn.parent_session_id.as_deref(),
                Value::Object(payload),
            )
            .await
    }

    /// Makes the harness's dispatch policy refuse `function_id`: the target is
    /// not invoked and post-trigger hooks see `details.error: "policy_denied"`.
    pub fn deny_dispatch(&self, function_id: &str) {
        lock(&self.core.policy_denied).insert(function_id.to_string());
    }

    pub fn allow_dispatch(&self, function_id: &str) {
        lock(&self.core.policy_denied).remove(function_id);
    }

    /// Makes the next `times` `harness::function::resolve` calls fail with
    /// `harness_unavailable` without touching the call (it stays held), as
    /// a harness that is failing would; on the test engine, fault injection
    /// plays an absent harness instead. The failed requests are journaled
    /// like the others.
    pub fn fail_resolves(&self, times: usize) {
        *lock(&self.core.failing_resolves) = times;
    }

    // ---- what the harness did -------------------------------------------

    pub fn state(&self, session_id: &str, call_id: &str) -> Option<CallState> {
        lock(&self.core.calls)
            .get(&(session_id.to_string(), call_id.to_string()))
            .map(|r| r.state.clone())
    }

    /// Calls of `(session_id, turn_id)` currently held.
    pub fn held_calls(&self, session_id: &str, turn_id: &str) -> Vec<String> {
        let mut held: Vec<_> = lock(&self.core.calls)
            .values()
            .filter(|r| {
                r.spec.session_id == session_id && r.spec.turn_id == turn_id && r.state.is_held()
            })
            .map(|r| r.spec.call_id.clone())
            .collect();
        held.sort();
        held
    }

    /// How many times `function_id` ran as a target.
    pub fn target_runs(&self, function_id: &str) -> usize {
        self.runs_of(function_id).len()
    }

    /// Every target run of `function_id`, oldest first, with the arguments,
    /// metadata and one-shot roots it got.
    pub fn runs_of(&self, function_id: &str) -> Vec<TargetRun> {
        lock(&self.core.journal)
            .target_runs
            .iter()
            .filter(|r| r.function_id == function_id)
            .cloned()
            .collect()
    }

    pub fn runs(&self) -> Vec<TargetRun> {
        lock(&self.core.journal).target_runs.clone()
    }

    /// Every hook invocation, oldest first.
    pub fn hook_calls(&self) -> Vec<HookCall> {
        lock(&self.core.journal).hook_calls.clone()
    }

    /// Results appended by `deliver` resolves, oldest first.
    pub fn entries(&self) -> Vec<Entry> {
        lock(&self.core.journal).entries.clone()
    }

    pub fn entry(&self, entry_id: &str) -> Option<Entry> {
        self.entries().into_iter().find(|e| e.entry_id == entry_id)
    }

    /// Every `harness::function::resolve` payload received, raw, oldest first
    /// (unknown fields are ignored by the harness, so tests look here).
    pub fn resolve_requests(&self) -> Vec<Value> {
        lock(&self.core.journal).resolve_requests.clone()
    }

    /// The bindings of a trigger type (e.g. `harness::hook::pre-trigger`);
    /// hook points in chain order.
    pub fn bindings(&self, trigger_type: &str) -> Vec<BindingInfo> {
        self.core.bindings.infos(trigger_type)
    }

    /// The session's durable workspace grants, sorted.
    pub fn grants(&self, session_id: &str) -> Vec<String> {
        self.core.roots(session_id)
    }

    // ---- waiting ----------------------------------------------------------

    /// Polls `predicate` every 10 ms until it holds or `timeout` passes;
    /// returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        predicate: impl Fn(&HarnessDouble) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if predicate(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the call's state to satisfy `predicate`; returns the last
    /// state seen (check it: a timeout returns whatever was there).
    pub async fn wait_for_state(
        &self,
        session_id: &str,
        call_id: &str,
        timeout: Duration,
        predicate: impl Fn(&CallState) -> bool,
    ) -> Option<CallState> {
        self.wait_until(timeout, |h| {
            h.state(session_id, call_id).is_some_and(|s| predicate(&s))
        })
        .await;
        self.state(session_id, call_id)
    }

    /// Waits for a binding of `function_id` on `trigger_type` (bindings made
    /// with the SDK's `register_trigger` arrive asynchronously).
    pub async fn wait_for_binding(
        &self,
        trigger_type: &str,
        function_id: &str,
        timeout: Duration,
    ) -> Option<BindingInfo> {
        let find = |h: &HarnessDouble| {
            h.bindings(trigger_type)
                .into_iter()
                .find(|b| b.function_id == function_id)
        };
        self.wait_until(timeout, |h| find(h).is_some()).await;
        find(self)
    }
}

impl Core {
    fn roots(&self, session_id: &str) -> Vec<String> {
        lock(&self.grants)
            .get(session_id)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn abandon_turn(&self, session_id: &str, turn_id: &str, status: &str) {
        for record in lock(&self.calls).values_mut() {
            if record.spec.session_id == session_id
                && record.spec.turn_id == turn_id
                && record.state.is_held()
            {
                record.state = CallState::Abandoned {
                    status: status.to_string(),
                };
            }
        }
    }

    async fn emit(
        &self,
        trigger_type: &str,
        session_id: &str,
        parent_session_id: Option<&str>,
        payload: Value,
    ) -> usize {
        let targets = self
            .bindings
            .turn_bindings(trigger_type, session_id, parent_session_id);
        for b in &targets {
            peer::fire(
                &self.iii,
                &b.function_id,
                payload.clone(),
                b.metadata.as_ref(),
                b.namespace.as_deref(),
            )
            .await;
        }
        targets.len()
    }
}
