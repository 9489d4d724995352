//! The state scopes this worker owns (`architecture/contract.md` § Storage),
//! all in one place. Every `state::*` call the worker makes names one of
//! these: the state client takes a [`Scope`], and a `Scope` can only be built
//! here.
//!
//! Every name falls under the prefix the gate guards (`approval`,
//! `approval_…`, `approval.…`; § The gate guards its own levers), so no agent
//! can read or write the gate's own state. The check runs when the worker
//! compiles: a new scope outside the prefix is a build error, and
//! [`Scope::owned`] lists every scope for the tests that prove the gate
//! denies an agent's calls on each.

use std::borrow::Cow;

use crate::policy::is_guarded_scope;

/// Builds a `Scope` constant from a literal the gate's guard covers; any
/// other literal fails to compile.
macro_rules! guarded {
    ($name:literal) => {{
        const _: () = assert!(
            is_guarded_scope($name),
            "every state scope of the worker must fall under the guarded prefix"
        );
        Scope(Cow::Borrowed($name))
    }};
}

/// A state scope of this worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Scope(Cow<'static, str>);

/// Held calls are spread over this many bucket scopes.
pub(crate) const PENDING_BUCKETS: u32 = 64;

impl Scope {
    /// The first layout's single scope of held calls (migrated at boot).
    pub(crate) const PENDING_LEGACY: Scope = guarded!("approval_pending");
    /// Per-session settings, keyed by session id.
    pub(crate) const SETTINGS: Scope = guarded!("approval_settings");
    /// The grant watch's per-session memory of asks, keyed by session id.
    pub(crate) const GRANT_ASKS: Scope = guarded!("approval_grant_asks");
    /// The first layout's per-call ask counters (migrated at boot).
    pub(crate) const GRANT_ATTEMPTS_LEGACY: Scope = guarded!("approval_grant_attempts");
    /// The dirs a session's user denied, keyed by session id.
    pub(crate) const GRANT_DENIED: Scope = guarded!("approval_grant_denied");
    /// Folder grants a failed release must still revoke, keyed by session id.
    pub(crate) const REVOKES: Scope = guarded!("approval_revokes");
    /// The id of the gate's durable binding (key `gate`).
    pub(crate) const BINDINGS: Scope = guarded!("approval_bindings");
    /// The last configuration whose rules compiled (key `last_good`), kept
    /// in force when a newer one does not compile.
    pub(crate) const CONFIG: Scope = guarded!("approval_config");
    /// The whole redacted arguments of each held call, keyed like its
    /// record (`<session_id>/<function_call_id>`): read one key at a time by
    /// `get-pending` and the link page, never listed (contract §21.6).
    pub(crate) const ARGUMENTS: Scope = guarded!("approval_arguments");
    /// The one-shot grants of edited calls, keyed by session id (contract
    /// §28).
    pub(crate) const EDITS: Scope = guarded!("approval_edits");

    /// A bucket of held calls: `approval_pending.00` … `approval_pending.63`
    /// (a dot and two digits after a guarded name stay guarded).
    pub(crate) fn pending_bucket(bucket: u32) -> Scope {
        Scope(Cow::Owned(format!(
            "{}.{:02}",
            Scope::PENDING_LEGACY.as_str(),
            bucket % PENDING_BUCKETS
        )))
    }

    /// Every scope the worker reads or writes.
    pub(crate) fn owned() -> Vec<Scope> {
        [
            Scope::PENDING_LEGACY,
            Scope::SETTINGS,
            Scope::GRANT_ASKS,
            Scope::GRANT_ATTEMPTS_LEGACY,
            Scope::GRANT_DENIED,
            Scope::REVOKES,
            Scope::BINDINGS,
            Scope::CONFIG,
            Scope::ARGUMENTS,
            Scope::EDITS,
        ]
        .into_iter()
        .chain((0..PENDING_BUCKETS).map(Scope::pending_bucket))
        .collect()
    }

    /// The scope's name.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{builtin_guard, Family};

    #[test]
    fn the_gate_denies_an_agent_every_scope_the_worker_owns() {
        let owned = Scope::owned();
        assert_eq!(owned.len(), 10 + PENDING_BUCKETS as usize);
        for scope in owned {
            for function in ["state::set", "state::get", "state::list", "state::delete"] {
                let args = json!({"scope": scope.as_str(), "key": "k", "value": {"mode": "full"}});
                let guard = builtin_guard(function, Some(&args));
                assert_eq!(
                    guard.map(|g| g.family),
                    Some(Family::State),
                    "{function} on {scope}"
                );
            }
        }
    }

    #[test]
    fn buckets_are_named_as_before() {
        assert_eq!(Scope::pending_bucket(0).as_str(), "approval_pending.00");
        assert_eq!(Scope::pending_bucket(63).as_str(), "approval_pending.63");
    }
}
