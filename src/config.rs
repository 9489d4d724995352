//! The `approval-gate` configuration entry: its shape, its schema, the seed
//! file, and the reactive cell that holds the compiled snapshot.
//!
//! # Format
//!
//! ```json
//! { "default_mode": "manual", "rules": ["!approval::*"], "grant_reask_limit": 3 }
//! ```

use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::policy::{default_rules, CompiledRules, CompiledSettings, RuleError, RuleSpec};
use crate::settings::model::{ApprovalSettings, Entry, GrantedBy, Mode};

/// The configuration entry id (and the worker's name).
pub const CONFIG_ID: &str = "approval-gate";
/// Default number of folder-access re-asks per held call.
pub const DEFAULT_GRANT_REASK_LIMIT: u32 = 3;

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
    /// Grant-watch re-asks per held call (0 = never hold).
    #[serde(default = "default_reask")]
    pub grant_reask_limit: u32,
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
            grant_reask_limit: DEFAULT_GRANT_REASK_LIMIT,
        }
    }
}

impl ApprovalConfig {
    /// The built-in defaults as the JSON the entry stores.
    pub fn defaults_json() -> Value {
        serde_json::to_value(ApprovalConfig::default()).unwrap_or(Value::Null)
    }

    /// Parses a stored value (already env-expanded by the engine).
    pub fn from_value(value: &Value) -> Result<ApprovalConfig, String> {
        if !value.is_object() {
            return Err(format!("expected an object, got {value}"));
        }
        ApprovalConfig::deserialize(value).map_err(|e| e.to_string())
    }
}

/// The JSON schema (draft-07) registered with the entry: titles, descriptions,
/// defaults and an example so the console renders a form; unknown keys rejected.
pub fn schema() -> Value {
    let mode = json!({"type": "string", "enum": ["manual", "auto", "full"]});
    let constraint = json!({
        "oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["equals"], "properties": {"equals": {"description": "Type-strict JSON equality; a missing field is null."}}},
            {"type": "object", "additionalProperties": false, "required": ["matches"], "properties": {"matches": {"description": "Unanchored regular expression; strings only.", "type": "string"}}}
        ]
    });
    let rule_object = json!({
        "title": "Rule",
        "type": "object",
        "additionalProperties": false,
        "required": ["function", "action"],
        "properties": {
            "function": {"title": "Function", "description": "Function id or glob (*, ?, [..], {a,b}).", "type": "string", "minLength": 1},
            "action": {"title": "Action", "description": "allow or deny.", "type": "string", "enum": ["allow", "deny"]},
            "rule_id": {"title": "Rule id", "description": "Name shown in deny reasons and evaluations.", "type": "string"},
            "modes": {"title": "Modes", "description": "Apply only in these modes (absent: every mode; empty: never).", "type": "array", "items": mode},
            "args": {
                "title": "Argument constraints",
                "description": "All must hold. Keys are top-level argument names or JSON Pointers starting with /.",
                "type": "object",
                "additionalProperties": constraint
            }
        }
    });
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Approval gate",
        "description": "Policy for the approval gate: which agent function calls run, are denied, or wait for a human.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "default_mode": {
                "title": "Default mode",
                "description": "Mode of sessions with no stored settings. manual: every call no rule covers waits for a human. auto: as manual, but the session's always-allow list is honoured. full: every call runs except the approval and configuration surfaces.",
                "type": "string",
                "enum": ["manual", "auto", "full"],
                "default": "manual"
            },
            "rules": {
                "title": "Rules",
                "description": "Evaluated in order, first match wins; no match holds the call for a human. A string \"glob\" allows, \"!glob\" denies. An object can scope a rule to modes and constrain arguments.",
                "type": "array",
                "default": ["!approval::*"],
                "items": {
                    "oneOf": [
                        {
                            "title": "Shorthand",
                            "description": "\"glob\" allows matching functions; \"!glob\" denies them.",
                            "type": "string",
                            "minLength": 1
                        },
                        rule_object
                    ]
                }
            },
            "grant_reask_limit": {
                "title": "Folder-access re-ask limit",
                "description": "How many times the grant watch may ask about folders for one held call before standing down (0 = never ask).",
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_GRANT_REASK_LIMIT
            }
        },
        "examples": [{
            "default_mode": "manual",
            "rules": ["!approval::*", {"function": "state::get", "action": "allow", "modes": ["auto"]}],
            "grant_reask_limit": 3
        }]
    })
}

