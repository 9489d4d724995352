//! Argument constraints of object rules, compiled once.
//!
//! # Format
//!
//! ```json
//! { "command": { "matches": "^git " },      // top-level argument, unanchored regex
//!   "/options/force": { "equals": true } }  // JSON Pointer (RFC 6901) into the arguments
//! ```
//!
//! `equals` is serde_json equality: type-strict (`1` ≠ `"1"`, and an integer
//! is never equal to a float, so `1` ≠ `1.0`), object key order irrelevant,
//! arrays element-wise. A missing field reads as `null`, so
//! `{"equals": null}` holds for a missing field. `matches` and `prefix` hold
//! only for a string value; a missing or non-string field never matches.
//! `prefix` is a plain `starts_with` (no regex, no case folding): what a
//! human means by "this command, with any arguments after it".

use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How a constraint compares (wire: `"equals"` / `"matches"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintOp {
    /// Type-strict JSON equality.
    Equals,
    /// Unanchored regex on a string.
    Matches,
    /// The string starts with the value.
    Prefix,
}

impl ConstraintOp {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConstraintOp::Equals => "equals",
            ConstraintOp::Matches => "matches",
            ConstraintOp::Prefix => "prefix",
        }
    }
}

/// The argument constraint a matching rule reports: its first in key order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchedConstraint<'r> {
    /// The `args` key as written (a name or a JSON Pointer).
    pub field: &'r str,
    /// `equals` or `matches`.
    pub operator: ConstraintOp,
    /// The expected value; for `matches` the regex as a JSON string.
    pub value: &'r Value,
}

/// A missing field, for `equals`.
static NULL: Value = Value::Null;

/// The largest compiled form a `matches` regex may have (the `regex` crate's
/// default is 10 MiB). Matching is linear in the argument's length, but the
/// factor grows with the compiled size: at 10 MiB a counted repetition of
/// Unicode classes such as `(?i)(?:\w+\s+){60}--force` took seconds per MiB
/// of argument on the gate's hot path, and failing to compile near the limit
/// took a second per rule. At 1 MiB such a regex is a compile error (the
/// rule is reported and the rule set falls back to holding), ordinary
/// patterns are untouched, and the worst accepted ones stay in milliseconds
/// on a 10 MiB argument.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Where a constraint looks in the arguments object.
#[derive(Debug, Clone)]
enum FieldPath {
    /// A top-level argument name.
    Key(Box<str>),
    /// The unescaped tokens of a JSON Pointer (at least one).
    Pointer(Box<[PointerToken]>),
}

/// One reference token of a JSON Pointer.
#[derive(Debug, Clone)]
struct PointerToken {
    /// The token as an object key (`~0` / `~1` already unescaped).
    key: Box<str>,
    /// The token as an array index, when it is one (`0` or no leading zero).
    index: Option<usize>,
}

/// What a constraint tests.
#[derive(Debug, Clone)]
enum Test {
    Equals,
    Matches(Regex),
    Prefix(Box<str>),
}

/// One compiled `args` entry.
#[derive(Debug, Clone)]
pub(crate) struct CompiledConstraint {
    /// The key as written in the rule (shown in deny reasons).
    field: Box<str>,
    path: FieldPath,
    test: Test,
    /// For `equals` the expected value; for `matches` the regex source as a
    /// JSON string (what deny reasons and envelopes show).
    value: Value,
}

impl CompiledConstraint {
    /// Compiles an `equals` constraint on `field`.
    pub(crate) fn equals(field: &str, expected: &Value) -> Result<CompiledConstraint, String> {
        Ok(CompiledConstraint {
            field: field.into(),
            path: parse_field(field)?,
            test: Test::Equals,
            value: expected.clone(),
        })
    }

    /// Compiles a `matches` constraint on `field`.
    pub(crate) fn matches(field: &str, pattern: &str) -> Result<CompiledConstraint, String> {
        let path = parse_field(field)?;
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => format!(
                    "args {field:?}: the regex {pattern:?} compiles to more than the 1 MiB limit \
                     that keeps the gate fast; use an ASCII class such as (?-u:\\w) instead \
                     of \\w (Unicode classes are large), or a shorter repetition"
                ),
                e => format!("args {field:?}: invalid regex {pattern:?}: {e}"),
            })?;
        Ok(CompiledConstraint {
            field: field.into(),
            path,
            test: Test::Matches(regex),
            value: Value::String(pattern.to_owned()),
        })
    }

    /// Compiles a `prefix` constraint on `field`.
    pub(crate) fn prefix(field: &str, prefix: &str) -> Result<CompiledConstraint, String> {
        Ok(CompiledConstraint {
            field: field.into(),
            path: parse_field(field)?,
            test: Test::Prefix(prefix.into()),
            value: Value::String(prefix.to_owned()),
        })
    }

    /// Whether the constraint holds for the arguments object.
    pub(crate) fn holds(&self, args: &Map<String, Value>) -> bool {
        let found = self.lookup(args);
        match &self.test {
            Test::Equals => found.unwrap_or(&NULL) == &self.value,
            Test::Matches(regex) => matches!(found, Some(Value::String(s)) if regex.is_match(s)),
            Test::Prefix(prefix) => {
                matches!(found, Some(Value::String(s)) if s.starts_with(&**prefix))
            }
        }
    }

    /// The constraint as reported in decisions.
    pub(crate) fn matched(&self) -> MatchedConstraint<'_> {
        MatchedConstraint {
            field: &self.field,
            operator: match self.test {
                Test::Equals => ConstraintOp::Equals,
                Test::Matches(_) => ConstraintOp::Matches,
                Test::Prefix(_) => ConstraintOp::Prefix,
            },
            value: &self.value,
        }
    }

    fn lookup<'v>(&self, args: &'v Map<String, Value>) -> Option<&'v Value> {
        match &self.path {
            FieldPath::Key(key) => args.get(&**key),
            FieldPath::Pointer(tokens) => {
                let (first, rest) = tokens.split_first()?;
                let mut current = args.get(&*first.key)?;
                for token in rest {
                    current = match current {
                        Value::Object(map) => map.get(&*token.key)?,
                        Value::Array(items) => items.get(token.index?)?,
                        _ => return None,
                    };
                }
                Some(current)
            }
        }
    }
}

/// A key starting with `/` is a JSON Pointer; anything else a top-level name.
fn parse_field(field: &str) -> Result<FieldPath, String> {
    let Some(pointer) = field.strip_prefix('/') else {
        return Ok(FieldPath::Key(field.into()));
    };
    let tokens = pointer
        .split('/')
        .map(|raw| {
            let key = unescape_token(raw).ok_or_else(|| {
                format!("args {field:?}: invalid JSON pointer: `~` must be followed by `0` or `1`")
            })?;
            let index = array_index(&key);
            Ok(PointerToken {
                key: key.into(),
                index,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(FieldPath::Pointer(tokens.into()))
}

/// RFC 6901 unescaping: `~1` → `/`, `~0` → `~`; any other `~` is invalid.
fn unescape_token(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// RFC 6901 array index: `0`, or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn eq(field: &str, expected: Value) -> CompiledConstraint {
        CompiledConstraint::equals(field, &expected).expect("compiles")
    }

    fn re(field: &str, pattern: &str) -> CompiledConstraint {
        CompiledConstraint::matches(field, pattern).expect("compiles")
    }

    #[test]
    fn equals_is_type_strict() {
        let args = obj(json!({"n": 1, "f": 1.0, "s": "1", "b": true, "z": null, "neg": -1}));
        assert!(eq("n", json!(1)).holds(&args));
        assert!(!eq("n", json!(1.0)).holds(&args));
        assert!(!eq("n", json!("1")).holds(&args));
        assert!(!eq("n", json!(true)).holds(&args));
        assert!(eq("f", json!(1.0)).holds(&args));
        assert!(!eq("f", json!(1)).holds(&args));
        assert!(eq("s", json!("1")).holds(&args));
        assert!(!eq("s", json!(1)).holds(&args));
        assert!(eq("b", json!(true)).holds(&args));
        assert!(!eq("b", json!(1)).holds(&args));
        assert!(eq("neg", json!(-1)).holds(&args));
        assert!(!eq("neg", json!(1)).holds(&args));
        assert!(eq("z", Value::Null).holds(&args));
    }

    #[test]
    fn equals_compares_containers_structurally() {
        let args = obj(json!({"o": {"a": 1, "b": [1, 2]}, "arr": [1, 2]}));
        assert!(eq("o", json!({"b": [1, 2], "a": 1})).holds(&args));
        assert!(!eq("o", json!({"a": 1})).holds(&args));
        assert!(eq("arr", json!([1, 2])).holds(&args));
        assert!(!eq("arr", json!([2, 1])).holds(&args));
    }

    #[test]
    fn missing_fields_read_as_null() {
        let args = obj(json!({"present": 0}));
        assert!(eq("absent", Value::Null).holds(&args));
        assert!(!eq("absent", json!(0)).holds(&args));
        assert!(!eq("present", Value::Null).holds(&args));
        assert!(eq("/a/b", Value::Null).holds(&args));
        assert!(!re("absent", "").holds(&args));
    }

    #[test]
    fn matches_is_unanchored_and_strings_only() {
        let args = obj(json!({"cmd": "git push --force", "n": 12, "b": true, "o": {"x": "git"}}));
        assert!(re("cmd", "push").holds(&args));
        assert!(re("cmd", "^git").holds(&args));
        assert!(!re("cmd", "^push").holds(&args));
        assert!(re("cmd", "--force$").holds(&args));
        assert!(re("cmd", "").holds(&args));
        assert!(!re("n", "12").holds(&args));
        assert!(!re("n", "").holds(&args));
        assert!(!re("b", "true").holds(&args));
        assert!(!re("o", "git").holds(&args));
        assert!(re("/o/x", "^git$").holds(&args));
    }

    #[test]
    fn prefix_is_a_plain_starts_with_on_strings_only() {
        let pre = |field: &str, p: &str| CompiledConstraint::prefix(field, p).expect("compiles");
        let args = obj(json!({"cmd": "git push origin", "n": 12, "o": {"x": "git"}}));
        assert!(pre("cmd", "git ").holds(&args));
        assert!(pre("cmd", "").holds(&args));
        assert!(pre("cmd", "git push origin").holds(&args));
        assert!(!pre("cmd", "git push origin main").holds(&args));
        assert!(!pre("cmd", "Git").holds(&args));
        assert!(!pre("cmd", "push").holds(&args));
        assert!(!pre("cmd", ".*").holds(&args));
        assert!(!pre("n", "1").holds(&args));
        assert!(!pre("absent", "").holds(&args));
        assert!(pre("/o/x", "gi").holds(&args));
        let m = pre("cmd", "git ");
        assert_eq!(m.matched().operator, ConstraintOp::Prefix);
        assert_eq!(m.matched().value, &json!("git "));
        assert!(CompiledConstraint::prefix("/a~", "x").is_err());
    }

    #[test]
    fn pointers_walk_objects_and_arrays() {
        let args = obj(json!({
            "a": {"b": {"c": 5}},
            "list": [10, {"k": "v"}],
            "x/y": 1, "t~u": 2, "": {"": 3}, "01": 4
        }));
        assert!(eq("/a/b/c", json!(5)).holds(&args));
        assert!(eq("/a/b", json!({"c": 5})).holds(&args));
        assert!(eq("/list/0", json!(10)).holds(&args));
        assert!(eq("/list/1/k", json!("v")).holds(&args));
        assert!(eq("/list/2", Value::Null).holds(&args));
        assert!(eq("/list/-", Value::Null).holds(&args));
        assert!(!eq("/list/-", json!(10)).holds(&args));
        // Leading zeros are not array indices.
        assert!(!eq("/list/00", json!(10)).holds(&args));
        assert!(eq("/x~1y", json!(1)).holds(&args));
        assert!(eq("/t~0u", json!(2)).holds(&args));
        assert!(eq("//", json!(3)).holds(&args));
        assert!(eq("/", json!({"": 3})).holds(&args));
        // A digit token still names an object key.
        assert!(eq("/01", json!(4)).holds(&args));
        // Walking through a scalar finds nothing.
        assert!(eq("/a/b/c/d", Value::Null).holds(&args));
        assert!(!eq("/a/b/c/d", json!(5)).holds(&args));
    }

    #[test]
    fn a_key_without_slash_is_a_top_level_name() {
        let args = obj(json!({"a/b": 1, "a": {"b": 2}}));
        assert!(eq("a/b", json!(1)).holds(&args));
        assert!(eq("/a/b", json!(2)).holds(&args));
    }

    #[test]
    fn bad_pointers_and_regexes_are_errors() {
        for bad in ["/a~", "/a~2", "/~x/b", "/ok/~"] {
            let err = CompiledConstraint::equals(bad, &Value::Null).expect_err(bad);
            assert!(err.contains("invalid JSON pointer"), "{err}");
            assert!(err.contains(bad), "{err}");
        }
        let err = CompiledConstraint::matches("cmd", "(").expect_err("bad regex");
        assert!(err.contains("invalid regex"), "{err}");
        assert!(err.contains("\"cmd\""), "{err}");
        // A top-level key may contain `~` freely.
        assert!(CompiledConstraint::equals("a~", &Value::Null).is_ok());
    }

    #[test]
    fn heavy_regexes_are_compile_errors_and_ordinary_ones_are_not() {
        for heavy in [
            r"(?i)(?:\w+\s+){60}--force",
            r"(?:a|b|\w){200}z",
            r"\w{100}",
            r"\w{1000}",
            r"(?:\w{10}){30}",
            r"[\p{L}\p{N}]{300}",
        ] {
            let started = std::time::Instant::now();
            let err = CompiledConstraint::matches("cmd", heavy).expect_err(heavy);
            assert!(err.contains("1 MiB limit"), "{err}");
            assert!(err.contains(r"(?-u:\w)"), "{err}");
            assert!(err.contains("shorter repetition"), "{err}");
            assert!(err.contains(&format!("{heavy:?}")), "{err}");
            // Refused long before the default limit would have been reached.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{heavy}"
            );
        }
        for ordinary in [
            r"push .*--force",
            r"^git\s+push\b",
            r"(?i)rm\s+-rf?\s+/",
            r"\w+@\w+\.com",
            r"(?i)(?:\w+\s+){20}--force",
            r"(?-u:\w){500}z",
            r"[a-z0-9_-]{1,64}",
            r"^(?:[^/]+/){0,8}[^/]*\.env$",
        ] {
            assert!(
                CompiledConstraint::matches("cmd", ordinary).is_ok(),
                "{ordinary}"
            );
        }
    }

    #[test]
    fn accepted_regexes_stay_fast_on_a_large_argument() {
        // The heaviest shape still under the limit, on 4 MiB of words.
        let c = re("cmd", r"(?i)(?:\w+\s+){20}--force");
        let words: String = (0..4 << 20)
            .map(|i| {
                if i % 7 == 6 {
                    ' '
                } else {
                    char::from(b'a' + (i % 26) as u8)
                }
            })
            .collect();
        let args = obj(json!({ "cmd": words }));
        let started = std::time::Instant::now();
        assert!(!c.holds(&args));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn matched_reports_field_operator_and_value() {
        let c = eq("/a/b", json!({"k": [1]}));
        let m = c.matched();
        assert_eq!(m.field, "/a/b");
        assert_eq!(m.operator, ConstraintOp::Equals);
        assert_eq!(m.value, &json!({"k": [1]}));
        let c = re("cmd", "^rm ");
        let m = c.matched();
        assert_eq!(m.field, "cmd");
        assert_eq!(m.operator, ConstraintOp::Matches);
        assert_eq!(m.value, &json!("^rm "));
    }

    #[test]
    fn array_index_follows_rfc_6901() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("17"), Some(17));
        assert_eq!(array_index("01"), None);
        assert_eq!(array_index(""), None);
        assert_eq!(array_index("-"), None);
        assert_eq!(array_index("1a"), None);
        assert_eq!(array_index("+1"), None);
        assert_eq!(array_index("99999999999999999999999999"), None);
    }
}
