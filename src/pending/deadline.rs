//! Holds that end (`architecture/contract.md` § Holds that end): when a hold
//! is escalated and when it is denied for want of an answer, and what the
//! model reads then. Pure: the timer ([`super::timer`]) acts on what this
//! computes.
//!
//! Every hold's deadlines are computed here, once, when its record is built:
//! from the limits of the rule behind the hold (an ask rule's `timeout_ms` /
//! `escalate_after_ms`) and, where the rule sets none, the configuration's
//! `pending_timeout_ms` / `escalate_after_ms`. A configuration change applies
//! to new holds only: a record keeps the deadlines it was written with.

use crate::config::ApprovalConfig;
use crate::policy::{Basis, Decision};

use super::record::PendingRecord;
use crate::engine::ReleaseAction;
use crate::policy::DenialEnvelope;

/// The limits the rule behind a hold gives it; a limit it leaves out falls
/// back to the configuration's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldLimits {
    /// Deny the hold this long after it began (ms).
    pub timeout_ms: Option<u64>,
    /// Escalate the hold this long after it began (ms).
    pub escalate_after_ms: Option<u64>,
}

impl HoldLimits {
    /// The limits of the rule that decided `decision`. Only ask rules carry
    /// limits (`architecture/contract.md` § Holds that end); any other hold
    /// takes the configuration's.
    pub fn of(decision: &Decision<'_>) -> HoldLimits {
        match decision.basis {
            Basis::Ask {
                timeout_ms,
                escalate_after_ms,
                ..
            } => HoldLimits {
                timeout_ms,
                escalate_after_ms,
            },
            _ => HoldLimits::default(),
        }
    }
}

/// When a hold is escalated and when it expires (ms since the epoch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Deadlines {
    /// `pending_at` + the timeout, when one applies.
    pub expires_at: Option<u64>,
    /// `pending_at` + the escalation delay, when one applies and it falls
    /// before the expiry (an escalation at or after the expiry would never
    /// fire, and a record that showed it would promise one).
    pub escalate_at: Option<u64>,
}

/// The timeout a hold decided with `rule` gets under `config` (ms).
pub(crate) fn timeout_ms(rule: HoldLimits, config: &ApprovalConfig) -> Option<u64> {
    rule.timeout_ms.or(config.pending_timeout_ms)
}

/// The deadlines of a hold that began at `pending_at`.
pub(crate) fn deadlines(pending_at: u64, rule: HoldLimits, config: &ApprovalConfig) -> Deadlines {
    let expires_at = timeout_ms(rule, config).map(|ms| pending_at.saturating_add(ms));
    let escalate_at = rule
        .escalate_after_ms
        .or(config.escalate_after_ms)
        .map(|ms| pending_at.saturating_add(ms))
        .filter(|at| expires_at.is_none_or(|expiry| *at < expiry));
    Deadlines {
        expires_at,
        escalate_at,
    }
}

/// What the model reads when no one answered a hold within `waited_ms`:
/// what did not happen, and what it can do instead.
pub(super) fn timeout_reason(record: &PendingRecord, waited_ms: u64) -> String {
    let waited = duration_text(waited_ms);
    let function_id = &record.function_id;
    match (record.kind, record.grant_request.as_deref()) {
        (kind, Some(grant)) if kind.is_folder() => format!(
            "Approval timed out: no one allowed access to {dir} within {waited}, so {function_id} could not use it. Ask the user to grant access to {dir}, or try another way.",
            dir = grant.dir
        ),
        _ => format!(
            "Approval timed out: no one approved {function_id} within {waited}, so it was not run. Ask the user to approve it, or try another way."
        ),
    }
}

/// The deny the timer delivers when no one answered `record` by its
/// `expires_at`: the reason for the model, with a `denied_by: "timeout"`
/// envelope.
pub(crate) fn timeout_denial(record: &PendingRecord) -> ReleaseAction {
    let waited = record
        .expires_at
        .map(|at| at.saturating_sub(record.pending_at))
        .unwrap_or(0);
    let text = timeout_reason(record, waited);
    let envelope = DenialEnvelope::by_timeout(
        &record.function_id,
        &text,
        Some(record.arguments_excerpt.to_value()),
    );
    ReleaseAction::deny(
        &text,
        serde_json::to_value(envelope).unwrap_or(serde_json::Value::Null),
    )
}

