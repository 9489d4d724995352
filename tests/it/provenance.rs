//! Provenance and typed outcomes (contract §23): `pending-resolved` says who
//! decided on every removal path, a resolve's caller is the worker the engine
//! names (a payload cannot forge it), the decision log gets one redacted
//! record per gate verdict and per removal, and every denial the model reads
//! from the gate leads with one of the five typed leads.

use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{
    model, CallSpec, CallState, Generation, HarnessOptions, ResolveFault,
};
use serde_json::{json, Value};

use crate::common::*;
use crate::links::{config as links_config, http_client, spec, Links};

/// The decision log's function: a target every scene serves (it becomes a
/// human-only target once configured).
const LOG_FN: &str = "demo::other";
/// A secret in the held calls' arguments; no log record may carry it.
const SECRET: &str = "sk-proof-SECRET-4242";
/// A human's deny reason: free text, never logged.
const DENY_REASON: &str = "not with SECRET-DENY-77";

/// Links on (for the link path), the decision log on, `coder::write` held
/// by an ask rule that expires after a second, releases that give up on the
/// harness after a second.
fn seed(base: &str) -> Value {
    let rules =
        json!(["!approval::*", {"function": "coder::write", "action": "ask", "timeout_ms": 1000}]);
    let mut seed = links_config(base, rules, None);
    seed["decision_log"] = json!({"function_id": LOG_FN});
    seed["release_timeout_ms"] = json!(1000);
    seed
}

