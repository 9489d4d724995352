//! One engine per integration test: the in-process [`TestEngine`], or a real
//! `iii` binary when one is available, behind the same handle.
//!
//! A real engine is found through `III_ENGINE_BIN` (a path to the binary) or
//! an `iii` on `PATH`. Each real engine runs in a fresh temporary directory
//! with a generated config (worker manager on a free loopback port, `iii-state`
//! on a file store under the directory so [`EngineFixture::restart`] keeps
//! state — or on a `redis-server` the fixture starts, see [`StateBackend`]
//! — and `iii-http` on another free loopback port with [`HTTP_TIMEOUT`]),
//! with its output in `engine.log` there; it is killed, by its own
//! pid, when the fixture drops (set `III_ENGINE_KEEP_DIR=1` to keep the
//! directory and its log). The `configuration` worker is mandatory in the
//! engine and needs no config entry.
//!
//! Every SDK client the fixture makes has OpenTelemetry off and is shut down
//! when the fixture drops, so a test's clients never outlive it and reconnect
//! into a later test's engine.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{FutureExt, SinkExt, StreamExt};
use iii_sdk::protocol::TriggerRequest;
use iii_sdk::runtime::{WorkerIdentityMode, WorkerMetadata};
use iii_sdk::{register_worker, IIIClient, InitOptions};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::engine::TestEngine;
use super::redis::{redis_server_binary, RedisServer};

/// The timeout [`call`] gives every call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a real engine may take to accept connections and serve its
/// built-ins (a debug build boots slowly on a busy machine).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`wait_for_functions`] polls.
const FUNCTIONS_TIMEOUT: Duration = Duration::from_secs(20);

/// The timeout of each poll [`wait_for_functions`] makes.
const POLL_TIMEOUT: Duration = Duration::from_secs(1);

/// The HTTP worker's `default_timeout` on either engine: a bound function
/// that has not answered by then gets a 504 (the real default is 30 s).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`EngineFixture::client`] waits for the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);

/// The real engine's file store flushes this often (its minimum); a restart
/// waits a few periods so the last writes are on disk.
const STATE_SAVE_INTERVAL_MS: u64 = 100;

/// Set (non-empty) to keep each real engine's directory, with its config and
/// `engine.log`, after the test.
pub const KEEP_DIR_VAR: &str = "III_ENGINE_KEEP_DIR";

/// Where a real engine keeps its state: the `iii-state` worker's adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBackend {
    /// The `kv` adapter on files under the engine's directory, each changed
    /// scope rewritten every `save_interval_ms` (the engine's minimum is
    /// 100, its default 5000): a SIGKILL of the engine loses what changed
    /// since the last save.
    File {
        /// The flush period, milliseconds.
        save_interval_ms: u64,
    },
    /// The `redis` adapter on a `redis-server` the fixture starts on a free
    /// loopback port with its append-only file on (see [`crate::redis`]);
    /// it outlives engine restarts.
    Redis,
}

impl StateBackend {
    /// The file store at the engine's minimum flush period, the fixture's
    /// default.
    pub const FILE: StateBackend = StateBackend::File {
        save_interval_ms: STATE_SAVE_INTERVAL_MS,
    };

    /// A short name for test output: `file kv (100 ms)`, `redis`.
    pub fn label(&self) -> String {
        match self {
            StateBackend::File { save_interval_ms } => format!("file kv ({save_interval_ms} ms)"),
            StateBackend::Redis => "redis".to_string(),
        }
    }
}

impl Default for StateBackend {
    fn default() -> Self {
        StateBackend::FILE
    }
}

/// How a real engine is started.
#[derive(Debug, Clone, Default)]
pub struct RealEngineOptions {
    /// Where it keeps state.
    pub state: StateBackend,
    /// The engine's log filter (`iii-observability`'s `level`, an EnvFilter
    /// string such as `"info,iii::engine=debug"`); `None` keeps its default.
    pub log_filter: Option<String>,
    /// Keep the workers' OpenTelemetry metrics in memory
    /// (`iii-observability` enabled, `metrics_exporter: memory`), listed by
    /// `engine::metrics::list`.
    pub metrics: bool,
}

