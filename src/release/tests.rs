//! The claim's lifecycle with the real SDK against the in-process test
//! engine: a release future dropped before the harness is asked gives its
//! record back; one dropped after it leaves the record `releasing` until the
//! recovery asks the harness. A peer plays just the harness functions the
//! release path calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use approval_gate_testkit::fixture::{plain_client, wait_for_functions, EngineFixture};
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

use super::*;
use crate::config::{ApprovalConfig, Snapshot};
use crate::edits::EditGrant;
use crate::pending::GrantRequest;

/// What the fake harness does with a resolve.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolves {
    /// Answer `resolved: true`.
    Take,
    /// Never answer.
    Hang,
}

/// The harness functions the release path calls, scripted.
struct FakeHarness {
    _client: IIIClient,
    resolves: Arc<Mutex<Resolves>>,
    resolve_calls: Arc<AtomicUsize>,
    pending: Arc<Mutex<Vec<String>>>,
}

impl FakeHarness {
    async fn start(url: &str) -> FakeHarness {
        let client = plain_client(url, "harness", None);
        let resolves = Arc::new(Mutex::new(Resolves::Take));
        let resolve_calls = Arc::new(AtomicUsize::new(0));
        let pending = Arc::new(Mutex::new(Vec::<String>::new()));
        let (mode, calls) = (resolves.clone(), resolve_calls.clone());
        client.register_function(
            "harness::function::resolve",
            RegisterFunction::new_async(move |_: Value| {
                let (mode, calls) = (mode.clone(), calls.clone());
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let now = *mode.lock().unwrap();
                    if now == Resolves::Hang {
                        tokio::time::sleep(Duration::from_secs(600)).await;
                    }
                    Ok::<Value, iii_sdk::Error>(json!({"resolved": true, "turn_resumed": true}))
                }
            }),
        );
        // A grant that never answers: the release is stuck before the
        // harness is asked.
        client.register_function(
            "harness::filesystem::grant",
            RegisterFunction::new_async(move |_: Value| async move {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok::<Value, iii_sdk::Error>(json!({}))
            }),
        );
        client.register_function(
            "harness::filesystem::grants",
            RegisterFunction::new_async(move |input: Value| async move {
                Ok::<Value, iii_sdk::Error>(json!({"session_id": input["session_id"], "roots": []}))
            }),
        );
        let listed = pending.clone();
        client.register_function(
            "harness::status",
            RegisterFunction::new_async(move |_: Value| {
                let listed = listed.clone();
                async move {
                    let calls = listed.lock().unwrap().clone();
                    Ok::<Value, iii_sdk::Error>(json!({"pending_function_calls": calls}))
                }
            }),
        );
        wait_for_functions(
            &client,
            &[
                "harness::function::resolve",
                "harness::filesystem::grant",
                "harness::filesystem::grants",
                "harness::status",
            ],
        )
        .await;
        FakeHarness {
            _client: client,
            resolves,
            resolve_calls,
            pending,
        }
    }
}

