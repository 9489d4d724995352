//! The edit grants in state: one key per session under `approval_edits`
//! (`architecture/contract.md` § Edit, then approve).
//!
//! Every change of a session's grants is a read and a `state::set` under
//! one of the store's striped locks, and the swap's answer (what the key
//! held) is compared with what was read: a write made elsewhere meanwhile
//! (a standby taking over) makes the change start again on that value,
//! and write it back with the change on top even when the change then has
//! nothing to do. So of two identical calls in flight at once, one claims
//! the use and the other finds it used — the same way a uses-bounded grant
//! is spent. Between the two writes of such a collision, the key briefly
//! holds the loser's claim; a redelivery read in that window may continue
//! (`state::set` has no compare-and-swap to close it).
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
        // What the key holds as far as this change knows: what was read,
        // then what it last wrote.
        let mut expected = current.clone();
        // The last write replaced a value written elsewhere: that value goes
        // back (this change on top) even when the change finds nothing to
        // do on it — else a use claimed elsewhere would be lost under a
        // claim this change then gives up.
        let mut overwrote = false;
        for _ in 0..ATTEMPTS {
            let mut next = current.clone();
            let (out, changed) = change(&mut next);
            if !changed && !overwrote {
                return Ok(out);
            }
            let value = serde_json::to_value(&next)?;
            let replaced = self
                .engine
                .state_set(&Scope::EDITS, session_id, value)
                .await?;
            let theirs = parse(session_id, replaced.old_value)?;
            if theirs == expected {
                return Ok(out);
            }
            // Written elsewhere meanwhile: put their value back under our
            // change, on the next round.
            expected = next;
            current = theirs;
            overwrote = true;
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
    /// through); `digest: None` when the edited arguments are not known
    /// (`EditGrants::remove_unused`).
    pub(crate) async fn remove_unused(
        &self,
        session_id: &str,
        made_on: &str,
        digest: Option<&str>,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use approval_gate_testkit::fixture::{plain_client, EngineFixture};

    use super::*;

    /// Trials of the parallel-use property below.
    const TRIALS: usize = 500;

    /// A small deterministic generator (xorshift), so a failing trial can
    /// be replayed from its number.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rule_28_2_of_parallel_identical_uses_exactly_one_claims_over_many_interleavings() {
        let fixture = EngineFixture::start_test().await;
        let client = plain_client(&fixture.url(), "approval-gate-under-test", None);
        client
            .wait_until_registered(Duration::from_secs(10))
            .await
            .expect("connected");
        let engine = Engine::new(client);
        // Two stores on one state: the worker and a standby taking over,
        // each with its own locks, so their changes interleave freely.
        let stores = [
            Arc::new(EditStore::new(engine.clone())),
            Arc::new(EditStore::new(engine.clone())),
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut collided = 0;
        for trial in 0..TRIALS {
            let sid = format!("s{trial}");
            let now = crate::time::now_ms();
            let grant = EditGrant {
                made_on: "c0".into(),
                function_id: "demo::echo".into(),
                digest: "d".into(),
                expires_at: now + 600_000,
                used_by: None,
            };
            stores[0].add(&sid, grant, now).await.expect("written");
            let users = 2 + rng.below(3) as usize;
            let mut tasks = Vec::new();
            let mut on = Vec::new();
            for user in 0..users {
                let store = stores[rng.below(2) as usize].clone();
                on.push(Arc::as_ptr(&store));
                let yields = rng.below(4);
                let (sid, cid) = (sid.clone(), format!("c{}", user + 1));
                tasks.push(tokio::spawn(async move {
                    for _ in 0..yields {
                        tokio::task::yield_now().await;
                    }
                    let used = store.take(&sid, "demo::echo", "d", &cid).await;
                    (cid, used)
                }));
            }
            if on.iter().any(|p| *p != on[0]) {
                collided += 1;
            }
            let mut winners = Vec::new();
            for task in tasks {
                let (cid, used) = task.await.expect("a use");
                match used.expect("a state answer") {
                    Used::Claimed { made_on } => {
                        assert_eq!(made_on, "c0", "trial {trial}");
                        winners.push(cid);
                    }
                    Used::Nothing => {}
                    Used::Again { .. } => panic!("trial {trial}: {cid} used it before"),
                }
            }
            assert_eq!(winners.len(), 1, "trial {trial}: {winners:?}");
            let winner = &winners[0];
            // What is stored names the winner, so only its redelivery
            // continues again; a loser's is judged as usual.
            let stored = stores[0].read(&sid).await.expect("read");
            assert_eq!(stored.grants.len(), 1, "trial {trial}: {stored:?}");
            assert_eq!(
                stored.grants[0].used_by.as_deref(),
                Some(winner.as_str()),
                "trial {trial}: {stored:?}"
            );
            let again = stores[1]
                .take(&sid, "demo::echo", "d", winner)
                .await
                .expect("a state answer");
            assert_eq!(
                again,
                Used::Again {
                    made_on: "c0".into()
                },
                "trial {trial}"
            );
            for user in 1..=users {
                let cid = format!("c{user}");
                if &cid != winner {
                    let loser = stores[0]
                        .take(&sid, "demo::echo", "d", &cid)
                        .await
                        .expect("a state answer");
                    assert_eq!(loser, Used::Nothing, "trial {trial}: {cid}");
                }
            }
        }
        assert!(
            collided > TRIALS / 4,
            "only {collided} trials raced both stores"
        );
    }
}
