//! Asking the reviewer (`architecture/contract.md` § The reviewer): only
//! about the ladder's default hold, in a reviewed mode, before the call is
//! recorded. Its answer never overrides a human floor — an ask rule, a
//! human-only target, a deny, the lockdown never reach it — and anything but
//! a clear `allow` of what it saw whole, or a `deny` while the session's
//! breaker is closed, holds the call for a human.
//!
//! # Format
//!
//! The gate calls the configured function with
//! ```json
//! { "session_id": "s1", "turn_id": "t1", "function_call_id": "c1", "function_id": "shell::exec",
//!   "arguments": { "command": "git status" },   // the whole redacted arguments, ≤ 64 KiB
//!   "clipped": false,                           // true: something of them is missing
//!   "session": { "title": "Release prep", "metadata": { "team": "web" } },
//!   "mode": "auto",
//!   "recent": [ { "function_call_id": "c0", "function_id": "shell::exec",
//!                 "verdict": "allow", "outcome": "continue", "at": 1700000000000 } ] }
//! ```
//! and reads `{ "verdict": "allow" | "deny" | "escalate", "rationale": "...", "risk"?: "low" | "medium" | "high" }`.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::ReviewerConfig;
use crate::engine::{CallError, ErrorCode, SessionContext};
use crate::hook::budget::Deadline;
use crate::hook::{HookCall, HookInput};
use crate::policy::DenialEnvelope;
use crate::redact::{redact, redact_call_full, redact_text};
use crate::review::{Limits, Recent, Reviewed};
use crate::terms::leads::{self, led};
use crate::terms::review::{clip_rationale, parse_answer, HeldBecause, Review, ReviewVerdict};
use crate::terms::Mode;
use crate::worker::Worker;

/// What the reviewer is shown of the session.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(crate) struct ReviewSession {
    /// The session's title (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The session's metadata (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Value>,
}

/// What the reviewer is asked.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewInput<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) turn_id: &'a str,
    pub(crate) function_call_id: &'a str,
    pub(crate) function_id: &'a str,
    /// The whole redacted arguments, at most 64 KiB of compact JSON.
    pub(crate) arguments: Value,
    /// Whether anything of the arguments is missing from `arguments`.
    pub(crate) clipped: bool,
    pub(crate) session: ReviewSession,
    pub(crate) mode: Mode,
    /// The session's last verdicts (at most 5), oldest first.
    pub(crate) recent: Vec<Recent>,
}

/// Time kept for recording the hold when the reviewer escalates or gives no
/// answer.
const HOLD_RESERVE: Duration = Duration::from_millis(1000);

/// Reviews one call whose ladder verdict is the default hold: asks the
/// reviewer (at most once per call — a redelivered hook waits for the first
/// review's slot and gets the same answer), counts the answer, and turns it
/// into what the gate answers. `context` is the session's (already fetched
/// for the record).
pub(super) async fn review(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    reviewer: &ReviewerConfig,
    mode: Mode,
    context: &SessionContext,
    deadline: Deadline,
) -> Reviewed {
    let sid = input.session_id.as_str();
    let empty = Value::Object(Map::new());
    let full = redact_call_full(&call.function_id, call.arguments.as_ref().unwrap_or(&empty));
    let payload = ReviewInput {
        session_id: sid,
        turn_id: &input.turn_id,
        function_call_id: &call.id,
        function_id: &call.function_id,
        arguments: full.value,
        clipped: full.clipped,
        session: ReviewSession {
            title: context
                .title
                .as_deref()
                .map(|t| redact_text(t).into_owned()),
            metadata: context
                .metadata
                .as_ref()
                .map(|m| redact(&Value::Object(m.clone()))),
        },
        mode,
        recent: worker.reviews.recent(sid),
    };
    let payload = serde_json::to_value(&payload).unwrap_or(Value::Null);
    let wait = deadline.cap(Duration::from_millis(reviewer.timeout()), HOLD_RESERVE);
    let started = Instant::now();
    let review = ask(worker, reviewer, payload, wait).await;
    worker
        .reviews
        .stats()
        .record(review.verdict, started.elapsed());
    let limits = Limits {
        consecutive: reviewer.max_consecutive_denials,
        per_50: reviewer.max_denials_per_50,
    };
    let to_human = worker.reviews.breaker(sid, review.verdict, limits);
    let seen = Seen {
        clipped: full.clipped,
        hidden_command: full.hidden_command,
    };
    let reviewed = outcome(review, seen, to_human, &call.function_id, || {
        call.arguments.clone()
    });
    worker.reviews.remember(
        sid,
        Recent {
            function_call_id: call.id.clone(),
            function_id: call.function_id.clone(),
            verdict: reviewed.review().verdict,
            outcome: reviewed.as_str(),
            at: crate::time::now_ms(),
        },
    );
    let review = reviewed.review();
    tracing::info!(session_id = sid, function_call_id = %call.id, function_id = %call.function_id, reviewer = %reviewer.function_id, verdict = review.verdict.as_str(), decision = reviewed.as_str(), took_ms = started.elapsed().as_millis() as u64, "reviewed");
    reviewed
}

