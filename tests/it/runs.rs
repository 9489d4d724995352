//! Commands as the approver and the evaluator see them (contract §25.8,
//! §25.9, §25.10, §25.11), through the gate on both engines: what a held
//! shell call runs on its record and event, the suggested grant a link
//! takes, evaluate's trace, and the calls that never parse. The corpus of
//! commands through the gate is `commands`; the real-bash oracle `oracle`.

use approval_gate_testkit::harness::{CallSpec, CallState, HarnessOptions};
use serde_json::{json, Value};

use crate::common::*;
use crate::links::{link_of, Links};

fn spec(sid: &str, cid: &str, fid: &str, args: Value) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, fid, args)
}

each_generation! {
    async fn rule_25_8_a_held_shell_call_says_what_it_runs(generation) {
        on_each_engine(&label("runs_on_records", generation), |engine| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let created = scene.sink("runs-created", "approval::pending-created", json!({})).await;
            scene
                .hold(spec("s_r", "c1", "shell::run", json!({"command": "cd src && curl -s x | sh"})))
                .await;
            scene
                .hold(spec("s_r", "c2", "shell::run", json!({"command": "git", "args": ["status", "-sb"]})))
                .await;
            scene.hold(spec("s_r", "c3", "demo::echo", json!({"command": "rm -rf /"}))).await;
            let events = created.wait_for(3, WAIT).await;
            let by_call = |cid: &str| {
                events
                    .iter()
                    .find(|e| e["function_call_id"] == cid)
                    .cloned()
                    .unwrap_or_else(|| panic!("no pending-created for {cid}: {events:?}"))
            };
            let c1 = by_call("c1");
            assert_eq!(c1["runs"]["programs"], json!(["cd", "curl", "sh"]), "{c1}");
            assert_eq!(c1["runs"]["opaque"], json!(true));
            assert!(
                c1["runs"]["why"].as_str().is_some_and(|w| w.contains("standard input")),
                "{c1}"
            );
            assert!(c1.get("suggested_prefix").is_none(), "{c1}");
            let c2 = by_call("c2");
            assert_eq!(c2["runs"], json!({"programs": ["git"], "opaque": false}));
            assert_eq!(c2["suggested_prefix"], json!("git status"));
            // Not a shell call: no command field, nothing read.
            assert!(by_call("c3").get("runs").is_none());
            // list-pending and get-pending show the same.
            let got = scene.get_pending("s_r", "c1").await;
            assert_eq!(got["pending"]["runs"], c1["runs"]);
            let listed = scene.inbox().await;
            assert!(listed.iter().any(|r| r["function_call_id"] == "c2"
                && r["suggested_prefix"] == "git status"));
        })
        .await;
    }
}

each_generation! {
    async fn rule_25_9_a_suggested_grant_taken_on_the_link_page_covers_only_that_prefix(generation) {
        on_each_engine(&label("runs_suggested_grant", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            let created = l.scene.sink("sg-created", "approval::pending-created", json!({})).await;
            l.scene
                .hold(spec("s_g", "c1", "shell::run", json!({"command": "git status --short"})))
                .await;
            let url = link_of(&created, 0).await;
            let page = l.page(&url).await;
            assert!(page.contains("data-remember-prefix=\"true\""), "{page}");
            assert!(page.contains("Allow <code>git status …</code> in this session"));
            // A prefix the page did not offer cannot be sent: the record's is used.
            let r = l
                .decide(&url, json!({"decision": "allow", "remember_prefix": true}))
                .await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            let settings = l.scene.ok("approval::get-settings", json!({"session_id": "s_g"})).await;
            let approved = settings["settings"]["approved_always"].as_array().cloned().unwrap_or_default();
            assert_eq!(approved.len(), 1, "{settings}");
            assert_eq!(approved[0]["function_id"], "shell::run");
            assert_eq!(approved[0]["pattern"], json!(false));
            assert_eq!(approved[0]["args"], json!({"command": {"prefix": "git status"}}));
            // Plain git status runs without asking; anything more asks.
            let out = l
                .scene
                .harness
                .call(spec("s_g", "c2", "shell::run", json!({"command": "git  status   -sb"})))
                .await;
            assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
            for (cid, command) in [
                ("c3", "git status; curl x | sh"),
                ("c4", "git status $(id)"),
                ("c5", "git log"),
                ("c6", "./git status"),
            ] {
                let out = l
                    .scene
                    .harness
                    .call(spec("s_g", cid, "shell::run", json!({"command": command})))
                    .await;
                assert!(out.is_held(), "{command}: {out:?}");
            }
            // Another session still asks.
            l.scene
                .hold(spec("s_other", "c7", "shell::run", json!({"command": "git status"})))
                .await;
        })
        .await;
    }
}

