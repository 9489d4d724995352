//! The `approval-gate` configuration entry: its shape ([`ApprovalConfig`]),
//! its schema ([`schema`]), the seed file ([`seed`]), the reactive cell that
//! holds the compiled [`Snapshot`] and publishes each new one
//! ([`ConfigCell`]), the reload ([`reload`]) and the last good value kept in
//! state (`last_good`). See `architecture/contract.md` § Configuration.
//!
//! # Format
//!
//! ```json
//! { "default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 3,
//!   "links": { "secret": "${APPROVAL_LINK_SECRET}", "public_base_url": "https://gate.example" } }
//! ```

pub(crate) mod cell;
mod check;
pub(crate) mod identity;
mod last_good;
mod links;
mod reload;
mod reviewer;
mod schema;
mod seed;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub(crate) use cell::ConfigCell;
pub use identity::{check_config_id, config_id_from_env, BadConfigName, CONFIG_NAME_VAR};
pub(crate) use links::LinksConfig;
pub use reload::BootstrapError;
pub(crate) use reload::{bootstrap, reload, reregister_schema, ID};
#[cfg(test)]
pub(crate) use reviewer::REVIEWER_TIMEOUT_CEILING_MS;
pub(crate) use reviewer::{ReviewerConfig, BREAKER_WINDOW};
pub use schema::schema;
pub use seed::{load_seed, SeedError};

use crate::link_token::Links;
use crate::policy::{
    default_rules, CompiledRules, CompiledSettings, RuleError, RulePrecedence, RuleSpec,
    MIN_DEADLINE_MS,
};
use crate::terms::{ApprovalSettings, Entry, GrantedBy, Mode};

/// The default configuration entry id (and the worker's name);
/// `III_CONFIG_NAME` names another (§27.2, [`identity`]).
pub const CONFIG_ID: &str = "approval-gate";
/// Default number of folder-access re-asks per held call.
pub(crate) const DEFAULT_GRANT_REASK_LIMIT: u32 = 3;
/// Default priority of the gate's hook binding: high, so the gate runs after
/// every other pre-trigger hook and judges the arguments that will run.
pub(crate) const DEFAULT_GATE_PRIORITY: i64 = 1000;
/// Default interval between checks that the gate's binding still exists.
pub(crate) const DEFAULT_BINDING_CHECK_INTERVAL_MS: u64 = 30_000;
/// Default longest wait for the harness's answer to a release: today's
/// harness answers an `execute` only when the call has run.
pub(crate) const DEFAULT_RELEASE_TIMEOUT_MS: u64 = 1_800_000;
/// Default longest wait a decider's call makes for the release's outcome
/// (below the 10 s that SDK clients and consoles wait).
pub(crate) const DEFAULT_RESOLVE_WAIT_MS: u64 = 8_000;
/// Default bound of the decision log's queue.
pub(crate) const DEFAULT_DECISION_LOG_QUEUE: usize = 10_000;
/// Default longest life of an edit's one-shot grant (contract §28.1).
pub(crate) const DEFAULT_EDIT_TTL_MAX_MS: u64 = 3_600_000;
/// Default `suggest_prefixes` (contract §25.9): the command model's list of
/// read-only commands a link page may offer to allow for a session.
pub(crate) use crate::policy::DEFAULT_SUGGEST_PREFIXES;
/// Default `protected_paths` (contract §29.1): the engine's configuration
/// files of this worker, of the shell and of the engine's own workers. The
/// running configuration id's entry is added to them in force
/// ([`ApprovalConfig::protected_path_globs`]).
pub(crate) const DEFAULT_PROTECTED_PATHS: [&str; 3] = [
    "**/config/approval-gate*.yaml",
    "**/config/shell*.yaml",
    "**/config/iii-*.yaml",
];
/// Default `protected_path_functions` (contract §29.2).
pub(crate) const DEFAULT_PROTECTED_PATH_FUNCTIONS: [&str; 3] = ["shell::*", "coder::*", "fp::*"];

/// `decision_log`: where one record per gate verdict and per removal goes
/// (`architecture/contract.md` § Provenance and typed outcomes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionLogConfig {
    /// The function that receives each record (void calls).
    #[schemars(
        title = "Log function",
        length(min = 1),
        example = "example_log_function"
    )]
    pub function_id: String,
    /// Records waiting to be sent at most; past it the oldest is dropped.
    #[serde(default = "default_decision_log_queue")]
    #[schemars(title = "Queue size", range(min = 1), example = "example_queue")]
    pub queue: usize,
}

fn example_log_function() -> &'static str {
    "audit::approval-decision"
}

fn example_queue() -> usize {
    DEFAULT_DECISION_LOG_QUEUE
}

fn default_decision_log_queue() -> usize {
    DEFAULT_DECISION_LOG_QUEUE
}

/// `decision_log` as stored: null or absent is off; an empty function id or
/// a zero queue is refused.
fn decision_log<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DecisionLogConfig>, D::Error> {
    use serde::de::Error;
    let Some(log) = Option::<DecisionLogConfig>::deserialize(d)? else {
        return Ok(None);
    };
    if log.function_id.trim().is_empty() {
        return Err(D::Error::custom(
            "decision_log.function_id must not be empty",
        ));
    }
    if log.queue == 0 {
        return Err(D::Error::custom("decision_log.queue must be at least 1"));
    }
    Ok(Some(log))
}

