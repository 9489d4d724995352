//! A naive reference of approval-gate's decision ladder
//! (`architecture/contract.md` § Permission model): linear scans over the
//! rules and the allow-lists, each glob compiled and matched on its own,
//! each regex on its own, pointers resolved by `serde_json`. It shares no
//! matching code with the crate's pattern tables and compiled constraints,
//! so a disagreement points at the tables, the constraints or the ladder.
//!
//! It is the one oracle of the policy: the property tests
//! (`tests/it/properties.rs`) and the fuzz targets (`fuzz/`) compare
//! [`approval_gate::decide`] with [`Policy::decide`]. It models the whole
//! ladder, under both precedences:
//!
//! * the guard: the crate's `builtin_guard` (its own name matching has its
//!   unit tests; here it is taken as given) plus the operator's
//!   `human_only_extra` globs;
//! * the lockdown (no configuration has ever compiled): every other call
//!   holds;
//! * a widening root (the crate's `widening_root`, taken as given like the
//!   guard; the reference's calls come from a turn without a root): hold,
//!   after the deny rules of `deny_ask_allow`, before the ask rules;
//! * `first_match`: first ask rule that applies → mode `full` →
//!   `approved_always` → (`auto` only) the seeds of the rules, then
//!   `always_allow` → first allow or deny rule → `harness::ask` allowed by
//!   the implicit rule → hold;
//! * `deny_ask_allow`: first deny rule → first ask rule → mode `full` → the
//!   grants → first allow rule → `harness::ask` allowed → hold.
//!
//! Rules read arguments as their action says (deny and ask widely, allow
//! strictly: typed constraints and command prefixes, [`args`]). An entry
//! applies when its pattern matches (its exact id when `pattern: false`), it
//! has not expired, has uses left, its `args` hold strictly (constraints
//! that do not compile match nothing) and it was not passed over. Stored
//! seed entries are ignored; seeds come from the rules (allow rules whose
//! `modes` list `auto`, without `args`, each glob once), minus the
//! session's `suppressed_seeds`, and a seed never beats a deny rule.

pub mod args;

use std::time::{SystemTime, UNIX_EPOCH};

use approval_gate::{
    builtin_guard, widening_root, ApprovalSettings, ArgConstraint, Basis, ConstraintOp, Decision,
    Entry, GrantList, GrantRef, GrantedBy, Mode, RuleAction, RulePrecedence, RuleSpec, Verdict,
};
use globset::GlobBuilder;
use serde_json::Value;

pub use args::{Reading, RefArgs};

/// A rule's first argument constraint as decisions report it: field,
/// operator, value (a regex or prefix as a JSON string).
pub type Constraint = (String, ConstraintOp, Value);

/// Where a decision came from, in the reference's terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A built-in guard or a `human_only_extra` glob.
    HumanOnly,
    /// The lockdown holds the call.
    Lockdown,
    /// The first ask rule that applies.
    Ask {
        /// Its index in the rules.
        index: usize,
        /// Its id.
        rule_id: String,
        /// Its own deadline.
        timeout_ms: Option<u64>,
        /// Its own escalation delay.
        escalate_after_ms: Option<u64>,
        /// Its first constraint.
        constraint: Option<Constraint>,
    },
    /// Mode `full`.
    Full,
    /// An `approved_always` entry (slot among the session's own entries).
    Approved {
        /// Its function id.
        function_id: String,
        /// Its slot.
        slot: u32,
    },
    /// An `always_allow` entry (slot among the session's own entries).
    Always {
        /// Its function id.
        function_id: String,
        /// Its slot.
        slot: u32,
    },
    /// A seed of the rules.
    Seed {
        /// Its glob.
        function_id: String,
        /// The rule it comes from.
        rule: usize,
    },
    /// An allow or deny rule.
    Rule {
        /// Its index in the rules.
        index: usize,
        /// Its id.
        rule_id: String,
        /// Its action.
        action: RuleAction,
        /// Its first constraint.
        constraint: Option<Constraint>,
    },
    /// Nothing decided and the call is `harness::ask`: the implicit rule
    /// after the configured ones allows it.
    ImplicitAsk,
    /// Nothing decided.
    NoMatch,
    /// `harness::spawn` / `harness::send` asked for a root outside the
    /// calling turn's roots (the reference judges calls made in a turn
    /// without a root: every root asked for widens).
    WideningRoot,
}

