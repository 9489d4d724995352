//! Shared pieces of the fuzz targets: JSON values and policy texts built from
//! fuzz input, and the output checks the targets run. The naive reference
//! of the decision ladder they compare [`approval_gate::decide`] with is the
//! workspace crate `approval-gate-reference` (`../reference`), the same
//! oracle the worker's property tests use.

pub mod gen;
pub mod walk;

use serde_json::Value;

/// Drops a value of any depth without recursion (the targets build values
/// deeper than `serde_json`'s own `Drop` can take).
pub fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// `n` nested one-element arrays around `leaf`, built without recursion.
pub fn nest_arrays(n: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for _ in 0..n {
        v = Value::Array(vec![v]);
    }
    v
}
