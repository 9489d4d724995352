//! The settings store: `approval_settings` in state is the source of truth;
//! a bounded cache of what the worker knows about each session lets the gate
//! decide warm sessions with zero engine round trips
//! (`architecture/contract.md` § Settings; why a cache: [`super::cache`]).
//!
//! What keeps the cache true:
//! * a session's first call after boot reads its record with one
//!   `state::get` ([`SettingsStore::known`]); a record, or its absence, is kept;
//! * every mutation made here writes through (state first, then the cache);
//! * writes made by anything else to the `approval_settings` scope arrive
//!   through a `state` trigger binding, and each one re-reads that key if the
//!   cache holds it, or forgets it when the re-read fails
//!   ([`SettingsStore::refresh`]).
//!
//! A session whose record cannot be read is **unknown**, never defaulted:
//! the defaults can allow more than what a human set for the session.
//!
//! Mutations of one session are serialized by a striped async lock, so two
//! grants in flight at once both survive.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cache::Cache;
use super::model::ApprovalSettings;
use crate::config::{default_settings, ConfigCell};
use crate::engine::{CallError, Engine, ErrorCode, Scope};
use crate::error::{ApprovalError, StateError};
use crate::policy::CompiledSettings;

/// Sessions whose settings the worker keeps in memory at most. Idle ones are
/// evicted and read again on their next call.
pub(crate) const CACHE_CAPACITY: usize = 50_000;

/// Serializes mutations of one session (stripes by key hash).
const STRIPES: usize = 256;

/// A stored settings record: the contract's `ApprovalSettings` plus the
/// session id, so every stored value says whose it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSettings {
    /// The session the record belongs to.
    session_id: String,
    /// The settings.
    #[serde(flatten)]
    settings: ApprovalSettings,
}

/// A session's stored settings, compiled for the gate.
#[derive(Debug)]
pub(crate) struct SessionSettings {
    /// As stored.
    pub settings: ApprovalSettings,
    /// Compiled for matching.
    pub compiled: CompiledSettings,
}

impl SessionSettings {
    fn new(settings: ApprovalSettings) -> Arc<SessionSettings> {
        let compiled = CompiledSettings::new(&settings);
        Arc::new(SessionSettings { settings, compiled })
    }
}

/// Where `get-settings` found a session's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SettingsSource {
    /// A stored record.
    Stored,
    /// Nothing stored: the current defaults.
    Defaults,
}

/// What the worker knows about a session's stored settings.
#[derive(Debug, Clone)]
pub(crate) enum Known {
    /// A stored record (it wins over the defaults).
    Stored(Arc<SessionSettings>),
    /// Nothing is stored: the current defaults apply.
    Absent,
}

/// The settings store.
pub(crate) struct SettingsStore {
    engine: Engine,
    config: Arc<ConfigCell>,
    cache: Cache<Known>,
    stripes: Vec<tokio::sync::Mutex<()>>,
}

