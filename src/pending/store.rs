//! The pending store: `approval_pending` in state is the source of truth; the
//! in-memory [`PendingIndex`] serves every read and purge and is rebuilt from
//! `state::list` at boot.
//!
//! All writes of one key are serialized by a striped async lock, so a hold,
//! a resolve's removal and a purge of the same record never interleave. No
//! lock is held across a harness call (a released call may be held again by
//! the grant watch while its resolve is still in flight).
//!
//! # The emit gate
//!
//! [`PendingStore::settle`] is the only way a record leaves. Under the key's
//! lock it swaps the stored value for `null` (`state::set` returns the old
//! value atomically), removes the record from the index, deletes the `null`
//! tombstone, and only then reports the record as settled — so exactly one
//! caller emits `approval::pending-resolved` for it, whatever races.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::Value;

use crate::client::{CallError, Sibling};
use crate::pending::index::{ListPage, ListQuery, PendingIndex};
use crate::pending::record::{PendingRecord, RecordKey};

/// The state scope of held calls.
pub const PENDING_SCOPE: &str = "approval_pending";
const STRIPES: usize = 256;

/// The state key of a record: `<session_id>/<function_call_id>`.
pub fn state_key(session_id: &str, function_call_id: &str) -> String {
    format!("{session_id}/{function_call_id}")
}

/// A resolve in flight for one record.
#[derive(Debug)]
struct Resolving {
    record: Arc<PendingRecord>,
    /// Another record was written under the same key while the resolve ran.
    superseded: bool,
}

/// How a hold write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The record is new: announce it.
    New,
    /// A concurrent writer had already stored a record under the key: say
    /// nothing.
    DuplicateWon,
}

/// The pending store.
pub struct PendingStore {
    sibling: Sibling,
    index: Mutex<PendingIndex>,
    stripes: Vec<tokio::sync::Mutex<()>>,
    resolving: DashMap<RecordKey, Resolving>,
}

impl PendingStore {
    /// An empty store.
    pub fn new(sibling: Sibling) -> PendingStore {
        PendingStore {
            sibling,
            index: Mutex::new(PendingIndex::new()),
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            resolving: DashMap::new(),
        }
    }

