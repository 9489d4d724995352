//! Holds that end (`architecture/contract.md` § Holds that end): opt-in
//! deadlines on held calls. At `escalate_at` the worker emits
//! `approval::pending-escalated` once; at `expires_at` the harness gets a
//! `denied_by: "timeout"` denial, the record leaves through the emit gate and
//! `pending-resolved` says `timeout`. Every scenario runs on the test engine,
//! then on a real engine when one is given.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, CallState, Generation, HarnessOptions};
use serde_json::{json, Value};

use crate::common::*;

/// The wall clock in ms since the epoch (the worker's timestamps use it).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn spec(sid: &str, cid: &str) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, "demo::echo", json!({"x": 1}))
}

/// Sets the deadlines of new holds and waits until the worker uses them.
///
/// A real engine's file-backed configuration store can lose an entry's schema
/// when its directory watcher re-reads a file the engine was writing (the
/// schema is not kept on disk): `configuration::set` then answers
/// `SCHEMA_UNAVAILABLE` until the owning worker registers again. The worker
/// registers at boot, so a restart restores it.
async fn set_deadlines(scene: &mut Scene, timeout: Option<u64>, escalate: Option<u64>) {
    let value = json!({"pending_timeout_ms": timeout, "escalate_after_ms": escalate});
    let request = json!({"id": "approval-gate", "value": value});
    if let Err(err) = scene.call("configuration::set", request.clone()).await {
        assert_eq!(code_of(&err), "SCHEMA_UNAVAILABLE", "{err}");
        eprintln!("note: the engine lost the configuration schema ({err}); restarting the worker, which registers it");
        let bindings = scene.live_bindings();
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        assert!(eventually(WAIT, || scene.live_bindings() >= bindings).await);
        scene.ok("configuration::set", request).await;
    }
    let w = scene.worker.as_ref().expect("a worker");
    assert!(
        eventually(WAIT, || {
            let c = w.config();
            c.pending_timeout_ms == timeout && c.escalate_after_ms == escalate
        })
        .await,
        "the worker never loaded {value}"
    );
}

/// The held record, as `get-pending` shows it.
async fn held(scene: &Scene, sid: &str, cid: &str) -> Value {
    scene.get_pending(sid, cid).await["pending"].clone()
}

/// Waits until the harness no longer holds the call; its last state.
async fn settled(scene: &Scene, sid: &str, cid: &str, timeout: Duration) -> Option<CallState> {
    scene
        .harness
        .wait_for_state(sid, cid, timeout, |s| {
            !s.is_held() && !matches!(s, CallState::Running)
        })
        .await
}

