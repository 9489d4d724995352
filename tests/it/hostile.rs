//! Hostile input and secrets: the gate answers every input with a deny or a
//! valid decision and never crashes; secret-keyed arguments never leave the
//! worker (events, inbox, envelopes, logs).

use std::time::Duration;

use approval_gate::{
    build_record, default_settings, judge, parse_hook_input, ApprovalConfig, CompiledRules,
    CompiledSettings, Judgement, RecordKind, SessionContext,
};
use approval_gate_testkit::harness::{CallSpec, HarnessDouble, HarnessOptions};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};

use crate::common::*;

/// `{"a": [{"a": [ ... "leaf" ]}]}`, built without recursion.
fn deep(n: usize) -> Value {
    let mut v = Value::String("leaf".into());
    for _ in 0..n {
        let mut map = serde_json::Map::new();
        map.insert("a".into(), Value::Array(vec![v]));
        v = Value::Object(map);
    }
    v
}

fn hook_with_arguments(call_id: &str, arguments: Value) -> Value {
    let mut call = serde_json::Map::new();
    call.insert("id".into(), json!(call_id));
    call.insert("function_id".into(), json!("demo::echo"));
    call.insert("arguments".into(), arguments);
    let mut input = serde_json::Map::new();
    input.insert("point".into(), json!("pre_trigger"));
    input.insert("session_id".into(), json!("s_d"));
    input.insert("turn_id".into(), json!("t"));
    input.insert("call".into(), Value::Object(call));
    Value::Object(input)
}

fn assert_decision(out: &Value) {
    let d = out["decision"]
        .as_str()
        .unwrap_or_else(|| panic!("not a decision: {out}"));
    assert!(["continue", "deny", "hold"].contains(&d), "{out}");
}

#[tokio::test]
async fn hostile_hook_inputs_get_a_deny_or_a_valid_answer() {
    on_each_engine("hostile_hook_inputs", |engine| async move {
        let scene = Scene::start(engine).await;
        let base = |call: Value| json!({"point": "pre_trigger", "session_id": "s_h", "turn_id": "t_h", "call": call});
        let cases = vec![
            json!(null),
            json!([1, 2, 3]),
            json!("pre_trigger"),
            json!({"session_id": 5, "turn_id": "t", "call": {"id": "c", "function_id": "x"}}),
            json!({"session_id": "s", "turn_id": "t", "depth": "deep", "call": {"id": "c", "function_id": "x"}}),
            json!({"session_id": "s", "turn_id": "t", "metadata": "m", "call": {"id": "c", "function_id": "x"}}),
            base(json!({"id": 7, "function_id": "demo::echo"})),
            base(json!({"id": "c", "function_id": ["demo::echo"]})),
            base(json!("not a call")),
            base(json!({"id": "c1", "function_id": "demo::echo", "arguments": "a string"})),
            base(json!({"id": "c2", "function_id": "demo::echo", "arguments": [1, {"token": "x"}]})),
            base(json!({"id": "c3", "function_id": "\u{0}\u{feff}approval::resolve"})),
        ];
        for input in cases {
            let out = scene.ok("approval::gate", input.clone()).await;
            assert_decision(&out);
            if input.get("session_id").map(|s| !s.is_string()).unwrap_or(true) {
                assert_eq!(out["decision"], "deny", "{input} → {out}");
            }
        }
        // 10 MB of arguments: a bounded record.
        let big = "x".repeat(10 * 1024 * 1024);
        let out = scene
            .ok(
                "approval::gate",
                base(json!({"id": "c_big", "function_id": "demo::echo", "arguments": {"blob": big, "list": vec![1; 100_000]}})),
            )
            .await;
        assert_eq!(out["decision"], "hold");
        let rec = scene.ok("approval::get-pending", json!({"session_id": "s_h", "function_call_id": "c_big"})).await;
        assert!(rec.to_string().len() < 100 * 1024, "record is {} bytes", rec.to_string().len());
        let alive = scene.ok("approval::gate", base(json!({"id": "c_after", "function_id": "demo::echo"}))).await;
        assert_eq!(alive["decision"], "hold");
    })
    .await;
}

