//! The worker-name lease: one live connection per `(namespace, name)`, as
//! the real engine (0.23) keeps it. Every test runs on the test engine, then
//! on a real engine when one is available, and checks the same frames.
//!
//! What the real engine does (and the test engine imitates): the greeting
//! (`workerregistered`) comes first; a name another live connection holds
//! is refused with `registrationrejected {code: WORKER_NAMESPACE_CONFLICT,
//! namespace, worker_name, owner_worker_id}` and a close frame, tens of
//! milliseconds after the greeting, with no answer to the register call and
//! nothing the refused connection registered applied; names are compared
//! after stripping control and bidi characters and trimming, case counts;
//! the name is free as soon as the holder's socket closes.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, plain_client, EngineFixture};
use iii_sdk::runtime::IIIConnectionState;
use serde_json::{json, Value};

use crate::test_engine::{raw_connect, raw_next, raw_send, RawSocket};

/// Runs `scenario` on the test engine, then on a real one when present.
async fn on_each_engine<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    scenario(EngineFixture::start_test().await).await;
    if let Some(real) = EngineFixture::start_real(test).await {
        scenario(real).await;
    }
}

/// `engine::workers::register` for `name`, answered (it carries an id; the
/// engine drops a frame whose invocation id is not a UUID).
fn register(invocation_id: &str, name: &str) -> Value {
    json!({
        "type": "invokefunction",
        "invocation_id": invocation_id,
        "function_id": "engine::workers::register",
        "data": { "name": name, "pid": std::process::id(), "runtime": "rust" },
    })
}

/// What a claim of a name came to.
#[derive(Debug)]
enum Claim {
    /// The register call was answered `{success: true}`.
    Held,
    /// Refused: the frames that came before the socket closed.
    Refused(Vec<Value>),
}

/// A function id no other claim registers.
fn fresh_function_id() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("lease::f{}", NEXT.fetch_add(1, Ordering::SeqCst))
}

/// Connects, registers a fresh function (returned) and then the worker
/// `name`, and reads until the register call is answered or the engine
/// closes the socket. Returns the greeting, the outcome, the time from the
/// greeting to the last frame, and the socket (kept open when the name is
/// held).
async fn claim(engine: &EngineFixture, name: &str) -> (Value, Claim, Duration, RawSocket) {
    claim_with(engine, name, &fresh_function_id()).await
}

async fn claim_with(
    engine: &EngineFixture,
    name: &str,
    function_id: &str,
) -> (Value, Claim, Duration, RawSocket) {
    let (mut socket, greeting) = raw_connect(engine).await;
    let greeted = Instant::now();
    raw_send(
        &mut socket,
        json!({ "type": "registerfunction", "id": function_id }),
    )
    .await;
    let invocation_id = uuid::Uuid::new_v4().to_string();
    raw_send(&mut socket, register(&invocation_id, name)).await;
    let mut frames = Vec::new();
    loop {
        match raw_next(&mut socket).await {
            Some(frame)
                if frame["type"] == "invocationresult"
                    && frame["invocation_id"] == invocation_id =>
            {
                assert_eq!(frame["result"], json!({ "success": true }), "{frame}");
                return (greeting, Claim::Held, greeted.elapsed(), socket);
            }
            Some(frame) => frames.push(frame),
            None => return (greeting, Claim::Refused(frames), greeted.elapsed(), socket),
        }
    }
}

