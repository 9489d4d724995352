//! Edit, then approve (contract §28): a human fixes a held call. The held
//! call is denied with the call to make instead; the model makes it; a
//! one-shot grant lets exactly that call through once. Refusals leave the
//! call held; races end in exactly one outcome and no call runs twice.

use std::time::Duration;

use approval_gate_testkit::harness::{CallSpec, CallState, HarnessOptions};
use serde_json::{json, Value};

use crate::common::*;

/// The decision log's function (a target the scene serves).
const LOG_FN: &str = "demo::other";

/// `demo::echo` holds by default; a path under `/etc/` is denied by a rule.
/// (Three rules: a scene's `jail_shell_to_srv` waits for its own two.)
fn seed() -> Value {
    json!({
        "rules": ["!approval::*",
            {"function": "demo::echo", "action": "deny", "rule_id": "no-etc",
             "args": {"path": {"prefix": "/etc/"}}},
            "?deploy::*"],
        "decision_log": {"function_id": LOG_FN}
    })
}

/// The held call every case edits: almost right, with a `force` too many.
fn held(sid: &str, cid: &str) -> CallSpec {
    CallSpec::new(
        sid,
        format!("t_{sid}"),
        cid,
        "demo::echo",
        json!({"path": "README", "force": true}),
    )
}

/// The edit every case makes: the same call without `force`.
fn edited() -> Value {
    json!({"path": "README"})
}

async fn edit(
    scene: &Scene,
    sid: &str,
    cid: &str,
    arguments: Value,
) -> Result<Value, iii_sdk::Error> {
    scene
        .call(
            "approval::resolve",
            json!({"session_id": sid, "function_call_id": cid, "decision": "edit", "arguments": arguments}),
        )
        .await
}

fn completed(out: &CallState) -> bool {
    matches!(out, CallState::Completed { .. })
}

/// The session's edit grants as stored (`approval_edits`).
async fn grants(scene: &Scene, sid: &str) -> Vec<Value> {
    scene
        .scope("approval_edits")
        .await
        .into_iter()
        .filter(|v| v["session_id"] == sid)
        .flat_map(|v| v["grants"].as_array().cloned().unwrap_or_default())
        .collect()
}

each_generation! {
    async fn rule_28_the_model_follows_the_denial_and_the_edited_call_continues_once(generation) {
        on_each_engine(&label("rule_28_edit_flow", generation), |engine| async move {
            let scene = Scene::start_seeded(engine, HarnessOptions::generation(generation), Some(seed())).await;
            let resolved = scene.sink("edit-resolved", "approval::pending-resolved", json!({})).await;
            let first = held("s_e", "c1");
            scene.hold(first.clone()).await;
            let answer = edit(&scene, "s_e", "c1", edited()).await.expect("the edit is taken");
            assert_eq!(answer["resolved"], true, "{answer}");
            // The held call was denied with the call to make instead.
            let state = scene.harness.state("s_e", "c1").expect("a state");
            let text = state.answer_text().expect("an answer");
            assert!(text.starts_with("Denied by a human:"), "{text}");
            assert!(
                text.ends_with(r#"call demo::echo with these arguments instead: {"path":"README"}"#),
                "{text}"
            );
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events[0]["outcome"], "deny", "{events:?}");
            assert_eq!(events[0]["edited"], true, "{events:?}");
            assert!(scene.harness.runs().is_empty(), "nothing ran yet");
            // evaluate names the grant for exactly that call.
            let evaluated = scene
                .ok("approval::evaluate", json!({"session_id": "s_e", "function_id": "demo::echo", "arguments": edited()}))
                .await;
            assert_eq!(evaluated["edit_grant"]["made_on"], "c1", "{evaluated}");
            let other = scene
                .ok("approval::evaluate", json!({"session_id": "s_e", "function_id": "demo::echo", "arguments": {"path": "README2"}}))
                .await;
            assert!(other.get("edit_grant").is_none(), "{other}");
            // The model follows the denial: the edited call continues, once.
            let out = scene.harness.follow_denial(&first, "c2").await.expect("the model makes the call");
            assert!(completed(&out), "{out:?}");
            let runs = scene.harness.runs_of("demo::echo");
            assert_eq!(runs.len(), 1, "{runs:?}");
            assert_eq!(runs[0].arguments, edited());
            // A redelivery of the consuming call continues again.
            let again = CallSpec { call_id: "c2".into(), arguments: edited(), ..first.clone() };
            assert!(completed(&scene.harness.call(again).await));
            // A second identical call and a call differing in one value are
            // judged as usual: held.
            let second = CallSpec { call_id: "c3".into(), arguments: edited(), ..first.clone() };
            assert!(scene.harness.call(second).await.is_held());
            let differs = CallSpec { call_id: "c4".into(), arguments: json!({"path": "README2"}), ..first.clone() };
            assert!(scene.harness.call(differs).await.is_held());
            // The decision log records the use as a human's, via the edit.
            let logged = eventually(WAIT, || {
                scene.targets.payloads(LOG_FN).iter().any(|r| {
                    r["function_call_id"] == "c2"
                        && r["decision"] == "continue"
                        && r["decided_by"]["kind"] == "human"
                        && r["decided_by"]["via"] == "edit"
                })
            })
            .await;
            assert!(logged, "{:#?}", scene.targets.payloads(LOG_FN));
        })
        .await;
    }
}

