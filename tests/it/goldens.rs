//! The wire contract, pinned: every function's description and request /
//! response schemas, every trigger type's payload and binding-config
//! schemas, and the configuration entry's schema, as the worker registers
//! them — read back from the engine (`engine::functions::info`,
//! `engine::triggers::info`, `configuration::schema`), not rebuilt from the
//! Rust types — must equal the JSON files under `tests/golden/`.
//!
//! A change to any of them is a change to what consoles, notification
//! workers and the harness see. When it is meant, regenerate the files with
//! `UPDATE_GOLDENS=1 cargo test --test it goldens::` and review the diff.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use approval_gate::CONFIG_ID;
use approval_gate::FUNCTION_IDS;
use approval_gate::{PENDING_CREATED, PENDING_ESCALATED, PENDING_RESOLVED};
use approval_gate_testkit::fixture::{call, EngineFixture, EngineKind};
use serde_json::{json, Map, Value};

use crate::common::*;

const REGENERATE: &str = "UPDATE_GOLDENS=1 cargo test --test it goldens::";
const TRIGGER_TYPES: &[&str] = &[PENDING_CREATED, PENDING_RESOLVED, PENDING_ESCALATED];

/// Fields whose value the contract leaves as any JSON: a call's arguments
/// (whatever the target takes) and their redacted copy, a configuration or
/// state value before and after a change, and a rule's `equals` operand.
const ANY_JSON: &[&str] = &[
    "arguments",
    "arguments_excerpt",
    "args_excerpt",
    "old_value",
    "new_value",
    "equals",
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Golden file path (relative to `tests/golden`) → its content.
type Goldens = BTreeMap<String, Value>;

/// A function's golden file name: `approval::resolve` → `resolve`,
/// `approval-gate::ui-content` → `approval-gate.ui-content`.
fn short(id: &str) -> String {
    id.strip_prefix("approval::")
        .unwrap_or(id)
        .replace("::", ".")
}

async fn info(probe: &iii_sdk::IIIClient, function_id: &str, payload: Value) -> Value {
    call(probe, function_id, payload.clone())
        .await
        .unwrap_or_else(|e| panic!("{function_id} {payload} failed: {e}"))
}

/// What the worker registered, as the engine reports it.
async fn registered(engine: &EngineFixture) -> Goldens {
    let worker = start_in_process(engine).await;
    let probe = engine.client("golden-probe").await;
    let mut out = Goldens::new();

    // Both families (`approval::*`, `approval-gate::*`), internal ones too.
    let listed = info(
        &probe,
        "engine::functions::list",
        json!({"prefix": "approval", "include_internal": true}),
    )
    .await;
    let live: BTreeSet<&str> = listed["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["function_id"].as_str())
        .collect();
    let expected: BTreeSet<&str> = FUNCTION_IDS.iter().copied().collect();
    assert_eq!(
        live, expected,
        "the functions the worker serves and FUNCTION_IDS (the goldens' list) differ"
    );
    for id in FUNCTION_IDS {
        let detail = info(
            &probe,
            "engine::functions::info",
            json!({"function_id": id}),
        )
        .await;
        out.insert(
            format!("functions/{}.json", short(id)),
            json!({
                "function_id": id,
                "description": detail["description"],
                "request_schema": detail["request_schema"],
                "response_schema": detail["response_schema"],
            }),
        );
    }

    let listed = info(
        &probe,
        "engine::triggers::list",
        json!({"prefix": "approval::"}),
    )
    .await;
    let live: BTreeSet<&str> = listed["triggers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(
        live,
        TRIGGER_TYPES.iter().copied().collect(),
        "the trigger types the worker provides and the goldens' list differ"
    );
    for id in TRIGGER_TYPES {
        let detail = info(&probe, "engine::triggers::info", json!({"id": id})).await;
        out.insert(
            format!("triggers/{}.json", short(id)),
            json!({
                "trigger_id": id,
                "description": detail["description"],
                "payload_schema": detail["request_schema"],
                "binding_config_schema": detail["configuration_schema"],
            }),
        );
    }

    let entry = info(&probe, "configuration::schema", json!({"id": CONFIG_ID})).await;
    out.insert(
        "configuration.json".into(),
        json!({
            "configuration_id": CONFIG_ID,
            "name": entry["name"],
            "description": entry["description"],
            "schema": entry["schema"],
        }),
    );
    worker.shutdown(std::time::Duration::from_secs(2)).await;
    out
}

fn read_goldens() -> Goldens {
    let mut out = Goldens::new();
    let root = golden_dir();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path).unwrap();
                let value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("tests/golden/{rel} is not JSON: {e}"));
                out.insert(rel, value);
            }
        }
    }
    out
}

