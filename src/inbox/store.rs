//! The pending store: state (the `approval_pending.NN` scopes) is the source
//! of truth; the in-memory [`PendingIndex`] serves every read and purge and is
//! rebuilt from `state::list` at boot (`architecture/contract.md` § Storage).
//!
//! The store is also the one place that announces records: it emits
//! `approval::pending-created` when a hold is written,
//! `approval::pending-escalated` when the timer escalates one, and
//! `approval::pending-resolved` when a record leaves, whoever made it leave.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::Value;

use super::events::{Events, Outcome, PendingResolved};
use super::index::{ListPage, ListQuery, PendingIndex};
use super::record::{PendingRecord, RecordKey, RecordKind};
use super::removed::{Removal, Removed};
use crate::config::ConfigCell;
use crate::engine::{CallError, Engine, Scope, PENDING_BUCKETS};

/// Why a write or a removal did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The state call failed.
    #[error(transparent)]
    State(#[from] CallError),
    /// The record could not be encoded as JSON.
    #[error("cannot encode the record: {0}")]
    Encode(#[from] serde_json::Error),
}

impl StoreError {
    /// A short code for logs and deny reasons (`timeout`, `encode`, ...).
    pub(crate) fn code(&self) -> &str {
        match self {
            StoreError::State(err) => err.code.as_str(),
            StoreError::Encode(_) => "encode",
        }
    }
}

/// Buckets listed at once at boot: each reply exists as parsed JSON (~4.7 KB
/// per record) until it is indexed, so more in flight is a faster boot and
/// a higher resident set (architecture/internals.md).
pub const LOAD_CONCURRENCY: usize = 4;
const STRIPES: usize = 256;

/// The state key of a record: `<session_id>/<function_call_id>`.
pub fn state_key(session_id: &str, function_call_id: &str) -> String {
    format!("{session_id}/{function_call_id}")
}

/// FNV-1a: a hash that is the same in every process and Rust version (the
/// bucket of a record must not change across restarts).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The bucket scope holding a record. Held calls are spread over
/// `approval_pending.00` … `approval_pending.63`: `state::list` returns a
/// whole scope in one message and the engine caps a message at 64 MiB, so
/// one scope would stop boot from rebuilding the index long before 100k
/// held calls.
fn bucket(session_id: &str, function_call_id: &str) -> Scope {
    let hash = fnv1a(state_key(session_id, function_call_id).as_bytes());
    Scope::pending_bucket((hash % u64::from(PENDING_BUCKETS)) as u32)
}

/// The name of the bucket scope holding a record.
pub fn bucket_scope(session_id: &str, function_call_id: &str) -> String {
    bucket(session_id, function_call_id).to_string()
}

/// Every scope that may hold records (the buckets, then the first layout's
/// single scope).
pub fn all_scopes() -> Vec<String> {
    (0..PENDING_BUCKETS)
        .map(Scope::pending_bucket)
        .chain(std::iter::once(Scope::PENDING_LEGACY))
        .map(|scope| scope.to_string())
        .collect()
}

/// The `pending-resolved` reason of a record a new one replaced outside any
/// resolve (a function hold that became a folder prompt).
const REPLACED: &str = "replaced";

/// A resolve in flight for one record.
#[derive(Debug)]
struct Resolving {
    record: Arc<PendingRecord>,
    /// Another record was written under the same key while the resolve ran.
    superseded: bool,
}

/// How a hold write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// The record is new and was announced (`pending-created`). A different
    /// record it replaced with no resolve in flight for it was announced as
    /// aborted (one replaced while its resolve runs is announced by that
    /// resolve).
    New,
    /// State already held a record under the key that the index did not
    /// know (a concurrent duplicate won): nothing was announced.
    DuplicateWon,
}

/// What [`PendingStore::claim`] found.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The record, now marked as being resolved by the caller.
    Claimed(Arc<PendingRecord>),
    /// No record under the key.
    Absent,
    /// A record, but not the expected revision (a newer hold replaced it).
    Stale,
    /// Another decision on the record is in flight.
    InFlight,
}

