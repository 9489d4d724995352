//! The command rules' phase of the e2e bench (`E2E_ONLY=commands`,
//! contract §25.10): the gate's `continue` and `deny` on `shell::exec`
//! calls that meet the deny rule
//! `{function: "shell::exec", action: "deny", args: {command: {prefix: "rm"}}}`
//! (their command is read: shell-words and bash), beside the same answers
//! on calls that meet no command rule (`demo::echo` allowed,
//! `demo::blocked` denied: nothing is read), and the no-op and echo
//! baselines, all through one engine with one configuration, cases
//! interleaved round by round (order rotated) so the ratios hold on a
//! shared, noisy machine.
//!
//! Every call carries the same arguments (`command` of about
//! `E2E_COMMAND_BYTES`, default 200, with `cwd` and `timeout_ms`); each
//! command is unique (a counter in a path), so the worker's store of models
//! read before never answers and every call with a command rule parses.
//! Knobs: `E2E_ROUNDS` (default 10) × `E2E_PER_ROUND` (default 100)
//! sequential calls per case and round, then twice as many with
//! [`CONCURRENCY`] in flight.

use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, EngineKind};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::common::command_line;
use crate::{
    env_usize, fmt_dur, percentile, rate, seed, start_world, World, CONCURRENCY, ECHO, NOOP,
    PHASE_LIMIT, SESSIONS,
};

/// The deny rule on commands that the bench's `shell::exec` calls meet.
fn command_rules() -> [Value; 2] {
    [
        json!({"function": "shell::exec", "action": "deny", "rule_id": "no-rm",
               "args": {"command": {"prefix": "rm"}}}),
        json!("shell::exec"),
    ]
}

/// The bench's configuration: the e2e seed with the command rules first.
fn config() -> Value {
    let mut value = seed();
    if let Some(rules) = value["rules"].as_array_mut() {
        for (at, rule) in command_rules().into_iter().enumerate() {
            rules.insert(at, rule);
        }
    }
    value
}

/// One measured case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    Noop,
    Echo,
    Continue,
    Deny,
    CommandContinue,
    CommandDeny,
}

const CASES: [Case; 6] = [
    Case::Noop,
    Case::Echo,
    Case::Continue,
    Case::Deny,
    Case::CommandContinue,
    Case::CommandDeny,
];

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Noop => "(a) no-op function, no gate",
            Case::Echo => "(a') echo function, no gate",
            Case::Continue => "(b) continue, no command rule",
            Case::Deny => "(c) deny, no command rule",
            Case::CommandContinue => "(b#) continue, command rule read",
            Case::CommandDeny => "(c#) deny by the command rule",
        }
    }

    /// The function asked for, the command's first words, the gate's
    /// answer.
    fn call(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Case::Noop | Case::Echo | Case::Continue => ("demo::echo", "cd", "continue"),
            Case::Deny => ("demo::blocked", "cd", "deny"),
            Case::CommandContinue => ("shell::exec", "cd", "continue"),
            Case::CommandDeny => ("shell::exec", "rm -rf", "deny"),
        }
    }

    /// The function the harness's client calls.
    fn target(self) -> &'static str {
        match self {
            Case::Noop => NOOP,
            Case::Echo => ECHO,
            _ => "approval::gate",
        }
    }
}

/// A pre-trigger hook input with a unique command of about `size` bytes.
fn input(case: Case, n: u64, size: usize) -> Value {
    let (function_id, head, _) = case.call();
    let session = (n as usize) % SESSIONS;
    let head = format!("{head} /workspace/project-{n}");
    json!({
        "point": "pre_trigger",
        "session_id": format!("bench-s{session}"),
        "turn_id": format!("bench-t{session}"),
        "step": 0,
        "depth": 0,
        "metadata": {"working_dir": "/workspace/project"},
        "call": {"id": format!("cmd-{n}"), "function_id": function_id, "arguments": {
            "command": command_line(&head, size), "cwd": "/workspace/project", "timeout_ms": 30000}},
    })
}

/// Whether `out` is what `case` answers.
fn answered(case: Case, out: &Result<Value, iii_sdk::Error>) -> bool {
    match (case, out) {
        (Case::Noop | Case::Echo, out) => out.is_ok(),
        (_, Ok(v)) => v["decision"] == case.call().2,
        (_, Err(_)) => false,
    }
}

/// One sequential call's latency; `None` when the answer was wrong or did
/// not come (counted, not timed).
async fn one(world: &World, case: Case, n: u64, size: usize) -> Option<Duration> {
    let request = input(case, n, size);
    let start = Instant::now();
    let out = call(world.harness.client(), case.target(), request).await;
    let elapsed = start.elapsed();
    if answered(case, &out) {
        Some(elapsed)
    } else {
        eprintln!("commands bench: unexpected answer for {case:?}: {out:?}");
        None
    }
}

