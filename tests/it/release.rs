//! Releasing a held call (contract §20): one path for every decision, side
//! effects only after the harness confirmed, and exactly one outcome per
//! record whatever races — a human's resolve, a link, the expiry and a
//! turn's end on the same record.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, CallState, Generation, HarnessOptions};
use approval_gate_testkit::shell::{Dialect, JailShell};
use serde_json::{json, Value};

use crate::common::*;
use crate::links::{link_of, spec, Links};

/// A scene whose `shell::read` is jailed to `/srv` (so `/data/...` asks for
/// a folder), with a `shell` configuration entry to persist into.
async fn folder_scene(engine: EngineFixture, generation: Generation) -> Scene {
    let scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
    scene
        .register_shell_config(json!({"fs": {"host_roots": ["/srv"]}}))
        .await;
    scene.jail_shell_to_srv().await;
    scene
}

async fn folder_prompt(scene: &Scene, sid: &str, cid: &str, dir: &str) {
    let state = scene
        .harness
        .call(
            CallSpec::new(
                sid,
                format!("t_{sid}"),
                cid,
                "shell::read",
                json!({"path": format!("{dir}/f")}),
            )
            .with_working_dir(&format!("/w/{sid}"))
            .with_fs_root(&format!("/w/{sid}")),
        )
        .await;
    assert!(state.is_held(), "{state:?}");
    let shown = scene.get_pending(sid, cid).await;
    let kind = match scene.harness.generation() {
        Generation::G1 => "folder_access",
        Generation::G2 => "filesystem_access",
    };
    assert_eq!(shown["pending"]["kind"], kind, "{shown}");
}

async fn host_roots(scene: &Scene) -> Value {
    scene.ok("configuration::get", json!({"id": "shell"})).await["value"]["fs"]["host_roots"]
        .clone()
}

