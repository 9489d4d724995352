//! The configuration entry as a whole (contract §26.2, §27.2): a value that
//! cannot be used whole never applies in part, on a reload or at boot; the
//! entry the worker follows is the one `III_CONFIG_NAME` names.

use std::time::Duration;

use approval_gate::ApprovalConfig;
use approval_gate_testkit::harness::CallSpec;
use serde_json::{json, Value};

use crate::common::*;

/// `approval::health`'s `config` once its errors mention `needle` (polled).
async fn refused_with(scene: &Scene, needle: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = scene.ok("approval::health", json!({})).await["config"].clone();
        if last["ok"] == false && last["rule_errors"].to_string().contains(needle) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("health.config never reported {needle:?}: {last}");
}

/// The agent of `s1` calls `function_id`; whether the gate let it run.
async fn runs(scene: &Scene, call_id: &str, function_id: &str) -> bool {
    let out = scene
        .harness
        .call(CallSpec::new("s1", "t1", call_id, function_id, json!({})))
        .await;
    match out.deny_reason() {
        Some(reason) => {
            assert!(
                reason.contains("which only a human may do"),
                "{function_id} denied for another reason: {reason}"
            );
            false
        }
        None => {
            assert!(out.result().is_some(), "{function_id}: {out:?}");
            true
        }
    }
}

#[tokio::test]
async fn rule_26_2_a_value_with_one_bad_field_never_applies_in_part() {
    on_each_engine("config_all_or_nothing", |engine| async move {
        let mut scene = Scene::start(engine).await;
        let good = json!({"default_mode": "full", "rules": ["!approval::*"],
            "human_only_extra": ["secrets::*"], "grant_reask_limit": 2});
        scene
            .ok("configuration::set", json!({"id": "approval-gate", "value": good}))
            .await;
        let in_force = ApprovalConfig::from_value(&good).unwrap();
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config() == in_force).await);
        assert!(!runs(&scene, "c0", "secrets::get").await, "guarded");
        assert!(runs(&scene, "c1", "demo::echo").await, "full mode");

        // Each value changes the mode and a count too, and has one field
        // the worker cannot use (each passes the engine's schema; a bad
        // `reviewer` or deadline does not, and is refused by the worker
        // the same way when it arrives another way: `config::tests`).
        let bad = [
            ("human_only_extra 0: invalid glob", json!({"human_only_extra": ["secrets::{get,put"]})),
            ("decision_log", json!({"decision_log": {"function_id": "  "}})),
            ("suggest_prefixes 0", json!({"suggest_prefixes": ["git status; curl x | sh"]})),
            ("protected_paths 0", json!({"protected_paths": ["**/config/{a,b"]})),
            ("protected_path_functions 0", json!({"protected_path_functions": ["shell::[x"]})),
        ];
        for (i, (needle, field)) in bad.iter().enumerate() {
            let mut value = json!({"default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 9});
            for (k, v) in field.as_object().unwrap() {
                value[k] = v.clone();
            }
            scene
                .ok("configuration::set", json!({"id": "approval-gate", "value": value}))
                .await;
            let health = refused_with(&scene, needle).await;
            let w = scene.worker.as_ref().unwrap();
            assert_eq!(w.config(), in_force, "{needle}: nothing of the value applies");
            assert!(!w.lockdown(), "{needle}");
            let ev = scene
                .ok("approval::evaluate", json!({"session_id": "s1", "function_id": "secrets::get"}))
                .await;
            assert_eq!(ev["verdict"], "deny", "{needle}: {ev}");
            assert!(ev["rule_errors"].to_string().contains(needle), "{ev}");
            assert!(!runs(&scene, &format!("g{i}"), "secrets::get").await, "{needle}: the guard stays");
            assert!(runs(&scene, &format!("e{i}"), "demo::echo").await, "{needle}: full mode stays: {health}");
        }

        // A restart reading the refused value starts from the last good
        // one, not in lockdown, and reports the refusal.
        scene.restart_worker().await;
        let w = scene.worker.as_ref().unwrap();
        assert_eq!(w.config(), in_force);
        assert!(!w.lockdown());
        refused_with(&scene, "protected_path_functions 0").await;
        assert!(!runs(&scene, "r1", "secrets::get").await);

        // A value that can be used applies whole, and nothing is reported.
        let fixed = json!({"default_mode": "manual", "rules": ["!approval::*", "demo::*"],
            "human_only_extra": ["secrets::{get,put}"], "suggest_prefixes": ["git status", "ls"]});
        scene
            .ok("configuration::set", json!({"id": "approval-gate", "value": fixed}))
            .await;
        let w = scene.worker.as_ref().unwrap();
        let fixed = ApprovalConfig::from_value(&fixed).unwrap();
        assert!(eventually(WAIT, || w.config() == fixed).await);
        let health = scene.ok("approval::health", json!({})).await;
        assert_eq!(health["config"]["ok"], true, "{health}");
        assert!(!runs(&scene, "f1", "secrets::put").await);
    })
    .await;
}

