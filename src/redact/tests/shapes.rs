//! Contract §21.7, "Redaction v3": the JSON shapes of the corpus (pairs,
//! argv arrays, secret-keyed containers) lose their secrets wherever they
//! sit, in the excerpt and in the whole form; their look-alikes stay
//! readable.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::*;
use super::corpus::{embedded, leaks, strings_of, ValueShape, CORPUS};
use super::nest;

fn leak(out: &Value, shape: &ValueShape) -> Option<String> {
    for secret in &shape.secrets {
        if let Some(s) = strings_of(out).into_iter().find(|s| leaks(s, secret)) {
            return Some(format!("{}: {secret:?} survives in {s:?}", shape.name));
        }
    }
    None
}

#[test]
fn rule_21_7_the_corpus_holds_json_shapes_and_their_look_alikes() {
    assert!(CORPUS.values.len() >= 20, "{}", CORPUS.values.len());
    assert!(
        CORPUS.benign_values.len() >= 20,
        "{}",
        CORPUS.benign_values.len()
    );
    for shape in &CORPUS.values {
        assert!(!shape.secrets.is_empty(), "{}", shape.name);
        // The check can fail: the input holds every secret.
        assert!(leak(&shape.value, shape).is_some(), "{}", shape.name);
        if let Some(expected) = &shape.expected {
            assert_eq!(leak(expected, shape), None, "{}", shape.name);
        }
    }
}

#[test]
fn rule_21_7_every_json_shape_loses_its_secrets_wherever_it_sits() {
    for shape in &CORPUS.values {
        let v = &shape.value;
        let placements = [
            ("as the arguments", v.clone()),
            ("under a neutral key", json!({ "request": v })),
            ("in an array", json!(["x", v, 3])),
            ("nested", json!({"a": [{"b": {"c": [null, v]}}]})),
            ("deep", nest(40, json!({ "cmd": v }))),
        ];
        for (place, input) in placements {
            let out = redact(&input);
            assert_eq!(leak(&out, shape), None, "excerpt, {place}");
            assert_eq!(redact(&out), out, "{}: {place}: second pass", shape.name);
            let full = redact_full(&input);
            assert_eq!(leak(&full.value, shape), None, "whole form, {place}");
            assert!(!full.clipped, "{}: {place}", shape.name);
        }
        if let Some(expected) = &shape.expected {
            assert_eq!(&redact(v), expected, "{}", shape.name);
            assert_eq!(&redact_full(v).value, expected, "{}", shape.name);
        }
    }
}

#[test]
fn rule_21_7_benign_json_look_alikes_stay_readable() {
    for v in &CORPUS.benign_values {
        assert_eq!(&redact(v), v);
        assert_eq!(redact_full(v).value, *v);
        assert_eq!(
            redact(&json!({ "arguments": [v] })),
            json!({ "arguments": [v] })
        );
    }
}

#[test]
fn rule_21_7_pairs_need_a_secret_name_and_a_value_field() {
    let out = redact(&json!([
        {"name": "API_TOKEN", "value": "t1"},
        {"NAME": "Api-Token", "VALUE": "t2"},
        {"key": "password", "value": 7},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
        {"name": "TOKEN_FILE", "value": "/run/t"},
        {"name": 5, "value": "v"},
        {"label": "password", "value": "shown: no name or key field"},
    ]));
    assert_eq!(
        out,
        json!([
            {"name": "API_TOKEN", "value": REDACTED},
            {"NAME": "Api-Token", "VALUE": REDACTED},
            {"key": "password", "value": REDACTED},
            {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
            {"name": "TOKEN_FILE", "value": "/run/t"},
            {"name": 5, "value": "v"},
            {"label": "password", "value": "shown: no name or key field"},
        ])
    );
}

#[test]
fn rule_21_7_argv_rules_apply_to_arrays_of_words_only_in_order() {
    // The flag must come right before its value.
    assert_eq!(
        redact(&json!(["mysql", "--password", 5, "pw"])),
        json!(["mysql", "--password", 5, "pw"])
    );
    // Nested arrays are argv arrays of their own.
    assert_eq!(
        redact(&json!([["curl", "-u"], ["admin:pw"]])),
        json!([["curl", "-u"], ["admin:pw"]])
    );
    assert_eq!(
        redact(&json!({"steps": [["curl", "-u", "admin:pw"]]})),
        json!({"steps": [["curl", "-u", "admin:<redacted>"]]})
    );
    // A long secret is redacted whole, never clipped to show its start.
    let long = "k".repeat(400);
    assert_eq!(
        redact(&json!(["x", "--token", long])),
        json!(["x", "--token", REDACTED])
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn rule_21_7_a_json_shape_anywhere_in_random_json_never_leaks(
        (i, v) in (0..CORPUS.values.len()).prop_flat_map(|i| {
            (Just(i), embedded(CORPUS.values[i].value.clone()))
        }),
    ) {
        let shape = &CORPUS.values[i];
        let out = redact(&v);
        prop_assert_eq!(leak(&out, shape), None);
        prop_assert_eq!(redact(&out), out);
        prop_assert_eq!(leak(&redact_full(&v).value, shape), None);
    }

    #[test]
    fn rule_21_7_a_benign_json_look_alike_anywhere_stays(
        v in (0..CORPUS.benign_values.len())
            .prop_flat_map(|i| embedded(CORPUS.benign_values[i].clone())),
    ) {
        prop_assert_eq!(redact(&v), v.clone());
        prop_assert_eq!(redact_full(&v).value, v);
    }
}
