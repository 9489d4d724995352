//! `KeyLock` against the in-process test engine: one writer per key, the
//! key checked, every write and removal announced exactly once, and a state
//! failure leaving things as they were.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::pending::tests::{record, Scene};

#[test]
fn stripes_are_stable_and_spread() {
    assert_eq!(Stripes::of("s1", "c1"), Stripes::of("s1", "c1"));
    let used: std::collections::HashSet<usize> = (0..2000)
        .map(|i| Stripes::of("s1", &format!("c{i}")))
        .collect();
    assert!(used.len() > STRIPES * 3 / 4, "{} stripes used", used.len());
    assert!(used.iter().all(|stripe| *stripe < STRIPES));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_lock_is_held_by_one_writer_at_a_time() {
    let scene = Scene::start().await;
    let store = &scene.store;
    let held = store.lock("s1", "c1").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(100), store.lock("s1", "c1"))
            .await
            .is_err(),
        "a second writer of the key waits"
    );
    let other = (0..100)
        .map(|i| format!("c{i}"))
        .find(|cid| Stripes::of("s1", cid) != Stripes::of("s1", "c1"))
        .expect("a key of another stripe");
    assert!(
        tokio::time::timeout(Duration::from_secs(1), store.lock("s1", &other))
            .await
            .is_ok(),
        "another stripe's key does not wait"
    );
    drop(held);
    assert!(
        tokio::time::timeout(Duration::from_secs(1), store.lock("s1", "c1"))
            .await
            .is_ok(),
        "free again once the guard is dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_through_another_keys_lock_is_refused() {
    let scene = Scene::start().await;
    let lock = scene.store.lock("s1", "c2").await;
    let arguments = crate::redact::redact_full(&json!({}));
    let err = lock
        .write(record("c1", 1), arguments)
        .await
        .expect_err("the wrong key");
    assert!(matches!(err, StateError::WrongKey), "{err:?}");
    drop(lock);
    assert!(scene.store.get("s1", "c1").is_none());
    assert!(scene.stored("s1", "c1").await.is_null(), "nothing stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_4_a_hold_replaced_outside_any_release_is_announced_aborted_replaced() {
    let scene = Scene::start().await;
    assert_eq!(scene.hold(record("c1", 1)).await, Written::New);
    assert_eq!(scene.stored("s1", "c1").await["pending_at"], 1);
    assert_eq!(scene.logged(), 0, "a hold is not a removal");
    // The same hold written again (a redelivery) announces nothing.
    assert_eq!(scene.hold(record("c1", 1)).await, Written::New);
    assert_eq!(scene.logged(), 0);
    // A different hold under the key replaces it.
    assert_eq!(scene.hold(record("c1", 2)).await, Written::New);
    let removal = scene.store.removal("s1", "c1", 1).expect("remembered");
    assert_eq!(
        (removal.outcome, removal.reason.as_deref()),
        (Resolution::Aborted, Some("replaced"))
    );
    assert_eq!(scene.logged(), 1);
    assert_eq!(scene.store.get("s1", "c1").map(|r| r.pending_at), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_4_a_write_state_refuses_holds_nothing() {
    let scene = Scene::start().await;
    scene
        .faults()
        .fail("state::set", "unavailable", "down", Some(2));
    let lock = scene.store.lock("s1", "c1").await;
    let arguments = crate::redact::redact_full(&json!({"cmd": "ls"}));
    let err = lock
        .write(record("c1", 1), arguments)
        .await
        .expect_err("state refused");
    assert!(matches!(err, StateError::Call(_)), "{err:?}");
    drop(lock);
    assert!(scene.store.get("s1", "c1").is_none());
    assert_eq!(scene.logged(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_4_deletion_is_the_emit_gate_a_purge_announces_once() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let lock = scene.store.lock("s1", "c1").await;
    let purged = lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted,
        )
        .await
        .expect("purged");
    assert!(matches!(purged, Purged::Removed(_)), "{purged:?}");
    let again = lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted,
        )
        .await
        .expect("purged");
    assert!(matches!(again, Purged::Absent), "{again:?}");
    drop(lock);
    assert!(scene.store.get("s1", "c1").is_none());
    assert!(scene.stored("s1", "c1").await.is_null(), "gone from state");
    assert_eq!(scene.logged(), 1, "one announcement");
    assert_eq!(
        scene.store.removal("s1", "c1", 1).map(|r| r.outcome),
        Some(Resolution::Aborted)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_4_a_purge_state_refuses_keeps_the_record_for_the_next_event() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    scene
        .faults()
        .fail("state::set", "unavailable", "down", Some(1));
    let lock = scene.store.lock("s1", "c1").await;
    assert!(lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted
        )
        .await
        .is_err());
    assert!(lock.get().is_some(), "kept");
    assert_eq!(scene.logged(), 0, "nothing announced");
    let purged = lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted,
        )
        .await
        .expect("purged");
    assert!(matches!(purged, Purged::Removed(_)), "{purged:?}");
    assert_eq!(scene.logged(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_11_an_escalation_happens_once_and_keeps_the_record_held() {
    let scene = Scene::start().await;
    let mut held = record("c1", 1);
    held.escalate_at = Some(2);
    held.expires_at = Some(u64::MAX / 2);
    scene.hold(held.clone()).await;
    let lock = scene.store.lock("s1", "c1").await;
    assert!(lock.escalate(&held, 5).await.expect("escalated"));
    assert!(!lock.escalate(&held, 6).await.expect("not again"));
    drop(lock);
    assert_eq!(
        scene.store.get("s1", "c1").and_then(|r| r.escalated_at),
        Some(5)
    );
    assert_eq!(scene.stored("s1", "c1").await["escalated_at"], 5, "durable");
    assert_eq!(scene.logged(), 0, "still held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_23_a_discarded_write_reaches_the_decision_log_alone() {
    let scene = Scene::start().await;
    // A hold's write that landed after its hook gave up: state has it, the
    // index does not.
    let landed = record("c1", 1);
    scene
        .store
        .engine
        .state_set(
            &bucket("s1", "c1"),
            &state_key("s1", "c1"),
            serde_json::to_value(&landed).expect("json"),
        )
        .await
        .expect("stored");
    scene.store.lock("s1", "c1").await.discard().await;
    assert!(scene.stored("s1", "c1").await.is_null(), "removed");
    assert_eq!(scene.logged(), 1, "logged as the gate's");
    assert_eq!(
        scene.store.removal("s1", "c1", 1),
        None,
        "no link was ever made for it"
    );
    // A record the index knows is announced: discard leaves it alone.
    scene.hold(record("c2", 1)).await;
    scene.store.lock("s1", "c2").await.discard().await;
    assert!(scene.store.get("s1", "c2").is_some());
    assert_eq!(scene.stored("s1", "c2").await["pending_at"], 1);
    assert_eq!(scene.logged(), 1);
}