/// Expands `${NAME}` and `${NAME:default}` from the environment. An unset
/// variable without a default is an error naming it.
pub fn expand_env(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated ${{ in {text:?}"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() {
            return Err("empty variable name in ${}".into());
        }
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(format!("environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads a `--config` seed file (YAML with the entry's fields, `${NAME}`
/// expanded) and returns it as the JSON the entry stores.
pub fn load_seed(path: &std::path::Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read seed file {}: {e}", path.display()))?;
    let expanded = expand_env(&text, |n| std::env::var(n).ok())
        .map_err(|e| format!("seed file {}: {e}", path.display()))?;
    let config: ApprovalConfig = serde_yaml::from_str(&expanded)
        .map_err(|e| format!("seed file {}: {e}", path.display()))?;
    serde_json::to_value(&config).map_err(|e| e.to_string())
}

/// A configuration compiled for use: what every decision reads.
#[derive(Debug)]
pub struct Snapshot {
    /// The configuration as parsed.
    pub config: ApprovalConfig,
    /// The compiled rules (empty when any rule failed to compile).
    pub rules: CompiledRules,
    /// The compile errors, reported by `approval::evaluate`.
    pub rule_errors: Vec<RuleError>,
    /// Settings of a session with nothing stored.
    pub default_settings: ApprovalSettings,
    /// `default_settings`, compiled.
    pub defaults: CompiledSettings,
}

impl Snapshot {
    /// Compiles a configuration. Rules that fail to compile leave the rule
    /// set empty (every call that reaches the rules holds) and are reported.
    pub fn compile(config: ApprovalConfig) -> Snapshot {
        let (rules, rule_errors) = match CompiledRules::compile(&config.rules) {
            Ok(rules) => (rules, Vec::new()),
            Err(errors) => (CompiledRules::empty(), errors),
        };
        let default_settings = default_settings(&config, &rules, 0);
        let defaults = CompiledSettings::new(&default_settings);
        Snapshot {
            config,
            rules,
            rule_errors,
            default_settings,
            defaults,
        }
    }
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
    }
}

/// The reactive configuration cell: readers take the current snapshot; a
/// reload swaps the whole snapshot at once. The lock is held only to clone
/// or replace an `Arc`, never across an `.await`.
#[derive(Debug)]
pub struct ConfigCell {
    current: RwLock<Arc<Snapshot>>,
}

impl ConfigCell {
    /// A cell holding `snapshot`.
    pub fn new(snapshot: Snapshot) -> ConfigCell {
        ConfigCell {
            current: RwLock::new(Arc::new(snapshot)),
        }
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the snapshot.
    pub fn store(&self, snapshot: Snapshot) {
        let next = Arc::new(snapshot);
        match self.current.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn env_expansion() {
        let look = |n: &str| (n == "MODE").then(|| "auto".to_string());
        assert_eq!(expand_env("m: ${MODE}", look).unwrap(), "m: auto");
        assert_eq!(expand_env("m: ${NOPE:manual}", look).unwrap(), "m: manual");
        assert!(expand_env("m: ${NOPE}", look).unwrap_err().contains("NOPE"));
        assert!(expand_env("m: ${MODE", look).is_err());
        assert_eq!(expand_env("plain", look).unwrap(), "plain");
    }

    #[test]
    fn seed_file_is_yaml_with_env() {
        let dir = std::env::temp_dir().join(format!("ag-seed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seed.yaml");
        std::fs::write(
            &path,
            "default_mode: ${AG_TEST_SEED_MODE:full}\ngrant_reask_limit: 1\n",
        )
        .unwrap();
        let v = load_seed(&path).unwrap();
        assert_eq!(v["default_mode"], "full");
        assert_eq!(v["grant_reask_limit"], 1);
        assert_eq!(v["rules"], json!(["!approval::*"]));
        std::fs::write(&path, "default_mod: auto\n").unwrap();
        assert!(load_seed(&path).is_err());
        std::fs::remove_dir_all(&dir).ok();
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
}
