//! The routing core: every connection, function, trigger type, binding and
//! call in flight, behind one lock.
//!
//! Every method runs synchronously under the [`Shared`](super::Shared) lock
//! and never awaits: frames for other connections are queued on their
//! unbounded outboxes, and the little that must wait (a provider's verdict on
//! a durable binding, a stalled answer) is handed out as [`Deferred`] work or
//! a spawned timer. One lock and no awaits is what keeps the engine's
//! bookkeeping (ownership, parking, teardown) free of the races the real
//! engine spends most of its code on.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::configuration::ConfigurationStore;
use super::faults::Faults;
use super::state::StateStore;
use super::wire::{self, ErrorBody, Inbound, DEFAULT_NAMESPACE};

/// Engine-local id of one WebSocket connection (never reused).
pub(crate) type ConnId = u64;

/// A trigger type's identity: the namespace it serves and its id.
pub(crate) type TypeKey = (String, String);

/// How long `engine::register_trigger` waits for a worker provider's verdict.
pub(crate) const TRIGGER_ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after a refused `engine::workers::register` the refusal
/// reaches the client. The real engine (0.23) decides at once, but its
/// `registrationrejected` frame arrives 7–99 ms after the greeting
/// (typically ~55–90 ms on loopback): long enough that the SDK's
/// `wait_until_registered` usually returns `Ok` first. Imitated so a client
/// that trusts the greeting alone fails here as it would there.
pub(crate) const NAME_REFUSAL_DELAY: Duration = Duration::from_millis(60);

/// Characters the real engine strips from a worker's name and description
/// before it stores or compares them: control characters, the bidi
/// embedding and isolate controls, and the line and paragraph separators.
fn is_unsafe_display_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// The longest worker name or description the real engine keeps, in
/// characters (the rest is cut before trimming).
const WORKER_TEXT_MAX_CHARS: usize = 280;

/// A worker's name or description as the real engine keeps it: unsafe
/// display characters removed, cut to 280 characters, trimmed; `None` when
/// nothing is left. Names are compared in this form, case-sensitively, so
/// `"approval-gate "` and `"approval\u{202e}-gate"` collide with
/// `"approval-gate"` and `"Approval-Gate"` does not.
pub(crate) fn sanitize_worker_text(raw: Option<String>) -> Option<String> {
    let cleaned: String = raw?
        .chars()
        .filter(|c| !is_unsafe_display_char(*c))
        .take(WORKER_TEXT_MAX_CHARS)
        .collect();
    let trimmed = cleaned.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// What a connection's socket task writes next.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// One JSON text frame.
    Frame(String),
    /// A close frame, then the socket is dropped.
    Close,
    /// Drop the socket at once: no close frame, as when a process dies.
    Abort,
}

pub(crate) type Outbox = mpsc::UnboundedSender<Outbound>;

fn send_frame(outbox: &Outbox, frame: Value) {
    let _ = outbox.send(Outbound::Frame(frame.to_string()));
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

/// Per-function invocation counters (and, for `state::*` calls, per
/// scope), readable without the core lock.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    by_function: Mutex<HashMap<String, u64>>,
    by_scope: Mutex<HashMap<(String, String), u64>>,
    total: AtomicU64,
}

impl Stats {
    fn count(&self, function_id: &str, data: &Value) {
        self.total.fetch_add(1, Ordering::SeqCst);
        let mut counts = self
            .by_function
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *counts.entry(function_id.to_string()).or_default() += 1;
        if function_id.starts_with("state::") {
            if let Some(scope) = data.get("scope").and_then(Value::as_str) {
                *self
                    .by_scope
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .entry((function_id.to_string(), scope.to_string()))
                    .or_default() += 1;
            }
        }
    }

    pub fn of_scope(&self, function_id: &str, scope: &str) -> u64 {
        self.by_scope
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&(function_id.to_string(), scope.to_string()))
            .copied()
            .unwrap_or(0)
    }

    pub fn of(&self, function_id: &str) -> u64 {
        self.by_function
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(function_id)
            .copied()
            .unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }
}

/// A call's outcome: its result (`None` for a result-less answer) or its
/// error.
pub(crate) type CallOutcome = Result<Option<Value>, ErrorBody>;

/// Where one answer goes: the caller's outbox, or the HTTP request waiting
/// for it; and its invocation id.
pub(crate) struct ReplyTo {
    via: Via,
    invocation_id: String,
    function_id: String,
    delay: Option<Duration>,
}

enum Via {
    /// An `invocationresult` frame on a worker's connection.
    Socket(Outbox),
    /// The HTTP worker's request (see `http.rs`).
    Http(oneshot::Sender<CallOutcome>),
}

impl ReplyTo {
    /// Sends the answer now, or after the stall delay chosen when the call
    /// was routed.
    pub fn send(self, outcome: CallOutcome) {
        let deliver = move |via: Via| match via {
            Via::Socket(outbox) => send_frame(
                &outbox,
                wire::invocation_result(&self.invocation_id, &self.function_id, outcome),
            ),
            Via::Http(sender) => {
                let _ = sender.send(outcome);
            }
        };
        match (self.delay, tokio::runtime::Handle::try_current()) {
            (Some(delay), Ok(runtime)) => {
                let via = self.via;
                runtime.spawn(async move {
                    tokio::time::sleep(delay).await;
                    deliver(via);
                });
            }
            _ => deliver(self.via),
        }
    }
}

