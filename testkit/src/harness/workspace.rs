//! Durable workspace grants: roots a session may use beyond its own
//! workspace, kept until revoked.
//!
//! # Format
//!
//! `harness::workspace::grant {session_id, root}`,
//! `harness::workspace::grants {session_id}`,
//! `harness::workspace::revoke {session_id, root}`, each →
//! `{ "session_id": "s1", "roots": ["/a", "/b"] }` (sorted, deduplicated).
//! Roots are stored as given; an empty `session_id` or `root` is
//! `invalid_payload`.

use std::sync::{Arc, Weak};

use iii_sdk::{Error, RegisterFunction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{lock, Core, WORKSPACE_GRANT, WORKSPACE_GRANTS, WORKSPACE_REVOKE};

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

pub(super) fn register(core: &Arc<Core>) {
    for (id, change, description) in [
        (
            WORKSPACE_GRANT,
            Change::Grant,
            "Grant a session a durable workspace root",
        ),
        (
            WORKSPACE_REVOKE,
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
        WORKSPACE_GRANTS,
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
