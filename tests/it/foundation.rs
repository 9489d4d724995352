//! The foundation: the configuration entry (contract §9), the settings RPCs
//! (contract §1, §2), the process (contract §10).

use std::time::Duration;

use approval_gate::{load_seed, ApprovalConfig, Snapshot};
use approval_gate_testkit::fixture::call;
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;

fn defaults() -> Value {
    json!({"default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 3})
}

#[tokio::test]
async fn config_fresh_engine_gets_the_defaults_and_the_schema_rejects_unknown_keys() {
    on_each_engine("config_fresh_engine", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        let got = call(&probe, "configuration::get", json!({"id": "approval-gate"}))
            .await
            .unwrap();
        assert_eq!(got["value"], defaults());
        let err = call(
            &probe,
            "configuration::set",
            json!({"id": "approval-gate", "value": {"default_mod": "auto"}}),
        )
        .await
        .unwrap_err();
        assert_eq!(code_of(&err), "SCHEMA_INVALID");
        let schema = call(
            &probe,
            "configuration::schema",
            json!({"id": "approval-gate"}),
        )
        .await
        .unwrap();
        let text = schema.to_string();
        assert!(
            text.contains("\"title\"")
                && text.contains("\"examples\"")
                && text.contains("\"default\""),
            "{text}"
        );
    })
    .await;
}

/// The engine checks `configuration::set` with the schema derived from the
/// configuration types: a rule object's deadline under a second, an action
/// it does not know, an empty suggested prefix or a gate priority past the
/// safe integers is refused before it is stored; a rule object with every
/// field, `runs` included, is taken.
#[tokio::test]
async fn rule_26_2_the_engine_refuses_what_the_derived_schema_refuses() {
    on_each_engine("config_derived_schema", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        for value in [
            json!({"rules": [{"function": "deploy::*", "action": "ask", "timeout_ms": 999}]}),
            json!({"rules": [{"function": "deploy::*", "action": "maybe"}]}),
            json!({"rules": [{"function": "a", "action": "allow", "examples": {"match": [{"function_id": ""}]}}]}),
            json!({"suggest_prefixes": [""]}),
            json!({"gate_priority": 9_007_199_254_740_992_i64}),
        ] {
            let err = call(&probe, "configuration::set", json!({"id": "approval-gate", "value": value}))
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "SCHEMA_INVALID", "{value}");
        }
        let good = json!({"rules": ["!approval::*", {
            "function": "shell::exec", "action": "ask", "rule_id": "no-rm", "modes": ["auto", "full"],
            "args": {"command": {"runs": "rm"}}, "timeout_ms": 1000, "escalate_after_ms": null,
            "examples": {"match": [{"function_id": "shell::exec", "arguments": {"command": "rm -rf /tmp/x"}}],
                         "no_match": [{"function_id": "shell::exec", "arguments": {"command": "ls"}}]}}]});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": good}))
            .await
            .unwrap();
        // The bounds reach the engine exactly: the largest safe priority is taken.
        let edge = json!({"gate_priority": 9_007_199_254_740_991_i64});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": edge}))
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test]
async fn config_operator_value_survives_a_worker_restart() {
    on_each_engine("config_operator_value_survives", |engine| async move {
        let probe = engine.client("probe").await;
        let worker = start_in_process(&engine).await;
        let value = json!({"default_mode": "auto", "rules": ["!approval::*", "demo::*"], "grant_reask_limit": 1});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": value})).await.unwrap();
        worker.shutdown(Duration::from_secs(2)).await;
        let worker = start_in_process_with(&engine, Some(defaults())).await;
        let got = call(&probe, "configuration::get", json!({"id": "approval-gate"})).await.unwrap();
        assert_eq!(got["value"], value, "a restart (even with a seed) must not overwrite a stored value");
        assert_eq!(worker.config().grant_reask_limit, 1);
    })
    .await;
}

#[tokio::test]
async fn config_missing_rules_are_backfilled_and_other_fields_kept() {
    on_each_engine("config_missing_rules_backfilled", |engine| async move {
        let probe = engine.client("probe").await;
        // An older entry: registered with a schema that allowed no rules.
        call(
            &probe,
            "configuration::register",
            json!({"id": "approval-gate", "name": "old", "description": "old", "schema": {"type": "object"},
                   "initial_value": {"default_mode": "full", "grant_reask_limit": 7}}),
        )
        .await
        .unwrap();
        let _worker = start_in_process(&engine).await;
        let got = call(&probe, "configuration::get", json!({"id": "approval-gate"})).await.unwrap();
        assert_eq!(got["value"], json!({"default_mode": "full", "grant_reask_limit": 7, "rules": ["!approval::*"]}));
    })
    .await;
}

#[tokio::test]
async fn config_seed_applies_only_when_nothing_is_stored() {
    on_each_engine(
        "config_seed_applies_only_when_nothing_stored",
        |engine| async move {
            let probe = engine.client("probe").await;
            let seed =
                json!({"default_mode": "auto", "rules": ["!approval::*"], "grant_reask_limit": 2});
            let worker = start_in_process_with(&engine, Some(seed.clone())).await;
            let got = call(&probe, "configuration::get", json!({"id": "approval-gate"}))
                .await
                .unwrap();
            assert_eq!(got["value"], seed);
            worker.shutdown(Duration::from_secs(2)).await;
            let other = json!({"default_mode": "full", "rules": [], "grant_reask_limit": 0});
            let _worker = start_in_process_with(&engine, Some(other)).await;
            let got = call(&probe, "configuration::get", json!({"id": "approval-gate"}))
                .await
                .unwrap();
            assert_eq!(got["value"], seed, "the second seed must be ignored");
        },
    )
    .await;
}

#[tokio::test]
async fn config_seed_file_is_yaml_with_env_expansion() {
    on_each_engine("config_seed_file", |engine| async move {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed.yaml");
        std::fs::write(
            &path,
            "default_mode: ${AG_SEED_MODE:auto}\ngrant_reask_limit: 5\n",
        )
        .unwrap();
        let worker = WorkerProcess::spawn(
            BIN.as_ref(),
            &engine.url(),
            &["--config", path.to_str().unwrap()],
            Duration::from_secs(30),
        )
        .await;
        let probe = engine.client("probe").await;
        let got = call(&probe, "configuration::get", json!({"id": "approval-gate"}))
            .await
            .unwrap();
        assert_eq!(
            got["value"],
            json!({"default_mode": "auto", "rules": ["!approval::*"], "grant_reask_limit": 5})
        );
        drop(worker);
    })
    .await;
}

#[tokio::test]
async fn config_reload_changes_defaults_without_a_restart_and_bad_values_keep_the_last_good() {
    on_each_engine("config_reload", |engine| async move {
        let probe = engine.client("probe").await;
        let worker = start_in_process(&engine).await;
        let before = call(&probe, "approval::get-settings", json!({"session_id": "unseen"})).await.unwrap();
        assert_eq!(before["settings"]["mode"], "manual");
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": {"default_mode": "auto"}})).await.unwrap();
        let w = &worker;
        assert!(eventually(WAIT, || w.config().default_mode.as_str() == "auto").await);
        let after = call(&probe, "approval::get-settings", json!({"session_id": "unseen"})).await.unwrap();
        assert_eq!(after["settings"]["mode"], "auto");
        assert_eq!(after["source"], "defaults");
        // Passes the schema (an integer ≥ 0) but does not fit the worker (u32).
        call(
            &probe,
            "configuration::set",
            json!({"id": "approval-gate", "value": {"default_mode": "full", "grant_reask_limit": 8_589_934_592u64}}),
        )
        .await
        .unwrap();
        // The worker has read the value and refused it.
        config_health_until(&probe, false).await;
        assert_eq!(w.config().default_mode.as_str(), "auto", "an unusable value must keep the last good snapshot");
        let still = call(&probe, "approval::get-settings", json!({"session_id": "unseen"})).await.unwrap();
        assert_eq!(still["settings"]["mode"], "auto");
    })
    .await;
}

#[tokio::test]
async fn config_register_failure_exits_non_zero_naming_the_entry() {
    on_test_engine("config_register_failure", |engine| async move {
        engine.test_engine().unwrap().faults().fail(
            "configuration::register",
            "STORE_DOWN",
            "store is down",
            None,
        );
        let mut worker = WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &[]);
        let code = worker.wait(Duration::from_secs(30)).await;
        assert_eq!(code, Some(1), "output:\n{}", worker.output());
        let out = worker.output();
        assert!(
            out.contains("configuration entry approval-gate")
                && out.contains("configuration::register"),
            "{out}"
        );
    })
    .await;
}

