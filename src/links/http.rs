//! PURE: what the engine's HTTP worker (`iii-http`) hands a bound function
//! and takes back, and the checks a decision must pass before its token is
//! even looked at.
//!
//! # Format
//!
//! In (the engine's request object; measured on engine 0.25):
//!
//! ```text
//! { method: "POST", path: "/approvals/:token" (the PATTERN), path_params: {token} (not
//!   percent-decoded), query_params, headers: {lower-case name: last value},
//!   body: JSON only when content-type contains "application/json", else null, ... }
//! ```
//!
//! Out: `{ status_code, headers: {name: value}, body }`: a string body with
//! its own `Content-Type` goes out as is (the pages); an object body with
//! `Content-Type: application/json` as JSON. Never `null`: the engine would
//! hold the request until its timeout and answer 504.
//!
//! # Why a decision checks where it comes from
//!
//! Without a `cors` configuration the engine answers every preflight and
//! adds `Access-Control-Allow-Origin: *` to every answer, so any web page
//! can POST JSON to a link it knows. A decision is therefore refused (403,
//! nothing changes) unless it is a same-origin JSON request:
//! `Sec-Fetch-Site`, when sent, is `same-origin`; `Origin`, when sent, is
//! the origin of `links.public_base_url`; `Content-Type` is
//! `application/json` and the body a JSON object (a form post arrives with
//! a `null` body). A client that sends neither header is not a browser, so
//! not a cross-site request forgery.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::page::GoneReason;
use crate::pending::{Removal, Resolution};

/// The request object `iii-http` sends: the fields the worker reads (the
/// others are ignored; the request path is never read, so never logged).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub(crate) struct HttpRequest {
    /// The pattern's parameters as sent (not percent-decoded).
    #[serde(default)]
    pub path_params: Map<String, Value>,
    /// Header names in lower case; the last value of a repeated header.
    #[serde(default)]
    pub headers: Map<String, Value>,
    /// The parsed JSON body, or null (a decision is always an object).
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub body: Value,
}

impl HttpRequest {
    /// Reads the engine's request object; anything unreadable is a request
    /// with nothing in it (which every handler refuses).
    pub(crate) fn parse(input: Value) -> HttpRequest {
        serde_json::from_value(input).unwrap_or_default()
    }

    /// A header's value (`name` in lower case; the engine lower-cases names).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| value.as_str())
    }

    /// A path parameter.
    pub(crate) fn path_param(&self, name: &str) -> Option<&str> {
        self.path_params.get(name).and_then(Value::as_str)
    }
}

/// What a bound function answers `iii-http`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct HttpResponse {
    /// The HTTP status.
    pub status_code: u16,
    /// Response headers.
    pub headers: BTreeMap<String, String>,
    /// An HTML string, or a JSON object.
    #[schemars(schema_with = "string_or_object")]
    pub body: Value,
}

impl HttpResponse {
    /// An HTML page with the link endpoints' security headers.
    pub(crate) fn html(status_code: u16, page: String) -> HttpResponse {
        HttpResponse {
            status_code,
            headers: owned(&super::page::html_headers()),
            body: Value::String(page),
        }
    }

    /// A JSON answer with the link endpoints' security headers.
    pub(crate) fn json(status_code: u16, body: Value) -> HttpResponse {
        HttpResponse {
            status_code,
            headers: owned(&super::page::json_headers()),
            body,
        }
    }

    /// A JSON error: `{"error": {"code", "message", ...extra}}`, the
    /// envelope the engine uses for its own errors. Never internals.
    pub(crate) fn error(status_code: u16, code: &str, message: &str, extra: Value) -> HttpResponse {
        let mut error = json!({"code": code, "message": message});
        if let (Some(error), Value::Object(extra)) = (error.as_object_mut(), extra) {
            error.extend(extra);
        }
        HttpResponse::json(status_code, json!({ "error": error }))
    }

    /// Adds (or replaces) a header.
    pub(crate) fn with_header(mut self, name: &str, value: &str) -> HttpResponse {
        self.headers.insert(name.to_string(), value.to_string());
        self
    }
}

