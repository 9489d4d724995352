//! The test engine's own tests, one per behaviour it promises.
#![allow(deprecated)] // trigger types and plain bindings are deprecated in the SDK, still used

use std::time::Duration;

use approval_gate::testkit::fixture::{call, wait_for_functions, EngineFixture};
use iii_sdk::RegisterFunction;
use serde_json::{json, Value};

fn echo() -> RegisterFunction {
    RegisterFunction::new_async(|input: Value| async move { Ok::<Value, iii_sdk::Error>(input) })
}

#[tokio::test]
async fn calls_route_between_two_clients() {
    let engine = EngineFixture::start().await;
    let server = engine.client("routing-server").await;
    let caller = engine.client("routing-caller").await;
    server.register_function("routing::echo", echo());
    wait_for_functions(&caller, &["routing::echo"]).await;
    let answer = call(&caller, "routing::echo", json!({"n": 1}))
        .await
        .unwrap();
    assert_eq!(answer["n"], 1);
    let _ = Duration::from_secs(1);
}
