//! Failing closed where a real deployment breaks things
//! (`architecture/contract.md` § Never ungated, § Resolve): the gate's
//! binding made late, lost and made again; a hold that cannot finish inside
//! the hook's budget; a resolve the harness no longer holds.

use std::time::{Duration, Instant};

use approval_gate_testkit::harness::CallSpec;
use serde_json::{json, Value};

use crate::common::*;

const PRE_TRIGGER: &str = "harness::hook::pre-trigger";

/// Sets `binding_check_interval_ms` to its minimum and waits until the
/// worker runs with it.
async fn check_every_second(scene: &Scene) {
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "binding_check_interval_ms": 1000}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(eventually(WAIT, || w.config().binding_check_interval_ms == 1000).await);
}

/// Waits (bounded) until `approval::health` reports the worker gated: the
/// harness sees a new binding a moment before the check that made it has
/// recorded its result.
async fn assert_gated(scene: &Scene) -> Value {
    let mut health = Value::Null;
    for _ in 0..50 {
        health = scene.ok("approval::health", json!({})).await;
        if health["gated"] == true {
            return health;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never gated: {health}");
}

/// `engine::register_trigger` failing at boot does not leave the worker
/// ungated for good: it reports `gated: false`, retries with backoff, and
/// the binding exists a few seconds later.
#[tokio::test]
async fn fail_closed_a_binding_refused_at_boot_is_made_by_the_retries() {
    on_test_engine("fail_closed_binding_retry", |engine| async move {
        let mut scene = Scene::start(engine).await;
        check_every_second(&scene).await;
        scene.stop_worker().await;
        for b in scene.harness.bindings(PRE_TRIGGER) {
            scene
                .ok("engine::unregister_trigger", json!({"id": b.id}))
                .await;
        }
        assert!(eventually(WAIT, || scene.harness.bindings(PRE_TRIGGER).is_empty()).await);
        scene.engine.test_engine().unwrap().faults().fail(
            "engine::register_trigger",
            "ENGINE_BUSY",
            "busy",
            Some(3),
        );
        scene.restart_worker().await;
        let health = scene.ok("approval::health", json!({})).await;
        assert_eq!(health["gated"], false, "{health}");
        let started = Instant::now();
        assert!(
            eventually(Duration::from_secs(10), || scene
                .harness
                .bindings(PRE_TRIGGER)
                .len()
                == 1)
            .await,
            "the retries never made the binding"
        );
        eprintln!("binding made {:?} after boot", started.elapsed());
        assert_gated(&scene).await;
        let out = scene
            .harness
            .call(CallSpec::new("s1", "t1", "c1", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "gated again: {out:?}");
    })
    .await;
}

/// A binding the engine lost (here: removed behind the worker's back) is made
/// again at the next check, on either engine.
#[tokio::test]
async fn fail_closed_a_lost_binding_is_made_again() {
    on_each_engine("fail_closed_binding_lost", |engine| async move {
        let scene = Scene::start(engine).await;
        check_every_second(&scene).await;
        let before = scene.harness.bindings(PRE_TRIGGER);
        assert_eq!(before.len(), 1);
        scene
            .ok("engine::unregister_trigger", json!({"id": before[0].id}))
            .await;
        assert!(
            eventually(Duration::from_secs(10), || {
                let now = scene.harness.bindings(PRE_TRIGGER);
                now.len() == 1 && now[0].id != before[0].id
            })
            .await,
            "the lost binding was never made again"
        );
        // The worker records the new id right after the engine made the
        // binding: health reports it once that is done.
        let made = json!(scene.harness.bindings(PRE_TRIGGER)[0].id);
        let mut health = Value::Null;
        for _ in 0..50 {
            health = scene.ok("approval::health", json!({})).await;
            if health["gate_binding_id"] == made {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(health["gate_binding_id"], made, "{health}");
        assert_eq!(health["gated"], true, "{health}");
        assert_eq!(scene.harness.bindings(PRE_TRIGGER).len(), 1, "never two");
    })
    .await;
}

/// A hold whose work cannot finish inside the hook's budget (a session
/// manager and a state store that both stall) is denied in time, and the
/// record it may have written is removed: nothing outlives a call the
/// harness would already have failed closed.
#[tokio::test]
async fn fail_closed_a_hold_past_its_budget_is_denied_and_leaves_nothing() {
    on_test_engine("fail_closed_hold_budget", |engine| async move {
        let scene = Scene::start(engine).await;
        // Warm the session, so its settings read is not the stalled part.
        scene.ok("approval::evaluate", json!({"session_id": "s_slow", "function_id": "demo::echo"})).await;
        let test_engine = scene.engine.test_engine().unwrap();
        let faults = test_engine.faults();
        // The session read gives up at its 1.5 s budget; the record's write
        // is sent after it and answered 3.5 s later, past the hook's 4 s.
        let set_stall = Duration::from_millis(3_500);
        faults.stall("session::get", Duration::from_secs(3), Some(1));
        faults.stall("state::set", set_stall, Some(1));
        let sets = test_engine.invocations("state::set");
        let started = Instant::now();
        let gate = scene.ok(
            "approval::gate",
            json!({"point": "pre_trigger", "session_id": "s_slow", "turn_id": "t", "call": {"id": "c_slow", "function_id": "demo::echo", "arguments": {}}}),
        );
        // When the stalled write went out: its answer comes `set_stall` later.
        let write_sent = async {
            let sent = eventually(Duration::from_secs(10), || {
                test_engine.invocations("state::set") > sets
            })
            .await;
            assert!(sent, "the hold never wrote its record");
            Instant::now()
        };
        let (out, write_sent) = tokio::join!(gate, write_sent);
        let took = started.elapsed();
        assert_eq!(out["decision"], "deny", "{out}");
        assert!(out["reason"].as_str().unwrap_or("").contains("in time"), "{out}");
        assert!(took < Duration::from_millis(4900), "answered after {took:?}, past the harness's 5 s");
        // The stalled write landed in state (a stall delays only the answer);
        // the worker removed it when it gave up.
        let mut left = scene.pending_in_state().await;
        for _ in 0..50 {
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = scene.pending_in_state().await;
        }
        assert!(left.is_empty(), "{left:?}");
        assert!(scene.inbox().await.is_empty());
        // And nothing lands later when the stalled answer finally arrives.
        tokio::time::sleep_until((write_sent + set_stall).into()).await;
        stay_quiet().await;
        assert!(scene.pending_in_state().await.is_empty());
        assert!(scene.inbox().await.is_empty());
    })
    .await;
}

/// The harness's answer is the truth: when it no longer holds the call (here
/// someone released it directly), `approval::resolve` says `not_held`, never
/// `resolved: true`, and the record leaves as `aborted` / `not_held`.
#[tokio::test]
async fn fail_closed_a_resolve_the_harness_no_longer_holds_says_so() {
    on_each_engine("fail_closed_not_held", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene.sink("nh-resolved", "approval::pending-resolved", json!({})).await;
        let out = scene
            .harness
            .call(CallSpec::new("s_n", "t_n", "c_n", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "{out:?}");
        let released = scene
            .ok(
                "harness::function::resolve",
                json!({"session_id": "s_n", "turn_id": "t_n", "function_call_id": "c_n", "action": "execute"}),
            )
            .await;
        assert_eq!(released["resolved"], true);
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_n", "function_call_id": "c_n", "decision": "deny", "reason": "too late"}),
            )
            .await;
        assert_eq!(out, json!({"resolved": false, "turn_resumed": false, "not_held": true}));
        assert!(eventually(WAIT, || resolved.events().len() == 1).await);
        let event: Value = resolved.events()[0].clone();
        assert_eq!(event["outcome"], "aborted", "{event}");
        assert_eq!(event["reason"], "not_held", "{event}");
        assert!(scene.inbox().await.is_empty());
        // A second resolve finds nothing.
        let again = scene
            .ok("approval::resolve", json!({"session_id": "s_n", "function_call_id": "c_n", "decision": "allow"}))
            .await;
        assert_eq!(again, json!({"resolved": false}));
        stay_quiet().await;
        assert_eq!(resolved.events().len(), 1, "exactly one event");
    })
    .await;
}

/// While the harness's hook type does not exist, the engine does not list
/// the gate's parked binding: the worker keeps the one it made across its
/// checks instead of making a new one each interval, and that binding is
/// the one that activates when a harness appears — still exactly one.
#[tokio::test]
async fn fail_closed_a_parked_binding_is_kept_across_checks_and_activates_with_the_harness() {
    on_each_engine("fail_closed_parked_kept", |engine| async move {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let seed = dir.path().join("seed.yaml");
        std::fs::write(
            &seed,
            "rules: [\"!approval::*\"]\nbinding_check_interval_ms: 1000\n",
        )
        .expect("seed written");
        let worker = approval_gate_testkit::worker::WorkerProcess::spawn(
            BIN.as_ref(),
            &engine.url(),
            &["--config", seed.to_str().expect("utf-8 path")],
            Duration::from_secs(30),
        )
        .await;
        let probe = engine.client("probe").await;
        let health = |probe: iii_sdk::IIIClient| async move {
            approval_gate_testkit::fixture::call(&probe, "approval::health", json!({}))
                .await
                .expect("health answers")
        };
        let first = health(probe.clone()).await;
        assert_eq!(first["gated"], false, "{first}");
        let id = first["gate_binding_id"].clone();
        assert!(id.is_string(), "{first}");
        // Three checks later: the same binding, made once.
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        let later = health(probe.clone()).await;
        assert_eq!(later["gate_binding_id"], id, "{later}");
        let made = worker
            .output()
            .lines()
            .filter(|l| l.contains("durable binding made") && l.contains("approval::gate"))
            .count();
        assert_eq!(made, 1, "{}", worker.output());
        let parked_warnings = worker
            .output()
            .lines()
            .filter(|l| {
                l.contains("the binding is parked until it appears") && l.contains("approval::gate")
            })
            .count();
        assert_eq!(parked_warnings, 1, "said once, not at every check");

        // A harness appears: that same binding activates, and it is the only one.
        let harness = approval_gate_testkit::harness::HarnessDouble::start(
            &engine.url(),
            approval_gate_testkit::harness::HarnessOptions::default(),
        )
        .await;
        assert!(
            eventually(Duration::from_secs(10), || harness
                .bindings(PRE_TRIGGER)
                .len()
                == 1)
            .await,
            "the parked binding never activated"
        );
        let mut health_now = Value::Null;
        for _ in 0..50 {
            health_now = health(probe.clone()).await;
            if health_now["gated"] == true {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(health_now["gated"], true, "{health_now}");
        assert_eq!(json!(harness.bindings(PRE_TRIGGER)[0].id), id);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(harness.bindings(PRE_TRIGGER).len(), 1, "never two");
        drop(worker);
    })
    .await;
}