#[tokio::test]
async fn config_fetch_failure_exits_non_zero() {
    on_test_engine("config_fetch_failure", |engine| async move {
        engine.test_engine().unwrap().faults().fail(
            "configuration::get",
            "STORE_DOWN",
            "store is down",
            None,
        );
        let mut worker = WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &[]);
        assert_eq!(
            worker.wait(Duration::from_secs(30)).await,
            Some(1),
            "{}",
            worker.output()
        );
        assert!(worker
            .output()
            .contains("configuration entry approval-gate"));
    })
    .await;
}

#[tokio::test]
async fn settings_fifty_concurrent_grants_on_one_session_all_survive() {
    on_each_engine("settings_fifty_concurrent_grants", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        let calls = (0..50).map(|i| {
            let probe = probe.clone();
            async move {
                call(
                    &probe,
                    "approval::approve-always",
                    json!({"session_id": "s_many", "function_id": format!("f::{i}")}),
                )
                .await
                .unwrap()
            }
        });
        futures_util::future::join_all(calls).await;
        let got = call(
            &probe,
            "approval::get-settings",
            json!({"session_id": "s_many"}),
        )
        .await
        .unwrap();
        assert_eq!(got["source"], "stored");
        let mut ids: Vec<String> = got["settings"]["approved_always"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["function_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 50);
    })
    .await;
}

#[tokio::test]
async fn settings_reads_never_write() {
    on_each_engine("settings_reads_never_write", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        let before = call(&probe, "state::list", json!({"scope": "approval_settings"}))
            .await
            .unwrap();
        let got = call(
            &probe,
            "approval::get-settings",
            json!({"session_id": "s_read"}),
        )
        .await
        .unwrap();
        assert_eq!(got["source"], "defaults");
        let after = call(&probe, "state::list", json!({"scope": "approval_settings"}))
            .await
            .unwrap();
        assert_eq!(before, after);
        let none = call(
            &probe,
            "state::get",
            json!({"scope": "approval_settings", "key": "s_read"}),
        )
        .await
        .unwrap();
        assert!(none.is_null());
    })
    .await;
}

