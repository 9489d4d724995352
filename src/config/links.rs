//! The `links` field of the entry (`architecture/contract.md` § Approval
//! links and the inbox page): off when absent or null.
//!
//! # Format
//!
//! ```json
//! { "secret": "${APPROVAL_LINK_SECRET}",          // ≥ 32 characters once expanded
//!   "public_base_url": "https://gate.example",    // where the engine's HTTP port is reached
//!   "inbox_token": "${APPROVAL_INBOX_TOKEN}" }    // optional: GET /approvals answers 404 without it
//! ```
//!
//! The secret and the inbox token are credentials: their `Debug` output is
//! `<redacted>`, and a value of the wrong shape is refused without echoing
//! it (serde's own messages quote the offending string).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::link_token::{Links, LinksError};

/// A credential from the configuration. Serializes as the plain string (the
/// entry stores it), never shows in `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `text`.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the one place that keys a MAC with it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `links`: approval links and the inbox page. Its configuration schema is
/// derived from here: the attributes give what an operator reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinksConfig {
    /// Signs every link (HMAC-SHA256); at least 32 characters. Rotating it
    /// voids every outstanding link.
    #[schemars(
        with = "String",
        title = "Link secret",
        description = "Signs every link (HMAC-SHA256); at least 32 characters. Write ${APPROVAL_LINK_SECRET} so the value comes from the environment. Changing it voids every outstanding link.",
        length(min = 32),
        example = "example_secret"
    )]
    pub secret: Secret,
    /// The URL the engine's HTTP port is reached at, as a browser sees it
    /// (`https://gate.example`, or with a path prefix a proxy strips).
    #[schemars(
        title = "Public base URL",
        description = "Where a browser reaches the engine's HTTP port (scheme, host, port, optional path prefix). Decisions are accepted only from this origin.",
        regex(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"),
        example = "example_base_url"
    )]
    pub public_base_url: String,
    /// The bearer token of `GET /approvals`; without it the inbox page is 404.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        title = "Inbox token",
        description = "Bearer token of GET /approvals, the list of held calls; at least 32 characters, like the secret (a shorter one keeps the page off and is reported). Write ${APPROVAL_INBOX_TOKEN} so the value comes from the environment. Without it that page answers 404.",
        length(min = 1),
        example = "example_inbox_token"
    )]
    pub inbox_token: Option<Secret>,
}

fn example_secret() -> &'static str {
    "${APPROVAL_LINK_SECRET}"
}

fn example_base_url() -> &'static str {
    "https://approvals.example.com"
}

fn example_inbox_token() -> &'static str {
    "${APPROVAL_INBOX_TOKEN}"
}

impl LinksConfig {
    /// The configuration made ready for use (links off, with the reason,
    /// when the secret or the base URL cannot be used).
    pub(crate) fn compile(&self) -> Result<Links, LinksError> {
        Links::new(
            self.secret.expose(),
            &self.public_base_url,
            self.inbox_token.as_ref().map(Secret::expose),
        )
    }
}

/// `links` as stored: null or absent is off; an object is parsed; anything
/// else is refused with a message that does not quote the value.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<LinksConfig>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value @ Value::Object(_) => LinksConfig::deserialize(value)
            .map(Some)
            .map_err(|err| D::Error::custom(scrub(&err.to_string()))),
        _ => Err(D::Error::custom("links must be an object or null")),
    }
}

