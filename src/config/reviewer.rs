//! The `reviewer` field of the entry (`architecture/contract.md` § The
//! reviewer): off when absent or null.
//!
//! # Format
//!
//! ```json
//! { "function_id": "review::call",       // a function another worker registers
//!   "modes": ["auto"],                   // sessions whose mode is listed are reviewed
//!   "timeout_ms": 4000,                  // clamped to the hook budget less 1000 ms
//!   "max_consecutive_denials": 3,        // the breaker: denials in a row …
//!   "max_denials_per_50": 10 }           // … or among a session's last 50 reviews
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::terms::Mode;

/// The longest a reviewer may take: the hooks' own budget (4 s, below the
/// harness's 5 s) less 1000 ms kept for recording a hold when the reviewer
/// escalates or gives no answer. (`gate` checks that this is the hook
/// budget less 1000 ms.)
pub(crate) const REVIEWER_TIMEOUT_CEILING_MS: u64 = 3000;
/// Default `timeout_ms` (clamped to [`REVIEWER_TIMEOUT_CEILING_MS`]).
pub(super) const DEFAULT_REVIEWER_TIMEOUT_MS: u64 = 4000;
/// Default `max_consecutive_denials`.
pub(super) const DEFAULT_MAX_CONSECUTIVE_DENIALS: u32 = 3;
/// Default `max_denials_per_50`.
pub(super) const DEFAULT_MAX_DENIALS_PER_50: u32 = 10;
/// The shortest `timeout_ms` accepted.
pub(super) const MIN_REVIEWER_TIMEOUT_MS: u64 = 1;
/// The breaker's window: a session's last this-many reviews.
pub(crate) const BREAKER_WINDOW: u32 = 50;

/// `reviewer`: an automated reviewer asked about calls that would
/// otherwise wait for a human by default. Its configuration schema is
/// derived from here: the attributes give what an operator reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewerConfig {
    /// The function the gate calls with each review.
    #[schemars(
        title = "Reviewer function",
        description = "The function the gate calls with {session_id, turn_id, function_call_id, function_id, arguments, clipped, session, mode, recent}; it answers {verdict: allow|deny|escalate, rationale, risk?}.",
        length(min = 1),
        regex(pattern = r"^\S(.*\S)?$"),
        example = "example_function_id"
    )]
    pub function_id: String,
    /// The session modes reviewed.
    #[serde(default = "default_modes")]
    #[schemars(
        title = "Reviewed modes",
        description = "Sessions in these modes are reviewed."
    )]
    pub modes: Vec<Mode>,
    /// How long the gate waits for the reviewer (clamped, see
    /// [`ReviewerConfig::timeout`]).
    #[serde(default = "default_timeout_ms")]
    #[schemars(
        title = "Reviewer timeout (ms)",
        description = "How long the gate waits for the reviewer; clamped to 3000 (the hook budget less 1000 ms, kept to record the hold). No answer in time holds the call for a human.",
        range(min = 1)
    )]
    pub timeout_ms: u64,
    /// The breaker opens after this many reviewer denials in a row in a
    /// session (0: every denial goes to a human).
    #[serde(default = "default_consecutive")]
    #[schemars(
        title = "Denials in a row before a human",
        description = "After this many reviewer denials in a row in a session, its denials hold the call for a human until a human decides a call of the session (0: every denial goes to a human)."
    )]
    pub max_consecutive_denials: u32,
    /// … or after this many among the session's last 50 reviews
    /// (0: every denial goes to a human).
    #[serde(default = "default_per_50")]
    #[schemars(
        title = "Denials per 50 reviews before a human",
        description = "After this many reviewer denials among a session's last 50 reviews, its denials hold the call for a human until a human decides a call of the session (0: every denial goes to a human).",
        range(max = 50)
    )]
    pub max_denials_per_50: u32,
}

fn example_function_id() -> &'static str {
    "review::call"
}

fn default_modes() -> Vec<Mode> {
    vec![Mode::Auto]
}

fn default_timeout_ms() -> u64 {
    DEFAULT_REVIEWER_TIMEOUT_MS
}

fn default_consecutive() -> u32 {
    DEFAULT_MAX_CONSECUTIVE_DENIALS
}

