//! The grant watch (contract §6) and folder-access resolution (§5).

use std::sync::Arc;
use std::time::Duration;

use approval_gate::{folder_request, parse_hook_input, StandDown};
use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, CallState, Generation, HarnessOptions};
use approval_gate_testkit::shell::{Dialect, JailShell};
use serde_json::{json, Map, Value};

use crate::common::*;

const WS: &str = "/w/s1";

/// The harness's durable-grant function on `generation`.
fn grant_function(generation: Generation) -> &'static str {
    match generation {
        Generation::G1 => "harness::workspace::grant",
        Generation::G2 => "harness::filesystem::grant",
    }
}

/// The `kind` of a folder record the console of `generation` expects.
fn folder_kind(generation: Generation) -> &'static str {
    match generation {
        Generation::G1 => "folder_access",
        Generation::G2 => "filesystem_access",
    }
}

async fn scene_with(engine: EngineFixture, options: HarnessOptions, reask: u32) -> Scene {
    // `Scene::start_with` waits for the watch's durable binding too: today's
    // harness enforces the session root only while it matches the call.
    let scene = Scene::start_with(engine, options).await;
    scene
        .targets
        .add(
            "shell::read",
            Arc::new(JailShell::new(Dialect::Shell, &["/srv"])),
        )
        .await;
    scene
        .targets
        .add("coder::edit", Arc::new(JailShell::new(Dialect::Coder, &[])))
        .await;
    scene
        .targets
        .add(
            "coder::patch",
            Arc::new(JailShell::new(Dialect::CoderGeneric, &[])),
        )
        .await;
    scene
        .targets
        .add(
            "shell::deny",
            Arc::new(JailShell::new(Dialect::Denylisted, &[])),
        )
        .await;
    scene
        .targets
        .add(
            "shell::stubborn",
            Arc::new(JailShell::stubborn(Dialect::Shell)),
        )
        .await;
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "shell::*", "coder::*", "demo::*"], "grant_reask_limit": reask}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(
        eventually(WAIT, || w.config().grant_reask_limit == reask
            && w.config().rules.len() == 4)
        .await
    );
    scene
}

async fn run(scene: &Scene, sid: &str, cid: &str, fid: &str, path: &str) -> CallState {
    scene
        .harness
        .call(
            // The session workspace in both generations' spellings.
            CallSpec::new(sid, format!("t_{sid}"), cid, fid, json!({"path": path}))
                .with_working_dir(&format!("/w/{sid}"))
                .with_fs_root(&format!("/w/{sid}")),
        )
        .await
}

/// Asserts a call is held, showing what happened instead.
#[track_caller]
fn held(state: CallState) {
    assert!(state.is_held(), "expected a hold, got {state:?}");
}

fn is_original_error(state: &CallState, code: &str) -> bool {
    match state.result() {
        Some(r) => r["is_error"] == true && r.to_string().contains(code),
        None => false,
    }
}

fn succeeded(state: &CallState) -> bool {
    matches!(state, CallState::Completed { result } if result["is_error"] != true)
}

async fn resolve(
    scene: &Scene,
    sid: &str,
    cid: &str,
    decision: &str,
    scope: Option<&str>,
) -> Value {
    let mut req = json!({"session_id": sid, "function_call_id": cid, "decision": decision});
    if let Some(s) = scope {
        req["grant_scope"] = json!(s);
    }
    scene.ok("approval::resolve", req).await
}

