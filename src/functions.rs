//! How a function is registered: the helpers every surface's handlers use
//! (the table of what is registered is `function_table.rs`). Each function
//! lives in the folder of its surface (gate, grant watch, decision plane,
//! inbox), one file per function or family, with its request/response types,
//! its handler and its tests.
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
use crate::hook::{HookInput, HookOutput};
use crate::schema::schema_of;
use crate::worker::Worker;

// The answer of the internal event handlers.
/// `{ok: true}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Ack {
    /// Always true.
    pub ok: bool,
}

/// Parses a request, mapping any shape error to `approval/invalid_payload`.
pub(crate) fn parse<T: DeserializeOwned>(input: Value) -> Result<T, ApprovalError> {
    serde_json::from_value(input).map_err(|e| ApprovalError::InvalidPayload(e.to_string()))
}

/// Registers a typed handler `Req → Resp` that parses its own input.
///
/// The handler gets the shared worker state; the call counts as in flight
/// (graceful shutdown waits for it) until it returns.
pub(crate) fn register_typed<Req, Resp, F, Fut>(
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
    register_with_schema(worker, id, description, schema_of::<Req>(), None, handler);
}

/// As [`register_typed`] for console plumbing: the function carries
/// `metadata: {internal: true}`, so the engine leaves it out of its listings
/// unless asked for internal functions.
pub(crate) fn register_internal<Req, Resp, F, Fut>(
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
    let internal = serde_json::json!({ "internal": true });
    register_with_schema(
        worker,
        id,
        description,
        schema_of::<Req>(),
        Some(internal),
        handler,
    );
}

/// As [`register_typed`] for a handler that reads its input as raw JSON (a
/// trigger payload it only partly looks at) while callers still see the
/// payload's shape: `Shape`'s schema is published as the request format.
pub(crate) fn register_shaped<Shape, Resp, F, Fut>(
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
    register_with_schema(worker, id, description, schema_of::<Shape>(), None, handler);
}

fn register_with_schema<Req, Resp, F, Fut>(
    worker: &Arc<Worker>,
    id: &str,
    description: &str,
    request_schema: Value,
    metadata: Option<Value>,
    handler: F,
) where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + JsonSchema + Send + 'static,
    F: Fn(Arc<Worker>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApprovalError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    let w = worker.clone();
    let mut registration = RegisterFunction::new_async(move |input: Value| {
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
    if let Some(metadata) = metadata {
        registration = registration.metadata(metadata);
    }
    worker.engine.iii().register_function(id, registration);
}

/// Registers a hook (`approval::gate`, `approval::grant-watch`): the raw
/// input goes to the handler, which always answers (a hook never returns a
/// handler error); the harness's input and output shapes are published.
pub(crate) fn register_hook<F, Fut>(worker: &Arc<Worker>, id: &str, description: &str, handler: F)
where
    F: Fn(Arc<Worker>, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HookOutput> + Send + 'static,
{
    let handler = Arc::new(handler);
    let w = worker.clone();
    let registration = RegisterFunction::new_async(move |input: Value| {
        let handler = handler.clone();
        let worker = w.clone();
        async move {
            let _running = worker.enter();
            let out = handler(worker.clone(), input).await;
            serde_json::to_value(out).map_err(|e| iii_sdk::Error::Serde(e.to_string()))
        }
    })
    .description(description)
    .request_format(schema_of::<HookInput>())
    .response_format(schema_of::<HookOutput>());
    worker.engine.iii().register_function(id, registration);
}
