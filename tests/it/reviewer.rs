//! The reviewer (contract §22), end to end through the harness double and
//! the reviewer double: asked only about the default hold, in a reviewed
//! mode; its allow runs the call, its deny denies it with the reviewer's
//! lead, anything else holds it for a human with the review on the record;
//! it never overrides a human floor; the breaker sends its denials to a
//! human until a human decides; one review per call, however often the
//! hook is delivered.

use std::time::Duration;

use approval_gate_testkit::fixture::call;
use approval_gate_testkit::harness::{CallSpec, CallState};
use approval_gate_testkit::reviewer::{Answer, ReviewerDouble, REVIEW_CALL};
use serde_json::{json, Value};

use crate::common::*;

/// A scene whose configuration has a reviewer at [`REVIEW_CALL`] (with
/// `extra` merged into it) over `rules`, sessions defaulting to `auto`.
async fn reviewed_scene(
    engine: approval_gate_testkit::fixture::EngineFixture,
    answer: Answer,
    rules: Value,
    extra: Value,
) -> (Scene, ReviewerDouble) {
    let scene = Scene::start(engine).await;
    let reviewer = configure_reviewer(&scene, answer, rules, extra).await;
    (scene, reviewer)
}

/// Starts a reviewer double answering `answer` and configures the scene's
/// worker to ask it (with `extra` merged into its settings) over `rules`,
/// sessions defaulting to `auto`; returns once the worker has loaded it.
pub(crate) async fn configure_reviewer(
    scene: &Scene,
    answer: Answer,
    rules: Value,
    extra: Value,
) -> ReviewerDouble {
    let reviewer = ReviewerDouble::start(&scene.engine.url(), answer).await;
    let mut settings = json!({"function_id": REVIEW_CALL, "timeout_ms": 600});
    if let (Some(s), Some(e)) = (settings.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let value = json!({"default_mode": "auto", "rules": rules, "reviewer": settings});
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    let want = value["reviewer"]["function_id"].clone();
    assert!(
        eventually(WAIT, || w.config().to_json()["reviewer"]["function_id"]
            == want)
        .await,
        "the worker never loaded the reviewer"
    );
    reviewer
}

fn spec(sid: &str, cid: &str, fid: &str, args: Value) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, fid, args)
}

