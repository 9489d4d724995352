//! The trigger types the worker provides (`architecture/contract.md` § Trigger
//! types):
//! `approval::pending-created`, `approval::pending-resolved` and
//! `approval::pending-escalated`, their bindings (kept in memory, keyed by binding id; the engine re-sends them on
//! reconnect, so registration is idempotent) and the fan-out.
//!
//! # Format
//!
//! Binding config (every type): `{ "session_id"?: string, "metadata"?: object }`;
//! null or `{}` matches every record; unknown keys are rejected.
//!
//! `pending-resolved` payload:
//! `{ session_id, turn_id, function_call_id, function_id, outcome: "allow"|"deny"|"aborted"|"timeout"|"unknown", reason?, session_metadata?, resolved_at, decided_by: {kind, via, caller?, at} }`
//! (`reason`: the operator's on deny; `not_held`, `turn_completed`,
//! `session_deleted` or `replaced` on aborted; `timeout` on timeout).
//!
//! `pending-escalated` payload: the record (with its `escalated_at`) plus
//! `"status": "pending"`.

use std::sync::Arc;

use async_trait::async_trait;
use dashmap::DashMap;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{IIIClient, RegisterTriggerType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::record::{Metadata, PendingRecord};
use crate::config::ConfigCell;
use crate::engine::Engine;
use crate::provenance::DecidedBy;
use crate::schema::Inlined;

/// `approval::pending-created`.
pub const PENDING_CREATED: &str = "approval::pending-created";
/// `approval::pending-resolved`.
pub const PENDING_RESOLVED: &str = "approval::pending-resolved";
/// `approval::pending-escalated`.
pub const PENDING_ESCALATED: &str = "approval::pending-escalated";

/// A binding config that is not `{session_id?, metadata?}`; the binding is
/// refused with this message.
#[derive(Debug, thiserror::Error)]
#[error("invalid binding config: {0}")]
pub(super) struct InvalidBinding(serde_json::Error);

/// A binding's filter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BindingFilter {
    /// Only this session's records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Subset equality against the record's `session_metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl BindingFilter {
    /// Parses a binding config; null means match all.
    pub(super) fn parse(config: &Value) -> Result<BindingFilter, InvalidBinding> {
        if config.is_null() {
            return Ok(BindingFilter::default());
        }
        BindingFilter::deserialize(config).map_err(InvalidBinding)
    }

    /// Whether a record (its session id and metadata) passes the filter.
    pub(super) fn matches(&self, session_id: &str, metadata: Option<&Map<String, Value>>) -> bool {
        if let Some(sid) = &self.session_id {
            if sid != session_id {
                return false;
            }
        }
        match &self.metadata {
            None => true,
            Some(filter) if filter.is_empty() => true,
            Some(filter) => match metadata {
                None => false,
                Some(meta) => filter.iter().all(|(k, v)| meta.get(k) == Some(v)),
            },
        }
    }
}

/// Why a held call left the inbox (`pending-resolved`'s `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Resolution {
    /// A human allowed it.
    Allow,
    /// A human denied it.
    Deny,
    /// Its turn or session ended first.
    Aborted,
    /// No one answered before its `expires_at`: the call was denied.
    Timeout,
    /// A decision was carried to the harness, but what became of the call
    /// cannot be told (its answer was lost and the harness cannot say): it
    /// may have run.
    Unknown,
}

impl Resolution {
    /// The wire spelling.
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// `approval::pending-created` payload: the record, its `approval_url` when
/// links are on, and `status: "pending"`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(super) struct PendingCreated {
    /// The record.
    #[serde(flatten)]
    pub record: PendingRecord,
    /// The page where a human decides this call (links on only); a bearer
    /// capability for this one record, never logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
    /// Always `pending`.
    pub status: String,
}

/// `approval::pending-escalated` payload: the record, whose `escalated_at`
/// is set, plus `status: "pending"` (the call is still held).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(super) struct PendingEscalated {
    /// The record.
    #[serde(flatten)]
    pub record: PendingRecord,
    /// The page where a human decides this call (links on only), as in
    /// `pending-created`: the notifier that asks a second approver shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
    /// Always `pending`.
    pub status: String,
}

