//! A release's claim (`architecture/contract.md` § Releasing a held call):
//! the one owner of a held call's release, from the durable `releasing`
//! mark to the record's end.
//!
//! A claim has two halves. The durable one is the record's `releasing` mark
//! and its [`ReleaseNote`] (what was decided, by whom), so a restarted
//! worker can settle the release honestly. The in-memory one is the entry in
//! [`Releases`]: which revision the release carries, whether a follow-up
//! hold superseded it, and whether an owner in this process still holds the
//! claim or it was orphaned.
//!
//! * [`PendingStore::claim`] takes the key's lock, checks the revision and
//!   marks the record; [`PendingStore::adopt`] takes an ownerless release
//!   (read at boot, or orphaned).
//! * [`Claim::finish`] settles the release once, through the emit gate;
//!   [`Claim::give_back`] makes the record pending again.
//! * Dropped before [`Claim::sent`], a claim gives its record back; dropped
//!   after it, the record stays `releasing` and its key goes to the orphan
//!   channel, which the release path's recovery reads.

use std::collections::HashMap;
use std::sync::Arc;

use super::announce::Exit;
use super::events::Resolution;
use super::record::{PendingRecord, RecordKey, RecordKind, ReleaseNote, RulingKind};
use super::store::PendingStore;
use crate::backoff::Backoff;
use crate::engine::CallError;
use crate::error::StateError;
use crate::provenance::{DecidedBy, DecidedVia};

/// How many times a claim dropped before its send tries to give its record
/// back, and the waits after each failed try (250 ms doubling).
const GIVE_BACK_ATTEMPTS: usize = 5;
const GIVE_BACK_RETRY: Backoff = Backoff::new(
    std::time::Duration::from_millis(250),
    std::time::Duration::from_secs(4),
);

/// A release under way, in memory.
#[derive(Debug)]
struct Releasing {
    /// The revision the release carries (its latest note included).
    record: Arc<PendingRecord>,
    /// Another record was written under the same key while the release ran.
    superseded: bool,
    /// A [`Claim`] in this process carries it (false: its claim was dropped
    /// after the harness was asked, and the recovery may adopt it).
    owned: bool,
    /// The gate let the released call continue once on this release (a
    /// second gate binding runs inside the harness's `execute`, §26.1).
    passed: bool,
}

/// PURE: the releases under way, by key — the in-memory half of every
/// claim.
#[derive(Debug, Default)]
pub(super) struct Releases {
    by_key: HashMap<RecordKey, Releasing>,
}

impl Releases {
    /// A claim in this process now owns the release of `record`.
    fn own(&mut self, record: Arc<PendingRecord>) {
        self.by_key.insert(
            record.key(),
            Releasing {
                record,
                superseded: false,
                owned: true,
                passed: false,
            },
        );
    }

