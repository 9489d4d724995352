//! The gate's answer for one parsed hook input, as a pure function of the
//! input, the session's compiled settings and the compiled rules — the part
//! of `approval::gate` that property tests and fuzzing exercise without an
//! engine. See `architecture/contract.md` § The gate.

use serde_json::{Map, Value};

use crate::error::is_valid_id;
use crate::hook::{HookCall, HookInput};
use crate::policy::{
    decide_with, Basis, Call, CompiledRules, CompiledSettings, DecideOptions, GrantRef, Readings,
    Verdict, PROTECTED_PATH_RULE, WIDENING_ROOT_RULE,
};
use crate::redact::holds_secret;
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

/// The rule the logs, the decision log and `approval::evaluate` name when a
/// call is denied because one of its ids holds a secret (contract §26.5).
pub(crate) const SECRET_IN_ID: &str = "secret_in_id";

/// The id of `input` that holds what a value detector of
/// [`crate::redact`] takes for a secret, named as the hook input names it
/// (`session_id`, `turn_id`, `call.id`, `call.function_id`): such a call
/// is denied at the gate before anything about it is read or written, so
/// the secret never reaches a record, an event, a notifier or the
/// reviewer (contract §26.5). The ids are checked in that order; `None`
/// when none holds one.
pub fn secret_in_ids(input: &HookInput, call: &HookCall) -> Option<&'static str> {
    [
        ("session_id", input.session_id.as_str()),
        ("turn_id", input.turn_id.as_str()),
        ("call.id", call.id.as_str()),
        ("call.function_id", call.function_id.as_str()),
    ]
    .into_iter()
    .find(|(_, id)| holds_secret(id))
    .map(|(field, _)| field)
}

/// The deny reason for a call whose `field` holds a secret: it names the
/// field, never the value (nor any other id, which may hold the same).
pub(crate) fn secret_id_reason(field: &str) -> String {
    format!(
        "{} the call's {field} holds what looks like a secret (a token, a password); an id must never carry one, so the call is denied and nothing about it is recorded",
        crate::terms::leads::POLICY
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
    judge_mediated(input, settings, rules, passed_over, turn, readings, false)
}

/// As [`judge_in_turn`]; `subscriptions`: the harness makes an agent's
/// `engine::register_trigger` / `engine::unregister_trigger` a session-owned
/// subscription, so they are judged by what they would call
/// ([`DecideOptions::subscriptions`]).
pub(crate) fn judge_mediated<'r>(
    input: &'r HookInput,
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    passed_over: &[GrantRef],
    turn: Option<&Map<String, Value>>,
    readings: Option<&Readings>,
    subscriptions: bool,
) -> Judgement<'r> {
    let Some(call) = input.call.as_ref() else {
        return Judgement::Deny {
            reason: NO_CALL.to_string(),
            rule: None,
        };
    };
    // Before anything else: a guard's or a rule's reason would name the
    // function id.
    if let Some(field) = secret_in_ids(input, call) {
        return Judgement::Deny {
            reason: secret_id_reason(field),
            rule: Some(SECRET_IN_ID),
        };
    }
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
            subscriptions,
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
                Basis::ProtectedPath { .. } => Some(AskHold {
                    rule_id: PROTECTED_PATH_RULE,
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

    fn with_ids(session_id: &str, turn_id: &str, call_id: &str, function_id: &str) -> HookInput {
        parse_hook_input(json!({
            "point": "pre_trigger", "session_id": session_id, "turn_id": turn_id, "step": 0,
            "depth": 0, "call": {"id": call_id, "function_id": function_id, "arguments": {}}
        }))
        .expect("a valid hook input")
    }

    const TOKEN: &str = "ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B";

    #[test]
    fn rule_26_5_a_secret_in_any_id_is_denied_without_echoing_it() {
        // `demo::*` is allowed: the id check comes before every rule and
        // guard (whose reasons name the function id).
        let config = ApprovalConfig::from_value(&json!({
            "default_mode": "manual", "rules": ["!approval::*", "demo::*"]
        }))
        .expect("config");
        let snapshot = Snapshot::compile(config);
        let plain = with_ids("s1", "t1", "c1", "demo::echo");
        assert!(matches!(
            judge(&plain, &snapshot.defaults, &snapshot.rules),
            Judgement::Continue { .. }
        ));
        let cases = [
            (
                "session_id",
                with_ids(&format!("s-{TOKEN}"), "t1", "c1", "demo::echo"),
            ),
            (
                "turn_id",
                with_ids("s1", &format!("turn-{TOKEN}"), "c1", "demo::echo"),
            ),
            ("call.id", with_ids("s1", "t1", TOKEN, "demo::echo")),
            (
                "call.function_id",
                with_ids("s1", "t1", "c1", &format!("demo::{TOKEN}")),
            ),
            (
                "call.function_id",
                with_ids("s1", "t1", "c1", "approval::password=hunter2"),
            ),
            (
                "call.id",
                with_ids("s1", "t1", "postgres://app:s3cret@db/prod", "demo::echo"),
            ),
        ];
        for (field, input) in &cases {
            let call = input.call.as_ref().expect("a call");
            assert_eq!(secret_in_ids(input, call), Some(*field));
            match judge(input, &snapshot.defaults, &snapshot.rules) {
                Judgement::Deny { reason, rule } => {
                    assert_eq!(rule, Some(SECRET_IN_ID));
                    assert!(reason.starts_with(crate::terms::leads::POLICY), "{reason}");
                    assert!(reason.contains(field), "{reason}");
                    for secret in [TOKEN, "hunter2", "s3cret", "ghp_"] {
                        assert!(!reason.contains(secret), "{reason}");
                    }
                }
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn rule_26_5_ordinary_ids_hold_no_secret() {
        let ids = [
            "toolu_01A09q90qw90lq917835lq9",
            "toolu_bdrk_01XyZabc123DEF456ghi789JKL",
            "call_Zk3bXWq1d8M2nLxR5vYt7uPa",
            "chatcmpl-9xYzAbCdEfGhIjKlMnOpQrStUvWx",
            "fc_67f3a1b2c3d4e5f60718293a",
            "0b9a3f2e-6c1d-4e8f-9a7b-5c4d3e2f1a0b",
            "01890a5d-ac96-774b-bcce-b302099a8057",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "sess_2f8a9c7e1b3d4a5f",
            "turn_42",
            "c1",
            "shell::exec",
            "shell::filesystem::write",
            "harness::function::trigger",
            "approval::resolve",
            "secrets::get",
            "auth::login",
            "notes::token_count",
            "mcp::github::create_pull_request",
            "password_reset::send",
        ];
        for id in ids {
            let input = with_ids(id, id, id, id);
            let call = input.call.as_ref().expect("a call");
            assert_eq!(secret_in_ids(&input, call), None, "{id}");
        }
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
