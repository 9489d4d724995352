//! A widening root is a human's call (`architecture/contract.md` § Two
//! harness generations, "A widening root", and § Levers by shape). The
//! harness lets the model give a child session its own root
//! (`harness::spawn`'s `options.filesystem_root`), a turn its own scope
//! (`harness::send`'s or `harness::run`'s `options.metadata.fs_scope`, a
//! `root` and `grants`), and the brief's harness read a session workspace
//! from `working_dir`. A root that is not inside the calling turn's own root
//! (`metadata.fs_scope.root`, else the brief's `metadata.working_dir`) or one
//! of its granted roots (`metadata.fs_scope.grants`, to which the gate adds
//! the session's durable grants when a root would otherwise widen) would
//! reach folders no human granted: such a call is held for a human in every
//! mode, like an ask rule, with rule id [`WIDENING_ROOT_RULE`]. A root
//! inside them follows the ladder.
//!
//! **By shape, not by name.** Any `fs_scope`, `filesystem_root` or
//! `working_dir` key, at any depth of any call's arguments, is judged — the
//! same options reach the harness through more doors than `spawn` and
//! `send` (`harness::run` flattens `send`'s), and a wrapper can nest them.
//! The one exception is exactly the top-level `fs_scope` of the calls the
//! harness stamps ([`harness_stamps`]): the harness overwrites it with its
//! own. Containment is by path components after `.` and `..` are folded
//! (`/w/s/../../etc` is `/etc`); a relative root, a root that is not a
//! string (an `fs_scope` that is not an object, `grants` that are not an
//! array), or a turn without a root of its own is never inside anything: a
//! human decides. A `null` asks for nothing.
//!
//! Pure, and allocation-free for arguments up to [`MAX_DEPTH`] levels deep
//! (the walk recurses: no heap); below that it goes on with a stack on the
//! heap, so no depth exhausts the thread's stack and no key is missed.
//!
//! # Format (what is read)
//!
//! ```json
//! // the call to harness::spawn
//! { "options": { "filesystem_root": "/w/s1/worktree" } }
//! // the call to harness::send or harness::run, or any call, at any depth
//! { "options": { "metadata": { "fs_scope": { "root": "/w/s1", "grants": ["/data"] } } } }
//! // the calling turn's metadata (the hook input's `metadata`)
//! { "fs_scope": { "root": "/w/s1", "grants": ["/data"] } }
//! ```

use serde_json::{Map, Value};

/// The rule id `approval::evaluate` and the logs name for a widening root.
pub const WIDENING_ROOT_RULE: &str = "widening_root";

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

/// How deep the walk recurses before it goes on with a stack on the heap.
pub(crate) const MAX_DEPTH: usize = 64;

/// The functions whose explained decision always shows the widening step
/// (the harness's own doors to a new root), whatever they ask for.
pub(crate) const DOORS: [&str; 3] = ["harness::spawn", "harness::send", "harness::run"];

/// Whether `function_id` is one of the [`DOORS`].
pub(crate) fn is_door(function_id: &str) -> bool {
    DOORS.contains(&function_id)
}

/// The keys that ask for a root.
const FILESYSTEM_ROOT: &str = "filesystem_root";
/// The brief's harness: a session workspace.
const WORKING_DIR: &str = "working_dir";

/// A requested root that lies outside the calling turn's roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Widening<'a> {
    /// Which argument asked for it: `filesystem_root`, `working_dir`,
    /// `fs_scope` (not an object), `fs_scope.root` or `fs_scope.grants`.
    pub argument: &'static str,
    /// The key of the object it was found in, when not at the top of the
    /// arguments (`options` for `options.filesystem_root`, `metadata` for
    /// `options.metadata.fs_scope`).
    pub under: Option<&'a str>,
    /// How deep the key sits (0: a top-level argument).
    pub depth: usize,
    /// The root asked for; `None` when the argument is not a string.
    pub root: Option<&'a str>,
}

impl Widening<'_> {
    /// For an operator: `filesystem_root /etc (under options) is outside the turn's roots`.
    pub fn describe(&self) -> String {
        let place = match self.under {
            Some(key) => format!("{} (under {key})", self.argument),
            None => self.argument.to_string(),
        };
        match self.root {
            Some(root) => {
                format!("{place} {root} is outside the calling turn's root and granted roots")
            }
            None => format!("{place} is not a path string"),
        }
    }
}

