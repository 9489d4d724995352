//! The link endpoints, served through the engine's HTTP worker
//! (`architecture/contract.md` § Approval links and the inbox page): three functions, bound to
//! `http` triggers only while `links` is configured.
//!
//! | route | function | answers |
//! |---|---|---|
//! | `GET /approvals/:token` | `approval::link-page` | 200 the call's page; 403 bad token; 410 gone; 404 links off |
//! | `POST /approvals/:token` | `approval::link-decide` | 200 `{resolved, not_held?}`; 400 bad body; 403 cross-site, not JSON, bad token; 410 gone; 503 harness or state down; 404 links off |
//! | `GET /approvals` | `approval::inbox-page` | 200 the inbox (`Authorization: Bearer <inbox_token>`); 401 without it; 404 without an inbox token |
//!
//! Every answer carries the security headers of [`super::page`]; none is a
//! 500 or shows an internal error. Tokens, URLs and the secret are never
//! logged: a log line names the call by its ids and says why.

use std::sync::Arc;

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::trigger::Trigger;
use iii_sdk::RegisterFunction;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::http::{gone_reason, same_origin_json, HttpRequest, HttpResponse};
use super::page::{self, BatchOffer, CallView, GoneReason, InboxRow, OfferedCall};
use crate::config::Snapshot;
use crate::decision::batch;
use crate::decision::edit::{edit, Edit};
use crate::decision::resolve::{operator_reason, response, ResolveChoice, ResolveDecision};
use crate::error::ApprovalError;
use crate::folders::GrantScope;
use crate::inbox::{list_pending, ListPendingRequest, Listed};
use crate::link_token::batch::{BatchRevisions, MAX_BATCH_ITEMS, PREFIX as BATCH_PREFIX};
use crate::link_token::token::{Kind, Revision, TokenError};
use crate::link_token::Links;
use crate::pending::{PendingRecord, RecordKind, ReleaseVia, WholeArguments};
use crate::provenance::Caller;
use crate::release::{Answer, Remember, Request, Ruling};
use crate::schema::schema_of;
use crate::worker::Worker;

/// `GET /approvals/:token`.
pub(crate) const PAGE_ID: &str = "approval::link-page";
/// `POST /approvals/:token`.
pub(crate) const DECIDE_ID: &str = "approval::link-decide";
/// `GET /approvals`.
pub(crate) const INBOX_ID: &str = "approval::inbox-page";

/// The trigger type `iii-http` provides.
pub(crate) const HTTP: &str = "http";

/// The routes: `(method, api_path, function)`.
const ROUTES: [(&str, &str, &str); 3] = [
    ("GET", "/approvals/:token", PAGE_ID),
    ("POST", "/approvals/:token", DECIDE_ID),
    ("GET", "/approvals", INBOX_ID),
];

/// The longest reason a link accepts (the page's textarea allows as much).
const MAX_REASON_CHARS: usize = 2000;

/// The most held calls the inbox page shows; the rest are counted.
const INBOX_ROWS: i64 = 500;

/// The body of `POST /approvals/:token`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LinkDecision {
    /// allow, deny or edit ("Edit and allow", function holds whose
    /// arguments were shown whole).
    pub decision: ResolveChoice,
    /// With `edit`: the edited call's arguments (an object).
    #[serde(default)]
    pub arguments: Option<Value>,
    /// Shown to the agent on deny and edit (at most 2000 characters).
    #[serde(default)]
    pub reason: Option<String>,
    /// Folder prompts: once (default), session or always.
    #[serde(default)]
    pub grant_scope: Option<GrantScope>,
    /// Function holds: "Allow and don't ask again in this session"
    /// (`approve-always` for the function, then allow).
    #[serde(default)]
    pub remember: bool,
    /// Function holds with a suggested prefix: "Allow `<prefix> …` in this
    /// session" (`approve-always` for the function with that command
    /// prefix — the record's own, never one the page sends — then allow).
    #[serde(default)]
    pub remember_prefix: bool,
    /// With `edit`: how long the edited call may be made (ms, at least 1;
    /// default 10 minutes; the configuration's `edit_ttl_max_ms` caps it).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