/// The text and envelope the agent got for a delivered denial.
fn delivered(state: &Option<CallState>) -> (String, Value) {
    match state {
        Some(CallState::Delivered { result, .. }) => {
            assert_eq!(result["is_error"], true, "{result}");
            (
                result["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                result["details"].clone(),
            )
        }
        other => panic!("expected a delivered denial, got {other:?}"),
    }
}

const TIMEOUT_TEXT: &str = "Approval timed out: no one approved demo::echo within 1 second, so it was not run. Ask the user to approve it, or try another way.";

each_generation! {
    async fn expiry_denies_within_a_second_of_the_deadline_and_the_agent_reads_why(generation) {
        on_each_engine(&label("expiry_timing", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let created = scene
                .sink("exp-created", "approval::pending-created", json!({}))
                .await;
            let resolved = scene
                .sink("exp-resolved", "approval::pending-resolved", json!({}))
                .await;
            // Without deadlines a record carries none.
            assert!(scene
                .harness
                .call(spec("s_plain", "c0"))
                .await
                .is_held());
            let plain = held(&scene, "s_plain", "c0").await;
            assert!(plain.get("expires_at").is_none(), "{plain}");
            assert!(plain.get("escalate_at").is_none(), "{plain}");

            set_deadlines(&mut scene, Some(1_000), None).await;
            let evaluated = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_exp", "function_id": "demo::echo"}),
                )
                .await;
            assert_eq!(evaluated["verdict"], "needs_approval");
            assert_eq!(evaluated["deadline_ms"], 1_000);
            let denied = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_exp", "function_id": "approval::resolve"}),
                )
                .await;
            assert!(denied.get("deadline_ms").is_none(), "{denied}");

            assert!(scene.harness.call(spec("s_exp", "c1")).await.is_held());
            let record = held(&scene, "s_exp", "c1").await;
            let pending_at = record["pending_at"].as_u64().expect("pending_at");
            let expires_at = record["expires_at"].as_u64().expect("expires_at");
            assert_eq!(expires_at, pending_at + 1_000);
            assert!(record.get("escalate_at").is_none(), "{record}");
            let listed = scene.inbox().await;
            assert!(listed
                .iter()
                .any(|r| r["function_call_id"] == "c1" && r["expires_at"] == expires_at));
            let announced = created.wait_for(2, WAIT).await;
            assert!(
                announced
                    .iter()
                    .any(|e| e["function_call_id"] == "c1" && e["expires_at"] == expires_at),
                "{announced:?}"
            );

            // Still held half-way.
            let half_way = pending_at + 500;
            tokio::time::sleep(Duration::from_millis(half_way.saturating_sub(now_ms()))).await;
            assert!(scene.harness.state("s_exp", "c1").is_some_and(|s| s.is_held()));
            let state = settled(&scene, "s_exp", "c1", Duration::from_secs(5)).await;
            let seen_at = now_ms();
            let (text, details) = delivered(&state);
            assert_eq!(text, TIMEOUT_TEXT);
            assert_eq!(details["denied_by"], "timeout");
            assert_eq!(details["reason"], TIMEOUT_TEXT);
            assert_eq!(details["function_id"], "demo::echo");
            assert_eq!(details["args_excerpt"], json!({"x": 1}));
            assert_eq!(scene.harness.target_runs("demo::echo"), 0);

            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events.len(), 1, "{events:?}");
            let event = &events[0];
            assert_eq!(event["function_call_id"], "c1");
            assert_eq!(event["outcome"], "timeout");
            assert_eq!(event["reason"], "timeout");
            let resolved_at = event["resolved_at"].as_u64().expect("resolved_at");
            let late = resolved_at as i64 - expires_at as i64;
            eprintln!(
                "expiry: record left {late} ms after expires_at; the harness state was seen {} ms after it",
                seen_at as i64 - expires_at as i64
            );
            assert!(
                (0..1_000).contains(&late),
                "the record left {late} ms after its deadline"
            );
            assert!(held(&scene, "s_exp", "c1").await.is_null());
            assert!(scene
                .pending_in_state()
                .await
                .iter()
                .all(|r| r["function_call_id"] != "c1"));
            // The record held before the change has no deadline and stays.
            assert!(!held(&scene, "s_plain", "c0").await.is_null());
            assert!(scene
                .harness
                .state("s_plain", "c0")
                .is_some_and(|s| s.is_held()));
        })
        .await;
    }
}

each_generation! {
    async fn a_late_resolve_answers_resolved_false_and_reaches_no_one(generation) {
        on_each_engine(&label("late_resolve", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            set_deadlines(&mut scene, Some(1_000), None).await;
            assert!(scene.harness.call(spec("s_late", "c1")).await.is_held());
            let state = settled(&scene, "s_late", "c1", Duration::from_secs(5)).await;
            let (_, details) = delivered(&state);
            assert_eq!(details["denied_by"], "timeout");
            let requests = scene.harness.resolve_requests().len();
            assert_eq!(requests, 1);
            for decision in ["allow", "deny"] {
                let out = scene
                    .ok(
                        "approval::resolve",
                        json!({"session_id": "s_late", "function_call_id": "c1", "decision": decision}),
                    )
                    .await;
                assert_eq!(out["resolved"], false, "{out}");
            }
            assert_eq!(scene.harness.resolve_requests().len(), requests);
            assert_eq!(scene.harness.target_runs("demo::echo"), 0);
        })
        .await;
    }
}

