//! End-to-end benchmark: the gate's answers measured through an engine, side
//! by side with a no-op echo through the same engine, plus the worker's
//! memory and boot time with 100k held calls (every one carrying deadlines)
//! and with 1M stored sessions, a burst of expiries delivered while the gate
//! keeps answering, and the single-scope `state::list` limit that the
//! 64-bucket layout avoids.
//!
//! `cargo bench --bench e2e` runs on the in-process test engine;
//! `III_ENGINE_BIN=/path/to/iii cargo bench --bench e2e` on a real engine.
//! Knobs: `E2E_ROUNDS` (default 10) × `E2E_PER_ROUND` (default 100) samples
//! per case, `E2E_HELD` (default 100000) records for the scale phase,
//! `E2E_SESSIONS` (default 1000000) stored sessions' settings for the
//! sessions phase, `E2E_BURST` (default 10000) holds expiring within one
//! second, `E2E_SKIP_LATENCY=1` / `E2E_SKIP_SCALE=1` / `E2E_SKIP_SESSIONS=1` /
//! `E2E_SKIP_BURST=1` / `E2E_SKIP_CAP=1` / `E2E_SKIP_FAILOVER=1` /
//! `E2E_SKIP_ENGINE_KILL=1` / `E2E_SKIP_RECONNECT=1` / `E2E_SKIP_REVIEWER=1` /
//! `E2E_SKIP_DECISION_LOG=1` / `E2E_SKIP_RECONCILE=1` / `E2E_SKIP_SIMULATE=1` /
//! `E2E_SKIP_BATCH=1` / `E2E_SKIP_COMMANDS=1` to leave phases out, or
//! `E2E_ONLY=scale,burst` (any of latency, scale, sessions, burst, cap,
//! failover, engine_kill, reconnect, reviewer, decision_log, reconcile,
//! simulate, batch, commands) to run only some;
//! `E2E_CASES=b,c` to measure only some cases. The failover and engine-crash
//! phases (`e2e/failover.rs`), the reconnect phase (`e2e/reconnect.rs`: calls
//! run with no gate after an engine restart), the reviewer phase
//! (`e2e/reviewer.rs`) and the reconcile phase (`e2e/reconcile.rs`: 10k held
//! calls across 1k sessions, the gate's latency during the pass) have knobs of
//! their own; the command rules' phase (`e2e/commands.rs`: continue and deny
//! with and without a command rule, §25.10) takes `E2E_COMMAND_BYTES`.
//!
//! Everything is loopback, every loop is bounded in count and in time, and
//! the run stops by itself ([`TOTAL_LIMIT`]). The machine is shared, so the
//! cases are interleaved round by round and each is reported as a ratio to
//! the no-op (a) and the echo (a') measured in the same rounds; absolute
//! figures are for context.

#[path = "e2e/batch.rs"]
mod batch;
#[path = "e2e/commands.rs"]
mod commands;
mod common;
#[path = "e2e/decision_log.rs"]
mod decision_log;
#[path = "e2e/failover.rs"]
mod failover;
#[path = "e2e/reconcile.rs"]
mod reconcile;
#[path = "e2e/reconnect.rs"]
mod reconnect;
#[path = "e2e/reviewer.rs"]
mod reviewer;
#[path = "e2e/simulate.rs"]
mod simulate;

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use approval_gate::PendingIndex;
use approval_gate::PendingRecord;
use approval_gate::{all_scopes, bucket_scope, state_key, LOAD_CONCURRENCY};
use approval_gate_testkit::fixture::{call, wait_for_functions, EngineFixture, EngineKind};
use approval_gate_testkit::harness::{CallSpec, HarnessDouble, HarnessOptions};
use approval_gate_testkit::session::SessionDouble;
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use futures_util::stream::{self, StreamExt};
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

use common::{start_in_process, start_in_process_with};

/// The whole run's bound.
const TOTAL_LIMIT: Duration = Duration::from_secs(40 * 60);
/// Bound of one measured phase.
const PHASE_LIMIT: Duration = Duration::from_secs(10 * 60);
/// Calls in flight in the throughput runs.
const CONCURRENCY: usize = 16;
/// Sessions the bench's calls are spread over.
const SESSIONS: usize = 16;
/// Requests in flight while state is filled.
const FILL_CONCURRENCY: usize = 32;
/// Timeout of a `state::list` that may carry tens of MiB.
const LIST_TIMEOUT: Duration = Duration::from_secs(20);
/// The SDK's cap on one WebSocket message.
const SDK_MESSAGE_CAP: usize = 64 << 20;

/// Counts live heap bytes while [`COUNTING`] is on (the memory model only),
/// so the model is exact rather than read off a resident set that the
/// allocator does not give back. Off, it costs one relaxed load: a shared
/// counter bumped by every allocation of every thread (engine, worker,
/// clients) would add contention to the latency phase.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,iii_sdk=warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        if tokio::time::timeout(TOTAL_LIMIT, run()).await.is_err() {
            eprintln!("e2e: stopped after {TOTAL_LIMIT:?}");
            std::process::exit(2);
        }
    });
    // The SDK clients' threads are not joined; leave without waiting for them.
    std::process::exit(0);
}

/// The phases, by the name `E2E_ONLY` takes, with the flag that leaves each
/// out.
const PHASES: &[(&str, &str)] = &[
    ("latency", "E2E_SKIP_LATENCY"),
    ("scale", "E2E_SKIP_SCALE"),
    ("sessions", "E2E_SKIP_SESSIONS"),
    ("burst", "E2E_SKIP_BURST"),
    ("cap", "E2E_SKIP_CAP"),
    ("failover", "E2E_SKIP_FAILOVER"),
    ("engine_kill", "E2E_SKIP_ENGINE_KILL"),
    ("reconnect", "E2E_SKIP_RECONNECT"),
    ("reviewer", "E2E_SKIP_REVIEWER"),
    ("decision_log", "E2E_SKIP_DECISION_LOG"),
    ("reconcile", "E2E_SKIP_RECONCILE"),
    ("simulate", "E2E_SKIP_SIMULATE"),
    ("batch", "E2E_SKIP_BATCH"),
    ("commands", "E2E_SKIP_COMMANDS"),
];

/// Whether a phase runs: `E2E_ONLY=scale,burst` runs only those; otherwise
/// every phase runs unless its `E2E_SKIP_…` flag is set.
fn phase_on(name: &str) -> bool {
    let skip = PHASES
        .iter()
        .find(|(phase, _)| *phase == name)
        .map(|(_, flag)| *flag)
        .unwrap_or("E2E_SKIP_UNKNOWN");
    match std::env::var("E2E_ONLY") {
        Ok(only) => only.split(',').any(|p| p.trim() == name),
        Err(_) => !env_flag(skip),
    }
}

