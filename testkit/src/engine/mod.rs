//! An in-process iii engine for tests: it speaks the engine's WebSocket
//! protocol on `127.0.0.1`, so the worker under test uses the real SDK over a
//! real socket, and it serves the built-ins the worker depends on with the
//! real engine's answers.
//!
//! What it does, as the real engine (0.23) does:
//!
//! * greets every connection with `workerregistered {worker_id,
//!   reattach_token}`, answers `ping` with `pong`, never sends
//!   `functionregistered`;
//! * queues a connection's registrations until its `engine::workers::register`
//!   (or 5 s), which names it: one live worker name per namespace (compared
//!   after stripping control and bidi characters and trimming), a second one
//!   is refused — its registrations never apply, and `registrationrejected
//!   {code: WORKER_NAMESPACE_CONFLICT, namespace, worker_name,
//!   owner_worker_id}` then a close reach it tens of milliseconds after the
//!   greeting, with no answer to the register call — and the name is free
//!   the moment the holder's socket closes; one live owner per function id,
//!   a second one is rejected (`FUNCTION_NAMESPACE_CONFLICT`) and keeps its
//!   connection;
//! * routes `invokefunction` to a built-in or the owning connection, stamps
//!   `_caller_worker_id` into object payloads, answers `function_not_found`,
//!   and `invocation_stopped` when the callee disconnects mid-call;
//! * forwards bindings to worker trigger-type providers, parks bindings whose
//!   type nobody provides (`[PENDING] … was NOT activated`), re-sends them
//!   when a provider registers the type again, removes a worker's own
//!   bindings when it disconnects, and keeps `engine::register_trigger`
//!   bindings (durable) until `engine::unregister_trigger`;
//! * `state::*` and `configuration::*` with their triggers.
//!
//! What it adds: [`Faults`] (fail or delay chosen calls),
//! [`TestEngine::drop_connections_of`], [`TestEngine::restart`] (same port,
//! state kept) and invocation counters. What it leaves out is listed on
//! [`TestEngine`].

mod builtins;
mod configuration;
mod core;
mod faults;
mod http;
mod state;
mod wire;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use self::core::{
    ConnId, Core, Deferred, Outbound, Stats, NAME_REFUSAL_DELAY, TRIGGER_ACK_TIMEOUT,
};
pub use self::faults::Faults;
pub use self::http::DEFAULT_TIMEOUT as HTTP_DEFAULT_TIMEOUT;
use self::wire::{ErrorBody, DEFAULT_NAMESPACE};

/// Largest frame and message accepted, as the SDK's own limit.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How long a connection's registrations wait for `engine::workers::register`
/// before they apply in the default namespace.
const NAMESPACE_GRACE: Duration = Duration::from_secs(5);

/// How long `restart` waits after dropping the connections before it returns:
/// time for every SDK client to see its socket close, so the test's next call
/// queues for the reconnect instead of vanishing into the dead socket.
const RESTART_SETTLE: Duration = Duration::from_millis(200);

/// How long `restart` keeps trying to listen on the same port again.
const REBIND_PATIENCE: Duration = Duration::from_secs(5);

/// What the engine shares between its accept loop, its sockets and the
/// handles: the routing core behind one lock (never held across an await),
/// and the fault rules and counters, which have their own.
struct Shared {
    core: Mutex<Core>,
    faults: Arc<Faults>,
    stats: Arc<Stats>,
    port: u16,
    listener: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    /// The HTTP worker's port and server task, when it serves.
    http: Mutex<Option<(u16, JoinHandle<()>)>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the core, then starts whatever it left to wait on.
    fn with_core<R>(self: &Arc<Self>, f: impl FnOnce(&mut Core) -> R) -> R {
        let (result, deferred) = {
            let mut core = self.lock();
            let result = f(&mut core);
            (result, core.take_deferred())
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            for work in deferred {
                runtime.spawn(finish_deferred(self.clone(), work));
            }
        }
        result
    }
}