/// A releaser on its own connection, with one record held.
async fn setup(url: &str, kind: RecordKind) -> (Arc<Releaser>, Arc<PendingStore>) {
    let client = plain_client(url, "approval-gate-under-test", None);
    client
        .wait_until_registered(Duration::from_secs(10))
        .await
        .expect("connected");
    let engine = Engine::new(client);
    let config = Arc::new(ConfigCell::new(
        Snapshot::compile(ApprovalConfig::default()),
    ));
    let inbox = Arc::new(PendingStore::new(engine.clone(), config.clone()));
    let settings = Arc::new(SettingsStore::new(engine.clone(), config.clone()));
    let folders = Arc::new(Folders::new(engine.clone()));
    let edits = Arc::new(EditStore::new(engine.clone()));
    let releaser = Releaser::new(engine, inbox.clone(), settings, folders, config, edits);
    let mut record = crate::hook::record::build_record(
        &crate::hook::parse_hook_input(json!({
            "point": "pre_trigger", "session_id": "s1", "turn_id": "t1",
            "call": {"id": "c1", "function_id": "shell::run", "arguments": {"cmd": "ls"}}
        }))
        .expect("input"),
        &crate::hook::HookCall {
            id: "c1".into(),
            function_id: "shell::run".into(),
            arguments: Some(json!({"cmd": "ls"})),
        },
        kind,
        Default::default(),
    );
    if kind == RecordKind::FolderAccess {
        record.grant_request = Some(Box::new(GrantRequest {
            dir: "/data".into(),
            offending_path: "/data/x".into(),
            error_code: "S215".into(),
        }));
    }
    let lock = inbox.lock("s1", "c1").await;
    let arguments = crate::redact::redact_full(&record.arguments_excerpt.to_value());
    lock.write(record, arguments).await.expect("held");
    drop(lock);
    (releaser, inbox)
}

fn request(decision: Ruling) -> Request {
    Request {
        session_id: "s1".into(),
        function_call_id: "c1".into(),
        expected: None,
        decision,
        via: ReleaseVia::Resolve,
        caller: None,
    }
}

fn claim_note() -> ReleaseNote {
    ReleaseNote {
        decision: RulingKind::Allow,
        via: ReleaseVia::Resolve,
        at: now_ms(),
        granted: None,
        caller: None,
        edited: false,
    }
}

fn edit_note() -> ReleaseNote {
    ReleaseNote {
        decision: RulingKind::Deny,
        edited: true,
        ..claim_note()
    }
}

async fn claimed(inbox: &Arc<PendingStore>) -> Claim {
    claimed_with(inbox, claim_note()).await
}

async fn claimed_with(inbox: &Arc<PendingStore>, note: ReleaseNote) -> Claim {
    match inbox.claim("s1", "c1", None, note).await {
        Ok(Take::Claimed(claim)) => claim,
        other => panic!("not claimed: {other:?}"),
    }
}

