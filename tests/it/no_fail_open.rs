//! No fail-open left (contract §21), end to end on both engines: the whole
//! redacted arguments under their own key (§21.6), stored records that do
//! not parse (§21.9).

use std::path::Path;
use std::time::Duration;

use approval_gate::bucket_scope;
use approval_gate_testkit::fixture::call;
use approval_gate_testkit::harness::{CallSpec, CallState};
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;
use crate::links::{spec, Links};

/// The whole arguments of `(sid, cid)` as stored under their own key.
async fn stored_arguments(scene: &Scene, sid: &str, cid: &str) -> Value {
    scene
        .ok(
            "state::get",
            json!({"scope": "approval_arguments", "key": format!("{sid}/{cid}")}),
        )
        .await
}

/// A long field the excerpt clips (256 code points) and the whole form keeps.
fn long_text() -> String {
    format!("{}END", "x".repeat(5000))
}

#[tokio::test]
async fn rule_21_6_get_pending_shows_the_whole_arguments_and_only_it() {
    on_each_engine("rule_21_6_whole_arguments", |engine| async move {
        let mut scene = Scene::start(engine).await;
        let arguments =
            json!({"content": long_text(), "token": "hunter2-hunter2", "path": "/w/a.txt"});
        let out = scene
            .harness
            .call(CallSpec::new("s_w", "t_w", "c_w", "demo::echo", arguments))
            .await;
        assert!(out.is_held(), "{out:?}");

        let got = scene.get_pending("s_w", "c_w").await;
        assert_eq!(got["arguments"]["content"], long_text(), "whole: {got}");
        assert_eq!(got["arguments"]["path"], "/w/a.txt");
        assert_ne!(
            got["arguments"]["token"], "hunter2-hunter2",
            "redacted: {got}"
        );
        assert_eq!(got["arguments_clipped"], false);
        assert_eq!(got["arguments_cap_bytes"], 65536);
        let excerpt = got["pending"]["arguments_excerpt"]["content"]
            .as_str()
            .unwrap();
        assert!(excerpt.len() < 1000, "the excerpt stays bounded: {excerpt}");
        assert!(got["pending"].get("arguments").is_none(), "{got}");

        // Neither the list, nor the record boot lists, nor an event carries them.
        let listed = scene.inbox().await;
        assert_eq!(listed.len(), 1);
        assert!(listed[0].get("arguments").is_none(), "{}", listed[0]);
        assert!(!listed[0].to_string().contains("xEND"), "{}", listed[0]);
        let stored = scene
            .ok(
                "state::get",
                json!({"scope": bucket_scope("s_w", "c_w"), "key": "s_w/c_w"}),
            )
            .await;
        assert_eq!(stored["function_call_id"], "c_w");
        assert!(
            !stored.to_string().contains("xEND"),
            "the boot listing's record: {stored}"
        );
        assert!(!stored.to_string().contains("hunter2"), "{stored}");
        let kept = stored_arguments(&scene, "s_w", "c_w").await;
        assert_eq!(kept["value"]["content"], long_text());
        assert!(
            !kept.to_string().contains("hunter2"),
            "stored redacted: {kept}"
        );

        // A restarted worker reads them from their key, not from its index.
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        let got = scene.get_pending("s_w", "c_w").await;
        assert_eq!(got["arguments"]["content"], long_text(), "{got}");

        // Larger than the cap: clipped, and said so.
        let huge = json!({"content": "y".repeat(100_000), "path": "/w/b.txt"});
        let out = scene
            .harness
            .call(CallSpec::new("s_w", "t_w", "c_huge", "demo::echo", huge))
            .await;
        assert!(out.is_held(), "{out:?}");
        let got = scene.get_pending("s_w", "c_huge").await;
        assert_eq!(got["arguments_clipped"], true, "{got}");
        assert!(got["arguments"].to_string().len() <= 65536);
        assert_eq!(
            got["arguments"]["path"], "/w/b.txt",
            "short fields stay whole"
        );
        assert!(got["arguments"]["content"]
            .as_str()
            .unwrap()
            .contains("…[+"));
    })
    .await;
}