/// Pretty JSON with keys sorted at every level (stable whatever the
/// engine's key order), newline-terminated.
fn render(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut text = serde_json::to_string_pretty(&sorted(value)).unwrap();
    text.push('\n');
    text
}

fn write_goldens(actual: &Goldens) {
    let root = golden_dir();
    for stale in read_goldens().keys().filter(|k| !actual.contains_key(*k)) {
        std::fs::remove_file(root.join(stale)).unwrap();
    }
    for (rel, value) in actual {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, render(value)).unwrap();
    }
    eprintln!(
        "goldens: wrote {} files under tests/golden; review them with git diff",
        actual.len()
    );
}

// ── the diff a drift prints ────────────────────────────────────────────

fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn compact(v: &Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text
    }
}

/// `-` removed, `+` added, `~` changed, one line per JSON Pointer. Arrays of
/// strings (`required`, `enum`) are compared as sets first, so a renamed
/// entry shows as one removal and one addition, not a shifted list.
fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}/{}", pointer_token(k));
                match (a.get(k), b.get(k)) {
                    (Some(x), None) => out.push(format!("  - {p}: {}", compact(x))),
                    (None, Some(y)) => out.push(format!("  + {p}: {}", compact(y))),
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.iter().chain(b).all(Value::is_string) && a != b => {
            let (sa, sb): (BTreeSet<&str>, BTreeSet<&str>) = (
                a.iter().filter_map(Value::as_str).collect(),
                b.iter().filter_map(Value::as_str).collect(),
            );
            if sa == sb {
                out.push(format!(
                    "  ~ {path}: order {} → {}",
                    compact(old),
                    compact(new)
                ));
            }
            for x in sa.difference(&sb) {
                out.push(format!("  - {path}[]: {x:?}"));
            }
            for y in sb.difference(&sa) {
                out.push(format!("  + {path}[]: {y:?}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{path}/{i}");
                match (a.get(i), b.get(i)) {
                    (Some(x), None) => out.push(format!("  - {p}: {}", compact(x))),
                    (None, Some(y)) => out.push(format!("  + {p}: {}", compact(y))),
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (None, None) => {}
                }
            }
        }
        _ if old != new => out.push(format!("  ~ {path}: {} → {}", compact(old), compact(new))),
        _ => {}
    }
}

/// The drift report, or `None` when the goldens match.
fn drift(golden: &Goldens, actual: &Goldens) -> Option<String> {
    let mut sections = Vec::new();
    let files: BTreeSet<&String> = golden.keys().chain(actual.keys()).collect();
    for file in files {
        match (golden.get(file), actual.get(file)) {
            (Some(_), None) => sections.push(format!(
                "tests/golden/{file}: no longer registered (the file is stale)"
            )),
            (None, Some(_)) => sections.push(format!(
                "tests/golden/{file}: registered but has no golden file yet"
            )),
            (Some(g), Some(a)) if render(g) != render(a) => {
                let mut lines = Vec::new();
                diff("", g, a, &mut lines);
                sections.push(format!(
                    "tests/golden/{file}  (- golden, + registered)\n{}",
                    lines.join("\n")
                ));
            }
            _ => {}
        }
    }
    (!sections.is_empty()).then(|| {
        format!(
            "the registered wire contract differs from tests/golden ({} file(s)):\n\n{}\n\n\
             If the change is intended — it changes what consoles, notification workers and \
             the harness see, so update README.md and tell their owners — regenerate with:\n\n    {REGENERATE}\n",
            sections.len(),
            sections.join("\n\n")
        )
    })
}

#[tokio::test]
async fn registered_schemas_match_the_goldens() {
    on_each_engine("goldens", |engine| async move {
        let actual = registered(&engine).await;
        let update = std::env::var_os("UPDATE_GOLDENS").is_some_and(|v| !v.is_empty() && v != "0");
        if update && engine.kind() == EngineKind::Test {
            write_goldens(&actual);
            return;
        }
        if let Some(report) = drift(&read_goldens(), &actual) {
            panic!("on the {:?} engine, {report}", engine.kind());
        }
    })
    .await;
}

// ── what every schema must be ──────────────────────────────────────────

/// Whether a schema says what a value is (a type, a reference, an enum, a
/// constant, or a combination of typed schemas). `true` and `{}` say nothing.
fn is_typed(schema: &Value) -> bool {
    let Some(obj) = schema.as_object() else {
        return false;
    };
    if ["type", "$ref", "enum", "const"]
        .iter()
        .any(|k| obj.contains_key(*k))
    {
        return true;
    }
    ["oneOf", "anyOf", "allOf"].iter().any(|k| {
        obj.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|alts| !alts.is_empty() && alts.iter().all(is_typed))
    })
}

