//! The claim: the releases-under-way map alone (PURE), then the claim's
//! lifecycle against the in-process test engine — marked before the
//! harness, given back when dropped unsent, orphaned when dropped after a
//! send, settled once, superseded by a follow-up hold.

use std::time::Duration;

use super::*;
use crate::pending::tests::{record, until, Scene};
use crate::provenance::Caller;

fn note() -> ReleaseNote {
    ReleaseNote {
        decision: crate::pending::RulingKind::Allow,
        via: crate::pending::ReleaseVia::Resolve,
        at: 3,
        granted: None,
        caller: Some(Caller::link()),
        edited: false,
    }
}

fn key(cid: &str) -> RecordKey {
    ("s1".to_string(), cid.to_string())
}

#[test]
fn releases_know_which_revision_they_carry() {
    let mut releases = Releases::default();
    let carried = Arc::new(record("c1", 1));
    releases.own(carried.clone());
    assert!(releases.is_under_way(&key("c1")));
    assert!(releases.is_owned(&key("c1")));
    assert!(releases.carries(&carried));
    assert!(
        !releases.carries(&record("c1", 2)),
        "another revision of the key"
    );
    assert!(!releases.is_under_way(&key("c2")));
    releases.end(&key("c1"));
    assert!(!releases.is_under_way(&key("c1")));
    assert!(!releases.carries(&carried));
}

#[test]
fn a_release_is_superseded_only_by_a_write_over_the_revision_it_carries() {
    let mut releases = Releases::default();
    releases.own(Arc::new(record("c1", 1)));
    assert!(!releases.supersede(&record("c1", 2)), "not the one carried");
    assert!(!releases.is_superseded(&key("c1")));
    assert!(!releases.supersede(&record("c2", 1)), "another key");
    assert!(releases.supersede(&record("c1", 1)));
    assert!(releases.is_superseded(&key("c1")));
    // A note rewrites the record it carries; it is still the same hold.
    let mut noted = record("c1", 1);
    noted.releasing = true;
    releases.noted(&Arc::new(noted.clone()));
    assert!(releases.carries(&noted));
}

