//! The HTTP worker (`iii-http`): the test engine's `http` trigger provider
//! against what the real engine does. Every test runs on the test engine,
//! then on a real engine when `III_ENGINE_BIN` points at one (or `iii` is on
//! `PATH`).

// The SDK deprecates plain bindings in favour of observers, which the
// engine the worker targets does not have.
#![allow(deprecated)]

use std::future::Future;
use std::time::{Duration, Instant};

use approval_gate_testkit::fixture::{call, wait_for_functions, EngineFixture, HTTP_TIMEOUT};
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

/// Runs `scenario` on the test engine, then on a real engine when present.
async fn on_both<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    eprintln!("{test}: on the test engine");
    scenario(EngineFixture::start_test().await).await;
    if let Some(real) = EngineFixture::start_real(test).await {
        eprintln!("{test}: on the real engine");
        scenario(real).await;
    }
}

/// Answers `{status_code: 200, body: {received: <request>}}`.
fn echo() -> RegisterFunction {
    RegisterFunction::new_async(|input: Value| async move {
        Ok::<Value, iii_sdk::Error>(json!({"status_code": 200, "body": {"received": input}}))
    })
}

fn bind(client: &IIIClient, function_id: &str, method: &str, path: &str) {
    client
        .register_trigger(RegisterTriggerInput::new(
            "http",
            function_id,
            json!({"api_path": path, "http_method": method}),
        ))
        .expect("binding sent");
}

/// Polls `url` until it answers something other than 404 (the binding
/// reached the engine).
async fn wait_for_route(http: &reqwest::Client, method: reqwest::Method, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = http
            .request(method.clone(), url)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        if status != 404 && status != 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{method} {url} never routed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client that follows no redirects and keeps no connection between
/// engines.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .expect("http client")
}

/// An engine with `probe::http-echo` bound on the approval routes.
async fn echo_routes(engine: &EngineFixture) -> (IIIClient, reqwest::Client) {
    let worker = engine.client("http-probe").await;
    worker.register_function("probe::http-echo", echo());
    wait_for_functions(&worker, &["probe::http-echo"]).await;
    bind(&worker, "probe::http-echo", "GET", "/approvals/:token");
    bind(&worker, "probe::http-echo", "post", "approvals/:token");
    bind(&worker, "probe::http-echo", "GET", "/approvals");
    let http = client();
    let base = engine.http_url();
    wait_for_route(&http, reqwest::Method::GET, &format!("{base}/approvals/x")).await;
    wait_for_route(&http, reqwest::Method::GET, &format!("{base}/approvals")).await;
    (worker, http)
}

async fn received(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    body["received"].clone()
}

