//! The decision log's phase of the e2e bench (`E2E_ONLY=decision_log`):
//! the gate's answer with `decision_log` off and on, through the same
//! engine, rounds interleaved (off, on, off, on, …) so both see the same
//! machine. Cases: continue and deny (sequential, one call at a time) and
//! continue with [`CONCURRENCY`] calls in flight. With the log on, every
//! verdict also queues one record, which the log's own task sends as a void
//! call to a function of the targets worker.
//!
//! Knobs: `E2E_ROUNDS` (default 10) × `E2E_PER_ROUND` (default 100).

use std::sync::Arc;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::call;
use approval_gate_testkit::targets::Echo;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::{env_usize, hook_input, percentile, seed, start_world, World, CONCURRENCY, SESSIONS};

/// The log's function.
const LOG: &str = "bench::decision-log";

/// The worker's configuration with the log on or off.
fn config(on: bool) -> Value {
    let mut value = seed();
    if on {
        value["decision_log"] = json!({"function_id": LOG});
    }
    value
}

/// Switches the log and waits until the worker runs with it.
async fn switch(world: &World, on: bool) {
    call(
        &world.console,
        "configuration::set",
        json!({"id": "approval-gate", "value": config(on)}),
    )
    .await
    .expect("configuration::set");
    let worker = world.worker.as_ref().expect("the worker runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.config().decision_log.is_some() != on {
        assert!(
            Instant::now() < deadline,
            "the worker never switched the log"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Default)]
struct Series {
    continue_: Vec<Duration>,
    deny: Vec<Duration>,
    /// Calls and wall time of the concurrent continue runs.
    concurrent: (usize, Duration),
    /// Calls that got no answer.
    failed: usize,
}

/// One gate call's latency; `None` when its answer did not come (the real
/// engine of 0.23 drops a reply now and then: architecture/integration.md
/// § Lost replies), counted as unanswered.
async fn one(
    world: &World,
    id: &str,
    function_id: &str,
    expected: &str,
    session: usize,
) -> Option<Duration> {
    let input = hook_input(session, id, function_id);
    let start = Instant::now();
    let out = call(world.harness.client(), "approval::gate", input).await;
    let elapsed = start.elapsed();
    match out {
        Ok(out) => {
            assert_eq!(out["decision"], expected, "{out}");
            Some(elapsed)
        }
        Err(err) => {
            eprintln!("decision log bench: {id} got no answer: {err}");
            None
        }
    }
}

async fn round(world: &World, series: &mut Series, tag: &str, r: usize, per_round: usize) {
    for i in 0..per_round {
        let session = i % SESSIONS;
        let id = format!("dl-{tag}-{r}-c{i}");
        match one(world, &id, "demo::echo", "continue", session).await {
            Some(t) => series.continue_.push(t),
            None => series.failed += 1,
        }
        let id = format!("dl-{tag}-{r}-d{i}");
        match one(world, &id, "demo::blocked", "deny", session).await {
            Some(t) => series.deny.push(t),
            None => series.failed += 1,
        }
    }
    let start = Instant::now();
    let answered: usize = stream::iter(0..per_round)
        .map(|i| {
            let id = format!("dl-{tag}-{r}-p{i}");
            async move {
                let input = hook_input(i % SESSIONS, &id, "demo::echo");
                let out = call(world.harness.client(), "approval::gate", input).await;
                usize::from(matches!(out, Ok(v) if v["decision"] == "continue"))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<usize>>()
        .await
        .into_iter()
        .sum();
    series.concurrent.0 += answered;
    series.failed += per_round - answered;
    series.concurrent.1 += start.elapsed();
}

fn line(label: &str, samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "{label:<34} n={:>5}  p50 {:>7.3} ms  p99 {:>7.3} ms",
        samples.len(),
        percentile(samples, 0.50).as_secs_f64() * 1e3,
        percentile(samples, 0.99).as_secs_f64() * 1e3,
    )
}

pub(crate) async fn decision_log_phase() {
    let rounds = env_usize("E2E_ROUNDS", 10);
    let per_round = env_usize("E2E_PER_ROUND", 100);
    let world = start_world().await;
    world._targets.add(LOG, Arc::new(Echo)).await;
    println!(
        "decision log: gate latency with the log off and on, on the {}, {rounds} rounds × {per_round} calls per case",
        world.engine.label()
    );
    // Warm every session's settings once.
    for s in 0..SESSIONS {
        let _ = one(&world, &format!("dl-warm-{s}"), "demo::echo", "continue", s).await;
    }
    let (mut off, mut on) = (Series::default(), Series::default());
    for r in 0..rounds {
        switch(&world, false).await;
        round(&world, &mut off, "off", r, per_round).await;
        switch(&world, true).await;
        round(&world, &mut on, "on", r, per_round).await;
    }
    switch(&world, false).await;
    for (name, series) in [("off", &mut off), ("on", &mut on)] {
        println!(
            "{}",
            line(&format!("continue, log {name}"), &mut series.continue_)
        );
        println!("{}", line(&format!("deny, log {name}"), &mut series.deny));
        let (n, wall) = series.concurrent;
        println!(
            "{:<34} {:>8.0} calls/s ({n} calls, {CONCURRENCY} in flight); {} calls unanswered",
            format!("continue throughput, log {name}"),
            n as f64 / wall.as_secs_f64().max(1e-9),
            series.failed,
        );
    }
    let delivered = world._targets.runs(LOG);
    let health = call(&world.console, "approval::health", json!({}))
        .await
        .expect("health");
    println!(
        "decision log: {delivered} records reached {LOG}; health {}",
        health["decision_log"]
    );
}