/// The whole configuration. Unknown keys are rejected.
///
/// The entry's JSON schema ([`schema`]) is derived from here: each field's
/// `schemars` attributes give the title, description, limits and examples
/// the console's form shows an operator, and its default is the one serde
/// fills in. `skip_serializing_if = "crate::schema::never"` keeps a default
/// in the schema where the stored value leaves it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Approval gate",
    description = "Policy for the approval gate: which agent function calls run, are denied, or wait for a human.",
    example = "example_manual",
    example = "example_rules"
)]
pub struct ApprovalConfig {
    /// Mode of sessions with no stored settings.
    #[serde(default = "default_mode")]
    #[schemars(
        title = "Default mode",
        description = "Mode of sessions with no stored settings. manual: every call no rule covers waits for a human. auto: as manual, but the session's always-allow list is honoured. full: every call runs except the approval and configuration surfaces."
    )]
    pub default_mode: Mode,
    /// First match wins; no match holds.
    #[serde(default = "default_rules")]
    #[schemars(
        title = "Rules",
        description = "A string \"glob\" allows, \"!glob\" denies, \"?glob\" asks a human. An object can scope a rule to modes, constrain arguments and carry examples. Ask rules hold first; then, under first_match, the first allow or deny rule that matches wins; no match holds the call for a human. A value in which any rule does not compile, or any example fails, is refused whole: the previous configuration stays in force (with none, every call is held) and approval::health reports the errors."
    )]
    pub rules: Vec<RuleSpec>,
    /// How the rules combine with the session's mode and grants.
    #[serde(default, skip_serializing_if = "is_first_match")]
    #[schemars(
        title = "Rule precedence",
        description = "How rules combine with the session's mode and grants. first_match: the guard, then ask rules, then full mode, approved_always, always_allow (auto), then the first allow or deny rule that matches. deny_ask_allow: the guard, then any matching deny rule (it beats full mode, allow-lists and grants), then ask rules, full mode, approved_always, always_allow, then allow rules. No match holds.",
        skip_serializing_if = "crate::schema::never",
        example = "example_precedence"
    )]
    pub rule_precedence: RulePrecedence,
    /// Grant-watch re-asks per held call (0 = never hold).
    #[serde(default = "default_reask")]
    #[schemars(
        title = "Folder-access re-ask limit",
        description = "How many times the grant watch may ask about folders for one held call before standing down (0 = never ask)."
    )]
    pub grant_reask_limit: u32,
    /// Function-id globs only a human may call, on top of the built-in
    /// guards (which nothing can remove).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        title = "Extra human-only functions",
        description = "Function-id globs that only a human may call, in every mode and whatever the rules and allow-lists say. They add to the built-in guards (the approval and configuration surfaces, harness releases and folder grants, binding changes, and state calls on this worker's scopes), which cannot be removed. A glob that does not compile refuses the whole value (the previous configuration stays in force).",
        inner(length(min = 1)),
        skip_serializing_if = "crate::schema::never",
        example = "example_human_only"
    )]
    pub human_only_extra: Vec<String>,
    /// The `priority` of the gate's hook binding (the harness runs hooks in
    /// ascending priority).
    #[serde(
        default = "default_gate_priority",
        skip_serializing_if = "is_default_gate_priority"
    )]
    #[schemars(
        title = "Gate priority",
        description = "Priority of the gate's pre-trigger binding. The harness runs hooks in ascending priority and each sees the arguments as the previous one rewrote them, so the gate should run last: give every other pre-trigger hook a lower priority. A change replaces the binding (the new one is made before the old one is removed).",
        range(min = "check::MIN_SAFE_INTEGER", max = "check::MAX_SAFE_INTEGER"),
        skip_serializing_if = "crate::schema::never",
        example = "example_gate_priority"
    )]
    pub gate_priority: i64,
    /// How often the worker checks that the gate's binding still exists.
    #[serde(
        default = "default_binding_check_interval_ms",
        skip_serializing_if = "is_default_binding_check_interval_ms"
    )]
    #[schemars(
        title = "Binding check interval (ms)",
        description = "How often the worker checks that the gate's binding still exists, and makes it again if the engine lost it. While it is missing every check logs an ERROR.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_binding_check_interval_ms"
    )]
    pub binding_check_interval_ms: u64,
    /// Approval links and the inbox page (`architecture/contract.md`
    /// § Approval links and the inbox page); absent or null: off. Its `Debug` output never
    /// shows the secret or the inbox token.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "links::deserialize"
    )]
    #[schemars(
        title = "Approval links",
        description = "A signed link per held call, served through the engine's HTTP worker (iii-http) at <public_base_url>/approvals/<token>, where a human decides the call in a browser; records and pending-created events carry it as approval_url. Null: off. Also set the iii-http worker's cors.allowed_origins to the base URL's origin.",
        skip_serializing_if = "crate::schema::never",
        example = "example_links"
    )]
    pub links: Option<LinksConfig>,
    /// Deny a held call no one answered within this many milliseconds
    /// (null: it waits until a human answers or its turn ends). New holds
    /// only; an ask rule's own `timeout_ms` wins.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deadline_ms"
    )]
    #[schemars(
        title = "Pending timeout (ms)",
        description = "Deny a held call that no one answered within this many milliseconds: the agent is told no one approved it in time, and approval::pending-resolved reports outcome timeout. null: held calls wait until a human answers or their turn ends. Applies to calls held after the change; an ask rule's own timeout_ms wins.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_pending_timeout_ms"
    )]
    pub pending_timeout_ms: Option<u64>,
    /// Emit `approval::pending-escalated` for a held call no one answered
    /// within this many milliseconds (null: never). New holds only; an ask
    /// rule's own `escalate_after_ms` wins.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deadline_ms"
    )]
    #[schemars(
        title = "Escalate after (ms)",
        description = "Emit approval::pending-escalated, once, for a held call that no one answered within this many milliseconds (a notifier can then ask a second approver); the call stays held. null: never. Applies to calls held after the change; an ask rule's own escalate_after_ms wins.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_escalate_after_ms"
    )]
    pub escalate_after_ms: Option<u64>,
    /// How long a release waits for the harness's answer before asking the
    /// harness what became of the call.
    #[serde(
        default = "default_release_timeout_ms",
        skip_serializing_if = "is_default_release_timeout_ms"
    )]
    #[schemars(
        title = "Release timeout (ms)",
        description = "How long a decision waits for the harness's answer. Today's harness answers an allowed call only when it has run, which can take many minutes. Past this, the worker asks the harness what became of the call: still held, it is pending again; otherwise its outcome is unknown.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_release_timeout_ms"
    )]
    pub release_timeout_ms: u64,
    /// How long a decider's call waits for the release's outcome; past it
    /// the answer is `{resolved: false, releasing: true}` and the outcome
    /// event follows.
    #[serde(
        default = "default_resolve_wait_ms",
        skip_serializing_if = "is_default_resolve_wait_ms"
    )]
    #[schemars(
        title = "Resolve wait (ms)",
        description = "How long approval::resolve (and a link's decision) waits for the release's outcome before answering {resolved: false, releasing: true}: the decision is taken and under way, and approval::pending-resolved follows when the harness answers. Keep it below the 10 s that consoles wait.",
        skip_serializing_if = "crate::schema::never",
        example = "example_resolve_wait_ms"
    )]
    pub resolve_wait_ms: u64,
    /// The automated reviewer asked about calls that would wait for a human
    /// by default (`architecture/contract.md` § The reviewer); absent or
    /// null: off.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "reviewer::deserialize"
    )]
    #[schemars(
        title = "Reviewer",
        description = "An automated reviewer asked about calls that would otherwise wait for a human only because no rule decided them (the default hold), in the listed modes. Never asked about an ask rule, a human-only function, a denied call or while the gate is in lockdown. Its allow lets the call run (unless the arguments it saw were clipped); its deny refuses it, led 'Denied by the reviewer:'; anything else (escalate, an error, a timeout, a malformed answer) holds the call for a human, and the record carries the review. Only a human may call the reviewer's function. Null: off.",
        skip_serializing_if = "crate::schema::never",
        example = "example_reviewer"
    )]
    pub reviewer: Option<ReviewerConfig>,
    /// One record per gate verdict and per removal, sent to a function
    /// (absent or null: off). Its function id is a human-only target.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "decision_log"
    )]
    #[schemars(
        title = "Decision log",
        description = "Send one record {decision, rule_id?, decided_by, session_id, function_call_id, function_id, at} per gate verdict (continue, deny, hold) and per held call that leaves the inbox to this function, fire-and-forget, from a queue of its own: the gate never waits for it. Ids only, no arguments, every string redacted. A full queue drops its oldest record (counted in approval::health). The function becomes a human-only target. Null: off.",
        skip_serializing_if = "crate::schema::never",
        example = "example_decision_log"
    )]
    pub decision_log: Option<DecisionLogConfig>,
    /// Commands (a program, or a program and its subcommand) a held call
    /// may be offered as "Allow `<prefix> …` in this session" for
    /// (contract §25.9).
    #[serde(
        default = "default_suggest_prefixes",
        skip_serializing_if = "is_default_suggest_prefixes"
    )]
    #[schemars(
        title = "Suggested session grants",
        description = "Commands (a program, or a program and its subcommand) for which a held call's page may offer \"Allow <prefix> … in this session\": only when the held command is one simple command an allow prefix could cover, never for shells, interpreters, build or test runners, package managers. Plain words separated by single spaces; an entry with shell structure, a quote, an expansion or a glob refuses the whole value.",
        inner(length(min = 1)),
        skip_serializing_if = "crate::schema::never",
        example = "example_suggest_prefixes"
    )]
    pub suggest_prefixes: Vec<String>,
    /// Path globs no call may touch without a human (contract §29.1); the
    /// running configuration id's entry is added in force.
    #[serde(
        default = "default_protected_paths",
        skip_serializing_if = "is_default_protected_paths"
    )]
    #[schemars(
        title = "Protected paths",
        description = "Path globs (* within a segment, ** across) that no call of the functions below may touch without a human, in every mode and whatever the grants say: the engine's configuration files by default. The running entry's own file (**/config/<id>.yaml) is always added. Add the engine's directory (e.g. /opt/iii/**) and the state adapter's files.",
        inner(length(min = 1)),
        skip_serializing_if = "crate::schema::never",
        example = "example_protected_paths"
    )]
    pub protected_paths: Vec<String>,
    /// The functions whose paths are judged against `protected_paths`
    /// (contract §29.2).
    #[serde(
        default = "default_protected_path_functions",
        skip_serializing_if = "is_default_protected_path_functions"
    )]
    #[schemars(
        title = "Functions judged for protected paths",
        description = "Function-id globs whose calls are judged against the protected paths (every word of every command that can run, and every string argument).",
        inner(length(min = 1)),
        skip_serializing_if = "crate::schema::never",
        example = "example_protected_path_functions"
    )]
    pub protected_path_functions: Vec<String>,
    /// The longest an edit's one-shot grant lives (contract §28.1).
    #[serde(
        default = "default_edit_ttl_max_ms",
        skip_serializing_if = "is_default_edit_ttl_max_ms"
    )]
    #[schemars(
        title = "Longest life of an edit's grant (ms)",
        description = "An edited call (\"Edit and allow\") becomes a one-shot grant for the edited arguments; its ttl_ms (default 600000) is capped at this.",
        range(min = "MIN_DEADLINE_MS"),
        skip_serializing_if = "crate::schema::never",
        example = "example_edit_ttl_max_ms"
    )]
    pub edit_ttl_max_ms: u64,
}

