//! Batch decisions (contract §24): `approval::resolve-batch` decides the held
//! calls of one turn (or exactly the revisions a human saw) through the one
//! release path, skips and lists what it must not decide, and leaves exactly
//! one outcome per record whatever races it — single resolves, expiries.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, CallState};
use serde_json::{json, Value};

use crate::common::*;

async fn hold(scene: &Scene, sid: &str, turn: &str, cid: &str, fid: &str) {
    scene
        .hold(CallSpec::new(sid, turn, cid, fid, json!({"n": cid})))
        .await;
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|r| r["function_call_id"].as_str().expect("an id").to_string())
        .collect()
}

fn skipped(out: &Value) -> Vec<(String, String)> {
    out["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            (
                s["function_call_id"].as_str().unwrap().to_string(),
                s["why"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

/// Every `pending-resolved` seen, by call id.
fn outcomes(events: &[Value]) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for e in events {
        out.entry(e["function_call_id"].as_str().unwrap().to_string())
            .or_default()
            .push(e["outcome"].as_str().unwrap().to_string());
    }
    out
}

#[tokio::test]
async fn rule_24_a_batch_allows_every_held_call_of_the_turn_and_nothing_else() {
    on_each_engine("batch_turn", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene
            .sink("b-resolved", "approval::pending-resolved", json!({}))
            .await;
        for cid in ["c1", "c2", "c3"] {
            hold(&scene, "s", "t1", cid, "demo::echo").await;
        }
        hold(&scene, "s", "t2", "c9", "demo::echo").await;
        hold(&scene, "s_other", "t1", "c8", "demo::echo").await;

        let out = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s", "turn_id": "t1", "decision": "allow"}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["c1", "c2", "c3"], "in pending_at order: {out}");
        assert!(out["results"].as_array().unwrap().iter().all(|r| r["resolved"] == true), "{out}");
        assert_eq!(out["skipped"], json!([]));
        for cid in ["c1", "c2", "c3"] {
            assert!(
                matches!(scene.harness.state("s", cid), Some(CallState::Completed { .. })),
                "{cid} ran"
            );
        }
        assert!(scene.harness.state("s", "c9").is_some_and(|s| s.is_held()), "another turn");
        assert!(scene.harness.state("s_other", "c8").is_some_and(|s| s.is_held()), "another session");
        let events = resolved.wait_for(3, WAIT).await;
        stay_quiet().await;
        let seen = outcomes(&resolved.events());
        assert_eq!(seen.len(), 3, "{events:?}");
        for cid in ["c1", "c2", "c3"] {
            assert_eq!(seen[cid], ["allow"], "{cid}: exactly one outcome");
        }
        // Decided by a human, through the batch, named as the engine names
        // the caller (contract §23).
        for e in resolved.events() {
            assert_eq!(e["decided_by"]["kind"], "human", "{e}");
            assert_eq!(e["decided_by"]["via"], "batch", "{e}");
            assert!(e["decided_by"]["caller"]["worker_id"].is_string(), "{e}");
        }
        // Nothing of that turn is held any more: an empty answer.
        let again = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s", "turn_id": "t1", "decision": "deny"}),
            )
            .await;
        assert_eq!(again, json!({"results": [], "skipped": []}));

        // Bad input is an invalid payload.
        for bad in [
            json!({"session_id": "s", "decision": "allow"}),
            json!({"session_id": "s", "turn_id": "", "decision": "allow"}),
            json!({"session_id": "s/x", "turn_id": "t2", "decision": "allow"}),
            json!({"session_id": "s", "turn_id": "t2", "decision": "maybe"}),
            json!({"session_id": "s", "turn_id": "t2", "decision": "allow", "items": []}),
            json!({"session_id": "s", "turn_id": "t2", "decision": "allow",
                   "items": [{"function_call_id": "c9", "pending_at": 1}, {"function_call_id": "c9", "pending_at": 1}]}),
            json!({"session_id": "s", "turn_id": "t2", "decision": "allow", "items": [{"function_call_id": "c9"}]}),
        ] {
            let err = scene
                .call("approval::resolve-batch", bad.clone())
                .await
                .expect_err("refused");
            assert_eq!(code_of(&err), "approval/invalid_payload", "{bad}: {err:?}");
        }
        assert!(scene.harness.state("s", "c9").is_some_and(|s| s.is_held()), "untouched");
        // An agent cannot call it.
        let agent = scene
            .ok(
                "approval::evaluate",
                json!({"session_id": "s", "function_id": "approval::resolve-batch"}),
            )
            .await;
        assert_eq!(agent["rule_id"], "human_only_function");
    })
    .await;
}