fn keys(frame: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = frame
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// Rows of `engine::workers::list` named `name`.
async fn workers_named(engine: &EngineFixture, name: &str) -> Vec<Value> {
    let observer = engine.client(&format!("{name}-observer")).await;
    let listed = call(&observer, "engine::workers::list", json!({}))
        .await
        .unwrap();
    listed["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["name"] == name)
        .cloned()
        .collect()
}

/// Ids of `engine::functions::list`.
async fn function_ids(engine: &EngineFixture, observer: &str) -> Vec<String> {
    let observer = engine.client(observer).await;
    let listed = call(&observer, "engine::functions::list", json!({}))
        .await
        .unwrap();
    listed["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function_id"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_held_name_is_refused_after_the_greeting_with_one_frame_then_a_close() {
    on_each_engine("lease_refusal_frames", |engine| async move {
        let kept = fresh_function_id();
        let (holder_hello, held, _, _holder) = claim_with(&engine, "lease-a", &kept).await;
        assert!(matches!(held, Claim::Held), "{held:?}");

        let dropped = fresh_function_id();
        let (hello, refused, took, _) = claim_with(&engine, "lease-a", &dropped).await;
        assert_eq!(
            hello["type"], "workerregistered",
            "the greeting comes first"
        );
        let Claim::Refused(frames) = refused else {
            panic!(
                "a second live lease-a was accepted on the {:?} engine",
                engine.kind()
            );
        };
        // One frame, then the close: the register call is never answered.
        assert_eq!(frames.len(), 1, "{frames:?}");
        let refusal = &frames[0];
        assert_eq!(
            keys(refusal),
            vec![
                "code",
                "namespace",
                "owner_worker_id",
                "type",
                "worker_name"
            ]
        );
        assert_eq!(refusal["type"], "registrationrejected");
        assert_eq!(refusal["code"], "WORKER_NAMESPACE_CONFLICT");
        assert_eq!(refusal["namespace"], "default");
        assert_eq!(refusal["worker_name"], "lease-a");
        assert_eq!(refusal["owner_worker_id"], holder_hello["worker_id"]);
        eprintln!(
            "{:?} engine: greeting → refusal and close in {took:?}",
            engine.kind()
        );

        // The loser left no trace: its function never applied, and the one
        // listed lease-a is the holder.
        let ids = function_ids(&engine, "lease-a-functions").await;
        assert!(ids.contains(&kept), "{ids:?}");
        assert!(!ids.contains(&dropped), "{ids:?}");
        let rows = workers_named(&engine, "lease-a").await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["id"], holder_hello["worker_id"]);
    })
    .await;
}

#[tokio::test]
async fn names_collide_after_control_and_bidi_characters_are_stripped_and_trimmed() {
    on_each_engine("lease_name_variants", |engine| async move {
        let (_, held, _, _holder) = claim(&engine, "lease-b").await;
        assert!(matches!(held, Claim::Held), "{held:?}");
        for variant in [
            "lease-b ",
            " lease-b",
            "\tlease-b\n",
            "lease-b\u{7}",
            "lease\u{202e}-b",
            "lease-\u{2066}b",
        ] {
            let (_, outcome, _, _) = claim(&engine, variant).await;
            let Claim::Refused(frames) = outcome else {
                panic!(
                    "{variant:?} did not collide with lease-b on the {:?} engine",
                    engine.kind()
                );
            };
            assert_eq!(frames.len(), 1, "{variant:?}: {frames:?}");
            assert_eq!(frames[0]["code"], "WORKER_NAMESPACE_CONFLICT");
            assert_eq!(
                frames[0]["worker_name"], "lease-b",
                "the refusal names the cleaned name"
            );
        }
        let (_, other_case, _, _other) = claim(&engine, "Lease-B").await;
        assert!(
            matches!(other_case, Claim::Held),
            "names are case-sensitive: {other_case:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn the_name_is_free_as_soon_as_the_holders_socket_closes() {
    on_each_engine("lease_freed_on_close", |engine| async move {
        let (holder_hello, held, _, holder) = claim(&engine, "lease-c").await;
        assert!(matches!(held, Claim::Held), "{held:?}");
        // A process that dies closes its socket without a close frame.
        drop(holder);
        let closed = Instant::now();
        let mut refusals = 0;
        let took = loop {
            let (_, outcome, _, socket) = claim(&engine, "lease-c").await;
            match outcome {
                Claim::Held => {
                    drop(socket);
                    break closed.elapsed();
                }
                Claim::Refused(frames) => {
                    assert_eq!(frames[0]["owner_worker_id"], holder_hello["worker_id"]);
                    refusals += 1;
                    assert!(
                        closed.elapsed() < Duration::from_secs(10),
                        "lease-c still held 10 s after its holder's socket closed"
                    );
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        eprintln!(
            "{:?} engine: lease-c claimed {took:?} after the holder's socket closed ({refusals} refusals first)",
            engine.kind()
        );
    })
    .await;
}

#[tokio::test]
async fn an_sdk_client_refused_its_name_stops_for_good_and_registers_nothing() {
    on_each_engine("lease_sdk_refused", |engine| async move {
        let (holder_hello, held, _, _holder) = claim(&engine, "lease-d").await;
        assert!(matches!(held, Claim::Held), "{held:?}");

        let loser = plain_client(&engine.url(), "lease-d", None);
        let first = loser.wait_until_registered(Duration::from_secs(15)).await;
        loser.register_function(
            "lease-d::loser",
            iii_sdk::RegisterFunction::new_async(|_: Value| async {
                Ok::<Value, iii_sdk::Error>(json!({}))
            }),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let refusal = loop {
            if let Some(err) = loser.fatal_error() {
                break err;
            }
            assert!(Instant::now() < deadline, "the SDK never saw the refusal");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        eprintln!(
            "{:?} engine: wait_until_registered gave {first:?} before the refusal",
            engine.kind()
        );
        match refusal {
            iii_sdk::Error::RegistrationRejected {
                code,
                namespace,
                worker_name,
                function_id,
                owner_worker_id,
            } => {
                assert_eq!(code, "WORKER_NAMESPACE_CONFLICT");
                assert_eq!(namespace, "default");
                assert_eq!(worker_name.as_deref(), Some("lease-d"));
                assert_eq!(function_id, None);
                assert_eq!(json!(owner_worker_id), holder_hello["worker_id"]);
            }
            other => panic!("not a name refusal: {other:?}"),
        }
        assert_eq!(loser.get_connection_state(), IIIConnectionState::Failed);
        // The SDK reconnects every 2 s; a refused client never does.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(loser.get_connection_state(), IIIConnectionState::Failed);
        let ids = function_ids(&engine, "lease-d-functions").await;
        assert!(!ids.iter().any(|id| id == "lease-d::loser"), "{ids:?}");
        let rows = workers_named(&engine, "lease-d").await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["id"], holder_hello["worker_id"]);
        loser.shutdown_async().await;
    })
    .await;
}
