//! Shared scaffolding of the scenario suites: one scenario, written once, runs
//! on the in-process test engine and then on a real engine when one is
//! available (`III_ENGINE_BIN` or `iii` on PATH); the worker starts either in
//! this process (its library's `boot`) or as its binary ([`BIN`]).

use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use approval_gate::{boot, BootOptions, Running};
use approval_gate_testkit::fixture::{
    call, wait_for_functions, EngineFixture, RealEngineOptions, StateBackend,
};
use approval_gate_testkit::harness::{CallSpec, Generation, HarnessDouble, HarnessOptions};
use approval_gate_testkit::session::SessionDouble;
use approval_gate_testkit::shell::{Dialect, JailShell};
use approval_gate_testkit::targets::TargetWorker;
use futures_util::FutureExt;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

/// The worker binary, for the suites that run it as a child process
/// (`approval_gate_testkit::worker::WorkerProcess`).
pub const BIN: &str = env!("CARGO_BIN_EXE_approval-gate");

/// The secret key names of contract §4, written here from the contract and
/// not borrowed from `src/redact.rs`, so a name dropped there fails the
/// suites that use this list.
pub const SECRET_NAMES: [&str; 11] = [
    "password",
    "token",
    "api_key",
    "apikey",
    "secret",
    "auth",
    "authorization",
    "access_key",
    "access_token",
    "refresh_token",
    "private_key",
];

/// Boots the worker in-process against `engine` (OTel off).
pub async fn start_in_process(engine: &EngineFixture) -> InProcess {
    start_in_process_with(engine, None).await
}

/// Boots the worker in-process with a configuration seed. On the test
/// engine the worker-name confirmation is the engine's short window
/// ([`EngineFixture::name_confirm_window`]), not the 1 s a real engine
/// needs: a boot waits ~0.2 s instead of 1 s, and a name still taken is
/// still refused (the test engine refuses 60 ms after its greeting;
/// `standby::a_short_name_confirmation_still_refuses_a_second_instance`).
/// The suite about the window (`standby`) otherwise runs the binary, which
/// always waits the full window.
pub async fn start_in_process_with(engine: &EngineFixture, seed: Option<Value>) -> InProcess {
    start_in_process_aged(engine, seed, approval_gate::RECONCILE_AGE).await
}

/// As [`start_in_process_with`], with the reconcile age `reconcile_age`
/// (`BootOptions::reconcile_age`): twice the hook timeout of the harness
/// the worker faces ([`reconcile_age_for`]).
pub async fn start_in_process_aged(
    engine: &EngineFixture,
    seed: Option<Value>,
    reconcile_age: Duration,
) -> InProcess {
    let name_confirm = engine
        .name_confirm_window()
        .unwrap_or(approval_gate::NAME_CONFIRM_WINDOW);
    boot_in_process(BootOptions {
        seed,
        name_confirm,
        reconcile_age,
        ..in_process_options(&engine.url())
    })
    .await
}

/// Boots the worker in-process against `url` with the name confirmation
/// `name_confirm` and a configuration seed (OTel off).
pub async fn start_in_process_at(
    url: &str,
    name_confirm: Duration,
    seed: Option<Value>,
) -> InProcess {
    boot_in_process(BootOptions {
        seed,
        name_confirm,
        ..in_process_options(url)
    })
    .await
}

/// The options every in-process boot starts from: OTel off, a 15 s
/// connect timeout.
pub fn in_process_options(url: &str) -> BootOptions {
    BootOptions {
        connect_timeout: Duration::from_secs(15),
        otel: false,
        ..BootOptions::new(url)
    }
}

/// Boots the worker in-process with `options`; panics when it does not.
pub async fn boot_in_process(options: BootOptions) -> InProcess {
    let running = boot(options)
        .await
        .unwrap_or_else(|e| panic!("worker did not boot: {e}"));
    InProcess(Some(running))
}

/// The reconcile age a worker facing a harness with `options` keeps:
/// twice the hook timeout that harness applies (§27.4), the default when
/// it applies the binding's own.
pub fn reconcile_age_for(options: &HarnessOptions) -> Duration {
    options
        .hook_timeout_ms
        .map_or(approval_gate::RECONCILE_AGE, |ms| {
            Duration::from_millis(2 * ms)
        })
}