/// Whether a connection's registrations may apply yet.
enum NamespaceState {
    /// `engine::workers::register` has not arrived: registrations queue.
    Pending(Vec<Inbound>),
    Resolved(String),
    /// Its worker name was refused: nothing it registered or registers
    /// applies, and its refusal and close are on their way.
    Refused,
}

/// What a worker said about itself in `engine::workers::register`.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkerInfo {
    pub runtime: Option<String>,
    pub version: Option<String>,
    pub os: Option<String>,
    pub description: Option<String>,
    pub pid: Option<u32>,
    pub isolation: Option<String>,
}

pub(crate) struct Conn {
    pub worker_id: String,
    reattach_token: String,
    outbox: Outbox,
    namespace: NamespaceState,
    pub name: Option<String>,
    pub info: Option<WorkerInfo>,
    pub connected_at_ms: u64,
    pub ip: String,
}

impl Conn {
    pub fn namespace(&self) -> &str {
        match &self.namespace {
            NamespaceState::Resolved(ns) => ns,
            NamespaceState::Pending(_) | NamespaceState::Refused => DEFAULT_NAMESPACE,
        }
    }
}

pub(crate) struct FunctionEntry {
    pub owner: ConnId,
    pub description: Option<String>,
    pub metadata: Option<Value>,
    pub request_format: Option<Value>,
    pub response_format: Option<Value>,
}

/// The schemas a registration carried: `(request, response)` of a function,
/// `(binding config, payload)` of a trigger type.
pub(crate) type Formats = (Option<Value>, Option<Value>);

/// A trigger type the engine provides itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuiltinTrigger {
    State,
    Configuration,
    /// `http`, the HTTP worker's routes (only when the engine serves HTTP).
    Http,
}

impl BuiltinTrigger {
    pub fn type_id(self) -> &'static str {
        match self {
            BuiltinTrigger::State => "state",
            BuiltinTrigger::Configuration => "configuration",
            BuiltinTrigger::Http => "http",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    Builtin(BuiltinTrigger),
    Conn(ConnId),
}

pub(crate) struct TriggerTypeEntry {
    pub provider: Provider,
    pub description: String,
    /// `(binding config, payload)` schemas; `None` for the engine's own types.
    pub formats: Formats,
}

/// One binding of a function to a trigger type.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub config: Value,
    pub metadata: Option<Value>,
    /// Where `function_id` resolves when the binding fires.
    pub namespace: String,
    /// A provider namespace the binder insisted on.
    pub trigger_namespace: Option<String>,
    /// The binder's namespace: the first place its provider is looked for.
    pub home_namespace: String,
    /// The connection whose disconnect removes the binding; `None` for a
    /// durable binding (`engine::register_trigger`).
    pub owner: Option<ConnId>,
    /// The provider serving it; `None` while parked.
    pub provider: Option<TypeKey>,
}

/// A call the engine forwarded to a worker and has not seen answered.
struct PendingCall {
    callee: ConnId,
    caller: Option<ConnId>,
    reply: Option<ReplyTo>,
}

/// Work that has to wait outside the lock.
pub(crate) enum Deferred {
    /// A durable binding waiting for its worker provider's verdict.
    TriggerAck {
        verdict: oneshot::Receiver<Option<ErrorBody>>,
        binding: Box<Binding>,
        provider: ConnId,
        reply: Option<ReplyTo>,
    },
}

/// Who made a call.
pub(crate) enum Caller {
    /// A connection; `invocation_id` is `None` for a void call.
    Worker {
        conn: ConnId,
        invocation_id: Option<String>,
    },
    /// The engine itself (trigger deliveries): nobody waits for the answer.
    Engine,
    /// The HTTP worker, for a request on a bound route: the answer goes to
    /// the request (no `_caller_worker_id`: the real engine calls in-process).
    Http(oneshot::Sender<CallOutcome>),
}

pub(crate) struct Call {
    pub function_id: String,
    pub namespace: Option<String>,
    pub data: Value,
    pub metadata: Option<Value>,
    pub traceparent: Option<String>,
    pub baggage: Option<String>,
}

/// What binding a trigger did.
pub(crate) enum Activation {
    /// Nobody provides the type: kept, inactive, until a provider registers.
    Parked,
    /// An engine provider refused the config.
    Rejected(String),
    /// An engine provider took it.
    Live,
    /// Sent to a worker provider, which may still refuse it.
    Forwarded(ConnId),
}

