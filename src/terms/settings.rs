//! The per-session settings record (`ApprovalSettings`) as stored in the
//! `approval_settings` state scope, and the pure operations on it.
//!
//! # Format
//!
//! ```json
//! { "mode": "manual",
//!   "always_allow": [{"function_id": "fs::*", "granted_at": 1796216160000, "granted_by": "user_click"}],
//!   "approved_always": [{"function_id": "shell::exec", "granted_at": 1796216164779,
//!     "granted_by": "user_click", "pattern": false, "expires_at": 1796219764779, "uses_left": 2,
//!     "args": {"cmd": {"prefix": "git "}}}],
//!   "mode_set_at": 0,
//!   "suppressed_seeds": ["state::get"] }
//! ```
//!
//! **Exact or pattern.** An entry's `function_id` is a glob unless the entry
//! says `"pattern": false`: then it matches that id only (`*` included,
//! literally). `approve-always` remembers what a human saw — one function
//! id — so its entries are exact unless the request asks for a pattern;
//! `add-always-allow` (an operator's allow-list) makes globs. An entry
//! without the field is a glob: so were all entries written before the
//! field existed, and they keep the meaning they were written with.
//!
//! **Seeds are derived, never stored.** The `always_allow` entries with
//! `granted_by: "seed"` come from the rules in force ([`with_seeds`] makes
//! the view a console sees); the record stores only a human's entries, and
//! the seeds a human removed (`suppressed_seeds`, absent when empty). Seed
//! entries stored before seeds were derived are dropped when the record is
//! read ([`drop_seed_entries`]), so its next write leaves them out.
//!
//! A grant may be bounded (`architecture/contract.md` § Settings): by time
//! (`expires_at`), by count (`uses_left`, spent by the gate one use per
//! allowed call) and by arguments (`args`). A bounded entry that expired or
//! was used up is ignored by the gate at once and dropped from the record on
//! its next mutation.
//!
//! [`with_seeds`]: ApprovalSettings::with_seeds
//! [`drop_seed_entries`]: ApprovalSettings::drop_seed_entries

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ArgConstraint, Mode};

/// Who created an allow-list entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantedBy {
    /// A human clicked "always allow" / "approve always".
    UserClick,
    /// Derived from an `allow` rule whose `modes` include `auto` (never stored).
    Seed,
}

/// One allow-list entry: a function id, or a glob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// A function id, or a glob (`*`, `?`, `[..]`, `{a,b}`) unless `pattern`
    /// is false.
    pub function_id: String,
    /// When the entry was granted (ms since the epoch; 0 for seeds).
    pub granted_at: u64,
    /// Who granted it.
    pub granted_by: GrantedBy,
    /// Whether `function_id` is a glob. `false`: it matches that exact id
    /// only (what `approve-always` remembers unless asked for a pattern).
    /// Absent: a glob, as every entry written before this field existed.
    #[serde(default = "a_pattern", skip_serializing_if = "is_pattern")]
    pub pattern: bool,
    /// The entry stops applying at this time (ms since the epoch):
    /// `granted_at + ttl_ms`. Absent: it never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// How many more calls the entry allows; each allowed call spends one
    /// before it runs. Absent: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_left: Option<u64>,
    /// Argument constraints the call must meet, as in allow rules.
    /// Absent: any arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<BTreeMap<String, ArgConstraint>>,
}

/// An entry without `pattern` is a glob.
fn a_pattern() -> bool {
    true
}

/// Only exact entries say so on the wire.
fn is_pattern(pattern: &bool) -> bool {
    *pattern
}

impl Entry {
    /// An unbounded glob entry for `function_id`, granted at `granted_at`
    /// by `granted_by`.
    pub fn new(function_id: impl Into<String>, granted_at: u64, granted_by: GrantedBy) -> Entry {
        Entry {
            function_id: function_id.into(),
            granted_at,
            granted_by,
            pattern: true,
            expires_at: None,
            uses_left: None,
            args: None,
        }
    }

    /// A user's entry for `function_id` (a glob when `pattern`, else that id
    /// exactly) granted at `now` within `bounds`.
    pub fn bounded(
        function_id: impl Into<String>,
        pattern: bool,
        now: u64,
        bounds: &Bounds,
    ) -> Entry {
        Entry {
            pattern,
            expires_at: bounds.ttl_ms.map(|ttl| now.saturating_add(ttl)),
            uses_left: bounds.uses,
            args: bounds.args.clone(),
            ..Entry::new(function_id, now, GrantedBy::UserClick)
        }
    }

