//! The gate and the pending inbox, end to end (contract §2–§5, §7, §8):
//! hold → decide → release through the harness double.

use std::time::Duration;

use approval_gate_testkit::harness::{CallSpec, CallState, HarnessOptions};
use serde_json::{json, Value};

use approval_gate::Mode;

use crate::common::*;

async fn set_rules(scene: &Scene, value: Value) {
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    let want = serde_json::to_value(&value["rules"]).unwrap();
    assert!(
        eventually(WAIT, || serde_json::to_value(&w.config().rules).unwrap()
            == want)
        .await,
        "the worker never loaded {value}"
    );
}

fn spec(sid: &str, cid: &str, fid: &str, args: Value) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, fid, args)
}

async fn record_count(scene: &Scene) -> usize {
    scene
        .pending_in_state()
        .await
        .iter()
        .filter(|v| !v.is_null())
        .count()
}

#[tokio::test]
async fn gate_mode_matrix() {
    on_each_engine("gate_mode_matrix", |engine| async move {
        let scene = Scene::start(engine).await;
        // manual, no grant, no rule → hold with a record
        let out = scene.harness.call(spec("s_m", "c1", "demo::echo", json!({"x": 1}))).await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(out.held_by(), Some("approval::gate"));
        assert_eq!(record_count(&scene).await, 1);

        // full → continue without a record
        scene.ok("approval::set-mode", json!({"session_id": "s_f", "mode": "full"})).await;
        let out = scene.harness.call(spec("s_f", "c1", "demo::echo", json!({}))).await;
        assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
        assert_eq!(record_count(&scene).await, 1);

        // auto + always_allow → continue; the same under manual → hold
        scene.ok("approval::set-mode", json!({"session_id": "s_a", "mode": "auto"})).await;
        scene.ok("approval::add-always-allow", json!({"session_id": "s_a", "function_id": "demo::*"})).await;
        assert!(matches!(scene.harness.call(spec("s_a", "c1", "demo::echo", json!({}))).await, CallState::Completed { .. }));
        scene.ok("approval::set-mode", json!({"session_id": "s_a", "mode": "manual"})).await;
        assert!(scene.harness.call(spec("s_a", "c2", "demo::echo", json!({}))).await.is_held());

        // approved_always → continue in every mode
        for (i, mode) in ["manual", "auto", "full"].iter().enumerate() {
            let sid = format!("s_aa{i}");
            scene.ok("approval::set-mode", json!({"session_id": sid, "mode": mode})).await;
            scene.ok("approval::approve-always", json!({"session_id": sid, "function_id": "demo::echo"})).await;
            let out = scene.harness.call(spec(&sid, "c1", "demo::echo", json!({}))).await;
            assert!(matches!(out, CallState::Completed { .. }), "{mode}: {out:?}");
        }

        // "*" rule → continue; "!shell::run" → deny with the contract's reason
        set_rules(&scene, json!({"rules": ["!approval::*", "!shell::run", "*"]})).await;
        assert!(matches!(scene.harness.call(spec("s_r", "c1", "demo::echo", json!({}))).await, CallState::Completed { .. }));
        let out = scene.harness.call(spec("s_r", "c2", "shell::run", json!({"cmd": "ls"}))).await;
        assert_eq!(
            out.deny_reason(),
            Some("Permission denied by policy: shell::run matched rule !shell::run. This function is blocked by policy; try a different function.")
        );
        assert_eq!(scene.harness.target_runs("shell::run"), 0);

        // a modes: ["auto"] rule applies only in auto
        set_rules(
            &scene,
            json!({"rules": ["!approval::*", {"function": "demo::other", "action": "allow", "modes": ["auto"], "rule_id": "auto-only"}]}),
        )
        .await;
        scene.ok("approval::set-mode", json!({"session_id": "s_mo", "mode": "auto"})).await;
        assert!(matches!(scene.harness.call(spec("s_mo", "c1", "demo::other", json!({}))).await, CallState::Completed { .. }));
        scene.ok("approval::set-mode", json!({"session_id": "s_mo", "mode": "manual"})).await;
        assert!(scene.harness.call(spec("s_mo", "c2", "demo::other", json!({}))).await.is_held());

        // an args constraint allows one value and holds another
        set_rules(
            &scene,
            json!({"rules": ["!approval::*", {"function": "shell::run", "action": "allow", "args": {"cmd": {"equals": "ls"}}}]}),
        )
        .await;
        assert!(matches!(scene.harness.call(spec("s_x", "c1", "shell::run", json!({"cmd": "ls"}))).await, CallState::Completed { .. }));
        assert!(scene.harness.call(spec("s_x", "c2", "shell::run", json!({"cmd": "rm -rf /"}))).await.is_held());
    })
    .await;
}

