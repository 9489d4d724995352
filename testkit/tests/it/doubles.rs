//! The peer doubles checked against an engine: each test starts its own
//! engine (two harness doubles cannot share one: worker names are unique),
//! plays a scenario and checks what the double did. Tests named `g2_…`
//! play today's harness and shell (generation 2); the others the brief's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use approval_gate_testkit::fixture::{call, EngineFixture};
use approval_gate_testkit::harness::{
    Boundary, CallSpec, CallState, Generation, HarnessDouble, HarnessOptions, HookPoint,
    ResolveFault, ResolveTiming, TurnCompletion, WATCH_ID,
};
use approval_gate_testkit::session::SessionDouble;
use approval_gate_testkit::shell::{access_request_tail, Dialect, JailShell};
use approval_gate_testkit::targets::{
    Behaviour, Echo, Reply, TargetCall, TargetError, TargetWorker,
};
use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::{Error, IIIClient};
use serde_json::{json, Value};

const PRE: &str = "harness::hook::pre-trigger";
const POST: &str = "harness::hook::post-trigger";
const WAIT: Duration = Duration::from_secs(5);

/// Runs `scenario` on the test engine, then on a real engine when one is
/// available. Every run is bounded: a double that hangs fails the test.
async fn on_each_engine<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let engines = [Some(EngineFixture::start_test().await), None];
    for (i, engine) in engines.into_iter().enumerate() {
        let engine = match engine {
            Some(engine) => engine,
            None if i == 1 => match EngineFixture::start_real(test).await {
                Some(engine) => engine,
                None => return,
            },
            None => return,
        };
        let kind = engine.kind();
        eprintln!("{test}: on the {kind:?} engine");
        tokio::time::timeout(Duration::from_secs(60), scenario(engine))
            .await
            .unwrap_or_else(|_| panic!("{test} on the {kind:?} engine did not finish within 60 s"));
    }
}

fn code(err: &Error) -> String {
    match err {
        Error::Remote { code, .. } => code.clone(),
        other => other.to_string(),
    }
}

/// Binds `function_id` to `trigger_type` from `client`, as any worker would.
fn bind(client: &IIIClient, trigger_type: &str, function_id: &str, config: Value) {
    // The SDK's binding API is deprecated in 0.25 (gone in 0.26); the engine
    // still speaks it and the worker under test binds this way.
    #[allow(deprecated)]
    client
        .register_trigger(RegisterTriggerInput::new(trigger_type, function_id, config))
        .expect("binding sent");
}

/// Binds a hook and waits until the harness has accepted it.
async fn hook(h: &HarnessDouble, t: &TargetWorker, point: &str, function_id: &str, config: Value) {
    bind(t.client(), point, function_id, config);
    assert!(
        h.wait_for_binding(point, function_id, WAIT).await.is_some(),
        "harness accepted the {function_id} binding"
    );
}

/// Answers from a script, then `rest` forever.
struct Script {
    replies: Mutex<VecDeque<Value>>,
    rest: Value,
}

impl Script {
    fn boxed(replies: Vec<Value>, rest: Value) -> Arc<dyn Behaviour> {
        Arc::new(Script {
            replies: Mutex::new(replies.into()),
            rest,
        })
    }
}

impl Behaviour for Script {
    fn respond(&self, _call: &TargetCall) -> Result<Value, TargetError> {
        let next = self.replies.lock().unwrap().pop_front();
        Ok(next.unwrap_or_else(|| self.rest.clone()))
    }
}

fn reply(v: Value) -> Arc<dyn Behaviour> {
    Arc::new(Reply(v))
}

fn echo() -> Arc<dyn Behaviour> {
    Arc::new(Echo)
}

struct World {
    _engine: EngineFixture,
    h: HarnessDouble,
    t: TargetWorker,
}

/// An engine, a harness double and a target worker hosting `targets` (the
/// functions a turn calls and the hooks a test binds).
async fn world(
    engine: EngineFixture,
    options: HarnessOptions,
    targets: Vec<(&str, Arc<dyn Behaviour>)>,
) -> World {
    let url = engine.url();
    let h = HarnessDouble::start(&url, options).await;
    let mut all: Vec<(String, Arc<dyn Behaviour>)> =
        vec![("demo::echo".into(), echo()), ("shell::run".into(), echo())];
    all.extend(targets.into_iter().map(|(id, b)| (id.to_string(), b)));
    let t = TargetWorker::start_with(&url, all).await;
    World {
        _engine: engine,
        h,
        t,
    }
}

/// The brief's harness, whatever the default generation is.
fn brief() -> HarnessOptions {
    HarnessOptions::generation(Generation::G1)
}

fn spec(call_id: &str, function_id: &str, arguments: Value) -> CallSpec {
    CallSpec::new("s1", "t1", call_id, function_id, arguments)
}

fn hooks_called(h: &HarnessDouble, point: HookPoint) -> Vec<String> {
    h.hook_calls()
        .into_iter()
        .filter(|c| c.point == point)
        .map(|c| c.function_id)
        .collect()
}

#[tokio::test]
async fn a_binding_with_an_unknown_key_is_rejected() {
    on_each_engine("a_binding_with_an_unknown_key_is_rejected", |engine| async move {
        let w = world(engine, brief(), vec![("t::bad", reply(Value::Null)), ("t::good", reply(Value::Null))]).await;
        bind(w.t.client(), PRE, "t::bad", json!({"timeout": 5000}));
        bind(w.t.client(), PRE, "t::bad", json!({"priority": "first"}));
        hook(&w.h, &w.t, PRE, "t::good", json!({"timeout_ms": 5000, "on_error": "fail_closed"})).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let bound: Vec<_> = w.h.bindings(PRE).into_iter().map(|b| b.function_id).collect();
        assert_eq!(bound, vec!["t::good"]);
        w.h.call(spec("c1", "demo::echo", json!({}))).await;
        assert_eq!(hooks_called(&w.h, HookPoint::PreTrigger), vec!["t::good"]);

        // The synchronous (durable) form hands the rejection to the binder.
        let durable = call(
            w.t.client(),
            "engine::register_trigger",
            json!({"trigger_type": POST, "function_id": "t::bad", "config": {"functions": ["*"], "retries": 1}}),
        )
        .await;
        let err = durable.expect_err("the harness rejects the binding");
        assert!(format!("{err}").contains("invalid binding config"), "{err}");
        assert!(w.h.bindings(POST).is_empty());
    })
    .await;
}

#[tokio::test]
async fn the_chain_runs_by_priority_then_function_id_and_skips_unmatched_globs() {
    on_each_engine(
        "the_chain_runs_by_priority_then_function_id_and_skips_unmatched_globs",
        |engine| async move {
            let hooks = ["t::a", "t::b", "t::c", "t::z"].map(|id| (id, reply(Value::Null)));
            let w = world(engine, brief(), hooks.to_vec()).await;
            hook(&w.h, &w.t, PRE, "t::b", json!({})).await;
            hook(&w.h, &w.t, PRE, "t::a", json!({"priority": 0})).await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::c",
                json!({"priority": -5, "functions": ["demo::*"]}),
            )
            .await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::z",
                json!({"priority": -9, "functions": ["shell::*"]}),
            )
            .await;
            let state = w.h.call(spec("c1", "demo::echo", json!({"x": 1}))).await;
            assert!(matches!(state, CallState::Completed { .. }), "{state:?}");
            assert_eq!(
                hooks_called(&w.h, HookPoint::PreTrigger),
                vec!["t::c", "t::a", "t::b"]
            );
            assert_eq!(w.h.target_runs("demo::echo"), 1);
            assert_eq!(w.t.runs("demo::echo"), 1);

            let first = w.h.hook_calls()[0].input.clone();
            assert_eq!(first["point"], "pre_trigger");
            assert_eq!(first["session_id"], "s1");
            assert_eq!(first["turn_id"], "t1");
            assert_eq!(
                first["call"],
                json!({"id": "c1", "function_id": "demo::echo", "arguments": {"x": 1}})
            );
            assert!(first.get("metadata").is_none());
        },
    )
    .await;
}

#[tokio::test]
async fn rewritten_arguments_reach_the_next_hook_and_the_target() {
    on_each_engine(
        "rewritten_arguments_reach_the_next_hook_and_the_target",
        |engine| async move {
            let w = world(
                engine,
                brief(),
                vec![
                    (
                        "t::rewrite",
                        reply(json!({"decision": "continue", "arguments": {"cmd": "ls -la"}})),
                    ),
                    ("t::next", reply(json!({"decision": "continue"}))),
                ],
            )
            .await;
            hook(&w.h, &w.t, PRE, "t::rewrite", json!({"priority": 1})).await;
            hook(&w.h, &w.t, PRE, "t::next", json!({"priority": 2})).await;
            let call = spec("c1", "shell::run", json!({"cmd": "ls"})).with_working_dir("/w/s1");
            let state = w.h.call(call).await;
            assert!(matches!(state, CallState::Completed { .. }), "{state:?}");
            let inputs = w.h.hook_calls();
            assert_eq!(inputs[0].input["call"]["arguments"], json!({"cmd": "ls"}));
            assert_eq!(
                inputs[1].input["call"]["arguments"],
                json!({"cmd": "ls -la"})
            );
            assert_eq!(inputs[1].input["metadata"], json!({"working_dir": "/w/s1"}));
            assert_eq!(w.t.payloads("shell::run"), vec![json!({"cmd": "ls -la"})]);
            let meta = w.t.calls("shell::run")[0]
                .metadata
                .clone()
                .expect("target metadata");
            assert_eq!(meta["working_dir"], "/w/s1");
            assert_eq!(meta["function_call_id"], "c1");
            assert_eq!(meta["extra_roots"], json!([]));
        },
    )
    .await;
}

