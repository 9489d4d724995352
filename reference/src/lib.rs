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
//! Rules read arguments as their action says (deny and ask widely, field
//! names ignoring ASCII case; allow strictly, exact names: [`args`]). An
//! entry applies when its pattern matches (its exact id when
//! `pattern: false`), it has not expired, has uses left, its `args` hold
//! strictly (constraints that do not compile match nothing) and it was not
//! passed over. Stored seed entries are ignored; seeds come from the rules
//! (allow rules whose `modes` list `auto`, without `args`, each glob once),
//! minus the session's `suppressed_seeds`, and a seed never beats a deny
//! rule.
//!
//! Command fields (contract §25, [`commands`]): a deny or ask rule matches
//! when a command it names can run, and is consulted as `opaque_command`
//! when that cannot be told. An allow rule or grant (a *source*) matches
//! when every command of every reading of its field is plain and covered,
//! and it covers at least one itself. Who may cover for a source — its
//! *partners* — is written out naively in [`Judge::covers`]: every allow
//! rule and unbounded grant that applies to the call (its other
//! constraints hold, in the session's mode, in force) and whose command
//! constraints all name the source's field, from an earlier step of the
//! ladder, from the same grant list (any slot), or from the rules at or
//! before the source (`first_match`: an allow never reaches past a deny
//! rule placed between) or anywhere (`deny_ask_allow`: every deny rule was
//! consulted first).

pub mod args;
pub mod commands;

use std::cell::OnceCell;
use std::time::{SystemTime, UNIX_EPOCH};

use approval_gate::{
    builtin_guard, widening_root, ApprovalSettings, ArgConstraint, Basis, CommandHit, ConstraintOp,
    Decision, Entry, GrantList, GrantRef, GrantedBy, Limits, Mode, RuleAction, RulePrecedence,
    RuleSpec, Verdict, OPAQUE_COMMAND_RULE,
};
use globset::GlobBuilder;
use serde_json::Value;

pub use args::{Reading, RefArgs, WideHold};
pub use commands::{Found, Models, Sources};

/// A rule's first argument constraint as decisions report it: field,
/// operator, value (a regex or prefix as a JSON string).
pub type Constraint = (String, ConstraintOp, Value);

/// What made a deny or ask rule's command constraints hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// A command it names runs (or the field is neither text nor an argv).
    Runs,
    /// It cannot be told: the rule is consulted as `opaque_command`.
    Opaque,
}

/// Where a decision came from, in the reference's terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A built-in guard or a `human_only_extra` glob.
    HumanOnly,
    /// An agent's subscription judged by its targets: only when a harness
    /// mediates subscriptions, which the reference does not model (its
    /// calls are judged as on a harness that does not, so it never
    /// answers this).
    Subscription {
        /// Whether every function it would call is allowed.
        allowed: bool,
    },
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
        /// What its command constraints found, when it has any.
        command: Option<Hit>,
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
        /// Deny rules: what its command constraints found, when it has any.
        command: Option<Hit>,
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
    /// The call names a protected path (the reference judges
    /// configurations without protected paths: only the crate says this).
    ProtectedPath,
}

impl Outcome {
    /// What happens to the call.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::HumanOnly | Outcome::Subscription { allowed: false } => Verdict::Deny,
            Outcome::Subscription { allowed: true } => Verdict::Allow,
            Outcome::Lockdown
            | Outcome::Ask { .. }
            | Outcome::NoMatch
            | Outcome::WideningRoot
            | Outcome::ProtectedPath => Verdict::Hold,
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

    /// The rule id a decision reports for a rule or an ask rule:
    /// `opaque_command` when it was consulted on a doubt (§25.6).
    pub fn rule_id(&self) -> Option<&str> {
        match self {
            Outcome::Ask {
                command: Some(Hit::Opaque),
                ..
            }
            | Outcome::Rule {
                command: Some(Hit::Opaque),
                ..
            } => Some(OPAQUE_COMMAND_RULE),
            Outcome::Ask { rule_id, .. } | Outcome::Rule { rule_id, .. } => Some(rule_id),
            _ => None,
        }
    }
}

