//! Failover and engine-crash phases of the e2e bench (`architecture/deployment.md`).
//!
//! * **failover**: held calls in state, an active instance and a standby
//!   (both the release binary, default `--standby-retry-ms`), harness calls
//!   in flight; SIGKILL the active one and time the standby's ready line.
//!   Targets: ≤ 5 s with 10,000 held calls, ≤ 10 s with 100,000. Knobs:
//!   `E2E_FAILOVER_HELD` (default `10000,100000`), `E2E_FAILOVER_RUNS`
//!   (default 3 per size), `E2E_SKIP_FAILOVER=1`.
//! * **engine kill** (real engine only): held calls through the harness,
//!   then SIGKILL the *engine* right after the last hold (or a moment
//!   later) and count what each state backend kept. Knobs: `E2E_KILL_HOLDS`
//!   (default 1000), `E2E_KILL_RUNS` (default 2), `E2E_SKIP_ENGINE_KILL=1`.
//!
//! On a real engine the failover runs on the file store and on Redis (when
//! `redis-server` is installed); on the test engine, once.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use approval_gate::all_scopes;
use approval_gate_testkit::fixture::{
    call, EngineFixture, EngineKind, RealEngineOptions, StateBackend,
};
use approval_gate_testkit::harness::{CallSpec, CallState, HarnessDouble, HarnessOptions};
use approval_gate_testkit::session::SessionDouble;
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use futures_util::stream::{self, StreamExt};
use serde_json::json;

use crate::{env_usize, fill_buckets, PHASE_LIMIT};

const READY: &str = "approval-gate ready";
const STANDING_BY: &str = "standing by";
/// How long a boot with 100k held calls may take on a busy machine.
const BOOT_LIMIT: Duration = Duration::from_secs(180);
/// Harness call lanes kept busy through a kill, and the pause between one
/// lane's calls: traffic to fail closed, not a load test (the machine has
/// two cores, and the boot being timed needs them).
const LANES: usize = 2;
const PAUSE: Duration = Duration::from_millis(50);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_approval-gate"))
}

/// The engines a phase runs on: the test engine, or a real one on each
/// state backend available.
async fn engines(phase: &str) -> Vec<EngineFixture> {
    let first = EngineFixture::start().await;
    if first.kind() == EngineKind::Test {
        return vec![first];
    }
    let mut all = vec![first];
    let redis = RealEngineOptions {
        state: StateBackend::Redis,
        ..RealEngineOptions::default()
    };
    if let Some(engine) = EngineFixture::start_real_with(phase, redis).await {
        all.push(engine);
    }
    all
}

