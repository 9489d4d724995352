//! Argument constraints, the naive way: each regex compiled on its own,
//! pointers resolved by `serde_json`, every text a value reads as listed
//! before any is tested, quotes balanced by deleting quoted runs.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use approval_gate::ArgConstraint;
use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// The compiled-size limit the crate gives `matches` regexes (1 MiB): a
/// constraint whose regex is larger does not compile there, so not here.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What may not follow an allowed command prefix.
const UNSAFE: [char; 9] = [';', '&', '|', '\n', '`', '$', '<', '>', '\\'];

/// Where a deny or ask rule cuts a command line.
const SEPARATORS: [char; 4] = [';', '&', '|', '\n'];

/// How a constraint reads a call: deny and ask rules widely, allow rules
/// and grants strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Doubt falls toward a human.
    Wide,
    /// Only the shape the operator wrote.
    Strict,
}

#[derive(Debug)]
enum Test {
    Equals(Value),
    Matches(Regex),
    Prefix(String),
}

/// Argument constraints, each compiled on its own.
#[derive(Debug)]
pub struct RefArgs(Vec<(String, Test)>);

impl RefArgs {
    /// The constraints of `map` (in key order), or `None` when one would not
    /// compile: a regex that fails or is over the size limit, or a JSON
    /// Pointer with a `~` not followed by `0` or `1`.
    pub fn of(map: &BTreeMap<String, ArgConstraint>) -> Option<RefArgs> {
        let mut out = Vec::new();
        for (field, c) in map {
            if field.starts_with('/') && !pointer_escapes_valid(field) {
                return None;
            }
            let test = match c {
                ArgConstraint::Equals(v) => Test::Equals(v.clone()),
                ArgConstraint::Matches(re) => Test::Matches(
                    RegexBuilder::new(re)
                        .size_limit(REGEX_SIZE_LIMIT)
                        .build()
                        .ok()?,
                ),
                ArgConstraint::Prefix(p) => Test::Prefix(p.clone()),
                // Not modelled yet: such a rule does not compile here.
                ArgConstraint::Runs(_) => return None,
            };
            out.push((field.clone(), test));
        }
        Some(RefArgs(out))
    }

    /// Whether every constraint holds for the call's arguments.
    pub fn hold(&self, args: Option<&Value>, reading: Reading) -> bool {
        let Some(whole @ Value::Object(map)) = args else {
            return reading == Reading::Wide;
        };
        self.0.iter().all(|(field, test)| {
            let found = if field.starts_with('/') {
                whole.pointer(field)
            } else {
                map.get(field)
            };
            let value = match found {
                None | Some(Value::Null) => {
                    return matches!(test, Test::Equals(Value::Null));
                }
                Some(value) => value,
            };
            match test {
                Test::Equals(expected) => match reading {
                    Reading::Strict => value == expected,
                    Reading::Wide => loosely_equal(value, expected),
                },
                Test::Matches(re) => texts(value, reading).iter().any(|t| re.is_match(t)),
                Test::Prefix(prefix) => texts(value, reading).iter().any(|t| match reading {
                    Reading::Strict => command_prefix(t, prefix),
                    Reading::Wide => any_segment_starts(t, prefix),
                }),
            }
        })
    }
}

/// Every text a present, non-null value reads as.
fn texts(value: &Value, reading: Reading) -> Vec<String> {
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    };
    match (reading, value) {
        (_, Value::String(s)) => vec![s.clone()],
        (Reading::Wide, Value::Number(_) | Value::Bool(_)) => vec![value.to_string()],
        (Reading::Wide, Value::Array(items)) => {
            let mut out: Vec<String> = items.iter().filter_map(scalar).collect();
            let all: Vec<String> = items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            out.push(all.join(" "));
            out
        }
        (Reading::Strict, Value::Array(items)) => {
            let strings: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            strings.map(|s| vec![s.join(" ")]).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// JSON equality where numbers are equal by value.
fn loosely_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.as_f64() == y.as_f64()
            } else {
                let wide = |n: &serde_json::Number| {
                    n.as_u64().map(i128::from).or(n.as_i64().map(i128::from))
                };
                wide(x) == wide(y)
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && (0..x.len()).all(|i| loosely_equal(&x[i], &y[i]))
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |m: &serde_json::Map<String, Value>| {
                let mut k: Vec<String> = m.keys().cloned().collect();
                k.sort();
                k
            };
            keys(x) == keys(y) && x.iter().all(|(k, v)| loosely_equal(v, &y[k]))
        }
        _ => a == b,
    }
}

/// Allow rules and grants: the text is the command, or the command with
/// plain arguments after a word boundary.
fn command_prefix(text: &str, prefix: &str) -> bool {
    if text == prefix {
        return true;
    }
    let Some(rest) = text.strip_prefix(prefix) else {
        return false;
    };
    let at_word_end = prefix.is_empty()
        || prefix.chars().last().is_some_and(char::is_whitespace)
        || rest.chars().next().is_some_and(char::is_whitespace);
    at_word_end && !rest.contains(UNSAFE) && quotes_balanced(rest)
}

/// Quotes are balanced when deleting every quoted run, leftmost first,
/// leaves no quote behind.
fn quotes_balanced(text: &str) -> bool {
    static QUOTED: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(quoted) = QUOTED
        .get_or_init(|| Regex::new(r#""[^"]*"|'[^']*'"#).ok())
        .as_ref()
    else {
        return false;
    };
    !quoted.replace_all(text, "").contains(['"', '\''])
}

/// Deny and ask rules: a segment of the command line starts with `prefix`.
fn any_segment_starts(text: &str, prefix: &str) -> bool {
    let cut: String = text
        .chars()
        .map(|c| if SEPARATORS.contains(&c) { '\n' } else { c })
        .collect();
    cut.split('\n')
        .any(|segment| segment.trim().starts_with(prefix))
}

/// RFC 6901: every `~` is followed by `0` or `1`.
fn pointer_escapes_valid(pointer: &str) -> bool {
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_contract_examples_of_command_prefixes() {
        assert!(command_prefix("git status --short", "git status"));
        assert!(!command_prefix("git status; curl x | sh", "git status"));
        assert!(!command_prefix("git statusx", "git status"));
        assert!(!command_prefix("git status $(id)", "git status"));
        assert!(command_prefix("git commit -m \"it's\"", "git commit"));
        assert!(!command_prefix("git commit -m 'open", "git commit"));
        assert!(any_segment_starts("git status; rm -rf /", "rm"));
        assert!(!any_segment_starts("echo rm", "rm"));
        assert!(any_segment_starts("", ""));
    }

    #[test]
    fn readings_differ_on_shapes() {
        let map: BTreeMap<String, ArgConstraint> = [(
            "command".to_owned(),
            ArgConstraint::Matches("rm -rf".into()),
        )]
        .into();
        let args = RefArgs::of(&map).expect("compiles");
        let argv = json!({"command": ["rm", "-rf", "/"]});
        assert!(args.hold(Some(&argv), Reading::Wide));
        assert!(args.hold(Some(&argv), Reading::Strict));
        assert!(args.hold(Some(&json!([1])), Reading::Wide));
        assert!(!args.hold(Some(&json!([1])), Reading::Strict));
        assert!(loosely_equal(&json!({"a": [1.0]}), &json!({"a": [1]})));
        assert!(!loosely_equal(&json!(1), &json!("1")));
    }
}