#[tokio::test]
async fn settings_mutations_materialise_and_behave_per_contract() {
    on_each_engine("settings_mutations", |engine| async move {
        let probe = engine.client("probe").await;
        // An auto-scoped allow rule becomes a seed entry.
        let seed = json!({"default_mode": "manual", "rules": ["!approval::*", {"function": "state::get", "action": "allow", "modes": ["auto"]}]});
        let _worker = start_in_process_with(&engine, Some(seed)).await;
        let out = call(&probe, "approval::set-mode", json!({"session_id": "s_new", "mode": "full"})).await.unwrap();
        let s = &out["settings"];
        assert_eq!(s["mode"], "full");
        assert!(s["mode_set_at"].as_u64().unwrap() > 0);
        assert_eq!(s["always_allow"][0]["function_id"], "state::get");
        assert_eq!(s["always_allow"][0]["granted_by"], "seed");
        assert_eq!(s["always_allow"][0]["granted_at"], 0, "seeds are derived from the rules, never stamped");
        let stored = call(&probe, "state::get", json!({"scope": "approval_settings", "key": "s_new"})).await.unwrap();
        assert_eq!(stored["mode"], "full");
        assert_eq!(stored["always_allow"], json!([]), "seeds are never stored");

        let a = call(&probe, "approval::add-always-allow", json!({"session_id": "s_new", "function_id": "demo::*"})).await.unwrap();
        let first_at = a["settings"]["always_allow"][1]["granted_at"].clone();
        assert_eq!(a["settings"]["always_allow"][1]["granted_by"], "user_click");
        tokio::time::sleep(Duration::from_millis(5)).await;
        let b = call(&probe, "approval::add-always-allow", json!({"session_id": "s_new", "function_id": "demo::*"})).await.unwrap();
        assert_eq!(b["settings"]["always_allow"].as_array().unwrap().len(), 2, "idempotent on the exact id");
        assert_eq!(b["settings"]["always_allow"][1]["granted_at"], first_at, "an existing entry keeps its granted_at");

        let r = call(&probe, "approval::remove-always-allow", json!({"session_id": "s_new", "function_id": "nope"})).await.unwrap();
        assert_eq!(r["settings"]["always_allow"].as_array().unwrap().len(), 2);
        let r = call(&probe, "approval::remove-always-allow", json!({"session_id": "s_new", "function_id": "demo::*"})).await.unwrap();
        assert_eq!(r["settings"]["always_allow"].as_array().unwrap().len(), 1);

        // remove on a never-seen session still materialises.
        call(&probe, "approval::remove-always-allow", json!({"session_id": "s_other", "function_id": "x"})).await.unwrap();
        let g = call(&probe, "approval::get-settings", json!({"session_id": "s_other"})).await.unwrap();
        assert_eq!(g["source"], "stored");

        let c = call(&probe, "approval::clear-settings", json!({"session_id": "s_new"})).await.unwrap();
        assert_eq!(c["cleared"], true);
        let c = call(&probe, "approval::clear-settings", json!({"session_id": "s_new"})).await.unwrap();
        assert_eq!(c["cleared"], false);
        let g = call(&probe, "approval::get-settings", json!({"session_id": "s_new"})).await.unwrap();
        assert_eq!(g["source"], "defaults");
    })
    .await;
}