/// `total` calls with [`CONCURRENCY`] in flight: (answered, wall time).
async fn burst(
    world: &World,
    case: Case,
    from: u64,
    total: usize,
    size: usize,
) -> (usize, Duration) {
    let start = Instant::now();
    let ok: usize = stream::iter(0..total as u64)
        .map(|k| async move {
            let out = call(
                world.harness.client(),
                case.target(),
                input(case, from + k, size),
            )
            .await;
            usize::from(answered(case, &out))
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<usize>>()
        .await
        .into_iter()
        .sum();
    (ok, start.elapsed())
}

#[derive(Default)]
struct Series {
    /// Sequential latencies, all rounds.
    latencies: Vec<Duration>,
    /// Each round's median sequential latency.
    round_p50: Vec<Duration>,
    /// Each round's concurrent rate (calls/s).
    round_rate: Vec<f64>,
    /// Answered calls and wall time of the concurrent runs.
    concurrent: (usize, Duration),
    /// Calls with a wrong or missing answer.
    failed: usize,
}

/// Waits until the worker denies a `shell::exec` of `rm` (the command rule
/// is in force).
async fn wait_for_rule(world: &World, size: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut n = u64::MAX / 2;
    loop {
        n += 1;
        let out = call(
            world.harness.client(),
            "approval::gate",
            input(Case::CommandDeny, n, size),
        )
        .await;
        if matches!(&out, Ok(v) if v["decision"] == "deny") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the command rule never applied: {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The median of per-round ratios `num[r] / den[r]`, with their range.
fn ratios(num: &[f64], den: &[f64]) -> (f64, f64, f64) {
    let mut r: Vec<f64> = num
        .iter()
        .zip(den)
        .filter(|(_, d)| **d > 0.0)
        .map(|(n, d)| n / d)
        .collect();
    if r.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    r.sort_by(f64::total_cmp);
    (r[r.len() / 2], r[0], r[r.len() - 1])
}

pub(crate) async fn commands_phase() {
    let rounds = env_usize("E2E_ROUNDS", 10);
    let per_round = env_usize("E2E_PER_ROUND", 100);
    let size = env_usize("E2E_COMMAND_BYTES", 200);
    let world = start_world().await;
    call(
        &world.console,
        "configuration::set",
        json!({"id": "approval-gate", "value": config()}),
    )
    .await
    .expect("configuration::set");
    wait_for_rule(&world, size).await;
    let kind = match world.engine.kind() {
        EngineKind::Test => "in-process test",
        EngineKind::Real => "real iii",
    };
    let bytes = input(Case::CommandContinue, 1, size)["call"]["arguments"]["command"]
        .as_str()
        .map_or(0, str::len);
    println!(
        "\n## command rules (§25.10) on the {kind} engine: {rounds} rounds; per round and case {per_round} sequential calls, then {} with {CONCURRENCY} in flight; cases interleaved; commands of {bytes} B, each unique\n",
        2 * per_round
    );
    let mut n = 0u64;
    // Warm-up, discarded: every session's settings, every path.
    for &case in &CASES {
        for _ in 0..per_round.min(50) {
            n += 1;
            let _ = one(&world, case, n, size).await;
        }
    }
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut all: Vec<Series> = CASES.iter().map(|_| Series::default()).collect();
    for round in 0..rounds {
        if Instant::now() > deadline {
            eprintln!("commands phase: time limit reached after {round} rounds");
            break;
        }
        for k in 0..CASES.len() {
            let idx = (k + round) % CASES.len();
            let case = CASES[idx];
            let mut this = Vec::with_capacity(per_round);
            for _ in 0..per_round {
                n += 1;
                match one(&world, case, n, size).await {
                    Some(d) => this.push(d),
                    None => all[idx].failed += 1,
                }
            }
            this.sort();
            all[idx].round_p50.push(percentile(&this, 0.5));
            all[idx].latencies.extend(this);
            let total = 2 * per_round;
            let (ok, took) = burst(&world, case, n + 1, total, size).await;
            n += total as u64;
            all[idx].concurrent.0 += ok;
            all[idx].concurrent.1 += took;
            all[idx].failed += total - ok;
            all[idx].round_rate.push(rate((ok, took)));
        }
    }
    let echo_p50 = {
        let mut v = all[1].latencies.clone();
        v.sort();
        percentile(&v, 0.5)
    };
    println!("| case | p50 | p99 | calls/s (sequential) | calls/s ({CONCURRENCY} in flight) | p50 ÷ (a') | failed calls |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (case, s) in CASES.iter().zip(&all) {
        let mut v = s.latencies.clone();
        v.sort();
        let sum: Duration = v.iter().sum();
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.2}× | {} |",
            case.label(),
            fmt_dur(percentile(&v, 0.5)),
            fmt_dur(percentile(&v, 0.99)),
            v.len() as f64 / sum.as_secs_f64().max(f64::MIN_POSITIVE),
            rate(s.concurrent),
            percentile(&v, 0.5).as_secs_f64() / echo_p50.as_secs_f64().max(f64::MIN_POSITIVE),
            s.failed,
        );
    }
    let secs = |s: &Series| -> Vec<f64> { s.round_p50.iter().map(Duration::as_secs_f64).collect() };
    println!("\nratios, median of the {rounds} rounds' ratios [lowest – highest]:");
    println!("| ratio | p50 latency | calls/s ({CONCURRENCY} in flight) |");
    println!("|---|---:|---:|");
    for (name, num, den) in [
        ("continue: command rule ÷ no command rule", 4, 2),
        ("deny: command rule ÷ no command rule", 5, 3),
        ("continue with command rule ÷ echo (a')", 4, 1),
        ("deny by command rule ÷ echo (a')", 5, 1),
    ] {
        let (lat, lat_lo, lat_hi) = ratios(&secs(&all[num]), &secs(&all[den]));
        let (tp, tp_lo, tp_hi) = ratios(&all[num].round_rate, &all[den].round_rate);
        println!(
            "| {name} | {lat:.2}× [{lat_lo:.2} – {lat_hi:.2}] | {tp:.2}× [{tp_lo:.2} – {tp_hi:.2}] |"
        );
    }
    let mut world = world;
    if let Some(w) = world.worker.take() {
        w.shutdown(Duration::from_secs(2)).await;
    }
}
