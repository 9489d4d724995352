//! A widening root is a human's call (`architecture/contract.md` § Two
//! harness generations, "A widening root"). Today's harness lets the model
//! give a child session its own root (`harness::spawn`'s
//! `options.filesystem_root`) and a turn its own scope (`harness::send`'s
//! `options.metadata.fs_scope`, a `root` and `grants`). A root that is not
//! inside the calling turn's own root (`metadata.fs_scope.root`) or one of
//! its granted roots (`metadata.fs_scope.grants`, to which the gate adds the
//! session's durable grants when a root would otherwise widen) would reach
//! folders no human granted: such a call is held for a human in every mode,
//! like an ask rule, with rule id [`WIDENING_ROOT_RULE`]. A root inside them
//! follows the ladder.
//!
//! Only those arguments are read. Containment is by path components after
//! `.` and `..` are folded (`/w/s/../../etc` is `/etc`); a relative root, a
//! root that is not a string, or a turn without a root of its own is never
//! inside anything: a human decides. Pure; reads nothing for any other
//! function, so the gate's hot path pays one string comparison.
//!
//! # Format (what is read)
//!
//! ```json
//! // the call to harness::spawn
//! { "options": { "filesystem_root": "/w/s1/worktree" } }
//! // the call to harness::send
//! { "options": { "metadata": { "fs_scope": { "root": "/w/s1", "grants": ["/data"] } } } }
//! // the calling turn's metadata (the hook input's `metadata`)
//! { "fs_scope": { "root": "/w/s1", "grants": ["/data"] } }
//! ```

use serde_json::{Map, Value};

/// The rule id `approval::evaluate` and the logs name for a widening root.
pub const WIDENING_ROOT_RULE: &str = "widening_root";

/// The function that spawns a child session.
pub(crate) const SPAWN: &str = "harness::spawn";
/// The function that sends a turn to a session.
pub(crate) const SEND: &str = "harness::send";

/// The argument today's harness stamps onto the calls it stamps: its
/// trusted filesystem scope, not the agent's.
pub(crate) const STAMP: &str = "fs_scope";

/// Whether today's harness stamps `function_id`'s arguments with its
/// `fs_scope` (`shell::*` except `shell::filesystem::*`, `coder::*`,
/// `fp::pipe`), overwriting whatever the agent put there. By the id's exact
/// bytes, as the harness compares them.
pub(crate) fn harness_stamps(function_id: &str) -> bool {
    (function_id.starts_with("shell::") && !function_id.starts_with("shell::filesystem::"))
        || function_id.starts_with("coder::")
        || function_id == "fp::pipe"
}

/// Whether `function_id` is one whose arguments can ask for a root.
pub(crate) fn asks_for_roots(function_id: &str) -> bool {
    function_id == SPAWN || function_id == SEND
}

/// A requested root that lies outside the calling turn's roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Widening<'a> {
    /// Which argument asked for it (`options.filesystem_root`,
    /// `options.metadata.fs_scope.root`, `options.metadata.fs_scope.grants`).
    pub argument: &'static str,
    /// The root asked for; `None` when the argument is not a string.
    pub root: Option<&'a str>,
}

impl Widening<'_> {
    /// For an operator: `options.filesystem_root /etc is outside the turn's roots`.
    pub fn describe(&self) -> String {
        match self.root {
            Some(root) => format!(
                "{} {root} is outside the calling turn's root and granted roots",
                self.argument
            ),
            None => format!("{} is not a path string", self.argument),
        }
    }
}

/// The first root `function_id`'s arguments ask for that is not inside the
/// calling turn's roots (read from `turn`, the turn's metadata), if any.
/// `None` for every function but [`SPAWN`] and [`SEND`].
pub fn widening_root<'a>(
    function_id: &str,
    arguments: Option<&'a Value>,
    turn: Option<&Map<String, Value>>,
) -> Option<Widening<'a>> {
    if !asks_for_roots(function_id) {
        return None;
    }
    let options = arguments?.get("options")?;
    let outside = |argument: &'static str, value: &'a Value| -> Option<Widening<'a>> {
        if value.is_null() {
            return None;
        }
        let root = value.as_str();
        let inside = root.is_some_and(|root| turn_covers(turn, root));
        (!inside).then_some(Widening { argument, root })
    };
    if function_id == SPAWN {
        return outside("options.filesystem_root", options.get("filesystem_root")?);
    }
    let scope = options.get("metadata")?.get("fs_scope")?;
    if scope.is_null() {
        return None;
    }
    let Some(scope) = scope.as_object() else {
        return Some(Widening {
            argument: "options.metadata.fs_scope",
            root: None,
        });
    };
    if let Some(found) = scope
        .get("root")
        .and_then(|root| outside("options.metadata.fs_scope.root", root))
    {
        return Some(found);
    }
    match scope.get("grants") {
        None | Some(Value::Null) => None,
        Some(Value::Array(grants)) => grants
            .iter()
            .find_map(|g| outside("options.metadata.fs_scope.grants", g)),
        Some(_) => Some(Widening {
            argument: "options.metadata.fs_scope.grants",
            root: None,
        }),
    }
}