#[tokio::test]
async fn rule_24_items_decide_exactly_the_revisions_the_human_saw() {
    on_each_engine("batch_items", |engine| async move {
        let scene = Scene::start(engine).await;
        let resolved = scene
            .sink("bi-resolved", "approval::pending-resolved", json!({}))
            .await;
        for cid in ["d1", "d2", "d3"] {
            hold(&scene, "s", "t", cid, "demo::echo").await;
        }
        let scene = &scene;
        let at = |cid: &str| {
            let cid = cid.to_string();
            async move {
                scene.get_pending("s", &cid).await["pending"]["pending_at"]
                    .as_u64()
                    .expect("pending_at")
            }
        };
        let (d1, d2) = (at("d1").await, at("d2").await);
        let out = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s", "turn_id": "t", "decision": "deny", "reason": "not today",
                       "items": [{"function_call_id": "d2", "pending_at": d2 + 1},
                                 {"function_call_id": "d1", "pending_at": d1},
                                 {"function_call_id": "gone", "pending_at": 5}]}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["d1"], "{out}");
        assert_eq!(out["results"][0]["resolved"], true);
        let mut why = skipped(&out);
        why.sort();
        assert_eq!(
            why,
            [
                ("d2".to_string(), "stale".to_string()),
                ("gone".to_string(), "gone".to_string())
            ]
        );
        match scene.harness.state("s", "d1") {
            Some(CallState::Delivered { result, .. }) => {
                assert_eq!(result["details"]["denied_by"], "user", "{result}");
                assert!(result.to_string().contains("not today"), "{result}");
            }
            other => panic!("d1 was not denied: {other:?}"),
        }
        for cid in ["d2", "d3"] {
            assert!(
                scene.harness.state("s", cid).is_some_and(|s| s.is_held()),
                "{cid} was not seen"
            );
        }
        resolved.wait_for(1, WAIT).await;
        stay_quiet().await;
        assert_eq!(
            outcomes(&resolved.events()),
            HashMap::from([("d1".to_string(), vec!["deny".to_string()])])
        );
    })
    .await;
}

#[tokio::test]
async fn rule_24_folder_prompts_are_skipped_on_allow_and_denied_on_deny() {
    on_each_engine("batch_folders", |engine| async move {
        let scene = Scene::start(engine).await;
        scene.jail_shell_to_srv().await;
        let folder = scene
            .harness
            .call(
                CallSpec::new("s", "t", "f1", "shell::read", json!({"path": "/data/a/f"}))
                    .with_working_dir("/w/s"),
            )
            .await;
        assert!(folder.is_held(), "{folder:?}");
        hold(&scene, "s", "t", "e1", "demo::echo").await;
        let kind = scene.get_pending("s", "f1").await["pending"]["kind"].clone();
        assert!(
            kind == "folder_access" || kind == "filesystem_access",
            "{kind}"
        );

        let out = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s", "turn_id": "t", "decision": "allow"}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["e1"], "{out}");
        assert_eq!(
            skipped(&out),
            [("f1".to_string(), "folder_prompt".to_string())]
        );
        assert!(
            scene.harness.grants("s").is_empty(),
            "no folder granted by a batch"
        );
        assert!(scene.harness.state("s", "f1").is_some_and(|s| s.is_held()));

        let out = scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s", "turn_id": "t", "decision": "deny"}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["f1"], "{out}");
        assert_eq!(out["results"][0]["resolved"], true, "{out}");
        assert!(!scene.harness.state("s", "f1").is_some_and(|s| s.is_held()));
        assert!(scene.harness.grants("s").is_empty());
    })
    .await;
}