    /// Whether the entry can no longer allow anything at `now`: expired, or
    /// used up.
    pub fn is_spent(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now >= at) || self.uses_left == Some(0)
    }

    /// Whether `other` grants the same: the same id read the same way, the
    /// same bounds (uses left compared as given).
    fn same_terms(&self, other: &Entry) -> bool {
        self.function_id == other.function_id
            && self.pattern == other.pattern
            && self.args == other.args
            && self.expires_at == other.expires_at
            && self.uses_left == other.uses_left
    }

    /// Whether `other` is this grant, whatever uses it has left since.
    fn same_grant(&self, other: &Entry) -> bool {
        self.function_id == other.function_id
            && self.pattern == other.pattern
            && self.granted_at == other.granted_at
            && self.granted_by == other.granted_by
            && self.expires_at == other.expires_at
            && self.args == other.args
            && self.uses_left.is_some() == other.uses_left.is_some()
    }
}

/// What bounds a grant: `ttl_ms`, `uses` and `args` of `approve-always` and
/// `add-always-allow`. The default is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// The entry applies for this long (ms).
    pub ttl_ms: Option<u64>,
    /// The entry allows this many calls.
    pub uses: Option<u64>,
    /// The call's arguments must meet these constraints.
    pub args: Option<BTreeMap<String, ArgConstraint>>,
}

/// Which allow-list of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantList {
    /// `approved_always`: remembered human decisions, every mode.
    ApprovedAlways,
    /// `always_allow`: honoured in `auto` mode.
    AlwaysAllow,
}

impl GrantList {
    /// The list's field name.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The per-session settings record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalSettings {
    /// The session's mode.
    pub mode: Mode,
    /// Honoured only in `auto` mode. Stored: a human's entries; shown: the
    /// seeds of the rules in force first, then those.
    #[serde(default)]
    pub always_allow: Vec<Entry>,
    /// Remembered human decisions, honoured in every mode.
    #[serde(default)]
    pub approved_always: Vec<Entry>,
    /// When the mode was last set (ms since the epoch; 0 = never).
    #[serde(default)]
    pub mode_set_at: u64,
    /// Seeds a human removed from this session (their function ids): they
    /// stay out whatever the rules say. Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suppressed_seeds: Vec<String>,
}

impl ApprovalSettings {
    /// A record in `mode` with nothing granted.
    pub fn new(mode: Mode) -> ApprovalSettings {
        ApprovalSettings {
            mode,
            always_allow: Vec::new(),
            approved_always: Vec::new(),
            mode_set_at: 0,
            suppressed_seeds: Vec::new(),
        }
    }

    /// `set-mode`: sets the mode and stamps `mode_set_at`.
    pub fn set_mode(&mut self, mode: Mode, now: u64) {
        self.mode = mode;
        self.mode_set_at = now;
    }

    /// `add-always-allow`: a glob, idempotent on the exact `function_id` (an
    /// existing entry keeps its `granted_at`).
    pub fn add_always_allow(&mut self, function_id: &str, now: u64) {
        self.grant(
            GrantList::AlwaysAllow,
            function_id,
            true,
            &Bounds::default(),
            now,
        );
    }

    /// `approve-always` of what a human saw: an entry for exactly
    /// `function_id` (a held call's id, a link's "remember"), idempotent.
    pub fn approve_always(&mut self, function_id: &str, now: u64) {
        self.grant(
            GrantList::ApprovedAlways,
            function_id,
            false,
            &Bounds::default(),
            now,
        );
    }

    /// `add-always-allow` / `approve-always` with bounds; `pattern` says
    /// whether `function_id` is a glob. An entry with the same
    /// `function_id`, `pattern`, `args`, `expires_at` and `uses_left` as the
    /// new one is the same grant: it stays, with its `granted_at`. Any other
    /// difference makes a distinct entry.
    pub fn grant(
        &mut self,
        list: GrantList,
        function_id: &str,
        pattern: bool,
        bounds: &Bounds,
        now: u64,
    ) {
        let new = Entry::bounded(function_id, pattern, now, bounds);
        let entries = self.list_mut(list);
        if !entries.iter().any(|e| e.same_terms(&new)) {
            entries.push(new);
        }
    }

