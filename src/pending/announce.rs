//! One exit, one announcer. Every way a held call leaves the inbox — a
//! release's end, a purge, a record replaced outside any release, a human's
//! deny of an unreadable value, a hold whose hook gave up — describes its
//! leaving as an [`Exit`] and hands it to [`PendingStore::announce`], which
//! alone emits `approval::pending-resolved`, pushes the decision log record
//! and remembers how the revision left (what a link to it says). No exit
//! builds its own event or log record.
//!
//! The event and the log record of an exit are built here, PURE, from the
//! exit and the time.

use super::events::{PendingResolved, Resolution, UNREADABLE};
use super::record::{Metadata, PendingRecord};
use super::removed::Removal;
use super::store::PendingStore;
use super::unreadable::UnreadableRecord;
use crate::provenance::{DecidedBy, DecidedVia, LogRecord};

/// The `pending-resolved` reason of a record a new one replaced outside any
/// release (a function hold that became a folder prompt).
pub(super) const REPLACED: &str = "replaced";

/// A held call leaving the inbox: what left, how, and who decided.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Exit {
    session_id: String,
    /// Empty when an unreadable value names no turn.
    turn_id: String,
    function_call_id: String,
    /// Empty when an unreadable value names no function.
    function_id: String,
    session_metadata: Option<Metadata>,
    /// The revision's `pending_at`, when a link can name it: the removal is
    /// remembered under it. An unreadable value has none, and no link was
    /// ever made for a record that was never announced.
    revision: Option<u64>,
    /// The outcome and the reason.
    removal: Removal,
    decided_by: DecidedBy,
    /// Whether `pending-resolved` goes out: false for a record no one was
    /// told of (its `pending-created` never went out), which only the
    /// decision log hears of.
    announced: bool,
    /// A human's edit denied it (contract §28).
    edited: bool,
}

impl Exit {
    /// An announced record leaving: a release's end or a purge.
    pub(super) fn record(
        record: &PendingRecord,
        outcome: Resolution,
        reason: Option<String>,
        decided_by: DecidedBy,
    ) -> Exit {
        Exit {
            session_id: record.session_id.clone(),
            turn_id: record.turn_id.clone(),
            function_call_id: record.function_call_id.clone(),
            function_id: record.function_id.clone(),
            session_metadata: record.session_metadata.clone(),
            revision: Some(record.pending_at),
            edited: outcome == Resolution::Deny
                && record.release.as_ref().is_some_and(|note| note.edited),
            removal: Removal { outcome, reason },
            decided_by,
            announced: true,
        }
    }

    /// A record a new hold replaced with no release under way: `aborted`,
    /// reason `replaced`.
    pub(super) fn replaced(previous: &PendingRecord, at: u64) -> Exit {
        Exit::record(
            previous,
            Resolution::Aborted,
            Some(REPLACED.to_string()),
            DecidedBy::by(DecidedVia::Replaced, None, at),
        )
    }

    /// An unreadable value a human denied (§21.9): `aborted`, reason
    /// `unreadable`; the turn and function as far as the value names them.
    pub(super) fn unreadable(
        entry: &UnreadableRecord,
        session_id: &str,
        function_call_id: &str,
        decided_by: DecidedBy,
    ) -> Exit {
        Exit {
            session_id: session_id.to_string(),
            turn_id: entry.turn_id.clone().unwrap_or_default(),
            function_call_id: function_call_id.to_string(),
            function_id: entry.function_id.clone().unwrap_or_default(),
            session_metadata: None,
            revision: None,
            removal: Removal {
                outcome: Resolution::Aborted,
                reason: Some(UNREADABLE.to_string()),
            },
            decided_by,
            announced: true,
            edited: false,
        }
    }

    /// A hold whose write landed after its hook gave up (the harness never
    /// saw a hold, no one was told of it): the decision log alone hears,
    /// `aborted` by the gate's budget.
    pub(super) fn unannounced(record: &PendingRecord, at: u64) -> Exit {
        Exit {
            revision: None,
            announced: false,
            ..Exit::record(
                record,
                Resolution::Aborted,
                Some(DecidedVia::Gate.as_str().to_string()),
                DecidedBy::by(DecidedVia::Gate, None, at),
            )
        }
    }

    /// The decision log record: ids only, and a deny's reason (a human's
    /// free text) never.
    pub(super) fn log_record(&self, at: u64) -> LogRecord {
        let Removal { outcome, reason } = &self.removal;
        LogRecord {
            decision: outcome.as_str().to_string(),
            rule_id: reason.clone().filter(|_| *outcome != Resolution::Deny),
            decided_by: self.decided_by.clone(),
            session_id: self.session_id.clone(),
            function_call_id: self.function_call_id.clone(),
            function_id: self.function_id.clone(),
            at,
        }
    }

    /// The `pending-resolved` event, unless no one was told of the record.
    pub(super) fn event(self, resolved_at: u64) -> Option<PendingResolved> {
        self.announced.then_some(PendingResolved {
            session_id: self.session_id,
            turn_id: self.turn_id,
            function_call_id: self.function_call_id,
            function_id: self.function_id,
            outcome: self.removal.outcome,
            reason: self.removal.reason,
            session_metadata: self.session_metadata,
            resolved_at,
            decided_by: self.decided_by,
            edited: self.edited,
        })
    }
}