#[tokio::test]
async fn rule_28_refused_edits_leave_the_call_held() {
    on_each_engine("rule_28_refusals", |engine| async move {
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed())).await;
        scene.hold(held("s_r", "c1")).await;
        let shown = scene.get_pending("s_r", "c1").await["pending"].clone();
        let cases = [
            (json!({"path": "/etc/shadow"}), "no-etc"),
            (json!({"path": "<redacted>"}), "<redacted>"),
            (json!({"path": "READ…[+12 chars]"}), "clip mark"),
            (
                json!({"path": "README", "x": [{"<truncated>": 3}]}),
                "<truncated>",
            ),
        ];
        for (arguments, named) in cases {
            let err = edit(&scene, "s_r", "c1", arguments.clone())
                .await
                .expect_err("a refused edit");
            assert_eq!(
                code_of(&err),
                "approval/invalid_payload",
                "{arguments}: {err}"
            );
            assert!(message_of(&err).contains(named), "{arguments}: {err}");
        }
        // The call is still held, untouched, and no grant was written.
        assert!(scene
            .harness
            .state("s_r", "c1")
            .is_some_and(|s| s.is_held()));
        assert_eq!(scene.get_pending("s_r", "c1").await["pending"], shown);
        assert!(grants(&scene, "s_r").await.is_empty());
        assert!(scene.harness.runs().is_empty());
        // A folder prompt cannot be edited.
        scene
            .register_shell_config(json!({"fs": {"host_roots": ["/srv"]}}))
            .await;
        scene.jail_shell_to_srv().await;
        let prompt = CallSpec::new(
            "s_f",
            "t_s_f",
            "c9",
            "shell::read",
            json!({"path": "/data/f"}),
        )
        .with_working_dir("/w/s_f")
        .with_fs_root("/w/s_f");
        assert!(scene.harness.call(prompt).await.is_held());
        let kind = scene.get_pending("s_f", "c9").await["pending"]["kind"].clone();
        assert!(
            kind == "filesystem_access" || kind == "folder_access",
            "{kind}"
        );
        let err = edit(&scene, "s_f", "c9", json!({"path": "/srv/f"}))
            .await
            .expect_err("a folder prompt's edit");
        assert_eq!(code_of(&err), "approval/invalid_payload", "{err}");
        assert!(message_of(&err).contains("folder"), "{err}");
        assert!(scene
            .harness
            .state("s_f", "c9")
            .is_some_and(|s| s.is_held()));
    })
    .await;
}