    /// `remove-always-allow`: removes every entry for the exact
    /// `function_id`, bounded or not; when it names one of `seeds` (the
    /// seeds of the rules in force) that seed is suppressed for good.
    /// Anything else absent is a no-op.
    pub fn remove_always_allow(&mut self, function_id: &str, seeds: &[String]) {
        self.always_allow.retain(|e| e.function_id != function_id);
        let seeded = seeds.iter().any(|s| s == function_id);
        if seeded && !self.suppressed_seeds.iter().any(|s| s == function_id) {
            self.suppressed_seeds.push(function_id.to_owned());
        }
    }

    /// Drops seed entries a record was stored with before seeds were
    /// derived: they are ignored on read and left out of the next write.
    pub fn drop_seed_entries(&mut self) {
        self.always_allow
            .retain(|e| e.granted_by != GrantedBy::Seed);
        self.approved_always
            .retain(|e| e.granted_by != GrantedBy::Seed);
    }

    /// The settings as a console sees them: the seeds of the rules in
    /// force (`seeds`, their globs in rule order), except those the session
    /// suppressed, ahead of the stored `always_allow` entries.
    pub fn with_seeds(&self, seeds: &[String]) -> ApprovalSettings {
        let mut view = self.clone();
        view.drop_seed_entries();
        let derived = seeds
            .iter()
            .filter(|glob| !self.suppressed_seeds.contains(glob))
            .map(|glob| Entry::new(glob.as_str(), 0, GrantedBy::Seed));
        view.always_allow = derived.chain(view.always_allow).collect();
        view
    }

    /// Drops the entries that expired or were used up by `now` (done on
    /// every mutation; the gate ignores them before that).
    pub fn prune(&mut self, now: u64) {
        self.always_allow.retain(|e| !e.is_spent(now));
        self.approved_always.retain(|e| !e.is_spent(now));
    }

    /// Spends one use of `grant` (an entry as the gate saw it, possibly with
    /// more uses left than now): the first entry of `list` that is the same
    /// grant, not spent at `now`, loses one use. Returns whether a use was
    /// spent; nothing changes otherwise.
    pub fn spend(&mut self, list: GrantList, grant: &Entry, now: u64) -> bool {
        let found = self
            .list_mut(list)
            .iter_mut()
            .find(|e| e.same_grant(grant) && !e.is_spent(now));
        match found.and_then(|e| e.uses_left.as_mut()) {
            Some(left) => {
                *left -= 1;
                true
            }
            None => false,
        }
    }

    fn list_mut(&mut self, list: GrantList) -> &mut Vec<Entry> {
        match list {
            GrantList::ApprovedAlways => &mut self.approved_always,
            GrantList::AlwaysAllow => &mut self.always_allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> ApprovalSettings {
        ApprovalSettings::new(Mode::Manual)
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
        s.remove_always_allow("nope", &[]);
        assert_eq!(s.always_allow.len(), 2);
        s.remove_always_allow("x::*", &[]);
        assert_eq!(s.always_allow.len(), 1);
        assert_eq!(s.always_allow[0].function_id, "x::y");
    }

    fn bounds(ttl_ms: Option<u64>, uses: Option<u64>, args: Option<serde_json::Value>) -> Bounds {
        Bounds {
            ttl_ms,
            uses,
            args: args.map(|a| serde_json::from_value(a).unwrap()),
        }
    }

    #[test]
    fn bounded_grants_are_distinct_unless_every_bound_is_equal() {
        let mut s = empty();
        let git = serde_json::json!({"cmd": {"prefix": "git "}});
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(None, Some(3), None),
            10,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(None, Some(3), None),
            11,
        );
        assert_eq!(
            s.approved_always.len(),
            1,
            "the same grant again is a no-op"
        );
        assert_eq!(s.approved_always[0].granted_at, 10);
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(None, Some(2), None),
            12,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(None, None, Some(git.clone())),
            13,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(None, None, Some(git)),
            14,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(Some(1000), None, None),
            15,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "shell::exec",
            true,
            &bounds(Some(1000), None, None),
            16,
        );
        s.approve_always("shell::exec", 17);
        s.approve_always("shell::exec", 18);
        let shapes: Vec<_> = s
            .approved_always
            .iter()
            .map(|e| (e.granted_at, e.expires_at, e.uses_left, e.args.is_some()))
            .collect();
        assert_eq!(
            shapes,
            vec![
                (10, None, Some(3), false),
                (12, None, Some(2), false),
                (13, None, None, true),
                (15, Some(1015), None, false),
                (16, Some(1016), None, false),
                (17, None, None, false),
            ]
        );
        assert!(s.always_allow.is_empty());
    }

