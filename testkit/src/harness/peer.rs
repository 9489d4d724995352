//! Connecting a peer double to an engine and knowing when it is live. Shared
//! by the harness, session manager and target doubles.

use std::time::Duration;

use iii_sdk::protocol::{TriggerRequest, TriggerRequestWithMetadata};
use iii_sdk::{Dispatch, IIIClient, TriggerAction};
use serde_json::{json, Value};

/// How long a double waits for its registrations to show up in the engine's
/// listings before giving up.
pub const LIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects as worker `name`. OpenTelemetry is off (the test engine serves no
/// `/otel` socket), and the identity is explicit so a process-wide
/// `III_WORKER_NAME` cannot rename a double.
pub fn connect(url: &str, name: &str) -> IIIClient {
    crate::fixture::plain_client(url, name, Some(format!("test double: {name}")))
}

/// Waits until every function in `functions` and every trigger type in
/// `trigger_types` is listed by the engine. Panics after [`LIVE_TIMEOUT`]:
/// a double that never came up makes every later assertion meaningless.
pub async fn wait_live(iii: &IIIClient, functions: &[&str], trigger_types: &[&str]) {
    let deadline = tokio::time::Instant::now() + LIVE_TIMEOUT;
    loop {
        let missing = missing(iii, functions, trigger_types).await;
        if missing.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("peer double not live after {LIVE_TIMEOUT:?}; missing {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn missing(iii: &IIIClient, functions: &[&str], trigger_types: &[&str]) -> Vec<String> {
    let mut missing = Vec::new();
    if !functions.is_empty() {
        let listed = list(iii, "engine::functions::list", "functions", "function_id").await;
        missing.extend(
            functions
                .iter()
                .filter(|f| !listed.iter().any(|l| l == *f))
                .map(|f| f.to_string()),
        );
    }
    if !trigger_types.is_empty() {
        let listed = list(iii, "engine::triggers::list", "triggers", "id").await;
        missing.extend(
            trigger_types
                .iter()
                .filter(|t| !listed.iter().any(|l| l == *t))
                .map(|t| format!("trigger type {t}")),
        );
    }
    missing
}

async fn list(iii: &IIIClient, function_id: &str, field: &str, key: &str) -> Vec<String> {
    let reply = iii
        .trigger(TriggerRequest {
            function_id: function_id.to_string(),
            payload: json!({}),
            action: None,
            timeout_ms: Some(2000),
        })
        .await
        .unwrap_or(Value::Null);
    reply[field]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A request through the engine (never in-process), carrying a binding's
/// metadata and namespace when it has them.
pub fn request(
    function_id: &str,
    payload: Value,
    action: Option<TriggerAction>,
    timeout_ms: Option<u64>,
    metadata: Option<&Value>,
    namespace: Option<&str>,
) -> TriggerRequestWithMetadata {
    let mut req: TriggerRequestWithMetadata = TriggerRequest {
        function_id: function_id.to_string(),
        payload,
        action,
        timeout_ms,
    }
    .into();
    if let Some(metadata) = metadata {
        req = req.metadata(metadata.clone());
    }
    if let Some(namespace) = namespace {
        req = req.namespace(namespace);
    }
    req.dispatch(Dispatch::Remote)
}

/// Fire-and-forget delivery of a trigger-type event to one binding.
pub async fn fire(
    iii: &IIIClient,
    function_id: &str,
    payload: Value,
    metadata: Option<&Value>,
    namespace: Option<&str>,
) {
    let req = request(
        function_id,
        payload,
        Some(TriggerAction::Void),
        None,
        metadata,
        namespace,
    );
    if let Err(err) = iii.trigger(req).await {
        tracing::warn!(function_id, error = %err, "event delivery failed");
    }
}

/// Error text as a hook failure or a target error shows it: `code: message`
/// for a structured remote error.
pub fn error_text(err: &iii_sdk::Error) -> String {
    match err {
        iii_sdk::Error::Remote { code, message, .. } => format!("{code}: {message}"),
        other => other.to_string(),
    }
}

/// Stops a double's connection and joins its thread off the async runtime.
pub async fn shutdown(iii: &IIIClient) {
    let iii = iii.clone();
    let _ = tokio::task::spawn_blocking(move || iii.shutdown()).await;
}

/// Disconnects a double when its last handle drops, so a double a test
/// forgot to shut down does not reconnect into a later test's engine on the
/// same port. Only signals (never joins the SDK thread): safe anywhere,
/// including on that thread.
pub struct Closer(pub IIIClient);

impl Drop for Closer {
    fn drop(&mut self) {
        use futures_util::FutureExt;
        let _ = self.0.shutdown_async().now_or_never();
    }
}
