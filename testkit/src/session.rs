//! `SessionDouble`: an SDK worker named `session-manager` that serves
//! `session::get` and `session::ensure` from a map the test fills and
//! provides the `session::deleted` trigger type.
//!
//! # Format
//!
//! `session::get {session_id}` → `{ "session_id": "s1", "meta": { "title"?, "description"?, "metadata"? } }`
//! for a session put with [`SessionDouble::put`] (or made by
//! `session::ensure`), or exactly the body given to
//! [`SessionDouble::put_response`] (to play a reply without `meta`, or with
//! odd field types). An unknown session answers `null`, as the real manager
//! does (its `session::get` response schema is `GetResponse | null`).
//!
//! `session::ensure {session_id, title?, metadata?}` →
//! `{ "meta": {session_id, title, description, metadata}, "created": bool }`:
//! an unknown session is made with `metadata`; a known one is left as it is
//! (`created: false`, the supplied metadata not applied). Today's harness
//! makes a child session this way, with its parent linkage
//! `{parent_session_id, parent_turn_id, function_call_id, depth}` as the
//! metadata ([`crate::harness::HarnessDouble::spawn`]); a reused session
//! keeps whatever linkage it was made with.
//!
//! `session::deleted` payload: `{ "session_id": "s1", "deleted_at": <ms> }`,
//! fired (void) to every binding, whatever its config. Today's harness
//! double binds it too (`harness::on-session-deleted`), so on generation 2
//! [`SessionDouble::delete`] counts that binding.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{Error, IIIClient, RegisterFunction, RegisterTriggerType};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::harness::model::BindingInfo;
use super::harness::peer;

