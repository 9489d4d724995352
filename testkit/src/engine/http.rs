//! The HTTP worker (`iii-http`) of the test engine: the `http` trigger type
//! and a server on a free loopback port that calls the bound functions,
//! with the request object, the response rules and the error answers of
//! the real engine (0.25, measured):
//!
//! * a binding's config is `{api_path, http_method?}` (method default
//!   `GET`, any case; a path without a leading `/` is served with one and
//!   shown as written (`path`, errors); no `api_path`
//!   is refused with "api_path is required for http triggers"); a second
//!   binding of the same method and pattern silently takes the route, and
//!   when it goes the route goes with it (the older binding stays listed but
//!   serves nothing); the same shape under another parameter name is
//!   refused ("Route '…' conflicts with already-registered route '…'");
//! * the function receives `{body, headers, method, path (the PATTERN),
//!   path_params (not percent-decoded), query_params, request_body,
//!   response, trigger}`: header names in lower case, the last value of a
//!   repeated header; query parameters decoded, the last of a repeated name;
//!   `body` parsed only when `content-type` contains `application/json`,
//!   else `null`;
//! * its answer `{status_code?, headers?, body?}`: an invalid status is 200;
//!   headers as an object of strings or an array of `"Name: value"`; no
//!   `Content-Type` → the body as JSON; a `Content-Type` and a string body →
//!   the string as is; a non-object answer → 200 `{}`; a `null` answer →
//!   the request waits for the timeout, then 504;
//! * unknown path → 404 `{"error":{"code":"NOT_FOUND","message":"Not Found"}}`;
//!   a path bound for other methods → 405, empty body, `allow`; `HEAD` → 404;
//!   a function error → 500 `{"error":{"code","error_id","message"}}`; past
//!   the timeout → 504, empty body, no CORS headers;
//! * CORS as with no `cors` config (permissive): every answer but the 504
//!   carries `access-control-allow-origin: *` (overwriting the function's),
//!   and a preflight is answered 200 without calling anything.
//!
//! Not imitated: streaming through the `request_body` / `response`
//! channels (the refs are sent, nothing reads them), middleware,
//! conditions, a `cors` configuration, body size limits.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::core::{new_id, Binding, Call, CallOutcome, Caller};
use super::Shared;

/// The worker name the real engine lists the `http` type under.
pub(crate) const WORKER: &str = "iii-http";

/// The real engine's `default_timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer for an unknown path.
const NOT_FOUND: &str = r#"{"error":{"code":"NOT_FOUND","message":"Not Found"}}"#;

/// One segment of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// One bound route.
#[derive(Debug, Clone)]
struct Route {
    method: String,
    pattern: String,
    segments: Vec<Segment>,
    binding_id: String,
}

impl Route {
    /// The path parameters when `path` matches (segments are not decoded).
    fn matches(&self, path: &[&str]) -> Option<Map<String, Value>> {
        if path.len() != self.segments.len() {
            return None;
        }
        let mut params = Map::new();
        for (segment, part) in self.segments.iter().zip(path) {
            match segment {
                Segment::Literal(literal) if literal == part => {}
                Segment::Param(name) if !part.is_empty() => {
                    params.insert(name.clone(), json!(part));
                }
                _ => return None,
            }
        }
        Some(params)
    }

    /// The pattern with every parameter name erased: two routes of one shape
    /// conflict unless they are the same pattern.
    fn shape(&self) -> Vec<Option<&str>> {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(literal) => Some(literal.as_str()),
                Segment::Param(_) => None,
            })
            .collect()
    }
}

/// What a request finds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    /// A route of this method: its binding, pattern and parameters.
    Found {
        binding_id: String,
        pattern: String,
        params: Map<String, Value>,
    },
    /// Routes exist for the path, none for the method: the `allow` value.
    MethodNotAllowed(String),
    NotFound,
}

/// The routing table: one binding per `(method, pattern)`, the newest.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    routes: Vec<Route>,
}

fn segments_of(path: &str) -> Vec<&str> {
    path.strip_prefix('/').unwrap_or(path).split('/').collect()
}

