//! The functions the engine serves itself: `state::*`, `configuration::*`
//! and the `engine::*` introspection and binding calls.
//!
//! Each answers like its real counterpart: same input fields (unknown ones,
//! such as the injected `_caller_worker_id`, ignored), same result shapes,
//! same error codes. Input that does not fit is refused with
//! `deserialization_error` / `Failed to deserialize input for <id>: …`.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::configuration::{self, ConfigurationTriggerConfig, Refusal};
use super::core::{
    new_id, sanitize_worker_text, Activation, Binding, BuiltinTrigger, ConnId, Core, Provider,
    WorkerInfo,
};
use super::state::{self, StateEvent, StateTriggerConfig};
use super::wire::{ErrorBody, DEFAULT_NAMESPACE};

/// One built-in function, as `engine::functions::list` shows it.
pub(crate) struct Builtin {
    pub id: &'static str,
    pub worker: &'static str,
    pub description: &'static str,
}

const STATE: &str = "iii-state";
const CONFIGURATION: &str = "configuration";
const ENGINE: &str = "iii-engine-functions";

pub(crate) const BUILTINS: &[Builtin] = &[
    Builtin {
        id: "state::set",
        worker: STATE,
        description: "Set a value in state",
    },
    Builtin {
        id: "state::get",
        worker: STATE,
        description: "Get a value from state",
    },
    Builtin {
        id: "state::delete",
        worker: STATE,
        description: "Delete a value from state",
    },
    Builtin {
        id: "state::update",
        worker: STATE,
        description: "Update a value in state",
    },
    Builtin {
        id: "state::list",
        worker: STATE,
        description: "Get a group from state",
    },
    Builtin {
        id: "state::list_groups",
        worker: STATE,
        description: "List all state groups",
    },
    Builtin {
        id: "configuration::register",
        worker: CONFIGURATION,
        description: "Register a configuration id with a name, description, and JSON Schema.",
    },
    Builtin {
        id: "configuration::set",
        worker: CONFIGURATION,
        description: "Replace the value of an already-registered configuration.",
    },
    Builtin {
        id: "configuration::get",
        worker: CONFIGURATION,
        description: "Read a configuration by id.",
    },
    Builtin {
        id: "configuration::list",
        worker: CONFIGURATION,
        description: "List every registered configuration with id, name, description, and schema.",
    },
    Builtin {
        id: "configuration::schema",
        worker: CONFIGURATION,
        description: "Retrieve the schema, name, and description for a configuration id.",
    },
    Builtin {
        id: "engine::functions::list",
        worker: ENGINE,
        description: "List registered functions with their owning worker name.",
    },
    Builtin {
        id: "engine::functions::info",
        worker: ENGINE,
        description: "Inspect functions: schemas, owner, and registered triggers. Single `function_id`, or `function_ids: [...]` (max 32) to fetch several contracts in one call.",
    },
    Builtin {
        id: "engine::triggers::info",
        worker: ENGINE,
        description: "Inspect one trigger type: schemas, owner, and live instance count.",
    },
    Builtin {
        id: "engine::triggers::list",
        worker: ENGINE,
        description: "List trigger types registered with the engine.",
    },
    Builtin {
        id: "engine::registered-triggers::list",
        worker: ENGINE,
        description: "List registered trigger instances (subscriber rows).",
    },
    Builtin {
        id: "engine::workers::list",
        worker: ENGINE,
        description: "List workers connected to the engine.",
    },
    Builtin {
        id: "engine::workers::register",
        worker: ENGINE,
        description: "Register worker metadata",
    },
    Builtin {
        id: "engine::register_trigger",
        worker: ENGINE,
        description: "Register a trigger that fires `function_id` directly. Returns the trigger id.",
    },
    Builtin {
        id: "engine::unregister_trigger",
        worker: ENGINE,
        description: "Unregister a trigger by id. Idempotent; reports whether it existed.",
    },
];

/// The in-process workers `engine::workers::list` reports next to the
/// connected ones.
const RUNTIME_WORKERS: &[(&str, &str)] = &[
    (
        CONFIGURATION,
        "Register, store, and watch typed configuration values for the engine.",
    ),
    (
        ENGINE,
        "Core engine introspection (engine::*) and platform authoring reference.",
    ),
    (
        STATE,
        "Distributed key-value state management with reactive change triggers.",
    ),
];