/// Arguments nested deeper than any engine forwards (the real engine drops
/// frames past ~126 levels) still get an answer: the gate's parse and
/// judgement, and the record a hold writes, called directly.
#[test]
fn hostile_values_in_process_never_panic() {
    let rules = CompiledRules::empty();
    let settings = CompiledSettings::new(&default_settings(&ApprovalConfig::default(), &rules, 0));
    for n in [100, 1_000, 10_000, 200_000] {
        let input = parse_hook_input(hook_with_arguments(&format!("c{n}"), deep(n)))
            .expect("a hook input of any depth parses");
        assert_eq!(
            judge(&input, &settings, &rules),
            Judgement::Hold {
                ask: None,
                by_default: true,
                rule: None,
            },
            "depth {n}"
        );
        let call = input.call.as_ref().expect("a call");
        let record = build_record(
            &input,
            call,
            RecordKind::Function,
            SessionContext::default(),
        );
        assert!(
            record.arguments_excerpt.to_string().contains("<max-depth>"),
            "depth {n}"
        );
        drop(record);
        drop(input);
    }
}

#[tokio::test]
async fn hostile_raw_frames_do_not_crash_the_worker() {
    on_test_engine("hostile_raw_frames", |engine| async move {
        let scene = Scene::start(engine).await;
        let (mut ws, _) = tokio_tungstenite::connect_async(scene.engine.url()).await.unwrap();
        let _registered = ws.next().await;
        // 10,000 levels of nesting as text: the engine or the SDK refuses the
        // frame, or the gate answers; the worker keeps serving either way.
        let deep_text = format!(
            r#"{{"type":"invokefunction","invocation_id":"00000000-0000-4000-8000-000000000003","function_id":"approval::gate","data":{{"session_id":"s","turn_id":"t","call":{{"id":"c3","function_id":"x","arguments":{}"leaf"{}}}}}}}"#,
            "{\"a\":[".repeat(10_000),
            "]}".repeat(10_000)
        );
        let frames = [
            deep_text,
            r#"{"type":"invokefunction","invocation_id":"00000000-0000-4000-8000-000000000001","function_id":"approval::gate","data":{"session_id":"s","turn_id":"t","call":{"id":"c","function_id":"x","arguments":{"k":"\ud800"}}}}"#.to_string(),
            r#"{"type":"invokefunction","invocation_id":"00000000-0000-4000-8000-000000000002","function_id":"approval::gate","data":{"session_id":"s","turn_id":"t","call":{"id":"c2","function_id":"x","arguments":{"k":1e999}}}}"#.to_string(),
            "{not json".to_string(),
        ];
        for f in frames {
            let _ = ws.send(tokio_tungstenite::tungstenite::Message::Text(f.into())).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let alive = scene.ok("approval::gate", json!({"point": "pre_trigger", "session_id": "s", "turn_id": "t", "call": {"id": "c_ok", "function_id": "demo::echo"}})).await;
        assert_eq!(alive["decision"], "hold");
    })
    .await;
}

/// The contract's names, then spellings that must match too (a `_` + name
/// suffix, other cases).
fn secret_keys() -> impl Iterator<Item = &'static str> {
    SECRET_NAMES
        .into_iter()
        .chain(["db_password", "GITHUB_TOKEN", "Authorization", "x_Api_Key"])
}

fn secret_arguments() -> (Value, Vec<String>) {
    let mut values = Vec::new();
    let mut args = serde_json::Map::new();
    for (i, k) in secret_keys().enumerate() {
        let v = format!(
            "SECRET{i}VALUE{}",
            "z".repeat(if i % 2 == 0 { 250 } else { 3 })
        );
        values.push(v.clone());
        args.insert(k.to_string(), json!(v));
    }
    values.push("NESTEDSECRET".into());
    values.push("ARRAYSECRET".into());
    args.insert(
        "nested".into(),
        json!({"deeper": {"client_secret": "NESTEDSECRET", "ok": "visible"}}),
    );
    args.insert(
        "list".into(),
        json!([{"token": "ARRAYSECRET"}, {"password": 424242}]),
    );
    args.insert(
        "creds".into(),
        json!({"api_key": {"inner": "OBJECTSECRET"}}),
    );
    values.push("OBJECTSECRET".into());
    values.push("424242".into());
    (Value::Object(args), values)
}

fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    for s in secrets {
        assert!(
            !text.contains(s.as_str()),
            "{what} leaks {s}: {}",
            &text[..text.len().min(2000)]
        );
    }
}

#[tokio::test]
async fn secrets_never_leave_the_worker() {
    on_each_engine("secrets_never_leave", |engine| async move {
        let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
        let _targets = TargetWorker::start(&engine.url(), TARGETS).await;
        let probe = engine.client("probe").await;
        let created = Sink::bind(
            &engine,
            "sec-created",
            "approval::pending-created",
            json!({}),
        )
        .await;
        let resolved = Sink::bind(
            &engine,
            "sec-resolved",
            "approval::pending-resolved",
            json!({}),
        )
        .await;
        let mut worker =
            WorkerProcess::spawn_raw(BIN.as_ref(), &engine.url(), &["--log-format", "json"]);
        assert!(
            worker
                .wait_for_line("approval-gate ready", Duration::from_secs(30))
                .await,
            "{}",
            worker.output()
        );
        // The harness is there: the ready line says the worker is gated.
        let output = worker.output();
        let ready = output
            .lines()
            .find(|l| l.contains("approval-gate ready"))
            .unwrap_or_default();
        assert!(ready.contains("\"gated\":true"), "{ready}");
        assert!(harness
            .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
            .await
            .is_some());
        let (args, secrets) = secret_arguments();

        for i in 0..3 {
            let out = harness
                .call(CallSpec::new(
                    "s_sec",
                    "t_sec",
                    format!("c{i}"),
                    "demo::echo",
                    args.clone(),
                ))
                .await;
            assert!(out.is_held());
        }
        assert!(
            eventually(WAIT, || created.events().len() >= 3).await,
            "sink never saw the holds"
        );
        let c = |v: &Value| v.to_string();
        for e in created.events() {
            assert_clean("pending-created", &c(&e), &secrets);
            assert_eq!(e["arguments_excerpt"]["nested"]["deeper"]["ok"], "visible");
        }
        let inbox =
            approval_gate_testkit::fixture::call(&probe, "approval::list-pending", json!({}))
                .await
                .unwrap();
        assert_clean("list-pending", &c(&inbox), &secrets);
        let one = approval_gate_testkit::fixture::call(
            &probe,
            "approval::get-pending",
            json!({"session_id": "s_sec", "function_call_id": "c0"}),
        )
        .await
        .unwrap();
        assert_clean("get-pending", &c(&one), &secrets);
        approval_gate_testkit::fixture::call(
            &probe,
            "approval::resolve",
            json!({"session_id": "s_sec", "function_call_id": "c0", "decision": "deny"}),
        )
        .await
        .unwrap();
        let req = harness
            .resolve_requests()
            .into_iter()
            .find(|r| r["function_call_id"] == "c0")
            .unwrap();
        assert_clean("deny envelope", &c(&req), &secrets);
        assert_eq!(req["details"]["args_excerpt"]["token"], "<redacted>");
        let st = harness.state("s_sec", "c0").unwrap();
        assert_clean("model-facing result", &format!("{st:?}"), &secrets);
        approval_gate_testkit::fixture::call(
            &probe,
            "approval::resolve",
            json!({"session_id": "s_sec", "function_call_id": "c1", "decision": "allow"}),
        )
        .await
        .unwrap();
        assert!(eventually(WAIT, || resolved.events().len() >= 2).await);
        for e in resolved.events() {
            assert_clean("pending-resolved", &c(&e), &secrets);
        }
        let logs = worker.output();
        assert!(logs.contains("call held"), "logs captured: {logs}");
        assert_clean("logs", &logs, &secrets);
        worker.kill();
    })
    .await;
}