    #[test]
    fn spending_takes_one_use_of_the_same_grant_until_none_is_left() {
        let mut s = empty();
        s.grant(
            GrantList::AlwaysAllow,
            "a",
            true,
            &bounds(None, Some(2), None),
            5,
        );
        s.grant(
            GrantList::AlwaysAllow,
            "a",
            true,
            &bounds(None, Some(1), None),
            6,
        );
        let seen = s.always_allow[0].clone();
        assert!(s.spend(GrantList::AlwaysAllow, &seen, 6));
        assert_eq!(s.always_allow[0].uses_left, Some(1));
        // The gate may have seen more uses than are left: still the same grant.
        assert!(s.spend(GrantList::AlwaysAllow, &seen, 6));
        assert_eq!(s.always_allow[0].uses_left, Some(0));
        // Used up; a grant of the same function made later is another grant.
        assert!(!s.spend(GrantList::AlwaysAllow, &seen, 6));
        assert_eq!(s.always_allow[1].uses_left, Some(1));
        // The wrong list, or an unbounded entry, spends nothing.
        assert!(!s.spend(GrantList::ApprovedAlways, &seen, 6));
        s.add_always_allow("b", 7);
        let unbounded = s.always_allow[2].clone();
        assert!(!s.spend(GrantList::AlwaysAllow, &unbounded, 7));
        // Expired entries are not spent.
        s.grant(
            GrantList::AlwaysAllow,
            "c",
            true,
            &bounds(Some(10), Some(5), None),
            100,
        );
        let c = s.always_allow[3].clone();
        assert!(s.spend(GrantList::AlwaysAllow, &c, 109));
        assert!(!s.spend(GrantList::AlwaysAllow, &c, 110));
        assert_eq!(s.always_allow[3].uses_left, Some(4));
    }

