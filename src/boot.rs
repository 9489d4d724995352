//! Boot order (`architecture/contract.md` § Process): connect →
//! configuration (fatal) → held calls → trigger types → functions → bindings
//! → one "ready" line naming what was registered and which bindings are
//! parked. [`Running`] is the handle a booted worker is driven by.
//!
//! Connecting is claiming the worker name (`architecture/contract.md`
//! § Standby and failover): the engine gives one live connection per name
//! and refuses a second one with `registrationrejected {code:
//! WORKER_NAMESPACE_CONFLICT}`, after which the SDK stops for good. An
//! instance started while another is live therefore stands by: it retries
//! with a fresh client every `--standby-retry-ms`, registering nothing,
//! until the name is free.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{register_worker, IIIClient, InitOptions};
use serde_json::Value;

use crate::bindings::durable::{self as durable_bindings, GATE, WATCH};
use crate::bindings::plain_bindings;
use crate::config::{self, ApprovalConfig, BootstrapError, ConfigCell, Snapshot, CONFIG_ID};
use crate::engine::{CallError, Engine};
use crate::function_table::{self, FUNCTION_IDS};
use crate::links::LinkRoutes;
use crate::pending::{PendingRecord, PendingStore};
use crate::provenance::DecisionLog;
use crate::reconnect;
use crate::release::{recover, timer::Timer};
use crate::settings::{ApprovalSettings, Known};
use crate::worker::{Tenure, Worker};

/// The worker's registered name (notification workers find the gate by it).
pub const WORKER_NAME: &str = "approval-gate";
/// What the worker does, as shown by `engine::workers::list`.
pub const DESCRIPTION: &str = "Human-in-the-loop approval gate: decides whether each agent function call runs, is denied, or waits for a human";

/// How to start.
#[derive(Debug, Clone)]
pub struct BootOptions {
    /// Engine WebSocket URL.
    pub url: String,
    /// The `--config` seed (used only when nothing is stored).
    pub seed: Option<Value>,
    /// How long to wait for the engine at start-up.
    pub connect_timeout: Duration,
    /// Whether the SDK opens its OpenTelemetry connection.
    pub otel: bool,
    /// How often a standby tries the worker name again while another
    /// instance holds it (`--standby-retry-ms`).
    pub standby_retry: Duration,
    /// The configuration entry the worker registers and follows
    /// (`III_CONFIG_NAME`; default `approval-gate`; contract §27.2).
    pub config_id: String,
    /// How long a fresh connection waits for a refusal of its worker name
    /// before it trusts the name ([`NAME_CONFIRM_WINDOW`] by default). Not
    /// a flag: a window shorter than the refusal's trip lets a second
    /// instance serve beside the first. Only a program that knows its
    /// engine's refusal delay (the in-process test engine's is a fixed
    /// 60 ms) shortens it.
    pub name_confirm: Duration,
    /// How old a held call's record must be before a reconcile may remove
    /// it, and how long after a first `null` from `harness::status` the
    /// session is read again (§27.4): twice the timeout the harness gives
    /// the gate's hook, so a call the harness is still parking is never
    /// taken for one it dropped ([`RECONCILE_AGE`] by default, for the 5 s
    /// the gate binds its hook with). Not a flag: only a program whose
    /// harness cuts hooks shorter (a test's harness double) shortens it,
    /// keeping the factor of two.
    pub reconcile_age: Duration,
}

impl BootOptions {
    /// The options of `approval-gate --url <url>` with every flag at its
    /// default: no seed, a 30 s connect timeout, OpenTelemetry on, a standby
    /// retry every second, the entry `approval-gate`, the 1 s name
    /// confirmation (the environment is not read: the binary sets
    /// `config_id` from `III_CONFIG_NAME`), the 10 s reconcile age.
    pub fn new(url: impl Into<String>) -> BootOptions {
        BootOptions {
            url: url.into(),
            seed: None,
            connect_timeout: Duration::from_secs(30),
            otel: true,
            standby_retry: DEFAULT_STANDBY_RETRY,
            config_id: CONFIG_ID.to_string(),
            name_confirm: NAME_CONFIRM_WINDOW,
            reconcile_age: RECONCILE_AGE,
        }
    }
}

/// The default of [`BootOptions::reconcile_age`]: twice the 5 s the gate's
/// hook binding gives the harness (§27.4).
pub const RECONCILE_AGE: Duration =
    Duration::from_millis(2 * crate::bindings::durable::HOOK_TIMEOUT_MS);

