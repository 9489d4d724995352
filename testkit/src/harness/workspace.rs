//! Durable grants: roots a session may use beyond its own workspace, kept
//! until revoked.
//!
//! # Format
//!
//! Generation 1: `harness::workspace::grant {session_id, root}`,
//! `harness::workspace::grants {session_id}`,
//! `harness::workspace::revoke {session_id, root}`; generation 2 the same
//! under `harness::filesystem::*` (and no `harness::workspace::*`). Each →
//! `{ "session_id": "s1", "roots": ["/a", "/b"] }` (sorted, deduplicated).
//! Roots are stored as given; an empty `session_id` or `root` is
//! `invalid_payload`.

use std::sync::{Arc, Weak};

use iii_sdk::{Error, RegisterFunction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    lock, Core, FILESYSTEM_GRANT, FILESYSTEM_GRANTS, FILESYSTEM_REVOKE, WORKSPACE_GRANT,
    WORKSPACE_GRANTS, WORKSPACE_REVOKE,
};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RootRequest {
    pub session_id: String,
    pub root: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SessionRequest {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RootsResponse {
    pub session_id: String,
    pub roots: Vec<String>,
}

#[derive(Clone, Copy)]
enum Change {
    Grant,
    Revoke,
}

fn invalid(what: &str) -> Error {
    Error::Remote {
        code: "invalid_payload".into(),
        message: format!("invalid_payload: {what} must not be empty"),
        stacktrace: None,
    }
}

fn gone() -> Error {
    Error::Handler("harness stopped".into())
}

/// Generation 1: `harness::workspace::*`.
pub(super) fn register(core: &Arc<Core>) {
    register_ids(core, [WORKSPACE_GRANT, WORKSPACE_GRANTS, WORKSPACE_REVOKE]);
}

/// Generation 2: `harness::filesystem::{grant,grants,revoke}`.
pub(super) fn register_filesystem(core: &Arc<Core>) {
    register_ids(
        core,
        [FILESYSTEM_GRANT, FILESYSTEM_GRANTS, FILESYSTEM_REVOKE],
    );
}

fn register_ids(core: &Arc<Core>, [grant, list, revoke]: [&'static str; 3]) {
    for (id, change, description) in [
        (
            grant,
            Change::Grant,
            "Grant a session a durable workspace root",
        ),
        (
            revoke,
            Change::Revoke,
            "Revoke a session's durable workspace root",
        ),
    ] {
        let weak: Weak<Core> = Arc::downgrade(core);
        core.iii.register_function(
            id,
            RegisterFunction::new_async(move |req: RootRequest| {
                let core = weak.upgrade();
                async move { core.ok_or_else(gone)?.change_root(req, change) }
            })
            .description(description),
        );
    }
    let weak: Weak<Core> = Arc::downgrade(core);
    core.iii.register_function(
        list,
        RegisterFunction::new_async(move |req: SessionRequest| {
            let core = weak.upgrade();
            async move {
                let core = core.ok_or_else(gone)?;
                if req.session_id.is_empty() {
                    return Err(invalid("session_id"));
                }
                Ok(RootsResponse {
                    roots: core.roots(&req.session_id),
                    session_id: req.session_id,
                })
            }
        })
        .description("List a session's durable workspace roots"),
    );
}

impl Core {
    fn change_root(&self, req: RootRequest, change: Change) -> Result<RootsResponse, Error> {
        if req.session_id.is_empty() {
            return Err(invalid("session_id"));
        }
        if req.root.is_empty() {
            return Err(invalid("root"));
        }
        let mut grants = lock(&self.grants);
        let roots = grants.entry(req.session_id.clone()).or_default();
        match change {
            Change::Grant => {
                roots.insert(req.root);
            }
            Change::Revoke => {
                roots.remove(&req.root);
            }
        }
        Ok(RootsResponse {
            roots: roots.iter().cloned().collect(),
            session_id: req.session_id,
        })
    }
}