// The schema's examples, one per field that shows one, and two whole values.

fn example_manual() -> Value {
    serde_json::json!({
        "default_mode": "manual",
        "rules": ["!approval::*", {"function": "state::get", "action": "allow", "modes": ["auto"]}],
        "grant_reask_limit": 3
    })
}

fn example_rules() -> Value {
    serde_json::json!({
        "default_mode": "auto",
        "rule_precedence": "deny_ask_allow",
        "rules": [
            "!approval::*",
            {"function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
             "args": {"command": {"matches": "push .*--force"}},
             "examples": {"match": [{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}],
                          "no_match": [{"function_id": "shell::exec", "arguments": {"command": "git push"}}]}},
            {"function": "deploy::*", "action": "ask", "timeout_ms": 1_800_000, "escalate_after_ms": 600_000},
            {"function": "shell::*", "action": "allow", "modes": ["auto"]}
        ]
    })
}

fn example_precedence() -> RulePrecedence {
    RulePrecedence::DenyAskAllow
}

fn example_human_only() -> [&'static str; 2] {
    ["deploy::prod*", "billing::*"]
}

fn example_gate_priority() -> i64 {
    1000
}

fn example_binding_check_interval_ms() -> u64 {
    30_000
}

fn example_links() -> Value {
    serde_json::json!({"secret": "${APPROVAL_LINK_SECRET}", "public_base_url": "https://approvals.example.com"})
}

fn example_pending_timeout_ms() -> u64 {
    1_800_000
}

fn example_escalate_after_ms() -> u64 {
    600_000
}

fn example_release_timeout_ms() -> u64 {
    1_800_000
}

fn example_resolve_wait_ms() -> u64 {
    8_000
}

fn example_reviewer() -> Value {
    serde_json::json!({"function_id": "review::call", "modes": ["auto"], "timeout_ms": 2000})
}

fn example_decision_log() -> Value {
    serde_json::json!({"function_id": "audit::approval-decision"})
}

fn example_suggest_prefixes() -> [&'static str; 4] {
    ["git status", "git log", "ls", "cat"]
}

fn example_protected_paths() -> [&'static str; 2] {
    ["**/config/approval-gate*.yaml", "/opt/iii/**"]
}

fn example_protected_path_functions() -> [&'static str; 3] {
    ["shell::*", "coder::*", "fp::*"]
}

fn example_edit_ttl_max_ms() -> u64 {
    3_600_000
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).collect()
}

fn same(list: &[String], default: &[&str]) -> bool {
    list.len() == default.len() && list.iter().zip(default).all(|(a, b)| a == b)
}

fn default_suggest_prefixes() -> Vec<String> {
    strings(DEFAULT_SUGGEST_PREFIXES)
}

fn is_default_suggest_prefixes(list: &[String]) -> bool {
    same(list, DEFAULT_SUGGEST_PREFIXES)
}

