//! Argument constraints, the naive way: each regex compiled on its own,
//! pointers resolved by `serde_json` (exact names) or by walking every key
//! that matches ignoring ASCII case (deny and ask, §25.7), every text a value
//! reads as listed before any is tested, quotes balanced by deleting quoted
//! runs. Command constraints (`runs`, and `prefix` on a `shell::*`
//! `command`) are judged against the command model (`crate::commands`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use approval_gate::ArgConstraint;
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use crate::commands::{self, either, Found, Models, Sources};

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
    /// Text on most fields; what runs on a command field.
    Prefix(String, Vec<String>),
    /// What runs, on any field.
    Runs(Vec<String>),
}

/// One constraint: the field as written and its test.
#[derive(Debug)]
struct Constraint {
    field: String,
    test: Test,
}

impl Constraint {
    /// The one top-level key the field names: a name, or a pointer of one
    /// token.
    fn top_key(&self) -> Option<String> {
        match self.field.strip_prefix('/') {
            None => Some(self.field.clone()),
            Some(rest) if !rest.contains('/') => unescape(rest),
            Some(_) => None,
        }
    }

    /// Whether the field is a `shell::*` runner's `command`.
    fn on_shell_command(&self, fid: &str, ignore_case: bool) -> bool {
        self.top_key()
            .is_some_and(|k| commands::is_shell_command(fid, &k, ignore_case))
    }

    /// The words of a command constraint (§25.1): a `runs` anywhere, a
    /// `prefix` on a `shell::*` `command`.
    fn command_words(&self, fid: &str, ignore_case: bool) -> Option<&[String]> {
        match &self.test {
            Test::Runs(words) => Some(words),
            Test::Prefix(_, words) if self.on_shell_command(fid, ignore_case) => Some(words),
            _ => None,
        }
    }
}

/// What a deny or ask rule's constraints found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WideHold {
    /// Some constraint does not hold.
    No,
    /// All hold; with what its command constraints found, when it has any
    /// for this call (`Doubt` when any of them holds only by a doubt).
    Yes(Option<Found>),
}

/// Argument constraints, each compiled on its own.
#[derive(Debug)]
pub struct RefArgs(Vec<Constraint>);

impl RefArgs {
    /// The constraints of `map` (in key order), or `None` when one would not
    /// compile: a regex that fails or is over the size limit, a JSON Pointer
    /// with a `~` not followed by `0` or `1`, or a `runs` whose words do not
    /// split or name no program.
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
                ArgConstraint::Prefix(p) => Test::Prefix(p.clone(), commands::prefix_words(p)),
                ArgConstraint::Runs(r) => {
                    let words = shell_words::split(r).ok()?;
                    if words.first().is_none_or(String::is_empty) {
                        return None;
                    }
                    Test::Runs(words)
                }
            };
            out.push(Constraint {
                field: field.clone(),
                test,
            });
        }
        Some(RefArgs(out))
    }

    /// Deny and ask rules: whether every constraint holds (arguments that
    /// are not an object hold), and what the command constraints found.
    pub fn hold_wide(&self, fid: &str, args: Option<&Value>, models: &Models) -> WideHold {
        let Some(Value::Object(obj)) = args else {
            return WideHold::Yes(None);
        };
        let mut command: Option<Found> = None;
        for c in &self.0 {
            let entries = lookup_wide(obj, &c.field);
            if let Some(words) = c.command_words(fid, true) {
                let mut found = Found::Nothing;
                for (key, value) in &entries {
                    let shell = commands::is_shell_command(fid, key, true) && c.top_key().is_some();
                    let sources = commands::wide_sources(*value, obj, shell);
                    found = either(found, commands::wide_find(&sources, words, models));
                }
                match found {
                    Found::Nothing => return WideHold::No,
                    Found::Doubt => command = Some(Found::Doubt),
                    Found::Seen => {
                        command.get_or_insert(Found::Seen);
                    }
                }
                continue;
            }
            let null_ok = matches!(&c.test, Test::Equals(Value::Null));
            let holds = if entries.is_empty() {
                null_ok
            } else {
                entries.iter().any(|(_, value)| match value {
                    None | Some(Value::Null) => null_ok,
                    Some(value) => text_holds(&c.test, value, Reading::Wide),
                })
            };
            if !holds {
                return WideHold::No;
            }
        }
        WideHold::Yes(command)
    }

    /// Allow rules and grants: whether the arguments are an object and
    /// every constraint that is not a command constraint holds (exact
    /// names, strict types). The command constraints are judged by the
    /// ladder, which knows who covers what.
    pub fn hold_strict_text(&self, fid: &str, args: Option<&Value>) -> bool {
        let Some(whole @ Value::Object(map)) = args else {
            return false;
        };
        self.0
            .iter()
            .filter(|c| c.command_words(fid, false).is_none())
            .all(|c| {
                let found = if c.field.starts_with('/') {
                    whole.pointer(&c.field)
                } else {
                    map.get(&c.field)
                };
                match found {
                    None | Some(Value::Null) => matches!(&c.test, Test::Equals(Value::Null)),
                    Some(value) => text_holds(&c.test, value, Reading::Strict),
                }
            })
    }

    /// Allow rules and grants: the command constraints for a call to
    /// `fid`, each with its field as written, its words and how its value
    /// reads (exact names).
    pub fn strict_commands<'a>(
        &'a self,
        fid: &str,
        args: Option<&Value>,
    ) -> Vec<(&'a str, &'a [String], Sources)> {
        let Some(whole @ Value::Object(obj)) = args else {
            return Vec::new();
        };
        self.0
            .iter()
            .filter_map(|c| {
                let words = c.command_words(fid, false)?;
                let value = if c.field.starts_with('/') {
                    whole.pointer(&c.field)
                } else {
                    obj.get(&c.field)
                };
                let sources = commands::strict_sources(value, obj, c.on_shell_command(fid, false));
                Some((c.field.as_str(), words, sources))
            })
            .collect()
    }

    /// How many constraints a deny or ask rule judges as commands on a call
    /// to `fid`.
    pub fn wide_command_count(&self, fid: &str) -> usize {
        self.0
            .iter()
            .filter(|c| c.command_words(fid, true).is_some())
            .count()
    }

    /// The fields of the command constraints for a call to `fid` (allow
    /// rules and grants), as written, with their words.
    pub fn command_fields(&self, fid: &str) -> Vec<(&str, &[String])> {
        self.0
            .iter()
            .filter_map(|c| Some((c.field.as_str(), c.command_words(fid, false)?)))
            .collect()
    }
}

