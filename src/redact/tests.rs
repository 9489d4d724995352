use serde_json::{json, Map, Value};

use super::walk::{mark, split_mark};
use super::*;

mod commands;
mod corpus;
mod full;
mod shapes;
mod shown;
mod walk;

/// `kept` with the mark of `n` characters cut.
pub(super) fn cut(kept: &str, n: usize) -> String {
    format!("{kept}{}", mark(n as u64))
}

pub(super) fn s(n: usize, c: char) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// `n` nested containers around `leaf`, alternating array / object.
pub(super) fn nest(n: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for i in 0..n {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            // Not `json!`: it would serialize `v` again, recursively.
            let mut map = Map::new();
            map.insert("k".to_owned(), v);
            Value::Object(map)
        };
    }
    v
}

fn string_of(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => panic!("not a string: {other}"),
    }
}

#[test]
fn string_values_and_keys_pass_the_detectors() {
    let input = json!({
        "command": "export GITHUB_TOKEN=abc123 && gh pr list",
        "TOKEN=k1": "key with an assignment",
        "list": ["curl -u admin:pw123 https://x", 3],
        "url": "postgres://app:s3cret@db/prod",
    });
    assert_eq!(
        redact(&input),
        json!({
            "command": "export GITHUB_TOKEN=<redacted> && gh pr list",
            "TOKEN=<redacted>": "key with an assignment",
            "list": ["curl -u admin:<redacted> https://x", 3],
            "url": "postgres://app:<redacted>@db/prod",
        })
    );
}

#[test]
fn keys_that_redact_to_the_same_text_collide_and_are_counted() {
    let input = json!({"TOKEN=a": 1, "TOKEN=b": 2, "z": 3});
    let out = redact(&input);
    assert_eq!(
        out,
        json!({"TOKEN=<redacted>": 1, "z": 3, TRUNCATED_KEY: 1})
    );
    assert_eq!(redact(&out), out);
}

#[test]
fn redact_text_borrows_clean_text_and_does_not_clip() {
    let clean = "cargo test --workspace -- --test-threads 2";
    assert!(matches!(redact_text(clean), Cow::Borrowed(t) if t == clean));
    let long = format!("{} TOKEN=abc {}", s(300, 'a'), s(300, 'b'));
    let out = redact_text(&long);
    assert!(matches!(out, Cow::Owned(_)));
    assert_eq!(
        out,
        format!("{} TOKEN=<redacted> {}", s(300, 'a'), s(300, 'b'))
    );
}

#[test]
fn a_secret_straddling_the_cut_is_replaced_whole() {
    let token = "ghp_FAKE0123456789abcdefghijklmnopqrstuv";
    for visible in [1, 4, 20, 39] {
        let pad = s(256 - visible - 1, 'x');
        let text = format!("{pad} {token} tail");
        let out = string_of(redact(&json!(text)));
        // Redacted, the text is 271 - visible code points long: when that
        // is still too long, the cut moves to the marker's start.
        let expected = if 271 - visible <= 256 {
            format!("{pad} <redacted> tail")
        } else {
            cut(&format!("{pad} "), "<redacted> tail".len())
        };
        assert_eq!(out, expected, "{visible} characters would have shown");
    }
    // Longer than the limit after redaction: the cut moves before the marker.
    let text = format!("{} {token} {}", s(250, 'x'), s(50, 'y'));
    let out = string_of(redact(&json!(text)));
    assert_eq!(out, cut(&format!("{} ", s(250, 'x')), 10 + 1 + 50));
    assert_eq!(string_of(redact(&json!(out.clone()))), out);
}

#[test]
fn the_cut_never_splits_a_construct() {
    // Without the guard this would end in `Authorization: Bea…`, which a
    // second pass would read as a credential.
    for pad in 220..256 {
        let text = format!(
            "{} -H 'Authorization: Bearer <redacted>' {}",
            s(pad, 'x'),
            s(40, 'z')
        );
        let once = string_of(redact(&json!(text)));
        let (kept, n) = split_mark(&once);
        assert!(n > 0, "{once}");
        assert!(!kept.ends_with("Bea") && !kept.ends_with("<red"), "{once}");
        assert_eq!(string_of(redact(&json!(once.clone()))), once, "pad {pad}");
    }
    let text = format!("{} TOKEN=abc {}", s(250, 'x'), s(20, 'y'));
    let once = string_of(redact(&json!(text)));
    assert_eq!(once, cut(&format!("{} ", s(250, 'x')), 16 + 1 + 20));
}

#[test]
fn a_construct_open_past_the_window_is_redacted_to_it() {
    let text = format!("PASSWORD='{}", s(3 * DETECT_WINDOW_BYTES, 'p'));
    // What the window did not read is counted with what was cut.
    let unread = text.len() - (256 + DETECT_WINDOW_BYTES);
    assert_eq!(
        string_of(redact(&json!(text))),
        cut("PASSWORD='<redacted>", unread)
    );
    let text = format!(
        "x -----BEGIN RSA PRIVATE KEY-----\n{}",
        s(3 * DETECT_WINDOW_BYTES, 'A')
    );
    let unread = text.len() - (256 + DETECT_WINDOW_BYTES);
    assert_eq!(string_of(redact(&json!(text))), cut("x <redacted>", unread));
    // A secret after the window is cut anyway.
    let text = format!("{} TOKEN=abc", s(DETECT_WINDOW_BYTES + 300, 'a'));
    assert_eq!(
        string_of(redact(&json!(text))),
        cut(&s(256, 'a'), text.len() - 256)
    );
}

#[test]
fn a_string_shortened_by_redaction_is_not_clipped() {
    let block = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        s(400, 'A')
    );
    let text = format!("before {block} after");
    assert_eq!(string_of(redact(&json!(text))), "before <redacted> after");
}

#[test]
fn rule_21_6_a_secret_key_hides_every_scalar_under_it_however_it_is_spelled() {
    let input = json!({
        "authToken": {"nested": ["deep", {"x": 1}]},
        "X-Api-Key": ["a", "b"],
        "client.secret": 7,
        "AWS_SECRET_ACCESS_KEY": null,
        "Set-Cookie": "a=b",
        "max_tokens": 512,
        "author": "alice",
    });
    assert_eq!(
        redact(&input),
        json!({
            "authToken": {"nested": [REDACTED, {"x": REDACTED}]},
            "X-Api-Key": [REDACTED, REDACTED],
            "client.secret": REDACTED,
            "AWS_SECRET_ACCESS_KEY": REDACTED,
            "Set-Cookie": REDACTED,
            "max_tokens": 512,
            "author": "alice",
        })
    );
}
