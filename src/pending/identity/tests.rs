use proptest::prelude::*;
use serde_json::json;

use super::*;

fn d(function_id: &str, arguments: Value) -> String {
    digest(function_id, Some(&arguments))
}

#[test]
fn rule_26_1_key_order_does_not_change_the_digest() {
    let a = d(
        "docs::read",
        json!({"path": "README", "opts": {"x": 1, "y": [1, 2]}}),
    );
    let b = d(
        "docs::read",
        json!({"opts": {"y": [1, 2], "x": 1}, "path": "README"}),
    );
    assert_eq!(a, b);
    assert_eq!(a.len(), 64);
    assert!(a
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
}

#[test]
fn rule_26_1_numbers_count_by_value() {
    let one = d("f", json!({"n": 1}));
    for same in [json!({"n": 1.0}), json!({"n": 1u64})] {
        assert_eq!(one, d("f", same.clone()), "{same}");
    }
    let parsed: Value = serde_json::from_str(r#"{"n": 1e0}"#).expect("json");
    assert_eq!(one, d("f", parsed));
    assert_eq!(d("f", json!({"n": 0})), d("f", json!({"n": -0.0})));
    assert_eq!(d("f", json!({"n": -3})), d("f", json!({"n": -3.0})));
    for other in [
        json!({"n": 1.5}),
        json!({"n": "1"}),
        json!({"n": 2}),
        json!({"n": true}),
    ] {
        assert_ne!(one, d("f", other.clone()), "{other}");
    }
    // Past 2^53 an f64 is not the integer next to it.
    assert_ne!(
        d("f", json!({"n": 9_007_199_254_740_993u64})),
        d("f", json!({"n": 9_007_199_254_740_992.0f64}))
    );
    assert_eq!(
        d("f", json!({"n": 9_007_199_254_740_992u64})),
        d("f", json!({"n": 9_007_199_254_740_992.0f64}))
    );
    assert_eq!(d("f", json!({"n": 1e300})), d("f", json!({"n": 1e300})));
    assert_ne!(d("f", json!({"n": 1e300})), d("f", json!({"n": 1e299})));
}

#[test]
fn rule_26_1_nesting_and_shape_count() {
    let nested = d("f", json!({"a": {"b": {"c": [1, {"d": null}]}}}));
    assert_ne!(
        nested,
        d("f", json!({"a": {"b": {"c": [1, {"d": false}]}}}))
    );
    assert_ne!(nested, d("f", json!({"a": {"b": {"c": [{"d": null}, 1]}}})));
    // Strings that would read as structure are strings.
    assert_ne!(d("f", json!({"a": "b"})), d("f", json!({"a\":\"b": ""})));
    assert_ne!(d("f", json!(["a", "b"])), d("f", json!(["a,\"b"])));
    assert_ne!(d("f", json!({})), d("f", json!([])));
    // No arguments read as `{}`.
    assert_eq!(digest("f", None), d("f", json!({})));
}

#[test]
fn rule_26_1_the_stamp_is_left_out_only_at_the_top_of_stamped_calls() {
    let stamp = json!({"root": "/w/s", "grants": ["/d"], "boundary": "workspace"});
    let restamped = json!({"root": "/w/s", "grants": ["/d", "/e"], "boundary": "workspace"});
    for fid in ["shell::exec", "shell::fs::read", "coder::write", "fp::pipe"] {
        let bare = d(fid, json!({"command": "ls"}));
        assert_eq!(
            bare,
            d(fid, json!({"command": "ls", "fs_scope": stamp})),
            "{fid}"
        );
        assert_eq!(
            bare,
            d(fid, json!({"command": "ls", "fs_scope": restamped})),
            "{fid}"
        );
        assert_eq!(
            bare,
            d(fid, json!({"command": "ls", "fs_scope": "any"})),
            "{fid}"
        );
        // Deeper, it is the call's own.
        assert_ne!(
            d(fid, json!({"o": {"command": "ls"}})),
            d(fid, json!({"o": {"command": "ls", "fs_scope": stamp}})),
            "{fid}"
        );
    }
    for fid in [
        "shell::filesystem::read",
        "docs::read",
        "harness::send",
        "fp::pipex",
        "Shell::exec",
        "xshell::exec",
    ] {
        assert_ne!(
            d(fid, json!({"command": "ls"})),
            d(fid, json!({"command": "ls", "fs_scope": stamp})),
            "{fid}"
        );
    }
}

#[test]
fn rule_26_1_any_depth_is_digested_without_recursion() {
    let mut deep = Value::Null;
    for i in 0..100_000 {
        deep = if i % 2 == 0 {
            Value::Array(vec![deep])
        } else {
            // Built by hand: `json!` would serialize `deep` recursively.
            let mut map = Map::new();
            map.insert("k".into(), deep);
            Value::Object(map)
        };
    }
    let a = digest("f", Some(&deep));
    assert_eq!(a, digest("f", Some(&deep)));
    crate::deep::dismantle(deep);
}

fn record(digest: Option<&str>) -> PendingRecord {
    let mut record: PendingRecord = serde_json::from_value(json!({
        "session_id": "s", "turn_id": "t", "function_call_id": "c",
        "function_id": "docs::read", "arguments_excerpt": {"path": "README"},
        "pending_at": 1
    }))
    .expect("a record");
    record.digest = digest.map(str::to_string);
    record
}

#[test]
fn rule_26_1_a_call_meets_its_own_record_and_no_other() {
    let args = json!({"path": "README"});
    let me = Identity::of("s", "c", "t", "docs::read", Some(&args));
    let mine = record(Some(&me.digest));
    assert_eq!(me.meets(&mine), Meeting::Same);
    let other_args = json!({"command": "curl x | sh"});
    for other in [
        Identity::of("s", "c", "t", "docs::read", Some(&other_args)),
        Identity::of("s", "c", "t2", "docs::read", Some(&args)),
        Identity::of("s", "c", "t", "shell::exec", Some(&args)),
        Identity::of("s", "c2", "t", "docs::read", Some(&args)),
        Identity::of("s2", "c", "t", "docs::read", Some(&args)),
    ] {
        assert_eq!(other.meets(&mine), Meeting::Other, "{other:?}");
    }
    assert_eq!(me.meets(&record(None)), Meeting::Unknown);
}

#[test]
fn rule_26_1_the_digest_is_stored_and_never_shown() {
    let me = Identity::of("s", "c", "t", "docs::read", None);
    let r = record(Some(&me.digest));
    let shown = serde_json::to_value(&r).expect("serializes");
    assert!(shown.get("arguments_digest").is_none(), "{shown}");
    assert!(!shown.to_string().contains(&me.digest));
    let stored = r.stored().expect("serializes");
    assert_eq!(stored["arguments_digest"], json!(me.digest));
    let back: PendingRecord = serde_json::from_value(stored).expect("reads back");
    assert_eq!(back, r);
    // A record stored without one reads back without one.
    let old = serde_json::to_value(record(None)).expect("serializes");
    let back: PendingRecord = serde_json::from_value(old).expect("reads back");
    assert_eq!(back.digest, None);
}

/// Arbitrary JSON of bounded size.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-z\"\\\\:,{}]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z\"]{0,4}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// The same value with every object's keys in reverse order.
fn reversed(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        Value::Object(map) => {
            let mut pairs: Vec<_> = map.iter().collect();
            pairs.reverse();
            Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.clone(), reversed(v)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// The same value with every integer written as a float.
fn floated(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(floated).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), floated(v))).collect())
        }
        Value::Number(n) => match n.as_i64() {
            Some(i) if i.unsigned_abs() < (1 << 53) => json!(i as f64),
            _ => value.clone(),
        },
        other => other.clone(),
    }
}

