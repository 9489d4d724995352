//! The decision log (`architecture/contract.md` § Provenance and typed
//! outcomes): with `decision_log` configured, one redacted record per gate
//! verdict and per held call that leaves the inbox goes to the configured
//! function, fire-and-forget.
//!
//! Off the hot path: the gate and the pending store only push a record into
//! a bounded queue (a short in-memory lock, no await); a task of its own
//! redacts and sends. A full queue drops its oldest record and counts it;
//! nothing waits for room. The gate keeps no history: the queue is memory
//! only, and what it holds when the worker stops is lost.
//!
//! The records go out on a connection of their own, made when the first
//! record is sent: the engine of 0.23 leaves Nagle on, so a small frame
//! written right behind a gate's answer on the worker's socket can hold the
//! next answer back for a delayed ACK (~40 ms). On its own socket a record
//! never queues behind, or ahead of, an answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;

use super::DropOldest;
use super::LogRecord;
use crate::config::{ApprovalConfig, ConfigCell, DEFAULT_DECISION_LOG_QUEUE};
use crate::engine::Engine;

/// Records the sender takes from the queue at once.
const BATCH: usize = 256;

/// `health.decision_log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct DecisionLogHealth {
    /// Whether `decision_log` is configured.
    pub on: bool,
    /// Records waiting to be sent.
    pub queued: usize,
    /// Records handed to the engine.
    pub sent: u64,
    /// Records dropped: the oldest of a full queue, or what was queued when
    /// the log was switched off.
    pub dropped: u64,
    /// Records the engine refused or that could not be sent.
    pub errors: u64,
}

/// The queue between the deciders and the sender, and its counts.
pub(crate) struct DecisionLog {
    config: Arc<ConfigCell>,
    /// Held for in-memory work only, never across an `.await`.
    queue: Mutex<DropOldest<LogRecord>>,
    wake: tokio::sync::Notify,
    sent: AtomicU64,
    errors: AtomicU64,
    /// Records dropped because the log was off when the sender took them.
    discarded: AtomicU64,
    /// The log's own connection, once made (closed with the worker).
    connection: Mutex<Option<Engine>>,
}

impl DecisionLog {
    pub(crate) fn new(config: Arc<ConfigCell>) -> DecisionLog {
        DecisionLog {
            config,
            queue: Mutex::new(DropOldest::new(DEFAULT_DECISION_LOG_QUEUE)),
            wake: tokio::sync::Notify::new(),
            sent: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            connection: Mutex::new(None),
        }
    }

    /// Closes the log's own connection, if one was made (signals only: it
    /// completes at once, inside a runtime or out).
    pub(crate) fn close(&self) {
        let connection = crate::sync::lock(&self.connection).take();
        if let Some(engine) = connection {
            use futures_util::FutureExt;
            let _ = engine.iii().shutdown_async().now_or_never();
        }
    }

    /// The connection records go out on: made by `connect` on first use
    /// and waited for (briefly) before the first send.
    async fn connection(&self, connect: &(dyn Fn() -> Engine + Send + Sync)) -> Engine {
        let existing = crate::sync::lock(&self.connection).clone();
        if let Some(engine) = existing {
            return engine;
        }
        let engine = connect();
        if let Err(err) = engine
            .iii()
            .wait_until_registered(std::time::Duration::from_secs(5))
            .await
        {
            tracing::warn!(error = %err, "the decision log's connection is not up yet; sending anyway");
        }
        *crate::sync::lock(&self.connection) = Some(engine.clone());
        engine
    }

    fn with_queue<R>(&self, f: impl FnOnce(&mut DropOldest<LogRecord>) -> R) -> R {
        let mut guard = crate::sync::lock(&self.queue);
        f(&mut guard)
    }

