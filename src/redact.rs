//! Redaction of call arguments before they are stored, shown, emitted or
//! logged. Raw arguments never leave the gate; this is the only way out.
//!
//! Rules (contract §4), applied in one pass that never mutates its input:
//!
//! * a value under a secret key ([`is_secret_key`]) becomes `"<redacted>"`,
//!   whatever its type;
//! * a string longer than 256 Unicode code points keeps its first 256 and
//!   gets `…`; object keys are clipped the same way (keys are output too);
//! * an array or object at depth 64 or more becomes `"<max-depth>"`, the
//!   root being at depth 0 — so 64 nested containers survive, the 65th is
//!   replaced;
//! * a container keeps at most 256 entries, and entries stop being added
//!   once the output reaches [`OUTPUT_BUDGET`] bytes; an array marks what it
//!   dropped with a trailing `"<+N more>"`, an object with a
//!   `"<truncated>": N` entry. The serialized output never exceeds
//!   [`MAX_OUTPUT_BYTES`].
//!
//! Redacting twice changes nothing: the clip of a clipped string is itself,
//! the markers are recognised and carried over (their counts included), and
//! the output budget is charged by the output, so a second pass sees the
//! same — or smaller — costs at every point and keeps every entry.
//!
//! Recursion is bounded by the depth limit, so arbitrarily deep input is safe.

use serde_json::{Map, Number, Value};

/// What a secret-keyed value becomes.
pub const REDACTED: &str = "<redacted>";
/// What a container nested too deep becomes.
pub const MAX_DEPTH_MARK: &str = "<max-depth>";
/// Appended to a clipped string.
pub const CLIP_MARK: char = '…';
/// The object key that counts the entries an object lost.
pub const TRUNCATED_KEY: &str = "<truncated>";
/// Strings (and keys) longer than this many code points are clipped.
pub const MAX_STRING_CHARS: usize = 256;
/// Containers at this depth or deeper (root = 0) are replaced.
pub const MAX_DEPTH: usize = 64;
/// A container keeps at most this many entries.
pub const MAX_ENTRIES: usize = 256;
/// Entries stop being added once the output reaches this many bytes.
pub const OUTPUT_BUDGET: usize = 64 * 1024;
/// Hard bound on the serialized (compact JSON) size of any output: the
/// budget, plus the last entry admitted below it (at most a clipped key and a
/// clipped string, fully escaped) and one marker per open container.
#[cfg(test)]
pub const MAX_OUTPUT_BYTES: usize = OUTPUT_BUDGET + 8 * 1024;

/// Names whose values are secrets, compared ignoring ASCII case.
const SECRET_NAMES: [&str; 11] = [
    "password",
    "token",
    "api_key",
    "apikey",
    "secret",
    "auth",
    "authorization",
    "access_key",
    "access_token",
    "refresh_token",
    "private_key",
];

/// Upper bound of a serialized number (`-2.2250738585072014e-308`).
const NUMBER_COST: usize = 24;

/// Whether a value under `key` is a secret: the key equals one of
/// `password, token, api_key, apikey, secret, auth, authorization,
/// access_key, access_token, refresh_token, private_key` ignoring ASCII case,
/// or ends in `_` + one of them (`db_password`, `GITHUB_TOKEN`).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.as_bytes();
    SECRET_NAMES.iter().any(|name| {
        let name = name.as_bytes();
        if key.len() == name.len() {
            return key.eq_ignore_ascii_case(name);
        }
        key.len() > name.len()
            && key[key.len() - name.len() - 1] == b'_'
            && key[key.len() - name.len()..].eq_ignore_ascii_case(name)
    })
}

/// The redacted copy of `value` (see the module docs for the rules).
pub fn redact(value: &Value) -> Value {
    Redactor { used: 0 }.value(value, 0)
}

/// One redaction pass; `used` estimates (from above) the bytes output so far.
struct Redactor {
    used: usize,
}

impl Redactor {
    fn value(&mut self, value: &Value, depth: usize) -> Value {
        match value {
            Value::Null => {
                self.used += 4;
                Value::Null
            }
            Value::Bool(b) => {
                self.used += 5;
                Value::Bool(*b)
            }
            Value::Number(n) => {
                self.used += NUMBER_COST;
                Value::Number(n.clone())
            }
            Value::String(s) => self.string(s),
            Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => self.string(MAX_DEPTH_MARK),
            Value::Array(items) => self.array(items, depth),
            Value::Object(map) => self.object(map, depth),
        }
    }

    fn string(&mut self, s: &str) -> Value {
        let out = clip(s);
        self.used += string_cost(&out);
        Value::String(out)
    }