/// The worker booted in this process, disconnected when dropped.
///
/// The SDK runs each client's connection on a thread of its own that keeps
/// reconnecting until the client is shut down, and every suite shares this
/// process: a worker left running would retry its finished test's port for
/// the rest of the run, and join whichever later test's engine is given
/// that port.
pub struct InProcess(Option<Running>);

impl InProcess {
    /// Graceful stop (see [`Running::shutdown`]).
    pub async fn shutdown(mut self, drain: Duration) {
        if let Some(running) = self.0.take() {
            running.shutdown(drain).await;
        }
    }
}

impl Deref for InProcess {
    type Target = Running;

    fn deref(&self) -> &Running {
        // Empty only inside `shutdown`, which consumes the value.
        self.0.as_ref().expect("the worker runs until shut down")
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(running) = self.0.take() {
            // Signals only (never joins the connection thread), so it
            // completes on its first poll and is safe inside a runtime.
            let _ = running.client().shutdown_async().now_or_never();
        }
    }
}

/// How long one scenario may take on one engine.
pub const SCENARIO_LIMIT: Duration = Duration::from_secs(90);
/// A short wait for asynchronous effects.
pub const WAIT: Duration = Duration::from_secs(5);

/// Writes a scenario once and runs it on both harness generations: the
/// scenario is an `async fn <name>(generation)` taking the
/// [`Generation`]; the macro makes a module `<name>` with the tests `g1`
/// and `g2` (`cargo test --test it <suite>::<name>` runs both). Inside, the
/// scenario usually starts its scene with [`Scene::start_with`] and
/// `HarnessOptions::generation(generation)` and runs on each engine with
/// [`on_each_engine`] under [`label`]`(name, generation)`.
macro_rules! each_generation {
    ($(#[$meta:meta])* async fn $name:ident($generation:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn $name($generation: approval_gate_testkit::harness::Generation) $body

            #[tokio::test]
            async fn g1() {
                $name(approval_gate_testkit::harness::Generation::G1).await
            }

            #[tokio::test]
            async fn g2() {
                $name(approval_gate_testkit::harness::Generation::G2).await
            }
        }
    };
}
pub(crate) use each_generation;

/// A scenario's label on one generation (`<name>_g1` / `<name>_g2`): what
/// [`on_each_engine`] prints and names the real engine's files after.
pub fn label(name: &str, generation: Generation) -> String {
    match generation {
        Generation::G1 => format!("{name}_g1"),
        Generation::G2 => format!("{name}_g2"),
    }
}

/// Runs `scenario` on the test engine, then on a real engine when present.
pub async fn on_each_engine<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let test_engine = EngineFixture::start_test().await;
    run_bounded(test, test_engine, &scenario).await;
    if let Some(real) = EngineFixture::start_real(test).await {
        run_bounded(test, real, &scenario).await;
    }
}

/// As [`on_each_engine`], with the real engine logging the replies it drops,
/// for a scenario of many calls that checks them with [`LostReplies`].
pub async fn on_each_engine_counting_drops<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let test_engine = EngineFixture::start_test().await;
    run_bounded(test, test_engine, &scenario).await;
    if let Some(real) =
        EngineFixture::start_real_with(test, LostReplies::real_engine_options()).await
    {
        run_bounded(test, real, &scenario).await;
    }
}

/// Runs `scenario` on the test engine, then on a real engine keeping state
/// in its file store and on a real engine keeping it in Redis, when each is
/// available (one `SKIP` line for what is not): the durability scenarios.
pub async fn on_each_state_backend<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let test_engine = EngineFixture::start_test().await;
    run_bounded(test, test_engine, &scenario).await;
    for state in [StateBackend::FILE, StateBackend::Redis] {
        let options = RealEngineOptions {
            state,
            ..RealEngineOptions::default()
        };
        match EngineFixture::start_real_with(test, options).await {
            Some(real) => run_bounded(test, real, &scenario).await,
            // No engine at all: said once, not once per backend.
            None if state == StateBackend::FILE => return,
            None => {}
        }
    }
}

/// Runs `scenario` on the test engine only (fault injection).
pub async fn on_test_engine<F, Fut>(test: &str, scenario: F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    run_bounded(test, EngineFixture::start_test().await, &scenario).await;
}