proptest! {
    /// Key order and integer spelling never change the digest; the digest
    /// tells values apart exactly as value equality does (serde_json's
    /// equality is by text for numbers, so only number-free values are
    /// compared that way).
    #[test]
    fn rule_26_1_canonical_by_value(a in json_value(), b in json_value()) {
        let da = digest("f", Some(&a));
        prop_assert_eq!(&da, &digest("f", Some(&reversed(&a))));
        prop_assert_eq!(&da, &digest("f", Some(&floated(&a))));
        let text = |v: &Value| v.to_string();
        let numberless = |v: &Value| !text(v).chars().any(|c| c.is_ascii_digit());
        if numberless(&a) && numberless(&b) {
            prop_assert_eq!(da == digest("f", Some(&b)), a == b);
        }
    }

    /// The stamp of a stamped call never counts, whatever it holds.
    #[test]
    fn rule_26_1_any_stamp_is_left_out(a in json_value(), stamp in json_value()) {
        let Value::Object(mut map) = a else { return Ok(()) };
        map.remove("fs_scope");
        let bare = Value::Object(map.clone());
        map.insert("fs_scope".into(), stamp);
        let stamped = Value::Object(map);
        prop_assert_eq!(digest("shell::exec", Some(&bare)), digest("shell::exec", Some(&stamped)));
    }
}
