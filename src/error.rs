//! The worker's error type, mapped once to the wire codes of the contract.
//!
//! # Format
//!
//! Every handler error leaves as a structured remote error whose `code` is one
//! of the contract's codes and whose `message` starts with the same code, so
//! clients matching either form work:
//!
//! ```json
//! { "code": "approval/invalid_payload",
//!   "message": "approval/invalid_payload: session_id must not contain \"/\"" }
//! ```

use thiserror::Error;

/// Wire code for a bad request shape or id.
pub const INVALID_PAYLOAD: &str = "approval/invalid_payload";
/// Wire code for a `state::*` failure on a path that must not guess.
pub const STATE_UNAVAILABLE: &str = "approval/state_unavailable";
/// Wire code for a `harness::function::resolve` failure during resolve.
pub const HARNESS_UNAVAILABLE: &str = "approval/harness_unavailable";

/// Errors a handler returns to its caller.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ApprovalError {
    /// A bad shape, an empty id, an id containing `/`, a malformed cursor.
    #[error("{INVALID_PAYLOAD}: {0}")]
    InvalidPayload(String),
    /// A state call failed where guessing is not allowed.
    #[error("{STATE_UNAVAILABLE}: {0}")]
    StateUnavailable(String),
    /// The harness did not take the decision; the record is kept.
    #[error("{HARNESS_UNAVAILABLE}: {0}")]
    HarnessUnavailable(String),
}

impl ApprovalError {
    /// The wire code.
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::InvalidPayload(_) => INVALID_PAYLOAD,
            ApprovalError::StateUnavailable(_) => STATE_UNAVAILABLE,
            ApprovalError::HarnessUnavailable(_) => HARNESS_UNAVAILABLE,
        }
    }
}

impl From<ApprovalError> for iii_sdk::Error {
    fn from(err: ApprovalError) -> Self {
        iii_sdk::Error::Remote {
            code: err.code().to_string(),
            message: err.to_string(),
            stacktrace: None,
        }
    }
}

/// Validates a `session_id` / `function_call_id`: non-empty, no `/` (the key
/// separator of the state layout).
pub fn validate_id(field: &str, value: &str) -> Result<(), ApprovalError> {
    if value.is_empty() {
        return Err(ApprovalError::InvalidPayload(format!(
            "{field} must not be empty"
        )));
    }
    if value.contains('/') {
        return Err(ApprovalError::InvalidPayload(format!(
            "{field} must not contain \"/\""
        )));
    }
    Ok(())
}

/// Validates a `function_id` argument: non-empty after trimming.
pub fn validate_function_id(value: &str) -> Result<(), ApprovalError> {
    if value.trim().is_empty() {
        return Err(ApprovalError::InvalidPayload(
            "function_id must not be empty".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_starts_with_code() {
        let err = ApprovalError::InvalidPayload("session_id must not contain \"/\"".into());
        assert_eq!(err.code(), "approval/invalid_payload");
        assert_eq!(
            err.to_string(),
            "approval/invalid_payload: session_id must not contain \"/\""
        );
        match iii_sdk::Error::from(err) {
            iii_sdk::Error::Remote { code, message, .. } => {
                assert_eq!(code, "approval/invalid_payload");
                assert!(message.starts_with("approval/invalid_payload: "));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("session_id", "s_1").is_ok());
        assert!(validate_id("session_id", "").is_err());
        assert!(validate_id("session_id", "a/b").is_err());
        assert!(validate_function_id("  ").is_err());
        assert!(validate_function_id("x::y").is_ok());
    }
}