/// The first root `function_id`'s arguments ask for that is not inside the
/// calling turn's roots (read from `turn`, the turn's metadata), if any —
/// at any depth, of any function (see the module doc).
pub fn widening_root<'a>(
    function_id: &str,
    arguments: Option<&'a Value>,
    turn: Option<&Map<String, Value>>,
) -> Option<Widening<'a>> {
    let arguments = arguments?;
    let roots = TurnRoots::of(turn);
    let skip_stamp = harness_stamps(function_id);
    walk(arguments, None, 0, skip_stamp, &roots)
}

/// The calling turn's roots.
struct TurnRoots<'t> {
    own: Option<&'t str>,
    grants: Option<&'t Vec<Value>>,
}

impl<'t> TurnRoots<'t> {
    fn of(turn: Option<&'t Map<String, Value>>) -> TurnRoots<'t> {
        let scope = turn.and_then(|m| m.get(STAMP));
        let own = scope
            .and_then(|s| s.get("root"))
            .and_then(Value::as_str)
            .or_else(|| {
                turn.and_then(|m| m.get(WORKING_DIR))
                    .and_then(Value::as_str)
            });
        let grants = scope
            .and_then(|s| s.get("grants"))
            .and_then(Value::as_array);
        TurnRoots { own, grants }
    }

    /// Whether `root` is inside the turn's own root or one of its grants.
    /// The turn's grants widen only a turn that has a root of its own.
    fn cover(&self, root: &str) -> bool {
        self.own.is_some_and(|own| {
            within(own, root)
                || self
                    .grants
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|g| within(g, root))
        })
    }
}

/// The first widening in `value` (found under the key `under`, `depth`
/// levels down). Recursive, bounded by [`MAX_DEPTH`].
fn walk<'a>(
    value: &'a Value,
    under: Option<&'a str>,
    depth: usize,
    skip_stamp: bool,
    roots: &TurnRoots<'_>,
) -> Option<Widening<'a>> {
    let deeper = match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    };
    if !deeper {
        return None;
    }
    if depth >= MAX_DEPTH {
        return walk_deep(value, under, depth, roots);
    }
    match value {
        Value::Object(map) => {
            map.iter()
                // The harness's own stamp, exactly: not the agent's.
                .filter(|(key, _)| !(depth == 0 && skip_stamp && *key == STAMP))
                .find_map(|(key, item)| {
                    judge_key(key, item, under, depth, roots)
                        .or_else(|| walk(item, Some(key), depth + 1, false, roots))
                })
        }
        Value::Array(items) => items
            .iter()
            .find_map(|item| walk(item, under, depth + 1, false, roots)),
        _ => None,
    }
}

/// [`walk`] past [`MAX_DEPTH`], without recursion: what is this deep is
/// hostile or broken, so it may pay for a stack on the heap.
fn walk_deep<'a>(
    value: &'a Value,
    under: Option<&'a str>,
    depth: usize,
    roots: &TurnRoots<'_>,
) -> Option<Widening<'a>> {
    let mut stack = vec![(value, under, depth)];
    while let Some((value, under, depth)) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    if let Some(found) = judge_key(key, item, under, depth, roots) {
                        return Some(found);
                    }
                    stack.push((item, Some(key), depth + 1));
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, under, depth + 1))),
            _ => {}
        }
    }
    None
}

/// A widening asked for by the entry `key: value`, if `key` asks for a
/// root and the root is outside the turn's.
fn judge_key<'a>(
    key: &str,
    value: &'a Value,
    under: Option<&'a str>,
    depth: usize,
    roots: &TurnRoots<'_>,
) -> Option<Widening<'a>> {
    let outside = |argument: &'static str, value: &'a Value| -> Option<Widening<'a>> {
        if value.is_null() {
            return None;
        }
        let root = value.as_str();
        let inside = root.is_some_and(|root| roots.cover(root));
        (!inside).then_some(Widening {
            argument,
            under,
            depth,
            root,
        })
    };
    match key {
        FILESYSTEM_ROOT => outside(FILESYSTEM_ROOT, value),
        WORKING_DIR => outside(WORKING_DIR, value),
        STAMP => {
            let not_a_path = |argument| {
                Some(Widening {
                    argument,
                    under,
                    depth,
                    root: None,
                })
            };
            let scope = match value {
                Value::Null => return None,
                Value::Object(scope) => scope,
                _ => return not_a_path("fs_scope"),
            };
            if let Some(found) = scope
                .get("root")
                .and_then(|root| outside("fs_scope.root", root))
            {
                return Some(found);
            }
            match scope.get("grants") {
                None | Some(Value::Null) => None,
                Some(Value::Array(grants)) => {
                    grants.iter().find_map(|g| outside("fs_scope.grants", g))
                }
                Some(_) => not_a_path("fs_scope.grants"),
            }
        }
        _ => None,
    }
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
mod tests;
