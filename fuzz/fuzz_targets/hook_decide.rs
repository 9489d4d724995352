//! Any bytes → JSON → `parse_hook_input` → `judge` (the gate's whole
//! decision before any I/O) under several settings, rule sets and both rule
//! precedences → the held record, the user's denial envelope → a valid
//! `HookOutput`; `approval::evaluate`'s `explain` agrees with every judgement.
//!
//! The first byte steers: at `0xF0` and above, one field of the input is
//! buried under 100,000 levels of nesting before parsing, as a value built
//! in-process (not read off the wire) can be.

#![no_main]

use std::sync::LazyLock;

use approval_gate::{
    build_record, builtin_guard, explain, is_valid_id, judge, parse_hook_input, redact,
    ApprovalConfig, ApprovalSettings, CompiledRules, CompiledSettings, DenialEnvelope, Entry,
    GrantedBy, HookInput, HookOutput, Judgement, Mode, PendingRecord, RecordKind, RulePrecedence,
    RuleSpec, SessionContext, Snapshot, WireVerdict, HUMAN_ONLY_RULE, LOCKDOWN_RULE,
    OPAQUE_COMMAND_RULE,
};
use approval_gate_fuzz::walk::redaction_violation;
use approval_gate_fuzz::{dismantle, nest_arrays};
use approval_gate_reference::pattern_matches;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

/// Levels of nesting of a buried field.
const DEEP: usize = 100_000;

struct Fixture {
    name: &'static str,
    mode: Mode,
    settings: CompiledSettings,
    rules: CompiledRules,
    /// The configuration `explain` reads deadlines from.
    config: ApprovalConfig,
    /// The operator's extra human-only globs the rules carry.
    extra_guards: Vec<String>,
}

fn entries(ids: &[&str]) -> Vec<Entry> {
    ids.iter()
        .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
        .collect()
}

/// Bounded grants: argument-scoped with uses left, used up, expired.
fn bounded() -> Vec<Entry> {
    let args = |v: Value| Some(serde_json::from_value(v).expect("fixture args parse"));
    vec![
        Entry {
            args: args(json!({"command": {"prefix": "git "}})),
            uses_left: Some(2),
            ..Entry::new("shell::exec", 0, GrantedBy::UserClick)
        },
        Entry {
            uses_left: Some(0),
            ..Entry::new("shell::*", 0, GrantedBy::UserClick)
        },
        Entry {
            expires_at: Some(1),
            ..Entry::new("*", 0, GrantedBy::UserClick)
        },
    ]
}

fn settings(mode: Mode, always_allow: &[&str], approved_always: &[&str]) -> ApprovalSettings {
    let mut approved = entries(approved_always);
    approved.extend(bounded());
    ApprovalSettings {
        always_allow: entries(always_allow),
        approved_always: approved,
        ..ApprovalSettings::new(mode)
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
        "?deploy::*",
        {"function": "shell::exec", "action": "ask", "modes": ["manual", "full"],
         "args": {"command": {"prefix": "sudo "}}, "timeout_ms": 60000,
         "escalate_after_ms": 5000},
        "!*::delete"
    ])
}

