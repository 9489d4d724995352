//! Reconcile phase of the e2e bench (`architecture/contract.md` § Two harness
//! generations, "Reconcile"; `architecture/performance.md`).
//!
//! `E2E_RECONCILE_HELD` (default 10000) held calls spread over
//! `E2E_RECONCILE_SESSIONS` (default 1000) sessions are written into state;
//! a stand-in for today's harness answers `harness::status` listing every
//! other call of a session (so half the records leave as `aborted` /
//! `not_held`, half stay); the worker boots in-process, which starts the
//! reconcile right after its ready line. While the pass runs, and again
//! once it is over, `approval::gate` is asked about an allowed call
//! (through the engine, one at a time) and its latency recorded: p50 / p99
//! during the pass against idle. Run `E2E_ONLY=reconcile`; on a real engine
//! with `III_ENGINE_BIN`. Everything is loopback and bounded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use approval_gate::{bucket_scope, state_key};
use approval_gate_testkit::fixture::{call, wait_for_functions, EngineFixture};
use futures_util::stream::{self, StreamExt};
use iii_sdk::RegisterFunction;
use serde_json::{json, Value};

use crate::common::{self, start_in_process_with};
use crate::{env_usize, fmt_dur, hook_input, percentile, seed, FILL_CONCURRENCY, PHASE_LIMIT};

/// How long the pass may make no progress before sampling stops.
const STALL: Duration = Duration::from_secs(30);
/// Gate samples taken while idle, after the pass.
const IDLE_SAMPLES: usize = 2000;

/// The `i`-th record of the phase: the shared ~1 KB record moved into
/// session `i % sessions`, old enough for a reconcile to judge it.
fn record(i: usize, sessions: usize) -> approval_gate::PendingRecord {
    let mut record = common::record(i);
    record.session_id = format!("rec-s{:05}", i % sessions);
    record.turn_id = format!("rec-t{:05}", i % sessions);
    record
}

/// Whether the harness stand-in still lists record `i`.
fn kept(i: usize) -> bool {
    i.is_multiple_of(2)
}