fn default_per_50() -> u32 {
    DEFAULT_MAX_DENIALS_PER_50
}

impl ReviewerConfig {
    /// A reviewer at `function_id` with every default.
    pub fn new(function_id: impl Into<String>) -> ReviewerConfig {
        ReviewerConfig {
            function_id: function_id.into(),
            modes: default_modes(),
            timeout_ms: DEFAULT_REVIEWER_TIMEOUT_MS,
            max_consecutive_denials: DEFAULT_MAX_CONSECUTIVE_DENIALS,
            max_denials_per_50: DEFAULT_MAX_DENIALS_PER_50,
        }
    }

    /// The wait in force (ms): `timeout_ms`, at most
    /// [`REVIEWER_TIMEOUT_CEILING_MS`].
    pub fn timeout(&self) -> u64 {
        self.timeout_ms.min(REVIEWER_TIMEOUT_CEILING_MS)
    }

    /// Whether sessions in `mode` are reviewed.
    pub fn reviews(&self, mode: Mode) -> bool {
        self.modes.contains(&mode)
    }

    /// Why the value cannot be used, in words an operator can act on.
    fn check(&self) -> Result<(), String> {
        let id = self.function_id.trim();
        if id.is_empty() {
            return Err("reviewer.function_id must not be empty".into());
        }
        if id != self.function_id {
            return Err(format!(
                "reviewer.function_id {:?} must not start or end with whitespace",
                self.function_id
            ));
        }
        if self.timeout_ms < MIN_REVIEWER_TIMEOUT_MS {
            return Err(format!(
                "reviewer.timeout_ms must be at least {MIN_REVIEWER_TIMEOUT_MS} (it is clamped to {REVIEWER_TIMEOUT_CEILING_MS})"
            ));
        }
        if self.max_denials_per_50 > BREAKER_WINDOW {
            return Err(format!(
                "reviewer.max_denials_per_50 must be at most {BREAKER_WINDOW}, got {}",
                self.max_denials_per_50
            ));
        }
        Ok(())
    }
}

