//! Edit, then approve (`architecture/contract.md` § Edit, then approve): the
//! one-shot grants a human's edit of a held call leaves behind. PURE; the
//! state half is [`store`].
//!
//! The harness cannot change a held call's arguments, so an edit is done in
//! the open: the held call is denied with the call to make instead, and a
//! grant lets exactly that call through once when the model makes it. A
//! grant covers the session, the function and the identity digest of the
//! edited arguments (§26.1, the harness's stamp left out), one use, until
//! its TTL ends. It only ever turns a hold into continue: a deny and the
//! lockdown stand.
//!
//! # Format
//!
//! `approval_edits` / `<session_id>` →
//! `{ session_id, grants: [{ made_on, function_id, digest, expires_at, used_by? }] }`
//! (`made_on`: the held call the edit was made on; `used_by`: the call that
//! used it, which may be delivered again and continues again). One key per
//! session, so the session's purge deletes one key.

pub(crate) mod store;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::{harness_stamps, STAMP};
use crate::terms::leads::{self, led};

/// How long an edit's grant lives when the edit names no `ttl_ms`.
pub(crate) const DEFAULT_TTL_MS: u64 = 600_000;

/// What the logs and the decision log name when an edit's grant lets a
/// call through.
pub(crate) const EDIT_RULE: &str = "edit";

/// One edit's grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EditGrant {
    /// The held call the edit was made on.
    pub made_on: String,
    /// The function the edited call targets (the held call's).
    pub function_id: String,
    /// The identity digest of the edited arguments (§26.1).
    pub digest: String,
    /// When it ends (ms since the epoch).
    pub expires_at: u64,
    /// The call that used it, once used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_by: Option<String>,
}

/// A session's edit grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EditGrants {
    pub session_id: String,
    #[serde(default)]
    pub grants: Vec<EditGrant>,
}

/// How a call meets a session's edit grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// No live grant covers it.
    Nothing,
    /// This unused grant covers it: one use to claim.
    Unused(usize),
    /// This grant was used by this very call: a redelivery, which continues
    /// again.
    UsedByIt(usize),
}

impl EditGrants {
    /// An empty set for `session_id`.
    pub(crate) fn new(session_id: &str) -> EditGrants {
        EditGrants {
            session_id: session_id.to_owned(),
            grants: Vec::new(),
        }
    }

    /// The grant covering the call `call_id` to `function_id` with
    /// arguments of `digest`, at `now`. A redelivery of the call that used
    /// a grant wins over another unused grant, so it spends nothing.
    pub(crate) fn find(&self, function_id: &str, digest: &str, call_id: &str, now: u64) -> Found {
        let live = |g: &&EditGrant| {
            g.function_id == function_id && g.digest == digest && now < g.expires_at
        };
        if let Some(at) = self
            .grants
            .iter()
            .position(|g| live(&g) && g.used_by.as_deref() == Some(call_id))
        {
            return Found::UsedByIt(at);
        }
        match self
            .grants
            .iter()
            .position(|g| live(&g) && g.used_by.is_none())
        {
            Some(at) => Found::Unused(at),
            None => Found::Nothing,
        }
    }

    /// Marks grant `at` used by `call_id`.
    pub(crate) fn claim(&mut self, at: usize, call_id: &str) {
        if let Some(grant) = self.grants.get_mut(at) {
            grant.used_by = Some(call_id.to_owned());
        }
    }

    /// Adds a grant, dropping the ended ones and any earlier grant made on
    /// the same held call (an edit decided twice keeps the last).
    pub(crate) fn add(&mut self, grant: EditGrant, now: u64) {
        self.prune(now);
        self.grants.retain(|g| g.made_on != grant.made_on);
        self.grants.push(grant);
    }

    /// Removes the unused grant made on `made_on` (its release did not go
    /// through): the one of `digest`, or, when the digest is not known (a
    /// release recovered after a restart, whose note keeps no arguments),
    /// whichever unused grant the held call left — an edit decided twice
    /// keeps one ([`EditGrants::add`]). A used grant stays: the model had
    /// the denial, and its call went through. Says whether one went.
    pub(crate) fn remove_unused(&mut self, made_on: &str, digest: Option<&str>) -> bool {
        let before = self.grants.len();
        self.grants.retain(|g| {
            !(g.made_on == made_on && digest.is_none_or(|d| g.digest == d) && g.used_by.is_none())
        });
        self.grants.len() != before
    }

    /// Drops the grants whose TTL ended.
    pub(crate) fn prune(&mut self, now: u64) {
        self.grants.retain(|g| now < g.expires_at);
    }
}

/// Why an edit is refused, for `approval/invalid_payload`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The edited call would be denied (a deny rule, a guard, an id check).
    #[error("the edited call would be denied (rule {rule}): {reason}")]
    Denied { rule: String, reason: String },
    /// The edited call names a protected path (§29): it is held for a
    /// human whatever the grants say, so a grant would never apply.
    #[error("the edited call names a protected path (rule protected_path): no edit's grant lets it through; allow or deny the held call, or edit the path")]
    Protected,
    /// No configuration has compiled: nothing is let through on a grant.
    #[error("the edited call would be held by the lockdown (rule lockdown): no edit applies until a configuration compiles")]
    Lockdown,
    /// The edit still holds what redaction wrote.
    #[error("the edited arguments still hold {0} (rule redaction_mark): write the real value, or deny the call")]
    Mark(&'static str),
    /// The TTL asked for is not a positive number of ms.
    #[error("ttl_ms must be at least 1")]
    ZeroTtl,
}

