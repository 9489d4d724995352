//! Today's harness and shell (contract §19, `harness.md` § generation 2),
//! end to end: the watch's binding sets the session boundary, today's tail
//! becomes a `filesystem_access` prompt, grants go through
//! `harness::filesystem::*`, an `execute` runs the target inside the resolve
//! (and may hold again), and `harness::ready` reconciles the inbox.

use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, Generation, HarnessOptions, ResolveFault};
use approval_gate_testkit::shell::{Dialect, JailShell, Prefix};
use serde_json::{json, Value};

use crate::common::*;

/// A scene on today's harness: `shell::read` jailed to its session root
/// (`/w/<session>`) and its grants; the policy allows `shell::*` and
/// `demo::*` except `demo::ask` and `shell::ask`, which hold.
async fn today(engine: EngineFixture) -> Scene {
    let options = HarnessOptions {
        generation: Generation::G2,
        ..HarnessOptions::default()
    };
    let scene = Scene::start_with(engine, options).await;
    scene
        .targets
        .add(
            "shell::read",
            Arc::new(JailShell::new(Dialect::Shell, &["/srv"]).with_prefix(Prefix::RemoteError)),
        )
        .await;
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "?demo::ask", "?shell::ask", "shell::*", "demo::*"]}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(eventually(WAIT, || w.config().rules.len() == 5).await);
    scene
}

fn read(sid: &str, cid: &str, path: &str) -> CallSpec {
    CallSpec::new(
        sid,
        format!("t_{sid}"),
        cid,
        "shell::read",
        json!({"path": path}),
    )
    .with_fs_root(&format!("/w/{sid}"))
}

async fn pending(scene: &Scene, sid: &str, cid: &str) -> Value {
    scene.get_pending(sid, cid).await["pending"].clone()
}

#[tokio::test]
async fn rule_19_todays_tail_becomes_a_filesystem_access_prompt_with_both_spellings() {
    on_each_engine("today_prompt", |engine| async move {
        let scene = today(engine).await;
        // Inside the session root: no prompt, the boundary is the workspace.
        let ok = scene.harness.call(read("s1", "c0", "/w/s1/notes")).await;
        assert!(!ok.is_held(), "{ok:?}");
        assert_eq!(
            scene.harness.boundary("s1", "c0").map(|b| format!("{b:?}")),
            Some("Workspace".to_string())
        );
        // Outside it: today's tail, a prefixed message, a prompt.
        let out = scene.harness.call(read("s1", "c1", "/data/a/f")).await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(out.held_by(), Some("approval::filesystem-access-watch"));
        let record = pending(&scene, "s1", "c1").await;
        assert_eq!(record["kind"], "filesystem_access", "{record}");
        assert_eq!(record["access_request"]["requested_root"], "/data/a", "{record}");
        assert_eq!(record["access_request"]["attempted_path"], "/data/a/f");
        assert_eq!(record["grant_request"]["dir"], "/data/a");
        // The harness's stamp is shown apart from the agent's arguments.
        assert_eq!(record["arguments_excerpt"], json!({"path": "/data/a/f"}), "{record}");
        assert_eq!(record["fs_scope"]["root"], "/w/s1", "{record}");
        // Allowed for the session, spelled as today's console does: the
        // grant goes through harness::filesystem::grant and the call runs.
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s1", "function_call_id": "c1", "decision": "allow", "access_duration": "session"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        assert_eq!(scene.harness.grants("s1"), vec!["/data/a".to_string()]);
        let st = scene.harness.state("s1", "c1").unwrap();
        assert!(!st.is_held(), "{st:?}");
        assert!(st.result().is_some_and(|r| r["is_error"] != true), "{st:?}");
        // Once: the one-shot root goes in today's spelling.
        assert!(scene.harness.call(read("s1", "c2", "/data/b/g")).await.is_held());
        scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s1", "function_call_id": "c2", "decision": "allow"}),
            )
            .await;
        let run = scene.harness.runs_of("shell::read").last().cloned().unwrap();
        assert_eq!(run.extra_roots, vec!["/data/b".to_string()]);
        assert_eq!(scene.harness.grants("s1"), vec!["/data/a".to_string()]);
    })
    .await;
}

