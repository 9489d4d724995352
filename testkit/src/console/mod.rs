//! `ConsoleDouble`: an SDK worker named `console` that owns the trigger
//! types `console:script` and `console:style`, as today's console worker
//! does (`harness.md` § Console; the console cannot be installed
//! here), and [`host`], the browser side of the console for the browser
//! tests.
//!
//! # What the double does with a registration
//!
//! The config must be `{path}` and nothing else. The path must follow the
//! console's rules for its kind ([`rules::check_path`]). The asset is then
//! fetched through the registration's function, `{path}` →
//! `{content, content_type?}`, in 2 tries of 3 s each (250 ms apart), and
//! must be a string of at most 8 MiB. A registration that fails any of
//! these is refused (the engine tells the registering worker, whose SDK
//! logs it), as the console refuses it. A stylesheet is also read against
//! the scope rules ([`rules::check_style`]): the console only warns about
//! those, so the double accepts the asset and records the findings for the
//! test to assert on.
//!
//! Every registration is recorded in arrival order, accepted or refused;
//! an unregistration (the engine sends one when the registering worker's
//! connection ends) takes the asset out of the live set. The same path
//! registered again replaces the live asset (the console's last writer
//! wins).

pub mod host;
pub mod rules;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{Error, IIIClient, RegisterTriggerType};
use serde_json::{json, Value};

use super::harness::peer;
use rules::AssetKind;

pub const WORKER_NAME: &str = "console";
pub const SCRIPT: &str = "console:script";
pub const STYLE: &str = "console:style";

/// Tries of one fetch at registration.
pub const FETCH_TRIES: u32 = 2;
/// The time each try may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// The pause between tries.
const FETCH_BACKOFF: Duration = Duration::from_millis(250);

/// One registration as the double saw it.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Its place among every registration the double received (from 1).
    pub seq: u64,
    /// The binding id the engine gave it.
    pub id: String,
    /// Script or style.
    pub kind: AssetKind,
    /// The content function.
    pub function_id: String,
    /// The whole trigger config.
    pub config: Value,
    /// `config.path`, when it is a string.
    pub path: Option<String>,
    /// The fetched text, when accepted.
    pub content: Option<String>,
    /// The media type the content function named (or the kind's default).
    pub content_type: Option<String>,
    /// How many fetch tries it took.
    pub tries: u32,
    /// Why it was refused; `None` when accepted.
    pub refused: Option<String>,
    /// A stylesheet's scope findings (the console warns; see the module).
    pub warnings: Vec<String>,
}

impl Registration {
    /// Accepted by the double.
    pub fn accepted(&self) -> bool {
        self.refused.is_none()
    }
}

#[derive(Default)]
struct Core {
    seq: Mutex<u64>,
    log: Mutex<Vec<Registration>>,
    /// Live accepted assets: binding id → the registration's `seq`.
    live: Mutex<BTreeMap<String, u64>>,
    unregistered: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running console double. Cheap to clone; disconnects when the last
/// clone drops.
#[derive(Clone)]
pub struct ConsoleDouble {
    iii: IIIClient,
    core: Arc<Core>,
    _closer: Arc<peer::Closer>,
}

struct AssetType {
    kind: AssetKind,
    iii: IIIClient,
    core: Weak<Core>,
}

#[async_trait]
impl TriggerHandler for AssetType {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        let Some(core) = self.core.upgrade() else {
            return Err(Error::Handler("console stopped".into()));
        };
        let registration = accept(&self.iii, self.kind, &core, config).await;
        let refused = registration.refused.clone();
        let seq = registration.seq;
        let id = registration.id.clone();
        lock(&core.log).push(registration);
        match refused {
            None => {
                lock(&core.live).insert(id, seq);
                Ok(())
            }
            Some(why) => Err(Error::Handler(why)),
        }
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        if let Some(core) = self.core.upgrade() {
            lock(&core.live).remove(&config.id);
            lock(&core.unregistered).push(config.id);
        }
        Ok(())
    }
}

