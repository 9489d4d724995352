//! A jail-enforcing shell/coder double, as a [`Behaviour`] for the
//! [`TargetWorker`](super::targets::TargetWorker): a call whose `path`
//! argument is outside every trusted root is rejected with the messages and
//! the machine-readable tail of the shell and coder — the brief's
//! (generation 1) or today's (generation 2), whichever harness called it.
//!
//! # Which generation
//!
//! The harness double says which one it plays in the invocation metadata
//! (`"generation": 2` from today's harness; absent from the brief's). The
//! brief's rules below apply unless it says 2.
//!
//! # Generation 1
//!
//! Trusted roots: the double's host roots, plus what the harness passes in the
//! invocation metadata (`working_dir`, `granted_roots`, `extra_roots`).
//! Rejections (message ends with one space and the hint, nothing after it):
//!
//! * shell `S215`: `path escapes the fs jail roots [<roots>]: <path> grant_hint={"v":1,"dir":..,"path":..,"code":"S215"}`
//! * coder `C215`: `path is outside the session directory <base> and outside every allowed root: <path>. Ask for access or use a path under <base>. grant_hint=…`
//! * coder, generic form: code `E_TOOL`, message the JSON `{"code":"C215","message":"…"}`
//!
//! # Generation 2
//!
//! The roots come from the harness's stamp in the arguments,
//! `fs_scope: {root, grants, boundary}` (never from the metadata):
//!
//! * boundary `workspace`: the root and the grants only. A path inside one
//!   of the host roots but outside them is `S220` (coder `C218`): `this
//!   session is scoped to <root>; <path> is inside an allowed root but
//!   outside the session directory — use a path under <root>` (the coder
//!   ends with a period); a path outside every root is `S215` / `C215` as
//!   above.
//! * boundary `configured_roots`, or no stamp: the host roots only (the
//!   stamp's root only anchors relative paths), `S215` / `C215`.
//!
//! Relative paths are taken under the stamp's root and `..` is resolved
//! before any check. The tail is
//! `filesystem_access_request={"v":1,"requested_root":..,"attempted_path":..,"error_code":..}`
//! (keys in that order), after one space, nothing after it.
//!
//! # Switches
//!
//! [`JailShell::with_tail`] forces one tail whatever the generation;
//! [`JailShell::with_prefix`] starts every message (but the generic coder
//! form's JSON) with `remote error (<code>): ` or `handler error: `.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};

use super::targets::{Behaviour, TargetCall, TargetError};

/// How the double words its rejections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The shell: `S215` (and `S220` on generation 2).
    Shell,
    /// The coder: `C215` (and `C218` on generation 2).
    Coder,
    /// A coder version that wraps the error in a generic code.
    CoderGeneric,
    /// A denylisted path: `S215 path is denylisted`, no tail.
    Denylisted,
}

/// Which machine-readable tail a rejection ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tail {
    /// The calling harness's generation decides (see the module doc).
    #[default]
    Auto,
    /// `grant_hint={"v":1,"dir":..,"path":..,"code":..}` (generation 1).
    GrantHint,
    /// `filesystem_access_request={"v":1,"requested_root":..,"attempted_path":..,"error_code":..}`
    /// (generation 2).
    AccessRequest,
}

/// What a rejection's message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prefix {
    #[default]
    None,
    /// `remote error (<code>): `
    RemoteError,
    /// `handler error: `
    HandlerError,
}

/// The jail double.
pub struct JailShell {
    dialect: Dialect,
    host_roots: Mutex<Vec<String>>,
    /// When set, the workspace, granted and one-shot roots are all ignored
    /// (a shell that keeps rejecting: the re-ask limit, and a workspace path
    /// the jail wrongly rejects).
    stubborn: bool,
    tail: Tail,
    prefix: Prefix,
}

impl JailShell {
    /// A double trusting `host_roots`.
    pub fn new(dialect: Dialect, host_roots: &[&str]) -> JailShell {
        JailShell {
            dialect,
            host_roots: Mutex::new(host_roots.iter().map(|s| s.to_string()).collect()),
            stubborn: false,
            tail: Tail::Auto,
            prefix: Prefix::None,
        }
    }

    /// A double that ignores granted and one-shot roots (generation 2: only
    /// its host roots count, whatever the boundary).
    pub fn stubborn(dialect: Dialect) -> JailShell {
        JailShell {
            stubborn: true,
            ..JailShell::new(dialect, &[])
        }
    }

    /// Forces the tail rejections end with.
    pub fn with_tail(mut self, tail: Tail) -> JailShell {
        self.tail = tail;
        self
    }

    /// Starts every rejection's message with `prefix`.
    pub fn with_prefix(mut self, prefix: Prefix) -> JailShell {
        self.prefix = prefix;
        self
    }