#[tokio::test]
async fn rule_20_a_hold_again_inside_execute_is_announced_allow_then_a_new_prompt() {
    on_each_engine("today_rehold", |engine| async move {
        let scene = today(engine).await;
        let created = scene
            .sink("rh-created", "approval::pending-created", json!({}))
            .await;
        let resolved = scene
            .sink("rh-resolved", "approval::pending-resolved", json!({}))
            .await;
        // A function hold (an ask rule) whose target, once allowed, reads a
        // folder outside the root: the watch holds the same call again,
        // inside the harness's execute.
        scene
            .targets
            .add(
                "shell::ask",
                Arc::new(JailShell::new(Dialect::Shell, &["/srv"])),
            )
            .await;
        let spec = CallSpec::new(
            "s2",
            "t_s2",
            "c1",
            "shell::ask",
            json!({"path": "/data/x/f"}),
        )
        .with_fs_root("/w/s2");
        let out = scene.harness.call(spec).await;
        assert_eq!(out.held_by(), Some("approval::gate"), "{out:?}");
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s2", "function_call_id": "c1", "decision": "allow"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        assert_eq!(out["turn_resumed"], false, "{out}");
        let st = scene.harness.state("s2", "c1").unwrap();
        assert_eq!(
            st.held_by(),
            Some("approval::filesystem-access-watch"),
            "{st:?}"
        );
        let record = pending(&scene, "s2", "c1").await;
        assert_eq!(record["kind"], "filesystem_access", "{record}");
        // The function record: allow, once, never aborted/replaced; the
        // folder record: its own pending-created.
        assert!(eventually(WAIT, || resolved.events().len() == 1).await);
        assert!(eventually(WAIT, || created.events().len() == 2).await);
        stay_quiet().await;
        let events = resolved.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["outcome"], "allow", "{events:?}");
        let kinds: Vec<Value> = created.events().iter().map(|e| e["kind"].clone()).collect();
        assert_eq!(kinds, vec![json!("function"), json!("filesystem_access")]);
    })
    .await;
}

#[tokio::test]
async fn rule_20_a_long_execute_answers_releasing_and_the_outcome_follows() {
    on_each_engine("today_long_execute", |engine| async move {
        let scene = today(engine).await;
        let resolved = scene
            .sink("le-resolved", "approval::pending-resolved", json!({}))
            .await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "?demo::ask", "shell::*", "demo::*"], "resolve_wait_ms": 1000}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().resolve_wait_ms == 1000).await);
        scene.targets.add("demo::ask", Arc::new(approval_gate_testkit::targets::Echo)).await;
        scene.targets.set_delay("demo::ask", Duration::from_secs(4));
        let spec = CallSpec::new("s3", "t_s3", "c1", "demo::ask", json!({"n": 1})).with_fs_root("/w/s3");
        assert!(scene.harness.call(spec).await.is_held());
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s3", "function_call_id": "c1", "decision": "allow"}),
            )
            .await;
        assert_eq!(out, json!({"resolved": false, "releasing": true}));
        assert_eq!(pending(&scene, "s3", "c1").await["releasing"], true);
        assert!(eventually(Duration::from_secs(15), || resolved.events().len() == 1).await);
        assert_eq!(resolved.events()[0]["outcome"], "allow");
        assert!(pending(&scene, "s3", "c1").await.is_null());
        assert_eq!(scene.harness.target_runs("demo::ask"), 1);
    })
    .await;
}

#[tokio::test]
async fn rule_20_a_lost_answer_the_harness_still_holds_is_pending_again() {
    on_each_engine("today_lost_answer", |engine| async move {
        let scene = today(engine).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "?demo::ask", "shell::*", "demo::*"], "release_timeout_ms": 1500, "resolve_wait_ms": 500}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().release_timeout_ms == 1500).await);
        let spec = CallSpec::new("s4", "t_s4", "c1", "demo::ask", json!({})).with_fs_root("/w/s4");
        assert!(scene.harness.call(spec).await.is_held());
        // The harness never answers and does nothing: the call is still held.
        scene.harness.fault_resolves(ResolveFault::Hang, 1);
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s4", "function_call_id": "c1", "decision": "allow"}),
            )
            .await;
        assert_eq!(out, json!({"resolved": false, "releasing": true}));
        // harness::status still lists it: pending again, decidable anew.
        assert!(
            wait_not_releasing(&scene, "s4", "c1").await,
            "the record never became pending again"
        );
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s4", "function_call_id": "c1", "decision": "deny"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
    })
    .await;
}