#[tokio::test]
async fn rule_21_6_the_whole_arguments_leave_with_their_record() {
    on_each_engine("rule_21_6_arguments_leave", |engine| async move {
        let scene = Scene::start(engine).await;
        for (turn, cid) in [("t_1", "c_deny"), ("t_2", "c_turn"), ("t_3", "c_allow")] {
            let out = scene
                .harness
                .call(CallSpec::new(
                    "s_l",
                    turn,
                    cid,
                    "demo::echo",
                    json!({"content": long_text()}),
                ))
                .await;
            assert!(out.is_held(), "{out:?}");
            assert!(
                !stored_arguments(&scene, "s_l", cid).await.is_null(),
                "{cid}"
            );
        }
        // A deny.
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_l", "function_call_id": "c_deny", "decision": "deny"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        assert!(stored_arguments(&scene, "s_l", "c_deny").await.is_null());
        // An allow.
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_l", "function_call_id": "c_allow", "decision": "allow"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        assert!(stored_arguments(&scene, "s_l", "c_allow").await.is_null());
        // The turn's end purges its record, and the arguments with it.
        scene.harness.complete_turn("s_l", "t_2", "completed").await;
        let probe = &scene;
        let mut gone = false;
        for _ in 0..50 {
            if stored_arguments(probe, "s_l", "c_turn").await.is_null() {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "a purged record's arguments stayed");
        assert!(scene.inbox().await.is_empty());
        assert!(scene.get_pending("s_l", "c_turn").await.is_null());
    })
    .await;
}

/// Writes values that do not parse into the pending buckets: one that names
/// its key, one that does not.
async fn write_unreadable(scene: &Scene) {
    let named = json!({"session_id": "s_bad", "function_call_id": "c_bad", "turn_id": "t_bad",
        "function_id": "demo::echo", "kind": 42, "pending_at": "yesterday"});
    scene
        .ok(
            "state::set",
            json!({"scope": bucket_scope("s_bad", "c_bad"), "key": "s_bad/c_bad", "value": named}),
        )
        .await;
    scene
        .ok(
            "state::set",
            json!({"scope": bucket_scope("s_junk", "c_junk"), "key": "s_junk/c_junk", "value": "garbage"}),
        )
        .await;
}

async fn health(scene: &Scene) -> Value {
    scene.ok("approval::health", json!({})).await
}

#[tokio::test]
async fn rule_21_9_an_unreadable_record_is_kept_counted_and_listed() {
    on_each_engine("rule_21_9_unreadable_listed", |engine| async move {
        let mut scene = Scene::start(engine).await;
        let out = scene
            .harness
            .call(CallSpec::new(
                "s_ok",
                "t_ok",
                "c_ok",
                "demo::echo",
                json!({}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
        write_unreadable(&scene).await;
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;

        let h = health(&scene).await;
        assert_eq!(h["unreadable"], 2, "{h}");
        assert_eq!(h["held"], 1, "{h}");
        let listed = scene.inbox().await;
        assert_eq!(listed.len(), 3, "{listed:?}");
        let unreadable: Vec<&Value> = listed
            .iter()
            .filter(|r| r["kind"] == "unreadable")
            .collect();
        assert_eq!(unreadable.len(), 2, "{listed:?}");
        let named = unreadable
            .iter()
            .find(|r| r["session_id"] == "s_bad")
            .expect("named");
        assert_eq!(named["function_call_id"], "c_bad");
        assert!(
            named["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{named}"
        );
        assert!(
            unreadable.iter().any(|r| r.get("session_id").is_none()),
            "{listed:?}"
        );
        // A session filter keeps its own; a metadata filter has none.
        let own = scene
            .ok("approval::list-pending", json!({"session_id": "s_bad"}))
            .await;
        assert_eq!(own["pending"].as_array().unwrap().len(), 1, "{own}");
        let meta = scene
            .ok("approval::list-pending", json!({"metadata": {"team": "x"}}))
            .await;
        assert_eq!(meta["pending"], json!([]), "{meta}");
        // get-pending of its key answers the same entry, never null.
        let got = scene.get_pending("s_bad", "c_bad").await;
        assert_eq!(&got["pending"], *named, "{got}");
        assert!(got.get("arguments").is_none(), "{got}");
        assert!(scene.get_pending("s_bad", "c_free").await.is_null());
        // Still in state, untouched.
        let stored = scene
            .ok(
                "state::get",
                json!({"scope": bucket_scope("s_bad", "c_bad"), "key": "s_bad/c_bad"}),
            )
            .await;
        assert_eq!(stored["kind"], 42);
    })
    .await;
}

#[tokio::test]
async fn rule_21_9_denying_an_unreadable_record_is_a_human_decision_that_closes_the_breaker() {
    use approval_gate_testkit::reviewer::Answer;
    on_each_engine("rule_21_9_unreadable_breaker", |engine| async move {
        let mut scene = Scene::start(engine).await;
        write_unreadable(&scene).await;
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        let _reviewer = crate::reviewer::configure_reviewer(
            &scene,
            Answer::Deny,
            json!(["!approval::*"]),
            json!({"max_consecutive_denials": 1}),
        )
        .await;
        let call_in_s_bad = |cid: &str| {
            scene.harness.call(CallSpec::new(
                "s_bad",
                "t_bad2",
                cid,
                "demo::echo",
                json!({}),
            ))
        };
        assert!(matches!(
            call_in_s_bad("b1").await,
            CallState::Denied { .. }
        ));
        let out = call_in_s_bad("b2").await;
        assert!(out.is_held(), "the breaker is open: {out:?}");
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_bad", "function_call_id": "c_bad", "decision": "deny"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        let out = call_in_s_bad("b3").await;
        assert!(
            matches!(out, CallState::Denied { .. }),
            "a human decided a call of the session: the reviewer may deny again, {out:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn rule_21_9_deny_removes_an_unreadable_record_without_the_harness_and_allow_is_refused() {
    on_each_engine("rule_21_9_unreadable_deny", |engine| async move {
        let mut scene = Scene::start(engine).await;
        write_unreadable(&scene).await;
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        let resolved = scene
            .sink("sink-unreadable", "approval::pending-resolved", json!({}))
            .await;

        let err = scene
            .call(
                "approval::resolve",
                json!({"session_id": "s_bad", "function_call_id": "c_bad", "decision": "allow"}),
            )
            .await
            .expect_err("an allow cannot be carried out");
        assert_eq!(code_of(&err), "approval/invalid_payload", "{err}");
        assert_eq!(health(&scene).await["unreadable"], 2);

        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_bad", "function_call_id": "c_bad", "decision": "deny"}),
            )
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        assert!(
            scene.harness.resolve_requests().is_empty(),
            "the harness is not asked"
        );
        let events = resolved.wait_for(1, WAIT).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["outcome"], "aborted");
        assert_eq!(events[0]["reason"], "unreadable");
        assert_eq!(events[0]["session_id"], "s_bad");
        assert_eq!(events[0]["function_call_id"], "c_bad");
        assert_eq!(events[0]["turn_id"], "t_bad");
        let stored = scene
            .ok(
                "state::get",
                json!({"scope": bucket_scope("s_bad", "c_bad"), "key": "s_bad/c_bad"}),
            )
            .await;
        assert!(stored.is_null(), "{stored}");
        assert_eq!(health(&scene).await["unreadable"], 1);
        // Gone for good: a second deny finds nothing, and a restart lists only the other.
        let again = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_bad", "function_call_id": "c_bad", "decision": "deny"}),
            )
            .await;
        assert_eq!(again["resolved"], false, "{again}");
        scene.restart_worker().await;
        scene.wait_for_gate_binding().await;
        assert_eq!(health(&scene).await["unreadable"], 1);
        assert_eq!(resolved.events().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn rule_21_6_the_link_page_shows_the_whole_arguments() {
    on_each_engine("rule_21_6_link_page", |engine| async move {
        let l = Links::start(engine, json!(["!approval::*"]), None).await;
        let args = json!({"content": long_text(), "api_key": "sk-live-should-never-show-0000"});
        l.scene.hold(spec("s_p", "c_p", "demo::echo", args)).await;
        let page = l.page(&l.approval_url("s_p", "c_p").await).await;
        assert!(
            page.contains(&long_text()),
            "the page shows the whole field"
        );
        assert!(page.contains("Shown whole."), "and says so");
        assert!(!page.contains("sk-live-should-never-show"), "redacted");

        let huge = json!({"content": "y".repeat(100_000)});
        l.scene
            .hold(spec("s_p", "c_huge", "demo::echo", huge))
            .await;
        let page = l.page(&l.approval_url("s_p", "c_huge").await).await;
        assert!(
            page.contains("longer than this page keeps (64 KiB)"),
            "the cap is stated"
        );
        assert!(page.contains("…[+"), "and the cut is marked");
    })
    .await;
}

#[tokio::test]
async fn rule_21_9_an_unreadable_record_is_logged_at_error_with_its_key() {
    on_each_engine("rule_21_9_unreadable_logged", |engine| async move {
        let probe = engine.client("probe").await;
        let named = json!({"session_id": "s_log", "function_call_id": "c_log", "kind": []});
        call(
            &probe,
            "state::set",
            json!({"scope": bucket_scope("s_log", "c_log"), "key": "s_log/c_log", "value": named}),
        )
        .await
        .unwrap();
        let worker = WorkerProcess::spawn(
            Path::new(BIN),
            &engine.url(),
            &["--log-format", "json"],
            Duration::from_secs(30),
        )
        .await;
        assert!(
            worker.wait_for_line("does not parse", WAIT).await,
            "{}",
            worker.output()
        );
        let line = worker
            .output()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("does not parse"))
            })
            .expect("the line");
        assert_eq!(line["level"], "ERROR", "{line}");
        assert_eq!(line["fields"]["key"], "s_log/c_log", "{line}");
        assert_eq!(
            line["fields"]["scope"],
            bucket_scope("s_log", "c_log"),
            "{line}"
        );
    })
    .await;
}

/// What a durable binding check asks the engine first.
const TRIGGER_TYPES_LIST: &str = "engine::triggers::list";

each_generation! {
async fn rule_21_8_after_an_engine_restart_no_call_runs_ungated_while_the_worker_reconnects(generation) {
    // The engine restarts and forgets every binding; a harness that comes
    // back before the worker (a quarter of a second after the engine, as a
    // harness started after its engine does) sends calls until one is held.
    // Before §21.8 the gate's binding came back only with the worker's own
    // reconnect (the SDK tries every 2 s) and hundreds of calls ran with an
    // empty chain meanwhile (`E2E_ONLY=reconnect cargo bench --bench e2e`);
    // now it is made again the moment the engine answers, and calls are
    // denied (`fail_closed`) until the worker is back — never run. (A
    // harness back within a few tens of ms of the engine can still win the
    // race on a real engine: the bench counts those calls.)
    // On today's harness, its `harness::ready` wakes a binding check just
    // before the restart: that check, left waiting on the lost connection
    // until its call timed out (10 s), held the binding's one-check lock and
    // kept both the early rebind and the reconnect from making the binding
    // (over a thousand calls ran ungated). A new connection now ends it.
    on_each_engine(&label("rule_21_8_reconnect", generation), |engine| async move {
        let _targets =
            approval_gate_testkit::targets::TargetWorker::start(&engine.url(), TARGETS).await;
        let _sessions = approval_gate_testkit::session::SessionDouble::start(&engine.url()).await;
        let worker = start_in_process(&engine).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::generation(generation),
        )
        .await;
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        if let Some(test) = engine.test_engine() {
            // Made certain on either generation: a check of each durable
            // binding under way when the engine goes, its first call
            // unanswered (woken by a configuration change).
            let listed = test.invocations(TRIGGER_TYPES_LIST);
            test.faults()
                .stall(TRIGGER_TYPES_LIST, Duration::from_secs(60), Some(2));
            let value = json!({"rules": ["!approval::*"], "binding_check_interval_ms": 1000});
            call(
                harness.client(),
                "configuration::set",
                json!({"id": "approval-gate", "value": value}),
            )
            .await
            .unwrap();
            assert!(
                eventually(WAIT, || test.invocations(TRIGGER_TYPES_LIST) >= listed + 2).await,
                "no binding check under way"
            );
        }
        harness.shutdown().await;
        match engine.test_engine() {
            Some(test) => test.restart_forgetting_durable_bindings().await.unwrap(),
            None => engine.restart().await,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::generation(generation),
        )
        .await;
        let (mut ungated, mut denied, mut held) = (0, 0, false);
        let started = std::time::Instant::now();
        for i in 0..2_000 {
            if started.elapsed() > Duration::from_secs(20) {
                break;
            }
            let spec = CallSpec::new("s_rc", "t_rc", format!("c_rc{i}"), "demo::echo", json!({}));
            match harness.call(spec).await {
                approval_gate_testkit::harness::CallState::Held { .. } => {
                    held = true;
                    break;
                }
                approval_gate_testkit::harness::CallState::Denied { .. } => denied += 1,
                other => {
                    ungated += 1;
                    eprintln!("ran ungated: {other:?}");
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            held,
            "the gate never came back ({denied} denied, {ungated} ungated)"
        );
        assert_eq!(
            ungated, 0,
            "calls ran with no gate after the restart ({denied} denied first)"
        );
        worker.shutdown(Duration::from_secs(2)).await;
    })
    .await;
}
}

/// Whether the worker's own connection is away (asked over a fresh client:
/// one made before a restart is away until its SDK's next attempt).
async fn worker_away(engine: &approval_gate_testkit::fixture::EngineFixture) -> bool {
    let probe = engine.client("restart-probe").await;
    let workers = call(&probe, "engine::workers::list", json!({}))
        .await
        .unwrap_or_default();
    probe.shutdown_async().await;
    !workers.to_string().contains("\"approval-gate\"")
}

/// Calls 5 ms apart from `harness` until one is held (at most 4,000, 20 s):
/// how many ran with no gate, how many were denied, whether one was held.
async fn calls_until_held(
    harness: &approval_gate_testkit::harness::HarnessDouble,
    tag: &str,
) -> (usize, usize, bool) {
    let (mut ungated, mut denied, mut held) = (0, 0, false);
    let started = std::time::Instant::now();
    for i in 0..4_000 {
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
        let spec = CallSpec::new(
            format!("s_{tag}"),
            format!("t_{tag}"),
            format!("c_{tag}_{i}"),
            "demo::echo",
            json!({}),
        );
        match harness.call(spec).await {
            CallState::Held { .. } => {
                held = true;
                break;
            }
            CallState::Denied { .. } => denied += 1,
            other => {
                ungated += 1;
                if ungated <= 3 {
                    eprintln!("ran ungated: {other:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (ungated, denied, held)
}

#[tokio::test]
async fn rule_26_6_a_second_restart_before_the_worker_is_back_leaves_no_call_ungated() {
    // The engine restarts, the auxiliary connection makes the gate's binding
    // again, and the engine restarts a second time before the worker's own
    // SDK is back (it tries every 2 s; the second outage covers its next
    // attempt). Before §26.6 the early rebind ran once per outage of the
    // worker's connection: the second engine came up with no gate until the
    // SDK reconnected, and a harness back a quarter of a second after it ran
    // its calls with an empty chain. Now the auxiliary connection stays open
    // until the worker is back, its drop starts the knocking again, and
    // calls are denied (`fail_closed`) until the worker is back, never run.
    on_each_engine("rule_26_6_second_restart", |engine| async move {
        let _targets =
            approval_gate_testkit::targets::TargetWorker::start(&engine.url(), TARGETS).await;
        let _sessions = approval_gate_testkit::session::SessionDouble::start(&engine.url()).await;
        let worker = start_in_process(&engine).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        harness.shutdown().await;
        engine.restart_after(Duration::ZERO).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        let rebound = harness
            .wait_for_binding(
                "harness::hook::pre-trigger",
                "approval::gate",
                Duration::from_millis(1_500),
            )
            .await
            .is_some();
        let away = worker_away(&engine).await;
        assert!(
            rebound && away,
            "after the first restart the gate's binding is made again before the worker is back (bound {rebound}, worker away {away})"
        );
        harness.shutdown().await;
        engine.restart_after(Duration::from_millis(2_500)).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        let (ungated, denied, held) = calls_until_held(&harness, "r2").await;
        eprintln!(
            "second restart on the {}: {denied} denied until the worker was back, {ungated} ungated",
            engine.label()
        );
        assert!(held, "the gate never came back ({denied} denied, {ungated} ungated)");
        assert_eq!(
            ungated, 0,
            "calls ran with no gate after the second restart ({denied} denied)"
        );
        harness.shutdown().await;
        worker.shutdown(Duration::from_secs(2)).await;
    })
    .await;
}

#[tokio::test]
async fn rule_26_6_an_engine_restart_during_the_reconnect_work_leaves_no_call_ungated() {
    // The worker is back after a restart and its reconnect work waits on a
    // configuration read the engine never answers (a stall: on a real
    // engine, an engine going again mid-way); the engine then restarts a
    // second time. Before §26.6 the loop that started the early rebind did
    // that work in line: it waited on the lost call (10 s) and no
    // auxiliary connection made the gate's binding on the new engine, so a
    // harness back a quarter of a second later ran its calls ungated. Test
    // engine only: the stall is what makes the timing certain.
    on_test_engine("rule_26_6_restart_during_reconnect_work", |engine| async move {
        let Some(test) = engine.test_engine() else {
            return;
        };
        let _targets =
            approval_gate_testkit::targets::TargetWorker::start(&engine.url(), TARGETS).await;
        let _sessions = approval_gate_testkit::session::SessionDouble::start(&engine.url()).await;
        let worker = start_in_process(&engine).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        harness.shutdown().await;
        let reads = test.invocations(CONFIGURATION_GET);
        test.faults()
            .stall(CONFIGURATION_GET, Duration::from_secs(60), None);
        engine.restart_after(Duration::ZERO).await;
        assert!(
            eventually(Duration::from_secs(10), || test.invocations(CONFIGURATION_GET) > reads)
                .await,
            "the worker's reconnect work never read the configuration"
        );
        assert!(
            !worker_away(&engine).await,
            "the worker is back, its reconnect work under way"
        );
        engine.restart_after(Duration::ZERO).await;
        test.faults().clear(CONFIGURATION_GET);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        let (ungated, denied, held) = calls_until_held(&harness, "rw").await;
        eprintln!("restart during the reconnect work: {denied} denied until the worker was back, {ungated} ungated");
        assert!(held, "the gate never came back ({denied} denied, {ungated} ungated)");
        assert_eq!(
            ungated, 0,
            "calls ran with no gate after the restart during the reconnect work ({denied} denied)"
        );
        harness.shutdown().await;
        worker.shutdown(Duration::from_secs(2)).await;
    })
    .await;
}

/// What the reconnect's work reads last (the configuration in force).
const CONFIGURATION_GET: &str = "configuration::get";

#[tokio::test]
async fn rule_21_7_a_held_call_shows_v3_secret_shapes_redacted() {
    on_each_engine("rule_21_7_held_shapes", |engine| async move {
        let scene = Scene::start(engine).await;
        let arguments = json!({
            "env": [{"name": "DB_PASS", "value": "pa55-word-env"}, {"name": "HOME", "value": "/home/me"}],
            "argv": ["curl", "--user", "admin:pa55-word-argv", "https://example.com"],
            "headers": {"X-Note": "Basic YWRtaW46cGE1NS13b3Jk"},
            "netrc": "machine example.com login me password pa55-word-netrc",
            "cmd": "mysql -ppa55-word-mysql -u root",
        });
        let out = scene
            .harness
            .call(CallSpec::new("s_v3", "t_v3", "c_v3", "demo::echo", arguments))
            .await;
        assert!(out.is_held(), "{out:?}");
        let got = scene.get_pending("s_v3", "c_v3").await;
        let listed = scene.inbox().await;
        for shown in [got.to_string(), listed[0].to_string()] {
            for secret in ["pa55-word-env", "pa55-word-argv", "YWRtaW46cGE1NS13b3Jk", "pa55-word-netrc", "pa55-word-mysql"] {
                assert!(!shown.contains(secret), "{secret} leaked: {shown}");
            }
            assert!(shown.contains("/home/me"), "a benign pair stays: {shown}");
            assert!(shown.contains("https://example.com"), "{shown}");
        }
    })
    .await;
}

#[tokio::test]
async fn rule_21_10_a_short_inbox_token_keeps_the_inbox_off_and_is_reported() {
    on_each_engine("rule_21_10_short_inbox_token", |engine| async move {
        let l = Links::start(
            engine,
            json!(["!approval::*"]),
            Some("inbox-token-31-characters-long"),
        )
        .await;
        let health = l.scene.ok("approval::health", json!({})).await;
        assert_eq!(health["config"]["ok"], false, "{health}");
        let errors = health["config"]["rule_errors"].to_string();
        assert!(
            errors.contains("links.inbox_token must be at least 32 characters"),
            "{errors}"
        );
        assert!(
            !errors.contains("inbox-token-31"),
            "the token is not echoed: {errors}"
        );
        // The inbox is off whatever the bearer; the links stay on.
        let r = l
            .http
            .get(format!("{}/approvals", l.base))
            .header("Authorization", "Bearer inbox-token-31-characters-long")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        l.scene
            .hold(spec("s_t", "c_t", "demo::echo", json!({})))
            .await;
        let url = l.pending("s_t", "c_t").await["pending"]["approval_url"].clone();
        assert!(url.is_string(), "links stay on: {url}");
    })
    .await;
}

#[tokio::test]
async fn rule_21_10_an_always_grant_never_undoes_a_concurrent_operator_edit() {
    on_each_engine("rule_21_10_host_roots_race", |engine| async move {
        let scene = Scene::start(engine).await;
        scene.jail_shell_to_srv().await;
        scene.register_shell_config(json!({})).await;
        let out = scene
            .harness
            .call(
                CallSpec::new("s_h", "t_s_h", "c_h", "shell::read", json!({"path": "/data/a/f"}))
                    .with_working_dir("/w/s_h"),
            )
            .await;
        assert!(out.is_held(), "{out:?}");
        const EDITS: u64 = 30;
        let operator = async {
            for k in 0..EDITS {
                scene
                    .ok(
                        "configuration::set",
                        json!({"id": "shell", "value": {"fs": {"host_roots": ["/ops"]}, "edit": k}}),
                    )
                    .await;
                tokio::task::yield_now().await;
            }
        };
        let grant = scene.ok(
            "approval::resolve",
            json!({"session_id": "s_h", "function_call_id": "c_h", "decision": "allow", "grant_scope": "always"}),
        );
        let ((), resolved) = tokio::join!(operator, grant);
        assert_eq!(resolved["resolved"], true, "{resolved}");
        let shell = scene.ok("configuration::get", json!({"id": "shell"})).await;
        assert_eq!(shell["value"]["edit"], EDITS - 1, "the operator's last edit stands: {shell}");
        let roots = shell["value"]["fs"]["host_roots"].to_string();
        assert!(roots.contains("/ops"), "{shell}");
    })
    .await;
}
