use proptest::prelude::*;
use serde_json::json;

use super::*;

const SPAWN: &str = "harness::spawn";
const SEND: &str = "harness::send";
const RUN: &str = "harness::run";

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
    assert_eq!(found.argument, "filesystem_root");
    assert_eq!(found.under, Some("options"));
    assert_eq!(found.depth, 1);
    assert_eq!(found.root, Some("/etc"));
    let said = found.describe();
    assert!(
        said.contains("/etc") && said.contains("under options"),
        "{said}"
    );
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
    // Grants without a root of the turn's own widen nothing.
    let grants_only = turn(json!({"fs_scope": {"grants": ["/w"]}}));
    assert!(widening_root(SPAWN, Some(&args), Some(&grants_only)).is_some());
    // The brief's harness names the session workspace `working_dir`.
    let working_dir = turn(json!({"working_dir": "/w/s1"}));
    assert_eq!(widening_root(SPAWN, Some(&args), Some(&working_dir)), None);
    let outside = spawn(json!("/w/s2"));
    assert!(widening_root(SPAWN, Some(&outside), Some(&working_dir)).is_some());
}

#[test]
fn rule_19_widening_root_asks_for_nothing_without_a_root_key() {
    let t = turn(json!({"fs_scope": {"root": "/w/s1"}}));
    for args in [
        json!({}),
        json!({"options": {}}),
        json!({"options": {"filesystem_root": null}}),
        json!({"options": {"metadata": {"fs_scope": null}}}),
        json!({"root": "/etc", "path": "/etc/passwd", "cwd": "/", "dir": "/"}),
        json!(["/etc", {"scope": "/"}]),
        json!("/etc"),
        json!(7),
    ] {
        for fid in [SPAWN, SEND, "shell::exec", "docs::read"] {
            assert_eq!(
                widening_root(fid, Some(&args), Some(&t)),
                None,
                "{fid} {args}"
            );
        }
    }
    assert_eq!(widening_root(SPAWN, None, Some(&t)), None);
    // A root that is not a string is not inside anything.
    let odd = spawn(json!(["/w/s1"]));
    let found = widening_root(SPAWN, Some(&odd), Some(&t)).expect("held");
    assert_eq!(found.root, None);
    assert!(found.describe().contains("not a path string"));
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
        (found.argument, found.under, found.root),
        ("fs_scope.root", Some("metadata"), Some("/home"))
    );
    let grant_out = send(json!({"root": "/w/s1", "grants": ["/data", "/root/.ssh"]}));
    let found = widening_root(SEND, Some(&grant_out), Some(&t)).expect("grant");
    assert_eq!(
        (found.argument, found.root),
        ("fs_scope.grants", Some("/root/.ssh"))
    );
    for odd in [
        json!("/etc"),
        json!({"root": "/w/s1", "grants": "/etc"}),
        json!(["/w/s1"]),
    ] {
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

#[test]
fn rule_26_3_any_call_at_any_depth_is_read_by_shape() {
    let t = turn(json!({"fs_scope": {"root": "/w/s1", "grants": ["/data"]}}));
    // Issue 36, item 3: harness::run takes send's options.
    let run = json!({"session_id": "c", "message": "hi",
        "options": {"metadata": {"fs_scope": {"root": "/"}}}});
    let found = widening_root(RUN, Some(&run), Some(&t)).expect("run widens");
    assert_eq!((found.argument, found.root), ("fs_scope.root", Some("/")));
    // Any function, any depth, inside arrays too, any of the three keys.
    for (fid, args) in [
        (
            "mcp::proxy",
            json!({"call": {"args": {"options": {"filesystem_root": "/"}}}}),
        ),
        (
            "tools::batch",
            json!({"steps": [{"x": 1}, {"metadata": {"fs_scope": {"grants": ["/etc"]}}}]}),
        ),
        ("legacy::run", json!({"working_dir": "/home"})),
        (
            "deep::one",
            json!({"a": {"b": {"c": {"d": {"fs_scope": "/"}}}}}),
        ),
        ("harness::spawn", json!({"filesystem_root": 42})),
        // Stamped calls: only the top-level fs_scope is the harness's.
        (
            "shell::exec",
            json!({"command": "ls", "options": {"fs_scope": {"root": "/"}}}),
        ),
        (
            "shell::exec",
            json!({"command": "ls", "filesystem_root": "/"}),
        ),
        ("coder::write", json!({"working_dir": "/etc"})),
        // Not stamped: its top-level fs_scope is the agent's.
        (
            "shell::filesystem::read",
            json!({"fs_scope": {"root": "/"}}),
        ),
        ("docs::read", json!({"fs_scope": {"root": "/"}})),
        ("fp::pipex", json!({"fs_scope": {"root": "/"}})),
    ] {
        assert!(
            widening_root(fid, Some(&args), Some(&t)).is_some(),
            "{fid} {args}"
        );
    }
    // The harness's stamp on a stamped call, whatever it holds.
    for fid in ["shell::exec", "shell::fs::cat", "coder::write", "fp::pipe"] {
        for stamp in [
            json!({"root": "/"}),
            json!("/"),
            json!({"grants": ["/etc"]}),
        ] {
            let args = json!({"command": "ls", "fs_scope": stamp});
            assert_eq!(
                widening_root(fid, Some(&args), Some(&t)),
                None,
                "{fid} {args}"
            );
        }
    }
    // Inside the turn's roots: the ladder decides.
    for args in [
        json!({"a": [{"working_dir": "/w/s1/x"}, {"filesystem_root": "/data/y"}]}),
        json!({"options": {"metadata": {"fs_scope": {"root": "/w/s1", "grants": ["/data"]}}}}),
    ] {
        assert_eq!(
            widening_root("any::thing", Some(&args), Some(&t)),
            None,
            "{args}"
        );
    }
}

#[test]
fn rule_26_3_a_root_at_any_depth_is_found_without_overflow() {
    let t = turn(json!({"fs_scope": {"root": "/w/s1"}}));
    let nest = |leaf: Value| {
        let mut deep = leaf;
        for _ in 0..100_000 {
            let mut map = Map::new();
            map.insert("k".into(), Value::Array(vec![deep]));
            deep = Value::Object(map);
        }
        deep
    };
    let deep = nest(json!({"filesystem_root": "/etc"}));
    let found = widening_root("any::thing", Some(&deep), Some(&t)).expect("found");
    assert_eq!(
        (found.argument, found.root),
        ("filesystem_root", Some("/etc"))
    );
    assert_eq!(found.depth, 200_000);
    crate::deep::dismantle(deep);
    let plain = nest(json!({"path": "/etc"}));
    assert_eq!(widening_root("any::thing", Some(&plain), Some(&t)), None);
    crate::deep::dismantle(plain);
    // Around the recursion's bound: found on either side of it.
    for levels in [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1] {
        let mut v = json!({"working_dir": "/"});
        for _ in 0..levels {
            v = json!([v]);
        }
        assert!(
            widening_root("any::thing", Some(&v), Some(&t)).is_some(),
            "{levels}"
        );
    }
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

    /// Whatever wraps it, a root outside the turn's is found, in any
    /// function; the same value under another key is never read.
    #[test]
    fn rule_26_3_a_root_is_found_however_it_is_wrapped(
        fid in "[a-z]{1,6}::[a-z]{1,6}",
        path in prop::collection::vec(("[a-z]{1,5}", any::<bool>()), 0..8),
        key in prop::sample::select(vec!["filesystem_root", "working_dir", "fs_scope"]),
    ) {
        prop_assume!(!harness_stamps(&fid));
        let t = turn(json!({"fs_scope": {"root": "/w/s1"}}));
        let leaf = |k: &str| if k == "fs_scope" { json!({k: {"root": "/etc"}}) } else { json!({k: "/etc"}) };
        let wrap = |mut v: Value| {
            for (name, in_array) in path.iter().rev() {
                v = if *in_array { json!({name.as_str(): [1, v]}) } else { json!({name.as_str(): v}) };
            }
            v
        };
        let asked = wrap(leaf(key));
        prop_assert!(widening_root(&fid, Some(&asked), Some(&t)).is_some());
        let other = wrap(leaf("root"));
        prop_assert_eq!(widening_root(&fid, Some(&other), Some(&t)), None);
    }
}