impl Outcome {
    /// What happens to the call.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::HumanOnly => Verdict::Deny,
            Outcome::Lockdown | Outcome::Ask { .. } | Outcome::NoMatch | Outcome::WideningRoot => {
                Verdict::Hold
            }
            Outcome::Full
            | Outcome::Approved { .. }
            | Outcome::Always { .. }
            | Outcome::Seed { .. }
            | Outcome::ImplicitAsk => Verdict::Allow,
            Outcome::Rule { action, .. } => match action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny,
                RuleAction::Ask => Verdict::Hold,
            },
        }
    }
}

/// The crate's decision in the reference's terms.
pub fn outcome_of(d: &Decision<'_>) -> Outcome {
    match d.basis {
        Basis::HumanOnly { .. } => Outcome::HumanOnly,
        Basis::Lockdown => Outcome::Lockdown,
        Basis::Ask {
            index,
            rule_id,
            timeout_ms,
            escalate_after_ms,
            constraint,
            command: _,
        } => Outcome::Ask {
            index,
            rule_id: rule_id.to_owned(),
            timeout_ms,
            escalate_after_ms,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
        },
        Basis::ModeFull => Outcome::Full,
        Basis::ApprovedAlways { entry, slot } => Outcome::Approved {
            function_id: entry.function_id.clone(),
            slot,
        },
        Basis::AlwaysAllow { entry, slot } => Outcome::Always {
            function_id: entry.function_id.clone(),
            slot,
        },
        Basis::Seed { entry, rule } => Outcome::Seed {
            function_id: entry.function_id.clone(),
            rule,
        },
        Basis::Rule {
            index,
            rule_id,
            action,
            constraint,
            command: _,
        } => Outcome::Rule {
            index,
            rule_id: rule_id.to_owned(),
            action,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
        },
        Basis::ImplicitAsk => Outcome::ImplicitAsk,
        Basis::NoMatch => Outcome::NoMatch,
        Basis::WideningRoot { .. } => Outcome::WideningRoot,
    }
}

const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// Whether the pattern `text` matches `id`: a glob when it has a glob
/// metacharacter and compiles alone, else the exact text.
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

/// One rule as the reference reads it.
#[derive(Debug)]
pub struct RefRule {
    function: String,
    action: RuleAction,
    rule_id: String,
    modes: Option<Vec<Mode>>,
    args: Option<RefArgs>,
    first_constraint: Option<Constraint>,
    timeout_ms: Option<u64>,
    escalate_after_ms: Option<u64>,
    /// Whether it seeds `always_allow`: an allow rule whose `modes` list
    /// `auto`, without `args`.
    seeds: bool,
}

