//! The gate's metrics on a real engine (contract §27.5): its own test binary,
//! because the SDK's OpenTelemetry is one per process and the integration
//! binary keeps it off. Needs a real engine (`III_ENGINE_BIN`); without one it
//! prints one `SKIP` line.

use std::time::Duration;

use approval_gate::{boot, BootOptions};
use approval_gate_testkit::fixture::{call, EngineFixture, RealEngineOptions};
use approval_gate_testkit::harness::{
    CallSpec, CallState, Generation, HarnessDouble, HarnessOptions,
};
use serde_json::{json, Value};

const SESSION: &str = "sess-Q7metrics";
const WAIT: Duration = Duration::from_secs(15);

fn spec(cid: &str, function_id: &str) -> CallSpec {
    CallSpec::new(
        SESSION,
        "turn-Q7",
        cid,
        function_id,
        json!({"path": "/srv/x"}),
    )
    .with_fs_root("/w/q7")
}

/// The data points of `name` among the listed SDK metrics, as
/// `(attributes, value)`.
fn points(listed: &[Value], name: &str) -> Vec<(Value, f64)> {
    listed
        .iter()
        .filter(|m| m["name"] == name)
        .flat_map(|m| m["data_points"].as_array().cloned().unwrap_or_default())
        .map(|p| {
            let value = p["value"]
                .as_f64()
                .or_else(|| p["count"].as_f64())
                .or_else(|| p.get("Number").and_then(|n| n["value"].as_f64()))
                .or_else(|| p.get("Histogram").and_then(|h| h["count"].as_f64()))
                .unwrap_or(0.0);
            (p["attributes"].clone(), value)
        })
        .collect()
}

fn has_label(attributes: &Value, key: &str, value: &str) -> bool {
    let text = attributes.to_string();
    text.contains(&format!("\"{key}\"")) && text.contains(&format!("\"{value}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_27_5_the_engine_lists_the_gates_metrics_and_no_label_names_a_session_or_call() {
    let options = RealEngineOptions {
        metrics: true,
        ..RealEngineOptions::default()
    };
    let Some(engine) = EngineFixture::start_real_with("rule_27_5_metrics", options).await else {
        return;
    };
    let scenario = async {
        let url = engine.url();
        let harness = HarnessDouble::start(&url, HarnessOptions::generation(Generation::G2)).await;
        let running = boot(BootOptions {
            url: url.clone(),
            seed: Some(json!({"rules": ["!demo::deny", "?demo::ask", "demo::*"], "pending_timeout_ms": 1000})),
            connect_timeout: WAIT,
            otel: true,
            ..BootOptions::new(&url)
        })
        .await
        .unwrap_or_else(|e| panic!("worker did not boot: {e}"));
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        let probe = engine.client("probe").await;
        // A continue, a deny, a hold a human allows, a hold that times out.
        assert!(!harness.call(spec("call-Z1", "demo::ok")).await.is_held());
        assert!(harness
            .call(spec("call-Z2", "demo::deny"))
            .await
            .deny_reason()
            .is_some());
        assert!(harness.call(spec("call-Z3", "demo::ask")).await.is_held());
        assert!(harness.call(spec("call-Z4", "demo::ask")).await.is_held());
        call(
            &probe,
            "approval::resolve",
            json!({"session_id": SESSION, "function_call_id": "call-Z3", "decision": "allow"}),
        )
        .await
        .expect("resolved");
        assert!(
            harness
                .wait_until(WAIT, |h| !matches!(
                    h.state(SESSION, "call-Z4"),
                    Some(CallState::Held { .. })
                ))
                .await,
            "the hold never timed out"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        iii_helpers::observability::flush_otel().await;
        let mut listed = Vec::new();
        for _ in 0..50 {
            let reply = call(&probe, "engine::metrics::list", json!({}))
                .await
                .expect("listed");
            listed = reply["sdk_metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|m| {
                    m["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("approval_gate."))
                })
                .collect();
            if !points(&listed, "approval_gate.removals").is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let text = Value::Array(listed.clone()).to_string();
        assert!(!listed.is_empty(), "no approval_gate metric listed");
        for id in [
            SESSION, "turn-Q7", "call-Z1", "call-Z2", "call-Z3", "call-Z4", "/srv/x",
        ] {
            assert!(!text.contains(id), "a metric names {id}: {text}");
        }
        let verdicts = points(&listed, "approval_gate.gate.verdicts");
        for (outcome, rule, count) in [
            ("continue", "demo::*", 1.0),
            ("deny", "!demo::deny", 1.0),
            ("hold", "?demo::ask", 2.0),
        ] {
            assert!(
                verdicts
                    .iter()
                    .any(|(a, v)| has_label(a, "outcome", outcome)
                        && has_label(a, "rule", rule)
                        && *v == count),
                "not {count} {outcome} verdicts by {rule}: {text}"
            );
        }
        let removals = points(&listed, "approval_gate.removals");
        eprintln!("rule_27_5_metrics: verdicts {verdicts:?}; removals {removals:?}");
        for (outcome, kind) in [("allow", "human"), ("timeout", "timeout")] {
            assert!(
                removals
                    .iter()
                    .any(|(a, v)| has_label(a, "outcome", outcome)
                        && has_label(a, "decided_by", kind)
                        && *v == 1.0),
                "not one {outcome} removal by {kind}: {text}"
            );
        }
        assert!(
            !points(&listed, "approval_gate.gate.latency").is_empty(),
            "{text}"
        );
        // The held-calls gauge reads the running worker's inbox (no point
        // when it reads none): both holds have ended.
        let held = points(&listed, "approval_gate.held");
        assert!(
            held.iter().any(|(_, v)| *v == 0.0),
            "the held-calls gauge does not read the worker: {held:?} in {text}"
        );
        assert!(
            !points(&listed, "approval_gate.decision.time").is_empty(),
            "{text}"
        );
        running.shutdown(Duration::from_secs(2)).await;
        drop(harness);
    };
    tokio::time::timeout(Duration::from_secs(90), scenario)
        .await
        .expect("the scenario finished in 90 s");
}