/// A durable binding's answer: the provider's refusal, or `{id}` once it
/// accepted, did not answer within the timeout, or went away.
async fn finish_deferred(shared: Arc<Shared>, work: Deferred) {
    let Deferred::TriggerAck {
        verdict,
        binding,
        provider,
        reply,
    } = work;
    let refusal = match tokio::time::timeout(TRIGGER_ACK_TIMEOUT, verdict).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(_)) => None,
        Err(_) => {
            shared.with_core(|core| core.trigger_acks.remove(&binding.id));
            None
        }
    };
    let answer = match refusal {
        Some(error) => Err(ErrorBody::new(
            "trigger_registration_failed",
            format!("{}: {}", error.code, error.message),
        )),
        None => {
            let id = binding.id.clone();
            shared.with_core(|core| core.accept_durable(binding, provider));
            Ok(Some(json!({ "id": id })))
        }
    };
    if let Some(reply) = reply {
        reply.send(answer);
    }
}

/// An in-process engine listening on `127.0.0.1`. Cheap to clone: clones
/// share one engine.
///
/// Differences from the real engine (0.23) worth knowing:
///
/// * one namespace is enough for most tests: namespaces are honoured for
///   function routing, worker names and provider lookup (own, then
///   `default`), but bindings are not re-homed when a provider appears in a
///   binder's own namespace later;
/// * engine bindings (`state`, `configuration`) are delivered as soon as the
///   write happens, in binding-id order, without awaiting the handler; a
///   binding's `condition_function_id` is not evaluated;
/// * a worker cannot register a built-in's id (`state::set`, …) or provide a
///   built-in trigger type; the real engine lets it shadow them;
/// * no queues (`Enqueue` answers `enqueue_error`), no HTTP-invoked
///   functions, no channels, no observers, no RBAC; only the built-ins listed
///   by `engine::functions::list {include_internal: true}` exist;
/// * the HTTP worker (`http` trigger type) runs only when started with
///   [`TestEngine::start_with_http`]; what it imitates is listed in its
///   module (`engine/http.rs`);
/// * the upgrade response advertises `x-iii-capabilities: tcp-nodelay`, so the
///   SDK turns Nagle off (latency only).
#[derive(Clone)]
pub struct TestEngine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TestEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEngine")
            .field("port", &self.shared.port)
            .finish_non_exhaustive()
    }
}

fn bind(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    socket.listen(1024)
}

impl TestEngine {
    /// The worker-name confirmation window a worker may use against this
    /// engine (`BootOptions::name_confirm`): three times its fixed refusal
    /// delay (60 ms after the greeting), so a taken name is still seen as
    /// taken. A real engine's refusal comes when the network brings it, so
    /// the worker's 1 s default stays there.
    pub fn name_confirm_window() -> Duration {
        NAME_REFUSAL_DELAY * 3
    }

    /// How long after a worker's greeting this engine refuses a name
    /// another live worker holds (fixed, 60 ms).
    pub fn name_refusal_delay() -> Duration {
        NAME_REFUSAL_DELAY
    }

    /// Starts an engine on a free loopback port, and its HTTP worker (the
    /// `http` trigger type) on another, with `timeout` as its
    /// `default_timeout` (the real engine's is [`HTTP_DEFAULT_TIMEOUT`]).
    pub async fn start_with_http(timeout: Duration) -> std::io::Result<TestEngine> {
        let engine = TestEngine::start().await?;
        let listener = http::listen().await?;
        let port = listener.local_addr()?.port();
        engine.shared.with_core(|core| core.enable_http());
        let server = tokio::spawn(http::serve(engine.shared.clone(), listener, timeout));
        *engine.http_slot() = Some((port, server));
        tracing::debug!(port, "test engine http listening");
        Ok(engine)
    }

    fn http_slot(&self) -> MutexGuard<'_, Option<(u16, JoinHandle<()>)>> {
        self.shared
            .http
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The HTTP worker's port, when it serves.
    pub fn http_port(&self) -> Option<u16> {
        self.http_slot().as_ref().map(|(port, _)| *port)
    }

    /// `http://127.0.0.1:<http port>`, when the HTTP worker serves.
    pub fn http_url(&self) -> Option<String> {
        self.http_port()
            .map(|port| format!("http://127.0.0.1:{port}"))
    }

    fn stop_http(&self) {
        if let Some((_, server)) = self.http_slot().take() {
            server.abort();
        }
    }