#[tokio::test]
async fn deny_answers_with_an_error_result_and_stops_the_chain() {
    on_each_engine(
        "deny_answers_with_an_error_result_and_stops_the_chain",
        |engine| async move {
            let w = world(
                engine,
                brief(),
                vec![
                    (
                        "t::deny",
                        reply(json!({"decision": "deny", "reason": "not today"})),
                    ),
                    ("t::bare", reply(json!({"decision": "deny"}))),
                    ("t::later", reply(Value::Null)),
                    ("demo::other", echo()),
                ],
            )
            .await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::deny",
                json!({"functions": ["demo::echo"]}),
            )
            .await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::bare",
                json!({"functions": ["demo::other"]}),
            )
            .await;
            hook(&w.h, &w.t, PRE, "t::later", json!({"priority": 5})).await;
            hook(&w.h, &w.t, POST, "t::later", json!({})).await;

            let state = w.h.call(spec("c1", "demo::echo", json!({}))).await;
            assert_eq!(state.deny_reason(), Some("not today"));
            let result = state.result().expect("denial result").clone();
            assert_eq!(result["is_error"], true);
            assert_eq!(result["function_call_id"], "c1");
            assert_eq!(
                result["content"],
                json!([{"type": "text", "text": "not today"}])
            );

            let bare = w.h.call(spec("c2", "demo::other", json!({}))).await;
            assert_eq!(bare.deny_reason(), Some("denied by hook"));

            assert_eq!(w.t.runs("demo::echo") + w.t.runs("demo::other"), 0);
            assert_eq!(
                w.t.runs("t::later"),
                0,
                "neither later pre hooks nor post hooks ran"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn hold_parks_the_call_and_execute_runs_the_rest_once() {
    on_each_engine("hold_parks_the_call_and_execute_runs_the_rest_once", |engine| async move {
        let w = world(
            engine,
            brief(),
            vec![
                ("t::first", reply(Value::Null)),
                ("t::hold", reply(json!({"decision": "hold"}))),
                ("t::after", reply(json!({"decision": "continue"}))),
                ("t::post", reply(Value::Null)),
            ],
        )
        .await;
        hook(&w.h, &w.t, PRE, "t::first", json!({"priority": -1})).await;
        hook(&w.h, &w.t, PRE, "t::hold", json!({"priority": 0})).await;
        hook(&w.h, &w.t, PRE, "t::after", json!({"priority": 1})).await;
        hook(&w.h, &w.t, POST, "t::post", json!({})).await;

        let state = w.h.call(spec("c1", "demo::echo", json!({"a": 1}))).await;
        assert_eq!(
            state,
            CallState::Held {
                held_by: "t::hold".into(),
                point: HookPoint::PreTrigger
            }
        );
        assert_eq!(w.h.held_calls("s1", "t1"), vec!["c1"]);
        assert_eq!(w.t.runs("t::after"), 0, "the hold stopped the chain");
        assert_eq!(w.t.runs("demo::echo"), 0);

        let reply = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute", "extra_roots": ["/data/x"]}),
        )
        .await
        .expect("resolve answers");
        assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
        let state = w.h.state("s1", "c1").expect("call known");
        assert!(matches!(state, CallState::Completed { .. }), "{state:?}");
        assert_eq!(hooks_called(&w.h, HookPoint::PreTrigger), vec!["t::first", "t::hold", "t::after"]);
        assert_eq!(hooks_called(&w.h, HookPoint::PostTrigger), vec!["t::post"]);
        assert_eq!(w.t.runs("demo::echo"), 1);
        let runs = w.h.runs_of("demo::echo");
        assert_eq!(runs[0].extra_roots, vec!["/data/x"]);
        assert_eq!(w.t.calls("demo::echo")[0].metadata.as_ref().unwrap()["extra_roots"], json!(["/data/x"]));
        let post_input = w.h.hook_calls().last().unwrap().input.clone();
        assert_eq!(post_input["point"], "post_trigger");
        assert_eq!(post_input["result"]["is_error"], false);
        assert_eq!(post_input["result"]["function_call_id"], "c1");

        let again = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute"}),
        )
        .await
        .expect("second resolve answers");
        assert_eq!(again, json!({"resolved": false, "turn_resumed": false}));
        assert_eq!(w.t.runs("demo::echo"), 1, "an idempotent resolve runs nothing");
    })
    .await;
}

#[tokio::test]
async fn deliver_appends_under_the_deterministic_entry_id() {
    on_each_engine("deliver_appends_under_the_deterministic_entry_id", |engine| async move {
        let w = world(engine, brief(), vec![("t::hold", reply(json!({"decision": "hold"})))]).await;
        hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
        assert!(w.h.call(spec("c9", "demo::echo", json!({}))).await.is_held());
        let content = json!([{"type": "text", "text": "Rejected by operator."}]);
        let reply = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c9", "action": "deliver",
                   "is_error": true, "content": content, "details": {"status": "denied"}, "bogus_field": 1}),
        )
        .await
        .expect("resolve answers");
        assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
        let entry = w.h.entry("e_t1_c9").expect("entry under e_<turn>_<call>");
        assert_eq!(entry.result["content"], content);
        assert_eq!(entry.result["is_error"], true);
        assert_eq!(entry.result["details"], json!({"status": "denied"}));
        assert!(matches!(w.h.state("s1", "c9"), Some(CallState::Delivered { .. })));
        assert_eq!(w.t.runs("demo::echo"), 0, "deliver never runs the target");
        assert_eq!(w.h.resolve_requests()[0]["bogus_field"], 1, "the raw request is kept");

        let again = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c9", "action": "deliver"}),
        )
        .await
        .expect("second resolve answers");
        assert_eq!(again["resolved"], false);
        assert_eq!(w.h.entries().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn resolve_needs_a_held_call_of_that_turn_and_resumes_the_turn_last() {
    on_each_engine("resolve_needs_a_held_call_of_that_turn_and_resumes_the_turn_last", |engine| async move {
        let w = world(engine, brief(), vec![("t::hold", reply(json!({"decision": "hold"})))]).await;
        hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
        assert!(w.h.call(spec("c1", "demo::echo", json!({}))).await.is_held());
        assert!(w.h.call(spec("c2", "demo::echo", json!({}))).await.is_held());
        let resolve = |call_id: &str, turn: &str| json!({"session_id": "s1", "turn_id": turn, "function_call_id": call_id, "action": "deliver"});
        let wrong_turn = call(w.t.client(), "harness::function::resolve", resolve("c1", "t2")).await.unwrap();
        assert_eq!(wrong_turn, json!({"resolved": false, "turn_resumed": false}));
        let unknown = call(w.t.client(), "harness::function::resolve", resolve("nope", "t1")).await.unwrap();
        assert_eq!(unknown["resolved"], false);
        let first = call(w.t.client(), "harness::function::resolve", resolve("c1", "t1")).await.unwrap();
        assert_eq!(first, json!({"resolved": true, "turn_resumed": false}));
        let second = call(w.t.client(), "harness::function::resolve", resolve("c2", "t1")).await.unwrap();
        assert_eq!(second, json!({"resolved": true, "turn_resumed": true}));
        let missing_turn = call(w.t.client(), "harness::function::resolve", json!({"session_id": "s1", "function_call_id": "c1"})).await;
        assert!(missing_turn.is_err(), "turn_id is required");
    })
    .await;
}

#[tokio::test]
async fn a_post_trigger_hold_reruns_the_target_on_execute() {
    on_each_engine("a_post_trigger_hold_reruns_the_target_on_execute", |engine| async move {
        let watch = Script::boxed(vec![json!({"decision": "hold"})], json!({"decision": "continue"}));
        let w = world(engine, brief(), vec![("t::watch", watch)]).await;
        hook(&w.h, &w.t, POST, "t::watch", json!({"functions": ["shell::*"], "timeout_ms": 5000, "on_error": "fail_open"})).await;
        let tail = r#" grant_hint={"v":1,"dir":"/data","path":"/data/x","code":"S215"}"#;
        let message = format!("path escapes the fs jail roots [/w/s1]: /data/x{tail}");
        w.t.fail("shell::run", "S215", &message);

        let state = w.h.call(spec("c1", "shell::run", json!({"cmd": "cat /data/x"})).with_working_dir("/w/s1")).await;
        assert_eq!(
            state,
            CallState::Held {
                held_by: "t::watch".into(),
                point: HookPoint::PostTrigger
            }
        );
        let seen = w.h.hook_calls()[0].input["result"].clone();
        assert_eq!(
            seen,
            json!({"function_call_id": "c1", "function_id": "shell::run",
                   "content": [{"type": "text", "text": message}], "is_error": true,
                   "details": {"error": {"code": "S215", "message": message}}})
        );

        w.t.succeed("shell::run");
        let reply = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute", "extra_roots": ["/data"]}),
        )
        .await
        .unwrap();
        assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
        assert_eq!(w.t.runs("shell::run"), 2, "the target ran again");
        let runs = w.h.runs_of("shell::run");
        assert_eq!(runs[0].extra_roots, Vec::<String>::new());
        assert_eq!(runs[1].extra_roots, vec!["/data"]);
        assert_eq!(hooks_called(&w.h, HookPoint::PostTrigger), vec!["t::watch", "t::watch"]);
        let state = w.h.state("s1", "c1").unwrap();
        assert_eq!(state.result().unwrap()["is_error"], false);
    })
    .await;
}

