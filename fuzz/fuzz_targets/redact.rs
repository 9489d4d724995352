//! Arbitrary JSON → `redact` and `redact_full`; arbitrary text →
//! `redact_text`.
//!
//! * `redact`: the input is never mutated; under a secret key every scalar
//!   is `"<redacted>"`; the output keeps every size limit (strings, entries,
//!   depth, serialized bytes) and is a fixpoint: `redact(redact(x)) ==
//!   redact(x)`.
//! * `redact_full`: at most `FULL_ARGUMENTS_CAP` bytes, the same secret-key
//!   rule, the same answer twice; when it says nothing was clipped and no
//!   limit of the excerpt can have bound, it equals the excerpt.
//! * `redact_text`: a fixpoint, and text without a finding comes back as is.
//!
//! The first byte steers: even parses the rest as JSON text, odd builds a
//! value from it (secret keys in many spellings, long strings and keys,
//! markers, many copies, deep stacks). Every string met is also run through
//! `redact_text`.

#![no_main]

use std::borrow::Cow;

use approval_gate::{redact, redact_full, redact_text, FULL_ARGUMENTS_CAP};
use approval_gate_fuzz::gen::Gen;
use approval_gate_fuzz::walk::{full_violation, json_size, redaction_violation};
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn check(v: &Value) {
    let copy = v.clone();
    let once = redact(v);
    assert!(*v == copy, "the input changed");
    if let Some(why) = redaction_violation(&once) {
        panic!("{why}");
    }
    let twice = redact(&once);
    assert!(once == twice, "not a fixpoint: {once} then {twice}");

    let full = redact_full(v);
    assert!(*v == copy, "the input changed");
    let size = json_size(&full.value);
    assert!(size <= FULL_ARGUMENTS_CAP, "whole form of {size} bytes");
    if let Some(why) = full_violation(&full.value) {
        panic!("whole form: {why}");
    }
    assert!(
        full == redact_full(v),
        "the whole form is not deterministic"
    );
    if !full.clipped && within_excerpt_limits(&once) {
        // Nothing for the two forms to differ on: no excerpt limit bound.
        assert!(
            full.value == once,
            "whole form {} vs excerpt {once}",
            full.value
        );
    }

    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => check_text(s),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, item) in map {
                    check_text(k);
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
}

/// Whether no limit of the excerpt can have bound in `once`: small, short
/// strings, few entries.
fn within_excerpt_limits(once: &Value) -> bool {
    if json_size(once) >= 16 * 1024 {
        return false;
    }
    let mut stack = vec![once];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.chars().count() > 200 => return false,
            Value::Array(items) if items.len() > 200 => return false,
            Value::Object(map) if map.len() > 200 => return false,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                if map.keys().any(|k| k.chars().count() > 200) {
                    return false;
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    true
}

fn check_text(text: &str) {
    let once = redact_text(text);
    let twice = redact_text(&once);
    assert!(
        matches!(twice, Cow::Borrowed(_)) || twice == once,
        "text not a fixpoint: {once:?} then {twice:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&steer, rest)) = data.split_first() else {
        return;
    };
    if steer % 2 == 0 {
        if let Ok(v) = serde_json::from_slice::<Value>(rest) {
            check(&v);
        } else if let Ok(text) = std::str::from_utf8(rest) {
            check_text(text);
        }
        return;
    }
    let mut u = Unstructured::new(rest);
    let mut g = Gen::new(&mut u);
    if let Ok(v) = g.value(0) {
        check(&v);
    }
});