    fn host_roots(&self) -> Vec<String> {
        self.host_roots
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    fn roots(&self, call: &TargetCall) -> Vec<String> {
        let mut roots = self.host_roots();
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

    /// The brief's shell (generation 1).
    fn respond_brief(&self, call: &TargetCall, tail: Tail) -> Result<Value, TargetError> {
        let path = call
            .payload
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("/");
        let roots = self.roots(call);
        if roots.iter().any(|r| Path::new(path).starts_with(r)) {
            return Ok(json!({"ok": true, "path": path}));
        }
        let dir = parent_dir(path);
        let base = call
            .metadata
            .as_ref()
            .and_then(|m| m.get("working_dir"))
            .and_then(Value::as_str)
            .unwrap_or("/w")
            .to_string();
        let rejection = Rejection {
            dir: &dir,
            path,
            base: &base,
            roots: &roots,
            tail,
        };
        Err(self.reject(&rejection, false))
    }

    /// Today's shell (generation 2).
    fn respond_today(&self, call: &TargetCall, tail: Tail) -> Result<Value, TargetError> {
        let given = call
            .payload
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("/");
        let stamp = call.payload.get("fs_scope").filter(|s| s.is_object());
        let root = stamp
            .and_then(|s| s.get("root"))
            .and_then(Value::as_str)
            .unwrap_or("/");
        let path = resolve(root, given);
        let host = self.host_roots();
        let workspace = !self.stubborn
            && stamp
                .and_then(|s| s.get("boundary"))
                .and_then(Value::as_str)
                == Some("workspace");
        let allowed: Vec<String> = if workspace {
            let grants = stamp
                .and_then(|s| s.get("grants"))
                .and_then(Value::as_array)
                .map(|g| g.iter().filter_map(Value::as_str).map(str::to_string))
                .into_iter()
                .flatten();
            std::iter::once(root.to_string()).chain(grants).collect()
        } else {
            host.clone()
        };
        if allowed.iter().any(|r| path.starts_with(r)) {
            return Ok(json!({"ok": true, "path": path.to_string_lossy()}));
        }
        let path_text = path.to_string_lossy().into_owned();
        let dir = parent_dir(&path_text);
        let rejection = Rejection {
            dir: &dir,
            path: &path_text,
            base: root,
            roots: &allowed,
            tail,
        };
        let inside_host = workspace && host.iter().any(|r| path.starts_with(r));
        Err(self.reject(&rejection, inside_host))
    }

    /// The rejection for a path outside every trusted root; `scoped` when
    /// it is inside a host root but outside the session's (`S220` / `C218`).
    fn reject(&self, r: &Rejection<'_>, scoped: bool) -> TargetError {
        let (code, message) = match (self.dialect, scoped) {
            (Dialect::Denylisted, _) => ("S215", format!("path is denylisted: {}", r.path)),
            (Dialect::Shell, false) => (
                "S215",
                format!(
                    "path escapes the fs jail roots [{}]: {}{}",
                    r.roots.join(", "),
                    r.path,
                    r.tail_text("S215")
                ),
            ),
            (Dialect::Shell, true) => ("S220", scoped_message(r, "S220", "")),
            (Dialect::Coder | Dialect::CoderGeneric, false) => {
                ("C215", coder_message(r.base, r.path, r.dir, r.tail, "C215"))
            }
            (Dialect::Coder | Dialect::CoderGeneric, true) => {
                ("C218", scoped_message(r, "C218", "."))
            }
        };
        if self.dialect == Dialect::CoderGeneric {
            let inner = json!({"code": code, "message": message}).to_string();
            return TargetError::new("E_TOOL", inner);
        }
        let message = match self.prefix {
            Prefix::None => message,
            Prefix::RemoteError => format!("remote error ({code}): {message}"),
            Prefix::HandlerError => format!("handler error: {message}"),
        };
        TargetError::new(code, message)
    }
}

/// What a rejection's wording needs.
struct Rejection<'a> {
    dir: &'a str,
    path: &'a str,
    base: &'a str,
    roots: &'a [String],
    tail: Tail,
}

impl Rejection<'_> {
    fn tail_text(&self, code: &str) -> String {
        tail_text(self.tail, self.dir, self.path, code)
    }
}

fn tail_text(tail: Tail, dir: &str, path: &str, code: &str) -> String {
    match tail {
        Tail::AccessRequest => access_request_tail(dir, path, code),
        Tail::GrantHint | Tail::Auto => hint_tail(dir, path, code),
    }
}

fn parent_dir(path: &str) -> String {
    Path::new(path)
        .parent()
        .and_then(|p| p.to_str())
        .unwrap_or("/")
        .to_string()
}

/// `given` under `root` when relative, with `.` and `..` resolved lexically.
fn resolve(root: &str, given: &str) -> PathBuf {
    let joined = Path::new(root).join(given);
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The generation-1 tail: one space, `grant_hint=`, the JSON.
pub fn hint_tail(dir: &str, path: &str, code: &str) -> String {
    format!(
        " grant_hint={}",
        json!({"v": 1, "dir": dir, "path": path, "code": code})
    )
}

/// The generation-2 tail: one space, `filesystem_access_request=`, the JSON
/// with its keys in the shell's order.
pub fn access_request_tail(requested_root: &str, attempted_path: &str, error_code: &str) -> String {
    format!(
        r#" filesystem_access_request={{"v":1,"requested_root":{},"attempted_path":{},"error_code":{}}}"#,
        Value::from(requested_root),
        Value::from(attempted_path),
        Value::from(error_code)
    )
}

impl Behaviour for JailShell {
    fn respond(&self, call: &TargetCall) -> Result<Value, TargetError> {
        let today = call
            .metadata
            .as_ref()
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_u64)
            == Some(2);
        let tail = match (self.tail, today) {
            (Tail::Auto, true) => Tail::AccessRequest,
            (Tail::Auto, false) => Tail::GrantHint,
            (forced, _) => forced,
        };
        if today {
            self.respond_today(call, tail)
        } else {
            self.respond_brief(call, tail)
        }
    }
}

