//! The durable bindings made again the moment the engine is back (contract
//! §21.8), before the worker's own connection is.
//!
//! An engine restart loses every binding. The SDK reconnects on its own
//! schedule — one attempt every 2 s, a knob it keeps private — so a harness
//! whose connection came back first ran calls with an empty pre-trigger
//! chain, ungated, for up to those 2 s. While the worker's connection is
//! down, this task knocks on the engine's port every [`PROBE`]; as soon as
//! it answers, a short-lived auxiliary connection (its own name, never the
//! worker's) makes the gate's durable binding, then the watch's, and
//! closes. Until the worker's own connection registers `approval::gate`, the
//! harness's calls to it fail with `function_not_found` and the binding's
//! `fail_closed` denies them: denied, never run ungated. The worker's
//! reconnect then finds the binding and keeps it (`DurableBinding::ensure`:
//! never two).
//!
//! `APPROVAL_GATE_RECONNECT=before_21_8` turns this off (the order of the
//! previous version, kept to measure the difference:
//! `E2E_ONLY=reconnect cargo bench --bench e2e`).

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{register_worker, InitOptions, WorkerIdentityMode};

use crate::engine::Engine;
use crate::worker::Worker;

/// How often the engine's port is tried while the worker's connection is down.
pub(crate) const PROBE: Duration = Duration::from_millis(20);
/// How long one knock on the port may take.
const KNOCK: Duration = Duration::from_millis(200);
/// How long the first auxiliary connection may take to be greeted; each
/// failed one doubles it, up to [`GREETING_MAX`]. Short: a port that answers
/// may still belong to an engine shutting down or not ready, and the SDK
/// would retry only 2 s later; a fresh connection after the next knock is
/// sooner.
const GREETING: Duration = Duration::from_millis(100);
/// The longest wait for one auxiliary connection's greeting.
const GREETING_MAX: Duration = Duration::from_secs(2);
/// The longest this task runs for one outage (the SDK's own reconnect and
/// the binding guard take over after).
const GIVE_UP: Duration = Duration::from_secs(600);

/// Whether the previous order (no early rebind) was asked for.
pub(crate) fn disabled() -> bool {
    std::env::var("APPROVAL_GATE_RECONNECT").is_ok_and(|v| v == "before_21_8")
}

/// `host:port` of a `ws://` / `wss://` URL (80 / 443 when it names none).
pub(crate) fn authority(url: &str) -> Option<String> {
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("ws://") {
        (rest, 80)
    } else if let Some(rest) = url.strip_prefix("wss://") {
        (rest, 443)
    } else {
        return None;
    };
    let host_port = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host_port.is_empty() {
        return None;
    }
    let has_port = match host_port.rfind(':') {
        Some(i) => !host_port[i..].contains(']') && host_port[i + 1..].parse::<u16>().is_ok(),
        None => false,
    };
    Some(if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:{default_port}")
    })
}

/// While the worker's connection is down: knock on the engine's port every
/// [`PROBE`]; once it answers, make the durable bindings again through an
/// auxiliary connection. Ends when that worked, when the worker's own
/// connection is back first, or after [`GIVE_UP`]. Returns whether it made
/// (or found) the gate's binding.
pub(crate) async fn rebind_when_back(worker: Arc<Worker>, url: String, name: String) -> bool {
    let Some(authority) = authority(&url) else {
        return false;
    };
    let started = tokio::time::Instant::now();
    let mut greeting = GREETING;
    while started.elapsed() < GIVE_UP {
        // Only while the SDK is trying to reconnect: connected means its
        // reconnect came first; disconnected or failed, the worker is
        // stopping (a shutdown, `unbind`, a refused name) and must not bind.
        if !reconnecting(&worker) {
            return false;
        }
        let knock = tokio::time::timeout(KNOCK, tokio::net::TcpStream::connect(&authority)).await;
        if matches!(knock, Ok(Ok(_))) {
            if rebind(&worker, &url, &name, greeting).await {
                return true;
            }
            greeting = (greeting * 2).min(GREETING_MAX);
        }
        tokio::time::sleep(PROBE).await;
    }
    false
}

/// Whether the worker's own connection is down and the SDK is trying to
/// get it back.
pub(crate) fn reconnecting(worker: &Worker) -> bool {
    worker.engine.iii().get_connection_state() == IIIConnectionState::Reconnecting
}

/// One auxiliary connection: the gate's binding, then the watch's.
/// `name`: the worker's own (the auxiliary connection is `<name>-rebind`).
async fn rebind(worker: &Worker, url: &str, name: &str, greeting: Duration) -> bool {
    let metadata = WorkerMetadata {
        name: format!("{name}-rebind"),
        version: env!("CARGO_PKG_VERSION").to_string(),
        description: Some(
            "approval-gate's auxiliary connection: makes the gate's durable binding again after an engine restart"
                .to_string(),
        ),
        ..WorkerMetadata::default()
    };
    let iii = register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            otel: Some(iii_helpers::observability::OtelConfig {
                enabled: Some(false),
                ..Default::default()
            }),
            namespace: std::env::var("III_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty()),
            identity: WorkerIdentityMode::Explicit,
            ..InitOptions::default()
        },
    );
    let mut gated = false;
    if iii.wait_until_registered(greeting).await.is_ok() && reconnecting(worker) {
        let engine = Engine::new(iii.clone());
        let config = worker.config.load();
        // The restarted engine lost whatever this connection parked before.
        worker.gate_binding.new_connection();
        worker.watch_binding.new_connection();
        match worker.gate_binding.ensure(&engine, &config.config).await {
            Ok(status) => {
                gated = true;
                tracing::info!(id = status.id, gated = status.gated, parked = status.parked, "engine back: the gate's durable binding made again before the worker's own reconnect");
            }
            Err(err) => {
                tracing::warn!(error = %err, "engine back: the gate's durable binding not made through the auxiliary connection; the reconnect makes it")
            }
        }
        if gated {
            if let Err(err) = worker.watch_binding.ensure(&engine, &config.config).await {
                tracing::warn!(error = %err, "engine back: the watch's durable binding not made through the auxiliary connection; the reconnect makes it");
            }
        }
    }
    iii.shutdown_async().await;
    gated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_of_engine_urls() {
        assert_eq!(
            authority("ws://127.0.0.1:49134").as_deref(),
            Some("127.0.0.1:49134")
        );
        assert_eq!(authority("ws://engine/ws").as_deref(), Some("engine:80"));
        assert_eq!(
            authority("wss://engine.example").as_deref(),
            Some("engine.example:443")
        );
        assert_eq!(
            authority("ws://[::1]:5000/x").as_deref(),
            Some("[::1]:5000")
        );
        assert_eq!(authority("ws://[::1]").as_deref(), Some("[::1]:80"));
        assert_eq!(authority("http://x:1"), None);
        assert_eq!(authority("ws://"), None);
    }
}
