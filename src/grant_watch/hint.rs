//! Recognising a shell/coder jail rejection and its `grant_hint=` tail
//! (`architecture/contract.md` § The grant watch). Pure.
//!
//! # Format
//!
//! The rejection reaches post-trigger as
//! `{ is_error: true, details: { error: { code: "S215", message: "path escapes … /x grant_hint={\"v\":1,\"dir\":\"/a/b\",\"path\":\"/a/b/x\",\"code\":\"S215\"}" } }, content: [{type, text}] }`.
//! Some coder versions send a generic code whose message is the JSON
//! `{"code":"C215","message":"…"}`.

use std::path::{Component, Path};

use serde_json::Value;

use crate::inbox::GrantRequest;

/// The jail-scope error codes.
pub const JAIL_CODES: &[&str] = &["S215", "S220", "C215", "C218"];
const MARKER: &str = "grant_hint=";

/// The parsed hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantHint {
    /// The nearest existing directory to grant.
    pub dir: String,
    /// The path as the call gave it.
    pub path: String,
}

/// `(code, message)` of a jail-scope rejection, including the generic-code
/// form whose message is a JSON object with a jail code.
pub fn jail_error(result: &Value) -> Option<(String, String)> {
    if result.get("is_error").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let error = result.get("details")?.get("error")?;
    let code = error.get("code")?.as_str()?;
    let message = error.get("message")?.as_str()?;
    if JAIL_CODES.contains(&code) {
        return Some((code.to_string(), message.to_string()));
    }
    let inner: Value = serde_json::from_str(message.trim()).ok()?;
    let inner_code = inner.get("code")?.as_str()?;
    let inner_message = inner.get("message")?.as_str()?;
    JAIL_CODES
        .contains(&inner_code)
        .then(|| (inner_code.to_string(), inner_message.to_string()))
}

/// The hint after the last `grant_hint=` of `text`: JSON to the end of the
/// string (trailing text = no hint), `v` = 1, `dir` absolute, non-empty and
/// free of `.`/`..` components.
pub fn find_hint(text: &str) -> Option<GrantHint> {
    let at = text.rfind(MARKER)?;
    let tail = text[at + MARKER.len()..].trim();
    let hint: Value = serde_json::from_str(tail).ok()?;
    if hint.get("v").and_then(Value::as_u64) != Some(1) {
        return None;
    }
    let dir = hint.get("dir")?.as_str()?;
    if !is_clean_absolute(dir) {
        return None;
    }
    let path = hint
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Some(GrantHint {
        dir: dir.to_string(),
        path,
    })
}