each_generation! {
    async fn escalation_fires_once_through_the_binding_filters_and_survives_a_restart(generation) {
        on_each_engine(&label("escalation_once", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            scene.sessions.put(
                "s_esc",
                json!({"title": "Escalate me", "metadata": {"team": "a"}}),
            );
            let all = scene
                .sink("esc-all", "approval::pending-escalated", json!({}))
                .await;
            let team = scene
                .sink(
                    "esc-team",
                    "approval::pending-escalated",
                    json!({"metadata": {"team": "a"}}),
                )
                .await;
            let other = scene
                .sink(
                    "esc-other",
                    "approval::pending-escalated",
                    json!({"session_id": "s_nobody"}),
                )
                .await;
            let resolved = scene
                .sink("esc-resolved", "approval::pending-resolved", json!({}))
                .await;
            set_deadlines(&mut scene, None, Some(1_000)).await;
            assert!(scene.harness.call(spec("s_esc", "c1")).await.is_held());
            let record = held(&scene, "s_esc", "c1").await;
            let escalate_at = record["escalate_at"].as_u64().expect("escalate_at");
            assert_eq!(escalate_at, record["pending_at"].as_u64().unwrap() + 1_000);
            assert!(record.get("expires_at").is_none(), "{record}");
            assert!(record.get("escalated_at").is_none(), "{record}");

            let events = all.wait_for(1, Duration::from_secs(5)).await;
            assert_eq!(events.len(), 1, "{events:?}");
            let event = &events[0];
            assert_eq!(event["status"], "pending");
            assert_eq!(event["function_call_id"], "c1");
            assert_eq!(event["escalate_at"], escalate_at);
            assert_eq!(event["session_metadata"], json!({"team": "a"}));
            let escalated_at = event["escalated_at"].as_u64().expect("escalated_at");
            assert!(
                (escalate_at..escalate_at + 1_000).contains(&escalated_at),
                "escalated at {escalated_at}, due {escalate_at}"
            );
            assert_eq!(team.wait_for(1, WAIT).await.len(), 1);
            // The call stays held, and says it was escalated.
            assert!(scene
                .harness
                .state("s_esc", "c1")
                .is_some_and(|s| s.is_held()));
            let record = held(&scene, "s_esc", "c1").await;
            assert_eq!(record["escalated_at"], escalated_at);
            let stored: Vec<Value> = scene.pending_in_state().await;
            assert!(stored
                .iter()
                .any(|r| r["function_call_id"] == "c1" && r["escalated_at"] == escalated_at));

            // A restarted worker reads escalated_at and does not escalate again.
            scene.restart_worker().await;
            scene.wait_for_gate_binding().await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.event_bindings() >= 4).await);
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            assert_eq!(all.events().len(), 1, "{:?}", all.events());
            assert_eq!(team.events().len(), 1);
            assert!(other.events().is_empty(), "{:?}", other.events());

            // The escalated call is resolved like any other.
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_esc", "function_call_id": "c1", "decision": "allow"}),
                )
                .await;
            assert_eq!(out["resolved"], true, "{out}");
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0]["outcome"], "allow");
            assert_eq!(scene.harness.target_runs("demo::echo"), 1);
            stay_quiet().await;
            assert_eq!(all.events().len(), 1);
        })
        .await;
    }
}

