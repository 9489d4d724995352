//! Standby and failover (`architecture/contract.md` § Standby and failover):
//! a second instance waits, registering nothing, while the first holds the
//! worker name; it takes over when the first dies, with every held call
//! kept, none announced twice, the durable gate binding reused, and no call
//! run ungated while neither serves. Both instances are the worker binary,
//! run as child processes.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, EngineFixture};
use approval_gate_testkit::harness::{CallSpec, CallState, HarnessDouble, HarnessOptions};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;

/// How often the standbys of these tests retry (the default is 1000 ms).
const RETRY_MS: &str = "100";
/// How long a standby may take to say it stands by, or to take over.
const TAKEOVER: Duration = Duration::from_secs(30);
/// The standby's log line.
const STANDING_BY: &str = "standing by";
/// The ready line.
const READY: &str = "approval-gate ready";

/// A seed that allows `demo::other` (the gate answers `continue`) and holds
/// everything else, so a run of a target proves a live gate let it through.
fn seed_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.yaml");
    std::fs::write(&path, "rules: [\"!approval::*\", \"demo::other\"]\n").unwrap();
    (dir, path)
}

fn args(seed: &std::path::Path) -> Vec<String> {
    vec![
        "--config".into(),
        seed.to_string_lossy().into_owned(),
        "--standby-retry-ms".into(),
        RETRY_MS.into(),
    ]
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The ready line of a process, if it printed one.
fn ready_line(process: &WorkerProcess) -> Option<String> {
    process
        .output()
        .lines()
        .find(|l| l.contains(READY))
        .map(str::to_string)
}

/// Durable gate bindings the engine lists: `(id, config)`.
async fn gate_bindings(probe: &iii_sdk::IIIClient) -> Vec<(String, Value)> {
    let list = call(probe, "engine::registered-triggers::list", json!({}))
        .await
        .unwrap();
    list["registered_triggers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["function_id"] == "approval::gate"
                && t["trigger_type"] == "harness::hook::pre-trigger"
        })
        .map(|t| (t["id"].as_str().unwrap().to_string(), t["config"].clone()))
        .collect()
}

/// Rows of `engine::workers::list` named `approval-gate`.
async fn gate_workers(probe: &iii_sdk::IIIClient) -> Vec<Value> {
    let list = call(probe, "engine::workers::list", json!({}))
        .await
        .unwrap();
    list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["name"] == approval_gate::WORKER_NAME)
        .cloned()
        .collect()
}

/// Every held call the inbox lists, page by page: `(session, call)`.
async fn listed(probe: &iii_sdk::IIIClient) -> Vec<(String, String)> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut request = json!({"limit": 500});
        if let Some(c) = &cursor {
            request["cursor"] = json!(c);
        }
        let page = call(probe, "approval::list-pending", request)
            .await
            .unwrap();
        for r in page["pending"].as_array().unwrap() {
            all.push((
                r["session_id"].as_str().unwrap().to_string(),
                r["function_call_id"].as_str().unwrap().to_string(),
            ));
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return all,
        }
    }
}

/// One call the load made, and when it started relative to the kill.
#[derive(Debug)]
struct Sent {
    session: String,
    call: String,
    function_id: &'static str,
    outcome: CallState,
}

