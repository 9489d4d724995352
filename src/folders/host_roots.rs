//! The folder `always` grant's persist: the dir joins the shell's configured
//! roots, `fs.host_roots` of the `shell` configuration entry
//! (`architecture/contract.md` § The grant watch, "Resolving a folder prompt",
//! and § No fail-open left, rule 10).
//!
//! The configuration worker has no compare-and-set, so the persist is a
//! read-merge-write with a compare step: `configuration::set` returns the
//! value it replaced; when that is not the value the merge was made from, an
//! operator (or another persist) wrote in between and the write undid their
//! change, so the dir is merged into what they wrote and written again.
//! Writes of this worker are serialized too, so two persists in flight both
//! land.

use serde_json::{Map, Value};

use crate::engine::{CallError, Engine};

/// The shell's configuration entry.
const SHELL_CONFIG_ID: &str = "shell";

/// How many compare rounds a persist makes before it gives up (each round
/// is one read or one write racing a concurrent editor).
const MAX_ROUNDS: usize = 8;

/// Adds `dir` to `fs.host_roots` of the shell's entry, never undoing a
/// concurrent edit. `Ok(false)` when the dir was there already.
pub(crate) async fn persist(
    engine: &Engine,
    serial: &tokio::sync::Mutex<()>,
    dir: &str,
) -> Result<bool, PersistError> {
    let _serial = serial.lock().await;
    let mut base = engine.configuration_get(SHELL_CONFIG_ID, true).await?;
    for _ in 0..MAX_ROUNDS {
        let next = with_host_root(&base, dir);
        if next == base {
            return Ok(false);
        }
        let replaced = engine.configuration_set(SHELL_CONFIG_ID, &next).await?;
        let old = replaced.get("old_value").cloned().unwrap_or(Value::Null);
        if old == base {
            return Ok(true);
        }
        // Someone wrote between our read and our write: theirs is `old`,
        // which our write replaced. Merge into theirs and write again.
        tracing::info!(
            dir,
            "the shell's configuration changed during the persist; merging again"
        );
        base = old;
    }
    Err(PersistError::Contended)
}

/// Why a persist did not land.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PersistError {
    /// A configuration call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Concurrent edits kept changing the value.
    #[error("the shell's configuration kept changing; the dir was not persisted")]
    Contended,
}

/// Adds `dir` to `value.fs.host_roots` (levels created, siblings kept, no
/// duplicates). Pure.
pub(crate) fn with_host_root(value: &Value, dir: &str) -> Value {
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
