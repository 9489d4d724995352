//! Arbitrary strings → `decode` never panics, and a cursor that decodes is
//! the one `encode` gives for its key (one cursor per position); arbitrary
//! sort keys → `decode(encode(k)) == k`.
//!
//! The first byte steers: 0 feeds the rest as text, 1 its base64url (so the
//! JSON layer is reached), 2 the base64url of `[n, s, c]`-like JSON text,
//! anything else builds a sort key.

#![no_main]

use approval_gate::SortKey;
use approval_gate::{decode_cursor as decode, encode_cursor as encode};
use arbitrary::{Result, Unstructured};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;

fn check(cursor: &str) {
    if let Ok(key) = decode(cursor) {
        let again = encode(&key);
        assert_eq!(decode(&again).as_ref(), Ok(&key));
        assert_eq!(again, cursor, "{key:?} has two cursors");
    }
}

/// Optional JSON whitespace.
fn ws(u: &mut Unstructured) -> Result<&'static str> {
    Ok(if u.ratio(1, 4)? {
        *u.choose(&[" ", "\n", "\t", "\r", "  "])?
    } else {
        ""
    })
}

/// A JSON number that may or may not be a `u64`, spelled in many ways.
fn number(u: &mut Unstructured) -> Result<String> {
    Ok(match u.int_in_range(0..=6)? {
        0 => (*u.choose(&["-0", "1.0", "1e3", "01", "18446744073709551616", "-1"])?).to_owned(),
        1 => "18446744073709551615".to_owned(),
        _ => u.arbitrary::<u64>()?.to_string(),
    })
}

/// A JSON string, escaped in the shortest way or in a longer one.
fn string(u: &mut Unstructured) -> Result<String> {
    if u.ratio(1, 16)? {
        return Ok((*u.choose(&["null", "1", "\"\\ud800\"", "[]"])?).to_owned());
    }
    let raw: String = u.arbitrary()?;
    if !u.ratio(1, 3)? {
        return Ok(serde_json::to_string(&raw).unwrap_or_default());
    }
    let mut out = String::from("\"");
    for c in raw.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            c if (c as u32) < 0x10000 && u.ratio(1, 2)? => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// `[n, s, c]`-like JSON text, with whitespace and escapes anywhere.
fn json_text(u: &mut Unstructured) -> Result<String> {
    let mut s = String::new();
    s.push_str(ws(u)?);
    s.push('[');
    let items = *u.choose(&[3usize, 3, 3, 3, 2, 4])?;
    for i in 0..items {
        s.push_str(ws(u)?);
        if i == 0 {
            s.push_str(&number(u)?);
        } else {
            s.push_str(&string(u)?);
        }
        s.push_str(ws(u)?);
        if i + 1 < items {
            s.push(',');
        }
    }
    s.push(']');
    s.push_str(ws(u)?);
    Ok(s)
}

fn run(steer: u8, u: &mut Unstructured) -> Result<()> {
    match steer {
        0 => {
            let s: String = u.arbitrary()?;
            check(&s);
        }
        1 => {
            let bytes: Vec<u8> = u.arbitrary()?;
            check(&URL_SAFE_NO_PAD.encode(bytes));
        }
        2 => check(&URL_SAFE_NO_PAD.encode(json_text(u)?)),
        _ => {
            let key = SortKey {
                pending_at: u.arbitrary()?,
                session_id: u.arbitrary()?,
                function_call_id: u.arbitrary()?,
            };
            let cursor = encode(&key);
            assert!(cursor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            assert_eq!(decode(&cursor), Ok(key));
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        check(s);
    }
    let Some((&steer, rest)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(rest);
    let _ = run(steer % 4, &mut u);
});