#[tokio::test]
async fn rule_28_the_ttl_ends_the_grant_and_an_unmade_call_runs_nothing() {
    on_each_engine("rule_28_ttl", |engine| async move {
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed())).await;
        let first = held("s_t", "c1");
        scene.hold(first.clone()).await;
        let answer = scene
            .ok(
                "approval::resolve",
                json!({"session_id": "s_t", "function_call_id": "c1", "decision": "edit",
                       "arguments": edited(), "ttl_ms": 1000}),
            )
            .await;
        assert_eq!(answer["resolved"], true, "{answer}");
        assert_eq!(grants(&scene, "s_t").await.len(), 1);
        // The model never makes the call: nothing runs.
        tokio::time::sleep(Duration::from_millis(1300)).await;
        assert!(scene.harness.runs().is_empty());
        // Made after the TTL: judged as usual.
        let out = scene
            .harness
            .follow_denial(&first, "c2")
            .await
            .expect("the model makes the call");
        assert!(out.is_held(), "{out:?}");
        assert!(scene.harness.runs().is_empty());
        // A new edit; the session's purge takes its grant.
        scene.hold(held("s_t", "c5")).await;
        edit(&scene, "s_t", "c5", edited())
            .await
            .expect("the edit is taken");
        assert!(!grants(&scene, "s_t").await.is_empty());
        scene.sessions.delete("s_t").await;
        let gone = async {
            for _ in 0..100 {
                if grants(&scene, "s_t").await.is_empty() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            false
        };
        assert!(gone.await, "the session's purge left its edit grants");
    })
    .await;
}