impl SettingsStore {
    /// An empty store.
    pub(crate) fn new(engine: Engine, config: Arc<ConfigCell>) -> SettingsStore {
        SettingsStore {
            engine,
            config,
            cache: Cache::new(CACHE_CAPACITY),
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    /// The gate's read on the hot path: what the cache knows, without an
    /// engine call.
    pub(crate) fn cached(&self, session_id: &str) -> Option<Known> {
        self.cache.get(session_id)
    }

    /// What the worker knows about a session: from the cache, or with one
    /// `state::get` under `budget` (a cold session). An error means the
    /// session's settings are unknown; the caller must not use the defaults.
    pub(crate) async fn known(
        &self,
        session_id: &str,
        budget: Duration,
    ) -> Result<Known, StateError> {
        if let Some(known) = self.cache.get(session_id) {
            return Ok(known);
        }
        let since = self.cache.epoch();
        let read = tokio::time::timeout(budget, self.read_strict(session_id)).await;
        let known = match read {
            Ok(Ok(Some(settings))) => Known::Stored(SessionSettings::new(settings)),
            Ok(Ok(None)) => Known::Absent,
            Ok(Err(err)) => return Err(err),
            Err(_) => {
                return Err(StateError::Call(CallError {
                    function_id: "state::get".into(),
                    code: ErrorCode::Timeout,
                    message: format!("no answer within {} ms", budget.as_millis()),
                }))
            }
        };
        self.cache.fill(session_id, known.clone(), since);
        Ok(known)
    }

    /// How many sessions the cache holds.
    pub(crate) fn cached_len(&self) -> usize {
        self.cache.len()
    }

    async fn lock(&self, session_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        session_id.hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    /// Strict read of the stored record (`None` when nothing is stored).
    async fn read_strict(&self, session_id: &str) -> Result<Option<ApprovalSettings>, StateError> {
        let value = self.engine.state_get(&Scope::SETTINGS, session_id).await?;
        if value.is_null() {
            return Ok(None);
        }
        serde_json::from_value::<ApprovalSettings>(value)
            .map(Some)
            .map_err(|source| StateError::Unreadable {
                what: format!("settings of session {session_id}"),
                source,
            })
    }

    /// `get-settings`: the stored record, or the current defaults. Never writes.
    pub(crate) async fn get(
        &self,
        session_id: &str,
    ) -> Result<(ApprovalSettings, SettingsSource), ApprovalError> {
        match self.read_strict(session_id).await? {
            Some(settings) => Ok((settings, SettingsSource::Stored)),
            None => Ok((
                self.config.load().default_settings.clone(),
                SettingsSource::Defaults,
            )),
        }
    }

    /// Applies `change` to the session's settings: a strict read, lazy
    /// seeding from the current defaults (seed entries stamped now), one
    /// whole-record write, then the cache. Serialized per session.
    pub(crate) async fn mutate(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut ApprovalSettings, u64),
    ) -> Result<ApprovalSettings, ApprovalError> {
        let _serial = self.lock(session_id).await;
        let now = crate::time::now_ms();
        let mut settings = match self.read_strict(session_id).await? {
            Some(settings) => settings,
            None => {
                let snapshot = self.config.load();
                default_settings(&snapshot.config, &snapshot.rules, now)
            }
        };
        change(&mut settings, now);
        let stored = StoredSettings {
            session_id: session_id.to_string(),
            settings: settings.clone(),
        };
        let value = serde_json::to_value(&stored).map_err(StateError::Encode)?;
        self.engine
            .state_set(&Scope::SETTINGS, session_id, value)
            .await?;
        self.cache.put(
            session_id,
            Known::Stored(SessionSettings::new(settings.clone())),
        );
        Ok(settings)
    }

    /// `clear-settings` (and session deletion): deletes the record; says
    /// whether one existed.
    pub(crate) async fn clear(&self, session_id: &str) -> Result<bool, ApprovalError> {
        let _serial = self.lock(session_id).await;
        let old = self
            .engine
            .state_delete(&Scope::SETTINGS, session_id)
            .await?;
        self.cache.put(session_id, Known::Absent);
        Ok(!old.is_null())
    }

    /// Follows a write made elsewhere (a `state` trigger event): a session the
    /// cache holds is read again; one whose read fails is forgotten, so its
    /// next call reads it (and is refused if that read fails too).
    pub(crate) async fn refresh(&self, session_id: &str) {
        let _serial = self.lock(session_id).await;
        let held = self.cache.contains(session_id);
        // Forget first: a cold read in flight, or a re-read that fails, must
        // not leave what was known before the write.
        self.cache.invalidate(session_id);
        if !held {
            return;
        }
        let since = self.cache.epoch();
        match self.read_strict(session_id).await {
            Ok(Some(settings)) => {
                self.cache.fill(
                    session_id,
                    Known::Stored(SessionSettings::new(settings)),
                    since,
                );
            }
            Ok(None) => {
                self.cache.fill(session_id, Known::Absent, since);
            }
            Err(err) => {
                tracing::warn!(session_id, error = %err, "settings not re-read after a write elsewhere; the session is read again on its next call");
            }
        }
    }
}

/// Extracts the session id (the key) from a `state` trigger event payload.
pub(crate) fn event_key(payload: &Value) -> Option<&str> {
    if payload.get("scope").and_then(Value::as_str) != Some(Scope::SETTINGS.as_str()) {
        return None;
    }
    payload.get("key").and_then(Value::as_str)
}