each_generation! {
    async fn rule_20_folder_grants_and_persists_follow_the_harness(generation) {
        on_test_engine(&label("release_folder_effects", generation), |engine| async move {
            let scene = folder_scene(engine, generation).await;
            let faults = scene.engine.test_engine().unwrap().faults();

            // The harness fails the release: the session grant made before it
            // is taken back, and nothing is persisted.
            folder_prompt(&scene, "s1", "c1", "/data/a").await;
            faults.fail("harness::function::resolve", "DOWN", "harness down", Some(1));
            let err = scene
                .call(
                    "approval::resolve",
                    json!({"session_id": "s1", "function_call_id": "c1", "decision": "allow", "grant_scope": "always"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "approval/harness_unavailable");
            assert!(scene.harness.grants("s1").is_empty(), "the grant was taken back");
            assert_eq!(host_roots(&scene).await, json!(["/srv"]));
            let shown = scene.get_pending("s1", "c1").await;
            assert!(shown["pending"].get("releasing").is_none(), "pending again: {shown}");

            // The harness no longer holds the call: resolved: false, the grant
            // is taken back again.
            scene
                .ok(
                    "harness::function::resolve",
                    json!({"session_id": "s1", "turn_id": "t_s1", "function_call_id": "c1", "action": "deliver",
                           "is_error": true, "content": [{"type": "text", "text": "answered elsewhere"}]}),
                )
                .await;
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s1", "function_call_id": "c1", "decision": "allow", "grant_scope": "session"}),
                )
                .await;
            assert_eq!(out["not_held"], true, "{out}");
            assert!(scene.harness.grants("s1").is_empty(), "the grant was taken back");
            assert_eq!(host_roots(&scene).await, json!(["/srv"]));

            // A revoke the harness refuses is kept and retried until it lands.
            folder_prompt(&scene, "s2", "c2", "/data/b").await;
            faults.fail("harness::function::resolve", "DOWN", "harness down", Some(1));
            let revoke = match generation {
                Generation::G1 => "harness::workspace::revoke",
                Generation::G2 => "harness::filesystem::revoke",
            };
            faults.fail(revoke, "DOWN", "grant store down", Some(2));
            let err = scene
                .call(
                    "approval::resolve",
                    json!({"session_id": "s2", "function_call_id": "c2", "decision": "allow", "grant_scope": "session"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "approval/harness_unavailable");
            assert_eq!(scene.harness.grants("s2"), vec!["/data/b".to_string()], "not taken back yet");
            assert_eq!(scene.scope("approval_revokes").await.len(), 1, "the revoke is kept");
            assert!(
                eventually(Duration::from_secs(10), || scene.harness.grants("s2").is_empty()).await,
                "the kept revoke was retried"
            );
            assert!(eventually_empty(&scene, "approval_revokes").await);

            // Confirmed: the grant stays and the dir is persisted.
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s2", "function_call_id": "c2", "decision": "allow", "grant_scope": "always"}),
                )
                .await;
            assert_eq!(out["resolved"], true, "{out}");
            assert_eq!(scene.harness.grants("s2"), vec!["/data/b".to_string()]);
            assert_eq!(host_roots(&scene).await, json!(["/srv", "/data/b"]));
        })
        .await;
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn eventually_empty(scene: &Scene, scope: &str) -> bool {
    for _ in 0..50 {
        if scene.scope(scope).await.is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

each_generation! {
    async fn rule_20_remember_is_stored_only_after_the_harness_confirmed(generation) {
        on_test_engine(&label("release_remember", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            let created = l
                .scene
                .sink("rr-created", "approval::pending-created", json!({}))
                .await;
            l.scene.hold(spec("s_m", "c1", "demo::echo", json!({}))).await;
            let url = link_of(&created, 0).await;
            let approved = || async {
                l.scene
                    .ok("approval::get-settings", json!({"session_id": "s_m"}))
                    .await["settings"]["approved_always"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            };
            // "Allow and don't ask again", but the harness fails: 503, and the
            // function is not remembered.
            let faults = l.scene.engine.test_engine().unwrap().faults();
            faults.fail("harness::function::resolve", "DOWN", "harness down", Some(1));
            let r = l
                .decide(&url, json!({"decision": "allow", "remember": true}))
                .await;
            assert_eq!(r.status(), 503);
            assert!(approved().await.is_empty(), "remembered before the harness confirmed");
            // The human now denies: the call is denied, and the next call of the
            // function still asks.
            let r = l.decide(&url, json!({"decision": "deny"})).await;
            assert_eq!(r.status(), 200);
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            assert!(approved().await.is_empty());
            l.scene.hold(spec("s_m", "c2", "demo::echo", json!({}))).await;
            assert_eq!(l.scene.harness.target_runs("demo::echo"), 0);

            // A release the harness no longer holds remembers nothing either.
            let url = link_of(&created, 1).await;
            l.scene
                .ok(
                    "harness::function::resolve",
                    json!({"session_id": "s_m", "turn_id": "t_s_m", "function_call_id": "c2", "action": "deliver",
                           "is_error": true, "content": [{"type": "text", "text": "answered elsewhere"}]}),
                )
                .await;
            let r = l
                .decide(&url, json!({"decision": "allow", "remember": true}))
                .await;
            assert_eq!(
                r.json::<Value>().await.unwrap(),
                json!({"resolved": false, "not_held": true})
            );
            assert!(approved().await.is_empty());

            // Confirmed: remembered, exactly the function the human saw.
            l.scene.hold(spec("s_m", "c3", "demo::echo", json!({}))).await;
            let url = link_of(&created, 2).await;
            let r = l
                .decide(&url, json!({"decision": "allow", "remember": true}))
                .await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            let remembered = approved().await;
            assert_eq!(remembered.len(), 1, "{remembered:?}");
            assert_eq!(remembered[0]["function_id"], "demo::echo");
        })
        .await;
    }
}

each_generation! {
    async fn rule_19_access_duration_is_an_alias_of_grant_scope(generation) {
        on_test_engine(&label("release_access_duration", generation), |engine| async move {
            let scene = folder_scene(engine, generation).await;
            folder_prompt(&scene, "s1", "c1", "/data/a").await;
            let err = scene
                .call(
                    "approval::resolve",
                    json!({"session_id": "s1", "function_call_id": "c1", "decision": "allow",
                           "grant_scope": "once", "access_duration": "session"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code_of(&err), "approval/invalid_payload");
            assert!(scene.harness.grants("s1").is_empty(), "nothing happened");
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s1", "function_call_id": "c1", "decision": "allow", "access_duration": "session"}),
                )
                .await;
            assert_eq!(out["resolved"], true, "{out}");
            assert_eq!(scene.harness.grants("s1"), vec!["/data/a".to_string()]);
        })
        .await;
    }
}

each_generation! {
    /// Half the trials on each generation (500 on the test engine, 100 on a
    /// real one).
    async fn rule_20_racing_resolve_link_expiry_and_purge_leave_each_record_exactly_once(generation) {
        on_test_engine(&label("release_races", generation), |engine| async move {
            run_release_races(engine, generation, 500).await;
        })
        .await;
        if let Some(real) = EngineFixture::start_real_with(
            &label("release_races_real", generation),
            LostReplies::real_engine_options(),
        )
        .await
        {
            tokio::time::timeout(Duration::from_secs(240), run_release_races(real, generation, 100))
                .await
                .expect("bounded");
        }
    }
}

/// Per trial: a hold with a one-second timeout and a link; around its
/// deadline (up to 60 ms either side) a human's resolve, a link's opposite
/// decision and, for every third trial, the end of its turn.
async fn run_release_races(engine: EngineFixture, generation: Generation, trials: usize) {
    let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
    let scene = &l.scene;
    let resolved = scene
        .sink("rl-resolved", "approval::pending-resolved", json!({}))
        .await;
    let mut value = crate::links::config(&l.base, json!(["!approval::*"]), None);
    value["pending_timeout_ms"] = json!(1_000);
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(eventually(WAIT, || w.config().pending_timeout_ms == Some(1_000)).await);
    let lost = LostReplies::new(&scene.engine);
    let mut unknown: HashSet<String> = HashSet::new();
    let batch = 100;
    let mut done = 0;
    while done < trials {
        let n = batch.min(trials - done);
        let holds = (done..done + n).map(|i| {
            let h = scene.harness.clone();
            async move {
                h.call(CallSpec::new(
                    format!("rs_{i}"),
                    format!("rt_{i}"),
                    format!("rc_{i}"),
                    "demo::echo",
                    json!({}),
                ))
                .await
            }
        });
        let outs = futures_util::future::join_all(holds).await;
        for (i, out) in (done..done + n).zip(outs) {
            if !out.is_held() {
                assert!(lost.hook_timed_out(&out), "{out:?}");
                unknown.insert(format!("rc_{i}"));
            }
        }
        let races = (done..done + n)
            .filter(|i| !unknown.contains(&format!("rc_{i}")))
            .map(|i| {
                let (l, lost) = (&l, &lost);
                async move {
                    let (sid, cid) = (format!("rs_{i}"), format!("rc_{i}"));
                    let request = json!({"session_id": sid, "function_call_id": cid});
                    let shown = loop {
                        match l.scene.call("approval::get-pending", request.clone()).await {
                            Ok(shown) => break shown,
                            Err(err) => assert!(lost.unanswered(&err), "get-pending: {err:?}"),
                        }
                    };
                    let expires_at = shown["pending"]["expires_at"].as_u64().expect("expires_at");
                    let url = shown["pending"]["approval_url"].as_str().expect("a link").to_string();
                    let offset = |salt: usize| ((i * 7919 + salt * 104_729) % 121) as i64 - 60;
                    let at = |salt| (expires_at as i64 + offset(salt)) as u64;
                    let sleep_until = |t: u64| {
                        tokio::time::sleep(Duration::from_millis(t.saturating_sub(now_ms())))
                    };
                    let (human, link) = if i % 2 == 0 { ("allow", "deny") } else { ("deny", "allow") };
                    let resolve = async {
                        sleep_until(at(1)).await;
                        l.scene
                            .call(
                                "approval::resolve",
                                json!({"session_id": sid, "function_call_id": cid, "decision": human}),
                            )
                            .await
                            .unwrap_or_else(|err| {
                                assert!(lost.unanswered(&err), "resolve never errors here: {err:?}");
                                Value::Null
                            })
                    };
                    let posted = async {
                        sleep_until(at(3)).await;
                        let r = l.decide(&url, json!({"decision": link})).await;
                        let status = r.status().as_u16();
                        let body: Value = r.json().await.unwrap_or(Value::Null);
                        assert!(matches!(status, 200 | 410), "link answered {status}: {body}");
                        (status, body)
                    };
                    let purge = async {
                        if i % 3 == 0 {
                            sleep_until(at(2)).await;
                            l.scene
                                .harness
                                .complete_turn(&sid, &format!("rt_{i}"), "cancelled")
                                .await;
                        }
                    };
                    let (answer, (status, body), ()) = tokio::join!(resolve, posted, purge);
                    (cid, answer, status, body)
                }
            });
        for (cid, answer, status, body) in futures_util::future::join_all(races).await {
            if answer.is_null() {
                unknown.insert(cid.clone());
            }
            // At most one of the two human channels is told its decision
            // was taken.
            let taken = (answer["resolved"] == true) as u8
                + (status == 200 && body["resolved"] == true) as u8;
            assert!(taken <= 1, "{cid}: resolve {answer}, link {status} {body}");
        }
        done += n;
    }
    assert!(
        eventually(Duration::from_secs(30), || resolved.events().len()
            >= trials)
        .await,
        "got {} events for {trials} trials",
        resolved.events().len()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut per_record: HashMap<String, Vec<Value>> = HashMap::new();
    for e in resolved.events() {
        per_record
            .entry(e["function_call_id"].as_str().unwrap().to_string())
            .or_default()
            .push(e);
    }
    assert_eq!(per_record.len(), trials);
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for (cid, events) in &per_record {
        assert_eq!(
            events.len(),
            1,
            "{cid} announced {} times: {events:?}",
            events.len()
        );
        let outcome = events[0]["outcome"].as_str().unwrap().to_string();
        let i: usize = cid.trim_start_matches("rc_").parse().unwrap();
        let state = scene.harness.state(&format!("rs_{i}"), cid);
        let denied_by = match &state {
            Some(CallState::Delivered { result, .. }) => result["details"]["denied_by"].as_str(),
            _ => None,
        };
        // The one event agrees with what the harness did.
        match outcome.as_str() {
            "timeout" => assert_eq!(denied_by, Some("timeout"), "{cid}: {state:?}"),
            "allow" => assert!(
                matches!(state, Some(CallState::Completed { .. })),
                "{cid}: {state:?}"
            ),
            "deny" => assert_eq!(denied_by, Some("user"), "{cid}: {state:?}"),
            "aborted" => assert!(
                !matches!(state, Some(CallState::Completed { .. })),
                "{cid}: aborted, but it ran: {state:?}"
            ),
            other => panic!("{cid}: unexpected outcome {other}"),
        }
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!("release races, {trials} trials: {outcomes:?}");
    lost.check(&scene.engine, "release_races").await;
    assert!(
        outcomes.get("timeout").is_some_and(|n| *n > 0),
        "{outcomes:?}"
    );
    assert!(
        outcomes.get("allow").unwrap_or(&0) + outcomes.get("deny").unwrap_or(&0) > 0,
        "{outcomes:?}"
    );
    assert!(
        scene.inbox().await.is_empty(),
        "no record left, none left claimed"
    );
    let left: Vec<Value> = scene.pending_in_state().await;
    assert!(left.is_empty(), "left in approval_pending: {left:?}");
}

each_generation! {
    async fn rule_20_a_release_that_times_out_remembers_and_persists_nothing(generation) {
        on_test_engine(&label("release_timing_out", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*", "shell::*"]), None).await;
            let scene = &l.scene;
            scene
                .targets
                .add("shell::read", Arc::new(JailShell::new(Dialect::Shell, &["/srv"])))
                .await;
            scene
                .ok(
                    "configuration::register",
                    json!({"id": "shell", "name": "shell", "description": "shell", "schema": {"type": "object"},
                           "initial_value": {"fs": {"host_roots": ["/srv"]}}}),
                )
                .await;
            let mut value = crate::links::config(&l.base, json!(["!approval::*", "shell::*"]), None);
            value["release_timeout_ms"] = json!(1_500);
            value["resolve_wait_ms"] = json!(500);
            scene
                .ok("configuration::set", json!({"id": "approval-gate", "value": value}))
                .await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().release_timeout_ms == 1_500).await);
            let created = scene.sink("to-created", "approval::pending-created", json!({})).await;
            let resolved = scene.sink("to-resolved", "approval::pending-resolved", json!({})).await;
            let faults = scene.engine.test_engine().unwrap().faults();

            // remember: the harness takes the release but its answer never comes.
            assert!(scene.harness.call(spec("s_t", "c1", "demo::echo", json!({}))).await.is_held());
            let url = link_of(&created, 0).await;
            faults.stall("harness::function::resolve", Duration::from_secs(20), Some(1));
            let r = l.decide(&url, json!({"decision": "allow", "remember": true})).await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": false, "releasing": true}));
            assert!(eventually(WAIT, || resolved.events().len() == 1).await);
            assert_eq!(resolved.events()[0]["outcome"], "unknown");
            let settings = scene.ok("approval::get-settings", json!({"session_id": "s_t"})).await;
            assert_eq!(settings["settings"]["approved_always"], json!([]), "{settings}");

            // always: the grant made before the release stays (the call may have
            // run on it), but nothing is persisted into the shell's roots.
            folder_prompt(scene, "s_f", "c2", "/data/t").await;
            faults.stall("harness::function::resolve", Duration::from_secs(20), Some(1));
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_f", "function_call_id": "c2", "decision": "allow", "grant_scope": "always"}),
                )
                .await;
            assert_eq!(out, json!({"resolved": false, "releasing": true}));
            assert!(eventually(WAIT, || resolved.events().len() == 2).await);
            assert_eq!(resolved.events()[1]["outcome"], "unknown");
            assert_eq!(scene.harness.grants("s_f"), vec!["/data/t".to_string()]);
            assert_eq!(host_roots(scene).await, json!(["/srv"]));
        })
        .await;
    }
}
