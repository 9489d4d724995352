//! `HarnessDouble`: an SDK worker named `harness` that behaves like the harness
//! of `harness.md` — owner of the hook trigger types, runner of hook chains,
//! receiver of `harness::function::resolve`, keeper of durable grants,
//! emitter of `harness::turn-completed`.
//!
//! It plays only the function-call part of a turn: a test hands it a
//! [`CallSpec`] and it runs the pre-trigger chain, the target and the
//! post-trigger chain through the engine, recording what happened so the
//! test can check what the harness *did*, not only what it answered.
//!
//! # Two generations
//!
//! [`HarnessOptions::generation`] picks the harness it plays:
//! [`Generation::G1`], the brief's (the sections of `harness.md` above
//! "Today's harness and shell"), or [`Generation::G2`], today's (that
//! section). [`Generation::DEFAULT`] is the one place that says which one
//! tests get unless they ask. What differs:
//!
//! | | G1 | G2 |
//! |---|---|---|
//! | session workspace | `metadata.working_dir`, passed to the target in its invocation metadata | `metadata.fs_scope.root`, stamped into the arguments with the grants and the boundary ([`scope`]), before and again after the pre-trigger chain |
//! | boundary | — | `workspace` only while a post-trigger binding of exactly [`WATCH_ID`] matches the call ([`HarnessDouble::boundary`], [`TargetRun::boundary`]) |
//! | durable grants | `harness::workspace::{grant,grants,revoke}` | `harness::filesystem::{grant,grants,revoke,info}`, copied by [`HarnessDouble::spawn_child`], dropped on `session::deleted` |
//! | hook reply | `arguments` rewrites (pre-trigger); a non-object reply or an unknown `decision` is a failed hook | `mutations.arguments` (pre-trigger), `mutations.{content,details,is_error}` (post-trigger), `annotations`, on continue and hold; anything but `deny` / `hold` continues |
//! | deny | pre-trigger: `is_error` with the reason; post-trigger: replaces the result | pre-trigger: `details: {error: "hook_denied", message}` (the hook's own details dropped); post-trigger: ignored |
//! | resolve | `extra_roots`; `deliver` content defaults to `[]` | `fs_scope: {grants}` (`extra_roots` dropped); `deliver` defaults `[{"type": "text", "text": ""}]`, false, null; the result of an `execute` is appended as an entry |
//! | `execute` | the rest of the chain after the holder's sort key; timing per [`ResolveTiming`] | the pre-trigger hooks after the holder's function id (none if it is unbound or held at post-trigger), the target and the whole post-trigger chain, all before the answer |
//! | turn end | held calls become [`CallState::Abandoned`] | held calls stay held on a finished turn; a resolve answers `resolved: false` |
//! | turn-completed | `{session_id, turn_id, status, timestamp, result?, result_error?, reason?, parent?}`; unknown filter keys ignored | adds `terminal`, `parent_session_id`, `context`, `reactive_depth`; unknown filter keys reject |
//! | also | | `harness::status` ([`HarnessDouble::pending_calls`], `children`), `harness::ready` ([`HarnessDouble::announce_ready`]), `harness::on-session-deleted` bound to `session::deleted`; subscriptions (`engine::register_trigger` / `engine::unregister_trigger` settled by the harness after the pre-trigger chain, with an `approval::evaluate` probe) and, with [`HarnessDouble::play_spawns`], sub-agents ([`mediate`]) |
//!
//! Held calls never expire on either: the double has no pending sweep.
//!
//! # Choices where `harness.md` leaves room
//!
//! * A target error becomes `is_error` with `details.error {code, message}`;
//!   the text block repeats the message. Errors that are not structured map
//!   to code `timeout` or `invocation_failed`.
//! * A pre-trigger deny never reaches the target nor the post-trigger chain.
//! * G1: `execute` of a call held at pre-trigger runs the pre-trigger
//!   bindings that sort after the holder (as the chain stands at resolve
//!   time), the target, then the whole post-trigger chain. `execute` of a
//!   call held at post-trigger runs the target again and then the whole
//!   post-trigger chain (the holder included: it must see the new result,
//!   which is how a folder-access hold is re-asked or stands down). G2 does
//!   the same, as its sources do.
//! * `action` absent means `deliver`. A resolve finds a call only when it is
//!   held and `turn_id` matches (and, G2, its turn has not ended); anything
//!   else is `resolved: false`, `turn_resumed: false`. `deliver` runs no hook.
//! * G1: by default the harness runs an `execute` before answering the
//!   resolve ([`ResolveTiming::BeforeReply`]), so `turn_resumed` tells
//!   whether the call was held again; [`ResolveTiming::AfterReply`] answers
//!   first.
//! * The double keeps one current turn per session for `harness::status`:
//!   the turn of its last [`HarnessDouble::call`] or
//!   [`HarnessDouble::start_turn`]. It models spawn as far as the child's
//!   session linkage, its grants, its turn events and the parent call's
//!   wait go ([`HarnessDouble::spawn`], [`mediate`]).
//!
//! # Switches for the release paths (both generations)
//!
//! * A target that runs long: [`crate::targets::TargetWorker::set_delay`]
//!   (raise [`HarnessOptions::target_timeout_ms`] past it). On G2 the
//!   `execute` resolve then answers only after it.
//! * [`HarnessDouble::fail_resolves`] (errors) and
//!   [`HarnessDouble::fault_resolves`] ([`ResolveFault`]: refuse with
//!   `resolved: false`, hang without answering, lose the reply of a resolve
//!   that did its work).
//!
//! # Target invocation metadata
//!
//! The target runs with the call's arguments as payload and this invocation
//! metadata. G1 (where a jailing target finds the roots it may trust):
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1",
//!   "working_dir": "/w/s1",          // from the turn metadata, when present
//!   "granted_roots": ["/data"],      // durable workspace grants of the session
//!   "extra_roots": ["/tmp/x"] }      // one-shot roots of an execute resolve
//! ```
//!
//! G2 (the roots travel in the stamp, in the arguments):
//!
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "generation": 2 }
//! ```

