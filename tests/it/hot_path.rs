//! The gate's hot path costs no engine round trip: continue and deny for a
//! session the worker has seen are decided from the settings cache and the
//! compiled rules, so the only invocation the engine routes per decision is
//! the gate call itself. A session's first call after boot costs one
//! `state::get` (its stored settings, or their absence). A hold costs
//! exactly two `state::set` — the record and, under their own key, the whole
//! redacted arguments (contract §21.6), sent together so the hold waits one
//! write's round trip — and one `session::get` on top. The one continue
//! that writes is a use of a uses-bounded grant: exactly one `state::set`,
//! which the engine's `state` trigger hands back to the worker
//! (`approval::on-settings-change`), who recognises its own write and reads
//! nothing.
//!
//! These are counts of what the test engine routed, not timings: they hold
//! on a loaded machine and catch a regression (a settings read, a config
//! fetch, a stray event) that a benchmark would only show as noise.

use approval_gate_testkit::engine::TestEngine;
use approval_gate_testkit::fixture::{call, EngineFixture};
use serde_json::{json, Value};

use crate::common::*;

/// Decisions per test.
const N: u64 = 1_000;

/// A scene on the test engine (the only one that counts) with rules that
/// allow `demo::echo` and deny `demo::other`, and one session whose stored
/// settings approve `shell::run` always.
async fn scene() -> Scene {
    let scene = Scene::start(EngineFixture::start_test().await).await;
    let rules = json!(["!approval::*", "demo::echo", "!demo::other"]);
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": rules}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(
        eventually(WAIT, || serde_json::to_value(&w.config().rules)
            .is_ok_and(|r| r == rules))
        .await,
        "the worker never loaded the rules"
    );
    scene
        .ok(
            "approval::approve-always",
            json!({"session_id": "s_stored", "function_id": "shell::run"}),
        )
        .await;
    assert!(
        eventually(WAIT, || w.stored_settings("s_stored").is_some()).await,
        "the settings view never saw s_stored"
    );
    // Let the configuration and settings triggers finish their work.
    quiet(engine(&scene)).await;
    warm(&scene, &["s_defaults", "s_stored"]).await;
    scene
}

/// Makes the worker read each session's settings once (its first call).
async fn warm(scene: &Scene, sessions: &[&str]) {
    for session in sessions {
        scene
            .ok(
                "approval::evaluate",
                json!({"session_id": session, "function_id": "demo::echo"}),
            )
            .await;
    }
    quiet(engine(scene)).await;
}

fn engine(scene: &Scene) -> &TestEngine {
    scene.engine.test_engine().expect("the test engine")
}

/// Waits until the engine routed nothing for a while (bounded).
async fn quiet(engine: &TestEngine) {
    let mut last = engine.total_invocations();
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = engine.total_invocations();
        if now == last {
            return;
        }
        last = now;
    }
    panic!("the engine never went quiet");
}

fn hook_input(session_id: &str, call_id: &str, function_id: &str) -> Value {
    json!({
        "point": "pre_trigger", "session_id": session_id, "turn_id": format!("t_{session_id}"),
        "step": 0, "depth": 0, "metadata": {"working_dir": "/w"},
        "call": {"id": call_id, "function_id": function_id, "arguments": {"cmd": "ls", "token": "x"}},
    })
}

/// Makes `N` gate calls from the harness's connection, cycling through
/// `cases` of `(session, function, expected decision)`, and returns how many
/// invocations the engine routed beyond those calls, per function.
async fn extra_invocations(
    scene: &Scene,
    cases: &[(&str, &str, &str)],
) -> (u64, Vec<(String, u64)>) {
    let engine = engine(scene);
    let watched = [
        "state::get",
        "state::set",
        "state::list",
        "session::get",
        "configuration::get",
    ];
    let before: Vec<u64> = watched.iter().map(|f| engine.invocations(f)).collect();
    let gate_before = engine.invocations("approval::gate");
    let total_before = engine.total_invocations();
    for i in 0..N {
        let (session, function, expected) = cases[(i as usize) % cases.len()];
        let out = call(
            scene.harness.client(),
            "approval::gate",
            hook_input(session, &format!("c{i}"), function),
        )
        .await
        .unwrap_or_else(|e| panic!("gate call {i} failed: {e}"));
        assert_eq!(out["decision"], expected, "{function} in {session}: {out}");
    }
    quiet(engine).await;
    assert_eq!(engine.invocations("approval::gate") - gate_before, N);
    let extra = engine.total_invocations() - total_before - N;
    let per_function = watched
        .iter()
        .zip(before)
        .map(|(f, b)| (f.to_string(), engine.invocations(f) - b))
        .collect();
    (extra, per_function)
}

