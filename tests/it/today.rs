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
    today_with(engine, HarnessOptions::generation(Generation::G2)).await
}

/// As [`today`] with the harness's `options`.
async fn today_with(engine: EngineFixture, options: HarnessOptions) -> Scene {
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
        let scene = today_with(engine, hooks_cut_short()).await;
        let age = scene.reconcile_age;
        let resolved = scene
            .sink("rc-resolved", "approval::pending-resolved", json!({}))
            .await;
        let spec = |cid: &str| CallSpec::new("s5", "t_s5", cid, "demo::ask", json!({})).with_fs_root("/w/s5");
        assert!(scene.harness.call(spec("c1")).await.is_held());
        assert!(scene.harness.call(spec("c2")).await.is_held());
        let held_at = pending(&scene, "s5", "c1").await["pending_at"]
            .as_u64()
            .expect("pending_at");
        // The harness answers c1 itself (another console): it no longer holds it.
        scene
            .ok(
                "harness::function::resolve",
                json!({"session_id": "s5", "turn_id": "t_s5", "function_call_id": "c1", "action": "deliver",
                       "is_error": true, "content": [{"type": "text", "text": "answered elsewhere"}]}),
            )
            .await;
        // Young records are left alone (the harness may not have parked them):
        // the pass ready asks for reads the session and removes nothing.
        let reads = scene.harness.status_reads("s5");
        scene.harness.announce_ready().await;
        assert!(
            eventually(WAIT, || scene.harness.status_reads("s5") > reads).await,
            "ready asked for no reconcile"
        );
        let read_at = now_ms();
        stay_quiet().await;
        assert!(
            read_at < held_at + u64::try_from(age.as_millis()).expect("a short age"),
            "the pass came after the records had aged: the check saw nothing young"
        );
        assert_eq!(scene.inbox().await.len(), 2, "young records are kept");
        assert!(resolved.events().is_empty(), "{:?}", resolved.events());
        // Past twice the hook timeout, the next ready reconciles.
        until_older_than(held_at, age).await;
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

/// Today's harness with its hooks cut to 2 s: the worker facing it
/// reconciles with an age of 4 s (twice that, §27.4) instead of 10 s. No
/// hold in these scenes takes near 2 s.
fn hooks_cut_short() -> HarnessOptions {
    HarnessOptions {
        hook_timeout_ms: Some(2_000),
        ..HarnessOptions::generation(Generation::G2)
    }
}

/// Waits until `age` has passed since the wall-clock time `since_ms`: the
/// instant a record written then stops being young to a reconcile.
async fn until_older_than(since_ms: u64, age: Duration) {
    let at = since_ms + u64::try_from(age.as_millis()).expect("a short age");
    let now = now_ms();
    tokio::time::sleep(Duration::from_millis(at.saturating_sub(now) + 1)).await;
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
    /// Issue 36, item 3: in `full` mode `harness::send` with
    /// `options.metadata.fs_scope.root: "/"` was held while `harness::run`
    /// with the same options continued. Any `fs_scope`, `filesystem_root`
    /// or `working_dir`, at any depth of any call, is judged the same way;
    /// only the harness's own stamp on the calls it stamps is not.
    async fn rule_26_3_a_widening_root_through_any_door_is_held_even_in_full_mode(generation) {
        on_each_engine(&label("widening_by_shape", generation), |engine| async move {
            let scene = spawning(engine, generation).await;
            scene
                .targets
                .add("harness::run", Arc::new(approval_gate_testkit::targets::Echo))
                .await;
            scene
                .ok("approval::set-mode", json!({"session_id": "s1", "mode": "full"}))
                .await;
            let run_at = |root: &str| {
                json!({"session_id": "child", "message": "go", "options": {"metadata": {"fs_scope": {"root": root}}}})
            };
            let held = [
                ("c1", "harness::run", run_at("/")),
                ("c2", "demo::echo", json!({"call": {"options": {"filesystem_root": "/etc"}}})),
                ("c3", "demo::echo", json!({"steps": [{"working_dir": "/home"}]})),
                ("c4", "shell::run", json!({"command": "ls", "opts": {"fs_scope": {"root": "/"}}})),
                ("c5", "demo::other", json!({"fs_scope": "/"})),
            ];
            for (cid, fid, args) in held.clone() {
                let out = scene.harness.call(in_turn("s1", cid, fid, args.clone())).await;
                assert_eq!(out.held_by(), Some("approval::gate"), "{cid} {fid} {args}: {out:?}");
            }
            let ran = [
                ("c6", "harness::run", run_at("/w/s1/sub")),
                ("c7", "demo::echo", json!({"steps": [{"working_dir": "/srv/x"}], "filesystem_root": null})),
                // The harness's stamp on a call it stamps is its own.
                ("c8", "shell::run", json!({"command": "ls", "fs_scope": {"root": "/"}})),
            ];
            for (cid, fid, args) in ran {
                let out = scene.harness.call(in_turn("s1", cid, fid, args.clone())).await;
                assert!(!out.is_held() && out.deny_reason().is_none(), "{cid} {fid} {args}: {out:?}");
            }
            assert_eq!(scene.harness.target_runs("harness::run"), 1, "only the one inside ran");
            let held_ids: Vec<Value> = scene.inbox().await.iter().map(|r| r["function_call_id"].clone()).collect();
            assert_eq!(held_ids, held.iter().map(|(cid, _, _)| json!(cid)).collect::<Vec<_>>());
            let out = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s1", "function_id": "harness::run", "arguments": run_at("/"),
                           "metadata": {"fs_scope": {"root": "/w/s1"}}}),
                )
                .await;
            assert_eq!(out["verdict"], "needs_approval", "{out}");
            assert_eq!(out["rule_id"], "widening_root", "{out}");
        })
        .await;
    }
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

