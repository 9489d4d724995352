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
//! grants in flight at once both survive. The gate's uses of a uses-bounded
//! grant are mutations too ([`SettingsStore::spend`]): serialized with the
//! rest, so concurrent calls never spend more uses than the grant has.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cache::Cache;
use crate::config::{default_settings, ConfigCell};
use crate::engine::{CallError, Engine, ErrorCode, Scope};
use crate::error::{ApprovalError, StateError};
use crate::policy::CompiledSettings;
use crate::terms::{ApprovalSettings, Entry, GrantList};

/// Sessions whose settings the worker keeps in memory at most. Idle ones are
/// evicted and read again on their next call.
pub(crate) const CACHE_CAPACITY: usize = 50_000;

/// Serializes mutations of one session (stripes by key hash).
const STRIPES: usize = 256;

/// Writes a use of a grant may take when someone else keeps writing the
/// record at the same time; past them the grant does not apply.
const SPEND_ATTEMPTS: usize = 3;

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
        parse_stored(session_id, value)
    }

    /// `get-settings`: the stored record, or the current defaults, each as a
    /// console sees it (with the seeds of the rules in force). Never writes.
    pub(crate) async fn get(
        &self,
        session_id: &str,
    ) -> Result<(ApprovalSettings, SettingsSource), ApprovalError> {
        let stored = self.read_strict(session_id).await?;
        let snapshot = self.config.load();
        let seeds = snapshot.rules.auto_seed_globs();
        match stored {
            Some(settings) => Ok((settings.with_seeds(&seeds), SettingsSource::Stored)),
            None => Ok((
                snapshot.default_settings.with_seeds(&seeds),
                SettingsSource::Defaults,
            )),
        }
    }

    /// A record as a console sees it: with the seeds of the rules in force.
    pub(crate) fn shown(&self, settings: &ApprovalSettings) -> ApprovalSettings {
        settings.with_seeds(&self.config.load().rules.auto_seed_globs())
    }

    /// The seeds of the rules in force (what `remove-always-allow` may
    /// suppress).
    pub(crate) fn seeds(&self) -> Vec<String> {
        self.config.load().rules.auto_seed_globs()
    }

    /// Applies `change` to the session's settings: a strict read, lazy
    /// seeding from the current defaults, one whole-record write, then the
    /// cache. Serialized per session. Answers the record as stored: a
    /// human's entries, never a seed (seeds come from the rules in force).
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
        settings.drop_seed_entries();
        settings.prune(now);
        change(&mut settings, now);
        self.write(session_id, &settings).await?;
        self.cache.put(
            session_id,
            Known::Stored(SessionSettings::new(settings.clone())),
        );
        Ok(settings)
    }

    /// Writes the whole record; answers what it replaced.
    async fn write(
        &self,
        session_id: &str,
        settings: &ApprovalSettings,
    ) -> Result<Value, StateError> {
        let stored = StoredSettings {
            session_id: session_id.to_string(),
            settings: settings.clone(),
        };
        let value = serde_json::to_value(&stored).map_err(StateError::Encode)?;
        let outcome = self
            .engine
            .state_set(&Scope::SETTINGS, session_id, value)
            .await?;
        Ok(outcome.old_value)
    }

    /// The gate's write-through of one use of a uses-bounded grant, before
    /// the call it allows continues: serialized with every other mutation of
    /// the session, so concurrent calls never spend more uses than the
    /// grant has. Answers whether a use was spent; `false` (no write) when
    /// the grant is gone or has no use left.
    ///
    /// The record is the one the cache holds — every write the worker makes
    /// takes this lock and updates the cache — so a use costs one
    /// `state::set`; a session not in the cache is read first. `state::set`
    /// answers what it replaced: if that is not the record the use was
    /// applied to (a write made elsewhere, not yet followed), the use is
    /// applied again on that record and written again, so the other write is
    /// kept. On any failure the cache forgets the session (the next call
    /// reads it) and the grant does not apply.
    pub(crate) async fn spend(
        &self,
        session_id: &str,
        list: GrantList,
        grant: &Entry,
    ) -> Result<bool, StateError> {
        let _serial = self.lock(session_id).await;
        let now = crate::time::now_ms();
        let mut base = match self.cache.get(session_id) {
            Some(Known::Stored(stored)) => Some(stored.settings.clone()),
            Some(Known::Absent) => None,
            None => self.read_strict(session_id).await?,
        };
        for _ in 0..SPEND_ATTEMPTS {
            let Some(current) = base.take() else {
                return Ok(false);
            };
            let mut next = current.clone();
            if !next.spend(list, grant, now) {
                return Ok(false);
            }
            next.prune(now);
            let replaced = match self.write(session_id, &next).await {
                Ok(replaced) => replaced,
                Err(err) => {
                    self.cache.invalidate(session_id);
                    return Err(err);
                }
            };
            let replaced = match parse_stored(session_id, replaced) {
                Ok(replaced) => replaced,
                Err(err) => {
                    self.cache.invalidate(session_id);
                    return Err(err);
                }
            };
            match replaced {
                Some(theirs) if theirs == current => {
                    self.cache
                        .put(session_id, Known::Stored(SessionSettings::new(next)));
                    return Ok(true);
                }
                Some(theirs) => base = Some(theirs),
                None => {
                    // The record was deleted meanwhile: the use must not
                    // bring it back.
                    self.cache.invalidate(session_id);
                    self.engine
                        .state_delete(&Scope::SETTINGS, session_id)
                        .await?;
                    return Ok(false);
                }
            }
        }
        self.cache.invalidate(session_id);
        Ok(false)
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

    /// Follows a write (a `state` trigger event): a session the cache holds
    /// is read again; one whose read fails is forgotten, so its next call
    /// reads it (and is refused if that read fails too). An event whose
    /// `new_value` is what the cache already holds — the worker's own write,
    /// or a grant's use — needs no read.
    pub(crate) async fn refresh(&self, session_id: &str, new_value: Option<&Value>) {
        let _serial = self.lock(session_id).await;
        if let (Some(known), Some(new_value)) = (self.cache.get(session_id), new_value) {
            let current = match (&known, parse_stored(session_id, new_value.clone())) {
                (Known::Stored(held), Ok(Some(new))) => held.settings == new,
                (Known::Absent, Ok(None)) => true,
                _ => false,
            };
            if current {
                return;
            }
        }
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

/// A stored settings value (`null`: nothing stored). Seed entries stored
/// before seeds were derived are dropped here: ignored by every reader, and
/// left out of the record's next write.
fn parse_stored(session_id: &str, value: Value) -> Result<Option<ApprovalSettings>, StateError> {
    if value.is_null() {
        return Ok(None);
    }
    serde_json::from_value::<ApprovalSettings>(value)
        .map(|mut settings| {
            settings.drop_seed_entries();
            Some(settings)
        })
        .map_err(|source| StateError::Unreadable {
            what: format!("settings of session {session_id}"),
            source,
        })
}

/// Extracts the session id (the key) from a `state` trigger event payload.
pub(crate) fn event_key(payload: &Value) -> Option<&str> {
    if payload.get("scope").and_then(Value::as_str) != Some(Scope::SETTINGS.as_str()) {
        return None;
    }
    payload.get("key").and_then(Value::as_str)
}