async fn run_bounded<F, Fut>(test: &str, engine: EngineFixture, scenario: &F)
where
    F: Fn(EngineFixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let label = engine.label();
    eprintln!("{test}: on the {label}");
    tokio::time::timeout(SCENARIO_LIMIT, scenario(engine))
        .await
        .unwrap_or_else(|_| panic!("{test} on the {label} did not finish in {SCENARIO_LIMIT:?}"));
}

/// The remote error code of a failed call.
pub fn code_of(err: &iii_sdk::Error) -> String {
    match err {
        iii_sdk::Error::Remote { code, .. } => code.clone(),
        other => other.to_string(),
    }
}

/// The remote error message of a failed call.
pub fn message_of(err: &iii_sdk::Error) -> String {
    match err {
        iii_sdk::Error::Remote { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Wall-clock milliseconds since the epoch, as records and deadlines
/// carry them.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How long a scenario watches for what must not happen once what it
/// waited for has happened: a second event, a late write, a release run
/// twice.
pub const QUIET: Duration = Duration::from_millis(300);

/// Lets [`QUIET`] pass. This is not a wait for an event: the claim that
/// follows ("still exactly one event", "nothing was written") is about this
/// stretch of time itself, so it is a bounded sleep on purpose.
pub async fn stay_quiet() {
    tokio::time::sleep(QUIET).await;
}

/// Polls an async `probe` until `done` accepts its result or `timeout`
/// passes.
pub async fn eventually_async<F, Fut, T>(
    timeout: Duration,
    probe: F,
    mut done: impl FnMut(T) -> bool,
) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if done(probe().await) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` until it holds or `timeout` passes.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replies the real engine (0.23) dropped during a scenario of many calls
/// (`architecture/integration.md` § Lost replies): the engine forwards a
/// call before it records it, and an answer that arrives in between is
/// dropped, so the caller times out although the callee ran the call.
///
/// Only on a real engine, and only these shapes, are tolerated: a harness
/// call denied because the gate's hook "timed out", a call that got no
/// answer (`Timeout`), and a resolve that says the harness did not answer
/// (`approval/harness_unavailable`). Each is counted, and [`check`] then
/// requires the engine's own log to show at least as many dropped replies:
/// an unanswered call with any other cause still fails the test. The test
/// engine records a call before it forwards it, so there nothing is
/// tolerated.
///
/// [`check`]: LostReplies::check
pub struct LostReplies {
    real: bool,
    seen: std::sync::atomic::AtomicUsize,
}

/// The real engine's DEBUG line for an answer nobody waits for.
pub const DROPPED_REPLY: &str = "Did not find caller for invocation";

impl LostReplies {
    /// Start a real engine with this, so its log shows the drops.
    pub fn real_engine_options() -> RealEngineOptions {
        RealEngineOptions {
            log_filter: Some("info,iii::engine=debug".into()),
            ..RealEngineOptions::default()
        }
    }

    pub fn new(engine: &EngineFixture) -> Self {
        LostReplies {
            real: engine.kind() == approval_gate_testkit::fixture::EngineKind::Real,
            seen: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn tolerate(&self, lost: bool) -> bool {
        if lost && self.real {
            self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Whether the harness denied a call only because the gate's answer
    /// never came (counted).
    pub fn hook_timed_out(&self, out: &approval_gate_testkit::harness::CallState) -> bool {
        let timed_out = matches!(
            out,
            approval_gate_testkit::harness::CallState::Denied { reason, .. }
                if reason == "hook approval::gate timed out"
        );
        self.tolerate(timed_out)
    }

    /// Whether a failed call is one a dropped reply explains (counted).
    pub fn unanswered(&self, err: &iii_sdk::Error) -> bool {
        let lost = matches!(err, iii_sdk::Error::Timeout)
            || code_of(err) == "approval/harness_unavailable";
        self.tolerate(lost)
    }

    pub fn count(&self) -> usize {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every tolerated failure is matched by a drop in the engine's log.
    pub async fn check(&self, engine: &EngineFixture, test: &str) {
        let seen = self.count();
        if seen == 0 {
            return;
        }
        let mut dropped = 0;
        // The log is written asynchronously: let it catch up.
        for _ in 0..20 {
            dropped = engine
                .engine_log()
                .map(|log| log.matches(DROPPED_REPLY).count())
                .unwrap_or(0);
            if dropped >= seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            dropped >= seen,
            "{test}: {seen} calls went unanswered, but the engine logged only {dropped} dropped replies"
        );
        eprintln!(
            "{test}: {seen} calls unanswered, each explained by the engine's {dropped} dropped replies (architecture/integration.md § Lost replies)"
        );
    }
}

/// A world: engine, harness, session manager, targets, the worker, a probe.
pub struct Scene {
    pub engine: EngineFixture,
    pub harness: HarnessDouble,
    pub sessions: SessionDouble,
    pub targets: TargetWorker,
    pub worker: Option<InProcess>,
    pub probe: IIIClient,
    /// The worker's reconcile age ([`reconcile_age_for`] the harness's
    /// options), kept for restarts.
    pub reconcile_age: Duration,
}

/// Target functions every scene serves.
pub const TARGETS: &[&str] = &["demo::echo", "demo::other", "shell::run", "coder::write"];

impl Scene {
    /// Peers first (so their trigger types exist), then the worker.
    pub async fn start(engine: EngineFixture) -> Scene {
        Self::start_with(engine, HarnessOptions::default()).await
    }

    /// As [`Scene::start`] with harness options.
    pub async fn start_with(engine: EngineFixture, options: HarnessOptions) -> Scene {
        Self::start_seeded(engine, options, None).await
    }

    /// As [`Scene::start_with`], the worker booting with a configuration seed.
    pub async fn start_seeded(
        engine: EngineFixture,
        options: HarnessOptions,
        seed: Option<Value>,
    ) -> Scene {
        trace_in_process_worker();
        let reconcile_age = reconcile_age_for(&options);
        let harness = HarnessDouble::start(&engine.url(), options).await;
        let sessions = SessionDouble::start(&engine.url()).await;
        let targets = TargetWorker::start(&engine.url(), TARGETS).await;
        let probe = engine.client("probe").await;
        let worker = Some(start_in_process_aged(&engine, seed, reconcile_age).await);
        let scene = Scene {
            engine,
            harness,
            sessions,
            targets,
            worker,
            probe,
            reconcile_age,
        };
        scene.wait_for_gate_binding().await;
        scene
    }

    /// Waits until the harness holds the gate's binding and the watch's
    /// (today's harness enforces a session root only while the watch's
    /// binding matches a call).
    pub async fn wait_for_gate_binding(&self) {
        assert!(
            self.harness
                .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
                .await
                .is_some(),
            "the harness never received the gate's binding"
        );
        assert!(
            self.harness
                .wait_for_binding(
                    "harness::hook::post-trigger",
                    "approval::filesystem-access-watch",
                    WAIT
                )
                .await
                .is_some(),
            "the harness never received the watch's binding"
        );
    }

    /// Calls a function from the probe.
    pub async fn call(&self, function_id: &str, payload: Value) -> Result<Value, iii_sdk::Error> {
        call(&self.probe, function_id, payload).await
    }

    /// Calls a function that must succeed.
    pub async fn ok(&self, function_id: &str, payload: Value) -> Value {
        self.call(function_id, payload.clone())
            .await
            .unwrap_or_else(|e| panic!("{function_id} {payload} failed: {e}"))
    }

    /// Stops the in-process worker (its connection drops).
    pub async fn stop_worker(&mut self) {
        if let Some(w) = self.worker.take() {
            w.shutdown(Duration::from_secs(2)).await;
        }
    }

    /// Starts the in-process worker again.
    pub async fn restart_worker(&mut self) {
        self.stop_worker().await;
        self.worker = Some(start_in_process_aged(&self.engine, None, self.reconcile_age).await);
    }

    /// The inbox, all of it.
    pub async fn inbox(&self) -> Vec<Value> {
        let out = self
            .ok("approval::list-pending", json!({"limit": 500}))
            .await;
        out["pending"].as_array().cloned().unwrap_or_default()
    }

    /// Every live record in the pending store's state scopes.
    pub async fn pending_in_state(&self) -> Vec<Value> {
        let mut all = Vec::new();
        for scope in approval_gate::all_scopes() {
            all.extend(self.scope(&scope).await);
        }
        all
    }

    /// The values of a state scope.
    pub async fn scope(&self, scope: &str) -> Vec<Value> {
        let out = self.ok("state::list", json!({"scope": scope})).await;
        out.as_array().cloned().unwrap_or_default()
    }
}

/// A notification worker: binds a trigger type and collects what it receives.
pub struct Sink {
    pub client: IIIClient,
    events: Arc<Mutex<Vec<Value>>>,
}

impl Sink {
    /// Binds `function_id` (registered here) to `trigger_type` with `config`.
    pub async fn bind(
        engine: &EngineFixture,
        name: &str,
        trigger_type: &str,
        config: Value,
    ) -> Sink {
        let client = engine.client(name).await;
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let function_id = format!("{name}::on-event");
        client.register_function(
            function_id.clone(),
            RegisterFunction::new_async(move |payload: Value| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(payload);
                    Ok::<Value, iii_sdk::Error>(json!({"ok": true}))
                }
            }),
        );
        wait_for_functions(&client, &[&function_id]).await;
        #[allow(deprecated)] // the 0.25 binding API; the engine still speaks it
        client
            .register_trigger(RegisterTriggerInput::new(
                trigger_type,
                &function_id,
                config,
            ))
            .expect("binding sent");
        Sink { client, events }
    }

    /// What arrived so far.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// Waits until at least `n` events arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Value> {
        eventually(timeout, || self.events.lock().unwrap().len() >= n).await;
        self.events()
    }
}

impl Scene {
    /// Binds a sink and waits until the worker has registered the binding.
    pub async fn sink(&self, name: &str, trigger_type: &str, config: Value) -> Sink {
        let before = self.live_bindings();
        let sink = Sink::bind(&self.engine, name, trigger_type, config).await;
        assert!(
            eventually(WAIT, || self.live_bindings() > before).await,
            "the worker never received the {trigger_type} binding of {name}"
        );
        sink
    }

    /// Bindings the worker holds for its trigger types.
    pub fn live_bindings(&self) -> usize {
        self.worker
            .as_ref()
            .map(|w| w.event_bindings())
            .unwrap_or(0)
    }

    /// `approval::get-pending` of one call: the whole reply (`null` when
    /// nothing is held under the key).
    pub async fn get_pending(&self, sid: &str, cid: &str) -> Value {
        self.ok(
            "approval::get-pending",
            json!({"session_id": sid, "function_call_id": cid}),
        )
        .await
    }

    /// Makes the call through the harness and fails unless it is held.
    pub async fn hold(&self, spec: CallSpec) {
        let (sid, cid) = (spec.session_id.clone(), spec.call_id.clone());
        let out = self.harness.call(spec).await;
        assert!(out.is_held(), "{sid}/{cid}: {out:?}");
    }

    /// Serves `shell::read` with a shell jailed to `/srv` (so a read under
    /// `/data` asks for a folder) and has the worker allow `shell::*`
    /// (everything else but the gate's own functions holds).
    pub async fn jail_shell_to_srv(&self) {
        self.targets
            .add(
                "shell::read",
                Arc::new(JailShell::new(Dialect::Shell, &["/srv"])),
            )
            .await;
        self.ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": {"rules": ["!approval::*", "shell::*"]}}),
        )
        .await;
        let w = self.worker.as_ref().unwrap();
        assert!(eventually(WAIT, || w.config().rules.len() == 2).await);
    }

    /// Registers the shell's configuration entry (where an `always` folder
    /// grant is persisted) with `initial` as its value.
    pub async fn register_shell_config(&self, initial: Value) {
        self.ok(
            "configuration::register",
            json!({"id": "shell", "name": "shell", "description": "shell",
                   "schema": {"type": "object"}, "initial_value": initial}),
        )
        .await;
    }
}

/// With `AG_IT_TRACE` set (an `EnvFilter` such as `info` or
/// `approval_gate=debug`), the in-process workers' logs are printed through
/// the test harness's capture, so a failing scenario shows them next to its
/// panic. Installed once per test binary; without the variable, nothing.
pub fn trace_in_process_worker() {
    if let Ok(filter) = std::env::var("AG_IT_TRACE") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}
