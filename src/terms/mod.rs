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
/// `{"matches": "<regex>"}`, `{"prefix": "<string>"}` or
/// `{"runs": "<words>"}`. What each means is written once, in the texts of
/// [`constraint_docs`], which the published schema and the README quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgConstraint {
    /// [`constraint_docs::EQUALS`].
    Equals(serde_json::Value),
    /// [`constraint_docs::MATCHES`].
    Matches(String),
    /// [`constraint_docs::PREFIX`].
    Prefix(String),
    /// [`constraint_docs::RUNS`].
    Runs(String),
}

/// What an argument constraint means, for operators: the one place these
/// words are written (the configuration schema and the settings RPCs'
/// schemas show them).
pub mod constraint_docs {
    /// The constraint object as a whole.
    pub const WHOLE: &str = "One argument constraint: exactly one of equals, matches, prefix, runs. Deny and ask rules read arguments widely (a field name ignores ASCII case; a number or boolean reads as its JSON text; an array by any element or by its elements joined with spaces; arguments that are not an object match); allow rules and grants strictly (the exact name and type only; an array only as its string elements joined with spaces).";
    /// `equals`.
    pub const EQUALS: &str = "JSON equality; a missing field is null. Deny and ask rules compare numbers by value (1.0 = 1); allow rules and grants are type-strict.";
    /// `matches`.
    pub const MATCHES: &str = "An unanchored regular expression (Rust regex syntax) tested against the text as written: it does not read commands.";
    /// `prefix`.
    pub const PREFIX: &str = "On a command field (command, with its args, of a shell::* function) the same as runs. On any other field, text: allow rules and grants need the value to equal it or go on after whitespace with no ; & | newline ` $ < > \\ or unbalanced quote after it; deny and ask rules match when a segment of the value split on ; & | and newlines, trimmed, starts with it.";
    /// `runs`.
    pub const RUNS: &str = "The program and first arguments of a command, as words (\"git status\"), matched against what the value will run: the field is read as bash (a string) or as an argv (an array of strings). Deny and ask rules match when any simple command that can run (nested in bash -c, $(...), wrappers such as sudo, env or xargs) starts with these words, its program compared by base name; a command that cannot be known without running it is denied (deny) or held (ask) as opaque_command. Allow rules and grants match only when every simple command is covered by some allow rule or grant, each starting with the exact program word, with nothing opaque, no wrapper, substitution, leading assignment, argument that hands a command on, or redirection other than 2>&1, >&2 and /dev/null.";
}

/// The schema a console shows: one object per operator, each key
/// described with the words of [`constraint_docs`].
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
            "description": constraint_docs::WHOLE,
            "oneOf": [
                one("equals", constraint_docs::EQUALS, false),
                one("matches", constraint_docs::MATCHES, true),
                one("prefix", constraint_docs::PREFIX, true),
                one("runs", constraint_docs::RUNS, true),
            ],
        });
        serde_json::from_value(schema).unwrap_or(schemars::schema::Schema::Bool(true))
    }
}

impl ArgConstraint {
    /// The operator.
    pub fn op(&self) -> ConstraintOp {
        match self {
            ArgConstraint::Equals(_) => ConstraintOp::Equals,
            ArgConstraint::Matches(_) => ConstraintOp::Matches,
            ArgConstraint::Prefix(_) => ConstraintOp::Prefix,
            ArgConstraint::Runs(_) => ConstraintOp::Runs,
        }
    }
}

/// How a constraint compares (wire: `"equals"` / `"matches"` / `"prefix"` /
/// `"runs"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintOp {
    /// JSON equality.
    Equals,
    /// Unanchored regex on text.
    Matches,
    /// A command prefix (text on other fields).
    Prefix,
    /// What a command runs.
    Runs,
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
