//! Fault scenarios: every dependency absent, slow or failing, and the worker
//! or the engine going away. Each test names the fault it injects.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, StateBackend};
use approval_gate_testkit::harness::{CallSpec, CallState, HarnessDouble, HarnessOptions};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn fault_state_failing_during_a_hold_denies() {
    on_test_engine("fault_state_hold", |engine| async move {
        let scene = Scene::start(engine).await;
        scene.engine.test_engine().unwrap().faults().fail(
            "state::set",
            "KV_DOWN",
            "kv down",
            Some(1),
        );
        let out = scene
            .harness
            .call(CallSpec::new("s", "t", "c", "demo::echo", json!({})))
            .await;
        assert!(
            out.deny_reason()
                .is_some_and(|r| r.contains("could not record")),
            "{out:?}"
        );
        assert!(scene.inbox().await.is_empty());
        // Once state is back, the same call id holds normally.
        assert!(scene
            .harness
            .call(CallSpec::new("s", "t", "c2", "demo::echo", json!({})))
            .await
            .is_held());
    })
    .await;
}

#[tokio::test]
async fn fault_state_failing_during_a_purge_is_retried_on_the_next_event() {
    on_test_engine("fault_state_purge", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene
            .sink("purge-retry", "approval::pending-resolved", json!({}))
            .await;
        assert!(scene
            .harness
            .call(CallSpec::new("s_p", "t_p", "c_p", "demo::echo", json!({})))
            .await
            .is_held());
        scene.engine.test_engine().unwrap().faults().fail(
            "state::set",
            "KV_DOWN",
            "kv down",
            Some(1),
        );
        scene.harness.complete_turn("s_p", "t_p", "failed").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            scene.inbox().await.len(),
            1,
            "a failed purge keeps the record"
        );
        assert!(resolved.events().is_empty(), "and announces nothing");
        scene.sessions.delete("s_p").await;
        assert!(eventually(WAIT, || resolved.events().len() == 1).await);
        stay_quiet().await;
        assert_eq!(resolved.events().len(), 1, "exactly one event");
        assert_eq!(resolved.events()[0]["outcome"], "aborted");
        assert!(scene.pending_in_state().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn rule_20_a_slow_harness_answers_releasing_and_the_outcome_follows_once() {
    on_test_engine("fault_harness_slow", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene
            .sink("slow-release", "approval::pending-resolved", json!({}))
            .await;
        // A decider waits half a second for the release's outcome, so a
        // harness answering 3 s late is a slow one (the default wait is 8 s).
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "resolve_wait_ms": 500}}),
            )
            .await;
        assert!(
            eventually(WAIT, || scene
                .worker
                .as_ref()
                .is_some_and(|w| w.config().resolve_wait_ms == 500))
            .await
        );
        assert!(scene
            .harness
            .call(CallSpec::new("s_t", "t_t", "c_t", "demo::echo", json!({})))
            .await
            .is_held());
        // The harness takes the release but answers 3 s later (an execute
        // whose target runs long, or a slow link).
        let stall = Duration::from_secs(3);
        scene.engine.test_engine().unwrap().faults().stall(
            "harness::function::resolve",
            stall,
            Some(1),
        );
        let started = Instant::now();
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_t", "function_call_id": "c_t", "decision": "allow"}),
            )
            .await;
        assert_eq!(out, json!({"resolved": false, "releasing": true}));
        assert!(started.elapsed() < stall);
        // The record says so; every other decision answers the same and
        // changes nothing.
        let shown = scene
            .ok(
                "approval::get-pending",
                json!({"session_id": "s_t", "function_call_id": "c_t"}),
            )
            .await;
        assert_eq!(shown["pending"]["releasing"], true, "{shown}");
        let listed = scene.inbox().await;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0]["releasing"], true);
        let again = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_t", "function_call_id": "c_t", "decision": "deny"}),
            )
            .await;
        assert_eq!(again, json!({"resolved": false, "releasing": true}));
        assert!(
            resolved.events().is_empty(),
            "no outcome before the harness answered: {:?}",
            resolved.events()
        );
        // The harness's answer comes: one event, the decision's own.
        assert!(eventually(Duration::from_secs(20), || resolved.events().len() == 1).await);
        stay_quiet().await;
        let events = resolved.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["outcome"], "allow");
        assert!(scene.inbox().await.is_empty());
        assert_eq!(scene.harness.target_runs("demo::echo"), 1);
    })
    .await;
}

