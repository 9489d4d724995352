//! Lost replies: a minimal reproduction (`architecture/integration.md`
//! § Lost replies). Two plain SDK clients and the engine, nothing of the
//! worker: one serves `repro::noop` (answers `{}` at once), the other calls
//! it many times and counts the calls that never got an answer.
//!
//! The real engine (0.23) forwards a call to the callee before it records
//! the call as pending; an answer that arrives in between finds nobody
//! waiting and is dropped, logged at DEBUG as "Did not find caller for
//! invocation". The test asserts that every lost reply is one of those
//! drops, so the loss is the engine's, and that the test engine loses none.
//! It also runs the two workarounds: a short timeout with retries (for
//! idempotent calls), and a callee that answers no sooner than ~1 ms.
//!
//! Ignored: 20,000 calls per run take minutes on a real engine. Run with
//! `III_ENGINE_BIN=… cargo test --test it lost_replies -- --ignored --nocapture`
//! (`LOST_REPLIES_CALLS` sets the number of calls per run).

use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{wait_for_functions, EngineFixture};
use futures_util::{FutureExt, StreamExt};
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

use crate::common::{LostReplies, DROPPED_REPLY as DROPPED};

/// One run's figures.
#[derive(Debug, Default)]
struct Run {
    /// Calls that got no answer, after any retries.
    failed: usize,
    /// First attempts that timed out (each a lost reply).
    timeouts: usize,
    took: Duration,
}