/// Registers the three link functions (bound only while links are on).
pub(crate) fn register(worker: &Arc<Worker>) {
    register_http(
        worker,
        PAGE_ID,
        "GET /approvals/:token (iii-http): the page where a human decides one held call. Served only while links are configured.",
        |w, r| async move { call_page(&w, &r).await },
    );
    register_http(
        worker,
        DECIDE_ID,
        "POST /approvals/:token (iii-http): a decision on one held call, same-origin JSON only; the same path as approval::resolve.",
        |w, r| async move { decide_call(&w, &r).await },
    );
    register_http(
        worker,
        INBOX_ID,
        "GET /approvals (iii-http): every held call, each linking to its page; needs Authorization: Bearer <inbox_token>.",
        |w, r| async move { inbox(&w, &r) },
    );
}

/// Registers one HTTP handler: it always answers (never an error, never
/// null) and publishes the request and response shapes.
fn register_http<F, Fut>(worker: &Arc<Worker>, id: &str, description: &str, handler: F)
where
    F: Fn(Arc<Worker>, HttpRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = HttpResponse> + Send + 'static,
{
    let handler = Arc::new(handler);
    let w = worker.clone();
    let registration = RegisterFunction::new_async(move |input: Value| {
        let handler = handler.clone();
        let worker = w.clone();
        async move {
            let _running = worker.enter();
            let response = handler(worker.clone(), HttpRequest::parse(input)).await;
            serde_json::to_value(response).map_err(|e| iii_sdk::Error::Serde(e.to_string()))
        }
    })
    .description(description)
    .request_format(schema_of::<HttpRequest>())
    .response_format(schema_of::<HttpResponse>());
    worker.engine.iii().register_function(id, registration);
}

/// The links in effect, or the 404 every endpoint answers while they are off.
fn links_or_404(worker: &Worker, json: bool) -> Result<Arc<Links>, HttpResponse> {
    match worker.config.load().links.clone() {
        Some(links) => Ok(links),
        None if json => Err(HttpResponse::error(
            404,
            "not_found",
            "Not found.",
            Value::Null,
        )),
        None => Err(HttpResponse::html(404, page::not_found_page())),
    }
}

/// The page for one held call, from its record and its whole redacted
/// arguments (§21.6), with its turn's "Allow all" offer when there is one.
fn view(record: &PendingRecord, whole: &WholeArguments, offer: Option<&BatchOffer>) -> String {
    page::call_page_offering(
        &CallView {
            session_id: &record.session_id,
            function_call_id: &record.function_call_id,
            function_id: &record.function_id,
            kind: record.kind.into(),
            arguments: &whole.arguments,
            arguments_clipped: whole.arguments_clipped,
            session_title: record.session_title.as_deref(),
            pending_at: record.pending_at,
            expires_at: record.expires_at,
            dir: record.grant_request.as_ref().map(|g| g.dir.as_str()),
            releasing: record.releasing,
            review: record.review.as_deref(),
            runs: record.runs.as_deref(),
            protected: record.protected_path.as_deref(),
            suggested_prefix: record.suggested_prefix.as_deref(),
        },
        offer,
    )
}

/// "Allow all N held calls of this turn" for a held function call whose
/// turn holds other function calls (not releasing), §26.4: each call it
/// covers is listed with its whole redacted arguments and `runs`; a call a
/// human floor held, one held before `held_by_rule` was kept, or one whose
/// arguments are clipped is listed to decide separately and left out of the
/// token. Offered when at least two calls ride — at most
/// [`MAX_BATCH_ITEMS`] — with the token over exactly their revisions, in
/// `pending_at` order.
async fn batch_offer(worker: &Worker, links: &Links, record: &PendingRecord) -> Option<BatchOffer> {
    if record.kind != RecordKind::Function || record.releasing {
        return None;
    }
    let mut held: Vec<Arc<PendingRecord>> = worker
        .pending
        .keys_of_turn(&record.turn_id)
        .into_iter()
        .filter(|(sid, _)| *sid == record.session_id)
        .filter_map(|(sid, cid)| worker.pending.get(&sid, &cid))
        .filter(|r| r.kind == RecordKind::Function && !r.releasing && r.turn_id == record.turn_id)
        .collect();
    if !(2..=MAX_BATCH_ITEMS).contains(&held.len()) {
        return None;
    }
    held.sort_by(|a, b| {
        (a.pending_at, &a.function_call_id).cmp(&(b.pending_at, &b.function_call_id))
    });
    let mut calls = Vec::new();
    let mut separately = Vec::new();
    let mut revisions = Vec::new();
    for r in &held {
        let whole = worker.pending.arguments(r).await;
        let offered = OfferedCall {
            function_id: r.function_id.clone(),
            function_call_id: r.function_call_id.clone(),
            arguments: whole.arguments,
            arguments_clipped: whole.arguments_clipped,
            runs: r.runs.as_deref().cloned(),
            held_by_rule: r.held_by_rule.clone(),
        };
        if r.decide_separately() || offered.arguments_clipped {
            separately.push(offered);
        } else {
            revisions.push((r.function_call_id.clone(), r.pending_at));
            calls.push(offered);
        }
    }
    if calls.len() < 2 {
        return None;
    }
    let token = links.batch_token(&BatchRevisions {
        session_id: record.session_id.clone(),
        turn_id: record.turn_id.clone(),
        items: revisions,
    })?;
    Some(BatchOffer {
        token,
        calls,
        separately,
    })
}

/// What a verified token finds: the record it names, or why it is gone.
enum Found {
    Held(Arc<PendingRecord>),
    Gone(GoneReason),
}

fn find(worker: &Worker, revision: &Revision) -> Found {
    let (sid, cid) = (revision.session_id(), revision.function_call_id());
    let removal = || worker.pending.removal(sid, cid, revision.pending_at());
    match worker.pending.get(sid, cid) {
        Some(record) if revision.matches(record.pending_at, record.kind.into()) => {
            Found::Held(record)
        }
        Some(_) => Found::Gone(gone_reason(removal().as_ref(), true)),
        None => Found::Gone(gone_reason(removal().as_ref(), false)),
    }
}

/// Logs a refused token without the token.
fn log_refused(route: &str, err: TokenError) {
    tracing::info!(route, error = %err, "approval link refused");
}

/// `GET /approvals/:token`.
async fn call_page(worker: &Worker, request: &HttpRequest) -> HttpResponse {
    let links = match links_or_404(worker, false) {
        Ok(links) => links,
        Err(response) => return response,
    };
    let revision = match links.verify(request.path_param("token").unwrap_or_default()) {
        Ok(revision) => revision,
        Err(err) => {
            log_refused("GET /approvals/:token", err);
            return HttpResponse::html(403, page::forbidden_page());
        }
    };
    match find(worker, &revision) {
        Found::Held(record) => {
            let whole = worker.pending.arguments(&record).await;
            let offer = batch_offer(worker, &links, &record).await;
            HttpResponse::html(200, view(&record, &whole, offer.as_ref()))
        }
        Found::Gone(reason) => HttpResponse::html(410, page::gone_page(reason)),
    }
}

/// `POST /approvals/:token`.
async fn decide_call(worker: &Worker, request: &HttpRequest) -> HttpResponse {
    let links = match links_or_404(worker, true) {
        Ok(links) => links,
        Err(response) => return response,
    };
    let body = match same_origin_json(request, links.origin()) {
        Ok(body) => body,
        Err(refusal) => {
            tracing::info!(
                route = "POST /approvals/:token",
                why = refusal.code(),
                "approval link decision refused"
            );
            return HttpResponse::error(403, refusal.code(), refusal.message(), Value::Null);
        }
    };
    let token = request.path_param("token").unwrap_or_default();
    if token.starts_with(BATCH_PREFIX) {
        return decide_batch(worker, &links, token, body.clone()).await;
    }
    // Checked before the body is read, so the refusal names the field.
    if body
        .get("ttl_ms")
        .is_some_and(|ttl| !ttl.is_null() && ttl.as_u64().is_none_or(|ms| ms < 1))
    {
        return HttpResponse::error(
            400,
            "invalid_payload",
            "ttl_ms must be a whole number of milliseconds, at least 1",
            Value::Null,
        );
    }
    let choice = match LinkDecision::deserialize(Value::Object(body.clone())) {
        Ok(choice) => choice,
        Err(err) => {
            return HttpResponse::error(400, "invalid_payload", &err.to_string(), Value::Null)
        }
    };
    if choice
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return HttpResponse::error(
            400,
            "invalid_payload",
            &format!("reason is longer than {MAX_REASON_CHARS} characters"),
            Value::Null,
        );
    }
    let revision = match links.verify(request.path_param("token").unwrap_or_default()) {
        Ok(revision) => revision,
        Err(err) => {
            log_refused("POST /approvals/:token", err);
            return HttpResponse::error(
                403,
                "forbidden",
                "This link is not valid. Nothing changed.",
                Value::Null,
            );
        }
    };
    let kind = match revision.kind() {
        Kind::Function => RecordKind::Function,
        Kind::FolderAccess => RecordKind::FolderAccess,
    };
    if choice.ttl_ms.is_some() && choice.decision != ResolveChoice::Edit {
        return HttpResponse::error(
            400,
            "invalid_payload",
            "ttl_ms is sent with decision edit only",
            Value::Null,
        );
    }
    let decision = match choice.decision {
        ResolveChoice::Allow => Ruling::Allow {
            grant_scope: choice.grant_scope,
            remember: Remember::of(choice.remember, choice.remember_prefix),
        },
        ResolveChoice::Deny => Ruling::Deny {
            reason: operator_reason(&choice.reason),
        },
        ResolveChoice::Edit => return decide_edit(worker, &revision, kind, choice).await,
    };
    let release = Request {
        session_id: revision.session_id().to_string(),
        function_call_id: revision.function_call_id().to_string(),
        expected: Some((revision.pending_at(), kind)),
        decision,
        via: ReleaseVia::Link,
        caller: Some(Caller::link()),
    };
    let wait = worker.releaser.resolve_wait();
    let answer = worker.releaser.release(release, Some(wait)).await;
    let gone = |stale| {
        let removal = worker.pending.removal(
            revision.session_id(),
            revision.function_call_id(),
            revision.pending_at(),
        );
        let reason = gone_reason(removal.as_ref(), stale);
        HttpResponse::error(
            410,
            "gone",
            "This link is no longer valid. Nothing changed.",
            json!({"reason": reason.as_str()}),
        )
    };
    match answer {
        Answer::Absent => gone(false),
        Answer::Stale => gone(true),
        Answer::Unavailable(_) => HttpResponse::error(
            503,
            "harness_unavailable",
            "The decision did not reach the agent, and the call is still waiting. Try again.",
            Value::Null,
        ),
        Answer::State(_) => HttpResponse::error(
            503,
            "state_unavailable",
            "The decision could not be recorded, and the call is still waiting. Try again.",
            Value::Null,
        ),
        // Taken, not held, unknown, or under way (this decision's or another
        // one's, which this one did not change): the same answer as
        // approval::resolve's.
        other => match response(other) {
            Ok(answer) => {
                let mut body = json!({"resolved": answer.resolved});
                for (key, flag) in [
                    ("not_held", answer.not_held),
                    ("releasing", answer.releasing),
                    ("unknown", answer.unknown),
                ] {
                    if flag == Some(true) {
                        body[key] = json!(true);
                    }
                }
                HttpResponse::json(200, body)
            }
            Err(_) => HttpResponse::error(
                503,
                "harness_unavailable",
                "The decision did not reach the agent, and the call is still waiting. Try again.",
                Value::Null,
            ),
        },
    }
}

