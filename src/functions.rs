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
use crate::gate::hook::{HookInput, HookOutput};
use crate::worker::Worker;

// The answer of the internal event handlers.
/// `{ok: true}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Ack {
    /// Always true.
    pub ok: bool,
}

/// Draft-07 settings with every subschema inlined: tools that show a
/// function's fields (`iii trigger <fn> --help`, consoles) do not follow
/// `$ref`s into `definitions` and would show `any` for each referenced type.
fn inlined_settings() -> schemars::gen::SchemaSettings {
    let mut settings = schemars::gen::SchemaSettings::draft07();
    settings.inline_subschemas = true;
    settings
}

/// The draft-07 JSON schema of `T`, every subschema inlined, each
/// combination of typed alternatives stating its type.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let schema = inlined_settings()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    state_types(&mut value);
    value
}

/// Adds `type` to every `oneOf` / `anyOf` whose alternatives all state one:
/// a documented enum (`oneOf` of one-value string enums) or an optional
/// type (`anyOf` of it and `null`) would otherwise show as `any` in tools
/// that read only a property's `type`. The union of the alternatives'
/// types constrains nothing they do not, so the schema means the same.
fn state_types(schema: &mut Value) {
    let Value::Object(map) = schema else {
        if let Value::Array(items) = schema {
            items.iter_mut().for_each(state_types);
        }
        return;
    };
    map.values_mut().for_each(state_types);
    if map.contains_key("type") {
        return;
    }
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(alternatives)) = map.get(key) else {
            continue;
        };
        let mut types: Vec<Value> = Vec::new();
        for alternative in alternatives {
            let stated = match alternative.get("type") {
                Some(Value::String(t)) => vec![Value::String(t.clone())],
                Some(Value::Array(ts)) if ts.iter().all(Value::is_string) => ts.clone(),
                _ => return,
            };
            for t in stated {
                if !types.contains(&t) {
                    types.push(t);
                }
            }
        }
        let stated = match types.len() {
            0 => return,
            1 => types.remove(0),
            _ => Value::Array(types),
        };
        map.insert("type".into(), stated);
        return;
    }
}

/// `T`'s schema with every subschema inlined, for the SDK builders that take
/// a type rather than a schema (a trigger type's payload and config).
pub(crate) struct Inlined<T>(std::marker::PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Inlined<T> {
    fn schema_name() -> String {
        T::schema_name()
    }

    fn is_referenceable() -> bool {
        false
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        let mut root = schema_of::<T>();
        if let Value::Object(map) = &mut root {
            map.remove("$schema");
        }
        serde_json::from_value(root).unwrap_or(schemars::schema::Schema::Bool(true))
    }
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
    register_with_schema(worker, id, description, schema_of::<Req>(), handler);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn combinations_of_typed_alternatives_state_their_type() {
        let mut schema = json!({"properties": {
            "decision": {"description": "d", "oneOf": [
                {"enum": ["allow"], "type": "string"}, {"enum": ["deny"], "type": "string"}]},
            "scope": {"anyOf": [
                {"oneOf": [{"enum": ["once"], "type": "string"}]}, {"type": "null"}]},
            "mixed": {"anyOf": [{"type": ["integer", "null"]}, {"type": "string"}]},
            "untyped": {"anyOf": [{"type": "string"}, {"description": "anything"}]},
            "typed": {"type": "object", "oneOf": [{"type": "object"}]}
        }});
        state_types(&mut schema);
        let p = &schema["properties"];
        assert_eq!(p["decision"]["type"], "string");
        assert_eq!(p["scope"]["anyOf"][0]["type"], "string");
        assert_eq!(p["scope"]["type"], json!(["string", "null"]));
        assert_eq!(p["mixed"]["type"], json!(["integer", "null", "string"]));
        assert!(p["untyped"].get("type").is_none());
        assert_eq!(p["typed"]["type"], "object");
    }
}
