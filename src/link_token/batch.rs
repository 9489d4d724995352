//! Batch link tokens: a signed name for the exact list of held calls of one
//! turn that a call's page offers to "Allow all" (`architecture/contract.md`
//! § What-if and batch decisions). PURE.
//!
//! # Format (version 1)
//!
//! ```text
//! token   = "b." ‖ base64url-no-pad(payload ‖ tag)
//! payload = 0x01                                  version
//!         ‖ u16 len ‖ session_id                  (UTF-8, big-endian lengths)
//!         ‖ u16 len ‖ turn_id
//!         ‖ u8 n                                  2 ≤ n ≤ MAX_BATCH_ITEMS
//!         ‖ n × ( pending_at u64 ‖ u16 len ‖ function_call_id )
//! tag     = HMAC-SHA256(secret, "approval-gate/link-batch/v1" ‖ 0x00 ‖ payload)
//! ```
//!
//! The prefix `b.` cannot begin a one-call token (base64url has no `.`), so
//! the two families never parse as each other, and their tags live in
//! different domains: a one-call link can never be replayed as a batch, nor
//! a batch token as a one-call link. A batch token names exactly the
//! revisions the page showed; a call held after the page was rendered is
//! not in it, and a listed call whose revision changed is skipped.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;

use super::token::{take_id, LinkSecret, TokenError, MAX_ID_BYTES, TAG_LEN};

/// The only payload version written and read.
const VERSION: u8 = 1;
/// The batch family's HMAC domain.
const DOMAIN: &[u8] = b"approval-gate/link-batch/v1";
/// What every batch token starts with.
pub(crate) const PREFIX: &str = "b.";
/// The most calls one batch link names; a turn with more held calls gets no
/// "Allow all" on its pages (the console's batch decision remains).
pub(crate) const MAX_BATCH_ITEMS: usize = 32;
/// The longest batch token written or read; anything longer is refused
/// unread (a turn whose ids make it longer gets no "Allow all").
pub(crate) const MAX_BATCH_TOKEN_LEN: usize = 8_192;

/// The held calls of one turn, as a page showed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchRevisions {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// `(function_call_id, pending_at)` of each call, in the page's order.
    pub items: Vec<(String, u64)>,
}

impl BatchRevisions {
    fn payload(&self) -> Option<Vec<u8>> {
        if !(2..=MAX_BATCH_ITEMS).contains(&self.items.len()) {
            return None;
        }
        let mut out = vec![VERSION];
        let id = |out: &mut Vec<u8>, id: &str| -> Option<()> {
            if id.is_empty() || id.contains('/') || id.len() > MAX_ID_BYTES {
                return None;
            }
            out.extend_from_slice(&(id.len() as u16).to_be_bytes());
            out.extend_from_slice(id.as_bytes());
            Some(())
        };
        id(&mut out, &self.session_id)?;
        id(&mut out, &self.turn_id)?;
        out.push(self.items.len() as u8);
        for (cid, pending_at) in &self.items {
            out.extend_from_slice(&pending_at.to_be_bytes());
            id(&mut out, cid)?;
        }
        Some(out)
    }

    fn from_payload(payload: &[u8]) -> Option<BatchRevisions> {
        let (&version, rest) = payload.split_first()?;
        if version != VERSION {
            return None;
        }
        let (session_id, rest) = take_id(rest)?;
        let (turn_id, rest) = take_id(rest)?;
        let (&n, mut rest) = rest.split_first()?;
        let mut items = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let (pending_at, after) = rest.split_first_chunk::<8>()?;
            let (cid, after) = take_id(after)?;
            items.push((cid.to_owned(), u64::from_be_bytes(*pending_at)));
            rest = after;
        }
        let batch = BatchRevisions {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            items,
        };
        // Only what `payload` writes: the same bytes back, nothing after.
        (rest.is_empty() && batch.payload().as_deref() == Some(payload)).then_some(batch)
    }
}