#[tokio::test]
async fn settings_bad_ids_are_invalid_payload_in_code_and_message() {
    on_each_engine("settings_bad_ids", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        for (fid, payload) in [
            (
                "approval::set-mode",
                json!({"session_id": "a/b", "mode": "auto"}),
            ),
            (
                "approval::set-mode",
                json!({"session_id": "", "mode": "auto"}),
            ),
            (
                "approval::set-mode",
                json!({"session_id": "s", "mode": "turbo"}),
            ),
            (
                "approval::approve-always",
                json!({"session_id": "s", "function_id": ""}),
            ),
            ("approval::add-always-allow", json!({"session_id": "s"})),
            ("approval::get-settings", json!({"session_id": "x/y"})),
            ("approval::clear-settings", json!({})),
            ("approval::get-settings", json!("not an object")),
        ] {
            let err = call(&probe, fid, payload.clone()).await.unwrap_err();
            assert_eq!(code_of(&err), "approval/invalid_payload", "{fid} {payload}");
            assert!(
                message_of(&err).starts_with("approval/invalid_payload: "),
                "{fid} {payload}: {}",
                message_of(&err)
            );
        }
        // The engine injects _caller_worker_id; a payload carrying it is fine.
        let ok = call(
            &probe,
            "approval::get-settings",
            json!({"session_id": "s", "_caller_worker_id": "w-1"}),
        )
        .await;
        assert!(ok.is_ok(), "{ok:?}");
    })
    .await;
}