#[tokio::test]
async fn gate_human_only_targets_are_denied_even_under_full_star_rules_and_star_grants() {
    on_each_engine("gate_human_only", |engine| async move {
        let scene = Scene::start(engine).await;
        set_rules(&scene, json!({"default_mode": "full", "rules": ["*"]})).await;
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_h", "mode": "full"}),
            )
            .await;
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_h", "function_id": "*"}),
            )
            .await;
        scene
            .ok(
                "approval::add-always-allow",
                json!({"session_id": "s_h", "function_id": "*"}),
            )
            .await;
        for (i, fid) in [
            "approval::set-mode",
            "approval::resolve",
            "configuration::set",
        ]
        .iter()
        .enumerate()
        {
            let out = scene
                .harness
                .call(spec(
                    "s_h",
                    &format!("c{i}"),
                    fid,
                    json!({"session_id": "s_h", "mode": "full"}),
                ))
                .await;
            let reason = out
                .deny_reason()
                .unwrap_or_else(|| panic!("{fid}: {out:?}"));
            assert!(reason.contains("which only a human may do"), "{reason}");
            assert!(reason.contains(fid), "{reason}");
        }
    })
    .await;
}

#[tokio::test]
async fn gate_bad_inputs_and_state_failures_deny_never_hold() {
    on_test_engine("gate_bad_inputs", |engine| async move {
        let scene = Scene::start(engine).await;
        let gate = |payload: Value| scene.ok("approval::gate", payload);
        let out = gate(json!({"point": "pre_trigger", "session_id": "s", "turn_id": "t"})).await;
        assert_eq!(out, json!({"decision": "deny", "reason": "Permission denied by policy: approval-gate received a pre_trigger hook input without a call payload"}));
        let out = gate(json!({"point": "pre_trigger", "session_id": "a/b", "turn_id": "t", "call": {"id": "c", "function_id": "demo::echo"}})).await;
        assert_eq!(out["decision"], "deny");
        assert!(out["reason"].as_str().unwrap().contains("must not contain \"/\""), "{out}");
        let out = gate(json!({"point": "pre_trigger", "session_id": "s", "turn_id": "t", "call": {"id": "c/1", "function_id": "demo::echo"}})).await;
        assert_eq!(out["decision"], "deny");
        let out = gate(json!({"point": "pre_trigger", "session_id": "", "turn_id": "t", "call": {"id": "c", "function_id": "demo::echo"}})).await;
        assert_eq!(out["decision"], "deny");

        // A state write failure on the hold path → deny naming the failure.
        scene.engine.test_engine().unwrap().faults().fail("state::set", "KV_DOWN", "kv down", Some(1));
        let out = scene.harness.call(spec("s_w", "c1", "demo::echo", json!({}))).await;
        let reason = out.deny_reason().unwrap_or_else(|| panic!("{out:?}"));
        assert!(reason.contains("could not record the held call"), "{reason}");
        assert_eq!(record_count(&scene).await, 0);
        assert!(scene.inbox().await.is_empty());
        assert_eq!(scene.harness.target_runs("demo::echo"), 0);
    })
    .await;
}