async fn wait_not_releasing(scene: &Scene, sid: &str, cid: &str) -> bool {
    for _ in 0..100 {
        let record = pending(scene, sid, cid).await;
        if !record.is_null() && record.get("releasing").is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn rule_19_harness_ready_reconciles_records_of_calls_it_no_longer_holds() {
    on_test_engine("today_reconcile", |engine| async move {
        let scene = today(engine).await;
        let resolved = scene
            .sink("rc-resolved", "approval::pending-resolved", json!({}))
            .await;
        let spec = |cid: &str| CallSpec::new("s5", "t_s5", cid, "demo::ask", json!({})).with_fs_root("/w/s5");
        assert!(scene.harness.call(spec("c1")).await.is_held());
        assert!(scene.harness.call(spec("c2")).await.is_held());
        // The harness answers c1 itself (another console): it no longer holds it.
        scene
            .ok(
                "harness::function::resolve",
                json!({"session_id": "s5", "turn_id": "t_s5", "function_call_id": "c1", "action": "deliver",
                       "is_error": true, "content": [{"type": "text", "text": "answered elsewhere"}]}),
            )
            .await;
        // Young records are left alone (the harness may not have parked them).
        scene.harness.announce_ready().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(scene.inbox().await.len(), 2, "young records are kept");
        // Past twice the hook timeout, the next ready reconciles.
        tokio::time::sleep(Duration::from_secs(10)).await;
        scene.harness.announce_ready().await;
        assert!(eventually(WAIT, || resolved.events().len() == 1).await);
        let events = resolved.events();
        assert_eq!(events[0]["function_call_id"], "c1");
        assert_eq!(events[0]["outcome"], "aborted");
        assert_eq!(events[0]["reason"], "not_held");
        let left: Vec<Value> = scene.inbox().await.iter().map(|r| r["function_call_id"].clone()).collect();
        assert_eq!(left, vec![json!("c2")]);
    })
    .await;
}

/// A scene on `generation` serving `harness::spawn` and `harness::send`
/// (echoes), whose policy allows `harness::*` and `demo::*`.
async fn spawning(engine: EngineFixture, generation: Generation) -> Scene {
    let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
    for target in ["harness::spawn", "harness::send"] {
        scene
            .targets
            .add(target, Arc::new(approval_gate_testkit::targets::Echo))
            .await;
    }
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "harness::*", "demo::*"]}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(eventually(WAIT, || w.config().rules.len() == 3).await);
    scene
}

/// A call in a turn of `sid` scoped to `/w/<sid>` with the grant `/srv`.
fn in_turn(sid: &str, cid: &str, function_id: &str, arguments: Value) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, function_id, arguments)
        .with_metadata(json!({"fs_scope": {"root": format!("/w/{sid}"), "grants": ["/srv"]}}))
}

fn spawn_at(root: &str) -> Value {
    json!({"prompt": "fix the tests", "options": {"filesystem_root": root}})
}

fn send_with(scope: Value) -> Value {
    json!({"session_id": "child", "message": "go on", "options": {"metadata": {"fs_scope": scope}}})
}

each_generation! {
    /// Full mode allows everything but the human floors: a spawn or send
    /// whose root lies outside the turn's root and grants is held by the
    /// gate; one inside runs; the human's allow releases the held one.
    async fn rule_19_widening_root_is_held_for_a_human_even_in_full_mode(generation) {
        on_each_engine(&label("widening_full", generation), |engine| async move {
            let scene = spawning(engine, generation).await;
            scene
                .ok("approval::set-mode", json!({"session_id": "s1", "mode": "full"}))
                .await;
            let inside = scene
                .harness
                .call(in_turn("s1", "c1", "harness::spawn", spawn_at("/w/s1/worktree")))
                .await;
            assert!(!inside.is_held(), "{inside:?}");
            let granted = scene
                .harness
                .call(in_turn("s1", "c2", "harness::spawn", spawn_at("/srv/repo")))
                .await;
            assert!(!granted.is_held(), "{granted:?}");
            assert_eq!(scene.harness.target_runs("harness::spawn"), 2);
            for (cid, args) in [
                ("c3", spawn_at("/etc")),
                ("c4", spawn_at("/w/s1/../s2")),
                ("c5", spawn_at("/w/s10")),
            ] {
                let out = scene
                    .harness
                    .call(in_turn("s1", cid, "harness::spawn", args))
                    .await;
                assert_eq!(out.held_by(), Some("approval::gate"), "{cid}: {out:?}");
            }
            let out = scene
                .harness
                .call(in_turn("s1", "c6", "harness::send", send_with(json!({"root": "/w/s1/sub", "grants": ["/home"]}))))
                .await;
            assert_eq!(out.held_by(), Some("approval::gate"), "{out:?}");
            let out = scene
                .harness
                .call(in_turn("s1", "c7", "harness::send", send_with(json!({"root": "/w/s1/sub", "grants": ["/srv/a"]}))))
                .await;
            assert!(!out.is_held(), "{out:?}");
            assert_eq!(scene.harness.target_runs("harness::spawn"), 2, "nothing outside ran");
            assert_eq!(scene.harness.target_runs("harness::send"), 1);
            let held: Vec<Value> = scene
                .inbox()
                .await
                .iter()
                .map(|r| r["function_call_id"].clone())
                .collect();
            assert_eq!(held, vec![json!("c3"), json!("c4"), json!("c5"), json!("c6")]);
            // The session's durable grants are granted roots too (read only
            // for a root outside the turn's own).
            let grant = match generation {
                Generation::G1 => "harness::workspace::grant",
                Generation::G2 => "harness::filesystem::grant",
            };
            scene
                .ok(grant, json!({"session_id": "s1", "root": "/opt"}))
                .await;
            let out = scene
                .harness
                .call(in_turn("s1", "c8", "harness::spawn", spawn_at("/opt/tree")))
                .await;
            assert!(!out.is_held(), "inside a durable grant: {out:?}");
            let out = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s1", "function_id": "harness::spawn", "arguments": spawn_at("/opt/x"),
                           "metadata": {"fs_scope": {"root": "/w/s1"}}}),
                )
                .await;
            assert_eq!(out["verdict"], "allow", "{out}");
            assert_eq!(scene.harness.target_runs("harness::spawn"), 3);
            // A human's allow releases it.
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s1", "function_call_id": "c3", "decision": "allow"}),
                )
                .await;
            assert_eq!(out["resolved"], true, "{out}");
            assert_eq!(scene.harness.target_runs("harness::spawn"), 4);
        })
        .await;
    }
}