#[tokio::test]
async fn settings_state_failure_on_mutation_is_state_unavailable() {
    on_test_engine("settings_state_failure", |engine| async move {
        let probe = engine.client("probe").await;
        let _worker = start_in_process(&engine).await;
        engine
            .test_engine()
            .unwrap()
            .faults()
            .fail("state::get", "KV_DOWN", "kv down", Some(1));
        let err = call(
            &probe,
            "approval::set-mode",
            json!({"session_id": "s", "mode": "auto"}),
        )
        .await
        .unwrap_err();
        assert_eq!(code_of(&err), "approval/state_unavailable");
        let none = call(
            &probe,
            "state::get",
            json!({"scope": "approval_settings", "key": "s"}),
        )
        .await
        .unwrap();
        assert!(none.is_null(), "a failed strict read must not re-seed");
    })
    .await;
}

/// A session's settings written or deleted by anything else reach the gate:
/// the worker reads a session it has not seen on its first call, and follows
/// later writes to it through its `state` binding.
#[tokio::test]
async fn settings_view_follows_writes_made_elsewhere() {
    on_each_engine("settings_view_follows_state", |engine| async move {
        let probe = engine.client("probe").await;
        let worker = start_in_process(&engine).await;
        let verdict = |v: Value| v["verdict"].as_str().unwrap_or_default().to_string();
        let evaluate = || call(&probe, "approval::evaluate", json!({"session_id": "s_ext", "function_id": "demo::echo"}));
        let record = json!({"session_id": "s_ext", "mode": "full", "always_allow": [], "approved_always": [], "mode_set_at": 1});
        call(&probe, "state::set", json!({"scope": "approval_settings", "key": "s_ext", "value": record})).await.unwrap();
        // First call: read from state.
        assert_eq!(verdict(evaluate().await.unwrap()), "allow", "a stored full mode is read on the first call");
        // The probe's own write may reach the worker's `state` binding while
        // that first read is in flight: the read then answers but is not
        // kept (a read older than a write never lands), and the next call
        // reads again.
        let mut kept = false;
        for _ in 0..20 {
            if worker.stored_settings("s_ext").map(|s| s.mode.as_str().to_string()) == Some("full".to_string()) {
                kept = true;
                break;
            }
            assert_eq!(verdict(evaluate().await.unwrap()), "allow");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(kept, "the stored settings are kept once read");
        // A write elsewhere is followed.
        let manual = json!({"session_id": "s_ext", "mode": "manual", "always_allow": [], "approved_always": [], "mode_set_at": 2});
        call(&probe, "state::set", json!({"scope": "approval_settings", "key": "s_ext", "value": manual})).await.unwrap();
        assert!(eventually(WAIT, || worker.stored_settings("s_ext").map(|s| s.mode.as_str() == "manual").unwrap_or(false)).await);
        assert_eq!(verdict(evaluate().await.unwrap()), "needs_approval");
        // A deletion elsewhere is followed: the defaults apply again.
        call(&probe, "state::set", json!({"scope": "approval_settings", "key": "s_ext", "value": record})).await.unwrap();
        assert!(eventually(WAIT, || worker.stored_settings("s_ext").map(|s| s.mode.as_str() == "full").unwrap_or(false)).await);
        call(&probe, "state::delete", json!({"scope": "approval_settings", "key": "s_ext"})).await.unwrap();
        assert!(eventually(WAIT, || worker.stored_settings("s_ext").is_none()).await);
        assert_eq!(verdict(evaluate().await.unwrap()), "needs_approval");
    })
    .await;
}

#[test]
fn process_manifest_is_json_with_the_defaults() {
    let out = std::process::Command::new(BIN)
        .arg("--manifest")
        .output()
        .unwrap();
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["name"], "approval-gate");
    assert_eq!(m["version"], env!("CARGO_PKG_VERSION"));
    assert!(m["description"].as_str().unwrap().len() > 10);
    assert_eq!(m["default_config"], defaults());
    assert!(!m["supported_targets"].as_array().unwrap().is_empty());
}

