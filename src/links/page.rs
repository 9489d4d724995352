//! The server-rendered pages behind approval links, and the headers every
//! response carries.
//!
//! Everything a page shows about a call (function id, arguments, session
//! title, folder) comes from the agent, so it is treated as hostile text:
//! `maud` escapes it, invisible and direction-changing characters are shown
//! as visible `⟨U+XXXX⟩` markers instead of being obeyed, and no agent text
//! ever lands in an attribute except an inbox row's `href`, which must be an
//! `http(s)` URL or an absolute path.
//!
//! # Script and style
//!
//! No external assets. Each page inlines one `<style>`; the call page also
//! inlines one small `<script>` (`src/links/page/decide.js`) that POSTs
//! the chosen decision as JSON to `location.pathname` (so the token is not
//! written into the document) and reveals one of the server-rendered result
//! panels. The Content-Security-Policy allows exactly those two texts by
//! their SHA-256 hashes and nothing else: no `unsafe-inline`, no other
//! origin, no forms, no framing, no inline `style=` or `on…=` attributes
//! (which the hashes do not cover, so the markup never uses them).

use std::sync::LazyLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::link_token::token::Kind;
use crate::policy::Runs;
use crate::redact::FULL_ARGUMENTS_CAP;
use crate::terms::review::{HeldBecause, Review, ReviewVerdict, Risk};

#[cfg(test)]
mod tests;

/// The one stylesheet, inlined into every page.
const STYLE: &str = include_str!("page/style.css");
/// The one script, inlined into the call page.
const SCRIPT: &str = include_str!("page/decide.js");

/// `'sha256-…'` of the exact text between the tags.
fn csp_hash(text: &str) -> String {
    format!(
        "'sha256-{}'",
        STANDARD.encode(Sha256::digest(text.as_bytes()))
    )
}

static CSP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
         require-trusted-types-for 'script'",
        csp_hash(SCRIPT),
        csp_hash(STYLE),
    )
});

/// The `Content-Security-Policy` value of every page.
pub(crate) fn content_security_policy() -> &'static str {
    CSP.as_str()
}

/// The headers every HTML response from the link endpoints carries (200,
/// 403, 404 and 410 alike).
pub(crate) fn html_headers() -> [(&'static str, &'static str); 6] {
    headers("text/html; charset=utf-8")
}

/// The same set for the JSON answer of `POST /approvals/<token>`.
pub(crate) fn json_headers() -> [(&'static str, &'static str); 6] {
    headers("application/json")
}

fn headers(content_type: &'static str) -> [(&'static str, &'static str); 6] {
    [
        ("Content-Type", content_type),
        ("Content-Security-Policy", content_security_policy()),
        ("Cache-Control", "no-store"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
    ]
}

/// What the call page shows about one held record. Every string is
/// agent-controlled; `arguments` must already be redacted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallView<'a> {
    /// The session the call belongs to.
    pub session_id: &'a str,
    /// The call's id.
    pub function_call_id: &'a str,
    /// The function the call targets.
    pub function_id: &'a str,
    /// Function hold or folder prompt.
    pub kind: Kind,
    /// The call's whole arguments, redacted (§21.6; the excerpt where they
    /// were not kept).
    pub arguments: &'a Value,
    /// Whether anything of the arguments is missing from `arguments` (the
    /// 64 KiB cap, or only the excerpt was kept).
    pub arguments_clipped: bool,
    /// The session's title, when known.
    pub session_title: Option<&'a str>,
    /// When the call was held (ms since the epoch).
    pub pending_at: u64,
    /// When the hold ends with a denial (ms since the epoch), if it does.
    pub expires_at: Option<u64>,
    /// The folder a `folder_access` prompt asks for.
    pub dir: Option<&'a str>,
    /// A decision on the call is on its way to the agent (the call may be
    /// running): the page shows that, and no choices.
    pub releasing: bool,
    /// What the reviewer said of the call (§22), when it was asked: the
    /// approver sees it, next to the call, before deciding.
    pub review: Option<&'a Review>,
    /// What the call's command field runs (§25.8): "Runs: curl, sh".
    pub runs: Option<&'a Runs>,
    /// The prefix offered as a session grant (§25.9).
    pub suggested_prefix: Option<&'a str>,
    /// The protected path the call names (§29), when that holds it.
    pub protected: Option<&'a crate::policy::ProtectedNote>,
}

