//! The reconnect phase of the e2e bench (contract §21.8, §26.6): after an
//! engine restart, how long the pre-trigger chain has no gate.
//!
//! Per round: the harness leaves, the engine stops, stays down for the
//! round's outage (spread evenly over 0.5–5 s: a process restarted by a
//! supervisor, a host that reboots slowly), and starts again forgetting
//! every binding (a real engine keeps them in memory only; the test engine
//! is told to forget them). The bench polls the engine's port every
//! millisecond; the instant it accepts connections, a fresh harness double
//! connects — back at once, as a harness restarted with its engine is.
//!
//! Measured per round, from the engine accepting connections:
//!
//! * **the gate bound**: the harness double received the gate's binding
//!   (`approval::gate` on `harness::hook::pre-trigger`), i.e. every call from
//!   then on runs the gate or, while the worker's own connection is not back,
//!   is denied by the binding's `fail_closed`. This is the worker-side
//!   interval of contract §26.6 (target: worst ≤ 250 ms over 10 restarts);
//! * the harness double greeted (its own share of the interval);
//! * then calls back to back (2 ms apart) until one is held: a call that
//!   reached its target with no hook in its chain ran **ungated**; one the
//!   gate's binding denied because the worker was not back yet did not run.
//!
//! The worker is the release binary. `E2E_RECONNECT_ORDERS=before_21_8,21_8`
//! also measures the order before §21.8 (`APPROVAL_GATE_RECONNECT=
//! before_21_8`: the durable bindings are made again only when the worker's
//! own SDK reconnects, which it tries every 2 s).
//!
//! Knobs: `E2E_RECONNECT_ROUNDS` (default 10), `E2E_RECONNECT_ORDERS`
//! (default `21_8`), `E2E_RECONNECT_HARNESS` (`g2`, today's harness, by
//! default; `g1` the brief's), `E2E_RECONNECT_STATE=redis` (a real engine
//! keeping its state in Redis), `E2E_RECONNECT_LOG=1` (print the worker's log),
//! `E2E_ONLY=reconnect`. Bounded: at most [`CALLS_PER_ROUND`] calls and
//! [`ROUND_LIMIT`] per round.

use std::path::Path;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{EngineFixture, EngineKind, RealEngineOptions, StateBackend};
use approval_gate_testkit::harness::{
    CallSpec, CallState, Generation, HarnessDouble, HarnessOptions,
};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::json;

use crate::env_usize;

/// The most calls one round sends.
const CALLS_PER_ROUND: usize = 2_000;
/// The longest one round waits for the gate's binding, then for a held call.
const ROUND_LIMIT: Duration = Duration::from_secs(15);
/// The pause between two calls: traffic, not load.
const PAUSE: Duration = Duration::from_millis(2);
/// The shortest and the longest outage.
const OUTAGES_MS: (u64, u64) = (500, 5_000);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_approval-gate"))
}

/// What one round saw; every duration counts from the engine accepting
/// connections again.
#[derive(Debug, Default, Clone)]
struct Round {
    outage: Duration,
    /// The harness double's connection greeted.
    harness_greeted: Option<Duration>,
    /// The harness double received the gate's binding.
    gate_bound: Option<Duration>,
    /// Calls that ran with no hook (ungated).
    ungated: usize,
    /// The end of the last ungated call.
    ungated_until: Duration,
    /// Calls the gate's binding denied while the worker was not back.
    denied: usize,
    /// The first held call.
    first_held: Option<Duration>,
}

/// The harness double's generation: `E2E_RECONNECT_HARNESS=g1` plays the
/// brief's harness, anything else today's (which announces
/// `harness::ready` when it starts).
fn harness_options() -> HarnessOptions {
    match std::env::var("E2E_RECONNECT_HARNESS").as_deref() {
        Ok("g1") => HarnessOptions::generation(Generation::G1),
        _ => HarnessOptions::generation(Generation::G2),
    }
}

/// The outage of round `round` of `rounds`: evenly from 0.5 to 5 s.
fn outage(round: usize, rounds: usize) -> Duration {
    let (low, high) = OUTAGES_MS;
    let step = if rounds > 1 {
        (high - low) / (rounds as u64 - 1)
    } else {
        0
    };
    Duration::from_millis(low + step * round as u64)
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("never".to_string(), |d| d.as_millis().to_string())
}

/// Median and worst of `values` (ms), `None` counted as the round's limit.
fn median_worst(values: impl Iterator<Item = Option<Duration>>) -> (u128, u128) {
    let mut ms: Vec<u128> = values
        .map(|d| d.unwrap_or(ROUND_LIMIT).as_millis())
        .collect();
    ms.sort_unstable();
    let median = ms.get(ms.len() / 2).copied().unwrap_or(0);
    (median, ms.last().copied().unwrap_or(0))
}