/// A session with a stored record is never decided with the defaults: with
/// `default_mode: full`, a session a human set to `manual` whose record
/// cannot be read is denied (`gate_unavailable`), never run ungated; the
/// gate and `approval::evaluate` say the same. Boot reads no settings.
#[tokio::test]
async fn gate_unknown_settings_deny_never_default() {
    on_test_engine("gate_unknown_settings", |engine| async move {
        // The brief's harness: the one-shot `state::get` faults below cannot
        // be aimed at one scope, and today's harness announces
        // `harness::ready` to the restarted worker, whose reconcile and
        // binding check read state in the background and could take a fault
        // meant for the settings read. Settings are judged before anything
        // generation-specific.
        let options = HarnessOptions::generation(approval_gate_testkit::harness::Generation::G1);
        let mut scene = Scene::start_with(engine, options).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"default_mode": "full", "rules": ["!approval::*"]}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().default_mode == Mode::Full).await);
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_manual", "mode": "manual"}),
            )
            .await;
        scene.stop_worker().await;
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        let engine = scene.engine.test_engine().unwrap();
        assert_eq!(
            engine.state_calls("state::list", "approval_settings"),
            0,
            "nothing ever lists the settings scope"
        );
        // The session's first call after boot cannot read its record.
        engine.faults().fail("state::get", "KV_DOWN", "kv down", Some(1));
        let out = scene
            .harness
            .call(spec("s_manual", "c1", "demo::echo", json!({})))
            .await;
        let reason = out
            .deny_reason()
            .unwrap_or_else(|| panic!("unknown settings must deny: {out:?}"));
        assert!(reason.starts_with("Approval gate unavailable (retry later): "), "{reason}");
        assert!(reason.contains("s_manual"), "{reason}");
        assert_eq!(scene.harness.target_runs("demo::echo"), 0);
        engine.faults().fail("state::get", "KV_DOWN", "kv down", Some(1));
        let ev = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s_manual", "function_id": "demo::echo"}),
            )
            .await;
        assert_eq!(ev["verdict"], "deny", "{ev}");
        assert_eq!(ev["rule_id"], "gate_unavailable", "{ev}");
        // Readable again: the stored manual mode holds the call.
        let out = scene
            .harness
            .call(spec("s_manual", "c2", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "the stored manual mode applies: {out:?}");
        // A session with nothing stored gets the defaults.
        let out = scene
            .harness
            .call(spec("s_new", "c3", "demo::echo", json!({})))
            .await;
        assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
    })
    .await;
}

each_generation! {
    async fn gate_hold_list_resolve_allow_runs_once_and_announces_once(generation) {
        on_each_engine(&label("gate_hold_resolve_allow", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            scene.sessions.put(
                "s_1",
                json!({"title": "Release prep", "description": "", "metadata": {"owner": "u_1"}}),
            );
            let created = scene
                .sink("created-all", "approval::pending-created", json!({}))
                .await;
            let resolved = scene
                .sink("resolved-all", "approval::pending-resolved", json!({}))
                .await;

            let out = scene
                .harness
                .call(spec(
                    "s_1",
                    "c_1",
                    "demo::echo",
                    json!({"msg": "hi", "api_key": "sk-123"}),
                ))
                .await;
            assert!(out.is_held());
            let inbox = scene.inbox().await;
            assert_eq!(inbox.len(), 1);
            let r = &inbox[0];
            assert_eq!(r["session_id"], "s_1");
            assert_eq!(r["turn_id"], "t_s_1");
            assert_eq!(r["function_call_id"], "c_1");
            assert_eq!(r["function_id"], "demo::echo");
            assert_eq!(r["kind"], "function");
            assert_eq!(
                r["arguments_excerpt"],
                json!({"msg": "hi", "api_key": "<redacted>"})
            );
            assert_eq!(r["session_title"], "Release prep");
            assert!(
                r.get("session_description").is_none(),
                "empty strings are dropped"
            );
            assert_eq!(r["session_metadata"], json!({"owner": "u_1"}));
            let got = scene
                .ok(
                    "approval::get-pending",
                    json!({"session_id": "s_1", "function_call_id": "c_1"}),
                )
                .await;
            assert_eq!(&got["pending"], r);

            let ev = created.wait_for(1, WAIT).await;
            assert_eq!(ev.len(), 1);
            assert_eq!(ev[0]["status"], "pending");
            assert_eq!(ev[0]["function_call_id"], "c_1");

            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_1", "function_call_id": "c_1", "decision": "allow"}),
                )
                .await;
            assert_eq!(out["resolved"], true);
            assert_eq!(scene.harness.target_runs("demo::echo"), 1);
            assert!(scene.inbox().await.is_empty());
            assert_eq!(record_count(&scene).await, 0);
            let ev = resolved.wait_for(1, WAIT).await;
            stay_quiet().await;
            let ev2 = resolved.events();
            assert_eq!(ev2.len(), 1, "{ev:?}");
            assert_eq!(ev2[0]["outcome"], "allow");
            assert_eq!(ev2[0]["session_metadata"], json!({"owner": "u_1"}));
            assert!(ev2[0]["resolved_at"].as_u64().unwrap() > 0);

            // A second resolve: resolved false, no event.
            let again = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_1", "function_call_id": "c_1", "decision": "allow"}),
                )
                .await;
            assert_eq!(again["resolved"], false);
            stay_quiet().await;
            assert_eq!(resolved.events().len(), 1);
            assert_eq!(scene.harness.target_runs("demo::echo"), 1);
            let none = scene
                .ok(
                    "approval::get-pending",
                    json!({"session_id": "s_1", "function_call_id": "c_1"}),
                )
                .await;
            assert!(none.is_null());
        })
        .await;
    }
}

