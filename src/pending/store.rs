//! The pending store: state (the `approval_pending.NN` scopes) is the source
//! of truth; the in-memory [`PendingIndex`] serves every read and purge and is
//! rebuilt from `state::list` at boot (`architecture/contract.md` § Storage).
//!
//! The store is the one place that announces records: it emits
//! `approval::pending-created` when a hold is written,
//! `approval::pending-escalated` when the timer escalates one, and
//! `approval::pending-resolved` when a record leaves, whoever made it leave.
//!
//! Its parts, each in a file of its own:
//! * this file — the store, what it keeps in memory, its reads, and the
//!   emit gate;
//! * [`super::key_lock`] — `KeyLock`, the only way to write or remove a key;
//! * [`super::claim`] — a release's `Claim` and the releases under way;
//! * [`super::announce`] — the one announcer every exit calls;
//! * [`super::load`] — boot's read of the buckets;
//! * [`super::bucket`] — where a record is stored.
//!
//! # The emit gate
//!
//! A record leaves only under its key's lock, through [`PendingStore::settle_locked`]
//! (a release's `Claim::finish`, a `KeyLock::purge`) or, for a value that
//! does not parse (§21.9), [`PendingStore::remove_unreadable`]. Both take the
//! same steps ([`PendingStore::leave`]): swap the stored value for `null`
//! (`state::set` returns the old value atomically), forget it in memory,
//! delete the `null` tombstone and the whole arguments (`approval_arguments`,
//! §21.6) — and only the caller that forgot it announces it, so exactly one
//! `approval::pending-resolved` goes out per record, whatever races.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::announce::Exit;
use super::bucket::{bucket, state_key};
use super::claim::Releases;
use super::events::Events;
use super::index::{ListPage, ListQuery, PendingIndex};
use super::key_lock::Stripes;
use super::record::{PendingRecord, RecordKey};
use super::removed::{Removal, Removed};
use super::unreadable::{UnreadableRecord, Unreadables};
use crate::config::ConfigCell;
use crate::engine::{CallError, Engine, Scope};
use crate::provenance::{DecidedBy, DecisionLog};
use crate::redact::{Full, FULL_ARGUMENTS_CAP};

/// Everything the store keeps only in memory.
pub(super) struct InMemory {
    /// The held calls, as state has them.
    pub(super) index: PendingIndex,
    /// The releases under way (the in-memory half of every claim).
    pub(super) releasing: Releases,
    /// How recent records left (what a link to one says).
    pub(super) removed: Removed,
    /// Stored values that do not parse as records (§21.9).
    pub(super) unreadable: Unreadables,
    /// The receiver of orphaned releases, until the recovery takes it.
    pub(super) orphaned: Option<tokio::sync::mpsc::UnboundedReceiver<RecordKey>>,
}