#[tokio::test]
async fn continue_makes_no_engine_call() {
    let scene = scene().await;
    let (extra, per_function) = extra_invocations(
        &scene,
        &[
            ("s_defaults", "demo::echo", "continue"),
            ("s_stored", "demo::echo", "continue"),
            ("s_stored", "shell::run", "continue"),
        ],
    )
    .await;
    assert_eq!(
        extra, 0,
        "{N} continue decisions made {extra} engine calls: {per_function:?}"
    );
}

#[tokio::test]
async fn deny_makes_no_engine_call() {
    let scene = scene().await;
    let (extra, per_function) = extra_invocations(
        &scene,
        &[
            ("s_defaults", "demo::other", "deny"),
            ("s_stored", "demo::other", "deny"),
            ("s_defaults", "approval::resolve", "deny"),
        ],
    )
    .await;
    assert_eq!(
        extra, 0,
        "{N} deny decisions made {extra} engine calls: {per_function:?}"
    );
}

#[tokio::test]
async fn other_grants_make_no_engine_call_on_continue() {
    let scene = scene().await;
    for (session, request) in [
        (
            "s_ttl",
            json!({"function_id": "demo::ttl", "ttl_ms": 3_600_000}),
        ),
        (
            "s_args",
            json!({"function_id": "demo::args", "args": {"cmd": {"prefix": "ls"}}}),
        ),
    ] {
        let mut request = request;
        request["session_id"] = json!(session);
        scene.ok("approval::approve-always", request).await;
    }
    quiet(engine(&scene)).await;
    let (extra, per_function) = extra_invocations(
        &scene,
        &[
            ("s_ttl", "demo::ttl", "continue"),
            ("s_args", "demo::args", "continue"),
        ],
    )
    .await;
    assert_eq!(
        extra, 0,
        "{N} continue decisions on time- and argument-bounded grants made {extra} engine calls: {per_function:?}"
    );
}

#[tokio::test]
async fn a_use_of_a_counted_grant_costs_exactly_one_state_write() {
    let scene = scene().await;
    const USES: u64 = 20;
    scene
        .ok(
            "approval::approve-always",
            json!({"session_id": "s_uses", "function_id": "demo::counted", "uses": USES}),
        )
        .await;
    let engine = engine(&scene);
    quiet(engine).await;
    let watched = [
        "state::set",
        "state::get",
        "session::get",
        "approval::on-settings-change",
    ];
    let before: Vec<u64> = watched.iter().map(|f| engine.invocations(f)).collect();
    let total = engine.total_invocations();
    for i in 0..USES {
        let out = call(
            scene.harness.client(),
            "approval::gate",
            hook_input("s_uses", &format!("u{i}"), "demo::counted"),
        )
        .await
        .expect("gate call");
        assert_eq!(out["decision"], "continue", "use {i}: {out}");
    }
    quiet(engine).await;
    let counts: Vec<(&str, u64)> = watched
        .iter()
        .zip(before)
        .map(|(f, b)| (*f, engine.invocations(f) - b))
        .collect();
    assert_eq!(
        counts,
        vec![
            ("state::set", USES),
            ("state::get", 0),
            ("session::get", 0),
            ("approval::on-settings-change", USES),
        ],
        "per use: one write, and the engine's state trigger handing it back"
    );
    assert_eq!(
        engine.total_invocations() - total,
        USES * 3,
        "per use: the gate call, one state::set, one state trigger delivery"
    );
    // Used up: the next call falls to the rules (no rule: hold).
    let out = call(
        scene.harness.client(),
        "approval::gate",
        hook_input("s_uses", "u_last", "demo::counted"),
    )
    .await
    .expect("gate call");
    assert_eq!(out["decision"], "hold", "{out}");
}

