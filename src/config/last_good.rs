//! The last good configuration, kept in the worker's own state scope so that
//! a restart or a standby that finds a stored value whose rules do not
//! compile starts from it rather than in lockdown
//! (`architecture/contract.md` § No fail-open left).
//!
//! # Format
//!
//! Scope `approval_config` (guarded like every scope of the worker), key
//! `last_good`:
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
//! configuration whose rules compile is read again.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cell::Persisted;
use super::{ApprovalConfig, Snapshot};
use crate::engine::{Engine, Scope};

/// The key under [`Scope::CONFIG`].
pub(crate) const KEY: &str = "last_good";

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
    let stored = Stored::deserialize(stored).map_err(|err| Unusable::Shape(err.to_string()))?;
    let config = ApprovalConfig::from_value(&stored.config)
        .map_err(|err| Unusable::Shape(err.to_string()))?;
    let mut snapshot = Snapshot::try_compile(config).map_err(|refused| {
        Unusable::Rules(
            refused
                .rule_errors
                .iter()
                .map(ToString::to_string)
                .collect(),
        )
    })?;
    if stored.links_withheld {
        snapshot.link_errors.push(LINKS_WITHHELD.to_string());
    }
    Ok(Some(snapshot))
}

/// Reads and compiles the kept value (boot, when the stored one is refused).
/// A failed read or an unusable value is logged and gives `None`: lockdown,
/// never a wider policy.
pub(crate) async fn read(engine: &Engine) -> Option<Snapshot> {
    let stored = match engine.state_get(&Scope::CONFIG, KEY).await {
        Ok(stored) => stored,
        Err(err) => {
            tracing::error!(scope = %Scope::CONFIG, key = KEY, error = %err, "the last good configuration could not be read; the gate runs in lockdown");
            return None;
        }
    };
    match restore(&stored) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            tracing::error!(scope = %Scope::CONFIG, key = KEY, error = %err, "the last good configuration cannot be used; the gate runs in lockdown");
            None
        }
    }
}

/// Keeps `config` (whose rules compiled) as the last good value, unless this
/// instance already wrote the same value. A failed write is logged: the
/// configuration still applies, and the next good one is written again.
pub(crate) async fn write(engine: &Engine, persisted: &mut Persisted, config: &ApprovalConfig) {
    let value = to_stored(config);
    if persisted.0.as_ref() == Some(&value) {
        return;
    }
    match engine.state_set(&Scope::CONFIG, KEY, value.clone()).await {
        Ok(_) => persisted.0 = Some(value),
        Err(err) => {
            tracing::warn!(scope = %Scope::CONFIG, key = KEY, error = %err, "the last good configuration was not kept in state; a restart finding a broken rule set would start in lockdown")
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