    fn array(&mut self, items: &[Value], depth: usize) -> Value {
        self.used += 2;
        let (items, carried) = match items.split_last() {
            Some((Value::String(last), rest)) => match parse_more_marker(last) {
                Some(n) => (rest, n),
                None => (items, 0),
            },
            _ => (items, 0),
        };
        let mut out = Vec::with_capacity(items.len().min(MAX_ENTRIES) + 1);
        for item in items {
            if out.len() == MAX_ENTRIES || self.used >= OUTPUT_BUDGET {
                break;
            }
            self.used += 1;
            out.push(self.value(item, depth + 1));
        }
        let dropped = (items.len() - out.len()) as u64;
        let more = dropped.saturating_add(carried);
        if more > 0 {
            let marker = format!("<+{more} more>");
            self.used += 1 + string_cost(&marker);
            out.push(Value::String(marker));
        }
        Value::Array(out)
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        self.used += 2;
        // A marker from an earlier pass: carried over, not counted as an entry.
        let carried = match map.get(TRUNCATED_KEY) {
            Some(Value::Number(n)) => n.as_u64().filter(|&n| n > 0),
            _ => None,
        };
        let is_marker = |k: &str| carried.is_some() && k == TRUNCATED_KEY;
        let total = map.len() - usize::from(carried.is_some());
        let mut out = Map::new();
        let mut consumed = 0usize;
        let mut collisions = 0u64;
        for (key, value) in map {
            if is_marker(key) {
                continue;
            }
            if out.len() == MAX_ENTRIES || self.used >= OUTPUT_BUDGET {
                break;
            }
            consumed += 1;
            let out_key = clip(key);
            if out.contains_key(&out_key) {
                // Two long keys with the same first 256 code points.
                collisions += 1;
                continue;
            }
            self.used += 2 + string_cost(&out_key);
            let out_value = if is_secret_key(key) {
                self.string(REDACTED)
            } else {
                self.value(value, depth + 1)
            };
            out.insert(out_key, out_value);
        }
        let dropped = ((total - consumed) as u64).saturating_add(collisions);
        let mut more = dropped.saturating_add(carried.unwrap_or(0));
        if more > 0 {
            if out.contains_key(TRUNCATED_KEY) {
                // An ordinary entry of that name gives way to the marker.
                more = more.saturating_add(1);
            }
            self.used += 2 + string_cost(TRUNCATED_KEY) + NUMBER_COST;
            out.insert(TRUNCATED_KEY.to_owned(), Value::Number(Number::from(more)));
        }
        Value::Object(out)
    }
}

/// `s` cut to its first 256 code points plus `…`, when longer.
fn clip(s: &str) -> String {
    match s.char_indices().nth(MAX_STRING_CHARS) {
        None => s.to_owned(),
        Some((cut, _)) => {
            let mut out = String::with_capacity(cut + CLIP_MARK.len_utf8());
            out.push_str(&s[..cut]);
            out.push(CLIP_MARK);
            out
        }
    }
}