#[test]
fn a_disowned_release_is_still_under_way_but_no_longer_owned() {
    let mut releases = Releases::default();
    releases.own(Arc::new(record("c1", 1)));
    releases.disown(&key("c1"));
    assert!(releases.is_under_way(&key("c1")), "others still see it");
    assert!(!releases.is_owned(&key("c1")), "the recovery may adopt it");
    releases.disown(&key("c2"));
    assert!(!releases.is_under_way(&key("c2")), "nothing made up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_26_1_a_release_lets_its_call_through_the_gate_at_most_once_and_only_an_allow() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let held = scene.store.get("s1", "c1").expect("held");
    assert!(!scene.store.pass_release(&held), "not releasing");
    let claim = claimed(&scene, "c1").await;
    let releasing = scene.store.get("s1", "c1").expect("held");
    assert!(scene.store.pass_release(&releasing));
    assert!(!scene.store.pass_release(&releasing), "once per release");
    drop(claim);
    // Given back, then claimed again: a new release, one more pass.
    assert!(until(|| !scene.store.get("s1", "c1").expect("held").releasing).await);
    let again = claimed(&scene, "c1").await;
    assert!(scene.store.pass_release(again.record()));
    drop(again);
    // A denial is delivered, never run: nothing passes.
    assert!(until(|| !scene.store.get("s1", "c1").expect("held").releasing).await);
    let mut deny = note();
    deny.decision = crate::pending::RulingKind::Deny;
    let Ok(Take::Claimed(denied)) = scene.store.claim("s1", "c1", None, deny).await else {
        panic!("not claimed")
    };
    assert!(!scene.store.pass_release(denied.record()));
}

async fn claimed(scene: &Scene, cid: &str) -> Claim {
    match scene.store.claim("s1", cid, None, note()).await {
        Ok(Take::Claimed(claim)) => claim,
        other => panic!("not claimed: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_claim_marks_the_record_durably_and_turns_every_other_decision_away() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let claim = claimed(&scene, "c1").await;
    assert!(claim.record().releasing);
    assert!(scene.store.get("s1", "c1").expect("held").releasing);
    let stored = scene.stored("s1", "c1").await;
    assert_eq!(stored["releasing"], true, "marked in state: {stored}");
    assert_eq!(stored["release"]["decision"], "allow");
    assert!(matches!(
        scene.store.claim("s1", "c1", None, note()).await,
        Ok(Take::Releasing)
    ));
    let lock = scene.store.lock("s1", "c1").await;
    let purged = lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted,
        )
        .await
        .expect("purge");
    assert!(
        matches!(purged, crate::pending::Purged::Releasing),
        "{purged:?}"
    );
    drop(lock);
    assert!(scene.store.is_releasing(claim.record()));
    assert!(
        scene.store.adopt("s1", "c1").await.is_none(),
        "a live owner's"
    );
    assert_eq!(scene.logged(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_only_the_expected_revision_is_claimed() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 7)).await;
    let stale = scene
        .store
        .claim("s1", "c1", Some((8, RecordKind::Function)), note())
        .await;
    assert!(matches!(stale, Ok(Take::Stale)), "{stale:?}");
    let other_prompt = scene
        .store
        .claim("s1", "c1", Some((7, RecordKind::FolderAccess)), note())
        .await;
    assert!(matches!(other_prompt, Ok(Take::Stale)), "{other_prompt:?}");
    let absent = scene.store.claim("s1", "c9", None, note()).await;
    assert!(matches!(absent, Ok(Take::Absent)), "{absent:?}");
    assert!(!scene.store.get("s1", "c1").expect("held").releasing);
    let claim = scene
        .store
        .claim("s1", "c1", Some((7, RecordKind::Function)), note())
        .await;
    assert!(matches!(claim, Ok(Take::Claimed(_))), "{claim:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_claim_dropped_before_the_send_gives_the_record_back() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let mut orphans = scene.store.take_orphans().expect("the orphan channel");
    drop(claimed(&scene, "c1").await);
    let store = scene.store.clone();
    assert!(
        until(|| store.get("s1", "c1").is_some_and(|r| !r.releasing)).await,
        "pending again"
    );
    assert_eq!(scene.stored("s1", "c1").await.get("releasing"), None);
    assert!(orphans.try_recv().is_err(), "no orphan");
    assert_eq!(scene.logged(), 0, "nothing left the inbox");
    assert!(matches!(
        scene.store.claim("s1", "c1", None, note()).await,
        Ok(Take::Claimed(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_claim_dropped_after_the_send_is_orphaned_and_adopted_once() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let mut orphans = scene.store.take_orphans().expect("the orphan channel");
    assert!(scene.store.take_orphans().is_none(), "one receiver");
    let mut claim = claimed(&scene, "c1").await;
    claim.sent();
    drop(claim);
    let orphan = tokio::time::timeout(Duration::from_secs(5), orphans.recv())
        .await
        .expect("in time")
        .expect("an orphan");
    assert_eq!(orphan, key("c1"));
    assert!(
        scene.store.get("s1", "c1").expect("held").releasing,
        "the harness may be running the call"
    );
    let adopted = scene.store.adopt("s1", "c1").await.expect("adopted");
    assert!(scene.store.adopt("s1", "c1").await.is_none(), "once");
    assert!(adopted
        .finish(Resolution::Unknown, Some("unknown".into()))
        .await
        .expect("settled"));
    assert!(scene.store.get("s1", "c1").is_none());
    assert_eq!(scene.logged(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_finish_settles_once() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let mut orphans = scene.store.take_orphans().expect("the orphan channel");
    let mut claim = claimed(&scene, "c1").await;
    claim.sent();
    assert!(claim
        .finish(Resolution::Allow, None)
        .await
        .expect("settled"));
    assert!(scene.store.get("s1", "c1").is_none());
    assert!(scene.stored("s1", "c1").await.is_null(), "gone from state");
    assert_eq!(scene.logged(), 1);
    let removal = scene.store.removal("s1", "c1", 1).expect("remembered");
    assert_eq!((removal.outcome, removal.reason), (Resolution::Allow, None));
    // Settled: the finished claim was not orphaned, and nothing is left to
    // settle again.
    assert!(orphans.try_recv().is_err());
    let lock = scene.store.lock("s1", "c1").await;
    let purged = lock
        .purge(
            Resolution::Aborted,
            "turn_completed",
            DecidedVia::TurnCompleted,
        )
        .await
        .expect("purge");
    assert!(
        matches!(purged, crate::pending::Purged::Absent),
        "{purged:?}"
    );
    drop(lock);
    assert!(matches!(
        scene.store.claim("s1", "c1", None, note()).await,
        Ok(Take::Absent)
    ));
    assert_eq!(scene.logged(), 1, "announced once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_finish_state_refuses_hands_the_claim_back_for_another_try() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let claim = claimed(&scene, "c1").await;
    scene
        .faults()
        .fail("state::set", "unavailable", "down", Some(1));
    let (claim, _err) = claim
        .finish(Resolution::Deny, Some("no".into()))
        .await
        .expect_err("state refused");
    assert!(scene.store.get("s1", "c1").is_some(), "kept");
    assert_eq!(scene.logged(), 0, "nothing announced");
    assert!(claim
        .finish(Resolution::Deny, Some("no".into()))
        .await
        .expect("settled"));
    assert!(scene.store.get("s1", "c1").is_none());
    assert_eq!(scene.logged(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_follow_up_hold_supersedes_the_release_which_announces_its_own_record() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let claim = claimed(&scene, "c1").await;
    // The released call failed on a folder and was held again under the
    // same key while its release waited for the harness.
    scene.hold(record("c1", 2)).await;
    assert_eq!(
        scene.logged(),
        0,
        "the release, not the write, announces it"
    );
    assert_eq!(scene.store.removal("s1", "c1", 1), None);
    assert!(claim
        .finish(Resolution::Allow, None)
        .await
        .expect("announced"));
    assert_eq!(
        scene.store.get("s1", "c1").map(|r| r.pending_at),
        Some(2),
        "the follow-up stays"
    );
    assert_eq!(scene.stored("s1", "c1").await["pending_at"], 2);
    assert_eq!(
        scene.store.removal("s1", "c1", 1).map(|r| r.outcome),
        Some(Resolution::Allow)
    );
    assert_eq!(scene.logged(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_give_back_makes_the_record_pending_again_and_remembers_doubt() {
    let scene = Scene::start().await;
    scene.hold(record("c1", 1)).await;
    let mut claim = claimed(&scene, "c1").await;
    claim.note_grant("/data").await.expect("noted");
    assert_eq!(
        scene.stored("s1", "c1").await["release"]["granted"],
        "/data",
        "a restart can take the grant back"
    );
    assert_eq!(
        claim
            .record()
            .release
            .as_ref()
            .and_then(|n| n.granted.as_deref()),
        Some("/data")
    );
    claim.give_back(true).await.expect("given back");
    let record = scene.store.get("s1", "c1").expect("held");
    assert!(!record.releasing && record.release.is_none());
    assert!(record.uncertain, "the decision given back may have run");
    assert_eq!(scene.stored("s1", "c1").await["uncertain"], true);
    assert!(!scene.store.is_releasing(&record));
    assert_eq!(scene.logged(), 0);
}