/// Longest `config_summary` in `engine::registered-triggers::list`.
const CONFIG_SUMMARY_MAX_CHARS: usize = 80;

pub(crate) fn is_builtin(function_id: &str) -> bool {
    BUILTINS.iter().any(|b| b.id == function_id)
}

/// What a built-in call produced.
pub(crate) enum Outcome {
    Done(Result<Option<Value>, ErrorBody>),
    /// Never answered: `engine::workers::register` for a refused name (the
    /// refusal closes the connection before any answer could go out).
    Unanswered,
    /// `engine::register_trigger` on a worker-provided type: the answer
    /// waits for the provider's verdict.
    AwaitTriggerAck {
        verdict: oneshot::Receiver<Option<ErrorBody>>,
        binding: Box<Binding>,
        provider: ConnId,
    },
}

fn input<T: DeserializeOwned>(function_id: &str, data: Value) -> Result<T, ErrorBody> {
    serde_json::from_value(data).map_err(|err| {
        ErrorBody::new(
            "deserialization_error",
            format!("Failed to deserialize input for {function_id}: {err}"),
        )
    })
}

fn refusal(refusal: Refusal) -> ErrorBody {
    ErrorBody::new(refusal.code, refusal.message)
}

/// Whether an engine trigger type accepts a binding's config; the message
/// is the real engine's.
pub(crate) fn check_trigger_config(kind: BuiltinTrigger, binding: &Binding) -> Result<(), String> {
    match kind {
        BuiltinTrigger::State => {
            serde_json::from_value::<StateTriggerConfig>(binding.config.clone())
                .map(|_| ())
                .map_err(|err| format!("Failed to parse trigger config: {err}"))
        }
        BuiltinTrigger::Configuration => {
            serde_json::from_value::<ConfigurationTriggerConfig>(binding.config.clone())
                .map(|_| ())
                .map_err(|err| format!("Failed to parse configuration trigger config: {err}"))
        }
        // Checked against the routing table when the route is inserted.
        BuiltinTrigger::Http => Ok(()),
    }
}

fn first_segment(id: &str) -> &str {
    id.split("::").next().unwrap_or(id)
}

fn matches_search(needle: &str, haystacks: &[&str]) -> bool {
    let needle = needle.to_lowercase();
    haystacks.iter().any(|h| h.to_lowercase().contains(&needle))
}

fn config_summary(config: &Value) -> String {
    let raw = config.to_string();
    if raw.chars().count() <= CONFIG_SUMMARY_MAX_CHARS {
        raw
    } else {
        let mut cut: String = raw.chars().take(CONFIG_SUMMARY_MAX_CHARS).collect();
        cut.push('…');
        cut
    }
}

