//! What an operator's log pipeline gets from `--log-format json`: one INFO
//! line per hold, per resolve, per purge and per grant-watch stand-down, each
//! naming `session_id`, `function_call_id`, `function_id`, `decision` and
//! `rule` — and never a call's arguments.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, HarnessDouble, HarnessOptions};
use approval_gate_testkit::shell::{Dialect, JailShell};
use approval_gate_testkit::targets::{Behaviour, Echo, TargetWorker};
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;

/// A value no log line may contain: it is only ever in a call's arguments.
const MARKER: &str = "argument-marker-5f1c";
const SECRET: &str = "secret-token-9d2e";

/// The JSON log lines with this message.
fn lines_with(logs: &[Value], message: &str) -> Vec<Value> {
    logs.iter()
        .filter(|l| l["fields"]["message"] == message)
        .cloned()
        .collect()
}

fn parse(output: &str) -> Vec<Value> {
    output
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"))
        })
        .collect()
}

/// The one line about `call_id` among `lines`, with the fields an operator
/// filters on.
fn one(lines: &[Value], call_id: &str, decision: &str, rule: &str, function_id: &str) -> Value {
    let matching: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["function_call_id"] == call_id)
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "exactly one line for {call_id}: {lines:#?}"
    );
    let line = matching[0].clone();
    assert_eq!(line["level"], "INFO", "{line}");
    let f = &line["fields"];
    assert_eq!(f["session_id"], "s_ops", "{line}");
    assert_eq!(f["function_id"], function_id, "{line}");
    assert_eq!(f["decision"], decision, "{line}");
    assert_eq!(f["rule"], rule, "{line}");
    line
}

#[tokio::test]
async fn holds_resolves_purges_and_stand_downs_are_logged_once_with_their_ids() {
    on_test_engine("operator_logs", |engine: EngineFixture| async move {
        let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let targets = TargetWorker::start_with(
            &engine.url(),
            vec![
                ("demo::echo".into(), Arc::new(Echo) as Arc<dyn Behaviour>),
                ("shell::run".into(), Arc::new(JailShell::new(Dialect::Shell, &[]))),
            ],
        )
        .await;
        let probe = engine.client("probe").await;
        let mut worker = WorkerProcess::spawn(Path::new(BIN), &engine.url(), &["--log-format", "json"], Duration::from_secs(30)).await;
        for (point, function_id) in [("harness::hook::pre-trigger", "approval::gate"), ("harness::hook::post-trigger", "approval::filesystem-access-watch")] {
            assert!(harness.wait_for_binding(point, function_id, WAIT).await.is_some());
        }
        let resolve = |cid: &str, decision: &str| json!({"session_id": "s_ops", "function_call_id": cid, "decision": decision});
        let call = |cid: &str, fid: &str, arguments: Value| CallSpec::new("s_ops", "t_ops", cid, fid, arguments).with_working_dir("/w/s_ops").with_fs_root("/w/s_ops");
        let ok = |f: &'static str, p: Value| {
            let probe = probe.clone();
            async move { approval_gate_testkit::fixture::call(&probe, f, p.clone()).await.unwrap_or_else(|e| panic!("{f} {p}: {e}")) }
        };

        // c1 held then allowed; c2 held then denied; c3 held and purged.
        for cid in ["c1", "c2", "c3"] {
            let args = json!({"cmd": MARKER, "token": SECRET, "nested": {"note": MARKER}});
            assert!(harness.call(call(cid, "demo::echo", args)).await.is_held());
        }
        ok("approval::resolve", resolve("c1", "allow")).await;
        ok("approval::resolve", resolve("c2", "deny")).await;
        // f1: the jail rejects, the grant watch asks, the user denies the
        // folder; f2: the same folder again stands down.
        ok("approval::approve-always", json!({"session_id": "s_ops", "function_id": "shell::run"})).await;
        let path = "/data/reports/x.csv";
        assert!(harness.call(call("f1", "shell::run", json!({"path": path}))).await.is_held());
        ok("approval::resolve", resolve("f1", "deny")).await;
        let f2 = harness.call(call("f2", "shell::run", json!({"path": path}))).await;
        assert!(!f2.is_held(), "{f2:?}");
        harness.complete_turn("s_ops", "t_ops", "cancelled").await;

        assert!(
            worker.wait_for_line("held call purged", WAIT).await && worker.wait_for_line("grant watch stood down", WAIT).await,
            "{}",
            worker.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let output = worker.output();
        worker.terminate(Duration::from_secs(10)).await;
        targets.shutdown().await;
        harness.shutdown().await;

        assert!(!output.contains(MARKER), "a call's arguments reached the logs:\n{output}");
        assert!(!output.contains(SECRET), "a secret reached the logs:\n{output}");
        let logs = parse(&output);

        let held = lines_with(&logs, "call held");
        assert_eq!(held.len(), 3, "{held:#?}");
        for cid in ["c1", "c2", "c3"] {
            one(&held, cid, "hold", "no_match", "demo::echo");
        }
        let asked = lines_with(&logs, "folder access asked");
        one(&asked, "f1", "hold", "folder_access", "shell::run");

        let resolved = lines_with(&logs, "call resolved");
        assert_eq!(resolved.len(), 3, "{resolved:#?}");
        let c1 = one(&resolved, "c1", "allow", "user", "demo::echo");
        assert_eq!(c1["fields"]["kind"], "function");
        assert_eq!(c1["fields"]["settled"], true);
        one(&resolved, "c2", "deny", "user", "demo::echo");
        let f1 = one(&resolved, "f1", "deny", "user", "shell::run");
        // Today's harness (the default): the record kind its console expects.
        assert_eq!(f1["fields"]["kind"], "filesystem_access");

        let purged = lines_with(&logs, "held call purged");
        one(&purged, "c3", "aborted", "turn_completed", "demo::echo");

        let stood_down = lines_with(&logs, "grant watch stood down");
        one(&stood_down, "f2", "continue", "denied", "shell::run");

        for line in logs.iter().filter(|l| l["fields"]["decision"].is_string()) {
            for key in ["timestamp", "level", "target"] {
                assert!(line.get(key).is_some(), "{key} missing: {line}");
            }
        }
    })
    .await;
}