/// serde's message cut before any quoted string: `invalid type: string
/// "…"` would repeat a secret put where a number or an object belongs
/// (field names and other values are quoted with backticks and stay).
fn scrub(message: &str) -> String {
    match message.find('"') {
        Some(at) => format!("links: {}…", message[..at].trim_end()),
        None => format!("links: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ApprovalConfig;

    const SECRET: &str = "0123456789abcdef0123456789abcdef-secret";

    #[test]
    fn links_are_off_when_absent_or_null() {
        let absent = ApprovalConfig::from_value(&json!({})).unwrap();
        assert_eq!(absent.links, None);
        let null = ApprovalConfig::from_value(&json!({"links": null})).unwrap();
        assert_eq!(null.links, None);
        assert!(!ApprovalConfig::defaults_json()
            .as_object()
            .unwrap()
            .contains_key("links"));
    }

    #[test]
    fn links_parse_and_round_trip() {
        let value = json!({"links": {"secret": SECRET, "public_base_url": "https://gate.example", "inbox_token": "inbox-token-1"}});
        let config = ApprovalConfig::from_value(&value).unwrap();
        let links = config.links.as_ref().unwrap();
        assert_eq!(links.secret.expose(), SECRET);
        assert_eq!(links.public_base_url, "https://gate.example");
        assert_eq!(config.to_json()["links"], value["links"]);
    }

    #[test]
    fn debug_output_never_shows_the_secret_or_the_inbox_token() {
        let config = ApprovalConfig::from_value(&json!({"links": {"secret": SECRET, "public_base_url": "https://gate.example", "inbox_token": "inbox-token-1"}})).unwrap();
        let debug = format!(
            "{config:?} {:?}",
            super::super::Snapshot::compile(config.clone())
        );
        assert!(!debug.contains(SECRET), "{debug}");
        assert!(!debug.contains("inbox-token-1"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        assert!(debug.contains("https://gate.example"), "{debug}");
    }

    #[test]
    fn unusable_links_are_off_and_reported_without_the_secret() {
        use super::super::Snapshot;
        let short = ApprovalConfig::from_value(&json!({"links": {"secret": "short-secret-7f3a", "public_base_url": "https://gate.example"}})).unwrap();
        let snapshot = Snapshot::compile(short);
        assert!(snapshot.links.is_none());
        assert_eq!(snapshot.errors().len(), 1, "{:?}", snapshot.errors());
        assert!(snapshot.errors()[0].contains("at least 32 characters"));
        assert!(!snapshot.errors()[0].contains("short-secret-7f3a"));
        let bad_base = ApprovalConfig::from_value(
            &json!({"links": {"secret": SECRET, "public_base_url": "gate.example"}}),
        )
        .unwrap();
        let snapshot = Snapshot::compile(bad_base);
        assert!(snapshot.links.is_none());
        assert!(snapshot.errors()[0].contains("public_base_url"));
        let good = ApprovalConfig::from_value(
            &json!({"links": {"secret": SECRET, "public_base_url": "https://gate.example"}}),
        )
        .unwrap();
        let snapshot = Snapshot::compile(good);
        assert!(snapshot.links.is_some());
        assert!(snapshot.errors().is_empty());
    }

    #[test]
    fn rule_21_10_a_short_inbox_token_is_reported_and_only_the_inbox_is_off() {
        use super::super::Snapshot;
        let short = ApprovalConfig::from_value(&json!({"links": {"secret": SECRET,
            "public_base_url": "https://gate.example", "inbox_token": "inbox-token-1"}}))
        .unwrap();
        let snapshot = Snapshot::compile(short);
        let links = snapshot.links.as_ref().expect("links stay on");
        assert!(links.inbox().is_none());
        assert!(!snapshot.is_ok());
        let errors = snapshot.errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("links.inbox_token must be at least 32 characters"),
            "{errors:?}"
        );
        assert!(!errors[0].contains("inbox-token-1"), "{errors:?}");
        let long = ApprovalConfig::from_value(&json!({"links": {"secret": SECRET,
            "public_base_url": "https://gate.example", "inbox_token": "inbox-token-0123456789abcdef-0123"}}))
        .unwrap();
        let snapshot = Snapshot::compile(long);
        assert!(snapshot.links.as_ref().and_then(|l| l.inbox()).is_some());
        assert!(snapshot.is_ok(), "{:?}", snapshot.errors());
    }

    #[test]
    fn a_bad_shape_is_refused_without_echoing_the_value() {
        for value in [
            json!({"links": SECRET}),
            json!({"links": [SECRET]}),
            json!({"links": {"secret": SECRET}}),
            json!({"links": {"secret": SECRET, "public_base_url": "https://gate.example", "extra": SECRET}}),
            json!({"links": {"secret": 5, "public_base_url": SECRET}}),
        ] {
            let err = ApprovalConfig::from_value(&value).unwrap_err().to_string();
            assert!(!err.contains(SECRET), "{value}: {err}");
            assert!(err.contains("links"), "{value}: {err}");
        }
    }
}