async fn run() {
    print_machine();
    if let Ok(only) = std::env::var("E2E_ONLY") {
        for name in only.split(',').map(str::trim) {
            assert!(
                PHASES.iter().any(|(phase, _)| *phase == name),
                "E2E_ONLY: unknown phase {name:?}; the phases are {:?}",
                PHASES.iter().map(|(phase, _)| *phase).collect::<Vec<_>>()
            );
        }
    }
    if phase_on("latency") {
        latency_phase().await;
    }
    if phase_on("scale") {
        scale_phase().await;
    }
    if phase_on("sessions") {
        sessions_phase().await;
    }
    if phase_on("burst") {
        burst_phase().await;
    }
    if phase_on("cap") {
        cap_phase().await;
    }
    if phase_on("failover") {
        failover::failover_phase().await;
    }
    if phase_on("engine_kill") {
        failover::engine_kill_phase().await;
    }
    if phase_on("reconnect") {
        reconnect::reconnect_phase().await;
    }
    if phase_on("reviewer") {
        reviewer::reviewer_phase().await;
    }
    if phase_on("decision_log") {
        decision_log::decision_log_phase().await;
    }
    if phase_on("reconcile") {
        reconcile::reconcile_phase().await;
    }
    if phase_on("simulate") {
        simulate::simulate_phase().await;
    }
    if phase_on("batch") {
        batch::batch_phase().await;
    }
    if phase_on("commands") {
        commands::commands_phase().await;
    }
}

fn print_machine() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
        .unwrap_or("unknown");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo.lines().next().unwrap_or("").trim().to_string();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!("machine: {cpus} cpus, {model}, {mem}");
}

// ── latency and throughput ───────────────────────────────────────────────

/// The worker's configuration for the bench: the echo is allowed, one
/// function is denied, `demo::held` matches nothing and holds; a hundred
/// rules of the micro benches' mix sit behind them.
fn seed() -> Value {
    let mut rules = vec![
        json!("!approval::*"),
        json!("demo::echo"),
        json!("!demo::blocked"),
    ];
    rules.extend(
        common::rule_specs(100)
            .into_iter()
            .filter_map(|r| serde_json::to_value(r).ok()),
    );
    json!({"default_mode": "manual", "rules": rules, "grant_reask_limit": 3})
}

/// The arguments every call carries (a small shell-like call).
fn arguments() -> Value {
    json!({"cmd": "ls -la /workspace/project", "cwd": "/workspace/project", "timeout_ms": 30000})
}

/// A pre-trigger hook input as the harness sends it.
fn hook_input(session: usize, call_id: &str, function_id: &str) -> Value {
    json!({
        "point": "pre_trigger",
        "session_id": format!("bench-s{session}"),
        "turn_id": format!("bench-t{session}"),
        "step": 0,
        "depth": 0,
        "metadata": {"working_dir": "/workspace/project"},
        "call": {"id": call_id, "function_id": function_id, "arguments": arguments()},
    })
}

fn spec(session: usize, call_id: &str, function_id: &str) -> CallSpec {
    CallSpec::new(
        format!("bench-s{session}"),
        format!("bench-t{session}"),
        call_id,
        function_id,
        arguments(),
    )
    .with_working_dir("/workspace/project")
}

struct World {
    engine: EngineFixture,
    harness: HarnessDouble,
    _sessions: SessionDouble,
    _targets: TargetWorker,
    console: IIIClient,
    _noop: IIIClient,
    worker: Option<approval_gate::Running>,
}

/// The baseline: a function that does nothing and answers what the gate
/// answers on continue, served by a plain SDK worker. The gate's cost over
/// it is the gate's own work; the round trip is the same.
const NOOP: &str = "bench::noop";
/// The echo baseline: answers its payload back (a reply the size of the
/// hook input, like the gate's deny), served by the same plain SDK worker.
const ECHO: &str = "bench::echo";

async fn start_world() -> World {
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let harness = HarnessDouble::start(&url, HarnessOptions::default()).await;
    let sessions = SessionDouble::start(&url).await;
    for s in 0..SESSIONS {
        sessions.put(
            &format!("bench-s{s}"),
            json!({"title": format!("Bench session {s}"), "description": "benchmark",
                   "metadata": {"tenant": format!("tenant-{}", s % 4)}}),
        );
    }
    let targets = TargetWorker::start(&url, &["demo::echo", "demo::blocked", "demo::held"]).await;
    let console = engine.client("bench-console").await;
    let noop = engine.client("bench-noop").await;
    noop.register_function(
        NOOP,
        RegisterFunction::new_async(|_input: Value| async move {
            Ok::<Value, iii_sdk::Error>(json!({"decision": "continue"}))
        }),
    );
    noop.register_function(
        ECHO,
        RegisterFunction::new_async(
            |input: Value| async move { Ok::<Value, iii_sdk::Error>(input) },
        ),
    );
    wait_for_functions(&noop, &[NOOP, ECHO]).await;
    let worker = start_in_process_with(&url, Some(seed())).await;
    assert!(
        harness
            .wait_for_binding(
                "harness::hook::pre-trigger",
                "approval::gate",
                Duration::from_secs(10)
            )
            .await
            .is_some(),
        "the harness never received the gate's binding"
    );
    World {
        engine,
        harness,
        _sessions: sessions,
        _targets: targets,
        console,
        _noop: noop,
        worker: Some(worker),
    }
}

/// One measured case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    Noop,
    Echo,
    Continue,
    ContinueHarness,
    Deny,
    DenyHarness,
    Hold,
    ResolveAllow,
    ResolveDeny,
}

const CASES: [Case; 9] = [
    Case::Noop,
    Case::Echo,
    Case::Continue,
    Case::ContinueHarness,
    Case::Deny,
    Case::DenyHarness,
    Case::Hold,
    Case::ResolveAllow,
    Case::ResolveDeny,
];

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Noop => "(a) no-op function, no gate (baseline)",
            Case::Echo => "(a') echo function, no gate (answers its payload back)",
            Case::Continue => "(b) gate → continue",
            Case::ContinueHarness => "(b') harness call, gate continue + target",
            Case::Deny => "(c) gate → deny",
            Case::DenyHarness => "(c') harness call, gate deny",
            Case::Hold => "(d) gate → hold (record written)",
            Case::ResolveAllow => "(e) resolve allow (harness runs the call)",
            Case::ResolveDeny => "(e') resolve deny (harness delivers)",
        }
    }
}

