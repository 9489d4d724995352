//! The per-session settings record (`ApprovalSettings`) as stored in the
//! `approval_settings` state scope, and the pure operations on it.
//!
//! # Format
//!
//! ```json
//! { "mode": "manual", "always_allow": [{"function_id": "state::get", "granted_at": 0, "granted_by": "seed"}],
//!   "approved_always": [], "mode_set_at": 0 }
//! ```

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
        match self {
            Mode::Manual => "manual",
            Mode::Auto => "auto",
            Mode::Full => "full",
        }
    }
}

/// Who created an allow-list entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantedBy {
    /// A human clicked "always allow" / "approve always".
    UserClick,
    /// Materialised from an `allow` rule whose `modes` include `auto`.
    Seed,
}

/// One allow-list entry: a function id or glob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// A function id, or a glob (`*`, `?`, `[..]`, `{a,b}`).
    pub function_id: String,
    /// When the entry was granted (ms since the epoch; 0 for in-memory seeds).
    pub granted_at: u64,
    /// Who granted it.
    pub granted_by: GrantedBy,
}

/// The per-session settings record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalSettings {
    /// The session's mode.
    pub mode: Mode,
    /// Honoured only in `auto` mode.
    #[serde(default)]
    pub always_allow: Vec<Entry>,
    /// Remembered human decisions, honoured in every mode.
    #[serde(default)]
    pub approved_always: Vec<Entry>,
    /// When the mode was last set (ms since the epoch; 0 = never).
    #[serde(default)]
    pub mode_set_at: u64,
}
