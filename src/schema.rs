//! PURE: the JSON schemas the worker publishes — draft-07, every subschema
//! inlined, so tools that show a function's fields (`iii trigger <fn>
//! --help`, consoles) see real types instead of `any`. A leaf: the function
//! helpers and the trigger types both use it.

use schemars::JsonSchema;
use serde_json::Value;

/// Never skips: named as a field's `#[schemars(skip_serializing_if)]` where
/// serde leaves the field out of the stored value while it holds its
/// default, so the schema still states that default to a form.
pub(crate) fn never<T>(_: &T) -> bool {
    false
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
    whole_bounds(&mut value);
    value
}

/// The largest integer a double holds exactly (2^53).
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Writes every whole-number bound as a JSON integer. schemars states
/// bounds as doubles (`1000.0`), and the real engine prints a stored double
/// with fewer digits: the configuration's `gate_priority` bounds,
/// ±(2^53 − 1), came back as ±9007199254740990 and would refuse values the
/// worker takes.
fn whole_bounds(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for key in ["minimum", "maximum"] {
                let Some(bound) = map.get(key).and_then(Value::as_f64) else {
                    continue;
                };
                if bound.fract() == 0.0 && bound.abs() < EXACT {
                    // Exact: a whole double below 2^53 in magnitude is an i64.
                    #[allow(clippy::cast_possible_truncation)]
                    map.insert(key.to_owned(), Value::from(bound as i64));
                }
            }
            map.values_mut().for_each(whole_bounds);
        }
        Value::Array(items) => items.iter_mut().for_each(whole_bounds),
        _ => {}
    }
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
