//! The reviewer phase of the e2e bench (contract §22,
//! `architecture/performance.md` § Reviewer): what a reviewer that answers
//! at once adds to the gate, next to the plain hold path it replaces.
//!
//! Cases, interleaved round by round, each a sequential `approval::gate`
//! call from one client (a warm session, a call the rules do not decide):
//! * (a) a no-op function through the same engine: one engine round trip;
//! * (v) the reviewer double called directly with a review's input: the
//!   round trip the gate adds, by itself;
//! * (h) the plain hold: a session whose mode the reviewer does not cover
//!   (`session::get`, the durable write);
//! * (r+) reviewed, the reviewer allows: `session::get`, the review → continue;
//! * (r?) reviewed, the reviewer escalates: `session::get`, the review, the
//!   durable write → hold with the review on the record.
//!
//! Target: (r?) − (h) ≤ (a), one engine round trip over the hold path.
//! Knobs: `E2E_REVIEW_SAMPLES` (default 300 per case).

use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, wait_for_functions, EngineFixture};
use approval_gate_testkit::reviewer::{Answer, ReviewerDouble, REVIEW_CALL};
use approval_gate_testkit::session::SessionDouble;
use iii_sdk::RegisterFunction;
use serde_json::{json, Value};

use crate::common::start_in_process_with;
use crate::{arguments, env_usize, fmt_dur, percentile, PHASE_LIMIT};

const NOOP: &str = "bench::review-noop";
/// Sessions in `manual` (reviewed) and in `auto` (not reviewed).
const REVIEWED: &str = "review-s1";
const PLAIN: &str = "review-s2";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    Noop,
    Review,
    Hold,
    Allowed,
    Escalated,
}

const CASES: [Case; 5] = [
    Case::Noop,
    Case::Review,
    Case::Hold,
    Case::Allowed,
    Case::Escalated,
];

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Noop => "(a) no-op function (one engine round trip)",
            Case::Review => "(v) the reviewer double called directly",
            Case::Hold => "(h) gate → hold, no reviewer",
            Case::Allowed => "(r+) gate → reviewer allows → continue",
            Case::Escalated => "(r?) gate → reviewer escalates → hold",
        }
    }
}

fn input(session: &str, call_id: &str, function_id: &str) -> Value {
    json!({
        "point": "pre_trigger", "session_id": session, "turn_id": format!("t-{session}"),
        "step": 0, "depth": 0, "metadata": {"working_dir": "/workspace/project"},
        "call": {"id": call_id, "function_id": function_id, "arguments": arguments()},
    })
}

/// What the gate sends the reviewer for one of these calls (to time the
/// reviewer's round trip alone).
fn review_input(call_id: &str) -> Value {
    json!({
        "session_id": REVIEWED, "turn_id": format!("t-{REVIEWED}"), "function_call_id": call_id,
        "function_id": "demo::escalated", "arguments": arguments(), "clipped": false,
        "session": {"title": "bench", "metadata": {"tenant": "t"}}, "mode": "manual", "recent": []
    })
}

pub(crate) async fn reviewer_phase() {
    println!("\n== reviewer: the gate's added latency with a reviewer answering at once ==");
    let engine = EngineFixture::start().await;
    let url = engine.url();
    let sessions = SessionDouble::start(&url).await;
    for s in [REVIEWED, PLAIN] {
        sessions.put(s, json!({"title": "bench", "metadata": {"tenant": "t"}}));
    }
    let reviewer = ReviewerDouble::start(&url, Answer::Escalate).await;
    reviewer.set_for("demo::allowed", Answer::Allow);
    reviewer.set_for("demo::escalated", Answer::Escalate);
    let client = engine.client("bench-review-console").await;
    client.register_function(
        NOOP,
        RegisterFunction::new_async(|_input: Value| async move {
            Ok::<Value, iii_sdk::Error>(json!({"decision": "continue"}))
        }),
    );
    wait_for_functions(&client, &[NOOP]).await;
    let seed = json!({
        "default_mode": "manual",
        "rules": ["!approval::*", "demo::echo"],
        "reviewer": {"function_id": REVIEW_CALL, "modes": ["manual"]}
    });
    let worker = start_in_process_with(&url, Some(seed)).await;
    call(
        &client,
        "approval::set-mode",
        json!({"session_id": PLAIN, "mode": "auto"}),
    )
    .await
    .expect("set-mode");
    // Warm both sessions' settings.
    for s in [REVIEWED, PLAIN] {
        let _ = call(
            &client,
            "approval::evaluate",
            json!({"session_id": s, "function_id": "demo::echo"}),
        )
        .await;
    }
    let samples = env_usize("E2E_REVIEW_SAMPLES", 300);
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); CASES.len()];
    let mut n = 0u64;
    'rounds: for _ in 0..samples.div_ceil(10) {
        for (i, case) in CASES.iter().enumerate() {
            for _ in 0..10 {
                if Instant::now() > deadline {
                    break 'rounds;
                }
                n += 1;
                let id = format!("rv{n}");
                let (function_id, payload, want) = match case {
                    Case::Noop => (NOOP, json!({}), "continue"),
                    Case::Review => (REVIEW_CALL, review_input(&id), "escalate"),
                    Case::Hold => ("approval::gate", input(PLAIN, &id, "demo::held"), "hold"),
                    Case::Allowed => (
                        "approval::gate",
                        input(REVIEWED, &id, "demo::allowed"),
                        "continue",
                    ),
                    Case::Escalated => (
                        "approval::gate",
                        input(REVIEWED, &id, "demo::escalated"),
                        "hold",
                    ),
                };
                let start = Instant::now();
                let out = call(&client, function_id, payload).await;
                let took = start.elapsed();
                let field = if *case == Case::Review {
                    "verdict"
                } else {
                    "decision"
                };
                match out {
                    Ok(out) if out[field] == want => latencies[i].push(took),
                    other => eprintln!("reviewer bench: {case:?} answered {other:?}"),
                }
            }
        }
    }
    let mut medians = Vec::new();
    for (case, lat) in CASES.iter().zip(latencies.iter_mut()) {
        lat.sort_unstable();
        let p50 = percentile(lat, 0.50);
        medians.push(p50);
        println!(
            "  {:<48} n={:<5} p50 {:>9}  p90 {:>9}  p99 {:>9}",
            case.label(),
            lat.len(),
            fmt_dur(p50),
            fmt_dur(percentile(lat, 0.90)),
            fmt_dur(percentile(lat, 0.99))
        );
    }
    let round_trip = medians[0].as_secs_f64();
    let review = medians[1].as_secs_f64();
    let over = |d: Duration| d.as_secs_f64() - medians[2].as_secs_f64();
    println!(
        "  p50 over the plain hold: reviewer allows {:+.2} (a) = {:+.2} (v); reviewer escalates {:+.2} (a) = {:+.2} (v) (target ≤ 1 round trip)",
        over(medians[3]) / round_trip,
        over(medians[3]) / review,
        over(medians[4]) / round_trip,
        over(medians[4]) / review,
    );
    println!(
        "  reviews asked: {}; on the {}",
        reviewer.count(),
        engine.label()
    );
    let health = call(&client, "approval::health", json!({})).await;
    if let Ok(health) = health {
        println!("  health.reviewer: {}", health["reviewer"]);
    }
    worker.shutdown(Duration::from_secs(2)).await;
}