#[tokio::test]
async fn http_the_request_object_is_the_real_engines() {
    on_both("http_request_object", |engine| async move {
        let (_worker, http) = echo_routes(&engine).await;
        let base = engine.http_url();

        let got = received(
            http.get(format!(
                "{base}/approvals/tok123?a=1&b=two&a=3&empty=&enc=%20x%2Fy&plus=a+b"
            ))
            .header("X-Custom", "One")
            .header("X-Custom", "Two")
            .header("Authorization", "Bearer sekret")
            .send()
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(got["method"], "GET");
        assert_eq!(
            got["path"], "/approvals/:token",
            "the pattern, not the request path"
        );
        assert_eq!(got["path_params"], json!({"token": "tok123"}));
        assert_eq!(
            got["query_params"],
            json!({"a": "3", "b": "two", "empty": "", "enc": " x/y", "plus": "a b"})
        );
        assert_eq!(got["headers"]["x-custom"], "Two", "the last value wins");
        assert_eq!(got["headers"]["authorization"], "Bearer sekret");
        assert!(got["headers"]["host"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"));
        assert_eq!(got["body"], Value::Null);
        assert_eq!(
            got["trigger"],
            json!({"method": "GET", "path": "/approvals/:token", "type": "http"})
        );
        assert_eq!(got["request_body"]["direction"], "read");
        assert_eq!(got["response"]["direction"], "write");
        assert!(got.get("context").is_none(), "no context field");
        assert!(got.get("_caller_worker_id").is_none());

        // Path parameters are not percent-decoded.
        let got = received(
            http.get(format!("{base}/approvals/t%20k"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(got["path_params"]["token"], "t%20k");

        // The body is parsed only for a content type containing
        // "application/json" (lower case), and only when it is valid.
        for (content_type, body, want) in [
            (
                "application/json",
                r#"{"decision":"allow"}"#,
                json!({"decision": "allow"}),
            ),
            ("application/json; charset=utf-8", r#"[1]"#, json!([1])),
            ("Application/JSON", r#"{"a":1}"#, Value::Null),
            ("application/vnd.api+json", r#"{"a":1}"#, Value::Null),
            (
                "application/x-www-form-urlencoded",
                "decision=allow&reason=ok",
                Value::Null,
            ),
            ("text/plain", r#"{"a":1}"#, Value::Null),
            ("application/json", "{not json", Value::Null),
            ("application/json", "", Value::Null),
        ] {
            let got = received(
                http.post(format!("{base}/approvals/t"))
                    .header("Content-Type", content_type)
                    .body(body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(got["body"], want, "{content_type} {body}");
            assert_eq!(got["method"], "POST");
            assert_eq!(
                got["path"], "approvals/:token",
                "the pattern as it was bound"
            );
        }
        let got = received(http.get(format!("{base}/approvals")).send().await.unwrap()).await;
        assert_eq!(got["path"], "/approvals");
        assert_eq!(got["path_params"], json!({}));
    })
    .await;
}

#[tokio::test]
async fn http_the_server_answers_unknown_paths_methods_and_failures_itself() {
    on_both("http_server_answers", |engine| async move {
        let (worker, http) = echo_routes(&engine).await;
        let base = engine.http_url();
        worker.register_function(
            "probe::http-fail",
            RegisterFunction::new_async(|_: Value| async move {
                Err::<Value, iii_sdk::Error>(iii_sdk::Error::Remote {
                    code: "MY_CODE".into(),
                    message: "my message".into(),
                    stacktrace: None,
                })
            }),
        );
        wait_for_functions(&worker, &["probe::http-fail"]).await;
        bind(&worker, "probe::http-fail", "GET", "/fails");
        wait_for_route(&http, reqwest::Method::GET, &format!("{base}/fails")).await;

        for path in [
            "/nope",
            "/approvals/",
            "/approvals/a/b",
            "/approvals//",
            "/Approvals/tok",
        ] {
            let r = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(r.status(), 404, "{path}");
            assert_eq!(r.headers()["access-control-allow-origin"], "*");
            let body: Value = r.json().await.unwrap();
            assert_eq!(
                body,
                json!({"error": {"code": "NOT_FOUND", "message": "Not Found"}}),
                "{path}"
            );
        }

        for (method, path, allow) in [
            ("PUT", "/approvals/tok", "GET,HEAD,POST"),
            ("DELETE", "/approvals/tok", "GET,HEAD,POST"),
            ("POST", "/approvals", "GET,HEAD"),
        ] {
            let r = http
                .request(method.parse().unwrap(), format!("{base}{path}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "{method} {path}");
            // The real engine lists them in the order its routes were made.
            let mut listed: Vec<&str> = r.headers()["allow"].to_str().unwrap().split(',').collect();
            listed.sort_unstable();
            let mut want: Vec<&str> = allow.split(',').collect();
            want.sort_unstable();
            assert_eq!(listed, want, "{method} {path}");
            assert_eq!(r.headers()["access-control-allow-origin"], "*");
            assert!(
                r.bytes().await.unwrap().is_empty(),
                "{method} {path}: no body"
            );
        }

        let r = http
            .head(format!("{base}/approvals/tok"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "HEAD has no route of its own");

        let r = http.get(format!("{base}/fails")).send().await.unwrap();
        assert_eq!(r.status(), 500);
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "MY_CODE");
        assert_eq!(body["error"]["message"], "my message");
        let error_id = body["error"]["error_id"].as_str().unwrap();
        assert!(
            !error_id.is_empty() && error_id.chars().all(|c| c.is_ascii_hexdigit()),
            "{error_id}"
        );

        // A preflight is answered by the server; the function is not called.
        let r = http
            .request(reqwest::Method::OPTIONS, format!("{base}/approvals/tok"))
            .header("Origin", "https://evil.example")
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "content-type")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        assert_eq!(r.headers()["access-control-allow-methods"], "*");
        assert_eq!(r.headers()["access-control-allow-headers"], "*");
        assert!(r.bytes().await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn http_a_functions_answer_becomes_the_response() {
    on_both("http_answers", |engine| async move {
        let worker = engine.client("http-modes").await;
        worker.register_function(
            "probe::http-mode",
            RegisterFunction::new_async(|input: Value| async move {
                let mode = input["path_params"]["mode"].as_str().unwrap_or_default().to_string();
                Ok::<Value, iii_sdk::Error>(match mode.as_str() {
                    "html" => json!({"status_code": 200, "headers": {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": "default-src 'none'", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Num": 5}, "body": "<p>hi</p>"}),
                    "string" => json!({"body": "<p>hi</p>"}),
                    "no-body" => json!({"status_code": 201}),
                    "status-string" => json!({"status_code": "201", "body": {}}),
                    "status-big" => json!({"status_code": 1000, "body": {}}),
                    "status-410" => json!({"status_code": 410, "headers": {"Content-Type": "application/json"}, "body": {"gone": true}}),
                    "plain-object" => json!({"headers": {"content-type": "text/plain"}, "body": {"a": 1}}),
                    "cookies" => json!({"headers": ["Set-Cookie: a=1", "Set-Cookie: b=2", "no colon"], "body": {}}),
                    "acao" => json!({"headers": {"Access-Control-Allow-Origin": "https://mine.example"}, "body": {}}),
                    "array" => json!([1, 2]),
                    _ => json!("a string result"),
                })
            }),
        );
        wait_for_functions(&worker, &["probe::http-mode"]).await;
        bind(&worker, "probe::http-mode", "GET", "/modes/:mode");
        let http = client();
        let base = engine.http_url();
        wait_for_route(&http, reqwest::Method::GET, &format!("{base}/modes/x")).await;
        let get = |mode: &str| http.get(format!("{base}/modes/{mode}")).send();

        let r = get("html").await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
        assert_eq!(r.headers()["content-security-policy"], "default-src 'none'");
        assert_eq!(r.headers()["cache-control"], "no-store");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer");
        assert!(r.headers().get("x-num").is_none(), "a non-string header value is dropped");
        assert_eq!(r.text().await.unwrap(), "<p>hi</p>");

        let r = get("string").await.unwrap();
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.text().await.unwrap(), r#""<p>hi</p>""#, "no Content-Type: sent as JSON");

        let r = get("no-body").await.unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(r.text().await.unwrap(), "{}");

        assert_eq!(get("status-string").await.unwrap().status(), 200);
        assert_eq!(get("status-big").await.unwrap().status(), 200);

        let r = get("status-410").await.unwrap();
        assert_eq!(r.status(), 410);
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"gone": true}));

        let r = get("plain-object").await.unwrap();
        assert_eq!(r.text().await.unwrap(), r#"{"a":1}"#);

        let r = get("cookies").await.unwrap();
        let cookies: Vec<&str> = r
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(cookies, vec!["a=1", "b=2"]);

        let r = get("acao").await.unwrap();
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "overwritten");

        for mode in ["array", "other"] {
            let r = get(mode).await.unwrap();
            assert_eq!(r.status(), 200, "{mode}");
            assert_eq!(r.text().await.unwrap(), "{}", "{mode}");
        }
    })
    .await;
}

#[tokio::test]
async fn http_a_slow_or_null_answer_is_a_504_after_the_timeout() {
    on_both("http_timeouts", |engine| async move {
        let worker = engine.client("http-slow").await;
        worker.register_function(
            "probe::http-slow",
            RegisterFunction::new_async(|_: Value| async move {
                tokio::time::sleep(HTTP_TIMEOUT + Duration::from_secs(5)).await;
                Ok::<Value, iii_sdk::Error>(json!({"body": {}}))
            }),
        );
        worker.register_function(
            "probe::http-null",
            RegisterFunction::new_async(|_: Value| async move {
                Ok::<Value, iii_sdk::Error>(Value::Null)
            }),
        );
        wait_for_functions(&worker, &["probe::http-slow", "probe::http-null"]).await;
        bind(&worker, "probe::http-slow", "GET", "/slow");
        bind(&worker, "probe::http-null", "GET", "/null");
        let http = client();
        let base = engine.http_url();
        // Routed once the method is known: a POST answers 405 without a call.
        wait_for_route(&http, reqwest::Method::POST, &format!("{base}/slow")).await;
        wait_for_route(&http, reqwest::Method::POST, &format!("{base}/null")).await;
        let started = Instant::now();
        let (slow, null) = tokio::join!(
            http.get(format!("{base}/slow")).send(),
            http.get(format!("{base}/null")).send()
        );
        for r in [slow.unwrap(), null.unwrap()] {
            assert_eq!(r.status(), 504);
            assert!(r.headers().get("access-control-allow-origin").is_none());
            assert!(r.bytes().await.unwrap().is_empty());
        }
        let waited = started.elapsed();
        assert!(
            waited >= HTTP_TIMEOUT - Duration::from_millis(500),
            "{waited:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn http_a_later_binding_takes_the_route_and_takes_it_away_when_it_goes() {
    on_both("http_route_takeover", |engine| async move {
        let (_worker, http) = echo_routes(&engine).await;
        let base = engine.http_url();
        let intruder = engine.client("http-intruder").await;
        intruder.register_function(
            "intruder::page",
            RegisterFunction::new_async(|_: Value| async move {
                Ok::<Value, iii_sdk::Error>(json!({"body": {"intruder": true}}))
            }),
        );
        wait_for_functions(&intruder, &["intruder::page"]).await;
        bind(&intruder, "intruder::page", "GET", "/approvals/:token");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body: Value = http
                .get(format!("{base}/approvals/t"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if body["intruder"] == true {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the later binding never took the route"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        intruder.shutdown_async().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = http
                .get(format!("{base}/approvals/t"))
                .send()
                .await
                .unwrap();
            if r.status() == 405 {
                assert_eq!(
                    r.headers()["allow"],
                    "POST",
                    "the first binding does not get its route back"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the route never went with the intruder (last: {})",
                r.status()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn http_bindings_that_cannot_route_are_refused() {
    on_both("http_refused_bindings", |engine| async move {
        let (worker, _http) = echo_routes(&engine).await;
        let refused = |config: Value| {
            let worker = worker.clone();
            async move {
                call(
                    &worker,
                    "engine::register_trigger",
                    json!({"trigger_type": "http", "function_id": "probe::http-echo", "config": config}),
                )
                .await
                .expect_err("refused")
                .to_string()
            }
        };
        let err = refused(json!({"http_method": "GET"})).await;
        assert!(err.contains("api_path is required for http triggers"), "{err}");
        let err = refused(json!({"api_path": "/approvals/:id", "http_method": "POST"})).await;
        assert!(
            err.contains("Route 'POST /approvals/:id' conflicts with already-registered route 'POST approvals/:token'"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test]
async fn http_a_plain_binding_goes_with_its_worker_and_a_durable_one_answers_500() {
    on_both("http_binding_lifetimes", |engine| async move {
        let http = client();
        let base = engine.http_url();
        let worker = engine.client("http-gone").await;
        worker.register_function("probe::http-gone", echo());
        wait_for_functions(&worker, &["probe::http-gone"]).await;
        bind(&worker, "probe::http-gone", "GET", "/plain");
        call(
            &worker,
            "engine::register_trigger",
            json!({"trigger_type": "http", "function_id": "probe::http-gone", "config": {"api_path": "/durable", "http_method": "GET"}}),
        )
        .await
        .expect("durable binding");
        wait_for_route(&http, reqwest::Method::GET, &format!("{base}/plain")).await;
        assert_eq!(http.get(format!("{base}/durable")).send().await.unwrap().status(), 200);
        worker.shutdown_async().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let plain = http.get(format!("{base}/plain")).send().await.unwrap().status();
            let durable = http.get(format!("{base}/durable")).send().await.unwrap();
            if plain == 404 && durable.status() == 500 {
                let body: Value = durable.json().await.unwrap();
                assert_eq!(body["error"]["code"], "function_not_found");
                break;
            }
            assert!(Instant::now() < deadline, "plain {plain}, durable {}", durable.status());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}