/// One line of the inbox page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InboxRow<'a> {
    /// The held call.
    pub call: CallView<'a>,
    /// The record's `approval_url`.
    pub approval_url: &'a str,
}

/// Why a link's record is gone (the 410 page), as far as the worker knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum GoneReason {
    /// Someone decided it.
    Resolved,
    /// Its deadline passed; the call was denied.
    Expired,
    /// Its turn ended or its session was deleted.
    Purged,
    /// A newer prompt for the same call replaced it.
    Replaced,
    /// The harness stopped holding it before a decision arrived.
    NotHeld,
    /// The record is gone and nothing more is known.
    Unknown,
}

impl GoneReason {
    /// The name a POST's 410 answer gives (`"reason"`).
    pub(crate) fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }

    fn explanation(self) -> &'static str {
        match self {
            GoneReason::Resolved => "This call has already been decided.",
            GoneReason::Expired => {
                "No one decided in time, so the call was denied and did not run."
            }
            GoneReason::Purged => {
                "The agent's turn ended or its session was deleted, so the call will not run."
            }
            GoneReason::Replaced => {
                "A newer prompt for this call replaced this one. Use the newest link for it."
            }
            GoneReason::NotHeld => "The agent stopped waiting for this call, so it did not run.",
            GoneReason::Unknown => "This call is no longer waiting for a decision.",
        }
    }
}

/// The "Allow all" offer of a call page (§26.4): every held function call
/// of its turn the token covers, each shown as its own page shows it, the
/// calls left out to decide separately, and the batch token that names
/// exactly the covered ones.
#[derive(Debug, Clone)]
pub(crate) struct BatchOffer {
    /// The batch token (`b.…`, base64url: never agent text), the last path
    /// segment the offer POSTs to.
    pub token: String,
    /// Every call the token covers, this one included when it rides, in
    /// `pending_at` order. Agent text.
    pub calls: Vec<OfferedCall>,
    /// The held function calls of the turn left out (a human floor held
    /// them, or their arguments are clipped), in `pending_at` order.
    pub separately: Vec<OfferedCall>,
}

/// One call of an "Allow all" offer.
#[derive(Debug, Clone)]
pub(crate) struct OfferedCall {
    /// The function the call targets.
    pub function_id: String,
    /// The call's id.
    pub function_call_id: String,
    /// Its whole redacted arguments (for a call left out: not shown).
    pub arguments: Value,
    /// Whether anything of them is missing.
    pub arguments_clipped: bool,
    /// What its command fields run.
    pub runs: Option<Runs>,
    /// What held it (`held_by_rule`; absent on an old record).
    pub held_by_rule: Option<String>,
}

/// The page for `GET /approvals/<token>` while its revision is held, with
/// no "Allow all" offer.
#[cfg(test)]
pub(crate) fn call_page(view: &CallView<'_>) -> String {
    call_page_offering(view, None)
}