#[tokio::test]
async fn rule_27_4_harness_ask_runs_by_the_implicit_rule_unless_a_configured_rule_decides() {
    on_test_engine("today_harness_ask", |engine| async move {
        let scene = today(engine).await;
        scene
            .targets
            .add("harness::ask", Arc::new(approval_gate_testkit::targets::Echo))
            .await;
        let ask = |cid: &str| {
            CallSpec::new("s_q", "t_q", cid, "harness::ask", json!({"questions": [{"question": "which branch?"}]}))
                .with_fs_root("/w/s_q")
        };
        // No configured rule names it: it runs, in the default manual mode.
        let out = scene.harness.call(ask("c1")).await;
        assert!(!out.is_held() && out.deny_reason().is_none(), "{out:?}");
        assert_eq!(scene.harness.target_runs("harness::ask"), 1);
        let ev = scene
            .ok("approval::evaluate", json!({"session_id": "s_q", "function_id": "harness::ask"}))
            .await;
        assert_eq!(ev["verdict"], "allow", "{ev}");
        assert_eq!(ev["rule_id"], approval_gate::IMPLICIT_ASK_RULE, "{ev}");
        let last = ev["trace"].as_array().and_then(|t| t.last()).cloned().unwrap_or_default();
        assert_eq!(last["step"], "implicit_ask", "{ev}");
        // An ask rule (any configured rule) decides before the implicit one.
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "?harness::ask", "shell::*"]}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 3).await);
        assert!(scene.harness.call(ask("c2")).await.is_held());
        assert_eq!(scene.harness.target_runs("harness::ask"), 1, "the held ask did not run");
    })
    .await;
}

/// Writes a record of `(sid, cid)` held long ago, before the worker boots.
async fn seed_old_record(engine: &EngineFixture, sid: &str, cid: &str, function_id: &str) {
    seed_record(engine, sid, cid, function_id, None).await;
}

/// As [`seed_old_record`], for a call whose arguments are known: the record
/// carries their digest, as one the gate wrote would (§26.1), so a
/// delivery of the same call meets its own record.
async fn seed_record(
    engine: &EngineFixture,
    sid: &str,
    cid: &str,
    function_id: &str,
    arguments: Option<&Value>,
) {
    let seeder = engine.client(&format!("seeder-{sid}-{cid}")).await;
    let mut record = json!({"session_id": sid, "turn_id": format!("t_{sid}"), "function_call_id": cid,
        "function_id": function_id, "kind": "function", "arguments_excerpt": {}, "pending_at": 1000, "depth": 0});
    if let Some(arguments) = arguments {
        record["arguments_digest"] = json!(approval_gate::arguments_digest(
            function_id,
            Some(arguments)
        ));
    }
    approval_gate_testkit::fixture::call(
        &seeder,
        "state::set",
        json!({"scope": approval_gate::bucket_scope(sid, cid), "key": format!("{sid}/{cid}"), "value": record}),
    )
    .await
    .expect("seeded");
}

