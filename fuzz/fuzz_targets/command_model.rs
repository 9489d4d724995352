//! Any input up to 64 KiB, read as each of the three sources of a command
//! field (bash source, an argv, shell-words text): `read` never panics or
//! crashes (the bash grammar's scanner is C), stays within its limits, and
//! an incomplete model always says why.
//!
//! The first byte steers: 0–1 bash source, 2 shell-words text, 3 an argv
//! split on NUL bytes, anything else all three from the same text.

#![no_main]

use approval_gate::{read, Limits, Model, OpaqueWhy, Source};
use libfuzzer_sys::fuzz_target;

fn check(model: &Model, limits: &Limits) {
    assert!(model.commands.len() <= limits.max_commands);
    assert!(model.opaque.len() <= 64);
    if !model.complete {
        assert!(model.is_opaque(), "incomplete without a reason");
    }
    for opaque in &model.opaque {
        if matches!(
            opaque.why,
            OpaqueWhy::TooDeep | OpaqueWhy::TooLong | OpaqueWhy::TooMany | OpaqueWhy::Budget
        ) {
            // A limit is never reported on a model that claims to be whole.
            assert!(!model.complete);
        }
    }
    let _ = model.programs();
    let _ = model.why();
}

fuzz_target!(|data: &[u8]| {
    let Some((&steer, rest)) = data.split_first() else {
        return;
    };
    let rest = &rest[..rest.len().min(65_536)];
    let text = String::from_utf8_lossy(rest);
    let limits = Limits::default();
    let argv = || -> Vec<String> { text.split('\0').map(str::to_string).collect() };
    match steer {
        0 | 1 => check(&read(Source::Bash(&text), &limits), &limits),
        2 => check(&read(Source::Words(&text), &limits), &limits),
        3 => check(&read(Source::Argv(&argv()), &limits), &limits),
        _ => {
            check(&read(Source::Bash(&text), &limits), &limits);
            check(&read(Source::Words(&text), &limits), &limits);
            check(&read(Source::Argv(&argv()), &limits), &limits);
        }
    }
});
