//! Compact in-memory forms of a record's free-form JSON.
//!
//! A held call stays in memory until a human decides, and a busy inbox
//! holds 100k of them. As a `serde_json::Value`, a ~1 KB record's arguments
//! and metadata cost about 2 KB of heap (every object is a `BTreeMap` with
//! room for eleven entries). These two types keep the same JSON in far
//! less: both as their compact text.
//! Both serialize, deserialize and describe themselves (JSON Schema) exactly
//! as the `Value` / `Map` they replace, so nothing on the wire changes.

use std::borrow::Cow;
use std::fmt;

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Any JSON value, kept as its compact text. Reading it back as a
/// [`Value`] parses the text; equality is equality of the text (every
/// `JsonText` is written by `serde_json`, whose output for a value is
/// unique, so equal values have equal texts — except `-0.0` and `0.0`,
/// equal as values, which stay two texts).
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// The compact text of `value`.
    pub fn of(value: &Value) -> JsonText {
        JsonText(
            serde_json::value::to_raw_value(value)
                .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("valid JSON")),
        )
    }

    /// The value, parsed back.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> JsonText {
        JsonText::of(&value)
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &JsonText) -> bool {
        self.0.get() == other.0.get()
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.get())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.get())
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    /// Any JSON value. The text is re-written compactly: a stored record
    /// read from a pretty-printed source has the same `JsonText` as one
    /// written here.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JsonText, D::Error> {
        Value::deserialize(deserializer).map(|v| JsonText::of(&v))
    }
}

impl JsonSchema for JsonText {
    fn is_referenceable() -> bool {
        Value::is_referenceable()
    }
    fn schema_name() -> String {
        Value::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        Value::schema_id()
    }
    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        Value::json_schema(gen)
    }
}

/// A JSON object (a session's tenancy tags), kept as its compact text like
/// [`JsonText`]: one allocation instead of a map node plus one per key and
/// string value (~80 bytes instead of ~350 for three tags). Reading an
/// entry parses the text; the index answers tenancy filters from its
/// postings and parses only for values it does not index.
#[derive(Clone, PartialEq)]
pub struct Metadata(JsonText);

