//! Argument constraints of rules and grants, compiled once, and what they
//! mean for a call (`architecture/contract.md` § Rules, constraints).
//!
//! # Format
//!
//! ```json
//! { "command": { "matches": "^git " },      // top-level argument, unanchored regex
//!   "/options/force": { "equals": true },   // JSON Pointer (RFC 6901) into the arguments
//!   "cmd": { "prefix": "git status" },     // text (a command prefix on a command field)
//!   "script": { "runs": "cargo test" } }    // what a command runs (`super::commands`)
//! ```
//!
//! A constraint reads the call in one of two ways ([`Reading`]), so that
//! every doubt falls toward a human:
//!
//! * **Wide** — deny and ask rules. A field name matches the arguments' keys
//!   ignoring ASCII case (each key that matches is judged). Arguments that
//!   are not an object match a rule with `args`. `equals` compares numbers by value (`1.0` = `1`, also
//!   inside arrays and objects). `matches` and `prefix` test a string; a
//!   number or boolean as its JSON text; an array by each string, number or
//!   boolean element and by all its elements joined with single spaces
//!   (strings as they are, anything else as compact JSON). `prefix` holds
//!   when any segment of the text, split on `;`, `&`, `|` and newlines and
//!   trimmed, starts with it.
//! * **Strict** — allow rules and grants. A rule or grant with `args` needs
//!   an arguments object. `equals` is type-strict JSON equality (`1` ≠ `1.0`
//!   ≠ `"1"`). `matches` and `prefix` test a string, or an array of strings
//!   joined with single spaces — nothing else. `prefix` is a command prefix
//!   (`super::command`): the text equals it, or goes on after whitespace
//!   with nothing that could start another command.
//!
//! Either way a missing or `null` field matches only `{"equals": null}`.
//!
//! On a command field (`super::commands`) `prefix` and `runs` judge what the
//! value will run, not its text: the ladder reads the field's models, widely
//! here ([`CompiledConstraint::holds_wide`]) and strictly — covered by every
//! allow rule and grant that applies — in `super::decide`.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

use super::command;
use super::commands::{self, CommandHit, Plan, Readings};
use super::compile_error::CompileError;
use crate::terms::{ArgConstraint, ConstraintOp};

/// How a constraint reads a call's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Deny and ask rules: a doubtful shape matches (the call meets a human
    /// or a refusal, never an allow).
    Wide,
    /// Allow rules and grants: only the exact shape the operator wrote.
    Strict,
}

/// The argument constraint a matching rule reports: its first in key order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchedConstraint<'r> {
    /// The `args` key as written (a name or a JSON Pointer).
    pub field: &'r str,
    /// `equals`, `matches` or `prefix`.
    pub operator: ConstraintOp,
    /// The expected value; for `matches` and `prefix` the text as a JSON
    /// string.
    pub value: &'r Value,
}

/// The largest compiled form a `matches` regex may have (the `regex` crate's
/// default is 10 MiB). Matching is linear in the argument's length, but the
/// factor grows with the compiled size: at 10 MiB a counted repetition of
/// Unicode classes such as `(?i)(?:\w+\s+){60}--force` took seconds per MiB
/// of argument on the gate's hot path, and failing to compile near the limit
/// took a second per rule. At 1 MiB such a regex is a compile error (the
/// rule is reported), ordinary patterns are untouched, and the worst
/// accepted ones stay in milliseconds on a 10 MiB argument.
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
    /// Text on most fields; on a `shell::*` `command`, what it runs (the
    /// prefix's words).
    Prefix {
        text: Box<str>,
        words: Box<[Box<str>]>,
    },
    /// What a command runs, on any field.
    Runs(Box<[Box<str>]>),
}

/// What a deny or ask rule's constraint found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wide {
    /// It does not hold.
    No,
    /// It holds; on a command field, with the command (or the doubt) that
    /// made it.
    Yes(Option<CommandHit>),
}

/// One compiled `args` entry.
#[derive(Debug, Clone)]
pub(crate) struct CompiledConstraint {
    /// The key as written in the rule (shown in deny reasons).
    field: Box<str>,
    path: FieldPath,
    test: Test,
    /// For `equals` the expected value; for `matches` and `prefix` the text
    /// as a JSON string (what deny reasons and envelopes show).
    value: Value,
}

