//! `ConsoleHost`: the browser side of the console, for the browser tests. A
//! small HTTP server on 127.0.0.1 serves a page (`host.html`, `host.js`)
//! that plays the console's host as `harness.md` § Console
//! describes it: an import map resolving `react`, `react-dom`,
//! `react-dom/client` and `react/jsx-runtime` to ES builds of React from
//! the npm registry, the extensions' assets as the [`ConsoleDouble`]
//! fetched them (`/ui/<path>`), each script's `setup(host)` called with a
//! `host` of its own, every contribution rendered inside
//! `<div data-iii-ui="<first path segment>">` behind an error boundary.
//!
//! `host.iii` talks to the engine for real through a bridge: an SDK client
//! of this process (worker name `console-host`) that the page drives over
//! HTTP. `trigger` is forwarded as a call; `on(function_id)` registers that
//! function on the bridge client, whose invocations are queued and handed
//! to the page by long poll (`GET /bridge/events`); `registerTrigger`
//! makes a binding through the SDK's message path.
//!
//! # Routes
//!
//! | route | answer |
//! |---|---|
//! | `GET /` | the host page |
//! | `GET /host.js` | the host's module |
//! | `GET /deps/<file>.js` | a React ES module (built by `react-esm.mjs`) |
//! | `GET /ui-manifest` | `{assets: [{path, kind}]}`: the console double's live assets |
//! | `GET /ui/<path>` | an asset's text, with its content type |
//! | `POST /bridge/trigger` | `{function_id, payload, timeout_ms?}` → `{result}` or `{error: {code, message}}` |
//! | `POST /bridge/on`, `/bridge/off` | `{function_id}` → `{ok}` |
//! | `POST /bridge/register-trigger` | `{type, function_id, config}` → `{id}` |
//! | `POST /bridge/unregister-trigger` | `{id}` → `{ok}` |
//! | `GET /bridge/events?after=<seq>` | `{events: [{seq, function_id, payload}]}`, waiting up to 10 s for one |
//!
//! React itself: `.ci/run` installs `react`, `react-dom` and `esbuild` with
//! npm into `target/console-deps` (ignored by git); [`react_modules`]
//! builds the ES modules there once with `react-esm.mjs` (React ships
//! CommonJS only), or answers why it cannot, for the test's `SKIP` line.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderValue;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::runtime::FunctionRef;
use iii_sdk::trigger::Trigger;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::rules::AssetKind;
use super::ConsoleDouble;
use crate::harness::peer;

/// The bridge client's worker name.
pub const WORKER_NAME: &str = "console-host";

const HOST_HTML: &str = include_str!("host.html");
const HOST_JS: &str = include_str!("host.js");
const REACT_ESM_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/console/react-esm.mjs");

/// How long `GET /bridge/events` waits for an event.
const LONG_POLL: Duration = Duration::from_secs(10);
/// The longest a forwarded call may take.
const MAX_CALL: Duration = Duration::from_secs(30);
/// The largest request body the bridge reads.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Where `.ci/run` installs the npm packages: `CONSOLE_DEPS_DIR`, else
/// `<repo>/target/console-deps`.
pub fn deps_dir() -> PathBuf {
    std::env::var_os("CONSOLE_DEPS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-deps"))
}

/// The folder of React's ES modules, built on first use; `Err` says what
/// is missing (the caller prints it as its `SKIP` line).
pub fn react_modules() -> Result<PathBuf, String> {
    let deps = deps_dir();
    let out = deps.join("esm");
    let built = [
        "react.js",
        "react-dom.js",
        "react-dom-client.js",
        "react-jsx-runtime.js",
    ]
    .iter()
    .all(|f| out.join(f).is_file());
    if built {
        return Ok(out);
    }
    for package in ["react", "react-dom", "esbuild"] {
        if !deps.join("node_modules").join(package).is_dir() {
            return Err(format!(
                "no {package} in {} (npm install --prefix {} react@19 react-dom@19 esbuild; .ci/run does)",
                deps.display(),
                deps.display()
            ));
        }
    }
    let status = Command::new("node")
        .arg(REACT_ESM_SCRIPT)
        .arg(&deps)
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("node did not run: {e}"))?;
    if !status.success() {
        return Err(format!("react-esm.mjs failed: {status}"));
    }
    Ok(out)
}

/// One call the page made through `host.iii.trigger`.
#[derive(Debug, Clone)]
pub struct BridgeCall {
    pub function_id: String,
    pub payload: Value,
    /// The answer, or the error as `code: message`.
    pub answer: Result<Value, String>,
}

#[derive(Default)]
struct Events {
    next: u64,
    queue: Vec<(u64, String, Value)>,
}

