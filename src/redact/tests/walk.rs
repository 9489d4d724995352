//! The JSON walk: limits, markers, idempotency (contract §4).

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::super::walk::split_mark;
use super::super::*;
use super::{cut, nest, s};

/// Number of nested containers from the root down the first-entry path.
fn container_depth(v: &Value) -> usize {
    let mut depth = 0;
    let mut cur = v;
    loop {
        cur = match cur {
            Value::Array(a) => match a.first() {
                Some(x) => x,
                None => return depth + 1,
            },
            Value::Object(o) => match o.values().next() {
                Some(x) => x,
                None => return depth + 1,
            },
            _ => return depth,
        };
        depth += 1;
    }
}

/// The innermost value down the first-entry path.
fn innermost(v: &Value) -> &Value {
    let mut cur = v;
    loop {
        cur = match cur {
            Value::Array(a) if !a.is_empty() => &a[0],
            Value::Object(o) if !o.is_empty() => o.values().next().expect("non-empty"),
            _ => return cur,
        };
    }
}

/// Drops a deep value without deep recursion.
fn dismantle(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => stack.extend(o.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn size(v: &Value) -> usize {
    serde_json::to_string(v).expect("serializes").len()
}

fn assert_idempotent(v: &Value) {
    let once = redact(v);
    let twice = redact(&once);
    assert_eq!(once, twice, "redaction is not idempotent for {v}");
}

#[test]
fn rule_21_6_secret_keys_replace_scalars_of_every_type_and_keep_containers() {
    let input = json!({
        "password": "hunter2", "token": 12345, "api_key": null, "secret": true,
        "auth": {"user": "u", "pass": "p"}, "Authorization": ["Bearer", "x"],
        "db_password": "", "user": "alice", "nested": [{"refresh_token": {"a": 1}, "ok": 1}]
    });
    let out = redact(&input);
    assert_eq!(
        out,
        json!({
            "password": REDACTED, "token": REDACTED, "api_key": REDACTED, "secret": REDACTED,
            "auth": {"user": REDACTED, "pass": REDACTED},
            "Authorization": [REDACTED, REDACTED], "db_password": REDACTED,
            "user": "alice", "nested": [{"refresh_token": {"a": REDACTED}, "ok": 1}]
        })
    );
    assert_idempotent(&input);
    // Empty containers, deep ones, and the walk's own markers under a
    // secret key.
    let input = json!({
        "secrets": {"a": [], "b": {}, "c": [[[{"d": ["e", 1, null, false]}]]]},
        "token": nest(70, json!("x")),
    });
    let out = redact(&input);
    assert_eq!(
        out["secrets"],
        json!({"a": [], "b": {}, "c": [[[{"d": [REDACTED, REDACTED, REDACTED, REDACTED]}]]]})
    );
    assert_eq!(innermost(&out["token"]), &json!(MAX_DEPTH_MARK));
    let long: Vec<Value> = (0..300).map(|i| json!(format!("s{i}"))).collect();
    let out = redact(&json!({ "credentials": long }));
    let items = out["credentials"].as_array().expect("array");
    assert_eq!(items.len(), 257);
    assert!(items[..256].iter().all(|i| i == REDACTED));
    assert_eq!(items[256], json!("<+44 more>"));
    assert_idempotent(&input);
}

#[test]
fn scalars_and_plain_values_pass_unchanged() {
    for v in [
        json!(null),
        json!(true),
        json!(-3),
        json!(u64::MAX),
        json!(1.5),
        json!("x"),
        json!([]),
        json!({}),
        json!({"a": [1, {"b": "c"}], "token_count": 3}),
    ] {
        assert_eq!(redact(&v), v);
    }
}

#[test]
fn rule_21_6_a_clipped_string_says_how_many_characters_were_cut() {
    for n in [255, 256, 257, 10_000] {
        let out = redact(&Value::String(s(n, 'a')));
        let expected = if n > 256 {
            format!("{}…[+{} chars]", s(256, 'a'), n - 256)
        } else {
            s(n, 'a')
        };
        assert_eq!(out, Value::String(expected), "length {n}");
        let (kept, count) = split_mark(out.as_str().expect("string"));
        assert_eq!(kept.chars().count() as u64 + count, n as u64);
    }
}

#[test]
fn clipping_counts_code_points_not_bytes() {
    for c in ['é', '€', '🦀'] {
        assert_eq!(redact(&Value::String(s(256, c))), Value::String(s(256, c)));
        let out = redact(&Value::String(s(257, c)));
        assert_eq!(out, Value::String(cut(&s(256, c), 1)));
    }
    // A cut right after a multibyte character in a mixed string.
    let mixed = format!("{}é{}", s(255, 'a'), s(5, 'b'));
    assert_eq!(
        redact(&Value::String(mixed)),
        Value::String(cut(&format!("{}é", s(255, 'a')), 5))
    );
    // A string already ending in a clip mark keeps it, and its count.
    let marked = cut(&s(256, 'a'), 9);
    assert_eq!(
        redact(&Value::String(marked.clone())),
        Value::String(marked)
    );
    // Cut again, the counts add up.
    let marked = cut(&s(300, 'a'), 9);
    assert_eq!(
        redact(&Value::String(marked)),
        Value::String(cut(&s(256, 'a'), 44 + 9))
    );
    // A bare `…` (a mark of version 2) or a mark this module never writes is
    // text like any other.
    for text in [
        format!("{}…", s(256, 'a')),
        format!("{}…[+0 chars]", s(10, 'a')),
        format!("{}…[+07 chars]", s(10, 'a')),
        format!("{}[+7 chars]", s(10, 'a')),
    ] {
        let (_, count) = split_mark(&text);
        assert_eq!(count, 0, "{text}");
    }
}

#[test]
fn depth_boundary_is_64_containers() {
    let leaf = json!("leaf");
    for n in [62, 63, 64] {
        let v = nest(n, leaf.clone());
        let out = redact(&v);
        assert_eq!(out, v, "{n} containers must survive");
    }
    let out = redact(&nest(65, leaf.clone()));
    assert_eq!(container_depth(&out), 64);
    assert_eq!(innermost(&out), &json!(MAX_DEPTH_MARK));
    let out = redact(&nest(66, leaf.clone()));
    assert_eq!(container_depth(&out), 64);
    assert_eq!(innermost(&out), &json!(MAX_DEPTH_MARK));
    // An empty container at depth 64 is replaced too; a scalar is not.
    let out = redact(&nest(64, json!([])));
    assert_eq!(innermost(&out), &json!(MAX_DEPTH_MARK));
    let out = redact(&nest(64, json!(7)));
    assert_eq!(innermost(&out), &json!(7));
    // A secret at the boundary is still redacted.
    let out = redact(&nest(63, json!({"token": "x"})));
    assert_eq!(innermost(&out), &json!(REDACTED));
    for n in [63, 64, 65, 66, 200] {
        assert_idempotent(&nest(n, leaf.clone()));
    }
}

#[test]
fn very_deep_input_is_safe() {
    let deep = nest(100_000, json!("x"));
    let out = redact(&deep);
    assert_eq!(container_depth(&out), 64);
    assert_eq!(innermost(&out), &json!(MAX_DEPTH_MARK));
    dismantle(deep);
}

#[test]
fn arrays_keep_256_entries_and_count_the_rest() {
    for (n, len, marker) in [
        (255, 255, None),
        (256, 256, None),
        (257, 257, Some("<+1 more>")),
        (1000, 257, Some("<+744 more>")),
    ] {
        let v = Value::Array((0..n).map(|i| json!(i)).collect());
        let out = redact(&v);
        let items = out.as_array().expect("array");
        assert_eq!(items.len(), len, "{n}");
        let last_kept = n.min(256) - 1;
        assert_eq!(items[last_kept], json!(last_kept));
        assert_eq!(items.get(256).and_then(Value::as_str), marker, "{n}");
        assert_idempotent(&v);
    }
}

#[test]
fn objects_keep_256_entries_and_count_the_rest() {
    for (n, truncated) in [(255, None), (256, None), (257, Some(1)), (600, Some(344))] {
        let v = Value::Object((0..n).map(|i| (format!("k{i:04}"), json!(i))).collect());
        let out = redact(&v);
        let map = out.as_object().expect("object");
        assert_eq!(
            map.len(),
            n.min(256) + usize::from(truncated.is_some()),
            "{n}"
        );
        assert_eq!(
            map.get(TRUNCATED_KEY).and_then(Value::as_u64),
            truncated,
            "{n}"
        );
        let last_kept = n.min(256) - 1;
        assert_eq!(
            map.get(&format!("k{last_kept:04}")),
            Some(&json!(last_kept))
        );
        assert_eq!(map.get(&format!("k{:04}", last_kept + 1)), None);
        assert_idempotent(&v);
    }
}

#[test]
fn markers_are_carried_over_not_counted() {
    let marked = json!(["a", "<+3 more>"]);
    assert_eq!(redact(&marked), marked);
    let marked = json!({"a": 1, "<truncated>": 4});
    assert_eq!(redact(&marked), marked);
    // A marked array that is truncated again adds up the counts.
    let mut items: Vec<Value> = (0..300).map(|i| json!(i)).collect();
    items.push(json!("<+10 more>"));
    let out = redact(&Value::Array(items));
    assert_eq!(
        out.as_array().and_then(|a| a.last()),
        Some(&json!("<+54 more>"))
    );
    let mut map: Map<String, Value> = (0..300).map(|i| (format!("k{i:04}"), json!(i))).collect();
    map.insert(TRUNCATED_KEY.into(), json!(10));
    let out = redact(&Value::Object(map));
    assert_eq!(out.get(TRUNCATED_KEY), Some(&json!(54)));
    // Look-alikes that this module never writes stay ordinary values.
    for v in [
        json!(["a", "<+0 more>"]),
        json!(["a", "<+03 more>"]),
        json!(["a", "<+x more>"]),
        json!(["<+3 more>", "a"]),
        json!({"<truncated>": 0}),
        json!({"<truncated>": "x"}),
        json!({"<truncated>": -1}),
    ] {
        assert_eq!(redact(&v), v);
        assert_idempotent(&v);
    }
    // An ordinary `<truncated>` entry gives way to a real marker and is
    // counted: it sorts first, so 255 `k` keys are kept and 45 dropped.
    let mut map: Map<String, Value> = (0..300).map(|i| (format!("k{i:04}"), json!(i))).collect();
    map.insert(TRUNCATED_KEY.into(), json!("ordinary"));
    let v = Value::Object(map);
    let out = redact(&v);
    assert_eq!(out.get(TRUNCATED_KEY), Some(&json!(46)));
    assert_eq!(out.as_object().map(Map::len), Some(256));
    assert_idempotent(&v);
}

#[test]
fn long_keys_are_clipped_and_collisions_counted() {
    let a = format!("{}a", s(300, 'k'));
    let b = format!("{}b", s(300, 'k'));
    let v = json!({ a.clone(): 1, b: 2, "short": 3 });
    let out = redact(&v);
    let clipped = cut(&s(256, 'k'), 45);
    assert_eq!(out, json!({ clipped: 1, "short": 3, TRUNCATED_KEY: 1 }));
    assert_idempotent(&v);
    // The secret test looks at the original key.
    let secret = format!("{}_token", s(300, 'x'));
    let out = redact(&json!({ secret: "value" }));
    assert_eq!(out, json!({ cut(&s(256, 'x'), 50): REDACTED }));
}

#[test]
fn output_size_is_bounded() {
    // 256 × 256 strings of 300 characters: ~20 MB of input.
    let row = Value::Array((0..256).map(|_| Value::String(s(300, 'x'))).collect());
    let v = Value::Array((0..256).map(|_| row.clone()).collect());
    let out = redact(&v);
    let n = size(&out);
    assert!(n <= MAX_OUTPUT_BYTES, "{n} > {MAX_OUTPUT_BYTES}");
    assert!(n >= OUTPUT_BUDGET, "the budget should be used up, got {n}");
    let rows = out.as_array().expect("array");
    let last = rows.last().and_then(Value::as_str).expect("marker");
    assert!(last.starts_with("<+") && last.ends_with(" more>"), "{last}");
    assert_idempotent(&v);
    // Worst case escaping: control characters cost six bytes each.
    let row = Value::Array((0..256).map(|_| Value::String(s(300, '\u{1}'))).collect());
    let v = json!({ "a": [row.clone(), row.clone()], "b": row });
    let out = redact(&v);
    let n = size(&out);
    assert!(n <= MAX_OUTPUT_BYTES, "{n} > {MAX_OUTPUT_BYTES}");
    assert_idempotent(&v);
}

#[test]
fn the_input_is_never_mutated() {
    let v = json!({"token": "t", "list": [s(300, 'a')], "deep": nest(70, json!(1))});
    let copy = v.clone();
    let _ = redact(&v);
    assert_eq!(v, copy);
}

// ---- properties ----

fn key_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(SECRET_NAMES.to_vec()).prop_map(str::to_owned),
        prop::sample::select(SECRET_NAMES.to_vec())
            .prop_map(|n| format!("X_{}", n.to_ascii_uppercase())),
        prop::sample::select(vec![
            "user",
            "cmd",
            "path",
            "tokens",
            "author",
            "<truncated>",
            "_",
            ""
        ])
        .prop_map(str::to_owned),
        "[a-z_]{0,6}",
        (250usize..270).prop_map(|n| s(n, 'k')),
    ]
}

