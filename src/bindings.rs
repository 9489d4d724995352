//! The bindings the worker makes at boot (`architecture/contract.md`
//! § Bindings): the durable gate binding (`gate::binding`) and the ordinary
//! ones listed here.

use serde_json::{json, Value};

use crate::config::CONFIG_ID;
use crate::engine::Scope;
use crate::gate::binding::PRE_TRIGGER;
use crate::{config, decision, grant_watch, lifecycle};

/// Every trigger type the worker binds to.
pub(crate) const BOUND_TYPES: &[&str] = &[
    PRE_TRIGGER,
    "harness::hook::post-trigger",
    "harness::turn-completed",
    "session::deleted",
    "configuration",
    "state",
];

/// The ordinary (non-durable) bindings of the worker: `(type, function, config)`.
pub(crate) fn plain_bindings() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "harness::hook::post-trigger",
            grant_watch::ID,
            json!({"functions": ["shell::*", "coder::*"], "timeout_ms": 5000, "on_error": "fail_open"}),
        ),
        (
            "harness::turn-completed",
            lifecycle::TURN_COMPLETED_ID,
            json!({}),
        ),
        ("session::deleted", lifecycle::SESSION_DELETED_ID, json!({})),
        (
            "configuration",
            config::ID,
            json!({"configuration_id": CONFIG_ID, "event_types": ["configuration:updated"]}),
        ),
        (
            "state",
            decision::settings::ON_SETTINGS_CHANGE_ID,
            json!({"scope": Scope::SETTINGS.as_str()}),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_type_is_listed_once() {
        let mut types: Vec<&str> = plain_bindings().iter().map(|(t, _, _)| *t).collect();
        types.push(PRE_TRIGGER);
        types.sort_unstable();
        let mut listed = BOUND_TYPES.to_vec();
        listed.sort_unstable();
        assert_eq!(types, listed);
    }
}
