//! The configuration's `rules` array: its wire types and their compilation
//! into [`CompiledRules`], once per configuration change.
//!
//! # Format
//!
//! ```json
//! [ "!approval::*",                                  // shorthand deny
//!   "?deploy::*",                                    // shorthand ask
//!   "state::get",                                    // shorthand allow
//!   { "function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
//!     "modes": ["auto"], "args": { "command": { "matches": "push .*--force" } },
//!     "examples": { "match": [{ "function_id": "shell::exec",
//!                               "arguments": { "command": "git push -f --force" } }],
//!                   "no_match": [{ "function_id": "shell::exec",
//!                                  "arguments": { "command": "git push" } }] } },
//!   { "function": "db::migrate", "action": "ask", "timeout_ms": 1800000,
//!     "escalate_after_ms": 600000 } ]
//! ```
//!
//! Rule ids: a shorthand's `rule_id` is the string exactly as written, `!`
//! or `?` included (`"!approval::*"`), so the forms of one glob stay
//! distinguishable and an operator can search the configuration for it. An
//! object rule without `rule_id` gets the id its shorthand would have: the
//! `function` glob, prefixed with `!` for `deny` and `?` for `ask`.
//!
//! Examples are checked at every compile, each against its rule alone (its
//! function glob and `args`; `modes` say *when* a rule applies, not *what*
//! it matches): a failed example is a rule error like a compile error.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::args::{compile_args, strict_failing, wide_hold, CompiledConstraint, Reading, Wide};
use super::commands::{self, Needs};
use super::compile_error::CompileError;
use super::glob::{Pattern, PatternTable};
use super::guard::{ConfiguredGuards, ExtraGuards, Guard};
use super::protected::ProtectedPaths;
use crate::terms::{ArgConstraint, Mode};
use crate::terms::{Entry, GrantedBy};

/// The default rule set: deny this worker's own surface; everything else that
/// is not short-cut by the session's settings holds.
pub(super) const DEFAULT_RULES: &[&str] = &["!approval::*"];

/// The default `rules`: `["!approval::*"]`.
pub fn default_rules() -> Vec<RuleSpec> {
    DEFAULT_RULES
        .iter()
        .map(|r| RuleSpec::Shorthand((*r).to_owned()))
        .collect()
}

/// One item of the configuration's `rules` array: a string shorthand
/// (`"<glob>"` allows, `"!<glob>"` denies, `"?<glob>"` asks) or a rule object.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(description = "A shorthand string or a rule object.")]
pub enum RuleSpec {
    /// `"<glob>"` allows, `"!<glob>"` denies, `"?<glob>"` asks a human; the
    /// rule id is the string as written.
    #[schemars(
        title = "Shorthand",
        description = "\"glob\" allows matching functions; \"!glob\" denies them; \"?glob\" holds them for a human."
    )]
    Shorthand(#[schemars(length(min = 1))] String),
    /// A rule with an explicit action and optional id, modes and argument constraints.
    Object(RuleObject),
}

impl<'de> Deserialize<'de> for RuleSpec {
    /// Untagged, but an object reports its own error (`unknown field`,
    /// `missing field`) instead of serde's generic "did not match any variant".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RuleSpec, D::Error> {
        struct SpecVisitor;

        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = RuleSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a glob string (\"!<glob>\" to deny, \"?<glob>\" to ask) or a rule object",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RuleSpec, E> {
                Ok(RuleSpec::Shorthand(v.to_owned()))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<RuleSpec, E> {
                Ok(RuleSpec::Shorthand(v))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RuleSpec, A::Error> {
                RuleObject::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RuleSpec::Object)
            }
        }

        deserializer.deserialize_any(SpecVisitor)
    }
}

/// A rule object. Its configuration schema is derived from here: the
/// attributes give what an operator reads in the console's form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Rule",
    description = "A rule with an explicit action; optionally an id, the modes it applies in, argument constraints, an ask rule's deadlines and examples."
)]
pub struct RuleObject {
    /// The function id or glob the rule applies to (`*` spans `::`).
    #[schemars(
        title = "Function",
        description = "Function id or glob (*, ?, [..], {a,b}).",
        length(min = 1)
    )]
    pub function: String,
    /// What a match does.
    #[schemars(
        title = "Action",
        description = "allow runs the call, deny refuses it, ask holds it for a human. Ask rules are a floor: checked before full mode and the allow-lists, wherever they stand in the list."
    )]
    pub action: RuleAction,
    /// Shown in deny reasons and envelopes; defaults to the shorthand form
    /// (`"<function>"` for allow, `"!<function>"` for deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Rule id",
        description = "Name shown in deny reasons and evaluations.",
        with = "String"
    )]
    pub rule_id: Option<String>,
    /// The session modes the rule applies in; absent = every mode, `[]` = never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Modes",
        description = "Apply only in these modes (absent: every mode; empty: never).",
        with = "Vec<Mode>"
    )]
    pub modes: Option<Vec<Mode>>,
    /// Argument constraints, all of which must hold. A key is a top-level
    /// argument name, or a JSON Pointer when it starts with `/`. A rule with
    /// `args` never matches a call whose arguments are absent or not an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Argument constraints",
        description = "All must hold. Keys are top-level argument names or JSON Pointers starting with /.",
        with = "BTreeMap<String, ArgConstraint>"
    )]
    pub args: Option<BTreeMap<String, ArgConstraint>>,
    /// Ask rules only: how long a hold this rule causes may wait for a human
    /// (ms, at least 1000); wins over the global `pending_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Hold timeout (ms)",
        description = "Ask rules only: how long a call this rule holds may wait for a human before it is denied. Wins over the global pending timeout. Default: the global setting.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_timeout_ms"
    )]
    pub timeout_ms: Option<u64>,
    /// Ask rules only: when a hold this rule causes is escalated (ms, at
    /// least 1000); wins over the global `escalate_after_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Escalate after (ms)",
        description = "Ask rules only: when a call this rule holds is escalated to a second approver. Wins over the global setting. Default: the global setting.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_escalate_after_ms"
    )]
    pub escalate_after_ms: Option<u64>,
    /// Calls the rule must and must not match, checked at every compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Examples",
        description = "Calls the rule must match and must not match, checked against the rule alone (its function glob and args, not its modes) every time the policy loads. A failed example is a rule error: the rule set falls back to empty and the error is logged and shown by approval::evaluate and approval::health.",
        with = "RuleExamples",
        default = "no_examples",
        skip_serializing_if = "crate::schema::never",
        example = "example_examples"
    )]
    pub examples: Option<RuleExamples>,
}