/// "Edit and allow" from a call page: the same edit as `approval::resolve`'s
/// (refused with 400 and the reason), of exactly the revision the page
/// showed.
async fn decide_edit(
    worker: &Worker,
    revision: &Revision,
    kind: RecordKind,
    choice: LinkDecision,
) -> HttpResponse {
    let refused = |message: &str| HttpResponse::error(400, "invalid_payload", message, Value::Null);
    if kind.is_folder() {
        return refused("a folder-access prompt cannot be edited: allow it or deny it");
    }
    let Some(arguments) = choice.arguments else {
        return refused("an edit needs the edited call's arguments");
    };
    let carried = edit(
        worker,
        Edit {
            session_id: revision.session_id().to_string(),
            function_call_id: revision.function_call_id().to_string(),
            expected: Some(revision.pending_at()),
            arguments,
            reason: operator_reason(&choice.reason),
            ttl_ms: choice.ttl_ms,
            via: ReleaseVia::Link,
            caller: Some(Caller::link()),
        },
    )
    .await;
    match carried {
        Ok(answer) if answer == Default::default() => {
            let removal = worker.pending.removal(
                revision.session_id(),
                revision.function_call_id(),
                revision.pending_at(),
            );
            let reason = gone_reason(removal.as_ref(), false);
            HttpResponse::error(
                410,
                "gone",
                "This link is no longer valid. Nothing changed.",
                json!({"reason": reason.as_str()}),
            )
        }
        Ok(answer) => {
            let mut body = json!({"resolved": answer.resolved});
            for (key, flag) in [
                ("not_held", answer.not_held),
                ("releasing", answer.releasing),
                ("unknown", answer.unknown),
            ] {
                if flag == Some(true) {
                    body[key] = json!(true);
                }
            }
            HttpResponse::json(200, body)
        }
        Err(ApprovalError::InvalidPayload(message)) => refused(&message),
        Err(_) => HttpResponse::error(
            503,
            "harness_unavailable",
            "The edit did not reach the agent, and the call is still waiting. Try again.",
            Value::Null,
        ),
    }
}