/// `--standby-retry-ms` default.
pub const DEFAULT_STANDBY_RETRY: Duration = Duration::from_millis(1000);

/// How long a fresh connection waits after the engine's greeting for a
/// refusal of its worker name before it is trusted. The engine decides at
/// once, but its `registrationrejected` frame reaches the client after the
/// greeting (7–99 ms later on loopback, engine 0.23), and the SDK's
/// `wait_until_registered` returns `Ok` on the greeting alone. Ten times the
/// slowest refusal measured; it is also the least a boot takes. The default
/// of [`BootOptions::name_confirm`].
pub const NAME_CONFIRM_WINDOW: Duration = Duration::from_millis(1000);

/// The share of the confirmation window (one fifth: 200 ms of the default
/// 1 s) after which a refusal is no longer expected: from then on the held
/// calls are read (reads only) while the rest of the window passes, so a
/// large inbox costs a failover less. A standby refused within this part
/// reads nothing.
fn early_refusal(window: Duration) -> Duration {
    window / 5
}

/// How often a standby logs that it still stands by (each retry is DEBUG).
const STANDBY_NOTICE_EVERY: Duration = Duration::from_secs(60);

/// Set while this process stands by (see [`standing_by`]).
static STANDING_BY: AtomicBool = AtomicBool::new(false);

/// Whether this process is standing by now: another instance holds the
/// worker name and this one retries. The binary's log filter drops the
/// SDK's own lines (`iii connected`, `worker registration rejected`) while
/// it is, so a standby logs one line when it starts waiting and one a
/// minute after that, not two per retry.
pub fn standing_by() -> bool {
    STANDING_BY.load(Ordering::Relaxed)
}

