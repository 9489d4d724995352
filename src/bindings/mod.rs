//! The bindings the worker makes at boot (`architecture/contract.md`
//! § Bindings): the durable ones of the gate and the folder-access watch
//! ([`durable`]) and the ordinary ones listed here.

pub(crate) mod durable;

use serde_json::{json, Value};

use crate::engine::Scope;
use durable::{POST_TRIGGER, PRE_TRIGGER};

/// `approval::on-turn-completed`.
pub(crate) const TURN_COMPLETED_ID: &str = "approval::on-turn-completed";
/// `approval::on-session-deleted`.
pub(crate) const SESSION_DELETED_ID: &str = "approval::on-session-deleted";
/// `approval::on-harness-ready`.
pub(crate) const HARNESS_READY_ID: &str = "approval::on-harness-ready";
/// `approval::on-settings-change`.
pub(crate) const SETTINGS_CHANGE_ID: &str = "approval::on-settings-change";

/// Every trigger type the worker binds to.
pub(crate) const BOUND_TYPES: &[&str] = &[
    PRE_TRIGGER,
    POST_TRIGGER,
    "harness::turn-completed",
    "harness::ready",
    "session::deleted",
    "configuration",
    "state",
];

/// The ordinary (non-durable) bindings of the worker: `(type, function,
/// config)`; `config_id` is the configuration entry the worker follows.
pub(crate) fn plain_bindings(config_id: &str) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("harness::turn-completed", TURN_COMPLETED_ID, json!({})),
        // Today's harness only; it parks on the brief's.
        ("harness::ready", HARNESS_READY_ID, json!({})),
        ("session::deleted", SESSION_DELETED_ID, json!({})),
        (
            "configuration",
            crate::config::ID,
            json!({"configuration_id": config_id, "event_types": ["configuration:updated"]}),
        ),
        (
            "state",
            SETTINGS_CHANGE_ID,
            json!({"scope": Scope::SETTINGS.as_str()}),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_type_is_listed_once() {
        let mut types: Vec<&str> = plain_bindings(crate::config::CONFIG_ID)
            .iter()
            .map(|(t, _, _)| *t)
            .collect();
        types.extend([PRE_TRIGGER, POST_TRIGGER]);
        types.sort_unstable();
        let mut listed = BOUND_TYPES.to_vec();
        listed.sort_unstable();
        assert_eq!(types, listed);
    }
}