/// The phase: each order asked for, the same rounds each.
pub async fn reconnect_phase() {
    let rounds = env_usize("E2E_RECONNECT_ROUNDS", 10).max(1);
    let orders = std::env::var("E2E_RECONNECT_ORDERS").unwrap_or_else(|_| "21_8".into());
    println!("\n## reconnect: the pre-trigger chain without a gate after an engine restart (§21.8, §26.6)");
    for order in orders.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let redis = std::env::var("E2E_RECONNECT_STATE").is_ok_and(|s| s == "redis");
        let engine = if redis {
            let options = RealEngineOptions {
                state: StateBackend::Redis,
                ..RealEngineOptions::default()
            };
            match EngineFixture::start_real_with("reconnect", options).await {
                Some(engine) => engine,
                None => return,
            }
        } else {
            EngineFixture::start().await
        };
        let kind = match (engine.kind(), redis) {
            (EngineKind::Test, _) => "test engine",
            (EngineKind::Real, false) => "real engine (file kv)",
            (EngineKind::Real, true) => "real engine (redis)",
        };
        let _targets = TargetWorker::start(&engine.url(), &["demo::echo"]).await;
        let envs: &[(&str, &str)] = if order == "before_21_8" {
            &[("APPROVAL_GATE_RECONNECT", "before_21_8")]
        } else {
            &[]
        };
        let mut worker =
            WorkerProcess::spawn_with(bin(), &engine.url(), &[], envs, Duration::from_secs(60))
                .await;
        let mut harness = Some(HarnessDouble::start(&engine.url(), harness_options()).await);
        let mut seen = Vec::new();
        for round in 0..rounds {
            if let Some(h) = harness.take() {
                h.shutdown().await;
            }
            // Let the worker's connection settle after the previous round.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let outage = outage(round, rounds);
            let accepting = engine.restart_after(outage).await.into_std();
            let fresh = HarnessDouble::start(&engine.url(), harness_options()).await;
            let result = measure(&fresh, round, outage, accepting).await;
            println!(
                "{order:>12} round {round}: outage {:>4} ms; from the engine accepting: harness greeted {:>4} ms, gate bound {:>5} ms; ungated calls {:>4} until {:>5} ms; denied (gate bound, worker not back) {:>4}; first held at {} ms",
                result.outage.as_millis(),
                ms(result.harness_greeted),
                ms(result.gate_bound),
                result.ungated,
                result.ungated_until.as_millis(),
                result.denied,
                ms(result.first_held),
            );
            seen.push(result);
            harness = Some(fresh);
        }
        let total: usize = seen.iter().map(|r| r.ungated).sum();
        let (bound_median, bound_worst) = median_worst(seen.iter().map(|r| r.gate_bound));
        let (greet_median, greet_worst) = median_worst(seen.iter().map(|r| r.harness_greeted));
        let (window_median, window_worst) =
            median_worst(seen.iter().map(|r| Some(r.ungated_until)));
        println!(
            "{order:>12} on the {kind}: {rounds} restarts (outages {}–{} ms); gate bound after the engine accepted: median {bound_median} ms, worst {bound_worst} ms (harness greeted: median {greet_median} ms, worst {greet_worst} ms); {total} calls ran ungated, ungated window median {window_median} ms, worst {window_worst} ms",
            OUTAGES_MS.0,
            outage(rounds - 1, rounds).as_millis(),
        );
        if let Some(h) = harness.take() {
            h.shutdown().await;
        }
        if std::env::var("E2E_RECONNECT_LOG").is_ok() {
            println!("{}", worker.output());
        }
        worker.kill();
    }
}

/// From a harness that just came back: calls back to back until one is
/// held (or the round's bound), then when the gate's binding arrived (the
/// double records the instant, whatever the calls were doing).
async fn measure(
    harness: &HarnessDouble,
    round: usize,
    outage: Duration,
    accepting: Instant,
) -> Round {
    let mut out = Round {
        outage,
        ..Round::default()
    };
    let since = |at: Instant| at.saturating_duration_since(accepting);
    let calling = Instant::now();
    for i in 0..CALLS_PER_ROUND {
        if calling.elapsed() > ROUND_LIMIT {
            break;
        }
        let spec = CallSpec::new(
            format!("rc_s{round}"),
            format!("rc_t{round}"),
            format!("rc_c{round}_{i}"),
            "demo::echo",
            json!({"i": i}),
        );
        match harness.call(spec).await {
            CallState::Held { .. } => {
                out.first_held = Some(since(Instant::now()));
                break;
            }
            CallState::Denied { .. } => out.denied += 1,
            _ => {
                out.ungated += 1;
                out.ungated_until = since(Instant::now());
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    let gate = || harness.first_bound("harness::hook::pre-trigger", "approval::gate");
    while gate().is_none() && calling.elapsed() < ROUND_LIMIT {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    out.gate_bound = gate().map(since);
    out.harness_greeted = harness.connected_at().map(since);
    out
}