/// Compiles the constraint `c` on `field`.
pub(crate) fn compile_constraint(
    field: &str,
    c: &ArgConstraint,
) -> Result<CompiledConstraint, CompileError> {
    match c {
        ArgConstraint::Equals(v) => CompiledConstraint::equals(field, v),
        ArgConstraint::Matches(re) => CompiledConstraint::matches(field, re),
        ArgConstraint::Prefix(p) => CompiledConstraint::prefix(field, p),
        ArgConstraint::Runs(r) => CompiledConstraint::runs(field, r),
    }
}

/// Compiles an `args` object (constraints in key order).
pub(crate) fn compile_args(
    args: &BTreeMap<String, ArgConstraint>,
) -> Result<Box<[CompiledConstraint]>, CompileError> {
    args.iter()
        .map(|(field, c)| compile_constraint(field, c))
        .collect::<Result<Vec<_>, CompileError>>()
        .map(Vec::into_boxed_slice)
}

/// Checks that an `args` object compiles (a grant's, before it is stored).
pub(crate) fn check_args(args: &BTreeMap<String, ArgConstraint>) -> Result<(), CompileError> {
    compile_args(args).map(drop)
}

/// Deny and ask rules: whether the constraints hold for a call to
/// `function_id` with these arguments (no constraints always hold; arguments
/// that are not an object hold), with the command that made a command
/// constraint hold (a doubt wins over a definite command: the rule holds only
/// because of it).
pub(crate) fn wide_hold(
    constraints: Option<&[CompiledConstraint]>,
    function_id: &str,
    args: Option<&Value>,
    readings: &Readings,
) -> Wide {
    let (Some(constraints), Some(Value::Object(obj))) = (constraints, args) else {
        return Wide::Yes(None);
    };
    let mut found = None;
    for c in constraints {
        match c.holds_wide(function_id, obj, readings) {
            Wide::No => return Wide::No,
            // A rule applies when every constraint holds, so when one holds
            // only on a doubt the rule is consulted on that doubt
            // (`opaque_command`), whatever the others saw.
            Wide::Yes(Some(hit)) => {
                if found.is_none_or(|f: CommandHit| !f.is_opaque() && hit.is_opaque()) {
                    found = Some(hit);
                }
            }
            Wide::Yes(None) => {}
        }
    }
    Wide::Yes(found)
}

/// The first constraint of a deny or ask rule that does not hold (for
/// traces): `None` when all hold or there are none.
pub(crate) fn failing_wide<'c>(
    constraints: Option<&'c [CompiledConstraint]>,
    function_id: &str,
    args: Option<&Value>,
    readings: &Readings,
) -> Option<&'c CompiledConstraint> {
    let (Some(constraints), Some(Value::Object(obj))) = (constraints, args) else {
        return None;
    };
    constraints
        .iter()
        .find(|c| c.holds_wide(function_id, obj, readings) == Wide::No)
}

/// The first non-command constraint that does not hold, read strictly
/// (when the arguments are not an object: the first constraint).
pub(crate) fn strict_failing<'c>(
    constraints: Option<&'c [CompiledConstraint]>,
    function_id: &str,
    args: Option<&Value>,
) -> Option<&'c CompiledConstraint> {
    let constraints = constraints?;
    match args {
        Some(Value::Object(obj)) => constraints
            .iter()
            .find(|c| c.command_words(function_id).is_none() && !c.holds_strict(obj)),
        _ => constraints.first(),
    }
}

impl CompiledConstraint {
    /// Compiles an `equals` constraint on `field`.
    pub(crate) fn equals(
        field: &str,
        expected: &Value,
    ) -> Result<CompiledConstraint, CompileError> {
        Ok(CompiledConstraint {
            field: field.into(),
            path: parse_field(field)?,
            test: Test::Equals,
            value: expected.clone(),
        })
    }