impl Routes {
    /// Files a binding's route; the refusal message is the real engine's.
    pub(crate) fn insert(&mut self, binding: &Binding) -> Result<(), String> {
        let Some(api_path) = binding.config.get("api_path").and_then(Value::as_str) else {
            return Err("api_path is required for http triggers".to_string());
        };
        let method = binding
            .config
            .get("http_method")
            .and_then(Value::as_str)
            .unwrap_or("GET")
            .to_ascii_uppercase();
        // Served with a leading `/`; shown (`path`, errors) as written.
        let pattern = api_path.to_string();
        let segments = segments_of(&pattern)
            .into_iter()
            .map(|part| {
                if let Some(name) = part.strip_prefix(':') {
                    Segment::Param(name.to_string())
                } else if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
                {
                    Segment::Param(name.to_string())
                } else {
                    Segment::Literal(part.to_string())
                }
            })
            .collect();
        let route = Route {
            method,
            pattern,
            segments,
            binding_id: binding.id.clone(),
        };
        if let Some(existing) = self
            .routes
            .iter_mut()
            .find(|r| r.method == route.method && r.segments == route.segments)
        {
            // The newest binding takes the route, silently.
            existing.binding_id = route.binding_id;
            return Ok(());
        }
        if let Some(clash) = self
            .routes
            .iter()
            .find(|r| r.method == route.method && r.shape() == route.shape())
        {
            return Err(format!(
                "Route '{} {}' conflicts with already-registered route '{} {}': routes with identical structure but different path-parameter names are not supported",
                route.method, route.pattern, clash.method, clash.pattern
            ));
        }
        self.routes.push(route);
        Ok(())
    }

    /// Drops the route a binding serves, if it still serves one.
    pub(crate) fn remove(&mut self, binding_id: &str) {
        self.routes.retain(|r| r.binding_id != binding_id);
    }

    /// Forgets every route (a restart that forgets bindings).
    pub(crate) fn clear(&mut self) {
        self.routes.clear();
    }

    /// The route a request takes.
    pub(crate) fn lookup(&self, method: &str, path: &str) -> Lookup {
        let parts = segments_of(path);
        let matching: Vec<(&Route, Map<String, Value>)> = self
            .routes
            .iter()
            .filter_map(|r| r.matches(&parts).map(|params| (r, params)))
            .collect();
        if let Some((route, params)) = matching.iter().find(|(r, _)| r.method == method) {
            return Lookup::Found {
                binding_id: route.binding_id.clone(),
                pattern: route.pattern.clone(),
                params: params.clone(),
            };
        }
        // HEAD is routed to a GET route's method router, which has no HEAD
        // handler in the engine: 404.
        if matching.is_empty() || method == "HEAD" {
            return Lookup::NotFound;
        }
        let mut methods: Vec<&str> = matching.iter().map(|(r, _)| r.method.as_str()).collect();
        if methods.contains(&"GET") {
            methods.push("HEAD");
        }
        methods.sort_by_key(|m| match *m {
            "GET" => (0, String::new()),
            "HEAD" => (1, String::new()),
            other => (2, other.to_string()),
        });
        methods.dedup();
        Lookup::MethodNotAllowed(methods.join(","))
    }
}

/// Serves HTTP on `listener` until the task is aborted.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener, timeout: Duration) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "test engine http: accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(shared, timeout, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds a free loopback port for the HTTP worker.
pub(crate) async fn listen() -> std::io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// Adds the permissive CORS headers (overwriting the function's own
/// `access-control-allow-origin`).
fn with_cors(mut response: Reply) -> Reply {
    let headers = response.headers_mut();
    headers.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    headers.insert(
        "access-control-expose-headers",
        HeaderValue::from_static("*"),
    );
    headers.insert(
        "vary",
        HeaderValue::from_static(
            "origin, access-control-request-method, access-control-request-headers",
        ),
    );
    response
}

fn json_reply(status: StatusCode, body: String) -> Reply {
    let mut response = reply(status, body);
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    with_cors(response)
}

