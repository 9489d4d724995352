//! The secret corpus (`tests/fixtures/secrets.json`): every shape, in every
//! place a string can be, never survives; benign look-alikes pass unchanged.
//! The JSON shapes of version 3 are checked in `shapes.rs`.

use std::sync::LazyLock;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::super::detect::provider_names;
use super::super::*;
use super::walk::shell_like;
use super::{nest, s};

#[derive(Deserialize)]
pub(super) struct Corpus {
    secrets: Vec<Shape>,
    benign: Vec<String>,
    /// JSON shapes (contract §21.7).
    pub(super) values: Vec<ValueShape>,
    /// JSON look-alikes that must come out unchanged.
    pub(super) benign_values: Vec<Value>,
}

/// One secret JSON shape as an agent would send it.
#[derive(Deserialize)]
pub(super) struct ValueShape {
    pub(super) name: String,
    pub(super) value: Value,
    /// Substrings that must vanish from every string of the output.
    pub(super) secrets: Vec<String>,
    /// The redacted value, when the test pins it.
    #[serde(default)]
    pub(super) expected: Option<Value>,
}

/// One secret shape as an agent would send it.
#[derive(Deserialize)]
struct Shape {
    name: String,
    text: String,
    /// Substrings that must vanish.
    secrets: Vec<String>,
    /// The provider format exercised, if any (`providers.rs` names).
    #[serde(default)]
    provider: Option<String>,
    /// The redacted text, when it is not `text` with each secret replaced.
    #[serde(default)]
    expected: Option<String>,
}

impl Shape {
    fn expected(&self) -> String {
        self.expected.clone().unwrap_or_else(|| {
            self.secrets
                .iter()
                .fold(self.text.clone(), |t, secret| t.replace(secret, REDACTED))
        })
    }
}

pub(super) static CORPUS: LazyLock<Corpus> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../../tests/fixtures/secrets.json"))
        .expect("the corpus parses")
});

/// Whether `out` shows `secret` or the start of it.
pub(super) fn leaks(out: &str, secret: &str) -> bool {
    out.contains(secret)
        || (secret.len() >= 16 && secret.get(..12).is_some_and(|p| out.contains(p)))
}

/// Every key and string in `v`.
pub(super) fn strings_of(v: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s.as_str()),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, item) in map {
                    out.push(k.as_str());
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
    out
}

fn leak_in(v: &Value, shape: &Shape) -> Option<String> {
    for secret in &shape.secrets {
        if let Some(s) = strings_of(v).into_iter().find(|s| leaks(s, secret)) {
            return Some(format!("{}: {secret:?} survives in {s:?}", shape.name));
        }
    }
    None
}

#[test]
fn the_corpus_is_large_well_formed_and_covers_every_provider_format() {
    let corpus = &*CORPUS;
    assert!(
        corpus.secrets.len() >= 100,
        "{} shapes",
        corpus.secrets.len()
    );
    assert!(
        corpus.benign.len() >= 20,
        "{} look-alikes",
        corpus.benign.len()
    );
    let providers: Vec<&str> = provider_names().collect();
    for shape in &corpus.secrets {
        assert!(!shape.secrets.is_empty(), "{}", shape.name);
        for secret in &shape.secrets {
            assert!(shape.text.contains(secret.as_str()), "{}", shape.name);
            // The check can fail: the rest of the text does not hold it.
            assert!(!leaks(&shape.expected(), secret), "{}", shape.name);
        }
        if let Some(p) = &shape.provider {
            assert!(
                providers.contains(&p.as_str()),
                "{}: unknown {p}",
                shape.name
            );
        }
    }
    for p in providers {
        assert!(
            corpus
                .secrets
                .iter()
                .any(|s| s.provider.as_deref() == Some(p)),
            "no corpus shape for provider format {p}"
        );
    }
}

#[test]
fn every_secret_vanishes_from_free_text_and_nothing_else_changes() {
    for shape in &CORPUS.secrets {
        let out = redact_text(&shape.text);
        assert_eq!(out, shape.expected(), "{}", shape.name);
        assert_eq!(redact_text(&out), out, "{}: second pass", shape.name);
    }
}