/// The schema of a response body: a page or a JSON object.
fn string_or_object(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    use schemars::schema::{InstanceType, Schema, SchemaObject, SubschemaValidation};
    let of = |t: InstanceType| {
        Schema::Object(SchemaObject {
            instance_type: Some(t.into()),
            ..SchemaObject::default()
        })
    };
    Schema::Object(SchemaObject {
        subschemas: Some(Box::new(SubschemaValidation {
            any_of: Some(vec![of(InstanceType::String), of(InstanceType::Object)]),
            ..SubschemaValidation::default()
        })),
        ..SchemaObject::default()
    })
}

fn owned(headers: &[(&str, &str)]) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// Why a decision was refused before its token was read (403).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `Sec-Fetch-Site` or `Origin` says another site sent it.
    CrossSite,
    /// Not `Content-Type: application/json` with a JSON object body (a
    /// form post, `text/plain`, an empty or unparsable body).
    NotJson,
}

impl Refusal {
    /// The error code of the 403 answer.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Refusal::CrossSite => "cross_site",
            Refusal::NotJson => "not_json",
        }
    }

    /// What the 403 answer says.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::CrossSite => {
                "Decisions are accepted only from the approval page itself. Nothing changed."
            }
            Refusal::NotJson => {
                "Decisions are accepted only as a JSON object (Content-Type: application/json). Nothing changed."
            }
        }
    }
}

/// The body of a decision that comes from a same-origin JSON request, or
/// why it is refused. `origin` is `links.public_base_url`'s origin.
pub(crate) fn same_origin_json<'a>(
    request: &'a HttpRequest,
    origin: &str,
) -> Result<&'a Map<String, Value>, Refusal> {
    if let Some(site) = request.header("sec-fetch-site") {
        if !site.trim().eq_ignore_ascii_case("same-origin") {
            return Err(Refusal::CrossSite);
        }
    }
    if let Some(sent) = request.header("origin") {
        if !sent.trim().eq_ignore_ascii_case(origin) {
            return Err(Refusal::CrossSite);
        }
    }
    let json = request
        .header("content-type")
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    match (&request.body, json) {
        (Value::Object(body), true) => Ok(body),
        _ => Err(Refusal::NotJson),
    }
}