/// The page for `GET /approvals/<token>` while its revision is held,
/// offering "Allow all N held calls of this turn" when more than one
/// function call of the turn is held.
pub(crate) fn call_page_offering(view: &CallView<'_>, offer: Option<&BatchOffer>) -> String {
    if view.releasing {
        return running_page(view);
    }
    let body = html! {
        p.kicker { "Approval needed" }
        h1 { code { (visible_id(view.function_id)) } }
        @match view.kind {
            Kind::Function => p { "An agent wants to run this call. It waits until you decide." },
            Kind::FolderAccess => p {
                "This call was refused access to a folder outside the agent's workspace. "
                "If you allow the folder, the call runs again with access to it."
            },
        }
        (details(view))
        h2 { "Arguments" }
        (arguments_note(view))
        pre { code { (visible_multiline(&pretty(view.arguments))) } }
        section #choices .choices aria-label="Your decision" {
            @match view.kind {
                Kind::Function => {
                    button type="button" .allow data-decision="allow" {
                        "Allow" small { "Run this call." }
                    }
                    button type="button" data-decision="allow" data-remember="true" {
                        "Allow and don't ask again in this session"
                        small { "Later calls of this function in this session run without asking." }
                    }
                    @if let Some(prefix) = view.suggested_prefix {
                        button type="button" data-decision="allow" data-remember-prefix="true" {
                            "Allow " code { (visible(prefix)) " …" } " in this session"
                            small {
                                "Later calls in this session that only run "
                                code { (visible(prefix)) } " with plain arguments run without asking."
                            }
                        }
                    }
                    @if let Some(offer) = offer {
                        button type="button" .allow-all data-decision="allow" data-batch=(offer.token) {
                            "Allow all " (offer.calls.len()) " held calls of this turn"
                            small { "Runs each call listed below; one decided or changed meanwhile is left alone." }
                        }
                        ul.batch aria-label="The held calls of this turn" {
                            @for call in &offer.calls {
                                li {
                                    code { (visible(&call.function_id)) } " " small { (visible(&call.function_call_id)) }
                                    @if let Some(runs) = &call.runs {
                                        p.note { "Runs: " (runs_text(runs)) }
                                    }
                                    @if call.arguments_clipped {
                                        p.note { "Arguments clipped." }
                                    }
                                    pre { code { (visible_multiline(&pretty(&call.arguments))) } }
                                }
                            }
                        }
                        @if !offer.separately.is_empty() {
                            h2 { "Decide separately" }
                            p.note { "Not in \"Allow all\": each needs its own decision on its own page." }
                            ul.separately aria-label="Held calls of this turn to decide separately" {
                                @for call in &offer.separately {
                                    li {
                                        code { (visible(&call.function_id)) } " " small { (visible(&call.function_call_id)) }
                                        " — " (separately_why(call))
                                    }
                                }
                            }
                        }
                    }
                }
                Kind::FolderAccess => {
                    button type="button" .allow data-decision="allow" data-scope="once" {
                        "Once" small { "This call may use the folder." }
                    }
                    button type="button" data-decision="allow" data-scope="session" {
                        "Session" small { "Every call in this session may use the folder." }
                    }
                    button type="button" data-decision="allow" data-scope="always" {
                        "Always" small { "The folder is added to the shell's allowed folders for every session." }
                    }
                }
            }
            @if editable(view) {
                details #edit-panel {
                    summary { "Edit and allow" }
                    p.note {
                        "Fix the call. The agent is told to make the edited call instead, and that \
                         call runs once when it does, within the time chosen below (the gate's \
                         configured limit shortens it)."
                    }
                    label for="edited" { "Arguments (JSON)" }
                    textarea #edited rows="8" spellcheck="false" { (pretty(view.arguments)) }
                    label for="edit-ttl" { "The agent may make the edited call within" }
                    select #edit-ttl name="ttl_ms" {
                        @for (ms, label) in EDIT_TTLS {
                            option value=(ms) selected[*ms == crate::edits::DEFAULT_TTL_MS] { (label) }
                        }
                    }
                    button type="button" .allow data-decision="edit" {
                        "Send the edited call" small { "The held call does not run; the edited one does, once." }
                    }
                }
            }
            label for="reason" { "Reason for denying or editing (optional, the agent sees it)" }
            textarea #reason rows="3" maxlength="2000" {}
            @match view.kind {
                Kind::Function => button type="button" .deny data-decision="deny" {
                    "Deny" small { "The call does not run; the agent is told why." }
                },
                Kind::FolderAccess => button type="button" .deny data-decision="deny" {
                    "Deny" small { "The call does not get the folder; this session is not asked for it again." }
                },
            }
        }
        noscript {
            p.panel.bad { "Deciding from this page needs JavaScript." }
        }
        section #result role="status" aria-live="polite" {
            (result_panels())
        }
    };
    document("Approval needed", body, true)
}

/// The lives an edit's grant may be given on the page (ms, label); the
/// default is selected, and the configuration's `edit_ttl_max_ms` caps
/// whichever is chosen.
const EDIT_TTLS: &[(u64, &str)] = &[
    (60_000, "1 minute"),
    (600_000, "10 minutes"),
    (3_600_000, "1 hour"),
];

/// Whether the page offers "Edit and allow" (contract §28): a function
/// hold whose arguments are shown whole, with nothing redacted or clipped
/// (an edit made from a redacted value would run with the placeholder).
pub(crate) fn editable(view: &CallView<'_>) -> bool {
    view.kind == Kind::Function
        && !view.arguments_clipped
        && crate::redact::mark_in(view.arguments).is_none()
}