#[tokio::test]
async fn rule_27_4_boot_and_ready_reconcile_once_and_a_null_status_is_acted_on_only_when_read_again(
) {
    on_each_engine("today_null_status", |engine| async move {
        // The harness knows no turn of s_gone: harness::status answers null.
        seed_old_record(&engine, "s_gone", "c_g", "demo::ask").await;
        let scene = Scene::start_with(engine, hooks_cut_short()).await;
        let age = scene.reconcile_age;
        let resolved = scene
            .sink("null-resolved", "approval::pending-resolved", json!({}))
            .await;
        // The boot's pass and the one the harness::ready the new binding got
        // at once asks for are one pass: one read.
        assert!(eventually(WAIT, || scene.harness.status_reads("s_gone") >= 1).await);
        let first_read = std::time::Instant::now();
        // A second pass would start a second after a request that missed
        // the first: two seconds show none came (within the age, so the
        // `null`'s own second read is not due yet).
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            scene.harness.status_reads("s_gone"),
            1,
            "boot and ready reconcile once"
        );
        // One null is not acted on.
        assert_eq!(scene.inbox().await.len(), 1, "kept after the first null");
        assert!(resolved.events().is_empty());
        // Read again, twice the hook timeout later: still null, so removed.
        assert!(
            eventually(age + WAIT, || scene.harness.status_reads("s_gone") >= 2).await,
            "no second read"
        );
        // Not before the age (the first read was seen at most a poll late).
        let apart = first_read.elapsed();
        assert!(
            apart + Duration::from_millis(100) >= age,
            "read again {apart:?} after the first, before the age {age:?}"
        );
        let events = resolved.wait_for(1, WAIT).await;
        assert_eq!(events[0]["function_call_id"], "c_g", "{events:?}");
        assert_eq!(events[0]["outcome"], "aborted");
        assert_eq!(events[0]["reason"], "not_held");
        assert!(scene.inbox().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn rule_27_4_a_call_waiting_on_its_sub_agent_is_not_read_as_a_hold() {
    on_each_engine("today_subagent_wait", |engine| async move {
        // A held call the worker keeps (with its identity, §26.1).
        seed_record(&engine, "s_p", "c_held", "demo::ask", Some(&json!({}))).await;
        let mut scene = Scene::start_with(engine, HarnessOptions::generation(Generation::G2)).await;
        let configure = async |scene: &Scene| {
            scene
                .ok(
                    "configuration::set",
                    json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "harness::*"]}}),
                )
                .await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().rules.len() == 2).await);
        };
        configure(&scene).await;
        let resolved = scene
            .sink("child-resolved", "approval::pending-resolved", json!({}))
            .await;
        scene.harness.play_spawns();
        let spawn_args = json!({"task": "go", "session_id": "kid"});
        let spawn = CallSpec::new("s_p", "t_s_p", "c_spawn", "harness::spawn", spawn_args.clone())
            .with_fs_root("/w/s_p");
        let state = scene.harness.call(spawn).await;
        assert!(
            matches!(
                state,
                approval_gate_testkit::harness::CallState::AwaitingChild { .. }
            ),
            "{state:?}"
        );
        // A record of the spawn the worker finds at its next boot (one
        // whose release answer was lost, say): the call is not held, it
        // waits on its child.
        scene.stop_worker().await;
        seed_record(&scene.engine, "s_p", "c_spawn", "harness::spawn", Some(&spawn_args)).await;
        scene.restart_worker().await;
        configure(&scene).await;
        scene
            .hold(
                CallSpec::new("s_p", "t_s_p", "c_held", "demo::ask", json!({}))
                    .with_fs_root("/w/s_p"),
            )
            .await;
        // Both are listed as pending; only the held one may be a hold.
        assert_eq!(
            scene.harness.pending_calls("s_p"),
            vec!["c_held".to_string(), "c_spawn".to_string()]
        );
        scene.harness.announce_ready().await;
        let events = resolved.wait_for(1, Duration::from_secs(6)).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["function_call_id"], "c_spawn");
        assert_eq!(events[0]["reason"], "not_held");
        let left: Vec<Value> = scene
            .inbox()
            .await
            .iter()
            .map(|r| r["function_call_id"].clone())
            .collect();
        assert_eq!(left, vec![json!("c_held")]);
    })
    .await;
}