struct Shared {
    bridge: IIIClient,
    console: ConsoleDouble,
    react: PathBuf,
    events: Mutex<Events>,
    arrived: Notify,
    functions: Mutex<HashMap<String, FunctionRef>>,
    bindings: Mutex<HashMap<String, (Trigger, Value)>>,
    calls: Mutex<Vec<BridgeCall>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running host double; the server stops and the bridge disconnects when
/// it drops.
pub struct ConsoleHost {
    url: String,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
    _closer: peer::Closer,
}

impl Drop for ConsoleHost {
    fn drop(&mut self) {
        self.server.abort();
        for (_, f) in lock(&self.shared.functions).drain() {
            f.unregister();
        }
    }
}

impl ConsoleHost {
    /// Serves the host page on a free loopback port; the bridge connects to
    /// the engine at `engine_url`, the assets come from `console`, React
    /// from `react` ([`react_modules`]).
    pub async fn start(engine_url: &str, console: ConsoleDouble, react: PathBuf) -> ConsoleHost {
        let bridge = peer::connect(engine_url, WORKER_NAME);
        let _ = bridge.wait_until_registered(Duration::from_secs(15)).await;
        let shared = Arc::new(Shared {
            bridge: bridge.clone(),
            console,
            react,
            events: Mutex::new(Events::default()),
            arrived: Notify::new(),
            functions: Mutex::new(HashMap::new()),
            bindings: Mutex::new(HashMap::new()),
            calls: Mutex::new(Vec::new()),
        });
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .expect("a loopback port for the host double");
        let url = format!("http://{}", listener.local_addr().expect("bound address"));
        let server = tokio::spawn(serve(shared.clone(), listener));
        ConsoleHost {
            url,
            shared,
            server,
            _closer: peer::Closer(bridge),
        }
    }

    /// The host page's URL (`http://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every call the page made, in order.
    pub fn calls(&self) -> Vec<BridgeCall> {
        lock(&self.shared.calls).clone()
    }

    /// The calls the page made to `function_id`.
    pub fn calls_to(&self, function_id: &str) -> Vec<BridgeCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.function_id == function_id)
            .collect()
    }

    /// The bindings the page holds now: `(type, function_id, config)`.
    pub fn bindings(&self) -> Vec<Value> {
        lock(&self.shared.bindings)
            .values()
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// How many events reached the page's handlers' queue.
    pub fn events_queued(&self) -> u64 {
        lock(&self.shared.events).next
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert("content-type", value);
    }
    response
        .headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-store"));
    response
}

fn json_reply(body: Value) -> Reply {
    reply(StatusCode::OK, "application/json", body.to_string())
}

fn not_found() -> Reply {
    reply(StatusCode::NOT_FOUND, "text/plain", "not found")
}

async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(shared, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(shared: Arc<Shared>, request: Request<hyper::body::Incoming>) -> Reply {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    if parts.method == hyper::Method::GET {
        return get(&shared, &path, &query).await;
    }
    if parts.method != hyper::Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "");
    }
    let Ok(collected) = http_body_util::Limited::new(body, MAX_BODY).collect().await else {
        return reply(StatusCode::BAD_REQUEST, "text/plain", "body");
    };
    let input: Value = serde_json::from_slice(&collected.to_bytes()).unwrap_or(Value::Null);
    match path.as_str() {
        "/bridge/trigger" => json_reply(trigger(&shared, input).await),
        "/bridge/on" => json_reply(listen(&shared, &input)),
        "/bridge/off" => {
            let fid = input["function_id"].as_str().unwrap_or_default();
            if let Some(f) = lock(&shared.functions).remove(fid) {
                f.unregister();
            }
            json_reply(json!({"ok": true}))
        }
        "/bridge/register-trigger" => json_reply(bind(&shared, input)),
        "/bridge/unregister-trigger" => {
            let id = input["id"].as_str().unwrap_or_default();
            if let Some((trigger, _)) = lock(&shared.bindings).remove(id) {
                trigger.unregister();
            }
            json_reply(json!({"ok": true}))
        }
        _ => not_found(),
    }
}

