//! `E2E_ONLY=batch`: one `approval::resolve-batch` of `E2E_BATCH` (default
//! 100) held calls of one turn against as many `approval::resolve` calls one
//! after another, through an engine and the harness double whose target
//! takes `E2E_BATCH_TARGET_MS` (default 50) to run (today's harness answers
//! an allowed call only when it has run). Contract §24's target: the batch
//! in at most half the time of the sequential resolves.

use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, EngineFixture};
use approval_gate_testkit::harness::{CallSpec, HarnessDouble, HarnessOptions};
use approval_gate_testkit::targets::TargetWorker;
use serde_json::json;

use super::common::start_in_process_with;
use super::env_usize;

const TARGET: &str = "demo::echo";

/// Holds `n` calls of one turn, one after another.
async fn hold_turn(harness: &HarnessDouble, session: &str, turn: &str, n: usize) {
    for i in 0..n {
        let out = harness
            .call(CallSpec::new(
                session,
                turn,
                format!("{turn}_c{i}"),
                TARGET,
                json!({"i": i}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
    }
}

pub(super) async fn batch_phase() {
    let n = env_usize("E2E_BATCH", 100);
    let target_ms = env_usize("E2E_BATCH_TARGET_MS", 50) as u64;
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let harness = HarnessDouble::start(&url, HarnessOptions::default()).await;
    let targets = TargetWorker::start(&url, &[TARGET]).await;
    targets.set_delay(TARGET, Duration::from_millis(target_ms));
    let console = engine.client("bench-batch").await;
    let _worker = start_in_process_with(
        &url,
        Some(json!({"rules": ["!approval::*"], "resolve_wait_ms": 120_000})),
    )
    .await;
    assert!(harness
        .wait_for_binding(
            "harness::hook::pre-trigger",
            "approval::gate",
            Duration::from_secs(10)
        )
        .await
        .is_some());
    println!(
        "\n## resolve-batch of {n} held calls vs {n} sequential resolves (targets take {target_ms} ms), {:?} engine\n",
        engine.kind()
    );

    hold_turn(&harness, "bench-b", "batch", n).await;
    let start = Instant::now();
    let out = call(
        &console,
        "approval::resolve-batch",
        json!({"session_id": "bench-b", "turn_id": "batch", "decision": "allow"}),
    )
    .await
    .expect("resolve-batch");
    let batch = start.elapsed();
    let resolved = out["results"]
        .as_array()
        .map_or(0, |r| r.iter().filter(|r| r["resolved"] == true).count());

    hold_turn(&harness, "bench-b", "single", n).await;
    let start = Instant::now();
    let mut singles = 0;
    for i in 0..n {
        let out = call(
            &console,
            "approval::resolve",
            json!({"session_id": "bench-b", "function_call_id": format!("single_c{i}"), "decision": "allow"}),
        )
        .await
        .expect("resolve");
        singles += usize::from(out["resolved"] == true);
    }
    let sequential = start.elapsed();
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| one resolve-batch, {resolved} of {n} resolved | {:.0} ms |",
        batch.as_secs_f64() * 1e3
    );
    println!(
        "| {n} sequential resolves, {singles} resolved | {:.0} ms |",
        sequential.as_secs_f64() * 1e3
    );
    println!(
        "| ratio batch / sequential (target ≤ 0.5) | {:.2} |",
        batch.as_secs_f64() / sequential.as_secs_f64()
    );
}
