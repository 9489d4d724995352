//! Configuration identity (contract §27.2): which configuration entry this
//! worker follows, and `approval-gate::configuration-id`, which says so.
//!
//! `III_CONFIG_NAME`, when set, names the entry (default `approval-gate`):
//! two instances of the worker on one engine (two harnesses, two policies)
//! each register, read, follow and keep the last good value of their own
//! entry. Whatever its name, the entry is registered with `metadata:
//! {ui_form: "approval-gate"}`, so the console shows it with this family's
//! form.
//!
//! # Format
//!
//! `approval-gate::configuration-id`: In `{}`; Out `{ id: string }`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::functions::register_typed;
use crate::worker::Worker;

/// `approval-gate::configuration-id`.
pub(crate) const ID: &str = "approval-gate::configuration-id";

/// The environment variable that names the configuration entry.
pub const CONFIG_NAME_VAR: &str = "III_CONFIG_NAME";

/// The form family the entry is registered with (`metadata.ui_form`),
/// whatever the entry is named: the console extension's form.
pub(crate) const UI_FORM: &str = "approval-gate";

/// The longest entry id the engine takes.
const MAX_ID_LEN: usize = 64;

/// Why a configuration entry name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{CONFIG_NAME_VAR}={name:?} is not a configuration id: 1 to {MAX_ID_LEN} characters of a-z, 0-9, _ and -")]
pub struct BadConfigName {
    /// The name as given.
    pub name: String,
}

/// Checks a configuration entry id as the engine does (`[a-z0-9_-]{1,64}`).
pub fn check_config_id(name: &str) -> Result<(), BadConfigName> {
    let ok = !name.is_empty()
        && name.len() <= MAX_ID_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(BadConfigName {
            name: name.to_string(),
        })
    }
}

/// The entry named by `III_CONFIG_NAME` as the process sees it (unset or
/// empty: the default `approval-gate`), checked.
pub fn config_id_from_env() -> Result<String, BadConfigName> {
    match std::env::var(CONFIG_NAME_VAR) {
        Ok(name) if !name.is_empty() => check_config_id(&name).map(|()| name),
        _ => Ok(super::CONFIG_ID.to_string()),
    }
}

/// `approval-gate::configuration-id` request: nothing.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct ConfigurationIdRequest {}

/// `approval-gate::configuration-id` response.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ConfigurationIdResponse {
    /// The id of the configuration entry this worker follows.
    pub id: String,
}

/// Registers `approval-gate::configuration-id`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "The id of the configuration entry this worker follows (III_CONFIG_NAME, default approval-gate): where a console edits this instance's policy.",
        |w, _r: ConfigurationIdRequest| async move {
            Ok(ConfigurationIdResponse {
                id: w.config.id().to_string(),
            })
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_27_2_configuration_ids_are_checked_as_the_engine_does() {
        for good in [
            "approval-gate",
            "approval-gate-b",
            "a",
            "gate_2",
            &"x".repeat(64),
        ] {
            assert_eq!(check_config_id(good), Ok(()), "{good}");
        }
        for bad in ["", "Approval", "a b", "a/b", "a.b", "é", &"x".repeat(65)] {
            assert!(check_config_id(bad).is_err(), "{bad}");
        }
        let err = check_config_id("a/b").unwrap_err();
        assert!(
            err.to_string().starts_with("III_CONFIG_NAME=\"a/b\""),
            "{err}"
        );
    }
}
