//! The settings store: `approval_settings` in state is the source of truth;
//! an in-memory view of every stored record lets the gate decide with zero
//! engine round trips.
//!
//! What keeps the view true:
//! * it is loaded from `state::list` at boot (records carry their `session_id`);
//! * every mutation made here writes through (state first, then the view);
//! * writes made by anything else to the `approval_settings` scope arrive
//!   through a `state` trigger binding, and each one makes the view re-read
//!   that key ([`SettingsStore::refresh`]).
//!
//! Mutations of one session are serialized by a per-session async lock, so
//! two grants in flight at once both survive.

use std::sync::Arc;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::ApprovalSettings;
use crate::config::{default_settings, ConfigCell};
use crate::engine::{CallError, Engine};
use crate::error::{is_valid_id, ApprovalError, StateError};
use crate::policy::CompiledSettings;

/// The state scope of per-session settings.
pub(crate) const SETTINGS_SCOPE: &str = "approval_settings";

/// A stored settings record: the contract's `ApprovalSettings` plus the
/// session id, so the view can be rebuilt from `state::list` (values only).
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

/// The settings store.
pub(crate) struct SettingsStore {
    engine: Engine,
    config: Arc<ConfigCell>,
    view: DashMap<String, Arc<SessionSettings>>,
    locks: DashMap<String, Arc<tokio::sync::Mutex<()>>>,
}

impl SettingsStore {
    /// An empty store.
    pub(crate) fn new(engine: Engine, config: Arc<ConfigCell>) -> SettingsStore {
        SettingsStore {
            engine,
            config,
            view: DashMap::new(),
            locks: DashMap::new(),
        }
    }

    /// Loads every stored record into the view. A failure leaves the view
    /// empty (defaults), which never allows more than the operator configured.
    pub(crate) async fn load(&self) -> Result<usize, CallError> {
        let values = self.engine.state_list(SETTINGS_SCOPE).await?;
        let mut loaded = 0;
        for value in values {
            if let Ok(stored) = serde_json::from_value::<StoredSettings>(value) {
                if is_valid_id(&stored.session_id) {
                    self.view.insert(
                        stored.session_id.clone(),
                        SessionSettings::new(stored.settings),
                    );
                    loaded += 1;
                }
            }
        }
        Ok(loaded)
    }

    /// The gate's read: the stored settings from the view, else `None`
    /// (the caller uses the snapshot's defaults). No engine round trip.
    pub(crate) fn cached(&self, session_id: &str) -> Option<Arc<SessionSettings>> {
        self.view.get(session_id).map(|e| e.value().clone())
    }

    fn lock_of(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .entry(session_id.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
            .clone()
    }

    /// Strict read of the stored record (`None` when nothing is stored).
    async fn read_strict(
        &self,
        session_id: &str,
    ) -> Result<Option<ApprovalSettings>, ApprovalError> {
        let value = self.engine.state_get(SETTINGS_SCOPE, session_id).await?;
        if value.is_null() {
            return Ok(None);
        }
        serde_json::from_value::<ApprovalSettings>(value)
            .map(Some)
            .map_err(|source| {
                StateError::Unreadable {
                    what: format!("settings of session {session_id}"),
                    source,
                }
                .into()
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
    /// whole-record write, then the view. Serialized per session.
    pub(crate) async fn mutate(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut ApprovalSettings, u64),
    ) -> Result<ApprovalSettings, ApprovalError> {
        let lock = self.lock_of(session_id);
        let _guard = lock.lock().await;
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
            .state_set(SETTINGS_SCOPE, session_id, value)
            .await?;
        self.view.insert(
            session_id.to_string(),
            SessionSettings::new(settings.clone()),
        );
        Ok(settings)
    }

    /// `clear-settings` (and session deletion): deletes the record; says
    /// whether one existed.
    pub(crate) async fn clear(&self, session_id: &str) -> Result<bool, ApprovalError> {
        let lock = self.lock_of(session_id);
        let existed = {
            let _guard = lock.lock().await;
            let old = self.engine.state_delete(SETTINGS_SCOPE, session_id).await?;
            self.view.remove(session_id);
            !old.is_null()
        };
        self.locks.remove(session_id);
        Ok(existed)
    }

    /// Re-reads one key after a write made elsewhere (a `state` trigger
    /// event), so the view follows the store. A failed read drops the entry:
    /// defaults never allow more than the operator configured.
    pub(crate) async fn refresh(&self, session_id: &str) {
        let lock = self.lock_of(session_id);
        let _guard = lock.lock().await;
        match self.read_strict(session_id).await {
            Ok(Some(settings)) => {
                self.view
                    .insert(session_id.to_string(), SessionSettings::new(settings));
            }
            Ok(None) => {
                self.view.remove(session_id);
            }
            Err(err) => {
                tracing::warn!(session_id, error = %err, "settings refresh failed; using defaults for the session");
                self.view.remove(session_id);
            }
        }
    }
}

/// Extracts the session id (the key) from a `state` trigger event payload.
pub(crate) fn event_key(payload: &Value) -> Option<&str> {
    if payload.get("scope").and_then(Value::as_str) != Some(SETTINGS_SCOPE) {
        return None;
    }
    payload.get("key").and_then(Value::as_str)
}