    /// Starts an engine on a free loopback port.
    pub async fn start() -> std::io::Result<TestEngine> {
        let listener = bind(0)?;
        let port = listener.local_addr()?.port();
        let faults = Arc::new(Faults::default());
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            core: Mutex::new(Core::new(faults.clone(), stats.clone())),
            faults,
            stats,
            port,
            listener: tokio::sync::Mutex::new(None),
            http: Mutex::new(None),
        });
        let accept = tokio::spawn(accept_loop(shared.clone(), listener));
        *shared.listener.lock().await = Some(accept);
        tracing::debug!(port, "test engine listening");
        Ok(TestEngine { shared })
    }

    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// `ws://127.0.0.1:<port>`, what the SDK's `register_worker` takes.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.shared.port)
    }

    /// Fault rules, applied to every call the engine routes from now on.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Drops every connection whose worker registered as `worker_name`, the
    /// way a crash or a cut cable would: no close frame. Everything those
    /// connections owned is released at once (callers of their functions get
    /// `invocation_stopped`); the SDK reconnects by itself 2 s later. As on a
    /// real network, a frame the worker sends before it notices (within a
    /// millisecond or so) is lost. Returns how many connections were dropped.
    pub fn drop_connections_of(&self, worker_name: &str) -> usize {
        self.shared.with_core(|core| {
            core.conns_named(worker_name)
                .into_iter()
                .filter(|conn| core.abort(*conn))
                .count()
        })
    }

    /// Stops the engine and starts it again on the same port: every
    /// connection is dropped (the SDK reconnects within about 2 s and
    /// replays its functions, trigger types and bindings); state,
    /// configuration values and durable bindings are kept. As with the real
    /// engine's file store, configuration schemas are not: an entry's schema
    /// is `null` (so `configuration::set` answers `SCHEMA_UNAVAILABLE`) until
    /// its owner registers it again.
    ///
    /// The real engine keeps its bindings in memory only, so a real restart
    /// also loses durable bindings: see
    /// [`restart_forgetting_durable_bindings`](Self::restart_forgetting_durable_bindings).
    pub async fn restart(&self) -> std::io::Result<()> {
        self.restart_with(false).await
    }

    /// [`restart`](Self::restart) as a real engine process restarts: durable
    /// bindings (`engine::register_trigger`) are gone afterwards too.
    pub async fn restart_forgetting_durable_bindings(&self) -> std::io::Result<()> {
        self.restart_with(true).await
    }

    /// A real engine's restart with an outage: every connection dropped,
    /// the port closed for `outage`, durable bindings forgotten (a real
    /// engine keeps them in memory only); returns the instant the port
    /// accepts connections again, without waiting for anything else (a
    /// restart-window bench starts its clients at that instant).
    pub async fn restart_after(&self, outage: Duration) -> std::io::Result<tokio::time::Instant> {
        self.stop_listening().await;
        self.shared.with_core(|core| {
            for conn in core.conn_ids() {
                core.abort(conn);
            }
            core.configuration.forget_schemas();
            core.bindings.clear();
            core.http.clear();
        });
        tokio::time::sleep(outage).await;
        let started = tokio::time::Instant::now();
        let listener = loop {
            match bind(self.shared.port) {
                Ok(listener) => break listener,
                Err(err) if started.elapsed() < REBIND_PATIENCE => {
                    tracing::debug!(error = %err, "test engine: port not free yet");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(err) => return Err(err),
            }
        };
        let accepting = tokio::time::Instant::now();
        let accept = tokio::spawn(accept_loop(self.shared.clone(), listener));
        *self.shared.listener.lock().await = Some(accept);
        Ok(accepting)
    }

    async fn restart_with(&self, forget_durable: bool) -> std::io::Result<()> {
        self.stop_listening().await;
        self.shared.with_core(|core| {
            for conn in core.conn_ids() {
                core.abort(conn);
            }
            core.configuration.forget_schemas();
            if forget_durable {
                core.bindings.clear();
                core.http.clear();
            }
        });
        let started = tokio::time::Instant::now();
        let listener = loop {
            match bind(self.shared.port) {
                Ok(listener) => break listener,
                Err(err) if started.elapsed() < REBIND_PATIENCE => {
                    tracing::debug!(error = %err, "test engine: port not free yet");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(err) => return Err(err),
            }
        };
        let accept = tokio::spawn(accept_loop(self.shared.clone(), listener));
        *self.shared.listener.lock().await = Some(accept);
        tokio::time::sleep(RESTART_SETTLE).await;
        Ok(())
    }

    /// How many calls to `function_id` the engine routed or served since it
    /// started (built-ins, void calls, trigger deliveries and faulted calls
    /// included).
    pub fn invocations(&self, function_id: &str) -> u64 {
        self.shared.stats.of(function_id)
    }

    /// How many calls to the state built-in `function_id` (`state::list`, …)
    /// named `scope`, since the engine started.
    pub fn state_calls(&self, function_id: &str, scope: &str) -> u64 {
        self.shared.stats.of_scope(function_id, scope)
    }

    /// How many calls the engine routed or served since it started.
    pub fn total_invocations(&self) -> u64 {
        self.shared.stats.total()
    }

    /// Stops listening and drops every connection.
    pub async fn shutdown(self) {
        self.stop_listening().await;
        self.stop_http();
        self.shared.with_core(|core| {
            for conn in core.conn_ids() {
                core.abort(conn);
            }
        });
    }

    /// [`shutdown`](Self::shutdown) for a `Drop`: stops accepting (unless a
    /// restart is under way) and drops every connection, without awaiting.
    pub(crate) fn stop_now(&self) {
        if let Ok(mut listener) = self.shared.listener.try_lock() {
            if let Some(accept) = listener.take() {
                accept.abort();
            }
        }
        self.stop_http();
        self.shared.with_core(|core| {
            for conn in core.conn_ids() {
                core.abort(conn);
            }
        });
    }

    async fn stop_listening(&self) {
        let accept = self.shared.listener.lock().await.take();
        if let Some(accept) = accept {
            accept.abort();
            let _ = accept.await;
        }
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(serve(shared.clone(), stream, peer));
            }
            Err(err) => {
                tracing::warn!(error = %err, "test engine: accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// One socket: the WebSocket upgrade, then either a worker connection or the
/// SDK's telemetry side channel (`/otel`), which is read and ignored.
// The upgrade callback's error type is tungstenite's, large or not.
#[allow(clippy::result_large_err)]
async fn serve(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let mut path = String::new();
    let record_path = |request: &Request, mut response: Response| {
        path = request.uri().path().to_string();
        response.headers_mut().insert(
            "x-iii-capabilities",
            HeaderValue::from_static("tcp-nodelay"),
        );
        Ok(response)
    };
    let config = WebSocketConfig::default()
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
        .max_message_size(Some(MAX_MESSAGE_BYTES));
    let socket =
        match tokio_tungstenite::accept_hdr_async_with_config(stream, record_path, Some(config))
            .await
        {
            Ok(socket) => socket,
            Err(err) => {
                tracing::debug!(error = %err, "test engine: websocket upgrade failed");
                return;
            }
        };
    let (mut sink, mut source) = socket.split();

    if path.starts_with("/otel") {
        while let Some(Ok(frame)) = source.next().await {
            if let WsMessage::Ping(payload) = frame {
                let _ = sink.send(WsMessage::Pong(payload)).await;
            }
        }
        return;
    }

    let (outbox, mut outgoing) = mpsc::unbounded_channel();
    let conn = shared.with_core(|core| core.connect(outbox, peer.ip().to_string()));
    let grace = {
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(NAMESPACE_GRACE).await;
            shared.with_core(|core| core.resolve_namespace(conn, DEFAULT_NAMESPACE));
        })
    };

    loop {
        tokio::select! {
            frame = source.next() => match frame {
                Some(Ok(WsMessage::Text(text))) => on_text(&shared, conn, text.as_str()),
                Some(Ok(WsMessage::Binary(bytes))) => {
                    // Telemetry frames (OTLP/MTRC/LOGS prefixes) are not JSON.
                    if let Ok(text) = std::str::from_utf8(&bytes) {
                        on_text(&shared, conn, text);
                    }
                }
                Some(Ok(WsMessage::Ping(payload))) => {
                    if sink.send(WsMessage::Pong(payload)).await.is_err() {
                        break;
                    }
                }
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            out = outgoing.recv() => match out {
                Some(Outbound::Frame(text)) => {
                    if sink.send(WsMessage::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Outbound::Close) => {
                    let _ = sink.send(WsMessage::Close(None)).await;
                    break;
                }
                Some(Outbound::Abort) | None => break,
            },
        }
    }
    grace.abort();
    shared.with_core(|core| core.disconnect(conn));
}

fn on_text(shared: &Arc<Shared>, conn: ConnId, text: &str) {
    if text.trim().is_empty() {
        return;
    }
    match serde_json::from_str::<wire::Inbound>(text) {
        Ok(frame) => shared.with_core(|core| core.on_frame(conn, frame)),
        Err(err) => tracing::warn!(error = %err, "test engine: json decode error"),
    }
}