impl Metadata {
    /// The object, parsed back.
    pub fn to_map(&self) -> Map<String, Value> {
        match self.0.to_value() {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// Subset equality: every entry of `filter` is present here and equal.
    /// `{}` matches everything.
    pub fn contains_all(&self, filter: &Map<String, Value>) -> bool {
        if filter.is_empty() {
            return true;
        }
        let map = self.to_map();
        filter.iter().all(|(k, v)| map.get(k) == Some(v))
    }

    /// The compact JSON text of the object.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl From<Map<String, Value>> for Metadata {
    fn from(map: Map<String, Value>) -> Metadata {
        Metadata(JsonText::of(&Value::Object(map)))
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    /// A JSON object only.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Metadata, D::Error> {
        Map::<String, Value>::deserialize(deserializer).map(Metadata::from)
    }
}

impl JsonSchema for Metadata {
    fn is_referenceable() -> bool {
        Map::<String, Value>::is_referenceable()
    }
    fn schema_name() -> String {
        Map::<String, Value>::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        Map::<String, Value>::schema_id()
    }
    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        Map::<String, Value>::json_schema(gen)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn json_text_round_trips_and_serializes_as_the_value() {
        let v = json!({"b": [1, 2.5, null], "a": {"x": "é\u{1}"}, "s": "<redacted>"});
        let t = JsonText::of(&v);
        assert_eq!(t.to_value(), v);
        assert_eq!(serde_json::to_value(&t).unwrap(), v);
        assert_eq!(serde_json::to_string(&t).unwrap(), v.to_string());
        assert_eq!(t.to_string(), v.to_string());
        // Read back from a pretty-printed source: the same compact text.
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let back: JsonText = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back, t);
        let from_value: JsonText = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(from_value, t);
        assert_ne!(
            JsonText::of(&json!({"a": 1})),
            JsonText::of(&json!({"a": 2}))
        );
    }

    #[test]
    fn json_text_inside_a_flattened_struct_serializes_as_the_value() {
        #[derive(Serialize)]
        struct Inner {
            args: JsonText,
        }
        #[derive(Serialize)]
        struct Outer {
            #[serde(flatten)]
            inner: Inner,
            status: &'static str,
        }
        let out = Outer {
            inner: Inner {
                args: JsonText::of(&json!({"k": [true]})),
            },
            status: "pending",
        };
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"args": {"k": [true]}, "status": "pending"})
        );
    }

    #[test]
    fn metadata_looks_up_matches_and_serializes_as_the_map() {
        let map = obj(json!({"tenant": "a", "n": 1, "tags": ["x"], "": null}));
        let m = Metadata::from(map.clone());
        assert_eq!(m.as_str(), r#"{"":null,"n":1,"tags":["x"],"tenant":"a"}"#);
        assert!(!m.contains_all(&obj(json!({"tenan": "a"}))));
        assert!(m.contains_all(&obj(json!({"": null, "tags": ["x"]}))));
        assert!(m.contains_all(&obj(json!({}))));
        assert!(m.contains_all(&obj(json!({"tenant": "a", "n": 1}))));
        assert!(!m.contains_all(&obj(json!({"tenant": "a", "n": 2}))));
        assert!(!m.contains_all(&obj(json!({"missing": null}))));
        assert_eq!(m.to_map(), map);
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            Value::Object(map.clone())
        );
        let back: Metadata = serde_json::from_value(Value::Object(map)).unwrap();
        assert_eq!(back, m);
        assert!(serde_json::from_value::<Metadata>(json!([1])).is_err());
        assert!(serde_json::from_value::<Metadata>(json!("x")).is_err());
    }

    #[test]
    fn schemas_are_those_of_value_and_map() {
        let mut a = SchemaGenerator::default();
        let mut b = SchemaGenerator::default();
        assert_eq!(
            serde_json::to_value(JsonText::json_schema(&mut a)).unwrap(),
            serde_json::to_value(Value::json_schema(&mut b)).unwrap()
        );
        assert_eq!(
            serde_json::to_value(Metadata::json_schema(&mut a)).unwrap(),
            serde_json::to_value(Map::<String, Value>::json_schema(&mut b)).unwrap()
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                // `-0.0 == 0.0` as values but not as texts: the one pair
                // where text equality is stricter (documented on `JsonText`).
                .prop_map(|f| Value::from(if f == 0.0 { 0.0 } else { f })),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn floats_survive_the_text_exactly() {
        // Without serde_json's `float_roundtrip` this came back one ULP off
        // (found by the property below).
        let v = json!({"": [-8.351866651951499e215, 0.1, 1e-300, f64::MAX]});
        assert_eq!(JsonText::of(&v).to_value(), v);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Property: the compact forms are lossless and equal exactly when
        /// the values are.
        #[test]
        fn compact_forms_are_lossless(a in arb_json(), b in arb_json()) {
            let (ta, tb) = (JsonText::of(&a), JsonText::of(&b));
            prop_assert_eq!(ta.to_value(), a.clone());
            prop_assert_eq!(ta == tb, a == b);
            if let (Value::Object(ma), Value::Object(mb)) = (a, b) {
                let (xa, xb) = (Metadata::from(ma.clone()), Metadata::from(mb.clone()));
                prop_assert_eq!(xa.to_map(), ma.clone());
                prop_assert_eq!(xa == xb, ma == mb);
                prop_assert_eq!(serde_json::to_string(&xa).unwrap(), serde_json::to_string(&ma).unwrap());
                let sub: Map<String, Value> = mb.iter().take(2).map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(xa.contains_all(&sub), sub.iter().all(|(k, v)| ma.get(k) == Some(v)));
            }
        }
    }
}
