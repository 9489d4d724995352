//! Carrying out a decision on a folder-access prompt
//! (`architecture/contract.md` § The grant watch, "Resolving a folder_access
//! record"): the grant scopes once / session / always, and the deny path that
//! remembers the dir. The resolve asks this module for the release to send.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::state::GrantWatch;
use crate::engine::{CallError, Engine, ReleaseAction};
use crate::inbox::PendingRecord;

/// The shell's configuration entry.
const SHELL_CONFIG_ID: &str = "shell";

/// How long a folder grant lasts (folder_access records only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GrantScope {
    /// This one call.
    Once,
    /// The rest of the session.
    Session,
    /// The session, and the shell's configured roots.
    Always,
}

impl GrantScope {
    /// The wire spelling (also what the logs say).
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Once => "once",
            GrantScope::Session => "session",
            GrantScope::Always => "always",
        }
    }
}

/// The dir a folder prompt asks about.
fn dir_of(record: &PendingRecord) -> &str {
    record
        .grant_request
        .as_ref()
        .map(|g| g.dir.as_str())
        .unwrap_or_default()
}

impl GrantWatch {
    /// Allow: the grant-side effects of `scope` first, then the release.
    /// `session` and `always` grant durably through the harness; if that
    /// fails the call is released with a one-shot root so the click still
    /// works. `always` also adds the dir to the shell's `fs.host_roots`, best
    /// effort.
    pub(crate) async fn allow(
        &self,
        engine: &Engine,
        record: &PendingRecord,
        scope: GrantScope,
    ) -> ReleaseAction {
        let dir = dir_of(record);
        if scope == GrantScope::Once {
            return ReleaseAction::execute(Some(dir));
        }
        let granted = engine.workspace_grant(&record.session_id, dir).await;
        if scope == GrantScope::Always {
            if let Err(err) = self.persist_host_root(engine, dir).await {
                tracing::warn!(dir, error = %err, "shell fs.host_roots not updated");
            }
        }
        match granted {
            Ok(_) => ReleaseAction::execute(None),
            Err(err) => {
                tracing::warn!(session_id = %record.session_id, dir, error = %err, "durable grant failed; releasing with a one-shot root");
                ReleaseAction::execute(Some(dir))
            }
        }
    }

    /// Deny: remember the dir for the session first, then answer the call
    /// with `reason`, or `user denied folder access to <dir>`.
    pub(crate) async fn deny(&self, record: &PendingRecord, reason: Option<&str>) -> ReleaseAction {
        let dir = dir_of(record);
        if let Err(err) = self.memory.remember_denied(&record.session_id, dir).await {
            tracing::warn!(session_id = %record.session_id, error = %err, "denied dir not remembered");
        }
        let text = reason
            .map(str::to_string)
            .unwrap_or_else(|| format!("user denied folder access to {dir}"));
        record.user_denial(&text)
    }

    /// Best-effort, serialized read-merge-write of the shell's configuration.
    async fn persist_host_root(&self, engine: &Engine, dir: &str) -> Result<(), CallError> {
        let _serial = self.shell_config.lock().await;
        let current = engine.configuration_get(SHELL_CONFIG_ID, true).await?;
        let next = with_host_root(&current, dir);
        if next != current {
            engine.configuration_set(SHELL_CONFIG_ID, &next).await?;
        }
        Ok(())
    }
}

/// Adds `dir` to `value.fs.host_roots` (levels created, siblings kept, no
/// duplicates). Pure.
fn with_host_root(value: &Value, dir: &str) -> Value {
    let mut root = value.as_object().cloned().unwrap_or_default();
    let mut fs = root
        .get("fs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(Map::new);
    let mut roots: Vec<Value> = fs
        .get("host_roots")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !roots.iter().any(|r| r.as_str() == Some(dir)) {
        roots.push(Value::String(dir.to_string()));
    }
    fs.insert("host_roots".into(), Value::Array(roots));
    root.insert("fs".into(), Value::Object(fs));
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn host_roots_merge() {
        let v = with_host_root(&Value::Null, "/a");
        assert_eq!(v, json!({"fs": {"host_roots": ["/a"]}}));
        let v = with_host_root(
            &json!({"x": 1, "fs": {"deny": ["/p"], "host_roots": ["/a"]}}),
            "/b",
        );
        assert_eq!(
            v,
            json!({"x": 1, "fs": {"deny": ["/p"], "host_roots": ["/a", "/b"]}})
        );
        let again = with_host_root(&v, "/b");
        assert_eq!(again, v);
    }
}
