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
//! tombstone and the record's whole arguments (`approval_arguments`, contract
//! §21.6), and only then reports the record as settled — so exactly one
//! caller emits `approval::pending-resolved` for it, whatever races.
//!
//! Stored values that do not parse as records are kept, listed as
//! unreadable and removed only by a human's deny (§21.9).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::events::{Events, Outcome, PendingResolved};
use super::index::{ListPage, ListQuery, PendingIndex};
use super::record::{PendingRecord, RecordKey, RecordKind, ReleaseNote};
use super::removed::{Removal, Removed};
use super::unreadable::{UnreadableRecord, Unreadables};
use crate::config::ConfigCell;
use crate::engine::{CallError, Engine, Scope, PENDING_BUCKETS};
use crate::provenance::{DecidedBy, DecidedVia, DecisionLog, LogRecord};
use crate::redact::{Full, FULL_ARGUMENTS_CAP};

/// Why a write or a removal did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The state call failed.
    #[error(transparent)]
    State(#[from] CallError),
    /// The record could not be encoded as JSON.
    #[error("cannot encode the record: {0}")]
    Encode(#[from] serde_json::Error),
    /// A record was written through the lock of another key.
    #[error("a record was written through the lock of another key")]
    WrongKey,
}

impl StoreError {
    /// A short code for logs and deny reasons (`timeout`, `encode`, ...).
    pub(crate) fn code(&self) -> &str {
        match self {
            StoreError::State(err) => err.code.as_str(),
            StoreError::Encode(_) => "encode",
            StoreError::WrongKey => "wrong_key",
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
/// release (a function hold that became a folder prompt).
const REPLACED: &str = "replaced";

/// A release under way, in memory: which revision it carries, and whether
/// another record was written under its key meanwhile.
#[derive(Debug)]
struct Releasing {
    record: Arc<PendingRecord>,
    /// Another record was written under the same key while the release ran.
    superseded: bool,
    /// A [`Claim`] in this process carries it (false: its claim was dropped
    /// after the harness was asked, and the recovery may adopt it).
    owned: bool,
}

/// How a hold write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// The record is new and was announced (`pending-created`). A different
    /// record it replaced with no release under way was announced as
    /// aborted (one replaced while its release runs is announced by that
    /// release).
    New,
    /// State already held a record under the key that the index did not
    /// know (a concurrent duplicate won): nothing was announced.
    DuplicateWon,
}

/// What [`PendingStore::claim`] found.
#[derive(Debug)]
pub(crate) enum Take {
    /// The record is this caller's to release.
    Claimed(Claim),
    /// No record under the key.
    Absent,
    /// A record, but not the expected revision (a newer hold replaced it).
    Stale,
    /// Another decision on the record is under way.
    Releasing,
}

/// What a purge found under a key.
#[derive(Debug)]
pub(crate) enum Purged {
    /// The record left through the emit gate and was announced.
    Removed(Arc<PendingRecord>),
    /// Nothing under the key.
    Absent,
    /// A decision on the record is under way: its release settles it.
    Releasing,
}

/// The pending store.
///
/// Two kinds of lock, each for one job:
/// * `index`, a std mutex, guards the in-memory index; it is held only for
///   in-memory work, never across an `.await`;
/// * `stripes`, async mutexes striped by key, serialize every write of one
///   key (hold, claim, release's end, escalation, purge) across the state
///   calls they make; [`KeyLock`] is the only way to take one. No stripe is
///   held across a harness call: a released call may be held again by the
///   grant watch while its release is still waiting for the harness.
pub(crate) struct PendingStore {
    engine: Engine,
    events: Arc<Events>,
    index: Mutex<PendingIndex>,
    stripes: Vec<tokio::sync::Mutex<()>>,
    /// Releases under way (the in-memory half of a claim; the durable half
    /// is the record's `releasing` mark).
    releasing: DashMap<RecordKey, Releasing>,
    /// Releases whose owner went away after the harness was asked: the
    /// release path recovers them (`take_orphans`).
    orphans: tokio::sync::mpsc::UnboundedSender<RecordKey>,
    orphaned: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<RecordKey>>>,
    /// Where a dropped claim finishes its work.
    runtime: tokio::runtime::Handle,
    /// How recent records left (what a link to one says); in-memory work
    /// only, like `index`.
    removed: Mutex<Removed>,
    /// Wakes the deadline timer when a hold with a nearer deadline than
    /// the one it sleeps towards is written.
    timer_wake: tokio::sync::Notify,
    /// The deadline the timer sleeps towards (`u64::MAX` while it works
    /// out the next one: every new deadline wakes it then).
    timer_armed: AtomicU64,
    /// Stored values that do not parse as records (§21.9); in-memory work
    /// only, like `index`.
    unreadable: Mutex<Unreadables>,
    /// Where every announced removal is also logged (when configured).
    log: Arc<DecisionLog>,
}

impl PendingStore {
    /// An empty store. `config` gives `pending-created` its `approval_url`.
    pub(crate) fn new(engine: Engine, config: Arc<ConfigCell>) -> PendingStore {
        let (orphans, orphaned) = tokio::sync::mpsc::unbounded_channel();
        PendingStore {
            log: Arc::new(DecisionLog::new(config.clone())),
            events: Arc::new(Events::new(engine.clone(), config)),
            engine,
            index: Mutex::new(PendingIndex::new()),
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            releasing: DashMap::new(),
            orphans,
            orphaned: Mutex::new(Some(orphaned)),
            runtime: tokio::runtime::Handle::current(),
            removed: Mutex::new(Removed::default()),
            timer_wake: tokio::sync::Notify::new(),
            timer_armed: AtomicU64::new(u64::MAX),
            unreadable: Mutex::new(Unreadables::default()),
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
        let removed = crate::sync::lock(&self.removed);
        removed
            .get(session_id, function_call_id, pending_at)
            .cloned()
    }

    /// The decision log the store and the gate push records into.
    pub(crate) fn decision_log(&self) -> &Arc<DecisionLog> {
        &self.log
    }

    /// Announces a record that left the inbox (`pending-resolved`, and a
    /// decision log record) and remembers how it left.
    fn announce_resolved(
        &self,
        record: &PendingRecord,
        outcome: Outcome,
        reason: Option<String>,
        decided_by: DecidedBy,
    ) {
        {
            let mut removed = crate::sync::lock(&self.removed);
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
        self.log.push_now(|| LogRecord {
            decision: outcome.as_str().to_string(),
            // A deny's reason is a human's free text: never logged.
            rule_id: reason.clone().filter(|_| outcome != Outcome::Deny),
            decided_by: decided_by.clone(),
            session_id: record.session_id.clone(),
            function_call_id: record.function_call_id.clone(),
            function_id: record.function_id.clone(),
            at: crate::time::now_ms(),
        });
        self.events
            .emit_resolved(PendingResolved::of(record, outcome, reason, decided_by));
    }

    /// The trigger types the store announces through.
    pub(crate) fn events(&self) -> &Arc<Events> {
        &self.events
    }

    fn with_index<R>(&self, f: impl FnOnce(&mut PendingIndex) -> R) -> R {
        // The std mutex is held only for in-memory work, never across an await.
        let mut guard = crate::sync::lock(&self.index);
        f(&mut guard)
    }

    /// The lock of one key: every write and removal of the key goes
    /// through the guard it returns, so none can happen without it.
    pub(crate) async fn lock(&self, session_id: &str, function_call_id: &str) -> KeyLock<'_> {
        let mut h = DefaultHasher::new();
        (session_id, function_call_id).hash(&mut h);
        let guard = self.stripes[(h.finish() as usize) % STRIPES].lock().await;
        KeyLock {
            store: self,
            session_id: session_id.to_string(),
            function_call_id: function_call_id.to_string(),
            _guard: guard,
        }
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
            .map(|scope| async move {
                let values = self.engine.state_list(&scope).await;
                (scope, values)
            })
            .buffer_unordered(LOAD_CONCURRENCY);
        while let Some((scope, values)) = replies.next().await {
            let mut records = Vec::new();
            for value in values? {
                if let Some(record) = self.parse_stored(&scope, value) {
                    records.push(record);
                }
            }
            self.with_index(|index| {
                for record in records {
                    index.insert(record);
                }
            });
        }
        Ok(self.len())
    }

    /// A stored value of `scope` as a record; a tombstone is skipped, and a
    /// value that does not parse is kept as unreadable (§21.9): logged at
    /// ERROR with its key, counted, listed, removed only by a human's deny.
    fn parse_stored(&self, scope: &Scope, value: Value) -> Option<PendingRecord> {
        if value.is_null() {
            return None;
        }
        match PendingRecord::deserialize(&value) {
            Ok(record) => Some(record),
            Err(err) => {
                let entry = UnreadableRecord::of(
                    scope.as_str(),
                    Scope::PENDING_LEGACY.as_str(),
                    &value,
                    err.to_string(),
                    bucket_scope,
                );
                let new = self.with_unreadable(|kept| kept.insert(entry.clone(), &value));
                if new {
                    tracing::error!(scope = %scope, key = entry.key_text(), error = %entry.error, "a stored held call does not parse; it is kept, listed as unreadable, and leaves only when a human denies it");
                }
                None
            }
        }
    }

    /// Moves records of the legacy scope into their buckets; returns how
    /// many moved.
    pub(crate) async fn migrate_legacy(&self) -> Result<usize, CallError> {
        let mut moved = 0;
        for value in self.engine.state_list(&Scope::PENDING_LEGACY).await? {
            let Some(record) = self.parse_stored(&Scope::PENDING_LEGACY, value) else {
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

    fn with_unreadable<R>(&self, f: impl FnOnce(&mut Unreadables) -> R) -> R {
        let mut guard = crate::sync::lock(&self.unreadable);
        f(&mut guard)
    }

    /// How many stored values do not parse as records (`health.unreadable`).
    pub(crate) fn unreadable_len(&self) -> usize {
        self.with_unreadable(|kept| kept.len())
    }

    /// At most `limit` unreadable values, of `session_id` when given.
    pub(crate) fn unreadable(
        &self,
        session_id: Option<&str>,
        limit: usize,
    ) -> Vec<UnreadableRecord> {
        self.with_unreadable(|kept| kept.list(session_id, limit))
    }

    /// Whether the value under a key does not parse as a record.
    pub(crate) fn is_unreadable(&self, session_id: &str, function_call_id: &str) -> bool {
        self.with_unreadable(|kept| kept.get(session_id, function_call_id).is_some())
    }

    /// The unreadable value under a key, as `list-pending` shows it.
    pub(crate) fn unreadable_entry(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<UnreadableRecord> {
        self.with_unreadable(|kept| kept.get(session_id, function_call_id).cloned())
    }

    /// A human's deny of an unreadable value (§21.9): under the key's lock
    /// it leaves state through the emit gate's steps (swap to `null`, delete
    /// the tombstone and the whole arguments) without any harness call (it
    /// has no usable `turn_id`), and `pending-resolved` says `aborted`,
    /// reason `unreadable`. Returns whether this call removed it.
    pub(crate) async fn remove_unreadable(
        &self,
        session_id: &str,
        function_call_id: &str,
        decided_by: DecidedBy,
    ) -> Result<bool, CallError> {
        let _lock = self.lock(session_id, function_call_id).await;
        let Some(entry) = self.unreadable_entry(session_id, function_call_id) else {
            return Ok(false);
        };
        let key = state_key(session_id, function_call_id);
        let scope = if entry.scope == Scope::PENDING_LEGACY.as_str() {
            Scope::PENDING_LEGACY
        } else {
            bucket(session_id, function_call_id)
        };
        self.engine.state_set(&scope, &key, Value::Null).await?;
        let removed = self
            .with_unreadable(|kept| kept.remove(session_id, function_call_id))
            .is_some();
        self.clear_key(&scope, &key).await;
        if removed {
            tracing::info!(key, "an unreadable held call was denied and removed");
            let event =
                PendingResolved::unreadable(&entry, session_id, function_call_id, decided_by);
            self.log.push_now(|| LogRecord {
                decision: event.outcome.as_str().to_string(),
                rule_id: event.reason.clone(),
                decided_by: event.decided_by.clone(),
                session_id: event.session_id.clone(),
                function_call_id: event.function_call_id.clone(),
                function_id: event.function_id.clone(),
                at: crate::time::now_ms(),
            });
            self.events.emit_resolved(event);
        }
        Ok(removed)
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

    /// Every live record, in no particular order (`approval::simulate`
    /// with `from_pending`): the index's shared records, nothing read.
    pub(crate) fn records(&self) -> Vec<Arc<PendingRecord>> {
        self.with_index(|index| index.iter().cloned().collect())
    }

    /// The keys of a turn's records.
    pub(crate) fn keys_of_turn(&self, turn_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_turn(turn_id))
    }

    /// The sessions that have records.
    pub(crate) fn session_ids(&self) -> Vec<String> {
        self.with_index(|index| index.session_ids())
    }

    /// The keys of a session's records.
    pub(crate) fn keys_of_session(&self, session_id: &str) -> Vec<RecordKey> {
        self.with_index(|index| index.keys_of_session(session_id))
    }

    /// Claims the record under `(session_id, function_call_id)` for a
    /// release: under the key's lock, checks it is still the `expected`
    /// revision `(pending_at, kind)` when one is given and that no other
    /// release carries it, then marks it `releasing` durably (one
    /// `state::set`) before anyone calls the harness. The returned
    /// [`Claim`] owns the record until it is settled or given back.
    pub(crate) async fn claim(
        self: &Arc<Self>,
        session_id: &str,
        function_call_id: &str,
        expected: Option<(u64, RecordKind)>,
        note: ReleaseNote,
    ) -> Result<Take, StoreError> {
        let lock = self.lock(session_id, function_call_id).await;
        let Some(record) = lock.get() else {
            return Ok(Take::Absent);
        };
        if let Some((pending_at, kind)) = expected {
            if record.pending_at != pending_at || !record.kind.same_prompt(kind) {
                return Ok(Take::Stale);
            }
        }
        if record.releasing || self.releasing.contains_key(&record.key()) {
            return Ok(Take::Releasing);
        }
        let mut marked = (*record).clone();
        marked.releasing = true;
        marked.release = Some(Box::new(note));
        let marked = lock.replace(marked, false).await?;
        self.releasing.insert(
            marked.key(),
            Releasing {
                record: marked.clone(),
                superseded: false,
                owned: true,
            },
        );
        Ok(Take::Claimed(Claim {
            store: self.clone(),
            record: marked,
            sent: false,
            settled: false,
        }))
    }

    /// Takes ownership of a record marked `releasing` whose release has no
    /// owner in this process (read at boot, or orphaned): the harness may
    /// have been asked, so the claim counts as sent.
    pub(crate) async fn adopt(
        self: &Arc<Self>,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<Claim> {
        let lock = self.lock(session_id, function_call_id).await;
        let record = lock.get().filter(|r| r.releasing)?;
        if self.releasing.get(&record.key()).is_some_and(|r| r.owned) {
            // A live owner's; not ours to take.
            return None;
        }
        self.releasing.insert(
            record.key(),
            Releasing {
                record: record.clone(),
                superseded: false,
                owned: true,
            },
        );
        Some(Claim {
            store: self.clone(),
            record,
            sent: true,
            settled: false,
        })
    }

    /// Whether a release of exactly this record is under way.
    pub(crate) fn is_releasing(&self, record: &PendingRecord) -> bool {
        record.releasing
            || self
                .releasing
                .get(&record.key())
                .is_some_and(|r| r.record.is_same_hold(record))
    }

    /// The keys of records marked `releasing` (boot's recovery).
    pub(crate) fn releasing_keys(&self) -> Vec<RecordKey> {
        self.with_index(|index| index.releasing_keys())
    }

    /// The receiver of orphaned releases; `None` after the first call.
    pub(crate) fn take_orphans(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<RecordKey>> {
        crate::sync::lock(&self.orphaned).take()
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

    /// The emit gate proper; the key's lock is held. A state failure leaves
    /// the record in place (a later event retries).
    async fn settle_locked(&self, record: &Arc<PendingRecord>) -> Result<bool, CallError> {
        let key = state_key(&record.session_id, &record.function_call_id);
        let scope = bucket(&record.session_id, &record.function_call_id);
        self.engine.state_set(&scope, &key, Value::Null).await?;
        let removed = self.with_index(|index| index.remove_if_same(record));
        self.clear_key(&scope, &key).await;
        Ok(removed)
    }

    /// After a record left (swapped to `null`): its tombstone and its whole
    /// arguments (§21.6) are deleted, at once; a failure is logged, never
    /// fatal (a tombstone is skipped at load, and a later hold of the same
    /// key overwrites the arguments).
    async fn clear_key(&self, scope: &Scope, key: &str) {
        let (tombstone, arguments) = tokio::join!(
            self.engine.state_delete(scope, key),
            self.engine.state_delete(&Scope::ARGUMENTS, key)
        );
        if let Err(err) = tombstone {
            tracing::warn!(key, error = %err, "tombstone not deleted; it is skipped at load");
        }
        if let Err(err) = arguments {
            tracing::warn!(key, error = %err, "the whole arguments of a record that left were not deleted; a later hold of the same key overwrites them");
        }
    }

    /// The whole redacted arguments of a held record (§21.6): one
    /// `state::get` of its own key, for `get-pending` and the link page
    /// only. A record stored without them (held before they were kept, or
    /// their write failed) shows its excerpt, marked clipped.
    pub(crate) async fn arguments(&self, record: &PendingRecord) -> WholeArguments {
        let key = state_key(&record.session_id, &record.function_call_id);
        let stored = match self.engine.state_get(&Scope::ARGUMENTS, &key).await {
            Ok(value) => serde_json::from_value::<Full>(value).ok(),
            Err(err) => {
                tracing::warn!(key, error = %err, "whole arguments not read; showing the excerpt");
                None
            }
        };
        let (arguments, arguments_clipped) = match stored {
            Some(stored) => (stored.value, stored.clipped),
            None => (record.arguments_excerpt.to_value(), true),
        };
        WholeArguments {
            arguments,
            arguments_clipped,
            arguments_cap_bytes: FULL_ARGUMENTS_CAP,
        }
    }
}

/// The whole redacted arguments as `get-pending` shows them (§21.6).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct WholeArguments {
    /// The call's whole arguments, redacted (secrets replaced), at most
    /// `arguments_cap_bytes` bytes of compact JSON. The harness's
    /// `fs_scope` stamp is shown apart, on the record.
    pub arguments: Value,
    /// Whether anything of the arguments is missing from `arguments` (a
    /// string cut and marked `…[+N chars]`, entries dropped, too deep; or
    /// only the excerpt was kept, for a record held before the whole
    /// arguments were stored).
    pub arguments_clipped: bool,
    /// The cap on `arguments`: bytes of compact JSON (65536).
    pub arguments_cap_bytes: usize,
}

/// The lock of one record key, and the only way to write or remove the
/// record: a hold, a claim, an escalation, a purge and a release's end all go
/// through it. Held for state calls only, never across a harness call (a
/// released call may be held again by the grant watch while its release is
/// still waiting for the harness).
pub(crate) struct KeyLock<'s> {
    store: &'s PendingStore,
    session_id: String,
    function_call_id: String,
    _guard: tokio::sync::MutexGuard<'s, ()>,
}

impl KeyLock<'_> {
    /// The live record under the key.
    pub(crate) fn get(&self) -> Option<Arc<PendingRecord>> {
        self.store.get(&self.session_id, &self.function_call_id)
    }

    fn check(&self, record: &PendingRecord) -> Result<(), StoreError> {
        if record.session_id == self.session_id && record.function_call_id == self.function_call_id
        {
            Ok(())
        } else {
            Err(StoreError::WrongKey)
        }
    }

    /// Writes a hold durably, then indexes and announces it. Replacing a
    /// record whose release is under way marks that release as superseded
    /// (it still announces its own record).
    ///
    /// The call's whole redacted `arguments` go under their own key in
    /// `approval_arguments`, written alongside the record (both writes in
    /// flight at once: a hold waits one round trip, not two). The record
    /// decides: if its write fails the hold fails; if only the arguments'
    /// write fails, the hold stands and `get-pending` shows the excerpt,
    /// marked clipped.
    pub(crate) async fn write(
        &self,
        record: PendingRecord,
        arguments: Full,
    ) -> Result<Written, StoreError> {
        self.check(&record)?;
        let store = self.store;
        let key = state_key(&record.session_id, &record.function_call_id);
        let scope = bucket(&record.session_id, &record.function_call_id);
        let value = serde_json::to_value(&record)?;
        let whole = serde_json::to_value(&arguments)?;
        let (outcome, whole) = tokio::join!(
            store.engine.state_set(&scope, &key, value),
            store.engine.state_set(&Scope::ARGUMENTS, &key, whole)
        );
        if let Err(err) = whole {
            tracing::warn!(key, error = %err, "the whole arguments were not stored; get-pending and the link page show the excerpt, marked clipped");
        }
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                // No hold: arguments with no record the index knows go too.
                if self.get().is_none() {
                    let _ = store.engine.state_delete(&Scope::ARGUMENTS, &key).await;
                }
                return Err(err.into());
            }
        };
        // The write replaced whatever unreadable value was under the key.
        store.with_unreadable(|kept| kept.remove(&record.session_id, &record.function_call_id));
        let previous = store.with_index(|index| index.insert(record.clone()));
        if let Some(due) = record.next_due() {
            store.deadline_added(due);
        }
        let written = match previous {
            // The index knew the old record: this is a replacement, not a
            // lost race.
            Some(previous) => {
                if !previous.is_same_hold(&record) {
                    match store.releasing.get_mut(&record.key()) {
                        Some(mut releasing) if releasing.record.is_same_hold(&previous) => {
                            releasing.superseded = true
                        }
                        _ => store.announce_resolved(
                            &previous,
                            Outcome::Aborted,
                            Some(REPLACED.to_string()),
                            DecidedBy::by(DecidedVia::Replaced, None, crate::time::now_ms()),
                        ),
                    }
                }
                Written::New
            }
            None if outcome.old_value.is_null() => Written::New,
            None => Written::DuplicateWon,
        };
        if written == Written::New {
            store.events.emit_created(&record);
        }
        Ok(written)
    }

    /// Rewrites the record under the key as `record`, the same hold with new
    /// marks (a claim, a note, a release given back, an escalation): state
    /// first, then the index. Announces nothing. `fresh_deadline`: the record
    /// enters the timer's deadline view anew (an escalation); otherwise it
    /// keeps the previous revision's place (a record the timer took stays
    /// the timer's).
    async fn replace(
        &self,
        record: PendingRecord,
        fresh_deadline: bool,
    ) -> Result<Arc<PendingRecord>, StoreError> {
        self.check(&record)?;
        let store = self.store;
        let value = serde_json::to_value(&record)?;
        store
            .engine
            .state_set(
                &bucket(&record.session_id, &record.function_call_id),
                &state_key(&record.session_id, &record.function_call_id),
                value,
            )
            .await?;
        store.with_index(|index| {
            if fresh_deadline {
                index.insert(record)
            } else {
                index.insert_keeping_due(record)
            }
        });
        let current = self.get().ok_or(StoreError::WrongKey)?;
        if fresh_deadline {
            if let Some(due) = current.next_due() {
                store.deadline_added(due);
            }
        }
        Ok(current)
    }

    /// Removes from state a record whose write did not finish in time (the
    /// hook gave up and answered without it; the harness never saw a hold).
    /// Only when the index knows no record under the key: an announced
    /// record leaves through the emit gate, never here. Best effort: a
    /// failure is logged.
    pub(crate) async fn discard(&self) {
        if self.get().is_some() {
            return;
        }
        let key = state_key(&self.session_id, &self.function_call_id);
        let scope = bucket(&self.session_id, &self.function_call_id);
        let (record, arguments) = tokio::join!(
            self.store.engine.state_delete(&scope, &key),
            self.store.engine.state_delete(&Scope::ARGUMENTS, &key)
        );
        match record {
            Err(err) => {
                tracing::warn!(key, error = %err, "an unannounced record was not removed; it is listed after a restart and resolving it reports not_held");
            }
            // The write had landed: the decision log hears of its removal
            // (no `pending-resolved`: no one was told of the record).
            Ok(old) => {
                if let Ok(record) = serde_json::from_value::<PendingRecord>(old) {
                    self.store.log.push_now(|| {
                        let at = crate::time::now_ms();
                        LogRecord {
                            decision: Outcome::Aborted.as_str().to_string(),
                            rule_id: Some(DecidedVia::Gate.as_str().to_string()),
                            decided_by: DecidedBy::by(DecidedVia::Gate, None, at),
                            session_id: record.session_id,
                            function_call_id: record.function_call_id,
                            function_id: record.function_id,
                            at,
                        }
                    });
                }
            }
        }
        if let Err(err) = arguments {
            tracing::warn!(key, error = %err, "the whole arguments of an unannounced record were not removed");
        }
    }

    /// A purge: whatever record is under the key leaves through the emit
    /// gate and is announced with `outcome`, decided by `via` (a lifecycle
    /// path) — unless a decision on it is under way, whose release settles
    /// it with what the harness says.
    pub(crate) async fn purge(
        &self,
        outcome: Outcome,
        reason: &str,
        via: DecidedVia,
    ) -> Result<Purged, CallError> {
        let Some(current) = self.get() else {
            return Ok(Purged::Absent);
        };
        if self.store.is_releasing(&current) {
            return Ok(Purged::Releasing);
        }
        if self.store.settle_locked(&current).await? {
            self.store.announce_resolved(
                &current,
                outcome,
                Some(reason.to_string()),
                DecidedBy::by(via, None, crate::time::now_ms()),
            );
            Ok(Purged::Removed(current))
        } else {
            Ok(Purged::Absent)
        }
    }

    /// Escalates a held record, once: if `record` is still the hold under
    /// the key, was not escalated yet and no decision on it is under way,
    /// its stored value gets `escalated_at` first — so a restarted worker
    /// never escalates it again — then the index, then
    /// `approval::pending-escalated` goes out. The record stays held.
    /// Returns whether it escalated; a state failure escalates nothing (the
    /// timer tries again).
    pub(crate) async fn escalate(
        &self,
        record: &PendingRecord,
        at: u64,
    ) -> Result<bool, StoreError> {
        let Some(current) = self.get() else {
            return Ok(false);
        };
        if !current.is_same_hold(record)
            || current.escalated_at.is_some()
            || self.store.is_releasing(&current)
        {
            return Ok(false);
        }
        let mut escalated = (*current).clone();
        escalated.escalated_at = Some(at);
        let escalated = self.replace(escalated, true).await?;
        self.store.events.emit_escalated(&escalated);
        Ok(true)
    }
}

/// A claimed record: the one owner of its release, from the durable
/// `releasing` mark to the record's end.
///
/// * [`Claim::finish`] settles it once, through the emit gate, with the
///   harness's outcome; [`Claim::give_back`] makes it pending again (the
///   harness surely did not act on it).
/// * Dropped before [`Claim::sent`], the record goes back to pending.
/// * Dropped after it, the record stays `releasing` (the harness may be
///   running the call) and is handed to the release path's recovery, which
///   asks the harness what became of the call.
pub(crate) struct Claim {
    store: Arc<PendingStore>,
    record: Arc<PendingRecord>,
    sent: bool,
    settled: bool,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("session_id", &self.record.session_id)
            .field("function_call_id", &self.record.function_call_id)
            .field("sent", &self.sent)
            .field("settled", &self.settled)
            .finish()
    }
}

impl Claim {
    /// The claimed record (marked `releasing`).
    pub(crate) fn record(&self) -> &Arc<PendingRecord> {
        &self.record
    }

    /// Notes, durably, a folder granted for this release (so a restart can
    /// still take it back).
    pub(crate) async fn note_grant(&mut self, dir: &str) -> Result<(), StoreError> {
        let (sid, cid) = (&self.record.session_id, &self.record.function_call_id);
        let lock = self.store.lock(sid, cid).await;
        match lock.get() {
            Some(current) if current.is_same_hold(&self.record) && current.releasing => {
                let mut noted = (*current).clone();
                if let Some(note) = noted.release.as_mut() {
                    note.granted = Some(dir.to_string());
                }
                self.record = lock.replace(noted, false).await?;
                if let Some(mut releasing) = self.store.releasing.get_mut(&self.record.key()) {
                    releasing.record = self.record.clone();
                }
                Ok(())
            }
            // Replaced meanwhile: nothing to note on.
            _ => Ok(()),
        }
    }

    /// Who decided this release: the decider the record's note names (an
    /// unknown outcome too). A record claimed without a note (none is)
    /// would read as the reconcile's.
    fn decided_by(&self) -> DecidedBy {
        self.record.release.as_ref().map_or_else(
            || DecidedBy::by(DecidedVia::Reconcile, None, crate::time::now_ms()),
            |note| note.decided_by(),
        )
    }

    /// The harness is about to be asked: from now on a dropped claim leaves
    /// the record `releasing`.
    pub(crate) fn sent(&mut self) {
        self.sent = true;
    }

    /// Settles the release with the harness's outcome: removes the record if
    /// it is still the one released, and announces it. Returns whether this
    /// release announced it (true when it removed it, or when a follow-up
    /// hold replaced it meanwhile — the follow-up stays). On a state failure
    /// the claim comes back for another try.
    pub(crate) async fn finish(
        mut self,
        outcome: Outcome,
        reason: Option<String>,
    ) -> Result<bool, (Claim, CallError)> {
        let store = self.store.clone();
        let key = self.record.key();
        let lock = store.lock(&key.0, &key.1).await;
        let superseded = store
            .releasing
            .get(&key)
            .map(|r| r.superseded)
            .unwrap_or(false);
        let result = match lock.get() {
            Some(current) if current.is_same_hold(&self.record) => {
                store.settle_locked(&current).await
            }
            _ => Ok(superseded),
        };
        match result {
            Ok(settled) => {
                store.releasing.remove(&key);
                self.settled = true;
                if settled {
                    store.announce_resolved(&self.record, outcome, reason, self.decided_by());
                }
                Ok(settled)
            }
            Err(err) => {
                drop(lock);
                Err((self, err))
            }
        }
    }

    /// Makes the record pending again (the harness did not act on this
    /// decision, or still holds the call): the `releasing` mark goes, and
    /// any decision may be taken anew. `uncertain`: the decision given back
    /// may have run the call (its answer was lost).
    pub(crate) async fn give_back(mut self, uncertain: bool) -> Result<(), (Claim, StoreError)> {
        let store = self.store.clone();
        match store.restore(&self.record, uncertain).await {
            Ok(()) => {
                self.settled = true;
                Ok(())
            }
            Err(err) => Err((self, err)),
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let store = self.store.clone();
        let record = self.record.clone();
        if self.sent {
            // The harness may be running the call: only it can say what
            // became of it. The recovery adopts the record.
            tracing::warn!(session_id = %record.session_id, function_call_id = %record.function_call_id, "a release ended without its outcome; asking the harness what became of the call");
            if let Some(mut releasing) = store.releasing.get_mut(&record.key()) {
                releasing.owned = false;
            }
            let _ = store.orphans.send(record.key());
            return;
        }
        // Nothing reached the harness: the call is still held, and the
        // record becomes pending again.
        self.store.runtime.spawn(async move {
            for attempt in 0..5u32 {
                match store.restore(&record, false).await {
                    Ok(()) => return,
                    Err(err) => {
                        tracing::warn!(session_id = %record.session_id, function_call_id = %record.function_call_id, attempt, error = %err, "a dropped claim could not give its record back; retrying");
                        tokio::time::sleep(std::time::Duration::from_millis(250 << attempt)).await;
                    }
                }
            }
            tracing::error!(session_id = %record.session_id, function_call_id = %record.function_call_id, "a dropped claim's record stays marked releasing; a restart recovers it");
        });
    }
}

impl PendingStore {
    /// Gives a claimed record back: pending again, unless another record
    /// replaced it meanwhile.
    async fn restore(
        &self,
        record: &Arc<PendingRecord>,
        uncertain: bool,
    ) -> Result<(), StoreError> {
        let key = record.key();
        let lock = self.lock(&key.0, &key.1).await;
        if let Some(current) = lock.get() {
            if current.is_same_hold(record) && current.releasing {
                let mut pending = (*current).clone();
                pending.releasing = false;
                pending.release = None;
                pending.uncertain |= uncertain;
                lock.replace(pending, false).await?;
            }
        }
        self.releasing.remove(&key);
        Ok(())
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