#[tokio::test]
async fn rule_27_4_a_lost_answer_is_not_read_as_a_hold_when_the_call_waits_on_its_sub_agent() {
    on_each_engine("today_lost_spawn", |engine| async move {
        let scene = Scene::start_with(engine, HarnessOptions::generation(Generation::G2)).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "?harness::spawn"],
                    "release_timeout_ms": 1500, "resolve_wait_ms": 500}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().release_timeout_ms == 1500).await);
        let resolved = scene
            .sink("lost-resolved", "approval::pending-resolved", json!({}))
            .await;
        scene.harness.play_spawns();
        scene
            .hold(
                CallSpec::new("s_l", "t_s_l", "c1", "harness::spawn", json!({"task": "go", "session_id": "kid_l"}))
                    .with_fs_root("/w/s_l"),
            )
            .await;
        // The harness does the release (the spawn starts its child) and its
        // answer is lost; harness::status then lists the call, waiting on
        // the child: it ran, it is not held.
        scene.harness.fault_resolves(ResolveFault::LoseReply, 1);
        let out = scene
            .ok("approval::resolve", json!({"session_id": "s_l", "function_call_id": "c1", "decision": "allow"}))
            .await;
        assert_eq!(out, json!({"resolved": false, "releasing": true}));
        let events = resolved.wait_for(1, Duration::from_secs(8)).await;
        assert_eq!(events.first().map(|e| e["outcome"].clone()), Some(json!("unknown")), "{events:?}");
        assert!(matches!(
            scene.harness.state("s_l", "c1"),
            Some(approval_gate_testkit::harness::CallState::AwaitingChild { .. })
        ));
        assert!(scene.inbox().await.is_empty(), "not pending again");
    })
    .await;
}

/// Today's harness settles an agent's `engine::register_trigger` itself (a
/// subscription the calling session owns) after the pre-trigger chain let the
/// call through, and asks `approval::evaluate` about the subscription's target
/// before it binds. The gate denies both controls in the chain (human-only):
/// no agent binds a hook type or unbinds the gate, and the double binds
/// nothing. The probe the harness would send answers by the ladder.
#[tokio::test]
async fn rule_27_4_an_agent_binds_no_hook_and_unbinds_no_gate_through_a_subscription() {
    on_each_engine("today_subscriptions", |engine| async move {
        let scene = today(engine).await;
        let evaluate = |function_id: &'static str, arguments: Value| {
            let scene = &scene;
            async move {
                scene
                    .ok(
                        "approval::evaluate",
                        json!({"session_id": "s_sub", "function_id": function_id, "arguments": arguments}),
                    )
                    .await
            }
        };
        // The probe about a target: allowed, held and human-only targets.
        let ev = evaluate("demo::tick", json!({})).await;
        assert_eq!(ev["verdict"], "allow", "{ev}");
        let ev = evaluate("demo::ask", json!({})).await;
        assert_eq!(ev["verdict"], "needs_approval", "{ev}");
        let ev = evaluate("engine::register_trigger", json!({"trigger_type": "harness::hook::pre-trigger", "function_id": "demo::tick"})).await;
        assert_eq!(ev["verdict"], "deny", "{ev}");
        assert_eq!(ev["rule_id"], "human_only_function", "{ev}");
        // The agent's own calls, through the turn's chain.
        let gate_bindings = || {
            scene
                .harness
                .bindings("harness::hook::pre-trigger")
                .into_iter()
                .filter(|b| b.function_id == "approval::gate")
                .collect::<Vec<_>>()
        };
        let gate = gate_bindings();
        assert_eq!(gate.len(), 1, "{gate:?}");
        let control = |cid: &str, function_id: &str, arguments: Value| {
            CallSpec::new("s_sub", "t_s_sub", cid, function_id, arguments).with_fs_root("/w/s_sub")
        };
        let refused = [
            // Hook types, the one the harness itself would allow included.
            control("c2", "engine::register_trigger", json!({"trigger_type": "harness::hook::pre-trigger", "function_id": "demo::tick", "config": {}})),
            control("c3", "engine::register_trigger", json!({"trigger_type": "harness::hook::post-turn", "function_id": "demo::tick"})),
            // The gate's own events.
            control("c4", "engine::register_trigger", json!({"trigger_type": "approval::pending-created", "function_id": "demo::tick", "config": {}})),
            // A target that needs a human would run unattended.
            control("c5", "engine::register_trigger", json!({"trigger_type": "cron", "config": {"expression": "* * * * *"}, "function_id": "demo::ask"})),
        ];
        for spec in refused {
            let cid = spec.call_id.clone();
            let out = scene.harness.call(spec).await;
            let reason = out.deny_reason().unwrap_or_default().to_string();
            assert!(reason.starts_with("Permission denied by policy:"), "{cid} was not denied by the gate: {out:?}");
        }
        assert!(scene.harness.subscriptions().is_empty(), "{:?}", scene.harness.subscriptions());
        // Unbinding the gate reaches no engine binding: the harness removes
        // only the session's own subscriptions.
        let out = scene
            .harness
            .call(control("c6", "engine::unregister_trigger", json!({"id": gate[0].id})))
            .await;
        assert!(out.deny_reason().is_none(), "{out:?}");
        let details = out.result().map(|r| r["details"].clone());
        assert_eq!(details, Some(json!({"removed": false})), "{out:?}");
        // The gate is still bound and still holds.
        assert_eq!(gate_bindings().len(), 1);
        assert!(scene
            .harness
            .call(control("c7", "demo::ask", json!({})))
            .await
            .is_held());
    })
    .await;
}

