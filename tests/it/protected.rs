//! Protected paths (contract §29) through the gate, on both engines: in a
//! `full`-mode session every way of writing the gate's configuration entry
//! is held for a human (rule `protected_path`), the record, `evaluate` and
//! `simulate` name the path, deny rules still deny, and everyday commands
//! in the workspace continue. On the real engine, the end-to-end case: an
//! agent's attempt to rewrite the entry file is held, a human denies it,
//! and the file and the policy are what they were. The corpus's
//! protected-path class through the gate is in `commands`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::harness::{CallSpec, CallState, Generation, HarnessOptions};
use approval_gate_testkit::targets::{Behaviour, TargetCall, TargetError};
use serde_json::{json, Value};

use crate::common::*;

/// The turn's root the calls are made from.
const ROOT: &str = "/srv/iii";

fn full_mode() -> Value {
    json!({"default_mode": "full", "rules": ["!approval::*"]})
}

fn spec(cid: &str, fid: &str, args: Value) -> CallSpec {
    CallSpec::new("s_p", "t_p", cid, fid, args).with_fs_root(ROOT)
}

#[tokio::test]
async fn rule_29_3_full_mode_holds_every_write_of_the_entry_and_names_the_path() {
    on_each_engine("protected_writes", |engine| async move {
        let scene = Scene::start_seeded(
            engine,
            HarnessOptions::generation(Generation::G2),
            Some(full_mode()),
        )
        .await;
        let held = [
            (
                "c1",
                "shell::run",
                json!({"command": "sed -i 's/manual/full/' /srv/iii/config/approval-gate.yaml"}),
            ),
            (
                "c2",
                "shell::run",
                json!({"command": "sed -i 's/manual/full/' config/approval-gate.yaml"}),
            ),
            (
                "c3",
                "shell::run",
                json!({"command": "echo 'default_mode: full' > config/approval-gate.yaml"}),
            ),
            (
                "c4",
                "shell::run",
                json!({"command": "echo x | tee -a config/shell.yaml"}),
            ),
            (
                "c5",
                "shell::run",
                json!({"command": "cp /tmp/x.yaml ../iii/config//approval-gate.yaml"}),
            ),
            (
                "c6",
                "shell::run",
                json!({"command": "sed -i s/a/b/ approval-gate.yaml", "cwd": "/srv/iii/config"}),
            ),
            (
                "c7",
                "shell::run",
                json!({"command": "sed -i s/a/b/ config/*.yaml"}),
            ),
            (
                "c8",
                "coder::write",
                json!({"path": "config/approval-gate.yaml", "content": "default_mode: full\n"}),
            ),
            (
                "c9",
                "coder::write",
                json!({"path": "/srv/iii/config/iii-http.yaml", "content": "x"}),
            ),
        ];
        for (cid, fid, args) in &held {
            let out = scene.harness.call(spec(cid, fid, args.clone())).await;
            assert!(out.is_held(), "{cid} {args}: {out:?}");
            let record = scene.get_pending("s_p", cid).await;
            let note = &record["pending"]["protected_path"];
            assert!(
                note["glob"].as_str().is_some_and(|g| g.contains("config/")),
                "{cid}: the record names the glob: {record}"
            );
        }
        // The path as resolved, relative words read from the turn's root
        // or the call's cwd.
        for cid in ["c1", "c2", "c3", "c5", "c6", "c8"] {
            let record = scene.get_pending("s_p", cid).await;
            assert_eq!(
                record["pending"]["protected_path"]["path"],
                json!("/srv/iii/config/approval-gate.yaml"),
                "{cid}: {record}"
            );
            assert_eq!(record["pending"]["protected_path"]["how"], json!("literal"));
        }
        let glob = scene.get_pending("s_p", "c7").await;
        assert_eq!(
            glob["pending"]["protected_path"]["how"],
            json!("pattern"),
            "{glob}"
        );
        // Nothing ran.
        assert_eq!(scene.harness.target_runs("shell::run"), 0);
        assert_eq!(scene.harness.target_runs("coder::write"), 0);

        // Everyday commands in the workspace continue.
        for (cid, command) in [
            ("e1", "cargo test"),
            ("e2", "git status"),
            ("e3", "cat config/app.yaml"),
            ("e4", "sed -i 's/a/b/' src/config.rs"),
            ("e5", "ls config/*.json"),
        ] {
            let out = scene
                .harness
                .call(spec(cid, "shell::run", json!({"command": command})))
                .await;
            assert!(
                matches!(out, CallState::Completed { .. }),
                "{command}: {out:?}"
            );
        }
        let out = scene
            .harness
            .call(spec(
                "e6",
                "coder::write",
                json!({"path": "src/lib.rs", "content": "x"}),
            ))
            .await;
        assert!(matches!(out, CallState::Completed { .. }), "{out:?}");

        // evaluate and simulate name the path.
        let args = json!({"command": "tee /srv/iii/config/approval-gate.yaml"});
        let evaluated = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s_p", "function_id": "shell::run", "arguments": args}),
            )
            .await;
        assert_eq!(evaluated["verdict"], "needs_approval", "{evaluated}");
        assert_eq!(evaluated["rule_id"], "protected_path", "{evaluated}");
        assert!(
            evaluated["reason"]
                .as_str()
                .is_some_and(|r| r.contains("/srv/iii/config/approval-gate.yaml")),
            "{evaluated}"
        );
        assert!(
            evaluated["trace"].as_array().is_some_and(|t| t
                .iter()
                .any(|s| s["step"] == "protected_path" && s["outcome"] == "hold")),
            "{evaluated}"
        );
        let simulated = scene
            .ok(
                "approval::simulate",
                json!({"calls": [
                    {"function_id": "shell::run", "arguments": args},
                    {"function_id": "shell::run", "arguments": {"command": "git status"}}
                ]}),
            )
            .await;
        let results = simulated["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 2, "{simulated}");
        assert_eq!(results[0]["rule_id_now"], "protected_path", "{simulated}");
        assert!(
            results[0]["protected_path"]
                .as_str()
                .is_some_and(|p| p.contains("/srv/iii/config/approval-gate.yaml")),
            "{simulated}"
        );
        assert!(results[1].get("protected_path").is_none(), "{simulated}");
    })
    .await;
}

