//! The configuration schema, derived wholly from the types, gives the
//! engine the same checks at `configuration::set` as the schema once
//! written by hand (`tests/fixtures/config-schema-handwritten.json`, kept
//! as the reference): a table of values, for every field a good value, a
//! wrong type, an out-of-range value where the field has a range and an
//! unknown key in every object, is accepted and refused alike by both —
//! except where the old schema was wrong, each said below; and the two
//! schemas state the same `type`, `enum`, `minimum`, `maximum`,
//! `minLength`, `default`, `required` and `additionalProperties` field by
//! field.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::schema;
use crate::config::{load_seed, ApprovalConfig};

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::Validator::new(schema).expect("the schema compiles")
}

fn handwritten() -> Value {
    serde_json::from_str(include_str!(
        "../../../tests/fixtures/config-schema-handwritten.json"
    ))
    .expect("the fixture is JSON")
}

/// 32 characters: the shortest link secret.
const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// What a value of the table tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A value the field takes.
    Good,
    /// A value of a type the field does not take.
    WrongType,
    /// A value of the right type outside the field's range (a bound, a
    /// length, an enum, a pattern).
    OutOfRange,
    /// A key the object does not know.
    UnknownKey,
}

use Kind::{Good, OutOfRange, UnknownKey, WrongType};

