//! The pending inbox reads (`architecture/contract.md` § The pending inbox):
//! `approval::list-pending` and `approval::get-pending`. Served from the
//! in-memory index; `get-pending` also reads the held call's whole redacted
//! arguments from their own key (one `state::get`, contract §21.6), which
//! nothing else loads.
//!
//! # Format
//!
//! `list-pending`: `{ session_id?, metadata?, limit? (default 50, clamped 1..500), cursor? }`
//! → `{ pending: Record[], next_cursor? }`, ordered by `(pending_at, session_id, function_call_id)`.
//! `get-pending`: `{ session_id, function_call_id }` → `{ pending: Record, arguments,
//! arguments_clipped, arguments_cap_bytes }` or `null`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::link_token::Links;
use crate::pending::cursor;
use crate::pending::index::ListQuery;
use crate::pending::PendingRecord;
use crate::pending::{ShownRecord, UnreadableRecord, WholeArguments};
use crate::worker::Worker;

/// `approval::list-pending`.
pub(crate) const LIST_ID: &str = "approval::list-pending";
/// `approval::get-pending`.
pub(crate) const GET_ID: &str = "approval::get-pending";

/// Default page size.
const DEFAULT_LIMIT: u64 = 50;
/// Largest page size.
const MAX_LIMIT: u64 = 500;

/// `approval::list-pending` request.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub(crate) struct ListPendingRequest {
    /// Only this session's held calls.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Subset equality against each record's `session_metadata` (`{}` matches all).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// Page size (default 50, clamped to 1..500).
    #[serde(default)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One entry of `list-pending`: a held call, or a stored value that does
/// not parse as one (§21.9).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Listed {
    /// A held call.
    Held(ShownRecord),
    /// A stored value that does not parse as a record (`kind:
    /// "unreadable"`): only a deny removes it.
    Unreadable(UnreadableRecord),
}

/// `approval::list-pending` response.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ListPendingResponse {
    /// Held calls, oldest first; the first page (no cursor) starts with
    /// the stored values that do not parse (`kind: "unreadable"`, at most
    /// `limit` of them, matching `session_id`; none under a non-empty
    /// `metadata` filter).
    pub pending: Vec<Listed>,
    /// Present only when more items remain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `approval::get-pending` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(super) struct GetPendingRequest {
    /// The session.
    pub session_id: String,
    /// The call.
    pub function_call_id: String,
}

/// `approval::get-pending` response (the whole reply is `null` when the call is not held).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum GetPendingResponse {
    /// A held call.
    Held {
        /// The held call.
        pending: ShownRecord,
        /// The call's whole redacted arguments (`pending.arguments_excerpt`
        /// is the bounded excerpt every record carries).
        #[serde(flatten)]
        whole: WholeArguments,
    },
    /// The stored value under the key does not parse as a record (§21.9):
    /// the entry `list-pending` shows, `kind: "unreadable"` (only a deny
    /// removes it). Never `null`: the key is not free.
    Unreadable {
        /// The unreadable value's entry.
        pending: UnreadableRecord,
    },
}

/// Clamps a requested page size.
fn clamp_limit(limit: Option<i64>) -> usize {
    match limit {
        None => DEFAULT_LIMIT as usize,
        Some(n) => n.clamp(1, MAX_LIMIT as i64) as usize,
    }
}

/// Lists held calls.
pub(crate) fn list_pending(
    worker: &Worker,
    request: &ListPendingRequest,
) -> Result<ListPendingResponse, ApprovalError> {
    if let Some(sid) = &request.session_id {
        validate_id("session_id", sid)?;
    }
    let after = match &request.cursor {
        None => None,
        Some(c) => Some(
            cursor::decode(c)
                .map_err(|_| ApprovalError::InvalidPayload("invalid cursor".into()))?,
        ),
    };
    let page = worker.pending.list(&ListQuery {
        session_id: request.session_id.as_deref(),
        metadata: request.metadata.as_ref(),
        after: after.as_ref(),
        limit: clamp_limit(request.limit),
    });
    let links = worker.config.load().links.clone();
    let filtered = request.metadata.as_ref().is_some_and(|m| !m.is_empty());
    let unreadable = match (&after, filtered) {
        (None, false) => worker
            .pending
            .unreadable(request.session_id.as_deref(), clamp_limit(request.limit)),
        _ => Vec::new(),
    };
    Ok(ListPendingResponse {
        pending: unreadable
            .into_iter()
            .map(Listed::Unreadable)
            .chain(
                page.items
                    .into_iter()
                    .map(|record| Listed::Held(shown(links.as_deref(), record))),
            )
            .collect(),
        next_cursor: page.next.as_ref().map(cursor::encode),
    })
}

/// A record with its `approval_url` when links are on.
fn shown(links: Option<&Links>, record: Arc<PendingRecord>) -> ShownRecord {
    ShownRecord {
        approval_url: links.and_then(|links| record.approval_url(links)),
        record,
    }
}

/// Registers the inbox reads.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        LIST_ID,
        "List held calls (redacted), oldest first, with session and metadata filters and an opaque cursor.",
        |w, r: ListPendingRequest| async move { list_pending(&w, &r) },
    );
    register_typed(
        worker,
        GET_ID,
        "One held call by session and call id (or, for a stored value that does not parse, its kind unreadable entry), or null.",
        |w, r: GetPendingRequest| async move {
            validate_id("session_id", &r.session_id)?;
            validate_id("function_call_id", &r.function_call_id)?;
            let links = w.config.load().links.clone();
            let Some(record) = w.pending.get(&r.session_id, &r.function_call_id) else {
                return Ok(w
                    .pending
                    .unreadable_entry(&r.session_id, &r.function_call_id)
                    .map(|pending| GetPendingResponse::Unreadable { pending }));
            };
            let whole = w.pending.arguments(&record).await;
            Ok(Some(GetPendingResponse::Held {
                pending: shown(links.as_deref(), record),
                whole,
            }))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_is_clamped() {
        assert_eq!(clamp_limit(None), 50);
        assert_eq!(clamp_limit(Some(0)), 1);
        assert_eq!(clamp_limit(Some(-5)), 1);
        assert_eq!(clamp_limit(Some(10_000)), 500);
        assert_eq!(clamp_limit(Some(7)), 7);
    }
}
