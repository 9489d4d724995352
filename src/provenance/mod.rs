//! Provenance (`architecture/contract.md` § Provenance and typed outcomes):
//! who decided what became of a held call, and the optional decision log.
//!
//! * pure: [`DecidedBy`] (`{kind, via, caller?, at}`, the table of removal
//!   paths as [`DecidedVia::kind`]), [`Caller`], [`LogRecord`] and the
//!   bounded queue that drops its oldest record ([`queue`]);
//! * [`callers`] — a caller's worker name, looked up in
//!   `engine::workers::list` and cached;
//! * [`log`] — the decision log: records pushed by the gate and the pending
//!   store, sent by a task of its own, fire-and-forget.
//!
//! # Format
//!
//! `decided_by`: `{ "kind": "human"|"timeout"|"lifecycle"|"policy", "via": "resolve"|"link"|"batch"|"timer"|"turn_completed"|"session_deleted"|"reconcile"|"replaced"|"gate", "caller"?: {worker_id, worker_name?} | "link", "at": ms }`
//!
//! A decision log record: `{ decision, rule_id?, decided_by, session_id, function_call_id, function_id, at }`.

pub(crate) mod callers;
pub(crate) mod log;
mod queue;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use callers::Callers;
pub(crate) use log::{DecisionLog, DecisionLogHealth};
use queue::DropOldest;

/// Who made a decision, in kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DeciderKind {
    /// A person: `approval::resolve`, a link, a batch.
    Human,
    /// No one answered before the hold's deadline.
    Timeout,
    /// The call's life ended around it: its turn, its session, the harness
    /// no longer holding it, a newer hold, the gate's own budget.
    Lifecycle,
    /// The gate's ladder (decision log records of gate verdicts only).
    Policy,
    /// The configured reviewer (decision log records of the gate verdicts
    /// it decided: a continue or a deny).
    Reviewer,
}

impl DeciderKind {
    /// The wire spelling.
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The path a decision took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DecidedVia {
    /// `approval::resolve`.
    Resolve,
    /// An approval link's POST.
    Link,
    /// `approval::resolve-batch`.
    Batch,
    /// The deadline timer (an expiry).
    Timer,
    /// `harness::turn-completed`.
    TurnCompleted,
    /// `session::deleted`.
    SessionDeleted,
    /// A reconcile with the harness (`harness::status`).
    Reconcile,
    /// A new hold under the same key.
    Replaced,
    /// The gate itself: its verdict, or its budget running out.
    Gate,
    /// A human's edit: the gate let the edited call through on the edit's
    /// one-shot grant (contract §28).
    Edit,
}

impl DecidedVia {
    /// The contract's table: the kind of decider each removal path is.
    /// [`DecidedVia::Gate`] is `lifecycle` here (a hold whose budget ran
    /// out); a gate verdict in the decision log is `policy`
    /// ([`DecidedBy::gate_verdict`]).
    pub(crate) fn kind(self) -> DeciderKind {
        match self {
            DecidedVia::Resolve | DecidedVia::Link | DecidedVia::Batch | DecidedVia::Edit => {
                DeciderKind::Human
            }
            DecidedVia::Timer => DeciderKind::Timeout,
            DecidedVia::TurnCompleted
            | DecidedVia::SessionDeleted
            | DecidedVia::Reconcile
            | DecidedVia::Replaced
            | DecidedVia::Gate => DeciderKind::Lifecycle,
        }
    }

    /// The wire spelling.
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The worker that called, as the engine names it: the engine stamps
/// `_caller_worker_id` into every object payload a worker sends,
/// overwriting whatever the payload carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkerCaller {
    /// The engine's id of the calling worker's connection.
    pub worker_id: String,
    /// Its name in `engine::workers::list`, when the engine listed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_name: Option<String>,
}

/// The mark of a decision made on an approval link's page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkMark {
    /// `"link"`.
    Link,
}

/// Who called: a worker, or `"link"` (the engine's HTTP worker calls
/// in-process, with no worker id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Caller {
    /// A worker, by the id the engine stamped.
    Worker(WorkerCaller),
    /// An approval link.
    Link(LinkMark),
}

impl Caller {
    /// The link's mark.
    pub(crate) fn link() -> Caller {
        Caller::Link(LinkMark::Link)
    }
}

/// Who decided what became of a held call, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct DecidedBy {
    /// human, timeout or lifecycle (policy: a gate verdict in the decision
    /// log).
    pub kind: DeciderKind,
    /// The path the decision took.
    pub via: DecidedVia,
    /// Who called, when a worker or a link carried the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
    /// When the decision was taken (ms since the epoch).
    pub at: u64,
}