/// Which engine a fixture runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The in-process [`TestEngine`].
    Test,
    /// A real `iii` process.
    Real,
}

enum Engine {
    Test(TestEngine),
    Real(Box<RealEngine>),
}

/// A running engine plus the SDK clients made for it.
pub struct EngineFixture {
    engine: Engine,
    clients: Mutex<Vec<IIIClient>>,
}

impl std::fmt::Debug for EngineFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineFixture")
            .field("kind", &self.kind())
            .field("port", &self.port())
            .finish_non_exhaustive()
    }
}

/// The real engine binary: `III_ENGINE_BIN`, else an `iii` on `PATH`.
fn real_engine_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("III_ENGINE_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "III_ENGINE_BIN={} is not a file: point it at an iii engine binary or unset it",
            bin.display()
        );
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("iii"))
        .find(|candidate| candidate.is_file())
}

impl EngineFixture {
    /// A real engine when one is available (`III_ENGINE_BIN`, or `iii` on
    /// `PATH`), else the test engine.
    ///
    /// # Panics
    ///
    /// When a real engine does not become ready; the message carries the
    /// tail of its log.
    pub async fn start() -> EngineFixture {
        match real_engine_binary() {
            Some(bin) => Self::with(Engine::Real(Box::new(
                RealEngine::launch(bin, RealEngineOptions::default(), None).await,
            ))),
            None => Self::start_test().await,
        }
    }

