//! The edit grants in state: one key per session under `approval_edits`
//! (`architecture/contract.md` § Edit, then approve).
//!
//! Every change of a session's grants is a read and a `state::set` under
//! one of the store's striped locks, and the swap's answer (what the key
//! held) is compared with what was read: a write made elsewhere meanwhile
//! (a standby taking over) makes the change start again on that value. So
//! of two identical calls in flight at once, one claims the use and the
//! other finds it used — the same way a uses-bounded grant is spent.
//!
//! The store knows which sessions may hold grants (read once at boot, then
//! kept as grants are written and sessions purged), so a hold in any other
//! session costs no read. Until that list is read, or when it cannot be,
//! every lookup reads.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

use super::{EditGrant, EditGrants, Found};
use crate::engine::{Engine, Scope};
use crate::error::StateError;

/// Stripes of the per-session lock.
const STRIPES: usize = 64;
/// How many times a change starts again on a value written elsewhere.
const ATTEMPTS: usize = 4;

/// What using a grant came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Used {
    /// No live grant covers the call.
    Nothing,
    /// This call claimed the use of the grant made on `made_on`.
    Claimed { made_on: String },
    /// This call had used it already (a redelivery).
    Again { made_on: String },
}

/// The edit grants of every session.
pub(crate) struct EditStore {
    engine: Engine,
    stripes: Vec<tokio::sync::Mutex<()>>,
    /// The sessions that may hold grants; `None`: not known, read each time.
    sessions: Mutex<Option<HashSet<String>>>,
}

impl EditStore {
    pub(crate) fn new(engine: Engine) -> EditStore {
        EditStore {
            engine,
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            sessions: Mutex::new(None),
        }
    }

    /// Boot: reads which sessions hold grants (one list of the scope). On
    /// failure every lookup keeps reading.
    pub(crate) async fn load(&self) -> Result<usize, StateError> {
        let values = self.engine.state_list(&Scope::EDITS).await?;
        let found: HashSet<String> = values
            .iter()
            .filter_map(|v| v.get("session_id").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        let count = found.len();
        *self.known() = Some(found);
        Ok(count)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Option<HashSet<String>>> {
        crate::sync::lock(&self.sessions)
    }

    /// Whether the session may hold grants (true when not known).
    fn may_hold(&self, session_id: &str) -> bool {
        self.known()
            .as_ref()
            .is_none_or(|sessions| sessions.contains(session_id))
    }

    async fn lock(&self, session_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        session_id.hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    /// The session's grants as stored (none: an empty set).
    pub(crate) async fn read(&self, session_id: &str) -> Result<EditGrants, StateError> {
        let value = self.engine.state_get(&Scope::EDITS, session_id).await?;
        parse(session_id, value)
    }

    /// Applies `change` to the session's grants and writes them, starting
    /// again when the swap shows a write made elsewhere. `change` answers
    /// what to return, and whether anything changed (nothing written when
    /// not).
    async fn change<T>(
        &self,
        session_id: &str,
        mut change: impl FnMut(&mut EditGrants) -> (T, bool),
    ) -> Result<T, StateError> {
        let _serial = self.lock(session_id).await;
        let mut current = self.read(session_id).await?;
        for _ in 0..ATTEMPTS {
            let mut next = current.clone();
            let (out, changed) = change(&mut next);
            if !changed {
                return Ok(out);
            }
            let value = serde_json::to_value(&next)?;
            let replaced = self
                .engine
                .state_set(&Scope::EDITS, session_id, value)
                .await?;
            let theirs = parse(session_id, replaced.old_value)?;
            if theirs == current {
                return Ok(out);
            }
            // Written elsewhere meanwhile: put their value back under our
            // change, on the next round.
            current = theirs;
        }
        Err(StateError::Contended(format!(
            "the edit grants of session {session_id}"
        )))
    }

    /// Writes a grant (before the held call is released).
    pub(crate) async fn add(
        &self,
        session_id: &str,
        grant: EditGrant,
        now: u64,
    ) -> Result<(), StateError> {
        // Known before the write, so no lookup misses a grant once written.
        if let Some(sessions) = self.known().as_mut() {
            sessions.insert(session_id.to_owned());
        }
        self.change(session_id, |grants| {
            grants.add(grant.clone(), now);
            ((), true)
        })
        .await
    }

    /// Removes the unused grant an edit made (its release did not go
    /// through).
    pub(crate) async fn remove_unused(
        &self,
        session_id: &str,
        made_on: &str,
        digest: &str,
    ) -> Result<bool, StateError> {
        self.change(session_id, |grants| {
            let removed = grants.remove_unused(made_on, digest);
            (removed, removed)
        })
        .await
    }

    /// Uses a grant for the call `call_id` to `function_id` with arguments
    /// of `digest`: claims an unused one (one write), or finds the one it
    /// used already. A session without grants costs one read.
    pub(crate) async fn take(
        &self,
        session_id: &str,
        function_id: &str,
        digest: &str,
        call_id: &str,
    ) -> Result<Used, StateError> {
        if !self.may_hold(session_id) {
            return Ok(Used::Nothing);
        }
        let now = crate::time::now_ms();
        self.change(session_id, |grants| {
            match grants.find(function_id, digest, call_id, now) {
                Found::Nothing => (Used::Nothing, false),
                Found::UsedByIt(at) => (
                    Used::Again {
                        made_on: grants.grants[at].made_on.clone(),
                    },
                    false,
                ),
                Found::Unused(at) => {
                    let made_on = grants.grants[at].made_on.clone();
                    grants.claim(at, call_id);
                    grants.prune(now);
                    (Used::Claimed { made_on }, true)
                }
            }
        })
        .await
    }

    /// The live unused grant that covers a call, read only
    /// (`approval::evaluate`).
    pub(crate) async fn covering(
        &self,
        session_id: &str,
        function_id: &str,
        digest: &str,
    ) -> Result<Option<EditGrant>, StateError> {
        if !self.may_hold(session_id) {
            return Ok(None);
        }
        let grants = self.read(session_id).await?;
        let now = crate::time::now_ms();
        Ok(match grants.find(function_id, digest, "", now) {
            Found::Unused(at) => grants.grants.get(at).cloned(),
            _ => None,
        })
    }

    /// The session's purge: its grants go.
    pub(crate) async fn forget_session(&self, session_id: &str) -> Result<(), StateError> {
        let _serial = self.lock(session_id).await;
        self.engine.state_delete(&Scope::EDITS, session_id).await?;
        if let Some(sessions) = self.known().as_mut() {
            sessions.remove(session_id);
        }
        Ok(())
    }
}

/// A stored value: null is an empty set.
fn parse(session_id: &str, value: Value) -> Result<EditGrants, StateError> {
    if value.is_null() {
        return Ok(EditGrants::new(session_id));
    }
    serde_json::from_value(value).map_err(|source| StateError::Unreadable {
        what: format!("edit grants of session {session_id}"),
        source,
    })
}
