//! The test engine's own tests: one per behaviour it promises.
//!
//! Tests that start with `EngineFixture::start()` describe the real engine
//! too, and run against it when `III_ENGINE_BIN` points at one; tests that
//! need fault injection, dropped connections or counters use
//! `EngineFixture::start_test()`.

// The SDK deprecates trigger types and plain bindings in favour of observers,
// which the engine the worker targets does not have; the tests still use them.
#![allow(deprecated)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, wait_for_functions, EngineFixture, EngineKind};
use futures_util::{SinkExt, StreamExt};
use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{IIIClient, RegisterFunction, RegisterTriggerType, TriggerAction};
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;

const WAIT: Duration = Duration::from_secs(15);

// ── helpers ────────────────────────────────────────────────────────────

fn echo() -> RegisterFunction {
    RegisterFunction::new_async(|input: Value| async move { Ok::<Value, iii_sdk::Error>(input) })
}

/// A function that hands every payload it receives to the test.
fn recorder() -> (RegisterFunction, UnboundedReceiver<Value>) {
    let (tx, rx) = unbounded_channel();
    let function = RegisterFunction::new_async(move |input: Value| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(input);
            Ok::<Value, iii_sdk::Error>(json!({ "recorded": true }))
        }
    });
    (function, rx)
}

/// A function that answers after `delay`.
fn slow(delay: Duration) -> RegisterFunction {
    RegisterFunction::new_async(move |_: Value| async move {
        tokio::time::sleep(delay).await;
        Ok::<Value, iii_sdk::Error>(json!("late"))
    })
}

async fn next<T>(rx: &mut UnboundedReceiver<T>, what: &str) -> T {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(item)) => item,
        _ => panic!("never got {what}"),
    }
}

/// Nothing arrives within `window`.
async fn quiet<T: std::fmt::Debug>(rx: &mut UnboundedReceiver<T>, window: Duration, what: &str) {
    if let Ok(Some(item)) = tokio::time::timeout(window, rx.recv()).await {
        panic!("unexpected {what}: {item:?}");
    }
}

#[derive(Debug, Clone)]
enum Seen {
    Bound(TriggerConfig),
    Unbound(String),
}

/// A trigger-type provider that reports what the engine sends it and refuses
/// configs carrying `"reject": true`.
struct Provider {
    seen: UnboundedSender<Seen>,
}

#[async_trait::async_trait]
impl TriggerHandler for Provider {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        let reject = config.config["reject"] == json!(true);
        let _ = self.seen.send(Seen::Bound(config));
        if reject {
            return Err(iii_sdk::Error::Handler("config refused by provider".into()));
        }
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        let _ = self.seen.send(Seen::Unbound(config.id));
        Ok(())
    }
}

fn provide(client: &IIIClient, trigger_type: &str) -> UnboundedReceiver<Seen> {
    let (seen, rx) = unbounded_channel();
    client.register_trigger_type(RegisterTriggerType::new(
        trigger_type,
        "a test trigger type",
        Provider { seen },
    ));
    rx
}

async fn next_bound(rx: &mut UnboundedReceiver<Seen>) -> TriggerConfig {
    loop {
        if let Seen::Bound(config) = next(rx, "a binding at the provider").await {
            return config;
        }
    }
}

async fn next_unbound(rx: &mut UnboundedReceiver<Seen>) -> String {
    loop {
        if let Seen::Unbound(id) = next(rx, "an unbinding at the provider").await {
            return id;
        }
    }
}

fn bind(client: &IIIClient, trigger_type: &str, function_id: &str, config: Value) {
    client
        .register_trigger(RegisterTriggerInput::new(trigger_type, function_id, config))
        .unwrap_or_else(|err| panic!("binding {function_id} to {trigger_type} failed: {err}"));
}

fn remote(result: Result<Value, iii_sdk::Error>) -> (String, String) {
    match result {
        Err(iii_sdk::Error::Remote { code, message, .. }) => (code, message),
        other => panic!("expected an engine error, got {other:?}"),
    }
}