/// The pending store.
///
/// Two kinds of lock, each for one job:
/// * `index`, a std mutex, guards the in-memory index; it is held only for
///   in-memory work, never across an `.await`;
/// * `stripes`, async mutexes striped by key, serialize every write of one
///   key (hold, resolve's removal, purge) across the state calls they make.
///   No stripe is held across a harness call: a released call may be held
///   again by the grant watch while its resolve is still in flight.
pub(crate) struct PendingStore {
    engine: Engine,
    events: Arc<Events>,
    index: Mutex<PendingIndex>,
    stripes: Vec<tokio::sync::Mutex<()>>,
    resolving: DashMap<RecordKey, Resolving>,
    /// How recent records left (what a link to one says); in-memory work
    /// only, like `index`.
    removed: Mutex<Removed>,
    /// Wakes the deadline timer when a hold with a nearer deadline than
    /// the one it sleeps towards is written.
    timer_wake: tokio::sync::Notify,
    /// The deadline the timer sleeps towards (`u64::MAX` while it works
    /// out the next one: every new deadline wakes it then).
    timer_armed: AtomicU64,
}

impl PendingStore {
    /// An empty store. `config` gives `pending-created` its `approval_url`.
    pub(crate) fn new(engine: Engine, config: Arc<ConfigCell>) -> PendingStore {
        PendingStore {
            events: Arc::new(Events::new(engine.clone(), config)),
            engine,
            index: Mutex::new(PendingIndex::new()),
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            resolving: DashMap::new(),
            removed: Mutex::new(Removed::default()),
            timer_wake: tokio::sync::Notify::new(),
            timer_armed: AtomicU64::new(u64::MAX),
        }
    }

    /// How the revision `(session_id, function_call_id, pending_at)` left
    /// the inbox, if it left recently.
    pub(crate) fn removal(
        &self,
        session_id: &str,
        function_call_id: &str,
        pending_at: u64,
    ) -> Option<Removal> {
        let removed = match self.removed.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        removed
            .get(session_id, function_call_id, pending_at)
            .cloned()
    }

    /// Announces a record that left the inbox (`pending-resolved`) and
    /// remembers how it left.
    fn announce_resolved(&self, record: &PendingRecord, outcome: Outcome, reason: Option<String>) {
        {
            let mut removed = match self.removed.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            removed.remember(
                (
                    record.session_id.clone(),
                    record.function_call_id.clone(),
                    record.pending_at,
                ),
                Removal {
                    outcome,
                    reason: reason.clone(),
                },
            );
        }
        self.events
            .emit_resolved(PendingResolved::of(record, outcome, reason));
    }

