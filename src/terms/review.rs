//! The reviewer's words (`architecture/contract.md` § The reviewer): what it
//! answers, and what a held call's record says of its review. Pure wire
//! forms; what the gate does with them is `gate/review.rs`.
//!
//! # Format
//!
//! The reviewer answers
//! `{ "verdict": "allow" | "deny" | "escalate", "rationale": "...", "risk"?: "low" | "medium" | "high" }`;
//! anything else is malformed (and held for a human). A held call's record
//! and its `pending-created` carry
//! `review: { verdict, rationale, risk?, held_because? }`, where `verdict`
//! may also be `error`, `timeout` or `malformed` (the reviewer gave no
//! usable answer) and `held_because` says why an `allow` or a `deny` still
//! came to a human (`clipped`, `breaker`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest rationale kept (characters); the rest is cut with `…`.
pub(crate) const MAX_RATIONALE_CHARS: usize = 1024;

/// What the reviewer said, or that it said nothing usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The call may run.
    Allow,
    /// The call is refused.
    Deny,
    /// A human decides.
    Escalate,
    /// The call to the reviewer failed.
    Error,
    /// The reviewer did not answer in time.
    Timeout,
    /// The reviewer's answer did not have the contract's shape.
    Malformed,
}

impl ReviewVerdict {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The reviewer's estimate of the call's risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

/// Why a reviewer's `allow` or `deny` still came to a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HeldBecause {
    /// The arguments the reviewer saw were clipped: an `allow` of what it
    /// did not see is a human's call.
    Clipped,
    /// The session's circuit breaker is open: the reviewer denied too
    /// often, so its denials go to a human until one decides.
    Breaker,
    /// Redaction hid part of a command the call runs (contract §25.8): an
    /// `allow` of a command the reviewer did not see whole is a human's
    /// call.
    HiddenCommand,
}

/// A review, as a held call's record and `pending-created` carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Review {
    /// What the reviewer said (`error`, `timeout`, `malformed` when it gave
    /// no usable answer).
    pub verdict: ReviewVerdict,
    /// The reviewer's reason (redacted, at most 1,024 characters), or what
    /// went wrong.
    pub rationale: String,
    /// The reviewer's estimate of the risk, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// Why an `allow` or a `deny` still came to a human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_because: Option<HeldBecause>,
}

/// The reviewer's answer as the contract shapes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
pub(crate) struct ReviewAnswer {
    /// `allow`, `deny` or `escalate`.
    pub(crate) verdict: AnswerVerdict,
    /// Why, for the human (and, on deny, for the model).
    pub(crate) rationale: String,
    /// The call's risk.
    #[serde(default)]
    pub(crate) risk: Option<Risk>,
}

/// The verdicts a reviewer may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AnswerVerdict {
    /// The call may run.
    Allow,
    /// The call is refused.
    Deny,
    /// A human decides.
    Escalate,
}

impl From<AnswerVerdict> for ReviewVerdict {
    fn from(verdict: AnswerVerdict) -> ReviewVerdict {
        match verdict {
            AnswerVerdict::Allow => ReviewVerdict::Allow,
            AnswerVerdict::Deny => ReviewVerdict::Deny,
            AnswerVerdict::Escalate => ReviewVerdict::Escalate,
        }
    }
}

/// Reads a reviewer's reply. Unknown keys are ignored (the engine may add
/// some); a missing or mistyped `verdict` or `rationale`, or an unknown
/// verdict or risk, is malformed: `None`.
pub(crate) fn parse_answer(reply: &Value) -> Option<ReviewAnswer> {
    ReviewAnswer::deserialize(reply).ok()
}

/// `text` cut to [`MAX_RATIONALE_CHARS`] characters (marked `…`).
pub(crate) fn clip_rationale(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_RATIONALE_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rule_22_answers_of_the_contract_shape_parse_and_nothing_else_does() {
        let a = parse_answer(&json!({"verdict": "allow", "rationale": "read-only", "risk": "low", "_caller_worker_id": "w"}))
            .expect("a valid answer");
        assert_eq!(a.verdict, AnswerVerdict::Allow);
        assert_eq!(a.risk, Some(Risk::Low));
        let d = parse_answer(&json!({"verdict": "deny", "rationale": "rm -rf"})).unwrap();
        assert_eq!(ReviewVerdict::from(d.verdict), ReviewVerdict::Deny);
        assert_eq!(d.risk, None);
        for bad in [
            json!(null),
            json!("allow"),
            json!({"verdict": "allow"}),
            json!({"verdict": "ALLOW", "rationale": ""}),
            json!({"verdict": "approve", "rationale": "x"}),
            json!({"verdict": "allow", "rationale": 3}),
            json!({"verdict": "allow", "rationale": "x", "risk": "extreme"}),
            json!({"verdict": ["allow"], "rationale": "x"}),
        ] {
            assert!(parse_answer(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn rule_22_a_rationale_is_clipped_on_a_character_boundary() {
        assert_eq!(clip_rationale("  ok  "), "ok");
        let long = "é".repeat(MAX_RATIONALE_CHARS + 5);
        let clipped = clip_rationale(&long);
        assert_eq!(clipped.chars().count(), MAX_RATIONALE_CHARS + 1);
        assert!(clipped.ends_with('…'));
        let exact = "a".repeat(MAX_RATIONALE_CHARS);
        assert_eq!(clip_rationale(&exact), exact);
    }

    #[test]
    fn rule_22_a_review_leaves_out_what_it_does_not_have() {
        let review = Review {
            verdict: ReviewVerdict::Timeout,
            rationale: "no answer".into(),
            risk: None,
            held_because: None,
        };
        assert_eq!(
            serde_json::to_value(&review).unwrap(),
            json!({"verdict": "timeout", "rationale": "no answer"})
        );
    }
}
