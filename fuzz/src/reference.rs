//! A naive decision ladder: linear scans over the rules and the allow-lists,
//! each glob compiled and matched on its own, each regex on its own, pointers
//! resolved by `serde_json`. It shares no matching code with the crate's
//! pattern tables, so a disagreement points at the tables or the ladder.
//!
//! It models the whole ladder of `architecture/contract.md` § Permission
//! model, under both precedences:
//!
//! * `first_match`: guard → first ask rule → mode `full` → `approved_always`
//!   → (`auto`) `always_allow` → first allow or deny rule → hold;
//! * `deny_ask_allow`: guard → first deny rule → first ask rule → mode
//!   `full` → the grants → first allow rule → hold;
//!
//! with entries' bounds (expiry, uses left, argument constraints, a seed
//! never beating a deny rule) and the operator's `human_only_extra` globs.
//! The built-in guards (the gate's own namespaces, functions and state
//! scopes) are taken from [`builtin_guard`]: this reference checks how the
//! ladder combines its steps, not the guard's name matching.

use std::time::{SystemTime, UNIX_EPOCH};

use approval_gate::{
    builtin_guard, ApprovalSettings, ArgConstraint, Basis, Decision, Entry, GrantedBy, Mode,
    RuleAction, RulePrecedence, RuleSpec,
};
use globset::GlobBuilder;
use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// The compiled-size limit the crate gives `matches` regexes (1 MiB): an
/// entry whose regex is larger matches nothing there, so here too.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Where the reference's decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Step 1: a built-in guard or a `human_only_extra` glob.
    HumanOnly,
    /// An ask rule: the index of the first that applies.
    Ask(usize),
    /// Mode `full`.
    Full,
    /// An `approved_always` entry: its text and slot.
    Approved(String, u32),
    /// An `always_allow` entry: its text and slot.
    Always(String, u32),
    /// An allow or deny rule: its index.
    Rule(usize),
    /// Nothing decided.
    NoMatch,
}

/// The crate's decision in the same terms.
pub fn outcome_of(d: &Decision<'_>) -> Outcome {
    match d.basis {
        Basis::HumanOnly { .. } => Outcome::HumanOnly,
        Basis::Ask { index, .. } => Outcome::Ask(index),
        Basis::ModeFull => Outcome::Full,
        Basis::ApprovedAlways { entry, slot } => Outcome::Approved(entry.function_id.clone(), slot),
        Basis::AlwaysAllow { entry, slot } => Outcome::Always(entry.function_id.clone(), slot),
        Basis::Rule { index, .. } => Outcome::Rule(index),
        Basis::NoMatch => Outcome::NoMatch,
    }
}

const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// Whether the pattern `text` matches `id`: a glob when it has a glob
/// metacharacter and compiles, else the exact text.
pub fn pattern_matches(text: &str, id: &str) -> bool {
    if !text.contains(GLOB_META) {
        return text == id;
    }
    match GlobBuilder::new(text)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher().is_match(id),
        Err(_) => text == id,
    }
}

enum Test {
    Equals(Value),
    Matches(Regex),
    Prefix(String),
}

/// Argument constraints, each compiled on its own.
pub struct RefArgs(Vec<(String, Test)>);

impl RefArgs {
    /// The constraints of `map` (in key order, as a `BTreeMap` gives them),
    /// or `None` when one would not compile: a regex that fails (or is
    /// over the size limit), or a JSON Pointer with a `~` not followed by
    /// `0` or `1`.
    pub fn of<'a>(
        map: impl IntoIterator<Item = (&'a String, &'a ArgConstraint)>,
    ) -> Option<RefArgs> {
        let mut out = Vec::new();
        for (field, c) in map {
            if field.starts_with('/') && !pointer_escapes_valid(field) {
                return None;
            }
            let test = match c {
                ArgConstraint::Equals(v) => Test::Equals(v.clone()),
                ArgConstraint::Matches(re) => Test::Matches(
                    RegexBuilder::new(re)
                        .size_limit(REGEX_SIZE_LIMIT)
                        .build()
                        .ok()?,
                ),
                ArgConstraint::Prefix(p) => Test::Prefix(p.clone()),
            };
            out.push((field.clone(), test));
        }
        Some(RefArgs(out))
    }

    /// Whether every constraint holds: any constraint needs an arguments
    /// object; a missing field reads as `null` for `equals`; `matches` and
    /// `prefix` hold for strings only.
    fn hold(&self, args: Option<&Value>) -> bool {
        let Some(args @ Value::Object(map)) = args else {
            return false;
        };
        self.0.iter().all(|(field, test)| {
            let found = if field.starts_with('/') {
                args.pointer(field)
            } else {
                map.get(field)
            };
            match test {
                Test::Equals(expected) => found.unwrap_or(&Value::Null) == expected,
                Test::Matches(re) => matches!(found, Some(Value::String(s)) if re.is_match(s)),
                Test::Prefix(p) => {
                    matches!(found, Some(Value::String(s)) if s.starts_with(p.as_str()))
                }
            }
        })
    }
}