async fn get(shared: &Shared, path: &str, query: &str) -> Reply {
    match path {
        "/" => reply(StatusCode::OK, "text/html; charset=utf-8", HOST_HTML),
        "/host.js" => reply(StatusCode::OK, "text/javascript; charset=utf-8", HOST_JS),
        "/ui-manifest" => {
            let assets: Vec<Value> = shared
                .console
                .live()
                .iter()
                .filter_map(|r| {
                    let kind = match r.kind {
                        AssetKind::Script => "script",
                        AssetKind::Style => "style",
                    };
                    r.path
                        .as_ref()
                        .map(|p| json!({"path": p, "kind": kind, "seq": r.seq}))
                })
                .collect();
            json_reply(json!({ "assets": assets }))
        }
        "/bridge/events" => {
            let after = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("after="))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            json_reply(events_after(shared, after).await)
        }
        _ => {
            if let Some(asset) = path.strip_prefix("/ui/") {
                return match shared.console.asset(asset) {
                    Some(r) => reply(
                        StatusCode::OK,
                        r.content_type.as_deref().unwrap_or("text/plain"),
                        r.content.unwrap_or_default(),
                    ),
                    None => not_found(),
                };
            }
            if let Some(file) = path.strip_prefix("/deps/") {
                let safe = file.ends_with(".js")
                    && file
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    && !file.starts_with('.');
                if safe {
                    if let Ok(text) = std::fs::read(shared.react.join(file)) {
                        return reply(StatusCode::OK, "text/javascript; charset=utf-8", text);
                    }
                }
            }
            not_found()
        }
    }
}

async fn trigger(shared: &Shared, input: Value) -> Value {
    let function_id = input["function_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let payload = match &input["payload"] {
        Value::Null => json!({}),
        other => other.clone(),
    };
    let timeout = input["timeout_ms"]
        .as_u64()
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(10))
        .min(MAX_CALL);
    let answer = shared
        .bridge
        .trigger(TriggerRequest {
            function_id: function_id.clone(),
            payload: payload.clone(),
            action: None,
            timeout_ms: Some(timeout.as_millis() as u64),
        })
        .await;
    let (out, recorded) = match answer {
        Ok(result) => (json!({ "result": result }), Ok(result)),
        Err(err) => {
            let (code, message) = match &err {
                iii_sdk::Error::Remote { code, message, .. } => (code.clone(), message.clone()),
                other => ("bridge_error".to_string(), other.to_string()),
            };
            let text = format!("{code}: {message}");
            (
                json!({ "error": { "code": code, "message": message } }),
                Err(text),
            )
        }
    };
    lock(&shared.calls).push(BridgeCall {
        function_id,
        payload,
        answer: recorded,
    });
    out
}

/// Registers `function_id` on the bridge client (once): each invocation is
/// queued for the page.
fn listen(shared: &Arc<Shared>, input: &Value) -> Value {
    let Some(fid) = input["function_id"].as_str().filter(|f| !f.is_empty()) else {
        return json!({"error": {"code": "bad_request", "message": "function_id"}});
    };
    let mut functions = lock(&shared.functions);
    if functions.contains_key(fid) {
        return json!({"ok": true});
    }
    let weak = Arc::downgrade(shared);
    let id = fid.to_string();
    let registered = shared.bridge.register_function(
        fid,
        RegisterFunction::new_async(move |payload: Value| {
            let weak = weak.clone();
            let id = id.clone();
            async move {
                if let Some(shared) = weak.upgrade() {
                    let mut events = lock(&shared.events);
                    events.next += 1;
                    let seq = events.next;
                    events.queue.push((seq, id, payload));
                    drop(events);
                    shared.arrived.notify_waiters();
                }
                Ok::<Value, iii_sdk::Error>(json!({"ok": true}))
            }
        })
        .description("A console tab's event handler (test double)"),
    );
    functions.insert(fid.to_string(), registered);
    json!({"ok": true})
}

fn bind(shared: &Shared, input: Value) -> Value {
    let trigger_type = input["type"].as_str().unwrap_or_default().to_string();
    let function_id = input["function_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let config = input.get("config").cloned().unwrap_or(json!({}));
    #[allow(deprecated)] // the 0.25 binding API; the engine still speaks it
    let made = shared.bridge.register_trigger(RegisterTriggerInput::new(
        &trigger_type,
        &function_id,
        config.clone(),
    ));
    match made {
        Ok(trigger) => {
            let id = uuid::Uuid::new_v4().to_string();
            lock(&shared.bindings).insert(
                id.clone(),
                (
                    trigger,
                    json!({"type": trigger_type, "function_id": function_id, "config": config}),
                ),
            );
            json!({ "id": id })
        }
        Err(err) => json!({"error": {"code": "bridge_error", "message": err.to_string()}}),
    }
}

async fn events_after(shared: &Shared, after: u64) -> Value {
    let deadline = tokio::time::Instant::now() + LONG_POLL;
    loop {
        let notified = shared.arrived.notified();
        let ready: Vec<Value> = lock(&shared.events)
            .queue
            .iter()
            .filter(|(seq, _, _)| *seq > after)
            .map(|(seq, fid, payload)| json!({"seq": seq, "function_id": fid, "payload": payload}))
            .collect();
        if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
            return json!({ "events": ready });
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}
