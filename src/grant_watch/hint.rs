//! Recognising a shell/coder jail rejection and its tail
//! (`architecture/contract.md` § The grant watch, § Two harness
//! generations). Pure.
//!
//! # Format
//!
//! The rejection reaches post-trigger as
//! `{ is_error: true, details: { error: { code: "S215", message: "path escapes … /x grant_hint={\"v\":1,\"dir\":\"/a/b\",\"path\":\"/a/b/x\",\"code\":\"S215\"}" } }, content: [{type, text}] }`
//! (the brief's shell), or with today's tail
//! `filesystem_access_request={"v":1,"requested_root":"/a/b","attempted_path":"/a/b/x","error_code":"S215"}`.
//! The last marker of either kind wins. A message may start with
//! `remote error (S215): ` or `handler error: `; some coder versions send a
//! generic code whose message is the JSON `{"code":"C215","message":"…"}`.

use std::path::{Component, Path};

use serde_json::Value;

use crate::pending::GrantRequest;

/// The jail-scope error codes.
pub const JAIL_CODES: &[&str] = &["S215", "S220", "C215", "C218"];
/// The brief's shell: `grant_hint={v, dir, path, code}`.
const GRANT_HINT: &str = "grant_hint=";
/// Today's shell: `filesystem_access_request={v, requested_root, attempted_path, error_code}`.
const ACCESS_REQUEST: &str = "filesystem_access_request=";

/// The parsed hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantHint {
    /// The nearest existing directory to grant.
    pub dir: String,
    /// The path as the call gave it.
    pub path: String,
}

/// A message without the prefixes a harness or SDK puts before it, and the
/// code `remote error (<code>): ` names.
fn unprefixed(message: &str) -> (Option<&str>, &str) {
    let mut text = message.trim_start();
    let mut code = None;
    loop {
        if let Some(rest) = text.strip_prefix("handler error: ") {
            text = rest.trim_start();
        } else if let Some(rest) = text.strip_prefix("remote error (") {
            let Some((named, after)) = rest.split_once("): ") else {
                break;
            };
            code = Some(named);
            text = after.trim_start();
        } else {
            break;
        }
    }
    (code, text)
}

/// `(code, message)` of a jail-scope rejection: a jail code in
/// `details.error.code`, in a `remote error (<code>): ` prefix, or in the
/// generic-code form whose message is a JSON object with a jail code.
pub(crate) fn jail_error(result: &Value) -> Option<(String, String)> {
    if result.get("is_error").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let error = result.get("details")?.get("error")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = error.get("message")?.as_str()?;
    if JAIL_CODES.contains(&code) {
        return Some((code.to_string(), message.to_string()));
    }
    let (prefixed, text) = unprefixed(message);
    if let Some(named) = prefixed.filter(|c| JAIL_CODES.contains(c)) {
        return Some((named.to_string(), message.to_string()));
    }
    let inner: Value = serde_json::from_str(text.trim()).ok()?;
    let inner_code = inner.get("code")?.as_str()?;
    let inner_message = inner.get("message")?.as_str()?;
    JAIL_CODES
        .contains(&inner_code)
        .then(|| (inner_code.to_string(), inner_message.to_string()))
}

/// The hint after the last marker of `text`, of either kind: JSON to the
/// end of the string (trailing text = no hint), `v` = 1, the dir
/// (`dir` / `requested_root`) absolute, non-empty and free of `.`/`..`
/// components; the path (`path` / `attempted_path`) as given.
pub fn find_hint(text: &str) -> Option<GrantHint> {
    let last = [
        (GRANT_HINT, "dir", "path"),
        (ACCESS_REQUEST, "requested_root", "attempted_path"),
    ]
    .into_iter()
    .filter_map(|(marker, dir, path)| text.rfind(marker).map(|at| (at + marker.len(), dir, path)))
    .max_by_key(|(at, _, _)| *at)?;
    let (start, dir_key, path_key) = last;
    let hint: Value = serde_json::from_str(text[start..].trim()).ok()?;
    if hint.get("v").and_then(Value::as_u64) != Some(1) {
        return None;
    }
    let dir = hint.get(dir_key)?.as_str()?;
    if !is_clean_absolute(dir) {
        return None;
    }
    let path = hint
        .get(path_key)
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

pub(crate) use crate::folders::contains;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request_tail(root: &str, path: &str, code: &str) -> String {
        format!(
            " filesystem_access_request={}",
            json!({"v": 1, "requested_root": root, "attempted_path": path, "error_code": code})
        )
    }

    #[test]
    fn rule_19_todays_tail_is_read_with_or_without_prefixes() {
        for prefix in [
            "",
            "remote error (S215): ",
            "handler error: ",
            "handler error: remote error (S215): ",
        ] {
            let message = format!(
                "{prefix}path escapes the fs jail roots [/w]: /data/x{}",
                request_tail("/data", "/data/x", "S215")
            );
            let result = json!({"is_error": true, "details": {"error": {"code": "S215", "message": message}}});
            let grant = recognise(&result).unwrap_or_else(|| panic!("{prefix:?}"));
            assert_eq!(
                (
                    grant.dir.as_str(),
                    grant.offending_path.as_str(),
                    grant.error_code.as_str()
                ),
                ("/data", "/data/x", "S215")
            );
            // A generic code: the prefix names the jail code.
            let generic = json!({"is_error": true, "details": {"error": {"code": "invocation_failed", "message": format!("remote error (S220): outside{}", request_tail("/d", "/d/y", "S220"))}}});
            assert_eq!(
                recognise(&generic).map(|g| g.error_code),
                Some("S220".to_string())
            );
        }
        // The last marker of either kind wins; trailing text is no hint.
        let both = format!(
            "x{} then{}",
            request_tail("/a", "/a/1", "S215"),
            tail("/b", "/b/2", "S215")
        );
        assert_eq!(find_hint(&both).map(|h| h.dir), Some("/b".to_string()));
        let both = format!(
            "x{} then{}",
            tail("/b", "/b/2", "S215"),
            request_tail("/a", "/a/1", "S215")
        );
        assert_eq!(find_hint(&both).map(|h| h.dir), Some("/a".to_string()));
        assert!(find_hint(&format!("{} trailing", request_tail("/a", "/a/1", "S215"))).is_none());
        assert!(find_hint(&request_tail("relative", "x", "S215")).is_none());
        assert!(find_hint(&request_tail("/a/../etc", "x", "S215")).is_none());
        // Not an error, or no jail code anywhere: no hint.
        let ok = json!({"is_error": false, "details": {"error": {"code": "S215", "message": request_tail("/a", "/a/1", "S215")}}});
        assert!(recognise(&ok).is_none());
        let other = json!({"is_error": true, "details": {"error": {"code": "E1", "message": format!("remote error (E1): no{}", request_tail("/a", "/a/1", "S215"))}}});
        assert!(recognise(&other).is_none());
    }

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