/// The crate's command hit in the reference's terms.
fn hit_of(hit: Option<CommandHit>) -> Option<Hit> {
    hit.map(|h| {
        if h.is_opaque() {
            Hit::Opaque
        } else {
            Hit::Runs
        }
    })
}

fn hit_from(found: Option<Found>) -> Option<Hit> {
    match found? {
        Found::Seen => Some(Hit::Runs),
        Found::Doubt => Some(Hit::Opaque),
        Found::Nothing => None,
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
            command,
        } => Outcome::Ask {
            index,
            rule_id: rule_id.to_owned(),
            timeout_ms,
            escalate_after_ms,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
            command: hit_of(command),
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
            command,
        } => Outcome::Rule {
            index,
            rule_id: rule_id.to_owned(),
            action,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
            command: hit_of(command),
        },
        Basis::ImplicitAsk => Outcome::ImplicitAsk,
        Basis::NoMatch => Outcome::NoMatch,
        Basis::WideningRoot { .. } => Outcome::WideningRoot,
        Basis::ProtectedPath { .. } => Outcome::ProtectedPath,
        Basis::Subscription { target_verdict, .. } => Outcome::Subscription {
            allowed: target_verdict == Verdict::Allow,
        },
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
    /// modes (what a rule's examples test); an allow rule's commands
    /// covered by its own words only, read at the default limits.
    pub fn matches(&self, fid: &str, args: Option<&Value>) -> bool {
        if !pattern_matches(&self.function, fid) {
            return false;
        }
        let Some(a) = &self.args else {
            return true;
        };
        let models = Models::new(Limits::default());
        match self.reading() {
            Reading::Wide => a.hold_wide(fid, args, &models) != WideHold::No,
            Reading::Strict => {
                a.hold_strict_text(fid, args)
                    && a.strict_commands(fid, args)
                        .iter()
                        .all(|(_, words, sources)| {
                            let mut own = false;
                            plain_reading(args, sources, &models, |command| {
                                own |= commands::starts_exact(command, words);
                                commands::starts_exact(command, words)
                            }) && own
                        })
            }
        }
    }

    /// How many of a deny or ask rule's constraints judge commands on a
    /// call to `fid`.
    pub fn command_constraints(&self, fid: &str) -> usize {
        self.args.as_ref().map_or(0, |a| a.wide_command_count(fid))
    }

    fn in_mode(&self, mode: Mode) -> bool {
        self.modes.as_ref().is_none_or(|m| m.contains(&mode))
    }
}

