//! One file per `approval::*` function: its request/response types, its
//! handler and its tests. [`register_all`] reads like the contract's function
//! table.
//!
//! Every handler takes its input as raw JSON and parses it itself, so a bad
//! shape is the contract's `approval/invalid_payload` (not the SDK's generic
//! serialization error); the typed schema is still published through the
//! SDK's request-format override.

use std::future::Future;
use std::sync::Arc;

use iii_sdk::RegisterFunction;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApprovalError;
use crate::worker::Worker;

pub mod config_change;
pub mod evaluate;
pub mod folder;
pub mod gate;
pub mod grant_watch;
pub mod inbox;
pub mod lifecycle;
pub mod resolve;
pub mod settings;

/// Registers every function of the worker.
pub fn register_all(worker: &Arc<Worker>) {
    gate::register(worker);
    grant_watch::register(worker);
    resolve::register(worker);
    inbox::register(worker);
    settings::register(worker);
    evaluate::register(worker);
    lifecycle::register(worker);
    config_change::register(worker);
}

/// The ids [`register_all`] registers, in the contract's order.
pub const FUNCTION_IDS: &[&str] = &[
    "approval::gate",
    "approval::grant-watch",
    "approval::resolve",
    "approval::list-pending",
    "approval::get-pending",
    "approval::set-mode",
    "approval::add-always-allow",
    "approval::remove-always-allow",
    "approval::approve-always",
    "approval::get-settings",
    "approval::clear-settings",
    "approval::evaluate",
    "approval::on-session-deleted",
    "approval::on-turn-completed",
    "approval::on-config-change",
    "approval::on-settings-change",
];

/// The draft-07 JSON schema of `T`.
pub fn schema_of<T: JsonSchema>() -> Value {
    let schema = schemars::gen::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// Parses a request, mapping any shape error to `approval/invalid_payload`.
pub fn parse<T: DeserializeOwned>(input: Value) -> Result<T, ApprovalError> {
    serde_json::from_value(input).map_err(|e| ApprovalError::InvalidPayload(e.to_string()))
}

/// Registers a typed handler `Req → Resp` that parses its own input.
///
/// The handler gets the shared worker state; the call counts as in flight
/// (graceful shutdown waits for it) until it returns.
pub fn register_typed<Req, Resp, F, Fut>(
    worker: &Arc<Worker>,
    id: &str,
    description: &str,
    handler: F,
) where
    Req: DeserializeOwned + JsonSchema + Send + 'static,
    Resp: Serialize + JsonSchema + Send + 'static,
    F: Fn(Arc<Worker>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApprovalError>> + Send + 'static,
{
    register_with_schema(worker, id, description, schema_of::<Req>(), handler);
}

/// As [`register_typed`] for a handler that reads its input as raw JSON (a
/// trigger payload it only partly looks at) while callers still see the
/// payload's shape: `Shape`'s schema is published as the request format.
pub fn register_shaped<Shape, Resp, F, Fut>(
    worker: &Arc<Worker>,
    id: &str,
    description: &str,
    handler: F,
) where
    Shape: JsonSchema,
    Resp: Serialize + JsonSchema + Send + 'static,
    F: Fn(Arc<Worker>, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApprovalError>> + Send + 'static,
{
    register_with_schema(worker, id, description, schema_of::<Shape>(), handler);
}

fn register_with_schema<Req, Resp, F, Fut>(
    worker: &Arc<Worker>,
    id: &str,
    description: &str,
    request_schema: Value,
    handler: F,
) where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + JsonSchema + Send + 'static,
    F: Fn(Arc<Worker>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApprovalError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    let w = worker.clone();
    let registration = RegisterFunction::new_async(move |input: Value| {
        let handler = handler.clone();
        let worker = w.clone();
        async move {
            let _running = worker.enter();
            let request = parse::<Req>(input)?;
            let response = handler(worker.clone(), request).await?;
            serde_json::to_value(response).map_err(|e| iii_sdk::Error::Serde(e.to_string()))
        }
    })
    .description(description)
    .request_format(request_schema)
    .response_format(schema_of::<Resp>());
    worker.sibling.iii().register_function(id, registration);
}