fn example_timeout_ms() -> u64 {
    1_800_000
}

fn example_escalate_after_ms() -> u64 {
    600_000
}

/// What an absent `examples` means (shown as the schema's default).
fn no_examples() -> Option<RuleExamples> {
    Some(RuleExamples::default())
}

fn example_match() -> Vec<Probe> {
    vec![Probe {
        function_id: "shell::exec".into(),
        arguments: Some(serde_json::json!({"command": "git push --force"})),
    }]
}

fn example_no_match() -> Vec<Probe> {
    vec![Probe {
        function_id: "shell::exec".into(),
        arguments: Some(serde_json::json!({"command": "git push"})),
    }]
}

fn example_examples() -> RuleExamples {
    RuleExamples {
        matching: example_match(),
        no_match: example_no_match(),
    }
}

/// A rule's examples: calls its function glob and `args` must match, and
/// calls they must not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleExamples {
    /// Calls the rule must match.
    #[serde(rename = "match", default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        title = "Must match",
        description = "Calls the rule must match.",
        skip_serializing_if = "crate::schema::never",
        example = "example_match"
    )]
    pub matching: Vec<Probe>,
    /// Calls the rule must not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        title = "Must not match",
        description = "Calls the rule must not match.",
        skip_serializing_if = "crate::schema::never",
        example = "example_no_match"
    )]
    pub no_match: Vec<Probe>,
}

/// One example call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Example call",
    description = "A call to check the rule against: its function id and, optionally, its arguments."
)]
pub struct Probe {
    /// The call's function id.
    #[schemars(
        title = "Function id",
        description = "The example call's function id.",
        length(min = 1),
        example = "example_probe_function"
    )]
    pub function_id: String,
    /// The call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        title = "Arguments",
        description = "The example call's arguments (any JSON; a rule with args matches objects only). Default: none.",
        example = "example_probe_arguments"
    )]
    pub arguments: Option<serde_json::Value>,
}

fn example_probe_function() -> &'static str {
    "shell::exec"
}

fn example_probe_arguments() -> serde_json::Value {
    serde_json::json!({"command": "git push --force"})
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// The call runs.
    Allow,
    /// The call is denied with a reason.
    Deny,
    /// The call waits for a human: checked before `full` mode and the
    /// allow-lists, whatever the rule's position.
    Ask,
}

impl RuleAction {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::Deny => "deny",
            RuleAction::Ask => "ask",
        }
    }

    /// The shorthand marker of the action (`""`, `"!"`, `"?"`).
    fn marker(self) -> &'static str {
        match self {
            RuleAction::Allow => "",
            RuleAction::Deny => "!",
            RuleAction::Ask => "?",
        }
    }
}

/// How the rules combine with the session's mode and grants
/// (`architecture/contract.md` § Permission model).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RulePrecedence {
    /// Human-only → ask rules → mode `full` → grants → the first matching
    /// allow or deny rule → hold.
    #[default]
    FirstMatch,
    /// Human-only → every matching deny rule (it beats `full` mode and
    /// grants) → ask rules → mode `full` → grants → allow rules → hold.
    DenyAskAllow,
}

impl RulePrecedence {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RulePrecedence::FirstMatch => "first_match",
            RulePrecedence::DenyAskAllow => "deny_ask_allow",
        }
    }
}

/// A rule that does not compile, with its position in the `rules` array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema, thiserror::Error)]
#[error("rule {index}: {message}")]
pub struct RuleError {
    /// The rule's index in the `rules` array (0-based).
    pub index: usize,
    /// What is wrong with it.
    pub message: String,
}

/// The set of session modes a rule applies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModeSet(u8);

impl ModeSet {
    const ALL: ModeSet = ModeSet(0b111);

    fn bit(mode: Mode) -> u8 {
        match mode {
            Mode::Manual => 0b001,
            Mode::Auto => 0b010,
            Mode::Full => 0b100,
        }
    }

    fn of(modes: Option<&[Mode]>) -> ModeSet {
        match modes {
            None => ModeSet::ALL,
            Some(list) => ModeSet(list.iter().fold(0, |acc, &m| acc | ModeSet::bit(m))),
        }
    }