/// The token for `batch`; `None` when no batch link can name it (fewer than
/// two or more than [`MAX_BATCH_ITEMS`] calls, an unusable id, too long).
pub(crate) fn sign(secret: &LinkSecret, batch: &BatchRevisions) -> Option<String> {
    let mut bytes = batch.payload()?;
    let tag = secret.mac_in(DOMAIN, &bytes).finalize().into_bytes();
    bytes.extend_from_slice(&tag);
    let token = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    (token.len() <= MAX_BATCH_TOKEN_LEN).then_some(token)
}

/// The revisions `token` names, if `secret` signed it as a batch. The
/// length is checked before decoding, the tag before the payload is parsed.
pub(crate) fn verify(secret: &LinkSecret, token: &str) -> Result<BatchRevisions, TokenError> {
    let Some(body) = token.strip_prefix(PREFIX) else {
        return Err(TokenError::Malformed);
    };
    if token.len() > MAX_BATCH_TOKEN_LEN {
        return Err(TokenError::Malformed);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| TokenError::Malformed)?;
    let Some(split) = bytes.len().checked_sub(TAG_LEN) else {
        return Err(TokenError::Malformed);
    };
    let (payload, tag) = bytes.split_at(split);
    if payload.first() != Some(&VERSION) {
        return Err(TokenError::Malformed);
    }
    secret
        .mac_in(DOMAIN, payload)
        .verify_slice(tag)
        .map_err(|_| TokenError::BadSignature)?;
    BatchRevisions::from_payload(payload).ok_or(TokenError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_token::token::{self, Kind, Revision};

    fn secret(text: &str) -> LinkSecret {
        LinkSecret::new(text).expect("a usable secret")
    }

    fn batch(n: usize) -> BatchRevisions {
        BatchRevisions {
            session_id: "s".into(),
            turn_id: "t".into(),
            items: (0..n)
                .map(|i| (format!("c{i}"), 1_000 + i as u64))
                .collect(),
        }
    }

    #[test]
    fn rule_24_a_batch_token_names_exactly_its_revisions() {
        let key = secret("0123456789abcdef0123456789abcdef");
        let token = sign(&key, &batch(3)).expect("signed");
        assert!(token.starts_with(PREFIX));
        assert_eq!(verify(&key, &token), Ok(batch(3)));
        // Another secret, a flipped character, a truncation: refused.
        let other = secret("fedcba9876543210fedcba9876543210");
        assert_eq!(verify(&other, &token), Err(TokenError::BadSignature));
        let mut flipped = token.clone().into_bytes();
        let last = flipped.len() - 5;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        assert!(verify(&key, &String::from_utf8(flipped).unwrap()).is_err());
        assert!(verify(&key, &token[..token.len() - 4]).is_err());
        // One call, or more than the cap: no batch link.
        assert_eq!(sign(&key, &batch(1)), None);
        assert_eq!(sign(&key, &batch(MAX_BATCH_ITEMS + 1)), None);
        assert!(sign(&key, &batch(MAX_BATCH_ITEMS)).is_some());
    }

    #[test]
    fn rule_24_one_call_tokens_and_batch_tokens_never_verify_as_each_other() {
        let key = secret("0123456789abcdef0123456789abcdef");
        let single = token::sign(
            &key,
            &Revision::new("s", "c0", 1_000, Kind::Function).expect("revision"),
        );
        assert_eq!(verify(&key, &single), Err(TokenError::Malformed));
        assert_eq!(
            verify(&key, &format!("{PREFIX}{single}")),
            Err(TokenError::BadSignature),
            "a one-call tag is not a batch tag"
        );
        let batch = sign(&key, &batch(2)).expect("signed");
        assert!(token::verify(&key, &batch).is_err());
        assert!(token::verify(&key, batch.trim_start_matches(PREFIX)).is_err());
    }
}