/// Text the detectors act on (or are guarded against), for idempotency.
const SNIPPETS: [&str; 10] = [
    "export TOKEN=abc123 && ls",
    "-H 'Authorization: Bearer abc.def.12345'",
    "Authorization: Bearer <redacted>",
    "postgres://app:pw@db/prod",
    "ghp_FAKE0123456789abcdefghijklmnopqrstuv",
    "password: \"two words\"",
    "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----",
    "TOKEN='unclosed",
    "curl -u admin:pw https://x",
    "Cookie: a=1; b=2",
];

fn leaf_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
        (250usize..262, prop::char::any()).prop_map(|(n, c)| Value::String(s(n, c))),
        prop::sample::select(vec![REDACTED, MAX_DEPTH_MARK, "<+2 more>", "<+0 more>"])
            .prop_map(|m| Value::String(m.to_owned())),
        prop::sample::select(SNIPPETS.to_vec()).prop_map(|m| Value::String(m.to_owned())),
        // Secrets and guarded constructs around the cut.
        (230usize..262, prop::sample::select(SNIPPETS.to_vec())).prop_map(|(n, snippet)| {
            Value::String(format!("{} {snippet} {}", s(n, 'a'), s(20, 'b')))
        }),
    ]
}

fn value_strategy() -> impl Strategy<Value = Value> {
    let tree = leaf_strategy().prop_recursive(5, 600, 300, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..300).prop_map(Value::Array),
            prop::collection::vec((key_strategy(), inner), 0..300)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    });
    // Wrap in a random number of containers to reach the depth limit.
    (tree, 0usize..70).prop_map(|(v, wrap)| nest(wrap, v))
}