#[tokio::test]
async fn rule_24_a_record_being_released_is_skipped_and_listed() {
    on_each_engine("batch_releasing", |engine| async move {
        let scene = Scene::start(engine).await;
        scene
            .ok(
                "configuration::set",
                json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "resolve_wait_ms": 1000}}),
            )
            .await;
        let w = scene.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().resolve_wait_ms == 1000).await);
        scene.targets.set_delay("demo::other", Duration::from_secs(3));
        hold(&scene, "s", "t", "slow", "demo::other").await;
        hold(&scene, "s", "t", "quick", "demo::echo").await;
        let single = scene.call(
            "approval::resolve",
            json!({"session_id": "s", "function_call_id": "slow", "decision": "allow"}),
        );
        let batch = async {
            let releasing = async {
                loop {
                    let shown = scene.get_pending("s", "slow").await;
                    if shown["pending"]["releasing"] == true {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            tokio::time::timeout(WAIT, releasing).await.expect("the release starts");
            scene
                .ok(
                    "approval::resolve-batch",
                    json!({"session_id": "s", "turn_id": "t", "decision": "deny"}),
                )
                .await
        };
        let (single, out) = tokio::join!(single, batch);
        assert_eq!(single.expect("resolve")["releasing"], true);
        assert_eq!(ids(&out["results"]), ["quick"], "{out}");
        assert_eq!(skipped(&out), [("slow".to_string(), "releasing".to_string())]);
        assert!(
            eventually(WAIT, || matches!(scene.harness.state("s", "slow"), Some(CallState::Completed { .. }))).await,
            "the first decision won"
        );
    })
    .await;
}

#[tokio::test]
async fn rule_24_a_batch_racing_single_resolves_and_expiries_leaves_one_outcome_each() {
    on_each_engine("batch_races", |engine| async move {
        run_batch_races(engine, 3, 10).await;
    })
    .await;
}

/// The holds' deadline in the races.
const TIMEOUT_MS: u64 = 3_000;

/// Per round: `calls` held calls of one turn with a three-second deadline;
/// around the deadline a batch allow races single denies on every other
/// call and the expiry of them all.
async fn run_batch_races(engine: EngineFixture, rounds: usize, calls: usize) {
    let scene = Scene::start(engine).await;
    let resolved = scene
        .sink("br-resolved", "approval::pending-resolved", json!({}))
        .await;
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "pending_timeout_ms": TIMEOUT_MS}}),
        )
        .await;
    let w = scene.worker.as_ref().unwrap();
    assert!(eventually(WAIT, || w.config().pending_timeout_ms == Some(TIMEOUT_MS)).await);
    let mut batch_taken: HashSet<String> = HashSet::new();
    let mut single_taken: HashSet<String> = HashSet::new();
    for round in 0..rounds {
        let (sid, turn) = (format!("s{round}"), format!("t{round}"));
        let cids: Vec<String> = (0..calls).map(|i| format!("r{round}_{i}")).collect();
        // Every hold's deadline is at least this (the holds take a while on
        // a loaded machine; the first may even expire before the last is held).
        let first = now_ms() + TIMEOUT_MS;
        for cid in &cids {
            hold(&scene, &sid, &turn, cid, "demo::echo").await;
        }
        // Round 0 before the first deadline, round 1 around it, round 2 after it.
        let at = first - 200 + 200 * round as u64;
        tokio::time::sleep(Duration::from_millis(at.saturating_sub(now_ms()))).await;
        let singles = cids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, cid)| {
                let (scene, sid) = (&scene, &sid);
                async move {
                    let out = scene
                        .ok(
                            "approval::resolve",
                            json!({"session_id": sid, "function_call_id": cid, "decision": "deny"}),
                        )
                        .await;
                    (cid.clone(), out)
                }
            });
        let batch = scene.ok(
            "approval::resolve-batch",
            json!({"session_id": sid, "turn_id": turn, "decision": "allow"}),
        );
        let (out, singles) = tokio::join!(batch, futures_util::future::join_all(singles));
        let in_results: HashSet<String> = ids(&out["results"]).into_iter().collect();
        let in_skipped: HashSet<String> = skipped(&out).into_iter().map(|(c, _)| c).collect();
        assert!(in_results.is_disjoint(&in_skipped), "{out}");
        for r in out["results"].as_array().unwrap() {
            if r["resolved"] == true {
                batch_taken.insert(r["function_call_id"].as_str().unwrap().to_string());
            }
        }
        for (cid, single) in singles {
            if single["resolved"] == true {
                assert!(
                    !batch_taken.contains(&cid),
                    "{cid} taken twice: {out} / {single}"
                );
                single_taken.insert(cid);
            }
        }
    }
    let total = rounds * calls;
    assert!(
        eventually(Duration::from_secs(15), || resolved.events().len() >= total).await,
        "{} events for {total} records",
        resolved.events().len()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let seen = outcomes(&resolved.events());
    assert_eq!(seen.len(), total);
    let mut tally: HashMap<String, usize> = HashMap::new();
    for (cid, list) in &seen {
        assert_eq!(list.len(), 1, "{cid}: {list:?}");
        let outcome = list[0].as_str();
        if batch_taken.contains(cid) {
            assert_eq!(outcome, "allow", "{cid}");
        }
        if single_taken.contains(cid) {
            assert_eq!(outcome, "deny", "{cid}");
        }
        *tally.entry(outcome.to_string()).or_default() += 1;
    }
    eprintln!("batch races: {tally:?}");
    assert!(tally.get("allow").is_some_and(|n| *n > 0), "{tally:?}");
    assert!(scene.inbox().await.is_empty());
}