/// One call of the reviewer, its answer read: a review whatever happens.
async fn ask(worker: &Worker, reviewer: &ReviewerConfig, payload: Value, wait: Duration) -> Review {
    let no_answer = |verdict: ReviewVerdict, rationale: String| Review {
        verdict,
        rationale,
        risk: None,
        held_because: None,
    };
    if wait.is_zero() {
        return no_answer(
            ReviewVerdict::Timeout,
            "no time was left in the hook's budget to ask the reviewer".into(),
        );
    }
    // The SDK's own timeout is the call's; this one bounds the gate whatever
    // the connection does.
    let asked = tokio::time::timeout(
        wait,
        worker.engine.review(&reviewer.function_id, payload, wait),
    )
    .await;
    match asked {
        Err(_)
        | Ok(Err(CallError {
            code: ErrorCode::Timeout,
            ..
        })) => no_answer(
            ReviewVerdict::Timeout,
            format!("the reviewer did not answer within {} ms", wait.as_millis()),
        ),
        Ok(Err(err)) => no_answer(
            ReviewVerdict::Error,
            format!("the reviewer failed ({})", err.code),
        ),
        Ok(Ok(reply)) => match parse_answer(&reply) {
            Some(answer) => Review {
                verdict: answer.verdict.into(),
                rationale: clip_rationale(&redact_text(&answer.rationale)),
                risk: answer.risk,
                held_because: None,
            },
            None => no_answer(
                ReviewVerdict::Malformed,
                "the reviewer's answer did not have the shape {verdict, rationale, risk?}".into(),
            ),
        },
    }
}

/// What the reviewer saw of the arguments, as far as an `allow` depends on
/// it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen {
    /// Something of the arguments is missing (cut to the cap).
    pub(crate) clipped: bool,
    /// Redaction hid something inside a command field (contract §25.8).
    pub(crate) hidden_command: bool,
}

