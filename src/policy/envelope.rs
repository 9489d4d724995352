//! `DenialEnvelope`: the structured `details` of a deny delivery, so a client
//! can tell a policy deny from a human's from an unavailable gate.
//!
//! # Format
//!
//! ```json
//! { "schema_version": 1, "status": "denied", "denied_by": "permissions",
//!   "function_id": "shell::exec", "rule_id": "no-force-push", "rule_action": "deny",
//!   "matched_constraint": { "field": "command", "operator": "matches", "value": "push .*--force" },
//!   "args_excerpt": { "command": "git push --force" },
//!   "reason": "Permission denied: shell::exec matched rule no-force-push on command matches \"push .*--force\". Try different arguments or use a different function." }
//! ```
//!
//! Optional fields are left out when absent. The text rendering of a denial is
//! `[{"type": "text", "text": <reason>}]` ([`DenialEnvelope::text_content`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::decide::{Basis, ConstraintOp, Decision, Verdict};
use super::rules::RuleAction;
use crate::redact::redact;

/// The envelope's schema version.
pub const ENVELOPE_SCHEMA_VERSION: u32 = 1;

/// The envelope's `status`.
pub const DENIED: &str = "denied";

/// Who denied the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeniedBy {
    /// The policy (a rule or the human-only surface).
    Permissions,
    /// A human, via `approval::resolve`.
    User,
    /// The gate could not do its job (e.g. the pending store failed) and
    /// failed closed.
    GateUnavailable,
}

/// The argument constraint of the rule that denied, owned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OwnedMatchedConstraint {
    /// The `args` key as written (a name or a JSON Pointer).
    pub field: String,
    /// `equals` or `matches`.
    pub operator: ConstraintOp,
    /// The expected value; for `matches` the regex as a JSON string.
    pub value: Value,
}

/// The structured details of a denial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DenialEnvelope {
    /// Always 1.
    pub schema_version: u32,
    /// Always `"denied"`.
    pub status: String,
    /// Who denied.
    pub denied_by: DeniedBy,
    /// The denied call's target.
    pub function_id: String,
    /// The rule that denied (`human_only_function` for the human-only surface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// `"deny"` when a rule denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_action: Option<String>,
    /// The denying rule's first argument constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_constraint: Option<OwnedMatchedConstraint>,
    /// The call's arguments, redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_excerpt: Option<Value>,
    /// The text shown to the model.
    pub reason: String,
}

impl DenialEnvelope {
    /// The envelope of a policy decision (meant for `Deny` decisions; for any
    /// other the rule fields are left out and the reason says what happened).
    /// `args_excerpt` is redacted here; redaction is idempotent, so an
    /// already-redacted excerpt passes unchanged.
    pub fn from_decision(
        function_id: &str,
        decision: &Decision<'_>,
        args_excerpt: Option<Value>,
    ) -> DenialEnvelope {
        let denied = decision.verdict == Verdict::Deny;
        let (rule_id, matched_constraint) = match decision.basis {
            Basis::HumanOnly => (decision.rule_id(), None),
            Basis::Rule {
                rule_id,
                action: RuleAction::Deny,
                constraint,
                ..
            } if denied => (
                Some(rule_id),
                constraint.map(|c| OwnedMatchedConstraint {
                    field: c.field.to_owned(),
                    operator: c.operator,
                    value: c.value.clone(),
                }),
            ),
            _ => (None, None),
        };
        DenialEnvelope {
            rule_action: rule_id.map(|_| RuleAction::Deny.as_str().to_owned()),
            rule_id: rule_id.map(str::to_owned),
            matched_constraint,
            ..DenialEnvelope::base(
                DeniedBy::Permissions,
                function_id,
                decision.reason(function_id),
                args_excerpt,
            )
        }
    }

    /// A human's denial, with the reason the model will see.
    pub fn by_user(function_id: &str, reason: &str, args_excerpt: Option<Value>) -> DenialEnvelope {
        DenialEnvelope::base(DeniedBy::User, function_id, reason.to_owned(), args_excerpt)
    }

    /// A fail-closed denial because the gate could not do its job.
    pub fn gate_unavailable(function_id: &str, reason: &str) -> DenialEnvelope {
        DenialEnvelope::base(
            DeniedBy::GateUnavailable,
            function_id,
            reason.to_owned(),
            None,
        )
    }

    /// The text rendering: `[{"type": "text", "text": <reason>}]`.
    pub fn text_content(&self) -> Value {
        json!([{ "type": "text", "text": self.reason }])
    }