/// Upper bound of the serialized size of a string: quotes, and six bytes for
/// every byte that may need an escape.
fn string_cost(s: &str) -> usize {
    let escapes = s
        .bytes()
        .filter(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .count();
    s.len() + 2 + escapes * 5
}

/// `N` of a `"<+N more>"` marker as this module writes it.
fn parse_more_marker(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("<+")?.strip_suffix(" more>")?;
    // Only what this module writes: no leading zero, never 0.
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    if !canonical {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn s(n: usize, c: char) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    /// `n` nested containers around `leaf`, alternating array / object.
    fn nest(n: usize, leaf: Value) -> Value {
        let mut v = leaf;
        for i in 0..n {
            v = if i % 2 == 0 {
                Value::Array(vec![v])
            } else {
                // Not `json!`: it would serialize `v` again, recursively.
                let mut map = Map::new();
                map.insert("k".to_owned(), v);
                Value::Object(map)
            };
        }
        v
    }

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
    fn every_secret_name_in_every_case_and_suffix_form() {
        for name in SECRET_NAMES {
            let upper = name.to_ascii_uppercase();
            let mixed: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for form in [name.to_owned(), upper.clone(), mixed.clone()] {
                assert!(is_secret_key(&form), "{form}");
                assert!(is_secret_key(&format!("db_{form}")), "db_{form}");
                assert!(is_secret_key(&format!("A_B_{form}")), "A_B_{form}");
                assert!(is_secret_key(&format!("_{form}")), "_{form}");
                assert!(!is_secret_key(&format!("{form}s")), "{form}s");
                // `xaccess_token` still ends in `_token`: only whole names count.
                if !name.contains('_') {
                    assert!(!is_secret_key(&format!("x{form}")), "x{form}");
                    assert!(!is_secret_key(&format!("x-{form}")), "x-{form}");
                    assert!(!is_secret_key(&format!(" {form}")), " {form}");
                }
                assert!(!is_secret_key(&format!("{form}_id")), "{form}_id");
            }
        }
    }

    #[test]
    fn near_misses_are_not_secrets() {
        for key in [
            "",
            "_",
            "tok",
            "tokens",
            "author",
            "oauth",
            "authorized",
            "key",
            "secrets",
            "pass",
            "passwd",
            "access",
            "private",
            "api",
            "id_token_type",
            "tokenizer",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
        for key in [
            "id_token",
            "oauth_auth",
            "GITHUB_TOKEN",
            "X_API_KEY",
            "user_apikey",
            "my_secret",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        // Non-ASCII case folding is not applied.
        assert!(!is_secret_key("ＴＯＫＥＮ"));
    }

    #[test]
    fn secret_values_are_redacted_whatever_their_type() {
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
                "auth": REDACTED, "Authorization": REDACTED, "db_password": REDACTED,
                "user": "alice", "nested": [{"refresh_token": REDACTED, "ok": 1}]
            })
        );
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
    fn strings_clip_after_256_code_points() {
        for (n, kept) in [(255, 255), (256, 256), (257, 256), (10_000, 256)] {
            let out = redact(&Value::String(s(n, 'a')));
            let expected = if n > 256 {
                format!("{}…", s(256, 'a'))
            } else {
                s(n, 'a')
            };
            assert_eq!(out, Value::String(expected), "length {n}");
            let chars = out.as_str().expect("string").chars().count();
            assert_eq!(chars, if n > 256 { kept + 1 } else { kept });
        }
    }

    #[test]
    fn clipping_counts_code_points_not_bytes() {
        for c in ['é', '€', '🦀'] {
            assert_eq!(redact(&Value::String(s(256, c))), Value::String(s(256, c)));
            let out = redact(&Value::String(s(257, c)));
            assert_eq!(out, Value::String(format!("{}…", s(256, c))));
        }
        // A cut right after a multibyte character in a mixed string.
        let mixed = format!("{}é{}", s(255, 'a'), s(5, 'b'));
        assert_eq!(
            redact(&Value::String(mixed)),
            Value::String(format!("{}é…", s(255, 'a')))
        );
        // A 257-character string already ending in the clip mark is stable.
        let marked = format!("{}…", s(256, 'a'));
        assert_eq!(
            redact(&Value::String(marked.clone())),
            Value::String(marked)
        );
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
        let mut map: Map<String, Value> =
            (0..300).map(|i| (format!("k{i:04}"), json!(i))).collect();
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
        let mut map: Map<String, Value> =
            (0..300).map(|i| (format!("k{i:04}"), json!(i))).collect();
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
        let clipped = format!("{}…", s(256, 'k'));
        assert_eq!(out, json!({ clipped: 1, "short": 3, TRUNCATED_KEY: 1 }));
        assert_idempotent(&v);
        // The secret test looks at the original key.
        let secret = format!("{}_token", s(300, 'x'));
        let out = redact(&json!({ secret: "value" }));
        assert_eq!(out, json!({ format!("{}…", s(256, 'x')): REDACTED }));
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

    /// No secret-keyed value is anything but `<redacted>`; every string,
    /// container and depth is within its limit.
    fn check_bounded(v: &Value, depth: usize) -> Result<(), TestCaseError> {
        match v {
            Value::String(s) => prop_assert!(s.chars().count() <= MAX_STRING_CHARS + 1),
            Value::Array(items) => {
                prop_assert!(depth < MAX_DEPTH);
                prop_assert!(items.len() <= MAX_ENTRIES + 1);
                for item in items {
                    check_bounded(item, depth + 1)?;
                }
            }
            Value::Object(map) => {
                prop_assert!(depth < MAX_DEPTH);
                prop_assert!(map.len() <= MAX_ENTRIES + 1);
                for (k, item) in map {
                    prop_assert!(k.chars().count() <= MAX_STRING_CHARS + 1);
                    if is_secret_key(k) {
                        prop_assert_eq!(item, &json!(REDACTED));
                    }
                    check_bounded(item, depth + 1)?;
                }
            }
            _ => {}
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
            check_bounded(&once, 0)?;
            prop_assert!(size(&once) <= MAX_OUTPUT_BYTES);
            let twice = redact(&once);
            prop_assert_eq!(&once, &twice);
        }
    }
}