    /// Always the in-process test engine.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start_test() -> EngineFixture {
        let engine = TestEngine::start_with_http(HTTP_TIMEOUT)
            .await
            .unwrap_or_else(|err| panic!("test engine failed to listen on 127.0.0.1: {err}"));
        Self::with(Engine::Test(engine))
    }

    /// A real engine, or `None` (after printing why) when there is none.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub async fn start_real(test: &str) -> Option<EngineFixture> {
        Self::start_real_with(test, RealEngineOptions::default()).await
    }

    /// A real engine started with `options`, or `None` (after printing one
    /// `SKIP` line saying why) when there is no engine binary, or when the
    /// options ask for Redis and there is no `redis-server`.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start), or when `redis-server` does not answer.
    pub async fn start_real_with(test: &str, options: RealEngineOptions) -> Option<EngineFixture> {
        let Some(bin) = real_engine_binary() else {
            eprintln!("SKIP {test}: no real iii engine (set III_ENGINE_BIN)");
            return None;
        };
        let redis = match options.state {
            StateBackend::Redis => match RedisServer::start().await {
                Some(redis) => Some(redis),
                None => {
                    eprintln!(
                        "SKIP {test} on redis: no redis-server (install the redis-server package or set REDIS_SERVER_BIN)"
                    );
                    return None;
                }
            },
            StateBackend::File { .. } => None,
        };
        Some(Self::with(Engine::Real(Box::new(
            RealEngine::launch(bin, options, redis).await,
        ))))
    }

    /// Whether a `redis-server` binary is available for
    /// [`StateBackend::Redis`].
    pub fn redis_available() -> bool {
        redis_server_binary().is_some()
    }

    fn with(engine: Engine) -> EngineFixture {
        EngineFixture {
            engine,
            clients: Mutex::new(Vec::new()),
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self.engine {
            Engine::Test(_) => EngineKind::Test,
            Engine::Real(_) => EngineKind::Real,
        }
    }

    /// The worker-name confirmation window a worker booted in-process
    /// against this engine may use (`BootOptions::name_confirm`):
    /// [`TestEngine::name_confirm_window`] on the test engine, `None` on a
    /// real engine (the worker's 1 s default).
    pub fn name_confirm_window(&self) -> Option<Duration> {
        match self.engine {
            Engine::Test(_) => Some(TestEngine::name_confirm_window()),
            Engine::Real(_) => None,
        }
    }

    /// `ws://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port())
    }

    pub fn port(&self) -> u16 {
        match &self.engine {
            Engine::Test(engine) => engine.port(),
            Engine::Real(engine) => engine.port,
        }
    }

    /// `http://127.0.0.1:<port>` of the engine's HTTP worker (`iii-http`).
    pub fn http_url(&self) -> String {
        let port = match &self.engine {
            Engine::Test(engine) => engine.http_port().unwrap_or_default(),
            Engine::Real(engine) => engine.http_port,
        };
        format!("http://127.0.0.1:{port}")
    }

    /// Where a real engine keeps state; `None` on the test engine (state in
    /// memory, kept across its restarts).
    pub fn state_backend(&self) -> Option<StateBackend> {
        match &self.engine {
            Engine::Test(_) => None,
            Engine::Real(engine) => Some(engine.options.state),
        }
    }

    /// A short name of the engine and its state backend for test output.
    pub fn label(&self) -> String {
        match self.state_backend() {
            None => "test engine".to_string(),
            Some(state) => format!("real engine, {}", state.label()),
        }
    }

    /// A real engine's log so far (`engine.log`); `None` on the test engine.
    pub fn engine_log(&self) -> Option<String> {
        match &self.engine {
            Engine::Test(_) => None,
            Engine::Real(engine) => Some(std::fs::read_to_string(&engine.log).unwrap_or_default()),
        }
    }

    /// A real engine's directory (its working directory: the
    /// configuration worker keeps each entry in `config/<id>.yaml` there);
    /// `None` on the test engine (configuration in memory).
    pub fn engine_dir(&self) -> Option<PathBuf> {
        match &self.engine {
            Engine::Test(_) => None,
            Engine::Real(engine) => Some(engine.root.clone()),
        }
    }

    /// The test engine, for fault injection and counters; `None` on a real
    /// engine.
    pub fn test_engine(&self) -> Option<&TestEngine> {
        match &self.engine {
            Engine::Test(engine) => Some(engine),
            Engine::Real(_) => None,
        }
    }

    /// Kills the engine with SIGKILL, without waiting for anything to be
    /// flushed, and starts it again on the same port and state: what a
    /// crash loses, it loses (a file store its writes since the last save;
    /// Redis nothing it acknowledged). The test engine keeps its state in
    /// memory across the restart, as [`restart`](Self::restart) does.
    ///
    /// # Panics
    ///
    /// When the engine does not come back.
    pub async fn kill_and_restart(&self) {
        match &self.engine {
            Engine::Test(engine) => engine
                .restart()
                .await
                .unwrap_or_else(|err| panic!("test engine did not come back: {err}")),
            Engine::Real(engine) => {
                engine.kill();
                engine.spawn();
                engine.wait_ready().await;
            }
        }
    }

    /// Restarts the engine on the same port, keeping state and configuration
    /// values (not schemas: an entry's schema is `null` until its owner
    /// registers it again). Clients reconnect by themselves and replay their
    /// registrations. Durable bindings survive a test-engine restart but not a
    /// real one, whose bindings live in memory only.
    ///
    /// # Panics
    ///
    /// When the engine does not come back.
    pub async fn restart(&self) {
        match &self.engine {
            Engine::Test(engine) => engine
                .restart()
                .await
                .unwrap_or_else(|err| panic!("test engine did not come back: {err}")),
            Engine::Real(engine) => engine.restart().await,
        }
    }

    /// Stops the engine, keeps it down for `outage`, and starts it again
    /// on the same port and state, forgetting its durable bindings as a
    /// real engine does; returns the instant its WebSocket port accepts
    /// connections again (polled every millisecond), without waiting for
    /// anything else: what a restart-window measurement counts from.
    ///
    /// # Panics
    ///
    /// When the engine does not come back.
    pub async fn restart_after(&self, outage: Duration) -> tokio::time::Instant {
        match &self.engine {
            Engine::Test(engine) => engine
                .restart_after(outage)
                .await
                .unwrap_or_else(|err| panic!("test engine did not come back: {err}")),
            Engine::Real(engine) => engine.restart_after(outage).await,
        }
    }

    /// An SDK client named `name` (the name is not overridden by
    /// `III_WORKER_NAME`), OpenTelemetry off, past its handshake. Its
    /// registrations may still be in flight: see [`wait_for_functions`]. A
    /// client whose name the engine refused is returned too; its
    /// `fatal_error()` says so.
    ///
    /// # Panics
    ///
    /// When the handshake does not happen in time.
    pub async fn client(&self, name: &str) -> IIIClient {
        let client = plain_client(&self.url(), name, None);
        self.clients().push(client.clone());
        match client.wait_until_registered(HANDSHAKE_TIMEOUT).await {
            // The engine answered, by refusing the name: the caller may be
            // testing exactly that, so the client is theirs to inspect.
            Ok(()) | Err(iii_sdk::Error::RegistrationRejected { .. }) => client,
            Err(err) => panic!(
                "client {name} did not complete its handshake with {}: {err}",
                self.url()
            ),
        }
    }

    fn clients(&self) -> MutexGuard<'_, Vec<IIIClient>> {
        self.clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for EngineFixture {
    fn drop(&mut self) {
        for client in self.clients().drain(..) {
            // Signals only (never joins the client's thread), so it completes
            // on its first poll and is safe inside a runtime.
            let _ = client.shutdown_async().now_or_never();
        }
        if let Engine::Test(engine) = &self.engine {
            engine.stop_now();
        }
    }
}

