use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use proptest::prelude::*;

use super::*;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const OTHER_SECRET: &str = "fedcba9876543210fedcba9876543210";

fn secret() -> LinkSecret {
    LinkSecret::new(SECRET).expect("a 32-character secret")
}

fn revision(session_id: &str, call_id: &str, pending_at: u64, kind: Kind) -> Revision {
    Revision::new(session_id, call_id, pending_at, kind).expect("valid ids")
}

fn held() -> Revision {
    revision("s_1", "c_1", 1_700_000_000_000, Kind::Function)
}

/// `token` with its decoded byte at `index` XOR-ed with `mask`, re-encoded.
fn flip_byte(token: &str, index: usize, mask: u8) -> String {
    let mut bytes = URL_SAFE_NO_PAD.decode(token).expect("a signed token");
    bytes[index] ^= mask;
    URL_SAFE_NO_PAD.encode(bytes)
}

#[test]
fn a_signed_token_verifies_as_its_revision() {
    for kind in [Kind::Function, Kind::FolderAccess] {
        let rev = revision("s_1", "c_1", 1_700_000_000_000, kind);
        let token = sign(&secret(), &rev);
        assert_eq!(verify(&secret(), &token), Ok(rev));
    }
}

#[test]
fn the_wire_form_is_base64url_of_the_versioned_payload_and_its_tag() {
    let token = sign(&secret(), &held());
    assert!(token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let bytes = URL_SAFE_NO_PAD.decode(&token).expect("base64url");
    let (payload, tag) = bytes.split_at(bytes.len() - 32);
    let mut expected = vec![1, 0];
    expected.extend_from_slice(&1_700_000_000_000u64.to_be_bytes());
    expected.extend_from_slice(&[0, 3]);
    expected.extend_from_slice(b"s_1");
    expected.extend_from_slice(&[0, 3]);
    expected.extend_from_slice(b"c_1");
    assert_eq!(payload, expected);

    // The tag is HMAC-SHA256 over the domain-separated payload, computed here
    // independently of `LinkSecret::mac`.
    let mut mac = HmacSha256::new_from_slice(SECRET.as_bytes()).expect("any key length");
    mac.update(b"approval-gate/link/v1\0");
    mac.update(payload);
    assert_eq!(tag, mac.finalize().into_bytes().as_slice());
}

#[test]
fn signing_is_deterministic() {
    assert_eq!(sign(&secret(), &held()), sign(&secret(), &held()));
}

#[test]
fn a_tampered_payload_byte_is_a_bad_signature() {
    let token = sign(&secret(), &held());
    // Every payload byte after the version, one bit at a time: a changed kind,
    // time, length prefix or id character.
    let payload_len = URL_SAFE_NO_PAD.decode(&token).expect("base64").len() - 32;
    for index in 1..payload_len {
        let tampered = flip_byte(&token, index, 0x01);
        assert_eq!(
            verify(&secret(), &tampered),
            Err(TokenError::BadSignature),
            "payload byte {index}"
        );
    }
}

#[test]
fn a_tampered_version_byte_is_malformed() {
    let token = sign(&secret(), &held());
    assert_eq!(
        verify(&secret(), &flip_byte(&token, 0, 0x03)),
        Err(TokenError::Malformed)
    );
}

#[test]
fn a_tampered_tag_is_a_bad_signature() {
    let token = sign(&secret(), &held());
    let len = URL_SAFE_NO_PAD.decode(&token).expect("base64").len();
    for index in [len - 32, len - 17, len - 1] {
        assert_eq!(
            verify(&secret(), &flip_byte(&token, index, 0x80)),
            Err(TokenError::BadSignature),
            "tag byte {index}"
        );
    }
}

#[test]
fn a_truncated_token_never_verifies() {
    let token = sign(&secret(), &held());
    for cut in 1..token.len() {
        let truncated = &token[..token.len() - cut];
        assert!(verify(&secret(), truncated).is_err(), "cut {cut}");
    }
    // Cut at a byte boundary (a whole tag byte gone): decodes, fails the tag.
    let mut bytes = URL_SAFE_NO_PAD.decode(&token).expect("base64");
    bytes.pop();
    assert_eq!(
        verify(&secret(), &URL_SAFE_NO_PAD.encode(bytes)),
        Err(TokenError::BadSignature)
    );
}

#[test]
fn an_extended_token_never_verifies() {
    let token = sign(&secret(), &held());
    for tail in ["A", "AA", "AAAA", "_-_-", "=", "%00", "/x", "?x=1"] {
        let extended = format!("{token}{tail}");
        assert!(verify(&secret(), &extended).is_err(), "tail {tail:?}");
    }
    // A byte appended to the decoded token: decodes, fails the tag.
    let mut bytes = URL_SAFE_NO_PAD.decode(&token).expect("base64");
    bytes.push(0);
    assert_eq!(
        verify(&secret(), &URL_SAFE_NO_PAD.encode(bytes)),
        Err(TokenError::BadSignature)
    );
}

#[test]
fn a_padded_or_non_canonical_spelling_is_malformed() {
    let token = sign(&secret(), &held());
    let bytes = URL_SAFE_NO_PAD.decode(&token).expect("base64");
    let padded = base64::engine::general_purpose::URL_SAFE.encode(&bytes);
    if padded != token {
        assert_eq!(verify(&secret(), &padded), Err(TokenError::Malformed));
    }
    let standard = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
    if standard != token {
        assert_eq!(verify(&secret(), &standard), Err(TokenError::Malformed));
    }
}

#[test]
fn another_records_token_names_only_that_record() {
    let a = held();
    let b = revision("s_1", "c_2", 1_700_000_000_000, Kind::Function);
    let token_b = sign(&secret(), &b);
    let verified = verify(&secret(), &token_b).expect("valid");
    assert_eq!(verified, b);
    assert_ne!(verified, a);
    assert_ne!(sign(&secret(), &a), token_b);
}

#[test]
fn a_token_signed_under_another_secret_is_a_bad_signature() {
    let other = LinkSecret::new(OTHER_SECRET).expect("valid");
    let token = sign(&other, &held());
    assert_eq!(verify(&secret(), &token), Err(TokenError::BadSignature));
    assert_eq!(verify(&other, &token), Ok(held()));
}

#[test]
fn a_replaced_revision_does_not_match_the_stored_record() {
    let token = sign(&secret(), &held());
    let rev = verify(&secret(), &token).expect("valid");
    assert!(rev.matches(1_700_000_000_000, Kind::Function));
    // A later hold under the same ids.
    assert!(!rev.matches(1_700_000_000_001, Kind::Function));
    // A folder prompt that replaced the function hold at the same instant.
    assert!(!rev.matches(1_700_000_000_000, Kind::FolderAccess));
    // The replacement gets its own token, which names the new revision only.
    let replacement = revision("s_1", "c_1", 1_700_000_000_000, Kind::FolderAccess);
    let new_token = sign(&secret(), &replacement);
    assert_ne!(new_token, token);
    let new_rev = verify(&secret(), &new_token).expect("valid");
    assert!(new_rev.matches(1_700_000_000_000, Kind::FolderAccess));
    assert!(!new_rev.matches(1_700_000_000_000, Kind::Function));
}

#[test]
fn ids_with_unusual_characters_round_trip() {
    for (session_id, call_id) in [
        ("sessão 東京 🚀", "call id with spaces"),
        ("100%25", "%2F%2e%2e"),
        ("\u{202e}evil", "tab\there\nnewline"),
        ("\0", "?#&="),
        ("a", "b"),
    ] {
        let rev = revision(session_id, call_id, u64::MAX, Kind::FolderAccess);
        let token = sign(&secret(), &rev);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{token}"
        );
        assert_eq!(verify(&secret(), &token), Ok(rev));
    }
}