pub mod bindings;
pub mod chain;
pub mod config;
pub mod mediate;
pub mod model;
pub(crate) mod peer;
mod resolve;
mod run;
pub mod scope;
mod status;
mod today;
mod workspace;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use iii_sdk::{IIIClient, RegisterTriggerType};
use serde_json::{json, Map, Value};

pub use config::{ConfigError, HookConfig, HookPoint, OnError, TurnFilter};
pub use mediate::{ParentLink, Subscription};
pub use model::{
    call_instead, BindingInfo, CallOutcome, CallSpec, CallState, Entry, HookCall, TargetRun,
    TurnCompletion, INSTEAD,
};
pub use scope::{Boundary, BoundarySetting};

use bindings::{
    BindingTable, ReadyHandler, TypeHandler, READY, TRIGGER_TYPES, TURN_COMPLETED, TURN_STARTED,
};
use chain::ChainKey;

/// The worker name the harness registers under.
pub const WORKER_NAME: &str = "harness";

pub const RESOLVE: &str = "harness::function::resolve";
pub const WORKSPACE_GRANT: &str = "harness::workspace::grant";
pub const WORKSPACE_GRANTS: &str = "harness::workspace::grants";
pub const WORKSPACE_REVOKE: &str = "harness::workspace::revoke";
pub const FILESYSTEM_GRANT: &str = "harness::filesystem::grant";
pub const FILESYSTEM_GRANTS: &str = "harness::filesystem::grants";
pub const FILESYSTEM_REVOKE: &str = "harness::filesystem::revoke";
pub const FILESYSTEM_INFO: &str = "harness::filesystem::info";
pub const STATUS: &str = "harness::status";
/// Today's harness binds this to `session::deleted`.
pub const ON_SESSION_DELETED: &str = "harness::on-session-deleted";
pub use bindings::READY as READY_TRIGGER_TYPE;
pub use scope::WATCH_ID;

/// Which harness the double plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Generation {
    /// The brief's harness (`harness.md`, the sections above "Today's
    /// harness and shell").
    G1,
    /// Today's harness (`harness.md` § "Today's harness and shell
    /// (generation 2)").
    G2,
}

impl Generation {
    /// What [`HarnessOptions::default`] plays: today's harness. A test about
    /// the brief's harness asks for [`Generation::G1`] by name.
    pub const DEFAULT: Generation = Generation::G2;
}

impl Default for Generation {
    fn default() -> Self {
        Generation::DEFAULT
    }
}