#[test]
fn every_secret_vanishes_wherever_it_sits_in_a_value() {
    for shape in &CORPUS.secrets {
        let text = Value::String(shape.text.clone());
        let mut neutral_key = Map::new();
        neutral_key.insert(shape.text.clone(), json!(1));
        let placements = [
            ("as the value", text.clone()),
            ("under a neutral key", json!({"command": text})),
            ("in an array", json!(["ls", text, 3])),
            ("nested", json!({"a": [{"b": {"c": [null, text]}}]})),
            ("deep", nest(40, json!({"cmd": text}))),
            ("as a key", Value::Object(neutral_key)),
        ];
        for (place, input) in placements {
            let out = redact(&input);
            assert_eq!(leak_in(&out, shape), None, "{place}");
            assert_eq!(redact(&out), out, "{}: {place}: second pass", shape.name);
        }
        // A string short enough not to be clipped is exactly the free-text
        // result.
        let expected = shape.expected();
        if expected.chars().count() <= MAX_STRING_CHARS {
            assert_eq!(redact(&text), json!(expected), "{}", shape.name);
        }
        // Under a secret key, the whole value goes.
        for key in ["password", "authToken", "X-Api-Key", "client.secret"] {
            let out = redact(&json!({ key: text, "n": [text] }));
            assert_eq!(out[key], json!(REDACTED), "{}: {key}", shape.name);
            assert_eq!(leak_in(&out, shape), None, "{key}");
        }
    }
}

#[test]
fn no_secret_is_half_shown_when_it_straddles_the_cut() {
    for shape in &CORPUS.secrets {
        for secret in &shape.secrets {
            let at = shape.text.find(secret.as_str()).expect("in the text");
            let before = shape.text[..at].chars().count();
            let len = secret.chars().count();
            for visible in [1, len / 2, len.saturating_sub(1)] {
                // `visible` characters of the secret fall before code point 256.
                let Some(pad) = MAX_STRING_CHARS.checked_sub(before + visible + 1) else {
                    continue;
                };
                let text = format!("{} {}", s(pad, 'x'), shape.text);
                let out = redact(&json!(text));
                assert_eq!(leak_in(&out, shape), None, "visible {visible}");
                let out = out.as_str().expect("a string");
                let shown = out.strip_suffix(CLIP_MARK).unwrap_or(out);
                for n in 3..=visible.min(len) {
                    let prefix: String = secret.chars().take(n).collect();
                    assert!(
                        !shown.ends_with(&prefix),
                        "{}: {visible} visible: {out:?}",
                        shape.name
                    );
                }
                assert_eq!(
                    redact(&json!(out)),
                    json!(out),
                    "{}: second pass",
                    shape.name
                );
            }
        }
    }
}

#[test]
fn benign_look_alikes_pass_unchanged() {
    for text in &CORPUS.benign {
        assert!(
            matches!(redact_text(text), Cow::Borrowed(_)),
            "{text:?} became {:?}",
            redact_text(text)
        );
        let value = json!({"command": text, "args": [text]});
        assert_eq!(redact(&value), value, "{text}");
    }
}

// ---- properties ----

fn shape_index() -> impl Strategy<Value = usize> {
    0..CORPUS.secrets.len()
}

/// Filler that cannot glue onto a secret: separated from it by `sep`.
fn filler() -> impl Strategy<Value = String> {
    "[a-z0-9 .,:=/_-]{0,300}"
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![" ", "\n", "; ", " && ", "\t"])
}

fn neutral_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,20}".prop_map(Value::String),
    ]
}

