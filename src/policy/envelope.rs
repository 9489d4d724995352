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
//!   "reason": "Permission denied by policy: shell::exec matched rule no-force-push on command matches \"push .*--force\". Try different arguments or use a different function." }
//! ```
//!
//! Optional fields are left out when absent. The text the model reads is
//! `reason`, sent beside the envelope as `[{"type": "text", "text": <reason>}]`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::redact::redact_call;
use crate::terms::ConstraintOp;

/// The envelope's schema version.
const ENVELOPE_SCHEMA_VERSION: u32 = 1;

/// The envelope's `status`.
const DENIED: &str = "denied";

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
    /// No human answered a held call before its `expires_at`.
    Timeout,
    /// The automated reviewer (`architecture/contract.md` § The reviewer).
    Reviewer,
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
    /// A human's denial, with the reason the model will see.
    pub fn by_user(function_id: &str, reason: &str, args_excerpt: Option<Value>) -> DenialEnvelope {
        DenialEnvelope::base(DeniedBy::User, function_id, reason.to_owned(), args_excerpt)
    }

    /// The denial of a held call no one answered in time, with the reason
    /// the model will see.
    pub fn by_timeout(
        function_id: &str,
        reason: &str,
        args_excerpt: Option<Value>,
    ) -> DenialEnvelope {
        DenialEnvelope::base(
            DeniedBy::Timeout,
            function_id,
            reason.to_owned(),
            args_excerpt,
        )
    }

    /// The reviewer's denial, with the reason the model will see.
    pub fn by_reviewer(
        function_id: &str,
        reason: &str,
        args_excerpt: Option<Value>,
    ) -> DenialEnvelope {
        DenialEnvelope::base(
            DeniedBy::Reviewer,
            function_id,
            reason.to_owned(),
            args_excerpt,
        )
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
            args_excerpt: args_excerpt.as_ref().map(|a| redact_call(function_id, a)),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_users_denial_carries_the_redacted_arguments_and_no_rule_fields() {
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
                "args_excerpt": {"password": "<redacted>", "s": format!("{}…[+44 chars]", "x".repeat(256))},
                "reason": "not on prod"
            })
        );
        let timeout = DenialEnvelope::by_timeout("f", "late", None);
        assert_eq!(
            serde_json::to_value(&timeout).expect("serializes")["denied_by"],
            "timeout"
        );
        let bare = DenialEnvelope::by_user("f", "no", None);
        assert_eq!(
            serde_json::to_value(&bare).expect("serializes"),
            json!({"schema_version": 1, "status": "denied", "denied_by": "user",
                   "function_id": "f", "reason": "no"})
        );
    }

    #[test]
    fn envelopes_round_trip_and_have_a_typed_schema() {
        let mut env = DenialEnvelope::by_user("f", "no", Some(json!({"k": [1]})));
        env.matched_constraint = Some(OwnedMatchedConstraint {
            field: "k".into(),
            operator: ConstraintOp::Equals,
            value: json!([1]),
        });
        let back: DenialEnvelope =
            serde_json::from_value(serde_json::to_value(&env).expect("serializes"))
                .expect("deserializes");
        assert_eq!(back, env);
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
        for denied_by in ["permissions", "user", "gate_unavailable", "timeout"] {
            assert!(text.contains(denied_by), "{text}");
        }
    }
}
