//! What the worker remembers of its reviewer, in memory only
//! (`architecture/contract.md` § The reviewer): per session, the last
//! verdicts (the `recent` the reviewer is shown) and the circuit breaker;
//! per call (by its identity, §26.1: another call under the same id is
//! reviewed on its own), the outcome of its review, so a redelivered hook
//! gets the same answer without asking again; the counts `approval::health`
//! shows.
//!
//! Nothing here is durable: the gate still keeps no history. Every map is
//! bounded; past its bound an arbitrary session (or the oldest call) is
//! forgotten. A forgotten call is reviewed again if its hook is delivered
//! again; a forgotten session's breaker starts closed.
//!
//! The calling is the gate's (`gate/review.rs`); the release path tells
//! [`Reviews::human_decided`] when a human decides a call.

pub(crate) mod breaker;
pub(crate) mod stats;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::OnceCell;

use crate::pending::Identity;
use crate::policy::DenialEnvelope;
use crate::terms::review::{Review, ReviewVerdict};
pub(crate) use breaker::{Breaker, Limits};
pub(crate) use stats::Stats;

/// Verdicts a reviewer is shown per session.
pub(crate) const RECENT: usize = 5;
/// Sessions remembered.
const SESSIONS: usize = 10_000;
/// Reviewed calls remembered (redeliveries come within seconds).
const CALLS: usize = 10_000;

/// What the gate answers after a review.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reviewed {
    /// The reviewer allowed the call and saw all of it.
    Continue(Review),
    /// The reviewer denied it and the breaker is closed: the reason for the
    /// model, led `Denied by the reviewer:`.
    Deny {
        /// The reason.
        reason: String,
        /// The structured denial (`denied_by: "reviewer"`).
        envelope: Box<DenialEnvelope>,
        /// The review.
        review: Review,
    },
    /// A human decides; the record carries the review.
    Hold(Review),
}

impl Reviewed {
    /// The review behind the answer.
    pub(crate) fn review(&self) -> &Review {
        match self {
            Reviewed::Continue(review) | Reviewed::Deny { review, .. } | Reviewed::Hold(review) => {
                review
            }
        }
    }

    /// `continue`, `deny` or `hold`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Reviewed::Continue(_) => "continue",
            Reviewed::Deny { .. } => "deny",
            Reviewed::Hold(_) => "hold",
        }
    }
}

/// One verdict of the session's reviewer, as the next review is shown it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct Recent {
    /// The reviewed call.
    pub(crate) function_call_id: String,
    /// Its target.
    pub(crate) function_id: String,
    /// What the reviewer said.
    pub(crate) verdict: ReviewVerdict,
    /// What the gate did: `continue`, `deny` or `hold`.
    pub(crate) outcome: &'static str,
    /// When (ms since the epoch).
    pub(crate) at: u64,
}

#[derive(Debug, Default)]
struct Session {
    recent: VecDeque<Recent>,
    breaker: Breaker,
}

/// One slot per reviewed call: filled once, by the first delivery of its
/// hook; a redelivery waits for it and answers the same.
pub(crate) type Slot = Arc<OnceCell<Reviewed>>;

#[derive(Default)]
struct Calls {
    slots: HashMap<Identity, Slot>,
    order: VecDeque<Identity>,
}

/// The reviewer's memory.
#[derive(Default)]
pub(crate) struct Reviews {
    sessions: Mutex<HashMap<String, Session>>,
    calls: Mutex<Calls>,
    stats: Stats,
}

impl Reviews {
    /// The slot of one call's review (made on first use), by the call's
    /// identity.
    pub(crate) fn slot(&self, key: Identity) -> Slot {
        let mut calls = crate::sync::lock(&self.calls);
        if let Some(slot) = calls.slots.get(&key) {
            return slot.clone();
        }
        let slot = Slot::default();
        calls.slots.insert(key.clone(), slot.clone());
        calls.order.push_back(key);
        while calls.order.len() > CALLS {
            if let Some(old) = calls.order.pop_front() {
                calls.slots.remove(&old);
            }
        }
        slot
    }

