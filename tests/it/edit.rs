//! Edit, then approve (contract §28): a human fixes a held call. The held
//! call is denied with the call to make instead; the model makes it; a
//! one-shot grant lets exactly that call through once. Refusals leave the
//! call held; races end in exactly one outcome and no call runs twice.

use std::time::Duration;

use approval_gate_testkit::harness::{
    CallSpec, CallState, Generation, HarnessOptions, ResolveFault,
};
use serde_json::{json, Value};

use crate::common::*;

/// Now, in ms since the epoch (the grants' `expires_at`).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

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

each_generation! {
    async fn rule_28_1_a_restart_mid_release_takes_the_grant_back_and_a_confirmed_edit_keeps_it(generation) {
        on_each_engine(&label("rule_28_edit_restart", generation), |engine| async move {
            let mut seed = seed();
            seed["resolve_wait_ms"] = json!(500);
            let mut scene = Scene::start_seeded(engine, HarnessOptions::generation(generation), Some(seed)).await;
            // Confirmed before the restart: the grant outlives it.
            let kept = held("s_k", "c1");
            scene.hold(kept.clone()).await;
            let answer = edit(&scene, "s_k", "c1", edited()).await.expect("the edit is taken");
            assert_eq!(answer["resolved"], true, "{answer}");
            // Under way at the restart: the harness never answers the
            // denial (the call stays held there), and the worker stops.
            let lost = held("s_h", "c1");
            scene.hold(lost.clone()).await;
            scene.harness.fault_resolves(ResolveFault::Hang, 1);
            let answer = edit(&scene, "s_h", "c1", edited()).await.expect("the edit is under way");
            assert_eq!(answer, json!({"resolved": false, "releasing": true}));
            let unused = |all: Vec<Value>| all.into_iter().filter(|g| g["made_on"] == "c1" && g.get("used_by").is_none()).count();
            assert_eq!(unused(grants(&scene, "s_h").await), 1, "written before the release");
            assert_eq!(scene.get_pending("s_h", "c1").await["pending"]["releasing"], true);
            scene.restart_worker().await;
            scene.wait_for_gate_binding().await;
            // The boot's recovery settles the release without a
            // confirmation: the grant is taken back.
            let mut gone = false;
            for _ in 0..100 {
                if unused(grants(&scene, "s_h").await) == 0 {
                    gone = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(gone, "the recovered edit left its grant: {:?}", grants(&scene, "s_h").await);
            // The edited call is judged as usual: held, nothing ran.
            let made = CallSpec { call_id: "c2".into(), arguments: edited(), ..lost.clone() };
            let out = scene.harness.call(made).await;
            assert!(out.is_held(), "{out:?}");
            assert!(scene.harness.runs().iter().all(|r| r.session_id != "s_h"), "{:?}", scene.harness.runs());
            // The confirmed edit's call continues once after the restart.
            let out = scene.harness.follow_denial(&kept, "c2").await.expect("the model makes the call");
            assert!(completed(&out), "{out:?}");
            let runs: Vec<_> = scene.harness.runs().into_iter().filter(|r| r.session_id == "s_k").collect();
            assert_eq!(runs.len(), 1, "{runs:?}");
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
async fn rule_28_1_an_edit_onto_a_protected_path_is_refused_at_once_read_from_the_stamped_root() {
    on_each_engine("rule_28_protected_edit", |engine| async move {
        let mut seed = seed();
        seed["protected_paths"] = json!(["/w/s_pp/secret/**"]);
        let scene = Scene::start_seeded(
            engine,
            HarnessOptions::generation(Generation::G2),
            Some(seed),
        )
        .await;
        let first = CallSpec::new(
            "s_pp",
            "t_s_pp",
            "c1",
            "shell::run",
            json!({"command": "ls"}),
        )
        .with_fs_root("/w/s_pp");
        scene.hold(first.clone()).await;
        let shown = scene.get_pending("s_pp", "c1").await["pending"].clone();
        assert_eq!(shown["fs_scope"]["root"], "/w/s_pp", "{shown}");
        // A relative path that is protected only once read from the turn's
        // root: no grant would let it through, so the edit is refused now.
        let err = edit(&scene, "s_pp", "c1", json!({"command": "cat secret/key"}))
            .await
            .expect_err("refused");
        assert_eq!(code_of(&err), "approval/invalid_payload", "{err}");
        assert!(message_of(&err).contains("protected_path"), "{err}");
        assert!(scene
            .harness
            .state("s_pp", "c1")
            .is_some_and(|s| s.is_held()));
        assert!(grants(&scene, "s_pp").await.is_empty());
        // Elsewhere in the root, the edit is taken and its call runs once.
        let answer = edit(&scene, "s_pp", "c1", json!({"command": "cat notes/key"}))
            .await
            .expect("the edit is taken");
        assert_eq!(answer["resolved"], true, "{answer}");
        let out = scene
            .harness
            .follow_denial(&first, "c2")
            .await
            .expect("the model makes the call");
        assert!(completed(&out), "{out:?}");
        assert_eq!(scene.harness.runs_of("shell::run").len(), 1);
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

/// Trials of each race: enough to meet both orders of each; the grant
/// store's own claim is tried 500 times as a unit test
/// (`src/edits/store.rs`).
const RACE_TRIALS: usize = 20;
/// Trials in flight at once (each in a session of its own).
const RACE_AT_ONCE: usize = 5;
/// No trial starts after this much time: the count and the time both bound
/// a race test.
const RACE_BUDGET: Duration = Duration::from_secs(40);
/// The hold's deadline in the races against the timeout.
const RACE_TIMEOUT_MS: u64 = 3000;

/// Runs `trial` for 0..RACE_TRIALS, RACE_AT_ONCE at a time, until the
/// budget is spent; answers how many ran and what each one ended in.
async fn trials<F, Fut>(name: &str, trial: F) -> Vec<&'static str>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = &'static str>,
{
    use futures_util::stream::{self, StreamExt};
    let until = std::time::Instant::now() + RACE_BUDGET;
    let ended: Vec<&'static str> = stream::iter(0..RACE_TRIALS)
        .filter(|_| std::future::ready(std::time::Instant::now() < until))
        .map(&trial)
        .buffer_unordered(RACE_AT_ONCE)
        .collect()
        .await;
    let mut counts = std::collections::BTreeMap::new();
    for outcome in &ended {
        *counts.entry(*outcome).or_insert(0) += 1;
    }
    eprintln!("{name}: {} trials, outcomes {counts:?}", ended.len());
    assert!(
        ended.len() >= RACE_AT_ONCE,
        "{name}: only {} trials ran within {RACE_BUDGET:?}",
        ended.len()
    );
    ended
}

/// The runs of a session's calls.
fn runs_in(scene: &Scene, sid: &str) -> usize {
    scene
        .harness
        .runs()
        .into_iter()
        .filter(|r| r.session_id == sid)
        .count()
}

#[tokio::test]
async fn rule_28_an_edit_racing_another_humans_allow_the_timeout_and_the_turns_end_has_one_outcome()
{
    on_each_engine("rule_28_races", |engine| async move {
        let mut seed = seed();
        seed["pending_timeout_ms"] = json!(RACE_TIMEOUT_MS);
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed)).await;
        let resolved = scene
            .sink("race-resolved", "approval::pending-resolved", json!({}))
            .await;
        let (scene, resolved) = (&scene, &resolved);
        // Against another human's allow.
        trials("edit vs allow", |trial| async move {
            let sid = format!("s_a{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            // The allow starts a little later trial by trial (the edit has
            // more to do before its claim), so both orders are met.
            let allow = async {
                tokio::time::sleep(Duration::from_millis(3 * (trial as u64 % 6))).await;
                scene
                    .call(
                        "approval::resolve",
                        json!({"session_id": sid, "function_call_id": "c1", "decision": "allow"}),
                    )
                    .await
            };
            let (edited_answer, _) = tokio::join!(edit(scene, &sid, "c1", edited()), allow);
            let events = settle(scene, resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = runs_in(scene, &sid);
            assert_eq!(
                runs, 1,
                "{sid}: exactly one call ran: {events:?} {edited_answer:?} {followed:?}"
            );
            match events[0]["outcome"].as_str() {
                Some("deny") => {
                    assert!(followed.as_ref().is_some_and(completed), "{followed:?}");
                    "edit"
                }
                Some("allow") => {
                    assert!(followed.is_none(), "{followed:?}");
                    "allow"
                }
                other => panic!("{sid}: {other:?}"),
            }
        })
        .await;
        // Against the timeout: the edit lands around the deadline.
        trials("edit vs timeout", |trial| async move {
            let sid = format!("s_x{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let around = RACE_TIMEOUT_MS - 150 + 25 * (trial as u64 % 8);
            tokio::time::sleep(Duration::from_millis(around)).await;
            let _ = edit(scene, &sid, "c1", edited()).await;
            let events = settle(scene, resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = runs_in(scene, &sid);
            match (events[0]["outcome"].as_str(), events[0]["edited"] == true) {
                (Some("deny"), true) => {
                    assert!(followed.as_ref().is_some_and(completed), "{followed:?}");
                    assert_eq!(runs, 1, "{sid}");
                    "edit"
                }
                (Some("timeout"), false) => {
                    assert!(followed.is_none(), "{followed:?}");
                    assert_eq!(runs, 0, "{sid}");
                    "timeout"
                }
                other => panic!("{sid}: {other:?} {events:?}"),
            }
        })
        .await;
        // Against the turn's end.
        trials("edit vs turn end", |trial| async move {
            let sid = format!("s_t{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let ended = async {
                tokio::time::sleep(Duration::from_millis(3 * (trial as u64 % 6))).await;
                scene
                    .harness
                    .complete_turn(&sid, &first.turn_id, "cancelled")
                    .await
            };
            let (_, _) = tokio::join!(edit(scene, &sid, "c1", edited()), ended);
            let events = settle(scene, resolved, &sid, "c1").await;
            let followed = scene.harness.follow_denial(&first, "c2").await;
            let runs = runs_in(scene, &sid);
            match (events[0]["outcome"].as_str(), events[0]["edited"] == true) {
                (Some("deny"), true) => {
                    assert!(runs <= 1, "{sid}: {runs}");
                    "edit"
                }
                (Some("aborted"), false) => {
                    assert!(followed.is_none(), "{followed:?}");
                    assert_eq!(runs, 0, "{sid}");
                    "aborted"
                }
                other => panic!("{sid}: {other:?} {events:?}"),
            }
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn rule_28_two_identical_parallel_uses_let_exactly_one_through() {
    on_each_engine("rule_28_parallel_uses", |engine| async move {
        let scene = Scene::start_seeded(engine, HarnessOptions::default(), Some(seed())).await;
        let scene = &scene;
        trials("parallel uses", |trial| async move {
            let sid = format!("s_p{trial}");
            let first = held(&sid, "c1");
            scene.hold(first.clone()).await;
            let answer = edit(scene, &sid, "c1", edited())
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
            assert_eq!(runs_in(scene, &sid), 1, "{sid}");
            if completed(&a) {
                "first"
            } else {
                "second"
            }
        })
        .await;
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
        // A choice of the grant's life, ten minutes chosen.
        assert!(page.contains(r#"<select id="edit-ttl" name="ttl_ms">"#), "{page}");
        assert!(
            page.contains(r#"<option value="600000" selected>"#),
            "the default is chosen: {page}"
        );
        // A life that is not one: refused, the call stays held.
        for (body, named) in [
            (json!({"decision": "edit", "arguments": edited(), "ttl_ms": 0}), "ttl_ms"),
            (json!({"decision": "edit", "arguments": edited(), "ttl_ms": -5}), "ttl_ms"),
            (json!({"decision": "edit", "arguments": edited(), "ttl_ms": "soon"}), "ttl_ms"),
            (json!({"decision": "deny", "ttl_ms": 60000}), "edit only"),
        ] {
            let refused = l.decide(&url, body.clone()).await;
            assert_eq!(refused.status().as_u16(), 400, "{body}");
            let answer: Value = refused.json().await.expect("json");
            assert!(
                answer["error"]["message"].as_str().is_some_and(|m| m.contains(named)),
                "{body}: {answer}"
            );
        }
        assert!(grants(&l.scene, "s_l").await.is_empty());
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
        let before = now_ms();
        let taken = l
            .decide(
                &url,
                json!({"decision": "edit", "arguments": edited(), "reason": "no force", "ttl_ms": 60000}),
            )
            .await;
        assert_eq!(taken.status().as_u16(), 200);
        let body: Value = taken.json().await.expect("json");
        assert_eq!(body["resolved"], true, "{body}");
        // The grant lives the minute chosen.
        let made = grants(&l.scene, "s_l").await;
        assert_eq!(made.len(), 1, "{made:?}");
        let ends = made[0]["expires_at"].as_u64().expect("expires_at");
        assert!(
            (before + 60_000..=now_ms() + 60_000).contains(&ends),
            "{made:?}"
        );
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
        // A life longer than the configuration allows is capped by
        // edit_ttl_max_ms (an hour by default).
        l.scene.hold(held("s_l", "c5")).await;
        let url = l.approval_url("s_l", "c5").await;
        let before = now_ms();
        let taken = l
            .decide(
                &url,
                json!({"decision": "edit", "arguments": {"path": "README3"}, "ttl_ms": 86_400_000u64}),
            )
            .await;
        assert_eq!(taken.status().as_u16(), 200);
        let capped: Vec<Value> = grants(&l.scene, "s_l")
            .await
            .into_iter()
            .filter(|g| g["made_on"] == "c5")
            .collect();
        assert_eq!(capped.len(), 1, "{capped:?}");
        let ends = capped[0]["expires_at"].as_u64().expect("expires_at");
        assert!(
            (before + 3_600_000..=now_ms() + 3_600_000).contains(&ends),
            "{capped:?}"
        );
    })
    .await;
}