#[derive(Deserialize)]
struct RegisterWorkerInput {
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    os: Option<String>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    isolation: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct RegisterTriggerInput {
    trigger_type: String,
    function_id: String,
    #[serde(default)]
    config: Value,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    trigger_namespace: Option<String>,
}

#[derive(Deserialize)]
struct UnregisterTriggerInput {
    id: String,
}

#[derive(Deserialize, Default)]
struct FunctionsListInput {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    worker: Option<String>,
    #[serde(default)]
    workers: Option<Vec<String>>,
    #[serde(default)]
    include_internal: Option<bool>,
}

#[derive(Deserialize, Default)]
struct FunctionInfoInput {
    #[serde(default)]
    function_id: Option<String>,
    #[serde(default)]
    function_ids: Option<Vec<String>>,
    #[serde(default)]
    namespace: Option<String>,
}

/// Most ids one `engine::functions::info` call takes, as the real engine.
const FUNCTION_INFO_MAX_IDS: usize = 32;

#[derive(Deserialize)]
struct TriggerInfoInput {
    id: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
struct TriggersListInput {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    worker: Option<String>,
    #[serde(default)]
    include_internal: Option<bool>,
}

#[derive(Deserialize, Default)]
struct RegisteredTriggersListInput {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    trigger_type: Option<String>,
    #[serde(default)]
    function_id: Option<String>,
    #[serde(default)]
    worker: Option<String>,
    #[serde(default)]
    include_internal: Option<bool>,
}

#[derive(Deserialize, Default)]
struct WorkersListInput {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    status: Option<String>,
}

impl Core {
    pub(crate) fn run_builtin(
        &mut self,
        caller: Option<ConnId>,
        function_id: &str,
        data: Value,
    ) -> Outcome {
        let done = match function_id {
            "state::set" => input(function_id, data).map(|i| self.state_set(i)),
            "state::get" => input::<state::StateGetInput>(function_id, data)
                .map(|i| self.state.get(&i.scope, &i.key)),
            "state::delete" => input(function_id, data).map(|i| self.state_delete(i)),
            "state::update" => input(function_id, data).map(|i| self.state_update(i)),
            "state::list" => input::<state::StateGetGroupInput>(function_id, data)
                .map(|i| Some(json!(self.state.list(&i.scope)))),
            "state::list_groups" => input::<state::StateListGroupsInput>(function_id, data)
                .map(|_| Some(json!({ "groups": self.state.groups() }))),
            "configuration::register" => {
                input(function_id, data).and_then(|i| self.configuration_register(i))
            }
            "configuration::set" => {
                input(function_id, data).and_then(|i| self.configuration_set(i))
            }
            "configuration::get" => input(function_id, data)
                .and_then(|i| self.configuration.get(i).map(Some).map_err(refusal)),
            "configuration::list" => {
                input::<configuration::ConfigurationListInput>(function_id, data)
                    .map(|_| Some(self.configuration.list()))
            }
            "configuration::schema" => {
                input::<configuration::ConfigurationSchemaInput>(function_id, data)
                    .and_then(|i| self.configuration.schema(&i.id).map(Some).map_err(refusal))
            }
            "engine::functions::list" => {
                input(function_id, data).map(|i| Some(self.functions_list(i)))
            }
            "engine::triggers::list" => {
                input(function_id, data).map(|i| Some(self.triggers_list(i)))
            }
            "engine::functions::info" => {
                input(function_id, data).and_then(|i| self.functions_info(i).map(Some))
            }
            "engine::triggers::info" => {
                input(function_id, data).and_then(|i| self.triggers_info(i).map(Some))
            }
            "engine::registered-triggers::list" => {
                input(function_id, data).map(|i| Some(self.registered_triggers_list(i)))
            }
            "engine::workers::list" => {
                input(function_id, data).map(|i| Some(self.workers_list(caller, i)))
            }
            "engine::workers::register" => {
                match input(function_id, data).and_then(|i| self.workers_register(caller, i)) {
                    Ok(None) => return Outcome::Unanswered,
                    done => done,
                }
            }
            "engine::register_trigger" => {
                return match input(function_id, data) {
                    Ok(i) => self.durable_bind(i),
                    Err(err) => Outcome::Done(Err(err)),
                }
            }
            "engine::unregister_trigger" => input::<UnregisterTriggerInput>(function_id, data)
                .map(|i| Some(json!({ "removed": self.unregister_binding(&i.id) }))),
            other => Err(ErrorBody::new(
                "function_not_found",
                format!("Function {other} not found in namespace {DEFAULT_NAMESPACE}."),
            )),
        };
        Outcome::Done(done)
    }

    // ── state ──────────────────────────────────────────────────────────

    fn fire_state(&mut self, event: Value) {
        let (scope, key) = (
            event["scope"].as_str().unwrap_or_default().to_string(),
            event["key"].as_str().unwrap_or_default().to_string(),
        );
        self.fire(BuiltinTrigger::State, &event, |config| {
            serde_json::from_value::<StateTriggerConfig>(config.clone())
                .is_ok_and(|config| config.matches(&scope, &key))
        });
    }

    fn state_set(&mut self, input: state::StateSetInput) -> Option<Value> {
        let old = self
            .state
            .set(&input.scope, &input.key, input.value.clone());
        let kind = if old.is_none() {
            StateEvent::Created
        } else {
            StateEvent::Updated
        };
        self.fire_state(state::event(
            kind,
            &input.scope,
            &input.key,
            old.clone(),
            input.value.clone(),
        ));
        Some(json!({ "old_value": old, "new_value": input.value }))
    }

    /// The delete event goes out even for a missing key, as in the real engine.
    fn state_delete(&mut self, input: state::StateDeleteInput) -> Option<Value> {
        let old = self.state.delete(&input.scope, &input.key);
        self.fire_state(state::event(
            StateEvent::Deleted,
            &input.scope,
            &input.key,
            old.clone(),
            Value::Null,
        ));
        old
    }