#[tokio::test]
async fn a_held_again_call_leaves_the_turn_waiting() {
    on_each_engine("a_held_again_call_leaves_the_turn_waiting", |engine| async move {
        let watch = Script::boxed(vec![], json!({"decision": "hold"}));
        let w = world(engine, brief(), vec![("t::watch", watch)]).await;
        hook(&w.h, &w.t, POST, "t::watch", json!({})).await;
        assert!(w.h.call(spec("c1", "demo::echo", json!({}))).await.is_held());
        let reply = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute"}),
        )
        .await
        .unwrap();
        assert_eq!(reply, json!({"resolved": true, "turn_resumed": false}));
        assert!(w.h.state("s1", "c1").unwrap().is_held());
        assert_eq!(w.t.runs("demo::echo"), 2);
    })
    .await;
}

#[tokio::test]
async fn after_reply_timing_answers_before_running() {
    on_each_engine("after_reply_timing_answers_before_running", |engine| async move {
        let options = HarnessOptions {
            resolve_timing: ResolveTiming::AfterReply,
            ..brief()
        };
        let w = world(engine, options, vec![("t::hold", Script::boxed(vec![json!({"decision": "hold"})], Value::Null))]).await;
        hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
        w.t.set_delay("demo::echo", Duration::from_millis(500));
        assert!(w.h.call(spec("c1", "demo::echo", json!({}))).await.is_held());
        let reply = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute"}),
        )
        .await
        .unwrap();
        assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
        assert_eq!(w.h.state("s1", "c1"), Some(CallState::Running), "answered before the target finished");
        let done = w.h.wait_for_state("s1", "c1", WAIT, |s| matches!(s, CallState::Completed { .. })).await;
        assert!(matches!(done, Some(CallState::Completed { .. })), "{done:?}");
    })
    .await;
}

#[tokio::test]
async fn a_failing_hook_denies_when_fail_closed_and_is_skipped_when_fail_open() {
    on_each_engine(
        "a_failing_hook_denies_when_fail_closed_and_is_skipped_when_fail_open",
        |engine| async move {
            let w = world(
                engine,
                brief(),
                vec![
                    ("t::broken", reply(Value::Null)),
                    ("t::odd", reply(json!({"decision": "allow"}))),
                    ("demo::closed", echo()),
                    ("demo::open", echo()),
                ],
            )
            .await;
            w.t.fail("t::broken", "boom", "hook exploded");
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::broken",
                json!({"functions": ["demo::closed"]}),
            )
            .await;
            bind(
                w.t.client(),
                PRE,
                "t::broken",
                json!({"functions": ["demo::open"], "on_error": "fail_open"}),
            );
            bind(
                w.t.client(),
                POST,
                "t::broken",
                json!({"functions": ["demo::open"]}),
            );
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::odd",
                json!({"functions": ["demo::echo"]}),
            )
            .await;
            assert!(
                w.h.wait_until(WAIT, |h| h.bindings(PRE).len() == 3
                    && h.bindings(POST).len() == 1)
                    .await
            );

            let closed = w.h.call(spec("c1", "demo::closed", json!({}))).await;
            let reason = closed.deny_reason().expect("fail_closed denies");
            assert!(reason.starts_with("hook t::broken failed: "), "{reason}");
            assert!(reason.contains("hook exploded"), "{reason}");
            assert_eq!(w.t.runs("demo::closed"), 0);

            let open = w.h.call(spec("c2", "demo::open", json!({}))).await;
            assert!(
                matches!(open, CallState::Completed { .. }),
                "pre fail_open and post default skip: {open:?}"
            );
            assert_eq!(w.t.runs("demo::open"), 1);

            let odd = w.h.call(spec("c3", "demo::echo", json!({}))).await;
            let reason = odd
                .deny_reason()
                .expect("an unknown decision is a failed hook");
            assert!(reason.starts_with("hook t::odd failed: "), "{reason}");
        },
    )
    .await;
}

