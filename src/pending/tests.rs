//! What the store's own tests share: a store on a connection of its own to
//! the in-process test engine (the real SDK over a real WebSocket), held
//! records, and what the store announced. The decision log is on and its
//! sender never runs, so every record it was handed stays queued and
//! counted.

use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::engine::Faults;
use approval_gate_testkit::fixture::{plain_client, EngineFixture};
use serde_json::{json, Value};

use super::bucket::{bucket, state_key};
use super::{PendingRecord, PendingStore, Written};
use crate::config::{ApprovalConfig, ConfigCell, DecisionLogConfig, Snapshot};
use crate::engine::Engine;

/// A store and the engine it talks to.
pub(super) struct Scene {
    pub(super) engine: EngineFixture,
    pub(super) store: Arc<PendingStore>,
}

impl Scene {
    pub(super) async fn start() -> Scene {
        let engine = EngineFixture::start_test().await;
        let client = plain_client(&engine.url(), "approval-gate-under-test", None);
        client
            .wait_until_registered(Duration::from_secs(10))
            .await
            .expect("connected");
        let config = ApprovalConfig {
            decision_log: Some(DecisionLogConfig {
                function_id: "log::sink".into(),
                queue: 1000,
            }),
            ..ApprovalConfig::default()
        };
        let cell = Arc::new(ConfigCell::new(Snapshot::compile(config)));
        let store = Arc::new(PendingStore::new(Engine::new(client), cell));
        Scene { engine, store }
    }

    /// The test engine's faults.
    pub(super) fn faults(&self) -> &Faults {
        self.engine
            .test_engine()
            .expect("the in-process engine")
            .faults()
    }

    /// Holds `record` through its key's lock.
    pub(super) async fn hold(&self, record: PendingRecord) -> Written {
        let lock = self
            .store
            .lock(&record.session_id, &record.function_call_id)
            .await;
        let arguments = crate::redact::redact_full(&record.arguments_excerpt.to_value());
        lock.write(record, arguments).await.expect("held")
    }

    /// The value state holds for a key (null when none).
    pub(super) async fn stored(&self, session_id: &str, function_call_id: &str) -> Value {
        self.store
            .engine
            .state_get(
                &bucket(session_id, function_call_id),
                &state_key(session_id, function_call_id),
            )
            .await
            .expect("state::get")
    }

    /// How many decision log records the store pushed.
    pub(super) fn logged(&self) -> usize {
        self.store.decision_log().health().queued
    }
}

/// A held call of session `s1`, revision `pending_at`.
pub(super) fn record(function_call_id: &str, pending_at: u64) -> PendingRecord {
    serde_json::from_value(json!({
        "session_id": "s1", "turn_id": "t1", "function_call_id": function_call_id,
        "function_id": "shell::run", "arguments_excerpt": {"cmd": "ls"},
        "pending_at": pending_at
    }))
    .expect("a record")
}

/// Checks `check` every 20 ms, 100 times at most.
pub(super) async fn until(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}
