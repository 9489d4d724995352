//! What the grant watch remembers between calls: how often each held call
//! was asked about a folder, and the dirs a session's user denied
//! (`architecture/contract.md` § The grant watch, § Storage).
//!
//! # Format
//!
//! * `approval_grant_asks` / `<session_id>` →
//!   `{ session_id, turns: { <turn_id>: { <function_call_id>: count } } }`;
//! * `approval_grant_denied` / `<session_id>` → `["/dir", ...]` (deduplicated).
//!
//! Both are keyed by session, so a turn's purge rewrites one record and a
//! session's purge deletes two keys: no event ever lists a scope. The first
//! layout kept one record per call under `approval_grant_attempts`, which a
//! turn's purge had to list whole; [`GrantMemory::migrate`] moves it at boot.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::engine::{CallError, Engine, Scope};

/// Read-merge-writes of one session's records are serialized by one of these
/// async locks (held across the read and the write, both awaits), so two
/// asks or two denials in flight at once both land.
const STRIPES: usize = 64;

/// A session's asks: turn id → call id → count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Asks {
    session_id: String,
    #[serde(default)]
    turns: BTreeMap<String, BTreeMap<String, u32>>,
}

/// A per-call counter of the first layout.
#[derive(Debug, Clone, Deserialize)]
struct LegacyAttempts {
    session_id: String,
    function_call_id: String,
    turn_id: String,
    count: u32,
}

/// The grant watch's memory.
pub(crate) struct GrantMemory {
    engine: Engine,
    stripes: Vec<tokio::sync::Mutex<()>>,
}

impl GrantMemory {
    pub(crate) fn new(engine: Engine) -> GrantMemory {
        GrantMemory {
            engine,
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    async fn lock(&self, session_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        session_id.hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    /// The dirs a session's user denied.
    pub(crate) async fn denied_dirs(&self, session_id: &str) -> Result<Vec<String>, CallError> {
        let current = self
            .engine
            .state_get(&Scope::GRANT_DENIED, session_id)
            .await?;
        Ok(serde_json::from_value(current).unwrap_or_default())
    }

    /// Adds `dir` to the session's denied dirs (deduplicated).
    pub(crate) async fn remember_denied(
        &self,
        session_id: &str,
        dir: &str,
    ) -> Result<(), CallError> {
        let _serial = self.lock(session_id).await;
        let mut dirs = self.denied_dirs(session_id).await?;
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_string());
        }
        self.engine
            .state_set(&Scope::GRANT_DENIED, session_id, json!(dirs))
            .await?;
        Ok(())
    }

    async fn asks(&self, session_id: &str) -> Result<Asks, CallError> {
        let stored = self
            .engine
            .state_get(&Scope::GRANT_ASKS, session_id)
            .await?;
        Ok(
            serde_json::from_value::<Asks>(stored).unwrap_or_else(|_| Asks {
                session_id: session_id.to_string(),
                turns: BTreeMap::new(),
            }),
        )
    }

    async fn store(&self, asks: &Asks) -> Result<(), CallError> {
        if asks.turns.is_empty() {
            self.engine
                .state_delete(&Scope::GRANT_ASKS, &asks.session_id)
                .await?;
        } else {
            let value = serde_json::to_value(asks).unwrap_or(Value::Null);
            self.engine
                .state_set(&Scope::GRANT_ASKS, &asks.session_id, value)
                .await?;
        }
        Ok(())
    }

    /// Counts one more ask of a call unless it was already asked `limit`
    /// times; returns the count after this ask, or `None` at the limit.
    pub(crate) async fn count_ask(
        &self,
        session_id: &str,
        turn_id: &str,
        function_call_id: &str,
        limit: u32,
    ) -> Result<Option<u32>, CallError> {
        let _serial = self.lock(session_id).await;
        let mut asks = self.asks(session_id).await?;
        let count = asks
            .turns
            .entry(turn_id.to_string())
            .or_default()
            .entry(function_call_id.to_string())
            .or_default();
        if *count >= limit {
            return Ok(None);
        }
        *count += 1;
        let after = *count;
        self.store(&asks).await?;
        Ok(Some(after))
    }

    /// Drops a turn's counters. The harness names the turn's session; a
    /// completion without one leaves them for the session's purge.
    pub(crate) async fn forget_turn(&self, turn_id: &str, session_id: Option<&str>) {
        let Some(session_id) = session_id else {
            tracing::debug!(
                turn_id,
                "turn completed without a session id; its ask counters go with the session"
            );
            return;
        };
        let _serial = self.lock(session_id).await;
        let result = async {
            let mut asks = self.asks(session_id).await?;
            if asks.turns.remove(turn_id).is_some() {
                self.store(&asks).await?;
            }
            Ok::<_, CallError>(())
        }
        .await;
        if let Err(err) = result {
            tracing::warn!(session_id, turn_id, error = %err, "ask counters not cleared");
        }
    }

    /// Drops a session's denied dirs and ask counters.
    pub(crate) async fn forget_session(&self, session_id: &str) {
        let _serial = self.lock(session_id).await;
        for scope in [&Scope::GRANT_DENIED, &Scope::GRANT_ASKS] {
            if let Err(err) = self.engine.state_delete(scope, session_id).await {
                tracing::warn!(session_id, %scope, error = %err, "grant memory not cleared");
            }
        }
    }

    /// Moves the first layout's per-call counters into the per-session
    /// records (boot; the legacy scope is empty afterwards, so later boots
    /// list nothing). Returns how many counters moved.
    pub(crate) async fn migrate(&self) -> Result<usize, CallError> {
        let legacy: Vec<LegacyAttempts> = self
            .engine
            .state_list(&Scope::GRANT_ATTEMPTS_LEGACY)
            .await?
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        let mut by_session: BTreeMap<String, Vec<LegacyAttempts>> = BTreeMap::new();
        for attempts in legacy {
            by_session
                .entry(attempts.session_id.clone())
                .or_default()
                .push(attempts);
        }
        let mut moved = 0;
        for (session_id, counters) in by_session {
            let _serial = self.lock(&session_id).await;
            let mut asks = self.asks(&session_id).await?;
            for c in &counters {
                let count = asks
                    .turns
                    .entry(c.turn_id.clone())
                    .or_default()
                    .entry(c.function_call_id.clone())
                    .or_default();
                *count = (*count).max(c.count);
            }
            self.store(&asks).await?;
            for c in counters {
                let key = format!("{}/{}", c.session_id, c.function_call_id);
                self.engine
                    .state_delete(&Scope::GRANT_ATTEMPTS_LEGACY, &key)
                    .await?;
                moved += 1;
            }
        }
        Ok(moved)
    }
}