static FIXTURES: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let specs: Vec<RuleSpec> = serde_json::from_value(rich_rules()).expect("fixture rules parse");
    let mut out = Vec::new();
    for precedence in [RulePrecedence::FirstMatch, RulePrecedence::DenyAskAllow] {
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
                CompiledRules::compile(&approval_gate::default_rules()).expect("defaults"),
                CompiledRules::compile(&specs).expect("fixture rules compile"),
                CompiledRules::empty(),
            ] {
                out.push(Fixture {
                    name,
                    mode: s.mode,
                    settings: CompiledSettings::new(&s),
                    rules: rules.with_precedence(precedence),
                    config: ApprovalConfig::default(),
                    extra_guards: Vec::new(),
                });
            }
        }
        // The defaults a configuration gives sessions with nothing stored.
        for mode in ["manual", "auto", "full"] {
            let extra_guards = vec!["ops::*".to_owned(), "db::[".to_owned()];
            let config = ApprovalConfig::from_value(&json!({
                "default_mode": mode, "rules": rich_rules(), "rule_precedence": precedence,
                "human_only_extra": extra_guards, "pending_timeout_ms": 120000
            }))
            .expect("fixture config parses");
            let snapshot = Snapshot::compile(config);
            assert!(snapshot.rule_errors.is_empty());
            out.push(Fixture {
                name: "config defaults",
                mode: snapshot.default_settings.mode,
                settings: snapshot.defaults,
                rules: snapshot.rules,
                config: snapshot.config,
                extra_guards,
            });
        }
        // The lockdown (no configuration ever compiled), under grants that
        // would allow everything.
        let everything = settings(Mode::Full, &["*"], &["*"]);
        out.push(Fixture {
            name: "lockdown",
            mode: Mode::Full,
            settings: CompiledSettings::new(&everything),
            rules: CompiledRules::lockdown().with_precedence(precedence),
            config: ApprovalConfig::default(),
            extra_guards: Vec::new(),
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

/// The answer the gate gives for `judgement`; a hold's record is built and
/// checked on the way.
fn output_of(judgement: &Judgement<'_>, input: &HookInput, session_reply: &Value) -> HookOutput {
    match judgement {
        Judgement::Continue { spend, .. } => {
            // Only a grant with uses left asks for a use to be written.
            if let Some(spend) = spend {
                assert!(spend.entry.uses_left.is_some_and(|n| n > 0), "{spend:?}");
            }
            HookOutput::Continue
        }
        Judgement::Deny { reason, .. } => HookOutput::Deny {
            reason: reason.clone(),
            details: None,
        },
        Judgement::Hold { .. } => {
            let call = input.call.as_ref().expect("held calls have a call");
            let record = build_record(
                input,
                call,
                RecordKind::Function,
                SessionContext::of(session_reply),
            );
            check_record(&record, input);
            // A human's denial of the held call carries a redacted excerpt.
            let envelope = DenialEnvelope::by_user(
                &call.function_id,
                "no",
                Some(record.arguments_excerpt.to_value()),
            );
            let env = serde_json::to_value(&envelope).expect("envelope serializes");
            assert_eq!(env["schema_version"], 1);
            assert_eq!(env["status"], "denied");
            assert_eq!(env["denied_by"], "user");
            if let Some(excerpt) = env.get("args_excerpt") {
                if let Some(v) = redaction_violation(excerpt) {
                    panic!("envelope excerpt: {v}");
                }
            }
            HookOutput::Hold
        }
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
    let value = serde_json::to_value(record).expect("record serializes");
    if let Some(meta) = value.get("session_metadata") {
        if let Some(v) = redaction_violation(meta) {
            panic!("record session metadata: {v}");
        }
    }
    let text = serde_json::to_string(record).expect("record serializes");
    let back: PendingRecord = serde_json::from_str(&text).expect("record reads back");
    assert_eq!(back.key(), record.key());
    assert_eq!(back.kind, RecordKind::Function);
    assert_eq!(back.turn_id, record.turn_id);
}

/// `approval::evaluate` runs the gate's ladder: on every call it can see
/// (it refuses unusable ids) it gives the same verdict, rule and reason,
/// its trace ends in that verdict, and a hold's deadline is the ask rule's
/// own, else the configuration's.
fn check_explained(fixture: &Fixture, input: &HookInput, judgement: &Judgement<'_>) {
    let call = input.call.as_ref().expect("a call");
    let explained = explain(
        &fixture.settings,
        &fixture.rules,
        &fixture.config,
        &call.function_id,
        call.arguments.as_ref(),
    );
    let (verdict, rule, reason, deadline) = match judgement {
        Judgement::Continue { rule, .. } => (WireVerdict::Allow, *rule, None, None),
        Judgement::Deny { reason, rule } => (WireVerdict::Deny, *rule, Some(reason.as_str()), None),
        Judgement::Hold { ask: None, .. } if fixture.rules.is_lockdown() => (
            WireVerdict::NeedsApproval,
            Some(LOCKDOWN_RULE),
            None,
            fixture.config.pending_timeout_ms,
        ),
        Judgement::Hold { ask, .. } => (
            WireVerdict::NeedsApproval,
            ask.map(|a| a.rule_id),
            None,
            ask.and_then(|a| a.timeout_ms)
                .or(fixture.config.pending_timeout_ms),
        ),
    };
    assert_eq!(
        explained.verdict, verdict,
        "{}: {explained:?}",
        fixture.name
    );
    assert_eq!(explained.rule_id.as_deref(), rule, "{explained:?}");
    if let Some(reason) = reason {
        assert_eq!(explained.reason, reason);
    }
    assert_eq!(explained.deadline_ms, deadline, "{explained:?}");
    let last = explained
        .trace
        .last()
        .map(|s| serde_json::to_value(s.outcome).expect("outcome"));
    let expected = match verdict {
        WireVerdict::Allow => "allow",
        WireVerdict::Deny => "deny",
        WireVerdict::NeedsApproval => "hold",
    };
    assert_eq!(last, Some(json!(expected)), "{:?}", explained.trace);
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
        let judgement = judge(&hook, &fixture.settings, &fixture.rules);
        let out = output_of(&judgement, &hook, &session_reply);
        check_output(&out);
        let Some(call) = hook.call.as_ref() else {
            assert!(matches!(out, HookOutput::Deny { .. }));
            continue;
        };
        let ids_ok = is_valid_id(&hook.session_id) && is_valid_id(&call.id);
        let guarded = builtin_guard(&call.function_id, call.arguments.as_ref()).is_some()
            || fixture
                .extra_guards
                .iter()
                .any(|g| pattern_matches(g, &call.function_id));
        // The gate's own levers and unusable ids are denied, whatever the
        // settings and rules.
        if guarded || !ids_ok {
            assert!(
                matches!(out, HookOutput::Deny { .. }),
                "{}: {} → {out:?}",
                fixture.name,
                call.function_id
            );
        }
        if guarded {
            assert!(
                matches!(
                    judgement,
                    Judgement::Deny {
                        rule: Some(HUMAN_ONLY_RULE),
                        ..
                    }
                ),
                "{}: {judgement:?}",
                fixture.name
            );
        }
        if !guarded && ids_ok && fixture.rules.is_lockdown() {
            // The lockdown holds every other call, whatever the grants.
            assert!(
                matches!(judgement, Judgement::Hold { ask: None, .. }),
                "{}: {judgement:?}",
                fixture.name
            );
        } else if !guarded && ids_ok && fixture.mode == Mode::Full {
            // Full mode: only an ask rule (a human floor) holds, and under
            // first_match nothing denies.
            assert!(
                !matches!(judgement, Judgement::Hold { ask: None, .. }),
                "{}: {judgement:?}",
                fixture.name
            );
            if fixture.rules.precedence() == RulePrecedence::FirstMatch {
                assert!(
                    matches!(
                        judgement,
                        Judgement::Continue { .. } | Judgement::Hold { ask: Some(_), .. }
                    ),
                    "{}: {judgement:?}",
                    fixture.name
                );
            }
        }
        if let Judgement::Deny {
            reason,
            rule: Some(rule),
        } = &judgement
        {
            if *rule == OPAQUE_COMMAND_RULE {
                let prefix = format!(
                    "Permission denied by policy: {} is denied as {OPAQUE_COMMAND_RULE}",
                    call.function_id
                );
                assert!(reason.starts_with(&prefix), "{reason}");
            } else if *rule != HUMAN_ONLY_RULE {
                let prefix = format!(
                    "Permission denied by policy: {} matched rule {rule}",
                    call.function_id
                );
                assert!(reason.starts_with(&prefix), "{reason}");
            }
        }
        if ids_ok || guarded {
            check_explained(fixture, &hook, &judgement);
        }
    }
    dismantle(session_reply);
});