impl RefRule {
    /// The rule of `spec`, or `None` when its constraints would not compile
    /// (only meant for specs the crate compiled).
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
                    rule_id: text.clone(),
                    modes: None,
                    args: None,
                    first_constraint: None,
                    timeout_ms: None,
                    escalate_after_ms: None,
                    seeds: false,
                }
            }
            RuleSpec::Object(obj) => {
                let marker = match obj.action {
                    RuleAction::Allow => "",
                    RuleAction::Deny => "!",
                    RuleAction::Ask => "?",
                };
                RefRule {
                    function: obj.function.clone(),
                    action: obj.action,
                    rule_id: obj
                        .rule_id
                        .clone()
                        .unwrap_or_else(|| format!("{marker}{}", obj.function)),
                    modes: obj.modes.clone(),
                    args: match &obj.args {
                        None => None,
                        Some(map) => Some(RefArgs::of(map)?),
                    },
                    first_constraint: obj.args.as_ref().and_then(|map| {
                        map.iter().next().map(|(field, c)| {
                            let value = match c {
                                ArgConstraint::Equals(v) => v.clone(),
                                ArgConstraint::Matches(s)
                                | ArgConstraint::Prefix(s)
                                | ArgConstraint::Runs(s) => Value::String(s.clone()),
                            };
                            (field.clone(), c.op(), value)
                        })
                    }),
                    timeout_ms: obj.timeout_ms,
                    escalate_after_ms: obj.escalate_after_ms,
                    seeds: obj.action == RuleAction::Allow
                        && obj.args.is_none()
                        && obj.modes.as_ref().is_some_and(|m| m.contains(&Mode::Auto)),
                }
            }
        })
    }

    /// The rule's action.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// The rule's id.
    pub fn rule_id(&self) -> &str {
        &self.rule_id
    }

    /// How the rule reads arguments: deny and ask widely, allow strictly.
    pub fn reading(&self) -> Reading {
        match self.action {
            RuleAction::Allow => Reading::Strict,
            RuleAction::Deny | RuleAction::Ask => Reading::Wide,
        }
    }

    /// Whether the rule alone matches the call: its glob and `args`, not its
    /// modes (what a rule's examples test).
    pub fn matches(&self, fid: &str, args: Option<&Value>) -> bool {
        pattern_matches(&self.function, fid)
            && self
                .args
                .as_ref()
                .is_none_or(|a| a.hold(args, self.reading()))
    }

    /// Whether the rule applies to the call in `mode`.
    fn applies(&self, mode: Mode, fid: &str, args: Option<&Value>) -> bool {
        self.modes.as_ref().is_none_or(|m| m.contains(&mode)) && self.matches(fid, args)
    }
}

/// What a decision is made at, beyond the call: the time expiring grants
/// are judged at, and the grants whose use could not be written.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// Milliseconds since the epoch.
    pub now_ms: u64,
    /// Grants passed over (their slot among the session's own entries).
    pub passed_over: &'a [GrantRef],
}

impl At<'_> {
    /// At `now_ms`, nothing passed over.
    pub fn time(now_ms: u64) -> At<'static> {
        At {
            now_ms,
            passed_over: &[],
        }
    }
}

/// The wall clock, for callers whose generated expiries are far from it.
pub fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The policy a decision runs under: the rules, how they combine, the
/// operator's extra human-only globs, and whether it is the lockdown.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<RefRule>,
    precedence: RulePrecedence,
    extra_guards: Vec<String>,
    lockdown: bool,
}

impl Policy {
    /// The policy of `specs` under `first_match`, or `None` when a rule's
    /// constraints would not compile.
    pub fn new(specs: &[RuleSpec]) -> Option<Policy> {
        Some(Policy {
            rules: specs.iter().map(RefRule::of).collect::<Option<_>>()?,
            precedence: RulePrecedence::FirstMatch,
            extra_guards: Vec::new(),
            lockdown: false,
        })
    }

    /// The lockdown: no rules; every call but the human-only surface holds.
    pub fn lockdown() -> Policy {
        Policy {
            rules: Vec::new(),
            precedence: RulePrecedence::FirstMatch,
            extra_guards: Vec::new(),
            lockdown: true,
        }
    }

    /// With `precedence`.
    pub fn with_precedence(mut self, precedence: RulePrecedence) -> Policy {
        self.precedence = precedence;
        self
    }

    /// With the operator's `human_only_extra` globs (a glob that does not
    /// compile guards its exact text).
    pub fn with_extra_guards(mut self, globs: &[String]) -> Policy {
        self.extra_guards = globs.to_vec();
        self
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[RefRule] {
        &self.rules
    }

    /// The seeds: each seeding rule's glob, the first time it appears, with
    /// that rule's index.
    pub fn seeds(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.seeds && !out.iter().any(|(glob, _)| *glob == rule.function) {
                out.push((rule.function.clone(), index));
            }
        }
        out
    }

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
    /// applies is a deny.
    pub fn rules_deny(&self, mode: Mode, fid: &str, args: Option<&Value>) -> bool {
        self.first(None, mode, fid, args)
            .is_some_and(|i| self.rules[i].action == RuleAction::Deny)
    }