    /// Whether a release of the key is under way.
    fn is_under_way(&self, key: &RecordKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// Whether a live claim in this process owns the key's release.
    fn is_owned(&self, key: &RecordKey) -> bool {
        self.by_key.get(key).is_some_and(|r| r.owned)
    }

    /// Whether a release of exactly this hold is under way.
    fn carries(&self, record: &PendingRecord) -> bool {
        self.by_key
            .get(&record.key())
            .is_some_and(|r| r.record.is_same_hold(record))
    }

    /// The gate may let `record`'s released call continue: a release of
    /// exactly this hold is under way here and has not let it continue yet.
    /// Marks it, so it happens at most once per release.
    fn pass(&mut self, record: &PendingRecord) -> bool {
        match self.by_key.get_mut(&record.key()) {
            Some(releasing) if releasing.record.is_same_hold(record) && !releasing.passed => {
                releasing.passed = true;
                true
            }
            _ => false,
        }
    }

    /// A new record was written over `previous`: if a release carries
    /// `previous`, it is superseded (the release still announces its own
    /// record, and the follow-up stays). Returns whether one did.
    pub(super) fn supersede(&mut self, previous: &PendingRecord) -> bool {
        match self.by_key.get_mut(&previous.key()) {
            Some(releasing) if releasing.record.is_same_hold(previous) => {
                releasing.superseded = true;
                true
            }
            _ => false,
        }
    }

    /// Whether a follow-up hold superseded the key's release.
    fn is_superseded(&self, key: &RecordKey) -> bool {
        self.by_key.get(key).is_some_and(|r| r.superseded)
    }

    /// The claim's record was rewritten (a note on it).
    fn noted(&mut self, record: &Arc<PendingRecord>) {
        if let Some(releasing) = self.by_key.get_mut(&record.key()) {
            releasing.record = record.clone();
        }
    }

    /// The claim was dropped after the harness was asked: the recovery may
    /// adopt the release.
    fn disown(&mut self, key: &RecordKey) {
        if let Some(releasing) = self.by_key.get_mut(key) {
            releasing.owned = false;
        }
    }

    /// The release ended (settled, or given back).
    fn end(&mut self, key: &RecordKey) {
        self.by_key.remove(key);
    }
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

impl PendingStore {
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
    ) -> Result<Take, StateError> {
        let lock = self.lock(session_id, function_call_id).await;
        let Some(record) = lock.get() else {
            return Ok(Take::Absent);
        };
        if let Some((pending_at, kind)) = expected {
            if record.pending_at != pending_at || !record.kind.same_prompt(kind) {
                return Ok(Take::Stale);
            }
        }
        if record.releasing || self.with_memory(|m| m.releasing.is_under_way(&record.key())) {
            return Ok(Take::Releasing);
        }
        let mut marked = (*record).clone();
        marked.releasing = true;
        marked.release = Some(Box::new(note));
        let marked = lock.replace(marked, false).await?;
        self.with_memory(|m| m.releasing.own(marked.clone()));
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
        let adopted = self.with_memory(|m| {
            if m.releasing.is_owned(&record.key()) {
                // A live owner's; not ours to take.
                return false;
            }
            m.releasing.own(record.clone());
            true
        });
        adopted.then(|| Claim {
            store: self.clone(),
            record,
            sent: true,
            settled: false,
        })
    }

    /// Whether a release of exactly this record is under way.
    pub(crate) fn is_releasing(&self, record: &PendingRecord) -> bool {
        record.releasing || self.with_memory(|m| m.releasing.carries(record))
    }

    /// Whether the gate may let the released call of `record` continue
    /// (§26.1): its release, an allow, is under way in this process and has
    /// not let it continue before. At most once per release: a second ask
    /// answers false.
    pub(crate) fn pass_release(&self, record: &PendingRecord) -> bool {
        let allow = record
            .release
            .as_ref()
            .is_some_and(|note| note.decision == RulingKind::Allow);
        allow && self.with_memory(|m| m.releasing.pass(record))
    }

    /// The keys of records marked `releasing` (boot's recovery).
    pub(crate) fn releasing_keys(&self) -> Vec<RecordKey> {
        self.with_memory(|m| m.index.releasing_keys())
    }

    /// The receiver of orphaned releases; `None` after the first call.
    pub(crate) fn take_orphans(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<RecordKey>> {
        self.with_memory(|m| m.orphaned.take())
    }

    /// Gives a claimed record back: pending again, unless another record
    /// replaced it meanwhile.
    async fn restore(
        &self,
        record: &Arc<PendingRecord>,
        uncertain: bool,
    ) -> Result<(), StateError> {
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
        self.with_memory(|m| m.releasing.end(&key));
        Ok(())
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
    pub(crate) async fn note_grant(&mut self, dir: &str) -> Result<(), StateError> {
        let (sid, cid) = (&self.record.session_id, &self.record.function_call_id);
        let lock = self.store.lock(sid, cid).await;
        match lock.get() {
            Some(current) if current.is_same_hold(&self.record) && current.releasing => {
                let mut noted = (*current).clone();
                if let Some(note) = noted.release.as_mut() {
                    note.granted = Some(dir.to_string());
                }
                self.record = lock.replace(noted, false).await?;
                self.store.with_memory(|m| m.releasing.noted(&self.record));
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
        outcome: Resolution,
        reason: Option<String>,
    ) -> Result<bool, (Claim, CallError)> {
        let store = self.store.clone();
        let key = self.record.key();
        let lock = store.lock(&key.0, &key.1).await;
        let superseded = store.with_memory(|m| m.releasing.is_superseded(&key));
        let result = match lock.get() {
            Some(current) if current.is_same_hold(&self.record) => {
                store.settle_locked(&current).await
            }
            _ => Ok(superseded),
        };
        match result {
            Ok(settled) => {
                store.with_memory(|m| m.releasing.end(&key));
                self.settled = true;
                if settled {
                    store.announce(Exit::record(
                        &self.record,
                        outcome,
                        reason,
                        self.decided_by(),
                    ));
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
    pub(crate) async fn give_back(mut self, uncertain: bool) -> Result<(), (Claim, StateError)> {
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
            store.with_memory(|m| m.releasing.disown(&record.key()));
            let _ = store.orphans.send(record.key());
            return;
        }
        // Nothing reached the harness: the call is still held, and the
        // record becomes pending again.
        self.store.runtime.spawn(async move {
            for (attempt, wait) in GIVE_BACK_RETRY.take(GIVE_BACK_ATTEMPTS).enumerate() {
                match store.restore(&record, false).await {
                    Ok(()) => return,
                    Err(err) => {
                        tracing::warn!(session_id = %record.session_id, function_call_id = %record.function_call_id, attempt, error = %err, "a dropped claim could not give its record back; retrying");
                        tokio::time::sleep(wait).await;
                    }
                }
            }
            tracing::error!(session_id = %record.session_id, function_call_id = %record.function_call_id, "a dropped claim's record stays marked releasing; a restart recovers it");
        });
    }
}

#[cfg(test)]
mod tests;
