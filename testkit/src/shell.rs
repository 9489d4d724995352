//! A jail-enforcing shell/coder double, as a [`Behaviour`] for the
//! [`TargetWorker`](super::targets::TargetWorker): a call whose `path`
//! argument is outside every trusted root is rejected with the exact
//! messages and `grant_hint=` tail of the shell and coder.
//!
//! # Format
//!
//! Trusted roots: the double's host roots, plus what the harness passes in the
//! invocation metadata (`working_dir`, `granted_roots`, `extra_roots`).
//! Rejections (message ends with one space and the hint, nothing after it):
//!
//! * shell `S215`: `path escapes the fs jail roots [<roots>]: <path> grant_hint={"v":1,"dir":..,"path":..,"code":"S215"}`
//! * coder `C215`: `path is outside the session directory <base> and outside every allowed root: <path>. Ask for access or use a path under <base>. grant_hint=…`
//! * coder, generic form: code `E_TOOL`, message the JSON `{"code":"C215","message":"…"}`

use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::targets::{Behaviour, TargetCall, TargetError};

/// How the double words its rejections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The shell: `S215`.
    Shell,
    /// The coder: `C215`.
    Coder,
    /// A coder version that wraps the error in a generic code.
    CoderGeneric,
    /// A denylisted path: `S215 path is denylisted`, no hint.
    Denylisted,
}

/// The jail double.
pub struct JailShell {
    dialect: Dialect,
    host_roots: Mutex<Vec<String>>,
    /// When set, the workspace, granted and one-shot roots are all ignored
    /// (a shell that keeps rejecting: the re-ask limit, and a workspace path
    /// the jail wrongly rejects).
    stubborn: bool,
}

impl JailShell {
    /// A double trusting `host_roots`.
    pub fn new(dialect: Dialect, host_roots: &[&str]) -> JailShell {
        JailShell {
            dialect,
            host_roots: Mutex::new(host_roots.iter().map(|s| s.to_string()).collect()),
            stubborn: false,
        }
    }

    /// A double that ignores granted and one-shot roots.
    pub fn stubborn(dialect: Dialect) -> JailShell {
        JailShell {
            stubborn: true,
            ..JailShell::new(dialect, &[])
        }
    }

    fn roots(&self, call: &TargetCall) -> Vec<String> {
        let mut roots = self
            .host_roots
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let meta = call.metadata.clone().unwrap_or(Value::Null);
        if self.stubborn {
            return roots;
        }
        if let Some(ws) = meta.get("working_dir").and_then(Value::as_str) {
            roots.push(ws.to_string());
        }
        {
            for key in ["granted_roots", "extra_roots"] {
                if let Some(list) = meta.get(key).and_then(Value::as_array) {
                    roots.extend(list.iter().filter_map(Value::as_str).map(str::to_string));
                }
            }
        }
        roots
    }
}

/// The hint tail: one space, `grant_hint=`, the JSON.
pub fn hint_tail(dir: &str, path: &str, code: &str) -> String {
    format!(
        " grant_hint={}",
        json!({"v": 1, "dir": dir, "path": path, "code": code})
    )
}

impl Behaviour for JailShell {
    fn respond(&self, call: &TargetCall) -> Result<Value, TargetError> {
        let path = call
            .payload
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("/");
        let roots = self.roots(call);
        if roots.iter().any(|r| Path::new(path).starts_with(r)) {
            return Ok(json!({"ok": true, "path": path}));
        }
        let dir = Path::new(path)
            .parent()
            .and_then(|p| p.to_str())
            .unwrap_or("/")
            .to_string();
        let base = call
            .metadata
            .as_ref()
            .and_then(|m| m.get("working_dir"))
            .and_then(Value::as_str)
            .unwrap_or("/w")
            .to_string();
        match self.dialect {
            Dialect::Shell => Err(TargetError::new(
                "S215",
                format!(
                    "path escapes the fs jail roots [{}]: {path}{}",
                    roots.join(", "),
                    hint_tail(&dir, path, "S215")
                ),
            )),
            Dialect::Coder => Err(TargetError::new("C215", coder_message(&base, path, &dir))),
            Dialect::CoderGeneric => Err(TargetError::new(
                "E_TOOL",
                json!({"code": "C215", "message": coder_message(&base, path, &dir)}).to_string(),
            )),
            Dialect::Denylisted => Err(TargetError::new(
                "S215",
                format!("path is denylisted: {path}"),
            )),
        }
    }
}

fn coder_message(base: &str, path: &str, dir: &str) -> String {
    format!(
        "path is outside the session directory {base} and outside every allowed root: {path}. Ask for access or use a path under {base}.{}",
        hint_tail(dir, path, "C215")
    )
}