    pub(crate) fn contains(self, mode: Mode) -> bool {
        self.0 & ModeSet::bit(mode) != 0
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub(crate) function: Box<str>,
    pub(crate) rule_id: Box<str>,
    pub(crate) action: RuleAction,
    pub(crate) modes: ModeSet,
    /// Whether `modes` was given and lists `auto` (for seeding).
    explicit_auto: bool,
    /// `None`: no `args`; `Some`: every constraint must hold (in key order).
    pub(crate) args: Option<Box<[CompiledConstraint]>>,
    /// Ask rules: the hold's own deadline and escalation (ms).
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) escalate_after_ms: Option<u64>,
}

impl CompiledRule {
    /// How the rule reads a call's arguments: deny and ask rules widely,
    /// allow rules strictly (`super::args`).
    pub(crate) fn reading(&self) -> Reading {
        match self.action {
            RuleAction::Allow => Reading::Strict,
            RuleAction::Deny | RuleAction::Ask => Reading::Wide,
        }
    }

    /// Whether the rule has a constraint that may judge a command.
    pub(crate) fn may_judge_commands(&self) -> bool {
        self.args
            .iter()
            .flat_map(|args| args.iter())
            .any(CompiledConstraint::may_judge_commands)
    }

    /// Whether the rule alone matches a probe call (its examples): its
    /// `args` read as its action reads them, a command constraint of an
    /// allow rule covered by the rule's own words only; commands are read
    /// here and now.
    fn matches_probe(&self, function_id: &str, args: Option<&serde_json::Value>) -> bool {
        let mut needs = Needs::default();
        if let (Some(constraints), Some(serde_json::Value::Object(obj))) = (&self.args, args) {
            for c in constraints.iter() {
                c.add_needs(function_id, obj, &mut needs);
            }
        }
        let readings = needs.read_inline();
        match self.reading() {
            Reading::Wide => {
                wide_hold(self.args.as_deref(), function_id, args, &readings) != Wide::No
            }
            Reading::Strict => {
                let Some(constraints) = self.args.as_deref() else {
                    return true;
                };
                let Some(serde_json::Value::Object(obj)) = args else {
                    return false;
                };
                strict_failing(Some(constraints), function_id, args).is_none()
                    && constraints
                        .iter()
                        .all(|c| match c.command_words(function_id) {
                            None => true,
                            Some(words) => commands::strict_check(
                                &readings,
                                c.strict_plan(function_id, obj),
                                obj,
                                |command| commands::starts_exact(command, words),
                            )
                            .is_ok(),
                        })
            }
        }
    }
}

/// An `always_allow` entry derived from an allow rule whose `modes` list
/// `auto` and that has no `args` (a seed). Seeds are never stored: they
/// come from the rules in force, so a rule removed takes its seed with it.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    /// The entry as a session's settings show it (`granted_by: "seed"`,
    /// `granted_at: 0`).
    pub(crate) entry: Entry,
    /// The index of the first rule it comes from.
    pub(crate) rule: usize,
}

/// The configuration's rules, compiled: exact ids in a hash map, globs in one
/// `GlobSet`, so matching a call costs about the same at 1 rule as at 1,000.
/// Immutable once built; share it in an `Arc` and swap the whole value on a
/// configuration change.
///
/// Three tables: `table` holds the allow and deny rules and `asks` the ask
/// rules (a floor checked before everything but the guard, so it is matched
/// on its own), each slot the rule's index; `seed_table` the seeds, each
/// slot the seed's index.
///
/// A rule set may be the **lockdown** ([`CompiledRules::lockdown`]): what
/// runs while no configuration has ever compiled. It has no rules; the
/// guard still denies the human-only surface and every other call holds for
/// a human, in every mode, whatever the session's grants say.
#[derive(Debug, Clone, Default)]
pub struct CompiledRules {
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) table: PatternTable,
    pub(crate) asks: PatternTable,
    /// The entries derived from the rules (in rule order, once per glob).
    pub(crate) seeds: Vec<Seed>,
    pub(crate) seed_table: PatternTable,
    /// The operator's extra human-only guards.
    extra: ExtraGuards,
    configured: ConfiguredGuards,
    pub(crate) precedence: RulePrecedence,
    lockdown: bool,
    /// Whether some rule has a constraint that may judge a command: when
    /// none does, no call's command is ever read for the rules.
    pub(crate) commands: bool,
    /// The configuration's protected paths and the functions judged.
    pub(crate) protected: ProtectedPaths,
}