/// The page of a held call whose decision is under way: the call is
/// running (or its denial is on its way), and no other decision can change
/// it now.
fn running_page(view: &CallView<'_>) -> String {
    let body = html! {
        p.kicker { "Running" }
        h1 { code { (visible_id(view.function_id)) } }
        p.panel.info {
            "A decision on this call was taken and is on its way to the agent; the call may be \
             running now. Nothing can be decided here until the agent answers. Reload this page \
             later: it is gone once the outcome is known."
        }
        (details(view))
        h2 { "Arguments" }
        (arguments_note(view))
        pre { code { (visible_multiline(&pretty(view.arguments))) } }
    };
    document("Running", body, false)
}

/// What the page says about the arguments it shows: whole, or clipped.
fn arguments_note(view: &CallView<'_>) -> Markup {
    html! {
        @if view.arguments_clipped {
            p.note {
                "Secrets are redacted. The arguments are longer than this page keeps ("
                (FULL_ARGUMENTS_CAP / 1024) " KiB): what is cut is marked, and the rest is not shown."
            }
        } @else {
            p.note { "Secrets are redacted. Shown whole." }
        }
    }
}

/// The facts of a held call, one per row (one column on a phone).
fn details(view: &CallView<'_>) -> Markup {
    html! {
        dl {
            dt { "Kind" }
            dd { (kind_label(view.kind)) }
            @if let Some(dir) = view.dir {
                dt { "Folder" }
                dd { code { (visible(dir)) } }
            }
            @if let Some(title) = view.session_title.filter(|t| !t.is_empty()) {
                dt { "Session" }
                dd { (visible(title)) }
            }
            dt { "Session id" }
            dd { code { (visible_id(view.session_id)) } }
            dt { "Call id" }
            dd { code { (visible_id(view.function_call_id)) } }
            dt { "Held since" }
            dd { (time(view.pending_at)) }
            @if let Some(expires_at) = view.expires_at {
                dt { "Deadline" }
                dd { (time(expires_at)) " — if no one decides by then, the call is denied." }
            }
            @if let Some(runs) = view.runs {
                dt { "Runs" }
                dd { (runs_text(runs)) }
            }
            @if let Some(protected) = view.protected {
                dt { "Protected path" }
                dd .warning {
                    @if protected.path.is_empty() { "a path that cannot be known" } @else {
                        code { (visible(&protected.path)) }
                    }
                    " (matches " code { (visible(&protected.glob)) } ") — "
                    "an engine worker's configuration: allowing this lets the call change how the engine, or this gate, behaves."
                }
            }
            @if let (Kind::Function, Some(prefix)) = (view.kind, view.suggested_prefix) {
                dt { "Suggested grant" }
                dd { "Allow " code { (visible(prefix)) " …" } " in this session" }
            }
            @if let Some(review) = view.review {
                dt { "Reviewer" }
                dd { (review_summary(review)) }
                @if !review.rationale.is_empty() {
                    dt { "Reviewer's reason" }
                    dd { (visible(&review.rationale)) }
                }
            }
        }
    }
}

/// What a call's command fields run, for a human: the programs, and
/// whether part of it cannot be known without running it.
fn runs_text(runs: &Runs) -> Markup {
    html! {
        @if runs.programs.is_empty() {
            "nothing known"
        } @else {
            code { (visible(&runs.programs.join(", "))) }
        }
        @if runs.opaque {
            " — and what else runs cannot be known without running it"
            @if let Some(why) = &runs.why { ": " (visible(why)) }
        }
    }
}

/// Why an "Allow all" leaves a call out.
fn separately_why(call: &OfferedCall) -> Markup {
    html! {
        @if call.arguments_clipped {
            "its arguments are clipped"
        } @else {
          @match call.held_by_rule.as_deref() {
            Some("opaque_command") => "held because part of its command cannot be known",
            Some("widening_root") => "held because it asks for a folder root outside the turn's",
            Some("lockdown") => "held by the lockdown",
            Some(rule) => { "held by rule " code { (visible(rule)) } },
            None => "held before the gate kept what held it",
          }
        }
    }
}