impl PendingStore {
    /// Announces an exit: remembers how the revision left, pushes the
    /// decision log record, emits `pending-resolved` — each as far as the
    /// exit says. The one place any of them happens for a removal.
    pub(super) fn announce(&self, exit: Exit) {
        let at = crate::time::now_ms();
        crate::metrics::removal(
            exit.removal.outcome.as_str(),
            exit.decided_by.kind.as_str(),
            exit.revision
                .map(|pending_at| at.saturating_sub(pending_at)),
        );
        if let Some(pending_at) = exit.revision {
            let revision = (
                exit.session_id.clone(),
                exit.function_call_id.clone(),
                pending_at,
            );
            self.with_memory(|memory| memory.removed.remember(revision, exit.removal.clone()));
        }
        self.decision_log().push_now(|| exit.log_record(at));
        if let Some(event) = exit.event(at) {
            self.events().emit_resolved(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::provenance::Caller;

    fn record() -> PendingRecord {
        serde_json::from_value(json!({
            "session_id": "s_1", "turn_id": "t_1", "function_call_id": "c_1",
            "function_id": "shell::run", "arguments_excerpt": {"cmd": "ls"},
            "pending_at": 42, "session_metadata": {"owner": "u_1"}
        }))
        .expect("a record")
    }

    fn human(at: u64) -> DecidedBy {
        DecidedBy::by(DecidedVia::Resolve, Some(Caller::link()), at)
    }

    #[test]
    fn rule_23_a_removal_is_announced_logged_and_remembered_under_its_revision() {
        let exit = Exit::record(&record(), Resolution::Allow, None, human(5));
        assert_eq!(exit.revision, Some(42));
        assert_eq!(
            serde_json::to_value(exit.log_record(9)).unwrap(),
            json!({"decision": "allow", "decided_by": {"kind": "human", "via": "resolve", "caller": "link", "at": 5},
                   "session_id": "s_1", "function_call_id": "c_1", "function_id": "shell::run", "at": 9})
        );
        let event = exit.event(9).expect("announced");
        assert_eq!(
            serde_json::to_value(event).unwrap(),
            json!({"session_id": "s_1", "turn_id": "t_1", "function_call_id": "c_1",
                   "function_id": "shell::run", "outcome": "allow", "session_metadata": {"owner": "u_1"},
                   "resolved_at": 9, "decided_by": {"kind": "human", "via": "resolve", "caller": "link", "at": 5}})
        );
    }

    #[test]
    fn rule_23_a_denys_reason_reaches_the_event_never_the_log() {
        let exit = Exit::record(
            &record(),
            Resolution::Deny,
            Some("my password is hunter2".into()),
            human(5),
        );
        assert_eq!(exit.log_record(9).rule_id, None);
        assert_eq!(
            exit.event(9).and_then(|e| e.reason).as_deref(),
            Some("my password is hunter2")
        );
        let purged = Exit::record(
            &record(),
            Resolution::Aborted,
            Some("turn_completed".into()),
            DecidedBy::by(DecidedVia::TurnCompleted, None, 5),
        );
        assert_eq!(
            purged.log_record(9).rule_id.as_deref(),
            Some("turn_completed")
        );
    }

    #[test]
    fn rule_23_a_replaced_record_is_aborted_by_the_lifecycle() {
        let exit = Exit::replaced(&record(), 7);
        let log = exit.log_record(8);
        assert_eq!(
            (log.decision.as_str(), log.rule_id.as_deref()),
            ("aborted", Some("replaced"))
        );
        assert_eq!(
            serde_json::to_value(&log.decided_by).unwrap(),
            json!({"kind": "lifecycle", "via": "replaced", "at": 7})
        );
        assert_eq!(exit.revision, Some(42), "a link to it says replaced");
    }

    #[test]
    fn rule_21_9_an_unreadable_value_is_announced_but_not_remembered() {
        let entry = UnreadableRecord::of(
            "approval_pending.56",
            "approval_pending",
            &json!({"session_id": "s_1", "function_call_id": "c_1", "turn_id": "t_9"}),
            "missing field".into(),
            |_, _| "approval_pending.56".to_string(),
        );
        let exit = Exit::unreadable(&entry, "s_1", "c_1", human(5));
        assert_eq!(exit.revision, None, "no link names an unreadable value");
        let log = exit.log_record(9);
        assert_eq!(
            (
                log.decision.as_str(),
                log.rule_id.as_deref(),
                log.function_id.as_str()
            ),
            ("aborted", Some("unreadable"), "")
        );
        let event = exit.event(9).expect("announced");
        assert_eq!(
            (event.turn_id.as_str(), event.function_id.as_str()),
            ("t_9", "")
        );
        assert_eq!(event.reason.as_deref(), Some("unreadable"));
    }

    #[test]
    fn rule_23_a_record_no_one_was_told_of_reaches_the_log_alone() {
        let exit = Exit::unannounced(&record(), 7);
        assert_eq!(exit.revision, None);
        assert_eq!(
            serde_json::to_value(exit.log_record(7)).unwrap(),
            json!({"decision": "aborted", "rule_id": "gate", "decided_by": {"kind": "lifecycle", "via": "gate", "at": 7},
                   "session_id": "s_1", "function_call_id": "c_1", "function_id": "shell::run", "at": 7})
        );
        assert!(exit.event(7).is_none(), "no pending-resolved");
    }
}