fn coder_message(base: &str, path: &str, dir: &str, tail: Tail, code: &str) -> String {
    format!(
        "path is outside the session directory {base} and outside every allowed root: {path}. Ask for access or use a path under {base}.{}",
        tail_text(tail, dir, path, code)
    )
}

fn scoped_message(r: &Rejection<'_>, code: &str, end: &str) -> String {
    format!(
        "this session is scoped to {base}; {path} is inside an allowed root but outside the session directory — use a path under {base}{end}{}",
        r.tail_text(code),
        base = r.base,
        path = r.path,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(payload: Value, metadata: Option<Value>) -> TargetCall {
        TargetCall {
            function_id: "shell::read".into(),
            payload,
            metadata,
            caller_worker_id: None,
        }
    }

    fn today() -> Option<Value> {
        Some(json!({"generation": 2}))
    }

    #[test]
    fn the_brief_shell_keeps_its_wording() {
        let shell = JailShell::new(Dialect::Shell, &["/srv"]);
        let err = shell
            .respond(&call(
                json!({"path": "/data/x"}),
                Some(json!({"working_dir": "/w"})),
            ))
            .unwrap_err();
        assert_eq!(err.code, "S215");
        assert_eq!(
            err.message,
            format!(
                "path escapes the fs jail roots [/srv, /w]: /data/x{}",
                hint_tail("/data", "/data/x", "S215")
            )
        );
        assert!(shell
            .respond(&call(
                json!({"path": "/w/a"}),
                Some(json!({"working_dir": "/w"}))
            ))
            .is_ok());
    }

    #[test]
    fn today_workspace_enforces_root_and_grants_only() {
        let shell = JailShell::new(Dialect::Shell, &["/srv"]);
        let scope =
            |boundary: &str| json!({"root": "/w", "grants": ["/data"], "boundary": boundary});
        let ws = |path: &str| {
            call(
                json!({"path": path, "fs_scope": scope("workspace")}),
                today(),
            )
        };
        assert!(shell.respond(&ws("/w/a")).is_ok());
        assert!(
            shell.respond(&ws("src/main.rs")).is_ok(),
            "relative to the root"
        );
        assert!(shell.respond(&ws("/data/x")).is_ok());
        let scoped = shell.respond(&ws("/srv/x")).unwrap_err();
        assert_eq!(scoped.code, "S220");
        assert!(
            scoped.message.ends_with(
                r#" filesystem_access_request={"v":1,"requested_root":"/srv","attempted_path":"/srv/x","error_code":"S220"}"#
            ),
            "{}",
            scoped.message
        );
        let escaped = shell.respond(&ws("/w/../etc/passwd")).unwrap_err();
        assert_eq!(escaped.code, "S215");
        assert!(escaped
            .message
            .contains(": /etc/passwd filesystem_access_request="));

        let roots = |path: &str| {
            call(
                json!({"path": path, "fs_scope": scope("configured_roots")}),
                today(),
            )
        };
        assert!(shell.respond(&roots("/srv/x")).is_ok());
        assert_eq!(shell.respond(&roots("/w/a")).unwrap_err().code, "S215");
        assert_eq!(
            shell.respond(&roots("/data/x")).unwrap_err().code,
            "S215",
            "grants are not the shell's roots"
        );
    }

    #[test]
    fn tails_and_prefixes_can_be_forced() {
        let shell = JailShell::new(Dialect::Coder, &[])
            .with_tail(Tail::AccessRequest)
            .with_prefix(Prefix::RemoteError);
        let err = shell
            .respond(&call(
                json!({"path": "/x/y"}),
                Some(json!({"working_dir": "/w"})),
            ))
            .unwrap_err();
        assert!(
            err.message
                .starts_with("remote error (C215): path is outside"),
            "{}",
            err.message
        );
        assert!(err
            .message
            .ends_with(&access_request_tail("/x", "/x/y", "C215")));
        let handler = JailShell::new(Dialect::Shell, &[])
            .with_tail(Tail::GrantHint)
            .with_prefix(Prefix::HandlerError);
        let err = handler
            .respond(&call(
                json!({"path": "/x/y", "fs_scope": {"root": "/w", "grants": [], "boundary": "workspace"}}),
                today(),
            ))
            .unwrap_err();
        assert!(err.message.starts_with("handler error: path escapes"));
        assert!(err.message.ends_with(&hint_tail("/x", "/x/y", "S215")));
    }
}