/// What a link to a record that is no longer there says: how its revision
/// left, when that is remembered; `stale` when another record now holds
/// its ids.
pub(crate) fn gone_reason(removal: Option<&Removal>, stale: bool) -> GoneReason {
    let Some(removal) = removal else {
        return if stale {
            GoneReason::Replaced
        } else {
            GoneReason::Unknown
        };
    };
    match removal.outcome {
        Resolution::Allow | Resolution::Deny => GoneReason::Resolved,
        Resolution::Timeout => GoneReason::Expired,
        // Aborted, and any later outcome, says why in its reason.
        _ => match removal.reason.as_deref() {
            Some("not_held") => GoneReason::NotHeld,
            Some("replaced") => GoneReason::Replaced,
            Some("turn_completed") | Some("session_deleted") => GoneReason::Purged,
            Some("timeout") | Some("expired") => GoneReason::Expired,
            _ => GoneReason::Unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "https://gate.example";

    fn request(headers: &[(&str, &str)], body: Value) -> HttpRequest {
        HttpRequest {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect(),
            body,
            ..HttpRequest::default()
        }
    }

    const JSON: (&str, &str) = ("content-type", "application/json");

    #[test]
    fn the_approval_pages_own_post_passes() {
        let body = json!({"decision": "allow"});
        for headers in [
            vec![JSON, ("origin", ORIGIN), ("sec-fetch-site", "same-origin")],
            vec![
                ("content-type", "application/json; charset=utf-8"),
                ("origin", "HTTPS://GATE.EXAMPLE"),
            ],
            // Not a browser: no Origin, no Sec-Fetch-Site.
            vec![JSON],
        ] {
            let r = request(&headers, body.clone());
            assert_eq!(
                same_origin_json(&r, ORIGIN).map(|b| b.len()),
                Ok(1),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn a_cross_site_post_is_refused() {
        let body = json!({"decision": "allow"});
        for headers in [
            vec![JSON, ("origin", "https://evil.example")],
            vec![JSON, ("origin", "null")],
            vec![JSON, ("origin", "https://gate.example.evil.example")],
            vec![JSON, ("origin", "http://gate.example")],
            vec![JSON, ("sec-fetch-site", "cross-site")],
            vec![JSON, ("sec-fetch-site", "same-site")],
            vec![JSON, ("sec-fetch-site", "none")],
            vec![JSON, ("origin", ORIGIN), ("sec-fetch-site", "cross-site")],
        ] {
            let r = request(&headers, body.clone());
            assert_eq!(
                same_origin_json(&r, ORIGIN),
                Err(Refusal::CrossSite),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn anything_but_a_json_object_is_refused() {
        for (headers, body) in [
            // A form post: the engine parses no body.
            (
                vec![("content-type", "application/x-www-form-urlencoded")],
                Value::Null,
            ),
            (vec![("content-type", "text/plain")], Value::Null),
            (
                vec![("content-type", "multipart/form-data; boundary=x")],
                Value::Null,
            ),
            // JSON of the wrong shape, or a JSON body without the header.
            (vec![JSON], json!(["allow"])),
            (vec![JSON], json!("allow")),
            (vec![JSON], Value::Null),
            (vec![], json!({"decision": "allow"})),
            (
                vec![("content-type", "text/plain")],
                json!({"decision": "allow"}),
            ),
        ] {
            let r = request(&headers, body.clone());
            assert_eq!(
                same_origin_json(&r, ORIGIN),
                Err(Refusal::NotJson),
                "{headers:?} {body}"
            );
        }
    }

    #[test]
    fn header_lookup_ignores_case_and_skips_non_strings() {
        let mut r = request(&[("Origin", ORIGIN)], Value::Null);
        r.headers.insert("x-num".into(), json!(5));
        assert_eq!(r.header("origin"), Some(ORIGIN));
        assert_eq!(r.header("x-num"), None);
        assert_eq!(r.header("absent"), None);
    }

    #[test]
    fn an_unreadable_request_object_is_an_empty_request() {
        let r = HttpRequest::parse(json!("not an object"));
        assert!(r.path_params.is_empty() && r.body.is_null() && r.headers.is_empty());
        let r = HttpRequest::parse(json!({"headers": 3}));
        assert!(r.headers.is_empty());
        let r = HttpRequest::parse(json!({"path_params": {"token": "abc"}, "extra": 1}));
        assert_eq!(r.path_param("token"), Some("abc"));
    }

    #[test]
    fn an_error_answer_is_the_engines_envelope_with_the_security_headers() {
        let r = HttpResponse::error(
            410,
            "gone",
            "No longer valid.",
            json!({"reason": "resolved"}),
        );
        assert_eq!(r.status_code, 410);
        assert_eq!(
            r.body,
            json!({"error": {"code": "gone", "message": "No longer valid.", "reason": "resolved"}})
        );
        assert_eq!(r.headers["Content-Type"], "application/json");
        assert_eq!(r.headers["Cache-Control"], "no-store");
        assert_eq!(r.headers["Referrer-Policy"], "no-referrer");
    }

    #[test]
    fn a_gone_link_says_how_its_record_left() {
        let removal = |outcome, reason: Option<&str>| Removal {
            outcome,
            reason: reason.map(str::to_string),
        };
        for (removal, stale, want) in [
            (
                Some(removal(Resolution::Allow, None)),
                false,
                GoneReason::Resolved,
            ),
            (
                Some(removal(Resolution::Deny, Some("no"))),
                true,
                GoneReason::Resolved,
            ),
            (
                Some(removal(Resolution::Timeout, Some("timeout"))),
                false,
                GoneReason::Expired,
            ),
            (
                Some(removal(Resolution::Aborted, Some("not_held"))),
                false,
                GoneReason::NotHeld,
            ),
            (
                Some(removal(Resolution::Aborted, Some("replaced"))),
                true,
                GoneReason::Replaced,
            ),
            (
                Some(removal(Resolution::Aborted, Some("turn_completed"))),
                false,
                GoneReason::Purged,
            ),
            (
                Some(removal(Resolution::Aborted, Some("session_deleted"))),
                false,
                GoneReason::Purged,
            ),
            (
                Some(removal(Resolution::Aborted, Some("timeout"))),
                false,
                GoneReason::Expired,
            ),
            (
                Some(removal(Resolution::Aborted, Some("?"))),
                false,
                GoneReason::Unknown,
            ),
            (None, true, GoneReason::Replaced),
            (None, false, GoneReason::Unknown),
        ] {
            assert_eq!(
                gone_reason(removal.as_ref(), stale),
                want,
                "{removal:?} {stale}"
            );
        }
    }
}