/// One row: the field's path (`rules[].timeout_ms`, `links.secret`; an
/// object's own path for an unknown key), what it tries, the whole value.
type Row = (&'static str, Kind, Value);

/// `{field: v}` at the top level.
fn top(field: &str, v: Value) -> Value {
    let mut map = Map::new();
    map.insert(field.into(), v);
    Value::Object(map)
}

/// `v` merged into `base` (an object).
fn with(mut base: Value, field: &str, v: Value) -> Value {
    if let Some(map) = base.as_object_mut() {
        map.insert(field.into(), v);
    }
    base
}

/// A rule object with `field` set to `v`, alone in `rules`.
fn rule(field: &str, v: Value) -> Value {
    json!({ "rules": [with(json!({"function": "shell::exec", "action": "ask"}), field, v)] })
}

/// A rule whose examples have `field` set to `v`.
fn examples(field: &str, v: Value) -> Value {
    rule("examples", top(field, v))
}

/// A rule whose one must-match example call has `field` set to `v`.
fn probe(field: &str, v: Value) -> Value {
    examples(
        "match",
        json!([with(json!({"function_id": "shell::exec"}), field, v)]),
    )
}

/// A rule whose one must-not-match example call has `field` set to `v`.
fn no_probe(field: &str, v: Value) -> Value {
    examples(
        "no_match",
        json!([with(json!({"function_id": "other::fn"}), field, v)]),
    )
}

fn links(field: &str, v: Value) -> Value {
    top(
        "links",
        with(
            json!({"secret": SECRET, "public_base_url": "https://a.example"}),
            field,
            v,
        ),
    )
}

fn reviewer(field: &str, v: Value) -> Value {
    top(
        "reviewer",
        with(json!({"function_id": "review::call"}), field, v),
    )
}

fn decision_log(field: &str, v: Value) -> Value {
    top(
        "decision_log",
        with(json!({"function_id": "audit::log"}), field, v),
    )
}

/// The table: every field of the entry and of every object in it.
#[rustfmt::skip]
fn table() -> Vec<Row> {
    let constraint = json!({"command": {"matches": "push .*--force"}, "/opts/x": {"equals": [1, {"a": null}]},
                            "url": {"prefix": "https://"}});
    vec![
        // The value itself.
        ("", Good, json!({})),
        ("", Good, ApprovalConfig::defaults_json()),
        ("", WrongType, json!([])),
        ("", WrongType, json!("manual")),
        ("", UnknownKey, json!({"defualt_mode": "full"})),
        ("default_mode", Good, top("default_mode", json!("auto"))),
        ("default_mode", Good, top("default_mode", json!("full"))),
        ("default_mode", WrongType, top("default_mode", json!(null))),
        ("default_mode", WrongType, top("default_mode", json!(["auto"]))),
        ("default_mode", OutOfRange, top("default_mode", json!("sometimes"))),
        ("rules", Good, top("rules", json!([]))),
        ("rules", Good, top("rules", json!(["shell::*", "!approval::*", "?deploy::*"]))),
        ("rules", WrongType, top("rules", json!("shell::*"))),
        ("rules", WrongType, top("rules", json!([1]))),
        ("rules", WrongType, top("rules", json!([null]))),
        ("rules", OutOfRange, top("rules", json!([""]))),
        ("rules[]", UnknownKey, rule("colour", json!("red"))),
        ("rules[].function", Good, rule("function", json!("deploy::{a,b}"))),
        ("rules[].function", WrongType, rule("function", json!(1))),
        ("rules[].function", OutOfRange, rule("function", json!(""))),
        ("rules[].function", OutOfRange, json!({"rules": [{"action": "allow"}]})),
        ("rules[].action", Good, rule("action", json!("deny"))),
        ("rules[].action", Good, rule("action", json!("allow"))),
        ("rules[].action", WrongType, rule("action", json!(true))),
        ("rules[].action", OutOfRange, rule("action", json!("maybe"))),
        ("rules[].action", OutOfRange, json!({"rules": [{"function": "a"}]})),
        ("rules[].rule_id", Good, rule("rule_id", json!("r"))),
        ("rules[].rule_id", WrongType, rule("rule_id", json!(1))),
        ("rules[].modes", Good, rule("modes", json!(["auto", "full"]))),
        ("rules[].modes", Good, rule("modes", json!([]))),
        ("rules[].modes", WrongType, rule("modes", json!("auto"))),
        ("rules[].modes", OutOfRange, rule("modes", json!(["sometimes"]))),
        ("rules[].args", Good, rule("args", constraint)),
        ("rules[].args", Good, rule("args", json!({"command": {"runs": "rm -rf"}}))),
        ("rules[].args", WrongType, rule("args", json!(["command"]))),
        ("rules[].args", WrongType, rule("args", json!({"command": "git"}))),
        ("rules[].args", WrongType, rule("args", json!({"command": {"matches": 1}}))),
        ("rules[].args", WrongType, rule("args", json!({"command": {"prefix": ["git"]}}))),
        ("rules[].args", OutOfRange, rule("args", json!({"command": {"equals": 1, "matches": "x"}}))),
        ("rules[].args", UnknownKey, rule("args", json!({"command": {"starts": "git"}}))),
        ("rules[].timeout_ms", Good, rule("timeout_ms", json!(1000))),
        ("rules[].timeout_ms", Good, rule("timeout_ms", json!(null))),
        ("rules[].timeout_ms", WrongType, rule("timeout_ms", json!("soon"))),
        ("rules[].timeout_ms", WrongType, rule("timeout_ms", json!(1000.5))),
        ("rules[].timeout_ms", OutOfRange, rule("timeout_ms", json!(999))),
        ("rules[].escalate_after_ms", Good, rule("escalate_after_ms", json!(600_000))),
        ("rules[].escalate_after_ms", Good, rule("escalate_after_ms", json!(null))),
        ("rules[].escalate_after_ms", WrongType, rule("escalate_after_ms", json!("soon"))),
        ("rules[].escalate_after_ms", OutOfRange, rule("escalate_after_ms", json!(999))),
        ("rules[].examples", Good, rule("examples", json!({}))),
        ("rules[].examples", WrongType, rule("examples", json!([]))),
        ("rules[].examples", UnknownKey, examples("maybe", json!([]))),
        ("rules[].examples.match", Good, examples("match", json!([{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}]))),
        ("rules[].examples.match", WrongType, examples("match", json!({"function_id": "shell::exec"}))),
        ("rules[].examples.match", WrongType, examples("match", json!(["shell::exec"]))),
        ("rules[].examples.no_match", Good, examples("no_match", json!([{"function_id": "other::fn"}]))),
        ("rules[].examples.no_match", WrongType, examples("no_match", json!("other::fn"))),
        ("rules[].examples.match[]", UnknownKey, probe("args", json!({}))),
        ("rules[].examples.match[].function_id", Good, probe("function_id", json!("shell::exec"))),
        ("rules[].examples.match[].function_id", WrongType, probe("function_id", json!(7))),
        ("rules[].examples.match[].function_id", OutOfRange, probe("function_id", json!(""))),
        ("rules[].examples.match[].function_id", OutOfRange, examples("match", json!([{"arguments": {}}]))),
        ("rules[].examples.match[].arguments", Good, probe("arguments", json!({"command": "ls"}))),
        ("rules[].examples.match[].arguments", Good, probe("arguments", json!(["any", "JSON"]))),
        ("rules[].examples.no_match[]", UnknownKey, no_probe("colour", json!(1))),
        ("rules[].examples.no_match[].function_id", Good, no_probe("function_id", json!("x::y"))),
        ("rules[].examples.no_match[].function_id", WrongType, no_probe("function_id", json!(null))),
        ("rules[].examples.no_match[].function_id", OutOfRange, no_probe("function_id", json!(""))),
        ("rules[].examples.no_match[].arguments", Good, no_probe("arguments", json!("any"))),
        ("rule_precedence", Good, top("rule_precedence", json!("deny_ask_allow"))),
        ("rule_precedence", Good, top("rule_precedence", json!("first_match"))),
        ("rule_precedence", WrongType, top("rule_precedence", json!(0))),
        ("rule_precedence", OutOfRange, top("rule_precedence", json!("last_match"))),
        ("grant_reask_limit", Good, top("grant_reask_limit", json!(0))),
        ("grant_reask_limit", WrongType, top("grant_reask_limit", json!("three"))),
        ("grant_reask_limit", WrongType, top("grant_reask_limit", json!(1.5))),
        ("grant_reask_limit", OutOfRange, top("grant_reask_limit", json!(-1))),
        ("human_only_extra", Good, top("human_only_extra", json!(["deploy::prod*", "billing::*"]))),
        ("human_only_extra", WrongType, top("human_only_extra", json!("a::*"))),
        ("human_only_extra", WrongType, top("human_only_extra", json!([1]))),
        ("human_only_extra", OutOfRange, top("human_only_extra", json!([""]))),
        ("gate_priority", Good, top("gate_priority", json!(-9_007_199_254_740_991_i64))),
        ("gate_priority", Good, top("gate_priority", json!(9_007_199_254_740_991_i64))),
        ("gate_priority", WrongType, top("gate_priority", json!("high"))),
        ("gate_priority", OutOfRange, top("gate_priority", json!(9_007_199_254_740_992_i64))),
        ("gate_priority", OutOfRange, top("gate_priority", json!(-9_007_199_254_740_992_i64))),
        ("binding_check_interval_ms", Good, top("binding_check_interval_ms", json!(1000))),
        ("binding_check_interval_ms", WrongType, top("binding_check_interval_ms", json!(null))),
        ("binding_check_interval_ms", OutOfRange, top("binding_check_interval_ms", json!(999))),
        ("links", Good, top("links", json!(null))),
        ("links", Good, links("inbox_token", json!("x"))),
        ("links", WrongType, top("links", json!("on"))),
        ("links", UnknownKey, links("extra", json!(1))),
        ("links.secret", Good, links("secret", json!(SECRET))),
        ("links.secret", WrongType, links("secret", json!(32))),
        ("links.secret", OutOfRange, links("secret", json!("short"))),
        ("links.secret", OutOfRange, top("links", json!({"public_base_url": "https://a.example"}))),
        ("links.public_base_url", Good, links("public_base_url", json!("HTTP://a:8080/p"))),
        ("links.public_base_url", WrongType, links("public_base_url", json!(["https://a"]))),
        ("links.public_base_url", OutOfRange, links("public_base_url", json!("ftp://a.example"))),
        ("links.public_base_url", OutOfRange, top("links", json!({"secret": SECRET}))),
        ("links.inbox_token", Good, links("inbox_token", json!("token"))),
        ("links.inbox_token", WrongType, links("inbox_token", json!(1))),
        ("links.inbox_token", OutOfRange, links("inbox_token", json!(""))),
        ("pending_timeout_ms", Good, top("pending_timeout_ms", json!(null))),
        ("pending_timeout_ms", Good, top("pending_timeout_ms", json!(1_800_000))),
        ("pending_timeout_ms", WrongType, top("pending_timeout_ms", json!("later"))),
        ("pending_timeout_ms", OutOfRange, top("pending_timeout_ms", json!(5))),
        ("escalate_after_ms", Good, top("escalate_after_ms", json!(1000))),
        ("escalate_after_ms", WrongType, top("escalate_after_ms", json!(true))),
        ("escalate_after_ms", OutOfRange, top("escalate_after_ms", json!(999))),
        ("release_timeout_ms", Good, top("release_timeout_ms", json!(1000))),
        ("release_timeout_ms", WrongType, top("release_timeout_ms", json!("1000"))),
        ("release_timeout_ms", OutOfRange, top("release_timeout_ms", json!(0))),
        ("resolve_wait_ms", Good, top("resolve_wait_ms", json!(0))),
        ("resolve_wait_ms", WrongType, top("resolve_wait_ms", json!(null))),
        ("resolve_wait_ms", OutOfRange, top("resolve_wait_ms", json!(-1))),
        ("reviewer", Good, top("reviewer", json!(null))),
        ("reviewer", Good, reviewer("timeout_ms", json!(2000))),
        ("reviewer", WrongType, top("reviewer", json!("review::call"))),
        ("reviewer", UnknownKey, reviewer("colour", json!(1))),
        ("reviewer.function_id", Good, reviewer("function_id", json!("review call"))),
        ("reviewer.function_id", WrongType, reviewer("function_id", json!(1))),
        ("reviewer.function_id", OutOfRange, reviewer("function_id", json!(""))),
        ("reviewer.function_id", OutOfRange, reviewer("function_id", json!(" review::call"))),
        ("reviewer.function_id", OutOfRange, reviewer("function_id", json!("review::call "))),
        ("reviewer.function_id", OutOfRange, top("reviewer", json!({}))),
        ("reviewer.modes", Good, reviewer("modes", json!(["auto", "manual"]))),
        ("reviewer.modes", WrongType, reviewer("modes", json!("auto"))),
        ("reviewer.modes", OutOfRange, reviewer("modes", json!(["sometimes"]))),
        ("reviewer.timeout_ms", Good, reviewer("timeout_ms", json!(1))),
        ("reviewer.timeout_ms", WrongType, reviewer("timeout_ms", json!("1s"))),
        ("reviewer.timeout_ms", OutOfRange, reviewer("timeout_ms", json!(0))),
        ("reviewer.max_consecutive_denials", Good, reviewer("max_consecutive_denials", json!(0))),
        ("reviewer.max_consecutive_denials", WrongType, reviewer("max_consecutive_denials", json!(null))),
        ("reviewer.max_consecutive_denials", OutOfRange, reviewer("max_consecutive_denials", json!(-1))),
        ("reviewer.max_denials_per_50", Good, reviewer("max_denials_per_50", json!(50))),
        ("reviewer.max_denials_per_50", WrongType, reviewer("max_denials_per_50", json!(2.5))),
        ("reviewer.max_denials_per_50", OutOfRange, reviewer("max_denials_per_50", json!(51))),
        ("decision_log", Good, top("decision_log", json!(null))),
        ("decision_log", WrongType, top("decision_log", json!(["audit::log"]))),
        ("decision_log", UnknownKey, decision_log("extra", json!(0))),
        ("decision_log.function_id", Good, decision_log("function_id", json!("audit::approval-decision"))),
        ("decision_log.function_id", WrongType, decision_log("function_id", json!(false))),
        ("decision_log.function_id", OutOfRange, decision_log("function_id", json!(""))),
        ("decision_log.function_id", OutOfRange, top("decision_log", json!({}))),
        ("decision_log.queue", Good, decision_log("queue", json!(1))),
        ("decision_log.queue", WrongType, decision_log("queue", json!("big"))),
        ("decision_log.queue", OutOfRange, decision_log("queue", json!(0))),
        ("suggest_prefixes", Good, top("suggest_prefixes", json!([]))),
        ("suggest_prefixes", Good, top("suggest_prefixes", json!(["git status", "ls"]))),
        ("suggest_prefixes", WrongType, top("suggest_prefixes", json!("ls"))),
        ("suggest_prefixes", OutOfRange, top("suggest_prefixes", json!([""]))),
        ("protected_paths", Good, top("protected_paths", json!(["/opt/iii/**"]))),
        ("protected_paths", WrongType, top("protected_paths", json!([1]))),
        ("protected_paths", OutOfRange, top("protected_paths", json!([""]))),
        ("protected_path_functions", Good, top("protected_path_functions", json!(["shell::*"]))),
        ("protected_path_functions", WrongType, top("protected_path_functions", json!([1]))),
        ("protected_path_functions", OutOfRange, top("protected_path_functions", json!([""]))),
        ("edit_ttl_max_ms", Good, top("edit_ttl_max_ms", json!(1000))),
        ("edit_ttl_max_ms", WrongType, top("edit_ttl_max_ms", json!({}))),
        ("edit_ttl_max_ms", OutOfRange, top("edit_ttl_max_ms", json!(999))),
    ]
}

/// Values the hand-written schema refused though the worker takes them:
/// `runs`, the command constraint of contract §25.1, was missing from its
/// constraint (and its `prefix` said "starts with this text", which is no
/// longer what a prefix on a command field means).
fn the_handwritten_schema_was_wrong_about() -> Vec<Value> {
    vec![
        rule("args", json!({"command": {"runs": "rm -rf"}})),
        json!({"rules": [{"function": "x::run", "action": "allow", "args": {"script": {"runs": "make test"}}}]}),
    ]
}

#[test]
fn rule_26_2_the_derived_schema_takes_and_refuses_every_row_of_the_table() {
    let (old, new) = (validator(&handwritten()), validator(&schema()));
    let taken_by_old_though_wrong = the_handwritten_schema_was_wrong_about();
    let mut wrong = Vec::new();
    for (field, kind, value) in table() {
        let want = kind == Good;
        if new.is_valid(&value) != want {
            wrong.push(format!(
                "{field} {kind:?}: derived schema says {} for {value}",
                !want
            ));
        }
        if old.is_valid(&value) != want && !taken_by_old_though_wrong.contains(&value) {
            wrong.push(format!(
                "{field} {kind:?}: the reference says {} for {value}",
                !want
            ));
        }
        if want && ApprovalConfig::from_value(&value).is_err() {
            wrong.push(format!("{field}: the worker refuses {value}"));
        }
    }
    for value in taken_by_old_though_wrong {
        if old.is_valid(&value) {
            wrong.push(format!("the reference accepts {value}"));
        }
        if !new.is_valid(&value) || ApprovalConfig::from_value(&value).is_err() {
            wrong.push(format!("refused {value}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every field path of `schema` (an object's own path included, `[]` for
/// an array's items), with whether it has a range to step out of.
fn fields(schema: &Value, path: &str, out: &mut Vec<(String, bool)>) {
    let ranged = [
        "minimum",
        "maximum",
        "minLength",
        "pattern",
        "enum",
        "required",
    ]
    .iter()
    .any(|k| schema.get(k).is_some())
        || schema.get("oneOf").is_some_and(|one| {
            one.as_array()
                .is_some_and(|alts| alts.iter().all(|a| a.get("enum").is_some()))
        })
        || schema
            .pointer("/items/minLength")
            .or_else(|| schema.pointer("/items/enum"))
            .or_else(|| schema.pointer("/items/oneOf"))
            .is_some();
    out.push((path.to_owned(), ranged));
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (key, sub) in props {
            let sub_path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            fields(sub, &sub_path, out);
        }
    }
    if let Some(items) = schema.get("items") {
        for alt in alternatives(items) {
            if alt.get("properties").is_some() {
                fields(alt, &format!("{path}[]"), out);
            }
        }
    }
}

/// A schema's alternatives (`anyOf` / `oneOf`), or the schema itself.
fn alternatives(schema: &Value) -> Vec<&Value> {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            return alts.iter().collect();
        }
    }
    vec![schema]
}

#[test]
fn rule_26_2_the_table_tries_every_field_of_the_schema() {
    let mut all = Vec::new();
    fields(&schema(), "", &mut all);
    let rows = table();
    let tried = |field: &str, kind: Kind| rows.iter().any(|(f, k, _)| *f == field && *k == kind);
    let mut missing = Vec::new();
    for (field, ranged) in &all {
        let is_object = rows
            .iter()
            .any(|(f, k, _)| *f == field.as_str() && *k == UnknownKey)
            || schema_at(&schema(), field).get("additionalProperties") == Some(&json!(false));
        // An array's item object is tried good and of a wrong type by the
        // array's own rows.
        let mut kinds = if field.ends_with("[]") {
            vec![]
        } else {
            vec![Good]
        };
        // Any JSON is an example call's arguments: no type is wrong.
        if !field.ends_with(".arguments") && !field.ends_with("[]") {
            kinds.push(WrongType);
        }
        if *ranged && !is_object {
            kinds.push(OutOfRange);
        }
        if is_object {
            kinds.push(UnknownKey);
        }
        for kind in kinds {
            if !tried(field, kind) {
                missing.push(format!("{field} {kind:?}"));
            }
        }
    }
    assert!(all.len() > 30, "{all:?}");
    assert!(missing.is_empty(), "{missing:#?}");
}

/// The subschema at a field path of [`fields`].
fn schema_at(schema: &Value, path: &str) -> Value {
    let mut here = schema.clone();
    if path.is_empty() {
        return here;
    }
    for part in path.split('.') {
        let (key, items) = match part.strip_suffix("[]") {
            Some(key) => (key, true),
            None => (part, false),
        };
        here = here["properties"][key].clone();
        if items {
            here = alternatives(&here["items"])
                .into_iter()
                .find(|a| a.get("properties").is_some())
                .cloned()
                .unwrap_or(Value::Null);
        }
    }
    here
}

/// The keywords the two schemas must state alike, each read the same way
/// from either: `type` as a set, `enum` from a list or from `oneOf` of
/// one-value enums, bounds as numbers, `required` as a set.
fn keywords(schema: &Value) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let types: BTreeSet<String> = match schema.get("type") {
        Some(Value::String(t)) => [t.clone()].into(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => BTreeSet::new(),
    };
    out.push(("type", json!(types)));
    let values: Option<Vec<Value>> = match schema.get("enum") {
        Some(Value::Array(values)) => Some(values.clone()),
        _ => schema
            .get("oneOf")
            .and_then(Value::as_array)
            .and_then(|alts| {
                alts.iter()
                    .map(|a| match a.get("enum").and_then(Value::as_array) {
                        Some(one) if one.len() == 1 => Some(one[0].clone()),
                        _ => None,
                    })
                    .collect()
            }),
    };
    out.push(("enum", json!(values)));
    for bound in ["minimum", "maximum", "minLength"] {
        out.push((bound, json!(schema.get(bound).and_then(Value::as_f64))));
    }
    out.push((
        "default",
        schema.get("default").cloned().unwrap_or(json!("<none>")),
    ));
    let required: BTreeSet<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    out.push(("required", json!(required)));
    out.push((
        "additionalProperties",
        match schema.get("additionalProperties") {
            Some(Value::Bool(b)) => json!(b),
            Some(_) => json!("<a schema>"),
            None => json!(null),
        },
    ));
    out
}

/// An array's items, read as [`keywords`]; of a union with a rule object
/// (compared as fields of its own), the other alternatives.
fn items(schema: &Value) -> Option<Vec<(&'static str, Value)>> {
    let items = schema.get("items")?;
    let alts = alternatives(items);
    if alts.iter().any(|a| a.get("properties").is_some()) {
        return Some(
            alts.into_iter()
                .filter(|a| a.get("properties").is_none())
                .flat_map(keywords)
                .collect(),
        );
    }
    Some(keywords(items))
}

/// Where the derived schema states a keyword differently from the
/// hand-written one on purpose: (field, keyword).
const KNOWN: &[(&str, &str)] = &[];

#[test]
fn rule_26_2_the_derived_schema_states_what_the_handwritten_one_did_field_by_field() {
    let (old, new) = (handwritten(), schema());
    let (mut old_fields, mut new_fields) = (Vec::new(), Vec::new());
    fields(&old, "", &mut old_fields);
    fields(&new, "", &mut new_fields);
    let old_paths: BTreeSet<&String> = old_fields.iter().map(|(p, _)| p).collect();
    let new_paths: BTreeSet<&String> = new_fields.iter().map(|(p, _)| p).collect();
    assert_eq!(old_paths, new_paths, "the same fields");
    let mut differ = Vec::new();
    for path in new_paths {
        let (was, is) = (
            keywords(&schema_at(&old, path)),
            keywords(&schema_at(&new, path)),
        );
        for ((keyword, before), (_, after)) in was.iter().zip(&is) {
            let known = KNOWN
                .iter()
                .any(|(f, k)| *f == path.as_str() && *k == *keyword);
            if (before != after) != known {
                differ.push(format!("{path} {keyword}: was {before}, is {after}"));
            }
        }
        let (was, is) = (items(&schema_at(&old, path)), items(&schema_at(&new, path)));
        if was != is {
            differ.push(format!("{path} items: was {was:?}, is {is:?}"));
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
}

#[test]
fn rule_26_2_the_field_by_field_comparison_sees_a_changed_keyword() {
    // The comparison above can fail: a default, a bound or a closed object
    // changed in the derived schema shows as a difference.
    let old = handwritten();
    for (path, keyword, value) in [
        ("gate_priority", "default", json!(0)),
        ("rules[].timeout_ms", "minimum", json!(1)),
        ("reviewer", "additionalProperties", json!(true)),
    ] {
        let mut changed = schema_at(&old, path);
        changed[keyword] = value;
        assert_ne!(
            keywords(&schema_at(&old, path)),
            keywords(&changed),
            "{path} {keyword}"
        );
    }
}

#[test]
fn rule_26_2_every_good_value_of_the_table_is_one_the_worker_takes() {
    for (field, _, value) in table().into_iter().filter(|(_, k, _)| *k == Good) {
        assert!(
            ApprovalConfig::from_value(&value).is_ok(),
            "{field}: {value}"
        );
    }
}

#[test]
fn rule_26_2_bounds_are_written_as_integers_an_engine_keeps_exactly() {
    let schema = schema();
    let gate = &schema["properties"]["gate_priority"];
    assert_eq!(gate["maximum"], json!(9_007_199_254_740_991_i64));
    assert_eq!(gate["minimum"], json!(-9_007_199_254_740_991_i64));
    assert!(gate["maximum"].is_i64(), "{gate}");
    let rule_timeout = schema_at(&schema, "rules[].timeout_ms");
    assert!(rule_timeout["minimum"].is_u64(), "{rule_timeout}");
}

#[test]
fn rule_9_the_golden_seed_file_fits_the_schema() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seed.yaml");
    let seed = load_seed(&path).expect("the golden seed loads");
    let errors: Vec<String> = validator(&schema())
        .iter_errors(&seed)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(validator(&handwritten()).is_valid(&seed));
}

#[test]
fn rule_25_1_the_schema_words_constraints_as_the_type_does() {
    let text = schema().to_string();
    for words in [
        crate::terms::constraint_docs::PREFIX,
        crate::terms::constraint_docs::RUNS,
    ] {
        let quoted = serde_json::to_string(words).expect("a string");
        assert!(text.contains(quoted.trim_matches('"')), "{words}");
    }
    assert!(!text.contains("starts with this text"));
}

#[test]
fn rule_26_2_the_derived_sections_state_the_limits_the_worker_checks() {
    let schema = schema();
    let reviewer = &schema["properties"]["reviewer"]["properties"];
    assert_eq!(
        reviewer["max_denials_per_50"]["maximum"].as_f64(),
        Some(f64::from(crate::config::BREAKER_WINDOW))
    );
    let ceiling = crate::config::REVIEWER_TIMEOUT_CEILING_MS;
    assert!(
        reviewer["timeout_ms"]["description"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("clamped to {ceiling} "))),
        "{}",
        reviewer["timeout_ms"]
    );
    let links = &schema["properties"]["links"]["properties"];
    assert_eq!(
        links["secret"]["minLength"].as_u64(),
        Some(crate::link_token::token::MIN_SECRET_CHARS as u64)
    );
    for section in ["links", "reviewer", "decision_log"] {
        let s = &schema["properties"][section];
        assert_eq!(s["type"], json!(["object", "null"]), "{section}");
        assert_eq!(s["additionalProperties"], json!(false), "{section}");
        assert!(
            s["title"].is_string() && s["examples"].is_array(),
            "{section}"
        );
    }
}
