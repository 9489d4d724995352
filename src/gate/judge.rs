//! The gate's answer for one parsed hook input, as a pure function of the
//! input, the session's compiled settings and the compiled rules — the part
//! of `approval::gate` that property tests and fuzzing exercise without an
//! engine. See `architecture/contract.md` § The gate.

use super::hook::{HookCall, HookInput};
use crate::error::is_valid_id;
use crate::inbox::HoldLimits;
use crate::policy::{decide, Basis, Call, CompiledRules, CompiledSettings, Verdict};

/// What the gate answers, before any I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement<'r> {
    /// Let the call run.
    Continue {
        /// The rule (or ladder step) that allowed it.
        rule: Option<&'r str>,
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
        /// The deciding rule's own deadlines, if it has any.
        limits: HoldLimits,
    },
}

/// The deny reason for an input without a call.
pub(crate) const NO_CALL: &str =
    "approval-gate received a pre_trigger hook input without a call payload";

/// The rule the logs and `approval::evaluate` name when the gate cannot
/// know a session's settings.
pub(crate) const GATE_UNAVAILABLE: &str = "gate_unavailable";

/// The deny reason when a session's stored settings cannot be read: the
/// defaults may allow more than what a human set for the session, so the
/// call is refused, never decided with them.
pub(crate) fn settings_unknown(session_id: &str, function_id: &str, code: &str) -> String {
    format!(
        "approval-gate is unavailable: the approval settings of session {session_id} could not be read ({code}), so {function_id} is denied rather than decided without them. Try again shortly."
    )
}

/// Whether the input's ids can key a record.
pub fn ids_are_valid(input: &HookInput, call: &HookCall) -> bool {
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
    let Some(call) = input.call.as_ref() else {
        return Judgement::Deny {
            reason: NO_CALL.to_string(),
            rule: None,
        };
    };
    let decision = decide(
        settings,
        rules,
        &Call {
            function_id: &call.function_id,
            arguments: call.arguments.as_ref(),
        },
    );
    if !ids_are_valid(input, call) && !matches!(decision.basis, Basis::HumanOnly { .. }) {
        return Judgement::Deny {
            reason: format!(
                "approval-gate cannot evaluate {}: session_id / function_call_id must be non-empty and must not contain \"/\"",
                call.function_id
            ),
            rule: None,
        };
    }
    let rule = decision.rule_id();
    match decision.verdict {
        Verdict::Allow => Judgement::Continue { rule },
        Verdict::Deny => Judgement::Deny {
            reason: decision.reason(&call.function_id),
            rule,
        },
        Verdict::Hold => Judgement::Hold {
            limits: HoldLimits::of(&decision),
        },
    }
}
