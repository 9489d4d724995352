//! Sub-agents (contract §27.3): a child session's held calls carry
//! `session_metadata.parent_session_id`, read from `session::get` (the
//! linkage today's harness writes when it makes the child's session) or from
//! a harness turn event that names the parent — never from the turn's
//! metadata, which the model can write.

use std::time::Duration;

use approval_gate_testkit::fixture::EngineFixture;
use approval_gate_testkit::harness::{CallSpec, Generation, HarnessOptions};
use serde_json::{json, Value};

use crate::common::*;

/// A held call of `sid` in its turn `t_<sid>`.
fn ask(sid: &str, cid: &str) -> CallSpec {
    CallSpec::new(sid, format!("t_{sid}"), cid, "demo::ask", json!({"q": 1}))
        .with_fs_root(&format!("/w/{sid}"))
}

async fn record(scene: &Scene, sid: &str, cid: &str) -> Value {
    scene.get_pending(sid, cid).await["pending"].clone()
}

/// Waits until the worker holds its `harness::turn-started` binding (a
/// parent named only by that event is learned through it).
async fn wait_for_turn_started(scene: &Scene) {
    assert!(
        scene
            .harness
            .wait_for_binding("harness::turn-started", "approval::on-turn-started", WAIT)
            .await
            .is_some(),
        "the worker never bound harness::turn-started"
    );
}

#[tokio::test]
async fn rule_27_3_a_child_sessions_held_call_carries_its_parent() {
    on_each_engine(
        "rule_27_3_child_carries_parent",
        |engine: EngineFixture| async move {
            let scene = Scene::start_with(engine, HarnessOptions::generation(Generation::G2)).await;
            let created = scene
                .sink("sa-created", "approval::pending-created", json!({}))
                .await;
            // The parent's turn spawns a sub-agent: the harness makes the
            // child's session with its linkage.
            assert!(
                scene
                    .harness
                    .spawn("s_parent", "t_s_parent", "c_spawn", "s_kid")
                    .await
            );
            scene.hold(ask("s_kid", "c1")).await;
            let r = record(&scene, "s_kid", "c1").await;
            assert_eq!(
                r["session_metadata"]["parent_session_id"], "s_parent",
                "{r}"
            );
            assert_eq!(r["session_metadata"]["function_call_id"], "c_spawn", "{r}");
            // The console finds the parent's children by it.
            let listed = scene
                .ok(
                    "approval::list-pending",
                    json!({"metadata": {"parent_session_id": "s_parent"}}),
                )
                .await;
            let ids: Vec<&Value> = listed["pending"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| &p["function_call_id"])
                .collect();
            assert_eq!(ids, vec![&json!("c1")], "{listed}");
            let ev = created.wait_for(1, WAIT).await;
            assert_eq!(
                ev[0]["session_metadata"]["parent_session_id"], "s_parent",
                "{ev:?}"
            );
            // A session that is nobody's child carries no parent.
            scene.hold(ask("s_solo", "c2")).await;
            let solo = record(&scene, "s_solo", "c2").await;
            assert!(
                solo.pointer("/session_metadata/parent_session_id")
                    .is_none(),
                "{solo}"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn rule_27_3_a_parent_only_a_turn_event_names_is_carried() {
    on_test_engine("rule_27_3_event_parent", |engine| async move {
        let scene = Scene::start_with(engine, HarnessOptions::generation(Generation::G2)).await;
        wait_for_turn_started(&scene).await;
        // The child reuses a session that existed: the session manager keeps
        // the metadata it was made with, so only the turn event names the
        // parent.
        scene
            .sessions
            .put("s_reused", json!({"metadata": {"owner": "u_1"}}));
        assert!(
            !scene
                .harness
                .spawn("s_parent", "t_s_parent", "c_spawn", "s_reused")
                .await
        );
        assert_eq!(
            scene.sessions.metadata_of("s_reused"),
            Some(json!({"owner": "u_1"}))
        );
        // The event is fire-and-forget: give the worker a moment with it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        scene.hold(ask("s_reused", "c1")).await;
        let r = record(&scene, "s_reused", "c1").await;
        assert_eq!(
            r["session_metadata"],
            json!({"owner": "u_1", "parent_session_id": "s_parent"}),
            "{r}"
        );
        // A deleted session's parent is forgotten with it.
        scene.sessions.delete("s_reused").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        scene.hold(ask("s_reused", "c2")).await;
        let after = record(&scene, "s_reused", "c2").await;
        assert!(
            after
                .pointer("/session_metadata/parent_session_id")
                .is_none(),
            "{after}"
        );
    })
    .await;
}

#[tokio::test]
async fn rule_27_3_the_turns_metadata_never_names_the_parent() {
    on_test_engine("rule_27_3_turn_metadata", |engine| async move {
        let scene = Scene::start_with(engine, HarnessOptions::generation(Generation::G2)).await;
        wait_for_turn_started(&scene).await;
        assert!(scene.harness.spawn("s_parent", "t_s_parent", "c_spawn", "s_kid").await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let forged = |sid: &str, cid: &str| {
            CallSpec::new(sid, format!("t_{sid}"), cid, "demo::ask", json!({}))
                .with_metadata(json!({"parent_session_id": "s_forged", "session_metadata": {"parent_session_id": "s_forged"}}))
                .with_fs_root(&format!("/w/{sid}"))
        };
        // A session that is nobody's child: the turn's word is not taken.
        scene.hold(forged("s_solo", "c1")).await;
        let solo = record(&scene, "s_solo", "c1").await;
        assert!(solo.pointer("/session_metadata/parent_session_id").is_none(), "{solo}");
        // A child: its parent stays the one the harness named.
        scene.hold(forged("s_kid", "c2")).await;
        let kid = record(&scene, "s_kid", "c2").await;
        assert_eq!(kid["session_metadata"]["parent_session_id"], "s_parent", "{kid}");
    })
    .await;
}
