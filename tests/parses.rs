//! Calls no command rule applies to never parse (contract §25.10): the gate
//! judges 1,000 calls under rules without a command constraint on the
//! call's function, and the command model's counter
//! (`approval_gate::parses`) does not move; then a command rule on the
//! function makes it move, so the count can fail.
//!
//! Its own test binary: the counter is process-wide, and the integration
//! suites (`tests/it`) parse commands in parallel with anything that runs
//! there.

use std::time::{Duration, Instant};

use approval_gate::{boot, parses, ApprovalConfig, BootOptions, Running};
use approval_gate_testkit::fixture::{call, EngineFixture};
use iii_sdk::IIIClient;
use serde_json::{json, Value};

const CALLS: usize = 1_000;

async fn configure(probe: &IIIClient, worker: &Running, value: Value) {
    call(
        probe,
        "configuration::set",
        json!({"id": "approval-gate", "value": value}),
    )
    .await
    .expect("configuration::set");
    let want = ApprovalConfig::from_value(&value).expect("a valid configuration");
    let deadline = Instant::now() + Duration::from_secs(5);
    while worker.config() != want {
        assert!(Instant::now() < deadline, "the worker never loaded {value}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn gate(probe: &IIIClient, i: usize, function_id: &str, arguments: Value) -> String {
    let out = call(
        probe,
        "approval::gate",
        json!({"point": "pre_trigger", "session_id": "s_parse", "turn_id": "t_parse",
               "call": {"id": format!("c{i}"), "function_id": function_id, "arguments": arguments}}),
    )
    .await
    .expect("approval::gate answers");
    out["decision"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn rule_25_10_calls_without_a_command_rule_never_parse() {
    let engine = EngineFixture::start_test().await;
    let defaults = BootOptions::new(engine.url());
    let worker = boot(BootOptions {
        connect_timeout: Duration::from_secs(15),
        otel: false,
        // The test engine's short name confirmation, not the 1 s a real
        // engine needs (`EngineFixture::name_confirm_window`).
        name_confirm: engine
            .name_confirm_window()
            .unwrap_or(defaults.name_confirm),
        ..defaults
    })
    .await
    .expect("the worker boots");
    let probe = engine.client("probe").await;
    // Command constraints exist, but none applies to shell::exec: one is on
    // another function, the other a plain text prefix on a field that is
    // not a command field (§25.1). Protected paths (§29) read every
    // `shell::*` command by default: turned off here, so only rules count.
    configure(
        &probe,
        &worker,
        json!({"default_mode": "full", "rule_precedence": "deny_ask_allow", "protected_path_functions": [], "rules": [
            "!approval::*",
            {"function": "deploy::*", "action": "deny", "args": {"command": {"prefix": "rm"}}},
            {"function": "shell::exec", "action": "deny", "args": {"cwd": {"prefix": "/etc"}}},
            {"function": "demo::*", "action": "ask", "args": {"path": {"prefix": "/srv"}}}
        ]}),
    )
    .await;
    let before = parses();
    for i in 0..CALLS {
        let (function_id, arguments) = match i % 4 {
            0 => ("shell::exec", json!({"command": "rm -rf ~/x; curl x | sh"})),
            1 => (
                "shell::exec",
                json!({"command": "bash", "args": ["-c", "rm -rf ~"]}),
            ),
            2 => (
                "demo::echo",
                json!({"command": "rm -rf ~/x", "path": "/tmp"}),
            ),
            _ => ("demo::other", json!({"cmd": "$(rm -rf ~)"})),
        };
        assert_eq!(
            gate(&probe, i, function_id, arguments).await,
            "continue",
            "call {i}"
        );
    }
    assert_eq!(
        parses(),
        before,
        "{CALLS} calls with no command rule on their function parsed a command"
    );

    // A command rule on shell::exec: now its calls parse (ten different
    // values, as the worker keeps the models of values it read before).
    configure(
        &probe,
        &worker,
        json!({"default_mode": "full", "rule_precedence": "deny_ask_allow", "protected_path_functions": [], "rules": [
            "!approval::*",
            {"function": "shell::exec", "action": "deny", "args": {"command": {"prefix": "rm"}}}
        ]}),
    )
    .await;
    let before = parses();
    for i in 0..10 {
        let command = format!("ls -la /tmp/{i}");
        gate(
            &probe,
            CALLS + i,
            "shell::exec",
            json!({ "command": command }),
        )
        .await;
    }
    assert!(
        parses() >= before + 10,
        "the count does not move when a command rule applies ({} → {})",
        before,
        parses()
    );
    worker.shutdown(Duration::from_secs(2)).await;
}
