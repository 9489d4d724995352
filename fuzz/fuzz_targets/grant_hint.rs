//! Texts and post-trigger results built from the input (markers, hint JSON
//! with good and bad fields, trailing text, the generic-code form) →
//! `find_hint`, `recognise`, `contains`. Never panics; every hint found has
//! `v` = 1 behind it and an absolute, non-empty dir free of `.` and `..`
//! segments, and containment is by whole path components.

#![no_main]

use std::path::Path;

use approval_gate::{contains, find_hint, recognise, JAIL_CODES};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const MARKER: &str = "grant_hint=";

const DIR_PIECES: &[&str] = &[
    "/", "a", "b", ".", "..", "//", "/.", "/..", "./", " ", "~", "\u{0}", "\\", "\u{e9}", "C:",
];

fn piece(u: &mut Unstructured, alphabet: &[&str], max: usize) -> Result<String> {
    if u.ratio(1, 8)? {
        return u.arbitrary();
    }
    let n = u.int_in_range(0..=max)?;
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(u.choose(alphabet)?);
    }
    Ok(s)
}

fn hint_json(u: &mut Unstructured) -> Result<String> {
    let mut obj = Map::new();
    let v = match u.int_in_range(0..=6)? {
        0 => json!(2),
        1 => json!("1"),
        2 => json!(1.0),
        3 => json!(-1),
        _ => json!(1),
    };
    if !u.ratio(1, 16)? {
        obj.insert("v".into(), v);
    }
    if !u.ratio(1, 16)? {
        let dir = if u.ratio(1, 8)? {
            json!(u.arbitrary::<u8>()?)
        } else {
            Value::String(piece(u, DIR_PIECES, 6)?)
        };
        obj.insert("dir".into(), dir);
    }
    if u.ratio(3, 4)? {
        obj.insert("path".into(), Value::String(piece(u, DIR_PIECES, 6)?));
    }
    if u.ratio(1, 2)? {
        obj.insert("code".into(), json!(*u.choose(JAIL_CODES)?));
    }
    if u.ratio(1, 8)? {
        obj.insert("extra".into(), json!([true, null]));
    }
    let text = Value::Object(obj).to_string();
    Ok(if u.ratio(1, 8)? {
        // Cut short.
        let cut = u.int_in_range(0..=text.len())?;
        text.get(..cut).unwrap_or(&text).to_owned()
    } else {
        text
    })
}

fn text(u: &mut Unstructured) -> Result<String> {
    let n = u.int_in_range(0..=5)?;
    let mut s = String::new();
    for _ in 0..n {
        match u.int_in_range(0..=5)? {
            0 => s.push_str(&u.arbitrary::<String>()?),
            1 => s.push_str(MARKER),
            2 => s.push_str(&hint_json(u)?),
            3 => s.push_str(u.choose(&[" ", "\n", "\t", " and more", "}", "\u{3000}"])?),
            _ => {
                s.push_str(" grant_hint=");
                s.push_str(&hint_json(u)?);
            }
        }
    }
    Ok(s)
}

fn code(u: &mut Unstructured) -> Result<String> {
    Ok(if u.ratio(3, 4)? {
        (*u.choose(JAIL_CODES)?).to_owned()
    } else {
        u.arbitrary()?
    })
}

fn result(u: &mut Unstructured) -> Result<Value> {
    let message = text(u)?;
    let message = if u.ratio(1, 4)? {
        // The generic-code form: the real code and message inside the message.
        json!({"code": code(u)?, "message": message}).to_string()
    } else {
        message
    };
    let outer_code = if u.ratio(1, 4)? {
        "E000".to_owned()
    } else {
        code(u)?
    };
    let mut r = json!({
        "function_call_id": "c",
        "function_id": "shell::fs::read",
        "is_error": !u.ratio(1, 8)?,
        "content": [{"type": "text", "text": text(u)?}],
        "details": {"error": {"code": outer_code, "message": message}},
    });
    if u.ratio(1, 16)? {
        r["details"] = json!("policy_denied");
    }
    if u.ratio(1, 16)? {
        r["content"] = json!([]);
    }
    Ok(r)
}

/// Whether `dir` is absolute, non-empty and free of `.` and `..` segments.
fn clean_absolute(dir: &str) -> bool {
    !dir.is_empty()
        && Path::new(dir).is_absolute()
        && dir.split('/').all(|seg| seg != "." && seg != "..")
}

/// The independent reading of the hint after the last marker.
fn reference_hint(text: &str) -> Option<(String, String)> {
    let at = text.rfind(MARKER)?;
    let hint: Value = serde_json::from_str(text[at + MARKER.len()..].trim()).ok()?;
    if hint.get("v")? != &json!(1) {
        return None;
    }
    let dir = hint.get("dir")?.as_str()?.to_owned();
    let path = hint
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Some((dir, path))
}

fn check_text(s: &str) {
    if let Some(h) = find_hint(s) {
        assert!(clean_absolute(&h.dir), "dir {:?} from {s:?}", h.dir);
        assert_eq!(
            reference_hint(s),
            Some((h.dir.clone(), h.path.clone())),
            "{s:?}"
        );
        check_containment(&h.dir);
    } else if let Some((dir, _)) = reference_hint(s) {
        assert!(
            !clean_absolute(&dir),
            "hint with dir {dir:?} missed in {s:?}"
        );
    }
}

/// Containment by components, around a clean absolute `dir`.
fn check_containment(dir: &str) {
    assert!(contains(dir, dir));
    let sep = if dir.ends_with('/') { "" } else { "/" };
    assert!(contains(dir, &format!("{dir}{sep}x")));
    assert!(contains(dir, &format!("{dir}{sep}x/y")));
    if !dir.ends_with('/') {
        assert!(!contains(dir, &format!("{dir}x")), "{dir:?}");
        assert!(!contains(&format!("{dir}x"), dir), "{dir:?}");
    }
    if dir != "/" {
        let child = format!("{dir}{sep}x");
        assert!(!contains(&child, dir), "{child:?} contains {dir:?}");
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    let s = text(u)?;
    check_text(&s);
    let r = result(u)?;
    if let Some(g) = recognise(&r) {
        assert_eq!(r["is_error"], json!(true));
        assert!(
            JAIL_CODES.contains(&g.error_code.as_str()),
            "{}",
            g.error_code
        );
        assert!(clean_absolute(&g.dir), "{:?}", g.dir);
        let from_message = r["details"]["error"]["message"].as_str().and_then(|m| {
            let inner: Option<Value> = serde_json::from_str(m.trim()).ok();
            let m = inner
                .as_ref()
                .and_then(|i| i.get("message")?.as_str())
                .filter(|_| {
                    !JAIL_CODES.contains(&r["details"]["error"]["code"].as_str().unwrap_or(""))
                })
                .unwrap_or(m);
            find_hint(m)
        });
        let from_text = r["content"][0]["text"].as_str().and_then(find_hint);
        let h = from_message.or(from_text).expect("a hint behind the grant");
        assert_eq!((h.dir, h.path), (g.dir.clone(), g.offending_path.clone()));
    }
    let a = piece(u, DIR_PIECES, 8)?;
    let b = piece(u, DIR_PIECES, 8)?;
    let _ = contains(&a, &b);
    if !a.is_empty() {
        assert!(contains(&a, &a), "{a:?}");
    }
    assert!(!contains("", &b));
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    // Raw text too.
    if let Ok(s) = std::str::from_utf8(data) {
        check_text(s);
        let _ = contains(s, s);
    }
    let mut u = Unstructured::new(data);
    let _ = run(&mut u);
});
