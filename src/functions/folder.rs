//! Releasing folder-access records (contract §6, resolve table): grant
//! scopes once / session / always, and the deny path that remembers the dir.

use serde_json::{json, Map, Value};

use super::resolve::{deliver_denial, GrantScope, ResolveDecision};
use crate::pending::record::PendingRecord;
use crate::worker::Worker;

/// State scope of the dirs a session's user denied: key `<session_id>`,
/// value a deduplicated list of dirs.
pub const DENIED_SCOPE: &str = "approval_grant_denied";
/// The shell's configuration entry.
pub const SHELL_CONFIG_ID: &str = "shell";

fn execute(record: &PendingRecord, extra_roots: Option<&str>) -> Value {
    let mut payload = json!({
        "session_id": record.session_id,
        "turn_id": record.turn_id,
        "function_call_id": record.function_call_id,
        "action": "execute",
    });
    if let Some(dir) = extra_roots {
        payload["extra_roots"] = json!([dir]);
    }
    payload
}

/// Builds the harness payload for a decision on a folder_access record,
/// doing the grant-side effects first.
pub async fn release(
    worker: &Worker,
    record: &PendingRecord,
    decision: ResolveDecision,
    scope: Option<GrantScope>,
    reason: &Option<String>,
) -> Value {
    let dir = record
        .grant_request
        .as_ref()
        .map(|g| g.dir.clone())
        .unwrap_or_default();
    match decision {
        ResolveDecision::Deny => {
            if let Err(err) = remember_denied(worker, &record.session_id, &dir).await {
                tracing::warn!(session_id = %record.session_id, error = %err, "denied dir not remembered");
            }
            let text = reason
                .as_ref()
                .map(|r| r.trim().to_string())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| format!("user denied folder access to {dir}"));
            deliver_denial(record, text)
        }
        ResolveDecision::Allow => match scope.unwrap_or(GrantScope::Once) {
            GrantScope::Once => execute(record, Some(&dir)),
            GrantScope::Session | GrantScope::Always => {
                let granted = worker
                    .sibling
                    .workspace_grant(&record.session_id, &dir)
                    .await;
                if matches!(scope, Some(GrantScope::Always)) {
                    if let Err(err) = persist_host_root(worker, &dir).await {
                        tracing::warn!(dir, error = %err, "shell fs.host_roots not updated");
                    }
                }
                match granted {
                    Ok(_) => execute(record, None),
                    Err(err) => {
                        tracing::warn!(session_id = %record.session_id, dir, error = %err, "durable grant failed; releasing with a one-shot root");
                        execute(record, Some(&dir))
                    }
                }
            }
        },
    }
}

/// Adds `dir` to the session's denied dirs (deduplicated).
pub async fn remember_denied(
    worker: &Worker,
    session_id: &str,
    dir: &str,
) -> Result<(), crate::client::CallError> {
    let _serial = worker.grant_lock.lock().await;
    let current = worker.sibling.state_get(DENIED_SCOPE, session_id).await?;
    let mut dirs: Vec<String> = serde_json::from_value(current).unwrap_or_default();
    if !dirs.iter().any(|d| d == dir) {
        dirs.push(dir.to_string());
    }
    worker
        .sibling
        .state_set(DENIED_SCOPE, session_id, json!(dirs))
        .await?;
    Ok(())
}

/// The dirs a session's user denied.
pub async fn denied_dirs(
    worker: &Worker,
    session_id: &str,
) -> Result<Vec<String>, crate::client::CallError> {
    let current = worker.sibling.state_get(DENIED_SCOPE, session_id).await?;
    Ok(serde_json::from_value(current).unwrap_or_default())
}

/// Adds `dir` to `value.fs.host_roots` (levels created, siblings kept, no
/// duplicates). Pure.
pub fn with_host_root(value: &Value, dir: &str) -> Value {
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

/// Best-effort, serialized read-merge-write of the shell's configuration.
async fn persist_host_root(worker: &Worker, dir: &str) -> Result<(), crate::client::CallError> {
    let _serial = worker.shell_config_lock.lock().await;
    let current = worker
        .sibling
        .configuration_get(SHELL_CONFIG_ID, true)
        .await?;
    let next = with_host_root(&current, dir);
    if next != current {
        worker
            .sibling
            .configuration_set(SHELL_CONFIG_ID, &next)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