/// Every named property of `schema` (recursively, through definitions,
/// items and combinators): `(pointer, name, property schema)`.
fn properties<'a>(path: String, schema: &'a Value, out: &mut Vec<(String, &'a str, &'a Value)>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let p = format!("{path}/properties/{}", pointer_token(name));
            out.push((p.clone(), name.as_str(), prop));
            properties(p, prop, out);
        }
    }
    if let Some(defs) = obj.get("definitions").and_then(Value::as_object) {
        for (name, def) in defs {
            properties(format!("{path}/definitions/{name}"), def, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = obj.get(key) {
            properties(format!("{path}/{key}"), inner, out);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for (i, alt) in obj
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            properties(format!("{path}/{key}/{i}"), alt, out);
        }
    }
}

/// Problems of one schema: untyped root or fields, and (for requests)
/// fields without a description.
fn problems(file: &str, field: &str, schema: &Value, described: bool) -> Vec<String> {
    let mut out = Vec::new();
    if !is_typed(schema) {
        out.push(format!(
            "{file} {field}: the schema is untyped ({})",
            compact(schema)
        ));
    }
    let mut props = Vec::new();
    properties(String::new(), schema, &mut props);
    for (pointer, name, prop) in props {
        if !ANY_JSON.contains(&name) && !is_typed(prop) {
            out.push(format!(
                "{file} {field}{pointer}: field {name} is untyped ({})",
                compact(prop)
            ));
        }
        let has_description = prop
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty());
        if described && !has_description {
            out.push(format!(
                "{file} {field}{pointer}: field {name} has no description"
            ));
        }
    }
    out
}

#[tokio::test]
async fn every_schema_is_typed_and_request_fields_are_described() {
    let engine = EngineFixture::start_test().await;
    let actual = registered(&engine).await;
    let mut found = Vec::new();
    for (file, golden) in &actual {
        let description = golden["description"].as_str().unwrap_or_default();
        if description.trim().is_empty() {
            found.push(format!("{file}: no description"));
        }
        if file.starts_with("functions/") {
            found.extend(problems(
                file,
                "request_schema",
                &golden["request_schema"],
                true,
            ));
            found.extend(problems(
                file,
                "response_schema",
                &golden["response_schema"],
                false,
            ));
        } else if file.starts_with("triggers/") {
            found.extend(problems(
                file,
                "payload_schema",
                &golden["payload_schema"],
                false,
            ));
            found.extend(problems(
                file,
                "binding_config_schema",
                &golden["binding_config_schema"],
                true,
            ));
        } else {
            found.extend(problems(file, "schema", &golden["schema"], true));
        }
    }
    assert!(
        found.is_empty(),
        "{} schema problem(s):\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn the_drift_report_names_the_field_and_how_to_regenerate() {
    let golden: Goldens = [(
        "functions/x.json".to_string(),
        json!({"request_schema": {"properties": {"session_id": {"type": "string"}}, "required": ["decision", "session_id"]}}),
    )]
    .into();
    let actual: Goldens = [(
        "functions/x.json".to_string(),
        json!({"request_schema": {"properties": {"sessionId": {"type": "string"}}, "required": ["decision", "sessionId"]}}),
    )]
    .into();
    let report = drift(&golden, &actual).expect("a drift");
    assert!(
        report.contains("  - /request_schema/properties/session_id: {\"type\":\"string\"}"),
        "{report}"
    );
    assert!(
        report.contains("  + /request_schema/properties/sessionId: {\"type\":\"string\"}"),
        "{report}"
    );
    assert!(
        report.contains("  - /request_schema/required[]: \"session_id\""),
        "{report}"
    );
    assert!(
        report.contains("  + /request_schema/required[]: \"sessionId\""),
        "{report}"
    );
    assert!(report.contains(REGENERATE), "{report}");
    assert!(drift(&golden, &golden).is_none());
}

#[test]
fn typedness_rejects_bare_schemas() {
    assert!(!is_typed(&json!(true)));
    assert!(!is_typed(&json!({})));
    assert!(!is_typed(&json!({"description": "anything"})));
    assert!(is_typed(&json!({"type": "string"})));
    assert!(is_typed(&json!({"allOf": [{"$ref": "#/definitions/X"}]})));
    assert!(!is_typed(&json!({"anyOf": [{"type": "null"}, {}]})));
}