#[tokio::test]
async fn hold_makes_two_parallel_state_writes_and_one_session_fetch() {
    let scene = scene().await;
    let engine = engine(&scene);
    const HOLDS: u64 = 50;
    let sets = engine.invocations("state::set");
    let gets = engine.invocations("session::get");
    let total = engine.total_invocations();
    for i in 0..HOLDS {
        let out = call(
            scene.harness.client(),
            "approval::gate",
            hook_input("s_defaults", &format!("h{i}"), "demo::held"),
        )
        .await
        .unwrap_or_else(|e| panic!("gate call {i} failed: {e}"));
        assert_eq!(out["decision"], "hold", "{out}");
    }
    quiet(engine).await;
    assert_eq!(
        engine.invocations("state::set") - sets,
        2 * HOLDS,
        "the record and its whole arguments"
    );
    assert_eq!(engine.invocations("session::get") - gets, HOLDS);
    assert_eq!(
        engine.total_invocations() - total,
        4 * HOLDS,
        "a hold is the gate call, one session::get and two state::set"
    );
    // A redelivered step finds the record and writes nothing.
    let total = engine.total_invocations();
    let out = call(
        scene.harness.client(),
        "approval::gate",
        hook_input("s_defaults", "h0", "demo::held"),
    )
    .await
    .expect("gate call");
    assert_eq!(out["decision"], "hold");
    quiet(engine).await;
    assert_eq!(engine.total_invocations() - total, 1);
}

#[tokio::test]
async fn a_cold_session_costs_one_state_get_then_none() {
    let mut scene = scene().await;
    scene.restart_worker().await;
    scene.wait_for_gate_binding().await;
    quiet(engine(&scene)).await;
    let engine = engine(&scene);
    for (session, function, expected) in [
        ("s_stored", "shell::run", "continue"),
        ("s_defaults", "demo::other", "deny"),
    ] {
        let gets = engine.invocations("state::get");
        let total = engine.total_invocations();
        for i in 0..3 {
            let out = call(
                scene.harness.client(),
                "approval::gate",
                hook_input(session, &format!("cold{i}"), function),
            )
            .await
            .expect("gate call");
            assert_eq!(out["decision"], expected, "{session}: {out}");
        }
        quiet(engine).await;
        assert_eq!(
            engine.invocations("state::get") - gets,
            1,
            "{session}: one read on its first call after boot, none after"
        );
        assert_eq!(
            engine.total_invocations() - total,
            3 + 1,
            "{session}: three gate calls and one state::get"
        );
    }
}