async fn answer(
    shared: Arc<Shared>,
    timeout: Duration,
    request: Request<hyper::body::Incoming>,
) -> Reply {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_ascii_uppercase();
    if method == "OPTIONS"
        && parts.headers.contains_key("origin")
        && parts.headers.contains_key("access-control-request-method")
    {
        let mut response = with_cors(reply(StatusCode::OK, Bytes::new()));
        let headers = response.headers_mut();
        headers.insert(
            "access-control-allow-methods",
            HeaderValue::from_static("*"),
        );
        headers.insert(
            "access-control-allow-headers",
            HeaderValue::from_static("*"),
        );
        return response;
    }
    let path = parts.uri.path().to_string();
    let lookup = shared.with_core(|core| core.http.lookup(&method, &path));
    let (binding_id, pattern, params) = match lookup {
        Lookup::NotFound => return json_reply(StatusCode::NOT_FOUND, NOT_FOUND.to_string()),
        Lookup::MethodNotAllowed(allow) => {
            let mut response = with_cors(reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new()));
            if let Ok(allow) = HeaderValue::from_str(&allow) {
                response.headers_mut().insert("allow", allow);
            }
            return response;
        }
        Lookup::Found {
            binding_id,
            pattern,
            params,
        } => (binding_id, pattern, params),
    };
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let request_object = request_object(&parts, &method, &pattern, params, &bytes);

    let (sender, receiver) = oneshot::channel::<CallOutcome>();
    let routed = shared.with_core(|core| {
        let binding = core.bindings.get(&binding_id)?;
        let call = Call {
            function_id: binding.function_id.clone(),
            namespace: Some(binding.namespace.clone()),
            data: request_object,
            metadata: binding.metadata.clone(),
            traceparent: None,
            baggage: None,
        };
        core.call(Caller::Http(sender), call);
        Some(())
    });
    if routed.is_none() {
        return json_reply(StatusCode::NOT_FOUND, NOT_FOUND.to_string());
    }
    let remaining = timeout.saturating_sub(started.elapsed());
    let outcome = match tokio::time::timeout(remaining, receiver).await {
        Ok(Ok(outcome)) => outcome,
        // The call was dropped without an answer: as a timeout.
        Ok(Err(_)) => {
            tokio::time::sleep(timeout.saturating_sub(started.elapsed())).await;
            return reply(StatusCode::GATEWAY_TIMEOUT, Bytes::new());
        }
        Err(_) => return reply(StatusCode::GATEWAY_TIMEOUT, Bytes::new()),
    };
    match outcome {
        Err(error) => json_reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"code": error.code, "error_id": error_id(), "message": error.message}})
                .to_string(),
        ),
        // A result-less answer never completes the response: the engine
        // waits on the response channel until the timeout.
        Ok(None) | Ok(Some(Value::Null)) => {
            tokio::time::sleep(timeout.saturating_sub(started.elapsed())).await;
            reply(StatusCode::GATEWAY_TIMEOUT, Bytes::new())
        }
        Ok(Some(value)) => with_cors(response_of(value)),
    }
}

/// The engine's `error_id`: the nanosecond clock in hex.
fn error_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", nanos & 0xffff_ffff_ffff)
}

