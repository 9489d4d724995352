//! The harness as trigger-type provider: every binding it accepted, keyed by
//! binding id (an unregister carries nothing else).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::Error;

use super::chain::ChainKey;
use super::config::{HookConfig, HookPoint, TurnFilter};
use super::model::BindingInfo;

pub const TURN_COMPLETED: &str = "harness::turn-completed";
pub const TURN_STARTED: &str = "harness::turn-started";

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
                BindingKind::Hook(..) => false,
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
                    BindingKind::Turn(_) => (0, String::new()),
                };
                (key, b.info.clone())
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1.id).cmp(&(&b.0, &b.1.id)));
        out.into_iter().map(|(_, info)| info).collect()
    }

    fn insert(&self, binding: Binding) {
        self.lock().insert(binding.info.id.clone(), binding);
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
}

#[async_trait]
impl TriggerHandler for TypeHandler {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), Error> {
        let kind = match HookPoint::from_trigger_type(self.trigger_type) {
            Some(point) => HookConfig::parse(point, &config.config).map(|c| BindingKind::Hook(point, c)),
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