#[tokio::test]
async fn rule_20_a_lost_answer_is_unknown_never_aborted() {
    on_test_engine("fault_harness_lost", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene
            .sink("lost-release", "approval::pending-resolved", json!({}))
            .await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "release_timeout_ms": 2000, "resolve_wait_ms": 500}}),
            )
            .await;
        assert!(
            eventually(WAIT, || scene
                .worker
                .as_ref()
                .is_some_and(|w| w.config().release_timeout_ms == 2000))
            .await
        );
        assert!(scene
            .harness
            .call(CallSpec::new("s_l", "t_l", "c_l", "demo::echo", json!({})))
            .await
            .is_held());
        // The harness runs the call, but its answer never comes back in
        // time; the brief's harness has no harness::status to ask.
        scene.engine.test_engine().unwrap().faults().stall(
            "harness::function::resolve",
            Duration::from_secs(20),
            Some(1),
        );
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_l", "function_call_id": "c_l", "decision": "allow"}),
            )
            .await;
        assert_eq!(out, json!({"resolved": false, "releasing": true}));
        assert!(eventually(WAIT, || resolved.events().len() == 1).await);
        stay_quiet().await;
        let events = resolved.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["outcome"], "unknown", "a call that may have run is never aborted");
        assert_eq!(events[0]["reason"], "unknown");
        assert!(scene.inbox().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn fault_slow_session_manager_does_not_delay_the_hold_past_its_budget() {
    on_each_engine("fault_slow_session", |engine| async move {
        let scene = Scene::start(engine).await;
        scene.sessions.put("s_slow", json!({"title": "Slow"}));
        scene.sessions.set_delay(Duration::from_secs(4));
        let started = Instant::now();
        let out = scene
            .harness
            .call(CallSpec::new("s_slow", "t", "c", "demo::echo", json!({})))
            .await;
        let took = started.elapsed();
        assert!(out.is_held(), "{out:?}");
        assert!(
            took < Duration::from_millis(4500),
            "the hook's 5 s timeout must not be reached: {took:?}"
        );
        let rec = scene
            .ok(
                "approval::get-pending",
                json!({"session_id": "s_slow", "function_call_id": "c"}),
            )
            .await;
        assert!(
            rec["pending"].get("session_title").is_none(),
            "no context after the budget: {rec}"
        );
        // An absent session manager: the hold still works.
        scene.sessions.shutdown().await;
        let out = scene
            .harness
            .call(CallSpec::new("s_none", "t", "c", "demo::echo", json!({})))
            .await;
        assert!(out.is_held());
    })
    .await;
}

fn ids(list: &Value, key: &str, field: &str) -> HashSet<String> {
    list[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f[field].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn fault_engine_restart_keeps_everything_live() {
    on_each_state_backend("fault_engine_restart", |engine| async move {
        let scene = Scene::start(engine).await;
        let created = scene.sink("restart-created", "approval::pending-created", json!({})).await;
        for i in 0..5 {
            assert!(scene.harness.call(CallSpec::new("s_r", "t_r", format!("c{i}"), "demo::echo", json!({}))).await.is_held());
        }
        let before = scene.inbox().await;
        scene.engine.restart().await;
        // Everything comes back by itself.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let functions = scene.call("engine::functions::list", json!({"include_internal": true})).await.unwrap_or(Value::Null);
            let triggers = scene.call("engine::triggers::list", json!({})).await.unwrap_or(Value::Null);
            let bound = scene.call("engine::registered-triggers::list", json!({})).await.unwrap_or(Value::Null);
            let f = ids(&functions, "functions", "function_id");
            let t = ids(&triggers, "triggers", "id");
            let b: Vec<String> = bound["registered_triggers"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x["function_id"].as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            let all_functions = approval_gate::FUNCTION_IDS.iter().all(|id| f.contains(*id));
            let all_types = t.contains("approval::pending-created") && t.contains("approval::pending-resolved");
            let gate_bound = b.iter().filter(|x| *x == "approval::gate").count() == 1;
            let others = [
                "approval::filesystem-access-watch",
                "approval::on-turn-completed",
                "approval::on-session-deleted",
                "approval::on-config-change",
                "approval::on-settings-change",
            ]
            .iter()
            .all(|x| b.iter().any(|y| y == x));
            if all_functions && all_types && gate_bound && others {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not live again after a restart: functions {all_functions}, types {all_types}, gate {gate_bound}, others {others}\n{bound}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert!(scene.harness.wait_for_binding("harness::hook::pre-trigger", "approval::gate", Duration::from_secs(10)).await.is_some());
        let after = scene.inbox().await;
        assert_eq!(after, before, "held calls are still listed");
        // The configuration is writable again once the worker registered its
        // schema again (an engine restarted from its store keeps no schemas),
        // and a change applies.
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(err) = scene
            .call("configuration::set", json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "demo::other"]}}))
            .await
        {
            assert!(Instant::now() < deadline, "configuration not writable again: {err}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 2).await);
        let out = scene.ok("approval::resolve", json!({"session_id": "s_r", "function_call_id": "c0", "decision": "allow"})).await;
        assert_eq!(out["resolved"], true);
        let out = scene.harness.call(CallSpec::new("s_r", "t_r", "c_new", "demo::echo", json!({}))).await;
        assert!(out.is_held(), "the gate still gates after the restart: {out:?}");
        assert!(
            eventually(WAIT, || created.events().len() == 6).await,
            "the notification binding is live again: {}",
            created.events().len()
        );
    })
    .await;
}

#[tokio::test]
async fn fault_sigkill_under_load_loses_and_duplicates_nothing() {
    on_each_state_backend("fault_sigkill_under_load", |engine| async move {
        let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let _targets = TargetWorker::start(&engine.url(), TARGETS).await;
        let probe = engine.client("probe").await;
        let mut worker =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &[], Duration::from_secs(30)).await;
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        let progress = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let load = {
            let harness = harness.clone();
            let progress = progress.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for i in 0..1500 {
                    let out = harness
                        .call(CallSpec::new(
                            format!("s_{}", i % 7),
                            format!("t_{i}"),
                            format!("c_{i}"),
                            "demo::echo",
                            json!({}),
                        ))
                        .await;
                    outcomes.push((format!("s_{}", i % 7), format!("c_{i}"), out));
                    progress.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                outcomes
            })
        };
        // Kill it mid-stream: once 200 calls went through.
        assert!(
            eventually(Duration::from_secs(60), || progress
                .load(std::sync::atomic::Ordering::SeqCst)
                >= 200)
            .await
        );
        worker.kill();
        let outcomes = load.await.unwrap();
        let _worker =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &[], Duration::from_secs(30)).await;
        let mut listed: Vec<(String, String)> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = json!({"limit": 500});
            if let Some(c) = &cursor {
                req["cursor"] = json!(c);
            }
            let page = call(&probe, "approval::list-pending", req).await.unwrap();
            for r in page["pending"].as_array().unwrap() {
                listed.push((
                    r["session_id"].as_str().unwrap().to_string(),
                    r["function_call_id"].as_str().unwrap().to_string(),
                ));
            }
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        let unique: HashSet<_> = listed.iter().cloned().collect();
        assert_eq!(unique.len(), listed.len(), "a held call is listed twice");
        let held: HashSet<(String, String)> = outcomes
            .iter()
            .filter(|(_, _, o)| o.is_held())
            .map(|(s, c, _)| (s.clone(), c.clone()))
            .collect();
        assert!(!held.is_empty(), "some calls were held before the kill");
        for key in &held {
            assert!(
                unique.contains(key),
                "held call {key:?} is missing after the restart"
            );
        }
        // Nothing ran ungated while the worker was down.
        let ran = outcomes
            .iter()
            .filter(|(_, _, o)| matches!(o, CallState::Completed { .. }))
            .count();
        assert_eq!(ran, 0, "with the gate down every call is held or denied");
        eprintln!(
            "sigkill under load: {} calls, {} held, {} denied while down, {} listed after restart",
            outcomes.len(),
            held.len(),
            outcomes.len() - held.len(),
            listed.len()
        );
    })
    .await;
}