    /// The trigger types the store announces through.
    pub(crate) fn events(&self) -> &Arc<Events> {
        &self.events
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
    pub(crate) async fn lock(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        (session_id, function_call_id).hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    /// Rebuilds the index from `state::list` of every bucket (a few at a
    /// time), then moves records of the legacy single scope into their
    /// bucket ([`read_buckets`](Self::read_buckets) then
    /// [`migrate_legacy`](Self::migrate_legacy)). Returns the number of
    /// records held.
    pub(crate) async fn load(&self) -> Result<usize, CallError> {
        self.read_buckets().await?;
        self.migrate_legacy().await?;
        Ok(self.len())
    }

    /// Fills the index from `state::list` of every bucket (a few at a time),
    /// reading only: boot runs it while the engine may still refuse the
    /// worker name. Tombstones and unreadable values are skipped. Returns the
    /// number of records held.
    ///
    /// Each bucket is indexed as soon as its reply arrives, so only the
    /// replies in flight exist as JSON values at once. A parsed value costs
    /// about 4.7 KB per ~1 KB record (`cargo bench --bench e2e`); holding all
    /// 64 replies until the last arrived kept every record twice and set the
    /// worker's resident peak at 100k held calls.
    pub(crate) async fn read_buckets(&self) -> Result<usize, CallError> {
        use futures_util::stream::{self, StreamExt};
        let mut replies = stream::iter((0..PENDING_BUCKETS).map(Scope::pending_bucket))
            .map(|scope| async move { self.engine.state_list(&scope).await })
            .buffer_unordered(LOAD_CONCURRENCY);
        while let Some(values) = replies.next().await {
            let records = values?
                .into_iter()
                .filter(|v| !v.is_null())
                .filter_map(|v| serde_json::from_value::<PendingRecord>(v).ok());
            self.with_index(|index| {
                for record in records {
                    index.insert(record);
                }
            });
        }
        Ok(self.len())
    }

    /// Moves records of the legacy scope into their buckets; returns how
    /// many moved.
    pub(crate) async fn migrate_legacy(&self) -> Result<usize, CallError> {
        let mut moved = 0;
        for value in self.engine.state_list(&Scope::PENDING_LEGACY).await? {
            let Ok(record) = serde_json::from_value::<PendingRecord>(value) else {
                continue;
            };
            let key = state_key(&record.session_id, &record.function_call_id);
            if self
                .get(&record.session_id, &record.function_call_id)
                .is_none()
            {
                let scope = bucket(&record.session_id, &record.function_call_id);
                let value = serde_json::to_value(&record).unwrap_or(Value::Null);
                self.engine.state_set(&scope, &key, value).await?;
                self.with_index(|index| index.insert(record));
                moved += 1;
            }
            self.engine
                .state_delete(&Scope::PENDING_LEGACY, &key)
                .await?;
        }
        Ok(moved)
    }

    /// The live record under a key.
    pub(crate) fn get(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<Arc<PendingRecord>> {
        self.with_index(|index| index.get(session_id, function_call_id))
    }

    /// A page of the inbox.
    pub(crate) fn list(&self, query: &ListQuery<'_>) -> ListPage {
        self.with_index(|index| index.list(query))
    }

    /// How many records are held.
    pub(crate) fn len(&self) -> usize {
        self.with_index(|index| index.len())
    }

    /// The keys of a turn's records.
    pub(crate) fn keys_of_turn(&self, turn_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_turn(turn_id))
    }

    /// The keys of a session's records.
    pub(crate) fn keys_of_session(&self, session_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_session(session_id))
    }

    /// Writes a record durably, then indexes it. Call with the key's lock
    /// held. Replacing a record whose resolve is in flight marks that
    /// resolve's record as superseded (it still gets its event).
    pub(crate) async fn write(&self, record: PendingRecord) -> Result<Written, StoreError> {
        let key = state_key(&record.session_id, &record.function_call_id);
        let scope = bucket(&record.session_id, &record.function_call_id);
        let value = serde_json::to_value(&record)?;
        let outcome = self.engine.state_set(&scope, &key, value).await?;
        let previous = self.with_index(|index| index.insert(record.clone()));
        if let Some(due) = record.next_due() {
            self.deadline_added(due);
        }
        let written = match previous {
            // The index knew the old record: this is a replacement, not a
            // lost race.
            Some(previous) => {
                if !previous.is_same_hold(&record) {
                    match self.resolving.get_mut(&record.key()) {
                        Some(mut resolving) if resolving.record.is_same_hold(&previous) => {
                            resolving.superseded = true
                        }
                        _ => self.announce_resolved(
                            &previous,
                            Outcome::Aborted,
                            Some(REPLACED.to_string()),
                        ),
                    }
                }
                Written::New
            }
            None if outcome.old_value.is_null() => Written::New,
            None => Written::DuplicateWon,
        };
        if written == Written::New {
            self.events.emit_created(&record);
        }
        Ok(written)
    }

    /// Claims the record under `(session_id, function_call_id)` for a
    /// decision: marks its resolve as in flight, as [`begin_resolve`] does.
    /// With `expected`, the record must still be that revision
    /// `(pending_at, kind)`. The check and the claim happen under the key's
    /// lock, the one every write and removal of the key takes, so no new
    /// hold can slip in between them: a claimed record is exactly the
    /// revision the decider saw.
    ///
    /// [`begin_resolve`]: Self::begin_resolve
    pub(crate) async fn claim(
        &self,
        session_id: &str,
        function_call_id: &str,
        expected: Option<(u64, RecordKind)>,
    ) -> Claim {
        let _lock = self.lock(session_id, function_call_id).await;
        let Some(record) = self.get(session_id, function_call_id) else {
            return Claim::Absent;
        };
        if let Some((pending_at, kind)) = expected {
            if record.pending_at != pending_at || record.kind != kind {
                return Claim::Stale;
            }
        }
        if self.begin_resolve(&record) {
            Claim::Claimed(record)
        } else {
            Claim::InFlight
        }
    }

    /// Marks a resolve of `record` as in flight: a human's decision or the
    /// timer's expiry, whichever claims the record first. `false` when
    /// another resolve of the same key is already running, or `record` is no
    /// longer the hold under its key (the caller answers `resolved: false`,
    /// or the timer lets it be).
    pub(crate) fn begin_resolve(&self, record: &Arc<PendingRecord>) -> bool {
        match self.resolving.entry(record.key()) {
            dashmap::mapref::entry::Entry::Occupied(_) => false,
            dashmap::mapref::entry::Entry::Vacant(slot) => {
                let current = self
                    .get(&record.session_id, &record.function_call_id)
                    .is_some_and(|current| current.is_same_hold(record));
                if current {
                    slot.insert(Resolving {
                        record: record.clone(),
                        superseded: false,
                    });
                }
                current
            }
        }
    }

    /// Whether a resolve of exactly this record is in flight.
    pub(crate) fn is_resolving(&self, record: &PendingRecord) -> bool {
        self.resolving
            .get(&record.key())
            .map(|r| r.record.is_same_hold(record))
            .unwrap_or(false)
    }

    /// Ends a resolve without a decision (the harness failed): the record stays.
    pub(crate) fn abandon_resolve(&self, key: &RecordKey) {
        self.resolving.remove(key);
    }

    /// Ends a resolve whose decision the harness took: removes the decided
    /// record if it is still the one under the key. Returns whether this
    /// resolve settled it (and so must emit `pending-resolved`): true when it
    /// removed it, or when a follow-up record replaced it meanwhile (the
    /// follow-up survives); false when a purge got there first.
    pub(crate) async fn finish_resolve(
        &self,
        record: &Arc<PendingRecord>,
        outcome: Outcome,
        reason: Option<String>,
    ) -> Result<bool, CallError> {
        let key = record.key();
        let _lock = self.lock(&key.0, &key.1).await;
        let superseded = self
            .resolving
            .get(&key)
            .map(|r| r.superseded)
            .unwrap_or(false);
        let result = match self.get(&key.0, &key.1) {
            Some(current) if current.is_same_hold(record) => self.settle_locked(record).await,
            Some(_) => Ok(superseded),
            None => Ok(superseded),
        };
        if let Ok(settled) = result {
            self.resolving.remove(&key);
            if settled {
                self.announce_resolved(record, outcome, reason);
            }
        }
        result
    }

    /// Settles (removes) whatever record is under a key (the purges) and
    /// announces it with `outcome`. Returns the removed record. Takes the
    /// key's lock.
    pub(crate) async fn settle(
        &self,
        session_id: &str,
        function_call_id: &str,
        outcome: Outcome,
        reason: &str,
    ) -> Result<Option<Arc<PendingRecord>>, CallError> {
        let _lock = self.lock(session_id, function_call_id).await;
        let Some(current) = self.get(session_id, function_call_id) else {
            return Ok(None);
        };
        if self.settle_locked(&current).await? {
            self.announce_resolved(&current, outcome, Some(reason.to_string()));
            Ok(Some(current))
        } else {
            Ok(None)
        }
    }

    /// Escalates a held record, once: under the key's lock, if `record` is
    /// still the hold under its key and was not escalated yet, its stored
    /// value gets `escalated_at` first — so a restarted worker never
    /// escalates it again — then the index, then
    /// `approval::pending-escalated` goes out. The record stays held.
    /// Returns whether it escalated; a state failure escalates nothing (the
    /// timer tries again).
    pub(crate) async fn escalate(
        &self,
        record: &PendingRecord,
        at: u64,
    ) -> Result<bool, StoreError> {
        let (sid, cid) = (&record.session_id, &record.function_call_id);
        let _lock = self.lock(sid, cid).await;
        let Some(current) = self.get(sid, cid) else {
            return Ok(false);
        };
        if !current.is_same_hold(record) || current.escalated_at.is_some() {
            return Ok(false);
        }
        let mut escalated = (*current).clone();
        escalated.escalated_at = Some(at);
        let value = serde_json::to_value(&escalated)?;
        self.engine
            .state_set(&bucket(sid, cid), &state_key(sid, cid), value)
            .await?;
        self.with_index(|index| index.insert(escalated.clone()));
        if let Some(due) = escalated.next_due() {
            self.deadline_added(due);
        }
        self.events.emit_escalated(&escalated);
        Ok(true)
    }

    /// Takes the record with the earliest deadline at or before `now` out
    /// of the index's deadline view, for the timer (it stays held).
    pub(crate) fn take_due(&self, now: u64) -> Option<Arc<PendingRecord>> {
        self.with_index(|index| index.take_due(now))
    }

    /// The earliest deadline the timer has not taken yet.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.with_index(|index| index.next_due())
    }