/// `approval::pending-resolved` payload.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub(super) struct PendingResolved {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub function_call_id: String,
    /// The function.
    pub function_id: String,
    /// allow, deny, aborted or timeout.
    pub outcome: Resolution,
    /// On deny, the operator's reason; on aborted, why the record left:
    /// `not_held`, `turn_completed`, `session_deleted`, `replaced` or
    /// `unreadable` (a stored record that did not parse, denied); on
    /// timeout, `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The record's session metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_metadata: Option<Metadata>,
    /// When it left the inbox (ms since the epoch).
    pub resolved_at: u64,
    /// Who decided what became of the call: `{kind, via, caller?, at}`
    /// (human/resolve, human/link, human/batch, timeout/timer,
    /// lifecycle/turn_completed, lifecycle/session_deleted,
    /// lifecycle/reconcile, lifecycle/replaced, lifecycle/gate; an unknown
    /// outcome names the decider whose release it was).
    pub decided_by: DecidedBy,
    /// True when the denial was a human's edit (contract §28): the model
    /// was given the edited call to make instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
}

/// The `pending-resolved` reason of an unreadable value a human denied.
pub(crate) const UNREADABLE: &str = "unreadable";

#[derive(Debug, Clone)]
struct Binding {
    trigger_type: String,
    function_id: String,
    filter: BindingFilter,
    metadata: Option<Value>,
    namespace: Option<String>,
}

/// The live bindings of every type.
pub(crate) struct Events {
    engine: Engine,
    /// Whether links are on, and their secret (`pending-created` carries
    /// `approval_url`).
    config: Arc<ConfigCell>,
    bindings: DashMap<String, Binding>,
    /// Woken when the engine sends a binding this worker already had: it
    /// does so after a reconnect, so it is a reconnect signal.
    resent: tokio::sync::Notify,
}

struct TypeHandler {
    trigger_type: &'static str,
    subs: Arc<Events>,
}

#[async_trait]
impl TriggerHandler for TypeHandler {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        let filter = BindingFilter::parse(&config.config)
            .map_err(|e| iii_sdk::Error::Handler(e.to_string()))?;
        let known = self.subs.bindings.insert(
            config.id,
            Binding {
                trigger_type: self.trigger_type.to_string(),
                function_id: config.function_id,
                filter,
                metadata: config.metadata,
                namespace: config.namespace,
            },
        );
        if known.is_some() {
            self.subs.resent.notify_one();
        }
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        self.subs.bindings.remove(&config.id);
        Ok(())
    }
}

impl Events {
    /// No bindings yet.
    pub(crate) fn new(engine: Engine, config: Arc<ConfigCell>) -> Events {
        Events {
            engine,
            config,
            bindings: DashMap::new(),
            resent: tokio::sync::Notify::new(),
        }
    }

    /// Resolves when the engine sent again a binding this worker had (a
    /// reconnect) since the last call.
    pub(crate) async fn resent(&self) {
        self.resent.notified().await;
    }

    /// Provides the trigger types.
    pub(crate) fn register(self: &Arc<Self>, iii: &IIIClient) {
        // Providing trigger types is deprecated in the 0.25 SDK (0.26 removed
        // it) but it is what the engine and every consumer speak today.
        #[allow(deprecated)]
        {
            iii.register_trigger_type(
                RegisterTriggerType::new(
                    PENDING_CREATED,
                    "A call was held and its inbox record written. Payload: the redacted record plus status: pending. Config: {session_id?, metadata?}.",
                    TypeHandler {
                        trigger_type: PENDING_CREATED,
                        subs: self.clone(),
                    },
                )
                .trigger_request_format::<BindingFilter>()
                .call_request_format::<Inlined<PendingCreated>>(),
            );
            iii.register_trigger_type(
                RegisterTriggerType::new(
                    PENDING_RESOLVED,
                    "A held call left the inbox (exactly once per record): ids, outcome allow|deny|aborted|timeout|unknown, the operator's reason on deny, why on aborted, and decided_by {kind, via, caller?, at}. Config: {session_id?, metadata?}.",
                    TypeHandler {
                        trigger_type: PENDING_RESOLVED,
                        subs: self.clone(),
                    },
                )
                .trigger_request_format::<BindingFilter>()
                .call_request_format::<Inlined<PendingResolved>>(),
            );
            iii.register_trigger_type(
                RegisterTriggerType::new(
                    PENDING_ESCALATED,
                    "A held call passed its escalate_at unanswered (once per record; it stays held): the redacted record with escalated_at, plus status: pending. Config: {session_id?, metadata?}.",
                    TypeHandler {
                        trigger_type: PENDING_ESCALATED,
                        subs: self.clone(),
                    },
                )
                .trigger_request_format::<BindingFilter>()
                .call_request_format::<Inlined<PendingEscalated>>(),
            );
        }
    }