/// RFC 6901: every `~` is followed by `0` or `1`.
fn pointer_escapes_valid(pointer: &str) -> bool {
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

/// One rule as the reference sees it.
pub struct RefRule {
    function: String,
    action: RuleAction,
    modes: Option<Vec<Mode>>,
    args: Option<RefArgs>,
}

impl RefRule {
    /// The rule of `spec`, or `None` when the spec would not compile here
    /// (only used once the crate compiled the whole set).
    pub fn of(spec: &RuleSpec) -> Option<RefRule> {
        Some(match spec {
            RuleSpec::Shorthand(text) => {
                let (action, function) = if let Some(rest) = text.strip_prefix('!') {
                    (RuleAction::Deny, rest)
                } else if let Some(rest) = text.strip_prefix('?') {
                    (RuleAction::Ask, rest)
                } else {
                    (RuleAction::Allow, text.as_str())
                };
                RefRule {
                    function: function.to_owned(),
                    action,
                    modes: None,
                    args: None,
                }
            }
            RuleSpec::Object(obj) => RefRule {
                function: obj.function.clone(),
                action: obj.action,
                modes: obj.modes.clone(),
                args: match &obj.args {
                    None => None,
                    Some(map) => Some(RefArgs::of(map)?),
                },
            },
        })
    }

    /// The rule's action.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// Whether the rule alone matches the call: its glob and `args`, not its
    /// modes (what a rule's examples test).
    pub fn matches(&self, fid: &str, args: Option<&Value>) -> bool {
        pattern_matches(&self.function, fid) && self.args.as_ref().is_none_or(|a| a.hold(args))
    }

    /// Whether the rule applies to the call in `mode`.
    fn applies(&self, mode: Mode, fid: &str, args: Option<&Value>) -> bool {
        self.modes.as_ref().is_none_or(|m| m.contains(&mode)) && self.matches(fid, args)
    }
}

/// The policy a decision runs under: the rules, how they combine, and the
/// operator's extra human-only globs.
pub struct Policy<'a> {
    /// The rules, in order.
    pub rules: &'a [RefRule],
    /// How the rules combine with the mode and the grants.
    pub precedence: RulePrecedence,
    /// `human_only_extra`: a glob that does not compile guards its text.
    pub extra_guards: &'a [String],
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Policy<'_> {
    /// The first rule that applies in `lane` (`None`: any allow or deny rule).
    fn first(
        &self,
        lane: Option<RuleAction>,
        mode: Mode,
        fid: &str,
        args: Option<&Value>,
    ) -> Option<usize> {
        self.rules.iter().position(|r| {
            let in_lane = match lane {
                Some(action) => r.action == action,
                None => r.action != RuleAction::Ask,
            };
            in_lane && r.applies(mode, fid, args)
        })
    }

    /// The rules alone deny the call: the first allow or deny rule that
    /// applies is a deny (under `deny_ask_allow` a deny that applies has
    /// decided before any grant is looked at).
    fn rules_deny(&self, mode: Mode, fid: &str, args: Option<&Value>) -> bool {
        self.first(None, mode, fid, args)
            .is_some_and(|i| self.rules[i].action == RuleAction::Deny)
    }

    /// The first entry of `entries` that applies, with its slot.
    fn first_entry(
        &self,
        entries: &[Entry],
        mode: Mode,
        fid: &str,
        args: Option<&Value>,
    ) -> Option<(String, u32)> {
        entries
            .iter()
            .zip(0u32..)
            .find(|(e, _)| {
                pattern_matches(&e.function_id, fid)
                    && e.uses_left != Some(0)
                    && e.expires_at.is_none_or(|at| now_ms() < at)
                    && e.args
                        .as_ref()
                        .is_none_or(|map| RefArgs::of(map).is_some_and(|a| a.hold(args)))
                    && !(e.granted_by == GrantedBy::Seed && self.rules_deny(mode, fid, args))
            })
            .map(|(e, slot)| (e.function_id.clone(), slot))
    }

    /// The ladder, step by step.
    pub fn decide(&self, settings: &ApprovalSettings, fid: &str, args: Option<&Value>) -> Outcome {
        let mode = settings.mode;
        if builtin_guard(fid, args).is_some()
            || self.extra_guards.iter().any(|g| pattern_matches(g, fid))
        {
            return Outcome::HumanOnly;
        }
        let deny_first = self.precedence == RulePrecedence::DenyAskAllow;
        if deny_first {
            if let Some(i) = self.first(Some(RuleAction::Deny), mode, fid, args) {
                return Outcome::Rule(i);
            }
        }
        if let Some(i) = self.first(Some(RuleAction::Ask), mode, fid, args) {
            return Outcome::Ask(i);
        }
        if mode == Mode::Full {
            return Outcome::Full;
        }
        if let Some((text, slot)) = self.first_entry(&settings.approved_always, mode, fid, args) {
            return Outcome::Approved(text, slot);
        }
        if mode == Mode::Auto {
            if let Some((text, slot)) = self.first_entry(&settings.always_allow, mode, fid, args) {
                return Outcome::Always(text, slot);
            }
        }
        let lane = if deny_first {
            Some(RuleAction::Allow)
        } else {
            None
        };
        self.first(lane, mode, fid, args)
            .map_or(Outcome::NoMatch, Outcome::Rule)
    }
}