#[tokio::test]
async fn fault_notification_worker_disconnecting_drops_its_bindings_only() {
    on_each_engine("fault_sink_disconnect", |engine| async move {
        let scene = Scene::start(engine).await;
        let stays = scene
            .sink("sink-stays", "approval::pending-created", json!({}))
            .await;
        let goes = scene
            .sink("sink-goes", "approval::pending-created", json!({}))
            .await;
        let before = scene.live_bindings();
        goes.client.shutdown_async().await;
        assert!(
            eventually(Duration::from_secs(10), || scene.live_bindings()
                == before - 1)
            .await,
            "the gone worker's binding was not dropped"
        );
        assert!(scene
            .harness
            .call(CallSpec::new("s", "t", "c", "demo::echo", json!({})))
            .await
            .is_held());
        assert!(eventually(WAIT, || stays.events().len() == 1).await);
        assert!(goes.events().is_empty());
    })
    .await;
}

#[tokio::test]
async fn fault_engine_restart_that_forgets_durable_bindings_gets_the_gate_bound_again() {
    on_test_engine("fault_restart_forgets_durable", |engine| async move {
        let scene = Scene::start(engine).await;
        scene
            .engine
            .test_engine()
            .unwrap()
            .restart_forgetting_durable_bindings()
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let bound = scene
                .call("engine::registered-triggers::list", json!({}))
                .await
                .unwrap_or(Value::Null);
            let gates = bound["registered_triggers"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|t| t["function_id"] == "approval::gate")
                        .count()
                })
                .unwrap_or(0);
            if gates == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the gate was not bound again after the restart: {bound}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(scene
            .harness
            .wait_for_binding(
                "harness::hook::pre-trigger",
                "approval::gate",
                Duration::from_secs(10)
            )
            .await
            .is_some());
        // The binding may be back before the worker is (§21.8: an auxiliary
        // connection re-makes it the moment the engine answers): until then
        // calls are denied, never run; then they are held again.
        let deadline = Instant::now() + Duration::from_secs(10);
        for i in 0.. {
            let out = scene
                .harness
                .call(CallSpec::new(
                    "s",
                    "t",
                    format!("c{i}"),
                    "demo::echo",
                    json!({}),
                ))
                .await;
            if out.is_held() {
                break;
            }
            assert!(out.deny_reason().is_some(), "denied, never run: {out:?}");
            assert!(
                Instant::now() < deadline,
                "calls are not gated again: {out:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn fault_engine_sigkill_right_after_holds_loses_nothing_on_redis() {
    // What an engine crash costs depends on where the engine keeps state: a
    // file store loses what changed since its last save (all-or-nothing per
    // scope), Redis with its append-only file nothing it acknowledged. The
    // running worker still lists every held call (its index is in memory);
    // a worker started afterwards knows only what state kept.
    on_each_state_backend("fault_engine_sigkill", |engine| async move {
        const HOLDS: usize = 200;
        let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let _targets = TargetWorker::start(&engine.url(), TARGETS).await;
        let probe = engine.client("probe").await;
        let mut worker =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &[], Duration::from_secs(30)).await;
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        let holds = (0..HOLDS).map(|i| {
            let harness = harness.clone();
            async move {
                harness
                    .call(CallSpec::new(format!("ek_s{}", i % 8), format!("ek_t{i}"), format!("ek_c{i}"), "demo::echo", json!({})))
                    .await
            }
        });
        let outcomes = futures_util::stream::iter(holds)
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await;
        assert!(outcomes.iter().all(CallState::is_held), "{outcomes:?}");
        engine.kill_and_restart().await;

        // The worker reconnects by itself and gates again.
        let deadline = Instant::now() + Duration::from_secs(30);
        while call(&probe, "approval::health", json!({})).await.map(|h| h["gated"] == true).ok() != Some(true) {
            assert!(Instant::now() < deadline, "the worker never gated again:\n{}", worker.output());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let live = call(&probe, "approval::health", json!({})).await.unwrap()["held"].as_u64().unwrap();
        let mut in_state = 0;
        for scope in approval_gate::all_scopes() {
            let values = call(&probe, "state::list", json!({"scope": scope})).await.unwrap();
            in_state += values.as_array().map(|a| a.iter().filter(|v| !v.is_null()).count()).unwrap_or(0);
        }
        worker.kill();
        let _worker = WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &[], Duration::from_secs(30)).await;
        let after = call(&probe, "approval::list-pending", json!({"limit": 500})).await.unwrap();
        let after: HashSet<String> = after["pending"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["function_call_id"].as_str().unwrap().to_string())
            .collect();
        eprintln!(
            "engine SIGKILL right after {HOLDS} holds, {}: the running worker lists {live}; {in_state} records in state after the restart; {} listed by a worker started afterwards",
            engine.label(),
            after.len()
        );
        assert_eq!(live, HOLDS as u64, "the running worker keeps its index");
        // A held call state lost: the harness still parks it, and nobody
        // can resolve it any more (it ends with its turn).
        for i in (0..HOLDS).filter(|i| !after.contains(&format!("ek_c{i}"))) {
            let sid = format!("ek_s{}", i % 8);
            assert!(harness.state(&sid, &format!("ek_c{i}")).is_some_and(|s| s.is_held()));
            let out = call(&probe, "approval::resolve", json!({"session_id": sid, "function_call_id": format!("ek_c{i}"), "decision": "allow"}))
                .await
                .unwrap();
            assert_eq!(out["resolved"], false, "{out}");
        }
        if !matches!(engine.state_backend(), Some(StateBackend::File { .. })) {
            assert_eq!(in_state, HOLDS, "an acknowledged hold is in state after the crash");
            assert_eq!(after.len(), HOLDS, "and listed by the next worker");
        }
    })
    .await;
}
