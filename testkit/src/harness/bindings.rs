//! The harness as trigger-type provider: every binding it accepted, keyed by
//! binding id (an unregister carries nothing else).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{Error, IIIClient};
use serde_json::json;

use super::chain::ChainKey;
use super::config::{parse_ready, HookConfig, HookPoint, TurnFilter};
use super::model::BindingInfo;
use super::peer;

pub const TURN_COMPLETED: &str = "harness::turn-completed";
pub const TURN_STARTED: &str = "harness::turn-started";
/// Generation 2 only: fired when the harness has booted.
pub const READY: &str = "harness::ready";

/// Every trigger type the harness provides, with its description.
pub const TRIGGER_TYPES: [(&str, &str); 7] = [
    (
        "harness::hook::pre-trigger",
        "Hook run before a function call is dispatched",
    ),
    (
        "harness::hook::post-trigger",
        "Hook run after a function call returned",
    ),
    ("harness::hook::pre-turn", "Hook run before a turn starts"),
    (
        "harness::hook::pre-generate",
        "Hook run before a model generation",
    ),
    (
        "harness::hook::post-generate",
        "Hook run after a model generation",
    ),
    (
        TURN_COMPLETED,
        "A turn ended: completed, cancelled or failed",
    ),
    (TURN_STARTED, "A turn started"),
];

#[derive(Debug, Clone)]
pub enum BindingKind {
    Hook(HookPoint, HookConfig),
    Turn(TurnFilter),
    Ready,
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub info: BindingInfo,
    pub kind: BindingKind,
}

/// The accepted bindings. The lock is never held across an `.await`: every
/// method copies what it needs out.
#[derive(Debug, Default)]
pub struct BindingTable {
    bindings: Mutex<BTreeMap<String, Binding>>,
    /// When each `(trigger type, function id)` was first bound on this
    /// connection (a restart-window bench reads it).
    first_bound: Mutex<BTreeMap<(String, String), std::time::Instant>>,
}

impl BindingTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Binding>> {
        self.bindings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hooks of `point` that run for `function_id`, in chain order;
    /// with `after`, only those sorting after that key (the rest of a chain
    /// a hold interrupted).
    pub fn hook_chain(
        &self,
        point: HookPoint,
        function_id: &str,
        after: Option<&ChainKey>,
    ) -> Vec<(ChainKey, BindingInfo, HookConfig)> {
        let mut chain: Vec<_> = self
            .lock()
            .values()
            .filter_map(|b| match &b.kind {
                BindingKind::Hook(p, config) if *p == point && config.matches(function_id) => {
                    let key = ChainKey {
                        priority: config.priority,
                        function_id: b.info.function_id.clone(),
                        binding_id: b.info.id.clone(),
                    };
                    Some((key, b.info.clone(), config.clone()))
                }
                _ => None,
            })
            .filter(|(key, _, _)| after.is_none_or(|a| key > a))
            .collect();
        chain.sort_by(|a, b| a.0.cmp(&b.0));
        chain
    }

    /// The turn lifecycle bindings of `trigger_type` whose filter matches.
    pub fn turn_bindings(
        &self,
        trigger_type: &str,
        session_id: &str,
        parent_session_id: Option<&str>,
    ) -> Vec<BindingInfo> {
        self.lock()
            .values()
            .filter(|b| b.info.trigger_type == trigger_type)
            .filter(|b| match &b.kind {
                BindingKind::Turn(filter) => filter.matches(session_id, parent_session_id),
                BindingKind::Hook(..) | BindingKind::Ready => false,
            })
            .map(|b| b.info.clone())
            .collect()
    }

    /// The bindings of `trigger_type`; hook points in chain order, others by id.
    pub fn infos(&self, trigger_type: &str) -> Vec<BindingInfo> {
        let mut out: Vec<_> = self
            .lock()
            .values()
            .filter(|b| b.info.trigger_type == trigger_type)
            .map(|b| {
                let key = match &b.kind {
                    BindingKind::Hook(_, c) => (c.priority, b.info.function_id.clone()),
                    BindingKind::Turn(_) | BindingKind::Ready => (0, String::new()),
                };
                (key, b.info.clone())
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1.id).cmp(&(&b.0, &b.1.id)));
        out.into_iter().map(|(_, info)| info).collect()
    }