/// The body of `POST /approvals/b.<token>` ("Allow all").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBatchDecision {
    /// Only `allow`: the page offers nothing else for a batch.
    decision: ResolveDecision,
}

/// `POST /approvals/b.<token>`: "Allow all" — exactly the revisions the
/// page listed, each through the release path as `approval::resolve-batch`
/// does. Answers `{resolved, count, skipped, releasing?}`; 410 when none of
/// them is held any more.
async fn decide_batch(
    worker: &Worker,
    links: &Links,
    token: &str,
    body: serde_json::Map<String, Value>,
) -> HttpResponse {
    match LinkBatchDecision::deserialize(Value::Object(body)) {
        Ok(LinkBatchDecision {
            decision: ResolveDecision::Allow,
        }) => {}
        Ok(_) => {
            return HttpResponse::error(
                400,
                "invalid_payload",
                "an \"Allow all\" link only allows",
                Value::Null,
            )
        }
        Err(err) => {
            return HttpResponse::error(400, "invalid_payload", &err.to_string(), Value::Null)
        }
    }
    let revisions = match links.verify_batch(token) {
        Ok(revisions) => revisions,
        Err(err) => {
            log_refused("POST /approvals/:token (batch)", err);
            return HttpResponse::error(
                403,
                "forbidden",
                "This link is not valid. Nothing changed.",
                Value::Null,
            );
        }
    };
    let out = batch::decide(
        worker,
        &revisions.session_id,
        &revisions.turn_id,
        Ruling::Allow {
            grant_scope: None,
            remember: Remember::Nothing,
        },
        Some(revisions.items),
        (ReleaseVia::Link, Some(Caller::link())),
    )
    .await;
    let count = out.results.iter().filter(|r| r.resolved).count();
    let releasing = out.results.iter().any(|r| r.releasing == Some(true));
    if out.results.is_empty() {
        return HttpResponse::error(
            410,
            "gone",
            "None of these calls is waiting any more. Nothing changed.",
            json!({"skipped": out.skipped.len()}),
        );
    }
    let mut answer = json!({"resolved": count > 0, "count": count, "skipped": out.skipped.len()});
    if releasing {
        answer["releasing"] = json!(true);
    }
    HttpResponse::json(200, answer)
}

