//! The configuration schema gives the engine the same checks at
//! `configuration::set` as the schema written wholly by hand before its
//! parts came from the types (`tests/fixtures/config-schema-handwritten.json`,
//! kept as the reference while they do): a corpus of good and bad values,
//! one or more per field, is accepted and refused alike by both — except
//! where the old schema was wrong, each said below.

use std::path::Path;

use serde_json::{json, Value};

use super::schema;
use crate::config::{load_seed, ApprovalConfig};

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::Validator::new(schema).expect("the schema compiles")
}

fn handwritten() -> Value {
    serde_json::from_str(include_str!(
        "../../../tests/fixtures/config-schema-handwritten.json"
    ))
    .expect("the fixture is JSON")
}

/// 32 characters: the shortest link secret.
const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// Values both schemas accept.
fn good() -> Vec<Value> {
    let rule = json!({
        "function": "shell::exec", "action": "ask", "rule_id": "r", "modes": ["auto", "full"],
        "args": {"command": {"matches": "push .*--force"}, "/opts/x": {"equals": [1, {"a": null}]},
                 "url": {"prefix": "https://"}},
        "timeout_ms": 1000, "escalate_after_ms": null,
        "examples": {"match": [{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}],
                     "no_match": [{"function_id": "shell::exec"}]}
    });
    vec![
        json!({}),
        ApprovalConfig::defaults_json(),
        json!({"default_mode": "auto"}),
        json!({"default_mode": "full", "rule_precedence": "deny_ask_allow"}),
        json!({"rules": []}),
        json!({"rules": ["shell::*", "!approval::*", "?deploy::*", rule]}),
        json!({"rules": [{"function": "a", "action": "deny", "modes": []}]}),
        json!({"rules": [{"function": "a", "action": "allow", "examples": {}}]}),
        json!({"grant_reask_limit": 0}),
        json!({"human_only_extra": ["deploy::prod*", "billing::*"]}),
        json!({"gate_priority": -9_007_199_254_740_991_i64}),
        json!({"gate_priority": 9_007_199_254_740_991_i64}),
        json!({"binding_check_interval_ms": 1000}),
        json!({"release_timeout_ms": 1000, "resolve_wait_ms": 0}),
        json!({"links": null}),
        json!({"links": {"secret": SECRET, "public_base_url": "https://a.example"}}),
        json!({"links": {"secret": SECRET, "public_base_url": "HTTP://a:8080/p", "inbox_token": "x"}}),
        json!({"reviewer": null}),
        json!({"reviewer": {"function_id": "review::call"}}),
        json!({"reviewer": {"function_id": "review call", "modes": ["auto", "manual"], "timeout_ms": 1,
                            "max_consecutive_denials": 0, "max_denials_per_50": 50}}),
        json!({"decision_log": null}),
        json!({"decision_log": {"function_id": "audit::log", "queue": 1}}),
        json!({"pending_timeout_ms": null, "escalate_after_ms": 1000}),
        json!({"pending_timeout_ms": 1_800_000}),
        json!({"suggest_prefixes": []}),
        json!({"suggest_prefixes": ["git status", "ls"]}),
        json!({"protected_paths": ["/opt/iii/**"], "protected_path_functions": ["shell::*"]}),
        json!({"edit_ttl_max_ms": 1000}),
    ]
}

/// Values both schemas refuse.
fn bad() -> Vec<Value> {
    let rule = |extra: Value| {
        let mut r = json!({"function": "shell::exec", "action": "allow"});
        if let (Some(r), Some(e)) = (r.as_object_mut(), extra.as_object()) {
            r.extend(e.clone());
        }
        json!({ "rules": [r] })
    };
    vec![
        json!([]),
        json!("manual"),
        json!({"defualt_mode": "full"}),
        json!({"default_mode": "sometimes"}),
        json!({"default_mode": null}),
        json!({"rules": "shell::*"}),
        json!({"rules": [""]}),
        json!({"rules": [1]}),
        json!({"rules": [{"action": "allow"}]}),
        json!({"rules": [{"function": "a"}]}),
        json!({"rules": [{"function": "", "action": "allow"}]}),
        rule(json!({"action": "maybe"})),
        rule(json!({"colour": "red"})),
        rule(json!({"modes": ["sometimes"]})),
        rule(json!({"modes": "auto"})),
        rule(json!({"rule_id": 1})),
        rule(json!({"args": {"command": {"equals": 1, "matches": "x"}}})),
        rule(json!({"args": {"command": {"matches": 1}}})),
        rule(json!({"args": {"command": {"prefix": ["git"]}}})),
        rule(json!({"args": {"command": {"starts": "git"}}})),
        rule(json!({"args": {"command": "git"}})),
        rule(json!({"args": ["command"]})),
        rule(json!({"timeout_ms": 999})),
        rule(json!({"escalate_after_ms": "soon"})),
        rule(json!({"examples": {"maybe": []}})),
        rule(json!({"examples": {"match": [{"arguments": {}}]}})),
        rule(json!({"examples": {"match": [{"function_id": ""}]}})),
        rule(json!({"examples": {"no_match": [{"function_id": "a", "args": {}}]}})),
        json!({"rule_precedence": "last_match"}),
        json!({"grant_reask_limit": -1}),
        json!({"grant_reask_limit": "three"}),
        json!({"grant_reask_limit": 1.5}),
        json!({"human_only_extra": [""]}),
        json!({"human_only_extra": "a::*"}),
        json!({"gate_priority": 9_007_199_254_740_992_i64}),
        json!({"gate_priority": -9_007_199_254_740_992_i64}),
        json!({"binding_check_interval_ms": 999}),
        json!({"release_timeout_ms": 0}),
        json!({"resolve_wait_ms": -1}),
        json!({"links": {"secret": "short", "public_base_url": "https://a.example"}}),
        json!({"links": {"secret": SECRET}}),
        json!({"links": {"public_base_url": "https://a.example"}}),
        json!({"links": {"secret": SECRET, "public_base_url": "ftp://a.example"}}),
        json!({"links": {"secret": SECRET, "public_base_url": "https://a", "inbox_token": ""}}),
        json!({"links": {"secret": SECRET, "public_base_url": "https://a", "extra": 1}}),
        json!({"links": "on"}),
        json!({"reviewer": {}}),
        json!({"reviewer": {"function_id": ""}}),
        json!({"reviewer": {"function_id": " review::call"}}),
        json!({"reviewer": {"function_id": "review::call "}}),
        json!({"reviewer": {"function_id": "r", "modes": ["sometimes"]}}),
        json!({"reviewer": {"function_id": "r", "timeout_ms": 0}}),
        json!({"reviewer": {"function_id": "r", "max_consecutive_denials": -1}}),
        json!({"reviewer": {"function_id": "r", "max_denials_per_50": 51}}),
        json!({"reviewer": {"function_id": "r", "colour": 1}}),
        json!({"decision_log": {}}),
        json!({"decision_log": {"function_id": ""}}),
        json!({"decision_log": {"function_id": "a", "queue": 0}}),
        json!({"decision_log": {"function_id": "a", "extra": 0}}),
        json!({"pending_timeout_ms": 5}),
        json!({"escalate_after_ms": 999}),
        json!({"pending_timeout_ms": "later"}),
        json!({"suggest_prefixes": [""]}),
        json!({"suggest_prefixes": "ls"}),
        json!({"protected_paths": [""]}),
        json!({"protected_path_functions": [1]}),
        json!({"edit_ttl_max_ms": 999}),
    ]
}