/// `leaf` placed at a random spot of a random tree of neutral keys.
pub(super) fn embedded(leaf: Value) -> impl Strategy<Value = Value> {
    let step = (
        any::<bool>(),
        "[a-z]{1,8}",
        prop::collection::vec(neutral_leaf(), 0..4),
    );
    prop::collection::vec(step, 0..6).prop_map(move |steps| {
        steps
            .into_iter()
            .fold(leaf.clone(), |v, (as_array, key, siblings)| {
                if as_array {
                    let mut items = siblings;
                    let at = items.len() / 2;
                    items.insert(at, v);
                    Value::Array(items)
                } else {
                    let mut map: Map<String, Value> = siblings
                        .into_iter()
                        .enumerate()
                        .map(|(i, s)| (format!("n{i}"), s))
                        .collect();
                    map.insert(key, v);
                    Value::Object(map)
                }
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_secret_anywhere_in_random_text_never_survives(
        i in shape_index(),
        prefix in filler(),
        sep1 in separator(),
        sep2 in separator(),
        suffix in filler(),
    ) {
        let shape = &CORPUS.secrets[i];
        let text = format!("{prefix}{sep1}{}{sep2}{suffix}", shape.text);
        let out = redact_text(&text);
        for secret in &shape.secrets {
            prop_assert!(!leaks(&out, secret), "{}: {:?}", shape.name, out);
        }
        prop_assert_eq!(redact_text(&out), out.clone());
        let value = redact(&json!(text));
        prop_assert_eq!(leak_in(&value, shape), None);
        prop_assert_eq!(redact(&value), value);
    }

    #[test]
    fn a_secret_anywhere_in_random_json_never_survives(
        (i, v) in shape_index().prop_flat_map(|i| {
            let text = CORPUS.secrets[i].text.clone();
            (Just(i), (filler(), separator()).prop_flat_map(move |(prefix, sep)| {
                embedded(Value::String(format!("{prefix}{sep}{text}")))
            }))
        }),
    ) {
        let shape = &CORPUS.secrets[i];
        let out = redact(&v);
        prop_assert_eq!(leak_in(&out, shape), None);
        prop_assert_eq!(redact(&out), out);
    }

    #[test]
    fn a_secret_under_a_secret_key_anywhere_is_redacted_whole(
        (i, v) in shape_index().prop_flat_map(|i| {
            let text = CORPUS.secrets[i].text.clone();
            (Just(i), prop::sample::select(SECRET_NAMES.to_vec()).prop_flat_map(move |name| {
                let mut map = Map::new();
                map.insert(name.replace(' ', "_"), json!({"inner": [text.clone()]}));
                embedded(Value::Object(map))
            }))
        }),
    ) {
        let shape = &CORPUS.secrets[i];
        let out = redact(&v);
        prop_assert_eq!(leak_in(&out, shape), None);
        prop_assert!(strings_of(&out).contains(&REDACTED));
    }

    /// Among hostile text (quotes, escapes, substitutions, headers, flags
    /// and other secrets in every order) a shape's secrets never survive.
    #[test]
    fn a_secret_among_hostile_text_never_survives(
        i in shape_index(),
        before in shell_like(),
        after in shell_like(),
    ) {
        let shape = &CORPUS.secrets[i];
        // The pieces hold secrets of their own; a shape sharing one is
        // left out, so a hit is this shape's.
        let noise = format!("{before} {after}");
        prop_assume!(shape.secrets.iter().all(|s| !leaks(&noise, s) && !noise.contains(&s[..s.len().min(4)])));
        let text = format!("{before} {} {after}", shape.text);
        let out = redact_text(&text);
        for secret in &shape.secrets {
            prop_assert!(!leaks(&out, secret), "{}: {:?}", shape.name, out);
        }
        let value = redact(&json!({ "command": text }));
        prop_assert_eq!(leak_in(&value, shape), None);
    }

    #[test]
    fn benign_text_in_random_prose_is_unchanged(
        i in 0..CORPUS.benign.len(),
        prefix in "[a-z ]{0,40}",
        suffix in "[a-z ]{0,40}",
    ) {
        let text = format!("{prefix} {} {suffix}", CORPUS.benign[i]);
        prop_assert!(matches!(redact_text(&text), Cow::Borrowed(_)), "{:?}", redact_text(&text));
        if text.chars().count() <= MAX_STRING_CHARS {
            let v = json!({"note": text});
            prop_assert_eq!(redact(&v), v);
        }
    }
}

/// Every shape of contract §26.7 is in the corpus, so the tests above run
/// it, with at least one look-alike that must stay readable.
#[test]
fn rule_26_7_the_corpus_holds_every_version_4_shape_and_look_alikes() {
    let texts: Vec<&str> = CORPUS.secrets.iter().map(|s| s.text.as_str()).collect();
    let has = |needle: &str| texts.iter().any(|t| t.contains(needle));
    for shape in [
        "redis-cli -h cache.internal --pass ",
        "--askpass",
        "-a '",
        "aws configure set aws_secret_access_key",
        "&sig=",
        "OTP=",
        "mfa_code",
        "pin: ",
        "--passcode",
        "htpasswd -b",
        "--password-stdin",
    ] {
        assert!(has(shape), "no corpus shape with {shape:?}");
    }
    for look_alike in [
        "x264 --pass 1",
        "aws configure set region",
        "sig=abc12",
        "htpasswd -c",
        "wc -w <<<",
        "pin_memory",
    ] {
        assert!(
            CORPUS.benign.iter().any(|b| b.contains(look_alike)),
            "no look-alike with {look_alike:?}"
        );
    }
}
