//! The words the policy and the settings share: a session's [`Mode`], the
//! argument constraints ([`ArgConstraint`], [`ConstraintOp`]) that rules and
//! grants both carry, and the per-session record itself ([`settings`]:
//! `ApprovalSettings`, its entries and their mutations, pure). A leaf: it
//! imports nothing of the crate, so the rules (`policy`) and the settings
//! store (`settings`) can both use it without importing each other.
//!
//! What a constraint *means* for a call — typed per rule action, command
//! prefixes — is the policy's business (`policy/args.rs`); here are only the
//! wire forms.

pub mod leads;
pub(crate) mod review;
pub(crate) mod settings;

pub use settings::{ApprovalSettings, Bounds, Entry, GrantList, GrantedBy};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A session's approval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every call that no rule or remembered decision covers waits for a human.
    Manual,
    /// As manual, but the session's `always_allow` list is honoured.
    Auto,
    /// Every call runs (except the human-only surface).
    Full,
}

impl Mode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// One argument constraint, exactly one key: `{"equals": <json>}`,
/// `{"matches": "<regex>"}` or `{"prefix": "<string>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgConstraint {
    /// JSON equality; a missing field is `null`.
    Equals(serde_json::Value),
    /// An unanchored regex (Rust `regex` syntax) tested against text.
    Matches(String),
    /// A command prefix.
    Prefix(String),
}

impl ArgConstraint {
    /// The operator.
    pub fn op(&self) -> ConstraintOp {
        match self {
            ArgConstraint::Equals(_) => ConstraintOp::Equals,
            ArgConstraint::Matches(_) => ConstraintOp::Matches,
            ArgConstraint::Prefix(_) => ConstraintOp::Prefix,
        }
    }
}

/// The schema a console shows: one object per operator, each key described.
impl JsonSchema for ArgConstraint {
    fn schema_name() -> String {
        "ArgConstraint".to_owned()
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        let one = |key: &str, description: &str, typed: bool| {
            let mut property = serde_json::json!({ "description": description });
            if typed {
                property["type"] = "string".into();
            }
            serde_json::json!({
                "type": "object",
                "additionalProperties": false,
                "required": [key],
                "properties": { key: property },
            })
        };
        let schema = serde_json::json!({
            "description": "One argument constraint: exactly one of equals, matches, prefix. Deny and ask rules read arguments widely (a number or boolean as its JSON text, an array by any element or its elements joined with spaces, arguments that are not an object as matching); allow rules and grants strictly (the exact type only, an array only as its string elements joined with spaces).",
            "oneOf": [
                one("equals", "JSON equality; a missing field is null. Deny and ask rules compare numbers by value (1.0 = 1); allow rules and grants are type-strict.", false),
                one("matches", "Unanchored regular expression (Rust regex syntax) tested against text.", true),
                one("prefix", "A command prefix (case-sensitive, no regex). Allow rules and grants: the value equals it or goes on after whitespace, with no ; & | newline ` $ < > \\ or unbalanced quote after it. Deny and ask rules: any segment of the value split on ; & | and newlines, trimmed, starts with it.", true),
            ],
        });
        serde_json::from_value(schema).unwrap_or(schemars::schema::Schema::Bool(true))
    }
}

/// How a constraint compares (wire: `"equals"` / `"matches"` / `"prefix"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintOp {
    /// JSON equality.
    Equals,
    /// Unanchored regex on text.
    Matches,
    /// A command prefix.
    Prefix,
}

impl ConstraintOp {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arg_constraints_need_exactly_one_known_key() {
        let ok: ArgConstraint =
            serde_json::from_value(json!({"equals": null})).expect("null equals");
        assert_eq!(ok, ArgConstraint::Equals(serde_json::Value::Null));
        assert_eq!(ok.op(), ConstraintOp::Equals);
        for bad in [
            json!({"equals": 1, "matches": "x"}),
            json!({}),
            json!({"contains": "x"}),
            json!({"matches": 3}),
            json!("equals"),
        ] {
            assert!(
                serde_json::from_value::<ArgConstraint>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn spellings() {
        assert_eq!(Mode::Auto.as_str(), "auto");
        assert_eq!(ConstraintOp::Prefix.as_str(), "prefix");
        assert_eq!(
            serde_json::to_value(ConstraintOp::Matches).ok(),
            Some(json!("matches"))
        );
        assert_eq!(
            serde_json::to_value(ArgConstraint::Prefix("git".into())).ok(),
            Some(json!({"prefix": "git"}))
        );
    }
}
