//! `TargetWorker`: an SDK worker named `targets` that registers the functions a
//! turn calls (`demo::echo`, `shell::run`, `coder::write`, …), counts and
//! records every run, and can be told to fail one.
//!
//! What a target answers is a [`Behaviour`]: [`Echo`] by default, a fixed
//! [`Reply`], or any type a test writes — the extension point for targets
//! with logic of their own (a shell that rejects paths outside its jail
//! roots reads them from the call's metadata or, from today's harness, from
//! the trusted stamp in its arguments; see the harness double's module doc
//! and [`crate::shell`]).
//!
//! A target that runs for a while (a long `execute`):
//! [`TargetWorker::set_delay`]; the harness double waits for it as long as
//! its `target_timeout_ms` allows.
//!
//! # Format
//!
//! [`Echo`] answers `{ "function_id": "<id>", "echo": <payload> }`. A failure
//! set with [`TargetWorker::fail`] is a structured error `{code, message}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use iii_sdk::{Error, IIIClient, RegisterFunction};
use serde_json::{json, Value};

use super::harness::peer;

pub const WORKER_NAME: &str = "targets";

/// The key the engine adds to object payloads sent by workers; stripped from
/// recorded payloads so tests compare only what the caller meant to send.
const CALLER_KEY: &str = "_caller_worker_id";

/// One run of a target, as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetCall {
    pub function_id: String,
    /// The payload without the engine's `_caller_worker_id`.
    pub payload: Value,
    /// The invocation metadata, when the caller sent any.
    pub metadata: Option<Value>,
    pub caller_worker_id: Option<String>,
}

/// A structured error a target returns (`code` reaches the caller as is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError {
    pub code: String,
    pub message: String,
}

impl TargetError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> TargetError {
        TargetError {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// What a target answers. Runs on the SDK's single-threaded runtime: keep it
/// cheap and non-blocking.
pub trait Behaviour: Send + Sync + 'static {
    fn respond(&self, call: &TargetCall) -> Result<Value, TargetError>;
}

/// Answers `{function_id, echo: payload}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Behaviour for Echo {
    fn respond(&self, call: &TargetCall) -> Result<Value, TargetError> {
        Ok(json!({ "function_id": call.function_id, "echo": call.payload }))
    }
}

/// Always answers the same value.
#[derive(Debug, Clone)]
pub struct Reply(pub Value);

impl Behaviour for Reply {
    fn respond(&self, _call: &TargetCall) -> Result<Value, TargetError> {
        Ok(self.0.clone())
    }
}

#[derive(Default)]
struct Core {
    behaviours: Mutex<HashMap<String, Arc<dyn Behaviour>>>,
    failures: Mutex<HashMap<String, TargetError>>,
    delays: Mutex<HashMap<String, Duration>>,
    calls: Mutex<Vec<TargetCall>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running target worker. Cheap to clone; disconnects when the last
/// clone drops.
#[derive(Clone)]
pub struct TargetWorker {
    iii: IIIClient,
    core: Arc<Core>,
    _closer: Arc<peer::Closer>,
}

impl TargetWorker {
    /// Registers `ids` as [`Echo`] targets and returns once they are live.
    pub async fn start(url: &str, ids: &[&str]) -> TargetWorker {
        let targets = ids
            .iter()
            .map(|id| (id.to_string(), Arc::new(Echo) as Arc<dyn Behaviour>))
            .collect();
        TargetWorker::start_with(url, targets).await
    }

    /// Registers each `(id, behaviour)` and returns once all are live.
    pub async fn start_with(url: &str, targets: Vec<(String, Arc<dyn Behaviour>)>) -> TargetWorker {
        let iii = peer::connect(url, WORKER_NAME);
        let worker = TargetWorker {
            _closer: Arc::new(peer::Closer(iii.clone())),
            iii,
            core: Arc::new(Core::default()),
        };
        let ids: Vec<String> = targets.iter().map(|(id, _)| id.clone()).collect();
        for (id, behaviour) in targets {
            worker.register(id, behaviour);
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        peer::wait_live(&worker.iii, &ids, &[]).await;
        worker
    }

    /// Adds one more target and waits until it is live.
    pub async fn add(&self, id: &str, behaviour: Arc<dyn Behaviour>) {
        self.register(id.to_string(), behaviour);
        peer::wait_live(&self.iii, &[id], &[]).await;
    }

    fn register(&self, id: String, behaviour: Arc<dyn Behaviour>) {
        lock(&self.core.behaviours).insert(id.clone(), behaviour);
        let weak: Weak<Core> = Arc::downgrade(&self.core);
        let function_id = id.clone();
        self.iii.register_function(
            id,
            RegisterFunction::new_async(move |payload: Value, metadata: Option<Value>| {
                let core = weak.upgrade();
                let function_id = function_id.clone();
                async move {
                    let core =
                        core.ok_or_else(|| Error::Handler("target worker stopped".into()))?;
                    core.run(function_id, payload, metadata).await
                }
            })
            .description("test target"),
        );
    }

    pub async fn shutdown(&self) {
        peer::shutdown(&self.iii).await;
    }

    /// The worker's SDK client: tests bind its functions to trigger types
    /// (hooks, event receivers) and call other functions through it.
    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    /// Every later run of `id` fails with `{code, message}` until
    /// [`succeed`](Self::succeed).
    pub fn fail(&self, id: &str, code: &str, message: &str) {
        lock(&self.core.failures).insert(id.to_string(), TargetError::new(code, message));
    }

    pub fn succeed(&self, id: &str) {
        lock(&self.core.failures).remove(id);
    }

    /// Every later run of `id` answers after `delay` (`Duration::ZERO`
    /// restores an immediate answer). The run is recorded when it starts.
    pub fn set_delay(&self, id: &str, delay: Duration) {
        lock(&self.core.delays).insert(id.to_string(), delay);
    }

    pub fn runs(&self, id: &str) -> usize {
        self.calls(id).len()
    }

    /// Every run of `id`, oldest first.
    pub fn calls(&self, id: &str) -> Vec<TargetCall> {
        lock(&self.core.calls)
            .iter()
            .filter(|c| c.function_id == id)
            .cloned()
            .collect()
    }

    pub fn payloads(&self, id: &str) -> Vec<Value> {
        self.calls(id).into_iter().map(|c| c.payload).collect()
    }
}

impl Core {
    async fn run(
        &self,
        function_id: String,
        mut payload: Value,
        metadata: Option<Value>,
    ) -> Result<Value, Error> {
        let caller_worker_id = payload
            .as_object_mut()
            .and_then(|o| o.remove(CALLER_KEY))
            .and_then(|v| v.as_str().map(str::to_string));
        let call = TargetCall {
            function_id: function_id.clone(),
            payload,
            metadata,
            caller_worker_id,
        };
        lock(&self.calls).push(call.clone());
        let delay = lock(&self.delays).get(&function_id).copied();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let failure = lock(&self.failures).get(&function_id).cloned();
        let behaviour = lock(&self.behaviours).get(&function_id).cloned();
        let answer = match (failure, behaviour) {
            (Some(err), _) => Err(err),
            (None, Some(b)) => b.respond(&call),
            (None, None) => Err(TargetError::new("not_registered", function_id.clone())),
        };
        answer.map_err(|e| Error::Remote {
            code: e.code,
            message: e.message,
            stacktrace: None,
        })
    }
}