/// `GET /approvals`.
fn inbox(worker: &Worker, request: &HttpRequest) -> HttpResponse {
    let links = match links_or_404(worker, false) {
        Ok(links) => links,
        Err(response) => return response,
    };
    let Some(token) = links.inbox() else {
        return HttpResponse::html(404, page::not_found_page());
    };
    if !token.authorizes(request.header("authorization")) {
        tracing::info!(
            route = "GET /approvals",
            "inbox refused: no or wrong bearer token"
        );
        return HttpResponse::html(401, page::unauthorized_page())
            .with_header("WWW-Authenticate", "Bearer realm=\"approvals\"");
    }
    let listed = match list_pending(
        worker,
        &ListPendingRequest {
            limit: Some(INBOX_ROWS),
            ..ListPendingRequest::default()
        },
    ) {
        Ok(listed) => listed,
        Err(_) => return HttpResponse::html(200, page::inbox_page(&[], 0)),
    };
    let arguments = Value::Null;
    let rows: Vec<(Arc<PendingRecord>, String)> = listed
        .pending
        .into_iter()
        .filter_map(|listed| match listed {
            Listed::Held(shown) => Some((shown.record, shown.approval_url.unwrap_or_default())),
            Listed::Unreadable(_) => None,
        })
        .collect();
    let inbox_rows: Vec<InboxRow<'_>> = rows
        .iter()
        .map(|(record, url)| InboxRow {
            call: CallView {
                session_id: &record.session_id,
                function_call_id: &record.function_call_id,
                function_id: &record.function_id,
                kind: record.kind.into(),
                arguments: &arguments,
                arguments_clipped: false,
                session_title: record.session_title.as_deref(),
                pending_at: record.pending_at,
                expires_at: record.expires_at,
                dir: record.grant_request.as_ref().map(|g| g.dir.as_str()),
                releasing: record.releasing,
                review: record.review.as_deref(),
                runs: record.runs.as_deref(),
                protected: record.protected_path.as_deref(),
                suggested_prefix: record.suggested_prefix.as_deref(),
            },
            approval_url: url,
        })
        .collect();
    let more = worker.pending.len().saturating_sub(inbox_rows.len());
    HttpResponse::html(200, page::inbox_page(&inbox_rows, more))
}