/// The pending store.
///
/// Two kinds of lock, each for one job:
/// * `memory`, one std mutex over everything kept only in memory (the
///   index, the releases under way, the recent removals, the unreadable
///   values). It is held for in-memory work only and never across an
///   `.await`: every state call happens outside it, so a slow engine never
///   holds up a read of the inbox, and one lock is all a step that touches
///   two of them (a write that finds a release to supersede) needs;
/// * `stripes`, async mutexes striped by key, serialize every write of one
///   key (hold, claim, release's end, escalation, purge) across the state
///   calls they make; [`KeyLock`](super::key_lock::KeyLock) is the only way to take
///   one. No stripe is held across a harness call: a released call may be
///   held again by the grant watch while its release is still waiting for
///   the harness.
///
/// The deadline timer's wake-up (`timer_wake`, `timer_armed`) is a `Notify`
/// and an atomic: a hold signals it without taking a lock.
pub(crate) struct PendingStore {
    pub(super) engine: Engine,
    pub(super) events: Arc<Events>,
    /// Where every announced removal is also logged (when configured).
    log: Arc<DecisionLog>,
    /// See the type's doc: in-memory work only, never across an `.await`.
    memory: Mutex<InMemory>,
    pub(super) stripes: Stripes,
    /// Releases whose owner went away after the harness was asked: the
    /// release path recovers them (`take_orphans`).
    pub(super) orphans: tokio::sync::mpsc::UnboundedSender<RecordKey>,
    /// Where a dropped claim finishes its work.
    pub(super) runtime: tokio::runtime::Handle,
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
        let (orphans, orphaned) = tokio::sync::mpsc::unbounded_channel();
        PendingStore {
            log: Arc::new(DecisionLog::new(config.clone())),
            events: Arc::new(Events::new(engine.clone(), config)),
            engine,
            memory: Mutex::new(InMemory {
                index: PendingIndex::new(),
                releasing: Releases::default(),
                removed: Removed::default(),
                unreadable: Unreadables::default(),
                orphaned: Some(orphaned),
            }),
            stripes: Stripes::new(),
            orphans,
            runtime: tokio::runtime::Handle::current(),
            timer_wake: tokio::sync::Notify::new(),
            timer_armed: AtomicU64::new(u64::MAX),
        }
    }

    /// Runs `f` on what the store keeps in memory. Never across an
    /// `.await`: `f` is synchronous.
    pub(super) fn with_memory<R>(&self, f: impl FnOnce(&mut InMemory) -> R) -> R {
        let mut guard = crate::sync::lock(&self.memory);
        f(&mut guard)
    }

    /// How the revision `(session_id, function_call_id, pending_at)` left
    /// the inbox, if it left recently.
    pub(crate) fn removal(
        &self,
        session_id: &str,
        function_call_id: &str,
        pending_at: u64,
    ) -> Option<Removal> {
        self.with_memory(|memory| {
            memory
                .removed
                .get(session_id, function_call_id, pending_at)
                .cloned()
        })
    }

    /// The decision log the store and the gate push records into.
    pub(crate) fn decision_log(&self) -> &Arc<DecisionLog> {
        &self.log
    }

    /// The trigger types the store announces through.
    pub(crate) fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// The live record under a key.
    pub(crate) fn get(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<Arc<PendingRecord>> {
        self.with_memory(|memory| memory.index.get(session_id, function_call_id))
    }

    /// A page of the inbox.
    pub(crate) fn list(&self, query: &ListQuery<'_>) -> ListPage {
        self.with_memory(|memory| memory.index.list(query))
    }

    /// How many records are held.
    pub(crate) fn len(&self) -> usize {
        self.with_memory(|memory| memory.index.len())
    }

    /// Every live record, in no particular order (`approval::simulate`
    /// with `from_pending`): the index's shared records, nothing read.
    pub(crate) fn records(&self) -> Vec<Arc<PendingRecord>> {
        self.with_memory(|memory| memory.index.iter().cloned().collect())
    }

    /// The keys of a turn's records.
    pub(crate) fn keys_of_turn(&self, turn_id: &str) -> Vec<RecordKey> {
        self.with_memory(|memory| memory.index.keys_of_turn(turn_id))
    }

    /// The sessions that have records.
    pub(crate) fn session_ids(&self) -> Vec<String> {
        self.with_memory(|memory| memory.index.session_ids())
    }

    /// The keys of a session's records.
    pub(crate) fn keys_of_session(&self, session_id: &str) -> Vec<RecordKey> {
        self.with_memory(|memory| memory.index.keys_of_session(session_id))
    }

    /// How many stored values do not parse as records (`health.unreadable`).
    pub(crate) fn unreadable_len(&self) -> usize {
        self.with_memory(|memory| memory.unreadable.len())
    }

    /// At most `limit` unreadable values, of `session_id` when given.
    pub(crate) fn unreadable(
        &self,
        session_id: Option<&str>,
        limit: usize,
    ) -> Vec<UnreadableRecord> {
        self.with_memory(|memory| memory.unreadable.list(session_id, limit))
    }

    /// Whether the value under a key does not parse as a record.
    pub(crate) fn is_unreadable(&self, session_id: &str, function_call_id: &str) -> bool {
        self.with_memory(|memory| {
            memory
                .unreadable
                .get(session_id, function_call_id)
                .is_some()
        })
    }

    /// The unreadable value under a key, as `list-pending` shows it.
    pub(crate) fn unreadable_entry(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<UnreadableRecord> {
        self.with_memory(|memory| memory.unreadable.get(session_id, function_call_id).cloned())
    }

    /// A human's deny of an unreadable value (§21.9): under the key's lock
    /// it leaves through the emit gate's steps without any harness call (it
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
        let scope = if entry.scope == Scope::PENDING_LEGACY.as_str() {
            Scope::PENDING_LEGACY
        } else {
            bucket(session_id, function_call_id)
        };
        let removed = self
            .leave(&scope, session_id, function_call_id, |memory| {
                memory
                    .unreadable
                    .remove(session_id, function_call_id)
                    .is_some()
            })
            .await?;
        if removed {
            tracing::info!(
                key = state_key(session_id, function_call_id),
                "an unreadable held call was denied and removed"
            );
            self.announce(Exit::unreadable(
                &entry,
                session_id,
                function_call_id,
                decided_by,
            ));
        }
        Ok(removed)
    }

    /// Takes the record with the earliest deadline at or before `now` out
    /// of the index's deadline view, for the timer (it stays held).
    pub(crate) fn take_due(&self, now: u64) -> Option<Arc<PendingRecord>> {
        self.with_memory(|memory| memory.index.take_due(now))
    }

    /// The earliest deadline the timer has not taken yet.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.with_memory(|memory| memory.index.next_due())
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
    pub(super) fn deadline_added(&self, due: u64) {
        if due < self.timer_armed.load(Ordering::SeqCst) {
            self.timer_wake.notify_one();
        }
    }

    /// The emit gate proper, for a record; the key's lock is held. Returns
    /// whether this caller removed `record` (and so announces it). A state
    /// failure leaves the record in place (a later event retries).
    pub(super) async fn settle_locked(
        &self,
        record: &Arc<PendingRecord>,
    ) -> Result<bool, CallError> {
        let (sid, cid) = (&record.session_id, &record.function_call_id);
        self.leave(&bucket(sid, cid), sid, cid, |memory| {
            memory.index.remove_if_same(record)
        })
        .await
    }

    /// The steps every removal takes under the key's lock: the stored value
    /// is swapped for `null`, `forget` drops it from memory (and says
    /// whether it was there), then its tombstone and its whole arguments
    /// (§21.6) are deleted, at once. Only the swap can fail the removal; a
    /// failed delete is logged, never fatal (a tombstone is skipped at load,
    /// and a later hold of the same key overwrites the arguments).
    async fn leave(
        &self,
        scope: &Scope,
        session_id: &str,
        function_call_id: &str,
        forget: impl FnOnce(&mut InMemory) -> bool,
    ) -> Result<bool, CallError> {
        let key = state_key(session_id, function_call_id);
        self.engine.state_set(scope, &key, Value::Null).await?;
        let forgotten = self.with_memory(forget);
        let (tombstone, arguments) = tokio::join!(
            self.engine.state_delete(scope, &key),
            self.engine.state_delete(&Scope::ARGUMENTS, &key)
        );
        if let Err(err) = tombstone {
            tracing::warn!(key, error = %err, "tombstone not deleted; it is skipped at load");
        }
        if let Err(err) = arguments {
            tracing::warn!(key, error = %err, "the whole arguments of a record that left were not deleted; a later hold of the same key overwrites them");
        }
        Ok(forgotten)
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