    /// Compiles a `matches` constraint on `field`.
    pub(crate) fn matches(field: &str, pattern: &str) -> Result<CompiledConstraint, CompileError> {
        let path = parse_field(field)?;
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => CompileError::RegexTooBig {
                    field: field.to_owned(),
                    pattern: pattern.to_owned(),
                },
                e => CompileError::Regex {
                    field: field.to_owned(),
                    pattern: pattern.to_owned(),
                    message: e.to_string(),
                },
            })?;
        Ok(CompiledConstraint {
            field: field.into(),
            path,
            test: Test::Matches(regex),
            value: Value::String(pattern.to_owned()),
        })
    }

    /// Compiles a `prefix` constraint on `field`.
    pub(crate) fn prefix(field: &str, prefix: &str) -> Result<CompiledConstraint, CompileError> {
        Ok(CompiledConstraint {
            field: field.into(),
            path: parse_field(field)?,
            test: Test::Prefix {
                text: prefix.into(),
                words: commands::prefix_words(prefix),
            },
            value: Value::String(prefix.to_owned()),
        })
    }

    /// Compiles a `runs` constraint on `field`: its words must split and
    /// name a program.
    pub(crate) fn runs(field: &str, words: &str) -> Result<CompiledConstraint, CompileError> {
        let split = shell_words::split(words).unwrap_or_default();
        if split.first().is_none_or(String::is_empty) {
            return Err(CompileError::RunsWords {
                field: field.to_owned(),
                words: words.to_owned(),
            });
        }
        Ok(CompiledConstraint {
            field: field.into(),
            path: parse_field(field)?,
            test: Test::Runs(split.into_iter().map(String::into_boxed_str).collect()),
            value: Value::String(words.to_owned()),
        })
    }

    /// The words of a command constraint of a call to `function_id`: a
    /// `runs`, or a `prefix` on a `shell::*` `command`; `None` for a
    /// constraint that reads text or JSON.
    pub(crate) fn command_words(&self, function_id: &str) -> Option<&[Box<str>]> {
        match &self.test {
            Test::Runs(words) => Some(words),
            Test::Prefix { words, .. }
                if self
                    .top_key()
                    .is_some_and(|k| commands::is_shell_command(function_id, k)) =>
            {
                Some(words)
            }
            _ => None,
        }
    }

    /// Whether this constraint can judge a command on some call (`runs`,
    /// or a `prefix` on a field named `command`).
    pub(crate) fn may_judge_commands(&self) -> bool {
        match &self.test {
            Test::Runs(_) => true,
            Test::Prefix { .. } => self
                .top_key()
                .is_some_and(|k| k.eq_ignore_ascii_case("command")),
            _ => false,
        }
    }

    /// The field as written.
    pub(crate) fn field(&self) -> &str {
        &self.field
    }

    /// The top-level key the constraint names (a name, or a JSON Pointer
    /// of one token).
    fn top_key(&self) -> Option<&str> {
        match &self.path {
            FieldPath::Key(key) => Some(key),
            FieldPath::Pointer(tokens) if tokens.len() == 1 => tokens.first().map(|t| &*t.key),
            FieldPath::Pointer(_) => None,
        }
    }

    /// Deny and ask: whether the constraint holds for the arguments of a
    /// call to `function_id`, every key that matches the field's name
    /// ignoring ASCII case judged (a command hit wins over a doubt).
    pub(crate) fn holds_wide(
        &self,
        function_id: &str,
        args: &Map<String, Value>,
        readings: &Readings,
    ) -> Wide {
        let mut any = false;
        let mut doubt = None;
        let mut decided = None;
        self.each_wide(args, |key, found| {
            any = true;
            let found = match found {
                None | Some(Value::Null) => {
                    if matches!(self.test, Test::Equals) && self.value.is_null() {
                        decided = Some(Wide::Yes(None));
                        return ControlFlow::Break(());
                    }
                    return ControlFlow::Continue(());
                }
                Some(found) => found,
            };
            let hit = match &self.test {
                Test::Equals => same_by_value(found, &self.value),
                Test::Matches(regex) => any_text(found, Reading::Wide, |t| regex.is_match(t)),
                Test::Runs(words) | Test::Prefix { words, .. }
                    if matches!(self.test, Test::Runs(_))
                        || commands::is_shell_command(function_id, key) =>
                {
                    let shell = commands::is_shell_command(function_id, key);
                    let plan = commands::plan(Some(found), args, shell);
                    match commands::wide_match(readings, plan, words) {
                        Some(hit) if !hit.is_opaque() => {
                            decided = Some(Wide::Yes(Some(hit)));
                            return ControlFlow::Break(());
                        }
                        Some(hit) => {
                            doubt.get_or_insert(hit);
                            false
                        }
                        None => false,
                    }
                }
                Test::Prefix { text, .. } => any_text(found, Reading::Wide, |t| {
                    command::any_segment_starts_with(t, text)
                }),
                Test::Runs(_) => false,
            };
            if hit {
                decided = Some(Wide::Yes(None));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        if let Some(decided) = decided {
            return decided;
        }
        if let Some(doubt) = doubt {
            return Wide::Yes(Some(doubt));
        }
        if !any && matches!(self.test, Test::Equals) && self.value.is_null() {
            return Wide::Yes(None);
        }
        Wide::No
    }

    /// Allow rules and grants, a constraint that is not a command
    /// constraint of the call: whether it holds, read strictly.
    pub(crate) fn holds_strict(&self, args: &Map<String, Value>) -> bool {
        let found = match self.lookup(args) {
            None | Some(Value::Null) => {
                return matches!(self.test, Test::Equals) && self.value.is_null();
            }
            Some(found) => found,
        };
        match &self.test {
            Test::Equals => *found == self.value,
            Test::Matches(regex) => any_text(found, Reading::Strict, |t| regex.is_match(t)),
            Test::Prefix { text, .. } => any_text(found, Reading::Strict, |t| {
                command::is_command_prefix(t, text)
            }),
            // A `runs` is a command constraint on every call: the ladder
            // judges it by coverage, never here.
            Test::Runs(_) => false,
        }
    }

    /// Allow rules and grants, a command constraint: how its field reads
    /// (its exact key).
    pub(crate) fn strict_plan(&self, function_id: &str, args: &Map<String, Value>) -> Plan {
        let shell = self
            .top_key()
            .is_some_and(|k| commands::is_shell_command(function_id, k));
        commands::plan(self.lookup(args), args, shell)
    }

    /// The readings the constraint may look at on a call to `function_id`
    /// (every key its name matches, ignoring ASCII case).
    pub(crate) fn add_needs(
        &self,
        function_id: &str,
        args: &Map<String, Value>,
        needs: &mut commands::Needs,
    ) {
        if self.command_words(function_id).is_none() {
            return;
        }
        self.each_wide(args, |key, found| {
            needs.add(found, args, commands::is_shell_command(function_id, key));
            ControlFlow::Continue(())
        });
    }

    /// Whether the constraint holds, read as `reading` says, on a call
    /// whose command fields are none (text meanings only).
    #[cfg(test)]
    pub(crate) fn holds(&self, args: &Map<String, Value>, reading: Reading) -> bool {
        match reading {
            Reading::Strict => self.holds_strict(args),
            Reading::Wide => self.holds_wide("", args, &Readings::none()) != Wide::No,
        }
    }

    /// The constraint as reported in decisions.
    pub(crate) fn matched(&self) -> MatchedConstraint<'_> {
        MatchedConstraint {
            field: &self.field,
            operator: match self.test {
                Test::Equals => ConstraintOp::Equals,
                Test::Matches(_) => ConstraintOp::Matches,
                Test::Prefix { .. } => ConstraintOp::Prefix,
                Test::Runs(_) => ConstraintOp::Runs,
            },
            value: &self.value,
        }
    }

    /// Deny and ask: calls `visit` with every top-level key that matches
    /// the field's first name ignoring ASCII case, and each value the
    /// field's path finds under it — at every level below, every key that
    /// matches the name ignoring ASCII case (`{"opts": {"mode": …, "MODE":
    /// …}}` gives both), or `None` once when the path finds nothing under
    /// that key. Stops when `visit` breaks. No allocation: the paths are
    /// walked by recursion, as deep as the field's pointer.
    fn each_wide<'v>(
        &self,
        args: &'v Map<String, Value>,
        mut visit: impl FnMut(&'v str, Option<&'v Value>) -> ControlFlow<()>,
    ) {
        let (first, rest): (&str, &[PointerToken]) = match &self.path {
            FieldPath::Key(key) => (key, &[]),
            FieldPath::Pointer(tokens) => match tokens.split_first() {
                Some((first, rest)) => (&first.key, rest),
                None => ("", &[]),
            },
        };
        for (key, top) in args.iter().filter(|(k, _)| k.eq_ignore_ascii_case(first)) {
            let mut found = false;
            let flow = nested_wide(top, rest, &mut |value| {
                found = true;
                visit(key, Some(value))
            });
            if flow.is_break() {
                return;
            }
            if !found && visit(key, None).is_break() {
                return;
            }
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

/// Calls `visit` with each value `rest` leads to from `value`, object keys
/// matched ignoring ASCII case (every one that matches), array tokens by
/// index.
fn nested_wide<'v>(
    value: &'v Value,
    rest: &[PointerToken],
    visit: &mut dyn FnMut(&'v Value) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let Some((token, rest)) = rest.split_first() else {
        return visit(value);
    };
    match value {
        Value::Object(map) => {
            for (_, v) in map
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(&token.key))
            {
                nested_wide(v, rest, visit)?;
            }
            ControlFlow::Continue(())
        }
        Value::Array(items) => match token.index.and_then(|i| items.get(i)) {
            Some(v) => nested_wide(v, rest, visit),
            None => ControlFlow::Continue(()),
        },
        _ => ControlFlow::Continue(()),
    }
}

/// Whether `test` holds for some text the value reads as (see the module
/// doc). A plain string costs no allocation.
fn any_text(value: &Value, reading: Reading, mut test: impl FnMut(&str) -> bool) -> bool {
    match (value, reading) {
        (Value::String(s), _) => test(s),
        (Value::Number(_) | Value::Bool(_), Reading::Wide) => test(&value.to_string()),
        (Value::Array(items), Reading::Wide) => {
            items.iter().any(|item| match item {
                Value::String(s) => test(s),
                Value::Number(_) | Value::Bool(_) => test(&item.to_string()),
                _ => false,
            }) || test(&joined(items, |item| item.to_string()))
        }
        (Value::Array(items), Reading::Strict) => {
            items.iter().all(Value::is_string) && test(&joined(items, |_| String::new()))
        }
        _ => false,
    }
}

/// The elements joined with single spaces: strings as they are, anything
/// else as `other` renders it.
fn joined(items: &[Value], other: impl Fn(&Value) -> String) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match item {
            Value::String(s) => out.push_str(s),
            _ => out.push_str(&other(item)),
        }
    }
    out
}