pub(crate) struct Core {
    pub conns: HashMap<ConnId, Conn>,
    pub functions: HashMap<(String, String), FunctionEntry>,
    pub trigger_types: HashMap<TypeKey, TriggerTypeEntry>,
    /// Live and parked bindings, ordered by id so replays are deterministic.
    pub bindings: BTreeMap<String, Binding>,
    invocations: HashMap<String, PendingCall>,
    pub trigger_acks: HashMap<String, (ConnId, oneshot::Sender<Option<ErrorBody>>)>,
    name_leases: HashMap<(String, String), ConnId>,
    pub state: StateStore,
    pub configuration: ConfigurationStore,
    /// The HTTP worker's routing table (empty unless it serves).
    pub http: super::http::Routes,
    faults: Arc<Faults>,
    stats: Arc<Stats>,
    deferred: Vec<Deferred>,
    next_conn: ConnId,
}

impl Core {
    pub fn new(faults: Arc<Faults>, stats: Arc<Stats>) -> Self {
        let mut trigger_types = HashMap::new();
        for (kind, description) in [
            (BuiltinTrigger::State, "State trigger"),
            (
                BuiltinTrigger::Configuration,
                "Configuration trigger — fires on register/update/delete events",
            ),
        ] {
            trigger_types.insert(
                (DEFAULT_NAMESPACE.to_string(), kind.type_id().to_string()),
                TriggerTypeEntry {
                    provider: Provider::Builtin(kind),
                    description: description.to_string(),
                    formats: (None, None),
                },
            );
        }
        Self {
            conns: HashMap::new(),
            functions: HashMap::new(),
            trigger_types,
            bindings: BTreeMap::new(),
            invocations: HashMap::new(),
            trigger_acks: HashMap::new(),
            name_leases: HashMap::new(),
            state: StateStore::default(),
            configuration: ConfigurationStore::default(),
            http: super::http::Routes::default(),
            faults,
            stats,
            deferred: Vec::new(),
            next_conn: 1,
        }
    }

    /// Provides the `http` trigger type (the HTTP worker serves).
    pub fn enable_http(&mut self) {
        self.trigger_types.insert(
            (
                DEFAULT_NAMESPACE.to_string(),
                BuiltinTrigger::Http.type_id().to_string(),
            ),
            TriggerTypeEntry {
                provider: Provider::Builtin(BuiltinTrigger::Http),
                description: "HTTP API trigger".to_string(),
                formats: (None, None),
            },
        );
    }

    /// Calls `conn` made that are still waiting for an answer.
    pub fn calls_waiting_for(&self, conn: ConnId) -> usize {
        self.invocations
            .values()
            .filter(|call| call.caller == Some(conn))
            .count()
    }

    pub fn take_deferred(&mut self) -> Vec<Deferred> {
        std::mem::take(&mut self.deferred)
    }

    pub(crate) fn send_to(&self, conn: ConnId, frame: Value) {
        if let Some(conn) = self.conns.get(&conn) {
            send_frame(&conn.outbox, frame);
        }
    }

    // ── connections ────────────────────────────────────────────────────