#[tokio::test]
async fn rule_27_4_a_session_owned_subscription_whose_target_the_policy_allows_still_works() {
    on_each_engine("today_subscribe", |engine| async move {
        let scene = today(engine).await;
        let control = |cid: &str, function_id: &str, arguments: Value| {
            CallSpec::new("s_sub", "t_s_sub", cid, function_id, arguments).with_fs_root("/w/s_sub")
        };
        let ev = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s_sub", "function_id": "engine::register_trigger",
                       "arguments": {"trigger_type": "cron", "config": {"expression": "* * * * *"}, "function_id": "demo::tick"}}),
            )
            .await;
        assert_eq!(ev["verdict"], "allow", "{ev}");
        assert_eq!(ev["rule_id"], "subscription", "{ev}");
        let out = scene
            .harness
            .call(control(
                "c1",
                "engine::register_trigger",
                json!({"trigger_type": "cron", "config": {"expression": "* * * * *"}, "function_id": "demo::tick"}),
            ))
            .await;
        assert!(out.deny_reason().is_none(), "{out:?}");
        let subs = scene.harness.subscriptions();
        assert_eq!(subs.len(), 1, "{subs:?}");
        assert_eq!(subs[0].session_id, "s_sub");
        assert_eq!(subs[0].target.as_deref(), Some("demo::tick"));
        // The harness asked the gate about the target, and was told allow.
        let probes = scene.harness.evaluate_probes();
        let probe = probes
            .iter()
            .find(|(p, _)| p["function_id"] == "demo::tick")
            .expect("the harness probed the target");
        assert_eq!(probe.1.as_ref().expect("an answer")["verdict"], "allow");
        // A wake (no target) works too, and the session removes its own.
        let out = scene
            .harness
            .call(control("c2", "engine::register_trigger", json!({"trigger_type": "cron", "config": {"expression": "0 * * * *"}})))
            .await;
        assert!(out.deny_reason().is_none(), "{out:?}");
        assert_eq!(scene.harness.subscriptions().len(), 2);
        let id = subs[0].id.clone();
        let out = scene
            .harness
            .call(control("c3", "engine::unregister_trigger", json!({"id": id})))
            .await;
        assert!(out.deny_reason().is_none(), "{out:?}");
        let left: Vec<_> = scene.harness.subscriptions().into_iter().map(|s| s.id).collect();
        assert!(!left.contains(&id), "{left:?}");
        assert_eq!(left.len(), 1);
        // Nothing was held for any of it.
        let listed = scene.ok("approval::list-pending", json!({"session_id": "s_sub"})).await;
        assert_eq!(listed["pending"].as_array().map(Vec::len), Some(0), "{listed}");
    })
    .await;
}

#[tokio::test]
async fn rule_27_4_on_a_harness_that_does_not_mediate_subscriptions_both_controls_stay_human_only()
{
    on_each_engine("g1_subscribe", |engine| async move {
        let options = HarnessOptions {
            generation: Generation::G1,
            ..HarnessOptions::default()
        };
        let scene = Scene::start_with(engine, options).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "demo::*"]}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 2).await);
        let arguments = json!({"trigger_type": "cron", "config": {"expression": "* * * * *"}, "function_id": "demo::tick"});
        let ev = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s_g1", "function_id": "engine::register_trigger", "arguments": arguments}),
            )
            .await;
        assert_eq!(ev["verdict"], "deny", "{ev}");
        assert_eq!(ev["rule_id"], "human_only_function", "{ev}");
        for (cid, fid, args) in [
            ("c1", "engine::register_trigger", arguments.clone()),
            ("c2", "engine::unregister_trigger", json!({"id": "anything"})),
        ] {
            let out = scene
                .harness
                .call(CallSpec::new("s_g1", "t_g1", cid, fid, args).with_working_dir("/w/s_g1"))
                .await;
            let reason = out.deny_reason().unwrap_or_default();
            assert!(reason.contains("only a human"), "{cid}: {out:?}");
        }
    })
    .await;
}
