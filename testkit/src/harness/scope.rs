//! Today's harness (generation 2): the trusted filesystem stamp and how the
//! boundary it carries is chosen. Pure: no SDK types.
//!
//! # Format
//!
//! When the turn's metadata carries `fs_scope.root`, the arguments of every
//! stamped call get, overwriting whatever the model put there:
//!
//! ```json
//! { "fs_scope": { "root": "/w/s1", "grants": ["/data"], "boundary": "workspace" } }
//! ```
//!
//! Stamped calls: `shell::*` except `shell::filesystem::*`, `coder::*`, and
//! `fp::pipe` (which carries the stamp for its own scoped steps). Without a
//! root, a model-supplied `fs_scope` is removed from those calls. Arguments
//! that are not an object pass through untouched.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// The post-trigger hook whose binding switches the boundary to `workspace`.
pub const WATCH_ID: &str = "approval::filesystem-access-watch";

/// The pipe runner: stamped like a scoped call.
pub const PIPE_ID: &str = "fp::pipe";

/// What the shell enforces for a stamped call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// The session root plus its grants; a path outside them is refused
    /// (`S220` / `C218` when it is inside one of the shell's own roots).
    Workspace,
    /// The shell's own configured roots; the session root only anchors
    /// relative paths, so no folder prompt can ever happen.
    ConfiguredRoots,
}

impl Boundary {
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::Workspace => "workspace",
            Boundary::ConfiguredRoots => "configured_roots",
        }
    }
}

/// The harness's `filesystem_boundary` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundarySetting {
    /// `workspace` exactly while a post-trigger binding of [`WATCH_ID`]
    /// matches the call, `configured_roots` otherwise (the default).
    #[default]
    Auto,
    /// Always `workspace`.
    Workspace,
    /// Always `configured_roots`.
    ConfiguredRoots,
}

impl BoundarySetting {
    /// The value `harness::filesystem::info` reports.
    pub fn as_str(self) -> &'static str {
        match self {
            BoundarySetting::Auto => "auto",
            BoundarySetting::Workspace => "workspace",
            BoundarySetting::ConfiguredRoots => "configured_roots",
        }
    }

    /// The boundary of one call, given whether the watch's binding matches it.
    pub fn resolve(self, watch_matches: bool) -> Boundary {
        match self {
            BoundarySetting::Auto if watch_matches => Boundary::Workspace,
            BoundarySetting::Auto => Boundary::ConfiguredRoots,
            BoundarySetting::Workspace => Boundary::Workspace,
            BoundarySetting::ConfiguredRoots => Boundary::ConfiguredRoots,
        }
    }
}

/// Whether calls of `function_id` carry the stamp.
pub fn is_stamped(function_id: &str) -> bool {
    let shell =
        function_id.starts_with("shell::") && !function_id.starts_with("shell::filesystem::");
    shell || function_id.starts_with("coder::") || function_id == PIPE_ID
}

/// The session root a turn is scoped to: `metadata.fs_scope.root` when it is
/// a string.
pub fn turn_root(metadata: Option<&Value>) -> Option<&str> {
    metadata?.get("fs_scope")?.get("root")?.as_str()
}

/// Stamps (or, without a root, strips) the trusted scope on a call's
/// arguments; see the module doc.
pub fn stamp(
    function_id: &str,
    arguments: Value,
    root: Option<&str>,
    grants: &[String],
    boundary: Boundary,
) -> Value {
    if !is_stamped(function_id) {
        return arguments;
    }
    let Value::Object(mut map) = arguments else {
        return arguments;
    };
    match root {
        Some(root) => {
            map.insert(
                "fs_scope".into(),
                json!({ "root": root, "grants": grants, "boundary": boundary.as_str() }),
            );
        }
        None => {
            map.remove("fs_scope");
        }
    }
    Value::Object(map)
}

/// Durable grants and one-shot grants together, sorted and deduplicated.
pub fn union(durable: &[String], one_shot: &[String]) -> Vec<String> {
    durable
        .iter()
        .chain(one_shot)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_calls_are_stamped() {
        for id in ["shell::exec", "shell::fs::read", "coder::write", "fp::pipe"] {
            assert!(is_stamped(id), "{id}");
        }
        for id in [
            "shell::filesystem::validate",
            "demo::echo",
            "fp::other",
            "harness::spawn",
        ] {
            assert!(!is_stamped(id), "{id}");
        }
    }

    #[test]
    fn the_stamp_overwrites_and_without_a_root_strips() {
        let forged = json!({"cmd": "ls", "fs_scope": {"root": "/", "grants": ["/etc"]}});
        let grants = vec!["/data".to_string()];
        let stamped = stamp(
            "shell::exec",
            forged.clone(),
            Some("/w/s1"),
            &grants,
            Boundary::Workspace,
        );
        assert_eq!(
            stamped,
            json!({"cmd": "ls", "fs_scope": {"root": "/w/s1", "grants": ["/data"], "boundary": "workspace"}})
        );
        let stripped = stamp(
            "coder::edit",
            forged.clone(),
            None,
            &[],
            Boundary::Workspace,
        );
        assert_eq!(stripped, json!({"cmd": "ls"}));
        assert_eq!(
            stamp(
                "demo::echo",
                forged.clone(),
                Some("/w"),
                &[],
                Boundary::Workspace
            ),
            forged
        );
        assert_eq!(
            stamp(
                "shell::exec",
                json!(["ls"]),
                Some("/w"),
                &[],
                Boundary::Workspace
            ),
            json!(["ls"])
        );
    }

    #[test]
    fn the_root_comes_from_the_turn_metadata() {
        assert_eq!(
            turn_root(Some(&json!({"fs_scope": {"root": "/w"}}))),
            Some("/w")
        );
        assert_eq!(turn_root(Some(&json!({"fs_scope": {"root": 7}}))), None);
        assert_eq!(turn_root(Some(&json!({"working_dir": "/w"}))), None);
        assert_eq!(turn_root(None), None);
    }

    #[test]
    fn settings_resolve_the_boundary() {
        assert_eq!(BoundarySetting::Auto.resolve(true), Boundary::Workspace);
        assert_eq!(
            BoundarySetting::Auto.resolve(false),
            Boundary::ConfiguredRoots
        );
        assert_eq!(
            BoundarySetting::Workspace.resolve(false),
            Boundary::Workspace
        );
        assert_eq!(
            BoundarySetting::ConfiguredRoots.resolve(true),
            Boundary::ConfiguredRoots
        );
        assert_eq!(
            union(&["/b".into(), "/a".into()], &["/a".into(), "/c".into()]),
            vec!["/a", "/b", "/c"]
        );
    }
}