/// Whether a text or JSON constraint holds for a present, non-null value.
fn text_holds(test: &Test, value: &Value, reading: Reading) -> bool {
    match test {
        Test::Equals(expected) => match reading {
            Reading::Strict => value == expected,
            Reading::Wide => loosely_equal(value, expected),
        },
        Test::Matches(re) => texts(value, reading).iter().any(|t| re.is_match(t)),
        Test::Prefix(prefix, _) => texts(value, reading).iter().any(|t| match reading {
            Reading::Strict => command_prefix(t, prefix),
            Reading::Wide => any_segment_starts(t, prefix),
        }),
        // A `runs` is a command constraint wherever it is.
        Test::Runs(_) => false,
    }
}

/// Deny and ask: every value the field names when each of its names
/// matches keys ignoring ASCII case, with the top-level key it was found
/// under (`None`: that path ends before the field). Empty when no
/// top-level key matches.
fn lookup_wide<'v>(obj: &'v Map<String, Value>, field: &str) -> Vec<(&'v str, Option<&'v Value>)> {
    let tokens: Vec<String> = match field.strip_prefix('/') {
        None => vec![field.to_owned()],
        Some(rest) => match rest.split('/').map(unescape).collect::<Option<Vec<_>>>() {
            Some(tokens) => tokens,
            None => return Vec::new(),
        },
    };
    let mut out = Vec::new();
    for (key, top) in obj {
        if !key.eq_ignore_ascii_case(&tokens[0]) {
            continue;
        }
        let mut here: Vec<Option<&Value>> = vec![Some(top)];
        for token in &tokens[1..] {
            let mut next = Vec::new();
            for value in here {
                match value {
                    Some(Value::Object(map)) => {
                        let mut any = false;
                        for (k, v) in map {
                            if k.eq_ignore_ascii_case(token) {
                                next.push(Some(v));
                                any = true;
                            }
                        }
                        if !any {
                            next.push(None);
                        }
                    }
                    Some(Value::Array(items)) => {
                        next.push(array_index(token).and_then(|i| items.get(i)));
                    }
                    _ => next.push(None),
                }
            }
            here = next;
        }
        out.extend(here.into_iter().map(|v| (key.as_str(), v)));
    }
    out
}

/// RFC 6901 unescaping of one token (`~1` → `/`, `~0` → `~`).
fn unescape(token: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = token.chars();
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
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
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
        let models = Models::new(approval_gate::Limits::default());
        let wide = |v: &Value| args.hold_wide("x::y", Some(v), &models) != WideHold::No;
        assert!(wide(&argv));
        assert!(args.hold_strict_text("x::y", Some(&argv)));
        assert!(wide(&json!([1])));
        assert!(!args.hold_strict_text("x::y", Some(&json!([1]))));
        // Deny and ask read field names ignoring ASCII case (§25.7).
        assert!(wide(&json!({"COMMAND": "rm -rf x"})));
        assert!(!args.hold_strict_text("x::y", Some(&json!({"COMMAND": "rm -rf x"}))));
        assert!(loosely_equal(&json!({"a": [1.0]}), &json!({"a": [1]})));
        assert!(!loosely_equal(&json!(1), &json!("1")));
    }
}