async fn until(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_release_dropped_before_the_harness_is_asked_gives_the_record_back() {
    let engine = EngineFixture::start_test().await;
    let harness = FakeHarness::start(&engine.url()).await;
    let (releaser, inbox) = setup(&engine.url(), RecordKind::FolderAccess).await;
    let claim = claimed(&inbox).await;
    assert!(
        inbox.get("s1", "c1").unwrap().releasing,
        "marked before the harness"
    );
    // The session grant never answers, so the release is stuck before the
    // harness is asked; its future is dropped there.
    let carry = releaser.carry(
        claim,
        request(Ruling::Allow {
            grant_scope: Some(GrantScope::Session),
            remember: Remember::Nothing,
        }),
    );
    assert!(tokio::time::timeout(Duration::from_millis(500), carry)
        .await
        .is_err());
    assert!(
        until(|| inbox.get("s1", "c1").is_some_and(|r| !r.releasing)).await,
        "the record is pending again"
    );
    assert_eq!(harness.resolve_calls.load(Ordering::SeqCst), 0);
    // And a new decision releases it.
    let answer = releaser
        .release(request(Ruling::Deny { reason: None }), None)
        .await;
    assert!(
        matches!(
            answer,
            Answer::Taken {
                announced: true,
                ..
            }
        ),
        "{answer:?}"
    );
    assert!(inbox.get("s1", "c1").is_none());
    assert_eq!(harness.resolve_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_release_dropped_after_the_harness_is_asked_stays_releasing_until_recovered() {
    let engine = EngineFixture::start_test().await;
    let harness = FakeHarness::start(&engine.url()).await;
    let (releaser, inbox) = setup(&engine.url(), RecordKind::Function).await;
    *harness.resolves.lock().unwrap() = Resolves::Hang;
    let mut orphans = inbox.take_orphans().expect("the orphan channel");
    let claim = claimed(&inbox).await;
    let carry = releaser.carry(
        claim,
        request(Ruling::Allow {
            grant_scope: None,
            remember: Remember::Nothing,
        }),
    );
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    assert_eq!(
        harness.resolve_calls.load(Ordering::SeqCst),
        1,
        "the harness was asked"
    );
    // The call may be running: the record stays releasing, and every other
    // decision answers so.
    assert!(inbox.get("s1", "c1").unwrap().releasing);
    let other = releaser
        .release(request(Ruling::Deny { reason: None }), None)
        .await;
    assert!(matches!(other, Answer::Releasing), "{other:?}");
    // The recovery gets the orphan; the harness still lists the call as
    // pending, so it is pending again and can be decided anew.
    let key = tokio::time::timeout(Duration::from_secs(5), orphans.recv())
        .await
        .expect("an orphan")
        .expect("a key");
    assert_eq!(key, ("s1".to_string(), "c1".to_string()));
    harness.pending.lock().unwrap().push("c1".into());
    let recovered = recover::recover(&releaser, key, "test").await;
    assert!(
        matches!(recovered, Some(Answer::Unavailable(_))),
        "{recovered:?}"
    );
    let record = inbox.get("s1", "c1").expect("still held");
    assert!(!record.releasing);
    assert!(record.uncertain, "the lost allow may have run");
    *harness.resolves.lock().unwrap() = Resolves::Take;
    let answer = releaser
        .release(
            request(Ruling::Allow {
                grant_scope: None,
                remember: Remember::Nothing,
            }),
            None,
        )
        .await;
    assert!(
        matches!(
            answer,
            Answer::Taken {
                announced: true,
                ..
            }
        ),
        "{answer:?}"
    );
    assert!(inbox.get("s1", "c1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_20_a_recovered_release_the_harness_no_longer_lists_is_unknown() {
    let engine = EngineFixture::start_test().await;
    let harness = FakeHarness::start(&engine.url()).await;
    let (releaser, inbox) = setup(&engine.url(), RecordKind::Function).await;
    *harness.resolves.lock().unwrap() = Resolves::Hang;
    let claim = claimed(&inbox).await;
    let carry = releaser.carry(claim, request(Ruling::Deny { reason: None }));
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    let recovered = recover::recover(&releaser, ("s1".into(), "c1".into()), "test").await;
    assert!(matches!(recovered, Some(Answer::Unknown)), "{recovered:?}");
    assert!(inbox.get("s1", "c1").is_none(), "settled as unknown");
    // A second recovery of the same key finds nothing to do.
    assert!(
        recover::recover(&releaser, ("s1".into(), "c1".into()), "test")
            .await
            .is_none()
    );
}

fn edit_ruling() -> Ruling {
    Ruling::Edit {
        to_model: "Denied by a human: call shell::run with these arguments instead: {}".into(),
        shown: "Denied by a human: call shell::run with these arguments instead: {}".into(),
    }
}

/// The edit grant `made_on: c1` in session s1, unused.
async fn write_edit_grant(releaser: &Releaser) {
    let now = now_ms();
    let grant = EditGrant {
        made_on: "c1".into(),
        function_id: "shell::run".into(),
        digest: "d1".into(),
        expires_at: now + 600_000,
        used_by: None,
    };
    releaser
        .edits
        .add("s1", grant, now)
        .await
        .expect("the grant is written");
}

async fn edit_grants(releaser: &Releaser) -> usize {
    releaser
        .edits
        .read("s1")
        .await
        .expect("the grants are read")
        .grants
        .len()
}

#[test]
fn rule_28_1_only_an_edit_the_harness_did_not_confirm_loses_its_grant() {
    let taken = Answer::Taken {
        turn_resumed: Some(true),
        announced: true,
    };
    let edit = edit_note();
    let deny = ReleaseNote {
        decision: RulingKind::Deny,
        ..claim_note()
    };
    assert!(recover::takes_back_edit(Some(&edit), &Answer::Unknown));
    assert!(recover::takes_back_edit(Some(&edit), &Answer::NotHeld));
    assert!(recover::takes_back_edit(Some(&edit), &Answer::Releasing));
    assert!(!recover::takes_back_edit(Some(&edit), &taken));
    assert!(!recover::takes_back_edit(Some(&deny), &Answer::Unknown));
    assert!(!recover::takes_back_edit(None, &Answer::Unknown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_28_1_a_recovered_edit_release_takes_its_grant_back_whatever_the_harness_lists() {
    let engine = EngineFixture::start_test().await;
    let harness = FakeHarness::start(&engine.url()).await;
    let (releaser, inbox) = setup(&engine.url(), RecordKind::Function).await;
    *harness.resolves.lock().unwrap() = Resolves::Hang;
    // Still held at the harness: pending again, and the grant goes.
    write_edit_grant(&releaser).await;
    let claim = claimed_with(&inbox, edit_note()).await;
    let carry = releaser.carry(claim, request(edit_ruling()));
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    assert_eq!(
        edit_grants(&releaser).await,
        1,
        "written before the release"
    );
    harness.pending.lock().unwrap().push("c1".into());
    let recovered = recover::recover(&releaser, ("s1".into(), "c1".into()), "test").await;
    assert!(
        matches!(recovered, Some(Answer::Unavailable(_))),
        "{recovered:?}"
    );
    assert_eq!(edit_grants(&releaser).await, 0, "taken back");
    // No longer listed: unknown, and the grant goes too.
    write_edit_grant(&releaser).await;
    harness.pending.lock().unwrap().clear();
    let claim = claimed_with(&inbox, edit_note()).await;
    let carry = releaser.carry(claim, request(edit_ruling()));
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    let recovered = recover::recover(&releaser, ("s1".into(), "c1".into()), "test").await;
    assert!(matches!(recovered, Some(Answer::Unknown)), "{recovered:?}");
    assert_eq!(edit_grants(&releaser).await, 0, "taken back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_28_1_a_recovered_plain_denial_and_a_used_grant_are_left_alone() {
    let engine = EngineFixture::start_test().await;
    let harness = FakeHarness::start(&engine.url()).await;
    let (releaser, inbox) = setup(&engine.url(), RecordKind::Function).await;
    *harness.resolves.lock().unwrap() = Resolves::Hang;
    write_edit_grant(&releaser).await;
    // A plain denial's recovery never touches the session's edit grants.
    let claim = claimed_with(
        &inbox,
        ReleaseNote {
            decision: RulingKind::Deny,
            ..claim_note()
        },
    )
    .await;
    let carry = releaser.carry(claim, request(Ruling::Deny { reason: None }));
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    harness.pending.lock().unwrap().push("c1".into());
    let recovered = recover::recover(&releaser, ("s1".into(), "c1".into()), "test").await;
    assert!(
        matches!(recovered, Some(Answer::Unavailable(_))),
        "{recovered:?}"
    );
    assert_eq!(edit_grants(&releaser).await, 1, "not an edit's release");
    // A grant the model already used stays, edit or not.
    let used = releaser
        .edits
        .take("s1", "shell::run", "d1", "c2")
        .await
        .expect("the use is claimed");
    assert_eq!(
        used,
        crate::edits::store::Used::Claimed {
            made_on: "c1".into()
        }
    );
    let claim = claimed_with(&inbox, edit_note()).await;
    let carry = releaser.carry(claim, request(edit_ruling()));
    assert!(tokio::time::timeout(Duration::from_millis(800), carry)
        .await
        .is_err());
    let recovered = recover::recover(&releaser, ("s1".into(), "c1".into()), "test").await;
    assert!(
        matches!(recovered, Some(Answer::Unavailable(_))),
        "{recovered:?}"
    );
    assert_eq!(edit_grants(&releaser).await, 1, "a used grant stays");
}