    /// Says which deadline the timer sleeps towards (`u64::MAX`: it is
    /// working one out, so every new deadline must wake it).
    pub(crate) fn arm_timer(&self, at: u64) {
        self.timer_armed.store(at, Ordering::SeqCst);
    }

    /// Resolves when a hold with a deadline nearer than the armed one was
    /// written since the last call.
    pub(crate) async fn deadline_written(&self) {
        self.timer_wake.notified().await;
    }

    /// Wakes the timer if `due` comes before what it sleeps towards. Called
    /// after the record is in the index, so the timer either saw it or is
    /// woken (a `Notify` keeps the wake-up until the timer waits).
    fn deadline_added(&self, due: u64) {
        if due < self.timer_armed.load(Ordering::SeqCst) {
            self.timer_wake.notify_one();
        }
    }

    /// Removes from state a record whose write did not finish in time (the
    /// hook gave up and answered without it; the harness never saw a hold).
    /// Only when the index knows no record under the key: an announced
    /// record leaves through the emit gate, never here. Call with the key's
    /// lock held. Best effort: a failure is logged.
    pub(crate) async fn discard(&self, session_id: &str, function_call_id: &str) {
        if self.get(session_id, function_call_id).is_some() {
            return;
        }
        let key = state_key(session_id, function_call_id);
        let scope = bucket(session_id, function_call_id);
        if let Err(err) = self.engine.state_delete(&scope, &key).await {
            tracing::warn!(key, error = %err, "an unannounced record was not removed; it is listed after a restart and resolving it reports not_held");
        }
    }