/// The object a bound function receives.
fn request_object(
    parts: &hyper::http::request::Parts,
    method: &str,
    pattern: &str,
    params: Map<String, Value>,
    bytes: &[u8],
) -> Value {
    let mut headers = Map::new();
    for (name, value) in &parts.headers {
        // One value per name, the last wins; a non-UTF-8 value is "".
        headers.insert(
            name.as_str().to_string(),
            json!(value.to_str().unwrap_or("")),
        );
    }
    let mut query = Map::new();
    if let Some(q) = parts.uri.query() {
        for (key, value) in form_urlencoded::parse(q.as_bytes()) {
            query.insert(key.into_owned(), json!(value.into_owned()));
        }
    }
    let json_body = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    let body = if json_body {
        serde_json::from_slice::<Value>(bytes).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let channel = |direction: &str| json!({"access_key": new_id(), "channel_id": new_id(), "direction": direction});
    json!({
        "body": body,
        "headers": headers,
        "method": method,
        "path": pattern,
        "path_params": params,
        "query_params": query,
        "request_body": channel("read"),
        "response": channel("write"),
        "trigger": {"method": method, "path": pattern, "type": "http"},
    })
}

/// The HTTP response for a function's (non-null) answer.
fn response_of(value: Value) -> Reply {
    let Value::Object(answer) = value else {
        return json_reply(StatusCode::OK, "{}".to_string());
    };
    let status = answer
        .get("status_code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let mut push = |name: &str, value: &str| match (
        HeaderName::from_bytes(name.trim().as_bytes()),
        HeaderValue::from_str(value.trim()),
    ) {
        (Ok(name), Ok(value)) => headers.push((name, value)),
        _ => tracing::warn!(
            header = name,
            "test engine http: invalid response header skipped"
        ),
    };
    match answer.get("headers") {
        Some(Value::Object(map)) => {
            for (name, value) in map {
                if let Some(value) = value.as_str() {
                    push(name, value);
                }
            }
        }
        Some(Value::Array(lines)) => {
            for line in lines.iter().filter_map(Value::as_str) {
                if let Some((name, value)) = line.split_once(':') {
                    push(name, value);
                }
            }
        }
        _ => {}
    }
    let has_type = headers.iter().any(|(name, _)| name == "content-type");
    let body = answer.get("body").cloned().unwrap_or_else(|| json!({}));
    let bytes: Bytes = match (&body, has_type) {
        (_, false) => body.to_string().into(),
        (Value::String(text), true) => text.clone().into(),
        (Value::Null, true) => Bytes::new(),
        (other, true) => other.to_string().into(),
    };
    let mut response = reply(status, bytes);
    let out = response.headers_mut();
    if !has_type {
        out.insert("content-type", HeaderValue::from_static("application/json"));
    }
    for (name, value) in headers {
        out.append(name, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(id: &str, config: Value) -> Binding {
        Binding {
            id: id.into(),
            trigger_type: "http".into(),
            function_id: "f".into(),
            config,
            metadata: None,
            namespace: "default".into(),
            trigger_namespace: None,
            home_namespace: "default".into(),
            owner: None,
            provider: None,
        }
    }

    #[test]
    fn routes_match_by_segment_and_the_newest_binding_wins() {
        let mut routes = Routes::default();
        routes
            .insert(&binding(
                "a",
                json!({"api_path": "/approvals/:token", "http_method": "get"}),
            ))
            .unwrap();
        routes
            .insert(&binding(
                "b",
                json!({"api_path": "approvals/:token", "http_method": "POST"}),
            ))
            .unwrap();
        routes
            .insert(&binding("c", json!({"api_path": "/approvals"})))
            .unwrap();
        match routes.lookup("GET", "/approvals/t%20k") {
            Lookup::Found {
                binding_id,
                pattern,
                params,
            } => {
                assert_eq!(binding_id, "a");
                assert_eq!(pattern, "/approvals/:token");
                assert!(
                    matches!(routes.lookup("POST", "/approvals/x"), Lookup::Found { pattern, .. } if pattern == "approvals/:token")
                );
                assert_eq!(params["token"], "t%20k");
            }
            other => panic!("{other:?}"),
        }
        for path in [
            "/approvals/",
            "/approvals/a/b",
            "/approvals//",
            "/Approvals/t",
            "/nope",
        ] {
            assert_eq!(routes.lookup("GET", path), Lookup::NotFound, "{path}");
        }
        assert_eq!(
            routes.lookup("PUT", "/approvals/t"),
            Lookup::MethodNotAllowed("GET,HEAD,POST".into())
        );
        assert_eq!(
            routes.lookup("POST", "/approvals"),
            Lookup::MethodNotAllowed("GET,HEAD".into())
        );
        assert_eq!(routes.lookup("HEAD", "/approvals/t"), Lookup::NotFound);

        // Takeover, then the route goes with the newer binding.
        routes
            .insert(&binding("d", json!({"api_path": "/approvals/:token"})))
            .unwrap();
        assert!(
            matches!(routes.lookup("GET", "/approvals/t"), Lookup::Found { binding_id, .. } if binding_id == "d")
        );
        routes.remove("d");
        assert_eq!(
            routes.lookup("GET", "/approvals/t"),
            Lookup::MethodNotAllowed("POST".into())
        );
    }

    #[test]
    fn a_route_without_a_path_or_of_a_clashing_shape_is_refused() {
        let mut routes = Routes::default();
        assert_eq!(
            routes.insert(&binding("a", json!({"http_method": "GET"}))),
            Err("api_path is required for http triggers".to_string())
        );
        routes
            .insert(&binding(
                "b",
                json!({"api_path": "/approvals/:token", "http_method": "POST"}),
            ))
            .unwrap();
        let err = routes
            .insert(&binding(
                "c",
                json!({"api_path": "/approvals/:id", "http_method": "POST"}),
            ))
            .unwrap_err();
        assert!(
            err.starts_with("Route 'POST /approvals/:id' conflicts with already-registered route 'POST /approvals/:token'"),
            "{err}"
        );
        // Another method is another route.
        routes
            .insert(&binding(
                "d",
                json!({"api_path": "/approvals/:id", "http_method": "GET"}),
            ))
            .unwrap();
    }
}