/// Polls a process's output every 10 ms until `needle` appears.
async fn wait_line(process: &WorkerProcess, needle: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if process.output().contains(needle) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Seconds since the Unix epoch, now.
fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// When the first log line containing `needle` was written, in seconds of
/// the UTC day (from its `…THH:MM:SS.ffffffZ` timestamp).
fn logged_at(process: &WorkerProcess, needle: &str) -> Option<f64> {
    let output = process.output();
    let line = output.lines().find(|l| l.contains(needle))?;
    let clock = line.split('T').nth(1)?.split('Z').next()?;
    let mut parts = clock.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

fn held_in(process: &WorkerProcess) -> String {
    process
        .output()
        .lines()
        .find(|l| l.contains(READY))
        .and_then(|l| l.split("held=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("?")
        .to_string()
}

/// One harness call made while an instance died: when it started and how
/// it ended.
struct Sample {
    started: Instant,
    outcome: CallState,
}

/// Harness calls from [`LANES`] loops until `stop`.
fn traffic(
    harness: &HarnessDouble,
    tag: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Sample>> {
    let harness = harness.clone();
    tokio::spawn(async move {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let lanes = (0..LANES).map(|lane| {
            let (harness, stop, seen, tag) =
                (harness.clone(), stop.clone(), seen.clone(), tag.clone());
            async move {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    let outcome = harness
                        .call(CallSpec::new(
                            format!("{tag}_s{lane}"),
                            format!("{tag}_t{lane}_{i}"),
                            format!("{tag}_c{lane}_{i}"),
                            "demo::echo",
                            json!({}),
                        ))
                        .await;
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(Sample { started, outcome });
                    }
                    i += 1;
                    tokio::time::sleep(PAUSE).await;
                }
            }
        });
        futures_util::future::join_all(lanes).await;
        let samples = seen
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        samples
    })
}

pub async fn failover_phase() {
    let sizes: Vec<usize> = std::env::var("E2E_FAILOVER_HELD")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let runs = env_usize("E2E_FAILOVER_RUNS", 3);
    println!("\n## failover: SIGKILL of the active instance → the standby's ready line\n");
    println!("| engine | held calls | run | kill → ready | of which kill → name confirmed, held calls read | of which the rest of boot | held in ready line | harness calls after the kill (denied / held) | kill → first hold answered |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for held in sizes {
        for engine in engines("failover").await {
            failover_runs(&engine, held, runs).await;
        }
    }
}

async fn failover_runs(engine: &EngineFixture, held: usize, runs: usize) {
    let deadline = Instant::now() + PHASE_LIMIT;
    let url = engine.url();
    let filler = engine.client("failover-filler").await;
    let written = fill_buckets(&filler, 0, held, deadline).await;
    if written < held {
        eprintln!("failover: only {written} of {held} records written in time");
    }
    if engine.kind() == EngineKind::Real {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let harness = HarnessDouble::start(&url, HarnessOptions::default()).await;
    let _sessions = SessionDouble::start(&url).await;
    let _targets = TargetWorker::start(&url, &["demo::echo"]).await;
    let mut active = WorkerProcess::spawn(bin(), &url, &[], BOOT_LIMIT).await;
    if harness
        .wait_for_binding(
            "harness::hook::pre-trigger",
            "approval::gate",
            Duration::from_secs(30),
        )
        .await
        .is_none()
    {
        eprintln!("failover: the harness never got the gate's binding");
        return;
    }
    for run in 0..runs {
        if Instant::now() > deadline {
            eprintln!("failover: time limit reached after {run} runs");
            break;
        }
        let standby = WorkerProcess::spawn_raw(bin(), &url, &[]);
        if wait_line(&standby, STANDING_BY, BOOT_LIMIT).await.is_none() {
            eprintln!(
                "failover: the standby never stood by:\n{}",
                standby.output()
            );
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let calls = traffic(&harness, format!("fo{held}r{run}"), stop.clone());
        // Kill at a different point of the standby's retry cycle each run.
        let phase = wall_now().fract() * 1000.0;
        tokio::time::sleep(Duration::from_millis(200 + phase as u64)).await;
        active.kill();
        let killed = Instant::now();
        let killed_at = wall_now() % 86_400.0;
        let took = wait_line(&standby, READY, BOOT_LIMIT).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::SeqCst);
        let samples = calls.await.unwrap_or_default();
        let Some(took) = took else {
            eprintln!(
                "failover: the standby never took over:\n{}",
                standby.output()
            );
            return;
        };
        let after: Vec<&Sample> = samples.iter().filter(|s| s.started >= killed).collect();
        let denied = after
            .iter()
            .filter(|s| matches!(s.outcome, CallState::Denied { .. }))
            .count();
        let holds = after.iter().filter(|s| s.outcome.is_held()).count();
        let ungated = samples
            .iter()
            .filter(|s| matches!(s.outcome, CallState::Completed { .. }))
            .count();
        let first_hold = after
            .iter()
            .filter(|s| s.outcome.is_held())
            .map(|s| s.started.duration_since(killed))
            .min();
        let claimed = logged_at(&standby, "taking over").map(|t| t - killed_at);
        let secs = |d: Option<f64>| d.map(|d| format!("{d:.2} s")).unwrap_or_else(|| "–".into());
        println!(
            "| {} | {held} | {} | {:.2} s | {} | {} | {} | {denied} / {holds}{} | {} |",
            engine.label(),
            run + 1,
            took.as_secs_f64(),
            secs(claimed),
            secs(claimed.map(|c| took.as_secs_f64() - c)),
            held_in(&standby),
            if ungated > 0 {
                format!(" (**{ungated} ran ungated**)")
            } else {
                String::new()
            },
            first_hold
                .map(|d| format!("{:.2} s", d.as_secs_f64()))
                .unwrap_or_else(|| "–".into()),
        );
        active = standby;
    }
    active.terminate(Duration::from_secs(10)).await;
}

/// What one engine crash kept.
struct Kept {
    in_state: usize,
    running_lists: u64,
    next_lists: usize,
}

pub async fn engine_kill_phase() {
    let probe = EngineFixture::start().await;
    if probe.kind() == EngineKind::Test {
        println!("\n(engine kill phase: needs a real engine, III_ENGINE_BIN)");
        return;
    }
    drop(probe);
    let holds = env_usize("E2E_KILL_HOLDS", 1000);
    let runs = env_usize("E2E_KILL_RUNS", 2);
    println!("\n## engine SIGKILL after {holds} held calls: what each state backend kept\n");
    println!("| state backend | kill after the last hold | run | records in state after the restart | listed by the running worker | listed by a worker started afterwards |");
    println!("|---|---:|---:|---:|---:|---:|");
    for state in [
        StateBackend::File {
            save_interval_ms: 5000,
        },
        StateBackend::File {
            save_interval_ms: 100,
        },
        StateBackend::Redis,
    ] {
        for delay in [Duration::ZERO, Duration::from_millis(1000)] {
            for run in 0..runs {
                let options = RealEngineOptions {
                    state,
                    ..RealEngineOptions::default()
                };
                let Some(engine) = EngineFixture::start_real_with("engine_kill", options).await
                else {
                    break;
                };
                match crash_after_holds(&engine, holds, delay).await {
                    Some(kept) => println!(
                        "| {} | +{} ms | {} | {} / {holds} | {} | {} / {holds} |",
                        state.label(),
                        delay.as_millis(),
                        run + 1,
                        kept.in_state,
                        kept.running_lists,
                        kept.next_lists,
                    ),
                    None => println!(
                        "| {} | +{} ms | {} | (run failed) | | |",
                        state.label(),
                        delay.as_millis(),
                        run + 1
                    ),
                }
            }
        }
    }
}

async fn crash_after_holds(engine: &EngineFixture, holds: usize, delay: Duration) -> Option<Kept> {
    let url = engine.url();
    let harness = HarnessDouble::start(&url, HarnessOptions::default()).await;
    let _sessions = SessionDouble::start(&url).await;
    let _targets = TargetWorker::start(&url, &["demo::echo"]).await;
    let probe = engine.client("kill-probe").await;
    let mut worker = WorkerProcess::spawn(bin(), &url, &[], BOOT_LIMIT).await;
    harness
        .wait_for_binding(
            "harness::hook::pre-trigger",
            "approval::gate",
            Duration::from_secs(30),
        )
        .await?;
    let held = stream::iter(0..holds)
        .map(|i| {
            let harness = harness.clone();
            async move {
                harness
                    .call(CallSpec::new(
                        format!("k_s{}", i % 16),
                        format!("k_t{i}"),
                        format!("k_c{i}"),
                        "demo::echo",
                        json!({}),
                    ))
                    .await
                    .is_held()
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<bool>>()
        .await;
    if held.iter().any(|h| !h) {
        eprintln!("engine kill: not every call was held");
        return None;
    }
    tokio::time::sleep(delay).await;
    engine.kill_and_restart().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let running_lists = loop {
        if let Ok(health) = call(&probe, "approval::health", json!({})).await {
            if health["gated"] == true {
                break health["held"].as_u64().unwrap_or(0);
            }
        }
        if Instant::now() > deadline {
            eprintln!("engine kill: the worker never gated again");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut in_state = 0;
    for scope in all_scopes() {
        if let Ok(values) = call(&probe, "state::list", json!({"scope": scope})).await {
            in_state += values
                .as_array()
                .map(|a| a.iter().filter(|v| !v.is_null()).count())
                .unwrap_or(0);
        }
    }
    worker.kill();
    let next = WorkerProcess::spawn(bin(), &url, &[], BOOT_LIMIT).await;
    let next_lists = held_in(&next).parse().unwrap_or(0);
    drop(next);
    Some(Kept {
        in_state,
        running_lists,
        next_lists,
    })
}
