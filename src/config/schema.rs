//! The configuration entry's JSON schema (draft-07), registered with the
//! entry so the engine rejects bad values before they are stored. Derived
//! wholly from the types ([`ApprovalConfig`] and the rule, constraint,
//! `links`, `reviewer` and `decision_log` types it holds), subschemas
//! inlined as for the function schemas: every title, description, limit,
//! default and example is written once, beside the field it describes.

use serde_json::Value;

use super::ApprovalConfig;

/// The JSON schema (draft-07) registered with the entry: titles,
/// descriptions, defaults and examples for a form; unknown keys rejected.
pub fn schema() -> Value {
    crate::schema::schema_of::<ApprovalConfig>()
}

#[cfg(test)]
mod tests;