    /// The emit gate proper; the key's lock is held. A state failure leaves
    /// the record in place (a later event retries).
    async fn settle_locked(&self, record: &Arc<PendingRecord>) -> Result<bool, CallError> {
        let key = state_key(&record.session_id, &record.function_call_id);
        let scope = bucket(&record.session_id, &record.function_call_id);
        self.engine.state_set(&scope, &key, Value::Null).await?;
        let removed = self.with_index(|index| index.remove_if_same(record));
        if let Err(err) = self.engine.state_delete(&scope, &key).await {
            tracing::warn!(key, error = %err, "tombstone not deleted; it is skipped at load");
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_spread() {
        assert_eq!(bucket_scope("s_1", "c_1"), bucket_scope("s_1", "c_1"));
        // Pinned: a record's bucket must never move between versions.
        assert_eq!(fnv1a(b"s_1/c_1"), 15326720578296868152);
        assert_eq!(bucket_scope("s_1", "c_1"), "approval_pending.56");
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            seen.insert(bucket_scope("s", &format!("c{i}")));
        }
        assert_eq!(seen.len(), PENDING_BUCKETS as usize);
        assert_eq!(all_scopes().len(), PENDING_BUCKETS as usize + 1);
        assert!(all_scopes()
            .iter()
            .all(|s| s.starts_with("approval_pending")));
    }
}