/// Allow rules and grants, one command constraint: `env` and `stdin`
/// absent or empty, every reading known (not opaque) and running
/// something, every command plain and `covered`.
fn plain_reading(
    args: Option<&Value>,
    sources: &Sources,
    models: &Models,
    mut covered: impl FnMut(&approval_gate::Command) -> bool,
) -> bool {
    let Some(Value::Object(obj)) = args else {
        return false;
    };
    if !commands::quiet(obj.get("env")) || !commands::quiet(obj.get("stdin")) {
        return false;
    }
    let Sources::Read(read) = sources else {
        return false;
    };
    for source in read {
        let model = models.of(source);
        if model.is_opaque() || model.commands.is_empty() {
            return false;
        }
        for command in &model.commands {
            if !commands::plain(command) || !covered(command) {
                return false;
            }
        }
    }
    true
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
/// operator's extra human-only globs, whether it is the lockdown, and the
/// limits command fields are read at.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<RefRule>,
    precedence: RulePrecedence,
    extra_guards: Vec<String>,
    lockdown: bool,
    limits: Limits,
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
            limits: Limits::default(),
        })
    }

    /// The lockdown: no rules; every call but the human-only surface holds.
    pub fn lockdown() -> Policy {
        Policy {
            rules: Vec::new(),
            precedence: RulePrecedence::FirstMatch,
            extra_guards: Vec::new(),
            lockdown: true,
            limits: Limits::default(),
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

    /// With the limits command fields are read at (a test that compares
    /// with the crate gives both the same generous budget, so that a busy
    /// machine cannot make one reading opaque and not the other).
    pub fn with_limits(mut self, limits: Limits) -> Policy {
        self.limits = limits;
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

    /// Whether the rules alone deny the call in the session's mode: the
    /// first allow or deny rule that applies is a deny.
    pub fn rules_deny(
        &self,
        settings: &ApprovalSettings,
        fid: &str,
        args: Option<&Value>,
        at: At<'_>,
    ) -> bool {
        Judge::new(self, settings, fid, args, at).rules_deny()
    }

    /// The ladder, step by step.
    pub fn decide(
        &self,
        settings: &ApprovalSettings,
        fid: &str,
        args: Option<&Value>,
        at: At<'_>,
    ) -> Outcome {
        Judge::new(self, settings, fid, args, at).decide()
    }
}

/// Where an allow source stands: its step (0 `approved_always`, 1
/// `always_allow`, 2 the rules), then its slot.
type Position = (u8, u32);

const APPROVED_ALWAYS: u8 = 0;
const ALWAYS_ALLOW: u8 = 1;
const RULES: u8 = 2;

/// An allow rule or unbounded grant that may cover commands of `field`
/// for a source it reaches.
#[derive(Debug)]
struct Partner {
    at: Position,
    field: String,
    words: Vec<String>,
}

/// One decision: the policy, the session and the call, the models read
/// so far, the partners found on first need.
struct Judge<'p> {
    policy: &'p Policy,
    settings: &'p ApprovalSettings,
    fid: &'p str,
    args: Option<&'p Value>,
    at: At<'p>,
    models: Models,
    partners: OnceCell<Vec<Partner>>,
}

impl<'p> Judge<'p> {
    fn new(
        policy: &'p Policy,
        settings: &'p ApprovalSettings,
        fid: &'p str,
        args: Option<&'p Value>,
        at: At<'p>,
    ) -> Judge<'p> {
        Judge {
            policy,
            settings,
            fid,
            args,
            at,
            models: Models::new(policy.limits.clone()),
            partners: OnceCell::new(),
        }
    }

    fn mode(&self) -> Mode {
        self.settings.mode
    }

    /// A deny or ask rule: whether it applies, with what its command
    /// constraints found.
    fn wide(&self, rule: &RefRule) -> Option<Option<Found>> {
        if !rule.in_mode(self.mode()) || !pattern_matches(&rule.function, self.fid) {
            return None;
        }
        match &rule.args {
            None => Some(None),
            Some(a) => match a.hold_wide(self.fid, self.args, &self.models) {
                WideHold::No => None,
                WideHold::Yes(found) => Some(found),
            },
        }
    }

    /// An allow rule at `index`: whether it applies.
    fn allow_rule(&self, index: usize, rule: &RefRule) -> bool {
        rule.in_mode(self.mode())
            && pattern_matches(&rule.function, self.fid)
            && rule
                .args
                .as_ref()
                .is_none_or(|a| self.strict(a, (RULES, index_slot(index))))
    }

    /// Whether a rule applies, with what a deny or ask rule's command
    /// constraints found.
    fn rule_applies(&self, index: usize) -> Option<Option<Found>> {
        let rule = &self.policy.rules[index];
        match rule.action {
            RuleAction::Allow => self.allow_rule(index, rule).then_some(None),
            RuleAction::Deny | RuleAction::Ask => self.wide(rule),
        }
    }

    /// The first rule that applies in `lane` (`None`: any allow or deny
    /// rule).
    fn first(&self, lane: Option<RuleAction>) -> Option<(usize, Option<Found>)> {
        for (index, rule) in self.policy.rules.iter().enumerate() {
            let in_lane = match lane {
                Some(action) => rule.action == action,
                None => rule.action != RuleAction::Ask,
            };
            if !in_lane {
                continue;
            }
            if let Some(found) = self.rule_applies(index) {
                return Some((index, found));
            }
        }
        None
    }

    fn rules_deny(&self) -> bool {
        self.first(None)
            .is_some_and(|(i, _)| self.policy.rules[i].action == RuleAction::Deny)
    }

    fn rule_outcome(&self, index: usize, found: Option<Found>) -> Outcome {
        let rule = &self.policy.rules[index];
        Outcome::Rule {
            index,
            rule_id: rule.rule_id.clone(),
            action: rule.action,
            constraint: rule.first_constraint.clone(),
            command: hit_from(found),
        }
    }

    /// The session's own entries of `list` (seed entries a record was
    /// stored with are ignored), with their slots.
    fn own(&self, list: GrantList) -> Vec<(u32, &'p Entry)> {
        let stored = match list {
            GrantList::ApprovedAlways => &self.settings.approved_always,
            GrantList::AlwaysAllow => &self.settings.always_allow,
        };
        (0u32..)
            .zip(stored.iter().filter(|e| e.granted_by != GrantedBy::Seed))
            .collect()
    }

    /// An entry names the call, has uses left, has not expired and was not
    /// passed over (its `args` aside).
    fn in_force(&self, list: GrantList, slot: u32, e: &Entry) -> bool {
        let named = if e.pattern {
            pattern_matches(&e.function_id, self.fid)
        } else {
            e.function_id == self.fid
        };
        named
            && e.uses_left != Some(0)
            && e.expires_at.is_none_or(|t| self.at.now_ms < t)
            && !self.at.passed_over.contains(&GrantRef { list, slot })
    }

    /// The first entry of `list` that applies, with its slot.
    fn first_entry(&self, list: GrantList) -> Option<(String, u32)> {
        let step = match list {
            GrantList::ApprovedAlways => APPROVED_ALWAYS,
            GrantList::AlwaysAllow => ALWAYS_ALLOW,
        };
        self.own(list)
            .into_iter()
            .find(|(slot, e)| {
                self.in_force(list, *slot, e)
                    && e.args.as_ref().is_none_or(|map| {
                        RefArgs::of(map).is_some_and(|a| self.strict(&a, (step, *slot)))
                    })
            })
            .map(|(slot, e)| (e.function_id.clone(), slot))
    }

    /// Allow rules and grants: the constraints that are not command
    /// constraints hold strictly, and every command constraint's field
    /// runs only plain commands, each covered by the source's own words or
    /// by a partner that reaches it, at least one by its own words.
    fn strict(&self, a: &RefArgs, at: Position) -> bool {
        if !a.hold_strict_text(self.fid, self.args) {
            return false;
        }
        a.strict_commands(self.fid, self.args)
            .iter()
            .all(|(field, words, sources)| {
                let mut own = false;
                plain_reading(self.args, sources, &self.models, |command| {
                    if commands::starts_exact(command, words) {
                        own = true;
                        return true;
                    }
                    self.covers(at, field, command)
                }) && own
            })
    }

    /// Whether a partner of the source at `source` covers `command` of
    /// `field`.
    fn covers(&self, source: Position, field: &str, command: &approval_gate::Command) -> bool {
        self.partners().iter().any(|p| {
            let reaches = if p.at.0 != source.0 {
                p.at.0 < source.0
            } else {
                source.0 != RULES
                    || self.policy.precedence == RulePrecedence::DenyAskAllow
                    || p.at.1 <= source.1
            };
            reaches && p.field == field && commands::starts_exact(command, &p.words)
        })
    }

    /// Every allow source that may cover for others: unbounded entries in
    /// force (`always_allow` only in `auto`), allow rules in the session's
    /// mode, each naming the call, its other constraints holding, with
    /// command constraints that all name one field.
    fn partners(&self) -> &Vec<Partner> {
        self.partners.get_or_init(|| {
            let mut out = Vec::new();
            let mut add = |at: Position, a: &RefArgs| {
                let fields = a.command_fields(self.fid);
                let Some((first, _)) = fields.first() else {
                    return;
                };
                if fields.iter().any(|(f, _)| f != first) {
                    return;
                }
                if !a.hold_strict_text(self.fid, self.args) {
                    return;
                }
                for (field, words) in fields {
                    out.push(Partner {
                        at,
                        field: field.to_owned(),
                        words: words.to_vec(),
                    });
                }
            };
            let mut lists = vec![(APPROVED_ALWAYS, GrantList::ApprovedAlways)];
            if self.mode() == Mode::Auto {
                lists.push((ALWAYS_ALLOW, GrantList::AlwaysAllow));
            }
            for (step, list) in lists {
                for (slot, e) in self.own(list) {
                    if e.uses_left.is_some() || !self.in_force(list, slot, e) {
                        continue;
                    }
                    if let Some(a) = e.args.as_ref().and_then(RefArgs::of) {
                        add((step, slot), &a);
                    }
                }
            }
            for (index, rule) in self.policy.rules.iter().enumerate() {
                if rule.action == RuleAction::Allow
                    && rule.in_mode(self.mode())
                    && pattern_matches(&rule.function, self.fid)
                {
                    if let Some(a) = &rule.args {
                        add((RULES, index_slot(index)), a);
                    }
                }
            }
            out
        })
    }

    /// The ladder, step by step.
    fn decide(&self) -> Outcome {
        let policy = self.policy;
        let (fid, args, mode) = (self.fid, self.args, self.mode());
        if builtin_guard(fid, args).is_some()
            || policy.extra_guards.iter().any(|g| pattern_matches(g, fid))
        {
            return Outcome::HumanOnly;
        }
        if policy.lockdown {
            return Outcome::Lockdown;
        }
        let deny_first = policy.precedence == RulePrecedence::DenyAskAllow;
        if deny_first {
            if let Some((i, found)) = self.first(Some(RuleAction::Deny)) {
                return self.rule_outcome(i, found);
            }
        }
        if widening_root(fid, args, None).is_some() {
            return Outcome::WideningRoot;
        }
        if let Some((index, found)) = self.first(Some(RuleAction::Ask)) {
            let rule = &policy.rules[index];
            return Outcome::Ask {
                index,
                rule_id: rule.rule_id.clone(),
                timeout_ms: rule.timeout_ms,
                escalate_after_ms: rule.escalate_after_ms,
                constraint: rule.first_constraint.clone(),
                command: hit_from(found),
            };
        }
        if mode == Mode::Full {
            return Outcome::Full;
        }
        if let Some((function_id, slot)) = self.first_entry(GrantList::ApprovedAlways) {
            return Outcome::Approved { function_id, slot };
        }
        if mode == Mode::Auto {
            let seed = policy.seeds().into_iter().find(|(glob, _)| {
                !self.settings.suppressed_seeds.contains(glob)
                    && pattern_matches(glob, fid)
                    && !self.rules_deny()
            });
            if let Some((function_id, rule)) = seed {
                return Outcome::Seed { function_id, rule };
            }
            if let Some((function_id, slot)) = self.first_entry(GrantList::AlwaysAllow) {
                return Outcome::Always { function_id, slot };
            }
        }
        let lane = if deny_first {
            Some(RuleAction::Allow)
        } else {
            None
        };
        match self.first(lane) {
            Some((i, found)) => self.rule_outcome(i, found),
            None if fid == "harness::ask" => Outcome::ImplicitAsk,
            None => Outcome::NoMatch,
        }
    }
}

/// A rule's index as a slot (rule sets are far smaller than `u32::MAX`).
fn index_slot(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}