/// `reviewer` as stored: null or absent is off; an object is parsed and
/// checked; anything else is refused.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ReviewerConfig>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value @ Value::Object(_) => {
            let reviewer = ReviewerConfig::deserialize(value)
                .map_err(|e| D::Error::custom(format!("reviewer: {e}")))?;
            reviewer.check().map_err(D::Error::custom)?;
            Ok(Some(reviewer))
        }
        _ => Err(D::Error::custom(
            "reviewer must be an object or null (e.g. {\"function_id\": \"review::call\"})",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::ApprovalConfig;

    use super::*;

    fn parse(reviewer: Value) -> Result<Option<ReviewerConfig>, String> {
        ApprovalConfig::from_value(&json!({ "reviewer": reviewer }))
            .map(|c| c.reviewer)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn rule_22_absent_or_null_is_off_and_an_id_alone_takes_every_default() {
        assert_eq!(
            ApprovalConfig::from_value(&json!({})).unwrap().reviewer,
            None
        );
        assert_eq!(parse(json!(null)).unwrap(), None);
        let r = parse(json!({"function_id": "review::call"}))
            .unwrap()
            .unwrap();
        assert_eq!(r, ReviewerConfig::new("review::call"));
        assert_eq!(r.modes, vec![Mode::Auto]);
        assert_eq!(r.timeout_ms, 4000);
        assert_eq!(r.timeout(), 3000, "clamped to the hook budget less 1000");
        assert_eq!(r.max_consecutive_denials, 3);
        assert_eq!(r.max_denials_per_50, 10);
        assert!(r.reviews(Mode::Auto));
        assert!(!r.reviews(Mode::Manual));
        let r = parse(
            json!({"function_id": "r", "modes": ["manual", "auto"], "timeout_ms": 250,
                             "max_consecutive_denials": 0, "max_denials_per_50": 50}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.timeout(), 250);
        assert!(r.reviews(Mode::Manual));
    }

    #[test]
    fn rule_22_a_bad_reviewer_is_refused_with_a_message_that_names_the_field() {
        for (bad, says) in [
            (json!("review::call"), "reviewer must be an object or null"),
            (json!({}), "function_id"),
            (
                json!({"function_id": ""}),
                "reviewer.function_id must not be empty",
            ),
            (json!({"function_id": " r "}), "whitespace"),
            (
                json!({"function_id": "r", "timeout_ms": 0}),
                "reviewer.timeout_ms",
            ),
            (json!({"function_id": "r", "timeout_ms": -1}), "reviewer"),
            (
                json!({"function_id": "r", "max_denials_per_50": 51}),
                "at most 50",
            ),
            (
                json!({"function_id": "r", "modes": ["sometimes"]}),
                "reviewer",
            ),
            (
                json!({"function_id": "r", "model": "x"}),
                "unknown field `model`",
            ),
        ] {
            let err = parse(bad.clone()).expect_err(&bad.to_string());
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn rule_22_the_reviewer_round_trips_and_is_left_out_when_off() {
        let config = ApprovalConfig::from_value(
            &json!({"reviewer": {"function_id": "review::call", "timeout_ms": 1500}}),
        )
        .unwrap();
        let again = ApprovalConfig::from_value(&config.to_json()).unwrap();
        assert_eq!(again, config);
        assert!(ApprovalConfig::default()
            .to_json()
            .get("reviewer")
            .is_none());
        assert_eq!(config.configured_ids(), vec!["review::call"]);
        assert!(ApprovalConfig::default().configured_ids().is_empty());
    }

    #[test]
    fn rule_22_the_reviewers_id_is_human_only_and_only_the_default_hold_is_reviewable() {
        use crate::config::Snapshot;
        use crate::policy::{decide, Basis, Call, Family, Verdict};

        let config = ApprovalConfig::from_value(&json!({
            "default_mode": "auto",
            "rules": ["!approval::*", "?deploy::*", "!demo::other", "demo::echo"],
            "reviewer": {"function_id": "review::call"}
        }))
        .unwrap();
        let snap = Snapshot::compile(config);
        let decide_on = |fid: &'static str| {
            decide(
                &snap.defaults,
                &snap.rules,
                &Call {
                    function_id: fid,
                    arguments: None,
                },
            )
        };
        for fid in ["review::call", "Review::Call", " review::call\u{200b}"] {
            let d = decide_on(fid);
            assert_eq!(d.verdict, Verdict::Deny, "{fid}");
            assert!(
                matches!(d.basis, Basis::HumanOnly { guard } if guard.family == Family::Configured),
                "{fid}: {d:?}"
            );
            assert!(!d.is_default_hold());
        }
        // Only the whole id: a longer one follows the ladder.
        assert!(decide_on("review::call2").is_default_hold());
        assert!(decide_on("unknown::fn").is_default_hold());
        assert!(!decide_on("deploy::prod").is_default_hold(), "an ask rule");
        assert!(!decide_on("demo::other").is_default_hold(), "a deny rule");
        assert!(!decide_on("demo::echo").is_default_hold(), "an allow");
        // Without a reviewer its id is an ordinary function.
        let off = Snapshot::compile(ApprovalConfig::default());
        let d = decide(
            &off.defaults,
            &off.rules,
            &Call {
                function_id: "review::call",
                arguments: None,
            },
        );
        assert!(d.is_default_hold());
        // The lockdown holds, but not by default: never reviewed.
        let lockdown = Snapshot::lockdown(Vec::new());
        let d = decide(
            &lockdown.defaults,
            &lockdown.rules,
            &Call {
                function_id: "unknown::fn",
                arguments: None,
            },
        );
        assert_eq!(d.verdict, Verdict::Hold);
        assert!(!d.is_default_hold());
        // Under deny_ask_allow the default hold is the last step too.
        let config = ApprovalConfig::from_value(&json!({
            "rule_precedence": "deny_ask_allow", "rules": ["!approval::*", "demo::echo"],
            "reviewer": {"function_id": "review::call"}
        }))
        .unwrap();
        let snap = Snapshot::compile(config);
        let d = decide(
            &snap.defaults,
            &snap.rules,
            &Call {
                function_id: "unknown::fn",
                arguments: None,
            },
        );
        assert!(d.is_default_hold());
    }
}
