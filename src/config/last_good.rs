//! The last good configuration, kept in the worker's own state scope so that
//! a restart or a standby that finds a stored value whose rules do not
//! compile starts from it rather than in lockdown
//! (`architecture/contract.md` § No fail-open left).
//!
//! # Format
//!
//! Scope `approval_config` (guarded like every scope of the worker), one key
//! per configuration id (contract §26.2, §27.2): `last_good` for the
//! default entry `approval-gate` (the key of earlier versions), else
//! `last_good/<id>`, so workers that follow different entries never start
//! from each other's policy:
//!
//! ```json
//! { "config": { "default_mode": "auto", "rules": ["!approval::*", "demo::*"], "grant_reask_limit": 3 },
//!   "links_withheld": false }
//! ```
//!
//! `config` is the configuration as it was in force, env-expanded, without
//! `links`: the link secret and the inbox token are credentials, and state is
//! not where credentials are kept. `links_withheld` says whether it had
//! links; one restored from here runs with links off (reported) until a
//! configuration that can be used whole is read again.
//!
//! A kept value is used as it was written: it is parsed (top-level keys this
//! version does not know are dropped, as a newer version may have written
//! them) and its rules compiled, and nothing else is checked again
//! ([`Snapshot::trusted`]): a value that was good when it was kept never
//! turns into lockdown at boot because a later version checks more.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cell::Persisted;
use super::{ApprovalConfig, Snapshot};
use crate::engine::{Engine, Scope};

/// The key under [`Scope::CONFIG`] of the default entry's value.
pub(crate) const KEY: &str = "last_good";

/// The key under [`Scope::CONFIG`] of the value kept for `config_id`.
pub(crate) fn key(config_id: &str) -> String {
    if config_id == super::CONFIG_ID {
        KEY.to_string()
    } else {
        format!("{KEY}/{config_id}")
    }
}

/// What a snapshot restored from state reports while its links are off.
pub(crate) const LINKS_WITHHELD: &str = "links are off: the configuration in force is the last good one kept in state, which keeps no credentials; they return with the next configuration whose rules compile";

/// The stored shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    config: Value,
    #[serde(default)]
    links_withheld: bool,
}

/// The value kept for a configuration whose rules compiled.
pub(crate) fn to_stored(config: &ApprovalConfig) -> Value {
    let mut value = config.to_json();
    let links_withheld = match value.as_object_mut() {
        Some(map) => map.remove("links").is_some(),
        None => false,
    };
    serde_json::to_value(Stored {
        config: value,
        links_withheld,
    })
    .unwrap_or(Value::Null)
}

/// Why a kept value is not used (the gate then runs in lockdown).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    /// It does not have the kept shape or the entry's shape.
    #[error("the kept value does not parse: {0}")]
    Shape(String),
    /// Its rules do not compile (a later version reads them differently).
    #[error("the kept value's rules do not compile: {}", .0.join("; "))]
    Rules(Vec<String>),
}

/// The snapshot a kept value gives: `None` when nothing is kept.
pub(crate) fn restore(stored: &Value) -> Result<Option<Snapshot>, Unusable> {
    if stored.is_null() {
        return Ok(None);
    }
    let mut stored = Stored::deserialize(stored).map_err(|err| Unusable::Shape(err.to_string()))?;
    if let Value::Object(map) = &mut stored.config {
        let known = super::schema();
        if let Some(fields) = known.get("properties").and_then(Value::as_object) {
            map.retain(|key, _| fields.contains_key(key));
        }
    }
    let config = ApprovalConfig::from_value(&stored.config)
        .map_err(|err| Unusable::Shape(err.to_string()))?;
    let mut snapshot = Snapshot::trusted(config).map_err(|rule_errors| {
        Unusable::Rules(rule_errors.iter().map(ToString::to_string).collect())
    })?;
    if stored.links_withheld {
        snapshot.link_errors.push(LINKS_WITHHELD.to_string());
    }
    Ok(Some(snapshot))
}

/// Reads and compiles the kept value (boot, when the stored one is refused).
/// A failed read or an unusable value is logged and gives `None`: lockdown,
/// never a wider policy.
pub(crate) async fn read(engine: &Engine, config_id: &str) -> Option<Snapshot> {
    let key = key(config_id);
    let stored = match engine.state_get(&Scope::CONFIG, &key).await {
        Ok(stored) => stored,
        Err(err) => {
            tracing::error!(scope = %Scope::CONFIG, key, error = %err, "the last good configuration could not be read; the gate runs in lockdown");
            return None;
        }
    };
    match restore(&stored) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            tracing::error!(scope = %Scope::CONFIG, key, error = %err, "the last good configuration cannot be used; the gate runs in lockdown");
            None
        }
    }
}