#[tokio::test]
async fn rule_29_3_deny_rules_still_deny_and_grants_never_pass() {
    on_each_engine("protected_deny_and_grants", |engine| async move {
        let config = json!({
            "default_mode": "auto",
            "rule_precedence": "deny_ask_allow",
            "rules": [
                "!approval::*",
                {"function": "shell::run", "action": "deny", "args": {"command": {"prefix": "truncate"}}}
            ]
        });
        let scene = Scene::start_seeded(engine, HarnessOptions::generation(Generation::G2), Some(config)).await;
        // A grant for every shell::run call in this session.
        scene
            .ok(
                "state::set",
                json!({"scope": "approval_settings", "key": "s_p", "value": {
                    "session_id": "s_p", "mode": "auto", "always_allow": [], "mode_set_at": 0,
                    "approved_always": [{"function_id": "shell::run", "granted_at": 1, "granted_by": "user_click"}]}}),
            )
            .await;
        let out = scene
            .harness
            .call(spec("d1", "shell::run", json!({"command": "truncate -s 0 config/approval-gate.yaml"})))
            .await;
        assert!(matches!(out, CallState::Denied { .. }), "a deny rule denies: {out:?}");
        let out = scene
            .harness
            .call(spec("d2", "shell::run", json!({"command": "cp /tmp/x config/approval-gate.yaml"})))
            .await;
        assert!(out.is_held(), "the grant does not pass a protected path: {out:?}");
        let record = scene.get_pending("s_p", "d2").await;
        assert_eq!(record["pending"]["protected_path"]["path"], json!("/srv/iii/config/approval-gate.yaml"));
        // The same grant still allows everything else.
        let out = scene
            .harness
            .call(spec("d3", "shell::run", json!({"command": "cp /tmp/x notes.txt"})))
            .await;
        assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
    })
    .await;
}

/// Runs a `shell::exec` call's `command` with bash in `dir` (the real
/// engine's directory), so a call the gate let through would really write
/// there.
struct Bash {
    dir: PathBuf,
}

