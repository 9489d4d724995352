//! PURE: whether a value carries what redaction writes in place of what it
//! hid — the `<redacted>` placeholder (whole or inside a string), the
//! `<max-depth>` mark, the `<truncated>` key, a clip mark `…[+N chars]`.
//!
//! Why: an edit of a held call (contract §28) starts from what the inbox
//! shows, and that is redacted. An edited call that still holds a mark
//! would run with the mark instead of the value it hid, so it is refused;
//! and a surface offers the edit only for a call whose stored arguments
//! hold none.

use serde_json::Value;

use super::{CLIP_MARK, MAX_DEPTH_MARK, REDACTED, TRUNCATED_KEY};

/// The first mark found in `value` (keys and string values, at any depth),
/// named for a refusal; `None` when it holds none. Iterative: no depth of
/// input exhausts the stack.
pub(crate) fn mark_in(value: &Value) -> Option<&'static str> {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => {
                if let Some(found) = mark_in_text(s) {
                    return Some(found);
                }
            }
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => {
                for (key, item) in map {
                    if key == TRUNCATED_KEY {
                        return Some(TRUNCATED_KEY);
                    }
                    if let Some(found) = mark_in_text(key) {
                        return Some(found);
                    }
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
    None
}

/// The mark one string holds, if any.
fn mark_in_text(s: &str) -> Option<&'static str> {
    if s.contains(REDACTED) {
        return Some(REDACTED);
    }
    if s.contains(MAX_DEPTH_MARK) {
        return Some(MAX_DEPTH_MARK);
    }
    has_clip_mark(s).then_some("a clip mark (…[+N chars])")
}

/// Whether `s` holds `…[+` digits ` chars]` anywhere (a clipped string
/// pasted into a longer one still hides what was cut).
fn has_clip_mark(s: &str) -> bool {
    let opener = format!("{CLIP_MARK}[+");
    let mut rest = s;
    while let Some(at) = rest.find(&opener) {
        let after = &rest[at + opener.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(" chars]") {
            return true;
        }
        rest = after;
    }
    false
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::redact::redact;

    #[test]
    fn rule_28_1_what_redaction_writes_is_found_at_any_depth() {
        let shown = redact(&json!({
            "api_key": "sk-live-0123456789abcdef0123456789abcdef",
        }));
        assert_eq!(mark_in(&shown), Some(REDACTED));
        let inside = json!({"cmd": "curl -H 'Authorization: Bearer <redacted>' x"});
        assert_eq!(mark_in(&inside), Some(REDACTED));
        let clipped = redact(&json!({"long": "x".repeat(2_000)}));
        assert_eq!(mark_in(&clipped), Some("a clip mark (…[+N chars])"));
        let pasted = json!({"a": [{"b": format!("head {} tail", "xx…[+17 chars]")}]});
        assert_eq!(mark_in(&pasted), Some("a clip mark (…[+N chars])"));
        assert_eq!(mark_in(&json!({"<truncated>": 3})), Some(TRUNCATED_KEY));
        assert_eq!(mark_in(&json!({"k": "<max-depth>"})), Some(MAX_DEPTH_MARK));
        assert_eq!(mark_in(&json!({"<redacted>": 1})), Some(REDACTED));
    }

    #[test]
    fn rule_28_1_ordinary_values_hold_no_mark() {
        for value in [
            json!({"path": "/tmp/x", "n": 3, "flags": ["-l", "-a"]}),
            json!({"text": "an ellipsis… and [+3] and chars]"}),
            json!({"text": "…[+ chars]"}),
            json!({"text": "<redact>"}),
            json!(null),
        ] {
            assert_eq!(mark_in(&value), None, "{value}");
        }
    }
}