#[test]
fn the_longest_ids_fit_and_longer_ones_get_no_link() {
    let long = "é".repeat(MAX_ID_BYTES / 2);
    let rev = revision(&long, &long, 0, Kind::Function);
    let token = sign(&secret(), &rev);
    assert_eq!(token.len(), MAX_TOKEN_LEN);
    assert_eq!(verify(&secret(), &token), Ok(rev));

    let too_long = "x".repeat(MAX_ID_BYTES + 1);
    assert_eq!(
        Revision::new(&too_long, "c", 0, Kind::Function),
        Err(RevisionError::TooLong { max: MAX_ID_BYTES })
    );
    assert_eq!(
        Revision::new("s", &too_long, 0, Kind::Function),
        Err(RevisionError::TooLong { max: MAX_ID_BYTES })
    );
}

#[test]
fn ids_the_worker_never_holds_get_no_link() {
    for (s, c) in [("", "c"), ("s", ""), ("a/b", "c"), ("s", "c/")] {
        assert_eq!(
            Revision::new(s, c, 0, Kind::Function),
            Err(RevisionError::InvalidId),
            "{s:?} {c:?}"
        );
    }
}

#[test]
fn a_validly_signed_payload_with_a_forbidden_id_is_malformed() {
    // Only reachable with the secret; the parser still refuses ids that
    // `Revision::new` refuses.
    let mut payload = vec![1, 0];
    payload.extend_from_slice(&0u64.to_be_bytes());
    payload.extend_from_slice(&[0, 3]);
    payload.extend_from_slice(b"a/b");
    payload.extend_from_slice(&[0, 1]);
    payload.extend_from_slice(b"c");
    let tag = secret().mac(&payload).finalize().into_bytes();
    payload.extend_from_slice(&tag);
    assert_eq!(
        verify(&secret(), &URL_SAFE_NO_PAD.encode(payload)),
        Err(TokenError::Malformed)
    );
}