    #[test]
    fn prune_drops_expired_and_used_up_entries_only() {
        let mut s = empty();
        s.grant(
            GrantList::AlwaysAllow,
            "expired",
            true,
            &bounds(Some(10), None, None),
            0,
        );
        s.grant(
            GrantList::AlwaysAllow,
            "live",
            true,
            &bounds(Some(100), None, None),
            0,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "used",
            true,
            &bounds(None, Some(1), None),
            0,
        );
        s.grant(
            GrantList::ApprovedAlways,
            "left",
            true,
            &bounds(None, Some(1), None),
            1,
        );
        s.add_always_allow("plain", 0);
        let used = s.approved_always[0].clone();
        assert!(s.spend(GrantList::ApprovedAlways, &used, 5));
        assert!(s.always_allow[0].is_spent(10) && !s.always_allow[0].is_spent(9));
        s.prune(10);
        let ids = |l: &[Entry]| l.iter().map(|e| e.function_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&s.always_allow), vec!["live", "plain"]);
        assert_eq!(ids(&s.approved_always), vec!["left"]);
    }

    #[test]
    fn remove_takes_every_entry_of_the_id() {
        let mut s = empty();
        s.add_always_allow("x", 1);
        s.grant(
            GrantList::AlwaysAllow,
            "x",
            true,
            &bounds(None, Some(2), None),
            1,
        );
        s.add_always_allow("y", 1);
        s.remove_always_allow("x", &[]);
        assert_eq!(s.always_allow.len(), 1);
        assert_eq!(s.always_allow[0].function_id, "y");
    }

    #[test]
    fn wire_shape() {
        let mut s = empty();
        s.approve_always("a::b", 5);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"mode": "manual", "always_allow": [], "approved_always": [
                {"function_id": "a::b", "granted_at": 5, "granted_by": "user_click", "pattern": false}],
                "mode_set_at": 0})
        );
        let mut s = empty();
        s.grant(
            GrantList::AlwaysAllow,
            "shell::exec",
            true,
            &bounds(
                Some(60_000),
                Some(2),
                Some(serde_json::json!({"cmd": {"prefix": "git "}})),
            ),
            5,
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["always_allow"],
            serde_json::json!([{"function_id": "shell::exec", "granted_at": 5, "granted_by": "user_click",
                "expires_at": 60_005, "uses_left": 2, "args": {"cmd": {"prefix": "git "}}}])
        );
        let back: ApprovalSettings = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn rule_21_2_approve_always_is_exact_and_stored_with_pattern_false() {
        let mut s = empty();
        s.approve_always("*", 1);
        s.approve_always("*", 2);
        assert_eq!(s.approved_always.len(), 1, "idempotent");
        assert!(!s.approved_always[0].pattern);
        let v = serde_json::to_value(&s.approved_always[0]).unwrap();
        assert_eq!(v["pattern"], false);
        // A pattern grant of the same id is another grant, written as a glob
        // (no field: a glob is what an entry without it means).
        s.grant(GrantList::ApprovedAlways, "*", true, &Bounds::default(), 3);
        assert_eq!(s.approved_always.len(), 2);
        assert!(s.approved_always[1].pattern);
        let v = serde_json::to_value(&s.approved_always[1]).unwrap();
        assert!(v.get("pattern").is_none(), "{v}");
        // An always-allow entry stays a glob.
        s.add_always_allow("fs::*", 4);
        assert!(s.always_allow[0].pattern);
    }

    #[test]
    fn rule_21_2_an_entry_stored_without_pattern_keeps_its_glob_meaning() {
        let stored = serde_json::json!({"mode": "auto", "always_allow": [],
            "approved_always": [{"function_id": "shell::*", "granted_at": 7, "granted_by": "user_click"}],
            "mode_set_at": 0});
        let s: ApprovalSettings = serde_json::from_value(stored.clone()).unwrap();
        assert!(s.approved_always[0].pattern);
        assert!(s.suppressed_seeds.is_empty());
        // Written back, it is what it was.
        assert_eq!(serde_json::to_value(&s).unwrap(), stored);
        let exact: Entry = serde_json::from_value(serde_json::json!(
            {"function_id": "a", "granted_at": 0, "granted_by": "user_click", "pattern": false}))
        .unwrap();
        assert!(!exact.pattern);
    }

    #[test]
    fn rule_21_3_removing_a_seed_suppresses_it_and_seeds_are_never_stored() {
        let seeds = vec!["state::get".to_owned(), "fs::*".to_owned()];
        let mut s = empty();
        s.add_always_allow("state::get", 1);
        s.remove_always_allow("state::get", &seeds);
        s.remove_always_allow("state::get", &seeds);
        s.remove_always_allow("not::a::seed", &seeds);
        assert!(s.always_allow.is_empty());
        assert_eq!(s.suppressed_seeds, vec!["state::get".to_owned()]);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["suppressed_seeds"], serde_json::json!(["state::get"]));
        // The view: the seeds in force not suppressed, ahead of the stored.
        s.add_always_allow("x::y", 2);
        let view = s.with_seeds(&seeds);
        let shown: Vec<_> = view
            .always_allow
            .iter()
            .map(|e| (e.function_id.as_str(), e.granted_by, e.granted_at))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("fs::*", GrantedBy::Seed, 0),
                ("x::y", GrantedBy::UserClick, 2)
            ]
        );
        // A rule removed takes its seed with it; the suppression stays.
        let view = s.with_seeds(&[]);
        assert_eq!(view.always_allow.len(), 1);
        assert_eq!(view.suppressed_seeds, vec!["state::get".to_owned()]);
        // Nothing to suppress: the field is left out.
        let v = serde_json::to_value(empty()).unwrap();
        assert!(v.get("suppressed_seeds").is_none(), "{v}");
    }

    #[test]
    fn rule_21_3_stored_seed_entries_are_dropped_on_read() {
        let mut s: ApprovalSettings = serde_json::from_value(serde_json::json!({
            "mode": "auto",
            "always_allow": [
                {"function_id": "state::*", "granted_at": 5, "granted_by": "seed"},
                {"function_id": "fs::read", "granted_at": 6, "granted_by": "user_click"}],
            "approved_always": [{"function_id": "old", "granted_at": 5, "granted_by": "seed"}],
            "mode_set_at": 0}))
        .unwrap();
        s.drop_seed_entries();
        assert_eq!(s.always_allow.len(), 1);
        assert_eq!(s.always_allow[0].function_id, "fs::read");
        assert!(s.approved_always.is_empty());
        // A view never shows a stored seed twice.
        let mut legacy = s.clone();
        legacy
            .always_allow
            .insert(0, Entry::new("state::*", 5, GrantedBy::Seed));
        assert_eq!(
            legacy
                .with_seeds(&["state::*".to_owned()])
                .always_allow
                .len(),
            2
        );
    }
}
