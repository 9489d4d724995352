//! Who may see the inbox page: `GET /approvals` answers only a request with
//! `Authorization: Bearer <inbox_token>` (`architecture/contract.md` § Approval links and the inbox page).
//!
//! The comparison must not leak, through its timing, how much of a guess is
//! right. Both sides are hashed to 32 bytes with HMAC-SHA256 under a fixed,
//! public, domain-separating key, and the two digests are compared with
//! `Mac::verify_slice` (constant time); equal digests mean equal tokens.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

#[cfg(test)]
mod tests;

type HmacSha256 = Hmac<Sha256>;

/// Not a secret: it only separates these digests from any other use of
/// SHA-256 in the worker. One SHA-256 block long, so keying is infallible
/// (HMAC zero-pads shorter keys to the block anyway).
const DOMAIN_KEY: [u8; 64] = domain_key(b"approval-gate/inbox-bearer/v1");

const fn domain_key(domain: &[u8]) -> [u8; 64] {
    let mut key = [0u8; 64];
    let mut i = 0;
    while i < domain.len() {
        key[i] = domain[i];
        i += 1;
    }
    key
}

/// The configured `links.inbox_token`, kept only as its digest.
///
/// Its `Debug` output never shows the token.
#[derive(Clone)]
pub(crate) struct InboxToken {
    digest: Vec<u8>,
}

/// An `inbox_token` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InboxTokenError {
    /// Empty or all whitespace: it would let anyone who sends
    /// `Authorization: Bearer ` in.
    #[error("links.inbox_token must not be empty")]
    Empty,
}

impl InboxToken {
    /// Accepts any non-blank token.
    pub(crate) fn new(token: &str) -> Result<InboxToken, InboxTokenError> {
        if token.trim().is_empty() {
            return Err(InboxTokenError::Empty);
        }
        Ok(InboxToken {
            digest: digest(token.as_bytes()).finalize().into_bytes().to_vec(),
        })
    }

    /// Whether an `Authorization` header value (`None` when absent) carries
    /// this token: the scheme `Bearer` (any ASCII case), one or more spaces,
    /// then exactly the token.
    pub(crate) fn authorizes(&self, authorization: Option<&str>) -> bool {
        let Some(presented) = authorization.and_then(bearer_credentials) else {
            return false;
        };
        digest(presented.as_bytes())
            .verify_slice(&self.digest)
            .is_ok()
    }
}

impl std::fmt::Debug for InboxToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InboxToken(<redacted>)")
    }
}

/// The credentials of a `Bearer` authorization value (RFC 6750 §2.1).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let credentials = rest.trim_start_matches(' ');
    (!credentials.is_empty()).then_some(credentials)
}

fn digest(bytes: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new(&DOMAIN_KEY.into());
    mac.update(bytes);
    mac
}