/// Contract §22: with a reviewer configured, continue and deny still cost
/// no engine call (the reviewer is asked only about the default hold); a
/// reviewed hold that the reviewer allows costs `session::get` and the
/// review (as many round trips as a plain hold: `session::get` and
/// `state::set`), one it escalates costs the hold's two plus the review.
#[tokio::test]
async fn rule_22_a_reviewer_adds_nothing_to_continue_and_deny_and_one_call_to_a_hold() {
    use approval_gate_testkit::reviewer::{Answer, ReviewerDouble, REVIEW_CALL};

    let scene = scene().await;
    let reviewer = ReviewerDouble::start(&scene.engine.url(), Answer::Allow).await;
    let value = json!({
        "rules": ["!approval::*", "demo::echo", "!demo::other"],
        "reviewer": {"function_id": REVIEW_CALL, "modes": ["manual", "auto"]}
    });
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(
        eventually(WAIT, || w.config().to_json()["reviewer"]["function_id"]
            == REVIEW_CALL)
        .await,
        "the worker never loaded the reviewer"
    );
    quiet(engine(&scene)).await;
    let (extra, per_function) = extra_invocations(
        &scene,
        &[
            ("s_defaults", "demo::echo", "continue"),
            ("s_stored", "shell::run", "continue"),
            ("s_defaults", "demo::other", "deny"),
            ("s_defaults", "approval::resolve", "deny"),
            ("s_defaults", REVIEW_CALL, "deny"),
        ],
    )
    .await;
    assert_eq!(
        extra, 0,
        "{N} continue and deny decisions with a reviewer made {extra} engine calls: {per_function:?}"
    );
    assert_eq!(
        reviewer.count(),
        0,
        "the reviewer was asked about a rule's decision"
    );

    let engine = engine(&scene);
    const REVIEWED: u64 = 20;
    for (answer, decision, per_call) in [
        // Allow: the session's context and the review. Escalate: those two
        // and the hold's two parallel writes (the record and its whole
        // arguments), one more call than a plain hold.
        (Answer::Allow, "continue", 2),
        (Answer::Escalate, "hold", 4),
    ] {
        reviewer.set(answer);
        let total = engine.total_invocations();
        let reviews = engine.invocations(REVIEW_CALL);
        // The reconcile with the harness (§27.4) reads harness::status on
        // its own schedule once calls are held: not the gate's cost.
        let status = engine.invocations("harness::status");
        for i in 0..REVIEWED {
            let out = call(
                scene.harness.client(),
                "approval::gate",
                hook_input("s_defaults", &format!("r_{decision}_{i}"), "demo::reviewed"),
            )
            .await
            .expect("gate call");
            assert_eq!(out["decision"], decision, "{out}");
        }
        quiet(engine).await;
        assert_eq!(engine.invocations(REVIEW_CALL) - reviews, REVIEWED);
        assert_eq!(
            engine.total_invocations() - total - (engine.invocations("harness::status") - status),
            REVIEWED * (1 + per_call),
            "a reviewed {decision}: the gate call and {per_call} more"
        );
    }
}

#[tokio::test]
async fn rule_23_the_decision_log_adds_no_round_trip_to_the_gate_answer() {
    let scene = scene().await;
    const LOG: &str = "audit::decision";
    scene
        .targets
        .add(
            LOG,
            std::sync::Arc::new(approval_gate_testkit::targets::Echo),
        )
        .await;
    let rules = json!(["!approval::*", "demo::echo", "!demo::other"]);
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": rules, "decision_log": {"function_id": LOG}}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(
        eventually(WAIT, || w.config().decision_log.is_some()).await,
        "the worker never loaded the decision log"
    );
    // The first record makes the log's own connection (its handshake is
    // engine traffic too): make it before counting.
    let out = call(
        scene.harness.client(),
        "approval::gate",
        hook_input("s_defaults", "warm-log", "demo::echo"),
    )
    .await
    .expect("gate call");
    assert_eq!(out["decision"], "continue");
    let engine = engine(&scene);
    assert!(
        eventually(WAIT, || engine.invocations(LOG) >= 1).await,
        "the first record never arrived"
    );
    quiet(engine).await;
    let logged = engine.invocations(LOG);
    let (extra, per_function) = extra_invocations(
        &scene,
        &[
            ("s_defaults", "demo::echo", "continue"),
            ("s_stored", "shell::run", "continue"),
            ("s_defaults", "demo::other", "deny"),
        ],
    )
    .await;
    // The answers came with no engine call before them (no read, no write);
    // the only traffic added is one void call per verdict, which the log's
    // own task sends after the answer.
    assert!(
        per_function.iter().all(|(_, n)| *n == 0),
        "{per_function:?}"
    );
    assert_eq!(
        engine.invocations(LOG) - logged,
        N,
        "one record per verdict"
    );
    assert_eq!(extra, N, "nothing but the log's records: {per_function:?}");
    assert_eq!(scene.targets.runs(LOG) as u64, N + 1, "and the warm-up's");
    // They come on the log's own connection, never the gate's socket.
    let workers = scene.ok("engine::workers::list", json!({})).await;
    let id_of = |name: &str| {
        workers["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|w| w["name"] == name)
            .and_then(|w| w["id"].as_str())
            .map(str::to_string)
    };
    let log_connection = id_of("approval-gate-decision-log");
    assert!(log_connection.is_some(), "{workers}");
    assert_ne!(log_connection, id_of("approval-gate"));
    assert!(scene
        .targets
        .calls(LOG)
        .iter()
        .all(|c| c.caller_worker_id == log_connection));
}