pub const WORKER_NAME: &str = "session-manager";
pub const SESSION_GET: &str = "session::get";
pub const SESSION_ENSURE: &str = "session::ensure";
pub const SESSION_DELETED: &str = "session::deleted";

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetRequest {
    pub session_id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EnsureRequest {
    pub session_id: String,
    pub title: Option<String>,
    pub metadata: Option<Value>,
}

#[derive(Default)]
struct Core {
    sessions: Mutex<HashMap<String, Value>>,
    delay: Mutex<Duration>,
    gets: AtomicUsize,
    bindings: Arc<Mutex<BTreeMap<String, BindingInfo>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running session-manager double. Cheap to clone; disconnects when the
/// last clone drops.
#[derive(Clone)]
pub struct SessionDouble {
    iii: IIIClient,
    core: Arc<Core>,
    _closer: Arc<peer::Closer>,
}

struct DeletedType {
    bindings: Arc<Mutex<BTreeMap<String, BindingInfo>>>,
}

#[async_trait]
impl TriggerHandler for DeletedType {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        lock(&self.bindings).insert(
            config.id.clone(),
            BindingInfo {
                id: config.id,
                trigger_type: SESSION_DELETED.to_string(),
                function_id: config.function_id,
                config: config.config,
                metadata: config.metadata,
                namespace: config.namespace,
            },
        );
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        lock(&self.bindings).remove(&config.id);
        Ok(())
    }
}

impl SessionDouble {
    /// Connects as `session-manager` and returns once `session::get`,
    /// `session::ensure` and `session::deleted` are listed by the engine.
    pub async fn start(url: &str) -> SessionDouble {
        let iii = peer::connect(url, WORKER_NAME);
        let core = Arc::new(Core::default());
        // Provider APIs are deprecated in 0.25 and gone in 0.26; the engine
        // still speaks them and the real session manager provides this type.
        #[allow(deprecated)]
        iii.register_trigger_type(RegisterTriggerType::new(
            SESSION_DELETED,
            "A session was deleted",
            DeletedType {
                bindings: core.bindings.clone(),
            },
        ));
        let weak: Weak<Core> = Arc::downgrade(&core);
        iii.register_function(
            SESSION_GET,
            RegisterFunction::new_async(move |req: GetRequest| {
                let core = weak.upgrade();
                async move {
                    let core =
                        core.ok_or_else(|| Error::Handler("session manager stopped".into()))?;
                    core.get(req).await
                }
            })
            .description("Read a session: its meta (title, description, metadata)"),
        );
        let weak: Weak<Core> = Arc::downgrade(&core);
        iii.register_function(
            SESSION_ENSURE,
            RegisterFunction::new_async(move |req: EnsureRequest| {
                let core = weak.upgrade();
                async move {
                    let core =
                        core.ok_or_else(|| Error::Handler("session manager stopped".into()))?;
                    Ok::<_, Error>(core.ensure(req))
                }
            })
            .description("Make a session unless it exists; metadata applies only when made"),
        );
        let closer = Arc::new(peer::Closer(iii.clone()));
        peer::wait_live(&iii, &[SESSION_GET, SESSION_ENSURE], &[SESSION_DELETED]).await;
        SessionDouble {
            iii,
            core,
            _closer: closer,
        }
    }

    pub async fn shutdown(&self) {
        peer::shutdown(&self.iii).await;
    }

    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    /// Makes `session::get` answer `{session_id, meta}` for this session.
    pub fn put(&self, session_id: &str, meta: Value) {
        self.put_response(
            session_id,
            json!({ "session_id": session_id, "meta": meta }),
        );
    }

    /// Makes `session::get` answer exactly `response` for this session.
    pub fn put_response(&self, session_id: &str, response: Value) {
        lock(&self.core.sessions).insert(session_id.to_string(), response);
    }

    /// The session's `meta.metadata` as `session::get` would answer it.
    pub fn metadata_of(&self, session_id: &str) -> Option<Value> {
        lock(&self.core.sessions)
            .get(session_id)
            .and_then(|s| s.pointer("/meta/metadata"))
            .filter(|m| !m.is_null())
            .cloned()
    }

    /// Makes `session::get` unknown for this session again.
    pub fn forget(&self, session_id: &str) {
        lock(&self.core.sessions).remove(session_id);
    }

    /// Delays every `session::get` answer (to test a caller's budget).
    pub fn set_delay(&self, delay: Duration) {
        *lock(&self.core.delay) = delay;
    }

    /// How many `session::get` calls arrived.
    pub fn get_calls(&self) -> usize {
        self.core.gets.load(Ordering::SeqCst)
    }

    pub fn bindings(&self) -> Vec<BindingInfo> {
        lock(&self.core.bindings).values().cloned().collect()
    }

    /// Forgets the session and fires `session::deleted` to every binding.
    /// Returns how many bindings it was fired to.
    pub async fn delete(&self, session_id: &str) -> usize {
        self.forget(session_id);
        let payload = json!({ "session_id": session_id, "deleted_at": crate::time::now_ms() });
        let bindings = self.bindings();
        for b in &bindings {
            peer::fire(
                &self.iii,
                &b.function_id,
                payload.clone(),
                b.metadata.as_ref(),
                b.namespace.as_deref(),
            )
            .await;
        }
        bindings.len()
    }

    /// Waits until some binding of `function_id` exists.
    pub async fn wait_for_binding(&self, function_id: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.bindings().iter().any(|b| b.function_id == function_id) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Core {
    async fn get(&self, req: GetRequest) -> Result<Value, Error> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let delay = *lock(&self.delay);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let found = lock(&self.sessions).get(&req.session_id).cloned();
        Ok(found.unwrap_or(Value::Null))
    }

    fn ensure(&self, req: EnsureRequest) -> Value {
        let mut sessions = lock(&self.sessions);
        let created = !sessions.contains_key(&req.session_id);
        if created {
            let meta = json!({
                "session_id": req.session_id,
                "title": req.title.unwrap_or_default(),
                "description": "",
                "metadata": req.metadata.unwrap_or(Value::Null),
            });
            sessions.insert(
                req.session_id.clone(),
                json!({ "session_id": req.session_id, "meta": meta }),
            );
        }
        let meta = sessions
            .get(&req.session_id)
            .and_then(|s| s.get("meta"))
            .cloned()
            .unwrap_or(Value::Null);
        json!({ "meta": meta, "created": created })
    }
}
