//! The lock of one record key, and the only way to write or remove the
//! record: a hold, a claim, a note, an escalation, a purge and a release's
//! end all go through a [`KeyLock`]. It is held for state calls only, never
//! across a harness call (a released call may be held again by the grant
//! watch while its release is still waiting for the harness).
//!
//! The locks are striped: 256 async mutexes, a key's stripe chosen by a hash
//! of its ids, so memory does not grow with the keys and two keys rarely
//! wait for each other.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::announce::Exit;
use super::bucket::{bucket, state_key};
use super::events::Resolution;
use super::record::PendingRecord;
use super::store::PendingStore;
use crate::engine::{CallError, Scope};
use crate::error::StateError;
use crate::provenance::{DecidedBy, DecidedVia};
use crate::redact::Full;

/// How many async mutexes the keys share.
const STRIPES: usize = 256;

/// The striped locks behind every [`KeyLock`].
pub(super) struct Stripes(Vec<tokio::sync::Mutex<()>>);

impl Stripes {
    pub(super) fn new() -> Stripes {
        Stripes((0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect())
    }

    /// PURE: the stripe of a key (the same in one process, which is all a
    /// lock needs).
    fn of(session_id: &str, function_call_id: &str) -> usize {
        let mut h = DefaultHasher::new();
        (session_id, function_call_id).hash(&mut h);
        (h.finish() as usize) % STRIPES
    }
}

impl PendingStore {
    /// The lock of one key: every write and removal of the key goes
    /// through the guard it returns, so none can happen without it.
    pub(crate) async fn lock(&self, session_id: &str, function_call_id: &str) -> KeyLock<'_> {
        let guard = self.stripes.0[Stripes::of(session_id, function_call_id)]
            .lock()
            .await;
        KeyLock {
            store: self,
            session_id: session_id.to_string(),
            function_call_id: function_call_id.to_string(),
            _guard: guard,
        }
    }
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

/// The lock of one record key (see the module's doc).
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

    fn check(&self, record: &PendingRecord) -> Result<(), StateError> {
        if record.session_id == self.session_id && record.function_call_id == self.function_call_id
        {
            Ok(())
        } else {
            Err(StateError::WrongKey)
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
    ) -> Result<Written, StateError> {
        self.check(&record)?;
        let store = self.store;
        let key = state_key(&record.session_id, &record.function_call_id);
        let scope = bucket(&record.session_id, &record.function_call_id);
        let value = record.stored()?;
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
        let (known, replaced) = store.with_memory(|memory| {
            // The write replaced whatever unreadable value was under the key.
            memory
                .unreadable
                .remove(&record.session_id, &record.function_call_id);
            let previous = memory.index.insert(record.clone());
            let known = previous.is_some();
            // A different record: announced as replaced here, unless a
            // release carries it (that release announces it).
            let replaced = previous
                .filter(|previous| !previous.is_same_hold(&record))
                .filter(|previous| !memory.releasing.supersede(previous));
            (known, replaced)
        });
        if let Some(due) = record.next_due() {
            store.deadline_added(due);
        }
        if let Some(previous) = replaced {
            store.announce(Exit::replaced(&previous, crate::time::now_ms()));
        }
        // The index knew the old record: a replacement, not a lost race.
        let written = if known || outcome.old_value.is_null() {
            Written::New
        } else {
            Written::DuplicateWon
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
    pub(super) async fn replace(
        &self,
        record: PendingRecord,
        fresh_deadline: bool,
    ) -> Result<Arc<PendingRecord>, StateError> {
        self.check(&record)?;
        let store = self.store;
        let value = record.stored()?;
        store
            .engine
            .state_set(
                &bucket(&record.session_id, &record.function_call_id),
                &state_key(&record.session_id, &record.function_call_id),
                value,
            )
            .await?;
        store.with_memory(|memory| {
            if fresh_deadline {
                memory.index.insert(record)
            } else {
                memory.index.insert_keeping_due(record)
            }
        });
        let current = self.get().ok_or(StateError::WrongKey)?;
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
                    self.store
                        .announce(Exit::unannounced(&record, crate::time::now_ms()));
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
        outcome: Resolution,
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
            self.store.announce(Exit::record(
                &current,
                outcome,
                Some(reason.to_string()),
                DecidedBy::by(via, None, crate::time::now_ms()),
            ));
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
    ) -> Result<bool, StateError> {
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

#[cfg(test)]
mod tests;
