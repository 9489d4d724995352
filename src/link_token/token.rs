//! Link tokens: a signed, self-contained name for one revision of one held
//! call.
//!
//! # Format (version 1)
//!
//! The token is `base64url` without padding (RFC 4648 §5, canonical: no
//! stray bits in the last character) of `payload ‖ tag`:
//!
//! ```text
//! payload = 0x01                      version
//!         ‖ kind                      0x00 function, 0x01 folder_access
//!         ‖ pending_at                u64, big-endian (ms since the epoch)
//!         ‖ len(session_id)           u16, big-endian, then the UTF-8 bytes
//!         ‖ len(function_call_id)     u16, big-endian, then the UTF-8 bytes
//! tag     = HMAC-SHA256(secret, "approval-gate/link/v1" ‖ 0x00 ‖ payload)   32 bytes
//! ```
//!
//! The domain prefix keeps a link tag from ever being valid for any other
//! message the same secret might one day sign. The payload is not secret (it
//! carries only ids and a time) and not encrypted; it is authenticated.
//!
//! [`verify`] bounds the token's length before decoding anything, checks the
//! tag in constant time (`Mac::verify_slice`) before it parses a single field
//! of the payload, and accepts only the exact string [`sign`] writes for that
//! revision.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

#[cfg(test)]
mod tests;

type HmacSha256 = Hmac<Sha256>;

/// The only payload version this worker writes and reads.
const VERSION: u8 = 1;
/// Prefixed (with a 0 byte) to every payload before it is signed.
const DOMAIN: &[u8] = b"approval-gate/link/v1";
/// HMAC-SHA256 output.
pub(super) const TAG_LEN: usize = 32;
/// version, kind, pending_at, and the two length prefixes.
const FIXED_LEN: usize = 1 + 1 + 8 + 2 + 2;

/// The longest `session_id` / `function_call_id` (in UTF-8 bytes) a link can
/// name. Real ids are a few dozen bytes; the bound keeps every token short
/// enough for a URL and lets [`verify`] reject a huge path before decoding.
pub(crate) const MAX_ID_BYTES: usize = 512;

/// The longest token [`sign`] can write; [`verify`] rejects anything longer
/// without looking at it (1427 characters).
pub(crate) const MAX_TOKEN_LEN: usize = base64_len(FIXED_LEN + 2 * MAX_ID_BYTES + TAG_LEN);

/// The shortest token [`sign`] can write (two one-byte ids).
const MIN_TOKEN_LEN: usize = base64_len(FIXED_LEN + 2 + TAG_LEN);

/// The unpadded base64 length of `bytes` bytes.
const fn base64_len(bytes: usize) -> usize {
    (bytes * 4).div_ceil(3)
}

/// The minimum length of a link secret, in characters (`architecture/contract.md` § Approval links and the inbox page).
pub(crate) const MIN_SECRET_CHARS: usize = 32;

/// The configured `links.secret`, ready to sign and verify.
///
/// Its `Debug` output never shows the secret.
#[derive(Clone)]
pub(crate) struct LinkSecret {
    /// HMAC-SHA256 keyed with the secret; cloned for every token.
    keyed: HmacSha256,
}

/// A `links.secret` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SecretError {
    /// Shorter than [`MIN_SECRET_CHARS`] characters. An unset
    /// `${APPROVAL_LINK_SECRET}` left as literal text lands here too.
    #[error("links.secret must be at least {min} characters long")]
    TooShort {
        /// The minimum.
        min: usize,
    },
    /// HMAC-SHA256 refused the key. It accepts keys of every length, so this
    /// does not happen; it exists so no configuration can reach a panic.
    #[error("links.secret cannot key HMAC-SHA256")]
    Unkeyable,
}

impl LinkSecret {
    /// Accepts a secret of at least [`MIN_SECRET_CHARS`] characters.
    pub(crate) fn new(secret: &str) -> Result<LinkSecret, SecretError> {
        if secret.chars().count() < MIN_SECRET_CHARS {
            return Err(SecretError::TooShort {
                min: MIN_SECRET_CHARS,
            });
        }
        let keyed =
            HmacSha256::new_from_slice(secret.as_bytes()).map_err(|_| SecretError::Unkeyable)?;
        Ok(LinkSecret { keyed })
    }

    /// The tag of `payload` under this secret, domain-separated.
    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        self.mac_in(DOMAIN, payload)
    }

    /// The tag of `payload` in another token family's `domain` (a batch
    /// link's), so no tag of one family is ever valid in the other.
    pub(super) fn mac_in(&self, domain: &[u8], payload: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(domain);
        mac.update(&[0]);
        mac.update(payload);
        mac
    }
}

impl std::fmt::Debug for LinkSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkSecret(<redacted>)")
    }
}

/// Which prompt a record is; part of its revision (`architecture/contract.md` § The pending inbox, `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// "May this call run?"
    Function,
    /// "Allow access to this folder?"
    FolderAccess,
}

impl Kind {
    fn to_byte(self) -> u8 {
        match self {
            Kind::Function => 0,
            Kind::FolderAccess => 1,
        }
    }

    fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            0 => Some(Kind::Function),
            1 => Some(Kind::FolderAccess),
            _ => None,
        }
    }
}

