//! The `links` configuration made ready for use: the keyed secret, the base
//! every `approval_url` starts with, the origin a decision must come from,
//! and the inbox's bearer token.
//!
//! A secret or a base URL that cannot be used turns links off; an inbox token
//! that cannot be used (shorter than [`MIN_SECRET_CHARS`], like the secret)
//! turns only the inbox page off. Either is reported, never with the value.

use super::batch::{self, BatchRevisions};
use super::bearer::{InboxToken, InboxTokenError};
use super::token::{self, Kind, LinkSecret, Revision, SecretError, TokenError, MIN_SECRET_CHARS};

/// Why a configured `links` cannot be used (links are then off, or only the
/// inbox page for an inbox token; `approval::health` reports it). No variant
/// carries the secret or the token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinksError {
    /// The secret is too short.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The inbox token is shorter than [`MIN_SECRET_CHARS`] characters.
    #[error("links.inbox_token must be at least {min} characters long; the inbox page is off")]
    InboxTokenTooShort {
        /// The minimum.
        min: usize,
    },
    /// The inbox token is blank.
    #[error("{0}; the inbox page is off")]
    InboxToken(#[from] InboxTokenError),
    /// `public_base_url` is not an absolute `http(s)` URL without user,
    /// query or fragment.
    #[error("links.public_base_url must be an absolute http(s) URL without user, query or fragment: {0}")]
    BaseUrl(String),
}

/// `links`, compiled. Its `Debug` output shows no credential.
#[derive(Debug)]
pub(crate) struct Links {
    secret: LinkSecret,
    /// `public_base_url` without a trailing `/`.
    base_url: String,
    /// The base URL's origin (`https://gate.example`, `http://127.0.0.1:8080`),
    /// as a browser writes it in an `Origin` header.
    origin: String,
    inbox: Option<InboxToken>,
    /// Why the configured inbox token is not used (the page is then off).
    inbox_refused: Option<LinksError>,
}

impl Links {
    /// Checks and keys a `links` configuration. An inbox token that cannot
    /// be used leaves links on and the inbox page off
    /// ([`Links::inbox_refused`] says why).
    pub(crate) fn new(
        secret: &str,
        public_base_url: &str,
        inbox_token_text: Option<&str>,
    ) -> Result<Links, LinksError> {
        let secret = LinkSecret::new(secret)?;
        let (base_url, origin) = base_and_origin(public_base_url)?;
        let (inbox, inbox_refused) = match inbox_token_text.map(inbox_token) {
            None => (None, None),
            Some(Ok(token)) => (Some(token), None),
            Some(Err(err)) => (None, Some(err)),
        };
        Ok(Links {
            secret,
            base_url,
            origin,
            inbox,
            inbox_refused,
        })
    }

    /// Why the configured `inbox_token` is not used, if it is not.
    pub(crate) fn inbox_refused(&self) -> Option<&LinksError> {
        self.inbox_refused.as_ref()
    }

    /// The record's `approval_url`; `None` for ids no link can name (longer
    /// than [`token::MAX_ID_BYTES`]).
    pub(crate) fn approval_url(
        &self,
        session_id: &str,
        function_call_id: &str,
        pending_at: u64,
        kind: Kind,
    ) -> Option<String> {
        let revision = Revision::new(session_id, function_call_id, pending_at, kind).ok()?;
        Some(format!(
            "{}/approvals/{}",
            self.base_url,
            token::sign(&self.secret, &revision)
        ))
    }

    /// The revision a token names, if this secret signed it.
    pub(crate) fn verify(&self, token: &str) -> Result<Revision, TokenError> {
        token::verify(&self.secret, token)
    }

    /// The "Allow all" token for `batch` (the last path segment it POSTs
    /// to); `None` when no batch link can name it.
    pub(crate) fn batch_token(&self, batch: &BatchRevisions) -> Option<String> {
        batch::sign(&self.secret, batch)
    }

    /// The revisions a batch token names, if this secret signed it.
    pub(crate) fn verify_batch(&self, token: &str) -> Result<BatchRevisions, TokenError> {
        batch::verify(&self.secret, token)
    }

    /// The origin decisions must come from.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// The inbox's bearer token, when configured.
    pub(crate) fn inbox(&self) -> Option<&InboxToken> {
        self.inbox.as_ref()
    }
}

