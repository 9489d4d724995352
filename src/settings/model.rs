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

impl Entry {
    /// An entry for `function_id`, granted at `granted_at` by `granted_by`.
    pub fn new(function_id: impl Into<String>, granted_at: u64, granted_by: GrantedBy) -> Entry {
        Entry {
            function_id: function_id.into(),
            granted_at,
            granted_by,
        }
    }
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

impl ApprovalSettings {
    /// `set-mode`: sets the mode and stamps `mode_set_at`.
    pub fn set_mode(&mut self, mode: Mode, now: u64) {
        self.mode = mode;
        self.mode_set_at = now;
    }

    /// `add-always-allow`: idempotent on the exact `function_id` (an existing
    /// entry keeps its `granted_at`).
    pub fn add_always_allow(&mut self, function_id: &str, now: u64) {
        add_entry(&mut self.always_allow, function_id, now);
    }

    /// `approve-always`: idempotent on the exact `function_id`.
    pub fn approve_always(&mut self, function_id: &str, now: u64) {
        add_entry(&mut self.approved_always, function_id, now);
    }

    /// `remove-always-allow`: removes the exact entry; absent is a no-op.
    pub fn remove_always_allow(&mut self, function_id: &str) {
        self.always_allow.retain(|e| e.function_id != function_id);
    }
}

fn add_entry(list: &mut Vec<Entry>, function_id: &str, now: u64) {
    if list.iter().any(|e| e.function_id == function_id) {
        return;
    }
    list.push(Entry::new(function_id, now, GrantedBy::UserClick));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> ApprovalSettings {
        ApprovalSettings {
            mode: Mode::Manual,
            always_allow: vec![],
            approved_always: vec![],
            mode_set_at: 0,
        }
    }

    #[test]
    fn set_mode_stamps() {
        let mut s = empty();
        s.set_mode(Mode::Full, 42);
        assert_eq!(s.mode, Mode::Full);
        assert_eq!(s.mode_set_at, 42);
    }

    #[test]
    fn grants_are_idempotent_and_keep_granted_at() {
        let mut s = empty();
        s.approve_always("a::b", 1);
        s.approve_always("a::b", 2);
        assert_eq!(s.approved_always.len(), 1);
        assert_eq!(s.approved_always[0].granted_at, 1);
        assert_eq!(s.approved_always[0].granted_by, GrantedBy::UserClick);
        s.add_always_allow("x::*", 3);
        s.add_always_allow("x::*", 4);
        assert_eq!(s.always_allow.len(), 1);
        assert_eq!(s.always_allow[0].granted_at, 3);
    }

    #[test]
    fn remove_is_exact_and_absent_is_noop() {
        let mut s = empty();
        s.add_always_allow("x::*", 3);
        s.add_always_allow("x::y", 3);
        s.remove_always_allow("nope");
        assert_eq!(s.always_allow.len(), 2);
        s.remove_always_allow("x::*");
        assert_eq!(s.always_allow.len(), 1);
        assert_eq!(s.always_allow[0].function_id, "x::y");
    }

    #[test]
    fn wire_shape() {
        let mut s = empty();
        s.approve_always("a::b", 5);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"mode": "manual", "always_allow": [], "approved_always": [
                {"function_id": "a::b", "granted_at": 5, "granted_by": "user_click"}], "mode_set_at": 0})
        );
    }
}