each_generation! {
    async fn escalation_then_expiry_each_once(generation) {
        on_each_engine(&label("escalation_then_expiry", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let escalated = scene
                .sink("ee-escalated", "approval::pending-escalated", json!({}))
                .await;
            let resolved = scene
                .sink("ee-resolved", "approval::pending-resolved", json!({}))
                .await;
            set_deadlines(&mut scene, Some(3_000), Some(1_000)).await;
            assert!(scene.harness.call(spec("s_ee", "c1")).await.is_held());
            let record = held(&scene, "s_ee", "c1").await;
            let pending_at = record["pending_at"].as_u64().unwrap();
            assert_eq!(record["escalate_at"], pending_at + 1_000);
            assert_eq!(record["expires_at"], pending_at + 3_000);
            assert_eq!(escalated.wait_for(1, Duration::from_secs(5)).await.len(), 1);
            let state = settled(&scene, "s_ee", "c1", Duration::from_secs(5)).await;
            let (text, details) = delivered(&state);
            assert_eq!(details["denied_by"], "timeout");
            assert!(
                text.starts_with("Approval timed out: no one approved demo::echo within 3 seconds"),
                "{text}"
            );
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0]["outcome"], "timeout");
            stay_quiet().await;
            assert_eq!(escalated.events().len(), 1);
            assert_eq!(resolved.events().len(), 1);
        })
        .await;
    }
}