/// Absolute, and no segment is `.` or `..`. The segments are read from the
/// text: `Path::components` drops `.` (`/a/./b` and `/a/.` read as `/a/b`
/// and `/a`), so it cannot tell a clean path from one that only normalises
/// to one.
fn is_clean_absolute(dir: &str) -> bool {
    let p = Path::new(dir);
    !dir.is_empty()
        && p.is_absolute()
        && dir.split('/').all(|seg| seg != "." && seg != "..")
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The grant request of a post-trigger result, if it is a jail rejection with
/// a usable hint (in the error message, else in the first text block).
pub fn recognise(result: &Value) -> Option<GrantRequest> {
    let (code, message) = jail_error(result)?;
    let hint = find_hint(&message).or_else(|| {
        let first = result.get("content")?.as_array()?.first()?;
        find_hint(first.get("text")?.as_str()?)
    })?;
    Some(GrantRequest {
        dir: hint.dir,
        offending_path: hint.path,
        error_code: code,
    })
}

pub use crate::folders::contains;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tail(dir: &str, path: &str, code: &str) -> String {
        format!(
            " grant_hint={}",
            json!({"v": 1, "dir": dir, "path": path, "code": code})
        )
    }

    fn rejection(code: &str, message: &str) -> Value {
        json!({"function_call_id": "c", "function_id": "shell::run", "is_error": true,
               "content": [{"type": "text", "text": message}],
               "details": {"error": {"code": code, "message": message}}})
    }

    #[test]
    fn every_jail_code_is_recognised() {
        for code in JAIL_CODES {
            let msg = format!(
                "path escapes the fs jail roots [/w]: /a/b/x{}",
                tail("/a/b", "/a/b/x", code)
            );
            let g = recognise(&rejection(code, &msg)).unwrap();
            assert_eq!(
                g,
                GrantRequest {
                    dir: "/a/b".into(),
                    offending_path: "/a/b/x".into(),
                    error_code: code.to_string()
                }
            );
        }
    }

    #[test]
    fn other_codes_and_successes_are_not() {
        let msg = format!("nope{}", tail("/a", "/a/x", "S215"));
        assert!(recognise(&rejection("S216", &msg)).is_none());
        let mut ok = rejection("S215", &msg);
        ok["is_error"] = json!(false);
        assert!(recognise(&ok).is_none());
        let policy = json!({"is_error": true, "details": {"error": "policy_denied"}});
        assert!(recognise(&policy).is_none());
    }

    #[test]
    fn generic_code_with_json_message() {
        let inner = format!(
            "path is outside the session directory /w and outside every allowed root: /d/x. …{}",
            tail("/d", "/d/x", "C215")
        );
        let msg = json!({"code": "C215", "message": inner}).to_string();
        let g = recognise(&rejection("E000", &msg)).unwrap();
        assert_eq!(g.error_code, "C215");
        assert_eq!(g.dir, "/d");
    }

    #[test]
    fn last_hint_wins_and_trailing_text_kills_it() {
        let msg = format!(
            "a{} b{}",
            tail("/one", "/one/x", "S215"),
            tail("/two", "/two/y", "S215")
        );
        assert_eq!(find_hint(&msg).unwrap().dir, "/two");
        let trailing = format!("x{} and more", tail("/a", "/a/x", "S215"));
        assert!(find_hint(&trailing).is_none());
    }

    #[test]
    fn hint_fields_are_checked() {
        assert!(find_hint(r#"grant_hint={"v":2,"dir":"/a","path":"/a/x"}"#).is_none());
        assert!(find_hint(r#"grant_hint={"v":1,"dir":"","path":"/a/x"}"#).is_none());
        assert!(find_hint(r#"grant_hint={"v":1,"dir":"rel/a","path":"x"}"#).is_none());
        assert!(find_hint(r#"grant_hint={"v":1,"dir":"/a/../etc","path":"x"}"#).is_none());
        for dot in ["/a/./b", "/a/.", "/.", "///.", "./a", "/a/..", "/.."] {
            let text = format!(r#"grant_hint={{"v":1,"dir":"{dot}","path":"x"}}"#);
            assert!(find_hint(&text).is_none(), "{dot}");
        }
        for clean in ["/", "/a", "//a//b/", "/a/.b", "/a/..b", "/a/b.", "/..."] {
            let text = format!(r#"grant_hint={{"v":1,"dir":"{clean}","path":"x"}}"#);
            assert_eq!(find_hint(&text).map(|h| h.dir), Some(clean.to_owned()));
        }
        assert!(find_hint(r#"grant_hint={"v":1,"path":"x"}"#).is_none());
        assert!(find_hint(r#"grant_hint=not json"#).is_none());
        assert!(find_hint("no hint at all").is_none());
        let h = find_hint(r#"grant_hint={"v":1,"dir":"/a","path":"/a/x","extra":true}  "#).unwrap();
        assert_eq!(h.dir, "/a");
    }

    #[test]
    fn hint_from_first_text_block_when_message_has_none() {
        let text = format!("S215 path escapes{}", tail("/t", "/t/x", "S215"));
        let result = json!({"is_error": true, "content": [{"type": "text", "text": text}],
                            "details": {"error": {"code": "S215", "message": "path escapes"}}});
        assert_eq!(recognise(&result).unwrap().dir, "/t");
    }

    #[test]
    fn containment_is_by_components() {
        assert!(contains("/a/b", "/a/b"));
        assert!(contains("/a/b", "/a/b/c"));
        assert!(contains("/a/b/", "/a/b/c"));
        assert!(!contains("/a/b", "/a/bc"));
        assert!(!contains("/a/b/c", "/a/b"));
        assert!(!contains("", "/a"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*", code in "[A-Z][0-9]{3}") {
            let _ = find_hint(&s);
            let _ = recognise(&rejection(&code, &s));
            let _ = contains(&s, &s);
        }
    }
}
