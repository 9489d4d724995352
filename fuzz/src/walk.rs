//! Iterative walks over JSON values: the redaction invariants, and sizes.

use approval_gate::{
    is_secret_key, MAX_DEPTH, MAX_ENTRIES, MAX_OUTPUT_BYTES, MAX_STRING_CHARS, REDACTED,
};
use serde_json::Value;

/// Compact JSON size of `v`.
pub fn json_size(v: &Value) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

/// Every invariant a redacted value keeps, or the first one broken:
///
/// * a value under a secret key is exactly `"<redacted>"`;
/// * strings and keys have at most 256 code points plus the clip mark;
/// * containers have at most 256 entries plus a marker, and sit at depth < 64;
/// * the serialized size is at most [`MAX_OUTPUT_BYTES`].
pub fn redaction_violation(out: &Value) -> Option<String> {
    let mut stack: Vec<(&Value, usize)> = vec![(out, 0)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::String(s) => {
                let n = s.chars().count();
                if n > MAX_STRING_CHARS + 1 {
                    return Some(format!("a string of {n} code points at depth {depth}"));
                }
            }
            Value::Array(items) => {
                if depth >= MAX_DEPTH {
                    return Some(format!("an array at depth {depth}"));
                }
                if items.len() > MAX_ENTRIES + 1 {
                    return Some(format!("an array of {} entries", items.len()));
                }
                stack.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Object(map) => {
                if depth >= MAX_DEPTH {
                    return Some(format!("an object at depth {depth}"));
                }
                if map.len() > MAX_ENTRIES + 1 {
                    return Some(format!("an object of {} entries", map.len()));
                }
                for (k, item) in map {
                    let n = k.chars().count();
                    if n > MAX_STRING_CHARS + 1 {
                        return Some(format!("a key of {n} code points"));
                    }
                    if is_secret_key(k) && item.as_str() != Some(REDACTED) {
                        return Some(format!("secret key {k:?} holds {item}"));
                    }
                    stack.push((item, depth + 1));
                }
            }
            _ => {}
        }
    }
    let size = json_size(out);
    if size > MAX_OUTPUT_BYTES {
        return Some(format!(
            "{size} bytes serialized (bound {MAX_OUTPUT_BYTES})"
        ));
    }
    None
}