impl DecidedBy {
    /// A decision that came by `via` (its kind from the contract's table).
    pub(crate) fn by(via: DecidedVia, caller: Option<Caller>, at: u64) -> DecidedBy {
        DecidedBy {
            kind: via.kind(),
            via,
            caller,
            at,
        }
    }

    /// The gate's own verdict (continue, deny, hold): the ladder's, or the
    /// reviewer's when it decided the call.
    pub(crate) fn gate_verdict(by_reviewer: bool, at: u64) -> DecidedBy {
        DecidedBy {
            kind: if by_reviewer {
                DeciderKind::Reviewer
            } else {
                DeciderKind::Policy
            },
            via: DecidedVia::Gate,
            caller: None,
            at,
        }
    }
}

/// One decision log record. Ids only: no arguments, no reason (a human's
/// reason is free text), and every string passes the value detectors
/// before it leaves the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct LogRecord {
    /// A gate verdict (`continue`, `deny`, `hold`) or a removal's outcome
    /// (`allow`, `deny`, `aborted`, `timeout`, `unknown`).
    pub decision: String,
    /// The rule behind a gate verdict (`no_match`, `lockdown`,
    /// `human_only_function`, a rule's id, ...); a removal's reason
    /// (`not_held`, `turn_completed`, ...) — never a human's free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// The session.
    pub session_id: String,
    /// The call.
    pub function_call_id: String,
    /// The function.
    pub function_id: String,
    /// When the record was made (ms since the epoch).
    pub at: u64,
}

impl LogRecord {
    /// The record with every string passed through the value detectors.
    pub(crate) fn redacted(mut self) -> LogRecord {
        use crate::redact::redact_text;
        fn clean(text: &mut String) {
            if let std::borrow::Cow::Owned(clean) = redact_text(text) {
                *text = clean;
            }
        }
        clean(&mut self.decision);
        if let Some(rule) = self.rule_id.as_mut() {
            clean(rule);
        }
        clean(&mut self.session_id);
        clean(&mut self.function_call_id);
        clean(&mut self.function_id);
        if let Some(Caller::Worker(worker)) = self.decided_by.caller.as_mut() {
            clean(&mut worker.worker_id);
            if let Some(name) = worker.worker_name.as_mut() {
                clean(name);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rule_23_every_path_of_the_table_has_its_kind() {
        let table = [
            (DecidedVia::Resolve, "human", "resolve"),
            (DecidedVia::Link, "human", "link"),
            (DecidedVia::Batch, "human", "batch"),
            (DecidedVia::Timer, "timeout", "timer"),
            (DecidedVia::TurnCompleted, "lifecycle", "turn_completed"),
            (DecidedVia::SessionDeleted, "lifecycle", "session_deleted"),
            (DecidedVia::Reconcile, "lifecycle", "reconcile"),
            (DecidedVia::Replaced, "lifecycle", "replaced"),
            (DecidedVia::Gate, "lifecycle", "gate"),
        ];
        for (via, kind, spelled) in table {
            let by = DecidedBy::by(via, None, 7);
            assert_eq!(
                serde_json::to_value(&by).unwrap(),
                json!({"kind": kind, "via": spelled, "at": 7})
            );
            assert_eq!(via.as_str(), spelled);
        }
        assert_eq!(
            serde_json::to_value(DecidedBy::gate_verdict(false, 1)).unwrap(),
            json!({"kind": "policy", "via": "gate", "at": 1})
        );
    }

    #[test]
    fn rule_23_a_caller_is_a_worker_or_the_link() {
        let worker = Caller::Worker(WorkerCaller {
            worker_id: "w-1".into(),
            worker_name: Some("console".into()),
        });
        assert_eq!(
            serde_json::to_value(&worker).unwrap(),
            json!({"worker_id": "w-1", "worker_name": "console"})
        );
        assert_eq!(serde_json::to_value(Caller::link()).unwrap(), json!("link"));
        for value in [json!("link"), json!({"worker_id": "w-2"})] {
            let back: Caller = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(serde_json::to_value(back).unwrap(), value);
        }
        assert!(serde_json::from_value::<Caller>(json!("forged")).is_err());
    }

    #[test]
    fn rule_23_a_log_record_carries_no_secret() {
        let record = LogRecord {
            decision: "hold".into(),
            rule_id: Some("no_match".into()),
            decided_by: DecidedBy::gate_verdict(false, 1),
            session_id: "s_1".into(),
            function_call_id: "Bearer abcdefghijklmnopqrstuvwxyz0123456789".into(),
            function_id: "shell::run".into(),
            at: 1,
        }
        .redacted();
        assert!(
            !record.function_call_id.contains("abcdefghij"),
            "{record:?}"
        );
        assert_eq!(record.function_id, "shell::run");
        assert_eq!(record.session_id, "s_1");
    }
}