    /// Queues the record `make` builds when `config` has the log on (and
    /// builds nothing otherwise). Never waits.
    pub(crate) fn push(&self, config: &ApprovalConfig, make: impl FnOnce() -> LogRecord) {
        let Some(log) = config.decision_log.as_ref() else {
            return;
        };
        let record = make();
        self.with_queue(|queue| {
            if queue.capacity() != log.queue {
                queue.set_capacity(log.queue);
            }
            queue.push(record);
        });
        self.wake.notify_one();
    }

    /// [`push`](Self::push) under the configuration in force.
    pub(crate) fn push_now(&self, make: impl FnOnce() -> LogRecord) {
        let snapshot = self.config.load();
        self.push(&snapshot.config, make);
    }

    /// What `approval::health` reports.
    pub(crate) fn health(&self) -> DecisionLogHealth {
        let (queued, dropped) = self.with_queue(|queue| (queue.len(), queue.dropped()));
        DecisionLogHealth {
            on: self.config.load().config.decision_log.is_some(),
            queued,
            sent: self.sent.load(Ordering::Relaxed),
            dropped: dropped + self.discarded.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// The sender, for the worker's life: takes what is queued, redacts it
    /// and sends each record as a void call on the log's own connection
    /// (made by `connect` when the first record goes out).
    pub(crate) async fn run(self: Arc<Self>, connect: Box<dyn Fn() -> Engine + Send + Sync>) {
        loop {
            self.wake.notified().await;
            loop {
                let batch: Vec<LogRecord> = self
                    .with_queue(|queue| std::iter::from_fn(|| queue.pop()).take(BATCH).collect());
                if batch.is_empty() {
                    break;
                }
                let target = self
                    .config
                    .load()
                    .config
                    .decision_log
                    .as_ref()
                    .map(|log| log.function_id.clone());
                let Some(function_id) = target else {
                    self.discarded
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    continue;
                };
                let engine = self.connection(connect.as_ref()).await;
                for record in batch {
                    let payload =
                        serde_json::to_value(record.redacted()).unwrap_or(serde_json::Value::Null);
                    match engine.fire(&function_id, payload, None, None).await {
                        Ok(()) => {
                            self.sent.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            self.errors.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(function_id = %function_id, error = %err, "decision log record not sent");
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DecisionLogConfig, Snapshot};
    use crate::provenance::DecidedBy;

    fn cell(log: Option<DecisionLogConfig>) -> Arc<ConfigCell> {
        let config = ApprovalConfig {
            decision_log: log,
            ..ApprovalConfig::default()
        };
        Arc::new(ConfigCell::new(Snapshot::compile(config)))
    }

    fn record(i: usize) -> LogRecord {
        LogRecord {
            decision: "continue".into(),
            rule_id: None,
            decided_by: DecidedBy::gate_verdict(false, 1),
            session_id: "s".into(),
            function_call_id: format!("c{i}"),
            function_id: "demo::echo".into(),
            at: 1,
        }
    }

    #[test]
    fn rule_23_a_full_queue_drops_the_oldest_and_health_counts_it() {
        let log = DecisionLog::new(cell(Some(DecisionLogConfig {
            function_id: "audit::decision".into(),
            queue: 3,
        })));
        for i in 0..5 {
            log.push_now(|| record(i));
        }
        let health = log.health();
        assert_eq!(
            health,
            DecisionLogHealth {
                on: true,
                queued: 3,
                sent: 0,
                dropped: 2,
                errors: 0
            }
        );
        let kept: Vec<String> = log.with_queue(|q| {
            std::iter::from_fn(|| q.pop())
                .map(|r| r.function_call_id)
                .collect()
        });
        assert_eq!(kept, ["c2", "c3", "c4"], "the oldest went first");
    }

    #[test]
    fn rule_23_with_the_log_off_nothing_is_built_or_queued() {
        let log = DecisionLog::new(cell(None));
        log.push_now(|| panic!("no record is built while the log is off"));
        assert_eq!(log.health().queued, 0);
        assert!(!log.health().on);
    }
}