/// A fault [`HarnessDouble::fault_resolves`] plays on the next resolves, on
/// either generation and on any engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveFault {
    /// Fails with `harness_unavailable`; the call is untouched (as
    /// [`HarnessDouble::fail_resolves`]).
    Fail,
    /// Answers `{resolved: false, turn_resumed: false}`; the call is
    /// untouched.
    Refuse,
    /// Never answers and does nothing: the call stays held.
    Hang,
    /// Does the resolve (an `execute` runs to its end) and never answers: a
    /// reply lost on the way back.
    LoseReply,
}

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
    /// The brief's harness or today's ([`Generation::DEFAULT`] unless set).
    pub generation: Generation,
    /// `false` plays an older harness without its durable grants:
    /// `harness::workspace::*` on generation 1, `harness::filesystem::*`
    /// (`info` included) on generation 2 (calls to them fail
    /// `function_not_found`).
    pub workspace_grants: bool,
    /// Generation 1 only: today's harness always runs an `execute` before
    /// answering.
    pub resolve_timing: ResolveTiming,
    /// Newer harness builds prefix a target's error message with
    /// `"<function_id>: "`.
    pub prefix_target_errors: bool,
    /// Client-side timeout of a target run, milliseconds (raise it for a
    /// target that runs longer, see [`crate::targets::TargetWorker::set_delay`]).
    pub target_timeout_ms: u64,
    /// Generation 2: the harness's `filesystem_boundary` setting.
    pub filesystem_boundary: BoundarySetting,
    /// Generation 2: what `harness::filesystem::info` reports as
    /// `default_root`.
    pub default_root: Option<String>,
    /// Cuts every hook's timeout to this many milliseconds when its
    /// binding asks for more (a harness configured with a shorter hook
    /// timeout): a hook answer later than this fails the hook as a timeout.
    /// A worker facing such a harness may shorten what it derives from the
    /// hook timeout (`BootOptions::reconcile_age`, twice it).
    pub hook_timeout_ms: Option<u64>,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        HarnessOptions {
            generation: Generation::default(),
            workspace_grants: true,
            resolve_timing: ResolveTiming::BeforeReply,
            prefix_target_errors: false,
            target_timeout_ms: 30_000,
            filesystem_boundary: BoundarySetting::Auto,
            default_root: None,
            hook_timeout_ms: None,
        }
    }
}