/// Why boot stopped.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The engine did not answer in time.
    #[error("cannot reach the iii engine at {url} within {secs} s (is it running? set --url or III_URL; --connect-timeout sets the wait)")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// The wait, in seconds.
        secs: u64,
    },
    /// The engine refused the worker for a reason standing by cannot cure
    /// (a conflict over the worker name is waited out, never reported).
    #[error("the engine refused the worker: {0}")]
    Rejected(#[source] iii_sdk::Error),
    /// The pending store could not be read.
    #[error("the pending store (state scopes approval_pending.*) cannot be read: {0}")]
    State(#[source] CallError),
    /// The configuration entry could not be registered or read.
    #[error("configuration entry {id}: {source}")]
    Configuration {
        /// The entry.
        id: String,
        /// Why.
        source: BootstrapError,
    },
    /// `III_CONFIG_NAME` does not name a configuration entry the engine
    /// takes.
    #[error(transparent)]
    ConfigName(#[from] config::BadConfigName),
    /// The functions did not become live in time.
    #[error("functions not live after {secs} s: {}", missing.join(", "))]
    NotLive {
        /// The wait, in seconds.
        secs: u64,
        /// The ids still missing.
        missing: Vec<String>,
    },
    /// A call the command needed failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// A running worker: the SDK connection, the shared state and the deadline
/// timer (stopped when this is dropped).
pub struct Running {
    iii: IIIClient,
    worker: Arc<Worker>,
    timer: Timer,
    /// Closes the decision log's own connection when the worker goes.
    log: LogConnection,
}

/// The decision log's connection, closed when dropped (a client left open
/// would reconnect for as long as the process lives).
struct LogConnection(Arc<DecisionLog>);

impl Drop for LogConnection {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The decision log's own connection: `<worker name>-decision-log`, with an
/// explicit identity (the process's `III_WORKER_NAME` names the worker's
/// main connection, and two connections of one name are refused). Nothing
/// is registered on it; it only sends.
fn decision_log_client(url: &str, otel: bool) -> IIIClient {
    let name = std::env::var("III_WORKER_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| WORKER_NAME.to_string());
    let namespace = std::env::var("III_NAMESPACE")
        .ok()
        .filter(|ns| !ns.is_empty());
    let metadata = WorkerMetadata {
        name: format!("{name}-decision-log"),
        version: env!("CARGO_PKG_VERSION").to_string(),
        description: Some(
            "approval-gate's decision log: sends one record per verdict and per removal"
                .to_string(),
        ),
        namespace: namespace.clone(),
        ..WorkerMetadata::default()
    };
    register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            otel: Some(iii_helpers::observability::OtelConfig {
                enabled: Some(otel),
                ..Default::default()
            }),
            namespace,
            identity: iii_sdk::WorkerIdentityMode::Explicit,
            ..InitOptions::default()
        },
    )
}

impl Running {
    /// Graceful stop: the deadline timer takes no more records, then wait
    /// (bounded) for handlers and expiries in flight, then disconnect.
    pub async fn shutdown(self, drain: Duration) {
        let deadline = tokio::time::Instant::now() + drain;
        self.timer.stop(drain).await;
        while self.worker.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.iii.shutdown_async().await;
        self.log.0.close();
    }

    /// The SDK client the worker is connected with.
    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    /// The configuration in effect (the last good value read; the built-in
    /// defaults in lockdown).
    pub fn config(&self) -> ApprovalConfig {
        self.worker.config.load().config.clone()
    }

    /// Whether the gate runs in lockdown: no configuration whose rules
    /// compile is known (`architecture/contract.md` § No fail-open left).
    pub fn lockdown(&self) -> bool {
        self.worker.config.load().lockdown
    }

    /// How many calls are held.
    pub fn held(&self) -> usize {
        self.worker.pending.len()
    }

    /// One held call, as the inbox shows it.
    pub fn held_call(&self, session_id: &str, function_call_id: &str) -> Option<PendingRecord> {
        self.worker
            .pending
            .get(session_id, function_call_id)
            .map(|record| (*record).clone())
    }

    /// The stored settings the gate decides a session with, when the worker
    /// holds them in memory (a session it has seen since boot).
    pub fn stored_settings(&self, session_id: &str) -> Option<ApprovalSettings> {
        match self.worker.settings.cached(session_id)? {
            Known::Stored(stored) => Some(stored.settings.clone()),
            Known::Absent => None,
        }
    }

    /// How many bindings of the worker's trigger types it serves.
    pub fn event_bindings(&self) -> usize {
        self.worker.pending.events().len()
    }

    /// Whether this instance stood by before it booted (another live
    /// instance held the worker name at its first attempt).
    pub fn was_standby(&self) -> bool {
        self.worker.tenure.stood_by.is_some()
    }

    /// Resolves when the SDK has stopped for good: the engine refused the
    /// worker, which after boot means a reconnect found the worker name
    /// taken (a standby claimed it while this instance's connection was
    /// down). The SDK never reconnects after that, so nothing this instance
    /// registered will serve again; the binary exits non-zero on it.
    pub async fn stopped(&self) -> iii_sdk::Error {
        fatal_error(&self.iii, FATAL_POLL).await
    }
}

/// How often [`Running::stopped`] looks at the SDK's fatal error.
const FATAL_POLL: Duration = Duration::from_millis(100);

/// How long a failed boot waits for the SDK to record a refusal of the
/// worker name that failed its calls.
const REFUSAL_GRACE: Duration = Duration::from_millis(500);

/// How often boot looks at the SDK's fatal error while it starts.
const FATAL_POLL_AT_BOOT: Duration = Duration::from_millis(20);

/// Resolves with the SDK's fatal error once it has one, looked at `every`
/// (the SDK offers no event).
async fn fatal_error(iii: &IIIClient, every: Duration) -> iii_sdk::Error {
    loop {
        if let Some(err) = iii.fatal_error() {
            return err;
        }
        tokio::time::sleep(every).await;
    }
}

/// Connects an SDK client named `approval-gate` (or `III_WORKER_NAME`) and
/// waits for the engine's handshake. Nothing is registered on it.
pub(crate) async fn connect(
    url: &str,
    otel: bool,
    timeout: Duration,
) -> Result<IIIClient, BootError> {
    let iii = new_client(url, otel);
    match handshake(&iii, url, timeout).await {
        Ok(()) => Ok(iii),
        Err(err) => {
            iii.shutdown_async().await;
            Err(err)
        }
    }
}

/// A new SDK client for the worker, connecting in the background.
fn new_client(url: &str, otel: bool) -> IIIClient {
    let metadata = WorkerMetadata {
        name: WORKER_NAME.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        description: Some(DESCRIPTION.to_string()),
        ..WorkerMetadata::default()
    };
    let otel_config = iii_helpers::observability::OtelConfig {
        enabled: Some(otel),
        ..Default::default()
    };
    register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            otel: Some(otel_config),
            ..InitOptions::default()
        },
    )
}

/// Waits for the engine's greeting (`workerregistered`).
async fn handshake(iii: &IIIClient, url: &str, timeout: Duration) -> Result<(), BootError> {
    match iii.wait_until_registered(timeout).await {
        Ok(()) => Ok(()),
        Err(iii_sdk::Error::Timeout) | Err(iii_sdk::Error::NotConnected) => {
            Err(BootError::Unreachable {
                url: url.to_string(),
                secs: timeout.as_secs(),
            })
        }
        Err(other) => Err(BootError::Rejected(other)),
    }
}

/// What one attempt at the worker name found.
enum Attempt {
    /// The name is this connection's; the held calls were read meanwhile.
    Held(Box<Claimed>),
    /// Another live instance holds it; the connection is closed.
    Taken {
        /// The holder's worker id, as the engine named it.
        owner_worker_id: String,
    },
    /// The connection closed before the name was confirmed (most likely a
    /// refusal whose frame was lost); the client is shut down.
    Dropped,
}

/// The SDK's error for a refused worker name, if `err` is one.
fn name_taken(err: &iii_sdk::Error) -> Option<String> {
    match err {
        iii_sdk::Error::RegistrationRejected {
            code,
            owner_worker_id,
            ..
        } if code == "WORKER_NAMESPACE_CONFLICT" => Some(owner_worker_id.clone()),
        _ => None,
    }
}

/// What a stretch of the confirmation window brought.
enum Confirmation {
    /// Nothing: the connection is still up and unrefused.
    Quiet,
    /// The SDK's fatal error (a refused name, or another refusal).
    Refused(iii_sdk::Error),
    /// The connection closed without a refusal reaching the SDK: the engine
    /// closes a refused connection right after its refusal frame, and a
    /// write under way meanwhile (the held calls' read) fails first, so the
    /// SDK reconnects without having read it. The name is not confirmed.
    Dropped,
}

/// Watches `iii` for `window` (polled): a refusal, or the connection
/// closing.
async fn refusal_within(iii: &IIIClient, window: Duration) -> Confirmation {
    let deadline = tokio::time::Instant::now() + window;
    loop {
        if let Some(err) = iii.fatal_error() {
            return Confirmation::Refused(err);
        }
        if iii.get_connection_state() != IIIConnectionState::Connected {
            return Confirmation::Dropped;
        }
        if tokio::time::Instant::now() >= deadline {
            return Confirmation::Quiet;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One attempt: a fresh client, its handshake, then the confirmation
/// `window` without a refusal. Nothing is registered on the client and
/// nothing is written before the name is known to be its own, so a refused
/// attempt leaves no trace; after [`early_refusal`] the held calls are read.
async fn try_claim(
    url: &str,
    otel: bool,
    timeout: Duration,
    window: Duration,
    config_id: &str,
) -> Result<Attempt, BootError> {
    let iii = new_client(url, otel);
    let early = match handshake(&iii, url, timeout).await {
        Ok(()) => refusal_within(&iii, early_refusal(window)).await,
        Err(BootError::Rejected(err)) => Confirmation::Refused(err),
        Err(other) => {
            iii.shutdown_async().await;
            return Err(other);
        }
    };
    match early {
        Confirmation::Quiet => {}
        Confirmation::Refused(err) => return refused(iii, err).await,
        Confirmation::Dropped => return dropped(iii).await,
    }
    // Nothing is announced before boot stores the real configuration.
    let config = Arc::new(ConfigCell::named(
        config_id,
        Snapshot::compile(ApprovalConfig::default()),
    ));
    let pending = Arc::new(PendingStore::new(Engine::new(iii.clone()), config.clone()));
    let (late, read) = tokio::join!(
        refusal_within(&iii, window.saturating_sub(early_refusal(window))),
        pending.read_buckets()
    );
    match late {
        Confirmation::Refused(err) => refused(iii, err).await,
        Confirmation::Dropped => dropped(iii).await,
        Confirmation::Quiet => Ok(Attempt::Held(Box::new(Claimed {
            iii,
            tenure: Tenure::default(),
            config,
            pending,
            read,
        }))),
    }
}

/// Closes an attempt whose connection closed inside the window (see
/// [`Confirmation::Dropped`]): it is tried again like a refused one.
async fn dropped(iii: IIIClient) -> Result<Attempt, BootError> {
    iii.shutdown_async().await;
    Ok(Attempt::Dropped)
}

/// Closes a refused attempt's client: a refused name is
/// [`Attempt::Taken`], any other refusal ends boot.
async fn refused(iii: IIIClient, err: iii_sdk::Error) -> Result<Attempt, BootError> {
    iii.shutdown_async().await;
    match name_taken(&err) {
        Some(owner_worker_id) => Ok(Attempt::Taken { owner_worker_id }),
        None => Err(BootError::Rejected(err)),
    }
}

/// Claims the worker name, standing by while another live instance holds
/// it: every `retry`, a fresh client tries again (the SDK never retries a
/// refused name itself). Logs once when it starts standing by, then every
/// [`STANDBY_NOTICE_EVERY`]; each retry at DEBUG. `stood_by_since`: when a
/// refusal after an earlier attempt's window made this instance stand by.
pub(crate) async fn claim_name(
    url: &str,
    otel: bool,
    timeout: Duration,
    retry: Duration,
    window: Duration,
    config_id: &str,
    stood_by_since: Option<Instant>,
) -> Result<Claimed, BootError> {
    let started = stood_by_since.unwrap_or_else(Instant::now);
    let mut refusals: u64 = u64::from(stood_by_since.is_some());
    let mut noticed = Instant::now();
    loop {
        match try_claim(url, otel, timeout, window, config_id).await? {
            Attempt::Held(mut claimed) => {
                STANDING_BY.store(false, Ordering::Relaxed);
                let stood_by = (refusals > 0).then(|| started.elapsed());
                if let Some(waited) = stood_by {
                    tracing::info!(
                        waited_ms = waited.as_millis() as u64,
                        refusals,
                        "the worker name is free: taking over from the previous instance"
                    );
                }
                claimed.tenure = Tenure { stood_by };
                return Ok(*claimed);
            }
            Attempt::Taken { owner_worker_id } => {
                refusals += 1;
                STANDING_BY.store(true, Ordering::Relaxed);
                if refusals == 1 {
                    noticed = Instant::now();
                    tracing::info!(
                        worker_name = WORKER_NAME,
                        %owner_worker_id,
                        retry_ms = retry.as_millis() as u64,
                        "standing by: another live instance holds the worker name; this one registers nothing and takes over when the name is free"
                    );
                } else if noticed.elapsed() >= STANDBY_NOTICE_EVERY {
                    noticed = Instant::now();
                    tracing::info!(
                        %owner_worker_id,
                        waited_s = started.elapsed().as_secs(),
                        refusals,
                        "still standing by"
                    );
                } else {
                    tracing::debug!(%owner_worker_id, refusals, "worker name still held");
                }
                tokio::time::sleep(retry).await;
            }
            Attempt::Dropped => {
                // Counted as a refusal: the name was not this instance's
                // at this attempt.
                refusals += 1;
                tracing::debug!(
                    refusals,
                    "the connection closed while the worker name was confirmed; trying again"
                );
                tokio::time::sleep(retry).await;
            }
        }
    }
}

/// A connection that holds the worker name, and the held calls read into
/// `pending` while the name was confirmed (`read`: how many, or why not).
pub(crate) struct Claimed {
    iii: IIIClient,
    tenure: Tenure,
    /// The configuration cell the inbox announces with; it holds the
    /// defaults until boot has read the stored configuration.
    config: Arc<ConfigCell>,
    pending: Arc<PendingStore>,
    read: Result<usize, CallError>,
}

/// Boots the worker: claim the name (standing by while another instance
/// holds it), configuration, held calls, functions, bindings, ready.
pub async fn boot(options: BootOptions) -> Result<Running, BootError> {
    config::check_config_id(&options.config_id)?;
    let (options_url, options_otel) = (options.url.clone(), options.otel);
    // Set when a refusal came after the window: this instance stands by.
    let mut stood_by_since: Option<Instant> = None;
    let (iii, started) = loop {
        let claimed = claim_name(
            &options.url,
            options.otel,
            options.connect_timeout,
            options.standby_retry,
            options.name_confirm,
            &options.config_id,
            stood_by_since,
        )
        .await?;
        let iii = claimed.iii.clone();
        // A refusal can still come after the window (a slow engine or
        // machine): the SDK then stops for good, and every call of the rest
        // of boot would wait out its timeout. Boot stops at once instead;
        // nothing it made is served (its client is shut down, and nothing is
        // spawned before boot's last step), and it stands by again.
        let started = tokio::select! {
            started = start(claimed, options.clone()) => started,
            err = fatal_error(&iii, FATAL_POLL_AT_BOOT) => Err(BootError::Rejected(err)),
        };
        // The SDK fails the calls under way with the refusal too, and can
        // do so a moment before it records its fatal error: any error of
        // boot is looked at with the SDK's fatal error, waited for briefly.
        let refusal = match &started {
            Ok(_) => None,
            Err(_) => tokio::time::timeout(REFUSAL_GRACE, fatal_error(&iii, FATAL_POLL_AT_BOOT))
                .await
                .ok()
                .filter(|err| name_taken(err).is_some()),
        };
        match refusal {
            Some(err) => {
                iii.shutdown_async().await;
                STANDING_BY.store(true, Ordering::Relaxed);
                stood_by_since.get_or_insert_with(Instant::now);
                tracing::warn!(
                    error = %err,
                    window_ms = options.name_confirm.as_millis() as u64,
                    "the engine refused the worker name after the confirmation window; standing by again"
                );
                tokio::time::sleep(options.standby_retry).await;
            }
            None => break (iii, started),
        }
    };
    match started {
        // After the ready line: holds whose deadline passed while the
        // worker was down are acted on at once.
        Ok(worker) => {
            // The held-calls gauge reads this worker (set once per process,
            // so only by a boot that started).
            let inbox = Arc::downgrade(&worker);
            crate::metrics::count_held(Box::new(move || {
                inbox.upgrade().map(|w| w.pending.len() as u64)
            }));
            // Releases under way when the worker stopped are settled from
            // what the harness says, off the ready path.
            tokio::spawn(recover::at_boot(worker.releaser.clone()));
            tokio::spawn(recover::orphans(worker.releaser.clone()));
            tokio::spawn(crate::folders::revokes::run(worker.folders.clone()));
            // The decision log's sender: the gate and the store only queue.
            let (url, otel) = (options_url.clone(), options_otel);
            tokio::spawn(worker.pending.decision_log().clone().run(Box::new(move || {
                Engine::new(decision_log_client(&url, otel))
            })));
            // Records of calls today's harness no longer holds (one pass
            // with the `harness::ready` the new binding receives at once).
            crate::lifecycle::request_reconcile(&worker);
            Ok(Running {
                timer: Timer::start(worker.releaser.clone()),
                log: LogConnection(worker.pending.decision_log().clone()),
                iii,
                worker,
            })
        }
        Err(err) => {
            iii.shutdown_async().await;
            Err(err)
        }
    }
}

/// Everything after the handshake.
async fn start(claimed: Claimed, options: BootOptions) -> Result<Arc<Worker>, BootError> {
    let Claimed {
        iii,
        tenure,
        config,
        pending,
        read,
    } = claimed;
    let iii = &iii;
    let engine = Engine::new(iii.clone());
    config::bootstrap(&engine, &config, options.seed)
        .await
        .map_err(|source| BootError::Configuration {
            id: config.id().to_string(),
            source,
        })?;
    let worker = Worker::new(
        engine.clone(),
        config,
        tenure,
        pending,
        options.reconcile_age,
    );
    let read = read
        .map_err(|err| tracing::warn!(error = %err, "held calls not read while the name was confirmed; reading again"))
        .ok();
    let held = load_pending(&worker, read).await?;
    match worker.edits.load().await {
        Ok(0) => {}
        Ok(sessions) => tracing::info!(sessions, "sessions with edit grants"),
        Err(err) => {
            tracing::warn!(error = %err, "edit grants not listed; every hold looks them up")
        }
    }
    match worker.folders.revokes.load().await {
        Ok(0) => {}
        Ok(kept) => tracing::info!(kept, "folder grants still to take back; retrying"),
        Err(err) => {
            tracing::warn!(error = %err, "folder grants to take back not read; they are retried after the next boot")
        }
    }
    match worker.folders.memory.migrate().await {
        Ok(0) => {}
        Ok(moved) => tracing::info!(
            moved,
            "grant-watch ask counters moved to the per-session layout"
        ),
        Err(err) => {
            tracing::warn!(error = %err, "grant-watch ask counters of the first layout not moved; tried again at the next boot")
        }
    }

    worker.pending.events().register(iii);
    function_table::register_all(&worker);
    let parked = bind_all(&worker).await;
    crate::console::offer(&worker);
    // Subscribed before the routes' first sync and the binding's first
    // check, so a configuration change from here on reaches both.
    let config_changes = worker.config.subscribe();
    let link_routes = LinkRoutes::default();
    link_routes.sync(&worker).await;
    // The gate's binding first, then the watch's.
    let binding = worker
        .gate_binding
        .ensure(&engine, &worker.config.load().config)
        .await;
    let watch_binding = worker
        .watch_binding
        .ensure(&engine, &worker.config.load().config)
        .await;

    wait_until_live(&engine, FUNCTION_IDS, Duration::from_secs(15)).await?;
    if let Some(err) = iii.fatal_error() {
        return Err(BootError::Rejected(err));
    }
    let gated = binding.as_ref().is_ok_and(|status| status.gated);
    if let Err(err) = &binding {
        tracing::error!(error = %err, "durable gate binding not made: calls are not gated until it is; retrying");
    }
    if let Err(err) = &watch_binding {
        tracing::error!(error = %err, "durable watch binding not made: today's harness enforces no session root until it is; retrying");
    }
    tracing::info!(
        url = %options.url,
        functions = FUNCTION_IDS.len(),
        held,
        parked = ?parked,
        gated,
        started_as = tenure.started_as(),
        stood_by_ms = tenure.stood_by.map(|d| d.as_millis() as u64),
        "approval-gate ready"
    );
    tokio::spawn(crate::gate::guard_binding(
        worker.clone(),
        |w| &w.gate_binding,
        binding,
        config_changes.clone(),
    ));
    tokio::spawn(crate::gate::guard_binding(
        worker.clone(),
        |w| &w.watch_binding,
        watch_binding,
        config_changes.clone(),
    ));
    tokio::spawn(link_routes.follow(worker.clone(), config_changes));
    tokio::spawn(rebind_on_reconnect(worker.clone(), options.url.clone()));
    Ok(worker)
}

/// Completes the pending index: the legacy scope's records moved when the
/// buckets were `read` already, else the whole load. Retried briefly; a
/// store that cannot be read aborts boot (an empty inbox would hide held
/// calls).
async fn load_pending(worker: &Worker, read: Option<usize>) -> Result<usize, BootError> {
    let mut attempt = 0u64;
    loop {
        let loaded = match read {
            Some(_) => worker
                .pending
                .migrate_legacy()
                .await
                .map(|_| worker.pending.len()),
            None => worker.pending.load().await,
        };
        match loaded {
            Ok(n) => return Ok(n),
            Err(err) if attempt < 4 => {
                tracing::warn!(attempt, error = %err, "pending records not loaded; retrying");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
            }
            Err(err) => return Err(BootError::State(err)),
        }
    }
}

/// How often the connection state is looked at (the SDK offers no event).
const RECONNECT_POLL: Duration = Duration::from_millis(20);

/// After the SDK reconnects (an engine restart), what the SDK does not replay
/// is made again, the durable bindings first: the gate's, then the watch's —
/// a harness that reconnected first runs calls with an empty pre-trigger
/// chain until the gate's binding exists — then the configuration entry's
/// schema (an engine restarted from its store keeps values but not schemas)
/// and a fresh read of the policy. A reconnect is noticed by polling the
/// connection state every [`RECONNECT_POLL`], and by the engine sending again
/// a binding of the worker's trigger types (which it does after one), so a
/// short outage is not missed.
///
/// That work runs in a task of its own, so this loop keeps watching while it
/// runs: when the connection goes again meanwhile, the work is ended (its
/// calls went over the lost connection and would be answered only when they
/// time out, 10 s) and the next reconnect starts it afresh (§26.6).
///
/// While the connection is down, [`reconnect::cover_outages`] knocks on
/// the engine's port and, once it answers, makes the durable bindings again
/// through an auxiliary connection without waiting for the SDK's next
/// attempt (§21.8; off with `APPROVAL_GATE_RECONNECT=before_21_8`).
async fn rebind_on_reconnect(worker: Arc<Worker>, url: String) {
    if !reconnect::disabled() {
        let name = std::env::var("III_WORKER_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| WORKER_NAME.to_string());
        tokio::spawn(reconnect::cover_outages(worker.clone(), url, name));
    }
    let mut was_connected = true;
    let mut work: Option<tokio::task::JoinHandle<()>> = None;
    // A re-sent binding while the work runs: run it once more after.
    let mut again = false;
    loop {
        let resent = tokio::select! {
            () = tokio::time::sleep(RECONNECT_POLL) => false,
            () = worker.pending.events().resent() => true,
        };
        let iii = worker.engine.iii();
        let connected = iii.get_connection_state() == IIIConnectionState::Connected;
        let running = work.as_ref().is_some_and(|w| !w.is_finished());
        let start = if connected && !was_connected {
            // A new connection: whatever ran for the last one is moot.
            if let Some(stale) = work.take() {
                stale.abort();
            }
            true
        } else if connected && (resent || again) {
            // The engine re-sent a binding of the worker's types (it does
            // after a reconnect, also one too short for the poll to see).
            again = running;
            !running
        } else {
            false
        };
        if start {
            again = false;
            let worker = worker.clone();
            work = Some(tokio::spawn(async move { after_reconnect(&worker).await }));
        }
        if !connected {
            if let Some(stale) = work.take() {
                stale.abort();
            }
            if iii.fatal_error().is_some() {
                return;
            }
        }
        was_connected = connected;
    }
}

/// The work [`rebind_on_reconnect`] does once the link is back.
async fn after_reconnect(worker: &Worker) {
    for durable in [&worker.gate_binding, &worker.watch_binding] {
        durable.new_connection();
        let config = worker.config.load();
        match durable.ensure(&worker.engine, &config.config).await {
            Ok(status) => tracing::info!(
                function_id = durable.spec().function_id,
                gated = status.gated,
                "reconnected; durable binding checked"
            ),
            Err(err) => {
                tracing::error!(function_id = durable.spec().function_id, error = %err, "reconnected; durable binding not checked; retrying")
            }
        }
        durable.check_soon();
    }
    worker.folders.forget_generation();
    if let Err(err) = config::reregister_schema(&worker.engine, worker.config.id()).await {
        tracing::warn!(error = %err, "reconnected; configuration schema not registered again");
    }
    if let Err(err) = config::reload(&worker.engine, &worker.config).await {
        tracing::error!(error = %err, "reconnected; configuration not re-read, keeping the last good one");
    }
}

/// Makes the ordinary start-up bindings; returns the trigger types that were
/// absent (their bindings are parked by the engine until a provider appears).
/// The durable bindings are made by `DurableBinding::ensure`.
async fn bind_all(worker: &Arc<Worker>) -> Vec<String> {
    let present = worker.engine.trigger_type_ids().await.unwrap_or_default();
    let mut parked = Vec::new();
    for spec in [GATE, WATCH] {
        if !present.iter().any(|t| t == spec.trigger_type) {
            tracing::warn!(
                trigger_type = spec.trigger_type,
                function_id = spec.function_id,
                "trigger_type_not_found: durable binding parked until the harness registers the type"
            );
            parked.push(spec.trigger_type.to_string());
        }
    }
    for (trigger_type, function_id, config) in plain_bindings(worker.config.id()) {
        if !present.iter().any(|t| t == trigger_type) {
            tracing::warn!(
                trigger_type,
                function_id,
                "trigger_type_not_found: binding parked until a provider registers the type"
            );
            parked.push(trigger_type.to_string());
        }
        #[allow(deprecated)] // 0.26 removed register_trigger; the engine still speaks it.
        let bound = worker
            .engine
            .iii()
            .register_trigger(RegisterTriggerInput::new(trigger_type, function_id, config));
        if let Err(err) = bound {
            tracing::warn!(trigger_type, function_id, error = %err, "binding failed");
        }
    }
    parked
}

/// Polls `engine::functions::list` until every id is live.
async fn wait_until_live(
    engine: &Engine,
    ids: &[&str],
    timeout: Duration,
) -> Result<(), BootError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Both families: `approval::*` and `approval-gate::*`.
        let live = engine.function_ids("approval").await.unwrap_or_default();
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !live.iter().any(|l| l == *id))
            .map(|id| id.to_string())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(BootError::NotLive {
                secs: timeout.as_secs(),
                missing,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `approval-gate unbind`: removes the worker's durable bindings, the gate's
/// and the watch's (the only way to uninstall the gate without denying every
/// call); returns how many.
pub async fn unbind(url: &str, otel: bool, timeout: Duration) -> Result<usize, BootError> {
    let iii = connect(url, otel, timeout).await?;
    let result = durable_bindings::remove_all(&Engine::new(iii.clone())).await;
    iii.shutdown_async().await;
    Ok(result?)
}