impl Behaviour for Bash {
    fn respond(&self, call: &TargetCall) -> Result<Value, TargetError> {
        let command = call.payload["command"].as_str().unwrap_or_default();
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(&self.dir)
            .output()
            .map_err(|e| TargetError::new("spawn_failed", e.to_string()))?;
        Ok(json!({"status": out.status.code(), "stderr": String::from_utf8_lossy(&out.stderr)}))
    }
}

fn entry_file(dir: &Path) -> PathBuf {
    dir.join("config").join("approval-gate.yaml")
}

#[tokio::test]
async fn rule_29_real_engine_an_agent_cannot_rewrite_the_gate_through_its_entry_file() {
    let Some(engine) =
        approval_gate_testkit::fixture::EngineFixture::start_real("protected_e2e").await
    else {
        return;
    };
    let dir = engine.engine_dir().expect("a real engine has a directory");
    let config = json!({
        "default_mode": "full",
        "rule_precedence": "deny_ask_allow",
        "rules": [
            "!approval::*",
            {"function": "shell::exec", "action": "deny", "args": {"command": {"prefix": "rm"}}}
        ]
    });
    let scene = Scene::start_seeded(
        engine,
        HarnessOptions::generation(Generation::G2),
        Some(config.clone()),
    )
    .await;
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": config}),
        )
        .await;
    let want = approval_gate::ApprovalConfig::from_value(&config).expect("a valid configuration");
    let worker = scene.worker.as_ref().expect("the worker runs");
    assert!(
        eventually(WAIT, || worker.config() == want).await,
        "the worker never loaded {config}"
    );
    let file = entry_file(&dir);
    assert!(
        eventually(WAIT, || file.exists()).await,
        "the engine keeps the entry in {}",
        file.display()
    );
    scene
        .targets
        .add("shell::exec", Arc::new(Bash { dir: dir.clone() }))
        .await;
    let root = dir.to_string_lossy().into_owned();
    let call = |cid: &str, command: &str| {
        CallSpec::new(
            "s_e",
            "t_e",
            cid,
            "shell::exec",
            json!({"command": command}),
        )
        .with_fs_root(&root)
    };
    let rm = json!({"session_id": "s_e", "function_id": "shell::exec", "arguments": {"command": "rm -rf /tmp/x"}});
    let before_policy = scene.ok("approval::evaluate", rm.clone()).await;
    assert_eq!(before_policy["verdict"], "deny", "{before_policy}");

    // The control: the agent's shell really runs in the engine's directory.
    std::fs::write(dir.join("notes.txt"), "a\n").expect("write notes.txt");
    let out = scene
        .harness
        .call(call("e0", "sed -i 's/a/b/' notes.txt"))
        .await;
    assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap_or_default(),
        "b\n"
    );

    // The attempt: drop the deny rule from the entry file.
    let before = std::fs::read(&file).expect("the entry file");
    let out = scene
        .harness
        .call(call(
            "e1",
            "sed -i '/rm/d; s/full/manual/' config/approval-gate.yaml",
        ))
        .await;
    assert!(out.is_held(), "{out:?}");
    let record = scene.get_pending("s_e", "e1").await;
    assert_eq!(
        record["pending"]["protected_path"]["path"],
        json!(file.to_string_lossy()),
        "{record}"
    );
    scene
        .ok(
            "approval::resolve",
            json!({"session_id": "s_e", "function_call_id": "e1", "decision": "deny"}),
        )
        .await;
    // Today's harness delivers the denial to the turn as an error result.
    assert!(
        eventually(WAIT, || matches!(
            scene.harness.state("s_e", "e1"),
            Some(CallState::Delivered { ref result, .. })
                if result["is_error"] == json!(true)
                    && result["details"]["status"] == json!("denied")
        ))
        .await,
        "{:?}",
        scene.harness.state("s_e", "e1")
    );
    assert_eq!(
        scene.harness.target_runs("shell::exec"),
        1,
        "only the control ran"
    );
    // Give the engine's watcher the time it took to pick up a rewrite.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        std::fs::read(&file).expect("the entry file"),
        before,
        "the file is unchanged"
    );
    let after_policy = scene.ok("approval::evaluate", rm).await;
    assert_eq!(
        after_policy["verdict"], before_policy["verdict"],
        "{after_policy}"
    );
    assert_eq!(
        after_policy["rule_id"], before_policy["rule_id"],
        "{after_policy}"
    );
}