/// The inbox's bearer token: at least [`MIN_SECRET_CHARS`] characters, like
/// the link secret (it opens the list of every held call), and not blank.
fn inbox_token(token: &str) -> Result<InboxToken, LinksError> {
    if token.chars().count() < MIN_SECRET_CHARS {
        return Err(LinksError::InboxTokenTooShort {
            min: MIN_SECRET_CHARS,
        });
    }
    Ok(InboxToken::new(token)?)
}

/// `public_base_url` normalised (no trailing `/`) and its origin.
fn base_and_origin(text: &str) -> Result<(String, String), LinksError> {
    let bad = |why: &str| LinksError::BaseUrl(why.to_string());
    let url = url::Url::parse(text.trim()).map_err(|err| bad(&err.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme is not http or https"));
    }
    if url.host().is_none() {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it names a user"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it has a query or a fragment"));
    }
    let origin = url.origin().ascii_serialization();
    let base = url.as_str().trim_end_matches('/').to_string();
    Ok((base, origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    /// The `links` configuration's three fields.
    struct Config {
        secret: String,
        base: String,
        inbox: Option<String>,
    }

    fn config(base: &str) -> Config {
        Config {
            secret: SECRET.to_string(),
            base: base.to_string(),
            inbox: None,
        }
    }

    fn new(c: &Config) -> Result<Links, LinksError> {
        Links::new(&c.secret, &c.base, c.inbox.as_deref())
    }

    #[test]
    fn the_base_is_normalised_and_its_origin_is_what_a_browser_sends() {
        for (base, want_base, want_origin) in [
            (
                "https://Gate.Example/",
                "https://gate.example",
                "https://gate.example",
            ),
            (
                "https://gate.example:443",
                "https://gate.example",
                "https://gate.example",
            ),
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080",
            ),
            (
                "https://corp.example/gate/",
                "https://corp.example/gate",
                "https://corp.example",
            ),
        ] {
            let links = new(&config(base)).unwrap();
            assert_eq!(links.base_url, want_base, "{base}");
            assert_eq!(links.origin(), want_origin, "{base}");
        }
    }

    #[test]
    fn unusable_bases_are_refused() {
        for base in [
            "gate.example",
            "/approvals",
            "ftp://gate.example",
            "https://user:pw@gate.example",
            "https://gate.example/?a=1",
            "https://gate.example/#x",
            "javascript:alert(1)",
        ] {
            assert!(
                matches!(new(&config(base)), Err(LinksError::BaseUrl(_))),
                "{base}"
            );
        }
    }

    #[test]
    fn a_short_secret_is_refused() {
        let mut short = config("https://gate.example");
        short.secret = "too short".to_string();
        assert!(matches!(new(&short), Err(LinksError::Secret(_))));
    }

    #[test]
    fn rule_21_10_an_inbox_token_shorter_than_32_characters_keeps_the_inbox_off() {
        let short_token = "inbox-token-for-tests-4f2a-31ch";
        assert_eq!(short_token.chars().count(), MIN_SECRET_CHARS - 1);
        for token in [short_token, "", "q7x", &" ".repeat(MIN_SECRET_CHARS)] {
            let mut with = config("https://gate.example");
            with.inbox = Some(token.to_string());
            let links = new(&with).expect("links stay on");
            assert!(links.inbox().is_none(), "{token:?}");
            let why = links.inbox_refused().expect("reported").to_string();
            assert!(why.contains("links.inbox_token"), "{why}");
            assert!(why.contains("inbox page is off"), "{why}");
            if !token.trim().is_empty() {
                assert!(!why.contains(token), "{why}");
            }
        }
        let mut long = config("https://gate.example");
        long.inbox = Some("é".repeat(MIN_SECRET_CHARS));
        let links = new(&long).expect("links on");
        assert!(
            links.inbox().is_some(),
            "32 characters (not bytes) are enough"
        );
        assert!(links.inbox_refused().is_none());
    }

    #[test]
    fn an_approval_url_carries_a_token_for_the_records_revision() {
        let links = new(&config("https://gate.example/")).unwrap();
        let url = links
            .approval_url("s_1", "c_1", 42, Kind::FolderAccess)
            .unwrap();
        let token = url.strip_prefix("https://gate.example/approvals/").unwrap();
        let revision = links.verify(token).unwrap();
        assert_eq!(revision.session_id(), "s_1");
        assert_eq!(revision.function_call_id(), "c_1");
        assert!(revision.matches(42, Kind::FolderAccess));
        assert!(!revision.matches(42, Kind::Function));
    }
}
