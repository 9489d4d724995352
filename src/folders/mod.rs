//! Folder access below the surfaces: what the grant watch remembers
//! ([`memory`]), the harness's durable filesystem grants of either
//! generation, the `always` persist into the shell's roots ([`host_roots`]),
//! and the grants a failed release must still take back ([`revokes`]).
//!
//! The grant watch (asking) and the release path (deciding) both stand on
//! this module; it knows neither.

pub(crate) mod host_roots;
pub(crate) mod memory;
pub(crate) mod revokes;

use std::sync::Mutex;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::engine::{CallError, Engine, Generation};
use memory::GrantMemory;
use revokes::Revokes;

/// How long a folder grant lasts (folder prompts only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum GrantScope {
    /// This one call.
    Once,
    /// The rest of the session.
    Session,
    /// The session, and the shell's configured roots.
    Always,
}

impl GrantScope {
    /// The wire spelling (also what the logs say).
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// Path containment by components: `/a/b` contains `/a/b` and `/a/b/c`,
/// not `/a/bc`. Pure.
pub fn contains(parent: &str, child: &str) -> bool {
    !parent.is_empty() && std::path::Path::new(child).starts_with(std::path::Path::new(parent))
}

/// The harness generation as last detected on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detected {
    /// Not looked up yet (or forgotten after a reconnect or a
    /// `function_not_found`).
    Unknown,
    /// Looked up: `None` is a harness without a grant plane.
    Known(Option<Generation>),
}

/// Folder access: memory, grants, persists, pending revokes.
pub(crate) struct Folders {
    engine: Engine,
    /// Ask counters and denied dirs.
    pub(crate) memory: GrantMemory,
    /// Grants to take back, kept until the harness took them back.
    pub(crate) revokes: Revokes,
    /// Serializes this worker's persists of the shell's roots.
    shell_config: tokio::sync::Mutex<()>,
    generation: Mutex<Detected>,
}

impl Folders {
    pub(crate) fn new(engine: Engine) -> Folders {
        Folders {
            memory: GrantMemory::new(engine.clone()),
            revokes: Revokes::new(engine.clone()),
            engine,
            shell_config: tokio::sync::Mutex::new(()),
            generation: Mutex::new(Detected::Unknown),
        }
    }

    fn detected(&self) -> std::sync::MutexGuard<'_, Detected> {
        crate::sync::lock(&self.generation)
    }

    /// The harness generation serving the engine, looked up once per
    /// connection (`architecture/contract.md` § Two harness generations):
    /// `None` when no grant plane exists.
    pub(crate) async fn generation(&self) -> Result<Option<Generation>, CallError> {
        if let Detected::Known(generation) = *self.detected() {
            return Ok(generation);
        }
        let generation = self.engine.harness_generation().await?;
        *self.detected() = Detected::Known(generation);
        tracing::debug!(
            generation = generation.map_or("none", Generation::as_str),
            "harness generation detected"
        );
        Ok(generation)
    }

    /// Looks the generation up again at its next use (a reconnect, a
    /// harness that went away or was replaced).
    pub(crate) fn forget_generation(&self) {
        *self.detected() = Detected::Unknown;
    }

    /// A failed grant call: a `function_not_found` means the harness changed
    /// under us, so the generation is looked up again next time.
    fn noticed(&self, err: &CallError) {
        if err.is_function_not_found() {
            self.forget_generation();
        }
    }

    /// The session's durable roots; `Ok(None)` when the harness has no
    /// grant plane.
    pub(crate) async fn granted_roots(
        &self,
        session_id: &str,
        budget: Duration,
    ) -> Result<Option<Vec<String>>, CallError> {
        let Some(generation) = self.generation().await? else {
            return Ok(None);
        };
        match self.engine.fs_grants(generation, session_id, budget).await {
            Ok(roots) => Ok(Some(roots)),
            Err(err) => {
                self.noticed(&err);
                Err(err)
            }
        }
    }

    /// Grants `dir` to the session durably.
    pub(crate) async fn grant(&self, session_id: &str, dir: &str) -> Result<(), CallError> {
        let generation = self.generation().await?.ok_or_else(|| no_plane("grant"))?;
        self.engine
            .fs_grant(generation, session_id, dir)
            .await
            .map(|_| ())
            .inspect_err(|err| self.noticed(err))
    }

    /// Takes a durable grant back now; `Err` leaves it to the caller to keep
    /// trying.
    pub(crate) async fn revoke(&self, session_id: &str, dir: &str) -> Result<(), CallError> {
        let generation = self.generation().await?.ok_or_else(|| no_plane("revoke"))?;
        self.engine
            .fs_revoke(generation, session_id, dir)
            .await
            .map(|_| ())
            .inspect_err(|err| self.noticed(err))
    }

    /// Takes a grant back, and when the harness does not take it now, keeps
    /// it (durably) for [`revokes::run`] to retry until it does.
    pub(crate) async fn revoke_or_keep(&self, session_id: &str, dir: &str) {
        match self.revoke(session_id, dir).await {
            Ok(()) => tracing::info!(session_id, dir, "folder grant taken back"),
            Err(err) => {
                tracing::warn!(session_id, dir, error = %err, "folder grant not taken back; kept to retry until it is");
                if let Err(err) = self.revokes.keep(session_id, dir).await {
                    tracing::error!(session_id, dir, error = %err, "a folder grant to take back could not be stored; it stays granted");
                }
            }
        }
    }

    /// Adds `dir` to the shell's configured roots without undoing a
    /// concurrent edit.
    pub(crate) async fn persist_host_root(
        &self,
        dir: &str,
    ) -> Result<bool, host_roots::PersistError> {
        host_roots::persist(&self.engine, &self.shell_config, dir).await
    }
}

/// The error of a grant call on a harness without a grant plane.
fn no_plane(what: &str) -> CallError {
    CallError {
        function_id: format!("harness filesystem {what}"),
        code: crate::engine::ErrorCode::FunctionNotFound,
        message: "the harness has no filesystem-grant plane".into(),
    }
}