async fn registered_triggers(client: &IIIClient) -> Vec<Value> {
    let listed = call(client, "engine::registered-triggers::list", json!({}))
        .await
        .unwrap();
    listed["registered_triggers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Polls `engine::registered-triggers::list` until a row matches.
async fn wait_for_registered(client: &IIIClient, matches: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(row) = registered_triggers(client).await.into_iter().find(&matches) {
            return row;
        }
        assert!(Instant::now() < deadline, "binding never became live");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ── handshake and routing ──────────────────────────────────────────────

#[tokio::test]
async fn calls_route_between_two_clients_sync_and_void() {
    let engine = EngineFixture::start().await;
    let server = engine.client("routing-server").await;
    let caller = engine.client("routing-caller").await;
    server.register_function("routing::echo", echo());
    let (recording, mut received) = recorder();
    server.register_function("routing::record", recording);
    wait_for_functions(&caller, &["routing::echo", "routing::record"]).await;

    let answer = call(&caller, "routing::echo", json!({ "n": 1 }))
        .await
        .unwrap();
    assert_eq!(answer["n"], 1);

    let void = caller
        .trigger(TriggerRequest {
            function_id: "routing::record".into(),
            payload: json!({ "fire": "and forget" }),
            action: Some(TriggerAction::Void),
            timeout_ms: None,
        })
        .await
        .unwrap();
    assert_eq!(void, Value::Null);
    assert_eq!(
        next(&mut received, "the void call").await["fire"],
        "and forget"
    );
}

#[tokio::test]
async fn messages_larger_than_one_frame_get_through() {
    let engine = EngineFixture::start().await;
    let server = engine.client("large-server").await;
    let caller = engine.client("large-caller").await;
    server.register_function("large::echo", echo());
    wait_for_functions(&caller, &["large::echo"]).await;
    // Past the SDK's 16 MiB frame size: the message travels in fragments.
    let blob = "x".repeat(20 << 20);
    let answer = call(&caller, "large::echo", json!({ "blob": blob }))
        .await
        .unwrap();
    assert_eq!(answer["blob"].as_str().map(str::len), Some(20 << 20));
}

#[tokio::test]
async fn the_callers_worker_id_is_stamped_into_object_payloads() {
    let engine = EngineFixture::start().await;
    let server = engine.client("stamp-server").await;
    let caller = engine.client("stamp-caller").await;
    server.register_function("stamp::echo", echo());
    wait_for_functions(&caller, &["stamp::echo"]).await;

    let answer = call(&caller, "stamp::echo", json!({ "a": 1 }))
        .await
        .unwrap();
    let stamped = answer["_caller_worker_id"].as_str().unwrap().to_string();
    let workers = call(&caller, "engine::workers::list", json!({}))
        .await
        .unwrap();
    let caller_row = workers["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "stamp-caller")
        .cloned()
        .unwrap();
    assert_eq!(caller_row["id"], json!(stamped));

    let scalar = call(&caller, "stamp::echo", json!(7)).await.unwrap();
    assert_eq!(scalar, json!(7));
}

#[tokio::test]
async fn an_unknown_function_is_function_not_found() {
    let engine = EngineFixture::start().await;
    let caller = engine.client("lost-caller").await;
    let (code, message) = remote(call(&caller, "nobody::here", json!({})).await);
    assert_eq!(code, "function_not_found");
    assert_eq!(
        message,
        "Function nobody::here not found in namespace default."
    );
}

#[tokio::test]
async fn a_callee_that_disconnects_mid_call_stops_the_call() {
    let engine = EngineFixture::start().await;
    let server = engine.client("stopped-server").await;
    let caller = engine.client("stopped-caller").await;
    server.register_function("stopped::slow", slow(Duration::from_secs(8)));
    wait_for_functions(&caller, &["stopped::slow"]).await;

    let pending = tokio::spawn({
        let caller = caller.clone();
        async move { call(&caller, "stopped::slow", json!({})).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.shutdown_async().await;
    let started = Instant::now();
    let (code, _) = remote(pending.await.unwrap());
    assert_eq!(code, "invocation_stopped");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn metadata_travels_with_calls_and_bindings() {
    let engine = EngineFixture::start().await;
    let server = engine.client("meta-server").await;
    let (tx, mut seen) = unbounded_channel();
    server.register_function(
        "meta::show",
        RegisterFunction::new_async(move |input: Value, metadata: Option<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((input, metadata.clone()));
                Ok::<Value, iii_sdk::Error>(json!({ "metadata": metadata }))
            }
        }),
    );
    let caller = engine.client("meta-caller").await;
    wait_for_functions(&caller, &["meta::show"]).await;

    let answer = caller
        .trigger(TriggerRequest::new("meta::show", json!({})).metadata(json!({ "tenant": "t1" })))
        .await
        .unwrap();
    assert_eq!(answer["metadata"], json!({ "tenant": "t1" }));
    next(&mut seen, "the direct call").await;

    call(
        &caller,
        "engine::register_trigger",
        json!({
            "trigger_type": "state",
            "function_id": "meta::show",
            "config": { "scope": "meta" },
            "metadata": { "binding": "b1" }
        }),
    )
    .await
    .unwrap();
    call(
        &caller,
        "state::set",
        json!({ "scope": "meta", "key": "k", "value": 1 }),
    )
    .await
    .unwrap();
    let (event, metadata) = next(&mut seen, "the state event").await;
    assert_eq!(event["event_type"], "state:created");
    assert!(
        event.get("_caller_worker_id").is_none(),
        "engine deliveries carry no caller"
    );
    assert_eq!(metadata, Some(json!({ "binding": "b1" })));
}

#[tokio::test]
async fn an_engine_provider_refuses_a_bad_config() {
    let engine = EngineFixture::start().await;
    let c = engine.client("badcfg-binder").await;
    let refused = call(
        &c,
        "engine::register_trigger",
        json!({ "trigger_type": "state", "function_id": "badcfg::f", "config": "nope" }),
    )
    .await;
    let (code, message) = remote(refused);
    assert_eq!(code, "trigger_registration_failed");
    assert_eq!(message, "Failed to parse trigger config: invalid type: string \"nope\", expected struct StateTriggerConfig");
}

// ── the wire, seen by a hand-written client ────────────────────────────

pub(crate) type RawSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A client without the SDK: connects and returns the greeting.
pub(crate) async fn raw_connect(engine: &EngineFixture) -> (RawSocket, Value) {
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("{}/", engine.url()))
        .await
        .unwrap();
    let hello = raw_next(&mut socket).await.expect("a greeting");
    (socket, hello)
}

pub(crate) async fn raw_send(socket: &mut RawSocket, frame: Value) {
    socket
        .send(WsMessage::Text(frame.to_string().into()))
        .await
        .unwrap();
}

/// The next JSON frame, or `None` when the engine closed the socket.
pub(crate) async fn raw_next(socket: &mut RawSocket) -> Option<Value> {
    loop {
        match tokio::time::timeout(WAIT, socket.next()).await {
            Ok(Some(Ok(WsMessage::Text(text)))) => {
                return Some(serde_json::from_str(text.as_str()).unwrap())
            }
            Ok(Some(Ok(WsMessage::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => return None,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!("the engine sent nothing"),
        }
    }
}

fn announce(name: &str) -> Value {
    json!({
        "type": "invokefunction",
        "function_id": "engine::workers::register",
        "data": { "name": name, "pid": 1, "runtime": "rust" },
        "action": { "type": "void" }
    })
}

fn keys(frame: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = frame
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[tokio::test]
async fn wire_frames_have_the_real_engines_shape() {
    let engine = EngineFixture::start().await;
    let (mut provider, hello) = raw_connect(&engine).await;
    assert_eq!(keys(&hello), vec!["reattach_token", "type", "worker_id"]);
    assert_eq!(hello["type"], "workerregistered");
    raw_send(
        &mut provider,
        json!({ "type": "registerfunction", "id": "wire::f" }),
    )
    .await;
    raw_send(
        &mut provider,
        json!({ "type": "registertriggertype", "id": "wire::kind", "description": "d" }),
    )
    .await;
    raw_send(&mut provider, announce("wire-provider")).await;
    raw_send(&mut provider, json!({ "type": "ping" })).await;
    assert_eq!(
        raw_next(&mut provider).await.unwrap(),
        json!({ "type": "pong" })
    );

    let (mut other, _) = raw_connect(&engine).await;
    raw_send(
        &mut other,
        json!({ "type": "registerfunction", "id": "wire::f" }),
    )
    .await;
    raw_send(&mut other, announce("wire-other")).await;
    let rejected = raw_next(&mut other).await.unwrap();
    assert_eq!(
        keys(&rejected),
        vec![
            "code",
            "function_id",
            "namespace",
            "owner_worker_id",
            "type"
        ]
    );
    assert_eq!(rejected["code"], "FUNCTION_NAMESPACE_CONFLICT");
    assert_eq!(rejected["owner_worker_id"], hello["worker_id"]);

    raw_send(
        &mut other,
        json!({ "type": "registertrigger", "id": "wire-t1", "trigger_type": "wire::kind",
                "function_id": "wire::g", "config": { "c": 1 } }),
    )
    .await;
    let forwarded = raw_next(&mut provider).await.unwrap();
    assert_eq!(
        forwarded,
        json!({ "type": "registertrigger", "id": "wire-t1", "trigger_type": "wire::kind",
                "function_id": "wire::g", "config": { "c": 1 } })
    );
    raw_send(
        &mut other,
        json!({ "type": "unregistertrigger", "id": "wire-t1" }),
    )
    .await;
    assert_eq!(
        raw_next(&mut provider).await.unwrap(),
        json!({ "type": "unregistertrigger", "id": "wire-t1", "trigger_type": "wire::kind" })
    );

    // A void call still reaches the callee with an id of its own.
    raw_send(
        &mut other,
        json!({ "type": "invokefunction", "function_id": "wire::f", "data": { "v": 1 },
                "action": { "type": "void" } }),
    )
    .await;
    let delivered = raw_next(&mut provider).await.unwrap();
    assert_eq!(delivered["type"], "invokefunction");
    assert!(delivered["invocation_id"].is_string());
    assert!(delivered.get("action").is_none());
    assert!(delivered["data"]["_caller_worker_id"].is_string());

    let (mut twin, _) = raw_connect(&engine).await;
    raw_send(&mut twin, announce("wire-provider")).await;
    let refused = raw_next(&mut twin).await.unwrap();
    assert_eq!(
        keys(&refused),
        vec![
            "code",
            "namespace",
            "owner_worker_id",
            "type",
            "worker_name"
        ]
    );
    assert_eq!(refused["code"], "WORKER_NAMESPACE_CONFLICT");
    assert_eq!(refused["worker_name"], "wire-provider");
    assert!(
        raw_next(&mut twin).await.is_none(),
        "the engine closes the twin"
    );
}

// ── ownership ──────────────────────────────────────────────────────────

#[tokio::test]
async fn a_second_owner_of_a_function_id_is_refused() {
    let engine = EngineFixture::start().await;
    let first = engine.client("owner-first").await;
    first.register_function(
        "owned::f",
        RegisterFunction::new_async(|_: Value| async {
            Ok::<Value, iii_sdk::Error>(json!("first"))
        }),
    );
    let caller = engine.client("owner-caller").await;
    wait_for_functions(&caller, &["owned::f"]).await;

    let second = engine.client("owner-second").await;
    second.register_function(
        "owned::f",
        RegisterFunction::new_async(|_: Value| async {
            Ok::<Value, iii_sdk::Error>(json!("second"))
        }),
    );
    second.register_function("owned::other", echo());
    // The same connection's later registration is live: the refusal happened.
    wait_for_functions(&caller, &["owned::other"]).await;

    for _ in 0..3 {
        assert_eq!(call(&caller, "owned::f", json!({})).await.unwrap(), "first");
    }
    assert!(
        second.fatal_error().is_none(),
        "a function conflict is not fatal"
    );
    let listed = call(
        &caller,
        "engine::functions::list",
        json!({ "prefix": "owned::" }),
    )
    .await
    .unwrap();
    let owner = listed["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function_id"] == "owned::f")
        .cloned()
        .unwrap();
    assert_eq!(owner["worker_name"], "owner-first");
}

#[tokio::test]
async fn a_second_live_worker_with_the_same_name_is_refused_and_stops() {
    let engine = EngineFixture::start().await;
    let first = engine.client("same-name").await;
    first.register_function("samename::first", echo());
    let caller = engine.client("same-name-caller").await;
    wait_for_functions(&caller, &["samename::first"]).await;

    let second = engine.client("same-name").await;
    eventually("the second worker is refused", || {
        matches!(
            second.fatal_error(),
            Some(iii_sdk::Error::RegistrationRejected { ref code, .. })
                if code == "WORKER_NAMESPACE_CONFLICT"
        )
    })
    .await;
    second.register_function("samename::second", echo());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = call(
        &caller,
        "engine::functions::list",
        json!({ "prefix": "samename::" }),
    )
    .await
    .unwrap();
    let ids: Vec<&str> = listed["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function_id"].as_str())
        .collect();
    assert_eq!(ids, vec!["samename::first"]);
    assert!(call(&caller, "samename::first", json!({})).await.is_ok());
}

// ── trigger types and bindings ─────────────────────────────────────────

#[tokio::test]
async fn a_binding_is_forwarded_to_the_types_provider() {
    let engine = EngineFixture::start().await;
    let provider = engine.client("fwd-provider").await;
    let mut seen = provide(&provider, "fwd::kind");
    let binder = engine.client("fwd-binder").await;
    let (target, mut fired) = recorder();
    binder.register_function("fwd::target", target);
    wait_for_functions(&binder, &["fwd::target"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    bind(
        &binder,
        "fwd::kind",
        "fwd::target",
        json!({ "every": "tick" }),
    );
    let bound = next_bound(&mut seen).await;
    assert_eq!(bound.function_id, "fwd::target");
    assert_eq!(bound.config, json!({ "every": "tick" }));

    // Firing is the provider's job: it calls the bound function.
    call(&provider, &bound.function_id, json!({ "tick": 1 }))
        .await
        .unwrap();
    assert_eq!(next(&mut fired, "the fired call").await["tick"], 1);
    let row = wait_for_registered(&binder, |row| row["id"] == json!(bound.id)).await;
    assert_eq!(row["trigger_type"], "fwd::kind");
    assert_eq!(row["worker_name"], "fwd-binder");
}

#[tokio::test]
async fn a_binding_without_a_provider_waits_for_one() {
    let engine = EngineFixture::start().await;
    let binder = engine.client("park-binder").await;
    binder.register_function("park::target", echo());
    wait_for_functions(&binder, &["park::target"]).await;
    bind(
        &binder,
        "park::kind",
        "park::target",
        json!({ "parked": true }),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        registered_triggers(&binder)
            .await
            .iter()
            .all(|row| row["trigger_type"] != "park::kind"),
        "a parked binding is not listed"
    );

    let provider = engine.client("park-provider").await;
    let mut seen = provide(&provider, "park::kind");
    let bound = next_bound(&mut seen).await;
    assert_eq!(bound.function_id, "park::target");
    assert_eq!(bound.config, json!({ "parked": true }));
    wait_for_registered(&binder, |row| row["id"] == json!(bound.id)).await;
}

#[tokio::test]
async fn a_new_provider_of_a_type_gets_its_bindings_again() {
    let engine = EngineFixture::start().await;
    let first = engine.client("again-provider-1").await;
    let mut first_seen = provide(&first, "again::kind");
    let binder = engine.client("again-binder").await;
    binder.register_function("again::target", echo());
    wait_for_functions(&binder, &["again::target"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    bind(&binder, "again::kind", "again::target", json!({ "n": 1 }));
    let original = next_bound(&mut first_seen).await;

    // A provider registering the type while the first is still connected
    // takes over its live bindings.
    let second = engine.client("again-provider-2").await;
    let mut second_seen = provide(&second, "again::kind");
    let taken_over = next_bound(&mut second_seen).await;
    assert_eq!(taken_over.id, original.id);
    assert_eq!(taken_over.config, json!({ "n": 1 }));

    // Its provider gone, the binding parks; the next provider gets it.
    second.shutdown_async().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = engine.client("again-provider-3").await;
    let mut third_seen = provide(&third, "again::kind");
    assert_eq!(next_bound(&mut third_seen).await.id, original.id);
}

#[tokio::test]
async fn a_binders_disconnect_unregisters_its_bindings() {
    let engine = EngineFixture::start().await;
    let provider = engine.client("gone-provider").await;
    let mut seen = provide(&provider, "gone::kind");
    let binder = engine.client("gone-binder").await;
    binder.register_function("gone::target", echo());
    wait_for_functions(&binder, &["gone::target"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    bind(&binder, "gone::kind", "gone::target", json!({}));
    let bound = next_bound(&mut seen).await;

    binder.shutdown_async().await;
    assert_eq!(next_unbound(&mut seen).await, bound.id);
    let observer = engine.client("gone-observer").await;
    assert!(registered_triggers(&observer)
        .await
        .iter()
        .all(|row| row["id"] != json!(bound.id)));
}

#[tokio::test]
async fn a_provider_refusal_reaches_the_durable_caller_and_parks_a_plain_binding() {
    let engine = EngineFixture::start().await;
    let provider = engine.client("refuse-provider").await;
    let mut seen = provide(&provider, "refuse::kind");
    let binder = engine.client("refuse-binder").await;
    binder.register_function("refuse::target", echo());
    wait_for_functions(&binder, &["refuse::target"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let refused = call(
        &binder,
        "engine::register_trigger",
        json!({ "trigger_type": "refuse::kind", "function_id": "refuse::target", "config": { "reject": true } }),
    )
    .await;
    let (code, message) = remote(refused);
    assert_eq!(code, "trigger_registration_failed");
    assert!(message.contains("config refused by provider"), "{message}");

    let accepted = call(
        &binder,
        "engine::register_trigger",
        json!({ "trigger_type": "refuse::kind", "function_id": "refuse::target", "config": { "ok": 1 } }),
    )
    .await
    .unwrap();
    assert!(accepted["id"].is_string());

    // A plain binding's refusal only parks it: it is no longer listed.
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await {}
    bind(
        &binder,
        "refuse::kind",
        "refuse::target",
        json!({ "reject": true }),
    );
    let refused = next_bound(&mut seen).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rows = registered_triggers(&binder).await;
    assert!(rows.iter().all(|row| row["id"] != json!(refused.id)));
    assert!(rows.iter().any(|row| row["id"] == accepted["id"]));
}

#[tokio::test]
async fn a_durable_binding_outlives_its_binder_until_unregistered() {
    let engine = EngineFixture::start().await;
    let provider = engine.client("durable-provider").await;
    let mut seen = provide(&provider, "durable::kind");
    let binder = engine.client("durable-binder").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let made = call(
        &binder,
        "engine::register_trigger",
        json!({ "trigger_type": "durable::kind", "function_id": "durable::target", "config": { "d": 1 } }),
    )
    .await
    .unwrap();
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(next_bound(&mut seen).await.id, id);

    binder.shutdown_async().await;
    quiet(&mut seen, Duration::from_millis(800), "an unbinding").await;
    let other = engine.client("durable-other").await;
    wait_for_registered(&other, |row| row["id"] == json!(id)).await;

    let removed = call(&other, "engine::unregister_trigger", json!({ "id": id }))
        .await
        .unwrap();
    assert_eq!(removed["removed"], true);
    assert_eq!(next_unbound(&mut seen).await, id);
    let again = call(&other, "engine::unregister_trigger", json!({ "id": id }))
        .await
        .unwrap();
    assert_eq!(again["removed"], false);
}

#[tokio::test]
async fn a_durable_binding_to_an_absent_type_is_accepted_at_once() {
    let engine = EngineFixture::start().await;
    let binder = engine.client("absent-binder").await;
    let started = Instant::now();
    let made = call(
        &binder,
        "engine::register_trigger",
        json!({ "trigger_type": "absent::kind", "function_id": "absent::target", "config": {} }),
    )
    .await
    .unwrap();
    assert!(made["id"].is_string());
    assert!(started.elapsed() < Duration::from_secs(3));
    let provider = engine.client("absent-provider").await;
    let mut seen = provide(&provider, "absent::kind");
    assert_eq!(next_bound(&mut seen).await.id, made["id"].as_str().unwrap());
}

// ── state ──────────────────────────────────────────────────────────────

#[tokio::test]
async fn state_calls_answer_like_the_real_engine() {
    let engine = EngineFixture::start().await;
    let c = engine.client("state-user").await;
    let set = |key: &str, value: Value| json!({ "scope": "st", "key": key, "value": value });

    let first = call(&c, "state::set", set("a", json!(1))).await.unwrap();
    assert_eq!(first, json!({ "old_value": null, "new_value": 1 }));
    let second = call(&c, "state::set", set("a", Value::Null)).await.unwrap();
    assert_eq!(second, json!({ "old_value": 1, "new_value": null }));
    assert_eq!(
        call(&c, "state::get", json!({ "scope": "st", "key": "a" }))
            .await
            .unwrap(),
        Value::Null
    );
    // The null is stored, not deleted: the scope still lists it.
    assert_eq!(
        call(&c, "state::list", json!({ "scope": "st" }))
            .await
            .unwrap(),
        json!([null])
    );

    call(&c, "state::set", set("b", json!({ "x": 1 })))
        .await
        .unwrap();
    assert_eq!(
        call(&c, "state::list", json!({ "scope": "st" }))
            .await
            .unwrap(),
        json!([null, { "x": 1 }])
    );
    let deleted = call(&c, "state::delete", json!({ "scope": "st", "key": "b" }))
        .await
        .unwrap();
    assert_eq!(deleted, json!({ "x": 1 }));
    let missing = call(&c, "state::delete", json!({ "scope": "st", "key": "b" }))
        .await
        .unwrap();
    assert_eq!(missing, Value::Null);
    assert_eq!(
        call(&c, "state::list", json!({ "scope": "never-written" }))
            .await
            .unwrap(),
        json!([])
    );

    let updated = call(
        &c,
        "state::update",
        json!({ "scope": "st", "key": "u", "ops": [
            { "type": "set", "path": "name", "value": "n" },
            { "type": "increment", "path": "count", "by": 2 }
        ] }),
    )
    .await
    .unwrap();
    assert_eq!(updated["old_value"], Value::Null);
    assert_eq!(updated["new_value"], json!({ "name": "n", "count": 2 }));

    let (code, message) = remote(call(&c, "state::set", json!({ "scope": "st" })).await);
    assert_eq!(code, "deserialization_error");
    assert!(
        message.starts_with("Failed to deserialize input for state::set"),
        "{message}"
    );
}

#[tokio::test]
async fn a_state_binding_sees_writes_by_any_worker() {
    let engine = EngineFixture::start().await;
    let watcher = engine.client("state-watcher").await;
    let (on_change, mut events) = recorder();
    watcher.register_function("watch::on-change", on_change);
    wait_for_functions(&watcher, &["watch::on-change"]).await;
    bind(
        &watcher,
        "state",
        "watch::on-change",
        json!({ "scope": "watched" }),
    );
    wait_for_registered(&watcher, |row| row["function_id"] == "watch::on-change").await;

    let writer = engine.client("state-writer").await;
    let write = |scope: &str, value: Value| json!({ "scope": scope, "key": "k", "value": value });
    call(&writer, "state::set", write("elsewhere", json!(0)))
        .await
        .unwrap();
    call(&writer, "state::set", write("watched", json!(1)))
        .await
        .unwrap();
    let created = next(&mut events, "state:created").await;
    assert_eq!(created["type"], "state");
    assert_eq!(created["event_type"], "state:created");
    assert_eq!(created["scope"], "watched");
    assert_eq!(created["key"], "k");
    assert_eq!(created["old_value"], Value::Null);
    assert_eq!(created["new_value"], 1);

    call(&writer, "state::set", write("watched", json!(2)))
        .await
        .unwrap();
    let updated = next(&mut events, "state:updated").await;
    assert_eq!(updated["event_type"], "state:updated");
    assert_eq!(updated["old_value"], 1);
    assert_eq!(updated["new_value"], 2);

    call(
        &writer,
        "state::delete",
        json!({ "scope": "watched", "key": "k" }),
    )
    .await
    .unwrap();
    let deleted = next(&mut events, "state:deleted").await;
    assert_eq!(deleted["event_type"], "state:deleted");
    assert_eq!(deleted["old_value"], 2);
    quiet(
        &mut events,
        Duration::from_millis(300),
        "event for another scope",
    )
    .await;
}

// ── configuration ──────────────────────────────────────────────────────

fn entry(id: &str, initial: Option<Value>) -> Value {
    let mut input = json!({
        "id": id,
        "name": "Gate",
        "description": "test entry",
        "schema": {
            "type": "object",
            "required": ["mode"],
            "properties": { "mode": { "type": "string" } },
            "additionalProperties": false
        }
    });
    if let Some(initial) = initial {
        input["initial_value"] = initial;
    }
    input
}

#[tokio::test]
async fn configuration_register_keeps_or_overwrites_the_value() {
    let engine = EngineFixture::start().await;
    let c = engine.client("cfg-owner").await;

    let created = call(&c, "configuration::register", entry("cfg-keep", None))
        .await
        .unwrap();
    assert_eq!(created["id"], "cfg-keep");
    assert_eq!(created["value"], Value::Null);
    let (code, _) = remote(call(&c, "configuration::get", json!({ "id": "cfg-keep" })).await);
    assert_eq!(
        code, "SCHEMA_INVALID",
        "a stored null fails the schema on read"
    );

    call(
        &c,
        "configuration::register",
        entry("cfg-keep", Some(json!({ "mode": "a" }))),
    )
    .await
    .unwrap();
    call(&c, "configuration::register", entry("cfg-keep", None))
        .await
        .unwrap();
    let kept = call(&c, "configuration::get", json!({ "id": "cfg-keep" }))
        .await
        .unwrap();
    assert_eq!(kept, json!({ "id": "cfg-keep", "value": { "mode": "a" } }));

    call(
        &c,
        "configuration::register",
        entry("cfg-keep", Some(json!({ "mode": "b" }))),
    )
    .await
    .unwrap();
    let replaced = call(&c, "configuration::get", json!({ "id": "cfg-keep" }))
        .await
        .unwrap();
    assert_eq!(replaced["value"], json!({ "mode": "b" }));

    let (code, _) = remote(
        call(
            &c,
            "configuration::register",
            entry("cfg-keep", Some(json!({ "mode": 3 }))),
        )
        .await,
    );
    assert_eq!(code, "SCHEMA_INVALID");
    let (code, _) = remote(call(&c, "configuration::register", entry("Bad Id", None)).await);
    assert_eq!(code, "INVALID_ID");
}

#[tokio::test]
async fn configuration_errors_and_set() {
    let engine = EngineFixture::start().await;
    let c = engine.client("cfg-setter").await;

    let (code, message) = remote(call(&c, "configuration::get", json!({ "id": "cfg-none" })).await);
    assert_eq!(code, "NOT_FOUND");
    assert_eq!(message, "configuration 'cfg-none' not found");
    let (code, _) = remote(
        call(
            &c,
            "configuration::set",
            json!({ "id": "cfg-none", "value": { "mode": "a" } }),
        )
        .await,
    );
    assert_eq!(code, "NOT_REGISTERED");

    call(
        &c,
        "configuration::register",
        entry("cfg-set", Some(json!({ "mode": "a" }))),
    )
    .await
    .unwrap();
    let (code, _) = remote(
        call(
            &c,
            "configuration::set",
            json!({ "id": "cfg-set", "value": { "mode": "a", "extra": 1 } }),
        )
        .await,
    );
    assert_eq!(code, "SCHEMA_INVALID");
    let set = call(
        &c,
        "configuration::set",
        json!({ "id": "cfg-set", "value": { "mode": "b" } }),
    )
    .await
    .unwrap();
    assert_eq!(
        set,
        json!({ "old_value": { "mode": "a" }, "new_value": { "mode": "b" } })
    );

    let listed = call(&c, "configuration::list", json!({})).await.unwrap();
    let row = listed["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["id"] == "cfg-set")
        .cloned()
        .unwrap();
    assert!(row.get("value").is_none(), "the list never shows values");
    assert_eq!(row["schema"]["required"], json!(["mode"]));
    let schema = call(&c, "configuration::schema", json!({ "id": "cfg-set" }))
        .await
        .unwrap();
    assert_eq!(schema["name"], "Gate");
}

#[tokio::test]
async fn configuration_values_expand_from_the_environment() {
    let engine = EngineFixture::start().await;
    let c = engine.client("cfg-env").await;
    call(
        &c,
        "configuration::register",
        entry(
            "cfg-env",
            Some(json!({ "mode": "${APPROVAL_GATE_TESTKIT_UNSET_VAR:fallback}" })),
        ),
    )
    .await
    .unwrap();
    let read = call(&c, "configuration::get", json!({ "id": "cfg-env" }))
        .await
        .unwrap();
    assert_eq!(read["value"], json!({ "mode": "fallback" }));
    let raw = call(
        &c,
        "configuration::get",
        json!({ "id": "cfg-env", "raw": true }),
    )
    .await
    .unwrap();
    assert_eq!(
        raw["value"],
        json!({ "mode": "${APPROVAL_GATE_TESTKIT_UNSET_VAR:fallback}" })
    );
}

#[tokio::test]
async fn configuration_bindings_see_register_and_update_events() {
    let engine = EngineFixture::start().await;
    let watcher = engine.client("cfg-watcher").await;
    let (all, mut all_events) = recorder();
    let (updates, mut update_events) = recorder();
    watcher.register_function("cfgwatch::all", all);
    watcher.register_function("cfgwatch::updates", updates);
    wait_for_functions(&watcher, &["cfgwatch::all", "cfgwatch::updates"]).await;
    bind(
        &watcher,
        "configuration",
        "cfgwatch::all",
        json!({ "configuration_id": "cfg-events" }),
    );
    bind(
        &watcher,
        "configuration",
        "cfgwatch::updates",
        json!({ "configuration_id": "cfg-events", "event_types": ["configuration:updated"] }),
    );
    wait_for_registered(&watcher, |row| row["function_id"] == "cfgwatch::all").await;
    wait_for_registered(&watcher, |row| row["function_id"] == "cfgwatch::updates").await;

    let owner = engine.client("cfg-events-owner").await;
    call(
        &owner,
        "configuration::register",
        entry("cfg-events", Some(json!({ "mode": "a" }))),
    )
    .await
    .unwrap();
    let registered = next(&mut all_events, "configuration:registered").await;
    assert_eq!(registered["type"], "configuration");
    assert_eq!(registered["event_type"], "configuration:registered");
    assert_eq!(registered["id"], "cfg-events");
    assert_eq!(registered["new_value"], json!({ "mode": "a" }));

    call(
        &owner,
        "configuration::set",
        json!({ "id": "cfg-events", "value": { "mode": "b" } }),
    )
    .await
    .unwrap();
    for events in [&mut all_events, &mut update_events] {
        let updated = next(events, "configuration:updated").await;
        assert_eq!(updated["event_type"], "configuration:updated");
        assert_eq!(updated["old_value"], json!({ "mode": "a" }));
        assert_eq!(updated["new_value"], json!({ "mode": "b" }));
    }
    quiet(
        &mut update_events,
        Duration::from_millis(300),
        "a filtered-out event",
    )
    .await;
}

// ── introspection ──────────────────────────────────────────────────────

#[tokio::test]
async fn introspection_lists_functions_workers_and_triggers() {
    let engine = EngineFixture::start().await;
    let worker = engine.client("intro-worker").await;
    worker.register_function("intro::f", echo().description("does intro things"));
    let mut seen = provide(&worker, "intro::kind");
    wait_for_functions(&worker, &["intro::f"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    bind(&worker, "intro::kind", "intro::f", json!({ "k": "v" }));
    next_bound(&mut seen).await;

    let mine = call(
        &worker,
        "engine::functions::list",
        json!({ "prefix": "intro::" }),
    )
    .await
    .unwrap();
    assert_eq!(
        mine["functions"],
        json!([{
            "function_id": "intro::f",
            "namespace": "default",
            "worker_name": "intro-worker",
            "description": "does intro things"
        }])
    );
    let all = call(&worker, "engine::functions::list", json!({}))
        .await
        .unwrap();
    let ids: Vec<&str> = all["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function_id"].as_str())
        .collect();
    assert!(ids.contains(&"state::set") && ids.contains(&"configuration::get"));
    assert!(
        !ids.contains(&"engine::functions::list"),
        "engine::* is internal"
    );
    let state_row = all["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function_id"] == "state::set")
        .cloned()
        .unwrap();
    assert_eq!(state_row["worker_name"], "iii-state");
    let internal = call(
        &worker,
        "engine::functions::list",
        json!({ "include_internal": true }),
    )
    .await
    .unwrap();
    assert!(internal["functions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["function_id"] == "engine::register_trigger"));

    let workers = call(&worker, "engine::workers::list", json!({}))
        .await
        .unwrap();
    let row = workers["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "intro-worker")
        .cloned()
        .unwrap();
    assert!(row["id"].is_string());
    assert_eq!(row["namespace"], "default");
    assert_eq!(row["runtime"], "rust");
    assert_eq!(row["function_count"], 1);
    assert_eq!(row["status"], "connected");

    let types = call(&worker, "engine::triggers::list", json!({}))
        .await
        .unwrap();
    let types = types["triggers"].as_array().unwrap().clone();
    let mine = types
        .iter()
        .find(|t| t["id"] == "intro::kind")
        .cloned()
        .unwrap();
    assert_eq!(mine["worker_name"], "intro-worker");
    assert_eq!(mine["namespace"], "default");
    assert_eq!(mine["description"], "a test trigger type");
    let state = types.iter().find(|t| t["id"] == "state").cloned().unwrap();
    assert_eq!(state["worker_name"], "iii-state");

    let bound = wait_for_registered(&worker, |row| row["trigger_type"] == "intro::kind").await;
    assert_eq!(bound["function_id"], "intro::f");
    assert_eq!(bound["worker_name"], "intro-worker");
    assert_eq!(bound["config"], json!({ "k": "v" }));
    assert_eq!(bound["config_summary"], "{\"k\":\"v\"}");
}

// ── restart ────────────────────────────────────────────────────────────

#[tokio::test]
async fn a_restart_keeps_state_and_clients_register_again() {
    let engine = EngineFixture::start().await;
    let worker = engine.client("restart-worker").await;
    worker.register_function("restart::echo", echo());
    let caller = engine.client("restart-caller").await;
    wait_for_functions(&caller, &["restart::echo"]).await;
    call(
        &caller,
        "state::set",
        json!({ "scope": "kept", "key": "k", "value": { "v": 1 } }),
    )
    .await
    .unwrap();
    call(
        &caller,
        "configuration::register",
        entry("cfg-restart", Some(json!({ "mode": "kept" }))),
    )
    .await
    .unwrap();

    engine.restart().await;

    wait_for_functions(&caller, &["restart::echo"]).await;
    assert_eq!(
        call(&caller, "restart::echo", json!({ "back": true }))
            .await
            .unwrap()["back"],
        true
    );
    assert_eq!(
        call(
            &caller,
            "state::get",
            json!({ "scope": "kept", "key": "k" })
        )
        .await
        .unwrap(),
        json!({ "v": 1 })
    );
    let config = call(
        &caller,
        "configuration::get",
        json!({ "id": "cfg-restart" }),
    )
    .await
    .unwrap();
    assert_eq!(config["value"], json!({ "mode": "kept" }));
}

#[tokio::test]
async fn a_test_engine_restart_keeps_durable_bindings() {
    let engine = EngineFixture::start_test().await;
    let provider = engine.client("restart-provider").await;
    let mut seen = provide(&provider, "restart::kind");
    let binder = engine.client("restart-binder").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let durable = call(
        &binder,
        "engine::register_trigger",
        json!({ "trigger_type": "restart::kind", "function_id": "restart::target", "config": {} }),
    )
    .await
    .unwrap();
    next_bound(&mut seen).await;
    // Nobody is left to replay the binding: only the engine can.
    binder.shutdown_async().await;

    engine.restart().await;

    let replayed = next_bound(&mut seen).await;
    assert_eq!(json!(replayed.id), durable["id"]);
    wait_for_registered(&provider, |row| row["id"] == durable["id"]).await;
}

#[tokio::test]
async fn a_process_restart_forgets_durable_bindings() {
    let engine = EngineFixture::start().await;
    let c = engine.client("forget-binder").await;
    let durable = call(
        &c,
        "engine::register_trigger",
        json!({ "trigger_type": "state", "function_id": "forget::target", "config": { "scope": "f" } }),
    )
    .await
    .unwrap();
    wait_for_registered(&c, |row| row["id"] == durable["id"]).await;

    match engine.test_engine() {
        Some(test_engine) => test_engine
            .restart_forgetting_durable_bindings()
            .await
            .unwrap(),
        None => engine.restart().await,
    }

    wait_for_functions(&c, &["state::set"]).await;
    assert!(registered_triggers(&c)
        .await
        .iter()
        .all(|row| row["id"] != durable["id"]));
}

#[tokio::test]
async fn the_fixture_runs_a_real_engine_when_there_is_one() {
    let Some(engine) =
        EngineFixture::start_real("the_fixture_runs_a_real_engine_when_there_is_one").await
    else {
        return;
    };
    assert_eq!(engine.kind(), EngineKind::Real);
    assert!(engine.test_engine().is_none());
    assert_eq!(engine.url(), format!("ws://127.0.0.1:{}", engine.port()));
    let c = engine.client("real-user").await;
    call(
        &c,
        "state::set",
        json!({ "scope": "real", "key": "k", "value": 1 }),
    )
    .await
    .unwrap();
}

// ── faults (test engine only) ──────────────────────────────────────────

#[tokio::test]
async fn a_failure_fault_answers_instead_of_the_function() {
    let engine = EngineFixture::start_test().await;
    let test_engine = engine.test_engine().unwrap();
    let server = engine.client("fail-server").await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    server.register_function(
        "fail::f",
        RegisterFunction::new_async(move |_: Value| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<Value, iii_sdk::Error>(json!("ran"))
            }
        }),
    );
    let caller = engine.client("fail-caller").await;
    wait_for_functions(&caller, &["fail::f"]).await;

    test_engine
        .faults()
        .fail("state::get", "STORE_DOWN", "injected", Some(1));
    let (code, message) =
        remote(call(&caller, "state::get", json!({ "scope": "s", "key": "k" })).await);
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("STORE_DOWN", "injected")
    );
    assert!(
        call(&caller, "state::get", json!({ "scope": "s", "key": "k" }))
            .await
            .is_ok()
    );

    test_engine
        .faults()
        .fail("fail::f", "DOWN", "worker down", None);
    for _ in 0..2 {
        assert_eq!(remote(call(&caller, "fail::f", json!({})).await).0, "DOWN");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a failed call does not run");
    test_engine.faults().clear("fail::f");
    assert_eq!(call(&caller, "fail::f", json!({})).await.unwrap(), "ran");

    test_engine.faults().fail("fail::f", "DOWN", "again", None);
    test_engine.faults().clear_all();
    assert_eq!(call(&caller, "fail::f", json!({})).await.unwrap(), "ran");
}

#[tokio::test]
async fn a_stall_fault_delays_the_answer_but_not_the_effect() {
    let engine = EngineFixture::start_test().await;
    let test_engine = engine.test_engine().unwrap();
    let caller = engine.client("stall-caller").await;

    test_engine
        .faults()
        .stall("state::set", Duration::from_millis(800), Some(1));
    let started = Instant::now();
    let pending = tokio::spawn({
        let caller = caller.clone();
        async move {
            call(
                &caller,
                "state::set",
                json!({ "scope": "s", "key": "k", "value": 1 }),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        call(&caller, "state::get", json!({ "scope": "s", "key": "k" }))
            .await
            .unwrap(),
        1,
        "the write happened before its answer"
    );
    assert!(!pending.is_finished());
    pending.await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(750));

    test_engine
        .faults()
        .stall("state::get", Duration::from_secs(600), None);
    let timed_out = caller
        .trigger(TriggerRequest {
            function_id: "state::get".into(),
            payload: json!({ "scope": "s", "key": "k" }),
            action: None,
            timeout_ms: Some(300),
        })
        .await;
    assert!(
        matches!(timed_out, Err(iii_sdk::Error::Timeout)),
        "{timed_out:?}"
    );
}

#[tokio::test]
async fn dropped_connections_stop_calls_and_the_worker_comes_back() {
    let engine = EngineFixture::start_test().await;
    let test_engine = engine.test_engine().unwrap();
    let server = engine.client("drop-server").await;
    server.register_function("drop::slow", slow(Duration::from_secs(8)));
    server.register_function("drop::echo", echo());
    let mut seen = provide(&server, "drop::kind");
    let caller = engine.client("drop-caller").await;
    wait_for_functions(&caller, &["drop::slow", "drop::echo"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    bind(&caller, "drop::kind", "drop::echo", json!({ "bound": 1 }));
    let first = next_bound(&mut seen).await;

    let pending = tokio::spawn({
        let caller = caller.clone();
        async move { call(&caller, "drop::slow", json!({})).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(test_engine.drop_connections_of("drop-server"), 1);
    assert_eq!(test_engine.drop_connections_of("nobody"), 0);
    assert_eq!(remote(pending.await.unwrap()).0, "invocation_stopped");

    // The SDK reconnects by itself and replays; the binding is sent again.
    let again = next_bound(&mut seen).await;
    assert_eq!(again.id, first.id);
    wait_for_functions(&caller, &["drop::echo"]).await;
    assert_eq!(
        call(&caller, "drop::echo", json!({ "x": 1 }))
            .await
            .unwrap()["x"],
        1
    );
}

#[tokio::test]
async fn invocations_are_counted_per_function() {
    let engine = EngineFixture::start_test().await;
    let test_engine = engine.test_engine().unwrap();
    let server = engine.client("count-server").await;
    server.register_function("count::f", echo());
    let caller = engine.client("count-caller").await;
    wait_for_functions(&caller, &["count::f"]).await;

    let before = test_engine.total_invocations();
    assert_eq!(test_engine.invocations("state::get"), 0);
    for _ in 0..3 {
        call(&caller, "state::get", json!({ "scope": "s", "key": "k" }))
            .await
            .unwrap();
    }
    assert_eq!(test_engine.invocations("state::get"), 3);
    call(&caller, "count::f", json!({})).await.unwrap();
    caller
        .trigger(TriggerRequest {
            function_id: "count::f".into(),
            payload: json!({}),
            action: Some(TriggerAction::Void),
            timeout_ms: None,
        })
        .await
        .unwrap();
    let _ = call(&caller, "count::missing", json!({})).await;
    eventually("the void call is counted", || {
        test_engine.invocations("count::f") == 2
    })
    .await;
    assert_eq!(test_engine.invocations("count::missing"), 1);
    assert_eq!(test_engine.total_invocations() - before, 6);
    assert_eq!(engine.kind(), EngineKind::Test);
}
