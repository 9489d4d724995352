//! Any bytes → JSON → `parse_hook_input` → the gate's pure path (decide with
//! several settings and rule sets, the deny reason, the denial envelope, the
//! held record) → a valid `HookOutput`.
//!
//! The first byte steers: at `0xF0` and above, one field of the input is
//! buried under 100,000 levels of nesting before parsing, as a value built
//! in-process (not read off the wire) can be.

#![no_main]

use std::sync::LazyLock;

use approval_gate::config::{ApprovalConfig, Snapshot};
use approval_gate::error::validate_id;
use approval_gate::functions::gate::{
    build_record, context_of, parse_hook_input, HookInput, HookOutput,
};
use approval_gate::pending::record::{PendingRecord, RecordKind};
use approval_gate::policy::{
    decide, is_human_only, Call, CompiledRules, CompiledSettings, DenialEnvelope, RuleSpec,
    Verdict, HUMAN_ONLY_RULE,
};
use approval_gate::redact::redact;
use approval_gate::settings::model::{ApprovalSettings, Entry, GrantedBy, Mode};
use approval_gate_fuzz::walk::redaction_violation;
use approval_gate_fuzz::{dismantle, nest_arrays};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

/// Levels of nesting of a buried field.
const DEEP: usize = 100_000;

struct Fixture {
    name: &'static str,
    settings: CompiledSettings,
    mode: Mode,
    rules: CompiledRules,
}

fn entries(ids: &[&str]) -> Vec<Entry> {
    ids.iter()
        .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
        .collect()
}

fn settings(mode: Mode, always_allow: &[&str], approved_always: &[&str]) -> ApprovalSettings {
    ApprovalSettings {
        mode,
        always_allow: entries(always_allow),
        approved_always: entries(approved_always),
        mode_set_at: 0,
    }
}

fn rich_rules() -> Value {
    json!([
        "!approval::*",
        "!shell::rm*",
        {"function": "shell::exec", "action": "deny", "rule_id": "no-force",
         "args": {"command": {"matches": "push .*--force"}}},
        {"function": "shell::exec", "action": "allow", "modes": ["auto"],
         "args": {"/opts/dry_run": {"equals": true}, "cwd": {"equals": null}}},
        {"function": "state::{get,list}", "action": "allow"},
        {"function": "coder::*", "action": "deny", "modes": ["manual"]},
        {"function": "demo::*", "action": "allow", "modes": ["auto"]},
        "mcp::*::read",
        "!*::delete"
    ])
}

static FIXTURES: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let compile = |v: Value| {
        let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("fixture rules parse");
        CompiledRules::compile(&specs).expect("fixture rules compile")
    };
    let mut out = Vec::new();
    for (name, s) in [
        ("manual", settings(Mode::Manual, &[], &[])),
        (
            "auto",
            settings(
                Mode::Auto,
                &["demo::*", "shell::ls", "weird::["],
                &["state::set"],
            ),
        ),
        ("full", settings(Mode::Full, &["x"], &["y"])),
    ] {
        for rules in [
            CompiledRules::compile(&approval_gate::policy::default_rules()).expect("defaults"),
            compile(rich_rules()),
            CompiledRules::empty(),
        ] {
            out.push(Fixture {
                name,
                mode: s.mode,
                settings: CompiledSettings::new(&s),
                rules,
            });
        }
    }
    // The defaults a configuration gives sessions with nothing stored.
    for mode in ["manual", "auto", "full"] {
        let config =
            ApprovalConfig::from_value(&json!({"default_mode": mode, "rules": rich_rules()}))
                .expect("fixture config parses");
        let snapshot = Snapshot::compile(config);
        assert!(snapshot.rule_errors.is_empty());
        out.push(Fixture {
            name: "config defaults",
            mode: snapshot.default_settings.mode,
            settings: snapshot.defaults,
            rules: snapshot.rules,
        });
    }
    out
});

fn call(top: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    top.get_mut("call").and_then(Value::as_object_mut)
}

/// Buries one field of `input` under [`DEEP`] levels of nesting.
fn bury(input: &mut Value, which: u8) {
    let Value::Object(top) = input else {
        return;
    };
    let deep = || nest_arrays(DEEP, json!("leaf"));
    let old = match which % 10 {
        0 => top.insert("step".into(), deep()),
        1 => {
            let mut meta = Map::new();
            meta.insert("k".into(), deep());
            top.insert("metadata".into(), Value::Object(meta))
        }
        2 => top.insert("result".into(), deep()),
        3 => call(top).and_then(|c| c.insert("arguments".into(), deep())),
        4 => top.insert("extra".into(), deep()),
        5 => call(top).and_then(|c| c.insert("extra".into(), deep())),
        6 => top.insert("session_id".into(), deep()),
        7 => call(top).and_then(|c| c.insert("id".into(), deep())),
        8 => top.insert("call".into(), deep()),
        _ => top.insert("metadata".into(), deep()),
    };
    if let Some(old) = old {
        dismantle(old);
    }
}

/// What the gate does before any I/O: answer, or hold with this record.
enum Answer {
    Out(HookOutput),
    Hold(Box<PendingRecord>),
}

