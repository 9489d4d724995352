//! `approval-gate unbind`: removes the worker's durable hook bindings.

use std::time::Duration;

use crate::boot::{connect, BootError};
use crate::client::Sibling;

/// Functions whose durable bindings belong to this worker.
pub const DURABLE_FUNCTIONS: &[&str] = &["approval::gate"];

/// Removes every durable binding of [`DURABLE_FUNCTIONS`]; returns how many.
pub async fn run(url: &str, otel: bool, timeout: Duration) -> Result<usize, BootError> {
    let iii = connect(url, otel, timeout).await?;
    let sibling = Sibling::new(iii.clone());
    let result = remove_all(&sibling).await;
    iii.shutdown_async().await;
    result.map_err(|e| BootError::Rejected(e.to_string()))
}

/// Removes the durable bindings through an existing connection.
pub async fn remove_all(sibling: &Sibling) -> Result<usize, crate::client::CallError> {
    let mut removed = 0;
    for trigger in sibling.registered_triggers().await? {
        let function_id = trigger
            .get("function_id")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let id = trigger.get("id").and_then(|v| v.as_str()).unwrap_or("");
        if DURABLE_FUNCTIONS.contains(&function_id) && !id.is_empty() {
            sibling.unregister_durable_trigger(id).await?;
            removed += 1;
        }
    }
    Ok(removed)
}