fn default_protected_paths() -> Vec<String> {
    strings(&DEFAULT_PROTECTED_PATHS)
}

fn is_default_protected_paths(list: &[String]) -> bool {
    same(list, &DEFAULT_PROTECTED_PATHS)
}

fn default_protected_path_functions() -> Vec<String> {
    strings(&DEFAULT_PROTECTED_PATH_FUNCTIONS)
}

fn is_default_protected_path_functions(list: &[String]) -> bool {
    same(list, &DEFAULT_PROTECTED_PATH_FUNCTIONS)
}

fn default_edit_ttl_max_ms() -> u64 {
    DEFAULT_EDIT_TTL_MAX_MS
}

fn is_default_edit_ttl_max_ms(ms: &u64) -> bool {
    *ms == DEFAULT_EDIT_TTL_MAX_MS
}

fn default_release_timeout_ms() -> u64 {
    DEFAULT_RELEASE_TIMEOUT_MS
}

fn is_default_release_timeout_ms(ms: &u64) -> bool {
    *ms == DEFAULT_RELEASE_TIMEOUT_MS
}

fn default_resolve_wait_ms() -> u64 {
    DEFAULT_RESOLVE_WAIT_MS
}

fn is_default_resolve_wait_ms(ms: &u64) -> bool {
    *ms == DEFAULT_RESOLVE_WAIT_MS
}

fn is_first_match(p: &RulePrecedence) -> bool {
    *p == RulePrecedence::FirstMatch
}

/// A deadline field: null, or at least [`MIN_DEADLINE_MS`].
fn deadline_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(ms) if ms < MIN_DEADLINE_MS => Err(serde::de::Error::custom(format!(
            "a deadline must be null or at least {MIN_DEADLINE_MS} ms, got {ms}"
        ))),
        ms => Ok(ms),
    }
}

fn default_gate_priority() -> i64 {
    DEFAULT_GATE_PRIORITY
}

fn is_default_gate_priority(p: &i64) -> bool {
    *p == DEFAULT_GATE_PRIORITY
}

fn default_binding_check_interval_ms() -> u64 {
    DEFAULT_BINDING_CHECK_INTERVAL_MS
}

fn is_default_binding_check_interval_ms(ms: &u64) -> bool {
    *ms == DEFAULT_BINDING_CHECK_INTERVAL_MS
}

fn default_mode() -> Mode {
    Mode::Manual
}

fn default_reask() -> u32 {
    DEFAULT_GRANT_REASK_LIMIT
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            default_mode: default_mode(),
            rules: default_rules(),
            rule_precedence: RulePrecedence::FirstMatch,
            grant_reask_limit: DEFAULT_GRANT_REASK_LIMIT,
            human_only_extra: Vec::new(),
            gate_priority: DEFAULT_GATE_PRIORITY,
            binding_check_interval_ms: DEFAULT_BINDING_CHECK_INTERVAL_MS,
            links: None,
            pending_timeout_ms: None,
            escalate_after_ms: None,
            release_timeout_ms: DEFAULT_RELEASE_TIMEOUT_MS,
            resolve_wait_ms: DEFAULT_RESOLVE_WAIT_MS,
            reviewer: None,
            decision_log: None,
            suggest_prefixes: default_suggest_prefixes(),
            protected_paths: default_protected_paths(),
            protected_path_functions: default_protected_path_functions(),
            edit_ttl_max_ms: DEFAULT_EDIT_TTL_MAX_MS,
        }
    }
}

impl ApprovalConfig {
    /// The command prefixes a held call may offer as a session grant
    /// (`architecture/contract.md` § Commands, suggested grants).
    pub(crate) fn suggested(&self) -> &[String] {
        &self.suggest_prefixes
    }

    /// The reviewer to ask about a call, if any: only the ladder's default
    /// hold (`by_default`; never an ask rule, a guard, a deny, a widening
    /// root, the lockdown), and only in a mode the reviewer covers. The
    /// gate and `evaluate` both ask here.
    pub fn reviewer_for(&self, by_default: bool, mode: Mode) -> Option<&ReviewerConfig> {
        self.reviewer
            .as_ref()
            .filter(|r| by_default && r.reviews(mode))
    }

    /// The built-in defaults as the JSON the entry stores.
    pub fn defaults_json() -> Value {
        ApprovalConfig::default().to_json()
    }

    /// The JSON the entry stores.
    pub fn to_json(&self) -> Value {
        // A struct of strings, numbers and enums always serializes.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The function ids the configuration names for the gate's own use (the
    /// reviewer's, the decision log's): only a human may call them
    /// (`architecture/contract.md` § The gate guards its own levers), so an
    /// agent can neither call its own reviewer nor reach what it records.
    /// Every such field adds its id here, and only here.
    pub fn configured_ids(&self) -> Vec<&str> {
        self.reviewer
            .iter()
            .map(|r| r.function_id.as_str())
            .chain(self.decision_log.iter().map(|log| log.function_id.as_str()))
            .collect()
    }

    /// `protected_paths` in force for the configuration entry `config_id`:
    /// the configured globs and the entry's own file
    /// (`**/config/<id>.yaml`), whatever the entry is named (contract
    /// §29.1, §27.2).
    pub fn protected_path_globs(&self, config_id: &str) -> Vec<String> {
        let own = format!("**/config/{config_id}.yaml");
        let mut globs = self.protected_paths.clone();
        if !globs.contains(&own) {
            globs.push(own);
        }
        globs
    }

    /// Parses a stored value (already env-expanded by the engine). A
    /// field of the wrong shape is named in the error (serde's own message
    /// does not say which field a wrong type is in).
    pub fn from_value(value: &Value) -> Result<ApprovalConfig, ConfigError> {
        let Value::Object(map) = value else {
            return Err(ConfigError::NotAnObject);
        };
        ApprovalConfig::deserialize(value).map_err(|err| {
            // Each field alone, in order: the first that fails on its own
            // is the one to name (an unknown key names itself).
            let culprit = map.iter().find_map(|(key, field)| {
                let mut alone = serde_json::Map::new();
                alone.insert(key.clone(), field.clone());
                ApprovalConfig::deserialize(Value::Object(alone))
                    .err()
                    .map(|source| (key.clone(), source))
            });
            match culprit {
                Some((field, source)) => ConfigError::Field { field, source },
                None => ConfigError::Shape(err),
            }
        })
    }

    /// Parses a value and checks every field but the rules (contract §26.2):
    /// what a seed file must pass before it is stored.
    pub fn checked(value: &Value) -> Result<ApprovalConfig, ConfigError> {
        let config = ApprovalConfig::from_value(value)?;
        let findings = check::findings(&config);
        if findings.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Fields(findings))
        }
    }
}