/// No scalar under a secret key (at any depth) is anything but
/// `<redacted>`, the walk's own markers aside; every string, container and
/// depth is within its limit.
fn check_bounded(v: &Value, depth: usize, secret: bool) -> Result<(), TestCaseError> {
    match v {
        Value::String(s) => {
            prop_assert!(s.chars().count() <= MAX_CLIPPED_CHARS);
            if secret {
                prop_assert!(
                    s == REDACTED || s == MAX_DEPTH_MARK,
                    "{s:?} under a secret key"
                );
            }
        }
        Value::Array(items) => {
            prop_assert!(depth < MAX_DEPTH);
            prop_assert!(items.len() <= MAX_ENTRIES + 1);
            let marker = items
                .last()
                .and_then(Value::as_str)
                .is_some_and(|m| m.starts_with("<+") && m.ends_with(" more>"));
            for (i, item) in items.iter().enumerate() {
                let is_marker = marker && i + 1 == items.len();
                check_bounded(item, depth + 1, secret && !is_marker)?;
            }
        }
        Value::Object(map) => {
            prop_assert!(depth < MAX_DEPTH);
            prop_assert!(map.len() <= MAX_ENTRIES + 1);
            for (k, item) in map {
                prop_assert!(k.chars().count() <= MAX_CLIPPED_CHARS);
                let is_marker = k == TRUNCATED_KEY && item.is_u64();
                let secret = (secret || is_secret_key(k)) && !is_marker;
                check_bounded(item, depth + 1, secret)?;
            }
        }
        _ => prop_assert!(!secret, "{v} under a secret key"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn redaction_is_safe_idempotent_and_bounded(v in value_strategy()) {
        let copy = v.clone();
        let once = redact(&v);
        prop_assert_eq!(&v, &copy);
        check_bounded(&once, 0, false)?;
        prop_assert!(size(&once) <= MAX_OUTPUT_BYTES);
        let twice = redact(&once);
        prop_assert_eq!(&once, &twice);
    }
}

/// Pieces of shell-like text whose constructs overlap in every way: quotes,
/// escapes, substitutions, headers, flags, netrc words, clip marks.
const PIECES: &[&str] = &[
    "$(",
    ")",
    "\"",
    "'",
    "`",
    "\\",
    "\\\"",
    "$",
    "(",
    "<(",
    ">(",
    "<",
    ">",
    " ",
    "\t",
    "\n",
    ";",
    "&&",
    "|",
    "=",
    ":",
    "abc",
    "x",
    "é",
    "…",
    "…[+3 chars]",
    "TOKEN=",
    "DB_PASS=",
    "password ",
    "password: ",
    "machine h ",
    "login u ",
    "mysql ",
    "sshpass ",
    "redis-cli ",
    "docker login ",
    "-p",
    " -p ",
    "-a ",
    "-u a:b ",
    "--user ",
    "--token ",
    "Cookie: ",
    "Authorization: Bearer ",
    "Basic YTpi ",
    "{\"password\":",
    "https://u:p@h/",
    "${",
    "}",
    "ghp_FAKE0123456789abcdefghijklmnopqrstuv",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "-----BEGIN RSA PRIVATE KEY-----\nAAA",
    "-----END RSA PRIVATE KEY-----",
];

/// Shell-like text made of [`PIECES`], after up to 300 filler characters.
pub(super) fn shell_like() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(PIECES.to_vec()), 0..120),
        0usize..300,
    )
        .prop_map(|(pieces, pad)| format!("{}{}", s(pad, 'y'), pieces.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever one detector makes of another's output, a second pass
    /// changes nothing: free text, a clipped string, an argv array.
    #[test]
    fn shell_like_text_redacts_to_a_fixpoint(t in shell_like()) {
        let once = redact_text(&t).into_owned();
        prop_assert_eq!(redact_text(&once).into_owned(), once);
        let v = json!([t, ["mysql", t, "-p", t], {"command": t, "password": t}]);
        let once = redact(&v);
        check_bounded(&once, 0, false)?;
        prop_assert_eq!(redact(&once), once);
    }
}
