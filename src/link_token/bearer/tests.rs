use super::*;

const TOKEN: &str = "inbox-token-for-tests";

fn inbox() -> InboxToken {
    InboxToken::new(TOKEN).expect("non-blank")
}

#[test]
fn the_right_bearer_token_is_let_in() {
    assert!(inbox().authorizes(Some("Bearer inbox-token-for-tests")));
    assert!(inbox().authorizes(Some("bearer inbox-token-for-tests")));
    assert!(inbox().authorizes(Some("BEARER  inbox-token-for-tests ")));
}

#[test]
fn anything_else_is_kept_out() {
    for header in [
        None,
        Some(""),
        Some("Bearer"),
        Some("Bearer "),
        Some("inbox-token-for-tests"),
        Some("Basic inbox-token-for-tests"),
        Some("Bearer inbox-token-for-test"),
        Some("Bearer inbox-token-for-testss"),
        Some("Bearer INBOX-TOKEN-FOR-TESTS"),
        Some("Bearer inbox-token-for-tests extra"),
        Some("Bearerinbox-token-for-tests"),
    ] {
        assert!(!inbox().authorizes(header), "{header:?}");
    }
}

#[test]
fn a_blank_inbox_token_is_refused() {
    assert_eq!(InboxToken::new("").map(|_| ()), Err(InboxTokenError::Empty));
    assert_eq!(
        InboxToken::new(" \t").map(|_| ()),
        Err(InboxTokenError::Empty)
    );
}

#[test]
fn the_digest_is_keyed_hmac_under_the_padded_domain() {
    // HMAC zero-pads a short key to the block: keying with the bare domain
    // string must give the same digest as the padded constant.
    let mut by_slice =
        HmacSha256::new_from_slice(b"approval-gate/inbox-bearer/v1").expect("any key length");
    by_slice.update(TOKEN.as_bytes());
    assert_eq!(
        by_slice.finalize().into_bytes().as_slice(),
        inbox().digest.as_slice()
    );
}

#[test]
fn the_token_never_shows_in_debug_output() {
    let printed = format!("{:?}", inbox());
    assert_eq!(printed, "InboxToken(<redacted>)");
}