/// The `http` bindings of the three routes, made while links are on. Owned
/// by the task that follows the configuration (boot makes the first sync).
#[derive(Default)]
pub(crate) struct LinkRoutes {
    bound: tokio::sync::Mutex<Vec<Trigger>>,
}

impl LinkRoutes {
    /// Follows the configuration: every new snapshot published on `changes`
    /// (subscribed by boot before its own first [`LinkRoutes::sync`], so no
    /// change is missed) syncs the routes. Between changes it waits on the
    /// channel alone and reads the cell like any reader, so a reload never
    /// waits for it. Ends when the connection ends for good.
    pub(crate) async fn follow(
        self,
        worker: Arc<Worker>,
        mut changes: watch::Receiver<Arc<Snapshot>>,
    ) {
        while changes.changed().await.is_ok() {
            if worker.engine.iii().fatal_error().is_some() {
                return;
            }
            self.sync(&worker).await;
        }
    }

    /// Makes the routes' bindings when links are on and removes them when
    /// they are off (boot, then each configuration change through
    /// [`LinkRoutes::follow`]). Without `iii-http` the bindings park until it
    /// appears (WARN).
    pub(crate) async fn sync(&self, worker: &Worker) {
        let on = worker.config.load().links.is_some();
        let mut bound = self.bound.lock().await;
        if on && bound.is_empty() {
            let present = worker.engine.trigger_type_ids().await.unwrap_or_default();
            if !present.iter().any(|t| t == HTTP) {
                tracing::warn!(
                    trigger_type = HTTP,
                    "trigger_type_not_found: approval link routes parked until iii-http registers the type"
                );
            }
            for (method, path, function_id) in ROUTES {
                #[allow(deprecated)] // 0.26 removed register_trigger; the engine still speaks it.
                let made = worker
                    .engine
                    .iii()
                    .register_trigger(RegisterTriggerInput::new(
                        HTTP,
                        function_id,
                        json!({"api_path": path, "http_method": method}),
                    ));
                match made {
                    Ok(trigger) => bound.push(trigger),
                    Err(err) => {
                        tracing::warn!(trigger_type = HTTP, function_id, error = %err, "approval link route not bound")
                    }
                }
            }
            tracing::info!(routes = bound.len(), "approval links on");
        } else if !on && !bound.is_empty() {
            for trigger in bound.drain(..) {
                trigger.unregister();
            }
            tracing::info!("approval links off; routes removed");
        }
    }
}