    fn rule_outcome(&self, index: usize) -> Outcome {
        let rule = &self.rules[index];
        Outcome::Rule {
            index,
            rule_id: rule.rule_id.clone(),
            action: rule.action,
            constraint: rule.first_constraint.clone(),
        }
    }

    /// The session's own entries of `list` (seed entries a record was
    /// stored with are ignored): the first that applies, with its slot.
    fn first_entry(
        &self,
        settings: &ApprovalSettings,
        list: GrantList,
        fid: &str,
        args: Option<&Value>,
        at: At<'_>,
    ) -> Option<(String, u32)> {
        let stored = match list {
            GrantList::ApprovedAlways => &settings.approved_always,
            GrantList::AlwaysAllow => &settings.always_allow,
        };
        let own: Vec<&Entry> = stored
            .iter()
            .filter(|e| e.granted_by != GrantedBy::Seed)
            .collect();
        own.into_iter()
            .zip(0u32..)
            .find(|(e, slot)| {
                let named = if e.pattern {
                    pattern_matches(&e.function_id, fid)
                } else {
                    e.function_id == fid
                };
                named
                    && e.uses_left != Some(0)
                    && e.expires_at.is_none_or(|t| at.now_ms < t)
                    && e.args.as_ref().is_none_or(|map| {
                        RefArgs::of(map).is_some_and(|a| a.hold(args, Reading::Strict))
                    })
                    && !at.passed_over.contains(&GrantRef { list, slot: *slot })
            })
            .map(|(e, slot)| (e.function_id.clone(), slot))
    }

    /// The ladder, step by step.
    pub fn decide(
        &self,
        settings: &ApprovalSettings,
        fid: &str,
        args: Option<&Value>,
        at: At<'_>,
    ) -> Outcome {
        let mode = settings.mode;
        if builtin_guard(fid, args).is_some()
            || self.extra_guards.iter().any(|g| pattern_matches(g, fid))
        {
            return Outcome::HumanOnly;
        }
        if self.lockdown {
            return Outcome::Lockdown;
        }
        let deny_first = self.precedence == RulePrecedence::DenyAskAllow;
        if deny_first {
            if let Some(i) = self.first(Some(RuleAction::Deny), mode, fid, args) {
                return self.rule_outcome(i);
            }
        }
        if widening_root(fid, args, None).is_some() {
            return Outcome::WideningRoot;
        }
        if let Some(index) = self.first(Some(RuleAction::Ask), mode, fid, args) {
            let rule = &self.rules[index];
            return Outcome::Ask {
                index,
                rule_id: rule.rule_id.clone(),
                timeout_ms: rule.timeout_ms,
                escalate_after_ms: rule.escalate_after_ms,
                constraint: rule.first_constraint.clone(),
            };
        }
        if mode == Mode::Full {
            return Outcome::Full;
        }
        if let Some((function_id, slot)) =
            self.first_entry(settings, GrantList::ApprovedAlways, fid, args, at)
        {
            return Outcome::Approved { function_id, slot };
        }
        if mode == Mode::Auto {
            let seed = self.seeds().into_iter().find(|(glob, _)| {
                !settings.suppressed_seeds.contains(glob)
                    && pattern_matches(glob, fid)
                    && !self.rules_deny(mode, fid, args)
            });
            if let Some((function_id, rule)) = seed {
                return Outcome::Seed { function_id, rule };
            }
            if let Some((function_id, slot)) =
                self.first_entry(settings, GrantList::AlwaysAllow, fid, args, at)
            {
                return Outcome::Always { function_id, slot };
            }
        }
        let lane = if deny_first {
            Some(RuleAction::Allow)
        } else {
            None
        };
        match self.first(lane, mode, fid, args) {
            Some(i) => self.rule_outcome(i),
            None if fid == "harness::ask" => Outcome::ImplicitAsk,
            None => Outcome::NoMatch,
        }
    }
}
