//! A bounded load test: 10,000 calls across 100 sessions through the harness
//! double, with resolves (allow and deny), turn completions and session
//! deletions running at the same time. Loopback only; stops by itself.
//! `AG_LOAD_CALLS` changes the number of calls.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, CallState};
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn load_ten_thousand_calls_keep_every_invariant() {
    let calls: usize = std::env::var("AG_LOAD_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let run = move |engine| async move {
        // The worker runs as its own process so its memory can be read apart
        // from the doubles' (which keep every call they saw).
        let scene = Arc::new(Scene::start(engine).await);
        let mut scene_owned = Arc::try_unwrap(scene).ok().expect("one owner");
        scene_owned.stop_worker().await;
        let worker = WorkerProcess::spawn(
            BIN.as_ref(),
            &scene_owned.engine.url(),
            &[],
            Duration::from_secs(30),
        )
        .await;
        let scene = Arc::new(scene_owned);
        let lost = Arc::new(LostReplies::new(&scene.engine));
        scene.wait_for_gate_binding().await;
        scene
            .ok("configuration::set", json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "!demo::other"]}}))
            .await;
        for s in 0..100 {
            if s % 5 == 0 {
                scene
                    .ok(
                        "approval::set-mode",
                        json!({"session_id": format!("ls_{s}"), "mode": "full"}),
                    )
                    .await;
            }
        }
        let created = Sink::bind(
            &scene.engine,
            "load-created",
            "approval::pending-created",
            json!({}),
        )
        .await;
        let resolved = Sink::bind(
            &scene.engine,
            "load-resolved",
            "approval::pending-resolved",
            json!({}),
        )
        .await;
        // Canary: both sinks are live once they see one hold come and go.
        assert!(scene
            .harness
            .call(CallSpec::new("canary", "t", "c", "demo::echo", json!({})))
            .await
            .is_held());
        scene
            .ok(
                "approval::resolve",
                json!({"session_id": "canary", "function_call_id": "c", "decision": "deny"}),
            )
            .await;
        assert!(
            eventually(WAIT, || created.events().len() == 1
                && resolved.events().len() == 1)
            .await,
            "sinks never bound"
        );
        let (created_base, resolved_base) = (1, 1);
        let baseline = rss_kib(worker.pid());
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicUsize::new(0));
        let resolves = Arc::new(AtomicUsize::new(0));

        // A human resolving what is in the inbox, allow and deny in turn.
        let resolver = {
            let (scene, stop, errors, resolves, lost) = (
                scene.clone(),
                stop.clone(),
                errors.clone(),
                resolves.clone(),
                lost.clone(),
            );
            tokio::spawn(async move {
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let page = scene
                        .call("approval::list-pending", json!({"limit": 50}))
                        .await
                        .unwrap_or(Value::Null);
                    for r in page["pending"].as_array().cloned().unwrap_or_default() {
                        n += 1;
                        let decision = if n.is_multiple_of(3) { "deny" } else { "allow" };
                        match scene
                            .call(
                                "approval::resolve",
                                json!({"session_id": r["session_id"], "function_call_id": r["function_call_id"], "decision": decision}),
                            )
                            .await
                        {
                            Ok(_) => {
                                resolves.fetch_add(1, Ordering::SeqCst);
                            }
                            // A reply the real engine dropped is not the
                            // worker's error (checked against its log below).
                            Err(err) if lost.unanswered(&err) => {}
                            Err(_) => {
                                errors.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };

        // The agents: 100 sessions, a turn every 10 calls.
        let per_session = calls / 100;
        let mut agents = Vec::new();
        for s in 0..100 {
            let scene = scene.clone();
            agents.push(tokio::spawn(async move {
                let sid = format!("ls_{s}");
                let mut outcomes = Vec::new();
                for i in 0..per_session {
                    let turn = format!("lt_{s}_{}", i / 10);
                    let fid = if i % 17 == 0 {
                        "demo::other"
                    } else {
                        "demo::echo"
                    };
                    let cid = format!("lc_{s}_{i}");
                    let out = scene
                        .harness
                        .call(CallSpec::new(
                            &sid,
                            &turn,
                            &cid,
                            fid,
                            json!({"i": i, "token": "t0p"}),
                        ))
                        .await;
                    outcomes.push((sid.clone(), cid, out));
                    if i % 10 == 9 && s % 4 == 0 {
                        scene.harness.complete_turn(&sid, &turn, "completed").await;
                    }
                }
                if s % 10 == 3 {
                    scene.sessions.delete(&sid).await;
                }
                outcomes
            }));
        }
        let mut outcomes = Vec::new();
        for a in agents {
            outcomes.extend(a.await.unwrap());
        }
        // Let the resolver drain what it can, then end every turn.
        let drain_deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < drain_deadline && scene.inbox().await.len() > 20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.store(true, Ordering::SeqCst);
        resolver.await.unwrap();
        for s in 0..100 {
            for t in 0..per_session.div_ceil(10) {
                scene
                    .harness
                    .complete_turn(&format!("ls_{s}"), &format!("lt_{s}_{t}"), "completed")
                    .await;
            }
        }
        let wall = started.elapsed();

        let holds: HashSet<String> = outcomes
            .iter()
            .filter(|(_, _, o)| matches!(o, CallState::Held { .. }))
            .map(|(_, c, _)| c.clone())
            .collect();
        // Calls the harness denied because the gate's answer was dropped by a
        // real engine: the gate held them, so each was announced and must
        // still leave exactly once.
        let unanswered: HashSet<String> = outcomes
            .iter()
            .filter(|(_, _, o)| lost.hook_timed_out(o))
            .map(|(_, c, _)| c.clone())
            .collect();
        let continued = outcomes
            .iter()
            .filter(|(_, _, o)| matches!(o, CallState::Completed { .. }))
            .count();
        let denied = outcomes
            .iter()
            .filter(|(_, _, o)| o.deny_reason().is_some())
            .count();
        assert!(
            eventually(Duration::from_secs(30), || resolved.events().len()
                >= holds.len())
            .await,
            "resolved {} of {}",
            resolved.events().len(),
            holds.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;

        let mut created_per: HashMap<String, usize> = HashMap::new();
        for e in created.events().iter().skip(created_base) {
            *created_per
                .entry(e["function_call_id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        let mut resolved_per: HashMap<String, usize> = HashMap::new();
        for e in resolved.events().iter().skip(resolved_base) {
            *resolved_per
                .entry(e["function_call_id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        for h in holds
            .iter()
            .chain(unanswered.iter().filter(|c| created_per.contains_key(*c)))
        {
            assert_eq!(
                created_per.get(h),
                Some(&1),
                "hold {h}: pending-created count"
            );
            assert_eq!(
                resolved_per.get(h),
                Some(&1),
                "hold {h}: pending-resolved count"
            );
        }
        assert!(
            created_per
                .keys()
                .all(|c| holds.contains(c) || unanswered.contains(c)),
            "an announcement without a hold"
        );
        assert!(created_per.len() >= holds.len());
        assert!(resolved_per.values().all(|&n| n <= 1));
        let mut runs: HashMap<String, usize> = HashMap::new();
        for r in scene.harness.runs_of("demo::echo") {
            *runs.entry(r.call_id.clone()).or_default() += 1;
        }
        assert!(runs.values().all(|&n| n == 1), "a released call ran twice");
        assert!(
            scene.inbox().await.is_empty(),
            "inbox not empty after every turn ended"
        );
        assert!(
            scene.pending_in_state().await.is_empty(),
            "pending scopes not empty"
        );
        // Give the allocator a moment, then read the worker's resident memory.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib(worker.pid());
        let peak = std::fs::read_to_string(format!("/proc/{}/status", worker.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .map(|l| l.to_string())
            })
            .unwrap_or_default();
        eprintln!(
            "load: {} calls in {:.1} s ({:.0}/s), {} held, {} continued, {} denied, {} resolves, {} resolve errors, {} pending-created, {} pending-resolved, {} target runs, worker rss {} → {} KiB ({peak})",
            outcomes.len(), wall.as_secs_f64(), outcomes.len() as f64 / wall.as_secs_f64(), holds.len(), continued, denied,
            resolves.load(Ordering::SeqCst), errors.load(Ordering::SeqCst), created.events().len(), resolved.events().len(), runs.len(), baseline, after
        );
        assert_eq!(errors.load(Ordering::SeqCst), 0, "resolve errors");
        lost.check(&scene.engine, "load").await;
        assert!(
            after < baseline + 64 * 1024,
            "the worker's memory did not return near its baseline: {baseline} → {after} KiB"
        );
        drop(worker);
    };
    let limit = Duration::from_secs(300);
    tokio::time::timeout(limit, run(EngineFixture::start_test().await))
        .await
        .expect("the load test is bounded");
    if let Some(real) = EngineFixture::start_real_with(
        "load_ten_thousand_calls",
        LostReplies::real_engine_options(),
    )
    .await
    {
        tokio::time::timeout(limit, run(real))
            .await
            .expect("the load test is bounded");
    }
}