/// Calls through the harness from `lanes` loops until `stop`: even ones to
/// `demo::echo` (held by the policy), odd ones to `demo::other` (allowed).
fn load(
    harness: &HarnessDouble,
    lanes: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Sent>> {
    let harness = harness.clone();
    tokio::spawn(async move {
        let runs = (0..lanes).map(|lane| {
            let harness = harness.clone();
            let stop = stop.clone();
            async move {
                let mut sent = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let function_id = if i % 2 == 0 {
                        "demo::echo"
                    } else {
                        "demo::other"
                    };
                    let session = format!("fo_s{lane}");
                    let call = format!("fo_l{lane}_c{i}");
                    let outcome = harness
                        .call(CallSpec::new(
                            &session,
                            format!("fo_t{lane}_{i}"),
                            &call,
                            function_id,
                            json!({"i": i}),
                        ))
                        .await;
                    sent.push(Sent {
                        session,
                        call,
                        function_id,
                        outcome,
                    });
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                sent
            }
        });
        futures_util::future::join_all(runs)
            .await
            .into_iter()
            .flatten()
            .collect()
    })
}

#[tokio::test]
async fn a_standby_registers_nothing_then_takes_over_a_sigkill_with_calls_in_flight() {
    on_each_state_backend("standby_failover", |engine| async move {
        failover_scenario(engine).await;
    })
    .await;
}

async fn failover_scenario(engine: EngineFixture) {
    let (_dir, seed) = seed_file();
    let args = args(&seed);
    let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
    let _targets = TargetWorker::start(&engine.url(), TARGETS).await;
    let probe = engine.client("probe").await;
    let created = Sink::bind(
        &engine,
        "fo-created",
        "approval::pending-created",
        json!({}),
    )
    .await;
    let resolved = Sink::bind(
        &engine,
        "fo-resolved",
        "approval::pending-resolved",
        json!({}),
    )
    .await;

    let mut active =
        WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &as_strs(&args), TAKEOVER).await;
    let first_ready = ready_line(&active).unwrap();
    assert!(first_ready.contains("primary"), "{first_ready}");
    assert!(harness
        .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
        .await
        .is_some());
    let binding_before = gate_bindings(&probe).await;
    assert_eq!(binding_before.len(), 1, "{binding_before:?}");

    // Held calls before the standby exists.
    for i in 0..30 {
        let out = harness
            .call(CallSpec::new(
                format!("fo_h{}", i % 5),
                format!("fo_ht{i}"),
                format!("fo_hc{i}"),
                "demo::echo",
                json!({}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
    }
    assert!(
        eventually(WAIT, || created.events().len() == 30).await,
        "created: {}",
        created.events().len()
    );

    // The standby: it says so, and holds nothing the engine would route.
    let mut standby = WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &as_strs(&args));
    assert!(
        standby.wait_for_line(STANDING_BY, TAKEOVER).await,
        "the second instance never stood by:\n{}",
        standby.output()
    );
    // Several refusals later, nothing of it is registered.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(ready_line(&standby).is_none(), "{}", standby.output());
    let rows = gate_workers(&probe).await;
    assert_eq!(rows.len(), 1, "one approval-gate is live: {rows:?}");
    assert_eq!(
        gate_bindings(&probe).await,
        binding_before,
        "the standby made no binding"
    );
    assert_eq!(harness.bindings("harness::hook::pre-trigger").len(), 1);
    let health = call(&probe, "approval::health", json!({})).await.unwrap();
    assert_eq!(
        health["standby"], false,
        "the active instance answers: {health}"
    );
    assert!(health.get("standby_waited_ms").is_none(), "{health}");
    assert_eq!(health["held"], 30);
    assert_eq!(created.events().len(), 30, "the standby announced nothing");

    // Calls in flight through the kill, the gap and the takeover.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = load(&harness, 4, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    active.kill();
    let killed = Instant::now();
    assert!(
        standby.wait_for_line(READY, TAKEOVER).await,
        "the standby never took over:\n{}",
        standby.output()
    );
    let took_over = killed.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let sent = traffic.await.unwrap();

    let ready = ready_line(&standby).unwrap();
    assert!(
        ready.contains("standby"),
        "the ready line says how it started: {ready}"
    );
    assert!(
        standby.output().contains("taking over"),
        "{}",
        standby.output()
    );

    // Never ungated: a held function is held or denied, never run; an
    // allowed one ran only after a live gate said continue.
    let mut denied_in_gap = 0;
    for s in &sent {
        match (&s.outcome, s.function_id) {
            (CallState::Held { .. }, "demo::echo") => {}
            (CallState::Denied { reason, .. }, _) => {
                assert!(
                    reason.contains("approval::gate"),
                    "only the fail-closed hook denies here: {reason}"
                );
                denied_in_gap += 1;
            }
            (CallState::Completed { .. }, "demo::other") => {}
            (other, function_id) => panic!("{function_id} {}: {other:?}", s.call),
        }
    }
    let hook_replies: HashMap<String, Vec<Result<Value, String>>> = harness
        .hook_calls()
        .into_iter()
        .fold(HashMap::new(), |mut m, h| {
            if h.function_id == "approval::gate" {
                m.entry(h.call_id).or_default().push(h.reply);
            }
            m
        });
    for run in harness.runs() {
        let replies = hook_replies.get(&run.call_id).cloned().unwrap_or_default();
        assert!(
            replies
                .iter()
                .any(|r| matches!(r, Ok(v) if v.get("decision").is_none_or(|d| d == "continue"))),
            "{} ran without a gate's continue: {replies:?}",
            run.call_id
        );
    }
    assert_eq!(harness.target_runs("demo::echo"), 0, "no held function ran");
    let ran_after = sent
        .iter()
        .filter(|s| matches!(s.outcome, CallState::Completed { .. }))
        .count();

    // Nothing lost, nothing twice, the binding reused.
    let held: HashSet<(String, String)> = (0..30)
        .map(|i| (format!("fo_h{}", i % 5), format!("fo_hc{i}")))
        .chain(
            sent.iter()
                .filter(|s| s.outcome.is_held())
                .map(|s| (s.session.clone(), s.call.clone())),
        )
        .collect();
    let after = listed(&probe).await;
    let unique: HashSet<(String, String)> = after.iter().cloned().collect();
    assert_eq!(unique.len(), after.len(), "a held call is listed twice");
    let missing: Vec<_> = held.difference(&unique).collect();
    assert!(
        missing.is_empty(),
        "held calls lost in the failover: {missing:?}"
    );
    // A hold in flight at the kill may have written its record while the
    // harness, its answer lost, failed closed: that record is listed, for a
    // call that was denied. Resolving it says so and removes it.
    let denied: HashSet<(String, String)> = sent
        .iter()
        .filter(|s| matches!(s.outcome, CallState::Denied { .. }))
        .map(|s| (s.session.clone(), s.call.clone()))
        .collect();
    let orphans: Vec<(String, String)> = unique.difference(&held).cloned().collect();
    for orphan in &orphans {
        assert!(
            denied.contains(orphan),
            "listed but never held nor in flight: {orphan:?}"
        );
        let out = call(
            &probe,
            "approval::resolve",
            json!({"session_id": orphan.0, "function_call_id": orphan.1, "decision": "allow"}),
        )
        .await
        .unwrap();
        assert_eq!(out["resolved"], false, "{orphan:?}: {out}");
        assert_eq!(out["not_held"], true, "{orphan:?}: {out}");
    }
    assert_eq!(
        harness.target_runs("demo::echo"),
        0,
        "resolving an orphan runs nothing"
    );
    assert_eq!(
        gate_bindings(&probe).await,
        binding_before,
        "the durable binding is reused"
    );
    assert_eq!(harness.bindings("harness::hook::pre-trigger").len(), 1);
    let health = call(&probe, "approval::health", json!({})).await.unwrap();
    assert_eq!(health["standby"], true, "{health}");
    assert!(
        health["standby_waited_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0),
        "{health}"
    );
    assert_eq!(health["gated"], true, "{health}");
    assert_eq!(health["held"], json!(held.len()));

    // Every held call is still decidable, and each is announced once.
    for (session, call_id) in &held {
        let out = call(
            &probe,
            "approval::resolve",
            json!({"session_id": session, "function_call_id": call_id, "decision": "allow"}),
        )
        .await
        .unwrap();
        assert_eq!(out["resolved"], true, "{session}/{call_id}: {out}");
    }
    assert_eq!(harness.target_runs("demo::echo"), held.len());
    assert!(
        eventually(WAIT, || resolved.events().len() >= held.len()).await,
        "resolved: {}",
        resolved.events().len()
    );
    stay_quiet().await;
    let per_call = |events: Vec<Value>| -> HashMap<String, usize> {
        events.into_iter().fold(HashMap::new(), |mut m, e| {
            *m.entry(
                e["function_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
            .or_default() += 1;
            m
        })
    };
    let created_per_call = per_call(created.events());
    assert!(
        held.iter()
            .all(|(_, c)| created_per_call.get(c) == Some(&1)),
        "every held call announced: {created_per_call:?}"
    );
    assert!(
        created_per_call.len() <= held.len() + orphans.len(),
        "announced but never held: {created_per_call:?}"
    );
    assert!(
        created_per_call.values().all(|n| *n == 1),
        "announced twice: {created_per_call:?}"
    );
    let resolved_per_call = per_call(resolved.events());
    assert!(
        resolved_per_call.values().all(|n| *n == 1),
        "resolved twice: {resolved_per_call:?}"
    );

    eprintln!(
        "failover on the {}: SIGKILL → standby ready {took_over:?}; {} calls in flight around it: {} held, {ran_after} ran after a continue, {denied_in_gap} denied (fail closed), {} record(s) of a denied in-flight call",
        engine.label(),
        sent.len(),
        sent.iter().filter(|s| s.outcome.is_held()).count(),
        orphans.len(),
    );
    assert_eq!(standby.terminate(Duration::from_secs(15)).await, Some(0));
}

#[tokio::test]
async fn a_primary_whose_name_was_taken_during_a_reconnect_exits_non_zero() {
    on_test_engine("primary_loses_name", |engine| async move {
        let (_dir, seed) = seed_file();
        let args = args(&seed);
        let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let probe = engine.client("probe").await;
        let mut first =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &as_strs(&args), TAKEOVER).await;
        let mut second = WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &as_strs(&args));
        assert!(
            second.wait_for_line(STANDING_BY, TAKEOVER).await,
            "{}",
            second.output()
        );

        // The first instance's connection drops (a network cut); the SDK
        // reconnects 2 s later, by which time the standby holds the name.
        let dropped = engine
            .test_engine()
            .unwrap()
            .drop_connections_of(approval_gate::WORKER_NAME);
        assert_eq!(dropped, 1);
        assert!(
            second.wait_for_line(READY, TAKEOVER).await,
            "{}",
            second.output()
        );
        assert_eq!(
            first.wait(TAKEOVER).await,
            Some(3),
            "the refused primary exits 3:\n{}",
            first.output()
        );
        assert!(
            first
                .output()
                .contains("another approval-gate holds the worker name"),
            "{}",
            first.output()
        );

        // The standby serves alone.
        assert_eq!(gate_workers(&probe).await.len(), 1);
        assert!(harness
            .call(CallSpec::new(
                "pl_s",
                "pl_t",
                "pl_c",
                "demo::echo",
                json!({})
            ))
            .await
            .is_held());
        let health = call(&probe, "approval::health", json!({})).await.unwrap();
        assert_eq!(health["standby"], true, "{health}");
        assert_eq!(second.terminate(Duration::from_secs(15)).await, Some(0));
    })
    .await;
}

#[tokio::test]
async fn instances_racing_for_the_name_after_an_engine_restart_leave_one_serving() {
    // A real engine restart drops both instances at once; whichever claims
    // the name first serves, and the other stands by (the standby that
    // lost) or exits 3 (the primary that lost).
    on_each_engine("restart_race", |engine| async move {
        let (_dir, seed) = seed_file();
        let args = args(&seed);
        let _harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let probe = engine.client("probe").await;
        let mut first =
            WorkerProcess::spawn(BIN.as_ref(), &engine.url(), &as_strs(&args), TAKEOVER).await;
        let mut second = WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &as_strs(&args));
        assert!(
            second.wait_for_line(STANDING_BY, TAKEOVER).await,
            "{}",
            second.output()
        );
        engine.restart().await;

        // Whoever answers health serves; its `standby` says which it is.
        let deadline = Instant::now() + TAKEOVER;
        let health = loop {
            if let Ok(health) = call(&probe, "approval::health", json!({})).await {
                break health;
            }
            assert!(
                Instant::now() < deadline,
                "nobody serves after the restart:\n{}\n{}",
                first.output(),
                second.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let winner = if health["standby"] == true {
            assert!(
                second.wait_for_line(READY, TAKEOVER).await,
                "{}",
                second.output()
            );
            assert_eq!(first.wait(TAKEOVER).await, Some(3), "{}", first.output());
            "standby"
        } else {
            // The primary reconnected first: the standby goes on waiting.
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert!(ready_line(&second).is_none(), "{}", second.output());
            "primary"
        };
        assert_eq!(gate_workers(&probe).await.len(), 1);
        eprintln!(
            "restart race on the {}: the {winner} kept the name",
            engine.label()
        );
        first.kill();
        second.kill();
    })
    .await;
}

#[tokio::test]
async fn a_standby_stops_on_sigterm_without_having_registered_anything() {
    on_test_engine("standby_sigterm", |engine| async move {
        let probe = engine.client("probe").await;
        let _first = WorkerProcess::spawn(
            BIN.as_ref(),
            &engine.url(),
            &["--standby-retry-ms", RETRY_MS],
            TAKEOVER,
        )
        .await;
        let mut second = WorkerProcess::spawn_raw(
            BIN.as_ref(),
            &engine.url(),
            &["--standby-retry-ms", RETRY_MS],
        );
        assert!(
            second.wait_for_line(STANDING_BY, TAKEOVER).await,
            "{}",
            second.output()
        );
        let calls_before = engine
            .test_engine()
            .unwrap()
            .invocations("engine::workers::register");
        tokio::time::sleep(Duration::from_millis(600)).await;
        let tries = engine
            .test_engine()
            .unwrap()
            .invocations("engine::workers::register")
            - calls_before;
        assert!(
            tries >= 2,
            "the standby keeps trying: {tries} attempts in 600 ms"
        );
        assert_eq!(
            second.terminate(Duration::from_secs(15)).await,
            Some(0),
            "{}",
            second.output()
        );
        assert!(ready_line(&second).is_none());
        assert_eq!(gate_workers(&probe).await.len(), 1);
    })
    .await;
}

/// A short name confirmation (`BootOptions::name_confirm`, under half the
/// binary's window) still refuses to serve beside a live instance of the
/// same name: the second instance is refused at every
/// attempt and stands by, registering nothing, until the first stops; then
/// it takes over, one instance at a time.
#[tokio::test]
async fn a_short_name_confirmation_still_refuses_a_second_instance() {
    on_test_engine("standby_short_window", |engine| async move {
        // Eight times the engine's refusal delay, under half the binary's
        // window: the suites' own boots use three times (they meet no second
        // instance), a margin six tests at once on two cores can overrun,
        // and a refusal that comes after boot has finished is not one a
        // window can see.
        let window = approval_gate_testkit::engine::TestEngine::name_refusal_delay() * 8;
        assert!(
            window < approval_gate::NAME_CONFIRM_WINDOW / 2,
            "{window:?}"
        );
        // Three claims of the name, each confirmed within the short window:
        // every one refused, so the second instance has not booted.
        second_instance_stands_by_then_takes_over(engine, window, false).await;
    })
    .await;
}

/// A refusal of the worker name that comes after the confirmation window
/// (here a window shorter than the engine's refusal delay; on a real
/// engine, a slow engine or machine) stops the rest of boot at once, and
/// the instance stands by again instead of waiting out its calls'
/// timeouts: the engine holds back every `configuration::get` answer, so
/// the refusal reaches each attempt in the middle of its boot; the instance
/// keeps claiming the name while the first serves, and takes over when the
/// first stops.
#[tokio::test]
async fn a_refusal_after_the_window_stands_by_again() {
    on_test_engine("standby_late_refusal", |engine| async move {
        let late = approval_gate_testkit::engine::TestEngine::name_refusal_delay() / 6;
        // Each claim passes the short window, and each is refused after it:
        // boot stops and claims again.
        second_instance_stands_by_then_takes_over(engine, late, true).await;
    })
    .await;
}

/// Boots a first in-process worker, then a second with the name
/// confirmation `window` beside it: the second keeps claiming the name (at
/// least three claims) without booting while one instance serves, and
/// takes over, as a standby, once the first stops. With `stall_config`, the
/// engine holds back every `configuration::get` answer until then.
async fn second_instance_stands_by_then_takes_over(
    engine: EngineFixture,
    window: Duration,
    stall_config: bool,
) {
    trace_in_process_worker();
    let test_engine = engine.test_engine().expect("the test engine");
    let probe = engine.client("probe").await;
    let first = start_in_process_with(&engine, None).await;
    assert_eq!(gate_workers(&probe).await.len(), 1);
    let claims = || test_engine.invocations("engine::workers::register");
    let before = claims();
    if stall_config {
        test_engine
            .faults()
            .stall("configuration::get", Duration::from_secs(120), None);
    }
    let url = engine.url();
    let second = tokio::spawn(async move {
        boot_in_process(approval_gate::BootOptions {
            name_confirm: window,
            standby_retry: Duration::from_millis(50),
            ..in_process_options(&url)
        })
        .await
    });
    assert!(
        eventually(TAKEOVER, || claims() >= before + 3).await,
        "the second instance stopped claiming the name after {} claims",
        claims() - before
    );
    assert!(
        !second.is_finished(),
        "the second instance booted beside the first"
    );
    assert_eq!(gate_workers(&probe).await.len(), 1, "one instance serves");
    if stall_config {
        test_engine.faults().clear("configuration::get");
    }
    first.shutdown(Duration::from_secs(2)).await;
    let second = tokio::time::timeout(TAKEOVER, second)
        .await
        .expect("the second instance never took over")
        .expect("its boot did not panic");
    assert!(second.was_standby(), "it stood by first");
    assert_eq!(gate_workers(&probe).await.len(), 1, "one instance serves");
}
