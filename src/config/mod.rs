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
mod last_good;
mod links;
mod reload;
mod reviewer;
mod schema;
mod seed;

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub(crate) use cell::ConfigCell;
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

/// The configuration entry id (and the worker's name).
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

/// `decision_log`: where one record per gate verdict and per removal goes
/// (`architecture/contract.md` § Provenance and typed outcomes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionLogConfig {
    /// The function that receives each record (void calls).
    pub function_id: String,
    /// Records waiting to be sent at most; past it the oldest is dropped.
    #[serde(default = "default_decision_log_queue")]
    pub queue: usize,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    /// Mode of sessions with no stored settings.
    #[serde(default = "default_mode")]
    pub default_mode: Mode,
    /// First match wins; no match holds.
    #[serde(default = "default_rules")]
    pub rules: Vec<RuleSpec>,
    /// How the rules combine with the session's mode and grants.
    #[serde(default, skip_serializing_if = "is_first_match")]
    pub rule_precedence: RulePrecedence,
    /// Grant-watch re-asks per held call (0 = never hold).
    #[serde(default = "default_reask")]
    pub grant_reask_limit: u32,
    /// Function-id globs only a human may call, on top of the built-in
    /// guards (which nothing can remove).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub human_only_extra: Vec<String>,
    /// The `priority` of the gate's hook binding (the harness runs hooks in
    /// ascending priority).
    #[serde(
        default = "default_gate_priority",
        skip_serializing_if = "is_default_gate_priority"
    )]
    pub gate_priority: i64,
    /// How often the worker checks that the gate's binding still exists.
    #[serde(
        default = "default_binding_check_interval_ms",
        skip_serializing_if = "is_default_binding_check_interval_ms"
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
    pub links: Option<LinksConfig>,
    /// Deny a held call no one answered within this many milliseconds
    /// (null: it waits until a human answers or its turn ends). New holds
    /// only; an ask rule's own `timeout_ms` wins.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deadline_ms"
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
    pub escalate_after_ms: Option<u64>,
    /// How long a release waits for the harness's answer before asking the
    /// harness what became of the call.
    #[serde(
        default = "default_release_timeout_ms",
        skip_serializing_if = "is_default_release_timeout_ms"
    )]
    pub release_timeout_ms: u64,
    /// How long a decider's call waits for the release's outcome; past it
    /// the answer is `{resolved: false, releasing: true}` and the outcome
    /// event follows.
    #[serde(
        default = "default_resolve_wait_ms",
        skip_serializing_if = "is_default_resolve_wait_ms"
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
    pub reviewer: Option<ReviewerConfig>,
    /// One record per gate verdict and per removal, sent to a function
    /// (absent or null: off). Its function id is a human-only target.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "decision_log"
    )]
    pub decision_log: Option<DecisionLogConfig>,
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
        }
    }
}

impl ApprovalConfig {
    /// The command prefixes a held call may offer as a session grant
    /// (`architecture/contract.md` § Commands, suggested grants).
    pub(crate) fn suggested(&self) -> Vec<String> {
        crate::policy::DEFAULT_SUGGEST_PREFIXES
            .iter()
            .map(|p| (*p).to_owned())
            .collect()
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

    /// Parses a stored value (already env-expanded by the engine).
    pub fn from_value(value: &Value) -> Result<ApprovalConfig, ConfigError> {
        if !value.is_object() {
            return Err(ConfigError::NotAnObject);
        }
        ApprovalConfig::deserialize(value).map_err(ConfigError::Shape)
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
}

/// A configuration compiled for use: what every decision reads.
///
/// A configuration is used whole or not at all: one whose rules do not all
/// compile (or whose examples fail) never replaces the snapshot in force
/// ([`Snapshot::try_compile`] refuses it). The snapshot in force then stays,
/// carrying the refused value's errors in `rule_errors` so `approval::evaluate`
/// and `approval::health` show them ([`Snapshot::keeping`]); with no good
/// snapshot to keep, the gate runs in lockdown ([`Snapshot::lockdown`]).
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
    /// `human_only_extra` globs that could only guard their exact text.
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

/// A configuration refused because its rules do not all compile (or an
/// example failed).
#[derive(Debug, Clone)]
pub struct Refused {
    /// Every rule error, with the rule's index.
    pub rule_errors: Vec<RuleError>,
}

impl Snapshot {
    /// Every problem with the configuration, as `approval::evaluate` and the
    /// logs report them.
    pub fn errors(&self) -> Vec<String> {
        self.rule_errors
            .iter()
            .map(ToString::to_string)
            .chain(self.guard_errors.iter().cloned())
            .chain(self.link_errors.iter().cloned())
            .collect()
    }

    /// Whether the configuration is healthy (`health.config.ok`): not in
    /// lockdown and nothing to report.
    pub fn is_ok(&self) -> bool {
        !self.lockdown
            && self.rule_errors.is_empty()
            && self.guard_errors.is_empty()
            && self.link_errors.is_empty()
    }

    /// Compiles a configuration whose rules all compile and whose examples
    /// all pass; refuses any other, whole.
    pub fn try_compile(config: ApprovalConfig) -> Result<Snapshot, Refused> {
        let rules = match CompiledRules::compile(&config.rules) {
            Ok(rules) => rules.with_precedence(config.rule_precedence),
            Err(rule_errors) => return Err(Refused { rule_errors }),
        };
        Ok(Snapshot::assemble(config, rules, false))
    }

    /// [`Snapshot::try_compile`], with a refused configuration giving the
    /// lockdown snapshot (there being no other to keep).
    pub fn compile(config: ApprovalConfig) -> Snapshot {
        Snapshot::try_compile(config)
            .unwrap_or_else(|refused| Snapshot::lockdown(refused.rule_errors))
    }

    /// Lockdown: the built-in defaults with no rules, every call held and
    /// human-only calls denied; `rule_errors` are the refused value's.
    pub fn lockdown(rule_errors: Vec<RuleError>) -> Snapshot {
        let config = ApprovalConfig::default();
        let rules = lockdown_rules().with_precedence(config.rule_precedence);
        Snapshot {
            rule_errors,
            ..Snapshot::assemble(config, rules, true)
        }
    }

    /// This snapshot kept in force after a newer value was refused for
    /// `rule_errors`: everything in force stays (rules, precedence, modes,
    /// links, deadlines), only the errors reported change.
    pub fn keeping(&self, rule_errors: Vec<RuleError>) -> Snapshot {
        Snapshot {
            rule_errors,
            ..self.clone()
        }
    }

    /// What a newly read configuration makes of `current`, the snapshot in
    /// force: the new one when its rules compile; otherwise `current` kept
    /// (or lockdown again, when `current` is lockdown) with the new errors.
    pub fn succeed(current: &Snapshot, config: ApprovalConfig) -> Snapshot {
        match Snapshot::try_compile(config) {
            Ok(next) => next,
            Err(refused) if current.lockdown => Snapshot::lockdown(refused.rule_errors),
            Err(refused) => current.keeping(refused.rule_errors),
        }
    }

    /// The rest of a snapshot around compiled rules.
    fn assemble(config: ApprovalConfig, rules: CompiledRules, lockdown: bool) -> Snapshot {
        let (rules, guard_errors) = rules.with_extra_guards(&config.human_only_extra);
        let rules = rules.with_configured_guards(&config.configured_ids());
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
        Snapshot {
            config,
            rules,
            rule_errors: Vec::new(),
            guard_errors,
            default_settings,
            defaults,
            links,
            link_errors,
            lockdown,
        }
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