each_generation! {
    async fn grant_stand_downs_deliver_the_original_error_and_no_record(generation) {
        on_each_engine(&label("grant_stand_downs", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            // the workspace itself, and a dir under it (path's parent is the dir)
            assert!(is_original_error(
                &run(&scene, "s1", "c1", "shell::stubborn", &format!("{WS}/x")).await,
                "S215"
            ));
            assert!(is_original_error(
                &run(
                    &scene,
                    "s1",
                    "c2",
                    "shell::stubborn",
                    &format!("{WS}/a/b/x")
                )
                .await,
                "S215"
            ));
            // a non-jail code (denylisted: no tail), a message without a hint
            assert!(is_original_error(
                &run(&scene, "s1", "c3", "shell::deny", "/etc/shadow").await,
                "denylisted"
            ));
            scene.targets.fail("shell::run", "S999", "boom");
            assert!(is_original_error(
                &run(&scene, "s1", "c4", "shell::run", "/x").await,
                "S999"
            ));
            scene.targets.fail(
                "shell::run",
                "S215",
                "path escapes the fs jail roots []: /x",
            );
            assert!(is_original_error(
                &run(&scene, "s1", "c5", "shell::run", "/x").await,
                "S215"
            ));
            // a hint with trailing text
            scene.targets.fail(
                "shell::run",
                "S215",
                r#"path escapes [] grant_hint={"v":1,"dir":"/x","path":"/x/y","code":"S215"} (retry)"#,
            );
            assert!(is_original_error(
                &run(&scene, "s1", "c6", "shell::run", "/x/y").await,
                "S215"
            ));
            // an already-granted root
            scene
                .ok(
                    grant_function(generation),
                    json!({"session_id": "s1", "root": "/data"}),
                )
                .await;
            assert!(is_original_error(
                &run(&scene, "s1", "c7", "shell::stubborn", "/data/sub/f").await,
                "S215"
            ));
            assert!(scene.inbox().await.is_empty(), "{:?}", scene.inbox().await);
            assert!(scene.pending_in_state().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn grant_older_harness_without_grants_stands_down(generation) {
        on_each_engine(&label("grant_older_harness", generation), |engine| async move {
            let options = HarnessOptions {
                workspace_grants: false,
                ..HarnessOptions::generation(generation)
            };
            let scene = scene_with(engine, options, 3).await;
            let out = run(&scene, "s1", "c1", "shell::read", "/data/f").await;
            assert!(is_original_error(&out, "S215"), "{out:?}");
            assert!(scene.inbox().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn grant_every_jail_form_is_recognised(generation) {
        on_each_engine(&label("grant_jail_forms", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            for (cid, fid, code) in [("c1", "shell::read", "S215"), ("c2", "coder::edit", "C215"), ("c3", "coder::patch", "C215")] {
                let out = run(&scene, "s1", cid, fid, "/data/proj/f.txt").await;
                assert!(out.is_held(), "{fid}: {out:?}");
                assert_eq!(out.held_by(), Some("approval::filesystem-access-watch"));
                let rec = scene.ok("approval::get-pending", json!({"session_id": "s1", "function_call_id": cid})).await;
                assert_eq!(rec["pending"]["kind"], folder_kind(generation));
                assert_eq!(rec["pending"]["grant_request"], json!({"dir": "/data/proj", "offending_path": "/data/proj/f.txt", "error_code": code}));
                assert_eq!(rec["pending"]["arguments_excerpt"], json!({"path": "/data/proj/f.txt"}));
            }
        })
        .await;
    }
}

each_generation! {
    async fn grant_allow_once_session_and_always(generation) {
        on_each_engine(&label("grant_scopes", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            scene
                .ok(
                    "configuration::register",
                    json!({"id": "shell", "name": "shell", "description": "shell", "schema": {"type": "object"},
                     "initial_value": {"fs": {"host_roots": ["/srv"], "deny": ["/etc"]}, "other": 1}}),
                )
                .await;
            // once: the retried call succeeds with extra_roots; the next call to the dir asks again.
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            assert_eq!(resolve(&scene, "s1", "c1", "allow", None).await["resolved"], true);
            let st = scene.harness.state("s1", "c1").unwrap();
            assert!(succeeded(&st), "{st:?}");
            let last = scene.harness.runs_of("shell::read").last().cloned().unwrap();
            assert_eq!(last.extra_roots, vec!["/data/a".to_string()]);
            held(run(&scene, "s1", "c2", "shell::read", "/data/a/g").await);
            resolve(&scene, "s1", "c2", "deny", None).await;

            // session: the grant is stored; later calls succeed without a prompt.
            held(run(&scene, "s1", "c3", "shell::read", "/data/b/f").await);
            resolve(&scene, "s1", "c3", "allow", Some("session")).await;
            assert!(succeeded(&scene.harness.state("s1", "c3").unwrap()));
            assert_eq!(scene.harness.grants("s1"), vec!["/data/b".to_string()]);
            assert!(scene.harness.runs_of("shell::read").last().unwrap().extra_roots.is_empty());
            assert!(succeeded(&run(&scene, "s1", "c4", "shell::read", "/data/b/deeper/g").await));

            // always: as session, plus the shell configuration lists the dir once.
            held(run(&scene, "s1", "c5", "shell::read", "/data/c/f").await);
            resolve(&scene, "s1", "c5", "allow", Some("always")).await;
            assert!(
                run(&scene, "s2", "c6", "shell::read", "/data/c/f").await.is_held(),
                "another session: not granted by the harness double"
            );
            resolve(&scene, "s2", "c6", "allow", Some("always")).await;
            let shell = scene.ok("configuration::get", json!({"id": "shell"})).await;
            assert_eq!(shell["value"], json!({"fs": {"host_roots": ["/srv", "/data/c"], "deny": ["/etc"]}, "other": 1}));
        })
        .await;
    }
}

each_generation! {
    async fn grant_failing_session_grant_still_releases_with_extra_roots(generation) {
        on_test_engine(&label("grant_failing_grant", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            scene.engine.test_engine().unwrap().faults().fail(
                grant_function(generation),
                "DOWN",
                "grant store down",
                None,
            );
            resolve(&scene, "s1", "c1", "allow", Some("session")).await;
            assert!(succeeded(&scene.harness.state("s1", "c1").unwrap()));
            assert_eq!(
                scene
                    .harness
                    .runs_of("shell::read")
                    .last()
                    .unwrap()
                    .extra_roots,
                vec!["/data/a".to_string()]
            );
            // "always" with no shell configuration entry: the persist fails, the release does not.
            scene.engine.test_engine().unwrap().faults().clear_all();
            held(run(&scene, "s1", "c2", "shell::read", "/data/z/f").await);
            resolve(&scene, "s1", "c2", "allow", Some("always")).await;
            assert!(succeeded(&scene.harness.state("s1", "c2").unwrap()));
        })
        .await;
    }
}

each_generation! {
    async fn grant_deny_is_remembered_for_the_session(generation) {
        on_each_engine(&label("grant_deny_remembered", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            resolve(&scene, "s1", "c1", "deny", None).await;
            let st = scene.harness.state("s1", "c1").unwrap();
            assert!(
                format!("{st:?}").contains("user denied folder access to /data/a"),
                "{st:?}"
            );
            let again = run(&scene, "s1", "c2", "shell::read", "/data/a/g").await;
            assert!(
                is_original_error(&again, "S215"),
                "no second prompt: {again:?}"
            );
            let under = run(&scene, "s1", "c3", "shell::read", "/data/a/sub/g").await;
            assert!(
                is_original_error(&under, "S215"),
                "a dir under a denied one: {under:?}"
            );
            assert!(scene.inbox().await.is_empty());
            // Session deletion forgets it: the same session id is asked again.
            scene.sessions.delete("s1").await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            held(run(&scene, "s1", "c4", "shell::read", "/data/a/f").await);
        })
        .await;
    }
}

each_generation! {
    async fn grant_reask_limit_one_and_default_three(generation) {
        on_each_engine(&label("grant_reask_limit", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 1).await;
            held(run(&scene, "s1", "c1", "shell::stubborn", "/data/a/f").await);
            resolve(&scene, "s1", "c1", "allow", None).await;
            let st = scene.harness.state("s1", "c1").unwrap();
            assert!(is_original_error(&st, "S215"), "limit 1: the second rejection stands down: {st:?}");

            scene
                .ok(
                    "configuration::set",
                    json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "shell::*", "coder::*", "demo::*"]}}),
                )
                .await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().grant_reask_limit == 3).await);
            held(run(&scene, "s1", "c2", "shell::stubborn", "/data/b/f").await);
            for round in 1..=3 {
                resolve(&scene, "s1", "c2", "allow", None).await;
                let st = scene.harness.state("s1", "c2").unwrap();
                if round < 3 {
                    assert!(st.is_held(), "round {round}: {st:?}");
                } else {
                    assert!(is_original_error(&st, "S215"), "after 3 asks the watch stands down: {st:?}");
                }
            }
            let asks = scene.ok("state::get", json!({"scope": "approval_grant_asks", "key": "s1"})).await;
            assert_eq!(asks["turns"]["t_s1"]["c2"], 3, "{asks}");
        })
        .await;
    }
}

each_generation! {
    async fn grant_function_hold_becomes_folder_hold_under_the_same_call_id(generation) {
        on_each_engine(&label("grant_follow_up_hold", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            scene
                .ok(
                    "configuration::set",
                    json!({"id": "approval-gate", "value": {"rules": ["!approval::*"]}}),
                )
                .await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().rules.len() == 1).await);
            let created = scene
                .sink("fu-created", "approval::pending-created", json!({}))
                .await;
            let resolved = scene
                .sink("fu-resolved", "approval::pending-resolved", json!({}))
                .await;
            let out = run(&scene, "s1", "c1", "shell::read", "/data/a/f").await;
            assert_eq!(out.held_by(), Some("approval::gate"));
            let first = scene
                .ok(
                    "approval::get-pending",
                    json!({"session_id": "s1", "function_call_id": "c1"}),
                )
                .await["pending"]
                .clone();
            assert_eq!(first["kind"], "function");
            let r = resolve(&scene, "s1", "c1", "allow", None).await;
            assert_eq!(r["resolved"], true);
            let st = scene.harness.state("s1", "c1").unwrap();
            assert_eq!(
                st.held_by(),
                Some("approval::filesystem-access-watch"),
                "{st:?}"
            );
            let second = scene
                .ok(
                    "approval::get-pending",
                    json!({"session_id": "s1", "function_call_id": "c1"}),
                )
                .await["pending"]
                .clone();
            assert_eq!(
                second["kind"], folder_kind(generation),
                "the follow-up survives the first resolve"
            );
            assert!(second["grant_request"].is_object());
            assert_ne!(
                (
                    first["pending_at"].clone(),
                    first["kind"].clone(),
                    first["grant_request"].clone()
                ),
                (
                    second["pending_at"].clone(),
                    second["kind"].clone(),
                    second["grant_request"].clone()
                )
            );
            assert!(eventually(WAIT, || created.events().len() == 2).await);
            assert_eq!(created.events()[1]["kind"], folder_kind(generation));
            assert!(eventually(WAIT, || resolved.events().len() == 1).await);
            assert_eq!(resolved.events()[0]["outcome"], "allow");
            // The folder prompt resolves as usual.
            resolve(&scene, "s1", "c1", "allow", None).await;
            assert!(succeeded(&scene.harness.state("s1", "c1").unwrap()));
            assert!(eventually(WAIT, || resolved.events().len() == 2).await);
            assert!(scene.inbox().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn grant_redelivered_post_trigger_counts_once(generation) {
        on_each_engine(&label("grant_redelivery", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            let created = scene.sink("rd-created", "approval::pending-created", json!({})).await;
            let input = json!({"point": "post_trigger", "session_id": "s1", "turn_id": "t1", "step": 1, "depth": 0,
                "metadata": {"working_dir": WS},
                "call": {"id": "c1", "function_id": "shell::read", "arguments": {"path": "/data/a/f"}},
                "result": {"function_call_id": "c1", "function_id": "shell::read", "is_error": true,
                    "content": [{"type": "text", "text": "x"}],
                    "details": {"error": {"code": "S215", "message": "path escapes the fs jail roots [/w/s1]: /data/a/f grant_hint={\"v\":1,\"dir\":\"/data/a\",\"path\":\"/data/a/f\",\"code\":\"S215\"}"}}}});
            for _ in 0..3 {
                let out = scene.ok("approval::grant-watch", input.clone()).await;
                assert_eq!(out, json!({"decision": "hold"}));
            }
            assert_eq!(scene.inbox().await.len(), 1);
            assert!(eventually(WAIT, || !created.events().is_empty()).await);
            stay_quiet().await;
            assert_eq!(created.events().len(), 1);
            let asks = scene.ok("state::get", json!({"scope": "approval_grant_asks", "key": "s1"})).await;
            assert_eq!(asks["turns"]["t1"]["c1"], 1, "{asks}");
        })
        .await;
    }
}

each_generation! {
    async fn grant_two_concurrent_always_grants_keep_both_dirs(generation) {
        on_each_engine(&label("grant_concurrent_always", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            scene
                .ok(
                    "configuration::register",
                    json!({"id": "shell", "name": "shell", "description": "shell", "schema": {"type": "object"}, "initial_value": {}}),
                )
                .await;
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            held(run(&scene, "s2", "c2", "shell::read", "/data/b/f").await);
            let (a, b) = tokio::join!(resolve(&scene, "s1", "c1", "allow", Some("always")), resolve(&scene, "s2", "c2", "allow", Some("always")));
            assert_eq!(a["resolved"], true);
            assert_eq!(b["resolved"], true);
            // The real engine's file-backed configuration store can show a
            // write made while its watcher was reading the directory undone
            // for one debounce (500 ms), then restored from disk
            // (`architecture/integration.md` § A configuration write shown
            // undone for 500 ms): both dirs must
            // be there once it settles, and stay.
            let want = vec!["/data/a".to_string(), "/data/b".to_string()];
            let mut roots: Vec<String> = Vec::new();
            let mut first = None;
            let deadline = tokio::time::Instant::now() + WAIT;
            for read in 0.. {
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                let shell = scene.ok("configuration::get", json!({"id": "shell"})).await;
                roots = serde_json::from_value(shell["value"]["fs"]["host_roots"].clone()).unwrap_or_default();
                roots.sort();
                first.get_or_insert_with(|| roots.clone());
                if roots == want {
                    if read > 0 {
                        eprintln!("both dirs after {read} more reads (the store showed {first:?} first)");
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(roots, want);
            tokio::time::sleep(Duration::from_millis(1200)).await;
            let shell = scene.ok("configuration::get", json!({"id": "shell"})).await;
            let mut later: Vec<String> = serde_json::from_value(shell["value"]["fs"]["host_roots"].clone()).unwrap();
            later.sort();
            assert_eq!(later, want, "both dirs stay");
        })
        .await;
    }
}

each_generation! {
    async fn grant_session_deletion_clears_counters(generation) {
        on_each_engine(&label("grant_session_deletion", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 1).await;
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            assert!(!scene.scope("approval_grant_asks").await.is_empty());
            scene.sessions.delete("s1").await;
            // The deletion's event reaches the worker: its hold and counters go.
            let s = &scene;
            assert!(
                eventually_async(WAIT, || async move { s.scope("approval_grant_asks").await.is_empty() }, |gone| gone).await,
                "the counters outlived the session"
            );
            assert!(eventually_async(WAIT, || async move { s.inbox().await.is_empty() }, |gone| gone).await);
            // The same call id in a new session of the same id is asked again (limit 1).
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
        })
        .await;
    }
}

each_generation! {
    async fn grant_turn_completion_clears_that_turns_counters(generation) {
        on_each_engine(&label("grant_turn_clears_counters", generation), |engine| async move {
            let scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            held(run(&scene, "s1", "c1", "shell::read", "/data/a/f").await);
            held(run(&scene, "s2", "c2", "shell::read", "/data/a/f").await);
            assert_eq!(scene.scope("approval_grant_asks").await.len(), 2);
            let lists = scene
                .engine
                .test_engine()
                .map(|e| e.invocations("state::list"));
            scene.harness.complete_turn("s1", "t_s1", "completed").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let left = scene.scope("approval_grant_asks").await;
            assert_eq!(left.len(), 1, "{left:?}");
            assert_eq!(left[0]["session_id"], "s2");
            assert_eq!(scene.inbox().await.len(), 1);
            if let (Some(before), Some(engine)) = (lists, scene.engine.test_engine()) {
                // The two `state::list` calls above are this test's own.
                assert_eq!(
                    engine.invocations("state::list") - before,
                    1,
                    "a turn's purge touches that session's keys only; it lists no scope"
                );
            }
        })
        .await;
    }
}

/// Hook input 200,000 levels deep, as the call's arguments and as its
/// result, stands down (no hint) without overflowing the test thread's
/// stack: the watch's parse and its decision before any engine call, called
/// directly (a frame nested this deep would be refused by the SDK's JSON
/// parser before it reached the worker).
#[test]
fn grant_deep_arguments_and_results_neither_recurse_nor_overflow() {
    let deep = || {
        let mut v = json!("leaf");
        for _ in 0..200_000 {
            v = Value::Array(vec![v]);
        }
        v
    };
    let hook = |result: Value| {
        let mut call = Map::new();
        call.insert("id".into(), json!("c"));
        call.insert("function_id".into(), json!("shell::run"));
        call.insert("arguments".into(), deep());
        let mut input = Map::new();
        input.insert("point".into(), json!("post_trigger"));
        input.insert("session_id".into(), json!("s"));
        input.insert("turn_id".into(), json!("t"));
        input.insert("call".into(), Value::Object(call));
        input.insert("result".into(), result);
        Value::Object(input)
    };
    for result in [json!({"is_error": false}), deep()] {
        let input = parse_hook_input(hook(result)).expect("a hook input of any depth parses");
        let out = folder_request(&input);
        assert!(matches!(out, Err(StandDown::NoHint)), "{out:?}");
        drop(input);
    }
}

each_generation! {
    /// The first layout kept one ask counter per call under
    /// `approval_grant_attempts`; boot moves them into the per-session records,
    /// so a call asked before an upgrade keeps its count.
    async fn grant_counters_of_the_first_layout_move_at_boot(generation) {
        on_each_engine(&label("grant_counters_migrate", generation), |engine| async move {
            let mut scene = scene_with(engine, HarnessOptions::generation(generation), 3).await;
            scene.stop_worker().await;
            for (sid, cid, turn, count) in [("s9", "c9", "t9", 2), ("s9", "c10", "t9", 1), ("s8", "c1", "t8", 3)] {
                scene
                    .ok(
                        "state::set",
                        json!({"scope": "approval_grant_attempts", "key": format!("{sid}/{cid}"),
                               "value": {"session_id": sid, "function_call_id": cid, "turn_id": turn, "count": count}}),
                    )
                    .await;
            }
            scene.restart_worker().await;
            let s9 = scene.ok("state::get", json!({"scope": "approval_grant_asks", "key": "s9"})).await;
            assert_eq!(s9["turns"]["t9"], json!({"c9": 2, "c10": 1}), "{s9}");
            let s8 = scene.ok("state::get", json!({"scope": "approval_grant_asks", "key": "s8"})).await;
            assert_eq!(s8["turns"]["t8"]["c1"], 3, "{s8}");
            assert!(scene.scope("approval_grant_attempts").await.is_empty());
        })
        .await;
    }
}

/// A folder prompt of a call whose ids hold a secret is never recorded
/// (contract §26.5): the watch stands down before it reads or writes
/// anything, as it does for ids it cannot key a record with; the same
/// prompt under ordinary ids asks for the folder.
#[test]
fn rule_26_5_a_folder_prompt_under_an_id_that_holds_a_secret_stands_down() {
    let input = |session_id: &str, call_id: &str| {
        parse_hook_input(json!({"point": "post_trigger", "session_id": session_id, "turn_id": "t1",
            "step": 1, "depth": 0, "metadata": {"working_dir": "/w/s1"},
            "call": {"id": call_id, "function_id": "shell::read", "arguments": {"path": "/data/a/f"}},
            "result": {"is_error": true, "content": [{"type": "text", "text": "x"}],
                "details": {"error": {"code": "S215", "message": "path escapes the fs jail roots [/w/s1]: /data/a/f grant_hint={\"v\":1,\"dir\":\"/data/a\",\"path\":\"/data/a/f\",\"code\":\"S215\"}"}}}}))
        .expect("a hook input")
    };
    assert!(folder_request(&input("s1", "c1")).is_ok());
    for (sid, cid) in [
        ("s-ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B", "c1"),
        ("s1", "c-ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B"),
    ] {
        let out = folder_request(&input(sid, cid));
        assert!(matches!(out, Err(StandDown::SecretInId)), "{out:?}");
    }
}