/// The `data-batch` token of a call page's "Allow all" button, if offered.
fn batch_token_of(page: &str) -> Option<String> {
    let start = page.find("data-batch=\"")? + "data-batch=\"".len();
    let end = page[start..].find('"')? + start;
    Some(page[start..end].to_string())
}

#[tokio::test]
async fn rule_24_allow_all_on_a_link_page_names_exactly_the_calls_it_showed() {
    on_each_engine("batch_link", |engine| async move {
        let l = crate::links::Links::start(engine, json!(["!approval::*"]), None).await;
        let created = l
            .scene
            .sink("bl-created", "approval::pending-created", json!({}))
            .await;
        let spec = crate::links::spec;
        let held = |cid: &'static str| {
            let l = &l;
            async move {
                let out = l
                    .scene
                    .harness
                    .call(spec("s_l", cid, "demo::echo", json!({})))
                    .await;
                assert!(out.is_held(), "{cid}: {out:?}");
            }
        };
        // One held call: no offer.
        held("a1").await;
        let a1 = crate::links::link_of(&created, 0).await;
        let page = l.http.get(&a1).send().await.unwrap().text().await.unwrap();
        assert!(batch_token_of(&page).is_none(), "one call, no offer");
        // Two: the offer names both, with its own token.
        held("a2").await;
        let page = l.http.get(&a1).send().await.unwrap().text().await.unwrap();
        assert!(
            page.contains("Allow all 2 held calls of this turn"),
            "{page}"
        );
        let token = batch_token_of(&page).expect("an Allow all token");
        assert!(token.starts_with("b."), "{token}");
        let batch_url = format!("{}/approvals/{token}", l.base);
        // Held after the page was shown: not in it.
        held("a3").await;

        // The batch token has no page, allows only, and cannot be altered.
        assert_eq!(l.http.get(&batch_url).send().await.unwrap().status(), 403);
        let r = l.decide(&batch_url, json!({"decision": "deny"})).await;
        assert_eq!(r.status(), 400);
        let mut bad = token.clone();
        let flip = bad.pop().map(|c| if c == 'A' { 'B' } else { 'A' }).unwrap();
        bad.push(flip);
        let r = l
            .decide(
                &format!("{}/approvals/{bad}", l.base),
                json!({"decision": "allow"}),
            )
            .await;
        assert_eq!(r.status(), 403);
        assert!(l
            .scene
            .harness
            .state("s_l", "a1")
            .is_some_and(|s| s.is_held()));

        let r = l.decide(&batch_url, json!({"decision": "allow"})).await;
        assert_eq!(r.status(), 200);
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer, json!({"resolved": true, "count": 2, "skipped": 0}));
        for cid in ["a1", "a2"] {
            assert!(
                matches!(
                    l.scene.harness.state("s_l", cid),
                    Some(CallState::Completed { .. })
                ),
                "{cid}"
            );
        }
        assert!(
            l.scene
                .harness
                .state("s_l", "a3")
                .is_some_and(|s| s.is_held()),
            "a call the page did not show is left alone"
        );
        // Used: gone.
        let r = l.decide(&batch_url, json!({"decision": "allow"})).await;
        assert_eq!(r.status(), 410);

        // A one-call link, on a page that offered Allow all, allows only its call.
        held("a4").await;
        let a4 = crate::links::link_of(&created, 3).await;
        let page = l.http.get(&a4).send().await.unwrap().text().await.unwrap();
        assert!(
            page.contains("Allow all 2 held calls of this turn"),
            "a3 and a4"
        );
        let r = l.decide(&a4, json!({"decision": "allow"})).await;
        assert_eq!(r.status(), 200);
        assert!(l
            .scene
            .harness
            .state("s_l", "a3")
            .is_some_and(|s| s.is_held()));
    })
    .await;
}