each_generation! {
    /// Inside the turn's roots, a spawn follows the ladder (a deny rule
    /// denies it, manual mode holds what no rule allows); `evaluate` names
    /// `widening_root` for one outside, given the turn's metadata, and the
    /// grant functions stay human-only while `harness::status` does not.
    async fn rule_19_widening_root_inside_follows_the_ladder_and_evaluate_names_it(generation) {
        on_each_engine(&label("widening_ladder", generation), |engine| async move {
            let scene = spawning(engine, generation).await;
            scene
                .ok(
                    "configuration::set",
                    json!({"id": "approval-gate", "value": {"rules": ["!approval::*", {"function": "harness::spawn", "action": "deny", "rule_id": "no-spawn"}, "demo::*", "shell::*"]}}),
                )
                .await;
            let w = scene.worker.as_ref().unwrap();
            // Four rules: the scene's own three are not this configuration.
            assert!(eventually(WAIT, || w.config().rules.len() == 4).await);
            let out = scene
                .harness
                .call(in_turn("s2", "c1", "harness::spawn", spawn_at("/w/s2/tree")))
                .await;
            assert!(out.deny_reason().is_some(), "{out:?}");
            // Outside: a human's call, before the rules (like an ask rule).
            let out = scene
                .harness
                .call(in_turn("s2", "c2", "harness::spawn", spawn_at("/opt")))
                .await;
            assert_eq!(out.held_by(), Some("approval::gate"), "{out:?}");
            let metadata = json!({"fs_scope": {"root": "/w/s2", "grants": ["/srv"]}});
            let eval = |args: Value| {
                json!({"session_id": "s2", "function_id": "harness::spawn", "arguments": args, "metadata": metadata})
            };
            let out = scene.ok("approval::evaluate", eval(spawn_at("/opt"))).await;
            assert_eq!(out["verdict"], "needs_approval", "{out}");
            assert_eq!(out["rule_id"], "widening_root", "{out}");
            assert!(out["reason"].as_str().unwrap().contains("/opt"), "{out}");
            let out = scene.ok("approval::evaluate", eval(spawn_at("/srv/x"))).await;
            assert_eq!(out["verdict"], "deny", "{out}");
            assert_eq!(out["rule_id"], "no-spawn", "{out}");
            // Without the turn's metadata no root is known: a human decides.
            let out = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s2", "function_id": "harness::spawn", "arguments": spawn_at("/w/s2/tree")}),
                )
                .await;
            assert_eq!(out["rule_id"], "widening_root", "{out}");
            // The grant plane: human-only in full mode; status is not.
            scene
                .ok("approval::set-mode", json!({"session_id": "s2", "mode": "full"}))
                .await;
            for function in ["harness::filesystem::grant", "harness::filesystem::revoke"] {
                let out = scene
                    .ok(
                        "approval::evaluate",
                        json!({"session_id": "s2", "function_id": function, "arguments": {"session_id": "s2", "root": "/"}}),
                    )
                    .await;
                assert_eq!(out["rule_id"], "human_only_function", "{function}: {out}");
            }
            let out = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s2", "function_id": "harness::status", "arguments": {"session_id": "s2"}}),
                )
                .await;
            assert_eq!(out["verdict"], "allow", "{out}");
        })
        .await;
    }
}