/// One line on what the reviewer said and why a human decides anyway.
fn review_summary(review: &Review) -> String {
    let said = match (review.verdict, review.held_because) {
        (ReviewVerdict::Allow, Some(HeldBecause::Clipped)) => {
            "allowed, but saw the arguments clipped: a human decides"
        }
        (ReviewVerdict::Allow, Some(HeldBecause::HiddenCommand)) => {
            "allowed, but part of the command was redacted from it: a human decides"
        }
        (ReviewVerdict::Deny, Some(HeldBecause::Breaker)) => {
            "denied, but it has denied too often in a row: a human decides"
        }
        (ReviewVerdict::Allow, _) => "allowed",
        (ReviewVerdict::Deny, _) => "denied",
        (ReviewVerdict::Escalate, _) => "asked for a human",
        (ReviewVerdict::Error, _) => "could not be asked (error): a human decides",
        (ReviewVerdict::Timeout, _) => "did not answer in time: a human decides",
        (ReviewVerdict::Malformed, _) => "gave an answer it could not read: a human decides",
    };
    match review.risk {
        Some(Risk::Low) => format!("{said} — risk low"),
        Some(Risk::Medium) => format!("{said} — risk medium"),
        Some(Risk::High) => format!("{said} — risk high"),
        None => said.to_owned(),
    }
}

/// The answers the script can reveal after a POST, one per outcome; all
/// hidden until then. `data-outcome` is the script's name for each.
fn result_panels() -> Markup {
    const PANELS: &[(&str, &str, &str)] = &[
        ("sending", "info", "Sending your decision…"),
        ("allowed", "ok", "Allowed. The call goes ahead now."),
        (
            "allowed-remember",
            "ok",
            "Allowed. The call goes ahead now, and this function will not ask again in this session.",
        ),
        (
            "allowed-prefix",
            "ok",
            "Allowed. The call goes ahead now, and commands with this prefix will not ask again \
             in this session.",
        ),
        (
            "allowed-all",
            "ok",
            "Allowed. The held calls of this turn go ahead now; any that was decided or changed \
             meanwhile was left alone.",
        ),
        ("denied", "ok", "Denied. The agent has been told."),
        (
            "edited",
            "ok",
            "Edited. The agent has been told to make the edited call instead; it runs once when \
             the agent makes it.",
        ),
        (
            "bad-json",
            "bad",
            "The edited arguments are not a JSON object. Nothing was sent; fix them and try again.",
        ),
        (
            "refused",
            "bad",
            "The edit was refused, and the call is still waiting:",
        ),
        (
            "running",
            "info",
            "Running: the decision is taken and on its way; the call may take a while. \
             Reload this page later for the outcome.",
        ),
        (
            "unknown",
            "bad",
            "The agent's answer was lost, so no one can tell whether the call ran. Check the \
             agent's transcript.",
        ),
        (
            "not-held",
            "bad",
            "Not held any more: the agent stopped waiting for this call before your decision \
             arrived (its wait ran out or its turn ended). The call did not run, and your \
             decision changed nothing.",
        ),
        (
            "unchanged",
            "bad",
            "Nothing changed: this call was already decided or is no longer waiting.",
        ),
        (
            "gone",
            "bad",
            "This link is no longer valid: the call was decided, expired, or replaced by a \
             newer prompt. Nothing changed.",
        ),
        ("forbidden", "bad", "This link is not valid. Nothing changed."),
        (
            "error",
            "bad",
            "Something went wrong, and your decision may not have arrived. Try again, or \
             reload the page to see where this call stands.",
        ),
    ];
    html! {
        @for (outcome, class, text) in PANELS {
            p.panel.(class) hidden data-outcome=(outcome) { (text) }
        }
    }
}

/// The 410 page: the token was good, its revision is gone.
pub(crate) fn gone_page(reason: GoneReason) -> String {
    let body = html! {
        h1 { "This approval link is no longer valid" }
        p { (reason.explanation()) }
        p.note { "Opening this link changed nothing." }
    };
    document("Approval link no longer valid", body, false)
}

/// The 403 page: a token this worker did not sign (tampered, truncated, or
/// from another secret). It says nothing about why.
pub(crate) fn forbidden_page() -> String {
    let body = html! {
        h1 { "This approval link is not valid" }
        p { "It may have been copied incompletely, or it was not made by this approval gate." }
        p.note { "Opening this link changed nothing." }
    };
    document("Approval link not valid", body, false)
}

/// The 401 page: the inbox without the right `Authorization: Bearer`.
pub(crate) fn unauthorized_page() -> String {
    let body = html! {
        h1 { "Not authorized" }
        p { "The list of waiting calls needs the inbox token." }
    };
    document("Not authorized", body, false)
}