/// Contract §26.4 (issue 36, item 4): "Allow all" on a link page listed only
/// ids and released what the page never showed — an ask-rule call nobody
/// was asked about, a root outside the turn's. Records now carry
/// `held_by_rule`; the offer lists every call it covers with its redacted
/// arguments, lists the human-floor holds to decide separately and leaves
/// them out of its token; `resolve-batch` without `items` skips the same
/// calls on allow (`decide_separately`), and a deny still takes them.
#[tokio::test]
async fn rule_26_4_allow_all_shows_what_it_releases_and_leaves_floors_to_decide_separately() {
    on_each_engine("batch_separately", |engine| async move {
        let l =
            crate::links::Links::start(engine, json!(["!approval::*", "?deploy::*"]), None).await;
        let created = l
            .scene
            .sink("bs-created", "approval::pending-created", json!({}))
            .await;
        let spec = crate::links::spec;
        let calls = [
            ("p1", "demo::echo", json!({"note": "plain one"})),
            ("p2", "deploy::prod", json!({"env": "prod"})),
            (
                "p3",
                "demo::echo",
                json!({"options": {"filesystem_root": "/"}}),
            ),
            ("p4", "demo::echo", json!({"note": "plain two"})),
        ];
        for (cid, fid, args) in calls.clone() {
            let out = l.scene.harness.call(spec("s_b", cid, fid, args)).await;
            assert!(out.is_held(), "{cid}: {out:?}");
        }
        let held_by: Vec<Value> = {
            let mut v = Vec::new();
            for (cid, _, _) in &calls {
                v.push(l.scene.get_pending("s_b", cid).await["pending"]["held_by_rule"].clone());
            }
            v
        };
        assert_eq!(held_by[0], "no_match");
        assert!(
            held_by[1].as_str().is_some_and(|r| r != "no_match"),
            "{held_by:?}"
        );
        assert_eq!(held_by[2], "widening_root");
        assert_eq!(held_by[3], "no_match");

        let p1 = crate::links::link_of(&created, 0).await;
        let page = l.http.get(&p1).send().await.unwrap().text().await.unwrap();
        assert!(
            page.contains("Allow all 2 held calls of this turn"),
            "{page}"
        );
        let (covered, apart) = page.split_once("Decide separately").expect("listed apart");
        for (cid, shown) in [("p1", "plain one"), ("p4", "plain two")] {
            assert!(
                covered.contains(&format!("<small>{cid}</small>")),
                "{cid}: {page}"
            );
            assert!(covered.contains(shown), "{cid}'s arguments shown: {page}");
        }
        for cid in ["p2", "p3"] {
            assert!(
                !covered.contains(&format!("<small>{cid}</small>")),
                "{cid}: {page}"
            );
            assert!(
                apart.contains(&format!("<small>{cid}</small>")),
                "{cid}: {page}"
            );
        }
        let token = batch_token_of(&page).expect("an Allow all token");
        let r = l
            .decide(
                &format!("{}/approvals/{token}", l.base),
                json!({"decision": "allow"}),
            )
            .await;
        assert_eq!(r.status(), 200);
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer, json!({"resolved": true, "count": 2, "skipped": 0}));
        for cid in ["p1", "p4"] {
            assert!(
                matches!(
                    l.scene.harness.state("s_b", cid),
                    Some(CallState::Completed { .. })
                ),
                "{cid}"
            );
        }
        for cid in ["p2", "p3"] {
            assert!(
                l.scene
                    .harness
                    .state("s_b", cid)
                    .is_some_and(|s| s.is_held()),
                "{cid} left alone"
            );
        }

        // The same rule for a batch without items: skipped on allow.
        hold(&l.scene, "s_b", "t_s_b", "p5", "demo::echo").await;
        let out = l
            .scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s_b", "turn_id": "t_s_b", "decision": "allow"}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["p5"], "{out}");
        let mut why = skipped(&out);
        why.sort();
        assert_eq!(
            why,
            [
                ("p2".to_string(), "decide_separately".to_string()),
                ("p3".to_string(), "decide_separately".to_string())
            ]
        );
        for cid in ["p2", "p3"] {
            assert!(
                l.scene
                    .harness
                    .state("s_b", cid)
                    .is_some_and(|s| s.is_held()),
                "{cid} left alone"
            );
        }
        // A deny takes them: it releases nothing.
        let out = l
            .scene
            .ok(
                "approval::resolve-batch",
                json!({"session_id": "s_b", "turn_id": "t_s_b", "decision": "deny"}),
            )
            .await;
        assert_eq!(ids(&out["results"]), ["p2", "p3"], "{out}");
        assert_eq!(l.scene.harness.target_runs("deploy::prod"), 0);
        assert!(l.scene.inbox().await.is_empty());
    })
    .await;
}
