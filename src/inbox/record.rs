//! `PendingApprovalRecord`: one held call, as stored in the `approval_pending.NN`
//! state scopes and as shown by the inbox (`architecture/contract.md` § The
//! pending inbox). Self-describing: every id is inside the value.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::compact::{JsonText, Metadata};
use crate::engine::{Release, ReleaseAction};
use crate::policy::DenialEnvelope;

/// Which prompt a console renders for a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// "May this call run?"
    #[default]
    Function,
    /// "Allow access to this folder?" (from the grant watch).
    FolderAccess,
}

impl RecordKind {
    /// The wire spelling (also what the logs say).
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Function => "function",
            RecordKind::FolderAccess => "folder_access",
        }
    }
}

/// What a folder-access prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GrantRequest {
    /// The directory to grant (absolute).
    pub dir: String,
    /// The path the call tried to reach, as given.
    pub offending_path: String,
    /// The jail error code (`S215`, `S220`, `C215`, `C218`).
    pub error_code: String,
}

/// One held call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingRecord {
    /// The session the call belongs to.
    pub session_id: String,
    /// The turn that waits for the call.
    pub turn_id: String,
    /// The call's id.
    pub function_call_id: String,
    /// The function the call targets.
    pub function_id: String,
    /// `function` or `folder_access`; a stored record without it reads as `function`.
    #[serde(default)]
    pub kind: RecordKind,
    /// The call's arguments, redacted.
    // Kept as compact JSON text in memory (see `compact`).
    pub arguments_excerpt: JsonText,
    /// When the call was held (ms since the epoch).
    pub pending_at: u64,
    /// Nesting depth of the calling session (0 = top level).
    #[serde(default)]
    pub depth: u64,
    /// The session's title, from the session manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_title: Option<String>,
    /// The session's description, from the session manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_description: Option<String>,
    /// The session's metadata (tenancy filters match against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_metadata: Option<Metadata>,
    /// What a folder-access prompt asks for (folder_access only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_request: Option<Box<GrantRequest>>,
    /// The assistant's text before the call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_excerpt: Option<String>,
}

/// A record as `list-pending` and `get-pending` show it: the record plus
/// its `approval_url` when links are on (`architecture/contract.md`
/// § Approval links and the inbox page). The URL is made when the record is
/// shown, never stored: state holds no credential, and a new secret or base
/// URL changes every link at once.
#[derive(Debug, Clone, Serialize, JsonSchema)]
// The published schema keeps the record's name and description: it is the
// record's, plus one optional field.
#[schemars(rename = "PendingRecord", description = "One held call.")]
pub struct ShownRecord {
    /// The record.
    #[serde(flatten)]
    pub record: Arc<PendingRecord>,
    /// The page where a human decides this call (links on only); a bearer
    /// capability for this one record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
}

/// `(session_id, function_call_id)`: the identity of a record.
pub type RecordKey = (String, String);

/// `(pending_at, session_id, function_call_id)`: the inbox order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SortKey {
    /// When the call was held.
    pub pending_at: u64,
    /// The session id.
    pub session_id: String,
    /// The call id.
    pub function_call_id: String,
}

impl SortKey {
    /// A key from its parts.
    pub fn new(pending_at: u64, session_id: &str, function_call_id: &str) -> SortKey {
        SortKey {
            pending_at,
            session_id: session_id.into(),
            function_call_id: function_call_id.into(),
        }
    }
}

impl PendingRecord {
    /// The record's identity.
    pub fn key(&self) -> RecordKey {
        (self.session_id.clone(), self.function_call_id.clone())
    }

    /// The harness release that carries `action` to this record's call.
    pub(crate) fn release(&self, action: ReleaseAction) -> Release {
        Release {
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            function_call_id: self.function_call_id.clone(),
            action,
        }
    }

    /// A human's refusal of this call: `text` for the model, with a
    /// `denied_by: "user"` envelope carrying the (already redacted) arguments.
    pub(crate) fn user_denial(&self, text: &str) -> ReleaseAction {
        let envelope = DenialEnvelope::by_user(
            &self.function_id,
            text,
            Some(self.arguments_excerpt.to_value()),
        );
        ReleaseAction::deny(text, serde_json::to_value(envelope).unwrap_or(Value::Null))
    }

    /// The record's place in the inbox order.
    pub fn sort_key(&self) -> SortKey {
        SortKey::new(self.pending_at, &self.session_id, &self.function_call_id)
    }

    /// Subset equality of `filter` against `session_metadata`: every key of the
    /// filter is present and equal. `{}` matches every record; a non-empty filter
    /// fails a record without metadata.
    pub fn metadata_matches(&self, filter: &Map<String, Value>) -> bool {
        if filter.is_empty() {
            return true;
        }
        match &self.session_metadata {
            None => false,
            Some(meta) => meta.contains_all(filter),
        }
    }
}
