//! The inbox's paging cursor: opaque to clients, the sort key of the last
//! item of a page underneath.
//!
//! # Format
//!
//! base64url without padding of the compact JSON array
//! `[pending_at, session_id, function_call_id]`:
//!
//! ```text
//! [1700000000000,"s_1","c_1"]  →  WzE3MDAwMDAwMDAwMDAsInNfMSIsImNfMSJd
//! ```

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

use super::record::SortKey;

/// A cursor that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not unpadded base64url.
    #[error("invalid cursor: not base64url")]
    Base64,
    /// Not a JSON `[u64, string, string]` array as [`encode`] writes it.
    #[error("invalid cursor: not a sort key")]
    Shape,
}

/// The cursor for `key`.
pub fn encode(key: &SortKey) -> String {
    let json = Value::Array(vec![
        Value::from(key.pending_at),
        Value::from(&*key.session_id),
        Value::from(&*key.function_call_id),
    ]);
    URL_SAFE_NO_PAD.encode(json.to_string())
}

/// The sort key inside a cursor. Total: every string gives a key or an
/// error, never a panic.
///
/// Only the cursor [`encode`] writes for the key is accepted: the same key
/// spelled with JSON whitespace or escapes (`[1, "s", "c"]`,
/// `[1,"\u0073","c"]`) is not a second name for the same position.
pub fn decode(cursor: &str) -> Result<SortKey, CursorError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| CursorError::Base64)?;
    let (pending_at, session_id, function_call_id): (u64, String, String) =
        serde_json::from_slice(&bytes).map_err(|_| CursorError::Shape)?;
    let key = SortKey::new(pending_at, &session_id, &function_call_id);
    if encode(&key) != cursor {
        return Err(CursorError::Shape);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(pending_at: u64, s: &str, c: &str) -> SortKey {
        SortKey {
            pending_at,
            session_id: s.into(),
            function_call_id: c.into(),
        }
    }

    #[test]
    fn the_wire_form_is_base64url_of_a_compact_array() {
        let k = key(1_700_000_000_000, "s_1", "c_1");
        let cursor = encode(&k);
        assert_eq!(cursor, "WzE3MDAwMDAwMDAwMDAsInNfMSIsImNfMSJd");
        let raw = URL_SAFE_NO_PAD.decode(&cursor).expect("base64");
        assert_eq!(raw, br#"[1700000000000,"s_1","c_1"]"#);
        assert_eq!(decode(&cursor), Ok(k));
    }

    #[test]
    fn cursors_are_url_safe_and_unpadded() {
        // Bytes that need `-`/`_` in base64url and a length that would pad.
        let k = key(u64::MAX, "\u{ff}\u{fe}?>", "a\"b\\c");
        let cursor = encode(&k);
        assert!(
            cursor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{cursor}"
        );
        assert_eq!(decode(&cursor), Ok(k));
    }

    #[test]
    fn garbage_is_an_error() {
        let b64 = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let cases = [
            ("".to_owned(), CursorError::Shape),
            ("!!!".to_owned(), CursorError::Base64),
            ("WzE=".to_owned(), CursorError::Base64),
            ("a".to_owned(), CursorError::Base64),
            (
                "WzE3MDAwMDAwMDAwMDAsInNfMSIsImNfMSJd=".to_owned(),
                CursorError::Base64,
            ),
            (
                "WzE3MDAwMDAwMDAwMDAsInNfMSIsImNfMSJd\n".to_owned(),
                CursorError::Base64,
            ),
            (b64("not json"), CursorError::Shape),
            (b64("{}"), CursorError::Shape),
            (b64("[]"), CursorError::Shape),
            (b64(r#"[1,"s"]"#), CursorError::Shape),
            (b64(r#"[1,"s","c","x"]"#), CursorError::Shape),
            (b64(r#"["1","s","c"]"#), CursorError::Shape),
            (b64(r#"[-1,"s","c"]"#), CursorError::Shape),
            (b64(r#"[1.5,"s","c"]"#), CursorError::Shape),
            (b64(r#"[1,2,"c"]"#), CursorError::Shape),
            (b64(r#"[1,"s",null]"#), CursorError::Shape),
            (b64(r#"[1,"s","c"] x"#), CursorError::Shape),
            (b64(r#"[18446744073709551616,"s","c"]"#), CursorError::Shape),
        ];
        for (cursor, expected) in cases {
            assert_eq!(decode(&cursor), Err(expected.clone()), "{cursor:?}");
        }
        assert_eq!(
            CursorError::Shape.to_string(),
            "invalid cursor: not a sort key"
        );
        assert_eq!(
            CursorError::Base64.to_string(),
            "invalid cursor: not base64url"
        );
    }

    #[test]
    fn only_the_canonical_spelling_of_a_key_decodes() {
        let b64 = |s: &str| URL_SAFE_NO_PAD.encode(s);
        assert_eq!(decode(&b64(r#"[1,"s","c"]"#)), Ok(key(1, "s", "c")));
        for spelling in [
            r#"[18446744073709551615,"",""] "#,
            r#" [1,"s","c"]"#,
            r#"[1, "s","c"]"#,
            "[1,\"s\",\"c\"]\n",
            r#"[1,"\u0073","c"]"#,
            r#"[1,"s","\/"]"#,
            r#"[1,"s","\u00e9"]"#,
        ] {
            assert_eq!(
                decode(&b64(spelling)),
                Err(CursorError::Shape),
                "{spelling}"
            );
        }
        // What must be escaped is escaped the way encode escapes it.
        let k = key(7, "a\"b\\c\u{1}", "\n");
        assert_eq!(decode(&encode(&k)), Ok(k));
    }

    #[test]
    fn standard_base64_alphabet_is_rejected() {
        let cursor = encode(&key(1, "\u{3ff}\u{3ff}\u{3ff}", "c"));
        assert_eq!(cursor, "WzEsIs-_z7_PvyIsImMiXQ");
        let standard = cursor.replace('-', "+").replace('_', "/");
        assert_eq!(decode(&standard), Err(CursorError::Base64));
        assert_eq!(decode(&format!("{cursor}==")), Err(CursorError::Base64));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn decode_never_panics(s in ".*") {
            let _ = decode(&s);
        }

        #[test]
        fn decode_never_panics_on_valid_base64(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let cursor = URL_SAFE_NO_PAD.encode(bytes);
            if let Ok(k) = decode(&cursor) {
                prop_assert_eq!(encode(&k), cursor);
            }
        }

        #[test]
        fn round_trips(pending_at in any::<u64>(), s in ".*", c in ".*") {
            let k = key(pending_at, &s, &c);
            prop_assert_eq!(decode(&encode(&k)), Ok(k));
        }

        #[test]
        fn encoding_preserves_identity(a in (0u64..4, "[ab]{0,2}", "[ab]{0,2}"), b in (0u64..4, "[ab]{0,2}", "[ab]{0,2}")) {
            let ka = key(a.0, &a.1, &a.2);
            let kb = key(b.0, &b.1, &b.2);
            prop_assert_eq!(encode(&ka) == encode(&kb), ka == kb);
        }
    }
}