/// Keeps `config` (whose rules compiled) as the last good value, unless this
/// instance already wrote the same value. A failed write is logged: the
/// configuration still applies, and the next good one is written again.
pub(crate) async fn write(
    engine: &Engine,
    persisted: &mut Persisted,
    config_id: &str,
    config: &ApprovalConfig,
) {
    let value = to_stored(config);
    if persisted.0.as_ref() == Some(&value) {
        return;
    }
    let key = key(config_id);
    match engine.state_set(&Scope::CONFIG, &key, value.clone()).await {
        Ok(_) => persisted.0 = Some(value),
        Err(err) => {
            tracing::warn!(scope = %Scope::CONFIG, key, error = %err, "the last good configuration was not kept in state; a restart finding a refused value would start in lockdown")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::RulePrecedence;
    use crate::terms::Mode;

    const SECRET: &str = "0123456789abcdef0123456789abcdef-secret";

    #[test]
    fn rule_21_1_the_kept_value_restores_the_whole_configuration_without_credentials() {
        let config = ApprovalConfig::from_value(&json!({
            "default_mode": "auto", "rule_precedence": "deny_ask_allow",
            "rules": ["!approval::*", "demo::*"], "grant_reask_limit": 1,
            "links": {"secret": SECRET, "public_base_url": "https://gate.example",
                      "inbox_token": "inbox-token-0123456789abcdef-0123456789"}
        }))
        .unwrap();
        let stored = to_stored(&config);
        let text = stored.to_string();
        assert!(!text.contains(SECRET), "{text}");
        assert!(!text.contains("inbox-token"), "{text}");
        assert_eq!(stored["links_withheld"], true);
        let snapshot = restore(&stored).unwrap().expect("kept");
        assert_eq!(snapshot.config.default_mode, Mode::Auto);
        assert_eq!(snapshot.config.grant_reask_limit, 1);
        assert_eq!(snapshot.rules.precedence(), RulePrecedence::DenyAskAllow);
        assert_eq!(snapshot.rules.len(), 2);
        assert!(!snapshot.lockdown);
        assert!(snapshot.links.is_none());
        assert_eq!(snapshot.link_errors, vec![LINKS_WITHHELD.to_string()]);
        // Without links nothing is withheld and nothing is reported.
        let plain = to_stored(&ApprovalConfig::default());
        assert_eq!(plain["links_withheld"], false);
        assert!(restore(&plain).unwrap().unwrap().is_ok());
    }

    #[test]
    fn rule_26_2_a_kept_value_is_never_checked_again_into_lockdown() {
        // Kept by an earlier version: a guard glob that does not compile
        // (then reported, guarding its exact text), a check interval under
        // the floor a later version enforces, and a key this version does
        // not know.
        let stored = json!({"config": {
            "default_mode": "auto", "rules": ["!approval::*", "demo::*"],
            "human_only_extra": ["secrets::{get,put"], "binding_check_interval_ms": 10,
            "a_field_of_a_newer_version": true
        }, "links_withheld": false});
        let snapshot = restore(&stored).unwrap().expect("kept");
        assert!(!snapshot.lockdown);
        assert_eq!(snapshot.config.default_mode, Mode::Auto);
        assert_eq!(snapshot.config.binding_check_interval_ms, 10);
        assert_eq!(snapshot.guard_errors.len(), 1, "{:?}", snapshot.errors());
        assert!(!snapshot.is_refused());
        // The same value read as a new one is refused whole.
        let config: ApprovalConfig =
            ApprovalConfig::from_value(&json!({"human_only_extra": ["secrets::{get,put"]}))
                .unwrap();
        assert!(Snapshot::try_compile(config).is_err());
    }

    #[test]
    fn rule_26_2_last_good_values_are_kept_per_configuration_id() {
        assert_eq!(key("approval-gate"), "last_good");
        assert_eq!(key("approval-gate-b"), "last_good/approval-gate-b");
        assert_ne!(key("approval-gate-b"), key("approval-gate-c"));
    }

    #[test]
    fn rule_21_1_nothing_or_an_unusable_kept_value_gives_no_snapshot() {
        assert!(restore(&Value::Null).unwrap().is_none());
        assert!(matches!(
            restore(&json!({"config": 5})),
            Err(Unusable::Shape(_))
        ));
        assert!(matches!(restore(&json!("x")), Err(Unusable::Shape(_))));
        assert!(matches!(
            restore(&json!({"config": {"rules": ["!"]}})),
            Err(Unusable::Rules(_))
        ));
    }
}