    /// Files a new connection and greets it with `workerregistered`.
    pub fn connect(&mut self, outbox: Outbox, ip: String) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        let conn = Conn {
            worker_id: new_id(),
            reattach_token: new_id(),
            outbox,
            namespace: NamespaceState::Pending(Vec::new()),
            name: None,
            info: None,
            connected_at_ms: now_ms(),
            ip,
        };
        send_frame(
            &conn.outbox,
            wire::worker_registered(&conn.worker_id, &conn.reattach_token),
        );
        tracing::debug!(worker_id = %conn.worker_id, "test engine: worker connected");
        self.conns.insert(id, conn);
        id
    }

    /// Connections whose worker registered under `name`.
    pub fn conns_named(&self, name: &str) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, conn)| conn.name.as_deref() == Some(name))
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// Tears a connection down and tells its socket to drop without a close
    /// frame.
    pub fn abort(&mut self, conn: ConnId) -> bool {
        let outbox = self.conns.get(&conn).map(|c| c.outbox.clone());
        let removed = self.disconnect(conn);
        if let Some(outbox) = outbox {
            let _ = outbox.send(Outbound::Abort);
        }
        removed
    }

    /// Everything a connection owned goes: its name lease, its functions
    /// (callers waiting on them get `invocation_stopped`), its own bindings
    /// (unregistered at their providers), and the trigger types it provided
    /// (their bindings fall back to another provider or park). Idempotent.
    pub fn disconnect(&mut self, conn: ConnId) -> bool {
        let Some(gone) = self.conns.remove(&conn) else {
            return false;
        };
        tracing::debug!(worker_id = %gone.worker_id, "test engine: worker disconnected");
        self.name_leases.retain(|_, owner| *owner != conn);
        self.functions.retain(|_, function| function.owner != conn);

        let stopped: Vec<String> = self
            .invocations
            .iter()
            .filter(|(_, call)| call.callee == conn)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stopped {
            if let Some(reply) = self.invocations.remove(&id).and_then(|call| call.reply) {
                reply.send(Err(ErrorBody::new(
                    "invocation_stopped",
                    "Invocation stopped",
                )));
            }
        }
        self.invocations.retain(|_, call| call.caller != Some(conn));
        self.trigger_acks
            .retain(|_, (provider, _)| *provider != conn);

        let owned: Vec<String> = self
            .bindings
            .values()
            .filter(|binding| binding.owner == Some(conn))
            .map(|binding| binding.id.clone())
            .collect();
        for id in owned {
            if let Some(binding) = self.bindings.remove(&id) {
                self.detach(&binding, Some(conn));
            }
        }

        let provided: Vec<TypeKey> = self
            .trigger_types
            .iter()
            .filter(|(_, entry)| entry.provider == Provider::Conn(conn))
            .map(|(key, _)| key.clone())
            .collect();
        for key in provided {
            self.trigger_types.remove(&key);
            self.rehome_orphans(&key);
        }
        true
    }

    /// Retires the previous connection of a reconnecting worker, so its
    /// replayed registrations do not collide with its own ghost.
    fn reattach(&mut self, conn: ConnId, previous_worker_id: &str, token: Option<&str>) {
        let previous = self.conns.iter().find(|(id, c)| {
            **id != conn
                && c.worker_id == previous_worker_id
                && Some(c.reattach_token.as_str()) == token
        });
        if let Some((previous, _)) = previous {
            let previous = *previous;
            self.abort(previous);
        }
    }

    // ── frames ─────────────────────────────────────────────────────────

    pub fn on_frame(&mut self, conn: ConnId, frame: Inbound) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        if frame.is_registration() {
            match &mut state.namespace {
                NamespaceState::Pending(queue) => {
                    queue.push(frame);
                    return;
                }
                NamespaceState::Refused => return,
                NamespaceState::Resolved(_) => {}
            }
        }
        self.apply(conn, frame);
    }

    /// Fixes a connection's namespace and applies what it registered before.
    /// A second resolution changes nothing.
    pub fn resolve_namespace(&mut self, conn: ConnId, namespace: &str) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        let queue = match &mut state.namespace {
            NamespaceState::Pending(queue) => std::mem::take(queue),
            NamespaceState::Resolved(_) | NamespaceState::Refused => return,
        };
        state.namespace = NamespaceState::Resolved(namespace.to_string());
        for frame in queue {
            self.apply(conn, frame);
        }
    }

    fn apply(&mut self, conn: ConnId, frame: Inbound) {
        match frame {
            Inbound::RegisterFunction {
                id,
                description,
                metadata,
                invocation,
                request_format,
                response_format,
            } => {
                if invocation.is_some() {
                    tracing::warn!(
                        function_id = %id,
                        "test engine: HTTP-invoked functions are not supported; ignored"
                    );
                    return;
                }
                self.register_function(
                    conn,
                    id,
                    description,
                    metadata,
                    (request_format, response_format),
                );
            }
            Inbound::UnregisterFunction { id } => {
                let namespace = self.conn_namespace(conn);
                let key = (namespace, id);
                if self.functions.get(&key).is_some_and(|f| f.owner == conn) {
                    self.functions.remove(&key);
                }
            }
            Inbound::RegisterTriggerType {
                id,
                description,
                namespace,
                trigger_request_format,
                call_request_format,
            } => self.register_trigger_type(
                conn,
                id,
                description,
                namespace,
                (trigger_request_format, call_request_format),
            ),
            Inbound::RegisterTrigger {
                id,
                trigger_type,
                function_id,
                config,
                metadata,
                namespace,
                trigger_namespace,
            } => {
                for (field, value) in [
                    ("namespace", &namespace),
                    ("trigger_namespace", &trigger_namespace),
                ] {
                    if wire::is_blank(value) {
                        self.send_to(
                            conn,
                            wire::trigger_registration_result(
                                &id,
                                &trigger_type,
                                &function_id,
                                ErrorBody::new(
                                    "INVALID_NAMESPACE",
                                    wire::blank_namespace_message(field),
                                ),
                            ),
                        );
                        return;
                    }
                }
                let binding = Binding {
                    id,
                    trigger_type,
                    function_id,
                    config,
                    metadata,
                    namespace: namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
                    trigger_namespace,
                    home_namespace: self.conn_namespace(conn),
                    owner: Some(conn),
                    provider: None,
                };
                self.bind_for_worker(conn, binding);
            }
            Inbound::UnregisterTrigger { id } => {
                self.unregister_binding(&id);
            }
            Inbound::TriggerRegistrationResult { id, error } => {
                self.on_trigger_verdict(conn, &id, error);
            }
            Inbound::InvokeFunction {
                invocation_id,
                function_id,
                data,
                traceparent,
                baggage,
                action,
                metadata,
                namespace,
            } => {
                let call = Call {
                    function_id,
                    namespace,
                    data,
                    metadata,
                    traceparent,
                    baggage,
                };
                self.on_invoke(conn, invocation_id, action, call);
            }
            Inbound::InvocationResult {
                invocation_id,
                result,
                error,
            } => {
                let Some(call) = self.invocations.remove(&invocation_id) else {
                    tracing::debug!(%invocation_id, "test engine: answer for a call nobody waits on");
                    return;
                };
                if let Some(reply) = call.reply {
                    reply.send(match error {
                        Some(error) => Err(error),
                        None => Ok(result),
                    });
                }
            }
            Inbound::Reattach {
                previous_worker_id,
                reattach_token,
            } => self.reattach(conn, &previous_worker_id, reattach_token.as_deref()),
            Inbound::Ping => self.send_to(conn, wire::pong()),
            Inbound::Pong => {}
        }
    }

    pub fn conn_namespace(&self, conn: ConnId) -> String {
        self.conns
            .get(&conn)
            .map(|c| c.namespace().to_string())
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
    }

    // ── functions ──────────────────────────────────────────────────────

    /// One live owner per `(namespace, id)`: another connection's claim is
    /// refused with `FUNCTION_NAMESPACE_CONFLICT` naming the owner, and that
    /// connection keeps serving its other functions. Reserved ids (`engine::*`
    /// outside `default`, as in the real engine; built-in ids, which the real
    /// engine would let a worker shadow) are refused with an empty owner.
    fn register_function(
        &mut self,
        conn: ConnId,
        id: String,
        description: Option<String>,
        metadata: Option<Value>,
        (request_format, response_format): Formats,
    ) {
        let namespace = self.conn_namespace(conn);
        let reserved = (id.starts_with("engine::") && namespace != DEFAULT_NAMESPACE)
            || (namespace == DEFAULT_NAMESPACE && super::builtins::is_builtin(&id));
        let owner = if reserved {
            Some(String::new())
        } else {
            self.functions
                .get(&(namespace.clone(), id.clone()))
                .filter(|f| f.owner != conn)
                .and_then(|f| self.conns.get(&f.owner))
                .map(|c| c.worker_id.clone())
        };
        if let Some(owner_worker_id) = owner {
            tracing::warn!(
                function_id = %id,
                %namespace,
                %owner_worker_id,
                "test engine: function id already owned; registration rejected"
            );
            self.send_to(
                conn,
                wire::registration_rejected(
                    "FUNCTION_NAMESPACE_CONFLICT",
                    &namespace,
                    None,
                    Some(&id),
                    &owner_worker_id,
                ),
            );
            return;
        }
        self.functions.insert(
            (namespace, id),
            FunctionEntry {
                owner: conn,
                description,
                metadata,
                request_format,
                response_format,
            },
        );
    }

    /// `engine::workers::register`: names the connection (one live name per
    /// namespace), then releases its queued registrations.
    ///
    /// A name another live connection holds is refused as the real engine
    /// refuses it: the lease stays with the holder, the connection's queued
    /// and later registrations never apply, and `registrationrejected
    /// {code: WORKER_NAMESPACE_CONFLICT, namespace, worker_name,
    /// owner_worker_id}` followed by a close frame reach the client
    /// [`NAME_REFUSAL_DELAY`] after this call (the connection serves calls
    /// until then). `name` is already sanitized ([`sanitize_worker_text`]).
    pub fn register_worker(
        &mut self,
        conn: ConnId,
        namespace: String,
        name: Option<String>,
        info: WorkerInfo,
    ) -> bool {
        let namespace = match self.conns.get(&conn).map(|c| &c.namespace) {
            Some(NamespaceState::Resolved(fixed)) => fixed.clone(),
            Some(NamespaceState::Pending(_)) => namespace,
            Some(NamespaceState::Refused) | None => return false,
        };
        if let Some(name) = &name {
            let key = (namespace.clone(), name.clone());
            let holder = self
                .name_leases
                .get(&key)
                .filter(|owner| **owner != conn && self.conns.contains_key(owner))
                .and_then(|owner| self.conns.get(owner))
                .map(|owner| owner.worker_id.clone());
            if let Some(owner_worker_id) = holder {
                tracing::warn!(
                    worker_name = %name,
                    %namespace,
                    %owner_worker_id,
                    "test engine: worker name already held by a live worker; rejected"
                );
                self.refuse_name(
                    conn,
                    wire::registration_rejected(
                        "WORKER_NAMESPACE_CONFLICT",
                        &namespace,
                        Some(name),
                        None,
                        &owner_worker_id,
                    ),
                );
                return false;
            }
            self.name_leases
                .retain(|(ns, _), owner| !(*owner == conn && *ns == namespace));
            self.name_leases.insert(key, conn);
        }
        if let Some(state) = self.conns.get_mut(&conn) {
            state.name = name;
            state.info = Some(info);
        }
        self.resolve_namespace(conn, &namespace);
        true
    }

    /// Drops a refused connection's registrations and sends it `refusal`
    /// and a close frame after [`NAME_REFUSAL_DELAY`]; its socket task
    /// tears it down when the close goes out.
    fn refuse_name(&mut self, conn: ConnId, refusal: Value) {
        let Some(state) = self.conns.get_mut(&conn) else {
            return;
        };
        state.namespace = NamespaceState::Refused;
        let outbox = state.outbox.clone();
        let send = move || {
            send_frame(&outbox, refusal);
            let _ = outbox.send(Outbound::Close);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(NAME_REFUSAL_DELAY).await;
                    send();
                });
            }
            Err(_) => send(),
        }
    }

    // ── calls ──────────────────────────────────────────────────────────

    fn on_invoke(
        &mut self,
        conn: ConnId,
        invocation_id: Option<String>,
        action: Option<wire::Action>,
        call: Call,
    ) {
        if wire::is_blank(&call.namespace) {
            if let (Some(id), Some(state)) = (invocation_id, self.conns.get(&conn)) {
                send_frame(
                    &state.outbox,
                    wire::invocation_result(
                        &id,
                        &call.function_id,
                        Err(ErrorBody::new(
                            "INVALID_NAMESPACE",
                            wire::blank_namespace_message("namespace"),
                        )),
                    ),
                );
            }
            return;
        }
        match action {
            Some(wire::Action::Enqueue { .. }) => {
                if let (Some(id), Some(state)) = (invocation_id, self.conns.get(&conn)) {
                    send_frame(
                        &state.outbox,
                        wire::invocation_result(
                            &id,
                            &call.function_id,
                            Err(ErrorBody::new(
                                "enqueue_error",
                                "No queue provider is installed. `TriggerAction::Enqueue` routes \
                                 through the `engine::queue::enqueue` provider, which the \
                                 standalone queue worker registers. Add it with `iii worker add \
                                 queue`. (underlying: Function engine::queue::enqueue not found \
                                 in namespace default)",
                            )),
                        ),
                    );
                }
            }
            Some(wire::Action::Void) => self.call(
                Caller::Worker {
                    conn,
                    invocation_id: None,
                },
                call,
            ),
            None => self.call(
                Caller::Worker {
                    conn,
                    invocation_id,
                },
                call,
            ),
        }
    }

    /// Routes one call: counts it, applies fault rules, then runs a built-in
    /// or forwards it to the connection that owns the function.
    ///
    /// A call from a worker carries `"_caller_worker_id"` in its (object)
    /// `data`, as the real engine stamps it; calls the engine makes itself do
    /// not.
    pub fn call(&mut self, caller: Caller, mut call: Call) {
        self.stats.count(&call.function_id, &call.data);
        let verdict = self.faults.verdict(&call.function_id);
        let (caller_conn, reply) = match caller {
            Caller::Worker {
                conn,
                invocation_id,
            } => {
                let Some(state) = self.conns.get(&conn) else {
                    return;
                };
                if let Some(data) = call.data.as_object_mut() {
                    data.insert("_caller_worker_id".into(), json!(state.worker_id));
                }
                let reply = invocation_id.map(|invocation_id| ReplyTo {
                    via: Via::Socket(state.outbox.clone()),
                    invocation_id,
                    function_id: call.function_id.clone(),
                    delay: verdict.delay,
                });
                (Some(conn), reply)
            }
            Caller::Engine => (None, None),
            Caller::Http(sender) => (
                None,
                Some(ReplyTo {
                    via: Via::Http(sender),
                    invocation_id: new_id(),
                    function_id: call.function_id.clone(),
                    delay: verdict.delay,
                }),
            ),
        };

        if let Some(error) = verdict.fail {
            tracing::debug!(function_id = %call.function_id, code = %error.code, "test engine: injected failure");
            if let Some(reply) = reply {
                reply.send(Err(error));
            }
            return;
        }

        let namespace = call
            .namespace
            .clone()
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        if namespace == DEFAULT_NAMESPACE && super::builtins::is_builtin(&call.function_id) {
            match self.run_builtin(caller_conn, &call.function_id, call.data) {
                super::builtins::Outcome::Done(outcome) => {
                    if let Some(reply) = reply {
                        reply.send(outcome);
                    }
                }
                super::builtins::Outcome::Unanswered => {}
                super::builtins::Outcome::AwaitTriggerAck {
                    verdict,
                    binding,
                    provider,
                } => self.deferred.push(Deferred::TriggerAck {
                    verdict,
                    binding,
                    provider,
                    reply,
                }),
            }
            return;
        }

        let key = (namespace, call.function_id.clone());
        let Some(callee) = self.functions.get(&key).map(|f| f.owner) else {
            let error = self.function_not_found(&key.0, &key.1);
            tracing::error!(function_id = %key.1, namespace = %key.0, "Function not found");
            if let Some(reply) = reply {
                reply.send(Err(error));
            }
            return;
        };
        let invocation_id = reply
            .as_ref()
            .map(|reply| reply.invocation_id.clone())
            .unwrap_or_else(new_id);
        let frame = wire::invoke_function(
            &invocation_id,
            &call.function_id,
            call.data,
            call.metadata,
            call.traceparent,
            call.baggage,
        );
        let caller = reply.as_ref().and(caller_conn);
        self.invocations.insert(
            invocation_id,
            PendingCall {
                callee,
                caller,
                reply,
            },
        );
        self.send_to(callee, frame);
    }

    fn function_not_found(&self, namespace: &str, function_id: &str) -> ErrorBody {
        let mut elsewhere: Vec<&str> = self
            .functions
            .keys()
            .filter(|(ns, id)| id == function_id && ns != namespace)
            .map(|(ns, _)| ns.as_str())
            .collect();
        elsewhere.sort_unstable();
        let hint = if elsewhere.is_empty() {
            String::new()
        } else {
            format!(
                " It is registered in namespace(s): {}.",
                elsewhere.join(", ")
            )
        };
        ErrorBody::new(
            "function_not_found",
            format!("Function {function_id} not found in namespace {namespace}.{hint}"),
        )
    }

    // ── trigger types and bindings ─────────────────────────────────────

    /// The provider a binding resolves to: the namespace it insisted on, or
    /// its binder's namespace and then `default`.
    fn resolve_provider(&self, binding: &Binding) -> Option<TypeKey> {
        let candidates = match &binding.trigger_namespace {
            Some(explicit) => vec![explicit.clone()],
            None => vec![
                binding.home_namespace.clone(),
                DEFAULT_NAMESPACE.to_string(),
            ],
        };
        candidates
            .into_iter()
            .map(|ns| (ns, binding.trigger_type.clone()))
            .find(|key| self.trigger_types.contains_key(key))
    }

    /// Hands a binding to its provider, or parks it when there is none.
    pub fn activate(&mut self, binding: &mut Binding) -> Activation {
        binding.provider = None;
        let Some(key) = self.resolve_provider(binding) else {
            return Activation::Parked;
        };
        let Some(provider) = self.trigger_types.get(&key).map(|entry| entry.provider) else {
            return Activation::Parked;
        };
        match provider {
            Provider::Builtin(BuiltinTrigger::Http) => match self.http.insert(binding) {
                Ok(()) => {
                    binding.provider = Some(key);
                    Activation::Live
                }
                Err(message) => Activation::Rejected(message),
            },
            Provider::Builtin(kind) => match super::builtins::check_trigger_config(kind, binding) {
                Ok(()) => {
                    binding.provider = Some(key);
                    Activation::Live
                }
                Err(message) => Activation::Rejected(message),
            },
            Provider::Conn(conn) => {
                self.send_to(
                    conn,
                    wire::register_trigger(
                        &binding.id,
                        &binding.trigger_type,
                        &binding.function_id,
                        &binding.config,
                        &binding.metadata,
                        &binding.namespace,
                        &key.0,
                    ),
                );
                binding.provider = Some(key);
                Activation::Forwarded(conn)
            }
        }
    }

    pub fn log_parked(binding: &Binding) {
        tracing::warn!(
            "[PENDING] Trigger {} (function {}) was NOT activated: trigger type {} is not \
             registered. It will be registered automatically when the trigger type becomes \
             available.",
            binding.id,
            binding.function_id,
            binding.trigger_type
        );
    }

    /// `registertrigger` from a worker: fire-and-forget. A parked binding
    /// gets no answer; a refusal by an engine provider is answered at once; a
    /// worker provider's refusal is relayed when it arrives.
    fn bind_for_worker(&mut self, conn: ConnId, mut binding: Binding) {
        match self.activate(&mut binding) {
            Activation::Rejected(message) => {
                self.send_to(
                    conn,
                    wire::trigger_registration_result(
                        &binding.id,
                        &binding.trigger_type,
                        &binding.function_id,
                        ErrorBody::new("trigger_registration_failed", message),
                    ),
                );
            }
            Activation::Parked => {
                Self::log_parked(&binding);
                self.bindings.insert(binding.id.clone(), binding);
            }
            Activation::Live | Activation::Forwarded(_) => {
                self.bindings.insert(binding.id.clone(), binding);
            }
        }
    }

    /// Tells a binding's worker provider to let go of it (unless that
    /// provider is `except`, a connection already gone).
    fn detach(&mut self, binding: &Binding, except: Option<ConnId>) {
        self.http.remove(&binding.id);
        let provider = binding
            .provider
            .as_ref()
            .and_then(|key| self.trigger_types.get(key))
            .map(|entry| entry.provider);
        if let Some(Provider::Conn(provider)) = provider {
            if Some(provider) != except {
                self.send_to(
                    provider,
                    wire::unregister_trigger(&binding.id, &binding.trigger_type),
                );
            }
        }
    }

    /// Removes a binding, live or parked; `true` when it existed.
    pub fn unregister_binding(&mut self, id: &str) -> bool {
        match self.bindings.remove(id) {
            Some(binding) => {
                self.detach(&binding, None);
                true
            }
            None => false,
        }
    }

    /// A trigger type's provider left: its bindings try the next provider
    /// in line, or park until one registers.
    fn rehome_orphans(&mut self, key: &TypeKey) {
        let orphans: Vec<String> = self
            .bindings
            .values()
            .filter(|binding| binding.provider.as_ref() == Some(key))
            .map(|binding| binding.id.clone())
            .collect();
        for id in orphans {
            let Some(mut binding) = self.bindings.remove(&id) else {
                continue;
            };
            match self.activate(&mut binding) {
                Activation::Parked | Activation::Rejected(_) => {
                    binding.provider = None;
                    tracing::warn!(
                        "[DISABLED] Trigger {} (type {}, function {}) is disabled: its trigger \
                         type was unregistered. It will be re-registered automatically when the \
                         trigger type returns.",
                        binding.id,
                        binding.trigger_type,
                        binding.function_id
                    );
                }
                Activation::Live | Activation::Forwarded(_) => {}
            }
            self.bindings.insert(id, binding);
        }
    }

    /// `registertriggertype`: the connection becomes the type's provider. Its
    /// live bindings are sent again (a reconnecting provider has forgotten
    /// them) and parked ones that now resolve here are activated.
    fn register_trigger_type(
        &mut self,
        conn: ConnId,
        id: String,
        description: String,
        namespace: Option<String>,
        formats: Formats,
    ) {
        if wire::is_blank(&namespace) {
            tracing::error!(trigger_type = %id, "{}", wire::blank_namespace_message("namespace"));
            return;
        }
        let key = (namespace.unwrap_or_else(|| self.conn_namespace(conn)), id);
        if let Some(TriggerTypeEntry {
            provider: Provider::Builtin(_),
            ..
        }) = self.trigger_types.get(&key)
        {
            tracing::warn!(trigger_type = %key.1, "test engine: an engine trigger type cannot be replaced; ignored");
            return;
        }
        tracing::info!("[REGISTERED] Trigger Type {} in {}", key.1, key.0);
        self.trigger_types.insert(
            key.clone(),
            TriggerTypeEntry {
                provider: Provider::Conn(conn),
                description,
                formats,
            },
        );

        let mut live = Vec::new();
        let mut parked = Vec::new();
        for binding in self.bindings.values() {
            if binding.provider.as_ref() == Some(&key) {
                live.push(binding.id.clone());
            } else if binding.provider.is_none()
                && binding.trigger_type == key.1
                && self.resolve_provider(binding).as_ref() == Some(&key)
            {
                parked.push(binding.id.clone());
            }
        }
        for id in live.into_iter().chain(parked) {
            let Some(mut binding) = self.bindings.remove(&id) else {
                continue;
            };
            if let Activation::Forwarded(_) = self.activate(&mut binding) {
                tracing::debug!(trigger_id = %id, "test engine: binding sent to its provider");
            }
            self.bindings.insert(id, binding);
        }
    }

    /// `triggerregistrationresult` from a provider. A verdict someone waits
    /// for (a durable binding) goes to them; otherwise a refusal parks the
    /// binding and is relayed to the worker that bound it.
    fn on_trigger_verdict(&mut self, conn: ConnId, id: &str, error: Option<ErrorBody>) {
        if self
            .trigger_acks
            .get(id)
            .is_some_and(|(provider, _)| *provider == conn)
        {
            if let Some((_, waiter)) = self.trigger_acks.remove(id) {
                let _ = waiter.send(error);
            }
            return;
        }
        let Some(binding) = self.bindings.get(id) else {
            return;
        };
        let served_here = binding
            .provider
            .as_ref()
            .and_then(|key| self.trigger_types.get(key))
            .is_some_and(|entry| entry.provider == Provider::Conn(conn));
        if !served_here {
            tracing::warn!(trigger_id = %id, "test engine: verdict from a worker that does not provide the type; ignored");
            return;
        }
        let Some(error) = error else {
            return;
        };
        let Some(binding) = self.bindings.get_mut(id) else {
            return;
        };
        binding.provider = None;
        tracing::warn!(
            trigger_id = %id,
            trigger_type = %binding.trigger_type,
            "Trigger registration rejected by provider; parked as pending until the trigger type re-registers"
        );
        let (owner, frame) = (
            binding.owner,
            wire::trigger_registration_result(
                id,
                &binding.trigger_type,
                &binding.function_id,
                error,
            ),
        );
        if let Some(owner) = owner {
            self.send_to(owner, frame);
        }
    }

    /// A durable binding its provider accepted (or did not answer within the
    /// timeout): filed live when that provider still serves the type, else
    /// handed to whoever does now.
    pub fn accept_durable(&mut self, binding: Box<Binding>, provider: ConnId) {
        let mut binding = *binding;
        let still_served = binding
            .provider
            .as_ref()
            .and_then(|key| self.trigger_types.get(key))
            .is_some_and(|entry| entry.provider == Provider::Conn(provider));
        if !still_served {
            if let Activation::Parked | Activation::Rejected(_) = self.activate(&mut binding) {
                binding.provider = None;
            }
        }
        self.bindings.insert(binding.id.clone(), binding);
    }

    /// Delivers an engine event to every live binding of an engine trigger
    /// type whose config `matches`.
    pub fn fire(&mut self, kind: BuiltinTrigger, event: &Value, matches: impl Fn(&Value) -> bool) {
        let key = (DEFAULT_NAMESPACE.to_string(), kind.type_id().to_string());
        let targets: Vec<(String, String, Option<Value>)> = self
            .bindings
            .values()
            .filter(|binding| binding.provider.as_ref() == Some(&key) && matches(&binding.config))
            .map(|binding| {
                (
                    binding.function_id.clone(),
                    binding.namespace.clone(),
                    binding.metadata.clone(),
                )
            })
            .collect();
        for (function_id, namespace, metadata) in targets {
            self.call(
                Caller::Engine,
                Call {
                    function_id,
                    namespace: Some(namespace),
                    data: event.clone(),
                    metadata,
                    traceparent: None,
                    baggage: None,
                },
            );
        }
    }
}
