//! The reviewer (`architecture/contract.md` § The reviewer): a function
//! another worker registers under the id the configuration names. The one
//! call of it the worker makes.

use std::time::Duration;

use serde_json::Value;

use super::{CallError, Engine};

impl Engine {
    /// Asks the reviewer at `function_id` about one call, waiting at most
    /// `timeout`. The reply is read by the caller (`terms::review`).
    pub(crate) async fn review(
        &self,
        function_id: &str,
        input: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        self.call(function_id, input, timeout).await
    }
}