impl CompiledRules {
    /// Compiles `specs`, or returns every error found, each with its index.
    ///
    /// Errors: an empty or whitespace-padded `function` glob, a bare `"!"`,
    /// a doubled `"!!"`, an object `function` starting with `!`, an invalid
    /// glob, an empty `rule_id`, an invalid regex, an invalid JSON Pointer key.
    pub fn compile(specs: &[RuleSpec]) -> Result<CompiledRules, Vec<RuleError>> {
        let mut errors = Vec::new();
        let mut rules = Vec::with_capacity(specs.len());
        let mut patterns = Vec::with_capacity(specs.len());
        let mut asks = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            match compile_one(spec) {
                Ok((rule, pattern)) => {
                    if let RuleSpec::Object(RuleObject {
                        examples: Some(examples),
                        ..
                    }) = spec
                    {
                        errors.extend(check_examples(&rule, &pattern, examples).into_iter().map(
                            |cause| RuleError {
                                index,
                                message: cause.to_string(),
                            },
                        ));
                    }
                    if rule.action == RuleAction::Ask {
                        asks.push((pattern, slot(index)));
                    } else {
                        patterns.push((pattern, slot(index)));
                    }
                    rules.push(rule);
                }
                Err(cause) => errors.push(RuleError {
                    index,
                    message: cause.to_string(),
                }),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        match PatternTable::build(patterns)
            .and_then(|table| PatternTable::build(asks).map(|asks| (table, asks)))
        {
            Ok((table, asks)) => {
                let (seeds, seed_table) = seeds_of(&rules);
                let commands = rules.iter().any(CompiledRule::may_judge_commands);
                Ok(CompiledRules {
                    commands,
                    protected: ProtectedPaths::default(),
                    rules,
                    table,
                    asks,
                    seeds,
                    seed_table,
                    extra: ExtraGuards::default(),
                    configured: ConfiguredGuards::default(),
                    precedence: RulePrecedence::default(),
                    lockdown: false,
                })
            }
            Err(err) => {
                if err.culprits.is_empty() {
                    let index = specs.len().saturating_sub(1);
                    Err(vec![RuleError {
                        index,
                        message: CompileError::TooLarge(err.message).to_string(),
                    }])
                } else {
                    Err(err
                        .culprits
                        .into_iter()
                        .map(|(slot, message)| RuleError {
                            index: slot as usize,
                            message: CompileError::Glob(message).to_string(),
                        })
                        .collect())
                }
            }
        }
    }

    /// Adds the operator's `human_only_extra` guards; returns a message per
    /// glob that could only guard its exact text.
    pub fn with_extra_guards(mut self, globs: &[String]) -> (CompiledRules, Vec<String>) {
        let (extra, errors) = ExtraGuards::compile(globs);
        self.extra = extra;
        (self, errors)
    }

    /// Guards the function ids the configuration names for the gate's own
    /// use (the reviewer's): human-only, like the extra globs.
    pub fn with_configured_guards(mut self, ids: &[&str]) -> CompiledRules {
        self.configured = ConfiguredGuards::new(ids);
        self
    }

    /// Sets the protected paths (`protected_paths` with the running entry's
    /// own file, and `protected_path_functions`).
    pub fn with_protected(mut self, globs: &[String], functions: &[String]) -> CompiledRules {
        self.protected = ProtectedPaths::compile(globs, functions);
        self
    }

    /// The protected paths in force.
    pub fn protected(&self) -> &ProtectedPaths {
        &self.protected
    }

    /// Sets how the rules combine with modes and grants.
    pub fn with_precedence(mut self, precedence: RulePrecedence) -> CompiledRules {
        self.precedence = precedence;
        self
    }

    /// How the rules combine with modes and grants.
    pub fn precedence(&self) -> RulePrecedence {
        self.precedence
    }

    /// The extra guard `function_id` matches, if any.
    pub(crate) fn extra_guard(&self, function_id: &str) -> Option<Guard<'_>> {
        self.configured
            .matching(function_id)
            .or_else(|| self.extra.matching(function_id))
    }

    /// No rules: every call that reaches the rules holds.
    pub fn empty() -> CompiledRules {
        CompiledRules::default()
    }

    /// The lockdown: what runs while no configuration has ever compiled.
    /// The human-only surface is denied; every other call holds for a human
    /// (rule id `lockdown`), in every mode, whatever the session's grants
    /// say. Extra guards and a precedence may still be set on it; they do
    /// not lift it.
    pub fn lockdown() -> CompiledRules {
        CompiledRules {
            lockdown: true,
            ..CompiledRules::default()
        }
    }

    /// Whether this is the lockdown.
    pub fn is_lockdown(&self) -> bool {
        self.lockdown
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule ids, in rule order.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| &*r.rule_id)
    }

    /// The seeds' function globs: those of the `allow` rules whose `modes`
    /// explicitly list `auto` and that have no `args`, in rule order,
    /// without duplicates. A session's `always_allow` shows them (unless it
    /// suppressed one); they are never stored.
    ///
    /// Rules with `args` are left out: an allow-list entry is a bare function
    /// id, so seeding one would allow every argument the rule's constraints
    /// exclude. Rules without `modes` are left out because they already allow
    /// in every mode.
    pub fn auto_seed_globs(&self) -> Vec<String> {
        self.seeds
            .iter()
            .map(|seed| seed.entry.function_id.clone())
            .collect()
    }
}

/// The seeds of compiled rules and their table. A table that cannot be
/// built (it never is larger than the rules' own) leaves no seeds: fewer
/// allows, never more.
fn seeds_of(rules: &[CompiledRule]) -> (Vec<Seed>, PatternTable) {
    let mut seeds: Vec<Seed> = Vec::new();
    for (rule_index, rule) in rules.iter().enumerate() {
        let seeds_one =
            rule.action == RuleAction::Allow && rule.explicit_auto && rule.args.is_none();
        if seeds_one && !seeds.iter().any(|s| *s.entry.function_id == *rule.function) {
            seeds.push(Seed {
                entry: Entry::new(&*rule.function, 0, GrantedBy::Seed),
                rule: rule_index,
            });
        }
    }
    let patterns = seeds
        .iter()
        .zip(0u32..)
        .filter_map(|(seed, slot)| Some((Pattern::parse(&seed.entry.function_id).ok()?, slot)))
        .collect();
    match PatternTable::build(patterns) {
        Ok(table) => (seeds, table),
        Err(_) => (Vec::new(), PatternTable::default()),
    }
}