/// The grant's TTL: the edit's `ttl_ms`, else [`DEFAULT_TTL_MS`], capped by
/// the configuration's `edit_ttl_max_ms`.
pub(crate) fn ttl(asked: Option<u64>, max_ms: u64) -> Result<u64, Refusal> {
    match asked {
        Some(0) => Err(Refusal::ZeroTtl),
        Some(ms) => Ok(ms.min(max_ms)),
        None => Ok(DEFAULT_TTL_MS.min(max_ms)),
    }
}

/// The edited arguments as the model is told to send them: for a call the
/// harness stamps, without the top-level stamp (the harness writes its
/// own; the grant's digest leaves it out too).
pub(crate) fn to_send(function_id: &str, arguments: &Value) -> Value {
    let mut out = arguments.clone();
    if harness_stamps(function_id) {
        if let Value::Object(map) = &mut out {
            map.remove(STAMP);
        }
    }
    out
}

/// The denial the model reads: the human's lead, their reason (if any),
/// and the call to make instead, as written so the model can repeat it.
pub(crate) fn instead(function_id: &str, arguments: &Value, reason: Option<&str>) -> String {
    let json = serde_json::to_string(arguments).unwrap_or_else(|_| "{}".to_owned());
    let said = match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => format!("{};", r.trim_end_matches('.')),
        None => "the call was edited;".to_owned(),
    };
    led(
        leads::HUMAN,
        &format!("{said} call {function_id} with these arguments instead: {json}"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grant(made_on: &str, digest: &str, expires_at: u64) -> EditGrant {
        EditGrant {
            made_on: made_on.into(),
            function_id: "demo::echo".into(),
            digest: digest.into(),
            expires_at,
            used_by: None,
        }
    }

    #[test]
    fn rule_28_2_a_grant_covers_its_function_and_digest_once_until_its_ttl() {
        let mut grants = EditGrants::new("s1");
        grants.add(grant("held", "d1", 100), 0);
        assert_eq!(grants.find("demo::echo", "d1", "c2", 10), Found::Unused(0));
        assert_eq!(grants.find("demo::echo", "d2", "c2", 10), Found::Nothing);
        assert_eq!(grants.find("demo::other", "d1", "c2", 10), Found::Nothing);
        assert_eq!(
            grants.find("demo::echo", "d1", "c2", 100),
            Found::Nothing,
            "ended"
        );
        grants.claim(0, "c2");
        // Used: the same call again continues, another identical call does not.
        assert_eq!(
            grants.find("demo::echo", "d1", "c2", 10),
            Found::UsedByIt(0)
        );
        assert_eq!(grants.find("demo::echo", "d1", "c3", 10), Found::Nothing);
        assert_eq!(grants.find("demo::echo", "d1", "c2", 100), Found::Nothing);
    }

    #[test]
    fn rule_28_1_a_later_edit_of_the_same_call_replaces_and_removal_spares_a_used_grant() {
        let mut grants = EditGrants::new("s1");
        grants.add(grant("held", "d1", 100), 0);
        grants.add(grant("old", "d0", 5), 0);
        grants.add(grant("held", "d2", 100), 10);
        assert_eq!(grants.grants.len(), 1, "{grants:?}");
        assert_eq!(grants.grants[0].digest, "d2");
        assert!(
            !grants.remove_unused("held", Some("d1")),
            "another edit's grant stays"
        );
        grants.claim(0, "c9");
        assert!(
            !grants.remove_unused("held", Some("d2")),
            "a used grant stays"
        );
        assert!(
            !grants.remove_unused("held", None),
            "a used grant stays, digest or not"
        );
        grants.grants[0].used_by = None;
        assert!(grants.remove_unused("held", Some("d2")));
        assert!(grants.grants.is_empty());
    }

    #[test]
    fn rule_28_1_a_recovered_release_removes_the_held_calls_unused_grant_without_its_digest() {
        let mut grants = EditGrants::new("s1");
        grants.add(grant("held", "d1", 100), 0);
        grants.add(grant("other", "d1", 100), 0);
        assert!(grants.remove_unused("held", None));
        assert_eq!(grants.grants.len(), 1, "{grants:?}");
        assert_eq!(grants.grants[0].made_on, "other", "only the held call's");
        assert!(
            !grants.remove_unused("held", None),
            "nothing left to remove"
        );
    }

    #[test]
    fn rule_28_1_ttl_defaults_to_ten_minutes_capped_by_the_configuration() {
        assert_eq!(ttl(None, 3_600_000), Ok(600_000));
        assert_eq!(ttl(Some(5_000), 3_600_000), Ok(5_000));
        assert_eq!(ttl(Some(7_200_000), 3_600_000), Ok(3_600_000));
        assert_eq!(ttl(None, 60_000), Ok(60_000));
        assert_eq!(ttl(Some(0), 60_000), Err(Refusal::ZeroTtl));
    }

    #[test]
    fn rule_28_1_the_model_reads_the_call_to_make_instead_without_the_stamp() {
        let args = json!({"command": "ls", "args": ["-l"], "fs_scope": {"root": "/w"}});
        let sent = to_send("shell::exec", &args);
        assert_eq!(sent, json!({"command": "ls", "args": ["-l"]}));
        assert_eq!(
            to_send("demo::echo", &args),
            args,
            "only stamped calls lose it"
        );
        let text = instead("shell::exec", &sent, None);
        assert!(text.starts_with("Denied by a human:"), "{text}");
        assert!(
            text.ends_with(
                r#"call shell::exec with these arguments instead: {"args":["-l"],"command":"ls"}"#
            ),
            "{text}"
        );
        let text = instead("shell::exec", &sent, Some("Not --force."));
        assert!(
            text.starts_with("Denied by a human: Not --force; call shell::exec"),
            "{text}"
        );
    }
}
