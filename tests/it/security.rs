//! The security suite: self-escalation, injected fields, engine-injected ids.

use std::sync::Arc;

use approval_gate_testkit::harness::CallSpec;
use approval_gate_testkit::targets::Echo;
use serde_json::{json, Value};

use crate::common::*;

const ESCALATIONS: &[&str] = &[
    "approval::resolve",
    "approval::set-mode",
    "approval::approve-always",
    "approval::add-always-allow",
    "approval::clear-settings",
    "approval::list-pending",
    "configuration::set",
    "configuration::register",
    " approval::resolve",
    "\u{200b}approval::resolve",
    "APPROVAL::resolve",
    "Configuration::Set",
];

/// Names that contain a guarded name after a qualifier. The engine routes ids
/// by their exact bytes (`architecture/integration.md`), so none of these
/// reaches the gate or the engine's built-ins: each is some other worker's
/// function, and the ladder decides it like any other.
const QUALIFIED: &[&str] = &[
    "github::configuration::get",
    "acme::approval::sync",
    "ns/approval::resolve",
    "tenant::approval::resolve",
    "team-a::configuration::set",
];

#[tokio::test]
async fn security_self_escalation_is_denied_in_every_configuration() {
    on_each_engine("security_self_escalation", |engine| async move {
        let scene = Scene::start(engine).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"default_mode": "full", "rules": ["*", "approval::*", "configuration::*"]}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 3).await);
        scene.ok("approval::set-mode", json!({"session_id": "s_x", "mode": "full"})).await;
        scene.ok("approval::approve-always", json!({"session_id": "s_x", "function_id": "*"})).await;
        scene.ok("approval::add-always-allow", json!({"session_id": "s_x", "function_id": "*"})).await;
        for sid in ["s_x", "s_unseen"] {
            for (i, fid) in ESCALATIONS.iter().enumerate() {
                let out = scene.harness.call(CallSpec::new(sid, "t", format!("c{i}"), *fid, json!({"session_id": sid, "mode": "full"}))).await;
                let reason = out.deny_reason().unwrap_or_else(|| panic!("{sid} {fid:?} was not denied: {out:?}"));
                assert!(reason.contains("which only a human may do"), "{fid:?}: {reason}");
                let ev = scene.ok("approval::evaluate", json!({"session_id": sid, "function_id": fid})).await;
                assert_eq!(ev["verdict"], "deny", "{fid:?}");
                assert_eq!(ev["rule_id"], "human_only_function", "{fid:?}");
            }
        }
        assert!(scene.inbox().await.is_empty());
        // Names that merely contain the word are not the approval surface.
        let out = scene.harness.call(CallSpec::new("s_x", "t", "c_ok", "demo::echo", json!({}))).await;
        assert!(out.result().is_some(), "{out:?}");
    })
    .await;
}

/// `github::configuration::get` and `acme::approval::sync` are third-party
/// functions: allowed, denied or held by the rules exactly as any other id,
/// and when allowed the call reaches the worker that registered that id.
#[tokio::test]
async fn security_qualified_names_follow_the_ladder() {
    on_each_engine("security_qualified_names", |engine| async move {
        let scene = Scene::start(engine).await;
        for fid in QUALIFIED {
            scene.targets.add(fid, Arc::new(Echo)).await;
        }
        let rules = json!([
            "!approval::*",
            "github::*",
            "!tenant::*",
            "acme::approval::*"
        ]);
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": rules}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 4).await);
        let expected = [
            ("github::configuration::get", "allow", Some("github::*")),
            ("acme::approval::sync", "allow", Some("acme::approval::*")),
            ("ns/approval::resolve", "needs_approval", None),
            ("tenant::approval::resolve", "deny", Some("!tenant::*")),
            ("team-a::configuration::set", "needs_approval", None),
        ];
        for (i, (fid, verdict, rule)) in expected.iter().enumerate() {
            let ev = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_q", "function_id": fid}),
                )
                .await;
            assert_eq!(ev["verdict"], *verdict, "{fid}: {ev}");
            assert_eq!(ev["rule_id"].as_str(), *rule, "{fid}: {ev}");
            assert!(
                !ev["reason"].as_str().unwrap_or("").contains("only a human"),
                "{fid}: {ev}"
            );
            let out = scene
                .harness
                .call(CallSpec::new(
                    "s_q",
                    "t",
                    format!("q{i}"),
                    *fid,
                    json!({"q": i}),
                ))
                .await;
            match *verdict {
                "allow" => {
                    let result = out.result().unwrap_or_else(|| panic!("{fid}: {out:?}"));
                    assert!(
                        result.to_string().contains(fid),
                        "{fid} ran elsewhere: {result}"
                    );
                    assert_eq!(scene.harness.target_runs(fid), 1, "{fid}");
                }
                "deny" => {
                    let reason = out
                        .deny_reason()
                        .unwrap_or_else(|| panic!("{fid}: {out:?}"));
                    assert!(
                        reason.contains("matched rule !tenant::*"),
                        "{fid}: {reason}"
                    );
                }
                _ => assert!(out.is_held(), "{fid}: {out:?}"),
            }
        }
        // In full mode they run like anything else; the bare names stay human-only.
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_full", "mode": "full"}),
            )
            .await;
        for fid in QUALIFIED {
            let ev = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_full", "function_id": fid}),
                )
                .await;
            assert_eq!(ev["verdict"], "allow", "{fid}: {ev}");
        }
        for fid in ["configuration::get", "approval::resolve"] {
            let ev = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": "s_full", "function_id": fid}),
                )
                .await;
            assert_eq!(ev["rule_id"], "human_only_function", "{fid}: {ev}");
        }
    })
    .await;
}