/// The engine's id of the worker connection named `name`.
async fn worker_id(scene: &Scene, name: &str) -> String {
    let listed = scene.ok("engine::workers::list", json!({})).await;
    listed["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["name"] == name)
        .and_then(|w| w["id"].as_str())
        .unwrap_or_else(|| panic!("no worker named {name}: {listed}"))
        .to_string()
}

/// The `pending-resolved` event of one call, waited for.
async fn resolved(sink: &Sink, cid: &str) -> Value {
    let found = eventually(WAIT * 2, || {
        sink.events().iter().any(|e| e["function_call_id"] == cid)
    })
    .await;
    let events = sink.events();
    assert!(found, "no pending-resolved for {cid}: {events:#?}");
    let mine: Vec<&Value> = events
        .iter()
        .filter(|e| e["function_call_id"] == cid)
        .collect();
    assert_eq!(mine.len(), 1, "exactly one pending-resolved for {cid}");
    mine[0].clone()
}

/// The `approval_url` of one call's `pending-created`, waited for.
async fn link_for(created: &Sink, cid: &str) -> String {
    assert!(
        eventually(WAIT, || created
            .events()
            .iter()
            .any(|e| e["function_call_id"] == cid))
        .await,
        "no pending-created for {cid}"
    );
    created
        .events()
        .iter()
        .find(|e| e["function_call_id"] == cid)
        .and_then(|e| e["approval_url"].as_str())
        .unwrap_or_else(|| panic!("{cid} has no approval_url"))
        .to_string()
}

fn args() -> Value {
    json!({"cmd": "ls", "api_key": SECRET})
}

async fn held(scene: &Scene, sid: &str, cid: &str, fid: &str) {
    scene.hold(spec(sid, cid, fid, args())).await;
}

/// `decided_by` without its time, which each path stamps.
fn who(event: &Value) -> Value {
    let mut by = event["decided_by"].clone();
    assert!(by["at"].as_u64().is_some_and(|at| at > 0), "{event}");
    by.as_object_mut().unwrap().remove("at");
    by
}

#[tokio::test]
async fn rule_23_decided_by_names_every_removal_path_and_the_log_records_each_verdict() {
    on_each_engine("rule_23_decided_by", |engine| async move {
        let base = engine.http_url();
        let scene =
            Scene::start_seeded(engine, HarnessOptions::default(), Some(seed(&base))).await;
        let l = Links {
            scene,
            http: http_client(),
            base,
        };
        l.wait_for_status("/approvals/x", 403).await;
        let scene = &l.scene;
        let created = scene.sink("pv-created", "approval::pending-created", json!({})).await;
        let gone = scene.sink("pv-resolved", "approval::pending-resolved", json!({})).await;
        let probe = json!({"worker_id": worker_id(scene, "probe").await, "worker_name": "probe"});

        // approval::resolve → human / resolve, the caller the engine named.
        held(scene, "s_a", "c_res", "demo::echo").await;
        let out = scene
            .ok("approval::resolve", json!({"session_id": "s_a", "function_call_id": "c_res", "decision": "allow"}))
            .await;
        assert_eq!(out["resolved"], true, "{out}");
        let e = resolved(&gone, "c_res").await;
        assert_eq!(e["outcome"], "allow");
        assert_eq!(who(&e), json!({"kind": "human", "via": "resolve", "caller": probe}));

        // A human's deny → human / resolve; the model reads the human's lead.
        held(scene, "s_a", "c_deny", "demo::echo").await;
        scene
            .ok("approval::resolve", json!({"session_id": "s_a", "function_call_id": "c_deny", "decision": "deny", "reason": DENY_REASON}))
            .await;
        let e = resolved(&gone, "c_deny").await;
        assert_eq!((e["outcome"].clone(), who(&e)), (json!("deny"), json!({"kind": "human", "via": "resolve", "caller": probe})));

        // The link's POST → human / link, caller "link".
        held(scene, "s_a", "c_link", "demo::echo").await;
        let url = link_for(&created, "c_link").await;
        let r = l.decide(&url, json!({"decision": "allow"})).await;
        assert_eq!(r.status(), 200);
        let e = resolved(&gone, "c_link").await;
        assert_eq!(who(&e), json!({"kind": "human", "via": "link", "caller": "link"}));

        // Expiry → timeout / timer.
        held(scene, "s_a", "c_time", "coder::write").await;
        let e = resolved(&gone, "c_time").await;
        assert_eq!((e["outcome"].clone(), who(&e)), (json!("timeout"), json!({"kind": "timeout", "via": "timer"})));

        // harness::turn-completed → lifecycle / turn_completed.
        held(scene, "s_b", "c_turn", "demo::echo").await;
        scene.harness.complete_turn("s_b", "t_s_b", "completed").await;
        let e = resolved(&gone, "c_turn").await;
        assert_eq!((e["outcome"].clone(), who(&e)), (json!("aborted"), json!({"kind": "lifecycle", "via": "turn_completed"})));

        // session::deleted → lifecycle / session_deleted.
        held(scene, "s_c", "c_sess", "demo::echo").await;
        scene.sessions.delete("s_c").await;
        let e = resolved(&gone, "c_sess").await;
        assert_eq!(who(&e), json!({"kind": "lifecycle", "via": "session_deleted"}));

        // A folder prompt replacing a function hold → lifecycle / replaced.
        held(scene, "s_d", "c_rep", "shell::read").await;
        let watch = json!({"point": "post_trigger", "session_id": "s_d", "turn_id": "t_s_d", "step": 1, "depth": 0,
            "metadata": {"working_dir": "/w/s_d"},
            "call": {"id": "c_rep", "function_id": "shell::read", "arguments": {"path": "/data/a/f"}},
            "result": {"function_call_id": "c_rep", "function_id": "shell::read", "is_error": true,
                "content": [{"type": "text", "text": "x"}],
                "details": {"error": {"code": "S215", "message": "path escapes the fs jail roots [/w/s_d]: /data/a/f grant_hint={\"v\":1,\"dir\":\"/data/a\",\"path\":\"/data/a/f\",\"code\":\"S215\"}"}}}});
        assert_eq!(scene.ok("approval::grant-watch", watch).await, json!({"decision": "hold"}));
        let e = resolved(&gone, "c_rep").await;
        assert_eq!((e["reason"].clone(), who(&e)), (json!("replaced"), json!({"kind": "lifecycle", "via": "replaced"})));

        // A release whose answer was lost and that the harness cannot
        // explain (no harness::status) → unknown, named after its decider.
        held(scene, "s_e", "c_unk", "demo::echo").await;
        scene.harness.fault_resolves(ResolveFault::LoseReply, 1);
        let out = scene
            .ok("approval::resolve", json!({"session_id": "s_e", "function_call_id": "c_unk", "decision": "allow"}))
            .await;
        assert_eq!(out["unknown"], true, "{out}");
        let e = resolved(&gone, "c_unk").await;
        assert_eq!((e["outcome"].clone(), who(&e)), (json!("unknown"), json!({"kind": "human", "via": "resolve", "caller": probe})));

        // The decision log's function is human-only now: a policy denial.
        let out = scene
            .harness
            .call(CallSpec::new("s_a", "t_s_a", "c_log", LOG_FN, json!({})))
            .await;
        assert!(matches!(out, CallState::Denied { .. }), "{out:?}");
        let eval = scene
            .ok("approval::evaluate", json!({"session_id": "s_a", "function_id": LOG_FN}))
            .await;
        assert_eq!((eval["verdict"].clone(), eval["rule_id"].clone()), (json!("deny"), json!("human_only_function")), "{eval}");

        // Every denial the model read leads with a typed lead: policy, a
        // human, a timeout here.
        assert_eq!(scene.harness.unled_denials(), Vec::<String>::new());
        let leads: Vec<&str> = scene
            .harness
            .gate_denials()
            .iter()
            .filter_map(|text| model::denial_lead(text))
            .collect();
        for lead in [model::DENIAL_LEADS[0], model::DENIAL_LEADS[1], model::DENIAL_LEADS[3]] {
            assert!(leads.contains(&lead), "no denial led with {lead:?}: {:?}", scene.harness.gate_denials());
        }

        // The decision log: one record per removal, as pending-resolved
        // said it, and one per gate verdict; no secret, no human's text.
        let removals = gone.events();
        let holds = 8; // c_res c_deny c_link c_time c_turn c_sess c_rep c_unk
        let expected = removals.len() + holds + 1; // + the policy deny
        assert!(
            eventually(WAIT, || scene.targets.payloads(LOG_FN).len() >= expected).await,
            "decision log: {} records, expected {expected}: {:#?}",
            scene.targets.payloads(LOG_FN).len(),
            scene.targets.payloads(LOG_FN)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let log = scene.targets.payloads(LOG_FN);
        assert_eq!(log.len(), expected, "{log:#?}");
        for e in &removals {
            let matching = log
                .iter()
                .filter(|r| {
                    r["function_call_id"] == e["function_call_id"]
                        && r["decision"] == e["outcome"]
                        && r["decided_by"] == e["decided_by"]
                })
                .count();
            assert_eq!(matching, 1, "one log record for {e}: {log:#?}");
        }
        let verdicts: Vec<(&str, &str)> = log
            .iter()
            .filter(|r| r["decided_by"]["kind"] == "policy")
            .map(|r| {
                assert_eq!(r["decided_by"]["via"], "gate", "{r}");
                (
                    r["decision"].as_str().unwrap_or_default(),
                    r["rule_id"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(verdicts.iter().filter(|(d, _)| *d == "hold").count(), holds, "{verdicts:?}");
        assert!(verdicts.contains(&("hold", "no_match")), "{verdicts:?}");
        assert!(verdicts.contains(&("hold", "?coder::write")), "{verdicts:?}");
        assert!(verdicts.contains(&("deny", "human_only_function")), "{verdicts:?}");
        let text = serde_json::to_string(&log).unwrap();
        for secret in [SECRET, "SECRET-DENY", "4242"] {
            assert!(!text.contains(secret), "the log carries {secret}: {text}");
        }
        let health = scene.ok("approval::health", json!({})).await;
        let counts = &health["decision_log"];
        assert_eq!(counts["on"], true, "{health}");
        assert_eq!(counts["dropped"], 0, "{health}");
        assert_eq!(counts["errors"], 0, "{health}");
        assert!(counts["sent"].as_u64().unwrap_or(0) >= expected as u64, "{health}");
    })
    .await;
}

#[tokio::test]
async fn rule_23_a_caller_cannot_forge_its_worker_id() {
    on_each_engine("rule_23_forged_caller", |engine| async move {
        let scene = Scene::start(engine).await;
        let gone = scene
            .sink("fc-resolved", "approval::pending-resolved", json!({}))
            .await;
        let probe_id = worker_id(&scene, "probe").await;
        held(&scene, "s_f", "c_f", "demo::echo").await;
        // The payload claims another worker; the engine stamps the sender's
        // own id over it before the worker sees it.
        scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_f", "function_call_id": "c_f", "decision": "allow",
                       "_caller_worker_id": "w-forged"}),
            )
            .await;
        let e = resolved(&gone, "c_f").await;
        let caller = &e["decided_by"]["caller"];
        assert_ne!(caller["worker_id"], "w-forged", "{e}");
        assert_eq!(caller["worker_id"], json!(probe_id), "{e}");
        assert_eq!(caller["worker_name"], "probe", "{e}");
    })
    .await;
}

#[tokio::test]
async fn rule_23_a_reconcile_is_decided_by_the_lifecycle() {
    on_each_engine("rule_23_reconcile", |engine: EngineFixture| async move {
        // A record of a call today's harness does not hold, written long
        // ago: a reconcile removes it.
        let seeder = engine.client("seeder").await;
        let record = json!({"session_id": "s_r", "turn_id": "t_r", "function_call_id": "c_r",
            "function_id": "demo::echo", "kind": "function", "arguments_excerpt": {}, "pending_at": 1000, "depth": 0});
        approval_gate_testkit::fixture::call(
            &seeder,
            "state::set",
            json!({"scope": approval_gate::bucket_scope("s_r", "c_r"), "key": "s_r/c_r", "value": record}),
        )
        .await
        .expect("seeded");
        let seed = json!({"decision_log": {"function_id": LOG_FN}});
        let scene = Scene::start_seeded(engine, HarnessOptions::generation(Generation::G2), Some(seed)).await;
        // The session has a turn now, and the harness holds nothing of it;
        // harness::ready asks the worker to reconcile.
        scene.harness.start_turn("s_r", "t_now").await;
        scene.harness.announce_ready().await;
        assert!(
            eventually(WAIT * 2, || scene
                .targets
                .payloads(LOG_FN)
                .iter()
                .any(|r| r["function_call_id"] == "c_r"))
            .await,
            "no log record of the reconciled call: {:?}",
            scene.targets.payloads(LOG_FN)
        );
        let log = scene.targets.payloads(LOG_FN);
        let r = log.iter().find(|r| r["function_call_id"] == "c_r").unwrap();
        assert_eq!(r["decision"], "aborted", "{r}");
        assert_eq!(r["rule_id"], "not_held", "{r}");
        assert_eq!(r["decided_by"]["kind"], "lifecycle", "{r}");
        assert_eq!(r["decided_by"]["via"], "reconcile", "{r}");
        assert!(scene.inbox().await.is_empty());
    })
    .await;
}