    fn base(
        denied_by: DeniedBy,
        function_id: &str,
        reason: String,
        args_excerpt: Option<Value>,
    ) -> DenialEnvelope {
        DenialEnvelope {
            schema_version: ENVELOPE_SCHEMA_VERSION,
            status: DENIED.to_owned(),
            denied_by,
            function_id: function_id.to_owned(),
            rule_id: None,
            rule_action: None,
            matched_constraint: None,
            args_excerpt: args_excerpt.as_ref().map(redact),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{decide, Call, CompiledRules, CompiledSettings, RuleSpec};
    use crate::settings::model::{ApprovalSettings, Mode};

    fn manual() -> CompiledSettings {
        CompiledSettings::new(&ApprovalSettings {
            mode: Mode::Manual,
            always_allow: Vec::new(),
            approved_always: Vec::new(),
            mode_set_at: 0,
        })
    }

    fn rules(v: Value) -> CompiledRules {
        let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
        CompiledRules::compile(&specs).expect("compiles")
    }

    fn envelope(r: &CompiledRules, fid: &str, args: Option<&Value>) -> Value {
        let s = manual();
        let d = decide(
            &s,
            r,
            &Call {
                function_id: fid,
                arguments: args,
            },
        );
        serde_json::to_value(DenialEnvelope::from_decision(fid, &d, args.cloned()))
            .expect("serializes")
    }

    #[test]
    fn rule_deny_with_constraint() {
        let r = rules(
            json!([{"function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
            "args": {"command": {"matches": "push .*--force"}}}]),
        );
        let args = json!({"command": "git push --force", "token": "ghp_secret"});
        assert_eq!(
            envelope(&r, "shell::exec", Some(&args)),
            json!({
                "schema_version": 1, "status": "denied", "denied_by": "permissions",
                "function_id": "shell::exec", "rule_id": "no-force-push", "rule_action": "deny",
                "matched_constraint": {"field": "command", "operator": "matches", "value": "push .*--force"},
                "args_excerpt": {"command": "git push --force", "token": "<redacted>"},
                "reason": "Permission denied: shell::exec matched rule no-force-push on command matches \
                    \"push .*--force\". Try different arguments or use a different function."
            })
        );
    }

    #[test]
    fn rule_deny_without_constraint_or_arguments() {
        let r = rules(json!(["!shell::*"]));
        assert_eq!(
            envelope(&r, "shell::exec", None),
            json!({
                "schema_version": 1, "status": "denied", "denied_by": "permissions",
                "function_id": "shell::exec", "rule_id": "!shell::*", "rule_action": "deny",
                "reason": "Permission denied: shell::exec matched rule !shell::*. \
                    This function is blocked by policy; try a different function."
            })
        );
    }

    #[test]
    fn human_only_deny() {
        let v = envelope(
            &CompiledRules::empty(),
            "approval::resolve",
            Some(&json!({"x": 1})),
        );
        assert_eq!(
            v,
            json!({
                "schema_version": 1, "status": "denied", "denied_by": "permissions",
                "function_id": "approval::resolve", "rule_id": "human_only_function", "rule_action": "deny",
                "args_excerpt": {"x": 1},
                "reason": "Permission denied: approval::resolve matched rule human_only_function. \
                    This function is blocked by policy; try a different function."
            })
        );
    }

    #[test]
    fn a_non_deny_decision_carries_no_rule_fields() {
        let r = rules(json!(["shell::*"]));
        let v = envelope(&r, "shell::exec", None);
        assert_eq!(v.get("rule_id"), None);
        assert_eq!(v.get("rule_action"), None);
        assert_eq!(
            v.get("reason"),
            Some(&json!("allowed: matched rule shell::*"))
        );
    }

    #[test]
    fn user_and_gate_unavailable_denials() {
        let long = "x".repeat(300);
        let user = DenialEnvelope::by_user(
            "shell::exec",
            "not on prod",
            Some(json!({"password": 1, "s": long})),
        );
        assert_eq!(
            serde_json::to_value(&user).expect("serializes"),
            json!({
                "schema_version": 1, "status": "denied", "denied_by": "user", "function_id": "shell::exec",
                "args_excerpt": {"password": "<redacted>", "s": format!("{}…", "x".repeat(256))},
                "reason": "not on prod"
            })
        );
        let gate =
            DenialEnvelope::gate_unavailable("shell::exec", "pending store write failed: timeout");
        assert_eq!(
            serde_json::to_value(&gate).expect("serializes"),
            json!({
                "schema_version": 1, "status": "denied", "denied_by": "gate_unavailable",
                "function_id": "shell::exec", "reason": "pending store write failed: timeout"
            })
        );
        assert_eq!(
            gate.text_content(),
            json!([{"type": "text", "text": "pending store write failed: timeout"}])
        );
    }

    #[test]
    fn envelopes_round_trip_and_have_a_typed_schema() {
        let r = rules(json!([{"function": "f", "action": "deny", "args": {"k": {"equals": [1]}}}]));
        let s = manual();
        let args = json!({"k": [1]});
        let d = decide(
            &s,
            &r,
            &Call {
                function_id: "f",
                arguments: Some(&args),
            },
        );
        let env = DenialEnvelope::from_decision("f", &d, Some(args.clone()));
        let back: DenialEnvelope =
            serde_json::from_value(serde_json::to_value(&env).expect("serializes"))
                .expect("deserializes");
        assert_eq!(back, env);
        assert_eq!(
            env.matched_constraint,
            Some(OwnedMatchedConstraint {
                field: "k".into(),
                operator: ConstraintOp::Equals,
                value: json!([1]),
            })
        );
        let schema = serde_json::to_value(schemars::schema_for!(DenialEnvelope)).expect("schema");
        let required = schema["required"].as_array().expect("required list");
        for field in [
            "schema_version",
            "status",
            "denied_by",
            "function_id",
            "reason",
        ] {
            assert!(required.contains(&json!(field)), "{field}");
        }
        assert!(!required.contains(&json!("rule_id")));
        let text = schema.to_string();
        assert!(text.contains("gate_unavailable"), "{text}");
    }
}