    fn state_update(&mut self, input: state::StateUpdateInput) -> Option<Value> {
        let (old, new, errors) = self.state.update(&input.scope, &input.key, &input.ops);
        let kind = if old.is_none() {
            StateEvent::Created
        } else {
            StateEvent::Updated
        };
        self.fire_state(state::event(
            kind,
            &input.scope,
            &input.key,
            old.clone(),
            new.clone(),
        ));
        let mut result = json!({ "old_value": old, "new_value": new });
        if !errors.is_empty() {
            result["errors"] = Value::Array(errors);
        }
        Some(result)
    }

    // ── configuration ──────────────────────────────────────────────────

    fn fire_configuration(&mut self, change: &configuration::Change) {
        let event = change.event();
        let (id, event_type) = (change.entry.id.clone(), change.event_type);
        self.fire(BuiltinTrigger::Configuration, &event, |config| {
            serde_json::from_value::<ConfigurationTriggerConfig>(config.clone())
                .is_ok_and(|config| config.matches(&id, event_type))
        });
    }

    fn configuration_register(
        &mut self,
        input: configuration::ConfigurationRegisterInput,
    ) -> Result<Option<Value>, ErrorBody> {
        let change = self.configuration.register(input).map_err(refusal)?;
        self.fire_configuration(&change);
        Ok(Some(json!(change.entry)))
    }

    fn configuration_set(
        &mut self,
        input: configuration::ConfigurationSetInput,
    ) -> Result<Option<Value>, ErrorBody> {
        let change = self.configuration.set(input).map_err(refusal)?;
        self.fire_configuration(&change);
        Ok(Some(json!({
            "old_value": change.old_value,
            "new_value": change.entry.value,
        })))
    }

    // ── engine::* ──────────────────────────────────────────────────────

    /// `engine::workers::register`: `{success: true}`, or `None` (no
    /// answer at all) when the name is refused.
    fn workers_register(
        &mut self,
        caller: Option<ConnId>,
        input: RegisterWorkerInput,
    ) -> Result<Option<Value>, ErrorBody> {
        let Some(conn) = caller else {
            return Err(ErrorBody::new(
                "deserialization_error",
                "Failed to deserialize input for engine::workers::register: missing field `_caller_worker_id`",
            ));
        };
        if super::wire::is_blank(&input.namespace) {
            return Err(ErrorBody::new(
                "INVALID_NAMESPACE",
                format!(
                    "namespace is empty: worker '{}' declared {:?}. Give it a name, or omit the \
                     field to register in '{DEFAULT_NAMESPACE}'.",
                    input.name.as_deref().unwrap_or("<unnamed>"),
                    input.namespace.as_deref().unwrap_or_default()
                ),
            ));
        }
        let namespace = input
            .namespace
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let info = WorkerInfo {
            runtime: Some(input.runtime.unwrap_or_else(|| "unknown".to_string())),
            version: input.version,
            os: input.os,
            description: sanitize_worker_text(input.description),
            pid: input.pid,
            isolation: input.isolation,
        };
        // A refused name gets no answer: the real engine closes the
        // connection first, so its `{success: false}` never reaches it.
        Ok(self
            .register_worker(conn, namespace, sanitize_worker_text(input.name), info)
            .then(|| json!({ "success": true })))
    }

    /// `engine::register_trigger`: a binding nobody owns, so no disconnect
    /// removes it. Parked at once when nobody provides the type; otherwise
    /// answered with the provider's verdict.
    fn durable_bind(&mut self, input: RegisterTriggerInput) -> Outcome {
        let mut binding = Binding {
            id: new_id(),
            trigger_type: input.trigger_type,
            function_id: input.function_id,
            config: input.config,
            metadata: input.metadata,
            namespace: DEFAULT_NAMESPACE.to_string(),
            trigger_namespace: input.trigger_namespace,
            home_namespace: DEFAULT_NAMESPACE.to_string(),
            owner: None,
            provider: None,
        };
        let answer = json!({ "id": binding.id });
        match self.activate(&mut binding) {
            Activation::Parked => {
                Core::log_parked(&binding);
                self.bindings.insert(binding.id.clone(), binding);
                Outcome::Done(Ok(Some(answer)))
            }
            Activation::Rejected(message) => {
                Outcome::Done(Err(ErrorBody::new("trigger_registration_failed", message)))
            }
            Activation::Live => {
                self.bindings.insert(binding.id.clone(), binding);
                Outcome::Done(Ok(Some(answer)))
            }
            Activation::Forwarded(provider) => {
                let (waiter, verdict) = oneshot::channel();
                self.trigger_acks
                    .insert(binding.id.clone(), (provider, waiter));
                Outcome::AwaitTriggerAck {
                    verdict,
                    binding: Box::new(binding),
                    provider,
                }
            }
        }
    }