each_generation! {
    async fn restored_records_expire_right_after_ready_or_at_their_deadline(generation) {
        on_each_engine(&label("restored_expiry", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let resolved = scene
                .sink("rs-resolved", "approval::pending-resolved", json!({}))
                .await;
            set_deadlines(&mut scene, Some(4_000), None).await;
            assert!(scene.harness.call(spec("s_old", "c1")).await.is_held());
            tokio::time::sleep(Duration::from_millis(2_000)).await;
            assert!(scene.harness.call(spec("s_new", "c2")).await.is_held());
            let old = held(&scene, "s_old", "c1").await["expires_at"]
                .as_u64()
                .expect("expires_at");
            let new = held(&scene, "s_new", "c2").await["expires_at"]
                .as_u64()
                .expect("expires_at");
            scene.stop_worker().await;
            // c1's deadline passes while the worker is down; c2's does not.
            let wait = (old + 300).saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            assert!(scene.harness.state("s_old", "c1").is_some_and(|s| s.is_held()));
            let started = Instant::now();
            scene.restart_worker().await;
            let booted = started.elapsed();
            let state = settled(&scene, "s_old", "c1", Duration::from_secs(5)).await;
            let after_ready = started.elapsed().saturating_sub(booted);
            let (_, details) = delivered(&state);
            assert_eq!(details["denied_by"], "timeout");
            eprintln!(
                "restored expiry: boot took {booted:?}; the overdue hold was delivered {after_ready:?} after ready"
            );
            assert!(
                after_ready < Duration::from_secs(1),
                "the overdue hold expired {after_ready:?} after ready"
            );
            assert!(scene.harness.state("s_new", "c2").is_some_and(|s| s.is_held()));
            let state = settled(&scene, "s_new", "c2", Duration::from_secs(6)).await;
            let (_, details) = delivered(&state);
            assert_eq!(details["denied_by"], "timeout");
            let events = resolved.wait_for(2, WAIT).await;
            let at: HashMap<String, u64> = events
                .iter()
                .map(|e| {
                    assert_eq!(e["outcome"], "timeout", "{e}");
                    (
                        e["function_call_id"].as_str().unwrap().to_string(),
                        e["resolved_at"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(at.len(), 2, "{events:?}");
            assert!(
                (new..new + 1_000).contains(&at["c2"]),
                "c2 left at {}, due {new}",
                at["c2"]
            );
            assert!(scene.inbox().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn a_failing_harness_keeps_the_expired_record_until_it_recovers(generation) {
        on_each_engine(&label("harness_down_at_expiry", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let resolved = scene
                .sink("hd-resolved", "approval::pending-resolved", json!({}))
                .await;
            set_deadlines(&mut scene, Some(1_000), None).await;
            // Down at the deadline and at the first retry: on the test engine
            // nothing serves the function (as when the harness is gone); on a
            // real engine the harness answers with an error.
            match scene.engine.test_engine() {
                Some(engine) => engine.faults().fail(
                    "harness::function::resolve",
                    "function_not_found",
                    "function_not_found: harness::function::resolve",
                    Some(2),
                ),
                None => scene.harness.fail_resolves(2),
            }
            assert!(scene.harness.call(spec("s_down", "c1")).await.is_held());
            let expires_at = held(&scene, "s_down", "c1").await["expires_at"]
                .as_u64()
                .expect("expires_at");
            // Past the deadline and the first failure: still held and listed.
            let wait = (expires_at + 1_500).saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            assert!(scene
                .harness
                .state("s_down", "c1")
                .is_some_and(|s| s.is_held()));
            assert!(!held(&scene, "s_down", "c1").await.is_null());
            assert!(resolved.events().is_empty());
            // Retried 1 s, then 2 s after the failures: delivered once it answers.
            let state = settled(&scene, "s_down", "c1", Duration::from_secs(6)).await;
            let (text, details) = delivered(&state);
            assert_eq!(details["denied_by"], "timeout");
            assert!(text.contains("within 1 second"), "{text}");
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0]["outcome"], "timeout");
            let took = events[0]["resolved_at"].as_u64().unwrap() - expires_at;
            eprintln!("harness down at expiry: delivered {took} ms after the deadline (two failures)");
            assert!(
                took >= 3_000,
                "two failures with backoff take 1 s + 2 s, not {took} ms"
            );
            if scene.engine.test_engine().is_none() {
                assert_eq!(scene.harness.resolve_requests().len(), 3);
            }
            assert!(held(&scene, "s_down", "c1").await.is_null());
            stay_quiet().await;
            assert_eq!(resolved.events().len(), 1);
        })
        .await;
    }
}

each_generation! {
    /// Half the trials on each generation (500 on the test engine, 100 on a
    /// real one).
    async fn racing_resolve_timeout_and_purge_leave_each_record_exactly_once(generation) {
        on_test_engine(&label("racing_expiry", generation), |engine| async move {
            run_expiry_races(engine, generation, 500).await;
        })
        .await;
        if let Some(real) = EngineFixture::start_real_with(
            &label("racing_expiry_real", generation),
            LostReplies::real_engine_options(),
        )
        .await
        {
            tokio::time::timeout(Duration::from_secs(240), run_expiry_races(real, generation, 100))
                .await
                .expect("bounded");
        }
    }
}

/// Per trial: a hold with a one-second timeout; around its deadline (up to
/// 60 ms either side) a human's allow or deny and, for every third trial,
/// the end of its turn.
async fn run_expiry_races(engine: EngineFixture, generation: Generation, trials: usize) {
    let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
    let resolved = scene
        .sink("xr-resolved", "approval::pending-resolved", json!({}))
        .await;
    set_deadlines(&mut scene, Some(1_000), None).await;
    let batch = 100;
    let mut answers: HashMap<String, Value> = HashMap::new();
    // Calls whose answer a real engine dropped: what was decided for them is
    // unknown, so only the checks that do not read the answer apply.
    let lost = LostReplies::new(&scene.engine);
    let mut unknown: HashSet<String> = HashSet::new();
    let mut done = 0;
    while done < trials {
        let n = batch.min(trials - done);
        let holds = (done..done + n).map(|i| {
            let h = scene.harness.clone();
            async move {
                h.call(CallSpec::new(
                    format!("xs_{i}"),
                    format!("xt_{i}"),
                    format!("xc_{i}"),
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
                // The record was written and expires by itself.
                unknown.insert(format!("xc_{i}"));
            }
        }
        let races = (done..done + n)
            .filter(|i| !unknown.contains(&format!("xc_{i}")))
            .map(|i| {
                let (scene, lost) = (&scene, &lost);
                async move {
                    let (sid, cid) = (format!("xs_{i}"), format!("xc_{i}"));
                    let request = json!({"session_id": sid, "function_call_id": cid});
                    let expires_at = loop {
                        match scene.call("approval::get-pending", request.clone()).await {
                            Ok(shown) => {
                                break shown["pending"]["expires_at"].as_u64().expect("expires_at")
                            }
                            Err(err) => assert!(lost.unanswered(&err), "get-pending: {err:?}"),
                        }
                    };
                    // A spread that is the same on every run.
                    let offset = |salt: usize| ((i * 7919 + salt * 104_729) % 121) as i64 - 60;
                    let at = |salt| (expires_at as i64 + offset(salt)) as u64;
                    let resolve = async {
                        tokio::time::sleep(Duration::from_millis(at(1).saturating_sub(now_ms())))
                            .await;
                        scene
                            .call(
                                "approval::resolve",
                                json!({"session_id": sid, "function_call_id": cid,
                                   "decision": if i % 2 == 0 { "allow" } else { "deny" }}),
                            )
                            .await
                            .or_else(|err| {
                                assert!(
                                    lost.unanswered(&err),
                                    "resolve never errors here: {err:?}"
                                );
                                Ok::<Value, ()>(Value::Null)
                            })
                            .unwrap()
                    };
                    let purge = async {
                        if i % 3 == 0 {
                            tokio::time::sleep(Duration::from_millis(
                                at(2).saturating_sub(now_ms()),
                            ))
                            .await;
                            scene
                                .harness
                                .complete_turn(&sid, &format!("xt_{i}"), "cancelled")
                                .await;
                        }
                    };
                    let (answer, ()) = tokio::join!(resolve, purge);
                    (cid, answer)
                }
            });
        for (cid, answer) in futures_util::future::join_all(races).await {
            if answer.is_null() {
                unknown.insert(cid.clone());
            }
            answers.insert(cid, answer);
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
        let event = &events[0];
        let outcome = event["outcome"].as_str().unwrap().to_string();
        let i: usize = cid.trim_start_matches("xc_").parse().unwrap();
        let sid = format!("xs_{i}");
        let state = scene.harness.state(&sid, cid);
        // An unknown answer reads as `null`: it passes the checks that forbid
        // `resolved: true` and is exempt from the two that require it.
        let answer = &answers.get(cid).cloned().unwrap_or(Value::Null);
        let known = !unknown.contains(cid);
        let denied_by = match &state {
            Some(CallState::Delivered { result, .. }) => result["details"]["denied_by"].as_str(),
            _ => None,
        };
        // A human is never told a decision was taken when the agent got the
        // timeout, and a decision taken reached the agent.
        if denied_by == Some("timeout") {
            assert_ne!(answer["resolved"], true, "{cid}: {answer}");
        }
        if answer["resolved"] == true {
            match i % 2 {
                0 => assert!(
                    matches!(state, Some(CallState::Completed { .. })),
                    "{cid}: {state:?}"
                ),
                _ => assert_eq!(denied_by, Some("user"), "{cid}: {state:?}"),
            }
        }
        // The one event agrees with what the harness did (a purge may take
        // the record out after the harness took a decision: then it says
        // aborted, as it does for a human's resolve).
        match outcome.as_str() {
            "timeout" => assert_eq!(denied_by, Some("timeout"), "{cid}: {state:?}"),
            "allow" => {
                if known {
                    assert_eq!(answer["resolved"], true, "{cid}: {answer}");
                }
                assert!(
                    matches!(state, Some(CallState::Completed { .. })),
                    "{cid}: {state:?}"
                );
            }
            "deny" => {
                if known {
                    assert_eq!(answer["resolved"], true, "{cid}: {answer}");
                }
                assert_eq!(denied_by, Some("user"), "{cid}: {state:?}");
            }
            "aborted" => assert_ne!(answer["resolved"], true, "{cid}: {answer}"),
            other => panic!("{cid}: unexpected outcome {other}"),
        }
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!("expiry races, {trials} trials: {outcomes:?}");
    lost.check(&scene.engine, "racing_expiry").await;
    // Both sides of the race were reached.
    assert!(
        outcomes.get("timeout").is_some_and(|n| *n > 0),
        "{outcomes:?}"
    );
    assert!(
        outcomes.get("allow").unwrap_or(&0) + outcomes.get("deny").unwrap_or(&0) > 0,
        "{outcomes:?}"
    );
    assert!(scene.inbox().await.is_empty());
    let left: Vec<Value> = scene.pending_in_state().await;
    assert!(left.is_empty(), "left in approval_pending: {left:?}");
}

each_generation! {
    async fn rule_20_a_release_under_way_is_not_escalated_and_takes_the_record(generation) {
        on_test_engine(&label("resolve_across_escalation", generation), |engine| async move {
            let mut scene = Scene::start_with(engine, HarnessOptions::generation(generation)).await;
            let escalated = scene
                .sink("ra-escalated", "approval::pending-escalated", json!({}))
                .await;
            let resolved = scene
                .sink("ra-resolved", "approval::pending-resolved", json!({}))
                .await;
            set_deadlines(&mut scene, None, Some(1_000)).await;
            assert!(scene.harness.call(spec("s_ra", "c1")).await.is_held());
            // The harness runs the call at once but its answer comes 1.5 s
            // later: the escalation rewrites the record while the resolve waits.
            scene
                .engine
                .test_engine()
                .expect("the test engine")
                .faults()
                .stall(
                    "harness::function::resolve",
                    Duration::from_millis(1_500),
                    Some(1),
                );
            let out = scene
                .ok(
                    "approval::resolve",
                    json!({"session_id": "s_ra", "function_call_id": "c1", "decision": "allow"}),
                )
                .await;
            // The escalation came due while the decision was on its way to the
            // harness: a call someone decided is not escalated.
            stay_quiet().await;
            assert_eq!(
                escalated.events().len(),
                0,
                "a call whose decision is under way is not escalated"
            );
            assert_eq!(out["resolved"], true, "{out}");
            assert_eq!(scene.harness.target_runs("demo::echo"), 1);
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0]["outcome"], "allow");
            assert!(held(&scene, "s_ra", "c1").await.is_null());
            assert!(scene.pending_in_state().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn an_ask_rules_own_deadlines_win_over_the_configuration_even_in_full_mode(generation) {
        on_each_engine(&label("ask_rule_deadlines", generation), |engine| async move {
            let seed = json!({
                "default_mode": "full",
                "rules": ["!approval::*",
                    {"function": "deploy::*", "action": "ask", "rule_id": "deploys",
                     "timeout_ms": 60_000, "escalate_after_ms": 30_000},
                    "?db::*"],
                "pending_timeout_ms": 600_000,
                "escalate_after_ms": 300_000
            });
            let scene = Scene::start_seeded(engine, HarnessOptions::generation(generation), Some(seed)).await;
            // The rule's limits decide the hold it causes, and evaluate says so.
            let evaluated = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_ask", "function_id": "deploy::prod"}),
                )
                .await;
            assert_eq!(evaluated["verdict"], "needs_approval");
            assert_eq!(evaluated["rule_id"], "deploys");
            assert_eq!(evaluated["deadline_ms"], 60_000);
            let deploy = CallSpec::new("s_ask", "t_ask", "c1", "deploy::prod", json!({}));
            assert!(scene.harness.call(deploy).await.is_held());
            let record = held(&scene, "s_ask", "c1").await;
            let pending_at = record["pending_at"].as_u64().expect("pending_at");
            assert_eq!(record["expires_at"], pending_at + 60_000);
            assert_eq!(record["escalate_at"], pending_at + 30_000);
            // An ask rule without limits takes the configuration's.
            let db = CallSpec::new("s_ask", "t_ask", "c2", "db::drop", json!({}));
            assert!(scene.harness.call(db).await.is_held());
            let record = held(&scene, "s_ask", "c2").await;
            let pending_at = record["pending_at"].as_u64().expect("pending_at");
            assert_eq!(record["expires_at"], pending_at + 600_000);
            assert_eq!(record["escalate_at"], pending_at + 300_000);
        })
        .await;
    }
}