/// Why a stored configuration value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The value is not a JSON object.
    #[error("expected an object")]
    NotAnObject,
    /// The object does not have the entry's shape (an unknown key, a wrong type).
    #[error("{0}")]
    Shape(serde_json::Error),
    /// One field does not have its shape (a wrong type, a value out of
    /// range, an unknown key).
    #[error("{field}: {source}")]
    Field {
        /// The field, as the object names it.
        field: String,
        /// What serde said.
        source: serde_json::Error,
    },
    /// Fields that parsed but cannot be used (contract §26.2).
    #[error("{}", .0.join("; "))]
    Fields(Vec<String>),
}

/// A configuration compiled for use: what every decision reads.
///
/// A configuration is used whole or not at all (contract §21.1, §26.2): one
/// whose rules do not all compile (or whose examples fail), or any of whose
/// other fields cannot be used (a `human_only_extra` glob that does not
/// compile, a deadline under a second, a `suggest_prefixes` entry that is not
/// a command prefix …; `check.rs`), or that does not parse at all, never
/// replaces the snapshot in force ([`Snapshot::try_compile`] refuses it). The
/// snapshot in force then stays, carrying the refused value's errors in
/// `rule_errors` and `refused` so `approval::evaluate` and `approval::health`
/// show them ([`Snapshot::keeping`]); with no good snapshot to keep, the gate
/// runs in lockdown ([`Snapshot::lockdown`]).
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The configuration in force.
    pub config: ApprovalConfig,
    /// The compiled rules (in lockdown: none, and `lockdown` is set).
    pub rules: CompiledRules,
    /// The errors of the newest stored value's rules when it was refused:
    /// the configuration in force is then an older one, or lockdown. Empty
    /// when the newest value is the one in force.
    pub rule_errors: Vec<RuleError>,
    /// The newest stored value's other errors when it was refused (it did
    /// not parse, or a field other than `rules` cannot be used).
    pub refused: Vec<String>,
    /// `human_only_extra` globs that could only guard their exact text: only
    /// in a snapshot restored from the last good value kept in state, which
    /// is used as it was written (a newer version's checks never turn it
    /// into lockdown).
    pub guard_errors: Vec<String>,
    /// Settings of a session with nothing stored.
    pub default_settings: ApprovalSettings,
    /// `default_settings`, compiled.
    pub defaults: CompiledSettings,
    /// `links`, ready to sign and check; `None` when off or unusable.
    pub(crate) links: Option<Arc<Links>>,
    /// Why a configured `links` is unusable (links are then off), or why
    /// only its inbox page is.
    pub link_errors: Vec<String>,
    /// No configuration whose rules compile is known (a first boot with a
    /// broken rule set, and no last good value in state): every call is
    /// held, human-only calls are denied, and the configuration in force is
    /// the built-in defaults. Ends with the first configuration whose rules
    /// compile.
    pub lockdown: bool,
}

/// Why a configuration value is refused whole.
#[derive(Debug, Clone, Default)]
pub struct Refused {
    /// Every rule error, with the rule's index.
    pub rule_errors: Vec<RuleError>,
    /// Every other reason: the value does not parse, or a field cannot be
    /// used.
    pub errors: Vec<String>,
}

impl From<Vec<RuleError>> for Refused {
    fn from(rule_errors: Vec<RuleError>) -> Refused {
        Refused {
            rule_errors,
            errors: Vec::new(),
        }
    }
}

impl Refused {
    /// A value refused because it does not parse. serde quotes the value it
    /// could not take: the message passes the value detectors.
    pub fn unparsed(err: &ConfigError) -> Refused {
        Refused {
            rule_errors: Vec::new(),
            errors: vec![format!(
                "the value does not parse: {}",
                crate::redact::redact_text(&err.to_string())
            )],
        }
    }
}

impl Snapshot {
    /// Every problem with the configuration, as `approval::evaluate` and the
    /// logs report them.
    pub fn errors(&self) -> Vec<String> {
        self.rule_errors
            .iter()
            .map(ToString::to_string)
            .chain(self.refused.iter().cloned())
            .chain(self.guard_errors.iter().cloned())
            .chain(self.link_errors.iter().cloned())
            .collect()
    }

    /// Whether the configuration is healthy (`health.config.ok`): not in
    /// lockdown and nothing to report.
    pub fn is_ok(&self) -> bool {
        !self.lockdown
            && self.rule_errors.is_empty()
            && self.refused.is_empty()
            && self.guard_errors.is_empty()
            && self.link_errors.is_empty()
    }

    /// Whether the newest value read was refused (the snapshot in force is
    /// an older one, or lockdown).
    pub fn is_refused(&self) -> bool {
        !self.rule_errors.is_empty() || !self.refused.is_empty()
    }

    /// Compiles a configuration whose rules all compile, whose examples all
    /// pass and whose every other field can be used; refuses any other,
    /// whole.
    pub fn try_compile(config: ApprovalConfig) -> Result<Snapshot, Refused> {
        let mut errors = check::findings(&config);
        let rules = match CompiledRules::compile(&config.rules) {
            Ok(rules) if errors.is_empty() => rules.with_precedence(config.rule_precedence),
            Ok(_) => {
                return Err(Refused {
                    rule_errors: Vec::new(),
                    errors,
                })
            }
            Err(rule_errors) => {
                return Err(Refused {
                    rule_errors,
                    errors,
                })
            }
        };
        let (snapshot, guard_errors) = Snapshot::assemble(config, rules, false);
        if !guard_errors.is_empty() {
            // Globs that each compile but not together: refused like one
            // that does not compile.
            errors.extend(guard_errors);
            return Err(Refused {
                rule_errors: Vec::new(),
                errors,
            });
        }
        Ok(snapshot)
    }

    /// A configuration kept as the last good one, used as it was written:
    /// only its rules must compile; the field checks of [`try_compile`]
    /// are not run again (a value that was good when it was kept never
    /// becomes lockdown because a later version checks more), and an extra
    /// guard glob that does not compile guards its exact text (reported).
    ///
    /// [`try_compile`]: Snapshot::try_compile
    pub(crate) fn trusted(config: ApprovalConfig) -> Result<Snapshot, Vec<RuleError>> {
        let rules = CompiledRules::compile(&config.rules)?.with_precedence(config.rule_precedence);
        let (mut snapshot, guard_errors) = Snapshot::assemble(config, rules, false);
        snapshot.guard_errors = guard_errors;
        Ok(snapshot)
    }