#[test]
fn process_unreachable_engine_exits_non_zero_within_the_timeout() {
    let started = std::time::Instant::now();
    let out = std::process::Command::new(BIN)
        .args(["--url", "ws://127.0.0.1:9", "--connect-timeout", "1"])
        .env("OTEL_ENABLED", "false")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the iii engine at ws://127.0.0.1:9 within 1 s"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn process_sigterm_exits_zero() {
    on_each_engine("process_sigterm", |engine| async move {
        let mut worker =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &[], Duration::from_secs(30)).await;
        assert_eq!(
            worker.terminate(Duration::from_secs(20)).await,
            Some(0),
            "{}",
            worker.output()
        );
    })
    .await;
}

#[tokio::test]
async fn process_worker_name_honours_iii_worker_name_and_warns_about_absent_types() {
    on_each_engine("process_worker_name", |engine| async move {
        let probe = engine.client("probe").await;
        let worker = WorkerProcess::spawn_with(
            BIN.as_ref(),
            &engine.url(),
            &[],
            &[("III_WORKER_NAME", "approval-gate-b")],
            Duration::from_secs(30),
        )
        .await;
        let workers = call(&probe, "engine::workers::list", json!({}))
            .await
            .unwrap();
        assert!(
            workers.to_string().contains("\"approval-gate-b\""),
            "{workers}"
        );
        let out = worker.output();
        for ty in [
            "harness::hook::pre-trigger",
            "harness::hook::post-trigger",
            "harness::turn-completed",
            "session::deleted",
        ] {
            assert!(
                out.lines().any(|l| l.contains("WARN")
                    && l.contains("trigger_type_not_found")
                    && l.contains(ty)),
                "no WARN naming {ty}:\n{out}"
            );
        }
        let ready: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("approval-gate ready"))
            .collect();
        assert_eq!(ready.len(), 1, "{out}");
        assert!(
            ready[0].contains("harness::hook::pre-trigger"),
            "the ready line names the parked bindings: {}",
            ready[0]
        );
        // Without a harness the gate's binding is parked: not gated, and the
        // ready line says so.
        assert!(ready[0].contains("gated=false"), "{}", ready[0]);
    })
    .await;
}

/// The golden seed file: every rule form, written in YAML.
fn golden_seed() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seed.yaml")
}

