//! The whole redacted arguments (contract §21.6): what `get-pending`'s
//! `arguments` and the link page show, capped at [`FULL_ARGUMENTS_CAP`]
//! bytes of compact JSON, the cap stated by [`Full::clipped`].
//!
//! # How it is made
//!
//! 1. **Whole.** The arguments are redacted as for the excerpt (the same
//!    detectors, secret keys, pairs and argv rules), but no string is cut at
//!    256 code points and no container at 256 entries. Only the depth limit
//!    stays ([`MAX_DEPTH`](super::MAX_DEPTH)), and a string's detectors read
//!    at most the cap plus [`DETECT_WINDOW_BYTES`](super::DETECT_WINDOW_BYTES)
//!    (what lies further could never be shown). If that fits the cap, it is
//!    the answer.
//! 2. **One level for every string.** Otherwise every string (values and
//!    keys) longer than a level `L` bytes of JSON text is cut to at most `L`
//!    and marked `…[+N chars]`, `L` being the largest level at which the
//!    whole fits (a string at most 32 bytes over `L`, the longest mark, is
//!    kept whole, since cutting it would save nothing). The level is
//!    computed, not searched by trial: the size at level `L` is the size of
//!    everything but the strings' insides, plus, for each string, the
//!    smaller of its length and `L + 32`. Short fields (a path, a flag) stay
//!    whole while one long field (a file's content) gives up what does not
//!    fit.
//! 3. **Bounded, when no level of 256 bytes or more fits** (thousands of
//!    entries, huge keys): the excerpt's walk, strings cut at 256 code points
//!    and entries dropped, counted in `"<+N more>"` / `"<truncated>": N`,
//!    once the output reaches the cap less 8 KiB — the room the last entry
//!    and the markers may take, so the result still fits.
//!
//! The same input always gives the same output. `clipped` is true whenever
//! anything of the arguments is missing from `value`: a string cut, an
//! entry dropped (or lost to a key redacted to another key's text), a
//! container too deep.

use std::io;

use serde_json::Value;

use super::walk::{escaped_len, Limit, Walk, MARK_MAX_BYTES};
use super::{MAX_OUTPUT_BYTES, MAX_STRING_CHARS, OUTPUT_BUDGET};

/// The cap on the whole redacted arguments: bytes of compact JSON.
pub const FULL_ARGUMENTS_CAP: usize = 64 * 1024;

/// The lowest level of step 2 (bytes): below it, step 3.
const LOWEST_LEVEL: usize = MAX_STRING_CHARS;

/// The whole redacted arguments and whether the cap (or the depth limit)
/// left anything out; stored as is, `{value, clipped}`, in
/// `approval_arguments`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Full {
    /// At most [`FULL_ARGUMENTS_CAP`] bytes of compact JSON.
    pub value: Value,
    /// Whether anything of the arguments is missing from `value`.
    pub clipped: bool,
    /// Whether redaction hid anything inside a command field (contract
    /// §25.8): the reviewer never allows such a call. Not stored: the
    /// reviewer reads it when it redacts the call itself.
    #[serde(skip)]
    pub hidden_command: bool,
}

/// The whole redacted arguments (see the module docs).
pub fn redact_full(value: &Value) -> Full {
    redact_full_of("", value)
}

/// The whole redacted arguments of a call to `function_id`: inside a value
/// that can run, whole words are hidden (contract §25.8, `command.rs`).
pub fn redact_call_full(function_id: &str, value: &Value) -> Full {
    redact_full_of(function_id, value)
}

fn redact_full_of(function_id: &str, value: &Value) -> Full {
    #[cfg(test)]
    super::calls::count();
    let mut walk = Walk::new(Limit::Bytes(FULL_ARGUMENTS_CAP), None, None).of_call(function_id);
    let whole = walk.run(value);
    let hidden_command = walk.hidden_command;
    let size = json_len(&whole);
    if size <= FULL_ARGUMENTS_CAP {
        return Full {
            value: whole,
            clipped: walk.clipped,
            hidden_command,
        };
    }
    let mut lengths = Vec::new();
    string_lengths(&whole, &mut lengths);
    if let Some(level) = level_that_fits(size, &lengths) {
        let out = Walk::new(Limit::Bytes(level), None, None)
            .of_call(function_id)
            .over_redacted()
            .run(&whole);
        if json_len(&out) <= FULL_ARGUMENTS_CAP {
            return Full {
                value: out,
                clipped: true,
                hidden_command,
            };
        }
    }
    // The excerpt's bound: its budget plus this much room.
    let room = MAX_OUTPUT_BYTES - OUTPUT_BUDGET;
    let mut budget = FULL_ARGUMENTS_CAP - room;
    loop {
        let out = Walk::new(Limit::Chars(MAX_STRING_CHARS), None, Some(budget))
            .of_call(function_id)
            .run(&whole);
        // Always true by that bound; halving is a guard that ends at 0.
        if json_len(&out) <= FULL_ARGUMENTS_CAP || budget == 0 {
            return Full {
                value: out,
                clipped: true,
                hidden_command,
            };
        }
        budget /= 2;
    }
}

/// The largest level at which the whole fits, if one of at least
/// [`LOWEST_LEVEL`] does; `size` is the whole form's size and `lengths` the
/// JSON text lengths of its strings' insides.
fn level_that_fits(size: usize, lengths: &[usize]) -> Option<usize> {
    let inside: usize = lengths.iter().sum();
    let outside = size - inside;
    let size_at = |level: usize| -> usize {
        lengths
            .iter()
            .map(|&n| n.min(level + MARK_MAX_BYTES))
            .fold(outside, usize::saturating_add)
    };
    let mut fits = LOWEST_LEVEL;
    if size_at(fits) > FULL_ARGUMENTS_CAP {
        return None;
    }
    // `size_at` grows with the level; at the longest string it is `size`,
    // over the cap.
    let mut too_big = lengths.iter().copied().max().unwrap_or(0);
    while fits + 1 < too_big {
        let mid = fits + (too_big - fits) / 2;
        if size_at(mid) <= FULL_ARGUMENTS_CAP {
            fits = mid;
        } else {
            too_big = mid;
        }
    }
    Some(fits)
}

/// The JSON text lengths of the insides of every string and key in `v`.
fn string_lengths(v: &Value, out: &mut Vec<usize>) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(escaped_len(s)),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, item) in map {
                    out.push(escaped_len(k));
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
}

/// The length of `v`'s compact JSON.
pub(super) fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, v) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}