#[test]
fn oversized_input_is_rejected_before_decoding() {
    let huge = "A".repeat(10 * 1024 * 1024);
    assert_eq!(verify(&secret(), &huge), Err(TokenError::Malformed));
    let just_over = "A".repeat(MAX_TOKEN_LEN + 1);
    assert_eq!(verify(&secret(), &just_over), Err(TokenError::Malformed));
}

#[test]
fn garbage_is_malformed() {
    for garbage in [
        "",
        "x",
        "not a token",
        "%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%",
        "../../../../../../../../../../../../../../../../../../../../../../etc/passwd",
    ] {
        assert_eq!(
            verify(&secret(), garbage),
            Err(TokenError::Malformed),
            "{garbage:?}"
        );
    }
}

#[test]
fn a_short_secret_is_refused() {
    assert_eq!(
        LinkSecret::new(&"x".repeat(31)).map(|_| ()),
        Err(SecretError::TooShort { min: 32 })
    );
    // Counted in characters, as the contract says, not bytes.
    assert!(LinkSecret::new(&"é".repeat(31)).is_err());
    assert!(LinkSecret::new(&"é".repeat(32)).is_ok());
    // An unexpanded placeholder is too short to be used by accident.
    assert!(LinkSecret::new("${APPROVAL_LINK_SECRET}").is_err());
}

#[test]
fn the_secret_never_shows_in_debug_output() {
    let printed = format!("{:?}", secret());
    assert_eq!(printed, "LinkSecret(<redacted>)");
    assert!(!printed.contains("0123456789"));
    let printed = format!("{:#?}", Some(secret()));
    assert!(!printed.contains(SECRET), "{printed}");
}

#[test]
fn errors_do_not_echo_the_token() {
    let token = sign(&secret(), &held());
    let tampered = flip_byte(&token, 3, 1);
    let err = verify(&secret(), &tampered).expect_err("tampered");
    assert!(!err.to_string().contains(&tampered));
    assert!(!format!("{err:?}").contains(&tampered));
}

/// One edit of a token: a character replaced, inserted or removed.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, char),
    Insert(usize, char),
    Delete(usize),
}

fn apply(token: &str, edit: &Edit) -> Option<String> {
    let mut chars: Vec<char> = token.chars().collect();
    match *edit {
        Edit::Replace(at, c) => {
            let at = at % chars.len();
            if chars[at] == c {
                return None;
            }
            chars[at] = c;
        }
        Edit::Insert(at, c) => chars.insert(at % (chars.len() + 1), c),
        Edit::Delete(at) => {
            let at = at % chars.len();
            chars.remove(at);
        }
    }
    Some(chars.into_iter().collect())
}

fn token_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => proptest::sample::select(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                .chars()
                .collect::<Vec<_>>()
        ),
        1 => any::<char>(),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), token_char()).prop_map(|(at, c)| Edit::Replace(at, c)),
        (any::<usize>(), token_char()).prop_map(|(at, c)| Edit::Insert(at, c)),
        any::<usize>().prop_map(Edit::Delete),
    ]
}

fn id() -> impl Strategy<Value = String> {
    "[^/]{1,40}"
}

proptest! {
    #[test]
    fn any_revision_round_trips(
        s in id(), c in id(), pending_at in any::<u64>(), folder in any::<bool>()
    ) {
        let kind = if folder { Kind::FolderAccess } else { Kind::Function };
        let rev = revision(&s, &c, pending_at, kind);
        prop_assert_eq!(verify(&secret(), &sign(&secret(), &rev)), Ok(rev));
    }

    /// Canonical base64 makes every edited string decode to other bytes (or
    /// not at all), so no one-character edit of a token verifies — as the
    /// same revision or, worse, as another one.
    #[test]
    fn no_one_character_edit_verifies(
        s in id(), c in id(), pending_at in any::<u64>(), folder in any::<bool>(),
        edit in edit()
    ) {
        let kind = if folder { Kind::FolderAccess } else { Kind::Function };
        let rev = revision(&s, &c, pending_at, kind);
        let token = sign(&secret(), &rev);
        if let Some(edited) = apply(&token, &edit) {
            prop_assert!(verify(&secret(), &edited).is_err(), "{:?} verified", edit);
        }
    }
}