struct Samples {
    case: Case,
    latencies: Vec<Duration>,
    /// Calls and wall time of the runs with [`CONCURRENCY`] in flight.
    concurrent: (usize, Duration),
    /// Calls that failed in the concurrent runs.
    failed: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A fresh, unique call id.
fn next_id(prefix: &str, counter: &mut u64) -> String {
    *counter += 1;
    format!("{prefix}-{}", *counter)
}

/// Runs one sample of `case` and returns its latency, or `None` when the
/// answer was wrong or did not come (reported and counted, not timed).
async fn sample(world: &World, case: Case, counter: &mut u64) -> Option<Duration> {
    CURRENT.with(|c| c.set(Some(case)));
    let h = world.harness.client();
    let session = (*counter as usize) % SESSIONS;
    match case {
        Case::Noop => {
            let input = hook_input(session, &next_id("n", counter), "demo::echo");
            timed(call(h, NOOP, input), |r| r.is_ok()).await
        }
        Case::Echo => {
            let input = hook_input(session, &next_id("e", counter), "demo::echo");
            timed(call(h, ECHO, input), |r| r.is_ok()).await
        }
        Case::Continue => {
            let input = hook_input(session, &next_id("c", counter), "demo::echo");
            timed(
                call(h, "approval::gate", input),
                |r| matches!(r, Ok(v) if v["decision"] == "continue"),
            )
            .await
        }
        Case::Deny => {
            let input = hook_input(session, &next_id("d", counter), "demo::blocked");
            timed(
                call(h, "approval::gate", input),
                |r| matches!(r, Ok(v) if v["decision"] == "deny"),
            )
            .await
        }
        Case::Hold => {
            let input = hook_input(session, &next_id("h", counter), "demo::held");
            timed(
                call(h, "approval::gate", input),
                |r| matches!(r, Ok(v) if v["decision"] == "hold"),
            )
            .await
        }
        Case::ContinueHarness => {
            let spec = spec(session, &next_id("hc", counter), "demo::echo");
            timed(world.harness.call(spec), |s| s.result().is_some()).await
        }
        Case::DenyHarness => {
            let spec = spec(session, &next_id("hd", counter), "demo::blocked");
            timed(world.harness.call(spec), |s| s.deny_reason().is_some()).await
        }
        Case::ResolveAllow | Case::ResolveDeny => {
            let call_id = next_id("r", counter);
            let state = world
                .harness
                .call(spec(session, &call_id, "demo::held"))
                .await;
            assert!(
                state.is_held(),
                "the harness did not park {call_id}: {state:?}"
            );
            let decision = if case == Case::ResolveAllow {
                "allow"
            } else {
                "deny"
            };
            let request = json!({"session_id": format!("bench-s{session}"),
                                 "function_call_id": call_id, "decision": decision});
            timed(
                call(&world.console, "approval::resolve", request),
                |r| matches!(r, Ok(v) if v["resolved"] == true),
            )
            .await
        }
    }
}

thread_local! {
    /// The case being sampled, for the failure message.
    static CURRENT: std::cell::Cell<Option<Case>> = const { std::cell::Cell::new(None) };
}

/// Times `fut` and checks its output; a wrong or missing answer is
/// reported and yields no sample.
async fn timed<T: std::fmt::Debug>(
    fut: impl Future<Output = T>,
    ok: impl Fn(&T) -> bool,
) -> Option<Duration> {
    let start = Instant::now();
    let out = fut.await;
    let elapsed = start.elapsed();
    if ok(&out) {
        Some(elapsed)
    } else {
        eprintln!(
            "unexpected answer in {:?}: {out:?}",
            CURRENT.with(|c| c.get())
        );
        None
    }
}

/// `total` calls of `case` with [`CONCURRENCY`] in flight; their wall time
/// and how many failed (reported, not fatal: a loaded engine may time out).
async fn throughput(
    world: &World,
    case: Case,
    total: usize,
    counter: &mut u64,
) -> (Duration, usize) {
    let h = world.harness.client().clone();
    let start_id = *counter;
    *counter += total as u64;
    // Resolves need held calls first (not timed).
    let mut held = Vec::new();
    if matches!(case, Case::ResolveAllow | Case::ResolveDeny) {
        for k in 0..total {
            let call_id = format!("tr-{}", start_id + k as u64);
            let session = k % SESSIONS;
            let state = world
                .harness
                .call(spec(session, &call_id, "demo::held"))
                .await;
            if !state.is_held() {
                eprintln!("the harness did not park {call_id}: {state:?}");
            }
            held.push((session, call_id));
        }
    }
    let start = Instant::now();
    let results: Vec<bool> = stream::iter(0..total)
        .map(|k| {
            let h = h.clone();
            let harness = world.harness.clone();
            let console = world.console.clone();
            let held = held.get(k).cloned();
            async move {
                let session = k % SESSIONS;
                let id = format!("t-{}", start_id + k as u64);
                match case {
                    Case::Noop => call(&h, NOOP, hook_input(session, &id, "demo::echo"))
                        .await
                        .is_ok(),
                    Case::Echo => call(&h, ECHO, hook_input(session, &id, "demo::echo"))
                        .await
                        .is_ok(),
                    Case::Continue => {
                        call(&h, "approval::gate", hook_input(session, &id, "demo::echo"))
                            .await
                            .is_ok_and(|v| v["decision"] == "continue")
                    }
                    Case::Deny => call(
                        &h,
                        "approval::gate",
                        hook_input(session, &id, "demo::blocked"),
                    )
                    .await
                    .is_ok_and(|v| v["decision"] == "deny"),
                    Case::Hold => {
                        call(&h, "approval::gate", hook_input(session, &id, "demo::held"))
                            .await
                            .is_ok_and(|v| v["decision"] == "hold")
                    }
                    Case::ContinueHarness => harness
                        .call(spec(session, &id, "demo::echo"))
                        .await
                        .result()
                        .is_some(),
                    Case::DenyHarness => harness
                        .call(spec(session, &id, "demo::blocked"))
                        .await
                        .deny_reason()
                        .is_some(),
                    Case::ResolveAllow | Case::ResolveDeny => {
                        let (session, call_id) = held.unwrap_or_default();
                        let decision = if case == Case::ResolveAllow {
                            "allow"
                        } else {
                            "deny"
                        };
                        call(
                            &console,
                            "approval::resolve",
                            json!({
                            "session_id": format!("bench-s{session}"),
                            "function_call_id": call_id, "decision": decision}),
                        )
                        .await
                        .is_ok_and(|v| v["resolved"] == true)
                    }
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = start.elapsed();
    let failed = results.iter().filter(|ok| !**ok).count();
    if failed > 0 {
        eprintln!("{failed} of {total} {case:?} calls with {CONCURRENCY} in flight failed");
    }
    (elapsed, failed)
}

/// Engine invocations one decision costs, beyond the gate call itself
/// (test engine only: it counts what it routes).
struct Counts {
    continue_extra: f64,
    deny_extra: f64,
    hold_extra: f64,
    hold_state_set: f64,
    hold_session_get: f64,
}

/// `(extra invocations, state::set, session::get)` per call of `case`,
/// averaged over `n` sequential calls.
async fn count_case(
    world: &World,
    case: Case,
    n: u64,
    counter: &mut u64,
) -> Option<(f64, f64, f64)> {
    let engine = world.engine.test_engine()?;
    let before = engine.total_invocations();
    let sets = engine.invocations("state::set");
    let gets = engine.invocations("session::get");
    for _ in 0..n {
        sample(world, case, counter).await;
    }
    // Let void fan-out (nothing is bound here) and late frames land.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let per = |now: u64, then: u64| now.saturating_sub(then) as f64 / n as f64;
    Some((
        per(engine.total_invocations(), before + n),
        per(engine.invocations("state::set"), sets),
        per(engine.invocations("session::get"), gets),
    ))
}

async fn count_invocations(world: &World, counter: &mut u64) -> Option<Counts> {
    const N: u64 = 200;
    let (continue_extra, _, _) = count_case(world, Case::Continue, N, counter).await?;
    let (deny_extra, _, _) = count_case(world, Case::Deny, N, counter).await?;
    let (hold_extra, hold_state_set, hold_session_get) =
        count_case(world, Case::Hold, N, counter).await?;
    Some(Counts {
        continue_extra,
        deny_extra,
        hold_extra,
        hold_state_set,
        hold_session_get,
    })
}

async fn latency_phase() {
    let rounds = env_usize("E2E_ROUNDS", 10);
    let per_round = env_usize("E2E_PER_ROUND", 100);
    let world = start_world().await;
    let kind = world.engine.kind();
    println!(
        "\n## e2e on the {} engine: {rounds} rounds; per round and case {per_round} sequential calls, then {} with {CONCURRENCY} in flight; cases interleaved\n",
        match kind {
            EngineKind::Test => "in-process test",
            EngineKind::Real => "real iii",
        },
        2 * per_round
    );
    // `E2E_CASES=a,a',c` measures only those cases ((a) and (a') always,
    // they are the baselines).
    let only: Option<Vec<String>> = std::env::var("E2E_CASES")
        .ok()
        .map(|v| v.split(',').map(|c| format!("({})", c.trim())).collect());
    let cases: Vec<Case> = CASES
        .iter()
        .copied()
        .filter(|c| {
            matches!(c, Case::Noop | Case::Echo)
                || only.as_ref().is_none_or(|o| {
                    o.iter()
                        .any(|code| c.label().starts_with(&format!("{code} ")))
                })
        })
        .collect();
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut counter = 0u64;
    // Warm-up round, discarded.
    for &case in &cases {
        for _ in 0..per_round.min(50) {
            sample(&world, case, &mut counter).await;
        }
    }
    let mut all: Vec<Samples> = cases
        .iter()
        .map(|&case| Samples {
            case,
            latencies: Vec::with_capacity(rounds * per_round),
            concurrent: (0, Duration::ZERO),
            failed: 0,
        })
        .collect();
    for round in 0..rounds {
        if Instant::now() > deadline {
            eprintln!("latency phase: time limit reached after {round} rounds");
            break;
        }
        // Rotate the order so no case always runs right after another.
        for k in 0..cases.len() {
            let idx = (k + round) % cases.len();
            for _ in 0..per_round {
                match sample(&world, cases[idx], &mut counter).await {
                    Some(d) => all[idx].latencies.push(d),
                    None => all[idx].failed += 1,
                }
            }
            let burst = 2 * per_round;
            let (took, failed) = throughput(&world, cases[idx], burst, &mut counter).await;
            all[idx].concurrent.0 += burst;
            all[idx].concurrent.1 += took;
            all[idx].failed += failed;
        }
    }
    let counts = count_invocations(&world, &mut counter).await;

    // (p50, p99, calls/s with CONCURRENCY in flight) of one case.
    let stats = |s: &Samples| {
        let mut v = s.latencies.clone();
        v.sort();
        (
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            rate(s.concurrent),
        )
    };
    let noop = stats(&all[0]);
    let echo_p50 = stats(&all[1]).0;
    println!("| case | p50 | p99 | calls/s (sequential) | calls/s ({CONCURRENCY} in flight) | p50 ÷ (a) | p50 ÷ (a') | p99 ÷ (a) | calls/s ({CONCURRENCY}) ÷ (a) | failed calls |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &all {
        let (p50, p99, tp) = stats(s);
        let sum: Duration = s.latencies.iter().sum();
        let seq = s.latencies.len() as f64 / sum.as_secs_f64().max(f64::MIN_POSITIVE);
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.2}× | {:.2}× | {:.2}× | {:.2}× | {} |",
            s.case.label(),
            fmt_dur(p50),
            fmt_dur(p99),
            seq,
            tp,
            p50.as_secs_f64() / noop.0.as_secs_f64(),
            p50.as_secs_f64() / echo_p50.as_secs_f64(),
            p99.as_secs_f64() / noop.1.as_secs_f64(),
            tp / noop.2,
            s.failed,
        );
    }
    print_reply_sizes(&world).await;
    match counts {
        Some(c) => {
            println!("\nengine invocations per decision beyond the gate call itself (test engine counters, 200 calls each):");
            println!("| decision | extra invocations per call | state::set per call | session::get per call |");
            println!("|---|---:|---:|---:|");
            println!("| continue | {:.2} | – | – |", c.continue_extra);
            println!("| deny | {:.2} | – | – |", c.deny_extra);
            println!(
                "| hold | {:.2} | {:.2} | {:.2} |",
                c.hold_extra, c.hold_state_set, c.hold_session_get
            );
        }
        None => println!("\n(invocation counts need the test engine: run without III_ENGINE_BIN)"),
    }
    let mut world = world;
    if let Some(w) = world.worker.take() {
        w.shutdown(Duration::from_secs(2)).await;
    }
}

/// The size of each baseline's and decision's reply, to read the ratios
/// by: the engine moves every byte twice.
async fn print_reply_sizes(world: &World) {
    let h = world.harness.client();
    let mut sizes = Vec::new();
    for (name, function_id, target) in [
        ("(a) no-op", NOOP, "demo::echo"),
        ("(a') echo", ECHO, "demo::echo"),
        ("(b) continue", "approval::gate", "demo::echo"),
        ("(c) deny", "approval::gate", "demo::blocked"),
    ] {
        let input = hook_input(0, &format!("size-{name}"), target);
        let request = input.to_string().len();
        let reply = call(h, function_id, input)
            .await
            .map(|v| v.to_string().len())
            .unwrap_or(0);
        sizes.push(format!("{name} {request} B in / {reply} B out"));
    }
    println!(
        "
JSON sizes per call: {}",
        sizes.join("; ")
    );
}

fn rate((calls, time): (usize, Duration)) -> f64 {
    calls as f64 / time.as_secs_f64().max(f64::MIN_POSITIVE)
}

fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

// ── 100k held: memory and boot ───────────────────────────────────────────

/// Writes records `from..to` into their bucket scopes, [`FILL_CONCURRENCY`]
/// at a time. Returns how many were written before `deadline`.
async fn fill_buckets(client: &IIIClient, from: usize, to: usize, deadline: Instant) -> usize {
    let written: Vec<bool> = stream::iter(from..to)
        .map(|i| {
            let client = client.clone();
            async move {
                if Instant::now() > deadline {
                    return false;
                }
                let record = common::record(i);
                let scope = bucket_scope(&record.session_id, &record.function_call_id);
                let key = state_key(&record.session_id, &record.function_call_id);
                let value = serde_json::to_value(&record).unwrap_or(Value::Null);
                call(
                    &client,
                    "state::set",
                    json!({"scope": scope, "key": key, "value": value}),
                )
                .await
                .is_ok()
            }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect()
        .await;
    written.iter().filter(|w| **w).count()
}

/// `VmRSS` and `VmHWM` of a process, in MiB.
fn rss_mib(pid: &str) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Spawns the release binary and times it until its ready line.
async fn boot_binary(url: &str) -> (WorkerProcess, Duration) {
    let bin = Path::new(env!("CARGO_BIN_EXE_approval-gate"));
    let start = Instant::now();
    let process = WorkerProcess::spawn(bin, url, &[], Duration::from_secs(120)).await;
    (process, start.elapsed())
}

fn held_in_ready_line(process: &WorkerProcess) -> String {
    process
        .output()
        .lines()
        .find(|l| l.contains("approval-gate ready"))
        .and_then(|l| l.split("held=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("?")
        .to_string()
}

async fn list_latency(client: &IIIClient, request: Value, n: usize) -> (Duration, usize) {
    let mut v = Vec::with_capacity(n);
    let mut items = 0;
    for _ in 0..n {
        let start = Instant::now();
        let out = call(client, "approval::list-pending", request.clone()).await;
        v.push(start.elapsed());
        items = out
            .ok()
            .and_then(|o| o["pending"].as_array().map(Vec::len))
            .unwrap_or(0);
    }
    v.sort();
    (percentile(&v, 0.5), items)
}

/// Live heap bytes per record of what boot holds: the records as the JSON
/// values `state::list` returns, the records themselves, and the index.
fn memory_model(n: usize) {
    // Only this function's own allocations are counted; the blocks it
    // frees were all allocated while counting (the counter wraps, it never
    // traps, if another thread frees an older block meanwhile).
    COUNTING.store(true, Ordering::SeqCst);
    let base = live_bytes();
    let values: Vec<serde_json::Value> = (0..n).map(common::record_value).collect();
    let as_values = live_bytes() - base;
    drop(values);
    let base = live_bytes();
    let records: Vec<PendingRecord> = (0..n).map(common::record).collect();
    let as_records = live_bytes() - base;
    let base = live_bytes();
    let mut index = PendingIndex::new();
    for record in records {
        index.insert(record);
    }
    let as_index = live_bytes() - base + as_records;
    println!("live heap for {n} records (counted by the bench's allocator):\n");
    println!("| form | total | per record |");
    println!("|---|---:|---:|");
    for (form, bytes) in [
        ("JSON values (a state::list reply, parsed)", as_values),
        ("PendingRecord structs", as_records),
        ("PendingIndex (records + every view)", as_index),
    ] {
        println!(
            "| {form} | {:.1} MiB | {} B |",
            bytes as f64 / (1 << 20) as f64,
            bytes / n
        );
    }
    println!();
    drop(index);
    COUNTING.store(false, Ordering::SeqCst);
}

/// `state::list` of every bucket from a client, as many in flight as the
/// worker's boot: the transfer part of a boot.
async fn list_buckets(client: &IIIClient) -> (Duration, usize) {
    let start = Instant::now();
    let lists: Vec<usize> = stream::iter(all_scopes())
        .map(|scope| {
            let client = client.clone();
            async move {
                client
                    .trigger(TriggerRequest {
                        function_id: "state::list".into(),
                        payload: json!({"scope": scope}),
                        action: None,
                        timeout_ms: Some(LIST_TIMEOUT.as_millis() as u64),
                    })
                    .await
                    .ok()
                    .and_then(|v| v.as_array().map(Vec::len))
                    .unwrap_or(0)
            }
        })
        .buffer_unordered(LOAD_CONCURRENCY)
        .collect()
        .await;
    (start.elapsed(), lists.iter().sum())
}

async fn scale_phase() {
    let held = env_usize("E2E_HELD", 100_000);
    memory_model(held);
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let client = engine.client("bench-filler").await;
    let deadline = Instant::now() + PHASE_LIMIT;
    println!(
        "\n## {held} held calls ({} bytes of JSON per record), {:?} engine\n",
        common::record_json_len(held / 2),
        engine.kind()
    );

    let (mut empty, empty_boot) = boot_binary(&url).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let empty_rss = rss_mib(&empty.pid().to_string());
    empty.terminate(Duration::from_secs(10)).await;

    let fill_start = Instant::now();
    let written = fill_buckets(&client, 0, held, deadline).await;
    println!(
        "filled {written} records into the 64 buckets in {:.1} s",
        fill_start.elapsed().as_secs_f64()
    );
    if engine.kind() == EngineKind::Real {
        // The real engine's file store flushes on an interval.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let (fetch, fetched) = list_buckets(&client).await;

    let (mut process, boot) = boot_binary(&url).await;
    let loaded = held_in_ready_line(&process);
    let after_boot = rss_mib(&process.pid().to_string());
    let (list_first, first_items) = list_latency(&client, json!({"limit": 50}), 50).await;
    let (list_tenant, tenant_items) = list_latency(
        &client,
        json!({"limit": 50, "metadata": {"tenant": "tenant-3"}}),
        50,
    )
    .await;
    let after_list = rss_mib(&process.pid().to_string());
    process.terminate(Duration::from_secs(10)).await;

    let in_process_start = Instant::now();
    let running = start_in_process(&url).await;
    let in_process_boot = in_process_start.elapsed();
    let in_process_held = running.held();
    running.shutdown(Duration::from_secs(2)).await;

    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| boot, release binary, 0 held (spawn → ready line) | {:.2} s |",
        empty_boot.as_secs_f64()
    );
    println!("| RSS, release binary, 0 held | {:.1} MiB |", empty_rss.0);
    println!(
        "| boot, release binary, {loaded} held (spawn → ready line) | {:.2} s |",
        boot.as_secs_f64()
    );
    println!(
        "| RSS after boot, {loaded} held (VmRSS / VmHWM peak) | {:.1} MiB / {:.1} MiB |",
        after_boot.0, after_boot.1
    );
    println!(
        "| RSS after 100 list-pending calls (VmRSS / VmHWM) | {:.1} MiB / {:.1} MiB |",
        after_list.0, after_list.1
    );
    println!(
        "| list-pending limit 50 through the engine, p50 of 50 ({first_items} items) | {} |",
        fmt_dur(list_first)
    );
    println!(
        "| list-pending limit 50 + tenant filter, p50 of 50 ({tenant_items} items) | {} |",
        fmt_dur(list_tenant)
    );
    println!(
        "| state::list of the 64 buckets from a client, {LOAD_CONCURRENCY} in flight ({fetched} records) | {:.2} s |",
        fetch.as_secs_f64()
    );
    println!(
        "| boot in-process, {in_process_held} held (boot() → ready) | {:.2} s |",
        in_process_boot.as_secs_f64()
    );
}

// ── 1M stored sessions: boot, memory, cold and warm decisions ───────────

/// Sessions whose decisions are timed cold (first call after boot) and warm.
const TIMED_SESSIONS: usize = 2_000;

/// A stored settings record of about 300 bytes: mode `full` (so the gate
/// continues without a hold), a few remembered grants.
fn settings_record(i: usize) -> Value {
    json!({
        "session_id": format!("stored-{i:07}"),
        "mode": "full",
        "always_allow": [
            {"function_id": "state::get", "granted_at": 1_796_000_000_000u64 + i as u64, "granted_by": "seed"},
            {"function_id": "fs::read*", "granted_at": 1_796_000_000_000u64 + i as u64, "granted_by": "user_click"}
        ],
        "approved_always": [
            {"function_id": "shell::run", "granted_at": 1_796_000_000_000u64 + i as u64, "granted_by": "user_click"}
        ],
        "mode_set_at": 1_796_000_000_000u64 + i as u64
    })
}

/// Writes settings records `from..to`, [`FILL_CONCURRENCY`] at a time;
/// returns how many were written before `deadline`.
async fn fill_settings(client: &IIIClient, from: usize, to: usize, deadline: Instant) -> usize {
    let written: Vec<bool> = stream::iter(from..to)
        .map(|i| {
            let client = client.clone();
            async move {
                if Instant::now() > deadline {
                    return false;
                }
                call(
                    &client,
                    "state::set",
                    json!({"scope": "approval_settings", "key": format!("stored-{i:07}"), "value": settings_record(i)}),
                )
                .await
                .is_ok()
            }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect()
        .await;
    written.iter().filter(|w| **w).count()
}

/// One gate call for stored session `i`; its latency, and whether the gate
/// answered `continue` (what a stored `full` mode must give).
async fn gate_once(client: &IIIClient, i: usize, call_id: &str) -> (Duration, bool) {
    let input = json!({
        "point": "pre_trigger", "session_id": format!("stored-{i:07}"), "turn_id": "t",
        "step": 0, "depth": 0, "call": {"id": call_id, "function_id": "demo::echo", "arguments": arguments()},
    });
    let start = Instant::now();
    let out = call(client, "approval::gate", input).await;
    let took = start.elapsed();
    (took, out.is_ok_and(|o| o["decision"] == "continue"))
}

/// Boot time and resident memory with `E2E_SESSIONS` stored sessions next to
/// none, and a decision's latency for a cold session (its first call after
/// boot: one `state::get`) and a warm one (the cache: no engine call).
async fn sessions_phase() {
    let sessions = env_usize("E2E_SESSIONS", 1_000_000);
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let client = engine.client("bench-sessions").await;
    let deadline = Instant::now() + PHASE_LIMIT;
    println!(
        "\n## {sessions} stored sessions ({} bytes of JSON per settings record), {:?} engine\n",
        settings_record(sessions / 2).to_string().len(),
        engine.kind()
    );

    let (mut empty, empty_boot) = boot_binary(&url).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let empty_rss = rss_mib(&empty.pid().to_string());
    empty.terminate(Duration::from_secs(10)).await;

    let fill_start = Instant::now();
    let written = fill_settings(&client, 0, sessions, deadline).await;
    println!(
        "filled {written} settings records in {:.1} s",
        fill_start.elapsed().as_secs_f64()
    );
    if engine.kind() == EngineKind::Real {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let (mut process, boot) = boot_binary(&url).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_boot = rss_mib(&process.pid().to_string());

    // Cold: the first call of each of TIMED_SESSIONS sessions spread over
    // the stored ones; warm: the same sessions again.
    let step = (written.max(1) / TIMED_SESSIONS).max(1);
    let picked: Vec<usize> = (0..TIMED_SESSIONS)
        .map(|k| (k * step) % written.max(1))
        .collect();
    let mut cold = Vec::with_capacity(picked.len());
    let mut warm = Vec::with_capacity(picked.len());
    let mut wrong = 0;
    for (n, i) in picked.iter().enumerate() {
        let (took, ok) = gate_once(&client, *i, &format!("cold{n}")).await;
        cold.push(took);
        wrong += usize::from(!ok);
    }
    for (n, i) in picked.iter().enumerate() {
        let (took, ok) = gate_once(&client, *i, &format!("warm{n}")).await;
        warm.push(took);
        wrong += usize::from(!ok);
    }
    let after_calls = rss_mib(&process.pid().to_string());
    process.terminate(Duration::from_secs(10)).await;
    cold.sort();
    warm.sort();

    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| boot, release binary, no stored sessions (spawn → ready line) | {:.2} s |",
        empty_boot.as_secs_f64()
    );
    println!(
        "| boot, release binary, {written} stored sessions | {:.2} s |",
        boot.as_secs_f64()
    );
    println!(
        "| RSS after boot: none / {written} stored (VmRSS) | {:.1} MiB / {:.1} MiB |",
        empty_rss.0, after_boot.0
    );
    println!(
        "| RSS after {} cold + {} warm decisions (VmRSS / VmHWM) | {:.1} MiB / {:.1} MiB |",
        cold.len(),
        warm.len(),
        after_calls.0,
        after_calls.1
    );
    println!(
        "| gate, cold session (first call after boot), p50 / p99 | {} / {} |",
        fmt_dur(percentile(&cold, 0.5)),
        fmt_dur(percentile(&cold, 0.99))
    );
    println!(
        "| gate, warm session, p50 / p99 | {} / {} |",
        fmt_dur(percentile(&warm, 0.5)),
        fmt_dur(percentile(&warm, 0.99))
    );
    println!("| decisions that were not `continue` | {wrong} |");
}

// ── a burst of expiries ──────────────────────────────────────────────────

/// The console's counter of `pending-resolved` events with outcome
/// `timeout`: how many arrived, and when the last one did.
const ON_RESOLVED: &str = "bench::on-resolved";

/// How long before the burst the worker is up and the gate measured quiet.
const BURST_LEAD: Duration = Duration::from_secs(3);

/// `n` held calls whose deadlines all fall within one second: the gate's
/// latency (sequential continue and hold calls, one after the other) before
/// and during their delivery, and how long the delivery took.
///
/// The calls are held through the harness with no deadline; the worker is
/// stopped, every record gets an `expires_at` in `[T, T + 1 s)` in state,
/// and the worker starts again — the timer then meets the whole burst at T,
/// as it would after a configuration that gave thousands of holds made in
/// the same second the same timeout.
async fn burst_phase() {
    let n = env_usize("E2E_BURST", 10_000);
    let mut world = start_world().await;
    let deadline = Instant::now() + PHASE_LIMIT;
    println!(
        "\n## a burst of {n} expiries within one second, {:?} engine\n",
        world.engine.kind()
    );
    let hold_start = Instant::now();
    let held: Vec<bool> = stream::iter(0..n)
        .map(|k| {
            let harness = world.harness.clone();
            async move {
                if Instant::now() > deadline {
                    return false;
                }
                harness
                    .call(spec(k % SESSIONS, &format!("burst-{k}"), "demo::held"))
                    .await
                    .is_held()
            }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect()
        .await;
    let held = held.iter().filter(|h| **h).count();
    println!(
        "held {held} calls through the harness in {:.1} s",
        hold_start.elapsed().as_secs_f64()
    );
    if let Some(worker) = world.worker.take() {
        worker.shutdown(Duration::from_secs(5)).await;
    }

    // Every record of the burst expires within [T, T + 1 s).
    let burst_at = now_ms() + BURST_LEAD.as_millis() as u64 + 2_000;
    let mut records: Vec<Value> = Vec::new();
    for scope in all_scopes() {
        let listed = call(&world.console, "state::list", json!({"scope": scope}))
            .await
            .unwrap_or(Value::Null);
        records.extend(
            listed
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| {
                    r["function_call_id"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("burst-"))
                })
                .cloned(),
        );
    }
    let total = records.len().max(1) as u64;
    let rewritten: Vec<bool> = stream::iter(records.into_iter().enumerate())
        .map(|(k, mut record)| {
            let console = world.console.clone();
            async move {
                record["expires_at"] = json!(burst_at + k as u64 * 1_000 / total);
                let sid = record["session_id"].as_str().unwrap_or_default().to_string();
                let cid = record["function_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                call(
                    &console,
                    "state::set",
                    json!({"scope": bucket_scope(&sid, &cid), "key": state_key(&sid, &cid), "value": record}),
                )
                .await
                .is_ok()
            }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect()
        .await;
    let rewritten = rewritten.iter().filter(|w| **w).count();
    if world.engine.kind() == EngineKind::Real {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Count the timeouts as a notification worker bound to pending-resolved
    // sees them.
    let timeouts = std::sync::Arc::new(AtomicUsize::new(0));
    let last = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
    {
        let (timeouts, last) = (timeouts.clone(), last.clone());
        world.console.register_function(
            ON_RESOLVED,
            RegisterFunction::new_async(move |event: Value| {
                let (timeouts, last) = (timeouts.clone(), last.clone());
                async move {
                    if event["outcome"] == "timeout" {
                        timeouts.fetch_add(1, Ordering::SeqCst);
                        if let Ok(mut last) = last.lock() {
                            *last = Some(Instant::now());
                        }
                    }
                    Ok::<Value, iii_sdk::Error>(json!({}))
                }
            }),
        );
    }
    wait_for_functions(&world.console, &[ON_RESOLVED]).await;
    let boot_start = Instant::now();
    let worker = start_in_process_with(&world.engine.url(), Some(seed())).await;
    let boot = boot_start.elapsed();
    let loaded = worker.held();
    #[allow(deprecated)] // the 0.25 binding API; the engine still speaks it
    let _ = world
        .console
        .register_trigger(iii_sdk::protocol::RegisterTriggerInput::new(
            "approval::pending-resolved",
            ON_RESOLVED,
            json!({}),
        ));
    let bound_by = Instant::now() + Duration::from_secs(5);
    while worker.event_bindings() == 0 && Instant::now() < bound_by {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    world.worker = Some(worker);

    // Sequential gate calls, continue and hold in turn, from now until the
    // burst is delivered (or the phase's bound): each sample is tagged with
    // when it started relative to the burst.
    let h = world.harness.client().clone();
    let burst_instant = Instant::now() + Duration::from_millis(burst_at.saturating_sub(now_ms()));
    let mut quiet: Vec<Duration> = Vec::new();
    let mut during: Vec<Duration> = Vec::new();
    let mut failed = 0usize;
    let mut k = 0usize;
    let stop_by = burst_instant + Duration::from_secs(120);
    let mut delivered_at: Option<Instant> = None;
    while Instant::now() < stop_by && Instant::now() < deadline {
        k += 1;
        let (target, decision) = if k.is_multiple_of(2) {
            ("demo::echo", "continue")
        } else {
            ("demo::held", "hold")
        };
        let input = hook_input(k % SESSIONS, &format!("probe-{k}"), target);
        let started = Instant::now();
        let ok = call(&h, "approval::gate", input)
            .await
            .is_ok_and(|v| v["decision"] == decision);
        let took = started.elapsed();
        if !ok {
            failed += 1;
        } else if started < burst_instant {
            quiet.push(took);
        } else if delivered_at.is_none() {
            during.push(took);
        }
        if delivered_at.is_none() && timeouts.load(Ordering::SeqCst) >= rewritten {
            delivered_at = last.lock().ok().and_then(|l| *l);
        }
        if delivered_at.is_some() && Instant::now() > burst_instant + Duration::from_millis(500) {
            break;
        }
    }
    let delivered = timeouts.load(Ordering::SeqCst);
    let took = delivered_at
        .or_else(|| last.lock().ok().and_then(|l| *l))
        .map(|at| at.saturating_duration_since(burst_instant));
    let entries = world
        .harness
        .entries()
        .iter()
        .filter(|e| e.result["details"]["denied_by"] == "timeout")
        .count();
    let left = world.worker.as_ref().map(|w| w.held()).unwrap_or_default();
    quiet.sort();
    during.sort();
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| held calls re-dated to expire within one second | {rewritten} |");
    println!(
        "| boot in-process with them, {loaded} held (boot() → ready) | {:.2} s |",
        boot.as_secs_f64()
    );
    println!(
        "| timeouts delivered to the harness / announced (outcome timeout) | {entries} / {delivered} |"
    );
    match took {
        Some(took) => println!(
            "| first deadline → last timeout announced | {:.2} s ({:.0} expiries/s) |",
            took.as_secs_f64(),
            delivered as f64 / took.as_secs_f64().max(f64::MIN_POSITIVE)
        ),
        None => println!("| first deadline → last timeout announced | none announced |"),
    }
    println!("| held calls left afterwards (the probe's own holds included) | {left} |");
    for (label, samples) in [("before the burst", &quiet), ("during the burst", &during)] {
        println!(
            "| gate latency {label}, continue + hold in turn, {} calls: p50 / p99 / max | {} / {} / {} |",
            samples.len(),
            fmt_dur(percentile(samples, 0.5)),
            fmt_dur(percentile(samples, 0.99)),
            fmt_dur(samples.last().copied().unwrap_or_default()),
        );
    }
    if failed > 0 {
        println!("| gate calls that failed or answered wrongly | {failed} |");
    }
    if let Some(worker) = world.worker.take() {
        worker.shutdown(Duration::from_secs(5)).await;
    }
}

/// The wall clock in ms since the epoch (deadlines are wall-clock times).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

// ── the single-scope limit ───────────────────────────────────────────────

const CAP_SCOPE: &str = "bench_single_scope";

/// Grows or shrinks the single scope to `n` records (ids from 0).
async fn set_count(client: &IIIClient, have: &mut usize, n: usize, deadline: Instant) {
    if n > *have {
        let written: Vec<bool> = stream::iter(*have..n)
            .map(|i| {
                let client = client.clone();
                async move {
                    if Instant::now() > deadline {
                        return false;
                    }
                    let value = common::record_value(i);
                    call(
                        &client,
                        "state::set",
                        json!({"scope": CAP_SCOPE, "key": format!("k{i}"), "value": value}),
                    )
                    .await
                    .is_ok()
                }
            })
            .buffer_unordered(FILL_CONCURRENCY)
            .collect()
            .await;
        assert!(
            written.iter().all(|w| *w),
            "filling {CAP_SCOPE} failed or ran out of time"
        );
    } else {
        for i in n..*have {
            let _ = call(
                client,
                "state::delete",
                json!({"scope": CAP_SCOPE, "key": format!("k{i}")}),
            )
            .await;
        }
    }
    *have = n;
}

/// Lists the scope from a dedicated client: `Some(bytes of the result)` on
/// success, `None` when the reply never arrived.
async fn probe_list(engine: &EngineFixture, name: &str) -> Option<(usize, Duration)> {
    let client = engine.client(name).await;
    let start = Instant::now();
    let out = client
        .trigger(TriggerRequest {
            function_id: "state::list".into(),
            payload: json!({"scope": CAP_SCOPE}),
            action: None,
            timeout_ms: Some(LIST_TIMEOUT.as_millis() as u64),
        })
        .await;
    let elapsed = start.elapsed();
    let _ = client.shutdown_async().await;
    match out {
        Ok(v) => Some((
            serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(0),
            elapsed,
        )),
        Err(err) => {
            eprintln!("state::list failed after {elapsed:?}: {err}");
            None
        }
    }
}

async fn cap_phase() {
    let engine = EngineFixture::start().await;
    let writer = engine.client("bench-cap-writer").await;
    let deadline = Instant::now() + PHASE_LIMIT;
    let record_len = common::record_json_len(50_000);
    // Each value plus its comma.
    let predicted = SDK_MESSAGE_CAP / (record_len + 1);
    println!(
        "\n## single-scope state::list against the SDK's 64 MiB cap ({:?} engine, {record_len}-byte records, predicted break ≈ {predicted})\n",
        engine.kind()
    );
    let mut have = 0;
    let mut probes = 0;
    let mut lo = predicted * 9 / 10;
    set_count(&writer, &mut have, lo, deadline).await;
    let mut lo_bytes = match probe_list(&engine, "bench-cap-probe-0").await {
        Some((bytes, took)) => {
            println!(
                "| {lo} records | ok | {bytes} bytes | {:.2} s |",
                took.as_secs_f64()
            );
            bytes
        }
        None => {
            println!("{lo} records already fail; no search");
            return;
        }
    };
    let step = predicted / 50;
    let mut hi = lo;
    // Grow until a list fails (bounded: at most 1.5× the prediction).
    loop {
        if Instant::now() > deadline || hi > predicted * 3 / 2 {
            println!("no failure up to {hi} records");
            return;
        }
        hi += step;
        set_count(&writer, &mut have, hi, deadline).await;
        probes += 1;
        match probe_list(&engine, &format!("bench-cap-probe-{probes}")).await {
            Some((bytes, took)) => {
                println!(
                    "| {hi} records | ok | {bytes} bytes | {:.2} s |",
                    took.as_secs_f64()
                );
                lo = hi;
                lo_bytes = bytes;
            }
            None => {
                println!("| {hi} records | **no reply** | – | – |");
                break;
            }
        }
    }
    // Bisect down to 16 records.
    while hi - lo > 16 && Instant::now() < deadline {
        let mid = (lo + hi) / 2;
        set_count(&writer, &mut have, mid, deadline).await;
        probes += 1;
        match probe_list(&engine, &format!("bench-cap-probe-{probes}")).await {
            Some((bytes, took)) => {
                println!(
                    "| {mid} records | ok | {bytes} bytes | {:.2} s |",
                    took.as_secs_f64()
                );
                lo = mid;
                lo_bytes = bytes;
            }
            None => {
                println!("| {mid} records | **no reply** | – | – |");
                hi = mid;
            }
        }
    }
    println!(
        "\nsingle scope: the last list that arrived held {lo} records ({lo_bytes} bytes of result); {hi} records did not arrive (cap {SDK_MESSAGE_CAP} bytes)"
    );
    println!(
        "per bucket at 100k held over 64 buckets: ≈ {} records ≈ {:.1} MiB per state::list",
        100_000 / 64,
        (100_000 / 64 * (record_len + 1)) as f64 / (1 << 20) as f64
    );
}
