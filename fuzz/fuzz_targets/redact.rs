//! Arbitrary JSON → `redact`: the input is never mutated; the output holds
//! nothing but `"<redacted>"` under a secret key, keeps every size limit
//! (strings, entries, depth, serialized bytes) and is a fixpoint:
//! `redact(redact(x)) == redact(x)`.
//!
//! The first byte steers: even parses the rest as JSON text, odd builds a
//! value from it (secret keys in many spellings, long strings and keys,
//! markers, many copies, deep stacks).

#![no_main]

use approval_gate::redact;
use approval_gate_fuzz::gen::Gen;
use approval_gate_fuzz::walk::redaction_violation;
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
}

fuzz_target!(|data: &[u8]| {
    let Some((&steer, rest)) = data.split_first() else {
        return;
    };
    if steer % 2 == 0 {
        if let Ok(v) = serde_json::from_slice::<Value>(rest) {
            check(&v);
        }
        return;
    }
    let mut u = Unstructured::new(rest);
    let mut g = Gen::new(&mut u);
    if let Ok(v) = g.value(0) {
        check(&v);
    }
});