/// `calls` calls of `function_id`, `in_flight` at a time, each with
/// `timeout` and up to `retries` more attempts after a timeout.
async fn run(
    caller: &IIIClient,
    function_id: &str,
    calls: usize,
    in_flight: usize,
    timeout: Duration,
    retries: usize,
) -> Run {
    let start = Instant::now();
    let results: Vec<(bool, usize)> = futures_util::stream::iter(0..calls)
        .map(|i| async move {
            let mut timeouts = 0;
            for _ in 0..=retries {
                let answer = caller
                    .trigger(TriggerRequest {
                        function_id: function_id.to_string(),
                        payload: json!({ "i": i }),
                        action: None,
                        timeout_ms: Some(timeout.as_millis() as u64),
                    })
                    .await;
                match answer {
                    Ok(_) => return (true, timeouts),
                    Err(iii_sdk::Error::Timeout) => timeouts += 1,
                    Err(other) => panic!("call {i} failed otherwise: {other}"),
                }
            }
            (false, timeouts)
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    Run {
        failed: results.iter().filter(|(ok, _)| !ok).count(),
        timeouts: results.iter().map(|(_, t)| t).sum(),
        took: start.elapsed(),
    }
}

/// A callee serving `repro::noop` (answers at once) and `repro::noop-1ms`
/// (answers after a 1 ms sleep).
async fn callee(engine: &EngineFixture) -> IIIClient {
    let callee = engine.client("repro-callee").await;
    callee.register_function(
        "repro::noop",
        RegisterFunction::new_async(|_: Value| async { Ok::<Value, iii_sdk::Error>(json!({})) }),
    );
    callee.register_function(
        "repro::noop-1ms",
        RegisterFunction::new_async(|_: Value| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok::<Value, iii_sdk::Error>(json!({}))
        }),
    );
    wait_for_functions(&callee, &["repro::noop", "repro::noop-1ms"]).await;
    callee
}

fn dropped(engine: &EngineFixture) -> usize {
    engine
        .engine_log()
        .map(|log| log.matches(DROPPED).count())
        .unwrap_or(0)
}

#[tokio::test]
#[ignore = "a reproduction, minutes long: cargo test --test it lost_replies -- --ignored --nocapture"]
async fn lost_replies_are_answers_the_engine_drops_before_it_records_the_call() {
    let calls: usize = std::env::var("LOST_REPLIES_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let timeout = Duration::from_secs(2);

    let test_engine = EngineFixture::start_test().await;
    let _callee = callee(&test_engine).await;
    let caller = test_engine.client("repro-caller").await;
    for in_flight in [1, 16] {
        let r = run(&caller, "repro::noop", calls, in_flight, timeout, 0).await;
        eprintln!("test engine, {calls} calls, {in_flight} in flight: {r:?}");
        assert_eq!(
            r.failed, 0,
            "the test engine records a call before it forwards it"
        );
    }

    let options = LostReplies::real_engine_options();
    let Some(engine) = EngineFixture::start_real_with("lost_replies", options).await else {
        return;
    };
    let _callee = callee(&engine).await;
    let caller = engine.client("repro-caller").await;
    let mut lost_total = 0;
    for (label, function_id, in_flight, timeout, retries) in [
        ("no-op, 1 in flight", "repro::noop", 1, timeout, 0),
        ("no-op, 16 in flight", "repro::noop", 16, timeout, 0),
        (
            "no-op, 1 in flight, 250 ms timeout + 3 retries",
            "repro::noop",
            1,
            Duration::from_millis(250),
            3,
        ),
        (
            "callee answering after 1 ms, 1 in flight",
            "repro::noop-1ms",
            1,
            timeout,
            0,
        ),
    ] {
        let before = dropped(&engine);
        let r = run(&caller, function_id, calls, in_flight, timeout, retries).await;
        // Let the log catch up with the last drop.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let drops = dropped(&engine) - before;
        eprintln!(
            "real engine, {label}: {calls} calls in {:.1} s, {} timed out ({:.3} %), {} failed after retries, {drops} answers dropped by the engine",
            r.took.as_secs_f64(),
            r.timeouts,
            100.0 * r.timeouts as f64 / calls as f64,
            r.failed,
        );
        assert_eq!(
            r.timeouts, drops,
            "every lost reply is an answer the engine dropped"
        );
        if retries > 0 {
            assert_eq!(r.failed, 0, "a retry after a short timeout gets the answer");
        }
        lost_total += r.timeouts;
    }
    eprintln!(
        "real engine: {lost_total} lost replies in {} calls",
        4 * calls
    );
}

/// What the many-call scenarios tolerate (`common::LostReplies`): nothing
/// on the test engine; on a real engine only failures its log explains.
#[tokio::test]
async fn lost_replies_are_tolerated_only_when_the_engine_logged_a_drop() {
    let test = EngineFixture::start_test().await;
    let strict = LostReplies::new(&test);
    assert!(!strict.unanswered(&iii_sdk::Error::Timeout));
    let denied = approval_gate_testkit::harness::CallState::Denied {
        reason: "hook approval::gate timed out".into(),
        point: approval_gate_testkit::harness::HookPoint::PreTrigger,
        result: json!({}),
    };
    assert!(!strict.hook_timed_out(&denied));
    assert_eq!(strict.count(), 0);

    let Some(real) = EngineFixture::start_real_with(
        "lost_replies_tolerance",
        LostReplies::real_engine_options(),
    )
    .await
    else {
        return;
    };
    let tolerant = LostReplies::new(&real);
    let other = iii_sdk::Error::Remote {
        code: "approval/state_unavailable".into(),
        message: "approval/state_unavailable: down".into(),
        stacktrace: None,
    };
    assert!(
        !tolerant.unanswered(&other),
        "only an unanswered call is tolerated"
    );
    assert!(tolerant.unanswered(&iii_sdk::Error::Timeout));
    assert!(tolerant.hook_timed_out(&denied));
    assert_eq!(tolerant.count(), 2);
    // No drop in the engine's log explains them: the check fails.
    let failed = std::panic::AssertUnwindSafe(tolerant.check(&real, "tolerance"))
        .catch_unwind()
        .await;
    assert!(
        failed.is_err(),
        "two unexplained unanswered calls must fail the check"
    );
}
