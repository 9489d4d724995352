//! Taking apart JSON values of any depth without recursion.
//!
//! `serde_json::Value`'s own `Drop` recurses once per nesting level. Over the
//! wire a value cannot be deeper than the SDK's parser allows, but a value
//! built in-process can be; the hooks drop the arguments they were given
//! through [`dismantle`] so no input depth can exhaust the stack.

use serde_json::Value;

/// Drops `value` iteratively.
pub(crate) fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_very_deep_value_is_dropped_without_overflow() {
        let mut v = Value::Null;
        for _ in 0..200_000 {
            v = Value::Array(vec![v]);
        }
        dismantle(v);
    }
}