/// Checks and fetches one registration.
async fn accept(
    iii: &IIIClient,
    kind: AssetKind,
    core: &Core,
    config: TriggerConfig,
) -> Registration {
    let seq = {
        let mut seq = lock(&core.seq);
        *seq += 1;
        *seq
    };
    let path = config
        .config
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut registration = Registration {
        seq,
        id: config.id.clone(),
        kind,
        function_id: config.function_id.clone(),
        config: config.config.clone(),
        path: path.clone(),
        content: None,
        content_type: None,
        tries: 0,
        refused: None,
        warnings: Vec::new(),
    };
    let only_path = config.config.as_object().is_some_and(|o| o.len() == 1);
    let checked = match (&path, only_path) {
        (Some(path), true) => rules::check_path(kind, path).map(|()| path.clone()),
        _ => Err(format!(
            "trigger config must be {{path}} and nothing else, got {}",
            config.config
        )),
    };
    let path = match checked {
        Ok(path) => path,
        Err(why) => {
            registration.refused = Some(why);
            return registration;
        }
    };
    let mut last = String::new();
    for attempt in 1..=FETCH_TRIES {
        registration.tries = attempt;
        let request = peer::request(
            &config.function_id,
            json!({ "path": path }),
            None,
            Some(FETCH_TIMEOUT.as_millis() as u64),
            None,
            config.namespace.as_deref(),
        );
        match tokio::time::timeout(FETCH_TIMEOUT, iii.trigger(request)).await {
            Ok(Ok(answer)) => {
                let Some(content) = answer.get("content").and_then(Value::as_str) else {
                    registration.refused = Some(format!(
                        "{} returned no string content for {path}",
                        config.function_id
                    ));
                    return registration;
                };
                if content.len() > rules::MAX_ASSET_BYTES {
                    registration.refused = Some(format!(
                        "{path} is {} bytes, over the {} byte cap",
                        content.len(),
                        rules::MAX_ASSET_BYTES
                    ));
                    return registration;
                }
                if kind == AssetKind::Style {
                    registration.warnings = rules::check_style(content, rules::scope_of(&path));
                }
                registration.content_type = Some(
                    answer
                        .get("content_type")
                        .and_then(Value::as_str)
                        .unwrap_or(kind.default_content_type())
                        .to_string(),
                );
                registration.content = Some(content.to_string());
                return registration;
            }
            Ok(Err(err)) => last = peer::error_text(&err),
            Err(_) => last = format!("no answer in {FETCH_TIMEOUT:?}"),
        }
        if attempt < FETCH_TRIES {
            tokio::time::sleep(FETCH_BACKOFF).await;
        }
    }
    registration.refused = Some(format!(
        "fetching {path} through {} failed {FETCH_TRIES} times: {last}",
        config.function_id
    ));
    registration
}

impl ConsoleDouble {
    /// Connects as `console` and returns once both trigger types are listed
    /// by the engine.
    pub async fn start(url: &str) -> ConsoleDouble {
        let iii = peer::connect(url, WORKER_NAME);
        let core = Arc::new(Core::default());
        for (kind, description) in [
            (
                AssetKind::Script,
                "An ES module injected into the console (test double)",
            ),
            (
                AssetKind::Style,
                "A stylesheet injected into the console (test double)",
            ),
        ] {
            // Provider APIs are deprecated in 0.25 and gone in 0.26; the
            // engine still speaks them and the console provides these types.
            #[allow(deprecated)]
            iii.register_trigger_type(RegisterTriggerType::new(
                kind.trigger_type(),
                description,
                AssetType {
                    kind,
                    iii: iii.clone(),
                    core: Arc::downgrade(&core),
                },
            ));
        }
        let closer = Arc::new(peer::Closer(iii.clone()));
        peer::wait_live(&iii, &[], &[SCRIPT, STYLE]).await;
        ConsoleDouble {
            iii,
            core,
            _closer: closer,
        }
    }

    /// Disconnects (the engine forgets the trigger types; the registrations
    /// wait, parked, for a console to come back).
    pub async fn shutdown(&self) {
        peer::shutdown(&self.iii).await;
    }

    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    /// Every registration received, in order, accepted or refused.
    pub fn registrations(&self) -> Vec<Registration> {
        lock(&self.core.log).clone()
    }

    /// The registrations received after the one numbered `seq`.
    pub fn registrations_after(&self, seq: u64) -> Vec<Registration> {
        lock(&self.core.log)
            .iter()
            .filter(|r| r.seq > seq)
            .cloned()
            .collect()
    }

    /// The number of the last registration received (0 before any).
    pub fn last_seq(&self) -> u64 {
        *lock(&self.core.seq)
    }

    /// Binding ids the engine unregistered, in order.
    pub fn unregistered(&self) -> Vec<String> {
        lock(&self.core.unregistered).clone()
    }

    /// The live accepted asset at `path` (the last registered wins).
    pub fn asset(&self, path: &str) -> Option<Registration> {
        self.live()
            .into_iter()
            .filter(|r| r.path.as_deref() == Some(path))
            .max_by_key(|r| r.seq)
    }

    /// Every live accepted asset, in registration order.
    pub fn live(&self) -> Vec<Registration> {
        let live: Vec<u64> = lock(&self.core.live).values().copied().collect();
        lock(&self.core.log)
            .iter()
            .filter(|r| live.contains(&r.seq))
            .cloned()
            .collect()
    }

    /// Waits until every path in `paths` has an accepted registration
    /// numbered after `seq` that is live; the registrations found, in the
    /// order of `paths`.
    pub async fn wait_for(
        &self,
        paths: &[&str],
        seq: u64,
        timeout: Duration,
    ) -> Option<Vec<Registration>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found: Vec<Registration> = paths
                .iter()
                .filter_map(|p| self.asset(p).filter(|r| r.seq > seq))
                .collect();
            if found.len() == paths.len() {
                return Some(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until no live asset has a path under `scope/`.
    pub async fn wait_gone(&self, scope: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let any = self.live().iter().any(|r| {
                r.path
                    .as_deref()
                    .is_some_and(|p| rules::scope_of(p) == scope)
            });
            if !any {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
