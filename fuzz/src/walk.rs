//! Iterative walks over JSON values: the redaction invariants, and sizes.

use approval_gate::{
    is_secret_key, MAX_CLIPPED_CHARS, MAX_DEPTH, MAX_ENTRIES, MAX_OUTPUT_BYTES, REDACTED,
};
use serde_json::Value;

/// Compact JSON size of `v`.
pub fn json_size(v: &Value) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

/// What a container nested too deep becomes.
const MAX_DEPTH_MARK: &str = "<max-depth>";

/// Every invariant a redacted value keeps, or the first one broken:
///
/// * under a secret key, at any depth, every scalar is `"<redacted>"` (the
///   walk's own markers aside: an array's trailing `"<+N more>"`, an
///   object's `"<truncated>": N`, `"<max-depth>"`);
/// * strings and keys have at most 256 code points plus the clip mark;
/// * containers have at most 256 entries plus a marker, and sit at depth < 64;
/// * the serialized size is at most [`MAX_OUTPUT_BYTES`].
pub fn redaction_violation(out: &Value) -> Option<String> {
    if let Some(why) = shape_violation(out, MAX_ENTRIES + 1) {
        return Some(why);
    }
    let size = json_size(out);
    if size > MAX_OUTPUT_BYTES {
        return Some(format!(
            "{size} bytes serialized (bound {MAX_OUTPUT_BYTES})"
        ));
    }
    None
}

/// The invariants of the whole redacted arguments (no string or entry
/// limit): secret keys' scalars and the depth.
pub fn full_violation(out: &Value) -> Option<String> {
    shape_violation(out, usize::MAX)
}

fn shape_violation(out: &Value, max_entries: usize) -> Option<String> {
    let string_limit = if max_entries == usize::MAX {
        usize::MAX
    } else {
        MAX_CLIPPED_CHARS
    };
    let mut stack: Vec<(&Value, usize, bool)> = vec![(out, 0, false)];
    while let Some((v, depth, secret)) = stack.pop() {
        match v {
            Value::String(s) => {
                let n = s.chars().count();
                if n > string_limit {
                    return Some(format!("a string of {n} code points at depth {depth}"));
                }
                if secret && s != REDACTED && s != MAX_DEPTH_MARK {
                    return Some(format!("{s:?} under a secret key"));
                }
            }
            Value::Array(items) => {
                if depth >= MAX_DEPTH {
                    return Some(format!("an array at depth {depth}"));
                }
                if items.len() > max_entries {
                    return Some(format!("an array of {} entries", items.len()));
                }
                let marker = items
                    .last()
                    .and_then(Value::as_str)
                    .is_some_and(|m| m.starts_with("<+") && m.ends_with(" more>"));
                for (i, item) in items.iter().enumerate() {
                    let is_marker = marker && i + 1 == items.len();
                    stack.push((item, depth + 1, secret && !is_marker));
                }
            }
            Value::Object(map) => {
                if depth >= MAX_DEPTH {
                    return Some(format!("an object at depth {depth}"));
                }
                if map.len() > max_entries {
                    return Some(format!("an object of {} entries", map.len()));
                }
                for (k, item) in map {
                    let n = k.chars().count();
                    if n > string_limit {
                        return Some(format!("a key of {n} code points"));
                    }
                    let is_marker = k == "<truncated>" && item.is_u64();
                    let secret = (secret || is_secret_key(k)) && !is_marker;
                    stack.push((item, depth + 1, secret));
                }
            }
            _ if secret => return Some(format!("{v} under a secret key")),
            _ => {}
        }
    }
    None
}
