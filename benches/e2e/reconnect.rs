//! The reconnect phase of the e2e bench (contract §21.8): how long a harness
//! can run calls with no gate after an engine restart, and how many it runs.
//!
//! Per round: the harness leaves, the engine restarts and forgets every
//! binding (a real engine keeps them in memory only; the test engine is told
//! to forget them), and a fresh harness connects at once — it reconnects
//! first, as a harness that restarts with its engine does — then sends
//! calls back to back until one is held. A call that reaches its target
//! with no hook in its chain ran **ungated**; one the gate's binding denied
//! because the worker was not back yet (`fail_closed`) did not run. The
//! worker is the release binary, measured in both orders:
//!
//! * `before_21_8` (`APPROVAL_GATE_RECONNECT=before_21_8`): the durable
//!   bindings are made again when the worker's own SDK reconnects (it tries
//!   every 2 s);
//! * `21_8`: the worker knocks on the engine's port every 20 ms while
//!   disconnected and makes them again through a short-lived auxiliary
//!   connection as soon as it answers.
//!
//! Knobs: `E2E_RECONNECT_ROUNDS` (default 5 per order), `E2E_RECONNECT_LOG=1`
//! (print the worker's log of each order), `E2E_ONLY=reconnect`.
//! Bounded: at most [`CALLS_PER_ROUND`] calls and [`ROUND_LIMIT`] per round.

use std::path::Path;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{EngineFixture, EngineKind};
use approval_gate_testkit::harness::{CallSpec, CallState, HarnessDouble, HarnessOptions};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::json;

use crate::env_usize;

/// The most calls one round sends.
const CALLS_PER_ROUND: usize = 2_000;
/// The longest one round waits for a held call.
const ROUND_LIMIT: Duration = Duration::from_secs(15);
/// The pause between two calls: traffic, not load.
const PAUSE: Duration = Duration::from_millis(2);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_approval-gate"))
}

/// What one round saw.
#[derive(Debug, Default, Clone)]
struct Round {
    /// From the restart to the fresh harness being live.
    harness_back: Duration,
    /// Calls that ran with no hook (ungated).
    ungated: usize,
    /// From the harness being live to the end of the last ungated call.
    ungated_until: Duration,
    /// Calls the gate's binding denied while the worker was not back.
    denied: usize,
    /// From the harness being live to the first held call.
    first_held: Option<Duration>,
}

/// The phase: both orders, the same number of rounds each.
pub async fn reconnect_phase() {
    let rounds = env_usize("E2E_RECONNECT_ROUNDS", 5);
    println!("\n## reconnect: calls run with no gate after an engine restart (§21.8)");
    for order in ["before_21_8", "21_8"] {
        let engine = EngineFixture::start().await;
        let kind = match engine.kind() {
            EngineKind::Test => "test engine",
            EngineKind::Real => "real engine",
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
        let mut harness =
            Some(HarnessDouble::start(&engine.url(), HarnessOptions::default()).await);
        let mut seen = Vec::new();
        for round in 0..rounds {
            if let Some(h) = harness.take() {
                h.shutdown().await;
            }
            // Let the worker's connection settle after the previous round.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let restarted = Instant::now();
            match engine.test_engine() {
                Some(test) => test
                    .restart_forgetting_durable_bindings()
                    .await
                    .expect("the test engine restarts"),
                None => engine.restart().await,
            }
            let fresh = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
            let result = measure(&fresh, round, restarted.elapsed()).await;
            println!(
                "{order:>12} round {round}: harness back after {:>5} ms; ungated calls {:>4} until {:>5} ms; denied (gate bound, worker not back) {:>4}; first held at {} ms",
                result.harness_back.as_millis(),
                result.ungated,
                result.ungated_until.as_millis(),
                result.denied,
                result.first_held.map_or("never".to_string(), |d| d.as_millis().to_string()),
            );
            seen.push(result);
            harness = Some(fresh);
        }
        let total: usize = seen.iter().map(|r| r.ungated).sum();
        let worst = seen.iter().map(|r| r.ungated).max().unwrap_or(0);
        let worst_ms = seen
            .iter()
            .map(|r| r.ungated_until.as_millis())
            .max()
            .unwrap_or(0);
        let mut windows: Vec<u128> = seen.iter().map(|r| r.ungated_until.as_millis()).collect();
        windows.sort_unstable();
        let median = windows.get(windows.len() / 2).copied().unwrap_or(0);
        println!(
            "{order:>12} on the {kind}: {rounds} restarts, {total} calls ran ungated (worst round {worst}); ungated window median {median} ms, worst {worst_ms} ms"
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

/// Sends calls back to back from a harness that just came back, until one
/// is held (or the round's bound).
async fn measure(harness: &HarnessDouble, round: usize, harness_back: Duration) -> Round {
    let live = Instant::now();
    let mut out = Round {
        harness_back,
        ..Round::default()
    };
    for i in 0..CALLS_PER_ROUND {
        if live.elapsed() > ROUND_LIMIT {
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
                out.first_held = Some(live.elapsed());
                break;
            }
            CallState::Denied { .. } => out.denied += 1,
            _ => {
                out.ungated += 1;
                out.ungated_until = live.elapsed();
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    out
}