fn denial(state: &CallState) -> String {
    match state {
        CallState::Denied { reason, .. } => reason.clone(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

async fn record(scene: &Scene, sid: &str, cid: &str) -> Value {
    scene.get_pending(sid, cid).await["pending"].clone()
}

#[tokio::test]
async fn rule_22_each_answer_of_the_reviewer_and_what_the_gate_makes_of_it() {
    on_each_engine("rule_22_answers", |engine| async move {
        let (scene, reviewer) =
            reviewed_scene(engine, Answer::Allow, json!(["!approval::*"]), json!({})).await;
        scene.sessions.put(
            "s1",
            json!({"title": "Release prep", "metadata": {"team": "web"}}),
        );
        let created = scene
            .sink("reviewed-created", "approval::pending-created", json!({}))
            .await;

        // allow → the call runs, nothing is held; the reviewer saw the
        // redacted arguments, the session and the mode.
        let out = scene
            .harness
            .call(spec(
                "s1",
                "c_allow",
                "demo::echo",
                json!({"msg": "hi", "api_key": "sk-live-0123456789abcdef"}),
            ))
            .await;
        assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
        assert_eq!(scene.harness.target_runs("demo::echo"), 1);
        let asked = reviewer.reviews_of("c_allow");
        assert_eq!(asked.len(), 1, "{asked:?}");
        let input = &asked[0];
        assert_eq!(input["session_id"], "s1");
        assert_eq!(input["turn_id"], "t_s1");
        assert_eq!(input["function_id"], "demo::echo");
        assert_eq!(input["arguments"]["msg"], "hi");
        assert_eq!(input["arguments"]["api_key"], "<redacted>");
        assert_eq!(input["clipped"], false);
        assert_eq!(input["mode"], "auto");
        assert_eq!(input["session"]["title"], "Release prep");
        assert_eq!(input["session"]["metadata"], json!({"team": "web"}));
        assert_eq!(input["recent"], json!([]));

        // deny → denied with the reviewer's lead; nothing held.
        reviewer.set(Answer::Deny);
        let out = scene
            .harness
            .call(spec("s1", "c_deny", "demo::echo", json!({})))
            .await;
        let reason = denial(&out);
        assert!(reason.starts_with("Denied by the reviewer:"), "{reason}");
        assert_eq!(scene.harness.target_runs("demo::echo"), 1);
        assert!(record(&scene, "s1", "c_deny").await.is_null());
        // The next review sees the verdicts before it.
        reviewer.set(Answer::Escalate);
        let out = scene
            .harness
            .call(spec("s1", "c_esc", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "{out:?}");
        let recent = &reviewer.reviews_of("c_esc")[0]["recent"];
        assert_eq!(recent.as_array().map(Vec::len), Some(2), "{recent}");
        assert_eq!(recent[0]["verdict"], "allow");
        assert_eq!(recent[1]["verdict"], "deny");
        assert_eq!(recent[1]["outcome"], "deny");
        let held = record(&scene, "s1", "c_esc").await;
        assert_eq!(held["review"]["verdict"], "escalate", "{held}");
        assert_eq!(held["review"]["risk"], "medium");
        assert!(held["review"]["rationale"]
            .as_str()
            .is_some_and(|r| r.contains("escalate")));

        // error, timeout, garbage → held for a human, each said on the record.
        for (answer, cid, verdict) in [
            (Answer::Error, "c_err", "error"),
            (Answer::times_out(), "c_slow", "timeout"),
            (Answer::Garbage, "c_junk", "malformed"),
        ] {
            reviewer.set(answer);
            let out = scene
                .harness
                .call(spec("s1", cid, "demo::echo", json!({})))
                .await;
            assert!(out.is_held(), "{cid}: {out:?}");
            let held = record(&scene, "s1", cid).await;
            assert_eq!(held["review"]["verdict"], verdict, "{held}");
        }

        // allow of arguments the reviewer could not see whole → a human.
        reviewer.set(Answer::Allow);
        let out = scene
            .harness
            .call(spec(
                "s1",
                "c_big",
                "demo::echo",
                json!({"content": "x".repeat(100_000)}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(reviewer.reviews_of("c_big")[0]["clipped"], true);
        let held = record(&scene, "s1", "c_big").await;
        assert_eq!(held["review"]["verdict"], "allow");
        assert_eq!(held["review"]["held_because"], "clipped");

        // pending-created carries the review, once per held call.
        let events = created.wait_for(5, WAIT).await;
        assert_eq!(events.len(), 5, "{events:?}");
        assert!(events.iter().all(|e| e["review"]["verdict"].is_string()));

        // A session in a mode the reviewer does not cover: a plain hold.
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_manual", "mode": "manual"}),
            )
            .await;
        let before = reviewer.count();
        let out = scene
            .harness
            .call(spec("s_manual", "c_m", "demo::echo", json!({})))
            .await;
        assert!(out.is_held());
        assert_eq!(reviewer.count(), before, "manual sessions are not reviewed");
        assert!(record(&scene, "s_manual", "c_m")
            .await
            .get("review")
            .is_none());

        let health = scene.ok("approval::health", json!({})).await;
        let r = &health["reviewer"];
        assert_eq!(r["function_id"], REVIEW_CALL);
        assert_eq!(r["timeout_ms"], 600);
        assert_eq!(
            (
                &r["calls"],
                &r["allows"],
                &r["denies"],
                &r["escalations"],
                &r["errors"],
                &r["timeouts"]
            ),
            (
                &json!(7),
                &json!(2),
                &json!(1),
                &json!(1),
                &json!(2),
                &json!(1)
            ),
            "{r}"
        );
        assert!(r["p50_ms"].as_f64().is_some() && r["p99_ms"].as_f64().is_some());
    })
    .await;
}

#[tokio::test]
async fn rule_22_an_allowing_reviewer_never_lets_an_ask_rule_a_human_only_call_or_a_deny_rule_continue(
) {
    on_each_engine("rule_22_floors", |engine| async move {
        let rules = json!(["!approval::*", "?deploy::*", "!demo::other"]);
        let (scene, reviewer) =
            reviewed_scene(engine, Answer::Allow, rules.clone(), json!({})).await;
        // An ask rule: held for a human, no review on it.
        let out = scene
            .harness
            .call(spec("s2", "c_ask", "deploy::prod", json!({})))
            .await;
        assert!(out.is_held(), "{out:?}");
        assert!(record(&scene, "s2", "c_ask").await.get("review").is_none());
        // Human-only: the gate's own surface and the reviewer itself.
        for (cid, fid) in [("c_ho", "approval::resolve"), ("c_self", REVIEW_CALL)] {
            let out = scene.harness.call(spec("s2", cid, fid, json!({}))).await;
            let reason = denial(&out);
            assert!(
                reason.starts_with("Permission denied by policy:"),
                "{fid}: {reason}"
            );
        }
        // A deny rule.
        let out = scene
            .harness
            .call(spec("s2", "c_deny", "demo::other", json!({})))
            .await;
        assert!(denial(&out).starts_with("Permission denied by policy:"));
        // Even in full mode (ask rule first, then full): still no review.
        scene
            .ok(
                "approval::set-mode",
                json!({"session_id": "s_full", "mode": "full"}),
            )
            .await;
        let out = scene
            .harness
            .call(spec("s_full", "c_full_ask", "deploy::prod", json!({})))
            .await;
        assert!(out.is_held());
        assert_eq!(reviewer.count(), 0, "{:?}", reviewer.reviews());
        assert_eq!(scene.harness.target_runs("deploy::prod"), 0);
        let evaluated = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s2", "function_id": REVIEW_CALL}),
            )
            .await;
        assert_eq!(evaluated["verdict"], "deny", "{evaluated}");
        assert_eq!(evaluated["rule_id"], "human_only_function");
        assert!(evaluated.get("reviewer").is_none());
        // Evaluate names the reviewer where the gate would ask it, and only there.
        let evaluated = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s2", "function_id": "demo::echo"}),
            )
            .await;
        assert_eq!(evaluated["verdict"], "needs_approval", "{evaluated}");
        assert_eq!(evaluated["reviewer"], REVIEW_CALL, "{evaluated}");
        for (sid, fid) in [
            ("s2", "deploy::prod"),
            ("s_full", "deploy::prod"),
            ("s2", "demo::other"),
        ] {
            let evaluated = scene
                .ok(
                    "approval::evaluate",
                    json!({"session_id": sid, "function_id": fid}),
                )
                .await;
            assert!(
                evaluated.get("reviewer").is_none(),
                "{sid} {fid}: {evaluated}"
            );
        }
        assert_eq!(reviewer.count(), 0, "evaluate never asks the reviewer");
    })
    .await;
}

#[tokio::test]
async fn rule_22_the_breaker_trips_after_denials_in_a_row_and_a_human_decision_resets_it() {
    on_each_engine("rule_22_breaker", |engine| async move {
        let (scene, reviewer) = reviewed_scene(
            engine,
            Answer::Deny,
            json!(["!approval::*"]),
            json!({"max_consecutive_denials": 2}),
        )
        .await;
        for cid in ["d1", "d2"] {
            let out = scene
                .harness
                .call(spec("s3", cid, "demo::echo", json!({})))
                .await;
            assert!(denial(&out).starts_with("Denied by the reviewer:"), "{cid}");
        }
        // Open: the reviewer's denials go to a human.
        for cid in ["d3", "d4"] {
            let out = scene
                .harness
                .call(spec("s3", cid, "demo::echo", json!({})))
                .await;
            assert!(out.is_held(), "{cid}: {out:?}");
            let held = record(&scene, "s3", cid).await;
            assert_eq!(held["review"]["verdict"], "deny");
            assert_eq!(held["review"]["held_because"], "breaker");
        }
        // Another session's breaker is its own.
        let out = scene
            .harness
            .call(spec("s3_other", "o1", "demo::echo", json!({})))
            .await;
        assert!(denial(&out).starts_with("Denied by the reviewer:"));
        // A human decides one of the session's calls: closed again.
        let out = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s3", "function_call_id": "d3", "decision": "deny"}),
            )
            .await;
        assert_eq!(out["resolved"], true);
        let out = scene
            .harness
            .call(spec("s3", "d5", "demo::echo", json!({})))
            .await;
        assert!(
            denial(&out).starts_with("Denied by the reviewer:"),
            "after a human's decision the reviewer may deny again"
        );
        let health = scene.ok("approval::health", json!({})).await;
        assert_eq!(health["reviewer"]["held_by_breaker"], 2, "{health}");
        assert_eq!(reviewer.count(), 6);

        // Open again; a batch decision is a human's too: closed again.
        let out = scene
            .harness
            .call(spec("s3", "b1", "demo::echo", json!({})))
            .await;
        assert!(denial(&out).starts_with("Denied by the reviewer:"));
        let out = scene
            .harness
            .call(spec("s3", "b2", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "open again: {out:?}");
        let out = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s3", "turn_id": "t_s3", "decision": "deny"}),
            )
            .await;
        assert!(
            out["results"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["function_call_id"] == "b2")),
            "{out}"
        );
        let out = scene
            .harness
            .call(spec("s3", "b3", "demo::echo", json!({})))
            .await;
        assert!(
            denial(&out).starts_with("Denied by the reviewer:"),
            "after a batch decision the reviewer may deny again"
        );

        // Open again, then the session is deleted: the reviewer's memory of
        // it goes with it, and its denials are denials again.
        let out = scene
            .harness
            .call(spec("s3", "d6", "demo::echo", json!({})))
            .await;
        assert!(denial(&out).starts_with("Denied by the reviewer:"));
        let out = scene
            .harness
            .call(spec("s3", "d7", "demo::echo", json!({})))
            .await;
        assert!(out.is_held(), "open again: {out:?}");
        scene.sessions.delete("s3").await;
        // The purge runs in the background: call until a denial, bounded.
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut forgotten = false;
        for n in 0..200 {
            let out = scene
                .harness
                .call(spec("s3", &format!("after{n}"), "demo::echo", json!({})))
                .await;
            if matches!(out, CallState::Denied { .. }) {
                forgotten = true;
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(forgotten, "the deleted session's breaker was kept");
    })
    .await;
}

#[tokio::test]
async fn rule_22_a_redelivered_hook_is_reviewed_once_and_never_holds_or_announces_twice() {
    on_each_engine("rule_22_redelivery", |engine| async move {
        let (scene, reviewer) =
            reviewed_scene(engine, Answer::Escalate, json!(["!approval::*"]), json!({})).await;
        reviewer.set_delay(Duration::from_millis(200));
        let created = scene
            .sink("redelivered-created", "approval::pending-created", json!({}))
            .await;
        let hook = |cid: &str| {
            json!({
                "point": "pre_trigger", "session_id": "s4", "turn_id": "t_s4", "step": 0, "depth": 0,
                "call": {"id": cid, "function_id": "demo::echo", "arguments": {"n": 1}},
            })
        };
        // Three deliveries of one hook at once, then one more after.
        let gate = |cid: &'static str| {
            let client = scene.harness.client().clone();
            let input = hook(cid);
            async move { call(&client, "approval::gate", input).await }
        };
        let (a, b, c) = tokio::join!(gate("c_race"), gate("c_race"), gate("c_race"));
        for out in [a, b, c] {
            assert_eq!(out.expect("gate answered")["decision"], "hold");
        }
        let again = gate("c_race").await.expect("gate answered");
        assert_eq!(again["decision"], "hold");
        assert_eq!(reviewer.reviews_of("c_race").len(), 1);
        created.wait_for(1, WAIT).await;
        stay_quiet().await;
        assert_eq!(created.events().len(), 1, "{:?}", created.events());
        let inbox = scene.inbox().await;
        assert_eq!(inbox.len(), 1, "{inbox:?}");
        assert_eq!(inbox[0]["review"]["verdict"], "escalate");

        // An allow and a deny are the same answer on every delivery too.
        for (answer, cid, decision) in [
            (Answer::Allow, "c_allow", "continue"),
            (Answer::Deny, "c_deny", "deny"),
        ] {
            reviewer.set(answer);
            let (a, b) = tokio::join!(gate(cid), gate(cid));
            let later = gate(cid).await;
            for out in [a, b, later] {
                assert_eq!(out.expect("gate answered")["decision"], decision, "{cid}");
            }
            assert_eq!(reviewer.reviews_of(cid).len(), 1, "{cid}");
        }
        // The deny answer carries the reviewer's envelope beside the reason.
        let out = gate("c_deny").await.expect("gate answered");
        let reason = out["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("Denied by the reviewer:"), "{out}");
        assert_eq!(out["details"]["denied_by"], "reviewer", "{out}");
        assert_eq!(out["details"]["reason"], out["reason"]);
        assert_eq!(out["details"]["function_id"], "demo::echo");
        assert_eq!(scene.inbox().await.len(), 1);
        assert_eq!(created.events().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn rule_22_the_link_page_shows_the_approver_what_the_reviewer_said() {
    on_each_engine("rule_22_link_page", |engine| async move {
        let rules = json!(["!approval::*"]);
        let l = crate::links::Links::start(engine, rules.clone(), None).await;
        let reviewer = ReviewerDouble::start(&l.scene.engine.url(), Answer::Escalate).await;
        let mut value = crate::links::config(&l.base, rules, None);
        value["default_mode"] = json!("auto");
        value["reviewer"] = json!({"function_id": REVIEW_CALL, "timeout_ms": 600});
        l.scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": value}),
            )
            .await;
        let w = l.scene.worker.as_ref().unwrap();
        assert!(
            eventually(WAIT, || w.config().to_json()["reviewer"]["function_id"]
                == REVIEW_CALL)
            .await,
            "the worker never loaded the reviewer"
        );
        let out = l
            .scene
            .harness
            .call(spec("s_l", "c_l", "demo::echo", json!({"msg": "hi"})))
            .await;
        assert!(out.is_held(), "{out:?}");
        assert_eq!(reviewer.reviews_of("c_l").len(), 1);
        let page = l.page(&l.approval_url("s_l", "c_l").await).await;
        assert!(
            page.contains("<dd>asked for a human — risk medium</dd>"),
            "{page}"
        );
        assert!(
            page.contains("<dd>the double says escalate for demo::echo</dd>"),
            "{page}"
        );
    })
    .await;
}

#[tokio::test]
async fn rule_25_8_a_command_with_a_hidden_word_is_never_allowed_by_the_reviewer() {
    on_each_engine("rule_25_8_hidden_command", |engine| async move {
        let (scene, reviewer) =
            reviewed_scene(engine, Answer::Allow, json!(["!approval::*"]), json!({})).await;
        let created = scene
            .sink("hidden-created", "approval::pending-created", json!({}))
            .await;
        let out = scene
            .harness
            .call(spec(
                "s1",
                "c_hidden",
                "shell::exec",
                json!({"command": "PGPASSWORD= psql -h db && mysql -pSECRETpass1 db"}),
            ))
            .await;
        assert!(out.is_held(), "{out:?}");
        // The reviewer saw the programs and not the secret word, and allowed.
        let asked = reviewer.reviews_of("c_hidden");
        assert_eq!(asked.len(), 1, "{asked:?}");
        let command = asked[0]["arguments"]["command"]
            .as_str()
            .unwrap_or_default();
        assert!(!command.contains("SECRETpass1"), "{command}");
        assert!(
            command.contains("psql -h db && mysql <redacted> db"),
            "{command}"
        );
        let held = record(&scene, "s1", "c_hidden").await;
        assert_eq!(held["review"]["verdict"], "allow", "{held}");
        assert_eq!(held["review"]["held_because"], "hidden_command", "{held}");
        // The approver's excerpt keeps every program word.
        let events = created.wait_for(1, WAIT).await;
        let excerpt = events[0]["arguments_excerpt"]["command"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!excerpt.contains("SECRETpass1"), "{excerpt}");
        assert!(
            excerpt.contains("psql -h db && mysql <redacted> db"),
            "{excerpt}"
        );
    })
    .await;
}