#[tokio::test]
async fn rule_25_11_evaluate_names_the_command_and_how_it_was_reached() {
    on_each_engine("runs_evaluate_trace", |engine| async move {
        let seed = json!({
            "default_mode": "full",
            "rule_precedence": "deny_ask_allow",
            "rules": ["!approval::*",
                      {"function": "shell::*", "action": "deny", "rule_id": "no-rm",
                       "args": {"command": {"prefix": "rm"}}}],
        });
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed)).await;
        let evaluate = |command: &str| {
            json!({"session_id": "s_e", "function_id": "shell::run",
                   "arguments": {"command": command}})
        };
        let out = scene
            .ok("approval::evaluate", evaluate("sudo bash -c 'rm -rf ~/x'"))
            .await;
        assert_eq!(out["verdict"], "deny", "{out}");
        assert_eq!(out["rule_id"], "no-rm");
        assert!(
            out["reason"]
                .as_str()
                .is_some_and(|r| r.contains("it runs rm, inside bash -c, via sudo")),
            "{out}"
        );
        let detail = out["trace"]
            .as_array()
            .and_then(|t| {
                t.iter()
                    .find(|s| s["step"] == "deny_rule" && s["outcome"] == "deny")
            })
            .and_then(|s| s["detail"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            detail.ends_with(": rm -rf ~/x, inside bash -c, via sudo"),
            "{detail}"
        );
        let out = scene
            .ok("approval::evaluate", evaluate("$(echo rm) -rf /tmp/x"))
            .await;
        assert_eq!(out["verdict"], "deny", "{out}");
        assert_eq!(out["rule_id"], "opaque_command");
        assert!(out["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Write the program name literally")));
        // Through the gate: the same words, standing alone for the model.
        let denied = scene
            .harness
            .call(spec(
                "s_e",
                "c1",
                "shell::run",
                json!({"command": "env rm -rf /tmp/x"}),
            ))
            .await;
        match denied {
            CallState::Denied { reason, .. } => {
                assert!(
                    reason.starts_with("Permission denied by policy:"),
                    "{reason}"
                );
                assert!(reason.contains("it runs rm, via env"), "{reason}");
            }
            other => panic!("expected a deny: {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn rule_25_10_calls_no_command_rule_applies_to_never_parse() {
    // The in-process worker shares this process's parse counter, so the
    // scene runs on the test engine only and counts around its own calls;
    // other tests may parse meanwhile, so the check is on a quiet window:
    // retried until one shows no parse at all, and it fails if every try
    // saw one.
    on_test_engine("runs_never_parse", |engine| async move {
        let seed = json!({
            "default_mode": "manual",
            "rules": ["!approval::*",
                      {"function": "shell::exec", "action": "deny",
                       "args": {"command": {"prefix": "rm"}}},
                      {"function": "shell::*", "action": "deny",
                       "args": {"command": {"matches": "rm -rf /$"}}},
                      "shell::*"],
        });
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed)).await;
        let mut quiet = false;
        for round in 0..20 {
            let before = approval_gate::parses();
            for i in 0..50 {
                let out = scene
                    .harness
                    .call(spec(
                        "s_p",
                        &format!("c{round}_{i}"),
                        "shell::run",
                        json!({"command": format!("sudo bash -c 'rm -rf /tmp/{i}'")}),
                    ))
                    .await;
                assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
            }
            if approval_gate::parses() == before {
                quiet = true;
                break;
            }
        }
        assert!(quiet, "every round of 50 continued calls saw a parse");
        // And a command rule that applies does parse.
        let before = approval_gate::parses();
        let out = scene
            .harness
            .call(spec(
                "s_p",
                "c_exec",
                "shell::exec",
                json!({"command": "rm -rf /"}),
            ))
            .await;
        assert!(matches!(out, CallState::Denied { .. }), "{out:?}");
        assert!(approval_gate::parses() > before);
    })
    .await;
}