    /// Whether a post-trigger binding of exactly `hook_function_id` runs for
    /// calls of `target` (how today's harness detects the watch).
    pub fn post_hook_matches(&self, hook_function_id: &str, target: &str) -> bool {
        self.lock().values().any(|b| match &b.kind {
            BindingKind::Hook(HookPoint::PostTrigger, config) => {
                b.info.function_id == hook_function_id && config.matches(target)
            }
            _ => false,
        })
    }

    /// The `harness::ready` bindings.
    pub fn ready_bindings(&self) -> Vec<BindingInfo> {
        self.lock()
            .values()
            .filter(|b| matches!(b.kind, BindingKind::Ready))
            .map(|b| b.info.clone())
            .collect()
    }

    fn insert(&self, binding: Binding) {
        let key = (
            binding.info.trigger_type.clone(),
            binding.info.function_id.clone(),
        );
        self.first_bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert_with(std::time::Instant::now);
        self.lock().insert(binding.info.id.clone(), binding);
    }

    /// When `function_id` was first bound to `trigger_type` here.
    pub fn first_bound(&self, trigger_type: &str, function_id: &str) -> Option<std::time::Instant> {
        self.first_bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(trigger_type.to_string(), function_id.to_string()))
            .copied()
    }

    fn remove(&self, trigger_type: &str, id: &str) {
        let mut bindings = self.lock();
        if bindings
            .get(id)
            .is_some_and(|b| b.info.trigger_type == trigger_type)
        {
            bindings.remove(id);
        }
    }
}

/// The provider side of one trigger type. Registration is idempotent (the
/// engine re-sends live bindings after a reconnect): a known id is replaced.
pub struct TypeHandler {
    pub trigger_type: &'static str,
    pub table: Arc<BindingTable>,
    /// Today's harness rejects unknown keys in turn lifecycle configs too.
    pub strict_turn_filters: bool,
}

#[async_trait]
impl TriggerHandler for TypeHandler {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        let kind = match HookPoint::from_trigger_type(self.trigger_type) {
            Some(point) => HookConfig::parse(point, &config.config).map(|c| BindingKind::Hook(point, c)),
            None if self.strict_turn_filters => {
                TurnFilter::parse_strict(&config.config).map(BindingKind::Turn)
            }
            None => TurnFilter::parse(&config.config).map(BindingKind::Turn),
        }
        .map_err(|e| {
            tracing::warn!(trigger_type = self.trigger_type, function_id = %config.function_id, error = %e, "binding rejected");
            Error::Handler(e.to_string())
        })?;
        self.table.insert(Binding {
            info: BindingInfo {
                id: config.id,
                trigger_type: self.trigger_type.to_string(),
                function_id: config.function_id,
                config: config.config,
                metadata: config.metadata,
                namespace: config.namespace,
            },
            kind,
        });
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        self.table.remove(self.trigger_type, &config.id);
        Ok(())
    }
}

/// The provider side of `harness::ready` (generation 2). A binding made
/// after the harness announced itself is told at once, as today's harness
/// does, so a worker that binds late still learns the harness is up.
pub struct ReadyHandler {
    pub table: Arc<BindingTable>,
    pub announced: Arc<AtomicBool>,
    pub iii: IIIClient,
}

#[async_trait]
impl TriggerHandler for ReadyHandler {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        parse_ready(&config.config).map_err(|e| {
            tracing::warn!(trigger_type = READY, function_id = %config.function_id, error = %e, "binding rejected");
            Error::Handler(e.to_string())
        })?;
        let info = BindingInfo {
            id: config.id,
            trigger_type: READY.to_string(),
            function_id: config.function_id,
            config: config.config,
            metadata: config.metadata,
            namespace: config.namespace,
        };
        self.table.insert(Binding {
            info: info.clone(),
            kind: BindingKind::Ready,
        });
        if self.announced.load(Ordering::SeqCst) {
            fire_ready(&self.iii, &info).await;
        }
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        self.table.remove(READY, &config.id);
        Ok(())
    }
}

/// Delivers `{status: "ready", timestamp}` to one `harness::ready` binding.
pub async fn fire_ready(iii: &IIIClient, binding: &BindingInfo) {
    let payload = json!({ "status": "ready", "timestamp": crate::time::now_ms() });
    peer::fire(
        iii,
        &binding.function_id,
        payload,
        binding.metadata.as_ref(),
        binding.namespace.as_deref(),
    )
    .await;
}
