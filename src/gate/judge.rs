//! The gate's answer for one parsed hook input, as a pure function of the
//! input, the session's compiled settings and the compiled rules — the part
//! of `approval::gate` that property tests and fuzzing exercise without an
//! engine. See `architecture/contract.md` § The gate.

use serde_json::{Map, Value};

use crate::error::is_valid_id;
use crate::hook::{HookCall, HookInput};
use crate::policy::{
    decide_with, Basis, Call, CompiledRules, CompiledSettings, DecideOptions, GrantRef, Readings,
    Verdict, WIDENING_ROOT_RULE,
};
use crate::settings::Entry;

/// What the gate answers, before any I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement<'r> {
    /// Let the call run — after spending one use of `spend`, when set.
    Continue {
        /// The rule (or ladder step) that allowed it.
        rule: Option<&'r str>,
        /// The uses-bounded grant that allowed it: one use must be written
        /// before the call continues; if that write fails, the grant does
        /// not apply and the call is judged again without it.
        spend: Option<Spend<'r>>,
    },
    /// Refuse the call with a reason written for the model.
    Deny {
        /// The reason.
        reason: String,
        /// The rule (or ladder step) that denied it.
        rule: Option<&'r str>,
    },
    /// Park the call for a human (the caller records it first).
    Hold {
        /// The ask rule that holds it, with its own deadlines (or
        /// `widening_root`, held like an ask rule with the configuration's
        /// deadlines); `None` when no rule decided.
        ask: Option<AskHold<'r>>,
        /// The ladder's default hold ([`crate::policy::Decision::is_default_hold`]):
        /// no rule decided and it is not the lockdown — the only hold a
        /// configured reviewer may be asked about.
        by_default: bool,
        /// The rule (or ladder step) that holds it, when one decided
        /// (`opaque_command` for an opaque command's hold).
        rule: Option<&'r str>,
    },
}

/// A use of a uses-bounded grant to write before the call continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spend<'r> {
    /// Where the grant is in the settings the call was judged with.
    pub grant: GrantRef,
    /// The grant as it was judged.
    pub entry: &'r Entry,
}

/// The ask rule behind a hold: what the hold's deadlines come from
/// (`architecture/contract.md` § Permission model, ask rules; the rule's own
/// values win over the configuration's global ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskHold<'r> {
    /// The ask rule's id.
    pub rule_id: &'r str,
    /// The rule's `timeout_ms`, when it sets one.
    pub timeout_ms: Option<u64>,
    /// The rule's `escalate_after_ms`, when it sets one.
    pub escalate_after_ms: Option<u64>,
}

/// The deny reason for an input without a call.
pub(crate) const NO_CALL: &str =
    "Permission denied by policy: approval-gate received a pre_trigger hook input without a call payload";

/// The rule the logs and `approval::evaluate` name when the gate cannot
/// know a session's settings.
pub(crate) const GATE_UNAVAILABLE: &str = "gate_unavailable";

/// The deny reason when a session's stored settings cannot be read: the
/// defaults may allow more than what a human set for the session, so the
/// call is refused, never decided with them.
pub(crate) fn settings_unknown(session_id: &str, function_id: &str, code: &str) -> String {
    format!(
        "Approval gate unavailable (retry later): the approval settings of session {session_id} could not be read ({code}), so {function_id} is denied rather than decided without them. Try again shortly."
    )
}

/// Whether the input's ids can key a record.
pub(crate) fn ids_are_valid(input: &HookInput, call: &HookCall) -> bool {
    is_valid_id(&input.session_id) && is_valid_id(&call.id)
}

/// Judges one call. `settings` are the session's (or the defaults when the
/// session has nothing stored). Human-only targets are denied whatever the
/// ids; any other call with unusable ids is denied because it could never be
/// recorded or released.
pub fn judge<'r>(
    input: &'r HookInput,
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
) -> Judgement<'r> {
    judge_passing_over(input, settings, rules, &[])
}

/// As [`judge`], passing over grants whose use could not be written.
pub fn judge_passing_over<'r>(
    input: &'r HookInput,
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    passed_over: &[GrantRef],
) -> Judgement<'r> {
    judge_in_turn(
        input,
        settings,
        rules,
        passed_over,
        input.metadata.as_ref(),
        None,
    )
}

