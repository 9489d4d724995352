//! The registry manifest printed by `--manifest`.
//!
//! # Format
//!
//! ```json
//! { "name": "approval-gate", "version": "0.1.0", "description": "...",
//!   "default_config": { "default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 3 },
//!   "supported_targets": ["x86_64-unknown-linux-gnu", ...] }
//! ```

use serde_json::{json, Value};

use crate::boot::{DESCRIPTION, WORKER_NAME};
use crate::config::ApprovalConfig;

/// Targets the worker builds for (pure Rust, no platform code).
const SUPPORTED_TARGETS: &[&str] = &[
    "x86_64-unknown-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

/// The manifest as JSON.
fn manifest() -> Value {
    json!({
        "name": WORKER_NAME,
        "version": env!("CARGO_PKG_VERSION"),
        "description": DESCRIPTION,
        "default_config": ApprovalConfig::defaults_json(),
        "supported_targets": SUPPORTED_TARGETS,
    })
}

/// The manifest, pretty-printed.
pub fn manifest_json() -> String {
    serde_json::to_string_pretty(&manifest()).unwrap_or_else(|_| "{}".into())
}