each_generation! {
    async fn gate_resolve_deny_delivers_the_operator_reason_and_envelope(generation) {
        on_each_engine(&label("gate_resolve_deny", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let resolved = scene.sink("resolved-deny", "approval::pending-resolved", json!({})).await;
            assert!(scene.harness.call(spec("s_d", "c_d", "shell::run", json!({"cmd": "deploy", "password": "hunter2"}))).await.is_held());
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_d", "function_call_id": "c_d", "decision": "deny", "reason": "not on prod"}),
                )
                .await;
            assert_eq!(out["resolved"], true);
            assert_eq!(scene.harness.target_runs("shell::run"), 0);
            let state = scene.harness.state("s_d", "c_d").unwrap();
            let result = state.result().unwrap_or_else(|| panic!("{state:?}")).clone();
            let text = result.to_string();
            assert!(text.contains("not on prod"), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
            let entry = scene.harness.entries().into_iter().find(|e| e.entry_id == "e_t_s_d_c_d").expect("delivered entry");
            let _ = entry;
            let req = scene.harness.resolve_requests().into_iter().find(|r| r["function_call_id"] == "c_d").unwrap();
            assert_eq!(req["action"], "deliver");
            assert_eq!(req["is_error"], true);
            assert_eq!(req["content"], json!([{"type": "text", "text": "Denied by a human: not on prod"}]));
            let env = &req["details"];
            assert_eq!(env["schema_version"], 1);
            assert_eq!(env["status"], "denied");
            assert_eq!(env["denied_by"], "user");
            assert_eq!(env["function_id"], "shell::run");
            assert_eq!(env["reason"], "Denied by a human: not on prod");
            assert_eq!(env["args_excerpt"]["password"], "<redacted>");
            let ev = resolved.wait_for(1, WAIT).await;
            assert_eq!(ev[0]["outcome"], "deny");
            assert_eq!(ev[0]["reason"], "not on prod");

            // No reason → "Rejected by operator."
            assert!(scene.harness.call(spec("s_d", "c_e", "shell::run", json!({}))).await.is_held());
            scene
                .ok("approval::resolve", json!({"session_id": "s_d", "function_call_id": "c_e", "decision": "deny", "reason": null}))
                .await;
            let req = scene.harness.resolve_requests().into_iter().find(|r| r["function_call_id"] == "c_e").unwrap();
            assert_eq!(req["content"][0]["text"], "Denied by a human: Rejected by operator.");
            let ev = resolved.wait_for(2, WAIT).await;
            assert!(ev[1].get("reason").is_none(), "the operator gave no reason: {}", ev[1]);
        })
        .await;
    }
}

each_generation! {
    async fn gate_redelivered_hook_holds_once_and_announces_once(generation) {
        on_each_engine(&label("gate_redelivery", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let created = scene
                .sink("created-redeliver", "approval::pending-created", json!({}))
                .await;
            for _ in 0..3 {
                assert!(scene
                    .harness
                    .call(spec("s_r", "c_r", "demo::echo", json!({})))
                    .await
                    .is_held());
            }
            assert_eq!(record_count(&scene).await, 1);
            assert_eq!(scene.inbox().await.len(), 1);
            created.wait_for(1, WAIT).await;
            stay_quiet().await;
            assert_eq!(created.events().len(), 1);
        })
        .await;
    }
}