/// A slot number for the pattern table (rule sets beyond `u32::MAX` entries
/// are not representable in a configuration value anyway).
fn slot(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

fn compile_one(spec: &RuleSpec) -> Result<(CompiledRule, Pattern), CompileError> {
    match spec {
        RuleSpec::Shorthand(text) => {
            let (action, function) = if let Some(rest) = text.strip_prefix('!') {
                (RuleAction::Deny, rest)
            } else if let Some(rest) = text.strip_prefix('?') {
                (RuleAction::Ask, rest)
            } else {
                (RuleAction::Allow, text.as_str())
            };
            if action != RuleAction::Allow && function.is_empty() {
                return Err(CompileError::MarkerAlone(action.marker()));
            }
            if function.starts_with('!') {
                return Err(CompileError::DoubleMarker(text.clone()));
            }
            let pattern = function_pattern(function)?;
            let rule = CompiledRule {
                function: function.into(),
                rule_id: text.as_str().into(),
                action,
                modes: ModeSet::ALL,
                explicit_auto: false,
                args: None,
                timeout_ms: None,
                escalate_after_ms: None,
            };
            Ok((rule, pattern))
        }
        RuleSpec::Object(obj) => {
            if obj.function.starts_with('!') {
                // Almost certainly the shorthand's deny marker: in an object it
                // would be a literal `!` that no function id starts with.
                return Err(CompileError::MarkerInObject(obj.function.clone()));
            }
            let pattern = function_pattern(&obj.function)?;
            let rule_id = match &obj.rule_id {
                Some(id) if id.trim().is_empty() => return Err(CompileError::EmptyRuleId),
                Some(id) => id.as_str().into(),
                None => format!("{}{}", obj.action.marker(), obj.function).into(),
            };
            for (name, value) in [
                ("timeout_ms", obj.timeout_ms),
                ("escalate_after_ms", obj.escalate_after_ms),
            ] {
                match value {
                    Some(_) if obj.action != RuleAction::Ask => {
                        return Err(CompileError::DeadlineNotAsk(name));
                    }
                    Some(ms) if ms < MIN_DEADLINE_MS => {
                        return Err(CompileError::DeadlineTooShort {
                            field: name,
                            min: MIN_DEADLINE_MS,
                            ms,
                        });
                    }
                    _ => {}
                }
            }
            let args = obj.args.as_ref().map(compile_args).transpose()?;
            let rule = CompiledRule {
                function: obj.function.as_str().into(),
                rule_id,
                action: obj.action,
                modes: ModeSet::of(obj.modes.as_deref()),
                explicit_auto: obj.modes.as_ref().is_some_and(|m| m.contains(&Mode::Auto)),
                args,
                timeout_ms: obj.timeout_ms,
                escalate_after_ms: obj.escalate_after_ms,
            };
            Ok((rule, pattern))
        }
    }
}

/// The shortest deadline an ask rule may set: a hold must give a human a
/// chance to answer.
pub const MIN_DEADLINE_MS: u64 = 1000;

/// Runs each example against the rule alone (its glob and `args`, not its
/// modes); a message per example that fails.
fn check_examples(
    rule: &CompiledRule,
    pattern: &Pattern,
    examples: &RuleExamples,
) -> Vec<CompileError> {
    let matches = |probe: &Probe| {
        pattern.matches(&probe.function_id)
            && rule.matches_probe(&probe.function_id, probe.arguments.as_ref())
    };
    let show = |probe: &Probe| match &probe.arguments {
        Some(arguments) => format!("{} {}", probe.function_id, arguments),
        None => probe.function_id.clone(),
    };
    let lists = [
        ("match", &examples.matching, true),
        ("no_match", &examples.no_match, false),
    ];
    let mut out = Vec::new();
    for (which, probes, must_match) in lists {
        for (index, probe) in probes.iter().enumerate() {
            if matches(probe) != must_match {
                out.push(CompileError::Example {
                    which,
                    index,
                    probe: show(probe),
                    must_match,
                });
            }
        }
    }
    out
}

fn function_pattern(function: &str) -> Result<Pattern, CompileError> {
    if function.trim().is_empty() {
        return Err(CompileError::EmptyFunction);
    }
    if function.trim() != function {
        return Err(CompileError::PaddedFunction(function.to_owned()));
    }
    Pattern::parse(function).map_err(|e| CompileError::Glob(e.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn specs(v: serde_json::Value) -> Vec<RuleSpec> {
        serde_json::from_value(v).expect("rule specs parse")
    }

    fn compile(v: serde_json::Value) -> CompiledRules {
        CompiledRules::compile(&specs(v)).expect("rules compile")
    }

    fn errors(v: serde_json::Value) -> Vec<RuleError> {
        CompiledRules::compile(&specs(v)).expect_err("rules must not compile")
    }

    #[test]
    fn default_rules_deny_the_approval_surface() {
        assert_eq!(
            default_rules(),
            vec![RuleSpec::Shorthand("!approval::*".into())]
        );
        let rules = CompiledRules::compile(&default_rules()).expect("compiles");
        assert_eq!(rules.len(), 1);
        assert_eq!(rules.rules[0].action, RuleAction::Deny);
        assert_eq!(&*rules.rules[0].rule_id, "!approval::*");
        assert_eq!(&*rules.rules[0].function, "approval::*");
    }

    #[test]
    fn specs_deserialize_from_strings_and_objects() {
        let parsed = specs(json!([
            "a::b",
            {"function": "c::*", "action": "deny", "rule_id": "r", "modes": ["auto", "manual"],
             "args": {"k": {"equals": 1}, "/p": {"matches": "x"}}}
        ]));
        assert_eq!(parsed[0], RuleSpec::Shorthand("a::b".into()));
        let RuleSpec::Object(obj) = &parsed[1] else {
            panic!("expected an object rule");
        };
        assert_eq!(obj.function, "c::*");
        assert_eq!(obj.action, RuleAction::Deny);
        assert_eq!(obj.rule_id.as_deref(), Some("r"));
        assert_eq!(obj.modes, Some(vec![Mode::Auto, Mode::Manual]));
        let args = obj.args.as_ref().expect("args");
        assert_eq!(args["k"], ArgConstraint::Equals(json!(1)));
        assert_eq!(args["/p"], ArgConstraint::Matches("x".into()));
        // Round trip through the wire form.
        let back = serde_json::to_value(&parsed).expect("serializes");
        assert_eq!(
            back,
            json!(["a::b", {"function": "c::*", "action": "deny", "rule_id": "r",
                "modes": ["auto", "manual"], "args": {"/p": {"matches": "x"}, "k": {"equals": 1}}}])
        );
    }

    #[test]
    fn object_errors_are_specific() {
        let unknown = serde_json::from_value::<RuleSpec>(
            json!({"function": "a", "action": "allow", "mode": []}),
        )
        .expect_err("unknown field");
        assert!(
            unknown.to_string().contains("unknown field `mode`"),
            "{unknown}"
        );
        let missing =
            serde_json::from_value::<RuleSpec>(json!({"function": "a"})).expect_err("missing");
        assert!(
            missing.to_string().contains("missing field `action`"),
            "{missing}"
        );
        let action = serde_json::from_value::<RuleSpec>(json!({"function": "a", "action": "hold"}))
            .expect_err("bad action");
        assert!(
            action.to_string().contains("unknown variant `hold`"),
            "{action}"
        );
        let mode = serde_json::from_value::<RuleSpec>(
            json!({"function": "a", "action": "allow", "modes": ["yolo"]}),
        )
        .expect_err("bad mode");
        assert!(mode.to_string().contains("yolo"), "{mode}");
        let number = serde_json::from_value::<RuleSpec>(json!(3)).expect_err("number");
        assert!(number.to_string().contains("a glob string"), "{number}");
    }

    #[test]
    fn shorthand_ids_and_actions() {
        let rules = compile(json!(["state::get", "!shell::*"]));
        assert_eq!(rules.rules[0].action, RuleAction::Allow);
        assert_eq!(&*rules.rules[0].rule_id, "state::get");
        assert_eq!(rules.rules[1].action, RuleAction::Deny);
        assert_eq!(&*rules.rules[1].rule_id, "!shell::*");
        assert_eq!(&*rules.rules[1].function, "shell::*");
        assert_eq!(
            rules.rule_ids().collect::<Vec<_>>(),
            vec!["state::get", "!shell::*"]
        );
    }

    #[test]
    fn object_ids_default_to_the_shorthand_form() {
        let rules = compile(json!([
            {"function": "a::*", "action": "allow"},
            {"function": "b::*", "action": "deny"},
            {"function": "c", "action": "deny", "rule_id": "custom"}
        ]));
        let ids: Vec<_> = rules.rule_ids().collect();
        assert_eq!(ids, vec!["a::*", "!b::*", "custom"]);
    }

    #[test]
    fn modes_absent_means_every_mode_and_empty_means_never() {
        let rules = compile(json!([
            {"function": "a", "action": "allow"},
            {"function": "a", "action": "allow", "modes": []},
            {"function": "a", "action": "allow", "modes": ["auto"]},
            {"function": "a", "action": "allow", "modes": ["manual", "full"]},
            {"function": "a", "action": "allow", "modes": ["auto", "auto"]}
        ]));
        let table: Vec<[bool; 3]> = rules
            .rules
            .iter()
            .map(|r| [Mode::Manual, Mode::Auto, Mode::Full].map(|m| r.modes.contains(m)))
            .collect();
        assert_eq!(
            table,
            vec![
                [true, true, true],
                [false, false, false],
                [false, true, false],
                [true, false, true],
                [false, true, false]
            ]
        );
    }

    #[test]
    fn every_compile_error_is_reported_with_its_index() {
        let errs = errors(json!([
            "ok::*",
            "",
            "!",
            "!!x",
            "a[",
            {"function": "", "action": "allow"},
            {"function": "x", "action": "deny", "args": {"k": {"matches": "("}}},
            {"function": "x", "action": "deny", "args": {"/a~2": {"equals": 1}}},
            {"function": "{a,b", "action": "allow"},
            "  ",
            " shell::*",
            {"function": "x", "action": "deny", "rule_id": ""},
            {"function": "!x", "action": "deny"},
            "fine"
        ]));
        let indices: Vec<usize> = errs.iter().map(|e| e.index).collect();
        assert_eq!(indices, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let text = |i: usize| {
            errs.iter()
                .find(|e| e.index == i)
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(text(1), "rule 1: the function glob must not be empty");
        assert_eq!(text(2), "rule 2: `!` must be followed by a function glob");
        assert!(
            text(3).contains("a shorthand has one marker"),
            "{}",
            text(3)
        );
        assert!(text(4).starts_with("rule 4: invalid glob"), "{}", text(4));
        assert_eq!(text(5), "rule 5: the function glob must not be empty");
        assert!(
            text(6).starts_with("rule 6: args \"k\": invalid regex"),
            "{}",
            text(6)
        );
        assert!(text(7).contains("invalid JSON pointer"), "{}", text(7));
        assert!(text(8).starts_with("rule 8: invalid glob"), "{}", text(8));
        assert_eq!(text(9), "rule 9: the function glob must not be empty");
        assert!(text(10).contains("whitespace"), "{}", text(10));
        assert_eq!(text(11), "rule 11: `rule_id` must not be empty");
        assert_eq!(
            text(12),
            "rule 12: the function glob \"!x\" must not start with `!`; use \"action\": \"deny\""
        );
    }

    #[test]
    fn ask_rules_are_written_with_a_question_mark_or_action_ask() {
        let rules = compile(json!([
            "?deploy::*",
            "??x",
            {"function": "db::*", "action": "ask"},
            {"function": "db::drop", "action": "ask", "rule_id": "drop", "modes": ["full"],
             "timeout_ms": 1000, "escalate_after_ms": 60000}
        ]));
        let shape: Vec<_> = rules
            .rules
            .iter()
            .map(|r| {
                (
                    r.action,
                    &*r.rule_id,
                    &*r.function,
                    r.timeout_ms,
                    r.escalate_after_ms,
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (RuleAction::Ask, "?deploy::*", "deploy::*", None, None),
                (RuleAction::Ask, "??x", "?x", None, None),
                (RuleAction::Ask, "?db::*", "db::*", None, None),
                (RuleAction::Ask, "drop", "db::drop", Some(1000), Some(60000)),
            ]
        );
        // Ask rules live in their own table; none in the allow/deny one.
        assert_eq!(rules.asks.len(), 4);
        assert_eq!(rules.table.len(), 0);
        assert!(rules.auto_seed_globs().is_empty());
    }

    #[test]
    fn deadlines_belong_to_ask_rules_and_are_at_least_a_second() {
        let errs = errors(json!([
            "?",
            "?!x",
            {"function": "a", "action": "allow", "timeout_ms": 5000},
            {"function": "a", "action": "deny", "escalate_after_ms": 5000},
            {"function": "a", "action": "ask", "timeout_ms": 999},
            {"function": "a", "action": "ask", "escalate_after_ms": 0},
            {"function": "a", "action": "ask", "timeout_ms": 1000, "escalate_after_ms": 1000}
        ]));
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            vec![
                "rule 0: `?` must be followed by a function glob",
                "rule 1: \"?!x\": a shorthand has one marker (`!` denies, `?` asks)",
                "rule 2: `timeout_ms` applies to ask rules only (\"action\": \"ask\")",
                "rule 3: `escalate_after_ms` applies to ask rules only (\"action\": \"ask\")",
                "rule 4: `timeout_ms` must be at least 1000 ms, got 999",
                "rule 5: `escalate_after_ms` must be at least 1000 ms, got 0",
            ]
        );
    }

    #[test]
    fn examples_are_checked_against_the_rule_alone() {
        // Modes do not matter to an example; glob and args do.
        let ok = compile(json!([{
            "function": "shell::exec", "action": "deny", "modes": [],
            "args": {"cmd": {"prefix": "rm "}},
            "examples": {
                "match": [{"function_id": "shell::exec", "arguments": {"cmd": "rm -rf /"}}],
                "no_match": [
                    {"function_id": "shell::exec", "arguments": {"cmd": "ls"}},
                    {"function_id": "shell::exec", "arguments": {}},
                    {"function_id": "shell::run", "arguments": {"cmd": "rm x"}}
                ]
            }
        }]));
        assert_eq!(ok.len(), 1);
        let errs = errors(json!([
            "a",
            {"function": "shell::*", "action": "ask", "examples": {
                "match": [{"function_id": "coder::x"}],
                "no_match": [{"function_id": "shell::x", "arguments": [1]}]}}
        ]));
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            vec![
                "rule 1: example match[0] (coder::x) does not match the rule",
                "rule 1: example no_match[0] (shell::x [1]) matches the rule",
            ]
        );
        // Unknown keys in examples are refused when the configuration parses.
        assert!(
            serde_json::from_value::<RuleSpec>(json!({"function": "a", "action": "allow",
            "examples": {"matches": []}}))
            .is_err()
        );
        assert!(
            serde_json::from_value::<RuleSpec>(json!({"function": "a", "action": "allow",
            "examples": {"match": [{"function": "a"}]}}))
            .is_err()
        );
    }

    #[test]
    fn a_regex_over_the_size_limit_is_a_rule_error_that_suggests_the_fix() {
        let errs = errors(json!([
            "ok::*",
            {"function": "shell::exec", "action": "deny", "args": {"cmd": {"matches": r"(?i)(?:\w+\s+){60}--force"}}}
        ]));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].index, 1);
        let text = errs[0].to_string();
        assert!(
            text.starts_with("rule 1: args \"cmd\": the regex"),
            "{text}"
        );
        assert!(text.contains("1 MiB limit"), "{text}");
        assert!(text.contains(r"(?-u:\w)"), "{text}");
        // The suggested fix compiles.
        compile(json!([{"function": "shell::exec", "action": "deny",
            "args": {"cmd": {"matches": r"(?i)(?:(?-u:\w)+(?-u:\s)+){60}--force"}}}]));
    }

    #[test]
    fn an_empty_rule_set_compiles() {
        let rules = CompiledRules::compile(&[]).expect("compiles");
        assert!(rules.is_empty());
        assert_eq!(rules.len(), 0);
        assert!(CompiledRules::empty().is_empty());
    }

    #[test]
    fn auto_seed_globs_take_explicit_auto_allow_rules_without_args() {
        let rules = compile(json!([
            "!approval::*",
            "always::allowed",
            {"function": "state::get", "action": "allow", "modes": ["auto"]},
            {"function": "state::*", "action": "allow", "modes": ["manual", "auto"]},
            {"function": "manual::only", "action": "allow", "modes": ["manual"]},
            {"function": "denied::*", "action": "deny", "modes": ["auto"]},
            {"function": "shell::exec", "action": "allow", "modes": ["auto"], "args": {"cmd": {"equals": "ls"}}},
            {"function": "state::get", "action": "allow", "modes": ["auto"], "rule_id": "dup"},
            {"function": "never", "action": "allow", "modes": []}
        ]));
        assert_eq!(
            rules.auto_seed_globs(),
            vec!["state::get".to_owned(), "state::*".to_owned()]
        );
        assert!(CompiledRules::empty().auto_seed_globs().is_empty());
    }

    #[test]
    fn rule_21_4_examples_read_arguments_as_their_rule_does() {
        // A deny rule reads widely: no arguments at all, or an argv array,
        // meet its constraint; an allow rule reads strictly.
        let ok = compile(json!([
            {"function": "shell::exec", "action": "deny", "args": {"cmd": {"matches": "rm -rf"}},
             "examples": {"match": [
                {"function_id": "shell::exec"},
                {"function_id": "shell::exec", "arguments": {"cmd": ["rm", "-rf", "/"]}}
             ]}},
            {"function": "shell::exec", "action": "allow", "args": {"cmd": {"prefix": "git status"}},
             "examples": {"match": [
                {"function_id": "shell::exec", "arguments": {"cmd": "git status --short"}},
                {"function_id": "shell::exec", "arguments": {"cmd": ["git", "status"]}}
             ], "no_match": [
                {"function_id": "shell::exec"},
                {"function_id": "shell::exec", "arguments": {"cmd": "git status; id"}},
                {"function_id": "shell::exec", "arguments": {"cmd": "git statusx"}}
             ]}}
        ]));
        assert_eq!(ok.len(), 2);
        assert_eq!(ok.rules[0].reading(), Reading::Wide);
        assert_eq!(ok.rules[1].reading(), Reading::Strict);
    }

    #[test]
    fn rule_21_1_the_lockdown_has_no_rules_and_says_so() {
        let lockdown = CompiledRules::lockdown();
        assert!(lockdown.is_lockdown());
        assert!(lockdown.is_empty());
        assert!(lockdown.auto_seed_globs().is_empty());
        // Setting the precedence or extra guards keeps it a lockdown.
        let (guarded, errors) = CompiledRules::lockdown()
            .with_precedence(RulePrecedence::DenyAskAllow)
            .with_extra_guards(&["ops::*".to_owned()]);
        assert!(errors.is_empty());
        assert!(guarded.is_lockdown());
        assert!(guarded.extra_guard("ops::x").is_some());
        assert!(!CompiledRules::empty().is_lockdown());
        assert!(!compile(json!(["a"])).is_lockdown());
    }

    #[test]
    fn rule_21_3_seeds_are_derived_from_the_rules_with_their_rule() {
        let rules = compile(json!([
            "!x",
            {"function": "state::*", "action": "allow", "modes": ["auto"]},
            {"function": "state::*", "action": "allow", "modes": ["auto", "manual"], "rule_id": "again"},
            {"function": "fs::read", "action": "allow", "modes": ["auto"]}
        ]));
        let seeds: Vec<_> = rules
            .seeds
            .iter()
            .map(|s| {
                (
                    s.entry.function_id.as_str(),
                    s.entry.granted_by,
                    s.entry.granted_at,
                    s.rule,
                )
            })
            .collect();
        assert_eq!(
            seeds,
            vec![
                ("state::*", GrantedBy::Seed, 0, 1),
                ("fs::read", GrantedBy::Seed, 0, 3)
            ]
        );
        assert_eq!(
            rules.seed_table.first_match("state::get", |_| true),
            Some(0)
        );
        assert_eq!(rules.seed_table.first_match("fs::read", |_| true), Some(1));
        assert_eq!(rules.seed_table.first_match("fs::write", |_| true), None);
    }

    #[test]
    fn compiled_rules_are_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CompiledRules>();
    }

    #[test]
    fn schema_accepts_strings_or_strict_objects() {
        let schema = serde_json::to_value(schemars::schema_for!(RuleSpec)).expect("schema");
        let text = schema.to_string();
        assert!(text.contains("anyOf"), "{text}");
        assert!(text.contains("\"additionalProperties\":false"), "{text}");
        assert!(text.contains("\"equals\""), "{text}");
        assert!(text.contains("\"matches\""), "{text}");
    }
}