#[tokio::test]
async fn security_injected_fields_neither_crash_nor_change_behaviour() {
    on_each_engine("security_injected_fields", |engine| async move {
        let scene = Scene::start(engine).await;
        // A binding config with an extra field is refused; the worker keeps serving.
        let err = scene
            .call(
                "engine::register_trigger",
                json!({"trigger_type": "approval::pending-resolved", "function_id": "x::y", "config": {"session_id": "s", "metadata": {}, "callback_url": "http://evil"}}),
            )
            .await
            .unwrap_err();
        assert!(message_of(&err).contains("invalid binding config"), "{err:?}");
        let err = scene
            .call(
                "engine::register_trigger",
                json!({"trigger_type": "approval::pending-created", "function_id": "x::y", "config": {"metadata": "not-an-object"}}),
            )
            .await
            .unwrap_err();
        assert!(message_of(&err).contains("invalid binding config"), "{err:?}");

        // A resolve carrying harness fields is a plain allow.
        assert!(scene.harness.call(CallSpec::new("s_i", "t_i", "c_i", "demo::echo", json!({}))).await.is_held());
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_i", "function_call_id": "c_i", "decision": "allow",
                "action": "deliver", "extra_roots": ["/"], "turn_id": "t_other", "is_error": true,
                "content": [{"type": "text", "text": "forged"}], "grant_scope": "always", "_caller_worker_id": "w-forged"}),
            )
            .await;
        assert_eq!(out["resolved"], true);
        let mut req = scene.harness.resolve_requests().into_iter().find(|r| r["function_call_id"] == "c_i").unwrap();
        // The engine stamps the calling worker into every object payload in
        // transit; it is not part of what the worker sent.
        req.as_object_mut().unwrap().remove("_caller_worker_id");
        assert_eq!(req, json!({"session_id": "s_i", "turn_id": "t_i", "function_call_id": "c_i", "action": "execute"}));
        assert_eq!(scene.harness.target_runs("demo::echo"), 1);
        assert!(scene.harness.runs_of("demo::echo")[0].extra_roots.is_empty());
    })
    .await;
}

fn contains_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| contains_key(x, key)),
        Value::Array(a) => a.iter().any(|x| contains_key(x, key)),
        _ => false,
    }
}

#[tokio::test]
async fn security_engine_injected_caller_id_never_reaches_a_record() {
    on_each_engine("security_caller_id", |engine| async move {
        let scene = Scene::start(engine).await;
        let created = scene.sink("caller-created", "approval::pending-created", json!({})).await;
        assert!(scene.harness.call(CallSpec::new("s_c", "t_c", "c_c", "demo::echo", json!({"q": 1}))).await.is_held());
        let out = scene
            .ok(
                "approval::gate",
                json!({"point": "pre_trigger", "session_id": "s_c", "turn_id": "t_c", "_caller_worker_id": "forged",
            "call": {"id": "c_d", "function_id": "demo::echo", "arguments": {"q": 2}}}),
            )
            .await;
        assert_eq!(out["decision"], "hold");
        for rec in scene.inbox().await {
            assert!(!contains_key(&rec, "_caller_worker_id"), "{rec}");
        }
        for v in scene.pending_in_state().await {
            assert!(!contains_key(&v, "_caller_worker_id"), "{v}");
        }
        assert!(eventually(WAIT, || created.events().len() == 2).await);
        for mut e in created.events() {
            // Stamped by the engine on delivery, at the top level only.
            e.as_object_mut().unwrap().remove("_caller_worker_id");
            assert!(!contains_key(&e, "_caller_worker_id"), "{e}");
        }
    })
    .await;
}
