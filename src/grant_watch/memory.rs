//! What the grant watch remembers between calls: per-call re-ask counters and
//! the dirs a session's user denied (`architecture/contract.md` § The grant
//! watch, § Storage).
//!
//! # Format
//!
//! * `approval_grant_attempts` / `<session_id>/<function_call_id>` →
//!   `{session_id, function_call_id, turn_id, count}`;
//! * `approval_grant_denied` / `<session_id>` → `["/dir", ...]` (deduplicated).

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::engine::{CallError, Engine};

/// State scope of per-call re-ask counters.
pub(crate) const ATTEMPTS_SCOPE: &str = "approval_grant_attempts";
/// State scope of the dirs a session's user denied.
pub(crate) const DENIED_SCOPE: &str = "approval_grant_denied";

/// A re-ask counter.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Attempts {
    session_id: String,
    function_call_id: String,
    turn_id: String,
    count: u32,
}

/// The grant watch's memory.
pub(crate) struct GrantMemory {
    engine: Engine,
    /// Serializes read-merge-writes of a denied-dirs list, so two denials in
    /// flight at once both stay remembered. Held across the read and the
    /// write (both awaits), so it is an async lock.
    denied: tokio::sync::Mutex<()>,
}

impl GrantMemory {
    pub(crate) fn new(engine: Engine) -> GrantMemory {
        GrantMemory {
            engine,
            denied: tokio::sync::Mutex::new(()),
        }
    }

    /// The dirs a session's user denied.
    pub(crate) async fn denied_dirs(&self, session_id: &str) -> Result<Vec<String>, CallError> {
        let current = self.engine.state_get(DENIED_SCOPE, session_id).await?;
        Ok(serde_json::from_value(current).unwrap_or_default())
    }

    /// Adds `dir` to the session's denied dirs (deduplicated).
    pub(crate) async fn remember_denied(
        &self,
        session_id: &str,
        dir: &str,
    ) -> Result<(), CallError> {
        let _serial = self.denied.lock().await;
        let mut dirs = self.denied_dirs(session_id).await?;
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_string());
        }
        self.engine
            .state_set(DENIED_SCOPE, session_id, json!(dirs))
            .await?;
        Ok(())
    }

    /// How many times the call has been asked about a folder.
    pub(crate) async fn attempts(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Result<u32, CallError> {
        let stored = self
            .engine
            .state_get(ATTEMPTS_SCOPE, &attempts_key(session_id, function_call_id))
            .await?;
        Ok(serde_json::from_value::<Attempts>(stored)
            .map(|a| a.count)
            .unwrap_or(0))
    }

    /// Records one more ask of the call.
    pub(crate) async fn count_attempt(
        &self,
        session_id: &str,
        function_call_id: &str,
        turn_id: &str,
        count: u32,
    ) -> Result<(), CallError> {
        let attempts = Attempts {
            session_id: session_id.to_string(),
            function_call_id: function_call_id.to_string(),
            turn_id: turn_id.to_string(),
            count,
        };
        self.engine
            .state_set(
                ATTEMPTS_SCOPE,
                &attempts_key(session_id, function_call_id),
                json!(attempts),
            )
            .await
            .map(|_| ())
    }

    /// Drops the attempt counters of a turn (optionally only of one session).
    pub(crate) async fn forget_turn(&self, turn_id: &str, session_id: Option<&str>) {
        self.forget_attempts(|a| {
            a.turn_id == turn_id && session_id.is_none_or(|s| s == a.session_id)
        })
        .await;
    }

    /// Drops a session's denied dirs and attempt counters.
    pub(crate) async fn forget_session(&self, session_id: &str) {
        if let Err(err) = self.engine.state_delete(DENIED_SCOPE, session_id).await {
            tracing::warn!(session_id, error = %err, "denied dirs not cleared");
        }
        self.forget_attempts(|a| a.session_id == session_id).await;
    }

    async fn forget_attempts(&self, which: impl Fn(&Attempts) -> bool) {
        let Ok(values) = self.engine.state_list(ATTEMPTS_SCOPE).await else {
            tracing::warn!("attempt counters not listed; left for the next event");
            return;
        };
        for attempts in values
            .into_iter()
            .filter_map(|v| serde_json::from_value::<Attempts>(v).ok())
        {
            if which(&attempts) {
                let key = attempts_key(&attempts.session_id, &attempts.function_call_id);
                if let Err(err) = self.engine.state_delete(ATTEMPTS_SCOPE, &key).await {
                    tracing::warn!(key, error = %err, "attempt counter not deleted");
                }
            }
        }
    }
}

fn attempts_key(session_id: &str, function_call_id: &str) -> String {
    format!("{session_id}/{function_call_id}")
}