/// JSON equality with numbers compared by value (`1.0` = `1`), at any depth.
/// Recursion stops at the depth of the shallower value (the operator's,
/// from the configuration).
fn same_by_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_by_value(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| same_by_value(x, y)))
        }
        _ => a == b,
    }
}

/// Two numbers by value: integers exactly, anything else as `f64`.
fn same_number(x: &Number, y: &Number) -> bool {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(x), int(y)) {
        (Some(a), Some(b)) => a == b,
        _ => x.as_f64() == y.as_f64(),
    }
}

/// A key starting with `/` is a JSON Pointer; anything else a top-level name.
fn parse_field(field: &str) -> Result<FieldPath, CompileError> {
    let Some(pointer) = field.strip_prefix('/') else {
        return Ok(FieldPath::Key(field.into()));
    };
    let tokens = pointer
        .split('/')
        .map(|raw| {
            let key = unescape_token(raw).ok_or_else(|| CompileError::Pointer {
                field: field.to_owned(),
            })?;
            let index = array_index(&key);
            Ok(PointerToken {
                key: key.into(),
                index,
            })
        })
        .collect::<Result<Vec<_>, CompileError>>()?;
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
    use Reading::{Strict, Wide};

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

    /// §25.7: in deny and ask rules every key that matches a pointer's
    /// name ignoring ASCII case is judged, at every level, so a case twin
    /// anywhere on the path cannot hide a value. Allow rules keep exact
    /// names.
    #[test]
    fn rule_25_7_every_case_twin_on_a_pointer_path_is_judged_wide() {
        let danger = eq("/opts/mode", json!("danger"));
        for args in [
            json!({"opts": {"mode": "safe", "MODE": "danger"}}),
            json!({"opts": {"MODE": "danger", "mode": "safe"}}),
            json!({"OPTS": {"mode": "safe"}, "opts": {"Mode": "danger"}}),
            json!({"Opts": {"mode": "danger"}, "opts": {"mode": "safe"}}),
        ] {
            assert!(danger.holds(&obj(args.clone()), Wide), "{args}");
            assert!(!danger.holds(&obj(args.clone()), Strict), "{args}");
        }
        let deep = re("/a/b/0/c", "^x$");
        let args = obj(json!({"a": {"b": [{"c": "y", "C": "x"}], "B": [{"c": "y"}]}}));
        assert!(deep.holds(&args, Wide));
        assert!(!deep.holds(&args, Strict));
        let args = obj(json!({"a": {"b": [{"c": "y"}], "B": [{"C": "x"}]}}));
        assert!(deep.holds(&args, Wide));
        // Nothing on the path: `equals null` holds (missing is null), once.
        let null = eq("/opts/mode", Value::Null);
        assert!(null.holds(&obj(json!({"opts": {}})), Wide));
        assert!(!null.holds(&obj(json!({"opts": {"MODE": 1}})), Wide));
        assert!(!danger.holds(
            &obj(json!({"opts": {"mode": "safe", "MODE": "safe"}})),
            Wide
        ));
    }

    #[test]
    fn equals_is_type_strict() {
        let args = obj(json!({"n": 1, "f": 1.0, "s": "1", "b": true, "z": null, "neg": -1}));
        assert!(eq("n", json!(1)).holds(&args, Strict));
        assert!(!eq("n", json!(1.0)).holds(&args, Strict));
        assert!(!eq("n", json!("1")).holds(&args, Strict));
        assert!(!eq("n", json!(true)).holds(&args, Strict));
        assert!(eq("f", json!(1.0)).holds(&args, Strict));
        assert!(!eq("f", json!(1)).holds(&args, Strict));
        assert!(eq("s", json!("1")).holds(&args, Strict));
        assert!(!eq("s", json!(1)).holds(&args, Strict));
        assert!(eq("b", json!(true)).holds(&args, Strict));
        assert!(!eq("b", json!(1)).holds(&args, Strict));
        assert!(eq("neg", json!(-1)).holds(&args, Strict));
        assert!(!eq("neg", json!(1)).holds(&args, Strict));
        assert!(eq("z", Value::Null).holds(&args, Strict));
    }

    #[test]
    fn equals_compares_containers_structurally() {
        let args = obj(json!({"o": {"a": 1, "b": [1, 2]}, "arr": [1, 2]}));
        assert!(eq("o", json!({"b": [1, 2], "a": 1})).holds(&args, Strict));
        assert!(!eq("o", json!({"a": 1})).holds(&args, Strict));
        assert!(eq("arr", json!([1, 2])).holds(&args, Strict));
        assert!(!eq("arr", json!([2, 1])).holds(&args, Strict));
    }

    #[test]
    fn missing_fields_read_as_null() {
        let args = obj(json!({"present": 0}));
        assert!(eq("absent", Value::Null).holds(&args, Strict));
        assert!(!eq("absent", json!(0)).holds(&args, Strict));
        assert!(!eq("present", Value::Null).holds(&args, Strict));
        assert!(eq("/a/b", Value::Null).holds(&args, Strict));
        assert!(!re("absent", "").holds(&args, Strict));
    }

    #[test]
    fn matches_is_unanchored_and_strings_only() {
        let args = obj(json!({"cmd": "git push --force", "n": 12, "b": true, "o": {"x": "git"}}));
        assert!(re("cmd", "push").holds(&args, Strict));
        assert!(re("cmd", "^git").holds(&args, Strict));
        assert!(!re("cmd", "^push").holds(&args, Strict));
        assert!(re("cmd", "--force$").holds(&args, Strict));
        assert!(re("cmd", "").holds(&args, Strict));
        assert!(!re("n", "12").holds(&args, Strict));
        assert!(!re("n", "").holds(&args, Strict));
        assert!(!re("b", "true").holds(&args, Strict));
        assert!(!re("o", "git").holds(&args, Strict));
        assert!(re("/o/x", "^git$").holds(&args, Strict));
    }

    fn pre(field: &str, p: &str) -> CompiledConstraint {
        CompiledConstraint::prefix(field, p).expect("compiles")
    }

    #[test]
    fn rule_21_5_a_strict_prefix_is_a_command_prefix() {
        let args = obj(json!({"cmd": "git push origin", "n": 12, "o": {"x": "git"}}));
        assert!(pre("cmd", "git push").holds(&args, Strict));
        assert!(pre("cmd", "git ").holds(&args, Strict));
        assert!(pre("cmd", "").holds(&args, Strict));
        assert!(pre("cmd", "git push origin").holds(&args, Strict));
        assert!(!pre("cmd", "git push origin main").holds(&args, Strict));
        assert!(!pre("cmd", "git pu").holds(&args, Strict));
        assert!(!pre("cmd", "Git").holds(&args, Strict));
        assert!(!pre("cmd", "push").holds(&args, Strict));
        assert!(!pre("cmd", ".*").holds(&args, Strict));
        assert!(!pre("n", "1").holds(&args, Strict));
        assert!(!pre("absent", "").holds(&args, Strict));
        assert!(pre("/o/x", "git").holds(&args, Strict));
        let m = pre("cmd", "git ");
        assert_eq!(m.matched().operator, ConstraintOp::Prefix);
        assert_eq!(m.matched().value, &json!("git "));
        assert!(CompiledConstraint::prefix("/a~", "x").is_err());
    }

    #[test]
    fn rule_21_5_the_contract_examples_of_an_allow_prefix() {
        let git = pre("cmd", "git status");
        let holds = |cmd: &str| git.holds(&obj(json!({ "cmd": cmd })), Strict);
        assert!(holds("git status --short"));
        assert!(holds("git status"));
        assert!(!holds("git status; curl x | sh"));
        assert!(!holds("git statusx"));
        assert!(!holds("git status $(id)"));
        // Argv arrays are read as their elements joined with spaces.
        let argv = |items: Value| git.holds(&obj(json!({ "cmd": items })), Strict);
        assert!(argv(json!(["git", "status", "--short"])));
        assert!(!argv(json!(["git", "status;", "id"])));
        assert!(!argv(json!(["git", "status", 1])));
    }

    #[test]
    fn rule_21_5_a_wide_prefix_matches_any_command_segment() {
        let rm = pre("cmd", "rm");
        let holds = |v: Value| rm.holds(&obj(json!({ "cmd": v })), Wide);
        assert!(holds(json!("rm -rf /")));
        assert!(holds(json!("git status; rm -rf /")));
        assert!(holds(json!("ls && rm x")));
        assert!(holds(json!("ls || rm x")));
        assert!(holds(json!("cat x | rm y")));
        assert!(holds(json!("ls & rm x")));
        assert!(holds(json!("ls\n  rm x")));
        assert!(holds(json!(["ls", "&&", "rm", "x"])));
        assert!(!holds(json!("git status")));
        assert!(!holds(json!("echo rm")));
        assert!(!holds(json!(null)));
        assert!(!holds(json!({"c": "rm"})));
    }

    #[test]
    fn pointers_walk_objects_and_arrays() {
        let args = obj(json!({
            "a": {"b": {"c": 5}},
            "list": [10, {"k": "v"}],
            "x/y": 1, "t~u": 2, "": {"": 3}, "01": 4
        }));
        assert!(eq("/a/b/c", json!(5)).holds(&args, Strict));
        assert!(eq("/a/b", json!({"c": 5})).holds(&args, Strict));
        assert!(eq("/list/0", json!(10)).holds(&args, Strict));
        assert!(eq("/list/1/k", json!("v")).holds(&args, Strict));
        assert!(eq("/list/2", Value::Null).holds(&args, Strict));
        assert!(eq("/list/-", Value::Null).holds(&args, Strict));
        assert!(!eq("/list/-", json!(10)).holds(&args, Strict));
        // Leading zeros are not array indices.
        assert!(!eq("/list/00", json!(10)).holds(&args, Strict));
        assert!(eq("/x~1y", json!(1)).holds(&args, Strict));
        assert!(eq("/t~0u", json!(2)).holds(&args, Strict));
        assert!(eq("//", json!(3)).holds(&args, Strict));
        assert!(eq("/", json!({"": 3})).holds(&args, Strict));
        // A digit token still names an object key.
        assert!(eq("/01", json!(4)).holds(&args, Strict));
        // Walking through a scalar finds nothing.
        assert!(eq("/a/b/c/d", Value::Null).holds(&args, Strict));
        assert!(!eq("/a/b/c/d", json!(5)).holds(&args, Strict));
    }

    #[test]
    fn a_key_without_slash_is_a_top_level_name() {
        let args = obj(json!({"a/b": 1, "a": {"b": 2}}));
        assert!(eq("a/b", json!(1)).holds(&args, Strict));
        assert!(eq("/a/b", json!(2)).holds(&args, Strict));
    }

    #[test]
    fn bad_pointers_and_regexes_are_errors() {
        for bad in ["/a~", "/a~2", "/~x/b", "/ok/~"] {
            let err = CompiledConstraint::equals(bad, &Value::Null).expect_err(bad);
            assert_eq!(err, CompileError::Pointer { field: bad.into() });
            assert!(err.to_string().contains("invalid JSON pointer"), "{err}");
        }
        let err = CompiledConstraint::matches("cmd", "(").expect_err("bad regex");
        assert!(
            matches!(&err, CompileError::Regex { field, pattern, .. } if field == "cmd" && pattern == "("),
            "{err:?}"
        );
        assert!(err.to_string().contains("invalid regex"), "{err}");
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
            let err = CompiledConstraint::matches("cmd", heavy).expect_err(heavy);
            assert_eq!(
                err,
                CompileError::RegexTooBig {
                    field: "cmd".into(),
                    pattern: heavy.into()
                }
            );
            let text = err.to_string();
            assert!(text.contains("1 MiB limit"), "{text}");
            assert!(text.contains(r"(?-u:\w)"), "{text}");
            assert!(text.contains(&format!("{heavy:?}")), "{text}");
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
        assert!(!c.holds(&args, Strict));
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

    #[test]
    fn rule_21_4_a_missing_or_null_field_matches_only_equals_null() {
        let args = obj(json!({"z": null}));
        for reading in [Strict, Wide] {
            for field in ["z", "absent", "/z/deeper"] {
                assert!(eq(field, Value::Null).holds(&args, reading), "{field}");
                assert!(!eq(field, json!(0)).holds(&args, reading), "{field}");
                assert!(!eq(field, json!("null")).holds(&args, reading), "{field}");
                assert!(!re(field, "").holds(&args, reading), "{field}");
                assert!(!re(field, "null").holds(&args, reading), "{field}");
                assert!(!pre(field, "").holds(&args, reading), "{field}");
            }
        }
    }

    #[test]
    fn rule_21_4_a_wide_equals_compares_numbers_by_value() {
        let args = obj(
            json!({"n": 1, "f": 1.0, "nested": {"a": [2.0, 3]}, "s": "1", "big": 18446744073709551615u64}),
        );
        assert!(eq("n", json!(1.0)).holds(&args, Wide));
        assert!(eq("f", json!(1)).holds(&args, Wide));
        assert!(eq("nested", json!({"a": [2, 3.0]})).holds(&args, Wide));
        assert!(!eq("nested", json!({"a": [2, 3.5]})).holds(&args, Wide));
        assert!(!eq("s", json!(1)).holds(&args, Wide));
        assert!(eq("big", json!(18446744073709551615u64)).holds(&args, Wide));
        assert!(!eq("big", json!(-1)).holds(&args, Wide));
        // Strictly, the type the operator wrote is the only one that counts.
        assert!(!eq("n", json!(1.0)).holds(&args, Strict));
        assert!(!eq("nested", json!({"a": [2, 3.0]})).holds(&args, Strict));
    }

    #[test]
    fn rule_21_4_a_wide_text_constraint_reads_arrays_numbers_and_booleans() {
        let rm = re("command", "rm -rf");
        let holds = |c: &CompiledConstraint, v: Value, reading| {
            c.holds(&obj(json!({ "command": v })), reading)
        };
        // The contract's example: split argv still meets the deny rule.
        assert!(holds(&rm, json!(["rm", "-rf", "/"]), Wide));
        assert!(holds(&rm, json!(["sudo", "rm -rf /"]), Wide));
        assert!(!holds(&rm, json!(["rm", "-r", "/"]), Wide));
        assert!(holds(&re("command", "^12$"), json!(12), Wide));
        assert!(holds(&re("command", "^1.5$"), json!(1.5), Wide));
        assert!(holds(&re("command", "^true$"), json!(true), Wide));
        assert!(holds(&re("command", "^7$"), json!(["a", 7]), Wide));
        assert!(holds(
            &re("command", "^a 7 null$"),
            json!(["a", 7, null]),
            Wide
        ));
        assert!(holds(&pre("command", "12"), json!(12), Wide));
        assert!(!holds(&re("command", "x"), json!({"k": "x"}), Wide));
        // Strictly: a string, or an array of strings joined, nothing else.
        assert!(holds(&rm, json!(["rm", "-rf", "/"]), Strict));
        assert!(!holds(
            &re("command", "^-rf$"),
            json!(["rm", "-rf", "/"]),
            Strict
        ));
        assert!(holds(
            &re("command", "^-rf$"),
            json!(["rm", "-rf", "/"]),
            Wide
        ));
        assert!(!holds(&re("command", "^12$"), json!(12), Strict));
        assert!(!holds(&re("command", "^true$"), json!(true), Strict));
        assert!(!holds(&re("command", "7"), json!(["a", 7]), Strict));
    }

    #[test]
    fn rule_21_4_arguments_that_are_not_an_object_match_only_when_read_widely() {
        let cs = [re("cmd", "x"), eq("n", json!(1))];
        for args in [
            None,
            Some(json!(null)),
            Some(json!("x")),
            Some(json!([1])),
            Some(json!(3)),
        ] {
            let none = Readings::none();
            assert_eq!(
                wide_hold(Some(&cs), "x::y", args.as_ref(), &none),
                super::Wide::Yes(None),
                "{args:?}"
            );
            assert!(failing_wide(Some(&cs), "x::y", args.as_ref(), &none).is_none());
            assert!(strict_failing(Some(&cs), "x::y", args.as_ref()).is_some());
        }
        // No constraints: always; an empty object of them: any object.
        assert!(strict_failing(None, "x::y", Some(&json!(3))).is_none());
        assert!(strict_failing(Some(&[]), "x::y", Some(&json!({}))).is_none());
    }
}