/// The 404 page (the inbox when no `inbox_token` is configured).
pub(crate) fn not_found_page() -> String {
    let body = html! {
        h1 { "Not found" }
    };
    document("Not found", body, false)
}

/// The page for `GET /approvals`: the held calls in the order given (the
/// inbox order, newest last), each linking to its own page; `more` calls
/// beyond these are counted, not shown.
pub(crate) fn inbox_page(rows: &[InboxRow<'_>], more: usize) -> String {
    let body = html! {
        h1 { "Waiting for a decision" }
        @if rows.is_empty() {
            p { "Nothing is waiting for a decision." }
        } @else {
            p.note { (rows.len()) @if rows.len() == 1 { " call" } @else { " calls" } ", oldest first." }
            @if more > 0 {
                p.note { "And " (more) " more, not shown: decide these first." }
            }
            ul.inbox {
                @for row in rows {
                    li {
                        @match safe_href(row.approval_url) {
                            Some(href) => a href=(href) { code { (visible_id(row.call.function_id)) } },
                            None => p { code { (visible_id(row.call.function_id)) } },
                        }
                        (details(&row.call))
                        @if editable(&row.call) {
                            @if let Some(href) = safe_href(row.approval_url) {
                                a.edit href={ (href) "#edit" } { "Edit and allow" }
                            }
                        }
                    }
                }
            }
        }
    };
    document("Approvals", body, false)
}

/// A whole page: the phone viewport, the stylesheet, and the script when
/// the page has choices.
fn document(title: &str, body: Markup, with_script: bool) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                main { (body) }
                @if with_script {
                    script { (PreEscaped(SCRIPT)) }
                }
            }
        }
    }
    .into_string()
}

fn kind_label(kind: Kind) -> &'static str {
    match kind {
        Kind::Function => "Function call",
        Kind::FolderAccess => "Folder access",
    }
}

/// Arguments as indented JSON text.
fn pretty(arguments: &Value) -> String {
    serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string())
}

/// An ms timestamp as an ISO-8601 UTC `<time>`.
fn time(ms: u64) -> Markup {
    let iso = iso_utc(ms);
    html! { time datetime=(iso) { (iso) } }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for milliseconds since the Unix epoch (UTC, the
/// proleptic Gregorian calendar; years past 9999 print in full).
fn iso_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The calendar date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Characters that change how other text looks without being seen: bidi
/// controls (Trojan Source), zero-width and other invisible format
/// characters, Unicode tag characters (hidden ASCII), and C0/C1 controls.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// Agent text on one line: hidden characters become visible markers.
fn visible(text: &str) -> Markup {
    render_visible(text, false)
}

/// An id (session, call, function) as page text: through the value
/// detectors first (contract §26.5; the gate denies a call whose ids hold a
/// secret, but a record may predate that), then as [`visible`].
fn visible_id(text: &str) -> Markup {
    visible(&crate::redact::redact_text(text))
}

/// Agent text in a `<pre>`: newlines and tabs stay, the rest as [`visible`].
fn visible_multiline(text: &str) -> Markup {
    render_visible(text, true)
}

fn render_visible(text: &str, multiline: bool) -> Markup {
    let hidden = |c: char| is_hidden(c) && !(multiline && (c == '\n' || c == '\t'));
    let mut runs: Vec<(&str, Option<char>)> = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if hidden(c) {
            runs.push((&text[start..at], Some(c)));
            start = at + c.len_utf8();
        }
    }
    runs.push((&text[start..], None));
    html! {
        @for (plain, marker) in runs {
            (plain)
            @if let Some(c) = marker {
                span.ctl { "⟨U+" (format!("{:04X}", u32::from(c))) "⟩" }
            }
        }
    }
}

/// `url` when it is safe as an `href`: `http(s)://…` or an absolute path.
/// Anything else (`javascript:`, `data:`, protocol-relative `//host`) is
/// shown without a link.
fn safe_href(url: &str) -> Option<&str> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let ok = lower.starts_with("https://")
        || lower.starts_with("http://")
        || (url.starts_with('/') && !url.starts_with("//") && !url.starts_with("/\\"));
    (ok && !url.chars().any(|c| c.is_whitespace() || c.is_control())).then_some(url)
}