/// PURE: what the gate answers for a review. `seen`: whether the reviewer
/// saw all of the arguments, and all of every command. `to_human`: the
/// session's breaker sends this denial to a human. `arguments`: the
/// call's, for a denial's envelope.
pub(crate) fn outcome(
    mut review: Review,
    seen: Seen,
    to_human: bool,
    function_id: &str,
    arguments: impl FnOnce() -> Option<Value>,
) -> Reviewed {
    match review.verdict {
        ReviewVerdict::Allow if seen.hidden_command => {
            review.held_because = Some(HeldBecause::HiddenCommand);
            Reviewed::Hold(review)
        }
        ReviewVerdict::Allow if seen.clipped => {
            review.held_because = Some(HeldBecause::Clipped);
            Reviewed::Hold(review)
        }
        ReviewVerdict::Allow => Reviewed::Continue(review),
        ReviewVerdict::Deny if to_human => {
            review.held_because = Some(HeldBecause::Breaker);
            Reviewed::Hold(review)
        }
        ReviewVerdict::Deny => {
            let reason = led(
                leads::REVIEWER,
                &format!(
                    "{} ({function_id} was not run; try another way, or ask the user to approve it)",
                    review.rationale
                ),
            );
            let envelope = Box::new(DenialEnvelope::by_reviewer(
                function_id,
                &reason,
                arguments(),
            ));
            Reviewed::Deny {
                reason,
                envelope,
                review,
            }
        }
        ReviewVerdict::Escalate
        | ReviewVerdict::Error
        | ReviewVerdict::Timeout
        | ReviewVerdict::Malformed => Reviewed::Hold(review),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::budget::HOOK_BUDGET;
    use crate::terms::review::Risk;

    fn review(verdict: ReviewVerdict) -> Review {
        Review {
            verdict,
            rationale: "because".into(),
            risk: Some(Risk::Medium),
            held_because: None,
        }
    }

    #[test]
    fn rule_22_the_reviewer_timeout_ceiling_is_the_hook_budget_less_a_second() {
        assert_eq!(
            crate::config::REVIEWER_TIMEOUT_CEILING_MS,
            HOOK_BUDGET.as_millis() as u64 - 1000
        );
    }

    #[test]
    fn rule_22_only_an_allow_of_what_was_seen_whole_continues() {
        let out = |verdict, clipped, to_human| {
            let seen = Seen {
                clipped,
                hidden_command: false,
            };
            outcome(review(verdict), seen, to_human, "shell::exec", || None)
        };
        assert!(matches!(
            out(ReviewVerdict::Allow, false, false),
            Reviewed::Continue(_)
        ));
        let held = out(ReviewVerdict::Allow, true, false);
        assert!(matches!(&held, Reviewed::Hold(r) if r.held_because == Some(HeldBecause::Clipped)));
        for verdict in [
            ReviewVerdict::Escalate,
            ReviewVerdict::Error,
            ReviewVerdict::Timeout,
            ReviewVerdict::Malformed,
        ] {
            for clipped in [false, true] {
                assert!(
                    matches!(out(verdict, clipped, false), Reviewed::Hold(_)),
                    "{verdict:?}"
                );
            }
        }
    }

    #[test]
    fn rule_22_a_denial_is_led_for_the_model_unless_the_breaker_sends_it_to_a_human() {
        match outcome(
            review(ReviewVerdict::Deny),
            Seen::default(),
            false,
            "shell::exec",
            || None,
        ) {
            Reviewed::Deny {
                reason,
                review,
                envelope,
            } => {
                assert_eq!(envelope.reason, reason);
                assert_eq!(
                    serde_json::to_value(&envelope).unwrap()["denied_by"],
                    "reviewer"
                );
                assert!(
                    reason.starts_with("Denied by the reviewer: because"),
                    "{reason}"
                );
                assert!(reason.contains("shell::exec"), "{reason}");
                assert_eq!(review.verdict, ReviewVerdict::Deny);
            }
            other => panic!("{other:?}"),
        }
        let held = outcome(
            review(ReviewVerdict::Deny),
            Seen::default(),
            true,
            "shell::exec",
            || None,
        );
        assert!(matches!(&held, Reviewed::Hold(r) if r.held_because == Some(HeldBecause::Breaker)));
    }

    #[test]
    fn rule_25_8_the_reviewer_never_allows_a_command_it_did_not_see_whole() {
        for clipped in [false, true] {
            let seen = Seen {
                clipped,
                hidden_command: true,
            };
            let held = outcome(
                review(ReviewVerdict::Allow),
                seen,
                false,
                "shell::exec",
                || None,
            );
            assert!(
                matches!(&held, Reviewed::Hold(r) if r.held_because == Some(HeldBecause::HiddenCommand)),
                "{held:?}"
            );
        }
        // A denial of a hidden command stays a denial.
        let seen = Seen {
            clipped: false,
            hidden_command: true,
        };
        let denied = outcome(
            review(ReviewVerdict::Deny),
            seen,
            false,
            "shell::exec",
            || None,
        );
        assert!(matches!(denied, Reviewed::Deny { .. }));
        // What the reviewer is shown says so: a shell call's secret word.
        let full = redact_call_full(
            "shell::exec",
            &serde_json::json!({"command": "mysql -pSECRETpass1 db"}),
        );
        assert!(full.hidden_command);
        assert_eq!(full.value["command"], "mysql <redacted> db");
        let plain = redact_call_full("shell::exec", &serde_json::json!({"command": "git status"}));
        assert!(!plain.hidden_command);
    }
}