    /// The session's last verdicts, oldest first.
    pub(crate) fn recent(&self, session_id: &str) -> Vec<Recent> {
        crate::sync::lock(&self.sessions)
            .get(session_id)
            .map(|s| s.recent.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes one review into the session's breaker; for a denial, answers
    /// whether it must go to a human instead (the breaker is open).
    pub(crate) fn breaker(&self, session_id: &str, verdict: ReviewVerdict, limits: Limits) -> bool {
        let mut sessions = crate::sync::lock(&self.sessions);
        let session = session_mut(&mut sessions, session_id);
        let was_open = session.breaker.is_open();
        let held = session
            .breaker
            .review(verdict == ReviewVerdict::Deny, limits);
        if !was_open && session.breaker.is_open() {
            crate::metrics::breaker_trip();
        }
        if held {
            self.stats.held_by_breaker();
        }
        held
    }

    /// Adds what the gate did to the session's recent verdicts.
    pub(crate) fn remember(&self, session_id: &str, recent: Recent) {
        let mut sessions = crate::sync::lock(&self.sessions);
        let session = session_mut(&mut sessions, session_id);
        if session.recent.len() == RECENT {
            session.recent.pop_front();
        }
        session.recent.push_back(recent);
    }

    /// A human decided a call of the session (a resolve, a link, a batch):
    /// its breaker closes and its counts start over.
    pub(crate) fn human_decided(&self, session_id: &str) {
        if let Some(session) = crate::sync::lock(&self.sessions).get_mut(session_id) {
            session.breaker.reset();
        }
    }

    /// The session was deleted: its recent verdicts, its breaker and its
    /// calls' review slots go.
    pub(crate) fn forget_session(&self, session_id: &str) {
        crate::sync::lock(&self.sessions).remove(session_id);
        let mut calls = crate::sync::lock(&self.calls);
        calls.slots.retain(|call, _| call.session_id != session_id);
        calls.order.retain(|call| call.session_id != session_id);
    }

    /// Whether the session's breaker is open.
    #[cfg(test)]
    pub(crate) fn is_open(&self, session_id: &str) -> bool {
        crate::sync::lock(&self.sessions)
            .get(session_id)
            .is_some_and(|s| s.breaker.is_open())
    }

    /// The counts `approval::health` shows.
    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }
}

/// The session's entry, made on first use; past [`SESSIONS`] an arbitrary
/// other session is forgotten.
fn session_mut<'a>(
    sessions: &'a mut HashMap<String, Session>,
    session_id: &str,
) -> &'a mut Session {
    if !sessions.contains_key(session_id) && sessions.len() >= SESSIONS {
        if let Some(other) = sessions.keys().next().cloned() {
            sessions.remove(&other);
        }
    }
    sessions.entry(session_id.to_owned()).or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terms::review::Review;

    fn recent(i: usize) -> Recent {
        Recent {
            function_call_id: format!("c{i}"),
            function_id: "shell::exec".into(),
            verdict: ReviewVerdict::Allow,
            outcome: "continue",
            at: i as u64,
        }
    }

    #[test]
    fn rule_22_recent_keeps_the_last_five_per_session() {
        let reviews = Reviews::default();
        for i in 0..8 {
            reviews.remember("s", recent(i));
        }
        reviews.remember("other", recent(100));
        let ids: Vec<String> = reviews
            .recent("s")
            .into_iter()
            .map(|r| r.function_call_id)
            .collect();
        assert_eq!(ids, ["c3", "c4", "c5", "c6", "c7"]);
        assert!(reviews.recent("nobody").is_empty());
    }

    fn call(session_id: &str, function_call_id: &str) -> Identity {
        Identity::of(session_id, function_call_id, "t", "shell::exec", None)
    }

    #[tokio::test]
    async fn rule_22_one_slot_per_call_filled_once() {
        let reviews = Reviews::default();
        let a = reviews.slot(call("s", "c"));
        let b = reviews.slot(call("s", "c"));
        assert!(Arc::ptr_eq(&a, &b));
        let review = Review {
            verdict: ReviewVerdict::Escalate,
            rationale: "unsure".into(),
            risk: None,
            held_because: None,
        };
        let first = a
            .get_or_init(|| async { Reviewed::Hold(review.clone()) })
            .await;
        let second = b
            .get_or_init(|| async { unreachable!("a filled slot is not reviewed again") })
            .await;
        assert_eq!(first, second);
        assert!(!Arc::ptr_eq(&a, &reviews.slot(call("s", "other"))));
        // Another call under the same id has a slot of its own (§26.1).
        let args = serde_json::json!({"command": "curl x | sh"});
        let reused = Identity::of("s", "c", "t", "shell::exec", Some(&args));
        assert!(!Arc::ptr_eq(&a, &reviews.slot(reused)));
        let later = Identity::of("s", "c", "t2", "shell::exec", None);
        assert!(!Arc::ptr_eq(&a, &reviews.slot(later)));
        // Bounded: the oldest call is forgotten.
        for i in 0..CALLS {
            reviews.slot(call("s", &format!("x{i}")));
        }
        assert!(!Arc::ptr_eq(&a, &reviews.slot(call("s", "c"))));
    }

    #[test]
    fn rule_22_a_human_decision_closes_the_sessions_breaker_only() {
        let reviews = Reviews::default();
        let limits = Limits {
            consecutive: 1,
            per_50: 10,
        };
        for s in ["a", "b"] {
            assert!(!reviews.breaker(s, ReviewVerdict::Deny, limits));
            assert!(reviews.breaker(s, ReviewVerdict::Deny, limits));
            assert!(reviews.is_open(s));
        }
        reviews.human_decided("a");
        assert!(!reviews.is_open("a"));
        assert!(reviews.is_open("b"));
        assert_eq!(reviews.stats().counts().held_by_breaker, 2);
    }

    #[test]
    fn rule_22_a_deleted_session_leaves_no_memory_and_others_keep_theirs() {
        let reviews = Reviews::default();
        let limits = Limits {
            consecutive: 1,
            per_50: 10,
        };
        for s in ["gone", "kept"] {
            reviews.remember(s, recent(1));
            reviews.breaker(s, ReviewVerdict::Deny, limits);
            reviews.breaker(s, ReviewVerdict::Deny, limits);
        }
        let gone = reviews.slot(call("gone", "c"));
        let kept = reviews.slot(call("kept", "c"));
        reviews.forget_session("gone");
        assert!(reviews.recent("gone").is_empty());
        assert!(!reviews.is_open("gone"));
        assert!(!Arc::ptr_eq(&gone, &reviews.slot(call("gone", "c"))));
        assert_eq!(reviews.recent("kept").len(), 1);
        assert!(reviews.is_open("kept"));
        assert!(Arc::ptr_eq(&kept, &reviews.slot(call("kept", "c"))));
        let calls = crate::sync::lock(&reviews.calls);
        assert_eq!(calls.slots.len(), calls.order.len());
    }
}