/// Whether `root` is inside the turn's own root or one of its grants.
fn turn_covers(turn: Option<&Map<String, Value>>, root: &str) -> bool {
    let Some(scope) = turn.and_then(|m| m.get("fs_scope")) else {
        return false;
    };
    let own = scope.get("root").and_then(Value::as_str);
    let grants = scope
        .get("grants")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    // The turn's grants widen only a turn that has a root of its own.
    own.is_some_and(|own| within(own, root) || grants.into_iter().any(|g| within(g, root)))
}

/// Whether `child` is `parent` or below it, by components after folding
/// `.` and `..`. Both must be absolute.
pub(crate) fn within(parent: &str, child: &str) -> bool {
    let (Some(parent), Some(child)) = (folded(parent), folded(child)) else {
        return false;
    };
    child.len() >= parent.len() && child[..parent.len()] == parent[..]
}

/// An absolute path's components with `.` and `..` folded (`..` at the top
/// stays at the top); `None` for a relative or empty path.
fn folded(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix('/')?;
    let mut parts = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn turn(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    fn spawn(root: Value) -> Value {
        json!({"prompt": "go", "options": {"filesystem_root": root}})
    }

    #[test]
    fn rule_19_widening_root_spawn_outside_the_turn_root_is_found() {
        let t = turn(json!({"fs_scope": {"root": "/w/s1", "grants": ["/data"]}}));
        let args = spawn(json!("/etc"));
        let found = widening_root(SPAWN, Some(&args), Some(&t)).expect("widening");
        assert_eq!(found.argument, "options.filesystem_root");
        assert_eq!(found.root, Some("/etc"));
        assert!(found.describe().contains("/etc"), "{}", found.describe());
        for inside in ["/w/s1", "/w/s1/", "/w/s1/tree", "/data/x", "/w/s1/./a/../b"] {
            let args = spawn(json!(inside));
            assert_eq!(
                widening_root(SPAWN, Some(&args), Some(&t)),
                None,
                "{inside}"
            );
        }
        for outside in [
            "/w/s10",
            "/w",
            "/",
            "/w/s1/../s2",
            "/w/s1/../../etc",
            "relative/dir",
            "",
            "/database",
        ] {
            let args = spawn(json!(outside));
            assert!(
                widening_root(SPAWN, Some(&args), Some(&t)).is_some(),
                "{outside}"
            );
        }
    }

    #[test]
    fn rule_19_widening_root_without_a_turn_root_nothing_is_inside() {
        let args = spawn(json!("/w/s1/tree"));
        assert!(widening_root(SPAWN, Some(&args), None).is_some());
        let working_dir_only = turn(json!({"working_dir": "/w/s1"}));
        assert!(widening_root(SPAWN, Some(&args), Some(&working_dir_only)).is_some());
        // Grants without a root of the turn's own widen nothing.
        let grants_only = turn(json!({"fs_scope": {"grants": ["/w"]}}));
        assert!(widening_root(SPAWN, Some(&args), Some(&grants_only)).is_some());
    }

    #[test]
    fn rule_19_widening_root_reads_only_spawn_and_send() {
        let t = turn(json!({"fs_scope": {"root": "/w/s1"}}));
        let args = json!({"options": {"filesystem_root": "/etc",
            "metadata": {"fs_scope": {"root": "/etc"}}}});
        for fid in [
            "harness::spawnx",
            "shell::exec",
            "harness::status",
            " harness::spawn",
        ] {
            assert_eq!(widening_root(fid, Some(&args), Some(&t)), None, "{fid}");
        }
        // No root asked for: nothing to widen.
        for args in [
            json!({}),
            json!({"options": {}}),
            json!({"options": {"filesystem_root": null}}),
            json!({"filesystem_root": "/etc"}),
        ] {
            assert_eq!(widening_root(SPAWN, Some(&args), Some(&t)), None, "{args}");
        }
        assert_eq!(widening_root(SPAWN, None, Some(&t)), None);
        // A root that is not a string is not inside anything.
        let odd = spawn(json!(["/w/s1"]));
        let found = widening_root(SPAWN, Some(&odd), Some(&t)).expect("held");
        assert_eq!(found.root, None);
    }

    #[test]
    fn rule_19_widening_root_send_reads_the_scope_root_and_grants() {
        let t = turn(json!({"fs_scope": {"root": "/w/s1", "grants": ["/data"]}}));
        let send = |scope: Value| {
            json!({"session_id": "c", "message": "hi",
            "options": {"metadata": {"fs_scope": scope}}})
        };
        let inside = send(json!({"root": "/w/s1/sub", "grants": ["/data/a", "/w/s1"]}));
        assert_eq!(widening_root(SEND, Some(&inside), Some(&t)), None);
        let root_out = send(json!({"root": "/home", "grants": []}));
        let found = widening_root(SEND, Some(&root_out), Some(&t)).expect("root");
        assert_eq!(
            (found.argument, found.root),
            ("options.metadata.fs_scope.root", Some("/home"))
        );
        let grant_out = send(json!({"root": "/w/s1", "grants": ["/data", "/root/.ssh"]}));
        let found = widening_root(SEND, Some(&grant_out), Some(&t)).expect("grant");
        assert_eq!(
            (found.argument, found.root),
            ("options.metadata.fs_scope.grants", Some("/root/.ssh"))
        );
        for odd in [json!("/etc"), json!({"root": "/w/s1", "grants": "/etc"})] {
            assert!(
                widening_root(SEND, Some(&send(odd.clone())), Some(&t)).is_some(),
                "{odd}"
            );
        }
        // A send without a scope, or with grants only inside, follows the ladder.
        let plain = json!({"session_id": "c", "message": "hi", "options": {"metadata": {"k": 1}}});
        assert_eq!(widening_root(SEND, Some(&plain), Some(&t)), None);
        assert_eq!(
            widening_root(SEND, Some(&send(json!({"grants": ["/data/x"]}))), Some(&t)),
            None
        );
    }

    /// A path made of these parts, absolute.
    fn path_of(parts: &[String]) -> String {
        format!("/{}", parts.join("/"))
    }

    proptest! {
        /// Appending plain names never leaves a root; a sibling whose name
        /// only starts like the root's last part is never inside it.
        #[test]
        fn below_is_inside_and_a_longer_sibling_is_not(
            base in prop::collection::vec("[a-z]{1,4}", 1..4),
            below in prop::collection::vec("[a-z]{1,4}", 0..4),
            suffix in "[a-z]{1,3}",
        ) {
            let root = path_of(&base);
            let mut child = base.clone();
            child.extend(below.iter().cloned());
            prop_assert!(within(&root, &path_of(&child)));
            let mut sibling = base.clone();
            if let Some(last) = sibling.last_mut() {
                last.push_str(&suffix);
            }
            prop_assert!(!within(&root, &path_of(&sibling)));
        }

        /// Climbing out with `..` is seen through however the path is
        /// padded with `.` and empty parts.
        #[test]
        fn dot_dot_that_climbs_out_is_outside(
            base in prop::collection::vec("[a-z]{1,4}", 1..4),
            other in "[A-Z]{1,4}",
            pad in prop::collection::vec(prop::sample::select(vec![".", ""]), 0..3),
        ) {
            let root = path_of(&base);
            let mut parts = base.clone();
            parts.extend(pad.iter().map(|p| p.to_string()));
            parts.extend(std::iter::repeat_n("..".to_string(), base.len()));
            parts.push(other);
            let escaped = path_of(&parts);
            prop_assert!(!within(&root, &escaped), "{} inside {}", escaped, root);
            let t = turn(json!({"fs_scope": {"root": root}}));
            let args = json!({"options": {"filesystem_root": escaped}});
            prop_assert!(widening_root(SPAWN, Some(&args), Some(&t)).is_some());
        }

        /// Whatever the arguments, only spawn and send are ever held.
        #[test]
        fn other_functions_are_never_read(fid in "[a-z:]{0,20}", root in ".{0,12}") {
            prop_assume!(fid != SPAWN && fid != SEND);
            let args = json!({"options": {"filesystem_root": root,
                "metadata": {"fs_scope": {"root": root}}}});
            prop_assert_eq!(widening_root(&fid, Some(&args), None), None);
        }
    }
}