    /// How many bindings are live.
    pub(crate) fn len(&self) -> usize {
        self.bindings.len()
    }

    fn targets(
        &self,
        trigger_type: &str,
        session_id: &str,
        metadata: Option<&Metadata>,
    ) -> Vec<Binding> {
        // Parsed once per event, not once per binding.
        let metadata = metadata.map(Metadata::to_map);
        self.bindings
            .iter()
            .filter(|b| {
                b.trigger_type == trigger_type && b.filter.matches(session_id, metadata.as_ref())
            })
            .map(|b| b.value().clone())
            .collect()
    }

    /// The record's link while links are on.
    fn approval_url(&self, record: &PendingRecord) -> Option<String> {
        self.config
            .load()
            .links
            .as_ref()
            .and_then(|links| record.approval_url(links))
    }

    /// Announces a new record, off the hot path: the caller's answer goes
    /// out first.
    pub(super) fn emit_created(&self, record: &PendingRecord) {
        let targets = self.targets(
            PENDING_CREATED,
            &record.session_id,
            record.session_metadata.as_ref(),
        );
        if targets.is_empty() {
            return;
        }
        let approval_url = self.approval_url(record);
        let payload = PendingCreated {
            record: record.clone(),
            approval_url,
            status: "pending".into(),
        };
        fan_out(
            &self.engine,
            targets,
            serde_json::to_value(payload).unwrap_or(Value::Null),
        );
    }

    /// Announces a record that passed its `escalate_at` unanswered.
    pub(super) fn emit_escalated(&self, record: &PendingRecord) {
        let targets = self.targets(
            PENDING_ESCALATED,
            &record.session_id,
            record.session_metadata.as_ref(),
        );
        if targets.is_empty() {
            return;
        }
        let approval_url = self.approval_url(record);
        let payload = PendingEscalated {
            record: record.clone(),
            approval_url,
            status: "pending".into(),
        };
        fan_out(
            &self.engine,
            targets,
            serde_json::to_value(payload).unwrap_or(Value::Null),
        );
    }

    /// Announces a record that left the inbox.
    pub(super) fn emit_resolved(&self, event: PendingResolved) {
        let targets = self.targets(
            PENDING_RESOLVED,
            &event.session_id,
            event.session_metadata.as_ref(),
        );
        fan_out(
            &self.engine,
            targets,
            serde_json::to_value(event).unwrap_or(Value::Null),
        );
    }
}

fn fan_out(engine: &Engine, targets: Vec<Binding>, payload: Value) {
    if targets.is_empty() {
        return;
    }
    let engine = engine.clone();
    tokio::spawn(async move {
        // Let the handler's answer leave before the notifications do.
        tokio::task::yield_now().await;
        for b in targets {
            if let Err(err) = engine
                .fire(
                    &b.function_id,
                    payload.clone(),
                    b.namespace.as_deref(),
                    b.metadata.as_ref(),
                )
                .await
            {
                tracing::warn!(function_id = %b.function_id, error = %err, "notification not delivered");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filter_parse() {
        assert_eq!(
            BindingFilter::parse(&Value::Null).unwrap(),
            BindingFilter::default()
        );
        assert_eq!(
            BindingFilter::parse(&json!({})).unwrap(),
            BindingFilter::default()
        );
        assert!(BindingFilter::parse(&json!({"session": "x"}))
            .unwrap_err()
            .to_string()
            .starts_with("invalid binding config"));
        assert!(BindingFilter::parse(&json!({"metadata": 3})).is_err());
    }

    #[test]
    fn filter_matches() {
        let meta = json!({"owner": "u_1", "team": "a"});
        let meta = meta.as_object();
        let f = BindingFilter::parse(&json!({"metadata": {"owner": "u_1"}})).unwrap();
        assert!(f.matches("s", meta));
        assert!(!f.matches("s", None));
        let f = BindingFilter::parse(&json!({"metadata": {"owner": "u_2"}})).unwrap();
        assert!(!f.matches("s", meta));
        let f = BindingFilter::parse(&json!({"session_id": "s_1"})).unwrap();
        assert!(f.matches("s_1", None));
        assert!(!f.matches("s_2", None));
        let f = BindingFilter::parse(&json!({"metadata": {}})).unwrap();
        assert!(f.matches("s_2", None));
    }
}