    fn with_index<R>(&self, f: impl FnOnce(&mut PendingIndex) -> R) -> R {
        // The std mutex is held only for in-memory work, never across an await.
        let mut guard = match self.index.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// The lock serializing writes of one key.
    pub async fn lock(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        (session_id, function_call_id).hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    /// Rebuilds the index from `state::list`. Tombstones and unreadable
    /// values are skipped. Returns the number of records loaded.
    pub async fn load(&self) -> Result<usize, CallError> {
        let values = self.sibling.state_list(PENDING_SCOPE).await?;
        let records: Vec<PendingRecord> = values
            .into_iter()
            .filter(|v| !v.is_null())
            .filter_map(|v| serde_json::from_value::<PendingRecord>(v).ok())
            .collect();
        let n = records.len();
        self.with_index(|index| {
            for record in records {
                index.insert(record);
            }
        });
        Ok(n)
    }

    /// The live record under a key.
    pub fn get(&self, session_id: &str, function_call_id: &str) -> Option<Arc<PendingRecord>> {
        self.with_index(|index| index.get(session_id, function_call_id))
    }

    /// A page of the inbox.
    pub fn list(&self, query: &ListQuery<'_>) -> ListPage {
        self.with_index(|index| index.list(query))
    }

    /// How many records are held.
    pub fn len(&self) -> usize {
        self.with_index(|index| index.len())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys of a turn's records.
    pub fn keys_of_turn(&self, turn_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_turn(turn_id))
    }

    /// The keys of a session's records.
    pub fn keys_of_session(&self, session_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_session(session_id))
    }

    /// Writes a record durably, then indexes it. Call with the key's lock
    /// held. Replacing a record whose resolve is in flight marks that
    /// resolve's record as superseded (it still gets its event).
    pub async fn write(&self, record: PendingRecord) -> Result<Written, CallError> {
        let key = state_key(&record.session_id, &record.function_call_id);
        let value = serde_json::to_value(&record).map_err(|e| CallError {
            function_id: "state::set".into(),
            code: "serialization".into(),
            message: e.to_string(),
        })?;
        let outcome = self.sibling.state_set(PENDING_SCOPE, &key, value).await?;
        let previous = self.with_index(|index| index.insert(record.clone()));
        if let Some(previous) = previous {
            if *previous != record {
                if let Some(mut resolving) = self.resolving.get_mut(&record.key()) {
                    if resolving.record == previous {
                        resolving.superseded = true;
                    }
                }
            }
        }
        Ok(if outcome.old_value.is_null() {
            Written::New
        } else {
            Written::DuplicateWon
        })
    }

    /// Marks a resolve of `record` as in flight. `false` when another resolve
    /// of the same key is already running (the caller answers `resolved:
    /// false`).
    pub fn begin_resolve(&self, record: &Arc<PendingRecord>) -> bool {
        match self.resolving.entry(record.key()) {
            dashmap::mapref::entry::Entry::Occupied(_) => false,
            dashmap::mapref::entry::Entry::Vacant(slot) => {
                slot.insert(Resolving {
                    record: record.clone(),
                    superseded: false,
                });
                true
            }
        }
    }

    /// Whether a resolve of exactly this record is in flight.
    pub fn is_resolving(&self, record: &PendingRecord) -> bool {
        self.resolving
            .get(&record.key())
            .map(|r| *r.record == *record)
            .unwrap_or(false)
    }

    /// Ends a resolve without a decision (the harness failed): the record stays.
    pub fn abandon_resolve(&self, key: &RecordKey) {
        self.resolving.remove(key);
    }

    /// Ends a resolve whose decision the harness took: removes the decided
    /// record if it is still the one under the key. Returns whether this
    /// resolve settled it (and so must emit `pending-resolved`): true when it
    /// removed it, or when a follow-up record replaced it meanwhile (the
    /// follow-up survives); false when a purge got there first.
    pub async fn finish_resolve(&self, record: &Arc<PendingRecord>) -> Result<bool, CallError> {
        let key = record.key();
        let _lock = self.lock(&key.0, &key.1).await;
        let superseded = self
            .resolving
            .get(&key)
            .map(|r| r.superseded)
            .unwrap_or(false);
        let result = match self.get(&key.0, &key.1) {
            Some(current) if current == *record => self.settle_locked(record).await,
            Some(_) => Ok(superseded),
            None => Ok(superseded),
        };
        if result.is_ok() {
            self.resolving.remove(&key);
        }
        result
    }

    /// Settles (removes) the record under a key, if it is `expected` (or any
    /// record when `expected` is `None`). Returns the removed record: its
    /// caller emits `pending-resolved`. Takes the key's lock.
    pub async fn settle(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Result<Option<Arc<PendingRecord>>, CallError> {
        let _lock = self.lock(session_id, function_call_id).await;
        let Some(current) = self.get(session_id, function_call_id) else {
            return Ok(None);
        };
        if self.settle_locked(&current).await? {
            Ok(Some(current))
        } else {
            Ok(None)
        }
    }

    /// The emit gate proper; the key's lock is held. A state failure leaves
    /// the record in place (a later event retries).
    async fn settle_locked(&self, record: &Arc<PendingRecord>) -> Result<bool, CallError> {
        let key = state_key(&record.session_id, &record.function_call_id);
        self.sibling
            .state_set(PENDING_SCOPE, &key, Value::Null)
            .await?;
        let removed = self.with_index(|index| index.remove_if_same(record));
        if let Err(err) = self.sibling.state_delete(PENDING_SCOPE, &key).await {
            tracing::warn!(key, error = %err, "tombstone not deleted; it is skipped at load");
        }
        Ok(removed)
    }
}