/// One revision of one held call: what a token names.
///
/// A new hold under the same ids (a folder prompt replacing a function hold,
/// a later hold of a reused id) has a different `pending_at` or `kind`, so
/// the old token names a revision that no longer exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Revision {
    session_id: String,
    function_call_id: String,
    pending_at: u64,
    kind: Kind,
}

/// Ids that no link can name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RevisionError {
    /// An empty id, or one containing `/` (`architecture/contract.md` § Errors: such ids are never held).
    #[error("session_id / function_call_id must be non-empty and must not contain \"/\"")]
    InvalidId,
    /// An id longer than [`MAX_ID_BYTES`] UTF-8 bytes: the record gets no link.
    #[error("session_id / function_call_id longer than {max} bytes cannot be put in a link")]
    TooLong {
        /// [`MAX_ID_BYTES`].
        max: usize,
    },
}

impl Revision {
    /// The revision of the record `<session_id>/<function_call_id>` held at
    /// `pending_at` as `kind`.
    pub(crate) fn new(
        session_id: &str,
        function_call_id: &str,
        pending_at: u64,
        kind: Kind,
    ) -> Result<Revision, RevisionError> {
        for id in [session_id, function_call_id] {
            if id.is_empty() || id.contains('/') {
                return Err(RevisionError::InvalidId);
            }
            if id.len() > MAX_ID_BYTES {
                return Err(RevisionError::TooLong { max: MAX_ID_BYTES });
            }
        }
        Ok(Revision {
            session_id: session_id.to_owned(),
            function_call_id: function_call_id.to_owned(),
            pending_at,
            kind,
        })
    }

    /// The session the call belongs to.
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The call's id.
    pub(crate) fn function_call_id(&self) -> &str {
        &self.function_call_id
    }

    /// When the revision was held (ms since the epoch).
    pub(crate) fn pending_at(&self) -> u64 {
        self.pending_at
    }

    /// Function hold or folder prompt.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether the record now stored under this revision's ids is this
    /// revision. `false` means the token's record is gone (410): another
    /// hold replaced it under the same ids.
    pub(crate) fn matches(&self, pending_at: u64, kind: Kind) -> bool {
        self.pending_at == pending_at && self.kind == kind
    }

    fn payload(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FIXED_LEN + self.session_id.len() + self.function_call_id.len());
        out.push(VERSION);
        out.push(self.kind.to_byte());
        out.extend_from_slice(&self.pending_at.to_be_bytes());
        for id in [&self.session_id, &self.function_call_id] {
            // Bounded by MAX_ID_BYTES (checked in `new`), so it fits in a u16.
            out.extend_from_slice(&(id.len() as u16).to_be_bytes());
            out.extend_from_slice(id.as_bytes());
        }
        out
    }

    /// Parses a payload [`Revision::payload`] wrote; `None` for anything else.
    fn from_payload(payload: &[u8]) -> Option<Revision> {
        let (&version, rest) = payload.split_first()?;
        if version != VERSION {
            return None;
        }
        let (&kind, rest) = rest.split_first()?;
        let kind = Kind::from_byte(kind)?;
        let (pending_at, rest) = rest.split_first_chunk::<8>()?;
        let (session_id, rest) = take_id(rest)?;
        let (function_call_id, rest) = take_id(rest)?;
        if !rest.is_empty() {
            return None;
        }
        Revision::new(
            session_id,
            function_call_id,
            u64::from_be_bytes(*pending_at),
            kind,
        )
        .ok()
    }
}

/// A `u16` length prefix and that many UTF-8 bytes.
pub(super) fn take_id(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    if rest.len() < len {
        return None;
    }
    let (id, rest) = rest.split_at(len);
    Some((std::str::from_utf8(id).ok()?, rest))
}

/// A token that names no revision.
///
/// Both variants answer 403; the split is for logs and tests. Neither carries
/// the token: tokens are bearer credentials and never logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// Not a token this worker could have written: too long or too short,
    /// not canonical base64url, an unknown version, or a payload that does not
    /// parse.
    #[error("malformed approval link token")]
    Malformed,
    /// Well-formed, but the tag is not this secret's tag for the payload:
    /// tampered, or signed under another secret.
    #[error("approval link token signature does not verify")]
    BadSignature,
}

/// The token for `revision` under `secret` (the last path segment of its
/// `approval_url`).
pub(crate) fn sign(secret: &LinkSecret, revision: &Revision) -> String {
    let mut bytes = revision.payload();
    let tag = secret.mac(&bytes).finalize().into_bytes();
    bytes.extend_from_slice(&tag);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The revision `token` names, if `secret` signed it.
///
/// Total and cheap on hostile input: the length is checked before decoding,
/// the tag before the payload is parsed.
pub(crate) fn verify(secret: &LinkSecret, token: &str) -> Result<Revision, TokenError> {
    if !(MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&token.len()) {
        return Err(TokenError::Malformed);
    }
    // The default engine rejects padding and non-zero trailing bits, so each
    // byte string has exactly one accepted spelling.
    let bytes = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| TokenError::Malformed)?;
    let Some(split) = bytes.len().checked_sub(TAG_LEN) else {
        return Err(TokenError::Malformed);
    };
    let (payload, tag) = bytes.split_at(split);
    if payload.first() != Some(&VERSION) {
        return Err(TokenError::Malformed);
    }
    secret
        .mac(payload)
        .verify_slice(tag)
        .map_err(|_| TokenError::BadSignature)?;
    Revision::from_payload(payload).ok_or(TokenError::Malformed)
}
