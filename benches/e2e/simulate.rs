//! `E2E_ONLY=simulate`: `approval::simulate` with `from_pending` over
//! `E2E_HELD` (default 100,000) held calls through an engine, against the
//! cost of listing the same calls with `approval::list-pending` (every page
//! of 500) — contract §24's target: within 2× the listing.
//!
//! The held records are the scale phase's (about 1 KB each, four calls per
//! session), written to state and loaded by an in-process worker's boot.
//! The first simulation reads every session's settings cold (one
//! `state::get` each, 32 at a time); the second finds them cached. Both are
//! reported, each as a ratio to the listing measured in the same run.

use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, EngineFixture, EngineKind};
use serde_json::{json, Value};

use super::common::start_in_process;
use super::{env_usize, fill_buckets, PHASE_LIMIT};

/// Pages through the whole inbox (limit 500): the time and the count.
async fn list_all(client: &iii_sdk::IIIClient) -> (Duration, usize) {
    let start = Instant::now();
    let mut cursor: Option<String> = None;
    let mut items = 0;
    loop {
        let mut request = json!({"limit": 500});
        if let Some(c) = &cursor {
            request["cursor"] = json!(c);
        }
        let Ok(out) = call(client, "approval::list-pending", request).await else {
            break;
        };
        items += out["pending"].as_array().map_or(0, Vec::len);
        match out["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    (start.elapsed(), items)
}

/// One `approval::simulate {config, from_pending: true}`: the time, the
/// results and how many changed.
async fn simulate_all(client: &iii_sdk::IIIClient, draft: &Value) -> (Duration, usize, usize) {
    let start = Instant::now();
    let out = call(
        client,
        "approval::simulate",
        json!({"config": draft, "from_pending": true}),
    )
    .await;
    let elapsed = start.elapsed();
    let (results, changed) = match &out {
        Ok(out) => {
            let results = out["results"].as_array().cloned().unwrap_or_default();
            let changed = results.iter().filter(|r| r["changed"] == true).count();
            (results.len(), changed)
        }
        Err(err) => {
            eprintln!("simulate failed: {err:?}");
            (0, 0)
        }
    };
    (elapsed, results, changed)
}

pub(super) async fn simulate_phase() {
    let held = env_usize("E2E_HELD", 100_000);
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let client = engine.client("bench-simulate").await;
    let deadline = Instant::now() + PHASE_LIMIT;
    println!(
        "\n## simulate from_pending over {held} held calls, {:?} engine\n",
        engine.kind()
    );
    let written = fill_buckets(&client, 0, held, deadline).await;
    if engine.kind() == EngineKind::Real {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let running = start_in_process(&url).await;
    println!("filled {written}; the worker holds {}", running.held());
    // A draft that decides the records' function ids differently.
    let draft = json!({"rules": ["!approval::*", "bench::*", "demo::*", "coder::*", "shell::*"]});
    let (list, listed) = list_all(&client).await;
    let (cold, results, changed) = simulate_all(&client, &draft).await;
    let (list2, _) = list_all(&client).await;
    let (warm, _, _) = simulate_all(&client, &draft).await;
    let list_best = list.min(list2);
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| list-pending, every page of 500 ({listed} records), best of 2 | {:.0} ms |",
        list_best.as_secs_f64() * 1e3
    );
    println!(
        "| simulate from_pending, settings cold ({results} results, {changed} changed) | {:.0} ms ({:.2}× the listing) |",
        cold.as_secs_f64() * 1e3,
        cold.as_secs_f64() / list_best.as_secs_f64()
    );
    println!(
        "| simulate from_pending, settings cached | {:.0} ms ({:.2}× the listing; target ≤ 2×) |",
        warm.as_secs_f64() * 1e3,
        warm.as_secs_f64() / list_best.as_secs_f64()
    );
    running.shutdown(Duration::from_secs(2)).await;
}