/// The gate's decision path (`functions::gate::gate` without the worker):
/// the same checks in the same order.
fn answer(input: &HookInput, fixture: &Fixture, session_reply: &Value) -> Answer {
    let Some(call) = input.call.as_ref() else {
        return Answer::Out(HookOutput::Deny {
            reason: "approval-gate received a pre_trigger hook input without a call payload".into(),
        });
    };
    let ids_ok = validate_id("session_id", &input.session_id).is_ok()
        && validate_id("function_call_id", &call.id).is_ok();
    let decision = decide(
        &fixture.settings,
        &fixture.rules,
        &Call {
            function_id: &call.function_id,
            arguments: call.arguments.as_ref(),
        },
    );
    // The reason, the rule id and the envelope exist for every decision.
    let reason = decision.reason(&call.function_id);
    assert!(!reason.is_empty());
    let envelope = DenialEnvelope::from_decision(
        &call.function_id,
        &decision,
        call.arguments.as_ref().map(redact),
    );
    let env = serde_json::to_value(&envelope).expect("envelope serializes");
    assert_eq!(env["schema_version"], 1);
    assert_eq!(env["status"], "denied");
    if let Some(excerpt) = env.get("args_excerpt") {
        if let Some(v) = redaction_violation(excerpt) {
            panic!("envelope excerpt: {v}");
        }
    }
    if !ids_ok && decision.rule_id() != Some(HUMAN_ONLY_RULE) {
        return Answer::Out(HookOutput::Deny {
            reason: format!(
                "approval-gate cannot evaluate {}: session_id / function_call_id must be non-empty and must not contain \"/\"",
                call.function_id
            ),
        });
    }
    match decision.verdict {
        Verdict::Allow => Answer::Out(HookOutput::Continue),
        Verdict::Deny => {
            assert!(
                reason.starts_with(&format!(
                    "Permission denied: {} matched rule ",
                    call.function_id
                )),
                "{reason}"
            );
            Answer::Out(HookOutput::Deny { reason })
        }
        Verdict::Hold => Answer::Hold(Box::new(build_record(
            input,
            call,
            RecordKind::Function,
            context_of(session_reply),
        ))),
    }
}

fn check_output(out: &HookOutput) {
    let v = serde_json::to_value(out).expect("output serializes");
    let obj = v.as_object().expect("output is an object");
    match obj.get("decision").and_then(Value::as_str) {
        Some("continue") | Some("hold") => assert_eq!(obj.len(), 1, "{v}"),
        Some("deny") => {
            assert_eq!(obj.len(), 2, "{v}");
            let reason = obj.get("reason").and_then(Value::as_str).expect("reason");
            assert!(!reason.is_empty());
        }
        other => panic!("decision {other:?} in {v}"),
    }
}

fn check_record(record: &PendingRecord, input: &HookInput) {
    let call = input.call.as_ref().expect("held calls have a call");
    let empty = Value::Object(Map::new());
    let excerpt = record.arguments_excerpt.to_value();
    assert_eq!(excerpt, redact(call.arguments.as_ref().unwrap_or(&empty)));
    if let Some(v) = redaction_violation(&excerpt) {
        panic!("record excerpt: {v}");
    }
    assert_eq!(record.session_id, input.session_id);
    assert_eq!(record.function_call_id, call.id);
    assert_eq!(record.depth, input.depth);
    assert!(record.grant_request.is_none());
    for s in [&record.session_title, &record.session_description]
        .into_iter()
        .flatten()
    {
        assert!(!s.is_empty());
    }
    let text = serde_json::to_string(record).expect("record serializes");
    let back: PendingRecord = serde_json::from_str(&text).expect("record reads back");
    assert_eq!(back.key(), record.key());
    assert_eq!(back.kind, RecordKind::Function);
    assert_eq!(back.turn_id, record.turn_id);
}

fuzz_target!(|data: &[u8]| {
    let Some((&steer, json)) = data.split_first() else {
        return;
    };
    let Ok(mut input) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let session_reply = input.get("_session").cloned().unwrap_or(Value::Null);
    if steer >= 0xF0 {
        bury(&mut input, steer);
    }
    let hook = match parse_hook_input(input) {
        Ok(hook) => hook,
        // The gate denies a malformed input.
        Err(_) => return,
    };
    for fixture in FIXTURES.iter() {
        let out = match answer(&hook, fixture, &session_reply) {
            Answer::Out(out) => out,
            Answer::Hold(record) => {
                check_record(&record, &hook);
                HookOutput::Hold
            }
        };
        check_output(&out);
        let Some(call) = hook.call.as_ref() else {
            assert!(matches!(out, HookOutput::Deny { .. }));
            continue;
        };
        let ids_ok = validate_id("session_id", &hook.session_id).is_ok()
            && validate_id("function_call_id", &call.id).is_ok();
        // The human-only surface and unusable ids are denied, whatever the
        // settings and rules; full mode lets every other call through.
        if is_human_only(&call.function_id) || !ids_ok {
            assert!(
                matches!(out, HookOutput::Deny { .. }),
                "{}: {} → {out:?}",
                fixture.name,
                call.function_id
            );
        } else if fixture.mode == Mode::Full {
            assert_eq!(out, HookOutput::Continue, "{}", fixture.name);
        }
    }
    dismantle(session_reply);
});