/// `30 minutes`, `1 hour`, `45 seconds`: the largest unit that divides the
/// duration, else whole seconds.
fn duration_text(ms: u64) -> String {
    let (n, unit) = if ms >= 3_600_000 && ms.is_multiple_of(3_600_000) {
        (ms / 3_600_000, "hour")
    } else if ms >= 60_000 && ms.is_multiple_of(60_000) {
        (ms / 60_000, "minute")
    } else {
        ((ms + 500) / 1000, "second")
    };
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::record::RecordKind;
    use super::*;
    use crate::engine::Release;
    use crate::pending::GrantRequest;

    fn config(timeout: Option<u64>, escalate: Option<u64>) -> ApprovalConfig {
        ApprovalConfig {
            pending_timeout_ms: timeout,
            escalate_after_ms: escalate,
            ..ApprovalConfig::default()
        }
    }

    #[test]
    fn no_limits_no_deadlines() {
        assert_eq!(
            deadlines(1_000, HoldLimits::default(), &ApprovalConfig::default()),
            Deadlines::default()
        );
    }

    #[test]
    fn the_configuration_sets_both_and_a_rule_wins_over_it() {
        let config = config(Some(1_800_000), Some(600_000));
        assert_eq!(
            deadlines(1_000, HoldLimits::default(), &config),
            Deadlines {
                expires_at: Some(1_801_000),
                escalate_at: Some(601_000)
            }
        );
        let rule = HoldLimits {
            timeout_ms: Some(60_000),
            escalate_after_ms: None,
        };
        assert_eq!(
            deadlines(1_000, rule, &config),
            Deadlines {
                expires_at: Some(61_000),
                // The configuration's escalation would come after the rule's
                // expiry: it would never fire.
                escalate_at: None
            }
        );
        let rule = HoldLimits {
            timeout_ms: None,
            escalate_after_ms: Some(5_000),
        };
        assert_eq!(
            deadlines(1_000, rule, &config),
            Deadlines {
                expires_at: Some(1_801_000),
                escalate_at: Some(6_000)
            }
        );
        assert_eq!(timeout_ms(rule, &config), Some(1_800_000));
        assert_eq!(
            timeout_ms(
                HoldLimits {
                    timeout_ms: Some(2_000),
                    escalate_after_ms: None
                },
                &config
            ),
            Some(2_000)
        );
    }

    #[test]
    fn escalation_alone_and_escalation_at_the_expiry() {
        assert_eq!(
            deadlines(0, HoldLimits::default(), &config(None, Some(600_000))),
            Deadlines {
                expires_at: None,
                escalate_at: Some(600_000)
            }
        );
        assert_eq!(
            deadlines(0, HoldLimits::default(), &config(Some(5_000), Some(5_000))),
            Deadlines {
                expires_at: Some(5_000),
                escalate_at: None
            }
        );
        assert_eq!(
            deadlines(
                u64::MAX - 1,
                HoldLimits::default(),
                &config(Some(5_000), None)
            )
            .expires_at,
            Some(u64::MAX)
        );
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(duration_text(1_800_000), "30 minutes");
        assert_eq!(duration_text(60_000), "1 minute");
        assert_eq!(duration_text(3_600_000), "1 hour");
        assert_eq!(duration_text(7_200_000), "2 hours");
        assert_eq!(duration_text(5_400_000), "90 minutes");
        assert_eq!(duration_text(45_000), "45 seconds");
        assert_eq!(duration_text(1_000), "1 second");
        assert_eq!(duration_text(1_499), "1 second");
        assert_eq!(duration_text(90_500), "91 seconds");
    }

    fn record(kind: RecordKind) -> PendingRecord {
        PendingRecord {
            session_id: "s".into(),
            turn_id: "t".into(),
            function_call_id: "c".into(),
            function_id: "shell::run".into(),
            kind,
            arguments_excerpt: json!({}).into(),
            fs_scope: None,
            pending_at: 0,
            depth: 0,
            session_title: None,
            session_description: None,
            session_metadata: None,
            grant_request: None,
            access_request: None,
            assistant_excerpt: None,
            expires_at: Some(1_800_000),
            escalate_at: None,
            escalated_at: None,
            releasing: false,
            release: None,
            uncertain: false,
            review: None,
            runs: None,
            suggested_prefix: None,
            protected_path: None,
        }
    }

    #[test]
    fn the_reason_says_what_did_not_happen_and_what_to_do() {
        assert_eq!(
            timeout_reason(&record(RecordKind::Function), 1_800_000),
            "Approval timed out: no one approved shell::run within 30 minutes, so it was not run. Ask the user to approve it, or try another way."
        );
        let mut folder = record(RecordKind::FolderAccess);
        folder.grant_request = Some(Box::new(GrantRequest {
            dir: "/data/reports".into(),
            offending_path: "/data/reports/q3.csv".into(),
            error_code: "S215".into(),
        }));
        assert_eq!(
            timeout_reason(&folder, 60_000),
            "Approval timed out: no one allowed access to /data/reports within 1 minute, so shell::run could not use it. Ask the user to grant access to /data/reports, or try another way."
        );
    }

    #[test]
    fn the_timeout_denial_tells_the_model_and_says_timeout() {
        let mut r = record(RecordKind::Function);
        r.arguments_excerpt = json!({"cmd": "ls"}).into();
        r.pending_at = 100;
        r.expires_at = Some(100 + 1_800_000);
        let Release { action, .. } = r.release(timeout_denial(&r));
        let wire = serde_json::to_value(&action).expect("serializes");
        let text = "Approval timed out: no one approved shell::run within 30 minutes, so it was not run. Ask the user to approve it, or try another way.";
        assert_eq!(wire["action"], "deliver");
        assert_eq!(wire["is_error"], true);
        assert_eq!(wire["content"], json!([{"type": "text", "text": text}]));
        assert_eq!(wire["details"]["denied_by"], "timeout");
        assert_eq!(wire["details"]["reason"], text);
        assert_eq!(wire["details"]["function_id"], "shell::run");
        assert_eq!(wire["details"]["args_excerpt"], json!({"cmd": "ls"}));
    }
}