impl HarnessOptions {
    /// The defaults with `generation` set.
    pub fn generation(generation: Generation) -> HarnessOptions {
        HarnessOptions {
            generation,
            ..HarnessOptions::default()
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
    /// Generation 2: the hooks' annotations, merged in chain order.
    annotations: Map<String, Value>,
    /// Generation 2: the boundary of the call's last stamp.
    boundary: Option<Boundary>,
}

impl CallRecord {
    fn new(spec: CallSpec) -> CallRecord {
        CallRecord {
            arguments: spec.arguments.clone(),
            spec,
            state: CallState::Running,
            holder: None,
            annotations: Map::new(),
            boundary: None,
        }
    }
}

#[derive(Debug, Default)]
struct Journal {
    hook_calls: Vec<HookCall>,
    target_runs: Vec<TargetRun>,
    entries: Vec<Entry>,
    resolve_requests: Vec<Value>,
    /// Generation 2: every `approval::evaluate` probe of a subscription,
    /// with its answer (or the error text).
    probes: Vec<(Value, Result<Value, String>)>,
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
    /// Faults the next resolves play, in order.
    resolve_faults: Mutex<VecDeque<ResolveFault>>,
    /// Generation 2: whether `harness::ready` was announced.
    announced: Arc<AtomicBool>,
    /// Generation 2: turns that ended, with their status; their held calls
    /// stay held but no resolve reaches them.
    finished: Mutex<HashMap<CallKey, String>>,
    /// Generation 2: each session's current turn (what `harness::status`
    /// reports on).
    current_turn: Mutex<HashMap<String, String>>,
    /// When the connection was first greeted.
    connected: Arc<std::sync::OnceLock<std::time::Instant>>,
    /// Generation 2: whether a `harness::spawn` in a turn starts a child
    /// ([`HarnessDouble::play_spawns`]) instead of invoking a target.
    play_spawns: AtomicBool,
    /// Generation 2: the sessions the double spawned, by their parent link.
    lineage: Mutex<HashMap<String, ParentLink>>,
    /// Generation 2: the sessions' subscriptions.
    subscriptions: Mutex<mediate::Subscriptions>,
    /// Generation 2: how many `harness::status` reads each session had.
    status_reads: Mutex<HashMap<String, usize>>,
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
    /// Connects as `harness`, registers the trigger types and functions of
    /// its generation, and returns once the engine lists all of them. Today's
    /// harness then binds `session::deleted` and announces `harness::ready`.
    pub async fn start(url: &str, options: HarnessOptions) -> HarnessDouble {
        let iii = peer::connect(url, WORKER_NAME);
        let connected = Arc::new(std::sync::OnceLock::new());
        {
            let (iii, connected) = (iii.clone(), connected.clone());
            tokio::spawn(async move {
                if iii
                    .wait_until_registered(Duration::from_secs(60))
                    .await
                    .is_ok()
                {
                    let _ = connected.set(std::time::Instant::now());
                }
            });
        }
        let today = options.generation == Generation::G2;
        let table = Arc::new(BindingTable::default());
        let announced = Arc::new(AtomicBool::new(false));
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
                    strict_turn_filters: today,
                },
            ));
        }
        let mut types: Vec<&str> = TRIGGER_TYPES.iter().map(|(t, _)| *t).collect();
        if today {
            // See above: the provider API is deprecated but still spoken.
            #[allow(deprecated)]
            iii.register_trigger_type(RegisterTriggerType::new(
                READY,
                "The harness booted and accepts turns",
                ReadyHandler {
                    table: table.clone(),
                    announced: announced.clone(),
                    iii: iii.clone(),
                },
            ));
            types.push(READY);
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
            resolve_faults: Mutex::default(),
            announced,
            finished: Mutex::default(),
            current_turn: Mutex::default(),
            connected,
            play_spawns: AtomicBool::new(false),
            lineage: Mutex::default(),
            subscriptions: Mutex::default(),
            status_reads: Mutex::default(),
        });
        let mut functions = vec![RESOLVE];
        resolve::register(&core);
        if today {
            status::register(&core);
            functions.extend([STATUS, ON_SESSION_DELETED]);
            if options.workspace_grants {
                workspace::register_filesystem(&core);
                status::register_info(&core);
                functions.extend([
                    FILESYSTEM_GRANT,
                    FILESYSTEM_GRANTS,
                    FILESYSTEM_REVOKE,
                    FILESYSTEM_INFO,
                ]);
            }
        } else if options.workspace_grants {
            workspace::register(&core);
            functions.extend([WORKSPACE_GRANT, WORKSPACE_GRANTS, WORKSPACE_REVOKE]);
        }
        let closer = Arc::new(peer::Closer(iii.clone()));
        peer::wait_live(&iii, &functions, &types).await;
        let double = HarnessDouble {
            core,
            _closer: closer,
        };
        if today {
            status::bind_session_deleted(&double.core.iii);
            double.announce_ready().await;
        }
        double
    }

    /// The generation this double plays.
    pub fn generation(&self) -> Generation {
        self.core.options.generation
    }

    /// Generation 2: fires `harness::ready` `{status: "ready", timestamp}`
    /// to every binding, as the harness does when it boots (the double does
    /// it once in [`start`](Self::start); call again to play a restart
    /// without reconnecting). Bindings made later are told at once. Returns
    /// how many bindings it was fired to; 0 on generation 1, which has no
    /// such trigger type.
    pub async fn announce_ready(&self) -> usize {
        if self.generation() != Generation::G2 {
            return 0;
        }
        self.core.announced.store(true, Ordering::SeqCst);
        let targets = self.core.bindings.ready_bindings();
        for b in &targets {
            bindings::fire_ready(&self.core.iii, b).await;
        }
        targets.len()
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

    /// Plays the model after a denial (contract §28): when the answer the
    /// turn got for `denied` names a call to make instead ([`call_instead`]),
    /// the model makes that call, as written, under `new_call_id` in the
    /// same turn (same metadata), and this returns its outcome. `None` when
    /// the call has no answer yet or the answer names no call.
    pub async fn follow_denial(&self, denied: &CallSpec, new_call_id: &str) -> Option<CallOutcome> {
        let text = self
            .state(&denied.session_id, &denied.call_id)?
            .answer_text()?;
        let (function_id, arguments) = call_instead(&text)?;
        let next = CallSpec {
            call_id: new_call_id.to_string(),
            function_id,
            arguments,
            ..denied.clone()
        };
        Some(self.call(next).await)
    }

    /// Emits `harness::turn-started` `{session_id, turn_id, timestamp}`
    /// (generation 2, for a session the double spawned: with `parent:
    /// {session_id, turn_id, function_call_id}`); on generation 2 the turn
    /// becomes the session's current one.
    pub async fn start_turn(&self, session_id: &str, turn_id: &str) -> usize {
        self.core.note_turn(session_id, turn_id);
        self.core.emit_turn_started(session_id, turn_id).await
    }

    /// Generation 2: `harness::spawn` calls in turns start a child (see
    /// [`mediate`]) instead of invoking a `harness::spawn` target.
    pub fn play_spawns(&self) {
        self.core.play_spawns.store(true, Ordering::SeqCst);
    }

    /// Generation 2: plays the dispatcher spawning `child` from call
    /// `call_id` of `(parent_session_id, parent_turn_id)`, as a
    /// `harness::spawn` in that turn does with [`play_spawns`](Self::play_spawns)
    /// (the call itself is not touched): the child session is made with its
    /// parent linkage, inherits the grants, and its turn `t_<child>` starts.
    /// Returns whether the session manager made the session (`false`: it
    /// existed, and keeps the metadata it had).
    pub async fn spawn(
        &self,
        parent_session_id: &str,
        parent_turn_id: &str,
        call_id: &str,
        child_session_id: &str,
    ) -> bool {
        let link = ParentLink {
            session_id: parent_session_id.to_string(),
            turn_id: parent_turn_id.to_string(),
            function_call_id: call_id.to_string(),
        };
        self.core
            .spawn_child_session(&link, child_session_id, 1)
            .await
    }

    /// Generation 2: the subscriptions made for agents, oldest first.
    pub fn subscriptions(&self) -> Vec<Subscription> {
        lock(&self.core.subscriptions).live.clone()
    }

    /// Generation 2: every `approval::evaluate` probe a subscription made,
    /// with its answer (or the error text), oldest first.
    pub fn evaluate_probes(&self) -> Vec<(Value, Result<Value, String>)> {
        lock(&self.core.journal).probes.clone()
    }

    /// Emits `harness::turn-completed` for a turn without result or parent.
    /// Returns how many bindings it was fired to.
    pub async fn complete_turn(&self, session_id: &str, turn_id: &str, status: &str) -> usize {
        self.complete_turn_with(TurnCompletion::new(session_id, turn_id, status))
            .await
    }

    /// Emits `harness::turn-completed` (void, to every binding whose
    /// `{session_id?, parent_session_id?}` filter matches). Generation 1 drops
    /// the calls the turn still had held ([`CallState::Abandoned`]);
    /// generation 2 leaves them held on the finished turn, where no resolve
    /// reaches them.
    ///
    /// # Format
    ///
    /// Generation 1:
    ///
    /// ```json
    /// { "session_id": "s1", "turn_id": "t1", "status": "cancelled", "timestamp": 1700000000000,
    ///   "result": ..., "result_error": ..., "reason": "...", "parent": { "session_id": "p1" } }
    /// ```
    ///
    /// Generation 2 adds `terminal`, and with a parent sends
    /// `parent: {session_id, turn_id, function_call_id}` and
    /// `parent_session_id`, plus `context` and `reactive_depth` when given.
    pub async fn complete_turn_with(&self, turn: TurnCompletion) -> usize {
        let today = self.generation() == Generation::G2;
        if today {
            lock(&self.core.finished).insert(
                (turn.session_id.clone(), turn.turn_id.clone()),
                turn.status.clone(),
            );
        } else {
            self.core
                .abandon_turn(&turn.session_id, &turn.turn_id, &turn.status);
        }
        let mut payload = turn_completed_payload(&turn, today);
        if today {
            if let Value::Object(map) = &mut payload {
                self.core.stamp_parent(&turn.session_id, map);
            }
        }
        let parent = self.core.parent_of(&turn.session_id);
        let turn = TurnCompletion {
            parent_session_id: turn.parent_session_id.or(parent.map(|p| p.session_id)),
            ..turn
        };
        self.core
            .emit(
                TURN_COMPLETED,
                &turn.session_id,
                turn.parent_session_id.as_deref(),
                payload,
            )
            .await
    }

    /// Generation 2: a child session spawned from `parent_session_id` starts
    /// with a copy of the parent's durable grants (the double models spawn
    /// only this far). On generation 1 it does nothing.
    pub fn spawn_child(&self, parent_session_id: &str, child_session_id: &str) {
        if self.generation() != Generation::G2 {
            return;
        }
        let mut grants = lock(&self.core.grants);
        let copied = grants.get(parent_session_id).cloned().unwrap_or_default();
        grants
            .entry(child_session_id.to_string())
            .or_default()
            .extend(copied);
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

    /// Makes the next `times` resolves play `fault` (after any already
    /// queued, and after [`fail_resolves`](Self::fail_resolves)). Every
    /// request is journaled, hung ones included.
    pub fn fault_resolves(&self, fault: ResolveFault, times: usize) {
        lock(&self.core.resolve_faults).extend(std::iter::repeat_n(fault, times));
    }

    // ---- what the harness did -------------------------------------------

    pub fn state(&self, session_id: &str, call_id: &str) -> Option<CallState> {
        lock(&self.core.calls)
            .get(&(session_id.to_string(), call_id.to_string()))
            .map(|r| r.state.clone())
    }

    /// The arguments a held call is parked with (as the chain rewrote them,
    /// the holder's own rewrite and, on generation 2, the stamp included);
    /// `None` when the call is not held.
    pub fn held_arguments(&self, session_id: &str, call_id: &str) -> Option<Value> {
        lock(&self.core.calls)
            .get(&(session_id.to_string(), call_id.to_string()))
            .filter(|r| r.state.is_held())
            .map(|r| r.arguments.clone())
    }

    /// Generation 2: the boundary of the call's last stamp (`None` for a
    /// call that was never stamped, and on generation 1).
    pub fn boundary(&self, session_id: &str, call_id: &str) -> Option<Boundary> {
        lock(&self.core.calls)
            .get(&(session_id.to_string(), call_id.to_string()))
            .and_then(|r| r.boundary)
    }

    /// Generation 2: the annotations the call's hooks returned, merged.
    pub fn annotations(&self, session_id: &str, call_id: &str) -> Map<String, Value> {
        lock(&self.core.calls)
            .get(&(session_id.to_string(), call_id.to_string()))
            .map(|r| r.annotations.clone())
            .unwrap_or_default()
    }

    /// Generation 2: what `harness::status {session_id, verbose: true}`
    /// lists as `pending_function_calls`.
    pub fn pending_calls(&self, session_id: &str) -> Vec<String> {
        self.core.pending_calls(session_id)
    }

    /// Generation 2: how many times `harness::status` was asked about
    /// `session_id`.
    pub fn status_reads(&self, session_id: &str) -> usize {
        lock(&self.core.status_reads)
            .get(session_id)
            .copied()
            .unwrap_or(0)
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

    /// What the model read from the approval gate, oldest first: the
    /// reason of every `deny` an `approval::` hook answered, and the text of
    /// every `is_error` result a `deliver` resolve appended.
    pub fn gate_denials(&self) -> Vec<String> {
        let journal = lock(&self.core.journal);
        let hooks = journal
            .hook_calls
            .iter()
            .filter(|h| h.function_id.starts_with("approval::"))
            .filter_map(|h| h.reply.as_ref().ok())
            .filter(|reply| reply.get("decision").and_then(Value::as_str) == Some("deny"))
            .map(|reply| {
                reply
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            });
        let delivered = journal
            .entries
            .iter()
            .filter(|e| e.result.get("is_error").and_then(Value::as_bool) == Some(true))
            .map(|e| {
                e.result
                    .pointer("/content/0/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            });
        hooks.chain(delivered).collect()
    }

    /// The [`gate_denials`](Self::gate_denials) that lead with none of the
    /// [`model::DENIAL_LEADS`]: the model could not tell who denied.
    pub fn unled_denials(&self) -> Vec<String> {
        self.gate_denials()
            .into_iter()
            .filter(|text| model::denial_lead(text).is_none())
            .collect()
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

    /// When this double's connection was first greeted by the engine
    /// (its trigger types are registered right after).
    pub fn connected_at(&self) -> Option<std::time::Instant> {
        self.core.connected.get().copied()
    }

    /// When `function_id` was first bound to `trigger_type` on this double
    /// (the moment the engine delivered the binding; `None`: never).
    pub fn first_bound(&self, trigger_type: &str, function_id: &str) -> Option<std::time::Instant> {
        self.core.bindings.first_bound(trigger_type, function_id)
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

/// The `harness::turn-completed` payload of `turn` (see
/// [`HarnessDouble::complete_turn_with`] for both formats).
fn turn_completed_payload(turn: &TurnCompletion, today: bool) -> Value {
    let mut payload = Map::new();
    payload.insert("session_id".into(), json!(turn.session_id));
    payload.insert("turn_id".into(), json!(turn.turn_id));
    payload.insert("status".into(), json!(turn.status));
    payload.insert("timestamp".into(), json!(crate::time::now_ms()));
    if let Some(result) = &turn.result {
        payload.insert("result".into(), result.clone());
    }
    if let Some(error) = &turn.result_error {
        payload.insert("result_error".into(), error.clone());
    }
    if let Some(reason) = &turn.reason {
        payload.insert("reason".into(), json!(reason));
    }
    if !today {
        if let Some(parent) = &turn.parent_session_id {
            payload.insert("parent".into(), json!({ "session_id": parent }));
        }
        return Value::Object(payload);
    }
    payload.insert("terminal".into(), json!(turn.terminal));
    if let Some(parent) = &turn.parent_session_id {
        let link = json!({
            "session_id": parent,
            "turn_id": turn.parent_turn_id.clone().unwrap_or_default(),
            "function_call_id": turn.parent_function_call_id.clone().unwrap_or_default(),
        });
        payload.insert("parent".into(), link);
        payload.insert("parent_session_id".into(), json!(parent));
    }
    if let Some(context) = &turn.context {
        payload.insert("context".into(), context.clone());
    }
    if let Some(depth) = turn.reactive_depth {
        payload.insert("reactive_depth".into(), json!(depth));
    }
    Value::Object(payload)
}

impl Core {
    fn today(&self) -> bool {
        self.options.generation == Generation::G2
    }

    /// Generation 2: `turn_id` becomes the session's current turn.
    fn note_turn(&self, session_id: &str, turn_id: &str) {
        if self.today() {
            lock(&self.current_turn).insert(session_id.to_string(), turn_id.to_string());
        }
    }

    fn turn_finished(&self, session_id: &str, turn_id: &str) -> bool {
        lock(&self.finished).contains_key(&(session_id.to_string(), turn_id.to_string()))
    }

    /// Emits `harness::turn-started` for `session_id`'s turn.
    async fn emit_turn_started(&self, session_id: &str, turn_id: &str) -> usize {
        let mut payload = Map::new();
        payload.insert("session_id".into(), json!(session_id));
        payload.insert("turn_id".into(), json!(turn_id));
        payload.insert("timestamp".into(), json!(crate::time::now_ms()));
        if self.today() {
            self.stamp_parent(session_id, &mut payload);
        }
        let parent = self.parent_of(session_id).map(|p| p.session_id);
        self.emit(
            TURN_STARTED,
            session_id,
            parent.as_deref(),
            Value::Object(payload),
        )
        .await
    }

    /// The current turn's calls that await a result: held, running (an
    /// `execute` in progress counts) or waiting on a sub-agent, sorted.
    fn pending_calls(&self, session_id: &str) -> Vec<String> {
        let Some(turn_id) = lock(&self.current_turn).get(session_id).cloned() else {
            return Vec::new();
        };
        let mut ids: Vec<String> = lock(&self.calls)
            .values()
            .filter(|r| r.spec.session_id == session_id && r.spec.turn_id == turn_id)
            .filter(|r| {
                r.state.is_held()
                    || r.state == CallState::Running
                    || matches!(r.state, CallState::AwaitingChild { .. })
            })
            .map(|r| r.spec.call_id.clone())
            .collect();
        ids.sort();
        ids
    }

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