each_generation! {
    async fn gate_unknown_resolve_is_not_an_error(generation) {
        on_each_engine(&label("gate_unknown_resolve", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s", "function_call_id": "nope", "decision": "allow"}),
                )
                .await;
            assert_eq!(out, json!({"resolved": false}));
            assert!(scene.harness.resolve_requests().is_empty());
            let err = scene
                .call(
                    "approval::resolve",
                    json!({"session_id": "s", "function_call_id": "x", "decision": "maybe"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "approval/invalid_payload");
        })
        .await;
    }
}

each_generation! {
    async fn gate_harness_failure_keeps_the_record_and_a_retry_succeeds(generation) {
        on_test_engine(&label("gate_harness_failure", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let resolved = scene
                .sink("resolved-retry", "approval::pending-resolved", json!({}))
                .await;
            assert!(scene
                .harness
                .call(spec("s_h", "c_h", "demo::echo", json!({})))
                .await
                .is_held());
            scene.engine.test_engine().unwrap().faults().fail(
                "harness::function::resolve",
                "DOWN",
                "harness down",
                Some(1),
            );
            let err = scene
                .call(
                    "approval::resolve",
                    json!({"session_id": "s_h", "function_call_id": "c_h", "decision": "allow"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "approval/harness_unavailable");
            assert!(message_of(&err).starts_with("approval/harness_unavailable: "));
            assert_eq!(scene.inbox().await.len(), 1, "the record stays for a retry");
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_h", "function_call_id": "c_h", "decision": "allow"}),
                )
                .await;
            assert_eq!(out["resolved"], true);
            assert_eq!(scene.harness.target_runs("demo::echo"), 1);
            resolved.wait_for(1, WAIT).await;
            stay_quiet().await;
            assert_eq!(resolved.events().len(), 1);
        })
        .await;
    }
}

#[tokio::test]
async fn gate_notification_filters_receive_exactly_their_records() {
    on_each_engine("gate_notification_filters", |engine| async move {
        let scene = Scene::start(engine).await;
        scene.sessions.put("s_u1", json!({"metadata": {"owner": "u_1", "team": "a"}}));
        scene.sessions.put("s_u2", json!({"metadata": {"owner": "u_2"}}));
        let all = scene.sink("n-all", "approval::pending-created", json!({})).await;
        let one = scene.sink("n-session", "approval::pending-created", json!({"session_id": "s_u2"})).await;
        let owner = scene.sink("n-owner", "approval::pending-created", json!({"metadata": {"owner": "u_1"}})).await;
        assert!(scene.harness.call(spec("s_u1", "c1", "demo::echo", json!({}))).await.is_held());
        assert!(scene.harness.call(spec("s_u2", "c1", "demo::echo", json!({}))).await.is_held());
        assert!(scene.harness.call(spec("s_none", "c1", "demo::echo", json!({}))).await.is_held());
        all.wait_for(3, WAIT).await;
        stay_quiet().await;
        let sids = |s: &Sink| {
            let mut v: Vec<String> = s.events().iter().map(|e| e["session_id"].as_str().unwrap().to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(sids(&all), vec!["s_none", "s_u1", "s_u2"]);
        assert_eq!(sids(&one), vec!["s_u2"]);
        assert_eq!(sids(&owner), vec!["s_u1"]);

        // A binding with an unknown key is rejected by the provider.
        let err = scene
            .call(
                "engine::register_trigger",
                json!({"trigger_type": "approval::pending-created", "function_id": "n-all::on-event", "config": {"sesion_id": "x"}}),
            )
            .await
            .unwrap_err();
        assert!(message_of(&err).contains("invalid binding config"), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn gate_configuration_change_applies_to_the_next_decision() {
    on_each_engine("gate_config_change", |engine| async move {
        let scene = Scene::start(engine).await;
        assert!(scene
            .harness
            .call(spec("s_c", "c1", "demo::echo", json!({})))
            .await
            .is_held());
        set_rules(&scene, json!({"rules": ["!approval::*", "demo::*"]})).await;
        assert!(matches!(
            scene
                .harness
                .call(spec("s_c", "c2", "demo::echo", json!({})))
                .await,
            CallState::Completed { .. }
        ));
        set_rules(&scene, json!({"rules": ["!approval::*", "!demo::*"]})).await;
        assert!(scene
            .harness
            .call(spec("s_c", "c3", "demo::echo", json!({})))
            .await
            .deny_reason()
            .is_some());
    })
    .await;
}

#[tokio::test]
async fn gate_evaluate_reports_without_writing() {
    on_each_engine("gate_evaluate", |engine| async move {
        let scene = Scene::start(engine).await;
        let out = scene.ok("approval::evaluate", json!({"session_id": "s_e", "function_id": "demo::echo"})).await;
        assert_eq!(out["verdict"], "needs_approval");
        let out = scene.ok("approval::evaluate", json!({"session_id": "s_e", "function_id": "approval::resolve"})).await;
        assert_eq!(out["verdict"], "deny");
        assert_eq!(out["rule_id"], "human_only_function");
        scene.ok("configuration::set", json!({"id": "approval-gate", "value": {"rules": ["demo::*", {"function": "x", "action": "allow", "args": {"a": {"matches": "("}}}]}})).await;
        let mut out = Value::Null;
        for _ in 0..100 {
            out = scene.ok("approval::evaluate", json!({"session_id": "s_e", "function_id": "demo::echo"})).await;
            if out["rule_errors"].is_array() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(out["verdict"], "needs_approval", "a rule set that does not compile is refused whole: demo::* never applies");
        assert!(out["rule_errors"][0].as_str().unwrap().contains("rule 1"), "{out}");
        assert!(scene.inbox().await.is_empty());
        assert_eq!(record_count(&scene).await, 0);
        assert!(scene.scope("approval_settings").await.is_empty());
    })
    .await;
}

each_generation! {
    async fn gate_turn_and_session_purges_abort_records(generation) {
        on_each_engine(&label("gate_purges", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let resolved = scene
                .sink("purge-events", "approval::pending-resolved", json!({}))
                .await;
            assert!(scene
                .harness
                .call(CallSpec::new("s_p", "t_1", "c1", "demo::echo", json!({})))
                .await
                .is_held());
            assert!(scene
                .harness
                .call(CallSpec::new("s_p", "t_2", "c2", "demo::echo", json!({})))
                .await
                .is_held());
            assert!(scene
                .harness
                .call(CallSpec::new("s_q", "t_3", "c3", "demo::echo", json!({})))
                .await
                .is_held());
            scene
                .ok(
                    "approval::set-mode",
                    json!({"session_id": "s_q", "mode": "auto"}),
                )
                .await;
            scene.harness.complete_turn("s_p", "t_1", "cancelled").await;
            assert!(eventually(WAIT, || resolved.events().len() == 1).await);
            assert_eq!(resolved.events()[0]["function_call_id"], "c1");
            assert_eq!(resolved.events()[0]["outcome"], "aborted");
            scene.sessions.delete("s_q").await;
            assert!(eventually(WAIT, || resolved.events().len() == 2).await);
            assert_eq!(resolved.events()[1]["function_call_id"], "c3");
            let inbox = scene.inbox().await;
            assert_eq!(inbox.len(), 1);
            assert_eq!(inbox[0]["function_call_id"], "c2");
            let g = scene
                .ok("approval::get-settings", json!({"session_id": "s_q"}))
                .await;
            assert_eq!(g["source"], "defaults", "session deletion purges settings");
        })
        .await;
    }
}

#[tokio::test]
async fn gate_list_pending_orders_filters_and_pages() {
    on_each_engine("gate_list_pending", |engine| async move {
        let scene = Scene::start(engine).await;
        scene
            .sessions
            .put("s_b", json!({"metadata": {"owner": "u_1"}}));
        for i in 0..7 {
            let sid = if i % 2 == 0 { "s_a" } else { "s_b" };
            assert!(scene
                .harness
                .call(spec(sid, &format!("c{i}"), "demo::echo", json!({"i": i})))
                .await
                .is_held());
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = json!({"limit": 3});
            if let Some(c) = &cursor {
                req["cursor"] = json!(c);
            }
            let page = scene.ok("approval::list-pending", req).await;
            let items = page["pending"].as_array().unwrap().clone();
            assert!(items.len() <= 3);
            seen.extend(items);
            match page.get("next_cursor").and_then(Value::as_str) {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert_eq!(seen.len(), 7);
        let keys: Vec<(u64, String, String)> = seen
            .iter()
            .map(|r| {
                (
                    r["pending_at"].as_u64().unwrap(),
                    r["session_id"].as_str().unwrap().into(),
                    r["function_call_id"].as_str().unwrap().into(),
                )
            })
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        let b = scene
            .ok("approval::list-pending", json!({"session_id": "s_b"}))
            .await;
        assert_eq!(b["pending"].as_array().unwrap().len(), 3);
        let m = scene
            .ok(
                "approval::list-pending",
                json!({"metadata": {"owner": "u_1"}}),
            )
            .await;
        assert_eq!(m["pending"].as_array().unwrap().len(), 3);
        let m = scene
            .ok("approval::list-pending", json!({"metadata": {}}))
            .await;
        assert_eq!(m["pending"].as_array().unwrap().len(), 7);
        let one = scene
            .ok("approval::list-pending", json!({"limit": 0}))
            .await;
        assert_eq!(
            one["pending"].as_array().unwrap().len(),
            1,
            "limit clamps to 1"
        );
        let err = scene
            .call("approval::list-pending", json!({"cursor": "%%%"}))
            .await
            .unwrap_err();
        assert_eq!(message_of(&err), "approval/invalid_payload: invalid cursor");
    })
    .await;
}