    /// [`Snapshot::try_compile`], with a refused configuration giving the
    /// lockdown snapshot (there being no other to keep).
    pub fn compile(config: ApprovalConfig) -> Snapshot {
        Snapshot::try_compile(config).unwrap_or_else(Snapshot::lockdown)
    }

    /// Lockdown: the built-in defaults with no rules, every call held and
    /// human-only calls denied; the errors are the refused value's.
    pub fn lockdown(refused: impl Into<Refused>) -> Snapshot {
        let config = ApprovalConfig::default();
        let rules = lockdown_rules().with_precedence(config.rule_precedence);
        Snapshot::assemble(config, rules, true).0.keeping(refused)
    }

    /// This snapshot kept in force after a newer value was refused: every
    /// field in force stays (rules, precedence, modes, guards, links,
    /// deadlines), only the errors reported change.
    pub fn keeping(&self, refused: impl Into<Refused>) -> Snapshot {
        let refused = refused.into();
        Snapshot {
            rule_errors: refused.rule_errors,
            refused: refused.errors,
            ..self.clone()
        }
    }

    /// What a newly read configuration makes of `current`, the snapshot in
    /// force: the new one when it can be used whole; otherwise `current`
    /// kept (or lockdown again, when `current` is lockdown) with the new
    /// errors.
    pub fn succeed(current: &Snapshot, config: ApprovalConfig) -> Snapshot {
        Snapshot::succeed_parsed(current, Ok(config))
    }

    /// [`Snapshot::succeed`] for a value as it was read: one that does not
    /// parse is refused like any other.
    pub fn succeed_parsed(
        current: &Snapshot,
        parsed: Result<ApprovalConfig, ConfigError>,
    ) -> Snapshot {
        let refused = match parsed {
            Ok(config) => match Snapshot::try_compile(config) {
                Ok(next) => return next,
                Err(refused) => refused,
            },
            Err(err) => Refused::unparsed(&err),
        };
        if current.lockdown {
            Snapshot::lockdown(refused)
        } else {
            current.keeping(refused)
        }
    }

    /// This snapshot for the configuration entry `id`: its protected paths
    /// include that entry's own file (§29.1, §27.2).
    pub(crate) fn for_entry(mut self, id: &str) -> Snapshot {
        if id != CONFIG_ID {
            self.rules = self.rules.with_protected(
                &self.config.protected_path_globs(id),
                &self.config.protected_path_functions,
            );
        }
        self
    }

    /// The rest of a snapshot around compiled rules, and the extra guard
    /// globs that could only guard their exact text.
    fn assemble(
        config: ApprovalConfig,
        rules: CompiledRules,
        lockdown: bool,
    ) -> (Snapshot, Vec<String>) {
        let (rules, guard_errors) = rules.with_extra_guards(&config.human_only_extra);
        let rules = rules
            .with_configured_guards(&config.configured_ids())
            .with_protected(
                &config.protected_path_globs(CONFIG_ID),
                &config.protected_path_functions,
            );
        let default_settings = default_settings(&config, &rules, 0);
        let defaults = CompiledSettings::new(&default_settings);
        let (links, link_errors) = match config.links.as_ref().map(LinksConfig::compile) {
            None => (None, Vec::new()),
            Some(Ok(links)) => {
                let inbox_errors = links.inbox_refused().map(ToString::to_string);
                (Some(Arc::new(links)), inbox_errors.into_iter().collect())
            }
            Some(Err(err)) => (None, vec![err.to_string()]),
        };
        let snapshot = Snapshot {
            config,
            rules,
            rule_errors: Vec::new(),
            refused: Vec::new(),
            guard_errors: Vec::new(),
            default_settings,
            defaults,
            links,
            link_errors,
            lockdown,
        };
        (snapshot, guard_errors)
    }
}

/// The rule set of lockdown: the human-only surface denied, every other call
/// held (rule `lockdown`) in every mode, whatever the grants say.
fn lockdown_rules() -> CompiledRules {
    CompiledRules::lockdown()
}

