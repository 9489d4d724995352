//! `approval-gate::configuration-id` (contract §27.2): which configuration
//! entry this worker follows (`config::identity` names it).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::identity::ID;
use crate::functions::register_typed;
use crate::worker::Worker;

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