    /// Who owns `function_id` in `namespace`, as the lists name it.
    fn owner_name(&self, namespace: &str, function_id: &str) -> String {
        if let Some(name) = self
            .functions
            .get(&(namespace.to_string(), function_id.to_string()))
            .and_then(|f| self.conns.get(&f.owner))
            .and_then(|c| c.name.clone())
        {
            return name;
        }
        if namespace == DEFAULT_NAMESPACE {
            if let Some(builtin) = BUILTINS.iter().find(|b| b.id == function_id) {
                return builtin.worker.to_string();
            }
        }
        first_segment(function_id).to_string()
    }

    fn functions_list(&self, input: FunctionsListInput) -> Value {
        struct Row {
            function_id: String,
            namespace: String,
            worker_name: String,
            description: Option<String>,
            metadata: Option<Value>,
        }
        let mut rows: Vec<Row> = BUILTINS
            .iter()
            .map(|b| Row {
                function_id: b.id.to_string(),
                namespace: DEFAULT_NAMESPACE.to_string(),
                worker_name: b.worker.to_string(),
                description: Some(b.description.to_string()),
                metadata: None,
            })
            .collect();
        for ((namespace, id), function) in &self.functions {
            rows.push(Row {
                function_id: id.clone(),
                namespace: namespace.clone(),
                worker_name: self.owner_name(namespace, id),
                description: function.description.clone(),
                metadata: function.metadata.clone(),
            });
        }
        if !input.include_internal.unwrap_or(false) {
            rows.retain(|row| {
                let engine_internal = row.function_id.starts_with("engine::")
                    && !row.function_id.starts_with("engine::queue::");
                let tagged = row
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get("internal"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                !engine_internal && !tagged
            });
        }
        if let Some(prefix) = &input.prefix {
            rows.retain(|row| row.function_id.starts_with(prefix.as_str()));
        }
        let workers: Vec<&String> = input
            .worker
            .iter()
            .chain(input.workers.iter().flatten())
            .collect();
        if !workers.is_empty() {
            rows.retain(|row| workers.iter().any(|w| **w == row.worker_name));
        }
        if let Some(search) = input.search.as_deref().filter(|s| !s.is_empty()) {
            rows.retain(|row| {
                matches_search(
                    search,
                    &[&row.function_id, row.description.as_deref().unwrap_or("")],
                )
            });
        }
        rows.sort_by(|a, b| a.function_id.cmp(&b.function_id));
        let functions: Vec<Value> = rows
            .into_iter()
            .map(|row| {
                let mut entry = json!({
                    "function_id": row.function_id,
                    "namespace": row.namespace,
                    "worker_name": row.worker_name,
                });
                if let Some(description) = row.description {
                    entry["description"] = json!(description);
                }
                if let Some(metadata) = row.metadata {
                    entry["metadata"] = metadata;
                }
                entry
            })
            .collect();
        json!({ "functions": functions })
    }

    /// `engine::functions::info`: one function's detail (`function_id`), or
    /// several (`function_ids`, answered as `{functions: [...]}` with
    /// `{function_id, error: "not_found"}` for an unknown id). The schemas are
    /// the `request_format` / `response_format` the owner registered;
    /// built-ins carry none here.
    fn functions_info(&self, input: FunctionInfoInput) -> Result<Value, ErrorBody> {
        let namespace = input
            .namespace
            .clone()
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        match (input.function_id, input.function_ids) {
            (Some(id), None) => self.function_detail(&namespace, &id).ok_or_else(|| {
                ErrorBody::new("NOT_FOUND", format!("Function '{id}' is not registered."))
            }),
            (None, Some(ids)) if ids.len() <= FUNCTION_INFO_MAX_IDS => {
                let mut seen = Vec::new();
                let functions: Vec<Value> = ids
                    .into_iter()
                    .filter(|id| {
                        let first = !seen.contains(id);
                        seen.push(id.clone());
                        first
                    })
                    .map(|id| {
                        self.function_detail(&namespace, &id)
                            .unwrap_or_else(|| json!({ "function_id": id, "error": "not_found" }))
                    })
                    .collect();
                Ok(json!({ "functions": functions }))
            }
            (None, Some(ids)) => Err(ErrorBody::new(
                "INVALID_INPUT",
                format!(
                    "function_ids takes at most {FUNCTION_INFO_MAX_IDS} ids, got {}",
                    ids.len()
                ),
            )),
            _ => Err(ErrorBody::new(
                "INVALID_INPUT",
                "exactly one of function_id / function_ids must be set",
            )),
        }
    }

    fn function_detail(&self, namespace: &str, id: &str) -> Option<Value> {
        let key = (namespace.to_string(), id.to_string());
        let (description, request_schema, response_schema) = match self.functions.get(&key) {
            Some(f) => (
                f.description.clone(),
                f.request_format.clone(),
                f.response_format.clone(),
            ),
            None => {
                let builtin = BUILTINS
                    .iter()
                    .find(|b| b.id == id && namespace == DEFAULT_NAMESPACE)?;
                (Some(builtin.description.to_string()), None, None)
            }
        };
        let registered_triggers: Vec<Value> = self
            .bindings
            .values()
            .filter(|b| b.provider.is_some() && b.function_id == id && b.namespace == namespace)
            .map(|b| json!({ "id": b.id, "trigger_type": b.trigger_type, "config": b.config }))
            .collect();
        Some(json!({
            "function_id": id,
            "namespace": namespace,
            "worker_name": self.owner_name(namespace, id),
            "description": description,
            "request_schema": request_schema,
            "response_schema": response_schema,
            "registered_triggers": registered_triggers,
        }))
    }

    /// `engine::triggers::info`: a trigger type's binding-config schema
    /// (`configuration_schema`), payload schema (`request_schema`), owner
    /// and live binding count.
    fn triggers_info(&self, input: TriggerInfoInput) -> Result<Value, ErrorBody> {
        let namespace = input
            .namespace
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let key = (namespace.clone(), input.id.clone());
        let entry = self.trigger_types.get(&key).ok_or_else(|| {
            ErrorBody::new(
                "NOT_FOUND",
                format!(
                    "Trigger type '{}' is not registered in namespace '{namespace}'.",
                    input.id
                ),
            )
        })?;
        let worker_name = self.provider_name(entry.provider, &input.id);
        let instance_count = self
            .bindings
            .values()
            .filter(|b| b.provider.as_ref() == Some(&key))
            .count();
        Ok(json!({
            "id": input.id,
            "namespace": namespace,
            "worker_name": worker_name,
            "description": entry.description,
            "configuration_schema": entry.formats.0,
            "request_schema": entry.formats.1,
            "instance_count": instance_count,
        }))
    }

    /// The worker name a trigger type's listing shows for its provider: the
    /// built-in worker, else the providing connection's name, else the
    /// type id's first segment.
    fn provider_name(&self, provider: Provider, type_id: &str) -> String {
        match provider {
            Provider::Builtin(BuiltinTrigger::State) => STATE.to_string(),
            Provider::Builtin(BuiltinTrigger::Configuration) => CONFIGURATION.to_string(),
            Provider::Builtin(BuiltinTrigger::Http) => super::http::WORKER.to_string(),
            Provider::Conn(conn) => self
                .conns
                .get(&conn)
                .and_then(|c| c.name.clone())
                .unwrap_or_else(|| first_segment(type_id).to_string()),
        }
    }

    fn triggers_list(&self, input: TriggersListInput) -> Value {
        let mut rows: Vec<(String, String, String, String)> = self
            .trigger_types
            .iter()
            .map(|((namespace, id), entry)| {
                let worker_name = self.provider_name(entry.provider, id);
                (
                    id.clone(),
                    namespace.clone(),
                    worker_name,
                    entry.description.clone(),
                )
            })
            .collect();
        if !input.include_internal.unwrap_or(false) {
            rows.retain(|(id, ..)| !id.starts_with("engine::"));
        }
        if let Some(prefix) = &input.prefix {
            rows.retain(|(id, ..)| id.starts_with(prefix.as_str()));
        }
        if let Some(worker) = &input.worker {
            rows.retain(|(_, _, name, _)| name == worker);
        }
        if let Some(search) = input.search.as_deref().filter(|s| !s.is_empty()) {
            rows.retain(|(id, _, _, description)| matches_search(search, &[id, description]));
        }
        rows.sort();
        let triggers: Vec<Value> = rows
            .into_iter()
            .map(|(id, namespace, worker_name, description)| {
                json!({
                    "id": id,
                    "namespace": namespace,
                    "worker_name": worker_name,
                    "description": description,
                })
            })
            .collect();
        json!({ "triggers": triggers })
    }

    /// Live bindings only: a parked binding is not listed until its type's
    /// provider takes it, exactly as in the real engine.
    fn registered_triggers_list(&self, input: RegisteredTriggersListInput) -> Value {
        let mut rows: Vec<(&Binding, String)> = self
            .bindings
            .values()
            .filter(|binding| binding.provider.is_some())
            .map(|binding| {
                (
                    binding,
                    self.owner_name(&binding.namespace, &binding.function_id),
                )
            })
            .collect();
        if !input.include_internal.unwrap_or(false) {
            rows.retain(|(b, _)| !b.function_id.starts_with("engine::"));
        }
        if let Some(trigger_type) = &input.trigger_type {
            rows.retain(|(b, _)| &b.trigger_type == trigger_type);
        }
        if let Some(function_id) = &input.function_id {
            rows.retain(|(b, _)| &b.function_id == function_id);
        }
        if let Some(worker) = &input.worker {
            rows.retain(|(_, name)| name == worker);
        }
        if let Some(search) = input.search.as_deref().filter(|s| !s.is_empty()) {
            rows.retain(|(b, _)| matches_search(search, &[&b.id, &b.trigger_type, &b.function_id]));
        }
        let registered: Vec<Value> = rows
            .into_iter()
            .map(|(binding, worker_name)| {
                json!({
                    "id": binding.id,
                    "trigger_type": binding.trigger_type,
                    "function_id": binding.function_id,
                    "worker_name": worker_name,
                    "config": binding.config,
                    "config_summary": config_summary(&binding.config),
                })
            })
            .collect();
        json!({ "registered_triggers": registered })
    }

    /// Connected workers that announced a pid, then the in-process ones,
    /// sorted by name. A worker's `active_invocations` are the calls it is
    /// waiting on, this one included.
    fn workers_list(&self, caller: Option<ConnId>, input: WorkersListInput) -> Value {
        let mut rows: Vec<Value> = Vec::new();
        for (conn_id, conn) in &self.conns {
            let Some(info) = conn.info.as_ref().filter(|info| info.pid.is_some()) else {
                continue;
            };
            let function_count = self
                .functions
                .values()
                .filter(|f| f.owner == *conn_id)
                .count();
            let active = self.calls_waiting_for(*conn_id) + usize::from(caller == Some(*conn_id));
            rows.push(json!({
                "name": conn.name,
                "description": info.description,
                "version": info.version,
                "id": conn.worker_id,
                "namespace": conn.namespace(),
                "runtime": info.runtime,
                "os": info.os,
                "status": "connected",
                "function_count": function_count,
                "connected_at_ms": conn.connected_at_ms,
                "active_invocations": active,
                "isolation": info.isolation,
                "ip_address": conn.ip,
            }));
        }
        for (name, description) in RUNTIME_WORKERS {
            let function_count = BUILTINS.iter().filter(|b| b.worker == *name).count();
            rows.push(json!({
                "name": name,
                "description": description,
                "version": "testkit",
                "id": name,
                "namespace": DEFAULT_NAMESPACE,
                "runtime": "engine",
                "os": null,
                "status": "available",
                "function_count": function_count,
                "connected_at_ms": 0,
                "active_invocations": 0,
                "isolation": "in-process",
                "ip_address": null,
            }));
        }
        if let Some(runtime) = &input.runtime {
            rows.retain(|row| row["runtime"].as_str() == Some(runtime));
        }
        if let Some(status) = &input.status {
            rows.retain(|row| row["status"].as_str() == Some(status));
        }
        if let Some(search) = input.search.as_deref().filter(|s| !s.is_empty()) {
            rows.retain(|row| matches_search(search, &[row["name"].as_str().unwrap_or("")]));
        }
        rows.sort_by(|a, b| {
            let key = |row: &Value| {
                (
                    row["name"]
                        .as_str()
                        .or(row["id"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                    row["id"].as_str().unwrap_or_default().to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        json!({ "workers": rows })
    }
}