/// A worker started with `III_CONFIG_NAME=approval-gate-b` registers that
/// entry (with the console's form named in its metadata), follows it on
/// every update, keeps its last good value under its own key, and says so
/// through `approval-gate::configuration-id`; the default entry is not its
/// business, and the new function is a human's only (contract §27.2).
#[tokio::test]
async fn rule_27_2_iii_config_name_names_the_entry_the_worker_follows() {
    on_each_engine("config_identity", |engine| async move {
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        let _targets = approval_gate_testkit::targets::TargetWorker::start(&engine.url(), &["demo::echo"]).await;
        let probe = engine.client("probe").await;
        let call = |function_id: &'static str, payload: Value| {
            let probe = &probe;
            async move {
                approval_gate_testkit::fixture::call(probe, function_id, payload.clone())
                    .await
                    .unwrap_or_else(|e| panic!("{function_id} {payload}: {e}"))
            }
        };
        let mut worker = approval_gate_testkit::worker::WorkerProcess::spawn_with(
            BIN.as_ref(),
            &engine.url(),
            &[],
            &[("III_CONFIG_NAME", "approval-gate-b")],
            Duration::from_secs(60),
        )
        .await;
        let id = call("approval-gate::configuration-id", json!({})).await;
        assert_eq!(id, json!({"id": "approval-gate-b"}));
        let listed = call("configuration::list", json!({})).await;
        let entries = listed["configurations"].as_array().cloned().unwrap_or_default();
        let own = entries
            .iter()
            .find(|e| e["id"] == "approval-gate-b")
            .unwrap_or_else(|| panic!("approval-gate-b is not registered: {listed}"));
        assert_eq!(own["metadata"]["ui_form"], "approval-gate", "{own}");
        assert!(
            !entries.iter().any(|e| e["id"] == "approval-gate"),
            "the default entry is not registered: {listed}"
        );

        // Its entry's updates are followed.
        call(
            "configuration::set",
            json!({"id": "approval-gate-b", "value": {"default_mode": "auto", "rules": ["!approval::*", "demo::*"]}}),
        )
        .await;
        let evaluate = || call("approval::evaluate", json!({"session_id": "s_b", "function_id": "demo::echo"}));
        let mut followed = false;
        for _ in 0..100 {
            if evaluate().await["rule_id"] == "demo::*" {
                followed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(followed, "the update of approval-gate-b was not followed");
        let kept = call("state::get", json!({"scope": "approval_config", "key": "last_good/approval-gate-b"})).await;
        assert_eq!(kept["config"]["default_mode"], "auto", "{kept}");
        let default_kept = call("state::get", json!({"scope": "approval_config", "key": "last_good"})).await;
        assert!(default_kept.is_null(), "{default_kept}");

        // Another entry's value changes nothing here.
        call(
            "configuration::register",
            json!({"id": "approval-gate", "name": "other", "description": "another instance's",
                   "schema": {"type": "object"}, "initial_value": {"default_mode": "full", "rules": []}}),
        )
        .await;
        call("configuration::set", json!({"id": "approval-gate", "value": {"default_mode": "full", "rules": ["*"]}})).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let settings = call("approval::get-settings", json!({"session_id": "s_unseen"})).await;
        assert_eq!(settings["settings"]["mode"], "auto", "{settings}");
        assert_eq!(evaluate().await["rule_id"], "demo::*");

        // An agent cannot ask it: the approval-gate:: family is a human's.
        let out = harness
            .call(CallSpec::new("s_b", "t_b", "c_b", "approval-gate::configuration-id", json!({})))
            .await;
        let reason = out.deny_reason().unwrap_or_else(|| panic!("{out:?}"));
        assert!(reason.contains("which only a human may do"), "{reason}");
        worker.kill();
    })
    .await;
}

#[test]
fn rule_27_2_a_config_name_the_engine_cannot_take_stops_the_worker() {
    let out = std::process::Command::new(BIN)
        .args(["--url", "ws://127.0.0.1:9", "--connect-timeout", "1"])
        .env("III_CONFIG_NAME", "Approval Gate")
        .env("OTEL_ENABLED", "false")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("III_CONFIG_NAME=\"Approval Gate\" is not a configuration id"),
        "{stderr}"
    );
}