/// Values the hand-written schema refused though the worker takes them:
/// `runs`, the command constraint of contract §25.1, was missing from its
/// constraint (and its `prefix` said "starts with this text", which is no
/// longer what a prefix on a command field means).
fn the_handwritten_schema_was_wrong_about() -> Vec<Value> {
    vec![
        json!({"rules": [{"function": "shell::*", "action": "deny", "args": {"command": {"runs": "rm -rf"}}}]}),
        json!({"rules": [{"function": "x::run", "action": "allow", "args": {"script": {"runs": "make test"}}}]}),
    ]
}

#[test]
fn rule_26_2_the_configuration_schema_accepts_and_refuses_what_the_handwritten_one_did() {
    let (old, new) = (validator(&handwritten()), validator(&schema()));
    let mut wrong = Vec::new();
    for value in good() {
        if !old.is_valid(&value) {
            wrong.push(format!("the reference refuses {value}"));
        }
        if !new.is_valid(&value) {
            wrong.push(format!("refused {value}"));
        }
    }
    for value in bad() {
        if old.is_valid(&value) {
            wrong.push(format!("the reference accepts {value}"));
        }
        if new.is_valid(&value) {
            wrong.push(format!("accepted {value}"));
        }
    }
    for value in the_handwritten_schema_was_wrong_about() {
        if old.is_valid(&value) {
            wrong.push(format!("the reference accepts {value}"));
        }
        if !new.is_valid(&value) || ApprovalConfig::from_value(&value).is_err() {
            wrong.push(format!("refused {value}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn rule_26_2_every_good_value_of_the_corpus_is_one_the_worker_takes() {
    for value in good() {
        assert!(ApprovalConfig::from_value(&value).is_ok(), "{value}");
    }
}

#[test]
fn rule_9_the_golden_seed_file_fits_the_schema() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seed.yaml");
    let seed = load_seed(&path).expect("the golden seed loads");
    let errors: Vec<String> = validator(&schema())
        .iter_errors(&seed)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(validator(&handwritten()).is_valid(&seed));
}

#[test]
fn rule_25_1_the_schema_words_constraints_as_the_type_does() {
    let text = schema().to_string();
    for words in [
        crate::terms::constraint_docs::PREFIX,
        crate::terms::constraint_docs::RUNS,
    ] {
        let quoted = serde_json::to_string(words).expect("a string");
        assert!(text.contains(quoted.trim_matches('"')), "{words}");
    }
    assert!(!text.contains("starts with this text"));
}

#[test]
fn rule_26_2_the_derived_sections_state_the_limits_the_worker_checks() {
    let schema = schema();
    let reviewer = &schema["properties"]["reviewer"]["properties"];
    assert_eq!(
        reviewer["max_denials_per_50"]["maximum"].as_f64(),
        Some(f64::from(crate::config::BREAKER_WINDOW))
    );
    let ceiling = crate::config::REVIEWER_TIMEOUT_CEILING_MS;
    assert!(
        reviewer["timeout_ms"]["description"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("clamped to {ceiling} "))),
        "{}",
        reviewer["timeout_ms"]
    );
    let links = &schema["properties"]["links"]["properties"];
    assert_eq!(
        links["secret"]["minLength"].as_u64(),
        Some(crate::link_token::token::MIN_SECRET_CHARS as u64)
    );
    for section in ["links", "reviewer", "decision_log"] {
        let s = &schema["properties"][section];
        assert_eq!(s["type"], json!(["object", "null"]), "{section}");
        assert_eq!(s["additionalProperties"], json!(false), "{section}");
        assert!(
            s["title"].is_string() && s["examples"].is_array(),
            "{section}"
        );
    }
}
