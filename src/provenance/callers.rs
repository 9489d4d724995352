//! A caller's worker name (`architecture/contract.md` § Provenance): the
//! engine stamps `_caller_worker_id` into every object payload a worker
//! sends, overwriting any value the payload carried, so the id names the
//! connection that really called. Its name comes from
//! `engine::workers::list`, looked up once per id and cached.
//!
//! A payload that reaches the worker without the engine's stamp (the HTTP
//! worker calls in-process) has no caller; a link's decision says `"link"`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{Caller, WorkerCaller};
use crate::engine::Engine;

/// Ids kept; past it the cache starts again (worker ids are per
/// connection, so a long-lived worker meets new ones at every reconnect).
const MAX_CACHED: usize = 1024;
/// How long one look-up may take; a decision waits for it at most once per
/// caller.
const LOOKUP_BUDGET: Duration = Duration::from_millis(1500);

/// Worker names by worker id.
pub(crate) struct Callers {
    engine: Engine,
    /// Held for in-memory work only, never across an `.await`.
    names: Mutex<HashMap<String, String>>,
}

impl Callers {
    pub(crate) fn new(engine: Engine) -> Callers {
        Callers {
            engine,
            names: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, worker_id: &str) -> Option<String> {
        let names = crate::sync::lock(&self.names);
        names.get(worker_id).cloned()
    }

    /// The caller a payload's engine stamp names (`None` without one). The
    /// name is looked up on a cache miss; a failed or late look-up leaves
    /// it out (the id still says who called).
    pub(crate) async fn of(&self, stamped: Option<&str>) -> Option<Caller> {
        let worker_id = stamped.map(str::trim).filter(|id| !id.is_empty())?;
        let worker_name = match self.cached(worker_id) {
            Some(name) => Some(name),
            None => self.look_up(worker_id).await,
        };
        Some(Caller::Worker(WorkerCaller {
            worker_id: worker_id.to_string(),
            worker_name,
        }))
    }

    async fn look_up(&self, worker_id: &str) -> Option<String> {
        let listed = match tokio::time::timeout(LOOKUP_BUDGET, self.engine.workers()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "engine::workers::list failed; the caller is named by id only");
                return None;
            }
            Err(_) => return None,
        };
        let mut names = crate::sync::lock(&self.names);
        if names.len() + listed.len() > MAX_CACHED {
            names.clear();
        }
        let found = listed
            .iter()
            .find(|(id, _)| id == worker_id)
            .map(|(_, name)| name.clone());
        names.extend(listed);
        found
    }
}