pub(crate) async fn reconcile_phase() {
    let held = env_usize("E2E_RECONCILE_HELD", 10_000);
    let sessions = env_usize("E2E_RECONCILE_SESSIONS", 1_000).max(1);
    let engine = EngineFixture::start().await;
    let url = engine.url();
    println!(
        "\n## reconcile: {held} held calls across {sessions} sessions, {:?} engine\n",
        engine.kind()
    );
    let deadline = Instant::now() + PHASE_LIMIT;

    // What harness::status answers: the kept calls of each session.
    let mut listed: HashMap<String, Vec<String>> = HashMap::new();
    for i in (0..held).filter(|i| kept(*i)) {
        let r = record(i, sessions);
        listed
            .entry(r.session_id)
            .or_default()
            .push(r.function_call_id);
    }
    let listed = Arc::new(listed);
    let harness = engine.client("harness").await;
    let status_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    {
        let listed = listed.clone();
        let status_calls = status_calls.clone();
        harness.register_function(
            "harness::status",
            RegisterFunction::new_async(move |payload: Value| {
                let listed = listed.clone();
                status_calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async move {
                    let sid = payload["session_id"].as_str().unwrap_or_default();
                    let calls = listed.get(sid).cloned().unwrap_or_default();
                    Ok::<Value, iii_sdk::Error>(json!({
                        "session_id": sid,
                        "pending_function_calls": calls,
                    }))
                }
            }),
        );
        harness.register_function(
            "harness::filesystem::grants",
            RegisterFunction::new_async(move |payload: Value| async move {
                Ok::<Value, iii_sdk::Error>(
                    json!({"session_id": payload["session_id"], "roots": []}),
                )
            }),
        );
    }
    wait_for_functions(
        &harness,
        &["harness::status", "harness::filesystem::grants"],
    )
    .await;

    let filler = engine.client("bench-filler").await;
    let fill_start = Instant::now();
    let written: Vec<usize> = stream::iter(0..held)
        .map(|i| {
            let client = filler.clone();
            async move {
                if Instant::now() > deadline {
                    return 0;
                }
                let r = record(i, sessions);
                let scope = bucket_scope(&r.session_id, &r.function_call_id);
                let key = state_key(&r.session_id, &r.function_call_id);
                let value = serde_json::to_value(&r).unwrap_or(Value::Null);
                usize::from(
                    call(
                        &client,
                        "state::set",
                        json!({"scope": scope, "key": key, "value": value}),
                    )
                    .await
                    .is_ok(),
                )
            }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect()
        .await;
    let written: usize = written.into_iter().sum();
    println!(
        "filled {written} records in {:.1} s",
        fill_start.elapsed().as_secs_f64()
    );
    let expected_left = (0..held).filter(|i| kept(*i)).count();

    let probe = engine.client("bench-gate").await;
    let boot_start = Instant::now();
    let running = start_in_process_with(&url, Some(seed())).await;
    let booted = boot_start.elapsed();
    let loaded = running.held();
    wait_for_functions(&probe, &["approval::gate"]).await;

    // During the pass: gate calls back to back until the inbox settles.
    let pass_start = Instant::now();
    let mut during = Vec::new();
    let mut during_failed = Vec::new();
    let mut n = 0u64;
    let mut settled_at = None;
    // A pass that stops making progress (a record whose removal was lost)
    // ends the sampling after STALL.
    let (mut last_held, mut last_change) = (usize::MAX, Instant::now());
    while Instant::now() < deadline && last_change.elapsed() < STALL {
        let held_now = running.held();
        if held_now <= expected_left {
            settled_at = Some(pass_start.elapsed());
            break;
        }
        if held_now != last_held {
            (last_held, last_change) = (held_now, Instant::now());
        }
        n += 1;
        let input = hook_input((n % 16) as usize, &format!("rec-during-{n}"), "demo::echo");
        let start = Instant::now();
        let answer = call(&probe, "approval::gate", input).await;
        match answer {
            Ok(v) if v["decision"] == "continue" => during.push(start.elapsed()),
            other => during_failed.push((start.elapsed(), format!("{other:?}"))),
        }
    }
    let pass = settled_at.unwrap_or_else(|| pass_start.elapsed());
    let left = running.held();

    // Idle: the same calls with nothing else going on.
    let mut idle = Vec::new();
    let mut idle_failed = Vec::new();
    for k in 0..IDLE_SAMPLES {
        if Instant::now() > deadline {
            break;
        }
        let input = hook_input(k % 16, &format!("rec-idle-{k}"), "demo::echo");
        let start = Instant::now();
        match call(&probe, "approval::gate", input).await {
            Ok(v) if v["decision"] == "continue" => idle.push(start.elapsed()),
            other => idle_failed.push((start.elapsed(), format!("{other:?}"))),
        }
    }
    running.shutdown(Duration::from_secs(2)).await;
    during.sort();
    idle.sort();

    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| boot, in-process, {loaded} held (call → ready) | {:.2} s |",
        booted.as_secs_f64()
    );
    println!(
        "| reconcile pass: {} records left, {left} kept, {} `harness::status` calls | {:.2} s |",
        loaded.saturating_sub(left),
        status_calls.load(std::sync::atomic::Ordering::Relaxed),
        pass.as_secs_f64()
    );
    if settled_at.is_none() {
        println!(
            "| the pass did not settle within the phase's bound | expected {expected_left} kept |"
        );
    }
    for (name, answered, failed) in [
        ("during the pass", &during, &during_failed),
        ("idle", &idle, &idle_failed),
    ] {
        println!(
            "| gate latency {name}, p50 / p99 / max ({} answered, {} unanswered) | {} / {} / {} |",
            answered.len(),
            failed.len(),
            fmt_dur(percentile(answered, 0.50)),
            fmt_dur(percentile(answered, 0.99)),
            fmt_dur(answered.last().copied().unwrap_or_default())
        );
    }
    for (elapsed, what) in during_failed.iter().chain(idle_failed.iter()).take(5) {
        println!("unanswered after {}: {what}", fmt_dur(*elapsed));
    }
}
