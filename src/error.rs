//! The worker's handler errors, mapped once to the wire codes of
//! `architecture/contract.md` § Errors.
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

use crate::engine::CallError;

/// Wire code for a bad request shape or id.
pub(crate) const INVALID_PAYLOAD: &str = "approval/invalid_payload";
/// Wire code for a `state::*` failure on a path that must not guess.
pub(crate) const STATE_UNAVAILABLE: &str = "approval/state_unavailable";
/// Wire code for a `harness::function::resolve` failure during resolve.
pub(crate) const HARNESS_UNAVAILABLE: &str = "approval/harness_unavailable";

/// Errors a handler returns to its caller.
#[derive(Debug, Error)]
pub(crate) enum ApprovalError {
    /// A bad shape, an empty id, an id containing `/`, a malformed cursor.
    #[error("{INVALID_PAYLOAD}: {0}")]
    InvalidPayload(String),
    /// A state call failed, or what it returned is unreadable, where guessing
    /// is not allowed.
    #[error("{STATE_UNAVAILABLE}: {0}")]
    StateUnavailable(#[source] StateError),
    /// The harness did not take the decision; the record is kept.
    #[error("{HARNESS_UNAVAILABLE}: {0}")]
    HarnessUnavailable(#[source] CallError),
}

/// Why the worker's state could not be used.
#[derive(Debug, Error)]
pub(crate) enum StateError {
    /// The call itself failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A value to store could not be encoded.
    #[error("cannot encode the value: {0}")]
    Encode(#[from] serde_json::Error),
    /// A stored value does not have its documented shape.
    #[error("stored {what} is unreadable: {source}")]
    Unreadable {
        /// What was read (`settings of session s_1`).
        what: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// A held call's record was written through the lock of another key.
    #[error("a record was written through the lock of another key")]
    WrongKey,
    /// A read-change-write kept meeting writes made elsewhere.
    #[error("{0} kept changing under the write")]
    Contended(String),
}

impl StateError {
    /// A short code for logs and deny reasons (`timeout`, `unreadable`, ...).
    pub(crate) fn code(&self) -> &str {
        match self {
            StateError::Call(err) => err.code.as_str(),
            StateError::Encode(_) => "encode",
            StateError::Unreadable { .. } => "unreadable",
            StateError::WrongKey => "wrong_key",
            StateError::Contended(_) => "contended",
        }
    }
}

impl From<CallError> for ApprovalError {
    /// A failed call to the worker's own state or configuration is
    /// `state_unavailable`. A failed harness call is never converted: the
    /// release path says `HarnessUnavailable` where it means it.
    fn from(err: CallError) -> Self {
        ApprovalError::StateUnavailable(StateError::Call(err))
    }
}

impl From<StateError> for ApprovalError {
    fn from(err: StateError) -> Self {
        ApprovalError::StateUnavailable(err)
    }
}

impl ApprovalError {
    /// The wire code.
    pub(crate) fn code(&self) -> &'static str {
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
pub(crate) fn validate_id(field: &str, value: &str) -> Result<(), ApprovalError> {
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

/// Whether `value` is a usable `session_id` / `function_call_id`.
pub fn is_valid_id(value: &str) -> bool {
    !value.is_empty() && !value.contains('/')
}

/// Validates a `function_id` argument: non-empty after trimming.
pub(crate) fn validate_function_id(value: &str) -> Result<(), ApprovalError> {
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
    use crate::engine::ErrorCode;

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
    fn failed_calls_map_to_the_code_the_caller_names() {
        let failed = |function_id: &str| CallError {
            function_id: function_id.into(),
            code: ErrorCode::Timeout,
            message: "invocation timed out".into(),
        };
        let harness = ApprovalError::HarnessUnavailable(failed("harness::function::resolve"));
        assert_eq!(harness.code(), HARNESS_UNAVAILABLE);
        assert_eq!(
            harness.to_string(),
            "approval/harness_unavailable: harness::function::resolve failed (timeout): invocation timed out"
        );
        assert_eq!(
            ApprovalError::from(failed("state::get")).code(),
            STATE_UNAVAILABLE
        );
    }

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("session_id", "s_1").is_ok());
        assert!(validate_id("session_id", "").is_err());
        assert!(validate_id("session_id", "a/b").is_err());
        assert!(is_valid_id("s_1") && !is_valid_id("") && !is_valid_id("a/b"));
        assert!(validate_function_id("  ").is_err());
        assert!(validate_function_id("x::y").is_ok());
    }
}