/// As [`judge_passing_over`], judging a widening root against `turn` (the
/// input's metadata, or that metadata with the session's durable grants
/// added to `fs_scope.grants`), with the call's command fields read
/// beforehand (`readings`; `None`: read here when a rule needs them).
pub(crate) fn judge_in_turn<'r>(
    input: &'r HookInput,
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    passed_over: &[GrantRef],
    turn: Option<&Map<String, Value>>,
    readings: Option<&Readings>,
) -> Judgement<'r> {
    let Some(call) = input.call.as_ref() else {
        return Judgement::Deny {
            reason: NO_CALL.to_string(),
            rule: None,
        };
    };
    let decision = decide_with(
        settings,
        rules,
        &Call {
            function_id: &call.function_id,
            arguments: call.arguments.as_ref(),
        },
        DecideOptions {
            passed_over,
            turn,
            readings,
            ..DecideOptions::default()
        },
    );
    if !ids_are_valid(input, call) && !matches!(decision.basis, Basis::HumanOnly { .. }) {
        return Judgement::Deny {
            reason: format!(
                "Permission denied by policy: approval-gate cannot evaluate {}: session_id / function_call_id must be non-empty and must not contain \"/\"",
                call.function_id
            ),
            rule: None,
        };
    }
    let rule = decision.rule_id();
    match decision.verdict {
        Verdict::Allow => Judgement::Continue {
            rule,
            spend: decision
                .use_to_spend()
                .map(|(grant, entry)| Spend { grant, entry }),
        },
        Verdict::Deny => Judgement::Deny {
            reason: decision.reason_with(&call.function_id, readings),
            rule,
        },
        Verdict::Hold => Judgement::Hold {
            by_default: decision.is_default_hold(),
            rule,
            ask: match decision.basis {
                Basis::Ask {
                    timeout_ms,
                    escalate_after_ms,
                    ..
                } => Some(AskHold {
                    rule_id: rule.unwrap_or_default(),
                    timeout_ms,
                    escalate_after_ms,
                }),
                // Held like an ask rule, with the configuration's deadlines.
                Basis::WideningRoot { .. } => Some(AskHold {
                    rule_id: WIDENING_ROOT_RULE,
                    timeout_ms: None,
                    escalate_after_ms: None,
                }),
                _ => None,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::{ApprovalConfig, Snapshot};
    use crate::engine::SessionContext;
    use crate::hook::parse_hook_input;
    use crate::hook::record::build_record;
    use crate::pending::RecordKind;
    use crate::redact::calls;

    fn input(function_id: &str) -> HookInput {
        parse_hook_input(json!({
            "point": "pre_trigger", "session_id": "s1", "turn_id": "t1", "step": 0, "depth": 0,
            "call": {"id": "c1", "function_id": function_id, "arguments": {
                "cmd": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl'",
                "api_key": "sk-live-0123456789abcdef0123456789abcdef",
                "long": "x".repeat(20_000)
            }}
        }))
        .expect("a valid hook input")
    }

    /// Continue and deny do no redaction at all, however secret-laden the
    /// arguments: only a hold (which builds a record) redacts.
    #[test]
    fn continue_and_deny_never_redact_and_a_hold_does() {
        let config = ApprovalConfig::from_value(&json!({
            "default_mode": "manual",
            "rules": ["!approval::*", "!shell::rm", "shell::ls"]
        }))
        .expect("config");
        let snapshot = Snapshot::compile(config);
        // What the gate answers, as text, and how many times judging it
        // entered the redactor.
        let judge_of = |fid: &str| {
            let hook = input(fid);
            let before = calls::so_far();
            let judgement = judge(&hook, &snapshot.defaults, &snapshot.rules);
            let redactions = calls::so_far() - before;
            (format!("{judgement:?}"), redactions)
        };
        let (judgement, redactions) = judge_of("shell::ls");
        assert!(judgement.starts_with("Continue"), "{judgement}");
        assert_eq!(redactions, 0, "continue redacted");
        let (judgement, redactions) = judge_of("shell::rm");
        assert!(judgement.starts_with("Deny"), "{judgement}");
        assert_eq!(redactions, 0, "deny redacted");
        let (judgement, redactions) = judge_of("approval::resolve");
        assert!(judgement.starts_with("Deny"), "{judgement}");
        assert_eq!(redactions, 0, "the guard's deny redacted");

        // The counter can fail: a hold's record is redacted.
        let hold = input("deploy::prod");
        let (judgement, redactions) = judge_of("deploy::prod");
        assert!(judgement.starts_with("Hold"), "{judgement}");
        assert_eq!(redactions, 0, "judging a hold does not redact either");
        let before = calls::so_far();
        let call = hold.call.as_ref().expect("a call");
        let record = build_record(
            &hold,
            call,
            RecordKind::Function,
            SessionContext::of(&json!({})),
        );
        assert!(calls::so_far() > before, "building a record redacts");
        assert!(!record
            .arguments_excerpt
            .to_value()
            .to_string()
            .contains("sk-live"));
    }
}
