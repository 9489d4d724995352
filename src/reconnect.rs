//! The durable bindings made again the moment the engine is back (contract
//! §21.8, §26.6), before the worker's own connection is.
//!
//! An engine restart loses every binding. The SDK reconnects on its own
//! schedule — one attempt every 2 s, a knob it keeps private — so a harness
//! whose connection came back first ran calls with an empty pre-trigger
//! chain, ungated, for up to those 2 s. While the worker's connection is
//! down, [`cover_outages`] knocks on the engine's port every [`PROBE`]; as
//! soon as it answers, an auxiliary connection (its own name, never the
//! worker's) makes the gate's durable binding, then the watch's. Until the
//! worker's own connection registers `approval::gate`, the harness's calls
//! to it fail with `function_not_found` and the binding's `fail_closed`
//! denies them: denied, never run ungated. The worker's reconnect then finds
//! the binding and keeps it (`DurableBinding::ensure`: never two).
//!
//! The auxiliary connection stays open until the worker's own connection is
//! back: its drop is how a second restart within the same outage (the
//! engine gone again before the SDK's next attempt) is seen, and the knocking
//! starts over for the new engine. Before §26.6 the rebind ran once per
//! outage and was started by the loop that also did the reconnect's work;
//! a second restart before the worker was back, or one during that work,
//! left the chain without a gate until the SDK's own reconnect and its work
//! were done — seconds (`architecture/performance.md` § Engine restart).
//!
//! `APPROVAL_GATE_RECONNECT=before_21_8` turns this off (the order of the
//! previous version, kept to measure the difference:
//! `E2E_ONLY=reconnect cargo bench --bench e2e`).

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{register_worker, IIIClient, InitOptions, WorkerIdentityMode};

use crate::engine::Engine;
use crate::worker::Worker;

/// How often the engine's port is tried while the worker's connection is
/// down, and how often the connection states are looked at (the SDK offers
/// no event).
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

/// For the worker's whole life: every time its connection is down and the
/// SDK is trying to get it back, [`cover_outage`]. Its own task, so nothing
/// the reconnect's work waits on (calls sent over a connection that is gone
/// are answered only when they time out) can keep an outage uncovered. Ends
/// when the worker stops (a shutdown, `unbind`, a refused name: the SDK is
/// disconnected or failed then, never reconnecting).
pub(crate) async fn cover_outages(worker: Arc<Worker>, url: String, name: String) {
    let Some(authority) = authority(&url) else {
        return;
    };
    loop {
        match worker.engine.iii().get_connection_state() {
            IIIConnectionState::Reconnecting => {
                cover_outage(&worker, &url, &name, &authority).await;
            }
            IIIConnectionState::Disconnected | IIIConnectionState::Failed => return,
            IIIConnectionState::Connected | IIIConnectionState::Connecting => {}
        }
        tokio::time::sleep(PROBE).await;
    }
}

/// One outage of the worker's connection: knock on the engine's port every
/// [`PROBE`]; once it answers, make the durable bindings again through an
/// auxiliary connection and keep that connection open; when it drops (the
/// engine went again), knock again. Returns when the worker's own
/// connection is no longer reconnecting.
async fn cover_outage(worker: &Worker, url: &str, name: &str, authority: &str) {
    let started = tokio::time::Instant::now();
    let mut greeting = GREETING;
    let mut holding: Option<IIIClient> = None;
    // Only while the SDK is trying to reconnect: connected means its
    // reconnect came first; disconnected or failed, the worker is stopping
    // and must not bind.
    while reconnecting(worker) {
        if let Some(aux) = &holding {
            if aux.get_connection_state() == IIIConnectionState::Connected {
                tokio::time::sleep(PROBE).await;
                continue;
            }
            tracing::warn!(
                after_ms = started.elapsed().as_millis() as u64,
                "the engine went again before the worker's own reconnect: making the gate's binding again as soon as it answers"
            );
            aux.shutdown_async().await;
            holding = None;
            greeting = GREETING;
        }
        let knock = tokio::time::timeout(KNOCK, tokio::net::TcpStream::connect(authority)).await;
        if matches!(knock, Ok(Ok(_))) {
            tracing::debug!(
                after_ms = started.elapsed().as_millis() as u64,
                greeting_ms = greeting.as_millis() as u64,
                "engine port answers: an auxiliary connection makes the durable bindings again"
            );
            match rebind(worker, url, name, greeting).await {
                Some(aux) => {
                    holding = Some(aux);
                    continue;
                }
                None => greeting = (greeting * 2).min(GREETING_MAX),
            }
        }
        tokio::time::sleep(PROBE).await;
    }
    if let Some(aux) = holding {
        aux.shutdown_async().await;
    }
}

/// Whether the worker's own connection is down and the SDK is trying to
/// get it back.
pub(crate) fn reconnecting(worker: &Worker) -> bool {
    worker.engine.iii().get_connection_state() == IIIConnectionState::Reconnecting
}

/// One auxiliary connection: the gate's binding, then the watch's. Returns
/// the connection, still open, when it made (or found) the gate's binding;
/// closes it otherwise. `name`: the worker's own (the auxiliary connection
/// is `<name>-rebind`).
async fn rebind(worker: &Worker, url: &str, name: &str, greeting: Duration) -> Option<IIIClient> {
    let metadata = WorkerMetadata {
        name: format!("{name}-rebind"),
        version: env!("CARGO_PKG_VERSION").to_string(),
        description: Some(
            "approval-gate's auxiliary connection: makes the gate's durable binding again after an engine restart"
                .to_string(),
        ),
        ..WorkerMetadata::default()
    };
    let opened = tokio::time::Instant::now();
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
    let greeted = iii.wait_until_registered(greeting).await;
    if let Err(err) = &greeted {
        tracing::debug!(error = %err, greeting_ms = greeting.as_millis() as u64, "the auxiliary connection was not greeted in time");
    }
    if greeted.is_ok() && reconnecting(worker) {
        let greeted_ms = opened.elapsed().as_millis() as u64;
        let engine = Engine::new(iii.clone());
        let config = worker.config.load();
        // The restarted engine lost whatever this connection parked before.
        worker.gate_binding.new_connection();
        worker.watch_binding.new_connection();
        match worker.gate_binding.ensure(&engine, &config.config).await {
            Ok(status) => {
                gated = true;
                tracing::info!(
                    id = status.id,
                    gated = status.gated,
                    parked = status.parked,
                    greeted_ms,
                    made_ms = opened.elapsed().as_millis() as u64,
                    "engine back: the gate's durable binding made again before the worker's own reconnect"
                );
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
    if gated {
        return Some(iii);
    }
    iii.shutdown_async().await;
    None
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