/// A seed file takes every shape the stored JSON takes: the golden YAML seed
/// parses to exactly the configuration written below as JSON, and it
/// compiles (its examples pass, its links are usable).
#[test]
fn rule_9_the_golden_seed_file_parses_as_its_json_twin() {
    let twin = json!({
        "default_mode": "auto",
        "rule_precedence": "deny_ask_allow",
        "grant_reask_limit": 2,
        "human_only_extra": ["deploy::prod*"],
        "gate_priority": 900,
        "binding_check_interval_ms": 15000,
        "pending_timeout_ms": 1_800_000,
        "escalate_after_ms": 600_000,
        "links": {
            "secret": "golden-seed-secret-0123456789abcdef",
            "public_base_url": "https://approvals.example.com",
            "inbox_token": "golden-seed-inbox-token-0123456789abc"
        },
        "rules": [
            "!approval::*",
            "?payments::*",
            "state::get",
            {"function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
             "args": {"command": {"matches": "push .*--force"}},
             "examples": {
                 "match": [{"function_id": "shell::exec", "arguments": {"command": "git push origin main --force"}}],
                 "no_match": [{"function_id": "shell::exec", "arguments": {"command": "git push origin main"}}]}},
            {"function": "deploy::*", "action": "ask", "rule_id": "deploys-wait",
             "timeout_ms": 900_000, "escalate_after_ms": 300_000},
            {"function": "fs::write", "action": "deny", "args": {"/options/force": {"equals": true}}},
            {"function": "shell::exec", "action": "allow", "rule_id": "git-status", "modes": ["auto", "full"],
             "args": {"command": {"prefix": "git status"}, "cwd": {"equals": null}},
             "examples": {"match": [{"function_id": "shell::exec", "arguments": {"command": "git status --short"}}]}},
            {"function": "http::*", "action": "allow", "modes": ["auto"],
             "args": {"a": {"matches": "^ok"}, "retries": {"equals": 3}}},
            {"function": "{tool,kit}::[gs]et", "action": "ask", "rule_id": "prod-keys-ask", "modes": ["manual"],
             "args": {"key": {"equals": "prod"}},
             "examples": {"match": [{"function_id": "kit::set", "arguments": {"key": "prod"}}, {"function_id": "kit::get"}],
                          "no_match": [{"function_id": "tool::get", "arguments": {"key": "dev"}}]}},
            {"function": "shell::run", "action": "deny", "rule_id": "no-curl",
             "args": {"cmd": {"prefix": "curl"}},
             "examples": {"match": [
                 {"function_id": "shell::run", "arguments": {"cmd": "ls; curl x | sh"}},
                 {"function_id": "shell::run", "arguments": {"cmd": ["curl", "-s", "x"]}},
                 {"function_id": "shell::run", "arguments": "curl x"}],
                          "no_match": [{"function_id": "shell::run", "arguments": {"cmd": "echo curl"}}]}}
        ]
    });
    let seeded = load_seed(&golden_seed()).unwrap_or_else(|e| panic!("{e}"));
    let parsed = ApprovalConfig::from_value(&twin).expect("the JSON twin parses");
    assert_eq!(seeded, parsed.to_json());
    assert_eq!(seeded, twin, "nothing is lost or added on the way");
    let snapshot = Snapshot::try_compile(parsed).unwrap_or_else(|r| panic!("{:?}", r.rule_errors));
    assert!(snapshot.is_ok(), "{:?}", snapshot.errors());
    assert_eq!(snapshot.rules.len(), 10);
}

/// The shape that serde_yaml could not read (an `args` map of externally
/// tagged constraints), through the binary's `--config`.
#[tokio::test]
async fn rule_9_a_yaml_seed_with_args_constraints_boots_the_binary() {
    on_test_engine("config_seed_args", |engine| async move {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed.yaml");
        std::fs::write(
            &path,
            "rules:\n  - \"!approval::*\"\n  - function: demo::*\n    action: allow\n    args: { a: { matches: \"^ok\" } }\n",
        )
        .unwrap();
        let worker = WorkerProcess::spawn(
            BIN.as_ref(),
            &engine.url(),
            &["--config", path.to_str().unwrap()],
            Duration::from_secs(30),
        )
        .await;
        let probe = engine.client("probe").await;
        let got = call(&probe, "configuration::get", json!({"id": "approval-gate"}))
            .await
            .unwrap();
        assert_eq!(
            got["value"]["rules"][1],
            json!({"function": "demo::*", "action": "allow", "args": {"a": {"matches": "^ok"}}})
        );
        drop(worker);
    })
    .await;
}

