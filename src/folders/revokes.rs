//! Folder grants to take back (`architecture/contract.md` § Releasing a held
//! call): a `session` grant is made before the harness runs the released
//! call; when the release fails or the harness no longer held the call, the
//! grant is revoked, and a revoke the harness does not take is kept here and
//! retried with backoff until it succeeds — across restarts, since it is
//! stored.
//!
//! # Format
//!
//! `approval_revokes` / `<session_id>` → `{ session_id, dirs: ["/dir", ...] }`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::engine::{CallError, Engine, Scope};

/// One session's grants to take back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) session_id: String,
    #[serde(default)]
    pub(crate) dirs: Vec<String>,
}

const STRIPES: usize = 16;

/// The stored revokes, and the same set in memory (read once at boot, kept
/// up to date by [`Revokes::keep`] and [`Revokes::done`]), so retrying
/// never lists the scope.
pub(crate) struct Revokes {
    engine: Engine,
    stripes: Vec<tokio::sync::Mutex<()>>,
    known: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Wakes the retry loop when a revoke is kept.
    kept: tokio::sync::Notify,
}

impl Revokes {
    pub(crate) fn new(engine: Engine) -> Revokes {
        Revokes {
            engine,
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            known: std::sync::Mutex::default(),
            kept: tokio::sync::Notify::new(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<(String, String)>> {
        crate::sync::lock(&self.known)
    }

    async fn lock(&self, session_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut h = DefaultHasher::new();
        session_id.hash(&mut h);
        self.stripes[(h.finish() as usize) % STRIPES].lock().await
    }

    async fn read(&self, session_id: &str) -> Result<Pending, CallError> {
        let value = self.engine.state_get(&Scope::REVOKES, session_id).await?;
        Ok(serde_json::from_value(value).unwrap_or_else(|_| Pending {
            session_id: session_id.to_string(),
            dirs: Vec::new(),
        }))
    }

    /// Keeps a revoke to retry.
    pub(crate) async fn keep(&self, session_id: &str, dir: &str) -> Result<(), CallError> {
        {
            let _serial = self.lock(session_id).await;
            let mut pending = self.read(session_id).await?;
            if !pending.dirs.iter().any(|d| d == dir) {
                pending.dirs.push(dir.to_string());
            }
            let value = serde_json::to_value(&pending).unwrap_or_default();
            self.engine
                .state_set(&Scope::REVOKES, session_id, value)
                .await?;
        }
        self.known()
            .insert((session_id.to_string(), dir.to_string()));
        self.kept.notify_one();
        Ok(())
    }

    /// Drops a revoke that was taken.
    pub(crate) async fn done(&self, session_id: &str, dir: &str) -> Result<(), CallError> {
        let _serial = self.lock(session_id).await;
        let mut pending = self.read(session_id).await?;
        pending.dirs.retain(|d| d != dir);
        self.known()
            .remove(&(session_id.to_string(), dir.to_string()));
        if pending.dirs.is_empty() {
            self.engine
                .state_delete(&Scope::REVOKES, session_id)
                .await?;
        } else {
            let value = serde_json::to_value(&pending).unwrap_or_default();
            self.engine
                .state_set(&Scope::REVOKES, session_id, value)
                .await?;
        }
        Ok(())
    }

    /// Reads the stored revokes (boot); returns how many are kept.
    pub(crate) async fn load(&self) -> Result<usize, CallError> {
        let stored = self.engine.state_list(&Scope::REVOKES).await?;
        let mut known = self.known();
        for pending in stored
            .into_iter()
            .filter_map(|v| serde_json::from_value::<Pending>(v).ok())
        {
            for dir in pending.dirs {
                known.insert((pending.session_id.clone(), dir));
            }
        }
        Ok(known.len())
    }

    /// The kept revokes, `(session_id, dir)`.
    pub(crate) fn pending(&self) -> Vec<(String, String)> {
        self.known().iter().cloned().collect()
    }

    /// Resolves when a revoke was kept since the last call.
    pub(crate) async fn kept(&self) {
        self.kept.notified().await;
    }
}

/// The waits between rounds while kept revokes remain: a second, doubled
/// each round, at most a minute.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// Retries the kept revokes until each is taken: a round over every kept
/// revoke, then a wait that doubles while some remain (1 s up to a minute);
/// with none left it sleeps until one is kept. Runs for the worker's life.
pub(crate) async fn run(folders: std::sync::Arc<super::Folders>) {
    let mut retry = RETRY;
    loop {
        let mut left = 0;
        for (session_id, dir) in folders.revokes.pending() {
            match folders.revoke(&session_id, &dir).await {
                Ok(()) => {
                    tracing::info!(session_id, dir, "kept folder grant taken back");
                    if let Err(err) = folders.revokes.done(&session_id, &dir).await {
                        tracing::warn!(session_id, dir, error = %err, "taken-back grant not crossed off; it is revoked again");
                        left += 1;
                    }
                }
                Err(err) => {
                    tracing::debug!(session_id, dir, error = %err, "kept folder grant still not taken back");
                    left += 1;
                }
            }
        }
        if left == 0 {
            retry.reset();
            folders.revokes.kept().await;
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(retry.next_delay()) => {}
            () = folders.revokes.kept() => {}
        }
    }
}
