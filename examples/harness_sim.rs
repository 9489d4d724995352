//! Plays the harness against any engine: starts the harness double (and,
//! with `--serve-target`, a target worker serving the function), sends one
//! call through whatever hooks are bound (the approval gate, for one), and
//! prints what happened — each hook's reply, then ran / denied / held. A held
//! call is watched until someone resolves it or `--wait` runs out.
//!
//! ```text
//! cargo run --example harness_sim -- \
//!     --url ws://127.0.0.1:49134 --function demo::echo --arguments '{"x":1}' --serve-target
//! ```

use std::time::Duration;

use approval_gate_testkit::harness::{
    CallSpec, CallState, Generation, HarnessDouble, HarnessOptions,
};
use approval_gate_testkit::targets::TargetWorker;
use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser)]
#[command(about = "Send one function call through the harness's hook chains")]
struct Args {
    #[arg(long, env = "III_URL", default_value = "ws://127.0.0.1:49134")]
    url: String,
    #[arg(long, default_value = "demo::echo")]
    function: String,
    /// The call's arguments, JSON.
    #[arg(long, default_value = "{}")]
    arguments: String,
    #[arg(long, default_value = "sim-session")]
    session: String,
    #[arg(long, default_value = "sim-turn")]
    turn: String,
    #[arg(long, default_value = "sim-call-1")]
    call: String,
    /// The session workspace, sent as turn metadata `working_dir` (the
    /// brief's harness) and `fs_scope.root` (today's).
    #[arg(long)]
    working_dir: Option<String>,
    /// Play the brief's harness (generation 1) instead of today's.
    #[arg(long)]
    generation_1: bool,
    /// Also register `--function` as an echo target.
    #[arg(long)]
    serve_target: bool,
    /// Seconds to wait for a held call to be resolved.
    #[arg(long, default_value_t = 120)]
    wait: u64,
}

fn line(event: &str, body: Value) {
    println!("{}", json!({ "event": event, "detail": body }));
}

fn describe(state: &CallState) -> Value {
    match state {
        CallState::Held { held_by, point } => json!({"held_by": held_by, "point": point}),
        CallState::Denied { reason, point, .. } => json!({"denied": reason, "point": point}),
        CallState::Completed { result } => json!({"ran": result}),
        CallState::Delivered { entry_id, result } => {
            json!({"delivered": entry_id, "result": result})
        }
        CallState::Abandoned { status } => json!({"abandoned": status}),
        CallState::Running => json!({"running": true}),
        CallState::AwaitingChild {
            child_session_id,
            child_turn_id,
        } => json!({"awaiting_child": child_session_id, "child_turn_id": child_turn_id}),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let arguments: Value = serde_json::from_str(&args.arguments)?;

    let generation = if args.generation_1 {
        Generation::G1
    } else {
        Generation::G2
    };
    let harness = HarnessDouble::start(&args.url, HarnessOptions::generation(generation)).await;
    let target = if args.serve_target {
        Some(TargetWorker::start(&args.url, &[&args.function]).await)
    } else {
        None
    };
    // Bindings parked for the hook types activate once the harness provides
    // them; give the engine a moment to deliver them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for point in ["harness::hook::pre-trigger", "harness::hook::post-trigger"] {
        for b in harness.bindings(point) {
            line(
                "binding",
                json!({"point": point, "function_id": b.function_id, "config": b.config}),
            );
        }
    }

    let mut spec = CallSpec::new(
        &args.session,
        &args.turn,
        &args.call,
        &args.function,
        arguments,
    );
    if let Some(dir) = &args.working_dir {
        spec = spec.with_working_dir(dir).with_fs_root(dir);
    }
    let mut state = harness.call(spec).await;
    let mut seen_hooks = 0;
    let mut report_hooks = |h: &HarnessDouble| {
        let calls = h.hook_calls();
        for c in &calls[seen_hooks..] {
            let reply = c.reply.clone().unwrap_or_else(|e| json!({"error": e}));
            line(
                "hook",
                json!({"point": c.point, "function_id": c.function_id, "reply": reply}),
            );
        }
        seen_hooks = calls.len();
    };
    report_hooks(&harness);
    line("call", describe(&state));

    if state.is_held() {
        line(
            "waiting",
            json!({"seconds": args.wait, "resolve_with": "harness::function::resolve"}),
        );
        let settled = harness
            .wait_for_state(
                &args.session,
                &args.call,
                Duration::from_secs(args.wait),
                |s| !s.is_held() && *s != CallState::Running,
            )
            .await;
        report_hooks(&harness);
        state = settled.unwrap_or(state);
        line("call", describe(&state));
    }
    line(
        "target_runs",
        json!({"function_id": args.function, "runs": harness.target_runs(&args.function)}),
    );

    if let Some(target) = target {
        target.shutdown().await;
    }
    harness.shutdown().await;
    Ok(())
}