/// Calls `function_id` and waits for its result, with [`CALL_TIMEOUT`].
pub async fn call(
    client: &IIIClient,
    function_id: &str,
    payload: Value,
) -> Result<Value, iii_sdk::Error> {
    client
        .trigger(TriggerRequest {
            function_id: function_id.to_string(),
            payload,
            action: None,
            timeout_ms: Some(CALL_TIMEOUT.as_millis() as u64),
        })
        .await
}

/// Connects a plain SDK client as worker `name`: OpenTelemetry off (the
/// test engine serves no `/otel` socket) and an explicit identity, so a
/// process-wide `III_WORKER_NAME` cannot rename it. The peer doubles, the
/// fixture's clients and the playground all connect this way.
pub fn plain_client(url: &str, name: &str, description: Option<String>) -> IIIClient {
    let mut options = InitOptions {
        metadata: Some(WorkerMetadata {
            name: name.to_string(),
            description,
            ..WorkerMetadata::default()
        }),
        identity: WorkerIdentityMode::Explicit,
        otel: Some(Default::default()),
        ..InitOptions::default()
    };
    if let Some(otel) = options.otel.as_mut() {
        otel.enabled = Some(false);
    }
    register_worker(url, options)
}

/// Polls `engine::functions::list` until every id in `ids` is live.
///
/// # Panics
///
/// With the ids still missing, after 20 s.
pub async fn wait_for_functions(client: &IIIClient, ids: &[&str]) {
    let deadline = Instant::now() + FUNCTIONS_TIMEOUT;
    loop {
        // A short timeout per poll: a poll lost with a dying connection costs
        // one poll, not a whole call timeout.
        let listed = client
            .trigger(TriggerRequest {
                function_id: "engine::functions::list".to_string(),
                payload: json!({ "include_internal": true }),
                action: None,
                timeout_ms: Some(POLL_TIMEOUT.as_millis() as u64),
            })
            .await
            .unwrap_or(Value::Null);
        let live: Vec<&str> = listed["functions"]
            .as_array()
            .map(|functions| {
                functions
                    .iter()
                    .filter_map(|f| f["function_id"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let missing: Vec<&&str> = ids.iter().filter(|id| !live.contains(id)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "functions never became live: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ── the real engine ────────────────────────────────────────────────────

struct RealEngine {
    bin: PathBuf,
    options: RealEngineOptions,
    /// The state server of [`StateBackend::Redis`], kept alive with the
    /// engine and dropped after it.
    _redis: Option<RedisServer>,
    /// Removed on drop unless [`KEEP_DIR_VAR`] is set.
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    port: u16,
    http_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Mutex<Option<Child>>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("no free loopback port: {err}"))
}

fn config_yaml(
    port: u16,
    http_port: u16,
    state_dir: &Path,
    options: &RealEngineOptions,
    redis: Option<&RedisServer>,
) -> String {
    let mut yaml = format!(
        "workers:\n\
         \x20 - name: iii-worker-manager\n\
         \x20   config:\n\
         \x20     host: 127.0.0.1\n\
         \x20     port: {port}\n"
    );
    yaml.push_str(&state_yaml(state_dir, options.state, redis));
    yaml.push_str(&format!(
        "\x20 - name: iii-http\n\
         \x20   config:\n\
         \x20     host: 127.0.0.1\n\
         \x20     port: {http_port}\n\
         \x20     default_timeout: {}\n",
        HTTP_TIMEOUT.as_millis()
    ));
    if options.metrics {
        yaml.push_str(
            "\x20 - name: iii-observability\n\
             \x20   config:\n\
             \x20     enabled: true\n\
             \x20     metrics_enabled: true\n\
             \x20     metrics_exporter: memory\n",
        );
        if let Some(filter) = &options.log_filter {
            yaml.push_str(&format!("\x20     level: {}\n", json!(filter)));
        }
    } else if let Some(filter) = &options.log_filter {
        // A JSON string is a YAML string.
        yaml.push_str(&format!(
            "\x20 - name: iii-observability\n\
             \x20   config:\n\
             \x20     enabled: false\n\
             \x20     level: {}\n",
            json!(filter)
        ));
    }
    yaml
}

/// The `iii-state` block: the file store under `state_dir`, or the Redis
/// adapter on `redis`.
fn state_yaml(state_dir: &Path, state: StateBackend, redis: Option<&RedisServer>) -> String {
    // JSON strings are YAML strings: they need no further quoting.
    let adapter = match (state, redis) {
        (StateBackend::Redis, Some(redis)) => format!(
            "\x20       name: redis\n\
             \x20       config:\n\
             \x20         redis_url: {}\n",
            json!(redis.url())
        ),
        (StateBackend::Redis, None) => unreachable!("a Redis engine is launched with its server"),
        (StateBackend::File { save_interval_ms }, _) => format!(
            "\x20       name: kv\n\
             \x20       config:\n\
             \x20         store_method: file_based\n\
             \x20         file_path: {}\n\
             \x20         save_interval_ms: {save_interval_ms}\n",
            json!(state_dir.to_string_lossy())
        ),
    };
    format!(
        "\x20 - name: iii-state\n\
         \x20   config:\n\
         \x20     adapter:\n{adapter}"
    )
}

fn log_tail(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

impl RealEngine {
    async fn launch(
        bin: PathBuf,
        options: RealEngineOptions,
        redis: Option<RedisServer>,
    ) -> RealEngine {
        let dir = tempfile::Builder::new()
            .prefix("iii-engine-")
            .tempdir()
            .unwrap_or_else(|err| panic!("no temporary directory for the engine: {err}"));
        let port = free_port();
        let http_port = free_port();
        let root = dir.path().to_path_buf();
        let config = root.join("config.yaml");
        let log = root.join("engine.log");
        let yaml = config_yaml(
            port,
            http_port,
            &root.join("state"),
            &options,
            redis.as_ref(),
        );
        std::fs::write(&config, yaml)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", config.display()));
        let engine = RealEngine {
            bin,
            options,
            _redis: redis,
            dir: Some(dir),
            root,
            port,
            http_port,
            config,
            log,
            child: Mutex::new(None),
        };
        engine.spawn();
        engine.wait_ready().await;
        engine
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn spawn(&self) {
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.log.display()))
        };
        let child = Command::new(&self.bin)
            .arg("--config")
            .arg(&self.config)
            .arg("--no-update-check")
            .current_dir(&self.root)
            .env("III_TELEMETRY_ENABLED", "false")
            .env("OTEL_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(open_log())
            .stderr(open_log())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", self.bin.display()));
        *self.child() = Some(child);
    }

    fn kill(&self) {
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn fail(&self, why: &str) -> ! {
        self.kill();
        panic!(
            "real iii engine ({}) {why}; last lines of {}:\n{}",
            self.bin.display(),
            self.log.display(),
            log_tail(&self.log)
        );
    }

    /// Waits for the port, then for `engine::functions::list` to show the
    /// built-ins the worker needs.
    async fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            // Read the status in its own statement: the lock must be released
            // before `fail` takes it again to kill the child.
            let exited = self
                .child()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.fail(&format!("exited during startup ({status})"));
            }
            let http = SocketAddr::from((Ipv4Addr::LOCALHOST, self.http_port));
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && TcpStream::connect_timeout(&http, Duration::from_millis(200)).is_ok()
                && probe_builtins(self.port).await
            {
                return;
            }
            if Instant::now() >= deadline {
                self.fail("did not become ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// See [`EngineFixture::restart_after`].
    async fn restart_after(&self, outage: Duration) -> tokio::time::Instant {
        if let StateBackend::File { save_interval_ms } = self.options.state {
            tokio::time::sleep(Duration::from_millis(save_interval_ms * 3)).await;
        }
        self.kill();
        tokio::time::sleep(outage).await;
        self.spawn();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return tokio::time::Instant::now();
            }
            let exited = self
                .child()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.fail(&format!("exited during startup ({status})"));
            }
            if Instant::now() >= deadline {
                self.fail("did not accept connections within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn restart(&self) {
        // Let the file store flush the last writes before the process dies
        // (Redis has them already).
        if let StateBackend::File { save_interval_ms } = self.options.state {
            tokio::time::sleep(Duration::from_millis(save_interval_ms * 3)).await;
        }
        self.kill();
        self.spawn();
        self.wait_ready().await;
    }
}

impl Drop for RealEngine {
    fn drop(&mut self) {
        self.kill();
        if std::env::var_os(KEEP_DIR_VAR).is_some_and(|keep| !keep.is_empty()) {
            if let Some(dir) = self.dir.take() {
                eprintln!("kept the engine directory {}", dir.keep().display());
            }
        }
    }
}

/// One raw protocol round trip: `engine::functions::list` must show
/// `state::set` and `configuration::get`.
async fn probe_builtins(port: u16) -> bool {
    let attempt = async {
        let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/"))
            .await
            .ok()?;
        let invocation_id = uuid::Uuid::new_v4().to_string();
        let request = json!({
            "type": "invokefunction",
            "invocation_id": invocation_id,
            "function_id": "engine::functions::list",
            "data": {},
        });
        socket
            .send(WsMessage::Text(request.to_string().into()))
            .await
            .ok()?;
        while let Some(Ok(frame)) = socket.next().await {
            let WsMessage::Text(text) = frame else {
                continue;
            };
            let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if message["type"] == "invocationresult" && message["invocation_id"] == invocation_id {
                let _ = socket.close(None).await;
                let listed = message["result"]["functions"].as_array()?.clone();
                let has = |id: &str| listed.iter().any(|f| f["function_id"] == id);
                return Some(has("state::set") && has("configuration::get"));
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}