/// How a raced held call ended: the runs of its function and its events.
async fn settle(scene: &Scene, resolved: &Sink, sid: &str, cid: &str) -> Vec<Value> {
    assert!(
        eventually(WAIT * 2, || resolved
            .events()
            .iter()
            .any(|e| e["session_id"] == sid && e["function_call_id"] == cid))
        .await,
        "{sid}/{cid}: no pending-resolved"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mine: Vec<Value> = resolved
        .events()
        .into_iter()
        .filter(|e| e["session_id"] == sid && e["function_call_id"] == cid)
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "{sid}/{cid}: exactly one pending-resolved: {mine:?}"
    );
    // No unused grant outlives an edit that did not go through.
    let edited = mine[0]["edited"] == true;
    let unused: Vec<Value> = grants(scene, sid)
        .await
        .into_iter()
        .filter(|g| g["made_on"] == cid && g.get("used_by").is_none())
        .collect();
    if !edited {
        let removed = async {
            for _ in 0..60 {
                if grants(scene, sid)
                    .await
                    .iter()
                    .all(|g| !(g["made_on"] == cid && g.get("used_by").is_none()))
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            false
        };
        assert!(
            removed.await,
            "{sid}/{cid}: an edit that lost left its grant: {unused:?}"
        );
    }
    mine
}

#[tokio::test]
async fn rule_28_an_edit_racing_another_humans_allow_the_timeout_and_the_turns_end_has_one_outcome()
{
    on_each_engine("rule_28_races", |engine| async move {
        let mut seed = seed();
        seed["pending_timeout_ms"] = json!(1000);
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed)).await;
        let resolved = scene
            .sink("race-resolved", "approval::pending-resolved", json!({}))
            .await;
        for trial in 0..3 {
            // Against another human's allow.
            let sid = format!("s_a{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let allow = scene.call(
                "approval::resolve",
                json!({"session_id": sid, "function_call_id": "c1", "decision": "allow"}),
            );
            let (edited_answer, _) = tokio::join!(edit(&scene, &sid, "c1", edited()), allow);
            let events = settle(&scene, &resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = scene
                .harness
                .runs()
                .into_iter()
                .filter(|r| r.session_id == sid)
                .count();
            assert_eq!(
                runs, 1,
                "{sid}: exactly one call ran: {events:?} {edited_answer:?} {followed:?}"
            );
            match events[0]["outcome"].as_str() {
                Some("deny") => assert!(followed.as_ref().is_some_and(completed), "{followed:?}"),
                Some("allow") => assert!(followed.is_none(), "{followed:?}"),
                other => panic!("{sid}: {other:?}"),
            }

            // Against the timeout.
            let sid = format!("s_x{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            tokio::time::sleep(Duration::from_millis(950 + 25 * trial)).await;
            let _ = edit(&scene, &sid, "c1", edited()).await;
            let events = settle(&scene, &resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = scene
                .harness
                .runs()
                .into_iter()
                .filter(|r| r.session_id == sid)
                .count();
            match (events[0]["outcome"].as_str(), events[0]["edited"] == true) {
                (Some("deny"), true) => {
                    assert!(followed.as_ref().is_some_and(completed), "{followed:?}");
                    assert_eq!(runs, 1);
                }
                (Some("timeout"), false) => {
                    assert!(followed.is_none(), "{followed:?}");
                    assert_eq!(runs, 0);
                }
                other => panic!("{sid}: {other:?} {events:?}"),
            }

            // Against the turn's end.
            let sid = format!("s_t{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let ended = scene
                .harness
                .complete_turn(&sid, &first.turn_id, "cancelled");
            let (_, _) = tokio::join!(edit(&scene, &sid, "c1", edited()), ended);
            let events = settle(&scene, &resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = scene
                .harness
                .runs()
                .into_iter()
                .filter(|r| r.session_id == sid)
                .count();
            match (events[0]["outcome"].as_str(), events[0]["edited"] == true) {
                (Some("deny"), true) => assert!(runs <= 1, "{runs}"),
                (Some("aborted"), false) => {
                    assert!(followed.is_none(), "{followed:?}");
                    assert_eq!(runs, 0);
                }
                other => panic!("{sid}: {other:?} {events:?}"),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn rule_28_two_identical_parallel_uses_let_exactly_one_through() {
    on_each_engine("rule_28_parallel_uses", |engine| async move {
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed())).await;
        for trial in 0..3 {
            let sid = format!("s_p{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let answer = edit(&scene, &sid, "c1", edited())
                .await
                .expect("the edit is taken");
            assert_eq!(answer["resolved"], true, "{answer}");
            let a = CallSpec {
                call_id: "c2".into(),
                arguments: edited(),
                ..first.clone()
            };
            let b = CallSpec {
                call_id: "c3".into(),
                arguments: edited(),
                ..first.clone()
            };
            let (a, b) = tokio::join!(scene.harness.call(a), scene.harness.call(b));
            let through = [&a, &b].into_iter().filter(|o| completed(o)).count();
            let held = [&a, &b].into_iter().filter(|o| o.is_held()).count();
            assert_eq!((through, held), (1, 1), "{sid}: {a:?} {b:?}");
            let runs = scene
                .harness
                .runs()
                .into_iter()
                .filter(|r| r.session_id == sid)
                .count();
            assert_eq!(runs, 1, "{sid}");
        }
    })
    .await;
}

#[tokio::test]
async fn rule_28_edit_and_allow_on_the_link_page_takes_the_same_steps() {
    on_each_engine("rule_28_link_edit", |engine| async move {
        let l = crate::links::Links::start(
            engine,
            json!(["!approval::*",
                {"function": "demo::echo", "action": "deny", "rule_id": "no-etc",
                 "args": {"path": {"prefix": "/etc/"}}}]),
            None,
        )
        .await;
        let first = held("s_l", "c1");
        l.scene.hold(first.clone()).await;
        let url = l.approval_url("s_l", "c1").await;
        let page = l
            .http
            .get(&url)
            .send()
            .await
            .expect("GET")
            .text()
            .await
            .expect("a page");
        assert!(
            page.contains(r#"data-decision="edit""#),
            "the page offers the edit"
        );
        // Refused: the call stays held.
        let refused = l
            .decide(
                &url,
                json!({"decision": "edit", "arguments": {"path": "/etc/x"}}),
            )
            .await;
        assert_eq!(refused.status().as_u16(), 400);
        let body: Value = refused.json().await.expect("json");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("no-etc")),
            "{body}"
        );
        assert!(l
            .scene
            .harness
            .state("s_l", "c1")
            .is_some_and(|s| s.is_held()));
        // Taken: the model follows the denial, and the edited call runs once.
        let taken = l
            .decide(
                &url,
                json!({"decision": "edit", "arguments": edited(), "reason": "no force"}),
            )
            .await;
        assert_eq!(taken.status().as_u16(), 200);
        let body: Value = taken.json().await.expect("json");
        assert_eq!(body["resolved"], true, "{body}");
        let text = l
            .scene
            .harness
            .state("s_l", "c1")
            .and_then(|s| s.answer_text())
            .expect("an answer");
        assert!(
            text.starts_with("Denied by a human: no force; call demo::echo"),
            "{text}"
        );
        let out = l
            .scene
            .harness
            .follow_denial(&first, "c2")
            .await
            .expect("the model makes the call");
        assert!(completed(&out), "{out:?}");
        assert_eq!(l.scene.harness.runs_of("demo::echo").len(), 1);
    })
    .await;
}