/// `approval::health`'s `config`, polled until `ok` is `want` (bounded).
async fn config_health_until(probe: &iii_sdk::IIIClient, want: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = call(probe, "approval::health", json!({})).await.unwrap()["config"].clone();
        if last["ok"] == want {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("health.config.ok never became {want}: {last}");
}

async fn evaluate(probe: &iii_sdk::IIIClient, function_id: &str) -> Value {
    call(
        probe,
        "approval::evaluate",
        json!({"session_id": "s_cfg", "function_id": function_id}),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn rule_21_1_a_broken_rule_keeps_the_whole_previous_configuration_across_a_restart() {
    on_each_engine("config_broken_rule_keeps_previous", |engine| async move {
        let probe = engine.client("probe").await;
        let worker = start_in_process(&engine).await;
        let good = json!({"default_mode": "auto", "rule_precedence": "deny_ask_allow",
            "rules": ["!approval::*", "demo::*"], "grant_reask_limit": 3});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": good})).await.unwrap();
        let w = &worker;
        assert!(eventually(WAIT, || w.config().default_mode.as_str() == "auto").await);
        let in_force = worker.config();
        assert_eq!(evaluate(&probe, "demo::echo").await["rule_id"], "demo::*");

        // A new mode and precedence arrive with a rule that does not compile.
        let broken = json!({"default_mode": "full", "rule_precedence": "first_match",
            "rules": ["!approval::*", {"function": "x::*", "action": "allow", "args": {"a": {"matches": "("}}}]});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": broken})).await.unwrap();
        let health = config_health_until(&probe, false).await;
        assert!(health["rule_errors"][0].as_str().unwrap().starts_with("rule 1: "), "{health}");
        assert_eq!(worker.config(), in_force, "no field of the refused value applies");
        assert!(!worker.lockdown());
        let ev = evaluate(&probe, "demo::echo").await;
        assert_eq!(ev["verdict"], "allow", "the old rules still decide: {ev}");
        assert_eq!(ev["rule_id"], "demo::*", "{ev}");
        assert!(ev["rule_errors"][0].as_str().unwrap().starts_with("rule 1: "), "{ev}");
        let settings = call(&probe, "approval::get-settings", json!({"session_id": "unseen"})).await.unwrap();
        assert_eq!(settings["settings"]["mode"], "auto", "the refused default_mode never applies");
        let kept = call(&probe, "state::get", json!({"scope": "approval_config", "key": "last_good"})).await.unwrap();
        assert_eq!(kept["config"]["rules"], json!(["!approval::*", "demo::*"]), "{kept}");

        // A restart reads the broken value and starts from the last good one.
        worker.shutdown(Duration::from_secs(2)).await;
        let worker = start_in_process(&engine).await;
        assert_eq!(worker.config(), in_force);
        assert!(!worker.lockdown());
        let health = config_health_until(&probe, false).await;
        assert!(health["rule_errors"][0].as_str().unwrap().starts_with("rule 1: "), "{health}");
        let ev = evaluate(&probe, "demo::echo").await;
        assert_eq!(ev["rule_id"], "demo::*", "{ev}");
    })
    .await;
}

#[tokio::test]
async fn rule_21_1_a_first_boot_with_a_broken_rule_runs_in_lockdown_until_a_good_value() {
    on_each_engine("config_first_boot_lockdown", |engine| async move {
        let probe = engine.client("probe").await;
        let seed = json!({"default_mode": "full", "grant_reask_limit": 1,
            "rules": ["!approval::*", {"function": "demo::*", "action": "allow", "args": {"a": {"matches": "("}}}]});
        let worker = start_in_process_with(&engine, Some(seed)).await;
        assert!(worker.lockdown());
        assert_eq!(worker.config(), ApprovalConfig::default(), "lockdown runs on the built-in defaults");
        let health = config_health_until(&probe, false).await;
        assert!(health["rule_errors"][0].as_str().unwrap().starts_with("rule 1: "), "{health}");
        let kept = call(&probe, "state::get", json!({"scope": "approval_config", "key": "last_good"})).await.unwrap();
        assert!(kept.is_null(), "nothing good to keep: {kept}");

        // The first value whose rules compile ends lockdown and is kept.
        let good = json!({"default_mode": "auto", "rules": ["!approval::*", "demo::*"]});
        call(&probe, "configuration::set", json!({"id": "approval-gate", "value": good})).await.unwrap();
        let w = &worker;
        assert!(eventually(WAIT, || !w.lockdown()).await);
        let health = config_health_until(&probe, true).await;
        assert_eq!(health["rule_errors"], json!([]), "{health}");
        assert_eq!(worker.config().default_mode.as_str(), "auto");
        assert_eq!(evaluate(&probe, "demo::echo").await["rule_id"], "demo::*");
        let kept = call(&probe, "state::get", json!({"scope": "approval_config", "key": "last_good"})).await.unwrap();
        assert_eq!(kept["config"]["default_mode"], "auto", "{kept}");
    })
    .await;
}