#[tokio::test]
async fn a_hook_past_its_timeout_denies_when_fail_closed_and_is_skipped_when_fail_open() {
    on_each_engine(
        "a_hook_past_its_timeout_denies_when_fail_closed_and_is_skipped_when_fail_open",
        |engine| async move {
            let w = world(
                engine,
                brief(),
                vec![
                    ("t::slow", reply(json!({"decision": "hold"}))),
                    ("demo::closed", echo()),
                    ("demo::open", echo()),
                ],
            )
            .await;
            w.t.set_delay("t::slow", Duration::from_millis(1500));
            bind(
                w.t.client(),
                PRE,
                "t::slow",
                json!({"functions": ["demo::closed"], "timeout_ms": 200}),
            );
            bind(
                w.t.client(),
                PRE,
                "t::slow",
                json!({"functions": ["demo::open"], "timeout_ms": 200, "on_error": "fail_open"}),
            );
            assert!(w.h.wait_until(WAIT, |h| h.bindings(PRE).len() == 2).await);

            let started = std::time::Instant::now();
            let closed = w.h.call(spec("c1", "demo::closed", json!({}))).await;
            assert_eq!(closed.deny_reason(), Some("hook t::slow timed out"));
            assert!(
                started.elapsed() < Duration::from_millis(1400),
                "the binding's timeout applied"
            );

            let open = w.h.call(spec("c2", "demo::open", json!({}))).await;
            assert!(matches!(open, CallState::Completed { .. }), "{open:?}");
            assert_eq!(w.t.runs("demo::open"), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn a_dispatch_policy_denial_reaches_post_trigger_with_a_string_error() {
    on_each_engine(
        "a_dispatch_policy_denial_reaches_post_trigger_with_a_string_error",
        |engine| async move {
            let w = world(engine, brief(), vec![("t::post", reply(Value::Null))]).await;
            hook(&w.h, &w.t, POST, "t::post", json!({})).await;
            w.h.deny_dispatch("demo::echo");
            let state = w.h.call(spec("c1", "demo::echo", json!({}))).await;
            let result = state.result().expect("a result").clone();
            assert_eq!(result["is_error"], true);
            assert_eq!(result["details"]["error"], "policy_denied");
            assert_eq!(
                w.h.hook_calls()[0].input["result"]["details"]["error"],
                "policy_denied"
            );
            assert_eq!(w.t.runs("demo::echo"), 0);
        },
    )
    .await;
}

#[tokio::test]
async fn newer_builds_prefix_target_errors_with_the_function_id() {
    on_each_engine(
        "newer_builds_prefix_target_errors_with_the_function_id",
        |engine| async move {
            let options = HarnessOptions {
                prefix_target_errors: true,
                ..brief()
            };
            let w = world(engine, options, vec![]).await;
            w.t.fail("shell::run", "S220", "outside the session directory");
            let state = w.h.call(spec("c1", "shell::run", json!({}))).await;
            let result = state.result().unwrap();
            assert_eq!(
                result["details"]["error"]["message"],
                "shell::run: outside the session directory"
            );
            assert_eq!(result["details"]["error"]["code"], "S220");
        },
    )
    .await;
}

#[tokio::test]
async fn workspace_grants_are_sorted_and_deduplicated() {
    on_each_engine(
        "workspace_grants_are_sorted_and_deduplicated",
        |engine| async move {
            let w = world(engine, brief(), vec![]).await;
            let c = w.t.client();
            for root in ["/b", "/a", "/b"] {
                call(
                    c,
                    "harness::workspace::grant",
                    json!({"session_id": "s1", "root": root}),
                )
                .await
                .unwrap();
            }
            let grants = call(c, "harness::workspace::grants", json!({"session_id": "s1"}))
                .await
                .unwrap();
            assert_eq!(grants, json!({"session_id": "s1", "roots": ["/a", "/b"]}));
            let revoked = call(
                c,
                "harness::workspace::revoke",
                json!({"session_id": "s1", "root": "/a"}),
            )
            .await
            .unwrap();
            assert_eq!(revoked, json!({"session_id": "s1", "roots": ["/b"]}));
            let other = call(c, "harness::workspace::grants", json!({"session_id": "s2"}))
                .await
                .unwrap();
            assert_eq!(other, json!({"session_id": "s2", "roots": []}));

            w.h.call(spec("c1", "demo::echo", json!({}))).await;
            assert_eq!(
                w.h.runs_of("demo::echo")[0].metadata["granted_roots"],
                json!(["/b"])
            );
        },
    )
    .await;
}

#[tokio::test]
async fn an_older_harness_has_no_workspace_grants() {
    on_each_engine(
        "an_older_harness_has_no_workspace_grants",
        |engine| async move {
            let options = HarnessOptions {
                workspace_grants: false,
                ..brief()
            };
            let w = world(engine, options, vec![]).await;
            let err = call(
                w.t.client(),
                "harness::workspace::grants",
                json!({"session_id": "s1"}),
            )
            .await
            .expect_err("no workspace plane");
            assert_eq!(code(&err), "function_not_found");
            let resolve = call(
                w.t.client(),
                "harness::function::resolve",
                json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1"}),
            )
            .await
            .expect("resolve still served");
            assert_eq!(resolve["resolved"], false);
        },
    )
    .await;
}

#[tokio::test]
async fn turn_completed_reaches_bindings_whose_filter_matches() {
    on_each_engine("turn_completed_reaches_bindings_whose_filter_matches", |engine| async move {
        let w = world(
            engine,
            brief(),
            vec![
                ("t::all", reply(json!({"ok": true}))),
                ("t::s1", reply(json!({"ok": true}))),
                ("t::parent", reply(json!({"ok": true}))),
                ("t::hold", reply(json!({"decision": "hold"}))),
            ],
        )
        .await;
        let tc = "harness::turn-completed";
        hook(&w.h, &w.t, tc, "t::all", json!({})).await;
        hook(&w.h, &w.t, tc, "t::s1", json!({"session_id": "s1"})).await;
        hook(&w.h, &w.t, tc, "t::parent", json!({"parent_session_id": "p1"})).await;
        hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;

        assert_eq!(w.h.complete_turn("s2", "t9", "completed").await, 1);
        assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::all") == 1).await);
        assert!(w.h.call(spec("c1", "demo::echo", json!({}))).await.is_held());
        assert_eq!(w.h.complete_turn("s1", "t1", "cancelled").await, 2);
        assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::all") == 2 && w.t.runs("t::s1") == 1).await);
        let mut child = approval_gate_testkit::harness::TurnCompletion::new("child", "t5", "failed");
        child.parent_session_id = Some("p1".into());
        child.reason = Some("model error".into());
        assert_eq!(w.h.complete_turn_with(child).await, 2);
        assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::parent") == 1 && w.t.runs("t::all") == 3).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(w.t.runs("t::s1"), 1, "the session filter held back s2 and child");

        let payload = &w.t.payloads("t::s1")[0];
        assert_eq!(payload["session_id"], "s1");
        assert_eq!(payload["turn_id"], "t1");
        assert_eq!(payload["status"], "cancelled");
        assert!(payload["timestamp"].as_u64().is_some_and(|t| t > 1_600_000_000_000));
        let child_payload = &w.t.payloads("t::parent")[0];
        assert_eq!(child_payload["parent"], json!({"session_id": "p1"}));
        assert_eq!(child_payload["reason"], "model error");

        assert_eq!(w.h.state("s1", "c1"), Some(CallState::Abandoned { status: "cancelled".into() }));
        let late = call(
            w.t.client(),
            "harness::function::resolve",
            json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": "execute"}),
        )
        .await
        .unwrap();
        assert_eq!(late["resolved"], false);
        assert_eq!(w.t.runs("demo::echo"), 0);
    })
    .await;
}

#[tokio::test]
async fn session_get_serves_the_map_and_session_deleted_reaches_every_binding() {
    on_each_engine(
        "session_get_serves_the_map_and_session_deleted_reaches_every_binding",
        |engine| async move {
            let s = SessionDouble::start(&engine.url()).await;
            let t = TargetWorker::start(&engine.url(), &["t::deleted", "t::also"]).await;
            let meta = json!({"title": "Fix the build", "metadata": {"team": "infra"}});
            s.put("s1", meta.clone());

            let got = call(t.client(), "session::get", json!({"session_id": "s1"}))
                .await
                .unwrap();
            assert_eq!(got, json!({"session_id": "s1", "meta": meta}));
            // The real manager answers null for an unknown session.
            let unknown = call(t.client(), "session::get", json!({"session_id": "nope"}))
                .await
                .unwrap();
            assert!(unknown.is_null(), "{unknown}");
            // session::ensure makes a session with its metadata once; a
            // known session keeps what it was made with.
            let link = json!({"parent_session_id": "p1", "parent_turn_id": "tp", "function_call_id": "c9", "depth": 1});
            let made = call(t.client(), "session::ensure", json!({"session_id": "kid", "metadata": link}))
                .await
                .unwrap();
            assert_eq!(made["created"], true);
            assert_eq!(made["meta"]["metadata"], link);
            let again = call(t.client(), "session::ensure", json!({"session_id": "kid", "metadata": {"parent_session_id": "other"}}))
                .await
                .unwrap();
            assert_eq!(again["created"], false);
            assert_eq!(s.metadata_of("kid"), Some(link));
            s.forget("kid");
            s.put_response("bare", json!({"session_id": "bare"}));
            let bare = call(t.client(), "session::get", json!({"session_id": "bare"}))
                .await
                .unwrap();
            assert!(bare.get("meta").is_none());

            s.set_delay(Duration::from_millis(400));
            let started = std::time::Instant::now();
            call(t.client(), "session::get", json!({"session_id": "s1"}))
                .await
                .unwrap();
            assert!(started.elapsed() >= Duration::from_millis(400));
            assert_eq!(s.get_calls(), 4);
            s.set_delay(Duration::ZERO);

            bind(t.client(), "session::deleted", "t::deleted", json!({}));
            bind(
                t.client(),
                "session::deleted",
                "t::also",
                json!({"anything": true}),
            );
            assert!(
                s.wait_for_binding("t::deleted", WAIT).await
                    && s.wait_for_binding("t::also", WAIT).await
            );
            assert_eq!(s.delete("s1").await, 2);
            let deadline = tokio::time::Instant::now() + WAIT;
            while (t.runs("t::deleted") == 0 || t.runs("t::also") == 0)
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(t.payloads("t::deleted")[0]["session_id"], "s1");
            assert_eq!(t.runs("t::also"), 1);
            let gone = call(t.client(), "session::get", json!({"session_id": "s1"}))
                .await
                .unwrap();
            assert!(gone.is_null(), "a deleted session is unknown");
        },
    )
    .await;
}

// ---- today's harness and shell (generation 2) ------------------------------

const RESOLVE: &str = "harness::function::resolve";
const WS: &str = "/w/s1";

fn today() -> HarnessOptions {
    HarnessOptions::generation(Generation::G2)
}

/// A call of session `s1`, turn `t1`, scoped to [`WS`] the way today's
/// harness reads it (`metadata.fs_scope.root`).
fn scoped(call_id: &str, function_id: &str, arguments: Value) -> CallSpec {
    spec(call_id, function_id, arguments).with_fs_root(WS)
}

fn execute(call_id: &str, extra: Value) -> Value {
    let mut request = json!({"session_id": "s1", "turn_id": "t1", "function_call_id": call_id, "action": "execute"});
    if let (Some(r), Value::Object(extra)) = (request.as_object_mut(), extra) {
        r.extend(extra);
    }
    request
}

fn stamp(grants: &[&str], boundary: &str) -> Value {
    json!({"root": WS, "grants": grants, "boundary": boundary})
}

/// The inputs every hook of `function_id` received, oldest first.
fn inputs_of(h: &HarnessDouble, function_id: &str) -> Vec<Value> {
    h.hook_calls()
        .into_iter()
        .filter(|c| c.function_id == function_id)
        .map(|c| c.input)
        .collect()
}

#[tokio::test]
async fn g2_the_stamp_reaches_hooks_and_targets_and_no_hook_can_widen_it() {
    on_each_engine("g2_the_stamp_reaches_hooks_and_targets_and_no_hook_can_widen_it", |engine| async move {
        let widen = reply(json!({"decision": "continue", "mutations": {"arguments":
            {"cmd": "rm", "fs_scope": {"root": "/", "grants": ["/etc"], "boundary": "workspace"}}}}));
        let w = world(
            engine,
            today(),
            vec![
                ("t::widen", widen),
                ("coder::edit", echo()),
                ("fp::pipe", echo()),
                ("shell::filesystem::validate", echo()),
            ],
        )
        .await;
        hook(&w.h, &w.t, PRE, "t::widen", json!({"functions": ["shell::run"]})).await;
        call(w.t.client(), "harness::filesystem::grant", json!({"session_id": "s1", "root": "/data"}))
            .await
            .expect("grant");
        let forged = json!({"cmd": "ls", "fs_scope": {"root": "/", "grants": ["/"]}});
        let state = w.h.call(scoped("c1", "shell::run", forged.clone())).await;
        assert!(matches!(state, CallState::Completed { .. }), "{state:?}");
        let trusted = stamp(&["/data"], "configured_roots");
        assert_eq!(
            inputs_of(&w.h, "t::widen")[0]["call"]["arguments"],
            json!({"cmd": "ls", "fs_scope": trusted}),
            "the pre-trigger hook sees the stamp, not the model's scope"
        );
        assert_eq!(
            w.t.payloads("shell::run"),
            vec![json!({"cmd": "rm", "fs_scope": trusted})],
            "the hook's rewrite applies but its scope is stamped over"
        );

        for (id, stamped) in [
            ("coder::edit", true),
            ("fp::pipe", true),
            ("shell::filesystem::validate", false),
            ("demo::echo", false),
        ] {
            w.h.call(scoped(&format!("c_{id}"), id, forged.clone())).await;
            let got = w.t.payloads(id)[0].clone();
            if stamped {
                assert_eq!(got, json!({"cmd": "ls", "fs_scope": trusted}), "{id}");
            } else {
                assert_eq!(got, forged, "{id} is not stamped");
            }
        }
        // A turn with no root: the model's scope is taken off.
        w.h.call(spec("c9", "coder::edit", forged.clone()).with_working_dir(WS)).await;
        assert_eq!(w.t.payloads("coder::edit")[1], json!({"cmd": "ls"}));
    })
    .await;
}

#[tokio::test]
async fn g2_the_boundary_is_workspace_only_while_the_watch_binding_matches() {
    on_each_engine(
        "g2_the_boundary_is_workspace_only_while_the_watch_binding_matches",
        |engine| async move {
            let w = world(
                engine,
                today(),
                vec![
                    (WATCH_ID, reply(Value::Null)),
                    ("approval::grant-watch", reply(Value::Null)),
                    ("coder::edit", echo()),
                ],
            )
            .await;
            // A watch under another id does not count.
            hook(
                &w.h,
                &w.t,
                POST,
                "approval::grant-watch",
                json!({"functions": ["shell::*", "coder::*"]}),
            )
            .await;
            w.h.call(scoped("c1", "shell::run", json!({}))).await;
            assert_eq!(w.h.boundary("s1", "c1"), Some(Boundary::ConfiguredRoots));
            assert_eq!(
                w.h.runs_of("shell::run")[0].boundary.as_deref(),
                Some("configured_roots")
            );

            hook(
                &w.h,
                &w.t,
                POST,
                WATCH_ID,
                json!({"functions": ["shell::*"]}),
            )
            .await;
            w.h.call(scoped("c2", "shell::run", json!({}))).await;
            assert_eq!(w.h.boundary("s1", "c2"), Some(Boundary::Workspace));
            assert_eq!(
                w.t.payloads("shell::run")[1]["fs_scope"],
                stamp(&[], "workspace")
            );
            w.h.call(scoped("c3", "coder::edit", json!({}))).await;
            assert_eq!(
                w.h.boundary("s1", "c3"),
                Some(Boundary::ConfiguredRoots),
                "the watch's globs do not match coder::edit"
            );
            w.h.call(scoped("c4", "demo::echo", json!({}))).await;
            assert_eq!(
                w.h.boundary("s1", "c4"),
                None,
                "an unstamped call has no boundary"
            );
            assert_eq!(w.h.runs_of("demo::echo")[0].boundary, None);
        },
    )
    .await;
}

#[tokio::test]
async fn g2_the_jail_shell_enforces_root_and_grants_only_for_the_workspace_boundary() {
    on_each_engine(
        "g2_the_jail_shell_enforces_root_and_grants_only_for_the_workspace_boundary",
        |engine| async move {
            let jail =
                |_: ()| Arc::new(JailShell::new(Dialect::Shell, &["/srv"])) as Arc<dyn Behaviour>;
            let w = world(
                engine,
                today(),
                vec![
                    (WATCH_ID, reply(Value::Null)),
                    ("shell::read", jail(())),
                    ("shell::list", jail(())),
                ],
            )
            .await;
            hook(
                &w.h,
                &w.t,
                POST,
                WATCH_ID,
                json!({"functions": ["shell::read"]}),
            )
            .await;
            let read = |id: &str, path: &str| scoped(id, "shell::read", json!({"path": path}));

            let inside = w.h.call(read("c1", "/w/s1/a")).await;
            assert_eq!(inside.result().unwrap()["is_error"], false, "{inside:?}");
            let scoped_out = w.h.call(read("c2", "/srv/x")).await;
            let result = scoped_out.result().unwrap();
            assert_eq!(result["details"]["error"]["code"], "S220", "{result}");
            let message = result["details"]["error"]["message"].as_str().unwrap();
            assert!(
                message.ends_with(&access_request_tail("/srv", "/srv/x", "S220")),
                "{message}"
            );
            let outside = w.h.call(read("c3", "/data/x")).await;
            assert_eq!(
                outside.result().unwrap()["details"]["error"]["code"],
                "S215"
            );

            call(
                w.t.client(),
                "harness::filesystem::grant",
                json!({"session_id": "s1", "root": "/data"}),
            )
            .await
            .unwrap();
            let granted = w.h.call(read("c4", "/data/x")).await;
            assert_eq!(granted.result().unwrap()["is_error"], false, "{granted:?}");

            // No watch on shell::list: only the shell's own roots count.
            let list = |id: &str, path: &str| scoped(id, "shell::list", json!({"path": path}));
            let own = w.h.call(list("c5", "/srv/x")).await;
            assert_eq!(own.result().unwrap()["is_error"], false, "{own:?}");
            let ws = w.h.call(list("c6", "/w/s1/a")).await;
            assert_eq!(
                ws.result().unwrap()["details"]["error"]["code"],
                "S215",
                "{ws:?}"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn g2_filesystem_grants_are_sorted_copied_to_children_and_dropped_with_the_session() {
    on_each_engine(
        "g2_filesystem_grants_are_sorted_copied_to_children_and_dropped_with_the_session",
        |engine| async move {
            let url = engine.url();
            let w = world(
                engine,
                today(),
                vec![
                    ("t::tc", reply(json!({"ok": true}))),
                    ("t::hold", reply(json!({"decision": "hold"}))),
                ],
            )
            .await;
            let sessions = SessionDouble::start(&url).await;
            let c = w.t.client();
            for root in ["/b", "/a", "/b"] {
                call(
                    c,
                    "harness::filesystem::grant",
                    json!({"session_id": "s1", "root": root}),
                )
                .await
                .unwrap();
            }
            let grants = call(
                c,
                "harness::filesystem::grants",
                json!({"session_id": "s1"}),
            )
            .await
            .unwrap();
            assert_eq!(grants, json!({"session_id": "s1", "roots": ["/a", "/b"]}));
            let revoked = call(
                c,
                "harness::filesystem::revoke",
                json!({"session_id": "s1", "root": "/a"}),
            )
            .await
            .unwrap();
            assert_eq!(revoked, json!({"session_id": "s1", "roots": ["/b"]}));
            let info = call(c, "harness::filesystem::info", json!({}))
                .await
                .unwrap();
            assert_eq!(info, json!({"default_root": null, "boundary": "auto"}));
            let old = call(c, "harness::workspace::grants", json!({"session_id": "s1"}))
                .await
                .expect_err("no harness::workspace::* on today's harness");
            assert_eq!(code(&old), "function_not_found");

            w.h.spawn_child("s1", "child");
            let child = call(
                c,
                "harness::filesystem::grants",
                json!({"session_id": "child"}),
            )
            .await
            .unwrap();
            assert_eq!(child["roots"], json!(["/b"]));

            hook(&w.h, &w.t, "harness::turn-completed", "t::tc", json!({})).await;
            hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
            assert!(w
                .h
                .call(spec("c1", "demo::echo", json!({})))
                .await
                .is_held());
            assert!(
                sessions
                    .wait_for_binding("harness::on-session-deleted", WAIT)
                    .await,
                "today's harness binds session::deleted"
            );
            sessions.delete("s1").await;
            assert!(
                w.h.wait_until(WAIT, |h| h.grants("s1").is_empty()).await,
                "grants dropped"
            );
            let status = call(
                c,
                "harness::status",
                json!({"session_id": "s1", "verbose": true}),
            )
            .await
            .unwrap();
            assert_eq!(status, Value::Null, "the session's turn is gone");
            let late = call(c, RESOLVE, execute("c1", json!({}))).await.unwrap();
            assert_eq!(late["resolved"], false);
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(
                w.t.runs("t::tc"),
                0,
                "session::deleted fires no turn-completed"
            );
            assert_eq!(w.h.grants("child"), vec!["/b"], "the child keeps its copy");
        },
    )
    .await;
}

#[tokio::test]
async fn g2_resolve_drops_extra_roots_unions_its_grants_and_fills_deliver_defaults() {
    on_each_engine(
        "g2_resolve_drops_extra_roots_unions_its_grants_and_fills_deliver_defaults",
        |engine| async move {
            let w = world(engine, today(), vec![("t::hold", reply(json!({"decision": "hold"})))]).await;
            hook(&w.h, &w.t, PRE, "t::hold", json!({"functions": ["shell::run"]})).await;
            call(w.t.client(), "harness::filesystem::grant", json!({"session_id": "s1", "root": "/data"}))
                .await
                .unwrap();
            assert!(w.h.call(scoped("c1", "shell::run", json!({"cmd": "ls"}))).await.is_held());
            assert!(w.h.call(scoped("c2", "shell::run", json!({"cmd": "ls"}))).await.is_held());

            let reply = call(
                w.t.client(),
                RESOLVE,
                execute("c1", json!({"extra_roots": ["/x"], "fs_scope": {"grants": ["/one", "/data"]}, "bogus": 1})),
            )
            .await
            .unwrap();
            assert_eq!(reply, json!({"resolved": true, "turn_resumed": false}));
            let run = &w.h.runs_of("shell::run")[0];
            assert_eq!(run.arguments["fs_scope"], stamp(&["/data", "/one"], "configured_roots"));
            assert_eq!(run.extra_roots, vec!["/one", "/data"], "the one-shot grants as sent");
            assert!(!run.arguments.to_string().contains("/x"), "extra_roots is dropped");

            let delivered = call(
                w.t.client(),
                RESOLVE,
                json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c2"}),
            )
            .await
            .unwrap();
            assert_eq!(delivered, json!({"resolved": true, "turn_resumed": true}));
            let entry = w.h.entry("e_t1_c2").expect("delivered under e_<turn>_<call>");
            assert_eq!(entry.result["content"], json!([{"type": "text", "text": ""}]));
            assert_eq!(entry.result["is_error"], false);
            assert_eq!(entry.result["details"], Value::Null);
            assert_eq!(w.t.runs("shell::run"), 1, "deliver is the default and runs nothing");
        },
    )
    .await;
}

#[tokio::test]
async fn g2_execute_runs_the_rest_of_the_chain_after_the_holder_on_the_held_arguments() {
    on_each_engine(
        "g2_execute_runs_the_rest_of_the_chain_after_the_holder_on_the_held_arguments",
        |engine| async move {
            let first = reply(json!({"mutations": {"arguments": {"cmd": "a"}}, "annotations": {"first": 1}}));
            let holder = Script::boxed(
                vec![json!({"decision": "hold", "mutations": {"arguments": {"cmd": "b"}}, "annotations": {"held": true}})],
                json!({"decision": "deny", "reason": "the holder ran again"}),
            );
            let after = reply(json!({"decision": "continue", "mutations": {"arguments": {"cmd": "c"}}}));
            let w = world(
                engine,
                today(),
                vec![("t::first", first), ("t::hold", holder), ("t::after", after)],
            )
            .await;
            let only = json!({"functions": ["shell::run"]});
            for (id, priority) in [("t::first", -1), ("t::hold", 0), ("t::after", 1)] {
                let mut config = only.clone();
                config["priority"] = json!(priority);
                hook(&w.h, &w.t, PRE, id, config).await;
            }
            let state = w.h.call(scoped("c1", "shell::run", json!({"cmd": "ls"}))).await;
            assert_eq!(
                state,
                CallState::Held { held_by: "t::hold".into(), point: HookPoint::PreTrigger }
            );
            assert_eq!(w.h.held_arguments("s1", "c1"), Some(json!({"cmd": "b"})), "the holder's own rewrite is kept");
            assert_eq!(
                w.h.annotations("s1", "c1"),
                json!({"first": 1, "held": true}).as_object().cloned().unwrap()
            );
            assert_eq!(w.t.runs("t::after") + w.t.runs("shell::run"), 0);

            for (request, why) in [
                (json!({"session_id": "s1", "turn_id": "t9", "function_call_id": "c1", "action": "execute"}), "wrong turn"),
                (execute("nope", json!({})), "unknown call"),
            ] {
                let refused = call(w.t.client(), RESOLVE, request).await.unwrap();
                assert_eq!(refused, json!({"resolved": false, "turn_resumed": false}), "{why}");
            }
            let reply = call(w.t.client(), RESOLVE, execute("c1", json!({"fs_scope": {"grants": ["/g"]}})))
                .await
                .unwrap();
            assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
            assert_eq!(hooks_called(&w.h, HookPoint::PreTrigger), vec!["t::first", "t::hold", "t::after"]);
            let trusted = stamp(&["/g"], "configured_roots");
            assert_eq!(
                inputs_of(&w.h, "t::after")[0]["call"]["arguments"],
                json!({"cmd": "b", "fs_scope": trusted}),
                "the rest of the chain sees the held arguments, stamped again"
            );
            assert_eq!(w.t.payloads("shell::run"), vec![json!({"cmd": "c", "fs_scope": trusted})]);
            let entry = w.h.entry("e_t1_c1").expect("the result is appended");
            assert_eq!(entry.result["is_error"], false);

            let again = call(w.t.client(), RESOLVE, execute("c1", json!({}))).await.unwrap();
            assert_eq!(again["resolved"], false, "a call that is not pending");
            assert_eq!(w.t.runs("shell::run"), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn g2_execute_answers_only_when_the_target_and_the_post_chain_have_finished() {
    on_each_engine(
        "g2_execute_answers_only_when_the_target_and_the_post_chain_have_finished",
        |engine| async move {
            let w = world(
                engine,
                today(),
                vec![
                    ("t::hold", reply(json!({"decision": "hold"}))),
                    ("t::post", reply(Value::Null)),
                ],
            )
            .await;
            hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
            hook(&w.h, &w.t, POST, "t::post", json!({})).await;
            // A target that takes a while: the switch the release work uses.
            w.t.set_delay("demo::echo", Duration::from_millis(800));
            assert!(w
                .h
                .call(spec("c1", "demo::echo", json!({})))
                .await
                .is_held());

            let client = w.t.client().clone();
            let resolve =
                tokio::spawn(async move { call(&client, RESOLVE, execute("c1", json!({}))).await });
            assert!(
                w.h.wait_until(WAIT, |_| w.t.runs("demo::echo") == 1).await,
                "the target started"
            );
            assert!(!resolve.is_finished(), "no answer while the target runs");
            assert_eq!(w.h.state("s1", "c1"), Some(CallState::Running));
            assert_eq!(
                w.h.pending_calls("s1"),
                vec!["c1"],
                "a call being executed is still pending"
            );

            let reply = resolve.await.expect("joined").expect("resolve answers");
            assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
            assert!(matches!(
                w.h.state("s1", "c1"),
                Some(CallState::Completed { .. })
            ));
            assert_eq!(
                inputs_of(&w.h, "t::post").len(),
                1,
                "the post-trigger chain ran before the answer"
            );
            assert!(w.h.pending_calls("s1").is_empty());
        },
    )
    .await;
}

#[tokio::test]
async fn g2_a_post_trigger_hold_inside_execute_holds_again_under_the_same_id() {
    on_each_engine(
        "g2_a_post_trigger_hold_inside_execute_holds_again_under_the_same_id",
        |engine| async move {
            let watch = Script::boxed(vec![json!({"decision": "hold"})], Value::Null);
            let w = world(
                engine,
                today(),
                vec![
                    ("t::gate", reply(json!({"decision": "hold"}))),
                    (WATCH_ID, watch),
                    ("shell::read", Arc::new(JailShell::new(Dialect::Shell, &[]))),
                ],
            )
            .await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::gate",
                json!({"functions": ["shell::*"]}),
            )
            .await;
            hook(
                &w.h,
                &w.t,
                POST,
                WATCH_ID,
                json!({"functions": ["shell::*"], "on_error": "fail_open"}),
            )
            .await;
            let first =
                w.h.call(scoped("c1", "shell::read", json!({"path": "/data/x"})))
                    .await;
            assert_eq!(first.held_by(), Some("t::gate"));

            let reply = call(w.t.client(), RESOLVE, execute("c1", json!({})))
                .await
                .unwrap();
            assert_eq!(reply, json!({"resolved": true, "turn_resumed": false}));
            assert_eq!(
                w.h.state("s1", "c1"),
                Some(CallState::Held {
                    held_by: WATCH_ID.into(),
                    point: HookPoint::PostTrigger
                })
            );
            let seen = &inputs_of(&w.h, WATCH_ID)[0]["result"];
            let message = seen["details"]["error"]["message"].as_str().unwrap();
            assert!(
                message.ends_with(&access_request_tail("/data", "/data/x", "S215")),
                "{message}"
            );
            assert_eq!(w.h.pending_calls("s1"), vec!["c1"]);

            let reply = call(
                w.t.client(),
                RESOLVE,
                execute("c1", json!({"fs_scope": {"grants": ["/data"]}})),
            )
            .await
            .unwrap();
            assert_eq!(reply, json!({"resolved": true, "turn_resumed": true}));
            let done = w.h.state("s1", "c1").unwrap();
            assert_eq!(done.result().unwrap()["is_error"], false, "{done:?}");
            assert_eq!(
                w.t.runs("t::gate"),
                1,
                "no pre-trigger hook runs again after a post-trigger hold"
            );
            let runs = w.h.runs_of("shell::read");
            assert_eq!(runs.len(), 2);
            assert_eq!(
                runs[1].arguments["fs_scope"],
                stamp(&["/data"], "workspace")
            );
        },
    )
    .await;
}

#[tokio::test]
async fn g2_deny_keeps_only_the_reason_and_post_trigger_replies_rewrite_the_result() {
    on_each_engine(
        "g2_deny_keeps_only_the_reason_and_post_trigger_replies_rewrite_the_result",
        |engine| async move {
            let redact = reply(json!({
                "mutations": {"content": [{"type": "text", "text": "[redacted]"}], "is_error": true},
                "annotations": {"redacted": true}
            }));
            let w = world(
                engine,
                today(),
                vec![
                    ("t::deny", reply(json!({"decision": "deny", "reason": "not today", "details": {"secret": 1}}))),
                    ("t::bare", reply(json!({"decision": "deny"}))),
                    ("t::post_deny", reply(json!({"decision": "deny", "reason": "too late"}))),
                    ("t::redact", redact),
                    ("demo::other", echo()),
                    ("demo::third", echo()),
                ],
            )
            .await;
            hook(&w.h, &w.t, PRE, "t::deny", json!({"functions": ["demo::echo"]})).await;
            hook(&w.h, &w.t, PRE, "t::bare", json!({"functions": ["demo::other"]})).await;
            hook(&w.h, &w.t, POST, "t::post_deny", json!({"functions": ["shell::run"]})).await;
            hook(&w.h, &w.t, POST, "t::redact", json!({"functions": ["demo::third"]})).await;

            let denied = w.h.call(spec("c1", "demo::echo", json!({}))).await;
            assert_eq!(denied.deny_reason(), Some("not today"));
            assert_eq!(
                denied.result().unwrap(),
                &json!({"function_call_id": "c1", "function_id": "demo::echo",
                        "content": [{"type": "text", "text": "not today"}], "is_error": true,
                        "details": {"error": "hook_denied", "message": "not today"}})
            );
            let bare = w.h.call(spec("c2", "demo::other", json!({}))).await;
            assert_eq!(bare.deny_reason(), Some("denied by hook"));
            assert_eq!(bare.result().unwrap()["details"]["message"], "denied by hook");
            assert_eq!(w.t.runs("demo::echo") + w.t.runs("demo::other"), 0);

            let post = w.h.call(spec("c3", "shell::run", json!({}))).await;
            assert!(matches!(post, CallState::Completed { .. }), "a post-trigger deny is ignored: {post:?}");
            assert_eq!(post.result().unwrap()["is_error"], false);

            let rewritten = w.h.call(spec("c4", "demo::third", json!({"k": 1}))).await;
            let result = rewritten.result().unwrap();
            assert_eq!(result["content"], json!([{"type": "text", "text": "[redacted]"}]));
            assert_eq!(result["is_error"], true);
            assert_eq!(result["details"], json!({"function_id": "demo::third", "echo": {"k": 1}}));
            assert_eq!(w.h.annotations("s1", "c4")["redacted"], true);
        },
    )
    .await;
}

#[tokio::test]
async fn g2_a_cancelled_turn_leaves_its_held_calls_pending_and_unresolvable() {
    on_each_engine(
        "g2_a_cancelled_turn_leaves_its_held_calls_pending_and_unresolvable",
        |engine| async move {
            let w = world(
                engine,
                today(),
                vec![("t::tc", reply(json!({"ok": true}))), ("t::hold", reply(json!({"decision": "hold"})))],
            )
            .await;
            hook(&w.h, &w.t, "harness::turn-completed", "t::tc", json!({"session_id": "s1"})).await;
            hook(&w.h, &w.t, PRE, "t::hold", json!({})).await;
            assert!(w.h.call(spec("c1", "demo::echo", json!({}))).await.is_held());
            assert_eq!(w.h.complete_turn("s1", "t1", "cancelled").await, 1);
            assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::tc") == 1).await);
            let event = &w.t.payloads("t::tc")[0];
            assert_eq!(event["status"], "cancelled");
            assert_eq!(event["terminal"], true);

            assert_eq!(w.h.held_calls("s1", "t1"), vec!["c1"], "still held, on a finished turn");
            let status = call(w.t.client(), "harness::status", json!({"session_id": "s1", "verbose": true}))
                .await
                .unwrap();
            assert_eq!(status["pending_function_calls"], json!(["c1"]));
            assert_eq!(status["status"], "cancelled");
            for action in ["execute", "deliver"] {
                let late = call(
                    w.t.client(),
                    RESOLVE,
                    json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "action": action}),
                )
                .await
                .unwrap();
                assert_eq!(late, json!({"resolved": false, "turn_resumed": false}), "{action}");
            }
            assert!(w.h.state("s1", "c1").unwrap().is_held());
            assert_eq!(w.t.runs("demo::echo"), 0);
        },
    )
    .await;
}

#[tokio::test]
async fn g2_status_lists_the_current_turns_pending_calls_when_verbose() {
    on_each_engine(
        "g2_status_lists_the_current_turns_pending_calls_when_verbose",
        |engine| async move {
            let w = world(
                engine,
                today(),
                vec![("t::hold", reply(json!({"decision": "hold"})))],
            )
            .await;
            hook(
                &w.h,
                &w.t,
                PRE,
                "t::hold",
                json!({"functions": ["demo::echo"]}),
            )
            .await;
            assert!(w
                .h
                .call(spec("c2", "demo::echo", json!({})))
                .await
                .is_held());
            assert!(w
                .h
                .call(spec("c1", "demo::echo", json!({})))
                .await
                .is_held());
            w.h.call(spec("c3", "shell::run", json!({}))).await;
            let c = w.t.client();
            let verbose = call(
                c,
                "harness::status",
                json!({"session_id": "s1", "verbose": true}),
            )
            .await
            .unwrap();
            assert_eq!(
                verbose,
                json!({"session_id": "s1", "turn_id": "t1", "status": "awaiting_functions",
                   "children": [], "pending_function_calls": ["c1", "c2"]})
            );
            let terse = call(c, "harness::status", json!({"session_id": "s1"}))
                .await
                .unwrap();
            assert!(terse.get("pending_function_calls").is_none(), "{terse}");
            let unknown = call(
                c,
                "harness::status",
                json!({"session_id": "nobody", "verbose": true}),
            )
            .await
            .unwrap();
            assert_eq!(unknown, Value::Null);

            w.h.start_turn("s1", "t2").await;
            let next = call(
                c,
                "harness::status",
                json!({"session_id": "s1", "verbose": true}),
            )
            .await
            .unwrap();
            assert_eq!(next["turn_id"], "t2");
            assert_eq!(
                next["pending_function_calls"],
                json!([]),
                "only the current turn's calls"
            );
            assert_eq!(next["status"], "running");
        },
    )
    .await;
}

#[tokio::test]
async fn g2_a_spawn_makes_the_childs_session_with_its_link_and_the_call_waits_on_it() {
    on_each_engine("g2_spawn", |engine| async move {
        let url = engine.url();
        let w = world(engine, today(), vec![("t::started", reply(Value::Null))]).await;
        let sessions = SessionDouble::start(&url).await;
        bind(w.t.client(), "harness::turn-started", "t::started", json!({}));
        w.h.wait_for_binding("harness::turn-started", "t::started", WAIT).await;
        call(w.t.client(), "harness::filesystem::grant", json!({"session_id": "s1", "root": "/data"}))
            .await
            .expect("grant");
        w.h.play_spawns();
        let state = w.h.call(spec("c_spawn", "harness::spawn", json!({"task": "go", "session_id": "kid"}))).await;
        assert_eq!(
            state,
            CallState::AwaitingChild { child_session_id: "kid".into(), child_turn_id: "t_kid".into() }
        );
        assert_eq!(w.t.runs("harness::spawn"), 0, "the harness spawns; no target runs");
        assert_eq!(
            sessions.metadata_of("kid"),
            Some(json!({"parent_session_id": "s1", "parent_turn_id": "t1", "function_call_id": "c_spawn", "depth": 1}))
        );
        assert_eq!(w.h.grants("kid"), vec!["/data".to_string()]);
        let status = call(w.t.client(), "harness::status", json!({"session_id": "s1", "verbose": true}))
            .await
            .unwrap();
        assert_eq!(status["pending_function_calls"], json!(["c_spawn"]), "{status}");
        assert_eq!(
            status["children"],
            json!([{"function_call_id": "c_spawn", "session_id": "kid", "turn_id": "t_kid"}])
        );
        assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::started") == 1).await);
        let started = &w.t.payloads("t::started")[0];
        assert_eq!(started["session_id"], "kid");
        assert_eq!(started["parent"], json!({"session_id": "s1", "turn_id": "t1", "function_call_id": "c_spawn"}));
        // Into a session that exists: the session keeps its metadata.
        sessions.put("old", json!({"metadata": {"owner": "u"}}));
        assert!(!w.h.spawn("s1", "t1", "c_other", "old").await);
        assert_eq!(sessions.metadata_of("old"), Some(json!({"owner": "u"})));
    })
    .await;
}

#[tokio::test]
async fn g2_ready_reaches_late_binders_on_announce_and_after_a_restart() {
    on_each_engine("g2_ready_reaches_late_binders_on_announce_and_after_a_restart", |engine| async move {
        let url = engine.url();
        let w = world(engine, today(), vec![("t::ready", reply(Value::Null))]).await;
        let rejected = call(
            w.t.client(),
            "engine::register_trigger",
            json!({"trigger_type": "harness::ready", "function_id": "t::ready", "config": {"session_id": "s1"}}),
        )
        .await;
        assert!(rejected.is_err(), "harness::ready takes {{}} only");
        bind(w.t.client(), "harness::ready", "t::ready", json!({}));
        assert!(
            w.h.wait_until(WAIT, |_| w.t.runs("t::ready") == 1).await,
            "a binding made after boot is told at once"
        );
        let event = &w.t.payloads("t::ready")[0];
        assert_eq!(event["status"], "ready");
        assert!(event["timestamp"].as_u64().is_some_and(|t| t > 1_600_000_000_000));

        assert_eq!(w.h.announce_ready().await, 1);
        assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::ready") == 2).await);

        w.h.shutdown().await;
        let restarted = HarnessDouble::start(&url, today()).await;
        assert!(
            restarted.wait_until(WAIT, |_| w.t.runs("t::ready") >= 3).await,
            "the restarted harness announces itself to the binding the engine hands it"
        );
    })
    .await;
}

#[tokio::test]
async fn g1_has_none_of_the_generation_2_surface() {
    on_each_engine(
        "g1_has_none_of_the_generation_2_surface",
        |engine| async move {
            let w = world(engine, brief(), vec![]).await;
            assert_eq!(w.h.announce_ready().await, 0);
            let types = call(w.t.client(), "engine::triggers::list", json!({}))
                .await
                .unwrap();
            let ids: Vec<&str> = types["triggers"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["id"].as_str())
                .collect();
            assert!(
                ids.contains(&"harness::turn-completed") && !ids.contains(&"harness::ready"),
                "{ids:?}"
            );
            for id in [
                "harness::status",
                "harness::filesystem::grants",
                "harness::filesystem::info",
            ] {
                let err = call(w.t.client(), id, json!({"session_id": "s1"}))
                    .await
                    .expect_err(id);
                assert_eq!(code(&err), "function_not_found", "{id}");
            }
            // The brief's harness stamps nothing.
            w.h.call(scoped("c1", "shell::run", json!({"cmd": "ls"})))
                .await;
            assert_eq!(w.t.payloads("shell::run"), vec![json!({"cmd": "ls"})]);
        },
    )
    .await;
}

#[tokio::test]
async fn g2_turn_completed_carries_the_newer_fields_and_filters_reject_unknown_keys() {
    on_each_engine(
        "g2_turn_completed_carries_the_newer_fields_and_filters_reject_unknown_keys",
        |engine| async move {
            let w = world(engine, today(), vec![("t::tc", reply(json!({"ok": true})))]).await;
            let rejected = call(
                w.t.client(),
                "engine::register_trigger",
                json!({"trigger_type": "harness::turn-completed", "function_id": "t::tc", "config": {"sesion_id": "s1"}}),
            )
            .await;
            assert!(rejected.is_err(), "today's harness rejects an unknown filter key");
            hook(&w.h, &w.t, "harness::turn-completed", "t::tc", json!({"parent_session_id": "p1"})).await;
            let mut turn = TurnCompletion::new("child", "t5", "completed");
            turn.parent_session_id = Some("p1".into());
            turn.parent_turn_id = Some("pt".into());
            turn.parent_function_call_id = Some("pc".into());
            turn.terminal = false;
            turn.context = Some(json!({"tokens": 5}));
            turn.reactive_depth = Some(2);
            turn.result = Some(json!("done"));
            assert_eq!(w.h.complete_turn_with(turn).await, 1);
            assert!(w.h.wait_until(WAIT, |_| w.t.runs("t::tc") == 1).await);
            let event = &w.t.payloads("t::tc")[0];
            assert_eq!(event["terminal"], false);
            assert_eq!(event["parent"], json!({"session_id": "p1", "turn_id": "pt", "function_call_id": "pc"}));
            assert_eq!(event["parent_session_id"], "p1");
            assert_eq!(event["context"], json!({"tokens": 5}));
            assert_eq!(event["reactive_depth"], 2);
            assert_eq!(event["result"], "done");
        },
    )
    .await;
}

/// The resolve faults, played on one generation.
async fn resolve_faults(engine: EngineFixture, generation: Generation) {
    let w = world(
        engine,
        HarnessOptions::generation(generation),
        vec![("t::hold", reply(json!({"decision": "hold"})))],
    )
    .await;
    hook(
        &w.h,
        &w.t,
        PRE,
        "t::hold",
        json!({"functions": ["demo::echo"]}),
    )
    .await;
    for id in ["c1", "c2", "c3", "c4"] {
        assert!(w.h.call(spec(id, "demo::echo", json!({}))).await.is_held());
    }
    w.h.fault_resolves(ResolveFault::Refuse, 1);
    w.h.fault_resolves(ResolveFault::Hang, 1);
    w.h.fault_resolves(ResolveFault::LoseReply, 1);
    w.h.fault_resolves(ResolveFault::Fail, 1);
    let short = |call_id: &str| TriggerRequest {
        function_id: RESOLVE.to_string(),
        payload: execute(call_id, json!({})),
        action: None,
        timeout_ms: Some(700),
    };
    let c = w.t.client();

    let refused = call(c, RESOLVE, execute("c1", json!({}))).await.unwrap();
    assert_eq!(refused, json!({"resolved": false, "turn_resumed": false}));
    assert!(
        w.h.state("s1", "c1").unwrap().is_held(),
        "a refusal touches nothing"
    );

    let hung = c.trigger(short("c2")).await;
    assert!(matches!(hung, Err(Error::Timeout)), "{hung:?}");
    assert!(
        w.h.state("s1", "c2").unwrap().is_held(),
        "a hung resolve did nothing"
    );

    let lost = c.trigger(short("c3")).await;
    assert!(matches!(lost, Err(Error::Timeout)), "{lost:?}");
    let done =
        w.h.wait_for_state("s1", "c3", WAIT, |s| {
            matches!(s, CallState::Completed { .. })
        })
        .await;
    assert!(
        matches!(done, Some(CallState::Completed { .. })),
        "the lost reply's work was done: {done:?}"
    );

    let failed = call(c, RESOLVE, execute("c4", json!({})))
        .await
        .expect_err("fails");
    assert_eq!(code(&failed), "harness_unavailable");
    assert!(w.h.state("s1", "c4").unwrap().is_held());

    let normal = call(c, RESOLVE, execute("c4", json!({}))).await.unwrap();
    assert_eq!(
        normal,
        json!({"resolved": true, "turn_resumed": false}),
        "c1 and c2 are still held"
    );
    assert_eq!(w.t.runs("demo::echo"), 2);
    assert_eq!(
        w.h.resolve_requests().len(),
        5,
        "every request is journaled"
    );
}

#[tokio::test]
async fn resolves_can_be_refused_hung_lost_or_failed_on_either_generation() {
    for generation in [Generation::G1, Generation::G2] {
        on_each_engine(
            "resolves_can_be_refused_hung_lost_or_failed_on_either_generation",
            |engine| resolve_faults(engine, generation),
        )
        .await;
    }
}

#[tokio::test]
async fn g2_without_grants_has_no_filesystem_plane() {
    on_each_engine(
        "g2_without_grants_has_no_filesystem_plane",
        |engine| async move {
            let options = HarnessOptions {
                workspace_grants: false,
                ..today()
            };
            let w = world(engine, options, vec![]).await;
            for id in [
                "harness::filesystem::grants",
                "harness::filesystem::info",
                "harness::workspace::grants",
            ] {
                let err = call(w.t.client(), id, json!({"session_id": "s1"}))
                    .await
                    .expect_err(id);
                assert_eq!(code(&err), "function_not_found", "{id}");
            }
            let status = call(w.t.client(), "harness::status", json!({"session_id": "s1"})).await;
            assert_eq!(status.expect("status is still served"), Value::Null);
        },
    )
    .await;
}

/// The reviewer double answers each way the gate must survive (contract
/// §22), records what it was asked, and lets a per-function answer win.
#[tokio::test]
async fn reviewer_double_answers_as_set_and_records_each_review() {
    use approval_gate_testkit::reviewer::{Answer, ReviewerDouble, REVIEW_CALL};

    on_each_engine("reviewer_double", |engine| async move {
        let reviewer = ReviewerDouble::start(&engine.url(), Answer::Allow).await;
        let client = engine.client("reviewer-probe").await;
        let ask = |fid: &str| {
            let client = client.clone();
            let input = json!({"function_call_id": format!("c-{fid}"), "function_id": fid});
            async move {
                iii_sdk::IIIClient::trigger(
                    &client,
                    TriggerRequest {
                        function_id: REVIEW_CALL.into(),
                        payload: input,
                        action: None,
                        timeout_ms: Some(1000),
                    },
                )
                .await
            }
        };
        let out = ask("a::allowed").await.expect("answer");
        assert_eq!(out["verdict"], "allow");
        assert!(out["rationale"].is_string());
        reviewer.set(Answer::Deny);
        assert_eq!(ask("a::b").await.expect("answer")["verdict"], "deny");
        reviewer.set(Answer::Escalate);
        assert_eq!(ask("a::b").await.expect("answer")["verdict"], "escalate");
        reviewer.set(Answer::Garbage);
        let junk = ask("a::b").await.expect("answer");
        assert!(junk.get("rationale").is_none(), "{junk}");
        reviewer.set(Answer::Error);
        assert_eq!(
            code(&ask("a::b").await.expect_err("an error")),
            "reviewer_failed"
        );
        reviewer.set_for("a::slow", Answer::times_out());
        assert!(
            ask("a::slow").await.is_err(),
            "no answer within the caller's second"
        );
        reviewer.set_for("a::b", Answer::Allow);
        assert_eq!(ask("a::b").await.expect("answer")["verdict"], "allow");
        assert_eq!(reviewer.count(), 7);
        let first = &reviewer.reviews_of("c-a::allowed")[0];
        assert!(first.get("_caller_worker_id").is_none(), "{first}");
        assert_eq!(first["function_id"], "a::allowed");
    })
    .await;
}