/// Settings of a session with nothing stored: `default_mode`, one seed
/// `always_allow` entry per allow rule scoped to auto, stamped `granted_at`.
pub fn default_settings(
    config: &ApprovalConfig,
    rules: &CompiledRules,
    granted_at: u64,
) -> ApprovalSettings {
    ApprovalSettings {
        mode: config.default_mode,
        always_allow: rules
            .auto_seed_globs()
            .into_iter()
            .map(|function_id| Entry::new(function_id, granted_at, GrantedBy::Seed))
            .collect(),
        approved_always: Vec::new(),
        mode_set_at: 0,
        suppressed_seeds: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    #[test]
    fn rule_25_9_the_configured_suggest_prefixes_are_the_ones_offered() {
        let config = ApprovalConfig::from_value(&json!({"suggest_prefixes": ["make test"]}))
            .expect("a valid configuration");
        assert_eq!(config.suggested(), ["make test".to_string()]);
        let defaults = ApprovalConfig::default();
        assert_eq!(defaults.suggested().len(), DEFAULT_SUGGEST_PREFIXES.len());
    }

    #[test]
    fn defaults_match_the_contract() {
        assert_eq!(
            ApprovalConfig::defaults_json(),
            json!({"default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 3})
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(ApprovalConfig::from_value(&json!({"default_mod": "auto"})).is_err());
        assert!(ApprovalConfig::from_value(&Value::Null).is_err());
        let partial = ApprovalConfig::from_value(&json!({"default_mode": "auto"})).unwrap();
        assert_eq!(partial.default_mode, Mode::Auto);
        assert_eq!(partial.grant_reask_limit, 3);
    }

    #[test]
    fn precedence_defaults_to_first_match_and_reaches_the_compiled_rules() {
        let snap = Snapshot::compile(ApprovalConfig::default());
        assert_eq!(snap.rules.precedence(), RulePrecedence::FirstMatch);
        let config =
            ApprovalConfig::from_value(&json!({"rule_precedence": "deny_ask_allow"})).unwrap();
        assert_eq!(config.to_json()["rule_precedence"], "deny_ask_allow");
        let snap = Snapshot::compile(config);
        assert_eq!(snap.rules.precedence(), RulePrecedence::DenyAskAllow);
        // Broken rules are refused whole: their precedence never applies.
        let config = ApprovalConfig::from_value(
            &json!({"rule_precedence": "deny_ask_allow", "rules": ["!"]}),
        )
        .unwrap();
        let snap = Snapshot::compile(config);
        assert!(snap.lockdown);
        assert!(snap.rules.is_empty());
        assert_eq!(snap.rule_errors.len(), 1);
        assert_eq!(snap.rules.precedence(), RulePrecedence::FirstMatch);
        assert!(ApprovalConfig::from_value(&json!({"rule_precedence": "last_match"})).is_err());
    }

    #[test]
    fn a_failed_example_is_a_rule_error() {
        let config = ApprovalConfig::from_value(&json!({"rules": [
            "!approval::*",
            {"function": "shell::*", "action": "deny", "examples": {
                "match": [{"function_id": "shell::rm"}, {"function_id": "fs::rm"}],
                "no_match": [{"function_id": "shell::ls"}]}}
        ]}))
        .unwrap();
        assert!(Snapshot::try_compile(config.clone()).is_err());
        let snap = Snapshot::compile(config);
        assert!(snap.lockdown);
        assert!(snap.rules.is_empty());
        assert_eq!(
            snap.errors(),
            vec![
                "rule 1: example match[1] (fs::rm) does not match the rule".to_owned(),
                "rule 1: example no_match[0] (shell::ls) matches the rule".to_owned()
            ]
        );
    }

    #[test]
    fn deadlines_are_null_or_at_least_a_second_and_absent_when_null() {
        let config = ApprovalConfig::from_value(
            &json!({"pending_timeout_ms": 1_800_000, "escalate_after_ms": 600_000}),
        )
        .unwrap();
        assert_eq!(config.pending_timeout_ms, Some(1_800_000));
        assert_eq!(config.escalate_after_ms, Some(600_000));
        assert_eq!(config.to_json()["pending_timeout_ms"], 1_800_000);
        let nulls = ApprovalConfig::from_value(
            &json!({"pending_timeout_ms": null, "escalate_after_ms": null}),
        )
        .unwrap();
        assert_eq!(nulls, ApprovalConfig::default());
        assert!(nulls.to_json().get("pending_timeout_ms").is_none());
        assert!(nulls.to_json().get("escalate_after_ms").is_none());
        for bad in [json!(999), json!(0), json!(-1), json!("30m"), json!(1.5)] {
            let err = ApprovalConfig::from_value(&json!({ "pending_timeout_ms": bad.clone() }));
            assert!(err.is_err(), "{bad}");
            assert!(ApprovalConfig::from_value(&json!({ "escalate_after_ms": bad })).is_err());
        }
        assert!(ApprovalConfig::from_value(&json!({"escalate_after_ms": 1000})).is_ok());
    }

    #[test]
    fn seed_entries_come_from_auto_allow_rules() {
        let config = ApprovalConfig::from_value(&json!({
            "rules": ["!approval::*", {"function": "state::get", "action": "allow", "modes": ["auto"]}]
        }))
        .unwrap();
        let snap = Snapshot::compile(config);
        assert!(snap.rule_errors.is_empty());
        let aa = &snap.default_settings.always_allow;
        assert_eq!(aa.len(), 1);
        assert_eq!(aa[0].function_id, "state::get");
        assert_eq!(aa[0].granted_by, GrantedBy::Seed);
        assert_eq!(aa[0].granted_at, 0);
    }

    fn good(value: Value) -> Snapshot {
        let config = ApprovalConfig::from_value(&value).unwrap();
        Snapshot::try_compile(config).expect("rules compile")
    }

    #[test]
    fn rule_21_1_a_refused_rule_set_keeps_the_whole_previous_snapshot() {
        let current = good(json!({
            "default_mode": "auto", "rule_precedence": "deny_ask_allow",
            "rules": ["!approval::*", "demo::*"], "pending_timeout_ms": 60_000
        }));
        assert!(current.is_ok());
        let broken = ApprovalConfig::from_value(&json!({
            "default_mode": "full", "rule_precedence": "first_match",
            "rules": ["!approval::*", "*", {"function": "x", "action": "deny", "args": {"a": {"matches": "("}}}]
        }))
        .unwrap();
        let next = Snapshot::succeed(&current, broken);
        assert!(!next.lockdown);
        assert!(!next.is_ok());
        assert_eq!(
            next.config, current.config,
            "no field of the refused value applies"
        );
        assert_eq!(next.default_settings.mode, Mode::Auto);
        assert_eq!(next.rules.len(), 2);
        assert_eq!(next.rules.precedence(), RulePrecedence::DenyAskAllow);
        assert_eq!(next.rule_errors.len(), 1);
        assert_eq!(next.rule_errors[0].index, 2);
        assert!(
            next.errors()[0].starts_with("rule 2: "),
            "{:?}",
            next.errors()
        );
        // Kept again after a second refusal: still the first good one.
        let again = Snapshot::succeed(
            &next,
            ApprovalConfig::from_value(&json!({"rules": ["!"]})).unwrap(),
        );
        assert_eq!(again.config, current.config);
        assert_eq!(again.rule_errors[0].index, 0);
        // Fixed: the new value applies whole and nothing is reported.
        let fixed = Snapshot::succeed(
            &again,
            ApprovalConfig::from_value(&json!({"default_mode": "full"})).unwrap(),
        );
        assert!(fixed.is_ok());
        assert_eq!(fixed.config.default_mode, Mode::Full);
        assert_eq!(fixed.rules.precedence(), RulePrecedence::FirstMatch);
    }

    /// The verdict `snapshot` gives `function_id` in a `full`-mode session.
    fn in_full_mode(snapshot: &Snapshot, function_id: &str) -> crate::policy::Verdict {
        let settings = CompiledSettings::new(&ApprovalSettings::new(Mode::Full));
        crate::policy::decide(
            &settings,
            &snapshot.rules,
            &crate::policy::Call {
                function_id,
                arguments: None,
            },
        )
        .verdict
    }

    #[test]
    fn rule_26_2_a_typo_in_a_guard_glob_keeps_the_guard() {
        // The issue's repro: `secrets::*` guards `secrets::get`; a reload
        // with a glob that does not compile must not drop the guard.
        let current = good(json!({"default_mode": "full", "human_only_extra": ["secrets::*"]}));
        assert_eq!(
            in_full_mode(&current, "secrets::get"),
            crate::policy::Verdict::Deny
        );
        let typo = ApprovalConfig::from_value(
            &json!({"default_mode": "full", "human_only_extra": ["secrets::{get,put"]}),
        )
        .unwrap();
        let next = Snapshot::succeed(&current, typo);
        assert!(next.is_refused() && !next.is_ok());
        assert_eq!(next.config, current.config);
        assert_eq!(
            in_full_mode(&next, "secrets::get"),
            crate::policy::Verdict::Deny
        );
        assert!(
            next.errors()[0].starts_with("human_only_extra 0: invalid glob"),
            "{:?}",
            next.errors()
        );
    }

    #[test]
    fn rule_26_2_every_listed_field_refuses_the_whole_value() {
        let current = good(
            json!({"default_mode": "auto", "rules": ["!approval::*", "demo::*"],
            "grant_reask_limit": 2, "human_only_extra": ["deploy::*"]}),
        );
        // Each bad value also changes the mode, the rules and a count: none
        // of it may apply.
        let bad = [
            (
                "human_only_extra",
                json!({"human_only_extra": ["deploy::*", "["]}),
            ),
            (
                "reviewer",
                json!({"reviewer": {"function_id": " review::call"}}),
            ),
            (
                "reviewer",
                json!({"reviewer": {"function_id": "review::call", "max_denials_per_50": 51}}),
            ),
            (
                "decision_log",
                json!({"decision_log": {"function_id": "  "}}),
            ),
            (
                "decision_log",
                json!({"decision_log": {"function_id": "audit::log", "queue": 0}}),
            ),
            (
                "gate_priority",
                json!({"gate_priority": 9_007_199_254_740_992_i64}),
            ),
            ("gate_priority", json!({"gate_priority": "high"})),
            ("pending_timeout_ms", json!({"pending_timeout_ms": 10})),
            ("escalate_after_ms", json!({"escalate_after_ms": -1})),
            ("release_timeout_ms", json!({"release_timeout_ms": 5})),
            ("resolve_wait_ms", json!({"resolve_wait_ms": -5})),
            (
                "binding_check_interval_ms",
                json!({"binding_check_interval_ms": 0}),
            ),
            (
                "suggest_prefixes",
                json!({"suggest_prefixes": ["git status && curl x"]}),
            ),
            (
                "suggest_prefixes",
                json!({"suggest_prefixes": "git status"}),
            ),
            ("protected_paths", json!({"protected_paths": ["**/{a"]})),
            (
                "protected_path_functions",
                json!({"protected_path_functions": [""]}),
            ),
            ("edit_ttl_max_ms", json!({"edit_ttl_max_ms": 1})),
            ("an unknown key", json!({"defualt_mode": "full"})),
        ];
        for (field, extra) in bad {
            let mut value = json!({"default_mode": "full", "rules": ["*"], "grant_reask_limit": 9});
            for (k, v) in extra.as_object().unwrap() {
                value[k] = v.clone();
            }
            let next = Snapshot::succeed_parsed(&current, ApprovalConfig::from_value(&value));
            assert!(next.is_refused(), "{field}: {value}");
            assert!(!next.lockdown && !next.is_ok(), "{field}");
            assert_eq!(
                next.config, current.config,
                "{field}: nothing of it applies"
            );
            assert_eq!(next.rules.len(), 2, "{field}");
            assert_eq!(next.default_settings.mode, Mode::Auto, "{field}");
            let errors = next.errors().join("; ");
            let named = if field == "an unknown key" {
                "defualt_mode"
            } else {
                field
            };
            assert!(errors.contains(named), "{field}: {errors}");
            // In lockdown, a refused value keeps the lockdown.
            let still = Snapshot::succeed_parsed(
                &Snapshot::lockdown(Vec::new()),
                ApprovalConfig::from_value(&value),
            );
            assert!(still.lockdown && still.is_refused(), "{field}");
            assert_eq!(still.config, ApprovalConfig::default(), "{field}");
        }
    }

    #[test]
    fn rule_26_2_findings_v3_did_not_refuse_stay_non_fatal() {
        let short = good(json!({"default_mode": "full", "links": {
            "secret": "0123456789abcdef0123456789abcdef", "public_base_url": "https://gate.example",
            "inbox_token": "short"}}));
        assert!(!short.is_refused());
        assert_eq!(short.config.default_mode, Mode::Full, "the value applies");
        assert!(short.links.is_some());
        assert_eq!(short.link_errors.len(), 1, "{:?}", short.errors());
        assert!(!short.is_ok(), "reported");
    }

    #[test]
    fn rule_26_2_the_v4_fields_have_their_defaults_and_stay_out_of_the_stored_value() {
        let config = ApprovalConfig::default();
        assert_eq!(config.suggest_prefixes.len(), 14);
        assert_eq!(config.suggest_prefixes[0], "git status");
        assert_eq!(
            config.protected_path_functions,
            ["shell::*", "coder::*", "fp::*"]
        );
        assert_eq!(config.edit_ttl_max_ms, 3_600_000);
        assert_eq!(
            config.protected_path_globs("approval-gate-b"),
            [
                "**/config/approval-gate*.yaml",
                "**/config/shell*.yaml",
                "**/config/iii-*.yaml",
                "**/config/approval-gate-b.yaml"
            ]
        );
        let set = ApprovalConfig::from_value(
            &json!({"suggest_prefixes": ["ls"], "edit_ttl_max_ms": 60_000,
            "protected_paths": ["/opt/iii/**"], "protected_path_functions": ["shell::*"]}),
        )
        .unwrap();
        let stored = set.to_json();
        assert_eq!(stored["suggest_prefixes"], json!(["ls"]));
        assert_eq!(stored["edit_ttl_max_ms"], 60_000);
        assert_eq!(ApprovalConfig::from_value(&stored).unwrap(), set);
        assert!(Snapshot::try_compile(set).is_ok());
    }

    #[test]
    fn rule_21_1_lockdown_holds_until_the_first_rule_set_that_compiles() {
        let broken = || {
            ApprovalConfig::from_value(&json!({"default_mode": "full", "rules": ["!approval::*", "!"],
                "links": {"secret": "0123456789abcdef0123456789abcdef", "public_base_url": "https://gate.example"}}))
            .unwrap()
        };
        let lockdown = Snapshot::compile(broken());
        assert!(lockdown.lockdown);
        assert!(!lockdown.is_ok());
        assert_eq!(
            lockdown.config,
            ApprovalConfig::default(),
            "lockdown runs on the built-in defaults"
        );
        assert!(lockdown.rules.is_empty());
        assert!(lockdown.links.is_none());
        assert_eq!(lockdown.rule_errors.len(), 1);
        assert_eq!(lockdown.rule_errors[0].index, 1);
        assert!(lockdown.default_settings.always_allow.is_empty());
        let still = Snapshot::succeed(&lockdown, broken());
        assert!(still.lockdown);
        assert_eq!(still.config, ApprovalConfig::default());
        let over = Snapshot::succeed(
            &still,
            ApprovalConfig::from_value(&json!({"rules": ["demo::*"]})).unwrap(),
        );
        assert!(!over.lockdown);
        assert!(over.is_ok());
        assert_eq!(over.rules.len(), 1);
    }
}
